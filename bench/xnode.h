/* xnode.h - the cross-node cases of schedbench (xnode.c). */
#ifndef SN_BENCH_XNODE_H
#define SN_BENCH_XNODE_H

int sn_bench_xnode_send(int workers);
/* messages of 1 MiB and 32 MiB, against raw PUSH/PULL of the same sizes */
int sn_bench_xnode_big(int workers);
/* breakdown: the latency of each hop too (hop tracing: common/hops.h) */
int sn_bench_xnode_rtt(int workers, int breakdown);
int sn_bench_steal_imbalance(void);
int sn_bench_steal_join(void);
/* n idle processes of 64 B drained from one node to another */
int sn_bench_drain(long n);
/* schedbench's helper modes (`__pull`, `__rep`) for the raw libzmq peer. */
int sn_bench_raw_child(int argc, char **argv);

#endif

/* relay.h - the ZeroMQ relay: carries Sends to processes on other nodes.
 *
 * One I/O thread (a czmq actor) owns every socket: a ROUTER bound to the
 * node's endpoint for inbound traffic, one DEALER per peer for outbound,
 * and a UDP socket on the same host and port for SWIM's probes (udp.c).
 * Workers hand it messages through a lock-free queue plus an eventfd
 * wakeup, so a worker never blocks; a worker whose run sent a few
 * messages sends them itself when the I/O thread sleeps, holding its
 * I/O lock (try-lock only: relay_int.h, route.c).
 */
#ifndef SN_RELAY_H
#define SN_RELAY_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "keys.h"
#include "schednode/schednode.h"
#include "sn_node.h"

typedef struct sn_peer_config {
    uint32_t node;
    const char *endpoint; /* tcp://HOST:PORT */
} sn_peer_config_t;

typedef struct sn_relay_config {
    const char *listen;       /* endpoint to bind, e.g. tcp://127.0.0.1:7001 */
    const char *advertise;    /* where peers reach us; NULL: the bound endpoint */
    const char *cluster;      /* cluster name, must match at join; NULL: "schednode" */
    const char *const *seeds; /* members to join through (none: start a cluster) */
    size_t nseeds;
    const sn_peer_config_t *peers; /* static peers (no join: a fixed cluster) */
    size_t npeers;
    uint64_t first_serial;  /* the scheduler's first PID serial (see main.c) */
    sn_security_t security; /* CurveZMQ on every socket, or (cert NULL) plain TCP */
    int steal;              /* cross-node stealing: 1 on (the default is off: 0) */
    int steal_batch;        /* most processes one steal moves (0: 64) */
    uint64_t incarnation;   /* this run of the node */
    size_t max_frame;       /* bytes; 0 = SN_WIRE_MAX_FRAME (1 MiB): a batch over it goes in Parts */
    size_t max_message;     /* bytes; 0 = SN_MAX_MESSAGE (64 MiB): a bigger send fails with SN_ETOOBIG */
    size_t max_backlog;     /* bytes held for one peer; 0 = SN_MAX_BACKLOG (64 MiB): senders to it wait */
    int backlog_fails;      /* 1: past max_backlog a send fails (SN_EFULL) instead of its sender waiting */
    int heartbeat_ms;       /* the SWIM probe period; 0 = SN_SWIM_PERIOD_MS (swim.h) */
    int down_after_ms;      /* no frame from a peer for this long: down; 0 = 1500 */
    int forget_after_ms;    /* a member down or left this long is forgotten; 0 = SN_FORGET_AFTER_MS */
    /* Called once, on the relay's I/O thread, when this run is put out of
     * its cluster (see sn_relay_out); the program decides how to stop
     * (schednode raises SIGTERM). NULL: only sn_relay_out reports it. */
    void (*on_out)(void *arg);
    void *on_out_arg;
    /* Called once, on the relay's I/O thread, after `drain --then-stop`
     * answered its client: the program leaves the cluster and exits
     * (schednode raises SIGTERM; its shutdown CANCELs what is left). NULL:
     * the node cannot stop itself, and the report says so. */
    void (*on_stop)(void *arg);
    void *on_stop_arg;
} sn_relay_config_t;

typedef struct sn_relay_stats {
    uint64_t frames_in, frames_out;
    uint64_t msgs_in, msgs_out;
    uint64_t bad_frames;            /* undecodable, oversize, wrong version, out of protocol */
    uint64_t bounced;               /* sends returned to their senders with an error */
    uint64_t refused;               /* connections refused in the CurveZMQ handshake */
    uint64_t steals_in, steals_out; /* handovers that brought processes here / took them away */
    uint64_t queued;                /* handed to the relay by workers, not yet taken by its I/O thread */
} sn_relay_stats_t;

/* One peer's counters, for metrics (node/metrics.c). */
typedef struct sn_relay_peer_stats {
    uint32_t node;
    int up;                         /* 1 up, 0 down or left */
    uint64_t msgs_in, msgs_out;     /* messages for processes, from it and to it */
    uint64_t steals_in, steals_out; /* handovers that brought processes from it, gave it some */
    uint64_t rtt_ns;                /* the last direct probe's round trip (0: none answered yet) */
} sn_relay_peer_stats_t;

typedef struct sn_relay sn_relay_t;

#define SN_MAX_MESSAGE ((size_t)64 << 20)
/* The largest answer a client takes: a result of SN_MAX_MESSAGE and room
 * for the rest of the reply. */
#define SN_CLIENT_MAX_ANSWER (SN_MAX_MESSAGE + ((size_t)1 << 20))
#define SN_MAX_BACKLOG ((size_t)64 << 20)
#define SN_FORGET_AFTER_MS 300000 /* 5 minutes */

/* Starts the relay for sched and installs it as sched's relay hook. On
 * failure returns NULL and writes a one-line reason to err. Caller owns the
 * return value. */
sn_relay_t *sn_relay_new(sn_sched_t *sched, const sn_relay_config_t *config, char *err, size_t errlen);
/* Stops the I/O thread and frees the relay; sets *self_p to NULL. Call
 * after the scheduler has shut down (no more sends). */
void sn_relay_destroy(sn_relay_t **self_p);
/* Waits until the node is a member of its cluster: at once without seeds,
 * else until a seed welcomes it. Returns 0, SN_ETIMEDOUT (no seed answered)
 * SN_EEXIST (a seed said no: the id is taken) or SN_EREFUSED (a seed said
 * no, for another reason); err gets the reason. With sigs (blocked in
 * the caller), one of them arriving ends the wait: SN_ECANCELED, *sig
 * set. */
int sn_relay_join_wait(sn_relay_t *relay, int timeout_ms, const sigset_t *sigs, int *sig, char *err, size_t errlen);
/* Ends every handover in progress (processes offered away run here again,
 * copies not yet committed are dropped) and stops stealing. Call before
 * the scheduler shuts down. */
void sn_relay_stop_stealing(sn_relay_t *relay);
/* Graceful leave: sends what is queued (up to a second for the peers to
 * confirm it), then tells every member this node is leaving, so they do not
 * report it as failed. Call after the scheduler has shut down. */
void sn_relay_leave(sn_relay_t *relay);
/* Whether this run of the node was put out of its cluster: another run of
 * it (the same node id) joined after this one was declared down, so the
 * members take this one's frames no more. The relay then calls the
 * config's on_out (schednode shuts down with exit status 3) and this
 * returns 1 with the reason in why. */
int sn_relay_out(sn_relay_t *relay, char *why, size_t len);
/* What the relay logs (through czmq's zsys): 0 errors, 1 warnings, 2 info
 * (the default), 3 debug. The same as log.h's sn__log_set_level: one level
 * for the process. */
void sn_relay_set_log_level(int level);
/* Snapshot of the counters. */
void sn_relay_stats(sn_relay_t *relay, sn_relay_stats_t *out);
/* Up to max peers' counters into out; returns how many peers there are
 * (any thread: relaxed reads of counters the I/O thread writes). */
size_t sn_relay_peer_stats(sn_relay_t *relay, sn_relay_peer_stats_t *out, size_t max);
/* The cross-node delivery histogram (hist.h's buckets): for each message
 * from a process on another node, the time from its sender handing it to
 * that node's relay until this node's relay handed it to the scheduler.
 * Adds into counts[SN_HIST_BOUNDS + 1] and *sum_ns (any thread). Measured
 * with the two nodes' realtime clocks: between hosts it includes their
 * clock offset. */
void sn_relay_delivery_hist(sn_relay_t *relay, uint64_t *counts, uint64_t *sum_ns);
/* The endpoint actually bound (with the real port if 0 was asked). */
const char *sn_relay_endpoint(sn_relay_t *relay);

/* For tests only: when set, node `at` drops every batch from node `from`
 * numbered `seq` for which it returns true, as a frame lost on the way
 * (relay/inbound.c: in_order). Set it before the relays start. */
typedef bool (*sn__relay_drop_fn)(uint32_t at, uint32_t from, uint64_t seq);
extern sn__relay_drop_fn sn__relay_test_drop;
/* For tests only: when set, node `at` counts each send from node `from`
 * as having passed through that many more nodes (relay/inbound.c). */
typedef uint32_t (*sn__relay_hops_fn)(uint32_t at, uint32_t from);
extern sn__relay_hops_fn sn__relay_test_hops;

#endif

/* demo.h - the demo workload that `schednode demo` runs on one node. */
#ifndef SN_DEMO_H
#define SN_DEMO_H

#include "schednode/schednode.h"

/* Runs the demo on the types of the demo plugin (schednode-demo.so,
 * loaded by the caller), printing what happened to stdout. Returns 0 when
 * every phase produced its expected result. */
int sn_demo_run(sn_sched_t *sched);

#endif

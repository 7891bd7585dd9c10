/* demo.h - the demo workload that `schednode demo` runs on one node. */
#ifndef SN_DEMO_H
#define SN_DEMO_H

#include "schednode/schednode.h"

/* Registers the demo process types (tree, ring, sleeper, oops, xsource,
 * xsink, xpong). */
int sn_demo_register(sn_sched_t *sched);
/* Runs the demo, printing what happened to stdout. Returns 0 when every
 * phase produced its expected result. */
int sn_demo_run(sn_sched_t *sched);

#endif

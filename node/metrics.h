/* metrics.h - a node's metrics in Prometheus's text exposition format
 * (version 0.0.4), as GET /metrics serves them (node/http.c).
 */
#ifndef SN_METRICS_H
#define SN_METRICS_H

#include <stddef.h>

#include "relay.h"

/* This node's metrics, read from sched and relay (NULL: a node that does
 * not listen) without a lock any worker or the relay's I/O thread takes:
 * relaxed loads of their counters only. Any thread. Returns the text
 * (NUL-terminated, its length in *len) or NULL if out of memory. Caller
 * owns the return value (free). */
char *sn_metrics_text(sn_sched_t *sched, sn_relay_t *relay, size_t *len);

#endif

/* http.h - the node's HTTP server (libmicrohttpd): Prometheus metrics at
 * /metrics (--metrics), the dashboard page at / and the JSON it reads at
 * /api/status and /api/procs (--dashboard; it serves /metrics too).
 */
#ifndef SN_HTTP_H
#define SN_HTTP_H

#include <stddef.h>

#include "relay.h"

enum { SN_HTTP_METRICS = 1, SN_HTTP_DASHBOARD = 2 };

typedef struct sn_http_config {
    const char *endpoint; /* tcp://HOST:PORT to listen on (HOST may be '*', PORT '*': any free one) */
    int serve;            /* SN_HTTP_* bits */
    sn_sched_t *sched;
    sn_relay_t *relay;             /* NULL: a node that does not listen (no cluster to show) */
    const sn_security_t *security; /* how the dashboard asks its own node for `status` */
} sn_http_config_t;

typedef struct sn_http sn_http_t;

/* Starts serving (libmicrohttpd's own threads: see http.c). The config's
 * pointers must outlive the server. On failure returns NULL with a
 * one-line reason in err. Caller owns the return value. */
sn_http_t *sn_http_new(const sn_http_config_t *config, char *err, size_t errlen);
/* Stops the server (waits for its thread) and frees it; sets *self_p to
 * NULL. Call before the scheduler and the relay go. */
void sn_http_destroy(sn_http_t **self_p);
/* The port actually bound. */
int sn_http_port(const sn_http_t *self);

#endif

/* http.c - the node's HTTP server: GET /metrics (Prometheus text), and for
 * the dashboard GET / (the page, built into the program), /api/status and
 * /api/procs (dashboard.c's JSON).
 *
 * Threads: libmicrohttpd runs them, one that accepts per server and one per
 * connection (at most CONNECTIONS_MAX), so a dashboard request that waits
 * for the cluster never holds up a scrape. Handlers share nothing with
 * each other (each request builds its own answer; the server's config is
 * immutable), and what they read is made to be read from any thread: the
 * scheduler's and the relay's counters are relaxed atomic loads
 * (metrics.c), the cluster's rows come from a client request to the node's
 * own relay (its I/O thread answers; the handler waits at most 2 s for it,
 * and 500 ms for each other member's flows), and the process table is
 * inspect.c's snapshot. No lock a worker or the I/O thread holds on its
 * hot path is taken, but for the snapshot's PID-table shard locks, one
 * shard at a time, for /api/procs only.
 */
#include "http.h"

#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dashboard.h"
#include "metrics.h"

/* The page (node/dashboard.html), embedded by CMake (cmake/embed.cmake). */
extern const unsigned char sn_dashboard_html[];
extern const size_t sn_dashboard_html_len;

/* Rows /api/procs returns at most (the page searches them). */
#define PROCS_MAX 2000
/* Connections served at once (a thread each); more wait to be accepted. */
#define CONNECTIONS_MAX 32

struct sn_http {
    struct MHD_Daemon *daemon;
    sn_http_config_t cfg;
    int port;
};

/* Answers with body (taken: freed by libmicrohttpd, or here if it cannot). */
static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    char *s = strdup(msg);
    return s ? answer(c, status, "text/plain; charset=utf-8", s, strlen(s)) : MHD_NO;
}

static enum MHD_Result page(struct MHD_Connection *c)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sn_dashboard_html_len, (void *)sn_dashboard_html, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result route(sn_http_t *h, struct MHD_Connection *c, const char *url)
{
    bool metrics = h->cfg.serve & (SN_HTTP_METRICS | SN_HTTP_DASHBOARD), dash = h->cfg.serve & SN_HTTP_DASHBOARD;
    size_t len;
    if (metrics && !strcmp(url, "/metrics")) {
        char *body = sn_metrics_text(h->cfg.sched, h->cfg.relay, &len);
        return body ? answer(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len)
                    : text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    if (dash && (!strcmp(url, "/") || !strcmp(url, "/index.html")))
        return page(c);
    if (dash && !strcmp(url, "/api/status")) {
        char err[512], msg[600];
        char *body = sn_dashboard_status(h->cfg.sched, h->cfg.relay, h->cfg.security, err, sizeof err);
        if (!body) {
            snprintf(msg, sizeof msg, "the node did not answer: %s\n", err);
            return text(c, MHD_HTTP_SERVICE_UNAVAILABLE, msg);
        }
        return answer(c, MHD_HTTP_OK, "application/json", body, strlen(body));
    }
    if (dash && !strcmp(url, "/api/procs")) {
        char *body = sn_dashboard_procs(h->cfg.sched, h->cfg.relay, h->cfg.security, PROCS_MAX);
        return body ? answer(c, MHD_HTTP_OK, "application/json", body, strlen(body))
                    : text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    return text(c, MHD_HTTP_NOT_FOUND,
                dash ? "not found: try /, /metrics, /api/status or /api/procs\n"
                     : "not found: this node serves /metrics\n");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_len, void **state)
{
    (void)version;
    (void)upload;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
    if (*upload_len) /* (a GET with a body: ignored) */
        *upload_len = 0;
    (void)state;
    return route(cls, c, url);
}

/* tcp://HOST:PORT (config.c checked its form) as a socket address. */
static int resolve(const char *endpoint, struct addrinfo **ai, char *err, size_t errlen)
{
    const char *hp = endpoint + 6; /* after tcp:// */
    const char *colon = strrchr(hp, ':');
    char host[256];
    if (strncmp(endpoint, "tcp://", 6) != 0 || !colon || (size_t)(colon - hp) >= sizeof host) {
        snprintf(err, errlen, "'%s' is not tcp://HOST:PORT", endpoint);
        return -1;
    }
    memcpy(host, hp, (size_t)(colon - hp));
    host[colon - hp] = '\0';
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') { /* [IPv6] */
        h[strlen(h) - 1] = '\0';
        h++;
    }
    const char *port = !strcmp(colon + 1, "*") ? "0" : colon + 1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    int rc = getaddrinfo(!strcmp(h, "*") ? NULL : h, port, &hints, ai);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", endpoint, gai_strerror(rc));
        return -1;
    }
    return 0;
}

sn_http_t *sn_http_new(const sn_http_config_t *config, char *err, size_t errlen)
{
    struct addrinfo *ai = NULL;
    if (resolve(config->endpoint, &ai, err, errlen) != 0)
        return NULL;
    sn_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->cfg = *config;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONNECTIONS_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
                                 (unsigned)10, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->daemon) {
        snprintf(err, errlen, "cannot serve HTTP on %s (address in use, or not this host's?)", config->endpoint);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : 0;
    return h;
}

void sn_http_destroy(sn_http_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    MHD_stop_daemon((*self_p)->daemon);
    free(*self_p);
    *self_p = NULL;
}

int sn_http_port(const sn_http_t *self)
{
    return self->port;
}

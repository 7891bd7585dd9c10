/* config.h - a node's configuration file: ZPL (czmq zconfig), described in
 * cluster-config/README.md. Loading checks every key and value; the first
 * problem comes back as one line naming the file, the line and the key.
 */
#ifndef SN_CONFIG_H
#define SN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct sn_node_config {
    /* 0 / NULL: not set in the file */
    uint32_t node_id;
    int workers;
    int shutdown_ms;  /* -1: not set */
    const char *name; /* shown in every log line */
    const char *listen, *advertise, *cluster;
    const char *metrics, *dashboard; /* HTTP endpoints (node/http.c) */
    int log_level;                   /* -1: not set, else an SN__LOG_* level (log.h) */
    int log_format;                  /* -1: not set, else SN__LOG_TEXT or _JSON (log.h) */
    const char *cert, *authorized;   /* paths made absolute against the file's directory */
    int insecure;                    /* -1: not set, else 0 or 1 */
    int heartbeat_ms, down_after_ms, join_timeout_ms, forget_after_ms;
    long long max_frame, max_message, max_backlog;
    const char *backlog_full; /* NULL: not set, else "wait" or "fail" */
    int steal;                /* -1: not set, else 0 or 1 */
    int steal_batch;          /* 0: not set */
    const char **seeds;
    size_t nseeds;
    const char **services; /* "NAME TYPE METHOD [ARG]": added when the node is up (services.c) */
    size_t nservices;
    const char **plugins; /* absolute, like cert */
    size_t nplugins;
    void *own; /* what the strings live in */
} sn_node_config_t;

/* Loads path into *out. Returns 0, or -1 with err holding
 * "FILE:LINE: KEY: what is wrong". Free with sn_config_free either way. */
int sn_config_load(const char *path, sn_node_config_t *out, char *err, size_t errlen);
void sn_config_free(sn_node_config_t *c);

/* Checks an endpoint given in a file or a flag: tcp://HOST:PORT, HOST a
 * name, an IPv4 address or an IPv6 one in brackets, PORT 1..65535. With
 * SN_ENDPOINT_BIND (an address to listen on) HOST may be '*' (every
 * interface) and PORT '*' (any free port). Returns 0, or -1 with why
 * holding "'EP' is not tcp://HOST:PORT: what is wrong". */
#define SN_ENDPOINT_BIND 1
int sn_config_endpoint(const char *ep, int flags, char *why, size_t whylen);

#endif

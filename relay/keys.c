/* keys.c - CurveZMQ certificates (see keys.h): made by keygen, loaded
 * and checked when a relay or a client starts (the calling thread), and
 * a joining node's key checked against the directory (the I/O thread),
 * directly or through a cache of it (sn_keys_cache_t: one thread). The
 * rest has no state of its own: any thread. */
#include "keys.h"

#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int sn_keys_generate(const char *dir, const char *name, const char *endpoint, uint32_t node, char public_key[41],
                     char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.cert", dir, name);
    if (strchr(name, '/') || !*name) {
        snprintf(err, errlen, "keygen: the name '%s' must be a plain file name", name);
        return -1;
    }
    if (node && !endpoint) {
        snprintf(err, errlen,
                 "keygen: a node's certificate names where it listens as well as its id: give "
                 "--endpoint tcp://HOST:PORT with --node-id");
        return -1;
    }
    if (zsys_file_exists(path)) {
        snprintf(err, errlen, "keygen: %s exists; remove it first or choose another --name", path);
        return -1;
    }
    if (zsys_dir_create("%s", dir) != 0) {
        snprintf(err, errlen, "keygen: cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    zcert_t *cert = zcert_new();
    if (!cert) {
        snprintf(err, errlen, "keygen: cannot make a key pair");
        return -1;
    }
    zcert_set_meta(cert, "name", "%s", name);
    /* what the key may be: a node (it names its endpoint, and its id if
     * given: members admit the key as that node only) or a client */
    zcert_set_meta(cert, "role", "%s", endpoint ? "node" : "client");
    if (endpoint)
        zcert_set_meta(cert, "endpoint", "%s", endpoint);
    if (node)
        zcert_set_meta(cert, "node-id", "%" PRIu32, node);
    zcert_set_meta(cert, "created-by", "schednode keygen");
    /* the secret file is written with the umask: narrow it first */
    mode_t old = umask(077);
    int rc = zcert_save(cert, path);
    umask(old);
    if (rc == 0)
        chmod(path, 0644); /* the public one is meant to be shared */
    else
        snprintf(err, errlen, "keygen: cannot write %s: %s", path, strerror(errno));
    snprintf(public_key, 41, "%s", zcert_public_txt(cert));
    zcert_destroy(&cert);
    return rc == 0 ? 0 : -1;
}

zcert_t *sn_keys_load(const char *path, char *err, size_t errlen)
{
    /* zcert_load reads PATH and, for the secret key, PATH_secret; given
     * the secret file itself it finds both keys in it */
    zcert_t *cert = zsys_file_exists(path) ? zcert_load(path) : NULL;
    if (!cert) {
        snprintf(err, errlen, "cannot load the certificate %s (make one with `schednode keygen DIR`)", path);
        return NULL;
    }
    static const char zero[41] = "0000000000000000000000000000000000000000";
    if (!strcmp(zcert_secret_txt(cert), zero)) {
        snprintf(err, errlen,
                 "%s has no secret key: give this node's own NAME.cert (with NAME.cert_secret next to "
                 "it), not another node's public certificate",
                 path);
        zcert_destroy(&cert);
        return NULL;
    }
    return cert;
}

/* The first certificate (*.cert) in dir that `match` accepts, loaded, or
 * NULL (also when dir cannot be read). match gets each certificate with
 * its file's name. */
static zcert_t *find_cert(const char *dir, bool (*match)(zcert_t *cert, const char *file, const void *arg),
                          const void *arg)
{
    zdir_t *d = zdir_new(dir, NULL);
    if (!d)
        return NULL;
    zfile_t **files = zdir_flatten(d);
    zcert_t *found = NULL;
    for (size_t i = 0; files && files[i] && !found; i++) {
        const char *name = zfile_filename(files[i], NULL);
        size_t n = strlen(name);
        if (n < 5 || strcmp(name + n - 5, ".cert") != 0)
            continue;
        zcert_t *cert = zcert_load(name);
        const char *base = strrchr(name, '/');
        if (cert && match(cert, base ? base + 1 : name, arg))
            found = cert;
        else
            zcert_destroy(&cert);
    }
    zdir_flatten_free(&files);
    zdir_destroy(&d);
    return found;
}

static bool says_endpoint(zcert_t *cert, const char *file, const void *endpoint)
{
    (void)file;
    const char *ep = zcert_meta(cert, "endpoint");
    return ep && !strcmp(ep, endpoint);
}

/* A node's certificate: it names an endpoint and is not marked a client's
 * (keygen without --endpoint makes a client's: no endpoint, role client). */
static bool names_a_node(zcert_t *cert)
{
    const char *role = zcert_meta(cert, "role");
    return zcert_meta(cert, "endpoint") && !(role && !strcmp(role, "client"));
}

static bool node_with_key(zcert_t *cert, const char *file, const void *key)
{
    (void)file;
    return !strcmp(zcert_public_txt(cert), key) && names_a_node(cert);
}

int sn_keys_server_key(const char *dir, const char *endpoint, char out[41], char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "cannot read the authorized-keys directory %s", dir);
        return -1;
    }
    zcert_t *cert = find_cert(dir, says_endpoint, endpoint);
    if (!cert) {
        snprintf(err, errlen,
                 "no certificate in %s says it is the node at %s (make that node's key with "
                 "`schednode keygen DIR --endpoint %s` and copy its .cert file there)",
                 dir, endpoint, endpoint);
        return -1;
    }
    snprintf(out, 41, "%s", zcert_public_txt(cert));
    zcert_destroy(&cert);
    return 0;
}

bool sn_keys_is_node(const char *dir, const char *key)
{
    zcert_t *cert = find_cert(dir, node_with_key, key);
    bool node = cert != NULL;
    zcert_destroy(&cert);
    return node;
}

/* sn_keys_names_node's question and, from the first certificate with the
 * key that does not name that node, why not */
typedef struct {
    const char *key, *endpoint;
    uint32_t node;
    char *why; /* the first reason found goes here */
    size_t whylen;
    bool *seen; /* a certificate with the key was found */
} claim_t;

static bool names_claimed_node(zcert_t *cert, const char *file, const void *arg)
{
    const claim_t *c = arg;
    if (strcmp(zcert_public_txt(cert), c->key) != 0)
        return false;
    const char *ep = zcert_meta(cert, "endpoint"), *id = zcert_meta(cert, "node-id");
    char why[512] = "";
    char *end = NULL;
    unsigned long long n = id ? strtoull(id, &end, 10) : 0;
    if (!names_a_node(cert))
        snprintf(why, sizeof why,
                 "its certificate %s names no node (a client's key cannot join or speak as a node; "
                 "make the node's own with `schednode keygen DIR --endpoint %s --node-id %" PRIu32 "`)",
                 file, c->endpoint ? c->endpoint : "tcp://HOST:PORT", c->node);
    else if (c->endpoint && strcmp(ep, c->endpoint) != 0)
        snprintf(why, sizeof why,
                 "its certificate %s names the node at %s, but it says it is at %s (a key is bound "
                 "to the endpoint in its certificate)",
                 file, ep, c->endpoint);
    else if (id && (!*id || *end || n == 0 || n > UINT32_MAX))
        snprintf(why, sizeof why, "its certificate %s has a bad node-id '%s'", file, id);
    else if (id && n != c->node)
        snprintf(why, sizeof why,
                 "its certificate %s names node %llu, but it says it is node %" PRIu32
                 " (a key is bound to the node id in its certificate)",
                 file, n, c->node);
    if (!why[0])
        return true;
    if (!*c->seen)
        snprintf(c->why, c->whylen, "%s", why);
    *c->seen = true;
    return false;
}

int sn_keys_names_node(const char *dir, const char *key, uint32_t node, const char *endpoint, char *why, size_t whylen)
{
    bool seen = false;
    claim_t c = {.key = key, .endpoint = endpoint, .node = node, .why = why, .whylen = whylen, .seen = &seen};
    zcert_t *cert = find_cert(dir, names_claimed_node, &c);
    if (cert) {
        zcert_destroy(&cert);
        return 0;
    }
    if (!seen)
        snprintf(why, whylen, "no certificate in %s has its key", dir);
    return -1;
}

/* ---- the cache of the directory */

#define CACHE_FRESH_NS 1000000000u /* reread when asked this long after the last read */

struct sn_keys_cache {
    char dir[1024];
    zcert_t **certs; /* every *.cert in dir at the last read, */
    char **files;    /* with its file's name */
    size_t n;
    uint64_t read_ns;      /* when (0: never) */
    struct timespec mtime; /* the directory's modification time then */
    uint64_t reads;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cache_clear(sn_keys_cache_t *c)
{
    for (size_t i = 0; i < c->n; i++) {
        zcert_destroy(&c->certs[i]);
        free(c->files[i]);
    }
    free(c->certs);
    free(c->files);
    c->certs = NULL;
    c->files = NULL;
    c->n = 0;
}

/* Reads the directory into c (what cannot be read or allocated is left
 * out: a key missing is a refusal, never a crash). */
static void cache_read(sn_keys_cache_t *c, uint64_t now)
{
    cache_clear(c);
    c->read_ns = now;
    c->reads++;
    struct stat st;
    c->mtime = stat(c->dir, &st) == 0 ? st.st_mtim : (struct timespec){0, 0};
    zdir_t *d = zdir_new(c->dir, NULL);
    zfile_t **files = d ? zdir_flatten(d) : NULL;
    size_t n = 0;
    while (files && files[n])
        n++;
    c->certs = calloc(n ? n : 1, sizeof *c->certs);
    c->files = calloc(n ? n : 1, sizeof *c->files);
    for (size_t i = 0; c->certs && c->files && i < n; i++) {
        const char *name = zfile_filename(files[i], NULL);
        size_t len = strlen(name);
        if (len < 5 || strcmp(name + len - 5, ".cert") != 0)
            continue;
        const char *base = strrchr(name, '/');
        zcert_t *cert = zcert_load(name);
        char *file = strdup(base ? base + 1 : name);
        if (!cert || !file) {
            zcert_destroy(&cert);
            free(file);
            continue;
        }
        c->certs[c->n] = cert;
        c->files[c->n++] = file;
    }
    zdir_flatten_free(&files);
    zdir_destroy(&d);
}

/* The first cached certificate that match accepts (NULL: none), after a
 * reread if the cache is due one (see keys.h) for a question about key. */
static zcert_t *cache_find(sn_keys_cache_t *c, const char *key,
                           bool (*match)(zcert_t *cert, const char *file, const void *arg), const void *arg)
{
    uint64_t now = mono_ns();
    bool due = !c->read_ns || now - c->read_ns >= CACHE_FRESH_NS;
    if (!due) {
        size_t i = 0;
        while (i < c->n && strcmp(zcert_public_txt(c->certs[i]), key) != 0)
            i++;
        struct stat st;
        due = i == c->n && stat(c->dir, &st) == 0 &&
              (st.st_mtim.tv_sec != c->mtime.tv_sec || st.st_mtim.tv_nsec != c->mtime.tv_nsec);
    }
    if (due)
        cache_read(c, now);
    for (size_t i = 0; i < c->n; i++)
        if (match(c->certs[i], c->files[i], arg))
            return c->certs[i];
    return NULL;
}

sn_keys_cache_t *sn_keys_cache_new(const char *dir)
{
    sn_keys_cache_t *c = calloc(1, sizeof *c);
    if (c)
        snprintf(c->dir, sizeof c->dir, "%s", dir);
    return c;
}

void sn_keys_cache_destroy(sn_keys_cache_t **self_p)
{
    if (!*self_p)
        return;
    cache_clear(*self_p);
    free(*self_p);
    *self_p = NULL;
}

bool sn_keys_cache_is_node(sn_keys_cache_t *self, const char *key)
{
    return self && cache_find(self, key, node_with_key, key) != NULL;
}

int sn_keys_cache_names_node(sn_keys_cache_t *self, const char *key, uint32_t node, const char *endpoint, char *why,
                             size_t whylen)
{
    if (!self) {
        snprintf(why, whylen, "no authorized-keys directory to look the key up in");
        return -1;
    }
    bool seen = false;
    claim_t c = {.key = key, .endpoint = endpoint, .node = node, .why = why, .whylen = whylen, .seen = &seen};
    if (cache_find(self, key, names_claimed_node, &c))
        return 0;
    if (!seen)
        snprintf(why, whylen, "no certificate in %s has its key", self->dir);
    return -1;
}

uint64_t sn_keys_cache_reads(const sn_keys_cache_t *self)
{
    return self->reads;
}

int sn_keys_check(const sn_security_t *sec, char *err, size_t errlen)
{
    if (!sec->cert != !sec->authorized) {
        snprintf(err, errlen,
                 "--cert and --authorized-keys go together: the certificate says who this is, the "
                 "directory who may talk to it");
        return -1;
    }
    if (!sec->cert)
        return 0;
    zcert_t *cert = sn_keys_load(sec->cert, err, errlen);
    if (!cert)
        return -1;
    zcert_destroy(&cert);
    struct stat st;
    if (stat(sec->authorized, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--authorized-keys: %s is not a directory", sec->authorized);
        return -1;
    }
    return 0;
}

void sn_keys_client(zsock_t *sock, zcert_t *cert, const char *server_key)
{
    zcert_apply(cert, sock);
    zsock_set_curve_serverkey(sock, server_key);
}

static zsock_t *monitor_events(zsock_t *sock, int events)
{
    static _Atomic unsigned seq;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://sn-monitor-%d-%u", getpid(), atomic_fetch_add(&seq, 1));
    if (zmq_socket_monitor(zsock_resolve(sock), ep, events) != 0)
        return NULL;
    zsock_t *mon = zsock_new(ZMQ_PAIR);
    if (mon && zsock_connect(mon, "%s", ep) != 0)
        zsock_destroy(&mon);
    return mon;
}

zsock_t *sn_keys_monitor(zsock_t *sock, bool closes)
{
    return monitor_events(sock, ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                    ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                    (closes ? ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED : 0));
}

zsock_t *sn_keys_monitor_closes(zsock_t *sock)
{
    return monitor_events(sock, ZMQ_EVENT_DISCONNECTED);
}

void sn_keys_unmonitor(zsock_t *sock, zsock_t **monitor)
{
    if (!*monitor)
        return;
    if (sock)
        zmq_socket_monitor(zsock_resolve(sock), NULL, 0);
    zsock_destroy(monitor);
}

int sn_keys_failure(zsock_t *monitor, bool secure, char *why, size_t whylen, char *ep, size_t eplen)
{
    zframe_t *head = zframe_recv(monitor);
    char *where = zstr_recv(monitor);
    int kind = 0;
    if (head && zframe_size(head) == 6) {
        uint16_t event;
        uint32_t value;
        memcpy(&event, zframe_data(head), 2);
        memcpy(&value, zframe_data(head) + 2, 4);
        if (event == ZMQ_EVENT_DISCONNECTED)
            kind = SN_KEYS_CLOSED;
        else if (event == ZMQ_EVENT_CONNECT_RETRIED)
            kind = SN_KEYS_UNREACHABLE;
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            kind = SN_KEYS_NOT_AUTHORIZED;
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            /* a plain side cannot finish any CurveZMQ handshake: whatever
             * libzmq reports, the two sides disagree on security */
            kind = !secure || value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH ? SN_KEYS_MISMATCH : SN_KEYS_FAILED;
    }
    static const char *reasons[] = {
        "",
        "key not authorized",
        "security mismatch (CurveZMQ on one side only: an --insecure node or a client without keys?)",
        "CurveZMQ handshake failed (a wrong server key?)",
        "connection closed",
        "connection refused (no node listens there, or it cannot be reached)"};
    snprintf(why, whylen, "%s", reasons[kind]);
    snprintf(ep, eplen, "%s", where ? where : "?");
    zstr_free(&where);
    zframe_destroy(&head);
    return kind;
}

/* ---- the ZAP handler */

struct sn_keys_zap {
    zactor_t *actor;
    _Atomic int failed; /* the actor could not bind: set before its first signal */
    char dir[1024];
    /* the last refusal: written by the actor, read by the I/O thread */
    pthread_mutex_t mu;
    char last[128];
};

/* One ZAP request (version, request id, domain, address, identity,
 * mechanism, credentials) answered: 200 for a CURVE key with a
 * certificate in the directory, 400 for anything else. */
static void zap_answer(sn_keys_zap_t *z, zcertstore_t *store, zsock_t *handler)
{
    zmsg_t *req = zmsg_recv(handler);
    if (!req)
        return;
    char *version = zmsg_popstr(req);
    zframe_t *id = zmsg_pop(req);
    char *domain = zmsg_popstr(req), *address = zmsg_popstr(req), *identity = zmsg_popstr(req);
    char *mechanism = zmsg_popstr(req);
    zframe_t *cred = zmsg_pop(req);
    char key[41] = "";
    bool ok = false;
    if (version && !strcmp(version, "1.0") && mechanism && !strcmp(mechanism, "CURVE") && cred &&
        zframe_size(cred) == 32 && zmq_z85_encode(key, zframe_data(cred), 32))
        ok = zcertstore_lookup(store, key) != NULL;
    if (!ok) {
        pthread_mutex_lock(&z->mu);
        snprintf(z->last, sizeof z->last, "%s (key %s)", address && *address ? address : "?", *key ? key : "none");
        pthread_mutex_unlock(&z->mu);
    }
    zmsg_t *rep = zmsg_new();
    zmsg_addstr(rep, "1.0");
    if (id)
        zmsg_append(rep, &id);
    else
        zmsg_addstr(rep, "");
    zmsg_addstr(rep, ok ? "200" : "400");
    zmsg_addstr(rep, ok ? "OK" : "key not authorized");
    zmsg_addstr(rep, ok ? key : ""); /* user id: the relay reads the sender's key from it ("User-Id") */
    zmsg_addmem(rep, "", 0);         /* metadata */
    zmsg_send(&rep, handler);
    zframe_destroy(&cred);
    zframe_destroy(&id);
    zstr_free(&version);
    zstr_free(&domain);
    zstr_free(&address);
    zstr_free(&identity);
    zstr_free(&mechanism);
    zmsg_destroy(&req);
}

static void zap_actor(zsock_t *pipe, void *arg)
{
    sn_keys_zap_t *z = arg;
    zcertstore_t *store = zcertstore_new(z->dir);
    zsock_t *handler = zsock_new(ZMQ_REP);
    zpoller_t *poller = handler ? zpoller_new(pipe, handler, NULL) : NULL;
    if (!store || !poller || zsock_bind(handler, "inproc://zeromq.zap.01") != 0) {
        atomic_store(&z->failed, 1);
        zsock_signal(pipe, 1);
        goto out;
    }
    zsock_signal(pipe, 0);
    while (true) {
        zsock_t *which = zpoller_wait(poller, -1);
        if (which == handler) {
            zap_answer(z, store, handler);
        } else if (which == pipe) {
            char *cmd = zstr_recv(pipe);
            bool term = !cmd || !strcmp(cmd, "$TERM");
            zstr_free(&cmd);
            if (term)
                break;
        } else if (zpoller_terminated(poller)) {
            break;
        }
    }
out:
    zpoller_destroy(&poller);
    zsock_destroy(&handler);
    zcertstore_destroy(&store);
}

sn_keys_zap_t *sn_keys_zap_new(const char *authorized_dir)
{
    sn_keys_zap_t *z = calloc(1, sizeof *z);
    if (!z)
        return NULL;
    snprintf(z->dir, sizeof z->dir, "%s", authorized_dir);
    pthread_mutex_init(&z->mu, NULL);
    z->actor = zactor_new(zap_actor, z);
    if (!z->actor || atomic_load(&z->failed)) { /* (zactor_new waited for the first signal) */
        sn_keys_zap_destroy(&z);
        return NULL;
    }
    return z;
}

void sn_keys_zap_destroy(sn_keys_zap_t **self_p)
{
    sn_keys_zap_t *z = *self_p;
    if (!z)
        return;
    zactor_destroy(&z->actor);
    pthread_mutex_destroy(&z->mu);
    free(z);
    *self_p = NULL;
}

void sn_keys_zap_last_refused(sn_keys_zap_t *self, char *out, size_t len)
{
    pthread_mutex_lock(&self->mu);
    snprintf(out, len, "%s", self->last);
    pthread_mutex_unlock(&self->mu);
}

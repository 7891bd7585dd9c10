/* keys.h - CurveZMQ certificates (czmq zcert): generating a node's,
 * loading it, finding a server's public key by its endpoint among the
 * public certificates of an authorized-keys directory, and checking that a
 * key is the one of the node it claims to be.
 *
 * A certificate is two files: NAME.cert (public key, shareable) and
 * NAME.cert_secret (both keys, mode 0600). The authorized-keys directory
 * holds the public files of every node and client allowed in. A node's
 * certificate (`keygen --endpoint EP [-n ID]`, metadata role = "node")
 * names its node: where it listens, which is how a joining node or a
 * client learns the key of the seed it dials, and, if made with -n, its
 * node id. A member admits a node only with the key whose certificate
 * names that node's endpoint (and id). A client's certificate (no
 * endpoint; role = "client") names no node: it cannot join as one.
 */
#ifndef SN_KEYS_H
#define SN_KEYS_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a node or client uses to talk to the cluster securely. */
typedef struct sn_security {
    const char *cert;       /* this side's certificate (NAME.cert or NAME.cert_secret); NULL: insecure */
    const char *authorized; /* directory of the public certificates allowed in */
} sn_security_t;

/* Writes DIR/NAME.cert and DIR/NAME.cert_secret (DIR is created), with
 * metadata name, role ("node" with an endpoint, else "client") and, if
 * not NULL / not 0, endpoint and node-id (a node id needs an endpoint).
 * Refuses to overwrite. Returns 0 or -1 with err set; *public_key (41
 * bytes) gets the Z85 public key. */
int sn_keys_generate(const char *dir, const char *name, const char *endpoint, uint32_t node, char public_key[41],
                     char *err, size_t errlen);
/* Loads a certificate with its secret key; NULL with err set. */
zcert_t *sn_keys_load(const char *path, char *err, size_t errlen);
/* The Z85 public key of the certificate in dir whose endpoint metadata is
 * endpoint. Returns 0, or -1 with err saying what to do. */
int sn_keys_server_key(const char *dir, const char *endpoint, char out[41], char *err, size_t errlen);
/* Checks the security options: both or neither of cert and authorized, a
 * loadable certificate, a readable directory. Returns 0 or -1 with err. */
int sn_keys_check(const sn_security_t *sec, char *err, size_t errlen);
/* Makes sock a CurveZMQ client of the server with public key server_key
 * (Z85), as cert. */
void sn_keys_client(zsock_t *sock, zcert_t *cert, const char *server_key);

/* The ZAP handler of a secure node (ZeroMQ's RFC 27, answering on
 * inproc://zeromq.zap.01 in an actor thread): admits a CurveZMQ client
 * whose key has a certificate in the authorized-keys directory (czmq's
 * zcertstore, reread when the directory changes, as czmq's zauth does)
 * (its Z85 key becomes the connection's User-Id, which the relay reads as
 * the sender's key) and refuses any other, remembering the last refused peer's address and
 * key for the log line (zauth cannot say who it refused). One per process:
 * a ZeroMQ context has one ZAP endpoint. NULL if it cannot start. */
typedef struct sn_keys_zap sn_keys_zap_t;
sn_keys_zap_t *sn_keys_zap_new(const char *authorized_dir);
void sn_keys_zap_destroy(sn_keys_zap_t **self_p);
/* The peer refused last, as "ADDRESS (key KEY)"; "" if none yet (any thread). */
void sn_keys_zap_last_refused(sn_keys_zap_t *self, char *out, size_t len);

/* Handshake failures on sock (a refused key, a plain peer meeting a
 * CurveZMQ one), and with `closes` every closed connection and every
 * failed connect (SN_KEYS_UNREACHABLE: a connecting socket's), arrive as
 * events on the returned PAIR socket; poll it and read each with
 * sn_keys_failure. NULL if monitoring is not possible. */
zsock_t *sn_keys_monitor(zsock_t *sock, bool closes);
/* Only the closing of an established connection of sock (a peer's DEALER:
 * its node's process ended, or the link broke), as SN_KEYS_CLOSED events
 * on the returned PAIR socket (read with sn_keys_failure). NULL if
 * monitoring is not possible. */
zsock_t *sn_keys_monitor_closes(zsock_t *sock);
/* Stops monitoring sock (libzmq's documented way: a NULL endpoint) and
 * closes the monitor, before sock itself is closed: a monitor left to the
 * socket's own teardown can hold up the context's termination. */
void sn_keys_unmonitor(zsock_t *sock, zsock_t **monitor);
/* Reads one event from a monitor; `secure` says whether this side uses
 * CurveZMQ. Returns the kind of failure (SN_KEYS_*) with a short reason in
 * why and the endpoint in ep, or 0 if it was not a handshake failure. */
enum {
    SN_KEYS_NOT_AUTHORIZED = 1,
    SN_KEYS_MISMATCH = 2,
    SN_KEYS_FAILED = 3,
    SN_KEYS_CLOSED = 4,
    SN_KEYS_UNREACHABLE = 5 /* a connect failed (refused, or no route): libzmq retries it */
};
int sn_keys_failure(zsock_t *monitor, bool secure, char *why, size_t whylen, char *ep, size_t eplen);

/* Whether key (Z85) is a node's: a certificate in dir with that public key
 * that names a node (an endpoint, and not role "client"). Reads the
 * directory. */
bool sn_keys_is_node(const char *dir, const char *key);
/* Whether key (Z85) may be node `node` listening at `endpoint`: a
 * certificate in dir with that public key names a node, that endpoint (not
 * checked if endpoint is NULL) and, if it names a node id, that one.
 * Returns 0, or -1 with why saying what is wrong, for the logs of both
 * sides (e.g. "its certificate client.cert names no node (a client's key
 * cannot join or speak as a node ...)"). Reads the directory. */
int sn_keys_names_node(const char *dir, const char *key, uint32_t node, const char *endpoint, char *why, size_t whylen);

/* The authorized-keys directory as the relay's I/O thread asks it, once
 * per Hello, stranger or new member row: read into memory and read again
 * when a question comes a second or more after the last read, so that a
 * flood of Hellos or heartbeats costs no file reads,
 * and the directory's changes (a key added, revoked, its metadata
 * changed) count within a second. A key the cache lacks rereads it at
 * once if the directory's modification time changed since the last read
 * (a certificate added or removed: a node authorized a moment ago joins
 * at its first Hello, cluster.sh); else it costs a stat. One thread. */
typedef struct sn_keys_cache sn_keys_cache_t;
/* A cache of dir, read at the first question. Caller owns it; NULL if out
 * of memory. */
sn_keys_cache_t *sn_keys_cache_new(const char *dir);
void sn_keys_cache_destroy(sn_keys_cache_t **self_p);
/* sn_keys_is_node and sn_keys_names_node, answered from the cache. */
bool sn_keys_cache_is_node(sn_keys_cache_t *self, const char *key);
int sn_keys_cache_names_node(sn_keys_cache_t *self, const char *key, uint32_t node, const char *endpoint, char *why,
                             size_t whylen);
/* How many times the directory was read (tests). */
uint64_t sn_keys_cache_reads(const sn_keys_cache_t *self);

#endif

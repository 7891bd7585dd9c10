/* client.c - the command-line side: one request to a node, one answer
 * (sn_client_call). Runs on the caller's thread; it shares nothing with a
 * relay.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <czmq.h>

#include "client.h"
#include "relay.h"

/* The file descriptor whose readability ends every wait (sn_client_interrupt),
 * or -1. The command line is one thread: a plain static. */
static int interrupt_fd = -1;

/* The monotonic clock in ns: the deadlines of a wait. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sn_client_interrupt(int fd)
{
    interrupt_fd = fd;
}

static bool interrupted(void)
{
    struct pollfd p = {interrupt_fd, POLLIN, 0};
    return interrupt_fd >= 0 && poll(&p, 1, 0) == 1;
}

/* Takes one frame from the node: 0 with *reply set when it is the answer
 * to request id, SN_EPROTO when it cannot be (err says why: an answer
 * over the limit is the only one coming), SN_ETIMEDOUT to keep waiting. */
static int client_take(zsock_t *s, const char *endpoint, uint64_t id, sn_wire_reply_t *reply, char *err, size_t errlen)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, zsock_resolve(s), ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return SN_ETIMEDOUT;
    }
    int rc = SN_ETIMEDOUT;
    size_t size = zmq_msg_size(&m);
    sn_frame_t f;
    const char *why = "";
    if (size > SN_CLIENT_MAX_ANSWER) {
        snprintf(err, errlen,
                 "the answer from %s is %zu bytes, over the client's limit of %zu bytes (the largest "
                 "message, 64 MiB, and room for the rest): a call's result must be smaller",
                 endpoint, size, SN_CLIENT_MAX_ANSWER);
        rc = SN_EPROTO;
    } else if (sn_codec_decode(zmq_msg_data(&m), size, SN_CLIENT_MAX_ANSWER, &f, &why) == 0) {
        if (f.kind == SN_FRAME_REPLY && f.reply.id == id && f.reply.started) {
            /* a call's process started: its result comes later */
            reply->started = 1;
            reply->pid = f.reply.pid;
        } else if (f.kind == SN_FRAME_REPLY && f.reply.id == id) {
            *reply = f.reply;
            memset(&f.reply, 0, sizeof f.reply); /* moved out */
            rc = 0;
            err[0] = 0;
        }
        sn_frame_clear(&f);
    } else {
        /* (kept as the reason if no good answer follows) */
        snprintf(err, errlen, "bad answer from %s (%zu bytes): %s", endpoint, size, why);
        sn_frame_clear(&f);
    }
    zmq_msg_close(&m);
    return rc;
}

/* A DEALER to the node at endpoint (a CurveZMQ client with the keys in
 * sec, if any), and its monitor: a refusal or a closed connection is said
 * at once, not after the timeout. 0, or an error with err set. */
static int client_socket(const char *endpoint, const sn_security_t *sec, zsock_t **s, zsock_t **mon, char *err,
                         size_t errlen)
{
    zcert_t *cert = NULL;
    char key[41] = "";
    if (sec && sec->cert) {
        if (sn_keys_check(sec, err, errlen) != 0 || !(cert = sn_keys_load(sec->cert, err, errlen)))
            return SN_EINVAL;
        if (sn_keys_server_key(sec->authorized, endpoint, key, err, errlen) != 0) {
            zcert_destroy(&cert);
            return SN_EINVAL;
        }
    }
    *s = zsock_new(ZMQ_DEALER);
    if (!*s) {
        snprintf(err, errlen, "cannot create a socket: %s", zmq_strerror(zmq_errno()));
        zcert_destroy(&cert);
        return SN_ENOMEM;
    }
    if (cert)
        sn_keys_client(*s, cert, key);
    /* a refusal is said at once, not after the timeout; and so is a node
     * that goes away (the connection closes: a node that exits or is
     * killed, whose kernel closes it) while we wait for its answer */
    *mon = sn_keys_monitor(*s, true);
    zcert_destroy(&cert);
    if (zsock_connect(*s, "%s", endpoint) < 0) {
        snprintf(err, errlen, "bad endpoint %s: %s", endpoint, zmq_strerror(zmq_errno()));
        sn_keys_unmonitor(*s, mon);
        zsock_destroy(s);
        return SN_EINVAL;
    }
    return 0;
}

/* What the monitor said while we waited: the node closed the connection
 * (what came before the close is taken first) or refused us. */
static int client_event(zsock_t *s, zsock_t *mon, const char *endpoint, const sn_security_t *sec, uint64_t id,
                        sn_wire_reply_t *reply, char *err, size_t errlen)
{
    int rc = SN_ETIMEDOUT;
    char why[256], ep[256];
    int kind = sn_keys_failure(mon, sec && sec->cert, why, sizeof why, ep, sizeof ep);
    if (kind == SN_KEYS_CLOSED) {
        while (rc == SN_ETIMEDOUT && (zsock_events(s) & ZMQ_POLLIN)) /* what came before the close */
            rc = client_take(s, endpoint, id, reply, err, errlen);
        if (rc == SN_ETIMEDOUT) {
            snprintf(err, errlen, "the node at %s went away (closed the connection) while waiting for the answer",
                     endpoint);
            rc = SN_ENODEDOWN;
        }
    } else if (kind == SN_KEYS_UNREACHABLE) {
        snprintf(err, errlen, "cannot connect to %s: %s", endpoint, why);
        rc = SN_EUNREACHABLE;
    } else if (kind != 0) {
        snprintf(err, errlen, "the node at %s refused this client: %s%s", endpoint, why,
                 !strcmp(why, "key not authorized")
                     ? " (add this client's public certificate to the nodes' authorized-keys directory)"
                     : "");
        rc = SN_EREFUSED;
    }
    return rc;
}

/* Waits for the answer to req on s (mon: its connection's events) up to
 * timeout_ms (< 0: forever). The interrupt fd ends the wait with
 * SN_ECANCELED; a call whose process has not said it started yet waits up
 * to CALL_STARTED_MS more for that, so that the caller can cancel it
 * (cli.sh: SIGINT to call). */
#define CALL_STARTED_MS 50
static int client_wait(zsock_t *s, zsock_t *mon, const char *endpoint, const sn_security_t *sec,
                       const sn_wire_request_t *req, int timeout_ms, sn_wire_reply_t *reply, char *err, size_t errlen)
{
    zmq_pollitem_t it[3] = {{zsock_resolve(s), 0, ZMQ_POLLIN, 0},
                            mon ? (zmq_pollitem_t){zsock_resolve(mon), 0, ZMQ_POLLIN, 0}
                                : (zmq_pollitem_t){NULL, -1, 0, 0},
                            {NULL, interrupt_fd, ZMQ_POLLIN, 0}};
    int rc = SN_ETIMEDOUT;
    /* a node that takes the connection but never answers: a plain client
     * meets a CurveZMQ node that way (the handshake waits), so the hint
     * fits a client without keys only */
    snprintf(err, errlen, "no answer from %s within %d ms (is a schednode node listening there?%s)", endpoint,
             timeout_ms, sec && sec->cert ? "" : " a node of a secure cluster needs --cert and --authorized-keys");
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ns() + (uint64_t)timeout_ms * 1000000u;
    bool stop = false;
    while (rc == SN_ETIMEDOUT && now_ns() < deadline) {
        if (!stop && interrupted()) {
            stop = true;
            uint64_t more = req->op == SN_OP_CALL && !reply->started ? CALL_STARTED_MS * 1000000ull : 0;
            if (now_ns() + more < deadline)
                deadline = now_ns() + more;
            it[2].fd = -1;
            snprintf(err, errlen, "interrupted while waiting for the answer from %s", endpoint);
            continue;
        }
        long wait = deadline == UINT64_MAX ? -1 : (long)((deadline - now_ns()) / 1000000u) + 1;
        if (zmq_poll(it, 3, wait) <= 0)
            continue;
        if (it[0].revents & ZMQ_POLLIN) /* the answer first: it may come just before the close */
            rc = client_take(s, endpoint, req->id, reply, err, errlen);
        else if (it[1].revents & ZMQ_POLLIN)
            rc = client_event(s, mon, endpoint, sec, req->id, reply, err, errlen);
        if (stop && rc == SN_ETIMEDOUT && reply->started)
            break; /* (a call: its PID, which the caller cancels) */
    }
    if (stop && rc == SN_ETIMEDOUT) {
        snprintf(err, errlen, "interrupted while waiting for the answer from %s", endpoint);
        rc = SN_ECANCELED;
    }
    return rc;
}

/* (Returns as relay.h says.) */
int sn_client_call(const char *endpoint, const sn_security_t *sec, const sn_wire_request_t *req, int timeout_ms,
                   sn_wire_reply_t *reply, char *err, size_t errlen)
{
    memset(reply, 0, sizeof *reply);
    zsys_init();
    zsys_set_linger(0);
    zsock_t *s = NULL, *mon = NULL;
    int rc = client_socket(endpoint, sec, &s, &mon, err, errlen);
    if (rc != 0)
        return rc;
    void *buf;
    size_t len;
    rc = sn_codec_encode_request(req, &buf, &len);
    if (rc == 0 && len > SN_WIRE_MAX_FRAME) { /* a node drops it unread (its --max-frame) */
        snprintf(err, errlen,
                 "the request is %zu bytes (its argument or message %zu): a node takes at most %u bytes "
                 "from a client (--max-frame, default 1 MiB); pass bigger data between processes, "
                 "as messages of up to --max-message (64 MiB)",
                 len, req->arg ? (size_t)req->arg->len : (size_t)0, SN_WIRE_MAX_FRAME);
        free(buf);
        rc = SN_ETOOBIG;
    } else if (rc == 0) {
        zmq_send(zsock_resolve(s), buf, len, 0);
        free(buf);
        rc = client_wait(s, mon, endpoint, sec, req, timeout_ms, reply, err, errlen);
    }
    if (rc == SN_ETIMEDOUT && reply->started) {
        char pid[SN_PID_STRLEN];
        snprintf(err, errlen, "the call timed out after %d ms (process %s was still running on the cluster of %s)",
                 timeout_ms, sn_pid_format(reply->pid, pid, sizeof pid), endpoint);
    }
    sn_keys_unmonitor(s, &mon);
    zsock_destroy(&s);
    return rc;
}

void sn_client_reply_clear(sn_wire_reply_t *reply)
{
    free(reply->reason);
    free(reply->rows);
    free(reply->procs);
    free(reply->types);
    free(reply->flows);
    free(reply->report);
    sn_payload_destroy(&reply->result);
    memset(reply, 0, sizeof *reply);
}

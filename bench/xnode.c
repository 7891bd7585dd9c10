/* xnode.c - cross-node cases of schedbench: two nodes on loopback in two
 * processes: node 1 is this process (a scheduler plus a relay), node 2 a
 * real `schednode` started next to schedbench. Raw libzmq is measured
 * between this process and a child (schedbench re-executed in a helper
 * mode) in the same run.
 *   xnode-send: 1,000,000 Sends of 64-byte payloads from a process on node 1
 *               to one on node 2, until the receiver has them all (it acks);
 *               3 rounds taking turns with raw PUSH/PULL, medians compared.
 *   xnode-big:  messages of 1 MiB (256 of them), 32 MiB (8) and 64 MiB (4,
 *               the largest a node takes by default), node 1 to
 *               node 2, as xnode-send; raw PUSH/PULL of the same sizes in
 *               turn; 3 rounds each, medians compared (bytes a second).
 *   xnode-rtt:  process-to-process round trips across the two nodes, each
 *               timed from the step that sends to the step that gets the
 *               answer (stamps in the payload): p50 and p99. With
 *               --breakdown, every hop of the way too (common/hops.h).
 */
#define _GNU_SOURCE 1 /* sched_setaffinity */
#include "xnode.h"

#include <arpa/inet.h>
#include <czmq.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "codec.h"
#include "free_port.h"
#include "hops.h"
#include "relay.h"
#include "schednode/schednode.h"
#include "sn_node.h"
#include "pidcache.h"

#define MSG_BYTES 64
#define SEND_N 1000000
#define RTT_N 20000
#define CHUNK 1000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A free TCP port on 127.0.0.1 (bound by the kernel, then released). */
/* The path of a program built next to schedbench. */
static void sibling(const char *name, char *out, size_t len)
{
    char self[PATH_MAX] = "";
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    snprintf(out, len, "%s/%s", dirname(self), name);
}

/* Starts `argv` in a child process; returns its pid. */
static pid_t start(char *const argv[])
{
    pid_t child = fork();
    if (child == 0) {
        execv(argv[0], argv);
        fprintf(stderr, "schedbench: cannot run %s\n", argv[0]);
        _exit(127);
    }
    return child;
}

/* ----------------------------------------------------- process types */
typedef struct bproc {
    sn_pid_t peer;
    uint64_t n, done;
    int role; /* 0 sink, 1 source, 2 pong, 3 ping */
} bproc_t;

/* The round trips ping timed (one ping at a time: its sn_call orders
 * these against the reader). Probes with hop stamps (SN_HOP_BYTES, the
 * hops: all of its stamps), else MSG_BYTES with the send time in the
 * first stamp's place (the round trip's ns in [0]). */
static struct {
    bool hops;
    uint64_t (*s)[SN_HOP_SLOTS];
    size_t n, cap;
} rec;

/* Ping's answer came back: its round trip is recorded. */
static void ping_record(sn_payload_t *m)
{
    uint64_t now = sn__hop_now(), t0;
    if (!m || m->len != (rec.hops ? SN_HOP_BYTES : MSG_BYTES) || rec.n >= rec.cap)
        return;
    if (rec.hops) {
        sn__hop_stamp(m, now); /* the last one: the step runs */
        memcpy(rec.s[rec.n++], m->data + 16, sizeof rec.s[0]);
        return;
    }
    memcpy(&t0, m->data + 16, 8);
    rec.s[rec.n++][0] = now - t0;
}

/* The size of a source's messages (xnode-big sets it). */
static size_t msg_bytes = MSG_BYTES;

/* Sends (m, or a new probe) to `to`, stamped with the time it is sent. */
static void ping_send(sn_step_out_t *out, sn_pid_t to, sn_payload_t *m)
{
    size_t len = rec.hops ? SN_HOP_BYTES : MSG_BYTES;
    if (!m || m->len != len) {
        sn_payload_destroy(&m);
        uint64_t magic = SN_HOP_MAGIC;
        m = sn_payload_new(SN_CT_BYTES, NULL, len);
        if (rec.hops)
            memcpy(m->data + 8, &magic, 8);
    }
    memset(m->data + 16, 0, len - 16);
    uint64_t now = sn__hop_now();
    memcpy(m->data + 16, &now, 8);
    sn_out_send(out, to, 0, &m);
}

static int b_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    bproc_t *b = state;
    static const char *roles[] = {"sink", "source", "pong", "ping"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(method, roles[i]))
            b->role = i;
    if (strcmp(method, roles[b->role]) != 0)
        return SN_ENOMETHOD;
    if (b->role == 2)
        return 0;
    if (!*input || (*input)->len != sizeof(sn_pid_t) + 8)
        return SN_EINVAL;
    memcpy(&b->peer, (*input)->data, sizeof b->peer);
    memcpy(&b->n, (*input)->data + sizeof b->peer, 8);
    return 0;
}

static void b_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    bproc_t *b = state;
    out->status = SN_IDLE;
    if (b->role == 3 && n == 0) { /* ping: the first */
        ping_send(out, b->peer, NULL);
        return;
    }
    if (b->role == 1 && n == 0) { /* source: send */
        uint64_t chunk = msg_bytes > 4096 ? 1 : CHUNK;
        uint64_t k = b->n - b->done < chunk ? b->n - b->done : chunk;
        for (uint64_t i = 0; i < k; i++) {
            sn_payload_t *m = sn_payload_new(SN_CT_BYTES, NULL, msg_bytes);
            uint64_t seq = b->done + i; /* the sink checks the order */
            memcpy(m->data, &seq, sizeof seq);
            sn_out_send(out, b->peer, 0, &m);
        }
        b->done += k;
        out->status = b->done < b->n ? SN_CONTINUE : SN_IDLE;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].error) {
            sn_out_fail(out, ev[i].error, "xnode: %s", sn_strerror(ev[i].error));
            return;
        }
        if (ev[i].type != SN_EV_MESSAGE)
            continue;
        switch (b->role) {
        case 0: /* sink: ack the sender when all arrived */
            if (++b->done == b->n) {
                sn_out_send(out, ev[i].from, 0, &(sn_payload_t *){sn_payload_u64(b->done)});
                out->status = SN_DONE;
                return;
            }
            break;
        case 1: /* source: the ack */
            out->status = SN_DONE;
            return;
        case 2: /* pong */
            sn_out_send(out, ev[i].from, 0, &(sn_payload_t *){sn_take(&ev[i].data)});
            break;
        case 3: /* ping */
            ping_record(ev[i].data);
            if (++b->done == b->n) {
                out->status = SN_DONE;
                return;
            }
            ping_send(out, b->peer, sn_take(&ev[i].data));
            break;
        }
    }
}

static const sn_type_t b_type = {"xbench", 1, sizeof(bproc_t), b_init, b_step, NULL, NULL, NULL};

/* A node: scheduler + relay listening on `port` with the other as peer. */
typedef struct node {
    sn_sched_t *sched;
    sn_relay_t *relay;
} node_t;

static int node_start(node_t *nd, uint32_t id, int workers, int port, uint32_t peer_id, int peer_port)
{
    char listen[64], peer_ep[64], err[256];
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", port);
    snprintf(peer_ep, sizeof peer_ep, "tcp://127.0.0.1:%d", peer_port);
    nd->sched = sn_sched_new(&(sn_sched_config_t){id, workers, 1});
    if (!nd->sched || sn_type_register(nd->sched, &b_type) != 0)
        return -1;
    sn_peer_config_t peer = {peer_id, peer_ep};
    sn_relay_config_t cfg = {.listen = listen,
                             .peers = &peer,
                             .npeers = 1,
                             .first_serial = 1,
                             .incarnation = (uint64_t)time(NULL),
                             .heartbeat_ms = 200,
                             .down_after_ms = 5000};
    nd->relay = sn_relay_new(nd->sched, &cfg, err, sizeof err);
    if (!nd->relay) {
        fprintf(stderr, "schedbench: %s\n", err);
        return -1;
    }
    return 0;
}

static void node_stop(node_t *nd)
{
    sn_sched_shutdown(nd->sched, 1000);
    sn_relay_destroy(&nd->relay);
    sn_sched_destroy(&nd->sched);
}

/* Starts node 2 (a real schednode) and has it spawn `type method arg`;
 * returns the node's pid and the new process's PID. */
static pid_t start_node2(int workers, int p1, int p2, const char *type, const char *method, const char *arg,
                         sn_pid_t *pid_out)
{
    char bin[PATH_MAX], demo[PATH_MAX], w[16], listen[64], peer[80], ep[64];
    sibling("schednode", bin, sizeof bin);
    sibling("schednode-demo.so", demo, sizeof demo); /* xsink, xpong: the demo plugin's */
    snprintf(w, sizeof w, "%d", workers);
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", p2);
    snprintf(peer, sizeof peer, "1=tcp://127.0.0.1:%d", p1);
    char *argv[] = {bin,    "-n",         "2",      "-w",          w,      "--listen",
                    listen, "--peer",     peer,     "--log-level", "warn", "--down-after-ms",
                    "5000", "--insecure", "--load", demo,          NULL};
    pid_t child = start(argv);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", p2);
    sn_wire_request_t req = {.id = 1, .op = SN_OP_SPAWN, .type = (char *)type, .method = (char *)method};
    req.arg = arg ? sn_payload_text(arg) : NULL;
    sn_wire_reply_t rep;
    char err[256];
    int rc;
    /* (refused until it listens: a refusal is said at once) */
    for (int tries = 0;
         (rc = sn_client_call(ep, NULL, &req, 10000, &rep, err, sizeof err)) == SN_EUNREACHABLE && tries < 200; tries++)
        usleep(50000);
    sn_payload_destroy(&req.arg);
    if (rc != 0 || rep.error) {
        fprintf(stderr, "schedbench: node 2: %s\n", rc ? err : sn_strerror(rep.error));
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        sn_client_reply_clear(&rep);
        return -1;
    }
    *pid_out = rep.pid;
    sn_client_reply_clear(&rep);
    return child;
}

static void stop_child(pid_t child)
{
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
}

/* Runs one `method` process on node 1 against `peer` on node 2 and returns
 * the seconds it took. */
static double run_on_node1(node_t *nd, const char *method, sn_pid_t peer, uint64_t n)
{
    unsigned char arg[sizeof(sn_pid_t) + 8];
    memcpy(arg, &peer, sizeof peer);
    memcpy(arg + sizeof peer, &n, 8);
    sn_payload_t *in = sn_payload_new(SN_CT_BYTES, arg, sizeof arg), *res = NULL;
    double t0 = now_s();
    int rc = sn_call(nd->sched, "xbench", method, &in, 300000, &res);
    double secs = now_s() - t0;
    if (rc != 0)
        fprintf(stderr, "schedbench: %s failed: %s %s\n", method, sn_strerror(rc), res ? (char *)res->data : "");
    else if (res && strstr((const char *)res->data, "OUT OF ORDER"))
        fprintf(stderr, "schedbench: node 2 says: %s\n", (const char *)res->data), secs = -1;
    sn_payload_destroy(&res);
    return rc == 0 ? secs : -1;
}

/* ------------------------------------------------------- raw libzmq */
/* Both ends of each raw pair run in child processes (schedbench re-run in
 * a helper mode), fresh, with their own context, and with getpid() asking
 * the kernel as libc's does (pidcache.c is off there): the baseline is
 * libzmq as any program runs it, not with this program's cache (with
 * SN_RAW_PIDCACHE set in the environment they keep it: like with like).
 *   __pull PORT BACK N SIZE  binds PULL on PORT, takes N messages, then
 *                        says so on a PUSH to BACK
 *   __push PORT BACK N SIZE  starts __pull, binds BACK, sends N messages
 *                        of SIZE bytes to PORT, waits for the word; prints
 *                        the seconds
 *   __rep PORT N         binds REP on PORT, answers N requests
 *   __req PORT           connects REQ to PORT, warms up (100 round
 *                        trips), then for each count K read on stdin makes
 *                        K round trips and writes their times (K uint64
 *                        ns) to stdout; a count of 0 ends it */
static void raw_push(void *ctx, const char *port, const char *back, long n, size_t size)
{
    char bin[PATH_MAX], ep[64], k, *buf = calloc(1, size);
    void *push = zmq_socket(ctx, ZMQ_PUSH), *done = zmq_socket(ctx, ZMQ_PULL);
    int hwm = 100000, linger = 0;
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(done, ZMQ_LINGER, &linger, sizeof linger);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%s", back);
    zmq_bind(done, ep);
    sibling("schedbench", bin, sizeof bin);
    char n_s[24], size_s[24];
    snprintf(n_s, sizeof n_s, "%ld", n);
    snprintf(size_s, sizeof size_s, "%zu", size);
    char *argv[] = {bin, "__pull", (char *)port, (char *)back, n_s, size_s, NULL};
    pid_t child = start(argv);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%s", port);
    zmq_connect(push, ep);
    double t0 = now_s();
    for (long i = 0; i < n; i++)
        zmq_send(push, buf, size, 0);
    zmq_recv(done, &k, 1, 0);
    double secs = now_s() - t0;
    zmq_close(push);
    zmq_close(done);
    waitpid(child, NULL, 0);
    free(buf);
    printf("%.9f\n", secs);
}

static void raw_req(void *ctx, const char *port)
{
    char ep[64], buf[MSG_BYTES] = {0};
    void *req = zmq_socket(ctx, ZMQ_REQ);
    int linger = 0;
    zmq_setsockopt(req, ZMQ_LINGER, &linger, sizeof linger);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%s", port);
    zmq_connect(req, ep);
    for (int i = 0; i < 100; i++) { /* warm up the connection */
        zmq_send(req, buf, sizeof buf, 0);
        zmq_recv(req, buf, sizeof buf, 0);
    }
    uint32_t k;
    static uint64_t ns[RTT_N];
    while (fread(&k, sizeof k, 1, stdin) == 1 && k > 0 && k <= RTT_N) {
        bool ok = true;
        for (uint32_t i = 0; i < k; i++) {
            uint64_t t0 = sn__hop_now();
            ok = ok && zmq_send(req, buf, sizeof buf, 0) == sizeof buf &&
                 zmq_recv(req, buf, sizeof buf, 0) == sizeof buf;
            ns[i] = ok ? sn__hop_now() - t0 : 0; /* (0: the peer failed) */
        }
        if (fwrite(ns, sizeof ns[0], k, stdout) != k || fflush(stdout) != 0)
            break;
    }
    zmq_close(req);
}

int sn_bench_raw_child(int argc, char **argv)
{
    if (!getenv("SN_RAW_PIDCACHE")) /* (set: libzmq with this program's cache, like with like) */
        sn__pidcache_off();
    void *ctx = zmq_ctx_new();
    char buf[MSG_BYTES], ep[64];
    if (argc == 6 && !strcmp(argv[1], "__pull")) {
        void *pull = zmq_socket(ctx, ZMQ_PULL), *done = zmq_socket(ctx, ZMQ_PUSH);
        zmq_msg_t m;
        zmq_msg_init(&m);
        int hwm = 100000;
        zmq_setsockopt(pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%s", argv[2]);
        zmq_bind(pull, ep);
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%s", argv[3]);
        zmq_connect(done, ep);
        long n = atol(argv[4]);
        for (long i = 0; i < n; i++) /* (the whole message is taken, as a receiver would) */
            zmq_msg_recv(&m, pull, 0);
        zmq_msg_close(&m);
        zmq_send(done, "k", 1, 0);
        zmq_close(pull);
        zmq_close(done);
    } else if (argc == 6 && !strcmp(argv[1], "__push")) {
        raw_push(ctx, argv[2], argv[3], atol(argv[4]), (size_t)atol(argv[5]));
    } else if (argc == 4 && !strcmp(argv[1], "__rep")) {
        void *rep = zmq_socket(ctx, ZMQ_REP);
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%s", argv[2]);
        zmq_bind(rep, ep);
        long n = atol(argv[3]);
        for (long i = 0; i < n; i++) {
            int got = zmq_recv(rep, buf, sizeof buf, 0);
            zmq_send(rep, buf, got > 0 ? (size_t)got : 0, 0);
        }
        zmq_close(rep);
    } else if (argc == 3 && !strcmp(argv[1], "__req")) {
        raw_req(ctx, argv[2]);
    } else {
        return 2;
    }
    zmq_ctx_term(ctx);
    return 0;
}

/* Starts argv with its stdin and stdout on pipes (*to: we write its
 * stdin; *from: we read its stdout); its pid, or -1. */
static pid_t start_piped(char *const argv[], FILE **to, FILE **from)
{
    int in[2], out[2];
    if (pipe(in) != 0)
        return -1;
    if (pipe(out) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    pid_t child = fork();
    if (child == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execv(argv[0], argv);
        fprintf(stderr, "schedbench: cannot run %s\n", argv[0]);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *to = fdopen(in[1], "w");
    *from = fdopen(out[0], "r");
    return child;
}

/* One raw PUSH/PULL run of n messages of `size` bytes: its seconds, or -1. */
static double raw_push_pull(long n, size_t size)
{
    char bin[PATH_MAX], port_s[16], back_s[16], n_s[24], size_s[24];
    sibling("schedbench", bin, sizeof bin);
    snprintf(port_s, sizeof port_s, "%d", free_port());
    snprintf(back_s, sizeof back_s, "%d", free_port());
    snprintf(n_s, sizeof n_s, "%ld", n);
    snprintf(size_s, sizeof size_s, "%zu", size);
    char *argv[] = {bin, "__push", port_s, back_s, n_s, size_s, NULL};
    FILE *to, *from;
    pid_t child = start_piped(argv, &to, &from);
    if (child < 0)
        return -1;
    double secs = -1;
    if (!from || fscanf(from, "%lf", &secs) != 1)
        secs = -1;
    if (to)
        fclose(to);
    if (from)
        fclose(from);
    waitpid(child, NULL, 0);
    return secs;
}

/* A raw REQ/REP pair, each end a child process. */
typedef struct raw_rr {
    pid_t rep, req;
    FILE *to, *from; /* the REQ child's stdin and stdout */
} raw_rr_t;

/* Starts the pair for `n` round trips (after 100 to warm up). */
static bool raw_rr_open(raw_rr_t *rr, int n)
{
    char bin[PATH_MAX], port_s[16], n_s[16];
    sibling("schedbench", bin, sizeof bin);
    snprintf(port_s, sizeof port_s, "%d", free_port());
    snprintf(n_s, sizeof n_s, "%d", n + 100);
    char *rep[] = {bin, "__rep", port_s, n_s, NULL}, *req[] = {bin, "__req", port_s, NULL};
    rr->rep = start(rep);
    rr->req = start_piped(req, &rr->to, &rr->from);
    return rr->req > 0 && rr->to && rr->from;
}

/* n round trips, each timed into ns[]; false if the pair failed. */
static bool raw_rr_run(raw_rr_t *rr, uint64_t *ns, int n)
{
    uint32_t k = (uint32_t)n;
    if (fwrite(&k, sizeof k, 1, rr->to) != 1 || fflush(rr->to) != 0 || fread(ns, sizeof *ns, k, rr->from) != k)
        return false;
    for (int i = 0; i < n; i++)
        if (!ns[i])
            return false;
    return true;
}

static void raw_rr_close(raw_rr_t *rr)
{
    if (rr->to) {
        uint32_t zero = 0;
        fwrite(&zero, sizeof zero, 1, rr->to);
        fclose(rr->to);
    }
    if (rr->from)
        fclose(rr->from);
    if (rr->req > 0)
        waitpid(rr->req, NULL, 0);
    kill(rr->rep, SIGTERM); /* (done already when every round trip was made) */
    waitpid(rr->rep, NULL, 0);
}

/* ------------------------------------------------------------ cases */
/* Starts node 2 (running one `type method arg` process, whose PID goes to
 * *peer) and node 1 in this process. */
static int two_nodes(int workers, const char *type, const char *method, const char *arg, sn_pid_t *peer, node_t *nd,
                     pid_t *child)
{
    int p1 = free_port(), p2 = free_port();
    *child = start_node2(workers, p1, p2, type, method, arg, peer);
    if (*child < 0)
        return -1;
    if (node_start(nd, 1, workers, p1, 2, p2) != 0) {
        stop_child(*child);
        return -1;
    }
    return 0;
}

/* One round of ours: two nodes up, n Sends, both down; seconds or -1. */
static double xnode_send_once(int workers, long n)
{
    char arg[32];
    snprintf(arg, sizeof arg, "%ld", n);
    sn_pid_t sink;
    node_t nd;
    pid_t child;
    if (two_nodes(workers, "xsink", "collect", arg, &sink, &nd, &child) != 0)
        return -1;
    double secs = run_on_node1(&nd, "source", sink, (uint64_t)n);
    node_stop(&nd);
    stop_child(child);
    return secs;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Raw PUSH/PULL and ours take turns, SEND_ROUNDS rounds each (the load of
 * this machine swings between rounds: raw's own rate went from 2.1 to 3.1
 * M/s across runs); the medians are compared. */
#define SEND_ROUNDS 3
int sn_bench_xnode_send(int workers)
{
    double raw[SEND_ROUNDS], ours[SEND_ROUNDS];
    for (int r = 0; r < SEND_ROUNDS; r++) {
        if ((raw[r] = raw_push_pull(SEND_N, MSG_BYTES)) < 0) {
            fprintf(stderr, "schedbench: xnode-send: the raw PUSH/PULL pair failed\n");
            return 1;
        }
        if ((ours[r] = xnode_send_once(workers, SEND_N)) < 0)
            return 1;
        printf("xnode-send: round %d: %d Sends of %d bytes, node 1 -> node 2 (separate processes), %.1f ms, all in "
               "order; raw PUSH/PULL %.1f ms\n",
               r + 1, SEND_N, MSG_BYTES, ours[r] * 1e3, raw[r] * 1e3);
    }
    qsort(raw, SEND_ROUNDS, sizeof *raw, cmp_double);
    qsort(ours, SEND_ROUNDS, sizeof *ours, cmp_double);
    double rm = raw[SEND_ROUNDS / 2], om = ours[SEND_ROUNDS / 2];
    printf("xnode-send: medians of %d rounds: %.2fx raw libzmq's rate\n", SEND_ROUNDS, rm / om);
    printf("RESULT zmq-raw-push-pull %.0f msgs/s\n", SEND_N / rm);
    printf("RESULT xnode-send %.0f msgs/s\n", SEND_N / om);
    printf("RESULT xnode-send-ratio %.2f x\n", rm / om);
    return 0;
}

/* Big messages: for each size, raw PUSH/PULL and ours take turns,
 * SEND_ROUNDS rounds each, as xnode-send; the medians' bytes a second. */
int sn_bench_xnode_big(int workers)
{
    static const struct {
        const char *name;
        size_t size;
        long n;
    } sizes[] = {{"1MiB", (size_t)1 << 20, 256}, {"32MiB", (size_t)32 << 20, 8}, {"64MiB", (size_t)64 << 20, 4}};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        double raw[SEND_ROUNDS], ours[SEND_ROUNDS];
        size_t size = sizes[z].size;
        long n = sizes[z].n;
        msg_bytes = size;
        for (int r = 0; r < SEND_ROUNDS; r++) {
            if ((raw[r] = raw_push_pull(n, size)) < 0) {
                fprintf(stderr, "schedbench: xnode-big: the raw PUSH/PULL pair failed\n");
                return 1;
            }
            if ((ours[r] = xnode_send_once(workers, n)) < 0)
                return 1;
            printf("xnode-big: round %d: %ld Sends of %s, node 1 -> node 2 (separate processes), %.1f ms, all in "
                   "order; raw PUSH/PULL %.1f ms\n",
                   r + 1, n, sizes[z].name, ours[r] * 1e3, raw[r] * 1e3);
        }
        msg_bytes = MSG_BYTES;
        qsort(raw, SEND_ROUNDS, sizeof *raw, cmp_double);
        qsort(ours, SEND_ROUNDS, sizeof *ours, cmp_double);
        double rm = raw[SEND_ROUNDS / 2], om = ours[SEND_ROUNDS / 2], mb = (double)n * (double)size / 1e6;
        printf("xnode-big %s: medians of %d rounds: %.2fx raw libzmq's rate\n", sizes[z].name, SEND_ROUNDS, rm / om);
        printf("RESULT zmq-raw-push-pull-%s %.0f MB/s\n", sizes[z].name, mb / rm);
        printf("RESULT xnode-big-%s %.0f MB/s\n", sizes[z].name, mb / om);
        printf("RESULT xnode-big-%s-ratio %.2f x\n", sizes[z].name, rm / om);
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of v[0..n) in us; sorts v. */
static double quantile_us(uint64_t *v, size_t n, double q)
{
    qsort(v, n, sizeof *v, cmp_u64);
    size_t i = (size_t)(q * (double)n);
    return n ? (double)v[i < n ? i : n - 1] / 1e3 : 0;
}

/* The hops of a round trip: stamp i to stamp i + 1 (common/hops.h). */
static const char *const hop_names[SN_HOP_SLOTS - 1] = {"node 1: step sends -> relay thread picks it up",
                                                        "node 1: relay thread -> zmq_send",
                                                        "zmq: node 1 -> node 2's relay thread reads it",
                                                        "node 2: read -> handed to its scheduler",
                                                        "node 2: handed -> pong's step runs",
                                                        "node 2: step sends -> relay thread picks it up",
                                                        "node 2: relay thread -> zmq_send",
                                                        "zmq: node 2 -> node 1's relay thread reads it",
                                                        "node 1: read -> handed to its scheduler",
                                                        "node 1: handed -> ping's step runs"};

/* Prints p50 and p99 of each hop of the recorded probes; false if a
 * probe missed a stamp (a relay without SN_HOP_TRACE). */
static bool print_breakdown(void)
{
    uint64_t *v = malloc(rec.n * sizeof *v);
    if (!v)
        return false;
    printf("xnode-rtt breakdown (%zu round trips)          p50 us   p99 us\n", rec.n);
    bool ok = true;
    for (int h = 0; h < SN_HOP_SLOTS - 1 && ok; h++) {
        for (size_t i = 0; i < rec.n; i++) {
            ok = ok && rec.s[i][h] && rec.s[i][h + 1] && rec.s[i][h + 1] >= rec.s[i][h];
            v[i] = rec.s[i][h + 1] - rec.s[i][h];
        }
        double p50 = quantile_us(v, rec.n, 0.5), p99 = quantile_us(v, rec.n, 0.99);
        printf("  %-46s %8.1f %8.1f\n", hop_names[h], p50, p99);
    }
    free(v);
    if (!ok)
        fprintf(stderr, "schedbench: xnode-rtt: a probe missed a hop's stamp\n");
    return ok;
}

/* The round trips of ping on node 1 against pong on node 2, recorded, and
 * as many raw REQ/REP ones into raw[]: in RTT_CHUNKS turns, one kind after
 * the other, so that both see the same load on this shared machine. */
#define RTT_CHUNKS 20
static bool rtt_both(int workers, uint64_t *raw)
{
    sn_pid_t pong;
    node_t nd;
    pid_t child;
    raw_rr_t rr;
    if (rec.hops)
        setenv("SN_HOP_TRACE", "1", 1); /* both relays: this one and node 2's (inherited) */
    int rc = two_nodes(workers, "xpong", "echo", NULL, &pong, &nd, &child);
    unsetenv("SN_HOP_TRACE");
    if (rc != 0)
        return false;
    bool ok = raw_rr_open(&rr, RTT_N);
    ok = ok && run_on_node1(&nd, "ping", pong, 100) >= 0; /* warm up */
    rec.n = 0;
    uint64_t guest = sn__sched_guest_runs(nd.sched);
    for (int c = 0; c < RTT_CHUNKS && ok; c++)
        ok = raw_rr_run(&rr, raw + c * (RTT_N / RTT_CHUNKS), RTT_N / RTT_CHUNKS) &&
             run_on_node1(&nd, "ping", pong, RTT_N / RTT_CHUNKS) >= 0;
    printf("xnode-rtt: node 1 ran %" PRIu64 " of ping's %d steps on its relay's I/O thread (the scheduler's guest)\n",
           sn__sched_guest_runs(nd.sched) - guest, RTT_N + RTT_CHUNKS);
    raw_rr_close(&rr);
    node_stop(&nd);
    stop_child(child);
    return ok && rec.n == RTT_N;
}

int sn_bench_xnode_rtt(int workers, int breakdown)
{
    uint64_t *raw = malloc(RTT_N * sizeof *raw), *v = malloc(RTT_N * sizeof *v);
    rec.hops = breakdown != 0;
    rec.cap = RTT_N;
    rec.s = calloc(RTT_N, sizeof *rec.s);
    bool ok = raw && v && rec.s && rtt_both(workers, raw);
    if (ok) {
        for (size_t i = 0; i < rec.n; i++)
            v[i] = rec.hops ? rec.s[i][SN_HOP_SLOTS - 1] - rec.s[i][0] : rec.s[i][0];
        double p50 = quantile_us(v, rec.n, 0.5), p99 = quantile_us(v, rec.n, 0.99);
        double raw50 = quantile_us(raw, RTT_N, 0.5), raw99 = quantile_us(raw, RTT_N, 0.99);
        if (rec.hops)
            ok = print_breakdown();
        printf("xnode-rtt: %zu round trips process-to-process across two nodes: p50 %.1f us, p99 %.1f us; "
               "raw REQ/REP p50 %.1f us, p99 %.1f us (taking turns, %d rounds)%s\n",
               rec.n, p50, p99, raw50, raw99, RTT_CHUNKS, rec.hops ? " (hop stamps on)" : "");
        printf("xnode-rtt: p50 %.2fx raw libzmq's round trip\n", p50 / raw50);
        printf("RESULT zmq-raw-rtt %.1f us\n", raw50); /* (the name it had before xnode-rtt-raw) */
        printf("RESULT xnode-rtt-raw %.1f us\n", raw50);
        printf("RESULT xnode-rtt %.1f us\n", p50);
        printf("RESULT xnode-rtt-p99 %.1f us\n", p99);
        printf("RESULT xnode-rtt-ratio %.2f x\n", p50 / raw50);
    }
    free(raw);
    free(v);
    free(rec.s);
    rec.s = NULL;
    return ok ? 0 : 1;
}

/* ------------------------------------------------------ steal-imbalance */
/* Two real nodes, one worker each, each process pinned to its own CPU;
 * 2,000 migratable processes of 1 ms of CPU each, all spawned on node A
 * (by the demo type "spread"). The same run with stealing off and on. */
#define STEAL_N 2000
#define STEAL_MS 1

/* Starts a schednode pinned to cpu; returns its pid. */
static pid_t start_pinned(int cpu, char *const argv[])
{
    pid_t child = fork();
    if (child == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set); /* inherited by every thread */
        execv(argv[0], argv);
        _exit(127);
    }
    return child;
}

/* One run: returns the seconds `spread` took on node A, or -1. */
static double imbalance_run(bool steal, char *where, size_t wlen)
{
    char bin[PATH_MAX], demo[PATH_MAX], la[64], lb[64], ja[64];
    sibling("schednode", bin, sizeof bin);
    sibling("schednode-demo.so", demo, sizeof demo); /* spread, spin: the demo plugin's */
    int pa = free_port(), pb = free_port();
    snprintf(la, sizeof la, "tcp://127.0.0.1:%d", pa);
    snprintf(lb, sizeof lb, "tcp://127.0.0.1:%d", pb);
    snprintf(ja, sizeof ja, "tcp://127.0.0.1:%d", pa);
    char *flag = steal ? "--steal-batch" : "--no-steal",
         *val = steal ? getenv("SN_STEAL_BATCH") ? getenv("SN_STEAL_BATCH") : "64" : NULL;
    char *a[] = {bin, "--load",     demo,          "-n",   "1",  "-w", "1", "--listen",
                 la,  "--insecure", "--log-level", "warn", flag, val,  NULL};
    char *b[] = {bin,          "--load", demo, "-n",          "2",    "-w", "1", "--listen", lb,
                 "--insecure", "--join", ja,   "--log-level", "warn", flag, val, NULL};
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    pid_t na = start_pinned(0, a);
    usleep(300000);
    pid_t nb = start_pinned(ncpu > 1 ? 1 : 0, b);
    double secs = -1;
    /* wait for both to be members: the status from A lists B up */
    sn_wire_request_t st = {.id = 7, .op = SN_OP_STATUS};
    for (int i = 0; i < 100; i++) {
        sn_wire_reply_t rep;
        char err[256];
        bool up = sn_client_call(la, NULL, &st, 1000, &rep, err, sizeof err) == 0 && rep.nrows == 2 &&
                  rep.rows[1].state == SN_MEMBER_UP && rep.rows[1].workers == 1;
        sn_client_reply_clear(&rep); /* (zeroed when the call failed) */
        if (up)
            break;
        usleep(50000);
    }
    char arg[32];
    snprintf(arg, sizeof arg, "%d %d spin", STEAL_N, STEAL_MS);
    sn_wire_request_t req = {.id = 8, .op = SN_OP_CALL, .type = "spread", .method = "run"};
    req.arg = sn_payload_text(arg);
    sn_wire_reply_t rep;
    char err[256];
    double t0 = now_s();
    int rc = sn_client_call(la, NULL, &req, 120000, &rep, err, sizeof err);
    double t1 = now_s();
    sn_payload_destroy(&req.arg);
    if (rc == 0 && !rep.error && rep.result) {
        secs = t1 - t0;
        snprintf(where, wlen, "%.*s", (int)rep.result->len, (const char *)rep.result->data);
    } else {
        fprintf(stderr, "schedbench: steal-imbalance: %s\n", rc ? err : (rep.reason ? rep.reason : "failed"));
    }
    sn_client_reply_clear(&rep);
    stop_child(nb);
    stop_child(na);
    return secs;
}

/* Three rounds, off and on alternating (this machine's noise comes and
 * goes: a round each way side by side sees the same weather); every
 * round is printed, the RESULT lines are the medians. */
#define STEAL_ROUNDS 3
int sn_bench_steal_imbalance(void)
{
    double off[STEAL_ROUNDS], on[STEAL_ROUNDS];
    printf("steal-imbalance: %d processes of %d ms of CPU spawned on node A; two nodes, one worker each, "
           "each pinned to its own CPU; %d rounds, stealing off then on\n",
           STEAL_N, STEAL_MS, STEAL_ROUNDS);
    for (int i = 0; i < STEAL_ROUNDS; i++) {
        char off_where[256] = "", on_where[256] = "";
        off[i] = imbalance_run(false, off_where, sizeof off_where);
        on[i] = imbalance_run(true, on_where, sizeof on_where);
        if (off[i] < 0 || on[i] < 0)
            return 1;
        printf("steal-imbalance: round %d: stealing off %.0f ms (%s); on %.0f ms (%s): %.2fx\n", i + 1, off[i] * 1000,
               off_where, on[i] * 1000, on_where, off[i] / on[i]);
        fflush(stdout);
    }
    qsort(off, STEAL_ROUNDS, sizeof off[0], cmp_double);
    qsort(on, STEAL_ROUNDS, sizeof on[0], cmp_double);
    double moff = off[STEAL_ROUNDS / 2], mon = on[STEAL_ROUNDS / 2];
    printf("RESULT steal-off %.0f ms\n", moff * 1000);
    printf("RESULT steal-on %.0f ms\n", mon * 1000);
    printf("RESULT steal-speedup %.2f x\n", moff / mon);
    return 0;
}

/* ----------------------------------------------------------- steal-join */
/* Node A (one worker, pinned) busy with 4,000 migratable processes of 2 ms;
 * node B (one worker, its own CPU) joins. B's log lines are read as they
 * are written (stderr is unbuffered): the time from its "joined cluster"
 * line to its first "processes ... run here now" line is how long a node
 * that joins a busy cluster takes to run stolen work. */
int sn_bench_steal_join(void)
{
    char bin[PATH_MAX], demo[PATH_MAX], la[64], lb[64];
    sibling("schednode", bin, sizeof bin), sibling("schednode-demo.so", demo, sizeof demo); /* spread, spin */
    snprintf(la, sizeof la, "tcp://127.0.0.1:%d", free_port());
    snprintf(lb, sizeof lb, "tcp://127.0.0.1:%d", free_port());
    char *a[] = {bin, "--load", demo, "-n", "1", "-w", "1", "--listen", la, "--insecure", "--log-level", "warn", NULL};
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    pid_t na = start_pinned(0, a);
    sn_wire_request_t st = {.id = 7, .op = SN_OP_STATUS};
    bool up = false;
    for (int i = 0; i < 100 && !up; i++) {
        sn_wire_reply_t rep;
        char err[256];
        up = sn_client_call(la, NULL, &st, 1000, &rep, err, sizeof err) == 0;
        sn_client_reply_clear(&rep);
        if (!up)
            usleep(50000);
    }
    sn_wire_request_t req = {.id = 8, .op = SN_OP_SPAWN, .type = "spread", .method = "run"};
    req.arg = sn_payload_text("4000 2 spin");
    sn_wire_reply_t rep;
    char err[256];
    int rc = up ? sn_client_call(la, NULL, &req, 5000, &rep, err, sizeof err) : -1;
    sn_payload_destroy(&req.arg);
    if (rc == 0)
        sn_client_reply_clear(&rep);
    int fds[2];
    if (rc != 0 || pipe(fds) != 0) {
        fprintf(stderr, "schedbench: steal-join: node A did not take the work\n");
        kill(na, SIGKILL);
        waitpid(na, NULL, 0);
        return 1;
    }
    usleep(200000); /* A is busy, and says so in its heartbeats */
    char *b[] = {bin, "--load",     demo,     "-n", "2",           "-w",    "1", "--listen",
                 lb,  "--insecure", "--join", la,   "--log-level", "debug", NULL};
    pid_t nb = fork();
    if (nb == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(ncpu > 1 ? 1 : 0, &set);
        sched_setaffinity(0, sizeof set, &set);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execv(b[0], b);
        _exit(127);
    }
    close(fds[1]);
    FILE *log = fdopen(fds[0], "r");
    double t_start = now_s(), t_join = -1, t_work = -1;
    char line[1024];
    /* bounded: B exits (EOF) if it cannot join; A's work lasts 8 s */
    while (log && t_work < 0 && now_s() - t_start < 10 && fgets(line, sizeof line, log)) {
        unsigned long long id, n;
        const char *at;
        if (t_join < 0 && strstr(line, "joined cluster"))
            t_join = now_s();
        else if (t_join >= 0 && (at = strstr(line, "steal ")) &&
                 sscanf(at, "steal %llu: %llu processes", &id, &n) == 2 && n > 0 && strstr(line, "run here now"))
            t_work = now_s();
    }
    kill(nb, SIGKILL);
    kill(na, SIGKILL);
    waitpid(nb, NULL, 0);
    waitpid(na, NULL, 0);
    if (log)
        fclose(log);
    if (t_join < 0 || t_work < 0) {
        fprintf(stderr, "schedbench: steal-join: %s\n",
                t_join < 0 ? "node B did not join" : "node B got no work in 10 s");
        return 1;
    }
    printf("steal-join: node B joined %.1f ms after it started and ran stolen work %.1f ms after joining "
           "(node A busy with 4000 processes of 2 ms)\n",
           (t_join - t_start) * 1e3, (t_work - t_join) * 1e3);
    printf("RESULT steal-join-first-work %.1f ms\n", (t_work - t_join) * 1e3);
    return 0;
}

/* ---------------------------------------------------------------- drain */
/* One node's row in a status answer from ep (false: no answer, or no row). */
static bool node_row(const char *ep, uint32_t node, sn_wire_stats_t *row)
{
    sn_wire_request_t st = {.id = 9, .op = SN_OP_STATUS};
    sn_wire_reply_t rep;
    char err[256];
    bool found = false;
    if (sn_client_call(ep, NULL, &st, 5000, &rep, err, sizeof err) != 0)
        return false;
    for (size_t i = 0; i < rep.nrows && !found; i++)
        if (rep.rows[i].node == node && rep.rows[i].state == SN_MEMBER_UP) {
            *row = rep.rows[i];
            found = true;
        }
    sn_client_reply_clear(&rep);
    return found;
}

/* Polls until node `node`, as ep answers, satisfies ok(row, n), for up to
 * `secs` seconds. */
static bool wait_row(const char *ep, uint32_t node, bool (*ok)(const sn_wire_stats_t *, uint64_t), uint64_t n,
                     double secs)
{
    double t0 = now_s();
    sn_wire_stats_t row;
    while (now_s() - t0 < secs) {
        if (node_row(ep, node, &row) && ok(&row, n))
            return true;
        usleep(50000);
    }
    return false;
}

static bool all_idle(const sn_wire_stats_t *row, uint64_t n)
{
    return row->idle >= n;
}

static bool holds(const sn_wire_stats_t *row, uint64_t n)
{
    return row->live >= n;
}

static bool is_up(const sn_wire_stats_t *row, uint64_t n)
{
    (void)row, (void)n;
    return true;
}

/* Node A (a real schednode, two workers) holds n idle processes of 64
 * bytes of state (the demo plugin's `idle`, spawned by one `spread`,
 * which cannot move); node B joins; then `drain` of A, timed from the
 * request to its answer (the node answers once nothing movable is left).
 * RESULT drain-N-procs-per-s: processes moved per second; drain-N-empty-s:
 * the time to empty A. */
int sn_bench_drain(long n)
{
    char bin[PATH_MAX], demo[PATH_MAX], la[64], lb[64], arg[64];
    sibling("schednode", bin, sizeof bin), sibling("schednode-demo.so", demo, sizeof demo);
    snprintf(la, sizeof la, "tcp://127.0.0.1:%d", free_port());
    snprintf(lb, sizeof lb, "tcp://127.0.0.1:%d", free_port());
    char *a[] = {bin, "--load", demo, "-n", "1", "-w", "2", "--listen", la, "--insecure", "--log-level", "warn", NULL};
    char *b[] = {bin, "--load",     demo,     "-n", "2",           "-w",   "2", "--listen",
                 lb,  "--insecure", "--join", la,   "--log-level", "warn", NULL};
    pid_t na = start(a), nb = -1;
    int rc = 1;
    sn_wire_request_t req = {.id = 10, .op = SN_OP_SPAWN, .type = "spread", .method = "run"};
    snprintf(arg, sizeof arg, "%ld 0 idle", n);
    sn_wire_reply_t rep;
    char err[256];
    if (!wait_row(la, 1, is_up, 0, 10)) {
        fprintf(stderr, "schedbench: drain: node A did not start\n");
        goto out;
    }
    req.arg = sn_payload_text(arg);
    int sp = sn_client_call(la, NULL, &req, 10000, &rep, err, sizeof err);
    sn_payload_destroy(&req.arg);
    sn_pid_t spreader = sp == 0 ? rep.pid : SN_PID_NONE;
    if (sp == 0)
        sn_client_reply_clear(&rep);
    if (sp != 0 || !wait_row(la, 1, all_idle, (uint64_t)n, 600)) {
        fprintf(stderr, "schedbench: drain: node A did not make %ld idle processes\n", n);
        goto out;
    }
    /* the spawner cannot move, and would hold the drain to its timeout:
     * it goes (its children live on, idle) */
    sn_wire_request_t kr = {.id = 12, .op = SN_OP_KILL, .to = spreader, .force = 1};
    if (sn_client_call(la, NULL, &kr, 10000, &rep, err, sizeof err) == 0)
        sn_client_reply_clear(&rep);
    nb = start(b);
    if (!wait_row(la, 2, is_up, 0, 30)) {
        fprintf(stderr, "schedbench: drain: node B did not join\n");
        goto out;
    }
    sn_wire_request_t dr = {.id = 11, .op = SN_OP_DRAIN, .timeout_ms = 600000};
    double t0 = now_s();
    int drc = sn_client_call(la, NULL, &dr, 660000, &rep, err, sizeof err);
    double secs = now_s() - t0;
    if (drc != 0 || rep.error) {
        fprintf(stderr, "schedbench: drain: %s\n", drc ? err : rep.reason ? rep.reason : sn_strerror(rep.error));
        if (drc == 0)
            sn_client_reply_clear(&rep);
        goto out;
    }
    unsigned long moved = 0;
    const char *m = rep.report ? strstr(rep.report, ": ") : NULL;
    if (m)
        moved = strtoul(m + 2, NULL, 10);
    printf("    drain: %s", rep.report ? rep.report : "(no report)\n");
    sn_client_reply_clear(&rep);
    sn_wire_stats_t row;
    (void)wait_row(lb, 2, holds, (uint64_t)n, 30); /* (its count is a moment behind) */
    uint64_t on_b = node_row(lb, 2, &row) ? row.live : 0;
    printf("    drain: node B holds %" PRIu64 " processes after it\n", on_b);
    printf("RESULT drain-%ld-procs-per-s %.0f procs/s\n", n, moved / secs);
    printf("RESULT drain-%ld-empty-s %.2f s\n", n, secs);
    rc = moved == (unsigned long)n && on_b >= (uint64_t)n ? 0 : 1;
    if (rc)
        fprintf(stderr, "schedbench: drain: %lu of %ld moved, %" PRIu64 " on node B\n", moved, n, on_b);
out:
    if (nb > 0)
        kill(nb, SIGKILL), waitpid(nb, NULL, 0);
    kill(na, SIGKILL);
    waitpid(na, NULL, 0);
    return rc;
}

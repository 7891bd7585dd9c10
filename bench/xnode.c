/* xnode.c - cross-node cases of schedbench: two nodes on loopback in two
 * processes (this one and a forked child), each a scheduler plus a relay,
 * measured against raw libzmq between the same two processes in the same
 * run.
 *   xnode-send: 1,000,000 Sends of 64-byte payloads from a process on node 1
 *               to one on node 2, until the receiver has them all (it acks).
 *   xnode-rtt:  process-to-process round trips across the two nodes.
 */
#include "xnode.h"

#include <czmq.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "relay.h"
#include "schednode/schednode.h"

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
static int free_port(void)
{
    zsock_t *s = zsock_new(ZMQ_PULL);
    int port = zsock_bind(s, "tcp://127.0.0.1:*");
    zsock_destroy(&s);
    return port;
}

/* ----------------------------------------------------- process types */
typedef struct bproc {
    sn_pid_t peer;
    uint64_t n, done;
    int role; /* 0 sink, 1 source, 2 pong, 3 ping */
} bproc_t;

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
    if ((b->role == 1 || b->role == 3) && n == 0) { /* source / ping: send */
        uint64_t k = b->role == 1 ? (b->n - b->done < CHUNK ? b->n - b->done : CHUNK) : 1;
        for (uint64_t i = 0; i < k; i++)
            sn_out_send(out, b->peer, 0, &(sn_payload_t *){sn_payload_new(SN_CT_BYTES, NULL, MSG_BYTES)});
        if (b->role == 1) {
            b->done += k;
            out->status = b->done < b->n ? SN_CONTINUE : SN_IDLE;
        }
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
            if (++b->done == b->n) {
                out->status = SN_DONE;
                return;
            }
            sn_out_send(out, b->peer, 0, &(sn_payload_t *){sn_take(&ev[i].data)});
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
    sn_relay_config_t cfg = {listen, &peer, 1, (uint64_t)time(NULL), 0, 200, 5000};
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

/* Forks node 2, which spawns one `method` process and writes its PID to
 * the pipe, then runs until SIGTERM. */
static pid_t fork_node2(int workers, int p1, int p2, const char *method, sn_pid_t *pid_out)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t child = fork();
    if (child == 0) {
        close(fds[0]);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &s, NULL);
        node_t nd;
        if (node_start(&nd, 2, workers, p2, 1, p1) != 0)
            _exit(1);
        sn_pid_t pid = SN_PID_NONE;
        unsigned char arg[sizeof(sn_pid_t) + 8] = {0};
        uint64_t n = SEND_N;
        memcpy(arg + sizeof(sn_pid_t), &n, 8);
        sn_payload_t *in = sn_payload_new(SN_CT_BYTES, arg, sizeof arg);
        if (sn_spawn(nd.sched, "xbench", method, &in, NULL, NULL, &pid) != 0)
            _exit(1);
        if (write(fds[1], &pid, sizeof pid) != sizeof pid)
            _exit(1);
        int sig;
        sigwait(&s, &sig);
        node_stop(&nd);
        _exit(0);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], pid_out, sizeof *pid_out);
    close(fds[0]);
    if (got != sizeof *pid_out) {
        waitpid(child, NULL, 0);
        return -1;
    }
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
    sn_payload_destroy(&res);
    return rc == 0 ? secs : -1;
}

/* ------------------------------------------------------- raw libzmq */
static double raw_push_pull(void)
{
    int port = free_port(), back = free_port();
    pid_t child = fork();
    if (child == 0) {
        zsock_t *pull = zsock_new(ZMQ_PULL), *done = zsock_new(ZMQ_PUSH);
        zsock_set_rcvhwm(pull, 100000);
        zsock_bind(pull, "tcp://127.0.0.1:%d", port);
        zsock_connect(done, "tcp://127.0.0.1:%d", back);
        char buf[MSG_BYTES];
        for (int i = 0; i < SEND_N; i++)
            zmq_recv(zsock_resolve(pull), buf, sizeof buf, 0);
        zmq_send(zsock_resolve(done), "k", 1, 0);
        zsock_destroy(&pull);
        zsock_destroy(&done);
        _exit(0);
    }
    zsock_t *push = zsock_new(ZMQ_PUSH), *done = zsock_new(ZMQ_PULL);
    zsock_set_sndhwm(push, 100000);
    zsock_bind(done, "tcp://127.0.0.1:%d", back);
    zsock_connect(push, "tcp://127.0.0.1:%d", port);
    char buf[MSG_BYTES] = {0}, k;
    double t0 = now_s();
    for (int i = 0; i < SEND_N; i++)
        zmq_send(zsock_resolve(push), buf, sizeof buf, 0);
    zmq_recv(zsock_resolve(done), &k, 1, 0);
    double secs = now_s() - t0;
    zsock_destroy(&push);
    zsock_destroy(&done);
    waitpid(child, NULL, 0);
    return secs;
}

static double raw_req_rep(void)
{
    int port = free_port();
    pid_t child = fork();
    if (child == 0) {
        zsock_t *rep = zsock_new(ZMQ_REP);
        zsock_bind(rep, "tcp://127.0.0.1:%d", port);
        char buf[MSG_BYTES];
        for (int i = 0; i < RTT_N + 100; i++) {
            int n = zmq_recv(zsock_resolve(rep), buf, sizeof buf, 0);
            zmq_send(zsock_resolve(rep), buf, n > 0 ? (size_t)n : 0, 0);
        }
        zsock_destroy(&rep);
        _exit(0);
    }
    zsock_t *req = zsock_new(ZMQ_REQ);
    zsock_connect(req, "tcp://127.0.0.1:%d", port);
    char buf[MSG_BYTES] = {0};
    for (int i = 0; i < 100; i++) { /* warm up the connection */
        zmq_send(zsock_resolve(req), buf, sizeof buf, 0);
        zmq_recv(zsock_resolve(req), buf, sizeof buf, 0);
    }
    double t0 = now_s();
    for (int i = 0; i < RTT_N; i++) {
        zmq_send(zsock_resolve(req), buf, sizeof buf, 0);
        zmq_recv(zsock_resolve(req), buf, sizeof buf, 0);
    }
    double secs = now_s() - t0;
    zsock_destroy(&req);
    waitpid(child, NULL, 0);
    return secs;
}

/* ------------------------------------------------------------ cases */
int sn_bench_xnode_send(int workers)
{
    zsys_init();
    double raw = raw_push_pull();
    int p1 = free_port(), p2 = free_port();
    sn_pid_t sink;
    pid_t child = fork_node2(workers, p1, p2, "sink", &sink);
    if (child < 0)
        return 1;
    node_t nd;
    if (node_start(&nd, 1, workers, p1, 2, p2) != 0) {
        stop_child(child);
        return 1;
    }
    double secs = run_on_node1(&nd, "source", sink, SEND_N);
    node_stop(&nd);
    stop_child(child);
    if (secs < 0)
        return 1;
    printf("xnode-send: %d Sends of %d bytes, node 1 -> node 2 (two processes), %.1f ms; raw PUSH/PULL %.1f ms\n",
           SEND_N, MSG_BYTES, secs * 1e3, raw * 1e3);
    printf("xnode-send: %.2fx raw libzmq's rate\n", raw / secs);
    printf("RESULT zmq-raw-push-pull %.0f msgs/s\n", SEND_N / raw);
    printf("RESULT xnode-send %.0f msgs/s\n", SEND_N / secs);
    return 0;
}

int sn_bench_xnode_rtt(int workers)
{
    zsys_init();
    double raw = raw_req_rep();
    int p1 = free_port(), p2 = free_port();
    sn_pid_t pong;
    pid_t child = fork_node2(workers, p1, p2, "pong", &pong);
    if (child < 0)
        return 1;
    node_t nd;
    if (node_start(&nd, 1, workers, p1, 2, p2) != 0) {
        stop_child(child);
        return 1;
    }
    double warm = run_on_node1(&nd, "ping", pong, 100);
    double secs = run_on_node1(&nd, "ping", pong, RTT_N);
    node_stop(&nd);
    stop_child(child);
    if (warm < 0 || secs < 0)
        return 1;
    double us = secs * 1e6 / RTT_N, raw_us = raw * 1e6 / RTT_N;
    printf("xnode-rtt: %d round trips process-to-process across two nodes: %.1f us each; raw REQ/REP %.1f us\n",
           RTT_N, us, raw_us);
    printf("xnode-rtt: %.2fx raw libzmq's round trip\n", us / raw_us);
    printf("RESULT zmq-raw-rtt %.1f us\n", raw_us);
    printf("RESULT xnode-rtt %.1f us\n", us);
    return 0;
}

/* test_relay_guest.c - the relay's I/O thread as the scheduler's guest
 * (sched/guest.c): a process a frame wakes while no worker is awake
 * runs on the I/O thread, and its sends go out from there. Two nodes in
 * this process (each a scheduler with two workers and a relay); a client on
 * node 1 makes one round trip at a time with a server on node 2, so both
 * nodes' workers are asleep when each message arrives. Every answer must
 * come exactly once and in order, for servers that answer at once (echo),
 * through a second process here (chain: the guest runs what its run
 * woke), over CONTINUE slices (burst), from a child they spawn (spawn),
 * or after a step longer than the guest's budget now and then (slow). The
 * last case stops node 2 while round trips are in flight. Run it under
 * TSan. Rounds: SN_GUEST_ROUNDS (default 1000 for echo; a fifth of it for
 * the others).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "relay.h"
#include "schednode/schednode.h"
#include "sn_node.h"
#include "twonodes.h"

#define BURST 3        /* answers per message of a burst server */
#define SLOW_NS 300000 /* a slow server's long step (past the guest's budget) */

/* ------------------------------------------------------ the client */
typedef struct client {
    sn_pid_t server;
    uint64_t rounds, per; /* messages, answers to each */
    uint64_t sent, got;   /* messages sent, answers taken (numbered 0, 1, ...) */
} client_t;

static int client_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    client_t *c = state;
    if (!*input || (*input)->len != sizeof c->server + 16)
        return SN_EINVAL;
    memcpy(&c->server, (*input)->data, sizeof c->server);
    memcpy(&c->rounds, (*input)->data + sizeof c->server, 8);
    memcpy(&c->per, (*input)->data + sizeof c->server + 8, 8);
    return strcmp(method, "run") == 0 ? 0 : SN_ENOMETHOD;
}

static void client_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    client_t *c = state;
    out->status = SN_IDLE;
    bool send = n == 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = UINT64_MAX;
        if (ev[i].error || ev[i].type != SN_EV_MESSAGE || sn_payload_get_u64(ev[i].data, &v) != 0) {
            sn_out_fail(out, SN_EINVAL, "client: unexpected event (type %d, error %d)", (int)ev[i].type, ev[i].error);
            return;
        }
        if (v != c->got) {
            sn_out_fail(out, SN_EINVAL, "client: answer %llu came when %llu was due", (unsigned long long)v,
                        (unsigned long long)c->got);
            return;
        }
        if (++c->got == c->rounds * c->per) {
            out->status = SN_DONE;
            return;
        }
        send = send || c->got == c->sent * c->per; /* every answer to the last one is in */
    }
    if (send)
        sn_out_send(out, c->server, 0, &(sn_payload_t *){sn_payload_u64(c->sent++)});
}

/* ------------------------------------------------------ the servers */
enum { ECHO, CHAIN, BURST_, SPAWN, SLOW, NMODES };
static const char *const modes[NMODES] = {"echo", "chain", "burst", "spawn", "slow"};

typedef struct server {
    int mode;
    sn_pid_t fwd;       /* chain: the process here that answers */
    sn_pid_t to;        /* burst: the client being answered */
    uint64_t next, end; /* burst: the answers left, one per CONTINUE slice */
    uint64_t seen;      /* slow: messages taken */
} server_t;

/* An answer for `to` carried through a process here: [pid][u64]. */
static sn_payload_t *relayed(sn_pid_t to, uint64_t v)
{
    unsigned char b[sizeof to + 8];
    memcpy(b, &to, sizeof to);
    memcpy(b + sizeof to, &v, 8);
    return sn_payload_new(SN_CT_BYTES, b, sizeof b);
}

static bool unrelay(const sn_payload_t *p, sn_pid_t *to, uint64_t *v)
{
    if (!p || p->len != sizeof *to + 8)
        return false;
    memcpy(to, p->data, sizeof *to);
    memcpy(v, p->data + sizeof *to, 8);
    return true;
}

static int server_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    server_t *s = state;
    for (s->mode = 0; s->mode < NMODES && strcmp(method, modes[s->mode]) != 0; s->mode++)
        ;
    if (s->mode == NMODES)
        return SN_ENOMETHOD;
    if (s->mode == CHAIN && (!*input || (*input)->len != sizeof s->fwd))
        return SN_EINVAL;
    if (s->mode == CHAIN)
        memcpy(&s->fwd, (*input)->data, sizeof s->fwd);
    return 0;
}

static void busy(long ns)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

/* One message v from `from`. */
static void serve(server_t *s, sn_pid_t from, uint64_t v, sn_step_out_t *out)
{
    switch (s->mode) {
    case CHAIN:
        sn_out_send(out, s->fwd, 0, &(sn_payload_t *){relayed(from, v)});
        break;
    case BURST_:
        s->to = from;
        s->next = v * BURST;
        s->end = s->next + BURST;
        out->status = SN_CONTINUE;
        break;
    case SPAWN:
        sn_out_spawn(out, 1, "gchild", "answer", &(sn_payload_t *){relayed(from, v)}, 0);
        break;
    case SLOW:
        if (s->seen++ % 8 == 0)
            busy(SLOW_NS);
        /* fall through */
    default:
        sn_out_send(out, from, 0, &(sn_payload_t *){sn_payload_u64(v)});
        break;
    }
}

static void server_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    server_t *s = state;
    out->status = SN_IDLE;
    if (s->next < s->end) { /* a burst's slice: one answer */
        sn_out_send(out, s->to, 0, &(sn_payload_t *){sn_payload_u64(s->next++)});
        out->status = s->next < s->end ? SN_CONTINUE : SN_IDLE;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 1 && !ev[i].error)
            continue; /* a spawn's PID */
        if (ev[i].type == SN_EV_CANCEL) {
            out->status = SN_DONE;
            return;
        }
        if (ev[i].error || ev[i].type != SN_EV_MESSAGE || sn_payload_get_u64(ev[i].data, &v) != 0) {
            sn_out_fail(out, SN_EINVAL, "server: unexpected event (type %d, error %d)", (int)ev[i].type, ev[i].error);
            return;
        }
        serve(s, ev[i].from, v, out);
    }
}

/* chain's second process: answers [pid][v] with v to pid. */
static int fwd_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    (void)state;
    (void)input;
    return strcmp(method, "fwd") == 0 ? 0 : SN_ENOMETHOD;
}

static void fwd_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    (void)state;
    sn_pid_t to;
    uint64_t v;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++)
        if (ev[i].type == SN_EV_MESSAGE && unrelay(ev[i].data, &to, &v))
            sn_out_send(out, to, 0, &(sn_payload_t *){sn_payload_u64(v)});
        else if (ev[i].type == SN_EV_CANCEL) /* (shutdown) */
            out->status = SN_DONE;
}

/* spawn's children: spawned with [pid][v], they answer v and end. */
typedef struct child {
    sn_pid_t to;
    uint64_t v;
} child_t;

static int child_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    child_t *c = state;
    if (strcmp(method, "answer") != 0)
        return SN_ENOMETHOD;
    return unrelay(*input, &c->to, &c->v) ? 0 : SN_EINVAL;
}

static void child_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    (void)ev;
    (void)n;
    child_t *c = state;
    sn_out_send(out, c->to, 0, &(sn_payload_t *){sn_payload_u64(c->v)});
    out->status = SN_DONE;
}

static const sn_type_t types[] = {
    {.name = "gclient", .version = 1, .state_size = sizeof(client_t), .init = client_init, .step = client_step},
    {.name = "gserver", .version = 1, .state_size = sizeof(server_t), .init = server_init, .step = server_step},
    {.name = "gfwd", .version = 1, .init = fwd_init, .step = fwd_step},
    {.name = "gchild", .version = 1, .state_size = sizeof(child_t), .init = child_init, .step = child_step}};

/* ------------------------------------------------------- the nodes */
/* Both nodes' workers asleep (a worker thread just made may take a while
 * to start on a loaded machine; until then it counts as running one). */
static void settle(node_t *n1, node_t *n2)
{
    for (int i = 0; i < 5000; i++) {
        sn_stats_t a, b;
        sn_sched_stats(n1->sched, &a);
        sn_sched_stats(n2->sched, &b);
        if ((int)a.idle_workers == sn_sched_workers(n1->sched) && (int)b.idle_workers == sn_sched_workers(n2->sched))
            return;
        usleep(1000);
    }
}

static uint64_t rounds_of(int mode)
{
    const char *env = getenv("SN_GUEST_ROUNDS");
    uint64_t n = env && atoi(env) > 0 ? (uint64_t)atoi(env) : 1000;
    return mode == ECHO ? n : n / 5 + 1;
}

/* A server on node 2 in `mode` (and chain's second process). */
static sn_pid_t server_on(node_t *n2, int mode)
{
    sn_pid_t server, fwd;
    sn_payload_t *in = NULL;
    if (mode == CHAIN) {
        assert_int_equal(sn_spawn(n2->sched, "gfwd", "fwd", NULL, NULL, NULL, &fwd), 0);
        in = sn_payload_new(SN_CT_BYTES, &fwd, sizeof fwd);
    }
    assert_int_equal(sn_spawn(n2->sched, "gserver", modes[mode], &in, NULL, NULL, &server), 0);
    return server;
}

/* A client's run on node 1: rounds messages, `per` answers to each. */
typedef struct call {
    sn_sched_t *sched;
    sn_pid_t server;
    uint64_t rounds, per;
    int rc;
    char why[256];
} call_t;

static void *run_client(void *arg)
{
    call_t *c = arg;
    unsigned char in[sizeof(sn_pid_t) + 16];
    memcpy(in, &c->server, sizeof c->server);
    memcpy(in + sizeof c->server, &c->rounds, 8);
    memcpy(in + sizeof c->server + 8, &c->per, 8);
    sn_payload_t *input = sn_payload_new(SN_CT_BYTES, in, sizeof in), *res = NULL;
    c->rc = sn_call(c->sched, "gclient", "run", &input, 120000, &res);
    snprintf(c->why, sizeof c->why, "%.*s", res ? (int)res->len : 0, res ? (const char *)res->data : "");
    sn_payload_destroy(&res);
    return NULL;
}

/* Every mode in turn, one round trip at a time: every answer once and in
 * order, and both nodes ran processes on their I/O threads. */
static void test_round_trips(void **unused)
{
    (void)unused;
    node_t n1, n2;
    two_nodes(&n1, &n2, types, sizeof types / sizeof types[0]);
    for (int mode = 0; mode < NMODES; mode++) {
        uint64_t g1 = sn__sched_guest_runs(n1.sched), g2 = sn__sched_guest_runs(n2.sched);
        call_t c = {.sched = n1.sched, .server = server_on(&n2, mode), .rounds = rounds_of(mode)};
        c.per = mode == BURST_ ? BURST : 1;
        settle(&n1, &n2);
        run_client(&c);
        if (c.rc != 0)
            fail_msg("%s: %s %s", modes[mode], sn_strerror(c.rc), c.why);
        g1 = sn__sched_guest_runs(n1.sched) - g1;
        g2 = sn__sched_guest_runs(n2.sched) - g2;
        printf("# %s: %llu round trips; run on the I/O thread: node 1 %llu, node 2 %llu\n", modes[mode],
               (unsigned long long)c.rounds, (unsigned long long)g1, (unsigned long long)g2);
        /* (most do, but a run preempted for long makes the I/O thread let
         * a few chances go: guest.c) */
        if (mode == ECHO && (g1 == 0 || g2 == 0 || g1 + g2 < c.rounds / 4))
            fail_msg("echo: too few runs on the I/O threads (node 1 %llu, node 2 %llu of %llu round trips)",
                     (unsigned long long)g1, (unsigned long long)g2, (unsigned long long)c.rounds);
    }
    node_stop(&n1);
    node_stop(&n2);
}

/* Node 2 stops while round trips go on: its I/O thread may be running a
 * process as shutdown begins (sn__guest_quiesce). Node 1's client waits
 * for an answer that will not come and ends with node 1's shutdown. */
static void test_stop_in_flight(void **unused)
{
    (void)unused;
    node_t n1, n2;
    two_nodes(&n1, &n2, types, sizeof types / sizeof types[0]);
    call_t c = {.sched = n1.sched, .server = server_on(&n2, ECHO), .rounds = UINT64_MAX / 2, .per = 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_client, &c), 0);
    for (int i = 0; i < 20000 && sn__sched_guest_runs(n2.sched) < 200; i++)
        usleep(1000);
    node_stop(&n2);
    node_stop(&n1);
    pthread_join(th, NULL);
    assert_int_not_equal(c.rc, 0); /* (it never had all its answers) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_round_trips), cmocka_unit_test(test_stop_in_flight)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

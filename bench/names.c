/* names.c - the names case of schedbench: three nodes in this process,
 * each a scheduler with a relay (loopback TCP, the others static peers).
 *   register:       a process on node 1 registers REG_N names, WINDOW at a
 *                   time (each answered once its copy is kept: relay/names.c).
 *   whereis-first:  a process on node 2 looks each of them up once (its
 *                   node has not cached them: the owner answers).
 *   whereis-cached: the same process, LOOKUP_N lookups of the same names
 *                   (node 2's cache answers).
 *   send-by-name:   SEND_N messages of 64 bytes from node 1 to a named
 *                   sink on node 3, each after a whereis of the name,
 *                   WINDOW lookups in flight.
 *   send-by-pid:    the same to the sink's PID, in the same run.
 */
#include "names.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "free_port.h"
#include "relay.h"
#include "schednode/schednode.h"

#define NODES 3
#define REG_N 20000
#define LOOKUP_N 200000
#define SEND_N 200000
#define WINDOW 256
#define CHUNK 1000
#define MSG_BYTES 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Set by a process that stays (the registrar, a sink) once it is ready;
 * release: nothing else is read with it. */
static atomic_int ready;

/* ----------------------------------------------------- the process type */

enum { R_REG, R_WHERE, R_SINK, R_BYNAME, R_BYPID };

typedef struct nb {
    int role;
    uint64_t n, m, issued, done;
    char name[32]; /* the prefix (reg, where) or the sink's name */
    sn_pid_t peer;
} nb_t;

/* reg "N PREFIX", where "N M PREFIX", sink "N NAME", byname "N NAME",
 * bypid "N NODE.SERIAL" */
static int nb_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    nb_t *b = state;
    static const char *roles[] = {"reg", "where", "sink", "byname", "bypid"};
    b->role = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(method, roles[i]))
            b->role = i;
    char text[96] = "";
    if (b->role < 0)
        return SN_ENOMETHOD;
    if (!*input || (*input)->len >= sizeof text)
        return SN_EINVAL;
    memcpy(text, (*input)->data, (*input)->len);
    unsigned long long n = 0, m = 0;
    unsigned node = 0;
    unsigned long long serial = 0;
    int ok = b->role == R_WHERE   ? sscanf(text, "%llu %llu %31s", &n, &m, b->name) == 3
             : b->role == R_BYPID ? sscanf(text, "%llu %u.%llu", &n, &node, &serial) == 3
                                  : sscanf(text, "%llu %31s", &n, b->name) == 2;
    b->n = n;
    b->m = m;
    b->peer = (sn_pid_t){node, serial};
    return ok ? 0 : SN_EINVAL;
}

/* Keeps WINDOW requests (register, whereis) in flight until n are issued. */
static void refill(nb_t *b, sn_step_out_t *out)
{
    char name[64];
    while (b->issued < b->n && b->issued - b->done < WINDOW) {
        if (b->role == R_REG) {
            snprintf(name, sizeof name, "%s%llu", b->name, (unsigned long long)b->issued);
            sn_out_name_register(out, 1, name);
        } else if (b->role == R_WHERE) {
            snprintf(name, sizeof name, "%s%llu", b->name, (unsigned long long)(b->issued % b->m));
            sn_out_name_whereis(out, 1, name);
        } else {
            sn_out_name_whereis(out, 1, b->name);
        }
        b->issued++;
    }
}

static void send_one(sn_step_out_t *out, sn_pid_t to)
{
    sn_payload_t *m = sn_payload_new(SN_CT_BYTES, NULL, MSG_BYTES);
    if (m)
        sn_out_send(out, to, 0, &m);
}

/* One event of a registrar, looker or source by name. */
static void nb_event(nb_t *b, sn_event_t *e, sn_step_out_t *out)
{
    if (e->type == SN_EV_MESSAGE || e->type == SN_EV_CANCEL) { /* the sink's ack, or the end */
        sn_out_done(out, NULL);
        return;
    }
    if (e->type != SN_EV_YIELD_COMPLETE)
        return;
    if (e->error) {
        sn_out_fail(out, e->error, "names bench: %s", sn_strerror(e->error));
        return;
    }
    b->done++;
    if (b->role == R_BYNAME) {
        sn_pid_t to;
        if (sn_payload_get_pid(e->data, &to) == 0)
            send_one(out, to);
    } else if (b->done == b->n) {
        if (b->role == R_REG)
            atomic_store_explicit(&ready, 1, memory_order_release); /* (holds its names: stays) */
        else
            sn_out_done(out, NULL);
    }
}

static void nb_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    nb_t *b = state;
    out->status = SN_IDLE;
    if (b->role == R_BYPID) {
        uint64_t k = b->n - b->issued < CHUNK ? b->n - b->issued : CHUNK;
        for (uint64_t i = 0; i < k; i++)
            send_one(out, b->peer);
        b->issued += k;
        if (b->issued < b->n)
            out->status = SN_CONTINUE;
        for (size_t i = 0; i < n; i++)
            if (ev[i].type == SN_EV_MESSAGE)
                sn_out_done(out, NULL);
        return;
    }
    if (b->role == R_SINK) {
        if (n == 0) {
            sn_out_name_register(out, 1, b->name);
            out->status = SN_WAIT;
        }
        for (size_t i = 0; i < n; i++) {
            if (ev[i].type == SN_EV_YIELD_COMPLETE)
                atomic_store_explicit(&ready, ev[i].error ? -1 : 1, memory_order_release); /* (nothing else) */
            else if (ev[i].type == SN_EV_MESSAGE && ++b->done == b->n)
                sn_out_send(out, ev[i].from, 0, &(sn_payload_t *){sn_payload_u64(b->done)});
            else if (ev[i].type == SN_EV_CANCEL)
                sn_out_done(out, NULL);
        }
        return;
    }
    for (size_t i = 0; i < n && out->status == SN_IDLE; i++)
        nb_event(b, &ev[i], out);
    if (out->status == SN_IDLE)
        refill(b, out);
}

static const sn_type_t nb_type = {
    .name = "nbench", .version = 1, .state_size = sizeof(nb_t), .init = nb_init, .step = nb_step};

/* ----------------------------------------------------- the nodes */

static struct {
    sn_sched_t *sched;
    sn_relay_t *relay;
} nodes[NODES + 1];

static int node_start(uint32_t id, const int *ports, int workers)
{
    char listen[64], eps[NODES][64], err[256] = "";
    sn_peer_config_t peers[NODES - 1];
    size_t np = 0;
    for (uint32_t k = 1; k <= NODES; k++) {
        snprintf(eps[k - 1], sizeof eps[0], "tcp://127.0.0.1:%d", ports[k]);
        if (k != id)
            peers[np++] = (sn_peer_config_t){k, eps[k - 1]};
    }
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", ports[id]);
    nodes[id].sched = sn_sched_new(&(sn_sched_config_t){id, workers, 1});
    if (!nodes[id].sched || sn_type_register(nodes[id].sched, &nb_type) != 0)
        return -1;
    sn_relay_config_t cfg = {.listen = listen,
                             .peers = peers,
                             .npeers = np,
                             .first_serial = 1,
                             .incarnation = (uint64_t)time(NULL),
                             .heartbeat_ms = 200,
                             .down_after_ms = 5000};
    nodes[id].relay = sn_relay_new(nodes[id].sched, &cfg, err, sizeof err);
    if (!nodes[id].relay) {
        fprintf(stderr, "schedbench: names: %s\n", err);
        return -1;
    }
    return 0;
}

static void node_stop(uint32_t id)
{
    if (!nodes[id].sched)
        return;
    sn_sched_shutdown(nodes[id].sched, 2000);
    if (nodes[id].relay)
        sn_relay_destroy(&nodes[id].relay);
    sn_sched_destroy(&nodes[id].sched);
}

/* ----------------------------------------------------- the cases */

/* Spawns a process that stays and waits until it says it is ready. */
static sn_pid_t start_ready(uint32_t node, const char *method, const char *arg, double *secs)
{
    atomic_store_explicit(&ready, 0, memory_order_relaxed);
    sn_payload_t *in = sn_payload_text(arg);
    sn_pid_t pid = SN_PID_NONE;
    double t0 = now_s();
    if (sn_spawn(nodes[node].sched, "nbench", method, &in, NULL, NULL, &pid) != 0)
        return SN_PID_NONE;
    int r;
    for (int t = 0; t < 600000 && (r = atomic_load_explicit(&ready, memory_order_acquire)) == 0; t++)
        usleep(100); /* (acquire: pairs with the process's release) */
    *secs = now_s() - t0;
    return r == 1 ? pid : SN_PID_NONE;
}

/* Runs a process to its end on `node`; the seconds it took, or -1. */
static double run(uint32_t node, const char *method, const char *arg)
{
    sn_payload_t *in = sn_payload_text(arg), *res = NULL;
    double t0 = now_s();
    int rc = sn_call(nodes[node].sched, "nbench", method, &in, 300000, &res);
    double secs = now_s() - t0;
    if (rc != 0)
        fprintf(stderr, "schedbench: names: %s: %s %s\n", method, sn_strerror(rc), res ? (char *)res->data : "");
    sn_payload_destroy(&res);
    return rc == 0 ? secs : -1;
}

/* The registrar ends: its names go with it. */
static void stop(sn_pid_t pid)
{
    sn_cancel(nodes[pid.node].sched, pid);
}

/* Sends by name, then by PID, to a named sink on node 3; 0 or 1. */
static int sends(void)
{
    char arg[64], buf[SN_PID_STRLEN];
    double s;
    snprintf(arg, sizeof arg, "%d bsink1", SEND_N);
    sn_pid_t sink = start_ready(3, "sink", arg, &s);
    double byname = sn_pid_is_none(sink) ? -1 : run(1, "byname", arg);
    snprintf(arg, sizeof arg, "%d bsink2", SEND_N);
    sink = start_ready(3, "sink", arg, &s);
    snprintf(arg, sizeof arg, "%d %s", SEND_N, sn_pid_format(sink, buf, sizeof buf));
    double bypid = sn_pid_is_none(sink) ? -1 : run(1, "bypid", arg);
    if (byname <= 0 || bypid <= 0)
        return 1;
    printf("names: %d messages of %d B, node 1 -> node 3: by name (whereis, then send) %.2f s, by PID %.2f s\n", SEND_N,
           MSG_BYTES, byname, bypid);
    printf("RESULT names-send-by-name-per-s %.0f msgs/s\n", SEND_N / byname);
    printf("RESULT names-send-by-pid-per-s %.0f msgs/s\n", SEND_N / bypid);
    return 0;
}

static int cases(void)
{
    char arg[64];
    double reg = 0;
    snprintf(arg, sizeof arg, "%d bn", REG_N);
    sn_pid_t registrar = start_ready(1, "reg", arg, &reg);
    if (sn_pid_is_none(registrar)) {
        fprintf(stderr, "schedbench: names: the registrations failed\n");
        return 1;
    }
    printf("names: %d registrations from node 1 (%d in flight), owners spread over 3 nodes: %.2f s\n", REG_N, WINDOW,
           reg);
    printf("RESULT names-register-per-s %.0f regs/s\n", REG_N / reg);
    snprintf(arg, sizeof arg, "%d %d bn", REG_N, REG_N);
    double first = run(2, "where", arg);
    snprintf(arg, sizeof arg, "%d %d bn", LOOKUP_N, REG_N);
    double cached = run(2, "where", arg);
    if (first <= 0 || cached <= 0)
        return 1;
    printf("names: whereis from node 2: %d names once (not cached) %.2f s, then %d lookups (cached) %.2f s\n", REG_N,
           first, LOOKUP_N, cached);
    printf("RESULT names-whereis-first-per-s %.0f lookups/s\n", REG_N / first);
    printf("RESULT names-whereis-cached-per-s %.0f lookups/s\n", LOOKUP_N / cached);
    stop(registrar);
    return sends();
}

int sn_bench_names(int workers)
{
    sn_relay_set_log_level(1);
    int ports[NODES + 1], rc = 1;
    for (int k = 1; k <= NODES; k++)
        ports[k] = free_port();
    for (uint32_t k = NODES; k >= 1; k--)
        if (node_start(k, ports, workers) != 0)
            goto out;
    usleep(500000); /* (each registry looks at the membership every 100 ms) */
    rc = cases();
out:
    for (uint32_t k = 1; k <= NODES; k++)
        node_stop(k);
    return rc;
}

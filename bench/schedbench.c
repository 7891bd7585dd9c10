/* schedbench.c - the benchmark driver: `schedbench CASE [--workers N]`.
 * Each case prints what it measured and ends with one line
 *   RESULT <name> <value> <unit>
 * Cases: skynet, pingpong, pairs, spawn, memory, deque, idle, xnode-send, xnode-big,
 * xnode-rtt, steal-imbalance, steal-join, drain, names (names.c), the Savina cases of savina.c
 * (threadring, chameneos, big, fjthrput, count, fjcreate, pipeline, or
 * savina for all seven), all.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "deque.h"
#include "sn_node.h"
#include "savina.h"
#include "names.h"
#include "xnode.h"
#include "schednode/schednode.h"

static int workers = 0;
static sn_savina_opts_t savina_opts; /* --quick, --rounds */

#ifndef SN_PEERS_DIR
#define SN_PEERS_DIR "bench/peers"
#endif

/* Builds and runs the Go peer bench/peers/NAME.go with GOMAXPROCS set to
 * our worker count, for a comparison inside the same run. Returns 0 and
 * the number it printed, or -1 when no Go toolchain is installed. */
static int go_peer(const char *name, double *value)
{
    const char *go = getenv("SN_GO") ? getenv("SN_GO") : "go";
    char cmd[1024], dir[] = "/tmp/schedbench-go-XXXXXX";
    snprintf(cmd, sizeof cmd, "%s version >/dev/null 2>&1", go);
    if (system(cmd) != 0) {
        printf("%s-go: skipped: no Go toolchain (apt-get install golang-go, or set SN_GO)\n", name);
        return -1;
    }
    if (!mkdtemp(dir))
        return -1;
    snprintf(cmd, sizeof cmd,
             "cd %s && GOCACHE=%s/cache GOPATH=%s/path GO111MODULE=off %s build -o %s/%s %s.go && "
             "GOMAXPROCS=%d %s/%s; rm -rf %s",
             SN_PEERS_DIR, dir, dir, go, dir, name, name, workers, dir, name, dir);
    FILE *f = popen(cmd, "r");
    int ok = f && fscanf(f, "%lf", value) == 1;
    if (f)
        pclose(f);
    if (!ok) {
        printf("%s-go: the Go peer failed to build or run\n", name);
        return -1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static sn_sched_t *new_sched(void)
{
    sn_sched_t *s = sn_sched_new(&(sn_sched_config_t){1, workers, 1});
    if (!s) {
        fprintf(stderr, "schedbench: cannot start the scheduler\n");
        exit(1);
    }
    return s;
}

static void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "schedbench: %s: %s\n", what, sn_strerror(rc));
        exit(1);
    }
}

/* ---------------------------------------------------------------- skynet
 * 10-ary tree of processes, 1,000,000 leaves; a leaf sends its number to
 * its parent, a parent sums its ten children's messages and sends the sum
 * up; the root finishes with the total. Spawn + messages only. */
typedef struct sky {
    uint64_t num, size;
    uint64_t sum;
    uint32_t got;
} sky_t;

static int sky_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    sky_t *s = state;
    if (strcmp(method, "node") != 0)
        return SN_ENOMETHOD;
    if (!*input || (*input)->len != 16)
        return SN_EINVAL;
    memcpy(&s->num, (*input)->data, 8);
    memcpy(&s->size, (*input)->data + 8, 8);
    return 0;
}

static void sky_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    sky_t *s = state;
    if (n == 0 && s->got == 0 && s->sum == 0) {
        if (s->size == 1) {
            sn_payload_t *m = sn_payload_u64(s->num);
            sn_out_send(out, sn_ctx_parent(ctx), 0, &m);
            out->status = SN_DONE;
            return;
        }
        uint64_t child = s->size / 10;
        for (uint64_t i = 0; i < 10; i++) {
            uint64_t arg[2] = {s->num + i * child, child};
            sn_payload_t *in = sn_payload_new(SN_CT_USER, arg, sizeof arg);
            sn_out_spawn(out, i, "sky", "node", &in, SN_YIELD_NOREPLY);
        }
        out->status = SN_IDLE;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (ev[i].type != SN_EV_MESSAGE || sn_payload_get_u64(ev[i].data, &v) != 0) {
            sn_out_fail(out, ev[i].error ? ev[i].error : SN_EINVAL, "skynet: unexpected event");
            return;
        }
        s->sum += v;
        s->got++;
    }
    if (s->got < 10) {
        out->status = SN_IDLE;
        return;
    }
    sn_payload_t *m = sn_payload_u64(s->sum);
    if (sn_pid_is_none(sn_ctx_parent(ctx))) {
        sn_out_done(out, &m);
        return;
    }
    sn_out_send(out, sn_ctx_parent(ctx), 0, &m);
    out->status = SN_DONE;
}

static const sn_type_t sky_type = {"sky", 1, sizeof(sky_t), sky_init, sky_step, NULL, NULL, NULL};

static int bench_skynet(void)
{
    sn_sched_t *sched = new_sched();
    must(sn_type_register(sched, &sky_type), "register");
    double best = 1e9;
    uint64_t total = 0;
    for (int run = 0; run < 5; run++) {
        uint64_t arg[2] = {0, 1000000};
        sn_payload_t *in = sn_payload_new(SN_CT_USER, arg, sizeof arg), *res = NULL;
        double t0 = now_s();
        must(sn_call(sched, "sky", "node", &in, 600000, &res), "skynet");
        double ms = (now_s() - t0) * 1e3;
        sn_payload_get_u64(res, &total);
        sn_payload_destroy(&res);
        printf("skynet run %d: result %" PRIu64 " in %.1f ms\n", run + 1, total, ms);
        if (total != 499999500000ull) {
            fprintf(stderr, "schedbench: skynet result %" PRIu64 " is wrong (want 499999500000)\n", total);
            return 1;
        }
        if (ms < best)
            best = ms;
    }
    sn_sched_destroy(&sched);
    printf("skynet: 1,111,111 processes, best of 5, %d workers\n", workers);
    double go_ms;
    if (go_peer("skynet", &go_ms) == 0) {
        printf("RESULT skynet-go %.1f ms\n", go_ms);
        printf("skynet: schednode takes %.2f of Go's time (GOMAXPROCS=%d)\n", best / go_ms, workers);
    }
    printf("RESULT skynet %.1f ms\n", best);
    return 0;
}

/* ------------------------------------------------------ pingpong, pairs */
typedef struct pp {
    sn_pid_t peer;
    uint64_t left;
    int pinger;
} pp_t;

static int pp_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    pp_t *p = state;
    if (strcmp(method, "pong") == 0)
        return 0;
    if (strcmp(method, "ping") != 0)
        return SN_ENOMETHOD;
    if (!*input || (*input)->len != sizeof(sn_pid_t) + 8)
        return SN_EINVAL;
    memcpy(&p->peer, (*input)->data, sizeof p->peer);
    memcpy(&p->left, (*input)->data + sizeof p->peer, 8);
    p->pinger = 1;
    return 0;
}

static void pp_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    pp_t *p = state;
    out->status = SN_IDLE;
    if (p->pinger && n == 0) {
        sn_payload_t *m = sn_payload_u64(0);
        sn_out_send(out, p->peer, 0, &m);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            out->status = SN_DONE;
            return;
        }
        if (ev[i].type != SN_EV_MESSAGE) {
            sn_out_fail(out, ev[i].error, "pingpong: send failed");
            return;
        }
        if (p->pinger && --p->left == 0) {
            if (!sn_pid_is_none(p->peer))
                sn_out_terminate(out, 0, p->peer);
            out->status = SN_DONE;
            return;
        }
        sn_payload_t *m = sn_take(&ev[i].data); /* the same buffer goes back */
        sn_out_send(out, p->pinger ? p->peer : ev[i].from, 0, &m);
    }
}

static const sn_type_t pp_type = {"pp", 1, sizeof(pp_t), pp_init, pp_step, NULL, NULL, NULL};

typedef struct latch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long left;
    int failed;
} latch_t;

static void latch_done(sn_sched_t *s, sn_pid_t pid, sn_status_t st, int err, sn_payload_t **res, void *arg)
{
    latch_t *l = arg;
    pthread_mutex_lock(&l->mu);
    if (st != SN_DONE)
        l->failed = err ? err : SN_EFAILED;
    if (--l->left == 0)
        pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static void latch_wait(latch_t *l)
{
    pthread_mutex_lock(&l->mu);
    while (l->left > 0)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

/* Runs `pairs` ping-pong pairs of `rounds` round trips; returns seconds. */
static double run_pairs(sn_sched_t *sched, int pairs, uint64_t rounds)
{
    latch_t l = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, pairs, 0};
    sn_pid_t *pongs = malloc(sizeof *pongs * (size_t)pairs);
    for (int i = 0; i < pairs; i++)
        must(sn_spawn(sched, "pp", "pong", NULL, NULL, NULL, &pongs[i]), "spawn pong");
    usleep(20000); /* let the pongs go idle */
    double t0 = now_s();
    for (int i = 0; i < pairs; i++) {
        unsigned char arg[sizeof(sn_pid_t) + 8];
        memcpy(arg, &pongs[i], sizeof pongs[i]);
        memcpy(arg + sizeof pongs[i], &rounds, 8);
        sn_payload_t *in = sn_payload_new(SN_CT_USER, arg, sizeof arg);
        must(sn_spawn(sched, "pp", "ping", &in, latch_done, &l, NULL), "spawn ping");
    }
    latch_wait(&l);
    double secs = now_s() - t0;
    free(pongs);
    if (l.failed)
        must(l.failed, "pingpong");
    return secs;
}

static int bench_pingpong(void)
{
    sn_sched_t *sched = new_sched();
    must(sn_type_register(sched, &pp_type), "register");
    const uint64_t rounds = 2000000;
    double best = 0;
    for (int run = 0; run < 3; run++) {
        double s = run_pairs(sched, 1, rounds);
        double rate = (double)rounds / s;
        printf("pingpong run %d: %" PRIu64 " round trips in %.1f ms\n", run + 1, rounds, s * 1e3);
        if (rate > best)
            best = rate;
    }
    sn_sched_destroy(&sched);
    double go_rate;
    if (go_peer("pingpong", &go_rate) == 0) {
        printf("RESULT pingpong-go %.0f roundtrips/s\n", go_rate);
        printf("pingpong: schednode does %.2fx Go channels' round trips (GOMAXPROCS=%d)\n", best / go_rate, workers);
    }
    printf("RESULT pingpong %.0f roundtrips/s\n", best);
    return 0;
}

static int bench_pairs(void)
{
    sn_sched_t *sched = new_sched();
    must(sn_type_register(sched, &pp_type), "register");
    const int pairs = 1000;
    const uint64_t rounds = 2000;
    double best = 0;
    for (int run = 0; run < 3; run++) {
        double s = run_pairs(sched, pairs, rounds);
        double rate = 2.0 * pairs * (double)rounds / s;
        printf("pairs run %d: %d pairs x %" PRIu64 " round trips in %.1f ms\n", run + 1, pairs, rounds, s * 1e3);
        if (rate > best)
            best = rate;
    }
    sn_sched_destroy(&sched);
    printf("RESULT pairs %.0f msgs/s\n", best);
    return 0;
}

/* The cost of timing every step for metrics (--metrics: two clock reads
 * and a histogram bucket per step): the pairs workload, timing off and on
 * in turn, best of three each, in the same run. */
static int bench_step_timing(void)
{
    sn_sched_t *sched = new_sched();
    must(sn_type_register(sched, &pp_type), "register");
    const int pairs = 1000;
    const uint64_t rounds = 2000;
    double best[2] = {0, 0};
    for (int run = 0; run < 6; run++) {
        int on = run % 2;
        sn__sched_time_steps(sched, on);
        double s = run_pairs(sched, pairs, rounds);
        double rate = 2.0 * pairs * (double)rounds / s;
        printf("step-timing run %d (timing %s): %.0f msgs/s\n", run / 2 + 1, on ? "on" : "off", rate);
        if (rate > best[on])
            best[on] = rate;
    }
    sn_sched_destroy(&sched);
    printf("RESULT step-timing-off %.0f msgs/s\nRESULT step-timing-on %.0f msgs/s\n", best[0], best[1]);
    printf("step-timing: timed steps run at %.3fx the untimed rate\n", best[1] / best[0]);
    return 0;
}

/* ----------------------------------------------------------------- spawn
 * A spawner process starts children in batches of 100 and awaits each
 * batch; a child finishes in its first step. */
typedef struct spawner {
    uint64_t left, waiting;
} spawner_t;

static int sp_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    spawner_t *s = state;
    if (strcmp(method, "child") == 0)
        return 0;
    if (strcmp(method, "spawner") != 0)
        return SN_ENOMETHOD;
    return sn_payload_get_u64(*input, &s->left) == 0 ? 0 : SN_EINVAL;
}

static void sp_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    spawner_t *s = state;
    if (s->left == 0 && s->waiting == 0 && n == 0) { /* a child */
        out->status = SN_DONE;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].error) {
            sn_out_fail(out, ev[i].error, "child failed");
            return;
        }
        s->waiting--;
    }
    if (s->waiting == 0) {
        if (s->left == 0) {
            out->status = SN_DONE;
            return;
        }
        uint64_t batch = s->left < 100 ? s->left : 100;
        for (uint64_t i = 0; i < batch; i++)
            sn_out_spawn(out, i, "spawner", "child", NULL, SN_YIELD_AWAIT);
        s->left -= batch;
        s->waiting = batch;
    }
    out->status = SN_WAIT;
}

static const sn_type_t sp_type = {"spawner", 1, sizeof(spawner_t), sp_init, sp_step, NULL, NULL, NULL};

static int bench_spawn(void)
{
    sn_sched_t *sched = new_sched();
    must(sn_type_register(sched, &sp_type), "register");
    const uint64_t n = 1000000;
    double best = 0;
    for (int run = 0; run < 3; run++) {
        sn_payload_t *in = sn_payload_u64(n), *res = NULL;
        double t0 = now_s();
        must(sn_call(sched, "spawner", "spawner", &in, 600000, &res), "spawn");
        double s = now_s() - t0;
        sn_payload_destroy(&res);
        printf("spawn run %d: %" PRIu64 " spawn-run-exit in %.1f ms\n", run + 1, n, s * 1e3);
        if ((double)n / s > best)
            best = (double)n / s;
    }
    sn_sched_destroy(&sched);
    printf("RESULT spawn %.0f procs/s\n", best);
    return 0;
}

/* ---------------------------------------------------------------- memory
 * 1,000,000 processes that ran once and now wait for messages. A loader
 * process spawns them 1,000 per step and yields (CONTINUE) in between. */
static _Atomic long idle_started;

typedef struct idler {
    uint64_t left; /* loader only */
    uint64_t value;
} idler_t;

static int idle_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    idler_t *s = state;
    if (strcmp(method, "idle") == 0)
        return 0;
    if (strcmp(method, "loader") != 0)
        return SN_ENOMETHOD;
    return sn_payload_get_u64(*input, &s->left) == 0 ? 0 : SN_EINVAL;
}

static void idle_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    idler_t *s = state;
    for (size_t i = 0; i < n; i++)
        if (ev[i].type == SN_EV_CANCEL) {
            out->status = SN_DONE;
            return;
        }
    if (s->left) {
        for (int i = 0; i < 1000 && s->left; i++, s->left--)
            sn_out_spawn(out, 0, "idler", "idle", NULL, SN_YIELD_NOREPLY);
        out->status = s->left ? SN_CONTINUE : SN_DONE;
        return;
    }
    if (n == 0)
        atomic_fetch_add_explicit(&idle_started, 1, memory_order_relaxed);
    out->status = SN_IDLE;
}

static const sn_type_t idle_type = {"idler", 1, sizeof(idler_t), idle_init, idle_step, NULL, NULL, NULL};

static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * sysconf(_SC_PAGESIZE);
}

static int bench_memory(void)
{
    sn_sched_t *sched = new_sched();
    must(sn_type_register(sched, &idle_type), "register");
    const long n = 1000000;
    usleep(50000);
    long before = rss_bytes();
    sn_payload_t *in = sn_payload_u64((uint64_t)n), *res = NULL;
    must(sn_call(sched, "idler", "loader", &in, 600000, &res), "loader");
    while (atomic_load(&idle_started) < n)
        usleep(1000);
    long after = rss_bytes();
    sn_stats_t st;
    sn_sched_stats(sched, &st);
    printf("memory: %ld idle processes (%" PRIu64 " live), RSS %ld -> %ld KiB; per process: %zu state bytes\n", n,
           st.live, before / 1024, after / 1024, sizeof(idler_t));
    double t0 = now_s();
    sn_sched_destroy(&sched);
    printf("memory: shutdown of %ld processes took %.0f ms\n", n, (now_s() - t0) * 1e3);
    printf("RESULT memory %.0f bytes/proc\n", (double)(after - before) / (double)n);
    return 0;
}

/* ----------------------------------------------------------------- deque */
typedef struct dq_arg {
    sn__deque_t *d;
    _Atomic int *stop;
    long taken;
} dq_arg_t;

static void *dq_thief(void *arg)
{
    dq_arg_t *a = arg;
    void *items[SN__STEAL_MAX];
    while (!atomic_load_explicit(a->stop, memory_order_relaxed)) {
        int n;
        if (sn__deque_steal_half(a->d, items, SN__STEAL_MAX, &n) == SN__STEAL_OK)
            a->taken += n;
    }
    return NULL;
}

static int bench_deque(void)
{
    sn__deque_t d;
    if (sn__deque_init(&d, 1024) != 0)
        return 1;
    const long ops = 50000000;
    double t0 = now_s();
    for (long i = 0; i < ops; i++) {
        sn__deque_push(&d, (void *)(uintptr_t)(i + 1));
        if (!sn__deque_pop(&d))
            return 1;
    }
    double pushpop_ns = (now_s() - t0) * 1e9 / (double)ops;
    printf("deque: %ld push+pop pairs, owner alone: %.2f ns per pair\n", ops, pushpop_ns);

    int thieves = (workers > 1 ? workers : 2) - 1;
    _Atomic int stop = 0;
    dq_arg_t *args = calloc((size_t)thieves, sizeof *args);
    pthread_t *th = calloc((size_t)thieves, sizeof *th);
    for (int i = 0; i < thieves; i++) {
        args[i] = (dq_arg_t){&d, &stop, 0};
        pthread_create(&th[i], NULL, dq_thief, &args[i]);
    }
    /* the owner keeps the deque stocked and pops too: real contention */
    long pushed = 0, popped = 0;
    t0 = now_s();
    double end = t0 + 1.0;
    while (now_s() < end) {
        for (int k = 0; k < 1024; k++) {
            sn__deque_push(&d, (void *)(uintptr_t)(++pushed));
            if (k % 4 == 0 && sn__deque_pop(&d))
                popped++;
        }
    }
    atomic_store(&stop, 1);
    long stolen = 0;
    for (int i = 0; i < thieves; i++) {
        pthread_join(th[i], NULL);
        stolen += args[i].taken;
    }
    double secs = now_s() - t0;
    while (sn__deque_pop(&d))
        popped++;
    if (popped + stolen != pushed) {
        fprintf(stderr, "schedbench: deque lost or duplicated items: %ld pushed, %ld taken\n", pushed, popped + stolen);
        return 1;
    }
    printf("deque: %d thief(s) stole %ld of %ld items in %.2f s while the owner pushed and popped\n", thieves, stolen,
           pushed, secs);
    free(args);
    free(th);
    sn__deque_fini(&d);
    printf("RESULT deque-pushpop %.2f ns/op\n", pushpop_ns);
    printf("RESULT deque-steal-half %.0f items/s\n", (double)stolen / secs);
    return 0;
}

/* ------------------------------------------------------------------ idle */
static int bench_idle(void)
{
    sn_sched_t *sched = new_sched();
    usleep(200000);
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    double t0 = now_s();
    sleep(2);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    double cpu = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    double wall = now_s() - t0;
    sn_sched_destroy(&sched);
    printf("idle: %d workers used %.3f ms CPU in %.2f s\n", workers, cpu * 1e3, wall);
    printf("RESULT idle-cpu %.3f %%\n", 100.0 * cpu / wall);
    return 0;
}

static int bench_xnode_send(void)
{
    return sn_bench_xnode_send(workers);
}
static int bench_xnode_big(void)
{
    return sn_bench_xnode_big(workers);
}
static int breakdown; /* --breakdown: xnode-rtt's hops */

static int bench_xnode_rtt(void)
{
    return sn_bench_xnode_rtt(workers, breakdown);
}
static int bench_steal_imbalance(void)
{
    return sn_bench_steal_imbalance();
}
static int bench_steal_join(void)
{
    return sn_bench_steal_join();
}
static long drain_procs = 100000; /* --drain-procs: the processes `drain` moves */
static int bench_drain(void)
{
    return sn_bench_drain(drain_procs);
}

static int bench_names(void)
{
    return sn_bench_names(1);
}

static const struct {
    const char *name;
    int (*fn)(void);
} cases[] = {{"skynet", bench_skynet},
             {"pingpong", bench_pingpong},
             {"pairs", bench_pairs},
             {"step-timing", bench_step_timing},
             {"spawn", bench_spawn},
             {"memory", bench_memory},
             {"deque", bench_deque},
             {"idle", bench_idle},
             {"xnode-send", bench_xnode_send},
             {"xnode-big", bench_xnode_big},
             {"xnode-rtt", bench_xnode_rtt},
             {"steal-imbalance", bench_steal_imbalance},
             {"steal-join", bench_steal_join},
             {"drain", bench_drain},
             {"names", bench_names}};

static void usage(FILE *f)
{
    fprintf(f, "usage: schedbench [--workers N] [--quick] [--rounds N] [--breakdown] CASE...\ncases: all");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        fprintf(f, " %s", cases[i].name);
    fprintf(f, " savina threadring chameneos big fjthrput count fjcreate pipeline\n"
               "  --quick     the Savina cases at small sizes, results checked, no Go peer\n"
               "  --rounds N  timed rounds of a Savina case (default 3; medians compared)\n"
               "  --breakdown xnode-rtt: the latency of each hop of a round trip (p50, p99)\n"
               "  --drain-procs N  drain: idle processes moved from one node to another (default 100000)\n");
}

/* A number from lo to hi for option `name`, or -1 (and a line saying why). */
static long num_arg(const char *name, const char *text, long lo, long hi)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < lo || v > hi) {
        fprintf(stderr, "schedbench: --%s: '%s' is not a number from %ld to %ld\n", name, text, lo, hi);
        return -1;
    }
    return v;
}

/* Parses the options; 0, or the exit code (2 for a bad one, -1 for --help). */
static int parse_opts(int argc, char **argv)
{
    static const struct option opts[] = {{"workers", required_argument, NULL, 'w'},
                                         {"quick", no_argument, NULL, 'q'},
                                         {"rounds", required_argument, NULL, 'r'},
                                         {"breakdown", no_argument, NULL, 'b'},
                                         {"drain-procs", required_argument, NULL, 'd'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    long v;
    while ((c = getopt_long(argc, argv, "w:qr:h", opts, NULL)) != -1) {
        if (c == 'w') {
            if ((v = num_arg("workers", optarg, 1, 1024)) < 0)
                return 2;
            workers = (int)v;
        } else if (c == 'r') {
            if ((v = num_arg("rounds", optarg, 1, 15)) < 0)
                return 2;
            savina_opts.rounds = (int)v;
        } else if (c == 'b') {
            breakdown = 1;
        } else if (c == 'd') {
            if ((v = num_arg("drain-procs", optarg, 1, 10000000)) < 0)
                return 2;
            drain_procs = v;
        } else if (c == 'q') {
            savina_opts.quick = 1;
        } else if (c == 'h') {
            usage(stdout);
            return -1;
        } else {
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

static int run_named(const char *name)
{
    int found = 0, rc = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (!strcmp(name, "all") || !strcmp(name, cases[k].name)) {
            found = 1;
            fflush(stdout);
            rc |= cases[k].fn();
            fflush(stdout);
        }
    }
    if (!strcmp(name, "all") || sn_savina_has(name)) {
        found = 1;
        savina_opts.workers = workers;
        rc |= sn_bench_savina(!strcmp(name, "all") ? "savina" : name, &savina_opts);
        fflush(stdout);
    }
    if (!found) {
        fprintf(stderr, "schedbench: unknown case '%s'\n", name);
        usage(stderr);
        return 2;
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strncmp(argv[1], "__", 2))
        return sn_bench_raw_child(argc, argv);
    int rc = parse_opts(argc, argv);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        workers = n > 0 ? (int)n : 1;
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    for (int i = optind; i < argc; i++) {
        int r = run_named(argv[i]);
        if (r == 2)
            return 2;
        rc |= r;
    }
    return rc;
}

/* apibench.c - what the bulk and shared-payload APIs save, each against
 * its peer in the same run: N messages from one process to a sink on the
 * same node by sn_out_send against sn_out_send_many, both sliced into
 * CONTINUE steps of 1,000 (as users did) and both in one step; one 16 KB table to 1,000 processes as
 * 1,000 copies against 1,000 references to one shared buffer.
 *
 * usage: apibench [--workers N] [--messages N] [--rounds N]
 * Prints `RESULT <case> <ms> ms` per case (median of the rounds) and the
 * ratios; each case checks its result (count, order, contents).
 */
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schednode/schednode.h"

#define SLICE 1000
#define TABLE_BYTES 16384
#define FANOUT 1000

static uint64_t g_n = 2000000;
static atomic_long g_bad;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------ sink and source */

/* "sink": counts messages 0..n-1 in order, done with the count. */
static int sink_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx, (void)method, (void)input, (void)state;
    return 0;
}

static void sink_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    uint64_t *next = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (ev[i].type != SN_EV_MESSAGE || sn_payload_get_u64(ev[i].data, &v) != 0 || v != *next)
            atomic_fetch_add(&g_bad, 1);
        (*next)++;
    }
    if (*next == g_n)
        sn_out_done(out, &(sn_payload_t *){sn_payload_u64(*next)});
}

/* "source" (input: the sink's PID). Methods: "send" (sn_out_send, SLICE a
 * step, CONTINUE in between), "many" (one sn_out_send_many of SLICE a step),
 * "send1" (every sn_out_send in one step), "many1" (one sn_out_send_many of
 * all). */
typedef struct source {
    sn_pid_t sink;
    int many, whole;
    uint64_t sent;
} source_t;

static int source_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    source_t *s = state;
    s->many = !strncmp(method, "many", 4);
    s->whole = method[strlen(method) - 1] == '1';
    return sn_payload_get_pid(*input, &s->sink);
}

static void source_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx, (void)ev, (void)n;
    source_t *s = state;
    uint64_t k = s->whole ? g_n - s->sent : (g_n - s->sent < SLICE ? g_n - s->sent : SLICE);
    if (s->many) {
        sn_payload_t **m = malloc(k * sizeof *m);
        for (uint64_t i = 0; i < k; i++)
            m[i] = sn_payload_u64(s->sent + i);
        if (sn_out_send_many(out, s->sink, 0, m, k) != 0)
            atomic_fetch_add(&g_bad, 1);
        free(m);
    } else {
        for (uint64_t i = 0; i < k; i++)
            sn_out_send(out, s->sink, 0, &(sn_payload_t *){sn_payload_u64(s->sent + i)});
    }
    s->sent += k;
    out->status = s->sent < g_n ? SN_CONTINUE : SN_DONE;
}

/* ------------------------------------------------------------- fan-out */

/* "reader": checks the table it gets, done. */
static void reader_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx, (void)state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        const sn_payload_t *t = ev[i].data;
        if (!t || t->len != TABLE_BYTES || t->data[TABLE_BYTES - 1] != (unsigned char)(TABLE_BYTES - 1))
            atomic_fetch_add(&g_bad, 1);
        sn_out_done(out, NULL);
    }
}

/* "fan" (method "copy" or "share"): the table to FANOUT readers it spawns. */
static int fan_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx, (void)input;
    *(int *)state = !strcmp(method, "share");
    return 0;
}

static void fan_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    int share = *(int *)state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) /* the readers' PIDs: send each the table */
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 1) {
            static sn_payload_t *table; /* (one fan runs at a time) */
            if (!table) {
                table = sn_payload_new(SN_CT_BYTES, NULL, TABLE_BYTES);
                for (int k = 0; k < TABLE_BYTES; k++)
                    table->data[k] = (unsigned char)k;
                if (share)
                    table = sn_payload_share(&table);
            }
            sn_payload_t *m = sn_payload_dup(table); /* a reference, or a copy */
            sn_out_send(out, ev[i].from, 0, &m);
            if (++*((int *)state + 1) == FANOUT) {
                sn_payload_destroy(&table);
                sn_out_done(out, NULL);
            }
        }
    if (n == 0)
        for (int k = 0; k < FANOUT; k++)
            sn_out_spawn(out, 1, "reader", "read", NULL, 0);
}

static const sn_type_t types[] = {
    {.name = "sink", .version = 1, .state_size = 8, .init = sink_init, .step = sink_step},
    {.name = "source", .version = 1, .state_size = sizeof(source_t), .init = source_init, .step = source_step},
    {.name = "reader", .version = 1, .init = sink_init, .step = reader_step},
    {.name = "fan", .version = 1, .state_size = 2 * sizeof(int), .init = fan_init, .step = fan_step},
};

/* ---------------------------------------------------------------- runs */

static atomic_int g_sink_done;

static void sink_done(sn_sched_t *s, sn_pid_t pid, sn_status_t st, int err, sn_payload_t **res, void *arg)
{
    (void)s, (void)pid, (void)res, (void)arg;
    if (st != SN_DONE || err)
        atomic_fetch_add(&g_bad, 1);
    atomic_store(&g_sink_done, 1);
}

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static double run_send(sn_sched_t *s, const char *method)
{
    sn_pid_t sink;
    sn_payload_t *res = NULL;
    atomic_store(&g_sink_done, 0);
    if (sn_spawn(s, "sink", "count", NULL, sink_done, NULL, &sink) != 0)
        abort();
    double t0 = now_ms();
    sn_payload_t *in = sn_payload_pid(sink);
    if (sn_call(s, "source", method, &in, 60000, &res) != 0)
        atomic_fetch_add(&g_bad, 1);
    sn_payload_destroy(&res);
    while (!atomic_load(&g_sink_done)) /* the sink has them all */
        pause_us(100);
    return now_ms() - t0;
}

static double run_fan(sn_sched_t *s, const char *method)
{
    sn_payload_t *res = NULL;
    double t0 = now_ms();
    if (sn_call(s, "fan", method, NULL, 60000, &res) != 0)
        atomic_fetch_add(&g_bad, 1);
    sn_payload_destroy(&res);
    sn_stats_t st;
    for (sn_sched_stats(s, &st); st.live > 0; sn_sched_stats(s, &st)) /* until every reader is done */
        pause_us(100);
    return now_ms() - t0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double (*run)(sn_sched_t *, const char *), sn_sched_t *s, const char *m, int rounds)
{
    double t[16];
    for (int r = 0; r < rounds; r++)
        t[r] = run(s, m);
    qsort(t, (size_t)rounds, sizeof *t, cmp);
    return t[rounds / 2];
}

int main(int argc, char **argv)
{
    int workers = 2, rounds = 3;
    static const struct option opts[] = {
        {"workers", 1, NULL, 'w'}, {"messages", 1, NULL, 'n'}, {"rounds", 1, NULL, 'r'}, {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'w')
            workers = atoi(optarg);
        else if (c == 'n')
            g_n = strtoull(optarg, NULL, 10);
        else if (c == 'r')
            rounds = atoi(optarg);
        else
            return 2;
    }
    if (workers < 1 || g_n < 2 || rounds < 1 || rounds > 16) {
        fprintf(stderr, "apibench: --workers >= 1, --messages >= 2, --rounds 1..16\n");
        return 2;
    }
    sn_sched_t *s = sn_sched_new(&(sn_sched_config_t){.node_id = 1, .workers = workers});
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        sn_type_register(s, &types[i]);
    double send = median(run_send, s, "send", rounds), many = median(run_send, s, "many", rounds);
    double send1 = median(run_send, s, "send1", rounds), many1 = median(run_send, s, "many1", rounds);
    double copy = median(run_fan, s, "copy", rounds), share = median(run_fan, s, "share", rounds);
    sn_sched_destroy(&s);
    printf("RESULT bulk-send-sliced %.1f ms\nRESULT bulk-send-many-sliced %.1f ms\n", send, many);
    printf("RESULT bulk-send-onestep %.1f ms\nRESULT bulk-send-many-onestep %.1f ms\n", send1, many1);
    printf("RESULT fanout16k-copy %.1f ms\nRESULT fanout16k-share %.1f ms\n", copy, share);
    printf("%llu messages, %d workers: send_many/send %.2f sliced by %d, %.2f in one step; 16 KB to %d: share/copy "
           "%.2f; bad %ld\n",
           (unsigned long long)g_n, workers, many / send, SLICE, many1 / send1, FANOUT, share / copy,
           atomic_load(&g_bad));
    return atomic_load(&g_bad) ? 1 : 0;
}

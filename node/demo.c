/* demo.c - `schednode demo`: a fork-join tree (spawn + await), a token
 * ring (messages), timers, and an error path (an unknown command), run on
 * the types of the demo plugin (demo_types.c), with the node's counters
 * printed at the end.
 */
#include "demo.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

/* tree's argument: the range [lo, hi) it sums (demo_types.c) */
typedef struct range {
    uint64_t lo, hi;
} range_t;

static double since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

int sn_demo_run(sn_sched_t *sched)
{
    int failures = 0;
    struct timespec t0;
    sn_payload_t *res = NULL;
    uint64_t v = 0;

    int workers = sn_sched_workers(sched);
    printf("schednode demo: node %u, %d worker%s\n\n", sn_sched_node_id(sched), workers, workers == 1 ? "" : "s");

    /* 1. fork-join */
    range_t r = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = sn_call(sched, "tree", "sum", &(sn_payload_t *){sn_payload_new(SN_CT_USER, &r, sizeof r)}, 60000, &res);
    sn_payload_get_u64(res, &v);
    printf("1. fork-join tree  sum(0..999999) = %" PRIu64 " (expected 499999500000) in %.1f ms: %s\n", v, since(&t0),
           rc == 0 && v == 499999500000ull ? "ok" : "WRONG");
    failures += !(rc == 0 && v == 499999500000ull);
    sn_payload_destroy(&res);

    /* 2. token ring */
    uint64_t cfg[2] = {1000, 100};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = sn_call(sched, "ring", "coordinator", &(sn_payload_t *){sn_payload_new(SN_CT_USER, cfg, sizeof cfg)}, 60000,
                 &res);
    v = 0;
    sn_payload_get_u64(res, &v);
    double ms = since(&t0);
    printf("2. token ring      %" PRIu64 " members x %" PRIu64 " laps = %" PRIu64
           " hops in %.1f ms (%.2f M msgs/s): %s\n",
           cfg[0], cfg[1], v, ms, (double)v / ms / 1e3, rc == 0 && v == cfg[0] * cfg[1] ? "ok" : "WRONG");
    failures += !(rc == 0 && v == cfg[0] * cfg[1]);
    sn_payload_destroy(&res);

    /* 3. timers */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = sn_call(sched, "sleeper", "nap", &(sn_payload_t *){sn_payload_u64(50)}, 10000, &res);
    v = 0;
    sn_payload_get_u64(res, &v);
    printf("3. timer           slept %" PRIu64 " ms for a 50 ms sleep: %s\n", v, rc == 0 && v >= 50 ? "ok" : "WRONG");
    failures += !(rc == 0 && v >= 50);
    sn_payload_destroy(&res);

    /* 4. errors come back with a reason */
    rc = sn_call(sched, "oops", "try", NULL, 10000, &res);
    printf("4. unknown command the process failed with '%s': %s\n", res ? (const char *)res->data : "(no reason)",
           rc == SN_ENOCMD ? "ok" : "WRONG");
    failures += rc != SN_ENOCMD;
    sn_payload_destroy(&res);
    rc = sn_call(sched, "tree", "no-such-method", NULL, 10000, &res);
    printf("5. unknown method  spawn refused: %s: %s\n", sn_strerror(rc), rc == SN_ENOMETHOD ? "ok" : "WRONG");
    failures += rc != SN_ENOMETHOD;

    sn_stats_t st;
    sn_sched_stats(sched, &st);
    printf("\nnode %u counters\n", sn_sched_node_id(sched));
    printf("  %-22s %" PRIu64 "\n  %-22s %" PRIu64 "\n  %-22s %" PRIu64 "\n  %-22s %" PRIu64 "\n"
           "  %-22s %" PRIu64 " (%" PRIu64 " process%s moved)\n  %-22s %" PRIu64 "\n",
           "processes spawned", st.spawned, "processes completed", st.completed, "steps run", st.steps,
           "messages delivered", st.messages, "worker steals", st.steals, st.stolen, st.stolen == 1 ? "" : "es",
           "worker parks", st.parks);
    printf("\n%s\n", failures ? "demo FAILED" : "demo ok");
    return failures ? 1 : 0;
}

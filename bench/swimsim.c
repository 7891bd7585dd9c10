/* swimsim.c - the membership protocol (relay/swim.c, the code the nodes
 * run) at sizes one machine cannot start as processes: N members on a
 * simulated network (each message lost with probability --loss, delayed
 * uniformly in [--delay-min, --delay-max]) and a simulated clock.
 *
 * Phases: every member starts knowing every other (as after their joins);
 * --warmup seconds of quiet (false suspicions and deaths are counted);
 * --crash members are killed at once (they stop answering and sending);
 * --settle seconds for the rest to see them dead; then one new member
 * joins through member 1 (it gets the view; member 1 broadcasts it, as the
 * relay does) and --settle seconds for everyone to know it. With
 * --join-crash MS the new member is killed MS after its join, and --settle
 * seconds more for the rest to see it dead (a node that dies right after
 * a deploy); --bound MS makes --check fail if that took longer.
 *
 * Prints, for a benchmark:
 *   RESULT swimsim-N-detect-first <ms> ms   crash to the first live member holding each dead
 *   RESULT swimsim-N-detect-all <ms> ms     crash to every live member holding every crashed one dead
 *   RESULT swimsim-N-join-all <ms> ms       join to every member knowing the new one
 *   RESULT swimsim-N-join-crash-detect-all <ms> ms  (--join-crash) its kill to every
 *                                           live member holding it dead
 *   RESULT swimsim-N-false-positives <n>    live members declared dead by anyone
 *   RESULT swimsim-N-suspicions-live <n>    suspicions of live members (refuted)
 *   RESULT swimsim-N-msgs-per-node-s <m>    messages each member sent per second, on average
 *   RESULT swimsim-N-msgs-per-node-s-quiet <m>  the same over the warm-up only
 * and exits 1 if a crash was not detected by everyone, a live member was
 * declared dead, or the join did not reach everyone (--check, for CTest).
 *
 * Faults on top of loss and delay, for the whole run:
 *   --cut A-B    the link between members A and B drops everything, both
 *                ways (tests/faults.sh's link cut: the others reach both);
 *   --slow N:MS  messages to or from member N take up to MS more
 *                (uniform): a node whose relay is busy, as a middleman
 *                of heavy traffic is on a loaded machine;
 *   --stall N:MS member N does not run for MS, then runs for 2.5 to 7.5 s
 *                (uniform), and again: a process starved of CPU or
 *                paused; what reaches it waits, its timers fire late.
 * With --crash 0 only the quiet verdicts apply (no false death, the join);
 * --trace says who declared whom dead, and when, for each false death.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "swim.h"

enum { EV_TICK, EV_MSG, EV_BCAST };

typedef struct ev {
    uint64_t t;
    uint32_t seq; /* ties: first in, first out */
    uint8_t kind;
    uint32_t to, from, gen;
    union {
        sn_swim_msg_t msg;
        sn_swim_update_t u;
    };
} ev_t;

typedef struct node {
    sn_swim_t *swim;
    bool dead;
    uint64_t stalled_until; /* --stall: what comes before this waits until then */
    uint64_t next_stall;    /* when its next stall begins */
    uint64_t tick_at;       /* the tick queued for it (0: none) */
    uint32_t gen;           /* its live tick's number: older ones are stale */
} node_t;

static struct {
    ev_t *h; /* a binary min-heap on (t, seq) */
    size_t n, cap;
    uint32_t seq;
} heap;

static node_t *nodes; /* 1..N (+1 for the joiner) */
static uint32_t nn;   /* nodes in use */
static uint64_t now, rng = 88172645463325252u;
static double loss;
static uint64_t dmin, dmax;
static uint64_t sent, sent_quiet;
static uint32_t cut_a, cut_b; /* --cut: this link drops everything (0: none) */
static uint32_t slow_node;    /* --slow: this member's messages are late (0: none) */
static uint64_t slow_ns;      /* by up to this much */
static bool trace;            /* --trace: each false death on stderr */
static uint32_t stall_node;   /* --stall: this member stops now and then (0: none) */
static uint64_t stall_ns;     /* for this long */
#define STALL_EVERY_NS 5000000000u
static bool quiet; /* counting the warm-up's messages */
/* verdicts */
static uint32_t *crashed;
static size_t ncrashed;
static uint64_t crash_at, join_at, first_dead_at, all_dead_at, all_join_at;
static uint32_t joiner;
static uint64_t join_crash_at, join_dead_at; /* --join-crash: its kill; every live member holding it dead */
static uint64_t false_positives, live_suspicions;
static uint32_t *dead_seen; /* per crashed member: live members that hold it dead */
static uint32_t join_seen;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool before(const ev_t *a, const ev_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void push(ev_t *e)
{
    if (heap.n == heap.cap) {
        heap.cap = heap.cap ? heap.cap * 2 : 4096;
        heap.h = realloc(heap.h, heap.cap * sizeof *heap.h);
        if (!heap.h) {
            fprintf(stderr, "swimsim: out of memory\n");
            exit(2);
        }
    }
    e->seq = heap.seq++;
    size_t i = heap.n++;
    while (i && before(e, &heap.h[(i - 1) / 2])) {
        heap.h[i] = heap.h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap.h[i] = *e;
}

static void pop(ev_t *out)
{
    *out = heap.h[0];
    ev_t last = heap.h[--heap.n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= heap.n)
            break;
        if (c + 1 < heap.n && before(&heap.h[c + 1], &heap.h[c]))
            c++;
        if (!before(&heap.h[c], &last))
            break;
        heap.h[i] = heap.h[c];
        i = c;
    }
    if (heap.n)
        heap.h[i] = last;
}

static uint64_t delay(void)
{
    return dmin + (dmax > dmin ? rnd() % (dmax - dmin + 1) : 0);
}
static bool lost(void)
{
    return loss > 0 && (double)(rnd() % 1000000) < loss * 1e6;
}
static bool cut(uint32_t from, uint32_t to)
{
    return cut_a && ((from == cut_a && to == cut_b) || (from == cut_b && to == cut_a));
}
/* the delay of one message from `from` to `to` */
static uint64_t delay_of(uint32_t from, uint32_t to)
{
    uint64_t d = delay();
    if (slow_node && (from == slow_node || to == slow_node))
        d += rnd() % (slow_ns + 1);
    return d;
}

static void io_send(void *arg, uint32_t to, const sn_swim_msg_t *m)
{
    uint32_t from = (uint32_t)(uintptr_t)arg;
    sent++;
    if (quiet)
        sent_quiet++;
    if (lost() || cut(from, to))
        return;
    ev_t e = {.t = now + delay_of(from, to), .kind = EV_MSG, .to = to, .from = from};
    e.msg = *m;
    push(&e);
}

static void io_broadcast(void *arg, const sn_swim_update_t *u)
{
    uint32_t from = (uint32_t)(uintptr_t)arg;
    for (uint32_t i = 1; i <= nn; i++) {
        if (i == from)
            continue;
        sent++;
        if (quiet)
            sent_quiet++;
        if (lost() || cut(from, i))
            continue;
        ev_t e = {.t = now + delay_of(from, i), .kind = EV_BCAST, .to = i, .from = from};
        e.u = *u;
        push(&e);
    }
}

static bool is_crashed(uint32_t node)
{
    for (size_t i = 0; i < ncrashed; i++)
        if (crashed[i] == node)
            return true;
    return false;
}

static void io_changed(void *arg, uint32_t node, uint64_t run, int state, int was)
{
    uint32_t self = (uint32_t)(uintptr_t)arg;
    (void)run;
    if (nodes[self].dead)
        return;
    bool gone = is_crashed(node);
    if (state == SN_SWIM_SUSPECT && !gone)
        live_suspicions++;
    if (state == SN_SWIM_DEAD && !gone) {
        false_positives++;
        if (trace)
            fprintf(stderr, "swimsim: t=%.3f s: member %" PRIu32 " declared %" PRIu32 " dead\n", (double)now / 1e9,
                    self, node);
    }
    if (state == SN_SWIM_DEAD && gone && was != SN_SWIM_DEAD) {
        for (size_t i = 0; i < ncrashed; i++)
            if (crashed[i] == node && ++dead_seen[i] == 1 && !first_dead_at)
                first_dead_at = now;
    }
    if (state == SN_SWIM_ALIVE && node == joiner && was == -1)
        join_seen++;
}

static void schedule(uint32_t i)
{
    node_t *n = &nodes[i];
    if (n->dead)
        return;
    uint64_t t = sn_swim_next_ns(n->swim);
    if (t < now)
        t = now;
    if (n->tick_at && n->tick_at <= t)
        return;
    n->tick_at = t;
    ev_t e = {.t = t, .kind = EV_TICK, .to = i, .gen = ++n->gen};
    push(&e);
}

static void make(uint32_t i, uint64_t period_ns)
{
    sn_swim_config_t cfg = {.period_ns = period_ns};
    sn_swim_io_t io = {io_send, io_broadcast, io_changed, (void *)(uintptr_t)i};
    nodes[i].swim = sn_swim_new(i, 1, &cfg, &io, rnd() | 1);
    if (!nodes[i].swim) {
        fprintf(stderr, "swimsim: out of memory\n");
        exit(2);
    }
}

/* Runs events until time `until`; stops early when done() says so. */
static void run(uint64_t until, bool (*done)(void))
{
    ev_t e;
    while (heap.n && heap.h[0].t <= until) {
        pop(&e);
        now = e.t;
        node_t *n = &nodes[e.to];
        if (n->dead)
            continue;
        if (e.to == stall_node && now >= n->next_stall) { /* a stall begins */
            n->stalled_until = n->next_stall + stall_ns;
            n->next_stall = n->stalled_until + STALL_EVERY_NS / 2 + rnd() % STALL_EVERY_NS;
        }
        if (now < n->stalled_until) { /* it runs again then, and takes this in order */
            e.t = n->stalled_until;
            if (e.kind == EV_TICK)
                n->tick_at = e.t;
            push(&e);
            continue;
        }
        switch (e.kind) {
        case EV_TICK:
            if (e.gen != n->gen)
                continue; /* replaced by an earlier one */
            n->tick_at = 0;
            sn_swim_tick(n->swim, now);
            break;
        case EV_MSG:
            sn_swim_heard(n->swim, e.from, 1, now);
            sn_swim_recv(n->swim, e.from, &e.msg, now);
            break;
        case EV_BCAST:
            sn_swim_heard(n->swim, e.from, 1, now);
            sn_swim_apply(n->swim, e.from, &e.u, now);
            break;
        }
        schedule(e.to);
        if (done && done())
            return;
    }
    now = until;
}

static uint32_t live_count(void)
{
    uint32_t c = 0;
    for (uint32_t i = 1; i <= nn; i++)
        c += !nodes[i].dead;
    return c;
}

static bool all_dead_seen(void)
{
    uint32_t live = live_count();
    for (size_t i = 0; i < ncrashed; i++)
        if (dead_seen[i] < live)
            return false;
    if (!all_dead_at)
        all_dead_at = now;
    return false; /* (keep running to the end of the phase: false positives still count) */
}

static bool joiner_dead_seen(void)
{
    if (!join_dead_at && dead_seen[ncrashed - 1] >= live_count())
        join_dead_at = now;
    return false;
}

static bool all_join_seen(void)
{
    if (join_seen >= live_count() - 1 && !all_join_at)
        all_join_at = now;
    return false;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: swimsim [--members N] [--crash K] [--loss P] [--delay-min MS] [--delay-max MS]\n"
               "               [--period MS] [--warmup S] [--settle S] [--seed X] [--cut A-B] [--slow N:MS]\n"
               "               [--stall N:MS] [--join-crash MS] [--bound MS] [--trace] [--check]\n");
}

/* The command line, as given (--loss and --seed go straight to `loss` and `rng`). */
typedef struct args {
    uint32_t n, ncrash;
    double warmup, settle, period_ms, dmin_ms, dmax_ms; /* seconds; milliseconds */
    double join_crash_ms, bound_ms;                     /* --join-crash, --bound (0: none) */
    bool check;
} args_t;

/* --cut A-B, --slow N:MS, --stall N:MS (option c): false if bad (said). */
static bool fault(int c, const char *arg)
{
    char sep = c == 'C' ? '-' : ':', *end;
    unsigned long x = strtoul(arg, &end, 10);
    double y = *end == sep && end[1] ? strtod(end + 1, &end) : -1;
    if (*end || y < 0 || x == 0 || (c == 'C' && (y < 1 || (double)x == y))) {
        fprintf(stderr, "swimsim: --%s: '%s' is not %s\n",
                c == 'C'   ? "cut"
                : c == 'S' ? "slow"
                           : "stall",
                arg, c == 'C' ? "two members A-B (numbers from 1, not the same)" : "a member and milliseconds N:MS");
        return false;
    }
    if (c == 'C') {
        cut_a = (uint32_t)x;
        cut_b = (uint32_t)y;
    } else if (c == 'S') {
        slow_node = (uint32_t)x;
        slow_ns = (uint64_t)(y * 1e6);
    } else {
        stall_node = (uint32_t)x;
        stall_ns = (uint64_t)(y * 1e6);
    }
    return true;
}

/* One option c with value v into *a: -1 to go on, or an exit status
 * (0 after --help, 2 for an unknown option). */
static int set_opt(int c, double v, args_t *a)
{
    switch (c) {
    case 'n':
        a->n = (uint32_t)v;
        return -1;
    case 'k':
        a->ncrash = (uint32_t)v;
        return -1;
    case 'l':
        loss = v;
        return -1;
    case 'd':
        a->dmin_ms = v;
        return -1;
    case 'D':
        a->dmax_ms = v;
        return -1;
    case 'p':
        a->period_ms = v;
        return -1;
    case 'w':
        a->warmup = v;
        return -1;
    case 's':
        a->settle = v;
        return -1;
    case 'x':
        rng = (uint64_t)v | 1;
        return -1;
    case 'c':
        a->check = true;
        return -1;
    case 'J':
        a->join_crash_ms = v;
        return -1;
    case 'B':
        a->bound_ms = v;
        return -1;
    case 'r':
        trace = true;
        return -1;
    case 'h':
        usage(stdout);
        return 0;
    default:
        usage(stderr);
        return 2;
    }
}

/* Reads the options into *a. Returns -1 to run the simulation, or the exit
 * status to leave with at once (0 after --help, 2 for bad arguments). */
static int parse(int argc, char **argv, args_t *a)
{
    *a = (args_t){.n = 1000,
                  .ncrash = 1,
                  .warmup = 10,
                  .settle = 15,
                  .period_ms = SN_SWIM_PERIOD_MS,
                  .dmin_ms = 1,
                  .dmax_ms = 10};
    static const struct option opts[] = {{"members", 1, 0, 'n'},    {"crash", 1, 0, 'k'},     {"loss", 1, 0, 'l'},
                                         {"delay-min", 1, 0, 'd'},  {"delay-max", 1, 0, 'D'}, {"period", 1, 0, 'p'},
                                         {"warmup", 1, 0, 'w'},     {"settle", 1, 0, 's'},    {"seed", 1, 0, 'x'},
                                         {"check", 0, 0, 'c'},      {"help", 0, 0, 'h'},      {"cut", 1, 0, 'C'},
                                         {"slow", 1, 0, 'S'},       {"stall", 1, 0, 'T'},     {"trace", 0, 0, 'r'},
                                         {"join-crash", 1, 0, 'J'}, {"bound", 1, 0, 'B'},     {0, 0, 0, 0}};
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if ((c == 'C' || c == 'S' || c == 'T') && !fault(c, optarg))
            return 2;
        if (c == 'C' || c == 'S' || c == 'T')
            continue;
        double v = optarg ? strtod(optarg, &end) : 0;
        if (optarg && (*end || v < 0)) {
            fprintf(stderr, "swimsim: --%s: '%s' is not a number >= 0\n", opts[0].name, optarg);
            for (const struct option *o = opts; o->name; o++)
                if (o->val == c)
                    fprintf(stderr, "swimsim: (that was --%s)\n", o->name);
            return 2;
        }
        int rc = set_opt(c, v, a);
        if (rc >= 0)
            return rc;
    }
    if (optind < argc || a->n < 3 || (a->ncrash && a->ncrash >= a->n / 2) || loss >= 1 || a->dmax_ms < a->dmin_ms ||
        a->period_ms < 1 || cut_a > a->n || cut_b > a->n || slow_node > a->n || stall_node > a->n) {
        usage(stderr);
        fprintf(stderr, "swimsim: need --members >= 3, --crash < members / 2, --loss < 1, --delay-min <= --delay-max, "
                        "--period >= 1, and --cut, --slow and --stall of members 1..N\n");
        return 2;
    }
    return -1;
}

/* Members 1..n, each knowing every other (the cluster after its joins), their
 * periods started spread over one period. */
static void start(uint32_t n, uint64_t period)
{
    nn = n;
    now = 1000000000u;
    for (uint32_t i = 1; i <= n; i++) {
        make(i, period);
        for (uint32_t k = 1; k <= n; k++) /* everyone knows everyone: the cluster after its joins */
            if (k != i)
                sn_swim_apply(nodes[i].swim, 0, &(sn_swim_update_t){k, SN_SWIM_ALIVE, 1, 0, 0}, now);
    }
    for (uint32_t i = 1; i <= n; i++) { /* start the periods spread over one period */
        nodes[i].tick_at = now + rnd() % period;
        ev_t e = {.t = nodes[i].tick_at, .kind = EV_TICK, .to = i, .gen = ++nodes[i].gen};
        push(&e);
    }
}

/* Kills the last ncrash of members 1..n (never member 1, the join's seed). */
static void crash(uint32_t n, uint32_t ncrash)
{
    crash_at = now;
    for (uint32_t k = 0; k < ncrash; k++) {
        crashed[ncrashed++] = n - k;
        nodes[n - k].dead = true;
    }
}

/* Member n + 1 joins through member 1: it gets member 1's view (the
 * Welcome), and member 1 broadcasts it, as the relay does. */
static void join(uint32_t n, uint64_t period)
{
    joiner = n + 1;
    nn = n + 1;
    make(joiner, period);
    join_at = now;
    for (uint32_t k = 1; k <= n; k++) /* member 1's view (the Welcome) */
        if (!nodes[k].dead)
            sn_swim_apply(nodes[joiner].swim, 0, &(sn_swim_update_t){k, SN_SWIM_ALIVE, 1, 0, 0}, now);
    sn_swim_update_t u = {joiner, SN_SWIM_ALIVE, 1, 0, 0};
    sn_swim_apply(nodes[1].swim, 0, &u, now);
    join_seen++; /* (member 1) */
    io_broadcast((void *)(uintptr_t)1u, &u);
    schedule(1);
    schedule(joiner);
}

/* The figures (see the top of the file): `secs` simulated in `wall` seconds. */
static void report(const args_t *a, double secs, double wall)
{
    uint32_t n = a->n;
    printf("swimsim: %" PRIu32 " members, %" PRIu32 " crashed, loss %.2f%%, delay %.1f-%.1f ms, period %.0f ms, "
           "%.1f s simulated in %.1f s\n",
           n, a->ncrash, loss * 100, a->dmin_ms, a->dmax_ms, a->period_ms, secs, wall);
    if (cut_a || slow_node || stall_node) {
        printf("swimsim: faults:");
        if (cut_a)
            printf(" link %" PRIu32 "-%" PRIu32 " cut;", cut_a, cut_b);
        if (slow_node)
            printf(" member %" PRIu32 "'s messages up to %.0f ms late;", slow_node, (double)slow_ns / 1e6);
        if (stall_node)
            printf(" member %" PRIu32 " stalls for %.0f ms every 2.5-7.5 s;", stall_node, (double)stall_ns / 1e6);
        printf("\n");
    }
    if (a->ncrash) {
        printf("RESULT swimsim-%" PRIu32 "-detect-first %s%.0f ms\n", n, first_dead_at ? "" : "never ",
               first_dead_at ? (double)(first_dead_at - crash_at) / 1e6 : 0);
        printf("RESULT swimsim-%" PRIu32 "-detect-all %s%.0f ms\n", n, all_dead_at ? "" : "never ",
               all_dead_at ? (double)(all_dead_at - crash_at) / 1e6 : 0);
    }
    printf("RESULT swimsim-%" PRIu32 "-join-all %s%.0f ms\n", n, all_join_at ? "" : "never ",
           all_join_at ? (double)(all_join_at - join_at) / 1e6 : 0);
    if (a->join_crash_ms > 0)
        printf("RESULT swimsim-%" PRIu32 "-join-crash-detect-all %s%.0f ms\n", n, join_dead_at ? "" : "never ",
               join_dead_at ? (double)(join_dead_at - join_crash_at) / 1e6 : 0);
    printf("RESULT swimsim-%" PRIu32 "-false-positives %" PRIu64 "\n", n, false_positives);
    printf("RESULT swimsim-%" PRIu32 "-suspicions-live %" PRIu64 "\n", n, live_suspicions);
    printf("RESULT swimsim-%" PRIu32 "-msgs-per-node-s %.1f\n", n, (double)sent / n / secs);
    printf("RESULT swimsim-%" PRIu32 "-msgs-per-node-s-quiet %.1f\n", n, (double)sent_quiet / n / a->warmup);
}

static bool crash_expected = true; /* --crash > 0 */

/* The --check verdict: 1 (each failure said on stderr) or 0. */
static int verdict(const args_t *a)
{
    int bad = 0;
    uint64_t bound = (uint64_t)(a->bound_ms * 1e6);
    if (bound && crash_expected && all_dead_at && all_dead_at - crash_at > bound) {
        fprintf(stderr, "swimsim: FAIL the crash was seen by all after %.0f ms (bound %.0f)\n",
                (double)(all_dead_at - crash_at) / 1e6, a->bound_ms);
        bad = 1;
    }
    if (a->join_crash_ms > 0 && (!join_dead_at || (bound && join_dead_at - join_crash_at > bound))) {
        fprintf(stderr, "swimsim: FAIL the new member, killed %.0f ms after its join, was %s\n", a->join_crash_ms,
                join_dead_at ? "seen dead by all too late" : "not seen dead by all");
        bad = 1;
    }
    if (crash_expected && !all_dead_at) {
        fprintf(stderr, "swimsim: FAIL not every live member saw the crash\n");
        bad = 1;
    }
    if (false_positives) {
        fprintf(stderr, "swimsim: FAIL %" PRIu64 " live members declared dead\n", false_positives);
        bad = 1;
    }
    if (!all_join_at) {
        fprintf(stderr, "swimsim: FAIL the join did not reach every member\n");
        bad = 1;
    }
    return bad;
}

int main(int argc, char **argv)
{
    args_t a;
    int rc = parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    dmin = (uint64_t)(a.dmin_ms * 1e6);
    dmax = (uint64_t)(a.dmax_ms * 1e6);
    uint64_t period = (uint64_t)(a.period_ms * 1e6);
    nodes = calloc(a.n + 2, sizeof *nodes);
    crashed = calloc(a.ncrash + 2, sizeof *crashed); /* (+ the new member, --join-crash) */
    dead_seen = calloc(a.ncrash + 2, sizeof *dead_seen);
    if (!nodes || !crashed || !dead_seen)
        return 2;
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    start(a.n, period);
    uint64_t t0 = now;
    if (stall_node)
        nodes[stall_node].next_stall = now + rnd() % STALL_EVERY_NS;
    quiet = true;
    run(t0 + (uint64_t)(a.warmup * 1e9), NULL);
    quiet = false;
    crash(a.n, a.ncrash);
    run(crash_at + (uint64_t)(a.settle * 1e9), all_dead_seen);
    join(a.n, period);
    if (a.join_crash_ms > 0) { /* the new member dies right after its join */
        run(join_at + (uint64_t)(a.join_crash_ms * 1e6), all_join_seen);
        join_crash_at = now;
        crashed[ncrashed++] = joiner;
        nodes[joiner].dead = true;
        run(join_crash_at + (uint64_t)(a.settle * 1e9), joiner_dead_seen);
    } else {
        run(join_at + (uint64_t)(a.settle * 1e9), all_join_seen);
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);

    report(&a, (double)(now - t0) / 1e9, (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) / 1e9);
    for (uint32_t i = 1; i <= nn; i++)
        sn_swim_free(&nodes[i].swim);
    free(nodes);
    free(heap.h);
    crash_expected = a.ncrash > 0;
    int bad = a.check ? verdict(&a) : 0;
    free(crashed);
    free(dead_seen);
    return bad;
}

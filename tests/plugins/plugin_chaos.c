/* plugin_chaos.c - the workload of tests/chaos.sh, a Jepsen-style check of
 * the delivery guarantees. Loaded (--load) on every node of the cluster.
 * Every process writes what it sees as one line per fact, with write(2)
 * and O_APPEND (no stdio buffer: nodes get kill -9), to
 * $SN_CHAOS_LOG/<os-pid>.log (the variable is read when the plugin loads;
 * without it lines go to stderr). Every line ends with the node it was
 * written on and the wall-clock time in microseconds:
 *
 *   R SINK K SRC SEQ      sink SINK got message SEQ of source SRC; K counts
 *                         the sink's deliveries (0, 1, 2, ...) and moves
 *                         with it: a sink that ran twice shows a K twice
 *   X SINK K REASON       the sink ended (stop, cancel) after K deliveries
 *   M SINK K FROM TO      the sink runs on node TO now, last on node FROM
 *   U SINK K TEXT         a message it did not understand
 *   S SRC SINK SEQ        source SRC is about to send SEQ to SINK
 *   E SRC SINK SEQ WHY    that send came back as an error (noproc, ...)
 *   F SRC SENT            the source stopped sending, after SENT messages
 *   Q SRC SINK            it sends no more to SINK (RETIRE_AFTER noprocs)
 *   W WATCHER SINK        the watcher monitors SINK now
 *   D WATCHER SINK WHY    ... and got its DOWN (normal, nodedown, noproc...)
 *
 * Types:
 *   csink collect "US [EVERY BURST]" movable (marshal/unmarshal): burns US
 *                                  microseconds of CPU per message ("SRC
 *                                  SEQ"), BURST more every EVERY-th (work
 *                                  queues up behind it: others steal);
 *                                  "stop" ends it
 *   csource send "RATE COUNT PID..." not movable: RATE messages a second
 *                                  in all, round robin over the sinks,
 *                                  numbered 1, 2, ... per sink, COUNT per
 *                                  sink (0: until "stop"). After "stop" it
 *                                  keeps running (to log the errors of
 *                                  sends still on their way) until "end";
 *                                  "add PID" adds a sink (seq from 1)
 *   cwatch watch "DELAY_MS PID..." not movable: after DELAY_MS monitors
 *                                  every PID; "add PID" one more (at once
 *                                  if the delay is over); "end" ends it.
 *                                  (A monitored
 *                                  process does not move, so the delay
 *                                  lets the sinks move first.)
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strtok_r, O_CLOEXEC, also under -std=c11 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "schednode/schednode.h"

#define MAX_SINKS 256
#define RETIRE_AFTER 20 /* noproc errors: a source stops sending to that sink */
#define SLEEP_TAG UINT64_MAX
#define TICK_MS 5
#define MAX_PER_TICK 64

static int logfd = 2;

static uint64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One line: the fields, then the node and the time. One write(2) with
 * O_APPEND: lines of several threads never mix. */
__attribute__((format(printf, 2, 3))) static void logline(sn_ctx_t *ctx, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 64, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof buf - 64)
        n = (int)sizeof buf - 64;
    n += snprintf(buf + n, sizeof buf - (size_t)n, " %" PRIu32 " %" PRIu64 "\n", sn_sched_node_id(sn_ctx_sched(ctx)),
                  wall_us());
    for (int off = 0; off < n;) {
        ssize_t w = write(logfd, buf + off, (size_t)(n - off));
        if (w <= 0)
            return;
        off += (int)w;
    }
}

static const char *text_of(const sn_payload_t *p, char *buf, size_t len)
{
    snprintf(buf, len, "%.*s", p ? (int)p->len : 0, p ? (const char *)p->data : "");
    return buf;
}

/* A reason as one word. */
static const char *why(int error)
{
    switch (error) {
    case 0:
        return "normal";
    case SN_ENOPROC:
        return "noproc";
    case SN_ENODEDOWN:
        return "nodedown";
    case SN_EUNREACHABLE:
        return "unreachable";
    case SN_ECANCELED:
        return "canceled";
    case SN_EKILLED:
        return "killed";
    case SN_EREFUSED:
        return "refused";
    case SN_ETIMEDOUT:
        return "timedout";
    default:
        return "other";
    }
}

static void burn_us(uint64_t us)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t.tv_nsec - (uint64_t)t0.tv_nsec < us * 1000u);
}

/* Splits "A B C ..." into PIDs after skipping `skip` numbers. */
static int parse_pids(const char *text, int skip, uint64_t *nums, sn_pid_t *pids, int *npids)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    int i = 0;
    *npids = 0;
    for (char *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save), i++) {
        if (i < skip) {
            char *end;
            nums[i] = strtoull(w, &end, 10);
            if (*end)
                return SN_EINVAL;
        } else if (*npids == MAX_SINKS || sn_pid_parse(w, &pids[(*npids)++]) != 0) {
            return SN_EINVAL;
        }
    }
    return i >= skip && *npids > 0 ? 0 : SN_EINVAL;
}

/* ------------------------------------------------------------------ csink */
typedef struct csink {
    uint64_t k;        /* deliveries so far: the number of the next R line */
    uint64_t work_us;  /* CPU per message */
    uint64_t every;    /* ... and every EVERY-th message (0: never) */
    uint64_t burst_us; /* ... this much more: a queue builds up behind it */
    uint32_t node;     /* where it last ran (0: not yet) */
    uint32_t pad;
} csink_t;

static int csink_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    csink_t *s = state;
    char text[64];
    if (strcmp(method, "collect") != 0)
        return SN_ENOMETHOD;
    unsigned long long us = 0, every = 0, burst = 0;
    if (sscanf(text_of(*input, text, sizeof text), "%llu %llu %llu", &us, &every, &burst) < 1)
        return SN_EINVAL;
    s->work_us = us;
    s->every = every;
    s->burst_us = burst;
    return 0;
}

static void csink_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    csink_t *s = state;
    char self[SN_PID_STRLEN], text[256];
    uint32_t here = sn_sched_node_id(sn_ctx_sched(ctx));
    sn_pid_format(sn_ctx_self(ctx), self, sizeof self);
    out->status = SN_IDLE;
    if (s->node != here) {
        if (s->node)
            logline(ctx, "M %s %" PRIu64 " %" PRIu32 " %" PRIu32, self, s->k, s->node, here);
        s->node = here;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            logline(ctx, "X %s %" PRIu64 " cancel", self, s->k);
            sn_out_done(out, NULL);
            return;
        }
        if (ev[i].type != SN_EV_MESSAGE)
            continue;
        text_of(ev[i].data, text, sizeof text);
        char src[SN_PID_STRLEN + 1];
        unsigned long long seq;
        sn_pid_t sp;
        if (strcmp(text, "stop") == 0) {
            logline(ctx, "X %s %" PRIu64 " stop", self, s->k);
            sn_out_done(out, NULL);
            return;
        }
        if (sscanf(text, "%32s %llu", src, &seq) == 2 && sn_pid_parse(src, &sp) == 0) {
            logline(ctx, "R %s %" PRIu64 " %s %llu", self, s->k++, src, seq);
            burn_us(s->work_us + (s->every && s->k % s->every == 0 ? s->burst_us : 0));
        } else {
            for (char *c = text; *c; c++)
                if (*c == ' ' || *c == '\n')
                    *c = '_';
            logline(ctx, "U %s %" PRIu64 " %s", self, s->k, text);
        }
    }
}

static int csink_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(csink_t));
    return *out ? 0 : SN_ENOMEM;
}

static int csink_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    if (in->len != sizeof(csink_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(csink_t));
    return 0;
}

static const sn_type_t csink_type = {"csink",    1,    sizeof(csink_t), csink_init,
                                     csink_step, NULL, csink_marshal,   csink_unmarshal};

/* ---------------------------------------------------------------- csource */
typedef struct csource {
    uint64_t rate, count; /* messages a second in all; per sink (0: no limit) */
    int nsinks;
    sn_pid_t sinks[MAX_SINKS];
    uint64_t seq[MAX_SINKS];    /* last sent, per sink */
    uint32_t noproc[MAX_SINKS]; /* sends to it that came back noproc */
    uint64_t sent, base_sent, base_ms;
    int next;     /* round robin */
    int stopped;  /* "stop" came: send no more */
    int sleeping; /* a sleep is pending */
} csource_t;

static int csource_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    csource_t *s = state;
    char text[4096];
    uint64_t nums[2];
    if (strcmp(method, "send") != 0)
        return SN_ENOMETHOD;
    if (parse_pids(text_of(*input, text, sizeof text), 2, nums, s->sinks, &s->nsinks) != 0 || nums[0] == 0)
        return SN_EINVAL;
    s->rate = nums[0];
    s->count = nums[1];
    return 0;
}

static void csource_send(sn_ctx_t *ctx, csource_t *s, const char *self, sn_step_out_t *out)
{
    uint64_t now = mono_ms();
    if (!s->base_ms)
        s->base_ms = now;
    uint64_t due = s->base_sent + (now - s->base_ms) * s->rate / 1000u;
    uint64_t todo = due > s->sent ? due - s->sent : 0;
    if (todo > MAX_PER_TICK) { /* behind (frozen, or slow): no catching up */
        todo = MAX_PER_TICK;
        s->base_ms = now;
        s->base_sent = s->sent + todo;
    }
    for (uint64_t m = 0; m < todo; m++) {
        int i = -1;
        for (int t = 0; t < s->nsinks; t++) {
            int c = (s->next + t) % s->nsinks;
            if ((!s->count || s->seq[c] < s->count) && s->noproc[c] < RETIRE_AFTER) {
                i = c;
                break;
            }
        }
        if (i < 0) { /* all sent */
            s->stopped = 1;
            logline(ctx, "F %s %" PRIu64, self, s->sent);
            return;
        }
        s->next = (i + 1) % s->nsinks;
        uint64_t seq = ++s->seq[i];
        char sink[SN_PID_STRLEN];
        sn_pid_format(s->sinks[i], sink, sizeof sink);
        logline(ctx, "S %s %s %" PRIu64, self, sink, seq);
        sn_payload_t *msg = sn_payload_printf(SN_CT_TEXT, "%s %" PRIu64, self, seq);
        sn_out_send(out, s->sinks[i], ((uint64_t)(i + 1) << 40) | seq, &msg);
        s->sent++;
    }
}

static void csource_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    csource_t *s = state;
    char self[SN_PID_STRLEN], text[64];
    sn_pid_format(sn_ctx_self(ctx), self, sizeof self);
    out->status = SN_IDLE;
    int tick = n == 0; /* the first step */
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            if (!s->stopped)
                logline(ctx, "F %s %" PRIu64, self, s->sent);
            sn_out_done(out, NULL);
            return;
        }
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == SLEEP_TAG) {
            s->sleeping = 0;
            tick = 1;
            continue;
        }
        if (ev[i].type == SN_EV_YIELD_COMPLETE) { /* a send that came back */
            uint64_t idx = ev[i].tag >> 40, seq = ev[i].tag & ((1ull << 40) - 1);
            char sink[SN_PID_STRLEN] = "?";
            if (idx >= 1 && idx <= (uint64_t)s->nsinks)
                sn_pid_format(s->sinks[idx - 1], sink, sizeof sink);
            logline(ctx, "E %s %s %" PRIu64 " %s", self, sink, seq, ev[i].error ? why(ev[i].error) : "ok?");
            if (ev[i].error == SN_ENOPROC && idx >= 1 && idx <= (uint64_t)s->nsinks &&
                ++s->noproc[idx - 1] == RETIRE_AFTER)
                logline(ctx, "Q %s %s", self, sink);
            continue;
        }
        if (ev[i].type != SN_EV_MESSAGE)
            continue;
        text_of(ev[i].data, text, sizeof text);
        sn_pid_t add;
        if (strncmp(text, "add ", 4) == 0 && sn_pid_parse(text + 4, &add) == 0 && s->nsinks < MAX_SINKS) {
            s->sinks[s->nsinks++] = add;
        } else if (strcmp(text, "stop") == 0 && !s->stopped) {
            s->stopped = 1;
            logline(ctx, "F %s %" PRIu64, self, s->sent);
        } else if (strcmp(text, "end") == 0) {
            sn_out_done(out, NULL);
            return;
        }
    }
    if (s->stopped || !tick)
        return;
    csource_send(ctx, s, self, out);
    if (!s->stopped && !s->sleeping) {
        sn_out_sleep(out, SLEEP_TAG, TICK_MS);
        s->sleeping = 1;
    }
}

static const sn_type_t csource_type = {"csource", 1, sizeof(csource_t), csource_init, csource_step, NULL, NULL, NULL};

/* ----------------------------------------------------------------- cwatch */
typedef struct cwatch {
    uint64_t delay_ms;
    int nsinks, watching;
    sn_pid_t sinks[MAX_SINKS];
} cwatch_t;

static int cwatch_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    cwatch_t *w = state;
    char text[4096];
    if (strcmp(method, "watch") != 0)
        return SN_ENOMETHOD;
    return parse_pids(text_of(*input, text, sizeof text), 1, &w->delay_ms, w->sinks, &w->nsinks);
}

static void cwatch_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    cwatch_t *w = state;
    char self[SN_PID_STRLEN], sink[SN_PID_STRLEN], text[64];
    sn_pid_format(sn_ctx_self(ctx), self, sizeof self);
    out->status = SN_IDLE;
    int go = n == 0 && w->delay_ms == 0;
    if (n == 0 && w->delay_ms)
        sn_out_sleep(out, SLEEP_TAG, w->delay_ms);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            sn_out_done(out, NULL);
            return;
        }
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == SLEEP_TAG)
            go = 1;
        if (ev[i].type == SN_EV_DOWN) {
            sn_pid_format(ev[i].from, sink, sizeof sink);
            if (ev[i].tag < 1 || ev[i].tag > (uint64_t)w->nsinks || !sn_pid_eq(ev[i].from, w->sinks[ev[i].tag - 1]))
                logline(ctx, "D %s %s bad-tag-%" PRIu64, self, sink, ev[i].tag);
            else
                logline(ctx, "D %s %s %s", self, sink, why(ev[i].error));
        }
        if (ev[i].type != SN_EV_MESSAGE)
            continue;
        text_of(ev[i].data, text, sizeof text);
        sn_pid_t add;
        if (strcmp(text, "end") == 0) {
            sn_out_done(out, NULL);
            return;
        }
        if (strncmp(text, "add ", 4) == 0 && sn_pid_parse(text + 4, &add) == 0 && w->nsinks < MAX_SINKS) {
            w->sinks[w->nsinks++] = add;
            if (w->watching) {
                logline(ctx, "W %s %s", self, sn_pid_format(add, sink, sizeof sink));
                sn_out_monitor(out, add, (uint64_t)w->nsinks);
            }
        }
    }
    if (go && !w->watching) {
        w->watching = 1;
        for (int i = 0; i < w->nsinks; i++) {
            logline(ctx, "W %s %s", self, sn_pid_format(w->sinks[i], sink, sizeof sink));
            sn_out_monitor(out, w->sinks[i], (uint64_t)i + 1);
        }
    }
}

static const sn_type_t cwatch_type = {"cwatch", 1, sizeof(cwatch_t), cwatch_init, cwatch_step, NULL, NULL, NULL};

static int init(sn_sched_t *sched)
{
    const char *dir = getenv("SN_CHAOS_LOG");
    if (dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%ld.log", dir, (long)getpid());
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            return SN_EPLUGIN;
        logfd = fd; /* kept open for the life of the node */
    }
    int rc;
    if ((rc = sn_type_register(sched, &csink_type)) || (rc = sn_type_register(sched, &csource_type)) ||
        (rc = sn_type_register(sched, &cwatch_type)))
        return rc;
    return 0;
}
SN_PLUGIN_DEFINE("chaos", init);

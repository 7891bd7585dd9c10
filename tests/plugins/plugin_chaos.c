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
 *   B SINK K SRC SEQ LEN  ... a large one, whole: LEN bytes, as its header
 *                         says, and every byte after the header as the
 *                         pattern of SRC and SEQ (written with its R line,
 *                         in one write(2))
 *   Z SINK K SRC SEQ WHY LEN  ... damaged: "length" (LEN bytes came, not
 *                         what the header says), "content" (a byte after
 *                         the header differs from the pattern) or
 *                         "trailing" (bytes after a small one's text)
 *   X SINK K REASON       the sink ended (stop, cancel) after K deliveries
 *   M SINK K FROM TO      the sink runs on node TO now, last on node FROM
 *   U SINK K TEXT         a message it did not understand
 *   S SRC SINK SEQ        source SRC is about to send SEQ to SINK
 *   L SRC SINK SEQ LEN    ... a large one of LEN bytes (with its S line)
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
 *                                  checks each message's size and
 *                                  pattern (B and Z lines); "stop" ends it
 *   csource send "RATE COUNT [BIG SEED MIN MAX] PID..."
 *                                  not movable: RATE messages a second
 *                                  in all, round robin over the sinks,
 *                                  numbered 1, 2, ... per sink, COUNT per
 *                                  sink (0: until "stop"). A message is
 *                                  the text "SRC SEQ"; BIG of every 1000
 *                                  are large: the text "SRC SEQ LEN", a
 *                                  NUL, then a pattern of SRC and SEQ up
 *                                  to LEN bytes in all, LEN from MIN (1
 *                                  KiB at least) to MAX, each doubling
 *                                  from MIN as likely (64-128 KiB as
 *                                  often as 2-4 MiB). Which ones are
 *                                  large, and their sizes, are a function
 *                                  of SEED, the sink's place in the list
 *                                  and SEQ: a seed replays them. After
 *                                  "stop" it keeps running (to log the
 *                                  errors of sends still on their way)
 *                                  until "end"; "add PID" adds a sink
 *                                  (seq from 1)
 * With SN_CHAOS_MOVABLE=1 (chaos.sh's rolling upgrade) csource and cwatch
 * are movable too (marshal/unmarshal: their state is flat).
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
#include <stdbool.h>
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

/* Lines written together: each is the fields, then the node and the time;
 * all go out in one write(2) with O_APPEND, so that lines of several
 * threads never mix and a kill -9 never leaves one of a group without the
 * others (a delivery's R line without its B line). */
typedef struct lines {
    char buf[1024];
    int n;
} lines_t;

__attribute__((format(printf, 3, 4))) static void addline(sn_ctx_t *ctx, lines_t *l, const char *fmt, ...)
{
    size_t room = sizeof l->buf - (size_t)l->n;
    if (room < 128)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l->buf + l->n, room - 64, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)room - 64)
        n = (int)room - 64;
    l->n += n;
    l->n += snprintf(l->buf + l->n, sizeof l->buf - (size_t)l->n, " %" PRIu32 " %" PRIu64 "\n",
                     sn_sched_node_id(sn_ctx_sched(ctx)), wall_us());
}

static void putlines(const lines_t *l)
{
    for (int off = 0; off < l->n;) {
        ssize_t w = write(logfd, l->buf + off, (size_t)(l->n - off));
        if (w <= 0)
            return;
        off += (int)w;
    }
}

/* One line. */
#define logline(ctx, ...)                                                                                              \
    do {                                                                                                               \
        lines_t l_ = {.n = 0};                                                                                         \
        addline(ctx, &l_, __VA_ARGS__);                                                                                \
        putlines(&l_);                                                                                                 \
    } while (0)

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

/* splitmix64: a well-mixed 64-bit function of x */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* The pattern of a large message of source `src`, number `seq`: 8 bytes
 * at a time from a generator seeded by both, so that any byte changed,
 * lost or moved shows at the sink, which computes it again. */
static uint64_t pattern_key(sn_pid_t src, uint64_t seq)
{
    return mix(((uint64_t)src.node << 48) ^ src.serial ^ mix(seq));
}

static uint64_t pattern_next(uint64_t *x)
{
    *x = *x * 6364136223846793005u + 1442695040888963407u;
    return *x ^ (*x >> 29);
}

static void pattern_fill(unsigned char *p, size_t n, uint64_t key)
{
    uint64_t x = key, v;
    for (size_t i = 0; i < n; i += sizeof v) {
        v = pattern_next(&x);
        memcpy(p + i, &v, n - i < sizeof v ? n - i : sizeof v);
    }
}

/* The offset of the first byte of p[0..n) that differs from the pattern
 * of key, or n if none does. */
static size_t pattern_check(const unsigned char *p, size_t n, uint64_t key)
{
    uint64_t x = key, v;
    for (size_t i = 0; i < n; i += sizeof v) {
        v = pattern_next(&x);
        size_t k = n - i < sizeof v ? n - i : sizeof v;
        if (memcmp(p + i, &v, k) != 0)
            for (size_t j = 0; j < k; j++)
                if (p[i + j] != ((const unsigned char *)&v)[j])
                    return i + j;
    }
    return n;
}

/* Splits "A B C ..." into the numbers it starts with (at most maxnums:
 * *nnums of them) and the PIDs after them. */
static int parse_pids(const char *text, int maxnums, uint64_t *nums, int *nnums, sn_pid_t *pids, int *npids)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    *npids = *nnums = 0;
    for (char *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
        if (*npids == 0 && !strchr(w, '.')) { /* a number, not a PID ("<node>.<serial>") */
            char *end;
            if (*nnums == maxnums)
                return SN_EINVAL;
            nums[(*nnums)++] = strtoull(w, &end, 10);
            if (*end)
                return SN_EINVAL;
        } else if (*npids == MAX_SINKS || sn_pid_parse(w, &pids[(*npids)++]) != 0) {
            return SN_EINVAL;
        }
    }
    return *npids > 0 ? 0 : SN_EINVAL;
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

/* A message "SRC SEQ", or "SRC SEQ LEN" NUL pattern (a large one): its R
 * line, with a B line for a large one that came whole or a Z line for one
 * that did not. False if it is not one of those. */
static bool csink_deliver(sn_ctx_t *ctx, csink_t *s, const char *self, const sn_payload_t *d, const char *text)
{
    char src[SN_PID_STRLEN + 1];
    unsigned long long seq, len;
    sn_pid_t sp;
    int nf = sscanf(text, "%32s %llu %llu", src, &seq, &len);
    if (nf < 2 || sn_pid_parse(src, &sp) != 0)
        return false;
    size_t got = d ? d->len : 0, hl = d ? strnlen((const char *)d->data, got) : 0;
    const char *bad = NULL;
    if (nf == 2 && got != hl)
        bad = "trailing";
    else if (nf == 3 && (got != len || hl >= got))
        bad = "length";
    else if (nf == 3 && pattern_check(d->data + hl + 1, got - hl - 1, pattern_key(sp, seq)) != got - hl - 1)
        bad = "content";
    lines_t l = {.n = 0};
    addline(ctx, &l, "R %s %" PRIu64 " %s %llu", self, s->k, src, seq);
    if (bad)
        addline(ctx, &l, "Z %s %" PRIu64 " %s %llu %s %zu", self, s->k, src, seq, bad, got);
    else if (nf == 3)
        addline(ctx, &l, "B %s %" PRIu64 " %s %llu %zu", self, s->k, src, seq, got);
    putlines(&l);
    s->k++;
    return true;
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
        if (strcmp(text, "stop") == 0) {
            logline(ctx, "X %s %" PRIu64 " stop", self, s->k);
            sn_out_done(out, NULL);
            return;
        }
        if (csink_deliver(ctx, s, self, ev[i].data, text)) {
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
    uint64_t rate, count;        /* messages a second in all; per sink (0: no limit) */
    uint64_t big, seed;          /* large messages per 1000, and what picks them */
    uint64_t min_size, max_size; /* their sizes */
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
    uint64_t nums[6];
    int nnums;
    if (strcmp(method, "send") != 0)
        return SN_ENOMETHOD;
    if (parse_pids(text_of(*input, text, sizeof text), 6, nums, &nnums, s->sinks, &s->nsinks) != 0 ||
        (nnums != 2 && nnums != 6) || nums[0] == 0)
        return SN_EINVAL;
    s->rate = nums[0];
    s->count = nums[1];
    if (nnums == 6) {
        if (nums[2] > 1000 || nums[4] < 1024 || nums[4] > nums[5] || nums[5] > (256u << 20))
            return SN_EINVAL;
        s->big = nums[2];
        s->seed = nums[3];
        s->min_size = nums[4];
        s->max_size = nums[5];
    }
    return 0;
}

/* The size of message seq to the sink at `slot` of the list: 0 (a small
 * one), or MIN to MAX bytes, the doubling it lies in picked first (evenly),
 * then a size within it. A function of the seed: a seed replays them. */
static size_t big_size(const csource_t *s, int slot, uint64_t seq)
{
    uint64_t r = mix(s->seed ^ mix(((uint64_t)slot << 40) | seq));
    if (r % 1000 >= s->big)
        return 0;
    r /= 1000;
    int octaves = 0; /* doublings from MIN to MAX, the last one maybe partial */
    while (octaves < 40 && (s->min_size << octaves) < s->max_size)
        octaves++;
    uint64_t lo = s->min_size;
    if (octaves) {
        lo <<= r % (uint64_t)octaves;
        r /= (uint64_t)octaves;
    }
    uint64_t hi = lo * 2 < s->max_size ? lo * 2 : s->max_size;
    return (size_t)(lo + r % (hi - lo + 1));
}

/* Message seq of source self (sp) to the sink at `slot`, its S line (and
 * its L line, for a large one) written. */
static sn_payload_t *csource_message(sn_ctx_t *ctx, const csource_t *s, const char *self, const char *sink, int slot,
                                     uint64_t seq)
{
    size_t size = big_size(s, slot, seq);
    lines_t l = {.n = 0};
    addline(ctx, &l, "S %s %s %" PRIu64, self, sink, seq);
    if (!size) {
        putlines(&l);
        return sn_payload_printf(SN_CT_TEXT, "%s %" PRIu64, self, seq);
    }
    char head[80]; /* (MIN is 1 KiB at least: room for it) */
    int hl = snprintf(head, sizeof head, "%s %" PRIu64 " %zu", self, seq, size);
    addline(ctx, &l, "L %s %s %" PRIu64 " %zu", self, sink, seq, size);
    putlines(&l);
    sn_payload_t *p = sn_payload_new(SN_CT_BYTES, NULL, size);
    if (p) {
        memcpy(p->data, head, (size_t)hl + 1);
        pattern_fill(p->data + hl + 1, size - (size_t)hl - 1, pattern_key(sn_ctx_self(ctx), seq));
    }
    return p;
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
        sn_payload_t *msg = csource_message(ctx, s, self, sink, i, seq);
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

static int csource_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(csource_t));
    return *out ? 0 : SN_ENOMEM;
}

static int csource_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    if (in->len != sizeof(csource_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(csource_t));
    return 0;
}

static const sn_type_t csource_type = {"csource", 1, sizeof(csource_t), csource_init, csource_step, NULL, NULL, NULL};
static const sn_type_t csource_movable = {"csource",    1,    sizeof(csource_t), csource_init,
                                          csource_step, NULL, csource_marshal,   csource_unmarshal};

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
    int nnums;
    if (parse_pids(text_of(*input, text, sizeof text), 1, &w->delay_ms, &nnums, w->sinks, &w->nsinks) != 0 ||
        nnums != 1)
        return SN_EINVAL;
    return 0;
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

static int cwatch_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(cwatch_t));
    return *out ? 0 : SN_ENOMEM;
}

static int cwatch_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    if (in->len != sizeof(cwatch_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(cwatch_t));
    return 0;
}

static const sn_type_t cwatch_type = {"cwatch", 1, sizeof(cwatch_t), cwatch_init, cwatch_step, NULL, NULL, NULL};
static const sn_type_t cwatch_movable = {"cwatch",    1,    sizeof(cwatch_t), cwatch_init,
                                         cwatch_step, NULL, cwatch_marshal,   cwatch_unmarshal};

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
    const char *movable = getenv("SN_CHAOS_MOVABLE"); /* (a rolling upgrade drains every node) */
    bool all = movable && !strcmp(movable, "1");
    int rc;
    if ((rc = sn_type_register(sched, &csink_type)) ||
        (rc = sn_type_register(sched, all ? &csource_movable : &csource_type)) ||
        (rc = sn_type_register(sched, all ? &cwatch_movable : &cwatch_type)))
        return rc;
    return 0;
}
SN_PLUGIN_DEFINE("chaos", init);

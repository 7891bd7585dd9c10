/* schednode-demo.so - the demo and test process types, a plugin (load it
 * with --load): the fork-join tree, the token ring, the sleeper and oops
 * of `schednode demo`, and the cross-node types of the tests, the
 * benchmarks and README's walk-through (xsource, xsink, xpong, xwatch,
 * spin, burn, spread, msink, idle). A bare node has none of them: a node a user
 * deploys runs the user's types only (cli.sh: types on a bare node).
 * README's "The demo plugin" and man/schednode.1 say what each takes.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hops.h" /* (header only: schedbench's probe stamps) */
#include "schednode/schednode.h"

/* A process's text argument as a C string in buf ("" without one): the
 * payload's len is what counts, not a terminator. */
static const char *arg_text(const sn_payload_t *in, char *buf, size_t len)
{
    snprintf(buf, len, "%.*s", in ? (int)in->len : 0, in ? (const char *)in->data : "");
    return buf;
}

/* ---- tree: sums 0..n-1 by splitting ranges 10 ways; children awaited */
typedef struct range {
    uint64_t lo, hi;
} range_t;

typedef struct tree {
    range_t r;
    uint64_t sum;
    uint32_t waiting;
} tree_t;

static int tree_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    tree_t *t = state;
    if (strcmp(method, "sum") != 0)
        return SN_ENOMETHOD;
    if (!*input || (*input)->len != sizeof(range_t))
        return SN_EINVAL;
    memcpy(&t->r, (*input)->data, sizeof t->r);
    return 0;
}

static void tree_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    tree_t *t = state;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            sn_out_fail(out, SN_ECANCELED, "canceled");
            return;
        }
        uint64_t v;
        if (ev[i].type != SN_EV_YIELD_COMPLETE || ev[i].error || sn_payload_get_u64(ev[i].data, &v) != 0) {
            sn_out_fail(out, ev[i].error ? ev[i].error : SN_EINVAL, "child failed: %s", sn_strerror(ev[i].error));
            return;
        }
        t->sum += v;
        t->waiting--;
    }
    if (n == 0) { /* first step */
        uint64_t len = t->r.hi - t->r.lo;
        if (len <= 10) {
            for (uint64_t x = t->r.lo; x < t->r.hi; x++)
                t->sum += x;
        } else {
            uint64_t chunk = (len + 9) / 10;
            for (uint64_t lo = t->r.lo; lo < t->r.hi; lo += chunk) {
                range_t c = {lo, lo + chunk < t->r.hi ? lo + chunk : t->r.hi};
                sn_payload_t *in = sn_payload_new(SN_CT_USER, &c, sizeof c);
                sn_out_spawn(out, t->waiting++, "tree", "sum", &in, SN_YIELD_AWAIT);
            }
        }
    }
    if (t->waiting) {
        out->status = SN_WAIT;
        return;
    }
    sn_payload_t *res = sn_payload_u64(t->sum);
    sn_out_done(out, &res);
}

static const sn_type_t tree_type = {"tree", 1, sizeof(tree_t), tree_init, tree_step, NULL, NULL, NULL};

/* ---- ring: a coordinator and N members pass a token around M times */
typedef struct ring {
    sn_pid_t next;
    uint64_t members, laps, hops;
    int coordinator;
} ring_t;

static int ring_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    ring_t *r = state;
    if (strcmp(method, "coordinator") == 0) {
        uint64_t cfg[2];
        if (!*input || (*input)->len != sizeof cfg)
            return SN_EINVAL;
        memcpy(cfg, (*input)->data, sizeof cfg);
        r->members = cfg[0];
        r->laps = cfg[1];
        r->coordinator = 1;
        r->next = sn_ctx_self(ctx);
        return 0;
    }
    if (strcmp(method, "member") == 0)
        return sn_payload_get_pid(*input, &r->next) == 0 ? 0 : SN_EINVAL;
    return SN_ENOMETHOD;
}

static void ring_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    ring_t *r = state;
    out->status = SN_IDLE;
    if (r->coordinator && n == 0) {
        /* members are spawned one at a time, each pointing at the previous */
        sn_out_spawn(out, 0, "ring", "member", &(sn_payload_t *){sn_payload_pid(r->next)}, 0);
        out->status = SN_WAIT;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            if (!r->coordinator) /* stop the rest of the ring too */
                sn_out_terminate(out, 0, r->next);
            sn_out_done(out, NULL);
            return;
        }
        if (ev[i].error) {
            sn_out_fail(out, ev[i].error, "ring: %s", sn_strerror(ev[i].error));
            return;
        }
        if (r->coordinator && ev[i].type == SN_EV_YIELD_COMPLETE) {
            sn_payload_get_pid(ev[i].data, &r->next); /* the newest member */
            if (++r->hops < r->members) {
                sn_out_spawn(out, r->hops, "ring", "member", &(sn_payload_t *){sn_payload_pid(r->next)}, 0);
                out->status = SN_WAIT;
            } else {
                r->hops = 0;
                sn_out_send(out, r->next, 0, &(sn_payload_t *){sn_payload_u64(0)});
            }
            continue;
        }
        if (ev[i].type != SN_EV_MESSAGE)
            continue;
        uint64_t lap = 0;
        sn_payload_get_u64(ev[i].data, &lap);
        if (r->coordinator) {
            r->hops += r->members;
            if (++lap == r->laps) {
                sn_out_terminate(out, 0, r->next); /* members stop in a chain */
                sn_payload_t *res = sn_payload_u64(r->hops);
                sn_out_done(out, &res);
                return;
            }
        }
        sn_payload_t *tok = sn_take(&ev[i].data); /* forward the same buffer */
        memcpy(tok->data, &lap, sizeof lap);
        sn_out_send(out, r->next, 0, &tok);
    }
}

static const sn_type_t ring_type = {"ring", 1, sizeof(ring_t), ring_init, ring_step, NULL, NULL, NULL};

/* ---- sleeper: sleeps, then reports how long it slept. "nap" (binary
 * u64 ms, for `demo`) returns the ms as a u64; "doze MS" (text) returns
 * "slept X ms, woke on node N". Movable mid-sleep (its sleep moves with
 * the time it has left: migrate.sh): its state carries the time slept so
 * far, not a clock reading, since nodes' clocks differ. */
typedef struct sleeper {
    uint64_t ms, start, doze;
} sleeper_t;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int sleeper_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    sleeper_t *s = state;
    char text[32];
    if (strcmp(method, "doze") == 0) {
        s->doze = 1;
        s->ms = strtoull(arg_text(*input, text, sizeof text), NULL, 10);
        return 0;
    }
    if (strcmp(method, "nap") != 0)
        return SN_ENOMETHOD;
    return sn_payload_get_u64(*input, &s->ms) == 0 ? 0 : SN_EINVAL;
}

static void sleeper_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    sleeper_t *s = state;
    if (n == 0) {
        s->start = now_ms();
        sn_out_sleep(out, 1, s->ms);
        out->status = SN_WAIT;
        return;
    }
    sn_payload_t *res = s->doze ? sn_payload_printf(SN_CT_TEXT, "slept %" PRIu64 " ms, woke on node %" PRIu32,
                                                    now_ms() - s->start, sn_sched_node_id(sn_ctx_sched(ctx)))
                                : sn_payload_u64(now_ms() - s->start);
    sn_out_done(out, &res);
}

/* Its state as the time slept so far; unmarshal turns it back into a
 * start on this node's clock. */
static int sleeper_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    sleeper_t s = *(sleeper_t *)state;
    s.start = now_ms() - s.start;
    *out = sn_payload_new(SN_CT_BYTES, &s, sizeof s);
    return *out ? 0 : SN_ENOMEM;
}

static int sleeper_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    sleeper_t *s = state;
    if (in->len != sizeof *s)
        return SN_EINVAL;
    memcpy(s, in->data, sizeof *s);
    s->start = now_ms() - s->start;
    return 0;
}

static const sn_type_t sleeper_type = {"sleeper",    1,    sizeof(sleeper_t), sleeper_init,
                                       sleeper_step, NULL, sleeper_marshal,   sleeper_unmarshal};

/* ---- oops: yields a command nobody registered and reports the error */
static int oops_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return strcmp(method, "try") == 0 ? 0 : SN_ENOMETHOD;
}

static void oops_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    if (n == 0) {
        sn_out_yield(out, 0, "no-such-command", 7);
        out->status = SN_WAIT;
        return;
    }
    sn_out_fail(out, ev[0].error, "%s", ev[0].data ? (const char *)ev[0].data->data : sn_strerror(ev[0].error));
}

static const sn_type_t oops_type = {"oops", 1, 0, oops_init, oops_step, NULL, NULL, NULL};

/* ---- xsource / xsink: numbered messages between processes, usually on
 * different nodes. `xsink collect N` waits for N messages, checks they came
 * in order, acks the sender and finishes with a verdict; `xsource blast
 * "PID N [START]"` sends START..START+N-1 (START defaults to 0) to PID and
 * finishes with the ack (or fails with the error of a send that came
 * back): two sources can feed one sink in turn. `xsource blast-all` is
 * blast that, when a send comes back, stops sending and waits for the
 * rest: the relay returns a node's unconfirmed sends oldest first, so the
 * last one sent comes back last; it fails with the range that came back
 * and whether it came whole and in order (tests/faults.sh). `xsource
 * pace "PID N MS"` is blast at a walk: 10 messages every MS ms, so the
 * sink waits for messages most of the time (tests/migrate.sh moves it
 * meanwhile); in place of the PID a name, looked up once
 * (sn_out_name_whereis: tests/names.sh moves the named sink meanwhile). */
typedef struct xpeer {
    sn_pid_t target;
    uint64_t n, got, next;
    int sink, out_of_order;
    int all;                          /* blast-all */
    uint64_t nerr, err_first, err_at; /* sends come back: how many, the first's number, the last's */
    uint64_t gap_from, gap_to;        /* the first break in their order: from one number to the next */
    int err_code;                     /* the first one's error */
    uint32_t pace_ms;                 /* pace: the pause between two bursts */
    char name[64];                    /* pace: the sink's name, until it is looked up */
} xpeer_t;

#define PACE_BURST 10
#define PACE_TAG UINT64_MAX        /* the pause's sleep (send tags are the message numbers) */
#define WHEREIS_TAG UINT64_MAX - 1 /* pace to a name: its lookup */

static int xpeer_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    xpeer_t *x = state;
    const char *arg = *input ? (const char *)(*input)->data : "";
    char pid[SN_PID_STRLEN + 1];
    unsigned long long n, start = 0;
    if (strcmp(method, "collect") == 0) {
        if (sscanf(arg, "%llu", &n) != 1 || n == 0)
            return SN_EINVAL;
        x->sink = 1;
        x->n = n;
        return 0;
    }
    x->all = strcmp(method, "blast-all") == 0;
    if (strcmp(method, "pace") == 0) {
        unsigned ms;
        char who[64];
        if (sscanf(arg, "%63s %llu %u", who, &n, &ms) != 3 || ms == 0)
            return SN_EINVAL;
        if (sn_pid_parse(who, &x->target) != 0)
            snprintf(x->name, sizeof x->name, "%s", who);
        x->pace_ms = ms;
        x->n = n;
        return 0;
    }
    if (strcmp(method, "blast") != 0 && !x->all)
        return SN_ENOMETHOD;
    if (sscanf(arg, "%32s %llu %llu", pid, &n, &start) < 2 || sn_pid_parse(pid, &x->target) != 0 ||
        start > UINT64_MAX - n)
        return SN_EINVAL;
    x->next = start;
    x->n = start + n;
    return 0;
}

/* blast-all: one send came back; true once the last one sent did (the
 * verdict is out). */
static bool xblast_back(xpeer_t *x, const sn_event_t *ev, sn_step_out_t *out)
{
    if (x->nerr == 0) {
        x->err_first = ev->tag;
        x->err_code = ev->error;
        x->n = x->next; /* no more sends */
    } else if (ev->tag != x->err_at + 1 && !x->out_of_order) {
        x->out_of_order = 1;
        x->gap_from = x->err_at;
        x->gap_to = ev->tag;
    }
    x->nerr++;
    x->err_at = ev->tag;
    if (ev->tag + 1 != x->next)
        return false;
    if (x->out_of_order)
        sn_out_fail(out, ev->error,
                    "sends %" PRIu64 "-%" PRIu64 " came back (%" PRIu64 "): %s (the first: %s), NOT ALL OR OUT OF "
                    "ORDER: after %" PRIu64 " came %" PRIu64,
                    x->err_first, ev->tag, x->nerr, sn_strerror(ev->error), sn_strerror(x->err_code), x->gap_from,
                    x->gap_to);
    else
        sn_out_fail(out, ev->error, "sends %" PRIu64 "-%" PRIu64 " came back (%" PRIu64 "): %s, all, in order",
                    x->err_first, ev->tag, x->nerr, sn_strerror(ev->error));
    return true;
}

/* pace: the next burst, and the pause after it if more are due */
static void xpace(xpeer_t *x, sn_step_out_t *out)
{
    for (int k = 0; k < PACE_BURST && x->next < x->n; k++, x->next++)
        sn_out_send(out, x->target, x->next, &(sn_payload_t *){sn_payload_u64(x->next)});
    if (x->next < x->n)
        sn_out_sleep(out, PACE_TAG, x->pace_ms);
}

static void xpeer_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    xpeer_t *x = state;
    out->status = SN_IDLE;
    if (x->pace_ms && n == 0) {
        if (x->name[0]) {
            sn_out_name_whereis(out, WHEREIS_TAG, x->name);
            out->status = SN_WAIT;
        } else {
            xpace(x, out);
        }
        return;
    }
    if (!x->sink && n == 0 && x->next < x->n) {
        /* 1,000 per step, then CONTINUE: bounded yields per step */
        for (uint64_t k = 0; k < 1000 && x->next < x->n; k++, x->next++)
            sn_out_send(out, x->target, x->next, &(sn_payload_t *){sn_payload_u64(x->next)});
        out->status = x->next < x->n ? SN_CONTINUE : SN_IDLE;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char buf[SN_PID_STRLEN];
        if (ev[i].type == SN_EV_CANCEL) {
            sn_out_fail(out, SN_ECANCELED, "canceled");
            return;
        }
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == WHEREIS_TAG) {
            if (ev[i].error || sn_payload_get_pid(ev[i].data, &x->target) != 0) {
                sn_out_fail(out, ev[i].error, "no process is named %s: %s", x->name, sn_strerror(ev[i].error));
                return;
            }
            xpace(x, out);
            continue;
        }
        if (ev[i].error && x->all) {
            if (xblast_back(x, &ev[i], out))
                return;
            continue;
        }
        if (ev[i].error) {
            sn_out_fail(out, ev[i].error, "send %" PRIu64 " to %s failed: %s", ev[i].tag,
                        sn_pid_format(ev[i].from, buf, sizeof buf), sn_strerror(ev[i].error));
            return;
        }
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == PACE_TAG && x->pace_ms)
            xpace(x, out);
        if (ev[i].type != SN_EV_MESSAGE)
            continue;
        if (!x->sink) { /* the ack */
            sn_payload_t *verdict = sn_take(&ev[i].data);
            sn_out_done(out, &verdict);
            return;
        }
        uint64_t v = 0; /* the sequence number: the first 8 bytes */
        if (!ev[i].data || ev[i].data->len < sizeof v)
            x->out_of_order = 1;
        else
            memcpy(&v, ev[i].data->data, sizeof v);
        if (v != x->got)
            x->out_of_order = 1;
        if (++x->got == x->n) {
            sn_payload_t *verdict =
                sn_payload_printf(SN_CT_TEXT, "%" PRIu64 " message%s %s", x->got, x->got == 1 ? "" : "s",
                                  x->out_of_order ? "OUT OF ORDER" : "in order");
            sn_out_send(out, ev[i].from, 0, &(sn_payload_t *){sn_payload_text((const char *)verdict->data)});
            sn_out_done(out, &verdict);
            return;
        }
    }
}

/* ---- xpong echo: sends every message back to its sender, unchanged */
static int xpong_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return strcmp(method, "echo") == 0 ? 0 : SN_ENOMETHOD;
}

static void xpong_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            out->status = SN_DONE;
            return;
        }
        if (ev[i].type == SN_EV_MESSAGE && !sn_pid_is_none(ev[i].from)) {
            sn__hop_stamp(ev[i].data, 0); /* a probe of schedbench xnode-rtt --breakdown: it ran */
            sn_out_send(out, ev[i].from, ev[i].tag, &ev[i].data);
        }
    }
}

static const sn_type_t xpong_type = {"xpong", 1, 0, xpong_init, xpong_step, NULL, NULL, NULL};

static const sn_type_t xsource_type = {"xsource", 1, sizeof(xpeer_t), xpeer_init, xpeer_step, NULL, NULL, NULL};
static const sn_type_t xsink_type = {"xsink", 1, sizeof(xpeer_t), xpeer_init, xpeer_step, NULL, NULL, NULL};

/* ---- spin work "MS": burns MS milliseconds of CPU in one step and
 * finishes with the id of the node it ran on. Migratable: a Ready spin
 * can be stolen by another node. */
typedef struct spin {
    uint64_t ms, unused;
} spin_t;

static int spin_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    spin_t *s = state;
    if (strcmp(method, "work") != 0)
        return SN_ENOMETHOD;
    char text[32];
    s->ms = *input ? strtoull(arg_text(*input, text, sizeof text), NULL, 10) : 1;
    return 0;
}

static void spin_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    spin_t *s = state;
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do { /* CPU time, not wall time: a preempted spin still does its work */
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t.tv_nsec - (uint64_t)t0.tv_nsec <
             s->ms * 1000000u);
    sn_payload_t *r = sn_payload_u64(sn_sched_node_id(sn_ctx_sched(ctx)));
    sn_out_done(out, &r);
}

/* Plain-data state (16 bytes for every migratable demo type): a copy
 * moves it. */
static int spin_marshal_any(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, 16);
    return *out ? 0 : SN_ENOMEM;
}

static int spin_unmarshal_any(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    if (in->len != 16)
        return SN_EINVAL;
    memcpy(state, in->data, 16);
    return 0;
}
#define spin_marshal spin_marshal_any
#define spin_unmarshal spin_unmarshal_any

static const sn_type_t spin_type = {"spin",    1,    sizeof(spin_t), spin_init,
                                    spin_step, NULL, spin_marshal,   spin_unmarshal};
_Static_assert(sizeof(spin_t) == 16, "spin_marshal_any copies 16 bytes");
/* burn: the same work, but it cannot move (no marshal) */
static const sn_type_t burn_type = {"burn", 1, sizeof(spin_t), spin_init, spin_step, NULL, NULL, NULL};

/* ---- msink collect N: like xsink (N numbered messages, in order, then
 * an ack to the sender), but migratable; finishes with "N in order on
 * node X" (X: where it finished). */
typedef struct msink {
    uint64_t n, next;
} msink_t;

static int msink_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    msink_t *m = state;
    char text[32];
    if (strcmp(method, "collect") != 0)
        return SN_ENOMETHOD;
    m->n = strtoull(arg_text(*input, text, sizeof text), NULL, 10);
    return m->n ? 0 : SN_EINVAL;
}

static void msink_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    msink_t *m = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        uint64_t seq;
        if (ev[i].type != SN_EV_MESSAGE || !ev[i].data || ev[i].data->len < 8)
            continue;
        memcpy(&seq, ev[i].data->data, 8);
        if (seq != m->next) {
            sn_out_fail(out, SN_EINVAL, "message %" PRIu64 " came when %" PRIu64 " was due", seq, m->next);
            return;
        }
        if (++m->next == m->n) {
            sn_out_send(out, ev[i].from, 0, &(sn_payload_t *){sn_payload_u64(m->n)});
            sn_payload_t *r = sn_payload_printf(SN_CT_TEXT, "%" PRIu64 " in order on node %" PRIu32, m->n,
                                                sn_sched_node_id(sn_ctx_sched(ctx)));
            sn_out_done(out, &r);
            return;
        }
    }
}

_Static_assert(sizeof(msink_t) == 16, "spin_marshal_any copies 16 bytes");
static const sn_type_t msink_type = {"msink",    1,    sizeof(msink_t),  msink_init,
                                     msink_step, NULL, spin_marshal_any, spin_unmarshal_any};

/* ---- idle work "ANY": 64 bytes of state (a pattern of its PID), movable;
 * waits for a message and finishes with the node it finished on, its
 * state checked (schedbench drain: many idle processes moved by a
 * drain). */
typedef struct idle {
    uint64_t word[8];
} idle_t;

static int idle_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    idle_t *s = state;
    if (strcmp(method, "work") != 0)
        return SN_ENOMETHOD;
    sn_pid_t self = sn_ctx_self(ctx);
    for (int k = 0; k < 8; k++)
        s->word[k] = self.serial * 8 + (uint64_t)k;
    return 0;
}

static void idle_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    idle_t *s = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE)
            continue;
        sn_pid_t self = sn_ctx_self(ctx);
        for (int k = 0; k < 8; k++)
            if (s->word[k] != self.serial * 8 + (uint64_t)k) {
                sn_out_fail(out, SN_EINVAL, "state damaged in a move");
                return;
            }
        sn_payload_t *r = sn_payload_u64(sn_sched_node_id(sn_ctx_sched(ctx)));
        sn_out_done(out, &r);
        return;
    }
}

static int idle_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(idle_t));
    return *out ? 0 : SN_ENOMEM;
}

static int idle_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    if (in->len != sizeof(idle_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(idle_t));
    return 0;
}

static const sn_type_t idle_type = {"idle",    1,    sizeof(idle_t), idle_init,
                                    idle_step, NULL, idle_marshal,   idle_unmarshal};

/* ---- spread run "N MS [TYPE [DEADLINE_MS [monitor]]]": spawns N spins
 * (awaited, or with "monitor" spawned with SN_YIELD_MONITOR: their results
 * come as DOWNs, also from the nodes they were stolen by), and finishes
 * when all are back with "N done: A on node X, B on node Y, ..." (each
 * result is counted once: a spin lost or run twice shows). A spin whose
 * node went down while it ran there comes back as nodedown (relay/
 * awaited.c): counted as "(K lost with their node)"; with a deadline, what
 * has not come back by then is "(K missing)". */
typedef struct spread {
    uint64_t n, ms, back, started, lost;
    struct ran_on {
        uint32_t node;  /* a node the children ran on (in the order they first reported) */
        uint64_t count; /* how many ran there */
    } * on;
    size_t non, capon;
    char type[16];        /* spin (can move) or burn (cannot) */
    uint64_t deadline_ms; /* 0, or finish after this long with what came back */
    int timed_out;
    uint8_t *seen; /* per child: finished already (a duplicate fails) */
    int monitor;   /* results as DOWNs (SN_YIELD_MONITOR), not completions */
} spread_t;

static int spread_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    spread_t *s = state;
    char text[64], mode[16] = "";
    if (strcmp(method, "run") != 0)
        return SN_ENOMETHOD;
    arg_text(*input, text, sizeof text);
    snprintf(s->type, sizeof s->type, "spin");
    int got =
        sscanf(text, "%" SCNu64 " %" SCNu64 " %15s %" SCNu64 " %15s", &s->n, &s->ms, s->type, &s->deadline_ms, mode);
    if (got < 2 || s->n == 0 || s->n > 10000000 ||
        (strcmp(s->type, "spin") && strcmp(s->type, "burn") && strcmp(s->type, "idle")) ||
        (got == 5 && strcmp(mode, "monitor")))
        return SN_EINVAL;
    s->monitor = got == 5;
    s->seen = calloc(s->n, 1);
    return s->seen ? 0 : SN_ENOMEM;
}

static void spread_close(sn_ctx_t *ctx, void *state)
{
    spread_t *s = state;
    free(s->seen);
    free(s->on);
}

/* One more child ran on `node`; 0, or SN_ENOMEM. */
static int spread_count(spread_t *s, uint32_t node)
{
    for (size_t k = 0; k < s->non; k++)
        if (s->on[k].node == node) {
            s->on[k].count++;
            return 0;
        }
    if (s->non == s->capon) {
        size_t cap = s->capon ? s->capon * 2 : 8;
        struct ran_on *on = realloc(s->on, cap * sizeof *on);
        if (!on)
            return SN_ENOMEM;
        s->on = on;
        s->capon = cap;
    }
    s->on[s->non++] = (struct ran_on){node, 1};
    return 0;
}

static void spread_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    spread_t *s = state;
    out->status = s->monitor ? SN_IDLE : SN_WAIT; /* (a DOWN does not end a WAIT) */
    if (s->deadline_ms && s->started == 0)        /* give up on the missing ones then (tag 0) */
        sn_out_sleep(out, 0, s->deadline_ms);
    for (int k = 0; k < 1000 && s->started < s->n; k++, s->started++) { /* 1000 a step */
        sn_payload_t *arg = sn_payload_printf(SN_CT_TEXT, "%" PRIu64, s->ms);
        sn_out_spawn(out, s->started + 1, s->type, "work", &arg,
                     s->monitor ? SN_YIELD_MONITOR | SN_YIELD_NOREPLY : SN_YIELD_AWAIT);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t node;
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 0) {
            s->timed_out = 1;
            continue;
        }
        if (ev[i].type != (s->monitor ? SN_EV_DOWN : SN_EV_YIELD_COMPLETE) && !ev[i].error)
            continue;
        bool lost = ev[i].error == SN_ENODEDOWN && ev[i].tag >= 1 && ev[i].tag <= s->n; /* with its node */
        if (!lost && (ev[i].error || sn_payload_get_u64(ev[i].data, &node) != 0)) {
            sn_out_fail(out, ev[i].error ? ev[i].error : SN_EINVAL, "spin %" PRIu64 " failed: %s", ev[i].tag,
                        sn_strerror(ev[i].error));
            return;
        }
        if (ev[i].tag < 1 || ev[i].tag > s->n || s->seen[ev[i].tag - 1]++) {
            sn_out_fail(out, SN_EINVAL, "child %" PRIu64 " finished twice (or is unknown)%s", ev[i].tag,
                        lost ? ": nodedown after a result" : "");
            return;
        }
        if (lost) {
            s->lost++;
            continue;
        }
        s->back++;
        if (spread_count(s, (uint32_t)node) != 0) {
            sn_out_fail(out, SN_ENOMEM, "out of memory counting where the spins ran");
            return;
        }
    }
    if (s->started < s->n) {
        out->status = SN_CONTINUE;
        return;
    }
    if (s->back + s->lost < s->n && !s->timed_out)
        return;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len); /* every node: a 100-node spread names 100 */
    if (!f) {
        sn_out_fail(out, SN_ENOMEM, "out of memory for the result");
        return;
    }
    fprintf(f, "%" PRIu64 " done:", s->back);
    if (s->lost)
        fprintf(f, " (%" PRIu64 " lost with their node)", s->lost);
    if (s->back + s->lost < s->n)
        fprintf(f, " (%" PRIu64 " missing)", s->n - s->back - s->lost);
    for (size_t k = 0; k < s->non; k++)
        fprintf(f, "%s %" PRIu64 " on node %" PRIu32, k ? "," : "", s->on[k].count, s->on[k].node);
    bool ok = fclose(f) == 0;
    sn_payload_t *r = ok ? sn_payload_text(text) : NULL;
    free(text);
    if (!r) {
        sn_out_fail(out, SN_ENOMEM, "out of memory for the result");
        return;
    }
    sn_out_done(out, &r);
}

static const sn_type_t spread_type = {"spread", 1,   sizeof(spread_t), spread_init, spread_step, spread_close,
                                      NULL,     NULL};

/* ---- xwatch watch "PID": monitors PID and finishes with what its DOWN
 * said: "down PID: finished", "down PID: failed: REASON", or the error
 * ("down PID: noproc", "... nodedown", "... unreachable"). */
typedef struct xwatch {
    sn_pid_t target;
} xwatch_t;

static int xwatch_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    xwatch_t *x = state;
    if (strcmp(method, "watch") != 0)
        return SN_ENOMETHOD;
    char text[64];
    return sn_pid_parse(arg_text(*input, text, sizeof text), &x->target) == 0 ? 0 : SN_EINVAL;
}

static void xwatch_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    xwatch_t *x = state;
    out->status = SN_IDLE;
    if (n == 0) { /* first step */
        sn_out_monitor(out, x->target, 7);
        return;
    }
    char pid[SN_PID_STRLEN];
    sn_pid_format(x->target, pid, sizeof pid);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_DOWN || ev[i].tag != 7 || !sn_pid_eq(ev[i].from, x->target))
            continue;
        sn_payload_t *res;
        if (ev[i].error == 0)
            res = sn_payload_printf(SN_CT_TEXT, "down %s: finished", pid);
        else if (ev[i].data)
            res = sn_payload_printf(SN_CT_TEXT, "down %s: %s: %.*s", pid, sn_strerror(ev[i].error),
                                    (int)ev[i].data->len, (const char *)ev[i].data->data);
        else
            res = sn_payload_printf(SN_CT_TEXT, "down %s: %s", pid, sn_strerror(ev[i].error));
        sn_out_done(out, &res);
        return;
    }
}

static const sn_type_t xwatch_type = {"xwatch", 1, sizeof(xwatch_t), xwatch_init, xwatch_step, NULL, NULL, NULL};

static int demo_init(sn_sched_t *sched)
{
    const sn_type_t *types[] = {&tree_type,  &ring_type,  &sleeper_type, &oops_type, &xsource_type,
                                &xsink_type, &xpong_type, &xwatch_type,  &spin_type, &spread_type,
                                &burn_type,  &msink_type, &idle_type};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int rc = sn_type_register(sched, types[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

SN_PLUGIN_DEFINE("schednode-demo", demo_init);

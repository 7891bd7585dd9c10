/* test_dispatch.c - yields and their handlers: spawn (errors, AWAIT, PID),
 * unknown commands and PIDs, sends and bounces, user commands completed
 * from other threads, sleep, terminate, monitors, registration, many
 * yields in one step, message order.
 *
 * Most tests run a "script" process through sn_call: its method picks a
 * scenario; it emits the scenario's yields, logs every event it gets into
 * a global log and finishes when it has the events it expects. The test
 * thread then checks the log. Checks made on worker threads count
 * violations in atomics; cmocka assertions stay on the test thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

#define UNUSED_SERIAL (UINT64_C(1) << 40) /* far beyond any serial a test uses */
#define BOUNCE_N 300
#define ORDER_N 10000

static atomic_int g_bad; /* something a worker-side check did not like */

/* ---------------------------------------------------------- event log */

typedef struct evrec {
    int type;
    int error;
    uint64_t tag;
    sn_pid_t from;
    int has_data;
    uint32_t ctype, len;
    char text[160];
    int has_u64;
    uint64_t u64;
    int has_pid;
    sn_pid_t pid;
    uint64_t elapsed_ns; /* since the script's first step */
} evrec_t;

#define LOG_MAX 256
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static evrec_t g_log[LOG_MAX];
static int g_nlog;

static void log_event(const sn_event_t *e, uint64_t t0)
{
    evrec_t r;
    memset(&r, 0, sizeof r);
    r.type = e->type;
    r.error = e->error;
    r.tag = e->tag;
    r.from = e->from;
    r.elapsed_ns = now_ns() - t0;
    if (e->data) {
        r.has_data = 1;
        r.ctype = e->data->ctype;
        r.len = e->data->len;
        snprintf(r.text, sizeof r.text, "%s", (const char *)e->data->data);
        r.has_u64 = sn_payload_get_u64(e->data, &r.u64) == 0;
        r.has_pid = sn_payload_get_pid(e->data, &r.pid) == 0;
    }
    pthread_mutex_lock(&g_log_mu);
    if (g_nlog < LOG_MAX)
        g_log[g_nlog++] = r;
    else
        atomic_fetch_add(&g_bad, 1);
    pthread_mutex_unlock(&g_log_mu);
}

/* The logged event with this tag and type (the only one: duplicates fail). */
static const evrec_t *find_ev(int type, uint64_t tag)
{
    const evrec_t *hit = NULL;
    for (int i = 0; i < g_nlog; i++) {
        if (g_log[i].type == type && g_log[i].tag == tag) {
            assert_null(hit);
            hit = &g_log[i];
        }
    }
    assert_non_null(hit);
    return hit;
}

/* -------------------------------------------------------- type "child" */

static atomic_int g_victim_cancels;
static atomic_int g_seen[BOUNCE_N]; /* bounce: per message, consumed + bounced */

enum { C_DONE, C_INC, C_FAIL, C_PID, C_VICTIM, C_EAT, C_ORDER, C_VICTIM_FAIL, C_NMODES };
static const char *const child_methods[C_NMODES] = {"done",   "inc", "fail",  "pid",
                                                    "victim", "eat", "order", "victim_fail"};

typedef struct child {
    int mode;
    int started;
    sn_payload_t *input;
    uint64_t expect, next;
} child_t;

static int child_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    child_t *c = state;
    for (int i = 0; i < C_NMODES; i++) {
        if (strcmp(method, child_methods[i]) == 0) {
            c->mode = i;
            if (i == C_ORDER || i == C_INC)
                return sn_payload_get_u64(*input, i == C_ORDER ? &c->expect : &c->next) == 0 ? 0 : SN_EINVAL;
            c->input = sn_take(input);
            return 0;
        }
    }
    return SN_ENOMETHOD;
}

/* "victim" and "victim_fail": tell the parent who we are (tag 0 or 9), then
 * idle until cancelled; then finish ("victim") or fail ("victim_fail"). */
static void victim_step(child_t *c, bool first, sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    if (first) {
        sn_payload_t *m = sn_payload_pid(sn_ctx_self(ctx));
        sn_out_send(out, sn_ctx_parent(ctx), c->mode == C_VICTIM ? 0 : 9, &m);
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            atomic_fetch_add(&g_victim_cancels, 1);
            if (c->mode == C_VICTIM_FAIL) {
                sn_out_fail(out, SN_EPROTO, "victim failed on purpose");
                return;
            }
            sn_payload_t *r = sn_payload_text("cancelled");
            sn_out_done(out, &r);
            return;
        }
    }
    out->status = SN_IDLE;
}

/* "eat": consume the first batch of messages, report how many, finish:
 * whatever else was sent to us must bounce. */
static void eat_step(sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    uint64_t consumed = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t seq;
        if (ev[i].type == SN_EV_MESSAGE && sn_payload_get_u64(ev[i].data, &seq) == 0 && seq < BOUNCE_N) {
            atomic_fetch_add(&g_seen[seq], 1);
            consumed++;
        } else {
            atomic_fetch_add(&g_bad, 1);
        }
    }
    if (consumed == 0) {
        out->status = SN_IDLE;
        return;
    }
    sn_payload_t *m = sn_payload_u64(consumed);
    sn_out_send(out, sn_ctx_parent(ctx), 77, &m);
    sn_out_done(out, NULL);
}

/* "order": messages 0, 1, 2... in order, until c->expect of them came;
 * anything else fails. */
static void order_step(child_t *c, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (ev[i].type != SN_EV_MESSAGE || sn_payload_get_u64(ev[i].data, &v) != 0) {
            sn_out_fail(out, SN_EPROTO, "unexpected event %d", (int)ev[i].type);
            return;
        }
        if (v != c->next) {
            sn_out_fail(out, SN_EPROTO, "expected message %llu, got %llu", (unsigned long long)c->next,
                        (unsigned long long)v);
            return;
        }
        c->next++;
    }
    if (c->next == c->expect) {
        sn_payload_t *r = sn_payload_u64(c->next);
        sn_out_done(out, &r);
        return;
    }
    out->status = SN_IDLE;
}

static void child_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    child_t *c = state;
    bool first = !c->started;
    c->started = 1;
    switch (c->mode) {
    case C_DONE:
        sn_out_done(out, &c->input);
        return;
    case C_INC: {
        sn_payload_t *r = sn_payload_u64(c->next + 1);
        sn_out_done(out, &r);
        return;
    }
    case C_FAIL:
        sn_out_fail(out, SN_EPROTO, "child failed on purpose");
        return;
    case C_PID: {
        sn_payload_t *r = sn_payload_pid(sn_ctx_self(ctx));
        sn_out_done(out, &r);
        return;
    }
    case C_VICTIM:
    case C_VICTIM_FAIL: /* the same, but it fails when cancelled */
        victim_step(c, first, ctx, ev, n, out);
        return;
    case C_EAT:
        eat_step(ctx, ev, n, out);
        return;
    case C_ORDER:
        order_step(c, ev, n, out);
        return;
    }
}

static void child_close(sn_ctx_t *ctx, void *state)
{
    child_t *c = state;
    sn_payload_destroy(&c->input);
}

static const sn_type_t child_type = {"child", 1, sizeof(child_t), child_init, child_step, child_close, NULL, NULL};

/* ---------------------------------------------------- user commands */

/* "sync": completes inside the handler with a u64 copy of arg. */
static void sync_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    sn_payload_t *r = sn_payload_u64(req->arg);
    if (sn_complete_yield(sched, req->from, req->tag, 0, &r) != 0)
        atomic_fetch_add(&g_bad, 1);
}

/* "later": a new thread completes the request 20 ms later: arg 6 with
 * SN_EPROTO and a reason, anything else with "done:<arg>". */
typedef struct later_req {
    sn_sched_t *sched;
    sn_pid_t from;
    uint64_t tag, arg;
    char data[32];
} later_req_t;

static pthread_mutex_t g_later_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t g_later_th[16];
static int g_nlater;
static atomic_int g_later_on_worker; /* the handler ran on a scheduler worker */

static void *later_main(void *arg)
{
    later_req_t *r = arg;
    sleep_ms(20);
    sn_payload_t *p;
    int err = 0;
    if (r->arg == 6) {
        err = SN_EPROTO;
        p = sn_payload_printf(SN_CT_ERROR, "later failed for %s", r->data);
    } else {
        p = sn_payload_printf(SN_CT_TEXT, "done:%llu:%s", (unsigned long long)r->arg, r->data);
    }
    if (sn_complete_yield(r->sched, r->from, r->tag, err, &p) != 0)
        atomic_fetch_add(&g_bad, 1);
    if (p)
        atomic_fetch_add(&g_bad, 1); /* not taken */
    free(r);
    return NULL;
}

static void later_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    if (sn__self_worker(sched))
        atomic_fetch_add(&g_later_on_worker, 1);
    later_req_t *r = calloc(1, sizeof *r);
    if (!r) {
        atomic_fetch_add(&g_bad, 1);
        return;
    }
    /* req lives on the worker's stack: copy what the thread needs */
    r->sched = sched;
    r->from = req->from;
    r->tag = req->tag;
    r->arg = req->arg;
    snprintf(r->data, sizeof r->data, "%s", req->data ? (const char *)req->data->data : "-");
    pthread_mutex_lock(&g_later_mu);
    if (g_nlater < 16 && pthread_create(&g_later_th[g_nlater], NULL, later_main, r) == 0)
        g_nlater++;
    else {
        atomic_fetch_add(&g_bad, 1);
        free(r);
    }
    pthread_mutex_unlock(&g_later_mu);
}

static void later_join_all(void)
{
    pthread_mutex_lock(&g_later_mu);
    int n = g_nlater;
    g_nlater = 0;
    pthread_mutex_unlock(&g_later_mu);
    for (int i = 0; i < n; i++)
        pthread_join(g_later_th[i], NULL);
}

/* ------------------------------------------------------- type "script" */

enum {
    S_SPAWN_ERRORS,
    S_UNKNOWN_CMD,
    S_SEND_NOPROC,
    S_SEND_FINISHED,
    S_BOUNCE,
    S_USER_THREAD,
    S_SLEEP,
    S_TERMINATE,
    S_SPAWN_AWAIT,
    S_SPAWN_NOAWAIT,
    S_OVERFLOW,
    S_ORDER,
    S_MONITOR,
    S_NOPROC_DONE,
    S_SPAWN_MONITOR,
    S_NSCEN
};
static const char *const script_methods[S_NSCEN] = {"spawn_errors", "unknown_cmd",   "send_noproc",  "send_finished",
                                                    "bounce",       "user_thread",   "sleep",        "terminate",
                                                    "spawn_await",  "spawn_noawait", "overflow",     "order",
                                                    "monitor",      "noproc_done",   "spawn_monitor"};

typedef struct script {
    int scen;
    int started;
    int want; /* finish after this many logged events */
    int got;
    sn_status_t sleep; /* how to sleep between steps */
    sn_pid_t peer;     /* the input PID, or a child's */
    uint64_t t0, sent;
    /* bounce */
    int have_consumed;
    uint64_t consumed, bounced;
} script_t;

static struct {
    uint64_t consumed, bounced;
    sn_pid_t child;
} g_bounce;

static int script_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    script_t *sc = state;
    for (int i = 0; i < S_NSCEN; i++) {
        if (strcmp(method, script_methods[i]) == 0) {
            sc->scen = i;
            if (i == S_OVERFLOW || i == S_ORDER)
                return sn_payload_get_pid(*input, &sc->peer) == 0 ? 0 : SN_EINVAL;
            return 0;
        }
    }
    return SN_ENOMETHOD;
}

static sn_payload_t *text(const char *s)
{
    return sn_payload_text(s);
}

/* The first step of the spawn scenarios: spawns that fail, are awaited or
 * are not. */
static void start_spawns(script_t *sc, sn_step_out_t *out)
{
    sn_payload_t *p;
    switch (sc->scen) {
    case S_SPAWN_ERRORS: /* all three count as pending: WAIT is right */
        p = text("x");
        sn_out_spawn(out, 5, "child", "nope", &p, 0);
        sn_out_spawn(out, 6, "child", "nope", NULL, SN_YIELD_AWAIT);
        sn_out_spawn(out, 7, "no-such-type", "done", NULL, 0);
        sc->want = 3;
        break;
    case S_SPAWN_AWAIT:
        p = sn_payload_u64(41);
        sn_out_spawn(out, 1, "child", "inc", &p, SN_YIELD_AWAIT);
        sn_out_spawn(out, 2, "child", "fail", NULL, SN_YIELD_AWAIT);
        sc->want = 2;
        break;
    case S_SPAWN_MONITOR: /* the PID now, a DOWN with the result later */
        p = sn_payload_u64(41);
        sn_out_spawn(out, 1, "child", "inc", &p, SN_YIELD_MONITOR);    /* PID, then DOWN 0 with 42 */
        sn_out_spawn(out, 2, "child", "fail", NULL, SN_YIELD_MONITOR); /* PID, then DOWN EPROTO + reason */
        p = sn_payload_u64(6);
        sn_out_spawn(out, 3, "child", "inc", &p, SN_YIELD_MONITOR | SN_YIELD_NOREPLY); /* DOWN only, with 7 */
        sn_out_spawn(out, 4, "child", "nope", NULL, SN_YIELD_MONITOR);                 /* refused: error, no DOWN */
        p = sn_payload_u64(1);
        if (sn_out_spawn(out, 5, "child", "inc", &p, SN_YIELD_MONITOR | SN_YIELD_AWAIT) != SN_EINVAL || !p)
            atomic_fetch_add(&g_bad, 1); /* refused, and nothing taken */
        sn_payload_destroy(&p);
        sc->sleep = SN_IDLE; /* DOWNs are message-like: they end IDLE, not WAIT */
        sc->want = 6;
        break;
    case S_SPAWN_NOAWAIT:
        p = text("quiet");
        sn_out_spawn(out, 99, "child", "done", &p, SN_YIELD_NOREPLY);
        p = text("x");
        sn_out_spawn(out, 4, "child", "done", &p, 0);
        sc->want = 1;
        break;
    }
}

/* The first step of the send scenarios: sends to no process, and many
 * sends in one step. */
static void start_sends(script_t *sc, sn_pid_t self, sn_step_out_t *out)
{
    sn_payload_t *p;
    switch (sc->scen) {
    case S_NOPROC_DONE:                    /* sends that fail, then done in the same step: their
                                            * errors, payloads and all, are still queued when
                                            * the process completes, and are freed there */
        for (uint64_t k = 0; k < 2; k++) { /* big: not kept in the small-block cache, freed for real */
            static const char big[4096];
            p = sn_payload_new(SN_CT_BYTES, big, sizeof big);
            sn_out_send(out, (sn_pid_t){self.node, UNUSED_SERIAL + k}, 21 + k, &p);
        }
        sc->want = 0;
        break;
    case S_SEND_NOPROC: /* failed sends come back, but are not pending */
        p = text("lost");
        sn_out_send(out, (sn_pid_t){self.node, UNUSED_SERIAL}, 11, &p);
        p = text("far");
        sn_out_send(out, (sn_pid_t){self.node + 1, 5}, 12, &p);
        sc->sleep = SN_IDLE;
        sc->want = 2;
        break;
    case S_OVERFLOW:
        /* 100 yields in one step: far beyond the 2 inline ones */
        for (uint64_t i = 0; i < 50; i++) {
            p = sn_payload_u64(i);
            sn_out_send(out, sc->peer, i, &p);
            sn_yield_t *y = sn_out_yield(out, 0, "sync", 1000 + i);
            y->arg = i;
        }
        sc->want = 50;
        break;
    }
}

/* The first step of the scenarios that spawn a child to send to,
 * terminate or monitor (script_react goes on when it answers). */
static void start_with_child(script_t *sc, sn_pid_t self, sn_step_out_t *out)
{
    switch (sc->scen) {
    case S_SEND_FINISHED:
        sn_out_spawn(out, 1, "child", "pid", NULL, SN_YIELD_AWAIT);
        sc->want = 4;
        break;
    case S_BOUNCE:
        sn_out_spawn(out, 1, "child", "eat", NULL, 0);
        sc->want = 1 << 30; /* finishes on its own condition */
        break;
    case S_TERMINATE: /* the victim's PID comes as a message: IDLE, not WAIT */
        sn_out_spawn(out, 1, "child", "victim", NULL, SN_YIELD_AWAIT);
        sc->sleep = SN_IDLE;
        sc->want = 4;
        break;
    case S_MONITOR: /* two victims to watch, and a PID that never was */
        sn_out_spawn(out, 1, "child", "victim", NULL, SN_YIELD_AWAIT);
        sn_out_spawn(out, 3, "child", "victim_fail", NULL, SN_YIELD_AWAIT);
        sn_out_monitor(out, (sn_pid_t){self.node, UNUSED_SERIAL}, 50);
        sc->sleep = SN_IDLE;
        sc->want = 10;
        break;
    }
}

/* The first step of the command scenarios: an unknown command and PID,
 * user commands completed from another thread, sleeps. */
static void start_commands(script_t *sc, sn_step_out_t *out)
{
    sn_yield_t *y;
    switch (sc->scen) {
    case S_UNKNOWN_CMD:
        y = sn_out_yield(out, 0, "frobnicate", 9);
        y->data = text("ignored");
        sn_out_yield(out, 999, "by-bad-id", 10);
        sc->want = 2;
        break;
    case S_USER_THREAD:
        y = sn_out_yield(out, 0, "later", 21);
        y->arg = 5;
        y->data = text("five");
        y = sn_out_yield(out, 0, "later", 22);
        y->arg = 6;
        y->data = text("six");
        sc->want = 2;
        break;
    case S_SLEEP:
        sn_out_sleep(out, 31, 60);
        sn_out_sleep(out, 32, 20);
        sn_out_sleep(out, 33, 40);
        sc->want = 3;
        break;
    }
}

/* The first step: emit the scenario's yields (S_ORDER has its own step). */
static void script_start(script_t *sc, sn_ctx_t *ctx, sn_step_out_t *out)
{
    sn_pid_t self = sn_ctx_self(ctx);
    sc->sleep = SN_WAIT;
    switch (sc->scen) {
    case S_SPAWN_ERRORS:
    case S_SPAWN_AWAIT:
    case S_SPAWN_NOAWAIT:
    case S_SPAWN_MONITOR:
        start_spawns(sc, out);
        break;
    case S_NOPROC_DONE:
    case S_SEND_NOPROC:
    case S_OVERFLOW:
        start_sends(sc, self, out);
        break;
    case S_SEND_FINISHED:
    case S_BOUNCE:
    case S_TERMINATE:
    case S_MONITOR:
        start_with_child(sc, self, out);
        break;
    case S_UNKNOWN_CMD:
    case S_USER_THREAD:
    case S_SLEEP:
        start_commands(sc, out);
        break;
    }
}

/* Reacts to one event (after it was logged). */
static void script_react(script_t *sc, sn_event_t *e, sn_step_out_t *out)
{
    switch (sc->scen) {
    case S_SEND_FINISHED:
        if (e->type == SN_EV_YIELD_COMPLETE && e->tag == 1 && e->error == 0 &&
            sn_payload_get_pid(e->data, &sc->peer) == 0) {
            /* the child is finished: these come back */
            for (uint64_t i = 0; i < 3; i++) {
                sn_payload_t *m = sn_payload_u64(i);
                sn_out_send(out, sc->peer, 100 + i, &m);
            }
            sc->sleep = SN_IDLE;
        }
        break;
    case S_MONITOR: {
        sn_pid_t v;
        if (e->type == SN_EV_MESSAGE && e->tag == 0 && sn_payload_get_pid(e->data, &v) == 0) {
            /* three monitors, one dropped again, then the end */
            sn_out_monitor(out, v, 51);
            sn_out_monitor(out, v, 52);
            sn_out_monitor(out, v, 53);
            sn_out_demonitor(out, v, 52);
            sn_out_terminate(out, 2, v);
        } else if (e->type == SN_EV_MESSAGE && e->tag == 9 && sn_payload_get_pid(e->data, &v) == 0) {
            sn_out_monitor(out, v, 61);
            sn_out_terminate(out, 4, v);
        }
        break;
    }
    case S_TERMINATE:
        if (e->type == SN_EV_MESSAGE && sn_payload_get_pid(e->data, &sc->peer) == 0) {
            sn_out_terminate(out, 2, sc->peer);
            sn_out_terminate(out, 3, (sn_pid_t){sc->peer.node, UNUSED_SERIAL});
        }
        break;
    default:
        break;
    }
}

/* The bounce scenario keeps counts instead of a log. */
static void bounce_event(script_t *sc, sn_event_t *e, sn_step_out_t *out)
{
    uint64_t v;
    if (e->type == SN_EV_YIELD_COMPLETE && e->tag == 1) {
        if (e->error != 0 || sn_payload_get_pid(e->data, &sc->peer) != 0) {
            atomic_fetch_add(&g_bad, 1);
            return;
        }
        for (uint64_t i = 0; i < BOUNCE_N; i++) {
            sn_payload_t *m = sn_payload_u64(i);
            sn_out_send(out, sc->peer, 1000 + i, &m);
        }
        sc->sleep = SN_IDLE;
    } else if (e->type == SN_EV_MESSAGE && e->tag == 77 && sn_pid_eq(e->from, sc->peer) &&
               sn_payload_get_u64(e->data, &v) == 0) {
        sc->have_consumed = 1;
        sc->consumed = v;
    } else if (e->type == SN_EV_YIELD_COMPLETE && e->error == SN_ENOPROC && e->tag >= 1000 &&
               sn_pid_eq(e->from, sc->peer) && sn_payload_get_u64(e->data, &v) == 0 && v == e->tag - 1000 &&
               v < BOUNCE_N) {
        atomic_fetch_add(&g_seen[v], 1); /* the payload came back intact */
        sc->bounced++;
    } else {
        atomic_fetch_add(&g_bad, 1);
    }
}

static void script_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    script_t *sc = state;
    if (sc->scen == S_ORDER) { /* ORDER_N numbered messages, 1000 per step */
        for (size_t i = 0; i < n; i++)
            atomic_fetch_add(&g_bad, 1);
        for (int k = 0; k < 1000 && sc->sent < ORDER_N; k++, sc->sent++) {
            sn_payload_t *m = sn_payload_u64(sc->sent);
            sn_out_send(out, sc->peer, sc->sent, &m);
        }
        if (sc->sent < ORDER_N)
            out->status = SN_CONTINUE;
        else
            sn_out_done(out, NULL);
        return;
    }
    if (!sc->started) {
        sc->started = 1;
        sc->t0 = now_ns();
        script_start(sc, ctx, out);
    }
    for (size_t i = 0; i < n; i++) {
        if (sc->scen == S_BOUNCE) {
            bounce_event(sc, &ev[i], out);
            continue;
        }
        log_event(&ev[i], sc->t0);
        sc->got++;
        script_react(sc, &ev[i], out);
    }
    if (sc->scen == S_BOUNCE && sc->have_consumed && sc->consumed + sc->bounced >= BOUNCE_N) {
        g_bounce.consumed = sc->consumed;
        g_bounce.bounced = sc->bounced;
        g_bounce.child = sc->peer;
        sn_out_done(out, NULL);
        return;
    }
    if (sc->got >= sc->want) {
        sn_out_done(out, NULL);
        return;
    }
    out->status = sc->sleep;
}

static const sn_type_t script_type = {"script", 1, sizeof(script_t), script_init, script_step, NULL, NULL, NULL};

/* ------------------------------------------- empty and bulk messages */

#define NULL_N 300         /* empty messages: more than one step drains (128) */
#define BULK_SENDERS 4     /* senders of one batch each, to one sink */
#define BULK_N 50000       /* messages in each batch */
#define BULK_NOPROC_N 1000 /* a batch to no process: each comes back */

/* "nullsink": takes the first step's batch of messages (each must be an
 * empty SN_CT_BYTES payload with tag 5), tells the sender how many, and
 * finishes: the rest of what was queued must come back to the sender. */
static void nullsink_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    uint64_t got = 0;
    sn_pid_t from = SN_PID_NONE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE || !ev[i].data || ev[i].data->len != 0 || ev[i].data->ctype != SN_CT_BYTES ||
            ev[i].tag != 5)
            atomic_fetch_add(&g_bad, 1);
        from = ev[i].from;
        got++;
    }
    if (got == 0) {
        out->status = SN_IDLE;
        return;
    }
    sn_out_send(out, from, 77, &(sn_payload_t *){sn_payload_u64(got)});
    sn_out_done(out, NULL);
}

/* "nullsend" (input: the sink's PID): NULL_N empty messages to the sink,
 * half with a NULL pointer, half with a pointer to NULL, and two to no
 * process; done when the sink's count plus what came back is NULL_N. */
typedef struct nullsend {
    sn_pid_t sink;
    uint64_t consumed, back, noproc;
    int started, have_consumed;
} nullsend_t;

static int nullsend_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    nullsend_t *ns = state;
    if (!strcmp(method, "sink"))
        return 0;
    return sn_payload_get_pid(*input, &ns->sink) == 0 ? 0 : SN_EINVAL;
}

static void nullsend_event(nullsend_t *ns, const sn_event_t *e)
{
    uint64_t v;
    bool empty = e->data && e->data->len == 0 && e->data->ctype == SN_CT_BYTES;
    if (e->type == SN_EV_MESSAGE && e->tag == 77 && sn_payload_get_u64(e->data, &v) == 0) {
        ns->have_consumed = 1;
        ns->consumed = v;
    } else if (e->type == SN_EV_YIELD_COMPLETE && e->error == SN_ENOPROC && e->tag == 5 && empty &&
               sn_pid_eq(e->from, ns->sink)) {
        ns->back++; /* queued at the sink when it ended: returned, not dropped */
    } else if (e->type == SN_EV_YIELD_COMPLETE && e->error == SN_ENOPROC && e->tag == 6 && empty) {
        ns->noproc++;
    } else {
        atomic_fetch_add(&g_bad, 1);
    }
}

static void nullsend_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    nullsend_t *ns = state;
    if (!sn_pid_is_none(ns->sink) && !ns->started) {
        ns->started = 1;
        for (int i = 0; i < NULL_N; i++)
            sn_out_send(out, ns->sink, 5, i % 2 ? NULL : &(sn_payload_t *){NULL});
        sn_pid_t none = {ns->sink.node, UNUSED_SERIAL};
        sn_out_send(out, none, 6, NULL);
        sn_out_send(out, none, 6, &(sn_payload_t *){NULL});
    }
    if (sn_pid_is_none(ns->sink)) { /* the sink */
        nullsink_step(ctx, state, ev, n, out);
        return;
    }
    for (size_t i = 0; i < n; i++)
        nullsend_event(ns, &ev[i]);
    out->status = SN_IDLE;
    if (ns->have_consumed && ns->consumed + ns->back >= NULL_N && ns->noproc == 2) {
        sn_payload_t *r = sn_payload_u64(ns->back);
        sn_out_done(out, &r);
    }
}

static const sn_type_t nullsend_type = {
    .name = "nullsend", .version = 1, .state_size = sizeof(nullsend_t), .init = nullsend_init, .step = nullsend_step};

/* "bulk" sender (input: sink PID, sender index, count, to_noproc): in its
 * first step, message 0 by sn_out_send, 1..count-2 in one sn_out_send_many,
 * count-1 by sn_out_send again: the sink checks the order across them. To
 * no process ("noproc"): every message of the batch comes back. */
typedef struct bulk {
    sn_pid_t sink;
    uint64_t index, count, back;
    int noproc;
} bulk_t;

static int bulk_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    bulk_t *b = state;
    b->noproc = !strcmp(method, "noproc");
    if (!*input || (*input)->len != sizeof(sn_pid_t) + 16)
        return SN_EINVAL;
    memcpy(&b->sink, (*input)->data, sizeof b->sink);
    memcpy(&b->index, (*input)->data + sizeof b->sink, 8);
    memcpy(&b->count, (*input)->data + sizeof b->sink + 8, 8);
    return 0;
}

static void bulk_send(bulk_t *b, sn_step_out_t *out)
{
    sn_payload_t **m = calloc(b->count, sizeof *m);
    if (!m) {
        sn_out_fail(out, SN_ENOMEM, "no memory");
        return;
    }
    for (uint64_t i = 0; i < b->count; i++)
        m[i] = b->noproc && i % 10 == 0 ? NULL : sn_payload_u64(b->index << 32 | i); /* NULL: an empty one */
    if (b->noproc) {
        if (sn_out_send_many(out, b->sink, 8, m, b->count) != 0)
            atomic_fetch_add(&g_bad, 1);
    } else {
        sn_out_send(out, b->sink, 8, &m[0]);
        if (sn_out_send_many(out, b->sink, 8, m + 1, b->count - 2) != 0)
            atomic_fetch_add(&g_bad, 1);
        sn_out_send(out, b->sink, 8, &m[b->count - 1]);
    }
    for (uint64_t i = 0; i < b->count; i++)
        if (m[i])
            atomic_fetch_add(&g_bad, 1); /* every one taken */
    free(m);
}

static void bulk_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    bulk_t *b = state;
    out->status = b->noproc ? SN_IDLE : SN_DONE;
    if (n == 0) {
        bulk_send(b, out);
        return;
    }
    for (size_t i = 0; i < n; i++) { /* noproc: each back, in order, with its payload */
        uint64_t v;
        bool empty = ev[i].data && ev[i].data->len == 0;
        if (ev[i].type != SN_EV_YIELD_COMPLETE || ev[i].error != SN_ENOPROC || ev[i].tag != 8 ||
            (b->back % 10 == 0 ? !empty : sn_payload_get_u64(ev[i].data, &v) != 0 || v != (b->index << 32 | b->back)))
            atomic_fetch_add(&g_bad, 1);
        b->back++;
    }
    if (b->back == b->count)
        sn_out_done(out, NULL);
}

static const sn_type_t bulk_type = {
    .name = "bulk", .version = 1, .state_size = sizeof(bulk_t), .init = bulk_init, .step = bulk_step};

/* "bulksink" (input: the total): per sender, messages 0, 1, 2... in order;
 * done with the count when all came. */
typedef struct bulksink {
    uint64_t total, got, next[BULK_SENDERS];
} bulksink_t;

static int bulksink_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return sn_payload_get_u64(*input, &((bulksink_t *)state)->total) == 0 ? 0 : SN_EINVAL;
}

static void bulksink_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    bulksink_t *k = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (ev[i].type != SN_EV_MESSAGE || ev[i].tag != 8 || sn_payload_get_u64(ev[i].data, &v) != 0 ||
            v >> 32 >= BULK_SENDERS || (v & 0xffffffffu) != k->next[v >> 32]) {
            sn_out_fail(out, SN_EPROTO, "out of order or unexpected at %llu", (unsigned long long)k->got);
            return;
        }
        k->next[v >> 32]++;
        k->got++;
    }
    if (k->got == k->total)
        sn_out_done(out, &(sn_payload_t *){sn_payload_u64(k->got)});
}

static const sn_type_t bulksink_type = {
    .name = "bulksink", .version = 1, .state_size = sizeof(bulksink_t), .init = bulksink_init, .step = bulksink_step};

/* "gate": holds its worker until g_gate is cleared; "first": records the
 * n of its first step, then finishes after 3 messages. */
static atomic_int g_gate, g_gate_holding;
static atomic_long g_first_n = -1;

static int any_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return 0;
}

static void gate_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    atomic_store(&g_gate_holding, 1);
    uint64_t end = deadline_ns(WAIT_MS);
    while (atomic_load(&g_gate) && now_ns() < end)
        sleep_ms(1);
    sn_out_done(out, NULL);
}

static void first_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    uint64_t *got = state;
    if (atomic_load(&g_first_n) < 0)
        atomic_store(&g_first_n, (long)n);
    for (size_t i = 0; i < n; i++)
        *got += ev[i].type == SN_EV_MESSAGE;
    out->status = *got == 3 ? SN_DONE : SN_IDLE;
}

static const sn_type_t gate_type = {.name = "gate", .version = 1, .init = any_init, .step = gate_step};
static const sn_type_t first_type = {
    .name = "first", .version = 1, .state_size = sizeof(uint64_t), .init = any_init, .step = first_step};

/* ------------------------------------------------------------- fixture */

static sn_sched_t *mk(void)
{
    sn_sched_config_t cfg = {1, 3, 1};
    sn_sched_t *s = sn_sched_new(&cfg);
    assert_non_null(s);
    assert_int_equal(sn_type_register(s, &child_type), 0);
    assert_int_equal(sn_type_register(s, &script_type), 0);
    assert_int_equal(sn_type_register(s, &nullsend_type), 0);
    assert_int_equal(sn_type_register(s, &bulk_type), 0);
    assert_int_equal(sn_type_register(s, &bulksink_type), 0);
    assert_true(sn_command_register(s, "sync", sync_cmd, NULL) > 0);
    assert_true(sn_command_register(s, "later", later_cmd, NULL) > 0);
    return s;
}

static int reset(void **unused)
{
    atomic_store(&g_bad, 0);
    atomic_store(&g_victim_cancels, 0);
    atomic_store(&g_later_on_worker, 0);
    for (int i = 0; i < BOUNCE_N; i++)
        atomic_store(&g_seen[i], 0);
    memset(&g_bounce, 0, sizeof g_bounce);
    pthread_mutex_lock(&g_log_mu);
    g_nlog = 0;
    pthread_mutex_unlock(&g_log_mu);
    return 0;
}

/* Runs a script to completion; returns sn_call's code. */
static int run_script(sn_sched_t *s, const char *scenario, sn_payload_t *input)
{
    sn_payload_t *res = NULL;
    int rc = sn_call(s, "script", scenario, &input, WAIT_MS, &res);
    sn_payload_destroy(&input);
    sn_payload_destroy(&res);
    assert_int_not_equal(rc, SN_ETIMEDOUT);
    return rc;
}

/* Spawns a "child" "order" receiver that reports to c and expects n
 * numbered messages; returns its PID. */
static sn_pid_t spawn_receiver(sn_sched_t *s, collector_t *c, uint64_t n)
{
    sn_pid_t rx;
    sn_payload_t *in = sn_payload_u64(n);
    assert_int_equal(sn_spawn(s, "child", "order", &in, collector_on_result, c, &rx), 0);
    return rx;
}

/* Waits for a receiver from spawn_receiver: DONE with all n messages, in order. */
static void assert_receiver_got(collector_t *c, uint64_t n)
{
    assert_true(collector_wait(c, WAIT_MS));
    if (c->status != SN_DONE && c->result)
        print_error("receiver: %s\n", (const char *)c->result->data);
    assert_int_equal(c->status, SN_DONE);
    assert_int_equal(result_u64(c), n);
}

/* ---------------------------------------------------------------- tests */

/* sn_spawn / sn_call refuse an unknown method or type; on_result is not
 * called. */
static void test_spawn_unknown_method_and_type(void **unused)
{
    sn_sched_t *s = mk();
    collector_t c;
    collector_init(&c);
    sn_payload_t *in = text("x"), *res = NULL;
    sn_pid_t pid = SN_PID_NONE;
    assert_int_equal(sn_spawn(s, "child", "nope", &in, collector_on_result, &c, &pid), SN_ENOMETHOD);
    sn_payload_destroy(&in);
    assert_true(sn_pid_is_none(pid));
    assert_int_equal(sn_call(s, "child", "nope", NULL, WAIT_MS, &res), SN_ENOMETHOD);
    assert_null(res);

    in = text("y");
    assert_int_equal(sn_spawn(s, "no-such-type", "done", &in, collector_on_result, &c, &pid), SN_ENOTYPE);
    sn_payload_destroy(&in); /* per the ownership rule: ours unless NULLed */
    assert_true(sn_pid_is_none(pid));
    assert_int_equal(sn_call(s, "no-such-type", "done", NULL, WAIT_MS, &res), SN_ENOTYPE);
    assert_null(res);

    sn_stats_t st;
    sn_sched_stats(s, &st);
    assert_int_equal(st.spawned, 0);
    sn_sched_destroy(&s);
    assert_int_equal(c.calls, 0);
    collector_fini(&c);
}

/* A spawn yield with an unknown method or type completes with the error
 * and a reason text naming what was wrong; it counts as pending. */
static void test_spawn_yield_errors(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "spawn_errors", NULL), 0);
    assert_int_equal(g_nlog, 3);
    for (int i = 0; i < 3; i++) { /* in dispatch order */
        assert_int_equal(g_log[i].type, SN_EV_YIELD_COMPLETE);
        assert_int_equal(g_log[i].tag, 5 + i);
        assert_true(g_log[i].has_data);
        assert_int_equal(g_log[i].ctype, SN_CT_ERROR);
    }
    assert_int_equal(g_log[0].error, SN_ENOMETHOD);
    assert_non_null(strstr(g_log[0].text, "nope"));
    assert_non_null(strstr(g_log[0].text, "child"));
    assert_int_equal(g_log[1].error, SN_ENOMETHOD); /* with SN_YIELD_AWAIT too */
    assert_non_null(strstr(g_log[1].text, "nope"));
    assert_int_equal(g_log[2].error, SN_ENOTYPE);
    assert_non_null(strstr(g_log[2].text, "no-such-type"));
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* A command nobody registered completes with SN_ENOCMD and a reason that
 * names it; so does a yield with a command id nobody has. */
static void test_unknown_command(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(sn_command_id(s, "frobnicate"), SN_ENOCMD);
    assert_int_equal(run_script(s, "unknown_cmd", NULL), 0);
    assert_int_equal(g_nlog, 2);
    assert_int_equal(g_log[0].type, SN_EV_YIELD_COMPLETE);
    assert_int_equal(g_log[0].tag, 9);
    assert_int_equal(g_log[0].error, SN_ENOCMD);
    assert_int_equal(g_log[0].ctype, SN_CT_ERROR);
    assert_non_null(strstr(g_log[0].text, "frobnicate"));
    assert_int_equal(g_log[1].tag, 10);
    assert_int_equal(g_log[1].error, SN_ENOCMD);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* A send to an unknown local PID, or to another node with no relay, comes
 * back as a completion with SN_ENOPROC, the send's tag and the payload. */
static void test_send_to_unknown_pid(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "send_noproc", NULL), 0);
    assert_int_equal(g_nlog, 2);
    const evrec_t *a = find_ev(SN_EV_YIELD_COMPLETE, 11);
    assert_int_equal(a->error, SN_ENOPROC);
    assert_true(sn_pid_eq(a->from, ((sn_pid_t){1, UNUSED_SERIAL})));
    assert_true(a->has_data);
    assert_int_equal(a->ctype, SN_CT_TEXT);
    assert_int_equal(a->len, 4);
    assert_string_equal(a->text, "lost");
    const evrec_t *b = find_ev(SN_EV_YIELD_COMPLETE, 12);
    assert_int_equal(b->error, SN_ENOPROC);
    assert_true(sn_pid_eq(b->from, ((sn_pid_t){2, 5})));
    assert_string_equal(b->text, "far");

    /* from outside: the error, and the payload stays with the caller */
    sn_payload_t *m = text("outside");
    assert_int_equal(sn_send(s, (sn_pid_t){1, UNUSED_SERIAL}, &m), SN_ENOPROC);
    assert_non_null(m);
    assert_int_equal(sn_send(s, (sn_pid_t){7, 1}, &m), SN_ENOPROC);
    assert_non_null(m);
    sn_payload_destroy(&m);
    sn_stats_t st;
    sn_sched_stats(s, &st);
    assert_int_equal(st.noproc, 4);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* A process that finishes with bounced sends still queued: the queued
 * events (each living inside its payload) are freed once, cleanly (ASan
 * caught a write into the freed block here). */
static void test_complete_with_queued_bounces(void **unused)
{
    sn_sched_t *s = mk();
    for (int i = 0; i < 100; i++)
        assert_int_equal(run_script(s, "noproc_done", NULL), 0);
    assert_int_equal(g_nlog, 0);
    sn_stats_t st;
    sn_sched_stats(s, &st);
    assert_int_equal(st.noproc, 200);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* Messages to a process that has finished come back with SN_ENOPROC. */
static void test_send_to_finished_process(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "send_finished", NULL), 0);
    assert_int_equal(g_nlog, 4);
    const evrec_t *done = find_ev(SN_EV_YIELD_COMPLETE, 1);
    assert_int_equal(done->error, 0);
    assert_true(done->has_pid);
    for (uint64_t i = 0; i < 3; i++) {
        const evrec_t *e = find_ev(SN_EV_YIELD_COMPLETE, 100 + i);
        assert_int_equal(e->error, SN_ENOPROC);
        assert_true(sn_pid_eq(e->from, done->pid));
        assert_true(e->has_u64);
        assert_int_equal(e->u64, i);
    }
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* Messages queued to a process when it finishes are bounced to their
 * senders with SN_ENOPROC and their payloads: each message is either
 * consumed or bounced, exactly once. */
static void test_bounce_when_receiver_finishes(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "bounce", NULL), 0);
    assert_true(g_bounce.consumed > 0);
    assert_int_equal(g_bounce.consumed + g_bounce.bounced, BOUNCE_N);
    for (int i = 0; i < BOUNCE_N; i++)
        assert_int_equal(atomic_load(&g_seen[i]), 1);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* A registered command completed later from another thread: the process
 * gets the completion with the tag, the error and the data. */
static void test_user_command_from_thread(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "user_thread", NULL), 0);
    later_join_all();
    assert_int_equal(atomic_load(&g_later_on_worker), 2); /* the handler runs on the worker */
    assert_int_equal(g_nlog, 2);
    const evrec_t *a = find_ev(SN_EV_YIELD_COMPLETE, 21);
    assert_int_equal(a->error, 0);
    assert_int_equal(a->ctype, SN_CT_TEXT);
    assert_string_equal(a->text, "done:5:five");
    const evrec_t *b = find_ev(SN_EV_YIELD_COMPLETE, 22);
    assert_int_equal(b->error, SN_EPROTO);
    assert_int_equal(b->ctype, SN_CT_ERROR);
    assert_string_equal(b->text, "later failed for six");
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* sleep completes no sooner than asked, with no error and no data; three
 * sleeps come back in deadline order. */
static void test_sleep(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "sleep", NULL), 0);
    assert_int_equal(g_nlog, 3);
    static const uint64_t tags[3] = {32, 33, 31}, ms[3] = {20, 40, 60};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(g_log[i].type, SN_EV_YIELD_COMPLETE);
        assert_int_equal(g_log[i].tag, tags[i]);
        assert_int_equal(g_log[i].error, 0);
        assert_false(g_log[i].has_data);
        assert_true(g_log[i].elapsed_ns >= ms[i] * 1000000u);
    }
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* terminate: the target gets SN_EV_CANCEL, the yield completes with 0;
 * terminate of an unknown PID completes with SN_ENOPROC. The awaited
 * victim's result then comes back to its parent. */
static void test_terminate(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "terminate", NULL), 0);
    assert_int_equal(g_nlog, 4);
    assert_int_equal(atomic_load(&g_victim_cancels), 1);
    const evrec_t *hello = find_ev(SN_EV_MESSAGE, 0);
    assert_true(hello->has_pid);
    assert_true(sn_pid_eq(hello->from, hello->pid));
    const evrec_t *t = find_ev(SN_EV_YIELD_COMPLETE, 2);
    assert_int_equal(t->error, 0);
    assert_true(sn_pid_eq(t->from, hello->pid));
    const evrec_t *u = find_ev(SN_EV_YIELD_COMPLETE, 3);
    assert_int_equal(u->error, SN_ENOPROC);
    const evrec_t *r = find_ev(SN_EV_YIELD_COMPLETE, 1);
    assert_int_equal(r->error, 0);
    assert_true(sn_pid_eq(r->from, hello->pid));
    assert_string_equal(r->text, "cancelled");
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* spawn with SN_YIELD_AWAIT completes when the child finishes: with its
 * result (DONE) or its error and reason (FAIL). */
static void test_spawn_await_delivers_result(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "spawn_await", NULL), 0);
    assert_int_equal(g_nlog, 2);
    const evrec_t *a = find_ev(SN_EV_YIELD_COMPLETE, 1);
    assert_int_equal(a->error, 0);
    assert_true(a->has_u64);
    assert_int_equal(a->u64, 42);
    assert_false(sn_pid_is_none(a->from)); /* from the child */
    const evrec_t *b = find_ev(SN_EV_YIELD_COMPLETE, 2);
    assert_int_equal(b->error, SN_EPROTO);
    assert_int_equal(b->ctype, SN_CT_ERROR);
    assert_string_equal(b->text, "child failed on purpose");
    assert_false(sn_pid_eq(a->from, b->from));
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* spawn without SN_YIELD_AWAIT completes at once with the child's PID;
 * with SN_YIELD_NOREPLY it does not complete at all. */
static void test_spawn_delivers_pid(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "spawn_noawait", NULL), 0);
    assert_int_equal(g_nlog, 1);
    assert_int_equal(g_log[0].type, SN_EV_YIELD_COMPLETE);
    assert_int_equal(g_log[0].tag, 4);
    assert_int_equal(g_log[0].error, 0);
    assert_int_equal(g_log[0].ctype, SN_CT_PID);
    assert_true(g_log[0].has_pid);
    assert_int_equal(g_log[0].pid.node, 1);
    assert_int_not_equal(g_log[0].pid.serial, 0);
    assert_true(sn_pid_eq(g_log[0].from, g_log[0].pid));
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* The index in the log of the event with this tag and type (the only one). */
static int ev_index(int type, uint64_t tag)
{
    return (int)(find_ev(type, tag) - g_log);
}

/* spawn with SN_YIELD_MONITOR (Erlang's spawn_monitor): the completion at
 * once with the child's PID, then exactly one DOWN with the spawn's tag,
 * from the child, with its result (error 0) or its error and reason; the
 * PID always first (it is queued before the child can run: 200 rounds,
 * children on other workers). NOREPLY: the DOWN only. A refused spawn:
 * its error, no DOWN. With SN_YIELD_AWAIT: SN_EINVAL. */
static void test_spawn_monitor(void **unused)
{
    sn_sched_t *s = mk();
    for (int round = 0; round < 200; round++) {
        reset(NULL);
        assert_int_equal(run_script(s, "spawn_monitor", NULL), 0);
        assert_int_equal(g_nlog, 6);
        for (uint64_t tag = 1; tag <= 2; tag++) {
            const evrec_t *pid = find_ev(SN_EV_YIELD_COMPLETE, tag), *down = find_ev(SN_EV_DOWN, tag);
            assert_int_equal(pid->error, 0);
            assert_true(pid->has_pid);
            assert_true(sn_pid_eq(pid->pid, pid->from));
            assert_true(sn_pid_eq(down->from, pid->pid));
            assert_true(ev_index(SN_EV_YIELD_COMPLETE, tag) < ev_index(SN_EV_DOWN, tag));
        }
        const evrec_t *ok = find_ev(SN_EV_DOWN, 1), *failed = find_ev(SN_EV_DOWN, 2), *quiet = find_ev(SN_EV_DOWN, 3);
        assert_int_equal(ok->error, 0);
        assert_true(ok->has_u64);
        assert_int_equal(ok->u64, 42);
        assert_int_equal(failed->error, SN_EPROTO);
        assert_int_equal(failed->ctype, SN_CT_ERROR);
        assert_string_equal(failed->text, "child failed on purpose");
        assert_int_equal(quiet->error, 0);
        assert_int_equal(quiet->u64, 7);
        const evrec_t *refused = find_ev(SN_EV_YIELD_COMPLETE, 4);
        assert_int_equal(refused->error, SN_ENOMETHOD);
        assert_string_equal(refused->text, "process type 'child' has no method 'nope'");
        for (int i = 0; i < g_nlog; i++) {
            assert_false(g_log[i].type == SN_EV_YIELD_COMPLETE && g_log[i].tag == 3); /* NOREPLY */
            assert_false(g_log[i].type == SN_EV_DOWN && g_log[i].tag == 4);           /* refused */
        }
    }
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* Monitors (Erlang's): one DOWN per monitor when the process ends, with
 * its error and reason if it failed; none for a monitor dropped with
 * demonitor; noproc at once for a PID with no process. DOWN is message-like:
 * it reaches an IDLE process. */
static void test_monitor(void **unused)
{
    sn_sched_t *s = mk();
    assert_int_equal(run_script(s, "monitor", NULL), 0);
    assert_int_equal(g_nlog, 10);
    const evrec_t *pid_msg = find_ev(SN_EV_MESSAGE, 0), *fail_msg = find_ev(SN_EV_MESSAGE, 9);
    const evrec_t *none = find_ev(SN_EV_DOWN, 50);
    assert_int_equal(none->error, SN_ENOPROC);
    assert_int_equal(none->from.serial, UNUSED_SERIAL);
    for (uint64_t tag = 51; tag <= 53; tag += 2) {
        const evrec_t *d = find_ev(SN_EV_DOWN, tag);
        assert_int_equal(d->error, 0);
        assert_true(sn_pid_eq(d->from, pid_msg->pid));
        assert_false(d->has_data);
    }
    for (int i = 0; i < g_nlog; i++)
        assert_false(g_log[i].type == SN_EV_DOWN && g_log[i].tag == 52); /* demonitored */
    const evrec_t *f = find_ev(SN_EV_DOWN, 61);
    assert_int_equal(f->error, SN_EPROTO);
    assert_true(sn_pid_eq(f->from, fail_msg->pid));
    assert_string_equal(f->text, "victim failed on purpose");
    assert_int_equal(find_ev(SN_EV_YIELD_COMPLETE, 1)->error, 0);
    assert_int_equal(find_ev(SN_EV_YIELD_COMPLETE, 3)->error, SN_EPROTO);
    assert_int_equal(find_ev(SN_EV_YIELD_COMPLETE, 2)->error, 0); /* the terminates */
    assert_int_equal(find_ev(SN_EV_YIELD_COMPLETE, 4)->error, 0);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

/* Registration: duplicates give SN_EEXIST (built-in names included),
 * incomplete registrations SN_EINVAL. */
static void test_duplicate_registration(void **unused)
{
    sn_sched_t *s = mk();
    int id = sn_command_register(s, "dup", sync_cmd, NULL);
    assert_true(id >= SN__CMD_FIRST_USER);
    assert_int_equal(sn_command_id(s, "dup"), id);
    assert_int_equal(sn_command_register(s, "dup", later_cmd, NULL), SN_EEXIST);
    assert_int_equal(sn_command_id(s, "dup"), id);
    assert_int_equal(sn_command_register(s, "sync", sync_cmd, NULL), SN_EEXIST);
    assert_int_equal(sn_command_register(s, "send", sync_cmd, NULL), SN_EEXIST);
    assert_int_equal(sn_command_register(s, "sleep", sync_cmd, NULL), SN_EEXIST);
    assert_int_equal(sn_command_register(s, "x", NULL, NULL), SN_EINVAL);
    assert_int_equal(sn_command_register(s, "", sync_cmd, NULL), SN_EINVAL);
    assert_int_equal(sn_command_id(s, "send"), SN__CMD_SEND);
    assert_int_equal(sn_command_id(s, "no-such-command"), SN_ENOCMD);

    assert_int_equal(sn_type_register(s, &child_type), SN_EEXIST);
    sn_type_t other = child_type; /* same name, different struct */
    assert_int_equal(sn_type_register(s, &other), SN_EEXIST);
    assert_ptr_equal(sn_type_find(s, "child"), &child_type);
    sn_type_t nostep = {"nostep", 1, 0, child_init, NULL, NULL, NULL, NULL};
    assert_int_equal(sn_type_register(s, &nostep), SN_EINVAL);
    assert_null(sn_type_find(s, "nostep"));
    sn_sched_destroy(&s);
}

/* 50 sends and 50 command yields in one step (beyond the 2 inline yields):
 * all dispatched, in order. */
static void test_many_yields_in_one_step(void **unused)
{
    sn_sched_t *s = mk();
    collector_t c;
    collector_init(&c);
    sn_pid_t rx = spawn_receiver(s, &c, 50);
    assert_int_equal(run_script(s, "overflow", sn_payload_pid(rx)), 0);
    assert_int_equal(g_nlog, 50);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(g_log[i].type, SN_EV_YIELD_COMPLETE);
        assert_int_equal(g_log[i].tag, 1000 + (uint64_t)i);
        assert_int_equal(g_log[i].u64, (uint64_t)i);
    }
    assert_receiver_got(&c, 50);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
    collector_fini(&c);
}

/* 10000 numbered messages from one process to another, sent over several
 * steps, arrive in order. */
static void test_message_order(void **unused)
{
    sn_sched_t *s = mk();
    collector_t c;
    collector_init(&c);
    sn_pid_t rx = spawn_receiver(s, &c, ORDER_N);
    assert_int_equal(run_script(s, "order", sn_payload_pid(rx)), 0);
    assert_receiver_got(&c, ORDER_N);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
    collector_fini(&c);
}

/* A NULL payload in sn_out_send (a NULL pointer, or a pointer to NULL)
 * sends an empty message: the receiver gets a 0-byte SN_CT_BYTES payload
 * with the send's tag; one to no process comes back as noproc with an
 * empty payload; ones still queued when the receiver ends come back too
 * (they were dropped unreturned when a NULL send was a NULL event). */
static void test_null_payload_send(void **unused)
{
    sn_sched_t *s = mk();
    sn_pid_t sink;
    assert_int_equal(sn_spawn(s, "nullsend", "sink", NULL, NULL, NULL, &sink), 0);
    sn_payload_t *res = NULL;
    sn_payload_t *in = sn_payload_pid(sink);
    assert_int_equal(sn_call(s, "nullsend", "send", &in, WAIT_MS, &res), 0);
    uint64_t back = 0;
    assert_int_equal(sn_payload_get_u64(res, &back), 0);
    assert_true(back > 0); /* a step drains at most 128: the rest came back */
    print_message("%d empty messages: %llu consumed, %llu returned\n", NULL_N, (unsigned long long)(NULL_N - back),
                  (unsigned long long)back);
    sn_payload_destroy(&res);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
}

static sn_payload_t *bulk_input(sn_pid_t sink, uint64_t index, uint64_t count)
{
    sn_payload_t *p = sn_payload_new(SN_CT_BYTES, NULL, sizeof sink + 16);
    memcpy(p->data, &sink, sizeof sink);
    memcpy(p->data + sizeof sink, &index, 8);
    memcpy(p->data + sizeof sink + 8, &count, 8);
    return p;
}

/* sn_out_send_many: BULK_SENDERS processes each send BULK_N messages to
 * one sink in one step (one sn_out_send before the batch and one after):
 * every message arrives once, in each sender's order. A batch to no
 * process: every message comes back, in order, with its payload. */
static void test_send_many(void **unused)
{
    sn_sched_t *s = mk();
    collector_t c, senders[BULK_SENDERS], lost;
    collector_init(&c);
    collector_init(&lost);
    sn_pid_t sink;
    sn_payload_t *in = sn_payload_u64(BULK_SENDERS * BULK_N);
    assert_int_equal(sn_spawn(s, "bulksink", "run", &in, collector_on_result, &c, &sink), 0);
    for (uint64_t i = 0; i < BULK_SENDERS; i++) {
        collector_init(&senders[i]);
        in = bulk_input(sink, i, BULK_N);
        assert_int_equal(sn_spawn(s, "bulk", "send", &in, collector_on_result, &senders[i], NULL), 0);
    }
    in = bulk_input((sn_pid_t){1, UNUSED_SERIAL}, 0, BULK_NOPROC_N);
    assert_int_equal(sn_spawn(s, "bulk", "noproc", &in, collector_on_result, &lost, NULL), 0);
    assert_receiver_got(&c, BULK_SENDERS * BULK_N);
    assert_true(collector_wait(&lost, WAIT_MS));
    assert_int_equal(lost.status, SN_DONE);
    for (int i = 0; i < BULK_SENDERS; i++) {
        assert_true(collector_wait(&senders[i], WAIT_MS));
        assert_int_equal(senders[i].status, SN_DONE);
        collector_fini(&senders[i]);
    }
    sn_stats_t st;
    sn_sched_stats(s, &st);
    assert_true(st.messages >= BULK_SENDERS * BULK_N);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
    collector_fini(&c);
    collector_fini(&lost);
}

/* The first step gets n == 0 even when messages were queued before it
 * ran (one worker, held by a gate while they are sent): they come next. */
static void test_first_step_has_no_events(void **unused)
{
    sn_sched_t *s = sn_sched_new(&(sn_sched_config_t){.node_id = 1, .workers = 1});
    assert_non_null(s);
    assert_int_equal(sn_type_register(s, &gate_type), 0);
    assert_int_equal(sn_type_register(s, &first_type), 0);
    atomic_store(&g_gate, 1);
    atomic_store(&g_gate_holding, 0);
    atomic_store(&g_first_n, -1);
    assert_int_equal(sn_spawn(s, "gate", "run", NULL, NULL, NULL, NULL), 0);
    assert_true(wait_count(&g_gate_holding, 1, WAIT_MS));
    collector_t c;
    collector_init(&c);
    sn_pid_t pid;
    assert_int_equal(sn_spawn(s, "first", "run", NULL, collector_on_result, &c, &pid), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sn_send(s, pid, &(sn_payload_t *){sn_payload_u64((uint64_t)i)}), 0);
    atomic_store(&g_gate, 0);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.status, SN_DONE);
    assert_int_equal(atomic_load(&g_first_n), 0);
    sn_sched_destroy(&s);
    collector_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_spawn_unknown_method_and_type, reset),
        cmocka_unit_test_setup(test_spawn_yield_errors, reset),
        cmocka_unit_test_setup(test_unknown_command, reset),
        cmocka_unit_test_setup(test_send_to_unknown_pid, reset),
        cmocka_unit_test_setup(test_send_to_finished_process, reset),
        cmocka_unit_test_setup(test_complete_with_queued_bounces, reset),
        cmocka_unit_test_setup(test_bounce_when_receiver_finishes, reset),
        cmocka_unit_test_setup(test_user_command_from_thread, reset),
        cmocka_unit_test_setup(test_sleep, reset),
        cmocka_unit_test_setup(test_terminate, reset),
        cmocka_unit_test_setup(test_spawn_await_delivers_result, reset),
        cmocka_unit_test_setup(test_spawn_delivers_pid, reset),
        cmocka_unit_test_setup(test_duplicate_registration, reset),
        cmocka_unit_test_setup(test_many_yields_in_one_step, reset),
        cmocka_unit_test_setup(test_message_order, reset),
        cmocka_unit_test_setup(test_monitor, reset),
        cmocka_unit_test_setup(test_spawn_monitor, reset),
        cmocka_unit_test_setup(test_null_payload_send, reset),
        cmocka_unit_test_setup(test_send_many, reset),
        cmocka_unit_test_setup(test_first_step_has_no_events, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

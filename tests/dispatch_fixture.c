/* dispatch_fixture.c - the process types and commands the yield tests
 * share (test_dispatch_spawn.c, test_dispatch_send.c,
 * test_dispatch_commands.c): a "script" process whose method picks a
 * scenario, emits its yields, logs every event it gets and finishes when it
 * has the events it expects; "child" processes it spawns and sends to;
 * senders of empty messages and of batches; the "sync" and "later"
 * commands. Checks made on worker threads count violations in atomics;
 * cmocka assertions stay on the test thread.
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

#include "dispatch_fixture.h"

atomic_int g_bad; /* something a worker-side check did not like */

/* ---------------------------------------------------------- event log */

static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
evrec_t g_log[LOG_MAX];
int g_nlog;

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

const evrec_t *find_ev(int type, uint64_t tag)
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

atomic_int g_victim_cancels;
atomic_int g_seen[BOUNCE_N]; /* bounce: per message, consumed + bounced */

enum { C_DONE, C_INC, C_FAIL, C_PID, C_VICTIM, C_EAT, C_ORDER, C_VICTIM_FAIL, C_NMODES };
static const char *const child_methods[C_NMODES] = {"done",   "inc", "fail",  "pid",
                                                    "victim", "eat", "order", "victim_fail"};

typedef struct child {
    int mode;
    int started;
    sn_payload_t *input;
    uint64_t expect, next;
} child_t;

int child_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
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

const sn_type_t child_type = {"child", 1, sizeof(child_t), child_init, child_step, child_close, NULL, NULL};

/* ---------------------------------------------------- user commands */

void sync_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
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
atomic_int g_later_on_worker; /* the handler ran on a scheduler worker */

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

void later_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
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

void later_join_all(void)
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

bounce_t g_bounce;

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

sn_payload_t *text(const char *s)
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

/* ------------------------------------------------------------- fixture */

sn_sched_t *mk(void)
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

int reset(void **unused)
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

int run_script(sn_sched_t *s, const char *scenario, sn_payload_t *input)
{
    sn_payload_t *res = NULL;
    int rc = sn_call(s, "script", scenario, &input, WAIT_MS, &res);
    sn_payload_destroy(&input);
    sn_payload_destroy(&res);
    assert_int_not_equal(rc, SN_ETIMEDOUT);
    return rc;
}

sn_pid_t spawn_receiver(sn_sched_t *s, collector_t *c, uint64_t n)
{
    sn_pid_t rx;
    sn_payload_t *in = sn_payload_u64(n);
    assert_int_equal(sn_spawn(s, "child", "order", &in, collector_on_result, c, &rx), 0);
    return rx;
}

void assert_receiver_got(collector_t *c, uint64_t n)
{
    assert_true(collector_wait(c, WAIT_MS));
    if (c->status != SN_DONE && c->result)
        print_error("receiver: %s\n", (const char *)c->result->data);
    assert_int_equal(c->status, SN_DONE);
    assert_int_equal(result_u64(c), n);
}

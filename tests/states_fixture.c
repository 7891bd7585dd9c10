/* states_fixture.c - the process types, completion commands and checks the
 * process-state tests share: "basic", "waiter", "spinner", "racer", "sink",
 * "pump" and "pingpong"; the "hold", "sync" and "async" commands; external
 * sender threads; a scheduler with all of them registered.
 *
 * Checks that run on worker threads (a step never runs twice at once, a step
 * runs only while its process is RUNNING, events arrive in order) count
 * violations in atomics that the tests assert on from the test thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "states_fixture.h"

#define MAX_SENDERS 8

/* ------------------------------------------------------------- helpers */

static void busy(int n)
{
    for (volatile int i = 0; i < n; i++) {
    }
}

int proc_state(sn_sched_t *s, sn_pid_t pid)
{
    sn__shard_t *sh = sn__ptable_shard(&s->table, pid.serial);
    sn__shard_lock(sh);
    sn__proc_t *p = sn__shard_find(sh, pid);
    int st = p ? (int)(atomic_load(&p->state) & SN__STATE_MASK) : -1;
    sn__shard_unlock(sh);
    return st;
}

static bool wait_state(sn_sched_t *s, sn_pid_t pid, int want, int ms)
{
    uint64_t end = deadline_ns(ms);
    for (;;) {
        if (proc_state(s, pid) == want)
            return true;
        if (now_ns() > end)
            return false;
        sleep_ms(1);
    }
}

/* ---------------------------------------------- checks done in steps */

static atomic_int g_overlap;     /* a step began while one ran for the same process */
static atomic_int g_not_running; /* a step ran while the process was not RUNNING */
static atomic_int g_spurious;    /* a step with no event after IDLE/WAIT */
static atomic_int g_bad;         /* an unexpected event or payload */
static atomic_int g_cmd_fail;    /* sn_complete_yield failed in a handler */

typedef struct guard {
    atomic_int in_step;
} guard_t;

static void step_enter(sn_ctx_t *ctx, guard_t *g)
{
    if (atomic_exchange(&g->in_step, 1) != 0)
        atomic_fetch_add(&g_overlap, 1);
    if ((atomic_load(&ctx->state) & SN__STATE_MASK) != SN__RUNNING)
        atomic_fetch_add(&g_not_running, 1);
}

static void step_leave(guard_t *g)
{
    atomic_store(&g->in_step, 0);
}

/* -------------------------------------------------------- type "basic" */
/* One step, then a fixed outcome chosen by the method. */

enum { B_DONE, B_FAIL, B_FAIL0, B_BADWAIT, B_BADWAIT_SEND, B_BADWAIT_NOREPLY, B_NMODES };
static const char *const basic_methods[B_NMODES] = {"done",    "fail",         "fail0",
                                                    "badwait", "badwait_send", "badwait_noreply"};

typedef struct basic {
    guard_t g;
    int mode;
    sn_payload_t *input;
} basic_t;

atomic_int g_basic_inits, g_basic_steps, g_basic_closes;

static int basic_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    basic_t *b = state;
    for (int i = 0; i < B_NMODES; i++) {
        if (strcmp(method, basic_methods[i]) == 0) {
            b->mode = i;
            b->input = sn_take(input);
            atomic_fetch_add(&g_basic_inits, 1);
            return 0;
        }
    }
    return SN_ENOMETHOD;
}

static void basic_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    basic_t *b = state;
    step_enter(ctx, &b->g);
    atomic_fetch_add(&g_basic_steps, 1);
    switch (b->mode) {
    case B_DONE:
        sn_out_done(out, &b->input);
        break;
    case B_FAIL:
        sn_out_fail(out, -1234, "bad %d", 7);
        break;
    case B_FAIL0:
        out->status = SN_FAIL;
        out->error = 0;
        break;
    case B_BADWAIT:
        out->status = SN_WAIT;
        break;
    case B_BADWAIT_SEND: {
        /* a send does not count as pending: WAIT after it is still bad */
        sn_payload_t *m = sn_payload_text("to self");
        sn_out_send(out, sn_ctx_self(ctx), 1, &m);
        out->status = SN_WAIT;
        break;
    }
    case B_BADWAIT_NOREPLY:
        sn_out_spawn(out, 1, "basic", "done", NULL, SN_YIELD_NOREPLY);
        out->status = SN_WAIT;
        break;
    }
    step_leave(&b->g);
}

static void basic_close(sn_ctx_t *ctx, void *state)
{
    basic_t *b = state;
    sn_payload_destroy(&b->input);
    atomic_fetch_add(&g_basic_closes, 1);
}

static const sn_type_t basic_type = {"basic", 1, sizeof(basic_t), basic_init, basic_step, basic_close, NULL, NULL};

/* ------------------------------------------------------- type "waiter" */
/* "idle": IDLE until a message (DONE with it) or CANCEL (DONE "cancelled").
 * "block": yields the "hold" command (tag 42) and WAITs until it completes
 * (DONE with its data, or FAIL with its error) or CANCEL. Every event is
 * logged with the number of the step that saw it. */

pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
evrec_t g_log[64];
int g_nlog;
atomic_int g_waiter_steps;

static void log_events(int step, const sn_event_t *ev, size_t n)
{
    pthread_mutex_lock(&g_log_mu);
    for (size_t i = 0; i < n && g_nlog < 64; i++) {
        evrec_t *r = &g_log[g_nlog++];
        memset(r, 0, sizeof *r);
        r->step = step;
        r->type = ev[i].type;
        r->error = ev[i].error;
        r->tag = ev[i].tag;
        r->from = ev[i].from;
        if (ev[i].data) {
            r->has_data = 1;
            r->ctype = ev[i].data->ctype;
            snprintf(r->text, sizeof r->text, "%s", (const char *)ev[i].data->data);
        }
    }
    pthread_mutex_unlock(&g_log_mu);
}

typedef struct waiter {
    guard_t g;
    int block;
    int steps;
} waiter_t;

static int waiter_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    waiter_t *w = state;
    if (strcmp(method, "idle") == 0)
        w->block = 0;
    else if (strcmp(method, "block") == 0)
        w->block = 1;
    else
        return SN_ENOMETHOD;
    return 0;
}

static void waiter_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    waiter_t *w = state;
    step_enter(ctx, &w->g);
    int k = ++w->steps;
    atomic_fetch_add(&g_waiter_steps, 1);
    log_events(k, ev, n);
    if (k == 1 && w->block) {
        sn_yield_t *y = sn_out_yield(out, 0, "hold", 42);
        y->arg = 7;
        y->data = sn_payload_text("held");
    }
    if (k > 1 && n == 0)
        atomic_fetch_add(&g_spurious, 1);
    bool finished = false;
    for (size_t i = 0; i < n && !finished; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            sn_payload_t *r = sn_payload_text("cancelled");
            sn_out_done(out, &r);
            finished = true;
        }
    }
    for (size_t i = 0; i < n && !finished; i++) {
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 42) {
            if (ev[i].error)
                sn_out_fail(out, ev[i].error, "completion failed");
            else
                sn_out_done(out, &ev[i].data);
            finished = true;
        } else if (ev[i].type == SN_EV_MESSAGE && !w->block) {
            sn_out_done(out, &ev[i].data);
            finished = true;
        }
    }
    if (!finished)
        out->status = w->block ? SN_WAIT : SN_IDLE;
    step_leave(&w->g);
}

static const sn_type_t waiter_type = {"waiter", 1, sizeof(waiter_t), waiter_init, waiter_step, NULL, NULL, NULL};

/* "hold": remembers the request and never completes it itself. */
pthread_mutex_t g_held_mu = PTHREAD_MUTEX_INITIALIZER;
held_t g_held;

static void hold_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    pthread_mutex_lock(&g_held_mu);
    g_held.count++;
    g_held.from = req->from;
    g_held.tag = req->tag;
    g_held.arg = req->arg;
    snprintf(g_held.text, sizeof g_held.text, "%s", req->data ? (const char *)req->data->data : "");
    pthread_mutex_unlock(&g_held_mu);
    /* req->data is left to the runtime (the ownership rule) */
}

/* ------------------------------------------------------ type "spinner" */
/* "count": CONTINUE until it has run N steps, then DONE with N.
 * "until": CONTINUE until g_spin_stop is set, then DONE with its steps. */

atomic_int g_spin_stop, g_spin_steps, g_spin_events;

typedef struct spinner {
    guard_t g;
    int until;
    uint64_t target, steps;
} spinner_t;

static int spinner_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    spinner_t *s = state;
    if (strcmp(method, "count") == 0)
        return sn_payload_get_u64(*input, &s->target) == 0 ? 0 : SN_EINVAL;
    if (strcmp(method, "until") == 0) {
        s->until = 1;
        return 0;
    }
    return SN_ENOMETHOD;
}

static void spinner_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    spinner_t *s = state;
    step_enter(ctx, &s->g);
    if (n != 0)
        atomic_fetch_add(&g_spin_events, 1);
    s->steps++;
    atomic_fetch_add(&g_spin_steps, 1);
    bool stop = s->until ? atomic_load(&g_spin_stop) != 0 : s->steps >= s->target;
    if (stop) {
        sn_payload_t *r = sn_payload_u64(s->steps);
        sn_out_done(out, &r);
    } else {
        out->status = SN_CONTINUE;
    }
    step_leave(&s->g);
}

static const sn_type_t spinner_type = {"spinner", 1, sizeof(spinner_t), spinner_init, spinner_step, NULL, NULL, NULL};

/* ------------------------------------------------ completion commands */
/* "sync" completes inside the handler, while the yielding process is still
 * RUNNING on this worker. "async" hands the request to completer threads
 * that complete it at once: the completion races the end of the step. Both
 * complete with a u64 of 3 * arg. */

static void sync_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    sn_payload_t *r = sn_payload_u64(req->arg * 3);
    if (sn_complete_yield(sched, req->from, req->tag, 0, &r) != 0)
        atomic_fetch_add(&g_cmd_fail, 1);
}

typedef struct job {
    struct job *next;
    sn_pid_t pid;
    uint64_t tag, arg;
} job_t;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job_t *head, *tail;
    bool stop;
    sn_sched_t *sched;
    pthread_t th[4];
    int nth;
} g_cq = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, false, NULL, {0}, 0};

static void async_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    job_t *j = malloc(sizeof *j);
    if (!j) {
        atomic_fetch_add(&g_cmd_fail, 1);
        return;
    }
    *j = (job_t){NULL, req->from, req->tag, req->arg};
    pthread_mutex_lock(&g_cq.mu);
    if (g_cq.tail)
        g_cq.tail->next = j;
    else
        g_cq.head = j;
    g_cq.tail = j;
    pthread_cond_signal(&g_cq.cv);
    pthread_mutex_unlock(&g_cq.mu);
}

static void *completer_main(void *arg)
{
    pthread_mutex_lock(&g_cq.mu);
    for (;;) {
        while (!g_cq.head && !g_cq.stop)
            pthread_cond_wait(&g_cq.cv, &g_cq.mu);
        job_t *j = g_cq.head;
        if (!j)
            break;
        g_cq.head = j->next;
        if (!g_cq.head)
            g_cq.tail = NULL;
        pthread_mutex_unlock(&g_cq.mu);
        sn_payload_t *r = sn_payload_u64(j->arg * 3);
        if (sn_complete_yield(g_cq.sched, j->pid, j->tag, 0, &r) != 0)
            atomic_fetch_add(&g_cmd_fail, 1);
        free(j);
        pthread_mutex_lock(&g_cq.mu);
    }
    pthread_mutex_unlock(&g_cq.mu);
    return NULL;
}

void completers_start(sn_sched_t *s, int n)
{
    pthread_mutex_lock(&g_cq.mu);
    g_cq.head = g_cq.tail = NULL;
    g_cq.stop = false;
    g_cq.sched = s;
    pthread_mutex_unlock(&g_cq.mu);
    g_cq.nth = n;
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&g_cq.th[i], NULL, completer_main, NULL), 0);
}

/* Drains the queue and joins the threads (before the scheduler goes). */
void completers_stop(void)
{
    pthread_mutex_lock(&g_cq.mu);
    g_cq.stop = true;
    pthread_cond_broadcast(&g_cq.cv);
    pthread_mutex_unlock(&g_cq.mu);
    for (int i = 0; i < g_cq.nth; i++)
        pthread_join(g_cq.th[i], NULL);
    g_cq.nth = 0;
}

/* -------------------------------------------------------- type "racer" */
/* Yields one completion command per round ("sync", "async" or alternating)
 * and sleeps on it, alternating WAIT and IDLE, for N rounds; checks every
 * completion is the one it waits for, exactly once. DONE with the count. */

enum { R_SYNC, R_ASYNC, R_MIXED };

typedef struct racer {
    guard_t g;
    int mode;
    int started;
    uint64_t rounds, done;
    uint64_t want_tag; /* the outstanding yield's tag; 0: none */
} racer_t;

static int racer_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    racer_t *r = state;
    if (strcmp(method, "sync") == 0)
        r->mode = R_SYNC;
    else if (strcmp(method, "async") == 0)
        r->mode = R_ASYNC;
    else if (strcmp(method, "mixed") == 0)
        r->mode = R_MIXED;
    else
        return SN_ENOMETHOD;
    return sn_payload_get_u64(*input, &r->rounds) == 0 ? 0 : SN_EINVAL;
}

static void racer_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    racer_t *r = state;
    step_enter(ctx, &r->g);
    if (r->started && n == 0)
        atomic_fetch_add(&g_spurious, 1);
    r->started = 1;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            sn_out_fail(out, SN_ECANCELED, "canceled");
            step_leave(&r->g);
            return;
        }
        uint64_t v = 0;
        if (ev[i].type != SN_EV_YIELD_COMPLETE || r->want_tag == 0 || ev[i].tag != r->want_tag || ev[i].error != 0 ||
            sn_payload_get_u64(ev[i].data, &v) != 0 || v != ev[i].tag * 3) {
            atomic_fetch_add(&g_bad, 1);
            continue;
        }
        r->want_tag = 0;
        r->done++;
    }
    if (r->want_tag == 0) {
        if (r->done == r->rounds) {
            sn_payload_t *res = sn_payload_u64(r->done);
            sn_out_done(out, &res);
            step_leave(&r->g);
            return;
        }
        const char *cmd = r->mode == R_SYNC ? "sync" : r->mode == R_ASYNC ? "async" : (r->done % 2 ? "sync" : "async");
        r->want_tag = r->done + 1;
        sn_yield_t *y = sn_out_yield(out, 0, cmd, r->want_tag);
        y->arg = r->want_tag;
    }
    /* alternate the two ways to sleep: both must be woken by the completion */
    out->status = (r->done / 2) % 2 ? SN_IDLE : SN_WAIT;
    step_leave(&r->g);
}

static const sn_type_t racer_type = {"racer", 1, sizeof(racer_t), racer_init, racer_step, NULL, NULL, NULL};

/* --------------------------------------------------------- type "sink" */
/* Receives numbered messages (sender << 32 | seq) from up to MAX_SENDERS
 * senders; checks each sender's sequence; every third step ("count") or
 * every step ("wait") it also yields "async" and WAITs, so messages keep
 * arriving while it is Blocked. DONE with the number of messages once it
 * has seen the expected count. A step after a WAIT that holds fewer than
 * DRAIN_MAX (128) events, none of them the completion or a CANCEL, means
 * messages woke the Blocked process: g_msgonly_wait counts those. */

atomic_int g_order_bad, g_msgonly_wait;

typedef struct sink {
    guard_t g;
    int started, every;
    uint64_t expect, total, nsteps;
    uint64_t next[MAX_SENDERS];
    uint64_t want_tag;
} sink_t;

static int sink_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    sink_t *k = state;
    if (strcmp(method, "count") == 0)
        k->every = 3; /* WAIT every third step, IDLE otherwise */
    else if (strcmp(method, "wait") == 0)
        k->every = 1; /* always WAIT */
    else
        return SN_ENOMETHOD;
    return sn_payload_get_u64(*input, &k->expect) == 0 ? 0 : SN_EINVAL;
}

static void sink_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    sink_t *k = state;
    step_enter(ctx, &k->g);
    busy(300); /* widen the window in which a second run would overlap */
    if (k->started && n == 0)
        atomic_fetch_add(&g_spurious, 1);
    k->started = 1;
    bool waited = k->want_tag != 0, woke = false;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            sn_out_fail(out, SN_ECANCELED, "canceled");
            step_leave(&k->g);
            return;
        }
        if (ev[i].type == SN_EV_YIELD_COMPLETE) {
            woke = true;
            if (k->want_tag && ev[i].tag == k->want_tag && ev[i].error == 0)
                k->want_tag = 0;
            else
                atomic_fetch_add(&g_bad, 1);
            continue;
        }
        uint64_t v;
        if (sn_payload_get_u64(ev[i].data, &v) != 0) {
            atomic_fetch_add(&g_bad, 1);
            continue;
        }
        k->total++;
        uint64_t who = v >> 32, seq = v & 0xffffffffu;
        if (who >= MAX_SENDERS || seq != k->next[who])
            atomic_fetch_add(&g_order_bad, 1);
        else
            k->next[who]++;
    }
    if (waited && !woke && n < 128)
        atomic_fetch_add(&g_msgonly_wait, 1); /* stepped while Blocked, by messages only */
    if (k->total >= k->expect && k->want_tag == 0) {
        sn_payload_t *res = sn_payload_u64(k->total);
        sn_out_done(out, &res);
        step_leave(&k->g);
        return;
    }
    if (k->want_tag == 0 && ++k->nsteps % k->every == 0) {
        k->want_tag = k->nsteps;
        sn_yield_t *y = sn_out_yield(out, 0, "async", k->want_tag);
        y->arg = k->want_tag;
    }
    out->status = k->want_tag ? SN_WAIT : SN_IDLE;
    step_leave(&k->g);
}

static const sn_type_t sink_type = {"sink", 1, sizeof(sink_t), sink_init, sink_step, NULL, NULL, NULL};

/* --------------------------------------------------------- type "pump" */
/* Sends M numbered messages to each of up to 8 sinks, 50 rounds per step,
 * CONTINUE in between; DONE with M. */

typedef struct pump {
    guard_t g;
    pump_cfg_t cfg;
    uint64_t seq;
} pump_t;

static int pump_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    pump_t *p = state;
    if (strcmp(method, "run") != 0)
        return SN_ENOMETHOD;
    if (!*input || (*input)->len != sizeof p->cfg)
        return SN_EINVAL;
    memcpy(&p->cfg, (*input)->data, sizeof p->cfg);
    return 0;
}

static void pump_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    pump_t *p = state;
    step_enter(ctx, &p->g);
    for (size_t i = 0; i < n; i++)
        if (ev[i].type != SN_EV_CANCEL)
            atomic_fetch_add(&g_bad, 1); /* a failed send came back */
    for (int r = 0; r < 50 && p->seq < p->cfg.m; r++, p->seq++) {
        for (uint32_t t = 0; t < p->cfg.n; t++) {
            sn_payload_t *m = sn_payload_u64((uint64_t)p->cfg.id << 32 | p->seq);
            sn_out_send(out, p->cfg.to[t], p->seq, &m);
        }
    }
    if (p->seq < p->cfg.m) {
        out->status = SN_CONTINUE;
    } else {
        sn_payload_t *res = sn_payload_u64(p->seq);
        sn_out_done(out, &res);
    }
    step_leave(&p->g);
}

static const sn_type_t pump_type = {"pump", 1, sizeof(pump_t), pump_init, pump_step, NULL, NULL, NULL};

/* ----------------------------------------------------- type "pingpong" */
/* "pong" returns every message to its sender; "ping" (input: a pong's PID)
 * serves a ball and returns every echo. Each wakes the other: the partner
 * lands in the waking worker's run-next slot. Both finish on CANCEL. */

atomic_int g_rallies, g_pp_started;

typedef struct pingpong {
    guard_t g;
    int ping, started;
    sn_pid_t peer;
} pingpong_t;

static int pingpong_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    pingpong_t *p = state;
    if (strcmp(method, "pong") == 0)
        return 0;
    if (strcmp(method, "ping") != 0)
        return SN_ENOMETHOD;
    p->ping = 1;
    return sn_payload_get_pid(*input, &p->peer) == 0 ? 0 : SN_EINVAL;
}

static void pingpong_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    pingpong_t *p = state;
    step_enter(ctx, &p->g);
    if (!p->started) {
        p->started = 1;
        atomic_fetch_add(&g_pp_started, 1);
        if (p->ping) {
            sn_payload_t *ball = sn_payload_u64(0);
            sn_out_send(out, p->peer, 0, &ball);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            sn_out_done(out, NULL);
            step_leave(&p->g);
            return;
        }
        if (ev[i].type == SN_EV_MESSAGE && !sn_pid_is_none(ev[i].from)) {
            if (p->ping)
                atomic_fetch_add(&g_rallies, 1);
            sn_payload_t *ball = sn_take(&ev[i].data);
            sn_out_send(out, ev[i].from, 0, &ball);
        } /* a bounce (the partner is gone) is dropped */
    }
    out->status = SN_IDLE;
    step_leave(&p->g);
}

static const sn_type_t pingpong_type = {"pingpong", 1,   sizeof(pingpong_t), pingpong_init, pingpong_step, NULL,
                                        NULL,       NULL};

/* ---------------------------------------------------- external senders */

void *sender_main(void *arg)
{
    sender_arg_t *a = arg;
    for (uint32_t seq = 0; seq < a->m; seq++) {
        for (int t = 0; t < a->nto; t++) {
            sn_payload_t *m = sn_payload_u64((uint64_t)a->id << 32 | seq);
            if (sn_send(a->sched, a->to[t], &m) != 0) {
                atomic_fetch_add(a->fail, 1);
                sn_payload_destroy(&m);
            } else if (m) {
                atomic_fetch_add(a->fail, 1); /* sent, but the payload was not taken */
            }
        }
        if (seq % 256 == 0)
            sched_yield();
    }
    return NULL;
}

/* ------------------------------------------------------------- fixture */

sn_sched_t *mk(int workers)
{
    sn_sched_config_t cfg = {1, workers, 1};
    sn_sched_t *s = sn_sched_new(&cfg);
    assert_non_null(s);
    assert_int_equal(sn_sched_workers(s), workers);
    assert_int_equal(sn_type_register(s, &basic_type), 0);
    assert_int_equal(sn_type_register(s, &waiter_type), 0);
    assert_int_equal(sn_type_register(s, &spinner_type), 0);
    assert_int_equal(sn_type_register(s, &racer_type), 0);
    assert_int_equal(sn_type_register(s, &sink_type), 0);
    assert_int_equal(sn_type_register(s, &pump_type), 0);
    assert_int_equal(sn_type_register(s, &pingpong_type), 0);
    assert_true(sn_command_register(s, "hold", hold_cmd, NULL) > 0);
    assert_true(sn_command_register(s, "sync", sync_cmd, NULL) > 0);
    assert_true(sn_command_register(s, "async", async_cmd, NULL) > 0);
    return s;
}

int reset(void **unused)
{
    atomic_store(&g_overlap, 0);
    atomic_store(&g_not_running, 0);
    atomic_store(&g_spurious, 0);
    atomic_store(&g_bad, 0);
    atomic_store(&g_cmd_fail, 0);
    atomic_store(&g_basic_inits, 0);
    atomic_store(&g_basic_steps, 0);
    atomic_store(&g_basic_closes, 0);
    atomic_store(&g_waiter_steps, 0);
    atomic_store(&g_spin_stop, 0);
    atomic_store(&g_spin_steps, 0);
    atomic_store(&g_spin_events, 0);
    atomic_store(&g_order_bad, 0);
    atomic_store(&g_msgonly_wait, 0);
    atomic_store(&g_rallies, 0);
    atomic_store(&g_pp_started, 0);
    pthread_mutex_lock(&g_log_mu);
    g_nlog = 0;
    pthread_mutex_unlock(&g_log_mu);
    pthread_mutex_lock(&g_held_mu);
    memset(&g_held, 0, sizeof g_held);
    pthread_mutex_unlock(&g_held_mu);
    return 0;
}

void assert_step_invariants(void)
{
    assert_int_equal(atomic_load(&g_overlap), 0);
    assert_int_equal(atomic_load(&g_not_running), 0);
    assert_int_equal(atomic_load(&g_spurious), 0);
}

void assert_completion_invariants(void)
{
    assert_int_equal(atomic_load(&g_bad), 0);
    assert_int_equal(atomic_load(&g_cmd_fail), 0);
    assert_step_invariants();
}

sn_pid_t spawn_waiter(sn_sched_t *s, const char *method, collector_t *c, int want)
{
    sn_pid_t pid;
    assert_int_equal(sn_spawn(s, "waiter", method, NULL, collector_on_result, c, &pid), 0);
    assert_true(wait_state(s, pid, want, WAIT_MS));
    return pid;
}

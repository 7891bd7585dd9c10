/* test_shutdown.c - orderly shutdown: CANCEL to everyone, a bounded wait,
 * then force-close whoever is left (their awaiters get SN_EKILLED). Every
 * process is closed exactly once, every callback called exactly once, and
 * nothing leaks (run under ASan/LSan).
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

#define STUBBORN_TIMEOUT_MS 200 /* what processes that ignore CANCEL get */

/* ------------------------------------------------- counters and callback */

static atomic_int g_started;      /* first steps run */
static atomic_int g_closes;       /* close() calls */
static atomic_int g_double_close; /* close() on an already closed process */
static atomic_int g_stub_cancels; /* CANCELs seen by stubborn processes */
static atomic_int g_cb_total, g_cb_done, g_cb_killed, g_cb_eshutdown, g_cb_other, g_cb_badreason;

static void on_result(sn_sched_t *sched, sn_pid_t pid, sn_status_t status, int error, sn_payload_t **result, void *arg)
{
    atomic_fetch_add(&g_cb_total, 1);
    if (status == SN_DONE && error == 0) {
        atomic_fetch_add(&g_cb_done, 1);
    } else if (status == SN_FAIL && error == SN_EKILLED) {
        atomic_fetch_add(&g_cb_killed, 1);
        if (!*result || !strstr((const char *)(*result)->data, "killed"))
            atomic_fetch_add(&g_cb_badreason, 1);
    } else if (status == SN_FAIL && error == SN_ESHUTDOWN) {
        atomic_fetch_add(&g_cb_eshutdown, 1);
    } else {
        atomic_fetch_add(&g_cb_other, 1);
    }
    /* *result is left to the runtime */
}

static int reset(void **unused)
{
    atomic_int *all[] = {&g_started, &g_closes,    &g_double_close, &g_stub_cancels, &g_cb_total,
                         &g_cb_done, &g_cb_killed, &g_cb_eshutdown, &g_cb_other,     &g_cb_badreason};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        atomic_store(all[i], 0);
    return 0;
}

/* -------------------------------------------------------- process types */

enum {
    G_IDLE,    /* IDLE until CANCEL */
    G_SLEEP,   /* sleeps 60 s (Blocked) until CANCEL */
    G_SPIN,    /* CONTINUE until CANCEL (always Ready or Running) */
    G_PONG,    /* echoes every message back to its sender */
    G_PING,    /* serves a ball to the PID in its input, returns every echo */
    G_RESPAWN, /* on CANCEL, tries to spawn an awaited child: FAILs with that error */
    S_IDLE,    /* stubborn: ignore CANCEL, IDLE */
    S_WAIT,    /* stubborn: WAIT on a command that never completes */
    S_SPIN,    /* stubborn: CONTINUE forever */
    S_NAP,     /* stubborn: yield a 1 ms sleep on every step, CONTINUE */
    NMODES
};
static const char *const methods[NMODES] = {"idle",    "sleep", "spin", "pong", "ping",
                                            "respawn", "idle",  "wait", "spin", "nap"};

typedef struct proc {
    int mode;
    int started;
    int closed;
    sn_pid_t peer;
} proc_t;

static int init_mode(void *state, const char *method, sn_payload_t **input, int lo, int hi)
{
    proc_t *p = state;
    for (int i = lo; i < hi; i++) {
        if (strcmp(method, methods[i]) == 0) {
            p->mode = i;
            if (i == G_PING)
                return sn_payload_get_pid(*input, &p->peer) == 0 ? 0 : SN_EINVAL;
            return 0;
        }
    }
    return SN_ENOMETHOD;
}

static int good_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return init_mode(state, method, input, G_IDLE, S_IDLE);
}

static int stubborn_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return init_mode(state, method, input, S_IDLE, NMODES);
}

static void proc_close(sn_ctx_t *ctx, void *state)
{
    proc_t *p = state;
    if (p->closed++)
        atomic_fetch_add(&g_double_close, 1);
    atomic_fetch_add(&g_closes, 1);
}

/* True on the process's first step, which it counts in g_started. */
static bool first_step(proc_t *p)
{
    if (p->started)
        return false;
    p->started = 1;
    atomic_fetch_add(&g_started, 1);
    return true;
}

static bool has_cancel(const sn_event_t *ev, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ev[i].type == SN_EV_CANCEL)
            return true;
    return false;
}

static void good_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    proc_t *p = state;
    bool first = first_step(p);
    if (p->mode == G_RESPAWN) {
        for (size_t i = 0; i < n; i++) {
            if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 5) {
                if (ev[i].error)
                    sn_out_fail(out, ev[i].error, "respawn refused: %s", sn_strerror(ev[i].error));
                else
                    sn_out_done(out, NULL);
                return;
            }
        }
        if (has_cancel(ev, n)) {
            sn_out_spawn(out, 5, "good", "idle", NULL, SN_YIELD_AWAIT);
            out->status = SN_WAIT;
            return;
        }
        out->status = SN_IDLE;
        return;
    }
    if (has_cancel(ev, n)) {
        sn_payload_t *r = sn_payload_text("bye");
        sn_out_done(out, &r);
        return;
    }
    switch (p->mode) {
    case G_SLEEP:
        if (first)
            sn_out_sleep(out, 1, 60000);
        out->status = SN_WAIT;
        return;
    case G_SPIN:
        out->status = SN_CONTINUE;
        return;
    case G_PING:
        if (first) {
            sn_payload_t *ball = sn_payload_u64(0);
            sn_out_send(out, p->peer, 0, &ball);
        }
        __attribute__((fallthrough)); /* and return every echo */
    case G_PONG:
        for (size_t i = 0; i < n; i++) {
            /* bounces (the partner finished) come back as completions: drop */
            if (ev[i].type == SN_EV_MESSAGE && !sn_pid_is_none(ev[i].from)) {
                sn_payload_t *ball = sn_take(&ev[i].data);
                sn_out_send(out, ev[i].from, 0, &ball);
            }
        }
        out->status = SN_IDLE;
        return;
    default:
        out->status = SN_IDLE;
        return;
    }
}

static void stubborn_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    proc_t *p = state;
    bool first = first_step(p);
    if (has_cancel(ev, n))
        atomic_fetch_add(&g_stub_cancels, 1); /* ... and ignore it */
    switch (p->mode) {
    case S_WAIT:
        if (first)
            sn_out_yield(out, 0, "never", 1);
        out->status = SN_WAIT;
        return;
    case S_SPIN:
        out->status = SN_CONTINUE;
        return;
    case S_NAP:
        /* a 1 ms sleep on every step, and run again: it keeps asking the
         * timer for sleeps until the workers stop, also after the timer
         * has stopped (those fail with an error event, also fine) */
        sn_out_sleep(out, 1, 1);
        out->status = SN_CONTINUE;
        return;
    default:
        out->status = SN_IDLE;
        return;
    }
}

static const sn_type_t good_type = {"good", 1, sizeof(proc_t), good_init, good_step, proc_close, NULL, NULL};
static const sn_type_t stubborn_type = {"stubborn",    1,          sizeof(proc_t), stubborn_init,
                                        stubborn_step, proc_close, NULL,           NULL};

/* "never": takes the request and never completes it. */
static void never_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
{
}

static sn_sched_t *mk(int workers)
{
    sn_sched_config_t cfg = {1, workers, 1};
    sn_sched_t *s = sn_sched_new(&cfg);
    assert_non_null(s);
    assert_int_equal(sn_type_register(s, &good_type), 0);
    assert_int_equal(sn_type_register(s, &stubborn_type), 0);
    assert_true(sn_command_register(s, "never", never_cmd, NULL) > 0);
    return s;
}

static void spawn_n(sn_sched_t *s, const char *type, const char *method, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(sn_spawn(s, type, method, NULL, on_result, NULL, NULL), 0);
}

/* Spawns a pong and a ping aimed at it. */
static void spawn_pair(sn_sched_t *s)
{
    sn_pid_t pong;
    assert_int_equal(sn_spawn(s, "good", "pong", NULL, on_result, NULL, &pong), 0);
    sn_payload_t *in = sn_payload_pid(pong);
    assert_int_equal(sn_spawn(s, "good", "ping", &in, on_result, NULL, NULL), 0);
}

/* ---------------------------------------------------------------- tests */

/* Processes that finish on CANCEL: nothing is force-closed, every callback
 * says DONE, every process is closed once. Shutdown is idempotent. */
static void test_shutdown_well_behaved(void **unused)
{
    sn_sched_t *s = mk(4);
    /* in stages, the chatty ones last, so that all get to run (a busy
     * ping-pong pair can keep Ready processes queued on its worker from
     * running: test_state_transitions, test_ready_not_starved_by_message_pair) */
    spawn_n(s, "good", "idle", 200);
    spawn_n(s, "good", "sleep", 20);
    assert_true(wait_count(&g_started, 220, WAIT_MS));
    spawn_n(s, "good", "spin", 4);
    assert_true(wait_count(&g_started, 224, WAIT_MS));
    spawn_pair(s);
    const int total = 226;
    assert_true(wait_count(&g_started, total, WAIT_MS));

    /* a generous bound: it returns as soon as all have finished */
    assert_int_equal(sn_sched_shutdown(s, WAIT_MS), 0);
    assert_int_equal(atomic_load(&g_cb_total), total);
    assert_int_equal(atomic_load(&g_cb_done), total);
    assert_int_equal(atomic_load(&g_closes), total);
    assert_int_equal(atomic_load(&g_double_close), 0);
    sn_stats_t st;
    sn_sched_stats(s, &st);
    assert_int_equal(st.spawned, total);
    assert_int_equal(st.completed, total);
    assert_int_equal(st.live, 0);

    assert_int_equal(sn_sched_shutdown(s, STUBBORN_TIMEOUT_MS), 0); /* idempotent */
    sn_sched_destroy(&s);
    assert_null(s);
    assert_int_equal(atomic_load(&g_cb_total), total); /* nothing more */
    assert_int_equal(atomic_load(&g_closes), total);
}

typedef struct call_arg {
    sn_sched_t *sched;
    int rc;
    char reason[128];
} call_arg_t;

static void *stubborn_call_main(void *arg)
{
    call_arg_t *a = arg;
    sn_payload_t *res = NULL;
    a->rc = sn_call(a->sched, "stubborn", "idle", NULL, WAIT_MS, &res);
    snprintf(a->reason, sizeof a->reason, "%s", res ? (const char *)res->data : "");
    sn_payload_destroy(&res);
    return NULL;
}

/* Processes that ignore CANCEL are force-closed after the timeout: the
 * return value counts them, their callbacks (and a blocked sn_call) get
 * SN_EKILLED with a reason, and close() runs exactly once for each. */
static void test_shutdown_force_closes_stubborn(void **unused)
{
    sn_sched_t *s = mk(4);
    spawn_n(s, "good", "idle", 5);
    spawn_n(s, "stubborn", "idle", 3);
    spawn_n(s, "stubborn", "wait", 3);
    spawn_n(s, "stubborn", "spin", 2);
    spawn_n(s, "stubborn", "nap", 2);
    call_arg_t ca = {s, 1, ""};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stubborn_call_main, &ca), 0);
    const int stubborn = 11, total = 16;
    assert_true(wait_count(&g_started, total, WAIT_MS));

    assert_int_equal(sn_sched_shutdown(s, STUBBORN_TIMEOUT_MS), stubborn);
    pthread_join(th, NULL);
    assert_int_equal(ca.rc, SN_EKILLED);
    assert_non_null(strstr(ca.reason, "killed"));
    assert_int_equal(atomic_load(&g_stub_cancels), stubborn); /* they were asked */
    assert_int_equal(atomic_load(&g_cb_total), total - 1);    /* sn_call has its own */
    assert_int_equal(atomic_load(&g_cb_done), 5);
    assert_int_equal(atomic_load(&g_cb_killed), stubborn - 1);
    assert_int_equal(atomic_load(&g_cb_badreason), 0);
    assert_int_equal(atomic_load(&g_cb_other), 0);
    assert_int_equal(atomic_load(&g_closes), total);
    assert_int_equal(atomic_load(&g_double_close), 0);

    assert_int_equal(sn_sched_shutdown(s, STUBBORN_TIMEOUT_MS), 0);
    sn_sched_destroy(&s);
    assert_null(s);
    assert_int_equal(atomic_load(&g_closes), total);
    assert_int_equal(atomic_load(&g_cb_total), total - 1);
}

typedef struct noise_arg {
    sn_sched_t *sched;
    const sn_pid_t *pids;
    int n;
    atomic_int stop;
    atomic_int sent;
} noise_arg_t;

/* Sends messages to idle processes until told to stop (during shutdown). */
static void *noise_main(void *arg)
{
    noise_arg_t *a = arg;
    for (int i = 0; !atomic_load(&a->stop); i++) {
        sn_payload_t *m = sn_payload_u64((uint64_t)i);
        if (sn_send(a->sched, a->pids[i % a->n], &m) == 0)
            atomic_fetch_add(&a->sent, 1);
        sn_payload_destroy(&m); /* NULL if it was taken */
    }
    return NULL;
}

/* Shutdown in the middle of things: 10000 Idle processes (getting
 * messages), processes Blocked on long timers, Ready spinners, ping-pong
 * pairs, and processes that try to spawn as they are cancelled. */
static void test_shutdown_mid_flight(void **unused)
{
    enum { IDLE = 10000, SLEEP = 50, SPIN = 4, PAIRS = 4, RESPAWN = 2 };
    sn_sched_t *s = mk(4);
    sn_pid_t *idle = malloc(IDLE * sizeof *idle);
    assert_non_null(idle);
    for (int i = 0; i < IDLE; i++)
        assert_int_equal(sn_spawn(s, "good", "idle", NULL, on_result, NULL, &idle[i]), 0);
    spawn_n(s, "good", "sleep", SLEEP);
    spawn_n(s, "good", "respawn", RESPAWN);
    assert_true(wait_count(&g_started, IDLE + SLEEP + RESPAWN, WAIT_MS));
    spawn_n(s, "good", "spin", SPIN);
    for (int i = 0; i < PAIRS; i++)
        spawn_pair(s);
    const int total = IDLE + SLEEP + SPIN + 2 * PAIRS + RESPAWN;
    /* Let the Ready crowd get going. Not asserted: with every worker busy,
     * a process can stay Ready behind a ping-pong pair that owns its
     * worker's run-next slot (test_state_transitions,
     * test_ready_not_starved_by_message_pair); shutdown must cope with
     * never-run processes as well. */
    if (!wait_count(&g_started, total, 3000))
        print_message("note: only %d of %d processes had run before the shutdown\n", atomic_load(&g_started), total);

    noise_arg_t na = {s, idle, IDLE, 0, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, noise_main, &na), 0);
    while (atomic_load(&na.sent) < 1000)
        sleep_ms(1);
    assert_int_equal(sn_sched_shutdown(s, WAIT_MS), 0);
    atomic_store(&na.stop, 1);
    pthread_join(th, NULL);

    assert_int_equal(atomic_load(&g_cb_total), total);
    assert_int_equal(atomic_load(&g_cb_done), total - RESPAWN);
    /* a spawn during shutdown fails: the respawners report it */
    assert_int_equal(atomic_load(&g_cb_eshutdown), RESPAWN);
    assert_int_equal(atomic_load(&g_cb_other), 0);
    assert_int_equal(atomic_load(&g_closes), total);
    assert_int_equal(atomic_load(&g_double_close), 0);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_closes), total);
    free(idle);
}

/* After shutdown, spawns fail with SN_ESHUTDOWN and call no callback. */
static void test_spawn_after_shutdown(void **unused)
{
    sn_sched_t *s = mk(2);
    spawn_n(s, "good", "idle", 1);
    assert_true(wait_count(&g_started, 1, WAIT_MS));
    assert_int_equal(sn_sched_shutdown(s, STUBBORN_TIMEOUT_MS), 0);
    assert_int_equal(atomic_load(&g_cb_done), 1);

    sn_payload_t *in = sn_payload_text("late");
    sn_pid_t pid = SN_PID_NONE;
    assert_int_equal(sn_spawn(s, "good", "idle", &in, on_result, NULL, &pid), SN_ESHUTDOWN);
    sn_payload_destroy(&in); /* ours unless it was NULLed */
    assert_true(sn_pid_is_none(pid));
    sn_payload_t *res = NULL;
    assert_int_equal(sn_call(s, "good", "idle", NULL, WAIT_MS, &res), SN_ESHUTDOWN);
    assert_null(res);
    assert_int_equal(sn_sched_shutdown(s, STUBBORN_TIMEOUT_MS), 0);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_cb_total), 1);
    assert_int_equal(atomic_load(&g_closes), 1);
}

/* After shutdown the processes are gone: a send fails with SN_ENOPROC
 * (schednode.h: sends reach processes that are finishing and fail with
 * SN_ENOPROC once they are gone); the message stays with the caller. */
static void test_send_after_shutdown(void **unused)
{
    sn_sched_t *s = mk(2);
    sn_pid_t pid;
    assert_int_equal(sn_spawn(s, "good", "idle", NULL, on_result, NULL, &pid), 0);
    assert_true(wait_count(&g_started, 1, WAIT_MS));
    assert_int_equal(sn_sched_shutdown(s, STUBBORN_TIMEOUT_MS), 0);
    sn_payload_t *m = sn_payload_text("late");
    int rc = sn_send(s, pid, &m);
    assert_non_null(m); /* on error the payload stays ours */
    sn_payload_destroy(&m);
    sn_sched_destroy(&s);
    assert_int_equal(rc, SN_ENOPROC);
}

/* sn_sched_destroy shuts down a running scheduler (processes get CANCEL),
 * nulls the pointer, and is safe to call again (and on NULL). */
static void test_destroy_twice(void **unused)
{
    sn_sched_t *s = mk(2);
    spawn_n(s, "good", "idle", 3);
    spawn_n(s, "good", "sleep", 2);
    assert_true(wait_count(&g_started, 5, WAIT_MS));
    sn_sched_destroy(&s);
    assert_null(s);
    sn_sched_destroy(&s);
    assert_null(s);
    sn_sched_destroy(NULL);
    assert_int_equal(atomic_load(&g_cb_total), 5);
    assert_int_equal(atomic_load(&g_cb_done), 5);
    assert_int_equal(atomic_load(&g_closes), 5);
    assert_int_equal(atomic_load(&g_double_close), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_shutdown_well_behaved, reset),
        cmocka_unit_test_setup(test_shutdown_force_closes_stubborn, reset),
        cmocka_unit_test_setup(test_shutdown_mid_flight, reset),
        cmocka_unit_test_setup(test_spawn_after_shutdown, reset),
        cmocka_unit_test_setup(test_send_after_shutdown, reset),
        cmocka_unit_test_setup(test_destroy_twice, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

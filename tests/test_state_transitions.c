/* test_state_transitions.c - the process state machine, a transition a
 * test: Ready -> Running -> Complete (DONE, FAIL), Running -> Idle -> Ready
 * on a message, Running -> Blocked -> Ready on a yield completion, messages
 * that must not wake a Blocked process, CANCEL, CONTINUE, WAIT without a
 * yield, and no Ready process starved by busy workers.
 *
 * White-box where it helps: a test reads a process's state word from the
 * PID table (proc_state) to see it Idle or Blocked before poking it.
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

#include "states_fixture.h"

/* Ready -> Running -> Complete with DONE: the result reaches the callback
 * and sn_call; the process leaves the PID table; init/step/close once. */
static void test_done_reaches_callback_and_call(void **unused)
{
    sn_sched_t *s = mk(2);
    collector_t c;
    collector_init(&c);

    sn_payload_t *in = sn_payload_text("hello");
    sn_pid_t pid = SN_PID_NONE;
    assert_int_equal(sn_spawn(s, "basic", "done", &in, collector_on_result, &c, &pid), 0);
    assert_null(in); /* taken */
    assert_int_equal(pid.node, 1);
    assert_int_not_equal(pid.serial, 0);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.status, SN_DONE);
    assert_int_equal(c.error, 0);
    assert_true(sn_pid_eq(c.pid, pid));
    assert_non_null(c.result);
    assert_int_equal(c.result->ctype, SN_CT_TEXT);
    assert_int_equal(c.result->len, 5);
    assert_string_equal((const char *)c.result->data, "hello");
    assert_int_equal(proc_state(s, pid), -1); /* Complete: out of the table */

    sn_payload_t *res = NULL;
    in = sn_payload_text("again");
    int rc = sn_call(s, "basic", "done", &in, WAIT_MS, &res);
    assert_int_not_equal(rc, SN_ETIMEDOUT);
    assert_int_equal(rc, 0);
    assert_null(in);
    assert_non_null(res);
    assert_string_equal((const char *)res->data, "again");
    sn_payload_destroy(&res);

    /* DONE with no result */
    res = sn_payload_text("stale"); /* sn_call clears *result first */
    sn_payload_t *stale = res;
    rc = sn_call(s, "basic", "done", NULL, WAIT_MS, &res);
    assert_int_equal(rc, 0);
    assert_null(res);
    sn_payload_destroy(&stale);

    sn_stats_t st;
    sn_sched_stats(s, &st);
    assert_int_equal(st.spawned, 3);
    sn_sched_destroy(&s);
    assert_null(s);
    assert_int_equal(c.calls, 1); /* once, and not again at shutdown */
    assert_int_equal(atomic_load(&g_basic_inits), 3);
    assert_int_equal(atomic_load(&g_basic_steps), 3);
    assert_int_equal(atomic_load(&g_basic_closes), 3);
    assert_step_invariants();
    collector_fini(&c);
}

/* Ready -> Running -> Complete with FAIL: the error and the reason reach
 * the callback and sn_call; FAIL with error 0 becomes SN_EFAILED. */
static void test_fail_reaches_callback_and_call(void **unused)
{
    sn_sched_t *s = mk(2);
    collector_t c;
    collector_init(&c);
    sn_pid_t pid;
    assert_int_equal(sn_spawn(s, "basic", "fail", NULL, collector_on_result, &c, &pid), 0);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.status, SN_FAIL);
    assert_int_equal(c.error, -1234);
    assert_true(sn_pid_eq(c.pid, pid));
    assert_non_null(c.result);
    assert_int_equal(c.result->ctype, SN_CT_ERROR);
    assert_string_equal((const char *)c.result->data, "bad 7");

    sn_payload_t *res = NULL;
    int rc = sn_call(s, "basic", "fail", NULL, WAIT_MS, &res);
    assert_int_equal(rc, -1234);
    assert_non_null(res);
    assert_string_equal((const char *)res->data, "bad 7");
    sn_payload_destroy(&res);

    rc = sn_call(s, "basic", "fail0", NULL, WAIT_MS, &res);
    assert_int_equal(rc, SN_EFAILED);
    sn_payload_destroy(&res);

    sn_sched_destroy(&s);
    assert_int_equal(c.calls, 1);
    assert_int_equal(atomic_load(&g_basic_closes), atomic_load(&g_basic_inits));
    assert_int_equal(atomic_load(&g_basic_closes), 3);
    assert_step_invariants();
    collector_fini(&c);
}

/* Running -> Idle -> Ready -> Running on a message. */
static void test_idle_wakes_on_message(void **unused)
{
    sn_sched_t *s = mk(2);
    collector_t c;
    collector_init(&c);
    sn_pid_t pid = spawn_waiter(s, "idle", &c, SN__IDLE);
    assert_int_equal(atomic_load(&g_waiter_steps), 1);

    sn_payload_t *m = sn_payload_u64(99);
    assert_int_equal(sn_send(s, pid, &m), 0);
    assert_null(m);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.status, SN_DONE);
    assert_int_equal(result_u64(&c), 99);
    assert_int_equal(atomic_load(&g_waiter_steps), 2);
    assert_int_equal(g_nlog, 1);
    assert_int_equal(g_log[0].step, 2);
    assert_int_equal(g_log[0].type, SN_EV_MESSAGE);
    assert_true(sn_pid_is_none(g_log[0].from));
    assert_int_equal(g_log[0].ctype, SN_CT_U64);

    sn_sched_destroy(&s);
    assert_int_equal(c.calls, 1);
    assert_step_invariants();
    collector_fini(&c);
}

/* Running -> Blocked -> Ready -> Running on the yield's completion, which
 * carries the tag, the error and the data; the handler saw the yield. */
static void test_blocked_wakes_on_completion(void **unused)
{
    sn_sched_t *s = mk(2);
    collector_t c, c2;
    collector_init(&c);
    collector_init(&c2);
    sn_pid_t pid = spawn_waiter(s, "block", &c, SN__BLOCKED);
    pthread_mutex_lock(&g_held_mu);
    assert_int_equal(g_held.count, 1);
    assert_true(sn_pid_eq(g_held.from, pid));
    assert_int_equal(g_held.tag, 42);
    assert_int_equal(g_held.arg, 7);
    assert_string_equal(g_held.text, "held");
    pthread_mutex_unlock(&g_held_mu);
    assert_int_equal(atomic_load(&g_waiter_steps), 1);

    sn_payload_t *r = sn_payload_text("finished");
    assert_int_equal(sn_complete_yield(s, pid, 42, 0, &r), 0);
    assert_null(r);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.status, SN_DONE);
    assert_string_equal((const char *)c.result->data, "finished");
    assert_int_equal(g_nlog, 1);
    assert_int_equal(g_log[0].step, 2);
    assert_int_equal(g_log[0].type, SN_EV_YIELD_COMPLETE);
    assert_int_equal(g_log[0].tag, 42);
    assert_int_equal(g_log[0].error, 0);

    /* the completion's error reaches the step too */
    pid = spawn_waiter(s, "block", &c2, SN__BLOCKED);
    r = sn_payload_text("why");
    assert_int_equal(sn_complete_yield(s, pid, 42, SN_EPROTO, &r), 0);
    assert_true(collector_wait(&c2, WAIT_MS));
    assert_int_equal(c2.status, SN_FAIL);
    assert_int_equal(c2.error, SN_EPROTO);
    assert_int_equal(g_nlog, 2);
    assert_int_equal(g_log[1].error, SN_EPROTO);
    assert_string_equal(g_log[1].text, "why");

    sn_sched_destroy(&s);
    assert_step_invariants();
    collector_fini(&c);
    collector_fini(&c2);
}

/* A message to a Blocked (SN_WAIT) process does not wake it; it is handed
 * over with the completion, in arrival order, in one step. */
static void test_message_does_not_wake_blocked(void **unused)
{
    sn_sched_t *s = mk(2);
    collector_t c;
    collector_init(&c);
    sn_pid_t pid = spawn_waiter(s, "block", &c, SN__BLOCKED);

    sn_payload_t *m = sn_payload_text("early");
    assert_int_equal(sn_send(s, pid, &m), 0);
    sleep_ms(100);
    assert_int_equal(proc_state(s, pid), SN__BLOCKED);
    assert_int_equal(atomic_load(&g_waiter_steps), 1);
    m = sn_payload_text("early2");
    assert_int_equal(sn_send(s, pid, &m), 0);
    sleep_ms(20);
    assert_int_equal(proc_state(s, pid), SN__BLOCKED);
    assert_int_equal(atomic_load(&g_waiter_steps), 1);

    sn_payload_t *r = sn_payload_text("late");
    assert_int_equal(sn_complete_yield(s, pid, 42, 0, &r), 0);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.status, SN_DONE);
    assert_string_equal((const char *)c.result->data, "late");
    assert_int_equal(atomic_load(&g_waiter_steps), 2);
    assert_int_equal(g_nlog, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(g_log[i].step, 2); /* all in the step after the wake */
    assert_int_equal(g_log[0].type, SN_EV_MESSAGE);
    assert_string_equal(g_log[0].text, "early");
    assert_int_equal(g_log[1].type, SN_EV_MESSAGE);
    assert_string_equal(g_log[1].text, "early2");
    assert_int_equal(g_log[2].type, SN_EV_YIELD_COMPLETE);
    assert_string_equal(g_log[2].text, "late");

    sn_sched_destroy(&s);
    assert_step_invariants();
    collector_fini(&c);
}

/* CANCEL wakes an Idle process. */
static void test_cancel_wakes_idle(void **unused)
{
    sn_sched_t *s = mk(2);
    collector_t c;
    collector_init(&c);
    sn_pid_t pid = spawn_waiter(s, "idle", &c, SN__IDLE);
    assert_int_equal(sn_cancel(s, pid), 0);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.status, SN_DONE);
    assert_string_equal((const char *)c.result->data, "cancelled");
    assert_int_equal(g_nlog, 1);
    assert_int_equal(g_log[0].type, SN_EV_CANCEL);
    assert_int_equal(g_log[0].step, 2);
    assert_int_equal(sn_cancel(s, pid), SN_ENOPROC); /* gone */
    sn_sched_destroy(&s);
    assert_step_invariants();
    collector_fini(&c);
}

/* CANCEL wakes a Blocked process (queued messages come along); completing
 * its abandoned yield later reports SN_ENOPROC and frees the result. */
static void test_cancel_wakes_blocked(void **unused)
{
    sn_sched_t *s = mk(2);
    collector_t c;
    collector_init(&c);
    sn_pid_t pid = spawn_waiter(s, "block", &c, SN__BLOCKED);
    sn_payload_t *m = sn_payload_text("queued");
    assert_int_equal(sn_send(s, pid, &m), 0);
    assert_int_equal(sn_cancel(s, pid), 0);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.status, SN_DONE);
    assert_string_equal((const char *)c.result->data, "cancelled");
    assert_int_equal(g_nlog, 2);
    assert_int_equal(g_log[0].type, SN_EV_MESSAGE);
    assert_int_equal(g_log[1].type, SN_EV_CANCEL);
    assert_int_equal(g_log[1].step, 2);

    sn_payload_t *r = sn_payload_text("too late");
    assert_int_equal(sn_complete_yield(s, pid, 42, 0, &r), SN_ENOPROC);
    assert_null(r);
    sn_sched_destroy(&s);
    assert_step_invariants();
    collector_fini(&c);
}

/* SN_CONTINUE runs the process again (with no events), and requeues it
 * behind other work: two endless CONTINUE loops on two workers do not
 * starve a third process. */
static void test_continue_requeues(void **unused)
{
    sn_sched_t *s = mk(2);
    sn_payload_t *in = sn_payload_u64(500), *res = NULL;
    int rc = sn_call(s, "spinner", "count", &in, WAIT_MS, &res);
    assert_int_equal(rc, 0);
    assert_non_null(res);
    uint64_t v = 0;
    assert_int_equal(sn_payload_get_u64(res, &v), 0);
    assert_int_equal(v, 500);
    sn_payload_destroy(&res);

    collector_t a, b;
    collector_init(&a);
    collector_init(&b);
    atomic_store(&g_spin_steps, 0);
    assert_int_equal(sn_spawn(s, "spinner", "until", NULL, collector_on_result, &a, NULL), 0);
    assert_int_equal(sn_spawn(s, "spinner", "until", NULL, collector_on_result, &b, NULL), 0);
    assert_true(wait_count(&g_spin_steps, 100, WAIT_MS));
    in = sn_payload_text("through");
    rc = sn_call(s, "basic", "done", &in, WAIT_MS, &res);
    assert_int_not_equal(rc, SN_ETIMEDOUT);
    assert_int_equal(rc, 0);
    assert_string_equal((const char *)res->data, "through");
    sn_payload_destroy(&res);
    /* both loops are still going */
    assert_int_equal(collector_calls(&a), 0);
    assert_int_equal(collector_calls(&b), 0);
    atomic_store(&g_spin_stop, 1);
    assert_true(collector_wait(&a, WAIT_MS));
    assert_true(collector_wait(&b, WAIT_MS));
    assert_int_equal(a.status, SN_DONE);
    assert_int_equal(b.status, SN_DONE);
    assert_true(result_u64(&a) > 1);
    assert_true(result_u64(&b) > 1);
    assert_int_equal(atomic_load(&g_spin_events), 0);
    sn_sched_destroy(&s);
    assert_step_invariants();
    collector_fini(&a);
    collector_fini(&b);
}

/* SN_WAIT with nothing pending fails the process with SN_EBADWAIT; sends
 * and NOREPLY spawns do not count as pending. */
static void test_wait_without_yield_fails(void **unused)
{
    sn_sched_t *s = mk(2);
    sn_payload_t *res = NULL;
    int rc = sn_call(s, "basic", "badwait", NULL, WAIT_MS, &res);
    assert_int_equal(rc, SN_EBADWAIT);
    assert_non_null(res);
    assert_non_null(strstr((const char *)res->data, "WAIT"));
    sn_payload_destroy(&res);

    rc = sn_call(s, "basic", "badwait_send", NULL, WAIT_MS, &res);
    assert_int_equal(rc, SN_EBADWAIT);
    sn_payload_destroy(&res);

    rc = sn_call(s, "basic", "badwait_noreply", NULL, WAIT_MS, &res);
    assert_int_equal(rc, SN_EBADWAIT);
    sn_payload_destroy(&res);

    collector_t c;
    collector_init(&c);
    assert_int_equal(sn_spawn(s, "basic", "badwait", NULL, collector_on_result, &c, NULL), 0);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.status, SN_FAIL);
    assert_int_equal(c.error, SN_EBADWAIT);
    sn_sched_destroy(&s);
    /* the NOREPLY child ran too: everything closed */
    assert_int_equal(atomic_load(&g_basic_closes), atomic_load(&g_basic_inits));
    assert_int_equal(atomic_load(&g_basic_inits), 5);
    assert_step_invariants();
    collector_fini(&c);
}

/* Ready -> Running must happen for every Ready process, even while every
 * worker is busy: here three ping-pong pairs on two workers (a pair keeps
 * waking its partner into the worker's run-next slot) must not keep a new
 * process, or a pair queued behind them, from ever running. */
static void test_ready_not_starved_by_message_pair(void **unused)
{
    enum { PAIRS = 3 };
    sn_sched_t *s = mk(2);
    sn_pid_t pids[2 * PAIRS];
    for (int i = 0; i < PAIRS; i++) {
        assert_int_equal(sn_spawn(s, "pingpong", "pong", NULL, NULL, NULL, &pids[2 * i]), 0);
        sn_payload_t *in = sn_payload_pid(pids[2 * i]);
        assert_int_equal(sn_spawn(s, "pingpong", "ping", &in, NULL, NULL, &pids[2 * i + 1]), 0);
    }
    assert_true(wait_count(&g_rallies, 2000, WAIT_MS));

    sn_payload_t *in = sn_payload_text("fair"), *res = NULL;
    int rc = sn_call(s, "basic", "done", &in, 10000, &res);
    sn_payload_destroy(&in);
    if (rc == SN_ETIMEDOUT)
        print_error("a new process stayed Ready for 10 s while %d pairs of %d had run\n",
                    atomic_load(&g_pp_started) / 2, PAIRS);
    assert_int_not_equal(rc, SN_ETIMEDOUT);
    assert_int_equal(rc, 0);
    assert_string_equal((const char *)res->data, "fair");
    sn_payload_destroy(&res);
    assert_true(wait_count(&g_pp_started, 2 * PAIRS, 5000));

    for (int i = 0; i < 2 * PAIRS; i++)
        (void)sn_cancel(s, pids[i]); /* a pong may already be gone */
    sn_sched_destroy(&s);
    assert_step_invariants();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_done_reaches_callback_and_call, reset),
        cmocka_unit_test_setup(test_fail_reaches_callback_and_call, reset),
        cmocka_unit_test_setup(test_idle_wakes_on_message, reset),
        cmocka_unit_test_setup(test_blocked_wakes_on_completion, reset),
        cmocka_unit_test_setup(test_message_does_not_wake_blocked, reset),
        cmocka_unit_test_setup(test_cancel_wakes_idle, reset),
        cmocka_unit_test_setup(test_cancel_wakes_blocked, reset),
        cmocka_unit_test_setup(test_continue_requeues, reset),
        cmocka_unit_test_setup(test_ready_not_starved_by_message_pair, reset),
        cmocka_unit_test_setup(test_wait_without_yield_fails, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_dispatch_spawn.c - the spawn and monitor yields: unknown methods and
 * types, the errors a spawn yield reports, AWAIT delivering the child's
 * result, the child's PID, spawn_monitor's DOWN after the completion, a
 * monitor's DOWN, and the first step's empty event list.
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
        cmocka_unit_test_setup(test_spawn_await_delivers_result, reset),
        cmocka_unit_test_setup(test_spawn_delivers_pid, reset),
        cmocka_unit_test_setup(test_monitor, reset),
        cmocka_unit_test_setup(test_spawn_monitor, reset),
        cmocka_unit_test_setup(test_first_step_has_no_events, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

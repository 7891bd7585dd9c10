/* test_dispatch_commands.c - the command yields: unknown commands, user
 * commands completed from other threads, sleep, terminate, registering a
 * command or type twice, and many yields in one step.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_unknown_command, reset),
        cmocka_unit_test_setup(test_user_command_from_thread, reset),
        cmocka_unit_test_setup(test_sleep, reset),
        cmocka_unit_test_setup(test_terminate, reset),
        cmocka_unit_test_setup(test_duplicate_registration, reset),
        cmocka_unit_test_setup(test_many_yields_in_one_step, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

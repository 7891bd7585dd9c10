/* test_state_races.c - the races between events and a Running process:
 * completions posted inside the handler or from other threads while the
 * yielding process is still RUNNING, many senders to one process while it
 * runs, idles and blocks, and no process run by two workers at once. No
 * wakeup is lost, nothing runs twice, every message arrives once and in
 * each sender's order.
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

/* Runs n racers of `method` for `rounds` rounds each and checks them. */
static void run_racers(sn_sched_t *s, const char *method, int n, uint64_t rounds)
{
    collector_t c[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) {
        collector_init(&c[i]);
        sn_payload_t *in = sn_payload_u64(rounds);
        assert_int_equal(sn_spawn(s, "racer", method, &in, collector_on_result, &c[i], NULL), 0);
    }
    for (int i = 0; i < n; i++) {
        assert_true(collector_wait(&c[i], WAIT_MS)); /* no lost wakeup */
        assert_int_equal(c[i].status, SN_DONE);
        assert_int_equal(result_u64(&c[i]), rounds);
        collector_fini(&c[i]);
    }
}

/* The race: a completion posted inside the handler, while the yielding
 * process is still RUNNING, must wake it whether it then WAITs or IDLEs. */
static void test_race_completion_inside_handler(void **unused)
{
    sn_sched_t *s = mk(3);
    run_racers(s, "sync", 6, 3000);
    sn_sched_destroy(&s);
    assert_completion_invariants();
}

/* The race: a completion from another thread, immediately, racing the end
 * of the step and the process's move to Blocked/Idle. */
static void test_race_completion_from_thread(void **unused)
{
    sn_sched_t *s = mk(3);
    completers_start(s, 2);
    run_racers(s, "async", 6, 2000);
    run_racers(s, "mixed", 4, 2000);
    completers_stop();
    sn_sched_destroy(&s);
    assert_completion_invariants();
}

/* SENDERS threads send M messages each to one "sink" process (method). */
static void many_senders_one_sink(const char *method)
{
    enum { SENDERS = 4, M = 20000 };
    sn_sched_t *s = mk(3);
    completers_start(s, 1);
    collector_t c;
    collector_init(&c);
    sn_pid_t pid;
    sn_payload_t *in = sn_payload_u64((uint64_t)SENDERS * M);
    assert_int_equal(sn_spawn(s, "sink", method, &in, collector_on_result, &c, &pid), 0);

    atomic_int fail = 0;
    pthread_t th[SENDERS];
    sender_arg_t args[SENDERS];
    for (int i = 0; i < SENDERS; i++) {
        args[i] = (sender_arg_t){s, &pid, 1, (uint32_t)i, M, &fail};
        assert_int_equal(pthread_create(&th[i], NULL, sender_main, &args[i]), 0);
    }
    for (int i = 0; i < SENDERS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&fail), 0);
    assert_true(collector_wait(&c, WAIT_MS));
    assert_int_equal(c.status, SN_DONE);
    assert_int_equal(result_u64(&c), (uint64_t)SENDERS * M);
    completers_stop();
    sn_stats_t st;
    sn_sched_stats(s, &st);
    assert_true(st.messages >= (uint64_t)SENDERS * M);
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_order_bad), 0);
    assert_completion_invariants();
    collector_fini(&c);
}

/* Many threads send to one process while it runs, idles and blocks:
 * every message arrives exactly once, in each sender's order. */
static void test_race_many_senders_one_process(void **unused)
{
    many_senders_one_sink("count");
}

/* The same, with a process that WAITs on a completion after every step:
 * messages racing its move to Blocked must not wake it (a step after WAIT
 * brings the completion, unless DRAIN_MAX events are ahead of it). */
static void test_race_messages_do_not_wake_blocked(void **unused)
{
    many_senders_one_sink("wait");
    if (atomic_load(&g_msgonly_wait))
        print_error("%d steps of a Blocked process ran with fewer than 128 events, all messages\n",
                    atomic_load(&g_msgonly_wait));
    assert_int_equal(atomic_load(&g_msgonly_wait), 0);
}

/* Heavy load on 4 workers: 8 receivers, each fed by 4 external threads and
 * 4 sender processes at once. No process is ever run by two workers at
 * once, and nothing is lost or reordered. */
static void test_never_run_by_two_workers(void **unused)
{
    enum { SINKS = 8, THREADS = 4, PUMPS = 4, M = 1500 };
    sn_sched_t *s = mk(4);
    completers_start(s, 1);
    collector_t sinks[SINKS], pumps[PUMPS];
    sn_pid_t to[SINKS];
    for (int i = 0; i < SINKS; i++) {
        collector_init(&sinks[i]);
        sn_payload_t *in = sn_payload_u64((uint64_t)(THREADS + PUMPS) * M);
        assert_int_equal(sn_spawn(s, "sink", "count", &in, collector_on_result, &sinks[i], &to[i]), 0);
    }
    for (int i = 0; i < PUMPS; i++) {
        collector_init(&pumps[i]);
        pump_cfg_t cfg = {(uint32_t)(THREADS + i), M, SINKS, {{0, 0}}};
        memcpy(cfg.to, to, sizeof to);
        sn_payload_t *in = sn_payload_new(SN_CT_USER, &cfg, sizeof cfg);
        assert_int_equal(sn_spawn(s, "pump", "run", &in, collector_on_result, &pumps[i], NULL), 0);
    }
    atomic_int fail = 0;
    pthread_t th[THREADS];
    sender_arg_t args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (sender_arg_t){s, to, SINKS, (uint32_t)i, M, &fail};
        assert_int_equal(pthread_create(&th[i], NULL, sender_main, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&fail), 0);
    for (int i = 0; i < PUMPS; i++) {
        assert_true(collector_wait(&pumps[i], WAIT_MS));
        assert_int_equal(pumps[i].status, SN_DONE);
    }
    for (int i = 0; i < SINKS; i++) {
        assert_true(collector_wait(&sinks[i], WAIT_MS));
        assert_int_equal(sinks[i].status, SN_DONE);
        assert_int_equal(result_u64(&sinks[i]), (uint64_t)(THREADS + PUMPS) * M);
    }
    completers_stop();
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_order_bad), 0);
    assert_completion_invariants();
    for (int i = 0; i < SINKS; i++)
        collector_fini(&sinks[i]);
    for (int i = 0; i < PUMPS; i++)
        collector_fini(&pumps[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_race_completion_inside_handler, reset),
        cmocka_unit_test_setup(test_race_completion_from_thread, reset),
        cmocka_unit_test_setup(test_race_many_senders_one_process, reset),
        cmocka_unit_test_setup(test_race_messages_do_not_wake_blocked, reset),
        cmocka_unit_test_setup(test_never_run_by_two_workers, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

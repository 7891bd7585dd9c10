/* test_dispatch_send.c - the send yields: to unknown and finished PIDs,
 * bounces when the receiver finishes (each message consumed or bounced,
 * exactly once), completion with bounces queued, message order, empty
 * messages, and send_many batches.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_send_to_unknown_pid, reset),
        cmocka_unit_test_setup(test_send_to_finished_process, reset),
        cmocka_unit_test_setup(test_complete_with_queued_bounces, reset),
        cmocka_unit_test_setup(test_bounce_when_receiver_finishes, reset),
        cmocka_unit_test_setup(test_message_order, reset),
        cmocka_unit_test_setup(test_null_payload_send, reset),
        cmocka_unit_test_setup(test_send_many, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

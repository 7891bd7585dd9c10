/* test_inspect.c - the process table snapshot (sched/inspect.c): one
 * row per live process with its type, state, mailbox length, steps and
 * moves, counts by state, truncation at max, and snapshots taken while
 * workers run (for TSan: the counters are read while being written).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

/* "sleeper": method "idle" steps once and waits for messages (IDLE);
 * "block" yields a long sleep and WAITs on it, so messages queue up
 * unread; "spin" CONTINUEs 4 times, then IDLE. Any CANCEL ends it. */
typedef struct sleeper {
    int mode, spins;
} sleeper_t;

static int sl_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    (void)input;
    sleeper_t *s = state;
    if (strcmp(method, "idle") == 0)
        s->mode = 0;
    else if (strcmp(method, "block") == 0)
        s->mode = 1;
    else if (strcmp(method, "spin") == 0)
        s->mode = 2;
    else
        return SN_ENOMETHOD;
    return 0;
}

static void sl_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    sleeper_t *s = state;
    for (size_t i = 0; i < n; i++)
        if (ev[i].type == SN_EV_CANCEL) {
            sn_out_done(out, NULL);
            return;
        }
    if (s->mode == 1) {
        sn_out_sleep(out, 1, 600000);
        out->status = SN_WAIT;
    } else if (s->mode == 2 && s->spins < 4) {
        s->spins++;
        out->status = SN_CONTINUE;
    } else {
        out->status = SN_IDLE;
    }
}

static const sn_type_t sleeper_type = {
    .name = "sleeper", .version = 1, .state_size = sizeof(sleeper_t), .init = sl_init, .step = sl_step};

static sn_sched_t *new_sched(int workers)
{
    sn_sched_config_t cfg = {.node_id = 1, .workers = workers};
    sn_sched_t *s = sn_sched_new(&cfg);
    assert_non_null(s);
    assert_int_equal(sn_type_register(s, &sleeper_type), 0);
    return s;
}

static sn_pid_t spawn(sn_sched_t *s, const char *method)
{
    sn_pid_t pid;
    assert_int_equal(sn_spawn(s, "sleeper", method, NULL, NULL, NULL, &pid), 0);
    return pid;
}

/* Waits (bounded) until every one of n processes is in `state`. */
static bool wait_all(sn_sched_t *s, size_t n, unsigned state)
{
    uint64_t end = deadline_ns(WAIT_MS);
    sn_proc_counts_t c;
    do {
        sn__sched_snapshot(s, NULL, 0, &c);
        if (c.total == n && c.by_state[state] == n)
            return true;
        sleep_ms(1);
    } while (now_ns() < end);
    return false;
}

static const sn_proc_row_t *find_row(const sn_proc_row_t *rows, size_t n, sn_pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].pid.node == pid.node && rows[i].pid.serial == pid.serial)
            return &rows[i];
    return NULL;
}

/* Every process is in the table once, with its type, state and one step. */
static void smoke(void **st)
{
    (void)st;
    sn_sched_t *s = new_sched(2);
    sn_proc_counts_t c;
    assert_int_equal(sn__sched_snapshot(s, NULL, 0, &c), 0);
    assert_int_equal(c.total, 0);
    sn_pid_t pids[10];
    for (int i = 0; i < 10; i++)
        pids[i] = spawn(s, "idle");
    assert_true(wait_all(s, 10, SN_PS_IDLE));
    sn_proc_row_t rows[16];
    assert_int_equal(sn__sched_snapshot(s, rows, 16, &c), 10);
    assert_int_equal(c.total, 10);
    assert_int_equal(c.by_state[SN_PS_IDLE], 10);
    for (int i = 0; i < 10; i++) {
        const sn_proc_row_t *r = find_row(rows, 10, pids[i]);
        assert_non_null(r);
        assert_string_equal(r->type, "sleeper");
        assert_int_equal(r->state, SN_PS_IDLE);
        assert_string_equal(sn__pstate_name(r->state), "idle");
        assert_int_equal(r->steps, 1);
        assert_int_equal(r->mailbox, 0);
        assert_int_equal(r->moves, 0);
    }
    sn_sched_destroy(&s);
}

/* More processes than rows: all counted, max copied. */
static void truncated(void **st)
{
    (void)st;
    sn_sched_t *s = new_sched(1);
    for (int i = 0; i < 20; i++)
        spawn(s, "idle");
    assert_true(wait_all(s, 20, SN_PS_IDLE));
    sn_proc_row_t rows[3];
    memset(rows, 0xab, sizeof rows);
    sn_proc_counts_t c;
    assert_int_equal(sn__sched_snapshot(s, rows, 3, &c), 20);
    assert_int_equal(c.total, 20);
    for (int i = 0; i < 3; i++)
        assert_string_equal(rows[i].type, "sleeper");
    sn_sched_destroy(&s);
}

/* A Blocked process does not take messages: they are its mailbox. A
 * CANCEL wakes it; the step takes them all and it ends. */
static void mailbox(void **st)
{
    (void)st;
    sn_sched_t *s = new_sched(2);
    sn_pid_t pid = spawn(s, "block");
    assert_true(wait_all(s, 1, SN_PS_WAITING));
    for (int i = 0; i < 5; i++) {
        sn_payload_t *m = sn_payload_text("hello");
        assert_int_equal(sn_send(s, pid, &m), 0);
    }
    sn_proc_row_t r;
    assert_int_equal(sn__sched_snapshot(s, &r, 1, NULL), 1);
    assert_int_equal(r.state, SN_PS_WAITING);
    assert_string_equal(sn__pstate_name(r.state), "waiting");
    assert_int_equal(r.mailbox, 5);
    assert_int_equal(r.steps, 1);
    assert_int_equal(sn_cancel(s, pid), 0);
    uint64_t end = deadline_ns(WAIT_MS);
    while (sn__sched_snapshot(s, NULL, 0, NULL) != 0 && now_ns() < end)
        sleep_ms(1);
    assert_int_equal(sn__sched_snapshot(s, NULL, 0, NULL), 0);
    sn_sched_destroy(&s);
}

/* Steps are counted per process: four CONTINUEs and the last step. */
static void steps(void **st)
{
    (void)st;
    sn_sched_t *s = new_sched(2);
    sn_pid_t pid = spawn(s, "spin");
    assert_true(wait_all(s, 1, SN_PS_IDLE));
    sn_proc_row_t r;
    assert_int_equal(sn__sched_snapshot(s, &r, 1, NULL), 1);
    assert_int_equal(r.pid.serial, pid.serial);
    assert_int_equal(r.steps, 5);
    sn_payload_t *m = sn_payload_text("one more");
    assert_int_equal(sn_send(s, pid, &m), 0);
    uint64_t end = deadline_ns(WAIT_MS);
    do {
        sn__sched_snapshot(s, &r, 1, NULL);
    } while (r.steps != 6 && now_ns() < end && (sleep_ms(1), true));
    assert_int_equal(r.steps, 6);
    assert_int_equal(r.mailbox, 0);
    sn_sched_destroy(&s);
}

/* Snapshots while processes message each other: counts always add up,
 * nothing is read freed (ASan) or raced (TSan). */
static void busy(void **st)
{
    (void)st;
    sn_sched_t *s = new_sched(2);
    enum { N = 64 };
    sn_pid_t pids[N];
    for (int i = 0; i < N; i++)
        pids[i] = spawn(s, i % 2 ? "idle" : "spin");
    sn_proc_row_t rows[N];
    for (int round = 0; round < 200; round++) {
        sn_payload_t *m = sn_payload_text("x");
        if (sn_send(s, pids[round % N], &m) != 0)
            sn_payload_destroy(&m);
        sn_proc_counts_t c;
        size_t n = sn__sched_snapshot(s, rows, N, &c);
        assert_int_equal(n, N);
        uint64_t sum = 0;
        for (int k = 0; k < SN_PS_COUNT; k++)
            sum += c.by_state[k];
        assert_int_equal(sum, N);
        for (size_t i = 0; i < n; i++)
            assert_true(rows[i].state < SN_PS_COUNT && rows[i].mailbox <= 200);
    }
    sn_sched_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(smoke), cmocka_unit_test(truncated), cmocka_unit_test(mailbox),
        cmocka_unit_test(steps), cmocka_unit_test(busy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

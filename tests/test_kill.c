/* test_kill.c - ending processes from outside (sched/kill.c): a
 * CANCEL that carries the reason, a forced end of a process that ignores
 * CANCEL (Idle, Waiting, or in the middle of a step), what its monitors
 * and its awaiter get, and noproc for a process that is not there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

/* "victim": method "polite" ends on CANCEL with the CANCEL's data as its
 * result; "stubborn" ignores CANCEL (stays Idle); "sleepy" WAITs on a
 * long sleep and ignores CANCEL; "busy" spins in its first step until
 * g_release, then goes Idle. g_steps counts every step. */
static atomic_int g_steps, g_in_step, g_release;

typedef struct victim {
    int mode;
} victim_t;

static int v_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    (void)input;
    static const char *const modes[] = {"polite", "stubborn", "sleepy", "busy", "busydone"};
    victim_t *v = state;
    for (int i = 0; i < 5; i++)
        if (!strcmp(method, modes[i])) {
            v->mode = i;
            return 0;
        }
    return SN_ENOMETHOD;
}

static void v_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    victim_t *v = state;
    atomic_fetch_add(&g_steps, 1);
    for (size_t i = 0; i < n; i++)
        if (ev[i].type == SN_EV_CANCEL && v->mode == 0) {
            sn_out_done(out, &ev[i].data);
            return;
        }
    if (v->mode == 3 || v->mode == 4) {
        atomic_store(&g_in_step, 1);
        uint64_t end = deadline_ns(WAIT_MS);
        while (!atomic_load(&g_release) && now_ns() < end)
            sleep_ms(1);
        if (v->mode == 4) {
            sn_payload_t *r = sn_payload_text("finished");
            sn_out_done(out, &r);
            return;
        }
        v->mode = 1;
    }
    if (v->mode == 2 && n == 0) {
        sn_out_sleep(out, 1, 600000);
        out->status = SN_WAIT;
        return;
    }
    out->status = v->mode == 2 ? SN_WAIT : SN_IDLE;
}

/* "watcher": monitors the PID it is given and ends with the DOWN's error
 * (as a u64 of -error) once it comes, keeping the reason in g_down_reason. */
static char g_down_reason[256];

static int w_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    (void)method;
    return sn_payload_get_pid(*input, (sn_pid_t *)state);
}

static void w_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    if (n == 0) {
        sn_out_monitor(out, *(sn_pid_t *)state, 7);
        out->status = SN_IDLE;
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (ev[i].type == SN_EV_DOWN) {
            snprintf(g_down_reason, sizeof g_down_reason, "%.*s", ev[i].data ? (int)ev[i].data->len : 0,
                     ev[i].data ? (const char *)ev[i].data->data : "");
            sn_payload_t *r = sn_payload_u64((uint64_t)-ev[i].error);
            sn_out_done(out, &r);
            return;
        }
    out->status = SN_IDLE;
}

static const sn_type_t victim_type = {
    .name = "victim", .version = 1, .state_size = sizeof(victim_t), .init = v_init, .step = v_step};
static const sn_type_t watcher_type = {
    .name = "watcher", .version = 1, .state_size = sizeof(sn_pid_t), .init = w_init, .step = w_step};

typedef struct fixture {
    sn_sched_t *s;
    collector_t victim, watcher;
    sn_pid_t pid, wpid;
} fixture_t;

/* A victim in `mode` (its outcome in f->victim), watched by a watcher. */
static void start(fixture_t *f, const char *mode)
{
    atomic_store(&g_steps, 0);
    atomic_store(&g_in_step, 0);
    atomic_store(&g_release, 0);
    g_down_reason[0] = 0;
    sn_sched_config_t cfg = {.node_id = 1, .workers = 2};
    assert_non_null(f->s = sn_sched_new(&cfg));
    assert_int_equal(sn_type_register(f->s, &victim_type), 0);
    assert_int_equal(sn_type_register(f->s, &watcher_type), 0);
    collector_init(&f->victim);
    collector_init(&f->watcher);
    assert_int_equal(sn_spawn(f->s, "victim", mode, NULL, collector_on_result, &f->victim, &f->pid), 0);
    sn_payload_t *in = sn_payload_pid(f->pid);
    assert_int_equal(sn_spawn(f->s, "watcher", "", &in, collector_on_result, &f->watcher, &f->wpid), 0);
    /* the watcher's monitor is in place once it has stepped and is Idle */
    uint64_t end = deadline_ns(WAIT_MS);
    sn_proc_row_t r = {0};
    while ((sn__sched_proc(f->s, f->wpid, &r) != 0 || r.state != SN_PS_IDLE) && now_ns() < end)
        sleep_ms(1);
    assert_int_equal(r.state, SN_PS_IDLE);
    while (!strncmp(mode, "busy", 4) && !atomic_load(&g_in_step) && now_ns() < end)
        sleep_ms(1);
}

/* Waits (bounded) for the victim to be in `state`. */
static bool victim_in(fixture_t *f, uint32_t state)
{
    uint64_t end = deadline_ns(WAIT_MS);
    sn_proc_row_t r;
    do {
        if (sn__sched_proc(f->s, f->pid, &r) == 0 && r.state == state)
            return true;
        sleep_ms(1);
    } while (now_ns() < end);
    return false;
}

static void finish(fixture_t *f)
{
    sn_sched_destroy(&f->s);
    collector_fini(&f->victim);
    collector_fini(&f->watcher);
}

/* The victim was force-killed with "why": its awaiter and its watcher
 * say so. */
static void assert_killed(fixture_t *f, const char *why)
{
    assert_true(collector_wait(&f->victim, WAIT_MS));
    assert_int_equal(f->victim.status, SN_FAIL);
    assert_int_equal(f->victim.error, SN_EKILLED);
    assert_non_null(f->victim.result);
    assert_string_equal((const char *)f->victim.result->data, why);
    assert_true(collector_wait(&f->watcher, WAIT_MS));
    assert_int_equal(result_u64(&f->watcher), (uint64_t)-SN_EKILLED);
    assert_string_equal(g_down_reason, why);
}

/* A polite process ends on the CANCEL, reading the reason it carries. */
static void cancel_polite(void **st)
{
    (void)st;
    fixture_t f;
    start(&f, "polite");
    sn_payload_t *why = sn_payload_text("please stop");
    assert_int_equal(sn__sched_kill(f.s, f.pid, false, &why), 0);
    assert_null(why);
    assert_true(collector_wait(&f.victim, WAIT_MS));
    assert_int_equal(f.victim.status, SN_DONE);
    assert_string_equal((const char *)f.victim.result->data, "please stop");
    assert_true(collector_wait(&f.watcher, WAIT_MS));
    assert_int_equal(result_u64(&f.watcher), 0); /* a normal end */
    finish(&f);
}

/* A process that ignores CANCEL survives it, and is then forced. */
static void force_idle(void **st)
{
    (void)st;
    fixture_t f;
    start(&f, "stubborn");
    sn_payload_t *why = sn_payload_text("first ask");
    assert_int_equal(sn__sched_kill(f.s, f.pid, false, &why), 0);
    uint64_t end = deadline_ns(WAIT_MS);
    while (atomic_load(&g_steps) < 2 && now_ns() < end)
        sleep_ms(1);
    assert_true(victim_in(&f, SN_PS_IDLE));
    sn_proc_row_t r;
    assert_int_equal(sn__sched_proc(f.s, f.pid, &r), 0); /* still there */
    why = sn_payload_text("killed by test");
    assert_int_equal(sn__sched_kill(f.s, f.pid, true, &why), 0);
    assert_killed(&f, "killed by test");
    assert_int_equal(sn__sched_proc(f.s, f.pid, &r), SN_ENOPROC);
    assert_int_equal(atomic_load(&g_steps), 2); /* no step after the force */
    finish(&f);
}

/* Waiting on a yield that will not complete for ten minutes: forced at once. */
static void force_waiting(void **st)
{
    (void)st;
    fixture_t f;
    start(&f, "sleepy");
    assert_true(victim_in(&f, SN_PS_WAITING));
    sn_payload_t *why = sn_payload_text("no more sleep");
    assert_int_equal(sn__sched_kill(f.s, f.pid, true, &why), 0);
    assert_killed(&f, "no more sleep");
    finish(&f);
}

/* Mid-step: the step runs to its end, then the process ends; no step after. */
static void force_mid_step(void **st)
{
    (void)st;
    fixture_t f;
    start(&f, "busy");
    assert_true(atomic_load(&g_in_step));
    sn_payload_t *why = sn_payload_text("mid-step");
    assert_int_equal(sn__sched_kill(f.s, f.pid, true, &why), 0);
    sleep_ms(20);
    assert_int_equal(collector_calls(&f.victim), 0); /* the step still runs */
    sn_proc_row_t r;
    assert_int_equal(sn__sched_proc(f.s, f.pid, &r), 0);
    assert_int_equal(r.state, SN_PS_RUNNING);
    atomic_store(&g_release, 1);
    assert_killed(&f, "mid-step");
    assert_int_equal(atomic_load(&g_steps), 1);
    finish(&f);
}

/* Forced mid-step, but that step finishes the process: its own end stands. */
static void force_mid_step_done(void **st)
{
    (void)st;
    fixture_t f;
    start(&f, "busydone");
    assert_true(atomic_load(&g_in_step));
    sn_payload_t *why = sn_payload_text("too late");
    assert_int_equal(sn__sched_kill(f.s, f.pid, true, &why), 0);
    atomic_store(&g_release, 1);
    assert_true(collector_wait(&f.victim, WAIT_MS));
    assert_int_equal(f.victim.status, SN_DONE);
    assert_string_equal((const char *)f.victim.result->data, "finished");
    assert_true(collector_wait(&f.watcher, WAIT_MS));
    assert_int_equal(result_u64(&f.watcher), 0);
    finish(&f);
}

static void noproc(void **st)
{
    (void)st;
    sn_sched_config_t cfg = {.node_id = 1, .workers = 1};
    sn_sched_t *s = sn_sched_new(&cfg);
    sn_pid_t nobody = {1, 999999};
    sn_payload_t *why = sn_payload_text("x");
    assert_int_equal(sn__sched_kill(s, nobody, true, &why), SN_ENOPROC);
    assert_null(why);
    why = sn_payload_text("x");
    assert_int_equal(sn__sched_kill(s, nobody, false, &why), SN_ENOPROC);
    assert_null(why);
    sn_proc_row_t r;
    assert_int_equal(sn__sched_proc(s, nobody, &r), SN_ENOPROC);
    sn_sched_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cancel_polite),  cmocka_unit_test(force_idle),          cmocka_unit_test(force_waiting),
        cmocka_unit_test(force_mid_step), cmocka_unit_test(force_mid_step_done), cmocka_unit_test(noproc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_stress.c - the wakeup stress: messages from outside threads and
 * from processes, yield completions from other threads while processes
 * run, block and idle. Every message must be delivered exactly once and
 * the system must never stall. Runs SN_STRESS_SECONDS (default 3; the
 * 60-second run is `SN_STRESS_SECONDS=60 tests/test_stress`). Also checks
 * that an idle scheduler burns no CPU.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

#define PROCS 256
#define SENDERS 3

static _Atomic long delivered, expected, completions;
static sn_pid_t pids[PROCS];
static _Atomic long closed;

typedef struct counter {
    long count;
    uint64_t rng;
    _Atomic int in_step;
} counter_t;

static int ctr_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    counter_t *c = state;
    c->rng = sn_ctx_self(ctx).serial * 2654435761u + 1;
    return strcmp(method, "count") == 0 ? 0 : SN_ENOMETHOD;
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void ctr_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    counter_t *c = state;
    if (atomic_exchange(&c->in_step, 1) != 0)
        fail_msg("step ran concurrently for one process");
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            sn_payload_t *r = sn_payload_u64((uint64_t)c->count);
            sn_out_done(out, &r);
            break;
        }
        if (ev[i].type == SN_EV_YIELD_COMPLETE) {
            if (ev[i].error)
                fail_msg("unexpected yield error %d", ev[i].error);
            atomic_fetch_add(&completions, 1);
            continue;
        }
        c->count++;
        atomic_fetch_add(&delivered, 1);
        uint64_t hops;
        if (sn_payload_get_u64(ev[i].data, &hops) != 0)
            fail_msg("bad message");
        if (hops > 0) {
            sn_payload_t *m = sn_take(&ev[i].data);
            hops--;
            memcpy(m->data, &hops, sizeof hops);
            sn_out_send(out, pids[next_rand(&c->rng) % PROCS], 0, &m);
        }
        if (next_rand(&c->rng) % 16 == 0) {
            /* block on a command completed by another thread */
            sn_out_yield(out, 0, "later", 5);
            out->status = SN_WAIT;
        }
    }
    atomic_store(&c->in_step, 0);
}

static void ctr_close(sn_ctx_t *ctx, void *state)
{
    atomic_fetch_add(&closed, 1);
}

static const sn_type_t counter_type = {"counter", 1, sizeof(counter_t), ctr_init, ctr_step, ctr_close, NULL, NULL};

/* "later": completed from a completer thread, via a small locked queue */
typedef struct req_q {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sn_pid_t *pid;
    uint64_t *tag;
    size_t n, cap;
    int stop;
} req_q_t;

static req_q_t rq = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, 0};

static void later(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    if (next_rand(&(uint64_t){req->from.serial + 7}) % 3 == 0) {
        /* sometimes complete synchronously, while the process is Running */
        sn_complete_yield(sched, req->from, req->tag, 0, NULL);
        return;
    }
    pthread_mutex_lock(&rq.mu);
    if (rq.n == rq.cap) {
        rq.cap = rq.cap ? rq.cap * 2 : 1024;
        rq.pid = realloc(rq.pid, rq.cap * sizeof *rq.pid);
        rq.tag = realloc(rq.tag, rq.cap * sizeof *rq.tag);
    }
    rq.pid[rq.n] = req->from;
    rq.tag[rq.n++] = req->tag;
    pthread_cond_signal(&rq.cv);
    pthread_mutex_unlock(&rq.mu);
}

static void *completer(void *arg)
{
    sn_sched_t *sched = arg;
    pthread_mutex_lock(&rq.mu);
    for (;;) {
        while (rq.n == 0 && !rq.stop)
            pthread_cond_wait(&rq.cv, &rq.mu);
        if (rq.n == 0 && rq.stop)
            break;
        sn_pid_t pid = rq.pid[--rq.n];
        uint64_t tag = rq.tag[rq.n];
        pthread_mutex_unlock(&rq.mu);
        if (sn_complete_yield(sched, pid, tag, 0, NULL) != 0)
            fail_msg("completion target vanished");
        pthread_mutex_lock(&rq.mu);
    }
    pthread_mutex_unlock(&rq.mu);
    return NULL;
}

typedef struct sender_arg {
    sn_sched_t *sched;
    double seconds;
    uint64_t seed;
} sender_arg_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *sender(void *arg)
{
    sender_arg_t *a = arg;
    double end = now_s() + a->seconds;
    uint64_t s = a->seed;
    while (now_s() < end) {
        for (int k = 0; k < 64; k++) {
            uint64_t hops = next_rand(&s) % 8;
            sn_payload_t *m = sn_payload_u64(hops);
            atomic_fetch_add(&expected, (long)hops + 1);
            if (sn_send(a->sched, pids[next_rand(&s) % PROCS], &m) != 0)
                fail_msg("send failed");
        }
        if (next_rand(&s) % 4 == 0)
            sched_yield();
        /* backpressure: keep at most ~1M deliveries outstanding (this tests
         * wakeups, not how much memory a backlog can take) */
        while (atomic_load(&expected) - atomic_load(&delivered) > 1000000 && now_s() < end)
            usleep(100);
    }
    return NULL;
}

static _Atomic long results_sum, results_n;

static void on_result(sn_sched_t *sched, sn_pid_t pid, sn_status_t status, int error, sn_payload_t **result, void *arg)
{
    uint64_t v = 0;
    if (status != SN_DONE || sn_payload_get_u64(*result, &v) != 0)
        fail_msg("counter ended with status %d error %d", status, error);
    atomic_fetch_add(&results_sum, (long)v);
    atomic_fetch_add(&results_n, 1);
}

static void wakeup_stress(void **st)
{
    (void)st;
    const char *env = getenv("SN_STRESS_SECONDS");
    double seconds = env ? atof(env) : 3.0;
    sn_sched_t *sched = sn_sched_new(&(sn_sched_config_t){1, 4, 1});
    assert_non_null(sched);
    assert_int_equal(sn_type_register(sched, &counter_type), 0);
    assert_true(sn_command_register(sched, "later", later, NULL) > 0);
    for (int i = 0; i < PROCS; i++)
        assert_int_equal(sn_spawn(sched, "counter", "count", NULL, on_result, NULL, &pids[i]), 0);
    pthread_t comp, snd[SENDERS];
    pthread_create(&comp, NULL, completer, sched);
    sender_arg_t args[SENDERS];
    for (int i = 0; i < SENDERS; i++) {
        args[i] = (sender_arg_t){sched, seconds, 0x1234567u * (uint64_t)(i + 1)};
        pthread_create(&snd[i], NULL, sender, &args[i]);
    }
    for (int i = 0; i < SENDERS; i++)
        pthread_join(snd[i], NULL);
    /* quiescence: everything sent gets delivered, bounded by 120 s */
    double limit = now_s() + 120, report = now_s() + 5;
    while (atomic_load(&delivered) != atomic_load(&expected) && now_s() < limit) {
        usleep(1000);
        if (now_s() > report) {
            printf("stress: draining, %ld of %ld delivered\n", atomic_load(&delivered), atomic_load(&expected));
            fflush(stdout);
            report += 5;
        }
    }
    long d = atomic_load(&delivered), e = atomic_load(&expected);
    if (d != e)
        fail_msg("stall: %ld of %ld messages delivered after 120 s", d, e);
    pthread_mutex_lock(&rq.mu);
    rq.stop = 1;
    pthread_cond_signal(&rq.cv);
    pthread_mutex_unlock(&rq.mu);
    pthread_join(comp, NULL);
    /* CANCEL -> each counter reports its count */
    assert_int_equal(sn_sched_shutdown(sched, 30000), 0);
    assert_int_equal(atomic_load(&results_n), PROCS);
    assert_int_equal(atomic_load(&results_sum), e);
    assert_int_equal(atomic_load(&closed), PROCS);
    printf("stress: %ld messages, %ld blocking completions in %.1f s\n", e, atomic_load(&completions), seconds);
    sn_sched_destroy(&sched);
    free(rq.pid);
    free(rq.tag);
}

static double thread_cpu_s(pthread_t t)
{
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return -1;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void idle_scheduler_burns_no_cpu(void **st)
{
    (void)st;
    sn_sched_t *sched = sn_sched_new(&(sn_sched_config_t){1, 2, 1});
    assert_non_null(sched);
    usleep(200000); /* let the workers park */
    double before[2], after[2];
    for (int i = 0; i < 2; i++)
        before[i] = thread_cpu_s(sched->workers[i].thread);
    usleep(1000000);
    for (int i = 0; i < 2; i++)
        after[i] = thread_cpu_s(sched->workers[i].thread);
    double used = (after[0] - before[0]) + (after[1] - before[1]);
    printf("idle: workers used %.3f ms of CPU in 1 s\n", used * 1e3);
    /* 1% of one second across both workers */
    assert_true(used >= 0 && used < 0.010);
    sn_sched_destroy(&sched);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idle_scheduler_burns_no_cpu),
        cmocka_unit_test(wakeup_stress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

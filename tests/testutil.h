/* testutil.h - helpers shared by the scheduler tests: monotonic time, bounded
 * polling waits, and a "collector" that records one sn_spawn's on_result call. */
#ifndef SN_TESTUTIL_H
#define SN_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "schednode/schednode.h"

#define WAIT_MS 20000 /* bound on every wait: a hang fails, it does not block */

/* ---------------------------------------------------------------- time */

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The now_ns() value ms milliseconds from now. */
static inline uint64_t deadline_ns(int ms)
{
    return now_ns() + (uint64_t)ms * 1000000u;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls an atomic counter until it reaches want (bounded). */
static inline bool wait_count(atomic_int *v, int want, int ms)
{
    uint64_t end = deadline_ns(ms);
    while (atomic_load(v) < want) {
        if (now_ns() > end)
            return false;
        sleep_ms(1);
    }
    return true;
}

/* ----------------------------------------------------------- collector */

/* Result of one sn_spawn, filled by collector_on_result (its on_result). */
typedef struct collector {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    sn_pid_t pid;
    sn_status_t status;
    int error;
    sn_payload_t *result;
} collector_t;

static inline void collector_init(collector_t *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
}

static inline void collector_fini(collector_t *c)
{
    sn_payload_destroy(&c->result);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
}

/* The sn_result_fn to pass with a collector_t * as its arg. */
static inline void collector_on_result(sn_sched_t *sched, sn_pid_t pid, sn_status_t status, int error,
                                       sn_payload_t **result, void *arg)
{
    collector_t *c = arg;
    pthread_mutex_lock(&c->mu);
    c->calls++;
    c->pid = pid;
    c->status = status;
    c->error = error;
    sn_payload_destroy(&c->result);
    c->result = sn_take(result);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Waits (bounded) for the callback; true if it came. */
static inline bool collector_wait(collector_t *c, int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->mu);
    while (c->calls == 0)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT)
            break;
    bool ok = c->calls > 0;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static inline int collector_calls(collector_t *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->calls;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* The collected result as a u64 (asserts that it is one). */
static inline uint64_t result_u64(const collector_t *c)
{
    uint64_t v = UINT64_MAX;
    assert_non_null(c->result);
    assert_int_equal(sn_payload_get_u64(c->result, &v), 0);
    return v;
}

#endif

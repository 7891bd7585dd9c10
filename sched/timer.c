/* timer.c - the "sleep" command: one thread, a binary min-heap of
 * deadlines, a condition variable on CLOCK_MONOTONIC. It sleeps until the
 * earliest deadline (or forever with none), so idle timers cost no CPU.
 * A due entry completes its yield through the normal event path.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "grow.h"
#include "internal.h"

uint64_t sn__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void swap(sn__timer_entry_t *a, sn__timer_entry_t *b)
{
    sn__timer_entry_t t = *a;
    *a = *b;
    *b = t;
}

static void sift_up(sn__timer_t *t, size_t i)
{
    while (i > 0 && t->heap[(i - 1) / 2].deadline_ns > t->heap[i].deadline_ns) {
        swap(&t->heap[(i - 1) / 2], &t->heap[i]);
        i = (i - 1) / 2;
    }
}

static void sift_down(sn__timer_t *t, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < t->n && t->heap[l].deadline_ns < t->heap[m].deadline_ns)
            m = l;
        if (r < t->n && t->heap[r].deadline_ns < t->heap[m].deadline_ns)
            m = r;
        if (m == i)
            return;
        swap(&t->heap[m], &t->heap[i]);
        i = m;
    }
}

static void *timer_main(void *arg)
{
    sn_sched_t *sched = arg;
    sn__timer_t *t = &sched->timer;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        if (t->n == 0) {
            pthread_cond_wait(&t->cv, &t->mu);
            continue;
        }
        uint64_t now = sn__now_ns();
        if (t->heap[0].deadline_ns > now) {
            uint64_t d = t->heap[0].deadline_ns;
            struct timespec ts = {(time_t)(d / 1000000000u), (long)(d % 1000000000u)};
            pthread_cond_timedwait(&t->cv, &t->mu, &ts);
            continue;
        }
        sn__timer_entry_t e = t->heap[0];
        t->heap[0] = t->heap[--t->n];
        sift_down(t, 0);
        pthread_mutex_unlock(&t->mu);
        /* The process may be gone: its completion is then simply dropped. */
        (void)sn__deliver(sched, e.pid, SN_EV_YIELD_COMPLETE, 0, e.tag, SN_PID_NONE, NULL, true);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int sn__timer_start(sn_sched_t *sched)
{
    sn__timer_t *t = &sched->timer;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&t->mu, NULL);
    t->heap = NULL;
    t->n = t->cap = 0;
    t->stop = false;
    t->inited = true;
    if (pthread_create(&t->thread, NULL, timer_main, sched) != 0) {
        sn__timer_fini(sched);
        return SN_ENOMEM;
    }
    t->running = true;
    return 0;
}

void sn__timer_stop(sn_sched_t *sched)
{
    sn__timer_t *t = &sched->timer;
    if (!t->running)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    t->running = false;
}

void sn__timer_fini(sn_sched_t *sched)
{
    sn__timer_t *t = &sched->timer;
    if (!t->inited)
        return;
    free(t->heap);
    t->heap = NULL;
    t->n = t->cap = 0;
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    t->inited = false;
}

int sn__timer_add(sn_sched_t *sched, uint64_t ms, sn_pid_t pid, uint64_t tag)
{
    sn__timer_t *t = &sched->timer;
    if (ms > UINT64_MAX / 2000000u)
        ms = UINT64_MAX / 2000000u;
    uint64_t deadline = sn__now_ns() + ms * 1000000u;
    pthread_mutex_lock(&t->mu);
    if (t->stop) {
        pthread_mutex_unlock(&t->mu);
        return SN_ESHUTDOWN;
    }
    sn__timer_entry_t *h = sn__grow(t->heap, &t->cap, t->n, sizeof *h, 64, 0);
    if (!h) {
        pthread_mutex_unlock(&t->mu);
        return SN_ENOMEM;
    }
    t->heap = h;
    t->heap[t->n] = (sn__timer_entry_t){deadline, pid, tag};
    sift_up(t, t->n++);
    if (t->heap[0].deadline_ns == deadline)
        pthread_cond_signal(&t->cv); /* new earliest deadline */
    pthread_mutex_unlock(&t->mu);
    return 0;
}

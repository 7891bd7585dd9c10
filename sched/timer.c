/* timer.c - the "sleep" command: one thread, a binary min-heap of
 * deadlines, a condition variable on CLOCK_MONOTONIC. It sleeps until the
 * earliest deadline (or forever with none), so idle timers cost no CPU.
 * A due entry completes its yield through the normal event path.
 *
 * A sleep moves with its process (sn__timer_take, migrate.c): each
 * pending sleep of a process is, at every instant, in exactly one of
 * these places: an entry of this heap (guarded by mu); the timer thread's
 * hand (`firing`, from its pop under mu until its delivery returned and
 * it took mu again); a completion in the process's queue or a step's
 * input; a migrant's sleeps[] (taken out of the heap under mu by the
 * holder of the frozen process). sn__timer_take refuses while the entry
 * it would take is in the timer's hand, so a completion is delivered by
 * this node only for an entry it popped before the take: never for one
 * that moved (test_migrate sleeping_moves, sleepers_move_while_due). mu
 * orders the heap and `firing`; the frozen state (a CAS by the taker, in
 * migrate.c) orders the process's fields; the timer thread holds no lock
 * while it delivers, so the order shard lock, then mu, taken by a freeze
 * and an activation, is never reversed.
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
        t->firing = e.pid; /* in our hand until delivered: sn__timer_take waits for it */
        pthread_mutex_unlock(&t->mu);
        /* The process may be gone: its completion is then simply dropped. */
        (void)sn__deliver(sched, e.pid, SN_EV_YIELD_COMPLETE, 0, e.tag, SN_PID_NONE, NULL, true);
        pthread_mutex_lock(&t->mu);
        t->firing = SN_PID_NONE;
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
    t->firing = SN_PID_NONE;
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
    if (ms > UINT64_MAX / 2000000u)
        ms = UINT64_MAX / 2000000u;
    return sn__timer_add_at(sched, sn__now_ns() + ms * 1000000u, pid, tag);
}

int sn__timer_add_at(sn_sched_t *sched, uint64_t deadline, sn_pid_t pid, uint64_t tag)
{
    sn__timer_t *t = &sched->timer;
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

int sn__timer_take(sn_sched_t *sched, sn_pid_t pid, uint32_t want, sn_migrant_sleep_t *out, size_t max,
                   const char **why)
{
    sn__timer_t *t = &sched->timer;
    pthread_mutex_lock(&t->mu);
    if (sn_pid_eq(t->firing, pid)) { /* its completion is on its way: ask again soon */
        pthread_mutex_unlock(&t->mu);
        return SN__MOVE_BUSY;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++)
        k += sn_pid_eq(t->heap[i].pid, pid);
    /* every heap entry of pid is one of its pending yields: fewer entries
     * than yields, and one of them is no sleep (or a sleep's completion
     * not drained yet, which is no sleep any more) */
    if (k != want || k > max) {
        pthread_mutex_unlock(&t->mu);
        *why = k != want ? "a yield it waits on is no sleep (a command, a spawn, a child it awaits, a kill): it "
                           "cannot follow it"
                         : "it waits on more sleeps than a move carries";
        return SN_ENOTMOVABLE;
    }
    size_t j = 0;
    k = 0;
    for (size_t i = 0; i < t->n; i++) /* out of the heap; the rest kept, then made a heap again */
        if (sn_pid_eq(t->heap[i].pid, pid))
            out[k++] = (sn_migrant_sleep_t){t->heap[i].tag, t->heap[i].deadline_ns};
        else
            t->heap[j++] = t->heap[i];
    t->n = j;
    for (size_t i = j / 2; i-- > 0;)
        sift_down(t, i);
    /* (no signal: the earliest deadline can only be later, and the timer
     * thread, waking at the old one, waits again) */
    pthread_mutex_unlock(&t->mu);
    return 0;
}

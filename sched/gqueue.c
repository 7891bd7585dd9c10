/* gqueue.c - the global FIFO run queue: a growable ring behind a mutex.
 * Only submissions from outside the workers, CONTINUE requeues and batch
 * transfers go through it, so a lock is cheaper than it looks; `size`
 * lets idle workers check it without taking the lock.
 */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "internal.h"

int sn__gqueue_init(sn__gqueue_t *q)
{
    q->cap = 256;
    q->head = q->count = 0;
    q->ring = malloc(q->cap * sizeof *q->ring);
    if (!q->ring)
        return SN_ENOMEM;
    atomic_init(&q->size, 0);
    pthread_mutex_init(&q->mu, NULL);
    return 0;
}

void sn__gqueue_fini(sn__gqueue_t *q)
{
    free(q->ring);
    q->ring = NULL;
    pthread_mutex_destroy(&q->mu);
}

int sn__gqueue_push(sn__gqueue_t *q, void *item)
{
    pthread_mutex_lock(&q->mu);
    if (q->count == q->cap) {
        size_t old = q->cap; /* (a power of two, doubled: still one) */
        void **r = sn__grow(q->ring, &q->cap, q->count, sizeof *r, 256, 0);
        if (!r) {
            pthread_mutex_unlock(&q->mu);
            return SN_ENOMEM;
        }
        /* full, so the ring wrapped at head: what was before it goes after
         * the old end, where (head + i) & (cap - 1) now looks for it */
        memcpy(r + old, r, q->head * sizeof *r);
        q->ring = r;
    }
    q->ring[(q->head + q->count) & (q->cap - 1)] = item;
    q->count++;
    /* seq_cst: part of the Dekker pair with parking workers (worker.c) */
    atomic_store_explicit(&q->size, q->count, memory_order_seq_cst);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

size_t sn__gqueue_pop(sn__gqueue_t *q, void **out, size_t max)
{
    if (atomic_load_explicit(&q->size, memory_order_relaxed) == 0)
        return 0;
    pthread_mutex_lock(&q->mu);
    size_t n = q->count < max ? q->count : max;
    for (size_t i = 0; i < n; i++)
        out[i] = q->ring[(q->head + i) & (q->cap - 1)];
    q->head = (q->head + n) & (q->cap - 1);
    q->count -= n;
    atomic_store_explicit(&q->size, q->count, memory_order_relaxed);
    pthread_mutex_unlock(&q->mu);
    return n;
}

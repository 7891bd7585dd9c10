/* mpsc.c - intrusive MPSC queue (see mpsc.h).
 *
 * Invariant: the nodes from tail to head form a singly linked list in push
 * order, except that the last link written by a producer may still be
 * missing (its exchange on head is done, its store to prev->next not yet).
 * The stub node is re-pushed by the consumer whenever it would otherwise
 * have to pop the last real node, so tail always has a successor to move to.
 */
#include "mpsc.h"

void sn__mpsc_init(sn__mpsc_t *q)
{
    atomic_init(&q->stub.next, NULL);
    atomic_init(&q->head, &q->stub);
    q->tail = &q->stub;
}

void sn__mpsc_push(sn__mpsc_t *q, sn__mpsc_node_t *n)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    /* seq_cst: besides publishing n (with the link below), this RMW is the
     * producer's half of the wake protocol's store-buffering pair (see
     * go_to_sleep in worker.c) */
    sn__mpsc_node_t *prev = atomic_exchange_explicit(&q->head, n, memory_order_seq_cst);
    /* release: the consumer's acquire load of next sees n initialised */
    atomic_store_explicit(&prev->next, n, memory_order_release);
}

void sn__mpsc_push_chain(sn__mpsc_t *q, sn__mpsc_node_t *first, sn__mpsc_node_t *last)
{
    atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
    /* seq_cst, release: as in sn__mpsc_push. The links inside the chain
     * were stored before this release, so the consumer that acquires
     * first through prev->next sees them all. */
    sn__mpsc_node_t *prev = atomic_exchange_explicit(&q->head, last, memory_order_seq_cst);
    atomic_store_explicit(&prev->next, first, memory_order_release);
}

sn__mpsc_node_t *sn__mpsc_pop_slow(sn__mpsc_t *q)
{
    sn__mpsc_node_t *tail = q->tail;
    sn__mpsc_node_t *next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (tail == &q->stub) {
        if (!next)
            return NULL;
        q->tail = next;
        tail = next;
        next = atomic_load_explicit(&next->next, memory_order_acquire);
    }
    if (next) {
        q->tail = next;
        __builtin_prefetch(next); /* (as in sn__mpsc_pop) */
        return tail;
    }
    /* tail is the last linked node: pop it only if no push is in flight */
    sn__mpsc_node_t *head = atomic_load_explicit(&q->head, memory_order_acquire);
    if (tail != head)
        return NULL; /* a producer is between its exchange and its link */
    sn__mpsc_push(q, &q->stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (next) {
        q->tail = next;
        return tail;
    }
    return NULL;
}

bool sn__mpsc_maybe_nonempty(sn__mpsc_t *q)
{
    sn__mpsc_node_t *tail = q->tail;
    if (tail != &q->stub)
        return true;
    if (atomic_load_explicit(&tail->next, memory_order_seq_cst))
        return true;
    return atomic_load_explicit(&q->head, memory_order_seq_cst) != tail;
}

bool sn__mpsc_has_linked(sn__mpsc_t *q)
{
    sn__mpsc_node_t *tail = q->tail;
    if (tail != &q->stub)
        return true;
    return atomic_load_explicit(&tail->next, memory_order_seq_cst) != NULL;
}

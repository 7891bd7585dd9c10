/* mpsc.h - intrusive lock-free multi-producer single-consumer queue (after
 * Vyukov's node-based design): one per process, for its events.
 *
 * Producers: any thread (senders, command handlers, timers). Consumer: the
 * one worker currently running the process. A push is one atomic exchange;
 * a pop never blocks. Between a producer's exchange and its link store the
 * queue looks empty to the consumer ("in flight"): callers that must not
 * miss an event ask sn__mpsc_maybe_nonempty, which counts that case.
 */
#ifndef SN_MPSC_H
#define SN_MPSC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct sn__mpsc_node {
    _Atomic(struct sn__mpsc_node *) next;
} sn__mpsc_node_t;

typedef struct sn__mpsc {
    _Atomic(sn__mpsc_node_t *) head; /* producers exchange here */
    sn__mpsc_node_t *tail;           /* consumer-private */
    sn__mpsc_node_t stub;
} sn__mpsc_t;

void sn__mpsc_init(sn__mpsc_t *q);
/* Any thread. The node must not be in any queue. */
void sn__mpsc_push(sn__mpsc_t *q, sn__mpsc_node_t *n);
/* Any thread. Pushes first..last, already linked through their `next`
 * (last's is ignored), with one exchange: the consumer sees them in order,
 * after everything pushed before and before anything pushed after. */
void sn__mpsc_push_chain(sn__mpsc_t *q, sn__mpsc_node_t *first, sn__mpsc_node_t *last);
/* Consumer only. NULL when empty or when the next node is still in flight. */
sn__mpsc_node_t *sn__mpsc_pop_slow(sn__mpsc_t *q);
/* Inline: once per event. The common case, tail a real node with a
 * successor linked, takes it here; the stub and the last node go to
 * sn__mpsc_pop_slow. acquire: the producer's release store of next. */
static inline sn__mpsc_node_t *sn__mpsc_pop(sn__mpsc_t *q)
{
    sn__mpsc_node_t *tail = q->tail;
    if (tail != &q->stub) {
        sn__mpsc_node_t *next = atomic_load_explicit(&tail->next, memory_order_acquire);
        if (next) {
            q->tail = next;
            /* the next pop reads it: a producer on another core wrote it,
             * so start its line coming while the caller handles this one */
            __builtin_prefetch(next);
            return tail;
        }
    }
    return sn__mpsc_pop_slow(q);
}
/* sn__mpsc_pop with the consumer's position kept at *cur, outside the
 * queue (start it at q->tail; q->tail is stale until the caller writes
 * *cur back). A consumer popping a long run writes its own line per pop
 * then, not the one producers exchange `head` on: the relay's outbound
 * queue took a cache-line transfer each way per message (both ends on
 * one line: perf put half of a sending worker's relay hook on its first
 * locked op there). The slow path, near empty, works on q itself. */
static inline sn__mpsc_node_t *sn__mpsc_pop_at(sn__mpsc_t *q, sn__mpsc_node_t **cur)
{
    sn__mpsc_node_t *tail = *cur;
    if (tail != &q->stub) {
        sn__mpsc_node_t *next = atomic_load_explicit(&tail->next, memory_order_acquire);
        if (next) {
            *cur = next;
            __builtin_prefetch(next);
            return tail;
        }
    }
    q->tail = tail;
    sn__mpsc_node_t *n = sn__mpsc_pop_slow(q);
    *cur = q->tail;
    return n;
}
/* Consumer only. False only if the queue is certainly empty. */
bool sn__mpsc_maybe_nonempty(sn__mpsc_t *q);
/* Consumer only. True if a fully linked node is ready to pop... almost:
 * the last linked node cannot be popped while a later push is in flight,
 * so a pop may still briefly return NULL after this says true. */
bool sn__mpsc_has_linked(sn__mpsc_t *q);

#endif

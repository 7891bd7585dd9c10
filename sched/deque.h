/* deque.h - the per-worker Chase-Lev work-stealing deque.
 *
 * The owner pushes and pops at the bottom (LIFO); thieves take from the top
 * with one CAS, one item (sn__deque_steal) or half of the deque
 * (sn__deque_steal_half). Items are non-NULL pointers.
 */
#ifndef SN_DEQUE_H
#define SN_DEQUE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { SN__STEAL_EMPTY = 0, SN__STEAL_OK = 1, SN__STEAL_RETRY = 2 } sn__steal_t;

typedef struct sn__ring {
    int64_t mask;             /* capacity - 1 (capacity is a power of two) */
    struct sn__ring *retired; /* older rings, freed with the deque */
    _Atomic(void *) slots[];
} sn__ring_t;

typedef struct sn__deque {
    /* Written by thieves (CAS) and by the owner on its slow path. Low 32
     * bits: index of the oldest item; high 32 bits: a tag the owner bumps
     * to invalidate thieves holding a stale view (see deque.c). */
    alignas(64) _Atomic uint64_t top;
    /* Written by the owner only. */
    alignas(64) _Atomic int64_t bottom;
    _Atomic(sn__ring_t *) ring;
    int64_t hi; /* owner-private: max bottom since the tag last changed */
} sn__deque_t;

/* Indices restart at 0 past this mark (when the deque runs empty, or by
 * taking the items back if it never does), keeping them far from the
 * 32-bit limit of top's index. */
#define SN__DEQUE_REBASE_AT (INT64_C(1) << 30)

/* The most items one steal_half takes. */
#define SN__STEAL_MAX 64

int sn__deque_init(sn__deque_t *d, int64_t capacity);
void sn__deque_fini(sn__deque_t *d);
/* Owner only. Returns 0 or SN_ENOMEM. */
int sn__deque_push(sn__deque_t *d, void *item);
/* Owner only. NULL when empty. */
void *sn__deque_pop(sn__deque_t *d);
/* Any thread. */
sn__steal_t sn__deque_steal(sn__deque_t *d, void **out);
/* Any thread: takes up to half of d's items (at most max, <= SN__STEAL_MAX)
 * in one CAS, oldest first, into out[]; *n gets the count. */
sn__steal_t sn__deque_steal_half(sn__deque_t *d, void **out, int max, int *n);
/* Thief: steals half of `victim` into `dest` (which the caller owns) and
 * returns one item to run now, or NULL. *moved gets the number taken. */
void *sn__deque_steal_half_into(sn__deque_t *victim, sn__deque_t *dest, int *moved);
/* Approximate size (any thread). */
int64_t sn__deque_size(sn__deque_t *d);

#endif

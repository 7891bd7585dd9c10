/* deque.c - Chase-Lev work-stealing deque with a one-CAS steal-half.
 *
 * Follows the C11 recipe of Le, Pop, Cohen and Zappa Nardelli (PPoPP 2013),
 * with its known errata handled: the ring is reloaded after growth, slots
 * are atomics accessed relaxed, a thief reads its items before its CAS,
 * indices are signed, and retired rings are kept until the deque is freed
 * (a thief may still be reading one; capacities double, so the retired
 * rings together never exceed the live one).
 *
 * Steal-half needs one addition. With a LIFO owner, a thief that read
 * (top = t, bottom = b0) claims [t, t + ceil((b0 - t) / 2)) with one CAS on
 * top; meanwhile the owner may have popped below b0 without touching top
 * (the classic fast path), and both would take the same item. So:
 *   - top carries a 32-bit tag next to its 32-bit index. A thief's CAS
 *     compares both, so any tag change voids every claim in flight. (A
 *     stale claim could only succeed again if the tag wrapped, i.e. after
 *     2^32 owner slow paths during one thief's stall: minutes of a thread
 *     not running while its peer runs flat out.)
 *   - The owner tracks `hi`, the largest bottom since the tag last changed.
 *     Every thief holding the current tag read some bottom <= hi, so its
 *     claim ends at or before t + ceil((hi - t) / 2).
 *   - The owner pops index b without a CAS only when b is past that bound;
 *     otherwise it bumps the tag with a CAS (voiding stale claims) first.
 * A drain of the deque therefore costs O(log n) CASes, not one per pop.
 * Memory order: every access to top and bottom on the race paths is
 * seq_cst (the owner's store of bottom then load of top, against the
 * thief's load of top then bottom, form the Dekker pair the proof needs);
 * the push's release store of bottom publishes the slot (and the item's
 * contents) to thieves, whose loads of bottom acquire.
 */
#include "deque.h"

#include <stdlib.h>

#include "schednode/schednode.h"

#define IDX_BITS 32
#define IDX_MASK ((UINT64_C(1) << IDX_BITS) - 1)
#define REBASE_AT SN__DEQUE_REBASE_AT

static inline int64_t idx(uint64_t top)
{
    return (int64_t)(top & IDX_MASK);
}
static inline uint64_t tag(uint64_t top)
{
    return top >> IDX_BITS;
}
static inline uint64_t mk(uint64_t tg, int64_t i)
{
    return (tg << IDX_BITS) | ((uint64_t)i & IDX_MASK);
}

static sn__ring_t *ring_new(int64_t capacity)
{
    sn__ring_t *r = malloc(sizeof *r + (size_t)capacity * sizeof(r->slots[0]));
    if (!r)
        return NULL;
    r->mask = capacity - 1;
    r->retired = NULL;
    for (int64_t i = 0; i < capacity; i++)
        atomic_init(&r->slots[i], NULL);
    return r;
}

int sn__deque_init(sn__deque_t *d, int64_t capacity)
{
    int64_t cap = 16;
    while (cap < capacity)
        cap <<= 1;
    sn__ring_t *r = ring_new(cap);
    if (!r)
        return SN_ENOMEM;
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
    atomic_init(&d->ring, r);
    d->hi = 0;
    return 0;
}

void sn__deque_fini(sn__deque_t *d)
{
    sn__ring_t *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    while (r) {
        sn__ring_t *next = r->retired;
        free(r);
        r = next;
    }
    atomic_store_explicit(&d->ring, NULL, memory_order_relaxed);
}

/* Owner: double the ring, copying the live items [t, b). The old ring stays
 * readable (retired) because a thief may hold it. */
static sn__ring_t *grow(sn__deque_t *d, sn__ring_t *old, int64_t t, int64_t b)
{
    sn__ring_t *r = ring_new((old->mask + 1) * 2);
    if (!r)
        return NULL;
    for (int64_t i = t; i < b; i++)
        atomic_store_explicit(&r->slots[i & r->mask],
                              atomic_load_explicit(&old->slots[i & old->mask], memory_order_relaxed),
                              memory_order_relaxed);
    r->retired = old;
    /* release: a thief that loads this ring sees the copied slots */
    atomic_store_explicit(&d->ring, r, memory_order_release);
    return r;
}

static void rebase(sn__deque_t *d, uint64_t top);

/* Owner, the deque not empty but its indices past REBASE_AT: take every
 * item back (one CAS moving top to bottom, as a thief taking all would),
 * restart the indices at 0 and push the items again in order. Thieves see
 * an empty deque meanwhile; a stale claim fails on the tag. O(n), once per
 * 2^30 pushes without the deque ever running empty. */
static int reclaim(sn__deque_t *d)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    uint64_t top = atomic_load_explicit(&d->top, memory_order_seq_cst);
    for (;;) {
        int64_t t = idx(top);
        if (t >= b) { /* thieves emptied it */
            rebase(d, top);
            return 0;
        }
        void **items = malloc((size_t)(b - t) * sizeof *items);
        if (!items)
            return SN_ENOMEM;
        sn__ring_t *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
        for (int64_t i = t; i < b; i++)
            items[i - t] = atomic_load_explicit(&r->slots[i & r->mask], memory_order_relaxed);
        uint64_t all = mk(tag(top) + 1, b);
        if (atomic_compare_exchange_strong_explicit(&d->top, &top, all, memory_order_seq_cst, memory_order_seq_cst)) {
            rebase(d, all);
            for (int64_t i = 0; i < b - t; i++) {
                atomic_store_explicit(&r->slots[i & r->mask], items[i], memory_order_relaxed);
                atomic_store_explicit(&d->bottom, i + 1, memory_order_release);
            }
            d->hi = b - t;
            free(items);
            return 0;
        }
        free(items); /* a thief took some: look again */
    }
}

int sn__deque_push(sn__deque_t *d, void *item)
{
    if (atomic_load_explicit(&d->bottom, memory_order_relaxed) >= REBASE_AT && reclaim(d) != 0)
        return SN_ENOMEM;
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    /* acquire: pairs with thieves' CAS so slots they took are free to reuse */
    int64_t t = idx(atomic_load_explicit(&d->top, memory_order_acquire));
    sn__ring_t *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    if (b - t > r->mask) {
        r = grow(d, r, t, b); /* reload: the slot goes into the new ring */
        if (!r)
            return SN_ENOMEM;
    }
    atomic_store_explicit(&r->slots[b & r->mask], item, memory_order_relaxed);
    /* release: publishes the slot and the item's contents to thieves */
    atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
    if (b + 1 > d->hi)
        d->hi = b + 1;
    return 0;
}

/* Owner, deque empty with top == bottom (or every item taken back): restart
 * indices at 0. Thieves see top >= bottom (empty) in between; the tag bump
 * voids stale claims. */
static void rebase(sn__deque_t *d, uint64_t top)
{
    atomic_store_explicit(&d->bottom, 0, memory_order_seq_cst);
    atomic_store_explicit(&d->top, mk(tag(top) + 1, 0), memory_order_seq_cst);
    d->hi = 0;
}

void *sn__deque_pop(sn__deque_t *d)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
    sn__ring_t *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
    uint64_t top = atomic_load_explicit(&d->top, memory_order_seq_cst);
    /* Bounded: each retry follows a successful thief CAS that moved top up
     * towards b; after at most b - t of them the deque is empty. */
    for (;;) {
        int64_t t = idx(top);
        if (t < b) {
            /* Fast path: b lies beyond every claim a thief can hold. */
            if (b - t >= (d->hi - t + 1) / 2)
                return atomic_load_explicit(&r->slots[b & r->mask], memory_order_relaxed);
            /* Slow path: void stale claims, then b is ours. */
            if (atomic_compare_exchange_strong_explicit(&d->top, &top, mk(tag(top) + 1, t), memory_order_seq_cst,
                                                        memory_order_seq_cst)) {
                d->hi = b;
                return atomic_load_explicit(&r->slots[b & r->mask], memory_order_relaxed);
            }
            continue; /* a thief moved top; top was reloaded by the CAS */
        }
        if (t == b) {
            /* Last item: race thieves for it on top. */
            void *x = atomic_load_explicit(&r->slots[b & r->mask], memory_order_relaxed);
            uint64_t next = mk(tag(top) + 1, t + 1);
            int won = atomic_compare_exchange_strong_explicit(&d->top, &top, next, memory_order_seq_cst,
                                                              memory_order_seq_cst);
            atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
            d->hi = b + 1;
            return won ? x : NULL;
        }
        /* Empty (t == b + 1): restore bottom. */
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        return NULL;
    }
}

sn__steal_t sn__deque_steal_half(sn__deque_t *d, void **out, int max, int *n)
{
    *n = 0;
    uint64_t top = atomic_load_explicit(&d->top, memory_order_seq_cst);
    int64_t t = idx(top);
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    if (t >= b)
        return SN__STEAL_EMPTY;
    int64_t k = (b - t + 1) / 2;
    if (max > SN__STEAL_MAX)
        max = SN__STEAL_MAX;
    if (k > max)
        k = max;
    /* acquire: after our load of bottom, so a ring grown before that push
     * is the one we read (or a newer copy) */
    sn__ring_t *r = atomic_load_explicit(&d->ring, memory_order_acquire);
    for (int64_t i = 0; i < k; i++) /* read before the CAS (erratum) */
        out[i] = atomic_load_explicit(&r->slots[(t + i) & r->mask], memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&d->top, &top, mk(tag(top), t + k), memory_order_seq_cst,
                                                 memory_order_relaxed))
        return SN__STEAL_RETRY;
    *n = (int)k;
    return SN__STEAL_OK;
}

sn__steal_t sn__deque_steal(sn__deque_t *d, void **out)
{
    int n;
    return sn__deque_steal_half(d, out, 1, &n);
}

/* Owner: make room for `need` more items so pushes cannot fail. */
static int reserve(sn__deque_t *d, int64_t need)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    int64_t t = idx(atomic_load_explicit(&d->top, memory_order_acquire));
    sn__ring_t *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    while (b - t + need > r->mask + 1) {
        r = grow(d, r, t, b);
        if (!r)
            return SN_ENOMEM;
    }
    return 0;
}

void *sn__deque_steal_half_into(sn__deque_t *victim, sn__deque_t *dest, int *moved)
{
    void *items[SN__STEAL_MAX];
    int n = 0;
    *moved = 0;
    if (reserve(dest, SN__STEAL_MAX) != 0)
        return NULL; /* steal nothing rather than hold items we cannot queue */
    if (sn__deque_steal_half(victim, items, SN__STEAL_MAX, &n) != SN__STEAL_OK)
        return NULL;
    /* Run the newest now; queue the rest oldest first (cannot fail: reserved). */
    for (int i = 0; i < n - 1; i++)
        (void)sn__deque_push(dest, items[i]);
    *moved = n;
    return items[n - 1];
}

int64_t sn__deque_size(sn__deque_t *d)
{
    int64_t t = idx(atomic_load_explicit(&d->top, memory_order_seq_cst));
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    return b > t ? b - t : 0;
}

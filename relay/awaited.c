/* awaited.c - where this node's awaited children are when they run on
 * another node, so that a parent hears once, nodedown, if that node dies.
 *
 * A child spawned here with SN_YIELD_AWAIT or SN_YIELD_MONITOR (the
 * migrant's await_node is this node: the spawning node R) may be stolen,
 * and passed on from node to node. Its parent waits for exactly one
 * outcome: the child's result (RESULT, CHILD_DOWN) or, if the node holding
 * the child goes down, leaves or restarts, SN_ENODEDOWN. So R keeps one
 * record per such child away from it, naming the node holding it:
 *   - R hands it over (steal commit): R records it under the taker;
 *   - another node G hands it to T (T != R): G tells R (Send AWAITED: `to`
 *     the child, `from` the parent, `tag` T, `error` the move number);
 *     R moves the record to T if that move is newer than the record's (the
 *     notices of two moves come on different connections, in any order);
 *     a notice for a child with no record is old news (its outcome came,
 *     or it came back here) and is dropped;
 *   - it comes back to R (activated here): the record is dropped (its end
 *     is local from now on);
 *   - its RESULT or CHILD_DOWN reaches R's relay: the record is dropped;
 *   - the holder goes down (sn__await_peer_down; or it is down already
 *     when the news of the move comes): the parent gets its
 *     nodedown (the completion of the await, or the spawn's DOWN) and the
 *     record stays, *fired*, as a tombstone: the holder may only be frozen,
 *     and the child's real outcome, if it comes after all, is dropped here
 *     (the parent had its one outcome). A fired child that comes back here
 *     is installed unawaited. Tombstones follow the child's later moves
 *     and go when its outcome arrives or the run of their holder ends.
 * Limits (docs/guarantees.md): the outcome must pass through R's relay to
 * be seen, which it does while the parent stays on R (always for
 * SN_YIELD_AWAIT: a process with a yield pending never moves). A parent
 * not on R when the holder goes down (a SN_YIELD_MONITOR parent that moved
 * on, or one that ended) gets nothing from here: R cannot tell whether
 * its DOWN already reached it elsewhere. A node that dies between handing
 * the child on and its notice reaching R gives nodedown for a child that
 * lives on. A migrant without await_node (from a node built before it)
 * is not followed.
 *
 * Ownership: everything here belongs to the relay's I/O thread (steal.c,
 * inbound.c, peer.c call in from it); the table is private to this file.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "relay_int.h"
#include "awaited.h"
#include "sn_node.h"

#define FIRST_BUCKETS 256
#define AWAIT_DOWN 2 /* sn_migrant_t.awaited: as a DOWN (SN_YIELD_MONITOR); 1: as the completion */

typedef struct rec {
    struct rec *next;
    sn_pid_t child, parent;
    uint64_t tag;    /* the spawn's tag */
    uint32_t holder; /* the node holding the child, as far as we know */
    uint32_t moves;  /* the move that took it there */
    uint8_t kind;    /* sn_migrant_t.awaited: 1 (SN_YIELD_AWAIT) or AWAIT_DOWN */
    bool fired;      /* the parent got its nodedown: the real outcome is dropped */
} rec_t;

struct sn_awaits {
    rec_t **b;
    size_t nb, count;
};

static size_t bucket(const struct sn_awaits *a, sn_pid_t pid)
{
    uint64_t h = (pid.serial ^ ((uint64_t)pid.node << 40)) * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 20) & (a->nb - 1);
}

static rec_t **slot(struct sn_awaits *a, sn_pid_t child)
{
    if (!a || !a->count)
        return NULL;
    for (rec_t **e = &a->b[bucket(a, child)]; *e; e = &(*e)->next)
        if (sn_pid_eq((*e)->child, child))
            return e;
    return NULL;
}

static void unlink_rec(struct sn_awaits *a, rec_t **e)
{
    rec_t *x = *e;
    *e = x->next;
    free(x);
    a->count--;
}

/* Doubles the table when it is as full as it has buckets (never fails:
 * without memory for more buckets it only gets slower). */
static void grow(struct sn_awaits *a)
{
    size_t nb = a->nb ? a->nb * 2 : FIRST_BUCKETS;
    rec_t **b = calloc(nb, sizeof *b);
    if (!b)
        return;
    struct sn_awaits n = {b, nb, a->count};
    for (size_t i = 0; i < a->nb; i++)
        for (rec_t *x = a->b[i], *next; x; x = next) {
            next = x->next;
            size_t k = bucket(&n, x->child);
            x->next = b[k];
            b[k] = x;
        }
    free(a->b);
    *a = n;
}

static rec_t *add(sn_relay_t *r, sn_pid_t child)
{
    if (!r->awaits && !(r->awaits = calloc(1, sizeof *r->awaits)))
        return NULL;
    struct sn_awaits *a = r->awaits;
    if (a->count >= a->nb)
        grow(a);
    rec_t *x = a->nb ? calloc(1, sizeof *x) : NULL;
    if (!x)
        return NULL;
    size_t k = bucket(a, child);
    x->child = child;
    x->next = a->b[k];
    a->b[k] = x;
    a->count++;
    return x;
}

/* The parent hears SN_ENODEDOWN for x, once, if it is here to hear it
 * (see the limits at the top). */
static void fire(sn_relay_t *r, rec_t *x)
{
    x->fired = true;
    if (!sn__migrate_here(r->sched, x->parent)) {
        SNLOG_DEBUG(r, "child %" PRIu32 ".%" PRIu64 " lost with node %" PRIu32 ": its parent is not here",
                    x->child.node, x->child.serial, x->holder);
        return;
    }
    sn_payload_t *none = NULL;
    if (x->kind == AWAIT_DOWN)
        sn__send_child_down(r->sched, x->parent, x->child, x->tag, SN_ENODEDOWN, &none);
    else
        sn__send_result(r->sched, x->parent, x->child, x->tag, SN_ENODEDOWN, &none);
}

/* (A node not known here yet, one that joined a moment ago, is not down:
 * its going down, once we know it, fires the record.) */
static bool holder_down(sn_relay_t *r, uint32_t node)
{
    peer_t *p = sn__relay_find_peer(r, node);
    return p && atomic_load_explicit(&p->down, memory_order_relaxed);
}

/* Tells node `to` (not us) that child moved to `holder` by move `moves`. */
static void notify(sn_relay_t *r, uint32_t to, const sn_migrant_t *m, uint32_t holder)
{
    item_t *it = sn__relay_new_item();
    if (!it)
        return; /* (no memory: R answers for the node it last knew) */
    it->kind = ITEM_SEND;
    it->dest = to;
    it->diverted = false;
    it->forwarded = true; /* addressed to a node, not to where the child is (no location cache) */
    it->s = (sn_wire_send_t){m->pid, m->parent, holder, SN_WIRE_AWAITED, (int)(m->moves & INT32_MAX), NULL, 0, 0, 0, 0};
    sn__relay_enqueue(r, it);
}

void sn__await_departed(sn_relay_t *r, const sn_migrant_t *m, uint32_t taker)
{
    if (!m->awaited || !m->await_node)
        return; /* not awaited, or from a node that does not say where it was spawned */
    if (m->await_node != r->node) {
        if (taker != m->await_node) /* (one going back there is local to its parent's node again) */
            notify(r, m->await_node, m, taker);
        return;
    }
    rec_t **e = slot(r->awaits, m->pid);
    rec_t *x = e ? *e : add(r, m->pid);
    if (!x) {
        SNLOG_WARN(r, "out of memory: child %" PRIu32 ".%" PRIu64 " is not followed (no nodedown if its node dies)",
                   m->pid.node, m->pid.serial);
        return;
    }
    x->parent = m->parent;
    x->tag = m->await_tag;
    x->kind = m->awaited;
    x->holder = taker;
    x->moves = m->moves;
}

void sn__await_notice(sn_relay_t *r, const sn_wire_send_t *s)
{
    rec_t **e = slot(r->awaits, s->to);
    uint32_t moves = s->error > 0 ? (uint32_t)s->error : 0;
    if (!e || (*e)->moves >= moves || s->tag > UINT32_MAX)
        return; /* old news */
    rec_t *x = *e;
    x->holder = (uint32_t)s->tag;
    x->moves = moves;
    if (!x->fired && holder_down(r, x->holder)) /* it went to a node that is down by now */
        fire(r, x);
}

void sn__await_arrived(sn_relay_t *r, sn_pid_t child)
{
    rec_t **e = slot(r->awaits, child);
    if (e)
        unlink_rec(r->awaits, e);
}

bool sn__await_fired(sn_relay_t *r, sn_pid_t child)
{
    rec_t **e = slot(r->awaits, child);
    return e && (*e)->fired;
}

bool sn__await_outcome(sn_relay_t *r, sn_pid_t child)
{
    rec_t **e = slot(r->awaits, child);
    if (!e)
        return false;
    bool fired = (*e)->fired;
    if (fired)
        SNLOG_DEBUG(r, "child %" PRIu32 ".%" PRIu64 " ended on node %" PRIu32 " after its parent had nodedown: dropped",
                    child.node, child.serial, (*e)->holder);
    unlink_rec(r->awaits, e);
    return fired;
}

void sn__await_peer_down(sn_relay_t *r, uint32_t node, bool gone)
{
    struct sn_awaits *a = r->awaits;
    size_t fired = 0;
    for (size_t i = 0; a && a->count && i < a->nb; i++)
        for (rec_t **e = &a->b[i]; *e;) {
            rec_t *x = *e;
            if (x->holder != node) {
                e = &x->next;
                continue;
            }
            if (!x->fired) {
                fire(r, x);
                fired++;
            }
            if (gone) /* its run is over: no outcome can come from it */
                unlink_rec(a, e);
            else
                e = &x->next;
        }
    if (fired)
        SNLOG_INFO(r, "node %" PRIu32 " is down: %zu awaited children there reported as nodedown", node, fired);
}

void sn__await_fini(sn_relay_t *r)
{
    struct sn_awaits *a = r->awaits;
    if (!a)
        return;
    for (size_t i = 0; i < a->nb; i++)
        while (a->b[i])
            unlink_rec(a, &a->b[i]);
    free(a->b);
    free(a);
    r->awaits = NULL;
}

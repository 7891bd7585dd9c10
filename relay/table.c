/* table.c - the member table's slots (relay_int.h, top of the file):
 * chunks that never move, so that workers find a peer without a lock; a
 * slot of a forgotten member is emptied and reused; the I/O loop's lists
 * grow with the table. I/O thread, but for what relay_int.h says.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "relay_int.h"
#include "peer.h"

/* The I/O loop's lists, grown to hold `slots` slots each. */
static bool grow_lists(sn_relay_t *r, size_t slots)
{
    if (slots <= r->io_cap)
        return true;
    uint32_t **lists[] = {&r->io_look, &r->io_batch, &r->io_ack, &r->io_later, &r->io_scratch};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        uint32_t *l = realloc(*lists[i], slots * sizeof *l);
        if (!l)
            return false; /* (the ones grown stay grown: io_cap only says all have room) */
        *lists[i] = l;
    }
    r->io_cap = slots;
    return true;
}

peer_t *sn__relay_new_slot(sn_relay_t *r)
{
    if (r->nfree) /* (emptied by sn__relay_free_slot) */
        return sn__relay_peer(r, r->free_slots[--r->nfree]);
    size_t n = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    size_t c = n / SN_PEER_CHUNK;
    if (c >= SN_PEER_CHUNKS || !grow_lists(r, (c + 1) * SN_PEER_CHUNK))
        return NULL;
    if (!atomic_load_explicit(&r->chunks[c], memory_order_relaxed)) {
        peer_t *chunk = calloc(SN_PEER_CHUNK, sizeof *chunk);
        if (!chunk)
            return NULL;
        for (size_t i = 0; i < SN_PEER_CHUNK; i++)
            chunk[i].slot = (uint32_t)(c * SN_PEER_CHUNK + i);
        /* (published to workers by npeers' release: sn__relay_publish) */
        atomic_store_explicit(&r->chunks[c], chunk, memory_order_relaxed);
    }
    return sn__relay_peer(r, n);
}

void sn__relay_publish(sn_relay_t *r, peer_t *p, uint32_t node)
{
    /* release: the slot is complete before workers can find it */
    atomic_store_explicit(&p->node, node, memory_order_release);
    size_t n = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    if (p->slot >= n) /* a new slot (a reused one is within npeers already) */
        atomic_store_explicit(&r->npeers, (size_t)p->slot + 1, memory_order_release);
}

void sn__relay_slot_fini(sn_relay_t *r, peer_t *p)
{
    for (size_t k = 0; k < p->nbatch; k++)
        sn__relay_free_item(p->batch[k]);
    free(p->batch);
    if (p->pending)
        sn__relay_drop_buf(p->pending, p->pending_refs);
    for (size_t k = 0; k < p->nunacked; k++)
        sn__relay_drop_buf(p->unacked[k].buf, p->unacked[k].refs);
    free(p->unacked);
    free(p->waiters.pids);
    free(p->refusals);
    free(p->rx_buf);
    free(p->watch);
    for (size_t k = 0; k < p->nctl; k++)
        free(p->ctl[k].buf);
    free(p->ctl);
    free(p->types);
    if (p->dealer)
        sn__relay_set_dealer(r, p, NULL);
}

void sn__relay_free_slot(sn_relay_t *r, peer_t *p)
{
    uint32_t *f = sn__grow(r->free_slots, &r->capfree, r->nfree, sizeof *f, 16, 0);
    if (!f)
        return; /* (no memory: the slot stays a member's, forgotten later) */
    r->free_slots = f;
    sn__relay_let_go(r, &p->waiters); /* (any still held for it go on) */
    /* release: a worker that still finds it reads the atomics only */
    atomic_store_explicit(&p->node, 0, memory_order_release);
    sn__relay_slot_fini(r, p);
    atomic_store_explicit(&p->down, 1, memory_order_relaxed);
    atomic_store_explicit(&p->first_serial, 0, memory_order_relaxed);
    atomic_store_explicit(&p->full, 0, memory_order_relaxed);
    atomic_store_explicit(&p->m_msgs_in, 0, memory_order_relaxed);
    atomic_store_explicit(&p->m_msgs_out, 0, memory_order_relaxed);
    atomic_store_explicit(&p->m_steals_in, 0, memory_order_relaxed);
    atomic_store_explicit(&p->m_steals_out, 0, memory_order_relaxed);
    atomic_store_explicit(&p->m_rtt_ns, 0, memory_order_relaxed);
    /* the I/O thread's part, whole (no other thread reads it) */
    memset(&p->down_ns, 0, sizeof *p - offsetof(peer_t, down_ns));
    r->free_slots[r->nfree++] = p->slot;
}

void sn__relay_table_fini(sn_relay_t *r)
{
    SN__FOR_PEERS(r, p)
    {
        sn__relay_slot_fini(r, p);
    }
    for (size_t c = 0; c < SN_PEER_CHUNKS; c++)
        free(atomic_load_explicit(&r->chunks[c], memory_order_relaxed));
    free(r->free_slots);
    free(r->join_news);
    free(r->io_look);
    free(r->io_batch);
    free(r->io_ack);
    free(r->io_later);
    free(r->io_scratch);
    free(r->held_waiters.pids);
}

/* watch.c - the remote monitors of this node's processes, each recorded
 * under the peer that holds it (peer_t.watch), so that when that peer
 * goes down, leaves or restarts the watcher still gets its one DOWN.
 *
 * A monitor of a process on another node is recorded under the node the
 * request went to (route.c): the process's home, or the node this node's
 * location cache named. The node that holds the monitor says so (WATCHED:
 * inbound.c) and the record moves under it, confirmed. When a peer goes,
 * a confirmed record, or one under the process's home, gives nodedown: the
 * process may have gone with it. An unconfirmed one went there on a cache
 * that may be stale (the process had moved on, and the peer died before it
 * passed the request on), so it goes to the home again (monitor_again).
 *
 * A record answers one DOWN, and it is found by the peer that holds it:
 * a DOWN from the process searches every peer (the record may have moved
 * under the node that sent it), but a request that bounces back from a
 * peer (sn__watch_bounced: it could not go on, or that peer went with it
 * unacknowledged) takes only a record still under that peer. One that
 * moved on (WATCHED from elsewhere, or monitor_again) is another's to
 * answer: taking it would give the watcher a false nodedown, and a second
 * DOWN once monitor_again has sent the request home (tests/chaos.sh
 * checks one DOWN per monitor: down-twice).
 * I/O thread only.
 */
#include <inttypes.h>

#include "grow.h"
#include "relay_int.h"
#include "peer.h"
#include "watch.h"

bool sn__watch(peer_t *p, sn_pid_t target, sn_pid_t watcher, uint64_t tag, bool on)
{
    if (!on) {
        for (size_t i = 0; i < p->nwatch; i++)
            if (sn_pid_eq(p->watch[i].target, target) && sn_pid_eq(p->watch[i].watcher, watcher) &&
                p->watch[i].tag == tag) {
                p->watch[i] = p->watch[--p->nwatch];
                return true;
            }
        return false;
    }
    watch_t *w = sn__grow(p->watch, &p->capwatch, p->nwatch, sizeof *w, 16, 0);
    if (!w)
        return false; /* out of memory: its node's failure will not be reported to this watcher */
    p->watch = w;
    p->watch[p->nwatch++] = (watch_t){target, watcher, tag, false};
    return true;
}

bool sn__watch_confirm(peer_t *p, sn_pid_t target, sn_pid_t watcher, uint64_t tag)
{
    for (size_t i = 0; i < p->nwatch; i++)
        if (sn_pid_eq(p->watch[i].target, target) && sn_pid_eq(p->watch[i].watcher, watcher) &&
            p->watch[i].tag == tag) {
            p->watch[i].confirmed = true;
            return true;
        }
    return false;
}

/* A monitor that p, going, never confirmed goes to the process's home
 * again, if that is up (the home knows where the process went last), and
 * its record with it, at once, so that no DOWN in between finds none. A
 * DOWN of the first request, should it come after all, takes the record
 * and the second one's is then dropped (inbound.c): a monitor still gets
 * exactly one. */
static bool monitor_again(sn_relay_t *r, const peer_t *p, const watch_t *w)
{
    /* (a watcher on another node: a record made here when the process left
     * with the monitor, sn__migrate_commit; the watcher's node has its own
     * record, and our nodedown is dropped there if that one was answered.
     * Sent home again, the request would go round to the watcher's node
     * and make a second record there, and a second DOWN: tests/chaos.sh,
     * down-twice) */
    if (w->confirmed || w->watcher.node != r->node || w->target.node == p->node || w->target.node == r->node ||
        atomic_load_explicit(&r->out, memory_order_relaxed))
        return false;
    peer_t *home = sn__relay_find_peer(r, w->target.node);
    if (!home || atomic_load_explicit(&home->down, memory_order_relaxed) ||
        w->target.serial < atomic_load_explicit(&home->first_serial, memory_order_relaxed))
        return false;
    item_t *it = sn__relay_send_item(
        home->node, false, false,
        (sn_wire_send_t){.to = w->target,
                         .from = w->watcher,
                         .tag = w->tag,
                         .kind = SN_RELAY_MONITOR,
                         .id = atomic_fetch_add_explicit(&r->next_send_id, 1, memory_order_relaxed)},
        NULL);
    if (!it)
        return false;
    if (!sn__watch(home, w->target, w->watcher, w->tag, true)) {
        sn__relay_free_item(it);
        return false;
    }
    SNLOG_DEBUG(
        r, "node %" PRIu32 " went down before it confirmed a monitor of %" PRIu32 ".%" PRIu64 ": asked its home again",
        p->node, w->target.node, w->target.serial);
    sn__relay_batch_add(r, home, it); /* (sent at the end of this turn of the I/O loop at the latest) */
    return true;
}

void sn__relay_watches_lost(sn_relay_t *r, peer_t *p)
{
    for (size_t i = 0; i < p->nwatch; i++)
        if (!monitor_again(r, p, &p->watch[i]))
            sn__send_down(r->sched, p->watch[i].watcher, p->watch[i].target, p->watch[i].tag, SN_ENODEDOWN, NULL);
    p->nwatch = 0;
}

/* Drops this node's record of watcher's monitor of target, under
 * whichever peer it is; false if there was none. */
bool sn__relay_unwatch(sn_relay_t *r, sn_pid_t target, sn_pid_t watcher, uint64_t tag)
{
    SN__FOR_PEERS(r, p)
    {
        if (sn__watch(p, target, watcher, tag, false))
            return true;
    }
    return false;
}

/* The same, under peer `at` only (0: any peer). */
static bool unwatch_at(sn_relay_t *r, uint32_t at, sn_pid_t target, sn_pid_t watcher, uint64_t tag)
{
    if (!at)
        return sn__relay_unwatch(r, target, watcher, tag);
    peer_t *p = sn__relay_find_peer(r, at);
    return p && sn__watch(p, target, watcher, tag, false);
}

/* Our own monitor request s, come back here (its path led through this
 * node again, or round past the hop bound): its record is done with. None
 * means the monitor was answered already (a DOWN took the record: the
 * request monitor_again sent home comes back after the first request's
 * DOWN came) or demonitored, and the request is dropped: going on, it
 * would make a new record, and a second DOWN for it. */
bool sn__watch_returned(sn_relay_t *r, const sn_wire_send_t *s)
{
    return sn__relay_unwatch(r, s->to, s->from, s->tag);
}

bool sn__watch_bounced(sn_relay_t *r, const sn_wire_send_t *s, int error, uint32_t at)
{
    if (!unwatch_at(r, at, s->to, s->from, s->tag))
        return false;
    sn__send_down(r->sched, s->from, s->to, s->tag, error, NULL);
    return true;
}

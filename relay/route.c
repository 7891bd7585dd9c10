/* route.c - the worker side of the relay, and where a send goes.
 *
 * Workers call the scheduler's relay hook (sn__relay_deliver): it only
 * allocates an item, pushes it on r->outq (a lock-free MPSC queue) and, if
 * the I/O thread has not been told yet, writes its eventfd. The I/O thread
 * drains the queue (sn__relay_drain) and routes each item (sn__relay_route:
 * to a peer's batch, here, or back to its sender with an error). Errors go
 * back to senders through here too (sn__relay_return_error,
 * sn__relay_bounce_local). Everything but the hook and sn__relay_enqueue /
 * sn__relay_poke runs on the I/O thread (the holder of io_mu).
 *
 * Sends of a run, sent by the worker (relay_flush): a worker that sends a
 * few messages in a run of a process (a request, an answer) holds back the
 * eventfd write and, when the run ends, takes io_mu if it is free (the I/O
 * thread sleeps) and drains the queue itself: its sends reach zmq_send
 * without a wake-up of the I/O thread (a hand-off per message each way of
 * a round trip: schedbench xnode-rtt --breakdown). A run that sends more
 * than HOLD_MAX tells the I/O thread at once, as a sender outside a run
 * does (a bulk of sends is gathered into frames there while the worker
 * goes on).
 * Invariant: an item pushed without the eventfd protocol (held) belongs to
 * its worker's pending flush, which either drains the queue under io_mu
 * (past that item: a drain that stopped short says so) or pokes the I/O
 * thread; so no item waits in the queue with nobody told.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay_int.h"
#include "move.h"
#include "peer.h"
#include "watch.h"
#include "manage.h"
#include "steal.h"
#include "locate.h"

#define DRAIN_BUDGET 65536 /* queue items per loop turn, then serve inbound */
/* Nodes a send may pass through: a path longer than this loops (a chain of
 * forwarding entries broken by a node that restarted, sent home and back
 * out): the send comes back to its sender as unreachable. A real path is a
 * handful of hops (home, the nodes it moved through since a sender last
 * heard where it is). */
#define MAX_HOPS 16
#define HOLD_MAX 8 /* sends of one run a worker sends itself (see the top) */

/* This worker thread's sends held back in the current run: the relay
 * (one per scheduler) and how many (HOLD_MAX + 1: the I/O thread was told). */
static _Thread_local struct {
    sn_relay_t *r;
    unsigned n;
} held;

/* This thread's block of send ids (r->next_send_id, ID_BLOCK at a time:
 * one locked operation per ID_BLOCK sends, not one each) and its pushes
 * not yet added to r->enqueued (added every ENQ_BATCH, and at the end of
 * each run: relay_flush). Keyed by the relay's serial, not its address: a
 * relay made where an ended one was must not take that one's ids. Ids stay
 * unique per node; they increase per thread, not across threads (nothing
 * orders by them: error_repeat and the flushes only compare them). */
#define ID_BLOCK 256
#define ENQ_BATCH 64
static _Thread_local struct {
    uint64_t serial; /* the relay's (0: none) */
    uint64_t next, end;
    uint64_t enq; /* pushes not yet counted */
    sn_relay_t *r;
} mine;

static void mine_for(sn_relay_t *r)
{
    if (mine.serial == r->serial)
        return;
    if (mine.enq && mine.r) /* (another relay's: it may have ended; counted in ENQ_BATCH at most, as a stat) */
        mine.enq = 0;
    mine.serial = r->serial;
    mine.r = r;
    mine.next = mine.end = 0;
}

static uint64_t new_send_id(sn_relay_t *r)
{
    mine_for(r);
    if (mine.next == mine.end) {
        mine.next = atomic_fetch_add_explicit(&r->next_send_id, ID_BLOCK, memory_order_relaxed);
        mine.end = mine.next + ID_BLOCK;
    }
    return mine.next++;
}

/* Counts a push on r's outbound queue (see `mine`). */
static void count_push(sn_relay_t *r)
{
    mine_for(r);
    if (++mine.enq == ENQ_BATCH) {
        atomic_fetch_add_explicit(&r->enqueued, mine.enq, memory_order_relaxed);
        mine.enq = 0;
    }
}

static void count_pushes_now(sn_relay_t *r)
{
    if (mine.serial == r->serial && mine.enq) {
        atomic_fetch_add_explicit(&r->enqueued, mine.enq, memory_order_relaxed);
        mine.enq = 0;
    }
}

/* Tells the I/O thread (writes its eventfd) unless it was told already.
 * The seq_cst load first spares the locked exchange while the flag is
 * set, as it is through a burst of sends: it is the second half of the
 * store-buffering pair as the exchange was (the caller's push, a seq_cst
 * exchange, comes before it; the I/O thread clears the flag, seq_cst,
 * before it looks at the queue): a load that still reads 1 reads it
 * before that clear, so the I/O thread's look comes after our push. */
static void tell(sn_relay_t *r)
{
    if (!atomic_load_explicit(&r->signaled, memory_order_seq_cst) &&
        !atomic_exchange_explicit(&r->signaled, 1, memory_order_seq_cst)) {
        uint64_t one = 1;
        ssize_t n = write(r->efd, &one, sizeof one);
        (void)n; /* an eventfd write only fails at 2^64-1 pending */
    }
}

void sn__relay_poke(sn_relay_t *r)
{
    /* seq_cst: the same store-buffering pair as enqueue below */
    if (!atomic_exchange_explicit(&r->signaled, 1, memory_order_seq_cst)) {
        uint64_t one = 1;
        ssize_t n = write(r->efd, &one, sizeof one);
        (void)n;
    }
}

void sn__relay_enqueue(sn_relay_t *r, item_t *it)
{
    atomic_fetch_add_explicit(&r->enqueued, 1, memory_order_relaxed);
    sn__mpsc_push(&r->outq, &it->link);
    /* seq_cst: pairs with the I/O thread's clear of `signaled` before it
     * drains (a store-buffering pair): either it sees our item, or we see
     * the flag clear and write the eventfd */
    tell(r);
}

/* Set by the I/O thread while it hands the scheduler a send that came
 * from another node: whatever the scheduler passes on from there is a
 * forward (item_t.forwarded). Thread-local, so workers never see it set. */
static _Thread_local bool passing_on;
static _Thread_local uint32_t passing_hops; /* the hops of the send being passed on */
static _Thread_local sn_pid_t passing_to;   /* and its target */
/* The id of the send being passed on or returned (see error_repeat): what
 * the scheduler sends from here on its behalf (the send itself, or its
 * error back to its sender) keeps it; 0: a new send gets a new id. */
static _Thread_local uint64_t carry_id;

void sn__relay_pass_begin(const sn_wire_send_t *s, sn_passing_t *saved)
{
    *saved = (sn_passing_t){passing_on, passing_hops, carry_id, passing_to};
    passing_on = true;
    passing_hops = s->hops;
    passing_to = s->to;
    carry_id = s->id;
}

void sn__relay_pass_end(const sn_passing_t *saved)
{
    passing_on = saved->on;
    passing_hops = saved->hops;
    passing_to = saved->to;
    carry_id = saved->id;
}

int sn__relay_deliver(void *arg, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error, uint32_t via,
                      sn_payload_t **msg)
{
    sn_relay_t *r = arg;
    peer_t *p = via == r->node ? NULL : sn__relay_find_peer(r, via ? via : to.node);
    if (p && via && kind == SN_RELAY_MONITOR && !passing_on && atomic_load_explicit(&p->down, memory_order_acquire)) {
        /* a monitor set here for a process that moved on from here to a
         * node that is down: its home may know it went on (monitor_via_home) */
        peer_t *home = to.node == r->node ? NULL : sn__relay_find_peer(r, to.node);
        if (home && !atomic_load_explicit(&home->down, memory_order_acquire)) {
            p = home;
            via = 0;
        }
    }
    if (!p && via != r->node) /* (via == this node: a message for a process settling here, locate.c) */
        return SN_EUNREACHABLE;
    /* A message to a node that is down, or to a process of an earlier run
     * of it, goes through the queue all the same: route bounces it behind
     * the sends that node took with it (the bounce queue, peer.c), which
     * may still be going back to their senders, so a sender sees its
     * errors in the order it sent. Failing it here, at once, overtook them
     * (faults.sh: sends 34000-34169 came back, then 1442000, then the rest). */
    if (p && !passing_on && msg && *msg && (*msg)->len > r->max_msg)
        return SN_ETOOBIG; /* (its payload stays the sender's: it comes back with the error) */
    bool message = kind == SN_EV_MESSAGE;
    if (p && !message && atomic_load_explicit(&p->down, memory_order_acquire))
        return SN_ENODEDOWN;
    sn_wire_send_t s = {.to = to,
                        .from = from,
                        .tag = tag,
                        .kind = kind,
                        .error = error,
                        /* the send itself, on towards its target, counts
                         * one more node; an answer to it (an error back,
                         * a DOWN) starts a path of its own, so one that
                         * came round too often (MAX_HOPS) does not take
                         * its answer with it (test_relay_edges
                         * looped_send_returns) */
                        .hops = passing_on && sn_pid_eq(to, passing_to) ? passing_hops + 1 : 0,
                        .id = carry_id ? carry_id : new_send_id(r),
                        /* timed from here to the receiver's delivery (metrics): a
                         * process's own send, not one passing through */
                        .handed_ns = !passing_on && sn__relay_for_process(kind) ? sn__relay_now_ns() : 0};
    item_t *it = sn__relay_send_item(via ? via : to.node, via == r->node, passing_on, s, msg);
    if (!it)
        return SN_ENOMEM;
    if (kind == SN_RELAY_GONE) { /* bookkeeping, in no hurry: it rides with the next wake-up (see the loop) */
        atomic_fetch_add_explicit(&r->enqueued, 1, memory_order_relaxed);
        sn__mpsc_push(&r->outq, &it->link);
    } else if (passing_on && sn__relay_on_io_thread(r)) {
        /* The I/O thread passes on a send it has in hand: one from
         * another node, or one a flush held and now lets go (locate.c:
         * finish) for a process that is not here. It goes now, not to the
         * back of the queue: whatever waits there is newer than it (the
         * thread drained everything older before it took this in hand),
         * and a send of the same sender there must not overtake it. */
        sn__relay_route(r, it);
    } else if (held.n < HOLD_MAX && (!held.r || held.r == r) && sn__worker_running()) {
        held.r = r; /* relay_flush sends it when the run ends */
        held.n++;
        count_push(r);
        sn__mpsc_push(&r->outq, &it->link);
    } else if (held.r == r) {  /* a worker's run, past HOLD_MAX: relay_flush counts what is left */
        held.n = HOLD_MAX + 1; /* told now: what it held goes with this */
        count_push(r);
        sn__mpsc_push(&r->outq, &it->link);
        tell(r); /* (seq_cst: as in sn__relay_enqueue) */
    } else {
        sn__relay_enqueue(r, it);
    }
    return 0;
}

/* The scheduler's `flush` hook (a worker, after a run): sends what the run
 * held back (see the top of this file). */
static void relay_flush(void *arg)
{
    sn_relay_t *r = arg;
    if (held.r != r)
        return;
    count_pushes_now(r);
    bool told = held.n > HOLD_MAX;
    held.r = NULL;
    held.n = 0;
    if (told)
        return;
    if (sn__relay_on_io_thread(r)) {
        /* the I/O thread itself, running a process as the scheduler's
         * guest (inbound.c): it holds io_mu; the peers it sends on are
         * looked at in its next turn, which it takes without sleeping */
        if (sn__relay_drain(r))
            sn__relay_poke(r);
        return;
    }
    if (pthread_mutex_trylock(&r->io_mu) == 0) {
        /* A drain may stop short of our items, at one another worker is
         * still linking in front of them: that worker tells (its own
         * flush, or the eventfd), and its drain goes past ours. */
        bool look = sn__relay_drain_here(r);
        pthread_mutex_unlock(&r->io_mu);
        if (!look)
            return;
    }
    sn__relay_poke(r); /* the I/O thread is busy, or must look */
}

/* The scheduler's `loaded` hook (any thread): work piles up here after a
 * heartbeat said there was none; members.c sends the next one early. */
static void relay_loaded(void *arg)
{
    sn_relay_t *r = arg;
    atomic_store_explicit(&r->load_news, 1, memory_order_release);
    sn__relay_poke(r);
}

/* Returns a send to the process that made it: on this node, or on the
 * node it moved to since, or (a message we were passing on for another
 * node's process) back to its node. */
/* The errors returned to senders on this node, by send id: a send gets
 * one nodedown at most, and after a nodedown at most one other error (its
 * fate: noproc from the node it reached after all). Acknowledgements are
 * per hop: the node a send was passing through may stop answering after it
 * passed the send on (nodedown from the hop before it), and the next node
 * may return it too (nodedown again when its own next hop fails, noproc,
 * unreachable); only the first nodedown and the fate reach the sender.
 * Direct-mapped (a slot keeps the last id that hashed to it): a repeat
 * whose record was overwritten by 65,536 later errors gets through; a
 * recorded one never does. I/O thread only. */
#define ERR_SLOTS_LOG2 16
struct err_slot {
    uint64_t id;
    int said; /* 1: nodedown was returned, 2: its fate was */
};

/* Whether the error `error` for send `id` was returned here already
 * (drop it); with `say`, records that it is returned now. */
static bool error_repeat(sn_relay_t *r, uint64_t id, int error, bool say)
{
    if (!id)
        return false;
    if (!r->errs && !(r->errs = calloc((size_t)1 << ERR_SLOTS_LOG2, sizeof *r->errs)))
        return false; /* (no memory: every error goes back) */
    struct err_slot *e = &r->errs[(id * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - ERR_SLOTS_LOG2)];
    bool known = e->id == id;
    if (known && (e->said == 2 || error == SN_ENODEDOWN)) {
        if (say) {
            r->errors_repeated++;
            SNLOG_DEBUG(r, "send %" PRIx64 " came back once more (%s): not returned again", id, sn_strerror(error));
        }
        return true;
    }
    if (say) {
        e->id = id;
        e->said = error == SN_ENODEDOWN ? 1 : 2;
    }
    return false;
}

/* Returns an error to the sender of s: here, or on its node. */
void sn__relay_return_error(sn_relay_t *r, sn_wire_send_t *s, sn_pid_t sender, sn_pid_t target, int error)
{
    if (error_repeat(r, s->id, error, false)) { /* (a sender here got it already) */
        error_repeat(r, s->id, error, true);
        return;
    }
    if (sn__send_failed(r->sched, sender, target, s->tag, error, &s->payload) == 0) {
        error_repeat(r, s->id, error, true);
        return;
    }
    /* a sender that moved on from here, or one of another node whose
     * message we forwarded: on to it, with the send's id */
    uint32_t via = sn__migrate_forward_of(r->sched, sender);
    if (via || sender.node != r->node) {
        uint64_t was = carry_id;
        carry_id = s->id;
        int rc = sn__relay_deliver(r, sender, target, s->tag, SN_EV_YIELD_COMPLETE, error, via, &s->payload);
        carry_id = was;
        if (rc != 0)
            SNLOG_WARN(r,
                       "cannot return an undelivered message to %" PRIu32 ".%" PRIu64 ": its node is down or unknown",
                       sender.node, sender.serial);
    }
}

/* s could not go on from here (to node `at`, if it got that far): its
 * sender hears (a message), its watcher (a monitor), the node that started
 * it (a FLUSH that cannot reach the node after `at`: locate.c). */
void sn__relay_bounce_local(sn_relay_t *r, sn_wire_send_t *s, int error, uint32_t at)
{
    sn__add(&r->bounced, 1);
    if (s->kind == SN_EV_MESSAGE && !sn_pid_is_none(s->from))
        sn__relay_return_error(r, s, s->from, s->to, error);
    if (s->kind == SN_WIRE_FLUSH && error == SN_ENODEDOWN && at)
        sn__loc_flush_stuck(r, s, at);
    if (s->kind == SN_WIRE_REDIRECT && error == SN_ENODEDOWN && at && at == s->to.node && s->error > 0)
        sn__loc_notice_lost(r, s->to, (uint32_t)s->error); /* an arrival notice to a home that is down */
    /* a monitor request that fails is answered from the watch table of
     * the peer it was going to (`at`), or by route when it never got that
     * far; one we were passing on for a watcher on another node is
     * answered here. Only that peer's: the record may have moved on since
     * the request left (WATCHED from the node that holds the monitor, or
     * watch.c's monitor_again when `at` went down), and then it is not
     * this request's to answer (a peer that goes answers its own records
     * before its frames bounce: sn__relay_bounce_peer) */
    if (s->kind == SN_RELAY_MONITOR) {
        if (s->from.node != r->node)
            sn__relay_deliver(r, s->from, s->to, s->tag, SN_EV_DOWN, error, 0, NULL);
        else
            sn__watch_bounced(r, s, error, at); /* (none: not recorded, or answered) */
    }
    sn_payload_destroy(&s->payload);
}

/* Returns true if it stopped on the budget (more may be queued). */
bool sn__relay_drain(sn_relay_t *r)
{
    size_t done = 0;
    bool more = false;
    uint64_t until = 0; /* the end of this turn's slice (relay_int.h), from the first check */
    sn__mpsc_node_t *n;
    if (r->drain_depth++ == 0)
        r->outq_cur = r->outq.tail;
    while (!more && (n = sn__mpsc_pop_at(&r->outq, &r->outq_cur))) {
        item_t *it = (item_t *)n;
        if (it->kind == ITEM_REPLY) {
            reply_item_t *ri = (reply_item_t *)it;
            sn__relay_send_reply(r, ri->ident, ri->ident_len, &ri->rep);
            sn__relay_free_item(it);
        } else if (it->kind == ITEM_MOVE) {
            move_item_t *mi = (move_item_t *)it;
            sn__move_start(r, mi->pid, mi->node, mi->timeout_ms, mi->done, mi->arg);
            free(mi);
        } else {
            if (r->hop_trace)
                sn__hop_stamp(it->s.payload, 0); /* the relay thread picked it up */
            sn__relay_route(r, it);
        }
        more = ++done == DRAIN_BUDGET || (done % SN_TURN_CHECK == 0 && sn__relay_slice_over(&until));
    }
    if (r->outq.tail != r->outq_cur)
        r->outq.tail = r->outq_cur; /* (once per drain: see relay_int.h) */
    r->drain_depth--;
    if (done) /* (the only writer: a load and a store) */
        atomic_store_explicit(&r->drained, atomic_load_explicit(&r->drained, memory_order_relaxed) + done,
                              memory_order_relaxed);
    for (size_t i = 0; i < r->nio_batch; i++) { /* the peers that got sends: each batch goes */
        peer_t *p = sn__relay_peer(r, r->io_batch[i]);
        p->io_batch = false;
        sn__relay_flush_peer(r, p);
    }
    r->nio_batch = 0;
    return more;
}

/* A send that passed through too many nodes (MAX_HOPS): logged at most
 * once a second, with the count of the quiet ones. */
static void bad_route(sn_relay_t *r, const sn_wire_send_t *s)
{
    char more[64];
    if (sn__log_limit(&r->route_log, sn__relay_now_ns(), 1000000000u, more, sizeof more))
        SNLOG_WARN(r,
                   "a send to %" PRIu32 ".%" PRIu64 " passed through %" PRIu32
                   " nodes: its path loops, it goes back to its sender as unreachable%s",
                   s->to.node, s->to.serial, s->hops, more);
}

/* A monitor from here whose path (this node's location cache) leads to a
 * node that is down goes to the process's home instead, if that is up: the
 * home knows where the process went last (move numbers), and it may well
 * live on elsewhere; the cache may only be stale. (Sends keep the old
 * path, for order; a monitor has no order to keep.) */
static bool monitor_via_home(sn_relay_t *r, item_t *it)
{
    if (it->s.kind != SN_RELAY_MONITOR || it->forwarded || it->s.from.node != r->node || it->s.to.node == r->node)
        return false;
    peer_t *home = sn__relay_find_peer(r, it->s.to.node);
    if (!home || atomic_load_explicit(&home->down, memory_order_relaxed))
        return false;
    it->dest = it->s.to.node;
    return true;
}

void sn__relay_route(sn_relay_t *r, item_t *it)
{
    int how = sn__loc_route(r, it);
    if (how == SN_LOC_HELD)
        return; /* held until a flush ends (locate.c) */
    if (how == SN_LOC_DOWN && monitor_via_home(r, it))
        how = SN_LOC_SEND;
    if (how == SN_LOC_DOWN) { /* its path goes through a node that is down: not another one (order) */
        if (it->s.kind == SN_RELAY_MONITOR && it->s.from.node == r->node) /* (bounce_local answers one passing on) */
            sn__send_down(r->sched, it->s.from, it->s.to, it->s.tag, SN_ENODEDOWN, NULL);
        if (it->diverted) /* (it will not be delivered here) */
            sn__migrate_diverted(r->sched, it->s.to);
        sn__relay_bounce_item(r, it, SN_ENODEDOWN, 0); /* (a FLUSH passing through never is: sn__loc_route) */
        return;
    }
    if (it->dest == r->node) { /* from a sender here, for a process that moved here */
        sn_pid_t to = it->s.to;
        bool diverted = it->diverted;
        sn__relay_inbound_send(r, NULL, &it->s);
        sn__relay_free_item(it);
        if (diverted) /* delivered (or on its way on): later sends may go straight */
            sn__migrate_diverted(r->sched, to);
        return;
    }
    if (it->s.hops > MAX_HOPS) {
        bad_route(r, &it->s);
        if (it->s.kind == SN_RELAY_MONITOR && it->s.from.node == r->node) {
            /* our own request, come round again: its record (under the
             * peer it went to first) is done with, and the watcher hears
             * here (bounce_local finds no record after this); none: it
             * was answered already, or demonitored (sn__watch_returned) */
            if (sn__watch_returned(r, &it->s))
                sn__send_down(r->sched, it->s.from, it->s.to, it->s.tag, SN_EUNREACHABLE, NULL);
        }
        sn__relay_bounce_item(r, it, SN_EUNREACHABLE, 0);
        return;
    }
    if (sn__relay_for_process(it->s.kind)) { /* to a process, over the network */
        size_t bit = sn__sent_bit(it->s.to);
        r->sent_to[bit / 64] |= UINT64_C(1) << (bit % 64);
    }
    peer_t *p = sn__relay_find_peer(r, it->dest);
    if (p && atomic_load_explicit(&p->down, memory_order_relaxed) && monitor_via_home(r, it))
        p = sn__relay_find_peer(r, it->dest);
    /* A send for a PID of an earlier run of its home (a message, a DOWN, a
     * monitor, a result) goes to the home all the same: the process may
     * have moved away before that run ended and live on, and the home's
     * new run leads it there once the holder announced it (locate.c,
     * sn__loc_home_restarted), or answers noproc; and so does that
     * announcement (a REDIRECT, to the node). tests/chaos.sh upgrade: the
     * watcher, moved off its home before the home's upgrade, gets every
     * sink's DOWN. */
    int err = !p ? SN_EUNREACHABLE : atomic_load_explicit(&p->down, memory_order_relaxed) ? SN_ENODEDOWN : 0;
    if (err) {
        if (it->s.kind == SN_RELAY_MONITOR && it->s.from.node == r->node) /* the watcher learns at once */
            sn__send_down(r->sched, it->s.from, it->s.to, it->s.tag, err, NULL);
        sn__relay_bounce_item(r, it, err, it->dest);
        return;
    }
    if ((it->s.kind == SN_RELAY_MONITOR || it->s.kind == SN_RELAY_DEMONITOR) &&
        (!it->forwarded || it->s.from.node == r->node))
        sn__watch(p, it->s.to, it->s.from, it->s.tag,
                  it->s.kind == SN_RELAY_MONITOR); /* (the watcher's node keeps it) */
    sn__relay_batch_add(r, p, it);
}

/* sn_migrate, from any thread: the move starts on the I/O thread, in
 * its turn with what this thread sent before (route order). */
static void relay_migrate(void *arg, sn_pid_t pid, uint32_t node, int timeout_ms, sn__move_done_fn done, void *darg)
{
    sn_relay_t *r = arg;
    move_item_t *mi = calloc(1, sizeof *mi);
    if (!mi) {
        done(darg, SN_ENOMEM, 0, "out of memory");
        return;
    }
    *mi = (move_item_t){
        .base.kind = ITEM_MOVE, .pid = pid, .node = node, .timeout_ms = timeout_ms, .done = done, .arg = darg};
    sn__relay_enqueue(r, &mi->base);
}

void sn__relay_install(sn_relay_t *r, bool remote_work)
{
    sn__sched_set_relay(r->sched, &(sn_relay_hooks_t){r, sn__relay_deliver, remote_work ? sn__steal_hook : NULL,
                                                      remote_work ? relay_loaded : NULL, sn__relay_ended, relay_flush,
                                                      relay_migrate});
}

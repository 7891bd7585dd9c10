/* relay.c - the ZeroMQ relay (see relay.h).
 *
 * Threads and ownership: workers call relay_deliver (and CALL callbacks)
 * which only allocate an item, push it on `outq` (a lock-free MPSC queue)
 * and, if the I/O thread has not been told yet, write its eventfd. The
 * I/O thread (the actor) owns every socket and every peer's batch: it
 * drains the queue into per-peer batches, encodes each batch as one frame
 * and sends it without blocking. A peer whose pipe is full (high-water mark)
 * keeps its frame pending and its batch growing: backpressure, never loss.
 * Peer `down` flags are written by the I/O thread and read by workers.
 */
#include "relay.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "relay_int.h"

#define BATCH_MAX 4096      /* sends per frame */
#define ACK_EVERY 16        /* batches: acknowledge at once when this many are unacknowledged */
#define ACK_DELAY_NS 4000000u /* else within this (see send_acks) */
#define DRAIN_BUDGET 65536  /* queue items per loop turn, then serve inbound */
#define INBOUND_BUDGET 64 /* frames (each up to BATCH_MAX sends) per socket per loop turn */
/* High-water marks: messages (frames) queued per peer pipe. A frame holds
 * up to BATCH_MAX sends, so 1000 frames bound a pipe at a few million sends;
 * past that the relay holds the batch itself (backpressure). */
#define SNDHWM 1000
#define RCVHWM 1000
#define FOUND_AFTER_NS 2000000000u /* see found_by_ns */
/* Nodes a send may pass through: a path longer than this loops (a chain of
 * forwarding entries broken by a node that restarted, sent home and back
 * out): the send comes back to its sender as unreachable. A real path is a
 * handful of hops (home, the nodes it moved through since a sender last
 * heard where it is). */
#define MAX_HOPS 16

_Atomic int sn__relay_log_level = 2;

void sn_relay_set_log_level(int level) { atomic_store(&sn__relay_log_level, level); }

uint64_t sn__relay_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void add(_Atomic uint64_t *c, uint64_t n) { atomic_fetch_add_explicit(c, n, memory_order_relaxed); }

#define now_ns sn__relay_now_ns
#define find_peer sn__relay_find_peer
#define bad sn__relay_bad
#define try_send sn__relay_try_send
#define inbound_frame sn__relay_inbound_frame
#define drain sn__relay_drain
#define enqueue sn__relay_enqueue
#define free_item sn__relay_free_item

peer_t *sn__relay_find_peer(sn_relay_t *r, uint32_t node)
{
    /* acquire: pairs with the release that published the slots */
    size_t n = atomic_load_explicit(&r->npeers, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (r->peers[i].node == node)
            return &r->peers[i];
    return NULL;
}

/* ------------------------------------------------------ worker side */

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
    sn__mpsc_push(&r->outq, &it->link);
    /* seq_cst: pairs with the I/O thread's clear of `signaled` before it
     * drains (a store-buffering pair): either it sees our item, or we see
     * the flag clear and write the eventfd */
    if (!atomic_exchange_explicit(&r->signaled, 1, memory_order_seq_cst)) {
        uint64_t one = 1;
        ssize_t n = write(r->efd, &one, sizeof one);
        (void)n; /* an eventfd write only fails at 2^64-1 pending */
    }
}

/* Set by the I/O thread while it hands the scheduler a send that came
 * from another node: whatever the scheduler passes on from there is a
 * forward (item_t.forwarded). Thread-local, so workers never see it set. */
static _Thread_local bool passing_on;
static _Thread_local uint32_t passing_hops; /* the hops of the send being passed on */
/* The id of the send being passed on or returned (see error_repeat): what
 * the scheduler sends from here on its behalf (the send itself, or its
 * error back to its sender) keeps it; 0: a new send gets a new id. */
static _Thread_local uint64_t carry_id;

static int relay_deliver(void *arg, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error, uint32_t via,
                         sn_payload_t **msg)
{
    sn_relay_t *r = arg;
    peer_t *p = via == r->node ? NULL : find_peer(r, via ? via : to.node);
    if (p && via && kind == SN_RELAY_MONITOR && !passing_on && atomic_load_explicit(&p->down, memory_order_acquire)) {
        /* a monitor set here for a process that moved on from here to a
         * node that is down: its home may know it went on (monitor_via_home) */
        peer_t *home = to.node == r->node ? NULL : find_peer(r, to.node);
        if (home && !atomic_load_explicit(&home->down, memory_order_acquire)) {
            p = home;
            via = 0;
        }
    }
    if (!p && via != r->node) /* (via == this node: a message for a process settling here, locate.c) */
        return SN_EUNREACHABLE;
    if (p && atomic_load_explicit(&p->down, memory_order_acquire))
        return SN_ENODEDOWN;
    if (!via && to.serial < atomic_load_explicit(&p->first_serial, memory_order_relaxed))
        return SN_ENOPROC; /* a process of an earlier run of that node */
    item_t *it = malloc(sizeof *it);
    if (!it)
        return SN_ENOMEM;
    it->kind = ITEM_SEND;
    it->dest = via ? via : to.node;
    it->diverted = via == r->node;
    it->forwarded = passing_on;
    it->s = (sn_wire_send_t){to, from, tag, kind, error, msg ? sn_take(msg) : NULL, passing_on ? passing_hops + 1 : 0,
                             carry_id ? carry_id : atomic_fetch_add_explicit(&r->next_send_id, 1, memory_order_relaxed)};
    if (kind == SN_RELAY_GONE) /* bookkeeping, in no hurry: it rides with the next wake-up (see the loop) */
        sn__mpsc_push(&r->outq, &it->link);
    else
        enqueue(r, it);
    return 0;
}

/* The scheduler's `loaded` hook (any thread): work piles up here after a
 * heartbeat said there was none; members.c sends the next one early. */
static void relay_loaded(void *arg)
{
    sn_relay_t *r = arg;
    atomic_store_explicit(&r->load_news, 1, memory_order_release);
    sn__relay_poke(r);
}

/* --------------------------------------------------------- I/O side */

/* Counts and logs a dropped frame: at most one line per second per peer
 * (plus one shared by senders that are not peers, which cannot be told
 * apart), each with the count of the quiet ones since. */
void sn__relay_bad(sn_relay_t *r, const char *why, uint32_t node)
{
    add(&r->bad_frames, 1);
    peer_t *p = node ? find_peer(r, node) : NULL;
    uint64_t *last = p ? &p->bad_log_ns : &r->bad_log_ns, *quiet = p ? &p->bad_quiet : &r->bad_quiet;
    uint64_t now = now_ns();
    if (*last && now - *last < 1000000000u) {
        (*quiet)++;
        return;
    }
    SNLOG_WARN("node=%" PRIu32 " dropped a bad frame from %s %" PRIu32 ": %s (%" PRIu64 " more since last report)",
                 r->node, p ? "peer" : "node", node, why, *quiet);
    *last = now;
    *quiet = 0;
}

/* Drops this node's record of watcher's monitor of target, under
 * whichever peer it is; false if there was none. */
static bool unwatch(sn_relay_t *r, sn_pid_t target, sn_pid_t watcher, uint64_t tag)
{
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    for (size_t i = 0; i < np; i++)
        if (sn__watch(&r->peers[i], target, watcher, tag, false))
            return true;
    return false;
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
            SNLOG_DEBUG("node=%" PRIu32 " send %" PRIx64 " came back once more (%s): not returned again", r->node,
                        id, sn_strerror(error));
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
static void return_error(sn_relay_t *r, sn_wire_send_t *s, sn_pid_t sender, sn_pid_t target, int error)
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
        int rc = relay_deliver(r, sender, target, s->tag, SN_EV_YIELD_COMPLETE, error, via, &s->payload);
        carry_id = was;
        if (rc != 0)
            SNLOG_WARN("node=%" PRIu32 " cannot return an undelivered message to %" PRIu32 ".%" PRIu64
                       ": its node is down or unknown",
                       r->node, sender.node, sender.serial);
    }
}

/* s could not go on from here (to node `at`, if it got that far): its
 * sender hears (a message), its watcher (a monitor), the node that started
 * it (a FLUSH that cannot reach the node after `at`: locate.c). */
static void bounce_local(sn_relay_t *r, sn_wire_send_t *s, int error, uint32_t at)
{
    add(&r->bounced, 1);
    if (s->kind == SN_EV_MESSAGE && !sn_pid_is_none(s->from))
        return_error(r, s, s->from, s->to, error);
    if (s->kind == SN_WIRE_FLUSH && error == SN_ENODEDOWN && at)
        sn__loc_flush_stuck(r, s, at);
    if (s->kind == SN_WIRE_REDIRECT && error == SN_ENODEDOWN && at && at == s->to.node && s->error > 0)
        sn__loc_notice_lost(r, s->to, (uint32_t)s->error); /* an arrival notice to a home that is down */
    /* a monitor request that fails is answered from the peer's watch
     * table, or by route when it never got there; one we were passing on
     * for a watcher on another node is answered here */
    if (s->kind == SN_RELAY_MONITOR) {
        if (s->from.node != r->node)
            relay_deliver(r, s->from, s->to, s->tag, SN_EV_DOWN, error, 0, NULL);
        else if (unwatch(r, s->to, s->from, s->tag)) /* (none: not recorded yet, the caller answered) */
            sn__send_down(r->sched, s->from, s->to, s->tag, error, NULL);
    }
    sn_payload_destroy(&s->payload);
}

void sn__relay_free_item(item_t *it)
{
    if (it->kind == ITEM_SEND) {
        sn_payload_destroy(&it->s.payload);
    } else {
        reply_item_t *ri = (reply_item_t *)it;
        free(ri->rep.reason);
        sn_payload_destroy(&ri->rep.result);
    }
    free(it);
}

/* Puts p on one of the I/O loop's lists (flag: its membership). */
static void io_list(uint16_t *list, size_t *n, bool *flag, sn_relay_t *r, peer_t *p)
{
    if (*flag)
        return;
    *flag = true;
    list[(*n)++] = (uint16_t)(p - r->peers);
}

/* p's dealer needs a look this turn: it woke us, or we sent on it (libzmq
 * may have taken the wake-up of an inbound frame inside the send). */
static void io_look(sn_relay_t *r, peer_t *p) { io_list(r->io_look, &r->nio_look, &p->io_look, r, p); }

bool sn__relay_try_send(sn_relay_t *r, peer_t *p, const void *buf, size_t len)
{
    if (!p->dealer && p->dial) { /* the first send to it: connect now (members.c, connect_to) */
        sn__relay_set_dealer(r, p, sn__relay_dealer_to(r, p->endpoint, p->public_key));
        if (!p->dealer) {
            p->dial = false;
            SNLOG_ERROR("node=%" PRIu32 " cannot connect to node %" PRIu32 " at %s: %s", r->node, p->node,
                        p->endpoint, zmq_strerror(zmq_errno()));
        }
    }
    if (!p->dealer)
        return false;
    io_look(r, p);
    if (zmq_send(zsock_resolve(p->dealer), buf, len, ZMQ_DONTWAIT) >= 0)
        return true;
    return false; /* EAGAIN: the pipe is full (or not yet connected): its POLLOUT wakes us */
}

/* Keeps a sent frame until the peer acknowledges it. */
static void keep(peer_t *p, void *buf, size_t len, uint64_t seq)
{
    if (p->nunacked == p->capunacked) {
        size_t cap = p->capunacked ? p->capunacked * 2 : 64;
        sent_t *u = realloc(p->unacked, cap * sizeof *u);
        if (!u) { /* out of memory: it is sent, we just cannot bounce it later */
            free(buf);
            return;
        }
        p->unacked = u;
        p->capunacked = cap;
    }
    p->unacked[p->nunacked++] = (sent_t){buf, len, seq};
}

/* The peer has every batch up to seq: forget them. */
static void acked(peer_t *p, uint64_t seq)
{
    size_t k = 0;
    while (k < p->nunacked && p->unacked[k].seq <= seq)
        free(p->unacked[k++].buf);
    if (k) {
        memmove(p->unacked, p->unacked + k, (p->nunacked - k) * sizeof *p->unacked);
        p->nunacked -= k;
    }
}

static void flush_peer(sn_relay_t *r, peer_t *p)
{
    if (p->pending) {
        if (!try_send(r, p, p->pending, p->pending_len))
            return;
        keep(p, p->pending, p->pending_len, p->pending_seq);
        p->pending = NULL;
        add(&r->frames_out, 1);
    }
    while (p->nctl) { /* in order, behind the pending batch */
        if (!try_send(r, p, p->ctl[0].buf, p->ctl[0].len))
            return;
        free(p->ctl[0].buf);
        memmove(p->ctl, p->ctl + 1, --p->nctl * sizeof *p->ctl);
        add(&r->frames_out, 1);
    }
    if (p->nbatch == 0)
        return;
    sn_wire_send_t *arr = malloc(p->nbatch * sizeof *arr);
    if (!arr)
        return; /* keep the batch; try again next turn */
    size_t msgs = 0;
    for (size_t i = 0; i < p->nbatch; i++) {
        arr[i] = p->batch[i]->s;
        msgs += sn__relay_for_process(arr[i].kind);
    }
    void *buf = NULL;
    size_t len = 0;
    uint64_t seq = p->next_seq + 1;
    int rc = sn_codec_encode_sends_to(r->node, r->incarnation, seq, p->incarnation, arr, p->nbatch, &buf, &len);
    free(arr);
    if (rc != 0)
        return;
    p->next_seq = seq;
    add(&r->msgs_out, msgs);
    for (size_t i = 0; i < p->nbatch; i++)
        free_item(p->batch[i]);
    p->nbatch = 0;
    p->bytes = 0;
    if (try_send(r, p, buf, len)) {
        add(&r->frames_out, 1);
        keep(p, buf, len, seq);
    } else {
        p->pending = buf;
        p->pending_len = len;
        p->pending_seq = seq;
    }
}

/* Every send in an encoded frame goes back to its sender with `error`. */
static void bounce_frame(sn_relay_t *r, const void *buf, size_t len, int error, uint32_t at)
{
    sn_frame_t f;
    if (sn_codec_decode(buf, len, SIZE_MAX, &f, NULL) == 0) {
        for (size_t i = 0; i < f.nsends; i++)
            bounce_local(r, &f.sends[i], error, at);
        sn_frame_clear(&f);
    }
}

/* sn__migrate_forget_node's `instead` for a run that ended: where the
 * process went from there as the home knows it (only a home does); the
 * processes of other homes whose entries go are kept in lost[] (their
 * homes hear: sn__loc_lost). */
struct forget {
    sn_relay_t *r;
    sn_pid_t *lost;
    size_t n, cap;
};

static uint32_t forget_instead(void *arg, sn_pid_t pid)
{
    struct forget *fg = arg;
    uint32_t to = sn__loc_last_seen(fg->r, pid);
    if (to || pid.node == fg->r->node)
        return to;
    if (fg->n == fg->cap) {
        size_t cap = fg->cap ? fg->cap * 2 : 16;
        sn_pid_t *l = realloc(fg->lost, cap * sizeof *l);
        if (!l)
            return 0; /* (no memory: its home does not hear; sends to it may go round until the hop bound) */
        fg->lost = l;
        fg->cap = cap;
    }
    fg->lost[fg->n++] = pid;
    return 0;
}

void sn__relay_bounce_peer(sn_relay_t *r, peer_t *p, int error, bool gone)
{
    /* every process here watching one there learns its node is gone */
    for (size_t i = 0; i < p->nwatch; i++)
        sn__send_down(r->sched, p->watch[i].watcher, p->watch[i].target, p->watch[i].tag, SN_ENODEDOWN, NULL);
    p->nwatch = 0;
    /* oldest first, so a sender sees its errors in the order it sent;
     * an unacknowledged send may have arrived before the peer died: the
     * error says the node went down, not that the message was lost */
    for (size_t i = 0; i < p->nunacked; i++) {
        bounce_frame(r, p->unacked[i].buf, p->unacked[i].len, error, p->node);
        free(p->unacked[i].buf);
    }
    p->nunacked = 0;
    if (p->pending) {
        bounce_frame(r, p->pending, p->pending_len, error, p->node);
        free(p->pending);
        p->pending = NULL;
    }
    for (size_t i = 0; i < p->nbatch; i++) {
        bounce_local(r, &p->batch[i]->s, error, p->node);
        free_item(p->batch[i]);
    }
    p->nbatch = 0;
    p->bytes = 0;
    for (size_t i = 0; i < p->nctl; i++) /* handovers with it end (steal.c) */
        free(p->ctl[i].buf);
    p->nctl = 0;
    sn__steal_peer_gone(r, p);
    if (gone) { /* the path through it ended: a process that moved on from there is found by where it was
                 * seen last (locate.c); one seen last there is gone with it (its DOWNs came from the
                 * watches above) */
        struct forget fg = {r, NULL, 0, 0};
        size_t moved = 0, n = sn__migrate_forget_node(r->sched, p->node, forget_instead, &fg, &moved);
        if (n || moved)
            SNLOG_INFO("node=%" PRIu32 " node %" PRIu32 "'s run ended: %zu forwarding entries through it dropped, "
                       "%zu point past it now",
                       r->node, p->node, n, moved);
        for (size_t i = 0; i < fg.n; i++)
            if (!sn__migrate_here(r->sched, fg.lost[i])) /* (an entry left from before it came back here) */
                sn__loc_left_for_gone(r, fg.lost[i]);
        free(fg.lost);
    }
    sn__loc_peer_down(r, p->node, gone);
}

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
    if (p->nwatch == p->capwatch) {
        size_t cap = p->capwatch ? p->capwatch * 2 : 16;
        watch_t *w = realloc(p->watch, cap * sizeof *w);
        if (!w)
            return false; /* out of memory: its node's failure will not be reported to this watcher */
        p->watch = w;
        p->capwatch = cap;
    }
    p->watch[p->nwatch++] = (watch_t){target, watcher, tag};
    return true;
}

void sn__relay_send_ordered(sn_relay_t *r, peer_t *p, void *buf, size_t len)
{
    if (p->nbatch)
        flush_peer(r, p); /* what was queued before goes first */
    if (!p->pending && !p->nctl && try_send(r, p, buf, len)) {
        add(&r->frames_out, 1);
        free(buf);
        return;
    }
    if (p->nctl == p->capctl) {
        size_t cap = p->capctl ? p->capctl * 2 : 8;
        sent_t *c = realloc(p->ctl, cap * sizeof *c);
        if (!c) { /* out of memory: the handover times out and is undone */
            free(buf);
            return;
        }
        p->ctl = c;
        p->capctl = cap;
    }
    p->ctl[p->nctl++] = (sent_t){buf, len, 0};
}

void sn__relay_reset_peer(peer_t *p, uint64_t incarnation)
{
    p->incarnation = incarnation;
    p->recv_seq = p->acked_seq = p->ack_due_ns = 0;
    p->next_seq = 0;
    p->ident_len = 0;
    p->has_stats = false;
}

static void batch_add(sn_relay_t *r, peer_t *p, item_t *it)
{
    if (p->nbatch == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        item_t **b = realloc(p->batch, cap * sizeof *b);
        if (!b) {
            bounce_local(r, &it->s, SN_ENOMEM, 0);
            free_item(it);
            return;
        }
        p->batch = b;
        p->cap = cap;
    }
    p->batch[p->nbatch++] = it;
    p->bytes += 64 + (it->s.payload ? it->s.payload->len : 0);
    io_list(r->io_batch, &r->nio_batch, &p->io_batch, r, p); /* sent at the end of the drain at the latest */
    if (!p->pending && !p->nctl && (p->nbatch >= BATCH_MAX || p->bytes >= r->max_frame / 2))
        flush_peer(r, p);
}

void sn__relay_answer(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const void *buf, size_t len)
{
    void *router = zsock_resolve(r->router);
    r->router_look = true; /* (a send may take the wake-up of an inbound frame) */
    /* ROUTER_MANDATORY: an unknown client id fails here instead of vanishing */
    if (zmq_send(router, ident, ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        zmq_send(router, buf, len, ZMQ_DONTWAIT);
}

static void send_reply(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const sn_wire_reply_t *rep)
{
    void *buf;
    size_t len;
    if (sn_codec_encode_reply(r->node, r->incarnation, rep, &buf, &len) != 0)
        return;
    sn__relay_answer(r, ident, ident_len, buf, len);
    free(buf);
}

/* Returns true if it stopped on the budget (more may be queued). */
bool sn__relay_drain(sn_relay_t *r)
{
    size_t done = 0;
    sn__mpsc_node_t *n;
    while (done < DRAIN_BUDGET && (n = sn__mpsc_pop(&r->outq))) {
        done++;
        item_t *it = (item_t *)n;
        if (it->kind == ITEM_REPLY) {
            reply_item_t *ri = (reply_item_t *)it;
            send_reply(r, ri->ident, ri->ident_len, &ri->rep);
            free_item(it);
            continue;
        }
        sn__relay_route(r, it);
    }
    for (size_t i = 0; i < r->nio_batch; i++) { /* the peers that got sends: each batch goes */
        peer_t *p = &r->peers[r->io_batch[i]];
        p->io_batch = false;
        flush_peer(r, p);
    }
    r->nio_batch = 0;
    return done == DRAIN_BUDGET;
}

static void inbound_send(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s);

/* A send that passed through too many nodes (MAX_HOPS): logged at most
 * once a second, with the count of the quiet ones. */
static void bad_route(sn_relay_t *r, const sn_wire_send_t *s)
{
    static _Thread_local uint64_t last, quiet; /* (the I/O thread's) */
    uint64_t now = now_ns();
    if (last && now - last < 1000000000u) {
        quiet++;
        return;
    }
    SNLOG_WARN("node=%" PRIu32 " a send to %" PRIu32 ".%" PRIu64 " passed through %" PRIu32
               " nodes: its path loops, it goes back to its sender as unreachable (%" PRIu64
               " more since last report)",
               r->node, s->to.node, s->to.serial, s->hops, quiet);
    last = now;
    quiet = 0;
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
    peer_t *home = find_peer(r, it->s.to.node);
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
        bounce_local(r, &it->s, SN_ENODEDOWN, 0); /* (a FLUSH passing through never is: sn__loc_route) */
        if (it->diverted) /* (it will not be delivered here) */
            sn__migrate_diverted(r->sched, it->s.to);
        free_item(it);
        return;
    }
    if (it->dest == r->node) { /* from a sender here, for a process that moved here */
        sn_pid_t to = it->s.to;
        bool diverted = it->diverted;
        inbound_send(r, NULL, &it->s);
        free_item(it);
        if (diverted) /* delivered (or on its way on): later sends may go straight */
            sn__migrate_diverted(r->sched, to);
        return;
    }
    if (it->s.hops > MAX_HOPS) {
        bad_route(r, &it->s);
        if (it->s.kind == SN_RELAY_MONITOR && it->s.from.node == r->node &&
            !unwatch(r, it->s.to, it->s.from, it->s.tag)) /* (a record: bounce_local answers) */
            sn__send_down(r->sched, it->s.from, it->s.to, it->s.tag, SN_EUNREACHABLE, NULL);
        bounce_local(r, &it->s, SN_EUNREACHABLE, 0);
        free_item(it);
        return;
    }
    if (sn__relay_for_process(it->s.kind)) { /* to a process, over the network */
        size_t bit = sn__sent_bit(it->s.to);
        r->sent_to[bit / 64] |= UINT64_C(1) << (bit % 64);
    }
    peer_t *p = find_peer(r, it->dest);
    if (p && atomic_load_explicit(&p->down, memory_order_relaxed) && monitor_via_home(r, it))
        p = find_peer(r, it->dest);
    int err = !p ? SN_EUNREACHABLE
              : atomic_load_explicit(&p->down, memory_order_relaxed)                 ? SN_ENODEDOWN
              : it->dest == it->s.to.node &&
                      it->s.to.serial < atomic_load_explicit(&p->first_serial, memory_order_relaxed)
                  ? SN_ENOPROC
                  : 0;
    if (err) {
        if (it->s.kind == SN_RELAY_MONITOR && it->s.from.node == r->node) /* the watcher learns at once */
            sn__send_down(r->sched, it->s.from, it->s.to, it->s.tag, err, NULL);
        bounce_local(r, &it->s, err, it->dest);
        free_item(it);
        return;
    }
    if ((it->s.kind == SN_RELAY_MONITOR || it->s.kind == SN_RELAY_DEMONITOR) &&
        (!it->forwarded || it->s.from.node == r->node))
        sn__watch(p, it->s.to, it->s.from, it->s.tag, it->s.kind == SN_RELAY_MONITOR); /* (the watcher's node keeps it) */
    batch_add(r, p, it);
}

static void inbound_send_(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s);

/* WATCHED from node `from`: the watcher's record of that monitor moves
 * under it, so that its failure reports the monitor (nodedown). */
static void watched_at(sn_relay_t *r, const peer_t *from, const sn_wire_send_t *s)
{
    if (!from)
        return;
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    for (size_t i = 0; i < np; i++) {
        peer_t *p = &r->peers[i];
        if (p == from)
            continue;
        if (sn__watch(p, s->to, s->from, s->tag, false)) {
            if (!sn__watch((peer_t *)from, s->to, s->from, s->tag, true)) /* (no memory) */
                sn__send_down(r->sched, s->from, s->to, s->tag, SN_ENODEDOWN, NULL);
            return;
        }
    }
}

/* A send that arrived from node `from` (NULL: held here, locate.c) for a
 * process here. What the scheduler passes on from here (the process moved
 * on, an error back to a sender elsewhere) is a forward: see passing_on. */
static void inbound_send(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s)
{
    bool was = passing_on; /* (nested: a flush that ends delivers what it held) */
    uint32_t was_hops = passing_hops;
    uint64_t was_id = carry_id;
    passing_on = true;
    passing_hops = s->hops;
    carry_id = s->id;
    inbound_send_(r, from, s);
    passing_on = was;
    passing_hops = was_hops;
    carry_id = was_id;
}

static void inbound_send_(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s)
{
    int rc = 0;
    if (from && sn__relay_for_process(s->kind))
        add(&r->msgs_in, 1);
    switch (s->kind) {
    case SN_EV_MESSAGE: /* for a process here, or one that moved on from here */
        rc = sn__deliver_inbound(r->sched, s->to, s->from, s->tag, SN_EV_MESSAGE, 0, &s->payload);
        if (rc == 0)
            sn__loc_forwarded(r, from, s->to); /* if it went on: tell `from` where it is now */
        break;
    case SN_RELAY_GONE: { /* a process that moved from here to `from` ended: so does our entry */
        sn__loc_ended(r, s->to);
        uint32_t origins[SN_MAX_NODES];
        size_t n = from ? sn__migrate_gone(r->sched, s->to, from->node, origins, SN_MAX_NODES) : 0;
        for (size_t k = 0; k < n && k < SN_MAX_NODES; k++) /* and the nodes it came here from, in turn */
            if (origins[k] != r->node)
                relay_deliver(r, s->to, SN_PID_NONE, 0, SN_RELAY_GONE, 0, origins[k], NULL);
        sn_payload_destroy(&s->payload);
        return;
    }
    case SN_WIRE_REDIRECT:
        if (s->tag == 0 && from) /* (to nowhere: one of ours went from `from` to a run that ended) */
            sn__loc_lost(r, s->to, from->node);
        else
            sn__loc_redirect(r, s->to, (uint32_t)s->tag, s->error > 0 ? (uint32_t)s->error : 0);
        sn_payload_destroy(&s->payload);
        return;
    case SN_WIRE_FLUSH:
        sn__loc_flush(r, s);
        sn_payload_destroy(&s->payload);
        return;
    case SN_WIRE_FLUSHED:
        if (s->error == SN_ENODEDOWN) /* stuck further down the path */
            sn__loc_stuck(r, s->to, (uint32_t)s->tag, s->id);
        else
            sn__loc_flushed(r, s->to, (uint32_t)s->tag, s->id);
        sn_payload_destroy(&s->payload);
        return;
    case SN_EV_YIELD_COMPLETE: /* our earlier send, returned with an error */
        return_error(r, s, s->to, s->from, s->error);
        sn_payload_destroy(&s->payload);
        return;
    case SN_EV_CANCEL:
        sn_cancel(r->sched, s->to);
        return;
    case SN_EV_DOWN: { /* a process there that one here watched has ended */
        /* the record is under the node that holds the monitor (its home,
         * or where it had moved: WATCHED); none: its DOWN came already
         * (the node holding it went down, or a hop returned the request),
         * and a monitor gets exactly one */
        if (unwatch(r, s->from, s->to, s->tag))
            sn__send_down(r->sched, s->to, s->from, s->tag, s->error, &s->payload);
        sn_payload_destroy(&s->payload);
        return;
    }
    case SN_RELAY_MONITOR: /* the DOWN goes back through our relay_deliver */
        /* our own request, come back (its path led through here again):
         * the record of where it went is done with; what sn__monitor does
         * now answers it (a monitor here, a DOWN here, or on again with a
         * new record: sn__relay_route) */
        if (s->from.node == r->node)
            unwatch(r, s->to, s->from, s->tag);
        sn__monitor(r->sched, s->to, s->from, s->tag);
        if (s->from.node != r->node && sn__migrate_here(r->sched, s->to))
            /* held here: the watcher's node moves its record to us (it is
             * under the node it sent the request to: the home, a node its
             * cache named, or one the process has left since) */
            relay_deliver(r, s->to, s->from, s->tag, SN_WIRE_WATCHED, 0, s->from.node, NULL);
        sn_payload_destroy(&s->payload);
        return;
    case SN_WIRE_WATCHED: /* from's monitor of to is held on the node that sent this */
        watched_at(r, from, s);
        sn_payload_destroy(&s->payload);
        return;
    case SN_RELAY_DEMONITOR:
        sn__demonitor(r->sched, s->to, s->from, s->tag);
        sn_payload_destroy(&s->payload);
        return;
    case SN_RELAY_RESULT: /* a child that ran elsewhere finished */
        if (sn__send_result(r->sched, s->to, s->from, s->tag, s->error, &s->payload) != 0)
            sn_payload_destroy(&s->payload);
        return;
    }
    if (rc == 0)
        return;
    /* Undeliverable here: back to the sender's node, payload included (on
     * our outbound connection, in order with everything else we send it) */
    add(&r->bounced, 1);
    if (!sn_pid_is_none(s->from))
        return_error(r, s, s->from, s->to, rc);
    sn_payload_destroy(&s->payload);
}

typedef struct call_ctx {
    sn_relay_t *relay;
    uint64_t id;
    unsigned char ident[256];
    size_t ident_len;
} call_ctx_t;

static void call_done(sn_sched_t *sched, sn_pid_t pid, sn_status_t status, int error, sn_payload_t **result,
                      void *arg)
{
    call_ctx_t *c = arg;
    reply_item_t *it = calloc(1, sizeof *it);
    if (it) {
        it->base.kind = ITEM_REPLY;
        it->rep.id = c->id;
        it->rep.pid = pid;
        it->rep.error = status == SN_DONE ? 0 : (error ? error : SN_EFAILED);
        it->rep.result = sn_take(result);
        memcpy(it->ident, c->ident, c->ident_len);
        it->ident_len = c->ident_len;
        enqueue(c->relay, &it->base);
    }
    free(c);
}

static void inbound_request(sn_relay_t *r, sn_wire_request_t *q, const unsigned char *ident, size_t ident_len)
{
    sn_wire_reply_t rep = {.id = q->id};
    char reason[512] = "";
    if (q->op != SN_OP_STATUS && atomic_load_explicit(&r->joined, memory_order_acquire) != 1) {
        rep.error = SN_EREFUSED;
        rep.reason = "this node has not joined its cluster yet";
        send_reply(r, ident, ident_len, &rep);
        return;
    }
    switch (q->op) {
    case SN_OP_STATUS:
        rep.rows = sn__members_rows(r, &rep.nrows);
        if (!rep.rows)
            rep.error = SN_ENOMEM;
        break;
    case SN_OP_SPAWN:
        rep.error = sn_spawn(r->sched, q->type, q->method, &q->arg, NULL, NULL, &rep.pid);
        break;
    case SN_OP_SEND:
        rep.error = sn_send(r->sched, q->to, &q->arg);
        break;
    case SN_OP_CALL: {
        call_ctx_t *c = malloc(sizeof *c);
        if (!c || ident_len > sizeof c->ident) {
            free(c);
            rep.error = SN_ENOMEM;
            break;
        }
        *c = (call_ctx_t){r, q->id, {0}, ident_len};
        memcpy(c->ident, ident, ident_len);
        rep.error = sn_spawn(r->sched, q->type, q->method, &q->arg, call_done, c, NULL);
        if (rep.error == 0)
            return; /* call_done answers */
        free(c);
        break;
    }
    }
    if (rep.error && (q->op == SN_OP_SPAWN || q->op == SN_OP_CALL))
        snprintf(reason, sizeof reason, "spawn %s %s: %s", q->type, q->method, sn_strerror(rep.error));
    else if (rep.error)
        snprintf(reason, sizeof reason, "%s", sn_strerror(rep.error));
    rep.reason = reason;
    send_reply(r, ident, ident_len, &rep);
    free(rep.rows);
}

/* Sends in the name of a node that is not a member here: one that joined
 * a moment ago can send before the gossip about it arrives, so they are
 * taken, but never in this node's own name, and in a secure cluster only
 * with a node's key (a client's key speaks for no node). */
static bool sends_from_stranger_ok(sn_relay_t *r, uint32_t node)
{
    if (node == r->node) {
        bad(r, "sends in this node's own name", node);
        return false;
    }
    if (!r->in_key)
        return true;
    size_t n = sizeof r->key_seen / sizeof r->key_seen[0], k = 0;
    while (k < n && (r->key_seen[k].id != node || strcmp(r->key_seen[k].key, r->in_key) != 0))
        k++; /* a small cache: the key scan reads files */
    if (k == n) {
        char why[512];
        k = r->key_next++ % n;
        snprintf(r->key_seen[k].key, sizeof r->key_seen[k].key, "%s", r->in_key);
        r->key_seen[k].id = node;
        r->key_seen[k].node = sn_keys_names_node(r->authorized, r->in_key, node, NULL, why, sizeof why) == 0;
    }
    if (!r->key_seen[k].node)
        bad(r, "sends in the name of a node that is not a member, with a key that is not that node's", node);
    return r->key_seen[k].node;
}

void sn__relay_inbound_frame(sn_relay_t *r, const void *data, size_t size, const unsigned char *ident,
                             size_t ident_len, zsock_t *from_seed)
{
    if (size > r->max_frame) {
        bad(r, "oversize", 0);
        return;
    }
    sn_frame_t f;
    const char *why = "undecodable";
    if (sn_codec_decode(data, size, r->max_frame, &f, &why) != 0) {
        bad(r, why, f.node);
        return;
    }
    add(&r->frames_in, 1);
    peer_t *p = f.kind == SN_FRAME_REQUEST ? NULL : find_peer(r, f.node);
    if (p && f.kind != SN_FRAME_HELLO && r->in_key && p->public_key[0] && strcmp(r->in_key, p->public_key) != 0) {
        /* an authorized key (another node's, or a client's) speaking for p
         * (a Hello is judged by members.c: a taken id is refused, with why) */
        bad(r, "frame claims to be from a node whose key it does not have", f.node);
        sn_frame_clear(&f);
        return;
    }
    if (!p && f.kind == SN_FRAME_SENDS && !sends_from_stranger_ok(r, f.node)) {
        sn_frame_clear(&f);
        return;
    }
    if (p && f.incarnation < p->incarnation) {
        bad(r, "frame from an earlier run of that node", f.node);
        sn__members_superseded(r, p, &f, ident, ident_len);
        sn_frame_clear(&f);
        return;
    }
    if (p && f.kind != SN_FRAME_HELLO)
        sn__members_heard(r, p, f.incarnation);
    switch (f.kind) {
    case SN_FRAME_SENDS:
        if (f.to_incarnation && f.to_incarnation != r->incarnation) {
            /* meant for an earlier run of this node (queued before the
             * sender knew of the restart): its sender returns every send
             * in it as nodedown when it learns, so none may run here */
            SNLOG_DEBUG("node=%" PRIu32 " dropped a batch from node %" PRIu32 " meant for an earlier run of this node",
                        r->node, f.node);
            break;
        }
        for (size_t i = 0; i < f.nsends; i++)
            inbound_send(r, p, &f.sends[i]);
        if (f.seq && ident && ident_len <= sizeof r->peers[0].ident && p && f.seq > p->recv_seq) {
            p->recv_seq = f.seq; /* acknowledged soon (send_acks) */
            if (!p->ack_due_ns)
                p->ack_due_ns = now_ns() + ACK_DELAY_NS;
            io_list(r->io_ack, &r->nio_ack, &p->io_ack, r, p);
            memcpy(p->ident, ident, ident_len);
            p->ident_len = ident_len;
        }
        break;
    case SN_FRAME_ACK:
        if (p)
            acked(p, f.seq);
        break;
    case SN_FRAME_HEARTBEAT:
        if (!p && f.has_stats && (p = sn__members_stranger(r, &f)) != NULL)
            sn__members_heard(r, p, f.incarnation);
        if (p) /* (a probe from a node we just learned of is answered too) */
            sn__members_heartbeat(r, p, &f);
        break;
    case SN_FRAME_STEAL_REQUEST:
    case SN_FRAME_STEAL_OFFER:
    case SN_FRAME_STEAL_ACCEPT:
    case SN_FRAME_STEAL_COMMIT:
        if (p && p->state == SN_MEMBER_UP)
            sn__steal_frame(r, p, &f);
        else
            bad(r, "steal message from a node that is not a live member", f.node);
        break;
    case SN_FRAME_HELLO:
    case SN_FRAME_WELCOME:
    case SN_FRAME_MEMBERS:
    case SN_FRAME_ERROR:
    case SN_FRAME_LEAVE:
        sn__members_frame(r, &f, ident, ident_len, from_seed);
        break;
    case SN_FRAME_REQUEST:
        if (ident)
            inbound_request(r, &f.request, ident, ident_len);
        else
            bad(r, "client request on a peer connection", f.node);
        break;
    default:
        bad(r, "out of protocol", f.node);
        break;
    }
    sn_frame_clear(&f);
}

/* Reads what is waiting on a socket: ROUTER frames come as [id, body],
 * DEALER frames as [body]. Anything else is a bad frame. Returns true if
 * it stopped on the budget (more may be waiting: look again). */
static bool read_socket(sn_relay_t *r, void *sock, bool router, zsock_t *from_seed)
{
    for (int n = 0; n < INBOUND_BUDGET; n++) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        zmq_msg_t *first = router ? &id : &body;
        if (zmq_msg_recv(first, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&body);
            return false;
        }
        bool ok = true;
        if (router) {
            ok = zmq_msg_more(&id) && zmq_msg_recv(&body, sock, ZMQ_DONTWAIT) >= 0;
        }
        /* swallow extra parts: a well-behaved peer sends none */
        bool extra = false;
        while (zmq_msg_more(router ? &body : first)) {
            zmq_msg_t junk;
            zmq_msg_init(&junk);
            if (zmq_msg_recv(&junk, sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&junk);
                break;
            }
            extra = true;
            bool more = zmq_msg_more(&junk);
            zmq_msg_close(&junk);
            if (!more)
                break;
        }
        if (!ok || extra)
            bad(r, "unexpected message parts", 0);
        else if (router) {
            r->in_key = r->cert ? zmq_msg_gets(&body, "User-Id") : NULL; /* set by the ZAP handler: the key */
            inbound_frame(r, zmq_msg_data(&body), zmq_msg_size(&body), zmq_msg_data(&id), zmq_msg_size(&id),
                          NULL);
            r->in_key = NULL;
        }
        else
            inbound_frame(r, zmq_msg_data(&body), zmq_msg_size(&body), NULL, 0, from_seed);
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    return true;
}

/* Acknowledges the batches received, one Ack per peer, on the connection
 * they came in on. Acknowledgements are delayed a little: a peer sending a frame a
 * millisecond (a process finishing for a remote parent, say) would
 * otherwise get an ack frame back for each, and each costs a wake-up of
 * two threads on both nodes. An ack goes out once ACK_EVERY batches are
 * unacknowledged or the oldest has waited ACK_DELAY_NS; the sender keeps
 * its frames that much longer (and a node that dies bounces them as
 * nodedown, which means "not confirmed": see docs/guarantees.md). */
static void send_acks(sn_relay_t *r, uint64_t now)
{
    void *router = zsock_resolve(r->router);
    for (size_t i = 0; i < r->nio_ack;) { /* the peers with batches not yet acknowledged */
        peer_t *p = &r->peers[r->io_ack[i]];
        if (p->recv_seq <= p->acked_seq || p->ident_len == 0) { /* (done, or reset: sn__relay_reset_peer) */
            p->io_ack = false;
            r->io_ack[i] = r->io_ack[--r->nio_ack];
            continue;
        }
        i++;
        if (p->recv_seq - p->acked_seq < ACK_EVERY && now < p->ack_due_ns)
            continue;
        void *buf;
        size_t len;
        if (sn_codec_encode_ack(r->node, r->incarnation, p->recv_seq, &buf, &len) != 0)
            continue;
        r->router_look = true;
        if (zmq_send(router, p->ident, p->ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
            zmq_send(router, buf, len, ZMQ_DONTWAIT) >= 0)
            p->acked_seq = p->recv_seq, p->ack_due_ns = 0; /* else: again next turn (it stays listed) */
        free(buf);
    }
}

/* When the next acknowledgement is due (UINT64_MAX: none). */
static uint64_t acks_due_ns(sn_relay_t *r)
{
    uint64_t next = UINT64_MAX;
    for (size_t i = 0; i < r->nio_ack; i++) {
        peer_t *p = &r->peers[r->io_ack[i]];
        if (p->ack_due_ns && p->ack_due_ns < next)
            next = p->ack_due_ns;
    }
    return next;
}

/* The I/O loop.
 *
 * One epoll set (r->epfd) holds the ZMQ_FD of every socket (the actor's
 * pipe, the ROUTER and its monitor, each peer's DEALER, each seed's DEALER
 * and monitor) and the eventfd that workers write. A turn costs what
 * happened in it, not the number of members: of the peers, only those
 * whose DEALER woke us or was sent on (io_look), got sends (io_batch) or
 * owe acknowledgements (io_ack) are looked at. A ZMQ_FD only says "look at
 * ZMQ_EVENTS", and libzmq may consume its wake-up inside any send or
 * receive on that socket: so a socket we used in a turn is looked at again
 * in the next one, before we sleep. Level-triggered: a socket whose
 * events we have not read keeps waking us. */
enum { IO_PIPE, IO_EFD, IO_ROUTER, IO_ROUTER_MON, IO_PEER, IO_SEED, IO_SEED_MON };

static void io_watch(sn_relay_t *r, zsock_t *s, uint32_t kind, uint32_t i, bool on)
{
    int fd = kind == IO_EFD ? r->efd : s ? zsock_fd(s) : -1;
    if (r->epfd < 0 || fd < 0)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)kind << 32 | i};
    if (epoll_ctl(r->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev) != 0 && on)
        SNLOG_ERROR("node=%" PRIu32 " epoll_ctl: %s: a socket is not watched", r->node, strerror(errno));
}

void sn__relay_set_dealer(sn_relay_t *r, peer_t *p, zsock_t *d)
{
    uint32_t i = (uint32_t)(p - r->peers);
    if (p->dealer) {
        io_watch(r, p->dealer, IO_PEER, i, false); /* (before the close: its fd number may be reused) */
        zsock_destroy(&p->dealer);
    }
    p->dealer = d;
    if (d) {
        io_watch(r, d, IO_PEER, i, true);
        io_look(r, p);
    }
}

/* A handshake with a seed failed: with a secure cluster that will not
 * change by trying again, so the join ends with the reason. */
static void seed_refused(sn_relay_t *r, seed_t *sd)
{
    char why[128], ep[256];
    if (sn_keys_failure(sd->monitor, r->cert != NULL, why, sizeof why, ep, sizeof ep) == 0 ||
        atomic_load_explicit(&r->joined, memory_order_relaxed) != 0)
        return;
    snprintf(r->join_error, sizeof r->join_error, "the seed at %s refused this node: %s%s", sd->endpoint, why,
             !strcmp(why, "key not authorized") ? " (add this node's public certificate to the authorized-keys "
                                                  "directory of the cluster's nodes)"
                                                : "");
    SNLOG_ERROR("node=%" PRIu32 " %s", r->node, r->join_error);
    atomic_store_explicit(&r->joined, -1, memory_order_release); /* release: join_error first */
}

/* Someone failed the CurveZMQ handshake with us: logged at most once per
 * two seconds, with the count of the quiet ones (a refused peer retries
 * every few hundred milliseconds). */
static void router_refused(sn_relay_t *r)
{
    char why[256], ep[256];
    int kind = sn_keys_failure(r->router_monitor, true, why, sizeof why, ep, sizeof ep);
    if (kind == 0)
        return;
    if (kind == SN_KEYS_CLOSED) { /* a peer or client went away, or sent a frame over the hard limit */
        add(&r->disconnects, 1);
        return;
    }
    add(&r->refused, 1);
    if (kind == SN_KEYS_FAILED) /* from this side, the usual causes are these */
        snprintf(why, sizeof why, "handshake failed (a client without keys, or with a wrong key for this node)");
    uint64_t now = now_ns(); /* one rate limit per kind of failure */
    if (r->refuse_log_ns[kind] && now - r->refuse_log_ns[kind] < 2000000000u) {
        r->refuse_quiet[kind]++;
        return;
    }
    SNLOG_WARN("node=%" PRIu32 " refused a connection on %s: %s%s (%" PRIu64 " more since last report)", r->node,
                 ep, why, kind == SN_KEYS_NOT_AUTHORIZED ? ": its key is not in the authorized keys" : "",
                 r->refuse_quiet[kind]);
    r->refuse_log_ns[kind] = now;
    r->refuse_quiet[kind] = 0;
}

/* Frees the connections to seeds once we are a member. */
static void drop_seeds(sn_relay_t *r)
{
    for (size_t i = 0; i < r->nseeds; i++) {
        io_watch(r, r->seeds[i].monitor, IO_SEED_MON, (uint32_t)i, false);
        io_watch(r, r->seeds[i].dealer, IO_SEED, (uint32_t)i, false);
        sn_keys_unmonitor(r->seeds[i].dealer, &r->seeds[i].monitor);
        zsock_destroy(&r->seeds[i].dealer);
    }
    free(r->seeds);
    r->seeds = NULL;
    r->nseeds = 0;
}

/* The commands main sends the actor; true on $TERM. */
static bool pipe_commands(sn_relay_t *r, zsock_t *pipe)
{
    while (zsock_events(pipe) & ZMQ_POLLIN) {
        char *cmd = zstr_recv(pipe);
        bool term = !cmd || streq(cmd, "$TERM");
        if (cmd && streq(cmd, "LEAVE")) { /* members.c signals the pipe when done */
            r->leave_deadline_ns = now_ns() + 1000000000u;
            r->next_tick_ns = 0;
        } else if (cmd && streq(cmd, "NOSTEAL")) {
            sn__steal_stop(r);
            r->no_steal = true;
            zsock_signal(pipe, 0);
        }
        zstr_free(&cmd);
        if (term)
            return true;
    }
    return false;
}

/* The peers listed to look at: what their DEALERs received (acks, answers
 * to us), and a frame a full pipe refused, once there is room. Returns
 * true if one stopped on the inbound budget. */
static bool look_at_peers(sn_relay_t *r)
{
    uint16_t look[SN_MAX_NODES];
    size_t n = r->nio_look;
    memcpy(look, r->io_look, n * sizeof *look);
    r->nio_look = 0; /* a send from here on lists its peer for the next turn */
    for (size_t i = 0; i < n; i++)
        r->peers[look[i]].io_look = false;
    bool more = false;
    for (size_t i = 0; i < n; i++) {
        peer_t *p = &r->peers[look[i]];
        if (!p->dealer)
            continue;
        int ev = zsock_events(p->dealer);
        if ((ev & ZMQ_POLLIN) && read_socket(r, zsock_resolve(p->dealer), false, NULL)) {
            io_look(r, p);
            more = true;
        }
        if ((ev & ZMQ_POLLOUT) && (p->pending || p->nctl))
            flush_peer(r, p);
    }
    return more;
}

/* While joining: the seeds' answers and handshake failures. */
static void look_at_seeds(sn_relay_t *r)
{
    for (size_t i = 0; i < r->nseeds; i++) {
        seed_t *sd = &r->seeds[i];
        while (sd->dealer && (zsock_events(sd->dealer) & ZMQ_POLLIN))
            if (!read_socket(r, zsock_resolve(sd->dealer), false, sd->dealer))
                break;
        while (sd->monitor && (zsock_events(sd->monitor) & ZMQ_POLLIN))
            seed_refused(r, sd);
    }
}

static void actor(zsock_t *pipe, void *arg)
{
    sn_relay_t *r = arg;
    r->actor_pipe = pipe;
    io_watch(r, pipe, IO_PIPE, 0, true);
    zsock_signal(pipe, 0);
    bool more = false, inflight = false, pipe_look = true;
    r->router_look = true;
    struct epoll_event evs[64];
    for (;;) {
        uint64_t now = now_ns(), next = sn__members_next_ns(r), snext = r->no_steal ? UINT64_MAX : sn__steal_next_ns(r);
        if (snext < next)
            next = snext;
        uint64_t anext = acks_due_ns(r);
        if (anext < next)
            next = anext;
        long timeout = more || r->nio_look || r->nio_batch ? 0 : (next > now ? (long)((next - now) / 1000000u) + 1 : 0);
        if (inflight && timeout > 1) /* a push not yet linked, which may not signal: look again soon */
            timeout = 1;
        int nev = epoll_wait(r->epfd, evs, (int)(sizeof evs / sizeof *evs), (int)(timeout > 60000 ? 60000 : timeout));
        if (nev < 0 && errno != EINTR)
            break;
        for (int k = 0; k < nev; k++) {
            uint32_t kind = (uint32_t)(evs[k].data.u64 >> 32), i = (uint32_t)evs[k].data.u64;
            if (kind == IO_PEER)
                io_look(r, &r->peers[i]);
            else if (kind == IO_ROUTER)
                r->router_look = true;
            else if (kind == IO_PIPE)
                pipe_look = true;
            else if (kind == IO_EFD) {
                uint64_t v;
                ssize_t got = read(r->efd, &v, sizeof v);
                (void)got;
                atomic_store_explicit(&r->signaled, 0, memory_order_seq_cst);
            } else if (kind == IO_ROUTER_MON) {
                while (r->router_monitor && (zsock_events(r->router_monitor) & ZMQ_POLLIN))
                    router_refused(r);
            } /* (the pipe, the ROUTER and the seeds are looked at every turn) */
        }
        /* the pipe, the ROUTER: when they woke us, were used, or at each
         * tick (a wake-up libzmq took inside one of our own calls) */
        bool tick = now_ns() >= sn__members_next_ns(r);
        if (tick)
            r->router_look = true;
        if ((pipe_look || tick) && pipe_commands(r, pipe))
            break;
        pipe_look = false;
        /* Every turn drains, not only a signalled one: a GONE is queued
         * without waking us (relay_deliver) and goes out with the next
         * send, or at the next tick (a heartbeat period at most). */
        more = drain(r);
        inflight = !more && sn__mpsc_maybe_nonempty(&r->outq);
        if (r->router_look) {
            r->router_look = false;
            if ((zsock_events(r->router) & ZMQ_POLLIN) && read_socket(r, zsock_resolve(r->router), true, NULL))
                r->router_look = more = true;
        }
        send_acks(r, now_ns());
        if (look_at_peers(r))
            more = true;
        look_at_seeds(r);
        /* (at every tick too: its ZMQ_FD did not always wake us for a
         * refused handshake, cluster.sh) */
        while (tick && r->router_monitor && (zsock_events(r->router_monitor) & ZMQ_POLLIN))
            router_refused(r);
        if (r->nseeds && atomic_load_explicit(&r->joined, memory_order_relaxed) != 0)
            drop_seeds(r);
        if (r->gossip_due || atomic_load_explicit(&r->load_news, memory_order_acquire) ||
            now_ns() >= sn__members_next_ns(r)) {
            sn__members_tick(r);
            sn__loc_tick(r, now_ns()); /* flushes that got no answer */
        }
        if (!r->no_steal && (atomic_load_explicit(&r->want_work, memory_order_relaxed) ||
                             now_ns() >= sn__steal_next_ns(r)))
            sn__steal_tick(r, now_ns());
        /* sends on the ROUTER (acks, answers) or the pipe may have taken
         * their wake-ups: look again at once if something is waiting */
        if (r->router_look || (tick && (zsock_events(pipe) & ZMQ_POLLIN)))
            more = true;
    }
    /* the seeds' sockets are ours: close them here */
    drop_seeds(r);
    /* release: everything this thread did happens-before what
     * sn_relay_destroy does after zactor_destroy (that hand-over goes
     * through a ZeroMQ pipe, which TSan cannot see; this it can) */
    atomic_store_explicit(&r->actor_done, 1, memory_order_release);
}

zsock_t *sn__relay_dealer_to(sn_relay_t *r, const char *endpoint, const char *server_key)
{
    zsock_t *d = zsock_new(ZMQ_DEALER);
    if (!d)
        return NULL;
    if (r->cert)
        sn_keys_client(d, r->cert, server_key); /* before connecting */
    zsock_set_sndhwm(d, SNDHWM);
    zsock_set_rcvhwm(d, RCVHWM);
    zsock_set_maxmsgsize(d, (int64_t)r->max_frame * 2 + 1024);
    zsock_set_linger(d, 500); /* a Leave or a last batch gets out at exit */
    if (zsock_connect(d, "%s", endpoint) < 0)
        zsock_destroy(&d);
    return d;
}

/* A wildcard address cannot be advertised: peers could not dial it. */
static bool wildcard(const char *ep)
{
    return !strncmp(ep, "tcp://*", 7) || !strncmp(ep, "tcp://0.0.0.0", 13) || !strncmp(ep, "tcp://[::]", 10);
}

sn_relay_t *sn__relay_create(sn_sched_t *sched, const sn_relay_config_t *cfg, char *err, size_t errlen)
{
    sn_relay_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->sched = sched;
    r->node = sn_sched_node_id(sched);
    r->incarnation = cfg->incarnation;
    r->first_serial = cfg->first_serial;
    r->max_frame = cfg->max_frame ? cfg->max_frame : SN_WIRE_MAX_FRAME;
    r->hb_ms = cfg->heartbeat_ms > 0 ? cfg->heartbeat_ms : 200;
    r->down_ms = cfg->down_after_ms > 0 ? cfg->down_after_ms : 1500;
    /* send ids: this node in the top 16 bits, so that ids of different
     * nodes never meet; the run's start time below, so that a restart
     * does not reuse the ids of its earlier run's sends still around */
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    uint64_t wall_us = (uint64_t)wall.tv_sec * 1000000u + (uint64_t)wall.tv_nsec / 1000u;
    atomic_init(&r->next_send_id, ((uint64_t)r->node << 48) | (wall_us & ((UINT64_C(1) << 48) - 1)));
    r->on_out = cfg->on_out;
    r->on_out_arg = cfg->on_out_arg;
    r->start_ns = now_ns();
    snprintf(r->cluster, sizeof r->cluster, "%s", cfg->cluster ? cfg->cluster : "schednode");
    sn__mpsc_init(&r->outq);
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    r->epfd = r->efd < 0 ? -1 : epoll_create1(EPOLL_CLOEXEC);
    if (r->efd < 0 || r->epfd < 0) {
        snprintf(err, errlen, "%s: %s", r->efd < 0 ? "eventfd" : "epoll_create1", strerror(errno));
        if (r->efd >= 0)
            close(r->efd);
        free(r);
        return NULL;
    }
    io_watch(r, NULL, IO_EFD, 0, true);
    zsys_init();
    zsys_set_linger(0);
    r->peers = calloc(SN_MAX_NODES, sizeof *r->peers);
    if (!r->peers || sn__members_init(r) != 0)
        goto fail_sock;
    if (cfg->security.cert) {
        if (sn_keys_check(&cfg->security, err, errlen) != 0 ||
            !(r->cert = sn_keys_load(cfg->security.cert, err, errlen)))
            goto fail;
        snprintf(r->public_key, sizeof r->public_key, "%s", zcert_public_txt(r->cert));
        snprintf(r->authorized, sizeof r->authorized, "%s", cfg->security.authorized);
        /* czmq's ZAP handler: a client key not in the directory is refused
         * during the handshake */
        r->auth = zactor_new(zauth, NULL);
        if (!r->auth)
            goto fail_sock;
        zstr_sendx(r->auth, "CURVE", r->authorized, NULL);
        zsock_wait(r->auth);
    }
    r->router = zsock_new(ZMQ_ROUTER);
    if (!r->router)
        goto fail_sock;
    if (r->cert) {
        zcert_apply(r->cert, r->router);
        zsock_set_curve_server(r->router, 1);
        zsock_set_zap_domain(r->router, "schednode");
    }
    /* refusals (secure), and closed connections: a frame over the hard
     * limit below is cut off by libzmq with its connection, and that is
     * the only trace of it we get */
    r->router_monitor = sn_keys_monitor(r->router, true);
    zsock_set_router_mandatory(r->router, 1);
    zsock_set_sndhwm(r->router, SNDHWM);
    zsock_set_rcvhwm(r->router, RCVHWM);
    /* frames up to twice the cap reach us, to be counted and dropped; past
     * that libzmq closes the connection before buffering them */
    zsock_set_maxmsgsize(r->router, (int64_t)r->max_frame * 2 + 1024);
    int bound;
    do /* a signal the program does not block (e.g. a timer) interrupts the bind: try again */
        bound = zsock_bind(r->router, "%s", cfg->listen);
    while (bound < 0 && zmq_errno() == EINTR);
    if (bound < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen, zmq_strerror(zmq_errno()));
        goto fail;
    }
    snprintf(r->endpoint, sizeof r->endpoint, "%s", zsock_endpoint(r->router));
    io_watch(r, r->router, IO_ROUTER, 0, true);
    io_watch(r, r->router_monitor, IO_ROUTER_MON, 0, true);
    const char *adv = cfg->advertise ? cfg->advertise : r->endpoint;
    if (wildcard(adv) && (cfg->nseeds || cfg->npeers)) {
        snprintf(err, errlen, "%s listens on every interface: say which address peers should use with --advertise "
                              "tcp://HOST:PORT", r->endpoint);
        goto fail;
    }
    if (!sn_wire_endpoint_ok(adv)) {
        snprintf(err, errlen, "'%s' is not an address other nodes can dial (tcp://HOST:PORT)", adv);
        goto fail;
    }
    snprintf(r->advertise, sizeof r->advertise, "%s", adv);
    for (size_t i = 0; i < cfg->npeers; i++) {
        if (cfg->peers[i].node == r->node || find_peer(r, cfg->peers[i].node)) {
            snprintf(err, errlen, "peer node %" PRIu32 " is this node or listed twice", cfg->peers[i].node);
            goto fail;
        }
        sn_wire_member_t m = {.node = cfg->peers[i].node, .state = SN_MEMBER_UP};
        snprintf(m.endpoint, sizeof m.endpoint, "%s", cfg->peers[i].endpoint);
        if (r->cert && sn_keys_server_key(r->authorized, m.endpoint, m.public_key, err, errlen) != 0)
            goto fail;
        if (!sn__members_upsert(r, &m, "static peer")) {
            snprintf(err, errlen, "bad peer endpoint %s: %s", cfg->peers[i].endpoint, zmq_strerror(zmq_errno()));
            goto fail;
        }
    }
    r->seeds = calloc(cfg->nseeds ? cfg->nseeds : 1, sizeof *r->seeds);
    if (!r->seeds)
        goto fail_sock;
    for (size_t i = 0; i < cfg->nseeds; i++) {
        if (!strcmp(cfg->seeds[i], r->advertise) || !strcmp(cfg->seeds[i], r->endpoint)) {
            /* ourselves, e.g. one config listing every seed. The first seed
             * listed joins the others if any is running, else it starts
             * the cluster (the rule Akka uses): some node has to. */
            if (i == 0)
                r->found_by_ns = now_ns() + FOUND_AFTER_NS;
            continue;
        }
        seed_t *sd = &r->seeds[r->nseeds];
        snprintf(sd->endpoint, sizeof sd->endpoint, "%s", cfg->seeds[i]);
        char key[41] = "";
        if (r->cert && sn_keys_server_key(r->authorized, cfg->seeds[i], key, err, errlen) != 0)
            goto fail;
        sd->dealer = sn__relay_dealer_to(r, cfg->seeds[i], key);
        if (sd->dealer)
            sd->monitor = sn_keys_monitor(sd->dealer, false);
        if (!sd->dealer) {
            snprintf(err, errlen, "bad seed endpoint %s: %s", cfg->seeds[i], zmq_strerror(zmq_errno()));
            goto fail;
        }
        zsock_set_immediate(sd->dealer, 1); /* no Hellos queued for a seed not there */
        io_watch(r, sd->dealer, IO_SEED, (uint32_t)r->nseeds, true);
        io_watch(r, sd->monitor, IO_SEED_MON, (uint32_t)r->nseeds, true);
        r->nseeds++;
        size_t off = strlen(r->seed_list);
        snprintf(r->seed_list + off, sizeof r->seed_list - off, " %s", cfg->seeds[i]);
    }
    atomic_store(&r->joined, r->nseeds ? 0 : 1);
    const sn_type_t *types[SN_WIRE_TYPES_MAX];
    r->ntypes = sn__sched_types(sched, types, SN_WIRE_TYPES_MAX);
    r->types = calloc(r->ntypes ? r->ntypes : 1, sizeof *r->types);
    if (!r->types || sn__steal_init(r, cfg) != 0 || sn__loc_init(r) != 0)
        goto fail_sock;
    for (size_t i = 0; i < r->ntypes; i++) {
        snprintf(r->types[i].name, sizeof r->types[i].name, "%s", types[i]->name);
        r->types[i].version = types[i]->version;
        r->types[i].migratable = types[i]->marshal && types[i]->unmarshal;
    }
    return r;
fail_sock:
    snprintf(err, errlen, "cannot create sockets: %s", zmq_strerror(zmq_errno()));
fail:
    sn_relay_destroy(&r);
    return NULL;
}

sn_relay_t *sn_relay_new(sn_sched_t *sched, const sn_relay_config_t *cfg, char *err, size_t errlen)
{
    sn_relay_t *r = sn__relay_create(sched, cfg, err, errlen);
    if (!r)
        return NULL;
    r->actor = zactor_new(actor, r);
    if (!r->actor) {
        snprintf(err, errlen, "cannot create sockets: %s", zmq_strerror(zmq_errno()));
        sn_relay_destroy(&r);
        return NULL;
    }
    sn__relay_install(r, cfg->steal != 0);
    return r;
}

void sn__relay_install(sn_relay_t *r, bool remote_work)
{
    sn__sched_set_relay(r->sched, &(sn_relay_hooks_t){r, relay_deliver, remote_work ? sn__steal_hook : NULL,
                                                     remote_work ? relay_loaded : NULL});
}

int sn_relay_join_wait(sn_relay_t *r, int timeout_ms, char *err, size_t errlen)
{
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
    int j;
    /* acquire: join_error is written before joined = -1 (release) */
    while ((j = atomic_load_explicit(&r->joined, memory_order_acquire)) == 0 && now_ns() < deadline)
        zclock_sleep(10);
    if (j == 1)
        return 0;
    if (j == -1) {
        snprintf(err, errlen, "%s", r->join_error);
        return SN_EREFUSED;
    }
    snprintf(err, errlen, "no seed answered within %d ms:%s (are they running? is the address right?)", timeout_ms,
             r->seed_list);
    return SN_ETIMEDOUT;
}

void sn_relay_stop_stealing(sn_relay_t *r)
{
    if (!r || !r->actor)
        return;
    zstr_send(r->actor, "NOSTEAL");
    zsock_wait(r->actor);
}

void sn_relay_leave(sn_relay_t *r)
{
    if (!r || !r->actor)
        return;
    zstr_send(r->actor, "LEAVE");
    zsock_wait(r->actor); /* the actor signals when the Leave is out */
}

void sn_relay_destroy(sn_relay_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sn_relay_t *r = *self_p;
    bool had_actor = r->actor != NULL; /* it closed the seeds' sockets itself */
    zactor_destroy(&r->actor);
    /* acquire: pairs with the actor's last store (it has returned by now) */
    while (had_actor && !atomic_load_explicit(&r->actor_done, memory_order_acquire))
        zclock_sleep(1);
    /* whatever is still queued had nowhere to go: drop it */
    sn__mpsc_node_t *n;
    while ((n = sn__mpsc_pop(&r->outq)))
        free_item((item_t *)n);
    size_t np = atomic_load(&r->npeers);
    for (size_t i = 0; i < np; i++) {
        peer_t *p = &r->peers[i];
        for (size_t k = 0; k < p->nbatch; k++)
            free_item(p->batch[k]);
        free(p->batch);
        free(p->pending);
        for (size_t k = 0; k < p->nunacked; k++)
            free(p->unacked[k].buf);
        free(p->unacked);
        free(p->watch);
        for (size_t k = 0; k < p->nctl; k++)
            free(p->ctl[k].buf);
        free(p->ctl);
        free(p->types);
        zsock_destroy(&p->dealer);
    }
    free(r->peers);
    if (!had_actor)
        drop_seeds(r);
    sn_keys_unmonitor(r->router, &r->router_monitor);
    zsock_destroy(&r->router);
    zactor_destroy(&r->auth);
    zcert_destroy(&r->cert);
    sn__steal_fini(r);
    sn__loc_fini(r);
    sn__members_fini(r);
    free(r->errs);
    free(r->types);
    if (r->efd >= 0)
        close(r->efd);
    if (r->epfd >= 0)
        close(r->epfd);
    free(r);
    *self_p = NULL;
}

void sn_relay_stats(sn_relay_t *r, sn_relay_stats_t *out)
{
    out->frames_in = atomic_load(&r->frames_in);
    out->frames_out = atomic_load(&r->frames_out);
    out->msgs_in = atomic_load(&r->msgs_in);
    out->msgs_out = atomic_load(&r->msgs_out);
    out->bad_frames = atomic_load(&r->bad_frames);
    out->bounced = atomic_load(&r->bounced);
}

const char *sn_relay_endpoint(sn_relay_t *r) { return r->endpoint; }

int sn_relay_out(sn_relay_t *r, char *why, size_t len)
{
    if (!r || !atomic_load_explicit(&r->out, memory_order_acquire)) /* acquire: out_reason is written */
        return 0;
    snprintf(why, len, "%s", r->out_reason);
    return 1;
}

/* ----------------------------------------------------------- client */

/* Takes one frame from the node: 0 with *reply set when it is the answer
 * to request id, SN_EPROTO when it cannot be (err says why: an answer
 * over the limit is the only one coming), SN_ETIMEDOUT to keep waiting. */
static int client_take(zsock_t *s, const char *endpoint, uint64_t id, sn_wire_reply_t *reply, char *err,
                       size_t errlen)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, zsock_resolve(s), ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return SN_ETIMEDOUT;
    }
    int rc = SN_ETIMEDOUT;
    size_t size = zmq_msg_size(&m);
    sn_frame_t f;
    const char *why = "";
    if (size > SN_WIRE_MAX_FRAME) {
        snprintf(err, errlen, "the answer from %s is %zu bytes, over the client's limit of %u bytes (%u MiB, the "
                              "largest frame schednode reads): a call's result must be smaller",
                 endpoint, size, SN_WIRE_MAX_FRAME, SN_WIRE_MAX_FRAME >> 20);
        rc = SN_EPROTO;
    } else if (sn_codec_decode(zmq_msg_data(&m), size, SN_WIRE_MAX_FRAME, &f, &why) == 0) {
        if (f.kind == SN_FRAME_REPLY && f.reply.id == id) {
            *reply = f.reply;
            memset(&f.reply, 0, sizeof f.reply); /* moved out */
            rc = 0;
            err[0] = 0;
        }
        sn_frame_clear(&f);
    } else {
        /* (kept as the reason if no good answer follows) */
        snprintf(err, errlen, "bad answer from %s (%zu bytes): %s", endpoint, size, why);
        sn_frame_clear(&f);
    }
    zmq_msg_close(&m);
    return rc;
}

/* (Returns as relay.h says, and also SN_EREFUSED for a refused key and
 * SN_ENODEDOWN when the node closes the connection before it answers.) */
int sn_client_call(const char *endpoint, const sn_security_t *sec, const sn_wire_request_t *req, int timeout_ms,
                   sn_wire_reply_t *reply, char *err, size_t errlen)
{
    memset(reply, 0, sizeof *reply);
    zsys_init();
    zsys_set_linger(0);
    zcert_t *cert = NULL;
    char key[41] = "";
    if (sec && sec->cert) {
        if (sn_keys_check(sec, err, errlen) != 0 || !(cert = sn_keys_load(sec->cert, err, errlen)))
            return SN_EINVAL;
        if (sn_keys_server_key(sec->authorized, endpoint, key, err, errlen) != 0) {
            zcert_destroy(&cert);
            return SN_EINVAL;
        }
    }
    zsock_t *s = zsock_new(ZMQ_DEALER), *mon = NULL;
    if (!s) {
        snprintf(err, errlen, "cannot create a socket: %s", zmq_strerror(zmq_errno()));
        zcert_destroy(&cert);
        return SN_ENOMEM;
    }
    if (cert)
        sn_keys_client(s, cert, key);
    /* a refusal is said at once, not after the timeout; and so is a node
     * that goes away (the connection closes: a node that exits or is
     * killed, whose kernel closes it) while we wait for its answer */
    mon = sn_keys_monitor(s, true);
    zcert_destroy(&cert);
    if (zsock_connect(s, "%s", endpoint) < 0) {
        snprintf(err, errlen, "bad endpoint %s: %s", endpoint, zmq_strerror(zmq_errno()));
        sn_keys_unmonitor(s, &mon);
        zsock_destroy(&s);
        return SN_EINVAL;
    }
    void *buf;
    size_t len;
    int rc = sn_codec_encode_request(req, &buf, &len);
    if (rc == 0) {
        zmq_send(zsock_resolve(s), buf, len, 0);
        free(buf);
        zmq_pollitem_t it[2] = {{zsock_resolve(s), 0, ZMQ_POLLIN, 0},
                                mon ? (zmq_pollitem_t){zsock_resolve(mon), 0, ZMQ_POLLIN, 0}
                                    : (zmq_pollitem_t){NULL, -1, 0, 0}};
        rc = SN_ETIMEDOUT;
        snprintf(err, errlen, "no answer from %s within %d ms (is a node listening there?%s)", endpoint, timeout_ms,
                 sec && sec->cert ? "" : " a secure cluster needs --cert and --authorized-keys");
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
        while (rc == SN_ETIMEDOUT && now_ns() < deadline) {
            if (zmq_poll(it, 2, (long)((deadline - now_ns()) / 1000000u) + 1) <= 0)
                continue;
            if (it[0].revents & ZMQ_POLLIN) { /* the answer first: it may come just before the close */
                rc = client_take(s, endpoint, req->id, reply, err, errlen);
                continue;
            }
            if (!(it[1].revents & ZMQ_POLLIN))
                continue;
            char why[256], ep[256];
            int kind = sn_keys_failure(mon, sec && sec->cert, why, sizeof why, ep, sizeof ep);
            if (kind == SN_KEYS_CLOSED) {
                while (rc == SN_ETIMEDOUT && (zsock_events(s) & ZMQ_POLLIN)) /* what came before the close */
                    rc = client_take(s, endpoint, req->id, reply, err, errlen);
                if (rc == SN_ETIMEDOUT) {
                    snprintf(err, errlen,
                             "the node at %s went away (closed the connection) while waiting for the answer",
                             endpoint);
                    rc = SN_ENODEDOWN;
                }
            } else if (kind != 0) {
                snprintf(err, errlen, "the node at %s refused this client: %s%s", endpoint, why,
                         !strcmp(why, "key not authorized")
                             ? " (add this client's public certificate to the nodes' authorized-keys directory)"
                             : "");
                rc = SN_EREFUSED;
            }
        }
    }
    sn_keys_unmonitor(s, &mon);
    zsock_destroy(&s);
    return rc;
}

void sn_client_reply_clear(sn_wire_reply_t *reply)
{
    free(reply->reason);
    free(reply->rows);
    sn_payload_destroy(&reply->result);
    memset(reply, 0, sizeof *reply);
}

/* peer.c - what goes out to each peer, reliably and in order.
 *
 * Per peer (peer_t, owned by the I/O thread): the batch of sends being
 * gathered, encoded as one frame (sn__relay_flush_peer); a frame its full pipe
 * refused (pending: backpressure, never loss) and the control frames
 * behind it (ctl: steal handovers, in order); the frames sent and not yet
 * acknowledged (unacked), returned to their senders as nodedown if the
 * peer goes (sn__relay_bounce_peer); the acknowledgements we owe it
 * (sn__relay_send_acks). Also the lists of
 * peers the I/O loop looks at (sn__relay_io_look, io_batch, io_ack). I/O thread only.
 */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "relay_int.h"
#include "peer.h"
#include "watch.h"
#include "steal.h"
#include "awaited.h"
#include "locate.h"

#define BATCH_MAX 4096         /* sends per frame */
#define ACK_EVERY 16           /* batches: acknowledge at once when this many are unacknowledged */
#define ACK_DELAY_NS 4000000u  /* else within this (see sn__relay_send_acks) */
#define LOOK_LATER_NS 5000000u /* a DEALER the I/O thread sent on is looked at within this (look_later) */

/* Puts p on one of the I/O loop's lists (flag: its membership; each
 * list holds every slot once at most, and has room for every slot). */
void sn__relay_io_list(uint32_t *list, size_t *n, bool *flag, sn_relay_t *r, peer_t *p)
{
    (void)r;
    if (*flag)
        return;
    *flag = true;
    list[(*n)++] = p->slot;
}

/* p's dealer needs a look this turn: it woke us, or we sent on it (libzmq
 * may have taken the wake-up of an inbound frame inside the send). */
void sn__relay_io_look(sn_relay_t *r, peer_t *p)
{
    sn__relay_io_list(r->io_look, &r->nio_look, &p->io_look, r, p);
}

/* p's DEALER was sent on: libzmq may have taken the wake-up of a frame
 * that came in on it inside the send, so it needs a look. A worker's send
 * (it holds io_mu while the I/O thread sleeps) lists it for this turn, as
 * sn__relay_drain_here expects. The I/O thread's own sends list it for a
 * look within LOOK_LATER_NS (relay.c: look_at_peers): a send
 * takes a wake-up only when it processes libzmq's commands, at most once
 * per millisecond or so per socket (its throttle), and a look costs two
 * system calls, which on a round trip's path delay the next hop's thread
 * (schedbench xnode-rtt). What such a look finds (an ack, an answer) waits
 * that long at most; a full pipe is looked at once (below). */
static void look_later(sn_relay_t *r, peer_t *p)
{
    if (!sn__relay_on_io_thread(r)) {
        sn__relay_io_look(r, p);
        return;
    }
    if (!r->nio_later)
        r->later_due_ns = sn__relay_now_ns() + LOOK_LATER_NS;
    sn__relay_io_list(r->io_later, &r->nio_later, &p->io_later, r, p);
}

/* p's DEALER, made at the first send to it; NULL if it cannot be. */
static void *dealer_of(sn_relay_t *r, peer_t *p)
{
    if (!p->dealer && p->dial) { /* the first send to it: connect now (members.c, connect_to) */
        sn__relay_set_dealer(r, p, sn__relay_dealer_to(r, p->endpoint, p->public_key, NULL));
        if (!p->dealer) {
            p->dial = false;
            SNLOG_ERROR(r, "cannot connect to node %" PRIu32 " at %s: %s", p->node, p->endpoint,
                        zmq_strerror(zmq_errno()));
        }
    }
    return p->dealer ? zsock_resolve(p->dealer) : NULL;
}

/* What a send's outcome asks of the I/O loop: a look at p soon (sent), or
 * now (refused: the pipe is full, or not yet connected, and its POLLOUT
 * wakes us). */
static bool sent_or_not(sn_relay_t *r, peer_t *p, bool sent)
{
    if (sent)
        look_later(r, p);
    else
        sn__relay_io_look(r, p);
    return sent;
}

bool sn__relay_try_send(sn_relay_t *r, peer_t *p, const void *buf, size_t len)
{
    void *d = dealer_of(r, p);
    return d && sent_or_not(r, p, zmq_send(d, buf, len, ZMQ_DONTWAIT) >= 0);
}

/* libzmq is done with a shared buffer (any thread: its I/O thread calls
 * this). acq_rel: the last holder's free comes after every other
 * holder's use. */
static void unshare(void *data, void *hint)
{
    _Atomic uint32_t *refs = hint;
    if (atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) == 1) {
        free(data);
        free((void *)refs);
    }
}

void sn__relay_drop_buf(void *buf, _Atomic uint32_t *refs)
{
    if (refs)
        unshare(buf, (void *)refs);
    else
        free(buf);
}

/* Sends buf, kept by us until acknowledged, without a copy: libzmq holds
 * a reference of its own until it has written it (*refs: made at the
 * first try). A frame in libzmq's pipe is then counted once, in unacked,
 * and the backlog's byte bound is the memory it takes. */
static bool send_shared(sn_relay_t *r, peer_t *p, void *buf, size_t len, _Atomic uint32_t **refs)
{
    void *d = dealer_of(r, p);
    if (!d)
        return false;
    if (!*refs) {
        if (!(*refs = malloc(sizeof **refs)))
            return sn__relay_try_send(r, p, buf, len); /* (no memory: a copy) */
        atomic_init(*refs, 1);
    }
    /* release: libzmq's thread drops this reference (unshare, acq_rel) and
     * so sees the buffer and the count as written here; the hand-off
     * through libzmq's pipe is invisible to TSan, this pair is not */
    atomic_fetch_add_explicit(*refs, 1, memory_order_release);
    zmq_msg_t m;
    zmq_msg_init_data(&m, buf, len, unshare, (void *)*refs);
    if (zmq_msg_send(&m, d, ZMQ_DONTWAIT) >= 0)
        return sent_or_not(r, p, true);
    zmq_msg_close(&m); /* (libzmq's reference goes: unshare) */
    return sent_or_not(r, p, false);
}

/* The backlog to p changed: past max_backlog it is full (senders here
 * wait: sn__throttle); at half of it, no longer (they go on). Guarded by
 * test_relay_edges backpressure and tests/cut_memory.sh. */
static void backlog_changed(sn_relay_t *r, peer_t *p)
{
    size_t b = p->bytes + (p->pending ? p->pending_len : 0) + p->unacked_bytes;
    bool full = atomic_load_explicit(&p->full, memory_order_relaxed);
    if (!full && b > r->max_backlog) {
        atomic_store_explicit(&p->full, 1, memory_order_relaxed);
        SNLOG_DEBUG(r, "the backlog to node %" PRIu32 " is full (%zu bytes): its senders here wait", p->node, b);
    } else if (full && b <= r->max_backlog / 2) {
        atomic_store_explicit(&p->full, 0, memory_order_relaxed);
        SNLOG_DEBUG(r, "the backlog to node %" PRIu32 " has room (%zu bytes): %zu senders go on", p->node, b,
                    p->waiters.n);
        sn__relay_let_go(r, &p->waiters);
    }
}

/* Keeps a sent frame until the peer acknowledges it. */
static void keep(peer_t *p, void *buf, size_t len, uint64_t seq, _Atomic uint32_t *refs)
{
    sent_t *u = sn__grow(p->unacked, &p->capunacked, p->nunacked, sizeof *u, 64, 0);
    if (!u) { /* out of memory: it is sent, we just cannot bounce it later */
        sn__relay_drop_buf(buf, refs);
        return;
    }
    p->unacked = u;
    if (!p->nunacked)
        p->acked_ns = sn__relay_now_ns(); /* (the wait for an ack starts) */
    p->unacked[p->nunacked++] = (sent_t){buf, len, seq, refs};
    p->unacked_bytes += len;
}

/* The peer has every batch up to seq: forget them. */
void sn__relay_acked(sn_relay_t *r, peer_t *p, uint64_t seq)
{
    size_t k = 0;
    while (k < p->nunacked && p->unacked[k].seq <= seq) {
        p->unacked_bytes -= p->unacked[k].len;
        sn__relay_drop_buf(p->unacked[k].buf, p->unacked[k].refs);
        k++;
    }
    if (k) {
        memmove(p->unacked, p->unacked + k, (p->nunacked - k) * sizeof *p->unacked);
        p->nunacked -= k;
        p->acked_ns = sn__relay_now_ns();
        backlog_changed(r, p);
    }
}

/* The chunk of a big frame one Part carries: a Part's envelope (its
 * numbers, the sender's) takes well under PART_ROOM of max_frame. */
#define PART_ROOM 256

/* Sends p's pending frame, whole or (over max_frame) as Parts from
 * pending_off on; true once all of it is out (then kept until acked). */
/* Sends what is left of frame buf from *off on as Parts of at most
 * max_frame (a batch numbered seq, or a control frame: seq 0); true once
 * all of it is out. Any frame may be bigger than max_frame: a batch with
 * a big message, a steal's commit carrying the messages that follow its
 * processes (test_relay_edges sizes, chaos.sh). */
static bool send_parts(sn_relay_t *r, peer_t *p, const void *frame, size_t total, uint64_t seq, size_t *off)
{
    size_t chunk = r->max_frame - PART_ROOM;
    while (*off < total) {
        size_t n = total - *off < chunk ? total - *off : chunk;
        void *buf;
        size_t len;
        if (sn_codec_encode_part(r->node, r->incarnation, seq, total, *off, (const unsigned char *)frame + *off, n,
                                 &buf, &len) != 0)
            return false; /* (no memory: again next turn) */
        _Atomic uint32_t *refs = NULL;
        bool sent = send_shared(r, p, buf, len, &refs);
        sn__relay_drop_buf(buf, refs);
        if (!sent)
            return false;
        *off += n;
    }
    return true;
}

static bool send_pending(sn_relay_t *r, peer_t *p)
{
    if (p->pending_len <= r->max_frame) {
        if (!send_shared(r, p, p->pending, p->pending_len, &p->pending_refs))
            return false;
    } else if (!send_parts(r, p, p->pending, p->pending_len, p->pending_seq, &p->pending_off)) {
        return false;
    }
    sn__add(&r->frames_out, 1);
    keep(p, p->pending, p->pending_len, p->pending_seq, p->pending_refs);
    p->pending = NULL;
    p->pending_refs = NULL;
    p->pending_off = 0;
    return true;
}

/* What a queued send counts for in p->bytes (its share of a frame). */
static size_t item_bytes(const item_t *it)
{
    return 64 + (it->s.payload ? it->s.payload->len : 0);
}

/* Encodes the oldest sends of p's batch (from *head on: the caller
 * drops the first *head) into the pending frame: as many as
 * fit in max_frame (at least one; BATCH_MAX at most), so that a frame is
 * bigger than max_frame only when one message is, and the encoding's copy
 * adds a frame to what a backlog holds, not the backlog again (a batch
 * that grew behind a refused frame is sent as many: tests/cut_memory.sh).
 * False if it cannot now (no memory: again next turn). */
static bool encode_batch(sn_relay_t *r, peer_t *p, size_t *head)
{
    item_t **b = p->batch + *head;
    size_t left = p->nbatch - *head, n = 0, bytes = 0;
    while (n < left && n < BATCH_MAX && (!n || bytes + item_bytes(b[n]) <= r->max_frame))
        bytes += item_bytes(b[n++]);
    sn_wire_send_t *arr = malloc(n * sizeof *arr);
    if (!arr)
        return false;
    size_t msgs = 0;
    for (size_t i = 0; i < n; i++) {
        arr[i] = b[i]->s;
        if (r->hop_trace)
            sn__hop_stamp(arr[i].payload, 0); /* on its way to zmq_send */
        msgs += sn__relay_for_process(arr[i].kind);
    }
    void *buf = NULL;
    size_t len = 0;
    uint64_t seq = p->next_seq + 1;
    int rc = sn_codec_encode_sends_to(r->node, r->incarnation, seq, p->incarnation, arr, n, &buf, &len);
    free(arr);
    if (rc != 0)
        return false;
    p->next_seq = seq;
    sn__add(&r->msgs_out, msgs);
    sn__add(&p->m_msgs_out, msgs);
    for (size_t i = 0; i < n; i++)
        sn__relay_free_item(b[i]);
    *head += n;
    p->bytes -= bytes;
    p->pending = buf;
    p->pending_len = len;
    p->pending_seq = seq;
    p->pending_off = 0;
    return true;
}

void sn__relay_flush_peer(sn_relay_t *r, peer_t *p)
{
    if (p->pending && !send_pending(r, p))
        return;
    while (p->nctl) { /* in order, behind the pending batch */
        sent_t *c = &p->ctl[0];
        if (c->len <= r->max_frame ? !sn__relay_try_send(r, p, c->buf, c->len)
                                   : !send_parts(r, p, c->buf, c->len, 0, &p->ctl_off))
            return;
        p->ctl_off = 0;
        free(p->ctl[0].buf);
        memmove(p->ctl, p->ctl + 1, --p->nctl * sizeof *p->ctl);
        sn__add(&r->frames_out, 1);
    }
    size_t head = 0;
    while (head < p->nbatch && encode_batch(r, p, &head) && send_pending(r, p))
        ;
    if (head) { /* (none taken: the batch may be unallocated) */
        memmove(p->batch, p->batch + head, (p->nbatch - head) * sizeof *p->batch);
        p->nbatch -= head;
    }
    backlog_changed(r, p);
}

/* Every send in an encoded frame goes back to its sender with `error`.
 * (This node's own frames are within the decoding budget, codec.h: a
 * batch costs at most 13 times its size, test_codec.) */
static void bounce_frame(sn_relay_t *r, const void *buf, size_t len, int error, uint32_t at)
{
    sn_frame_t f;
    if (sn_codec_decode(buf, len, SIZE_MAX, &f, NULL) == 0) {
        for (size_t i = 0; i < f.nsends; i++)
            sn__relay_bounce_local(r, &f.sends[i], error, at);
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
    sn_pid_t *l = sn__grow(fg->lost, &fg->cap, fg->n, sizeof *l, 16, 0);
    if (!l)
        return 0; /* (no memory: its home does not hear; sends to it may go round until the hop bound) */
    fg->lost = l;
    fg->lost[fg->n++] = pid;
    return 0;
}

/* The bounce queue. A peer that goes takes with it every send not yet
 * acknowledged: up to its pipe's high-water mark of frames, each up to
 * BATCH_MAX sends, so millions. Returned to their senders all at once,
 * they held the I/O thread 350 ms in a plain build (faults.sh: a stream
 * of 5 M to the node killed), 1.3 s under TSan, and a node that long
 * without a turn answers no probe: its other members may declare it down
 * too. So they wait here, oldest first, and each turn takes a slice
 * (SN_TURN_SLICE_NS, at a frame's grain); while any wait, every other send
 * that bounces on its way out (route.c, sn__relay_bounce_item) joins the
 * end, so that a sender sees its errors in the order it sent. The queue
 * is the holder of io_mu's (the I/O thread, or a worker draining). */
static void bounce_one(sn_relay_t *r, bounce_t *b)
{
    if (b->buf) {
        bounce_frame(r, b->buf, b->len, b->error, b->at);
        sn__relay_drop_buf(b->buf, b->refs);
    } else {
        sn__relay_bounce_local(r, &b->it->s, b->error, b->at);
        sn__relay_free_item(b->it);
    }
}

/* To the end of the queue (out of memory for it: back now, out of its
 * turn). (sn__relay_bounce_some empties it to its start when done.) */
static void bq_push(sn_relay_t *r, bounce_t b)
{
    bounce_t *q = sn__grow(r->bq, &r->bq_cap, r->bq_n, sizeof *q, 64, 0);
    if (!q) {
        bounce_one(r, &b);
        return;
    }
    r->bq = q;
    r->bq[r->bq_n++] = b;
}

void sn__relay_bounce_item(sn_relay_t *r, item_t *it, int error, uint32_t at)
{
    bounce_t b = {NULL, 0, NULL, it, error, at};
    if (r->bq_head == r->bq_n)
        bounce_one(r, &b); /* nothing waits: it need not either */
    else
        bq_push(r, b);
}

void sn__relay_bounce_some(sn_relay_t *r)
{
    uint64_t until = 0;
    sn__relay_slice_over(&until); /* (it starts now) */
    size_t k = 0;
    while (r->bq_head < r->bq_n) {
        bounce_t b = r->bq[r->bq_head++]; /* (a copy: bounce_one may grow the queue, moving it) */
        bounce_one(r, &b);
        /* (a frame is up to BATCH_MAX sends; a send is one) */
        if ((++k % 16 == 0 || b.buf) && sn__relay_slice_over(&until))
            break;
    }
    if (r->bq_head == r->bq_n)
        r->bq_head = r->bq_n = 0;
}

void sn__relay_bounce_fini(sn_relay_t *r)
{
    for (size_t i = r->bq_head; i < r->bq_n; i++) {
        if (r->bq[i].buf)
            sn__relay_drop_buf(r->bq[i].buf, r->bq[i].refs);
        else
            sn__relay_free_item(r->bq[i].it);
    }
    free(r->bq);
    r->bq = NULL;
    r->bq_head = r->bq_n = r->bq_cap = 0;
}

void sn__relay_bounce_peer(sn_relay_t *r, peer_t *p, int error, bool gone)
{
    sn__relay_watches_lost(r, p); /* every process here watching one there learns (watch.c) */
    /* oldest first, so a sender sees its errors in the order it sent;
     * an unacknowledged send may have arrived before the peer died: the
     * error says the node went down, not that the message was lost */
    for (size_t i = 0; i < p->nunacked; i++)
        bq_push(r, (bounce_t){p->unacked[i].buf, p->unacked[i].len, p->unacked[i].refs, NULL, error, p->node});
    p->nunacked = 0;
    p->unacked_bytes = 0;
    if (p->pending) { /* (Parts of it sent: the peer drops a big batch cut short) */
        bq_push(r, (bounce_t){p->pending, p->pending_len, p->pending_refs, NULL, error, p->node});
        p->pending = NULL;
        p->pending_refs = NULL;
        p->pending_off = 0;
    }
    for (size_t i = 0; i < p->nbatch; i++)
        bq_push(r, (bounce_t){NULL, 0, NULL, p->batch[i], error, p->node});
    p->nbatch = 0;
    p->bytes = 0;
    backlog_changed(r, p);
    sn__relay_bounce_some(r);            /* (the first slice now) */
    for (size_t i = 0; i < p->nctl; i++) /* handovers with it end (steal.c) */
        free(p->ctl[i].buf);
    p->nctl = 0;
    p->ctl_off = 0;
    sn__steal_peer_gone(r, p, gone);
    sn__await_peer_down(r, p->node, gone); /* the parents of children there (awaited.c) */
    if (gone) { /* the path through it ended: a process that moved on from there is found by where it was
                 * seen last (locate.c); one seen last there is gone with it (its DOWNs came from the
                 * watches above) */
        struct forget fg = {r, NULL, 0, 0};
        size_t moved = 0, n = sn__migrate_forget_node(r->sched, p->node, forget_instead, &fg, &moved);
        if (n || moved)
            SNLOG_INFO(r,
                       "node %" PRIu32 "'s run ended: %zu forwarding entries through it dropped, "
                       "%zu point past it now",
                       p->node, n, moved);
        for (size_t i = 0; i < fg.n; i++)
            if (!sn__migrate_here(r->sched, fg.lost[i])) /* (an entry left from before it came back here) */
                sn__loc_left_for_gone(r, fg.lost[i]);
        free(fg.lost);
    }
    sn__loc_peer_down(r, p->node, gone);
}

void sn__relay_send_ordered(sn_relay_t *r, peer_t *p, void *buf, size_t len)
{
    if (p->nbatch)
        sn__relay_flush_peer(r, p); /* what was queued before goes first */
    if (!p->pending && !p->nctl && len <= r->max_frame && sn__relay_try_send(r, p, buf, len)) {
        sn__add(&r->frames_out, 1);
        free(buf);
        return;
    }
    sent_t *c = sn__grow(p->ctl, &p->capctl, p->nctl, sizeof *c, 8, 0);
    if (!c) { /* out of memory: the handover times out and is undone */
        free(buf);
        return;
    }
    p->ctl = c;
    p->ctl[p->nctl++] = (sent_t){buf, len, 0, NULL};
}

void sn__relay_batch_add(sn_relay_t *r, peer_t *p, item_t *it)
{
    if (atomic_load_explicit(&p->full, memory_order_relaxed) && r->backlog_fails && !it->forwarded &&
        it->s.kind == SN_EV_MESSAGE && !sn_pid_is_none(it->s.from)) {
        sn__relay_bounce_item(r, it, SN_EFULL, p->node); /* (--backlog-full fail: back at once) */
        return;
    }
    if (atomic_load_explicit(&p->full, memory_order_relaxed))
        sn__relay_hold_sender(r, &p->waiters, it); /* (before it goes: a flush frees it) */
    item_t **b = sn__grow(p->batch, &p->cap, p->nbatch, sizeof *b, 256, 0);
    if (!b) {
        sn__relay_bounce_local(r, &it->s, SN_ENOMEM, p->node);
        sn__relay_free_item(it);
        return;
    }
    p->batch = b;
    p->batch[p->nbatch++] = it;
    p->bytes += 64 + (it->s.payload ? it->s.payload->len : 0);
    sn__relay_io_list(r->io_batch, &r->nio_batch, &p->io_batch, r, p); /* sent at the end of the drain at the latest */
    if (!p->pending && !p->nctl && (p->nbatch >= BATCH_MAX || p->bytes >= r->max_frame / 2))
        sn__relay_flush_peer(r, p);
    else
        backlog_changed(r, p);
}

/* A receiver learns of a batch it did not take from the next one
 * (inbound.c, in_order); when none follows, a batch unacknowledged for
 * GAP_PROBE_NS is followed by an empty one, once per GAP_PROBE_NS, so
 * that the last batch of a stream is refused too, not kept for good
 * (test_relay_edges dropped_frame drops the last one). */
#define GAP_PROBE_NS 1000000000u
void sn__relay_probe_gaps(sn_relay_t *r, uint64_t now)
{
    SN__FOR_PEERS(r, p)
    {
        if (!p->nunacked || p->pending || p->nbatch || p->nctl ||
            atomic_load_explicit(&p->down, memory_order_relaxed) || now - p->acked_ns < GAP_PROBE_NS)
            continue;
        p->acked_ns = now;
        void *buf;
        size_t len;
        if (sn_codec_encode_sends_to(r->node, r->incarnation, p->next_seq + 1, p->incarnation, NULL, 0, &buf, &len) !=
            0)
            continue;
        p->next_seq++;
        p->pending = buf;
        p->pending_len = len;
        p->pending_seq = p->next_seq;
        p->pending_off = 0;
        send_pending(r, p);
    }
}

void sn__relay_refused(sn_relay_t *r, peer_t *p, uint64_t from, uint64_t to, int error)
{
    size_t k = 0;
    for (size_t i = 0; i < p->nunacked; i++) {
        sent_t *u = &p->unacked[i];
        if (u->seq < from || u->seq > to) {
            p->unacked[k++] = *u;
            continue;
        }
        SNLOG_WARN(r, "node %" PRIu32 " did not take batch %" PRIu64 " (%zu bytes): its sends come back (%s)", p->node,
                   u->seq, u->len, sn_strerror(error));
        p->unacked_bytes -= u->len;
        bq_push(r, (bounce_t){u->buf, u->len, u->refs, NULL, error, p->node});
    }
    if (k != p->nunacked) {
        p->nunacked = k;
        sn__relay_bounce_some(r);
        backlog_changed(r, p);
    }
}

void sn__relay_refuse(sn_relay_t *r, peer_t *p, uint64_t from, uint64_t to, int error)
{
    refusal_t *f = sn__grow(p->refusals, &p->caprefusals, p->nrefusals, sizeof *f, 4, 0);
    if (!f)
        return; /* (no memory: the next ack frees them unseen; logged as the bad frame it was) */
    p->refusals = f;
    p->refusals[p->nrefusals++] = (refusal_t){from, to, error};
    if (to > p->recv_seq)
        p->recv_seq = to;               /* (settled: one that comes after all is dropped) */
    p->ack_due_ns = sn__relay_now_ns(); /* told at once */
    if (p->ident_len)
        sn__relay_io_list(r->io_ack, &r->nio_ack, &p->io_ack, r, p);
}

void sn__relay_answer(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const void *buf, size_t len)
{
    void *router = zsock_resolve(r->router);
    r->router_look = true; /* (a send may take the wake-up of an inbound frame) */
    /* ROUTER_MANDATORY: an unknown client id fails here instead of vanishing */
    if (zmq_send(router, ident, ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        zmq_send(router, buf, len, ZMQ_DONTWAIT);
}

void sn__relay_send_reply(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const sn_wire_reply_t *rep)
{
    void *buf;
    size_t len;
    if (sn_codec_encode_reply(r->node, r->incarnation, rep, &buf, &len) != 0)
        return;
    size_t result = rep->result ? rep->result->len : 0;
    if (len > SN_CLIENT_MAX_ANSWER || result > r->max_msg) { /* (the client would not take it) */
        free(buf);
        char why[256];
        snprintf(why, sizeof why, "the result is %zu bytes, over the largest message, %zu bytes (--max-message)",
                 result, r->max_msg < SN_MAX_MESSAGE ? r->max_msg : SN_MAX_MESSAGE);
        sn_wire_reply_t small = {.id = rep->id, .error = SN_ETOOBIG, .reason = why, .pid = rep->pid};
        if (sn_codec_encode_reply(r->node, r->incarnation, &small, &buf, &len) != 0)
            return;
    }
    sn__relay_answer(r, ident, ident_len, buf, len);
    free(buf);
}

/* Acknowledges the batches received, one Ack per peer, on the connection
 * they came in on. Acknowledgements are delayed a little: a peer sending a frame a
 * millisecond (a process finishing for a remote parent, say) would
 * otherwise get an ack frame back for each, and each costs a wake-up of
 * two threads on both nodes. An ack goes out once ACK_EVERY batches are
 * unacknowledged or the oldest has waited ACK_DELAY_NS; the sender keeps
 * its frames that much longer (and a node that dies bounces them as
 * nodedown, which means "not confirmed": see docs/guarantees.md). */
/* One Ack to p on its connection: every batch up to upto, and the
 * refusal f (NULL: none); false if it could not go (tried again
 * ACK_DELAY_NS later, not every turn: a peer whose connection is gone
 * would spin this thread until it is found down or back). */
static bool ack_out(sn_relay_t *r, peer_t *p, uint64_t upto, const refusal_t *f, uint64_t now)
{
    void *router = zsock_resolve(r->router), *buf;
    size_t len;
    if (sn_codec_encode_ack(r->node, r->incarnation, upto, f ? f->from : 0, f ? f->to : 0, f ? f->error : 0, &buf,
                            &len) != 0)
        return false;
    r->router_look = true;
    bool sent = zmq_send(router, p->ident, p->ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
                zmq_send(router, buf, len, ZMQ_DONTWAIT) >= 0;
    free(buf);
    p->ack_retry_ns = sent ? 0 : now + ACK_DELAY_NS;
    return sent;
}

void sn__relay_send_acks(sn_relay_t *r, uint64_t now)
{
    for (size_t i = 0; i < r->nio_ack;) { /* the peers with batches not yet acknowledged */
        peer_t *p = sn__relay_peer(r, r->io_ack[i]);
        if ((p->recv_seq <= p->acked_seq && !p->nrefusals) || p->ident_len == 0) { /* (done, or reset) */
            p->io_ack = false;
            r->io_ack[i] = r->io_ack[--r->nio_ack];
            continue;
        }
        i++;
        if (now < p->ack_retry_ns)
            continue;
        /* refusals first, each before any ack past it: a sender frees
         * what an ack covers, and a batch this node did not take must go
         * back to its senders instead (test_relay_edges dropped_frame) */
        while (p->nrefusals && ack_out(r, p, p->acked_seq, &p->refusals[0], now))
            memmove(p->refusals, p->refusals + 1, --p->nrefusals * sizeof *p->refusals);
        if (p->nrefusals)
            continue;
        uint64_t upto = sn__relay_ackable(p); /* (short of a frame with a message held: steal.c, locate.c) */
        if (upto <= p->acked_seq) {           /* held: looked at again in ACK_DELAY_NS, not every turn */
            p->ack_retry_ns = now + ACK_DELAY_NS;
            continue;
        }
        if (p->recv_seq - p->acked_seq < ACK_EVERY && now < p->ack_due_ns)
            continue;
        if (ack_out(r, p, upto, NULL, now)) {
            p->acked_seq = upto;
            if (upto == p->recv_seq)
                p->ack_due_ns = 0;
        }
    }
}

void sn__relay_ack_later(sn_relay_t *r, peer_t *p, uint64_t seq, const unsigned char *ident, size_t ident_len)
{
    if (ident_len > sizeof p->ident || seq <= p->recv_seq)
        return;
    p->recv_seq = seq;
    if (!p->ack_due_ns)
        p->ack_due_ns = sn__relay_now_ns() + ACK_DELAY_NS;
    sn__relay_io_list(r->io_ack, &r->nio_ack, &p->io_ack, r, p);
    memcpy(p->ident, ident, ident_len);
    p->ident_len = ident_len;
}

/* When the next acknowledgement is due (UINT64_MAX: none). */
uint64_t sn__relay_acks_due_ns(sn_relay_t *r)
{
    uint64_t next = UINT64_MAX;
    for (size_t i = 0; i < r->nio_ack; i++) {
        peer_t *p = sn__relay_peer(r, r->io_ack[i]);
        uint64_t due = p->ack_retry_ns > p->ack_due_ns ? p->ack_retry_ns : p->ack_due_ns;
        if (due && due < next)
            next = due;
    }
    return next;
}

zsock_t *sn__relay_dealer_to(sn_relay_t *r, const char *endpoint, const char *server_key, zsock_t **monitor)
{
    zsock_t *d = zsock_new(ZMQ_DEALER);
    if (!d)
        return NULL;
    if (r->cert)
        sn_keys_client(d, r->cert, server_key); /* before connecting */
    zsock_set_sndhwm(d, SN_SNDHWM);
    zsock_set_rcvhwm(d, SN_RCVHWM);
    zsock_set_maxmsgsize(d, (int64_t)r->max_frame * 2 + 1024);
    zsock_set_linger(d, 500); /* a Leave or a last batch gets out at exit */
    /* The monitor before the connect: libzmq ends a connection whose
     * handshake failed for a protocol error (a security mismatch) for
     * good, with no retry, so an event of that first attempt, sent before
     * anyone listened, was the only one there would be (an --insecure
     * node under ASan waited out its join timeout) */
    if (monitor)
        *monitor = sn_keys_monitor(d, false);
    if (zsock_connect(d, "%s", endpoint) < 0) {
        if (monitor)
            sn_keys_unmonitor(d, monitor);
        zsock_destroy(&d);
    }
    return d;
}

/* A wildcard address cannot be advertised: peers could not dial it. */

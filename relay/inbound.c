/* inbound.c - what comes in: frames read from a socket, checked, and
 * dispatched (sn__relay_inbound_frame): sends to processes here, acks,
 * membership (members.c), steals (steal.c), location (locate.c) and
 * client requests; a bad frame is counted, logged (rate-limited) and
 * dropped (sn__relay_bad). I/O thread only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relay_int.h"
#include "move.h"
#include "drain.h"
#include "peer.h"
#include "watch.h"
#include "manage.h"
#include "members.h"
#include "steal.h"
#include "awaited.h"
#include "locate.h"
#include "names.h"
#include "services.h"

#define INBOUND_BUDGET 64 /* frames (each up to BATCH_MAX sends) per socket per loop turn */
#define GUEST_SENDS 16    /* a batch of at most this many sends may wake a process run here (sends_in) */

/* --------------------------------------------------------- I/O side */

/* Counts and logs a dropped frame: at most one line per second per peer
 * (plus one shared by senders that are not peers, which cannot be told
 * apart), each with the count of the quiet ones since. */
void sn__relay_bad(sn_relay_t *r, const char *why, uint32_t node)
{
    sn__add(&r->bad_frames, 1);
    peer_t *p = node ? sn__relay_find_peer(r, node) : NULL;
    char more[64];
    if (sn__log_limit(p ? &p->bad_log : &r->bad_log, sn__relay_now_ns(), 1000000000u, more, sizeof more))
        SNLOG_WARN(r, "dropped a bad frame from %s %" PRIu32 ": %s%s", p ? "peer" : "node", node, why, more);
}

static void inbound_send_(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s);
static void part_in(sn_relay_t *r, peer_t *p, sn_frame_t *f, const unsigned char *ident, size_t ident_len);

/* WATCHED from node `from`: the watcher's record of that monitor moves
 * under it, so that its failure reports the monitor (nodedown). */
static void watched_at(sn_relay_t *r, const peer_t *from, const sn_wire_send_t *s)
{
    if (!from)
        return;
    SN__FOR_PEERS(r, p)
    {
        if (p == from)
            continue;
        if (sn__watch(p, s->to, s->from, s->tag, false)) {
            if (!sn__watch((peer_t *)from, s->to, s->from, s->tag, true)) /* (no memory) */
                sn__send_down(r->sched, s->from, s->to, s->tag, SN_ENODEDOWN, NULL);
            break;
        }
    }
    /* (none: the record was under `from` already, or its DOWN came) */
    sn__watch_confirm((peer_t *)from, s->to, s->from, s->tag);
}

/* A message to this node's registry (its PID to other nodes is (node,
 * SN_NAMES_SERIAL): names.c) goes to the registry process; one to its
 * supervisor ((node, SN_SERVICES_SERIAL): services.c) to that process. */
static void names_here(sn_relay_t *r, sn_wire_send_t *s)
{
    if (s->kind != SN_EV_MESSAGE || s->to.node != r->node ||
        (s->to.serial != SN_NAMES_SERIAL && s->to.serial != SN_SERVICES_SERIAL))
        return;
    sn_pid_t reg = s->to.serial == SN_NAMES_SERIAL ? sn__names_registry(r) : sn__services_process(r);
    if (!sn_pid_is_none(reg))
        s->to = reg;
}

/* A send that arrived from node `from` (NULL: held here, locate.c) for a
 * process here. What the scheduler passes on from here (the process moved
 * on, an error back to a sender elsewhere) is a forward: see passing_on. */
void sn__relay_inbound_send(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s)
{
    sn_passing_t saved;
    sn__relay_pass_begin(s, &saved);
    names_here(r, s);
    inbound_send_(r, from, s);
    sn__relay_pass_end(&saved);
}

/* GONE: a process that moved from here to `from` ended: so does our
 * entry, and the nodes it came here from hear it in turn. */
static void gone_here(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s)
{
    sn__loc_ended(r, s->to);
    uint32_t origins[256]; /* (the nodes it came here from, one per visit: more are not told) */
    size_t n = from ? sn__migrate_gone(r->sched, s->to, from->node, origins, 256) : 0;
    for (size_t k = 0; k < n && k < 256; k++)
        if (origins[k] != r->node)
            sn__relay_deliver(r, s->to, SN_PID_NONE, 0, SN_RELAY_GONE, 0, origins[k], NULL);
    sn_payload_destroy(&s->payload);
}

/* A monitor request for a process here (its DOWN goes back through
 * sn__relay_deliver). Our own request, come back from another node (its
 * path led through here again): the record of where it went is done
 * with; what sn__monitor does now answers it (a monitor here, a DOWN
 * here, or on again with a new record: sn__relay_route). With no record
 * it was answered already, or demonitored: dropped (sn__watch_returned).
 * One of ours from this node's own queue (from NULL: held while the
 * process settled here, locate.c) went nowhere yet: no record to look for. */
static void monitor_here(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s)
{
    if (from && s->from.node == r->node && !sn__watch_returned(r, s)) {
        sn_payload_destroy(&s->payload); /* answered already, or demonitored: nothing to do */
        return;
    }
    sn__monitor(r->sched, s->to, s->from, s->tag);
    if (s->from.node != r->node && sn__migrate_here(r->sched, s->to))
        /* held here: the watcher's node moves its record to us (it is
         * under the node it sent the request to: the home, a node its
         * cache named, or one the process has left since) */
        sn__relay_deliver(r, s->to, s->from, s->tag, SN_WIRE_WATCHED, 0, s->from.node, NULL);
    sn_payload_destroy(&s->payload);
}

/* A message for a process here (or one that moved on from here). */
static int message_here(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s)
{
    if (r->hop_trace && from) { /* read, then handed to the scheduler */
        sn__hop_stamp(s->payload, r->hop_recv_ns);
        sn__hop_stamp(s->payload, 0);
    }
    int rc = sn__deliver_inbound(r->sched, s->to, s->from, s->tag, SN_EV_MESSAGE, 0, &s->payload);
    if (rc == 0)
        sn__loc_forwarded(r, from, s->to); /* if it went on: tell `from` where it is now */
    return rc;
}

/* The result (RESULT) or DOWN (CHILD_DOWN) of child s->from for its
 * parent s->to, which gets it unless it had nodedown for it already
 * (awaited.c: one outcome per child). */
static void child_outcome(sn_relay_t *r, sn_wire_send_t *s)
{
    int rc = sn__await_outcome(r, s->from) ? -1
             : s->kind == SN_RELAY_RESULT
                 ? sn__send_result(r->sched, s->to, s->from, s->tag, s->error, &s->payload)
                 : sn__send_child_down(r->sched, s->to, s->from, s->tag, s->error, &s->payload);
    if (rc != 0)
        sn_payload_destroy(&s->payload);
}

static void inbound_send_(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s)
{
    int rc = 0;
    if (from && sn__relay_for_process(s->kind))
        sn__add(&r->msgs_in, 1);
    if (from && (s->kind == SN_EV_MESSAGE || s->kind == SN_WIRE_FLUSH) && sn__steal_hold(r, from, s))
        return; /* for a process on its way here: in after its commit (steal.c) */
    if (from && sn__loc_hold_passing(r, from->node, s, false))
        return; /* for a process settling here: in after its arrival's flush (locate.c) */
    switch (s->kind) {
    case SN_EV_MESSAGE: /* for a process here, or one that moved on from here */
        rc = message_here(r, from, s);
        break;
    case SN_RELAY_GONE:
        gone_here(r, from, s);
        return;
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
        sn__relay_return_error(r, s, s->to, s->from, s->error);
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
        if (sn__relay_unwatch(r, s->from, s->to, s->tag))
            sn__send_down(r->sched, s->to, s->from, s->tag, s->error, &s->payload);
        sn_payload_destroy(&s->payload);
        return;
    }
    case SN_RELAY_MONITOR:
        monitor_here(r, from, s);
        return;
    case SN_WIRE_WATCHED: /* from's monitor of to is held on the node that sent this */
        watched_at(r, from, s);
        sn_payload_destroy(&s->payload);
        return;
    case SN_RELAY_DEMONITOR:
        sn__demonitor(r->sched, s->to, s->from, s->tag);
        sn_payload_destroy(&s->payload);
        return;
    case SN_WIRE_AWAITED: /* a child spawned here moved on (awaited.c) */
        sn__await_notice(r, s);
        sn_payload_destroy(&s->payload);
        return;
    case SN_RELAY_RESULT:     /* a child that ran elsewhere finished */
    case SN_RELAY_CHILD_DOWN: /* (spawned with a monitor: no watch record here) */
        child_outcome(r, s);
        return;
    }
    if (rc == 0)
        return;
    /* Undeliverable here: back to the sender's node, payload included (on
     * our outbound connection, in order with everything else we send it) */
    sn__add(&r->bounced, 1);
    if (!sn_pid_is_none(s->from))
        sn__relay_return_error(r, s, s->from, s->to, rc);
    sn_payload_destroy(&s->payload);
}

typedef struct call_ctx {
    sn_relay_t *relay;
    uint64_t id;
    unsigned char ident[256];
    size_t ident_len;
} call_ctx_t;

static void call_done(sn_sched_t *sched, sn_pid_t pid, sn_status_t status, int error, sn_payload_t **result, void *arg)
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
        sn__relay_enqueue(c->relay, &it->base);
    }
    free(c);
}

/* What an answer given later (call, migrate) needs of its request.
 * Caller owns it; NULL if out of memory. */
static call_ctx_t *call_ctx(sn_relay_t *r, uint64_t id, const unsigned char *ident, size_t ident_len)
{
    call_ctx_t *c = ident_len <= sizeof c->ident ? malloc(sizeof *c) : NULL;
    if (c) {
        *c = (call_ctx_t){r, id, {0}, ident_len};
        memcpy(c->ident, ident, ident_len);
    }
    return c;
}

/* A client's migrate: answered when the move is decided (move.c). */
static void migrate_done(void *arg, int error, uint32_t node, const char *why)
{
    call_ctx_t *c = arg;
    sn_wire_reply_t rep = {.id = c->id, .error = error, .node = node, .reason = (char *)(why ? why : "")};
    sn__relay_send_reply(c->relay, c->ident, c->ident_len, &rep);
    free(c);
}

/* This node's traffic with each peer it has exchanged any with (status
 * replies; the dashboard draws them). Caller frees; NULL if none. */
static sn_wire_flow_t *flows(sn_relay_t *r, size_t *n)
{
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed), k = 0;
    sn_relay_peer_stats_t *ps = malloc((np ? np : 1) * sizeof *ps);
    sn_wire_flow_t *out = malloc((np ? np : 1) * sizeof *out);
    size_t have = ps && out ? sn_relay_peer_stats(r, ps, np) : 0;
    np = have < np ? have : np;
    for (size_t i = 0; i < np; i++)
        if (ps[i].msgs_in || ps[i].msgs_out || ps[i].steals_in || ps[i].steals_out)
            out[k++] = (sn_wire_flow_t){ps[i].node, ps[i].msgs_in, ps[i].msgs_out, ps[i].steals_in, ps[i].steals_out};
    free(ps);
    *n = k;
    if (k == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Why request q is refused at once (into buf), or NULL: a node not in its
 * cluster yet only answers looks (status, ps, types), and a draining one
 * takes no new process (drain.c; tests/drain.sh). */
static const char *refusal(sn_relay_t *r, const sn_wire_request_t *q, char *buf, size_t len)
{
    bool looks = q->op == SN_OP_STATUS || q->op == SN_OP_PS || q->op == SN_OP_TYPES; /* change nothing */
    if (!looks && atomic_load_explicit(&r->joined, memory_order_acquire) != 1)
        return "this node has not joined its cluster yet";
    if (r->draining && (q->op == SN_OP_SPAWN || q->op == SN_OP_CALL)) {
        snprintf(buf, len, "node %" PRIu32 " is draining: it takes no new processes", r->node);
        return buf;
    }
    return NULL;
}

static void inbound_request(sn_relay_t *r, sn_wire_request_t *q, const unsigned char *ident, size_t ident_len)
{
    sn_wire_reply_t rep = {.id = q->id};
    char reason[512] = "";
    const char *no = refusal(r, q, reason, sizeof reason);
    if (no) {
        rep.error = SN_EREFUSED;
        rep.reason = (char *)no;
        sn__relay_send_reply(r, ident, ident_len, &rep);
        return;
    }
    switch (q->op) {
    case SN_OP_STATUS:
        rep.rows = sn__members_rows(r, &rep.nrows);
        if (!rep.rows)
            rep.error = SN_ENOMEM;
        rep.flows = flows(r, &rep.nflows); /* (none if out of memory: only the dashboard's picture misses them) */
        break;
    case SN_OP_SPAWN:
        rep.error = sn_spawn(r->sched, q->type, q->method, &q->arg, NULL, NULL, &rep.pid);
        break;
    case SN_OP_SEND:
        rep.error = sn_send(r->sched, q->to, &q->arg);
        break;
    case SN_OP_CALL: {
        call_ctx_t *c = call_ctx(r, q->id, ident, ident_len);
        if (!c) {
            rep.error = SN_ENOMEM;
            break;
        }
        rep.error = sn_spawn(r->sched, q->type, q->method, &q->arg, call_done, c, &rep.pid);
        if (rep.error == 0) {
            /* the client learns the PID now (to cancel it if it stops
             * waiting); call_done answers with the result, through the
             * I/O thread's queue, which is us: after this answer */
            rep.started = 1;
            sn__relay_send_reply(r, ident, ident_len, &rep);
            return;
        }
        free(c);
        break;
    }
    case SN_OP_PS:
    case SN_OP_KILL:
    case SN_OP_TYPES:
        sn__relay_manage(r, q, &rep);
        break;
    case SN_OP_MIGRATE: {
        call_ctx_t *c = call_ctx(r, q->id, ident, ident_len);
        if (!c) {
            rep.error = SN_ENOMEM;
            break;
        }
        sn__move_start(r, q->to, q->node, (int)q->timeout_ms, migrate_done, c);
        return;
    }
    case SN_OP_DRAIN:
        sn__drain_start(r, q, ident, ident_len); /* (answers when the drain ends) */
        return;
    case SN_OP_UNDRAIN:
        sn__drain_end(r, &rep);
        break;
    }
    if (rep.error && (q->op == SN_OP_SPAWN || q->op == SN_OP_CALL))
        sn__spawn_refusal(reason, sizeof reason, q->type, q->method, rep.error);
    else if (rep.error)
        snprintf(reason, sizeof reason, "%s", sn_strerror(rep.error));
    rep.reason = reason;
    sn__relay_send_reply(r, ident, ident_len, &rep);
    free(rep.rows);
    free(rep.procs);
    free(rep.types);
    sn_payload_destroy(&rep.result);
    free(rep.flows);
}

/* Sends in the name of a node that is not a member here: one that joined
 * a moment ago can send before the gossip about it arrives, so they are
 * taken, but never in this node's own name, and in a secure cluster only
 * with a node's key (a client's key speaks for no node). */
static bool sends_from_stranger_ok(sn_relay_t *r, uint32_t node)
{
    if (node == r->node) {
        sn__relay_bad(r, "sends in this node's own name", node);
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
        r->key_seen[k].node = sn_keys_cache_names_node(r->keys, r->in_key, node, NULL, why, sizeof why) == 0;
    }
    if (!r->key_seen[k].node)
        sn__relay_bad(r, "sends in the name of a node that is not a member, with a key that is not that node's", node);
    return r->key_seen[k].node;
}

/* Whether frame f (decoded) may be taken from its sender, p (NULL: not
 * a member here): false (dropped, counted) if it speaks for a node with
 * another's key, sends in the name of a stranger that may not, or comes
 * from an earlier run of a member. */
static bool admit(sn_relay_t *r, peer_t *p, sn_frame_t *f, const unsigned char *ident, size_t ident_len)
{
    if (p && f->kind != SN_FRAME_HELLO && r->in_key && p->public_key[0] && strcmp(r->in_key, p->public_key) != 0 &&
        !sn__members_rekeyed(r, p, f)) {
        /* an authorized key (another node's, or a client's) speaking for p,
         * not p's new run under a new key (a Hello is judged by members.c:
         * a taken id is refused, with why) */
        sn__relay_bad(r, "frame claims to be from a node whose key it does not have", f->node);
        return false;
    }
    if (!p && f->kind == SN_FRAME_SENDS && !sends_from_stranger_ok(r, f->node))
        return false;
    if (p && f->incarnation < p->incarnation) {
        sn__relay_bad(r, "frame from an earlier run of that node", f->node);
        sn__members_superseded(r, p, f, ident, ident_len);
        return false;
    }
    return true;
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

sn__relay_drop_fn sn__relay_test_drop;
sn__relay_hops_fn sn__relay_test_hops;

/* Whether batch f from member p may be taken, by its number. Batches
 * numbered for this run of this node come one after another on p's
 * connection: one that skips numbers shows that those before it were not
 * taken (lost on the way, or dropped here as bad), and p hears so before
 * any ack past them (sn__relay_refuse), so that it returns their sends
 * instead of freeing them; one numbered at or below what was settled
 * already is dropped. A batch a test drops (sn__relay_test_drop) is
 * refused the same way. Guarded by test_relay_edges. */
static bool in_order(sn_relay_t *r, peer_t *p, const sn_frame_t *f, const unsigned char *ident)
{
    if (!p || !ident || !f->seq || f->to_incarnation != r->incarnation)
        return true; /* (not numbered for this run: no order to check) */
    if (f->seq <= p->recv_seq) {
        sn__relay_bad(r, "a batch numbered at or below one settled already", f->node);
        return false;
    }
    if (f->seq > p->recv_seq + 1) {
        sn__relay_bad(r, "a gap in the numbering of its batches: those missing come back to their senders", f->node);
        sn__relay_refuse(r, p, p->recv_seq + 1, f->seq - 1, SN_EDROPPED);
    }
    if (sn__relay_test_drop && sn__relay_test_drop(r->node, f->node, f->seq)) {
        sn__relay_bad(r, "dropped by a test", f->node);
        sn__relay_refuse(r, p, f->seq, f->seq, SN_EDROPPED);
        return false;
    }
    return true;
}

/* A Part of a big frame from member p, on its connection (ident): a
 * batch numbered f->seq, or (seq 0) a control frame such as a steal's
 * commit with the messages that follow its processes. The Parts of one
 * frame come in order; joined, the frame is taken as any other. A batch
 * over what this node joins (max_msg and a frame's worth besides) is
 * refused as too big; Parts out of order drop what was joined (a batch's
 * number then shows as a gap: in_order). */
static void part_in(sn_relay_t *r, peer_t *p, sn_frame_t *f, const unsigned char *ident, size_t ident_len)
{
    size_t most = r->max_msg + r->max_frame + ((size_t)1 << 20);
    if (f->part_offset == 0) {
        if (p->rx_buf)
            sn__relay_bad(r, "a big batch cut short", f->node);
        free(p->rx_buf);
        p->rx_buf = NULL;
        p->rx_len = p->rx_total = 0;
        if (f->part_total > most) {
            sn__relay_bad(r, "a batch bigger than this node takes: its sends come back as too big", f->node);
            if (f->seq > p->recv_seq)
                sn__relay_refuse(r, p, f->seq, f->seq, SN_ETOOBIG);
            return;
        }
        if (!(p->rx_buf = malloc(f->part_total))) {
            sn__relay_bad(r, "no memory for a big batch", f->node);
            return;
        }
        p->rx_total = f->part_total;
        p->rx_seq = f->seq;
    } else if (!p->rx_buf || f->seq != p->rx_seq || f->part_total != p->rx_total || f->part_offset != p->rx_len) {
        if (p->rx_buf || f->seq != p->rx_seq) /* (the rest of one refused above: no more lines for it) */
            sn__relay_bad(r, "a part of a batch out of order", f->node);
        free(p->rx_buf);
        p->rx_buf = NULL;
        p->rx_len = p->rx_total = 0;
        return;
    }
    memcpy(p->rx_buf + p->rx_len, f->part, f->part_len);
    p->rx_len += f->part_len;
    if (p->rx_len < p->rx_total)
        return;
    unsigned char *buf = p->rx_buf;
    size_t len = p->rx_len;
    uint64_t seq = p->rx_seq;
    p->rx_buf = NULL;
    p->rx_len = p->rx_total = 0;
    sn_frame_t whole;
    const char *why = "undecodable";
    if (sn_codec_decode(buf, len, most, &whole, &why) != 0)
        sn__relay_bad(r, why, f->node);
    else if (whole.node != p->node || whole.kind == SN_FRAME_PART || whole.kind == SN_FRAME_REQUEST ||
             whole.kind == SN_FRAME_REPLY || (seq && (whole.kind != SN_FRAME_SENDS || whole.seq != seq)))
        sn__relay_bad(r, "parts that do not make a frame of that node's", f->node);
    else
        sn__relay_inbound_decoded(r, &whole, ident, ident_len, NULL);
    sn_frame_clear(&whole);
    free(buf);
}

/* A batch of sends from node f->node (p: the member, or NULL); its timed
 * messages' delivery times go to the histogram (relay.h), measured as
 * this node reads the batch. */
static void sends_in(sn_relay_t *r, peer_t *p, sn_frame_t *f, const unsigned char *ident, size_t ident_len)
{
    if (f->to_incarnation && f->to_incarnation != r->incarnation) {
        /* meant for an earlier run of this node (queued before the sender
         * knew of the restart): its sender returns every send in it as
         * nodedown when it learns, so none may run here */
        SNLOG_DEBUG(r, "dropped a batch from node %" PRIu32 " meant for an earlier run of this node", f->node);
        return;
    }
    if (!in_order(r, p, f, ident))
        return;
    uint64_t msgs = 0, sent_ns = f->sent_us * 1000u, now = sent_ns ? realtime_ns() : 0;
    /* A process a batch of a few sends wakes while no worker runs one runs
     * on this thread once the batch is handed over, as the scheduler's
     * guest (sched/guest.c): no hand-off to a worker on the way (a
     * futex wake-up if it was parked), and what it sends goes out from
     * here (route.c: relay_flush). Bounded (a few runs, tens of
     * microseconds); the next frame waits that long. A bigger batch is
     * bulk traffic: its processes go to the workers, which run them while
     * this thread reads on. Only the I/O thread hosts (tests that hand
     * frames in on their own thread, as fuzz_relay, never do). */
    bool host = f->nsends <= GUEST_SENDS && sn__relay_on_io_thread(r);
    if (host)
        sn__sched_host(r->sched);
    r->in_seq = f->seq && ident && p ? f->seq : 0; /* (acknowledged below: steal.c may hold from it) */
    for (size_t i = 0; i < f->nsends; i++) {
        msgs += sn__relay_for_process(f->sends[i].kind);
        uint64_t waited_ns = (uint64_t)f->sends[i].waited_us * 1000u;
        if (sn__relay_test_hops)
            f->sends[i].hops += sn__relay_test_hops(r->node, f->node);
        sn__relay_inbound_send(r, p, &f->sends[i]);
        if (sent_ns && waited_ns) /* (clocks apart by more than the wait: counted as 0) */
            sn__hist_add(&r->delivery, now > sent_ns ? now - sent_ns + waited_ns - 1000u : waited_ns - 1000u);
    }
    r->in_seq = 0;
    if (p)
        sn__add(&p->m_msgs_in, msgs);
    if (f->seq && ident && p) /* acknowledged soon */
        sn__relay_ack_later(r, p, f->seq, ident, ident_len);
    if (host)
        sn__sched_run_guest(r->sched);
}

/* The member whose connection has this routing id (the last batch it
 * sent came on it), or 0: names the sender of a frame that cannot be
 * decoded. */
static uint32_t node_of_ident(sn_relay_t *r, const unsigned char *ident, size_t ident_len)
{
    SN__FOR_PEERS(r, p)
    {
        if (p->ident_len == ident_len && memcmp(p->ident, ident, ident_len) == 0)
            return p->node;
    }
    return 0;
}

/* Whether a frame that came with key r->in_key may be decoded: a client's
 * key (its certificate names no node: keys.h) speaks for no node, so of
 * its frames only requests, and Hellos (members.c refuses them, saying
 * why, to the joiner), are; a frame of any other kind is dropped by the
 * kind its envelope's tags say, before its body is decoded: what only a
 * node may send (a member list, a batch of sends, an ack) costs a client
 * nothing but this look. hostile.sh case 6 and cluster.sh guard it. */
static bool client_may_send(sn_relay_t *r, const void *data, size_t size)
{
    if (!r->in_key || !r->keys || sn_keys_cache_is_node(r->keys, r->in_key))
        return true;
    sn_frame_kind_t kind = sn_codec_peek_kind(data, size);
    if (kind == SN_FRAME_REQUEST || kind == SN_FRAME_HELLO)
        return true;
    char why[96];
    snprintf(why, sizeof why, "a %s with a client's key (it speaks for no node)",
             kind == SN_FRAME_NONE ? "malformed frame" : sn_frame_kind_name(kind));
    sn__relay_bad(r, why, 0);
    return false;
}

void sn__relay_inbound_frame(sn_relay_t *r, const void *data, size_t size, const unsigned char *ident, size_t ident_len,
                             zsock_t *from_seed)
{
    if (size > r->max_frame) {
        sn__relay_bad(r, "oversize", ident ? node_of_ident(r, ident, ident_len) : 0);
        return;
    }
    if (!client_may_send(r, data, size))
        return;
    sn_frame_t f;
    const char *why = "undecodable";
    if (sn_codec_decode(data, size, r->max_frame, &f, &why) != 0) {
        sn__relay_bad(r, why, f.node ? f.node : ident ? node_of_ident(r, ident, ident_len) : 0);
        return;
    }
    sn__relay_inbound_decoded(r, &f, ident, ident_len, from_seed);
    sn_frame_clear(&f);
}

/* Whether frame f may be taken on the connection it came on: on our
 * outbound connection to member P (r->in_dialled), whose CurveZMQ server
 * key is P's, only frames in P's name are; else a process that took over
 * a dead member's endpoint and key could speak for any other node there
 * (an Ack in a live node's name frees that node's unacknowledged frames,
 * an Error puts this node out). A seed's connection (before joining) is
 * not a member's: its Welcome comes from whichever node the seed is.
 * hostile.sh case 9 guards it. */
static bool on_dialled(sn_relay_t *r, const sn_frame_t *f)
{
    const peer_t *p = r->in_dialled;
    if (!p || f->node == p->node)
        return true;
    char why[128];
    snprintf(why, sizeof why, "in node %" PRIu32 "'s name, on this node's connection to node %" PRIu32, f->node,
             p->node);
    sn__relay_bad(r, why, p->node);
    return false;
}

void sn__relay_inbound_decoded(sn_relay_t *r, sn_frame_t *f, const unsigned char *ident, size_t ident_len,
                               zsock_t *from_seed)
{
    sn__add(&r->frames_in, 1);
    if (!on_dialled(r, f))
        return;
    peer_t *p = f->kind == SN_FRAME_REQUEST ? NULL : sn__relay_find_peer(r, f->node);
    if (!admit(r, p, f, ident, ident_len))
        return;
    if (p && f->kind != SN_FRAME_HELLO)
        sn__members_heard(r, p, f->incarnation);
    switch (f->kind) {
    case SN_FRAME_SENDS:
        sends_in(r, p, f, ident, ident_len);
        break;
    case SN_FRAME_ACK:
        if (p && f->refused_from) /* (before the ack: it may cover them) */
            sn__relay_refused(r, p, f->refused_from, f->refused_to, f->refused_error);
        if (p)
            sn__relay_acked(r, p, f->seq);
        break;
    case SN_FRAME_PART:
        if (p && ident)
            part_in(r, p, f, ident, ident_len);
        else
            sn__relay_bad(r, "a part of a batch from a node that is not a member, or not on its connection", f->node);
        break;
    case SN_FRAME_REQUEST:
        if (ident)
            inbound_request(r, &f->request, ident, ident_len);
        else
            sn__relay_bad(r, "client request on a peer connection", f->node);
        break;
    default: /* membership, steals (dispatch.c) */
        if (!sn__relay_logic_frame(r, p, f, ident, ident_len, from_seed))
            sn__relay_bad(r, "out of protocol", f->node);
        break;
    }
}

/* Reads what is waiting on a socket: ROUTER frames come as [id, body],
 * DEALER frames as [body]. Anything else is a bad frame. Returns true if
 * it stopped on the budget (more may be waiting: look again). */
bool sn__relay_read_socket(sn_relay_t *r, void *sock, bool router, zsock_t *from_seed)
{
    uint64_t until = 0; /* the end of this socket's slice of the turn (relay_int.h) */
    for (int n = 0; n < INBOUND_BUDGET; n++) {
        if (n && sn__relay_slice_over(&until)) /* (a frame holds up to BATCH_MAX sends: a clock read each is cheap) */
            return true;
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        zmq_msg_t *first = router ? &id : &body;
        if (zmq_msg_recv(first, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&body);
            return false;
        }
        if (r->hop_trace)
            r->hop_recv_ns = sn__hop_now();
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
            sn__relay_bad(r, "unexpected message parts", 0);
        else if (router) {
            r->in_key = r->cert ? zmq_msg_gets(&body, "User-Id") : NULL; /* set by the ZAP handler: the key */
            sn__relay_inbound_frame(r, zmq_msg_data(&body), zmq_msg_size(&body), zmq_msg_data(&id), zmq_msg_size(&id),
                                    NULL);
            r->in_key = NULL;
        } else
            sn__relay_inbound_frame(r, zmq_msg_data(&body), zmq_msg_size(&body), NULL, 0, from_seed);
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    return true;
}

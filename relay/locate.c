/* locate.c - where processes that moved live, as this node knows it: the
 * relay's location cache, and the flush that keeps order when a path to a
 * process changes.
 *
 * A send to a process goes to a first hop: its home node, or the node it
 * moved to from here (the scheduler's forwarding entry), or what this cache
 * says. A node that forwards a message tells the node it came from where
 * the process is now (REDIRECT); the new owner tells the home node too. So
 * after one forwarded message a sender sends straight to the owner, and
 * the home node's route follows the process as well.
 *
 * Switching a route must not let a new message overtake an old one still
 * on the old path. So a node switches in three steps:
 *   1. the entry for the process becomes *pending*: sends to it are held
 *      here, in order;
 *   2. a FLUSH marker goes down the old path, behind everything sent on it
 *      (through the same outbound queue, and every hop forwards it in
 *      order with the messages it forwards: a hop with a pending entry of
 *      its own holds it like a message);
 *   3. the node where the marker ends, the one the process lives on,
 *      answers FLUSHED with its id; everything sent on the old path has
 *      been delivered by then. The held sends go to that node, and the
 *      entry says *direct* from then on.
 * The same flush runs when a process arrives here (sn__migrate_activate with
 * `settle`): senders here may have messages for it on the network still,
 * so their new messages come through the relay (dest = this node) and are
 * held until the marker, sent down the path they used, comes back. They
 * are held from the instant the process is let in (sn__loc_hold), before
 * the flush can begin, and so is what was queued for it before it came.
 *
 * Only this node's own senders use the cache. A send or marker that came
 * from another node and goes on from here (item_t.forwarded) follows the
 * scheduler's forwarding entry: the node the process went to from here,
 * the last time it left. Following those entries from any node leads
 * forward in time to where the process is, so a forward can never loop
 * (a cache entry can be stale: following it from a hop could).
 *
 * Failure: a path that goes through a node that is down is not switched
 * to another one: sends along it come back as nodedown at once, and a
 * flush waiting on it waits. A node that is down may only be frozen or
 * cut off, with our earlier sends in its socket: when it resumes they are
 * delivered (nodedown means "not confirmed", not "not run"), so anything
 * sent later by another path could overtake them. The path is released
 * when the node is gone for good (a new run of it, or it left), or after
 * DOWN_RELEASE_NS down. A node further down the path whose next hop is
 * down to it cannot pass the marker on: it says so (FLUSHED with error
 * nodedown), and we hold on as for a hop of our own that is down (our
 * earlier sends may sit in its socket toward that node), sending the
 * marker again every STUCK_RETRY_NS until one gets through, or
 * DOWN_RELEASE_NS after the first such answer. A flush with no answer at
 * all sends its marker again every FLUSH_RETRY_NS: a marker or answer can
 * be lost (bounced by a node that went down, or its answer by one the
 * origin could not reach) or only slow (a link that was cut and healed
 * resends with TCP's backoff), and either way the held sends must not
 * overtake what is still on the old path; only after DOWN_RELEASE_NS
 * without an answer are they sent on (logged). Markers carry the flush's
 * id: an answer to an earlier flush of the same process ends nothing.
 * A REDIRECT is a hint: the flush's answer names the real owner.
 *
 * Ownership: all of it belongs to the relay's I/O thread.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "relay_int.h"
#include "peer.h"
#include "locate.h"
#include "sn_node.h"

#define FLUSH_RETRY_NS (1000u * 1000000u)     /* a FLUSH not answered in this long is sent again */
#define DOWN_RELEASE_NS (15000ull * 1000000u) /* a path through a down node is given up after this */
#define STUCK_RETRY_NS (500u * 1000000u)      /* a FLUSH stuck further down the path is sent again after this */
#define MAX_ENTRIES 65536u                    /* past this, direct entries are dropped (they are only shortcuts) */
#define REDIRECT_QUIET_NS (200u * 1000000u)

typedef struct loc {
    struct loc *next;
    sn_pid_t pid;
    uint32_t moves;     /* home table: the move number that took it to `node` */
    uint32_t node;      /* where it lives (pending: the hint, or this node when settling) */
    uint32_t hop;       /* pending: where the FLUSH went */
    uint32_t then_hop;  /* pending, settling here: a second old path, flushed once `hop`'s answers (0: none) */
    uint32_t came_from; /* settling here: the node it came from */
    bool pending;
    bool arriving;       /* pending since the process was let in here, its flush not begun (sn__loc_hold) */
    bool settling;       /* let in here, its arrival's flush not ended: sends from other nodes wait too */
    uint64_t since_ns;   /* pending: when the FLUSH (or its last retry) went */
    uint64_t started_ns; /* pending: when the flush began (retries keep it) */
    uint64_t flush_id;   /* pending: this flush's markers carry it; only an answer that does counts */
    uint64_t stuck_ns;   /* pending: when a node down the path first said it could not pass the FLUSH on (0: none) */
    item_t **held;       /* pending: sends to it, oldest first */
    size_t nheld, cap;
} loc_t;

struct sn_locs {
    loc_t **b;
    size_t nb, count;
    /* this node's own processes that moved away: where the newest owner
     * said each arrived (node only; nothing held). When a node on a path
     * restarts or leaves, the forwarding entries through it point here
     * instead (sn__loc_last_seen), so a process that had moved on from
     * there stays reachable from its home. */
    struct sn_locs *home;
    /* arrival notices to a home that was down when they went (cut off,
     * frozen): sent again when it is up (sn__loc_peer_up), so the home
     * learns where its process is even though a cut hid the move */
    struct notice {
        sn_pid_t pid;
        uint32_t moves;
    } * notices;
    size_t nnotices, capnotices;
    struct { /* the last REDIRECT per slot, not to repeat it for every message of a batch */
        sn_pid_t pid;
        uint32_t peer;
        uint64_t ns;
    } said[256];
};

static size_t slot_of(sn_pid_t pid, size_t n)
{
    uint64_t h = (pid.serial ^ ((uint64_t)pid.node << 40)) * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 32) & (n - 1);
}

int sn__loc_init(sn_relay_t *r)
{
    r->sent_to = calloc(SN_SENT_BITS / 64, sizeof *r->sent_to);
    r->locs = calloc(1, sizeof *r->locs);
    if (!r->locs || !r->sent_to)
        return SN_ENOMEM;
    r->locs->nb = 256;
    r->locs->b = calloc(r->locs->nb, sizeof *r->locs->b);
    r->locs->home = calloc(1, sizeof *r->locs->home);
    if (!r->locs->b || !r->locs->home)
        return SN_ENOMEM;
    r->locs->home->nb = 256;
    r->locs->home->b = calloc(r->locs->home->nb, sizeof *r->locs->home->b);
    return r->locs->home->b ? 0 : SN_ENOMEM;
}

static void free_table(struct sn_locs *c);

static void free_loc(loc_t *l)
{
    for (size_t i = 0; i < l->nheld; i++)
        sn__relay_free_item(l->held[i]);
    free(l->held);
    free(l);
}

void sn__loc_fini(sn_relay_t *r)
{
    if (!r->locs) {
        free(r->sent_to);
        r->sent_to = NULL;
        return;
    }
    free_table(r->locs->home);
    free(r->locs->notices);
    free_table(r->locs);
    r->locs = NULL;
    free(r->sent_to);
    r->sent_to = NULL;
}

static void free_table(struct sn_locs *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->b && i < c->nb; i++)
        for (loc_t *l = c->b[i], *next; l; l = next) {
            next = l->next;
            free_loc(l);
        }
    free(c->b);
    free(c);
}

static loc_t *find(struct sn_locs *c, sn_pid_t pid)
{
    if (c->count == 0)
        return NULL;
    for (loc_t *l = c->b[slot_of(pid, c->nb)]; l; l = l->next)
        if (sn_pid_eq(l->pid, pid))
            return l;
    return NULL;
}

static void drop(struct sn_locs *c, loc_t *gone)
{
    for (loc_t **lp = &c->b[slot_of(gone->pid, c->nb)]; *lp; lp = &(*lp)->next)
        if (*lp == gone) {
            *lp = gone->next;
            c->count--;
            free_loc(gone);
            return;
        }
}

/* Drops every direct entry (they are shortcuts; the forwarding chain
 * still leads to each process). */
static void drop_direct(struct sn_locs *c)
{
    for (size_t i = 0; i < c->nb; i++)
        for (loc_t **lp = &c->b[i]; *lp;) {
            loc_t *l = *lp;
            if (l->pending) {
                lp = &l->next;
                continue;
            }
            *lp = l->next;
            c->count--;
            free_loc(l);
        }
}

static loc_t *add(struct sn_locs *c, sn_pid_t pid)
{
    if (c->count >= MAX_ENTRIES)
        drop_direct(c);
    if (c->count + 1 > c->nb * 2) { /* grow: chains of two on average */
        size_t nb = c->nb * 2;
        loc_t **b = calloc(nb, sizeof *b);
        if (b) {
            for (size_t i = 0; i < c->nb; i++)
                for (loc_t *l = c->b[i], *next; l; l = next) {
                    next = l->next;
                    size_t k = slot_of(l->pid, nb);
                    l->next = b[k];
                    b[k] = l;
                }
            free(c->b);
            c->b = b;
            c->nb = nb;
        }
    }
    loc_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->pid = pid;
    size_t k = slot_of(pid, c->nb);
    l->next = c->b[k];
    c->b[k] = l;
    c->count++;
    return l;
}

/* Where sends to pid go now, without this cache: the node it moved to from
 * here, or its home. */
static uint32_t default_hop(sn_relay_t *r, sn_pid_t pid)
{
    uint32_t via = sn__migrate_forward_of(r->sched, pid);
    return via ? via : pid.node;
}

/* A control send of the relay's own (no payload), queued behind what is
 * already queued; `forwarded`: one that came from another node. */
static void send_ctl(sn_relay_t *r, uint32_t dest, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, bool forwarded,
                     int error, uint64_t id)
{
    item_t *it = sn__relay_new_item();
    if (!it)
        return; /* a lost hint or marker: the marker is sent again (sn__loc_tick) */
    it->kind = ITEM_SEND;
    it->dest = dest;
    it->diverted = false;
    it->forwarded = forwarded;
    it->s = (sn_wire_send_t){to, from, tag, kind, error, NULL, 0, id, 0, 0};
    sn__relay_enqueue(r, it);
}

/* Starts the flush of the path to pid through `hop`; sends to it are held
 * until FLUSHED (or a failure) ends it. A flush that is pending already
 * sends its marker again (a retry: same id, same clocks but since_ns):
 * any of its markers coming back proves the old path empty, since nothing
 * went down it after the first. */
static void start_flush(sn_relay_t *r, loc_t *l, uint32_t node, uint32_t hop)
{
    uint64_t now = sn__relay_now_ns();
    if (!l->pending || l->hop != hop) {
        l->stuck_ns = 0;
        l->started_ns = now;
        l->flush_id = atomic_fetch_add_explicit(&r->next_send_id, 1, memory_order_relaxed);
    }
    l->node = node;
    l->hop = hop;
    l->pending = true;
    l->since_ns = now;
    send_ctl(r, hop, l->pid, (sn_pid_t){r->node, 0}, 0, SN_WIRE_FLUSH, false, 0, l->flush_id);
}

static bool node_down(sn_relay_t *r, uint32_t node)
{
    peer_t *p = node != r->node ? sn__relay_find_peer(r, node) : NULL;
    return p && atomic_load_explicit(&p->down, memory_order_relaxed);
}

/* What the entries hold is bounded like a peer's backlog (peer.c):
 * past max_backlog bytes, a process here whose send is held waits before
 * its next step, until half of it went on (finish). A send held for
 * another node (hold_passing) holds no sender here (its node is not
 * slowed; the flush that holds it ends within DOWN_RELEASE_NS). */
static size_t held_size(const item_t *it)
{
    return 64 + (it->s.payload ? it->s.payload->len : 0);
}

static void held_more(sn_relay_t *r, const item_t *it)
{
    r->held_bytes += held_size(it);
    if (r->held_bytes > r->max_backlog)
        sn__relay_hold_sender(r, &r->held_waiters, it);
}

static void held_less(sn_relay_t *r, const item_t *it)
{
    size_t n = held_size(it);
    r->held_bytes = r->held_bytes > n ? r->held_bytes - n : 0;
}

/* The acknowledgement of the frame that brought a send to a process, come
 * from member `from` (counted: its nheld counts it already, steal.c),
 * waits while the send is held here (peer_t.nheld): a node killed while
 * it holds the send has not confirmed it, and its sender hears nodedown
 * (tests/chaos.sh: sinks that move on while their arrival's flush holds
 * other nodes' sends). Markers and bookkeeping are not waited for. */
static void ack_waits(sn_relay_t *r, item_t *it, uint32_t from, bool counted)
{
    peer_t *p = from ? sn__relay_find_peer(r, from) : NULL;
    if (!p || (!counted && (!r->in_seq || !sn__relay_for_process(it->s.kind))))
        return;
    if (!counted && p->nheld++ == 0) /* (frames come in order: the first held is the oldest) */
        p->held_cap = r->in_seq - 1;
    it->ack_node = p->node;
    it->ack_inc = p->incarnation;
}

/* A held send goes on: its frame's acknowledgement need not wait for it. */
static void ack_free(sn_relay_t *r, item_t *it)
{
    peer_t *p = it->ack_node ? sn__relay_find_peer(r, it->ack_node) : NULL;
    if (p && p->incarnation == it->ack_inc && p->nheld) /* (else reset since: sn__relay_reset_peer) */
        p->nheld--;
    it->ack_node = 0;
}

/* Ends a flush: the entry says `owner` and the held sends go, in order.
 * An entry for a process here is dropped (sends to it are local) and the
 * scheduler lets local senders deliver directly again. */
static void finish(sn_relay_t *r, loc_t *l, uint32_t owner)
{
    bool here = l->node == r->node || owner == r->node;
    l->pending = false;
    l->settling = false;
    l->then_hop = 0;
    l->node = here ? r->node : owner;
    /* route() reads the entry: direct now, so each goes to l->node (or
     * is delivered here) in the order it came */
    item_t **held = l->held;
    size_t n = l->nheld;
    l->held = NULL;
    l->nheld = l->cap = 0;
    for (size_t i = 0; i < n; i++) {
        held_less(r, held[i]);
        ack_free(r, held[i]);
        sn__relay_route(r, held[i]);
    }
    free(held);
    if (r->held_waiters.n && r->held_bytes <= r->max_backlog / 2)
        sn__relay_let_go(r, &r->held_waiters);
    if (here) {
        sn_pid_t pid = l->pid;
        drop(r->locs, l);
        sn__migrate_settled(r->sched, pid);
    }
}

int sn__loc_route(sn_relay_t *r, item_t *it)
{
    struct sn_locs *c = r->locs;
    if (it->forwarded || c->count == 0 || it->s.kind == SN_WIRE_REDIRECT || it->s.kind == SN_WIRE_FLUSHED ||
        it->s.kind == SN_RELAY_GONE ||
        it->s.kind == SN_WIRE_WATCHED) /* (a forward, or addressed to a node, not to where the process is) */
        return SN_LOC_SEND;
    loc_t *l = find(c, it->s.to);
    if (!l)
        return SN_LOC_SEND;
    if (!l->pending) {
        it->dest = l->node; /* (a node that is down: the caller bounces it) */
        return SN_LOC_SEND;
    }
    if (it->s.kind == SN_WIRE_FLUSH && it->s.from.node == r->node && it->dest == l->hop && !l->arriving)
        return SN_LOC_SEND; /* our own marker: it goes down the old path now */
    if (!l->arriving && node_down(r, l->hop))
        return SN_LOC_DOWN; /* the old path is stuck in a node that is down: nothing may overtake it */
    item_t **h = sn__grow(l->held, &l->cap, l->nheld, sizeof *h, 16, 0);
    if (!h)
        return SN_LOC_DOWN; /* no memory to hold it: it comes back (sending it on could reorder) */
    l->held = h;
    l->held[l->nheld++] = it;
    held_more(r, it);
    return SN_LOC_HELD;
}

/* The home table (struct sn_locs.home): move number `moves` of pid took
 * it to node. News come from different nodes, in any order: the highest
 * move number wins, so the table only ever points forward in time. */
static void home_set(sn_relay_t *r, sn_pid_t pid, uint32_t node, uint32_t moves)
{
    struct sn_locs *h = r->locs->home;
    loc_t *l = find(h, pid);
    if (!l)
        l = add(h, pid);
    if (l && moves > l->moves) {
        l->node = node;
        l->moves = moves;
    }
}

static void home_drop(sn_relay_t *r, sn_pid_t pid)
{
    loc_t *l = find(r->locs->home, pid);
    if (l)
        drop(r->locs->home, l);
}

void sn__loc_departed(sn_relay_t *r, sn_pid_t pid, uint32_t node, uint32_t moves)
{
    loc_t *l = find(r->locs, pid);
    if (l && !l->pending) /* a shortcut from before it lived here: the forwarding entry is newer */
        drop(r->locs, l);
    if (pid.node == r->node)
        home_set(r, pid, node, moves);
}

uint32_t sn__loc_last_seen(void *arg, sn_pid_t pid)
{
    sn_relay_t *r = arg;
    /* only the home knows for sure (move numbers); elsewhere a hint could
     * point back along the path, and a forward could loop */
    loc_t *l = pid.node == r->node ? find(r->locs->home, pid) : NULL;
    return l ? l->node : 0;
}

void sn__loc_ended(sn_relay_t *r, sn_pid_t pid)
{
    loc_t *l = find(r->locs, pid);
    if (l && !l->pending)
        drop(r->locs, l);
    home_drop(r, pid);
}

/* A process let in here (sn__migrate_activate, settling) has local
 * senders whose new sends come through the relay (dest = this node) from
 * that instant on. The I/O thread drains the queue before it settles the
 * process (sn__loc_arrived: whether to flush needs what is queued to have
 * gone out), and a send drained in between must not be delivered here at
 * once: an older one of the same sender may be on its way back through
 * the node the process came from (test_locate.c:
 * test_back_where_its_sender_is). So the
 * process's entry holds everything for it from the moment it is let in,
 * as a pending flush does, until sn__loc_arrived flushes or settles it.
 * A flush already under way (pending) holds already: left as it is.
 * Until the arrival's flush ends, sends from other nodes than the one it
 * came from wait in the entry too (sn__loc_hold_passing). */
void sn__loc_hold(sn_relay_t *r, sn_pid_t pid, uint32_t victim)
{
    loc_t *l = find(r->locs, pid);
    if (!l && !(l = add(r->locs, pid)))
        return; /* no memory: no hold (sn__loc_arrived settles it at once) */
    l->settling = true;
    l->came_from = victim;
    if (l->pending)
        return;
    l->pending = true;
    l->arriving = true; /* l->node: where the cache said it was (0: a new entry) */
}

/* A path a flush can go down: another node, a member. */
static bool old_path(sn_relay_t *r, uint32_t hop)
{
    return hop && hop != r->node && sn__relay_find_peer(r, hop);
}

/* The second old path of an arrival (then_hop), once the first answered.
 * False: none, the flush ends. */
static bool next_path(sn_relay_t *r, loc_t *l)
{
    uint32_t hop = l->then_hop;
    l->then_hop = 0;
    if (!old_path(r, hop) || hop == l->hop)
        return false;
    start_flush(r, l, l->node, hop);
    return true;
}

/* Two old paths may lead to a process that arrives here: the cache's,
 * which this node's own senders used (l->node), and the forwarding
 * entry's, down which it passed on the sends of other nodes and their
 * markers. They differ once the cache learnt of a move the forwarding
 * entry did not follow (a REDIRECT to this node, its home). The arrival
 * flushes both, one after the other, before anything held goes in: a
 * send of another node passed on down the forwarding entry's path may
 * sit in a frozen node while that node's later sends reach the process
 * here (test_locate.c: test_arrival_flushes_both_paths). */
void sn__loc_arrived(sn_relay_t *r, sn_pid_t pid, uint32_t victim, uint32_t moves)
{
    struct sn_locs *c = r->locs;
    if (pid.node == r->node) /* it is home: a record of where it went would be older */
        home_drop(r, pid);
    loc_t *l = find(c, pid);
    if (l && l->arriving) { /* (sn__loc_hold): back to what the entry was, keeping what it holds */
        l->arriving = false;
        l->pending = false;
    }
    uint32_t own = l && l->node ? l->node : 0, passed = default_hop(r, pid);
    /* the home node's route should follow it too (it learns from a node
     * that forwards for it otherwise) */
    if (pid.node != r->node && pid.node != victim) /* (the move number rides in `error`) */
        send_ctl(r, pid.node, pid, SN_PID_NONE, r->node, SN_WIRE_REDIRECT, false, (int)(moves & INT32_MAX), 0);
    if (l && l->pending) { /* a flush on its way already: its answer (then the other path's) settles it */
        l->node = r->node;
        l->then_hop = passed != l->hop && old_path(r, passed) ? passed : 0;
        return;
    }
    size_t bit = sn__sent_bit(pid);
    bool sent = r->sent_to[bit / 64] & (UINT64_C(1) << (bit % 64));
    uint32_t first = old_path(r, own) ? own : old_path(r, passed) ? passed : 0;
    if (!sent || !first) {
        /* nothing from here on its way to it (the caller drained the
         * outbound queue first: what was queued for it before it came is
         * held by its entry, not sent), or no old path to wait for (a hop
         * that is down is waited for: see the top of this file): what the
         * entry holds is delivered here, in order, and it settles */
        if (l) {
            l->node = r->node;
            finish(r, l, r->node);
        } else {
            sn__migrate_settled(r->sched, pid);
        }
        return;
    }
    if (!l && !(l = add(c, pid))) {
        sn__migrate_settled(r->sched, pid);
        return;
    }
    start_flush(r, l, r->node, first);
    l->then_hop = first != passed && old_path(r, passed) ? passed : 0;
}

void sn__loc_redirect(sn_relay_t *r, sn_pid_t pid, uint32_t node, uint32_t moves)
{
    struct sn_locs *c = r->locs;
    if (node == r->node || node == 0 || sn__migrate_here(r->sched, pid))
        return; /* it is here, or coming here: the arrival flushes (a stale hint would send our senders away) */
    if (pid.node == r->node && moves) { /* one of ours, from the node it arrived at */
        home_set(r, pid, node, moves);
        /* no forwarding entry: it was dropped when the process seemed lost
         * (seen last on a node whose run ended: sn__loc_peer_down), and it
         * lives on after all (it had moved on, the notice came late): the
         * old path is gone, the forward goes straight there */
        if (!sn__migrate_forward_of(r->sched, pid) && find(r->locs->home, pid) &&
            find(r->locs->home, pid)->node == node)
            sn__migrate_repoint(r->sched, pid, node);
    }

    loc_t *l = find(c, pid);
    if (l && (l->pending || l->node == node))
        return;
    uint32_t hop = l ? l->node : default_hop(r, pid);
    if (hop == node || hop == r->node)
        return;
    peer_t *p = sn__relay_find_peer(r, hop);
    if (!p || atomic_load_explicit(&p->down, memory_order_relaxed))
        return;
    if (!l && !(l = add(c, pid)))
        return;
    start_flush(r, l, node, hop);
}

/* Fault injection (tests/promises.sh, flush): with SN_FAULT=stall-flush the
 * node stops itself (SIGSTOP: the test resumes it) as it is about to
 * answer another node's flush, as a node frozen right after a process
 * arrived would; at most 3 times, each at least 5 s after it was resumed
 * (so that it is not declared down: it runs and heartbeats in between).
 * Not compiled into Release builds. */
static void stall_flush(void)
{
#ifdef SN_FAULT_INJECTION
    static int times;
    static uint64_t resumed_ns;
    const char *want = getenv("SN_FAULT");
    uint64_t now = sn__relay_now_ns();
    if (want && !strcmp(want, "stall-flush") && times < 3 && (!resumed_ns || now - resumed_ns > 5000000000u)) {
        times++;
        raise(SIGSTOP);
        resumed_ns = sn__relay_now_ns();
    }
#endif
}

/* Holds s, a send that came from member `from` (0: none), in l behind
 * what l holds: route() takes it here again when the flush ends (finish),
 * past this entry. Takes s's payload. False: no memory. */
static bool hold_passing(sn_relay_t *r, loc_t *l, sn_wire_send_t *s, uint32_t from, bool counted)
{
    item_t **h = sn__grow(l->held, &l->cap, l->nheld, sizeof *h, 16, 0);
    if (!h)
        return false;
    l->held = h;
    item_t *it = sn__relay_new_item();
    if (!it)
        return false;
    it->kind = ITEM_SEND;
    it->dest = r->node;
    it->diverted = false;
    it->forwarded = true;
    it->s = *s;
    s->payload = NULL; /* (taken) */
    ack_waits(r, it, from, counted);
    l->held[l->nheld++] = it;
    held_more(r, it);
    return true;
}

/* A message from another node for a process settling here (its arrival's
 * flush under way, or about to begin) waits behind that flush unless it
 * came from the node the process came from. That node passes on what
 * reached it down the old paths, behind the commit: it goes in at once.
 * Any other node's send may be newer than one of its sends this node
 * passed on down an old path before the process came, still on the way
 * (in a node that is frozen, say): it waits for the flush of that path
 * (test_locate.c: test_arrival_flushes_both_paths). Once the process has
 * moved on while its flush holds sends, every send and marker for it
 * waits behind them, from any node (passed on at once, it would overtake
 * them: tests/chaos.sh, sinks that move on soon after they arrive); the
 * flush still ends, its marker following the process. Our own marker
 * never waits: it ends the flush. */
bool sn__loc_hold_passing(sn_relay_t *r, uint32_t from_node, sn_wire_send_t *s, bool counted)
{
    if (r->locs->count == 0 || (s->kind != SN_EV_MESSAGE && s->kind != SN_WIRE_FLUSH) || s->from.node == r->node)
        return false;
    loc_t *l = find(r->locs, s->to);
    if (!l || !l->settling || !l->pending)
        return false;
    if (sn__migrate_here(r->sched, s->to) ? from_node == l->came_from || s->kind == SN_WIRE_FLUSH : l->nheld == 0)
        return false; /* (a marker ending here waits in sn__loc_flush) */
    return hold_passing(r, l, s, from_node, counted);
}

/* A FLUSH marker s. Another node's marker that ends here, at a process
 * settling here (its arrival's own flush under way, or about to begin),
 * waits in the entry, with the sends it holds, and is answered when that
 * flush ends (finish routes it here again). This node may have passed
 * the origin's messages on down the path the process took when it left
 * here, and they may still be on it (in a node that is down or slow) while
 * the process came back round by another way; answered at once, the origin
 * would send what it holds straight here, ahead of them (test_locate.c:
 * test_flush_waits_for_the_arrival_here). Its own flush goes down that
 * path behind them. With no memory to hold it, it is answered at once. */
void sn__loc_flush(sn_relay_t *r, sn_wire_send_t *s)
{
    sn_pid_t pid = s->to;
    uint32_t origin = s->from.node;
    /* the marker follows what it flushes: a forward goes where the process
     * went from here (the forwarding entry), never by the cache */
    uint32_t next = sn__migrate_here(r->sched, pid) ? 0 : sn__migrate_forward_of(r->sched, pid);
    if (next == 0 || next == r->node) { /* the end of the path: it lives here (or nowhere) */
        loc_t *l = origin != r->node && next == 0 ? find(r->locs, pid) : NULL;
        if (l && l->pending && sn__migrate_here(r->sched, pid) && hold_passing(r, l, s, 0, false))
            return;
        if (origin == r->node) {
            sn__loc_flushed(r, pid, r->node, s->id);
        } else {
            stall_flush();
            send_ctl(r, origin, pid, SN_PID_NONE, r->node, SN_WIRE_FLUSHED, true, 0, s->id);
        }
        return;
    }
    send_ctl(r, next, pid, s->from, 0, SN_WIRE_FLUSH, true, 0, s->id); /* on, behind what we forwarded */
}

/* The pending flush of pid that a FLUSHED with this id answers; NULL for
 * an answer to an earlier flush (it says nothing of the path now). */
static loc_t *answered(sn_relay_t *r, sn_pid_t pid, uint64_t id)
{
    loc_t *l = find(r->locs, pid);
    return l && l->pending && l->flush_id == id ? l : NULL;
}

void sn__loc_flushed(sn_relay_t *r, sn_pid_t pid, uint32_t owner, uint64_t id)
{
    loc_t *l = answered(r, pid, id);
    if (l && !next_path(r, l))
        finish(r, l, owner ? owner : l->node);
}

void sn__loc_stuck(sn_relay_t *r, sn_pid_t pid, uint32_t at, uint64_t id)
{
    loc_t *l = answered(r, pid, id);
    if (!l)
        return;
    uint64_t now = sn__relay_now_ns();
    if (!l->stuck_ns) {
        l->stuck_ns = now;
        SNLOG_INFO(r,
                   "the flush of the path to %" PRIu32 ".%" PRIu64 " through node %" PRIu32
                   " is stuck before node %" PRIu32 ", which is down there: its sends wait",
                   pid.node, pid.serial, l->hop, at);
    }
    l->since_ns = now; /* news: the retry clock (sn__loc_tick) starts again */
}

void sn__loc_flush_stuck(sn_relay_t *r, const sn_wire_send_t *s, uint32_t at)
{
    if (s->from.node != r->node && s->from.node != 0)
        send_ctl(r, s->from.node, s->to, SN_PID_NONE, at, SN_WIRE_FLUSHED, true, SN_ENODEDOWN, s->id);
}

void sn__loc_notice_lost(sn_relay_t *r, sn_pid_t pid, uint32_t moves)
{
    struct sn_locs *c = r->locs;
    for (size_t i = 0; i < c->nnotices; i++)
        if (sn_pid_eq(c->notices[i].pid, pid)) {
            if (moves > c->notices[i].moves)
                c->notices[i].moves = moves;
            return;
        }
    struct notice *n = sn__grow(c->notices, &c->capnotices, c->nnotices, sizeof *n, 16, 65536);
    if (!n)
        return; /* (the home learns from the next forward instead) */
    c->notices = n;
    c->notices[c->nnotices++] = (struct notice){pid, moves};
}

void sn__loc_forwarded(sn_relay_t *r, const peer_t *from, sn_pid_t pid)
{
    struct sn_locs *c = r->locs;
    if (!from)
        return;
    loc_t *l = find(c, pid);
    uint32_t now_at = l ? l->node : sn__migrate_forward_of(r->sched, pid);
    if (now_at == 0 || now_at == r->node)
        return; /* not forwarded */
    atomic_fetch_add_explicit(&r->forwarded, 1, memory_order_relaxed);
    if (now_at == from->node)
        return; /* the sender is where it went */
    uint64_t now = sn__relay_now_ns();
    size_t k = slot_of(pid, 256) ^ (from->node & 255u);
    if (sn_pid_eq(c->said[k].pid, pid) && c->said[k].peer == from->node && now - c->said[k].ns < REDIRECT_QUIET_NS)
        return;
    c->said[k].pid = pid;
    c->said[k].peer = from->node;
    c->said[k].ns = now;
    atomic_fetch_add_explicit(&r->redirects, 1, memory_order_relaxed);
    send_ctl(r, from->node, pid, SN_PID_NONE, now_at, SN_WIRE_REDIRECT, true, 0, 0);
}

void sn__loc_left_for_gone(sn_relay_t *r, sn_pid_t pid)
{
    send_ctl(r, pid.node, pid, SN_PID_NONE, 0, SN_WIRE_REDIRECT, false, 0, 0);
}

/* The home's side: if the last place this node knows pid arrived at is
 * `from`, the move after it took pid to the run that ended (the new
 * owner's notice never came: a cut hid it), and pid was lost with it.
 * Else a later arrival is known, and a forward through `from` goes there.
 * Lost: the forwarding entry goes (sends to it are noproc here, rather
 * than sent to `from`, which would send them back here) and the record
 * stays, one move on, with no node: a notice of a later move (it had
 * moved on before that run ended) makes it reachable again
 * (sn__loc_redirect), a late one of the move to the dead run does not. */
void sn__loc_lost(sn_relay_t *r, sn_pid_t pid, uint32_t from)
{
    loc_t *l = pid.node == r->node ? find(r->locs->home, pid) : NULL;
    if (!l || sn__migrate_here(r->sched, pid))
        return;
    if (l->node != from) {
        /* a later arrival is known: the path through `from` ended there
         * (it has no forwarding entry now, and sends what reaches it
         * here), so a forward from here that still leads there goes
         * where the process arrived last instead (else the two would
         * pass its sends back and forth until the hop bound:
         * test_locate lost_path_repointed) */
        if (l->node && sn__migrate_forward_of(r->sched, pid) == from)
            sn__migrate_repoint(r->sched, pid, l->node);
        return;
    }
    SNLOG_INFO(
        r, "%" PRIu32 ".%" PRIu64 " left node %" PRIu32 " (where it was seen last) for a run that ended: lost with it",
        pid.node, pid.serial, from);
    sn__migrate_drop_forward(r->sched, pid);
    l->node = 0;
    l->moves++;
}

/* Releases a pending entry's held sends (see the top of this file). */
static void release(sn_relay_t *r, loc_t *l, const char *why)
{
    SNLOG_WARN(r, "%s for %" PRIu32 ".%" PRIu64 " through node %" PRIu32 ": sending its held messages on", why,
               l->pid.node, l->pid.serial, l->hop);
    finish(r, l, l->node);
}

/* The periodic look (node 0), or node gone for good: entries whose old
 * path is lost or stuck for too long let their held sends go. */
static void give_up(sn_relay_t *r, uint32_t node, uint64_t now)
{
    struct sn_locs *c = r->locs;
    if (c->count == 0)
        return;
    for (size_t i = 0; i < c->nb; i++) {
        for (loc_t *l = c->b[i], *next; l; l = next) {
            next = l->next; /* finish may drop l, and drops nothing else */
            if (!l->pending) {
                if (node && l->node == node)
                    drop(c, l); /* a shortcut to a run that ended: the default route reports it */
                continue;
            }
            if (node) {
                if (l->then_hop == node)
                    l->then_hop = 0;
                if (l->hop == node && !next_path(r, l))
                    finish(r, l, l->node); /* the old path ended with that run: nothing on it can arrive */
                continue;
            }
            bool stuck = node_down(r, l->hop);
            if (stuck && now - l->since_ns > DOWN_RELEASE_NS)
                release(r, l, "the old path has been down for 15 s");
            else if (stuck)
                continue; /* (peer_up sends the marker again) */
            else if (l->stuck_ns && now - l->stuck_ns > DOWN_RELEASE_NS)
                release(r, l, "the old path has been stuck behind a node that is down for 15 s");
            else if (!l->stuck_ns && now - l->started_ns > DOWN_RELEASE_NS)
                release(r, l, "no flush answer within 15 s");
            else if (now - l->since_ns > (l->stuck_ns ? STUCK_RETRY_NS : FLUSH_RETRY_NS))
                start_flush(r, l, l->node, l->hop); /* again: the marker or its answer may be lost or slow */
        }
    }
}

void sn__loc_peer_down(sn_relay_t *r, uint32_t node, bool gone)
{
    if (gone) {
        give_up(r, node, 0);
        struct sn_locs *n = r->locs; /* a new run of that home: its processes are gone, notices too */
        for (size_t i = 0; i < n->nnotices;)
            if (n->notices[i].pid.node == node)
                n->notices[i] = n->notices[--n->nnotices];
            else
                i++;
        /* our processes seen there last are lost with it: the forwarding
         * entry toward the path they took goes too, so sends to them are
         * noproc here rather than sent down a path that now leads back */
        struct sn_locs *h = r->locs->home;
        for (size_t i = 0; h->count && i < h->nb; i++)
            for (loc_t *l = h->b[i], *next; l; l = next) {
                next = l->next;
                if (l->node == node) {
                    sn__migrate_drop_forward(r->sched, l->pid);
                    drop(h, l);
                }
            }
        return;
    }
    /* down, perhaps only for now: flushes through it wait, and their
     * release clock starts now */
    struct sn_locs *c = r->locs;
    uint64_t now = sn__relay_now_ns();
    for (size_t i = 0; c->count && i < c->nb; i++)
        for (loc_t *l = c->b[i]; l; l = l->next)
            if (l->pending && l->hop == node)
                l->since_ns = now;
}

void sn__loc_peer_up(sn_relay_t *r, uint32_t node)
{
    /* arrival notices it missed, for processes still here */
    struct sn_locs *n = r->locs;
    for (size_t i = 0; i < n->nnotices;) {
        struct notice *e = &n->notices[i];
        if (e->pid.node != node) {
            i++;
            continue;
        }
        if (sn__migrate_here(r->sched, e->pid))
            send_ctl(r, node, e->pid, SN_PID_NONE, r->node, SN_WIRE_REDIRECT, false, (int)(e->moves & INT32_MAX), 0);
        *e = n->notices[--n->nnotices];
    }
    /* the marker sent before it went down was dropped: send it again,
     * behind whatever of ours it still has to deliver */
    struct sn_locs *c = r->locs;
    for (size_t i = 0; c->count && i < c->nb; i++)
        for (loc_t *l = c->b[i]; l; l = l->next)
            if (l->pending && l->hop == node)
                start_flush(r, l, l->node, l->hop);
}

/* The processes here whose home is `node` moved here from its earlier run
 * (or on from elsewhere); its new run knows nothing of them, and a sender
 * that does not know where one is sends to its home, which would answer
 * noproc. So each is announced to the new run as an arrival (REDIRECT
 * with its move number): the home's table and forwarding entry lead sends
 * to it here again (sn__loc_redirect), as after any move. A process of
 * the earlier run that was there when it ended is gone: no one announces
 * it, and its PID stays noproc. tests/deploy_local.sh (a rolling upgrade:
 * sinks reached by PID after every node restarted). */
void sn__loc_home_restarted(sn_relay_t *r, uint32_t node)
{
    size_t n = sn__sched_homed_at(r->sched, node, NULL, NULL, 0);
    sn_pid_t *pids = n ? malloc(n * sizeof *pids) : NULL;
    uint32_t *moves = n ? malloc(n * sizeof *moves) : NULL;
    if (pids && moves) {
        size_t got = sn__sched_homed_at(r->sched, node, pids, moves, n);
        for (size_t i = 0; i < got && i < n; i++)
            send_ctl(r, node, pids[i], SN_PID_NONE, r->node, SN_WIRE_REDIRECT, false, (int)(moves[i] & INT32_MAX), 0);
    }
    free(pids);
    free(moves);
}

void sn__loc_tick(sn_relay_t *r, uint64_t now)
{
    give_up(r, 0, now);
}

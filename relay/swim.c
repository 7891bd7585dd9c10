/* swim.c - SWIM failure detection with Lifeguard's suspicion and local
 * health (see swim.h). Pure logic: time comes in as `now`, messages go out
 * through io.send and io.broadcast.
 *
 * Ownership: a single thread calls everything (swim.h).
 */
#include "swim.h"

#include "grow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEALTH 8    /* local health: probe timeout x (1 + health) at most x 9 */
#define NACKED_HEALTH 2 /* ... and raised by misses a helper's NACK explained at most to this */
#define RELAYS 64       /* probes we make for others (PING_REQ), the newest */
#define MAX_CONFIRM 8   /* distinct members whose suspicion we count */
#define RECENT 8        /* our last probes, whose answers count however late (answered) */

/* 32 bytes: a simulated cluster of 10,000 holds 10^8 of them */
typedef struct member {
    uint32_t node;
    int32_t state;
    uint32_t told_ms; /* (ms, wrapping) when we last told it we hold it suspect or dead */
    uint64_t run, version;
} member_t;

/* The doubt of the prober, not the age of the member, guards against join
 * storms (Lifeguard's local health, on the side that accuses): a member
 * that joined a moment ago gets the same suspicion as any other, so that a
 * node that dies right after its join is declared down as fast as an old
 * one (tests/cluster.sh, "killed 0.5 s after its join"; swimsim_young).
 * What a storm makes slow is the whole machine, and a prober sees that in
 * itself: a tick that runs LATE_DIV-th of a period late raises its health
 * as a missed answer does (its timeouts grow, it broadcasts no suspicion),
 * and an answered probe lowers it again (bench/cluster-scale.sh 100: no
 * false down over the joins of 100 nodes on 2 cores).
 *
 * A node that joined a cluster accuses no one for its first NEW_PERIODS
 * periods: its connections are new, it does not know yet how long answers
 * take, and the machine is busy with its own start-up; an unanswered probe
 * of its is no verdict then, and no doubt of itself either (so that it
 * times out the suspicions others tell it of with its own, undoubted
 * clock). A node that started the cluster (it knew no member at its first
 * probe) accuses from the start: in a cluster that has just formed it is
 * the one that sees a member die (tests/cluster.sh, "a cluster of three
 * just formed"). A joining node's suspicions would count as independent
 * confirmations too, shortening the others' timeouts while it cannot
 * judge (swimsim_cut_far: four members, one stalled for a second). */
#define NEW_PERIODS 25
#define LATE_DIV 4

/* A member held suspect: its clock and who else suspects it. */
typedef struct suspicion {
    uint32_t node;
    unsigned nconfirm;
    uint32_t confirm[MAX_CONFIRM]; /* the members that suspect it (confirm[0] first; 0: someone) */
    uint64_t since_ns;             /* here */
    uint64_t deadline_ns;          /* DEAD at this time unless refuted */
} suspicion_t;

typedef struct relay {
    uint64_t seq;        /* our PING to target (0: answered) */
    uint32_t origin;     /* who asked */
    uint64_t origin_seq; /* its PING's number */
    uint32_t target;
    uint64_t nack_ns; /* no answer by then: NACK to origin (0: sent; a late answer still goes on) */
} relay_t;

typedef struct gossip {
    sn_swim_update_t u;
    unsigned sent; /* times piggybacked */
} gossip_t;

struct sn_swim {
    uint32_t self;
    uint64_t run, version;
    sn_swim_config_t cfg;
    sn_swim_io_t io;
    uint64_t rng;
    /* the members, sorted by node id (binary search) */
    member_t *m;
    size_t n, cap;
    /* probe order: a shuffled round robin over the members' ids */
    uint32_t *order;
    size_t norder, next, caporder;
    bool shuffled; /* the first round is shuffled too (members came in id order) */
    /* the probe of this period */
    uint32_t target;
    uint64_t seq;       /* the last PING number used (probes, probes for others, tellings) */
    uint64_t probe_seq; /* this period's probe's */
    uint64_t sent_ns, period_end_ns;
    bool acked, asked, nacked; /* its answer came; others were asked; one of them answered NACK */
    struct {
        uint32_t target;
        uint64_t seq;
    } recent[RECENT]; /* our last probes (ring): a late answer to one still shows its member runs */
    size_t recent_next;
    uint32_t rtt_node; /* the last direct answer (sn_swim_take_rtt; 0: taken) */
    uint64_t rtt_ns;
    unsigned health;
    uint64_t first_tick_ns; /* this node's start: NEW_PERIODS from it, it accuses */
    bool joined;            /* it knew members at its first probe: it joined a cluster (NEW_PERIODS) */
    relay_t relays[RELAYS];
    size_t relay_next;
    /* members held suspect */
    suspicion_t *suspects;
    size_t nsuspects, capsuspects;
    /* changes to piggyback, each until sent `limit` times */
    gossip_t *g;
    size_t ng, capg;
    sn_swim_stats_t st;
};

static uint64_t rnd(sn_swim_t *s)
{
    /* xorshift64*: the probe order and the helpers, not security */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * UINT64_C(2685821657736338717);
}

sn_swim_t *sn_swim_new(uint32_t self, uint64_t run, const sn_swim_config_t *cfg, const sn_swim_io_t *io, uint64_t seed)
{
    sn_swim_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->self = self;
    s->run = run;
    s->cfg = *cfg;
    if (!s->cfg.period_ns)
        s->cfg.period_ns = (uint64_t)SN_SWIM_PERIOD_MS * 1000000u;
    if (!s->cfg.probe_timeout_ns)
        s->cfg.probe_timeout_ns = s->cfg.period_ns / 2;
    if (!s->cfg.suspect_min_ns)
        s->cfg.suspect_min_ns = 500000000u;
    if (!s->cfg.suspect_max_mult)
        s->cfg.suspect_max_mult = 3;
    if (!s->cfg.indirect)
        s->cfg.indirect = 3;
    if (!s->cfg.confirmations)
        s->cfg.confirmations = 3;
    s->io = *io;
    s->rng = seed ? seed : 0x9E3779B97F4A7C15u ^ self;
    return s;
}

void sn_swim_free(sn_swim_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sn_swim_t *s = *self_p;
    free(s->m);
    free(s->order);
    free(s->suspects);
    free(s->g);
    free(s);
    *self_p = NULL;
}

/* Where node is in the sorted member array, or would go: the first member
 * with an id not below it. */
static size_t lower_bound(const sn_swim_t *s, uint32_t node)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->m[mid].node < node)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static member_t *find(const sn_swim_t *s, uint32_t node)
{
    size_t i = lower_bound(s, node);
    return i < s->n && s->m[i].node == node ? &s->m[i] : NULL;
}

static member_t *add(sn_swim_t *s, uint32_t node)
{
    member_t *m = sn__grow(s->m, &s->cap, s->n, sizeof *m, 16, 0);
    if (!m)
        return NULL;
    s->m = m;
    uint32_t *o = sn__grow(s->order, &s->caporder, s->norder, sizeof *o, 16, 0);
    if (!o)
        return NULL;
    s->order = o;
    size_t i = lower_bound(s, node);
    memmove(&s->m[i + 1], &s->m[i], (s->n - i) * sizeof *s->m);
    s->n++;
    memset(&s->m[i], 0, sizeof s->m[i]);
    s->m[i].node = node;
    /* into the probe order at a random place once probing (as SWIM does),
     * so that a newcomer is probed within one round; before that at the
     * end (the first round shuffles) */
    size_t at = s->norder && s->period_end_ns ? (size_t)(rnd(s) % (s->norder + 1)) : s->norder;
    memmove(&s->order[at + 1], &s->order[at], (s->norder - at) * sizeof *s->order);
    s->order[at] = node;
    s->norder++;
    if (at < s->next)
        s->next++;
    return &s->m[i];
}

/* log10 of the cluster's size, at least 1: Lifeguard's scale */
static double scale(const sn_swim_t *s)
{
    double l = log10((double)(s->n + 1));
    return l < 1 ? 1 : l;
}

/* The period grows with the cluster past ten members, half as fast as the
 * suspicion timeout (x1.5 at 100 members, x2 at 1,000): a cluster's idle
 * cost goes as its size over the period, detection as two periods plus
 * the suspicion timeout. */
static double period_scale(const sn_swim_t *s)
{
    return 1 + (scale(s) - 1) / 2;
}

static unsigned gossip_limit(const sn_swim_t *s)
{
    return 3 * (unsigned)ceil(log2((double)(s->n + 2)));
}

/* The suspicion timeout after c independent confirmations (Lifeguard),
 * longer while this node doubts its own health (it missed answers, ran
 * late or was suspected: it may be the slow one, as every node is when the
 * machine is overloaded). */
static uint64_t suspicion_ns(const sn_swim_t *s, unsigned c)
{
    double min = (double)s->cfg.suspect_min_ns * scale(s) * (1 + s->health), max = min * s->cfg.suspect_max_mult;
    double k = s->cfg.confirmations;
    double t = max - (max - min) * log(c + 1.0) / log(k + 1.0);
    return (uint64_t)(t < min ? min : t);
}

static void spread(sn_swim_t *s, const sn_swim_update_t *u)
{
    for (size_t i = 0; i < s->ng; i++)
        if (s->g[i].u.node == u->node) {
            s->g[i].u = *u;
            s->g[i].sent = 0;
            return;
        }
    gossip_t *g = sn__grow(s->g, &s->capg, s->ng, sizeof *g, 16, 0);
    if (!g)
        return; /* (the broadcast or the next anti-entropy carries it) */
    s->g = g;
    s->g[s->ng++] = (gossip_t){*u, 0};
}

static void broadcast(sn_swim_t *s, const sn_swim_update_t *u)
{
    if (s->io.broadcast) {
        s->st.broadcasts++;
        s->io.broadcast(s->io.arg, u);
    }
}

static suspicion_t *suspicion_of(sn_swim_t *s, uint32_t node);

/* m's state as it spreads; a suspicion names its first suspecter */
static sn_swim_update_t update_of(sn_swim_t *s, const member_t *m)
{
    const suspicion_t *sp = m->state == SN_SWIM_SUSPECT ? suspicion_of(s, m->node) : NULL;
    return (sn_swim_update_t){m->node, m->state, m->run, m->version, sp ? sp->confirm[0] : 0};
}

/* Sends m to `to`, with what there is to piggyback: first what `to`
 * should know of itself (we hold it suspect or dead: it refutes), then the
 * changes sent the fewest times. */
static void send(sn_swim_t *s, uint32_t to, sn_swim_msg_t *msg)
{
    msg->nupdates = 0;
    member_t *t = find(s, to);
    if (t && (t->state == SN_SWIM_SUSPECT || t->state == SN_SWIM_DEAD))
        msg->updates[msg->nupdates++] = update_of(s, t);
    /* an answer passed on for another (PING_REQ) carries what we hold of
     * whose answer it is: the asker, cut off from it, may hold it suspect
     * long after it refuted, the refutation's gossip spent elsewhere */
    member_t *a = msg->kind == SN_SWIM_ACK && msg->target != s->self ? find(s, msg->target) : NULL;
    if (a)
        msg->updates[msg->nupdates++] = update_of(s, a);
    unsigned limit = gossip_limit(s);
    while (msg->nupdates < SN_SWIM_PIGGYBACK && s->ng) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < s->ng; i++) {
            bool have = false;
            for (size_t k = 0; k < msg->nupdates && !have; k++)
                have = msg->updates[k].node == s->g[i].u.node;
            if (!have && (best == SIZE_MAX || s->g[i].sent < s->g[best].sent))
                best = i;
        }
        if (best == SIZE_MAX)
            break;
        msg->updates[msg->nupdates++] = s->g[best].u;
        if (++s->g[best].sent >= limit)
            s->g[best] = s->g[--s->ng];
    }
    s->st.sent++;
    s->io.send(s->io.arg, to, msg);
}

static suspicion_t *suspicion_of(sn_swim_t *s, uint32_t node)
{
    for (size_t i = 0; i < s->nsuspects; i++)
        if (s->suspects[i].node == node)
            return &s->suspects[i];
    return NULL;
}

static void set_state(sn_swim_t *s, member_t *m, int state)
{
    int was = m->state;
    m->state = state;
    suspicion_t *sp = state != SN_SWIM_SUSPECT ? suspicion_of(s, m->node) : NULL;
    if (sp)
        *sp = s->suspects[--s->nsuspects];
    if (was != state && s->io.changed)
        s->io.changed(s->io.arg, m->node, m->run, state, was);
}

static uint32_t ms_of(uint64_t ns)
{
    return (uint32_t)(ns / 1000000u);
}

/* m is suspect from now (its version: the one suspected), `by` holds it
 * so: this node (its probe failed), or the member we heard it from. Only
 * a suspicion of our own is told to m and broadcast (once per failure and
 * suspecter, not once per member that hears of it). */
static void suspect(sn_swim_t *s, member_t *m, uint32_t by, uint64_t now)
{
    suspicion_t *sp = suspicion_of(s, m->node);
    if (!sp) {
        suspicion_t *l = sn__grow(s->suspects, &s->capsuspects, s->nsuspects, sizeof *l, 8, 0);
        if (!l)
            return; /* (no memory: not suspected; the next probe tries again) */
        s->suspects = l;
        sp = &s->suspects[s->nsuspects++];
    }
    *sp = (suspicion_t){
        .node = m->node, .nconfirm = 1, .confirm = {by}, .since_ns = now, .deadline_ns = now + suspicion_ns(s, 0)};
    s->st.suspicions++;
    set_state(s, m, SN_SWIM_SUSPECT);
    sn_swim_update_t u = update_of(s, m);
    spread(s, &u);
    if (by != s->self)
        return;
    /* tell it at once: alive, it refutes within one message delay */
    m->told_ms = ms_of(now);
    sn_swim_msg_t msg = {.kind = SN_SWIM_PING, .seq = ++s->seq, .target = 0};
    send(s, m->node, &msg);
    /* and the members: each confirmation shortens the timeout (Lifeguard);
     * but not from a node in doubt of itself (it missed answers before
     * this one, ran late, or was suspected: it may be the slow one, or the
     * whole machine is overloaded, and a broadcast to every member would
     * feed the overload): it gossips */
    if (s->health <= 1)
        broadcast(s, &u);
}

/* An answer from `node` to a probe of ours, directly or through others,
 * in its period or later: it ran when it answered. If we hold it suspect,
 * its suspicion's clock starts again (since_ns, which confirmations count
 * from too): it is declared dead only after a whole suspicion timeout
 * with no answer, nor a refutation. A member cut off from us that others
 * still reach answers through them, often late on a loaded machine (relay
 * turns of up to 100 ms under TSan), while its refutation needs four
 * gossip hops through them: so a late answer counts. Two more rules keep
 * such a member up (swimsim's --cut and --stall check them): a passed-on
 * answer carries the helper's view (send), and a suspicion is counted by
 * who holds it, not by who passed it on (apply, `by`). Tests: the link cut
 * of tests/faults.sh, swimsim_cut_far, swimsim_cut_middle. */
static void answered(sn_swim_t *s, uint32_t node, uint64_t now)
{
    member_t *m = find(s, node);
    suspicion_t *sp = m && m->state == SN_SWIM_SUSPECT ? suspicion_of(s, node) : NULL;
    if (!sp)
        return;
    sp->since_ns = now;
    uint64_t d = now + suspicion_ns(s, sp->nconfirm - 1);
    if (d > sp->deadline_ns)
        sp->deadline_ns = d;
}

/* `by` suspects m too: returns true if that is news. */
static bool confirm(sn_swim_t *s, member_t *m, uint32_t by)
{
    suspicion_t *sp = suspicion_of(s, m->node);
    if (!sp || !by)
        return false;
    for (unsigned i = 0; i < sp->nconfirm; i++)
        if (sp->confirm[i] == by)
            return false;
    if (sp->nconfirm == MAX_CONFIRM)
        return false;
    sp->confirm[sp->nconfirm++] = by;
    uint64_t d = sp->since_ns + suspicion_ns(s, sp->nconfirm - 1);
    if (d < sp->deadline_ns)
        sp->deadline_ns = d;
    return true;
}

/* An update about ourselves: a suspicion or death of this run is refuted. */
static void about_self(sn_swim_t *s, const sn_swim_update_t *u)
{
    if (u->run != s->run || (u->state != SN_SWIM_SUSPECT && u->state != SN_SWIM_DEAD) || u->version < s->version)
        return;
    s->version = u->version + 1;
    s->st.refutations++;
    if (s->health < MAX_HEALTH) /* suspected: perhaps we are the slow one (Lifeguard) */
        s->health++;
    sn_swim_update_t alive = {s->self, SN_SWIM_ALIVE, s->run, s->version, 0};
    spread(s, &alive);
    broadcast(s, &alive);
}

/* Applies u, heard from `from` (0: from the relay itself). Unknown
 * members are added only when `add_unknown`. */
static void apply(sn_swim_t *s, const sn_swim_update_t *u, uint32_t from, uint64_t now, bool add_unknown)
{
    if (u->node == s->self) {
        about_self(s, u);
        return;
    }
    member_t *m = find(s, u->node);
    if (!m) {
        if (!add_unknown || u->state == SN_SWIM_LEFT || u->state == SN_SWIM_DEAD || !(m = add(s, u->node)))
            return;
        m->run = u->run;
        m->version = u->version;
        m->state = -1;
        set_state(s, m, SN_SWIM_ALIVE);
        if (from) /* (what the relay knows, the others were told by whoever told it) */
            spread(s, u);
        if (u->state == SN_SWIM_ALIVE)
            return;
    }
    if (u->run < m->run)
        return;
    if (u->run > m->run) { /* a new run: what we held of the old one ends */
        m->run = u->run;
        m->version = u->version;
        if (u->state == SN_SWIM_SUSPECT) {
            m->state = SN_SWIM_ALIVE;
            suspect(s, m, u->by == s->self ? 0 : u->by, now);
        } else {
            set_state(s, m, u->state);
        }
        spread(s, u);
        return;
    }
    if (m->state == SN_SWIM_LEFT)
        return;
    switch (u->state) {
    case SN_SWIM_LEFT:
        set_state(s, m, SN_SWIM_LEFT);
        spread(s, u);
        break;
    case SN_SWIM_ALIVE:
        if (u->version > m->version) {
            m->version = u->version;
            set_state(s, m, SN_SWIM_ALIVE);
            spread(s, u);
        }
        break;
    case SN_SWIM_SUSPECT: {
        /* whose suspicion it is: u->by, not `from`, which may only pass it
         * on (as it passes ours back to us); 0: someone */
        uint32_t by = u->by == s->self ? 0 : u->by;
        if (u->version > m->version || (u->version == m->version && m->state == SN_SWIM_ALIVE)) {
            m->version = u->version;
            suspect(s, m, by, now);
        } else if (u->version == m->version && m->state == SN_SWIM_SUSPECT) {
            confirm(s, m, by);
        }
        break;
    }
    case SN_SWIM_DEAD:
        if (u->version >= m->version && m->state != SN_SWIM_DEAD) {
            /* a death of a member we were the first to suspect: we tell
             * everyone, as if our own clock had run out (sn_swim_tick) */
            const suspicion_t *sp = m->state == SN_SWIM_SUSPECT ? suspicion_of(s, m->node) : NULL;
            bool first = sp && sp->confirm[0] == s->self;
            m->version = u->version;
            set_state(s, m, SN_SWIM_DEAD);
            spread(s, u);
            if (first)
                broadcast(s, u);
        }
        break;
    default:
        break;
    }
}

void sn_swim_apply(sn_swim_t *s, uint32_t from, const sn_swim_update_t *u, uint64_t now)
{
    apply(s, u, from, now, true);
}

void sn_swim_recv(sn_swim_t *s, uint32_t from, const sn_swim_msg_t *m, uint64_t now)
{
    for (size_t i = 0; i < m->nupdates && i < SN_SWIM_PIGGYBACK;
         i++) /* (the relay drops those of unknown members it cannot add) */
        apply(s, &m->updates[i], from, now, true);
    switch (m->kind) {
    case SN_SWIM_PING: {
        s->st.acks++;
        sn_swim_msg_t ack = {.kind = SN_SWIM_ACK, .seq = m->seq, .target = s->self};
        send(s, from, &ack);
        break;
    }
    case SN_SWIM_ACK:
        if (m->seq == s->probe_seq && m->target == s->target && s->target) {
            s->acked = true;
            answered(s, m->target, now);
            if (from == s->target) { /* a direct answer: its round trip */
                s->rtt_node = from;
                s->rtt_ns = now - s->sent_ns;
            }
            break;
        }
        for (size_t i = 0; i < RECENT; i++)
            if (m->target && s->recent[i].seq == m->seq && s->recent[i].target == m->target) {
                answered(s, m->target, now); /* (an earlier period's probe: late) */
                break;
            }
        for (size_t i = 0; i < RELAYS; i++) {
            relay_t *r = &s->relays[i];
            if (r->seq && r->seq == m->seq && r->target == m->target) { /* ours, for another: passed on */
                sn_swim_msg_t ack = {.kind = SN_SWIM_ACK, .seq = r->origin_seq, .target = r->target};
                uint32_t origin = r->origin;
                r->seq = 0;
                send(s, origin, &ack);
                break;
            }
        }
        break;
    case SN_SWIM_NACK: /* a helper did not reach our target either: our own link works */
        if (m->seq == s->probe_seq && m->target == s->target && s->target)
            s->nacked = true;
        break;
    case SN_SWIM_PING_REQ: {
        if (m->target == s->self || !find(s, m->target))
            break;
        relay_t *r = &s->relays[s->relay_next++ % RELAYS];
        /* (the asker asked after its probe timeout and decides at its
         * period's end, about as long again: a NACK sent within 4/5 of a
         * probe timeout reaches it in time) */
        *r = (relay_t){++s->seq, from, m->seq, m->target, now + s->cfg.probe_timeout_ns * 4 / 5};
        s->st.pings++;
        sn_swim_msg_t ping = {.kind = SN_SWIM_PING, .seq = r->seq, .target = 0};
        send(s, m->target, &ping);
        break;
    }
    default:
        break;
    }
}

void sn_swim_heard(sn_swim_t *s, uint32_t from, uint64_t run, uint64_t now)
{
    member_t *m = find(s, from);
    if (!m || run != m->run)
        return;
    if (from == s->target)
        s->acked = true;
    if ((m->state == SN_SWIM_SUSPECT || m->state == SN_SWIM_DEAD) &&
        (uint32_t)(ms_of(now) - m->told_ms) >= ms_of(s->cfg.period_ns)) {
        m->told_ms = ms_of(now); /* it is running: it should refute */
        sn_swim_msg_t msg = {.kind = SN_SWIM_PING, .seq = ++s->seq, .target = 0};
        send(s, from, &msg);
    }
}

/* The reliable channel's connection to `node` closed: the sign of a death
 * that comes first (the kernel closes a process's connections when it
 * ends), so the member is suspected now, not at its turn in the probe
 * order, which in a table of many dead members comes round only after
 * many periods (tests/churn.sh: a table that holds the recently dead
 * only). A suspicion, not a verdict: a member alive refutes it as any
 * other, and a suspicion timeout passes before it is dead. No suspicion
 * from a node that just joined (NEW_PERIODS), nor of a member suspected
 * already. */
void sn_swim_closed(sn_swim_t *s, uint32_t node, uint64_t now)
{
    member_t *m = find(s, node);
    bool starting = !s->first_tick_ns || (s->joined && now - s->first_tick_ns < s->cfg.period_ns * NEW_PERIODS);
    if (m && m->state == SN_SWIM_ALIVE && !starting)
        suspect(s, m, s->self, now);
}

void sn_swim_stalled(sn_swim_t *s, uint64_t late)
{
    s->acked = true; /* its answer may be unread in our socket: no verdict on this probe */
    for (size_t i = 0; i < s->nsuspects; i++)
        s->suspects[i].deadline_ns += late;
}

/* The next member to probe: round robin over a shuffled order, reshuffled
 * at the end of each round; dead and departed members are skipped. */
static member_t *next_target(sn_swim_t *s)
{
    for (size_t tries = 0; tries < s->norder; tries++) {
        if (s->next >= s->norder || !s->shuffled) {
            s->shuffled = true;
            for (size_t i = s->norder; i > 1; i--) { /* Fisher-Yates */
                size_t j = (size_t)(rnd(s) % i);
                uint32_t t = s->order[i - 1];
                s->order[i - 1] = s->order[j];
                s->order[j] = t;
            }
            s->next = 0;
        }
        member_t *m = find(s, s->order[s->next++]);
        if (m && (m->state == SN_SWIM_ALIVE || m->state == SN_SWIM_SUSPECT))
            return m;
    }
    return NULL;
}

/* Asks up to cfg.indirect random live members other than the target to
 * probe it for us, and probes it again directly on the reliable channel
 * (as memberlist does with TCP: a network that drops the probes'
 * datagrams, and them only, delays answers but fails no one). */
static void ask_others(sn_swim_t *s)
{
    sn_swim_msg_t again = {.kind = SN_SWIM_PING, .seq = s->probe_seq, .reliable = true};
    send(s, s->target, &again);
    unsigned asked = 0;
    for (size_t tries = 0; tries < 4 * s->cfg.indirect + 8 && asked < s->cfg.indirect && s->n > 1; tries++) {
        member_t *h = &s->m[rnd(s) % s->n];
        if (h->node == s->target || h->state != SN_SWIM_ALIVE)
            continue;
        sn_swim_msg_t req = {.kind = SN_SWIM_PING_REQ, .seq = s->probe_seq, .target = s->target};
        s->st.ping_reqs++;
        send(s, h->node, &req);
        asked++;
    }
}

/* Suspicions that ran out: those members are dead. */
static void deaths(sn_swim_t *s, uint64_t now)
{
    for (size_t i = 0; i < s->nsuspects;) {
        member_t *m = find(s, s->suspects[i].node);
        if (m && m->state == SN_SWIM_SUSPECT && now >= s->suspects[i].deadline_ns) {
            s->st.deaths++;
            uint32_t first = s->suspects[i].confirm[0];
            set_state(s, m, SN_SWIM_DEAD); /* (takes it off the list) */
            sn_swim_update_t u = update_of(s, m);
            spread(s, &u);
            /* the first to suspect it tells everyone; another member
             * whose clock ran out first (the first one doubts itself, so
             * its clock is longer) tells the first one at once, the death
             * on top of a probe, and it tells everyone: one message more
             * per member, not a broadcast from each (tests/cluster.sh, "a
             * cluster of three just formed") */
            if (first == s->self) {
                broadcast(s, &u);
            } else if (first && find(s, first)) {
                sn_swim_msg_t msg = {.kind = SN_SWIM_PING, .seq = ++s->seq, .target = 0};
                send(s, first, &msg);
            }
            continue;
        }
        i++;
    }
}

/* Probes made for others, unanswered in time: NACK to each asker (Lifeguard). */
static void nacks(sn_swim_t *s, uint64_t now)
{
    for (size_t i = 0; i < RELAYS; i++) {
        relay_t *r = &s->relays[i];
        if (r->seq && r->nack_ns && now >= r->nack_ns) {
            sn_swim_msg_t nack = {.kind = SN_SWIM_NACK, .seq = r->origin_seq, .target = r->target};
            r->nack_ns = 0;
            send(s, r->origin, &nack);
        }
    }
}

/* The period's probe of `t` had no answer, even through others: perhaps
 * we are slow (the suspicion's timeout counts this miss too: a member
 * stalled for a second that others reach only through a cut link has
 * time to refute, swimsim_cut_far). When a helper's NACK says its own
 * link to the target failed too, the target is the likelier silent one:
 * such misses raise our doubt only to NACKED_HEALTH, so that a prober
 * among many dead members (churn) keeps its pace (Lifeguard's missed
 * NACKs; tests/churn.sh). No verdict from a node that just joined
 * (NEW_PERIODS). */
static void missed(sn_swim_t *s, member_t *t, uint64_t now)
{
    bool starting = s->joined && now - s->first_tick_ns < s->cfg.period_ns * NEW_PERIODS;
    if (!starting && s->health < (s->nacked ? NACKED_HEALTH : MAX_HEALTH))
        s->health++;
    if (starting) {
    } else if (t->state == SN_SWIM_ALIVE) {
        suspect(s, t, s->self, now);
    } else if (confirm(s, t, s->self) && s->health <= 1) { /* suspected already: ours confirms it */
        sn_swim_update_t u = update_of(s, t);
        u.by = s->self;
        broadcast(s, &u);
    }
}

/* The next period's probe: a slow node probes less often, and so does
 * one of a large cluster (period_scale). */
static void next_probe(sn_swim_t *s, uint64_t now)
{
    uint64_t period = (uint64_t)((double)s->cfg.period_ns * period_scale(s)) * (1 + (uint64_t)s->health / 2);
    s->period_end_ns = now + period;
    member_t *t = next_target(s);
    s->target = t ? t->node : 0;
    s->acked = s->asked = s->nacked = false;
    if (t) {
        s->sent_ns = now;
        s->st.pings++;
        s->probe_seq = ++s->seq;
        size_t k = s->recent_next++ % RECENT;
        s->recent[k].target = t->node;
        s->recent[k].seq = s->probe_seq;
        sn_swim_msg_t ping = {.kind = SN_SWIM_PING, .seq = s->probe_seq, .target = 0};
        send(s, t->node, &ping);
    }
}

void sn_swim_tick(sn_swim_t *s, uint64_t now)
{
    /* we did not run for a while: no verdict on the probe, and the
     * suspicions' clocks get that time back (before they are looked at:
     * their refutations may wait unread in our socket) */
    uint64_t late = s->period_end_ns && now > s->period_end_ns ? now - s->period_end_ns : 0;
    if (late > s->cfg.period_ns / 2) {
        sn_swim_stalled(s, late);
        s->period_end_ns = now;
    }
    deaths(s, now);
    nacks(s, now);
    /* the probe's own timeout: others try */
    if (s->target && !s->acked && !s->asked &&
        now >= s->sent_ns + s->cfg.probe_timeout_ns * (1 + (uint64_t)s->health)) {
        s->asked = true;
        ask_others(s);
    }
    if (now < s->period_end_ns)
        return;
    if (!s->first_tick_ns) {
        s->first_tick_ns = now;
        s->joined = s->n > 0;
    }
    bool doubt = late > s->cfg.period_ns / LATE_DIV; /* (we ran late: see NEW_PERIODS) */
    if (s->target) {
        member_t *t = find(s, s->target);
        if (!s->acked && t && (t->state == SN_SWIM_ALIVE || t->state == SN_SWIM_SUSPECT))
            missed(s, t, now);
        else if (s->acked && s->health && !doubt)
            s->health--;
    }
    if (doubt && s->health < MAX_HEALTH)
        s->health++;
    next_probe(s, now);
}

bool sn_swim_take_rtt(sn_swim_t *s, uint32_t *node, uint64_t *rtt_ns)
{
    if (!s->rtt_node)
        return false;
    *node = s->rtt_node;
    *rtt_ns = s->rtt_ns;
    s->rtt_node = 0;
    return true;
}

uint64_t sn_swim_next_ns(const sn_swim_t *s)
{
    uint64_t next = s->period_end_ns;
    if (s->target && !s->acked && !s->asked) {
        uint64_t t = s->sent_ns + s->cfg.probe_timeout_ns * (1 + (uint64_t)s->health);
        if (t < next)
            next = t;
    }
    for (size_t i = 0; i < s->nsuspects; i++)
        if (s->suspects[i].deadline_ns < next)
            next = s->suspects[i].deadline_ns;
    return next;
}

uint64_t sn_swim_version(const sn_swim_t *s)
{
    return s->version;
}

int sn_swim_state(const sn_swim_t *s, uint32_t node, uint64_t *run, uint64_t *version)
{
    const member_t *m = find(s, node);
    if (!m)
        return -1;
    if (run)
        *run = m->run;
    if (version)
        *version = m->version;
    return m->state;
}

size_t sn_swim_members(const sn_swim_t *s)
{
    return s->n;
}

void sn_swim_stats(const sn_swim_t *s, sn_swim_stats_t *out)
{
    *out = s->st;
    out->health = s->health;
}

void sn_swim_forget(sn_swim_t *s, uint32_t node)
{
    size_t i = lower_bound(s, node);
    if (i == s->n || s->m[i].node != node)
        return;
    memmove(&s->m[i], &s->m[i + 1], (s->n - i - 1) * sizeof *s->m);
    s->n--;
    for (size_t k = 0; k < s->norder; k++)
        if (s->order[k] == node) {
            memmove(&s->order[k], &s->order[k + 1], (s->norder - k - 1) * sizeof *s->order);
            s->norder--;
            if (k < s->next)
                s->next--;
            break;
        }
    for (size_t k = 0; k < s->nsuspects; k++)
        if (s->suspects[k].node == node) {
            s->suspects[k] = s->suspects[--s->nsuspects];
            break;
        }
    if (s->target == node) /* (no verdict on it: it is gone) */
        s->target = 0;
}

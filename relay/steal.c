/* steal.c - cross-node work stealing: the relay's half of the handover
 * (sched/migrate.c is the scheduler's half). Runs on the I/O thread,
 * except sn__steal_hook, which workers call.
 *
 * When every worker of a node has found nothing locally, the node (the
 * thief T) asks one member (the victim V) for work: the most loaded by the
 * load members advertise in heartbeats, chosen at random among those with
 * at least half the top load, and only members whose process types agree
 * with ours. One request at a time; an empty answer backs off (10 ms,
 * doubling to 1 s), so an idle cluster sends nothing at all (nobody
 * advertises Ready work, so there is no one to ask).
 *
 * The handover, for each process:
 *   T -> V  StealRequest(id, max)
 *   V -> T  StealOffer(id, migrants)   V froze them (Ready, nothing pending
 *                                       but sleeps, which they carry with the
 *                                       time each has left, out of V's timer)
 *                                       and marshalled their state
 *   T -> V  StealAccept(id, pids)      T built frozen copies, unreachable
 *   V -> T  StealCommit(id, pids, queued events)
 *                                       V decided: each process left V's
 *                                       table for a forwarding entry, its
 *                                       queued events ride along (in
 *                                       frames of about max_frame, the
 *                                       PIDs in the last: send_commit)
 *   T       activates: events first, then it runs; later messages for it
 *           that reach V are forwarded, on the same connection, after the
 *           commit (sn__relay_send_ordered keeps that order).
 * The owner is V until V decides the commit, T after. V runs a process
 * again only if it reverts (no accept in time, T gone, refused); T runs it
 * only after the commit arrives. V reverting sends an empty commit (an
 * abort) so T drops its copies; T drops them too if V goes down. So a
 * process runs in one place at a time: a crash loses what the crashed node
 * owned, and never duplicates anything. A thief that restarts is a new
 * incarnation: its old handovers are over on both sides (peer_gone).
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grow.h"
#include "relay_int.h"
#include "move.h"
#include "drain.h"
#include "peer.h"
#include "steal.h"
#include "awaited.h"
#include "locate.h"

#define OFFER_TIMEOUT_NS 3000000000u   /* victim: accept within this, or revert */
#define REQUEST_TIMEOUT_NS 3000000000u /* thief: offer within this, or ask again */
#define BACKOFF_MIN_MS 10
#define NO_VICTIM_PERIODS 25 /* with no member to ask: look again after this many periods at the latest */
#define BACKOFF_MAX_MS 1000

typedef struct offer {
    uint64_t id; /* with SN__PUSH_ID: a push (move.c), whose outcome goes to sn__move_decided */
    uint32_t thief;
    uint64_t deadline_ns;
    sn_migrant_t *m;
    size_t n;
} offer_t;

typedef struct install {
    uint64_t id;
    uint32_t victim;
    sn_pid_t pid;
    void *handle;
    uint32_t moves;
    /* messages and flush markers for it that came from other nodes while
     * it was on its way here (see sn__steal_hold), oldest first */
    struct held *q;
    size_t nq, capq;
    /* its queued events from the commit's frames so far (all but the
     * last, which activates it: on_commit) */
    sn_event_t *ev;
    size_t nev, capev;
    /* its pending sleeps, due on this node's clock: armed when it
     * activates (sn__migrate_activate) */
    size_t nsleeps;
    sn_migrant_sleep_t sleeps[SN_MIGRANT_SLEEPS];
} install_t;

_Static_assert(SN_WIRE_SLEEPS == SN_MIGRANT_SLEEPS, "a migrant's sleeps fit its wire record");

/* Migrant m as an offer carries it: its sleeps as the time each has left
 * at `now` (this node's clock; the taker adds its own: wire_sleeps). */
static void to_wire(const sn_migrant_t *m, sn_wire_migrant_t *w, uint64_t now)
{
    *w = (sn_wire_migrant_t){.pid = m->pid,
                             .parent = m->parent,
                             .awaited = m->awaited,
                             .fresh = m->fresh,
                             .idle = m->idle,
                             .blocked = m->blocked,
                             .await_tag = m->await_tag,
                             .await_node = m->await_node,
                             .type_version = m->type_version,
                             .state = m->state,
                             .moves = m->moves,
                             .nsleeps = m->nsleeps};
    for (size_t k = 0; k < m->nsleeps; k++) {
        w->sleep_tag[k] = m->sleeps[k].tag;
        w->sleep_left_us[k] = m->sleeps[k].deadline_ns > now ? (m->sleeps[k].deadline_ns - now) / 1000u : 0;
    }
    snprintf(w->type, sizeof w->type, "%s", m->type);
}

/* The sleeps of offered migrant w, due on this node's clock (`now` plus
 * the time each had left): into sleeps[], how many. */
static size_t wire_sleeps(const sn_wire_migrant_t *w, sn_migrant_sleep_t *sleeps, uint64_t now)
{
    size_t n = w->nsleeps < SN_MIGRANT_SLEEPS ? w->nsleeps : SN_MIGRANT_SLEEPS;
    for (size_t k = 0; k < n; k++) {
        uint64_t left = w->sleep_left_us[k] < UINT64_MAX / 4000u ? w->sleep_left_us[k] * 1000u : UINT64_MAX / 4;
        sleeps[k] = (sn_migrant_sleep_t){w->sleep_tag[k], now + left};
    }
    return n;
}

/* One of them, and the run of the node it came from (whose
 * acknowledgements wait while it is held: peer_t.nheld) */
typedef struct held {
    sn_wire_send_t s;
    uint32_t node;
    uint64_t incarnation;
} held_t;

struct sn_steal {
    int batch;
    bool enabled; /* --no-steal: take none, give none */
    /* thief */
    uint64_t next_id;
    uint32_t asked; /* victim of the outstanding request, 0 if none */
    uint64_t asked_id, asked_deadline_ns;
    uint64_t next_try_ns; /* backoff */
    int backoff_ms;
    install_t *inst;
    size_t ninst, capinst;
    uint64_t rng;
    bool refill;           /* the last steal brought work: ask again when little is left, before running dry */
    uint64_t refill_at_ns; /* while refill: when the tick looks at the queue again */
    uint64_t refill_seen_ns, refill_seen_ready, refill_wait_ns; /* the last look that saw the queue shrink */
    /* victim */
    offer_t *offers;
    size_t noffers, capoffers;
};

int sn__steal_init(sn_relay_t *r, const sn_relay_config_t *cfg)
{
    r->steal = calloc(1, sizeof *r->steal);
    if (!r->steal)
        return -1;
    r->steal->batch = cfg->steal_batch > 0 ? cfg->steal_batch : 64;
    r->steal->enabled = cfg->steal != 0;
    r->steal->backoff_ms = BACKOFF_MIN_MS;
    r->steal->rng = r->incarnation | 1;
    atomic_store(&r->want_work, cfg->steal ? 1 : 0); /* a new node is idle: its workers parked before we came */
    return 0;
}

/* Each migrant of offer o runs here again; a push's moves end with
 * error, each after its process is back (move.c). */
static void revert_offer(sn_relay_t *r, offer_t *o, int error, const char *why)
{
    for (size_t i = 0; i < o->n; i++) {
        sn_pid_t pid = o->m[i].pid;
        if (o->m[i].handle)
            sn__migrate_revert(r->sched, &o->m[i]);
        if (o->id & SN__PUSH_ID)
            sn__move_decided(r, o->id, pid, error, why);
    }
    free(o->m);
}

/* A process on its way here (accepted, not yet committed) is not in the
 * scheduler's table: a message for it from another node would go on, by
 * this node's forwarding entry, to the node it is leaving, and come back
 * after the commit, behind later messages of the same sender that reach
 * this node after it arrived (and go in at once). So what comes for it
 * from other nodes meanwhile, messages and flush markers, waits here in
 * its install, in order, and goes in right after the commit's events.
 * (What this node's own senders send it goes through the relay's queue,
 * and is held by its location entry: locate.c.)
 *
 * Its senders' nodes keep the frames it came in until this node
 * acknowledges them, and bounce their sends as nodedown if this node goes
 * down first. While anything from a node is held here, this node's
 * acknowledgements to it stop short of the first frame held
 * (sn__relay_ackable): a node killed before the commit has not confirmed
 * those messages, and their senders hear nodedown, as for any message it
 * had not confirmed; once they went in, or on, the acknowledgement goes
 * out. Only a frame so kept is held (relay_t.in_seq): what came otherwise
 * goes on at once. */

/* What came for an install while it was on its way here goes on now, in
 * order, as if it arrived now: to the process, activated here (its commit
 * came), or where this node's route for it leads (the handover was undone:
 * the victim runs it still, or is gone). The install is out of the table
 * by then, so none of it is held again. `free_only`: the scheduler is gone. */
static void release_held(sn_relay_t *r, held_t *q, size_t n, bool free_only)
{
    for (size_t i = 0; i < n; i++) {
        if (free_only) {
            sn_payload_destroy(&q[i].s.payload);
            continue;
        }
        peer_t *p = sn__relay_find_peer(r, q[i].node);
        /* (else reset since: sn__relay_reset_peer) */
        bool counted = p && p->incarnation == q[i].incarnation && p->nheld;
        if (sn__loc_hold_passing(r, q[i].node, &q[i].s, counted))
            continue; /* (behind its arrival's flush, its frame still not acknowledged: locate.c) */
        if (counted)
            p->nheld--;
        sn__relay_inbound_send(r, NULL, &q[i].s); /* (takes the payload) */
    }
    free(q);
}

/* Takes install i out of the table (the last one moves into its place),
 * its held sends into *q, *nq. */
static void drop_install(struct sn_steal *s, size_t i, held_t **q, size_t *nq)
{
    install_t *in = &s->inst[i];
    *q = in->q;
    *nq = in->nq;
    for (size_t k = 0; k < in->nev; k++) /* (a commit cut short: the process never came) */
        sn_payload_destroy(&in->ev[k].data);
    free(in->ev);
    s->inst[i] = s->inst[--s->ninst];
}

bool sn__steal_hold(sn_relay_t *r, const peer_t *from, sn_wire_send_t *snd)
{
    struct sn_steal *s = r->steal;
    if (!s || s->ninst == 0 || !from || !r->in_seq)
        return false;
    for (size_t i = 0; i < s->ninst; i++) {
        install_t *in = &s->inst[i];
        if (!sn_pid_eq(in->pid, snd->to))
            continue;
        peer_t *v = sn__relay_find_peer(r, in->victim);
        if (v && atomic_load_explicit(&v->down, memory_order_relaxed))
            return false;                               /* (its victim is down: passed on, see sn__steal_peer_gone) */
        peer_t *p = sn__relay_find_peer(r, from->node); /* (from, writable: its nheld) */
        if (!p)
            return false;
        held_t *q = sn__grow(in->q, &in->capq, in->nq, sizeof *q, 8, 0);
        if (!q)
            return false; /* (no memory: passed on at once) */
        in->q = q;
        in->q[in->nq++] = (held_t){*snd, p->node, p->incarnation};
        snd->payload = NULL; /* (taken) */
        if (p->nheld++ == 0) /* (frames come in order: the first held is the oldest) */
            p->held_cap = r->in_seq - 1;
        return true;
    }
    return false;
}

void sn__steal_fini(sn_relay_t *r)
{
    struct sn_steal *s = r->steal;
    if (!s)
        return;
    for (size_t i = 0; i < s->ninst; i++) {
        sn__migrate_discard(r->sched, s->inst[i].handle);
        release_held(r, s->inst[i].q, s->inst[i].nq, true);
    }
    for (size_t i = 0; i < s->noffers; i++) { /* the scheduler has shut down: only free */
        for (size_t k = 0; k < s->offers[i].n; k++)
            sn_payload_destroy(&s->offers[i].m[k].state);
        free(s->offers[i].m);
    }
    free(s->inst);
    free(s->offers);
    free(s);
    r->steal = NULL;
}

void sn__steal_stop(sn_relay_t *r)
{
    struct sn_steal *s = r->steal;
    for (size_t i = 0; i < s->noffers; i++)
        revert_offer(r, &s->offers[i], SN_ESHUTDOWN, "this node is shutting down");
    s->noffers = 0;
    sn__move_stop(r);
    sn__drain_stop(r);
    while (s->ninst) {
        held_t *q;
        size_t nq;
        sn__migrate_discard(r->sched, s->inst[0].handle);
        drop_install(s, 0, &q, &nq);
        release_held(r, q, nq, false);
    }
    s->asked = 0;
}

int sn__steal_hook(void *arg, sn_sched_t *sched)
{
    sn_relay_t *r = arg;
    /* the I/O thread looks for work (once per idle spell, not per park) */
    if (!atomic_exchange_explicit(&r->want_work, 1, memory_order_acq_rel))
        sn__relay_poke(r);
    return 0;
}

/* Fault injection, for the crash tests (tests/steal_faults.sh): with
 * SN_FAULT set to a step's name the process dies right after that step,
 * as kill -9 would, giving what it just sent 100 ms to leave. Not compiled
 * into Release builds. */
static void fault(const char *step)
{
#ifdef SN_FAULT_INJECTION
    const char *want = getenv("SN_FAULT");
    if (want && !strcmp(want, step)) {
        zclock_sleep(100);
        _exit(9);
    }
#else
    (void)step;
#endif
}

/* ------------------------------------------------------------ partners */

void sn__steal_types(sn_relay_t *r, peer_t *p, const sn_wire_type_t *types, size_t n)
{
    sn_wire_type_t *copy = malloc(n * sizeof *copy);
    if (!copy)
        return;
    memcpy(copy, types, n * sizeof *copy);
    free(p->types);
    p->types = copy;
    p->ntypes = n;
    /* a steal partner agrees with us on the version of every migratable
     * type both have */
    int ok = 1;
    for (size_t i = 0; i < r->ntypes && ok; i++)
        for (size_t k = 0; k < n; k++)
            if (!strcmp(r->types[i].name, types[k].name) && r->types[i].migratable &&
                r->types[i].version != types[k].version) {
                if (p->steal_ok != 0)
                    SNLOG_WARN(r,
                               "node %" PRIu32 " is not a steal partner: process type '%s' is "
                               "version %" PRIu32 " here and %" PRIu32 " there",
                               p->node, r->types[i].name, r->types[i].version, types[k].version);
                ok = 0;
                break;
            }
    bool partner = ok == 1 && p->steal_ok != 1;
    p->steal_ok = ok;
    if (partner)
        sn__steal_loaded(r, p); /* (a new partner may have work: look now) */
}

/* Can thief t run a process of type `type`? (victim side) */
static bool thief_takes(void *arg, const sn_type_t *type)
{
    peer_t *t = arg;
    for (size_t i = 0; i < t->ntypes; i++)
        if (!strcmp(t->types[i].name, type->name))
            return t->types[i].version == type->version && t->types[i].migratable;
    return false;
}

/* ------------------------------------------------------------- victim */

/* An offer is one frame of at most max_frame: the processes taken whose
 * states do not fit in it (one bigger than half of it never does) run
 * here again; a process is not stolen whose state is over the limit.
 * Returns how many stay, m[0..n) (test_steal: too_big_to_move). */
static size_t fit_frame(sn_relay_t *r, sn_migrant_t *m, size_t got)
{
    size_t room = r->max_frame / 2, k = 0;
    for (size_t i = 0; i < got; i++) {
        size_t need = (m[i].state ? m[i].state->len : 0) + 256; /* (its record's fields, generously) */
        if (need <= room) {
            room -= need;
            m[k++] = m[i];
        } else {
            sn__migrate_revert(r->sched, &m[i]);
        }
    }
    return k;
}

static void on_request(sn_relay_t *r, peer_t *t, sn_frame_t *f)
{
    struct sn_steal *s = r->steal;
    sn_stats_t st;
    sn_sched_stats(r->sched, &st);
    /* half the difference between our Ready work and the thief's: all of
     * it that is ours to give for the two to end even (a thief that ran
     * dry gets half of ours; one that asks early, to refill, less; work
     * does not go back and forth between two nodes that are about even) */
    size_t n = st.ready > f->steal_ready ? (size_t)(st.ready - f->steal_ready) / 2 : 0;
    if (n > f->steal_max)
        n = f->steal_max;
    if (n > (size_t)s->batch)
        n = (size_t)s->batch;
    if (t->steal_ok != 1 || !s->enabled || r->no_steal)
        n = 0; /* types disagree (or unknown yet), or we do not give work: nothing for it */
    offer_t *o = n ? sn__grow(s->offers, &s->capoffers, s->noffers, sizeof *o, 8, 0) : s->offers;
    if (o)
        s->offers = o;
    else
        n = 0; /* out of memory: nothing moves */
    sn_migrant_t *m = n ? calloc(n, sizeof *m) : NULL;
    size_t got = m ? sn__migrate_take(r->sched, n, thief_takes, t, m) : 0;
    got = fit_frame(r, m, got);
    sn_wire_migrant_t *w = got ? calloc(got, sizeof *w) : NULL;
    if (got && !w) {
        offer_t tmp = {0, 0, 0, m, got};
        revert_offer(r, &tmp, 0, NULL);
        m = NULL;
        got = 0;
    }
    uint64_t now = sn__relay_now_ns();
    for (size_t i = 0; i < got; i++)
        to_wire(&m[i], &w[i], now);
    void *buf;
    size_t len;
    if (sn_codec_encode_steal_offer(r->node, r->incarnation, f->steal_id, w, got, &buf, &len) == 0) {
        sn__relay_send_ordered(r, t, buf, len);
        if (got)
            s->offers[s->noffers++] = (offer_t){f->steal_id, t->node, sn__relay_now_ns() + OFFER_TIMEOUT_NS, m, got};
        if (got)
            fault("offer-sent");
        else
            free(m);
    } else if (got) {
        offer_t tmp = {0, 0, 0, m, got};
        revert_offer(r, &tmp, 0, NULL);
    } else {
        free(m);
    }
    free(w);
}

static offer_t *find_offer(struct sn_steal *s, uint32_t thief, uint64_t id)
{
    for (size_t i = 0; i < s->noffers; i++)
        if (s->offers[i].thief == thief && s->offers[i].id == id)
            return &s->offers[i];
    return NULL;
}

static void drop_offer(struct sn_steal *s, offer_t *o)
{
    *o = s->offers[--s->noffers];
}

static size_t send_size(const sn_wire_send_t *s)
{
    return 64 + (s->payload ? s->payload->len : 0);
}

/* Sends the commit (or, with no PIDs, the abort) of handover id to t. The
 * queued events go in frames of at most max_frame (at least one event
 * each), all but the last marked `more`, the PIDs in the last: the thief
 * activates them on the last (on_commit). So no frame of it is over what
 * a thief joins (max_msg and a frame's worth besides: inbound.c,
 * part_in), whatever the processes' mailboxes hold; one event over max_msg
 * (a send from this node, which has no limit) goes back to its sender as
 * too big, as it would on its way to another node. Guarded by
 * test_relay_edges stolen_receiver. */
static void send_commit(sn_relay_t *r, peer_t *t, uint64_t id, const sn_pid_t *pids, size_t n, sn_wire_send_t *fw,
                        size_t nfw)
{
    size_t kept = 0;
    for (size_t k = 0; k < nfw; k++) {
        if (fw[k].payload && fw[k].payload->len > r->max_msg)
            sn__relay_bounce_local(r, &fw[k], SN_ETOOBIG, t->node); /* (takes its payload) */
        else if ((fw[kept++] = fw[k]), kept - 1 != k)
            fw[k].payload = NULL; /* (moved down) */
    }
    size_t at = 0;
    do {
        size_t k = at, bytes = 0;
        while (k < kept && (k == at || bytes + send_size(&fw[k]) <= r->max_frame))
            bytes += send_size(&fw[k++]);
        bool more = k < kept;
        void *buf;
        size_t len;
        if (sn_codec_encode_steal_commit(r->node, r->incarnation, id, more ? NULL : pids, more ? 0 : n,
                                         kept ? fw + at : NULL, k - at, more, &buf, &len) == 0)
            sn__relay_send_ordered(r, t, buf, len);
        /* (out of memory: the thief drops its copies when we are gone;
         * until then they wait, unreachable and harmless) */
        at = k;
    } while (at < kept);
}

/* The outcome of each migrant of push o, once its commit went: those in
 * done[0..ndone) (in the order of o's migrants) moved, the others ran
 * here again (refused by the target, or not committed). */
static void push_decided(sn_relay_t *r, const offer_t *o, const sn_pid_t *done, size_t ndone)
{
    size_t k = 0;
    for (size_t i = 0; i < o->n; i++) {
        bool moved = k < ndone && sn_pid_eq(done[k], o->m[i].pid);
        k += moved;
        sn__move_decided(r, o->id, o->m[i].pid, moved ? 0 : SN_EREFUSED,
                         moved ? NULL : "the node refused it (its type there, draining or shutting down)");
    }
}

static void on_accept(sn_relay_t *r, peer_t *t, sn_frame_t *f)
{
    struct sn_steal *s = r->steal;
    offer_t *o = find_offer(s, t->node, f->steal_id);
    if (!o) {
        /* We gave up on it already: on its deadline (the abort went then),
         * or when we held the thief down, which may only have been frozen
         * (no abort went: sn__steal_peer_gone). The abort again: the
         * thief drops its copies and lets go of what it holds for them
         * (sn__steal_hold); without it, it held their messages, and the
         * acknowledgements of their frames, for good. */
        send_commit(r, t, f->steal_id, NULL, 0, NULL, 0);
        return;
    }
    sn_pid_t *done = calloc(o->n ? o->n : 1, sizeof *done);
    sn_wire_send_t *fw = NULL;
    size_t ndone = 0, nfw = 0, capfw = 0;
    for (size_t i = 0; i < o->n; i++) {
        bool accepted = false;
        for (size_t k = 0; k < f->npids && !accepted; k++)
            accepted = sn_pid_eq(f->pids[k], o->m[i].pid);
        sn_event_t *ev = NULL;
        size_t nev = 0;
        if (!accepted || !done || sn__migrate_commit(r->sched, &o->m[i], t->node, &ev, &nev) != 0) {
            sn__migrate_revert(r->sched, &o->m[i]);
            continue;
        }
        done[ndone++] = o->m[i].pid;
        sn__loc_departed(r, o->m[i].pid, t->node, o->m[i].moves);
        sn__await_departed(r, &o->m[i], t->node); /* (before the commit goes: its parent's node follows it) */
        if (nfw + nev > capfw) {
            capfw = (nfw + nev) * 2;
            sn_wire_send_t *more;
            while (!(more = malloc(capfw * sizeof *more))) /* these events have no other place to go */
                sched_yield();
            if (nfw)
                memcpy(more, fw, nfw * sizeof *more);
            free(fw);
            fw = more;
        }
        for (size_t k = 0; k < nev; k++)
            fw[nfw++] = (sn_wire_send_t){
                o->m[i].pid, ev[k].from, ev[k].tag, (int)ev[k].type, ev[k].error, ev[k].data, 0, 0, 0, 0};
        free(ev);
    }
    send_commit(r, t, o->id, done, ndone, fw, nfw);
    if (ndone)
        fault("commit-sent");
    SNLOG_DEBUG(r, "steal %" PRIu64 ": %zu committed to node %" PRIu32, o->id, ndone, t->node);
    for (size_t k = 0; k < nfw; k++)
        sn_payload_destroy(&fw[k].payload);
    free(fw);
    offer_t ended = *o;
    drop_offer(s, o);
    if (ended.id & SN__PUSH_ID)
        push_decided(r, &ended, done, ndone);
    else if (ndone) {
        atomic_fetch_add_explicit(&r->steals_out, 1, memory_order_relaxed);
        sn__add(&t->m_steals_out, 1);
    }
    free(done);
    free(ended.m);
}

/* -------------------------------------------------------------- thief */

static void on_offer(sn_relay_t *r, peer_t *v, sn_frame_t *f)
{
    struct sn_steal *s = r->steal;
    /* a push (move.c) comes unasked: taken unless this node is stopping
     * or draining (drain.c; tests/drain.sh) */
    bool push = (f->steal_id & SN__PUSH_ID) != 0;
    bool ours = (push || (s->asked == v->node && s->asked_id == f->steal_id)) && !r->no_steal && !r->draining;
    sn_pid_t *ok = calloc(f->nmigrants ? f->nmigrants : 1, sizeof *ok);
    size_t nok = 0;
    for (size_t i = 0; ours && ok && i < f->nmigrants; i++) {
        sn_wire_migrant_t *w = &f->migrants[i];
        sn_migrant_t m = {.pid = w->pid,
                          .parent = w->parent,
                          .awaited = (uint8_t)w->awaited,
                          .fresh = (uint8_t)w->fresh,
                          .idle = (uint8_t)w->idle,
                          .blocked = (uint8_t)w->blocked,
                          .await_tag = w->await_tag,
                          .await_node = w->await_node,
                          .type = w->type,
                          .type_version = w->type_version,
                          .state = w->state,
                          .moves = w->moves};
        m.nsleeps = (uint8_t)wire_sleeps(w, m.sleeps, sn__relay_now_ns());
        if (m.awaited && sn__await_fired(r, m.pid)) {
            m.awaited = 0; /* back on its parent's node, which had nodedown for it: its end reports nothing */
            SNLOG_DEBUG(r, "child %" PRIu32 ".%" PRIu64 " came back after its parent had nodedown: unawaited now",
                        m.pid.node, m.pid.serial);
        }
        void *handle;
        install_t *in = sn__grow(s->inst, &s->capinst, s->ninst, sizeof *in, 64, 0);
        if (!in)
            break;
        s->inst = in;
        if (sn__migrate_install(r->sched, &m, &handle) != 0)
            continue; /* refused: it stays with the victim */
        in = &s->inst[s->ninst++];
        *in = (install_t){f->steal_id, v->node, w->pid, handle, w->moves, NULL, 0, 0, NULL, 0, 0, m.nsleeps, {{0}}};
        memcpy(in->sleeps, m.sleeps, m.nsleeps * sizeof *m.sleeps);
        ok[nok++] = w->pid;
    }
    /* What this node passed on to them before they were installed here
     * (forwards queued in this turn, not yet routed) goes to the victim
     * ahead of the accept, into their mailboxes there: what comes for them
     * from now on waits here (sn__steal_hold) and goes in after the
     * commit's events, so nothing older may still be on its way back */
    while (nok && sn__relay_drain(r))
        ;
    /* (a stale offer gets an empty accept: the victim reverts at once) */
    void *buf;
    size_t len;
    if (sn_codec_encode_steal_accept(r->node, r->incarnation, f->steal_id, ok, nok, &buf, &len) == 0)
        sn__relay_send_ordered(r, v, buf, len);
    if (nok)
        fault("accept-sent");
    free(ok);
    if (!ours || push)
        return;
    SNLOG_DEBUG(r, "steal %" PRIu64 ": node %" PRIu32 " offered %zu, took %zu", f->steal_id, v->node, f->nmigrants,
                nok);
    if (nok) /* one steal at a time: this one ends with its commit */
        s->asked_deadline_ns = sn__relay_now_ns() + REQUEST_TIMEOUT_NS;
    else
        s->asked = 0;
    if (nok == 0) { /* nothing there: ask again later */
        s->refill = false;
        s->next_try_ns = sn__relay_now_ns() + (uint64_t)s->backoff_ms * 1000000u;
        s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
    } else {
        s->backoff_ms = BACKOFF_MIN_MS;
        s->next_try_ns = 0;
    }
}

/* A commit frame with more to follow: its events wait in their installs,
 * in order, for the last frame (send_commit). */
static void commit_part(struct sn_steal *s, peer_t *v, sn_frame_t *f)
{
    for (size_t i = 0; i < s->ninst; i++) {
        install_t *in = &s->inst[i];
        if (in->victim != v->node || in->id != f->steal_id)
            continue;
        for (size_t k = 0; k < f->nsends; k++) {
            if (!sn_pid_eq(f->sends[k].to, in->pid))
                continue;
            sn_event_t *ev;
            while (!(ev = sn__grow(in->ev, &in->capev, in->nev, sizeof *ev, 64, 0))) /* (no other place to go) */
                sched_yield();
            in->ev = ev;
            in->ev[in->nev++] = (sn_event_t){(sn_event_type_t)f->sends[k].kind, f->sends[k].error, f->sends[k].tag,
                                             f->sends[k].from, sn_take(&f->sends[k].payload)};
        }
    }
}

/* The events of install in: those of the commit's earlier frames, then
 * the last one's (f); NULL only out of memory. */
static sn_event_t *commit_events(install_t *in, sn_frame_t *f, size_t *nev)
{
    size_t n = in->nev;
    for (size_t k = 0; k < f->nsends; k++)
        n += sn_pid_eq(f->sends[k].to, in->pid);
    sn_event_t *ev = realloc(in->ev, (n ? n : 1) * sizeof *ev);
    if (!ev)
        return NULL;
    in->ev = NULL;
    n = in->nev;
    in->nev = in->capev = 0;
    for (size_t k = 0; k < f->nsends; k++)
        if (sn_pid_eq(f->sends[k].to, in->pid))
            ev[n++] = (sn_event_t){(sn_event_type_t)f->sends[k].kind, f->sends[k].error, f->sends[k].tag,
                                   f->sends[k].from, sn_take(&f->sends[k].payload)};
    *nev = n;
    return ev;
}

static void on_commit(sn_relay_t *r, peer_t *v, sn_frame_t *f)
{
    struct sn_steal *s = r->steal;
    if (f->steal_more) {
        commit_part(s, v, f);
        return;
    }
    size_t activated = 0;
    install_t *arrived = calloc(s->ninst ? s->ninst : 1, sizeof *arrived);
    for (size_t i = 0; i < s->ninst;) {
        install_t *in = &s->inst[i];
        if (in->victim != v->node || in->id != f->steal_id) {
            i++;
            continue;
        }
        bool committed = false;
        for (size_t k = 0; k < f->npids && !committed; k++)
            committed = sn_pid_eq(f->pids[k], in->pid);
        if (committed) {
            /* its queued events, in order, go in ahead of everything else */
            size_t nev = 0;
            sn_event_t *ev = commit_events(in, f, &nev);
            /* settling (no arrived list: no memory) until sn__loc_arrived below */
            sn__await_arrived(r, in->pid); /* (before it can run: its end is local to its parent now) */
            if (ev && sn__migrate_activate(r->sched, in->handle, ev, nev, v->node, arrived != NULL, in->sleeps,
                                           in->nsleeps) == 0) {
                if (arrived) {
                    sn__loc_hold(r, in->pid, v->node); /* (before the drain below: see locate.c) */
                    arrived[activated] = *in;
                }
                activated++;
            } else {
                for (size_t k = 0; k < nev; k++)
                    sn_payload_destroy(&ev[k].data);
                sn__migrate_discard(r->sched, in->handle); /* cannot happen short of a PID clash or no memory */
            }
            free(ev);
        } else {
            sn__migrate_discard(r->sched, in->handle);
        }
        held_t *q;
        size_t nq;
        drop_install(s, i, &q, &nq);
        release_held(r, q, nq, false); /* (after its commit's events: it is here now, or not at all) */
    }
    /* What senders here queued before they arrived (for other processes
     * too) goes out now; what is for them is held by their entries
     * (sn__loc_hold), and so is what senders here send them meanwhile.
     * Then each settles, with a flush if something from here is on its
     * way to it; what its entry holds goes after the flush */
    while (arrived && activated && sn__relay_drain(r))
        ;
    for (size_t i = 0; arrived && i < activated; i++)
        sn__loc_arrived(r, arrived[i].pid, v->node, arrived[i].moves);
    free(arrived);
    if (activated && !(f->steal_id & SN__PUSH_ID)) {
        atomic_fetch_add_explicit(&r->steals_in, 1, memory_order_relaxed);
        sn__add(&v->m_steals_in, 1);
        s->refill = true; /* the victim had work: ask again before we run dry */
        s->refill_seen_ns = s->refill_wait_ns = 0;
        s->refill_at_ns = sn__relay_now_ns() + 1000000u;
    }
    if (activated)
        fault("activated");
    if (s->asked == v->node && s->asked_id == f->steal_id)
        s->asked = 0;
    SNLOG_DEBUG(r, "steal %" PRIu64 ": %zu processes from node %" PRIu32 " run here now", f->steal_id, activated,
                v->node);
}

void sn__steal_frame(sn_relay_t *r, peer_t *p, sn_frame_t *f)
{
    switch (f->kind) {
    case SN_FRAME_STEAL_REQUEST:
        on_request(r, p, f);
        break;
    case SN_FRAME_STEAL_OFFER:
        on_offer(r, p, f);
        break;
    case SN_FRAME_STEAL_ACCEPT:
        on_accept(r, p, f);
        break;
    case SN_FRAME_STEAL_COMMIT:
        on_commit(r, p, f);
        break;
    default:
        break;
    }
}

void sn__steal_peer_gone(sn_relay_t *r, peer_t *p, bool gone)
{
    struct sn_steal *s = r->steal;
    if (!s)
        return;
    for (size_t i = 0; i < s->noffers;) { /* it was the thief: ours run here again */
        if (s->offers[i].thief == p->node) {
            revert_offer(r, &s->offers[i], SN_ENODEDOWN, "the node went down during the handover: it stays here");
            drop_offer(s, &s->offers[i]);
        } else {
            i++;
        }
    }
    for (size_t i = 0; i < s->ninst;) { /* it was the victim: it owned them */
        if (s->inst[i].victim != p->node) {
            i++;
        } else if (gone) { /* (its run ended: no commit can come) */
            held_t *q;
            size_t nq;
            sn__migrate_discard(r->sched, s->inst[i].handle);
            drop_install(s, i, &q, &nq);
            release_held(r, q, nq, false);
        } else {
            /* Only down: it may be frozen with its commit on the way (it
             * committed, and the processes are no longer there), so the
             * copies wait for its commit or abort (taken from a member
             * held down: dispatch.c), or for its run to end. Dropped, the
             * processes were lost between two live nodes. What was held
             * for them goes on now (down their path, it comes back as
             * nodedown), and nothing more is held while it is down
             * (sn__steal_hold): their senders are not kept waiting. */
            install_t *in = &s->inst[i++];
            held_t *q = in->q;
            size_t nq = in->nq;
            in->q = NULL;
            in->nq = in->capq = 0;
            release_held(r, q, nq, false);
        }
    }
    if (s->asked == p->node)
        s->asked = 0;
}

void sn__steal_loaded(sn_relay_t *r, peer_t *p)
{
    if (r->steal && p->steal_ok == 1) {
        r->steal->next_try_ns = 0;
        r->steal->backoff_ms = BACKOFF_MIN_MS;
    }
}

/* -------------------------------------------------------------- ticks */

static uint64_t rnd(struct sn_steal *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
}

/* The member to ask: among live steal partners advertising Ready work,
 * one at random among those with at least half the largest load. Members
 * not heard from yet count as maybe loaded (a node that just joined a
 * busy cluster asks before the first heartbeats arrive). (The victim
 * weighs its load against ours when it answers: what it advertised may be
 * a heartbeat old, the early one sent when its first work appeared.) */
static peer_t *pick_victim(sn_relay_t *r)
{
    struct sn_steal *s = r->steal;
    uint64_t top = 0;
    SN__FOR_PEERS(r, p)
    {
        if (p->state == SN_MEMBER_UP && p->steal_ok == 1 && p->has_stats && p->stats.ready > top)
            top = p->stats.ready;
    }
    peer_t *pick = NULL;
    uint64_t seen = 0;
    SN__FOR_PEERS(r, p)
    {
        if (p->state != SN_MEMBER_UP || p->steal_ok != 1)
            continue;
        uint64_t load = p->has_stats ? p->stats.ready : 0; /* (none heard: none to give; a loaded member says so) */
        if (load < 2 || load * 2 < top)
            continue;             /* half of one Ready process is none */
        if (rnd(s) % ++seen == 0) /* reservoir: uniform among the candidates */
            pick = p;
    }
    return pick;
}

/* When to look at the queue again while refilling: halfway to the time
 * the queue should be down to `low` at the rate it went down since the
 * last look that saw it shrink (1 ms to 50 ms; without a rate yet, 1 ms,
 * doubling). A few looks per batch, so the I/O thread does not take the
 * CPU from the workers it feeds. */
static void refill_later(struct sn_steal *s, uint64_t now, uint64_t ready, uint64_t low)
{
    uint64_t wait;
    if (ready <= low) {
        wait = 1000000u; /* (low already, but a worker is idle: want_work brings it) */
    } else if (s->refill_seen_ns && ready < s->refill_seen_ready) {
        uint64_t per = (now - s->refill_seen_ns) / (s->refill_seen_ready - ready);
        wait = (ready - low) * per / 2;
    } else {
        wait = s->refill_wait_ns ? s->refill_wait_ns * 2 : 1000000u;
    }
    if (!s->refill_seen_ns || ready < s->refill_seen_ready) {
        s->refill_seen_ns = now;
        s->refill_seen_ready = ready;
    }
    wait = wait < 1000000u ? 1000000u : wait > 50000000u ? 50000000u : wait;
    s->refill_wait_ns = wait;
    s->refill_at_ns = now + wait;
}

void sn__steal_tick(sn_relay_t *r, uint64_t now)
{
    struct sn_steal *s = r->steal;
    sn__move_tick(r, now);
    sn__drain_tick(r, now);
    for (size_t i = 0; i < s->noffers;) { /* the thief did not answer: ours again */
        offer_t *o = &s->offers[i];
        if (now < o->deadline_ns) {
            i++;
            continue;
        }
        peer_t *t = sn__relay_find_peer(r, o->thief);
        if (t)
            send_commit(r, t, o->id, NULL, 0, NULL, 0); /* the abort */
        revert_offer(r, o, SN_EREFUSED, "the node did not answer the offer in time: it stays here");
        drop_offer(s, o);
    }
    if (s->asked && now >= s->asked_deadline_ns)
        s->asked = 0; /* a late offer gets an empty accept */
    bool want = atomic_load_explicit(&r->want_work, memory_order_acquire);
    if ((!want && !s->refill) || s->asked || now < s->next_try_ns || r->draining ||
        atomic_load_explicit(&r->joined, memory_order_relaxed) != 1)
        return;
    sn_stats_t st;
    sn_sched_stats(r->sched, &st);
    if (want && st.ready > 0) { /* work queued here again: not wanted now (a worker asks again when it runs dry) */
        atomic_store_explicit(&r->want_work, 0, memory_order_release);
        want = false;
    }
    /* refill: a quarter of a batch or less left here, ask now, so the next
     * batch arrives before the workers run dry (still one request at a time) */
    uint64_t low = (uint64_t)s->batch / 4;
    if (!want && !(s->refill && st.ready <= low && st.idle_workers == 0)) {
        if (s->refill)
            refill_later(s, now, st.ready, low);
        return;
    }
    peer_t *v = pick_victim(r);
    if (!v) { /* nobody has work to give: nothing sent. News brings the next
               * look (sn__steal_loaded: a member now has work, or a new
               * steal partner); the slow look is only a safety net, so
               * that an idle cluster's relays sleep (bench/cluster-scale.sh) */
        if (want)
            s->next_try_ns = now + (uint64_t)r->hb_ms * 1000000u * NO_VICTIM_PERIODS;
        s->refill = false; /* (refilling: no wait, we ask again once we run dry) */
        return;
    }
    void *buf;
    size_t len;
    uint64_t id = ++s->next_id;
    uint32_t ours = st.ready > UINT32_MAX ? UINT32_MAX : (uint32_t)st.ready;
    if (sn_codec_encode_steal_request(r->node, r->incarnation, id, (uint32_t)s->batch, ours, &buf, &len) != 0)
        return;
    sn__relay_send_ordered(r, v, buf, len);
    SNLOG_DEBUG(r, "steal %" PRIu64 ": asking node %" PRIu32 " (it has %" PRIu64 " ready)", id, v->node,
                v->has_stats ? v->stats.ready : 0);
    s->asked = v->node;
    s->asked_id = id;
    s->asked_deadline_ns = now + REQUEST_TIMEOUT_NS;
}

uint64_t sn__steal_next_ns(sn_relay_t *r)
{
    struct sn_steal *s = r->steal;
    uint64_t next = sn__move_next_ns(r), dnext = sn__drain_next_ns(r);
    if (dnext < next)
        next = dnext;
    for (size_t i = 0; i < s->noffers; i++)
        if (s->offers[i].deadline_ns < next)
            next = s->offers[i].deadline_ns;
    if (s->asked && s->asked_deadline_ns < next)
        next = s->asked_deadline_ns;
    /* a node not yet joined has nobody to ask, and a draining one asks
     * nobody (sn__steal_tick returns early, next_try_ns stays in the
     * past): its idle workers' want of work sets no timer, else a node
     * waiting for an absent seed spins (cli.sh: the CPU of a join wait),
     * and so does a draining one (schedbench drain) */
    if (!s->asked && atomic_load_explicit(&r->want_work, memory_order_relaxed) && s->next_try_ns < next &&
        atomic_load_explicit(&r->joined, memory_order_relaxed) == 1 && !r->draining)
        next = s->next_try_ns;
    if (!s->asked && s->refill &&
        !r->draining) { /* the refill look (a stored time: "now + 1 ms" here would never be due) */
        uint64_t at = s->refill_at_ns > s->next_try_ns ? s->refill_at_ns : s->next_try_ns;
        if (at < next)
            next = at;
    }
    return next;
}

/* -------------------------------------------------------------- push */

/* Can thief t take a process of type `type`, by name (move.c)? */
bool sn__steal_takes(peer_t *t, const sn_type_t *type)
{
    return thief_takes(t, type);
}

int sn__steal_push(sn_relay_t *r, peer_t *t, const sn_migrant_t *m, size_t n, uint64_t id)
{
    struct sn_steal *s = r->steal;
    offer_t *o = sn__grow(s->offers, &s->capoffers, s->noffers, sizeof *o, 8, 0);
    sn_migrant_t *keep = n ? malloc(n * sizeof *keep) : NULL;
    sn_wire_migrant_t *w = keep ? malloc(n * sizeof *w) : NULL;
    if (o)
        s->offers = o;
    void *buf;
    size_t len;
    uint64_t now = sn__relay_now_ns();
    for (size_t i = 0; w && i < n; i++)
        to_wire(&m[i], &w[i], now);
    if (!o || !w || sn_codec_encode_steal_offer(r->node, r->incarnation, id, w, n, &buf, &len) != 0) {
        free(keep);
        free(w);
        return SN_ENOMEM;
    }
    free(w);
    sn__relay_send_ordered(r, t, buf, len);
    memcpy(keep, m, n * sizeof *keep);
    s->offers[s->noffers++] = (offer_t){id, t->node, now + OFFER_TIMEOUT_NS, keep, n};
    return 0;
}

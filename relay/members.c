/* members.c - cluster membership, run on the relay's I/O thread.
 *
 * Joining: a new node sends Hello to its seeds every 500 ms until one
 * answers Welcome (the member list) or refuses (Error: another cluster
 * name, a node id another live node holds, an earlier run of a node). The
 * seed adds the newcomer and gossips the view at once.
 *
 * The view: every member's id, endpoint, incarnation (its run: a restart
 * makes a new one) and first PID serial. Members gossip the whole view to
 * each other on every change and every ten heartbeats; a member takes
 * what is new to it (an unknown node, a newer incarnation, a departure).
 * Full mesh: each member connects to every other.
 *
 * Failure detection is direct: every member heartbeats every other (the
 * heartbeat carries its load and counters), and declares a member down when
 * nothing came from it for the down timeout; everything unconfirmed that
 * was sent to it goes back to its senders as nodedown. Every member watches
 * every other itself, so all of them reach the same verdict within one
 * timeout of each other. A member heard from again is up again. A member
 * that leaves (SIGTERM) says so, and is marked left, not down.
 *
 * Old PIDs: a node's PID serials start at its first_serial, which is
 * larger than any serial its earlier runs handed out (main.c), so a PID of
 * an earlier run names no process of this one: sends to it get noproc,
 * from the sender's relay already when it knows the new run.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay_int.h"

#define HELLO_EVERY_NS 500000000u
#define GOSSIP_EVERY_HB 10
#define LEAVE_TICK_NS 10000000u
#define EARLY_HB_GAP_NS 5000000u /* an early heartbeat (work appeared) comes this long after the last at the soonest */

static void set_down(peer_t *p, int state)
{
    p->state = state;
    /* release: a worker that sees the flag sees the state change */
    atomic_store_explicit(&p->down, state != SN_MEMBER_UP, memory_order_release);
}

static void connect_to(sn_relay_t *r, peer_t *p, const char *endpoint, const char *key)
{
    if (p->dealer && !strcmp(p->endpoint, endpoint) && !strcmp(p->public_key, key))
        return;
    sn__relay_set_dealer(r, p, NULL);
    snprintf(p->endpoint, sizeof p->endpoint, "%s", endpoint);
    snprintf(p->public_key, sizeof p->public_key, "%s", key);
    if (r->cert && strlen(key) != 40) {
        SNLOG_ERROR("node=%" PRIu32 " node %" PRIu32 " at %s has no CurveZMQ key: this cluster is secure, it "
                   "cannot be reached",
                   r->node, p->node, endpoint);
        return;
    }
    sn__relay_set_dealer(r, p, sn__relay_dealer_to(r, endpoint, key));
    if (!p->dealer)
        SNLOG_ERROR("node=%" PRIu32 " cannot connect to node %" PRIu32 " at %s", r->node, p->node, endpoint);
}

/* p restarted as incarnation inc: what its earlier run had not confirmed
 * goes back to its senders, and its numbering starts again. */
static void restarted(sn_relay_t *r, peer_t *p, uint64_t inc)
{
    if (p->incarnation) {
        SNLOG_WARN("node=%" PRIu32 " node %" PRIu32 " at %s restarted: unconfirmed sends to it come back as "
                     "nodedown, its old PIDs are dead",
                     r->node, p->node, p->endpoint);
        sn__relay_bounce_peer(r, p, SN_ENODEDOWN, true);
    }
    sn__relay_reset_peer(p, inc);
    r->gossip_due = true;
}

peer_t *sn__members_upsert(sn_relay_t *r, const sn_wire_member_t *m, const char *how)
{
    if (m->node == r->node)
        return NULL;
    uint64_t now = sn__relay_now_ns();
    peer_t *p = sn__relay_find_peer(r, m->node);
    if (!p) {
        if (m->state == SN_MEMBER_LEFT)
            return NULL; /* gone before we knew it */
        size_t n = atomic_load_explicit(&r->npeers, memory_order_relaxed);
        if (n == SN_MAX_NODES) {
            SNLOG_ERROR("node=%" PRIu32 " cannot add node %" PRIu32 ": the cluster is full (%d nodes)", r->node,
                       m->node, SN_MAX_NODES);
            return NULL;
        }
        p = &r->peers[n];
        p->node = m->node;
        p->steal_ok = -1; /* until its types are known */
        p->incarnation = m->incarnation;
        atomic_store_explicit(&p->first_serial, m->first_serial, memory_order_relaxed);
        p->last_heard_ns = now; /* a grace period of one timeout to hear from it */
        set_down(p, SN_MEMBER_UP);
        connect_to(r, p, m->endpoint, m->public_key);
        if (!p->dealer && !r->cert)
            return NULL;
        if (m->ntypes)
            sn__steal_types(r, p, m->types, m->ntypes);
        /* release: the slot is complete before workers can find it */
        atomic_store_explicit(&r->npeers, n + 1, memory_order_release);
        SNLOG_INFO("node=%" PRIu32 " node %" PRIu32 " at %s is a member (%s)", r->node, m->node, m->endpoint, how);
        r->gossip_due = true;
        /* a heartbeat now: the newcomer learns our load at once (an idle
         * one comes for our work without waiting a heartbeat period) */
        r->next_hb_ns = now;
        return p;
    }
    if (m->incarnation > p->incarnation) {
        bool first = p->incarnation == 0; /* a static peer we had not heard from yet */
        restarted(r, p, m->incarnation);
        atomic_store_explicit(&p->first_serial, m->first_serial, memory_order_relaxed);
        connect_to(r, p, m->endpoint, m->public_key);
        p->last_heard_ns = now;
        set_down(p, m->state == SN_MEMBER_LEFT ? SN_MEMBER_LEFT : SN_MEMBER_UP);
        if (p->state == SN_MEMBER_UP && !first)
            SNLOG_INFO("node=%" PRIu32 " node %" PRIu32 " at %s is a member again, a new run (%s)", r->node, p->node,
                      p->endpoint, how);
    } else if (m->incarnation == p->incarnation && m->state == SN_MEMBER_LEFT && p->state != SN_MEMBER_LEFT) {
        set_down(p, SN_MEMBER_LEFT);
        sn__relay_bounce_peer(r, p, SN_ENODEDOWN, true);
        SNLOG_INFO("node=%" PRIu32 " node %" PRIu32 " at %s has left the cluster (%s)", r->node, p->node, p->endpoint,
                  how);
        r->gossip_due = true;
    }
    if (m->first_serial > atomic_load_explicit(&p->first_serial, memory_order_relaxed) &&
        m->incarnation == p->incarnation)
        atomic_store_explicit(&p->first_serial, m->first_serial, memory_order_relaxed);
    if (m->ntypes && m->incarnation == p->incarnation) /* its process types, for stealing */
        sn__steal_types(r, p, m->types, m->ntypes);
    return p;
}

/* A heartbeat from a node we do not know. Members heartbeat those they
 * hold down too, so this is a member of the cluster an earlier run of ours
 * belonged to: we restarted with no seed that answered (a lone seed does)
 * and started a cluster of our own. It becomes a member here; our
 * heartbeats tell it we are back (a new run), and gossip brings the rest
 * of its view. In a secure cluster its key must be the one its endpoint's
 * certificate names. */
void sn__members_stranger(sn_relay_t *r, const sn_frame_t *f)
{
    if (atomic_load_explicit(&r->joined, memory_order_relaxed) != 1 || f->node == r->node || !f->stats.endpoint[0] ||
        f->stats.node != f->node)
        return;
    if (!f->cluster || strcmp(f->cluster, r->cluster) != 0) {
        sn__relay_bad(r, "heartbeat from a node of another cluster", f->node);
        return;
    }
    sn_wire_member_t m = {.node = f->node, .state = SN_MEMBER_UP, .incarnation = f->incarnation};
    snprintf(m.endpoint, sizeof m.endpoint, "%s", f->stats.endpoint);
    if (r->cert) {
        /* as hello() checks a joining node: its key's certificate names
         * this node (endpoint, id), and no live member holds that key or
         * endpoint (a client's key, another node's, never speaks as one) */
        char why[512] = "", msg[1024];
        uint64_t now = sn__relay_now_ns();
        size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
        if (!r->in_key)
            snprintf(why, sizeof why, "it came with no key");
        else if (!strcmp(r->in_key, r->public_key) || !strcmp(m.endpoint, r->advertise))
            snprintf(why, sizeof why, "its key or endpoint is this node's");
        for (size_t i = 0; i < np && !why[0]; i++) {
            const peer_t *q = &r->peers[i];
            if (q->state == SN_MEMBER_UP && now - q->last_heard_ns < (uint64_t)r->down_ms * 1000000u &&
                (!strcmp(q->public_key, r->in_key) || !strcmp(q->endpoint, m.endpoint)))
                snprintf(why, sizeof why, "its %s is node %" PRIu32 "'s (at %s), which is up",
                         strcmp(q->public_key, r->in_key) ? "endpoint" : "key", q->node, q->endpoint);
        }
        if (!why[0])
            sn_keys_names_node(r->authorized, r->in_key, f->node, m.endpoint, why, sizeof why);
        if (why[0]) {
            snprintf(msg, sizeof msg, "heartbeat from node %" PRIu32 " at %s (key %.40s), not a member: %s", f->node,
                     m.endpoint, r->in_key ? r->in_key : "none", why);
            sn__relay_bad(r, msg, f->node);
            return;
        }
        snprintf(m.public_key, sizeof m.public_key, "%s", r->in_key);
    }
    sn__members_upsert(r, &m, "it knew an earlier run of this node");
}

/* This run is out of the cluster (sn_relay_out): it stops sending (every
 * member is down to it, what waited for them comes back to its senders)
 * and the program is told (the config's on_out). */
static void put_out(sn_relay_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_out(sn_relay_t *r, const char *fmt, ...)
{
    if (atomic_load_explicit(&r->out, memory_order_relaxed))
        return;
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(r->out_reason, sizeof r->out_reason,
             "this run of node %" PRIu32 " is out of the cluster (%s): another run of it joined while it was "
             "down; it stops (its processes are lost, as with a crash)",
             r->node, why);
    SNLOG_ERROR("node=%" PRIu32 " %s", r->node, r->out_reason);
    atomic_store_explicit(&r->out, 1, memory_order_release); /* release: out_reason first */
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    for (size_t i = 0; i < np; i++) {
        peer_t *p = &r->peers[i];
        if (p->state == SN_MEMBER_UP) {
            set_down(p, SN_MEMBER_DOWN);
            sn__relay_bounce_peer(r, p, SN_ENODEDOWN, false);
        }
    }
    if (r->on_out)
        r->on_out(r->on_out_arg);
}

void sn__members_superseded(sn_relay_t *r, peer_t *p, const sn_frame_t *f, const unsigned char *ident,
                            size_t ident_len)
{
    uint64_t now = sn__relay_now_ns();
    if (p->out_said_ns && now - p->out_said_ns < 500000000u)
        return;
    p->out_said_ns = now;
    char why[512];
    snprintf(why, sizeof why, "a newer run of node %" PRIu32 " joined at %s after this one was declared down",
             p->node, p->endpoint);
    SNLOG_WARN("node=%" PRIu32 " an earlier run of node %" PRIu32 " is still sending: telling it it is out (%s)",
               r->node, p->node, why);
    void *buf;
    size_t len;
    if (sn_codec_encode_refusal(r->node, r->incarnation, SN_EREFUSED, why, &buf, &len) != 0)
        return;
    (void)f;
    if (ident) /* (its heartbeats come on our ROUTER; we no longer dial its endpoint) */
        sn__relay_answer(r, ident, ident_len, buf, len);
    free(buf);
}

void sn__members_heard(sn_relay_t *r, peer_t *p, uint64_t inc)
{
    if (inc > p->incarnation) {
        restarted(r, p, inc);
        if (p->state == SN_MEMBER_LEFT)
            set_down(p, SN_MEMBER_UP);
    }
    p->last_heard_ns = sn__relay_now_ns();
    if (p->state == SN_MEMBER_DOWN) {
        set_down(p, SN_MEMBER_UP);
        SNLOG_INFO("node=%" PRIu32 " node %" PRIu32 " at %s is up again", r->node, p->node, p->endpoint);
        sn__loc_peer_up(r, p->node);
        r->gossip_due = true;
    }
}

/* The view: ourselves first, then every member we know. */
static sn_wire_member_t *view(sn_relay_t *r, size_t *n)
{
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    sn_wire_member_t *v = calloc(np + 1, sizeof *v);
    if (!v)
        return NULL;
    v[0] = (sn_wire_member_t){.node = r->node,
                              .state = SN_MEMBER_UP,
                              .incarnation = r->incarnation,
                              .first_serial = r->first_serial,
                              .types = r->types,
                              .ntypes = r->ntypes};
    snprintf(v[0].endpoint, sizeof v[0].endpoint, "%s", r->advertise);
    snprintf(v[0].public_key, sizeof v[0].public_key, "%s", r->public_key);
    for (size_t i = 0; i < np; i++) {
        peer_t *p = &r->peers[i];
        v[i + 1] = (sn_wire_member_t){.node = p->node,
                                      .state = p->state,
                                      .incarnation = p->incarnation,
                                      .first_serial = atomic_load_explicit(&p->first_serial, memory_order_relaxed),
                                      .types = p->types,
                                      .ntypes = p->ntypes};
        snprintf(v[i + 1].endpoint, sizeof v[i + 1].endpoint, "%s", p->endpoint);
        snprintf(v[i + 1].public_key, sizeof v[i + 1].public_key, "%s", p->public_key);
    }
    *n = np + 1;
    return v;
}

static void refuse(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const sn_frame_t *f,
                   const char *reason)
{
    SNLOG_WARN("node=%" PRIu32 " refused node %" PRIu32 " from %s%s%s%s: %s", r->node, f->node, f->endpoint,
               r->in_key ? " (key " : "", r->in_key ? r->in_key : "", r->in_key ? ")" : "", reason);
    void *buf;
    size_t len;
    if (sn_codec_encode_refusal(r->node, r->incarnation, SN_EREFUSED, reason, &buf, &len) == 0) {
        sn__relay_answer(r, ident, ident_len, buf, len);
        free(buf);
    }
}

/* A secure cluster binds keys to nodes: whether a live member (this node
 * included) other than node `node` holds key or endpoint, or node `node`
 * is up with another key. Says which in why. */
static bool held_by_another(sn_relay_t *r, uint32_t node, const char *key, const char *endpoint, char *why,
                            size_t whylen)
{
    if (!strcmp(key, r->public_key) || !strcmp(endpoint, r->advertise)) {
        snprintf(why, whylen, "its %s is this node's (node %" PRIu32 " at %s): one key and one endpoint per node",
                 strcmp(key, r->public_key) ? "endpoint" : "key", r->node, r->advertise);
        return true;
    }
    uint64_t now = sn__relay_now_ns();
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    for (size_t i = 0; i < np; i++) {
        const peer_t *q = &r->peers[i];
        if (q->state != SN_MEMBER_UP || now - q->last_heard_ns >= (uint64_t)r->down_ms * 1000000u || !q->public_key[0])
            continue;
        if (q->node == node && strcmp(q->public_key, key) != 0) {
            snprintf(why, whylen, "node %" PRIu32 " is up at %s with another key", node, q->endpoint);
            return true;
        }
        if (q->node != node && (!strcmp(q->public_key, key) || !strcmp(q->endpoint, endpoint))) {
            snprintf(why, whylen, "its %s is node %" PRIu32 "'s (at %s), which is up: one key and one endpoint "
                                  "per node",
                     strcmp(q->public_key, key) ? "endpoint" : "key", q->node, q->endpoint);
            return true;
        }
    }
    return false;
}

static void hello(sn_relay_t *r, sn_frame_t *f, const unsigned char *ident, size_t ident_len)
{
    char why[512];
    peer_t *p = sn__relay_find_peer(r, f->node);
    uint64_t now = sn__relay_now_ns();
    if (strcmp(f->cluster, r->cluster) != 0) {
        snprintf(why, sizeof why, "it belongs to cluster '%s', this is cluster '%s'", f->cluster, r->cluster);
        refuse(r, ident, ident_len, f, why);
        return;
    }
    if (r->in_key && strcmp(f->public_key, r->in_key) != 0) {
        snprintf(why, sizeof why, "its hello names a key other than the one it connected with");
        refuse(r, ident, ident_len, f, why);
        return;
    }
    if (f->node == r->node) {
        snprintf(why, sizeof why, "node id %" PRIu32 " is this node's (%s); give every node its own id", f->node,
                 r->advertise);
        refuse(r, ident, ident_len, f, why);
        return;
    }
    if (p && f->incarnation < p->incarnation) {
        snprintf(why, sizeof why, "an earlier run of node %" PRIu32 " than the one already in the cluster", f->node);
        refuse(r, ident, ident_len, f, why);
        return;
    }
    if (p && f->incarnation != p->incarnation && p->state == SN_MEMBER_UP && strcmp(p->endpoint, f->endpoint) != 0 &&
        now - p->last_heard_ns < (uint64_t)r->down_ms * 1000000u) {
        snprintf(why, sizeof why, "node id %" PRIu32 " is taken by %s, which is up; give every node its own id",
                 f->node, p->endpoint);
        refuse(r, ident, ident_len, f, why);
        return;
    }
    /* the key it connected with must be the node's it says it is: its
     * certificate names that endpoint (and id), no live member holds it */
    if (r->in_key && (held_by_another(r, f->node, r->in_key, f->endpoint, why, sizeof why) ||
                      sn_keys_names_node(r->authorized, r->in_key, f->node, f->endpoint, why, sizeof why) != 0)) {
        refuse(r, ident, ident_len, f, why);
        return;
    }
    sn_wire_member_t m = {.node = f->node, .state = SN_MEMBER_UP, .incarnation = f->incarnation,
                          .first_serial = f->first_serial};
    snprintf(m.endpoint, sizeof m.endpoint, "%s", f->endpoint);
    snprintf(m.public_key, sizeof m.public_key, "%s", f->public_key);
    p = sn__members_upsert(r, &m, "joined here");
    if (!p) {
        refuse(r, ident, ident_len, f, "this member cannot take more nodes");
        return;
    }
    sn__members_heard(r, p, f->incarnation);
    size_t n;
    sn_wire_member_t *v = view(r, &n);
    void *buf;
    size_t len;
    if (v && sn_codec_encode_members(r->node, r->incarnation, 1, v, n, &buf, &len) == 0) {
        sn__relay_answer(r, ident, ident_len, buf, len);
        free(buf);
    }
    free(v);
    r->gossip_due = true;
}

void sn__members_frame(sn_relay_t *r, sn_frame_t *f, const unsigned char *ident, size_t ident_len, zsock_t *from_seed)
{
    peer_t *p = sn__relay_find_peer(r, f->node);
    int joined = atomic_load_explicit(&r->joined, memory_order_relaxed);
    switch (f->kind) {
    case SN_FRAME_HELLO:
        if (!ident)
            sn__relay_bad(r, "hello on an outbound connection", f->node);
        else
            hello(r, f, ident, ident_len);
        break;
    case SN_FRAME_WELCOME:
        if (!from_seed) {
            sn__relay_bad(r, "welcome we did not ask for", f->node);
            break;
        }
        if (joined != 0)
            break; /* a second seed's answer */
        for (size_t i = 0; i < f->nmembers; i++)
            if (f->members[i].node != r->node)
                sn__members_upsert(r, &f->members[i], "welcome");
        SNLOG_INFO("node=%" PRIu32 " joined cluster '%s' through node %" PRIu32 " (%zu members)", r->node, r->cluster,
                  f->node, f->nmembers); /* the seed's view includes us */
        atomic_store_explicit(&r->joined, 1, memory_order_release);
        break;
    case SN_FRAME_MEMBERS:
        if (!p && joined == 0)
            break; /* the seed's gossip overtook its Welcome (another connection): the Welcome has it all */
        if (!p) {
            sn__relay_bad(r, "gossip from a node that is not a member", f->node);
            break;
        }
        for (size_t i = 0; i < f->nmembers; i++) {
            const sn_wire_member_t *m = &f->members[i];
            if (m->node != r->node)
                sn__members_upsert(r, m, "gossip");
            else if (m->incarnation > r->incarnation && joined == 1)
                put_out(r, "node %" PRIu32 " knows a newer run of this node, at %s", f->node, m->endpoint);
        }
        break;
    case SN_FRAME_ERROR:
        if (joined == 1 && p && !ident && f->incarnation == p->incarnation) {
            /* on our connection to a member, once we are one: we are out */
            put_out(r, "node %" PRIu32 " says: %s", f->node, f->reason ? f->reason : "(no reason)");
        } else if (from_seed && joined == 0) {
            snprintf(r->join_error, sizeof r->join_error, "node %" PRIu32 " refused to let this node in: %s", f->node,
                     f->reason);
            SNLOG_ERROR("node=%" PRIu32 " %s", r->node, r->join_error);
            /* release: join_error is written before the flag */
            atomic_store_explicit(&r->joined, -1, memory_order_release);
        } else {
            sn__relay_bad(r, "error frame out of a join", f->node);
        }
        break;
    case SN_FRAME_LEAVE:
        if (!p || f->incarnation != p->incarnation) {
            sn__relay_bad(r, "leave from a node that is not a member", f->node);
            break;
        }
        if (p->state != SN_MEMBER_LEFT) {
            set_down(p, SN_MEMBER_LEFT);
            sn__relay_bounce_peer(r, p, SN_ENODEDOWN, true);
            SNLOG_INFO("node=%" PRIu32 " node %" PRIu32 " at %s has left the cluster (%s)", r->node, p->node,
                      p->endpoint, f->reason);
            r->gossip_due = true;
        }
        break;
    default:
        break;
    }
}

/* Our own row for status and heartbeats. */
static void own_row(sn_relay_t *r, sn_wire_stats_t *row)
{
    sn_stats_t st;
    sn_sched_stats(r->sched, &st);
    *row = (sn_wire_stats_t){.node = r->node,
                             .workers = (uint32_t)sn_sched_workers(r->sched),
                             .idle_workers = st.idle_workers,
                             .state = SN_MEMBER_UP,
                             .live = st.live,
                             .completed = st.completed,
                             .forwarded = atomic_load_explicit(&r->forwarded, memory_order_relaxed),
                             .refused = atomic_load_explicit(&r->refused, memory_order_relaxed),
                             .disconnects = atomic_load_explicit(&r->disconnects, memory_order_relaxed),
                             .forwarding = sn_migrate_forwarding(r->sched),
                             .ready = st.ready,
                             .idle = st.idle,
                             .blocked = st.blocked,
                             .msgs_in = atomic_load_explicit(&r->msgs_in, memory_order_relaxed),
                             .msgs_out = atomic_load_explicit(&r->msgs_out, memory_order_relaxed),
                             .bad_frames = atomic_load_explicit(&r->bad_frames, memory_order_relaxed),
                             .steals_in = atomic_load_explicit(&r->steals_in, memory_order_relaxed),
                             .steals_out = atomic_load_explicit(&r->steals_out, memory_order_relaxed),
                             .migrated = st.migrated_out,
                             .uptime_ms = (sn__relay_now_ns() - r->start_ns) / 1000000u};
    snprintf(row->endpoint, sizeof row->endpoint, "%s", r->advertise);
}

int sn__members_state(sn_relay_t *r, const peer_t *p)
{
    if (p->state == SN_MEMBER_UP && sn__relay_now_ns() - p->last_heard_ns > (uint64_t)r->down_ms * 500000u)
        return SN_MEMBER_SUSPECT;
    return p->state;
}

sn_wire_stats_t *sn__members_rows(sn_relay_t *r, size_t *n)
{
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    sn_wire_stats_t *rows = calloc(np + 1, sizeof *rows);
    if (!rows)
        return NULL;
    own_row(r, &rows[0]);
    for (size_t i = 0; i < np; i++) {
        peer_t *p = &r->peers[i];
        sn_wire_stats_t *row = &rows[i + 1];
        if (p->has_stats)
            *row = p->stats;
        row->node = p->node;
        row->state = sn__members_state(r, p);
        snprintf(row->endpoint, sizeof row->endpoint, "%s", p->endpoint);
    }
    *n = np + 1;
    return rows;
}

static void send_all(sn_relay_t *r, const void *buf, size_t len, bool to_down)
{
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    for (size_t i = 0; i < np; i++) {
        peer_t *p = &r->peers[i];
        if (p->state == SN_MEMBER_LEFT || (p->state == SN_MEMBER_DOWN && !to_down))
            continue;
        (void)sn__relay_try_send(r, p, buf, len); /* one that does not fit is dropped: the next one comes */
    }
}

static void heartbeats(sn_relay_t *r, uint64_t now)
{
    sn_wire_stats_t row;
    own_row(r, &row);
    void *buf;
    size_t len;
    /* to down members too: a member that was only cut off finds us again */
    r->last_hb_ns = now;
    if (sn_codec_encode_heartbeat(r->node, r->incarnation, ++r->hb_seq, &row, r->cluster, &buf, &len) == 0) {
        send_all(r, buf, len, true);
        free(buf);
    }
    if (row.ready < 2) {
        /* nothing to give, said so: hear from the scheduler when that
         * changes. Armed, then looked again (seq_cst, see load_news in
         * worker.c): work queued in between is seen one way or the other */
        sn_sched_watch_load(r->sched);
        sn_stats_t st;
        sn_sched_stats(r->sched, &st);
        if (st.ready >= 2)
            atomic_store_explicit(&r->load_news, 1, memory_order_relaxed);
    }
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    for (size_t i = 0; i < np; i++) {
        peer_t *p = &r->peers[i];
        if (p->state == SN_MEMBER_UP && now - p->last_heard_ns > (uint64_t)r->down_ms * 1000000u) {
            set_down(p, SN_MEMBER_DOWN);
            SNLOG_WARN("node=%" PRIu32 " node %" PRIu32 " at %s is down: nothing heard for %d ms", r->node,
                         p->node, p->endpoint, r->down_ms);
            sn__relay_bounce_peer(r, p, SN_ENODEDOWN, false);
        }
    }
}

static void gossip(sn_relay_t *r)
{
    size_t n;
    sn_wire_member_t *v = view(r, &n);
    void *buf;
    size_t len;
    if (v && sn_codec_encode_members(r->node, r->incarnation, 0, v, n, &buf, &len) == 0) {
        send_all(r, buf, len, false);
        free(buf);
    }
    free(v);
}

static void hellos(sn_relay_t *r)
{
    void *buf;
    size_t len;
    if (sn_codec_encode_hello(r->node, r->incarnation, r->advertise, r->cluster, r->first_serial, r->public_key, &buf,
                              &len) != 0)
        return;
    for (size_t i = 0; i < r->nseeds; i++)
        zmq_send(zsock_resolve(r->seeds[i].dealer), buf, len, ZMQ_DONTWAIT);
    free(buf);
}

/* Leaving: done when everything we sent is confirmed (or the deadline). */
static void leaving(sn_relay_t *r, uint64_t now)
{
    bool flushed = true;
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    for (size_t i = 0; i < np; i++) {
        peer_t *p = &r->peers[i];
        if (p->state == SN_MEMBER_UP && (p->nbatch || p->pending || p->nunacked))
            flushed = false;
    }
    if (!flushed && now < r->leave_deadline_ns)
        return;
    void *buf;
    size_t len;
    if (sn_codec_encode_leave(r->node, r->incarnation, "shutdown", &buf, &len) == 0) {
        send_all(r, buf, len, false);
        free(buf);
    }
    r->leave_deadline_ns = 0;
    zsock_signal(r->actor_pipe, 0);
}

/* A heartbeat more than one period late means this node did not run for
 * that long (stopped, as by SIGSTOP, or starved of CPU): the members were
 * not heard because we were not listening, not because they stopped. Each
 * gets that time back before it can be declared down, as SWIM's Lifeguard
 * does: a node that resumes from a freeze hears them again (their frames
 * wait in its sockets) instead of declaring everyone down and returning
 * what it was passing on as nodedown. */
static void stalled(sn_relay_t *r, uint64_t now)
{
    uint64_t period = (uint64_t)r->hb_ms * 1000000u;
    if (!r->next_hb_ns || now - r->next_hb_ns <= period)
        return;
    uint64_t late = now - r->next_hb_ns;
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed);
    for (size_t i = 0; i < np; i++) {
        peer_t *p = &r->peers[i];
        if (p->state == SN_MEMBER_UP)
            p->last_heard_ns = p->last_heard_ns + late < now ? p->last_heard_ns + late : now;
    }
    if (late >= (uint64_t)r->down_ms * 500000u)
        SNLOG_WARN("node=%" PRIu32 " this node did not run for %" PRIu64 " ms (stopped or starved of CPU): "
                   "members get that time back before any is declared down",
                   r->node, late / 1000000u);
}

void sn__members_tick(sn_relay_t *r)
{
    uint64_t now = sn__relay_now_ns();
    int joined = atomic_load_explicit(&r->joined, memory_order_relaxed);
    if (joined == 0 && r->found_by_ns && now >= r->found_by_ns) {
        SNLOG_INFO("node=%" PRIu32 " no other seed answered: starting cluster '%s' (this node is its first seed)",
                  r->node, r->cluster);
        atomic_store_explicit(&r->joined, 1, memory_order_release);
        joined = 1;
    }
    if (joined == 0 && now >= r->next_hello_ns) {
        hellos(r);
        r->next_hello_ns = now + HELLO_EVERY_NS;
    }
    if (atomic_exchange_explicit(&r->load_news, 0, memory_order_acq_rel)) {
        /* Work piled up here since the last heartbeat said there was none
         * (the scheduler's `loaded` hook, armed in heartbeats()): tell the
         * members now, idle ones will come for it. At most one early
         * heartbeat per EARLY_HB_GAP_NS, for a load that comes and goes. */
        uint64_t at = r->last_hb_ns + EARLY_HB_GAP_NS > now ? r->last_hb_ns + EARLY_HB_GAP_NS : now;
        if (at < r->next_hb_ns)
            r->next_hb_ns = at;
    }
    if (now >= r->next_hb_ns) {
        stalled(r, now);
        heartbeats(r, now);
        r->next_hb_ns = now + (uint64_t)r->hb_ms * 1000000u;
        if (r->hb_seq % GOSSIP_EVERY_HB == 0) /* anti-entropy: the whole view now and then */
            r->gossip_due = true;
    }
    if (r->gossip_due && joined == 1) {
        gossip(r);
        r->gossip_due = false;
    }
    if (r->leave_deadline_ns)
        leaving(r, now);
    uint64_t next = r->next_hb_ns;
    if (joined == 0 && r->next_hello_ns < next)
        next = r->next_hello_ns;
    if (joined == 0 && r->found_by_ns && r->found_by_ns < next)
        next = r->found_by_ns;
    if (r->leave_deadline_ns && now + LEAVE_TICK_NS < next)
        next = now + LEAVE_TICK_NS;
    r->next_tick_ns = next;
}

uint64_t sn__members_next_ns(sn_relay_t *r) { return r->next_tick_ns; }

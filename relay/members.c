/* members.c - cluster membership, run on the relay's I/O thread.
 *
 * Joining: a new node sends Hello to its seeds every 500 ms (every 10 ms
 * while no seed's connection is up to take it) until one answers Welcome (the member list) or refuses (Error: another
 * cluster name, a node id another live node holds, an earlier run of a node). The seed adds the newcomer and gossips
 * the view at once.
 *
 * The view: every member's id, endpoint, incarnation (its run: a restart
 * makes a new one), first PID serial and SWIM version. The seed that
 * admits a node sends its record to every member at once; besides, every
 * GOSSIP_EVERY periods a member pushes its whole view to one other, chosen
 * at random (every other push to a member it holds down, so that the two
 * sides of a healed partition, or a node back from a freeze, find each
 * other again). A member takes what is new to it (an unknown node, a newer
 * run, a departure, a newer version). Each member connects to every other
 * it sends to.
 *
 * Failure detection is SWIM's (swim.c: a probe of one member per period,
 * through others when it does not answer, suspicion, refutation, death),
 * so a member's cost per period does not grow with the cluster. The
 * probes go as UDP datagrams where the member takes them (udp.c), else,
 * and when sent again for want of an answer, over TCP (swim_send). A member
 * declared dead is down here: everything unconfirmed that was sent to it
 * goes back to its senders as nodedown. One that refutes (it was frozen or
 * cut off from everyone) is up again. The probes carry the sender's load
 * and counters (for `status` and stealing); a member with work to give
 * sends its load to every other when that starts, about once a second
 * while it lasts, and when it ends. A member that leaves (SIGTERM) says
 * so, and is marked left, not down.
 *
 * Old PIDs: a node's PID serials start at its first_serial, which is
 * larger than any serial its earlier runs handed out (main.c), so a PID of
 * an earlier run names no process of this one: a message to it gets
 * noproc from the new run, unless that process had moved to another node
 * before the run ended (its holder announces it to the new run, which
 * passes it on: locate.c, sn__loc_home_restarted). So does any other send
 * for a process (a DOWN, a monitor, a result).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "relay_int.h"
#include "peer.h"
#include "udp.h"
#include "members.h"
#include "steal.h"
#include "locate.h"
#include "swim.h"

#define HELLO_EVERY_NS 500000000u
#define HELLO_RETRY_NS 10000000u   /* while no seed's connection is up */
#define JOIN_NEWS_GAP_NS 20000000u /* a seed tells the members of joins at most this often */
#define GOSSIP_EVERY 10            /* periods between anti-entropy pushes */
#define LOAD_EVERY 5               /* periods between load broadcasts while there is work to give */
#define LEAVE_TICK_NS 10000000u
/* an early heartbeat (work appeared) comes this long after the last at the soonest */
#define EARLY_HB_GAP_NS 5000000u

static void send_all(sn_relay_t *r, const void *buf, size_t len, bool to_down);
static void join_news(sn_relay_t *r, sn_wire_member_t *v, size_t n);
static void own_row(sn_relay_t *r, sn_wire_stats_t *row);
static int held_by_another(sn_relay_t *r, uint32_t node, const char *key, const char *endpoint, char *why,
                           size_t whylen);

static void set_down(peer_t *p, int state)
{
    if (state != SN_MEMBER_UP && (p->state == SN_MEMBER_UP || !p->down_ns))
        p->down_ns = sn__relay_now_ns(); /* (forget counts from here) */
    p->state = state;
    /* release: a worker that sees the flag sees the state change */
    atomic_store_explicit(&p->down, state != SN_MEMBER_UP, memory_order_release);
}

/* Where p is (and its key): the connection is made when we first send to
 * it (sn__relay_try_send), so that a node joining a large cluster does not
 * open a connection to every member at once (nor all of them to it). */
static void connect_to(sn_relay_t *r, peer_t *p, uint32_t node, const char *endpoint, const char *key)
{
    if (p->dial && !strcmp(p->endpoint, endpoint) && !strcmp(p->public_key, key))
        return;
    sn__relay_set_dealer(r, p, NULL);
    p->dial = false;
    snprintf(p->endpoint, sizeof p->endpoint, "%s", endpoint);
    snprintf(p->public_key, sizeof p->public_key, "%s", key);
    uint8_t raw[32];
    if (r->cert && (strlen(key) != 40 || !zmq_z85_decode(raw, key))) { /* (czmq asserts on a bad one) */
        SNLOG_ERROR(r,
                    "node %" PRIu32 " at %s has no CurveZMQ key: this cluster is secure, it "
                    "cannot be reached",
                    node, endpoint);
        return;
    }
    if (!sn_wire_endpoint_ok(endpoint)) {
        SNLOG_ERROR(r, "cannot connect to node %" PRIu32 " at %s", node, endpoint);
        return;
    }
    p->dial = true;
}

/* p restarted as incarnation inc: what its earlier run had not confirmed
 * goes back to its senders, and its numbering starts again. */
static void restarted(sn_relay_t *r, peer_t *p, uint64_t inc)
{
    bool again = p->incarnation != 0;
    if (again) {
        SNLOG_WARN(r,
                   "node %" PRIu32 " at %s restarted: unconfirmed sends to it come back as "
                   "nodedown, its old PIDs are dead",
                   p->node, p->endpoint);
        sn__relay_bounce_peer(r, p, SN_ENODEDOWN, true);
    }
    sn__relay_reset_peer(p, inc);
    sn_swim_apply(r->swim, 0, &(sn_swim_update_t){p->node, SN_SWIM_ALIVE, inc, 0, 0}, sn__relay_now_ns());
    r->gossip_due = true;
    if (again)
        sn__loc_home_restarted(r, p->node);
}

/* In a secure cluster only a node writes its own row (its key proves
 * it). A row that brings its node a key or endpoint new here (a node not
 * known yet, another key for one that is) is taken only if that key's
 * certificate in the authorized directory is a node's and names that node
 * (its id and endpoint, where it names them): never a client's key. And
 * no row re-keys a member that is up here: another node's word does not,
 * only the member's own frames under the new key, from its newer run
 * (sn__members_rekeyed). A row that repeats what is known costs no look
 * at the keys. hostile.sh case 6 guards it. */
static bool row_ok(sn_relay_t *r, const peer_t *p, const sn_wire_member_t *m, const char *how)
{
    /* (a relay with a certificate and no key directory to check against,
     * as tests/fuzz/fuzz_relay.c makes one, takes what it is told) */
    if (!r->cert || !r->keys || (p && !strcmp(p->public_key, m->public_key) && !strcmp(p->endpoint, m->endpoint)) ||
        (!p && (m->state == SN_MEMBER_LEFT ||
                m->state == SN_MEMBER_DOWN))) /* (nothing new, or nothing taken: sn__members_upsert) */
        return true;
    char why[512] = "", msg[1024];
    if (p && p->state == SN_MEMBER_UP && p->public_key[0] && strcmp(p->public_key, m->public_key) != 0)
        snprintf(why, sizeof why, "the node is up here with another key");
    else if (sn_keys_cache_names_node(r->keys, m->public_key, m->node, m->endpoint, why, sizeof why) == 0)
        return true;
    snprintf(msg, sizeof msg, "a row (%.64s) for node %" PRIu32 " at %.256s with key %.40s, not taken: %.500s", how,
             m->node, m->endpoint, m->public_key[0] ? m->public_key : "none", why);
    sn__relay_bad(r, msg, m->node);
    return false;
}

bool sn__members_rekeyed(sn_relay_t *r, peer_t *p, const sn_frame_t *f)
{
    /* a newer run, whose key no other live member holds and whose
     * certificate names p's id and p's endpoint (not one the frame says:
     * a dead node's key, its certificate naming only its own endpoint,
     * would take over a live member by saying it moved there) */
    char why[512];
    if (!r->cert || !r->in_key || f->incarnation <= p->incarnation ||
        held_by_another(r, p->node, r->in_key, p->endpoint, why, sizeof why) == SN_EREFUSED ||
        sn_keys_cache_names_node(r->keys, r->in_key, p->node, p->endpoint, why, sizeof why) != 0)
        return false;
    SNLOG_WARN(r, "node %" PRIu32 " at %s restarted with a new key (%.40s): its own frames say so, under that key",
               p->node, p->endpoint, r->in_key);
    connect_to(r, p, p->node, p->endpoint, r->in_key);
    return true;
}

peer_t *sn__members_upsert(sn_relay_t *r, const sn_wire_member_t *m, const char *how)
{
    if (m->node == r->node)
        return NULL;
    uint64_t now = sn__relay_now_ns();
    peer_t *p = sn__relay_find_peer(r, m->node);
    if (!row_ok(r, p, m, how))
        return NULL;
    if (!p) {
        /* gone before we knew it, or forgotten here since (forget): a row
         * is made only for a member that may be up (one that is comes
         * back by its own frames: a Hello, or a heartbeat as a stranger) */
        if (m->state == SN_MEMBER_LEFT || m->state == SN_MEMBER_DOWN)
            return NULL;
        if (!(p = sn__relay_new_slot(r))) {
            SNLOG_ERROR(r, "cannot add node %" PRIu32 ": out of memory for its row", m->node);
            return NULL;
        }
        p->steal_ok = -1; /* until its types are known */
        p->incarnation = m->incarnation;
        p->probe_port = m->probe_port;
        atomic_store_explicit(&p->first_serial, m->first_serial, memory_order_relaxed);
        p->last_heard_ns = now; /* a grace period of one timeout to hear from it */
        set_down(p, SN_MEMBER_UP);
        connect_to(r, p, m->node, m->endpoint, m->public_key);
        if (!p->dial && !r->cert) {
            sn__relay_free_slot(r, p); /* (not published: back to the free slots) */
            return NULL;
        }
        sn__relay_publish(r, p, m->node); /* (before the steal partner check: it names the node) */
        if (m->ntypes)
            sn__steal_types(r, p, m->types, m->ntypes);
        SNLOG_INFO(r, "node %" PRIu32 " at %s is a member (%s)", m->node, m->endpoint, how);
        sn_swim_apply(r->swim, 0, &(sn_swim_update_t){m->node, m->state, m->incarnation, m->version, m->suspected_by},
                      now);
        /* our row, to it alone, if we have work to give: an idle
         * newcomer comes for it without waiting. Not otherwise: in a storm
         * of joins every member would connect to every member at once
         * (tests/scale.sh); an idle member's row reaches it with the probes,
         * within a period per member (its status shows it since) */
        if (r->said_loaded) {
            p->tell_load = true;
            r->tell_load_ns = now;
        }
        return p;
    }
    if (m->incarnation > p->incarnation) {
        bool first = p->incarnation == 0; /* a static peer we had not heard from yet */
        restarted(r, p, m->incarnation);
        p->probe_port = m->probe_port;
        atomic_store_explicit(&p->first_serial, m->first_serial, memory_order_relaxed);
        connect_to(r, p, p->node, m->endpoint, m->public_key);
        p->last_heard_ns = now;
        set_down(p, m->state == SN_MEMBER_LEFT ? SN_MEMBER_LEFT : SN_MEMBER_UP);
        if (p->state == SN_MEMBER_UP && !first)
            SNLOG_INFO(r, "node %" PRIu32 " at %s is a member again, a new run (%s)", p->node, p->endpoint, how);
    } else if (m->incarnation == p->incarnation && m->state == SN_MEMBER_LEFT && p->state != SN_MEMBER_LEFT) {
        set_down(p, SN_MEMBER_LEFT);
        sn__relay_bounce_peer(r, p, SN_ENODEDOWN, true);
        SNLOG_INFO(r, "node %" PRIu32 " at %s has left the cluster (%s)", p->node, p->endpoint, how);
        sn_swim_apply(r->swim, 0, &(sn_swim_update_t){p->node, SN_SWIM_LEFT, p->incarnation, m->version, 0}, now);
    }
    if (m->first_serial > atomic_load_explicit(&p->first_serial, memory_order_relaxed) &&
        m->incarnation == p->incarnation)
        atomic_store_explicit(&p->first_serial, m->first_serial, memory_order_relaxed);
    if (m->ntypes && m->incarnation == p->incarnation) /* its process types, for stealing */
        sn__steal_types(r, p, m->types, m->ntypes);
    if (m->probe_port && m->incarnation == p->incarnation) /* (a row from an older node has none) */
        p->probe_port = m->probe_port;
    return p;
}

/* A heartbeat (or probe) from a node we do not know: one that joined
 * through another seed a moment ago (its record is on its way to us), or
 * a member of the cluster an earlier run of ours belonged to (we restarted
 * with no seed that answered, as a lone seed does, and started a cluster
 * of our own; anti-entropy pushes to members held down reach us). It
 * becomes a member here (returned; NULL if not), and gossip brings the
 * rest of its view. In a secure cluster its key must be the one its
 * endpoint's certificate names. */
peer_t *sn__members_stranger(sn_relay_t *r, const sn_frame_t *f)
{
    if (atomic_load_explicit(&r->joined, memory_order_relaxed) != 1 || f->node == r->node || !f->stats.endpoint[0] ||
        f->stats.node != f->node)
        return NULL;
    if (!f->cluster || strcmp(f->cluster, r->cluster) != 0) {
        sn__relay_bad(r, "heartbeat from a node of another cluster", f->node);
        return NULL;
    }
    sn_wire_member_t m = {
        .node = f->node, .state = SN_MEMBER_UP, .incarnation = f->incarnation, .probe_port = f->probe.port};
    snprintf(m.endpoint, sizeof m.endpoint, "%s", f->stats.endpoint);
    if (r->cert) {
        /* as hello() checks a joining node: its key's certificate names
         * this node (endpoint, id), and no live member holds that key or
         * endpoint (a client's key, another node's, never speaks as one) */
        char why[512] = "", msg[1024];
        if (!r->in_key)
            snprintf(why, sizeof why, "it came with no key");
        else if (!strcmp(r->in_key, r->public_key) || !strcmp(m.endpoint, r->advertise))
            snprintf(why, sizeof why, "its key or endpoint is this node's");
        SN__FOR_PEERS(r, q)
        {
            if (why[0])
                break;
            if (q->state == SN_MEMBER_UP && (!strcmp(q->public_key, r->in_key) || !strcmp(q->endpoint, m.endpoint)))
                snprintf(why, sizeof why, "its %s is node %" PRIu32 "'s (at %s), which is up",
                         strcmp(q->public_key, r->in_key) ? "endpoint" : "key", q->node, q->endpoint);
        }
        if (!why[0])
            sn_keys_cache_names_node(r->keys, r->in_key, f->node, m.endpoint, why, sizeof why);
        if (why[0]) {
            snprintf(msg, sizeof msg, "heartbeat from node %" PRIu32 " at %s (key %.40s), not a member: %s", f->node,
                     m.endpoint, r->in_key ? r->in_key : "none", why);
            sn__relay_bad(r, msg, f->node);
            return NULL;
        }
        snprintf(m.public_key, sizeof m.public_key, "%s", r->in_key);
    }
    return sn__members_upsert(r, &m, "heard from it first");
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
    SNLOG_ERROR(r, "%s", r->out_reason);
    atomic_store_explicit(&r->out, 1, memory_order_release); /* release: out_reason first */
    SN__FOR_PEERS(r, p)
    {
        if (p->state == SN_MEMBER_UP) {
            set_down(p, SN_MEMBER_DOWN);
            sn__relay_bounce_peer(r, p, SN_ENODEDOWN, false);
        }
    }
    if (r->on_out)
        r->on_out(r->on_out_arg);
}

void sn__members_superseded(sn_relay_t *r, peer_t *p, const sn_frame_t *f, const unsigned char *ident, size_t ident_len)
{
    uint64_t now = sn__relay_now_ns();
    if (p->out_said_ns && now - p->out_said_ns < 500000000u)
        return;
    p->out_said_ns = now;
    char why[512];
    snprintf(why, sizeof why, "a newer run of node %" PRIu32 " joined at %s after this one was declared down", p->node,
             p->endpoint);
    SNLOG_WARN(r, "an earlier run of node %" PRIu32 " is still sending: telling it it is out (%s)", p->node, why);
    void *buf;
    size_t len;
    if (sn_codec_encode_refusal(r->node, r->incarnation, SN_EREFUSED, why, &buf, &len) != 0)
        return;
    /* on our ROUTER, or as a datagram to where its probe came from: we no
     * longer dial its endpoint (the newer run is there) */
    if (ident)
        sn__relay_answer(r, ident, ident_len, buf, len);
    else
        sn__relay_udp_answer(r, p->node, f->incarnation, buf, len);
    free(buf);
}

void sn__members_heard(sn_relay_t *r, peer_t *p, uint64_t inc)
{
    if (inc > p->incarnation) {
        restarted(r, p, inc);
        if (p->state != SN_MEMBER_UP) {
            set_down(p, SN_MEMBER_UP);
            sn__loc_peer_up(r, p->node);
        }
    }
    p->last_heard_ns = sn__relay_now_ns();
    /* it runs: an outstanding probe of it is answered, and a member held
     * dead here is told so, to refute (then it is up again: swim_changed) */
    sn_swim_heard(r->swim, p->node, inc, p->last_heard_ns);
}

void sn__members_closed(sn_relay_t *r, peer_t *p)
{
    if (p->state != SN_MEMBER_UP)
        return;
    SNLOG_DEBUG(r, "the connection to node %" PRIu32 " at %s closed: it is suspected", p->node, p->endpoint);
    sn_swim_closed(r->swim, p->node, sn__relay_now_ns());
}

/* The view: ourselves first, then every member we know. */
static sn_wire_member_t *view(sn_relay_t *r, size_t *n)
{
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed), k = 1;
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
    v[0].version = sn_swim_version(r->swim);
    v[0].probe_port = r->probe_port;
    SN__FOR_PEERS(r, p)
    {
        uint64_t run, version = 0;
        int st = sn_swim_state(r->swim, p->node, &run, &version);
        size_t i = k++ - 1; /* (v[i + 1]: after our own row) */
        v[i + 1] = (sn_wire_member_t){.node = p->node,
                                      .state = st >= 0 && run == p->incarnation ? st : p->state,
                                      .version = version,
                                      .incarnation = p->incarnation,
                                      .first_serial = atomic_load_explicit(&p->first_serial, memory_order_relaxed),
                                      .types = p->types,
                                      .ntypes = p->ntypes,
                                      .probe_port = p->probe_port};
        snprintf(v[i + 1].endpoint, sizeof v[i + 1].endpoint, "%s", p->endpoint);
        snprintf(v[i + 1].public_key, sizeof v[i + 1].public_key, "%s", p->public_key);
    }
    *n = k;
    return v;
}

/* Whether the refusal of Hello f may be logged now: at most a line a
 * second per sender (its key, or its endpoint in an insecure cluster, and
 * the node it says it is), for as many senders at a time as hello_log
 * has slots, and a line a second shared by all others; `more` says how
 * many were kept quiet. So a flood of Hellos writes a few lines a second
 * (hostile.sh case 8), while joiners refused one after another are each
 * logged (cluster.sh, autoid.sh). */
static bool refused_line(sn_relay_t *r, const sn_frame_t *f, char *more, size_t len)
{
    const char *who = r->in_key ? r->in_key : f->endpoint;
    uint64_t h = 1469598103934665603u ^ f->node, now = sn__relay_now_ns();
    for (const char *c = who; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211u; /* (FNV-1a) */
    size_t n = sizeof r->hello_log / sizeof r->hello_log[0], k = n;
    for (size_t i = 0; i < n && k == n; i++)
        if (r->hello_log[i].who == h)
            k = i;
    for (size_t i = 0; i < n && k == n; i++) /* (a slot quiet for a second: its count goes to the shared line's) */
        if (now - r->hello_log[i].log.last_ns >= 1000000000u) {
            k = i;
            r->hello_rest.quiet += r->hello_log[k].log.quiet;
            r->hello_log[k].who = h;
            r->hello_log[k].log = (sn__log_limit_t){0};
        }
    return sn__log_limit(k < n ? &r->hello_log[k].log : &r->hello_rest, now, 1000000000u, more, len);
}

/* Refuses a Hello with code: SN_EEXIST when the id it asks for is taken
 * (a joiner that picked its id at random picks another and tries again),
 * SN_EREFUSED for every other reason. */
static void refuse_code(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const sn_frame_t *f, int code,
                        const char *reason)
{
    char more[64];
    if (refused_line(r, f, more, sizeof more))
        SNLOG_WARN(r, "refused node %" PRIu32 " from %s%s%s%s: %s%s", f->node, f->endpoint, r->in_key ? " (key " : "",
                   r->in_key ? r->in_key : "", r->in_key ? ")" : "", reason, more);
    void *buf;
    size_t len;
    if (sn_codec_encode_refusal(r->node, r->incarnation, code, reason, &buf, &len) == 0) {
        sn__relay_answer(r, ident, ident_len, buf, len);
        free(buf);
    }
}

static void refuse(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const sn_frame_t *f, const char *reason)
{
    refuse_code(r, ident, ident_len, f, SN_EREFUSED, reason);
}

/* A secure cluster binds keys to nodes: whether a live member (this node
 * included) other than node `node` holds key or endpoint (SN_EREFUSED), or
 * node `node` is up with another key (SN_EEXIST: the id is taken); 0 if
 * neither. Says which in why. */
static int held_by_another(sn_relay_t *r, uint32_t node, const char *key, const char *endpoint, char *why,
                           size_t whylen)
{
    if (!strcmp(key, r->public_key) || !strcmp(endpoint, r->advertise)) {
        snprintf(why, whylen, "its %s is this node's (node %" PRIu32 " at %s): one key and one endpoint per node",
                 strcmp(key, r->public_key) ? "endpoint" : "key", r->node, r->advertise);
        return SN_EREFUSED;
    }
    SN__FOR_PEERS(r, q)
    {
        if (q->state != SN_MEMBER_UP || !q->public_key[0])
            continue;
        if (q->node == node && strcmp(q->public_key, key) != 0) {
            snprintf(why, whylen, "node id %" PRIu32 " is taken: the node is up at %s with another key", node,
                     q->endpoint);
            return SN_EEXIST;
        }
        if (q->node != node && (!strcmp(q->public_key, key) || !strcmp(q->endpoint, endpoint))) {
            snprintf(why, whylen,
                     "its %s is node %" PRIu32 "'s (at %s), which is up: one key and one endpoint "
                     "per node",
                     strcmp(q->public_key, key) ? "endpoint" : "key", q->node, q->endpoint);
            return SN_EREFUSED;
        }
    }
    return 0;
}

static void hello(sn_relay_t *r, sn_frame_t *f, const unsigned char *ident, size_t ident_len)
{
    char why[512];
    peer_t *p = sn__relay_find_peer(r, f->node);
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
        refuse_code(r, ident, ident_len, f, SN_EEXIST, why);
        return;
    }
    if (p && f->incarnation < p->incarnation) {
        snprintf(why, sizeof why, "an earlier run of node %" PRIu32 " than the one already in the cluster", f->node);
        refuse(r, ident, ident_len, f, why);
        return;
    }
    if (p && f->incarnation != p->incarnation && p->state == SN_MEMBER_UP && strcmp(p->endpoint, f->endpoint) != 0) {
        snprintf(why, sizeof why, "node id %" PRIu32 " is taken by %s, which is up; give every node its own id",
                 f->node, p->endpoint);
        refuse_code(r, ident, ident_len, f, SN_EEXIST, why);
        return;
    }
    /* the key it connected with must be the node's it says it is: its
     * certificate names that endpoint (and id), no live member holds it */
    int held = r->in_key ? held_by_another(r, f->node, r->in_key, f->endpoint, why, sizeof why) : 0;
    if (held || (r->in_key && sn_keys_cache_names_node(r->keys, r->in_key, f->node, f->endpoint, why, sizeof why))) {
        refuse_code(r, ident, ident_len, f, held ? held : SN_EREFUSED, why);
        return;
    }
    sn_wire_member_t m = {.node = f->node,
                          .state = SN_MEMBER_UP,
                          .incarnation = f->incarnation,
                          .first_serial = f->first_serial,
                          .types = f->nmembers ? f->members[0].types : NULL,
                          .ntypes = f->nmembers ? f->members[0].ntypes : 0,
                          .probe_port = f->nmembers ? f->members[0].probe_port : 0};
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
    /* and every member hears of it: its row of the view (with its process
     * types), to each, now or with the next joins (join_news: it takes
     * the view just made) */
    size_t k = 0;
    while (k < r->njoin_news && r->join_news[k] != p->node)
        k++;
    uint32_t *jn =
        k == r->njoin_news ? sn__grow(r->join_news, &r->capjoin_news, r->njoin_news, sizeof *jn, 16, 0) : NULL;
    if (jn) { /* (no memory: it hears with the next gossip) */
        r->join_news = jn;
        r->join_news[r->njoin_news++] = p->node;
    }
    if (sn__relay_now_ns() >= r->join_told_ns + JOIN_NEWS_GAP_NS) {
        join_news(r, v, n);
        v = NULL;
    }
    free(v);
}

/* The joins since the last news, in one message to every member; v (n
 * rows, taken; NULL: made here) is the view as it is now. */
static void join_news(sn_relay_t *r, sn_wire_member_t *v, size_t n)
{
    size_t k = 0;
    if (!v)
        v = view(r, &n);
    r->join_told_ns = sn__relay_now_ns();
    for (size_t i = 1; v && i < n; i++)
        for (size_t j = 0; j < r->njoin_news; j++)
            if (v[i].node == r->join_news[j]) {
                v[1 + k++] = v[i]; /* (in place: k < i) */
                break;
            }
    r->njoin_news = 0;
    void *buf;
    size_t len;
    if (k && sn_codec_encode_members(r->node, r->incarnation, 0, v + 1, k, &buf, &len) == 0) {
        send_all(r, buf, len, false);
        free(buf);
    }
    free(v);
}

/* Our row (we have work to give) to the members new here, one message
 * encoded once. */
static void tell_load(sn_relay_t *r)
{
    sn_wire_stats_t row;
    own_row(r, &row);
    void *buf = NULL;
    size_t len = 0;
    if (row.ready < 2 || sn_codec_encode_heartbeat(r->node, r->incarnation, &row, r->cluster, &buf, &len) != 0)
        buf = NULL; /* (nothing to give after all: nothing to say) */
    r->tell_load_ns = UINT64_MAX;
    SN__FOR_PEERS(r, p)
    {
        if (buf && p->tell_load && p->state == SN_MEMBER_UP)
            (void)sn__relay_try_send(r, p, buf, len);
        p->tell_load = false;
    }
    free(buf);
}

/* The seed's Welcome: its view; this node is a member now. */
static void welcome(sn_relay_t *r, sn_frame_t *f, zsock_t *from_seed, int joined)
{
    if (!from_seed) {
        sn__relay_bad(r, "welcome we did not ask for", f->node);
        return;
    }
    if (joined != 0)
        return; /* a second seed's answer */
    for (size_t i = 0; i < f->nmembers; i++)
        if (f->members[i].node != r->node)
            sn__members_upsert(r, &f->members[i], "welcome");
    SNLOG_INFO(r, "joined cluster '%s' through node %" PRIu32 " (%zu members)", r->cluster, f->node,
               f->nmembers); /* the seed's view includes us */
    atomic_store_explicit(&r->joined, 1, memory_order_release);
}

/* Gossip: a member's view (anti-entropy), news of joins, or one update
 * (a death, a leave, a refutation) from p (NULL: not a member here). */
static void gossip(sn_relay_t *r, peer_t *p, sn_frame_t *f, int joined)
{
    if (!p && joined == 0) {
        /* the seed's news of joins overtook its Welcome (it came on
         * another connection): the Welcome may not have them (they
         * joined after it was made), so they are members now */
        for (size_t i = 0; i < f->nmembers; i++)
            if (f->members[i].node != r->node && f->members[i].state == SN_MEMBER_UP)
                sn__members_upsert(r, &f->members[i], "gossip");
        return;
    }
    if (!p) {
        bool own = false; /* (its own row: a member we have not heard of yet, as in a storm of joins) */
        for (size_t i = 0; i < f->nmembers; i++)
            own = own || (f->members[i].node == f->node && f->members[i].state == SN_MEMBER_UP);
        if (own)
            SNLOG_DEBUG(r, "gossip from node %" PRIu32 ", not known here yet: left to the next", f->node);
        else
            sn__relay_bad(r, "gossip from a node that is not a member", f->node);
        return;
    }
    for (size_t i = 0; i < f->nmembers; i++) {
        const sn_wire_member_t *m = &f->members[i];
        if (m->node == r->node && m->incarnation > r->incarnation && joined == 1) {
            put_out(r, "node %" PRIu32 " knows a newer run of this node, at %s", f->node, m->endpoint);
            continue;
        }
        if (m->node != r->node && !sn__members_upsert(r, m, "gossip"))
            continue;
        /* its state and version (a suspicion, a death, a refutation) */
        sn_swim_apply(r->swim, f->node,
                      &(sn_swim_update_t){m->node, m->state, m->incarnation, m->version, m->suspected_by},
                      sn__relay_now_ns());
    }
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
        welcome(r, f, from_seed, joined);
        break;
    case SN_FRAME_MEMBERS:
        gossip(r, p, f, joined);
        break;
    case SN_FRAME_ERROR:
        if (joined == 1 && p && !ident && f->incarnation == p->incarnation) {
            /* on our connection to a member, once we are one: we are out */
            put_out(r, "node %" PRIu32 " says: %s", f->node, f->reason ? f->reason : "(no reason)");
        } else if (from_seed && joined == 0) {
            snprintf(r->join_error, sizeof r->join_error, "node %" PRIu32 " refused to let this node in: %s", f->node,
                     f->reason);
            r->join_code = f->code == SN_EEXIST ? SN_EEXIST : SN_EREFUSED;
            SNLOG_ERROR(r, "%s", r->join_error);
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
            SNLOG_INFO(r, "node %" PRIu32 " at %s has left the cluster (%s)", p->node, p->endpoint, f->reason);
            sn_swim_apply(r->swim, 0, &(sn_swim_update_t){p->node, SN_SWIM_LEFT, p->incarnation, 0, 0},
                          sn__relay_now_ns());
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
                             /* not up until in its cluster (it refuses work till then) */
                             .state = atomic_load_explicit(&r->joined, memory_order_acquire) == 1 ? SN_MEMBER_UP
                                                                                                  : SN_MEMBER_JOINING,
                             .live = st.live,
                             .completed = st.completed,
                             .forwarded = atomic_load_explicit(&r->forwarded, memory_order_relaxed),
                             .refused = atomic_load_explicit(&r->refused, memory_order_relaxed),
                             .disconnects = atomic_load_explicit(&r->disconnects, memory_order_relaxed),
                             .forwarding = sn__migrate_forwarding(r->sched),
                             .draining = r->draining,
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
    uint64_t run;
    if (p->state == SN_MEMBER_UP && sn_swim_state(r->swim, p->node, &run, NULL) == SN_SWIM_SUSPECT &&
        run == p->incarnation)
        return SN_MEMBER_SUSPECT;
    return p->state;
}

sn_wire_stats_t *sn__members_rows(sn_relay_t *r, size_t *n)
{
    size_t np = atomic_load_explicit(&r->npeers, memory_order_relaxed), k = 1;
    sn_wire_stats_t *rows = calloc(np + 1, sizeof *rows);
    if (!rows)
        return NULL;
    own_row(r, &rows[0]);
    SN__FOR_PEERS(r, p)
    {
        sn_wire_stats_t *row = &rows[k++];
        if (p->has_stats)
            *row = p->stats;
        row->node = p->node;
        row->state = sn__members_state(r, p);
        snprintf(row->endpoint, sizeof row->endpoint, "%s", p->endpoint);
    }
    *n = k;
    return rows;
}

static void send_all(sn_relay_t *r, const void *buf, size_t len, bool to_down)
{
    SN__FOR_PEERS(r, p)
    {
        if (p->state == SN_MEMBER_LEFT || (p->state == SN_MEMBER_DOWN && !to_down))
            continue;
        (void)sn__relay_try_send(r, p, buf, len); /* one that does not fit is dropped: the next one comes */
    }
}

/* ---- failure detection: swim.c's I/O */

/* The wire's record of the member an update is about (its endpoint, key
 * and first serial from our table: a member that did not know it can add
 * it); false if we do not know it. */
static bool member_of(sn_relay_t *r, const sn_swim_update_t *u, sn_wire_member_t *m)
{
    *m = (sn_wire_member_t){
        .node = u->node, .state = u->state, .incarnation = u->run, .version = u->version, .suspected_by = u->by};
    if (u->node == r->node) {
        m->first_serial = r->first_serial;
        m->probe_port = r->probe_port;
        snprintf(m->endpoint, sizeof m->endpoint, "%s", r->advertise);
        snprintf(m->public_key, sizeof m->public_key, "%s", r->public_key);
        return true;
    }
    const peer_t *p = sn__relay_find_peer(r, u->node);
    if (!p)
        return false;
    m->first_serial = atomic_load_explicit(&p->first_serial, memory_order_relaxed);
    m->probe_port = p->probe_port;
    snprintf(m->endpoint, sizeof m->endpoint, "%s", p->endpoint);
    snprintf(m->public_key, sizeof m->public_key, "%s", p->public_key);
    return true;
}

static void swim_send(void *arg, uint32_t to, const sn_swim_msg_t *msg)
{
    sn_relay_t *r = arg;
    peer_t *p = sn__relay_find_peer(r, to);
    if (!p || p->state == SN_MEMBER_LEFT)
        return;
    sn_wire_member_t up[SN_SWIM_PIGGYBACK];
    size_t n = 0;
    for (size_t i = 0; i < msg->nupdates && i < SN_SWIM_PIGGYBACK; i++)
        if (member_of(r, &msg->updates[i], &up[n]))
            n++;
    sn_wire_stats_t row;
    own_row(r, &row);
    sn_wire_probe_t probe = {msg->kind, msg->seq, msg->target, r->probe_port};
    void *buf;
    size_t len;
    /* A probe fits a datagram (udp.c): updates that do not fit are left
     * out, the last first (the ones sent most often already); the other
     * probes and anti-entropy carry them. With none left, one that is still
     * too long (a very long endpoint) goes over TCP. */
    for (;;) {
        if (sn_codec_encode_probe(r->node, r->incarnation, &probe, &row, r->cluster, up, n, &buf, &len) != 0)
            return;
        if (len <= SN_DGRAM_BODY_MAX || n == 0)
            break;
        free(buf);
        n--;
    }
    /* (may be lost: the protocol expects losses) A PING sent again after
     * no answer goes over TCP, and so does the answer to one that came
     * over TCP: a network that drops datagrams delays answers, no more */
    if (msg->reliable || (msg->kind == SN_SWIM_ACK && r->ack_tcp))
        (void)sn__relay_try_send(r, p, buf, len);
    else
        (void)sn__relay_send_probe(r, p, buf, len);
    free(buf);
}

static void swim_broadcast(void *arg, const sn_swim_update_t *u)
{
    sn_relay_t *r = arg;
    sn_wire_member_t m;
    void *buf;
    size_t len;
    if (member_of(r, u, &m) && sn_codec_encode_members(r->node, r->incarnation, 0, &m, 1, &buf, &len) == 0) {
        send_all(r, buf, len, u->node == r->node); /* (a refutation of ours: to those that hold us down too) */
        free(buf);
    }
}

/* swim.c's verdicts, acted on: a dead member is down (what it had not
 * confirmed goes back as nodedown), a refuted death is up again. */
static void swim_changed(void *arg, uint32_t node, uint64_t run, int state, int was)
{
    sn_relay_t *r = arg;
    peer_t *p = sn__relay_find_peer(r, node);
    if (!p || run != p->incarnation || atomic_load_explicit(&r->out, memory_order_relaxed))
        return;
    if (state == SN_SWIM_DEAD && p->state == SN_MEMBER_UP) {
        set_down(p, SN_MEMBER_DOWN);
        SNLOG_WARN(r,
                   "node %" PRIu32 " at %s is down: it answered no probe, direct or through "
                   "others, nor its suspicion",
                   p->node, p->endpoint);
        sn__relay_bounce_peer(r, p, SN_ENODEDOWN, false);
    } else if (state == SN_SWIM_ALIVE && p->state == SN_MEMBER_DOWN) {
        set_down(p, SN_MEMBER_UP);
        SNLOG_INFO(r, "node %" PRIu32 " at %s is up again", p->node, p->endpoint);
        sn__loc_peer_up(r, p->node);
    } else if (state == SN_SWIM_LEFT && p->state != SN_MEMBER_LEFT) {
        set_down(p, SN_MEMBER_LEFT);
        sn__relay_bounce_peer(r, p, SN_ENODEDOWN, true);
        SNLOG_INFO(r, "node %" PRIu32 " at %s has left the cluster (gossip)", p->node, p->endpoint);
    } else if (state == SN_SWIM_SUSPECT) {
        SNLOG_DEBUG(r, "node %" PRIu32 " at %s is suspect", p->node, p->endpoint);
    }
    (void)was;
}

int sn__members_init(sn_relay_t *r)
{
    uint64_t ms = 1000000u;
    r->tell_load_ns = UINT64_MAX;
    /* --down-after-ms: the suspicion timeout of a cluster of up to ten
     * members when no other member confirms it; a third of it when three
     * do; both grow with log10 of the size past ten (swim.h) */
    sn_swim_config_t cfg = {
        .period_ns = (uint64_t)r->hb_ms * ms, .suspect_min_ns = (uint64_t)r->down_ms * ms / 3, .suspect_max_mult = 3};
    sn_swim_io_t io = {swim_send, swim_broadcast, swim_changed, r};
    r->swim = sn_swim_new(r->node, r->incarnation, &cfg, &io, r->incarnation ^ ((uint64_t)r->node << 32));
    return r->swim ? 0 : SN_ENOMEM;
}

void sn__members_fini(sn_relay_t *r)
{
    sn_swim_free(&r->swim);
}

/* A probe from p: if p should answer us over UDP but its answers came
 * over TCP (our PINGs sent again there: swim.c), three or more over ten
 * periods with no datagram from it meanwhile, UDP does not get through
 * one way or the other (a firewall that lets the TCP port through, not
 * the UDP one): said once, as detection works on but costs more. (Not a
 * burst of answers to PINGs that waited in the connection while p was
 * frozen: its datagrams come again with it.) */
static void udp_answers(sn_relay_t *r, peer_t *p, const sn_frame_t *f)
{
    uint64_t now = sn__relay_now_ns();
    if (r->in_from) {
        p->tcp_answers = 0;
    } else if (f->probe.kind == SN_SWIM_ACK && p->probe_port && r->udp_fd >= 0 && p->tcp_answers < UINT_MAX) {
        if (p->tcp_answers++ == 0)
            p->tcp_since_ns = now;
        if (p->tcp_answers < 3 || now - p->tcp_since_ns < (uint64_t)r->hb_ms * 1000000u * 10)
            return;
        SNLOG_WARN(r,
                   "node %" PRIu32 " at %s has answered our probes over TCP only for %" PRIu64 " s (%u answers): "
                   "are UDP datagrams to or from port %" PRIu32 " there, or port %" PRIu32 " here, blocked? "
                   "(probes go over UDP; failure detection works on, at a higher cost)",
                   p->node, p->endpoint, (now - p->tcp_since_ns) / 1000000000u, p->tcp_answers, p->probe_port,
                   r->probe_port);
        p->tcp_answers = UINT_MAX; /* (said: not again until a datagram comes) */
    }
}

void sn__members_heartbeat(sn_relay_t *r, peer_t *p, sn_frame_t *f)
{
    if (f->probe.port && f->incarnation == p->incarnation)
        p->probe_port = f->probe.port; /* (a static peer's, or a new run's) */
    if (f->has_stats) {
        bool loaded = f->stats.ready >= 2 && (!p->has_stats || p->stats.ready < 2);
        p->stats = f->stats;
        p->has_stats = true;
        if (loaded)
            sn__steal_loaded(r, p);
    }
    if (!f->probe.kind)
        return;
    udp_answers(r, p, f);
    sn_swim_msg_t msg = {.kind = f->probe.kind, .seq = f->probe.seq, .target = f->probe.target};
    for (size_t i = 0; i < f->nmembers && msg.nupdates < SN_SWIM_PIGGYBACK; i++) {
        const sn_wire_member_t *m = &f->members[i];
        if (m->node == r->node && m->incarnation > r->incarnation) {
            put_out(r, "node %" PRIu32 " knows a newer run of this node, at %s", f->node, m->endpoint);
            return;
        }
        if (m->node != r->node && !sn__members_upsert(r, m, "gossip"))
            continue; /* (one swim could not add: we cannot reach it) */
        msg.updates[msg.nupdates++] =
            (sn_swim_update_t){m->node, m->state, m->incarnation, m->version, m->suspected_by};
    }
    r->ack_tcp = !r->in_from; /* (see swim_send) */
    sn_swim_recv(r->swim, p->node, &msg, sn__relay_now_ns());
    r->ack_tcp = false;
    uint32_t node;
    uint64_t rtt;
    peer_t *q;
    if (sn_swim_take_rtt(r->swim, &node, &rtt) && (q = sn__relay_find_peer(r, node)))
        atomic_store_explicit(&q->m_rtt_ns, rtt, memory_order_relaxed); /* (metrics) */
}

/* Our load to every member that is up: when we get work to give (an idle
 * member comes for it), about once a second while we have it, and once
 * when it is gone. */
static void load_news(sn_relay_t *r, uint64_t now)
{
    sn_wire_stats_t row;
    own_row(r, &row);
    bool loaded = row.ready >= 2;
    if ((loaded && now >= r->next_load_ns) || (!loaded && r->said_loaded)) {
        void *buf;
        size_t len;
        r->last_hb_ns = now;
        if (sn_codec_encode_heartbeat(r->node, r->incarnation, &row, r->cluster, &buf, &len) == 0) {
            send_all(r, buf, len, false);
            free(buf);
        }
        r->said_loaded = loaded;
        r->next_load_ns = now + (uint64_t)r->hb_ms * 1000000u * LOAD_EVERY;
    }
    if (!loaded) {
        r->next_load_ns = UINT64_MAX; /* (the hook below, or a newcomer, brings it forward) */
        /* nothing to give, said so: hear from the scheduler when that
         * changes. Armed, then looked again (seq_cst, see load_news in
         * worker.c): work queued in between is seen one way or the other */
        sn__sched_watch_load(r->sched);
        sn_stats_t st;
        sn_sched_stats(r->sched, &st);
        if (st.ready >= 2)
            atomic_store_explicit(&r->load_news, 1, memory_order_relaxed);
    }
}

void sn__members_announce(sn_relay_t *r)
{
    sn_wire_stats_t row;
    own_row(r, &row);
    void *buf;
    size_t len;
    if (sn_codec_encode_heartbeat(r->node, r->incarnation, &row, r->cluster, &buf, &len) == 0) {
        send_all(r, buf, len, false);
        free(buf);
    }
}

/* Anti-entropy: the whole view to one member, at random; every other
 * time to one we hold down (it may be back: a healed partition, a node
 * resumed from a freeze), so that the views meet again. */
static void push_view(sn_relay_t *r)
{
    bool to_down = r->push_round++ % 2;
    peer_t *p = NULL;
    size_t nc = 0;
    SN__FOR_PEERS(r, q)
    {
        if (q->state == (to_down ? SN_MEMBER_DOWN : SN_MEMBER_UP) && q->dial && (size_t)rand() % ++nc == 0)
            p = q; /* (reservoir: uniform among the candidates) */
    }
    if (!p)
        return;
    void *buf;
    size_t len;
    /* to one held down, our row first (a heartbeat): if it is a founder
     * that restarted alone (a cluster of its own, knowing none of us), a
     * heartbeat from a node it does not know makes that node a member
     * there, and the view behind it merges the rest */
    sn_wire_stats_t row;
    own_row(r, &row);
    sn_wire_probe_t none = {.port = r->probe_port};
    if (to_down && sn_codec_encode_probe(r->node, r->incarnation, &none, &row, r->cluster, NULL, 0, &buf, &len) == 0) {
        (void)sn__relay_try_send(r, p, buf, len);
        free(buf);
    }
    size_t n;
    sn_wire_member_t *v = view(r, &n);
    if (v && sn_codec_encode_members(r->node, r->incarnation, 0, v, n, &buf, &len) == 0) {
        (void)sn__relay_try_send(r, p, buf, len);
        free(buf);
    }
    free(v);
}

/* A Hello to every seed; false if none took it (a seed's DEALER takes
 * nothing before its connection is made: ZMQ_IMMEDIATE). */
static bool hellos(sn_relay_t *r)
{
    void *buf;
    size_t len;
    if (sn_codec_encode_hello(r->node, r->incarnation, r->advertise, r->cluster, r->first_serial, r->public_key,
                              r->probe_port, r->types, r->ntypes, &buf, &len) != 0)
        return false;
    bool sent = false;
    for (size_t i = 0; i < r->nseeds; i++)
        sent |= zmq_send(zsock_resolve(r->seeds[i].dealer), buf, len, ZMQ_DONTWAIT) >= 0;
    free(buf);
    return sent;
}

/* Leaving: done when everything we sent is confirmed (or the deadline). */
static void leaving(sn_relay_t *r, uint64_t now)
{
    bool flushed = true;
    SN__FOR_PEERS(r, p)
    {
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
    r->pipe_used = true; /* (the signal may take the pipe's wake-up: relay.c) */
}

/* A tick more than one period late means this node did not run for that
 * long (stopped, as by SIGSTOP, or starved of CPU): swim.c gives its
 * timers that time back (a probe then unanswered is no verdict; a
 * suspicion's clock stops), as Lifeguard does, so that a node resumed
 * from a freeze does not declare everyone down. Logged here. */
static void stalled(sn_relay_t *r, uint64_t now)
{
    uint64_t period = (uint64_t)r->hb_ms * 1000000u, due = sn__members_next_ns(r);
    if (!due || now <= due || now - due <= period)
        return;
    uint64_t late = now - due;
    if (late >= (uint64_t)r->down_ms * 500000u)
        SNLOG_WARN(r,
                   "this node did not run for %" PRIu64 " ms (stopped or starved of CPU): "
                   "members get that time back before any is declared down",
                   late / 1000000u);
}

/* A member down or left for r->forget_ns is forgotten: its row and slot
 * go (reused by the next member added), and with them whatever was kept
 * for its run (what it was sent and never confirmed came back as
 * nodedown when it went down; the paths through it end now, as for a run
 * that ended). Its id may be taken again: a node of that id that comes
 * is a new member, whose run and first serial are its own, so nothing
 * meant for the old run reaches it (sends carry the run they were meant
 * for, PIDs the serial). Each member forgets on its own clock; rows of
 * dead members in others' gossip add none back (sn__members_upsert).
 * Guarded by tests/churn.sh. */
static void forget_old(sn_relay_t *r, uint64_t now)
{
    SN__FOR_PEERS(r, p)
    {
        if (p->state == SN_MEMBER_UP || !p->down_ns || now - p->down_ns < r->forget_ns || p->io_look || p->io_batch ||
            p->io_ack || p->io_later)
            continue;
        uint32_t node = p->node;
        SNLOG_INFO(r, "node %" PRIu32 " at %s forgotten: %s for %.0f s", node, p->endpoint,
                   p->state == SN_MEMBER_LEFT ? "left" : "down", (double)(now - p->down_ns) / 1e9);
        if (p->state == SN_MEMBER_DOWN) /* (one that left ended its paths then) */
            sn__relay_bounce_peer(r, p, SN_ENODEDOWN, true);
        sn_swim_forget(r->swim, node);
        sn__relay_free_slot(r, p);
    }
}

void sn__members_tick(sn_relay_t *r)
{
    uint64_t now = sn__relay_now_ns();
    uint64_t period = (uint64_t)r->hb_ms * 1000000u;
    int joined = atomic_load_explicit(&r->joined, memory_order_relaxed);
    if (joined == 0 && r->found_by_ns && now >= r->found_by_ns) {
        SNLOG_INFO(r, "no other seed answered: starting cluster '%s' (this node is its first seed)", r->cluster);
        atomic_store_explicit(&r->joined, 1, memory_order_release);
        joined = 1;
    }
    if (joined == 0 && now >= r->next_hello_ns) {
        /* again soon while no connection took it (a loaded seed, or this
         * machine, may take a while to connect), else after a while */
        r->next_hello_ns = now + (hellos(r) ? HELLO_EVERY_NS : HELLO_RETRY_NS);
    }
    stalled(r, now);
    if (now >= r->forget_next_ns) {
        r->forget_next_ns = now + 1000000000u;
        forget_old(r, now);
    }
    if (atomic_exchange_explicit(&r->load_news, 0, memory_order_acq_rel)) {
        /* Work piled up here since our load said there was none (the
         * scheduler's `loaded` hook, armed in load_news()): tell the
         * members now, idle ones will come for it. At most once per
         * EARLY_HB_GAP_NS, for a load that comes and goes. */
        uint64_t at = r->last_hb_ns + EARLY_HB_GAP_NS > now ? r->last_hb_ns + EARLY_HB_GAP_NS : now;
        if (at < r->next_load_ns)
            r->next_load_ns = at;
    }
    if (joined == 1) {
        if (now >= r->next_load_ns || r->said_loaded || now >= sn_swim_next_ns(r->swim))
            load_news(r, now); /* (and, with nothing to give, the scheduler's hook armed again) */
        if (now >= sn_swim_next_ns(r->swim))
            sn_swim_tick(r->swim, now);
        if (r->njoin_news && now >= r->join_told_ns + JOIN_NEWS_GAP_NS)
            join_news(r, NULL, 0);
        if (now >= r->tell_load_ns)
            tell_load(r);
        if (r->gossip_due || now >= r->next_push_ns) {
            push_view(r);
            r->gossip_due = false;
            r->next_push_ns = now + period * GOSSIP_EVERY;
        }
    }
    if (r->leave_deadline_ns)
        leaving(r, now);
    uint64_t next = joined == 1 ? sn_swim_next_ns(r->swim) : now + period;
    if (joined == 1 && r->next_push_ns < next)
        next = r->next_push_ns;
    if (joined == 1 && r->next_load_ns < next)
        next = r->next_load_ns;
    if (joined == 0 && r->next_hello_ns < next)
        next = r->next_hello_ns;
    if (joined == 0 && r->found_by_ns && r->found_by_ns < next)
        next = r->found_by_ns;
    if (r->leave_deadline_ns && now + LEAVE_TICK_NS < next)
        next = now + LEAVE_TICK_NS;
    if (next < now + 1000000u) /* (at most a tick a millisecond) */
        next = now + 1000000u;
    r->next_tick_ns = next;
    r->ticked_ns = now;
}

/* When the tick is due. Joined, it is looked up afresh each time, not
 * only at the last tick: a probe answered since needs no look at its
 * timeout (one wake-up a period less: bench/cluster-scale.sh measures an
 * idle cluster's CPU), and a suspicion heard
 * since is looked at on time. */
uint64_t sn__members_next_ns(sn_relay_t *r)
{
    if (atomic_load_explicit(&r->joined, memory_order_relaxed) != 1 || r->leave_deadline_ns || !r->next_tick_ns)
        return r->next_tick_ns;
    uint64_t next = sn_swim_next_ns(r->swim);
    if (r->tell_load_ns < next)
        next = r->tell_load_ns;
    if (r->njoin_news && r->join_told_ns + JOIN_NEWS_GAP_NS < next)
        next = r->join_told_ns + JOIN_NEWS_GAP_NS;
    if (r->next_push_ns < next)
        next = r->next_push_ns;
    if (r->next_load_ns < next)
        next = r->next_load_ns;
    if (next < r->ticked_ns + 1000000u) /* (at most a tick a millisecond) */
        next = r->ticked_ns + 1000000u;
    return next;
}

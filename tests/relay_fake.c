/* relay_fake.c - the test double of relay.c (see relay_fake.h): the
 * functions relay/members.c, steal.c and locate.c call there, with a fake
 * clock and frames kept in memory, and the harness that builds nodes
 * without sockets and plays their I/O threads.
 *
 * What differs from relay.c: nothing is batched, numbered, acknowledged or
 * bounced back to a sender (an item that cannot go is counted and
 * dropped); each routed item is one Sends frame. The peer table, the
 * outbound queue (the real MPSC queue: scheduler workers push through the
 * relay hook) and the calls into the logic files are relay.c's.
 */
#include "relay_fake.h"
#include "peer.h"
#include "udp.h"
#include "watch.h"
#include "members.h"
#include "steal.h"
#include "awaited.h"
#include "locate.h"
#include "move.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- the clock */

/* (workers never read it; atomic all the same) */
static _Atomic uint64_t clock_ns = UINT64_C(1000000000000);

uint64_t fake_clock(void)
{
    return atomic_load_explicit(&clock_ns, memory_order_relaxed);
}
void fake_clock_set(uint64_t ns)
{
    atomic_store_explicit(&clock_ns, ns, memory_order_relaxed);
}
void fake_clock_advance(uint64_t ns)
{
    atomic_fetch_add_explicit(&clock_ns, ns, memory_order_relaxed);
}

/* ------------------------------------------------------ relay.c, again */

static fake_node_t *node_of(sn_relay_t *r)
{
    return (fake_node_t *)r;
}

uint64_t sn__relay_now_ns(void)
{
    return fake_clock();
}

void sn__relay_bad(sn_relay_t *r, const char *why, uint32_t node)
{
    fake_node_t *n = node_of(r);
    n->bad++;
    snprintf(n->bad_why, sizeof n->bad_why, "%s", why);
    atomic_fetch_add_explicit(&r->bad_frames, 1, memory_order_relaxed);
}

/* Keeps a copy of (or, take: takes) buf as a frame n sent. */
static void capture(fake_node_t *n, uint32_t to, int how, const unsigned char *ident, size_t ident_len, void *buf,
                    size_t len, bool take)
{
    if (n->nout == n->capout) {
        size_t cap = n->capout ? n->capout * 2 : 64;
        fake_frame_t *o = realloc(n->out, cap * sizeof *o);
        assert_non_null(o);
        n->out = o;
        n->capout = cap;
    }
    fake_frame_t *f = &n->out[n->nout++];
    memset(f, 0, sizeof *f);
    f->to = to;
    f->how = how;
    assert_true(ident_len <= sizeof f->ident);
    if (ident_len)
        memcpy(f->ident, ident, ident_len);
    f->ident_len = ident_len;
    if (take) {
        f->buf = buf;
    } else {
        f->buf = malloc(len ? len : 1);
        assert_non_null(f->buf);
        memcpy(f->buf, buf, len);
    }
    f->len = len;
    atomic_fetch_add_explicit(&n->r.frames_out, 1, memory_order_relaxed);
}

/* relay.c: connects at the first send to a member it may dial. Here the
 * frame is kept; a node set `full` refuses it, as a full pipe does. */
bool sn__relay_try_send(sn_relay_t *r, peer_t *p, const void *buf, size_t len)
{
    fake_node_t *n = node_of(r);
    if (!p->dial || n->full)
        return false;
    capture(n, p->node, FAKE_TRY, NULL, 0, (void *)buf, len, false);
    return true;
}

/* udp.c: a probe goes as a datagram where it can; here, as try_send's
 * frames (no UDP socket: the logic is the same either way). */
bool sn__relay_send_probe(sn_relay_t *r, peer_t *p, const void *buf, size_t len)
{
    return sn__relay_try_send(r, p, buf, len);
}

/* udp.c: answers the sender of a datagram; no datagram comes in here. */
void sn__relay_udp_answer(sn_relay_t *r, uint32_t node, uint64_t inc, const void *buf, size_t len)
{
}

void sn__relay_send_ordered(sn_relay_t *r, peer_t *p, void *buf, size_t len)
{
    capture(node_of(r), p->node, FAKE_ORDERED, NULL, 0, buf, len, true);
}

void sn__relay_answer(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const void *buf, size_t len)
{
    capture(node_of(r), 0, FAKE_ANSWER, ident, ident_len, (void *)buf, len, false);
}

void sn__relay_send_reply(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const sn_wire_reply_t *rep)
{
    void *buf;
    size_t len;
    if (sn_codec_encode_reply(r->node, r->incarnation, rep, &buf, &len) == 0) {
        sn__relay_answer(r, ident, ident_len, buf, len);
        free(buf);
    }
}

void sn__relay_set_dealer(sn_relay_t *r, peer_t *p, zsock_t *d)
{
    assert_null(d); /* (members.c only drops a dealer: try_send makes them) */
    p->dealer = NULL;
}

/* relay.c also returns what was waiting for p to its senders; nothing
 * waits here. What it tells the logic files, it tells them. */
void sn__relay_bounce_peer(sn_relay_t *r, peer_t *p, int error, bool gone)
{
    fake_node_t *n = node_of(r);
    if (n->nbounces < sizeof n->bounces / sizeof n->bounces[0])
        n->bounces[n->nbounces++] = (fake_bounce_t){p->node, error, gone};
    sn__relay_watches_lost(r, p);
    for (size_t i = 0; i < p->nctl; i++)
        free(p->ctl[i].buf);
    p->nctl = 0;
    sn__steal_peer_gone(r, p, gone);
    sn__await_peer_down(r, p->node, gone);
    sn__loc_peer_down(r, p->node, gone);
}

void sn__relay_drop_buf(void *buf, _Atomic uint32_t *refs)
{
    (void)refs; /* (the fake shares no buffer with libzmq) */
    free(buf);
}

void sn__relay_poke(sn_relay_t *r)
{
    atomic_fetch_add_explicit(&node_of(r)->pokes, 1, memory_order_relaxed);
}

void sn__relay_enqueue(sn_relay_t *r, item_t *it)
{
    sn__mpsc_push(&r->outq, &it->link);
    sn__relay_poke(r);
}

bool sn__relay_drain(sn_relay_t *r)
{
    fake_node_t *n = node_of(r);
    if (n->before_drain) {
        void (*fn)(void *) = n->before_drain;
        n->before_drain = NULL;
        fn(n->before_drain_arg);
    }
    sn__mpsc_node_t *q;
    while ((q = sn__mpsc_pop(&r->outq)))
        sn__relay_route(r, (item_t *)q);
    return false;
}

/* Set while a send from another node is handed to the scheduler: what it
 * passes on from here is a forward (relay.c's passing_on). */
static _Thread_local bool passing_on;

/* relay.c's inbound_send, for the kinds the logic files take part in. */
static void inbound_send(fake_node_t *n, const peer_t *from, sn_wire_send_t *s)
{
    sn_relay_t *r = &n->r;
    if (from && (s->kind == SN_EV_MESSAGE || s->kind == SN_WIRE_FLUSH) && sn__steal_hold(r, from, s))
        return; /* (as relay.c's) */
    if (from && sn__loc_hold_passing(r, from->node, s, false))
        return; /* (as relay.c's) */
    switch (s->kind) {
    case SN_EV_MESSAGE: {
        bool was = passing_on;
        passing_on = true;
        int rc = sn__deliver_inbound(r->sched, s->to, s->from, s->tag, SN_EV_MESSAGE, 0, &s->payload);
        passing_on = was;
        if (rc == 0)
            sn__loc_forwarded(r, from, s->to);
        else
            n->undeliverable++;
        break;
    }
    case SN_RELAY_GONE:
        sn__loc_ended(r, s->to);
        break;
    case SN_WIRE_REDIRECT:
        if (s->tag == 0 && from)
            sn__loc_lost(r, s->to, from->node);
        else
            sn__loc_redirect(r, s->to, (uint32_t)s->tag, s->error > 0 ? (uint32_t)s->error : 0);
        break;
    case SN_WIRE_FLUSH:
        sn__loc_flush(r, s);
        break;
    case SN_WIRE_FLUSHED:
        if (s->error == SN_ENODEDOWN)
            sn__loc_stuck(r, s->to, (uint32_t)s->tag, s->id);
        else
            sn__loc_flushed(r, s->to, (uint32_t)s->tag, s->id);
        break;
    default:
        break;
    }
    sn_payload_destroy(&s->payload);
}

void sn__relay_inbound_send(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s)
{
    inbound_send(node_of(r), from, s);
}

/* route.c's: counted, and its payload freed (steal.c returns a queued
 * event too big to move this way). */
void sn__relay_bounce_local(sn_relay_t *r, sn_wire_send_t *s, int error, uint32_t at)
{
    (void)error, (void)at;
    node_of(r)->bounced++;
    sn_payload_destroy(&s->payload);
}

/* relay.c's route: the location cache first, then a frame to the peer. */
void sn__relay_route(sn_relay_t *r, item_t *it)
{
    fake_node_t *n = node_of(r);
    int how = sn__loc_route(r, it);
    if (how == SN_LOC_HELD)
        return;
    if (how == SN_LOC_DOWN) {
        n->bounced++;
        if (it->diverted)
            sn__migrate_diverted(r->sched, it->s.to);
        sn__relay_free_item(it);
        return;
    }
    if (it->dest == r->node) { /* a sender here, a process settling here */
        sn_pid_t to = it->s.to;
        bool diverted = it->diverted;
        inbound_send(n, NULL, &it->s);
        sn__relay_free_item(it);
        if (diverted)
            sn__migrate_diverted(r->sched, to);
        return;
    }
    if (sn__relay_for_process(it->s.kind)) {
        size_t bit = sn__sent_bit(it->s.to);
        r->sent_to[bit / 64] |= UINT64_C(1) << (bit % 64);
    }
    peer_t *p = sn__relay_find_peer(r, it->dest);
    if (!p || atomic_load_explicit(&p->down, memory_order_relaxed)) {
        n->bounced++;
        sn__relay_free_item(it);
        return;
    }
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_sends(r->node, r->incarnation, 0, &it->s, 1, &buf, &len), 0);
    capture(n, it->dest, FAKE_ROUTED, NULL, 0, buf, len, true);
    sn__relay_free_item(it);
}

/* peer.c's batch_add: the send goes out at once, a frame of its own. */
void sn__relay_batch_add(sn_relay_t *r, peer_t *p, item_t *it)
{
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_sends(r->node, r->incarnation, 0, &it->s, 1, &buf, &len), 0);
    capture(node_of(r), p->node, FAKE_ROUTED, NULL, 0, buf, len, true);
    sn__relay_free_item(it);
}

/* The scheduler's relay hook (any thread): relay.c's relay_deliver, less
 * its monitors and load hooks. */
static int hook_deliver(void *arg, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error, uint32_t via,
                        sn_payload_t **msg)
{
    sn_relay_t *r = arg;
    peer_t *p = via == r->node ? NULL : sn__relay_find_peer(r, via ? via : to.node);
    if (!p && via != r->node)
        return SN_EUNREACHABLE;
    if (p && atomic_load_explicit(&p->down, memory_order_acquire))
        return SN_ENODEDOWN;
    sn_wire_send_t s = {.to = to,
                        .from = from,
                        .tag = tag,
                        .kind = kind,
                        .error = error,
                        .id = atomic_fetch_add_explicit(&r->next_send_id, 1, memory_order_relaxed)};
    item_t *it = sn__relay_send_item(via ? via : to.node, via == r->node, passing_on, s, msg);
    if (!it)
        return SN_ENOMEM;
    if (passing_on) /* (as relay.c's: what this thread passes on goes now, not behind the queue) */
        sn__relay_route(r, it);
    else
        sn__relay_enqueue(r, it);
    return 0;
}

/* ------------------------------------------------------------- the nodes */

fake_node_t *fake_node_new(uint32_t node, int workers, const sn_type_t *const *types, size_t ntypes, bool joined,
                           bool steal)
{
    fake_node_t *n = aligned_alloc(64, sizeof *n); /* (the relay's state is aligned: relay_int.h) */
    assert_non_null(n);
    memset(n, 0, sizeof *n);
    sn__log_set_level(-1); /* silent: what the tests cause (downs, refusals, releases) is expected */
    sn_relay_t *r = &n->r;
    r->sched = sn_sched_new(&(sn_sched_config_t){node, workers, 1});
    assert_non_null(r->sched);
    for (size_t i = 0; i < ntypes; i++)
        assert_int_equal(sn_type_register(r->sched, types[i]), 0);
    r->node = node;
    r->incarnation = 100 + node;
    r->first_serial = 1;
    r->max_frame = SN_WIRE_MAX_FRAME;
    r->max_msg = SN_MAX_MESSAGE;
    r->max_backlog = SN_MAX_BACKLOG;
    r->forget_ns = (uint64_t)SN_FORGET_AFTER_MS * 1000000u;
    r->hb_ms = 200;
    r->down_ms = 1500;
    atomic_init(&r->next_send_id, (uint64_t)node << 48);
    r->start_ns = fake_clock();
    snprintf(r->cluster, sizeof r->cluster, "test");
    snprintf(r->advertise, sizeof r->advertise, "tcp://127.0.0.1:%u", 7000u + node);
    snprintf(r->endpoint, sizeof r->endpoint, "%s", r->advertise);
    sn__mpsc_init(&r->outq);
    r->efd = r->epfd = -1;
    assert_int_equal(sn__members_init(r), 0);
    atomic_store(&r->joined, joined ? 1 : 0);
    const sn_type_t *t[SN_WIRE_TYPES_MAX];
    r->ntypes = sn__sched_types(r->sched, t, SN_WIRE_TYPES_MAX);
    r->types = calloc(r->ntypes ? r->ntypes : 1, sizeof *r->types);
    assert_non_null(r->types);
    for (size_t i = 0; i < r->ntypes; i++) {
        snprintf(r->types[i].name, sizeof r->types[i].name, "%s", t[i]->name);
        r->types[i].version = t[i]->version;
        r->types[i].migratable = t[i]->marshal && t[i]->unmarshal;
    }
    sn_relay_config_t cfg = {.steal = steal ? 1 : 0};
    assert_int_equal(sn__steal_init(r, &cfg), 0);
    assert_int_equal(sn__move_init(r), 0);
    assert_int_equal(sn__loc_init(r), 0);
    sn__sched_set_relay(r->sched, &(sn_relay_hooks_t){r, hook_deliver, NULL, NULL, NULL, NULL, NULL});
    return n;
}

void fake_node_destroy(fake_node_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    fake_node_t *n = *self_p;
    sn_relay_t *r = &n->r;
    sn_sched_shutdown(r->sched, 5000);
    sn__mpsc_node_t *q;
    while ((q = sn__mpsc_pop(&r->outq)))
        sn__relay_free_item((item_t *)q);
    fake_clear(n);
    free(n->out);
    sn__relay_table_fini(r);
    sn__move_fini(r);
    sn__steal_fini(r);
    sn__loc_fini(r);
    sn__await_fini(r);
    sn__members_fini(r);
    free(r->types);
    sn_sched_destroy(&r->sched);
    free(n);
    *self_p = NULL;
}

sn_sched_t *fake_sched(fake_node_t *n)
{
    return n->r.sched;
}

peer_t *fake_peer(fake_node_t *n, uint32_t node)
{
    return sn__relay_find_peer(&n->r, node);
}

static void member_of(fake_node_t *n, sn_wire_member_t *m)
{
    *m = (sn_wire_member_t){.node = n->r.node,
                            .state = SN_MEMBER_UP,
                            .incarnation = n->r.incarnation,
                            .first_serial = n->r.first_serial,
                            .types = n->r.types,
                            .ntypes = n->r.ntypes};
    snprintf(m->endpoint, sizeof m->endpoint, "%s", n->r.advertise);
}

void fake_link(fake_node_t *a, fake_node_t *b)
{
    sn_wire_member_t m;
    member_of(b, &m);
    assert_non_null(sn__members_upsert(&a->r, &m, "test"));
    member_of(a, &m);
    assert_non_null(sn__members_upsert(&b->r, &m, "test"));
}

/* ----------------------------------------------------------- the frames */

void fake_clear(fake_node_t *n)
{
    for (size_t i = 0; i < n->nout; i++)
        free(n->out[i].buf);
    n->nout = 0;
}

void fake_decode(const fake_frame_t *fr, sn_frame_t *f)
{
    const char *why = NULL;
    int rc = sn_codec_decode(fr->buf, fr->len, 0, f, &why);
    if (rc != 0)
        fail_msg("a captured frame does not decode: %s", why ? why : "?");
}

static bool matches(const fake_frame_t *fr, uint32_t to, sn_frame_kind_t kind)
{
    if (to && fr->to != to)
        return false;
    if (!kind)
        return true;
    sn_frame_t f;
    fake_decode(fr, &f);
    bool ok = f.kind == kind;
    sn_frame_clear(&f);
    return ok;
}

size_t fake_count(fake_node_t *n, uint32_t to, sn_frame_kind_t kind)
{
    size_t c = 0;
    for (size_t i = 0; i < n->nout; i++)
        c += matches(&n->out[i], to, kind);
    return c;
}

bool fake_take(fake_node_t *n, uint32_t to, sn_frame_kind_t kind, fake_frame_t *fr)
{
    for (size_t i = 0; i < n->nout; i++)
        if (matches(&n->out[i], to, kind)) {
            *fr = n->out[i];
            memmove(&n->out[i], &n->out[i + 1], (n->nout - i - 1) * sizeof *n->out);
            n->nout--;
            return true;
        }
    return false;
}

bool fake_take_decoded(fake_node_t *n, uint32_t to, sn_frame_kind_t kind, sn_frame_t *f)
{
    fake_frame_t fr;
    if (!fake_take(n, to, kind, &fr))
        return false;
    fake_decode(&fr, f);
    free(fr.buf);
    return true;
}

bool fake_peek(fake_node_t *n, uint32_t to, sn_frame_kind_t kind, sn_frame_t *f)
{
    for (size_t i = 0; i < n->nout; i++)
        if (matches(&n->out[i], to, kind)) {
            fake_decode(&n->out[i], f);
            return true;
        }
    return false;
}

/* ----------------------------------------------------- the I/O thread */

static int seed_socket; /* its address stands for a seed's socket: members.c only tests it for NULL */

void fake_inbound(fake_node_t *n, const void *buf, size_t len, const unsigned char *ident, size_t ident_len,
                  bool from_seed)
{
    sn_relay_t *r = &n->r;
    sn_frame_t f;
    const char *why = "undecodable";
    if (sn_codec_decode(buf, len, r->max_frame, &f, &why) != 0) {
        sn__relay_bad(r, why, f.node);
        return;
    }
    atomic_fetch_add_explicit(&r->frames_in, 1, memory_order_relaxed);
    peer_t *p = sn__relay_find_peer(r, f.node);
    if (p && f.incarnation < p->incarnation) {
        sn__relay_bad(r, "frame from an earlier run of that node", f.node);
        sn__members_superseded(r, p, &f, ident, ident_len);
        sn_frame_clear(&f);
        return;
    }
    if (p && f.kind != SN_FRAME_HELLO)
        sn__members_heard(r, p, f.incarnation);
    switch (f.kind) {
    case SN_FRAME_SENDS: /* (numbered as a real node numbers a peer's frames: the frames_in count) */
        r->in_seq = p ? atomic_load_explicit(&r->frames_in, memory_order_relaxed) : 0;
        for (size_t i = 0; i < f.nsends; i++)
            inbound_send(n, p, &f.sends[i]);
        r->in_seq = 0;
        break;
    default: /* as inbound.c hands them on */
        if (!sn__relay_logic_frame(r, p, &f, ident, ident_len, from_seed ? (zsock_t *)&seed_socket : NULL))
            sn__relay_bad(r, "out of protocol", f.node);
        break;
    }
    sn_frame_clear(&f);
}

bool fake_pass(fake_node_t *from, fake_node_t *to, sn_frame_kind_t kind, sn_frame_t *f)
{
    fake_frame_t fr;
    bool found = false;
    for (size_t i = 0; i < from->nout && !found; i++) /* (an answer is for whoever asked: the test says who) */
        if ((from->out[i].to == to->r.node || from->out[i].how == FAKE_ANSWER) && matches(&from->out[i], 0, kind)) {
            fr = from->out[i];
            memmove(&from->out[i], &from->out[i + 1], (from->nout - i - 1) * sizeof *from->out);
            from->nout--;
            found = true;
        }
    if (!found)
        return false;
    if (f)
        fake_decode(&fr, f);
    sn_frame_t peek;
    fake_decode(&fr, &peek);
    bool hello = peek.kind == SN_FRAME_HELLO;
    sn_frame_clear(&peek);
    static const unsigned char ident[] = "fake-router-id";
    if (hello)
        fake_inbound(to, fr.buf, fr.len, ident, sizeof ident - 1, false);
    else
        fake_inbound(to, fr.buf, fr.len, NULL, 0, fr.how == FAKE_ANSWER);
    free(fr.buf);
    return true;
}

void fake_drain(fake_node_t *n)
{
    sn__relay_drain(&n->r);
}

void fake_before_drain(fake_node_t *n, void (*fn)(void *arg), void *arg)
{
    n->before_drain = fn;
    n->before_drain_arg = arg;
}

void fake_say_load(fake_node_t *to, uint32_t from, uint64_t ready)
{
    peer_t *p = fake_peer(to, from);
    assert_non_null(p);
    sn_wire_stats_t row = {.node = from, .state = SN_MEMBER_UP, .ready = ready};
    snprintf(row.endpoint, sizeof row.endpoint, "%s", p->endpoint);
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_heartbeat(from, p->incarnation, &row, to->r.cluster, &buf, &len), 0);
    fake_inbound(to, buf, len, NULL, 0, false);
    free(buf);
}

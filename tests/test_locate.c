/* test_locate.c - relay/locate.c, where a process that moved lives: three
 * nodes in one process, each a real scheduler with relay/'s logic files
 * over the test double of relay.c (tests/relay_fake.c); the test thread
 * carries the frames and moves the fake clock.
 *
 * A process P of node 1 (its home) is stolen by node 2. Node 3's send to
 * it goes to the home, which forwards it and tells node 3 where P is
 * (REDIRECT); node 3 then holds its new sends while a FLUSH marker goes
 * down the old path, and sends them straight to node 2, in order, once
 * the marker is answered; the marker goes again on the fake clock while
 * it is not, and after 15 s the held sends go on anyway. When P moves on
 * again (2 -> 3), its new node tells the home, whose record and route
 * follow it. When P comes back to a node with a sender of its own, that
 * sender's messages stay in order across the move (the flush of its
 * arrival, and the hold before it), and so do those of a third node that
 * reach it while P is on its way there (they wait for the commit), and
 * so do the messages such a flush held once it gives up after P moved on
 * again (passed on ahead of what was queued since), and so do a third
 * node's when the process comes back round to a node whose forwards to
 * it are still on a frozen node (that node's arrival flush answers the
 * third node's marker), also when the home's cache and its forwarding
 * entry lead down different paths (it flushes both), and a third node's
 * messages that reach it meanwhile wait. A monitor that a node going down
 * never confirmed goes to the process's home again (relay/watch.c). A
 * path that ended in a run that ended no longer leads back to it from the
 * home.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "movers.h"
#include "relay_fake.h"
#include "peer.h"
#include "watch.h"
#include "steal.h"
#include "locate.h"

#define FLUSH_RETRY_NS UINT64_C(1000000000)   /* locate.c's */
#define DOWN_RELEASE_NS UINT64_C(15000000000) /* locate.c's */
#define MS UINT64_C(1000000)

typedef struct trio {
    fake_node_t *n[5]; /* nodes 1, 2, 3 (and 4: setup4) */
} trio_t;

static int setup(void **state)
{
    movers_reset();
    trio_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    for (uint32_t i = 1; i <= 3; i++)
        c->n[i] = fake_node_new(i, 1, mover_types, 2, true, true);
    fake_link(c->n[1], c->n[2]);
    fake_link(c->n[1], c->n[3]);
    fake_link(c->n[2], c->n[3]);
    *state = c;
    return 0;
}

/* Four nodes, each a member of every other's view. */
static int setup4(void **state)
{
    setup(state);
    trio_t *c = *state;
    c->n[4] = fake_node_new(4, 1, mover_types, 2, true, true);
    for (uint32_t i = 1; i <= 3; i++)
        fake_link(c->n[i], c->n[4]);
    return 0;
}

static int teardown(void **state)
{
    trio_t *c = *state;
    for (uint32_t i = 1; i <= 4; i++)
        movers_release(i);
    for (uint32_t i = 1; i <= 4; i++)
        fake_node_destroy(&c->n[i]);
    free(c);
    return 0;
}

/* thief steals from victim (the victim says what it has Ready, the third
 * node that it has nothing, so the thief asks the victim); returns how
 * many moved, their PIDs in moved. */
static size_t steal(trio_t *c, uint32_t victim, uint32_t thief, sn_pid_t *moved)
{
    fake_node_t *v = c->n[victim], *t = c->n[thief];
    sn_stats_t st;
    sn_sched_stats(fake_sched(v), &st);
    fake_say_load(t, victim, st.ready);
    for (uint32_t k = 1; k <= 4; k++) /* the others have nothing */
        if (c->n[k] && k != victim && k != thief)
            fake_say_load(t, k, 0);
    sn__steal_tick(&t->r, fake_clock());
    assert_true(fake_pass(t, v, SN_FRAME_STEAL_REQUEST, NULL));
    assert_true(fake_pass(v, t, SN_FRAME_STEAL_OFFER, NULL));
    assert_true(fake_pass(t, v, SN_FRAME_STEAL_ACCEPT, NULL));
    sn_frame_t f;
    assert_true(fake_pass(v, t, SN_FRAME_STEAL_COMMIT, &f));
    size_t n = f.npids;
    for (size_t i = 0; i < n; i++) {
        moved[i] = f.pids[i];
        assert_true(fake_here(fake_sched(t), moved[i]));
        assert_false(fake_here(fake_sched(v), moved[i]));
    }
    sn_frame_clear(&f);
    return n;
}

/* The one send in the oldest Sends frame node `from` sent to `to`, taken
 * (into f: the caller clears it). */
static sn_wire_send_t take_send(fake_node_t *from, uint32_t to, sn_frame_t *f)
{
    assert_true(fake_take_decoded(from, to, SN_FRAME_SENDS, f));
    assert_int_equal(f->nsends, 1);
    return f->sends[0];
}

static uint64_t u64_of(const sn_wire_send_t *s)
{
    uint64_t v = 0;
    assert_non_null(s->payload);
    assert_int_equal(sn_payload_get_u64(s->payload, &v), 0);
    return v;
}

/* Every Sends frame from node `from` to node `to`, in order, into `to`. */
static int pass_all(trio_t *c, uint32_t from, uint32_t to)
{
    int n = 0;
    while (fake_pass(c->n[from], c->n[to], SN_FRAME_SENDS, NULL))
        n++;
    return n;
}

/* P (a mover of home node 1, its index in *idx) moves to node 2; node 3
 * sends it message 1 through the home, which forwards it and redirects
 * node 3; node 3 starts its flush through the home (the marker is in its
 * outbox) and holds messages 2, 3, 4. Returns P. */
static sn_pid_t redirected(trio_t *c, uint64_t *idx)
{
    fake_node_t *h = c->n[1], *s = c->n[3];
    movers_hold(fake_sched(h));
    sn_pid_t spawned[2] = {mover_spawn(fake_sched(h), 0), mover_spawn(fake_sched(h), 1)};
    sn_pid_t pid;
    assert_int_equal(steal(c, 1, 2, &pid), 1);
    *idx = sn_pid_eq(pid, spawned[0]) ? 0 : 1;
    assert_true(sn_pid_eq(pid, spawned[*idx]));
    movers_release(1);

    /* node 3 knows nothing of the move: its send goes to the home */
    send_u64(fake_sched(s), pid, 1);
    fake_drain(s);
    assert_int_equal(fake_count(s, 1, SN_FRAME_SENDS), 1);
    assert_int_equal(fake_count(s, 0, 0), 1);
    assert_int_equal(pass_all(c, 3, 1), 1);
    /* the home forwards it to node 2 and tells node 3 where P is */
    fake_drain(h);
    assert_int_equal(fake_count(h, 0, 0), 2);
    sn_frame_t f;
    assert_true(fake_peek(h, 2, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_EV_MESSAGE);
    assert_true(sn_pid_eq(f.sends[0].to, pid));
    assert_int_equal(u64_of(&f.sends[0]), 1);
    sn_frame_clear(&f);
    assert_true(fake_peek(h, 3, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_WIRE_REDIRECT);
    assert_true(sn_pid_eq(f.sends[0].to, pid));
    assert_int_equal(f.sends[0].tag, 2);
    sn_frame_clear(&f);
    assert_int_equal(atomic_load(&h->r.forwarded), 1);
    assert_int_equal(atomic_load(&h->r.redirects), 1);
    assert_int_equal(pass_all(c, 1, 2), 1);
    assert_int_equal(pass_all(c, 1, 3), 1);
    assert_true(mover_wait_msgs(*idx, 1));
    assert_int_equal(mover_msg(*idx, 0), 1);

    /* node 3 switches: the marker goes down the old path, its new sends wait */
    for (uint64_t v = 2; v <= 4; v++)
        send_u64(fake_sched(s), pid, v);
    fake_drain(s);
    assert_int_equal(fake_count(s, 0, 0), 1);
    assert_true(fake_peek(s, 1, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_WIRE_FLUSH);
    assert_true(sn_pid_eq(f.sends[0].to, pid));
    assert_int_equal(f.sends[0].from.node, 3);
    assert_true(f.sends[0].id != 0);
    sn_frame_clear(&f);
    return pid;
}

/* The redirect, and the flush answered: node 3's held sends go straight
 * to node 2, in order, after the one that went through the home. */
static void test_redirect_and_flush(void **state)
{
    trio_t *c = *state;
    uint64_t idx;
    sn_pid_t pid = redirected(c, &idx);
    fake_node_t *h = c->n[1], *t = c->n[2], *s = c->n[3];

    /* the marker: node 3 -> home -> node 2, answered to node 3 */
    assert_int_equal(pass_all(c, 3, 1), 1);
    fake_drain(h);
    sn_frame_t f;
    assert_true(fake_peek(h, 2, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_WIRE_FLUSH);
    sn_frame_clear(&f);
    assert_int_equal(pass_all(c, 1, 2), 1);
    fake_drain(t);
    assert_true(fake_peek(t, 3, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_WIRE_FLUSHED);
    assert_int_equal(f.sends[0].tag, 2); /* where it lives */
    sn_frame_clear(&f);
    assert_int_equal(fake_count(s, 0, 0), 0); /* still held */
    assert_int_equal(pass_all(c, 2, 3), 1);
    /* released, straight to node 2 */
    assert_int_equal(fake_count(s, 1, 0), 0);
    assert_int_equal(fake_count(s, 2, SN_FRAME_SENDS), 3);
    assert_int_equal(pass_all(c, 3, 2), 3);
    /* and from now on straight there */
    send_u64(fake_sched(s), pid, 5);
    fake_drain(s);
    assert_int_equal(fake_count(s, 1, 0), 0);
    assert_int_equal(pass_all(c, 3, 2), 1);
    assert_true(mover_wait_msgs(idx, 5));
    for (int k = 0; k < 5; k++) /* in the order sent, across the switch */
        assert_int_equal(mover_msg(idx, k), (uint64_t)k + 1);
    assert_int_equal(atomic_load(&g_mv.steps_on[idx][1]), 0); /* it never ran at home */
}

/* The marker, or its answer, is lost: it goes again every second (the same
 * flush id) while the sends wait; after 15 s without an answer they go on
 * to where the redirect said, in order. */
static void test_flush_retry_and_release(void **state)
{
    trio_t *c = *state;
    uint64_t idx;
    sn_pid_t pid = redirected(c, &idx);
    fake_node_t *s = c->n[3];
    sn_frame_t f;
    assert_true(fake_take_decoded(s, 1, SN_FRAME_SENDS, &f)); /* lost */
    uint64_t id = f.sends[0].id;
    sn_frame_clear(&f);

    fake_clock_advance(FLUSH_RETRY_NS - 100 * MS);
    sn__loc_tick(&s->r, fake_clock());
    fake_drain(s);
    assert_int_equal(fake_count(s, 0, 0), 0); /* not yet */
    int markers = 0;
    uint64_t start = fake_clock();
    while (fake_clock() - start < DOWN_RELEASE_NS - 2 * FLUSH_RETRY_NS) {
        fake_clock_advance(100 * MS);
        sn__loc_tick(&s->r, fake_clock());
        fake_drain(s);
        while (fake_take_decoded(s, 1, SN_FRAME_SENDS, &f)) { /* each one lost too */
            assert_int_equal(f.sends[0].kind, SN_WIRE_FLUSH);
            assert_int_equal(f.sends[0].id, id);
            sn_frame_clear(&f);
            markers++;
        }
        assert_int_equal(fake_count(s, 0, 0), 0); /* the sends still wait */
    }
    assert_in_range(markers, 11, 13); /* one a second */
    /* 15 s after the flush began: they go to where the redirect said */
    fake_clock_advance(3 * FLUSH_RETRY_NS);
    sn__loc_tick(&s->r, fake_clock());
    fake_drain(s);
    assert_int_equal(fake_count(s, 1, 0), 0);
    assert_int_equal(fake_count(s, 2, SN_FRAME_SENDS), 3);
    for (uint64_t v = 2; v <= 4; v++) {
        sn_wire_send_t m = take_send(s, 2, &f);
        assert_true(sn_pid_eq(m.to, pid));
        assert_int_equal(u64_of(&m), v);
        sn_frame_clear(&f);
    }
}

/* P moves on (node 2 -> node 3): the node it arrived at tells its home,
 * whose record follows (sn__loc_last_seen) and whose own route is
 * switched by a flush down the old path. */
static void test_home_follows(void **state)
{
    trio_t *c = *state;
    fake_node_t *h = c->n[1], *t = c->n[2], *u = c->n[3];
    movers_hold(fake_sched(h));
    movers_hold(fake_sched(t)); /* what arrives at node 2 stays Ready there */
    sn_pid_t moved[4], again[4];
    for (uint64_t i = 0; i < 4; i++)
        (void)mover_spawn(fake_sched(h), i);
    assert_int_equal(steal(c, 1, 2, moved), 2);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(sn__loc_last_seen(&h->r, moved[i]), 2);
    assert_int_equal(steal(c, 2, 3, again), 1);
    sn_pid_t pid = again[0];
    assert_int_equal(fake_forward_of(fake_sched(t), pid), 3);
    assert_int_equal(fake_forward_of(fake_sched(h), pid), 2);
    assert_int_equal(sn__loc_last_seen(&h->r, pid), 2); /* not yet told */

    /* node 3 tells the home */
    fake_drain(u);
    sn_frame_t f;
    assert_true(fake_peek(u, 1, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_WIRE_REDIRECT);
    assert_int_equal(f.sends[0].tag, 3);
    assert_int_equal(f.sends[0].error, 2); /* its move number */
    sn_frame_clear(&f);
    assert_int_equal(pass_all(c, 3, 1), 1);
    assert_int_equal(sn__loc_last_seen(&h->r, pid), 3);
    /* the home's own sends switch too: a flush down the old path, the
     * send meanwhile held */
    send_u64(fake_sched(h), pid, 7);
    fake_drain(h);
    assert_int_equal(fake_count(h, 0, 0), 1);
    assert_true(fake_peek(h, 2, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_WIRE_FLUSH);
    sn_frame_clear(&f);
    assert_int_equal(pass_all(c, 1, 2), 1);
    fake_drain(t);
    assert_int_equal(pass_all(c, 2, 3), 1); /* node 2 passes it on to node 3 */
    fake_drain(u);
    assert_true(fake_peek(u, 1, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_WIRE_FLUSHED);
    assert_int_equal(f.sends[0].tag, 3);
    sn_frame_clear(&f);
    assert_int_equal(pass_all(c, 3, 1), 1);
    sn_wire_send_t m = take_send(h, 3, &f);
    assert_int_equal(u64_of(&m), 7);
    assert_int_equal(fake_count(h, 0, 0), 0);
    sn_frame_clear(&f);
    /* from now on straight to node 3 */
    send_u64(fake_sched(h), pid, 8);
    fake_drain(h);
    assert_int_equal(fake_count(h, 3, SN_FRAME_SENDS), 1);
    assert_int_equal(fake_count(h, 0, 0), 1);
}

/* The DOWNs mover `index` got, waiting until it has `n`. */
static bool mover_wait_downs(uint64_t index, int n)
{
    return wait_count(&g_mv.ndowns[index], n, WAIT_MS);
}

static bool mover_got_down(uint64_t index, uint64_t tag, int error)
{
    int n = atomic_load_explicit(&g_mv.ndowns[index], memory_order_acquire);
    for (int k = 0; k < n && k < MOVER_MSGS; k++)
        if (atomic_load_explicit(&g_mv.downs[index][k], memory_order_relaxed) == (tag << 16 | (uint16_t)-error))
            return true;
    return false;
}

/* Node 2 watches three processes, its records under node 3: P of home
 * node 1, which node 2's cache placed on node 3 and node 3 never confirmed;
 * Q, whose monitor node 3 confirmed (WATCHED); R of home node 3. Node 3
 * goes down: Q's and R's watchers get DOWN nodedown (each may have gone
 * with it), P's monitor goes to its home again, its record with it
 * (watch.c). With node 1 down as well it would be nodedown too. */
static void test_unconfirmed_monitor_goes_home(void **state)
{
    trio_t *c = *state;
    fake_node_t *w = c->n[2];
    sn_pid_t watcher = mover_spawn(fake_sched(w), 0);
    assert_int_equal(mover_wait_ran(0), 2);
    sn_pid_t p = mover_spawn(fake_sched(c->n[1]), 1), q = mover_spawn(fake_sched(c->n[1]), 2);
    sn_pid_t r = {3, 12};
    peer_t *at3 = fake_peer(w, 3), *at1 = fake_peer(w, 1);
    assert_true(sn__watch(at3, p, watcher, 7, true));
    assert_true(sn__watch(at3, q, watcher, 8, true));
    assert_true(sn__watch(at3, r, watcher, 9, true));
    assert_true(sn__watch_confirm(at3, q, watcher, 8));
    assert_false(sn__watch_confirm(at1, q, watcher, 8)); /* (none there) */
    /* and one made here for a watcher on node 1 (P left here with it) */
    sn_pid_t far = {1, 77};
    assert_true(sn__watch(at3, p, far, 12, true));
    fake_clear(w);

    atomic_store(&at3->down, 1);
    sn__relay_bounce_peer(&w->r, at3, SN_ENODEDOWN, true);
    assert_int_equal(at3->nwatch, 0);
    assert_true(mover_wait_downs(0, 2));
    assert_true(mover_got_down(0, 8, SN_ENODEDOWN));
    assert_true(mover_got_down(0, 9, SN_ENODEDOWN));
    assert_false(mover_got_down(0, 7, SN_ENODEDOWN));
    /* P's request went home, and its record is under the home now */
    sn_frame_t f;
    sn_wire_send_t m = take_send(w, 1, &f);
    assert_int_equal(m.kind, SN_RELAY_MONITOR);
    assert_true(sn_pid_eq(m.to, p));
    assert_true(sn_pid_eq(m.from, watcher));
    assert_int_equal(m.tag, 7);
    sn_frame_clear(&f);
    /* the far watcher's: nodedown to its node, not home again (its node
     * has a record of its own) */
    fake_drain(w);
    m = take_send(w, 1, &f);
    assert_int_equal(m.kind, SN_EV_DOWN);
    assert_true(sn_pid_eq(m.to, far));
    assert_int_equal(m.tag, 12);
    assert_int_equal(m.error, SN_ENODEDOWN);
    sn_frame_clear(&f);
    assert_int_equal(fake_count(w, 0, 0), 0);
    assert_int_equal(at1->nwatch, 1);
    /* the first request, sent to node 3 and not acknowledged, comes back
     * from there (its frame bounces after the records were answered): the
     * record under the home is not its to take, no DOWN */
    sn_wire_send_t first = {.to = p, .from = watcher, .tag = 7, .kind = SN_RELAY_MONITOR};
    assert_false(sn__watch_bounced(&w->r, &first, SN_ENODEDOWN, 3));
    assert_int_equal(at1->nwatch, 1);
    /* a record that moved to the node holding the monitor (WATCHED) is
     * not taken either by its request bouncing from where it went first;
     * from the node that holds it, it is */
    assert_true(sn__watch(at1, q, watcher, 10, true));
    assert_true(sn__watch_confirm(at1, q, watcher, 10));
    sn_wire_send_t moved = {.to = q, .from = watcher, .tag = 10, .kind = SN_RELAY_MONITOR};
    assert_false(sn__watch_bounced(&w->r, &moved, SN_ENODEDOWN, 3));
    sleep_ms(20); /* (no DOWN for either) */
    assert_int_equal(atomic_load(&g_mv.ndowns[0]), 2);
    assert_true(sn__watch_bounced(&w->r, &moved, SN_ENOMEM, 1));
    assert_true(mover_wait_downs(0, 3));
    assert_true(mover_got_down(0, 10, SN_ENOMEM));
    assert_int_equal(at1->nwatch, 1);
    /* its home goes too: that one is the home's to answer, nodedown */
    atomic_store(&at1->down, 1);
    sn__relay_bounce_peer(&w->r, at1, SN_ENODEDOWN, true);
    assert_true(mover_wait_downs(0, 4));
    assert_true(mover_got_down(0, 7, SN_ENODEDOWN));
    assert_int_equal(fake_count(w, 0, 0), 0);
    sleep_ms(20); /* (no fifth) */
    assert_int_equal(atomic_load(&g_mv.ndowns[0]), 4);
    assert_int_equal(atomic_load(&g_mv.ndowns[0]), 4);
}

/* What the hook sends (fake_before_drain): u64 `v` to `to` from node n. */
typedef struct late_send {
    fake_node_t *n;
    sn_pid_t to;
    uint64_t v;
} late_send_t;

static void send_late(void *arg)
{
    late_send_t *l = arg;
    send_u64(fake_sched(l->n), l->to, l->v);
}

/* Every frame from node `from` to node `to`, whatever its kind, in the
 * order sent (as one connection carries them). */
static int pass_in_order(trio_t *c, uint32_t from, uint32_t to)
{
    int n = 0;
    while (fake_pass(c->n[from], c->n[to], 0, NULL))
        n++;
    return n;
}

/* P, a mover of home node 1, moves 1 -> 2 -> 3 (node 3's news for the
 * home not passed: the home's route still goes to node 2), and node 2
 * asks for it back: node 3 offers it, node 2 accepts (the accept not
 * passed yet). Every node's one worker is held. Returns P. */
static sn_pid_t offered_back(trio_t *c, uint64_t *idx)
{
    fake_node_t *h = c->n[1], *t = c->n[2], *u = c->n[3];
    movers_hold(fake_sched(h));
    movers_hold(fake_sched(t)); /* P stays Ready on node 2, and its messages wait there */
    sn_pid_t spawned[4], moved[4];
    for (uint64_t i = 0; i < 4; i++)
        spawned[i] = mover_spawn(fake_sched(h), i);
    assert_int_equal(steal(c, 1, 2, moved), 2);
    movers_hold(fake_sched(u));       /* what arrives at node 3 stays Ready there too */
    atomic_store(&u->r.want_work, 1); /* (as its worker would say, not held) */
    assert_int_equal(steal(c, 2, 3, moved), 1);
    sn_pid_t pid = moved[0];
    *idx = 0;
    while (!sn_pid_eq(spawned[*idx], pid))
        (*idx)++;
    /* (node 3 gives half the difference of Ready work: 3 here, Q on node 2) */
    (void)mover_spawn(fake_sched(u), 4);
    (void)mover_spawn(fake_sched(u), 5);
    assert_int_equal(fake_forward_of(fake_sched(t), pid), 3);
    assert_int_equal(fake_forward_of(fake_sched(h), pid), 2);

    sn_stats_t st;
    sn_sched_stats(fake_sched(u), &st);
    fake_say_load(t, 3, st.ready);
    fake_say_load(t, 1, 0);
    atomic_store(&t->r.want_work, 1);
    sn__steal_tick(&t->r, fake_clock());
    assert_true(fake_pass(t, u, SN_FRAME_STEAL_REQUEST, NULL));
    /* the home's 10 reaches node 2 just before the offer: node 2 passes
     * it on to node 3 (not drained yet when the offer comes: the accept
     * goes behind it, so it is in P's mailbox there at the commit) */
    send_u64(fake_sched(h), pid, 10);
    fake_drain(h);
    assert_int_equal(pass_all(c, 1, 2), 1);
    assert_true(fake_pass(u, t, SN_FRAME_STEAL_OFFER, NULL));
    assert_int_equal(fake_count(t, 3, 0), 2);
    sn_frame_t f;
    assert_true(fake_peek(t, 3, 0, &f));
    assert_int_equal(f.kind, SN_FRAME_SENDS);
    assert_int_equal(u64_of(&f.sends[0]), 10);
    sn_frame_clear(&f);
    assert_int_equal(fake_count(t, 3, SN_FRAME_STEAL_ACCEPT), 1);
    return pid;
}

/* P comes back to a node with a sender of its own: P moved 2 -> 3, and
 * node 2 takes it back (3 -> 2). Node 2's sender sends message 1 behind
 * node 2's accept of P (through its forwarding entry: to node 3, which
 * passes it back after the commit); the home's sender sends 11, which
 * reaches node 2 while P is on its way there (the home's route still
 * goes to node 2). As P arrives, node 2's sender sends 2 (while the I/O
 * thread drains its queue, before P settles) and 3, and the home's 12
 * reaches node 2 after P did. 11 waits at node 2 for the commit and goes
 * in after its events; 12 after 11; 2 and 3 wait for the marker of P's
 * flush, which comes back from node 3 behind 1. So P gets each sender's
 * messages in the order sent; the home's 10, passed on to node 3 just
 * before the offer came, first of all, with the commit. (The faults it
 * guards against: 2 delivered at once, ahead of 1; 11 passed on to node 3,
 * to come back behind 12.) */
static void test_back_where_its_sender_is(void **state)
{
    trio_t *c = *state;
    fake_node_t *h = c->n[1], *t = c->n[2], *u = c->n[3];
    uint64_t idx;
    sn_pid_t pid = offered_back(c, &idx);
    /* 1 leaves node 2 behind the accept (P is not here yet); 11 reaches
     * node 2 and waits there */
    send_u64(fake_sched(t), pid, 1);
    fake_drain(t);
    send_u64(fake_sched(h), pid, 11);
    fake_drain(h);
    assert_int_equal(pass_all(c, 1, 2), 1);
    /* node 2 acknowledges nothing of the home's from 11's frame on until
     * 11 went in: killed meanwhile, it has not confirmed 11 (the fake
     * numbers no frames: as if 5 more came after 11's) */
    peer_t *home = fake_peer(t, 1);
    assert_int_equal(home->nheld, 1);
    home->recv_seq = home->held_cap + 6;
    assert_int_equal(sn__relay_ackable(home), home->held_cap);
    fake_drain(t);
    assert_int_equal(fake_count(t, 3, 0), 3);
    assert_int_equal(pass_in_order(c, 2, 3), 3); /* 10, the accept (node 3 commits, 10 with it), 1 */
    fake_drain(u);                               /* 1 goes on to node 2, behind the commit */
    assert_int_equal(fake_count(u, 2, SN_FRAME_STEAL_COMMIT), 1);
    assert_int_equal(fake_count(u, 2, SN_FRAME_SENDS), 1);

    /* the commit arrives; message 2 is sent as node 2 takes P in */
    late_send_t late = {t, pid, 2};
    fake_before_drain(t, send_late, &late);
    assert_true(fake_pass(u, t, SN_FRAME_STEAL_COMMIT, NULL));
    assert_null(t->before_drain); /* (it was sent) */
    assert_true(fake_here(fake_sched(t), pid));
    /* 11 waits for the arrival's flush (it came from the home, not from
     * node 3): its frame is still not acknowledged */
    assert_int_equal(home->nheld, 1);
    assert_int_equal(sn__relay_ackable(home), home->held_cap);
    send_u64(fake_sched(t), pid, 3);
    fake_drain(t);
    send_u64(fake_sched(h), pid, 12); /* (the home's route: node 2 still) */
    fake_drain(h);
    assert_int_equal(pass_all(c, 1, 2), 1);
    sleep_ms(20);
    assert_int_equal(atomic_load(&g_mv.nmsgs[idx]), 0); /* (node 2's worker is held) */
    /* node 2's flush marker goes down the old path: to node 3, which
     * passes it back behind 1 */
    sn_frame_t f;
    assert_true(fake_peek(t, 3, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_WIRE_FLUSH);
    sn_frame_clear(&f);
    assert_int_equal(pass_in_order(c, 2, 3), 1);
    fake_drain(u);
    assert_int_equal(pass_in_order(c, 3, 2), 2); /* 1, the marker */
    fake_drain(t);
    assert_int_equal(fake_count(t, 3, 0), 0); /* (its own marker ended here) */
    assert_int_equal(home->nheld, 0);         /* 11 went in: all acknowledged */
    assert_int_equal(sn__relay_ackable(home), home->recv_seq);
    movers_release(2);
    assert_true(mover_wait_msgs(idx, 6));
    uint64_t want_local = 1, want_home = 10;
    for (int k = 0; k < 6; k++) { /* each sender's in the order sent */
        uint64_t v = mover_msg(idx, k);
        assert_int_equal(v, v < 10 ? want_local++ : want_home++);
    }
    assert_int_equal(want_local, 4);
    assert_int_equal(want_home, 13);
    assert_int_equal(atomic_load(&g_mv.steps_on[idx][3]), 0); /* (it was Ready on node 3, never ran) */
}

/* The same, but node 3 gives up on its offer before node 2's accept
 * arrives (it runs P again, and says so): the home's message that waited
 * at node 2 for the commit goes on to node 3 then, and P gets it there. */
static void test_held_while_on_its_way_undone(void **state)
{
    trio_t *c = *state;
    fake_node_t *h = c->n[1], *t = c->n[2], *u = c->n[3];
    uint64_t idx;
    sn_pid_t pid = offered_back(c, &idx);
    send_u64(fake_sched(h), pid, 11);
    fake_drain(h);
    assert_int_equal(pass_all(c, 1, 2), 1);
    fake_drain(t);
    assert_int_equal(fake_count(t, 3, SN_FRAME_SENDS), 1); /* 10 only: 11 waits at node 2 */
    fake_clock_advance(3500 * MS);                         /* (steal.c's OFFER_TIMEOUT_NS: 3 s) */
    sn__steal_tick(&u->r, fake_clock());
    assert_true(fake_here(fake_sched(u), pid));
    assert_int_equal(pass_in_order(c, 2, 3), 2); /* 10, the accept (too late) */
    assert_int_equal(fake_peer(t, 1)->nheld, 1);
    assert_true(fake_pass(u, t, SN_FRAME_STEAL_COMMIT, NULL)); /* the abort */
    assert_false(fake_here(fake_sched(t), pid));
    assert_int_equal(fake_peer(t, 1)->nheld, 0); /* (11 went on: this node answers for it now) */
    fake_drain(t);
    assert_int_equal(fake_count(t, 3, SN_FRAME_SENDS), 1); /* on to node 3 now */
    assert_int_equal(pass_in_order(c, 2, 3), 1);
    movers_release(3);
    assert_true(mover_wait_msgs(idx, 2));
    assert_int_equal(mover_msg(idx, 0), 10);
    assert_int_equal(mover_msg(idx, 1), 11);
    assert_int_equal(atomic_load(&g_mv.steps_on[idx][2]), 0);
}

/* The messages of node 2's sender that P's arrival flush held at node 2,
 * with 2 and 3 of test_back_where_its_sender_is, while the flush's marker
 * goes unanswered: a steal passes P over until its arrival settled
 * (sched/migrate.c: settling; moved on, the relay here would hold other
 * nodes' sends for it while its next node's flush may have to pass here:
 * a wait in a circle). 15 s on, the flush gives up: 2 and 3 go in, after
 * 1, and P has settled. */
static void test_not_moved_while_settling(void **state)
{
    trio_t *c = *state;
    fake_node_t *t = c->n[2], *u = c->n[3];
    uint64_t idx;
    sn_pid_t pid = offered_back(c, &idx);
    send_u64(fake_sched(t), pid, 1);
    fake_drain(t);
    assert_int_equal(pass_in_order(c, 2, 3), 3); /* 10, the accept, 1 */
    fake_drain(u);
    assert_true(fake_pass(u, t, SN_FRAME_STEAL_COMMIT, NULL));
    assert_true(fake_here(fake_sched(t), pid));
    for (uint64_t v = 2; v <= 3; v++)
        send_u64(fake_sched(t), pid, v);
    fake_drain(t); /* held: P settles behind its flush, whose marker goes unanswered */
    sn_frame_t f;
    assert_true(fake_take_decoded(t, 3, SN_FRAME_SENDS, &f));
    assert_int_equal(f.sends[0].kind, SN_WIRE_FLUSH);
    sn_frame_clear(&f);

    /* node 3 steals from node 2's six Ready: not P */
    for (uint64_t i = 6; i < 10; i++)
        (void)mover_spawn(fake_sched(t), i);
    sn_pid_t moved[4];
    atomic_store(&u->r.want_work, 1);
    size_t n = steal(c, 2, 3, moved);
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++)
        assert_false(sn_pid_eq(moved[i], pid));
    assert_true(fake_here(fake_sched(t), pid));
    assert_true(pass_in_order(c, 3, 2) >= 1); /* 1, behind the commit: in at once */

    fake_clock_advance(DOWN_RELEASE_NS + FLUSH_RETRY_NS);
    sn__loc_tick(&t->r, fake_clock());
    fake_drain(t);
    movers_release(2);
    assert_true(mover_wait_msgs(idx, 4));
    uint64_t want_local = 1;
    for (int k = 0; k < 4; k++) { /* 10 from the home; 1, 2, 3 from here, in order */
        uint64_t v = mover_msg(idx, k);
        if (v != 10)
            assert_int_equal(v, want_local++);
    }
    assert_int_equal(want_local, 4);
}

/* P, a mover of home node 1, moves 1 -> 2 -> 3 (node 3's news for the
 * home not passed: the home's route still goes to node 2); nodes 2 and 3
 * keep their one worker held, the home runs what it has left (nothing
 * Ready there: it can steal). Returns P. */
static sn_pid_t moved_twice(trio_t *c, uint64_t *idx)
{
    fake_node_t *h = c->n[1];
    movers_hold(fake_sched(h));
    movers_hold(fake_sched(c->n[2]));
    movers_hold(fake_sched(c->n[3]));
    sn_pid_t spawned[4], moved[4];
    for (uint64_t i = 0; i < 4; i++)
        spawned[i] = mover_spawn(fake_sched(h), i);
    assert_int_equal(steal(c, 1, 2, moved), 2);
    movers_release(1);
    atomic_store(&c->n[3]->r.want_work, 1);
    assert_int_equal(steal(c, 2, 3, moved), 1);
    sn_pid_t pid = moved[0];
    *idx = 0;
    while (!sn_pid_eq(spawned[*idx], pid))
        (*idx)++;
    assert_int_equal(fake_forward_of(fake_sched(h), pid), 2);
    for (int k = 0; k < 200; k++) { /* (the home's two ran) */
        sn_stats_t st;
        sn_sched_stats(fake_sched(h), &st);
        if (st.ready == 0 && st.idle_workers == 1)
            break;
        sleep_ms(5);
    }
    return pid;
}

/* Every frame on every link between the four nodes, each node's queue
 * drained first, until nothing moves. */
static void pass_everything(trio_t *c)
{
    int passed;
    do {
        passed = 0;
        for (uint32_t a = 1; a <= 4; a++) {
            fake_drain(c->n[a]);
            for (uint32_t b = 1; b <= 4; b++)
                passed += a != b ? pass_all(c, a, b) : 0;
        }
    } while (passed);
}

/* Four nodes. P (home node 1) moves 1 -> 2 -> 3; node 4's message 1 goes
 * to the home, which passes it on to node 2 (its forwarding entry) and
 * tells node 4 where P is; 1 stays on the link to node 2, and so does
 * node 4's flush marker behind it: node 2 is frozen, and the home holds
 * it down. Node 4 holds its 2. P comes back home from node 3 while the
 * home's forwards are still in node 2: the home's arrival flush goes down
 * that path, and waits. Node 4's marker, sent again, reaches the home,
 * where P now is: it must not be answered before the home's own flush
 * ends (answered, node 4 would send 2 straight to the home, and node 2,
 * resumed, would pass 1 on behind it). */
static void test_flush_waits_for_the_arrival_here(void **state)
{
    trio_t *c = *state;
    fake_node_t *h = c->n[1], *x = c->n[2], *y = c->n[3], *s = c->n[4];
    uint64_t idx;
    sn_pid_t moved[4], pid = moved_twice(c, &idx);

    /* 1: node 4 -> the home -> the link to node 2, where it stays */
    send_u64(fake_sched(s), pid, 1);
    fake_drain(s);
    assert_int_equal(pass_all(c, 4, 1), 1);
    fake_drain(h);
    assert_int_equal(fake_count(h, 2, SN_FRAME_SENDS), 1);
    assert_int_equal(pass_all(c, 1, 4), 1); /* the REDIRECT: P is on node 2 */
    /* 2 waits at node 4 behind its marker, which the home passes on to node 2 too */
    send_u64(fake_sched(s), pid, 2);
    fake_drain(s);
    assert_int_equal(pass_all(c, 4, 1), 1);
    fake_drain(h);
    assert_int_equal(fake_count(h, 2, SN_FRAME_SENDS), 2);
    /* node 2 is frozen past the down timeout: the home holds it down */
    peer_t *at2 = fake_peer(h, 2);
    atomic_store(&at2->down, 1);
    sn__relay_bounce_peer(&h->r, at2, SN_ENODEDOWN, false);

    /* P comes home from node 3 */
    for (uint64_t i = 4; i < 8; i++)
        (void)mover_spawn(fake_sched(y), i);
    atomic_store(&h->r.want_work, 1);
    size_t n = steal(c, 3, 1, moved);
    bool came = false;
    for (size_t i = 0; i < n; i++)
        came = came || sn_pid_eq(moved[i], pid);
    assert_true(came);
    fake_drain(h); /* its arrival flush: down the home's path to P, through node 2, which is down */
    /* node 4's marker, again, now reaches P's node */
    fake_clock_advance(FLUSH_RETRY_NS + 100 * MS);
    sn__loc_tick(&s->r, fake_clock());
    fake_drain(s);
    assert_int_equal(pass_all(c, 4, 1), 1);
    fake_drain(h);
    assert_int_equal(fake_count(h, 4, SN_FRAME_SENDS), 0); /* not answered yet */

    /* node 2 resumes: what the home sent it comes out, and the home's
     * marker (sent again) behind it: 2 -> 3 -> 1 */
    atomic_store(&at2->down, 0);
    sn__loc_peer_up(&h->r, 2);
    fake_drain(h);
    assert_true(pass_all(c, 1, 2) >= 3); /* 1, node 4's marker, the home's */
    fake_drain(x);
    assert_true(pass_all(c, 2, 3) >= 3);
    fake_drain(y);
    assert_true(pass_all(c, 3, 1) >= 3);
    fake_drain(h);
    /* the home's flush ended: node 4's marker is answered, 2 goes */
    assert_true(fake_count(h, 4, SN_FRAME_SENDS) >= 1);
    pass_everything(c);
    assert_true(mover_wait_msgs(idx, 2));
    assert_int_equal(mover_msg(idx, 0), 1);
    assert_int_equal(mover_msg(idx, 1), 2);
}

/* Four nodes. P (home node 1) moves 1 -> 2 -> 3, and the home learns
 * that it is on node 3: its cache (for its own senders) says node 3,
 * its forwarding entry (for what it passes on) still node 2. Node 4's
 * message 1 goes to the home, which passes it on to node 2, where it
 * stays (node 2 is frozen, and the home holds it down). P comes home from
 * node 3. Node 4's message 2, sent before node 4 heard where P is,
 * reaches the home now: it waits for the home's arrival flush (else it
 * goes in at once, ahead of 1). That flush goes down both old paths,
 * node 3's and node 2's: node 3 answers at once, node 2 only once it
 * resumes and passes 1 on (ended at node 3's answer, 2 goes in ahead of
 * 1 too). */
static void test_arrival_flushes_both_paths(void **state)
{
    trio_t *c = *state;
    fake_node_t *h = c->n[1], *x = c->n[2], *y = c->n[3], *s = c->n[4];
    uint64_t idx;
    sn_pid_t moved[4], pid = moved_twice(c, &idx);
    pass_everything(c); /* node 3's news: the home's cache follows P to node 3 */

    /* 1: node 4 -> the home -> the link to node 2, where it stays */
    send_u64(fake_sched(s), pid, 1);
    fake_drain(s);
    assert_int_equal(pass_all(c, 4, 1), 1);
    fake_drain(h);
    assert_int_equal(fake_count(h, 2, SN_FRAME_SENDS), 1);
    peer_t *at2 = fake_peer(h, 2);
    atomic_store(&at2->down, 1);
    sn__relay_bounce_peer(&h->r, at2, SN_ENODEDOWN, false);

    /* P comes home from node 3 */
    for (uint64_t i = 4; i < 8; i++)
        (void)mover_spawn(fake_sched(y), i);
    atomic_store(&h->r.want_work, 1);
    size_t n = steal(c, 3, 1, moved);
    bool came = false;
    for (size_t i = 0; i < n; i++)
        came = came || sn_pid_eq(moved[i], pid);
    assert_true(came);
    fake_drain(h);

    /* 2 reaches the home (node 4 has not heard of the REDIRECT yet) */
    send_u64(fake_sched(s), pid, 2);
    fake_drain(s);
    assert_int_equal(pass_all(c, 4, 1), 1);
    fake_drain(h);
    sleep_ms(20);
    assert_int_equal(atomic_load(&g_mv.nmsgs[idx]), 0);
    /* while 2 waits, the home does not acknowledge the frame it came in:
     * killed meanwhile, it has not confirmed 2 */
    peer_t *from4 = fake_peer(h, 4);
    assert_int_equal(from4->nheld, 1);

    /* the path of the home's own senders, through node 3, answers */
    assert_true(pass_all(c, 1, 3) >= 1);
    fake_drain(y);
    assert_true(pass_all(c, 3, 1) >= 1);
    fake_drain(h);
    sleep_ms(20);
    assert_int_equal(atomic_load(&g_mv.nmsgs[idx]), 0); /* node 2's path is not flushed */

    /* node 2 resumes: 1 comes out, the home's marker behind it */
    atomic_store(&at2->down, 0);
    sn__loc_peer_up(&h->r, 2);
    pass_everything(c);
    (void)x;
    assert_true(mover_wait_msgs(idx, 2));
    assert_int_equal(mover_msg(idx, 0), 1);
    assert_int_equal(mover_msg(idx, 1), 2);
    assert_int_equal(from4->nheld, 0);
}

/* A process of the home (node 1) went 1 -> 3 -> 4 -> 2: the home's
 * forwarding entry still leads to node 3 (its first move), its record to
 * node 2 (the new owner's notice). Node 4's run ends: node 3 drops its
 * entry and tells the home (a REDIRECT to nowhere, sn__loc_lost); the
 * home's forward leads to node 2 then, not back to node 3, which sends
 * what reaches it home (the two would pass it round until the hop
 * bound). */
static void test_lost_path_repointed(void **state)
{
    trio_t *c = *state;
    fake_node_t *h = c->n[1];
    sn_pid_t p = {1, 777};
    assert_int_equal(sn__migrate_repoint(fake_sched(h), p, 3), 0);
    sn__loc_redirect(&h->r, p, 2, 3); /* (the notice of move 3, to node 2) */
    assert_int_equal(sn__loc_last_seen(&h->r, p), 2);
    assert_int_equal(sn__migrate_forward_of(fake_sched(h), p), 3);
    sn__loc_lost(&h->r, p, 3);
    assert_int_equal(sn__migrate_forward_of(fake_sched(h), p), 2);
    assert_int_equal(sn__loc_last_seen(&h->r, p), 2);
}

/* Our own monitor request, come back from another node: it goes on from
 * here only if its record is still here (taken then); with none it was
 * answered already (the request monitor_again sent home, come back after
 * the first one's DOWN) or demonitored, and it is dropped. */
static void test_own_request_returned(void **state)
{
    trio_t *c = *state;
    fake_node_t *w = c->n[2];
    sn_pid_t watcher = {2, 5}, p = {1, 40};
    peer_t *at1 = fake_peer(w, 1);
    sn_wire_send_t req = {.to = p, .from = watcher, .tag = 11, .kind = SN_RELAY_MONITOR};
    assert_false(sn__watch_returned(&w->r, &req));
    assert_true(sn__watch(at1, p, watcher, 11, true));
    assert_true(sn__watch_returned(&w->r, &req));
    assert_int_equal(at1->nwatch, 0);
    assert_false(sn__watch_returned(&w->r, &req));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_redirect_and_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_retry_and_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_home_follows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_back_where_its_sender_is, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_while_on_its_way_undone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_moved_while_settling, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_waits_for_the_arrival_here, setup4, teardown),
        cmocka_unit_test_setup_teardown(test_arrival_flushes_both_paths, setup4, teardown),
        cmocka_unit_test_setup_teardown(test_unconfirmed_monitor_goes_home, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_request_returned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_path_repointed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

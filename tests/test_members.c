/* test_members.c - relay/members.c (with swim.c): joining and failure
 * detection, on a fake clock. Node 1 runs relay/'s logic files over the
 * test double of relay.c (tests/relay_fake.c); its peers are played by the
 * test, which reads every frame node 1 sends and answers probes in their
 * name, or stops answering for one of them.
 *
 * A Hello gets a Welcome and makes a member (and the joiner, a second
 * node, takes the Welcome); a Hello from another cluster or with node 1's
 * own id is refused. A member that stops answering is probed, then probed
 * through others, then suspected (broadcast) and, when the suspicion
 * times out on the fake clock, declared down (broadcast, and what waited
 * for it goes back); one that refutes (a higher version) stays up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay_fake.h"
#include "members.h"
#include "swim.h"
#include "testutil.h"

#define MS UINT64_C(1000000)
#define PERIOD_NS (200 * MS) /* hb_ms */
#define PEERS 3              /* simulated members 2, 3, 4 */

static uint64_t inc_of(uint32_t node)
{
    return 200 + node;
}

static void member(sn_wire_member_t *m, uint32_t node, int state, uint64_t version)
{
    *m = (sn_wire_member_t){
        .node = node, .state = state, .incarnation = inc_of(node), .first_serial = 1, .version = version};
    snprintf(m->endpoint, sizeof m->endpoint, "tcp://127.0.0.1:%u", 7000u + node);
}

/* Node 1 and its simulated members 2..PEERS+1. */
static int setup(void **state)
{
    fake_node_t *n = fake_node_new(1, 1, NULL, 0, true, false);
    for (uint32_t k = 2; k <= PEERS + 1; k++) {
        sn_wire_member_t m;
        member(&m, k, SN_MEMBER_UP, 0);
        assert_non_null(sn__members_upsert(&n->r, &m, "test"));
    }
    *state = n;
    return 0;
}

static int teardown(void **state)
{
    fake_node_t *n = *state;
    fake_node_destroy(&n);
    return 0;
}

/* ------------------------------------------------- the simulated members */

/* What node 1 sent, as the simulated members saw it. */
typedef struct seen {
    int pings[8];                  /* PINGs to each node */
    int ping_reqs[8];              /* PING_REQs about each target */
    int req_helpers[8];            /* PING_REQs each helper got */
    int bcast[8][4][8];            /* [about][state][to]: one-member Members frames (broadcasts) */
    uint64_t first_bcast_ns[8][4]; /* [about][state]: the first one's time */
} seen_t;

static bool g_alive[8];

static void answer(fake_node_t *n, uint32_t from, const sn_wire_probe_t *probe)
{
    sn_wire_stats_t row = {.node = from, .state = SN_MEMBER_UP};
    snprintf(row.endpoint, sizeof row.endpoint, "tcp://127.0.0.1:%u", 7000u + from);
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_probe(from, inc_of(from), probe, &row, "test", NULL, 0, &buf, &len), 0);
    fake_inbound(n, buf, len, NULL, 0, false);
    free(buf);
}

/* Reads everything node 1 sent; the live members answer its probes (and
 * its requests to probe another live one). */
static void members_answer(fake_node_t *n, seen_t *sn)
{
    fake_frame_t fr;
    while (fake_take(n, 0, 0, &fr)) {
        sn_frame_t f;
        fake_decode(&fr, &f);
        uint32_t to = fr.to;
        free(fr.buf);
        assert_true(to >= 2 && to <= PEERS + 1);
        if (f.kind == SN_FRAME_MEMBERS && f.nmembers == 1) {
            const sn_wire_member_t *m = &f.members[0];
            if (m->node < 8 && m->state >= 0 && m->state < 4) {
                if (!sn->first_bcast_ns[m->node][m->state])
                    sn->first_bcast_ns[m->node][m->state] = fake_clock();
                sn->bcast[m->node][m->state][to]++;
            }
        } else if (f.kind == SN_FRAME_HEARTBEAT && f.probe.kind == SN_SWIM_PING) {
            sn->pings[to]++;
            if (g_alive[to])
                answer(n, to, &(sn_wire_probe_t){SN_SWIM_ACK, f.probe.seq, to, 0});
        } else if (f.kind == SN_FRAME_HEARTBEAT && f.probe.kind == SN_SWIM_PING_REQ) {
            uint32_t target = f.probe.target;
            assert_true(target < 8);
            sn->ping_reqs[target]++;
            sn->req_helpers[to]++;
            if (g_alive[to] && g_alive[target]) /* the helper's probe answered: passed on */
                answer(n, to, &(sn_wire_probe_t){SN_SWIM_ACK, f.probe.seq, target, 0});
        }
        sn_frame_clear(&f);
    }
}

/* Runs node 1's ticks on the fake clock up to `until`, the members
 * answering; stops early when stop(n) says so. */
static void run(fake_node_t *n, uint64_t until, seen_t *sn, bool (*stop)(fake_node_t *))
{
    while (fake_clock() < until) {
        uint64_t next = sn__members_next_ns(&n->r);
        if (next > until)
            next = until;
        if (next > fake_clock())
            fake_clock_set(next);
        sn__members_tick(&n->r);
        members_answer(n, sn);
        if (stop && stop(n))
            return;
    }
}

static bool four_down(fake_node_t *n)
{
    return atomic_load(&fake_peer(n, 4)->down) != 0;
}
static bool four_suspect(fake_node_t *n)
{
    return sn__members_state(&n->r, fake_peer(n, 4)) == SN_MEMBER_SUSPECT;
}

/* All answer for 30 periods (past the start-up, when no one is accused):
 * every member is probed, none suspected. */
static void warm_up(fake_node_t *n, seen_t *sn)
{
    for (uint32_t k = 2; k <= PEERS + 1; k++)
        g_alive[k] = true;
    run(n, fake_clock() + 30 * PERIOD_NS, sn, NULL);
    for (uint32_t k = 2; k <= PEERS + 1; k++) {
        assert_true(sn->pings[k] >= 5);
        assert_int_equal(sn__members_state(&n->r, fake_peer(n, k)), SN_MEMBER_UP);
        assert_int_equal(sn->bcast[k][SN_MEMBER_SUSPECT][2] + sn->bcast[k][SN_MEMBER_DOWN][2], 0);
    }
    assert_int_equal(n->nbounces, 0);
    memset(sn, 0, sizeof *sn);
}

/* ---------------------------------------------------------------- joins */

static void hello(fake_node_t *n, fake_node_t *joiner, const char *cluster, uint32_t as)
{
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_hello(as, joiner->r.incarnation, joiner->r.advertise, cluster, 1, "", 0,
                                           joiner->r.types, joiner->r.ntypes, &buf, &len),
                     0);
    static const unsigned char ident[] = "joiner";
    fake_inbound(n, buf, len, ident, sizeof ident - 1, false);
    free(buf);
}

/* A Hello from node 5: it is a member, it gets the view (Welcome, on the
 * ROUTER to the connection it came on), every member hears of it; node
 * 5, given that Welcome, has joined and knows every member. */
static void test_join(void **state)
{
    fake_node_t *n = *state;
    fake_node_t *j = fake_node_new(5, 1, NULL, 0, false, false);
    assert_int_equal(atomic_load(&j->r.joined), 0);
    hello(n, j, "test", 5);

    peer_t *p = fake_peer(n, 5);
    assert_non_null(p);
    assert_int_equal(p->state, SN_MEMBER_UP);
    assert_int_equal(atomic_load(&p->down), 0);
    assert_string_equal(p->endpoint, j->r.advertise);
    assert_int_equal(p->incarnation, j->r.incarnation);
    assert_int_equal(sn_swim_state(n->r.swim, 5, NULL, NULL), SN_SWIM_ALIVE);

    /* the Welcome, on the ROUTER, to the joiner's connection */
    fake_frame_t fr;
    assert_true(fake_take(n, 0, SN_FRAME_WELCOME, &fr));
    assert_int_equal(fr.how, FAKE_ANSWER);
    assert_int_equal(fr.ident_len, 6);
    assert_memory_equal(fr.ident, "joiner", 6);
    sn_frame_t f;
    fake_decode(&fr, &f);
    assert_int_equal(f.node, 1);
    assert_int_equal(f.nmembers, PEERS + 2); /* node 1, its members, the joiner */
    assert_int_equal(f.members[0].node, 1);
    bool has[8] = {false};
    for (size_t i = 0; i < f.nmembers; i++) {
        assert_true(f.members[i].node < 8);
        has[f.members[i].node] = true;
        assert_int_equal(f.members[i].state, SN_MEMBER_UP);
    }
    for (uint32_t k = 1; k <= PEERS + 2; k++)
        assert_true(has[k]);
    sn_frame_clear(&f);
    /* every member gets its row (the joiner too, on its new connection) */
    for (uint32_t k = 2; k <= PEERS + 2; k++) {
        assert_true(fake_take_decoded(n, k, SN_FRAME_MEMBERS, &f));
        assert_int_equal(f.nmembers, 1);
        assert_int_equal(f.members[0].node, 5);
        assert_string_equal(f.members[0].endpoint, j->r.advertise);
        sn_frame_clear(&f);
    }
    assert_int_equal(fake_count(n, 0, 0), 0);
    assert_int_equal(n->bad, 0);

    /* the joiner takes the Welcome (on its seed's connection) */
    fake_inbound(j, fr.buf, fr.len, NULL, 0, true);
    free(fr.buf);
    assert_int_equal(atomic_load(&j->r.joined), 1);
    for (uint32_t k = 1; k <= PEERS + 1; k++) {
        peer_t *q = fake_peer(j, k);
        assert_non_null(q);
        assert_int_equal(q->state, SN_MEMBER_UP);
    }
    assert_null(fake_peer(j, 5));
    assert_int_equal(j->bad, 0);

    /* a second Hello of the same run (its first answer was lost) is
     * welcomed again, the member not added twice */
    size_t np = atomic_load(&n->r.npeers);
    hello(n, j, "test", 5);
    assert_int_equal(atomic_load(&n->r.npeers), np);
    assert_int_equal(fake_count(n, 0, SN_FRAME_WELCOME), 1);
    fake_node_destroy(&j);
}

/* A Hello from another cluster, or in node 1's own name, is refused with
 * why; a joiner takes the refusal as its answer. */
static void test_join_refused(void **state)
{
    fake_node_t *n = *state;
    fake_node_t *j = fake_node_new(6, 1, NULL, 0, false, false);
    size_t np = atomic_load(&n->r.npeers);
    hello(n, j, "other", 6);
    assert_null(fake_peer(n, 6));
    assert_int_equal(atomic_load(&n->r.npeers), np);
    sn_frame_t f;
    assert_true(fake_peek(n, 0, SN_FRAME_ERROR, &f));
    assert_int_equal(f.code, SN_EREFUSED);
    assert_non_null(strstr(f.reason, "cluster 'other'"));
    sn_frame_clear(&f);
    assert_int_equal(fake_count(n, 0, SN_FRAME_WELCOME), 0);
    assert_int_equal(fake_count(n, 2, 0), 0); /* nobody hears of it */
    assert_true(fake_pass(n, j, SN_FRAME_ERROR, NULL));
    assert_int_equal(atomic_load(&j->r.joined), -1);
    assert_non_null(strstr(j->r.join_error, "refused"));
    assert_int_equal(j->r.join_code, SN_EREFUSED); /* not a taken id: a joiner with a random id gives up */

    hello(n, j, "test", 1); /* node 1's own id */
    assert_true(fake_take_decoded(n, 0, SN_FRAME_ERROR, &f));
    assert_non_null(strstr(f.reason, "is this node's"));
    assert_int_equal(f.code, SN_EEXIST); /* a taken id: a joiner with a random id picks another */
    sn_frame_clear(&f);
    assert_int_equal(atomic_load(&n->r.npeers), np);
    assert_int_equal(fake_count(n, 0, 0), 0);
    fake_node_destroy(&j);
}

/* ---------------------------------------------------- failure detection */

/* Node 4 stops answering: probed, probed through the others, suspected
 * (told to everyone), and down when the suspicion runs out on the fake
 * clock, not before; told to everyone, and what waited for it goes back. */
static void test_suspect_then_down(void **state)
{
    fake_node_t *n = *state;
    seen_t sn = {0};
    warm_up(n, &sn);
    g_alive[4] = false;
    uint64_t t0 = fake_clock();
    run(n, t0 + 10 * PERIOD_NS, &sn, four_suspect);
    assert_int_equal(sn__members_state(&n->r, fake_peer(n, 4)), SN_MEMBER_SUSPECT);
    uint64_t ts = fake_clock();
    assert_true(sn.pings[4] >= 1);          /* probed */
    assert_true(sn.ping_reqs[4] >= 1);      /* then through others */
    assert_int_equal(sn.req_helpers[4], 0); /* (never asking it) */
    assert_true(sn.req_helpers[2] + sn.req_helpers[3] >= 1);
    assert_true(ts - t0 <= 3 * PERIOD_NS); /* within a period or two */
    for (uint32_t k = 2; k <= 4; k++)      /* the suspicion, to every member */
        assert_int_equal(sn.bcast[4][SN_MEMBER_SUSPECT][k], 1);
    assert_int_equal(atomic_load(&fake_peer(n, 4)->down), 0); /* suspect is still up */
    assert_int_equal(n->nbounces, 0);

    /* a second later: still only suspect (the suspicion lasts at least
     * suspect_min x (1 + health) = 1 s, here 3 s: nobody confirms it) */
    run(n, ts + 900 * MS, &sn, four_down);
    assert_int_equal(sn__members_state(&n->r, fake_peer(n, 4)), SN_MEMBER_SUSPECT);
    assert_int_equal(n->nbounces, 0);
    run(n, ts + 20 * 1000 * MS, &sn, four_down);
    peer_t *p = fake_peer(n, 4);
    assert_int_equal(atomic_load(&p->down), 1);
    assert_int_equal(p->state, SN_MEMBER_DOWN);
    uint64_t td = fake_clock();
    assert_in_range(td - ts, 1000 * MS, 3000 * MS + PERIOD_NS);
    assert_int_equal(sn_swim_state(n->r.swim, 4, NULL, NULL), SN_SWIM_DEAD);
    /* everything unconfirmed that was sent to it goes back: nodedown */
    assert_int_equal(n->nbounces, 1);
    assert_int_equal(n->bounces[0].node, 4);
    assert_int_equal(n->bounces[0].error, SN_ENODEDOWN);
    assert_false(n->bounces[0].gone);
    /* its death, to the members still up (not to it) */
    assert_int_equal(sn.bcast[4][SN_MEMBER_DOWN][2], 1);
    assert_int_equal(sn.bcast[4][SN_MEMBER_DOWN][3], 1);
    assert_int_equal(sn.bcast[4][SN_MEMBER_DOWN][4], 0);
    assert_int_equal(sn.first_bcast_ns[4][SN_MEMBER_DOWN], td);
    /* the others are fine, and it is probed no more */
    run(n, td + 10 * PERIOD_NS, &sn, NULL);
    for (uint32_t k = 2; k <= 3; k++)
        assert_int_equal(sn__members_state(&n->r, fake_peer(n, k)), SN_MEMBER_UP);
    int pings = sn.pings[4];
    run(n, fake_clock() + 10 * PERIOD_NS, &sn, NULL);
    assert_int_equal(sn.pings[4], pings);
    assert_int_equal(n->nbounces, 1);
}

/* Node 4's connection closes (its process ended: relay.c watches each
 * member's connection): it is suspect at that instant, before its turn in
 * the probe order, told to everyone, and down when the suspicion runs out;
 * a closing heard again changes nothing. */
static void test_closed_suspects_at_once(void **state)
{
    fake_node_t *n = *state;
    seen_t sn = {0};
    warm_up(n, &sn);
    g_alive[4] = false;
    uint64_t t0 = fake_clock();
    peer_t *p = fake_peer(n, 4);
    sn__members_closed(&n->r, p);
    assert_int_equal(sn__members_state(&n->r, p), SN_MEMBER_SUSPECT);
    assert_int_equal(sn.pings[4], 0); /* (no probe of it came first) */
    sn__members_closed(&n->r, p);
    assert_int_equal(sn__members_state(&n->r, p), SN_MEMBER_SUSPECT);
    run(n, t0 + 20 * 1000 * MS, &sn, four_down);
    assert_int_equal(p->state, SN_MEMBER_DOWN);
    assert_in_range(fake_clock() - t0, 1000 * MS, 3000 * MS + PERIOD_NS);
    for (uint32_t k = 2; k <= 3; k++)
        assert_int_equal(sn__members_state(&n->r, fake_peer(n, k)), SN_MEMBER_UP);
}

/* Node 4 is suspected, then refutes (its broadcast of a higher version, as
 * a member does when told it is suspect): it is up at once, and stays up
 * past the suspicion's end. */
static void test_refutation(void **state)
{
    fake_node_t *n = *state;
    seen_t sn = {0};
    warm_up(n, &sn);
    g_alive[4] = false;
    run(n, fake_clock() + 10 * PERIOD_NS, &sn, four_suspect);
    assert_int_equal(sn__members_state(&n->r, fake_peer(n, 4)), SN_MEMBER_SUSPECT);
    uint64_t ts = fake_clock(), run4, version;
    assert_int_equal(sn_swim_state(n->r.swim, 4, &run4, &version), SN_SWIM_SUSPECT);
    assert_int_equal(run4, inc_of(4));

    /* the same version does not refute it */
    sn_wire_member_t m;
    void *buf;
    size_t len;
    member(&m, 4, SN_MEMBER_UP, version);
    assert_int_equal(sn_codec_encode_members(4, inc_of(4), 0, &m, 1, &buf, &len), 0);
    fake_inbound(n, buf, len, NULL, 0, false);
    free(buf);
    assert_int_equal(sn__members_state(&n->r, fake_peer(n, 4)), SN_MEMBER_SUSPECT);
    /* a higher one does */
    member(&m, 4, SN_MEMBER_UP, version + 1);
    assert_int_equal(sn_codec_encode_members(4, inc_of(4), 0, &m, 1, &buf, &len), 0);
    fake_inbound(n, buf, len, NULL, 0, false);
    free(buf);
    assert_int_equal(sn__members_state(&n->r, fake_peer(n, 4)), SN_MEMBER_UP);
    assert_int_equal(sn_swim_state(n->r.swim, 4, NULL, &version), SN_SWIM_ALIVE);
    g_alive[4] = true;

    run(n, ts + 10 * 1000 * MS, &sn, four_down);
    assert_int_equal(atomic_load(&fake_peer(n, 4)->down), 0);
    assert_int_equal(fake_peer(n, 4)->state, SN_MEMBER_UP);
    assert_int_equal(sn__members_state(&n->r, fake_peer(n, 4)), SN_MEMBER_UP);
    assert_int_equal(n->nbounces, 0);
    assert_int_equal(sn.bcast[4][SN_MEMBER_DOWN][2] + sn.bcast[4][SN_MEMBER_DOWN][3], 0);
    assert_true(sn.pings[4] > 0); /* probed again, and answering */
}

/* A member down for SN_FORGET_AFTER_MS is forgotten: its row goes, a
 * member's gossip of it as dead brings it back no more, and a new member
 * takes its slot (members.c: forget_old; the table does not grow with
 * churn). Its id taken again is a new member of its own run. */
static void test_forgotten(void **state)
{
    fake_node_t *n = *state;
    seen_t sn = {0};
    warm_up(n, &sn);
    g_alive[4] = false;
    run(n, fake_clock() + 20 * 1000 * MS, &sn, NULL);
    peer_t *p = fake_peer(n, 4);
    assert_non_null(p);
    assert_int_equal(p->state, SN_MEMBER_DOWN);
    size_t slots = atomic_load(&n->r.npeers);
    uint32_t slot = p->slot;
    /* a minute short of the time: still there */
    run(n, fake_clock() + (uint64_t)(SN_FORGET_AFTER_MS - 60000) * MS, &sn, NULL);
    assert_non_null(fake_peer(n, 4));
    run(n, fake_clock() + 62000 * MS, &sn, NULL);
    assert_null(fake_peer(n, 4));
    assert_int_equal(sn_swim_state(n->r.swim, 4, NULL, NULL), -1);
    /* gossip of it, dead: not added */
    sn_wire_member_t m;
    member(&m, 4, SN_MEMBER_DOWN, 9);
    assert_null(sn__members_upsert(&n->r, &m, "test"));
    assert_null(fake_peer(n, 4));
    /* a new member takes the slot */
    member(&m, 9, SN_MEMBER_UP, 0);
    peer_t *q = sn__members_upsert(&n->r, &m, "test");
    assert_non_null(q);
    assert_int_equal(q->slot, slot);
    assert_int_equal(atomic_load(&n->r.npeers), slots);
    /* id 4 again, a new run: a member of its own */
    member(&m, 4, SN_MEMBER_UP, 0);
    m.incarnation = inc_of(4) + 1000;
    p = sn__members_upsert(&n->r, &m, "test");
    assert_non_null(p);
    assert_int_equal(p->incarnation, inc_of(4) + 1000);
    assert_int_equal(p->state, SN_MEMBER_UP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_join, setup, teardown),
        cmocka_unit_test_setup_teardown(test_join_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_suspect_then_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closed_suspects_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refutation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forgotten, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

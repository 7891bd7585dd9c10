/* test_awaited.c - relay/awaited.c: the spawning node's records of its
 * awaited children away from it, driven directly on fake nodes
 * (tests/relay_fake.c): node 1 holds a real parent process ("catcher",
 * which records every completion and DOWN it gets), nodes 2 and 3 are
 * members of it. Each test moves a child (by the calls steal.c and
 * inbound.c make) and takes a node down, and checks the parent gets
 * exactly one outcome: nodedown for a child held by the node that went
 * down, nothing for one that came back or whose result came first, and a
 * late result dropped; and that a node passing a child on tells the
 * spawning node (an AWAITED send).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relay_fake.h"
#include "awaited.h"

#define MAX_GOT 16

static struct {
    atomic_int n; /* events recorded (release: after the record) */
    struct got {
        int type, error;
        uint64_t tag;
        sn_pid_t from;
    } ev[MAX_GOT];
} g;

static int catcher_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return 0;
}

static void catcher_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) { /* (the teardown's shutdown) */
            sn_out_done(out, NULL);
            return;
        }
        int k = atomic_load_explicit(&g.n, memory_order_relaxed);
        if (k >= MAX_GOT)
            return;
        g.ev[k] = (struct got){ev[i].type, ev[i].error, ev[i].tag, ev[i].from};
        atomic_store_explicit(&g.n, k + 1, memory_order_release);
    }
}

static const sn_type_t catcher_type = {"catcher", 1, 8, catcher_init, catcher_step, NULL, NULL, NULL};
static const sn_type_t *const types[] = {&catcher_type};

typedef struct world {
    fake_node_t *n[4]; /* 1, 2, 3 */
    sn_pid_t parent;
} world_t;

static int setup(void **state)
{
    atomic_store(&g.n, 0);
    world_t *w = calloc(1, sizeof *w);
    assert_non_null(w);
    for (uint32_t i = 1; i <= 3; i++)
        w->n[i] = fake_node_new(i, 1, types, 1, true, false);
    fake_link(w->n[1], w->n[2]);
    fake_link(w->n[1], w->n[3]);
    fake_link(w->n[2], w->n[3]);
    assert_int_equal(sn_spawn(fake_sched(w->n[1]), "catcher", "run", NULL, NULL, NULL, &w->parent), 0);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    world_t *w = *state;
    for (int i = 1; i <= 3; i++)
        fake_node_destroy(&w->n[i]);
    free(w);
    return 0;
}

/* Waits (up to 2 s) for the parent to have recorded `want` events; then
 * 50 ms more, to see that no more come. */
static void expect_events(int want)
{
    for (int i = 0; i < 2000 && atomic_load_explicit(&g.n, memory_order_acquire) < want; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    assert_int_equal(atomic_load_explicit(&g.n, memory_order_acquire), want);
}

static sn_migrant_t child(world_t *w, uint64_t serial, int awaited, uint64_t tag, uint32_t moves)
{
    return (sn_migrant_t){.pid = {1, serial},
                          .parent = w->parent,
                          .awaited = (uint8_t)awaited,
                          .await_tag = tag,
                          .await_node = 1,
                          .moves = moves};
}

static void notice(fake_node_t *n, sn_pid_t kid, sn_pid_t parent, uint32_t holder, uint32_t moves)
{
    sn_wire_send_t s = {.to = kid, .from = parent, .tag = holder, .kind = SN_WIRE_AWAITED, .error = (int)moves};
    sn__await_notice(&n->r, &s);
}

/* An awaited child handed to 2, then (2 tells us) to 3: 2 going down
 * says nothing, 3 going down completes the await with nodedown, once;
 * its result coming after all is dropped. An older notice changes
 * nothing. */
static void test_follows_and_fires(void **state)
{
    world_t *w = *state;
    sn_relay_t *r = &w->n[1]->r;
    sn_migrant_t m = child(w, 1000, 1, 7, 1);
    sn__await_departed(r, &m, 2);
    notice(w->n[1], m.pid, w->parent, 3, 2);
    notice(w->n[1], m.pid, w->parent, 2, 1); /* (the older move's news, late) */
    sn__await_peer_down(r, 2, false);
    expect_events(0);
    sn__await_peer_down(r, 3, false);
    expect_events(1);
    assert_int_equal(g.ev[0].type, SN_EV_YIELD_COMPLETE);
    assert_int_equal(g.ev[0].error, SN_ENODEDOWN);
    assert_int_equal(g.ev[0].tag, 7);
    assert_true(sn_pid_eq(g.ev[0].from, m.pid));
    assert_true(sn__await_fired(r, m.pid));
    sn__await_peer_down(r, 3, false); /* (down again: nothing more) */
    expect_events(1);
    assert_true(sn__await_outcome(r, m.pid));  /* the real result: dropped */
    assert_false(sn__await_outcome(r, m.pid)); /* (the record is gone) */
}

/* A monitored child: its DOWN comes first (the record goes), so its
 * node going down later says nothing; another one held by a node that
 * goes down gets the DOWN with the spawn's tag and nodedown, and the
 * end of that node's run drops the tombstone. */
static void test_monitor_kind(void **state)
{
    world_t *w = *state;
    sn_relay_t *r = &w->n[1]->r;
    sn_migrant_t a = child(w, 2000, 2, 9, 1), b = child(w, 2001, 2, 10, 1);
    sn__await_departed(r, &a, 2);
    sn__await_departed(r, &b, 2);
    assert_false(sn__await_outcome(r, a.pid)); /* a's DOWN: delivered by the caller */
    sn__await_peer_down(r, 2, false);
    expect_events(1);
    assert_int_equal(g.ev[0].type, SN_EV_DOWN);
    assert_int_equal(g.ev[0].error, SN_ENODEDOWN);
    assert_int_equal(g.ev[0].tag, 10);
    assert_true(sn_pid_eq(g.ev[0].from, b.pid));
    sn__await_peer_down(r, 2, true); /* its run ended */
    expect_events(1);
    assert_false(sn__await_fired(r, b.pid));
}

/* A child that came back to its parent's node is local again: its old
 * holder going down says nothing. A fired one coming back is marked (it
 * is installed unawaited). */
static void test_came_back(void **state)
{
    world_t *w = *state;
    sn_relay_t *r = &w->n[1]->r;
    sn_migrant_t m = child(w, 3000, 1, 11, 1);
    sn__await_departed(r, &m, 2);
    sn__await_arrived(r, m.pid);
    sn__await_peer_down(r, 2, false);
    expect_events(0);
    assert_false(sn__await_fired(r, m.pid));
    notice(w->n[1], m.pid, w->parent, 3, 2); /* (news of a child with no record: old news) */
    sn__await_peer_down(r, 3, false);
    expect_events(0);
}

/* A child that moves to a node that is down by the time the news comes:
 * nodedown at once. A parent that is not here gets nothing. */
static void test_moved_to_a_down_node(void **state)
{
    world_t *w = *state;
    sn_relay_t *r = &w->n[1]->r;
    sn_migrant_t m = child(w, 4000, 1, 12, 1);
    sn__await_departed(r, &m, 2);
    atomic_store(&fake_peer(w->n[1], 3)->down, true);
    notice(w->n[1], m.pid, w->parent, 3, 2);
    expect_events(1);
    assert_int_equal(g.ev[0].tag, 12);
    assert_int_equal(g.ev[0].error, SN_ENODEDOWN);
    sn_migrant_t orphan = child(w, 4001, 1, 13, 1);
    orphan.parent = (sn_pid_t){1, w->parent.serial + 1000};
    sn__await_departed(r, &orphan, 2);
    sn__await_peer_down(r, 2, false);
    expect_events(1);
}

/* Node 2, passing on a child spawned on node 1 to node 3, tells node 1
 * (an AWAITED send: `tag` the holder, `error` the move); handing it back
 * to node 1 itself, or a child not awaited, tells no one. */
static void test_passing_on_tells(void **state)
{
    world_t *w = *state;
    sn_relay_t *r2 = &w->n[2]->r;
    sn_migrant_t m = child(w, 5000, 2, 14, 2);
    sn__await_departed(r2, &m, 3);
    fake_drain(w->n[2]);
    sn_frame_t f;
    assert_true(fake_take_decoded(w->n[2], 1, SN_FRAME_SENDS, &f));
    assert_int_equal(f.nsends, 1);
    assert_int_equal(f.sends[0].kind, SN_WIRE_AWAITED);
    assert_true(sn_pid_eq(f.sends[0].to, m.pid));
    assert_true(sn_pid_eq(f.sends[0].from, w->parent));
    assert_int_equal(f.sends[0].tag, 3);
    assert_int_equal(f.sends[0].error, 2);
    sn_frame_clear(&f);
    sn__await_departed(r2, &m, 1);
    m.awaited = 0;
    sn__await_departed(r2, &m, 3);
    fake_drain(w->n[2]);
    assert_int_equal(fake_count(w->n[2], 0, SN_FRAME_SENDS), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_follows_and_fires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_monitor_kind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_came_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_moved_to_a_down_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_passing_on_tells, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_migrate.c - the scheduler's half of moving processes between nodes,
 * with two schedulers (nodes 1 and 2) in one process and the test thread
 * playing the relay: take Ready processes from node 1 while its worker runs
 * the rest, send them messages while they are frozen, commit them to node
 * 2 (with the events they had queued) or revert them, and check that every
 * process finishes exactly once, on one node, with every message it was
 * sent. Also: what cannot move is never taken (no marshal, pending yields
 * other than sleeps, monitors), a PID's node is part of its identity in
 * the table, and a
 * child spawned with SN_YIELD_MONITOR that moves before its first step
 * still gets a first step with no events there, and its DOWN reaches the
 * parent on the node it left. An Idle process is frozen by PID
 * (sn__migrate_freeze, for migrate and drain), moves with what was sent
 * to it meanwhile, and is not stepped there until an event comes. A
 * sleeping process moves with the time its sleep has left: it wakes once,
 * on the new node, when due, never on the old one (also with its timer
 * due while it is frozen), and its monitors get one DOWN each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

#define N 400
#define SLICES 400 /* steps of a slicer before it finishes */
#define MSGS 3     /* messages the test sends each frozen process */

static sn_sched_t *g_node[3];

/* ------------------------------------------------------ type "slicer" */
/* Counts its steps (CONTINUE each time) and the messages it gets; finishes
 * after SLICES steps, recording where and with what. */
typedef struct slicer {
    uint64_t index, steps, msgs;
} slicer_t;

static struct {
    atomic_int finished_on[3]; /* per node */
    atomic_int done[N];        /* per process: how many times it finished */
    atomic_long msgs;          /* messages counted at finish */
    atomic_int closed;
} g;

static int slicer_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    slicer_t *s = state;
    return sn_payload_get_u64(*input, &s->index) == 0 && s->index < N ? 0 : SN_EINVAL;
}

static void slicer_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    slicer_t *s = state;
    for (size_t i = 0; i < n; i++)
        if (ev[i].type == SN_EV_MESSAGE)
            s->msgs++;
    if (++s->steps < SLICES) {
        out->status = SN_CONTINUE;
        return;
    }
    int node = sn_ctx_sched(ctx) == g_node[1] ? 1 : 2;
    atomic_fetch_add(&g.finished_on[node], 1);
    atomic_fetch_add(&g.done[s->index], 1);
    atomic_fetch_add(&g.msgs, (long)s->msgs);
    sn_out_done(out, NULL);
}

static void slicer_close(sn_ctx_t *ctx, void *state)
{
    atomic_fetch_add(&g.closed, 1);
}

static int slicer_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(slicer_t));
    return *out ? 0 : SN_ENOMEM;
}

static int slicer_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    if (in->len != sizeof(slicer_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(slicer_t));
    return 0;
}

static const sn_type_t slicer = {
    "slicer", 1, sizeof(slicer_t), slicer_init, slicer_step, slicer_close, slicer_marshal, slicer_unmarshal};
/* the same, without marshal: never moves */
static const sn_type_t pinned = {"pinned", 1, sizeof(slicer_t), slicer_init, slicer_step, slicer_close, NULL, NULL};

/* "holder": keeps its worker busy until g_hold is cleared (never moves),
 * so that a process queued behind it stays Ready */
static atomic_int g_hold, g_holding;
static void holder_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    atomic_store(&g_holding, 1);
    while (atomic_load(&g_hold))
        sleep_ms(1);
    sn_out_done(out, NULL);
}
static int holder_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return 0;
}
static const sn_type_t holder = {"holder", 1, 8, holder_init, holder_step, NULL, NULL, NULL};

static sn_sched_t *mk(uint32_t node, int workers)
{
    sn_sched_t *s = sn_sched_new(&(sn_sched_config_t){node, workers, 1});
    assert_non_null(s);
    assert_int_equal(sn_type_register(s, &slicer), 0);
    assert_int_equal(sn_type_register(s, &pinned), 0);
    return s;
}

static int reset(void **unused)
{
    memset(&g, 0, sizeof g);
    return 0;
}

static bool only_slicers(void *arg, const sn_type_t *t)
{
    atomic_fetch_add((atomic_int *)arg, 1);
    return strcmp(t->name, "slicer") == 0;
}

/* What the handover loop did, for the checks after it. */
typedef struct tally {
    long sent; /* messages sent to frozen processes */
    int moved, reverted, asked, rounds;
    sn_pid_t moved_pid[N]; /* the first `moved` are on node 2 */
} tally_t;

/* Messages to a frozen process queue up, and must follow it: sends MSGS
 * to m on node 1; returns how many. */
static long send_while_frozen(const sn_migrant_t *m)
{
    long sent = 0;
    for (int k = 0; k < MSGS; k++) {
        sn_payload_t *msg = sn_payload_u64((uint64_t)k);
        assert_int_equal(sn_send(g_node[1], m->pid, &msg), 0);
        sent++;
    }
    return sent;
}

/* Completes m's handover: installed on node 2, committed on node 1 (which
 * hands over the events it had queued, the test's messages among them, in
 * order), activated on node 2 with them. */
static void move_to_node2(sn_migrant_t *m)
{
    void *handle;
    assert_int_equal(sn__migrate_install(g_node[2], m, &handle), 0);
    sn_event_t *events;
    size_t nev;
    assert_int_equal(sn__migrate_commit(g_node[1], m, 2, &events, &nev), 0);
    assert_true(nev >= MSGS); /* at least the test's messages, in order */
    assert_int_equal(sn__migrate_activate(g_node[2], handle, events, nev, 1, false, m->sleeps, m->nsleeps), 0);
    for (size_t k = 0; k < nev; k++)
        assert_null(events[k].data); /* taken */
    free(events);
}

/* The test thread as the relay: takes Ready slicers from node 1 while its
 * worker runs, sends each messages while it is frozen, then reverts every
 * third and moves the rest to node 2; until every process has closed. */
static void take_until_all_closed(tally_t *t)
{
    uint64_t end = deadline_ns(WAIT_MS);
    while (atomic_load(&g.closed) < N && now_ns() < end) {
        sn_migrant_t m[32];
        size_t n = sn__migrate_take(g_node[1], 32, only_slicers, &t->asked, m);
        t->rounds++;
        for (size_t i = 0; i < n; i++) {
            assert_string_equal(m[i].type, "slicer");
            assert_int_equal(atomic_load(&((sn__proc_t *)m[i].handle)->state), SN__MIGRATING);
            t->sent += send_while_frozen(&m[i]);
            if (i % 3 == 2) { /* an aborted handover: it runs on here */
                sn__migrate_revert(g_node[1], &m[i]);
                t->reverted++;
                continue;
            }
            move_to_node2(&m[i]);
            t->moved_pid[t->moved++] = m[i].pid;
        }
        sleep_ms(1);
    }
}

/* node 1 forwards every moved PID to node 2; as node 2 reports each ended
 * (sn__migrate_gone), the entry goes, and the others stay reachable
 * (removal from the open-addressed table, in a scattered order: odd ones
 * first, then even) */
static void check_forwards(const tally_t *t)
{
    const sn_pid_t *moved_pid = t->moved_pid;
    int moved = t->moved;
    for (int i = 0; i < moved; i++)
        assert_int_equal(sn__migrate_forward_of(g_node[1], moved_pid[i]), 2);
    assert_int_equal(sn__migrate_gone(g_node[1], moved_pid[0], 3, NULL, 0), 0); /* not from where it went: kept */
    assert_int_equal(sn__migrate_forward_of(g_node[1], moved_pid[0]), 2);
    for (int pass = 1; pass >= 0; pass--) {
        for (int i = pass; i < moved; i += 2)
            assert_int_equal(sn__migrate_gone(g_node[1], moved_pid[i], 2, NULL, 0), 0); /* born on node 1: no origin */
        for (int i = 0; i < moved; i++)
            assert_int_equal(sn__migrate_forward_of(g_node[1], moved_pid[i]), (i % 2 == 1 || pass == 0) ? 0 : 2);
    }
}

/* The handover, over and over while node 1's worker runs: every process
 * finishes exactly once, the moved ones on node 2, with all messages. */
static void test_move_exactly_once(void **unused)
{
    g_node[1] = mk(1, 1);
    g_node[2] = mk(2, 2);
    sn_pid_t pids[N];
    for (uint64_t i = 0; i < N; i++) {
        sn_payload_t *in = sn_payload_u64(i);
        assert_int_equal(sn_spawn(g_node[1], i % 4 == 3 ? "pinned" : "slicer", "run", &in, NULL, NULL, &pids[i]), 0);
    }
    static tally_t t; /* (static: N PIDs) */
    memset(&t, 0, sizeof t);
    take_until_all_closed(&t);
    assert_int_equal(atomic_load(&g.closed), N);
    check_forwards(&t);
    sn_sched_shutdown(g_node[1], 1000);
    sn_sched_shutdown(g_node[2], 1000);
    for (int i = 0; i < N; i++)
        assert_int_equal(atomic_load(&g.done[i]), 1);
    assert_true(t.moved > 0);
    assert_true(t.reverted > 0);
    assert_true(t.asked > 0);
    assert_int_equal(atomic_load(&g.finished_on[2]), t.moved);
    assert_int_equal(atomic_load(&g.finished_on[1]) + atomic_load(&g.finished_on[2]), N);
    assert_int_equal(atomic_load(&g.msgs), t.sent);
    /* the pinned ones never moved */
    sn_stats_t st1, st2;
    sn_sched_stats(g_node[1], &st1);
    sn_sched_stats(g_node[2], &st2);
    assert_int_equal(st1.migrated_out, (uint64_t)t.moved);
    assert_int_equal(st2.migrated_in, (uint64_t)t.moved);
    assert_int_equal(st1.live, 0);
    assert_int_equal(st2.live, 0);
    print_message("moved %d, reverted %d, %d takes, %ld messages followed\n", t.moved, t.reverted, t.rounds, t.sent);
    /* a message to a moved PID on node 1 now has nowhere to go there (no
     * relay): noproc, not a crash, not a wrong process */
    sn_sched_destroy(&g_node[1]);
    sn_sched_destroy(&g_node[2]);
}

/* Node 2 has a process with node 1's PID serial: the table tells them apart. */
static void test_pid_node_is_identity(void **unused)
{
    g_node[1] = mk(1, 1);
    g_node[2] = mk(2, 1);
    sn_pid_t a;
    sn_payload_t *in = sn_payload_u64(0);
    /* a slicer that takes long enough to be caught in the queue */
    assert_int_equal(sn_spawn(g_node[1], "slicer", "run", &in, NULL, NULL, &a), 0);
    sn_migrant_t m;
    size_t n = 0;
    uint64_t end = deadline_ns(WAIT_MS);
    while (n == 0 && now_ns() < end && atomic_load(&g.closed) == 0)
        n = sn__migrate_take(g_node[1], 1, NULL, NULL, &m);
    if (n == 1) {
        void *handle;
        assert_int_equal(sn__migrate_install(g_node[2], &m, &handle), 0);
        sn_event_t *ev;
        size_t nev;
        assert_int_equal(sn__migrate_commit(g_node[1], &m, 2, &ev, &nev), 0);
        assert_int_equal(sn__migrate_activate(g_node[2], handle, ev, nev, 1, false, m.sleeps, m.nsleeps), 0);
        free(ev);
        /* same serial, other node: not the moved process */
        sn_payload_t *msg = sn_payload_u64(1);
        assert_int_equal(sn_send(g_node[2], (sn_pid_t){2, a.serial}, &msg), SN_ENOPROC);
        sn_payload_destroy(&msg);
    }
    end = deadline_ns(WAIT_MS);
    while (atomic_load(&g.closed) < 1 && now_ns() < end)
        sleep_ms(1);
    assert_int_equal(atomic_load(&g.done[0]), 1);
    sn_sched_destroy(&g_node[1]);
    sn_sched_destroy(&g_node[2]);
}

/* An installed copy that never gets its commit is dropped cleanly; a type
 * the new owner lacks (or has in another version) is refused. */
static void test_install_refusals_and_discard(void **unused)
{
    g_node[2] = mk(2, 1);
    slicer_t st = {.index = 5};
    sn_payload_t *state = sn_payload_new(SN_CT_BYTES, &st, sizeof st);
    sn_migrant_t m = {.pid = {1, 77}, .type = "slicer", .type_version = 1, .state = state, .moves = 1};
    void *h;
    m.type = "nope";
    assert_int_equal(sn__migrate_install(g_node[2], &m, &h), SN_ENOTYPE);
    m.type = "slicer";
    m.type_version = 2;
    assert_int_equal(sn__migrate_install(g_node[2], &m, &h), SN_ENOTYPE);
    m.type = "pinned"; /* no unmarshal */
    m.type_version = 1;
    assert_int_equal(sn__migrate_install(g_node[2], &m, &h), SN_ENOTYPE);
    m.type = "slicer";
    assert_int_equal(sn__migrate_install(g_node[2], &m, &h), 0);
    sn__migrate_discard(g_node[2], h);
    assert_int_equal(atomic_load(&g.closed), 1);
    sn_payload_destroy(&state);
    sn_stats_t s;
    sn_sched_stats(g_node[2], &s);
    assert_int_equal(s.live, 0);
    sn_sched_destroy(&g_node[2]);
}

/* Moves the one Ready process of `sched` away to node `to`, and brings it
 * back as if it came from node `from` (a copy installed here: the relay's
 * part, played by the test). */
static void away_and_back(sn_sched_t *sched, uint32_t to, uint32_t from)
{
    sn_migrant_t m;
    size_t n = 0;
    uint64_t end = deadline_ns(WAIT_MS);
    while (n == 0 && now_ns() < end)
        n = sn__migrate_take(sched, 1, NULL, NULL, &m);
    assert_int_equal(n, 1);
    void *copy;
    assert_int_equal(sn__migrate_install(sched, &m, &copy), 0);
    sn_event_t *ev;
    size_t nev;
    assert_int_equal(sn__migrate_commit(sched, &m, to, &ev, &nev), 0);
    assert_int_equal(sn__migrate_activate(sched, copy, ev, nev, from, false, m.sleeps, m.nsleeps), 0);
    free(ev);
}

/* A process that comes back to a node and leaves again (work stolen back
 * and forth): the node's forwarding entry points to where it went last and
 * keeps every node it came back from, since the path it took leads back
 * to this node from each of them; when it ends, all of them are told. (A
 * node that kept only the last lost the way back to the nodes before it,
 * and their entries were never dropped.) */
static void test_forwarding_keeps_every_origin(void **unused)
{
    g_node[1] = mk(1, 1);
    assert_int_equal(sn_type_register(g_node[1], &holder), 0);
    atomic_store(&g_hold, 1);
    atomic_store(&g_holding, 0);
    assert_int_equal(sn_spawn(g_node[1], "holder", "run", NULL, NULL, NULL, NULL), 0);
    uint64_t end = deadline_ns(WAIT_MS);
    while (!atomic_load(&g_holding) && now_ns() < end)
        sleep_ms(1);
    assert_true(atomic_load(&g_holding)); /* the worker is busy: what comes next waits, Ready */
    sn_pid_t pid;
    sn_payload_t *in = sn_payload_u64(0);
    assert_int_equal(sn_spawn(g_node[1], "slicer", "run", &in, NULL, NULL, &pid), 0);
    away_and_back(g_node[1], 2, 3); /* born here: to 2, back from 3 (2 gave it to 3) */
    assert_int_equal(sn__migrate_forward_of(g_node[1], pid), 2);
    away_and_back(g_node[1], 2, 2); /* to 2 again, straight back */
    away_and_back(g_node[1], 3, 3); /* to 3, back */
    away_and_back(g_node[1], 4, 4); /* to 4, back (here now, come from 4) */
    assert_int_equal(sn__migrate_forward_of(g_node[1], pid), 4);
    uint32_t o[8];
    assert_int_equal(sn__migrate_gone(g_node[1], pid, 3, o, 8), 0); /* not where it went last: kept */
    assert_int_equal(sn__migrate_forward_of(g_node[1], pid), 4);
    /* it ends here: the GONE goes round by 4 and back to us, from 4 */
    assert_int_equal(sn__migrate_gone(g_node[1], pid, 4, o, 8), 2); /* each node it came back from, once */
    assert_int_equal(o[0], 3);
    assert_int_equal(o[1], 2);
    assert_int_equal(sn__migrate_forward_of(g_node[1], pid), 0);
    assert_int_equal(sn__migrate_forwarding(g_node[1]), 0);
    assert_int_equal(sn__migrate_gone(g_node[1], pid, 4, o, 8), 0); /* said twice: nothing left */
    atomic_store(&g_hold, 0);
    end = deadline_ns(WAIT_MS);
    while (atomic_load(&g.closed) < 1 && now_ns() < end)
        sleep_ms(1);
    assert_int_equal(atomic_load(&g.done[0]), 1); /* the copy that stayed ran to its end, once */
    sn_sched_destroy(&g_node[1]);
}

/* --------------------------------------------- a monitored child moves */

/* "mchild": its first step's n is recorded; it finishes when a message
 * came, with 42 + the messages it got. Movable. */
static atomic_long g_mchild_first_n = -1;
static atomic_int g_mchild_node;

static int mchild_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return 0;
}

static void mchild_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    uint64_t *msgs = state;
    long unset = -1;
    atomic_compare_exchange_strong(&g_mchild_first_n, &unset, (long)n);
    for (size_t i = 0; i < n; i++)
        *msgs += ev[i].type == SN_EV_MESSAGE;
    out->status = SN_IDLE;
    if (*msgs > 0) {
        atomic_store(&g_mchild_node, sn_ctx_sched(ctx) == g_node[2] ? 2 : 1);
        sn_out_done(out, &(sn_payload_t *){sn_payload_u64(42 + *msgs)});
    }
}

static int mchild_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, 8);
    return *out ? 0 : SN_ENOMEM;
}

static int mchild_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    memcpy(state, in->data, 8);
    return 0;
}

static const sn_type_t mchild = {.name = "mchild",
                                 .version = 1,
                                 .state_size = 8,
                                 .init = mchild_init,
                                 .step = mchild_step,
                                 .marshal = mchild_marshal,
                                 .unmarshal = mchild_unmarshal};

/* "mparent": spawns an mchild with SN_YIELD_MONITOR (tag 7), then a
 * holder (pushed last, run first: the child waits, Ready, never stepped);
 * finishes with the DOWN's result once it has the PID and the DOWN. */
typedef struct mparent {
    sn_pid_t child;
} mparent_t;

static void mparent_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    mparent_t *m = state;
    out->status = SN_IDLE;
    if (n == 0) {
        sn_out_spawn(out, 7, "mchild", "run", NULL, SN_YIELD_MONITOR);
        sn_out_spawn(out, 8, "holder", "run", NULL, SN_YIELD_NOREPLY);
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 7 && ev[i].error == 0) {
            m->child = ev[i].from;
        } else if (ev[i].type == SN_EV_DOWN && ev[i].tag == 7 && !sn_pid_is_none(m->child) &&
                   sn_pid_eq(ev[i].from, m->child) && ev[i].error == 0) {
            sn_out_done(out, &ev[i].data);
            return;
        } else {
            sn_out_fail(out, SN_EPROTO, "unexpected event %d tag %llu error %d", (int)ev[i].type,
                        (unsigned long long)ev[i].tag, ev[i].error);
            return;
        }
    }
}

static const sn_type_t mparent = {
    .name = "mparent", .version = 1, .state_size = sizeof(mparent_t), .init = mchild_init, .step = mparent_step};

/* The test's relay: messages, DOWNs and a monitored child's DOWN for the
 * other node are delivered there at once (what the real relay does over
 * the wire); the rest (notices for the forwarding entries) is dropped. */
static int fake_deliver(void *arg, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error, uint32_t via,
                        sn_payload_t **msg)
{
    if (to.node < 1 || to.node > 2)
        return SN_EUNREACHABLE;
    if (kind == SN_RELAY_CHILD_DOWN) /* (as relay/inbound.c takes it) */
        return sn__send_child_down(g_node[to.node], to, from, tag, error, msg);
    if (kind != SN_EV_MESSAGE && kind != SN_EV_DOWN)
        return 0;
    return sn__deliver_inbound(g_node[to.node], to, from, tag, kind, error, msg);
}

static bool only_mchild(void *arg, const sn_type_t *t)
{
    return strcmp(t->name, "mchild") == 0;
}

/* The child moves to node 2 before its first step, with a message queued
 * for it on the way: on node 2 its first step has no events (the flag
 * moved with it), the message comes next; its DOWN (with its result)
 * crosses back to the parent on node 1. */
static void test_monitored_child_moves(void **unused)
{
    sn_relay_hooks_t hooks = {.deliver = fake_deliver};
    for (uint32_t k = 1; k <= 2; k++) {
        g_node[k] = mk(k, 1);
        assert_int_equal(sn_type_register(g_node[k], &mchild), 0);
        assert_int_equal(sn_type_register(g_node[k], &mparent), 0);
        assert_int_equal(sn_type_register(g_node[k], &holder), 0);
        sn__sched_set_relay(g_node[k], &hooks);
    }
    atomic_store(&g_hold, 1);
    atomic_store(&g_holding, 0);
    collector_t c;
    collector_init(&c);
    assert_int_equal(sn_spawn(g_node[1], "mparent", "run", NULL, collector_on_result, &c, NULL), 0);
    uint64_t end = deadline_ns(WAIT_MS);
    while (!atomic_load(&g_holding) && now_ns() < end)
        sleep_ms(1);
    sn_migrant_t m;
    assert_int_equal(sn__migrate_take(g_node[1], 1, only_mchild, NULL, &m), 1);
    assert_int_equal(m.awaited, SN__AWAIT_DOWN);
    assert_int_equal(m.fresh, 1);
    assert_int_equal(sn_send(g_node[1], m.pid, &(sn_payload_t *){sn_payload_u64(1)}), 0);
    void *handle;
    assert_int_equal(sn__migrate_install(g_node[2], &m, &handle), 0);
    sn_event_t *events;
    size_t nev;
    assert_int_equal(sn__migrate_commit(g_node[1], &m, 2, &events, &nev), 0);
    assert_int_equal(nev, 1);
    assert_int_equal(sn__migrate_activate(g_node[2], handle, events, nev, 1, false, m.sleeps, m.nsleeps), 0);
    free(events);
    atomic_store(&g_hold, 0); /* the parent can run again */
    assert_true(collector_wait(&c, WAIT_MS));
    if (c.status != SN_DONE && c.result)
        print_error("parent: %s\n", (const char *)c.result->data);
    assert_int_equal(c.status, SN_DONE);
    assert_int_equal(result_u64(&c), 43); /* the child's result, through the DOWN */
    assert_int_equal(atomic_load(&g_mchild_first_n), 0);
    assert_int_equal(atomic_load(&g_mchild_node), 2);
    sn_sched_destroy(&g_node[1]);
    sn_sched_destroy(&g_node[2]);
    collector_fini(&c);
}

/* ------------------------------------------------------ freeze by PID */
/* "counter": counts messages (SN_IDLE between them), finishes on a 0;
 * with method "sleepy" it first yields a long sleep, with "hangs" the
 * command "hang" (which completes when the test says), with "both" both:
 * pending yields */
typedef struct counter {
    uint64_t msgs, steps, mode; /* mode: bit 0 sleepy, bit 1 hangs */
} counter_t;
static int counter_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx, (void)input;
    static const char *const modes[] = {"count", "sleepy", "hangs", "both"};
    for (uint64_t i = 0; i < 4; i++)
        if (strcmp(method, modes[i]) == 0) {
            ((counter_t *)state)->mode = i;
            return 0;
        }
    return SN_ENOMETHOD;
}
static atomic_int g_counted = -1;
static void counter_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    counter_t *c = state;
    c->steps++;
    out->status = SN_IDLE;
    if (n == 0 && (c->mode & 1))
        sn_out_sleep(out, 1, 60000);
    if (n == 0 && (c->mode & 2))
        sn_out_yield(out, 0, "hang", 2);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 1;
        if (ev[i].type == SN_EV_MESSAGE && sn_payload_get_u64(ev[i].data, &v) == 0 && v == 0) {
            atomic_store(&g_counted, (int)c->msgs);
            sn_out_done(out, NULL);
            return;
        }
        c->msgs += ev[i].type == SN_EV_MESSAGE;
    }
}
static int counter_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(counter_t));
    return *out ? 0 : SN_ENOMEM;
}
static int counter_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    memcpy(state, in->data, sizeof(counter_t));
    return 0;
}
static const sn_type_t counter = {.name = "counter",
                                  .version = 1,
                                  .state_size = sizeof(counter_t),
                                  .init = counter_init,
                                  .step = counter_step,
                                  .marshal = counter_marshal,
                                  .unmarshal = counter_unmarshal};

/* "hang": a command that completes only when the test says
 * (sn_complete_yield) */
static void hang(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    (void)sched, (void)arg;
    sn_payload_destroy(&req->data);
}

/* Sleeps armed in sched's timer. */
static size_t timers_of(sn_sched_t *sched)
{
    pthread_mutex_lock(&sched->timer.mu);
    size_t n = sched->timer.n;
    pthread_mutex_unlock(&sched->timer.mu);
    return n;
}

/* Waits (bounded) for pid on sched to be Idle with `steps` steps run. */
static void wait_idle(sn_sched_t *sched, sn_pid_t pid, uint64_t steps)
{
    uint64_t end = deadline_ns(WAIT_MS);
    sn_proc_row_t row = {0};
    while (now_ns() < end && (sn__sched_proc(sched, pid, &row) != 0 || row.state != SN_PS_IDLE || row.steps < steps))
        sleep_ms(1);
    assert_int_equal(row.state, SN_PS_IDLE);
    assert_true(row.steps >= steps);
}

static void send_u64(sn_sched_t *sched, sn_pid_t to, uint64_t v)
{
    sn_payload_t *m = sn_payload_u64(v);
    assert_int_equal(sn_send(sched, to, &m), 0);
}

static void test_freeze_idle(void **unused)
{
    g_node[1] = mk(1, 1);
    g_node[2] = mk(2, 1);
    assert_int_equal(sn_type_register(g_node[1], &counter), 0);
    assert_int_equal(sn_type_register(g_node[2], &counter), 0);
    sn_pid_t pid, pinned_pid, sleepy_pid;
    const char *why;
    sn_migrant_t m;
    assert_int_equal(sn_spawn(g_node[1], "counter", "count", NULL, NULL, NULL, &pid), 0);
    send_u64(g_node[1], pid, 5);
    wait_idle(g_node[1], pid, 2);
    /* frozen by PID; what is sent meanwhile waits, and follows it */
    assert_int_equal(sn__migrate_freeze(g_node[1], pid, &m, &why), 0);
    assert_true(m.idle);
    assert_int_equal(sn__migrate_freeze(g_node[1], pid, &(sn_migrant_t){0}, &why), SN__MOVE_BUSY);
    send_u64(g_node[1], pid, 7);
    void *h;
    sn_event_t *ev;
    size_t nev;
    assert_int_equal(sn__migrate_install(g_node[2], &m, &h), 0);
    assert_int_equal(sn__migrate_commit(g_node[1], &m, 2, &ev, &nev), 0);
    assert_int_equal(nev, 1);
    assert_int_equal(sn__migrate_activate(g_node[2], h, ev, nev, 1, false, m.sleeps, m.nsleeps), 0);
    free(ev);
    wait_idle(g_node[2], pid, 1); /* stepped there once, for the message that followed it */
    /* and back, with nothing queued: not stepped until a message comes */
    assert_int_equal(sn__migrate_freeze(g_node[2], pid, &m, &why), 0);
    assert_int_equal(sn__migrate_install(g_node[1], &m, &h), 0);
    assert_int_equal(sn__migrate_commit(g_node[2], &m, 1, &ev, &nev), 0);
    assert_int_equal(nev, 0);
    assert_int_equal(sn__migrate_activate(g_node[1], h, ev, nev, 2, false, m.sleeps, m.nsleeps), 0);
    free(ev);
    sleep_ms(50);
    sn_proc_row_t row;
    assert_int_equal(sn__sched_proc(g_node[1], pid, &row), 0);
    assert_int_equal(row.steps, 0);
    send_u64(g_node[1], pid, 0); /* finish: its count is the state it carried */
    uint64_t end = deadline_ns(WAIT_MS);
    while (atomic_load(&g_counted) < 0 && now_ns() < end)
        sleep_ms(1);
    assert_int_equal(atomic_load(&g_counted), 2);
    /* what keeps a process here, said */
    assert_int_equal(sn__migrate_freeze(g_node[1], (sn_pid_t){1, 999999}, &m, &why), SN_ENOPROC);
    sn_payload_t *in = sn_payload_u64(1);
    assert_int_equal(sn_spawn(g_node[1], "pinned", "x", &in, NULL, NULL, &pinned_pid), 0);
    assert_int_equal(sn__migrate_freeze(g_node[1], pinned_pid, &m, &why), SN_ENOTMOVABLE);
    assert_non_null(strstr(why, "no marshal"));
    /* a pending sleep moves with it (sleeping_moves); a revert arms it
     * here again, due when it was */
    assert_int_equal(sn_spawn(g_node[1], "counter", "sleepy", NULL, NULL, NULL, &sleepy_pid), 0);
    wait_idle(g_node[1], sleepy_pid, 1);
    assert_int_equal(sn__migrate_freeze(g_node[1], sleepy_pid, &m, &why), 0);
    assert_int_equal(m.nsleeps, 1);
    assert_int_equal(m.sleeps[0].tag, 1);
    assert_int_equal(timers_of(g_node[1]), 0);
    uint64_t due = m.sleeps[0].deadline_ns;
    sn__migrate_revert(g_node[1], &m);
    assert_int_equal(timers_of(g_node[1]), 1);
    wait_idle(g_node[1], sleepy_pid, 1);
    assert_int_equal(sn__migrate_freeze(g_node[1], sleepy_pid, &m, &why), 0);
    assert_int_equal(m.sleeps[0].deadline_ns, due);
    sn__migrate_revert(g_node[1], &m);
    /* a yield that is no sleep (a command here) keeps it here, and says so */
    assert_true(sn_command_register(g_node[1], "hang", hang, NULL) > 0);
    sn_pid_t hung[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(sn_spawn(g_node[1], "counter", k ? "both" : "hangs", NULL, NULL, NULL, &hung[k]), 0);
        wait_idle(g_node[1], hung[k], 1);
        assert_int_equal(sn__migrate_freeze(g_node[1], hung[k], &m, &why), SN_ENOTMOVABLE);
        assert_non_null(strstr(why, "no sleep"));
        assert_non_null(strstr(why, "a command"));
        assert_int_equal(timers_of(g_node[1]), 1 + k); /* its sleep stays armed here */
    }
    for (int k = 0; k < 2; k++)
        assert_int_equal(sn_complete_yield(g_node[1], hung[k], 2, 0, NULL), 0);
    sn_sched_destroy(&g_node[1]);
    sn_sched_destroy(&g_node[2]);
}

/* --------------------------------------------- a monitored process moves */
/* "watcher": monitors the PID it is given and counts the DOWNs of it */
static atomic_int g_downs, g_down_error = 1;
typedef struct watcher {
    sn_pid_t target;
} watcher_t;
static int watcher_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx, (void)method;
    return sn_payload_get_pid(*input, &((watcher_t *)state)->target);
}
static void watcher_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    watcher_t *w = state;
    out->status = SN_IDLE;
    if (n == 0)
        sn_out_monitor(out, w->target, 5);
    for (size_t i = 0; i < n; i++)
        if (ev[i].type == SN_EV_DOWN && ev[i].tag == 5 && sn_pid_eq(ev[i].from, w->target)) {
            atomic_store(&g_down_error, ev[i].error);
            atomic_fetch_add(&g_downs, 1);
        }
}
static const sn_type_t watcher = {
    .name = "watcher", .version = 1, .state_size = sizeof(watcher_t), .init = watcher_init, .step = watcher_step};

/* The test's relay for monitors: a monitor request (the commit passes
 * the moved process's monitors on) waits until the test lets it go, after
 * the activation, as the real relay's comes behind the commit. */
static struct {
    sn_pid_t to, from;
    uint64_t tag;
    uint32_t node;
    int n;
} g_mon;
static int mon_deliver(void *arg, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error, uint32_t via,
                       sn_payload_t **msg)
{
    if (kind == SN_RELAY_MONITOR) {
        g_mon.to = to, g_mon.from = from, g_mon.tag = tag, g_mon.node = via ? via : to.node;
        g_mon.n++;
        return 0;
    }
    return fake_deliver(arg, to, from, tag, kind, error, via, msg);
}

/* A move by PID takes a monitored process; its monitor follows it, and
 * the watcher on the old node gets exactly one DOWN when it ends on the
 * new one (a named process moves so: tests/names.sh). */
static void test_freeze_monitored(void **unused)
{
    sn_relay_hooks_t hooks = {.deliver = mon_deliver};
    for (uint32_t k = 1; k <= 2; k++) {
        g_node[k] = mk(k, 1);
        assert_int_equal(sn_type_register(g_node[k], &counter), 0);
        assert_int_equal(sn_type_register(g_node[k], &watcher), 0);
        sn__sched_set_relay(g_node[k], &hooks);
    }
    sn_pid_t pid, wpid;
    assert_int_equal(sn_spawn(g_node[1], "counter", "count", NULL, NULL, NULL, &pid), 0);
    wait_idle(g_node[1], pid, 1);
    sn_payload_t *in = sn_payload_pid(pid);
    assert_int_equal(sn_spawn(g_node[1], "watcher", "run", &in, NULL, NULL, &wpid), 0);
    wait_idle(g_node[1], wpid, 1);
    sn_migrant_t m;
    const char *why;
    assert_int_equal(sn__migrate_freeze(g_node[1], pid, &m, &why), 0);
    void *h;
    sn_event_t *ev;
    size_t nev;
    assert_int_equal(sn__migrate_install(g_node[2], &m, &h), 0);
    assert_int_equal(sn__migrate_commit(g_node[1], &m, 2, &ev, &nev), 0);
    assert_int_equal(sn__migrate_activate(g_node[2], h, ev, nev, 1, false, m.sleeps, m.nsleeps), 0);
    free(ev);
    assert_int_equal(g_mon.n, 1); /* passed on, to the new node */
    assert_int_equal(g_mon.node, 2);
    assert_true(sn_pid_eq(g_mon.from, wpid));
    sn__monitor(g_node[2], g_mon.to, g_mon.from, g_mon.tag);
    assert_int_equal(atomic_load(&g_downs), 0);
    send_u64(g_node[2], pid, 0); /* it ends there */
    uint64_t end = deadline_ns(WAIT_MS);
    while (atomic_load(&g_downs) < 1 && now_ns() < end)
        sleep_ms(1);
    sleep_ms(50);
    assert_int_equal(atomic_load(&g_downs), 1);
    assert_int_equal(atomic_load(&g_down_error), 0);
    sn_sched_destroy(&g_node[1]);
    sn_sched_destroy(&g_node[2]);
}

/* ------------------------------------------------ a sleeping process moves */
/* "napper" (input: index, ms): sleeps ms (SN_WAIT: Blocked), then records
 * the node it woke on and when, and finishes. Movable. */
#define NAPPERS 64
typedef struct napper {
    uint64_t index, ms, start_ns;
} napper_t;
static struct {
    atomic_int woke[NAPPERS];     /* per napper: how many times it woke */
    atomic_int woke_on[3];        /* per node */
    _Atomic uint64_t at[NAPPERS]; /* when it woke (now_ns) */
    _Atomic uint64_t slept[NAPPERS];
} g_nap;

static int napper_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    napper_t *z = state;
    if (!*input || (*input)->len != 16)
        return SN_EINVAL;
    memcpy(z, (*input)->data, 16);
    return z->index < NAPPERS ? 0 : SN_EINVAL;
}

static void napper_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    napper_t *z = state;
    if (n == 0) {
        z->start_ns = now_ns();
        sn_out_sleep(out, 9, z->ms);
        out->status = SN_WAIT;
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (ev[i].type != SN_EV_YIELD_COMPLETE || ev[i].tag != 9 || ev[i].error != 0) {
            sn_out_fail(out, SN_EPROTO, "unexpected event %d tag %llu", (int)ev[i].type, (unsigned long long)ev[i].tag);
            return;
        }
    uint64_t t = now_ns();
    atomic_store(&g_nap.at[z->index], t);
    atomic_store(&g_nap.slept[z->index], t - z->start_ns);
    atomic_fetch_add(&g_nap.woke_on[sn_ctx_sched(ctx) == g_node[1] ? 1 : 2], 1);
    atomic_fetch_add(&g_nap.woke[z->index], 1);
    sn_out_done(out, NULL);
}

static int napper_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(napper_t));
    return *out ? 0 : SN_ENOMEM;
}
static int napper_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    memcpy(state, in->data, sizeof(napper_t));
    return 0;
}
static const sn_type_t napper = {.name = "napper",
                                 .version = 1,
                                 .state_size = sizeof(napper_t),
                                 .init = napper_init,
                                 .step = napper_step,
                                 .marshal = napper_marshal,
                                 .unmarshal = napper_unmarshal};

static sn_pid_t spawn_napper(sn_sched_t *sched, uint64_t index, uint64_t ms)
{
    uint64_t arg[2] = {index, ms};
    sn_payload_t *in = sn_payload_new(SN_CT_BYTES, arg, sizeof arg);
    sn_pid_t pid;
    assert_int_equal(sn_spawn(sched, "napper", "nap", &in, NULL, NULL, &pid), 0);
    return pid;
}

/* Waits (bounded) for pid on sched to wait for its yields (Blocked). */
static void wait_blocked(sn_sched_t *sched, sn_pid_t pid)
{
    uint64_t end = deadline_ns(WAIT_MS);
    sn_proc_row_t row = {0};
    while (now_ns() < end && (sn__sched_proc(sched, pid, &row) != 0 || row.state != SN_PS_WAITING))
        sleep_ms(1);
    assert_int_equal(row.state, SN_PS_WAITING);
}

/* Freezes pid on `from` (asking again while busy) and moves it to `to`
 * with its sleeps: 0, or the freeze's error (nothing moved). */
static int move_pid(uint32_t from, uint32_t to, sn_pid_t pid, sn_migrant_t *m)
{
    const char *why;
    int rc;
    uint64_t end = deadline_ns(WAIT_MS);
    while ((rc = sn__migrate_freeze(g_node[from], pid, m, &why)) == SN__MOVE_BUSY && now_ns() < end)
        sched_yield();
    if (rc != 0)
        return rc;
    void *h;
    sn_event_t *ev;
    size_t nev;
    assert_int_equal(sn__migrate_install(g_node[to], m, &h), 0);
    assert_int_equal(sn__migrate_commit(g_node[from], m, to, &ev, &nev), 0);
    assert_int_equal(sn__migrate_activate(g_node[to], h, ev, nev, from, false, m->sleeps, m->nsleeps), 0);
    free(ev);
    return 0;
}

static void two_nodes(const sn_relay_hooks_t *hooks)
{
    for (uint32_t k = 1; k <= 2; k++) {
        g_node[k] = mk(k, 1);
        assert_int_equal(sn_type_register(g_node[k], &napper), 0);
        assert_int_equal(sn_type_register(g_node[k], &counter), 0);
        assert_int_equal(sn_type_register(g_node[k], &watcher), 0);
        if (hooks)
            sn__sched_set_relay(g_node[k], hooks);
    }
}

/* A process with about 300 ms of a 1000 ms sleep left moves: the move
 * carries the sleep's tag and deadline (the time left), node 1's timer
 * lets go of it, and it wakes once, on node 2, when the sleep it began
 * ends (not before, and not a whole sleep after the move), never on node
 * 1. */
static void test_sleeping_moves(void **unused)
{
    memset(&g_nap, 0, sizeof g_nap);
    two_nodes(NULL);
    uint64_t t0 = now_ns();
    sn_pid_t pid = spawn_napper(g_node[1], 0, 1000);
    wait_blocked(g_node[1], pid);
    sleep_ms(700);
    sn_migrant_t m;
    uint64_t moved = now_ns();
    assert_int_equal(move_pid(1, 2, pid, &m), 0);
    assert_true(m.blocked);
    assert_int_equal(m.nsleeps, 1);
    assert_int_equal(m.sleeps[0].tag, 9);
    assert_true(m.sleeps[0].deadline_ns >= t0 + 1000000000u);   /* due when it was */
    assert_true(m.sleeps[0].deadline_ns <= moved + 300000000u); /* about 300 ms left */
    assert_int_equal(timers_of(g_node[1]), 0);
    assert_true(wait_count(&g_nap.woke[0], 1, WAIT_MS));
    sleep_ms(100);
    assert_int_equal(atomic_load(&g_nap.woke[0]), 1);
    assert_int_equal(atomic_load(&g_nap.woke_on[2]), 1);
    assert_int_equal(atomic_load(&g_nap.woke_on[1]), 0);
    uint64_t at = atomic_load(&g_nap.at[0]);
    assert_true(at >= t0 + 1000000000u);   /* not before its time */
    assert_true(at < moved + 2000000000u); /* and not long after (a whole sleep again would be 1 s) */
    assert_true(at < t0 + 1650000000u);    /* the time left, not the whole sleep again */
    print_message("slept %llu ms, moved after %llu ms\n", (unsigned long long)(at - t0) / 1000000,
                  (unsigned long long)(moved - t0) / 1000000);
    sn_sched_destroy(&g_node[1]);
    sn_sched_destroy(&g_node[2]);
}

/* Sleepers moved back and forth between two nodes while their timers come
 * due, each freeze racing its timer's delivery: each wakes exactly once,
 * not before its time, on the node it is on. */
static void test_sleepers_move_while_due(void **unused)
{
    memset(&g_nap, 0, sizeof g_nap);
    two_nodes(NULL);
    sn_pid_t pids[NAPPERS];
    uint32_t on[NAPPERS];
    for (uint64_t i = 0; i < NAPPERS; i++) {
        pids[i] = spawn_napper(g_node[1], i, 5 + i % 40);
        on[i] = 1;
    }
    int moves = 0, left = NAPPERS;
    uint64_t end = deadline_ns(WAIT_MS);
    while (left > 0 && now_ns() < end) {
        left = 0;
        for (int i = 0; i < NAPPERS; i++) {
            if (atomic_load(&g_nap.woke[i]))
                continue;
            left++;
            sn_migrant_t m;
            uint32_t to = 3 - on[i];
            int rc = move_pid(on[i], to, pids[i], &m);
            assert_true(rc == 0 || rc == SN_ENOPROC); /* (woke and ended meanwhile) */
            if (rc == 0)
                on[i] = to, moves++;
        }
    }
    for (int i = 0; i < NAPPERS; i++)
        assert_true(wait_count(&g_nap.woke[i], 1, WAIT_MS));
    sleep_ms(100);
    for (int i = 0; i < NAPPERS; i++) {
        assert_int_equal(atomic_load(&g_nap.woke[i]), 1);
        assert_true(atomic_load(&g_nap.slept[i]) >= (5 + (uint64_t)i % 40) * 1000000u);
    }
    assert_int_equal(atomic_load(&g_nap.woke_on[1]) + atomic_load(&g_nap.woke_on[2]), NAPPERS);
    assert_int_equal(timers_of(g_node[1]) + timers_of(g_node[2]), 0);
    assert_true(moves > 0);
    print_message("%d moves\n", moves);
    sn_sched_destroy(&g_node[1]);
    sn_sched_destroy(&g_node[2]);
}

/* "watchnap" (input: a PID, or none): monitors it (tag 5) and sleeps 300
 * ms (tag 9) waiting for messages meanwhile (SN_IDLE); finishes once it
 * has woken and had the DOWN (with none: once it has woken), counting
 * both. */
static atomic_int g_wn_downs, g_wn_woke, g_wn_woke_on;
typedef struct watchnap {
    sn_pid_t target;
    uint64_t woke, downs;
} watchnap_t;
static void watchnap_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    watchnap_t *w = state;
    out->status = SN_IDLE;
    if (n == 0) {
        if (!sn_pid_is_none(w->target))
            sn_out_monitor(out, w->target, 5);
        sn_out_sleep(out, 9, 300);
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_DOWN && ev[i].tag == 5 && sn_pid_eq(ev[i].from, w->target)) {
            w->downs++;
            atomic_fetch_add(&g_wn_downs, 1);
        } else if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 9 && ev[i].error == 0) {
            w->woke++;
            atomic_fetch_add(&g_wn_woke, 1);
            atomic_store(&g_wn_woke_on, sn_ctx_sched(ctx) == g_node[1] ? 1 : 2);
        }
    }
    if (w->woke && (w->downs || sn_pid_is_none(w->target)))
        sn_out_done(out, NULL);
}
static int watchnap_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(watchnap_t));
    return *out ? 0 : SN_ENOMEM;
}
static int watchnap_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    memcpy(state, in->data, sizeof(watchnap_t));
    return 0;
}
static const sn_type_t watchnap = {.name = "watchnap",
                                   .version = 1,
                                   .state_size = sizeof(watchnap_t),
                                   .init = watcher_init,
                                   .step = watchnap_step,
                                   .marshal = watchnap_marshal,
                                   .unmarshal = watchnap_unmarshal};

/* The test's relay: delivers to the node a send goes through (via), else
 * to the PID's home; monitor requests wait for the test (mon_deliver). */
static int via_deliver(void *arg, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error, uint32_t via,
                       sn_payload_t **msg)
{
    if (kind == SN_RELAY_MONITOR || !via)
        return mon_deliver(arg, to, from, tag, kind, error, via, msg);
    if (via > 2 || (kind != SN_EV_MESSAGE && kind != SN_EV_DOWN))
        return kind == SN_EV_MESSAGE || kind == SN_EV_DOWN ? SN_EUNREACHABLE : 0;
    return sn__deliver_inbound(g_node[via], to, from, tag, kind, error, msg);
}

/* A process that is monitored, sleeping, moves: it wakes once, on the new
 * node, and its watcher gets exactly one DOWN when it ends there. One that
 * monitors another does not move (the records its DOWNs need stay on its
 * node: migrate.c, unmovable). */
static void test_sleeping_monitored_moves(void **unused)
{
    sn_relay_hooks_t hooks = {.deliver = via_deliver};
    memset(&g_mon, 0, sizeof g_mon);
    atomic_store(&g_downs, 0);
    atomic_store(&g_down_error, 1);
    two_nodes(&hooks);
    assert_int_equal(sn_type_register(g_node[1], &watchnap), 0);
    assert_int_equal(sn_type_register(g_node[2], &watchnap), 0);
    sn_pid_t x, a, b, w;
    assert_int_equal(
        sn_spawn(g_node[1], "watchnap", "run", &(sn_payload_t *){sn_payload_pid(SN_PID_NONE)}, NULL, NULL, &b), 0);
    wait_idle(g_node[1], b, 1);
    assert_int_equal(sn_spawn(g_node[1], "watcher", "run", &(sn_payload_t *){sn_payload_pid(b)}, NULL, NULL, &w), 0);
    wait_idle(g_node[1], w, 1);
    sn_migrant_t m;
    assert_int_equal(move_pid(1, 2, b, &m), 0);
    assert_int_equal(m.nsleeps, 1);
    assert_true(m.idle);
    assert_int_equal(g_mon.n, 1); /* its watcher's monitor, passed on to node 2 */
    sn__monitor(g_node[2], g_mon.to, g_mon.from, g_mon.tag);
    assert_true(wait_count(&g_wn_woke, 1, WAIT_MS));
    assert_true(wait_count(&g_downs, 1, WAIT_MS));
    sleep_ms(100);
    assert_int_equal(atomic_load(&g_wn_woke), 1);
    assert_int_equal(atomic_load(&g_wn_woke_on), 2);
    assert_int_equal(atomic_load(&g_downs), 1); /* its watcher's, once */
    assert_int_equal(atomic_load(&g_down_error), 0);
    assert_int_equal(timers_of(g_node[1]), 0);

    /* one that monitors another stays */
    assert_int_equal(sn_spawn(g_node[1], "counter", "count", NULL, NULL, NULL, &x), 0);
    wait_idle(g_node[1], x, 1);
    assert_int_equal(sn_spawn(g_node[1], "watchnap", "run", &(sn_payload_t *){sn_payload_pid(x)}, NULL, NULL, &a), 0);
    wait_idle(g_node[1], a, 1);
    assert_int_equal(move_pid(1, 2, a, &m), SN_ENOTMOVABLE);
    assert_true(wait_count(&g_wn_woke, 2, WAIT_MS)); /* on node 1 */
    assert_int_equal(atomic_load(&g_wn_woke_on), 1);
    send_u64(g_node[1], x, 0); /* what it monitors ends: its DOWN, there */
    assert_true(wait_count(&g_wn_downs, 1, WAIT_MS));
    sn_sched_destroy(&g_node[1]);
    sn_sched_destroy(&g_node[2]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_move_exactly_once, reset),
        cmocka_unit_test_setup(test_pid_node_is_identity, reset),
        cmocka_unit_test_setup(test_install_refusals_and_discard, reset),
        cmocka_unit_test_setup(test_forwarding_keeps_every_origin, reset),
        cmocka_unit_test_setup(test_monitored_child_moves, reset),
        cmocka_unit_test_setup(test_freeze_idle, reset),
        cmocka_unit_test_setup(test_freeze_monitored, reset),
        cmocka_unit_test_setup(test_sleeping_moves, reset),
        cmocka_unit_test_setup(test_sleepers_move_while_due, reset),
        cmocka_unit_test_setup(test_sleeping_monitored_moves, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

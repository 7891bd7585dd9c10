/* test_steal.c - relay/steal.c, the relay's half of cross-node stealing,
 * driven step by step: two nodes in one process (victim 1, thief 2), each
 * a real scheduler with relay/'s logic files over the test double of
 * relay.c (tests/relay_fake.c), the test thread carrying each frame from
 * one to the other and moving the fake clock.
 *
 * The handover request -> offer -> accept -> commit, with every process
 * on exactly one side at each step, a message sent mid-handover following
 * the process; and its aborts: the thief never accepts (the victim's offer
 * times out and it reverts), the thief leaves mid-handover, a late accept
 * after the abort (the abort again), and the accept of a thief the victim
 * held down meanwhile (only frozen), which gets the abort then; and the
 * commit of a victim the thief held down meanwhile, which still lands.
 * A push by PID (move.c, as drain uses it) of several Idle processes goes
 * as one offer, one accept and one commit, each process decided once.
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
#include "steal.h"
#include "move.h"
#include "locate.h"

#define N 8                                   /* movers on the victim; the thief, with none, gets half */
#define OFFER_TIMEOUT_NS UINT64_C(3000000000) /* steal.c's */

typedef struct pair {
    fake_node_t *v, *t;
    sn_pid_t pids[N];
} pair_t;

/* Victim 1 with N Ready movers (its worker held), thief 2 (its worker
 * idle), members of each other. */
static int setup(void **state)
{
    movers_reset();
    pair_t *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->v = fake_node_new(1, 1, mover_types, 2, true, true);
    p->t = fake_node_new(2, 1, mover_types, 2, true, true);
    fake_link(p->v, p->t);
    movers_hold(fake_sched(p->v));
    for (uint64_t i = 0; i < N; i++)
        p->pids[i] = mover_spawn(fake_sched(p->v), i);
    fake_say_load(p->t, 1, N); /* (a member's load is what a thief goes by: none heard, none to give) */
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    pair_t *p = *state;
    movers_release(1);
    movers_release(2);
    fake_node_destroy(&p->t);
    fake_node_destroy(&p->v);
    free(p);
    return 0;
}

/* Where each mover is: the node whose PID table has it (0: neither, in
 * flight between the commit and its activation; -1: both). */
static int owner(pair_t *p, sn_pid_t pid)
{
    bool v = fake_here(fake_sched(p->v), pid), t = fake_here(fake_sched(p->t), pid);
    return v && t ? -1 : v ? 1 : t ? 2 : 0;
}

static int index_of(pair_t *p, sn_pid_t pid)
{
    for (int i = 0; i < N; i++)
        if (sn_pid_eq(p->pids[i], pid))
            return i;
    fail_msg("pid %u.%llu is not one of the movers", pid.node, (unsigned long long)pid.serial);
    return -1;
}

/* The thief's tick sends its request to the victim; returns its id. */
static uint64_t request(pair_t *p)
{
    sn__steal_tick(&p->t->r, fake_clock());
    sn_frame_t f;
    assert_true(fake_peek(p->t, 1, SN_FRAME_STEAL_REQUEST, &f));
    assert_int_equal(f.steal_ready, 0); /* the thief has nothing Ready */
    assert_int_equal(f.steal_max, 64);
    uint64_t id = f.steal_id;
    sn_frame_clear(&f);
    sn__steal_tick(&p->t->r, fake_clock()); /* one request at a time: no second one */
    assert_int_equal(fake_count(p->t, 0, 0), 1);
    return id;
}

/* The request to the victim, its offer (decoded into off) to the thief:
 * the thief's accept is then in its outbox. */
static void offer(pair_t *p, uint64_t id, sn_frame_t *off)
{
    assert_true(fake_pass(p->t, p->v, SN_FRAME_STEAL_REQUEST, NULL));
    assert_true(fake_pass(p->v, p->t, SN_FRAME_STEAL_OFFER, off));
    assert_int_equal(off->steal_id, id);
}

/* Released, they run where they are, the message (4242) with the one it
 * was for (to); a moved one never ran on the victim, the others never on
 * the thief. */
static void run_where_they_are(pair_t *p, sn_pid_t to)
{
    movers_release(1);
    for (int i = 0; i < N; i++)
        assert_int_equal(mover_wait_ran((uint64_t)i), (unsigned)owner(p, p->pids[i]));
    int m0 = index_of(p, to);
    assert_true(mover_wait_msgs((uint64_t)m0, 1));
    assert_int_equal(mover_msg((uint64_t)m0, 0), 4242);
    for (int i = 0; i < N; i++)
        assert_int_equal(atomic_load(&g_mv.steps_on[i][owner(p, p->pids[i]) == 1 ? 2 : 1]), 0);
}

/* The whole handover, step by step: each step's frame, and where every
 * process is after it. */
static void test_handover(void **state)
{
    pair_t *p = *state;
    uint64_t id = request(p);
    for (int i = 0; i < N; i++)
        assert_int_equal(owner(p, p->pids[i]), 1);

    /* offer: half of the victim's Ready work, frozen there, its owner still */
    assert_true(fake_pass(p->t, p->v, SN_FRAME_STEAL_REQUEST, NULL));
    sn_frame_t f;
    assert_true(fake_peek(p->v, 2, SN_FRAME_STEAL_OFFER, &f));
    assert_int_equal(f.steal_id, id);
    assert_int_equal(f.nmigrants, N / 2);
    sn_pid_t moved[N];
    size_t nmoved = f.nmigrants;
    for (size_t i = 0; i < nmoved; i++) {
        moved[i] = f.migrants[i].pid;
        assert_string_equal(f.migrants[i].type, "mover");
        assert_int_equal(f.migrants[i].moves, 1);
        (void)index_of(p, moved[i]);
    }
    sn_frame_clear(&f);
    for (int i = 0; i < N; i++)
        assert_int_equal(owner(p, p->pids[i]), 1);
    /* a message for one of them while it is offered: it follows it */
    send_u64(fake_sched(p->v), moved[0], 4242);

    /* accept: the thief built frozen copies, outside its table */
    assert_true(fake_pass(p->v, p->t, SN_FRAME_STEAL_OFFER, NULL));
    assert_true(fake_peek(p->t, 1, SN_FRAME_STEAL_ACCEPT, &f));
    assert_int_equal(f.steal_id, id);
    assert_int_equal(f.npids, nmoved);
    for (size_t i = 0; i < nmoved; i++)
        assert_true(sn_pid_eq(f.pids[i], moved[i]));
    sn_frame_clear(&f);
    for (int i = 0; i < N; i++)
        assert_int_equal(owner(p, p->pids[i]), 1);

    /* commit: the victim decided; each left its table for a forwarding
     * entry, its queued message rides along */
    assert_true(fake_pass(p->t, p->v, SN_FRAME_STEAL_ACCEPT, NULL));
    assert_true(fake_peek(p->v, 2, SN_FRAME_STEAL_COMMIT, &f));
    assert_int_equal(f.steal_id, id);
    assert_int_equal(f.npids, nmoved);
    assert_int_equal(f.nsends, 1);
    assert_true(sn_pid_eq(f.sends[0].to, moved[0]));
    assert_int_equal(f.sends[0].kind, SN_EV_MESSAGE);
    sn_frame_clear(&f);
    for (size_t i = 0; i < nmoved; i++) {
        assert_int_equal(owner(p, moved[i]), 0); /* in flight: in neither table, run by neither */
        assert_int_equal(fake_forward_of(fake_sched(p->v), moved[i]), 2);
        assert_int_equal(sn__loc_last_seen(&p->v->r, moved[i]), 2); /* its home knows where it went */
    }
    assert_int_equal(atomic_load(&p->v->r.steals_out), 1);

    /* the thief activates them */
    assert_true(fake_pass(p->v, p->t, SN_FRAME_STEAL_COMMIT, NULL));
    assert_int_equal(atomic_load(&p->t->r.steals_in), 1);
    int on_v = 0, on_t = 0;
    for (int i = 0; i < N; i++) {
        int o = owner(p, p->pids[i]);
        assert_true(o == 1 || o == 2); /* exactly one side */
        on_v += o == 1;
        on_t += o == 2;
    }
    assert_int_equal(on_t, (int)nmoved);
    assert_int_equal(on_v, N - (int)nmoved);
    for (size_t i = 0; i < nmoved; i++)
        assert_int_equal(owner(p, moved[i]), 2);
    assert_int_equal(fake_count(p->v, 0, 0), 0); /* nothing more was said */
    assert_int_equal(fake_count(p->t, 0, 0), 0);
    run_where_they_are(p, moved[0]);
}

/* An offer is one frame: processes whose states do not fit in half of
 * the victim's max_frame stay there, Ready, and run there (steal.c,
 * fit_frame); one whose state is over the limit is never stolen. */
static void test_too_big_to_move(void **state)
{
    pair_t *p = *state;
    p->v->r.max_frame = 2 * 200; /* room for no mover's state (under 64 bytes, and 256 for its record) */
    (void)request(p);
    assert_true(fake_pass(p->t, p->v, SN_FRAME_STEAL_REQUEST, NULL));
    sn_frame_t f;
    assert_true(fake_peek(p->v, 2, SN_FRAME_STEAL_OFFER, &f));
    assert_int_equal(f.nmigrants, 0);
    sn_frame_clear(&f);
    movers_release(1); /* each runs on the victim, Ready again */
    for (int i = 0; i < N; i++)
        assert_int_equal(mover_wait_ran((uint64_t)i), 1);
}

/* The thief's accept never comes: the victim's offer times out, it sends
 * the abort (an empty commit) and runs them again; a late accept then
 * changes nothing. */
static void test_offer_times_out(void **state)
{
    pair_t *p = *state;
    uint64_t id = request(p);
    sn_frame_t off;
    offer(p, id, &off);
    size_t n = off.nmigrants;
    assert_int_equal(n, N / 2);
    fake_frame_t acc; /* lost, for now */
    assert_true(fake_take(p->t, 1, SN_FRAME_STEAL_ACCEPT, &acc));

    /* just before the deadline: nothing */
    fake_clock_advance(OFFER_TIMEOUT_NS - 1000000u);
    sn__steal_tick(&p->v->r, fake_clock());
    assert_int_equal(fake_count(p->v, 0, 0), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(owner(p, p->pids[i]), 1);
    /* after it: the abort, and they are the victim's to run again */
    fake_clock_advance(2000000u);
    sn__steal_tick(&p->v->r, fake_clock());
    sn_frame_t ab;
    assert_true(fake_pass(p->v, p->t, SN_FRAME_STEAL_COMMIT, &ab)); /* the thief drops its copies */
    assert_int_equal(ab.steal_id, id);
    assert_int_equal(ab.npids, 0);
    sn_frame_clear(&ab);

    /* the late accept: no offer of that id any more, no commit: the
     * abort again (harmless: the thief has dropped its copies) */
    fake_inbound(p->v, acc.buf, acc.len, NULL, 0, false);
    free(acc.buf);
    assert_true(fake_take_decoded(p->v, 2, SN_FRAME_STEAL_COMMIT, &ab));
    assert_int_equal(ab.steal_id, id);
    assert_int_equal(ab.npids, 0);
    sn_frame_clear(&ab);
    assert_int_equal(fake_count(p->v, 0, 0), 0);
    assert_int_equal(atomic_load(&p->v->r.steals_out), 0);
    assert_int_equal(atomic_load(&p->t->r.steals_in), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(owner(p, p->pids[i]), 1);
        assert_int_equal(fake_forward_of(fake_sched(p->v), p->pids[i]), 0);
    }
    sn_frame_clear(&off);

    movers_release(1);
    for (int i = 0; i < N; i++)
        assert_int_equal(mover_wait_ran((uint64_t)i), 1);
    for (int i = 0; i < N; i++)
        assert_int_equal(atomic_load(&g_mv.steps_on[i][2]), 0);
}

/* The thief leaves after the offer, its accept still on the way: the
 * victim's handovers with it end, its processes run there again, and the
 * accept that arrives after is not a member's. */
static void test_thief_leaves(void **state)
{
    pair_t *p = *state;
    uint64_t id = request(p);
    sn_frame_t off;
    offer(p, id, &off);
    sn_frame_clear(&off);
    fake_frame_t acc;
    assert_true(fake_take(p->t, 1, SN_FRAME_STEAL_ACCEPT, &acc));
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_leave(2, p->t->r.incarnation, "test", &buf, &len), 0);
    fake_inbound(p->v, buf, len, NULL, 0, false);
    free(buf);
    assert_int_equal(fake_peer(p->v, 2)->state, SN_MEMBER_LEFT);
    assert_int_equal(p->v->nbounces, 1);
    assert_int_equal(p->v->bounces[0].node, 2);
    assert_true(p->v->bounces[0].gone);
    for (int i = 0; i < N; i++)
        assert_int_equal(owner(p, p->pids[i]), 1);

    fake_inbound(p->v, acc.buf, acc.len, NULL, 0, false);
    free(acc.buf);
    assert_int_equal(p->v->bad, 1);
    assert_string_equal(p->v->bad_why, "steal message from a node that is not a live member");
    /* and the offer's deadline passes with no abort to send */
    fake_clock_advance(OFFER_TIMEOUT_NS * 2);
    sn__steal_tick(&p->v->r, fake_clock());
    assert_int_equal(fake_count(p->v, 0, 0), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(fake_forward_of(fake_sched(p->v), p->pids[i]), 0);

    movers_release(1);
    for (int i = 0; i < N; i++)
        assert_int_equal(mover_wait_ran((uint64_t)i), 1);
    assert_int_equal(atomic_load(&p->v->r.steals_out), 0);
}

/* The victim holds the thief down (it was only frozen) after its offer:
 * the offer is undone at once, with no abort (the thief is down). The
 * thief's accept, when it resumes, gets the abort: it drops its copies,
 * and lets go of a message it held for one of them, and of the
 * acknowledgements of its frame. (It held them for good: no commit or
 * abort was ever to come, and the sender neither saw its message
 * delivered nor returned.) */
static void test_thief_held_down(void **state)
{
    pair_t *p = *state;
    uint64_t id = request(p);
    sn_frame_t off;
    offer(p, id, &off);
    sn_pid_t moving = off.migrants[0].pid;
    sn_frame_clear(&off);
    fake_frame_t acc;
    assert_true(fake_take(p->t, 1, SN_FRAME_STEAL_ACCEPT, &acc));
    /* meanwhile a message for it reaches the thief (as from a third node: the victim's connection here) */
    peer_t *from = fake_peer(p->t, 1);
    sn_wire_send_t m = {.to = moving, .from = {1, 999}, .kind = SN_EV_MESSAGE, .id = 77};
    p->t->r.in_seq = from->recv_seq = 5;
    assert_true(sn__steal_hold(&p->t->r, from, &m));
    p->t->r.in_seq = 0;
    assert_int_equal(from->nheld, 1);
    assert_int_equal(sn__relay_ackable(from), 4); /* (not the frame that brought it) */

    peer_t *thief = fake_peer(p->v, 2);
    atomic_store(&thief->down, 1);
    thief->state = SN_MEMBER_DOWN;
    sn__relay_bounce_peer(&p->v->r, thief, SN_ENODEDOWN, false);
    for (int i = 0; i < N; i++)
        assert_int_equal(owner(p, p->pids[i]), 1);
    assert_int_equal(fake_count(p->v, 0, 0), 0); /* (no abort to a node that is down) */

    fake_inbound(p->v, acc.buf, acc.len, NULL, 0, false); /* it resumes: its accept */
    free(acc.buf);
    assert_int_equal(p->v->bad, 0);
    sn_frame_t ab;
    assert_true(fake_pass(p->v, p->t, SN_FRAME_STEAL_COMMIT, &ab));
    assert_int_equal(ab.steal_id, id);
    assert_int_equal(ab.npids, 0);
    sn_frame_clear(&ab);
    assert_false(fake_here(fake_sched(p->t), moving));
    assert_int_equal(from->nheld, 0); /* let go: on to the process's node */
    assert_int_equal(sn__relay_ackable(from), 5);
    fake_drain(p->t);
    sn_frame_t f;
    assert_true(fake_take_decoded(p->t, 1, SN_FRAME_SENDS, &f));
    assert_int_equal(f.nsends, 1);
    assert_true(sn_pid_eq(f.sends[0].to, moving));
    sn_frame_clear(&f);
    p->t->r.in_seq = 6;
    sn_wire_send_t again = {.to = moving, .from = {1, 999}, .kind = SN_EV_MESSAGE, .id = 78};
    assert_false(sn__steal_hold(&p->t->r, from, &again)); /* nothing is on its way here */
    p->t->r.in_seq = 0;
}

/* The thief holds the victim down (it was only frozen) after the victim
 * committed, its commit still on the way: the thief keeps its copies (a
 * victim that is only down may have committed), lets go of a message it
 * held for one (its frame acknowledged), and the commit, when it comes
 * from the member held down, lands: each process on exactly one side.
 * (The thief dropped its copies and then the commit: the processes were
 * in neither table, lost between two live nodes.) */
static void test_victim_held_down(void **state)
{
    pair_t *p = *state;
    uint64_t id = request(p);
    sn_frame_t off;
    offer(p, id, &off);
    size_t n = off.nmigrants;
    sn_pid_t moving = off.migrants[0].pid;
    sn_frame_clear(&off);
    peer_t *from = fake_peer(p->t, 1);
    sn_wire_send_t m = {.to = moving, .from = {1, 999}, .kind = SN_EV_MESSAGE, .id = 77};
    p->t->r.in_seq = from->recv_seq = 5;
    assert_true(sn__steal_hold(&p->t->r, from, &m)); /* (as from a third node) */
    p->t->r.in_seq = 0;
    assert_true(fake_pass(p->t, p->v, SN_FRAME_STEAL_ACCEPT, NULL));
    fake_frame_t com; /* on its way */
    assert_true(fake_take(p->v, 2, SN_FRAME_STEAL_COMMIT, &com));
    assert_int_equal(owner(p, moving), 0);

    peer_t *victim = fake_peer(p->t, 1);
    atomic_store(&victim->down, 1);
    victim->state = SN_MEMBER_DOWN;
    sn__relay_bounce_peer(&p->t->r, victim, SN_ENODEDOWN, false);
    assert_int_equal(from->nheld, 0); /* let go */
    assert_int_equal(sn__relay_ackable(from), 5);
    p->t->r.in_seq = 6;
    sn_wire_send_t again = {.to = moving, .from = {1, 999}, .kind = SN_EV_MESSAGE, .id = 78};
    assert_false(sn__steal_hold(&p->t->r, from, &again)); /* not while its victim is down */
    p->t->r.in_seq = 0;

    fake_inbound(p->t, com.buf, com.len, NULL, 0, false); /* it resumes: its commit */
    free(com.buf);
    assert_int_equal(p->t->bad, 0);
    int on_v = 0, on_t = 0;
    for (int i = 0; i < N; i++) {
        int o = owner(p, p->pids[i]);
        assert_true(o == 1 || o == 2); /* exactly one side */
        on_v += o == 1;
        on_t += o == 2;
    }
    assert_int_equal(on_t, (int)n);
    assert_int_equal(owner(p, moving), 2);
    assert_int_equal(on_v, N - (int)n);
}

/* Waits until every mover of the victim is Idle (it ran its first step). */
static void all_idle(pair_t *p)
{
    uint64_t end = deadline_ns(WAIT_MS);
    for (int i = 0; i < N; i++) {
        sn_proc_row_t row = {0};
        while ((sn__sched_proc(fake_sched(p->v), p->pids[i], &row) != 0 || row.state != SN_PS_IDLE) && now_ns() < end)
            sleep_ms(1);
        assert_int_equal(row.state, SN_PS_IDLE);
    }
}

static int pushed[N], pushed_error[N];
static uint32_t pushed_to[N];

static void push_done(void *arg, int error, uint32_t node, const char *why)
{
    int i = (int)(intptr_t)arg;
    (void)why;
    pushed[i]++;
    pushed_error[i] = error;
    pushed_to[i] = node;
}

/* Moves by PID of several Idle processes to one node (drain's groups,
 * sn__move_start_many): one offer carries them all, one accept, one
 * commit; every process on exactly one side at each step, each move
 * decided exactly once, a message sent mid-handover follows its process. */
static void test_push_many(void **state)
{
    pair_t *p = *state;
    movers_release(1);
    all_idle(p);
    memset(pushed, 0, sizeof pushed);
    void *args[N];
    for (int i = 0; i < N; i++)
        args[i] = (void *)(intptr_t)i;
    sn__move_start_many(&p->v->r, 2, 1000, push_done, p->pids, args, N);
    sn_frame_t f;
    assert_int_equal(fake_count(p->v, 2, SN_FRAME_STEAL_OFFER), 1);
    assert_true(fake_peek(p->v, 2, SN_FRAME_STEAL_OFFER, &f));
    assert_true((f.steal_id & SN__PUSH_ID) != 0);
    assert_int_equal(f.nmigrants, N);
    sn_frame_clear(&f);
    send_u64(fake_sched(p->v), p->pids[3], 4242); /* frozen: it queues, and rides in the commit */
    for (int i = 0; i < N; i++) {
        assert_int_equal(owner(p, p->pids[i]), 1);
        assert_int_equal(pushed[i], 0);
    }
    assert_true(fake_pass(p->v, p->t, SN_FRAME_STEAL_OFFER, NULL));
    assert_true(fake_peek(p->t, 1, SN_FRAME_STEAL_ACCEPT, &f));
    assert_int_equal(f.npids, N);
    sn_frame_clear(&f);
    for (int i = 0; i < N; i++)
        assert_int_equal(owner(p, p->pids[i]), 1);
    assert_true(fake_pass(p->t, p->v, SN_FRAME_STEAL_ACCEPT, NULL));
    assert_int_equal(fake_count(p->v, 2, SN_FRAME_STEAL_COMMIT), 1);
    for (int i = 0; i < N; i++) {
        assert_int_equal(owner(p, p->pids[i]), 0); /* in flight: in neither table */
        assert_int_equal(pushed[i], 1);            /* decided once, moved */
        assert_int_equal(pushed_error[i], 0);
        assert_int_equal(pushed_to[i], 2);
    }
    assert_true(fake_pass(p->v, p->t, SN_FRAME_STEAL_COMMIT, NULL));
    for (int i = 0; i < N; i++)
        assert_int_equal(owner(p, p->pids[i]), 2);
    assert_true(mover_wait_msgs(3, 1));
    assert_int_equal(mover_msg(3, 0), 4242);
    assert_int_equal(atomic_load(&g_mv.steps_on[3][2]), 1); /* (its one step there: the message) */
    assert_int_equal(atomic_load(&p->v->r.steals_out), 0);  /* (a push is not a steal) */
    for (int i = 0; i < N; i++)
        assert_int_equal(pushed[i], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_handover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offer_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_big_to_move, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thief_leaves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thief_held_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_victim_held_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_many, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

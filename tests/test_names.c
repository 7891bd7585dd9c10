/* test_names.c - names across three nodes in this process (relay/names.c),
 * each a scheduler with a relay and the others as static peers.
 *   race:          one name registered from all three nodes at once, many
 *                  rounds: exactly one winner each round, both losers told
 *                  the winner's PID (SN_NAMES_RACE_ROUNDS, default 200).
 *   monitor_*:     sn_out_name_monitor: noproc at once; the holder's end
 *                  (its reason), unregister (noproc), demonitor (no DOWN),
 *                  a watcher on every node; a watcher that ends first; the
 *                  name's owner leaving: exactly one DOWN each time.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../bench/free_port.h"
#include "relay.h"
#include "rendezvous.h"
#include "schednode/schednode.h"

#define NODES 3
#define SLOTS 8
#define TAG_MON 7
#define TAG_SLEEP 9
#define QUIET_MS 300 /* how long a watcher waits for a second DOWN that must not come */

/* What a process of the test saw, read by the test thread once `state`
 * says so (release: the fields before it are written). */
typedef struct slot {
    atomic_int state; /* 0 running; 1 registered or monitoring; 2 finished */
    int err;          /* the register's or the monitor's completion */
    sn_pid_t self, holder;
    int derr, ndowns, demon;
    sn_pid_t from;
    char dname[64];
} slot_t;

static slot_t slots[SLOTS];
static struct {
    sn_sched_t *sched;
    sn_relay_t *relay;
} nodes[NODES + 1];

/* ------------------------------------------------------------ process types */

typedef struct proc {
    int slot, phase;
    char mode; /* watcher: 'w' watch, 'd' demonitor, 'b' end at once */
    char name[64];
} proc_t;

/* "SLOT NAME" (holder) or "SLOT MODE NAME" (watcher) */
static int p_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    proc_t *p = state;
    char text[128] = "";
    if (!*input || (*input)->len >= sizeof text)
        return SN_EINVAL;
    memcpy(text, (*input)->data, (*input)->len);
    if (!strcmp(method, "hold"))
        return sscanf(text, "%d %63s", &p->slot, p->name) == 2 ? 0 : SN_EINVAL;
    if (!strcmp(method, "watch"))
        return sscanf(text, "%d %c %63s", &p->slot, &p->mode, p->name) == 3 ? 0 : SN_EINVAL;
    return SN_ENOMETHOD;
}

static void finish(slot_t *s, sn_step_out_t *out)
{
    atomic_store_explicit(&s->state, 2, memory_order_release); /* (the fields above are the test's) */
    sn_out_done(out, NULL);
}

/* Registers its name; then "u" unregisters, "f" fails (SN_EFAILED), "e" ends. */
static void holder_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    proc_t *p = state;
    slot_t *s = &slots[p->slot];
    out->status = SN_IDLE;
    if (n == 0) {
        sn_out_name_register(out, 1, p->name);
        out->status = SN_WAIT;
    }
    for (size_t i = 0; i < n; i++) {
        sn_event_t *e = &ev[i];
        if (e->type == SN_EV_YIELD_COMPLETE && e->tag == 1) {
            s->err = e->error;
            s->self = sn_ctx_self(ctx);
            s->holder = SN_PID_NONE;
            sn_payload_get_pid(e->data, &s->holder);
            atomic_store_explicit(&s->state, 1, memory_order_release); /* (err, self, holder written) */
            if (e->error)
                sn_out_done(out, NULL);
        } else if (e->type == SN_EV_MESSAGE && e->data->len == 1) {
            char c = (char)e->data->data[0];
            if (c == 'u') {
                sn_out_name_unregister(out, 2, p->name);
                out->status = SN_WAIT;
            } else if (c == 'f') {
                sn_out_fail(out, SN_EFAILED, "asked to");
            } else {
                sn_out_done(out, NULL);
            }
        } else if (e->type == SN_EV_CANCEL) {
            sn_out_done(out, NULL);
        }
    }
}

/* The watcher's DOWNs: each counted; the first starts the quiet time. */
static void watcher_down(proc_t *p, slot_t *s, const sn_event_t *e, sn_step_out_t *out)
{
    if (e->tag != TAG_MON)
        return;
    if (s->ndowns++ == 0 && p->mode == 'w')
        sn_out_sleep(out, TAG_SLEEP, QUIET_MS);
    s->derr = e->error;
    s->from = e->from;
    snprintf(s->dname, sizeof s->dname, "%.*s", e->data ? (int)e->data->len : 0,
             e->data ? (const char *)e->data->data : "");
}

/* Monitors its name; 'w': waits for the DOWN, then QUIET_MS for another;
 * 'd': demonitors at once, then waits QUIET_MS * 2; 'b': ends. */
static void watcher_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    proc_t *p = state;
    slot_t *s = &slots[p->slot];
    out->status = SN_IDLE;
    if (n == 0) {
        sn_out_name_monitor(out, TAG_MON, p->name);
        out->status = SN_WAIT;
    }
    for (size_t i = 0; i < n; i++) {
        sn_event_t *e = &ev[i];
        if (e->type == SN_EV_DOWN) {
            watcher_down(p, s, e, out);
        } else if (e->type == SN_EV_YIELD_COMPLETE && e->tag == TAG_SLEEP) {
            finish(s, out);
        } else if (e->type == SN_EV_YIELD_COMPLETE && p->phase == 0) {
            p->phase = 1;
            s->err = e->error;
            s->holder = SN_PID_NONE;
            sn_payload_get_pid(e->data, &s->holder);
            if (p->mode == 'd') {
                sn_out_name_demonitor(out, TAG_MON, p->name);
                out->status = SN_WAIT;
                continue;
            }
            atomic_store_explicit(&s->state, 1, memory_order_release); /* (err, holder written) */
            if (p->mode == 'b')
                finish(s, out);
        } else if (e->type == SN_EV_YIELD_COMPLETE && p->phase == 1) { /* the demonitor's */
            s->demon = e->error;
            atomic_store_explicit(&s->state, 1, memory_order_release); /* (err, holder, demon written) */
            sn_out_sleep(out, TAG_SLEEP, 2 * QUIET_MS);
        } else if (e->type == SN_EV_CANCEL) {
            finish(s, out);
        }
    }
}

static const sn_type_t types[] = {
    {.name = "tholder", .version = 1, .state_size = sizeof(proc_t), .init = p_init, .step = holder_step},
    {.name = "twatcher", .version = 1, .state_size = sizeof(proc_t), .init = p_init, .step = watcher_step}};

/* ------------------------------------------------------------ helpers */

static void node_start(uint32_t id, const int *ports)
{
    char listen[64], eps[NODES][64], err[256] = "";
    sn_peer_config_t peers[NODES - 1];
    size_t np = 0;
    for (uint32_t k = 1; k <= NODES; k++) {
        snprintf(eps[k - 1], sizeof eps[0], "tcp://127.0.0.1:%d", ports[k]);
        if (k != id)
            peers[np++] = (sn_peer_config_t){k, eps[k - 1]};
    }
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", ports[id]);
    nodes[id].sched = sn_sched_new(&(sn_sched_config_t){id, 2, 1});
    assert_non_null(nodes[id].sched);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        assert_int_equal(sn_type_register(nodes[id].sched, &types[i]), 0);
    sn_relay_config_t cfg = {.listen = listen,
                             .peers = peers,
                             .npeers = np,
                             .first_serial = 1,
                             .incarnation = (uint64_t)time(NULL),
                             .heartbeat_ms = 100,
                             .down_after_ms = 1500};
    nodes[id].relay = sn_relay_new(nodes[id].sched, &cfg, err, sizeof err);
    if (!nodes[id].relay)
        fail_msg("relay: %s", err);
}

static void node_stop(uint32_t id)
{
    if (!nodes[id].sched)
        return;
    sn_relay_stop_stealing(nodes[id].relay);
    sn_sched_shutdown(nodes[id].sched, 5000);
    sn_relay_leave(nodes[id].relay);
    sn_relay_destroy(&nodes[id].relay);
    sn_sched_destroy(&nodes[id].sched);
}

static void sleep_ms(int ms)
{
    usleep((useconds_t)ms * 1000);
}

/* Waits up to 10 s for the slot to reach `state`. */
static bool wait_slot(int i, int state)
{
    for (int t = 0; t < 10000; t++) {
        if (atomic_load_explicit(&slots[i].state, memory_order_acquire) >= state) /* (its fields are written) */
            return true;
        sleep_ms(1);
    }
    return false;
}

static sn_pid_t spawn(uint32_t node, const char *type, const char *method, int slot, const char *args)
{
    char text[128];
    snprintf(text, sizeof text, "%d %s", slot, args);
    memset(&slots[slot], 0, sizeof slots[slot]);
    sn_payload_t *in = sn_payload_text(text);
    sn_pid_t pid = SN_PID_NONE;
    assert_int_equal(sn_spawn(nodes[node].sched, type, method, &in, NULL, NULL, &pid), 0);
    return pid;
}

static void tell(sn_pid_t pid, const char *what)
{
    sn_payload_t *m = sn_payload_text(what);
    assert_int_equal(sn_send(nodes[pid.node].sched, pid, &m), 0);
}

/* A name with the given prefix whose owner, among `members`, is `owner`. */
static void name_owned(char *out, size_t len, const char *prefix, uint32_t owner, const uint32_t *members, size_t n)
{
    for (int k = 0;; k++) {
        snprintf(out, len, "%s%d", prefix, k);
        uint32_t rank[1] = {0};
        sn__rdv_rank(out, strlen(out), members, n, rank, 1);
        if (rank[0] == owner)
            return;
    }
}

/* Registers `name` from a holder on `node` (slot 0); its PID. */
static sn_pid_t hold(uint32_t node, const char *name)
{
    sn_pid_t pid = spawn(node, "tholder", "hold", 0, name);
    assert_true(wait_slot(0, 1));
    assert_int_equal(slots[0].err, 0);
    return pid;
}

/* A watcher of `name` on `node` in `slot`, monitoring once this returns. */
static void watch(uint32_t node, int slot, char mode, const char *name)
{
    char args[96];
    snprintf(args, sizeof args, "%c %s", mode, name);
    spawn(node, "twatcher", "watch", slot, args);
    assert_true(wait_slot(slot, 1));
}

/* ------------------------------------------------------------ tests */

static int setup(void **st)
{
    (void)st;
    sn_relay_set_log_level(1);
    int ports[NODES + 1];
    for (int k = 1; k <= NODES; k++)
        ports[k] = free_port();
    for (uint32_t k = NODES; k >= 1; k--)
        node_start(k, ports);
    sleep_ms(500); /* (each registry looks at the membership every 100 ms) */
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    for (uint32_t k = 1; k <= NODES; k++)
        node_stop(k);
    return 0;
}

/* Each round: a holder on every node registers one name at once. */
static void race(void **st)
{
    (void)st;
    const char *env = getenv("SN_NAMES_RACE_ROUNDS");
    int rounds = env ? atoi(env) : 200;
    for (int r = 0; r < rounds; r++) {
        char name[32];
        snprintf(name, sizeof name, "race%d", r);
        for (uint32_t k = 1; k <= NODES; k++)
            memset(&slots[k], 0, sizeof slots[k]);
        sn_payload_t *in[NODES + 1];
        char text[64];
        for (uint32_t k = 1; k <= NODES; k++) {
            snprintf(text, sizeof text, "%u %s", k, name);
            in[k] = sn_payload_text(text);
        }
        for (uint32_t k = 1; k <= NODES; k++) /* (as close together as a thread can) */
            assert_int_equal(sn_spawn(nodes[k].sched, "tholder", "hold", &in[k], NULL, NULL, NULL), 0);
        int winners = 0;
        sn_pid_t winner = SN_PID_NONE;
        for (uint32_t k = 1; k <= NODES; k++) {
            assert_true(wait_slot((int)k, 1));
            if (slots[k].err == 0)
                winners++, winner = slots[k].self;
        }
        if (winners != 1)
            fail_msg("round %d: %d winners", r, winners);
        for (uint32_t k = 1; k <= NODES; k++)
            if (slots[k].err != 0) {
                assert_int_equal(slots[k].err, SN_EEXIST);
                assert_true(sn_pid_eq(slots[k].holder, winner));
            }
        tell(winner, "e");
    }
    print_message("race: %d rounds, one winner each, both losers told its PID\n", rounds);
}

static void monitor_noproc(void **st)
{
    (void)st;
    watch(1, 1, 'w', "nobody");
    assert_int_equal(slots[1].err, SN_ENOPROC);
    assert_true(wait_slot(1, 2));
    assert_int_equal(slots[1].ndowns, 1);
    assert_int_equal(slots[1].derr, SN_ENOPROC);
    assert_true(sn_pid_is_none(slots[1].from));
    assert_string_equal(slots[1].dname, "nobody");
}

/* Holder on node 2, owner node 3, watcher on node 1; the holder fails. */
static void monitor_holder_ends(void **st)
{
    (void)st;
    const uint32_t all[] = {1, 2, 3};
    char name[32];
    name_owned(name, sizeof name, "ends", 3, all, 3);
    sn_pid_t h = hold(2, name);
    watch(1, 1, 'w', name);
    assert_int_equal(slots[1].err, 0);
    assert_true(sn_pid_eq(slots[1].holder, h));
    tell(h, "f");
    assert_true(wait_slot(1, 2));
    assert_int_equal(slots[1].ndowns, 1);
    assert_int_equal(slots[1].derr, SN_EFAILED);
    assert_true(sn_pid_eq(slots[1].from, h));
    assert_string_equal(slots[1].dname, name);
}

/* A watcher on each node (one of them the owner); the holder unregisters. */
static void monitor_unregister(void **st)
{
    (void)st;
    const uint32_t all[] = {1, 2, 3};
    char name[32];
    name_owned(name, sizeof name, "unreg", 1, all, 3);
    sn_pid_t h = hold(3, name);
    for (uint32_t k = 1; k <= NODES; k++)
        watch(k, (int)k, 'w', name);
    tell(h, "u");
    for (int k = 1; k <= NODES; k++) {
        assert_true(wait_slot(k, 2));
        assert_int_equal(slots[k].ndowns, 1);
        assert_int_equal(slots[k].derr, SN_ENOPROC);
        assert_true(sn_pid_eq(slots[k].from, h));
    }
    tell(h, "e");
}

/* Demonitor: 0, then no DOWN when the holder ends; a watcher that ended
 * first is forgotten (ASan: nothing leaks, nothing is delivered to it). */
static void monitor_demonitor(void **st)
{
    (void)st;
    sn_pid_t h = hold(2, "demon");
    watch(1, 1, 'd', "demon");
    assert_int_equal(slots[1].err, 0);
    assert_int_equal(slots[1].demon, 0);
    watch(3, 2, 'b', "demon");
    assert_true(wait_slot(2, 2));
    watch(3, 3, 'w', "demon");
    tell(h, "e");
    assert_true(wait_slot(1, 2));
    assert_int_equal(slots[1].ndowns, 0);
    assert_true(wait_slot(3, 2));
    assert_int_equal(slots[3].ndowns, 1);
    assert_int_equal(slots[3].derr, 0);
}

/* The name's owner (node 3) leaves; holder on 1, watcher on 2: the new
 * owner (the copy's node) gives the one DOWN when the holder ends. */
static void monitor_owner_leaves(void **st)
{
    (void)st;
    const uint32_t all[] = {1, 2, 3};
    char name[32];
    name_owned(name, sizeof name, "left", 3, all, 3);
    sn_pid_t h = hold(1, name);
    watch(2, 1, 'w', name);
    assert_int_equal(slots[1].err, 0);
    node_stop(3);
    sleep_ms(1000); /* (the others see it leave; their registries look every 100 ms) */
    tell(h, "f");
    assert_true(wait_slot(1, 2));
    assert_int_equal(slots[1].ndowns, 1);
    assert_int_equal(slots[1].derr, SN_EFAILED);
    assert_true(sn_pid_eq(slots[1].from, h));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(race),
        cmocka_unit_test(monitor_noproc),
        cmocka_unit_test(monitor_holder_ends),
        cmocka_unit_test(monitor_unregister),
        cmocka_unit_test(monitor_demonitor),
        cmocka_unit_test(monitor_owner_leaves),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* movers.h - process types for the tests of stealing and locating
 * (test_steal.c, test_locate.c): "mover" records where it runs and the
 * messages it gets, in order; "holder" keeps its node's one worker busy
 * until released, so that movers queued behind it stay Ready (only Ready
 * processes move). Workers write the records; the test thread reads them
 * (atomics: a mover runs on one worker at a time, but moves between
 * threads and nodes).
 */
#ifndef SN_MOVERS_H
#define SN_MOVERS_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "schednode/schednode.h"
#include "testutil.h"

#define MOVERS_MAX 16
#define MOVER_MSGS 16
#define MOVER_NODES 8

static struct {
    atomic_uint ran_on[MOVERS_MAX];               /* the node of its last step (0: none yet) */
    atomic_int steps_on[MOVERS_MAX][MOVER_NODES]; /* its steps on each node */
    atomic_int nmsgs[MOVERS_MAX];                 /* messages it got (release: after msgs) */
    atomic_ullong msgs[MOVERS_MAX][MOVER_MSGS];   /* their values, in the order it got them */
    atomic_int hold[MOVER_NODES], holding[MOVER_NODES];
    atomic_int ndowns[MOVERS_MAX];               /* DOWNs it got (release: after downs) */
    atomic_ullong downs[MOVERS_MAX][MOVER_MSGS]; /* each one's tag << 16 | its error (negated) */
} g_mv;

typedef struct mover {
    uint64_t index;
} mover_t;

static int mover_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    mover_t *m = state;
    return sn_payload_get_u64(*input, &m->index) == 0 && m->index < MOVERS_MAX ? 0 : SN_EINVAL;
}

static void mover_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    mover_t *m = state;
    uint32_t node = sn_sched_node_id(sn_ctx_sched(ctx));
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (ev[i].type == SN_EV_MESSAGE && sn_payload_get_u64(ev[i].data, &v) == 0) {
            int k = atomic_load_explicit(&g_mv.nmsgs[m->index], memory_order_relaxed);
            if (k < MOVER_MSGS)
                atomic_store_explicit(&g_mv.msgs[m->index][k], v, memory_order_relaxed);
            atomic_store_explicit(&g_mv.nmsgs[m->index], k + 1, memory_order_release);
        } else if (ev[i].type == SN_EV_DOWN) {
            int k = atomic_load_explicit(&g_mv.ndowns[m->index], memory_order_relaxed);
            if (k < MOVER_MSGS)
                atomic_store_explicit(&g_mv.downs[m->index][k], ev[i].tag << 16 | (uint16_t)-ev[i].error,
                                      memory_order_relaxed);
            atomic_store_explicit(&g_mv.ndowns[m->index], k + 1, memory_order_release);
        } else if (ev[i].type == SN_EV_CANCEL) {
            out->status = SN_DONE;
        }
    }
    if (node < MOVER_NODES)
        atomic_fetch_add(&g_mv.steps_on[m->index][node], 1);
    atomic_store(&g_mv.ran_on[m->index], node);
}

static int mover_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(mover_t));
    return *out ? 0 : SN_ENOMEM;
}

static int mover_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    if (in->len != sizeof(mover_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(mover_t));
    return 0;
}

static const sn_type_t mover_type = {"mover",    1,    sizeof(mover_t), mover_init,
                                     mover_step, NULL, mover_marshal,   mover_unmarshal};

static int holder_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return 0;
}

static void holder_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    uint32_t node = sn_sched_node_id(sn_ctx_sched(ctx)) % MOVER_NODES;
    atomic_store(&g_mv.holding[node], 1);
    while (atomic_load(&g_mv.hold[node]))
        sleep_ms(1);
    sn_out_done(out, NULL);
}

static const sn_type_t holder_type = {"holder", 1, 8, holder_init, holder_step, NULL, NULL, NULL};

static const sn_type_t *const mover_types[] = {&mover_type, &holder_type};

static inline void movers_reset(void)
{
    memset(&g_mv, 0, sizeof g_mv);
}

/* Keeps node's one worker busy (a holder) until movers_release(node). */
static inline void movers_hold(sn_sched_t *s)
{
    uint32_t node = sn_sched_node_id(s);
    atomic_store(&g_mv.hold[node], 1);
    assert_int_equal(sn_spawn(s, "holder", "run", NULL, NULL, NULL, NULL), 0);
    assert_true(wait_count(&g_mv.holding[node], 1, WAIT_MS));
}

static inline void movers_release(uint32_t node)
{
    atomic_store(&g_mv.hold[node], 0);
}

/* A mover with this index on s. */
static inline sn_pid_t mover_spawn(sn_sched_t *s, uint64_t index)
{
    sn_payload_t *in = sn_payload_u64(index);
    sn_pid_t pid;
    assert_int_equal(sn_spawn(s, "mover", "run", &in, NULL, NULL, &pid), 0);
    return pid;
}

/* Waits until mover `index` has stepped on some node; returns the node. */
static inline uint32_t mover_wait_ran(uint64_t index)
{
    uint64_t end = deadline_ns(WAIT_MS);
    while (atomic_load(&g_mv.ran_on[index]) == 0 && now_ns() < end)
        sleep_ms(1);
    return atomic_load(&g_mv.ran_on[index]);
}

/* Waits until mover `index` has got `n` messages. */
static inline bool mover_wait_msgs(uint64_t index, int n)
{
    return wait_count(&g_mv.nmsgs[index], n, WAIT_MS);
}

static inline uint64_t mover_msg(uint64_t index, int k)
{
    (void)atomic_load_explicit(&g_mv.nmsgs[index], memory_order_acquire);
    return atomic_load_explicit(&g_mv.msgs[index][k], memory_order_relaxed);
}

/* Sends the u64 v to pid from outside any process on s. */
static inline void send_u64(sn_sched_t *s, sn_pid_t pid, uint64_t v)
{
    sn_payload_t *p = sn_payload_u64(v);
    assert_int_equal(sn_send(s, pid, &p), 0);
}

#endif

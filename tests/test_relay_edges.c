/* test_relay_edges.c - the edges of the cross-node data path, two nodes in
 * this process (twonodes.h) with small limits: every message is delivered
 * in order or comes back to its sender with its error and payload.
 *   sizes:         0 B up to max-message + 1, interleaved with small ones
 *                  from three senders: the biggest come back as too big,
 *                  the rest arrive whole and in order (batches over
 *                  max-frame go as Parts: relay/peer.c, send_pending)
 *   stolen_receiver: the same sizes, from both nodes, to a sink that is
 *                  stolen while they stream (stealing on: the busy
 *                  node's Ready sink goes to the idle one): its queued
 *                  messages ride in the handover's commit (as Parts when
 *                  over max-frame), later ones are forwarded; every one
 *                  arrives once, in order, or comes back as too big
 *   dropped_frame: node 2 drops three of node 1's batches (a test hook),
 *                  the last one last of all:
 *                  their sends come back as dropped, no later ack frees
 *                  them unseen (relay/inbound.c, in_order)
 *   looped_send_returns: node 2 takes node 1's sends as come round too
 *                  many nodes: each one's error still reaches its sender
 *   backpressure:  node 2 is away while a sender streams to it: the
 *                  sender waits once the backlog is full (relay/peer.c,
 *                  backlog_changed), and all of it arrives in order once
 *                  node 2 comes; with --backlog-full fail, what does
 *                  not fit comes back at once as backlog full instead
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

#include "relay.h"
#include "schednode/schednode.h"
#include "twonodes.h"

#define MAX_FRAME (64u << 10)
#define MAX_MSG (2u << 20)
#define SENDERS 3
#define MAX_SENDS 4096

/* What the sinks saw and the senders got back (under mu). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t next[SENDERS];         /* the sequence number each sender's next delivery may have at least */
    uint64_t delivered[SENDERS];    /* deliveries */
    uint64_t returned[SENDERS];     /* errors back */
    int err_of[SENDERS][MAX_SENDS]; /* the error each send came back with (0: none) */
    bool got[SENDERS][MAX_SENDS];
    char bad[256]; /* the first thing wrong */
} seen;
static _Atomic uint64_t sent_count; /* backpressure: sends made */
/* stolen_receiver: the sources stop sending; the spinners of node
 * spin_on stop (0: all); the node (scheduler) the sink ran its last step
 * on, and how often that changed */
static _Atomic bool sources_stop;
static _Atomic uint32_t spin_on;
static sn_sched_t *_Atomic sink_on;
static _Atomic uint32_t sink_moves;
static _Atomic uint32_t sources_done;
/* the paced sources' gap between sends (ms): longer under a sanitizer,
 * whose slower relay would otherwise have the link full, and the thief's
 * accept, which waits its turn behind what is queued, late for the
 * victim's offer (relay/steal.c: OFFER_TIMEOUT_NS) */
static uint64_t pace_ms = 2;
static uint32_t sent_by[SENDERS]; /* (under mu) what each paced source sent in all */

static void wrong(const char *fmt, ...)
{
    if (seen.bad[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(seen.bad, sizeof seen.bad, fmt, ap);
    va_end(ap);
}

/* The payload of send seq of sender idx: size bytes of a pattern only it
 * has. It repeats every 256 bytes: written and checked a block at a time
 * (memcpy, memcmp), which keeps the sanitizer builds quick. */
static void pattern(uint32_t idx, uint32_t seq, unsigned char block[256])
{
    for (size_t i = 0; i < 256; i++)
        block[i] = (unsigned char)(idx * 131u + seq * 31u + i);
}

static sn_payload_t *payload_for(uint32_t idx, uint32_t seq, size_t size)
{
    sn_payload_t *p = sn_payload_new(SN_CT_BYTES, NULL, size);
    unsigned char block[256];
    pattern(idx, seq, block);
    for (size_t i = 0; p && i < size; i += 256)
        memcpy(p->data + i, block, size - i < 256 ? size - i : 256);
    return p;
}

static bool payload_ok(uint32_t idx, uint32_t seq, const sn_payload_t *p, size_t size)
{
    if (!p || p->len != size)
        return false;
    unsigned char block[256];
    pattern(idx, seq, block);
    for (size_t i = 0; i < size; i += 256)
        if (memcmp(p->data + i, block, size - i < 256 ? size - i : 256) != 0)
            return false;
    return true;
}

/* The size of send seq in the sizes case: every fourth a size from the
 * edges (0, 1, 64 KiB, max-frame - 1 and + 1, max-message and + 1), the
 * others 8 bytes. */
static size_t size_for(uint32_t seq)
{
    static const size_t edge[] = {0, 1, 64u << 10, MAX_FRAME - 1, MAX_FRAME + 1, MAX_MSG, MAX_MSG + 1};
    return seq % 4 ? 8 : edge[(seq / 4) % (sizeof edge / sizeof edge[0])];
}

/* A sender: input (sink, idx, count, mode); mode 0 sends one message per
 * step (sizes), 1 one and waits for its echo or its error (dropped_frame),
 * 2 four of 16 KiB per step (backpressure), 3 one of the sizes of mode 0
 * every pace_ms until sources_stop (stolen_receiver: its node stays idle
 * enough to steal). The tag is the sequence number. */
#define SLEEP_TAG UINT64_MAX
typedef struct src {
    sn_pid_t sink;
    uint32_t idx, count, mode, next, answered;
} src_t;

static int src_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    src_t *s = state;
    if (!*input || (*input)->len != sizeof s->sink + 12)
        return SN_EINVAL;
    memcpy(&s->sink, (*input)->data, sizeof s->sink);
    memcpy(&s->idx, (*input)->data + sizeof s->sink, 4);
    memcpy(&s->count, (*input)->data + sizeof s->sink + 4, 4);
    memcpy(&s->mode, (*input)->data + sizeof s->sink + 8, 4);
    return strcmp(method, "run") == 0 ? 0 : SN_ENOMETHOD;
}

static size_t src_size(const src_t *s, uint32_t seq)
{
    return s->mode == 0 || s->mode == 3 ? size_for(seq) : s->mode == 1 ? 8 : 16u << 10;
}

static void src_send(src_t *s, sn_step_out_t *out)
{
    uint32_t seq = s->next++;
    sn_out_send(out, s->sink, (uint64_t)s->idx << 32 | seq,
                &(sn_payload_t *){payload_for(s->idx, seq, src_size(s, seq))});
    atomic_fetch_add_explicit(&sent_count, 1, memory_order_relaxed);
}

static void src_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    src_t *s = state;
    bool woke = s->mode == 3 && s->next == 0 && s->answered == 0; /* (mode 3: its first step sends) */
    for (size_t i = 0; i < n; i++) {
        woke |= ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == SLEEP_TAG;
        if (ev[i].type == SN_EV_MESSAGE) { /* an echo (dropped_frame) */
            s->answered++;
            continue;
        }
        if (ev[i].type != SN_EV_YIELD_COMPLETE || !ev[i].error)
            continue;
        uint32_t seq = (uint32_t)ev[i].tag;
        pthread_mutex_lock(&mu);
        if (seq >= MAX_SENDS || seen.err_of[s->idx][seq])
            wrong("sender %u: send %u came back twice", s->idx, seq);
        else if (!payload_ok(s->idx, seq, ev[i].data, src_size(s, seq)))
            wrong("sender %u: send %u came back (%s) without its payload", s->idx, seq, sn_strerror(ev[i].error));
        else
            seen.err_of[s->idx][seq] = ev[i].error;
        seen.returned[s->idx]++;
        pthread_mutex_unlock(&mu);
        s->answered++;
    }
    out->status = SN_CONTINUE;
    if (s->mode == 3) { /* paced, until told */
        if (woke && !atomic_load(&sources_stop) && s->next < MAX_SENDS) {
            src_send(s, out);
            sn_out_sleep(out, SLEEP_TAG, pace_ms);
        } else if (woke) {
            pthread_mutex_lock(&mu);
            sent_by[s->idx] = s->next;
            pthread_mutex_unlock(&mu);
            atomic_fetch_add(&sources_done, 1);
        }
        out->status = SN_IDLE;
        return;
    }
    if (s->mode == 1) { /* one at a time */
        if (s->answered == s->next && s->next < s->count)
            src_send(s, out);
        out->status = s->next == s->count && s->answered == s->count ? SN_DONE : SN_IDLE;
        return;
    }
    for (uint32_t k = 0; k < (s->mode == 2 ? 4u : 1u) && s->next < s->count; k++)
        src_send(s, out);
    if (s->next == s->count)
        out->status = SN_IDLE; /* (errors may still come back) */
}

/* The sink: checks each message's payload and that each sender's arrive
 * in order; echoes to its sender in dropped_frame (input byte 0 set);
 * burns 200 us of CPU a message in stolen_receiver (byte 1 set), so that
 * its messages queue and it stays Ready. Movable: its state is two flags. */
typedef struct sink {
    bool echo, burn;
} sink_t;

static int sink_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    sink_t *k = state;
    k->echo = *input && (*input)->len >= 1 && (*input)->data[0] == 1;
    k->burn = *input && (*input)->len >= 2 && (*input)->data[1] == 1;
    return strcmp(method, "run") == 0 ? 0 : SN_ENOMETHOD;
}

static int sink_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    (void)ctx;
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(sink_t));
    return *out ? 0 : SN_ENOMEM;
}

static int sink_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    (void)ctx;
    if (in->len != sizeof(sink_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(sink_t));
    return 0;
}

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static void burn_us(uint64_t us)
{
    for (uint64_t end = now_us() + us; now_us() < end;)
        ;
}

static void sink_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    sink_t *k = state;
    bool echo = k->echo;
    sn_sched_t *was = atomic_exchange(&sink_on, sn_ctx_sched(ctx));
    if (was && was != sn_ctx_sched(ctx))
        atomic_fetch_add(&sink_moves, 1);
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE)
            continue;
        uint32_t seq = (uint32_t)ev[i].tag, idx = (uint32_t)(ev[i].tag >> 32);
        size_t len = ev[i].data ? ev[i].data->len : 0;
        pthread_mutex_lock(&mu);
        if (idx >= SENDERS || seq >= MAX_SENDS)
            wrong("a message (tag %u, %zu bytes) no sender sent", seq, len);
        else if (!payload_ok(idx, seq, ev[i].data, echo ? 8 : len) || (!echo && len != size_for(seq) && len != 16384))
            wrong("sender %u's message %u: %zu bytes, not the ones sent", idx, seq, len);
        else if (seen.got[idx][seq])
            wrong("sender %u's message %u delivered twice", idx, seq);
        else if (seq < seen.next[idx])
            wrong("sender %u's message %u delivered after %llu", idx, seq, (unsigned long long)seen.next[idx] - 1);
        else {
            seen.got[idx][seq] = true;
            seen.next[idx] = seq + 1;
            seen.delivered[idx]++;
        }
        pthread_mutex_unlock(&mu);
        if (echo)
            sn_out_send(out, ev[i].from, 0, &(sn_payload_t *){sn_payload_u64(seq)});
        if (k->burn)
            burn_us(200);
    }
}

/* A process that cannot move (no marshal) and keeps its node's workers
 * busy: input the node it runs on; it ends once spin_on names another. */
static int spin_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    if (!*input || (*input)->len != 4)
        return SN_EINVAL;
    memcpy(state, (*input)->data, 4);
    return strcmp(method, "run") == 0 ? 0 : SN_ENOMETHOD;
}

static void spin_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx, (void)ev, (void)n;
    burn_us(2000);
    out->status = atomic_load(&spin_on) == *(uint32_t *)state ? SN_CONTINUE : SN_DONE;
}

static const sn_type_t types[] = {
    {.name = "esrc", .version = 1, .state_size = sizeof(src_t), .init = src_init, .step = src_step},
    {.name = "esink",
     .version = 1,
     .state_size = sizeof(sink_t),
     .init = sink_init,
     .step = sink_step,
     .marshal = sink_marshal,
     .unmarshal = sink_unmarshal},
    {.name = "espin", .version = 1, .state_size = sizeof(uint32_t), .init = spin_init, .step = spin_step}};

static void reset(void)
{
    memset(&seen, 0, sizeof seen);
    atomic_store(&sent_count, 0);
    tn_limits.max_frame = MAX_FRAME;
    tn_limits.max_message = MAX_MSG;
    tn_limits.max_backlog = 0;
    tn_limits.backlog_fails = 0;
    tn_limits.steal = 0;
    sn__relay_test_drop = NULL;
    sn__relay_test_hops = NULL;
    atomic_store(&sources_stop, false);
    atomic_store(&sources_done, 0);
    atomic_store(&spin_on, 0);
    atomic_store(&sink_on, NULL);
    atomic_store(&sink_moves, 0);
    memset(sent_by, 0, sizeof sent_by);
}

static void spawn_src(node_t *n, sn_pid_t sink, uint32_t idx, uint32_t count, uint32_t mode)
{
    unsigned char in[sizeof sink + 12];
    memcpy(in, &sink, sizeof sink);
    memcpy(in + sizeof sink, &idx, 4);
    memcpy(in + sizeof sink + 4, &count, 4);
    memcpy(in + sizeof sink + 8, &mode, 4);
    sn_payload_t *input = sn_payload_new(SN_CT_BYTES, in, sizeof in);
    sn_pid_t pid;
    assert_int_equal(sn_spawn(n->sched, "esrc", "run", &input, NULL, NULL, &pid), 0);
}

/* Waits (up to 60 s) until every send of the first `senders` is delivered
 * or returned (count each, or 0: what each sent, sent_by); false on the
 * timeout. */
static bool settled(uint32_t senders, uint32_t count)
{
    for (int ms = 0; ms < 60000; ms += 10) {
        pthread_mutex_lock(&mu);
        bool done = true;
        for (uint32_t k = 0; k < senders; k++)
            done &= seen.delivered[k] + seen.returned[k] >= (count ? count : sent_by[k]);
        pthread_mutex_unlock(&mu);
        if (done || seen.bad[0])
            return done;
        usleep(10000);
    }
    return false;
}

static void check_sizes(bool done, uint32_t count, bool near);

static void test_sizes(void **unused)
{
    (void)unused;
    reset();
    node_t n1, n2;
    two_nodes(&n1, &n2, types, sizeof types / sizeof types[0]);
    sn_pid_t sink;
    assert_int_equal(sn_spawn(n2.sched, "esink", "run", NULL, NULL, NULL, &sink), 0);
    const uint32_t count = 120;
    for (uint32_t k = 0; k < SENDERS; k++)
        spawn_src(&n1, sink, k, count, 0);
    bool done = settled(SENDERS, count);
    node_stop(&n1);
    node_stop(&n2);
    check_sizes(done, count, false);
}

/* Every send of the sizes (count each, or 0: sent_by) arrived whole and in
 * order (the sink checked), or came back as too big if it was; if the sink
 * was `near` (on its sender's node) a while, one over max-message may have
 * arrived (the limit is to another node's: docs/guarantees.md). */
static void check_sizes(bool done, uint32_t count, bool near)
{
    if (seen.bad[0])
        fail_msg("%s", seen.bad);
    for (uint32_t k = 0; k < SENDERS; k++) {
        uint32_t sent = count ? count : sent_by[k];
        if (!done)
            fail_msg("sender %u: %llu delivered, %llu returned of %u", k, (unsigned long long)seen.delivered[k],
                     (unsigned long long)seen.returned[k], sent);
        for (uint32_t seq = 0; seq < sent; seq++) {
            bool big = size_for(seq) > MAX_MSG;
            if (big && seen.err_of[k][seq] != SN_ETOOBIG && !(near && seen.got[k][seq]))
                fail_msg("sender %u: send %u of %zu bytes: error %d, not too big", k, seq, size_for(seq),
                         seen.err_of[k][seq]);
            if (!big && !seen.got[k][seq])
                fail_msg("sender %u: send %u of %zu bytes not delivered (error %s)", k, seq, size_for(seq),
                         sn_strerror(seen.err_of[k][seq]));
        }
    }
}

/* Waits (up to 60 s) for the sink's moves; false on the timeout. */
static bool moved_at_least(uint32_t moves)
{
    for (int ms = 0; ms < 60000; ms += 10) {
        if (atomic_load(&sink_moves) >= moves)
            return true;
        usleep(10000);
    }
    return false;
}

/* The sink on node 2, whose workers spinners keep busy; senders 0 and 1
 * on node 1, paced (it stays idle enough to steal), sender 2 on node 2:
 * node 1 steals the Ready sink, and the streams go on a second more, from
 * each node to the other. */
static void test_stolen_receiver(void **unused)
{
    (void)unused;
    reset();
    tn_limits.steal = 1;
    pace_ms = getenv("SN_SANITIZE") ? 10 : 2;
    node_t n1, n2;
    two_nodes(&n1, &n2, types, sizeof types / sizeof types[0]);
    atomic_store(&spin_on, 2);
    for (int i = 0; i < 8; i++)
        assert_int_equal(sn_spawn(n2.sched, "espin", "run",
                                  &(sn_payload_t *){sn_payload_new(SN_CT_BYTES, &(uint32_t){2}, 4)}, NULL, NULL, NULL),
                         0);
    sn_pid_t sink;
    sn_payload_t *in = sn_payload_new(SN_CT_BYTES, (unsigned char[]){0, 1}, 2);
    assert_int_equal(sn_spawn(n2.sched, "esink", "run", &in, NULL, NULL, &sink), 0);
    for (uint32_t k = 0; k < SENDERS; k++)
        spawn_src(k < 2 ? &n1 : &n2, sink, k, 0, 3);
    bool moved = moved_at_least(1);
    usleep(1000000);
    atomic_store(&sources_stop, true);
    for (int ms = 0; ms < 30000 && atomic_load(&sources_done) < SENDERS; ms += 10)
        usleep(10000);
    bool done = atomic_load(&sources_done) == SENDERS && settled(SENDERS, 0);
    atomic_store(&spin_on, 0);
    node_stop(&n1);
    node_stop(&n2);
    print_message("stolen_receiver: the sink moved %u times; %u, %u and %u sends\n", atomic_load(&sink_moves),
                  sent_by[0], sent_by[1], sent_by[2]);
    check_sizes(done, 0, true);
    if (!moved)
        fail_msg("the sink never moved (stealing from its busy node)");
}

/* Node 2 drops node 1's batches 5, 9 and 40: in a ping-pong, one
 * message each, the last one last of all (nothing follows it but the
 * sender's empty probe: relay/peer.c, probe_gaps). */
static bool drop_three(uint32_t at, uint32_t from, uint64_t seq)
{
    return at == 2 && from == 1 && (seq == 5 || seq == 9 || seq == 40);
}

static void test_dropped_frame(void **unused)
{
    (void)unused;
    reset();
    sn__relay_test_drop = drop_three;
    node_t n1, n2;
    two_nodes(&n1, &n2, types, sizeof types / sizeof types[0]);
    sn_pid_t sink;
    sn_payload_t *echo = sn_payload_new(SN_CT_BYTES, (unsigned char[]){1}, 1);
    assert_int_equal(sn_spawn(n2.sched, "esink", "run", &echo, NULL, NULL, &sink), 0);
    const uint32_t count = 40;
    spawn_src(&n1, sink, 0, count, 1);
    bool done = settled(1, count);
    node_stop(&n1);
    node_stop(&n2);
    sn__relay_test_drop = NULL;
    if (seen.bad[0])
        fail_msg("%s", seen.bad);
    if (!done)
        fail_msg("%llu delivered, %llu returned of %u: a dropped batch's sends neither arrived nor came back",
                 (unsigned long long)seen.delivered[0], (unsigned long long)seen.returned[0], count);
    assert_int_equal(seen.returned[0], 3);
    assert_int_equal(seen.err_of[0][count - 1], SN_EDROPPED); /* (the last: told by the probe) */
    for (uint32_t seq = 0; seq < count; seq++)
        if (seen.err_of[0][seq] && (seen.err_of[0][seq] != SN_EDROPPED || seen.got[0][seq]))
            fail_msg("send %u: error %s, delivered %d", seq, sn_strerror(seen.err_of[0][seq]), seen.got[0][seq]);
}

/* Node 2 counts each send from node 1 as come round MAX_HOPS nodes
 * already (a path that loops): what it passes on goes no further, but an
 * error it returns starts a path of its own (relay/route.c,
 * sn__relay_return_error). */
static uint32_t looped(uint32_t at, uint32_t from)
{
    return at == 2 && from == 1 ? 16 : 0;
}

static void test_looped_send_returns(void **unused)
{
    (void)unused;
    reset();
    sn__relay_test_hops = looped;
    node_t n1, n2;
    two_nodes(&n1, &n2, types, sizeof types / sizeof types[0]);
    sn_pid_t sink;
    assert_int_equal(sn_spawn(n2.sched, "esink", "run", NULL, NULL, NULL, &sink), 0);
    sink.serial += 1000; /* (none has it: node 2 returns each send as noproc) */
    const uint32_t count = 20;
    spawn_src(&n1, sink, 0, count, 1);
    bool done = settled(1, count);
    node_stop(&n1);
    node_stop(&n2);
    sn__relay_test_hops = NULL;
    if (!done)
        fail_msg("%llu of %u sends came back: the error of a send that came round too often was lost",
                 (unsigned long long)seen.returned[0], count);
    for (uint32_t seq = 0; seq < count; seq++)
        assert_int_equal(seen.err_of[0][seq], SN_ENOPROC);
}

static void backpressure(bool fails)
{
    reset();
    tn_limits.max_backlog = 1u << 20;
    tn_limits.backlog_fails = fails;
    const uint32_t count = 4096; /* 64 MiB in all, 16 KiB each */
    node_t n1, n2;
    sn_relay_set_log_level(1);
    int p1 = free_port(), p2 = free_port();
    /* node 2's scheduler and sink first: the sink's PID is known before
     * node 2 listens (its first serial) */
    n1.sched = NULL;
    n2.sched = sn_sched_new(&(sn_sched_config_t){2, 2, 1});
    assert_non_null(n2.sched);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        assert_int_equal(sn_type_register(n2.sched, &types[i]), 0);
    sn_pid_t sink;
    assert_int_equal(sn_spawn(n2.sched, "esink", "run", NULL, NULL, NULL, &sink), 0);
    node_start(&n1, 1, p1, 2, p2, types, sizeof types / sizeof types[0]);
    spawn_src(&n1, sink, 0, count, 2);
    usleep(1500000); /* node 2 away: what the sender could send */
    for (int ms = 0; fails && ms < 60000 && atomic_load(&sent_count) < count; ms += 10)
        usleep(10000); /* (failing, it is never held: it gets through them all, slowly under TSan) */
    uint64_t away = atomic_load(&sent_count);
    usleep(500000);
    uint64_t later = atomic_load(&sent_count);
    node_start(&n2, 2, p2, 1, p1, types, sizeof types / sizeof types[0]);
    bool done = settled(1, count);
    node_stop(&n1);
    node_stop(&n2);
    print_message("backpressure (%s): %llu of %u sends of 16 KiB made while node 2 was away (backlog limit 1 MiB), "
                  "%llu half a second later; %llu delivered, %llu came back (backlog full)\n",
                  fails ? "fail" : "wait", (unsigned long long)away, count, (unsigned long long)later,
                  (unsigned long long)seen.delivered[0], (unsigned long long)seen.returned[0]);
    if (seen.bad[0])
        fail_msg("%s", seen.bad);
    if (!done)
        fail_msg("%llu delivered, %llu returned of %u", (unsigned long long)seen.delivered[0],
                 (unsigned long long)seen.returned[0], count);
    if (fails) {
        /* --backlog-full fail: the sender is never held; what did not fit
         * came back as backlog full, each with its payload, the rest
         * arrived in order (the sink checks the order) */
        assert_int_equal(away, count);
        assert_true(seen.returned[0] > 0);
        for (uint32_t seq = 0; seq < count; seq++)
            if (seen.err_of[0][seq] && seen.err_of[0][seq] != SN_EFULL)
                fail_msg("send %u came back with %s", seq, sn_strerror(seen.err_of[0][seq]));
        return;
    }
    assert_int_equal(seen.returned[0], 0);
    /* the sender waited: it made a few MiB at most of its 64 (the limit,
     * and what was queued before the relay saw the backlog full), and
     * none while it was held */
    if (away * (16u << 10) > (8u << 20) || later != away)
        fail_msg("the sender was not held: %llu sends (%llu MiB) while node 2 was away, %llu after",
                 (unsigned long long)away, (unsigned long long)(away * 16 / 1024), (unsigned long long)later);
}

static void test_backpressure(void **unused)
{
    (void)unused;
    backpressure(false);
}

static void test_backlog_full_fails(void **unused)
{
    (void)unused;
    backpressure(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sizes),         cmocka_unit_test(test_stolen_receiver),
                                       cmocka_unit_test(test_dropped_frame), cmocka_unit_test(test_looped_send_returns),
                                       cmocka_unit_test(test_backpressure),  cmocka_unit_test(test_backlog_full_fails)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

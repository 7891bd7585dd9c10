/* test_sendrun.c - coalesced sends (dispatch.c): a step's run of send
 * yields goes out grouped by receiver, one chain per receiver. Stress: senders spray messages at more receivers than a
 * flush groups at once, with shared and empty payloads, sends to a dead PID and to another node mixed in, and runs cut
 * by other yields; every message must arrive once, in order per sender and receiver, and every undeliverable one come
 * back once, in order, with its payload. One receiver quits half way with chains still queued: what it did not take
 * comes back, each message exactly once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

#define SENDERS 6
#define RECEIVERS (SN__SEND_GROUPS + 16) /* more than one flush holds */
#define QUITTER (RECEIVERS + 2)          /* ends after QUIT_AFTER messages */
#define TARGETS (RECEIVERS + 3)          /* + a dead PID here, + a PID of node 2 (no relay: noproc), + QUITTER */
#define QUIT_AFTER 1000
#define PER_STEP 250
#define TAG_MSG 1
#define TAG_END 2
#define TAG_SLEEP 3

static int per_sender(void)
{
    const char *e = getenv("SN_SENDRUN_MSGS"); /* a longer run by hand */
    return e && atoi(e) > 0 ? atoi(e) : 30000;
}

static atomic_int g_bad;
static atomic_long g_sent_live, g_got, g_empty_sent, g_empty_got, g_back, g_sent_dead;
static atomic_long g_quit_sent, g_quit_got, g_quit_back;
static atomic_int g_finished; /* senders done sending, all their dead sends back */

/* ---------------------------------------------------------- receiver */
typedef struct rsink {
    uint32_t ends;
    uint32_t next[SENDERS]; /* the sequence number due from each sender */
} rsink_t;

static int any_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return 0;
}

static void rsink_msg(rsink_t *k, const sn_event_t *e)
{
    uint64_t v;
    if (e->data && e->data->len == 0) { /* an empty message: counted, no sequence */
        atomic_fetch_add(&g_empty_got, 1);
        return;
    }
    if (sn_payload_get_u64(e->data, &v) != 0 || v >> 32 >= SENDERS || (uint32_t)v != k->next[v >> 32]++) {
        atomic_fetch_add(&g_bad, 1);
        return;
    }
    atomic_fetch_add(&g_got, 1);
}

static void rsink_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    rsink_t *k = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (ev[i].type != SN_EV_MESSAGE) {
            atomic_fetch_add(&g_bad, 1);
        } else if (ev[i].tag == TAG_MSG) {
            rsink_msg(k, &ev[i]);
        } else if (ev[i].tag == TAG_END && sn_payload_get_u64(ev[i].data, &v) == 0 && v >> 32 < SENDERS) {
            /* the sender's count to us: all came before its END */
            if (k->next[v >> 32] != (uint32_t)v)
                atomic_fetch_add(&g_bad, 1);
            if (++k->ends == SENDERS)
                out->status = SN_DONE;
        } else {
            atomic_fetch_add(&g_bad, 1);
        }
    }
}

static const sn_type_t rsink_type = {
    .name = "rsink", .version = 1, .state_size = sizeof(rsink_t), .init = any_init, .step = rsink_step};

/* The quitter: takes messages in order per sender, and ends after
 * QUIT_AFTER of them, with more queued behind (they come back). */
static void quitter_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    rsink_t *k = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (ev[i].type != SN_EV_MESSAGE || ev[i].tag != TAG_MSG || sn_payload_get_u64(ev[i].data, &v) != 0 ||
            v >> 32 >= SENDERS || (uint32_t)v != k->next[v >> 32]++) {
            atomic_fetch_add(&g_bad, 1);
            continue;
        }
        if (atomic_fetch_add(&g_quit_got, 1) + 1 >= QUIT_AFTER)
            out->status = SN_DONE; /* (the step's other events are taken too: it had them) */
    }
}

static const sn_type_t quitter_type = {
    .name = "quitter", .version = 1, .state_size = sizeof(rsink_t), .init = any_init, .step = quitter_step};

/* ------------------------------------------------------------ sender */
typedef struct rsend {
    sn_pid_t to[TARGETS];
    uint64_t index, rng;
    int sent, total;
    uint32_t next[TARGETS]; /* sequence numbers sent to each target */
    uint32_t back[2];       /* returned so far, from the dead PID and node 2's */
    uint32_t quit_back;     /* returned by the quitter (not in order: see rsend_back) */
    uint8_t *quit_seen;     /* by sequence number: came back */
    bool ended, finished, stop;
} rsend_t;

static int rsend_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    rsend_t *s = state;
    if (!*input || (*input)->len != sizeof s->to + 8)
        return SN_EINVAL;
    memcpy(s->to, (*input)->data, sizeof s->to);
    memcpy(&s->index, (*input)->data + sizeof s->to, 8);
    s->rng = s->index * 0x9e3779b97f4a7c15u + 1;
    s->total = per_sender();
    s->quit_seen = calloc((size_t)s->total, 1);
    return s->quit_seen ? 0 : SN_ENOMEM;
}

static void rsend_close(sn_ctx_t *ctx, void *state)
{
    free(((rsend_t *)state)->quit_seen);
}

static uint64_t rnd(rsend_t *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
}

/* One message to target t: a u64 (sender, sequence), shared one time in
 * eight; to a live receiver, empty one time in sixteen. */
static void send_one(rsend_t *s, sn_step_out_t *out, int t, uint64_t r)
{
    bool live = t < RECEIVERS;
    if (t == QUITTER)
        atomic_fetch_add(&g_quit_sent, 1);
    if (live && r % 16 == 0) {
        sn_out_send(out, s->to[t], TAG_MSG, NULL);
        atomic_fetch_add(&g_empty_sent, 1);
        return;
    }
    sn_payload_t *p = sn_payload_u64(s->index << 32 | s->next[t]++);
    if (r % 8 == 1)
        p = sn_payload_share(&p);
    sn_out_send(out, s->to[t], TAG_MSG, &p);
    if (t != QUITTER)
        atomic_fetch_add(live ? &g_sent_live : &g_sent_dead, 1);
}

/* A run of sends: mostly to a few receivers in a row (long groups), now
 * and then anywhere (many groups), cut now and then by a sleep yield. */
static void spray(rsend_t *s, sn_step_out_t *out)
{
    int t = 0;
    for (int k = 0; k < PER_STEP && s->sent < s->total; k++, s->sent++) {
        uint64_t r = rnd(s);
        if (r % 5 == 0)
            t = (int)((r >> 8) % TARGETS);
        else if (r % 5 == 1)
            t = (t + 1) % RECEIVERS;
        if (r % 97 == 3)
            sn_out_sleep(out, TAG_SLEEP, 0);
        send_one(s, out, t, r >> 20);
    }
}

static void ends(rsend_t *s, sn_step_out_t *out)
{
    for (int t = 0; t < RECEIVERS; t++) {
        sn_payload_t *p = sn_payload_u64(s->index << 32 | s->next[t]);
        sn_out_send(out, s->to[t], TAG_END, &p);
    }
    s->ended = true;
}

/* The quitter's: each once. Not in order: a message bounced from its
 * queue as it ends may come back after a later one that found it gone. */
static void quit_back(rsend_t *s, const sn_event_t *e)
{
    uint64_t v;
    if (e->error != SN_ENOPROC || e->tag != TAG_MSG || sn_payload_get_u64(e->data, &v) != 0 || v >> 32 != s->index ||
        (uint32_t)v >= s->next[QUITTER] || s->quit_seen[(uint32_t)v]++) {
        atomic_fetch_add(&g_bad, 1);
        return;
    }
    s->quit_back++;
    atomic_fetch_add(&g_quit_back, 1);
}

static void rsend_back(rsend_t *s, const sn_event_t *e)
{
    uint64_t v;
    if (sn_pid_eq(e->from, s->to[QUITTER])) {
        quit_back(s, e);
        return;
    }
    int which = sn_pid_eq(e->from, s->to[RECEIVERS]) ? 0 : sn_pid_eq(e->from, s->to[RECEIVERS + 1]) ? 1 : -1;
    if (which < 0 || e->error != SN_ENOPROC || e->tag != TAG_MSG || sn_payload_get_u64(e->data, &v) != 0 ||
        v != (s->index << 32 | s->back[which]++)) {
        atomic_fetch_add(&g_bad, 1);
        return;
    }
    atomic_fetch_add(&g_back, 1);
}

static void rsend_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    rsend_t *s = state;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == TAG_SLEEP)
            continue;
        if (ev[i].type == SN_EV_YIELD_COMPLETE)
            rsend_back(s, &ev[i]);
        else if (ev[i].type == SN_EV_MESSAGE && s->finished)
            s->stop = true; /* the test's */
        else
            atomic_fetch_add(&g_bad, 1);
    }
    if (s->sent < s->total) {
        spray(s, out);
        out->status = SN_CONTINUE;
        return;
    }
    if (!s->ended)
        ends(s, out);
    /* then it waits for the quitter's returns (the test counts them) and
     * ends on a message from the test */
    bool all_back = s->back[0] == s->next[RECEIVERS] && s->back[1] == s->next[RECEIVERS + 1];
    if (all_back && !s->finished) {
        s->finished = true;
        atomic_fetch_add(&g_finished, 1);
    }
    out->status = s->stop ? SN_DONE : SN_IDLE;
}

static const sn_type_t rsend_type = {.name = "rsend",
                                     .version = 1,
                                     .state_size = sizeof(rsend_t),
                                     .init = rsend_init,
                                     .step = rsend_step,
                                     .close = rsend_close};

/* -------------------------------------------------------------- test */

static void run(int workers)
{
    sn_sched_t *s = sn_sched_new(&(sn_sched_config_t){.node_id = 1, .workers = workers});
    assert_non_null(s);
    assert_int_equal(sn_type_register(s, &rsink_type), 0);
    assert_int_equal(sn_type_register(s, &rsend_type), 0);
    assert_int_equal(sn_type_register(s, &quitter_type), 0);
    static collector_t sinks[RECEIVERS], senders[SENDERS];
    sn_pid_t to[TARGETS];
    for (int i = 0; i < RECEIVERS; i++) {
        collector_init(&sinks[i]);
        assert_int_equal(sn_spawn(s, "rsink", "run", NULL, collector_on_result, &sinks[i], &to[i]), 0);
    }
    to[RECEIVERS] = (sn_pid_t){1, UINT64_C(1) << 40};
    to[RECEIVERS + 1] = (sn_pid_t){2, 12345};
    collector_t quitter;
    collector_init(&quitter);
    assert_int_equal(sn_spawn(s, "quitter", "run", NULL, collector_on_result, &quitter, &to[QUITTER]), 0);
    sn_pid_t sender[SENDERS];
    for (uint64_t i = 0; i < SENDERS; i++) {
        collector_init(&senders[i]);
        sn_payload_t *in = sn_payload_new(SN_CT_BYTES, NULL, sizeof to + 8);
        memcpy(in->data, to, sizeof to);
        memcpy(in->data + sizeof to, &i, 8);
        assert_int_equal(sn_spawn(s, "rsend", "run", &in, collector_on_result, &senders[i], &sender[i]), 0);
    }
    assert_true(wait_count(&g_finished, SENDERS, WAIT_MS));
    assert_true(collector_wait(&quitter, WAIT_MS));
    assert_int_equal(quitter.status, SN_DONE);
    collector_fini(&quitter);
    /* every message to the quitter: taken, or back (each once: quit_back) */
    uint64_t end = deadline_ns(WAIT_MS);
    while (atomic_load(&g_quit_got) + atomic_load(&g_quit_back) < atomic_load(&g_quit_sent) && now_ns() < end)
        sleep_ms(1);
    assert_int_equal(atomic_load(&g_quit_got) + atomic_load(&g_quit_back), atomic_load(&g_quit_sent));
    assert_true(atomic_load(&g_quit_back) > 0);
    for (int i = 0; i < SENDERS; i++)
        assert_int_equal(sn_send(s, sender[i], NULL), 0);
    for (int i = 0; i < SENDERS; i++) {
        assert_true(collector_wait(&senders[i], WAIT_MS));
        assert_int_equal(senders[i].status, SN_DONE);
        collector_fini(&senders[i]);
    }
    for (int i = 0; i < RECEIVERS; i++) {
        assert_true(collector_wait(&sinks[i], WAIT_MS));
        assert_int_equal(sinks[i].status, SN_DONE);
        collector_fini(&sinks[i]);
    }
    sn_sched_destroy(&s);
    assert_int_equal(atomic_load(&g_bad), 0);
    assert_int_equal(atomic_load(&g_got), atomic_load(&g_sent_live));
    assert_int_equal(atomic_load(&g_empty_got), atomic_load(&g_empty_sent));
    assert_int_equal(atomic_load(&g_back), atomic_load(&g_sent_dead));
    assert_true(atomic_load(&g_sent_live) > 0 && atomic_load(&g_sent_dead) > 0 && atomic_load(&g_empty_sent) > 0);
    printf("# %d workers: %ld delivered, %ld empty, %ld returned; quitter took %ld, returned %ld\n", workers,
           atomic_load(&g_got), atomic_load(&g_empty_got), atomic_load(&g_back), atomic_load(&g_quit_got),
           atomic_load(&g_quit_back));
}

static int reset(void **unused)
{
    atomic_store(&g_bad, 0);
    atomic_store(&g_sent_live, 0);
    atomic_store(&g_got, 0);
    atomic_store(&g_empty_sent, 0);
    atomic_store(&g_empty_got, 0);
    atomic_store(&g_back, 0);
    atomic_store(&g_sent_dead, 0);
    atomic_store(&g_quit_sent, 0);
    atomic_store(&g_quit_got, 0);
    atomic_store(&g_quit_back, 0);
    atomic_store(&g_finished, 0);
    return 0;
}

static void test_exactly_once_in_order(void **unused)
{
    run(4);
}

static void test_one_worker(void **unused)
{
    run(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_exactly_once_in_order, reset),
        cmocka_unit_test_setup(test_one_worker, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

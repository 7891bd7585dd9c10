/* test_payload.c - payloads: shared read-only ones (sn_payload_share, dup,
 * destroy) by rule, and freed exactly once when many holders on many
 * workers receive, keep, pass on and drop one 16 KB table, sent by one
 * batch (no copies: every holder sees the same buffer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

#define TABLE_BYTES 16384
#define HOLDERS 1000
#define HOPS 3 /* each holder passes its reference on this many times */

static atomic_int g_bad;
static atomic_int g_same;                   /* deliveries that carried the very buffer shared */
static const sn_payload_t *_Atomic g_table; /* the shared buffer, for pointer checks */

static sn_payload_t *make_table(void)
{
    sn_payload_t *t = sn_payload_new(SN_CT_BYTES, NULL, TABLE_BYTES);
    for (uint32_t i = 0; i < TABLE_BYTES; i++)
        t->data[i] = (unsigned char)(i * 7 + 3);
    return t;
}

static bool table_ok(const sn_payload_t *t)
{
    if (!t || t->len != TABLE_BYTES)
        return false;
    for (uint32_t i = 0; i < TABLE_BYTES; i += 61)
        if (t->data[i] != (unsigned char)(i * 7 + 3))
            return false;
    return true;
}

/* The rules, on one thread: share takes the pointer and returns it shared;
 * dup of a shared payload is the same pointer, of another a copy; each
 * destroy drops one reference and the last frees (once: live goes back to
 * where it was, ASan would see a double free). */
static void test_share_rules(void **unused)
{
    int64_t live0 = atomic_load(&sn__shared_live);
    sn_payload_t *p = make_table(), *keep = p;
    assert_false(sn_payload_is_shared(p));
    sn_payload_t *copy = sn_payload_dup(p);
    assert_ptr_not_equal(copy, p);
    assert_false(sn_payload_is_shared(copy));
    assert_memory_equal(copy->data, p->data, TABLE_BYTES);
    sn_payload_t *s = sn_payload_share(&p);
    assert_null(p);
    assert_ptr_equal(s, keep);
    assert_true(sn_payload_is_shared(s));
    assert_int_equal(atomic_load(&sn__shared_live), live0 + 1);
    sn_payload_t *again = sn_payload_share(&(sn_payload_t *){s}); /* already shared: as it is, no new reference */
    assert_ptr_equal(again, s);
    sn_payload_t *a = sn_payload_dup(s), *b = sn_payload_dup(a);
    assert_ptr_equal(a, s);
    assert_ptr_equal(b, s);
    sn_payload_destroy(&a);
    assert_null(a);
    sn_payload_destroy(&s);
    assert_int_equal(atomic_load(&sn__shared_live), live0 + 1); /* b still holds it */
    assert_true(table_ok(b));
    sn_payload_destroy(&b);
    assert_int_equal(atomic_load(&sn__shared_live), live0);
    sn_payload_destroy(&b); /* safe twice */
    assert_null(sn_payload_share(NULL));
    assert_null(sn_payload_share(&(sn_payload_t *){NULL}));
    assert_null(sn_payload_dup(NULL));
    assert_false(sn_payload_is_shared(NULL));
    sn_payload_destroy(&copy);
}

/* "holder" (input: the next holder's PID, or none for the last): each
 * message carries a reference to the table, its tag the hops it made so
 * far. The holder checks it is the shared buffer, intact; passes it on to
 * the next holder while it has made fewer than HOPS hops, at once or (every
 * other one) kept over a step first (sn_take, SN_CONTINUE); keeps the last
 * one that ends its hops here, and finishes with it as its result at CANCEL;
 * the runtime drops the others after the step. */
typedef struct holder {
    sn_pid_t next;
    sn_payload_t *kept, *last;
    uint64_t kept_tag;
} holder_t;

static atomic_int g_deliveries;

static int holder_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    holder_t *h = state;
    return *input && sn_payload_get_pid(*input, &h->next) != 0 ? SN_EINVAL : 0;
}

static void holder_event(holder_t *h, size_t i, sn_event_t *e, sn_step_out_t *out)
{
    if (e->type != SN_EV_MESSAGE || !table_ok(e->data) || !sn_payload_is_shared(e->data)) {
        atomic_fetch_add(&g_bad, 1);
        return;
    }
    if (e->data == atomic_load(&g_table))
        atomic_fetch_add(&g_same, 1);
    if (e->tag < HOPS && !sn_pid_is_none(h->next)) {
        if (i % 2 == 0 && !h->kept) { /* keep it over a step */
            h->kept = sn_take(&e->data);
            h->kept_tag = e->tag;
        } else {
            sn_out_send(out, h->next, e->tag + 1, &e->data); /* the reference moves on */
        }
    } else if (!h->last) {
        h->last = sn_take(&e->data);
    } /* else the runtime drops it after the step */
    atomic_fetch_add(&g_deliveries, 1);
}

static void holder_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    holder_t *h = state;
    out->status = SN_IDLE;
    if (h->kept) /* what the last step kept */
        sn_out_send(out, h->next, h->kept_tag + 1, &h->kept);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            sn_out_done(out, &h->last); /* a reference as the result */
            return;
        }
        holder_event(h, i, &ev[i], out);
    }
    if (h->kept)
        out->status = SN_CONTINUE;
}

static void holder_close(sn_ctx_t *ctx, void *state)
{
    holder_t *h = state;
    sn_payload_destroy(&h->kept);
    sn_payload_destroy(&h->last);
}

static const sn_type_t holder_type = {.name = "holder",
                                      .version = 1,
                                      .state_size = sizeof(holder_t),
                                      .init = holder_init,
                                      .step = holder_step,
                                      .close = holder_close};

/* "fanout": a reference to every holder, in one step. */
static sn_pid_t g_holders[HOLDERS];

static int fanout_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return 0;
}

static void fanout_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    const sn_payload_t *t = atomic_load(&g_table);
    for (int i = 0; i < HOLDERS; i++)
        sn_out_send(out, g_holders[i], 0, &(sn_payload_t *){sn_payload_dup(t)});
    sn_out_done(out, NULL);
}

static const sn_type_t fanout_type = {.name = "fanout", .version = 1, .init = fanout_init, .step = fanout_step};

static void spawn_holders(sn_sched_t *s, collector_t *c)
{
    for (int i = HOLDERS - 1; i >= 0; i--) { /* each knows the next (the last: none, it only drops) */
        sn_payload_t *in = i == HOLDERS - 1 ? NULL : sn_payload_pid(g_holders[i + 1]);
        collector_init(&c[i]);
        assert_int_equal(sn_spawn(s, "holder", "run", &in, collector_on_result, &c[i], &g_holders[i]), 0);
    }
}

/* Deliveries a reference starting at holder i makes: here, then a hop to
 * each next holder, up to HOPS, or to the last. */
static int deliveries_from(int i)
{
    return 1 + (HOLDERS - 1 - i < HOPS ? HOLDERS - 1 - i : HOPS);
}

/* One 16 KB table, shared, to HOLDERS processes on 4 workers: a fanout
 * process sends a reference to each, the test thread one more to every
 * other one; they pass references on (HOPS hops), keep them over steps
 * and drop them on whatever worker runs them; the test drops its own
 * meanwhile; at shutdown each finishes with one as its result, which the
 * test frees. Every delivery is the one buffer (no copy), intact; it is
 * freed exactly once, after the last holder let go (shared_live back where
 * it was; ASan: no double free, no leak; TSan: the refcount's orders). */
static void test_many_holders_free_once(void **unused)
{
    int64_t live0 = atomic_load(&sn__shared_live);
    sn_sched_t *s = sn_sched_new(&(sn_sched_config_t){.node_id = 1, .workers = 4});
    assert_non_null(s);
    assert_int_equal(sn_type_register(s, &holder_type), 0);
    assert_int_equal(sn_type_register(s, &fanout_type), 0);
    static collector_t c[HOLDERS];
    spawn_holders(s, c);
    sn_payload_t *t = make_table();
    sn_payload_t *mine = sn_payload_share(&t);
    atomic_store(&g_table, mine);
    int want = 0;
    for (int i = 0; i < HOLDERS; i++)
        want += deliveries_from(i) * (i % 2 == 0 ? 2 : 1);
    assert_int_equal(sn_spawn(s, "fanout", "run", NULL, NULL, NULL, NULL), 0);
    for (int i = 0; i < HOLDERS; i += 2) /* a second reference to every other holder, from outside */
        assert_int_equal(sn_send(s, g_holders[i], &(sn_payload_t *){sn_payload_dup(mine)}), 0);
    sn_payload_destroy(&mine); /* ours, while the holders still work */
    assert_true(wait_count(&g_deliveries, want, WAIT_MS));
    assert_int_equal(sn_sched_shutdown(s, WAIT_MS), 0); /* CANCEL: each finishes with its reference */
    int results = 0;
    for (int i = 0; i < HOLDERS; i++) {
        assert_true(collector_wait(&c[i], WAIT_MS));
        assert_int_equal(c[i].status, SN_DONE);
        results += c[i].result && table_ok(c[i].result) && c[i].result == atomic_load(&g_table);
    }
    assert_int_equal(results, HOLDERS - HOPS); /* each kept one to the end, but the first HOPS: they pass all on */
    assert_int_equal(atomic_load(&sn__shared_live), live0 + 1); /* the results still hold it */
    sn_sched_destroy(&s);
    for (int i = 0; i < HOLDERS; i++)
        collector_fini(&c[i]); /* the last references */
    assert_int_equal(atomic_load(&g_bad), 0);
    assert_int_equal(atomic_load(&g_deliveries), want);
    assert_int_equal(atomic_load(&g_same), want);           /* every delivery: the one buffer */
    assert_int_equal(atomic_load(&sn__shared_live), live0); /* freed, once */
    print_message("%d deliveries of one shared 16 KB buffer among %d holders\n", want, HOLDERS);
}

/* -------------------------------------------------------- magazines
 * Small payloads are allocated from per-thread magazines and freed into
 * them (payload.c): a payload made on one thread and destroyed on
 * another comes back to a sender through the depot. Producers hand
 * payloads to consumers through rings; each consumer checks every byte
 * (a block handed out twice, or reused while still held, would be
 * overwritten by its other holder) and destroys it; the threads end while
 * the others still run, so their magazines are freed on exit. Under TSan
 * the hand-overs through the depot are checked; under ASan there are no
 * magazines (malloc and free, so a use after free is caught). */
#define MAG_PAIRS 3
#define MAG_RING 1024
#define MAG_MSGS 200000

typedef struct ring {
    sn_payload_t *_Atomic slot[MAG_RING];
    _Atomic uint64_t head, tail; /* producer writes head, consumer tail */
} ring_t;

static ring_t g_rings[MAG_PAIRS];

static void *mag_producer(void *arg)
{
    ring_t *r = arg;
    uint64_t seed = (uint64_t)(r - g_rings) + 1;
    for (uint64_t i = 0; i < MAG_MSGS; i++) {
        size_t len = (size_t)(i * seed % 60); /* all within one small block */
        sn_payload_t *p = sn_payload_new(SN_CT_BYTES, NULL, len);
        if (!p) {
            atomic_fetch_add(&g_bad, 1);
            continue;
        }
        memset(p->data, (int)(i & 0xff), len);
        while (atomic_load_explicit(&r->head, memory_order_relaxed) -
                   atomic_load_explicit(&r->tail, memory_order_acquire) ==
               MAG_RING)
            sched_yield();
        uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
        atomic_store_explicit(&r->slot[h % MAG_RING], p, memory_order_relaxed);
        atomic_store_explicit(&r->head, h + 1, memory_order_release);
    }
    return NULL;
}

static void *mag_consumer(void *arg)
{
    ring_t *r = arg;
    uint64_t seed = (uint64_t)(r - g_rings) + 1;
    for (uint64_t i = 0; i < MAG_MSGS; i++) {
        while (atomic_load_explicit(&r->head, memory_order_acquire) ==
               atomic_load_explicit(&r->tail, memory_order_relaxed))
            sched_yield();
        sn_payload_t *p = atomic_load_explicit(&r->slot[i % MAG_RING], memory_order_relaxed);
        atomic_store_explicit(&r->tail, i + 1, memory_order_release);
        size_t len = (size_t)(i * seed % 60);
        bool ok = p->len == len && p->data[len] == 0;
        for (size_t k = 0; ok && k < len; k++)
            ok = p->data[k] == (unsigned char)(i & 0xff);
        if (!ok)
            atomic_fetch_add(&g_bad, 1);
        /* a payload of our own too, made and freed here, between theirs */
        sn_payload_t *mine = sn_payload_u64(i);
        sn_payload_destroy(&p);
        sn_payload_destroy(&mine);
    }
    return NULL;
}

static void test_magazines_across_threads(void **unused)
{
    atomic_store(&g_bad, 0);
    pthread_t th[2 * MAG_PAIRS];
    for (int i = 0; i < MAG_PAIRS; i++) {
        atomic_store(&g_rings[i].head, 0);
        atomic_store(&g_rings[i].tail, 0);
        assert_int_equal(pthread_create(&th[2 * i], NULL, mag_producer, &g_rings[i]), 0);
        assert_int_equal(pthread_create(&th[2 * i + 1], NULL, mag_consumer, &g_rings[i]), 0);
    }
    for (int i = 0; i < 2 * MAG_PAIRS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(atomic_load(&g_bad), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share_rules),
        cmocka_unit_test(test_many_holders_free_once),
        cmocka_unit_test(test_magazines_across_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

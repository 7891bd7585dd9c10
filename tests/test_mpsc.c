/* test_mpsc.c - the MPSC event queue: FIFO per producer, chains pushed at
 * once, and a stress where several producers push (half of them in
 * chains) while one consumer pops, every node taken exactly once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "mpsc.h"

typedef struct item {
    sn__mpsc_node_t link;
    int producer;
    long seq;
} item_t;

static void smoke(void **st)
{
    (void)st;
    sn__mpsc_t q;
    sn__mpsc_init(&q);
    assert_null(sn__mpsc_pop(&q));
    assert_false(sn__mpsc_maybe_nonempty(&q));
    item_t a = {.seq = 1}, b = {.seq = 2}, c = {.seq = 3};
    sn__mpsc_push(&q, &a.link);
    assert_true(sn__mpsc_maybe_nonempty(&q));
    sn__mpsc_push(&q, &b.link);
    assert_ptr_equal(sn__mpsc_pop(&q), &a.link);
    sn__mpsc_push(&q, &c.link);
    assert_ptr_equal(sn__mpsc_pop(&q), &b.link);
    assert_ptr_equal(sn__mpsc_pop(&q), &c.link);
    assert_null(sn__mpsc_pop(&q));
    assert_false(sn__mpsc_maybe_nonempty(&q));
    /* reuse after empty */
    sn__mpsc_push(&q, &a.link);
    assert_ptr_equal(sn__mpsc_pop(&q), &a.link);
    assert_null(sn__mpsc_pop(&q));
}

static void has_linked_tracks_queued_nodes(void **st)
{
    (void)st;
    sn__mpsc_t q;
    sn__mpsc_init(&q);
    item_t it[3] = {{.seq = 10}, {.seq = 11}, {.seq = 12}};
    assert_false(sn__mpsc_has_linked(&q));
    for (int i = 0; i < 3; i++)
        sn__mpsc_push(&q, &it[i].link);
    assert_true(sn__mpsc_has_linked(&q));
    for (int i = 0; i < 3; i++) {
        assert_true(sn__mpsc_has_linked(&q));
        assert_ptr_equal(sn__mpsc_pop(&q), &it[i].link);
    }
    assert_false(sn__mpsc_has_linked(&q));
}

#define PRODUCERS 4
#define PER 100000

typedef struct shared {
    sn__mpsc_t q;
    item_t *items; /* PRODUCERS * PER */
    _Atomic int started;
} shared_t;

typedef struct prod {
    shared_t *s;
    int id;
} prod_t;

/* Odd producers push chains of 1 to 64 (sn__mpsc_push_chain), even ones
 * one node at a time. */
static void *producer(void *arg)
{
    prod_t *p = arg;
    atomic_fetch_add(&p->s->started, 1);
    long i = 0;
    while (i < PER) {
        long len = p->id % 2 ? 1 + i % 64 : 1;
        if (len > PER - i)
            len = PER - i;
        item_t *first = &p->s->items[(size_t)p->id * PER + (size_t)i];
        for (long k = 0; k < len; k++, i++) {
            item_t *it = &p->s->items[(size_t)p->id * PER + (size_t)i];
            it->producer = p->id;
            it->seq = i;
            atomic_store_explicit(&it->link.next, k + 1 < len ? &it[1].link : NULL, memory_order_relaxed);
        }
        if (len == 1 && p->id % 2 == 0)
            sn__mpsc_push(&p->s->q, &first->link);
        else
            sn__mpsc_push_chain(&p->s->q, &first->link, &first[len - 1].link);
    }
    return NULL;
}

static void chain_smoke(void **st)
{
    (void)st;
    sn__mpsc_t q;
    sn__mpsc_init(&q);
    item_t it[5] = {{.seq = 0}, {.seq = 1}, {.seq = 2}, {.seq = 3}, {.seq = 4}};
    sn__mpsc_push(&q, &it[0].link);
    for (int k = 1; k < 3; k++)
        atomic_store(&it[k].link.next, &it[k + 1].link);
    sn__mpsc_push_chain(&q, &it[1].link, &it[3].link); /* 1, 2, 3 at once */
    sn__mpsc_push(&q, &it[4].link);
    for (int k = 0; k < 5; k++)
        assert_ptr_equal(sn__mpsc_pop(&q), &it[k].link);
    assert_null(sn__mpsc_pop(&q));
    sn__mpsc_push_chain(&q, &it[2].link, &it[2].link); /* a chain of one */
    assert_ptr_equal(sn__mpsc_pop(&q), &it[2].link);
    assert_false(sn__mpsc_maybe_nonempty(&q));
}

/* The consumer pops with sn__mpsc_pop (at_cursor false), or as the
 * relay drains (true): with sn__mpsc_pop_at and its position outside the
 * queue, written back to the queue every so often (a drain's end), with
 * plain pops in between. */
static void stress(bool at_cursor)
{
    shared_t s;
    sn__mpsc_init(&s.q);
    s.items = calloc((size_t)PRODUCERS * PER, sizeof *s.items);
    assert_non_null(s.items);
    atomic_init(&s.started, 0);
    unsigned char *seen = calloc((size_t)PRODUCERS * PER, 1);
    long next[PRODUCERS] = {0};
    pthread_t th[PRODUCERS];
    prod_t args[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        args[i] = (prod_t){&s, i};
        pthread_create(&th[i], NULL, producer, &args[i]);
    }
    long got = 0;
    sn__mpsc_node_t *cur = s.q.tail;
    while (got < (long)PRODUCERS * PER) {
        sn__mpsc_node_t *n;
        if (at_cursor && got % 997 != 0) {
            n = sn__mpsc_pop_at(&s.q, &cur);
        } else {
            s.q.tail = cur; /* (a drain ended: written back; a plain pop, then the next drain starts) */
            n = sn__mpsc_pop(&s.q);
            cur = s.q.tail;
        }
        if (!n)
            continue; /* empty or a push in flight */
        item_t *it = (item_t *)n;
        size_t k = (size_t)it->producer * PER + (size_t)it->seq;
        assert_int_equal(seen[k], 0);
        seen[k] = 1;
        /* FIFO per producer */
        assert_int_equal(it->seq, next[it->producer]);
        next[it->producer]++;
        got++;
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(th[i], NULL);
    s.q.tail = cur;
    assert_null(sn__mpsc_pop(&s.q));
    assert_false(sn__mpsc_maybe_nonempty(&s.q));
    free(seen);
    free(s.items);
}

static void stress_exactly_once_fifo_per_producer(void **st)
{
    (void)st;
    stress(false);
}

static void stress_pop_at_cursor(void **st)
{
    (void)st;
    stress(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(smoke),
        cmocka_unit_test(has_linked_tracks_queued_nodes),
        cmocka_unit_test(chain_smoke),
        cmocka_unit_test(stress_exactly_once_fifo_per_producer),
        cmocka_unit_test(stress_pop_at_cursor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_deque.c - the Chase-Lev deque: order, growth, index rebase, and
 * stress where every pushed item must be taken exactly once while the
 * owner pushes/pops and thieves steal (single and half) and the ring grows.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "deque.h"

#define ITEM(i) ((void *)(uintptr_t)((i) + 1))
#define INDEX(p) ((uintptr_t)(p)-1)

static void smoke(void **st)
{
    (void)st;
    sn__deque_t d;
    assert_int_equal(sn__deque_init(&d, 4), 0);
    assert_null(sn__deque_pop(&d));
    void *x;
    assert_int_equal(sn__deque_steal(&d, &x), SN__STEAL_EMPTY);
    for (int i = 0; i < 5; i++)
        assert_int_equal(sn__deque_push(&d, ITEM(i)), 0);
    assert_int_equal(sn__deque_size(&d), 5);
    /* thieves take the oldest, the owner the newest */
    assert_int_equal(sn__deque_steal(&d, &x), SN__STEAL_OK);
    assert_ptr_equal(x, ITEM(0));
    assert_ptr_equal(sn__deque_pop(&d), ITEM(4));
    assert_ptr_equal(sn__deque_pop(&d), ITEM(3));
    assert_ptr_equal(sn__deque_pop(&d), ITEM(2));
    assert_ptr_equal(sn__deque_pop(&d), ITEM(1));
    assert_null(sn__deque_pop(&d));
    assert_int_equal(sn__deque_size(&d), 0);
    sn__deque_fini(&d);
}

static void steal_half_takes_half_oldest_first(void **st)
{
    (void)st;
    sn__deque_t d, mine;
    assert_int_equal(sn__deque_init(&d, 16), 0);
    assert_int_equal(sn__deque_init(&mine, 16), 0);
    for (int i = 0; i < 9; i++)
        sn__deque_push(&d, ITEM(i));
    int moved = 0;
    void *run = sn__deque_steal_half_into(&d, &mine, &moved);
    assert_int_equal(moved, 5); /* ceil(9 / 2) */
    assert_ptr_equal(run, ITEM(4));
    assert_int_equal(sn__deque_size(&mine), 4);
    assert_int_equal(sn__deque_size(&d), 4);
    /* the thief's deque holds 0..3, newest on the bottom */
    for (int i = 3; i >= 0; i--)
        assert_ptr_equal(sn__deque_pop(&mine), ITEM(i));
    for (int i = 8; i >= 5; i--)
        assert_ptr_equal(sn__deque_pop(&d), ITEM(i));
    assert_null(sn__deque_steal_half_into(&d, &mine, &moved));
    assert_int_equal(moved, 0);
    sn__deque_fini(&d);
    sn__deque_fini(&mine);
}

static void growth_keeps_items(void **st)
{
    (void)st;
    sn__deque_t d;
    assert_int_equal(sn__deque_init(&d, 2), 0);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 10000; i++)
            assert_int_equal(sn__deque_push(&d, ITEM(i)), 0);
        for (int i = 9999; i >= 0; i--)
            assert_ptr_equal(sn__deque_pop(&d), ITEM(i));
        assert_null(sn__deque_pop(&d));
    }
    sn__deque_fini(&d);
}

static void indices_rebase_when_empty(void **st)
{
    (void)st;
    sn__deque_t d;
    assert_int_equal(sn__deque_init(&d, 16), 0);
    /* empty, with indices past the rebase mark (white box) */
    int64_t start = SN__DEQUE_REBASE_AT + 3;
    atomic_store(&d.top, (uint64_t)start);
    atomic_store(&d.bottom, start);
    d.hi = start;
    assert_int_equal(sn__deque_push(&d, ITEM(0)), 0);
    assert_int_equal(atomic_load(&d.bottom), 1);
    assert_int_equal(atomic_load(&d.top) & ((UINT64_C(1) << 32) - 1), 0);
    for (int i = 1; i < 8; i++)
        sn__deque_push(&d, ITEM(i));
    void *x;
    assert_int_equal(sn__deque_steal(&d, &x), SN__STEAL_OK);
    assert_ptr_equal(x, ITEM(0));
    for (int i = 7; i >= 1; i--)
        assert_ptr_equal(sn__deque_pop(&d), ITEM(i));
    assert_null(sn__deque_pop(&d));
    sn__deque_fini(&d);
}

static void indices_rebase_without_running_empty(void **st)
{
    (void)st;
    sn__deque_t d;
    assert_int_equal(sn__deque_init(&d, 16), 0);
    int64_t start = SN__DEQUE_REBASE_AT - 5;
    atomic_store(&d.top, (uint64_t)start);
    atomic_store(&d.bottom, start);
    d.hi = start;
    /* never empty: pushes cross the mark, the items are taken back and
     * pushed again at index 0, in order */
    for (int i = 0; i < 12; i++)
        assert_int_equal(sn__deque_push(&d, ITEM(i)), 0);
    assert_true(atomic_load(&d.bottom) < 16);
    void *x;
    assert_int_equal(sn__deque_steal(&d, &x), SN__STEAL_OK);
    assert_ptr_equal(x, ITEM(0));
    for (int i = 11; i >= 1; i--)
        assert_ptr_equal(sn__deque_pop(&d), ITEM(i));
    assert_null(sn__deque_pop(&d));
    sn__deque_fini(&d);
}

/* ------------------------------------------------------------- stress */

#define THIEVES 3

typedef struct stress {
    sn__deque_t d;
    size_t n;
    _Atomic unsigned char *taken; /* taken[i] counts takes of item i */
    _Atomic int done;
    _Atomic long total;
    int owner_pops; /* owner pops one in this many pushes */
} stress_t;

static void take(stress_t *s, void *p)
{
    assert_non_null(p);
    size_t i = INDEX(p);
    assert_true(i < s->n);
    atomic_fetch_add(&s->taken[i], 1);
    atomic_fetch_add(&s->total, 1);
}

static void *thief(void *arg)
{
    stress_t *s = arg;
    sn__deque_t mine;
    if (sn__deque_init(&mine, 8) != 0)
        abort();
    unsigned turn = 0;
    while (!atomic_load(&s->done) || sn__deque_size(&s->d) > 0) {
        void *x;
        if (turn++ % 2) {
            if (sn__deque_steal(&s->d, &x) == SN__STEAL_OK)
                take(s, x);
        } else {
            int moved;
            void *run = sn__deque_steal_half_into(&s->d, &mine, &moved);
            if (run) {
                take(s, run);
                /* drain our own deque as its owner */
                void *y;
                while ((y = sn__deque_pop(&mine)))
                    take(s, y);
            }
        }
    }
    sn__deque_fini(&mine);
    return NULL;
}

static void run_stress(size_t n, int pop_every)
{
    stress_t s = {.n = n, .owner_pops = pop_every};
    assert_int_equal(sn__deque_init(&s.d, 2), 0); /* tiny: growth races steals */
    s.taken = calloc(n, 1);
    assert_non_null(s.taken);
    pthread_t th[THIEVES];
    for (int i = 0; i < THIEVES; i++)
        pthread_create(&th[i], NULL, thief, &s);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(sn__deque_push(&s.d, ITEM(i)), 0);
        if (pop_every && i % (size_t)pop_every == 0) {
            /* pop a few in a row: this is where a stale steal-half claim
             * and the owner's pop would collide */
            for (int k = 0; k < 3; k++) {
                void *x = sn__deque_pop(&s.d);
                if (x)
                    take(&s, x);
            }
        }
    }
    void *x;
    while ((x = sn__deque_pop(&s.d)))
        take(&s, x);
    atomic_store(&s.done, 1);
    for (int i = 0; i < THIEVES; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&s.total), (long)n);
    for (size_t i = 0; i < n; i++)
        if (atomic_load(&s.taken[i]) != 1)
            fail_msg("item %zu taken %d times", i, (int)atomic_load(&s.taken[i]));
    free((void *)s.taken);
    sn__deque_fini(&s.d);
}

static void stampede_steal_only(void **st)
{
    (void)st;
    run_stress(200000, 0);
}

static void stress_owner_pops_and_thieves_steal_half(void **st)
{
    (void)st;
    for (int round = 0; round < 5; round++)
        run_stress(200000, 2);
}

static void stress_mostly_owner(void **st)
{
    (void)st;
    run_stress(200000, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(smoke),
        cmocka_unit_test(steal_half_takes_half_oldest_first),
        cmocka_unit_test(growth_keeps_items),
        cmocka_unit_test(indices_rebase_when_empty),
        cmocka_unit_test(indices_rebase_without_running_empty),
        cmocka_unit_test(stampede_steal_only),
        cmocka_unit_test(stress_owner_pops_and_thieves_steal_half),
        cmocka_unit_test(stress_mostly_owner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

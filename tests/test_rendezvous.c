/* test_rendezvous.c - the choice of a name's owner and copy holder
 * (common/rendezvous.h): the same on every node whatever the order it
 * lists the members in, spread evenly, and moving only the names of a
 * node that joins or leaves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rendezvous.h"

#define NAMES 30000

static size_t rank_of(const char *name, const uint32_t *nodes, size_t n, uint32_t *out, size_t k)
{
    return sn__rdv_rank(name, strlen(name), nodes, n, out, k);
}

/* Any order of the members, and duplicates, give the same first two. */
static void order_free(void **st)
{
    (void)st;
    const uint32_t a[] = {1, 2, 3, 4, 5}, b[] = {5, 3, 1, 4, 2, 3, 5};
    for (int i = 0; i < 2000; i++) {
        char name[32];
        snprintf(name, sizeof name, "svc-%d", i);
        uint32_t x[2], y[2];
        assert_int_equal(rank_of(name, a, 5, x, 2), 2);
        assert_int_equal(rank_of(name, b, 7, y, 2), 2);
        assert_int_equal(x[0], y[0]);
        assert_int_equal(x[1], y[1]);
        assert_int_not_equal(x[0], x[1]);
    }
}

/* The full order ranks each member once, best first. */
static void full_order(void **st)
{
    (void)st;
    const uint32_t nodes[] = {7, 3, 9, 1};
    uint32_t out[4];
    assert_int_equal(rank_of("x", nodes, 4, out, 4), 4);
    uint64_t h = sn__rdv_key("x", 1);
    for (int i = 1; i < 4; i++)
        assert_true(sn__rdv_before(sn__rdv_score(h, out[i - 1]), out[i - 1], sn__rdv_score(h, out[i]), out[i]));
    uint32_t one[1];
    assert_int_equal(rank_of("x", nodes, 4, one, 1), 1);
    assert_int_equal(one[0], out[0]);
    assert_int_equal(rank_of("x", nodes, 0, one, 1), 0);
}

/* Three nodes own about a third each. */
static void spread(void **st)
{
    (void)st;
    const uint32_t nodes[] = {1, 2, 3};
    size_t count[4] = {0};
    for (int i = 0; i < NAMES; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d", i);
        uint32_t o[1];
        rank_of(name, nodes, 3, o, 1);
        count[o[0]]++;
    }
    for (int n = 1; n <= 3; n++)
        assert_in_range(count[n], NAMES / 3 - NAMES / 20, NAMES / 3 + NAMES / 20);
}

/* Node 3 leaves: only its names change owner, each to its copy holder.
 * Node 4 joins: a name changes owner only to node 4. */
static void minimal_moves(void **st)
{
    (void)st;
    const uint32_t three[] = {1, 2, 3}, two[] = {1, 2}, four[] = {1, 2, 3, 4};
    size_t to4 = 0;
    for (int i = 0; i < NAMES; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d", i);
        uint32_t a[2], b[1], c[1];
        rank_of(name, three, 3, a, 2);
        rank_of(name, two, 2, b, 1);
        rank_of(name, four, 4, c, 1);
        if (a[0] != 3)
            assert_int_equal(b[0], a[0]);
        else
            assert_int_equal(b[0], a[1]);
        if (c[0] != a[0]) {
            assert_int_equal(c[0], 4);
            to4++;
        }
    }
    assert_in_range(to4, NAMES / 4 - NAMES / 20, NAMES / 4 + NAMES / 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(order_free),
        cmocka_unit_test(full_order),
        cmocka_unit_test(spread),
        cmocka_unit_test(minimal_moves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

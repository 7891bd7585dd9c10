/* test_services.c - the pure rules of services (relay/svcrule.h): the
 * majority a node needs to run or start an instance, the backoff of a
 * service past its restart intensity, and the count of recent failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "svcrule.h"

/* More than half of the known members, the node itself counted. */
static void majority(void **st)
{
    (void)st;
    assert_true(sn__svc_majority(0, 1));  /* alone, and alone known */
    assert_false(sn__svc_majority(0, 2)); /* one of two: no */
    assert_true(sn__svc_majority(1, 2));
    assert_true(sn__svc_majority(1, 3)); /* two of three */
    assert_false(sn__svc_majority(0, 3));
    assert_false(sn__svc_majority(1, 4)); /* two of four: a tie is no majority */
    assert_true(sn__svc_majority(2, 4));
    assert_false(sn__svc_majority(1, 5)); /* two of five */
    assert_true(sn__svc_majority(2, 5));
    assert_true(sn__svc_majority(3, 5));
    assert_false(sn__svc_majority(0, 0)); /* knowing no one (not even itself): never */
    /* two sides of a split never both hold one */
    for (size_t known = 1; known < 50; known++)
        for (size_t a = 1; a < known; a++)
            assert_false(sn__svc_majority(a - 1, known) && sn__svc_majority(known - a - 1, known));
}

/* 250 ms doubled each time, at most 10 s. */
static void backoff(void **st)
{
    (void)st;
    assert_int_equal(sn__svc_backoff_ms(0), 0);
    assert_int_equal(sn__svc_backoff_ms(1), 250);
    assert_int_equal(sn__svc_backoff_ms(2), 500);
    assert_int_equal(sn__svc_backoff_ms(3), 1000);
    assert_int_equal(sn__svc_backoff_ms(6), 8000);
    assert_int_equal(sn__svc_backoff_ms(7), SN_SVC_BACKOFF_MAX);
    assert_int_equal(sn__svc_backoff_ms(1000000), SN_SVC_BACKOFF_MAX);
    for (uint32_t k = 1; k < 100; k++)
        assert_true(sn__svc_backoff_ms(k + 1) >= sn__svc_backoff_ms(k));
}

/* Failures within the window count, older ones and empty slots do not. */
static void recent(void **st)
{
    (void)st;
    const uint64_t s = 1000000000ull, now = 100 * s;
    uint64_t f[6] = {0, now - 6 * s, now - 5 * s, now - 4 * s, now - 1, now};
    assert_int_equal(sn__svc_recent(f, 6, now, 5000), 4);
    assert_int_equal(sn__svc_recent(f, 6, now, 1000), 2);
    assert_int_equal(sn__svc_recent(f, 6, now, 10000), 5);
    assert_int_equal(sn__svc_recent(f, 0, now, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(majority), cmocka_unit_test(backoff), cmocka_unit_test(recent)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

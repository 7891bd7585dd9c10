/* test_gqueue.c - the global queue (sched/gqueue.c) stays FIFO, and
 * loses and repeats nothing, when it grows while its ring has wrapped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "internal.h"

static void *item(uintptr_t i)
{
    return (void *)(i + 1);
}

/* Pushes and pops in rounds that leave the head anywhere in the ring
 * before each growth (256, 512, 1024, ...), checking every pop. */
static void grows_wrapped(void **st)
{
    (void)st;
    sn__gqueue_t q;
    assert_int_equal(sn__gqueue_init(&q), 0);
    uintptr_t pushed = 0, popped = 0;
    void *out[97];
    for (int round = 0; round < 40; round++) {
        for (int k = 0; k < 150 + round * 13; k++)
            assert_int_equal(sn__gqueue_push(&q, item(pushed++)), 0);
        size_t n = sn__gqueue_pop(&q, out, 37 + (size_t)round % 60);
        for (size_t i = 0; i < n; i++)
            assert_ptr_equal(out[i], item(popped++));
    }
    size_t n;
    while ((n = sn__gqueue_pop(&q, out, 97)) > 0)
        for (size_t i = 0; i < n; i++)
            assert_ptr_equal(out[i], item(popped++));
    assert_int_equal(popped, pushed);
    assert_int_equal(sn__gqueue_size(&q), 0);
    sn__gqueue_fini(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(grows_wrapped)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

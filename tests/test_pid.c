/* test_pid.c - one printer and one parser for the PID text form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "schednode/schednode.h"

static void roundtrip(void **st)
{
    (void)st;
    sn_pid_t cases[] = {{1, 1}, {3, 1042}, {4294967295u, 18446744073709551615ull}, {0, 7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[SN_PID_STRLEN];
        sn_pid_t back;
        sn_pid_format(cases[i], buf, sizeof buf);
        assert_int_equal(sn_pid_parse(buf, &back), 0);
        assert_true(sn_pid_eq(back, cases[i]));
    }
    char buf[SN_PID_STRLEN];
    assert_string_equal(sn_pid_format((sn_pid_t){3, 1042}, buf, sizeof buf), "3.1042");
}

static void rejects_malformed(void **st)
{
    (void)st;
    const char *bad[] = {"",
                         ".",
                         "3.",
                         ".5",
                         "3.5.",
                         "3..5",
                         "-3.5",
                         "3.-5",
                         "+3.5",
                         " 3.5",
                         "3.5 ",
                         "3,5",
                         "a.5",
                         "3.b",
                         "3.0",
                         "4294967296.1",
                         "1.18446744073709551616",
                         "3.5x",
                         "000000000000000000000001.1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sn_pid_t p = {99, 99};
        if (sn_pid_parse(bad[i], &p) != SN_EINVAL)
            fail_msg("accepted '%s'", bad[i]);
        assert_int_equal(p.node, 99); /* untouched on error */
    }
    sn_pid_t p;
    assert_int_equal(sn_pid_parse(NULL, &p), SN_EINVAL);
}

static void error_table(void **st)
{
    (void)st;
    assert_string_equal(sn_strerror(SN_ENOPROC), "noproc");
    assert_string_equal(sn_strerror(SN_ENODEDOWN), "nodedown");
    assert_string_equal(sn_strerror(SN_EUNREACHABLE), "unreachable");
    assert_string_equal(sn_strerror(0), "ok");
    assert_string_equal(sn_strerror(-12345), "unknown error");
}

static void payloads(void **st)
{
    (void)st;
    sn_payload_t *p = sn_payload_text("hello");
    assert_int_equal(p->ctype, SN_CT_TEXT);
    assert_int_equal(p->len, 5);
    assert_string_equal((const char *)p->data, "hello");
    uint64_t v;
    assert_int_equal(sn_payload_get_u64(p, &v), SN_EINVAL);
    sn_payload_t *q = sn_take(&p);
    assert_null(p);
    sn_payload_destroy(&q);
    assert_null(q);
    sn_payload_destroy(&q); /* safe twice */
    q = sn_payload_u64(77);
    assert_int_equal(sn_payload_get_u64(q, &v), 0);
    assert_int_equal(v, 77);
    sn_payload_destroy(&q);
    q = sn_payload_printf(SN_CT_ERROR, "x=%d", 5);
    assert_string_equal((const char *)q->data, "x=5");
    sn_payload_destroy(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(roundtrip),
        cmocka_unit_test(rejects_malformed),
        cmocka_unit_test(error_table),
        cmocka_unit_test(payloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

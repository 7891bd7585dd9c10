/* fuzz_pid.c - the PID text parser (sn_pid_parse, sched/pid.c), which
 * reads PIDs from the command line (`schednode send PID ...`) and from
 * process arguments. Checked against a second, deliberately naive parser
 * (exact decimal arithmetic on the digit strings), and printed forms must
 * parse back to the same PID.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "schednode/schednode.h"

/* Does the decimal digit string d (n digits, no sign) fit in max? By
 * comparing strings: strip leading zeros, then compare length and digits
 * with max's decimal form. */
static bool fits(const char *d, size_t n, const char *max)
{
    while (n > 1 && *d == '0')
        d++, n--;
    size_t m = strlen(max);
    return n < m || (n == m && memcmp(d, max, n) <= 0);
}

static uint64_t value(const char *d, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (uint64_t)(d[i] - '0');
    return v;
}

/* The rule as sn_pid_parse documents it: "<node>.<serial>", decimal, no
 * sign or space, node <= UINT32_MAX, 1 <= serial <= UINT64_MAX, and (a
 * length bound of the parser) at most 20 digits on each side. */
static bool naive(const char *s, sn_pid_t *out)
{
    size_t a = strspn(s, "0123456789");
    if (a == 0 || a > 20 || s[a] != '.')
        return false;
    const char *t = s + a + 1;
    size_t b = strspn(t, "0123456789");
    if (b == 0 || b > 20 || t[b] != '\0')
        return false;
    if (!fits(s, a, "4294967295") || !fits(t, b, "18446744073709551615"))
        return false;
    out->node = (uint32_t)value(s, a);
    out->serial = value(t, b);
    return out->serial != 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0; /* the parser takes C strings: an embedded NUL ends it */
    sn_pid_t got, want;
    int rc = sn_pid_parse(text, &got);
    bool ok = naive(text, &want);
    FUZZ_CHECK((rc == 0) == ok);
    FUZZ_CHECK(rc == 0 || rc == SN_EINVAL);
    if (rc == 0) {
        FUZZ_CHECK(sn_pid_eq(got, want));
        char printed[2 * SN_PID_STRLEN];
        sn_pid_format(got, printed, sizeof printed);
        FUZZ_CHECK(strlen(printed) < SN_PID_STRLEN); /* SN_PID_STRLEN holds any PID */
        sn_pid_t again;
        FUZZ_CHECK(sn_pid_parse(printed, &again) == 0 && sn_pid_eq(again, got));
    }
    /* the printer, on PIDs made from the input's bytes */
    if (size >= 12) {
        sn_pid_t p;
        memcpy(&p.node, data, 4);
        memcpy(&p.serial, data + 4, 8);
        char printed[SN_PID_STRLEN];
        sn_pid_format(p, printed, sizeof printed);
        sn_pid_t back;
        FUZZ_CHECK((sn_pid_parse(printed, &back) == 0) == (p.serial != 0));
        FUZZ_CHECK(p.serial == 0 || sn_pid_eq(back, p));
    }
    free(text);
    return 0;
}

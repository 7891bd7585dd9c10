/* test_dgram.c - a probe's datagram (relay/dgram.c): plain and sealed
 * ones read back as written; a forged, damaged, misaddressed or reflected
 * one does not open; the replay window takes each number once. */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sodium.h>
#include <string.h>

#include "dgram.h"

static const char body[] = "an Envelope, as far as dgram.c knows";

/* Two nodes' key pairs and the key each computes for the pair. */
typedef struct pair {
    uint8_t pk1[32], sk1[32], pk2[32], sk2[32], k1[32], k2[32];
} pair_t;

static void make_pair(pair_t *p)
{
    assert_true(sodium_init() >= 0);
    crypto_box_keypair(p->pk1, p->sk1);
    crypto_box_keypair(p->pk2, p->sk2);
    assert_int_equal(sn_dgram_shared(p->k1, p->pk2, p->sk1), 0);
    assert_int_equal(sn_dgram_shared(p->k2, p->pk1, p->sk2), 0);
    assert_memory_equal(p->k1, p->k2, 32); /* one key for both directions */
}

static void plain_round_trip(void **st)
{
    (void)st;
    uint8_t out[SN_DGRAM_MAX];
    size_t n = sn_dgram_seal(out, 7, 100, 1, 200, NULL, NULL, body, sizeof body);
    assert_int_equal(n, SN_DGRAM_PLAIN_HEAD + sizeof body);
    sn_dgram_t d;
    const char *why = NULL;
    assert_int_equal(sn_dgram_parse(out, n, &d, &why), 0);
    assert_false(d.sealed);
    assert_int_equal(d.node, 7);
    assert_int_equal(d.to_inc, 200);
    assert_int_equal(d.len, sizeof body);
    assert_memory_equal(d.body, body, sizeof body);
    /* too long for a datagram: not made */
    static uint8_t big[SN_DGRAM_BODY_MAX + 1];
    assert_int_equal(sn_dgram_seal(out, 7, 100, 1, 200, NULL, NULL, big, sizeof big), 0);
    assert_int_not_equal(sn_dgram_seal(out, 7, 100, 1, 200, NULL, NULL, big, sizeof big - 1), 0);
}

static void sealed_round_trip(void **st)
{
    (void)st;
    pair_t p;
    make_pair(&p);
    uint8_t out[SN_DGRAM_MAX], plain[SN_DGRAM_MAX];
    size_t n = sn_dgram_seal(out, 1, 100, 5, 200, p.pk1, p.k1, body, sizeof body);
    assert_int_equal(n, SN_DGRAM_SEALED_HEAD + sizeof body);
    assert_null(memmem(out, n, body, sizeof body)); /* not in the clear */
    sn_dgram_t d;
    const char *why = NULL;
    assert_int_equal(sn_dgram_parse(out, n, &d, &why), 0);
    assert_true(d.sealed);
    assert_int_equal(d.node, 1);
    assert_int_equal(d.inc, 100);
    assert_int_equal(d.seq, 5);
    assert_memory_equal(d.pk, p.pk1, 32);
    assert_int_equal(sn_dgram_open(out, n, p.k2, plain, &d, &why), 0);
    assert_int_equal(d.to_inc, 200);
    assert_int_equal(d.len, sizeof body);
    assert_memory_equal(d.body, body, sizeof body);
}

/* Every byte changed, one at a time: the header's fields either fail to
 * parse, or the seal does not open (they are in the nonce, or the key). */
static void tampered(void **st)
{
    (void)st;
    pair_t p;
    make_pair(&p);
    uint8_t out[SN_DGRAM_MAX], bad[SN_DGRAM_MAX], plain[SN_DGRAM_MAX];
    size_t n = sn_dgram_seal(out, 1, 100, 5, 200, p.pk1, p.k1, body, sizeof body);
    for (size_t i = 0; i < n; i++) {
        memcpy(bad, out, n);
        bad[i] ^= 0x20;
        sn_dgram_t d;
        const char *why = NULL;
        if (i >= 8 && i < 40) /* the sender's key: the member's own is used, and compared (udp.c) */
            continue;
        bool opened =
            sn_dgram_parse(bad, n, &d, &why) == 0 && d.sealed && sn_dgram_open(bad, n, p.k2, plain, &d, &why) == 0;
        assert_false(opened);
        assert_non_null(why);
    }
    /* cut short, at every length */
    for (size_t len = 0; len < n; len++) {
        sn_dgram_t d;
        const char *why = NULL;
        bool opened =
            sn_dgram_parse(out, len, &d, &why) == 0 && d.sealed && sn_dgram_open(out, len, p.k2, plain, &d, &why) == 0;
        assert_false(opened);
    }
}

/* Sealed for another pair, or sent back to its sender (a reflection: the
 * key is the same, but the nonce names the other node). */
static void wrong_key_and_reflection(void **st)
{
    (void)st;
    pair_t p, q;
    make_pair(&p);
    make_pair(&q);
    uint8_t out[SN_DGRAM_MAX], plain[SN_DGRAM_MAX];
    size_t n = sn_dgram_seal(out, 1, 100, 5, 200, p.pk1, p.k1, body, sizeof body);
    sn_dgram_t d;
    const char *why = NULL;
    assert_int_equal(sn_dgram_parse(out, n, &d, &why), 0);
    assert_int_not_equal(sn_dgram_open(out, n, q.k2, plain, &d, &why), 0);
    /* node 1's datagram claiming to come from node 2: the nonce does not
     * say so (and a nonce rewritten to say so does not open) */
    out[4] = 2;
    assert_int_not_equal(sn_dgram_parse(out, n, &d, &why), 0);
    out[8 + 32] = 2;
    assert_int_equal(sn_dgram_parse(out, n, &d, &why), 0);
    assert_int_not_equal(sn_dgram_open(out, n, p.k2, plain, &d, &why), 0);
}

static void garbage(void **st)
{
    (void)st;
    sn_dgram_t d;
    const char *why = NULL;
    const uint8_t junk[] = "GET / HTTP/1.0\r\n\r\n";
    assert_int_not_equal(sn_dgram_parse(junk, sizeof junk, &d, &why), 0);
    uint8_t out[SN_DGRAM_MAX];
    size_t n = sn_dgram_seal(out, 3, 1, 1, 1, NULL, NULL, body, sizeof body);
    out[3] = 7; /* a mode this version does not know */
    assert_int_not_equal(sn_dgram_parse(out, n, &d, &why), 0);
    out[3] = 0;
    memset(out + 4, 0, 4); /* no sender */
    assert_int_not_equal(sn_dgram_parse(out, n, &d, &why), 0);
    out[3] = 1; /* "sealed", but too short for a seal */
    out[4] = 3;
    assert_int_not_equal(sn_dgram_parse(out, SN_DGRAM_SEALED_HEAD - 1, &d, &why), 0);
}

static void replay_window(void **st)
{
    (void)st;
    sn_dgram_window_t w = {0};
    assert_int_equal(sn_dgram_fresh(&w, 10, 5), SN_DGRAM_FRESH);
    assert_int_equal(sn_dgram_fresh(&w, 10, 5), SN_DGRAM_REPLAY);
    assert_int_equal(sn_dgram_fresh(&w, 10, 7), SN_DGRAM_FRESH);
    assert_int_equal(sn_dgram_fresh(&w, 10, 6), SN_DGRAM_FRESH); /* late, not seen: taken */
    assert_int_equal(sn_dgram_fresh(&w, 10, 6), SN_DGRAM_REPLAY);
    assert_int_equal(sn_dgram_fresh(&w, 10, 7), SN_DGRAM_REPLAY);
    assert_int_equal(sn_dgram_fresh(&w, 10, 70), SN_DGRAM_FRESH);
    assert_int_equal(sn_dgram_fresh(&w, 10, 7), SN_DGRAM_REPLAY); /* 63 behind, taken: still known */
    assert_int_equal(sn_dgram_fresh(&w, 10, 8), SN_DGRAM_FRESH);  /* 62 behind, not seen */
    assert_int_equal(sn_dgram_fresh(&w, 10, 8), SN_DGRAM_REPLAY);
    assert_int_equal(sn_dgram_fresh(&w, 10, 1000), SN_DGRAM_FRESH);
    assert_int_equal(sn_dgram_fresh(&w, 10, 70), SN_DGRAM_REPLAY);  /* 930 behind: too old to tell, refused */
    assert_int_equal(sn_dgram_fresh(&w, 10, 937), SN_DGRAM_FRESH);  /* 63 behind, never seen: taken */
    assert_int_equal(sn_dgram_fresh(&w, 10, 936), SN_DGRAM_REPLAY); /* 64 behind: too old to tell, refused */
    /* a new run of the sender starts again; its earlier run's are old */
    assert_int_equal(sn_dgram_fresh(&w, 11, 1), SN_DGRAM_FRESH);
    assert_int_equal(sn_dgram_fresh(&w, 10, 1001), SN_DGRAM_OLD_RUN);
    assert_int_equal(sn_dgram_fresh(&w, 11, 1), SN_DGRAM_REPLAY);
    /* every number of a long run, in order and shuffled in blocks of 16,
     * taken exactly once */
    sn_dgram_window_t v = {0};
    for (uint64_t base = 1; base < 2000; base += 16)
        for (uint64_t i = 0; i < 16; i++) {
            uint64_t seq = base + (i * 7) % 16;
            assert_int_equal(sn_dgram_fresh(&v, 12, seq), SN_DGRAM_FRESH);
            assert_int_equal(sn_dgram_fresh(&v, 12, seq), SN_DGRAM_REPLAY);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_round_trip), cmocka_unit_test(sealed_round_trip),
        cmocka_unit_test(tampered),         cmocka_unit_test(wrong_key_and_reflection),
        cmocka_unit_test(garbage),          cmocka_unit_test(replay_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

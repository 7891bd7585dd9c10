/* dgram.c - a probe's UDP datagram: framing, sealing with crypto_box, and
 * the replay window (see dgram.h for the layout and why). Pure functions:
 * any thread, no shared state.
 */
#include "dgram.h"

#include <sodium.h>
#include <string.h>

static const uint8_t magic[3] = {'S', 'N', 1};

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The nonce of a datagram from node's run inc, number seq (dgram.h). */
static void nonce_of(uint8_t n[crypto_box_NONCEBYTES], uint32_t node, uint64_t inc, uint64_t seq)
{
    put32(n, node);
    memset(n + 4, 0, 4);
    put64(n + 8, inc);
    put64(n + 16, seq);
}

size_t sn_dgram_seal(uint8_t *out, uint32_t node, uint64_t inc, uint64_t seq, uint64_t to_inc, const uint8_t *pk,
                     const uint8_t *k, const void *body, size_t len)
{
    if (len > SN_DGRAM_BODY_MAX)
        return 0;
    memcpy(out, magic, 3);
    out[3] = k != NULL;
    put32(out + 4, node);
    if (!k) {
        put64(out + 8, to_inc);
        memcpy(out + SN_DGRAM_PLAIN_HEAD, body, len);
        return SN_DGRAM_PLAIN_HEAD + len;
    }
    memcpy(out + 8, pk, SN_DGRAM_KEY);
    uint8_t *nonce = out + 8 + SN_DGRAM_KEY, *box = nonce + crypto_box_NONCEBYTES;
    nonce_of(nonce, node, inc, seq);
    /* to_inc and the body, boxed in place: the plain text is laid out
     * after the MAC, where crypto_box_easy puts the cipher text (libsodium
     * allows them to overlap exactly) */
    uint8_t *plain = box + crypto_box_MACBYTES;
    put64(plain, to_inc);
    memcpy(plain + 8, body, len);
    if (crypto_box_easy_afternm(box, plain, 8 + len, nonce, k) != 0)
        return 0;
    return SN_DGRAM_SEALED_HEAD + len;
}

int sn_dgram_parse(const uint8_t *in, size_t len, sn_dgram_t *d, const char **why)
{
    memset(d, 0, sizeof *d);
    if (len < SN_DGRAM_PLAIN_HEAD || memcmp(in, magic, 3) != 0 || in[3] > 1) {
        *why = "datagram: not a schednode probe (or another version)";
        return -1;
    }
    d->sealed = in[3] == 1;
    d->node = get32(in + 4);
    if (d->node == 0) {
        *why = "datagram: no sender node";
        return -1;
    }
    if (!d->sealed) {
        d->to_inc = get64(in + 8);
        d->body = in + SN_DGRAM_PLAIN_HEAD;
        d->len = len - SN_DGRAM_PLAIN_HEAD;
        return 0;
    }
    if (len < SN_DGRAM_SEALED_HEAD) {
        *why = "datagram: shorter than its seal";
        return -1;
    }
    d->pk = in + 8;
    const uint8_t *nonce = in + 8 + SN_DGRAM_KEY;
    if (get32(nonce) != d->node || get32(nonce + 4) != 0) {
        *why = "datagram: its nonce names another sender";
        return -1;
    }
    d->inc = get64(nonce + 8);
    d->seq = get64(nonce + 16);
    return 0;
}

int sn_dgram_open(const uint8_t *in, size_t len, const uint8_t *k, uint8_t *plain, sn_dgram_t *d, const char **why)
{
    const uint8_t *nonce = in + 8 + SN_DGRAM_KEY, *box = nonce + crypto_box_NONCEBYTES;
    size_t boxlen = len - (size_t)(box - in);
    if (!d->sealed || len < SN_DGRAM_SEALED_HEAD || crypto_box_open_easy_afternm(plain, box, boxlen, nonce, k) != 0) {
        *why = "datagram: its seal does not open (forged, damaged, or sealed for another key)";
        return -1;
    }
    d->to_inc = get64(plain);
    d->body = plain + 8;
    d->len = boxlen - crypto_box_MACBYTES - 8;
    return 0;
}

int sn_dgram_shared(uint8_t k[SN_DGRAM_KEY], const uint8_t *pk, const uint8_t *sk)
{
    return crypto_box_beforenm(k, pk, sk) == 0 ? 0 : -1;
}

int sn_dgram_fresh(sn_dgram_window_t *w, uint64_t inc, uint64_t seq)
{
    if (inc < w->inc)
        return SN_DGRAM_OLD_RUN;
    if (inc > w->inc) { /* (the first from this run) */
        *w = (sn_dgram_window_t){inc, seq, 1};
        return SN_DGRAM_FRESH;
    }
    if (seq > w->top) {
        uint64_t shift = seq - w->top;
        w->bits = shift >= 64 ? 1 : (w->bits << shift) | 1;
        w->top = seq;
        return SN_DGRAM_FRESH;
    }
    uint64_t back = w->top - seq;
    if (back >= 64 || (w->bits >> back) & 1)
        return SN_DGRAM_REPLAY;
    w->bits |= UINT64_C(1) << back;
    return SN_DGRAM_FRESH;
}

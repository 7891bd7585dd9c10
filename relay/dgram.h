/* dgram.h - the UDP datagram that carries a SWIM probe (relay/udp.c):
 * its framing, its sealing in a secure cluster, and the replay window.
 * Pure functions (no socket, no clock, no relay), so that the unit test
 * (tests/test_dgram.c) and the fuzz target reach every branch.
 *
 *   plain  (insecure cluster):
 *     magic "SN\1\0" | sender node (4) | to_inc (8) | Envelope
 *   sealed (secure cluster):
 *     magic "SN\1\1" | sender node (4) | sender's public key (32) | nonce (24) |
 *     crypto_box (16 bytes of MAC, then: to_inc (8) | Envelope)
 *
 * Integers are little-endian. to_inc is the receiver's run (incarnation)
 * the sender addressed: a later run of the receiver drops it. The Envelope
 * is one protobuf frame (proto/schednode.proto), a Heartbeat (a probe) or
 * an Error (the answer to an earlier run of a node, members.c).
 *
 * Sealing is libsodium's crypto_box (Curve25519, XSalsa20, Poly1305: what
 * CurveZMQ uses) with the nodes' CurveZMQ keys, computed once per peer
 * (crypto_box_beforenm). The nonce is the sender's node (4), four zero
 * bytes, its run (8) and a number the run raises for every datagram (8):
 * never used twice under one key (both directions share the key, and the
 * node id tells them apart; a restart is a new run). The box proves the
 * sender holds the secret key of the public key it names; the receiver
 * takes each (run, number) at most once (sn_dgram_window_t), so a copy
 * replayed from the network is dropped, and to_inc stops a copy from
 * reaching a later run of the receiver.
 */
#ifndef SN_DGRAM_H
#define SN_DGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SN_DGRAM_MAX 1400 /* bytes a datagram holds at most: it fits an Ethernet frame unfragmented */
#define SN_DGRAM_KEY 32   /* a public key, a precomputed shared key */
#define SN_DGRAM_PLAIN_HEAD 16
#define SN_DGRAM_SEALED_HEAD (8 + 32 + 24 + 16 + 8) /* header, key, nonce, MAC, to_inc */
/* The largest Envelope a datagram carries (sealed or not: the same in
 * both modes, so that what a probe carries does not depend on it). */
#define SN_DGRAM_BODY_MAX (SN_DGRAM_MAX - SN_DGRAM_SEALED_HEAD)

/* A datagram as read: the header's fields, and after sn_dgram_open (or
 * for a plain one, sn_dgram_parse) the receiver's run and the Envelope. */
typedef struct sn_dgram {
    uint32_t node;     /* the sender */
    bool sealed;       /* a secure cluster's */
    const uint8_t *pk; /* sealed: the sender's public key (in the datagram) */
    uint64_t inc, seq; /* sealed: the sender's run and the datagram's number (the nonce) */
    uint64_t to_inc;   /* plain, or once opened */
    const uint8_t *body;
    size_t len;
} sn_dgram_t;

/* Writes a datagram from `node` (its run inc) to the receiver's run
 * to_inc around body[0..len) into out (SN_DGRAM_MAX bytes): plain when k
 * is NULL, else sealed with the shared key k, our public key pk and
 * number seq. Returns its length, or 0 if body is longer than
 * SN_DGRAM_BODY_MAX. */
size_t sn_dgram_seal(uint8_t *out, uint32_t node, uint64_t inc, uint64_t seq, uint64_t to_inc, const uint8_t *pk,
                     const uint8_t *k, const void *body, size_t len);
/* Reads a datagram's header into *d (a plain one whole). Returns 0, or -1
 * with *why naming what is wrong (never asserts: network bytes). */
int sn_dgram_parse(const uint8_t *in, size_t len, sn_dgram_t *d, const char **why);
/* Opens a sealed datagram parsed into *d with the shared key k, into
 * plain[0..len) (len - SN_DGRAM_SEALED_HEAD + 8 bytes at least): fills
 * d->to_inc and d->body (in plain). 0, or -1 with *why. */
int sn_dgram_open(const uint8_t *in, size_t len, const uint8_t *k, uint8_t *plain, sn_dgram_t *d, const char **why);
/* The shared key of our secret key sk and a peer's public key pk. 0, or
 * -1 for a key that is no key (a low-order point). */
int sn_dgram_shared(uint8_t k[SN_DGRAM_KEY], const uint8_t *pk, const uint8_t *sk);

/* The numbers taken from one sender: its newest run, the highest number
 * of it, and the 63 below it (bit i: top - i taken). Zero: none yet. */
typedef struct sn_dgram_window {
    uint64_t inc, top, bits;
} sn_dgram_window_t;
enum { SN_DGRAM_FRESH, SN_DGRAM_REPLAY, SN_DGRAM_OLD_RUN };
/* Whether a datagram (run inc, number seq), authenticated, is new: FRESH
 * (now taken), REPLAY (taken already, or too old to tell: 64 numbers
 * behind the highest) or OLD_RUN (an earlier run than the newest seen:
 * the window is left alone). Only call it for an opened datagram: a
 * forged number must not move the window. */
int sn_dgram_fresh(sn_dgram_window_t *w, uint64_t inc, uint64_t seq);

#endif

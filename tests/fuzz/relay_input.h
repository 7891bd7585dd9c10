/* relay_input.h - the input format of fuzz_relay.c, shared with the seed
 * writer (seeds.c): one setup byte, then records, each one thing that can
 * happen to a relay: a frame arriving on one of its connections, or one of
 * the relay's own timers firing.
 *
 *   input  := setup record*
 *   setup  := one byte of FZ_SETUP_* bits
 *   record := op            (op & 7 is FZ_STEAL_TICK, FZ_MEMBERS_TICK or FZ_PEER_GONE)
 *           | op len2 frame (op & 7 is FZ_ROUTER, FZ_PEER, FZ_SEED or FZ_DATAGRAM, and
 *                            7 counts as FZ_ROUTER; len2 is the frame's length, 2
 *                            bytes little-endian, cut to what is left; a datagram's
 *                            "frame" is the whole datagram, relay/dgram.h)
 *
 * op >> 3 is an argument: which client routing id (FZ_ROUTER), which member
 * (FZ_PEER_GONE). The relay starts as node 1 with members 2 (a steal
 * partner) and 3 (one type at another version: not a partner).
 */
#ifndef SN_FUZZ_RELAY_INPUT_H
#define SN_FUZZ_RELAY_INPUT_H

enum {
    FZ_SETUP_JOINED = 1,  /* a member already (else still joining: Welcome and Error count) */
    FZ_SETUP_STEAL = 2,   /* stealing on (cfg.steal) */
    FZ_SETUP_SECURE = 4,  /* CurveZMQ: members need a public key */
    FZ_SETUP_NOSTEAL = 8, /* shutting down: steal requests get nothing */
};

enum {
    FZ_ROUTER = 0,       /* on the ROUTER, from routing id number op >> 3 (of FZ_IDENTS) */
    FZ_PEER = 1,         /* on an outbound DEALER (a member's answer: acks, offers, ...) */
    FZ_SEED = 2,         /* on a seed's DEALER (Welcome, refusals) */
    FZ_STEAL_TICK = 3,   /* steal.c's timer: timeouts, and a request when idle */
    FZ_MEMBERS_TICK = 4, /* members.c's timer: heartbeats, gossip */
    FZ_PEER_GONE = 5,    /* member number op >> 3 failed: its unconfirmed sends bounce */
    FZ_DATAGRAM = 6,     /* on the probes' UDP socket (relay/udp.c), from 127.0.0.1:7002 */
};
#define FZ_IDENTS 4

/* Node ids, process type and methods the harness sets up. */
#define FZ_SELF 1
#define FZ_PARTNER 2
#define FZ_OTHER 3
#define FZ_FIRST_SERIAL 1000
#define FZ_TYPE "fz"
/* A "fz" process's state (its method, marshalled as one SN_CT_U64). */
enum { FZ_MODE_IDLE, FZ_MODE_RUN, FZ_MODE_BUSY, FZ_MODE_FAIL, FZ_NMODES };

#endif

/* relay_fake.h - a test double of the relay's I/O side, for the unit tests
 * of relay/'s logic files (tests/test_members.c, test_steal.c,
 * test_locate.c).
 *
 * members.c, steal.c, locate.c and swim.c are linked as they are; the
 * functions they call in relay.c (sending, the outbound queue, routing,
 * the clock, the peer table) are defined again in relay_fake.c, without
 * sockets or an I/O thread: the clock is a variable the test moves, and
 * every frame a node sends is kept in memory, in order, for the test to
 * decode (sn_codec_decode), look at, and hand to another node. The test
 * thread plays each node's I/O thread; a node's scheduler is real (its
 * workers run the processes) and reaches the double through the relay
 * hook, as it reaches relay.c.
 */
#ifndef SN_RELAY_FAKE_H
#define SN_RELAY_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relay_int.h"
#include "peer.h"
#include "members.h"
#include "sn_node.h"

/* Scheduler internals the tests use: one place to follow a rename. */
#define fake_here(sched, pid) sn__migrate_here((sched), (pid))
#define fake_forward_of(sched, pid) sn__migrate_forward_of((sched), (pid))

/* ------------------------------------------------------------- the clock */

/* What sn__relay_now_ns returns (starts at 1000 s, never 0). */
uint64_t fake_clock(void);
void fake_clock_set(uint64_t ns);
void fake_clock_advance(uint64_t ns);

/* ------------------------------------------------------------- the nodes */

/* How a frame left its node. */
enum {
    FAKE_TRY = 1, /* sn__relay_try_send (members: probes, gossip, broadcasts) */
    FAKE_ORDERED, /* sn__relay_send_ordered (stealing) */
    FAKE_ANSWER,  /* sn__relay_answer: on the ROUTER, to ident (Welcome, refusals) */
    FAKE_ROUTED   /* an outbound item routed to a peer, as a Sends frame of one send */
};

typedef struct fake_frame {
    uint32_t to; /* the peer it went to (FAKE_ANSWER: 0) */
    int how;
    unsigned char ident[256];
    size_t ident_len;
    void *buf; /* owned by the node until taken */
    size_t len;
} fake_frame_t;

typedef struct fake_bounce {
    uint32_t node;
    int error;
    bool gone;
} fake_bounce_t;

/* A node: the relay's state (first: the logic files get &n->r) and what
 * the double saw. The test thread reads and writes all of it. */
typedef struct fake_node {
    sn_relay_t r;
    fake_frame_t *out; /* frames sent, oldest first */
    size_t nout, capout;
    int bad;                   /* sn__relay_bad calls */
    char bad_why[256];         /* the last one's reason */
    fake_bounce_t bounces[16]; /* sn__relay_bounce_peer calls (the first 16) */
    size_t nbounces;
    int bounced;                     /* items route() returned (a path through a node that is down, unknown) */
    int undeliverable;               /* inbound messages the scheduler refused */
    _Atomic int pokes;               /* sn__relay_poke and sn__relay_enqueue wake-ups */
    int full;                        /* try_send: nonzero, every peer's pipe is full */
    void (*before_drain)(void *arg); /* fake_before_drain: called once, then cleared */
    void *before_drain_arg;
} fake_node_t;

/* A node `node` (its scheduler with `workers` workers and these process
 * types), a member of its cluster already (`joined`) or not, stealing or
 * not. Advertises tcp://127.0.0.1:(7000 + node). Asserts on failure. */
fake_node_t *fake_node_new(uint32_t node, int workers, const sn_type_t *const *types, size_t ntypes, bool joined,
                           bool steal);
/* Shuts the scheduler down, frees the relay's state as sn_relay_destroy
 * does, then the scheduler. Safe on NULL. */
void fake_node_destroy(fake_node_t **self_p);
sn_sched_t *fake_sched(fake_node_t *n);
peer_t *fake_peer(fake_node_t *n, uint32_t node);

/* Makes each of a and b a member of the other (as a Welcome or gossip
 * would: sn__members_upsert with the other's endpoint and types). */
void fake_link(fake_node_t *a, fake_node_t *b);

/* ----------------------------------------------------------- the frames */

/* Drops every captured frame. */
void fake_clear(fake_node_t *n);
/* How many captured frames went to `to` (0: any) of `kind` (0: any). */
size_t fake_count(fake_node_t *n, uint32_t to, sn_frame_kind_t kind);
/* Takes the oldest captured frame to `to` (0: any) of `kind` (0: any) into
 * *fr (the caller frees fr->buf); false if there is none. */
bool fake_take(fake_node_t *n, uint32_t to, sn_frame_kind_t kind, fake_frame_t *fr);
/* The same, decoded into *f (the caller clears it). */
bool fake_take_decoded(fake_node_t *n, uint32_t to, sn_frame_kind_t kind, sn_frame_t *f);
/* Decodes the oldest such frame into *f, leaving it where it is (the
 * caller clears f); false if there is none. */
bool fake_peek(fake_node_t *n, uint32_t to, sn_frame_kind_t kind, sn_frame_t *f);
/* Decodes a captured frame (asserts that it decodes). */
void fake_decode(const fake_frame_t *fr, sn_frame_t *f);

/* ----------------------------------------------------- the I/O thread */

/* One frame arriving at n, dispatched to the logic files as
 * sn__relay_inbound_frame does: on the ROUTER (ident), on a member's
 * connection (ident NULL), or on a seed's (from_seed). */
void fake_inbound(fake_node_t *n, const void *buf, size_t len, const unsigned char *ident, size_t ident_len,
                  bool from_seed);
/* Moves the oldest frame `from` sent to `to` of `kind` (0: any) into `to`
 * (an answer arrives as on a seed's connection; a Hello on the ROUTER).
 * With f, also decoded there for the test (the caller clears it). False
 * if there was none. */
bool fake_pass(fake_node_t *from, fake_node_t *to, sn_frame_kind_t kind, sn_frame_t *f);
/* The I/O thread's turn at n's outbound queue (sn__relay_drain). */
void fake_drain(fake_node_t *n);
/* Has n's next drain, from wherever it is called (a logic file's, or
 * fake_drain), call fn(arg) first, once: what a worker sends while the
 * I/O thread is between two steps of its own (the test sends then). */
void fake_before_drain(fake_node_t *n, void (*fn)(void *arg), void *arg);
/* Tells `to` (as a heartbeat from `from`, a member of `to`) that `from`
 * has `ready` processes Ready: steal.c picks its victims by that. */
void fake_say_load(fake_node_t *to, uint32_t from, uint64_t ready);

#endif

/* drain.h - draining a node (drain.c): `schednode drain` moves every
 * movable process of this node to the others with move.c's push, waits
 * for the rest to end, and answers with a report; `undrain` ends it. Its
 * state (struct sn_drain, r->drain) and r->draining are drain.c's; I/O
 * thread only.
 */
#ifndef SN_DRAIN_H
#define SN_DRAIN_H

#include "relay_int.h"

/* Starts draining this node (request q, from the client at ident): the
 * report goes to that client when the drain ends, maybe before this
 * returns. A drain under way already: refused at once. */
void sn__drain_start(sn_relay_t *r, const sn_wire_request_t *q, const unsigned char *ident, size_t ident_len);
/* `undrain`: the node takes work again; a drain under way stops starting
 * moves and answers its client once those in flight are decided. The
 * answer to undrain goes into *rep (its report: a static text). */
void sn__drain_end(sn_relay_t *r, sn_wire_reply_t *rep);
/* Starts moves, looks at processes left, ends the drain at its deadline,
 * stops the node after --then-stop's answer. */
void sn__drain_tick(sn_relay_t *r, uint64_t now);
/* When drain.c next wants a tick (UINT64_MAX: no need). */
uint64_t sn__drain_next_ns(sn_relay_t *r);
/* The node shuts down (after sn__move_stop): a drain under way answers
 * its client with what it did. */
void sn__drain_stop(sn_relay_t *r);
void sn__drain_fini(sn_relay_t *r);

#endif

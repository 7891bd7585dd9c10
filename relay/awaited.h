/* awaited.h - where this node's awaited children are after they moved (awaited.c),
 * so that a parent gets exactly one outcome for each. Its state (struct
 * sn_awaits, r->awaits) is awaited.c's alone; I/O thread.
 */
#ifndef SN_AWAITED_H
#define SN_AWAITED_H

#include "relay_int.h"

/* awaited.c: where this node's awaited children are (I/O thread only) */
/* m was handed to node taker (the steal committed): record it (spawned
 * here) or tell the node it was spawned on (AWAITED). */
void sn__await_departed(sn_relay_t *r, const sn_migrant_t *m, uint32_t taker);
/* An AWAITED notice (s) from another node: the record moves. */
void sn__await_notice(sn_relay_t *r, const sn_wire_send_t *s);
/* child runs here now: its record goes. */
void sn__await_arrived(sn_relay_t *r, sn_pid_t child);
/* Did child's parent get nodedown for it already? (it comes back: unawaited) */
bool sn__await_fired(sn_relay_t *r, sn_pid_t child);
/* child's RESULT or CHILD_DOWN reached this node: its record goes; true
 * if the parent had its nodedown already (the outcome is dropped). */
bool sn__await_outcome(sn_relay_t *r, sn_pid_t child);
/* node is down (gone: its run ended): parents of children there hear. */
void sn__await_peer_down(sn_relay_t *r, uint32_t node, bool gone);
void sn__await_fini(sn_relay_t *r);

#endif

/* locate.h - where processes that moved live, as this node knows it (locate.c):
 * the location cache, the forwarding entries, the holds and flushes that
 * keep a sender's messages in order across a move. Its state (struct
 * sn_locs, r->locs) is locate.c's alone; the I/O thread calls these.
 */
#ifndef SN_LOCATE_H
#define SN_LOCATE_H

#include "relay_int.h"

/* r->sent_to: one bit per PID hash, set when a send to such a PID left
 * this node (route.c), read when a process arrives (locate.c). */
#define SN_SENT_BITS (1u << 20)
static inline size_t sn__sent_bit(sn_pid_t pid)
{
    return (size_t)(((pid.serial ^ ((uint64_t)pid.node << 32)) * UINT64_C(0x9E3779B97F4A7C15)) >> 44);
}

/* locate.c (I/O thread): the location cache and the flush, see there. */
int sn__loc_init(sn_relay_t *r);
void sn__loc_fini(sn_relay_t *r);
/* What sn__loc_route did with an item. */
enum { SN_LOC_SEND, SN_LOC_HELD, SN_LOC_DOWN };
/* SN_LOC_SEND: send it to it->dest (perhaps changed); SN_LOC_HELD: held
 * (taken); SN_LOC_DOWN: its path goes through a node that is down: the
 * caller bounces it (nodedown). */
int sn__loc_route(sn_relay_t *r, item_t *it);
/* pid left this node for `node` (a committed handover, its move number `moves`). */
void sn__loc_departed(sn_relay_t *r, sn_pid_t pid, uint32_t node, uint32_t moves);
/* Where pid was seen last (0: unknown): for a process of this node, where
 * its newest owner said it arrived; else this node's cache. arg: the relay. */
uint32_t sn__loc_last_seen(void *arg, sn_pid_t pid);
/* pid ended (GONE): what this node remembers of it goes. */
void sn__loc_ended(sn_relay_t *r, sn_pid_t pid);
/* pid was just activated here with `settle`, come from node victim:
 * sends to it are held from now until sn__loc_arrived (see locate.c). */
void sn__loc_hold(sn_relay_t *r, sn_pid_t pid, uint32_t victim);
/* s, a send that came from node from_node, is for a process settling
 * here and waits for its arrival's flush: held (its payload taken), and
 * the acknowledgement of its frame waits for it (counted: from_node's
 * peer_t.nheld counts it already, steal.c; else it is counted if it came
 * in a frame being handed in, relay_t.in_seq). */
bool sn__loc_hold_passing(sn_relay_t *r, uint32_t from_node, sn_wire_send_t *s, bool counted);
/* pid (from victim, its move number `moves`) was activated here with `settle`. */
void sn__loc_arrived(sn_relay_t *r, sn_pid_t pid, uint32_t victim, uint32_t moves);
/* A REDIRECT: pid lives on node now; moves > 0: its move number (from the
 * node it arrived at, to its home). */
void sn__loc_redirect(sn_relay_t *r, sn_pid_t pid, uint32_t node, uint32_t moves);
void sn__loc_flush(sn_relay_t *r, sn_wire_send_t *s);
/* FLUSHED: the flush of pid whose markers carry `id` ended at owner. */
void sn__loc_flushed(sn_relay_t *r, sn_pid_t pid, uint32_t owner, uint64_t id);
/* A FLUSH this node started for pid was stopped at a node further down the
 * path whose next hop (node `at`) is down to it: FLUSHED with error
 * nodedown. */
void sn__loc_stuck(sn_relay_t *r, sn_pid_t pid, uint32_t at, uint64_t id);
/* A FLUSH from another node cannot go on from here: its next hop `at` is
 * down. The node that started it hears so (sn__loc_stuck). */
void sn__loc_flush_stuck(sn_relay_t *r, const sn_wire_send_t *s, uint32_t at);
/* An arrival notice to pid's home (REDIRECT with move number `moves`)
 * came back: the home was down. It goes again when the home is up. */
void sn__loc_notice_lost(sn_relay_t *r, sn_pid_t pid, uint32_t moves);
/* A message from `from` for pid was delivered: if it went on elsewhere,
 * `from` hears where (rate-limited). */
void sn__loc_forwarded(sn_relay_t *r, const peer_t *from, sn_pid_t pid);
/* pid (another node's) had left this node for a run that ended, and this
 * node dropped its forwarding entry: its home hears (a REDIRECT to node
 * 0), as it may not know the process went there. */
void sn__loc_left_for_gone(sn_relay_t *r, sn_pid_t pid);
/* Node `from` says pid, one of ours, left it for a run that ended (above). */
void sn__loc_lost(sn_relay_t *r, sn_pid_t pid, uint32_t from);
/* node is down (gone false: it may come back, frozen or cut off) or gone
 * for good (restarted as a new run, or left). */
void sn__loc_peer_down(sn_relay_t *r, uint32_t node, bool gone);
/* node is up again (the same run): flushes waiting on it start again. */
void sn__loc_peer_up(sn_relay_t *r, uint32_t node);
/* node restarted (a new run): the processes here whose home it is are
 * announced to that run, so that it leads sends to them here. */
void sn__loc_home_restarted(sn_relay_t *r, uint32_t node);
void sn__loc_tick(sn_relay_t *r, uint64_t now);

#endif

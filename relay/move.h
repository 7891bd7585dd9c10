/* move.h - moves asked by PID (move.c): `schednode migrate`, sn_migrate,
 * drain. Moves push processes to a named node with the steal handover
 * (steal.c, sn__steal_push), those frozen together in one push. Its state (struct sn_moves, r->moves) is
 * move.c's alone; I/O thread only.
 */
#ifndef SN_MOVE_H
#define SN_MOVE_H

#include "relay_int.h"

int sn__move_init(sn_relay_t *r);
void sn__move_fini(sn_relay_t *r);
/* Ends every move with SN_ESHUTDOWN (steal.c's stop: the node stops). */
void sn__move_stop(sn_relay_t *r);
/* Moves pid, a process of this node, to node (sn_migrate, `schednode
 * migrate`): done is called exactly once, maybe before this returns; it
 * starts no move itself (steal.c calls it while walking its offers). */
void sn__move_start(sn_relay_t *r, sn_pid_t pid, uint32_t node, int timeout_ms, sn__move_done_fn done, void *arg);
/* Moves pids[0..n) to node, as n calls of sn__move_start would (done is
 * called exactly once for each, with args[i], maybe before this returns),
 * those that can be frozen now in pushes of up to 64 processes (drain.c). */
void sn__move_start_many(sn_relay_t *r, uint32_t node, int timeout_ms, sn__move_done_fn done, const sn_pid_t *pids,
                         void *const *args, size_t n);
/* The handover of migrant pid of push id ended (steal.c, once for each
 * migrant): 0, or an error and why. */
void sn__move_decided(sn_relay_t *r, uint64_t id, sn_pid_t pid, int error, const char *why);
/* Looks again at moves whose process was busy; gives up on deadlines. */
void sn__move_tick(sn_relay_t *r, uint64_t now);
uint64_t sn__move_next_ns(sn_relay_t *r);
/* Handover ids of pushes (move.c) carry this bit; a thief's requests never. */
#define SN__PUSH_ID (UINT64_C(1) << 63)

#endif

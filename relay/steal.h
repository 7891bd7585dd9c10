/* steal.h - cross-node stealing, the relay's half (steal.c; sched/migrate.c is
 * the scheduler's): requests, offers, the handover and the messages held
 * for processes on their way here. Its state (struct sn_steal, r->steal)
 * is steal.c's alone.
 */
#ifndef SN_STEAL_H
#define SN_STEAL_H

#include "relay_int.h"

/* steal.c (I/O thread only, but for the hook) */
int sn__steal_init(sn_relay_t *r, const sn_relay_config_t *cfg);
void sn__steal_fini(sn_relay_t *r);
/* The remote-work hook (workers): asks the I/O thread to look for work. */
int sn__steal_hook(void *arg, sn_sched_t *sched);
/* Handles StealRequest, StealOffer, StealAccept, StealCommit from p. */
void sn__steal_frame(sn_relay_t *r, peer_t *p, sn_frame_t *f);
/* Timeouts, and a request when the node is idle and someone is loaded. */
void sn__steal_tick(sn_relay_t *r, uint64_t now);
/* p went down, left or restarted (gone: its run ended): handovers with it
 * end; those where it is the victim only when its run ended (a victim held
 * down may still commit). */
void sn__steal_peer_gone(sn_relay_t *r, peer_t *p, bool gone);
/* p's heartbeat now shows work to steal (it had none): ask at once. */
void sn__steal_loaded(sn_relay_t *r, peer_t *p);
/* Offers migrants m[0..n), frozen, to t unasked in one offer, as handover
 * id (a push: SN__PUSH_ID set); each one's outcome goes to
 * sn__move_decided, in the order of m. 0 (the migrants are steal.c's
 * now), or SN_ENOMEM with nothing sent (the caller reverts them). Their
 * states fit in half of max_frame together (move.c). */
int sn__steal_push(sn_relay_t *r, peer_t *t, const sn_migrant_t *m, size_t n, uint64_t id);
/* Does t take processes of type `type` (same version, movable there)? */
bool sn__steal_takes(peer_t *t, const sn_type_t *type);
/* p advertised its types: is it a steal partner? */
void sn__steal_types(sn_relay_t *r, peer_t *p, const sn_wire_type_t *types, size_t n);
/* When steal.c next wants a tick (UINT64_MAX: no need). */
uint64_t sn__steal_next_ns(sn_relay_t *r);
/* Ends every handover and stops serving requests (before a shutdown). */
void sn__steal_stop(sn_relay_t *r);
/* A message or flush marker from another node for a process on its way
 * here (accepted, not committed yet): true if it waits in the install
 * until the handover ends (s's payload taken; see steal.c). Only from a
 * frame its sender keeps until acknowledged (in_seq); acknowledgements
 * to that node stop short of it meanwhile (sn__relay_ackable). */
bool sn__steal_hold(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s);

#endif

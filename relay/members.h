/* members.h - membership (members.c): joining, gossip, failure detection (swim.c
 * underneath), leaving, status rows. I/O thread only.
 */
#ifndef SN_MEMBERS_H
#define SN_MEMBERS_H

#include "relay_int.h"

/* members.c (I/O thread only) */
/* Adds a member or updates what we know of it; returns its slot or NULL. */
peer_t *sn__members_upsert(sn_relay_t *r, const sn_wire_member_t *m, const char *how);
/* Handles a Hello, Welcome, Members, Error or Leave frame. */
void sn__members_frame(sn_relay_t *r, sn_frame_t *f, const unsigned char *ident, size_t ident_len, zsock_t *from_seed);
/* A frame of incarnation `inc` came from member p: restart, up again. */
/* A frame in member p's name with a key that is not p's (r->in_key):
 * true if it is p's newer run under a new key (see members.c), which p's
 * key is from now on; false if it is not p speaking. */
bool sn__members_rekeyed(sn_relay_t *r, peer_t *p, const sn_frame_t *f);
/* A heartbeat from a node that is not a member here (members.c). */
peer_t *sn__members_stranger(sn_relay_t *r, const sn_frame_t *f);
void sn__members_heard(sn_relay_t *r, peer_t *p, uint64_t inc);
/* Our connection to member p closed (relay.c): suspect it now (swim.c). */
void sn__members_closed(sn_relay_t *r, peer_t *p);
/* A heartbeat from member p: its counters, and the SWIM probe and
 * membership updates it carries. */
void sn__members_heartbeat(sn_relay_t *r, peer_t *p, sn_frame_t *f);
/* Starts failure detection (swim.c); 0 or SN_ENOMEM. */
int sn__members_init(sn_relay_t *r);
void sn__members_fini(sn_relay_t *r);
/* A frame came from an earlier run of member p (its id was taken over by
 * a newer run): that run is told it is out (rate-limited). ident: the
 * frame came on the ROUTER, answer there. */
void sn__members_superseded(sn_relay_t *r, peer_t *p, const sn_frame_t *f, const unsigned char *ident,
                            size_t ident_len);
/* The periodic turn: Hellos while joining, heartbeats, failure detection,
 * gossip, and the end of a leave. */
void sn__members_tick(sn_relay_t *r);
/* When the next tick is due. */
uint64_t sn__members_next_ns(sn_relay_t *r);
/* Status rows for every member we know, ourselves first. Caller frees. */
sn_wire_stats_t *sn__members_rows(sn_relay_t *r, size_t *n);

/* The state `status` shows for p now (suspect when half-way to down). */
int sn__members_state(sn_relay_t *r, const peer_t *p);
/* Our status row to every up member now (a heartbeat with no probe): a
 * drain's start and end reach the members at once (drain.c). */
void sn__members_announce(sn_relay_t *r);

#endif

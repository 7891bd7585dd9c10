/* peer.h - the peers (table.c, peer.c, waiters.c): the member table's slots,
 * and each peer's connection: batches out, acknowledgements both ways,
 * refusals, backpressure on its senders, and what goes back to senders
 * when it is down. I/O thread unless said.
 */
#ifndef SN_PEER_H
#define SN_PEER_H

#include "relay_int.h"

/* A free slot for a new member (zeroed, node 0), reused or new, or NULL
 * (no memory, or SN_PEER_CHUNKS full); sn__relay_publish makes it node's
 * (findable from then on). sn__relay_free_slot empties a member's slot
 * (its node goes to 0 first) for reuse. I/O thread (peer.c). */
peer_t *sn__relay_new_slot(sn_relay_t *r);
void sn__relay_publish(sn_relay_t *r, peer_t *p, uint32_t node);
void sn__relay_free_slot(sn_relay_t *r, peer_t *p);
/* Frees what a slot holds (its frames, lists, socket): at destroy, and
 * before a slot is reused. table_fini frees the whole table (and what the
 * I/O loop's lists and the held senders took): at destroy. */
void sn__relay_slot_fini(sn_relay_t *r, peer_t *p);
void sn__relay_table_fini(sn_relay_t *r);

/* Everything waiting for p goes back to its senders with `error`; gone:
 * p restarted or left (not just down), so what moved there is gone too. */
void sn__relay_bounce_peer(sn_relay_t *r, peer_t *p, int error, bool gone);
/* it could not go on (to node `at`, if it got that far): back to its
 * sender, behind whatever the bounce queue holds (peer.c), and freed */
void sn__relay_bounce_item(sn_relay_t *r, item_t *it, int error, uint32_t at);
/* A slice of the bounce queue (what is left waits for the next turn:
 * r->bq_head < r->bq_n); its end, at destroy. */
void sn__relay_bounce_some(sn_relay_t *r);
void sn__relay_bounce_fini(sn_relay_t *r);

/* Sends a frame on p's connection without blocking; false if it would. */
bool sn__relay_try_send(sn_relay_t *r, peer_t *p, const void *buf, size_t len);
/* Gives p the dealer d (NULL: none), closing its old one; the I/O loop
 * watches the new one. */
void sn__relay_set_dealer(sn_relay_t *r, peer_t *p, zsock_t *d);
/* Sends [ident, frame] on the ROUTER (an answer on an inbound connection). */
void sn__relay_answer(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const void *buf, size_t len);
/* A DEALER to endpoint with the relay's limits (a CurveZMQ client of
 * server_key when the node is secure), or NULL. With monitor, *monitor
 * watches its handshake failures from before it connects (or is NULL). */
zsock_t *sn__relay_dealer_to(sn_relay_t *r, const char *endpoint, const char *server_key, zsock_t **monitor);

/* Sends a control frame to p after everything queued for it, before
 * anything queued later (takes buf). */
void sn__relay_send_ordered(sn_relay_t *r, peer_t *p, void *buf, size_t len);

/* peer.c (I/O thread): puts p on one of the I/O loop's lists (flag: its
 * membership); io_look: p's DEALER needs a look this turn. flush_peer
 * sends p's batch (and what waited before it); batch_add adds a routed
 * item to it. acked: the peer has every batch up to seq. ack_later: a
 * batch `seq` came from p on [ident]: acknowledged soon (send_acks, at
 * acks_due_ns). send_reply answers a client on the ROUTER. */
void sn__relay_io_list(uint32_t *list, size_t *n, bool *flag, sn_relay_t *r, peer_t *p);
void sn__relay_io_look(sn_relay_t *r, peer_t *p);
void sn__relay_flush_peer(sn_relay_t *r, peer_t *p);
void sn__relay_batch_add(sn_relay_t *r, peer_t *p, item_t *it);
void sn__relay_acked(sn_relay_t *r, peer_t *p, uint64_t seq);
/* Once a second: an empty numbered batch to each peer whose batches have
 * waited a second for an ack, so that a gap at the end shows. */
void sn__relay_probe_gaps(sn_relay_t *r, uint64_t now);
/* Backpressure: the sender of `it`, a process here, runs no further step
 * until sn__relay_let_go(w) (a send passing through, or not a process's,
 * holds no one); let_go lets every one in w go on. */
void sn__relay_hold_sender(sn_relay_t *r, waiters_t *w, const item_t *it);
void sn__relay_let_go(sn_relay_t *r, waiters_t *w);
/* p did not take its batches from..to: their sends go back with error. */
void sn__relay_refused(sn_relay_t *r, peer_t *p, uint64_t from, uint64_t to, int error);
/* This node does not take p's batches from..to (numbered in p's run):
 * p hears before any ack past them. */
void sn__relay_refuse(sn_relay_t *r, peer_t *p, uint64_t from, uint64_t to, int error);
void sn__relay_ack_later(sn_relay_t *r, peer_t *p, uint64_t seq, const unsigned char *ident, size_t ident_len);
void sn__relay_send_acks(sn_relay_t *r, uint64_t now);
uint64_t sn__relay_acks_due_ns(sn_relay_t *r);
void sn__relay_send_reply(sn_relay_t *r, const unsigned char *ident, size_t ident_len, const sn_wire_reply_t *rep);

#endif

/* manage.h - a client's PS, KILL and TYPES about this node (manage.c), and the
 * ends of the processes a client killed, kept a while for its `kill`.
 */
#ifndef SN_MANAGE_H
#define SN_MANAGE_H

#include "relay_int.h"

/* manage.c: answers a client's PS, KILL or TYPES about this node into
 * *rep (which it allocates: the caller frees rep->procs and rep->types). */
void sn__relay_manage(sn_relay_t *r, const sn_wire_request_t *q, sn_wire_reply_t *rep);
/* The scheduler's `ended` hook (any thread): a process a client killed
 * has ended; its end is kept a while for the client's `kill`, which asks
 * (PS of its PID) after it has gone. */
void sn__relay_ended(void *arg, sn_pid_t pid, int error, const sn_payload_t *result);
int sn__manage_init(sn_relay_t *r);
void sn__manage_fini(sn_relay_t *r);

#endif

/* client.h - the command line's side of a node's protocol: one request
 * to a node, one answer (client.c). Runs on the caller's thread and
 * shares nothing with a relay; `schednode status`, `call`, the dashboard
 * and schedbench's cross-node cases use it.
 */
#ifndef SN_CLIENT_H
#define SN_CLIENT_H

#include <stddef.h>

#include "codec.h"
#include "keys.h"

/* Client side: sends one request to the node at endpoint and waits up to
 * timeout_ms (< 0: forever) for its reply (caller clears *reply with
 * sn_frame_clear-like sn_client_reply_clear). Returns 0, SN_ETIMEDOUT or
 * SN_EPROTO. A CALL's first answer says the process started: on
 * SN_ETIMEDOUT, reply->started and reply->pid say whether it did and which
 * it is (and err says the call timed out rather than "no answer").
 * Also SN_EUNREACHABLE (the connection was refused), SN_EREFUSED (a
 * refused key), SN_ENODEDOWN (the node closed the connection before it
 * answered) and SN_ECANCELED (the interrupt fd became readable; a call's
 * reply->started and pid then say which process it started). */
int sn_client_call(const char *endpoint, const sn_security_t *security, const struct sn_wire_request *req,
                   int timeout_ms, struct sn_wire_reply *reply, char *err, size_t errlen);
void sn_client_reply_clear(struct sn_wire_reply *reply);
/* A file descriptor whose readability ends every wait of sn_client_call
 * (a self-pipe a signal handler writes), or -1 for none. */
void sn_client_interrupt(int fd);

#endif

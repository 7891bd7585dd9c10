/* services.h - services (services.c): named processes the cluster keeps
 * running, one instance each. Every node runs a supervisor process (type
 * "sn.services", made at the first use) that keeps its share of the
 * service records (the same rendezvous owner and copy as names), starts
 * and watches their instances, and stops the instances on its node when it
 * does not hold a majority. Supervisors reach each other by the PID (node,
 * SN_SERVICES_SERIAL), which the relay hands to that node's supervisor
 * (inbound.c); the CLI reaches them through the "sn.services" helpers
 * add, rm and ls (node/cli.c).
 */
#ifndef SN_SERVICES_H
#define SN_SERVICES_H

#include "relay_int.h"

/* The serial that names a node's supervisor to other nodes. No process
 * is given it (serials count up from first_serial). */
#define SN_SERVICES_SERIAL (UINT64_MAX - 1)

/* Registers the "sn.services" type and the "sn.service.*" commands with
 * r's scheduler and ties them to r: before the relay reads its types. */
int sn__services_init(sn_relay_t *r);
/* Unties r (its supervisor, if any, ends at its next event). */
void sn__services_fini(sn_relay_t *r);
/* This node's supervisor process, made now if there is none yet;
 * SN_PID_NONE if it cannot be made. Any thread. */
sn_pid_t sn__services_process(sn_relay_t *r);

#endif

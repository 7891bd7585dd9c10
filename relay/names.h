/* names.h - names of processes across the cluster (names.c): each name
 * kept by one node, its owner, chosen by rendezvous hashing over the up
 * members, with a copy on the next node in that order. Every node runs a
 * registry process (type "sn.names", made at the first use) that owns
 * this node's share of the names and its cache of lookups; processes
 * reach it through the "sn.name.*" commands (schednode.h:
 * sn_out_name_register and its kin), registries reach each other by the
 * PID (node, SN_NAMES_SERIAL), which the relay hands to the registry of
 * that node (inbound.c).
 */
#ifndef SN_NAMES_H
#define SN_NAMES_H

#include "relay_int.h"

/* The serial that names a node's registry to other nodes: a message to
 * (node, SN_NAMES_SERIAL) goes to that node's registry process. No
 * process is given it (serials count up from first_serial). */
#define SN_NAMES_SERIAL UINT64_MAX

/* Registers the "sn.names" type and the "sn.name.*" commands with r's
 * scheduler (once per scheduler) and ties them to r: before the relay
 * reads its types. 0 or an error. */
int sn__names_init(sn_relay_t *r);
/* Unties r (its registry, if any, ends at its next event). */
void sn__names_fini(sn_relay_t *r);
/* This node's registry process, made now if there is none yet; SN_PID_NONE
 * if it cannot be made. Any thread. */
sn_pid_t sn__names_registry(sn_relay_t *r);

#endif

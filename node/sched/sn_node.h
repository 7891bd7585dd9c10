/* sn_node.h - what the scheduler offers the node around it (the relay in
 * relay/, the program in node/): the relay hooks and the calls that
 * deliver traffic arriving from other nodes. Not installed: process
 * authors use only include/schednode/schednode.h.
 */
#ifndef SN_NODE_H
#define SN_NODE_H

#include "schednode/schednode.h"

/* Where messages for PIDs of other nodes go, and where idle workers look for
 * remote work. node/sched/ calls these; the relay implements them. */
enum { SN_RELAY_MONITOR = 100, SN_RELAY_DEMONITOR = 101 };
typedef struct sn_relay_hooks {
    void *arg;
    /* Deliver to a non-local PID: `kind` is SN_EV_MESSAGE (a message from
     * `from`), SN_EV_DOWN (with `error`), SN_RELAY_MONITOR or
     * SN_RELAY_DEMONITOR (`from` watches `to`). Takes ownership of *msg on
     * success (return 0); on error *msg is left with the caller, which
     * returns it to the sender with the error. */
    int (*deliver)(void *arg, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error, sn_payload_t **msg);
    /* Called by a worker that found no local work, before it parks. Returns
     * how many processes it made Ready here (0 if none). May be NULL. */
    int (*remote_work)(void *arg, sn_sched_t *sched);
} sn_relay_hooks_t;

/* Sets the relay hook (before traffic starts). */
void sn_sched_set_relay(sn_sched_t *sched, const sn_relay_hooks_t *relay);

/* Delivers a message on behalf of `from` (the relay uses this for inbound
 * traffic). Same ownership as sn_send. */
int sn_send_from(sn_sched_t *sched, sn_pid_t to, sn_pid_t from, uint64_t tag, sn_payload_t **msg);

/* Returns an undeliverable message to its sender, a process on this node:
 * it gets SN_EV_YIELD_COMPLETE with `error`, the send's `tag`, `from` set
 * to the PID the message was meant for, and the payload back (taken). The
 * relay calls this when another node reports a send it could not deliver.
 * Returns 0, or SN_ENOPROC if the sender is gone too (the payload is freed). */
int sn_send_failed(sn_sched_t *sched, sn_pid_t sender, sn_pid_t target, uint64_t tag, int error,
                   sn_payload_t **msg);

/* Monitors `target` on behalf of `watcher` (either may be remote; the
 * relay calls these for monitors that cross nodes). If target is a local
 * process that does not exist, the DOWN (noproc) is sent at once. */
void sn_monitor(sn_sched_t *sched, sn_pid_t target, sn_pid_t watcher, uint64_t tag);
void sn_demonitor(sn_sched_t *sched, sn_pid_t target, sn_pid_t watcher, uint64_t tag);
/* Delivers SN_EV_DOWN to `watcher` about `target` (takes *reason, may be
 * NULL). Returns 0 or SN_ENOPROC (the reason is then freed). */
int sn_send_down(sn_sched_t *sched, sn_pid_t watcher, sn_pid_t target, uint64_t tag, int error,
                 sn_payload_t **reason);

#endif

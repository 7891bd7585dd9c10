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
/* Relay-only kinds: monitor requests, a child's result for the parent
 * that awaits it (a YIELD_COMPLETE that counts as the parent's pending),
 * and the DOWN of a child spawned with SN_YIELD_MONITOR (its parent holds
 * no monitor record, unlike sn_out_monitor's DOWNs). */
enum {
    SN_RELAY_MONITOR = 100,
    SN_RELAY_DEMONITOR = 101,
    SN_RELAY_RESULT = 102,
    SN_RELAY_GONE = 103,
    SN_RELAY_CHILD_DOWN = 104
};
typedef struct sn_relay_hooks {
    void *arg;
    /* Deliver to a non-local PID, through node `via` (the node it moved to
     * from here) or, if via is 0, its home node: `kind` is SN_EV_MESSAGE (a message from
     * `from`), SN_EV_DOWN (with `error`), SN_RELAY_MONITOR or
     * SN_RELAY_DEMONITOR (`from` watches `to`). Takes ownership of *msg on
     * success (return 0); on error *msg is left with the caller, which
     * returns it to the sender with the error. */
    int (*deliver)(void *arg, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error, uint32_t via,
                   sn_payload_t **msg);
    /* Called by a worker that found no local work, before it parks. Returns
     * how many processes it made Ready here (0 if none). May be NULL. */
    int (*remote_work)(void *arg, sn_sched_t *sched);
    /* Called (by whichever thread queued it) once after sn__sched_watch_load,
     * when a Ready process is queued while another waits: work piles up
     * here. Must be quick and must not call into the scheduler. May be NULL. */
    void (*loaded)(void *arg);
} sn_relay_hooks_t;

/* Sets the relay hook (before traffic starts). */
void sn__sched_set_relay(sn_sched_t *sched, const sn_relay_hooks_t *relay);

/* Arms the `loaded` hook for one call (the relay re-arms it after each
 * heartbeat that said there was no work to take). Any thread. */
void sn__sched_watch_load(sn_sched_t *sched);

/* Delivers a child's result (SN_RELAY_RESULT) from another node to the
 * parent awaiting it here (or on to where it moved). */
int sn__send_result(sn_sched_t *sched, sn_pid_t parent, sn_pid_t child, uint64_t tag, int error, sn_payload_t **result);

/* Delivers the DOWN of a child spawned with SN_YIELD_MONITOR
 * (SN_RELAY_CHILD_DOWN) from another node to its parent here (or on to
 * where it moved). Returns 0 or an error (the result is then left). */
int sn__send_child_down(sn_sched_t *sched, sn_pid_t parent, sn_pid_t child, uint64_t tag, int error,
                        sn_payload_t **result);

/* Delivers a message (or a DOWN) that arrived from another node: to the
 * process here, or on to the node it moved to from here; never back to its
 * home node (that could loop). Returns 0 or SN_ENOPROC; same ownership as
 * sn_send. */
int sn__deliver_inbound(sn_sched_t *sched, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error,
                        sn_payload_t **data);

/* Returns an undeliverable message to its sender, a process on this node:
 * it gets SN_EV_YIELD_COMPLETE with `error`, the send's `tag`, `from` set
 * to the PID the message was meant for, and the payload back (taken). The
 * relay calls this when another node reports a send it could not deliver.
 * Returns 0, or SN_ENOPROC if the sender is not here (the payload is then
 * left with the caller: the sender may have moved on). */
int sn__send_failed(sn_sched_t *sched, sn_pid_t sender, sn_pid_t target, uint64_t tag, int error, sn_payload_t **msg);

/* Monitors `target` on behalf of `watcher` (either may be remote; the
 * relay calls these for monitors that cross nodes). If target is a local
 * process that does not exist, the DOWN (noproc) is sent at once. */
void sn__monitor(sn_sched_t *sched, sn_pid_t target, sn_pid_t watcher, uint64_t tag);
void sn__demonitor(sn_sched_t *sched, sn_pid_t target, sn_pid_t watcher, uint64_t tag);
/* Delivers SN_EV_DOWN to `watcher` about `target` (takes *reason, may be
 * NULL). Returns 0 or SN_ENOPROC (the reason is then freed). */
int sn__send_down(sn_sched_t *sched, sn_pid_t watcher, sn_pid_t target, uint64_t tag, int error, sn_payload_t **reason);

/* Why a spawn of `type` at `method` was refused with `err` (sn_spawn's or
 * sn_call's error before the process ran: unknown type, unknown method,
 * the type's init refused, shutdown), as one line into buf. The words of
 * a refused spawn yield's reason too. */
void sn__spawn_refusal(char *buf, size_t len, const char *type, const char *method, int err);

/* The registered process types (up to max of them into out); how many. */
size_t sn__sched_types(sn_sched_t *sched, const sn_type_t **out, size_t max);

/* ------------------------------------------------------------ migration
 * The scheduler's half of moving processes between nodes (migrate.c says
 * why it is exactly-once). The relay runs the protocol around it. */
typedef struct sn_migrant {
    sn_pid_t pid, parent;
    uint8_t awaited; /* how the parent awaits its result (with await_tag): 0 not, 1 as the
                        spawn's completion, 2 as a DOWN (SN_YIELD_MONITOR) */
    uint64_t await_tag;
    const char *type; /* the type's registered name */
    uint32_t type_version;
    sn_payload_t *state; /* marshal() output; owned by the migrant */
    void *handle;        /* the frozen process on the old owner */
    uint32_t moves;      /* how many times it has moved, this move included */
    uint8_t fresh;       /* it has not had its first step yet (that step gets no events) */
} sn_migrant_t;

/* Old owner. Takes up to max Ready processes that can move (marshal and
 * unmarshal in their type, no yield pending, no C result callback or
 * monitor tied here, accept(arg, type) true), oldest first (the global
 * queue, then the top of each worker's deque), freezes and marshals each
 * into out[]. Returns how many. */
size_t sn__migrate_take(sn_sched_t *sched, size_t max, bool (*accept)(void *arg, const sn_type_t *type), void *arg,
                        sn_migrant_t *out);
/* Old owner: the handover failed; the process runs here again. */
void sn__migrate_revert(sn_sched_t *sched, sn_migrant_t *m);
/* Old owner: the handover is decided. The process leaves the PID table, a
 * forwarding entry to `node` takes its place, the events it had queued go
 * to *events (in order, *n of them; caller owns the array and payloads) for
 * the new owner, and the process is freed here. Returns 0, or SN_ENOMEM
 * with nothing changed (revert it). */
int sn__migrate_commit(sn_sched_t *sched, sn_migrant_t *m, uint32_t node, sn_event_t **events, size_t *n);
/* New owner: builds the process frozen, outside the PID table. Returns 0,
 * SN_ENOTYPE (type not registered here, another version, no unmarshal), or
 * the unmarshal error. m->state is read, not taken. */
int sn__migrate_install(sn_sched_t *sched, const sn_migrant_t *m, void **handle);
/* New owner: the commit came. Queues events (their data taken; on
 * SN_EEXIST, a PID already here, they stay the caller's) ahead of
 * anything else, enters the PID table and makes it Ready. With `settle`,
 * messages from senders on this node go to the relay hook (via = this
 * node) instead of straight to the process, until sn__migrate_settled: the
 * relay first flushes the network path those senders used before, so what
 * they sent earlier arrives first. */
int sn__migrate_activate(sn_sched_t *sched, void *handle, sn_event_t *events, size_t n, uint32_t from, bool settle);
/* A process that came here from node `from` (activate) ends: the
 * scheduler tells the relay hook (kind SN_RELAY_GONE, via = from), so that
 * node drops its forwarding entry. There, this drops the entry for pid if
 * it points to `from` and returns how many nodes the process had come
 * from before (each to be told in turn: one per time it came here), the
 * first `max` of them in origins[]. 0 if it was born here, or if there
 * was no such entry. */
size_t sn__migrate_gone(sn_sched_t *sched, sn_pid_t pid, uint32_t from, uint32_t *origins, size_t max);
/* How many forwarding entries this node holds (processes that moved away
 * and have not been reported ended). */
size_t sn__migrate_forwarding(sn_sched_t *sched);
/* The node a process that left this node went to (its forwarding entry),
 * or 0. */
uint32_t sn__migrate_forward_of(sn_sched_t *sched, sn_pid_t pid);
/* The relay delivered here a message that a sender here handed it while
 * the process was settling (the hook's via == this node). */
void sn__migrate_diverted(sn_sched_t *sched, sn_pid_t pid);
/* The relay flushed the old path to pid: local senders deliver directly
 * again. Returns 0, or SN_ENOPROC if the process is not here (any more). */
int sn__migrate_settled(sn_sched_t *sched, sn_pid_t pid);
/* Whether pid is in this node's PID table now (running, waiting, or
 * frozen mid-handover). */
bool sn__migrate_here(sn_sched_t *sched, sn_pid_t pid);
/* Node `node` restarted or left: what was on the path through it is gone.
 * Each forwarding entry that points to it points instead to
 * instead(arg, pid) (where the process went from there, as far as the
 * caller knows; called under the table's lock, it must not call back), or
 * is dropped if that is 0. Returns how many were dropped; *repointed gets
 * how many were not. */
size_t sn__migrate_forget_node(sn_sched_t *sched, uint32_t node, uint32_t (*instead)(void *arg, sn_pid_t pid),
                               void *arg, size_t *repointed);
/* Drops the forwarding entry for pid, whatever it points to (the process
 * was lost with the node it moved to since). */
void sn__migrate_drop_forward(sn_sched_t *sched, sn_pid_t pid);
/* Points the forwarding entry for pid at node, making one if there is
 * none: the home learned where a process lives whose old path ended (the
 * relay's home table, relay/locate.c). Returns 0 or SN_ENOMEM. */
int sn__migrate_repoint(sn_sched_t *sched, sn_pid_t pid, uint32_t node);
/* New owner: the handover was aborted; the frozen copy goes. */
void sn__migrate_discard(sn_sched_t *sched, void *handle);

#endif

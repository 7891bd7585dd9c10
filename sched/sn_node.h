/* sn_node.h - what the scheduler offers the node around it (the relay in
 * relay/, the program in node/): the relay hooks and the calls that
 * deliver traffic arriving from other nodes. Not installed: process
 * authors use only include/schednode/schednode.h.
 */
#ifndef SN_NODE_H
#define SN_NODE_H

#include <stdbool.h>

#include "schednode/schednode.h"

/* Where messages for PIDs of other nodes go, and where idle workers look for
 * remote work. sched/ calls these; the relay implements them. */
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
    /* A process that sn__sched_kill asked to end has ended here: error 0
     * (it finished, with `result`) or its error (with `result` as reason).
     * `result` is lent (copy what you keep). Called by the thread that
     * ended it; quick, no calls into the scheduler. May be NULL. */
    void (*ended)(void *arg, sn_pid_t pid, int error, const sn_payload_t *result);
    /* Called by a worker after each run of a process (a step and what it
     * sent), with nothing of the scheduler's locked: `deliver` may hold
     * back what a worker sent during the run (sn__worker_running) and send
     * it here, on the worker's thread (relay/route.c). May be NULL. */
    void (*flush)(void *arg);
    /* Moves the local process pid to node `node` (sn_migrate): done(darg,
     * error, node, why) is called exactly once, on the relay's thread,
     * when the move is decided (why: a static or short-lived text, NULL
     * on success). Any thread. May be NULL (no relay: SN_EUNREACHABLE). */
    void (*migrate)(void *arg, sn_pid_t pid, uint32_t node, int timeout_ms,
                    void (*done)(void *darg, int error, uint32_t node, const char *why), void *darg);
} sn_relay_hooks_t;

/* True on a worker thread while it runs a process: the relay hook's
 * `flush` is called on this thread when the run ends. */
bool sn__worker_running(void);

/* The relay's I/O thread as the scheduler's guest worker (guest.c): host
 * before it hands a frame's sends to the scheduler, run_guest after (on
 * the same thread, holding nothing a worker waits for): a process the
 * frame woke while no worker was awake runs there and then, a bounded
 * while, instead of waking a parked worker. guest_runs: processes run so
 * (relaxed; for tests and benchmarks). */
void sn__sched_host(sn_sched_t *sched);
void sn__sched_run_guest(sn_sched_t *sched);
uint64_t sn__sched_guest_runs(sn_sched_t *sched);

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

/* A block from the payload magazines (payload.c) for the relay's
 * per-message items: a block freed on another thread (the relay's I/O
 * thread frees what a worker queued) comes back through the depot, not
 * malloc, whose cross-thread frees were a fifth of xnode-send's sending
 * side. size <= 128 comes from the magazines, larger from malloc. Free
 * with sn__small_free and the same size, never with free(). */
void *sn__small_alloc(size_t size);
void sn__small_free(void *block, size_t size);

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

/* Backpressure (any thread). sn__throttle: the process pid, if it lives
 * here, runs no further step until sn__unthrottle (it is held Ready, in no
 * queue; what comes for it meanwhile waits in its queue). Returns true if
 * it was asked now (not already, not shutting down). sn__unthrottle lets
 * it go on (scheduled again if it was held). The relay asks it of a
 * process that sends to a peer whose backlog is full. */
bool sn__throttle(sn_sched_t *sched, sn_pid_t pid);
void sn__unthrottle(sn_sched_t *sched, sn_pid_t pid);

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
/* Gives the node another id, before it has any process (the program picks
 * a new random id when a join was refused because the last one was taken).
 * No worker reads the id before a process exists, and the relay that read
 * it is made again after: plain store, no ordering needed. */
void sn__sched_set_node_id(sn_sched_t *sched, uint32_t node_id);

/* ------------------------------------------------------------ inspection
 * A table of this node's processes for `schednode ps`, metrics and the
 * dashboard (inspect.c). */
/* A process's state as shown to people (the numbers are internal.h's). */
typedef enum sn_pstate {
    SN_PS_INIT = 0,    /* being created */
    SN_PS_READY = 1,   /* in a run queue, waiting for a worker */
    SN_PS_RUNNING = 2, /* a worker is running its step */
    SN_PS_IDLE = 3,    /* waiting for any event (a message) */
    SN_PS_WAITING = 4, /* waiting for a yield to complete (or a cancel) */
    SN_PS_DONE = 5,    /* finished, on its way out */
    SN_PS_MOVING = 6,  /* frozen while it moves to another node */
    SN_PS_COUNT = 7
} sn_pstate_t;

/* "ready", "running", "idle", "waiting"...; "?" for a bad value. */
const char *sn__pstate_name(unsigned state);

#define SN_PROC_TYPE_MAX 64
/* One process, copied out of the PID table. */
typedef struct sn_proc_row {
    sn_pid_t pid;
    char type[SN_PROC_TYPE_MAX]; /* its type's name (cut to fit) */
    uint32_t state;              /* sn_pstate_t */
    uint32_t mailbox;            /* events queued for it, not yet taken by a step */
    uint64_t steps;              /* steps run on this node (since it came here, if it moved) */
    uint32_t moves;              /* times it moved between nodes */
} sn_proc_row_t;

/* The processes of one node, counted by state. */
typedef struct sn_proc_counts {
    uint64_t total;
    uint64_t by_state[SN_PS_COUNT]; /* index: sn_pstate_t */
} sn_proc_counts_t;

/* Copies up to max of this node's processes into rows (rows may be NULL
 * when max is 0) and counts all of them by state into *counts (may be
 * NULL). Returns how many processes it saw (more than max: the rest were
 * counted, not copied). Any thread; no ZeroMQ, no allocation.
 *
 * Consistency: it walks the PID table's shards one at a time, each under
 * its lock, so every row is a process that was alive at that instant and
 * no process is seen twice while it stays on this node; it is not one
 * atomic picture of the node (a process spawned or ended during the walk
 * may or may not be in it). state, mailbox and steps are read relaxed
 * while workers run: a row may be a step or an event behind. */
size_t sn__sched_snapshot(sn_sched_t *sched, sn_proc_row_t *rows, size_t max, sn_proc_counts_t *counts);
/* The processes here whose home is node (their PIDs name it: they moved
 * here from there, or on from elsewhere), up to max of them into pids
 * and their move numbers into moves; returns how many there are. Any
 * thread; walked as sn__sched_snapshot walks. */
size_t sn__sched_homed_at(sn_sched_t *sched, uint32_t node, sn_pid_t *pids, uint32_t *moves, size_t max);
/* The row of one process, if it is in this node's table: 0, or SN_ENOPROC. */
int sn__sched_proc(sn_sched_t *sched, sn_pid_t pid, sn_proc_row_t *row);

/* Ends a process of this node from outside (kill.c). Without force: a
 * SN_EV_CANCEL whose data is *reason (may be NULL), which the process
 * handles as it likes. With force: it gets no further step; one mid-step
 * ends when that step returns (unless that step finished it), the others
 * at once (at their next turn on a worker). It ends with
 * SN_EKILLED and *reason (its monitors' DOWN, its awaiter's result).
 * Takes *reason either way. 0, or SN_ENOPROC if it is not here. Any
 * thread but a worker running that process. */
int sn__sched_kill(sn_sched_t *sched, sn_pid_t pid, bool force, sn_payload_t **reason);

/* ------------------------------------------------------------ migration
 * The scheduler's half of moving processes between nodes (migrate.c says
 * why it is exactly-once). The relay runs the protocol around it. */
/* A pending sleep (sn_out_sleep) that moves with its process: its tag and
 * when it is due, on CLOCK_MONOTONIC of the node holding the migrant (on
 * the wire: the time left, since nodes' clocks differ). */
typedef struct sn_migrant_sleep {
    uint64_t tag;
    uint64_t deadline_ns;
} sn_migrant_sleep_t;
#define SN_MIGRANT_SLEEPS 8 /* sleeps a move carries at most: a process with more stays */
typedef struct sn_migrant {
    sn_pid_t pid, parent;
    uint8_t awaited; /* how the parent awaits its result (with await_tag): 0 not, 1 as the
                        spawn's completion, 2 as a DOWN (SN_YIELD_MONITOR) */
    uint64_t await_tag;
    uint32_t await_node; /* awaited: the node it was spawned on, which keeps its parent's record of
                            where it is (relay/awaited.c; 0: not known) */
    const char *type;    /* the type's registered name */
    uint32_t type_version;
    sn_payload_t *state; /* marshal() output; owned by the migrant */
    void *handle;        /* the frozen process on the old owner */
    uint32_t moves;      /* how many times it has moved, this move included */
    uint8_t fresh;       /* it has not had its first step yet (that step gets no events) */
    uint8_t idle;        /* it waits for any event (SN_IDLE): the new owner steps it only for one */
    uint8_t blocked;     /* it waits for its sleeps (SN_WAIT): the new owner steps it only for one's end */
    uint8_t nsleeps;     /* its pending yields, all sleeps: each armed again by the new owner */
    sn_migrant_sleep_t sleeps[SN_MIGRANT_SLEEPS];
} sn_migrant_t;

/* Old owner, for a move asked by PID (migrate, drain): freezes process
 * pid and marshals it into *m, as sn__migrate_take does, if it is Idle
 * or Blocked (waiting for its yields) and can move. Only those are taken:
 * a Ready one is in a run queue, which only a pop may take it from, and a
 * Running one is mid-step. Returns 0; SN_ENOPROC (not in this node's
 * table); SN__MOVE_BUSY (Ready, Running, frozen already, a sleep of it
 * being delivered, or its arrival here not settled: ask again soon);
 * SN_ENOTMOVABLE with *why (a static text) saying what keeps it here.
 * Revert or commit as for take. */
#define SN__MOVE_BUSY 1
int sn__migrate_freeze(sn_sched_t *sched, sn_pid_t pid, sn_migrant_t *m, const char **why);

/* Old owner. Takes up to max Ready processes that can move (marshal and
 * unmarshal in their type, no yield pending but sleeps, no C result callback or
 * monitor tied here, accept(arg, type) true), oldest first (the global
 * queue, then the top of each worker's deque), freezes and marshals each
 * into out[]. Returns how many. */
size_t sn__migrate_take(sn_sched_t *sched, size_t max, bool (*accept)(void *arg, const sn_type_t *type), void *arg,
                        sn_migrant_t *out);
/* Old owner: the handover failed; the process runs here again (its
 * sleeps armed again, due when they were). */
void sn__migrate_revert(sn_sched_t *sched, sn_migrant_t *m);
/* Old owner: the handover is decided. The process leaves the PID table, a
 * forwarding entry to `node` takes its place, the events it had queued go
 * to *events (in order, *n of them; caller owns the array and payloads) for
 * the new owner, and the process is freed here. Returns 0, or SN_ENOMEM
 * with nothing changed (revert it). */
int sn__migrate_commit(sn_sched_t *sched, sn_migrant_t *m, uint32_t node, sn_event_t **events, size_t *n);
/* New owner: builds the process frozen, outside the PID table (its
 * sleeps are armed by activate). Returns 0, SN_ENOTYPE (type not
 * registered here, another version, no unmarshal), SN_EINVAL (a migrant
 * that contradicts itself: Blocked on no sleep, more sleeps than
 * SN_MIGRANT_SLEEPS), or the unmarshal error. m->state is read, not
 * taken. */
int sn__migrate_install(sn_sched_t *sched, const sn_migrant_t *m, void **handle);
/* New owner: the commit came. Queues events (their data taken; on
 * SN_EEXIST, a PID already here, they stay the caller's) ahead of
 * anything else, enters the PID table and makes it Ready. With `settle`,
 * messages from senders on this node go to the relay hook (via = this
 * node) instead of straight to the process, until sn__migrate_settled: the
 * relay first flushes the network path those senders used before, so what
 * they sent earlier arrives first. Its sleeps (the migrant's, nsleeps of
 * them, deadlines on this node's clock: its pending yields) are armed once
 * it is in the table: each completes here, at its deadline (at once if
 * past). */
int sn__migrate_activate(sn_sched_t *sched, void *handle, sn_event_t *events, size_t n, uint32_t from, bool settle,
                         const sn_migrant_sleep_t *sleeps, size_t nsleeps);
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

/* ------------------------------------------------------------ step timing
 * The step-time histogram for metrics (node/metrics.c). Off by default:
 * then a step costs no clock read. On, each worker times one step in
 * SN_STEP_SAMPLE (a power of two): the two clock reads cost a tiny step
 * about as much as the step itself (bench: schedbench step-timing). */
#define SN_STEP_SAMPLE 16
/* Turns timing on (any thread; workers see it within a step or two). */
void sn__sched_time_steps(sn_sched_t *sched, bool on);
/* The workers' step-time histograms summed: counts[SN_HIST_BOUNDS + 1]
 * (hist.h, not cumulative) and the sum in ns, both added to (any thread). */
void sn__sched_step_hist(sn_sched_t *sched, uint64_t *counts, uint64_t *sum_ns);

#endif

/* internal.h - internals shared by the files of sched/ (sn__ prefix).
 * Nothing outside sched/ and its tests includes this.
 */
#ifndef SN_INTERNAL_H
#define SN_INTERNAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "deque.h"
#include "hist.h"
#include "mpsc.h"
#include "schednode/schednode.h"
#include "sn_node.h"

/* ---------------------------------------------------------------- events */
/* An event in a process's queue. A payload is allocated with one of these
 * in front of it (see payload.c), so sending a payload allocates nothing
 * more; events without a payload, and events carrying a shared payload
 * (whose own node is never queued: it may be in many queues at once),
 * allocate a bare node (sn__barenode_t: the node and a payload pointer).
 * 40 bytes, no pointer to its payload (sn__evnode_data finds it): a u64
 * message (node, payload header, 8 bytes and the terminating NUL) is 57
 * bytes of its block. */
typedef struct sn__evnode {
    sn__mpsc_node_t link;
    uint8_t type;    /* sn_event_type_t */
    uint8_t counted; /* completes a yield counted in proc->pending */
    uint8_t bare;    /* a sn__barenode_t, not inside a payload: free on drain */
    uint8_t shared;  /* in front of a shared payload (sn_payload_share): never queued */
    union {
        int error; /* a queued node: the event's error */
        /* a shared payload's own node: how many hold it (payload.c says
         * which atomic orders what). Never queued, so `error` is unused. */
        _Atomic uint32_t refs;
    };
    uint64_t tag;
    sn_pid_t from;
} sn__evnode_t;

/* A node not inside a payload: no payload (NULL) or a shared one. */
typedef struct sn__barenode {
    sn__evnode_t n;
    sn_payload_t *data;
} sn__barenode_t;

/* The event node that lives in front of payload p (payload.c puts it
 * there; the payload is 8-aligned, its bytes 16-aligned). Inline: every
 * send and every drop asks. */
#define SN__PAYLOAD_PREFIX ((sizeof(sn__evnode_t) + 7) & ~(size_t)7)
static inline sn__evnode_t *sn__payload_node(sn_payload_t *p)
{
    return (sn__evnode_t *)(void *)((unsigned char *)p - SN__PAYLOAD_PREFIX);
}
/* The payload an event carries (NULL: none). */
static inline sn_payload_t *sn__evnode_data(sn__evnode_t *n)
{
    return n->bare ? ((sn__barenode_t *)(void *)n)->data
                   : (sn_payload_t *)(void *)((unsigned char *)n + SN__PAYLOAD_PREFIX);
}
static inline sn__evnode_t *sn__evnode_fill(sn__evnode_t *n, uint8_t type, int error, uint64_t tag, sn_pid_t from,
                                            bool counted)
{
    n->type = type;
    n->counted = counted;
    n->error = error;
    n->tag = tag;
    n->from = from;
    return n;
}
/* A bare node (payload.c); NULL on out-of-memory. */
sn__evnode_t *sn__evnode_bare(uint8_t type, int error, uint64_t tag, sn_pid_t from, sn_payload_t *p, bool counted);
/* A node for an event: p's own node, or a bare one when p is NULL or
 * shared. NULL on out-of-memory (p is then untouched). Inline: once per
 * message on the send path. */
static inline sn__evnode_t *sn__evnode_make(uint8_t type, int error, uint64_t tag, sn_pid_t from, sn_payload_t *p,
                                            bool counted)
{
    if (!p || sn__payload_node(p)->shared)
        return sn__evnode_bare(type, error, tag, from, p, counted);
    sn__evnode_t *n = sn__payload_node(p);
    n->bare = 0;
    return sn__evnode_fill(n, type, error, tag, from, counted);
}
/* Destroys the payloads of n events a step was given (those it did not
 * take), in one call: the step loop's per-message free. */
void sn__events_free(sn_event_t *ev, size_t n);
/* Frees a bare node alone (its data, if any, is the caller's): they come
 * from the payload magazines, not malloc. */
void sn__evnode_free_bare(sn__evnode_t *n);
/* Frees a node and its payload (if any; a shared one loses a reference). */
void sn__evnode_free(sn__evnode_t *n);
/* Shared payloads alive in this program (relaxed; for tests). */
extern _Atomic int64_t sn__shared_live;

/* ------------------------------------------------------------- processes */
/* Process states (low bits of sn_ctx.state). */
enum {
    SN__INIT = 0,     /* being created; not runnable yet */
    SN__READY = 1,    /* in exactly one run queue */
    SN__RUNNING = 2,  /* owned by the worker running it, or holding it in its hand-off (worker.c) */
    SN__IDLE = 3,     /* waiting for any event */
    SN__BLOCKED = 4,  /* waiting for a yield completion or cancel */
    SN__COMPLETE = 5, /* finished; out of the PID table */
    SN__MIGRATING = 6 /* frozen for a handover to another node (migrate.c) */
};
#define SN__STATE_MASK 0x0fu
/* Set by a producer whose event arrived while the process was RUNNING; the
 * worker re-checks the queue before letting the process sleep. */
#define SN__WAKE 0x10u
/* sn__post_local: the target is settling and the event is a message from
 * a sender on this node (it must queue behind the network path) */
#define SN__SETTLING (-1000)

/* A process; sn_ctx_t is its public face. Fields are grouped by writer. */
struct sn_ctx {
    /* guarded by the PID-table shard lock */
    struct sn_ctx *hnext;
    /* immutable after spawn */
    sn_pid_t pid;
    sn_pid_t parent;
    const sn_type_t *type;
    sn_sched_t *sched;
    /* immutable after spawn. `awaited` says which one is live: SN__AWAIT_NONE
     * has the C result callback (sn_spawn) or NULL in cb, the others the
     * parent's spawn tag in await_tag. A process is awaited by a parent or
     * by a C callback, never both (sn_spawn has no parent process) */
    union {
        struct sn__waiter *cb;
        uint64_t await_tag;
    };
    /* CAS by producers (wake) and the owning worker */
    _Atomic uint32_t state;
    /* SN__KILL_* bits, set by sn__sched_kill under the shard lock: ASKED
     * (its end is reported to the relay's `ended` hook, and it no longer
     * moves), FORCE (stored with kill_reason, released; the worker that
     * runs it next reads it, acquire, and ends it: kill.c). And the
     * SN__THR_* bits of backpressure (sn__throttle): ASKED (by the relay,
     * under the shard lock), HELD (the worker that would have run it left
     * it Ready and in no queue: worker.c, hold); whoever clears HELD
     * schedules it. acq_rel on each change of those: the holder hands the
     * process over with them. (One word for both: the header has no byte
     * to spare, see below.) */
    _Atomic uint32_t killed;
    /* the reason for its DOWN and awaiter when killed; exchanged (under the
     * shard lock by the killer, by sn__complete once out of the table) */
    _Atomic(sn_payload_t *) kill_reason;
    /* non-message events queued or being queued: raised by producers before
     * they push, lowered by the worker as it drains them */
    _Atomic uint32_t wakeups;
    /* owned by whichever worker is running the process */
    uint32_t pending;    /* counted yields not yet completed */
    uint8_t awaited;     /* SN__AWAIT_*: how the parent gets our result */
    uint8_t wait_status; /* what it slept on (0: step must run) */
    uint8_t stepped : 1; /* had its first step (which gets no events) */
    /* it monitored another process (dispatch.c, by the worker that ran
     * the step, as stepped: one writer for the byte): never cleared. The
     * relay of this node keeps what its remote monitors need
     * (relay/watch.c), and a DOWN reaches it only where that is: it does
     * not move (migrate.c: unmovable) */
    uint8_t watches : 1;
    /* written under the shard lock: moved here, and messages that senders
     * on this node sent it over the network may still be on their way;
     * until the relay has flushed that path (sn__migrate_settled), messages
     * from senders here go through the relay too, behind those. Read under
     * the lock, and relaxed by a steal that passes it over (migrate.c:
     * consider; 1 only goes to 0 while it is here, so a stale 1 only
     * delays its move) */
    _Atomic uint8_t settling;
    /* immutable after spawn: awaited, the node it was spawned on (its relay
     * keeps where it is) */
    uint32_t await_node;
    /* steps run (inspect.c): written by the running worker only, as an
     * owner-only counter (SN__STAT_ADD); others read it relaxed */
    _Atomic uint64_t steps;
    /* events taken from q by steps, and events the running worker queued
     * for the process itself (dispatch.c, post_self): the running worker
     * only, like steps */
    _Atomic uint32_t popped, self_pushed;
    /* events other producers pushed to q: raised before the push, always
     * under the shard lock (which serialises those pushes), so a plain
     * relaxed load and store, no locked instruction. pushed + self_pushed
     * - popped is the mailbox length, give or take an event in flight: a
     * display figure (inspect.c), never a decision */
    _Atomic uint32_t pushed;
    /* guarded by the shard lock: messages from senders here that went
     * through the relay (while settling) and are not delivered yet. While
     * any are, later ones go that way too, or they would overtake them
     * (the relay lowers it as it delivers each: sn__migrate_diverted) */
    uint32_t diverted;
    /* immutable once in the table: the node it moved here from (0: born
     * here); when it ends, that node may drop its forwarding entry */
    uint32_t came_from;
    uint32_t moves;               /* how many times it moved between nodes (the home's newest news wins) */
    sn__mpsc_t q;                 /* producers push, the running worker pops */
    struct sn__monitor *monitors; /* who watches us; guarded by the shard lock */
    alignas(16) unsigned char user[];
};
typedef struct sn_ctx sn__proc_t;
/* Every idle process pays for the header: with 16 bytes of state a
 * process is one 176-byte block, which malloc keeps in a 192-byte chunk;
 * 16 bytes more in the header is 16 MB more for a million processes
 * (schedbench memory: 201 bytes a process at 160, 217 at 176, 281 when a
 * misplaced field made it 192). There is no hole left (pahole, or gdb's
 * ptype /o): shrink or share a field before adding one, and raise this
 * only on purpose. */
_Static_assert(sizeof(sn__proc_t) <= 160, "sn__proc_t grew: see the note above");

/* How a parent learns that its child ended (sn_ctx.awaited). */
enum {
    SN__AWAIT_NONE = 0,
    SN__AWAIT_RESULT = 1, /* SN_YIELD_AWAIT: the spawn's completion, counted */
    SN__AWAIT_DOWN = 2    /* SN_YIELD_MONITOR: an SN_EV_DOWN with the spawn's tag */
};

/* One watcher of a process (sn_out_monitor). */
typedef struct sn__monitor {
    struct sn__monitor *next;
    sn_pid_t watcher;
    uint64_t tag;
} sn__monitor_t;

/* Events a process takes like messages: they neither wake a Blocked
 * process nor count as wakeups (see the wake protocol in worker.c). */
static inline bool sn__message_class(uint8_t type)
{
    return type == SN_EV_MESSAGE || type == SN_EV_DOWN;
}

/* ---------------------------------------------------------------- queues */
/* The global FIFO: new submissions from outside the workers, processes
 * that asked to CONTINUE, and wakeups from non-worker threads. */
typedef struct sn__gqueue {
    pthread_mutex_t mu;
    void **ring;
    size_t cap, head, count;         /* guarded by mu */
    alignas(64) _Atomic size_t size; /* mirror of count for lock-free peeks */
} sn__gqueue_t;

int sn__gqueue_init(sn__gqueue_t *q);
void sn__gqueue_fini(sn__gqueue_t *q);
int sn__gqueue_push(sn__gqueue_t *q, void *item);
/* Pops up to max items (oldest first); returns the count. */
size_t sn__gqueue_pop(sn__gqueue_t *q, void **out, size_t max);
static inline size_t sn__gqueue_size(sn__gqueue_t *q)
{
    return atomic_load_explicit(&q->size, memory_order_seq_cst);
}

/* ------------------------------------------------------------- PID table */
#define SN__SHARDS 256
typedef struct sn__shard {
    alignas(64) atomic_flag lock;
    sn__proc_t **buckets;
    size_t nbuckets, count;
} sn__shard_t;

typedef struct sn__ptable {
    sn__shard_t shards[SN__SHARDS];
} sn__ptable_t;

int sn__ptable_init(sn__ptable_t *t);
void sn__ptable_fini(sn__ptable_t *t);
sn__shard_t *sn__ptable_shard(sn__ptable_t *t, uint64_t serial);
void sn__shard_lock(sn__shard_t *s);
void sn__shard_unlock(sn__shard_t *s);
/* With the shard locked: */
/* The process with this PID (its home node may be another: a process can
 * have moved here), or NULL. Caller holds the shard lock. */
sn__proc_t *sn__shard_find(sn__shard_t *s, sn_pid_t pid);
#define sn__shard_find_pid sn__shard_find
int sn__shard_insert(sn__shard_t *s, sn__proc_t *p);
void sn__shard_remove(sn__shard_t *s, sn__proc_t *p);

/* --------------------------------------------------------------- workers */
typedef struct sn__wstats {
    _Atomic uint64_t steps, steals, stolen, parks, messages, spawned, completed, noproc, remote_out;
    _Atomic uint64_t yields; /* sched_yield calls of a searching worker (tests/test_runnext.c) */
} sn__wstats_t;

/* Per-worker cache of freed process blocks: classes of 16 bytes (malloc's
 * own step, so a block is no bigger than its process) up to 512, at most
 * SN__PCACHE_MAX blocks each. Owner-only, so no atomics;
 * it spares malloc's arena locks when processes die on another worker
 * than the one that made them. */
#define SN__PCACHE_CLASSES 32
#define SN__PCACHE_MAX 4096

/* Coalesced sends (dispatch.c): one receiver's messages of a run of send
 * yields, chained in the order sent. Owner-only scratch of a worker. */
#define SN__SEND_GROUPS 64  /* receivers grouped at once (then flushed) */
#define SN__GROUP_SLOTS 128 /* their hash index: a power of 2, > SN__SEND_GROUPS */
typedef struct sn__sendgroup {
    sn_pid_t to;
    struct sn__evnode *first, *last;
    size_t n;
} sn__sendgroup_t;

typedef struct sn__worker {
    /* touched by thieves */
    alignas(64) sn__deque_t deque;
    alignas(64) _Atomic(sn__proc_t *) next; /* run-next slot (see worker.c) */
    /* times the owner filled the slot: a relaxed store by the owner after
     * each fill; thieves read it to tell one process held there from a
     * stream of them (the steal guard, worker.c) */
    _Atomic uint32_t fills;
    /* the yield slot: the process that this worker's last CONTINUE put
     * back (worker.c). Like run-next: filled by the owner only, emptied by
     * an exchange (the owner's, or a thief's under the guard, shorter), and
     * yfills counts its fills for that guard. A line apart from run-next,
     * as is the back-off below: a thief reads both at every search, and the
     * owner writes run-next at every hop of a chain of messages (on one
     * line, a searching thief slowed schedbench chameneos by false sharing) */
    alignas(64) _Atomic(sn__proc_t *) yielded;
    _Atomic uint32_t yfills;
    /* the steal back-off (worker.c): until shun_until (ns) thieves leave
     * this deque alone and the owner pays no lazy wake; shun_ns is the
     * back-off's length, doubled at each steal that did not pay. Relaxed
     * loads and stores by thieves and the owner: a hint, no data hangs on
     * it, a lost update only shortens or lengthens one back-off */
    alignas(64) _Atomic uint64_t shun_until, shun_ns;
    /* owner-private */
    alignas(64) sn_sched_t *sched;
    int index;
    bool spinning;
    uint32_t streak, picks; /* run-next fairness (worker.c) */
    uint32_t step_tick;     /* steps run while timing is on: one in SN_STEP_SAMPLE is timed */
    /* the run-next steal guard (worker.c): the victim slot we watch, its
     * fill count, whether we watch one, and when we first saw it */
    struct sn__worker *watch;
    uint32_t watch_fills;
    bool watching;
    bool watch_yielded; /* the slot watched is the victim's yield slot, not its run-next */
    bool fanout;        /* the step being run spawned (worker.c: yield_back) */
    /* the hand-off (worker.c): a process the step's sends woke, to run
     * next, held here (unseen by thieves) while the sends are dispatched */
    bool handing;
    struct sn_ctx *handoff; /* RUNNING already (woken so: sn__hand_to), owned by us */
    struct sn_ctx *handed;  /* the hand-off find_work returned, for sn__run */
    /* the lazy wake (worker.c): we queued work on our deque and woke nobody
     * for it yet; since when, and a pick counter for the clock reads */
    bool wake_owed;
    uint32_t owed_tick;
    uint64_t owed_ns;
    bool wake_sleepers; /* left park() while others slept untimed: wake them on finding work */
    /* the steal back-off (worker.c): our last deque steal, from whom, how
     * many processes, when, and the picks left before we judge it */
    struct sn__worker *loot_from;
    uint32_t loot_n, loot_left;
    uint64_t loot_ns;
    uint64_t watch_ns;
    uint64_t rng;
    uint64_t serial_next, serial_end; /* block of PID serials */
    sn_event_t *events;               /* step input buffer */
    size_t events_cap;
    sn_step_out_t out;
    sn__sendgroup_t groups[SN__SEND_GROUPS]; /* coalesced sends (dispatch.c) */
    uint8_t gslot[SN__GROUP_SLOTS];          /* 1 + index into groups; 0: free */
    uint32_t ngroups;
    sn__sendgroup_t *glast;           /* the group used last (valid while ngroups > 0) */
    void *pcache[SN__PCACHE_CLASSES]; /* freed process blocks by size class */
    uint32_t pcache_n[SN__PCACHE_CLASSES];
    pthread_t thread;
    /* owner-written, read by stats */
    alignas(64) sn__wstats_t st;
    sn__hist_t step_hist; /* step times, while sched->time_steps (hist.h) */
} sn__worker_t;

/* ---------------------------------------------------------------- timers */
typedef struct sn__timer_entry {
    uint64_t deadline_ns;
    sn_pid_t pid;
    uint64_t tag;
} sn__timer_entry_t;

typedef struct sn__timer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sn__timer_entry_t *heap;
    size_t n, cap;
    sn_pid_t firing; /* the entry the timer thread popped and delivers (timer.c) */
    bool stop;
    bool running;
    bool inited;
    pthread_t thread;
} sn__timer_t;

/* ---------------------------------------------------------- registries */
typedef struct sn__command {
    const char *name; /* owned copy */
    sn_command_fn fn;
    void *arg;
} sn__command_t;

typedef struct sn__plugin_handle {
    void *dl;
    struct sn__plugin_handle *next;
} sn__plugin_handle_t;

/* Forwarding entries: processes that moved from here to another node
 * (migrate.c). A mutex-guarded open-addressing map; `live` lets the
 * common path (no entry: nothing moved away, or all that did have ended)
 * skip the lock. */
typedef struct sn__fwd_entry {
    sn_pid_t pid;
    uint32_t node; /* where it went; 0: empty slot */
    /* The nodes it had come here from, each told in turn when it ends: one
     * per visit (a process that comes back and leaves again adds the node
     * it came back from; the path it took leads back from each), none if
     * it was born here. origin0 is the first, `more` (malloc'd) the rest. */
    uint32_t norigins, origin0;
    uint32_t *more;
} sn__fwd_entry_t;

typedef struct sn__fwd {
    pthread_mutex_t mu;
    sn__fwd_entry_t *entries; /* guarded by mu */
    size_t cap, count;        /* guarded by mu */
    _Atomic size_t live;      /* = count, stored (release) under mu; read without it */
} sn__fwd_t;

/* The node a process moved to from here, or 0. */
uint32_t sn__forward_of(sn_sched_t *sched, sn_pid_t pid);

/* Built-in command ids. */
enum {
    SN__CMD_SEND = 1,
    SN__CMD_SPAWN = 2,
    SN__CMD_SLEEP = 3,
    SN__CMD_TERMINATE = 4,
    SN__CMD_MONITOR = 5,
    SN__CMD_DEMONITOR = 6,
    SN__CMD_SEND_MANY = 7, /* sn_out_send_many: data is a batch (out.c) */
    SN__CMD_FIRST_USER = 8
};

/* sn_out_send_many's batch: the messages, in order, in a payload of this
 * internal content type (so the yield carries it in `data` and a yield
 * dropped undispatched frees it like any payload: its messages leak then,
 * which never happens: every step's yields are dispatched). */
#define SN__CT_BATCH 0x100u
typedef struct sn__batch {
    size_t n;
    sn_payload_t *msgs[]; /* owned; NULL: an empty message */
} sn__batch_t;
static inline sn__batch_t *sn__batch_of(sn_payload_t *p)
{
    return (sn__batch_t *)(void *)p->data;
}

/* Result waiter for sn_spawn callbacks and sn_call. */
typedef struct sn__waiter {
    sn_result_fn fn;
    void *arg;
} sn__waiter_t;

/* -------------------------------------------------------------- scheduler */
typedef struct sn__hooks {
    sn_relay_hooks_t h;
    struct sn__hooks *older;
} sn__hooks_t;

struct sn_sched {
    uint32_t node_id;
    int nworkers;
    sn__worker_t *workers;
    sn__gqueue_t global;
    sn__ptable_t table;
    sn__timer_t timer;
    /* The relay hooks: an immutable copy published with a release store,
     * read by workers with acquire; replaced copies are kept (a worker may
     * still hold one) and freed with the scheduler. */
    _Atomic(struct sn__hooks *) relay;
    /* 1: call the relay's `loaded` hook when work piles up. Armed by the
     * relay (sn__sched_watch_load), disarmed by the exchange that wins the
     * call; a relaxed load on the queueing path while it is 0. */
    alignas(64) _Atomic int load_watch;
    /* calls in progress from threads that are not workers (scheduler.c,
     * outside_enter): sn_sched_destroy waits for none */
    alignas(64) _Atomic int outside;

    /* parking: see worker.c for the protocol */
    alignas(64) _Atomic int nspinning;
    _Atomic int nparked;
    pthread_mutex_t park_mu;
    pthread_cond_t park_cv;
    uint64_t park_gen;      /* guarded by park_mu */
    int nuntimed;           /* workers asleep without a timeout; guarded by park_mu */
    _Atomic int fence_word; /* sn__fence under TSan */
    _Atomic bool stop;      /* workers exit */
    _Atomic bool shutting_down;
    _Atomic int shutdown_done;

    alignas(64) _Atomic uint64_t serial_next; /* blocks of serials */
    /* counters for work done off the workers */
    _Atomic uint64_t ext_spawned, ext_completed, ext_messages, ext_noproc, ext_remote_out;
    /* processes in Blocked now: +1 by the worker whose CAS put one there,
     * -1 by the CAS that takes it out; relaxed, so it may read one off
     * (even -1) for an instant: a display figure, never a decision */
    _Atomic int64_t nblocked;
    sn__fwd_t fwd;
    _Atomic uint64_t migrated_in, migrated_out;
    /* workers time their steps into step_hist (metrics asked for it):
     * relaxed, it only switches a statistic on */
    _Atomic bool time_steps;

    /* registries: copy-on-write arrays published with release stores;
     * retired arrays are freed with the scheduler */
    pthread_mutex_t reg_mu;
    char reg_dup[64]; /* the last type or command a registration found taken (reg_mu): sn_plugin_load names it */
    _Atomic(const sn_type_t **) types;
    _Atomic size_t ntypes;
    _Atomic(sn__command_t *) cmds; /* index = id - SN__CMD_FIRST_USER */
    _Atomic size_t ncmds;
    void *retired; /* singly linked list of retired arrays (first word = next) */
    sn__plugin_handle_t *plugins;
    /* the relay's I/O thread as a guest worker (guest.c); set at creation */
    sn__worker_t *guest;
};

/* The worker the calling thread is, if it is one of sched's. */
sn__worker_t *sn__self_worker(sn_sched_t *sched);

/* Makes a READY process runnable: on the calling worker (run-next slot or
 * deque) or, from other threads, the global queue. Wakes a parked worker
 * when one is needed. */
void sn__schedule(sn_sched_t *sched, sn__proc_t *p, bool to_next);
/* Producer side of the wake protocol: after pushing an event (shard lock
 * held), moves an IDLE/BLOCKED process to `to`: READY, or RUNNING for a
 * process that goes to the hand-off of the worker waking it (sn__hand_to).
 * Returns true when the caller must sn__schedule it, or hand it over with
 * sn__hand_over (after unlocking). */
bool sn__wake(sn__proc_t *p, uint8_t event_type, uint32_t to);
/* The calling worker, if a process its step's sends wake now would go to
 * its hand-off (worker.c); NULL otherwise. */
sn__worker_t *sn__hand_to(sn_sched_t *sched);
/* Hands p, woken straight to RUNNING for w's hand-off (sn__hand_to), to w. */
void sn__hand_over(sn__worker_t *w, sn__proc_t *p);
/* Pushes an event to a local process (node must be built); on SN_ENOPROC
 * the node is left to the caller. */
int sn__post_local(sn_sched_t *sched, sn_pid_t to, sn__evnode_t *node, bool from_here);
/* A step's message to a process here, by the shortest path (scheduler.c);
 * SN__SETTLING: take sn__deliver's. */
int sn__send_here(sn__worker_t *w, sn_pid_t to, sn_pid_t from, uint64_t tag, sn_payload_t **msg);
/* Pushes n messages (none NULL) from `from` with `tag` to a local process
 * at once, in order: one exchange on its queue, one wake. Returns 0 (each
 * msgs[i] set to NULL) or an error with nothing sent and msgs untouched
 * (SN_ENOPROC: not here; SN__SETTLING: it must go through the relay;
 * SN_ENOMEM): the caller then sends them one by one. */
int sn__post_local_many(sn_sched_t *sched, sn_pid_t to, sn_pid_t from, uint64_t tag, sn_payload_t **msgs, size_t n);
/* Pushes a chain of n message nodes (first..last, linked through
 * link.next, built by the caller and seen by nobody else) to a local
 * process with one exchange and one wake. Returns 0 (the chain is the
 * receiver's now) or, with nothing pushed and the chain still the
 * caller's, SN_ENOPROC (not here) or SN__SETTLING (it must go through the
 * relay: the caller then sends each message on its own, in order). */
int sn__post_chain(sn_sched_t *sched, sn_pid_t to, sn__evnode_t *first, sn__evnode_t *last, size_t n);
/* Posts an event to `to`, local or (messages only) remote. On failure the
 * payload goes back in *data when data != NULL. */
int sn__deliver(sn_sched_t *sched, sn_pid_t to, uint8_t type, int error, uint64_t tag, sn_pid_t from,
                sn_payload_t **data, bool counted);
/* What makes a process (sn__spawn). */
typedef struct sn__spawn_args {
    const char *type, *method;
    sn_payload_t **input; /* taken, whatever happens */
    sn_pid_t parent;
    uint8_t awaited; /* SN__AWAIT_* */
    uint64_t await_tag;
    sn__waiter_t *cb; /* C result callback (taken on success) */
    /* called with the new PID once the process is in the table and before
     * it can run: the parent hears of its child before anything the child
     * sends or its end (SN__AWAIT_DOWN) can reach it */
    void (*announce)(void *arg, sn_pid_t child);
    void *announce_arg;
} sn__spawn_args_t;
/* Creates, inits and schedules a process. On failure *reason may get a
 * text payload (caller owns): sn__spawn_refusal's words. */
int sn__spawn(sn_sched_t *sched, const sn__spawn_args_t *a, sn_pid_t *pid_out, sn_payload_t **reason);
/* Runs one process (worker.c). */
void sn__run(sn__worker_t *w, sn__proc_t *p);
/* The hand-off (worker.c): puts a process held for this worker to run
 * next into its run-next slot, where thieves see it, and stops holding. */
void sn__handoff_flush(sn__worker_t *w);
/* Dispatches the yields of a finished step (dispatch.c). */
void sn__dispatch(sn__worker_t *w, sn__proc_t *p, sn_step_out_t *out);
/* Ends a process: out of the table, bounce leftovers, result, close, free. */
void sn__complete(sn_sched_t *sched, sn__worker_t *w, sn__proc_t *p, sn_status_t status, int error,
                  sn_payload_t **result);
void *sn__worker_main(void *arg);
/* Runs p as worker w on a thread that is not w's (worker.c; guest.c). */
void sn__run_as(sn__worker_t *w, sn__proc_t *p);
void sn__notify(sn_sched_t *sched);

/* guest.c: the relay's I/O thread as a guest worker (see there). init
 * makes sched->guest (0 or SN_ENOMEM); keep is sn__schedule's question on
 * a thread that is no worker (w NULL) or the guest (w): does the guest
 * take p (true) or does it go where it would have gone? quiesce: no run
 * starts from now on, and none is in progress when it returns
 * (shutdown). stats adds the guest's counters. */
int sn__guest_init(sn_sched_t *sched);
void sn__guest_fini(sn_sched_t *sched);
bool sn__guest_keep(sn_sched_t *sched, sn__worker_t *w, sn__proc_t *p, bool to_next);
void sn__guest_quiesce(sn_sched_t *sched);
void sn__guest_stats(sn_sched_t *sched, sn_stats_t *out);
void sn__wake_all(sn_sched_t *sched);

/* registry.c */
const sn_type_t *sn__type_find(sn_sched_t *sched, const char *name);
const sn__command_t *sn__command_get(sn_sched_t *sched, uint32_t id);
void sn__registry_fini(sn_sched_t *sched);

/* timer.c */
int sn__timer_start(sn_sched_t *sched);
/* Stops the thread; later adds fail with SN_ESHUTDOWN. */
void sn__timer_stop(sn_sched_t *sched);
/* Frees the timer (after sn__timer_stop). */
void sn__timer_fini(sn_sched_t *sched);
int sn__timer_add(sn_sched_t *sched, uint64_t ms, sn_pid_t pid, uint64_t tag);
/* The same, due at `deadline` (sn__now_ns's clock). */
int sn__timer_add_at(sn_sched_t *sched, uint64_t deadline, sn_pid_t pid, uint64_t tag);
/* Takes pid's sleeps out of the heap into out[], if it has exactly `want`
 * of them (its pending yields) and at most max: 0. SN__MOVE_BUSY if one is
 * being delivered; SN_ENOTMOVABLE with *why otherwise (nothing taken).
 * The caller holds pid frozen (SN__MIGRATING); timer.c says who owns a
 * sleep when. */
int sn__timer_take(sn_sched_t *sched, sn_pid_t pid, uint32_t want, sn_migrant_sleep_t *out, size_t max,
                   const char **why);
uint64_t sn__now_ns(void);

/* Process memory (scheduler.c). */
sn__proc_t *sn__proc_alloc(sn__worker_t *w, size_t size);
/* Bytes of a process of type t: the context and its 16-aligned state. */
size_t sn__proc_size(const sn_type_t *t);
void sn__proc_free(sn__worker_t *w, sn__proc_t *p, size_t size);
void sn__pcache_fini(sn__worker_t *w);

#define SN__KILL_ASKED 1u
#define SN__KILL_FORCE 2u
#define SN__KILL_BITS (SN__KILL_ASKED | SN__KILL_FORCE)
#define SN__THR_ASKED 0x100u
#define SN__THR_HELD 0x200u
#define SN__THR_BITS (SN__THR_ASKED | SN__THR_HELD)
/* kill.c: the process was killed (p->killed): it ends now, with
 * SN_EKILLED and the killer's reason. The calling worker runs it. */
void sn__kill_now(sn__worker_t *w, sn__proc_t *p);
/* Takes (and clears) the reason a killed process carries; NULL if none. */
sn_payload_t *sn__kill_reason_take(sn__proc_t *p);
/* sn__complete: a process sn__sched_kill asked to end has ended: tells the
 * relay's `ended` hook, if any. */
void sn__kill_report(sn_sched_t *sched, sn__proc_t *p, int error, const sn_payload_t *result);

/* out.c */
/* sn_out_at, inline for the dispatch loop */
static inline sn_yield_t *sn__out_at(sn_step_out_t *out, uint32_t i)
{
    return i < SN_OUT_INLINE_YIELDS ? &out->inline_yields[i] : &out->overflow[i - SN_OUT_INLINE_YIELDS];
}
void sn__out_reset(sn_step_out_t *out);
void sn__out_fini(sn_step_out_t *out);

static inline void sn__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* A full (seq_cst) barrier between our queue stores and the loads of the
 * parking counters, and the reverse. TSan does not model fences, so under
 * TSan the same ordering comes from seq_cst RMWs on one shared word. */
static inline void sn__fence(sn_sched_t *sched)
{
#ifdef __SANITIZE_THREAD__
    atomic_fetch_add_explicit(&sched->fence_word, 0, memory_order_seq_cst);
#else
    (void)sched;
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* Owner-only counter bump (single writer: no locked instruction). */
#define SN__STAT_ADD(field, n)                                                                                         \
    atomic_store_explicit(&(field), atomic_load_explicit(&(field), memory_order_relaxed) + (n), memory_order_relaxed)

#endif

/* scheduler.c - the scheduler object: start and stop, spawning, routing
 * events to processes (the relay.Receiver side), completion, shutdown.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define SERIAL_BLOCK 1024

/* ------------------------------------------------------------- routing */

bool sn__wake(sn__proc_t *p, uint8_t event_type, uint32_t to)
{
    /* seq_cst: the producer's load in the wake protocol's store-buffering
     * pair (go_to_sleep in worker.c); our push came just before */
    uint32_t s = atomic_load_explicit(&p->state, memory_order_seq_cst);
    for (;;) {
        uint32_t st = s & SN__STATE_MASK;
        if (st == SN__IDLE || (st == SN__BLOCKED && !sn__message_class(event_type))) {
            /* acq_rel: we take the process out of its sleep, seeing the
             * writes of the step that put it there */
            if (atomic_compare_exchange_weak_explicit(&p->state, &s, to, memory_order_seq_cst, memory_order_seq_cst)) {
                if (st == SN__BLOCKED)
                    atomic_fetch_sub_explicit(&p->sched->nblocked, 1, memory_order_relaxed);
                return true;
            }
        } else if (st == SN__RUNNING && !(s & SN__WAKE)) {
            /* release: the worker that sees the flag sees our event linked */
            if (atomic_compare_exchange_weak_explicit(&p->state, &s, s | SN__WAKE, memory_order_seq_cst,
                                                      memory_order_seq_cst))
                return false;
        } else {
            return false; /* Ready, Blocked on a message, Init, Complete */
        }
    }
}

static void count(sn_sched_t *sched, int which)
{
    sn__worker_t *w = sn__self_worker(sched);
    switch (which) {
    case 0:
        if (w)
            SN__STAT_ADD(w->st.messages, 1);
        else
            atomic_fetch_add_explicit(&sched->ext_messages, 1, memory_order_relaxed);
        break;
    case 1:
        if (w)
            SN__STAT_ADD(w->st.noproc, 1);
        else
            atomic_fetch_add_explicit(&sched->ext_noproc, 1, memory_order_relaxed);
        break;
    default:
        if (w)
            SN__STAT_ADD(w->st.remote_out, 1);
        else
            atomic_fetch_add_explicit(&sched->ext_remote_out, 1, memory_order_relaxed);
        break;
    }
}

/* After a push to p (shard s locked): the wake, then the unlock, then p to
 * the hand-off of the worker waking it (woken straight to RUNNING:
 * worker.c) or, woken to READY, to a run queue. */
static void wake_unlock(sn_sched_t *sched, sn__shard_t *s, sn__proc_t *p, uint8_t type)
{
    sn__worker_t *hw = sn__hand_to(sched);
    bool woke = sn__wake(p, type, hw ? SN__RUNNING : SN__READY);
    sn__shard_unlock(s);
    if (woke && hw)
        sn__hand_over(hw, p);
    else if (woke)
        sn__schedule(sched, p, true);
}

int sn__post_local(sn_sched_t *sched, sn_pid_t to, sn__evnode_t *node, bool from_here)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, to.serial);
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, to);
    if (!p || ((p->settling || p->diverted) && from_here && node->type == SN_EV_MESSAGE)) {
        if (p)
            p->diverted++; /* the caller hands it to the relay, which lowers this once delivered */
        sn__shard_unlock(s);
        return p ? SN__SETTLING : SN_ENOPROC;
    }
    /* Under the shard lock the process cannot leave the table, so it is
     * alive for the push and the wake CAS. The node is not: once pushed,
     * the consumer may pop and free it, so read its type first. */
    uint8_t type = node->type;
    if (!sn__message_class(type)) /* seq_cst: before the push (wake protocol) */
        atomic_fetch_add_explicit(&p->wakeups, 1, memory_order_seq_cst);
    SN__STAT_ADD(p->pushed, 1); /* a display count; we hold the shard lock */
    sn__mpsc_push(&p->q, &node->link);
    wake_unlock(sched, s, p, type);
    return 0;
}

/* A message from a step on worker w to a process that lives here, the
 * common case of deliver_ cut to what it needs: the caller is a worker (no
 * outside count), the receiver is here and takes messages straight (not
 * settling, nothing diverted), the payload is its own node (not shared).
 * 0: pushed, *msg taken. SN__SETTLING: none of that holds, nothing was
 * changed (the node's fields aside, which deliver_ fills again), and the
 * caller takes the general path, which looks again and decides. */
int sn__send_here(sn__worker_t *w, sn_pid_t to, sn_pid_t from, uint64_t tag, sn_payload_t **msg)
{
    sn_sched_t *sched = w->sched;
    sn_payload_t *payload = *msg;
    if (!payload || sn__payload_node(payload)->shared)
        return SN__SETTLING;
    sn__shard_t *s = sn__ptable_shard(&sched->table, to.serial);
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, to);
    if (!p || p->settling || p->diverted) {
        sn__shard_unlock(s);
        return SN__SETTLING;
    }
    /* as sn__post_local: alive under the lock; a message raises no wakeup */
    sn__evnode_t *n = sn__payload_node(payload);
    n->bare = 0;
    sn__evnode_fill(n, SN_EV_MESSAGE, 0, tag, from, false);
    SN__STAT_ADD(p->pushed, 1); /* a display count; we hold the shard lock */
    sn__mpsc_push(&p->q, &n->link);
    wake_unlock(sched, s, p, SN_EV_MESSAGE);
    SN__STAT_ADD(w->st.messages, 1);
    *msg = NULL;
    return 0;
}

/* Unlinks a chain built by post_many that was not pushed: bare nodes (a
 * shared payload's) are freed; the payloads stay with the caller. */
static void unchain(sn__evnode_t *first)
{
    while (first) {
        sn__evnode_t *next = (sn__evnode_t *)atomic_load_explicit(&first->link.next, memory_order_relaxed);
        if (first->bare)
            sn__evnode_free_bare(first);
        first = next;
    }
}

int sn__post_local_many(sn_sched_t *sched, sn_pid_t to, sn_pid_t from, uint64_t tag, sn_payload_t **msgs, size_t n)
{
    if (n == 0)
        return 0;
    /* the chain, linked here, outside the lock (nobody else sees it yet) */
    sn__evnode_t *first = NULL, *last = NULL;
    for (size_t i = 0; i < n; i++) {
        sn__evnode_t *e = msgs[i] ? sn__evnode_make(SN_EV_MESSAGE, 0, tag, from, msgs[i], false) : NULL;
        if (!e) {
            unchain(first);
            return SN_ENOMEM; /* or an empty slot: the caller's per-message path fills it */
        }
        atomic_store_explicit(&e->link.next, NULL, memory_order_relaxed);
        if (last)
            atomic_store_explicit(&last->link.next, &e->link, memory_order_relaxed);
        else
            first = e;
        last = e;
    }
    int rc = sn__post_chain(sched, to, first, last, n);
    if (rc != 0) {
        unchain(first);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        msgs[i] = NULL;
    return 0;
}

int sn__post_chain(sn_sched_t *sched, sn_pid_t to, sn__evnode_t *first, sn__evnode_t *last, size_t n)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, to.serial);
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, to);
    if (!p || p->settling || p->diverted) { /* not here, or behind the network path: one by one */
        sn__shard_unlock(s);
        return p ? SN__SETTLING : SN_ENOPROC;
    }
    /* as sn__post_local: alive under the lock; messages raise no wakeups */
    SN__STAT_ADD(p->pushed, (uint32_t)n); /* a display count; we hold the shard lock */
    sn__mpsc_push_chain(&p->q, &first->link, &last->link);
    wake_unlock(sched, s, p, SN_EV_MESSAGE);
    sn__worker_t *w = sn__self_worker(sched);
    if (w)
        SN__STAT_ADD(w->st.messages, n);
    else
        atomic_fetch_add_explicit(&sched->ext_messages, n, memory_order_relaxed);
    return 0;
}

/* A call from a thread that is not a worker (a command's helper thread,
 * the relay, the program) still touches the scheduler after it has handed
 * its event over, and that event may be what lets the program finish and
 * destroy the scheduler: sn_sched_destroy waits until no such call is in
 * progress. The increment may be relaxed: it is sequenced before the
 * hand-over, which happens-before anything the destroyer saw of it. */
static bool outside_enter(sn_sched_t *sched)
{
    if (sn__self_worker(sched))
        return false;
    atomic_fetch_add_explicit(&sched->outside, 1, memory_order_relaxed);
    return true;
}

static void outside_leave(sn_sched_t *sched, bool entered)
{
    if (entered) /* release: our last touch of the scheduler; destroy acquires */
        atomic_fetch_sub_explicit(&sched->outside, 1, memory_order_release);
}

/* Posts an event to `to`: here if it lives here, else (messages and DOWNs,
 * with a relay) to the node it moved to from here, else to its home node
 * (also one that came from another node: a path through a node that
 * restarted ends here, and the home knows where the process went; the
 * relay bounds the hops of a path that loops). A process of this node
 * that is not here and did not move: noproc. */
static int deliver_(sn_sched_t *sched, sn_pid_t to, uint8_t type, int error, uint64_t tag, sn_pid_t from,
                    sn_payload_t **data, bool counted, bool inbound)
{
    sn_payload_t *payload = data ? *data : NULL;
    const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
    /* what can cross nodes: messages, DOWNs, and results for a parent (a
     * counted completion; a "counted" DOWN is a child's: SN__AWAIT_DOWN) */
    bool result = type == SN_EV_YIELD_COMPLETE && counted;
    int kind = result ? SN_RELAY_RESULT : type == SN_EV_DOWN && counted ? SN_RELAY_CHILD_DOWN : type;
    bool relay = (sn__message_class(type) || result) && hk && hk->h.deliver;
    /* A PID of another node is here only if its process moved here: until
     * something has, a send to one goes straight to the relay without a
     * table lookup (the cross-node hot path). One moving in right now is
     * still reached: through its home node's forwarding entry. */
    int rc = SN_ENOPROC;
    if (to.node == sched->node_id || atomic_load_explicit(&sched->migrated_in, memory_order_relaxed) > 0) {
        sn__evnode_t *n = sn__evnode_make(type, error, tag, from, payload, counted);
        if (!n)
            return SN_ENOMEM;
        rc = sn__post_local(sched, to, n, !inbound);
        if (rc != 0 && n->bare) /* (no payload, or a shared one's node: the payload goes back) */
            sn__evnode_free_bare(n);
    }
    if (rc == SN__SETTLING && hk) { /* behind what we sent it through the network: the relay delivers it here */
        rc = hk->h.deliver(hk->h.arg, to, from, tag, type, error, sched->node_id, data);
        if (rc != 0)
            sn__migrate_diverted(sched, to);
        return rc;
    }
    if (rc == SN_ENOPROC && relay) {
        /* not here: moved away from here, or living on its home node */
        uint32_t via = sn__forward_of(sched, to);
        if (via || to.node != sched->node_id) {
            rc = hk->h.deliver(hk->h.arg, to, from, tag, kind, error, via, data);
            if (rc == 0 && type == SN_EV_MESSAGE)
                count(sched, 2);
            return rc;
        }
    }
    if (rc != 0) {
        if (type == SN_EV_MESSAGE)
            count(sched, 1);
        return rc;
    }
    if (type == SN_EV_MESSAGE)
        count(sched, 0);
    if (data)
        *data = NULL;
    return 0;
}

/* deliver_, counted as a call from outside when it is one */
static int deliver(sn_sched_t *sched, sn_pid_t to, uint8_t type, int error, uint64_t tag, sn_pid_t from,
                   sn_payload_t **data, bool counted, bool inbound)
{
    bool out = outside_enter(sched);
    int rc = deliver_(sched, to, type, error, tag, from, data, counted, inbound);
    outside_leave(sched, out);
    return rc;
}

/* A message (an empty one still is one: it gets an empty payload). */
static int message(sn_sched_t *sched, sn_pid_t to, sn_pid_t from, uint64_t tag, sn_payload_t **msg, bool inbound)
{
    if (!msg || !*msg) {
        sn_payload_t *empty = sn_payload_new(SN_CT_BYTES, NULL, 0);
        if (!empty)
            return SN_ENOMEM;
        int rc = deliver(sched, to, SN_EV_MESSAGE, 0, tag, from, &empty, false, inbound);
        sn_payload_destroy(&empty);
        return rc;
    }
    return deliver(sched, to, SN_EV_MESSAGE, 0, tag, from, msg, false, inbound);
}

int sn__deliver(sn_sched_t *sched, sn_pid_t to, uint8_t type, int error, uint64_t tag, sn_pid_t from,
                sn_payload_t **data, bool counted)
{
    return deliver(sched, to, type, error, tag, from, data, counted, false);
}

int sn__send_result(sn_sched_t *sched, sn_pid_t parent, sn_pid_t child, uint64_t tag, int error, sn_payload_t **result)
{
    return deliver(sched, parent, SN_EV_YIELD_COMPLETE, error, tag, child, result, true, true);
}

int sn__send_child_down(sn_sched_t *sched, sn_pid_t parent, sn_pid_t child, uint64_t tag, int error,
                        sn_payload_t **result)
{
    return deliver(sched, parent, SN_EV_DOWN, error, tag, child, result, true, true);
}

int sn__deliver_inbound(sn_sched_t *sched, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error,
                        sn_payload_t **data)
{
    if (kind == SN_EV_MESSAGE)
        return message(sched, to, from, tag, data, true);
    return deliver(sched, to, (uint8_t)kind, error, tag, from, data, false, true);
}

int sn_send(sn_sched_t *sched, sn_pid_t to, sn_payload_t **msg)
{
    return message(sched, to, SN_PID_NONE, 0, msg, false);
}

int sn__send_down(sn_sched_t *sched, sn_pid_t watcher, sn_pid_t target, uint64_t tag, int error, sn_payload_t **reason)
{
    int rc = sn__deliver(sched, watcher, SN_EV_DOWN, error, tag, target, reason, false);
    if (rc != 0 && reason)
        sn_payload_destroy(reason);
    return rc;
}

void sn__monitor(sn_sched_t *sched, sn_pid_t target, sn_pid_t watcher, uint64_t tag)
{
    int rc = SN_ENOPROC;
    /* A process of another node is watched here only if it moved here
     * (sending the request home would send it back here: a loop) */
    bool here = target.node == sched->node_id || (atomic_load_explicit(&sched->migrated_in, memory_order_relaxed) > 0 &&
                                                  sn__migrate_here(sched, target));
    if (!here) {
        uint32_t via = sn__forward_of(sched, target); /* it moved on from here: so does the monitor */
        const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
        rc = hk && hk->h.deliver ? hk->h.deliver(hk->h.arg, target, watcher, tag, SN_RELAY_MONITOR, 0, via, NULL)
                                 : SN_EUNREACHABLE;
    } else {
        sn__monitor_t *m = malloc(sizeof *m);
        if (!m) {
            rc = SN_ENOMEM;
        } else {
            *m = (sn__monitor_t){NULL, watcher, tag};
            sn__shard_t *s = sn__ptable_shard(&sched->table, target.serial);
            sn__shard_lock(s);
            sn__proc_t *p = sn__shard_find(s, target);
            if (p) { /* in the table: not complete yet, its DOWN will come */
                m->next = p->monitors;
                p->monitors = m;
                rc = 0;
            }
            sn__shard_unlock(s);
            if (rc != 0)
                free(m);
        }
        uint32_t via = rc == SN_ENOPROC ? sn__forward_of(sched, target) : 0;
        const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
        if (via && hk && hk->h.deliver) /* it moved on from here: so does the monitor */
            rc = hk->h.deliver(hk->h.arg, target, watcher, tag, SN_RELAY_MONITOR, 0, via, NULL);
    }
    if (rc != 0) /* the DOWN at once: no such process, or no way to watch it */
        sn__send_down(sched, watcher, target, tag, rc, NULL);
}

void sn__demonitor(sn_sched_t *sched, sn_pid_t target, sn_pid_t watcher, uint64_t tag)
{
    if (target.node != sched->node_id) {
        const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
        if (hk && hk->h.deliver)
            hk->h.deliver(hk->h.arg, target, watcher, tag, SN_RELAY_DEMONITOR, 0, 0, NULL);
        return;
    }
    sn__shard_t *s = sn__ptable_shard(&sched->table, target.serial);
    sn__monitor_t *gone = NULL;
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, target);
    for (sn__monitor_t **mp = p ? &p->monitors : NULL; mp && *mp; mp = &(*mp)->next)
        if (sn_pid_eq((*mp)->watcher, watcher) && (*mp)->tag == tag) {
            gone = *mp;
            *mp = gone->next;
            break;
        }
    sn__shard_unlock(s);
    free(gone);
}

int sn__send_failed(sn_sched_t *sched, sn_pid_t sender, sn_pid_t target, uint64_t tag, int error, sn_payload_t **msg)
{
    return sn__deliver(sched, sender, SN_EV_YIELD_COMPLETE, error, tag, target, msg, false);
}

bool sn__throttle(sn_sched_t *sched, sn_pid_t pid)
{
    if (atomic_load_explicit(&sched->shutting_down, memory_order_acquire))
        return false;
    sn__shard_t *s = sn__ptable_shard(&sched->table, pid.serial);
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, pid);
    bool asked = false;
    if (p) {
        uint32_t k = atomic_load_explicit(&p->killed, memory_order_relaxed);
        /* (a loop: a worker may turn nothing else of the word meanwhile, a killer under this lock neither) */
        while (!(k & SN__THR_BITS) &&
               !(asked = atomic_compare_exchange_weak_explicit(&p->killed, &k, k | SN__THR_ASKED, memory_order_acq_rel,
                                                               memory_order_relaxed)))
            ;
    }
    sn__shard_unlock(s);
    return asked;
}

void sn__unthrottle(sn_sched_t *sched, sn_pid_t pid)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, pid.serial);
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, pid);
    /* acq_rel: a HELD one was handed over by the worker's release (sn__run) */
    bool held = p && (atomic_fetch_and_explicit(&p->killed, ~SN__THR_BITS, memory_order_acq_rel) & SN__THR_HELD) != 0;
    sn__shard_unlock(s);
    /* A held process is Ready and in no queue: nobody else queues it (a
     * waker sees Ready), so it stays alive and is ours to schedule, out of
     * the shard lock (the guest may run it here: sn__schedule). */
    if (held)
        sn__schedule(sched, p, false);
}

int sn_cancel(sn_sched_t *sched, sn_pid_t pid)
{
    return sn__deliver(sched, pid, SN_EV_CANCEL, 0, 0, SN_PID_NONE, NULL, false);
}

int sn_complete_yield(sn_sched_t *sched, sn_pid_t pid, uint64_t tag, int error, sn_payload_t **result)
{
    int rc = sn__deliver(sched, pid, SN_EV_YIELD_COMPLETE, error, tag, SN_PID_NONE, result, true);
    if (rc != 0 && result)
        sn_payload_destroy(result);
    return rc;
}

/* ------------------------------------------------------------ lifecycle */

static size_t pclass(size_t size)
{
    return (size + 15) / 16 - 1;
}

sn__proc_t *sn__proc_alloc(sn__worker_t *w, size_t size)
{
    size_t c = pclass(size);
    if (w && c < SN__PCACHE_CLASSES && w->pcache[c]) {
        void *b = w->pcache[c];
        w->pcache[c] = *(void **)b;
        w->pcache_n[c]--;
        memset(b, 0, (c + 1) * 16);
        return b;
    }
    return calloc(1, c < SN__PCACHE_CLASSES ? (c + 1) * 16 : size);
}

void sn__proc_free(sn__worker_t *w, sn__proc_t *p, size_t size)
{
    size_t c = pclass(size);
    if (w && c < SN__PCACHE_CLASSES && w->pcache_n[c] < SN__PCACHE_MAX) {
        *(void **)p = w->pcache[c];
        w->pcache[c] = p;
        w->pcache_n[c]++;
        return;
    }
    free(p);
}

void sn__pcache_fini(sn__worker_t *w)
{
    for (int c = 0; c < SN__PCACHE_CLASSES; c++) {
        while (w->pcache[c]) {
            void *b = w->pcache[c];
            w->pcache[c] = *(void **)b;
            free(b);
        }
        w->pcache_n[c] = 0;
    }
}

size_t sn__proc_size(const sn_type_t *t)
{
    return sizeof(sn__proc_t) + ((t->state_size + 15) & ~(size_t)15);
}

static uint64_t next_serial(sn_sched_t *sched)
{
    sn__worker_t *w = sn__self_worker(sched);
    if (!w)
        return atomic_fetch_add_explicit(&sched->serial_next, 1, memory_order_relaxed);
    if (w->serial_next == w->serial_end) {
        w->serial_next = atomic_fetch_add_explicit(&sched->serial_next, SERIAL_BLOCK, memory_order_relaxed);
        w->serial_end = w->serial_next + SERIAL_BLOCK;
    }
    return w->serial_next++;
}

void sn__spawn_refusal(char *buf, size_t len, const char *type, const char *method, int err)
{
    if (!type)
        type = "(null)";
    if (!method)
        method = "";
    switch (err) {
    case SN_ENOTYPE:
        snprintf(buf, len, "unknown process type '%s'", type);
        break;
    case SN_ENOMETHOD:
        snprintf(buf, len, "process type '%s' has no method '%s'", type, method);
        break;
    case SN_ESHUTDOWN:
        snprintf(buf, len, "the scheduler is shutting down");
        break;
    case SN_ENOMEM:
        snprintf(buf, len, "out of memory spawning '%s' '%s'", type, method);
        break;
    default:
        snprintf(buf, len, "spawn refused by %s's init (method '%s'): %s", type, method, sn_strerror(err));
        break;
    }
}

/* Fails a spawn: the input freed, the reason in *reason if asked. */
static int refuse(const sn__spawn_args_t *a, sn_payload_t **in, int err, sn_payload_t **reason)
{
    sn_payload_destroy(in);
    if (reason) {
        char why[256];
        sn__spawn_refusal(why, sizeof why, a->type, a->method, err);
        *reason = sn_payload_new(SN_CT_ERROR, why, strlen(why));
    }
    return err;
}

/* A new process, inited (not in the table yet), or NULL with *rc set. */
static sn__proc_t *make(sn_sched_t *sched, const sn_type_t *t, const sn__spawn_args_t *a, sn_payload_t **in, int *rc)
{
    sn__worker_t *w = sn__self_worker(sched);
    sn__proc_t *p = sn__proc_alloc(w, sn__proc_size(t));
    if (!p) {
        *rc = SN_ENOMEM;
        return NULL;
    }
    p->pid = (sn_pid_t){sched->node_id, next_serial(sched)};
    p->parent = a->parent;
    p->type = t;
    p->sched = sched;
    p->awaited = a->awaited;
    if (a->awaited)
        p->await_tag = a->await_tag;
    else
        p->cb = a->cb;
    p->await_node = a->awaited ? sched->node_id : 0;
    atomic_init(&p->state, SN__INIT);
    atomic_init(&p->wakeups, 0);
    sn__mpsc_init(&p->q);
    *rc = t->init(p, p->user, a->method ? a->method : "", in);
    sn_payload_destroy(in);
    if (*rc != 0) {
        sn__proc_free(w, p, sn__proc_size(t));
        return NULL;
    }
    return p;
}

static int spawn_(sn_sched_t *sched, const sn__spawn_args_t *a, sn_pid_t *pid_out, sn_payload_t **reason)
{
    /* we own the input from here on, whatever happens */
    sn_payload_t *in = a->input ? sn_take(a->input) : NULL;
    if (atomic_load_explicit(&sched->shutting_down, memory_order_acquire))
        return refuse(a, &in, SN_ESHUTDOWN, reason);
    const sn_type_t *t = a->type ? sn__type_find(sched, a->type) : NULL;
    if (!t)
        return refuse(a, &in, SN_ENOTYPE, reason);
    int rc;
    sn__proc_t *p = make(sched, t, a, &in, &rc);
    if (!p)
        return refuse(a, &in, rc, reason);

    sn__shard_t *s = sn__ptable_shard(&sched->table, p->pid.serial);
    sn__shard_lock(s);
    /* Checked again under the lock: shutdown sets the flag and then takes
     * every shard lock to collect, so a process is either collected (and
     * cancelled) or refused here, never orphaned. */
    if (atomic_load_explicit(&sched->shutting_down, memory_order_seq_cst)) {
        sn__shard_unlock(s);
        if (t->close)
            t->close(p, p->user);
        sn__proc_free(sn__self_worker(sched), p, sn__proc_size(t));
        return refuse(a, &in, SN_ESHUTDOWN, reason);
    }
    sn__shard_insert(s, p);
    sn__shard_unlock(s);
    sn__worker_t *w = sn__self_worker(sched);
    if (w)
        SN__STAT_ADD(w->st.spawned, 1);
    else
        atomic_fetch_add_explicit(&sched->ext_spawned, 1, memory_order_relaxed);
    if (pid_out)
        *pid_out = p->pid;
    if (a->announce) /* before it can run: nothing of it can overtake this */
        a->announce(a->announce_arg, p->pid);
    /* release: the worker that runs it sees it initialised */
    atomic_store_explicit(&p->state, SN__READY, memory_order_release);
    sn__schedule(sched, p, false);
    return 0;
}

int sn__spawn(sn_sched_t *sched, const sn__spawn_args_t *a, sn_pid_t *pid_out, sn_payload_t **reason)
{
    bool out = outside_enter(sched);
    int rc = spawn_(sched, a, pid_out, reason);
    outside_leave(sched, out);
    return rc;
}

void sn__complete(sn_sched_t *sched, sn__worker_t *w, sn__proc_t *p, sn_status_t status, int error,
                  sn_payload_t **result)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, p->pid.serial);
    sn__shard_lock(s);
    sn__shard_remove(s, p);
    atomic_store_explicit(&p->state, SN__COMPLETE, memory_order_relaxed);
    sn__monitor_t *watchers = p->monitors; /* nobody can add one now */
    p->monitors = NULL;
    sn__shard_unlock(s);
    /* out of the table: no killer can store a reason any more */
    sn_payload_t *unused = sn__kill_reason_take(p);
    sn_payload_destroy(&unused);

    /* DOWN to every watcher: why it ended, and a copy of the reason */
    int why = status == SN_DONE ? 0 : (error ? error : SN_EFAILED);
    while (watchers) {
        sn__monitor_t *m = watchers;
        watchers = m->next;
        sn_payload_t *reason = why && result ? sn_payload_dup(*result) : NULL;
        sn__send_down(sched, m->watcher, p->pid, m->tag, why, &reason);
        free(m);
    }

    /* No producer can reach it now, and every push made under the lock is
     * fully linked: drain what is left. Messages go back to their senders
     * as noproc errors, with the payload. */
    sn__mpsc_node_t *node;
    while ((node = sn__mpsc_pop(&p->q))) {
        sn__evnode_t *e = (sn__evnode_t *)node;
        sn_payload_t *data = sn__evnode_data(e);
        if (e->type == SN_EV_MESSAGE && !sn_pid_is_none(e->from) && data) {
            sn_pid_t from = e->from;
            uint64_t tag = e->tag;
            if (e->bare) /* a shared payload's node */
                sn__evnode_free_bare(e);
            if (sn__deliver(sched, from, SN_EV_YIELD_COMPLETE, SN_ENOPROC, tag, p->pid, &data, false) != 0)
                sn_payload_destroy(&data);
        } else {
            sn__evnode_free(e);
        }
    }

    if (p->type->close)
        p->type->close(p, p->user);
    if (atomic_load_explicit(&p->killed, memory_order_relaxed) & SN__KILL_BITS) /* (set under the lock we took above) */
        sn__kill_report(sched, p, status == SN_DONE ? 0 : (error ? error : SN_EFAILED), result ? *result : NULL);

    if (p->came_from) { /* the node it came from forwards to here no more */
        const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
        if (hk && hk->h.deliver)
            hk->h.deliver(hk->h.arg, p->pid, SN_PID_NONE, 0, SN_RELAY_GONE, 0, p->came_from, NULL);
    }

    if (p->awaited == SN__AWAIT_RESULT) {
        if (sn__deliver(sched, p->parent, SN_EV_YIELD_COMPLETE, error, p->await_tag, p->pid, result, true) != 0)
            sn_payload_destroy(result);
    } else if (p->awaited == SN__AWAIT_DOWN) { /* the result itself, not a copy */
        if (sn__deliver(sched, p->parent, SN_EV_DOWN, error, p->await_tag, p->pid, result, true) != 0)
            sn_payload_destroy(result);
    } else if (p->cb) {
        p->cb->fn(sched, p->pid, status, error, result, p->cb->arg);
    }
    sn_payload_destroy(result);
    if (p->awaited == SN__AWAIT_NONE)
        free(p->cb);
    sn__proc_free(w, p, sn__proc_size(p->type));
    if (w)
        SN__STAT_ADD(w->st.completed, 1);
    else
        atomic_fetch_add_explicit(&sched->ext_completed, 1, memory_order_relaxed);
}

int sn_spawn(sn_sched_t *sched, const char *type, const char *method, sn_payload_t **input, sn_result_fn on_result,
             void *arg, sn_pid_t *pid_out)
{
    sn__waiter_t *cb = NULL;
    if (on_result) {
        cb = malloc(sizeof *cb);
        if (!cb)
            return SN_ENOMEM;
        *cb = (sn__waiter_t){on_result, arg};
    }
    sn__spawn_args_t a = {.type = type, .method = method, .input = input, .parent = SN_PID_NONE, .cb = cb};
    int rc = sn__spawn(sched, &a, pid_out, NULL);
    if (rc != 0)
        free(cb);
    return rc;
}

/* sn_call: the waiting thread and the result callback share this; the
 * last of the two to let go frees it (so a timed-out call is safe). */
typedef struct call {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    bool done;
    int error;
    sn_status_t status;
    sn_payload_t *result;
} call_t;

static void call_release(call_t *c)
{
    pthread_mutex_lock(&c->mu);
    int left = --c->refs;
    pthread_mutex_unlock(&c->mu);
    if (left == 0) {
        sn_payload_destroy(&c->result);
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
    }
}

static void call_done(sn_sched_t *sched, sn_pid_t pid, sn_status_t status, int error, sn_payload_t **result, void *arg)
{
    (void)sched;
    (void)pid;
    call_t *c = arg;
    pthread_mutex_lock(&c->mu);
    c->done = true;
    c->status = status;
    c->error = error;
    c->result = sn_take(result);
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    call_release(c);
}

int sn_call(sn_sched_t *sched, const char *type, const char *method, sn_payload_t **input, int timeout_ms,
            sn_payload_t **result)
{
    if (result)
        *result = NULL;
    call_t *c = calloc(1, sizeof *c);
    if (!c)
        return SN_ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->refs = 2;
    int rc = sn_spawn(sched, type, method, input, call_done, c, NULL);
    if (rc != 0) {
        c->refs = 1;
        call_release(c);
        return rc;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout_ms >= 0) {
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&c->mu);
    while (!c->done) {
        if (timeout_ms < 0)
            pthread_cond_wait(&c->cv, &c->mu);
        else if (pthread_cond_timedwait(&c->cv, &c->mu, &deadline) == ETIMEDOUT)
            break;
    }
    if (c->done) {
        rc = c->status == SN_DONE ? 0 : c->error;
        if (result)
            *result = sn_take(&c->result);
    } else {
        rc = SN_ETIMEDOUT;
    }
    pthread_mutex_unlock(&c->mu);
    call_release(c);
    return rc;
}

/* --------------------------------------------------------------- object */

sn_pid_t sn_ctx_self(const sn_ctx_t *ctx)
{
    return ctx->pid;
}
sn_pid_t sn_ctx_parent(const sn_ctx_t *ctx)
{
    return ctx->parent;
}
sn_sched_t *sn_ctx_sched(const sn_ctx_t *ctx)
{
    return ctx->sched;
}

void sn__sched_set_relay(sn_sched_t *sched, const sn_relay_hooks_t *relay)
{
    sn__hooks_t *hk = calloc(1, sizeof *hk);
    if (!hk)
        return;
    if (relay)
        hk->h = *relay;
    pthread_mutex_lock(&sched->reg_mu);
    hk->older = atomic_load_explicit(&sched->relay, memory_order_relaxed);
    /* release: a worker that loads the pointer sees the hooks filled in */
    atomic_store_explicit(&sched->relay, hk, memory_order_release);
    pthread_mutex_unlock(&sched->reg_mu);
}

void sn__sched_watch_load(sn_sched_t *sched)
{
    atomic_store_explicit(&sched->load_watch, 1, memory_order_seq_cst);
    sn__fence(sched); /* before the caller reads the queue sizes (load_news in worker.c) */
}

int sn_sched_workers(const sn_sched_t *sched)
{
    return sched->nworkers;
}
uint32_t sn_sched_node_id(const sn_sched_t *sched)
{
    return sched->node_id;
}

void sn__sched_set_node_id(sn_sched_t *sched, uint32_t node_id)
{
    sched->node_id = node_id ? node_id : 1;
}

static uint64_t ld(_Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

void sn_sched_stats(sn_sched_t *sched, sn_stats_t *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < sched->nworkers; i++) {
        sn__wstats_t *st = &sched->workers[i].st;
        out->spawned += ld(&st->spawned);
        out->completed += ld(&st->completed);
        out->steps += ld(&st->steps);
        out->messages += ld(&st->messages);
        out->steals += ld(&st->steals);
        out->stolen += ld(&st->stolen);
        out->parks += ld(&st->parks);
        out->noproc += ld(&st->noproc);
        out->remote_out += ld(&st->remote_out);
    }
    sn__guest_stats(sched, out);
    out->spawned += ld(&sched->ext_spawned);
    out->completed += ld(&sched->ext_completed);
    out->messages += ld(&sched->ext_messages);
    out->noproc += ld(&sched->ext_noproc);
    out->remote_out += ld(&sched->ext_remote_out);
    uint64_t in = atomic_load_explicit(&sched->migrated_in, memory_order_relaxed),
             gone = atomic_load_explicit(&sched->migrated_out, memory_order_relaxed);
    out->migrated_in = in;
    out->migrated_out = gone;
    out->live = out->spawned + in >= out->completed + gone ? out->spawned + in - out->completed - gone : 0;
    for (int i = 0; i < sched->nworkers; i++) {
        int64_t n = sn__deque_size(&sched->workers[i].deque);
        out->ready += n > 0 ? (uint64_t)n : 0;
    }
    out->ready += sn__gqueue_size(&sched->global);
    int64_t b = atomic_load_explicit(&sched->nblocked, memory_order_relaxed);
    out->blocked = b > 0 ? (uint64_t)b : 0;
    uint64_t busy = out->ready + out->blocked;
    out->idle = out->live > busy ? out->live - busy : 0;
    int parked = atomic_load_explicit(&sched->nparked, memory_order_relaxed);
    out->idle_workers = parked > 0 ? (uint32_t)parked : 0;
}

void sn__sched_time_steps(sn_sched_t *sched, bool on)
{
    atomic_store_explicit(&sched->time_steps, on, memory_order_relaxed);
}

void sn__sched_step_hist(sn_sched_t *sched, uint64_t *counts, uint64_t *sum_ns)
{
    for (int i = 0; i < sched->nworkers; i++)
        sn__hist_read(&sched->workers[i].step_hist, counts, sum_ns);
    if (sched->guest)
        sn__hist_read(&sched->guest->step_hist, counts, sum_ns);
}

static uint64_t live_count(sn_sched_t *sched)
{
    uint64_t n = 0;
    for (int i = 0; i < SN__SHARDS; i++) {
        sn__shard_t *s = &sched->table.shards[i];
        sn__shard_lock(s);
        n += s->count;
        sn__shard_unlock(s);
    }
    return n;
}

sn_sched_t *sn_sched_new(const sn_sched_config_t *config)
{
    sn_sched_config_t cfg = {1, 0, 1};
    if (config)
        cfg = *config;
    if (cfg.node_id == 0)
        cfg.node_id = 1;
    if (cfg.first_serial == 0)
        cfg.first_serial = 1;
    if (cfg.workers <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cfg.workers = n > 0 ? (int)n : 1;
    }
    if (cfg.workers > 1024)
        return NULL;

    sn_sched_t *sched = calloc(1, sizeof *sched);
    if (!sched)
        return NULL;
    sched->node_id = cfg.node_id;
    sched->nworkers = cfg.workers;
    atomic_init(&sched->serial_next, cfg.first_serial);
    pthread_mutex_init(&sched->park_mu, NULL);
    pthread_condattr_t ca; /* worker.c's timed park counts on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sched->park_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&sched->reg_mu, NULL);
    pthread_mutex_init(&sched->fwd.mu, NULL);
    if (sn__gqueue_init(&sched->global) != 0 || sn__ptable_init(&sched->table) != 0)
        goto fail;
    sched->workers = aligned_alloc(64, sizeof(sn__worker_t) * (size_t)cfg.workers);
    if (!sched->workers)
        goto fail;
    memset(sched->workers, 0, sizeof(sn__worker_t) * (size_t)cfg.workers);
    for (int i = 0; i < cfg.workers; i++) {
        sn__worker_t *w = &sched->workers[i];
        w->sched = sched;
        w->index = i;
        w->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) ^ (uint64_t)(uintptr_t)sched;
        if (w->rng == 0)
            w->rng = 1;
        w->events_cap = 128;
        w->events = malloc(w->events_cap * sizeof *w->events);
        if (!w->events || sn__deque_init(&w->deque, 256) != 0)
            goto fail; /* nothing started yet: fini below copes with partial */
        atomic_init(&w->next, NULL);
    }
    if (sn__guest_init(sched) != 0 || sn__timer_start(sched) != 0)
        goto fail;
    for (int i = 0; i < cfg.workers; i++) {
        if (pthread_create(&sched->workers[i].thread, NULL, sn__worker_main, &sched->workers[i]) != 0) {
            /* stop what started, then free */
            atomic_store(&sched->stop, true);
            sn__wake_all(sched);
            for (int j = 0; j < i; j++)
                pthread_join(sched->workers[j].thread, NULL);
            sn__timer_stop(sched);
            goto fail;
        }
    }
    return sched;
fail:
    sn__guest_fini(sched);
    sn__timer_fini(sched);
    if (sched->workers) {
        for (int i = 0; i < cfg.workers; i++) {
            free(sched->workers[i].events);
            if (atomic_load(&sched->workers[i].deque.ring))
                sn__deque_fini(&sched->workers[i].deque);
        }
        free(sched->workers);
    }
    sn__ptable_fini(&sched->table);
    if (sched->global.ring)
        sn__gqueue_fini(&sched->global);
    free(sched);
    return NULL;
}

/* Collects every process in the table (caller frees the array). With
 * `pids`, their PIDs (read under the shard locks: the processes may finish
 * and be freed as soon as a lock is released); otherwise the processes
 * themselves, which is only safe once the workers have stopped. */
static void *collect(sn_sched_t *sched, bool pids, size_t *n_out)
{
    size_t n = 0, cap = 0, size = pids ? sizeof(sn_pid_t) : sizeof(sn__proc_t *);
    unsigned char *all = NULL;
    for (int i = 0; i < SN__SHARDS; i++) {
        sn__shard_t *s = &sched->table.shards[i];
        sn__shard_lock(s);
        if (n + s->count > cap) {
            size_t nc = (n + s->count) * 2 + 16;
            unsigned char *a;
            while (!(a = malloc(nc * size))) /* every process must be seen: wait for memory */
                sched_yield();
            if (n)
                memcpy(a, all, n * size);
            free(all);
            all = a;
            cap = nc;
        }
        for (size_t b = 0; b < s->nbuckets; b++)
            for (sn__proc_t *p = s->buckets[b]; p; p = p->hnext, n++) {
                if (pids)
                    memcpy(all + n * size, &p->pid, size);
                else
                    memcpy(all + n * size, &p, size);
            }
        sn__shard_unlock(s);
    }
    *n_out = n;
    return all;
}

int sn_sched_shutdown(sn_sched_t *sched, int timeout_ms)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&sched->shutdown_done, &expect, 1))
        return 0;
    atomic_store_explicit(&sched->shutting_down, true, memory_order_release);

    /* 1. CANCEL to every live process (PIDs first: posting takes locks). */
    size_t n = 0;
    sn_pid_t *pids = collect(sched, true, &n);
    for (size_t i = 0; i < n; i++) {
        (void)sn_cancel(sched, pids[i]);
        sn__unthrottle(sched, pids[i]); /* (one held by backpressure runs its CANCEL too) */
    }
    free(pids);

    /* 2. Bounded wait for them to finish. */
    uint64_t deadline = sn__now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
    while (live_count(sched) > 0 && sn__now_ns() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }

    /* 3. Stop workers (each finishes the step it is in), then the timer:
     * in that order, since steps may still add timers. */
    atomic_store_explicit(&sched->stop, true, memory_order_release);
    sn__wake_all(sched);
    for (int i = 0; i < sched->nworkers; i++)
        pthread_join(sched->workers[i].thread, NULL);
    sn__guest_quiesce(sched); /* and the relay's I/O thread runs none from now on */
    sn__timer_stop(sched);

    /* 4. Force-close the rest; awaiters learn they were killed. */
    int forced = 0;
    sn__proc_t **all = collect(sched, false, &n);
    for (size_t i = 0; i < n; i++) {
        sn_payload_t *why = sn_payload_text("killed: still running when the shutdown timeout expired");
        sn__complete(sched, NULL, all[i], SN_FAIL, SN_EKILLED, &why);
        forced++;
    }
    free(all);
    return forced;
}

void sn_sched_destroy(sn_sched_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sn_sched_t *sched = *self_p;
    sn_sched_shutdown(sched, 2000);
    /* calls from other threads still on their way out (see outside_enter) */
    while (atomic_load_explicit(&sched->outside, memory_order_acquire) != 0)
        sched_yield();
    for (int i = 0; i < sched->nworkers; i++) {
        sn__worker_t *w = &sched->workers[i];
        sn__deque_fini(&w->deque);
        free(w->events);
        sn__out_fini(&w->out);
        sn__pcache_fini(w);
    }
    free(sched->workers);
    sn__guest_fini(sched);
    sn__gqueue_fini(&sched->global);
    sn__ptable_fini(&sched->table);
    sn__registry_fini(sched);
    sn__timer_fini(sched);
    for (sn__hooks_t *hk = atomic_load(&sched->relay); hk;) {
        sn__hooks_t *older = hk->older;
        free(hk);
        hk = older;
    }
    pthread_mutex_destroy(&sched->park_mu);
    pthread_cond_destroy(&sched->park_cv);
    pthread_mutex_destroy(&sched->reg_mu);
    pthread_mutex_destroy(&sched->fwd.mu);
    for (size_t i = 0; i < sched->fwd.cap; i++)
        if (sched->fwd.entries[i].node)
            free(sched->fwd.entries[i].more);
    free(sched->fwd.entries);
    free(sched);
    *self_p = NULL;
}

/* migrate.c - moving processes between nodes (cross-node stealing of
 * Ready ones; migrate and drain of Idle ones by PID): the scheduler's half
 * of the handover. The relay runs the protocol
 * (offer, accept, commit) and calls these; see sn_node.h.
 *
 * Ownership, which is what makes the handover exactly-once:
 * - sn__migrate_take pops a process from a run queue (so nobody else holds
 *   it) and CASes it Ready -> Migrating: frozen, out of every run queue,
 *   still in the PID table, so events keep queueing in its MPSC queue.
 * - Until commit or revert the caller owns it; no worker can run it.
 * - sn__migrate_commit takes it out of the PID table under the shard lock,
 *   puts a forwarding entry in its place under the same lock, and drains
 *   its queue there: a producer either pushed before (the event is in the
 *   drained list, sent in the commit) or finds the forwarding entry after
 *   (its event is relayed to the new owner after the commit). The process
 *   then exists on this node no more.
 * - On the new owner, sn__migrate_install builds a frozen copy outside the
 *   PID table (unreachable: nothing runs it, nothing can send to it);
 *   sn__migrate_activate queues the commit's events first, then enters the
 *   table and makes it Ready. Between the two nodes the process is
 *   runnable in at most one place at any instant.
 *
 * A process whose only pending yields are sleeps moves with them: the
 * holder of the frozen process takes their timer entries out of this
 * node's heap (sn__timer_take, under the timer's lock, refused while the
 * timer thread delivers one of them: timer.c says who owns a sleep when)
 * into the migrant, with their deadlines; a revert arms them again here,
 * due when they were; the new owner arms them in activate, after the
 * process entered its table, so that each completes once, there, when
 * due (the wire carries the time left). test_migrate sleeping_moves.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Why p cannot move, or NULL if it can: its type can marshal, no C
 * callback is tied to this node, it never monitored another process
 * (tests/chaos.sh upgrade: the watcher), no monitor
 * (unless monitors_go: a move by PID, whose commit passes each monitor on
 * to the new node, sn__migrate_commit; a named process moves so: its
 * name's owner monitors it, tests/names.sh), and the caller takes its
 * type. Its pending yields are looked at once it is frozen (take_sleeps):
 * sleeps move, nothing else does. */
static const char *unmovable(const sn__proc_t *p, bool (*accept)(void *, const sn_type_t *), void *arg,
                             bool monitors_go)
{
    if (!p->type->marshal || !p->type->unmarshal)
        return "its type has no marshal and unmarshal";
    if (p->awaited == SN__AWAIT_NONE && p->cb)
        return "a C callback on this node awaits its result";
    if (p->monitors && !monitors_go)
        return "it is monitored";
    if (p->watches)
        return "it monitors other processes (their DOWNs would not follow it)";
    if (atomic_load_explicit(&p->killed, memory_order_relaxed) & SN__KILL_BITS)
        return "it is being killed";
    if (accept && !accept(arg, p->type))
        return "the other node does not take its type";
    return NULL;
}

/* A process moves on only once its arrival here has settled (the flush
 * of the paths its senders here used ended, relay/locate.c). Moved on
 * before, the relay here would hold what other nodes sent it until that
 * flush ends, while the flush's marker, following the process, waits at
 * its next node for that node's own arrival flush, whose marker may have
 * to pass here: a wait in a circle, broken only by the 15 s give-up,
 * which may reorder (tests/chaos.sh: sinks stolen three times in 150 ms).
 * Not a reason it cannot move: a move by PID waits for it. */
static bool settling(const sn__proc_t *p)
{
    return atomic_load_explicit(&p->settling, memory_order_relaxed) != 0;
}

static bool movable(const sn__proc_t *p, bool (*accept)(void *, const sn_type_t *), void *arg)
{
    return unmovable(p, accept, arg, false) == NULL;
}

/* The sleeps of p, frozen by the caller, into m (m->nsleeps of them, out
 * of this node's timer): 0 (none pending is 0 too, with no look at the
 * timer: the cost of a move without sleeps is unchanged), SN__MOVE_BUSY,
 * or SN_ENOTMOVABLE with *why (sn__timer_take). */
static int take_sleeps(sn_sched_t *sched, const sn__proc_t *p, sn_migrant_t *m, const char **why)
{
    m->nsleeps = 0;
    if (p->pending == 0)
        return 0;
    int rc = sn__timer_take(sched, p->pid, p->pending, m->sleeps, SN_MIGRANT_SLEEPS, why);
    if (rc == 0)
        m->nsleeps = (uint8_t)p->pending;
    return rc;
}

/* Arms sleeps for p (its pending yields): each completes at its deadline,
 * or, if this node's timer cannot take it (shutting down, out of memory),
 * at once with that error, as a sleep yield that failed does. Caller holds
 * p's shard lock and p is in the table, unreachable or frozen. */
static void arm_sleeps(sn_sched_t *sched, sn__proc_t *p, const sn_migrant_sleep_t *sleeps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = sn__timer_add_at(sched, sleeps[i].deadline_ns, p->pid, sleeps[i].tag);
        if (rc == 0)
            continue;
        sn__evnode_t *e;
        while (!(e = sn__evnode_make(SN_EV_YIELD_COMPLETE, rc, sleeps[i].tag, SN_PID_NONE, NULL, true)))
            sched_yield(); /* (dropping it would leave the process waiting for ever) */
        atomic_fetch_add_explicit(&p->wakeups, 1, memory_order_relaxed);
        SN__STAT_ADD(p->pushed, 1);
        sn__mpsc_push(&p->q, &e->link);
    }
}

static void migrant_of(sn__proc_t *p, sn_payload_t *state, sn_migrant_t *m)
{
    /* (m's sleeps are take_sleeps', kept) */
    sn_migrant_sleep_t sleeps[SN_MIGRANT_SLEEPS];
    uint8_t nsleeps = m->nsleeps;
    memcpy(sleeps, m->sleeps, nsleeps * sizeof *sleeps);
    *m = (sn_migrant_t){.pid = p->pid,
                        .parent = p->parent,
                        .awaited = p->awaited,
                        .fresh = !p->stepped,
                        .idle = p->wait_status == SN__IDLE,
                        .blocked = p->wait_status == SN__BLOCKED,
                        .nsleeps = nsleeps,
                        .await_tag = p->awaited != SN__AWAIT_NONE ? p->await_tag : 0,
                        .await_node = p->await_node,
                        .type = p->type->name,
                        .type_version = p->type->version,
                        .state = state,
                        .handle = p,
                        .moves = p->moves + 1};
    memcpy(m->sleeps, sleeps, nsleeps * sizeof *sleeps);
}

/* p, frozen, is Ready again, with m's sleeps armed again here, due when
 * they were; the caller queues it. */
static void unfreeze(sn_sched_t *sched, sn__proc_t *p, sn_migrant_t *m)
{
    if (m->nsleeps) {
        sn__shard_t *s = sn__ptable_shard(&sched->table, p->pid.serial);
        sn__shard_lock(s);
        arm_sleeps(sched, p, m->sleeps, m->nsleeps);
        sn__shard_unlock(s);
        m->nsleeps = 0;
    }
    /* release: the worker that runs it again sees it as we left it */
    atomic_store_explicit(&p->state, SN__READY, memory_order_release);
}

/* One candidate popped from a run queue: freeze and marshal it into *m
 * (true), or leave it for the caller to put back (false). A process with
 * pending yields costs a look through the timer's heap (take_sleeps):
 * *looks bounds how many a take makes; past it they are passed over.
 * Ready, it may have a sleep's completion queued or coming: one the timer
 * still holds is refused (busy), one it delivered is counted in pending
 * and in no heap entry, so the counts differ and it stays here too. */
static bool consider(sn_sched_t *sched, sn__proc_t *p, bool (*accept)(void *, const sn_type_t *), void *arg,
                     sn_migrant_t *m, int *looks)
{
    uint32_t expect = SN__READY;
    if (settling(p) || !movable(p, accept, arg) || (p->pending && *looks <= 0) ||
        !atomic_compare_exchange_strong_explicit(&p->state, &expect, SN__MIGRATING, memory_order_acq_rel,
                                                 memory_order_acquire))
        return false;
    const char *why;
    *looks -= p->pending != 0;
    if (take_sleeps(sched, p, m, &why) != 0) {
        atomic_store_explicit(&p->state, SN__READY, memory_order_release);
        return false;
    }
    sn_payload_t *state = NULL;
    if (p->type->marshal(p, p->user, &state) != 0 || !state) {
        sn_payload_destroy(&state);
        unfreeze(sched, p, m); /* (queued again by our caller) */
        return false;
    }
    migrant_of(p, state, m);
    return true;
}

/* An Idle or Blocked process is in no run queue and no worker holds it,
 * so the CAS Idle or Blocked -> Migrating (under the shard lock, so it
 * cannot end meanwhile) makes the caller its only holder, as a pop does
 * for a Ready one; producers that push after it see Migrating and wake
 * nobody (sn__wake), their events wait in its queue and ride along with
 * the commit. What movable() reads is the last step's, which the acquire
 * CAS makes visible. Its sleeps are taken under the same shard lock: a
 * completion the timer delivered (took the lock, pushed, let go) before
 * that lock was ours woke it, and the CAS failed; one it delivers after
 * is one it still holds (refused: busy), so the pending count matches the
 * heap's entries unless a yield other than a sleep is pending. A process
 * that cannot move after all is reverted: Ready and queued with its
 * wait_status, so a worker steps it only if an event came meanwhile,
 * else it sleeps again (worker.c, sn__run). Guarded by test_migrate
 * freeze_idle, sleeping_moves and migrate.sh. */
int sn__migrate_freeze(sn_sched_t *sched, sn_pid_t pid, sn_migrant_t *m, const char **why)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, pid.serial);
    *why = NULL;
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, pid);
    if (!p) {
        sn__shard_unlock(s);
        return SN_ENOPROC;
    }
    if (!p->type->marshal || !p->type->unmarshal) { /* (immutable: no need to wait for it) */
        sn__shard_unlock(s);
        *why = "its type has no marshal and unmarshal";
        return SN_ENOTMOVABLE;
    }
    if (settling(p)) { /* (it settles within a round trip, or the 15 s give-up) */
        sn__shard_unlock(s);
        return SN__MOVE_BUSY;
    }
    uint32_t expect = atomic_load_explicit(&p->state, memory_order_relaxed) == SN__BLOCKED ? SN__BLOCKED : SN__IDLE;
    /* acq_rel: we take it out of its sleep, seeing its last step's writes */
    bool took = atomic_compare_exchange_strong_explicit(&p->state, &expect, SN__MIGRATING, memory_order_acq_rel,
                                                        memory_order_relaxed);
    if (took && expect == SN__BLOCKED) /* (counted again when it blocks again: a revert) */
        atomic_fetch_sub_explicit(&sched->nblocked, 1, memory_order_relaxed);
    m->nsleeps = 0;
    *why = took ? unmovable(p, NULL, NULL, true) : NULL;
    int rc = took && !*why ? take_sleeps(sched, p, m, why) : 0;
    sn__shard_unlock(s);
    if (!took)
        return SN__MOVE_BUSY;
    sn_payload_t *state = NULL;
    if (rc == 0 && !*why && (p->type->marshal(p, p->user, &state) != 0 || !state))
        *why = "its marshal failed";
    if (rc != 0 || *why) {
        sn_payload_destroy(&state);
        m->handle = p;
        sn__migrate_revert(sched, m);
        return rc == SN__MOVE_BUSY ? SN__MOVE_BUSY : SN_ENOTMOVABLE;
    }
    migrant_of(p, state, m);
    return 0;
}

size_t sn__migrate_take(sn_sched_t *sched, size_t max, bool (*accept)(void *arg, const sn_type_t *type), void *arg,
                        sn_migrant_t *out)
{
    size_t n = 0;
    /* What we popped and cannot take goes back after the search, not
     * during it (we would find it again). A bounded look: the global queue
     * as long as it was, then one steal from each deque. */
    enum { LOOK = 256, SLEEP_LOOKS = 8 };
    void *back[LOOK + SN__STEAL_MAX];
    size_t nback = 0;
    int looks = SLEEP_LOOKS; /* processes with pending yields looked at (consider) */
    /* oldest work first: the global queue, then the top of every deque */
    for (size_t left = sn__gqueue_size(&sched->global); left > 0 && n < max && nback < LOOK; left--) {
        void *item;
        if (sn__gqueue_pop(&sched->global, &item, 1) == 0)
            break;
        if (consider(sched, item, accept, arg, &out[n], &looks))
            n++;
        else
            back[nback++] = item;
    }
    for (int i = 0; i < sched->nworkers && n < max && nback < LOOK; i++) {
        void *items[SN__STEAL_MAX];
        int got = 0;
        size_t want = max - n;
        sn__deque_steal_half(&sched->workers[i].deque, items, want < SN__STEAL_MAX ? (int)want : SN__STEAL_MAX, &got);
        for (int k = 0; k < got; k++)
            if (n < max && consider(sched, items[k], accept, arg, &out[n], &looks))
                n++;
            else
                back[nback++] = items[k];
    }
    for (size_t i = 0; i < nback; i++) /* they run here, as they were */
        sn__schedule(sched, back[i], false);
    return n;
}

void sn__migrate_revert(sn_sched_t *sched, sn_migrant_t *m)
{
    sn__proc_t *p = m->handle;
    sn_payload_destroy(&m->state);
    unfreeze(sched, p, m);
    sn__schedule(sched, p, false);
}

/* ------------------------------------------------------------ forwarding */

static size_t fwd_slot(const sn__fwd_t *f, sn_pid_t pid)
{
    uint64_t h = (pid.serial ^ ((uint64_t)pid.node << 32)) * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 32) & (f->cap - 1);
}

/* The slot for pid: its entry, or the empty slot that ends its probe run. */
static size_t fwd_probe(const sn__fwd_t *f, sn_pid_t pid)
{
    size_t i = fwd_slot(f, pid);
    while (f->entries[i].node && !sn_pid_eq(f->entries[i].pid, pid))
        i = (i + 1) & (f->cap - 1);
    return i;
}

static uint32_t fwd_origin(const sn__fwd_entry_t *e, uint32_t k)
{
    return k == 0 ? e->origin0 : e->more[k - 1];
}

/* Adds pid -> node, with `origin` (0: none) added to its origins. An entry
 * for pid is there already when the process came back and now leaves
 * again: it points to the new place, and keeps the origins it had.
 * Caller holds f->mu. */
static int fwd_put(sn__fwd_t *f, sn_pid_t pid, uint32_t node, uint32_t origin)
{
    if ((f->count + 1) * 2 > f->cap) { /* open addressing, at most half full */
        size_t cap = f->cap ? f->cap * 2 : 64;
        sn__fwd_entry_t *e = calloc(cap, sizeof *e);
        if (!e)
            return SN_ENOMEM;
        sn__fwd_t g = {.entries = e, .cap = cap};
        for (size_t i = 0; i < f->cap; i++) /* moved whole: `more` goes with it */
            if (f->entries[i].node)
                g.entries[fwd_probe(&g, f->entries[i].pid)] = f->entries[i];
        free(f->entries);
        f->entries = e;
        f->cap = cap;
    }
    size_t i = fwd_probe(f, pid);
    sn__fwd_entry_t *e = &f->entries[i];
    if (!e->node) {
        *e = (sn__fwd_entry_t){pid, node, origin ? 1 : 0, origin, NULL};
        f->count++;
        return 0;
    }
    for (uint32_t k = 0; origin && k < e->norigins; k++)
        if (fwd_origin(e, k) == origin)
            origin = 0; /* known already */
    if (origin && e->norigins == 0) {
        e->origin0 = origin;
    } else if (origin) {
        uint32_t *more = realloc(e->more, e->norigins * sizeof *more);
        if (!more)
            return SN_ENOMEM;
        more[e->norigins - 1] = origin;
        e->more = more;
    }
    e->norigins += origin ? 1 : 0;
    e->node = node;
    return 0;
}

/* The entry for pid, or NULL. Caller holds f->mu. */
static sn__fwd_entry_t *fwd_find(sn__fwd_t *f, sn_pid_t pid)
{
    for (size_t i = f->cap ? fwd_slot(f, pid) : 0; f->cap && f->entries[i].node; i = (i + 1) & (f->cap - 1))
        if (sn_pid_eq(f->entries[i].pid, pid))
            return &f->entries[i];
    return NULL;
}

/* Empties slot i, moving later entries of its probe run back so that
 * every entry stays reachable from its home slot (linear probing without
 * tombstones). Caller holds f->mu. */
static void fwd_del(sn__fwd_t *f, size_t i)
{
    size_t mask = f->cap - 1;
    free(f->entries[i].more);
    for (size_t j = (i + 1) & mask; f->entries[j].node; j = (j + 1) & mask) {
        size_t home = fwd_slot(f, f->entries[j].pid);
        if (((j - home) & mask) >= ((j - i) & mask)) { /* i is on j's probe path: move it there */
            f->entries[i] = f->entries[j];
            i = j;
        }
    }
    f->entries[i].node = 0;
    f->entries[i].more = NULL; /* (moved, or freed above) */
    f->count--;
}

size_t sn__migrate_forwarding(sn_sched_t *sched)
{
    pthread_mutex_lock(&sched->fwd.mu);
    size_t n = sched->fwd.count;
    pthread_mutex_unlock(&sched->fwd.mu);
    return n;
}

/* Drops the entry for pid if it points to `from` (0: wherever it points),
 * first copying up to max of its origins; returns how many it had. */
static size_t fwd_drop(sn__fwd_t *f, sn_pid_t pid, uint32_t from, uint32_t *origins, size_t max)
{
    if (atomic_load_explicit(&f->live, memory_order_acquire) == 0)
        return 0; /* no entry: no lock on the common path */
    size_t n = 0;
    pthread_mutex_lock(&f->mu);
    sn__fwd_entry_t *e = fwd_find(f, pid);
    if (e && (!from || e->node == from)) {
        n = e->norigins;
        for (uint32_t k = 0; k < n && k < max; k++)
            origins[k] = fwd_origin(e, k);
        fwd_del(f, (size_t)(e - f->entries));
        /* release: pairs with the acquire in sn__forward_of */
        atomic_store_explicit(&f->live, f->count, memory_order_release);
    }
    pthread_mutex_unlock(&f->mu);
    return n;
}

size_t sn__migrate_gone(sn_sched_t *sched, sn_pid_t pid, uint32_t from, uint32_t *origins, size_t max)
{
    return fwd_drop(&sched->fwd, pid, from, origins, max); /* (an entry that points elsewhere is newer: kept) */
}

uint32_t sn__forward_of(sn_sched_t *sched, sn_pid_t pid)
{
    sn__fwd_t *f = &sched->fwd;
    if (atomic_load_explicit(&f->live, memory_order_acquire) == 0)
        return 0; /* no entry: no lock on the common path */
    pthread_mutex_lock(&f->mu);
    sn__fwd_entry_t *e = fwd_find(f, pid);
    uint32_t node = e ? e->node : 0;
    pthread_mutex_unlock(&f->mu);
    return node;
}

int sn__migrate_commit(sn_sched_t *sched, sn_migrant_t *m, uint32_t node, sn_event_t **events, size_t *nevents)
{
    sn__proc_t *p = m->handle;
    sn__shard_t *s = sn__ptable_shard(&sched->table, p->pid.serial);
    *events = NULL;
    *nevents = 0;
    size_t cap = 0;
    pthread_mutex_lock(&sched->fwd.mu);
    /* release, before the process leaves the table below: a sender that
     * then misses it there (under the shard lock) sees the entry count */
    int rc = fwd_put(&sched->fwd, p->pid, node, p->came_from);
    atomic_store_explicit(&sched->fwd.live, sched->fwd.count, memory_order_release);
    pthread_mutex_unlock(&sched->fwd.mu);
    if (rc != 0)
        return rc; /* nothing changed: the caller reverts */
    sn__shard_lock(s);
    sn__shard_remove(s, p);
    /* its monitors (a move by PID takes a monitored process; a steal
     * takes none, but one may be set while it was frozen): each follows
     * the process, behind the commit */
    sn__monitor_t *mons = p->monitors;
    p->monitors = NULL;
    /* every push so far was made under this lock and is linked; later
     * producers miss the process and find the forwarding entry */
    sn__mpsc_node_t *node_;
    while ((node_ = sn__mpsc_pop(&p->q))) {
        sn__evnode_t *e = (sn__evnode_t *)node_;
        if (*nevents == cap) {
            cap = cap ? cap * 2 : 16;
            sn_event_t *more;
            while (!(more = malloc(cap * sizeof *more))) /* out of memory here would lose events: wait */
                sched_yield();
            if (*nevents)
                memcpy(more, *events, *nevents * sizeof *more);
            free(*events);
            *events = more;
        }
        (*events)[(*nevents)++] = (sn_event_t){(sn_event_type_t)e->type, e->error, e->tag, e->from, sn__evnode_data(e)};
        if (e->bare)
            sn__evnode_free_bare(e);
    }
    sn__shard_unlock(s);
    const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
    for (sn__monitor_t *mon = mons, *next; mon; mon = next) {
        next = mon->next;
        if (!hk || !hk->h.deliver ||
            hk->h.deliver(hk->h.arg, p->pid, mon->watcher, mon->tag, SN_RELAY_MONITOR, 0, node, NULL) != 0)
            sn__send_down(sched, mon->watcher, p->pid, mon->tag, SN_ENODEDOWN, NULL);
        free(mon);
    }
    sn_payload_destroy(&m->state);
    /* Forced while frozen for this handover (the kill came after take):
     * the copy there does not carry the force, but the CANCEL that came
     * with it went along with the queued events, and `schednode kill`
     * finds the process there and forces it again. */
    sn_payload_t *killed = sn__kill_reason_take(p);
    sn_payload_destroy(&killed);
    atomic_fetch_add_explicit(&sched->migrated_out, 1, memory_order_relaxed);
    sn__proc_free(sn__self_worker(sched), p, sn__proc_size(p->type));
    m->handle = NULL;
    return 0;
}

/* ------------------------------------------------------------ new owner */

int sn__migrate_install(sn_sched_t *sched, const sn_migrant_t *m, void **handle)
{
    const sn_type_t *t = sn__type_find(sched, m->type);
    if (!t || t->version != m->type_version || !t->unmarshal)
        return SN_ENOTYPE;
    if (m->nsleeps > SN_MIGRANT_SLEEPS || (m->blocked && (m->idle || m->nsleeps == 0)))
        return SN_EINVAL; /* (Blocked on nothing would never wake) */
    sn__proc_t *p = sn__proc_alloc(sn__self_worker(sched), sn__proc_size(t));
    if (!p)
        return SN_ENOMEM;
    p->pid = m->pid;
    p->parent = m->parent;
    p->type = t;
    p->sched = sched;
    p->awaited = m->awaited;
    p->stepped = !m->fresh;
    /* (an Idle one is stepped only for an event, a Blocked one for a
     * sleep's end: sn__run) */
    p->wait_status = m->idle ? SN__IDLE : m->blocked ? SN__BLOCKED : 0;
    if (p->awaited != SN__AWAIT_NONE) /* (else the union holds cb: NULL) */
        p->await_tag = m->await_tag;
    p->await_node = m->await_node;
    p->moves = m->moves;
    atomic_init(&p->state, SN__MIGRATING);
    atomic_init(&p->wakeups, 0);
    sn__mpsc_init(&p->q);
    int rc = t->unmarshal(p, p->user, m->state);
    if (rc != 0) {
        sn__proc_free(sn__self_worker(sched), p, sn__proc_size(t));
        return rc;
    }
    *handle = p;
    return 0;
}

uint32_t sn__migrate_forward_of(sn_sched_t *sched, sn_pid_t pid)
{
    return sn__forward_of(sched, pid);
}

void sn__migrate_diverted(sn_sched_t *sched, sn_pid_t pid)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, pid.serial);
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, pid);
    if (p && p->diverted)
        p->diverted--;
    sn__shard_unlock(s);
}

bool sn__migrate_here(sn_sched_t *sched, sn_pid_t pid)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, pid.serial);
    sn__shard_lock(s);
    bool here = sn__shard_find_pid(s, pid) != NULL;
    sn__shard_unlock(s);
    return here;
}

size_t sn__migrate_forget_node(sn_sched_t *sched, uint32_t node, uint32_t (*instead)(void *arg, sn_pid_t pid),
                               void *arg, size_t *repointed)
{
    sn__fwd_t *f = &sched->fwd;
    *repointed = 0;
    if (atomic_load_explicit(&f->live, memory_order_acquire) == 0)
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->cap;) {
        uint32_t to = f->entries[i].node == node && instead ? instead(arg, f->entries[i].pid) : 0;
        if (f->entries[i].node == node && to && to != node) {
            f->entries[i].node = to;
            (*repointed)++;
            i++;
        } else if (f->entries[i].node == node) {
            fwd_del(f, i); /* moves a later entry into i: look at i again */
            n++;
        } else {
            i++;
        }
    }
    /* release: pairs with the acquire in sn__forward_of */
    atomic_store_explicit(&f->live, f->count, memory_order_release);
    pthread_mutex_unlock(&f->mu);
    return n;
}

void sn__migrate_drop_forward(sn_sched_t *sched, sn_pid_t pid)
{
    fwd_drop(&sched->fwd, pid, 0, NULL, 0);
}

int sn__migrate_repoint(sn_sched_t *sched, sn_pid_t pid, uint32_t node)
{
    sn__fwd_t *f = &sched->fwd;
    pthread_mutex_lock(&f->mu);
    int rc = fwd_put(f, pid, node, 0);
    /* release: pairs with the acquire in sn__forward_of */
    atomic_store_explicit(&f->live, f->count, memory_order_release);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int sn__migrate_settled(sn_sched_t *sched, sn_pid_t pid)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, pid.serial);
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, pid);
    if (p)
        p->settling = 0;
    sn__shard_unlock(s);
    return p ? 0 : SN_ENOPROC;
}

void sn__migrate_discard(sn_sched_t *sched, void *handle)
{
    sn__proc_t *p = handle;
    if (p->type->close)
        p->type->close(p, p->user);
    sn__proc_free(sn__self_worker(sched), p, sn__proc_size(p->type));
}

int sn__migrate_activate(sn_sched_t *sched, void *handle, sn_event_t *events, size_t n, uint32_t from, bool settle,
                         const sn_migrant_sleep_t *sleeps, size_t nsleeps)
{
    sn__proc_t *p = handle;
    sn__shard_t *s = sn__ptable_shard(&sched->table, p->pid.serial);
    sn__shard_lock(s);
    if (sn__shard_find_pid(s, p->pid)) { /* a duplicate PID would be a protocol bug: refuse it */
        sn__shard_unlock(s);
        return SN_EEXIST; /* the events are still the caller's */
    }
    /* the events that waited for it on the old owner, in order, before any
     * that reach it here (it is not reachable yet: nothing else pushes) */
    for (size_t i = 0; i < n; i++) {
        sn__evnode_t *e = sn__evnode_make((uint8_t)events[i].type, events[i].error, events[i].tag, events[i].from,
                                          events[i].data, false);
        while (!e) /* as above: dropping one would lose it */
            e = sn__evnode_make((uint8_t)events[i].type, events[i].error, events[i].tag, events[i].from, events[i].data,
                                false);
        events[i].data = NULL;
        if (!sn__message_class(e->type))
            atomic_fetch_add_explicit(&p->wakeups, 1, memory_order_relaxed);
        SN__STAT_ADD(p->pushed, 1); /* (under the shard lock) */
        sn__mpsc_push(&p->q, &e->link);
    }
    p->settling = settle; /* before it is reachable: under the lock, with the insert */
    p->came_from = from;
    sn__shard_insert(s, p);
    /* in the table (a completion finds it), still frozen (it wakes
     * nobody): each sleep completes here, once, when due */
    p->pending = (uint32_t)nsleeps;
    arm_sleeps(sched, p, sleeps, nsleeps);
    sn__shard_unlock(s);
    atomic_fetch_add_explicit(&sched->migrated_in, 1, memory_order_relaxed);
    /* release: the worker that runs it sees it built */
    atomic_store_explicit(&p->state, SN__READY, memory_order_release);
    sn__schedule(sched, p, false);
    return 0;
}

/* ------------------------------------------------------------ sn_migrate */

/* What sn_migrate waits on: the relay's done callback fills it in and
 * signals, on the relay's thread, exactly once (sn_relay_hooks_t.migrate);
 * the waiter reads it after seeing `decided` under mu. */
typedef struct mwait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool decided; /* guarded by mu */
    int error;
    char why[256];
} mwait_t;

static void migrate_decided(void *arg, int error, uint32_t node, const char *why)
{
    mwait_t *w = arg;
    (void)node;
    pthread_mutex_lock(&w->mu);
    w->error = error;
    snprintf(w->why, sizeof w->why, "%s", why ? why : "");
    w->decided = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int sn_migrate(sn_sched_t *sched, sn_pid_t pid, uint32_t node, int timeout_ms, char *why, size_t whylen)
{
    const sn__hooks_t *hk = sched ? atomic_load_explicit(&sched->relay, memory_order_acquire) : NULL;
    int rc;
    if (whylen)
        why[0] = 0;
    if (!sched || node == 0 || sn_pid_is_none(pid))
        return SN_EINVAL;
    if (!hk || !hk->h.migrate) {
        if (whylen)
            snprintf(why, whylen, "this scheduler has no relay: it is not in a cluster");
        return SN_EUNREACHABLE;
    }
    mwait_t w = {.decided = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    hk->h.migrate(hk->h.arg, pid, node, timeout_ms, migrate_decided, &w);
    pthread_mutex_lock(&w.mu);
    while (!w.decided) /* (bounded by the relay: timeout_ms, then the handover's deadline) */
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    rc = w.error;
    if (whylen)
        snprintf(why, whylen, "%s", w.why);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return rc;
}

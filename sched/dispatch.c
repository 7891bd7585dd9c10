/* dispatch.c - yields to command handlers.
 *
 * Runs on the worker that ran the step, while it still owns the process
 * (state RUNNING), right after the step returns. Built-in commands (send,
 * send_many, spawn, sleep, terminate, monitor, demonitor) are handled here;
 * others go to handlers registered by name. A yield that counts
 * (everything but sends, monitors and SN_YIELD_NOREPLY built-ins) adds one
 * to p->pending; its completion event takes it off when drained.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Queues an event for the process we are running. It is RUNNING and ours,
 * so it cannot be freed; go_to_sleep will find the event before it lets
 * the process sleep. */
static void post_self(sn__proc_t *p, int error, uint64_t tag, sn_pid_t from, sn_payload_t **data, bool counted)
{
    sn__evnode_t *n = sn__evnode_make(SN_EV_YIELD_COMPLETE, error, tag, from, data ? *data : NULL, counted);
    if (!n) {
        /* Out of memory: a completion we cannot queue would leave the
         * process waiting forever; retry until memory comes back. */
        while (!(n = sn__evnode_make(SN_EV_YIELD_COMPLETE, error, tag, from, data ? *data : NULL, counted)))
            sched_yield();
    }
    if (data)
        *data = NULL;
    atomic_fetch_add_explicit(&p->wakeups, 1, memory_order_seq_cst);
    SN__STAT_ADD(p->self_pushed, 1); /* a display count; we run the process */
    sn__mpsc_push(&p->q, &n->link);
}

/* One message (*msg taken; NULL: an empty one, as on every other path: a
 * MESSAGE always has a payload, also when it comes back). */
static void send_one(sn_sched_t *sched, sn__proc_t *p, sn_pid_t to, uint64_t tag, sn_payload_t **msg)
{
    if (!*msg && !(*msg = sn_payload_new(SN_CT_BYTES, NULL, 0))) {
        post_self(p, SN_ENOMEM, tag, to, NULL, false);
        return;
    }
    if (to.node == sched->node_id) {
        sn__worker_t *w = sn__self_worker(sched);
        if (w && sn__send_here(w, to, p->pid, tag, msg) == 0)
            return;
    }
    int rc = sn__deliver(sched, to, SN_EV_MESSAGE, 0, tag, p->pid, msg, false);
    if (rc != 0)
        post_self(p, rc, tag, to, msg, false); /* the payload comes back */
}

static void do_send(sn_sched_t *sched, sn__proc_t *p, sn_yield_t *y)
{
    send_one(sched, p, y->target, y->tag, &y->data);
}

/* ------------------------------------------------------ coalesced sends
 * A run of consecutive send yields goes out grouped by receiver: each
 * local receiver's messages of the run, in the order sent, as one chain
 * pushed with one exchange, under one shard lock, with one wake (instead
 * of a lock, a push and a wake per message).
 *
 * Order: what is promised is per sender and receiver (guarantees.md), and
 * that holds: a group holds every message of the run to its receiver, in
 * yield order; a message that cannot join a group (a remote receiver, an
 * empty payload we cannot allocate, a node we cannot allocate, a full
 * table) flushes every group first (remote receivers never have a group,
 * so they need no flush), so nothing to a receiver overtakes what was
 * sent to it before. A group that cannot be pushed (its receiver is not
 * here, is settling or has diverted messages: sn__post_chain) goes message
 * by message as do_send would send each, in order, so each comes back as
 * its own error event with its payload, or takes the relay path. Across
 * receivers the run's messages go out in receiver order (first seen
 * first), which nothing promises either way. */

static size_t gslot_of(sn_pid_t to)
{
    uint64_t h = (to.serial ^ ((uint64_t)to.node << 40)) * UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)(h >> 57) & (SN__GROUP_SLOTS - 1);
}

/* One group that sn__post_chain refused: each message on its own. */
static void ungroup(sn_sched_t *sched, sn__proc_t *p, sn__sendgroup_t *g)
{
    for (sn__evnode_t *e = g->first, *next; e; e = next) {
        next = e == g->last ? NULL : (sn__evnode_t *)atomic_load_explicit(&e->link.next, memory_order_relaxed);
        sn_payload_t *msg = sn__evnode_data(e);
        uint64_t tag = e->tag;
        if (e->bare)
            sn__evnode_free_bare(e); /* a shared payload's node: msg is our reference */
        send_one(sched, p, g->to, tag, &msg);
    }
}

static void flush_groups(sn__worker_t *w, sn__proc_t *p)
{
    for (uint32_t i = 0; i < w->ngroups; i++) {
        sn__sendgroup_t *g = &w->groups[i];
        if (g->n > 0 && sn__post_chain(w->sched, g->to, g->first, g->last, g->n) != 0)
            ungroup(w->sched, p, g);
    }
    if (w->ngroups)
        memset(w->gslot, 0, sizeof w->gslot);
    w->ngroups = 0;
}

/* The group of `to` (NULL: none yet), and in *slot where its index is or
 * would go. */
static sn__sendgroup_t *find_group(sn__worker_t *w, sn_pid_t to, size_t *slot)
{
    size_t k = gslot_of(to);
    for (;; k = (k + 1) & (SN__GROUP_SLOTS - 1)) {
        uint8_t gi = w->gslot[k];
        if (!gi)
            break;
        if (sn_pid_eq(w->groups[gi - 1].to, to))
            return &w->groups[gi - 1];
    }
    *slot = k;
    return NULL;
}

/* The group of `to`, a new one if need be (NULL: the table is full). The
 * index never fills: it has twice the slots of the table. */
static sn__sendgroup_t *group_of(sn__worker_t *w, sn_pid_t to)
{
    size_t k = 0;
    sn__sendgroup_t *found = find_group(w, to, &k);
    if (found)
        return found;
    if (w->ngroups == SN__SEND_GROUPS)
        return NULL;
    sn__sendgroup_t *g = &w->groups[w->ngroups++];
    w->gslot[k] = (uint8_t)w->ngroups;
    *g = (sn__sendgroup_t){to, NULL, NULL, 0};
    return g;
}

/* Adds one send yield to its receiver's group; false if it cannot join
 * one (the caller flushes and sends it on its own). */
static bool group_send(sn__worker_t *w, sn__proc_t *p, sn_yield_t *y)
{
    sn_sched_t *sched = w->sched;
    bool local = y->target.node == sched->node_id || atomic_load_explicit(&sched->migrated_in, memory_order_relaxed);
    if (!local)
        return false;
    if (!y->data && !(y->data = sn_payload_new(SN_CT_BYTES, NULL, 0)))
        return false;
    sn__sendgroup_t *g = w->ngroups && sn_pid_eq(w->glast->to, y->target) ? w->glast : group_of(w, y->target);
    if (!g)
        return false;
    w->glast = g;
    sn__evnode_t *e = sn__evnode_make(SN_EV_MESSAGE, 0, y->tag, p->pid, y->data, false);
    if (!e)
        return false; /* (a new group stays empty: flush_groups skips it) */
    y->data = NULL;
    atomic_store_explicit(&e->link.next, NULL, memory_order_relaxed);
    if (g->last)
        atomic_store_explicit(&g->last->link.next, &e->link, memory_order_relaxed);
    else
        g->first = e;
    g->last = e;
    g->n++;
    return true;
}

/* The send yields from index i on while they last; returns the index past them. */
static uint32_t send_run(sn__worker_t *w, sn__proc_t *p, sn_step_out_t *out, uint32_t i)
{
    uint32_t n = out->nyields; /* (a step's yields do not change while they are dispatched) */
    sn_yield_t *y = sn__out_at(out, i);
    for (; i < n; i++, y = i == SN_OUT_INLINE_YIELDS ? out->overflow : y + 1) {
        if (y->cmd != SN__CMD_SEND)
            break;
        if (!group_send(w, p, y)) {
            size_t slot;
            if (find_group(w, y->target, &slot))
                flush_groups(w, p); /* whatever went before to it goes first */
            do_send(w->sched, p, y);
        }
    }
    flush_groups(w, p);
    return i;
}

/* sn_out_send_many: the batch in one push when the receiver is here and
 * every message has a payload; else each as do_send would send it, in
 * order. No limit on the count but memory; no CONTINUE needed. */
static void do_send_many(sn_sched_t *sched, sn__proc_t *p, sn_yield_t *y)
{
    sn_payload_t *d = y->data;
    if (!d || d->ctype != SN__CT_BATCH || d->len < sizeof(sn__batch_t) ||
        sn__batch_of(d)->n > (d->len - sizeof(sn__batch_t)) / sizeof(sn_payload_t *)) {
        post_self(p, SN_EINVAL, y->tag, y->target, NULL, false); /* a hand-made yield, not sn_out_send_many's */
        return;
    }
    sn__batch_t *b = sn__batch_of(d);
    bool local = y->target.node == sched->node_id || atomic_load_explicit(&sched->migrated_in, memory_order_relaxed);
    if (local && sn__post_local_many(sched, y->target, p->pid, y->tag, b->msgs, b->n) == 0)
        return;
    for (size_t i = 0; i < b->n; i++)
        send_one(sched, p, y->target, y->tag, &b->msgs[i]);
}

/* The PID completion of a spawn that does not await the result: queued
 * before the child can run (sn__spawn_args_t.announce), so it comes first. */
typedef struct announce {
    sn__proc_t *parent;
    uint64_t tag;
} announce_t;

static void announce(void *arg, sn_pid_t child)
{
    announce_t *a = arg;
    sn_payload_t *pid = sn_payload_pid(child); /* (NULL if out of memory: `from` is the PID too) */
    post_self(a->parent, 0, a->tag, child, &pid, true);
    sn_payload_destroy(&pid);
}

static void do_spawn(sn_sched_t *sched, sn__proc_t *p, sn_yield_t *y)
{
    bool await = y->flags & SN_YIELD_AWAIT;
    bool counted = await || !(y->flags & SN_YIELD_NOREPLY);
    announce_t an = {p, y->tag};
    sn__spawn_args_t a = {.type = y->name,
                          .method = y->method,
                          .input = &y->data,
                          .parent = p->pid,
                          .awaited = await                         ? SN__AWAIT_RESULT
                                     : y->flags & SN_YIELD_MONITOR ? SN__AWAIT_DOWN
                                                                   : SN__AWAIT_NONE,
                          .await_tag = y->tag,
                          .announce = !await && counted ? announce : NULL,
                          .announce_arg = &an};
    sn_payload_t *reason = NULL;
    if (counted)
        p->pending++;
    int rc = sn__spawn(sched, &a, NULL, &reason);
    if (rc != 0)
        post_self(p, rc, y->tag, SN_PID_NONE, &reason, counted);
    sn_payload_destroy(&reason);
}

static void do_sleep(sn_sched_t *sched, sn__proc_t *p, sn_yield_t *y)
{
    p->pending++;
    int rc = sn__timer_add(sched, y->arg, p->pid, y->tag);
    if (rc != 0)
        post_self(p, rc, y->tag, SN_PID_NONE, NULL, true);
}

static void do_terminate(sn_sched_t *sched, sn__proc_t *p, sn_yield_t *y)
{
    bool counted = !(y->flags & SN_YIELD_NOREPLY);
    int rc = sn_cancel(sched, y->target);
    if (counted)
        p->pending++;
    if (counted || rc != 0)
        post_self(p, rc, y->tag, y->target, NULL, counted);
}

static void do_user(sn_sched_t *sched, sn__proc_t *p, sn_yield_t *y, uint32_t cmd)
{
    const sn__command_t *c = cmd ? sn__command_get(sched, cmd) : NULL;
    p->pending++;
    if (!c) {
        sn_payload_t *why = sn_payload_printf(SN_CT_ERROR, "unknown command '%s'", y->name ? y->name : "(unnamed)");
        post_self(p, SN_ENOCMD, y->tag, SN_PID_NONE, &why, true);
        sn_payload_destroy(&why);
        return;
    }
    sn_request_t req = {p->pid, y->tag, cmd, y->flags, y->target, y->arg, sn_take(&y->data)};
    c->fn(sched, &req, c->arg);
    sn_payload_destroy(&req.data);
}

void sn__dispatch(sn__worker_t *w, sn__proc_t *p, sn_step_out_t *out)
{
    sn_sched_t *sched = w->sched;
    for (uint32_t i = 0; i < out->nyields; i++) {
        sn_yield_t *y = sn__out_at(out, i);
        uint32_t cmd = y->cmd;
        if (cmd == 0) {
            int id = sn_command_id(sched, y->name);
            cmd = id > 0 ? (uint32_t)id : 0;
        }
        /* a process the sends wake may be handed straight to this worker
         * (worker.c, the hand-off); anything else may run for long (a
         * command, a child's init), so what was handed is put where
         * thieves see it first */
        if (cmd == SN__CMD_SEND || cmd == SN__CMD_SEND_MANY)
            w->handing = true;
        else
            sn__handoff_flush(w);
        switch (cmd) {
        case SN__CMD_SEND:
            if (i + 1 < out->nyields && sn__out_at(out, i + 1)->cmd == SN__CMD_SEND) {
                i = send_run(w, p, out, i) - 1; /* (their payloads are all taken) */
                continue;
            }
            do_send(sched, p, y);
            break;
        case SN__CMD_SEND_MANY:
            do_send_many(sched, p, y);
            break;
        case SN__CMD_SPAWN:
            w->fanout = true; /* (worker.c: yield_back) */
            do_spawn(sched, p, y);
            break;
        case SN__CMD_SLEEP:
            do_sleep(sched, p, y);
            break;
        case SN__CMD_TERMINATE:
            do_terminate(sched, p, y);
            break;
        case SN__CMD_MONITOR:
            p->watches = 1;
            sn__monitor(sched, y->target, p->pid, y->tag);
            break;
        case SN__CMD_DEMONITOR:
            sn__demonitor(sched, y->target, p->pid, y->tag);
            break;
        default:
            do_user(sched, p, y, cmd);
            break;
        }
        sn_payload_destroy(&y->data);
    }
    w->handing = false;
    out->nyields = 0;
}

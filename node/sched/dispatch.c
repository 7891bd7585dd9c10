/* dispatch.c - yields to command handlers.
 *
 * Runs on the worker that ran the step, while it still owns the process
 * (state RUNNING), right after the step returns. Built-in commands (send,
 * spawn, sleep, terminate, monitor, demonitor) are handled here; others go to handlers
 * registered by name. A yield that counts (everything but send and
 * SN_YIELD_NOREPLY built-ins) adds one to p->pending; its completion event
 * takes it off when drained.
 */
#include <sched.h>
#include <stdlib.h>

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
    atomic_fetch_add_explicit(&p->pushed, 1, memory_order_relaxed); /* a display count */
    sn__mpsc_push(&p->q, &n->link);
}

static void do_send(sn_sched_t *sched, sn__proc_t *p, sn_yield_t *y)
{
    int rc = sn__deliver(sched, y->target, SN_EV_MESSAGE, 0, y->tag, p->pid, &y->data, false);
    if (rc != 0)
        post_self(p, rc, y->tag, y->target, &y->data, false); /* the payload comes back */
}

static void do_spawn(sn_sched_t *sched, sn__proc_t *p, sn_yield_t *y)
{
    bool await = y->flags & SN_YIELD_AWAIT;
    bool counted = await || !(y->flags & SN_YIELD_NOREPLY);
    sn_payload_t *reason = NULL;
    sn_pid_t child;
    int rc = sn__spawn(sched, y->name, y->method, &y->data, p->pid, await, y->tag, NULL, &child, &reason);
    if (counted)
        p->pending++;
    if (rc != 0) {
        post_self(p, rc, y->tag, SN_PID_NONE, &reason, counted);
    } else if (!await && counted) {
        sn_payload_t *pid = sn_payload_pid(child);
        post_self(p, 0, y->tag, child, &pid, true);
    }
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
        sn_yield_t *y = sn_out_at(out, i);
        uint32_t cmd = y->cmd;
        if (cmd == 0) {
            int id = sn_command_id(sched, y->name);
            cmd = id > 0 ? (uint32_t)id : 0;
        }
        switch (cmd) {
        case SN__CMD_SEND:
            do_send(sched, p, y);
            break;
        case SN__CMD_SPAWN:
            do_spawn(sched, p, y);
            break;
        case SN__CMD_SLEEP:
            do_sleep(sched, p, y);
            break;
        case SN__CMD_TERMINATE:
            do_terminate(sched, p, y);
            break;
        case SN__CMD_MONITOR:
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
    out->nyields = 0;
}

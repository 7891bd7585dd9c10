/* kill.c - ending a process from outside (`schednode kill`): first a
 * CANCEL it may answer as it likes, then, if it has not ended, a forced
 * end. A step is C code on a worker and cannot be interrupted: "forced"
 * means the process gets no further step. One that is Ready, Idle or
 * Waiting ends at once (at its next turn on a worker, without a step);
 * one in the middle of a step ends when that step returns (its yields go
 * out; if that step finished the process, DONE or FAIL, that end stands).
 * Killed, its monitors get DOWN and its awaiter the result SN_EKILLED,
 * with the killer's reason.
 */
#include <stdlib.h>

#include "internal.h"

sn_payload_t *sn__kill_reason_take(sn__proc_t *p)
{
    return atomic_exchange_explicit(&p->kill_reason, NULL, memory_order_acquire);
}

void sn__kill_now(sn__worker_t *w, sn__proc_t *p)
{
    sn_payload_t *why = sn__kill_reason_take(p);
    if (!why)
        why = sn_payload_text("killed");
    sn__complete(w->sched, w, p, SN_FAIL, SN_EKILLED, &why);
    sn_payload_destroy(&why);
}

/* Marks a process of this node asked to end (and with force, killed,
 * with *reason, taken). 0, or SN_ENOPROC if it is not in this node's
 * table. */
static int mark(sn_sched_t *sched, sn_pid_t pid, bool force, sn_payload_t **reason)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, pid.serial);
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, pid);
    sn_payload_t *old = NULL;
    if (p) {
        /* under the lock: sn__complete takes the reason only after the
         * process has left the table, so none stored here is lost */
        if (force)
            old = atomic_exchange_explicit(&p->kill_reason, sn_take(reason), memory_order_acq_rel);
        /* release: whoever reads the flag (acquire) sees the reason */
        atomic_fetch_or_explicit(&p->killed, force ? SN__KILL_ASKED | SN__KILL_FORCE : SN__KILL_ASKED,
                                 memory_order_release);
    }
    sn__shard_unlock(s);
    sn_payload_destroy(&old);
    return p ? 0 : SN_ENOPROC;
}

void sn__kill_report(sn_sched_t *sched, sn__proc_t *p, int error, const sn_payload_t *result)
{
    const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
    if (hk && hk->h.ended)
        hk->h.ended(hk->h.arg, p->pid, error, result);
}

int sn__sched_kill(sn_sched_t *sched, sn_pid_t pid, bool force, sn_payload_t **reason)
{
    int rc = mark(sched, pid, force, reason);
    if (rc == 0) {
        /* Without force the reason rides with the CANCEL, for the process
         * to read. With force it is stored, and the CANCEL wakes the
         * process if it sleeps (Idle or Waiting: a CANCEL wakes either);
         * its run then ends it without a step. A process that ended in
         * between was there: no error. */
        (void)sn__deliver(sched, pid, SN_EV_CANCEL, 0, 0, SN_PID_NONE, force ? NULL : reason, false);
    }
    sn_payload_destroy(reason);
    return rc;
}

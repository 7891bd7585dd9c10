/* inspect.c - a table of this node's processes (PID, type, state, mailbox
 * length, steps, moves) and their counts by state, for `schednode ps`, the
 * metrics and the dashboard. Reads the PID table; changes nothing.
 */
#include <string.h>

#include "internal.h"

_Static_assert((int)SN_PS_INIT == SN__INIT && (int)SN_PS_READY == SN__READY && (int)SN_PS_RUNNING == SN__RUNNING &&
                   (int)SN_PS_IDLE == SN__IDLE && (int)SN_PS_WAITING == SN__BLOCKED &&
                   (int)SN_PS_DONE == SN__COMPLETE && (int)SN_PS_MOVING == SN__MIGRATING,
               "sn_pstate_t mirrors the process states of internal.h");

static const char *const names[SN_PS_COUNT] = {"init", "ready", "running", "idle", "waiting", "done", "moving"};

const char *sn__pstate_name(unsigned state)
{
    return state < SN_PS_COUNT ? names[state] : "?";
}

/* One row from a process. The caller holds its shard lock, so it is in the
 * table and not freed; its type is immutable once it is there. The
 * counters are single-writer atomics read relaxed (see internal.h). */
static void row_of(sn__proc_t *p, uint32_t state, sn_proc_row_t *r)
{
    r->pid = p->pid;
    size_t len = strlen(p->type->name);
    if (len >= sizeof r->type)
        len = sizeof r->type - 1;
    memcpy(r->type, p->type->name, len);
    r->type[len] = '\0';
    r->state = state;
    uint32_t in = atomic_load_explicit(&p->pushed, memory_order_relaxed) +
                  atomic_load_explicit(&p->self_pushed, memory_order_relaxed);
    uint32_t out = atomic_load_explicit(&p->popped, memory_order_relaxed);
    /* the two are read apart: the taker's count may be the newer one */
    r->mailbox = in - out <= INT32_MAX ? in - out : 0;
    r->steps = atomic_load_explicit(&p->steps, memory_order_relaxed);
    r->moves = p->moves;
}

size_t sn__sched_snapshot(sn_sched_t *sched, sn_proc_row_t *rows, size_t max, sn_proc_counts_t *counts)
{
    size_t n = 0;
    if (counts)
        memset(counts, 0, sizeof *counts);
    for (int i = 0; i < SN__SHARDS; i++) {
        sn__shard_t *s = &sched->table.shards[i];
        sn__shard_lock(s);
        for (size_t b = 0; b < s->nbuckets; b++)
            for (sn__proc_t *p = s->buckets[b]; p; p = p->hnext, n++) {
                /* relaxed: a display of a state that may change right after */
                uint32_t state = atomic_load_explicit(&p->state, memory_order_relaxed) & SN__STATE_MASK;
                if (state >= SN_PS_COUNT)
                    state = SN_PS_INIT;
                if (counts)
                    counts->by_state[state]++;
                if (n < max)
                    row_of(p, state, &rows[n]);
            }
        sn__shard_unlock(s);
    }
    if (counts)
        counts->total = n;
    return n;
}

size_t sn__sched_homed_at(sn_sched_t *sched, uint32_t node, sn_pid_t *pids, uint32_t *moves, size_t max)
{
    size_t n = 0;
    for (int i = 0; i < SN__SHARDS; i++) {
        sn__shard_t *s = &sched->table.shards[i];
        sn__shard_lock(s);
        for (size_t b = 0; b < s->nbuckets; b++)
            for (sn__proc_t *p = s->buckets[b]; p; p = p->hnext) {
                if (p->pid.node != node)
                    continue;
                if (n < max) {
                    pids[n] = p->pid;
                    moves[n] = p->moves;
                }
                n++;
            }
        sn__shard_unlock(s);
    }
    return n;
}

int sn__sched_proc(sn_sched_t *sched, sn_pid_t pid, sn_proc_row_t *row)
{
    sn__shard_t *s = sn__ptable_shard(&sched->table, pid.serial);
    sn__shard_lock(s);
    sn__proc_t *p = sn__shard_find(s, pid);
    if (p) {
        uint32_t state = atomic_load_explicit(&p->state, memory_order_relaxed) & SN__STATE_MASK;
        row_of(p, state < SN_PS_COUNT ? state : SN_PS_INIT, row);
    }
    sn__shard_unlock(s);
    return p ? 0 : SN_ENOPROC;
}

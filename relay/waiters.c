/* waiters.c - backpressure's list of the processes here held until a
 * backlog has room: a peer's (peer.c, backlog_changed) or what the
 * location entries hold while routes change (locate.c). The scheduler
 * holds each (sn__throttle) and lets it go (sn__unthrottle); the list is
 * the relay's record of whom to let go. I/O thread only.
 */
#include "grow.h"
#include "relay_int.h"
#include "peer.h"

void sn__relay_hold_sender(sn_relay_t *r, waiters_t *w, const item_t *it)
{
    sn_pid_t from = it->s.from;
    if (r->no_steal || it->forwarded || !sn__relay_for_process(it->s.kind) || sn_pid_is_none(from) ||
        sn_pid_eq(from, w->last))
        return;
    sn_pid_t *g = sn__grow(w->pids, &w->cap, w->n, sizeof *g, 16, 0);
    if (!g || !sn__throttle(r->sched, from))
        return; /* (not here, or asked already; no memory: it goes on) */
    w->pids = g;
    w->pids[w->n++] = from;
    w->last = from;
}

void sn__relay_let_go(sn_relay_t *r, waiters_t *w)
{
    for (size_t i = 0; i < w->n; i++)
        sn__unthrottle(r->sched, w->pids[i]);
    w->n = 0;
    w->last = SN_PID_NONE;
}

/* move.c - moves asked by PID (`schednode migrate`, sn_migrate): the
 * source node pushes one process to a chosen node with the handover of
 * stealing (steal.c: offer, accept, commit), unasked by the target. I/O
 * thread only.
 *
 * A move waits for its process to be Idle or Blocked (waiting for
 * messages, or for its yields: sn__migrate_freeze takes no other: a Ready
 * one is in a run queue, a Running one mid-step), looking
 * again at each tick (every MOVE_RETRY_NS) until its deadline; then it is
 * offered, its id marked SN__PUSH_ID so that the target takes it unasked
 * and the outcome comes back here (sn__move_decided). Its done callback
 * is called exactly once: here, or by steal.c through sn__move_decided
 * (accepted and committed, refused, unanswered, target gone, shutdown).
 * Guarded by tests/migrate.sh.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "relay_int.h"
#include "move.h"
#include "steal.h"

#define MOVE_DEFAULT_MS 5000
#define MOVE_RETRY_NS 2000000u /* a busy process: looked at again after this */

typedef struct move {
    sn_pid_t pid;
    uint32_t node;
    uint64_t deadline_ns; /* waiting: give up after this */
    uint64_t id;          /* offered (0: waiting for it to be Idle) */
    sn__move_done_fn done;
    void *arg;
} move_t;

struct sn_moves {
    move_t *v;
    size_t n, cap;
    uint64_t next_id;
};

int sn__move_init(sn_relay_t *r)
{
    r->moves = calloc(1, sizeof *r->moves);
    return r->moves ? 0 : -1;
}

/* Ends move i with its outcome (the last one moves into its place). */
static void finish(sn_relay_t *r, size_t i, int error, const char *why)
{
    struct sn_moves *mv = r->moves;
    move_t m = mv->v[i];
    mv->v[i] = mv->v[--mv->n];
    char text[256];
    if (error && why) {
        char pid[SN_PID_STRLEN];
        snprintf(text, sizeof text, "%s cannot move to node %" PRIu32 ": %s", sn_pid_format(m.pid, pid, sizeof pid),
                 m.node, why);
        why = text;
    }
    m.done(m.arg, error, error ? 0 : m.node, why);
}

void sn__move_stop(sn_relay_t *r)
{
    while (r->moves && r->moves->n)
        finish(r, 0, SN_ESHUTDOWN, "this node is shutting down");
}

void sn__move_fini(sn_relay_t *r)
{
    if (!r->moves)
        return;
    sn__move_stop(r);
    free(r->moves->v);
    free(r->moves);
    r->moves = NULL;
}

/* One look at move i: offered now (true: it stays, waiting for the
 * outcome), or still busy (true), or ended (false). */
static bool try_move(sn_relay_t *r, size_t i, uint64_t now)
{
    move_t *m = &r->moves->v[i];
    peer_t *t = sn__relay_find_peer(r, m->node);
    if (!t || t->state != SN_MEMBER_UP) {
        finish(r, i, SN_EUNREACHABLE, "that node is not an up member of the cluster");
        return false;
    }
    sn_migrant_t mg;
    const char *why = NULL;
    int rc = sn__migrate_freeze(r->sched, m->pid, &mg, &why);
    if (rc == SN__MOVE_BUSY && now < m->deadline_ns)
        return true;
    if (rc != 0) {
        finish(r, i, rc == SN__MOVE_BUSY ? SN_ETIMEDOUT : rc,
               rc == SN__MOVE_BUSY
                   ? "it was never idle (waiting for messages or sleeps, its last arrival settled) before the "
                     "timeout"
               : rc == SN_ENOPROC ? "it is not on this node"
                                  : why);
        return false;
    }
    const sn_type_t *type = sn_type_find(r->sched, mg.type);
    uint64_t id = ++r->moves->next_id | SN__PUSH_ID;
    if (!type || !sn__steal_takes(t, type)) {
        rc = SN_EREFUSED;
        why = "that node has no type of this name and version that can move";
    } else if ((mg.state ? mg.state->len : 0) + 256 > r->max_frame / 2) {
        rc = SN_ETOOBIG;
        why = "its marshalled state is over half of --max-frame";
    } else if (sn__steal_push(r, t, &mg, id) != 0) {
        rc = SN_ENOMEM;
        why = "out of memory";
    }
    if (rc) {
        sn__migrate_revert(r->sched, &mg);
        finish(r, i, rc, why);
        return false;
    }
    m->id = id;
    return true;
}

void sn__move_start(sn_relay_t *r, sn_pid_t pid, uint32_t node, int timeout_ms, sn__move_done_fn done, void *arg)
{
    struct sn_moves *mv = r->moves;
    if (node == r->node && sn__migrate_here(r->sched, pid)) {
        done(arg, 0, node, NULL); /* (there already) */
        return;
    }
    if (r->no_steal || !mv) {
        done(arg, SN_ESHUTDOWN, 0, "this node is shutting down");
        return;
    }
    if (node == r->node || node == 0) {
        done(arg, SN_ENOPROC, 0, "it is not on this node");
        return;
    }
    move_t *v = sn__grow(mv->v, &mv->cap, mv->n, sizeof *v, 8, 0);
    if (!v) {
        done(arg, SN_ENOMEM, 0, "out of memory");
        return;
    }
    mv->v = v;
    uint64_t now = sn__relay_now_ns();
    uint64_t ms = timeout_ms > 0 ? (uint64_t)timeout_ms : MOVE_DEFAULT_MS;
    mv->v[mv->n++] = (move_t){pid, node, now + ms * 1000000u, 0, done, arg};
    try_move(r, mv->n - 1, now);
}

void sn__move_decided(sn_relay_t *r, uint64_t id, int error, const char *why)
{
    for (size_t i = 0; r->moves && i < r->moves->n; i++)
        if (r->moves->v[i].id == id) {
            finish(r, i, error, why);
            return;
        }
}

void sn__move_tick(sn_relay_t *r, uint64_t now)
{
    for (size_t i = 0; r->moves && i < r->moves->n;) {
        size_t n = r->moves->n;
        if (r->moves->v[i].id || try_move(r, i, now) || r->moves->n == n)
            i++; /* (ended: the last one took its place, look at i again) */
    }
}

uint64_t sn__move_next_ns(sn_relay_t *r)
{
    for (size_t i = 0; r->moves && i < r->moves->n; i++)
        if (!r->moves->v[i].id)
            return sn__relay_now_ns() + MOVE_RETRY_NS;
    return UINT64_MAX;
}

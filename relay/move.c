/* move.c - moves asked by PID (`schednode migrate`, sn_migrate, drain.c):
 * the source node pushes processes to a chosen node with the handover of
 * stealing (steal.c: offer, accept, commit), unasked by the target. I/O
 * thread only.
 *
 * A move waits for its process to be Idle or Blocked (waiting for
 * messages, or for its yields: sn__migrate_freeze takes no other: a Ready
 * one is in a run queue, a Running one mid-step), looking
 * again at each tick (every MOVE_RETRY_NS) until its deadline; then it is
 * offered. Processes frozen together for the same node go in one push of
 * up to PUSH_MAX (one offer, one accept, one commit for all of them: the
 * steal handover is per migrant, so each is committed or reverted on its
 * own), its id marked SN__PUSH_ID so that the target takes it unasked and
 * each migrant's outcome comes back here (sn__move_decided). Its done
 * callback is called exactly once: here, or by steal.c through
 * sn__move_decided (accepted and committed, refused, unanswered, target
 * gone, shutdown). Guarded by tests/migrate.sh, tests/drain.sh.
 *
 * A done callback starts no move itself (steal.c walks its offers across
 * them); still, no pointer into this file's tables is held across one:
 * each entry is copied out, and its table updated, before its callback.
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
#define PUSH_MAX 64            /* processes one push carries at most */

typedef struct move {
    sn_pid_t pid;
    uint32_t node;
    uint64_t deadline_ns; /* waiting: give up after this */
    sn__move_done_fn done;
    void *arg;
} move_t;

/* One push under way: its moves, in the order of its migrants. */
typedef struct push {
    uint64_t id;
    move_t *m;          /* a decided one's done is NULL */
    size_t n, left, at; /* left: not decided yet; at: where the next outcome is looked for first */
} push_t;

struct sn_moves {
    move_t *wait; /* waiting for their process to be Idle (the tick looks again) */
    size_t nwait, capwait;
    push_t *push; /* offered: their outcomes come from steal.c */
    size_t npush, cappush;
    uint64_t next_id;
};

/* The moves being frozen for one push (stack-local to a call): all for
 * node t, their marshalled states within `room` bytes of the offer. */
typedef struct batch {
    peer_t *t;
    size_t n, room;
    move_t m[PUSH_MAX];
    sn_migrant_t mg[PUSH_MAX];
} batch_t;

int sn__move_init(sn_relay_t *r)
{
    r->moves = calloc(1, sizeof *r->moves);
    return r->moves ? 0 : -1;
}

/* Ends move m with its outcome (m is out of every table by now). */
static void end(move_t m, int error, const char *why)
{
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
    struct sn_moves *mv = r->moves;
    while (mv && mv->nwait) {
        move_t m = mv->wait[--mv->nwait];
        end(m, SN_ESHUTDOWN, "this node is shutting down");
    }
    while (mv && mv->npush) { /* (steal.c's stop decided them all first: none is left in practice) */
        push_t p = mv->push[--mv->npush];
        for (size_t i = 0; i < p.n; i++)
            if (p.m[i].done)
                end(p.m[i], SN_ESHUTDOWN, "this node is shutting down");
        free(p.m);
    }
}

void sn__move_fini(sn_relay_t *r)
{
    if (!r->moves)
        return;
    sn__move_stop(r);
    free(r->moves->wait);
    free(r->moves->push);
    free(r->moves);
    r->moves = NULL;
}

/* Offers the moves of batch b to b->t as one push; on failure each
 * process runs here again and its move ends. b is empty after. */
static void flush(sn_relay_t *r, batch_t *b)
{
    struct sn_moves *mv = r->moves;
    size_t n = b->n;
    b->n = 0;
    b->room = r->max_frame / 2;
    if (!n)
        return;
    uint64_t id = ++mv->next_id | SN__PUSH_ID;
    push_t *p = sn__grow(mv->push, &mv->cappush, mv->npush, sizeof *p, 8, 0);
    move_t *m = p ? malloc(n * sizeof *m) : NULL;
    if (p)
        mv->push = p;
    if (m) {
        memcpy(m, b->m, n * sizeof *m);
        mv->push[mv->npush++] = (push_t){id, m, n, n, 0};
        if (sn__steal_push(r, b->t, b->mg, n, id) == 0)
            return; /* (steal.c owns the migrants now; their outcomes come to sn__move_decided) */
        mv->npush--;
        free(m);
    }
    for (size_t i = 0; i < n; i++)
        sn__migrate_revert(r->sched, &b->mg[i]);
    for (size_t i = 0; i < n; i++)
        end(b->m[i], SN_ENOMEM, "out of memory");
}

/* The state of frozen migrant mg cannot go to t (why, or NULL: it can):
 * t's type of its name, and the offer's size. */
static int refuse(sn_relay_t *r, peer_t *t, const sn_migrant_t *mg, const char **why)
{
    const sn_type_t *type = sn_type_find(r->sched, mg->type);
    if (!type || !sn__steal_takes(t, type)) {
        *why = "that node has no type of this name and version that can move";
        return SN_EREFUSED;
    }
    if ((mg->state ? mg->state->len : 0) + 256 > r->max_frame / 2) {
        *why = "its marshalled state is over half of --max-frame";
        return SN_ETOOBIG;
    }
    return 0;
}

/* One look at move m: frozen into batch b (flushed first when full, or
 * bound for another node), or ended, or still busy (true: the caller
 * keeps it waiting). */
static bool try_move(sn_relay_t *r, batch_t *b, move_t m, uint64_t now)
{
    if (b->n && (b->t->node != m.node || b->n == PUSH_MAX))
        flush(r, b);
    if (!b->n)
        b->t = sn__relay_find_peer(r, m.node);
    if (!b->t || b->t->state != SN_MEMBER_UP) {
        end(m, SN_EUNREACHABLE, "that node is not an up member of the cluster");
        return false;
    }
    sn_migrant_t *mg = &b->mg[b->n];
    const char *why = NULL;
    int rc = sn__migrate_freeze(r->sched, m.pid, mg, &why);
    if (rc == SN__MOVE_BUSY && now < m.deadline_ns)
        return true;
    if (rc != 0) {
        end(m, rc == SN__MOVE_BUSY ? SN_ETIMEDOUT : rc,
            rc == SN__MOVE_BUSY
                ? "it was never idle (waiting for messages or sleeps, its last arrival settled) before the "
                  "timeout"
            : rc == SN_ENOPROC ? "it is not on this node"
                               : why);
        return false;
    }
    if ((rc = refuse(r, b->t, mg, &why)) != 0) {
        sn__migrate_revert(r->sched, mg);
        end(m, rc, why);
        return false;
    }
    size_t need = (mg->state ? mg->state->len : 0) + 256; /* (as steal.c's fit_frame counts) */
    if (need > b->room) {                                 /* the offer is full: it goes, this one opens the next */
        sn_migrant_t keep = *mg;
        flush(r, b);
        b->mg[0] = keep;
    }
    b->room -= need;
    b->m[b->n++] = m;
    return false;
}

static batch_t *batch_new(sn_relay_t *r)
{
    batch_t *b = calloc(1, sizeof *b);
    if (b)
        b->room = r->max_frame / 2;
    return b;
}

/* Waits for move m's process (busy): the tick looks again. */
static void wait_more(sn_relay_t *r, move_t m)
{
    struct sn_moves *mv = r->moves;
    move_t *v = sn__grow(mv->wait, &mv->capwait, mv->nwait, sizeof *v, 8, 0);
    if (!v) {
        end(m, SN_ENOMEM, "out of memory");
        return;
    }
    mv->wait = v;
    mv->wait[mv->nwait++] = m;
}

void sn__move_start_many(sn_relay_t *r, uint32_t node, int timeout_ms, sn__move_done_fn done, const sn_pid_t *pids,
                         void *const *args, size_t n)
{
    uint64_t now = sn__relay_now_ns();
    uint64_t ms = timeout_ms > 0 ? (uint64_t)timeout_ms : MOVE_DEFAULT_MS;
    batch_t *b = NULL;
    for (size_t i = 0; i < n; i++) {
        move_t m = {pids[i], node, now + ms * 1000000u, done, args[i]};
        if (node == r->node && sn__migrate_here(r->sched, m.pid)) {
            done(m.arg, 0, node, NULL); /* (there already) */
            continue;
        }
        if (r->no_steal || !r->moves) {
            done(m.arg, SN_ESHUTDOWN, 0, "this node is shutting down");
            continue;
        }
        if (node == r->node || node == 0) {
            done(m.arg, SN_ENOPROC, 0, "it is not on this node");
            continue;
        }
        if (!b && !(b = batch_new(r))) {
            done(m.arg, SN_ENOMEM, 0, "out of memory");
            continue;
        }
        if (try_move(r, b, m, now))
            wait_more(r, m);
    }
    if (b)
        flush(r, b);
    free(b);
}

void sn__move_start(sn_relay_t *r, sn_pid_t pid, uint32_t node, int timeout_ms, sn__move_done_fn done, void *arg)
{
    sn__move_start_many(r, node, timeout_ms, done, &pid, &arg, 1);
}

void sn__move_decided(sn_relay_t *r, uint64_t id, sn_pid_t pid, int error, const char *why)
{
    struct sn_moves *mv = r->moves;
    size_t i = 0;
    while (mv && i < mv->npush && mv->push[i].id != id)
        i++;
    if (!mv || i == mv->npush)
        return;
    push_t *p = &mv->push[i];
    size_t k = p->at; /* (steal.c reports in the order of the migrants: found at once) */
    for (size_t seen = 0; seen < p->n && (!p->m[k].done || !sn_pid_eq(p->m[k].pid, pid)); seen++)
        k = (k + 1) % p->n;
    if (!p->m[k].done || !sn_pid_eq(p->m[k].pid, pid))
        return;
    move_t m = p->m[k];
    p->m[k].done = NULL;
    p->at = (k + 1) % p->n;
    if (--p->left == 0) {
        free(p->m);
        mv->push[i] = mv->push[--mv->npush];
    }
    end(m, error, why);
}

void sn__move_tick(sn_relay_t *r, uint64_t now)
{
    struct sn_moves *mv = r->moves;
    if (!mv || !mv->nwait)
        return;
    /* the waiting list is taken whole: what stays busy goes back to it */
    move_t *w = mv->wait;
    size_t n = mv->nwait;
    mv->wait = NULL;
    mv->nwait = mv->capwait = 0;
    batch_t *b = batch_new(r);
    for (size_t i = 0; i < n; i++) {
        if (!b) {
            wait_more(r, w[i]); /* (out of memory: looked at again at the next tick) */
            continue;
        }
        if (try_move(r, b, w[i], now))
            wait_more(r, w[i]);
    }
    if (b)
        flush(r, b);
    free(b);
    free(w);
}

uint64_t sn__move_next_ns(sn_relay_t *r)
{
    return r->moves && r->moves->nwait ? sn__relay_now_ns() + MOVE_RETRY_NS : UINT64_MAX;
}

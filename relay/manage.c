/* manage.c - a node's side of `schednode ps`, `kill` and `types`: its own
 * processes and types, answered from the scheduler (inspect.c, kill.c).
 * The client asks each node in turn (node/client.c has no fan-out: a
 * node answers for itself only). I/O thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay_int.h"
#include "manage.h"

/* Most rows one answer carries (about 50 bytes each on the wire, well
 * under the 16 MiB frame); `total` says how many there are. */
#define PS_ROWS_MAX 100000u
#define TYPES_MAX 4096u
#define ENDS_MAX 256u        /* ends of killed processes kept (the latest) */
#define END_RESULT_MAX 4096u /* bytes of a result kept with its end */

/* The ends of processes that clients killed, for `kill` to report (the
 * counter's count, the reason it failed with). A ring of the latest
 * ENDS_MAX: written by whichever thread ends a process (a worker), read by
 * the I/O thread, so behind a mutex. */
typedef struct sn_end {
    sn_pid_t pid;
    int error;
    sn_payload_t *result; /* a copy, cut to END_RESULT_MAX bytes */
} sn_end_t;

struct sn_ends {
    pthread_mutex_t mu;
    sn_end_t ring[ENDS_MAX]; /* guarded by mu */
    size_t next;             /* guarded by mu */
};

int sn__manage_init(sn_relay_t *r)
{
    r->ends = calloc(1, sizeof *r->ends);
    if (!r->ends)
        return -1;
    pthread_mutex_init(&r->ends->mu, NULL);
    return 0;
}

void sn__manage_fini(sn_relay_t *r)
{
    if (!r->ends)
        return;
    for (size_t i = 0; i < ENDS_MAX; i++)
        sn_payload_destroy(&r->ends->ring[i].result);
    pthread_mutex_destroy(&r->ends->mu);
    free(r->ends);
    r->ends = NULL;
}

void sn__relay_ended(void *arg, sn_pid_t pid, int error, const sn_payload_t *result)
{
    sn_relay_t *r = arg;
    sn_payload_t *copy = NULL, *old;
    if (result)
        copy = sn_payload_new(result->ctype, result->data, result->len < END_RESULT_MAX ? result->len : END_RESULT_MAX);
    pthread_mutex_lock(&r->ends->mu);
    sn_end_t *e = &r->ends->ring[r->ends->next++ % ENDS_MAX];
    old = e->result;
    *e = (sn_end_t){pid, error, copy};
    pthread_mutex_unlock(&r->ends->mu);
    sn_payload_destroy(&old);
}

/* The end of pid, if it is one of those kept: rep->ended, its error and a
 * copy of its result. */
static void end_of(sn_relay_t *r, sn_pid_t pid, sn_wire_reply_t *rep)
{
    pthread_mutex_lock(&r->ends->mu);
    for (size_t i = 0; i < ENDS_MAX; i++) {
        const sn_end_t *e = &r->ends->ring[i];
        if (e->pid.serial == pid.serial && e->pid.node == pid.node) {
            rep->ended = 1;
            rep->end_error = e->error;
            if (e->result)
                rep->result = sn_payload_new(e->result->ctype, e->result->data, e->result->len);
        }
    }
    pthread_mutex_unlock(&r->ends->mu);
}

/* PS of the whole node: its rows (up to PS_ROWS_MAX) and counts. */
static void ps_all(sn_relay_t *r, sn_wire_reply_t *rep)
{
    sn_proc_counts_t c;
    size_t n = sn__sched_snapshot(r->sched, NULL, 0, &c);
    /* room for some spawned between the two walks */
    size_t cap = n + n / 4 + 64;
    if (cap > PS_ROWS_MAX)
        cap = PS_ROWS_MAX;
    rep->procs = malloc(cap * sizeof *rep->procs);
    if (!rep->procs) {
        rep->error = SN_ENOMEM;
        return;
    }
    n = sn__sched_snapshot(r->sched, rep->procs, cap, &c);
    rep->nprocs = n < cap ? n : cap;
    rep->total = c.total;
    memcpy(rep->by_state, c.by_state, sizeof rep->by_state);
}

/* PS of one PID: its row, or noproc (and where it went, if it moved on
 * from here). */
static void ps_one(sn_relay_t *r, sn_pid_t pid, sn_wire_reply_t *rep)
{
    rep->procs = malloc(sizeof *rep->procs);
    if (!rep->procs) {
        rep->error = SN_ENOMEM;
        return;
    }
    if (sn__sched_proc(r->sched, pid, rep->procs) == 0) {
        rep->nprocs = 1;
        rep->total = 1;
        rep->by_state[rep->procs->state] = 1;
        return;
    }
    rep->error = SN_ENOPROC;
    rep->moved_to = sn__migrate_forward_of(r->sched, pid);
    if (!rep->moved_to)
        end_of(r, pid, rep);
}

static void kill_one(sn_relay_t *r, const sn_wire_request_t *q, sn_wire_reply_t *rep)
{
    sn_payload_t *why = sn_payload_text(q->reason && *q->reason ? q->reason : "killed by schednode kill");
    rep->error = sn__sched_kill(r->sched, q->to, q->force, &why);
    sn_payload_destroy(&why);
    if (rep->error == SN_ENOPROC)
        rep->moved_to = sn__migrate_forward_of(r->sched, q->to);
    else if (rep->error == 0)
        SNLOG_INFO(r, "%s %" PRIu32 ".%" PRIu64 " for a client: %s", q->force ? "killing" : "cancelling", q->to.node,
                   q->to.serial, q->reason && *q->reason ? q->reason : "(no reason given)");
}

static void types_of(sn_relay_t *r, sn_wire_reply_t *rep)
{
    const sn_type_t **ts = malloc(TYPES_MAX * sizeof *ts);
    size_t n = ts ? sn__sched_types(r->sched, ts, TYPES_MAX) : 0;
    rep->types = calloc(n + 1, sizeof *rep->types);
    if (!ts || !rep->types) {
        free(ts);
        rep->error = SN_ENOMEM;
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(ts[i]->name, "sn.", 3))
            continue; /* the node's own (the name registry): not a user's type (cli_cluster.sh, bare node) */
        snprintf(rep->types[k].name, sizeof rep->types[k].name, "%s", ts[i]->name);
        rep->types[k].version = ts[i]->version;
        rep->types[k].migratable = ts[i]->marshal && ts[i]->unmarshal;
        k++;
    }
    rep->ntypes = k;
    free(ts);
}

void sn__relay_manage(sn_relay_t *r, const sn_wire_request_t *q, sn_wire_reply_t *rep)
{
    rep->node = r->node;
    switch (q->op) {
    case SN_OP_PS:
        if (q->to.serial)
            ps_one(r, q->to, rep);
        else
            ps_all(r, rep);
        break;
    case SN_OP_KILL:
        kill_one(r, q, rep);
        break;
    case SN_OP_TYPES:
        types_of(r, rep);
        break;
    }
}

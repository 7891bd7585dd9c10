/* drain.c - draining a node (`schednode drain`, `undrain`): while
 * r->draining the node takes no spawn from clients (inbound.c), asks
 * nobody for work and takes no push (steal.c), and its status row says
 * `draining` (members.c). A drain moves each process of the node to
 * another node with move.c's push, a few at a time (DRAIN_INFLIGHT, in
 * groups of DRAIN_GROUP bound for the same node: one push each), to
 * the node with the least load (its advertised processes plus those this
 * drain sent it), looks again at those that could not move yet, waits
 * for the rest to end until its deadline, and answers its client with
 * what moved, what ended and what is left (by type and reason). I/O
 * thread only. Guarded by tests/drain.sh.
 *
 * The handover of each process is move.c's and steal.c's (exactly-once,
 * messages in order); a drain only chooses what to push where and when.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "relay_int.h"
#include "drain.h"
#include "members.h"
#include "move.h"
#include "peer.h"
#include "steal.h"

#define DRAIN_DEFAULT_MS 30000
#define DRAIN_INFLIGHT 1024      /* moves under way at once */
#define DRAIN_GROUP 64           /* moves to one node that start together (move.c: one push) */
#define DRAIN_OPEN 4             /* groups filled at once in a scan (the oldest goes when a fifth node comes) */
#define ATTEMPT_MS 500           /* one move's wait for its process to be Idle */
#define RETRY_NS 100000000u      /* a process that did not move: looked at again after this */
#define RESCAN_NS 500000000u     /* a look for processes that started here during the drain */
#define SCAN_MAX 4096u           /* entries looked at per tick */
#define STOP_DELAY_NS 300000000u /* --then-stop: the answer's time to reach its client */
#define NO_MARSHAL "its type has no marshal and unmarshal"

enum { E_WAIT, E_MOVING, E_MOVED, E_ENDED, E_STUCK }; /* STUCK: cannot move, may end */

typedef struct entry {
    sn_pid_t pid;
    uint64_t retry_ns; /* WAIT, STUCK: looked at again from this time */
    uint32_t node;     /* MOVING, MOVED: where to */
    uint16_t type;     /* names[type] */
    uint16_t why;      /* names[why - 1]: why it has not moved (0: not said) */
    uint8_t state;
} entry_t;

typedef struct count {
    uint32_t node;
    uint64_t n;
} count_t;

struct sn_drain {
    sn_relay_t *r;
    entry_t *v; /* rescans add (while no move is in flight: moves hold indexes) */
    size_t n, cap, cursor, inflight, nwait, nstuck;
    char **names; /* type names and reasons, each once */
    size_t nnames, capnames;
    count_t *sent; /* processes sent to each node by this drain */
    size_t nsent, capsent;
    uint32_t refused[32]; /* nodes that refused a push: not chosen again */
    size_t nrefused;
    uint64_t start_ns, deadline_ns, rescan_ns, next_look_ns, stop_ns;
    bool ending, undrained, then_stop, answered;
    uint64_t id; /* the client's request */
    unsigned char ident[256];
    size_t ident_len;
};

typedef struct move_arg {
    struct sn_drain *d;
    size_t i;
} move_arg_t;

/* Moves to one node, gathered by a scan and started together. */
typedef struct batch {
    uint32_t node;
    size_t n;
    sn_pid_t pid[DRAIN_GROUP];
    void *arg[DRAIN_GROUP]; /* move_arg_t */
} batch_t;

/* The groups a scan fills (stack-local to it). */
typedef struct batches {
    batch_t b[DRAIN_OPEN];
    size_t n;
} batches_t;

static uint16_t name_of(struct sn_drain *d, const char *s)
{
    for (size_t i = 0; i < d->nnames; i++)
        if (!strcmp(d->names[i], s))
            return (uint16_t)i;
    char **v = d->nnames < 65535 ? sn__grow(d->names, &d->capnames, d->nnames, sizeof *v, 16, 0) : NULL;
    char *copy = v ? strdup(s) : NULL;
    if (!copy)
        return 0; /* out of memory: another name stands in (the report only) */
    d->names = v;
    d->names[d->nnames] = copy;
    return (uint16_t)d->nnames++;
}

static count_t *sent_to(struct sn_drain *d, uint32_t node, bool add)
{
    for (size_t i = 0; i < d->nsent; i++)
        if (d->sent[i].node == node)
            return &d->sent[i];
    count_t *v = add ? sn__grow(d->sent, &d->capsent, d->nsent, sizeof *v, 8, 0) : NULL;
    if (!v)
        return NULL;
    d->sent = v;
    d->sent[d->nsent] = (count_t){node, 0};
    return &d->sent[d->nsent++];
}

static bool refused(const struct sn_drain *d, uint32_t node)
{
    for (size_t i = 0; i < d->nrefused; i++)
        if (d->refused[i] == node)
            return true;
    return false;
}

/* The node to send a process of `type` to: an up member, not draining,
 * that has not refused a push of this drain and takes the type, with the
 * least load (the processes it advertised, plus those sent to it since). */
static peer_t *pick_target(sn_relay_t *r, struct sn_drain *d, const sn_type_t *type)
{
    peer_t *best = NULL;
    uint64_t least = UINT64_MAX;
    SN__FOR_PEERS(r, p)
    {
        if (sn__members_state(r, p) != SN_MEMBER_UP || (p->has_stats && p->stats.draining) || refused(d, p->node) ||
            !sn__steal_takes(p, type))
            continue;
        count_t *c = sent_to(d, p->node, false);
        uint64_t load = (p->has_stats ? p->stats.live : 0) + (c ? c->n : 0);
        if (load < least) {
            least = load;
            best = p;
        }
    }
    return best;
}

/* Entry e is not on this node any more: moved (by a steal: a forwarding
 * entry says where) or ended. */
static void gone(struct sn_drain *d, entry_t *e)
{
    if (e->state == E_WAIT)
        d->nwait--;
    else if (e->state == E_STUCK)
        d->nstuck--;
    e->node = sn__migrate_forward_of(d->r->sched, e->pid);
    e->state = e->node ? E_MOVED : E_ENDED;
}

/* Entry e stays for now, for reason why: looked at again after RETRY_NS. */
static void later(struct sn_drain *d, entry_t *e, uint64_t now, const char *why)
{
    if (e->state != E_WAIT && e->state != E_STUCK)
        d->nwait++;
    if (e->state == E_MOVING)
        e->state = E_WAIT;
    e->why = (uint16_t)(name_of(d, why) + 1);
    e->retry_ns = now + RETRY_NS;
}

/* A move of this drain is decided (move.c calls it exactly once). move.c
 * says why as "PID cannot move to node N: WHY"; the report groups by WHY. */
static void moved(void *arg, int error, uint32_t node, const char *why)
{
    move_arg_t a = *(move_arg_t *)arg;
    free(arg);
    struct sn_drain *d = a.d;
    entry_t *e = &d->v[a.i];
    d->inflight--;
    d->next_look_ns = 0;
    count_t *c = sent_to(d, e->node, false);
    if (error == 0) {
        e->state = E_MOVED;
        e->node = node;
        return;
    }
    if (c && c->n)
        c->n--;
    if (error == SN_EREFUSED && d->nrefused < sizeof d->refused / sizeof d->refused[0] && !refused(d, e->node))
        d->refused[d->nrefused++] = e->node;
    const char *bare = why ? strstr(why, ": ") : NULL;
    why = bare ? bare + 2 : why ? why : sn_strerror(error);
    if (error == SN_ENOPROC) {
        e->state = E_WAIT; /* (counted back by gone) */
        d->nwait++;
        gone(d, e);
    } else {
        later(d, e, sn__relay_now_ns(), why);
    }
}

/* Starts the moves of batch b (move.c decides each: moved), b empty after. */
static void go(sn_relay_t *r, batch_t *b)
{
    size_t n = b->n;
    b->n = 0;
    if (n)
        sn__move_start_many(r, b->node, ATTEMPT_MS, moved, b->pid, b->arg, n);
}

/* Adds the move of pid to node (arg: its move_arg_t) to the scan's group
 * for that node, which starts when full. */
static void gather(sn_relay_t *r, batches_t *g, uint32_t node, sn_pid_t pid, void *arg)
{
    size_t k = 0;
    while (k < g->n && g->b[k].node != node)
        k++;
    if (k == g->n) { /* a group for node: a slot not used yet, or the first one's, started first */
        if (g->n == DRAIN_OPEN) {
            k = 0;
            go(r, &g->b[0]);
        } else {
            g->n++;
        }
        g->b[k].node = node;
        g->b[k].n = 0;
    }
    batch_t *b = &g->b[k];
    b->pid[b->n] = pid;
    b->arg[b->n++] = arg;
    if (b->n == DRAIN_GROUP)
        go(r, b);
}

/* One look at entry i (WAIT or STUCK, due): its move joins a group of
 * the scan (g), or it stays. */
static void look(sn_relay_t *r, struct sn_drain *d, size_t i, uint64_t now, batches_t *g)
{
    entry_t *e = &d->v[i];
    sn_proc_row_t row;
    if (sn__sched_proc(r->sched, e->pid, &row) != 0) {
        gone(d, e);
        return;
    }
    if (e->state == E_STUCK) {
        e->retry_ns = now + RETRY_NS;
        return;
    }
    const sn_type_t *type = sn_type_find(r->sched, d->names[e->type]);
    if (type && (!type->marshal || !type->unmarshal)) {
        d->nwait--;
        d->nstuck++;
        e->state = E_STUCK;
        e->why = (uint16_t)(name_of(d, NO_MARSHAL) + 1);
        e->retry_ns = now + RETRY_NS;
        return;
    }
    /* (a process waiting for its yields moves if they are all sleeps:
     * the move says why if not) */
    peer_t *t = type ? pick_target(r, d, type) : NULL;
    move_arg_t *a = t ? malloc(sizeof *a) : NULL;
    count_t *c = t ? sent_to(d, t->node, true) : NULL;
    if (!a || !c) {
        free(a);
        later(d, e, now, t ? "out of memory" : "no other node takes it (up, not draining, with its type)");
        return;
    }
    *a = (move_arg_t){d, i};
    c->n++;
    e->state = E_MOVING;
    e->node = t->node;
    d->nwait--;
    d->inflight++;
    gather(r, g, t->node, e->pid, a);
}

/* A row of a rescan's snapshot, by PID. */
typedef struct seen_row {
    sn_pid_t pid;
    size_t row;
} seen_row_t;

static int by_pid(const void *a, const void *b)
{
    const seen_row_t *x = a, *y = b;
    if (x->pid.node != y->pid.node)
        return x->pid.node < y->pid.node ? -1 : 1;
    return x->pid.serial < y->pid.serial ? -1 : x->pid.serial > y->pid.serial;
}

/* Marks in known[] the rows of the snapshot (got of them) that the drain
 * has an entry for: the rows sorted by PID, each entry looked up there
 * (O(entries log rows): at the drain's start there are no entries, at
 * its end few rows). Out of memory: false, nothing marked. */
static bool mark_known(const struct sn_drain *d, const sn_proc_row_t *rows, size_t got, bool *known)
{
    if (!d->n || !got)
        return true;
    seen_row_t *key = malloc(got * sizeof *key);
    if (!key)
        return false;
    for (size_t k = 0; k < got; k++)
        key[k] = (seen_row_t){rows[k].pid, k};
    qsort(key, got, sizeof *key, by_pid);
    for (size_t i = 0; i < d->n; i++) {
        seen_row_t want = {d->v[i].pid, 0}, *hit = bsearch(&want, key, got, sizeof *key, by_pid);
        if (hit)
            known[hit->row] = true;
    }
    free(key);
    return true;
}

/* Adds this node's processes that the drain does not have yet (all of
 * them at its start; those that started here since, later). Only while no
 * move is in flight: entries may move in memory, and moves hold their
 * indexes. The names registry, the services supervisor and their helpers
 * (types sn.names, sn.services) are not the node's work: a drain leaves
 * them. Returns how many it added. */
static size_t rescan(sn_relay_t *r, struct sn_drain *d, uint64_t now)
{
    size_t total = sn__sched_snapshot(r->sched, NULL, 0, NULL), added = 0;
    sn_proc_row_t *rows = malloc((total + 1) * sizeof *rows);
    size_t got = rows ? sn__sched_snapshot(r->sched, rows, total, NULL) : 0;
    got = got < total ? got : total;
    bool *known = calloc(got + 1, sizeof *known);
    if (!known || !mark_known(d, rows, got, known))
        got = 0; /* out of memory: looked for again at the next rescan */
    if (d->n + got > d->cap) {
        entry_t *v = realloc(d->v, (d->n + got) * sizeof *v);
        if (v) {
            d->v = v;
            d->cap = d->n + got;
        } else {
            got = 0;
        }
    }
    for (size_t k = 0; k < got; k++) {
        if (known[k] || !strcmp(rows[k].type, "sn.names") || !strcmp(rows[k].type, "sn.services"))
            continue; /* (the node's names registry and supervisor stay: the copies on other nodes take over) */
        d->v[d->n++] = (entry_t){rows[k].pid, now, 0, name_of(d, rows[k].type), 0, E_WAIT};
        d->nwait++;
        added++;
    }
    free(known);
    free(rows);
    d->rescan_ns = now + RESCAN_NS;
    return added;
}

/* ------------------------------------------------------------- report */

typedef struct tally_group {
    char kind; /* 'm' moved (by type), 'n' moved (to node), 'e' ended, 'l' left */
    uint16_t name, why;
    uint32_t node;
    uint64_t n;
} group_t;

static void tally(group_t **g, size_t *n, size_t *cap, group_t key)
{
    for (size_t i = 0; i < *n; i++)
        if ((*g)[i].kind == key.kind && (*g)[i].name == key.name && (*g)[i].why == key.why &&
            (*g)[i].node == key.node) {
            (*g)[i].n++;
            return;
        }
    group_t *v = sn__grow(*g, cap, *n, sizeof *v, 16, 0);
    if (!v)
        return; /* out of memory: the line is missing from the report, not the totals */
    *g = v;
    key.n = 1;
    (*g)[(*n)++] = key;
}

/* The report, one line each: the totals, then moved by node and by type,
 * ended by type, left by type and reason. Caller frees; *left gets how
 * many are left. Entries still here are left, the others moved or ended. */
static char *report(sn_relay_t *r, struct sn_drain *d, uint64_t now, uint64_t *left, const char *tail)
{
    group_t *g = NULL;
    size_t ng = 0, cap = 0;
    uint64_t k[3] = {0, 0, 0}; /* moved, ended, left */
    for (size_t i = 0; i < d->n; i++) {
        entry_t *e = &d->v[i];
        if (e->state != E_MOVED && e->state != E_ENDED && !sn__migrate_here(r->sched, e->pid))
            gone(d, e);
        int kind = e->state == E_MOVED ? 0 : e->state == E_ENDED ? 1 : 2;
        k[kind]++;
        if (kind == 0)
            tally(&g, &ng, &cap, (group_t){'n', 0, 0, e->node, 0});
        tally(&g, &ng, &cap, (group_t){"mel"[kind], e -> type, kind == 2 ? e -> why : 0, 0, 0});
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        free(g);
        return NULL;
    }
    fprintf(f, "node %" PRIu32 " %s after %.1f s: %" PRIu64 " moved, %" PRIu64 " ended, %" PRIu64 " left\n", r->node,
            d->undrained ? "stopped draining (undrain)" : "drained", (double)(now - d->start_ns) / 1e9, k[0], k[1],
            k[2]);
    for (char kind = 'n'; kind; kind = kind == 'n' ? 'm' : kind == 'm' ? 'e' : kind == 'e' ? 'l' : 0)
        for (size_t i = 0; i < ng; i++) {
            group_t *x = &g[i];
            if (x->kind != kind)
                continue;
            if (kind == 'n')
                fprintf(f, "moved %" PRIu64 " to node %" PRIu32 "\n", x->n, x->node);
            else
                fprintf(f, "%s %" PRIu64 " %s%s%s\n",
                        kind == 'm'   ? "moved"
                        : kind == 'e' ? "ended"
                                      : "left",
                        x->n, d->names[x->name], x->why ? ": " : "", x->why ? d->names[x->why - 1] : "");
        }
    fputs(tail, f);
    fclose(f);
    free(g);
    *left = k[2];
    return text;
}

/* ------------------------------------------------------------- the drain */

static void drain_free(sn_relay_t *r)
{
    struct sn_drain *d = r->drain;
    if (!d)
        return;
    for (size_t i = 0; i < d->nnames; i++)
        free(d->names[i]);
    free(d->names);
    free(d->sent);
    free(d->v);
    free(d);
    r->drain = NULL;
}

/* The drain is over (no move in flight): its client gets the report;
 * with --then-stop the node stops once the answer had time to go. */
static void finish(sn_relay_t *r, struct sn_drain *d, uint64_t now)
{
    uint64_t left = 0;
    bool stop = d->then_stop && !d->undrained && r->on_stop;
    const char *tail = !d->then_stop || d->undrained ? ""
                       : r->on_stop ? "the node leaves its cluster and stops now (what is left gets CANCEL)\n"
                                    : "the node cannot stop itself here: it stays up, draining\n";
    char *text = report(r, d, now, &left, tail);
    SNLOG_INFO(r, "drain: %s", text ? text : "(no report: out of memory)");
    sn_wire_reply_t rep = {.id = d->id, .report = text, .left = left, .error = text ? 0 : SN_ENOMEM};
    if (!d->answered && d->ident_len)
        sn__relay_send_reply(r, d->ident, d->ident_len, &rep);
    d->answered = true;
    free(text);
    if (stop)
        d->stop_ns = now + STOP_DELAY_NS;
    else
        drain_free(r);
}

/* Looks at up to SCAN_MAX entries from the cursor, round the list: each
 * due one gets a look while fewer than DRAIN_INFLIGHT moves are under way.
 * The next look: when a move is decided (moved), at once if the scan was
 * cut short, else when the earliest retry may be due. */
static void scan(sn_relay_t *r, struct sn_drain *d, uint64_t now)
{
    size_t seen = 0;
    batches_t g;
    g.n = 0;
    while (seen < SCAN_MAX && seen < d->n && d->inflight < DRAIN_INFLIGHT && (d->nwait || d->nstuck)) {
        size_t i = d->cursor++ % d->n;
        entry_t *e = &d->v[i];
        seen++;
        if ((e->state == E_WAIT || e->state == E_STUCK) && e->retry_ns <= now)
            look(r, d, i, now, &g);
    }
    for (size_t k = 0; k < g.n; k++) /* (their decisions may come at once: moved) */
        go(r, &g.b[k]);
    if (d->n)
        d->cursor %= d->n;
    d->next_look_ns = d->inflight >= DRAIN_INFLIGHT ? UINT64_MAX : seen >= SCAN_MAX ? now : now + RETRY_NS / 4;
}

void sn__drain_tick(sn_relay_t *r, uint64_t now)
{
    struct sn_drain *d = r->drain;
    if (!d)
        return;
    if (d->stop_ns) {
        if (now >= d->stop_ns) {
            void (*stop)(void *) = r->on_stop;
            void *arg = r->on_stop_arg;
            drain_free(r);
            SNLOG_INFO(r, "drain --then-stop: stopping");
            stop(arg);
        }
        return;
    }
    if (!d->ending && now >= d->deadline_ns)
        d->ending = true;
    /* all moved, ended or stuck: a last look for processes that started
     * here meanwhile (while some are stuck, every RESCAN_NS) */
    if (!d->ending && !d->inflight && !d->nwait && (!d->nstuck || now >= d->rescan_ns) && rescan(r, d, now) == 0 &&
        !d->nstuck)
        d->ending = true;
    if (!d->ending && now >= d->next_look_ns)
        scan(r, d, now);
    if (d->ending && !d->inflight)
        finish(r, d, now);
}

uint64_t sn__drain_next_ns(sn_relay_t *r)
{
    struct sn_drain *d = r->drain;
    if (!d)
        return UINT64_MAX;
    if (d->stop_ns)
        return d->stop_ns;
    if (d->ending)
        return d->inflight ? UINT64_MAX : 0;
    uint64_t next = d->deadline_ns;
    if ((d->nwait || d->nstuck) && d->next_look_ns < next)
        next = d->next_look_ns;
    if (!d->inflight && !d->nwait && (d->nstuck ? d->rescan_ns : 0) < next)
        next = d->nstuck ? d->rescan_ns : 0;
    return next;
}

void sn__drain_start(sn_relay_t *r, const sn_wire_request_t *q, const unsigned char *ident, size_t ident_len)
{
    sn_wire_reply_t rep = {.id = q->id};
    struct sn_drain *d = NULL;
    if (r->drain) {
        rep.error = SN_EREFUSED;
        rep.reason = "a drain of this node is under way";
    } else if (r->no_steal) {
        rep.error = SN_ESHUTDOWN;
        rep.reason = "this node is shutting down";
    } else if (ident_len > sizeof d->ident || !(d = calloc(1, sizeof *d))) {
        rep.error = SN_ENOMEM;
        rep.reason = "out of memory";
    }
    if (rep.error) {
        sn__relay_send_reply(r, ident, ident_len, &rep);
        return;
    }
    uint64_t now = sn__relay_now_ns(), ms = q->timeout_ms ? q->timeout_ms : DRAIN_DEFAULT_MS;
    *d = (struct sn_drain){.r = r,
                           .start_ns = now,
                           .deadline_ns = now + ms * 1000000u,
                           .then_stop = q->then_stop,
                           .id = q->id,
                           .ident_len = ident_len};
    memcpy(d->ident, ident, ident_len);
    r->drain = d;
    r->draining = true;
    atomic_store_explicit(&r->draining_seen, true, memory_order_relaxed);
    sn__members_announce(r);
    rescan(r, d, now);
    SNLOG_INFO(r, "draining: %zu processes to move, up to %" PRIu64 " ms%s", d->n, ms,
               d->then_stop ? ", then stop" : "");
    sn__drain_tick(r, now);
}

void sn__drain_end(sn_relay_t *r, sn_wire_reply_t *rep)
{
    struct sn_drain *d = r->drain;
    rep->report = r->draining ? "no longer draining: this node takes work again\n" : "this node was not draining\n";
    if (r->draining)
        SNLOG_INFO(r, "undrain: taking work again");
    r->draining = false;
    atomic_store_explicit(&r->draining_seen, false, memory_order_relaxed);
    sn__members_announce(r);
    if (d && !d->stop_ns) { /* (a stop under way stays: the node has answered that it stops) */
        d->ending = true;
        d->undrained = true;
    }
}

void sn__drain_stop(sn_relay_t *r)
{
    struct sn_drain *d = r->drain;
    if (d && !d->stop_ns && !d->inflight) /* (move.c's stop decided every move) */
        finish(r, d, sn__relay_now_ns());
    else if (d && d->stop_ns)
        d->stop_ns = 0; /* the node stops anyway; no second stop */
}

void sn__drain_fini(sn_relay_t *r)
{
    drain_free(r);
}

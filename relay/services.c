/* services.c - services: named processes the cluster keeps running.
 *
 * Records. A service's record (its type, method, argument, restart policy
 * and intensity, its instance's PID, its restart count) is kept by the
 * name's owner, the first up member in rendezvous order (as names.c
 * ranks), with a copy on the second; each change goes to the copy, and a
 * membership change moves records as names.c does (ADOPT), so a record
 * survives its owner's death (tests/services.sh).
 *
 * Instances. The owner starts the instance on the least loaded member it
 * heard from lately that is not draining (START): that node runs the
 * names helper "spawn" (names.c), so the instance exists only under the
 * name. The owner monitors it: a DOWN with a failure (or, for `always`,
 * any end) starts it again; a DOWN `nodedown` or `noproc` (its node went)
 * starts it again once FENCE_WAIT_MS passed. PIDs and monitors follow
 * drain and migrate, so a move is not a restart. A START answered with
 * SN_EEXIST names the holder: that process is the instance.
 *
 * Never two instances. Every node that knows of a service sends PING to
 * each up member every TICK_MS and is answered (PONG). A node holds a
 * majority while it heard, within FENCE_MS, from more than half of the
 * members it knows (up, suspect or down; a node that left says BYE and
 * counts no more). A node without a majority gives each service instance
 * on it a CANCEL, forces it FORCE_MS later, and starts none; an owner
 * starts an instance only while it holds a majority, and after a
 * `nodedown` only once FENCE_WAIT_MS (more than FENCE_MS + FORCE_MS + a
 * tick) passed since that DOWN: by then the lost node, cut off from the
 * majority since before it was declared down, has stopped its instance.
 * docs/guarantees.md states the rule and its holes.
 *
 * Threads: the supervisor's state is its process state, touched only in
 * its steps; `hub` ties a scheduler to its relay (held through a step).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "relay_int.h"
#include "rendezvous.h"
#include "services.h"
#include "sn_node.h"
#include "svcrule.h"

#define NAME_MAX_LEN 255
#define TICK_MS 100
#define TAG_TICK 1
#define FENCE_MS 500                                      /* a majority heard within this holds */
#define FORCE_MS 150                                      /* a CANCEL not obeyed by then is forced */
#define FENCE_WAIT_MS (FENCE_MS + FORCE_MS + 2 * TICK_MS) /* after a nodedown, before a new start */
#define START_NS 5000000000ull                            /* a START with no answer by then is tried again */
#define REQUEST_NS 5000000000ull                          /* a CLI request with no answer by then fails */
#define INST_EVERY_NS 1000000000ull                       /* owners tell every node their instances */
#define NFAILS 32
#define HUB_MAX 64

/* ------------------------------------------------------------ the hub */

static pthread_mutex_t hub_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    sn_sched_t *sched;
    sn_relay_t *r;
    sn_pid_t proc;
    bool making;
} hub[HUB_MAX];

static int hub_find(sn_sched_t *sched)
{
    for (int i = 0; i < HUB_MAX; i++)
        if (hub[i].sched == sched)
            return i;
    return -1;
}

/* ------------------------------------------------------------ messages */

enum {
    Q_ADD = 1, /* add the service (owner); text: its spec */
    Q_RM,      /* forget it, stop its instance (owner) */
    Q_LIST,    /* records here and instances here (every node) */
    Q_COPY,    /* keep this copy (second); text: the record */
    Q_UNCOPY,  /* drop the copy (second) */
    Q_ADOPT,   /* take the record (new owner); text: the record */
    Q_START,   /* start the instance here (any node); text: the spec */
    Q_STARTED, /* the START's answer (owner) */
    Q_INST,    /* pid is the service's instance (every node) */
    Q_STOP,    /* CANCEL pid if it is here, forget it (every node) */
    Q_PING,    /* num: the sender's load; flags: draining */
    Q_PONG,
    Q_BYE,   /* the sender leaves: it counts no more */
    Q_REPLY, /* the answer to rid (asker) */
    L_ADD = 32,
    L_RM,
    L_LIST
};

typedef struct hdr {
    uint8_t op;
    uint8_t flags;
    uint16_t namelen;
    int32_t err;
    uint32_t origin;
    uint32_t pad;
    uint64_t rid, num;
    sn_pid_t pid, aux;
} hdr_t;

static sn_payload_t *msg_new(const hdr_t *h, const char *name, const char *text)
{
    size_t nl = h->namelen, tl = text ? strlen(text) : 0;
    sn_payload_t *p = sn_payload_new(SN_CT_BYTES, NULL, sizeof *h + nl + tl);
    if (!p)
        return NULL;
    memcpy(p->data, h, sizeof *h);
    memcpy(p->data + sizeof *h, name, nl);
    if (tl)
        memcpy(p->data + sizeof *h + nl, text, tl);
    return p;
}

/* Reads a message: false if it is not one. *text is NUL-terminated (caller frees). */
static bool msg_read(const sn_payload_t *p, hdr_t *h, char *name, char **text)
{
    if (!p || p->ctype != SN_CT_BYTES || p->len < sizeof *h)
        return false;
    memcpy(h, p->data, sizeof *h);
    if (h->namelen > NAME_MAX_LEN || h->namelen > p->len - sizeof *h || h->op < Q_ADD ||
        (h->op > Q_REPLY && (h->op < L_ADD || h->op > L_LIST)))
        return false;
    memcpy(name, p->data + sizeof *h, h->namelen);
    name[h->namelen] = 0;
    if (strlen(name) != h->namelen)
        return false;
    size_t off = sizeof *h + h->namelen;
    *text = strndup((const char *)p->data + off, p->len - off);
    return *text != NULL;
}

/* ------------------------------------------------------------ state */

enum { S_RUNNING = 0, S_STARTING, S_FAILING, S_STOPPED };
static const char *const state_names[] = {"running", "starting", "failing", "stopped"};
enum { P_ON_FAILURE = 0, P_ALWAYS };

typedef struct svc {
    char type[64], method[64];
    char *arg; /* NULL: none */
    int policy;
    uint32_t maxr, within_ms;
    uint64_t restarts;
    int state;
    bool owned, tried; /* tried: a start was asked once (the next ones are restarts) */
    sn_pid_t pid;      /* the instance, or none */
    uint64_t mtag;     /* its monitor while owned */
    sn_pid_t lost;     /* the instance whose DOWN came last */
    uint64_t next_ns;  /* no start before */
    uint64_t start_rid, start_ns;
    uint32_t over; /* backoffs in a row */
    uint64_t fails[NFAILS];
    size_t nextfail;
} svc_t;

typedef struct heard {
    uint32_t node;
    uint64_t at_ns, load;
    bool draining, bye;
} heard_t;

typedef struct pend { /* a CLI request of a process here */
    uint64_t rid, tag, since_ns;
    sn_pid_t pid;
    uint8_t op;
    uint32_t remaining;
    char *acc;
    size_t acclen;
} pend_t;

typedef struct starting { /* a START taken here: the names helper's await */
    uint64_t tag, rid;
    uint32_t origin;
    char name[NAME_MAX_LEN + 1];
} starting_t;

typedef struct doomed {
    sn_pid_t pid;
    uint64_t force_ns;
} doomed_t;

typedef struct sup {
    sn_sched_t *sched;
    uint32_t self;
    zhashx_t *svcs; /* name -> svc_t: owned records and copies */
    zhashx_t *inst; /* name -> sn_pid_t: every service's instance, as owners tell */
    heard_t *heard;
    size_t nheard, capheard;
    uint32_t *members; /* up, sorted */
    size_t nmembers;
    pend_t *pend;
    size_t npend, cappend;
    starting_t *starts;
    size_t nstarts, capstarts;
    doomed_t *doomed;
    size_t ndoomed, capdoomed;
    uint64_t next_id, inst_told_ns, fenced_ns;
    sn_step_out_t *out;
    sn_relay_t *r;
} sup_t;

static uint64_t new_id(sup_t *g)
{
    return ++g->next_id;
}

static void svc_free(void **item)
{
    svc_t *s = *item;
    if (s) {
        free(s->arg);
        free(s);
        *item = NULL;
    }
}

static void free_ptr(void **item)
{
    free(*item);
    *item = NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The up members (sorted) into g->members; true if they changed. hub_mu held. */
static bool members_look(sup_t *g, sn_relay_t *r)
{
    uint32_t v[1024];
    size_t n = 0;
    v[n++] = g->self;
    SN__FOR_PEERS(r, p)
    {
        uint32_t id = atomic_load_explicit(&p->node, memory_order_relaxed);
        if (id && id != g->self && !atomic_load_explicit(&p->down, memory_order_relaxed) && n < 1024)
            v[n++] = id;
    }
    qsort(v, n, sizeof *v, cmp_u32);
    bool changed = n != g->nmembers || memcmp(v, g->members, n * sizeof *v) != 0;
    uint32_t *m = changed ? realloc(g->members, n * sizeof *v) : g->members;
    if (changed && m) {
        memcpy(m, v, n * sizeof *v);
        g->members = m;
        g->nmembers = n;
    }
    return changed && m;
}

static void rank(const sup_t *g, const char *name, uint32_t *owner, uint32_t *second)
{
    uint32_t out[2] = {0, 0};
    sn__rdv_rank(name, strlen(name), g->members, g->nmembers, out, 2);
    *owner = out[0];
    *second = out[1];
}

static heard_t *heard_of(sup_t *g, uint32_t node, bool add)
{
    for (size_t i = 0; i < g->nheard; i++)
        if (g->heard[i].node == node)
            return &g->heard[i];
    if (!add)
        return NULL;
    heard_t *v = sn__grow(g->heard, &g->capheard, g->nheard, sizeof *v, 16, 0);
    if (!v)
        return NULL;
    g->heard = v;
    g->heard[g->nheard] = (heard_t){.node = node};
    return &g->heard[g->nheard++];
}

/* Does this node hold a majority now? Known: this node and every member
 * in its table (up, suspect or down) that did not say BYE. hub_mu held. */
static bool majority(sup_t *g, sn_relay_t *r, uint64_t now)
{
    size_t known = 1, fresh = 0;
    SN__FOR_PEERS(r, p)
    {
        uint32_t id = atomic_load_explicit(&p->node, memory_order_relaxed);
        if (!id || id == g->self)
            continue;
        heard_t *h = heard_of(g, id, false);
        if (h && h->bye)
            continue;
        known++;
        if (h && now - h->at_ns <= (uint64_t)FENCE_MS * 1000000u)
            fresh++;
    }
    return sn__svc_majority(fresh, known);
}

/* ------------------------------------------------------------ sending */

static void send_to(sup_t *g, uint32_t to, uint64_t tag, const hdr_t *h, const char *name, const char *text);
static void on_message_(sup_t *g, hdr_t *h, const char *name, const char *text);

/* A message to node `to`'s supervisor: taken here at once if `to` is this node. */
static void send_to(sup_t *g, uint32_t to, uint64_t tag, const hdr_t *h, const char *name, const char *text)
{
    if (to == g->self) {
        hdr_t c = *h;
        c.origin = g->self;
        on_message_(g, &c, name, text ? text : "");
        return;
    }
    sn_payload_t *p = msg_new(h, name, text);
    if (p)
        sn_out_send(g->out, (sn_pid_t){to, SN_SERVICES_SERIAL}, tag, &p);
}

static void to_all(sup_t *g, const hdr_t *h, const char *name, const char *text)
{
    for (size_t i = 0; i < g->nmembers; i++)
        send_to(g, g->members[i], 0, h, name, text);
}

static hdr_t hdr_for(sup_t *g, uint8_t op, const char *name)
{
    return (hdr_t){.op = op, .namelen = (uint16_t)strlen(name), .origin = g->self};
}

/* ------------------------------------------------------------ records */

/* "TYPE\nMETHOD\nPOLICY\nMAXR\nWITHIN\nRESTARTS\nSTATE\nPID\nHASARG\nARG" */
static char *svc_text(const svc_t *s)
{
    char pid[SN_PID_STRLEN];
    sn_pid_format(s->pid, pid, sizeof pid);
    size_t len = 0;
    char *t = NULL;
    FILE *f = open_memstream(&t, &len);
    if (!f)
        return NULL;
    fprintf(f, "%s\n%s\n%d\n%u\n%u\n%" PRIu64 "\n%d\n%s\n%d\n%s", s->type, s->method, s->policy, s->maxr, s->within_ms,
            s->restarts, s->state, sn_pid_is_none(s->pid) ? "-" : pid, s->arg != NULL, s->arg ? s->arg : "");
    fclose(f);
    return t;
}

static svc_t *svc_parse(const char *text)
{
    char *copy = strdup(text), *save = NULL;
    svc_t *s = calloc(1, sizeof *s);
    if (!copy || !s) {
        free(copy);
        free(s);
        return NULL;
    }
    const char *f[9];
    bool ok = true;
    for (int i = 0; i < 9 && ok; i++)
        ok = (f[i] = strtok_r(i ? NULL : copy, "\n", &save)) != NULL;
    const char *arg = ok ? strtok_r(NULL, "", &save) : NULL;
    if (ok && strlen(f[0]) < sizeof s->type && strlen(f[1]) < sizeof s->method) {
        snprintf(s->type, sizeof s->type, "%s", f[0]);
        snprintf(s->method, sizeof s->method, "%s", f[1]);
        s->policy = atoi(f[2]) == P_ALWAYS ? P_ALWAYS : P_ON_FAILURE;
        s->maxr = (uint32_t)strtoul(f[3], NULL, 10);
        s->within_ms = (uint32_t)strtoul(f[4], NULL, 10);
        s->restarts = strtoull(f[5], NULL, 10);
        s->state = atoi(f[6]);
        if (s->state < S_RUNNING || s->state > S_STOPPED)
            s->state = S_STARTING;
        if (strcmp(f[7], "-") == 0 || sn_pid_parse(f[7], &s->pid) != 0)
            s->pid = SN_PID_NONE;
        s->arg = atoi(f[8]) ? strdup(arg ? arg : "") : NULL;
        s->tried = s->restarts > 0 || !sn_pid_is_none(s->pid);
    } else {
        free(s);
        s = NULL;
    }
    free(copy);
    return s;
}

static void monitor(sup_t *g, svc_t *s)
{
    if (s->mtag || sn_pid_is_none(s->pid))
        return;
    s->mtag = new_id(g);
    sn_out_monitor(g->out, s->pid, s->mtag);
}

static void demonitor(sup_t *g, svc_t *s)
{
    if (!s->mtag)
        return;
    sn_out_demonitor(g->out, s->pid, s->mtag);
    s->mtag = 0;
}

/* The record's copy goes to its second (none up: none). */
static void send_copy(sup_t *g, const char *name, const svc_t *s)
{
    uint32_t owner, second;
    rank(g, name, &owner, &second);
    if (owner != g->self)
        second = owner;
    if (!second || second == g->self)
        return;
    char *t = svc_text(s);
    hdr_t h = hdr_for(g, Q_COPY, name);
    if (t)
        send_to(g, second, 0, &h, name, t);
    free(t);
}

static void tell_inst(sup_t *g, const char *name, sn_pid_t pid)
{
    hdr_t h = hdr_for(g, Q_INST, name);
    h.pid = pid;
    to_all(g, &h, name, NULL);
}

/* Takes the record as its owner: watched from here. */
static void own(sup_t *g, const char *name, svc_t *s)
{
    if (s->owned)
        return;
    s->owned = true;
    if (!sn_pid_is_none(s->pid)) {
        monitor(g, s);
        tell_inst(g, name, s->pid);
    } else if (s->state != S_STOPPED) {
        uint64_t after = sn__relay_now_ns() + (uint64_t)FENCE_WAIT_MS * 1000000u;
        s->next_ns = s->next_ns > after ? s->next_ns : after; /* (a START of the old owner may stand) */
    }
}

static void failed(svc_t *s, uint64_t now)
{
    s->fails[s->nextfail++ % NFAILS] = now;
    if (sn__svc_recent(s->fails, NFAILS, now, s->within_ms) > s->maxr) {
        s->over++;
        s->state = S_FAILING;
        s->next_ns = now + sn__svc_backoff_ms(s->over) * 1000000u;
    } else {
        s->over = 0;
        s->state = S_STARTING;
        s->next_ns = now;
    }
}

/* ------------------------------------------------------------ answers */

static void l_answer(sup_t *g, uint64_t rid, int err, const char *text);

static void reply(sup_t *g, uint32_t origin, uint64_t rid, int err, const char *text)
{
    if (origin == g->self) {
        l_answer(g, rid, err, text);
        return;
    }
    hdr_t h = {.op = Q_REPLY, .err = err, .origin = g->self, .rid = rid};
    send_to(g, origin, 0, &h, "", text);
}

static bool same_spec(const svc_t *a, const svc_t *b)
{
    return !strcmp(a->type, b->type) && !strcmp(a->method, b->method) && a->policy == b->policy && a->maxr == b->maxr &&
           a->within_ms == b->within_ms && !a->arg == !b->arg && (!a->arg || !strcmp(a->arg, b->arg));
}

static void owner_add(sup_t *g, const hdr_t *h, const char *name, const char *text)
{
    svc_t *s = svc_parse(text), *old = zhashx_lookup(g->svcs, name);
    if (!s) {
        reply(g, h->origin, h->rid, SN_EINVAL, "a bad service spec");
        return;
    }
    if (old) {
        bool same = same_spec(old, s);
        svc_free((void **)&s);
        own(g, name, old);
        reply(g, h->origin, h->rid, same ? 0 : SN_EEXIST, same ? "" : "another service has this name");
        return;
    }
    s->state = S_STARTING;
    s->pid = SN_PID_NONE;
    s->restarts = 0;
    s->tried = false;
    s->next_ns = 0;
    zhashx_insert(g->svcs, name, s);
    own(g, name, s);
    s->next_ns = 0;
    send_copy(g, name, s);
    reply(g, h->origin, h->rid, 0, "");
}

static void owner_rm(sup_t *g, const hdr_t *h, const char *name)
{
    svc_t *s = zhashx_lookup(g->svcs, name);
    if (!s) {
        reply(g, h->origin, h->rid, SN_ENOPROC, "no such service");
        return;
    }
    demonitor(g, s);
    hdr_t stop = hdr_for(g, Q_STOP, name);
    stop.pid = s->pid;
    to_all(g, &stop, name, NULL);
    hdr_t un = hdr_for(g, Q_UNCOPY, name);
    uint32_t owner, second;
    rank(g, name, &owner, &second);
    if (second && second != g->self)
        send_to(g, second, 0, &un, name, NULL);
    zhashx_delete(g->svcs, name);
    reply(g, h->origin, h->rid, 0, "");
}

/* LIST: "S NAME PID RESTARTS STATE POLICY TYPE METHOD" per owned record,
 * "H PID NODE" per instance here. */
static void owner_list(sup_t *g, const hdr_t *h)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        char buf[SN_PID_STRLEN];
        for (svc_t *s = zhashx_first(g->svcs); s; s = zhashx_next(g->svcs))
            if (s->owned)
                fprintf(f, "S %s %s %" PRIu64 " %s %s %s %s\n", (const char *)zhashx_cursor(g->svcs),
                        sn_pid_is_none(s->pid) ? "-" : sn_pid_format(s->pid, buf, sizeof buf), s->restarts,
                        state_names[s->state], s->policy == P_ALWAYS ? "always" : "on-failure", s->type, s->method);
        for (sn_pid_t *p = zhashx_first(g->inst); p; p = zhashx_next(g->inst)) {
            sn_proc_row_t row;
            if (!sn_pid_is_none(*p) && sn__sched_proc(g->sched, *p, &row) == 0)
                fprintf(f, "H %s %" PRIu32 "\n", sn_pid_format(*p, buf, sizeof buf), g->self);
        }
        fclose(f);
    }
    reply(g, h->origin, h->rid, text ? 0 : SN_ENOMEM, text ? text : "");
    free(text);
}

/* ------------------------------------------------------------ instances */

/* The member to start an instance on: the least loaded that this node
 * heard from lately and that is not draining (itself included); 0: none. */
static uint32_t place(sup_t *g, uint64_t now)
{
    sn_stats_t st;
    sn_sched_stats(g->sched, &st);
    bool self_ok = !atomic_load_explicit(&g->r->draining_seen, memory_order_relaxed);
    uint32_t best = self_ok ? g->self : 0;
    uint64_t best_load = self_ok ? st.live : UINT64_MAX;
    for (size_t i = 0; i < g->nmembers; i++) {
        heard_t *h = heard_of(g, g->members[i], false);
        if (!h || h->bye || h->draining || now - h->at_ns > (uint64_t)FENCE_MS * 1000000u)
            continue;
        if (h->load < best_load || (h->load == best_load && h->node < best)) {
            best = h->node;
            best_load = h->load;
        }
    }
    return best;
}

static void start(sup_t *g, const char *name, svc_t *s, uint64_t now)
{
    uint32_t node = place(g, now);
    if (!node)
        return;
    char *t = svc_text(s);
    if (!t)
        return;
    s->start_rid = new_id(g);
    s->start_ns = now;
    if (s->tried)
        s->restarts++;
    s->tried = true;
    hdr_t h = hdr_for(g, Q_START, name);
    h.rid = s->start_rid;
    if (sn__log_level() >= SN__LOG_DEBUG)
        sn__logf(g->self, SN__LOG_DEBUG, "service %s: starting it on node %" PRIu32, name, node);
    send_to(g, node, s->start_rid, &h, name, t);
    free(t);
    send_copy(g, name, s);
}

static void on_started(sup_t *g, const hdr_t *h, const char *name, const char *text)
{
    svc_t *s = zhashx_lookup(g->svcs, name);
    if (!s || !s->owned || s->start_rid != h->rid)
        return;
    s->start_rid = 0;
    uint64_t now = sn__relay_now_ns();
    sn_pid_t pid = h->pid;
    if (sn__log_level() >= SN__LOG_DEBUG)
        sn__logf(g->self, SN__LOG_DEBUG, "service %s: start answered by node %" PRIu32 ": %s", name, h->origin,
                 h->err ? sn_strerror(h->err) : "running");
    if (h->err == SN_EEXIST && sn_pid_eq(pid, s->lost)) {
        s->next_ns = now + (uint64_t)TICK_MS * 1000000u; /* (its name has not gone yet) */
        return;
    }
    if (h->err == 0 || (h->err == SN_EEXIST && !sn_pid_is_none(pid))) {
        s->pid = pid;
        s->state = S_RUNNING;
        monitor(g, s);
        tell_inst(g, name, pid);
    } else if (h->err == SN_EUNREACHABLE || h->err == SN_EREFUSED || h->err == SN_ENODEDOWN) {
        s->next_ns = now + (uint64_t)TICK_MS * 1000000u; /* (no majority there, draining, gone: again) */
    } else {
        if (sn__log_level() >= SN__LOG_INFO)
            sn__logf(g->self, SN__LOG_INFO, "service %s: its start failed: %s: %s", name, sn_strerror(h->err), text);
        failed(s, now);
    }
    send_copy(g, name, s);
}

/* A START for this node: the names helper takes the name and spawns. */
static void take_start(sup_t *g, const hdr_t *h, const char *name, const char *text, uint64_t now)
{
    hdr_t a = hdr_for(g, Q_STARTED, name);
    a.rid = h->rid;
    svc_t *s = svc_parse(text);
    starting_t *v = sn__grow(g->starts, &g->capstarts, g->nstarts, sizeof *v, 8, 0);
    a.err = !s || !v                                                           ? SN_ENOMEM
            : atomic_load_explicit(&g->r->draining_seen, memory_order_relaxed) ? SN_EREFUSED
            : !majority(g, g->r, now)                                          ? SN_EUNREACHABLE
                                                                               : 0;
    if (v)
        g->starts = v;
    if (a.err == 0) {
        starting_t *st = &g->starts[g->nstarts++];
        *st = (starting_t){.tag = new_id(g), .rid = h->rid, .origin = h->origin};
        snprintf(st->name, sizeof st->name, "%s", name);
        sn_payload_t *in = sn_payload_printf(SN_CT_TEXT, "%s\n%s\n%s%s%s", name, s->type, s->method, s->arg ? "\n" : "",
                                             s->arg ? s->arg : "");
        if (sn_out_spawn(g->out, st->tag, "sn.names", "spawn", &in, SN_YIELD_AWAIT) != 0) {
            sn_payload_destroy(&in);
            g->nstarts--;
            a.err = SN_ENOMEM;
        }
    }
    svc_free((void **)&s);
    if (a.err)
        send_to(g, h->origin, 0, &a, name, sn_strerror(a.err));
}

/* The names helper of a START ended: its answer goes to the owner. */
static bool start_done(sup_t *g, const sn_event_t *e)
{
    for (size_t i = 0; i < g->nstarts; i++) {
        if (g->starts[i].tag != e->tag)
            continue;
        starting_t st = g->starts[i];
        g->starts[i] = g->starts[--g->nstarts];
        hdr_t a = hdr_for(g, Q_STARTED, st.name);
        a.rid = st.rid;
        a.err = e->error;
        const char *why = e->data && e->data->len ? (const char *)e->data->data : "";
        char text[512];
        snprintf(text, sizeof text, "%.*s", e->data ? (int)e->data->len : 0, why);
        if (!e->error)
            sn_payload_get_pid(e->data, &a.pid);
        else if (e->error == SN_EEXIST) { /* "the name N is held by PID" */
            const char *by = strstr(text, " held by ");
            if (!by || sn_pid_parse(by + 9, &a.pid) != 0)
                a.pid = SN_PID_NONE;
        }
        if (!e->error)
            text[0] = 0;
        send_to(g, st.origin, 0, &a, st.name, text);
        return true;
    }
    return false;
}

/* The instance of an owned record ended, or its node went. */
static void on_down(sup_t *g, uint64_t tag, int err)
{
    for (svc_t *s = zhashx_first(g->svcs); s; s = zhashx_next(g->svcs)) {
        if (!s->owned || s->mtag != tag)
            continue;
        const char *name = zhashx_cursor(g->svcs);
        uint64_t now = sn__relay_now_ns();
        if (sn__log_level() >= SN__LOG_DEBUG)
            sn__logf(g->self, SN__LOG_DEBUG, "service %s: its instance ended: %s", name,
                     err ? sn_strerror(err) : "normal");
        s->mtag = 0;
        s->lost = s->pid;
        s->pid = SN_PID_NONE;
        if (err == SN_ENODEDOWN || err == SN_ENOPROC) {
            s->state = S_STARTING;
            s->next_ns = now + (uint64_t)FENCE_WAIT_MS * 1000000u;
        } else if (err == 0) {
            s->state = s->policy == P_ALWAYS ? S_STARTING : S_STOPPED;
            s->next_ns = now;
        } else {
            failed(s, now);
        }
        send_copy(g, name, s);
        return;
    }
}

/* Cancels the service instances on this node (no majority, or rm). */
static void doom(sup_t *g, sn_pid_t pid, const char *why)
{
    sn_proc_row_t row;
    if (sn_pid_is_none(pid) || sn__sched_proc(g->sched, pid, &row) != 0)
        return;
    for (size_t i = 0; i < g->ndoomed; i++)
        if (sn_pid_eq(g->doomed[i].pid, pid))
            return;
    doomed_t *v = sn__grow(g->doomed, &g->capdoomed, g->ndoomed, sizeof *v, 8, 0);
    if (!v)
        return;
    g->doomed = v;
    g->doomed[g->ndoomed++] = (doomed_t){pid, sn__relay_now_ns() + (uint64_t)FORCE_MS * 1000000u};
    sn_payload_t *reason = sn_payload_text(why);
    sn__sched_kill(g->sched, pid, false, &reason);
    sn_payload_destroy(&reason);
}

static void force_doomed(sup_t *g, uint64_t now)
{
    for (size_t i = 0; i < g->ndoomed;) {
        sn_proc_row_t row;
        if (sn__sched_proc(g->sched, g->doomed[i].pid, &row) != 0) {
            g->doomed[i] = g->doomed[--g->ndoomed];
        } else if (now >= g->doomed[i].force_ns) {
            sn_payload_t *reason = sn_payload_text("service stopped: it did not end on CANCEL");
            sn__sched_kill(g->sched, g->doomed[i].pid, true, &reason);
            sn_payload_destroy(&reason);
            g->doomed[i] = g->doomed[--g->ndoomed];
        } else {
            i++;
        }
    }
}

/* ------------------------------------------------------------ between supervisors */

static void on_ping(sup_t *g, const hdr_t *h, uint64_t now)
{
    heard_t *hd = heard_of(g, h->origin, true);
    if (!hd)
        return;
    hd->at_ns = now;
    hd->bye = h->op == Q_BYE;
    if (h->op == Q_BYE)
        return;
    hd->load = h->num;
    hd->draining = h->flags != 0;
    if (h->op == Q_PING) {
        sn_stats_t st;
        sn_sched_stats(g->sched, &st);
        hdr_t a = hdr_for(g, Q_PONG, "");
        a.num = st.live;
        a.flags = atomic_load_explicit(&g->r->draining_seen, memory_order_relaxed);
        send_to(g, h->origin, 0, &a, "", NULL);
    }
}

static void on_copy(sup_t *g, const hdr_t *h, const char *name, const char *text)
{
    svc_t *s = zhashx_lookup(g->svcs, name), *c = svc_parse(text);
    if (!c)
        return;
    if (h->op == Q_COPY && s && s->owned) { /* (ours stays: the sender's view lags) */
        svc_free((void **)&c);
        return;
    }
    if (s && s->owned) { /* ADOPT of a record we own: keep ours */
        svc_free((void **)&c);
        return;
    }
    zhashx_update(g->svcs, name, c);
    if (h->op == Q_ADOPT) {
        own(g, name, c);
        send_copy(g, name, c);
    }
}

static void on_inst(sup_t *g, const hdr_t *h, const char *name)
{
    if (h->op == Q_STOP) {
        doom(g, h->pid, "service removed");
        zhashx_delete(g->inst, name);
        return;
    }
    sn_pid_t *p = malloc(sizeof *p);
    if (!p)
        return;
    *p = h->pid;
    zhashx_update(g->inst, name, p);
}

/* ------------------------------------------------------------ the asker */

static pend_t *pend_find(sup_t *g, uint64_t rid, size_t *at)
{
    for (size_t i = 0; i < g->npend; i++)
        if (g->pend[i].rid == rid) {
            *at = i;
            return &g->pend[i];
        }
    return NULL;
}

static void complete(sup_t *g, sn_pid_t pid, uint64_t tag, int err, sn_payload_t *res)
{
    if (sn_complete_yield(g->sched, pid, tag, err, &res) != 0)
        sn_payload_destroy(&res);
}

static void pend_done(sup_t *g, size_t i)
{
    free(g->pend[i].acc);
    g->pend[i] = g->pend[--g->npend];
}

static void l_answer(sup_t *g, uint64_t rid, int err, const char *text)
{
    size_t i;
    pend_t *q = pend_find(g, rid, &i);
    if (!q)
        return;
    size_t tl = text ? strlen(text) : 0;
    if (q->op == L_LIST) {
        char *acc = realloc(q->acc, q->acclen + tl + 1);
        if (acc) {
            memcpy(acc + q->acclen, text ? text : "", tl);
            q->acclen += tl;
            acc[q->acclen] = 0;
            q->acc = acc;
        }
        if (--q->remaining > 0)
            return;
        complete(g, q->pid, q->tag, 0, sn_payload_text(q->acc ? q->acc : ""));
    } else {
        complete(g, q->pid, q->tag, err, err && tl ? sn_payload_text(text) : NULL);
    }
    pend_done(g, i);
}

/* A request of a helper here (h->aux the helper, h->rid its yield's tag). */
static void l_request(sup_t *g, const hdr_t *h, const char *name, const char *text)
{
    pend_t *v = sn__grow(g->pend, &g->cappend, g->npend, sizeof *v, 16, 0);
    if (!v) {
        complete(g, h->aux, h->rid, SN_ENOMEM, NULL);
        return;
    }
    g->pend = v;
    pend_t *q = &g->pend[g->npend++];
    *q = (pend_t){.rid = new_id(g), .tag = h->rid, .pid = h->aux, .op = h->op, .since_ns = sn__relay_now_ns()};
    static const uint8_t ask[] = {[L_ADD - L_ADD] = Q_ADD, [L_RM - L_ADD] = Q_RM, [L_LIST - L_ADD] = Q_LIST};
    hdr_t m = hdr_for(g, ask[h->op - L_ADD], name);
    m.rid = q->rid;
    if (h->op == L_LIST) {
        q->remaining = (uint32_t)g->nmembers;
        for (size_t k = 0; k < g->nmembers; k++)
            send_to(g, g->members[k], q->rid, &m, name, NULL);
        return;
    }
    uint32_t owner, second;
    rank(g, name, &owner, &second);
    send_to(g, owner, q->rid, &m, name, text);
}

/* A send of ours (tag) came back: a request fails, a START is tried again. */
static void send_failed(sup_t *g, uint64_t tag, int err)
{
    size_t i;
    pend_t *q = pend_find(g, tag, &i);
    if (q) {
        l_answer(g, tag, q->op == L_LIST ? 0 : err, NULL);
        return;
    }
    for (svc_t *s = zhashx_first(g->svcs); tag && s; s = zhashx_next(g->svcs))
        if (s->owned && s->start_rid == tag) {
            s->start_rid = 0;
            s->next_ns = sn__relay_now_ns();
        }
}

static void on_message_(sup_t *g, hdr_t *h, const char *name, const char *text)
{
    uint64_t now = sn__relay_now_ns();
    if (h->origin != g->self && h->op < L_ADD) {
        heard_t *hd = heard_of(g, h->origin, true);
        if (hd) {
            hd->at_ns = now;
            hd->bye = false;
        }
    }
    switch (h->op) {
    case Q_ADD:
        owner_add(g, h, name, text);
        break;
    case Q_RM:
        owner_rm(g, h, name);
        break;
    case Q_LIST:
        owner_list(g, h);
        break;
    case Q_COPY:
    case Q_ADOPT:
        on_copy(g, h, name, text);
        break;
    case Q_UNCOPY: {
        svc_t *s = zhashx_lookup(g->svcs, name);
        if (s && !s->owned)
            zhashx_delete(g->svcs, name);
        break;
    }
    case Q_START:
        take_start(g, h, name, text, now);
        break;
    case Q_STARTED:
        on_started(g, h, name, text);
        break;
    case Q_INST:
    case Q_STOP:
        on_inst(g, h, name);
        break;
    case Q_PING:
    case Q_PONG:
    case Q_BYE:
        on_ping(g, h, now);
        break;
    case Q_REPLY:
        l_answer(g, h->rid, h->err, text);
        break;
    default:
        l_request(g, h, name, text);
        break;
    }
}

/* ------------------------------------------------------------ the tick */

/* The membership changed: each record goes where it belongs now. */
static void rebalance(sup_t *g)
{
    zlistx_t *names = zhashx_keys(g->svcs);
    if (!names)
        return;
    for (const char *name = zlistx_first(names); name; name = zlistx_next(names)) {
        svc_t *s = zhashx_lookup(g->svcs, name);
        uint32_t owner, second;
        rank(g, name, &owner, &second);
        if (owner == g->self) {
            own(g, name, s);
            send_copy(g, name, s);
            continue;
        }
        if (s->owned) {
            char *t = svc_text(s);
            hdr_t h = hdr_for(g, Q_ADOPT, name);
            if (t)
                send_to(g, owner, 0, &h, name, t);
            free(t);
            demonitor(g, s);
            s->owned = false;
            s->start_rid = 0;
        }
        if (second != g->self)
            zhashx_delete(g->svcs, name);
    }
    zlistx_destroy(&names);
}

/* Owned records without an instance get one, when they may. */
static void supervise(sup_t *g, bool quorum, uint64_t now)
{
    for (svc_t *s = zhashx_first(g->svcs); s; s = zhashx_next(g->svcs)) {
        if (!s->owned || !sn_pid_is_none(s->pid) || s->state == S_STOPPED)
            continue;
        if (s->start_rid && now - s->start_ns > START_NS)
            s->start_rid = 0;
        if (!s->start_rid && quorum && now >= s->next_ns) {
            if (s->state == S_FAILING)
                s->state = S_STARTING;
            start(g, zhashx_cursor(g->svcs), s, now);
        }
    }
    if (now - g->inst_told_ns < INST_EVERY_NS)
        return;
    g->inst_told_ns = now;
    for (svc_t *s = zhashx_first(g->svcs); s; s = zhashx_next(g->svcs))
        if (s->owned && !sn_pid_is_none(s->pid))
            tell_inst(g, zhashx_cursor(g->svcs), s->pid);
}

/* No majority: every service instance on this node gets a CANCEL. */
static void fence(sup_t *g, uint64_t now)
{
    bool any = false;
    for (sn_pid_t *p = zhashx_first(g->inst); p; p = zhashx_next(g->inst)) {
        sn_proc_row_t row;
        if (!sn_pid_is_none(*p) && sn__sched_proc(g->sched, *p, &row) == 0) {
            doom(g, *p, "service fenced: this node does not hold a majority");
            any = true;
        }
    }
    if (any && now - g->fenced_ns > 1000000000ull) {
        g->fenced_ns = now;
        if (sn__log_level() >= SN__LOG_WARN)
            sn__logf(g->self, SN__LOG_WARN, "services: no majority heard within %d ms: stopping the instances here",
                     FENCE_MS);
    }
}

static void tick(sup_t *g, sn_relay_t *r)
{
    if (members_look(g, r))
        rebalance(g);
    uint64_t now = sn__relay_now_ns();
    if (zhashx_size(g->svcs) || zhashx_size(g->inst)) {
        sn_stats_t st;
        sn_sched_stats(g->sched, &st);
        hdr_t h = hdr_for(g, Q_PING, "");
        h.num = st.live;
        h.flags = atomic_load_explicit(&r->draining_seen, memory_order_relaxed);
        for (size_t i = 0; i < g->nmembers; i++)
            if (g->members[i] != g->self)
                send_to(g, g->members[i], 0, &h, "", NULL);
    }
    bool quorum = majority(g, r, now);
    if (!quorum)
        fence(g, now);
    supervise(g, quorum, now);
    force_doomed(g, now);
    for (size_t i = 0; i < g->npend;) {
        if (now - g->pend[i].since_ns > REQUEST_NS) {
            complete(g, g->pend[i].pid, g->pend[i].tag, SN_ETIMEDOUT, NULL);
            pend_done(g, i);
        } else {
            i++;
        }
    }
    sn_out_sleep(g->out, TAG_TICK, TICK_MS);
}

static void on_event(sup_t *g, sn_event_t *e)
{
    if (e->type == SN_EV_MESSAGE) {
        hdr_t h;
        char name[NAME_MAX_LEN + 1], *text = NULL;
        if (!msg_read(e->data, &h, name, &text)) {
            if (g->r)
                sn__add(&g->r->bad_frames, 1);
            return;
        }
        bool local = sn_pid_is_none(e->from);
        if (!local)
            h.origin = e->from.node;
        if (h.op < L_ADD || local)
            on_message_(g, &h, name, text);
        free(text);
    } else if (e->type == SN_EV_DOWN) {
        on_down(g, e->tag, e->error);
    } else if (e->tag == TAG_TICK) {
        tick(g, g->r);
    } else if (!start_done(g, e) && e->error) {
        send_failed(g, e->tag, e->error);
    }
}

/* ------------------------------------------------------------ the type */

enum { ROLE_SUP = 1, ROLE_ASK };

typedef struct sstate {
    int role;
    sup_t sup;
    int phase;
    int op; /* ROLE_ASK: L_ADD, L_RM, L_LIST */
    char *text;
} sstate_t;

static int sup_init(sn_ctx_t *ctx, sup_t *g)
{
    sn_sched_t *sched = sn_ctx_sched(ctx);
    pthread_mutex_lock(&hub_mu);
    int i = hub_find(sched);
    bool ok = i >= 0 && hub[i].making && sn_pid_is_none(hub[i].proc);
    if (ok)
        hub[i].proc = sn_ctx_self(ctx);
    pthread_mutex_unlock(&hub_mu);
    if (!ok)
        return SN_EINVAL; /* (only the node makes its supervisor) */
    g->sched = sched;
    g->self = sn_sched_node_id(sched);
    g->next_id = TAG_TICK;
    g->svcs = zhashx_new();
    g->inst = zhashx_new();
    if (!g->svcs || !g->inst)
        return SN_ENOMEM;
    zhashx_set_destructor(g->svcs, svc_free);
    zhashx_set_destructor(g->inst, free_ptr);
    return 0;
}

/* add: "NAME\nTYPE\nMETHOD\nRESTART\nMAXR\nWITHIN[\nARG]"; rm: NAME; ls: nothing. */
static int svc_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    sstate_t *st = state;
    const sn_payload_t *in = *input;
    if (!strcmp(method, "supervisor")) {
        st->role = ROLE_SUP;
        return sup_init(ctx, &st->sup);
    }
    st->role = ROLE_ASK;
    st->op = !strcmp(method, "add") ? L_ADD : !strcmp(method, "rm") ? L_RM : !strcmp(method, "ls") ? L_LIST : 0;
    if (!st->op)
        return SN_ENOMETHOD;
    if (st->op != L_LIST && (!in || !in->len))
        return SN_EINVAL;
    st->text = in ? strndup((const char *)in->data, in->len) : strdup("");
    return st->text ? 0 : SN_ENOMEM;
}

static void sup_step(sn_ctx_t *ctx, sup_t *g, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    pthread_mutex_lock(&hub_mu);
    int i = hub_find(g->sched);
    sn_relay_t *r = i >= 0 && sn_pid_eq(hub[i].proc, sn_ctx_self(ctx)) ? hub[i].r : NULL;
    g->out = out;
    g->r = r;
    out->status = SN_IDLE;
    if (!r)
        sn_out_done(out, NULL);
    else if (n == 0)
        tick(g, r);
    for (size_t k = 0; r && k < n; k++) {
        if (ev[k].type == SN_EV_CANCEL) { /* (the node stops: the others count it no more) */
            hdr_t h = hdr_for(g, Q_BYE, "");
            for (size_t m = 0; m < g->nmembers; m++)
                if (g->members[m] != g->self)
                    send_to(g, g->members[m], 0, &h, "", NULL);
            sn_out_done(out, NULL);
            break;
        }
        on_event(g, &ev[k]);
    }
    g->out = NULL;
    g->r = NULL;
    pthread_mutex_unlock(&hub_mu);
}

/* A helper: one request to its node's supervisor, its answer the result. */
static void ask_step(sstate_t *st, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    static const char *const cmds[] = {
        [L_ADD - L_ADD] = "sn.service.add", [L_RM - L_ADD] = "sn.service.rm", [L_LIST - L_ADD] = "sn.service.list"};
    out->status = SN_WAIT;
    if (st->phase == 0) {
        sn_yield_t *y = sn_out_yield(out, 0, cmds[st->op - L_ADD], 1);
        if (y)
            y->data = sn_payload_text(st->text);
        st->phase = 1;
        return;
    }
    for (size_t k = 0; k < n; k++) {
        if (ev[k].type == SN_EV_CANCEL) {
            sn_out_fail(out, SN_ECANCELED, "canceled");
            return;
        }
        if (ev[k].type != SN_EV_YIELD_COMPLETE)
            continue;
        if (ev[k].error)
            sn_out_fail(out, ev[k].error, "%s", ev[k].data ? (const char *)ev[k].data->data : sn_strerror(ev[k].error));
        else
            sn_out_done(out, &ev[k].data);
        return;
    }
}

static void svc_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    sstate_t *st = state;
    if (st->role == ROLE_SUP)
        sup_step(ctx, &st->sup, ev, n, out);
    else
        ask_step(st, ev, n, out);
}

static void svc_close(sn_ctx_t *ctx, void *state)
{
    (void)ctx;
    sstate_t *st = state;
    sup_t *g = &st->sup;
    zhashx_destroy(&g->svcs);
    zhashx_destroy(&g->inst);
    for (size_t i = 0; i < g->npend; i++)
        free(g->pend[i].acc);
    free(g->pend);
    free(g->heard);
    free(g->members);
    free(g->starts);
    free(g->doomed);
    free(st->text);
}

/* No marshal: the supervisor and the helpers stay on their node. */
static const sn_type_t svc_type = {.name = "sn.services",
                                   .version = 1,
                                   .state_size = sizeof(sstate_t),
                                   .init = svc_init,
                                   .step = svc_step,
                                   .close = svc_close};

/* ------------------------------------------------------------ commands */

/* add's text into the name and a record's text: 0 or SN_EINVAL. */
static int add_spec(const char *in, char *name, char **spec)
{
    char *copy = strdup(in), *save = NULL;
    if (!copy)
        return SN_ENOMEM;
    const char *f[6];
    bool ok = true;
    for (int i = 0; i < 6 && ok; i++)
        ok = (f[i] = strtok_r(i ? NULL : copy, "\n", &save)) != NULL;
    const char *arg = ok ? strtok_r(NULL, "", &save) : NULL;
    int policy = ok && !strcmp(f[3], "always") ? P_ALWAYS : P_ON_FAILURE;
    ok = ok && strlen(f[0]) <= NAME_MAX_LEN && strlen(f[1]) < 64 && strlen(f[2]) < 64 &&
         (!strcmp(f[3], "always") || !strcmp(f[3], "on-failure"));
    if (ok) {
        snprintf(name, NAME_MAX_LEN + 1, "%s", f[0]);
        svc_t s = {.policy = policy,
                   .maxr = (uint32_t)strtoul(f[4], NULL, 10),
                   .within_ms = (uint32_t)strtoul(f[5], NULL, 10),
                   .state = S_STARTING,
                   .pid = SN_PID_NONE,
                   .arg = (char *)arg};
        snprintf(s.type, sizeof s.type, "%s", f[1]);
        snprintf(s.method, sizeof s.method, "%s", f[2]);
        ok = (*spec = svc_text(&s)) != NULL;
    }
    free(copy);
    return ok ? 0 : SN_EINVAL;
}

/* "sn.service.add", "sn.service.rm", "sn.service.list": handed to this
 * node's supervisor, which completes the yield. */
static void svc_command(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    int op = (int)(intptr_t)arg, rc = 0;
    sn_payload_t *data = sn_take(&req->data);
    char *text = data ? strndup((const char *)data->data, data->len) : strdup("");
    char name[NAME_MAX_LEN + 1] = "", *spec = NULL;
    if (!text)
        rc = SN_ENOMEM;
    else if (op == L_ADD)
        rc = add_spec(text, name, &spec);
    else if (op == L_RM && (!*text || strlen(text) > NAME_MAX_LEN))
        rc = SN_EINVAL;
    else if (op == L_RM)
        snprintf(name, sizeof name, "%s", text);
    sn_pid_t sup = SN_PID_NONE;
    pthread_mutex_lock(&hub_mu);
    int i = hub_find(sched);
    sn_relay_t *r = i >= 0 ? hub[i].r : NULL;
    pthread_mutex_unlock(&hub_mu);
    if (!rc && r)
        sup = sn__services_process(r);
    if (!rc && sn_pid_is_none(sup))
        rc = SN_ENOCMD;
    if (!rc) {
        hdr_t h = {.op = (uint8_t)op, .namelen = (uint16_t)strlen(name), .rid = req->tag, .aux = req->from};
        sn_payload_t *m = msg_new(&h, name, spec);
        rc = !m ? SN_ENOMEM : sn_send(sched, sup, &m);
        sn_payload_destroy(&m);
    }
    free(spec);
    free(text);
    sn_payload_destroy(&data);
    if (rc != 0)
        sn_complete_yield(sched, req->from, req->tag, rc, NULL);
}

int sn__services_init(sn_relay_t *r)
{
    pthread_mutex_lock(&hub_mu);
    int i = hub_find(r->sched);
    if (i < 0)
        i = hub_find(NULL);
    if (i >= 0)
        hub[i] = (__typeof__(hub[0])){.sched = r->sched, .r = r};
    pthread_mutex_unlock(&hub_mu);
    if (i < 0)
        return SN_ENOMEM;
    if (!sn_type_find(r->sched, svc_type.name)) {
        int rc = sn_type_register(r->sched, &svc_type);
        if (rc != 0)
            return rc;
    }
    static const struct {
        const char *name;
        int op;
    } cmds[] = {{"sn.service.add", L_ADD}, {"sn.service.rm", L_RM}, {"sn.service.list", L_LIST}};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++)
        if (sn_command_id(r->sched, cmds[k].name) < 0) {
            int rc = sn_command_register(r->sched, cmds[k].name, svc_command, (void *)(intptr_t)cmds[k].op);
            if (rc < 0)
                return rc;
        }
    return 0;
}

void sn__services_fini(sn_relay_t *r)
{
    pthread_mutex_lock(&hub_mu);
    for (int i = 0; i < HUB_MAX; i++)
        if (hub[i].r == r)
            hub[i] = (__typeof__(hub[0])){0};
    pthread_mutex_unlock(&hub_mu);
}

sn_pid_t sn__services_process(sn_relay_t *r)
{
    for (int tries = 0; tries < 1000; tries++) {
        pthread_mutex_lock(&hub_mu);
        int i = hub_find(r->sched);
        if (i < 0 || hub[i].r != r) {
            pthread_mutex_unlock(&hub_mu);
            return SN_PID_NONE;
        }
        sn_pid_t pid = hub[i].proc;
        bool wait = hub[i].making;
        if (sn_pid_is_none(pid) && !wait)
            hub[i].making = true;
        pthread_mutex_unlock(&hub_mu);
        if (!sn_pid_is_none(pid))
            return pid;
        if (wait) { /* (another thread makes it) */
            zclock_sleep(1);
            continue;
        }
        sn_pid_t made = SN_PID_NONE;
        int rc = sn_spawn(r->sched, svc_type.name, "supervisor", NULL, NULL, NULL, &made);
        pthread_mutex_lock(&hub_mu);
        if ((i = hub_find(r->sched)) >= 0) {
            hub[i].making = false;
            if (rc != 0)
                hub[i].proc = SN_PID_NONE;
        }
        pthread_mutex_unlock(&hub_mu);
        return rc == 0 ? made : SN_PID_NONE;
    }
    return SN_PID_NONE;
}

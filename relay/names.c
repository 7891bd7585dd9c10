/* names.c - the cluster's names: a registry process on every node.
 *
 * Where a name lives. Its owner is the first up member in rendezvous
 * order for the name (common/rendezvous.h) as this node sees the
 * membership; its copy is on the second. The owner records name -> PID,
 * refuses a taken name (the answer names the holder) and monitors the
 * holder (sn_out_monitor: one DOWN when it ends or its node goes down),
 * so the name ends with its process. A PID never changes when a process
 * moves, so a name follows its process through stealing, migrate and
 * drain without a word to the registry (tests/names.sh: migrate).
 *
 * Copies. A registration is answered only once the copy holder has
 * acknowledged its copy (or there is none up), so a name whose register
 * completed survives its owner's death. When the membership changes
 * (looked at every TICK_MS), each registry ranks its names again: a copy
 * whose owner went down becomes the record (and monitors the holder:
 * a holder gone meanwhile gives its DOWN at once), a record sends its
 * copy to the new second, and a record or copy this node no longer keeps
 * goes to the new owner (ADOPT) and is dropped here. A registration in
 * flight when its owner dies fails with nodedown (the request or its
 * answer was lost) or times out (REQUEST_NS): it may or may not stand,
 * whereis says (tests/names.sh: owner-killed).
 *
 * The cache. A node's registry keeps the answers its lookups got
 * (name -> PID) and monitors each cached PID: the owner notes which nodes
 * cached a name and tells them when it is unregistered or given to
 * another process (INVAL); a DOWN drops the entry.
 *
 * Threads: the registry's state is its process state, touched only in its
 * steps (one at a time). `hub` ties a scheduler to its relay; its lock is
 * held through a registry's step (peers are read then) and by init/fini,
 * so a relay is never freed under a step.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "names.h"
#include "relay_int.h"
#include "rendezvous.h"
#include "sn_node.h"

#define NAME_MAX_LEN 255
#define TICK_MS 100
#define TAG_TICK 1
#define REQUEST_NS 5000000000ull /* a request with no answer by then fails (SN_ETIMEDOUT) */
#define HUB_MAX 64               /* relays in one program (tests run a few) */

/* ------------------------------------------------------------ the hub */

static pthread_mutex_t hub_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    sn_sched_t *sched;
    sn_relay_t *r;
    sn_pid_t registry;
    bool making; /* a thread is spawning it (hub_mu released meanwhile) */
} hub[HUB_MAX];

static int hub_find(sn_sched_t *sched)
{
    for (int i = 0; i < HUB_MAX; i++)
        if (hub[i].sched == sched)
            return i;
    return -1;
}

/* ------------------------------------------------------------ messages */

/* What registries send each other and what the commands hand their own
 * registry: this header (host order: the nodes of a cluster run one
 * build), the name, then text (LIST answers). */
enum {
    Q_REG = 1,  /* register holder (owner) */
    Q_GIVE,     /* aux gives its name to holder (owner) */
    Q_UNREG,    /* holder drops the name (owner) */
    Q_WHERE,    /* who holds it (owner) */
    Q_LIST,     /* this node's records (any node) */
    Q_COPY,     /* keep a copy; ACK it (copy holder) */
    Q_UNCOPY,   /* drop the copy (copy holder) */
    Q_ADOPT,    /* take the record: the membership changed (new owner) */
    Q_ACK,      /* copy kept (owner) */
    Q_REPLY,    /* the answer to rid (asker) */
    Q_INVAL,    /* the cached name no longer names holder (cacher) */
    Q_MON,      /* aux watches the name; text: its tag (owner) */
    Q_DEMON,    /* aux (rid its tag) no longer watches it (owner) */
    Q_NDOWN,    /* the name's DOWN for aux (rid its tag): holder, err (watcher's node) */
    L_REG = 32, /* from a command on this node: rid is the yield's tag, aux the yielder */
    L_GIVE,
    L_UNREG,
    L_WHERE,
    L_LIST,
    L_MON,
    L_DEMON
};

typedef struct hdr {
    uint8_t op;
    uint8_t flags; /* REG: F_RESERVE; MON: F_AGAIN */
    uint16_t namelen;
    int32_t err;
    uint32_t origin; /* the asking node */
    uint32_t pad2;
    uint64_t rid; /* the asker's request id */
    sn_pid_t holder, aux;
} hdr_t;

static sn_payload_t *msg_new(const hdr_t *h, const char *name, const char *text, size_t textlen)
{
    size_t nl = h->namelen;
    sn_payload_t *p = sn_payload_new(SN_CT_BYTES, NULL, sizeof *h + nl + textlen);
    if (!p)
        return NULL;
    memcpy(p->data, h, sizeof *h);
    memcpy(p->data + sizeof *h, name, nl);
    if (textlen)
        memcpy(p->data + sizeof *h + nl, text, textlen);
    return p;
}

/* Reads a message: false if it is not one (the caller counts it). */
static bool msg_read(const sn_payload_t *p, hdr_t *h, char *name, const char **text, size_t *textlen)
{
    if (!p || p->ctype != SN_CT_BYTES || p->len < sizeof *h)
        return false;
    memcpy(h, p->data, sizeof *h);
    if (h->namelen > NAME_MAX_LEN || h->namelen > p->len - sizeof *h || h->op < Q_REG ||
        (h->op > Q_NDOWN && (h->op < L_REG || h->op > L_DEMON)))
        return false;
    memcpy(name, p->data + sizeof *h, h->namelen);
    name[h->namelen] = 0;
    if (strlen(name) != h->namelen)
        return false;
    *text = (const char *)p->data + sizeof *h + h->namelen;
    *textlen = p->len - sizeof *h - h->namelen;
    return true;
}

/* ------------------------------------------------------------ state */

/* REG for a spawn --name helper, which gives the name to the process it
 * spawns next (GIVE) or drops it: a REG of another process meanwhile
 * waits for that (parked), so that a refusal names the process that
 * holds the name, not the helper (tests/names.sh: race). */
#define F_RESERVE 1

/* MON sent again by the watcher's node because the owner it asked went
 * down: no answer is awaited, a name nobody holds gives the DOWN. */
#define F_AGAIN 2

typedef struct parked {
    uint32_t origin;
    uint64_t rid;
    sn_pid_t holder;
} parked_t;

/* A process that watches a name (sn_out_name_monitor), as the owner
 * keeps it: ADOPT carries these as they are (one build per cluster). */
typedef struct watcher {
    sn_pid_t pid;
    uint64_t tag;
    uint32_t origin; /* its node's registry keeps the monitor and gives the DOWN */
    uint32_t pad;
} watcher_t;

typedef struct rec {
    sn_pid_t holder;
    uint64_t mtag; /* the monitor of holder while this node owns the record (0: a copy) */
    bool reserved; /* held by a spawn --name helper (F_RESERVE) */
    uint32_t *cachers;
    size_t ncachers, capcachers;
    parked_t *parked; /* REGs waiting for the reservation's end */
    size_t nparked, capparked;
    watcher_t *watchers; /* each gets the name's DOWN (fire) */
    size_t nwatchers, capwatchers;
} rec_t;

typedef struct cent {
    sn_pid_t pid;
    uint64_t mtag;
} cent_t;

typedef struct mon { /* a name monitor of a process here, as its node keeps it */
    sn_pid_t watcher;
    uint64_t tag;   /* the watcher's */
    uint64_t wtag;  /* our monitor of the watcher: its end drops this */
    uint32_t owner; /* the node asked to watch; down: ask the new one */
    char name[NAME_MAX_LEN + 1];
} mon_t;

typedef struct pend { /* a request of a process here, waiting for its answer */
    uint64_t rid, tag, since_ns;
    sn_pid_t pid;
    uint8_t op;
    uint32_t remaining; /* L_LIST: answers still to come */
    char *acc;          /* L_LIST: the lines so far */
    size_t acclen;
    char name[NAME_MAX_LEN + 1];
} pend_t;

typedef struct oack { /* a registration answered once its copy is kept */
    uint64_t rid, orid;
    uint32_t origin;
    sn_pid_t holder;
} oack_t;

typedef struct registry {
    sn_sched_t *sched;
    uint32_t self;
    zhashx_t *recs;  /* name -> rec_t: records (mtag != 0) and copies */
    zhashx_t *cache; /* name -> cent_t */
    zhashx_t *bytag; /* "%llx" monitor tag -> "r" or "c" and the name */
    pend_t *pend;
    size_t npend, cappend;
    oack_t *oack;
    size_t noack, capoack;
    mon_t *mons;
    size_t nmons, capmons;
    uint32_t *members; /* the up members as last seen, sorted */
    size_t nmembers, capmembers;
    uint64_t next_id;
    uint64_t bad;
    sn__log_limit_t bad_log;
    sn_step_out_t *out; /* during a step */
    sn_relay_t *r;      /* during a step (hub_mu held) */
} registry_t;

static uint64_t new_id(registry_t *g)
{
    return ++g->next_id;
}

static void rec_free(void **item)
{
    rec_t *rec = *item;
    if (rec) {
        free(rec->cachers);
        free(rec->parked);
        free(rec->watchers);
        free(rec);
        *item = NULL;
    }
}

static void free_ptr(void **item)
{
    free(*item);
    *item = NULL;
}

static void *dup_str(const void *s)
{
    return strdup(s);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The up members as this node sees them (itself and each peer not down),
 * sorted, into g->members; true if the set changed. hub_mu held. */
static bool members_look(registry_t *g, sn_relay_t *r)
{
    uint32_t *v = NULL;
    size_t n = 0, cap = 0;
    uint32_t *grown = sn__grow(v, &cap, n, sizeof *v, 16, 0);
    if (!grown)
        return false;
    v = grown;
    v[n++] = g->self;
    SN__FOR_PEERS(r, p)
    {
        uint32_t id = atomic_load_explicit(&p->node, memory_order_relaxed);
        if (id == g->self || atomic_load_explicit(&p->down, memory_order_relaxed))
            continue;
        grown = sn__grow(v, &cap, n, sizeof *v, 16, 0);
        if (!grown)
            break;
        v = grown;
        v[n++] = id;
    }
    qsort(v, n, sizeof *v, cmp_u32);
    bool changed = n != g->nmembers || memcmp(v, g->members, n * sizeof *v) != 0;
    free(g->members);
    g->members = v;
    g->nmembers = n;
    g->capmembers = cap;
    return changed;
}

/* The name's keeper and copy holder (0: none) among the members. */
static void rank(const registry_t *g, const char *name, uint32_t *owner, uint32_t *second)
{
    uint32_t out[2] = {0, 0};
    sn__rdv_rank(name, strlen(name), g->members, g->nmembers, out, 2);
    *owner = out[0];
    *second = out[1];
}

/* Sends a message to the registry of node `to` (never this one). */
static void send_to(registry_t *g, uint32_t to, uint64_t tag, const hdr_t *h, const char *name, const char *text,
                    size_t textlen)
{
    sn_payload_t *p = msg_new(h, name, text, textlen);
    if (p)
        sn_out_send(g->out, (sn_pid_t){to, SN_NAMES_SERIAL}, tag, &p);
}

static void monitor(registry_t *g, const char *kind, const char *name, sn_pid_t pid, uint64_t *mtag)
{
    *mtag = new_id(g);
    char key[32], val[NAME_MAX_LEN + 2];
    snprintf(key, sizeof key, "%" PRIx64, *mtag);
    snprintf(val, sizeof val, "%s%s", kind, name);
    zhashx_update(g->bytag, key, val);
    sn_out_monitor(g->out, pid, *mtag);
}

static void demonitor(registry_t *g, sn_pid_t pid, uint64_t *mtag)
{
    if (!*mtag)
        return;
    char key[32];
    snprintf(key, sizeof key, "%" PRIx64, *mtag);
    zhashx_delete(g->bytag, key);
    sn_out_demonitor(g->out, pid, *mtag);
    *mtag = 0;
}

/* ------------------------------------------------------------ answers */

static void l_answer(registry_t *g, uint64_t rid, int err, sn_pid_t holder, const char *text, size_t textlen);
static void complete(registry_t *g, sn_pid_t pid, uint64_t tag, int err, sn_payload_t *res);

/* The answer to node origin's request orid: sent, or taken here. */
static void reply(registry_t *g, uint32_t origin, uint64_t orid, int err, sn_pid_t holder, const char *text,
                  size_t textlen)
{
    if (origin == g->self) {
        l_answer(g, orid, err, holder, text, textlen);
        return;
    }
    hdr_t h = {.op = Q_REPLY, .err = err, .origin = g->self, .rid = orid, .holder = holder};
    send_to(g, origin, 0, &h, "", text, textlen);
}

static void add_cacher(rec_t *rec, uint32_t node)
{
    for (size_t i = 0; i < rec->ncachers; i++)
        if (rec->cachers[i] == node)
            return;
    uint32_t *v = sn__grow(rec->cachers, &rec->capcachers, rec->ncachers, sizeof *v, 4, 0);
    if (!v)
        return; /* (out of memory: that node's cache may stay stale until the holder ends) */
    rec->cachers = v;
    rec->cachers[rec->ncachers++] = node;
}

static void cache_drop(registry_t *g, const char *name, sn_pid_t pid);

/* The record no longer names rec->holder: each node that cached it hears. */
static void tell_cachers(registry_t *g, const char *name, rec_t *rec)
{
    hdr_t h = {.op = Q_INVAL, .namelen = (uint16_t)strlen(name), .origin = g->self, .holder = rec->holder};
    for (size_t i = 0; i < rec->ncachers; i++) {
        if (rec->cachers[i] == g->self)
            cache_drop(g, name, rec->holder);
        else
            send_to(g, rec->cachers[i], 0, &h, name, NULL, 0);
    }
    rec->ncachers = 0;
}

/* Sends the record's copy to its copy holder; with an ack asked (rid),
 * the registration's answer waits for it. False: no copy holder up. */
static bool send_copy(registry_t *g, const char *name, const rec_t *rec, uint64_t rid)
{
    uint32_t owner, second;
    rank(g, name, &owner, &second);
    if (owner != g->self)
        second = owner; /* (asked as owner by a node that sees another membership) */
    if (!second || second == g->self)
        return false;
    hdr_t h = {.op = Q_COPY, .namelen = (uint16_t)strlen(name), .origin = g->self, .rid = rid, .holder = rec->holder};
    send_to(g, second, rid, &h, name, NULL, 0);
    return true;
}

static void uncopy(registry_t *g, const char *name, sn_pid_t holder)
{
    uint32_t owner, second;
    rank(g, name, &owner, &second);
    if (owner != g->self)
        second = owner;
    if (!second || second == g->self)
        return;
    hdr_t h = {.op = Q_UNCOPY, .namelen = (uint16_t)strlen(name), .origin = g->self, .holder = holder};
    send_to(g, second, 0, &h, name, NULL, 0);
}

/* Answers origin's registration once the copy is kept. */
static void answer_after_copy(registry_t *g, const char *name, rec_t *rec, uint32_t origin, uint64_t orid)
{
    uint64_t rid = new_id(g);
    oack_t *v = sn__grow(g->oack, &g->capoack, g->noack, sizeof *v, 16, 0);
    if (!v || !send_copy(g, name, rec, rid)) {
        reply(g, origin, orid, 0, rec->holder, NULL, 0);
        if (v)
            g->oack = v;
        return;
    }
    g->oack = v;
    g->oack[g->noack++] = (oack_t){rid, orid, origin, rec->holder};
}

/* A record this node keeps (made, or a copy made the record). */
static rec_t *own(registry_t *g, const char *name, sn_pid_t holder)
{
    rec_t *rec = zhashx_lookup(g->recs, name);
    if (!rec) {
        rec = calloc(1, sizeof *rec);
        if (!rec)
            return NULL;
        rec->holder = holder;
        zhashx_insert(g->recs, name, rec);
    }
    if (!rec->mtag)
        monitor(g, "r", name, rec->holder, &rec->mtag);
    return rec;
}

static void owner_register(registry_t *g, const hdr_t *h, const char *name);

/* The record goes; REGs parked on it are taken afresh, in order (the
 * first gets the name). */
static void drop_rec(registry_t *g, const char *name, rec_t *rec)
{
    demonitor(g, rec->holder, &rec->mtag);
    tell_cachers(g, name, rec);
    parked_t *parked = rec->parked;
    size_t n = rec->nparked;
    rec->parked = NULL;
    rec->nparked = 0;
    zhashx_delete(g->recs, name);
    for (size_t i = 0; i < n; i++) {
        hdr_t h = {.op = Q_REG, .origin = parked[i].origin, .rid = parked[i].rid, .holder = parked[i].holder};
        owner_register(g, &h, name);
    }
    free(parked);
}

/* The reservation became the name of its process: each parked REG is
 * refused, naming it. */
static void unpark(registry_t *g, rec_t *rec)
{
    for (size_t i = 0; i < rec->nparked; i++)
        reply(g, rec->parked[i].origin, rec->parked[i].rid, SN_EEXIST, rec->holder, NULL, 0);
    rec->nparked = 0;
}

/* ------------------------------------------------------------ name monitors */

/* A name monitor lives in two places: the watcher's node keeps it (a
 * mon_t: the DOWN is given there, once, and the monitor goes with it) and
 * the name's owner keeps the watcher on the record (watcher_t), since it
 * monitors the holder already. When the record moves to a new owner that
 * came up, ADOPT takes its watchers along; when the owner goes down, the
 * watcher's node asks the new owner again (F_AGAIN), which keeps the copy:
 * a name that ended meanwhile gives noproc. Asked twice, an owner keeps a
 * watcher once; a DOWN that finds no monitor at the watcher's node is
 * dropped, so each monitor gives exactly one DOWN. */

static void mon_down(registry_t *g, const hdr_t *h, const char *name);

/* The name's DOWN for each watcher, through its node's registry. */
static void fire(registry_t *g, const char *name, const watcher_t *w, size_t n, sn_pid_t holder, int err)
{
    hdr_t h = {.op = Q_NDOWN, .namelen = (uint16_t)strlen(name), .err = err, .origin = g->self, .holder = holder};
    for (size_t i = 0; i < n; i++) {
        h.rid = w[i].tag;
        h.aux = w[i].pid;
        if (w[i].origin == g->self)
            mon_down(g, &h, name);
        else
            send_to(g, w[i].origin, 0, &h, name, NULL, 0);
    }
}

static bool watcher_add(rec_t *rec, const watcher_t *w)
{
    for (size_t i = 0; i < rec->nwatchers; i++)
        if (sn_pid_eq(rec->watchers[i].pid, w->pid) && rec->watchers[i].tag == w->tag &&
            rec->watchers[i].origin == w->origin)
            return true; /* (asked again, or came with the record by ADOPT) */
    watcher_t *v = sn__grow(rec->watchers, &rec->capwatchers, rec->nwatchers, sizeof *v, 4, 0);
    if (!v)
        return false;
    rec->watchers = v;
    rec->watchers[rec->nwatchers++] = *w;
    return true;
}

/* MON and DEMON at the owner (or the copy holder, for a watcher whose
 * node sees another membership: the copy keeps it until it is the record). */
static void owner_watch(registry_t *g, const hdr_t *h, const char *name, const char *text, size_t textlen)
{
    rec_t *rec = zhashx_lookup(g->recs, name);
    if (h->op == Q_DEMON) {
        for (size_t i = 0; rec && i < rec->nwatchers; i++)
            if (sn_pid_eq(rec->watchers[i].pid, h->aux) && rec->watchers[i].tag == h->rid &&
                rec->watchers[i].origin == h->origin) {
                rec->watchers[i] = rec->watchers[--rec->nwatchers];
                break;
            }
        return;
    }
    watcher_t w = {.pid = h->aux, .origin = h->origin};
    if (textlen != sizeof w.tag)
        return; /* (not ours: no tag) */
    memcpy(&w.tag, text, sizeof w.tag);
    bool ok = rec && watcher_add(rec, &w);
    if (!(h->flags & F_AGAIN))
        reply(g, h->origin, h->rid, ok ? 0 : rec ? SN_ENOMEM : SN_ENOPROC, ok ? rec->holder : SN_PID_NONE, NULL, 0);
    else if (!rec)
        fire(g, name, &w, 1, SN_PID_NONE, SN_ENOPROC);
}

static mon_t *mon_find(registry_t *g, const char *name, sn_pid_t watcher, uint64_t tag, size_t *at)
{
    for (size_t i = 0; i < g->nmons; i++)
        if (g->mons[i].tag == tag && sn_pid_eq(g->mons[i].watcher, watcher) && !strcmp(g->mons[i].name, name)) {
            *at = i;
            return &g->mons[i];
        }
    return NULL;
}

static void mon_drop(registry_t *g, size_t i)
{
    demonitor(g, g->mons[i].watcher, &g->mons[i].wtag);
    g->mons[i] = g->mons[--g->nmons];
}

/* The monitor stands at the owner: kept here until its DOWN. */
static bool mon_add(registry_t *g, const char *name, sn_pid_t watcher, uint64_t tag)
{
    mon_t *v = sn__grow(g->mons, &g->capmons, g->nmons, sizeof *v, 16, 0);
    if (!v)
        return false;
    g->mons = v;
    mon_t *m = &g->mons[g->nmons++];
    *m = (mon_t){.watcher = watcher, .tag = tag};
    snprintf(m->name, sizeof m->name, "%s", name);
    uint32_t second;
    rank(g, name, &m->owner, &second);
    monitor(g, "w", name, watcher, &m->wtag);
    return true;
}

/* NDOWN: the watcher gets its DOWN (data: the name), once. */
static void mon_down(registry_t *g, const hdr_t *h, const char *name)
{
    size_t i;
    if (!mon_find(g, name, h->aux, h->rid, &i))
        return; /* (demonitored, or its DOWN given already) */
    mon_drop(g, i);
    sn_payload_t *p = sn_payload_text(name);
    sn__send_down(g->sched, h->aux, h->holder, h->rid, h->err, &p);
}

/* The monitor at g->mons[i] goes: its owner forgets the watcher. */
static void mon_forget(registry_t *g, size_t i)
{
    mon_t *m = &g->mons[i];
    hdr_t h = {
        .op = Q_DEMON, .namelen = (uint16_t)strlen(m->name), .origin = g->self, .rid = m->tag, .aux = m->watcher};
    if (m->owner == g->self)
        owner_watch(g, &h, m->name, NULL, 0);
    else
        send_to(g, m->owner, 0, &h, m->name, NULL, 0);
    mon_drop(g, i);
}

/* The membership changed: a monitor whose owner went down asks the new
 * owner; one whose owner is up goes with the record (ADOPT). Backwards:
 * a DOWN given meanwhile (noproc here) drops the entry at i. */
static void mons_again(registry_t *g)
{
    for (size_t i = g->nmons; i-- > 0;) {
        mon_t *m = &g->mons[i];
        bool up = bsearch(&m->owner, g->members, g->nmembers, sizeof *g->members, cmp_u32) != NULL;
        uint32_t second;
        rank(g, m->name, &m->owner, &second);
        if (up || !m->owner)
            continue;
        hdr_t h = {
            .op = Q_MON, .flags = F_AGAIN, .namelen = (uint16_t)strlen(m->name), .origin = g->self, .aux = m->watcher};
        if (m->owner == g->self)
            owner_watch(g, &h, m->name, (const char *)&m->tag, sizeof m->tag);
        else
            send_to(g, m->owner, 0, &h, m->name, (const char *)&m->tag, sizeof m->tag);
    }
}

/* L_MON's answer: the monitor stands (0, the holder), or noproc and its
 * DOWN at once; another error: no monitor. */
static void mon_answer(registry_t *g, const pend_t *q, int err, sn_pid_t holder)
{
    if (err == 0 && !mon_add(g, q->name, q->pid, q->tag))
        err = SN_ENOMEM; /* (the owner's watcher then finds no monitor here: dropped) */
    complete(g, q->pid, q->tag, err, err == 0 ? sn_payload_pid(holder) : NULL);
    if (err == SN_ENOPROC) {
        sn_payload_t *p = sn_payload_text(q->name);
        sn__send_down(g->sched, q->pid, SN_PID_NONE, q->tag, SN_ENOPROC, &p);
    }
}

/* L_DEMON: the process's monitor of the name with that tag goes; 0, or
 * SN_ENOPROC if there is none here. */
static void mon_demonitor(registry_t *g, const hdr_t *h, const char *name)
{
    size_t i;
    bool found = mon_find(g, name, h->aux, h->rid, &i) != NULL;
    if (found)
        mon_forget(g, i);
    complete(g, h->aux, h->rid, found ? 0 : SN_ENOPROC, NULL);
}

/* A REG for a reserved name waits; false if it cannot (no memory). */
static bool park(rec_t *rec, const hdr_t *h)
{
    parked_t *v = sn__grow(rec->parked, &rec->capparked, rec->nparked, sizeof *v, 4, 0);
    if (!v)
        return false;
    rec->parked = v;
    rec->parked[rec->nparked++] = (parked_t){h->origin, h->rid, h->holder};
    return true;
}

/* REG and GIVE at the owner. */
static void owner_register(registry_t *g, const hdr_t *h, const char *name)
{
    rec_t *rec = zhashx_lookup(g->recs, name);
    if (h->op == Q_GIVE) {
        if (!rec || !sn_pid_eq(rec->holder, h->aux)) {
            reply(g, h->origin, h->rid, SN_ENOPROC, SN_PID_NONE, NULL, 0);
            return;
        }
        demonitor(g, rec->holder, &rec->mtag);
        tell_cachers(g, name, rec);
        rec->holder = h->holder;
        rec->reserved = false;
        unpark(g, rec);
    } else if (rec && !sn_pid_eq(rec->holder, h->holder)) {
        if (!rec->mtag)
            own(g, name, rec->holder); /* (a copy: it is ours now, watched) */
        if (!rec->reserved || !park(rec, h))
            reply(g, h->origin, h->rid, SN_EEXIST, rec->holder, NULL, 0);
        return;
    }
    bool fresh = !rec;
    if (!(rec = own(g, name, h->holder))) {
        reply(g, h->origin, h->rid, SN_ENOMEM, SN_PID_NONE, NULL, 0);
        return;
    }
    if (fresh)
        rec->reserved = (h->flags & F_RESERVE) != 0;
    add_cacher(rec, h->origin);
    answer_after_copy(g, name, rec, h->origin, h->rid);
}

/* LIST: this node's records, a line each ("NAME PID"). */
static void owner_list(registry_t *g, const hdr_t *h)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        for (rec_t *rec = zhashx_first(g->recs); rec; rec = zhashx_next(g->recs)) {
            char buf[SN_PID_STRLEN];
            if (rec->mtag)
                fprintf(f, "%s %s\n", (const char *)zhashx_cursor(g->recs),
                        sn_pid_format(rec->holder, buf, sizeof buf));
        }
        fclose(f);
    }
    reply(g, h->origin, h->rid, text ? 0 : SN_ENOMEM, SN_PID_NONE, text, text ? len : 0);
    free(text);
}

/* A request for this node as owner (or copy holder). */
static void owner_handle(registry_t *g, const hdr_t *h, const char *name, const char *text, size_t textlen)
{
    rec_t *rec = zhashx_lookup(g->recs, name);
    switch (h->op) {
    case Q_REG:
    case Q_GIVE:
        owner_register(g, h, name);
        break;
    case Q_UNREG:
        if (!rec || !sn_pid_eq(rec->holder, h->holder)) {
            reply(g, h->origin, h->rid, SN_ENOPROC, SN_PID_NONE, NULL, 0);
            break;
        }
        fire(g, name, rec->watchers, rec->nwatchers, rec->holder, SN_ENOPROC);
        uncopy(g, name, rec->holder);
        drop_rec(g, name, rec);
        reply(g, h->origin, h->rid, 0, h->holder, NULL, 0);
        break;
    case Q_WHERE:
        if (rec)
            add_cacher(rec, h->origin);
        reply(g, h->origin, h->rid, rec ? 0 : SN_ENOPROC, rec ? rec->holder : SN_PID_NONE, NULL, 0);
        break;
    case Q_LIST:
        owner_list(g, h);
        break;
    case Q_MON:
    case Q_DEMON:
        owner_watch(g, h, name, text, textlen);
        break;
    default:
        break;
    }
}

/* ADOPT: the record and its watchers (text), unless this node keeps
 * another holder for the name: then they hear that theirs lost it. */
static void adopt(registry_t *g, const hdr_t *h, const char *name, rec_t *rec, const char *text, size_t textlen)
{
    size_t nw = textlen / sizeof(watcher_t);
    watcher_t *w = nw ? malloc(nw * sizeof *w) : NULL;
    if (w)
        memcpy(w, text, nw * sizeof *w);
    else
        nw = 0;
    if (rec && rec->mtag && !sn_pid_eq(rec->holder, h->holder)) {
        char a[SN_PID_STRLEN], b[SN_PID_STRLEN];
        if (sn__log_level() >= SN__LOG_WARN)
            sn__logf(g->self, SN__LOG_WARN, "name %s: kept its holder %s over %s (the membership changed)", name,
                     sn_pid_format(rec->holder, a, sizeof a), sn_pid_format(h->holder, b, sizeof b));
        fire(g, name, w, nw, h->holder, SN_ENOPROC);
        free(w);
        return;
    }
    if (rec && !rec->mtag)
        rec->holder = h->holder;
    if ((rec = own(g, name, h->holder)) != NULL) {
        for (size_t i = 0; i < nw; i++)
            watcher_add(rec, &w[i]);
        send_copy(g, name, rec, 0);
    }
    free(w);
}

/* COPY, UNCOPY, ADOPT, ACK, INVAL: between registries. */
static void peer_handle(registry_t *g, const hdr_t *h, const char *name, const char *text, size_t textlen)
{
    rec_t *rec = zhashx_lookup(g->recs, name);
    if (h->op == Q_COPY) {
        if (!rec && (rec = calloc(1, sizeof *rec)) != NULL)
            zhashx_insert(g->recs, name, rec);
        if (rec && !rec->mtag)
            rec->holder = h->holder; /* (a record of ours stays: its owner's view lags) */
        hdr_t a = {.op = Q_ACK, .origin = g->self, .rid = h->rid};
        if (h->rid)
            send_to(g, h->origin, 0, &a, "", NULL, 0);
    } else if (h->op == Q_UNCOPY) {
        if (rec && !rec->mtag && sn_pid_eq(rec->holder, h->holder)) {
            fire(g, name, rec->watchers, rec->nwatchers, rec->holder, SN_ENOPROC); /* (watchers of the copy) */
            zhashx_delete(g->recs, name);
        }
    } else if (h->op == Q_ADOPT) {
        adopt(g, h, name, rec, text, textlen);
    } else if (h->op == Q_ACK) {
        for (size_t i = 0; i < g->noack; i++)
            if (g->oack[i].rid == h->rid) {
                oack_t a = g->oack[i];
                g->oack[i] = g->oack[--g->noack];
                reply(g, a.origin, a.orid, 0, a.holder, NULL, 0);
                return;
            }
    } else if (h->op == Q_INVAL) {
        cache_drop(g, name, h->holder);
    }
}

/* ------------------------------------------------------------ the asker */

static void cache_drop(registry_t *g, const char *name, sn_pid_t pid)
{
    cent_t *c = zhashx_lookup(g->cache, name);
    if (!c || (!sn_pid_is_none(pid) && !sn_pid_eq(c->pid, pid)))
        return;
    demonitor(g, c->pid, &c->mtag);
    zhashx_delete(g->cache, name);
}

static void cache_put(registry_t *g, const char *name, sn_pid_t pid)
{
    cent_t *c = zhashx_lookup(g->cache, name);
    if (c && sn_pid_eq(c->pid, pid))
        return;
    if (c)
        cache_drop(g, name, SN_PID_NONE);
    if (!(c = calloc(1, sizeof *c)))
        return;
    c->pid = pid;
    zhashx_insert(g->cache, name, c);
    monitor(g, "c", name, pid, &c->mtag);
}

static void complete(registry_t *g, sn_pid_t pid, uint64_t tag, int err, sn_payload_t *res)
{
    if (sn_complete_yield(g->sched, pid, tag, err, &res) != 0)
        sn_payload_destroy(&res);
}

static pend_t *pend_find(registry_t *g, uint64_t rid, size_t *at)
{
    for (size_t i = 0; i < g->npend; i++)
        if (g->pend[i].rid == rid) {
            *at = i;
            return &g->pend[i];
        }
    return NULL;
}

static void pend_done(registry_t *g, size_t i)
{
    free(g->pend[i].acc);
    g->pend[i] = g->pend[--g->npend];
}

/* What the yield of a process here completes with, from its answer. */
static void l_answer(registry_t *g, uint64_t rid, int err, sn_pid_t holder, const char *text, size_t textlen)
{
    size_t i;
    pend_t *q = pend_find(g, rid, &i);
    if (!q)
        return; /* (timed out, or a second answer) */
    if (q->op == L_LIST) {
        char *acc = realloc(q->acc, q->acclen + textlen + 1);
        if (acc && textlen) {
            memcpy(acc + q->acclen, text, textlen);
            q->acclen += textlen;
        }
        if (acc) {
            acc[q->acclen] = 0;
            q->acc = acc;
        }
        if (--q->remaining > 0)
            return;
        complete(g, q->pid, q->tag, 0, sn_payload_text(q->acc ? q->acc : ""));
    } else if (q->op == L_MON) {
        mon_answer(g, q, err, holder);
    } else if (err == SN_EEXIST) {
        complete(g, q->pid, q->tag, err, sn_payload_pid(holder));
    } else if (err) {
        if (q->op == L_WHERE && err == SN_ENOPROC)
            cache_drop(g, q->name, SN_PID_NONE);
        complete(g, q->pid, q->tag, err, NULL);
    } else {
        if (q->op == L_UNREG)
            cache_drop(g, q->name, SN_PID_NONE);
        else
            cache_put(g, q->name, holder);
        complete(g, q->pid, q->tag, 0, q->op == L_WHERE ? sn_payload_pid(holder) : NULL);
    }
    pend_done(g, i);
}

/* A request of a process here (h->aux the process, h->rid its yield's tag). */
static void l_request(registry_t *g, hdr_t *h, const char *name)
{
    if (h->op == L_WHERE) {
        cent_t *c = zhashx_lookup(g->cache, name);
        if (c) {
            complete(g, h->aux, h->rid, 0, sn_payload_pid(c->pid));
            return;
        }
    } else if (h->op == L_DEMON) {
        mon_demonitor(g, h, name);
        return;
    }
    pend_t *v = sn__grow(g->pend, &g->cappend, g->npend, sizeof *v, 16, 0);
    if (!v) {
        complete(g, h->aux, h->rid, SN_ENOMEM, NULL);
        return;
    }
    g->pend = v;
    pend_t *q = &g->pend[g->npend++];
    *q = (pend_t){.rid = new_id(g), .tag = h->rid, .pid = h->aux, .op = h->op, .since_ns = sn__relay_now_ns()};
    snprintf(q->name, sizeof q->name, "%s", name);
    static const uint8_t ask[] = {[L_REG - L_REG] = Q_REG,     [L_GIVE - L_REG] = Q_GIVE, [L_UNREG - L_REG] = Q_UNREG,
                                  [L_WHERE - L_REG] = Q_WHERE, [L_LIST - L_REG] = Q_LIST, [L_MON - L_REG] = Q_MON};
    hdr_t m = {.op = ask[h->op - L_REG],
               .flags = h->flags,
               .namelen = h->namelen,
               .origin = g->self,
               .rid = q->rid,
               .holder = h->holder,
               .aux = h->aux};
    if (h->op == L_LIST) {
        q->remaining = (uint32_t)g->nmembers;
        for (size_t k = 0; k < g->nmembers; k++) {
            if (g->members[k] == g->self)
                owner_handle(g, &m, name, NULL, 0);
            else
                send_to(g, g->members[k], q->rid, &m, name, NULL, 0);
        }
        return;
    }
    uint64_t tag = q->tag; /* (MON: the watcher's tag goes as text) */
    const char *text = h->op == L_MON ? (const char *)&tag : NULL;
    size_t textlen = text ? sizeof tag : 0;
    uint32_t owner, second;
    rank(g, name, &owner, &second);
    if (owner == g->self)
        owner_handle(g, &m, name, text, textlen);
    else
        send_to(g, owner, q->rid, &m, name, text, textlen);
}

/* A send of ours (tag) came back with err: its request fails, or (a copy
 * whose holder is gone) the registration is answered. */
static void send_failed(registry_t *g, uint64_t tag, int err)
{
    size_t i;
    pend_t *q = pend_find(g, tag, &i);
    if (q) {
        if (q->op == L_LIST)
            l_answer(g, tag, 0, SN_PID_NONE, NULL, 0);
        else
            l_answer(g, tag, err, SN_PID_NONE, NULL, 0);
        return;
    }
    hdr_t a = {.op = Q_ACK, .rid = tag};
    peer_handle(g, &a, "", NULL, 0);
}

/* A DOWN: a holder of a record ended (the name ends, its watchers hear
 * why), a cached PID, or a process here that watched a name. */
static void on_down(registry_t *g, uint64_t tag, int err)
{
    char key[32];
    snprintf(key, sizeof key, "%" PRIx64, tag);
    const char *what = zhashx_lookup(g->bytag, key);
    if (!what)
        return;
    char name[NAME_MAX_LEN + 2];
    snprintf(name, sizeof name, "%s", what + 1);
    if (what[0] == 'r') {
        rec_t *rec = zhashx_lookup(g->recs, name);
        if (rec && rec->mtag == tag) {
            fire(g, name, rec->watchers, rec->nwatchers, rec->holder, err);
            uncopy(g, name, rec->holder);
            drop_rec(g, name, rec);
        }
    } else if (what[0] == 'w') {
        for (size_t i = 0; i < g->nmons; i++)
            if (g->mons[i].wtag == tag) {
                g->mons[i].wtag = 0; /* (its monitor gave this DOWN) */
                mon_forget(g, i);
                break;
            }
    } else {
        cent_t *c = zhashx_lookup(g->cache, name);
        if (c && c->mtag == tag)
            cache_drop(g, name, SN_PID_NONE);
    }
    zhashx_delete(g->bytag, key);
}

/* ADOPT to the new owner: the record and its watchers, which go with it. */
static void hand_on(registry_t *g, const char *name, rec_t *rec, uint32_t owner)
{
    hdr_t h = {.op = Q_ADOPT, .namelen = (uint16_t)strlen(name), .origin = g->self, .holder = rec->holder};
    send_to(g, owner, 0, &h, name, (const char *)rec->watchers, rec->nwatchers * sizeof *rec->watchers);
    rec->nwatchers = 0;
}

/* The membership changed: each record and copy goes where it belongs now. */
static void rebalance(registry_t *g)
{
    zlistx_t *names = zhashx_keys(g->recs);
    if (!names)
        return;
    for (const char *name = zlistx_first(names); name; name = zlistx_next(names)) {
        rec_t *rec = zhashx_lookup(g->recs, name);
        uint32_t owner, second;
        rank(g, name, &owner, &second);
        if (owner == g->self) {
            own(g, name, rec->holder); /* (a copy whose owner went: the record now) */
            send_copy(g, name, rec, 0);
        } else if (second == g->self) {
            if (rec->mtag) { /* (a new owner came: it takes the record, we keep the copy) */
                hand_on(g, name, rec, owner);
                demonitor(g, rec->holder, &rec->mtag);
                tell_cachers(g, name, rec);
            }
        } else {
            if (rec->mtag)
                hand_on(g, name, rec, owner);
            drop_rec(g, name, rec);
        }
    }
    zlistx_destroy(&names);
}

/* Every TICK_MS: the membership, and requests that waited too long. */
static void tick(registry_t *g, sn_relay_t *r)
{
    if (members_look(g, r)) {
        rebalance(g);
        mons_again(g);
    }
    uint64_t now = sn__relay_now_ns();
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

/* A message that is not one of ours: counted in the relay's bad frames
 * (`status`), logged at most once a second, dropped. */
static void bad_message(registry_t *g, const char *why)
{
    g->bad++;
    if (g->r)
        sn__add(&g->r->bad_frames, 1);
    char more[64];
    if (sn__log_limit(&g->bad_log, sn__relay_now_ns(), 1000000000u, more, sizeof more) &&
        sn__log_level() >= SN__LOG_WARN)
        sn__logf(g->self, SN__LOG_WARN, "names: dropped a bad message: %s%s", why, more);
}

static void on_message(registry_t *g, const sn_event_t *e)
{
    hdr_t h;
    char name[NAME_MAX_LEN + 1];
    const char *text;
    size_t textlen;
    if (!msg_read(e->data, &h, name, &text, &textlen)) {
        bad_message(g, "not a names message");
        return;
    }
    bool local = sn_pid_is_none(e->from);
    if (!local)
        h.origin = e->from.node; /* (answers go to the node that sent it, whatever it says) */
    if (h.op >= L_REG) {
        if (local)
            l_request(g, &h, name);
        else
            bad_message(g, "a local request from a process");
    } else if (h.op == Q_REPLY) {
        l_answer(g, h.rid, h.err, h.holder, text, textlen);
    } else if (h.op <= Q_LIST || h.op == Q_MON || h.op == Q_DEMON) {
        owner_handle(g, &h, name, text, textlen);
    } else if (h.op == Q_NDOWN) {
        mon_down(g, &h, name);
    } else {
        peer_handle(g, &h, name, text, textlen);
    }
}

/* ------------------------------------------------------------ the type */

typedef struct helper {
    int phase;
    char name[NAME_MAX_LEN + 1];
    char type[64], method[64];
    sn_payload_t *arg;
    sn_pid_t child;
    sn_payload_t **held; /* messages to the name while this helper held it */
    size_t nheld, capheld;
} helper_t;

enum { ROLE_REGISTRY = 1, ROLE_WHEREIS, ROLE_NAMES, ROLE_SPAWN };

typedef struct nstate {
    int role;
    registry_t reg;
    helper_t h;
} nstate_t;

static bool name_ok(const char *s, size_t len)
{
    return len > 0 && len <= NAME_MAX_LEN && memchr(s, 0, len) == NULL;
}

/* "spawn": NAME \n TYPE \n METHOD [\n ARG] */
static int spawn_init(helper_t *h, const sn_payload_t *in)
{
    if (!in)
        return SN_EINVAL;
    char *copy = strndup((const char *)in->data, in->len), *save = NULL;
    if (!copy)
        return SN_ENOMEM;
    const char *name = strtok_r(copy, "\n", &save), *type = strtok_r(NULL, "\n", &save),
               *method = strtok_r(NULL, "\n", &save), *arg = strtok_r(NULL, "", &save);
    int rc = name && type && method && name_ok(name, strlen(name)) && strlen(type) < sizeof h->type &&
                     strlen(method) < sizeof h->method
                 ? 0
                 : SN_EINVAL;
    if (rc == 0) {
        snprintf(h->name, sizeof h->name, "%s", name);
        snprintf(h->type, sizeof h->type, "%s", type);
        snprintf(h->method, sizeof h->method, "%s", method);
        h->arg = arg ? sn_payload_text(arg) : NULL;
    }
    free(copy);
    return rc;
}

static int registry_init(sn_ctx_t *ctx, registry_t *g)
{
    sn_sched_t *sched = sn_ctx_sched(ctx);
    pthread_mutex_lock(&hub_mu);
    int i = hub_find(sched);
    bool ok = i >= 0 && hub[i].making && sn_pid_is_none(hub[i].registry);
    if (ok)
        hub[i].registry = sn_ctx_self(ctx);
    pthread_mutex_unlock(&hub_mu);
    if (!ok)
        return SN_EINVAL; /* (only the node makes its registry) */
    g->sched = sched;
    g->self = sn_sched_node_id(sched);
    g->next_id = TAG_TICK;
    g->recs = zhashx_new();
    g->cache = zhashx_new();
    g->bytag = zhashx_new();
    if (!g->recs || !g->cache || !g->bytag)
        return SN_ENOMEM;
    zhashx_set_destructor(g->recs, rec_free);
    zhashx_set_destructor(g->cache, free_ptr);
    zhashx_set_duplicator(g->bytag, dup_str);
    zhashx_set_destructor(g->bytag, free_ptr);
    return 0;
}

static int names_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    nstate_t *st = state;
    const sn_payload_t *in = *input;
    if (!strcmp(method, "registry")) {
        st->role = ROLE_REGISTRY;
        return registry_init(ctx, &st->reg);
    }
    if (!strcmp(method, "whereis")) {
        st->role = ROLE_WHEREIS;
        if (!in || !name_ok((const char *)in->data, in->len))
            return SN_EINVAL;
        snprintf(st->h.name, sizeof st->h.name, "%.*s", (int)in->len, (const char *)in->data);
        return 0;
    }
    if (!strcmp(method, "names")) {
        st->role = ROLE_NAMES;
        return 0;
    }
    if (!strcmp(method, "spawn")) {
        st->role = ROLE_SPAWN;
        return spawn_init(&st->h, in);
    }
    return SN_ENOMETHOD;
}

static void registry_step(sn_ctx_t *ctx, registry_t *g, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    pthread_mutex_lock(&hub_mu);
    int i = hub_find(g->sched);
    sn_relay_t *r = i >= 0 && sn_pid_eq(hub[i].registry, sn_ctx_self(ctx)) ? hub[i].r : NULL;
    g->out = out;
    g->r = r;
    out->status = SN_IDLE;
    if (!r) /* (its relay is gone: another registry, if any, serves) */
        sn_out_done(out, NULL);
    else if (n == 0)
        tick(g, r);
    for (size_t k = 0; r && k < n; k++) {
        sn_event_t *e = &ev[k];
        if (e->type == SN_EV_CANCEL) {
            sn_out_done(out, NULL);
            break;
        } else if (e->type == SN_EV_MESSAGE) {
            on_message(g, e);
        } else if (e->type == SN_EV_DOWN) {
            on_down(g, e->tag, e->error);
        } else if (e->tag == TAG_TICK) {
            tick(g, r);
        } else if (e->error) {
            send_failed(g, e->tag, e->error);
        }
    }
    g->out = NULL;
    g->r = NULL;
    pthread_mutex_unlock(&hub_mu);
}

/* A yield of one of the "sn.name.*" commands. */
static void name_yield(sn_step_out_t *out, const char *cmd, uint64_t tag, const char *name, sn_pid_t target)
{
    sn_yield_t *y = sn_out_yield(out, 0, cmd, tag);
    if (y) {
        y->data = sn_payload_text(name);
        y->target = target;
    }
}

/* whereis and names: one request, its answer the result. */
static void lookup_step(nstate_t *st, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    helper_t *h = &st->h;
    if (h->phase == 0) {
        name_yield(out, st->role == ROLE_NAMES ? "sn.name.list" : "sn.name.whereis", 1, h->name, SN_PID_NONE);
        h->phase = 1;
        out->status = SN_WAIT;
        return;
    }
    for (size_t k = 0; k < n; k++) {
        if (ev[k].type == SN_EV_CANCEL) {
            sn_out_fail(out, SN_ECANCELED, "canceled");
            return;
        }
        if (ev[k].type != SN_EV_YIELD_COMPLETE)
            continue;
        if (ev[k].error == SN_ENOPROC)
            sn_out_fail(out, SN_ENOPROC, "no process is named %s", h->name);
        else if (ev[k].error)
            sn_out_fail(out, ev[k].error, "%s", sn_strerror(ev[k].error));
        else
            sn_out_done(out, &ev[k].data);
        return;
    }
    out->status = SN_WAIT;
}

/* spawn --name: the name is taken for this helper first, then the child
 * is spawned and the name given to it; so the child exists only if the
 * name was free. What comes for the name meanwhile goes on to the child. */
static void spawn_done(helper_t *h, sn_step_out_t *out, sn_event_t *e)
{
    char buf[SN_PID_STRLEN];
    if (h->phase == 1) {
        if (e->error == SN_EEXIST) {
            sn_pid_t holder = SN_PID_NONE;
            sn_payload_get_pid(e->data, &holder);
            sn_out_fail(out, SN_EEXIST, "the name %s is held by %s", h->name, sn_pid_format(holder, buf, sizeof buf));
        } else if (e->error) {
            sn_out_fail(out, e->error, "cannot register %s: %s", h->name, sn_strerror(e->error));
        } else {
            sn_out_spawn(out, 2, h->type, h->method, &h->arg, 0);
            h->phase = 2;
            out->status = SN_WAIT;
        }
    } else if (h->phase == 2) {
        if (e->error || sn_payload_get_pid(e->data, &h->child) != 0) {
            name_yield(out, "sn.name.unregister", 9, h->name, SN_PID_NONE);
            sn_out_fail(out, e->error ? e->error : SN_EFAILED, "%s", e->data ? (const char *)e->data->data : "");
            return;
        }
        name_yield(out, "sn.name.give", 3, h->name, h->child);
        h->phase = 3;
        out->status = SN_WAIT;
    } else if (h->phase == 3) {
        for (size_t i = 0; i < h->nheld; i++)
            sn_out_send(out, h->child, 0, &h->held[i]);
        h->nheld = 0;
        sn_payload_t *pid = sn_payload_pid(h->child);
        if (e->error)
            sn_out_fail(out, e->error, "spawned %s, but could not give it the name %s: %s",
                        sn_pid_format(h->child, buf, sizeof buf), h->name, sn_strerror(e->error));
        else
            sn_out_done(out, &pid);
        sn_payload_destroy(&pid);
    }
}

static void spawn_step(nstate_t *st, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    helper_t *h = &st->h;
    out->status = SN_WAIT;
    if (h->phase == 0) {
        name_yield(out, "sn.name.register", 1, h->name, SN_PID_NONE);
        if (out->nyields)
            sn_out_at(out, out->nyields - 1)->arg = 1; /* (a reservation: F_RESERVE) */
        h->phase = 1;
        return;
    }
    for (size_t k = 0; k < n; k++) {
        if (ev[k].type == SN_EV_MESSAGE) {
            sn_payload_t **v = sn__grow(h->held, &h->capheld, h->nheld, sizeof *v, 8, 0);
            if (v) {
                h->held = v;
                h->held[h->nheld++] = sn_take(&ev[k].data);
            }
        } else if (ev[k].type == SN_EV_CANCEL) {
            sn_out_fail(out, SN_ECANCELED, "canceled");
            return;
        } else if (ev[k].type == SN_EV_YIELD_COMPLETE) {
            spawn_done(h, out, &ev[k]);
        }
    }
}

static void names_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    nstate_t *st = state;
    if (st->role == ROLE_REGISTRY)
        registry_step(ctx, &st->reg, ev, n, out);
    else if (st->role == ROLE_SPAWN)
        spawn_step(st, ev, n, out);
    else
        lookup_step(st, ev, n, out);
}

static void names_close(sn_ctx_t *ctx, void *state)
{
    (void)ctx;
    nstate_t *st = state;
    registry_t *g = &st->reg;
    zhashx_destroy(&g->recs);
    zhashx_destroy(&g->cache);
    zhashx_destroy(&g->bytag);
    for (size_t i = 0; i < g->npend; i++)
        free(g->pend[i].acc);
    free(g->pend);
    free(g->oack);
    free(g->mons);
    free(g->members);
    sn_payload_destroy(&st->h.arg);
    for (size_t i = 0; i < st->h.nheld; i++)
        sn_payload_destroy(&st->h.held[i]);
    free(st->h.held);
}

/* No marshal: the registry stays on its node, and so do the helpers. */
static const sn_type_t names_type = {.name = "sn.names",
                                     .version = 1,
                                     .state_size = sizeof(nstate_t),
                                     .init = names_init,
                                     .step = names_step,
                                     .close = names_close};

/* ------------------------------------------------------------ commands */

/* "sn.name.register" (target: the PID to register, none: the yielder),
 * "sn.name.give" (target: the new holder), "sn.name.unregister",
 * "sn.name.whereis", "sn.name.list", "sn.name.monitor",
 * "sn.name.demonitor": handed to this node's registry. */
static void name_command(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    int op = (int)(intptr_t)arg, rc = SN_EINVAL;
    sn_payload_t *data = sn_take(&req->data);
    const char *name = data ? (const char *)data->data : "";
    size_t len = data ? data->len : 0;
    if (op == L_LIST || name_ok(name, len)) {
        hdr_t h = {.op = (uint8_t)op,
                   .namelen = (uint16_t)(op == L_LIST ? 0 : len),
                   .rid = req->tag,
                   .holder = sn_pid_is_none(req->target) ? req->from : req->target,
                   .aux = req->from};
        if (op == L_UNREG)
            h.holder = req->from;
        if (op == L_REG && req->arg == 1)
            h.flags = F_RESERVE;
        sn_pid_t reg = SN_PID_NONE;
        pthread_mutex_lock(&hub_mu);
        int i = hub_find(sched);
        sn_relay_t *r = i >= 0 ? hub[i].r : NULL;
        pthread_mutex_unlock(&hub_mu);
        if (r)
            reg = sn__names_registry(r);
        sn_payload_t *m = msg_new(&h, name, NULL, 0);
        rc = sn_pid_is_none(reg) ? SN_ENOCMD : !m ? SN_ENOMEM : sn_send(sched, reg, &m);
        sn_payload_destroy(&m);
    }
    sn_payload_destroy(&data);
    if (rc != 0)
        sn_complete_yield(sched, req->from, req->tag, rc, NULL);
}

int sn__names_init(sn_relay_t *r)
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
    if (!sn_type_find(r->sched, names_type.name)) {
        int rc = sn_type_register(r->sched, &names_type);
        if (rc != 0)
            return rc;
    }
    static const struct {
        const char *name;
        int op;
    } cmds[] = {{"sn.name.register", L_REG},   {"sn.name.give", L_GIVE}, {"sn.name.unregister", L_UNREG},
                {"sn.name.whereis", L_WHERE},  {"sn.name.list", L_LIST}, {"sn.name.monitor", L_MON},
                {"sn.name.demonitor", L_DEMON}};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++)
        if (sn_command_id(r->sched, cmds[k].name) < 0) {
            int rc = sn_command_register(r->sched, cmds[k].name, name_command, (void *)(intptr_t)cmds[k].op);
            if (rc < 0)
                return rc;
        }
    return 0;
}

void sn__names_fini(sn_relay_t *r)
{
    pthread_mutex_lock(&hub_mu);
    for (int i = 0; i < HUB_MAX; i++)
        if (hub[i].r == r)
            hub[i] = (__typeof__(hub[0])){0};
    pthread_mutex_unlock(&hub_mu);
}

sn_pid_t sn__names_registry(sn_relay_t *r)
{
    for (int tries = 0; tries < 1000; tries++) {
        pthread_mutex_lock(&hub_mu);
        int i = hub_find(r->sched);
        if (i < 0 || hub[i].r != r) {
            pthread_mutex_unlock(&hub_mu);
            return SN_PID_NONE;
        }
        sn_pid_t pid = hub[i].registry;
        bool wait = hub[i].making;
        if (sn_pid_is_none(pid) && !wait)
            hub[i].making = true;
        pthread_mutex_unlock(&hub_mu);
        if (!sn_pid_is_none(pid))
            return pid;
        if (wait) { /* (another thread makes it: a spawn takes microseconds) */
            zclock_sleep(1);
            continue;
        }
        sn_pid_t made = SN_PID_NONE;
        int rc = sn_spawn(r->sched, names_type.name, "registry", NULL, NULL, NULL, &made);
        pthread_mutex_lock(&hub_mu);
        if ((i = hub_find(r->sched)) >= 0) {
            hub[i].making = false;
            if (rc != 0)
                hub[i].registry = SN_PID_NONE;
        }
        pthread_mutex_unlock(&hub_mu);
        return rc == 0 ? made : SN_PID_NONE;
    }
    return SN_PID_NONE;
}

/* payload.c - owned byte buffers, shared read-only ones, event nodes, and
 * the error table.
 *
 * Every payload is allocated with an event node in front of it, so moving a
 * payload into a process's queue needs no allocation and no copy. A shared
 * payload (sn_payload_share) is in many places at once: its node counts its
 * holders instead, and each event carrying it gets a bare node.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PREFIX SN__PAYLOAD_PREFIX

/* Small payloads (most messages) come from per-thread magazines of
 * fixed-size blocks (Bonwick's magazine layer): a message is allocated by
 * its sender and freed by its receiver, often on another worker, and
 * malloc's arena locks (and its cross-thread frees) are then the
 * bottleneck. A magazine is an array of up to MAG free blocks. A thread
 * keeps two: `cur`, which it allocates from and frees into, and `prev`,
 * empty or full. A thread that frees more than it allocates (a receiver)
 * hands full magazines to the depot and gets empty ones back; one that
 * allocates more (a sender) swaps its empty one for a full one: one lock
 * per MAG messages each way, none per message. An array, not a list
 * through the blocks, so taking a block reads no block (the one the
 * receiver freed last is in the other core's cache) and the next one can
 * be prefetched.
 *
 * Invariants: a magazine's slots [0, n) hold blocks no one else
 * references. `cur` and `prev` are thread-private (no atomics); the depot
 * is guarded by depot_mu, which also orders a block's last use by the
 * thread that gave it up before its next use by the one that takes it.
 * depot_full_n mirrors the count of full magazines (stored under
 * depot_mu, read relaxed as a hint, so a thread whose magazines are empty
 * does not lock the depot to find it empty). A thread that exits frees
 * its magazines and their blocks; the depot keeps at most DEPOT_MAX
 * magazines of each kind (the rest go back to malloc).
 *
 * Under AddressSanitizer there are no magazines: every block comes from
 * malloc and goes back to free, so a use after free is still caught. */
#define SMALL_BLOCK 128
#define MAG 255
#define DEPOT_MAX 256 /* 8 MB of blocks at most: a burst of messages in flight needs no malloc */

#if defined(__SANITIZE_ADDRESS__)
#define SN_NO_MAGAZINES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SN_NO_MAGAZINES 1
#endif
#endif

#ifndef SN_NO_MAGAZINES
typedef struct mag {
    size_t n;
    void *b[MAG];
} mag_t;

static _Thread_local mag_t *cur, *prev;
static _Thread_local bool registered; /* cache_key is set: our exit frees them */
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t depot_mu = PTHREAD_MUTEX_INITIALIZER;
static mag_t *depot_full[DEPOT_MAX], *depot_empty[DEPOT_MAX]; /* guarded by depot_mu */
static size_t depot_nempty;                                   /* guarded by depot_mu */
static _Atomic size_t depot_full_n;

static void mag_free(mag_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        free(m->b[i]);
    free(m);
}

static void cache_drain(void *unused)
{
    (void)unused;
    mag_free(cur);
    mag_free(prev);
    cur = prev = NULL;
    registered = false;
}

static void cache_setup(void)
{
    (void)pthread_key_create(&cache_key, cache_drain);
}

/* Swaps cur (empty or NULL) for a full magazine of the depot; false if none. */
static bool depot_take(void)
{
    if (atomic_load_explicit(&depot_full_n, memory_order_relaxed) == 0)
        return false;
    mag_t *spare = NULL;
    pthread_mutex_lock(&depot_mu);
    size_t n = atomic_load_explicit(&depot_full_n, memory_order_relaxed);
    if (n > 0) {
        if (cur && depot_nempty < DEPOT_MAX)
            depot_empty[depot_nempty++] = cur;
        else
            spare = cur;
        cur = depot_full[n - 1];
        atomic_store_explicit(&depot_full_n, n - 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&depot_mu);
    free(spare);
    return n > 0;
}

/* Hands a full magazine to the depot; returns an empty one (from the
 * depot, this one emptied when the depot is full, or NULL). */
static mag_t *depot_give(mag_t *full)
{
    mag_t *empty = NULL;
    pthread_mutex_lock(&depot_mu);
    size_t n = atomic_load_explicit(&depot_full_n, memory_order_relaxed);
    if (n < DEPOT_MAX) {
        depot_full[n] = full;
        atomic_store_explicit(&depot_full_n, n + 1, memory_order_relaxed);
        full = NULL;
        if (depot_nempty > 0)
            empty = depot_empty[--depot_nempty];
    }
    pthread_mutex_unlock(&depot_mu);
    if (full) { /* the depot is full: its blocks go back to malloc */
        for (size_t i = 0; i < full->n; i++)
            free(full->b[i]);
        full->n = 0;
        return full;
    }
    return empty;
}

/* Makes room in cur for one block (cur is full or NULL); false if none. */
static bool make_room(void)
{
    if (!registered) { /* make sure this thread's exit frees its magazines */
        pthread_once(&cache_once, cache_setup);
        (void)pthread_setspecific(cache_key, (void *)1);
        registered = true;
    }
    if (prev && prev->n == 0) {
        mag_t *t = cur;
        cur = prev;
        prev = t;
        return true;
    }
    mag_t *empty = prev ? depot_give(prev) : NULL;
    prev = cur;
    cur = empty ? empty : malloc(sizeof *cur);
    if (cur)
        cur->n = 0;
    return cur != NULL;
}
#endif

/* The slow paths (another magazine, the depot, malloc) are out of line,
 * so that the fast paths below (a block from or into `cur`) save no
 * registers: they run once per message each. */
static __attribute__((noinline)) void *block_alloc_slow(size_t size)
{
#ifndef SN_NO_MAGAZINES
    if (size > SMALL_BLOCK)
        return malloc(size);
    if (!cur || cur->n == 0) {
        if (prev && prev->n > 0) {
            mag_t *t = cur;
            cur = prev;
            prev = t;
        } else if (!depot_take()) {
            return malloc(SMALL_BLOCK);
        }
    }
    void *b = cur->b[--cur->n];
    if (cur->n > 0) /* the next one, for writing: it may be in another core's cache */
        __builtin_prefetch(cur->b[cur->n - 1], 1);
    return b;
#else
    return malloc(size);
#endif
}

static inline void *block_alloc(size_t size)
{
#ifndef SN_NO_MAGAZINES
    mag_t *m = cur;
    if (size <= SMALL_BLOCK && m && m->n > 1) {
        void *b = m->b[--m->n];
        __builtin_prefetch(m->b[m->n - 1], 1); /* (as in the slow path) */
        return b;
    }
#endif
    return block_alloc_slow(size);
}

static __attribute__((noinline)) void block_free_slow(void *b, size_t size)
{
#ifndef SN_NO_MAGAZINES
    if (size > SMALL_BLOCK || ((!cur || cur->n == MAG) && !make_room())) {
        free(b);
        return;
    }
    cur->b[cur->n++] = b;
#else
    (void)size;
    free(b);
#endif
}

static inline void block_free(void *b, size_t size)
{
#ifndef SN_NO_MAGAZINES
    mag_t *m = cur;
    if (size <= SMALL_BLOCK && m && m->n < MAG) {
        m->b[m->n++] = b;
        return;
    }
#endif
    block_free_slow(b, size);
}

static size_t block_size(size_t len)
{
    return PREFIX + sizeof(sn_payload_t) + len + 1;
}

const char *sn_strerror(int err)
{
    switch (err) {
    case 0:
        return "ok";
#define SN__ERR_CASE(name, code, text)                                                                                 \
    case code:                                                                                                         \
        return text;
        SN_ERRORS(SN__ERR_CASE)
#undef SN__ERR_CASE
    default:
        return "unknown error";
    }
}

/* A payload of len bytes, not yet written (but for its terminating 0). */
static inline sn_payload_t *payload_alloc(uint32_t ctype, size_t len)
{
    unsigned char *base = block_alloc(block_size(len));
    if (!base)
        return NULL;
    ((sn__evnode_t *)(void *)base)->shared = 0;
    sn_payload_t *p = (sn_payload_t *)(base + PREFIX);
    p->ctype = ctype;
    p->len = (uint32_t)len;
    p->data[len] = 0;
    return p;
}

sn_payload_t *sn_payload_new(uint32_t ctype, const void *bytes, size_t len)
{
    if (len > UINT32_MAX - 1)
        return NULL;
    sn_payload_t *p = payload_alloc(ctype, len);
    if (!p)
        return NULL;
    if (bytes)
        memcpy(p->data, bytes, len);
    else
        memset(p->data, 0, len);
    return p;
}

sn_payload_t *sn_payload_text(const char *text)
{
    return sn_payload_new(SN_CT_TEXT, text, strlen(text));
}

sn_payload_t *sn_payload_printf(uint32_t ctype, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    sn_payload_t *p = sn_payload_new(ctype, NULL, (size_t)n);
    if (!p)
        return NULL;
    va_start(ap, fmt);
    vsnprintf((char *)p->data, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

sn_payload_t *sn_payload_u64(uint64_t value)
{
    sn_payload_t *p = payload_alloc(SN_CT_U64, sizeof value);
    if (p)
        memcpy(p->data, &value, sizeof value); /* (a constant size: one store) */
    return p;
}

sn_payload_t *sn_payload_pid(sn_pid_t pid)
{
    return sn_payload_new(SN_CT_PID, &pid, sizeof pid);
}

int sn_payload_get_u64(const sn_payload_t *p, uint64_t *out)
{
    if (!p || p->ctype != SN_CT_U64 || p->len != sizeof *out)
        return SN_EINVAL;
    memcpy(out, p->data, sizeof *out);
    return 0;
}

int sn_payload_get_pid(const sn_payload_t *p, sn_pid_t *out)
{
    if (!p || p->ctype != SN_CT_PID || p->len != sizeof *out)
        return SN_EINVAL;
    memcpy(out, p->data, sizeof *out);
    return 0;
}

/* ------------------------------------------------------ shared payloads
 *
 * The holders' count lives in the payload's own event node (`refs`), which
 * a shared payload never uses as a queue node. The bytes are written only
 * before the share and never after, so holders read them without locks.
 * Orders: a holder that adds a reference already keeps the payload alive,
 * so the add is relaxed (as for any reference count). Dropping one is a
 * release (this holder's reads of the bytes come before it), and the drop
 * that takes the count to zero also acquires (every other holder's reads
 * come before the free): acq_rel on the fetch_sub. The `shared` flag is
 * set before the payload is handed anywhere (any hand-over between threads
 * publishes it) and never changes after. */

_Atomic int64_t sn__shared_live;

sn_payload_t *sn_payload_share(sn_payload_t **p)
{
    sn_payload_t *s = p ? sn_take(p) : NULL;
    if (!s)
        return NULL;
    sn__evnode_t *n = sn__payload_node(s);
    if (!n->shared) {
        n->shared = 1;
        atomic_init(&n->refs, 1);
        atomic_fetch_add_explicit(&sn__shared_live, 1, memory_order_relaxed);
    }
    return s;
}

int sn_payload_is_shared(const sn_payload_t *p)
{
    return p && sn__payload_node((sn_payload_t *)p)->shared;
}

sn_payload_t *sn_payload_dup(const sn_payload_t *p)
{
    if (!p)
        return NULL;
    sn__evnode_t *n = sn__payload_node((sn_payload_t *)p);
    if (n->shared) {
        uint32_t r = atomic_load_explicit(&n->refs, memory_order_relaxed);
        /* relaxed: we hold a reference (see above); the bound keeps the count from wrapping */
        while (r < UINT32_MAX)
            if (atomic_compare_exchange_weak_explicit(&n->refs, &r, r + 1, memory_order_relaxed, memory_order_relaxed))
                return (sn_payload_t *)p;
    }
    return sn_payload_new(p->ctype, p->data, p->len); /* not shared (or 2^32-1 holders): a copy */
}

void sn_payload_destroy(sn_payload_t **p)
{
    if (!p || !*p)
        return;
    sn_payload_t *d = sn_take(p);
    sn__evnode_t *n = sn__payload_node(d);
    if (n->shared) {
        /* acq_rel: see "shared payloads" above */
        if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1)
            return;
        atomic_fetch_sub_explicit(&sn__shared_live, 1, memory_order_relaxed);
    }
    block_free(n, block_size(d->len));
}

void *sn__small_alloc(size_t size)
{
    return block_alloc(size);
}

void sn__small_free(void *block, size_t size)
{
    block_free(block, size);
}

void sn__events_free(sn_event_t *ev, size_t n)
{
#ifndef SN_NO_MAGAZINES
    /* cur and its count in locals (the stores into ev could alias them),
     * written back before a slow path and at the end */
    mag_t *m = cur;
    size_t mn = m ? m->n : MAG;
#endif
    for (size_t i = 0; i < n; i++) {
        sn_payload_t *d = ev[i].data;
        if (!d)
            continue;
        ev[i].data = NULL;
        sn__evnode_t *node = sn__payload_node(d);
        size_t size = block_size(d->len);
#ifndef SN_NO_MAGAZINES
        if (!node->shared && size <= SMALL_BLOCK && mn < MAG) {
            m->b[mn++] = node;
            continue;
        }
        if (m)
            m->n = mn;
#endif
        if (node->shared)
            sn_payload_destroy(&d);
        else
            block_free_slow(node, size);
#ifndef SN_NO_MAGAZINES
        m = cur;
        mn = m ? m->n : MAG;
#endif
    }
#ifndef SN_NO_MAGAZINES
    if (m)
        m->n = mn;
#endif
}

sn__evnode_t *sn__evnode_bare(uint8_t type, int error, uint64_t tag, sn_pid_t from, sn_payload_t *p, bool counted)
{
    /* a node alone (no payload, or a shared one) comes from the magazines
     * too: a child's completion is one, freed on the worker that runs its
     * parent, and malloc's cross-thread free was a sixth of schedbench
     * spawn's time */
    sn__barenode_t *b = block_alloc(sizeof *b);
    if (!b)
        return NULL;
    b->data = p;
    b->n.bare = 1;
    b->n.shared = 0;
    return sn__evnode_fill(&b->n, type, error, tag, from, counted);
}

void sn__evnode_free_bare(sn__evnode_t *n)
{
    block_free(n, sizeof(sn__barenode_t));
}

void sn__evnode_free(sn__evnode_t *n)
{
    /* the payload first, through a copy of the pointer: a node inside its
     * payload goes with it */
    sn_payload_t *data = sn__evnode_data(n);
    bool bare = n->bare;
    sn_payload_destroy(&data); /* (a shared payload's reference, or NULL, if bare) */
    if (bare)
        sn__evnode_free_bare(n);
}

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

#define PREFIX ((sizeof(sn__evnode_t) + 15) & ~(size_t)15)

/* Small payloads (most messages) come from a per-thread cache of
 * fixed-size blocks: a message is allocated by its sender and freed by
 * its receiver, often on another worker, and malloc's arena locks are then
 * the bottleneck. Each thread keeps what it frees (up to CACHE_MAX blocks)
 * and returns the lot to malloc when it exits. */
#define SMALL_BLOCK 128
#define CACHE_MAX 4096

static _Thread_local void *cache_head;
static _Thread_local unsigned cache_n;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_drain(void *unused)
{
    (void)unused;
    while (cache_head) {
        void *b = cache_head;
        cache_head = *(void **)b;
        free(b);
    }
    cache_n = 0;
}

static void cache_setup(void)
{
    (void)pthread_key_create(&cache_key, cache_drain);
}

static void *block_alloc(size_t size)
{
    if (size > SMALL_BLOCK)
        return malloc(size);
    if (cache_head) {
        void *b = cache_head;
        cache_head = *(void **)b;
        cache_n--;
        return b;
    }
    return malloc(SMALL_BLOCK);
}

static void block_free(void *b, size_t size)
{
    if (size > SMALL_BLOCK || cache_n >= CACHE_MAX) {
        free(b);
        return;
    }
    if (cache_n == 0) {
        /* make sure this thread's exit drains its cache */
        pthread_once(&cache_once, cache_setup);
        (void)pthread_setspecific(cache_key, (void *)1);
    }
    *(void **)b = cache_head;
    cache_head = b;
    cache_n++;
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

sn_payload_t *sn_payload_new(uint32_t ctype, const void *bytes, size_t len)
{
    if (len > UINT32_MAX - 1)
        return NULL;
    unsigned char *base = block_alloc(block_size(len));
    if (!base)
        return NULL;
    ((sn__evnode_t *)(void *)base)->shared = 0;
    sn_payload_t *p = (sn_payload_t *)(base + PREFIX);
    p->ctype = ctype;
    p->len = (uint32_t)len;
    if (bytes)
        memcpy(p->data, bytes, len);
    else
        memset(p->data, 0, len);
    p->data[len] = 0;
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
    return sn_payload_new(SN_CT_U64, &value, sizeof value);
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

sn__evnode_t *sn__payload_node(sn_payload_t *p)
{
    return (sn__evnode_t *)(void *)((unsigned char *)p - PREFIX);
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

sn__evnode_t *sn__evnode_make(uint8_t type, int error, uint64_t tag, sn_pid_t from, sn_payload_t *p, bool counted)
{
    sn__evnode_t *n;
    if (p && !sn__payload_node(p)->shared) {
        n = sn__payload_node(p);
        n->bare = 0;
    } else {
        n = malloc(sizeof *n);
        if (!n)
            return NULL;
        n->bare = 1;
        n->shared = 0;
    }
    n->type = type;
    n->counted = counted;
    n->error = error;
    n->tag = tag;
    n->from = from;
    n->data = p;
    return n;
}

void sn__evnode_free(sn__evnode_t *n)
{
    if (n->bare) {
        sn_payload_destroy(&n->data); /* a shared payload's reference, or NULL */
        free(n);
    } else {
        /* the node lives inside the payload: destroy through a copy of the
         * pointer (clearing n->data would write into the freed block) */
        sn_payload_t *data = n->data;
        sn_payload_destroy(&data);
    }
}

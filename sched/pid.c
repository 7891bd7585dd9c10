/* pid.c - the PID text form (one printer, one parser) and the PID table,
 * a hash map from serial to process split into shards, each behind a
 * spinlock. The lock also serialises pushes into the queues of the
 * processes it holds, so a process removed from the table under its shard
 * lock can receive no further events.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

char *sn_pid_format(sn_pid_t pid, char *buf, size_t len)
{
    snprintf(buf, len, "%" PRIu32 ".%" PRIu64, pid.node, pid.serial);
    return buf;
}

/* Parses decimal digits into *out, refusing overflow past max. */
static const char *digits(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    const char *start = s;
    while (*s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        if (v > (max - d) / 10)
            return NULL;
        v = v * 10 + d;
        s++;
    }
    if (s == start || s - start > 20)
        return NULL;
    *out = v;
    return s;
}

int sn_pid_parse(const char *text, sn_pid_t *out)
{
    uint64_t node, serial;
    if (!text)
        return SN_EINVAL;
    const char *s = digits(text, UINT32_MAX, &node);
    if (!s || *s != '.')
        return SN_EINVAL;
    s = digits(s + 1, UINT64_MAX, &serial);
    if (!s || *s != '\0' || serial == 0)
        return SN_EINVAL;
    out->node = (uint32_t)node;
    out->serial = serial;
    return 0;
}

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return x;
}

int sn__ptable_init(sn__ptable_t *t)
{
    for (int i = 0; i < SN__SHARDS; i++) {
        sn__shard_t *s = &t->shards[i];
        atomic_flag_clear(&s->lock);
        s->nbuckets = 16;
        s->count = 0;
        s->buckets = calloc(s->nbuckets, sizeof *s->buckets);
        if (!s->buckets) {
            while (i-- > 0)
                free(t->shards[i].buckets);
            return SN_ENOMEM;
        }
    }
    return 0;
}

void sn__ptable_fini(sn__ptable_t *t)
{
    for (int i = 0; i < SN__SHARDS; i++) {
        free(t->shards[i].buckets);
        t->shards[i].buckets = NULL;
    }
}

sn__shard_t *sn__ptable_shard(sn__ptable_t *t, uint64_t serial)
{
    return &t->shards[mix(serial) >> 56];
}

void sn__shard_lock(sn__shard_t *s)
{
    /* acquire: the holder sees everything the previous holder wrote.
     * Bounded spin, then yield the CPU to a preempted holder. */
    for (unsigned spins = 0; atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire); spins++) {
        if (spins < 64)
            sn__cpu_relax();
        else
            sched_yield();
    }
}

void sn__shard_unlock(sn__shard_t *s)
{
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
}

static inline size_t bucket(const sn__shard_t *s, uint64_t serial)
{
    return (size_t)mix(serial) & (s->nbuckets - 1);
}

sn__proc_t *sn__shard_find(sn__shard_t *s, sn_pid_t pid)
{
    for (sn__proc_t *p = s->buckets[bucket(s, pid.serial)]; p; p = p->hnext)
        if (p->pid.serial == pid.serial && p->pid.node == pid.node)
            return p;
    return NULL;
}

int sn__shard_insert(sn__shard_t *s, sn__proc_t *p)
{
    if (s->count >= s->nbuckets) {
        size_t nb = s->nbuckets * 2;
        sn__proc_t **b = calloc(nb, sizeof *b);
        if (b) {
            sn__proc_t **old = s->buckets;
            size_t on = s->nbuckets;
            s->buckets = b;
            s->nbuckets = nb;
            for (size_t i = 0; i < on; i++)
                for (sn__proc_t *q = old[i], *nx; q; q = nx) {
                    nx = q->hnext;
                    size_t k = bucket(s, q->pid.serial);
                    q->hnext = b[k];
                    b[k] = q;
                }
            free(old);
        } /* on failure keep the longer chains: still correct */
    }
    size_t k = bucket(s, p->pid.serial);
    p->hnext = s->buckets[k];
    s->buckets[k] = p;
    s->count++;
    return 0;
}

void sn__shard_remove(sn__shard_t *s, sn__proc_t *p)
{
    for (sn__proc_t **pp = &s->buckets[bucket(s, p->pid.serial)]; *pp; pp = &(*pp)->hnext)
        if (*pp == p) {
            *pp = p->hnext;
            s->count--;
            return;
        }
}

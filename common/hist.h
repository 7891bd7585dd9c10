/* hist.h - a latency histogram with fixed buckets, cheap enough for a hot
 * path: one writer adds with relaxed loads and stores (no read-modify-
 * write), any thread reads. Metrics (node/metrics.c) print it in
 * Prometheus's histogram form; the buckets are fixed at compile time.
 */
#ifndef SN_HIST_H
#define SN_HIST_H

#include <stdatomic.h>
#include <stdint.h>

/* Upper bounds: 250 ns times 4^k, k = 0..12 (250 ns to 4.19 s), then +Inf. */
#define SN_HIST_BOUNDS 13
#define SN_HIST_BASE_NS 250u

/* Counts per bucket (not cumulative: the reader sums them) and the sum of
 * the observations. Written by one thread only (its owner: a worker, or
 * the relay's I/O thread); relaxed: a statistic, it orders nothing. */
typedef struct sn__hist {
    _Atomic uint64_t count[SN_HIST_BOUNDS + 1]; /* the last: over the largest bound */
    _Atomic uint64_t sum_ns;
} sn__hist_t;

/* The bucket of an observation: a few compares, fewest for the short ones. */
static inline unsigned sn__hist_bucket(uint64_t ns)
{
    uint64_t bound = SN_HIST_BASE_NS;
    unsigned b = 0;
    while (b < SN_HIST_BOUNDS && ns > bound) {
        bound <<= 2;
        b++;
    }
    return b;
}

/* Owner only: adds one observation. */
static inline void sn__hist_add(sn__hist_t *h, uint64_t ns)
{
    _Atomic uint64_t *c = &h->count[sn__hist_bucket(ns)];
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
    atomic_store_explicit(&h->sum_ns, atomic_load_explicit(&h->sum_ns, memory_order_relaxed) + ns,
                          memory_order_relaxed);
}

/* Any thread: adds h's counts into counts[SN_HIST_BOUNDS + 1] and its sum
 * into *sum_ns (a scrape sums the workers' histograms this way). */
static inline void sn__hist_read(const sn__hist_t *h, uint64_t *counts, uint64_t *sum_ns)
{
    for (unsigned i = 0; i <= SN_HIST_BOUNDS; i++)
        counts[i] += atomic_load_explicit(&h->count[i], memory_order_relaxed);
    *sum_ns += atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
}

#endif

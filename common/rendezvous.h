/* rendezvous.h - rendezvous (highest random weight) hashing: which nodes
 * of a set keep a key. Each node scores the key; the highest score keeps
 * it, the next ones keep its copies. A node that joins or leaves moves
 * only the keys it scores highest (or next highest) on, and every node
 * that sees the same set picks the same nodes. Pure functions, no state:
 * tests/test_rendezvous.c guards the choice.
 */
#ifndef SN_RENDEZVOUS_H
#define SN_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64's finalizer: every input bit moves every output bit. */
static inline uint64_t sn__rdv_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* FNV-1a over the key's bytes, then mixed. */
static inline uint64_t sn__rdv_key(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return sn__rdv_mix(h);
}

/* Node's score for a key (its sn__rdv_key). */
static inline uint64_t sn__rdv_score(uint64_t key, uint32_t node)
{
    return sn__rdv_mix(key ^ sn__rdv_mix(0x9e3779b97f4a7c15ull + node));
}

/* Is a (score sa) ranked before b (score sb)? Ties go to the lower id. */
static inline int sn__rdv_before(uint64_t sa, uint32_t a, uint64_t sb, uint32_t b)
{
    return sa > sb || (sa == sb && a < b);
}

/* The first k of nodes[0..n) in rendezvous order for the key, into
 * out[0..k): the keeper first, then its copies. Returns how many (at most
 * k, at most n). Duplicates in nodes count once. */
static inline size_t sn__rdv_rank(const void *key, size_t len, const uint32_t *nodes, size_t n, uint32_t *out, size_t k)
{
    uint64_t h = sn__rdv_key(key, len);
    size_t got = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = sn__rdv_score(h, nodes[i]);
        size_t j = 0;
        while (j < got && out[j] != nodes[i] && sn__rdv_before(sn__rdv_score(h, out[j]), out[j], s, nodes[i]))
            j++;
        if (j < got && out[j] == nodes[i])
            continue;
        if (j >= k)
            continue;
        size_t last = got < k ? got : k - 1;
        for (size_t m = last; m > j; m--)
            out[m] = out[m - 1];
        out[j] = nodes[i];
        if (got < k)
            got++;
    }
    return got;
}

#endif

/* svcrule.h - the pure rules of services (services.c): when a node holds a
 * majority, how long a failing service waits, and whether its failures
 * passed its restart intensity. No state: tests/test_services.c guards them.
 */
#ifndef SN_SVCRULE_H
#define SN_SVCRULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SN_SVC_BACKOFF_MS 250    /* the first wait past the intensity */
#define SN_SVC_BACKOFF_MAX 10000 /* no wait is longer */
#define SN_SVC_MAX_RESTARTS 3    /* the intensity's default: 3 failures ... */
#define SN_SVC_WITHIN_MS 5000    /* ... within 5 s */

/* A node holds a majority when it and the members it heard from lately
 * (`heard`, itself not counted) are more than half of the `known`
 * members (itself counted). */
static inline bool sn__svc_majority(size_t heard, size_t known)
{
    return known > 0 && 2 * (heard + 1) > known;
}

/* The wait before the next start of a service that passed its intensity
 * for the `over`-th time in a row (1, 2, ...): 250 ms doubled each time,
 * at most SN_SVC_BACKOFF_MAX. */
static inline uint64_t sn__svc_backoff_ms(uint32_t over)
{
    if (over == 0)
        return 0;
    uint64_t ms = SN_SVC_BACKOFF_MS;
    for (uint32_t i = 1; i < over && ms < SN_SVC_BACKOFF_MAX; i++)
        ms *= 2;
    return ms < SN_SVC_BACKOFF_MAX ? ms : SN_SVC_BACKOFF_MAX;
}

/* How many of the failure times (ns, any order) fall within `within_ms`
 * before now: more than max_restarts of them and the service backs off. */
static inline size_t sn__svc_recent(const uint64_t *fails, size_t n, uint64_t now, uint32_t within_ms)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (fails[i] && now - fails[i] <= (uint64_t)within_ms * 1000000u)
            k++;
    return k;
}

#endif

/* hops.h - hop tracing for `schedbench xnode-rtt --breakdown`: a probe
 * payload (SN_HOP_BYTES long, SN_HOP_MAGIC in its second word) collects a
 * CLOCK_MONOTONIC stamp at each hand-off it passes (the step that sends,
 * the relay thread picking it up, the zmq send, the peer's read, the
 * hand-over to its scheduler, the step that runs it, and back).
 *
 * The relay stamps only when SN_HOP_TRACE is set in its environment when
 * it starts (r->hop_trace): one predictable branch per hand-off otherwise.
 * A stamp goes in the first free slot: whoever holds the payload at that
 * moment writes it (one owner at a time: the queues between them order it).
 */
#ifndef SN_HOPS_H
#define SN_HOPS_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "schednode/schednode.h"

#define SN_HOP_MAGIC UINT64_C(0x48f9a1c3e5d7b203)
#define SN_HOP_SLOTS 11                      /* see bench/xnode.c: hop_names */
#define SN_HOP_BYTES (16 + 8 * SN_HOP_SLOTS) /* [seq][magic][stamps...] */

static inline uint64_t sn__hop_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Stamps `at` (0: now) into p's first free slot if p is a probe. */
static inline void sn__hop_stamp(sn_payload_t *p, uint64_t at)
{
    uint64_t magic;
    if (!p || p->len != SN_HOP_BYTES || sn_payload_is_shared(p))
        return;
    memcpy(&magic, p->data + 8, 8);
    if (magic != SN_HOP_MAGIC)
        return;
    for (int i = 0; i < SN_HOP_SLOTS; i++) {
        uint64_t v;
        memcpy(&v, p->data + 16 + 8 * i, 8);
        if (v == 0) {
            v = at ? at : sn__hop_now();
            memcpy(p->data + 16 + 8 * i, &v, 8);
            return;
        }
    }
}

#endif

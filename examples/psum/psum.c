/* psum.c - a fork-join computation: the sum of i*i for LO <= i < HI
 * (modulo 2^64). A range larger than LEAF is split in two halves, each
 * computed by a child process the parent awaits; small ranges are
 * computed directly. The tree of processes is what work stealing spreads
 * over workers (and, once cross-node stealing lands, over nodes: the state
 * is plain data, so marshal/unmarshal are a copy).
 *
 *   psum sum "LO HI"     e.g. schednode call psum sum "0 10000000"
 */
#include <inttypes.h>
#include <schednode/schednode.h>
#include <stdio.h>
#include <string.h>

#define LEAF 50000

typedef struct psum {
    uint64_t lo, hi;
    uint64_t total;
    int waiting; /* children not yet back */
    int started;
} psum_t;

static int psum_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    psum_t *p = state;
    if (strcmp(method, "sum") != 0)
        return SN_ENOMETHOD;
    char text[64] = "";
    if (*input)
        snprintf(text, sizeof text, "%.*s", (int)(*input)->len, (const char *)(*input)->data);
    if (sscanf(text, "%" SCNu64 " %" SCNu64, &p->lo, &p->hi) != 2 || p->lo > p->hi)
        return SN_EINVAL;
    return 0;
}

static void psum_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    psum_t *p = state;
    if (!p->started) {
        p->started = 1;
        if (p->hi - p->lo <= LEAF) { /* a leaf: compute it here */
            uint64_t s = 0;
            for (uint64_t i = p->lo; i < p->hi; i++)
                s += i * i;
            sn_payload_t *r = sn_payload_u64(s);
            sn_out_done(out, &r);
            return;
        }
        uint64_t mid = p->lo + (p->hi - p->lo) / 2;
        sn_payload_t *a = sn_payload_printf(SN_CT_TEXT, "%" PRIu64 " %" PRIu64, p->lo, mid);
        sn_payload_t *b = sn_payload_printf(SN_CT_TEXT, "%" PRIu64 " %" PRIu64, mid, p->hi);
        sn_out_spawn(out, 1, "psum", "sum", &a, SN_YIELD_AWAIT); /* completes with the child's result */
        sn_out_spawn(out, 2, "psum", "sum", &b, SN_YIELD_AWAIT);
        p->waiting = 2;
        out->status = SN_WAIT;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_YIELD_COMPLETE)
            continue;
        uint64_t v;
        if (ev[i].error || sn_payload_get_u64(ev[i].data, &v) != 0) {
            sn_out_fail(out, ev[i].error ? ev[i].error : SN_EINVAL, "psum: a half failed: %s",
                        sn_strerror(ev[i].error));
            return;
        }
        p->total += v;
        p->waiting--;
    }
    if (p->waiting > 0) {
        out->status = SN_WAIT;
        return;
    }
    sn_payload_t *r = sn_payload_u64(p->total);
    sn_out_done(out, &r);
}

static int psum_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    (void)ctx;
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(psum_t));
    return *out ? 0 : SN_ENOMEM;
}

static int psum_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    (void)ctx;
    if (in->len != sizeof(psum_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(psum_t));
    return 0;
}

static const sn_type_t psum_type = {
    .name = "psum",
    .version = 1,
    .state_size = sizeof(psum_t),
    .init = psum_init,
    .step = psum_step,
    .marshal = psum_marshal,
    .unmarshal = psum_unmarshal,
};

static int psum_plugin(sn_sched_t *sched)
{
    return sn_type_register(sched, &psum_type);
}
SN_PLUGIN_DEFINE("psum", psum_plugin);

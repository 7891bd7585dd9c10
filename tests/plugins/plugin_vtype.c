/* plugin_vtype.c - a migratable process type "vtype" whose version is
 * VTYPE_VERSION, built twice (plugin_version1.so, plugin_version2.so), so
 * that two nodes can disagree on it (tests/steal.sh). */
#include <string.h>

#include "schednode/schednode.h"

static int v_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return 0;
}

static void v_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    sn_out_done(out, NULL);
}

static int v_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, NULL, 0);
    return *out ? 0 : SN_ENOMEM;
}

static int v_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    return 0;
}

static const sn_type_t vtype = {"vtype", VTYPE_VERSION, 0, v_init, v_step, NULL, v_marshal, v_unmarshal};

static int init(sn_sched_t *sched)
{
    return sn_type_register(sched, &vtype);
}
SN_PLUGIN_DEFINE("vtype", init);

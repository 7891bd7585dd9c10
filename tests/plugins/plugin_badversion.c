/* plugin_badversion.c - a plugin built against another API version. Its
 * init would register a type; the loader must refuse it before calling
 * init, so that type must never appear.
 */
#include "schednode/schednode.h"

static int never_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return 0;
}

static void never_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    sn_out_done(out, NULL);
}

static const sn_type_t marker_type = {"badversion-was-initialised", 1, 0, never_init, never_step, NULL, NULL, NULL};

static int badversion_init(sn_sched_t *sched)
{
    return sn_type_register(sched, &marker_type);
}

__attribute__((visibility("default")))
const sn_plugin_t schednode_plugin = {SN_API_VERSION + 1, "badversion", badversion_init};

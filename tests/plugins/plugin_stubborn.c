/* plugin_stubborn.c - type "stubborn" (method "ignore"): a process that
 * ignores CANCEL and waits for messages forever, for tests/ps.sh: only a
 * forced kill ends it.
 */
#include <string.h>

#include "schednode/schednode.h"

static int stubborn_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    (void)state;
    (void)input;
    return strcmp(method, "ignore") == 0 ? 0 : SN_ENOMETHOD;
}

static void stubborn_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    (void)state;
    (void)ev;
    (void)n;
    out->status = SN_IDLE; /* whatever came, CANCEL included */
}

static const sn_type_t stubborn_type = {
    .name = "stubborn", .version = 1, .state_size = 0, .init = stubborn_init, .step = stubborn_step};

static int stubborn_plugin_init(sn_sched_t *sched)
{
    return sn_type_register(sched, &stubborn_type);
}
SN_PLUGIN_DEFINE("stubborn", stubborn_plugin_init);

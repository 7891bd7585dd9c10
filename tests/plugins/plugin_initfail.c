/* plugin_initfail.c - a plugin whose init fails with SN_EINVAL. */
#include "schednode/schednode.h"

static int initfail_init(sn_sched_t *sched)
{
    return SN_EINVAL;
}

SN_PLUGIN_DEFINE("initfail", initfail_init);

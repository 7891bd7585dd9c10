/* log.c - the logging layer (see log.h): one level for the process, one
 * table of level names, and the "node=N" every line starts with.
 */
#include "log.h"

#include <czmq.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {
#define NAME(id, name) [SN__LOG_##id] = name,
    SN__LOG_LEVELS(NAME)
#undef NAME
};

/* Written by main before the threads start (and read by any thread that
 * logs); relaxed: nothing else is published with it. */
static _Atomic int level = SN__LOG_INFO;

int sn__log_level_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

const char *sn__log_level_names(void)
{
#define LIST(id, name) ", " name
    static const char list[] = SN__LOG_LEVELS(LIST);
#undef LIST
    return list + 2; /* without the first ", " */
}

void sn__log_set_level(int l)
{
    atomic_store_explicit(&level, l, memory_order_relaxed);
}

int sn__log_level(void)
{
    return atomic_load_explicit(&level, memory_order_relaxed);
}

void sn__vlogf(uint32_t node, int l, const char *fmt, va_list ap)
{
    if (l > sn__log_level())
        return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    switch (l) {
    case SN__LOG_ERROR:
        zsys_error("node=%" PRIu32 " %s", node, msg);
        break;
    case SN__LOG_WARN:
        zsys_warning("node=%" PRIu32 " %s", node, msg);
        break;
    case SN__LOG_INFO:
        zsys_info("node=%" PRIu32 " %s", node, msg);
        break;
    default:
        zsys_debug("node=%" PRIu32 " %s", node, msg);
        break;
    }
}

void sn__logf(uint32_t node, int l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sn__vlogf(node, l, fmt, ap);
    va_end(ap);
}

bool sn__log_limit(sn__log_limit_t *l, uint64_t now_ns, uint64_t period_ns, char *more, size_t len)
{
    if (l->last_ns && now_ns - l->last_ns < period_ns) {
        l->quiet++;
        return false;
    }
    if (l->quiet)
        snprintf(more, len, " (%" PRIu64 " more since the last report)", l->quiet);
    else if (len)
        more[0] = 0;
    l->last_ns = now_ns;
    l->quiet = 0;
    return true;
}

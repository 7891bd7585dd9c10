/* log.c - the logging layer (see log.h): one level for the process, one
 * table of level names, and the "node=N" every line starts with.
 */
#include "log.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* The program's name in each line (zsys's log ident); written by main
 * before the threads start. */
static char ident[64] = "schednode";

void sn__log_set_ident(const char *name)
{
    snprintf(ident, sizeof ident, "%s", name);
}

/* zsys's line ("I: (ident) yy-mm-dd HH:MM:SS text"), written here with
 * milliseconds in the time: what happens within a second on a cluster
 * (a join, a detection) is read off the logs. One write per line, to
 * stderr (unbuffered), so threads' lines do not mix. */
void sn__vlogf(uint32_t node, int l, const char *fmt, va_list ap)
{
    if (l > sn__log_level())
        return;
    char line[1280];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof line, "%y-%m-%d %H:%M:%S", &tm);
    static const char tag[] = {
        [SN__LOG_ERROR] = 'E', [SN__LOG_WARN] = 'W', [SN__LOG_INFO] = 'I', [SN__LOG_DEBUG] = 'D'};
    char when[32];
    snprintf(when, sizeof when, "%.*s.%03ld", (int)n, line, ts.tv_nsec / 1000000L);
    int k = snprintf(line, sizeof line, "%c: (%s) %s node=%" PRIu32 " ",
                     tag[l < 0   ? 0
                         : l > 3 ? 3
                                 : l],
                     ident, when, node);
    if (k < 0 || (size_t)k >= sizeof line - 2)
        return;
    int m = vsnprintf(line + k, sizeof line - (size_t)k - 1, fmt, ap);
    size_t len = m < 0 ? (size_t)k : (size_t)k + (size_t)m;
    if (len > sizeof line - 2)
        len = sizeof line - 2; /* (cut at about 1 KiB) */
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
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

/* log.c - the logging layer (see log.h): one level for the process, one
 * table of level names, and the "node=N" every line starts with; or a
 * JSON object per line (json-c builds it) for log shippers.
 */
#include "log.h"

#include <json-c/json.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
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

/* SN__LOG_TEXT or _JSON: written by main before the threads start. */
static int format = SN__LOG_TEXT;

int sn__log_format_parse(const char *name)
{
    return !strcmp(name, "text") ? SN__LOG_TEXT : !strcmp(name, "json") ? SN__LOG_JSON : -1;
}

void sn__log_set_format(int f)
{
    format = f;
}

/* One JSON object, one line: the message (already formatted, cut like a
 * text line) with its time in UTC to the millisecond, level, ident and
 * node. */
static void json_line(uint32_t node, int l, const struct timespec *ts, const char *msg)
{
    struct tm tm;
    char when[48], day[32];
    gmtime_r(&ts->tv_sec, &tm);
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when, sizeof when, "%s.%03ldZ", day, ts->tv_nsec / 1000000L);
    json_object *o = json_object_new_object();
    if (!o)
        return;
    json_object_object_add(o, "time", json_object_new_string(when));
    json_object_object_add(o, "level", json_object_new_string(names[l]));
    json_object_object_add(o, "ident", json_object_new_string(ident));
    json_object_object_add(o, "node", json_object_new_int64(node));
    json_object_object_add(o, "message", json_object_new_string(msg));
    size_t len;
    const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    /* one write per line (stderr is unbuffered): threads' lines do not mix */
    char *line = malloc(len + 1);
    if (line) {
        memcpy(line, s, len);
        line[len] = '\n';
        fwrite(line, 1, len + 1, stderr);
        free(line);
    }
    json_object_put(o);
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
    if (l < SN__LOG_ERROR || l > SN__LOG_DEBUG)
        l = SN__LOG_ERROR;
    if (format == SN__LOG_JSON) {
        vsnprintf(line, 1024, fmt, ap); /* (cut at 1 KiB, as a text line) */
        json_line(node, l, &ts, line);
        return;
    }
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

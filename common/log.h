/* log.h - the one logging layer, of the program (node/) and of the relay
 * (relay_int.h's SNLOG_*): lines as czmq's zsys writes them, filtered by one level, each line
 * naming its node once ("node=N ..."); and the one table
 * of level names that the flags and the configuration file both read.
 */
#ifndef SN_LOG_H
#define SN_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The levels, most severe first, with the names users write for them. */
#define SN__LOG_LEVELS(X)                                                                                              \
    X(ERROR, "error")                                                                                                  \
    X(WARN, "warn")                                                                                                    \
    X(INFO, "info")                                                                                                    \
    X(DEBUG, "debug")

enum {
#define SN__LOG_ENUM(id, name) SN__LOG_##id,
    SN__LOG_LEVELS(SN__LOG_ENUM)
#undef SN__LOG_ENUM
};

/* The level named `name`, or -1 if it names none. */
int sn__log_level_parse(const char *name);
/* The names, for messages: "error, warn, info, debug". */
const char *sn__log_level_names(void);

/* Lines above `level` are dropped (default SN__LOG_INFO). Any thread. */
void sn__log_set_level(int level);
int sn__log_level(void);

/* Line formats: zsys's text (default), or one JSON object per line for
 * log shippers: {"time": "2026-01-31T12:00:00.123Z" (UTC, milliseconds),
 * "level": "info", "ident": IDENT, "node": NODE, "message": TEXT}. The
 * layer has no structured fields beyond these: a line's details are in
 * its message. Set before the threads start. */
enum { SN__LOG_TEXT = 0, SN__LOG_JSON = 1 };
/* SN__LOG_TEXT or _JSON for "text" or "json"; -1 for anything else. */
int sn__log_format_parse(const char *name);
void sn__log_set_format(int format);

/* One line at `level`, as zsys writes them ("I: (IDENT) yy-mm-dd
 * HH:MM:SS") but with milliseconds, then "node=NODE " and the formatted
 * text (cut at about 1 KiB), to stderr. Any thread. The ident (default
 * "schednode") is set before the threads start. */
void sn__log_set_ident(const char *name);
void sn__logf(uint32_t node, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void sn__vlogf(uint32_t node, int level, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/* The one rate limit of log lines: at most one line of a kind per
 * period, each saying how many of that kind were kept quiet since. A
 * zeroed sn__log_limit_t is ready; one thread owns each. sn__log_limit
 * returns false (and counts one more quiet line) within the period; else
 * true, with `more` set to "" or " (N more since the last report)". */
typedef struct sn__log_limit {
    uint64_t last_ns, quiet;
} sn__log_limit_t;
bool sn__log_limit(sn__log_limit_t *l, uint64_t now_ns, uint64_t period_ns, char *more, size_t len);

#endif

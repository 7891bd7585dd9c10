/* config.c - loading a node's configuration (see config.h).
 *
 * czmq's zconfig parses the file; this file knows the schema. zconfig does
 * not keep line numbers, so to name the line of a bad key we look the key
 * up again in the text: its path (section/key) and which occurrence it is.
 * The text is read once, here: only a regular file, of bounded size, with
 * no NUL byte and no line longer than zconfig reads (it would cut either
 * short without a word), and in ZPL's syntax (check_syntax), so that a
 * syntax error too names its line.
 */
#include "config.h"
#include "log.h"

#include <ctype.h>
#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A configuration is a few hundred bytes; this is far above any real one. */
#define TEXT_MAX (1u << 20)
/* zconfig_chunk_load reads a line into 1024 bytes and drops the rest. */
#define LINE_MAX_ 1024

typedef struct own {
    zconfig_t *root;
    char *text;     /* the file as read */
    char **strings; /* values we made (absolute paths); freed with the config */
    size_t nstrings;
} own_t;

/* Walks the key lines of a ZPL text, keeping the path ("section/key") of
 * each. ZPL indents each level by 4 spaces. */
typedef struct walk {
    const char *p, *end;
    int lineno;    /* of the line just read */
    size_t levels; /* stack[0..levels) hold the names above this line */
    char stack[16][256];
    char here[4096];  /* the path of the line just read */
    size_t name_end;  /* offset in the line where its name ends */
    const char *line; /* the line just read */
} walk_t;

/* Advances to the next line that names a key or a section; false at the end. */
static bool walk_next(walk_t *w)
{
    while (w->p < w->end) {
        const char *line = w->p, *nl = memchr(line, '\n', (size_t)(w->end - line));
        size_t len = nl ? (size_t)(nl - line) : (size_t)(w->end - line);
        w->p = nl ? nl + 1 : w->end;
        w->lineno++;
        size_t sp = 0;
        while (sp < len && line[sp] == ' ')
            sp++;
        if (sp == len || line[sp] == '#' || line[sp] == '\r' || line[sp] == 0)
            continue;
        size_t depth = sp / 4, n = 0;
        while (sp + n < len && !memchr(" =\t\r", line[sp + n], 4) && line[sp + n] != 0)
            n++;
        if (depth >= 16 || n >= 256 || depth > w->levels)
            continue; /* (indented deeper than any parent: the loader refuses the file anyway) */
        memcpy(w->stack[depth], line + sp, n);
        w->stack[depth][n] = 0;
        w->levels = depth + 1;
        w->here[0] = 0;
        for (size_t i = 0; i <= depth; i++) {
            strncat(w->here, w->stack[i], sizeof w->here - strlen(w->here) - 1);
            if (i < depth)
                strncat(w->here, "/", sizeof w->here - strlen(w->here) - 1);
        }
        w->line = line;
        w->name_end = sp + n;
        return true;
    }
    return false;
}

/* The line (1-based) of the nth (0-based) occurrence of path "a/b" in the
 * text, or 0. */
static int line_of(const char *text, size_t len, const char *path, int nth)
{
    walk_t w = {.p = text, .end = text + len};
    int found = 0;
    while (walk_next(&w))
        if (!strcmp(w.here, path) && found++ == nth)
            return w.lineno;
    return 0;
}

typedef struct ctx {
    const char *file;
    const char *text; /* the file's contents (len bytes) */
    size_t len;
    char *err;
    size_t errlen;
    own_t *own;
    char dir[PATH_MAX];
} ctx_t;

static int fail(ctx_t *c, const char *path, int nth, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(ctx_t *c, const char *path, int nth, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int line = line_of(c->text, c->len, path, nth);
    if (line)
        snprintf(c->err, c->errlen, "%s:%d: %s: %s", c->file, line, path, what);
    else
        snprintf(c->err, c->errlen, "%s: %s: %s", c->file, path, what);
    return -1;
}

static int number(ctx_t *c, const char *path, int nth, const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        return fail(c, path, nth, "'%s' is not a number from %lld to %lld", v, lo, hi);
    *out = n;
    return 0;
}

static int boolean(ctx_t *c, const char *path, int nth, const char *v, int *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1"))
        *out = 1;
    else if (!strcmp(v, "false") || !strcmp(v, "0"))
        *out = 0;
    else
        return fail(c, path, nth, "'%s' is not true or false", v);
    return 0;
}

int sn_config_endpoint(const char *ep, int flags, char *why, size_t whylen)
{
    const char *detail = NULL;
    char buf[128] = "";
    const char *host = ep + 6, *colon = strrchr(ep, ':');
    if (strncmp(ep, "tcp://", 6) != 0 || colon < host) {
        snprintf(why, whylen, "'%s' is not tcp://HOST:PORT%s", ep, strncmp(ep, "tcp://", 6) ? "" : ": no port");
        return -1;
    }
    if (host[0] == '[') { /* the port follows the bracket */
        const char *close = strchr(host, ']');
        if (close && close[1] != ':') {
            snprintf(why, whylen, "'%s' is not tcp://HOST:PORT: no port after the IPv6 address", ep);
            return -1;
        }
    }
    const char *port = colon + 1;
    size_t hlen = (size_t)(colon - host);
    if (strlen(ep) >= 256) {
        detail = "longer than 255 characters";
    } else if (hlen == 0) {
        detail = "no host";
    } else if (host[0] == '[') {
        /* hex digits, ':' and '.', and a zone after '%' (fe80::1%eth0) */
        static const char v6[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:.%-_";
        if (hlen < 3 || host[hlen - 1] != ']' || strspn(host + 1, v6) < hlen - 2)
            detail = "not an IPv6 address in brackets, like [::1]";
    } else if (memchr(host, ':', hlen)) {
        detail = "an IPv6 address goes in brackets: tcp://[::1]:PORT";
    } else if (hlen == 1 && host[0] == '*') {
        if (!(flags & SN_ENDPOINT_BIND))
            detail = "'*' (every interface) is only for listening: name a host to dial";
    } else {
        size_t ok = strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_");
        if (ok < hlen) {
            snprintf(buf, sizeof buf, "the host has a '%c': a host is a name or an address", host[ok]);
            detail = buf;
        }
    }
    if (!detail) {
        size_t digits = strspn(port, "0123456789");
        long long n = 0;
        for (size_t i = 0; i < digits && n <= 65535; i++)
            n = n * 10 + (port[i] - '0');
        if (!strcmp(port, "*")) {
            if (!(flags & SN_ENDPOINT_BIND))
                detail = "port '*' (any free port) is only for listening";
        } else if (!*port || digits != strlen(port)) {
            snprintf(buf, sizeof buf, "the port '%.32s' is not a number", port);
            detail = buf;
        } else if (n == 0 && (flags & SN_ENDPOINT_BIND)) {
            detail = "port 0: to listen on any free port, say tcp://HOST:*";
        } else if (n < 1 || n > 65535) {
            snprintf(buf, sizeof buf, "port %.32s is not from 1 to 65535", port);
            detail = buf;
        }
    }
    if (!detail)
        return 0;
    snprintf(why, whylen, "'%s' is not tcp://HOST:PORT: %s", ep, detail);
    return -1;
}

static int endpoint(ctx_t *c, const char *path, int nth, const char *v, int flags)
{
    char why[512];
    if (sn_config_endpoint(v, flags, why, sizeof why) != 0)
        return fail(c, path, nth, "%s", why);
    return 0;
}

/* A path from the file, made absolute against the file's directory. */
static const char *path_value(ctx_t *c, const char *v)
{
    if (v[0] == '/')
        return v;
    char *abs = zsys_sprintf("%s/%s", c->dir, v);
    char **a = abs ? realloc(c->own->strings, (c->own->nstrings + 1) * sizeof *a) : NULL;
    if (!a) {
        free(abs);
        return v;
    }
    a[c->own->nstrings++] = abs;
    c->own->strings = a;
    return abs;
}

/* Appends v to a growing array of strings. */
static int push(const char ***arr, size_t *n, const char *v)
{
    const char **a = realloc(*arr, (*n + 1) * sizeof *a);
    if (!a)
        return -1;
    a[(*n)++] = v;
    *arr = a;
    return 0;
}

/* Counts earlier siblings named like item (for the line lookup). */
static int nth_of(zconfig_t *section, zconfig_t *item)
{
    int n = 0;
    for (zconfig_t *k = zconfig_child(section); k && k != item; k = zconfig_next(k))
        if (!strcmp(zconfig_name(k), zconfig_name(item)))
            n++;
    return n;
}

/* Counts the earlier occurrences of key's path in the whole file: a key
 * may come back in a second section of the same name. */
static int nth_in_file(zconfig_t *root, zconfig_t *section, zconfig_t *key)
{
    int n = nth_of(section, key);
    for (zconfig_t *s = zconfig_child(root); s && s != section; s = zconfig_next(s))
        if (!strcmp(zconfig_name(s), zconfig_name(section)))
            for (zconfig_t *k = zconfig_child(s); k; k = zconfig_next(k))
                if (!strcmp(zconfig_name(k), zconfig_name(key)))
                    n++;
    return n;
}

/* Reads the whole file into *text (NUL-terminated, *len bytes before the
 * NUL): a regular file of at most TEXT_MAX bytes. Returns 0, or -1 with
 * err set. */
static int read_text(const char *file, char **text, size_t *len, char *err, size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused
     * below); it changes nothing for a regular file */
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", file, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: cannot read: %s", file, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: %s, not a configuration file (a regular text file)", file,
                 S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket");
        close(fd);
        return -1;
    }
    /* st_size is only a hint (files in /proc say 0): read to the end, up to
     * one byte past the limit */
    size_t cap = st.st_size > 0 && st.st_size <= TEXT_MAX ? (size_t)st.st_size + 1 : 4096, n = 0;
    char *buf = NULL;
    for (;;) {
        if (n == cap || !buf) {
            cap = n == cap ? cap * 2 : cap;
            char *more = realloc(buf, cap + 1);
            if (!more) {
                snprintf(err, errlen, "%s: out of memory", file);
                break;
            }
            buf = more;
        }
        ssize_t got = read(fd, buf + n, (cap < TEXT_MAX + 1 ? cap : TEXT_MAX + 1) - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(err, errlen, "%s: cannot read: %s", file, strerror(errno));
            break;
        }
        n += (size_t)got;
        if (n > TEXT_MAX) {
            snprintf(err, errlen, "%s: over %u bytes: too large for a configuration file", file, TEXT_MAX);
            break;
        }
        if (got == 0) {
            close(fd);
            buf[n] = 0;
            *text = buf;
            *len = n;
            return 0;
        }
    }
    close(fd);
    free(buf);
    return -1;
}

/* Refuses what zconfig would silently cut short: a NUL byte (it ends the
 * line there) and a line longer than it reads. */
static int check_text(ctx_t *c)
{
    const char *p = c->text, *end = c->text + c->len;
    for (int lineno = 1; p < end; lineno++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *nul = memchr(p, 0, len);
        if (nul) {
            /* name the key when the NUL is in its value */
            walk_t w = {.p = c->text, .end = c->text + c->len};
            while (walk_next(&w) && w.lineno < lineno)
                ;
            if (w.lineno == lineno && w.line == p && (size_t)(nul - p) >= w.name_end)
                snprintf(c->err, c->errlen, "%s:%d: %s: a NUL byte in the value (a configuration file is text)",
                         c->file, lineno, w.here);
            else
                snprintf(c->err, c->errlen, "%s:%d: a NUL byte (a configuration file is text)", c->file, lineno);
            return -1;
        }
        if (len > LINE_MAX_) {
            snprintf(c->err, c->errlen, "%s:%d: a line of %zu bytes, over the %d a line may have", c->file, lineno, len,
                     LINE_MAX_);
            return -1;
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

/* ZPL's syntax, as zconfig reads it (czmq's zconfig_chunk_load): the
 * first mistake, named by its line. zconfig would print its own terse
 * line to stdout and give no line to us; checked here, zconfig never
 * fails on a file that passed. config.sh (syntax errors) guards the
 * messages. */
static const char *const zpl_rule = "a section at the start of a line, its keys 4 spaces in";

static bool zpl_namechar(char ch)
{
    return isalnum((unsigned char)ch) || (ch && strchr("$-_@.&+/", ch));
}

/* Whitespace up to the end or a '#' comment: NULL, else the junk. */
static const char *zpl_junk(const char *p)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    return *p && *p != '#' ? p : NULL;
}

/* What is wrong with a key's line after its name (p), or NULL. */
static const char *zpl_value(const char *p, char *why, size_t len)
{
    const char *junk;
    while (isspace((unsigned char)*p))
        p++;
    if (*p != '=') {
        if ((junk = zpl_junk(p)) != NULL)
            snprintf(why, len, "'%.40s' after the name: a key is NAME = VALUE", junk);
        return junk ? why : NULL;
    }
    for (p++; isspace((unsigned char)*p); p++)
        ;
    if (*p != '"' && *p != '\'')
        return NULL; /* a bare value, up to a '#' */
    const char *close = strchr(p + 1, *p);
    if (!close) {
        snprintf(why, len, "the value opens with %c but does not close it", *p);
        return why;
    }
    if ((junk = zpl_junk(close + 1)) != NULL)
        snprintf(why, len, "'%.40s' after the quoted value (a '#' starts a comment)", junk);
    return junk ? why : NULL;
}

/* One line (a copy, trailing space cut) at chain levels deep: what is
 * wrong with it, or NULL; *named: the level of its name, or -1. */
static const char *zpl_line(const char *line, int chain, int *named, char *why, size_t len)
{
    size_t sp = strspn(line, " ");
    *named = -1;
    if (sp % 4) {
        snprintf(why, len, "indented by %zu spaces: ZPL indents in steps of 4 spaces (%s)", sp, zpl_rule);
        return why;
    }
    const char *name = line + sp, *end = name;
    while (zpl_namechar(*end))
        end++;
    if (*name == '\t') {
        snprintf(why, len, "a tab: ZPL indents with spaces, in steps of 4 (%s)", zpl_rule);
        return why;
    }
    if (end == name) {
        const char *junk = zpl_junk(name);
        if (junk)
            snprintf(why, len, "'%.40s' is not a name (letters, digits, $-_@.&+/)", junk);
        return junk ? why : NULL;
    }
    if (*name == '/' || end[-1] == '/') {
        snprintf(why, len, "'%.*s': a name neither starts nor ends with '/'", (int)(end - name), name);
        return why;
    }
    if ((int)(sp / 4) > chain) {
        snprintf(why, len, "'%.*s' is indented by %zu spaces, more than one step under the line above (%s)",
                 (int)(end - name), name, sp, zpl_rule);
        return why;
    }
    *named = (int)(sp / 4);
    return zpl_value(end, why, len);
}

static int check_syntax(ctx_t *c)
{
    const char *p = c->text, *end = c->text + c->len;
    int chain = 0; /* how deep the last key's path goes: a line may go one deeper */
    for (int lineno = 1; p < end; lineno++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[LINE_MAX_ + 1], why[256];
        memcpy(line, p, len); /* (check_text: len <= LINE_MAX_) */
        while (len && isspace((unsigned char)line[len - 1]))
            len--;
        line[len] = 0;
        int named;
        if (zpl_line(line, chain, &named, why, sizeof why)) {
            snprintf(c->err, c->errlen, "%s:%d: %s", c->file, lineno, why);
            return -1;
        }
        if (named >= 0)
            chain = named + 1;
        p = nl ? nl + 1 : end;
    }
    return 0;
}

static int node_key(ctx_t *c, sn_node_config_t *o, const char *key, const char *path, int nth, const char *v)
{
    long long n = 0;
    if (!strcmp(key, "id")) {
        if (number(c, path, nth, v, 1, UINT32_MAX, &n))
            return -1;
        o->node_id = (uint32_t)n;
    } else if (!strcmp(key, "name")) {
        if (!*v || strlen(v) > 32 ||
            strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(v))
            return fail(c, path, nth, "'%s': a name has 1 to 32 letters, digits, '.', '_' or '-'", v);
        o->name = v;
    } else if (!strcmp(key, "workers")) {
        if (number(c, path, nth, v, 1, 1024, &n))
            return -1;
        o->workers = (int)n;
    } else if (!strcmp(key, "listen")) {
        if (endpoint(c, path, nth, v, SN_ENDPOINT_BIND))
            return -1;
        o->listen = v;
    } else if (!strcmp(key, "metrics") || !strcmp(key, "dashboard")) {
        if (endpoint(c, path, nth, v, SN_ENDPOINT_BIND))
            return -1;
        *(key[0] == 'm' ? &o->metrics : &o->dashboard) = v;
    } else if (!strcmp(key, "advertise")) {
        if (endpoint(c, path, nth, v, 0))
            return -1;
        o->advertise = v;
    } else if (!strcmp(key, "plugin")) {
        if (push(&o->plugins, &o->nplugins, path_value(c, v)))
            return fail(c, path, nth, "out of memory");
    } else if (!strcmp(key, "shutdown-timeout-ms")) {
        if (number(c, path, nth, v, 0, INT_MAX, &n))
            return -1;
        o->shutdown_ms = (int)n;
    } else if (!strcmp(key, "log-level")) {
        int level = sn__log_level_parse(v);
        if (level < 0)
            return fail(c, path, nth, "'%s' is not one of %s", v, sn__log_level_names());
        o->log_level = level;
    } else if (!strcmp(key, "log-format")) {
        if ((o->log_format = sn__log_format_parse(v)) < 0)
            return fail(c, path, nth, "'%s' is not text or json", v);
    } else {
        return fail(c, path, nth,
                    "unknown key (node takes id, name, workers, listen, advertise, "
                    "metrics, dashboard, plugin, shutdown-timeout-ms, log-level, log-format)");
    }
    return 0;
}

/* A service line: NAME TYPE METHOD [ARG], words split by spaces (ARG: the
 * rest of the line); 0 or -1. */
static int service_line(const char *v)
{
    size_t len[3];
    for (int i = 0; i < 3; i++) {
        v += strspn(v, " ");
        len[i] = strcspn(v, " ");
        if (!len[i] || len[i] > (i ? 63u : 255u))
            return -1;
        v += len[i];
    }
    return 0;
}

static int cluster_key(ctx_t *c, sn_node_config_t *o, const char *key, const char *path, int nth, const char *v)
{
    long long n = 0;
    if (!strcmp(key, "name")) {
        if (!*v || strlen(v) >= 64)
            return fail(c, path, nth, "a cluster name has 1 to 63 characters");
        o->cluster = v;
    } else if (!strcmp(key, "seed")) {
        if (endpoint(c, path, nth, v, 0))
            return -1;
        if (push(&o->seeds, &o->nseeds, v))
            return fail(c, path, nth, "out of memory");
    } else if (!strcmp(key, "service")) {
        if (service_line(v) != 0)
            return fail(c, path, nth, "'%s' is not NAME TYPE METHOD [ARG] (words of at most 63 bytes; NAME 255)", v);
        if (push(&o->services, &o->nservices, v))
            return fail(c, path, nth, "out of memory");
    } else if (!strcmp(key, "heartbeat-ms")) {
        if (number(c, path, nth, v, 10, 60000, &n))
            return -1;
        o->heartbeat_ms = (int)n;
    } else if (!strcmp(key, "forget-after-ms")) {
        if (number(c, path, nth, v, 1000, INT_MAX, &n))
            return -1;
        o->forget_after_ms = (int)n;
    } else if (!strcmp(key, "down-after-ms")) {
        if (number(c, path, nth, v, 50, 600000, &n))
            return -1;
        o->down_after_ms = (int)n;
    } else if (!strcmp(key, "join-timeout-ms")) {
        if (number(c, path, nth, v, 100, INT_MAX, &n))
            return -1;
        o->join_timeout_ms = (int)n;
    } else if (!strcmp(key, "steal")) {
        if (boolean(c, path, nth, v, &o->steal))
            return -1;
    } else if (!strcmp(key, "steal-batch")) {
        if (number(c, path, nth, v, 1, 4096, &n))
            return -1;
        o->steal_batch = (int)n;
    } else if (!strcmp(key, "max-frame")) {
        if (number(c, path, nth, v, 4096, 1LL << 30, &n))
            return -1;
        o->max_frame = n;
    } else if (!strcmp(key, "max-message")) {
        if (number(c, path, nth, v, 1, 1LL << 32, &n))
            return -1;
        o->max_message = n;
    } else if (!strcmp(key, "backlog-full")) {
        if (strcmp(v, "wait") != 0 && strcmp(v, "fail") != 0)
            return fail(c, path, nth, "'%s' is not wait or fail", v);
        o->backlog_full = strcmp(v, "fail") == 0 ? "fail" : "wait";
    } else if (!strcmp(key, "max-backlog")) {
        if (number(c, path, nth, v, 1LL << 20, 1LL << 40, &n))
            return -1;
        o->max_backlog = n;
    } else {
        return fail(c, path, nth,
                    "unknown key (cluster takes name, seed, service, heartbeat-ms, down-after-ms, forget-after-ms, "
                    "join-timeout-ms, max-frame, max-message, max-backlog, backlog-full, steal, steal-batch)");
    }
    return 0;
}

static int security_key(ctx_t *c, sn_node_config_t *o, const char *key, const char *path, int nth, const char *v)
{
    if (!strcmp(key, "cert")) {
        o->cert = path_value(c, v);
    } else if (!strcmp(key, "authorized-keys")) {
        o->authorized = path_value(c, v);
    } else if (!strcmp(key, "insecure")) {
        if (boolean(c, path, nth, v, &o->insecure))
            return -1;
    } else {
        return fail(c, path, nth, "unknown key (security takes cert, authorized-keys, insecure)");
    }
    return 0;
}

int sn_config_load(const char *file, sn_node_config_t *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->shutdown_ms = -1;
    o->log_level = -1;
    o->log_format = -1;
    o->insecure = -1;
    o->steal = -1;
    own_t *own = calloc(1, sizeof *own);
    if (!own) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -1;
    }
    o->own = own;
    ctx_t c = {file, "", 0, err, errlen, own, ""};
    char *slash = strrchr(file, '/');
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - file) : 1, slash ? file : ".");
    if (!realpath(dir[0] ? dir : "/", c.dir))
        snprintf(c.dir, sizeof c.dir, "%s", dir);
    if (read_text(file, &own->text, &c.len, err, errlen) != 0)
        return -1;
    c.text = own->text;
    if (check_text(&c) != 0 || check_syntax(&c) != 0)
        return -1;
    /* parsed from memory: zconfig_load leaks its file object on a syntax
     * error (czmq 4.2) */
    zchunk_t *chunk = zchunk_new(c.text, c.len);
    own->root = chunk ? zconfig_chunk_load(chunk) : NULL;
    zchunk_destroy(&chunk);
    if (!own->root) {
        snprintf(err, errlen, "%s: not valid ZPL (zconfig refused it)", file);
        return -1;
    }
    for (zconfig_t *sec = zconfig_child(own->root); sec; sec = zconfig_next(sec)) {
        const char *sname = zconfig_name(sec);
        int (*handler)(ctx_t *, sn_node_config_t *, const char *, const char *, int, const char *) =
            !strcmp(sname, "node")       ? node_key
            : !strcmp(sname, "cluster")  ? cluster_key
            : !strcmp(sname, "security") ? security_key
                                         : NULL;
        if (!handler)
            return fail(&c, sname, nth_of(own->root, sec), "unknown section (sections: node, cluster, security)");
        if (zconfig_value(sec) && *zconfig_value(sec))
            return fail(&c, sname, nth_of(own->root, sec), "a section takes no value, only keys indented under it");
        for (zconfig_t *k = zconfig_child(sec); k; k = zconfig_next(k)) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", sname, zconfig_name(k));
            int nth = nth_in_file(own->root, sec, k);
            if (zconfig_child(k))
                return fail(&c, path, nth, "a key takes a value, not keys under it");
            /* single-valued keys may appear once in the file, also when a
             * second section of the same name gives them again */
            if (strcmp(zconfig_name(k), "seed") && strcmp(zconfig_name(k), "plugin") &&
                strcmp(zconfig_name(k), "service") && nth > 0)
                return fail(&c, path, nth, "given twice (first at line %d)", line_of(c.text, c.len, path, 0));
            const char *v = zconfig_value(k) ? zconfig_value(k) : "";
            if (handler(&c, o, zconfig_name(k), path, nth, v) != 0)
                return -1;
        }
    }
    /* contradictions, each named by the key that makes it one */
    if (o->insecure == 1 && (o->cert || o->authorized))
        return fail(&c, "security/insecure", 0, "insecure = true contradicts a cert or authorized-keys");
    if (!o->cert != !o->authorized)
        return fail(&c, o->cert ? "security/cert" : "security/authorized-keys", 0,
                    "cert and authorized-keys go together");
    if (o->nseeds && !o->listen)
        return fail(&c, "cluster/seed", 0, "joining needs node/listen (members must reach this node)");
    if (o->heartbeat_ms && o->down_after_ms && o->down_after_ms < 2 * o->heartbeat_ms)
        return fail(&c, "cluster/down-after-ms", 0,
                    "%d ms is under two heartbeats (%d ms each): every node would "
                    "look down",
                    o->down_after_ms, o->heartbeat_ms);
    return 0;
}

void sn_config_free(sn_node_config_t *c)
{
    own_t *own = c->own;
    if (own) {
        zconfig_destroy(&own->root);
        free(own->text);
        for (size_t i = 0; i < own->nstrings; i++)
            free(own->strings[i]);
        free(own->strings);
        free(own);
    }
    free(c->seeds);
    free(c->services);
    free(c->plugins);
    memset(c, 0, sizeof *c);
}

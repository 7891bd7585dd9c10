/* config.c - loading a node's ZPL configuration (see config.h).
 *
 * czmq's zconfig parses the file; this file knows the schema. zconfig does
 * not keep line numbers, so to name the line of a bad key we look the key
 * up again in the text: its path (section/key) and which occurrence it is.
 */
#include "config.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct own {
    zconfig_t *root;
    char **strings; /* values we made (absolute paths); freed with the config */
    size_t nstrings;
} own_t;

/* The line (1-based) of the nth (0-based) occurrence of path "a/b" in the
 * ZPL text of file, or 0. ZPL indents each level by 4 spaces. */
static int line_of(const char *file, const char *path, int nth)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    char line[4096], stack[16][256];
    int lineno = 0, found = 0;
    size_t levels = 0; /* stack[0..levels) hold the names above this line */
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t sp = strspn(line, " ");
        char *name = line + sp;
        if (*name == '#' || *name == '\n' || *name == '\r' || *name == 0)
            continue;
        size_t depth = sp / 4, n = strcspn(name, " =\t\r\n");
        if (depth >= 16 || n >= 256 || depth > levels)
            continue; /* (indented deeper than any parent: the loader refuses the file anyway) */
        memcpy(stack[depth], name, n);
        stack[depth][n] = 0;
        levels = depth + 1;
        char here[4096] = "";
        for (size_t i = 0; i <= depth; i++) {
            strncat(here, stack[i], sizeof here - strlen(here) - 1);
            if (i < depth)
                strncat(here, "/", sizeof here - strlen(here) - 1);
        }
        if (!strcmp(here, path) && found++ == nth) {
            fclose(f);
            return lineno;
        }
    }
    fclose(f);
    return 0;
}

typedef struct ctx {
    const char *file;
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
    int line = line_of(c->file, path, nth);
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

static int endpoint(ctx_t *c, const char *path, int nth, const char *v)
{
    if (strncmp(v, "tcp://", 6) != 0 || !strchr(v + 6, ':'))
        return fail(c, path, nth, "'%s' is not tcp://HOST:PORT", v);
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

static int node_key(ctx_t *c, sn_node_config_t *o, const char *key, const char *path, int nth, const char *v)
{
    long long n = 0;
    if (!strcmp(key, "id")) {
        if (number(c, path, nth, v, 1, UINT32_MAX, &n))
            return -1;
        o->node_id = (uint32_t)n;
    } else if (!strcmp(key, "name")) {
        if (!*v || strlen(v) > 32 || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                                         strlen(v))
            return fail(c, path, nth, "'%s': a name has 1 to 32 letters, digits, '.', '_' or '-'", v);
        o->name = v;
    } else if (!strcmp(key, "workers")) {
        if (number(c, path, nth, v, 1, 1024, &n))
            return -1;
        o->workers = (int)n;
    } else if (!strcmp(key, "listen")) {
        if (endpoint(c, path, nth, v))
            return -1;
        o->listen = v;
    } else if (!strcmp(key, "advertise")) {
        if (endpoint(c, path, nth, v))
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
        if (strcmp(v, "error") && strcmp(v, "warn") && strcmp(v, "info") && strcmp(v, "debug"))
            return fail(c, path, nth, "'%s' is not one of error, warn, info, debug", v);
        o->log_level = v;
    } else {
        return fail(c, path, nth, "unknown key (node takes id, name, workers, listen, advertise, "
                                  "plugin, shutdown-timeout-ms, log-level)");
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
        if (endpoint(c, path, nth, v) || push(&o->seeds, &o->nseeds, v))
            return -1;
    } else if (!strcmp(key, "heartbeat-ms")) {
        if (number(c, path, nth, v, 10, 60000, &n))
            return -1;
        o->heartbeat_ms = (int)n;
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
        if (number(c, path, nth, v, 1024, 1LL << 30, &n))
            return -1;
        o->max_frame = n;
    } else {
        return fail(c, path, nth, "unknown key (cluster takes name, seed, heartbeat-ms, down-after-ms, "
                                  "join-timeout-ms, max-frame, steal, steal-batch)");
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
    o->insecure = -1;
    o->steal = -1;
    own_t *own = calloc(1, sizeof *own);
    if (!own) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -1;
    }
    o->own = own;
    ctx_t c = {file, err, errlen, own, ""};
    char *slash = strrchr(file, '/');
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - file) : 1, slash ? file : ".");
    if (!realpath(dir[0] ? dir : "/", c.dir))
        snprintf(c.dir, sizeof c.dir, "%s", dir);
    FILE *f = fopen(file, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read: %s", file, strerror(errno));
        return -1;
    }
    fclose(f);
    /* parsed from memory: zconfig_load leaks its file object on a syntax
     * error (czmq 4.2) */
    zchunk_t *chunk = zchunk_slurp(file, 0);
    own->root = chunk ? zconfig_chunk_load(chunk) : NULL;
    zchunk_destroy(&chunk);
    if (!own->root) {
        snprintf(err, errlen, "%s: not valid ZPL (the zconfig line above gives the line number in parentheses)", file);
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
            int nth = nth_of(sec, k);
            if (zconfig_child(k))
                return fail(&c, path, nth, "a key takes a value, not keys under it");
            const char *v = zconfig_value(k) ? zconfig_value(k) : "";
            if (handler(&c, o, zconfig_name(k), path, nth, v) != 0)
                return -1;
            /* single-valued keys may appear once */
            if (strcmp(zconfig_name(k), "seed") && strcmp(zconfig_name(k), "plugin") && nth > 0)
                return fail(&c, path, nth, "given twice");
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
        return fail(&c, "cluster/down-after-ms", 0, "%d ms is under two heartbeats (%d ms each): every node would "
                                                    "look down",
                    o->down_after_ms, o->heartbeat_ms);
    return 0;
}

void sn_config_free(sn_node_config_t *c)
{
    own_t *own = c->own;
    if (own) {
        zconfig_destroy(&own->root);
        for (size_t i = 0; i < own->nstrings; i++)
            free(own->strings[i]);
        free(own->strings);
        free(own);
    }
    free(c->seeds);
    free(c->plugins);
    memset(c, 0, sizeof *c);
}

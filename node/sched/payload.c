/* payload.c - owned byte buffers, event nodes, and the error table.
 *
 * Every payload is allocated with an event node in front of it, so moving a
 * payload into a process's queue needs no allocation and no copy.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PREFIX ((sizeof(sn__evnode_t) + 15) & ~(size_t)15)

const char *sn_strerror(int err)
{
    switch (err) {
    case 0:
        return "ok";
#define SN__ERR_CASE(name, code, text) \
    case code:                         \
        return text;
        SN_ERRORS(SN__ERR_CASE)
#undef SN__ERR_CASE
    default:
        return "unknown error";
    }
}

sn_payload_t *sn_payload_new(uint32_t ctype, const void *bytes, size_t len)
{
    if (len > UINT32_MAX - 1)
        return NULL;
    unsigned char *base = malloc(PREFIX + sizeof(sn_payload_t) + len + 1);
    if (!base)
        return NULL;
    sn_payload_t *p = (sn_payload_t *)(base + PREFIX);
    p->ctype = ctype;
    p->len = (uint32_t)len;
    if (bytes)
        memcpy(p->data, bytes, len);
    else
        memset(p->data, 0, len);
    p->data[len] = 0;
    return p;
}

sn_payload_t *sn_payload_text(const char *text)
{
    return sn_payload_new(SN_CT_TEXT, text, strlen(text));
}

sn_payload_t *sn_payload_printf(uint32_t ctype, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    sn_payload_t *p = sn_payload_new(ctype, NULL, (size_t)n);
    if (!p)
        return NULL;
    va_start(ap, fmt);
    vsnprintf((char *)p->data, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

sn_payload_t *sn_payload_u64(uint64_t value)
{
    return sn_payload_new(SN_CT_U64, &value, sizeof value);
}

sn_payload_t *sn_payload_pid(sn_pid_t pid)
{
    return sn_payload_new(SN_CT_PID, &pid, sizeof pid);
}

int sn_payload_get_u64(const sn_payload_t *p, uint64_t *out)
{
    if (!p || p->ctype != SN_CT_U64 || p->len != sizeof *out)
        return SN_EINVAL;
    memcpy(out, p->data, sizeof *out);
    return 0;
}

int sn_payload_get_pid(const sn_payload_t *p, sn_pid_t *out)
{
    if (!p || p->ctype != SN_CT_PID || p->len != sizeof *out)
        return SN_EINVAL;
    memcpy(out, p->data, sizeof *out);
    return 0;
}

void sn_payload_destroy(sn_payload_t **p)
{
    if (p && *p) {
        free((unsigned char *)*p - PREFIX);
        *p = NULL;
    }
}

sn__evnode_t *sn__payload_node(sn_payload_t *p)
{
    return (sn__evnode_t *)(void *)((unsigned char *)p - PREFIX);
}

sn__evnode_t *sn__evnode_make(uint8_t type, int error, uint64_t tag, sn_pid_t from, sn_payload_t *p,
                              bool counted)
{
    sn__evnode_t *n;
    if (p) {
        n = sn__payload_node(p);
        n->bare = 0;
    } else {
        n = malloc(sizeof *n);
        if (!n)
            return NULL;
        n->bare = 1;
    }
    n->type = type;
    n->counted = counted;
    n->error = error;
    n->tag = tag;
    n->from = from;
    n->data = p;
    return n;
}

void sn__evnode_free(sn__evnode_t *n)
{
    if (n->bare)
        free(n);
    else
        sn_payload_destroy(&n->data); /* the node lives inside the payload */
}

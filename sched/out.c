/* out.c - filling a step's output: yields (two inline, the rest in a
 * per-worker overflow array reused across steps), result and status.
 *
 * The bound on yields per step: the overflow array doubles from 8 up to
 * UINT32_MAX entries (2^31 + 2 yields in all), 64 bytes each, held until
 * the step's yields are dispatched; a yield that cannot be added returns
 * NULL / SN_ENOMEM. sn_out_send_many is one yield however many messages it
 * carries (8 bytes each). A worker keeps the largest array it needed up to
 * KEEP_YIELDS entries and frees a bigger one before its next step.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "internal.h"

#define KEEP_YIELDS 4096 /* overflow entries a worker keeps between steps (256 KB) */

void sn__out_reset(sn_step_out_t *out)
{
    if (out->cap > KEEP_YIELDS)
        sn__out_fini(out);
    out->status = SN_IDLE;
    out->error = 0;
    out->result = NULL;
    out->nyields = 0;
}

void sn__out_fini(sn_step_out_t *out)
{
    free(out->overflow);
    out->overflow = NULL;
    out->cap = 0;
}

sn_yield_t *sn_out_at(sn_step_out_t *out, uint32_t i)
{
    return sn__out_at(out, i);
}

/* The overflow array grown for yield i, or NULL. Out of line, so that
 * the common case (next_slot, a send) saves no registers. */
static __attribute__((noinline)) sn_yield_t *grow_slot(sn_step_out_t *out, uint32_t i)
{
    size_t cap = out->cap; /* (a uint32_t in the public struct) */
    sn_yield_t *y = sn__grow(out->overflow, &cap, i - SN_OUT_INLINE_YIELDS, sizeof *y, 8, UINT32_MAX);
    if (!y)
        return NULL;
    out->overflow = y;
    out->cap = (uint32_t)cap;
    return sn__out_at(out, i);
}

/* Yield i needs a bigger overflow array. */
static inline bool past_cap(const sn_step_out_t *out, uint32_t i)
{
    return i >= SN_OUT_INLINE_YIELDS && i - SN_OUT_INLINE_YIELDS >= out->cap;
}

/* The slot for the next yield (not yet counted), or NULL. */
static inline sn_yield_t *next_slot(sn_step_out_t *out)
{
    uint32_t i = out->nyields;
    return past_cap(out, i) ? grow_slot(out, i) : sn__out_at(out, i);
}

sn_yield_t *sn_out_yield(sn_step_out_t *out, uint32_t cmd, const char *name, uint64_t tag)
{
    sn_yield_t *y = next_slot(out);
    if (!y)
        return NULL;
    *y = (sn_yield_t){.cmd = cmd, .name = name, .tag = tag};
    out->nyields++;
    return y;
}

static inline void put_send(sn_step_out_t *out, sn_yield_t *y, sn_pid_t to, uint64_t tag, sn_payload_t **msg)
{
    *y = (sn_yield_t){.cmd = SN__CMD_SEND, .name = "send", .tag = tag, .target = to, .data = msg ? sn_take(msg) : NULL};
    out->nyields++;
}

/* sn_out_send when the overflow array must grow first (a tail call: the
 * common case below saves no registers). */
static __attribute__((noinline)) int send_grown(sn_step_out_t *out, sn_pid_t to, uint64_t tag, sn_payload_t **msg)
{
    sn_yield_t *y = grow_slot(out, out->nyields);
    if (!y)
        return SN_ENOMEM;
    put_send(out, y, to, tag, msg);
    return 0;
}

int sn_out_send(sn_step_out_t *out, sn_pid_t to, uint64_t tag, sn_payload_t **msg)
{
    uint32_t i = out->nyields;
    if (past_cap(out, i))
        return send_grown(out, to, tag, msg);
    put_send(out, sn__out_at(out, i), to, tag, msg);
    return 0;
}

int sn_out_send_many(sn_step_out_t *out, sn_pid_t to, uint64_t tag, sn_payload_t **msgs, size_t n)
{
    if (n == 0)
        return 0;
    if (!msgs || n > (UINT32_MAX - 1 - sizeof(sn__batch_t)) / sizeof(sn_payload_t *))
        return SN_EINVAL;
    sn_payload_t *batch = sn_payload_new(SN__CT_BATCH, NULL, sizeof(sn__batch_t) + n * sizeof(sn_payload_t *));
    if (!batch)
        return SN_ENOMEM;
    sn__batch_t *b = sn__batch_of(batch);
    b->n = n;
    for (size_t i = 0; i < n; i++) { /* an empty message for NULL, as sn_out_send sends */
        if (!msgs[i] && !(b->msgs[i] = sn_payload_new(SN_CT_BYTES, NULL, 0))) {
            while (i-- > 0)
                if (!msgs[i])
                    sn_payload_destroy(&b->msgs[i]);
            sn_payload_destroy(&batch);
            return SN_ENOMEM; /* nothing taken */
        }
    }
    sn_yield_t *y = sn_out_yield(out, SN__CMD_SEND_MANY, "send_many", tag);
    if (!y) {
        for (size_t i = 0; i < n; i++)
            if (!msgs[i])
                sn_payload_destroy(&b->msgs[i]);
        sn_payload_destroy(&batch);
        return SN_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        if (msgs[i])
            b->msgs[i] = sn_take(&msgs[i]);
    y->target = to;
    y->data = batch;
    return 0;
}

int sn_out_spawn(sn_step_out_t *out, uint64_t tag, const char *type, const char *method, sn_payload_t **input,
                 uint32_t flags)
{
    if (!type || !method || ((flags & SN_YIELD_AWAIT) && (flags & SN_YIELD_MONITOR)))
        return SN_EINVAL;
    sn_yield_t *y = sn_out_yield(out, SN__CMD_SPAWN, type, tag);
    if (!y)
        return SN_ENOMEM;
    y->method = method;
    y->flags = flags;
    y->data = input ? sn_take(input) : NULL;
    return 0;
}

int sn_out_sleep(sn_step_out_t *out, uint64_t tag, uint64_t ms)
{
    sn_yield_t *y = sn_out_yield(out, SN__CMD_SLEEP, "sleep", tag);
    if (!y)
        return SN_ENOMEM;
    y->arg = ms;
    return 0;
}

/* A built-in yield addressed to one process. */
static int to_pid(sn_step_out_t *out, uint32_t cmd, const char *name, uint64_t tag, sn_pid_t pid, uint32_t flags)
{
    sn_yield_t *y = sn_out_yield(out, cmd, name, tag);
    if (!y)
        return SN_ENOMEM;
    y->target = pid;
    y->flags = flags;
    return 0;
}

int sn_out_terminate(sn_step_out_t *out, uint64_t tag, sn_pid_t pid)
{
    return to_pid(out, SN__CMD_TERMINATE, "terminate", tag, pid, 0);
}

int sn_out_monitor(sn_step_out_t *out, sn_pid_t pid, uint64_t tag)
{
    return to_pid(out, SN__CMD_MONITOR, "monitor", tag, pid, SN_YIELD_NOREPLY);
}

int sn_out_demonitor(sn_step_out_t *out, sn_pid_t pid, uint64_t tag)
{
    return to_pid(out, SN__CMD_DEMONITOR, "demonitor", tag, pid, SN_YIELD_NOREPLY);
}

/* A yield of one of the relay's names commands, resolved at dispatch. */
static int name_yield(sn_step_out_t *out, const char *cmd, uint64_t tag, const char *name)
{
    if (!name || !*name || strlen(name) > 255)
        return SN_EINVAL;
    sn_payload_t *data = sn_payload_text(name);
    sn_yield_t *y = data ? sn_out_yield(out, 0, cmd, tag) : NULL;
    if (!y) {
        sn_payload_destroy(&data);
        return SN_ENOMEM;
    }
    y->data = data;
    return 0;
}

int sn_out_name_register(sn_step_out_t *out, uint64_t tag, const char *name)
{
    return name_yield(out, "sn.name.register", tag, name);
}

int sn_out_name_unregister(sn_step_out_t *out, uint64_t tag, const char *name)
{
    return name_yield(out, "sn.name.unregister", tag, name);
}

int sn_out_name_whereis(sn_step_out_t *out, uint64_t tag, const char *name)
{
    return name_yield(out, "sn.name.whereis", tag, name);
}

int sn_out_name_monitor(sn_step_out_t *out, uint64_t tag, const char *name)
{
    return name_yield(out, "sn.name.monitor", tag, name);
}

int sn_out_name_demonitor(sn_step_out_t *out, uint64_t tag, const char *name)
{
    return name_yield(out, "sn.name.demonitor", tag, name);
}

void sn_out_done(sn_step_out_t *out, sn_payload_t **result)
{
    out->status = SN_DONE;
    sn_payload_destroy(&out->result);
    out->result = result ? sn_take(result) : NULL;
}

void sn_out_fail(sn_step_out_t *out, int error, const char *fmt, ...)
{
    out->status = SN_FAIL;
    out->error = error ? error : SN_EFAILED;
    sn_payload_destroy(&out->result);
    if (fmt) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        out->result = sn_payload_new(SN_CT_ERROR, buf, strlen(buf));
    }
}

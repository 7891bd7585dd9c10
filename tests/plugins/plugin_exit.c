/* plugin_exit.c - plugins that misbehave towards the program around them,
 * for tests/cli.sh: type "exit" (method "now": its step calls exit() with
 * the number in its text input, 0 without one) and type "huge" (method
 * "bytes": DONE with a result of as many bytes as its text input says).
 */
#include <stdlib.h>
#include <string.h>

#include "schednode/schednode.h"

typedef struct arg {
    long long n;
} arg_t;

/* The text input as a number (0 without one). */
static int number_init(void *state, const char *method, const char *want, sn_payload_t **input)
{
    arg_t *a = state;
    if (strcmp(method, want) != 0)
        return SN_ENOMETHOD;
    a->n = 0;
    if (*input) {
        char buf[32] = "";
        size_t len = (*input)->len < sizeof buf - 1 ? (*input)->len : sizeof buf - 1;
        memcpy(buf, (*input)->data, len);
        char *end;
        a->n = strtoll(buf, &end, 10);
        if (end == buf || *end || a->n < 0)
            return SN_EINVAL;
    }
    return 0;
}

static int exit_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    return number_init(state, method, "now", input);
}

static void exit_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    (void)ev;
    (void)n;
    (void)out;
    exit((int)((arg_t *)state)->n); /* on a worker thread, the node running */
}

static int huge_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    int rc = number_init(state, method, "bytes", input);
    return rc == 0 && ((arg_t *)state)->n > (1ll << 30) ? SN_EINVAL : rc;
}

static void huge_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    (void)ev;
    (void)n;
    size_t len = (size_t)((arg_t *)state)->n;
    sn_payload_t *r = sn_payload_new(SN_CT_BYTES, NULL, len);
    if (!r) {
        sn_out_fail(out, SN_ENOMEM, "no memory for %zu bytes", len);
        return;
    }
    memset(r->data, 'x', len);
    sn_out_done(out, &r);
}

static const sn_type_t exit_type = {"exit", 1, sizeof(arg_t), exit_init, exit_step, NULL, NULL, NULL};
static const sn_type_t huge_type = {"huge", 1, sizeof(arg_t), huge_init, huge_step, NULL, NULL, NULL};

static int exit_plugin_init(sn_sched_t *sched)
{
    int rc = sn_type_register(sched, &exit_type);
    return rc ? rc : sn_type_register(sched, &huge_type);
}

SN_PLUGIN_DEFINE("exit", exit_plugin_init);

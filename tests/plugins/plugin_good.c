/* plugin_good.c - a well-formed plugin: type "echo" (method "say": DONE
 * with its text input) and command "echo.reverse" (completes at once with
 * its text data reversed).
 */
#include <string.h>

#include "schednode/schednode.h"

typedef struct echo {
    sn_payload_t *text;
} echo_t;

static int echo_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    echo_t *e = state;
    if (strcmp(method, "say") != 0)
        return SN_ENOMETHOD;
    if (!*input)
        return SN_EINVAL;
    e->text = sn_take(input);
    return 0;
}

static void echo_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    echo_t *e = state;
    sn_out_done(out, &e->text);
}

static void echo_close(sn_ctx_t *ctx, void *state)
{
    echo_t *e = state;
    sn_payload_destroy(&e->text);
}

static const sn_type_t echo_type = {"echo", 1, sizeof(echo_t), echo_init, echo_step, echo_close, NULL, NULL};

static void reverse_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    uint32_t len = req->data ? req->data->len : 0;
    sn_payload_t *r = sn_payload_new(SN_CT_TEXT, NULL, len);
    if (r)
        for (uint32_t i = 0; i < len; i++)
            r->data[i] = req->data->data[len - 1 - i];
    sn_complete_yield(sched, req->from, req->tag, r ? 0 : SN_ENOMEM, &r);
}

static int good_init(sn_sched_t *sched)
{
    int rc = sn_type_register(sched, &echo_type);
    if (rc != 0)
        return rc;
    rc = sn_command_register(sched, "echo.reverse", reverse_cmd, NULL);
    return rc < 0 ? rc : 0;
}

SN_PLUGIN_DEFINE("good", good_init);

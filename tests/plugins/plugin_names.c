/* plugin_names.c - a process that uses names through schednode.h
 * (tests/names.sh): type "namer".
 *   claim NAME   registers itself under NAME and finishes with "held"
 *                when it got it (the name then ends with it), or fails
 *                with "taken by PID" (SN_EEXIST's data)
 *   cycle NAME   register, whereis (its own PID), unregister, whereis
 *                (noproc), unregister again (noproc); finishes with
 *                "cycle ok" or fails saying which step went wrong
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "schednode/schednode.h"

typedef struct namer {
    char name[256];
    int cycle, phase;
} namer_t;

static int namer_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    namer_t *n = state;
    if (strcmp(method, "claim") != 0 && strcmp(method, "cycle") != 0)
        return SN_ENOMETHOD;
    if (!*input || (*input)->len == 0 || (*input)->len > 255)
        return SN_EINVAL;
    snprintf(n->name, sizeof n->name, "%.*s", (int)(*input)->len, (const char *)(*input)->data);
    n->cycle = strcmp(method, "cycle") == 0;
    return 0;
}

/* cycle: what each step's completion must be, and the next yield. */
static void cycle_next(sn_ctx_t *ctx, namer_t *n, const sn_event_t *e, sn_step_out_t *out)
{
    static const int want[] = {0, 0, 0, SN_ENOPROC, SN_ENOPROC};
    sn_pid_t got = SN_PID_NONE;
    if (e->error != want[n->phase] ||
        (n->phase == 1 && (sn_payload_get_pid(e->data, &got) != 0 || !sn_pid_eq(got, sn_ctx_self(ctx))))) {
        sn_out_fail(out, SN_EFAILED, "cycle step %d: %s", n->phase, sn_strerror(e->error));
        return;
    }
    switch (++n->phase) {
    case 1:
    case 3:
        sn_out_name_whereis(out, 1, n->name);
        break;
    case 2:
    case 4:
        sn_out_name_unregister(out, 1, n->name);
        break;
    default:
        sn_out_done(out, &(sn_payload_t *){sn_payload_text("cycle ok")});
        return;
    }
    out->status = SN_WAIT;
}

static void namer_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    namer_t *m = state;
    out->status = SN_IDLE;
    if (n == 0 && m->phase == 0) {
        sn_out_name_register(out, 1, m->name);
        out->status = SN_WAIT;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_YIELD_COMPLETE)
            continue;
        if (m->cycle) {
            cycle_next(ctx, m, &ev[i], out);
            return;
        }
        char buf[SN_PID_STRLEN];
        sn_pid_t holder = SN_PID_NONE;
        if (ev[i].error == SN_EEXIST && sn_payload_get_pid(ev[i].data, &holder) == 0)
            sn_out_fail(out, SN_EEXIST, "taken by %s", sn_pid_format(holder, buf, sizeof buf));
        else if (ev[i].error)
            sn_out_fail(out, ev[i].error, "register: %s", sn_strerror(ev[i].error));
        else
            sn_out_done(out, &(sn_payload_t *){sn_payload_text("held")});
        return;
    }
}

static const sn_type_t namer = {
    .name = "namer", .version = 1, .state_size = sizeof(namer_t), .init = namer_init, .step = namer_step};

static int names_init(sn_sched_t *sched)
{
    return sn_type_register(sched, &namer);
}

SN_PLUGIN_DEFINE("names", names_init);

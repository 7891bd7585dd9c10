/* plugin_lost.c - the workload of tests/lost.sh: a parent whose awaited
 * children are stolen by other nodes, one of which is then killed (or
 * frozen). Loaded (--load) on every node (the same types: steal partners).
 *
 *   lkid work "STEPS MS"  movable: STEPS steps of MS ms of CPU each (Ready
 *                         between them: it can be stolen, again and again),
 *                         then finishes with the id of the node it ended on
 *   lpar run "N STEPS MS DEADLINE_MS [GRACE_MS]"
 *                         spawns N lkids, odd tags with SN_YIELD_AWAIT, even
 *                         ones with SN_YIELD_MONITOR | SN_YIELD_NOREPLY, and
 *                         counts each one's outcomes: its result (by the
 *                         node it ended on), nodedown (by kind), any other
 *                         error; a second outcome for a child is counted as
 *                         "twice". Once every child has one it waits
 *                         GRACE_MS (500) more (a late second one would show),
 *                         or until a message "end", or stops at DEADLINE_MS,
 *                         and finishes with
 *   "n=N normal=A nodedown=B (await C, monitor D) other=E missing=F twice=G on1=.. on2=.. on3=.."
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, also under -std=c11 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schednode/schednode.h"

#define MAX_KIDS 100000
#define MAX_NODE 8 /* on1..on8 counted; others in on0 */

typedef struct lkid {
    uint64_t left, ms;
} lkid_t;

static const char *text_of(const sn_payload_t *in, char *buf, size_t len)
{
    size_t n = in && in->len < len ? in->len : 0;
    if (n)
        memcpy(buf, in->data, n);
    buf[n] = 0;
    return buf;
}

static int lkid_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    lkid_t *k = state;
    char text[64];
    if (strcmp(method, "work") != 0)
        return SN_ENOMETHOD;
    if (sscanf(text_of(*input, text, sizeof text), "%" SCNu64 " %" SCNu64, &k->left, &k->ms) != 2 || !k->left)
        return SN_EINVAL;
    return 0;
}

static void lkid_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    lkid_t *k = state;
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do { /* CPU time: a preempted step still does its work */
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t.tv_nsec - (uint64_t)t0.tv_nsec <
             k->ms * 1000000u);
    if (--k->left) {
        out->status = SN_CONTINUE;
        return;
    }
    sn_payload_t *r = sn_payload_u64(sn_sched_node_id(sn_ctx_sched(ctx)));
    sn_out_done(out, &r);
}

static int lkid_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(lkid_t));
    return *out ? 0 : SN_ENOMEM;
}

static int lkid_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    if (in->len != sizeof(lkid_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(lkid_t));
    return 0;
}

static const sn_type_t lkid_type = {"lkid",    1,    sizeof(lkid_t), lkid_init,
                                    lkid_step, NULL, lkid_marshal,   lkid_unmarshal};

typedef struct lpar {
    uint64_t n, steps, ms, deadline_ms, grace_ms, started, awaits_left, back;
    uint64_t normal, nodedown, nd_await, nd_monitor, other, twice, on[MAX_NODE + 1];
    uint8_t *seen;
    int grace, done;
} lpar_t;

static int lpar_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    lpar_t *p = state;
    char text[128];
    if (strcmp(method, "run") != 0)
        return SN_ENOMETHOD;
    p->grace_ms = 500;
    if (sscanf(text_of(*input, text, sizeof text), "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &p->n,
               &p->steps, &p->ms, &p->deadline_ms, &p->grace_ms) < 4 ||
        !p->n || p->n > MAX_KIDS || !p->steps)
        return SN_EINVAL;
    p->seen = calloc(p->n, 1);
    return p->seen ? 0 : SN_ENOMEM;
}

static void lpar_close(sn_ctx_t *ctx, void *state)
{
    free(((lpar_t *)state)->seen);
}

/* One outcome of child `tag` (await: it came as the completion). */
static void outcome(lpar_t *p, uint64_t tag, int error, const sn_payload_t *data, bool await)
{
    if (tag < 1 || tag > p->n) {
        p->other++;
        return;
    }
    if (p->seen[tag - 1]++) {
        p->twice++;
        return;
    }
    p->back++;
    if (await)
        p->awaits_left--;
    uint64_t node;
    if (!error && sn_payload_get_u64(data, &node) == 0) {
        p->normal++;
        p->on[node <= MAX_NODE ? node : 0]++;
    } else if (error == SN_ENODEDOWN) {
        p->nodedown++;
        *(await ? &p->nd_await : &p->nd_monitor) += 1;
    } else {
        p->other++;
    }
}

static void finish(lpar_t *p, sn_step_out_t *out)
{
    char on[256] = "";
    size_t len = 0;
    for (int i = 0; i <= MAX_NODE && len < sizeof on; i++)
        if (p->on[i])
            len += (size_t)snprintf(on + len, sizeof on - len, " on%d=%" PRIu64, i, p->on[i]);
    sn_payload_t *r = sn_payload_printf(
        SN_CT_TEXT,
        "n=%" PRIu64 " normal=%" PRIu64 " nodedown=%" PRIu64 " (await %" PRIu64 ", monitor %" PRIu64 ") other=%" PRIu64
        " missing=%" PRIu64 " twice=%" PRIu64 "%s",
        p->n, p->normal, p->nodedown, p->nd_await, p->nd_monitor, p->other, p->n - p->back, p->twice, on);
    p->done = 1;
    sn_out_done(out, &r);
}

static void lpar_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    lpar_t *p = state;
    if (p->started == 0)
        sn_out_sleep(out, 0, p->deadline_ms); /* tag 0: the deadline */
    for (int k = 0; k < 1000 && p->started < p->n; k++) {
        uint64_t tag = ++p->started;
        sn_payload_t *arg = sn_payload_printf(SN_CT_TEXT, "%" PRIu64 " %" PRIu64, p->steps, p->ms);
        bool await = tag % 2;
        if (await)
            p->awaits_left++;
        sn_out_spawn(out, tag, "lkid", "work", &arg, await ? SN_YIELD_AWAIT : SN_YIELD_MONITOR | SN_YIELD_NOREPLY);
    }
    bool deadline = false, grace_over = false;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 0)
            deadline = true;
        else if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == UINT64_MAX)
            grace_over = true;
        else if (ev[i].type == SN_EV_MESSAGE && ev[i].data && ev[i].data->len == 3 &&
                 !memcmp(ev[i].data->data, "end", 3))
            grace_over = p->grace; /* (only once all are in) */
        else if (ev[i].type == SN_EV_YIELD_COMPLETE || ev[i].type == SN_EV_DOWN)
            outcome(p, ev[i].tag, ev[i].error, ev[i].data, ev[i].type == SN_EV_YIELD_COMPLETE);
    }
    if (deadline || grace_over) {
        finish(p, out);
        return;
    }
    if (p->started < p->n) {
        out->status = SN_CONTINUE;
        return;
    }
    if (p->back == p->n && !p->grace) { /* all in: a second outcome would come in the grace time */
        p->grace = 1;
        sn_out_sleep(out, UINT64_MAX, p->grace_ms);
    }
    /* waiting on awaits: SN_WAIT (the DOWNs queue until then); else the
     * DOWNs and the timers wake an idle process */
    out->status = p->awaits_left ? SN_WAIT : SN_IDLE;
}

static const sn_type_t lpar_type = {"lpar", 1, sizeof(lpar_t), lpar_init, lpar_step, lpar_close, NULL, NULL};

static int init(sn_sched_t *sched)
{
    int rc;
    if ((rc = sn_type_register(sched, &lkid_type)) || (rc = sn_type_register(sched, &lpar_type)))
        return rc;
    return 0;
}
SN_PLUGIN_DEFINE("lost", init);

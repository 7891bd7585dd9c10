/* kv.c - a stateful service: a key-value store in one process, answering
 * requests by message. A request is a text message "put KEY VALUE",
 * "get KEY" or "del KEY"; the reply goes back to the sender with the
 * request's tag (the correlation tag), as text: "ok", the value, or "none".
 *
 *   kv serve        the store; it runs until cancelled and finishes with
 *                   the number of requests it answered
 *   kv demo         spawns a store, asks it six things, checks the answers
 *                   and finishes with a summary: schednode call kv demo
 *
 * The state is plain data, so marshal/unmarshal (for moving the process to
 * another node) are a copy.
 */
#include <schednode/schednode.h>
#include <stdio.h>
#include <string.h>

#define SLOTS 64
#define KEY_MAX 32
#define VAL_MAX 96

typedef struct kv {
    int demo;
    uint64_t answered;
    struct {
        char key[KEY_MAX], val[VAL_MAX];
    } slot[SLOTS];
    /* demo: the server, and the answers by tag */
    sn_pid_t server;
    char answer[7][VAL_MAX];
    int nanswers;
} kv_t;

static int kv_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    (void)input;
    kv_t *kv = state;
    if (!strcmp(method, "demo"))
        kv->demo = 1;
    else if (strcmp(method, "serve") != 0)
        return SN_ENOMETHOD;
    return 0;
}

static char *find(kv_t *kv, const char *key)
{
    for (int i = 0; i < SLOTS; i++)
        if (kv->slot[i].key[0] && !strcmp(kv->slot[i].key, key))
            return kv->slot[i].key;
    return NULL;
}

/* One request in, one reply text out. */
static const char *answer(kv_t *kv, const char *req)
{
    char op[8], key[KEY_MAX], val[VAL_MAX] = "";
    if (sscanf(req, "%7s %31s %95[^\n]", op, key, val) < 2)
        return "error: want put KEY VALUE, get KEY or del KEY";
    char *k = find(kv, key);
    if (!strcmp(op, "get"))
        return k ? kv->slot[(k - kv->slot[0].key) / (long)sizeof kv->slot[0]].val : "none";
    if (!strcmp(op, "del")) {
        if (k)
            k[0] = 0;
        return "ok";
    }
    if (strcmp(op, "put") != 0)
        return "error: unknown operation";
    for (int i = 0; !k && i < SLOTS; i++)
        if (!kv->slot[i].key[0])
            k = kv->slot[i].key;
    if (!k)
        return "error: full";
    int i = (int)((k - kv->slot[0].key) / (long)sizeof kv->slot[0]);
    snprintf(kv->slot[i].key, KEY_MAX, "%s", key);
    snprintf(kv->slot[i].val, VAL_MAX, "%s", val);
    return "ok";
}

static void serve(kv_t *kv, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_CANCEL) {
            sn_payload_t *r = sn_payload_u64(kv->answered);
            sn_out_done(out, &r);
            return;
        }
        if (ev[i].type != SN_EV_MESSAGE || !ev[i].data)
            continue;
        char req[160];
        snprintf(req, sizeof req, "%.*s", (int)ev[i].data->len, (const char *)ev[i].data->data);
        sn_payload_t *reply = sn_payload_text(answer(kv, req));
        sn_out_send(out, ev[i].from, ev[i].tag, &reply); /* the request's tag: the caller matches it */
        kv->answered++;
    }
}

static const char *const demo_requests[] = {NULL, "put a 1", "put b two words", "get a", "get c", "del a", "get a"};

static void demo(kv_t *kv, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    out->status = SN_IDLE;
    if (n == 0) { /* the first step (it never has events): start a store, a child we do not wait for */
        sn_out_spawn(out, 100, "kv", "serve", NULL, 0);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 100) {
            if (ev[i].error || sn_payload_get_pid(ev[i].data, &kv->server) != 0) {
                sn_out_fail(out, ev[i].error ? ev[i].error : SN_EINVAL, "kv demo: cannot start the store");
                return;
            }
            for (uint64_t t = 1; t <= 6; t++) { /* in order: one sender, one receiver */
                sn_payload_t *m = sn_payload_text(demo_requests[t]);
                sn_out_send(out, kv->server, t, &m);
            }
        } else if (ev[i].type == SN_EV_MESSAGE && ev[i].tag >= 1 && ev[i].tag <= 6 && ev[i].data) {
            snprintf(kv->answer[ev[i].tag], VAL_MAX, "%.*s", (int)ev[i].data->len, (const char *)ev[i].data->data);
            kv->nanswers++;
        } else if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].error) {
            sn_out_fail(out, ev[i].error, "kv demo: request %llu failed: %s", (unsigned long long)ev[i].tag,
                        sn_strerror(ev[i].error));
            return;
        }
    }
    if (kv->nanswers < 6)
        return;
    sn_out_terminate(out, 200, kv->server); /* the store's work is done */
    sn_payload_t *r =
        sn_payload_printf(SN_CT_TEXT, "kv: a=%s c=%s, after del a=%s", kv->answer[3], kv->answer[4], kv->answer[6]);
    if (strcmp(kv->answer[1], "ok") || strcmp(kv->answer[2], "ok") || strcmp(kv->answer[3], "1") ||
        strcmp(kv->answer[4], "none") || strcmp(kv->answer[5], "ok") || strcmp(kv->answer[6], "none")) {
        sn_payload_destroy(&r);
        sn_out_fail(out, SN_EINVAL, "kv demo: wrong answers: %s|%s|%s|%s|%s|%s", kv->answer[1], kv->answer[2],
                    kv->answer[3], kv->answer[4], kv->answer[5], kv->answer[6]);
        return;
    }
    sn_out_done(out, &r);
}

static void kv_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    kv_t *kv = state;
    if (kv->demo)
        demo(kv, ev, n, out);
    else
        serve(kv, ev, n, out);
}

/* The state is plain data: a copy moves it. */
static int kv_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    (void)ctx;
    *out = sn_payload_new(SN_CT_BYTES, state, sizeof(kv_t));
    return *out ? 0 : SN_ENOMEM;
}

static int kv_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    (void)ctx;
    if (in->len != sizeof(kv_t))
        return SN_EINVAL;
    memcpy(state, in->data, sizeof(kv_t));
    return 0;
}

static const sn_type_t kv_type = {
    .name = "kv",
    .version = 1,
    .state_size = sizeof(kv_t),
    .init = kv_init,
    .step = kv_step,
    .marshal = kv_marshal, /* a kv can move to another node with its store */
    .unmarshal = kv_unmarshal,
};

static int kv_plugin(sn_sched_t *sched)
{
    return sn_type_register(sched, &kv_type);
}
SN_PLUGIN_DEFINE("kv", kv_plugin);

/* codec.c - Envelope encoding and decoding. The only file that includes
 * the protobuf-c generated header. Decoding treats every byte as hostile:
 * size is checked before parsing, every field after, and nothing here
 * asserts on input.
 */
#include "codec.h"

#include <stdlib.h>
#include <string.h>

#include "schednode.pb-c.h"

static const struct {
    int pb_case;
    sn_frame_kind_t kind;
    const char *name;
} kinds[] = {
    {SCHEDNODE__ENVELOPE__BODY_HELLO, SN_FRAME_HELLO, "hello"},
    {SCHEDNODE__ENVELOPE__BODY_WELCOME, SN_FRAME_WELCOME, "welcome"},
    {SCHEDNODE__ENVELOPE__BODY_MEMBERS, SN_FRAME_MEMBERS, "members"},
    {SCHEDNODE__ENVELOPE__BODY_HEARTBEAT, SN_FRAME_HEARTBEAT, "heartbeat"},
    {SCHEDNODE__ENVELOPE__BODY_SENDS, SN_FRAME_SENDS, "sends"},
    {SCHEDNODE__ENVELOPE__BODY_STEAL_REQUEST, SN_FRAME_STEAL_REQUEST, "steal-request"},
    {SCHEDNODE__ENVELOPE__BODY_STEAL_OFFER, SN_FRAME_STEAL_OFFER, "steal-offer"},
    {SCHEDNODE__ENVELOPE__BODY_STEAL_ACCEPT, SN_FRAME_STEAL_ACCEPT, "steal-accept"},
    {SCHEDNODE__ENVELOPE__BODY_STEAL_COMMIT, SN_FRAME_STEAL_COMMIT, "steal-commit"},
    {SCHEDNODE__ENVELOPE__BODY_LOCATION, SN_FRAME_LOCATION, "location"},
    {SCHEDNODE__ENVELOPE__BODY_REDIRECT, SN_FRAME_REDIRECT, "redirect"},
    {SCHEDNODE__ENVELOPE__BODY_ERROR, SN_FRAME_ERROR, "error"},
    {SCHEDNODE__ENVELOPE__BODY_STATS, SN_FRAME_STATS, "stats"},
    {SCHEDNODE__ENVELOPE__BODY_LEAVE, SN_FRAME_LEAVE, "leave"},
    {SCHEDNODE__ENVELOPE__BODY_REQUEST, SN_FRAME_REQUEST, "request"},
    {SCHEDNODE__ENVELOPE__BODY_REPLY, SN_FRAME_REPLY, "reply"},
};

const char *sn_frame_kind_name(sn_frame_kind_t kind)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].kind == kind)
            return kinds[i].name;
    return "none";
}

static int to_pb_kind(uint8_t kind, Schednode__Send__Kind *out)
{
    switch (kind) {
    case SN_EV_MESSAGE:
        *out = SCHEDNODE__SEND__KIND__MESSAGE;
        return 0;
    case SN_EV_YIELD_COMPLETE:
        *out = SCHEDNODE__SEND__KIND__YIELD_COMPLETE;
        return 0;
    case SN_EV_CANCEL:
        *out = SCHEDNODE__SEND__KIND__CANCEL;
        return 0;
    default:
        return SN_EINVAL;
    }
}

int sn_codec_encode_sends(uint32_t node, uint64_t incarnation, const sn_wire_send_t *sends, size_t n, void **buf,
                          size_t *len)
{
    if (!sends || n == 0 || !buf || !len)
        return SN_EINVAL;
    /* One allocation for every nested message; the payload bytes are not
     * copied until pack. */
    struct item {
        Schednode__Send send;
        Schednode__Pid to, from;
        Schednode__Payload payload;
    };
    struct item *items = calloc(n, sizeof *items);
    Schednode__Send **ptrs = calloc(n, sizeof *ptrs);
    if (!items || !ptrs) {
        free(items);
        free(ptrs);
        return SN_ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct item *it = &items[i];
        schednode__send__init(&it->send);
        schednode__pid__init(&it->to);
        schednode__pid__init(&it->from);
        it->to.node = sends[i].to.node;
        it->to.serial = sends[i].to.serial;
        it->from.node = sends[i].from.node;
        it->from.serial = sends[i].from.serial;
        it->send.to = &it->to;
        it->send.from = &it->from;
        it->send.tag = sends[i].tag;
        it->send.error = sends[i].error;
        rc = to_pb_kind(sends[i].kind, &it->send.kind);
        if (sends[i].payload) {
            schednode__payload__init(&it->payload);
            it->payload.ctype = sends[i].payload->ctype;
            it->payload.data.len = sends[i].payload->len;
            it->payload.data.data = sends[i].payload->data;
            it->send.payload = &it->payload;
        }
        ptrs[i] = &it->send;
    }
    if (rc == 0) {
        Schednode__SendBatch batch;
        schednode__send_batch__init(&batch);
        batch.n_sends = n;
        batch.sends = ptrs;
        Schednode__Envelope env;
        schednode__envelope__init(&env);
        env.version = SN_WIRE_VERSION;
        env.node = node;
        env.incarnation = incarnation;
        env.body_case = SCHEDNODE__ENVELOPE__BODY_SENDS;
        env.sends = &batch;
        size_t size = schednode__envelope__get_packed_size(&env);
        uint8_t *out = malloc(size ? size : 1);
        if (!out) {
            rc = SN_ENOMEM;
        } else {
            *len = schednode__envelope__pack(&env, out);
            *buf = out;
        }
    }
    free(items);
    free(ptrs);
    return rc;
}

static int pid_from_pb(const Schednode__Pid *p, sn_pid_t *out)
{
    if (!p)
        return SN_EPROTO;
    out->node = p->node;
    out->serial = p->serial;
    return 0;
}

static int decode_sends(const Schednode__SendBatch *b, sn_frame_t *out)
{
    if (!b || b->n_sends == 0)
        return SN_EPROTO;
    out->sends = calloc(b->n_sends, sizeof *out->sends);
    if (!out->sends)
        return SN_ENOMEM;
    for (size_t i = 0; i < b->n_sends; i++) {
        const Schednode__Send *s = b->sends[i];
        sn_wire_send_t *w = &out->sends[i];
        out->nsends = i + 1; /* so sn_frame_clear frees what we made */
        if (!s || pid_from_pb(s->to, &w->to) != 0 || w->to.serial == 0)
            return SN_EPROTO;
        if (s->from && pid_from_pb(s->from, &w->from) != 0)
            return SN_EPROTO;
        switch (s->kind) {
        case SCHEDNODE__SEND__KIND__MESSAGE:
            w->kind = SN_EV_MESSAGE;
            break;
        case SCHEDNODE__SEND__KIND__YIELD_COMPLETE:
            w->kind = SN_EV_YIELD_COMPLETE;
            break;
        case SCHEDNODE__SEND__KIND__CANCEL:
            w->kind = SN_EV_CANCEL;
            break;
        default:
            return SN_EPROTO;
        }
        w->tag = s->tag;
        w->error = s->error;
        if (s->payload) {
            if (s->payload->data.len > UINT32_MAX - 1)
                return SN_EPROTO;
            w->payload = sn_payload_new(s->payload->ctype, s->payload->data.data, s->payload->data.len);
            if (!w->payload)
                return SN_ENOMEM;
        }
    }
    return 0;
}

int sn_codec_decode(const void *buf, size_t len, size_t max_len, sn_frame_t *out, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    memset(out, 0, sizeof *out);
    if (max_len == 0)
        max_len = SN_WIRE_MAX_FRAME;
    if (len > max_len) {
        *why = "oversize";
        return SN_EPROTO;
    }
    Schednode__Envelope *env = schednode__envelope__unpack(NULL, len, buf);
    if (!env) {
        *why = "undecodable";
        return SN_EPROTO;
    }
    int rc = 0;
    out->version = env->version;
    out->node = env->node;
    out->incarnation = env->incarnation;
    if (env->version != SN_WIRE_VERSION) {
        *why = "unsupported version";
        rc = SN_EPROTO;
        goto done;
    }
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if ((int)env->body_case == kinds[i].pb_case)
            out->kind = kinds[i].kind;
    if (out->kind == SN_FRAME_NONE) {
        *why = "no body";
        rc = SN_EPROTO;
        goto done;
    }
    if (out->kind != SN_FRAME_REQUEST && out->node == 0) {
        *why = "no sender node";
        rc = SN_EPROTO;
        goto done;
    }
    if (out->kind == SN_FRAME_SENDS) {
        rc = decode_sends(env->sends, out);
        if (rc != 0)
            *why = rc == SN_ENOMEM ? "out of memory" : "bad send";
    }
done:
    schednode__envelope__free_unpacked(env, NULL);
    if (rc != 0) {
        sn_frame_t keep = *out;
        sn_frame_clear(out);
        out->version = keep.version;
        out->node = keep.node;
    }
    return rc;
}

void sn_frame_clear(sn_frame_t *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nsends; i++)
        sn_payload_destroy(&f->sends[i].payload);
    free(f->sends);
    memset(f, 0, sizeof *f);
}

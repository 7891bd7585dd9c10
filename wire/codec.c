/* codec.c - Envelope encoding and decoding. The only file that includes
 * the protobuf-c generated header. Decoding treats every byte as hostile:
 * size is checked before parsing, every field after, and nothing here
 * asserts on input. No state: any thread.
 */
#include "codec.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    {SCHEDNODE__ENVELOPE__BODY_ACK, SN_FRAME_ACK, "ack"},
    {SCHEDNODE__ENVELOPE__BODY_PART, SN_FRAME_PART, "part"},
};

const char *sn_frame_kind_name(sn_frame_kind_t kind)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].kind == kind)
            return kinds[i].name;
    return "none";
}

/* Our event kinds (and the relay's monitor requests) <-> Send.Kind; -1
 * for anything else. */
static const struct {
    int ours, wire;
} send_kinds[] = {{SN_EV_MESSAGE, SCHEDNODE__SEND_KIND__MESSAGE},
                  {SN_EV_YIELD_COMPLETE, SCHEDNODE__SEND_KIND__YIELD_COMPLETE},
                  {SN_EV_CANCEL, SCHEDNODE__SEND_KIND__CANCEL},
                  {SN_EV_DOWN, SCHEDNODE__SEND_KIND__DOWN},
                  {SN_RELAY_MONITOR, SCHEDNODE__SEND_KIND__MONITOR},
                  {SN_RELAY_DEMONITOR, SCHEDNODE__SEND_KIND__DEMONITOR},
                  {SN_RELAY_RESULT, SCHEDNODE__SEND_KIND__RESULT},
                  {SN_WIRE_REDIRECT, SCHEDNODE__SEND_KIND__REDIRECT},
                  {SN_WIRE_FLUSH, SCHEDNODE__SEND_KIND__FLUSH},
                  {SN_WIRE_FLUSHED, SCHEDNODE__SEND_KIND__FLUSHED},
                  {SN_RELAY_GONE, SCHEDNODE__SEND_KIND__GONE},
                  {SN_WIRE_WATCHED, SCHEDNODE__SEND_KIND__WATCHED},
                  {SN_RELAY_CHILD_DOWN, SCHEDNODE__SEND_KIND__CHILD_DOWN},
                  {SN_WIRE_AWAITED, SCHEDNODE__SEND_KIND__AWAITED}};

static int wire_kind(int ours)
{
    for (size_t i = 0; i < sizeof send_kinds / sizeof send_kinds[0]; i++)
        if (send_kinds[i].ours == ours)
            return send_kinds[i].wire;
    return -1;
}

static int event_kind(int wire)
{
    for (size_t i = 0; i < sizeof send_kinds / sizeof send_kinds[0]; i++)
        if (send_kinds[i].wire == wire)
            return send_kinds[i].ours;
    return -1;
}

static int pack(Schednode__Envelope *env, void **buf, size_t *len);
static void envelope(Schednode__Envelope *env, uint32_t node, uint64_t incarnation);

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A timed send's wait before encoding, as the wire's 1 + microseconds (0:
 * not timed; a wait past UINT32_MAX - 1 us, over an hour, is cut). */
static uint32_t waited_us(uint64_t handed_ns, uint64_t now)
{
    if (!handed_ns)
        return 0;
    uint64_t us = now > handed_ns ? (now - handed_ns) / 1000u : 0;
    return us >= UINT32_MAX - 1 ? UINT32_MAX : (uint32_t)us + 1u;
}

/* Fills *batch with n sends, stored by column in one allocation (*mem,
 * the caller frees it after packing). */
static int build_batch(Schednode__SendBatch *batch, uint64_t seq, const sn_wire_send_t *sends, size_t n, void **mem_out)
{
    size_t bytes = 0;
    bool kinds_needed = false, errors_needed = false, hops_needed = false, ids_needed = false;
    bool homes_differ = false, timed = false;
    for (size_t i = 0; i < n; i++) {
        homes_differ |= sends[i].to.node != sends[0].to.node;
        if (wire_kind(sends[i].kind) < 0)
            return SN_EINVAL;
        kinds_needed |= sends[i].kind != SN_EV_MESSAGE;
        errors_needed |= sends[i].error != 0;
        hops_needed |= sends[i].hops != 0;
        ids_needed |= sends[i].id != 0;
        timed |= sends[i].handed_ns != 0;
        bytes += sends[i].payload ? sends[i].payload->len : 0;
    }
    /* The columns in one allocation: the four 8-byte ones first, then
     * eight 4-byte ones, then the payload bytes. */
    _Static_assert(sizeof(Schednode__SendKind) == 4, "enum column width");
    size_t n64 = 4, n32 = 8;
    uint64_t now = timed ? clock_ns(CLOCK_MONOTONIC) : 0;
    uint8_t *mem = malloc(n * (n64 * 8 + n32 * 4) + (bytes ? bytes : 1));
    if (!mem)
        return SN_ENOMEM;
    *mem_out = mem;
    uint64_t *to_serial = (uint64_t *)mem, *from_serial = to_serial + n, *tag = from_serial + n;
    int64_t *id_delta = (int64_t *)(tag + n);
    uint32_t *from_node = (uint32_t *)(id_delta + n), *ctype = from_node + n, *size = ctype + n;
    int32_t *error = (int32_t *)(size + n);
    Schednode__SendKind *kind = (Schednode__SendKind *)(error + n);
    uint32_t *to_nodes = (uint32_t *)(kind + n), *hops = to_nodes + n, *waited = hops + n;
    uint8_t *data = (uint8_t *)(waited + n), *d = data;
    for (size_t i = 0; i < n; i++) {
        const sn_wire_send_t *w = &sends[i];
        to_serial[i] = w->to.serial;
        to_nodes[i] = w->to.node;
        hops[i] = w->hops;
        waited[i] = waited_us(w->handed_ns, now);
        id_delta[i] = (int64_t)(w->id - sends[0].id); /* (wraps both ways: exact) */
        from_node[i] = w->from.node;
        from_serial[i] = w->from.serial;
        tag[i] = w->tag;
        kind[i] = (Schednode__SendKind)wire_kind(w->kind);
        error[i] = w->error;
        ctype[i] = w->payload ? w->payload->ctype : 0;
        size[i] = w->payload ? w->payload->len + 1u : 0;
        if (w->payload && w->payload->len) {
            memcpy(d, w->payload->data, w->payload->len);
            d += w->payload->len;
        }
    }
    schednode__send_batch__init(batch);
    batch->seq = seq;
    batch->to_node = sends[0].to.node;
    batch->n_to_serial = batch->n_from_node = batch->n_from_serial = batch->n_tag = n;
    batch->n_ctype = batch->n_size = n;
    batch->to_serial = to_serial;
    batch->from_node = from_node;
    batch->from_serial = from_serial;
    batch->tag = tag;
    batch->ctype = ctype;
    batch->size = size;
    batch->n_kind = kinds_needed ? n : 0;
    batch->kind = kind;
    batch->n_error = errors_needed ? n : 0;
    batch->n_to_nodes = homes_differ ? n : 0;
    batch->n_hops = hops_needed ? n : 0;
    batch->id_base = ids_needed ? sends[0].id : 0;
    batch->n_id_delta = ids_needed ? n : 0;
    batch->id_delta = id_delta;
    batch->hops = hops;
    batch->n_waited_us = timed ? n : 0;
    batch->waited_us = waited;
    batch->sent_us = timed ? clock_ns(CLOCK_REALTIME) / 1000u : 0;
    batch->to_nodes = to_nodes;
    batch->error = error;
    batch->data.len = bytes;
    batch->data.data = data;
    return 0;
}

int sn_codec_encode_sends(uint32_t node, uint64_t incarnation, uint64_t seq, const sn_wire_send_t *sends, size_t n,
                          void **buf, size_t *len)
{
    return sn_codec_encode_sends_to(node, incarnation, seq, 0, sends, n, buf, len);
}

int sn_codec_encode_sends_to(uint32_t node, uint64_t incarnation, uint64_t seq, uint64_t to_incarnation,
                             const sn_wire_send_t *sends, size_t n, void **buf, size_t *len)
{
    if ((!sends && n) || (n == 0 && !seq) || !buf || !len)
        return SN_EINVAL;
    Schednode__SendBatch batch;
    void *mem = NULL;
    int rc = 0;
    if (n) {
        rc = build_batch(&batch, seq, sends, n, &mem);
    } else { /* an empty numbered batch (relay/peer.c: probe_gaps) */
        schednode__send_batch__init(&batch);
        batch.seq = seq;
    }
    if (rc != 0)
        return rc;
    batch.to_incarnation = to_incarnation;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_SENDS;
    env.sends = &batch;
    rc = pack(&env, buf, len);
    free(mem);
    return rc;
}

/* Packs env into a new buffer. */
static int pack(Schednode__Envelope *env, void **buf, size_t *len)
{
    size_t size = schednode__envelope__get_packed_size(env);
    uint8_t *out = malloc(size ? size : 1);
    if (!out)
        return SN_ENOMEM;
    *len = schednode__envelope__pack(env, out);
    *buf = out;
    return 0;
}

static void envelope(Schednode__Envelope *env, uint32_t node, uint64_t incarnation)
{
    schednode__envelope__init(env);
    env->version = SN_WIRE_VERSION;
    env->node = node;
    env->incarnation = incarnation;
}

/* Fills a NodeStats from our row type (strings are borrowed). */
static void stats_to_pb(const sn_wire_stats_t *st, Schednode__NodeStats *ns)
{
    schednode__node_stats__init(ns);
    ns->node = st->node;
    ns->endpoint = (char *)st->endpoint;
    ns->state = (Schednode__Member__State)st->state;
    ns->workers = st->workers;
    ns->idle_workers = st->idle_workers;
    ns->live = st->live;
    ns->completed = st->completed;
    ns->forwarded = st->forwarded;
    ns->refused = st->refused;
    ns->disconnects = st->disconnects;
    ns->forwarding = st->forwarding;
    ns->draining = st->draining != 0;
    ns->ready = st->ready;
    ns->idle = st->idle;
    ns->blocked = st->blocked;
    ns->msgs_in = st->msgs_in;
    ns->msgs_out = st->msgs_out;
    ns->steals_in = st->steals_in;
    ns->steals_out = st->steals_out;
    ns->migrated = st->migrated;
    ns->bad_frames = st->bad_frames;
    ns->uptime_ms = st->uptime_ms;
}

static int copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        return SN_EPROTO;
    memcpy(dst, src ? src : "", n + 1);
    return 0;
}

static int stats_from_pb(const Schednode__NodeStats *ns, sn_wire_stats_t *st)
{
    if (ns->state > SCHEDNODE__MEMBER__STATE__JOINING)
        return SN_EPROTO;
    if (ns->endpoint && *ns->endpoint && !sn_wire_endpoint_ok(ns->endpoint))
        return SN_EPROTO;
    *st = (sn_wire_stats_t){.node = ns->node,
                            .workers = ns->workers,
                            .idle_workers = ns->idle_workers,
                            .state = (int)ns->state,
                            .live = ns->live,
                            .completed = ns->completed,
                            .forwarded = ns->forwarded,
                            .refused = ns->refused,
                            .disconnects = ns->disconnects,
                            .forwarding = ns->forwarding,
                            .draining = ns->draining,
                            .ready = ns->ready,
                            .idle = ns->idle,
                            .blocked = ns->blocked,
                            .msgs_in = ns->msgs_in,
                            .msgs_out = ns->msgs_out,
                            .steals_in = ns->steals_in,
                            .steals_out = ns->steals_out,
                            .migrated = ns->migrated,
                            .bad_frames = ns->bad_frames,
                            .uptime_ms = ns->uptime_ms};
    return copy_str(st->endpoint, sizeof st->endpoint, ns->endpoint);
}

/* A status reply's flows in protobuf-c's form (free fs and ptrs). */
typedef struct pb_flows {
    Schednode__PeerFlow *fs, **ptrs;
} pb_flows_t;

static int flows_to_pb(const sn_wire_flow_t *flows, size_t n, pb_flows_t *o)
{
    if (n == 0)
        return 0;
    o->fs = calloc(n, sizeof *o->fs);
    o->ptrs = calloc(n, sizeof *o->ptrs);
    if (!o->fs || !o->ptrs)
        return SN_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        schednode__peer_flow__init(&o->fs[i]);
        o->fs[i].peer = flows[i].peer;
        o->fs[i].msgs_in = flows[i].msgs_in;
        o->fs[i].msgs_out = flows[i].msgs_out;
        o->fs[i].steals_in = flows[i].steals_in;
        o->fs[i].steals_out = flows[i].steals_out;
        o->ptrs[i] = &o->fs[i];
    }
    return 0;
}

static int flows_from_pb(const Schednode__Stats *st, sn_wire_reply_t *out)
{
    if (st->n_flows == 0)
        return 0;
    if (!(out->flows = calloc(st->n_flows, sizeof *out->flows)))
        return SN_ENOMEM;
    for (size_t i = 0; i < st->n_flows; i++) {
        const Schednode__PeerFlow *f = st->flows[i];
        if (!f)
            return SN_EPROTO;
        out->flows[i] = (sn_wire_flow_t){f->peer, f->msgs_in, f->msgs_out, f->steals_in, f->steals_out};
        out->nflows = i + 1;
    }
    return 0;
}

/* Members in protobuf-c's form, pointing into `members` (borrowed). */
typedef struct pb_members {
    Schednode__Member *ms, **ptrs;
    Schednode__TypeInfo *ts, **tps;
} pb_members_t;

static void pb_members_free(pb_members_t *o)
{
    free(o->ms);
    free(o->ptrs);
    free(o->ts);
    free(o->tps);
}

static int members_to_pb(const sn_wire_member_t *members, size_t n, pb_members_t *o)
{
    size_t ntypes = 0;
    for (size_t i = 0; i < n; i++)
        ntypes += members[i].ntypes;
    o->ms = calloc(n ? n : 1, sizeof *o->ms);
    o->ptrs = calloc(n ? n : 1, sizeof *o->ptrs);
    o->ts = calloc(ntypes ? ntypes : 1, sizeof *o->ts);
    o->tps = calloc(ntypes ? ntypes : 1, sizeof *o->tps);
    if (!o->ms || !o->ptrs || !o->ts || !o->tps) {
        pb_members_free(o);
        return SN_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        Schednode__Member *m = &o->ms[i];
        schednode__member__init(m);
        m->node = members[i].node;
        m->incarnation = members[i].incarnation;
        m->endpoint = (char *)members[i].endpoint;
        m->state = (Schednode__Member__State)members[i].state;
        m->first_serial = members[i].first_serial;
        m->public_key = (char *)members[i].public_key;
        m->version = members[i].version;
        m->probe_port = members[i].probe_port;
        m->suspected_by = members[i].suspected_by;
        m->types = &o->tps[k];
        m->n_types = members[i].ntypes;
        for (size_t t = 0; t < members[i].ntypes; t++, k++) {
            schednode__type_info__init(&o->ts[k]);
            o->ts[k].name = (char *)members[i].types[t].name;
            o->ts[k].version = members[i].types[t].version;
            o->ts[k].migratable = members[i].types[t].migratable;
            o->tps[k] = &o->ts[k];
        }
        o->ptrs[i] = m;
    }
    return 0;
}

int sn_codec_encode_heartbeat(uint32_t node, uint64_t incarnation, const sn_wire_stats_t *stats, const char *cluster,
                              void **buf, size_t *len)
{
    /* (Heartbeat.seq stays on the wire, 0: nothing ever read it) */
    return sn_codec_encode_probe(node, incarnation, NULL, stats, cluster, NULL, 0, buf, len);
}

int sn_codec_encode_probe(uint32_t node, uint64_t incarnation, const sn_wire_probe_t *probe,
                          const sn_wire_stats_t *stats, const char *cluster, const sn_wire_member_t *updates, size_t n,
                          void **buf, size_t *len)
{
    Schednode__Heartbeat hb;
    Schednode__NodeStats ns;
    schednode__heartbeat__init(&hb);
    hb.cluster = (char *)(cluster ? cluster : "");
    if (stats) {
        stats_to_pb(stats, &ns);
        hb.stats = &ns;
        hb.ready = (uint32_t)(stats->ready > UINT32_MAX ? UINT32_MAX : stats->ready);
        hb.idle_workers = stats->idle_workers;
        hb.workers = stats->workers;
    }
    if (probe) {
        hb.probe = (uint32_t)probe->kind;
        hb.probe_seq = probe->seq;
        hb.target = probe->target;
        hb.probe_port = probe->port;
    }
    pb_members_t pm = {0};
    if (n && members_to_pb(updates, n, &pm) != 0)
        return SN_ENOMEM;
    hb.n_updates = n;
    hb.updates = pm.ptrs;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    int rc = pack(&env, buf, len);
    pb_members_free(&pm);
    return rc;
}

int sn_codec_encode_hello(uint32_t node, uint64_t incarnation, const char *endpoint, const char *cluster,
                          uint64_t first_serial, const char *public_key, uint32_t probe_port,
                          const sn_wire_type_t *types, size_t ntypes, void **buf, size_t *len)
{
    Schednode__Hello h;
    schednode__hello__init(&h);
    h.public_key = (char *)public_key;
    h.probe_port = probe_port;
    h.endpoint = (char *)endpoint;
    h.cluster = (char *)cluster;
    h.first_serial = first_serial;
    sn_wire_member_t self = {.node = node, .types = (sn_wire_type_t *)types, .ntypes = ntypes};
    pb_members_t pm;
    if (members_to_pb(&self, 1, &pm) != 0)
        return SN_ENOMEM;
    h.types = pm.ms[0].types;
    h.n_types = pm.ms[0].n_types;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    int rc = pack(&env, buf, len);
    pb_members_free(&pm);
    return rc;
}

int sn_codec_encode_members(uint32_t node, uint64_t incarnation, int welcome, const sn_wire_member_t *members, size_t n,
                            void **buf, size_t *len)
{
    pb_members_t pm;
    if (members_to_pb(members, n, &pm) != 0)
        return SN_ENOMEM;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    Schednode__Welcome w;
    Schednode__Members m;
    if (welcome) {
        schednode__welcome__init(&w);
        w.n_members = n;
        w.members = pm.ptrs;
        env.body_case = SCHEDNODE__ENVELOPE__BODY_WELCOME;
        env.welcome = &w;
    } else {
        schednode__members__init(&m);
        m.n_members = n;
        m.members = pm.ptrs;
        env.body_case = SCHEDNODE__ENVELOPE__BODY_MEMBERS;
        env.members = &m;
    }
    int rc = pack(&env, buf, len);
    pb_members_free(&pm);
    return rc;
}

int sn_codec_encode_refusal(uint32_t node, uint64_t incarnation, int code, const char *reason, void **buf, size_t *len)
{
    Schednode__Error e;
    schednode__error__init(&e);
    e.code = code;
    e.reason = (char *)reason;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_ERROR;
    env.error = &e;
    return pack(&env, buf, len);
}

int sn_codec_encode_leave(uint32_t node, uint64_t incarnation, const char *reason, void **buf, size_t *len)
{
    Schednode__Leave l;
    schednode__leave__init(&l);
    l.reason = (char *)reason;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_LEAVE;
    env.leave = &l;
    return pack(&env, buf, len);
}

int sn_codec_encode_ack(uint32_t node, uint64_t incarnation, uint64_t seq, uint64_t refused_from, uint64_t refused_to,
                        int error, void **buf, size_t *len)
{
    Schednode__Ack ack;
    schednode__ack__init(&ack);
    ack.seq = seq;
    ack.refused_from = refused_from;
    ack.refused_to = refused_from ? refused_to : 0;
    ack.refused_error = refused_from ? error : 0;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_ACK;
    env.ack = &ack;
    return pack(&env, buf, len);
}

int sn_codec_encode_part(uint32_t node, uint64_t incarnation, uint64_t seq, uint64_t total, uint64_t offset,
                         const void *data, size_t n, void **buf, size_t *len)
{
    Schednode__Part part;
    schednode__part__init(&part);
    part.seq = seq;
    part.total = total;
    part.offset = offset;
    part.data.data = (uint8_t *)data;
    part.data.len = n;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_PART;
    env.part = &part;
    return pack(&env, buf, len);
}

int sn_codec_encode_request(const sn_wire_request_t *req, void **buf, size_t *len)
{
    Schednode__ClientRequest r;
    schednode__client_request__init(&r);
    Schednode__Payload arg;
    Schednode__Pid to;
    r.id = req->id;
    r.op = (Schednode__ClientRequest__Op)req->op;
    r.type = req->type ? req->type : "";
    r.method = req->method ? req->method : "";
    if (req->arg) {
        schednode__payload__init(&arg);
        arg.ctype = req->arg->ctype;
        arg.data.len = req->arg->len;
        arg.data.data = req->arg->data;
        r.arg = &arg;
    }
    schednode__pid__init(&to);
    to.node = req->to.node;
    to.serial = req->to.serial;
    r.to = &to;
    r.reason = req->reason ? req->reason : "";
    r.force = req->force != 0;
    r.node = req->node;
    r.timeout_ms = req->timeout_ms;
    r.then_stop = req->then_stop != 0;
    Schednode__Envelope env;
    envelope(&env, 0, 0);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_REQUEST;
    env.request = &r;
    return pack(&env, buf, len);
}

/* A reply's process rows and types in protobuf-c's form, pointing into
 * the reply (borrowed). */
typedef struct pb_reply_lists {
    Schednode__ProcRow *rows, **rowp;
    Schednode__Pid *pids;
    Schednode__TypeInfo *ts, **tps;
} pb_reply_lists_t;

static void pb_reply_lists_free(pb_reply_lists_t *o)
{
    free(o->rows);
    free(o->rowp);
    free(o->pids);
    free(o->ts);
    free(o->tps);
}

static void proc_to_pb(const sn_proc_row_t *p, Schednode__ProcRow *r, Schednode__Pid *pid)
{
    schednode__proc_row__init(r);
    schednode__pid__init(pid);
    pid->node = p->pid.node;
    pid->serial = p->pid.serial;
    r->pid = pid;
    r->type = (char *)p->type;
    r->state = p->state;
    r->mailbox = p->mailbox;
    r->steps = p->steps;
    r->moves = p->moves;
}

static int reply_lists_to_pb(const sn_wire_reply_t *rep, Schednode__ClientReply *r, pb_reply_lists_t *o)
{
    size_t np = rep->nprocs, nt = rep->ntypes;
    *o = (pb_reply_lists_t){calloc(np + 1, sizeof *o->rows), calloc(np + 1, sizeof *o->rowp),
                            calloc(np + 1, sizeof *o->pids), calloc(nt + 1, sizeof *o->ts),
                            calloc(nt + 1, sizeof *o->tps)};
    if (!o->rows || !o->rowp || !o->pids || !o->ts || !o->tps) {
        pb_reply_lists_free(o);
        return SN_ENOMEM;
    }
    for (size_t i = 0; i < np; i++) {
        proc_to_pb(&rep->procs[i], &o->rows[i], &o->pids[i]);
        o->rowp[i] = &o->rows[i];
    }
    for (size_t i = 0; i < nt; i++) {
        schednode__type_info__init(&o->ts[i]);
        o->ts[i].name = (char *)rep->types[i].name;
        o->ts[i].version = rep->types[i].version;
        o->ts[i].migratable = rep->types[i].migratable;
        o->tps[i] = &o->ts[i];
    }
    r->n_procs = np;
    r->procs = o->rowp;
    r->n_types = nt;
    r->types = o->tps;
    /* the counts go with the answer to PS (whichever are not all 0) */
    r->n_by_state = 0;
    for (size_t i = 0; i < SN_PS_COUNT; i++)
        if (rep->by_state[i])
            r->n_by_state = SN_PS_COUNT;
    r->by_state = (uint64_t *)rep->by_state;
    r->total = rep->total;
    r->node = rep->node;
    r->moved_to = rep->moved_to;
    r->started = rep->started != 0;
    r->ended = rep->ended != 0;
    r->end_error = rep->end_error;
    r->report = rep->report ? rep->report : "";
    r->left = rep->left;
    return 0;
}

int sn_codec_encode_reply(uint32_t node, uint64_t incarnation, const sn_wire_reply_t *rep, void **buf, size_t *len)
{
    Schednode__ClientReply r;
    schednode__client_reply__init(&r);
    Schednode__Payload res;
    Schednode__Pid pid;
    Schednode__Stats stats;
    Schednode__NodeStats *ns = NULL, **nsp = NULL;
    pb_flows_t fl = {0};
    r.id = rep->id;
    r.error = rep->error;
    r.reason = rep->reason ? rep->reason : "";
    schednode__pid__init(&pid);
    pid.node = rep->pid.node;
    pid.serial = rep->pid.serial;
    r.pid = &pid;
    if (rep->result) {
        schednode__payload__init(&res);
        res.ctype = rep->result->ctype;
        res.data.len = rep->result->len;
        res.data.data = rep->result->data;
        r.result = &res;
    }
    if (rep->nrows) {
        ns = calloc(rep->nrows, sizeof *ns);
        nsp = calloc(rep->nrows, sizeof *nsp);
        if (!ns || !nsp) {
            free(ns);
            free(nsp);
            return SN_ENOMEM;
        }
        for (size_t i = 0; i < rep->nrows; i++) {
            stats_to_pb(&rep->rows[i], &ns[i]);
            nsp[i] = &ns[i];
        }
        schednode__stats__init(&stats);
        stats.n_nodes = rep->nrows;
        stats.nodes = nsp;
        r.stats = &stats;
        if (flows_to_pb(rep->flows, rep->nflows, &fl) != 0) {
            free(ns);
            free(nsp);
            return SN_ENOMEM;
        }
        stats.n_flows = rep->nflows;
        stats.flows = fl.ptrs;
    }
    pb_reply_lists_t lists;
    if (reply_lists_to_pb(rep, &r, &lists) != 0) {
        free(ns);
        free(nsp);
        return SN_ENOMEM;
    }
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_REPLY;
    env.reply = &r;
    int rc = pack(&env, buf, len);
    free(ns);
    free(nsp);
    pb_reply_lists_free(&lists);
    free(fl.fs);
    free(fl.ptrs);
    return rc;
}

/* ---------------------------------------------------------- stealing */

int sn_codec_encode_steal_request(uint32_t node, uint64_t incarnation, uint64_t id, uint32_t max, uint32_t ready,
                                  void **buf, size_t *len)
{
    Schednode__StealRequest q;
    schednode__steal_request__init(&q);
    q.id = id;
    q.max = max;
    q.ready = ready;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_STEAL_REQUEST;
    env.steal_request = &q;
    return pack(&env, buf, len);
}

int sn_codec_encode_steal_offer(uint32_t node, uint64_t incarnation, uint64_t id, const sn_wire_migrant_t *m, size_t n,
                                void **buf, size_t *len)
{
    struct one {
        Schednode__Migrant mg;
        Schednode__Pid pid, parent;
        Schednode__Payload state;
    } *items = calloc(n ? n : 1, sizeof *items);
    Schednode__Migrant **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    if (!items || !ptrs) {
        free(items);
        free(ptrs);
        return SN_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        struct one *o = &items[i];
        schednode__migrant__init(&o->mg);
        schednode__pid__init(&o->pid);
        schednode__pid__init(&o->parent);
        schednode__payload__init(&o->state);
        o->pid.node = m[i].pid.node;
        o->pid.serial = m[i].pid.serial;
        o->parent.node = m[i].parent.node;
        o->parent.serial = m[i].parent.serial;
        o->state.ctype = m[i].state ? m[i].state->ctype : 0;
        o->state.data.len = m[i].state ? m[i].state->len : 0;
        o->state.data.data = m[i].state ? m[i].state->data : NULL;
        o->mg.pid = &o->pid;
        o->mg.parent = &o->parent;
        o->mg.type = (char *)m[i].type;
        o->mg.type_version = m[i].type_version;
        o->mg.state = &o->state;
        o->mg.awaited = m[i].awaited != 0;
        o->mg.await_down = m[i].awaited == 2;
        o->mg.fresh = m[i].fresh != 0;
        o->mg.idle = m[i].idle != 0;
        o->mg.await_tag = m[i].await_tag;
        o->mg.await_node = m[i].await_node;
        o->mg.moves = m[i].moves;
        o->mg.blocked = m[i].blocked != 0;
        o->mg.n_sleep_tags = o->mg.n_sleep_left_us = m[i].nsleeps < SN_WIRE_SLEEPS ? m[i].nsleeps : SN_WIRE_SLEEPS;
        o->mg.sleep_tags = (uint64_t *)m[i].sleep_tag; /* (read only by the packer) */
        o->mg.sleep_left_us = (uint64_t *)m[i].sleep_left_us;
        ptrs[i] = &o->mg;
    }
    Schednode__StealOffer offer;
    schednode__steal_offer__init(&offer);
    offer.id = id;
    offer.n_migrants = n;
    offer.migrants = ptrs;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_STEAL_OFFER;
    env.steal_offer = &offer;
    int rc = pack(&env, buf, len);
    free(items);
    free(ptrs);
    return rc;
}

/* PIDs as a repeated Pid field: one allocation, freed by the caller. */
static int pid_list(const sn_pid_t *pids, size_t n, Schednode__Pid ***out, void **mem)
{
    Schednode__Pid *ps = calloc(n ? n : 1, sizeof *ps);
    Schednode__Pid **pp = calloc(n ? n : 1, sizeof *pp);
    if (!ps || !pp) {
        free(ps);
        free(pp);
        return SN_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        schednode__pid__init(&ps[i]);
        ps[i].node = pids[i].node;
        ps[i].serial = pids[i].serial;
        pp[i] = &ps[i];
    }
    *out = pp;
    *mem = ps;
    return 0;
}

int sn_codec_encode_steal_accept(uint32_t node, uint64_t incarnation, uint64_t id, const sn_pid_t *pids, size_t n,
                                 void **buf, size_t *len)
{
    Schednode__StealAccept a;
    schednode__steal_accept__init(&a);
    void *mem;
    Schednode__Pid **pp;
    if (pid_list(pids, n, &pp, &mem) != 0)
        return SN_ENOMEM;
    a.id = id;
    a.n_accepted = n;
    a.accepted = pp;
    Schednode__Envelope env;
    envelope(&env, node, incarnation);
    env.body_case = SCHEDNODE__ENVELOPE__BODY_STEAL_ACCEPT;
    env.steal_accept = &a;
    int rc = pack(&env, buf, len);
    free(mem);
    free(pp);
    return rc;
}

int sn_codec_encode_steal_commit(uint32_t node, uint64_t incarnation, uint64_t id, const sn_pid_t *pids, size_t n,
                                 const sn_wire_send_t *sends, size_t nsends, bool more, void **buf, size_t *len)
{
    Schednode__StealCommit c;
    schednode__steal_commit__init(&c);
    void *mem, *bmem = NULL;
    Schednode__Pid **pp;
    Schednode__SendBatch batch;
    if (pid_list(pids, n, &pp, &mem) != 0)
        return SN_ENOMEM;
    int rc = nsends ? build_batch(&batch, 0, sends, nsends, &bmem) : 0;
    if (rc == 0) {
        c.id = id;
        c.n_committed = n;
        c.committed = pp;
        c.forwarded = nsends ? &batch : NULL;
        c.more = more;
        Schednode__Envelope env;
        envelope(&env, node, incarnation);
        env.body_case = SCHEDNODE__ENVELOPE__BODY_STEAL_COMMIT;
        env.steal_commit = &c;
        rc = pack(&env, buf, len);
    }
    free(bmem);
    free(mem);
    free(pp);
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

/* Checks every column against the count before reading any of them. */
static int decode_sends(const Schednode__SendBatch *b, sn_frame_t *out)
{
    size_t n = b ? b->n_to_serial : 0;
    if (!b || (n == 0 && !b->seq) || b->n_from_node != n || b->n_from_serial != n || b->n_tag != n || b->n_ctype != n ||
        b->n_size != n || (b->n_kind != 0 && b->n_kind != n) || (b->n_error != 0 && b->n_error != n) ||
        (b->n_to_nodes != 0 && b->n_to_nodes != n) || (b->n_hops != 0 && b->n_hops != n) ||
        (b->n_id_delta != 0 && b->n_id_delta != n) || (b->n_waited_us != 0 && b->n_waited_us != n))
        return SN_EPROTO;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (b->size[i] > UINT32_MAX - 1 || b->to_serial[i] == 0)
            return SN_EPROTO;
        if (b->n_kind && event_kind((int)b->kind[i]) < 0)
            return SN_EPROTO;
        bytes += b->size[i] ? b->size[i] - 1u : 0;
    }
    if (bytes != b->data.len)
        return SN_EPROTO;
    if (n == 0) /* (an empty numbered batch: a sender's probe for a gap, relay/peer.c) */
        return 0;
    out->sends = calloc(n, sizeof *out->sends);
    if (!out->sends)
        return SN_ENOMEM;
    const uint8_t *d = b->data.data;
    for (size_t i = 0; i < n; i++) {
        sn_wire_send_t *w = &out->sends[i];
        out->nsends = i + 1; /* so sn_frame_clear frees what we made */
        w->to = (sn_pid_t){b->n_to_nodes ? b->to_nodes[i] : b->to_node, b->to_serial[i]};
        w->from = (sn_pid_t){b->from_node[i], b->from_serial[i]};
        w->tag = b->tag[i];
        w->kind = (uint8_t)(b->n_kind ? event_kind((int)b->kind[i]) : SN_EV_MESSAGE);
        w->error = b->n_error ? b->error[i] : 0;
        w->hops = b->n_hops ? b->hops[i] : 0;
        w->id = b->n_id_delta ? b->id_base + (uint64_t)b->id_delta[i] : 0;
        w->waited_us = b->n_waited_us && b->sent_us ? b->waited_us[i] : 0;
        if (b->size[i]) {
            size_t len = b->size[i] - 1u;
            w->payload = sn_payload_new(b->ctype[i], d, len);
            if (!w->payload)
                return SN_ENOMEM;
            if (len) /* d is NULL when every payload is empty (no data field): NULL + 0 is UB */
                d += len;
        }
    }
    return 0;
}

static sn_payload_t *payload_from_pb(const Schednode__Payload *p, int *rc)
{
    if (!p)
        return NULL;
    if (p->data.len > UINT32_MAX - 1) {
        *rc = SN_EPROTO;
        return NULL;
    }
    sn_payload_t *out = sn_payload_new(p->ctype, p->data.data, p->data.len);
    if (!out)
        *rc = SN_ENOMEM;
    return out;
}

static int decode_request(const Schednode__ClientRequest *r, sn_wire_request_t *out)
{
    int rc = 0;
    if (!r || r->op > SCHEDNODE__CLIENT_REQUEST__OP__UNDRAIN)
        return SN_EPROTO;
    out->id = r->id;
    out->op = (int)r->op;
    out->force = r->force;
    out->node = r->node;
    out->timeout_ms = r->timeout_ms;
    out->then_stop = r->then_stop;
    out->type = strdup(r->type ? r->type : "");
    out->method = strdup(r->method ? r->method : "");
    out->reason = strdup(r->reason ? r->reason : "");
    if (!out->type || !out->method || !out->reason)
        return SN_ENOMEM;
    out->arg = payload_from_pb(r->arg, &rc);
    if (r->to)
        pid_from_pb(r->to, &out->to);
    return rc;
}

/* Most rows and types a reply may carry (a frame is at most 16 MiB). */
#define REPLY_PROCS_MAX 1000000u
#define REPLY_TYPES_MAX 65536u

static int procs_from_pb(const Schednode__ClientReply *r, sn_wire_reply_t *out)
{
    if (r->n_procs > REPLY_PROCS_MAX)
        return SN_EPROTO;
    out->procs = calloc(r->n_procs, sizeof *out->procs);
    if (!out->procs)
        return SN_ENOMEM;
    for (size_t i = 0; i < r->n_procs; i++) {
        const Schednode__ProcRow *p = r->procs[i];
        sn_proc_row_t *o = &out->procs[i];
        if (!p || !p->pid || p->state >= SN_PS_COUNT || copy_str(o->type, sizeof o->type, p->type) != 0 ||
            pid_from_pb(p->pid, &o->pid) != 0)
            return SN_EPROTO;
        o->state = p->state;
        o->mailbox = p->mailbox;
        o->steps = p->steps;
        o->moves = p->moves;
        out->nprocs = i + 1;
    }
    return 0;
}

static int reply_types_from_pb(const Schednode__ClientReply *r, sn_wire_reply_t *out)
{
    if (r->n_types > REPLY_TYPES_MAX)
        return SN_EPROTO;
    out->types = calloc(r->n_types, sizeof *out->types);
    if (!out->types)
        return SN_ENOMEM;
    for (size_t i = 0; i < r->n_types; i++) {
        const Schednode__TypeInfo *t = r->types[i];
        if (!t || copy_str(out->types[i].name, sizeof out->types[i].name, t->name) != 0)
            return SN_EPROTO;
        out->types[i].version = t->version;
        out->types[i].migratable = t->migratable;
        out->ntypes = i + 1;
    }
    return 0;
}

/* PS, KILL, TYPES, CALL's fields of a reply. */
static int reply_lists_from_pb(const Schednode__ClientReply *r, sn_wire_reply_t *out)
{
    out->total = r->total;
    out->node = r->node;
    out->moved_to = r->moved_to;
    out->started = r->started;
    out->ended = r->ended;
    out->end_error = r->end_error;
    out->left = r->left;
    if (r->report && *r->report && !(out->report = strdup(r->report)))
        return SN_ENOMEM;
    for (size_t i = 0; i < r->n_by_state && i < SN_PS_COUNT; i++) /* (states added later: not counted) */
        out->by_state[i] = r->by_state[i];
    int rc = r->n_procs ? procs_from_pb(r, out) : 0;
    if (rc == 0 && r->n_types)
        rc = reply_types_from_pb(r, out);
    return rc;
}

static int decode_reply(const Schednode__ClientReply *r, sn_wire_reply_t *out)
{
    int rc = 0;
    if (!r)
        return SN_EPROTO;
    out->id = r->id;
    out->error = r->error;
    out->reason = strdup(r->reason ? r->reason : "");
    if (!out->reason)
        return SN_ENOMEM;
    if (r->pid)
        pid_from_pb(r->pid, &out->pid);
    out->result = payload_from_pb(r->result, &rc);
    if (rc == 0 && r->stats && r->stats->n_nodes > 0) {
        out->rows = calloc(r->stats->n_nodes, sizeof *out->rows);
        if (!out->rows)
            return SN_ENOMEM;
        for (size_t i = 0; i < r->stats->n_nodes; i++) {
            if (!r->stats->nodes[i] || stats_from_pb(r->stats->nodes[i], &out->rows[i]) != 0)
                return SN_EPROTO;
            out->nrows = i + 1;
        }
        rc = flows_from_pb(r->stats, out);
    }
    return rc == 0 ? reply_lists_from_pb(r, out) : rc;
}

bool sn_wire_endpoint_ok(const char *ep)
{
    if (!ep || strncmp(ep, "tcp://", 6) != 0 || strlen(ep) >= SN_WIRE_ENDPOINT_MAX)
        return false;
    /* host names, IPv4/IPv6 addresses, ports, wildcards: nothing that
     * needs quoting in a log line or in `status --json` */
    return strspn(ep + 6, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:-_[]*%") == strlen(ep + 6);
}

static int decode_types(Schednode__TypeInfo **ts, size_t n, sn_wire_member_t *w)
{
    if (n > SN_WIRE_TYPES_MAX)
        return SN_EPROTO;
    if (n == 0)
        return 0;
    w->types = calloc(n, sizeof *w->types);
    if (!w->types)
        return SN_ENOMEM;
    for (size_t t = 0; t < n; t++) {
        if (!ts[t] || copy_str(w->types[t].name, sizeof w->types[t].name, ts[t]->name) != 0)
            return SN_EPROTO;
        w->types[t].version = ts[t]->version;
        w->types[t].migratable = ts[t]->migratable;
        w->ntypes = t + 1;
    }
    return 0;
}

/* A Hello: its fields, and the joining node's process types as members[0]. */
static int decode_hello(const Schednode__Hello *h, sn_frame_t *out)
{
    if (!h || !sn_wire_endpoint_ok(h->endpoint))
        return SN_EPROTO;
    if (copy_str(out->public_key, sizeof out->public_key, h->public_key) != 0)
        return SN_EPROTO;
    out->endpoint = strdup(h->endpoint);
    out->cluster = strdup(h->cluster ? h->cluster : "");
    out->first_serial = h->first_serial;
    out->members = calloc(1, sizeof *out->members);
    if (!out->endpoint || !out->cluster || !out->members)
        return SN_ENOMEM;
    out->nmembers = 1;
    out->members[0].node = out->node;
    if (h->probe_port > 65535)
        return SN_EPROTO;
    out->members[0].probe_port = h->probe_port;
    snprintf(out->members[0].endpoint, sizeof out->members[0].endpoint, "%s", out->endpoint);
    return decode_types(h->types, h->n_types, &out->members[0]);
}

static int decode_members(Schednode__Member **ms, size_t n, sn_frame_t *out)
{
    if (n == 0)
        return SN_EPROTO;
    out->members = calloc(n, sizeof *out->members);
    if (!out->members)
        return SN_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const Schednode__Member *m = ms[i];
        sn_wire_member_t *w = &out->members[i];
        if (!m || m->node == 0 || m->state > SCHEDNODE__MEMBER__STATE__LEFT ||
            copy_str(w->endpoint, sizeof w->endpoint, m->endpoint) != 0 || !sn_wire_endpoint_ok(w->endpoint) ||
            copy_str(w->public_key, sizeof w->public_key, m->public_key) != 0 || m->probe_port > 65535)
            return SN_EPROTO;
        out->nmembers = i + 1; /* so sn_frame_clear frees what we made */
        int rc = decode_types(m->types, m->n_types, w);
        if (rc != 0)
            return rc;
        w->node = m->node;
        w->state = (int)m->state;
        w->incarnation = m->incarnation;
        w->first_serial = m->first_serial;
        w->version = m->version;
        w->probe_port = m->probe_port;
        w->suspected_by = m->suspected_by;
    }
    return 0;
}

static int decode_pids(Schednode__Pid **pb, size_t n, sn_frame_t *out)
{
    if (n == 0)
        return 0;
    out->pids = calloc(n, sizeof *out->pids);
    if (!out->pids)
        return SN_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (pid_from_pb(pb[i], &out->pids[i]) != 0 || out->pids[i].serial == 0)
            return SN_EPROTO;
    out->npids = n;
    return 0;
}

static int decode_steal(const Schednode__Envelope *env, sn_frame_t *out)
{
    switch (out->kind) {
    case SN_FRAME_STEAL_REQUEST:
        if (!env->steal_request)
            return SN_EPROTO;
        out->steal_id = env->steal_request->id;
        out->steal_max = env->steal_request->max;
        out->steal_ready = env->steal_request->ready;
        return 0;
    case SN_FRAME_STEAL_ACCEPT:
        if (!env->steal_accept)
            return SN_EPROTO;
        out->steal_id = env->steal_accept->id;
        return decode_pids(env->steal_accept->accepted, env->steal_accept->n_accepted, out);
    case SN_FRAME_STEAL_COMMIT: {
        const Schednode__StealCommit *c = env->steal_commit;
        if (!c)
            return SN_EPROTO;
        out->steal_id = c->id;
        out->steal_more = c->more;
        int rc = decode_pids(c->committed, c->n_committed, out);
        if (rc == 0 && c->forwarded && c->forwarded->n_to_serial)
            rc = decode_sends(c->forwarded, out);
        return rc;
    }
    case SN_FRAME_STEAL_OFFER: {
        const Schednode__StealOffer *o = env->steal_offer;
        if (!o)
            return SN_EPROTO;
        out->steal_id = o->id;
        if (o->n_migrants == 0)
            return 0;
        out->migrants = calloc(o->n_migrants, sizeof *out->migrants);
        if (!out->migrants)
            return SN_ENOMEM;
        for (size_t i = 0; i < o->n_migrants; i++) {
            const Schednode__Migrant *m = o->migrants[i];
            sn_wire_migrant_t *w = &out->migrants[i];
            out->nmigrants = i + 1;
            if (!m || pid_from_pb(m->pid, &w->pid) != 0 || w->pid.serial == 0 || !m->state ||
                copy_str(w->type, sizeof w->type, m->type) != 0 || m->state->data.len > UINT32_MAX - 1)
                return SN_EPROTO;
            if (m->parent)
                pid_from_pb(m->parent, &w->parent);
            w->awaited = m->awaited ? (m->await_down ? 2 : 1) : 0;
            w->fresh = m->fresh;
            w->idle = m->idle;
            w->await_tag = m->await_tag;
            w->await_node = m->await_node;
            w->type_version = m->type_version;
            w->moves = m->moves;
            w->blocked = m->blocked;
            if (m->n_sleep_tags != m->n_sleep_left_us || m->n_sleep_tags > SN_WIRE_SLEEPS)
                return SN_EPROTO;
            w->nsleeps = m->n_sleep_tags;
            for (size_t k = 0; k < w->nsleeps; k++) {
                w->sleep_tag[k] = m->sleep_tags[k];
                w->sleep_left_us[k] = m->sleep_left_us[k];
            }
            w->state = sn_payload_new(m->state->ctype, m->state->data.data, m->state->data.len);
            if (!w->state)
                return SN_ENOMEM;
        }
        return 0;
    }
    default:
        return SN_EPROTO;
    }
}

/* A Heartbeat (a probe, its answer, a load): its cluster, the sender's
 * row, the probe and the updates it carries. */
static int decode_heartbeat(const Schednode__Heartbeat *hb, sn_frame_t *out)
{
    out->cluster = strdup(hb && hb->cluster ? hb->cluster : "");
    if (!out->cluster)
        return SN_ENOMEM;
    if (!hb)
        return 0;
    int rc = 0;
    if (hb->stats) {
        rc = stats_from_pb(hb->stats, &out->stats);
        out->has_stats = rc == 0;
    }
    if (rc == 0 && (hb->probe > 4 || hb->probe_port > 65535)) /* (SN_SWIM_NACK; a port) */
        rc = SN_EPROTO;
    out->probe = (sn_wire_probe_t){(int)hb->probe, hb->probe_seq, hb->target, hb->probe_port};
    if (rc == 0 && hb->n_updates)
        rc = hb->n_updates > SN_WIRE_UPDATES_MAX ? SN_EPROTO : decode_members(hb->updates, hb->n_updates, out);
    return rc;
}

/* The body of env, by out->kind; *what names a bad one. */
static int decode_body(const Schednode__Envelope *env, sn_frame_t *out, const char **what)
{
    switch (out->kind) {
    case SN_FRAME_ACK:
        out->seq = env->ack ? env->ack->seq : 0;
        if (env->ack && env->ack->refused_from) {
            *what = "bad ack";
            if (env->ack->refused_to < env->ack->refused_from || env->ack->refused_error >= 0)
                return SN_EPROTO;
            out->refused_from = env->ack->refused_from;
            out->refused_to = env->ack->refused_to;
            out->refused_error = env->ack->refused_error;
        }
        return 0;
    case SN_FRAME_PART: {
        const Schednode__Part *pt = env->part;
        *what = "bad part";
        if (!pt || pt->offset >= pt->total || pt->data.len == 0 || pt->data.len > pt->total - pt->offset)
            return SN_EPROTO;
        out->seq = pt->seq;
        out->part_offset = pt->offset;
        out->part_total = pt->total;
        out->part_len = pt->data.len;
        out->part = malloc(pt->data.len);
        if (!out->part)
            return SN_ENOMEM;
        memcpy(out->part, pt->data.data, pt->data.len);
        return 0;
    }
    case SN_FRAME_SENDS:
        out->seq = env->sends ? env->sends->seq : 0;
        out->to_incarnation = env->sends ? env->sends->to_incarnation : 0;
        out->sent_us = env->sends ? env->sends->sent_us : 0;
        *what = "bad send";
        return decode_sends(env->sends, out);
    case SN_FRAME_REQUEST:
        *what = "bad request";
        return decode_request(env->request, &out->request);
    case SN_FRAME_HELLO:
        *what = "bad hello";
        return decode_hello(env->hello, out);
    case SN_FRAME_WELCOME:
        *what = "bad member list";
        return decode_members(env->welcome ? env->welcome->members : NULL, env->welcome ? env->welcome->n_members : 0,
                              out);
    case SN_FRAME_MEMBERS:
        *what = "bad member list";
        return decode_members(env->members ? env->members->members : NULL, env->members ? env->members->n_members : 0,
                              out);
    case SN_FRAME_HEARTBEAT:
        *what = "bad heartbeat";
        return decode_heartbeat(env->heartbeat, out);
    case SN_FRAME_ERROR:
    case SN_FRAME_LEAVE: {
        const char *reason = out->kind == SN_FRAME_ERROR ? (env->error ? env->error->reason : NULL)
                                                         : (env->leave ? env->leave->reason : NULL);
        out->code = out->kind == SN_FRAME_ERROR && env->error ? env->error->code : 0;
        out->reason = strdup(reason ? reason : "");
        return out->reason ? 0 : SN_ENOMEM;
    }
    case SN_FRAME_REPLY:
        *what = "bad reply";
        return decode_reply(env->reply, &out->reply);
    case SN_FRAME_STEAL_REQUEST:
    case SN_FRAME_STEAL_OFFER:
    case SN_FRAME_STEAL_ACCEPT:
    case SN_FRAME_STEAL_COMMIT:
        *what = "bad steal message";
        return decode_steal(env, out);
    default:
        return 0;
    }
}

static bool affordable(const void *buf, size_t len, const char **why);

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
    if (!affordable(buf, len, why))
        return SN_EPROTO;
    Schednode__Envelope *env = schednode__envelope__unpack(NULL, len, buf);
    if (!env) {
        *why = "undecodable";
        return SN_EPROTO;
    }
    int rc = SN_EPROTO;
    out->version = env->version;
    out->node = env->node;
    out->incarnation = env->incarnation;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if ((int)env->body_case == kinds[i].pb_case)
            out->kind = kinds[i].kind;
    if (env->version != SN_WIRE_VERSION) {
        *why = "unsupported version";
    } else if (out->kind == SN_FRAME_NONE) {
        *why = "no body";
    } else if (out->kind != SN_FRAME_REQUEST && out->node == 0) {
        *why = "no sender node";
    } else {
        const char *what = "bad frame";
        rc = decode_body(env, out, &what);
        if (rc != 0)
            *why = rc == SN_ENOMEM ? "out of memory" : what;
    }
    schednode__envelope__free_unpacked(env, NULL);
    if (rc != 0) {
        sn_frame_t keep = *out;
        sn_frame_clear(out);
        out->version = keep.version;
        out->node = keep.node;
    }
    return rc;
}

/* ---- a look at an envelope's kind without decoding it */

/* The varint at *p (before end) into *v, *p past it; false if it is cut
 * short or longer than 64 bits. */
static bool peek_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Skips the value of one field of wire type wt; false if malformed. */
static bool peek_skip(const uint8_t **p, const uint8_t *end, unsigned wt)
{
    uint64_t n;
    switch (wt) {
    case 0:
        return peek_varint(p, end, &n);
    case 1:
        n = 8;
        break;
    case 2:
        if (!peek_varint(p, end, &n))
            return false;
        break;
    case 5:
        n = 4;
        break;
    default:
        return false;
    }
    if (n > (uint64_t)(end - *p))
        return false;
    *p += n;
    return true;
}

sn_frame_kind_t sn_codec_peek_kind(const void *buf, size_t len)
{
    const uint8_t *p = buf, *end = p + len;
    sn_frame_kind_t kind = SN_FRAME_NONE;
    while (p < end) {
        uint64_t key;
        if (!peek_varint(&p, end, &key))
            return SN_FRAME_NONE;
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if ((uint64_t)kinds[i].pb_case == key >> 3) /* (a body's case is its field number; the last one counts) */
                kind = kinds[i].kind;
        if (!peek_skip(&p, end, (unsigned)(key & 7)))
            return SN_FRAME_NONE;
    }
    return kind;
}

/* ---- bounded decoding: what unpacking a frame costs, read from its bytes
 *
 * protobuf-c allocates as it unpacks: a struct for every message in the
 * frame (an empty row of a member list is two bytes on the wire and over
 * a hundred unpacked), an array for every repeated field, a copy of every
 * string; decode_* then make rows of ours. So before anything is
 * allocated, one walk over the bytes (no allocation; each byte read by
 * the message it belongs to, once, or twice for a batch's `size` column;
 * nesting is the schema's, a few levels)
 * adds up what both would allocate, and a frame is refused when a list in
 * it is longer than its kind carries (`lists`) or when the sum passes
 * SN_WIRE_DECODE_RATIO times its size plus SN_WIRE_DECODE_SLACK. The sum
 * bounds what unpacking allocates from above (malloc's header and
 * rounding included), so decoding any frame costs at most that. Guarded
 * by test_codec (decode_cost_is_bounded) and hostile.sh case 7. */

#define ALLOC(n) ((size_t)(n) + 32u) /* a block of n bytes, malloc's header and rounding included */
/* protobuf-c records the first SCAN_STACK fields of a message on its
 * stack, then every field on the heap: SCAN_HEAP bytes each (a record of
 * 32, twice over as the records' slabs double) */
#define SCAN_STACK 16u
#define SCAN_HEAP 64u
#define SCAN_DEPTH 8u /* messages within messages (the schema nests four deep) */
/* A payload made here takes a block of at least this many bytes
 * (sched/payload.c, SMALL_BLOCK); a bigger one, its bytes and a
 * header, which the frame's bytes and this count cover. */
#define PAYLOAD_BLOCK 128u

/* Lists of rows: how many one message may carry, and what a row costs
 * once decode_* made it one of ours (on top of protobuf-c's share). */
static const struct list_bound {
    const ProtobufCMessageDescriptor *msg;
    unsigned field;
    size_t max; /* rows (SIZE_MAX: only their cost bounds them) */
    size_t row; /* bytes */
} lists[] = {
    {&schednode__members__descriptor, 1, SN_WIRE_MEMBERS_MAX, sizeof(sn_wire_member_t)},
    {&schednode__welcome__descriptor, 2, SN_WIRE_MEMBERS_MAX, sizeof(sn_wire_member_t)},
    {&schednode__heartbeat__descriptor, 10, SN_WIRE_UPDATES_MAX, sizeof(sn_wire_member_t)},
    {&schednode__member__descriptor, 8, SN_WIRE_TYPES_MAX, sizeof(sn_wire_type_t)},
    {&schednode__hello__descriptor, 2, SN_WIRE_TYPES_MAX, sizeof(sn_wire_type_t)},
    {&schednode__welcome__descriptor, 3, SN_WIRE_TYPES_MAX, sizeof(sn_wire_type_t)},
    {&schednode__client_reply__descriptor, 10, SN_WIRE_TYPES_MAX, sizeof(sn_wire_type_t)},
    {&schednode__client_reply__descriptor, 7, SIZE_MAX, sizeof(sn_proc_row_t)},
    {&schednode__stats__descriptor, 1, SN_WIRE_MEMBERS_MAX + 1u, sizeof(sn_wire_stats_t)},
    {&schednode__stats__descriptor, 2, SN_WIRE_MEMBERS_MAX, sizeof(sn_wire_flow_t)},
    {&schednode__steal_offer__descriptor, 2, SIZE_MAX, sizeof(sn_wire_migrant_t) + ALLOC(PAYLOAD_BLOCK)},
    {&schednode__steal_accept__descriptor, 2, SIZE_MAX, sizeof(sn_pid_t)},
    {&schednode__steal_commit__descriptor, 2, SIZE_MAX, sizeof(sn_pid_t)},
    /* a batch's sends: one per to_serial (their payloads: see payloads) */
    {&schednode__send_batch__descriptor, 4, SIZE_MAX, sizeof(sn_wire_send_t)},
};

typedef struct cost {
    size_t bytes, budget;
    const char *why;
} cost_t;

/* Adds n bytes to c; false (and why) once they pass the budget. */
static bool spend(cost_t *c, size_t n)
{
    if (n > c->budget - c->bytes) {
        c->why = "costs more to decode than its size allows";
        return false;
    }
    c->bytes += n;
    return true;
}

/* What one entry of a repeated field of type t takes in its array. */
static size_t entry_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return 8;
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default: /* 32-bit numbers, enums, bools (protobuf_c_boolean is an int) */
        return 4;
    }
}

/* The entries packed in n bytes of a repeated number field of type t. */
static size_t packed_entries(ProtobufCType t, const uint8_t *p, size_t n)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return n / 4;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return n / 8;
    default: { /* varints: one per byte without the continuation bit */
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            k += !(p[i] & 0x80);
        return k;
    }
    }
}

static bool scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, unsigned depth, cost_t *c);

/* The field at *p: its key, and its value's bytes v[0..*n) (a
 * length-delimited value's without its length); *p past it. false if
 * it is malformed or cut short. */
static bool next_field(const uint8_t **p, const uint8_t *end, uint64_t *key, const uint8_t **v, size_t *n)
{
    uint64_t len;
    if (!peek_varint(p, end, key))
        return false;
    if ((*key & 7) == 2) {
        if (!peek_varint(p, end, &len) || len > (uint64_t)(end - *p))
            return false;
        *v = *p;
        *n = (size_t)len;
        *p += len;
        return true;
    }
    *v = *p;
    if (!peek_skip(p, end, (unsigned)(*key & 7)))
        return false;
    *n = (size_t)(*p - *v);
    return true;
}

/* A batch's sends with a payload, in the n bytes of its `size` column
 * (wire type wt): one per entry other than 0. */
static size_t payloads(unsigned wt, const uint8_t *p, size_t n)
{
    size_t k = 0;
    if (wt == 0) /* (one entry, not packed) */
        return n > 1 || (n == 1 && p[0] != 0);
    for (size_t i = 0; wt == 2 && i < n; i++) /* (a varint's last byte; nonzero if any of its bytes is) */
        k += !(p[i] & 0x80) && (p[i] || (i && (p[i - 1] & 0x80)));
    return k;
}

/* The cost of one occurrence of field f (wire type wt) whose value is
 * v[0..n), rows of it counted in *rows: the entries it adds. */
static bool scan_field(const ProtobufCFieldDescriptor *f, unsigned wt, const uint8_t *v, size_t n, unsigned depth,
                       size_t *rows, cost_t *c)
{
    bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
    *rows = 1;
    switch (f->type) {
    case PROTOBUF_C_TYPE_MESSAGE:
        if (wt != 2) /* (protobuf-c refuses it) */
            return true;
        if (!scan(f->descriptor, v, v + n, depth + 1, c))
            return false;
        break;
    case PROTOBUF_C_TYPE_STRING: /* (twice: protobuf-c's copy, and ours: a strdup, a payload) */
    case PROTOBUF_C_TYPE_BYTES:
        if (!spend(c, 2 * ALLOC(n + 1)))
            return false;
        break;
    default:
        if (repeated && wt == 2)
            *rows = packed_entries(f->type, v, n);
        break;
    }
    /* an array entry per row, and the array's own block (counted per
     * occurrence: more than protobuf-c makes, never less) */
    return !repeated || spend(c, *rows * entry_size(f->type) + ALLOC(0));
}

/* Adds the cost of unpacking message d from p..end (its struct, what its
 * fields allocate, the rows of ours its lists become) to c; false, with
 * why, if it is too dear, has a list over its bound, or is malformed. */
static bool scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, unsigned depth, cost_t *c)
{
    size_t nlists = sizeof lists / sizeof lists[0], counted[sizeof lists / sizeof lists[0]] = {0}, fields = 0;
    if (depth > SCAN_DEPTH) {
        c->why = "nested too deep";
        return false;
    }
    if (!spend(c, ALLOC(d->sizeof_message)))
        return false;
    while (p < end) {
        uint64_t key;
        const uint8_t *v;
        size_t n, rows;
        if (!next_field(&p, end, &key, &v, &n))
            return false; /* (why: "undecodable", the caller's) */
        if (++fields > SCAN_STACK && !spend(c, fields == SCAN_STACK + 1 ? SCAN_HEAP * fields : SCAN_HEAP))
            return false;
        const ProtobufCFieldDescriptor *f =
            key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3)) : NULL;
        if (!f) { /* kept as an unknown field: its record and a copy of it */
            if (!spend(c, sizeof(ProtobufCMessageUnknownField) + ALLOC(n)))
                return false;
            continue;
        }
        if (!scan_field(f, (unsigned)(key & 7), v, n, depth, &rows, c))
            return false;
        if (d == &schednode__send_batch__descriptor && f->id == 11 &&
            !spend(c, payloads((unsigned)(key & 7), v, n) * ALLOC(PAYLOAD_BLOCK)))
            return false;
        for (size_t i = 0; i < nlists; i++) {
            if (lists[i].msg != d || lists[i].field != f->id)
                continue;
            if ((counted[i] += rows) > lists[i].max) {
                c->why = "a list longer than its kind carries";
                return false;
            }
            if (!spend(c, rows * lists[i].row))
                return false;
        }
    }
    return true;
}

size_t sn_codec_decode_cost(const void *buf, size_t len)
{
    cost_t c = {.budget = SIZE_MAX};
    return scan(&schednode__envelope__descriptor, buf, (const uint8_t *)buf + len, 0, &c) ? c.bytes : SIZE_MAX;
}

/* Whether decoding buf costs at most the budget; else why not. */
static bool affordable(const void *buf, size_t len, const char **why)
{
    cost_t c = {.budget = len > (SIZE_MAX - SN_WIRE_DECODE_SLACK) / SN_WIRE_DECODE_RATIO
                              ? SIZE_MAX
                              : len * SN_WIRE_DECODE_RATIO + SN_WIRE_DECODE_SLACK,
                .why = "undecodable"};
    if (scan(&schednode__envelope__descriptor, buf, (const uint8_t *)buf + len, 0, &c))
        return true;
    *why = c.why;
    return false;
}

void sn_frame_clear(sn_frame_t *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nsends; i++)
        sn_payload_destroy(&f->sends[i].payload);
    free(f->sends);
    free(f->request.type);
    free(f->request.method);
    free(f->request.reason);
    sn_payload_destroy(&f->request.arg);
    free(f->reply.reason);
    sn_payload_destroy(&f->reply.result);
    free(f->reply.rows);
    free(f->reply.procs);
    free(f->reply.types);
    free(f->reply.flows);
    free(f->reply.report);
    free(f->endpoint);
    free(f->cluster);
    for (size_t i = 0; i < f->nmembers; i++)
        free(f->members[i].types);
    free(f->members);
    for (size_t i = 0; i < f->nmigrants; i++)
        sn_payload_destroy(&f->migrants[i].state);
    free(f->migrants);
    free(f->pids);
    free(f->reason);
    free(f->part);
    memset(f, 0, sizeof *f);
}

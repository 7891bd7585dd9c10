/* fuzz_codec.c - the wire decoder (wire/codec.c) on hostile bytes: the
 * Envelope, then every body it can carry (the SendBatch columns, Hello,
 * Welcome and Members lists with their types, Heartbeat stats, Error and
 * Leave, the four steal messages, client Request and Reply, Ack).
 *
 * Beyond "no crash, no leak, no UB": a frame that decodes must survive a
 * round trip through our own encoder unchanged (decode, encode, decode,
 * compare), so the encoders and decoders agree on everything the decoder
 * accepts.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fuzz.h"

static bool payload_eq(const sn_payload_t *a, const sn_payload_t *b)
{
    if (!a || !b)
        return a == b;
    return a->ctype == b->ctype && a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

static bool str_eq(const char *a, const char *b)
{
    return !strcmp(a ? a : "", b ? b : "");
}

static bool sends_eq(const sn_wire_send_t *a, const sn_wire_send_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!sn_pid_eq(a[i].to, b[i].to) || !sn_pid_eq(a[i].from, b[i].from) || a[i].tag != b[i].tag ||
            a[i].kind != b[i].kind || a[i].error != b[i].error || !payload_eq(a[i].payload, b[i].payload))
            return false;
    return true;
}

static bool stats_eq(const sn_wire_stats_t *a, const sn_wire_stats_t *b)
{
    return a->node == b->node && a->workers == b->workers && a->idle_workers == b->idle_workers &&
           a->state == b->state && !strcmp(a->endpoint, b->endpoint) && a->live == b->live && a->ready == b->ready &&
           a->idle == b->idle && a->blocked == b->blocked && a->msgs_in == b->msgs_in && a->msgs_out == b->msgs_out &&
           a->steals_in == b->steals_in && a->steals_out == b->steals_out && a->migrated == b->migrated &&
           a->bad_frames == b->bad_frames && a->uptime_ms == b->uptime_ms;
}

static bool members_eq(const sn_wire_member_t *a, const sn_wire_member_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i].node != b[i].node || a[i].state != b[i].state || a[i].incarnation != b[i].incarnation ||
            a[i].first_serial != b[i].first_serial || strcmp(a[i].endpoint, b[i].endpoint) ||
            strcmp(a[i].public_key, b[i].public_key) || a[i].ntypes != b[i].ntypes ||
            a[i].probe_port != b[i].probe_port)
            return false;
        for (size_t t = 0; t < a[i].ntypes; t++)
            if (strcmp(a[i].types[t].name, b[i].types[t].name) || a[i].types[t].version != b[i].types[t].version ||
                a[i].types[t].migratable != b[i].types[t].migratable)
                return false;
    }
    return true;
}

static bool migrants_eq(const sn_wire_migrant_t *a, const sn_wire_migrant_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!sn_pid_eq(a[i].pid, b[i].pid) || !sn_pid_eq(a[i].parent, b[i].parent) ||
            (a[i].awaited != 0) != (b[i].awaited != 0) || a[i].await_tag != b[i].await_tag ||
            strcmp(a[i].type, b[i].type) || a[i].type_version != b[i].type_version ||
            !payload_eq(a[i].state, b[i].state))
            return false;
    return true;
}

static bool pids_eq(const sn_pid_t *a, const sn_pid_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!sn_pid_eq(a[i], b[i]))
            return false;
    return true;
}

/* Encodes f again with the encoder for its kind; false if there is none
 * (location, redirect, stats: no sender of ours). */
/* ps, kill, types, call's fields of two replies (their rows field by field). */
static bool reply_lists_eq(const sn_wire_reply_t *a, const sn_wire_reply_t *b)
{
    if (a->nprocs != b->nprocs || a->ntypes != b->ntypes || a->total != b->total || a->node != b->node ||
        a->moved_to != b->moved_to || a->started != b->started || a->ended != b->ended ||
        a->end_error != b->end_error || memcmp(a->by_state, b->by_state, sizeof a->by_state) != 0)
        return false;
    for (size_t i = 0; i < a->nprocs; i++) {
        const sn_proc_row_t *x = &a->procs[i], *y = &b->procs[i];
        if (!sn_pid_eq(x->pid, y->pid) || strcmp(x->type, y->type) != 0 || x->state != y->state ||
            x->mailbox != y->mailbox || x->steps != y->steps || x->moves != y->moves)
            return false;
    }
    for (size_t i = 0; i < a->ntypes; i++)
        if (strcmp(a->types[i].name, b->types[i].name) != 0 || a->types[i].version != b->types[i].version ||
            a->types[i].migratable != b->types[i].migratable)
            return false;
    return true;
}

static bool encode(const sn_frame_t *f, void **buf, size_t *len)
{
    int rc;
    switch (f->kind) {
    case SN_FRAME_SENDS:
        rc = sn_codec_encode_sends(f->node, f->incarnation, f->seq, f->sends, f->nsends, buf, len);
        break;
    case SN_FRAME_ACK:
        rc = sn_codec_encode_ack(f->node, f->incarnation, f->seq, f->refused_from, f->refused_to, f->refused_error, buf,
                                 len);
        break;
    case SN_FRAME_PART:
        rc = sn_codec_encode_part(f->node, f->incarnation, f->seq, f->part_total, f->part_offset, f->part, f->part_len,
                                  buf, len);
        break;
    case SN_FRAME_HEARTBEAT:
        rc = sn_codec_encode_probe(f->node, f->incarnation, &f->probe, f->has_stats ? &f->stats : NULL, f->cluster,
                                   f->members, f->nmembers, buf, len);
        break;
    case SN_FRAME_HELLO:
        rc = sn_codec_encode_hello(f->node, f->incarnation, f->endpoint, f->cluster, f->first_serial, f->public_key,
                                   f->nmembers ? f->members[0].probe_port : 0, f->nmembers ? f->members[0].types : NULL,
                                   f->nmembers ? f->members[0].ntypes : 0, buf, len);
        break;
    case SN_FRAME_WELCOME:
    case SN_FRAME_MEMBERS:
        rc = sn_codec_encode_members(f->node, f->incarnation, f->kind == SN_FRAME_WELCOME, f->members, f->nmembers, buf,
                                     len);
        break;
    case SN_FRAME_ERROR:
        rc = sn_codec_encode_refusal(f->node, f->incarnation, f->code, f->reason, buf, len);
        break;
    case SN_FRAME_LEAVE:
        rc = sn_codec_encode_leave(f->node, f->incarnation, f->reason, buf, len);
        break;
    case SN_FRAME_STEAL_REQUEST:
        rc =
            sn_codec_encode_steal_request(f->node, f->incarnation, f->steal_id, f->steal_max, f->steal_ready, buf, len);
        break;
    case SN_FRAME_STEAL_OFFER:
        rc = sn_codec_encode_steal_offer(f->node, f->incarnation, f->steal_id, f->migrants, f->nmigrants, buf, len);
        break;
    case SN_FRAME_STEAL_ACCEPT:
        rc = sn_codec_encode_steal_accept(f->node, f->incarnation, f->steal_id, f->pids, f->npids, buf, len);
        break;
    case SN_FRAME_STEAL_COMMIT:
        rc = sn_codec_encode_steal_commit(f->node, f->incarnation, f->steal_id, f->pids, f->npids, f->sends, f->nsends,
                                          f->steal_more, buf, len);
        break;
    case SN_FRAME_REQUEST:
        rc = sn_codec_encode_request(&f->request, buf, len);
        break;
    case SN_FRAME_REPLY:
        rc = sn_codec_encode_reply(f->node, f->incarnation, &f->reply, buf, len);
        break;
    default:
        return false;
    }
    FUZZ_CHECK(rc == 0); /* whatever we accept, we can say again */
    return true;
}

/* What a decoded frame holds, compared field by field with its re-decoding. */
static bool same(const sn_frame_t *a, const sn_frame_t *b)
{
    if (a->kind != b->kind || a->version != b->version)
        return false;
    if (a->kind != SN_FRAME_REQUEST && (a->node != b->node || a->incarnation != b->incarnation))
        return false; /* (a request is always sent as node 0) */
    switch (a->kind) {
    case SN_FRAME_SENDS:
        return a->seq == b->seq && a->nsends == b->nsends && sends_eq(a->sends, b->sends, a->nsends);
    case SN_FRAME_ACK:
        return a->seq == b->seq && a->refused_from == b->refused_from && a->refused_to == b->refused_to &&
               a->refused_error == b->refused_error;
    case SN_FRAME_PART:
        return a->seq == b->seq && a->part_total == b->part_total && a->part_offset == b->part_offset &&
               a->part_len == b->part_len && memcmp(a->part, b->part, a->part_len) == 0;
    case SN_FRAME_HEARTBEAT:
        return a->has_stats == b->has_stats && (!a->has_stats || stats_eq(&a->stats, &b->stats)) &&
               str_eq(a->cluster, b->cluster) && a->probe.kind == b->probe.kind && a->probe.seq == b->probe.seq &&
               a->probe.target == b->probe.target && a->probe.port == b->probe.port && a->nmembers == b->nmembers;
    case SN_FRAME_HELLO:
        return str_eq(a->endpoint, b->endpoint) && str_eq(a->cluster, b->cluster) &&
               a->first_serial == b->first_serial && !strcmp(a->public_key, b->public_key) &&
               a->members[0].probe_port == b->members[0].probe_port;
    case SN_FRAME_WELCOME:
    case SN_FRAME_MEMBERS:
        return a->nmembers == b->nmembers && members_eq(a->members, b->members, a->nmembers);
    case SN_FRAME_ERROR:
    case SN_FRAME_LEAVE:
        return a->code == b->code && str_eq(a->reason, b->reason);
    case SN_FRAME_STEAL_REQUEST:
        return a->steal_id == b->steal_id && a->steal_max == b->steal_max && a->steal_ready == b->steal_ready;
    case SN_FRAME_STEAL_OFFER:
        return a->steal_id == b->steal_id && a->nmigrants == b->nmigrants &&
               migrants_eq(a->migrants, b->migrants, a->nmigrants);
    case SN_FRAME_STEAL_ACCEPT:
    case SN_FRAME_STEAL_COMMIT:
        return a->steal_id == b->steal_id && a->npids == b->npids && pids_eq(a->pids, b->pids, a->npids) &&
               a->nsends == b->nsends && sends_eq(a->sends, b->sends, a->nsends);
    case SN_FRAME_REQUEST:
        return a->request.id == b->request.id && a->request.op == b->request.op &&
               str_eq(a->request.type, b->request.type) && str_eq(a->request.method, b->request.method) &&
               payload_eq(a->request.arg, b->request.arg) && sn_pid_eq(a->request.to, b->request.to) &&
               str_eq(a->request.reason, b->request.reason) && a->request.force == b->request.force;
    case SN_FRAME_REPLY:
        if (a->reply.id != b->reply.id || a->reply.error != b->reply.error ||
            !str_eq(a->reply.reason, b->reply.reason) || !sn_pid_eq(a->reply.pid, b->reply.pid) ||
            !payload_eq(a->reply.result, b->reply.result) || a->reply.nrows != b->reply.nrows)
            return false;
        for (size_t i = 0; i < a->reply.nrows; i++)
            if (!stats_eq(&a->reply.rows[i], &b->reply.rows[i]))
                return false;
        return reply_lists_eq(&a->reply, &b->reply);
    default:
        return true;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sn_frame_t f;
    const char *why = NULL;
    /* the first byte picks a cap, so the oversize check sees both sides */
    size_t max_len = size && data[0] == 0xff ? size - 1 : 0;
    int rc = sn_codec_decode(data, size, max_len, &f, &why);
    if (rc != 0) {
        FUZZ_CHECK(rc == SN_EPROTO || rc == SN_ENOMEM);
        FUZZ_CHECK(why != NULL && *why);
        FUZZ_CHECK(f.nsends == 0 && f.nmembers == 0 && f.nmigrants == 0 && f.npids == 0); /* nothing kept */
        sn_frame_clear(&f);
        return 0;
    }
    FUZZ_CHECK(f.version == SN_WIRE_VERSION && f.kind != SN_FRAME_NONE);
    FUZZ_CHECK(f.kind == SN_FRAME_REQUEST || f.node != 0);
    /* the decoder's promises to the relay */
    for (size_t i = 0; i < f.nsends; i++) /* (its kind is one we know: the encoder below refuses others) */
        FUZZ_CHECK(f.sends[i].to.serial != 0);
    for (size_t i = 0; i < f.nmembers; i++) {
        FUZZ_CHECK(f.members[i].node != 0 && sn_wire_endpoint_ok(f.members[i].endpoint));
        FUZZ_CHECK(f.members[i].ntypes <= SN_WIRE_TYPES_MAX);
        FUZZ_CHECK(f.members[i].state >= SN_MEMBER_UP && f.members[i].state <= SN_MEMBER_LEFT);
    }
    if (f.kind == SN_FRAME_HELLO)
        FUZZ_CHECK(sn_wire_endpoint_ok(f.endpoint) && f.cluster);
    if (f.kind == SN_FRAME_ERROR || f.kind == SN_FRAME_LEAVE)
        FUZZ_CHECK(f.reason != NULL);
    for (size_t i = 0; i < f.npids; i++)
        FUZZ_CHECK(f.pids[i].serial != 0);
    for (size_t i = 0; i < f.nmigrants; i++)
        FUZZ_CHECK(f.migrants[i].pid.serial != 0 && f.migrants[i].state != NULL);

    void *buf = NULL;
    size_t len = 0;
    if (encode(&f, &buf, &len)) {
        sn_frame_t g;
        const char *why2 = NULL;
        rc = sn_codec_decode(buf, len, 0, &g, &why2);
        if (rc != 0)
            fprintf(stderr, "re-decoding a %s frame failed: %s\n", sn_frame_kind_name(f.kind), why2);
        FUZZ_CHECK(rc == 0);
        FUZZ_CHECK(same(&f, &g));
        sn_frame_clear(&g);
        free(buf);
    }
    sn_frame_clear(&f);
    sn_frame_clear(&f); /* safe twice */
    return 0;
}

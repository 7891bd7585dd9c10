/* test_codec.c - the wire codec: a batch of sends survives a round trip
 * in order; hostile frames (garbage, truncated, oversize, wrong version, no
 * body, no sender, ragged send columns, payload sizes that disagree with
 * the data, an unknown send kind) are refused with a reason and
 * never crash or leak; decoding costs at most a small constant times the
 * frame's size (decode_cost_is_bounded).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/resource.h>

#include <cmocka.h>

#include "codec.h"

static void roundtrip_batch_in_order(void **st)
{
    (void)st;
    enum { N = 1000 };
    sn_wire_send_t *in = calloc(N, sizeof *in);
    for (int i = 0; i < N; i++) {
        /* mostly PIDs of node 2; every fifth one of node 3 (a process that moved) */
        in[i] = (sn_wire_send_t){{i % 5 ? 2 : 3, 100 + (uint64_t)i},
                                 {1, 7},
                                 (uint64_t)i * 3,
                                 SN_EV_MESSAGE,
                                 0,
                                 NULL,
                                 (uint32_t)(i % 3),
                                 0,
                                 0,
                                 0};
        /* send ids: mostly consecutive ones of node 1, some of node 3 (far
         * below: a negative delta), one near the top (a delta that wraps) */
        in[i].id = i % 5 ? (UINT64_C(1) << 48) + 1000 + (uint64_t)i : (UINT64_C(3) << 48) + (uint64_t)i;
        if (i == 500)
            in[i].id = UINT64_MAX - 3;
        if (i % 3 == 0)
            in[i].payload = sn_payload_printf(SN_CT_TEXT, "message %d", i);
        if (i % 7 == 0) {
            in[i].kind = SN_EV_YIELD_COMPLETE;
            in[i].error = SN_ENOPROC;
        }
        if (i % 11 == 0)
            in[i].kind = SN_EV_CANCEL;
    }
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(sn_codec_encode_sends(1, 42, 7, in, N, &buf, &len), 0);
    sn_frame_t f;
    const char *why = NULL;
    assert_int_equal(sn_codec_decode(buf, len, 0, &f, &why), 0);
    assert_int_equal(f.kind, SN_FRAME_SENDS);
    assert_int_equal(f.version, SN_WIRE_VERSION);
    assert_int_equal(f.node, 1);
    assert_int_equal(f.incarnation, 42);
    assert_int_equal(f.seq, 7);
    assert_int_equal(f.nsends, N);
    for (int i = 0; i < N; i++) {
        sn_wire_send_t *a = &in[i], *b = &f.sends[i];
        assert_true(sn_pid_eq(a->to, b->to));
        assert_true(sn_pid_eq(a->from, b->from));
        assert_int_equal(a->tag, b->tag);
        assert_int_equal(a->kind, b->kind);
        assert_int_equal(a->error, b->error);
        assert_int_equal(a->hops, b->hops);
        assert_true(a->id == b->id);
        if (a->payload) {
            assert_non_null(b->payload);
            assert_int_equal(a->payload->ctype, b->payload->ctype);
            assert_int_equal(a->payload->len, b->payload->len);
            assert_memory_equal(a->payload->data, b->payload->data, a->payload->len);
        } else {
            assert_null(b->payload);
        }
    }
    sn_frame_clear(&f);
    sn_frame_clear(&f); /* safe twice */
    for (int i = 0; i < N; i++)
        sn_payload_destroy(&in[i].payload);
    free(in);
    free(buf);
}

static uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Delivery timing (metrics): a timed send carries 1 + the microseconds it
 * waited before encoding, the batch the sender's realtime clock; an
 * untimed one carries 0, and a batch of untimed ones no clock at all. */
static void timing_rides_with_the_batch(void **st)
{
    (void)st;
    uint64_t before_us = clock_ns(CLOCK_REALTIME) / 1000u;
    sn_wire_send_t two[2] = {
        {.to = {2, 5}, .from = {1, 9}, .kind = SN_EV_MESSAGE, .handed_ns = clock_ns(CLOCK_MONOTONIC) - 5000000u},
        {.to = {2, 6}, .from = {1, 9}, .kind = SN_EV_MESSAGE}};
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_sends(1, 1, 1, two, 2, &buf, &len), 0);
    sn_frame_t f;
    const char *why = NULL;
    assert_int_equal(sn_codec_decode(buf, len, SN_WIRE_MAX_FRAME, &f, &why), 0);
    assert_true(f.sent_us >= before_us && f.sent_us <= clock_ns(CLOCK_REALTIME) / 1000u);
    assert_true(f.sends[0].waited_us >= 5001 && f.sends[0].waited_us < 5001 + 1000000);
    assert_int_equal(f.sends[1].waited_us, 0);
    sn_frame_clear(&f);
    free(buf);
    two[0].handed_ns = 0;
    assert_int_equal(sn_codec_encode_sends(1, 1, 1, two, 2, &buf, &len), 0);
    assert_int_equal(sn_codec_decode(buf, len, SN_WIRE_MAX_FRAME, &f, &why), 0);
    assert_true(f.sent_us == 0 && f.sends[0].waited_us == 0);
    sn_frame_clear(&f);
    free(buf);
}

/* A status reply carries the rows and the answering node's flows (its
 * traffic with each peer: the dashboard's picture). */
static void status_reply_carries_flows(void **st)
{
    (void)st;
    sn_wire_stats_t rows[2] = {{.node = 1, .live = 3, .endpoint = "tcp://127.0.0.1:7001"},
                               {.node = 2, .live = 5, .endpoint = "tcp://127.0.0.1:7002"}};
    sn_wire_flow_t flows[2] = {{2, 10, 20, 1, 2}, {3, UINT64_MAX, 0, 0, 7}};
    sn_wire_reply_t rep = {.id = 9, .rows = rows, .nrows = 2, .flows = flows, .nflows = 2};
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_reply(1, 1, &rep, &buf, &len), 0);
    sn_frame_t f;
    const char *why = NULL;
    assert_int_equal(sn_codec_decode(buf, len, SN_WIRE_MAX_FRAME, &f, &why), 0);
    assert_int_equal(f.kind, SN_FRAME_REPLY);
    assert_int_equal(f.reply.nrows, 2);
    assert_true(f.reply.rows[1].live == 5);
    assert_int_equal(f.reply.nflows, 2);
    for (int i = 0; i < 2; i++) {
        const sn_wire_flow_t *a = &flows[i], *b = &f.reply.flows[i];
        assert_true(a->peer == b->peer && a->msgs_in == b->msgs_in && a->msgs_out == b->msgs_out &&
                    a->steals_in == b->steals_in && a->steals_out == b->steals_out);
    }
    sn_frame_clear(&f);
    free(buf);
}

static void encode_refuses_nonsense(void **st)
{
    (void)st;
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(sn_codec_encode_sends(1, 1, 0, NULL, 0, &buf, &len), SN_EINVAL);
    /* an empty batch only numbered (a sender's probe for a gap: relay/peer.c) */
    assert_int_equal(sn_codec_encode_sends(1, 1, 7, NULL, 0, &buf, &len), 0);
    sn_frame_t f;
    assert_int_equal(sn_codec_decode(buf, len, 0, &f, NULL), 0);
    assert_int_equal(f.kind, SN_FRAME_SENDS);
    assert_int_equal(f.seq, 7);
    assert_int_equal(f.nsends, 0);
    sn_frame_clear(&f);
    free(buf);
    buf = NULL;
    sn_wire_send_t bad = {{2, 1}, {1, 1}, 0, 99, 0, NULL, 0, 0, 0, 0};
    assert_int_equal(sn_codec_encode_sends(1, 1, 1, &bad, 1, &buf, &len), SN_EINVAL);
    assert_null(buf);
}

static void expect_refused(const void *buf, size_t len, size_t max, const char *reason);

/* A Part of a big batch and an Ack with a refusal say what was encoded;
 * a Part whose bytes do not fit where it says, or an Ack refusing
 * backwards or without an error, are refused. */
static void parts_and_refusals(void **st)
{
    (void)st;
    unsigned char data[100];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)i;
    void *buf;
    size_t len;
    sn_frame_t f;
    assert_int_equal(sn_codec_encode_part(3, 9, 42, 1000, 900, data, sizeof data, &buf, &len), 0);
    assert_int_equal(sn_codec_decode(buf, len, 0, &f, NULL), 0);
    assert_int_equal(f.kind, SN_FRAME_PART);
    assert_int_equal(f.seq, 42);
    assert_int_equal(f.part_total, 1000);
    assert_int_equal(f.part_offset, 900);
    assert_int_equal(f.part_len, sizeof data);
    assert_memory_equal(f.part, data, sizeof data);
    sn_frame_clear(&f);
    free(buf);
    assert_int_equal(sn_codec_encode_part(3, 9, 42, 1000, 901, data, sizeof data, &buf, &len), 0); /* past the end */
    expect_refused(buf, len, 0, "bad part");
    free(buf);
    assert_int_equal(sn_codec_encode_ack(3, 9, 10, 4, 6, SN_EDROPPED, &buf, &len), 0);
    assert_int_equal(sn_codec_decode(buf, len, 0, &f, NULL), 0);
    assert_int_equal(f.kind, SN_FRAME_ACK);
    assert_int_equal(f.seq, 10);
    assert_int_equal(f.refused_from, 4);
    assert_int_equal(f.refused_to, 6);
    assert_int_equal(f.refused_error, SN_EDROPPED);
    sn_frame_clear(&f);
    free(buf);
    assert_int_equal(sn_codec_encode_ack(3, 9, 10, 6, 4, SN_EDROPPED, &buf, &len), 0); /* backwards */
    expect_refused(buf, len, 0, "bad ack");
    free(buf);
    assert_int_equal(sn_codec_encode_ack(3, 9, 10, 4, 6, 0, &buf, &len), 0); /* no error */
    expect_refused(buf, len, 0, "bad ack");
    free(buf);
}

static void expect_refused(const void *buf, size_t len, size_t max, const char *reason)
{
    sn_frame_t f;
    const char *why = NULL;
    assert_int_equal(sn_codec_decode(buf, len, max, &f, &why), SN_EPROTO);
    assert_non_null(why);
    assert_string_equal(why, reason);
    assert_null(f.sends);
    assert_int_equal(f.nsends, 0);
}

static void hostile_frames_are_refused(void **st)
{
    (void)st;
    sn_payload_t *p = sn_payload_text("hello");
    sn_wire_send_t one = {{2, 5}, {1, 9}, 1, SN_EV_MESSAGE, 0, p, 0, 0, 0, 0};
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_sends(1, 1, 1, &one, 1, &buf, &len), 0);

    /* truncated at every length: refused or (rarely) a valid shorter
     * message; never a crash, never a leak */
    for (size_t cut = 0; cut < len; cut++) {
        sn_frame_t f;
        const char *why;
        int rc = sn_codec_decode(buf, cut, 0, &f, &why);
        assert_true(rc == 0 || rc == SN_EPROTO);
        sn_frame_clear(&f);
    }
    /* over the cap */
    expect_refused(buf, len, len - 1, "oversize");
    /* garbage */
    unsigned char junk[64];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(0xff - i * 7);
    expect_refused(junk, sizeof junk, 0, "undecodable");

    /* hand-made envelopes: field 1 = version, field 2 = node (varints) */
    const unsigned char wrong_version[] = {0x08, 0x07, 0x10, 0x01};
    expect_refused(wrong_version, sizeof wrong_version, 0, "unsupported version");
    const unsigned char no_body[] = {0x08, 0x01, 0x10, 0x01};
    expect_refused(no_body, sizeof no_body, 0, "no body");
    /* a heartbeat (field 13, empty) from node 0 */
    const unsigned char no_node[] = {0x08, 0x01, 0x6a, 0x00};
    expect_refused(no_node, sizeof no_node, 0, "no sender node");
    /* send batches (field 14) whose columns disagree: two targets
     * (field 4) but one sender node (field 5) */
    const unsigned char ragged[] = {0x08, 0x01, 0x10, 0x01, 0x72, 0x07, 0x22, 0x02, 0x05, 0x06, 0x2a, 0x01, 0x01};
    expect_refused(ragged, sizeof ragged, 0, "bad send");
    /* one complete send: to 5, from node 1 serial 9, tag 1, ctype 0, a
     * 2-byte payload (size column holds length + 1), then the data */
#define ONE_SEND(datalen, ...)                                                                                         \
    {                                                                                                                  \
        0x08, 0x01, 0x10, 0x01, 0x72, 0x14 + (datalen), 0x22, 0x01, 0x05, 0x2a, 0x01, 0x01, 0x32, 0x01, 0x09, 0x3a,    \
            0x01, 0x01, 0x52, 0x01, 0x00, 0x5a, 0x01, 0x03, 0x62, (datalen), __VA_ARGS__                               \
    }
    const unsigned char short_data[] = ONE_SEND(1, 'a');
    expect_refused(short_data, sizeof short_data, 0, "bad send");
    const unsigned char long_data[] = ONE_SEND(3, 'a', 'b', 'c');
    expect_refused(long_data, sizeof long_data, 0, "bad send");
    const unsigned char good[] = ONE_SEND(2, 'a', 'b');
    sn_frame_t g;
    assert_int_equal(sn_codec_decode(good, sizeof good, 0, &g, NULL), 0);
    assert_int_equal(g.nsends, 1);
    assert_true(sn_pid_eq(g.sends[0].from, (sn_pid_t){1, 9}));
    assert_int_equal(g.sends[0].payload->len, 2);
    assert_memory_equal(g.sends[0].payload->data, "ab", 2);
    sn_frame_clear(&g);
    /* the same send with an unknown kind (field 8: 30) */
    const unsigned char bad_kind[] = {0x08, 0x01, 0x10, 0x01, 0x72, 0x19, 0x22, 0x01, 0x05, 0x2a, 0x01,
                                      0x01, 0x32, 0x01, 0x09, 0x3a, 0x01, 0x01, 0x42, 0x01, 0x1e, 0x52,
                                      0x01, 0x00, 0x5a, 0x01, 0x03, 0x62, 0x02, 'a',  'b'};
    expect_refused(bad_kind, sizeof bad_kind, 0, "bad send");
#undef ONE_SEND
    /* an empty send batch */
    const unsigned char empty_batch[] = {0x08, 0x01, 0x10, 0x01, 0x72, 0x00};
    expect_refused(empty_batch, sizeof empty_batch, 0, "bad send");

    /* a well-formed heartbeat decodes, with its kind named */
    const unsigned char heartbeat[] = {0x08, 0x01, 0x10, 0x03, 0x6a, 0x00};
    sn_frame_t f;
    assert_int_equal(sn_codec_decode(heartbeat, sizeof heartbeat, 0, &f, NULL), 0);
    assert_int_equal(f.kind, SN_FRAME_HEARTBEAT);
    assert_int_equal(f.node, 3);
    assert_string_equal(sn_frame_kind_name(f.kind), "heartbeat");
    sn_frame_clear(&f);

    free(buf);
    sn_payload_destroy(&p);
}

/* Membership frames: a view survives a round trip; a member whose
 * endpoint is not an address (quotes, no tcp://) spoils the whole frame. */
static void members_roundtrip_and_bad_endpoints(void **st)
{
    (void)st;
    sn_wire_type_t types[2] = {{"tree", 1, 0}, {"psum", 3, 1}};
    sn_wire_member_t m[2] = {
        {.node = 1,
         .state = SN_MEMBER_UP,
         .incarnation = 11,
         .first_serial = 1000,
         .endpoint = "tcp://127.0.0.1:7001",
         .types = types,
         .ntypes = 2},
        {.node = 2, .state = SN_MEMBER_LEFT, .incarnation = 22, .first_serial = 2000, .endpoint = "tcp://[::1]:7002"}};
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_members(1, 11, 0, m, 2, &buf, &len), 0);
    sn_frame_t f;
    assert_int_equal(sn_codec_decode(buf, len, 0, &f, NULL), 0);
    assert_int_equal(f.kind, SN_FRAME_MEMBERS);
    assert_int_equal(f.nmembers, 2);
    assert_int_equal(f.members[1].node, 2);
    assert_int_equal(f.members[1].state, SN_MEMBER_LEFT);
    assert_int_equal(f.members[1].incarnation, 22);
    assert_int_equal(f.members[1].first_serial, 2000);
    assert_string_equal(f.members[1].endpoint, "tcp://[::1]:7002");
    assert_int_equal(f.members[0].ntypes, 2);
    assert_string_equal(f.members[0].types[1].name, "psum");
    assert_int_equal(f.members[0].types[1].version, 3);
    assert_true(f.members[0].types[1].migratable);
    assert_int_equal(f.members[1].ntypes, 0);
    sn_frame_clear(&f);
    free(buf);
    const char *bad_eps[] = {"tcp://a\"b:1", "udp://h:1", "tcp://h:1 x", ""};
    for (size_t i = 0; i < sizeof bad_eps / sizeof bad_eps[0]; i++) {
        snprintf(m[1].endpoint, sizeof m[1].endpoint, "%s", bad_eps[i]);
        assert_int_equal(sn_codec_encode_members(1, 11, 1, m, 2, &buf, &len), 0);
        expect_refused(buf, len, 0, "bad member list");
        free(buf);
    }
}

/* A migrant's await mode (none, the completion, a DOWN: SN_YIELD_MONITOR)
 * and whether it has had its first step survive the wire. */
static void roundtrip_migrant_await_modes(void **unused)
{
    (void)unused;
    sn_payload_t *state = sn_payload_text("state");
    sn_wire_migrant_t in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = (sn_wire_migrant_t){.pid = {1, 10 + (uint64_t)i},
                                    .parent = {1, 5},
                                    .awaited = i,
                                    .fresh = i == 2,
                                    .await_tag = 70 + (uint64_t)i,
                                    .await_node = i ? 3 : 0,
                                    .type_version = 1,
                                    .state = state,
                                    .moves = 1};
        snprintf(in[i].type, sizeof in[i].type, "mover");
    }
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(sn_codec_encode_steal_offer(1, 42, 9, in, 3, &buf, &len), 0);
    sn_frame_t f;
    assert_int_equal(sn_codec_decode(buf, len, 0, &f, NULL), 0);
    assert_int_equal(f.kind, SN_FRAME_STEAL_OFFER);
    assert_int_equal(f.nmigrants, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(f.migrants[i].awaited, i);
        assert_int_equal(f.migrants[i].fresh, i == 2);
        assert_int_equal(f.migrants[i].await_tag, 70 + (uint64_t)i);
        assert_int_equal(f.migrants[i].await_node, i ? 3 : 0); /* (the node keeping where it is) */
    }
    sn_frame_clear(&f);
    free(buf);
    sn_payload_destroy(&state);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* An envelope of node 3 whose Members body is `bytes` bytes of empty rows
 * (0a 00 each: what a hostile member sends). Caller frees. */
static uint8_t *empty_rows(size_t bytes, size_t *len)
{
    uint8_t *b = malloc(bytes + 16), *p = b;
    const uint8_t head[] = {0x08, 0x01, 0x10, 0x03, 0x18, 0x07, 0x62}; /* version 1, node 3, run 7, members: */
    memcpy(p, head, sizeof head);
    p += sizeof head;
    for (size_t n = bytes;; n >>= 7) { /* its length, a varint */
        *p++ = (uint8_t)(n & 0x7f) | (n >> 7 ? 0x80 : 0);
        if (!(n >> 7))
            break;
    }
    for (size_t i = 0; i < bytes; i += 2)
        p[i] = 0x0a, p[i + 1] = 0x00;
    *len = (size_t)(p - b) + bytes;
    return b;
}

static size_t budget(size_t len)
{
    return len * SN_WIRE_DECODE_RATIO + SN_WIRE_DECODE_SLACK;
}

/* n members as a real cluster gossips them: endpoints, keys (secure) or
 * none, process types or none; decoded whole, at a third of the budget
 * at most. */
static void big_list_passes(size_t n, bool secure, size_t ntypes)
{
    sn_wire_type_t types[3] = {{"tree", 1, 0}, {"psum", 3, 1}, {"worker", 2, 1}};
    sn_wire_member_t *m = calloc(n, sizeof *m);
    for (size_t i = 0; i < n; i++) {
        m[i] = (sn_wire_member_t){.node = (uint32_t)i + 1,
                                  .state = SN_MEMBER_UP,
                                  .incarnation = 1700000000000000000u + i,
                                  .first_serial = 1700000000000000u + i,
                                  .types = types,
                                  .ntypes = ntypes,
                                  .probe_port = 7000};
        snprintf(m[i].endpoint, sizeof m[i].endpoint, "tcp://n%zu:7000", i);
        if (secure)
            memset(m[i].public_key, 'k', 40);
    }
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_members(1, 11, 0, m, n, &buf, &len), 0);
    size_t cost = sn_codec_decode_cost(buf, len);
    printf("     %zu members (%s, %zu types each): %zu bytes, decoding costs %zu (%.1f x; budget %u x)\n", n,
           secure ? "keys" : "no keys", ntypes, len, cost, (double)cost / (double)len, SN_WIRE_DECODE_RATIO);
    assert_true(cost <= budget(len));
    sn_frame_t f;
    const char *why = NULL;
    assert_int_equal(sn_codec_decode(buf, len, len, &f, &why), 0);
    assert_int_equal(f.nmembers, n);
    assert_int_equal(f.members[n - 1].node, n);
    sn_frame_clear(&f);
    free(buf);
    free(m);
}

/* A status reply of n members held down (only their ids, short endpoints
 * and states), as a client decodes it: within the budget. */
static void status_of_a_big_cluster_passes(size_t n)
{
    sn_wire_stats_t *rows = calloc(n, sizeof *rows);
    for (size_t i = 0; i < n; i++) {
        rows[i] = (sn_wire_stats_t){.node = (uint32_t)i + 1, .state = SN_MEMBER_DOWN};
        snprintf(rows[i].endpoint, sizeof rows[i].endpoint, "tcp://n%zu:7000", i);
    }
    sn_wire_reply_t rep = {.id = 1, .rows = rows, .nrows = n};
    void *buf;
    size_t len;
    assert_int_equal(sn_codec_encode_reply(1, 9, &rep, &buf, &len), 0);
    size_t cost = sn_codec_decode_cost(buf, len);
    printf("     a status reply of %zu members held down: %zu bytes, decoding costs %zu (%.1f x)\n", n, len, cost,
           (double)cost / (double)len);
    assert_true(cost <= len * SN_WIRE_DECODE_RATIO);
    sn_frame_t f;
    assert_int_equal(sn_codec_decode(buf, len, len, &f, NULL), 0);
    assert_int_equal(f.reply.nrows, n);
    sn_frame_clear(&f);
    free(buf);
    free(rows);
}

/* A heartbeat carries SN_WIRE_UPDATES_MAX membership updates, no more. */
static void updates_are_bounded(void)
{
    sn_wire_member_t up[SN_WIRE_UPDATES_MAX + 1];
    for (size_t i = 0; i <= SN_WIRE_UPDATES_MAX; i++) {
        up[i] = (sn_wire_member_t){.node = (uint32_t)i + 2, .state = SN_MEMBER_SUSPECT, .incarnation = 5};
        snprintf(up[i].endpoint, sizeof up[i].endpoint, "tcp://127.0.0.1:%zu", 7000 + i);
    }
    void *buf;
    size_t len;
    sn_frame_t f;
    assert_int_equal(sn_codec_encode_probe(1, 9, NULL, NULL, "c", up, SN_WIRE_UPDATES_MAX, &buf, &len), 0);
    assert_int_equal(sn_codec_decode(buf, len, 0, &f, NULL), 0);
    assert_int_equal(f.nmembers, SN_WIRE_UPDATES_MAX);
    sn_frame_clear(&f);
    free(buf);
    assert_int_equal(sn_codec_encode_probe(1, 9, NULL, NULL, "c", up, SN_WIRE_UPDATES_MAX + 1, &buf, &len), 0);
    expect_refused(buf, len, 0, "a list longer than its kind carries");
    free(buf);
}

/* The n sends of in as one batch: decoded whole; returns its cost per
 * byte, printed as `what`. */
static double batch_passes(const sn_wire_send_t *in, size_t n, const char *what)
{
    void *buf;
    size_t len;
    sn_frame_t f;
    assert_int_equal(sn_codec_encode_sends(1, 9, 1, in, n, &buf, &len), 0);
    size_t cost = sn_codec_decode_cost(buf, len);
    printf("     %zu sends %s: %zu bytes, decoding costs %zu (%.1f x)\n", n, what, len, cost,
           (double)cost / (double)len);
    assert_true(cost <= len * SN_WIRE_DECODE_RATIO); /* (without the slack) */
    assert_int_equal(sn_codec_decode(buf, len, 0, &f, NULL), 0);
    assert_int_equal(f.nsends, n);
    sn_frame_clear(&f);
    free(buf);
    return (double)cost / (double)len;
}

/* Batches of sends: many without payloads between small PIDs; a node's
 * own at its densest, BATCH_MAX (4,096) sends of empty payloads (a block
 * each) between PIDs of real runs, whose serials start at the start time
 * in us x 1024 (8 bytes or more on the wire): within half the budget; and
 * the densest the schema allows, the same between PIDs of one byte. */
static void batches_of_sends_pass(void)
{
    enum { N = 100000 };
    sn_wire_send_t *in = calloc(N, sizeof *in);
    for (int i = 0; i < N; i++)
        in[i] = (sn_wire_send_t){.to = {2, 1 + (uint64_t)(i % 100)}, .from = {1, 1}, .kind = SN_EV_MESSAGE};
    batch_passes(in, N, "with no payload");
    for (int i = 0; i < 4096; i++) {
        in[i].to.serial += UINT64_C(1) << 60;
        in[i].from.serial = UINT64_C(1) << 60;
        in[i].payload = sn_payload_new(0, NULL, 0);
    }
    assert_true(batch_passes(in, 4096, "of empty payloads") * 2 <= SN_WIRE_DECODE_RATIO);
    for (int i = 0; i < 4096; i++) {
        in[i].to.serial = 1 + (uint64_t)(i % 100);
        in[i].from.serial = 1;
    }
    batch_passes(in, 4096, "of empty payloads between PIDs of one byte");
    for (int i = 0; i < 4096; i++)
        sn_payload_destroy(&in[i].payload);
    free(in);
}

/* Decoding costs at most SN_WIRE_DECODE_RATIO times a frame's size (plus
 * SN_WIRE_DECODE_SLACK): a member list of 16 MiB of empty rows (8.4
 * million) is refused before its rows are allocated, in milliseconds and
 * with no memory to speak of, 20 times over (longer than a list holds);
 * 256 KiB of them too (fewer rows, too dear for their bytes); a heartbeat carrying more
 * updates than its kind carries is refused by their count; real frames
 * (big member lists, a batch of many small sends, a node's densest batch)
 * pass within the budget. (That the costs counted bound what decoding
 * allocates was checked by counting malloc's blocks: 1.0 to 2.3 times
 * over, for each kind of frame here.) */
static void decode_cost_is_bounded(void **st)
{
    (void)st;
    size_t len;
    uint8_t *b = empty_rows((size_t)16 << 20, &len);
    long rss0 = max_rss_kb();
    double t0 = now_s();
    for (int i = 0; i < 20; i++)
        expect_refused(b, len, (size_t)32 << 20, "a list longer than its kind carries");
    double dt = now_s() - t0;
    long grew = max_rss_kb() - rss0;
    printf("     20 x 16 MiB of empty member rows: refused in %.1f ms each, peak RSS +%ld kB\n", dt * 1e3 / 20, grew);
    assert_true(dt < 5.0); /* (room for a sanitizer on a loaded machine; unpacking 20 takes seconds and GBs) */
    assert_true(grew < 16 * 1024);
    assert_true(sn_codec_decode_cost(b, len) > (size_t)256 * len); /* (each row: over 500 bytes unpacked) */
    free(b);
    b = empty_rows((size_t)256 << 10, &len); /* (131,072 rows: fewer than a list holds, too dear for their bytes) */
    expect_refused(b, len, 0, "costs more to decode than its size allows");
    free(b);
    b = empty_rows(512, &len); /* (within the slack: decoded, and refused for what the rows say) */
    expect_refused(b, len, 0, "bad member list");
    free(b);

    big_list_passes(20000, true, 3);
    big_list_passes(20000, false, 0);

    updates_are_bounded();
    batches_of_sends_pass();
    status_of_a_big_cluster_passes(20000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(roundtrip_batch_in_order),      cmocka_unit_test(encode_refuses_nonsense),
        cmocka_unit_test(timing_rides_with_the_batch),   cmocka_unit_test(status_reply_carries_flows),
        cmocka_unit_test(hostile_frames_are_refused),    cmocka_unit_test(members_roundtrip_and_bad_endpoints),
        cmocka_unit_test(roundtrip_migrant_await_modes), cmocka_unit_test(parts_and_refusals),
        cmocka_unit_test(decode_cost_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

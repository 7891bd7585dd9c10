/* seeds.c - writes the seed corpora of fuzz_codec and fuzz_relay: real
 * frames made by our own encoders (wire/codec.c), a few hostile ones built
 * byte by byte (what our encoders never make: ragged columns, sizes that
 * overflow, a version we do not speak), and for the relay, sequences that
 * walk each protocol (a join, gossip, a whole steal handover each way,
 * client requests, remote monitors, a restart).
 *
 *   build-fz-gcc/tests/fuzz/fuzz_seeds tests/fuzz/corpus
 *
 * rewrites tests/fuzz/corpus/codec and tests/fuzz/corpus/relay (the pid
 * and config corpora are plain text files, kept by hand). Run it again
 * after a wire change and commit what it writes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codec.h"
#include "relay_input.h"

static const char *root;

static void write_file(const char *sub, const char *name, const void *buf, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, sub);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s/%s", root, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* An encoder's return code: our own frames must encode. */
static void must(int rc)
{
    if (rc != 0) {
        fprintf(stderr, "seeds: an encoder failed: %s\n", sn_strerror(rc));
        exit(1);
    }
}

/* ---------------------------------------------------- frames by hand */

/* Just enough protobuf to write what our encoders refuse to. */
typedef struct pb {
    uint8_t b[2048];
    size_t n;
} pb_t;

static void varint(pb_t *p, uint64_t v)
{
    do {
        p->b[p->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static void field(pb_t *p, int num, uint64_t v) /* varint field */
{
    varint(p, (uint64_t)num << 3);
    varint(p, v);
}

static void bytes(pb_t *p, int num, const void *data, size_t len) /* length-delimited field */
{
    varint(p, (uint64_t)num << 3 | 2);
    varint(p, len);
    memcpy(p->b + p->n, data, len);
    p->n += len;
}

static void sub(pb_t *p, int num, const pb_t *m)
{
    bytes(p, num, m->b, m->n);
}

/* A packed repeated varint field of n values. */
static void packed(pb_t *p, int num, const uint64_t *v, size_t n)
{
    pb_t tmp = {.n = 0};
    for (size_t i = 0; i < n; i++)
        varint(&tmp, v[i]);
    sub(p, num, &tmp);
}

/* Envelope{version, node, incarnation, body field = m}. */
static pb_t envelope(uint32_t version, uint32_t node, int body, const pb_t *m)
{
    pb_t e = {.n = 0};
    field(&e, 1, version);
    field(&e, 2, node);
    field(&e, 3, 5);
    if (m)
        sub(&e, body, m);
    return e;
}

enum { ENV_HELLO = 10, ENV_WELCOME = 11, ENV_SENDS = 14, ENV_OFFER = 16, ENV_LOCATION = 19, ENV_REQUEST = 24 };

/* A SendBatch of n sends to node 1, with columns of the given lengths. */
static pb_t batch(size_t n_to, size_t n_from, const uint64_t *size, size_t n_size, const char *data)
{
    static const uint64_t serial[] = {1000, 1001, 1002}, node[] = {2, 2, 2}, zero[] = {0, 0, 0};
    pb_t b = {.n = 0};
    field(&b, 2, 1);       /* seq */
    field(&b, 3, FZ_SELF); /* to_node */
    packed(&b, 4, serial, n_to);
    packed(&b, 5, node, n_from);
    packed(&b, 6, serial, n_from);
    packed(&b, 7, zero, n_to);
    packed(&b, 10, zero, n_to);
    packed(&b, 11, size, n_size);
    if (data)
        bytes(&b, 12, data, strlen(data));
    return b;
}

static void hand_frames(void)
{
    static const uint64_t size1[] = {3}, size2[] = {3, 1}, huge[] = {0xffffffffu, 2};
    pb_t b, e;
    write_file("codec", "edge-empty", "", 0);
    write_file("codec", "edge-garbage", "\x0a\xff\xff\xff\xff\x0f\x12", 7);
    e = envelope(2, 2, 0, NULL);
    write_file("codec", "edge-version-2", e.b, e.n);
    e = envelope(1, 2, 0, NULL);
    write_file("codec", "edge-no-body", e.b, e.n);
    b = batch(1, 1, size1, 1, "hi");
    e = envelope(1, 0, ENV_SENDS, &b);
    write_file("codec", "edge-no-sender", e.b, e.n);
    b = batch(2, 1, size2, 2, "hi");
    e = envelope(1, 2, ENV_SENDS, &b);
    write_file("codec", "edge-ragged-columns", e.b, e.n);
    b = batch(2, 2, huge, 2, "x");
    e = envelope(1, 2, ENV_SENDS, &b);
    write_file("codec", "edge-size-overflow", e.b, e.n);
    b = batch(1, 1, size1, 1, "too long");
    e = envelope(1, 2, ENV_SENDS, &b);
    write_file("codec", "edge-size-vs-data", e.b, e.n);
    b = batch(1, 1, size1, 1, "hi");
    static const uint64_t kind99[] = {99};
    packed(&b, 8, kind99, 1);
    e = envelope(1, 2, ENV_SENDS, &b);
    write_file("codec", "edge-unknown-kind", e.b, e.n);
    /* a member with 65 types (the cap is 64) */
    pb_t mem = {.n = 0}, t = {.n = 0}, w = {.n = 0};
    field(&mem, 1, 4);
    bytes(&mem, 3, "tcp://h:1", 9);
    bytes(&t, 1, "t", 1);
    for (int i = 0; i < 65; i++)
        sub(&mem, 8, &t);
    sub(&w, 2, &mem);
    e = envelope(1, 2, ENV_WELCOME, &w);
    write_file("codec", "edge-too-many-types", e.b, e.n);
    pb_t h = {.n = 0};
    bytes(&h, 1, "tcp://a b:1", 11); /* a space: not an address */
    e = envelope(1, 4, ENV_HELLO, &h);
    write_file("codec", "edge-hello-bad-endpoint", e.b, e.n);
    pb_t mg = {.n = 0}, pid = {.n = 0}, off = {.n = 0};
    field(&pid, 1, 2);
    field(&pid, 2, 9);
    sub(&mg, 1, &pid);
    bytes(&mg, 2, FZ_TYPE, 2); /* no state */
    field(&off, 1, 1);
    sub(&off, 2, &mg);
    e = envelope(1, 2, ENV_OFFER, &off);
    write_file("codec", "edge-offer-no-state", e.b, e.n);
    pb_t loc = {.n = 0};
    sub(&loc, 1, &pid);
    field(&loc, 2, 3);
    e = envelope(1, 2, ENV_LOCATION, &loc);
    write_file("codec", "edge-location", e.b, e.n);
    pb_t rq = {.n = 0};
    field(&rq, 2, 9); /* op 9: none */
    e = envelope(1, 0, ENV_REQUEST, &rq);
    write_file("codec", "edge-request-bad-op", e.b, e.n);
}

/* ----------------------------------------------------- frames we send */

static sn_payload_t *text(const char *s)
{
    return sn_payload_text(s);
}

typedef struct frame {
    void *buf;
    size_t len;
} frame_t;

static frame_t sends(uint32_t from_node, uint64_t inc, uint64_t seq, const sn_wire_send_t *s, size_t n)
{
    frame_t f;
    must(sn_codec_encode_sends(from_node, inc, seq, s, n, &f.buf, &f.len));
    return f;
}

static frame_t hello(uint32_t node, uint64_t inc, const char *ep, const char *cluster, const char *key)
{
    frame_t f;
    must(sn_codec_encode_hello(node, inc, ep, cluster, 5000, key, 0, NULL, 0, &f.buf, &f.len));
    return f;
}

static sn_wire_type_t fz_v1 = {FZ_TYPE, 1, 1}, fz_types[] = {{FZ_TYPE, 1, 1}, {"pinned", 1, 0}};

static frame_t members(uint32_t from, uint64_t inc, int welcome, const sn_wire_member_t *m, size_t n)
{
    frame_t f;
    must(sn_codec_encode_members(from, inc, welcome, m, n, &f.buf, &f.len));
    return f;
}

static sn_wire_member_t member(uint32_t node, int state, uint64_t inc, sn_wire_type_t *types, size_t ntypes)
{
    sn_wire_member_t m = {
        .node = node, .state = state, .incarnation = inc, .first_serial = 100 * node, .types = types, .ntypes = ntypes};
    snprintf(m.endpoint, sizeof m.endpoint, "tcp://127.0.0.1:70%02u", (unsigned)node);
    return m;
}

static frame_t heartbeat(uint32_t node, uint64_t inc, uint64_t ready)
{
    sn_wire_stats_t st = {.node = node,
                          .workers = 2,
                          .idle_workers = 0,
                          .state = SN_MEMBER_UP,
                          .live = ready + 1,
                          .ready = ready,
                          .idle = 1,
                          .msgs_in = 10,
                          .msgs_out = 12,
                          .uptime_ms = 1234};
    snprintf(st.endpoint, sizeof st.endpoint, "tcp://127.0.0.1:70%02u", (unsigned)node);
    frame_t f;
    must(sn_codec_encode_heartbeat(node, inc, &st, "schednode", &f.buf, &f.len));
    return f;
}

static frame_t request(int op, const char *type, const char *method, sn_payload_t *arg, sn_pid_t to, uint64_t id)
{
    sn_wire_request_t q = {.id = id, .op = op, .type = (char *)type, .method = (char *)method, .arg = arg, .to = to};
    frame_t f;
    must(sn_codec_encode_request(&q, &f.buf, &f.len));
    sn_payload_destroy(&arg);
    return f;
}

static frame_t kill_request(sn_pid_t to, bool force, uint64_t id)
{
    sn_wire_request_t q = {.id = id, .op = SN_OP_KILL, .to = to, .reason = "fuzz", .force = force};
    frame_t f;
    must(sn_codec_encode_request(&q, &f.buf, &f.len));
    return f;
}

static frame_t steal_request(uint32_t node, uint64_t id, uint32_t max)
{
    frame_t f;
    must(sn_codec_encode_steal_request(node, 5, id, max, 0, &f.buf, &f.len));
    return f;
}

static frame_t steal_offer(uint32_t node, uint64_t id, const sn_pid_t *pids, const uint64_t *modes, size_t n)
{
    sn_wire_migrant_t m[8];
    for (size_t i = 0; i < n; i++) {
        m[i] = (sn_wire_migrant_t){.pid = pids[i], .type_version = 1, .state = sn_payload_u64(modes[i])};
        snprintf(m[i].type, sizeof m[i].type, "%s", FZ_TYPE);
    }
    frame_t f;
    must(sn_codec_encode_steal_offer(node, 5, id, m, n, &f.buf, &f.len));
    for (size_t i = 0; i < n; i++)
        sn_payload_destroy(&m[i].state);
    return f;
}

static frame_t steal_accept(uint32_t node, uint64_t id, const sn_pid_t *pids, size_t n)
{
    frame_t f;
    must(sn_codec_encode_steal_accept(node, 5, id, pids, n, &f.buf, &f.len));
    return f;
}

static frame_t steal_commit(uint32_t node, uint64_t id, const sn_pid_t *pids, size_t n, const sn_wire_send_t *fw,
                            size_t nfw)
{
    frame_t f;
    must(sn_codec_encode_steal_commit(node, 5, id, pids, n, fw, nfw, false, &f.buf, &f.len));
    return f;
}

/* ------------------------------------------------------ relay inputs */

typedef struct seq {
    uint8_t b[65536];
    size_t n;
} seq_t;

static void seq_start(seq_t *s, uint8_t setup)
{
    s->n = 0;
    s->b[s->n++] = setup;
}

static void seq_op(seq_t *s, uint8_t op)
{
    s->b[s->n++] = op;
}

/* Appends a frame record and frees the frame. */
static void seq_frame(seq_t *s, uint8_t op, frame_t f)
{
    if (s->n + 3 + f.len > sizeof s->b || f.len > 0xffff) {
        fprintf(stderr, "seeds: a relay input is too long\n");
        exit(1);
    }
    s->b[s->n++] = op;
    s->b[s->n++] = (uint8_t)(f.len & 0xff);
    s->b[s->n++] = (uint8_t)(f.len >> 8);
    memcpy(s->b + s->n, f.buf, f.len);
    s->n += f.len;
    free(f.buf);
}

static void seq_write(const seq_t *s, const char *name)
{
    write_file("relay", name, s->b, s->n);
}

/* A record's op: what, and its argument. */
#define OP(what, arg) ((uint8_t)((what) | (arg) << 3))

/* The membership frames: heartbeats, Hellos, a Welcome and gossip, a
 * refusal, a Leave, an ack. */
static void codec_member_seeds(void)
{
    frame_t f = heartbeat(2, 5, 7);
    write_file("codec", "heartbeat-stats", f.buf, f.len);
    free(f.buf);
    must(sn_codec_encode_heartbeat(2, 5, NULL, "schednode", &f.buf, &f.len));
    write_file("codec", "heartbeat-bare", f.buf, f.len);
    free(f.buf);
    f = hello(4, 1, "tcp://127.0.0.1:7004", "schednode", "");
    write_file("codec", "hello", f.buf, f.len);
    free(f.buf);
    f = hello(4, 1, "tcp://[::1]:7004", "prod", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");
    write_file("codec", "hello-secure", f.buf, f.len);
    free(f.buf);
    sn_wire_member_t view[] = {member(1, SN_MEMBER_UP, 7, fz_types, 2), member(2, SN_MEMBER_UP, 5, &fz_v1, 1),
                               member(3, SN_MEMBER_SUSPECT, 5, NULL, 0), member(4, SN_MEMBER_DOWN, 2, NULL, 0),
                               member(5, SN_MEMBER_LEFT, 9, NULL, 0)};
    f = members(2, 5, 1, view, 3);
    write_file("codec", "welcome", f.buf, f.len);
    free(f.buf);
    f = members(2, 5, 0, view, 5);
    write_file("codec", "members", f.buf, f.len);
    free(f.buf);
    must(sn_codec_encode_refusal(2, 5, SN_EREFUSED, "another cluster", &f.buf, &f.len));
    write_file("codec", "refusal", f.buf, f.len);
    free(f.buf);
    must(sn_codec_encode_leave(2, 5, "shutdown", &f.buf, &f.len));
    write_file("codec", "leave", f.buf, f.len);
    free(f.buf);
    must(sn_codec_encode_ack(2, 5, 17, 0, 0, 0, &f.buf, &f.len));
    write_file("codec", "ack", f.buf, f.len);
    free(f.buf);
    must(sn_codec_encode_ack(2, 5, 17, 12, 14, SN_EDROPPED, &f.buf, &f.len));
    write_file("codec", "ack-refused", f.buf, f.len);
    free(f.buf);
    must(sn_codec_encode_part(2, 5, 18, 4096, 1024, "a slice of a big batch", 22, &f.buf, &f.len));
    write_file("codec", "part", f.buf, f.len);
    free(f.buf);
}

/* Replies to ps (rows, counts), types, kill (noproc, moved, ended) and a
 * call's first answer (started). */
static void codec_manage_seeds(void)
{
    frame_t f;
    sn_proc_row_t procs[2] = {{.pid = {1, 1000}, .type = "counter", .state = SN_PS_IDLE, .mailbox = 3, .steps = 7},
                              {.pid = {2, 5}, .type = "x", .state = SN_PS_MOVING, .moves = 2}};
    sn_wire_reply_t rep = {.id = 4, .reason = "", .procs = procs, .nprocs = 2, .total = 5, .node = 1};
    rep.by_state[SN_PS_IDLE] = 4;
    rep.by_state[SN_PS_MOVING] = 1;
    must(sn_codec_encode_reply(1, 7, &rep, &f.buf, &f.len));
    write_file("codec", "reply-ps", f.buf, f.len);
    free(f.buf);
    sn_wire_type_t types[2] = {{"counter", 1, 0}, {"spin", 3, 1}};
    rep = (sn_wire_reply_t){.id = 6, .reason = "", .types = types, .ntypes = 2, .node = 2};
    must(sn_codec_encode_reply(2, 7, &rep, &f.buf, &f.len));
    write_file("codec", "reply-types", f.buf, f.len);
    free(f.buf);
    rep = (sn_wire_reply_t){.id = 5, .error = SN_ENOPROC, .reason = "noproc", .node = 1, .moved_to = 3};
    must(sn_codec_encode_reply(1, 7, &rep, &f.buf, &f.len));
    write_file("codec", "reply-kill-moved", f.buf, f.len);
    free(f.buf);
    rep = (sn_wire_reply_t){
        .id = 5, .error = SN_ENOPROC, .reason = "", .ended = 1, .end_error = SN_EKILLED, .result = text("bye")};
    must(sn_codec_encode_reply(1, 7, &rep, &f.buf, &f.len));
    write_file("codec", "reply-ps-ended", f.buf, f.len);
    free(f.buf);
    sn_payload_destroy(&rep.result);
    rep = (sn_wire_reply_t){.id = 2, .reason = "", .pid = {1, 1000}, .started = 1};
    must(sn_codec_encode_reply(1, 7, &rep, &f.buf, &f.len));
    write_file("codec", "reply-call-started", f.buf, f.len);
    free(f.buf);
}

/* The client's frames: requests, and the replies to a status and a call. */
static void codec_client_seeds(void)
{
    frame_t f = request(SN_OP_STATUS, NULL, NULL, NULL, SN_PID_NONE, 1);
    write_file("codec", "request-status", f.buf, f.len);
    free(f.buf);
    f = request(SN_OP_CALL, FZ_TYPE, "run", text("arg"), SN_PID_NONE, 2);
    write_file("codec", "request-call", f.buf, f.len);
    free(f.buf);
    f = request(SN_OP_SEND, NULL, NULL, text("stop"), (sn_pid_t){1, 1000}, 3);
    write_file("codec", "request-send", f.buf, f.len);
    free(f.buf);
    f = request(SN_OP_PS, NULL, NULL, NULL, SN_PID_NONE, 4);
    write_file("codec", "request-ps", f.buf, f.len);
    free(f.buf);
    f = kill_request((sn_pid_t){1, 1000}, true, 5);
    write_file("codec", "request-kill", f.buf, f.len);
    free(f.buf);
    codec_manage_seeds();
    sn_wire_stats_t rows[2] = {{.node = 1, .workers = 2, .ready = 3}, {.node = 2, .state = SN_MEMBER_DOWN}};
    snprintf(rows[0].endpoint, sizeof rows[0].endpoint, "tcp://127.0.0.1:7001");
    sn_wire_reply_t rep = {.id = 1, .reason = "", .rows = rows, .nrows = 2};
    must(sn_codec_encode_reply(1, 7, &rep, &f.buf, &f.len));
    write_file("codec", "reply-status", f.buf, f.len);
    free(f.buf);
    rep = (sn_wire_reply_t){
        .id = 2, .error = SN_EFAILED, .reason = "asked to fail", .pid = {1, 1000}, .result = text("why")};
    must(sn_codec_encode_reply(1, 7, &rep, &f.buf, &f.len));
    sn_payload_destroy(&rep.result);
    write_file("codec", "reply-call", f.buf, f.len);
    free(f.buf);
}

/* A steal handover's frames: request, offer, accept, a commit forwarding
 * the first three of fw, and an abort (an empty commit). */
static void codec_steal_seeds(const sn_wire_send_t *fw)
{
    frame_t f = steal_request(2, 1, 64);
    write_file("codec", "steal-request", f.buf, f.len);
    free(f.buf);
    static const sn_pid_t moved[] = {{2, 200}, {2, 201}};
    static const uint64_t busy[] = {2, 0};
    f = steal_offer(2, 1, moved, busy, 2);
    write_file("codec", "steal-offer", f.buf, f.len);
    free(f.buf);
    f = steal_accept(2, 1, moved, 2);
    write_file("codec", "steal-accept", f.buf, f.len);
    free(f.buf);
    f = steal_commit(2, 1, moved, 2, fw, 3);
    write_file("codec", "steal-commit", f.buf, f.len);
    free(f.buf);
    f = steal_commit(2, 1, NULL, 0, NULL, 0);
    write_file("codec", "steal-abort", f.buf, f.len);
    free(f.buf);
}

static void codec_seeds(void)
{
    sn_wire_send_t one = {{FZ_SELF, 1000}, {2, 5}, 0, SN_EV_MESSAGE, 0, text("hello"), 0, 0, 0, 0};
    frame_t f = sends(2, 5, 1, &one, 1);
    write_file("codec", "sends-one", f.buf, f.len);
    free(f.buf);
    sn_wire_send_t mixed[] = {
        {{1, 1000}, {2, 5}, 1, SN_EV_MESSAGE, 0, sn_payload_u64(42), 0, 0, 0, 0},
        {{1, 1001}, {2, 6}, 2, SN_EV_YIELD_COMPLETE, SN_ENOPROC, text("back"), 0, 0, 0, 0},
        {{1, 1002}, {0, 0}, 3, SN_EV_CANCEL, 0, NULL, 0, 0, 0, 0},
        {{3, 300}, {2, 7}, 4, SN_EV_DOWN, SN_ENODEDOWN, NULL, 0, 0, 0, 0},
        {{1, 1000}, {2, 8}, 5, SN_RELAY_MONITOR, 0, NULL, 0, 0, 0, 0},
        {{1, 1000}, {2, 8}, 5, SN_RELAY_DEMONITOR, 0, NULL, 0, 0, 0, 0},
        {{1, 1003}, {2, 9}, 6, SN_RELAY_RESULT, 0, sn_payload_pid((sn_pid_t){2, 9}), 0, 0, 0, 0},
    };
    size_t nmixed = sizeof mixed / sizeof mixed[0];
    f = sends(2, 5, 2, mixed, nmixed);
    write_file("codec", "sends-mixed", f.buf, f.len);
    write_file("codec", "edge-sends-truncated", f.buf, f.len / 2);
    free(f.buf);
    codec_member_seeds();
    codec_client_seeds();
    codec_steal_seeds(mixed);
    for (size_t i = 0; i < nmixed; i++)
        sn_payload_destroy(&mixed[i].payload);
    sn_payload_destroy(&one.payload);
    /* an oversize frame: fuzz_codec caps the size one below the input's when
     * the first byte is 0xff */
    write_file("codec", "edge-oversize", "\xff\x08\x01", 3);
}

/* Most relay inputs start as a member with stealing on. */
#define JOINED ((uint8_t)(FZ_SETUP_JOINED | FZ_SETUP_STEAL))

/* Joins: a node joins through us, with the refusals; we join (the seed's
 * Welcome, then its gossip); we are refused. */
static void join_seeds(seq_t *s)
{
    /* a new node joins through us; refusals: another cluster, our own id,
     * an id a live member holds, an earlier run */
    seq_start(s, JOINED);
    seq_frame(s, OP(FZ_ROUTER, 0), hello(4, 1, "tcp://127.0.0.1:7004", "schednode", ""));
    seq_frame(s, OP(FZ_ROUTER, 1), hello(5, 1, "tcp://127.0.0.1:7005", "other", ""));
    seq_frame(s, OP(FZ_ROUTER, 1), hello(FZ_SELF, 1, "tcp://127.0.0.1:7009", "schednode", ""));
    seq_frame(s, OP(FZ_ROUTER, 1), hello(FZ_PARTNER, 9, "tcp://127.0.0.1:7019", "schednode", ""));
    seq_frame(s, OP(FZ_ROUTER, 1), hello(FZ_PARTNER, 1, "tcp://127.0.0.1:7002", "schednode", ""));
    seq_frame(s, OP(FZ_PEER, 0), hello(4, 1, "tcp://127.0.0.1:7004", "schednode", ""));
    seq_op(s, FZ_MEMBERS_TICK);
    seq_write(s, "join-hello");

    /* we join: the seed's Welcome, then its gossip; a refusal after it */
    seq_start(s, FZ_SETUP_STEAL);
    sn_wire_member_t view[] = {member(2, SN_MEMBER_UP, 5, &fz_v1, 1), member(FZ_SELF, SN_MEMBER_UP, 7, NULL, 0),
                               member(3, SN_MEMBER_UP, 5, NULL, 0), member(6, SN_MEMBER_UP, 1, fz_types, 2),
                               member(7, SN_MEMBER_LEFT, 1, NULL, 0)};
    seq_frame(s, OP(FZ_SEED, 0), members(2, 5, 1, view, 5));
    seq_frame(s, OP(FZ_SEED, 0), members(2, 5, 1, view, 2));
    seq_frame(s, OP(FZ_PEER, 0), members(2, 5, 0, view, 5));
    seq_op(s, FZ_MEMBERS_TICK);
    seq_write(s, "join-welcome");

    seq_start(s, 0);
    frame_t f;
    must(sn_codec_encode_refusal(2, 5, SN_EREFUSED, "node id 1 is taken", &f.buf, &f.len));
    seq_frame(s, OP(FZ_SEED, 0), f);
    must(sn_codec_encode_refusal(2, 5, SN_EREFUSED, "out of a join", &f.buf, &f.len));
    seq_frame(s, OP(FZ_PEER, 0), f);
    seq_frame(s, OP(FZ_PEER, 0), members(9, 1, 1, view, 1)); /* a Welcome not from a seed */
    seq_write(s, "join-refused");
}

/* gossip: a new member, one left, one restarted, one down; then a Leave */
static void gossip_seeds(seq_t *s)
{
    seq_start(s, JOINED);
    sn_wire_member_t gossip[] = {member(6, SN_MEMBER_UP, 1, fz_types, 2), member(3, SN_MEMBER_LEFT, 5, NULL, 0),
                                 member(2, SN_MEMBER_UP, 6, &fz_v1, 1), member(8, SN_MEMBER_DOWN, 1, NULL, 0)};
    seq_frame(s, OP(FZ_PEER, 0), members(2, 5, 0, gossip, 4));
    seq_frame(s, OP(FZ_PEER, 0), members(9, 1, 0, gossip, 1)); /* from a stranger */
    frame_t f;
    must(sn_codec_encode_leave(6, 1, "shutdown", &f.buf, &f.len));
    seq_frame(s, OP(FZ_ROUTER, 0), f);
    must(sn_codec_encode_leave(9, 1, "who?", &f.buf, &f.len));
    seq_frame(s, OP(FZ_ROUTER, 0), f);
    seq_op(s, FZ_MEMBERS_TICK);
    seq_write(s, "gossip-leave");
}

/* sends of every kind for processes here (none live: they bounce to
 * node 2), numbered, then its ack; a frame of an earlier run */
static void send_seeds(seq_t *s)
{
    const sn_pid_t none = SN_PID_NONE;
    seq_start(s, JOINED);
    sn_wire_send_t in[] = {
        {{1, 1000}, {2, 205}, 1, SN_EV_MESSAGE, 0, text("hi"), 0, 0, 0, 0},
        {{1, 1001}, {2, 206}, 2, SN_EV_YIELD_COMPLETE, SN_ENOPROC, text("back"), 0, 0, 0, 0},
        {{1, 1002}, none, 3, SN_EV_CANCEL, 0, NULL, 0, 0, 0, 0},
        {{1, 1003}, {2, 207}, 4, SN_EV_DOWN, SN_ENODEDOWN, NULL, 0, 0, 0, 0},
        {{1, 1004}, {2, 208}, 5, SN_RELAY_MONITOR, 0, NULL, 0, 0, 0, 0},
        {{1, 1004}, {2, 208}, 5, SN_RELAY_DEMONITOR, 0, NULL, 0, 0, 0, 0},
        {{1, 1005}, {2, 209}, 6, SN_RELAY_RESULT, 0, text("result"), 0, 0, 0, 0},
        {{3, 300}, {2, 210}, 7, SN_EV_YIELD_COMPLETE, SN_ENOPROC, text("for 3"), 0, 0, 0, 0},
    };
    size_t nin = sizeof in / sizeof in[0];
    seq_frame(s, OP(FZ_ROUTER, 0), sends(2, 5, 1, in, nin));
    seq_frame(s, OP(FZ_ROUTER, 0), sends(2, 5, 2, in, 1));
    seq_frame(s, OP(FZ_ROUTER, 0), sends(2, 4, 3, in, 1)); /* an earlier run */
    frame_t f;
    must(sn_codec_encode_ack(2, 5, 1, 0, 0, 0, &f.buf, &f.len));
    seq_frame(s, OP(FZ_PEER, 0), f);
    seq_op(s, OP(FZ_PEER_GONE, 0));
    seq_frame(s, OP(FZ_ROUTER, 0), sends(2, 6, 1, in, 2)); /* back, a new run */
    seq_write(s, "sends");
    for (size_t i = 0; i < nin; i++)
        sn_payload_destroy(&in[i].payload);
}

/* client requests, then sends for the processes they made (serials
 * from 1000: the scheduler's first) */
static void client_seeds(seq_t *s)
{
    const sn_pid_t none = SN_PID_NONE;
    seq_start(s, JOINED);
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_STATUS, NULL, NULL, NULL, none, 1));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_SPAWN, FZ_TYPE, "idle", NULL, none, 2));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_SPAWN, FZ_TYPE, "nope", NULL, none, 3));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_SPAWN, "missing", "run", NULL, none, 4));
    seq_frame(s, OP(FZ_ROUTER, 2), request(SN_OP_CALL, FZ_TYPE, "run", text("x"), none, 5));
    seq_frame(s, OP(FZ_ROUTER, 2), request(SN_OP_CALL, FZ_TYPE, "fail", NULL, none, 6));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_SEND, NULL, NULL, text("hi"), (sn_pid_t){1, 1000}, 7));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_SEND, NULL, NULL, text("x"), (sn_pid_t){2, 5}, 8));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_PS, NULL, NULL, NULL, none, 10));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_PS, NULL, NULL, NULL, (sn_pid_t){1, 1000}, 11));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_TYPES, NULL, NULL, NULL, none, 12));
    seq_frame(s, OP(FZ_ROUTER, 3), kill_request((sn_pid_t){1, 1000}, false, 13));
    seq_frame(s, OP(FZ_ROUTER, 3), kill_request((sn_pid_t){1, 1001}, true, 14));
    seq_frame(s, OP(FZ_ROUTER, 3), kill_request((sn_pid_t){1, 99}, true, 15));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_PS, NULL, NULL, NULL, (sn_pid_t){1, 1001}, 16));
    seq_frame(s, OP(FZ_PEER, 0), request(SN_OP_STATUS, NULL, NULL, NULL, none, 9)); /* not on the ROUTER */
    sn_wire_send_t mon[] = {
        {{1, 1000}, {2, 220}, 9, SN_RELAY_MONITOR, 0, NULL, 0, 0, 0, 0},
        {{1, 1000}, {2, 220}, 9, SN_EV_MESSAGE, 0, text("hi"), 0, 0, 0, 0},
        {{1, 1000}, {2, 221}, 10, SN_RELAY_MONITOR, 0, NULL, 0, 0, 0, 0},
        {{1, 1000}, {2, 221}, 10, SN_RELAY_DEMONITOR, 0, NULL, 0, 0, 0, 0},
        {{1, 1000}, {2, 220}, 11, SN_EV_MESSAGE, 0, text("stop"), 0, 0, 0, 0},
    };
    seq_frame(s, OP(FZ_ROUTER, 0), sends(2, 5, 1, mon, sizeof mon / sizeof mon[0]));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_STATUS, NULL, NULL, NULL, none, 10));
    seq_write(s, "client");
    for (size_t i = 0; i < sizeof mon / sizeof mon[0]; i++)
        sn_payload_destroy(&mon[i].payload);
}

/* The steals we make: a whole handover, the smallest one, an aborted one. */
static void steal_thief_seeds(seq_t *s)
{
    const sn_pid_t none = SN_PID_NONE;
    /* we steal: node 2 says it is loaded, our tick asks it (id 1), it
     * offers two processes (and one we cannot take: another type
     * version's state), we accept, it commits with their queued events */
    seq_start(s, JOINED);
    seq_frame(s, OP(FZ_ROUTER, 0), heartbeat(2, 5, 8));
    seq_op(s, FZ_STEAL_TICK);
    static const sn_pid_t got[] = {{2, 230}, {2, 231}, {2, 232}};
    static const uint64_t got_modes[] = {FZ_MODE_IDLE, FZ_MODE_BUSY, 99};
    seq_frame(s, OP(FZ_PEER, 0), steal_offer(2, 1, got, got_modes, 3));
    sn_wire_send_t queued[] = {{{2, 230}, {3, 300}, 1, SN_EV_MESSAGE, 0, text("queued"), 0, 0, 0, 0},
                               {{2, 231}, none, 2, SN_EV_CANCEL, 0, NULL, 0, 0, 0, 0}};
    seq_frame(s, OP(FZ_PEER, 0), steal_commit(2, 1, got, 2, queued, 2));
    seq_frame(s, OP(FZ_ROUTER, 0), sends(2, 5, 1, queued, 1)); /* forwarded after the commit */
    seq_write(s, "steal-thief");
    for (size_t i = 0; i < 2; i++)
        sn_payload_destroy(&queued[i].payload);

    /* the smallest migration in: one idle process, which the shutdown's
     * CANCEL must reach (it did not: sn_cancel skipped the local table for
     * a PID of another node, so the shutdown waited its whole timeout) */
    seq_start(s, JOINED);
    seq_frame(s, OP(FZ_ROUTER, 0), heartbeat(2, 5, 8));
    seq_op(s, FZ_STEAL_TICK);
    seq_frame(s, OP(FZ_PEER, 0), steal_offer(2, 1, got, got_modes, 1));
    seq_frame(s, OP(FZ_PEER, 0), steal_commit(2, 1, got, 1, NULL, 0));
    seq_write(s, "regress-cancel-migrated-in");

    /* the same, aborted by the victim; and an offer nobody asked for */
    seq_start(s, JOINED);
    seq_frame(s, OP(FZ_ROUTER, 0), heartbeat(2, 5, 8));
    seq_op(s, FZ_STEAL_TICK);
    seq_frame(s, OP(FZ_PEER, 0), steal_offer(2, 1, got, got_modes, 2));
    seq_frame(s, OP(FZ_PEER, 0), steal_commit(2, 1, NULL, 0, NULL, 0));
    seq_frame(s, OP(FZ_PEER, 0), steal_offer(2, 9, got, got_modes, 1));
    seq_frame(s, OP(FZ_PEER, 0), steal_offer(3, 1, got, got_modes, 1)); /* not a partner */
    seq_op(s, FZ_STEAL_TICK);
    seq_op(s, OP(FZ_PEER_GONE, 0));
    seq_write(s, "steal-thief-abort");
}

/* The steals made from us: a whole handover, and one whose thief goes down. */
static void steal_victim_seeds(seq_t *s)
{
    const sn_pid_t none = SN_PID_NONE;
    /* we are stolen from: busy processes here, node 2 asks, we offer,
     * it accepts them all, we commit */
    seq_start(s, JOINED);
    for (uint64_t id = 1; id <= 4; id++)
        seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_SPAWN, FZ_TYPE, "busy", NULL, none, id));
    seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_SPAWN, "pinned", "busy", NULL, none, 5));
    seq_frame(s, OP(FZ_ROUTER, 0), steal_request(2, 11, 8));
    seq_frame(s, OP(FZ_ROUTER, 0), steal_request(3, 12, 8)); /* not a partner: an empty offer */
    static const sn_pid_t ours[] = {{1, 1000}, {1, 1001}, {1, 1002}, {1, 1003}};
    seq_frame(s, OP(FZ_ROUTER, 0), steal_accept(2, 11, ours, 4));
    sn_wire_send_t hi = {{1, 1000}, {2, 205}, 1, SN_EV_MESSAGE, 0, text("hi"), 0, 0, 0, 0}; /* (the first of "sends") */
    seq_frame(s, OP(FZ_ROUTER, 0), sends(2, 5, 1, &hi, 1)); /* for one that moved: forwarded */
    sn_payload_destroy(&hi.payload);
    seq_frame(s, OP(FZ_ROUTER, 0), steal_accept(2, 11, ours, 4)); /* again: no such offer */
    seq_write(s, "steal-victim");

    /* victim, the thief goes down before it accepts; a request from a
     * stranger */
    seq_start(s, JOINED);
    for (uint64_t id = 1; id <= 3; id++)
        seq_frame(s, OP(FZ_ROUTER, 3), request(SN_OP_SPAWN, FZ_TYPE, "busy", NULL, none, id));
    seq_frame(s, OP(FZ_ROUTER, 0), steal_request(2, 11, 8));
    seq_op(s, OP(FZ_PEER_GONE, 0));
    seq_frame(s, OP(FZ_ROUTER, 0), steal_request(9, 1, 8));
    seq_frame(s, OP(FZ_ROUTER, 0), steal_accept(2, 11, ours, 2));
    seq_write(s, "steal-victim-gone");
}

/* secure: members need keys; a Hello with one and without */
static void secure_seeds(seq_t *s)
{
    seq_start(s, FZ_SETUP_JOINED | FZ_SETUP_SECURE | FZ_SETUP_NOSTEAL);
    seq_frame(s, OP(FZ_ROUTER, 0), hello(4, 1, "tcp://127.0.0.1:7004", "schednode", ""));
    seq_frame(s, OP(FZ_ROUTER, 1),
              hello(5, 1, "tcp://127.0.0.1:7005", "schednode", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"));
    seq_frame(s, OP(FZ_ROUTER, 0), steal_request(2, 1, 8));
    seq_op(s, FZ_MEMBERS_TICK);
    seq_op(s, FZ_STEAL_TICK);
    seq_write(s, "secure");
}

/* bad frames: garbage, oversize, out of protocol (an ack on the
 * ROUTER from a stranger, a location) */
static void bad_frame_seeds(seq_t *s)
{
    seq_start(s, JOINED);
    frame_t g = {malloc(9000), 9000};
    memset(g.buf, 0x41, g.len);
    seq_frame(s, OP(FZ_ROUTER, 0), g);
    g = (frame_t){malloc(5), 5};
    memcpy(g.buf, "\x0a\x05junk", 5);
    seq_frame(s, OP(FZ_PEER, 0), g);
    frame_t f;
    must(sn_codec_encode_ack(9, 1, 1, 0, 0, 0, &f.buf, &f.len));
    seq_frame(s, OP(FZ_ROUTER, 1), f);
    seq_write(s, "bad-frames");
}

/* A probe's datagram, plain (relay/dgram.h: "SN\1\0", the sender's node
 * and the receiver's run, little-endian, then the frame), around f (freed). */
static frame_t datagram(uint32_t node, uint64_t to_inc, frame_t f)
{
    frame_t d = {malloc(16 + f.len), 16 + f.len};
    if (!d.buf)
        must(SN_ENOMEM);
    uint8_t *b = d.buf;
    memcpy(b, "SN\1\0", 4);
    for (int i = 0; i < 4; i++)
        b[4 + i] = (uint8_t)(node >> (8 * i));
    for (int i = 0; i < 8; i++)
        b[8 + i] = (uint8_t)(to_inc >> (8 * i));
    memcpy(b + 16, f.buf, f.len);
    free(f.buf);
    return d;
}

static frame_t probe(uint32_t node, uint64_t inc, int kind, uint64_t seq, uint32_t target, const sn_wire_member_t *up,
                     size_t n)
{
    sn_wire_stats_t st = {.node = node, .workers = 1, .state = SN_MEMBER_UP};
    snprintf(st.endpoint, sizeof st.endpoint, "tcp://127.0.0.1:70%02u", (unsigned)node);
    sn_wire_probe_t pr = {kind, seq, target, 7000 + node};
    frame_t f;
    must(sn_codec_encode_probe(node, inc, &pr, &st, "schednode", up, n, &f.buf, &f.len));
    return f;
}

/* Probes over UDP (relay/udp.c, insecure): member 2's PING (a member 4
 * piggybacked), ACK and PING_REQ for member 3, as datagrams to our run 7;
 * one for an earlier run, one in our own name, one from a stranger (node
 * 5), a Hello in a datagram, a truncated one, junk; a tick after each. */
static void datagram_seeds(seq_t *s)
{
    seq_start(s, JOINED);
    sn_wire_member_t four = member(4, SN_MEMBER_UP, 3, NULL, 0);
    seq_frame(s, OP(FZ_DATAGRAM, 0), datagram(2, 7, probe(2, 5, 1, 11, 0, &four, 1)));
    seq_frame(s, OP(FZ_DATAGRAM, 0), datagram(2, 7, probe(2, 5, 3, 12, FZ_OTHER, NULL, 0)));
    seq_op(s, FZ_MEMBERS_TICK);
    seq_frame(s, OP(FZ_DATAGRAM, 0), datagram(2, 7, probe(2, 5, 2, 1, 2, NULL, 0)));
    seq_frame(s, OP(FZ_DATAGRAM, 0), datagram(2, 6, probe(2, 5, 1, 13, 0, NULL, 0)));
    seq_frame(s, OP(FZ_DATAGRAM, 0), datagram(FZ_SELF, 7, probe(FZ_SELF, 7, 1, 14, 0, NULL, 0)));
    seq_frame(s, OP(FZ_DATAGRAM, 0), datagram(5, 7, probe(5, 1, 1, 15, 0, NULL, 0)));
    seq_frame(s, OP(FZ_DATAGRAM, 0), datagram(6, 7, hello(6, 1, "tcp://127.0.0.1:7006", "schednode", "")));
    frame_t cut = datagram(2, 7, probe(2, 5, 1, 16, 0, NULL, 0));
    cut.len -= 5;
    seq_frame(s, OP(FZ_DATAGRAM, 0), cut);
    frame_t junk = {strdup("GET / HTTP/1.0"), 14};
    seq_frame(s, OP(FZ_DATAGRAM, 0), junk);
    seq_op(s, FZ_MEMBERS_TICK);
    seq_write(s, "datagrams");
    /* secure: a plain one (refused), and one "sealed" by member 2 whose
     * seal does not open (the fuzzer cannot make one that does) */
    seq_start(s, JOINED | FZ_SETUP_SECURE);
    seq_frame(s, OP(FZ_DATAGRAM, 0), datagram(2, 7, probe(2, 5, 1, 11, 0, NULL, 0)));
    frame_t sealed = datagram(2, 7, probe(2, 5, 1, 12, 0, &four, 1)); /* (long enough for a seal) */
    uint8_t *b = sealed.buf;
    b[3] = 1;                /* sealed */
    memset(b + 8, 0x5a, 32); /* "its public key" */
    memset(b + 40, 0, 24);   /* the nonce: node 2, run 5, number 1 */
    b[40] = 2, b[48] = 5, b[56] = 1;
    seq_frame(s, OP(FZ_DATAGRAM, 0), sealed);
    seq_write(s, "datagrams-secure");
}

static void relay_seeds(void)
{
    static seq_t s; /* (static: 64 KiB) */
    join_seeds(&s);
    gossip_seeds(&s);
    send_seeds(&s);
    client_seeds(&s);
    steal_thief_seeds(&s);
    steal_victim_seeds(&s);
    secure_seeds(&s);
    bad_frame_seeds(&s);
    datagram_seeds(&s);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS-ROOT (tests/fuzz/corpus)\n", argv[0]);
        return 2;
    }
    root = argv[1];
    codec_seeds();
    hand_frames();
    relay_seeds();
    return 0;
}

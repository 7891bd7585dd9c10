/* rawzmq.c - a hostile client for relay tests: connects a DEALER to a node,
 * plain or as a CurveZMQ client with a key of its own, and sends frames a
 * peer never would. Prints what it sent. Usage:
 *   rawzmq [OPTIONS] ENDPOINT KIND
 * KIND:
 *   garbage | truncated | oversize:BYTES | version | multipart | nobody
 *   send:TOPID               a client request, as `schednode send` makes it,
 *                            carrying message 0 (a u64, what xsink counts)
 *   spoof:FROMNODE:TOPID[:INCARNATION]
 *                            a well-formed SendBatch claiming to come from
 *                            node FROMNODE (run INCARNATION, default 1) with
 *                            message 0 for TOPID (e.g. 2.12345)
 *   flood:N                  N small frames (up to 2 KiB) that do not decode,
 *                            as fast as ZeroMQ takes them
 *   incarnation              asks the node for its status and prints the
 *                            node id and incarnation its reply envelope names
 *   statusrtt:MS             asks the node for its status, one request after
 *                            another over this one connection, for MS
 *                            milliseconds; prints the count and the round
 *                            trips' median, p99 and max (ms); exit 1 if one
 *                            got no reply within --timeout
 *   ack:NODE:INC:SEQ         an Ack in the name of node NODE (run INC) for
 *                            every batch up to SEQ
 *   error:NODE:INC           an Error (a refusal) in the name of node NODE
 *                            (run INC)
 *   members:FROM:INC:NODE:NODEINC:PORT:KEY
 *                            gossip (Members) in the name of node FROM (run
 *                            INC) with one row: node NODE, run NODEINC, up,
 *                            at tcp://127.0.0.1:PORT, with key KEY (Z85)
 *   emptyrows:FROM:INC:BYTES gossip (Members) in the name of node FROM (run
 *                            INC) whose rows are BYTES bytes of empty ones
 *                            (0a 00 each: 8.4 million in 16 MiB), whole or,
 *                            with --parts MAX, as Parts of at most MAX bytes
 *                            (as a node sends a frame over --max-frame)
 *   hellos:N:NODE:KEY[:RATE] N Hellos of node NODE (cluster "schednode", at
 *                            tcp://127.0.0.1:1, key KEY), RATE a second (0,
 *                            the default: as fast as ZeroMQ takes them);
 *                            prints a line once they are sent, then how
 *                            many answers came back
 *   udp:garbage | udp:own:ID | udp:oversize
 *                            a datagram to the node's probe port (its TCP
 *                            port's number, UDP): junk; a plain probe in the
 *                            name of node ID (the node's own id); 2,000 bytes
 *   udp:probe:FROM:INC:TOINC a PING from node FROM (run INC) for the node's run
 *                            TOINC, sealed with --cert's keys for the
 *                            --server-key's (or not sealed, without --cert)
 *   udp:hold:MS              binds the node's probe port (UDP) and holds it MS
 *                            milliseconds (a node started meanwhile on that
 *                            port cannot bind it)
 *   tcp:closer:MS            listens on ENDPOINT's TCP port for MS
 *                            milliseconds and closes every connection at
 *                            once: a seed that ends each connection before
 *                            any handshake (as a CurveZMQ one may, to a
 *                            plain node), prints how many it closed
 * OPTIONS:
 *   --cert FILE              be a CurveZMQ client with FILE (and FILE_secret)
 *   --bind                   bind ENDPOINT and send to whoever connects (a
 *                            node dialling that endpoint), a CurveZMQ server
 *                            with --cert (no --server-key then): a fake node
 *                            at a dead node's endpoint, with its key
 *   --server-key Z85 | --server-cert FILE   the node's public key (with --cert)
 *   --repeat N               send the frame N times (default 1)
 *   --parts MAX              emptyrows: as Parts of at most MAX bytes each
 *   --gap MS                 emptyrows: wait MS milliseconds after each one
 *   --linger MS              how long frames may take to leave at exit
 *                            (default 1000; a refused connection waits it out)
 *   --timeout MS             incarnation, statusrtt: how long to wait for a reply
 * Exits 0 once every frame is handed to ZeroMQ (incarnation: once the reply
 * came), 1 if that failed, 2 on bad usage.
 */
#include <czmq.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <netinet/in.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codec.h"
#include "dgram.h"

static const char *usage_text =
    "usage: rawzmq [--cert FILE [--server-key Z85 | --server-cert FILE]] [--bind] [--repeat N] [--parts MAX]\n"
    "              [--gap MS] [--linger MS]\n"
    "              [--timeout MS] ENDPOINT KIND\n"
    "KIND: garbage|truncated|oversize:BYTES|version|multipart|nobody|send:TOPID|\n"
    "      spoof:FROMNODE:TOPID[:INCARNATION]|flood:N|incarnation|ack:NODE:INC:SEQ|error:NODE:INC|\n"
    "      members:FROM:INC:NODE:NODEINC:PORT:KEY|emptyrows:FROM:INC:BYTES|hellos:N:NODE:KEY[:RATE]|\n"
    "      udp:garbage|udp:own:ID|udp:oversize|udp:probe:FROM:INC:TOINC|udp:hold:MS\n"
    "      tcp:closer:MS\n";

static int usage(void)
{
    fputs(usage_text, stderr);
    return 2;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Sends one frame (a whole message) `repeat` times. */
static int send_frame(void *sock, const void *buf, size_t len, long repeat)
{
    for (long i = 0; i < repeat; i++)
        if (zmq_send(sock, buf, len, 0) < 0)
            return -1;
    return 0;
}

static uint64_t rnd(uint64_t *s) /* xorshift64 */
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* N frames of 1 byte to 2 KiB (1 KiB on average: a node that kept them
 * would show it) that sn_codec_decode refuses (checked here, so every one
 * must be counted as bad by the node). */
static int flood(void *sock, long n)
{
    uint64_t seed = 0x9e3779b97f4a7c15u;
    unsigned char buf[2048];
    double t0 = now_ms();
    size_t bytes = 0;
    for (long i = 0; i < n; i++) {
        size_t len;
        sn_frame_t f;
        const char *why;
        do {
            len = 1 + rnd(&seed) % sizeof buf;
            for (size_t k = 0; k < len; k++)
                buf[k] = (unsigned char)rnd(&seed);
            if (sn_codec_decode(buf, len, 0, &f, &why) != 0)
                break;
            sn_frame_clear(&f); /* decodes after all: draw another */
        } while (1);
        if (zmq_send(sock, buf, len, 0) < 0) {
            fprintf(stderr, "rawzmq: flood stopped after %ld frames: %s\n", i, zmq_strerror(zmq_errno()));
            return -1;
        }
        bytes += len;
    }
    printf("sent flood: %ld undecodable frames (%zu bytes) in %.0f ms\n", n, bytes, now_ms() - t0);
    return 0;
}

/* incarnation: a status request, and the envelope of the reply. */
/* One status request, its reply decoded into *f (0), or -1. */
static int ask_status(void *sock, int timeout_ms, uint64_t id, sn_frame_t *f)
{
    sn_wire_request_t req = {.id = id, .op = SN_OP_STATUS};
    void *buf;
    size_t len;
    if (sn_codec_encode_request(&req, &buf, &len) != 0)
        return -1;
    int rc = zmq_send(sock, buf, len, 0);
    free(buf);
    if (rc < 0)
        return -1;
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0) {
        fprintf(stderr, "rawzmq: no reply within %d ms\n", timeout_ms);
        return -1;
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sock, 0) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    const char *why = "";
    rc = sn_codec_decode(zmq_msg_data(&m), zmq_msg_size(&m), 0, f, &why);
    zmq_msg_close(&m);
    if (rc != 0 || f->kind != SN_FRAME_REPLY) {
        fprintf(stderr, "rawzmq: the reply is not one (%s)\n", rc ? why : sn_frame_kind_name(f->kind));
        if (rc == 0)
            sn_frame_clear(f);
        return -1;
    }
    return 0;
}

static int ask_incarnation(void *sock, int timeout_ms)
{
    sn_frame_t f;
    if (ask_status(sock, timeout_ms, 1, &f) != 0)
        return -1;
    printf("node %" PRIu32 " incarnation %" PRIu64 "\n", f.node, f.incarnation);
    sn_frame_clear(&f);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* statusrtt:MS -> status requests one after another for MS ms. */
static int status_rtt(void *sock, const char *arg, int timeout_ms)
{
    char *end;
    long ms = strtol(arg, &end, 10);
    if (ms < 1 || *end)
        return usage();
    size_t n = 0, cap = 1024;
    double *rtt = malloc(cap * sizeof *rtt), t0 = now_ms();
    for (uint64_t id = 1; rtt && now_ms() - t0 < (double)ms; id++) {
        double s = now_ms();
        sn_frame_t f;
        if (ask_status(sock, timeout_ms, id, &f) != 0) {
            free(rtt);
            return 1;
        }
        sn_frame_clear(&f);
        if (n == cap && !(rtt = realloc(rtt, (cap *= 2) * sizeof *rtt)))
            break;
        rtt[n++] = now_ms() - s;
    }
    if (!rtt || !n)
        return 1;
    qsort(rtt, n, sizeof *rtt, cmp_double);
    size_t p99 = (n * 99 + 99) / 100;
    printf("status %zu calls median %.2f p99 %.2f max %.2f ms\n", n, rtt[n / 2], rtt[(p99 ? p99 : 1) - 1], rtt[n - 1]);
    free(rtt);
    return 0;
}

/* spoof:FROMNODE:TOPID[:INCARNATION] -> one SendBatch (not numbered: seq 0,
 * so even an accepted one leaves the real sender's acks alone). */
static int spoof(void *sock, const char *arg, long repeat)
{
    char topid[SN_PID_STRLEN + 1] = "";
    unsigned long from_node;
    unsigned long long inc = 1;
    int used = 0;
    if (sscanf(arg, "%lu:%32[0-9.]%n", &from_node, topid, &used) < 2 || from_node == 0 || from_node > UINT32_MAX ||
        (arg[used] && sscanf(arg + used, ":%llu", &inc) != 1))
        return usage();
    sn_wire_send_t one = {.kind = SN_EV_MESSAGE};
    if (sn_pid_parse(topid, &one.to) != 0)
        return usage();
    one.payload = sn_payload_u64(0);
    /* a plausible sender: a PID in that node's run (serials start at
     * incarnation / 1000 * 1024), far enough in for no test to have made it */
    one.from = (sn_pid_t){(uint32_t)from_node, inc / 1000u * 1024u + 1000000u};
    void *buf;
    size_t len;
    int rc = sn_codec_encode_sends((uint32_t)from_node, inc, 0, &one, 1, &buf, &len);
    sn_payload_destroy(&one.payload);
    if (rc != 0)
        return 1;
    char from[SN_PID_STRLEN];
    rc = send_frame(sock, buf, len, repeat);
    printf("sent %ld x spoofed SendBatch (%zu bytes): envelope node %lu incarnation %llu, message 0 from %s to %s\n",
           repeat, len, from_node, inc, sn_pid_format(one.from, from, sizeof from), topid);
    free(buf);
    return rc < 0 ? 1 : 0;
}

/* ack:NODE:INC:SEQ, error:NODE:INC -> one frame only a node sends, in
 * node NODE's name (run INC). */
static int forged(void *sock, const char *what, long repeat)
{
    unsigned long node;
    unsigned long long inc, seq = 0;
    bool ack = !strncmp(what, "ack:", 4);
    int want = ack ? 3 : 2;
    if (sscanf(strchr(what, ':') + 1, "%lu:%llu:%llu", &node, &inc, &seq) != want || node == 0 || node > UINT32_MAX)
        return usage();
    void *buf;
    size_t len;
    int rc = ack ? sn_codec_encode_ack((uint32_t)node, inc, seq, 0, 0, 0, &buf, &len)
                 : sn_codec_encode_refusal((uint32_t)node, inc, SN_EREFUSED, "forged by rawzmq", &buf, &len);
    if (rc != 0)
        return 1;
    rc = send_frame(sock, buf, len, repeat);
    if (rc < 0)
        fprintf(stderr, "rawzmq: %s not sent: %s\n", what, zmq_strerror(zmq_errno()));
    else
        printf("sent %ld x %s (%zu bytes): envelope node %lu incarnation %llu\n", repeat, ack ? "Ack" : "Error", len,
               node, inc);
    free(buf);
    return rc < 0 ? 1 : 0;
}

/* members:FROM:INC:NODE:NODEINC:PORT:KEY -> gossip with one row. */
static int gossip_row(void *sock, const char *arg, long repeat)
{
    unsigned long from, node, port;
    unsigned long long inc, node_inc;
    int used = 0;
    if (sscanf(arg, "%lu:%llu:%lu:%llu:%lu:%n", &from, &inc, &node, &node_inc, &port, &used) != 5 || !used ||
        strlen(arg + used) != 40 || from == 0 || from > UINT32_MAX || node == 0 || node > UINT32_MAX || port > 65535)
        return usage();
    sn_wire_member_t m = {.node = (uint32_t)node, .state = 0, .incarnation = node_inc, .first_serial = 1};
    snprintf(m.endpoint, sizeof m.endpoint, "tcp://127.0.0.1:%lu", port);
    snprintf(m.public_key, sizeof m.public_key, "%s", arg + used);
    void *buf;
    size_t len;
    if (sn_codec_encode_members((uint32_t)from, inc, 0, &m, 1, &buf, &len) != 0)
        return 1;
    int rc = send_frame(sock, buf, len, repeat);
    printf("sent %ld x Members (%zu bytes) in node %lu's name: node %lu run %llu at %s, key %s\n", repeat, len, from,
           node, node_inc, m.endpoint, m.public_key);
    free(buf);
    return rc < 0 ? 1 : 0;
}

/* emptyrows:FROM:INC:BYTES -> a Members envelope whose rows are all empty,
 * whole or (parts > 0) as Parts (batch 0: a frame that is not a batch) of
 * at most `parts` bytes each. */
static int empty_rows(void *sock, const char *arg, long repeat, long parts, long gap)
{
    unsigned long from;
    unsigned long long inc, bytes;
    if (sscanf(arg, "%lu:%llu:%llu", &from, &inc, &bytes) != 3 || from == 0 || from > 127 || bytes < 2 ||
        bytes > (1ull << 30) || (parts && parts < 256))
        return usage(); /* (a node id of one byte keeps the envelope's head simple) */
    uint8_t *b = malloc(bytes + 32), *p = b;
    if (!b)
        return 1;
    const uint8_t head[] = {0x08, 0x01, 0x10, (uint8_t)from, 0x18}; /* version 1, node FROM, run: */
    memcpy(p, head, sizeof head);
    p += sizeof head;
    unsigned long long fields[2] = {inc, bytes};
    for (int k = 0; k < 2; k++) { /* the run, then (members: field 12) the rows' length, as varints */
        if (k)
            *p++ = 0x62;
        for (unsigned long long v = fields[k];; v >>= 7) {
            *p++ = (uint8_t)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
            if (!(v >> 7))
                break;
        }
    }
    memset(p, 0, bytes);
    for (unsigned long long i = 0; i + 1 < bytes; i += 2)
        p[i] = 0x0a;
    size_t len = (size_t)(p - b) + bytes, step = parts ? (size_t)parts - 128 : len; /* (a Part's own fields) */
    double t0 = now_ms();
    int rc = 0;
    long frames = 0;
    for (long r = 0; r < repeat && rc == 0; r++)
        for (size_t off = 0; off < len && rc == 0; off += step, frames++) {
            size_t n = len - off < step ? len - off : step;
            void *pb = NULL;
            size_t plen;
            if (parts && sn_codec_encode_part((uint32_t)from, inc, 0, len, off, b + off, n, &pb, &plen) != 0)
                rc = -1;
            else if (zmq_send(sock, parts ? pb : b + off, parts ? plen : n, 0) < 0)
                rc = -1;
            free(pb);
            if (off + step >= len && gap)
                zclock_sleep((int)gap);
        }
    printf("sent %ld x Members of %llu bytes of empty rows (%llu rows) in node %lu's name, %s: %ld frames in %.0f ms\n",
           repeat, bytes, bytes / 2, from, parts ? "as Parts" : "whole", frames, now_ms() - t0);
    free(b);
    return rc < 0 ? 1 : 0;
}

/* hellos:N:NODE:KEY[:RATE] -> N Hellos of node NODE, RATE a second (0:
 * as fast as ZeroMQ takes them); reads the answers as they come, and for
 * a second more at the end. */
static int hellos(void *sock, const char *arg)
{
    long n, rate = 0;
    unsigned long node;
    int used = 0;
    char key[41] = "";
    if (sscanf(arg, "%ld:%lu:%n", &n, &node, &used) != 2 || !used || n < 1 || node == 0 || node > UINT32_MAX ||
        strlen(arg + used) < 40 || (arg[used + 40] && sscanf(arg + used + 40, ":%ld", &rate) != 1) || rate < 0)
        return usage();
    memcpy(key, arg + used, 40);
    void *buf;
    size_t len;
    if (sn_codec_encode_hello((uint32_t)node, 1, "tcp://127.0.0.1:1", "schednode", 1, key, 0, NULL, 0, &buf, &len) != 0)
        return 1;
    double t0 = now_ms();
    long answers = 0, sent = 0;
    char ans[64];
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    while (sent < n) {
        double due = rate ? t0 + (double)sent * 1000.0 / (double)rate : 0, now = now_ms();
        if (now < due) { /* (ahead of the rate: wait, reading answers) */
            zmq_poll(&it, 1, (long)(due - now) + 1);
        } else if (zmq_send(sock, buf, len, ZMQ_DONTWAIT) >= 0) {
            sent++;
        } else if (zmq_errno() == EAGAIN) {
            it.events = ZMQ_POLLIN | ZMQ_POLLOUT;
            zmq_poll(&it, 1, 100);
            it.events = ZMQ_POLLIN;
        } else {
            break;
        }
        while (zmq_recv(sock, ans, sizeof ans, ZMQ_DONTWAIT) >= 0) /* (kept from piling up; their bodies unread) */
            answers++;
    }
    printf("sent %ld Hellos of node %lu (%zu bytes each) in %.0f ms\n", sent, node, len, now_ms() - t0);
    fflush(stdout); /* (a test waits for this line: the flood is over) */
    while (zmq_poll(&it, 1, 1000) > 0 && zmq_recv(sock, ans, sizeof ans, 0) >= 0)
        answers++;
    free(buf);
    printf("%ld answers came back\n", answers);
    return sent == n ? 0 : 1;
}

/* send:TOPID -> a client request SEND of message 0. */
static int client_send(void *sock, const char *topid, long repeat)
{
    sn_wire_request_t req = {.id = 1, .op = SN_OP_SEND};
    if (sn_pid_parse(topid, &req.to) != 0)
        return usage();
    req.arg = sn_payload_u64(0);
    void *buf;
    size_t len;
    int rc = sn_codec_encode_request(&req, &buf, &len);
    sn_payload_destroy(&req.arg);
    if (rc != 0)
        return 1;
    rc = send_frame(sock, buf, len, repeat);
    printf("sent %ld x client request send (%zu bytes): message 0 to %s\n", repeat, len, topid);
    free(buf);
    return rc < 0 ? 1 : 0;
}

/* The frames relay.sh has always sent. */
static int classic(void *sock, const char *what, long repeat)
{
    int rc = 0;
    if (!strcmp(what, "garbage")) {
        unsigned char junk[100];
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (unsigned char)(0xff - i * 13);
        rc = send_frame(sock, junk, sizeof junk, repeat);
        printf("sent %ld x garbage (%zu bytes)\n", repeat, sizeof junk);
    } else if (!strcmp(what, "truncated") || !strcmp(what, "multipart")) {
        sn_payload_t *p = sn_payload_text("a perfectly good message");
        sn_wire_send_t one = {{1, 1}, {9, 1}, 0, SN_EV_MESSAGE, 0, p, 0, 0, 0, 0};
        void *buf;
        size_t len;
        if (sn_codec_encode_sends(9, 1, 0, &one, 1, &buf, &len) != 0) {
            sn_payload_destroy(&p);
            return 1;
        }
        for (long i = 0; i < repeat && rc >= 0; i++) {
            if (!strcmp(what, "truncated"))
                rc = zmq_send(sock, buf, len - 5, 0);
            else if ((rc = zmq_send(sock, buf, len, ZMQ_SNDMORE)) >= 0)
                rc = zmq_send(sock, "extra", 5, 0);
        }
        printf("sent %ld x %s (%zu bytes%s)\n", repeat, what, !strcmp(what, "truncated") ? len - 5 : len,
               !strcmp(what, "truncated") ? " of a SendBatch cut short" : " + a second part of 5");
        free(buf);
        sn_payload_destroy(&p);
    } else if (!strncmp(what, "oversize:", 9)) {
        size_t n = strtoul(what + 9, NULL, 10);
        unsigned char *big = calloc(1, n ? n : 1);
        if (!big)
            return 1;
        double t0 = now_ms();
        rc = send_frame(sock, big, n, repeat);
        printf("sent %ld x oversize (%zu bytes each) in %.0f ms\n", repeat, n, now_ms() - t0);
        free(big);
    } else if (!strcmp(what, "version")) {
        const unsigned char v7[] = {0x08, 0x07, 0x10, 0x09, 0x6a, 0x00}; /* version 7 heartbeat */
        rc = send_frame(sock, v7, sizeof v7, repeat);
        printf("sent %ld x version 7 heartbeat\n", repeat);
    } else if (!strcmp(what, "nobody")) {
        const unsigned char nb[] = {0x08, 0x01, 0x10, 0x09}; /* version 1, node 9, no body */
        rc = send_frame(sock, nb, sizeof nb, repeat);
        printf("sent %ld x envelope without a body\n", repeat);
    } else {
        fprintf(stderr, "rawzmq: unknown frame kind '%s'\n", what);
        return 2;
    }
    return rc < 0 ? 1 : 0;
}

/* The command line (see the top of the file). */
typedef struct args {
    const char *cert_file, *server_key, *server_cert;
    bool bind;
    long repeat, linger, timeout, parts, gap;
    const char *endpoint, *what;
} args_t;

/* Reads the options and operands into *a: 0, or 2 (bad usage, said). */
static int parse(int argc, char **argv, args_t *a)
{
    static const struct option opts[] = {{"cert", required_argument, NULL, 'c'},
                                         {"server-key", required_argument, NULL, 'k'},
                                         {"server-cert", required_argument, NULL, 's'},
                                         {"repeat", required_argument, NULL, 'r'},
                                         {"linger", required_argument, NULL, 'l'},
                                         {"timeout", required_argument, NULL, 't'},
                                         {"bind", no_argument, NULL, 'b'},
                                         {"parts", required_argument, NULL, 'p'},
                                         {"gap", required_argument, NULL, 'g'},
                                         {NULL, 0, NULL, 0}};
    *a = (args_t){.repeat = 1, .linger = 1000, .timeout = 5000};
    int o;
    while ((o = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            a->cert_file = optarg;
            break;
        case 'k':
            a->server_key = optarg;
            break;
        case 's':
            a->server_cert = optarg;
            break;
        case 'r':
            a->repeat = strtol(optarg, NULL, 10);
            break;
        case 'l':
            a->linger = strtol(optarg, NULL, 10);
            break;
        case 't':
            a->timeout = strtol(optarg, NULL, 10);
            break;
        case 'b':
            a->bind = true;
            break;
        case 'p':
            a->parts = strtol(optarg, NULL, 10);
            break;
        case 'g':
            a->gap = strtol(optarg, NULL, 10);
            break;
        default:
            return usage();
        }
    }
    if (argc - optind != 2 || a->repeat < 1 || a->linger < 0 || a->timeout < 0 || a->parts < 0 || a->gap < 0 ||
        (a->bind ? a->server_key || a->server_cert : !a->cert_file != !(a->server_key || a->server_cert)))
        return usage();
    a->endpoint = argv[optind];
    a->what = argv[optind + 1];
    return 0;
}

/* --cert: loads our certificate into *cert (caller owns it) and the node's
 * public key into key, from --server-cert or --server-key. Returns 0, 1 (a
 * certificate does not load) or 2 (the key is not one); on failure *cert is
 * NULL. */
static int load_curve(const args_t *a, zcert_t **cert, char key[41])
{
    /* zcert_load reads FILE and, for the secret key, FILE_secret */
    *cert = zcert_load(a->cert_file);
    if (!*cert) {
        fprintf(stderr, "rawzmq: cannot load the certificate %s\n", a->cert_file);
        return 1;
    }
    if (a->bind) /* (a server: no other key) */
        return 0;
    if (a->server_cert) {
        zcert_t *sc = zcert_load(a->server_cert);
        if (!sc) {
            fprintf(stderr, "rawzmq: cannot load the server certificate %s\n", a->server_cert);
            zcert_destroy(cert);
            return 1;
        }
        snprintf(key, 41, "%s", zcert_public_txt(sc));
        zcert_destroy(&sc);
    } else {
        snprintf(key, 41, "%s", a->server_key);
    }
    if (strlen(key) != 40) {
        fprintf(stderr, "rawzmq: a server key is 40 Z85 characters\n");
        zcert_destroy(cert);
        return 2;
    }
    return 0;
}

/* A DEALER connected to the node, a CurveZMQ client if *cert is set (takes
 * ownership of *cert and nulls it). Caller owns the return value; NULL if
 * the socket cannot be made or connected. */
static zsock_t *dial(const args_t *a, zcert_t **cert, const char *key)
{
    zsock_t *s = zsock_new(ZMQ_DEALER);
    if (!s) {
        zcert_destroy(cert);
        return NULL;
    }
    if (*cert) {
        zcert_apply(*cert, s);
        if (a->bind)
            zsock_set_curve_server(s, 1);
        else
            zsock_set_curve_serverkey(s, key);
        zcert_destroy(cert);
    }
    if (a->bind) { /* a send waits (--timeout) for the node that dials us */
        zsock_set_sndtimeo(s, (int)a->timeout);
        if (zsock_bind(s, "%s", a->endpoint) < 0) {
            fprintf(stderr, "rawzmq: cannot bind %s: %s\n", a->endpoint, zmq_strerror(zmq_errno()));
            zsock_destroy(&s);
            return NULL;
        }
        return s;
    }
    /* a big frame queued many times would be held many times over (the
     * node drops the connection at each one past its limit): a short queue,
     * and quick reconnects */
    if (!strncmp(a->what, "oversize:", 9) || !strncmp(a->what, "emptyrows:", 10)) {
        zsock_set_sndhwm(s, 2);
        zsock_set_reconnect_ivl(s, 10);
    }
    if (zsock_connect(s, "%s", a->endpoint) < 0) {
        fprintf(stderr, "rawzmq: cannot connect to %s\n", a->endpoint);
        zsock_destroy(&s);
        return NULL;
    }
    return s;
}

/* ---- udp:... (the probes' port, relay/udp.c) */

/* The address of ENDPOINT's host:port (IPv4); -1 if it is not one. */
static int ipv4_of(const char *endpoint, struct sockaddr_in *sa)
{
    char host[64];
    unsigned port;
    if (sscanf(endpoint, "tcp://%63[0-9.]:%u", host, &port) != 2 || port > 65535) {
        fprintf(stderr, "rawzmq: needs tcp://IPV4:PORT, not %s\n", endpoint);
        return -1;
    }
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* A UDP socket and the address of ENDPOINT's host:port (IPv4). */
static int udp_to(const char *endpoint, struct sockaddr_in *sa)
{
    return ipv4_of(endpoint, sa) == 0 ? socket(AF_INET, SOCK_DGRAM, 0) : -1;
}

/* udp:probe:FROM:INC:TOINC (udp:own:ID: the same with FROM = ID) -> one
 * PING (the sender's row, no updates), sealed when cert is set (for key,
 * the node's). Its datagram number is 1: a replay of none. */
static size_t udp_probe(const char *arg, zcert_t *cert, const char *key, uint8_t *out)
{
    unsigned long from;
    unsigned long long inc = 1, to_inc = 0;
    if (sscanf(arg, "%lu:%llu:%llu", &from, &inc, &to_inc) < 1 || from == 0 || from > UINT32_MAX)
        return 0;
    sn_wire_stats_t row = {.node = (uint32_t)from, .workers = 1};
    snprintf(row.endpoint, sizeof row.endpoint, "tcp://127.0.0.1:1");
    sn_wire_probe_t ping = {.kind = 1, .seq = 1};
    void *buf;
    size_t len, n = 0;
    if (sn_codec_encode_probe((uint32_t)from, inc, &ping, &row, "schednode", NULL, 0, &buf, &len) != 0)
        return 0;
    uint8_t pk[32], k[32];
    if (!cert)
        n = sn_dgram_seal(out, (uint32_t)from, inc, 1, to_inc, NULL, NULL, buf, len);
    else if (sodium_init() >= 0 && zmq_z85_decode(pk, key) && sn_dgram_shared(k, pk, zcert_secret_key(cert)) == 0)
        n = sn_dgram_seal(out, (uint32_t)from, inc, 1, to_inc, zcert_public_key(cert), k, buf, len);
    free(buf);
    return n;
}

static int udp_play(const args_t *a, zcert_t *cert, const char *key)
{
    struct sockaddr_in sa;
    int fd = udp_to(a->endpoint, &sa);
    if (fd < 0)
        return 1;
    const char *what = a->what + 4;
    if (!strncmp(what, "hold:", 5)) {
        int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
        printf("rawzmq: %s udp%s\n", rc == 0 ? "holding" : "cannot hold", a->endpoint + 3);
        fflush(stdout);
        if (rc == 0)
            zclock_sleep(atoi(what + 5));
        close(fd);
        return rc == 0 ? 0 : 1;
    }
    static uint8_t out[2000];
    size_t n = 0;
    if (!strcmp(what, "garbage"))
        n = (size_t)snprintf((char *)out, sizeof out, "GET / HTTP/1.0\r\n\r\n");
    else if (!strcmp(what, "oversize"))
        n = sizeof out; /* (zeros) */
    else if (!strncmp(what, "own:", 4) || !strncmp(what, "probe:", 6))
        n = udp_probe(strchr(what, ':') + 1, !strncmp(what, "own:", 4) ? NULL : cert, key, out);
    int rc = 0;
    for (long i = 0; n && i < a->repeat && rc == 0; i++)
        rc = sendto(fd, out, n, 0, (struct sockaddr *)&sa, sizeof sa) == (ssize_t)n ? 0 : 1;
    close(fd);
    if (n == 0)
        return usage();
    printf("sent %ld x datagram %s (%zu bytes)\n", a->repeat, what, n);
    return rc;
}

/* tcp:closer:MS -> accepts and closes at once every connection on the
 * endpoint's port for MS milliseconds; the count goes to stdout. */
static int tcp_closer(const args_t *a)
{
    struct sockaddr_in sa;
    if (ipv4_of(a->endpoint, &sa) != 0)
        return 1;
    char *end;
    long ms = strtol(a->what + 11, &end, 10);
    if (ms < 1 || *end)
        return usage();
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 16) != 0) {
        fprintf(stderr, "rawzmq: cannot listen on %s: %s\n", a->endpoint, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    printf("rawzmq: closing every connection to %s\n", a->endpoint);
    fflush(stdout);
    long closed = 0;
    for (double until = now_ms() + (double)ms; now_ms() < until;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) == 1) {
            int c = accept(fd, NULL, NULL);
            if (c >= 0)
                close(c), closed++;
        }
    }
    close(fd);
    printf("rawzmq: closed %ld connections\n", closed);
    return 0;
}

/* Sends (or asks) what KIND says; returns the exit status. */
static int play(void *sock, const args_t *a)
{
    const char *what = a->what;
    if (!strncmp(what, "spoof:", 6))
        return spoof(sock, what + 6, a->repeat);
    if (!strncmp(what, "send:", 5))
        return client_send(sock, what + 5, a->repeat);
    if (!strncmp(what, "flood:", 6)) {
        char *end;
        long n = strtol(what + 6, &end, 10);
        return n < 1 || *end ? usage() : flood(sock, n) < 0 ? 1 : 0;
    }
    if (!strcmp(what, "incarnation"))
        return ask_incarnation(sock, (int)a->timeout) < 0 ? 1 : 0;
    if (!strncmp(what, "statusrtt:", 10))
        return status_rtt(sock, what + 10, (int)a->timeout);
    if (!strncmp(what, "members:", 8))
        return gossip_row(sock, what + 8, a->repeat);
    if (!strncmp(what, "ack:", 4) || !strncmp(what, "error:", 6))
        return forged(sock, what, a->repeat);
    if (!strncmp(what, "emptyrows:", 10))
        return empty_rows(sock, what + 10, a->repeat, a->parts, a->gap);
    if (!strncmp(what, "hellos:", 7))
        return hellos(sock, what + 7);
    return classic(sock, what, a->repeat);
}

int main(int argc, char **argv)
{
    args_t a;
    int rc = parse(argc, argv, &a);
    if (rc != 0)
        return rc;
    zsys_init();
    zsys_set_linger((size_t)a.linger);

    zcert_t *cert = NULL;
    char key[41] = "";
    if (a.cert_file && (rc = load_curve(&a, &cert, key)) != 0)
        return rc;
    if (!strncmp(a.what, "tcp:closer:", 11)) {
        zcert_destroy(&cert);
        return tcp_closer(&a);
    }
    if (!strncmp(a.what, "udp:", 4)) {
        rc = udp_play(&a, cert, key);
        zcert_destroy(&cert);
        return rc;
    }
    zsock_t *s = dial(&a, &cert, key);
    if (!s)
        return 1;
    printf("rawzmq: %s %s of %s%s%s\n", a.cert_file ? "CurveZMQ" : "plain", a.bind ? "server" : "client", a.endpoint,
           a.cert_file ? " as " : "", a.cert_file ? a.cert_file : "");
    rc = play(zsock_resolve(s), &a);
    fflush(stdout);
    zsock_destroy(&s);
    return rc;
}

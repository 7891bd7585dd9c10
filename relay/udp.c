/* udp.c - SWIM's probes over UDP, sent and read by the relay's I/O thread
 * itself, as hashicorp/memberlist does. Over ZeroMQ a probe's round trip
 * wakes the relay and libzmq's I/O thread on both ends (six or seven
 * thread wake-ups); a datagram wakes only the relay on the other end, so
 * a round trip costs three, and an idle cluster's cost is mostly its
 * probes (bench/cluster-scale.sh measures it).
 *
 * The socket is bound on the host and port of the TCP endpoint the node
 * listens on (the same number, UDP), and members learn the port to send
 * to with the node's row (Member.probe_port: the advertised port). A node
 * whose UDP bind fails says so (a warning) and advertises no port: the
 * others probe it over TCP, and it probes them over TCP too. So
 * does a node of an older version (no port in its row), and a member whose
 * endpoint names a host, not an address (no name look-up on this thread).
 *
 * What goes over UDP: the probes (PING, ACK, PING_REQ, with their
 * piggybacked updates and the sender's row) and the answer to an earlier
 * run of a node that it is out; nothing else. A datagram holds at most
 * SN_DGRAM_BODY_MAX bytes of Envelope (members.c leaves updates out to
 * fit); a datagram's format, its sealing in a secure cluster and the
 * replay window are dgram.h's. A bad datagram is counted in bad_frames,
 * logged (rate-limited, sn__relay_bad) and dropped.
 *
 * Ownership: the I/O thread only (the socket, the buffers, each peer's
 * window and shared key).
 */
#define _GNU_SOURCE /* recvmmsg */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sodium.h>
#include <unistd.h>

#include "relay_int.h"
#include "peer.h"
#include "udp.h"

#define UDP_BATCH 8        /* datagrams one recvmmsg takes */
#define UDP_ROUNDS 8       /* recvmmsg calls per turn, at most (then the loop turns) */
#define STRANGERS_PER_S 20 /* sealed datagrams from non-members opened per second (each costs a key agreement) */

/* The address of host:port in a tcp:// endpoint (port: the endpoint's if
 * 0), of the socket family `family` (0: either). False for a host name,
 * an interface name or a wildcard other than 0.0.0.0: no look-ups here. */
static bool addr_of(const char *ep, uint32_t port, int family, struct sockaddr_storage *sa, socklen_t *len)
{
    char host[SN_WIRE_ENDPOINT_MAX];
    const char *colon = strrchr(ep, ':');
    if (strncmp(ep, "tcp://", 6) != 0 || !colon || colon <= ep + 6)
        return false;
    size_t hl = (size_t)(colon - (ep + 6));
    memcpy(host, ep + 6, hl);
    host[hl] = 0;
    if (!port) {
        char *end;
        unsigned long p = strtoul(colon + 1, &end, 10);
        if (*end || p == 0 || p > 65535)
            return false;
        port = (uint32_t)p;
    }
    memset(sa, 0, sizeof *sa);
    struct sockaddr_in *in4 = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
    if (family != AF_INET6 && inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        *len = sizeof *in4;
        return true;
    }
    if (family != AF_INET && hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = 0;
        if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) == 1) {
            in6->sin6_family = AF_INET6;
            in6->sin6_port = htons((uint16_t)port);
            *len = sizeof *in6;
            return true;
        }
    }
    return false;
}

int sn__udp_open(sn_relay_t *r)
{
    r->udp_fd = -1;
    r->udp_buf = malloc((UDP_BATCH + 2) * (size_t)SN_DGRAM_MAX); /* in, out, plain */
    if (!r->udp_buf)
        return -1;
    struct sockaddr_storage sa;
    socklen_t len;
    if (strncmp(r->endpoint, "tcp://", 6) != 0)
        return 0; /* (not TCP: the fuzz target's inproc) */
    if (!addr_of(r->endpoint, 0, 0, &sa, &len)) {
        SNLOG_WARN(r, "no UDP socket for the probes (%s is not an address): probes to and from this node go over TCP",
                   r->endpoint);
        return 0;
    }
    /* (no SO_REUSEADDR: two sockets would share the port, each taking
     * half of the datagrams) */
    int fd = socket(sa.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) != 0) {
        SNLOG_WARN(r, "cannot bind udp%s for the probes: %s: probes to and from this node go over TCP", r->endpoint + 3,
                   strerror(errno));
        if (fd >= 0)
            close(fd);
        return 0;
    }
    if (r->cert && sodium_init() < 0) { /* (libzmq has called it already for CurveZMQ; it is idempotent) */
        close(fd);
        return -1;
    }
    r->udp_fd = fd;
    r->udp_family = sa.ss_family;
    /* members send to the advertised port (the bound one, unless the node
     * is reached through a forwarded port: UDP must be forwarded too) */
    const char *colon = strrchr(r->advertise, ':');
    unsigned long port = colon ? strtoul(colon + 1, NULL, 10) : 0;
    r->probe_port = port <= 65535 ? (uint32_t)port : 0;
    sn__relay_io_watch(r, NULL, SN_IO_UDP, 0, true);
    SNLOG_DEBUG(r, "probes on udp%s (members send to port %" PRIu32 ")", r->endpoint + 3, r->probe_port);
    return 0;
}

void sn__udp_close(sn_relay_t *r)
{
    if (r->udp_fd >= 0)
        close(r->udp_fd);
    r->udp_fd = -1;
    free(r->udp_buf);
    r->udp_buf = NULL;
}

/* p's CurveZMQ key, raw, and the key it shares with us (made at the first
 * datagram to or from it, again if its key changes); NULL if its key is
 * no key. */
static const uint8_t *shared_key(sn_relay_t *r, peer_t *p)
{
    if (strcmp(p->dg_key_of, p->public_key) != 0) {
        p->dg_key_of[0] = 0;
        if (strlen(p->public_key) != 40 || !zmq_z85_decode(p->dg_pk, p->public_key) ||
            sn_dgram_shared(p->dg_key, p->dg_pk, zcert_secret_key(r->cert)) != 0)
            return NULL;
        snprintf(p->dg_key_of, sizeof p->dg_key_of, "%s", p->public_key);
    }
    return p->dg_key;
}

/* Sends buf (an Envelope) to sa as a datagram for run to_inc of node p
 * (sealed for p's key in a secure cluster). False if it cannot be made;
 * true once handed to the kernel, or lost on the way as a probe may be. */
static bool send_dgram(sn_relay_t *r, peer_t *p, uint64_t to_inc, const struct sockaddr *sa, socklen_t salen,
                       const void *buf, size_t len)
{
    const uint8_t *k = NULL;
    if (r->cert && !(k = shared_key(r, p)))
        return false;
    uint8_t *out = r->udp_buf + UDP_BATCH * SN_DGRAM_MAX;
    size_t n = sn_dgram_seal(out, r->node, r->incarnation, ++r->dgram_seq, to_inc,
                             r->cert ? zcert_public_key(r->cert) : NULL, k, buf, len);
    if (n == 0)
        return false;
    if (sendto(r->udp_fd, out, n, MSG_DONTWAIT, sa, salen) < 0) {
        /* a full socket buffer, or no route (a cut link: a blackhole
         * route says EINVAL): lost, as probes may be */
        char more[64];
        if (sn__log_limit(&p->udp_log, sn__relay_now_ns(), 1000000000u, more, sizeof more))
            SNLOG_DEBUG(r, "probe to node %" PRIu32 " lost: sendto: %s%s", p->node, strerror(errno), more);
        return true;
    }
    sn__add(&r->frames_out, 1);
    return true;
}

bool sn__relay_send_probe(sn_relay_t *r, peer_t *p, const void *buf, size_t len)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    /* over UDP when it takes them and we know its run (a datagram names
     * the receiver's run: a static peer not heard from yet is probed over
     * TCP); but the first probe to a member goes over TCP, to make the
     * connection: the mesh forms with the probes, over a cluster's first
     * N periods, so that what must be quick later (a refutation's
     * broadcast, a steal's handover, under load) finds its connection
     * made. One made then takes several turns of both ends' busy threads:
     * without the mesh, a 100-node cluster declared live nodes down
     * during a 4,000-process spread (bench/cluster-scale.sh). */
    if (r->udp_fd >= 0 && p->probe_port && p->incarnation && len <= SN_DGRAM_BODY_MAX && (p->dealer || !p->dial)) {
        if (addr_of(p->endpoint, p->probe_port, r->udp_family, &sa, &salen) &&
            send_dgram(r, p, p->incarnation, (struct sockaddr *)&sa, salen, buf, len))
            return true;
        if (!p->udp_said) {
            p->udp_said = true;
            SNLOG_INFO(r,
                       "probes to node %" PRIu32 " go over TCP: its endpoint %s is not an address this node's UDP "
                       "socket reaches (a host name, or another address family)",
                       p->node, p->endpoint);
        }
    }
    return sn__relay_try_send(r, p, buf, len);
}

void sn__relay_udp_answer(sn_relay_t *r, uint32_t node, uint64_t inc, const void *buf, size_t len)
{
    peer_t *p = sn__relay_find_peer(r, node);
    if (r->in_from && p && r->udp_fd >= 0)
        (void)send_dgram(r, p, inc, r->in_from, (socklen_t)r->in_fromlen, buf, len);
}

/* A sealed datagram, opened: with the member's key if the sender is one
 * (the datagram must name that key), else with the key it names (a node
 * not known here yet: at most STRANGERS_PER_S a second). key gets the
 * sender's key (Z85) for the checks a frame goes through. False if
 * dropped (counted, logged). */
static bool unseal(sn_relay_t *r, peer_t *p, const uint8_t *data, size_t len, sn_dgram_t *d, char key[41])
{
    uint8_t stranger[SN_DGRAM_KEY];
    const uint8_t *k;
    const char *why;
    if (p) {
        k = shared_key(r, p);
        if (!k || memcmp(p->dg_pk, d->pk, SN_DGRAM_KEY) != 0) {
            sn__relay_bad(r, "datagram sealed with a key that is not the member's", d->node);
            return false;
        }
        snprintf(key, 41, "%s", p->public_key);
    } else {
        uint64_t sec = sn__relay_now_ns() / 1000000000u;
        if (sec != r->stranger_sec) {
            r->stranger_sec = sec;
            r->strangers = 0;
        }
        if (r->strangers++ >= STRANGERS_PER_S || sn_dgram_shared(stranger, d->pk, zcert_secret_key(r->cert)) != 0) {
            sn__relay_bad(r, "datagram from a node that is not a member: over the rate, or no key", d->node);
            return false;
        }
        k = stranger;
        zmq_z85_encode(key, d->pk, SN_DGRAM_KEY);
    }
    if (sn_dgram_open(data, len, k, r->udp_buf + (UDP_BATCH + 1) * SN_DGRAM_MAX, d, &why) != 0) {
        sn__relay_bad(r, why, d->node);
        return false;
    }
    /* each (run, number) once: a copy replayed from the network is not
     * the member speaking (it could answer a probe of a dead node) */
    if (p && sn_dgram_fresh(&p->dg_window, d->inc, d->seq) == SN_DGRAM_REPLAY) {
        sn__relay_bad(r, "datagram taken already (a replay), or more than 64 behind", d->node);
        return false;
    }
    return true;
}

/* The Envelope a datagram carried, decoded into *f and checked: a probe
 * (or an Error) from the node the datagram names. False if dropped. */
static bool datagram_frame(sn_relay_t *r, const sn_dgram_t *d, sn_frame_t *f)
{
    const char *why = "datagram: undecodable";
    if (sn_codec_decode(d->body, d->len, SN_DGRAM_BODY_MAX, f, &why) != 0) {
        sn__relay_bad(r, why, d->node);
        return false;
    }
    if ((f->kind != SN_FRAME_HEARTBEAT && f->kind != SN_FRAME_ERROR) || f->node != d->node ||
        (d->sealed && f->incarnation != d->inc)) {
        sn__relay_bad(r, "datagram: not a probe from the node it names", d->node);
        sn_frame_clear(f);
        return false;
    }
    return true;
}

void sn__relay_datagram(sn_relay_t *r, const uint8_t *data, size_t len, const struct sockaddr *from, unsigned fromlen)
{
    sn_dgram_t d;
    const char *why;
    char key[41] = "";
    if (sn_dgram_parse(data, len, &d, &why) != 0) {
        sn__relay_bad(r, why, 0);
        return;
    }
    if (d.sealed != (r->cert != NULL) || d.node == r->node) {
        sn__relay_bad(r,
                      d.node == r->node ? "datagram in this node's own name"
                      : d.sealed        ? "datagram sealed, but this cluster is not secure"
                                        : "datagram not sealed, but this cluster is secure",
                      d.node);
        return;
    }
    peer_t *p = sn__relay_find_peer(r, d.node);
    if (d.sealed && !unseal(r, p, data, len, &d, key))
        return;
    if (d.to_inc != r->incarnation) { /* for an earlier run of this node: its sender learns of the restart */
        SNLOG_DEBUG(r, "dropped a datagram from node %" PRIu32 " meant for an earlier run of this node", d.node);
        return;
    }
    sn_frame_t f;
    if (!datagram_frame(r, &d, &f))
        return;
    r->in_key = d.sealed ? key : NULL;
    r->in_from = from;
    r->in_fromlen = fromlen;
    sn__relay_inbound_decoded(r, &f, NULL, 0, NULL);
    r->in_key = NULL;
    r->in_from = NULL;
    if (d.sealed && !p && (p = sn__relay_find_peer(r, d.node)) != NULL) /* a stranger taken in: its window starts */
        (void)sn_dgram_fresh(&p->dg_window, d.inc, d.seq);
    sn_frame_clear(&f);
}

bool sn__relay_read_udp(sn_relay_t *r)
{
    struct mmsghdr msgs[UDP_BATCH];
    struct iovec iov[UDP_BATCH];
    struct sockaddr_storage from[UDP_BATCH];
    for (int round = 0; round < UDP_ROUNDS; round++) {
        for (int i = 0; i < UDP_BATCH; i++) {
            iov[i] = (struct iovec){r->udp_buf + (size_t)i * SN_DGRAM_MAX, SN_DGRAM_MAX};
            msgs[i].msg_hdr = (struct msghdr){
                .msg_name = &from[i], .msg_namelen = sizeof from[i], .msg_iov = &iov[i], .msg_iovlen = 1};
        }
        int got = recvmmsg(r->udp_fd, msgs, UDP_BATCH, MSG_DONTWAIT, NULL);
        if (got <= 0)
            return false; /* (EAGAIN: all read) */
        for (int i = 0; i < got; i++) {
            if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
                sn__relay_bad(r, "datagram: oversize", 0);
            else
                sn__relay_datagram(r, iov[i].iov_base, msgs[i].msg_len, (struct sockaddr *)&from[i],
                                   msgs[i].msg_hdr.msg_namelen);
        }
        if (got < UDP_BATCH)
            return false;
    }
    return true;
}

/* udp.h - SWIM's probes over UDP (udp.c): the socket, sealed datagrams out and
 * in, answers to their senders. I/O thread.
 */
#ifndef SN_UDP_H
#define SN_UDP_H

#include "relay_int.h"

/* udp.c (I/O thread): the probes' socket, bound on the listening host
 * and port (0; -1: no memory; a bind that fails only means probes over
 * TCP), and closed. send_probe sends a probe (an Envelope) to p as a
 * datagram, or on its connection where UDP does not go (sn__relay_try_send's
 * result); udp_answer sends a frame back to the sender of the datagram
 * being handled, as node `node`'s run `inc`; read_udp reads what waits
 * (true: it stopped on its budget); datagram is one datagram as it came
 * (tests/fuzz calls it without a socket). */
struct sockaddr;
int sn__udp_open(sn_relay_t *r);
void sn__udp_close(sn_relay_t *r);
bool sn__relay_send_probe(sn_relay_t *r, peer_t *p, const void *buf, size_t len);
void sn__relay_udp_answer(sn_relay_t *r, uint32_t node, uint64_t inc, const void *buf, size_t len);
bool sn__relay_read_udp(sn_relay_t *r);
void sn__relay_datagram(sn_relay_t *r, const uint8_t *data, size_t len, const struct sockaddr *from, unsigned fromlen);

#endif

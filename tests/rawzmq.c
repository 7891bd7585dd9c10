/* rawzmq.c - a hostile client for relay tests: connects a plain DEALER to a
 * node and sends frames a peer never would. Usage:
 *   rawzmq ENDPOINT garbage|truncated|oversize:BYTES|version|multipart|nobody
 * Exits 0 once the frame is handed to ZeroMQ.
 */
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: rawzmq ENDPOINT garbage|truncated|oversize:BYTES|version|multipart|nobody\n");
        return 2;
    }
    zsys_init();
    zsys_set_linger(1000);
    zsock_t *s = zsock_new(ZMQ_DEALER);
    if (!s || zsock_connect(s, "%s", argv[1]) < 0) {
        fprintf(stderr, "rawzmq: cannot connect to %s\n", argv[1]);
        return 1;
    }
    void *sock = zsock_resolve(s);
    const char *what = argv[2];
    int rc = 0;
    if (!strcmp(what, "garbage")) {
        unsigned char junk[100];
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (unsigned char)(0xff - i * 13);
        rc = zmq_send(sock, junk, sizeof junk, 0);
    } else if (!strcmp(what, "truncated") || !strcmp(what, "multipart")) {
        sn_payload_t *p = sn_payload_text("a perfectly good message");
        sn_wire_send_t one = {{1, 1}, {9, 1}, 0, SN_EV_MESSAGE, 0, p};
        void *buf;
        size_t len;
        if (sn_codec_encode_sends(9, 1, 0, &one, 1, &buf, &len) != 0)
            return 1;
        if (!strcmp(what, "truncated"))
            rc = zmq_send(sock, buf, len - 5, 0);
        else if ((rc = zmq_send(sock, buf, len, ZMQ_SNDMORE)) >= 0)
            rc = zmq_send(sock, "extra", 5, 0);
        free(buf);
        sn_payload_destroy(&p);
    } else if (!strncmp(what, "oversize:", 9)) {
        size_t n = strtoul(what + 9, NULL, 10);
        unsigned char *big = calloc(1, n);
        rc = zmq_send(sock, big, n, 0);
        free(big);
    } else if (!strcmp(what, "version")) {
        const unsigned char v7[] = {0x08, 0x07, 0x10, 0x09, 0x6a, 0x00}; /* version 7 heartbeat */
        rc = zmq_send(sock, v7, sizeof v7, 0);
    } else if (!strcmp(what, "nobody")) {
        const unsigned char nb[] = {0x08, 0x01, 0x10, 0x09}; /* version 1, node 9, no body */
        rc = zmq_send(sock, nb, sizeof nb, 0);
    } else {
        fprintf(stderr, "rawzmq: unknown frame kind '%s'\n", what);
        return 2;
    }
    zsock_destroy(&s);
    return rc < 0 ? 1 : 0;
}

/* twonodes.h - two nodes (scheduler and relay) in one test process, each
 * the other's static peer on 127.0.0.1, for the cmocka tests of the
 * cross-node path (test_relay_hold, test_relay_guest). */
#ifndef SN_TWONODES_H
#define SN_TWONODES_H

#include <stdio.h>
#include <time.h>

#include "../bench/free_port.h"
#include "relay.h"
#include "schednode/schednode.h"

typedef struct node {
    sn_sched_t *sched;
    sn_relay_t *relay;
} node_t;

/* The relays' limits (0: their defaults); a test sets them before it starts nodes. */
static struct {
    size_t max_frame, max_message, max_backlog;
    int backlog_fails;
    int steal; /* cross-node stealing on (1) or off (0) */
} tn_limits;

/* Node `id` (2 workers) listening on `port`, with node `peer_id` at
 * `peer_port` as its peer, and the ntypes types registered. */
static inline void node_start(node_t *nd, uint32_t id, int port, uint32_t peer_id, int peer_port,
                              const sn_type_t *types, size_t ntypes)
{
    char listen[64], peer_ep[64], err[256] = "";
    snprintf(listen, sizeof listen, "tcp://127.0.0.1:%d", port);
    snprintf(peer_ep, sizeof peer_ep, "tcp://127.0.0.1:%d", peer_port);
    if (!nd->sched) { /* (a test may make the scheduler first, to spawn before the relay takes frames) */
        nd->sched = sn_sched_new(&(sn_sched_config_t){id, 2, 1});
        assert_non_null(nd->sched);
        for (size_t i = 0; i < ntypes; i++)
            assert_int_equal(sn_type_register(nd->sched, &types[i]), 0);
    }
    sn_peer_config_t peer = {peer_id, peer_ep};
    sn_relay_config_t cfg = {.listen = listen,
                             .peers = &peer,
                             .npeers = 1,
                             .first_serial = 1,
                             .incarnation = (uint64_t)time(NULL),
                             .max_frame = tn_limits.max_frame,
                             .max_message = tn_limits.max_message,
                             .max_backlog = tn_limits.max_backlog,
                             .backlog_fails = tn_limits.backlog_fails,
                             .steal = tn_limits.steal,
                             .heartbeat_ms = 5000,
                             .down_after_ms = 120000};
    nd->relay = sn_relay_new(nd->sched, &cfg, err, sizeof err);
    if (!nd->relay)
        fail_msg("relay: %s", err);
}

static inline void node_stop(node_t *nd)
{
    sn_sched_shutdown(nd->sched, 5000);
    sn_relay_destroy(&nd->relay);
    sn_sched_destroy(&nd->sched);
}

/* Nodes 1 and 2 on two free ports (node 2 first: node 1's first frames
 * find it listening). */
static inline void two_nodes(node_t *n1, node_t *n2, const sn_type_t *types, size_t ntypes)
{
    sn_relay_set_log_level(1); /* warnings and errors */
    int p1 = free_port(), p2 = free_port();
    n1->sched = n2->sched = NULL;
    node_start(n2, 2, p2, 1, p1, types, ntypes);
    node_start(n1, 1, p1, 2, p2, types, ntypes);
}

#endif

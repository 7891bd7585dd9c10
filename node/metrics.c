/* metrics.c - a node's metrics in Prometheus's text format: every family
 * with its HELP and TYPE lines, counters named *_total, units in the
 * names (seconds), per-peer samples labelled peer="N".
 */
#include "metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "hist.h"
#include "sn_node.h"

/* Peers shown (the relay's table holds at most 256) */
#define SN_METRICS_PEERS 256

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void one(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
    family(f, name, type, help);
    fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* A histogram from hist.h's buckets (counts not cumulative, sum in ns):
 * the bucket lines cumulative, +Inf equal to _count. */
static void histogram(FILE *f, const char *name, const char *help, const uint64_t *counts, uint64_t sum_ns)
{
    family(f, name, "histogram", help);
    uint64_t total = 0, bound = SN_HIST_BASE_NS;
    for (unsigned i = 0; i < SN_HIST_BOUNDS; i++, bound <<= 2) {
        total += counts[i];
        fprintf(f, "%s_bucket{le=\"%.9g\"} %" PRIu64 "\n", name, (double)bound / 1e9, total);
    }
    total += counts[SN_HIST_BOUNDS];
    fprintf(f, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, total);
    fprintf(f, "%s_sum %.9f\n%s_count %" PRIu64 "\n", name, (double)sum_ns / 1e9, name, total);
}

static void scheduler(FILE *f, sn_sched_t *sched)
{
    sn_stats_t st;
    sn_sched_stats(sched, &st);
    family(f, "schednode_info", "gauge", "This node (the value is 1): its id.");
    fprintf(f, "schednode_info{node=\"%" PRIu32 "\",version=\"%s\"} 1\n", sn_sched_node_id(sched), SN_VERSION_STRING);
    one(f, "schednode_workers", "gauge", "Worker threads.", (uint64_t)sn_sched_workers(sched));
    one(f, "schednode_workers_idle", "gauge", "Worker threads asleep (nothing to run).", st.idle_workers);
    family(f, "schednode_processes", "gauge",
           "Processes on this node by state: ready (queued to run), waiting (for a yield to complete), idle "
           "(waiting for a message, or running). Approximate: read without stopping anything.");
    fprintf(f, "schednode_processes{state=\"ready\"} %" PRIu64 "\n", st.ready);
    fprintf(f, "schednode_processes{state=\"waiting\"} %" PRIu64 "\n", st.blocked);
    fprintf(f, "schednode_processes{state=\"idle\"} %" PRIu64 "\n", st.idle);
    one(f, "schednode_processes_spawned_total", "counter", "Processes created on this node.", st.spawned);
    one(f, "schednode_processes_finished_total", "counter", "Processes that finished here (done, failed or killed).",
        st.completed);
    family(f, "schednode_processes_migrated_total", "counter",
           "Processes that moved to this node (direction in) or from it (out).");
    fprintf(f, "schednode_processes_migrated_total{direction=\"in\"} %" PRIu64 "\n", st.migrated_in);
    fprintf(f, "schednode_processes_migrated_total{direction=\"out\"} %" PRIu64 "\n", st.migrated_out);
    one(f, "schednode_steps_total", "counter", "Step calls.", st.steps);
    one(f, "schednode_messages_delivered_total", "counter", "Messages delivered to processes on this node.",
        st.messages);
    one(f, "schednode_worker_steals_total", "counter", "Steals between this node's workers that moved work.",
        st.steals);
    uint64_t counts[SN_HIST_BOUNDS + 1] = {0}, sum = 0;
    sn__sched_step_hist(sched, counts, &sum);
    char help[128];
    snprintf(help, sizeof help, "Time a step call took, sampled: each worker times one step in %d.", SN_STEP_SAMPLE);
    histogram(f, "schednode_step_duration_seconds", help, counts, sum);
}

/* A per-peer counter family (field: which of sn_relay_peer_stats_t's). */
#define PEER_FAMILY(f, name, type, help, peers, n, fmt, expr)                                                          \
    do {                                                                                                               \
        family(f, name, type, help);                                                                                   \
        for (size_t i_ = 0; i_ < (n); i_++) {                                                                          \
            const sn_relay_peer_stats_t *p_ = &(peers)[i_];                                                            \
            fprintf(f, "%s{peer=\"%" PRIu32 "\"} " fmt "\n", name, p_->node, (expr));                                  \
        }                                                                                                              \
    } while (0)

static void peers(FILE *f, const sn_relay_peer_stats_t *ps, size_t n)
{
    PEER_FAMILY(f, "schednode_peer_up", "gauge", "Whether this node holds the peer up (1) or down or gone (0).", ps, n,
                "%d", p_->up);
    PEER_FAMILY(f, "schednode_messages_received_total", "counter", "Messages for processes here, from each peer.", ps,
                n, "%" PRIu64, p_->msgs_in);
    PEER_FAMILY(f, "schednode_messages_sent_total", "counter", "Messages for processes on each peer, sent to it.", ps,
                n, "%" PRIu64, p_->msgs_out);
    PEER_FAMILY(f, "schednode_steals_in_total", "counter", "Steals that brought processes here from each peer.", ps, n,
                "%" PRIu64, p_->steals_in);
    PEER_FAMILY(f, "schednode_steals_out_total", "counter", "Steals by each peer that took processes from here.", ps, n,
                "%" PRIu64, p_->steals_out);
    family(f, "schednode_peer_rtt_seconds", "gauge",
           "Round trip of the last failure-detection probe each peer answered directly.");
    for (size_t i = 0; i < n; i++)
        if (ps[i].rtt_ns)
            fprintf(f, "schednode_peer_rtt_seconds{peer=\"%" PRIu32 "\"} %.9f\n", ps[i].node,
                    (double)ps[i].rtt_ns / 1e9);
}

static void relay_metrics(FILE *f, sn_relay_t *relay)
{
    sn_relay_stats_t rs;
    sn_relay_stats(relay, &rs);
    one(f, "schednode_frames_received_total", "counter", "Frames read from the network.", rs.frames_in);
    one(f, "schednode_frames_sent_total", "counter", "Frames sent over the network.", rs.frames_out);
    one(f, "schednode_bad_frames_total", "counter",
        "Frames dropped: undecodable, oversize, wrong version or out of protocol.", rs.bad_frames);
    one(f, "schednode_refused_connections_total", "counter", "Connections refused in the CurveZMQ handshake.",
        rs.refused);
    one(f, "schednode_bounced_messages_total", "counter", "Sends returned to their senders with an error.", rs.bounced);
    one(f, "schednode_relay_queue_depth", "gauge",
        "Sends handed to the relay by workers, not yet taken by its I/O thread.", rs.queued);
    sn_relay_peer_stats_t ps[SN_METRICS_PEERS];
    size_t n = sn_relay_peer_stats(relay, ps, SN_METRICS_PEERS);
    peers(f, ps, n < SN_METRICS_PEERS ? n : SN_METRICS_PEERS);
    uint64_t counts[SN_HIST_BOUNDS + 1] = {0}, sum = 0;
    sn_relay_delivery_hist(relay, counts, &sum);
    histogram(f, "schednode_message_delivery_seconds",
              "Messages from other nodes: from the sender's send to this node's relay reading them (the two "
              "hosts' realtime clocks: includes their offset).",
              counts, sum);
}

char *sn_metrics_text(sn_sched_t *sched, sn_relay_t *relay, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    scheduler(f, sched);
    if (relay)
        relay_metrics(f, relay);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

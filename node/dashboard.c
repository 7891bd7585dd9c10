/* dashboard.c - the JSON the dashboard page reads (json-c): the cluster's
 * status rows as this node's relay gives them to `status`, this node's
 * per-peer counters, and its process table (inspect.c's snapshot).
 */
#include "dashboard.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "codec.h"
#include "sn_node.h"

/* How long the dashboard waits for its own node's answer, and for each
 * other member's flows; how many members it asks for theirs. */
#define STATUS_TIMEOUT_MS 2000
#define FLOWS_TIMEOUT_MS 500
#define FLOWS_MAX_NODES 16

static void put_u64(json_object *o, const char *key, uint64_t v)
{
    json_object_object_add(o, key, json_object_new_uint64(v));
}

static json_object *peers_json(sn_relay_t *relay)
{
    json_object *a = json_object_new_array();
    sn_relay_peer_stats_t ps[256];
    size_t n = sn_relay_peer_stats(relay, ps, 256);
    for (size_t i = 0; i < n && i < 256; i++) {
        json_object *o = json_object_new_object();
        put_u64(o, "peer", ps[i].node);
        json_object_object_add(o, "up", json_object_new_boolean(ps[i].up));
        put_u64(o, "msgs_in", ps[i].msgs_in);
        put_u64(o, "msgs_out", ps[i].msgs_out);
        put_u64(o, "steals_in", ps[i].steals_in);
        put_u64(o, "steals_out", ps[i].steals_out);
        json_object_object_add(o, "rtt_ms", json_object_new_double((double)ps[i].rtt_ns / 1e6));
        json_object_array_add(a, o);
    }
    return a;
}

/* One node's flows (its own counts with each peer), as the page reads them. */
static void add_flows(json_object *a, uint32_t from, const sn_wire_flow_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_new_object();
        put_u64(o, "from", from);
        put_u64(o, "peer", f[i].peer);
        put_u64(o, "msgs_in", f[i].msgs_in);
        put_u64(o, "msgs_out", f[i].msgs_out);
        put_u64(o, "steals_in", f[i].steals_in);
        put_u64(o, "steals_out", f[i].steals_out);
        json_object_array_add(a, o);
    }
}

/* The other members' flows: each is asked for its status (its reply
 * carries its own counts with each peer), a short wait each, the first
 * FLOWS_MAX_NODES members up only. A member that does not answer in time
 * is left out (the page then lacks its arrows, nothing else). */
/* Asks each other member that is up in `mine` (a status reply: row 0 is
 * the node itself), the first FLOWS_MAX_NODES of them with a short wait
 * each, with `op`, and hands each answer to fn (rep NULL: no answer, or
 * an error). What the flows and the process table share. */
typedef void (*member_fn)(void *arg, uint32_t node, const sn_wire_reply_t *rep);

static void each_member(const sn_wire_reply_t *mine, const sn_security_t *security, int op, member_fn fn, void *arg)
{
    size_t asked = 0;
    for (size_t i = 1; i < mine->nrows && asked < FLOWS_MAX_NODES; i++) {
        const sn_wire_stats_t *row = &mine->rows[i];
        if (row->state != SN_MEMBER_UP || !row->endpoint[0])
            continue;
        asked++;
        sn_wire_request_t req = {.id = 2, .op = op};
        sn_wire_reply_t rep;
        char err[256];
        if (sn_client_call(row->endpoint, security, &req, FLOWS_TIMEOUT_MS, &rep, err, sizeof err) != 0) {
            fn(arg, row->node, NULL);
            continue;
        }
        fn(arg, row->node, rep.error == 0 ? &rep : NULL);
        sn_client_reply_clear(&rep);
    }
}

/* each_member's callback for the flows: a member's own counts. */
static void member_flows(void *arg, uint32_t node, const sn_wire_reply_t *rep)
{
    if (rep && rep->nrows > 0 && rep->rows[0].node == node)
        add_flows(arg, node, rep->flows, rep->nflows);
}

/* The relay's endpoint as a client dials it: a wildcard host is this host. */
static void dial_endpoint(sn_relay_t *relay, char *out, size_t len)
{
    const char *ep = sn_relay_endpoint(relay);
    const char *host = strncmp(ep, "tcp://", 6) ? ep : ep + 6;
    const char *port = strrchr(host, ':');
    if (port && (!strncmp(host, "*:", 2) || !strncmp(host, "0.0.0.0:", 8)))
        snprintf(out, len, "tcp://127.0.0.1%s", port);
    else if (port && !strncmp(host, "[::]:", 5))
        snprintf(out, len, "tcp://[::1]%s", port);
    else
        snprintf(out, len, "%s", ep);
}

static char *finish(json_object *o)
{
    char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return s;
}

char *sn_dashboard_status(sn_sched_t *sched, sn_relay_t *relay, const sn_security_t *security, char *err, size_t errlen)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    json_object *o = json_object_new_object();
    put_u64(o, "node", sn_sched_node_id(sched));
    put_u64(o, "time_ms", (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u);
    json_object *nodes = json_object_new_array();
    json_object_object_add(o, "nodes", nodes);
    if (!relay) { /* alone: its own row, from the scheduler */
        sn_stats_t st;
        sn_sched_stats(sched, &st);
        sn_wire_stats_t r = {.node = sn_sched_node_id(sched),
                             .workers = (uint32_t)sn_sched_workers(sched),
                             .idle_workers = st.idle_workers,
                             .live = st.live,
                             .ready = st.ready,
                             .idle = st.idle,
                             .blocked = st.blocked,
                             .completed = st.completed};
        json_object_array_add(nodes, sn__status_row_json(&r));
        json_object_object_add(o, "peers", json_object_new_array());
        json_object_object_add(o, "flows", json_object_new_array());
        return finish(o);
    }
    char ep[SN_WIRE_ENDPOINT_MAX + 16];
    dial_endpoint(relay, ep, sizeof ep);
    sn_wire_request_t req = {.id = 1, .op = SN_OP_STATUS};
    sn_wire_reply_t rep;
    if (sn_client_call(ep, security, &req, STATUS_TIMEOUT_MS, &rep, err, errlen) != 0) {
        json_object_put(o);
        return NULL;
    }
    for (size_t i = 0; i < rep.nrows; i++)
        json_object_array_add(nodes, sn__status_row_json(&rep.rows[i]));
    json_object *flows = json_object_new_array();
    json_object_object_add(o, "flows", flows);
    add_flows(flows, sn_sched_node_id(sched), rep.flows, rep.nflows);
    each_member(&rep, security, SN_OP_STATUS, member_flows, flows);
    sn_client_reply_clear(&rep);
    json_object_object_add(o, "peers", peers_json(relay));
    return finish(o);
}

/* The process table: what it has gathered so far, across nodes. */
typedef struct procs {
    json_object *rows, *unanswered;
    uint64_t total, by_state[SN_PS_COUNT];
    size_t left; /* rows it may still list */
    bool truncated;
} procs_t;

static void add_procs(procs_t *t, uint32_t node, const sn_proc_row_t *rows, size_t n, uint64_t total,
                      const uint64_t *by_state)
{
    t->total += total;
    for (unsigned s = 0; s < SN_PS_COUNT; s++)
        t->by_state[s] += by_state[s];
    t->truncated |= total > n || n > t->left;
    for (size_t i = 0; i < n && t->left > 0; i++, t->left--) {
        char pid[SN_PID_STRLEN];
        json_object *p = json_object_new_object();
        json_object_object_add(p, "pid", json_object_new_string(sn_pid_format(rows[i].pid, pid, sizeof pid)));
        put_u64(p, "node", node);
        json_object_object_add(p, "type", json_object_new_string(rows[i].type));
        json_object_object_add(p, "state", json_object_new_string(sn__pstate_name(rows[i].state)));
        put_u64(p, "mailbox", rows[i].mailbox);
        put_u64(p, "steps", rows[i].steps);
        put_u64(p, "moves", rows[i].moves);
        json_object_array_add(t->rows, p);
    }
}

/* each_member's callback for the process table: a member's processes, or
 * its name in "unanswered". */
static void member_procs(void *arg, uint32_t node, const sn_wire_reply_t *rep)
{
    procs_t *t = arg;
    if (rep)
        add_procs(t, node, rep->procs, rep->nprocs, rep->total, rep->by_state);
    else
        json_object_array_add(t->unanswered, json_object_new_uint64(node));
}

/* The other members' processes: `ps` to each member up, as for the flows.
 * (The member list comes from this node's status, over the client socket
 * like the status page's.) */
static void others_procs(procs_t *t, sn_relay_t *relay, const sn_security_t *security)
{
    char ep[SN_WIRE_ENDPOINT_MAX + 16], err[256];
    dial_endpoint(relay, ep, sizeof ep);
    sn_wire_request_t req = {.id = 3, .op = SN_OP_STATUS};
    sn_wire_reply_t st;
    if (sn_client_call(ep, security, &req, STATUS_TIMEOUT_MS, &st, err, sizeof err) != 0)
        return;
    each_member(&st, security, SN_OP_PS, member_procs, t);
    sn_client_reply_clear(&st);
}

char *sn_dashboard_procs(sn_sched_t *sched, sn_relay_t *relay, const sn_security_t *security, size_t max)
{
    sn_proc_row_t *rows = calloc(max ? max : 1, sizeof *rows);
    if (!rows)
        return NULL;
    sn_proc_counts_t counts;
    size_t seen = sn__sched_snapshot(sched, rows, max, &counts);
    procs_t t = {.rows = json_object_new_array(), .unanswered = json_object_new_array(), .left = max};
    add_procs(&t, sn_sched_node_id(sched), rows, seen < max ? seen : max, counts.total, counts.by_state);
    free(rows);
    if (relay)
        others_procs(&t, relay, security);
    json_object *o = json_object_new_object();
    put_u64(o, "node", sn_sched_node_id(sched));
    put_u64(o, "total", t.total);
    json_object *by = json_object_new_object();
    for (unsigned s = 0; s < SN_PS_COUNT; s++)
        put_u64(by, sn__pstate_name(s), t.by_state[s]);
    json_object_object_add(o, "by_state", by);
    json_object_object_add(o, "procs", t.rows);
    json_object_object_add(o, "truncated", json_object_new_boolean(t.truncated));
    json_object_object_add(o, "unanswered", t.unanswered);
    return finish(o);
}

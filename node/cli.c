/* cli.c - the client commands (cli.h): spawn, send, call and status ask
 * the node at --connect (spawn and call --on N: node N, found in its
 * status); ps, kill, migrate and types ask each node of its cluster (the
 * status answer lists them), since a node answers for itself only; drain
 * and undrain ask the node --node names (found in the status), or the one
 * at --connect.
 * --json output is built with json-c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <czmq.h>
#include <json-c/json.h>

#include "cli.h"
#include "codec.h"
#include "svcrule.h"

#define REQUEST_MS 10000     /* one request's wait, unless --timeout says (not call's: it waits for a process) */
#define KILL_GRACE_MS 5000   /* kill: time from CANCEL to the force, unless --timeout says */
#define KILL_FORCED_MS 10000 /* kill: how long a forced process may take to finish the step it is in */
#define POLL_MS 20           /* kill: how often it looks whether the process has ended */
#define HOPS_MAX 8           /* following a process from node to node */

static const char *const progname = "schednode";

void sn_cli_vusage(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", progname);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --help'.\n", progname);
    exit(SN_EXIT_USAGE);
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sn_cli_vusage(fmt, ap);
}

const char *const sn_cli_commands[] = {"spawn", "send",    "call",  "status",  "ps",    "kill",    "migrate",
                                       "drain", "undrain", "types", "whereis", "names", "service", NULL};

int sn_cli_is_command(const char *cmd)
{
    for (size_t i = 0; cmd && sn_cli_commands[i]; i++)
        if (!strcmp(cmd, sn_cli_commands[i]))
            return 1;
    return 0;
}

void sn_cli_print_result(int rc, const sn_payload_t *res)
{
    if (rc != 0) {
        fprintf(stderr, "%s: process failed: %s%s%s\n", progname, sn_strerror(rc), res ? ": " : "",
                res ? (const char *)res->data : "");
        return;
    }
    if (!res) {
        printf("ok\n");
    } else if (res->ctype == SN_CT_U64 && res->len == 8) {
        uint64_t v;
        sn_payload_get_u64(res, &v);
        printf("%" PRIu64 "\n", v);
    } else if (res->ctype == SN_CT_PID) {
        sn_pid_t pid;
        char buf[SN_PID_STRLEN];
        sn_payload_get_pid(res, &pid);
        printf("%s\n", sn_pid_format(pid, buf, sizeof buf));
    } else {
        fwrite(res->data, 1, res->len, stdout);
        fputc('\n', stdout);
    }
}

/* ------------------------------------------------------------- signals */

/* SIGINT and SIGTERM end every wait of a client command at once: the
 * handler notes the first signal and writes to a pipe that every wait
 * polls (sn_client_interrupt), so none misses it; the command then undoes
 * what it started (call: cancels its process) and exits 128 + the signal,
 * as shells expect (130, 143). SA_RESETHAND: a second signal ends the
 * program outright. Guarded by cli.sh (SIGINT and SIGTERM to call). */
static volatile sig_atomic_t got_signal;
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    if (!got_signal)
        got_signal = sig;
    char b = 1;
    ssize_t n = write(sig_pipe[1], &b, 1);
    (void)n;
    errno = saved;
}

static void catch_signals(void)
{
    zsys_handler_set(NULL); /* czmq's own (zsys_init) would take them from us */
    if (pipe(sig_pipe) != 0)
        return;
    for (int i = 0; i < 2; i++) {
        fcntl(sig_pipe[i], F_SETFL, O_NONBLOCK);
        fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESETHAND};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sn_client_interrupt(sig_pipe[0]);
}

static const char *signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

/* Sleeps ms, or less if a signal comes. */
static void nap(int ms)
{
    struct pollfd p = {sig_pipe[0], POLLIN, 0};
    if (!got_signal)
        poll(&p, 1, ms);
}

/* ------------------------------------------------------------ requests */

/* One request to the node at ep, waiting up to ms (< 0: forever). 0 with
 * *rep filled (clear it), or an error with err set. */
static int ask(const sn_cli_t *c, const char *ep, sn_wire_request_t *req, int ms, sn_wire_reply_t *rep, char *err,
               size_t errlen)
{
    static uint64_t serial;
    req->id = ((uint64_t)getpid() << 20) + ++serial; /* this run's answers, in order */
    return sn_client_call(ep, c->security, req, ms, rep, err, errlen);
}

static int request_ms(const sn_cli_t *c)
{
    return c->timeout_ms >= 0 ? c->timeout_ms : REQUEST_MS;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The cluster as the node at --connect knows it: one row per member. */
typedef struct cluster {
    sn_wire_reply_t status;
} cluster_t;

static int cluster_load(const sn_cli_t *c, cluster_t *cl)
{
    char err[512];
    sn_wire_request_t req = {.op = SN_OP_STATUS};
    if (ask(c, c->connect, &req, request_ms(c), &cl->status, err, sizeof err) != 0 || cl->status.error) {
        fprintf(stderr, "%s: %s: cannot list the cluster's nodes: %s\n", progname, c->cmd,
                cl->status.error ? sn_strerror(cl->status.error) : err);
        sn_client_reply_clear(&cl->status);
        return -1;
    }
    return 0;
}

static const sn_wire_stats_t *cluster_node(const cluster_t *cl, uint32_t id)
{
    for (size_t i = 0; i < cl->status.nrows; i++)
        if (cl->status.rows[i].node == id)
            return &cl->status.rows[i];
    return NULL;
}

/* A member that may answer: up, or suspected (it may be only slow). */
static int node_alive(const sn_wire_stats_t *n)
{
    return n->state == SN_MEMBER_UP || n->state == SN_MEMBER_SUSPECT;
}

const char *sn__member_state_name(int state)
{
    static const char *names[] = {"up", "suspect", "down", "left", "joining"};
    return state >= 0 && state < 5 ? names[state] : "?";
}

const char *sn__row_state_name(const sn_wire_stats_t *r)
{
    return r->draining && r->state == SN_MEMBER_UP ? "draining" : sn__member_state_name(r->state);
}

/* ---------------------------------------------------------------- json */

static json_object *json_u64(uint64_t v)
{
    return json_object_new_uint64(v);
}

/* Prints a JSON document (pretty, "key": value, slashes as they are) and frees it. */
static void json_print(json_object *o)
{
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                               JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

/* ------------------------------------------------------------- status */

json_object *sn__status_row_json(const sn_wire_stats_t *r)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_u64(r->node));
    json_object_object_add(o, "endpoint", json_object_new_string(r->endpoint));
    json_object_object_add(o, "state", json_object_new_string(sn__row_state_name(r)));
    json_object_object_add(o, "draining", json_object_new_boolean(r->draining != 0));
    const struct {
        const char *key;
        uint64_t v;
    } f[] = {{"workers", r->workers},
             {"idle_workers", r->idle_workers},
             {"live", r->live},
             {"ready", r->ready},
             {"idle", r->idle},
             {"blocked", r->blocked},
             {"completed", r->completed},
             {"msgs_in", r->msgs_in},
             {"msgs_out", r->msgs_out},
             {"steals_in", r->steals_in},
             {"steals_out", r->steals_out},
             {"migrated", r->migrated},
             {"forwarded", r->forwarded},
             {"refused", r->refused},
             {"disconnects", r->disconnects},
             {"forwarding", r->forwarding},
             {"bad_frames", r->bad_frames},
             {"uptime_ms", r->uptime_ms}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        json_object_object_add(o, f[i].key, json_u64(f[i].v));
    return o;
}

/* `status`: one row per node, as a table or as JSON (one object with a
 * "nodes" array; every figure a number, state and endpoint strings). */
static void print_status(const sn_wire_stats_t *rows, size_t n, int json)
{
    if (json) {
        json_object *o = json_object_new_object(), *a = json_object_new_array();
        for (size_t i = 0; i < n; i++)
            json_object_array_add(a, sn__status_row_json(&rows[i]));
        json_object_object_add(o, "nodes", a);
        json_print(o);
        return;
    }
    int wn = 6, we = 28; /* the columns widen for 10-digit node ids and long endpoints */
    for (size_t i = 0; i < n; i++) {
        int l = snprintf(NULL, 0, "%u", rows[i].node), le = (int)strlen(rows[i].endpoint);
        wn = l > wn ? l : wn;
        we = le > we ? le : we;
    }
    printf("%-*s %-*s %-8s %7s %7s %7s %7s %9s %10s %10s %6s %6s %10s\n", wn, "NODE", we, "ENDPOINT", "STATE",
           "WORKERS", "READY", "IDLE", "BLOCKED", "DONE", "MSGS_IN", "MSGS_OUT", "ST_IN", "ST_OUT", "UPTIME");
    for (size_t i = 0; i < n; i++) {
        const sn_wire_stats_t *r = &rows[i];
        if (r->workers == 0) { /* a member whose row has not reached this node yet (it comes with the probes) */
            printf("%-*u %-*s %-8s %7s %7s %7s %7s %9s %10s %10s %6s %6s %10s\n", wn, r->node, we, r->endpoint,
                   sn__member_state_name(r->state), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-");
            continue;
        }
        char up[32];
        snprintf(up, sizeof up, "%" PRIu64 ".%01" PRIu64 "s", r->uptime_ms / 1000, r->uptime_ms % 1000 / 100);
        printf("%-*u %-*s %-8s %7u %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %9" PRIu64 " %10" PRIu64 " %10" PRIu64
               " %6" PRIu64 " %6" PRIu64 " %10s\n",
               wn, r->node, we, r->endpoint, sn__row_state_name(r), r->workers, r->ready, r->idle, r->blocked,
               r->completed, r->msgs_in, r->msgs_out, r->steals_in, r->steals_out, up);
    }
}

/* ------------------------------------------------------- ps and types */

/* Each node asked (ps, types): the nodes --node names, or all, in the
 * order the status lists them. Calls each(c, node, reply, err, arg) with
 * the answer (reply NULL and err set when there is none). Returns how many
 * nodes did not answer or answered an error; -1 if --node names none. */
static int each_node(const sn_cli_t *c, const cluster_t *cl, int op,
                     void (*each)(const sn_cli_t *, const sn_wire_stats_t *, const sn_wire_reply_t *, const char *,
                                  void *),
                     void *arg)
{
    int bad = 0, asked = 0;
    for (size_t i = 0; i < cl->status.nrows; i++) {
        const sn_wire_stats_t *n = &cl->status.rows[i];
        if (c->only_node && n->node != c->only_node)
            continue;
        asked++;
        char err[512];
        if (!node_alive(n)) {
            snprintf(err, sizeof err, "the node is %s", sn__member_state_name(n->state));
            each(c, n, NULL, err, arg);
            bad++;
            continue;
        }
        sn_wire_request_t req = {.op = op};
        sn_wire_reply_t rep;
        int rc = ask(c, n->endpoint, &req, request_ms(c), &rep, err, sizeof err);
        if (rc == 0 && rep.error)
            snprintf(err, sizeof err, "%s", rep.reason && *rep.reason ? rep.reason : sn_strerror(rep.error));
        each(c, n, rc == 0 && !rep.error ? &rep : NULL, err, arg);
        bad += rc != 0 || rep.error;
        sn_client_reply_clear(&rep);
    }
    return asked ? bad : -1;
}

/* What ps and types gather: JSON (ps's processes, the nodes), or a table
 * printed as the answers come. */
typedef struct gather {
    json_object *procs, *nodes;
    int header;
} gather_t;

/* One node's part of a JSON answer: id, endpoint, and its error if any. */
static json_object *node_json(const sn_wire_stats_t *n, const char *err)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_u64(n->node));
    json_object_object_add(o, "endpoint", json_object_new_string(n->endpoint));
    if (err)
        json_object_object_add(o, "error", json_object_new_string(err));
    return o;
}

static json_object *proc_json(const sn_proc_row_t *p, uint32_t node)
{
    char pid[SN_PID_STRLEN];
    json_object *o = json_object_new_object();
    json_object_object_add(o, "pid", json_object_new_string(sn_pid_format(p->pid, pid, sizeof pid)));
    json_object_object_add(o, "node", json_u64(node));
    json_object_object_add(o, "type", json_object_new_string(p->type));
    json_object_object_add(o, "state", json_object_new_string(sn__pstate_name(p->state)));
    json_object_object_add(o, "mailbox", json_u64(p->mailbox));
    json_object_object_add(o, "steps", json_u64(p->steps));
    json_object_object_add(o, "moves", json_u64(p->moves));
    return o;
}

static void ps_json(const sn_wire_stats_t *n, const sn_wire_reply_t *rep, gather_t *g)
{
    json_object *o = node_json(n, NULL), *by = json_object_new_object();
    json_object_object_add(o, "total", json_u64(rep->total));
    json_object_object_add(o, "shown", json_u64(rep->nprocs));
    for (unsigned s = 0; s < SN_PS_COUNT; s++)
        json_object_object_add(by, sn__pstate_name(s), json_u64(rep->by_state[s]));
    json_object_object_add(o, "by_state", by);
    json_object_array_add(g->nodes, o);
    for (size_t i = 0; i < rep->nprocs; i++)
        json_object_array_add(g->procs, proc_json(&rep->procs[i], rep->node ? rep->node : n->node));
}

static void ps_each(const sn_cli_t *c, const sn_wire_stats_t *n, const sn_wire_reply_t *rep, const char *err, void *arg)
{
    gather_t *g = arg;
    if (!rep) {
        fprintf(stderr, "%s: ps: node %" PRIu32 " (%s): %s\n", progname, n->node, n->endpoint, err);
        if (c->json)
            json_object_array_add(g->nodes, node_json(n, err));
        return;
    }
    if (c->json) {
        ps_json(n, rep, g);
        return;
    }
    if (!g->header++)
        printf("%-10s %-22s %-20s %-8s %8s %10s %6s\n", "NODE", "PID", "TYPE", "STATE", "MAILBOX", "STEPS", "MOVED");
    for (size_t i = 0; i < rep->nprocs; i++) {
        const sn_proc_row_t *p = &rep->procs[i];
        char pid[SN_PID_STRLEN];
        printf("%-10" PRIu32 " %-22s %-20s %-8s %8" PRIu32 " %10" PRIu64 " %6" PRIu32 "\n", n->node,
               sn_pid_format(p->pid, pid, sizeof pid), p->type, sn__pstate_name(p->state), p->mailbox, p->steps,
               p->moves);
    }
    if (rep->total > rep->nprocs)
        printf("(node %" PRIu32 ": %zu of its %" PRIu64 " process%s shown)\n", n->node, rep->nprocs, rep->total,
               rep->total == 1 ? "" : "es");
}

static void types_each(const sn_cli_t *c, const sn_wire_stats_t *n, const sn_wire_reply_t *rep, const char *err,
                       void *arg)
{
    gather_t *g = arg;
    if (!rep)
        fprintf(stderr, "%s: types: node %" PRIu32 " (%s): %s\n", progname, n->node, n->endpoint, err);
    if (c->json) {
        json_object *o = node_json(n, rep ? NULL : err), *a = json_object_new_array();
        for (size_t i = 0; rep && i < rep->ntypes; i++) {
            json_object *t = json_object_new_object();
            json_object_object_add(t, "name", json_object_new_string(rep->types[i].name));
            json_object_object_add(t, "version", json_u64(rep->types[i].version));
            json_object_object_add(t, "migratable", json_object_new_boolean(rep->types[i].migratable));
            json_object_array_add(a, t);
        }
        json_object_object_add(o, "types", a);
        json_object_array_add(g->nodes, o);
        return;
    }
    if (!rep)
        return;
    if (!g->header++)
        printf("%-6s %-32s %8s %s\n", "NODE", "TYPE", "VERSION", "MIGRATABLE");
    for (size_t i = 0; i < rep->ntypes; i++)
        printf("%-6" PRIu32 " %-32s %8" PRIu32 " %s\n", n->node, rep->types[i].name, rep->types[i].version,
               rep->types[i].migratable ? "yes" : "no");
}

/* ps and types: every node's answer; exit 1 if any node gave none. */
static int cmd_list(const sn_cli_t *c, int op)
{
    if (c->nargs != 0)
        usage_error("usage: %s [--json] [--node N] --connect ENDPOINT", c->cmd);
    cluster_t cl;
    if (cluster_load(c, &cl) != 0)
        return SN_EXIT_FAILED;
    gather_t g = {0};
    if (c->json) {
        g.procs = json_object_new_array();
        g.nodes = json_object_new_array();
    }
    int bad = each_node(c, &cl, op, op == SN_OP_PS ? ps_each : types_each, &g);
    if (bad < 0)
        fprintf(stderr, "%s: %s: node %" PRIu32 " is not a member of the cluster of %s\n", progname, c->cmd,
                c->only_node, c->connect);
    if (c->json) {
        json_object *o = json_object_new_object();
        if (op == SN_OP_PS)
            json_object_object_add(o, "processes", g.procs);
        else
            json_object_put(g.procs);
        json_object_object_add(o, "nodes", g.nodes);
        json_print(o);
    }
    sn_client_reply_clear(&cl.status);
    return bad ? SN_EXIT_FAILED : 0;
}

/* ---------------------------------------------------------------- kill */

/* How a killed process ended, as the node that ended it tells (it keeps
 * the latest ends of the processes clients killed). */
typedef struct end {
    int known, error;
    sn_payload_t *result;
} end_t;

/* A result for one line: a u64 or a PID as a number, text as it is (cut). */
static const char *result_text(const sn_payload_t *p, char *buf, size_t len)
{
    uint64_t v;
    sn_pid_t pid;
    if (!p)
        snprintf(buf, len, "no result");
    else if (p->ctype == SN_CT_U64 && sn_payload_get_u64(p, &v) == 0)
        snprintf(buf, len, "%" PRIu64, v);
    else if (p->ctype == SN_CT_PID && sn_payload_get_pid(p, &pid) == 0)
        sn_pid_format(pid, buf, len);
    else
        snprintf(buf, len, "%.*s", p->len > 400 ? 400 : (int)p->len, (const char *)p->data);
    return buf;
}

/* ": done, result 3" or ": failed (canceled): REASON", or "" if unknown. */
static const char *end_text(const end_t *e, char *buf, size_t len)
{
    char res[512];
    if (!e->known)
        buf[0] = 0;
    else if (e->error == 0)
        snprintf(buf, len, ": done, result %s", result_text(e->result, res, sizeof res));
    else
        snprintf(buf, len, ": failed (%s): %s", sn_strerror(e->error), result_text(e->result, res, sizeof res));
    return buf;
}

/* Where pid is now: the node that has it (its row in *row), or 0 if no
 * node has it (it ended, or never was). Starts at `node` (its home, or
 * where it was last) and follows where each node says it went; when that
 * leads nowhere it could ask, it asks every node. */
static uint32_t locate(const sn_cli_t *c, const cluster_t *cl, sn_pid_t pid, uint32_t node, sn_proc_row_t *row,
                       end_t *end)
{
    for (int hop = 0; hop < HOPS_MAX; hop++) {
        const sn_wire_stats_t *n = cluster_node(cl, node);
        if (!n || !node_alive(n))
            break;
        char err[512];
        sn_wire_request_t req = {.op = SN_OP_PS, .to = pid};
        sn_wire_reply_t rep;
        if (ask(c, n->endpoint, &req, REQUEST_MS, &rep, err, sizeof err) != 0)
            break;
        uint32_t found = rep.error == 0 && rep.nprocs == 1 ? n->node : 0, next = rep.moved_to;
        if (found)
            *row = rep.procs[0];
        if (rep.ended && end) { /* it ended there, and that node saw how */
            sn_payload_destroy(&end->result);
            *end = (end_t){1, rep.end_error, sn_take(&rep.result)};
        }
        int other = rep.error != 0 && rep.error != SN_ENOPROC;
        sn_client_reply_clear(&rep);
        if (found || (!next && !other))
            return found;
        if (other)
            break;
        node = next;
    }
    for (size_t i = 0; i < cl->status.nrows; i++) { /* the path is broken: ask everyone */
        const sn_wire_stats_t *n = &cl->status.rows[i];
        char err[512];
        sn_wire_request_t req = {.op = SN_OP_PS, .to = pid};
        sn_wire_reply_t rep;
        if (!node_alive(n) || ask(c, n->endpoint, &req, REQUEST_MS, &rep, err, sizeof err) != 0)
            continue;
        uint32_t found = rep.error == 0 && rep.nprocs == 1 ? n->node : 0;
        if (found)
            *row = rep.procs[0];
        sn_client_reply_clear(&rep);
        if (found)
            return found;
    }
    return 0;
}

/* Sends KILL (CANCEL, or the force) for pid to node. 0, or an error
 * (SN_ENOPROC: not there any more). */
static int kill_at(const sn_cli_t *c, const cluster_t *cl, uint32_t node, sn_pid_t pid, int force, const char *reason)
{
    const sn_wire_stats_t *n = cluster_node(cl, node);
    char err[512];
    sn_wire_request_t req = {.op = SN_OP_KILL, .to = pid, .force = force, .reason = (char *)reason};
    sn_wire_reply_t rep;
    int rc = n ? ask(c, n->endpoint, &req, REQUEST_MS, &rep, err, sizeof err) : SN_ENOPROC;
    if (rc == 0) {
        rc = rep.error;
        sn_client_reply_clear(&rep);
    } else if (n) {
        fprintf(stderr, "%s: kill: node %" PRIu32 ": %s\n", progname, node, err);
    }
    return rc;
}

/* Waits up to ms for pid to end; *node follows it if it moves (and with
 * `force`, the force is sent again where it went). True once it is gone. */
static bool wait_gone(const sn_cli_t *c, const cluster_t *cl, sn_pid_t pid, uint32_t *node, int ms, int force,
                      const char *reason, end_t *how)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    for (;;) {
        sn_proc_row_t row;
        uint32_t at = locate(c, cl, pid, *node, &row, how);
        if (got_signal) /* (a request it interrupted found nothing: that says nothing) */
            return false;
        if (!at)
            return true;
        if (at != *node && force)
            kill_at(c, cl, at, pid, 1, reason);
        *node = at;
        if (now_ms() >= end || got_signal)
            return false;
        nap(POLL_MS);
    }
}

/* The CANCEL: where the process is, then there. It may move on between
 * the two (a node that has been asked to kill it holds it from then on):
 * then it is looked for again. *node gets where it was; 0 or an error. */
static int first_kill(const sn_cli_t *c, const cluster_t *cl, sn_pid_t pid, const char *reason, uint32_t *node,
                      end_t *how)
{
    sn_proc_row_t row;
    int rc = SN_ENOPROC;
    *node = pid.node;
    for (int tries = 0; tries < 3 && rc == SN_ENOPROC; tries++) {
        *node = locate(c, cl, pid, *node ? *node : pid.node, &row, how);
        if (!*node)
            break;
        rc = kill_at(c, cl, *node, pid, 0, reason);
    }
    return rc;
}

/* kill PID: CANCEL (with the reason), then after --timeout the force. */
static int cmd_kill(const sn_cli_t *c)
{
    sn_pid_t pid;
    if (c->nargs != 1)
        usage_error("usage: kill PID [--reason TEXT] [--timeout MS] --connect ENDPOINT");
    if (sn_pid_parse(c->args[0], &pid) != 0)
        usage_error("kill: '%s' is not a PID (NODE.SERIAL, e.g. 2.17)", c->args[0]);
    const char *reason = c->reason ? c->reason : "killed by schednode kill";
    int grace = c->timeout_ms >= 0 ? c->timeout_ms : KILL_GRACE_MS;
    sn_cli_t asks = *c; /* --timeout is the grace: each request waits REQUEST_MS */
    asks.timeout_ms = -1;
    c = &asks;
    cluster_t cl;
    if (cluster_load(c, &cl) != 0)
        return SN_EXIT_FAILED;
    end_t how = {0};
    char text[1024];
    uint32_t node;
    int rc = first_kill(c, &cl, pid, reason, &node, &how), code = 0;
    uint64_t t0 = now_ms();
    if (got_signal) {
        fprintf(stderr, "%s: kill: %s: stopped (%s) while looking for the process to CANCEL it\n", progname, c->args[0],
                signal_name(got_signal));
    } else if (rc == SN_ENOPROC && how.known) {
        fprintf(stderr, "%s: kill: %s has already ended%s\n", progname, c->args[0], end_text(&how, text, sizeof text));
        code = SN_EXIT_NOPROC;
    } else if (rc == SN_ENOPROC) {
        fprintf(stderr, "%s: kill: no process %s in the cluster (it has ended, or never existed)\n", progname,
                c->args[0]);
        code = SN_EXIT_NOPROC;
    } else if (rc != 0) {
        fprintf(stderr, "%s: kill: %s: %s\n", progname, c->args[0], sn_strerror(rc));
        code = SN_EXIT_FAILED;
    } else if (wait_gone(c, &cl, pid, &node, grace, 0, reason, &how)) {
        printf("%s ended after CANCEL (%" PRIu64 " ms)%s\n", c->args[0], now_ms() - t0,
               end_text(&how, text, sizeof text));
    } else if (got_signal) { /* the CANCEL stands; the force is not sent */
        fprintf(stderr, "%s: kill: %s: stopped waiting (%s): %s has the CANCEL, it is not forced\n", progname,
                c->args[0], signal_name(got_signal), c->args[0]);
    } else if ((rc = kill_at(c, &cl, node, pid, 1, reason)) != 0 && rc != SN_ENOPROC) {
        fprintf(stderr, "%s: kill: %s: the force failed: %s\n", progname, c->args[0], sn_strerror(rc));
        code = SN_EXIT_FAILED;
    } else if (wait_gone(c, &cl, pid, &node, KILL_FORCED_MS, 1, reason, &how)) {
        printf("%s killed: still running %d ms after CANCEL, forced%s\n", c->args[0], grace,
               end_text(&how, text, sizeof text));
    } else if (got_signal) {
        fprintf(stderr, "%s: kill: %s: stopped waiting (%s): it is forced, and ends when its step returns\n", progname,
                c->args[0], signal_name(got_signal));
    } else {
        fprintf(stderr,
                "%s: kill: %s is still in a step %d ms after it was forced (a step cannot be interrupted: the process "
                "ends when that step returns)\n",
                progname, c->args[0], KILL_FORCED_MS);
        code = SN_EXIT_TIMEOUT;
    }
    sn_payload_destroy(&how.result);
    sn_client_reply_clear(&cl.status);
    return code;
}

/* ------------------------------------------------------------- names */

/* Asks the node at --connect to run the names helper `method` (whereis,
 * names: relay/names.c) and answer its result: 0 and *rep, or -1 said. */
static int names_ask(const sn_cli_t *c, char *method, const char *arg, sn_wire_reply_t *rep)
{
    sn_wire_request_t req = {.op = SN_OP_CALL, .type = "sn.names", .method = method};
    req.arg = arg ? sn_payload_text(arg) : NULL;
    char err[512];
    int rc = ask(c, c->connect, &req, request_ms(c), rep, err, sizeof err);
    sn_payload_destroy(&req.arg);
    if (rc != 0)
        fprintf(stderr, "%s: %s: %s\n", progname, c->cmd, err);
    return rc == 0 ? 0 : -1;
}

/* The PID registered under name into *pid: 0, SN_ENOPROC (none), or -1
 * (no answer, said). */
static int name_lookup(const sn_cli_t *c, const char *name, sn_pid_t *pid)
{
    sn_wire_reply_t rep;
    if (names_ask(c, (char *)"whereis", name, &rep) != 0)
        return -1;
    int rc = rep.error ? rep.error : !rep.result || sn_payload_get_pid(rep.result, pid) != 0 ? SN_EPROTO : 0;
    if (rc && rc != SN_ENOPROC)
        fprintf(stderr, "%s: %s: %s: %s\n", progname, c->cmd, name, sn_strerror(rc));
    sn_client_reply_clear(&rep);
    return rc == 0 || rc == SN_ENOPROC ? rc : -1;
}

/* whereis NAME: the PID, exit 1 if none (names.sh). */
static int cmd_whereis(const sn_cli_t *c)
{
    if (c->nargs != 1)
        usage_error("usage: whereis NAME --connect ENDPOINT");
    sn_pid_t pid;
    int rc = name_lookup(c, c->args[0], &pid);
    char buf[SN_PID_STRLEN];
    if (rc == 0)
        printf("%s\n", sn_pid_format(pid, buf, sizeof buf));
    else if (rc == SN_ENOPROC)
        fprintf(stderr, "%s: whereis: no process is named %s\n", progname, c->args[0]);
    return rc == 0 ? 0 : SN_EXIT_FAILED;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* names [--json]: every node's records, "NAME PID" lines sorted by name. */
static int cmd_names(const sn_cli_t *c)
{
    if (c->nargs != 0)
        usage_error("usage: names [--json] --connect ENDPOINT");
    sn_wire_reply_t rep;
    if (names_ask(c, (char *)"names", NULL, &rep) != 0)
        return SN_EXIT_FAILED;
    if (rep.error || !rep.result) {
        fprintf(stderr, "%s: names: %s\n", progname, sn_strerror(rep.error ? rep.error : SN_EPROTO));
        sn_client_reply_clear(&rep);
        return SN_EXIT_FAILED;
    }
    char *text = strndup((const char *)rep.result->data, rep.result->len), *save = NULL;
    sn_client_reply_clear(&rep);
    size_t n = 0, cap = 0;
    char **lines = NULL;
    for (char *l = text ? strtok_r(text, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        char **more = n == cap ? realloc(lines, (cap = cap ? cap * 2 : 64) * sizeof *lines) : lines;
        if (!more)
            break;
        lines = more;
        lines[n++] = l;
    }
    qsort(lines, n, sizeof *lines, cmp_str);
    json_object *arr = c->json ? json_object_new_array() : NULL;
    for (size_t i = 0; i < n; i++) {
        char *sp = strrchr(lines[i], ' ');
        if (!sp)
            continue;
        *sp = 0;
        if (!arr) {
            printf("%-24s %s\n", lines[i], sp + 1);
            continue;
        }
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(lines[i]));
        json_object_object_add(o, "pid", json_object_new_string(sp + 1));
        json_object_array_add(arr, o);
    }
    if (arr) {
        json_object *top = json_object_new_object();
        json_object_object_add(top, "names", arr);
        printf("%s\n", json_object_to_json_string_ext(top, JSON_C_TO_STRING_PLAIN));
        json_object_put(top);
    }
    free(lines);
    free(text);
    return 0;
}

/* ------------------------------------------------------------ services */

/* Asks the node at --connect to run the services helper `method` (add,
 * rm, ls: relay/services.c): 0 and its result in *res, an error said
 * (exit 1), or -1 (no answer, said). */
static int service_ask(const sn_cli_t *c, const char *method, sn_payload_t *arg, sn_payload_t **res)
{
    sn_wire_request_t req = {.op = SN_OP_CALL, .type = "sn.services", .method = (char *)method, .arg = arg};
    char err[512];
    sn_wire_reply_t rep;
    int rc = ask(c, c->connect, &req, request_ms(c), &rep, err, sizeof err);
    sn_payload_destroy(&req.arg);
    if (rc != 0) {
        fprintf(stderr, "%s: service %s: %s\n", progname, method, err);
        return -1;
    }
    rc = rep.error;
    if (rc) {
        const char *why = rep.result ? (const char *)rep.result->data : rep.reason ? rep.reason : "";
        fprintf(stderr, "%s: service %s: %s%s%s\n", progname, method, sn_strerror(rc), *why ? ": " : "", why);
    } else {
        *res = sn_take(&rep.result);
    }
    sn_client_reply_clear(&rep);
    return rc;
}

typedef struct svc_row {
    char *name, *pid, *restarts, *state, *policy, *type, *method;
    const char *node;
} svc_row_t;

static int cmp_svc(const void *a, const void *b)
{
    return strcmp(((const svc_row_t *)a)->name, ((const svc_row_t *)b)->name);
}

static void print_services(svc_row_t *rows, size_t n, int json)
{
    qsort(rows, n, sizeof *rows, cmp_svc);
    json_object *arr = json ? json_object_new_array() : NULL;
    if (!json)
        printf("%-24s %-24s %-6s %-8s %s\n", "NAME", "PID", "NODE", "RESTARTS", "STATE");
    for (size_t i = 0; i < n; i++) {
        svc_row_t *r = &rows[i];
        if (!arr) {
            printf("%-24s %-24s %-6s %-8s %s\n", r->name, r->pid, r->node, r->restarts, r->state);
            continue;
        }
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(r->name));
        json_object_object_add(o, "pid", strcmp(r->pid, "-") ? json_object_new_string(r->pid) : NULL);
        json_object_object_add(o, "node", strcmp(r->node, "-") ? json_object_new_int64(atoll(r->node)) : NULL);
        json_object_object_add(o, "restarts", json_object_new_int64(atoll(r->restarts)));
        json_object_object_add(o, "state", json_object_new_string(r->state));
        json_object_object_add(o, "restart", json_object_new_string(r->policy));
        json_object_object_add(o, "type", json_object_new_string(r->type));
        json_object_object_add(o, "method", json_object_new_string(r->method));
        json_object_array_add(arr, o);
    }
    if (arr) {
        json_object *top = json_object_new_object();
        json_object_object_add(top, "services", arr);
        printf("%s\n", json_object_to_json_string_ext(top, JSON_C_TO_STRING_PLAIN));
        json_object_put(top);
    }
}

/* service ls: every node's records ("S NAME PID RESTARTS STATE POLICY TYPE
 * METHOD") and instances ("H PID NODE"), a row per service. */
static int service_ls(const sn_cli_t *c)
{
    sn_payload_t *res = NULL;
    int rc = service_ask(c, "ls", NULL, &res);
    if (rc)
        return SN_EXIT_FAILED;
    char *text = res ? strndup((const char *)res->data, res->len) : strdup(""), *save = NULL;
    sn_payload_destroy(&res);
    svc_row_t *rows = NULL;
    char *host[1024][2];
    size_t n = 0, cap = 0, nhost = 0;
    for (char *l = text ? strtok_r(text, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        char *f[8], *s2 = NULL;
        int k = 0;
        for (char *w = strtok_r(l, " ", &s2); w && k < 8; w = strtok_r(NULL, " ", &s2))
            f[k++] = w;
        if (k == 3 && !strcmp(f[0], "H") && nhost < 1024) {
            host[nhost][0] = f[1];
            host[nhost++][1] = f[2];
        } else if (k == 8 && !strcmp(f[0], "S")) {
            svc_row_t *more = n == cap ? realloc(rows, (cap = cap ? cap * 2 : 16) * sizeof *rows) : rows;
            if (!more)
                break;
            rows = more;
            rows[n++] = (svc_row_t){f[1], f[2], f[3], f[4], f[5], f[6], f[7], "-"};
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t h = 0; h < nhost; h++)
            if (!strcmp(rows[i].pid, host[h][0]))
                rows[i].node = host[h][1];
    print_services(rows, n, c->json);
    free(rows);
    free(text);
    return 0;
}

/* service add NAME TYPE METHOD [ARG] [--restart P] [--max-restarts N
 * --within MS], service rm NAME, service ls [--json] (services.sh). */
static int cmd_service(const sn_cli_t *c)
{
    const char *sub = c->nargs > 0 ? c->args[0] : "";
    bool add = !strcmp(sub, "add");
    if ((c->restart || c->max_restarts >= 0 || c->within_ms >= 0) && !add)
        usage_error("--restart, --max-restarts and --within belong to service add");
    if (c->json && strcmp(sub, "ls") != 0)
        usage_error("--json belongs to service ls");
    if (!strcmp(sub, "ls") && c->nargs == 1)
        return service_ls(c);
    sn_payload_t *res = NULL, *arg = NULL;
    if (add && (c->nargs == 4 || c->nargs == 5)) {
        for (int i = 1; i < 4; i++)
            if (!*c->args[i] || strchr(c->args[i], '\n') || strchr(c->args[i], ' ') || strlen(c->args[i]) > 63)
                usage_error("service add: NAME, TYPE and METHOD are words without spaces (NAME up to 255 bytes)");
        arg = sn_payload_printf(SN_CT_TEXT, "%s\n%s\n%s\n%s\n%d\n%d%s%s", c->args[1], c->args[2], c->args[3],
                                c->restart ? c->restart : "on-failure",
                                c->max_restarts >= 0 ? c->max_restarts : SN_SVC_MAX_RESTARTS,
                                c->within_ms >= 0 ? c->within_ms : SN_SVC_WITHIN_MS, c->nargs == 5 ? "\n" : "",
                                c->nargs == 5 ? c->args[4] : "");
    } else if (!strcmp(sub, "rm") && c->nargs == 2) {
        arg = sn_payload_text(c->args[1]);
    } else {
        usage_error("usage: service add NAME TYPE METHOD [ARG] [--restart always|on-failure] [--max-restarts N "
                    "--within MS] | service rm NAME | service ls [--json], with --connect ENDPOINT");
    }
    int rc = service_ask(c, sub, arg, &res);
    sn_payload_destroy(&res);
    if (rc == 0)
        printf("%s %s\n", add ? "added" : "removed", c->args[1]);
    return rc == 0 ? 0 : rc == SN_ENOPROC && !add ? SN_EXIT_NOPROC : SN_EXIT_FAILED;
}

/* ---------------------------------------------------------------- send */

/* send PID DATA: the node that holds the process is found (as kill finds
 * it) and asked to put the message into its mailbox, so every node the
 * client talks to answers the same: exit 0 when that node took it for a
 * live process, 4 when no process has that PID (it ended, never existed,
 * or its node is not an up member). Guarded by cli.sh (send's exit codes
 * through every node of a 3-node cluster). */
static int send_named(const sn_cli_t *c);
static int cmd_send(const sn_cli_t *c)
{
    sn_pid_t pid;
    if (c->nargs != 2)
        usage_error("usage: send PID|NAME DATA --connect ENDPOINT");
    if (sn_pid_parse(c->args[0], &pid) != 0)
        return send_named(c);
    cluster_t cl;
    if (cluster_load(c, &cl) != 0)
        return SN_EXIT_FAILED;
    const sn_wire_stats_t *home = cluster_node(&cl, pid.node);
    end_t how = {0};
    char text[1024];
    int rc = SN_ENOPROC, code;
    uint32_t node = pid.node;
    if (!home || !node_alive(home)) {
        fprintf(stderr, "%s: send: no process %s: node %" PRIu32 " is %s\n", progname, c->args[0], pid.node,
                home ? sn__member_state_name(home->state) : "not a member of the cluster");
        sn_client_reply_clear(&cl.status);
        return SN_EXIT_NOPROC;
    }
    for (int tries = 0; tries < 3 && rc == SN_ENOPROC && !got_signal; tries++) {
        sn_proc_row_t row;
        if (!(node = locate(c, &cl, pid, node ? node : pid.node, &row, &how)))
            break;
        const sn_wire_stats_t *n = cluster_node(&cl, node);
        char err[512];
        sn_wire_request_t req = {.op = SN_OP_SEND, .to = pid, .arg = sn_payload_text(c->args[1])};
        sn_wire_reply_t rep;
        rc = ask(c, n->endpoint, &req, request_ms(c), &rep, err, sizeof err);
        sn_payload_destroy(&req.arg);
        if (rc == 0)
            rc = rep.error;
        else
            fprintf(stderr, "%s: send: node %" PRIu32 ": %s\n", progname, node, err);
        sn_client_reply_clear(&rep);
    }
    if (rc == SN_ENOPROC && !how.known && !got_signal) {
        /* Not found where the nodes said it went (it is moving, or a
         * node on its path restarted and lost the trail): its home takes
         * it, and passes it on by its forwarding entries as it would a
         * process's message, or says noproc if the process ended or never
         * was (chaos.sh stops sinks that move all the time this way) */
        char err[512];
        sn_wire_request_t req = {.op = SN_OP_SEND, .to = pid, .arg = sn_payload_text(c->args[1])};
        sn_wire_reply_t rep;
        int r2 = ask(c, home->endpoint, &req, request_ms(c), &rep, err, sizeof err);
        sn_payload_destroy(&req.arg);
        rc = r2 == 0 ? rep.error : rc;
        sn_client_reply_clear(&rep);
    }
    if (got_signal && rc != 0) {
        fprintf(stderr, "%s: send: %s: stopped (%s) before a node took the message\n", progname, c->args[0],
                signal_name(got_signal));
        code = SN_EXIT_FAILED; /* (sn_cli_run: 128 + the signal) */
    } else if (rc == 0) {
        code = 0;
    } else if (rc == SN_ENOPROC) {
        if (how.known)
            fprintf(stderr, "%s: send: %s has ended%s\n", progname, c->args[0], end_text(&how, text, sizeof text));
        else
            fprintf(stderr, "%s: send: no process %s in the cluster (it has ended, or never existed)\n", progname,
                    c->args[0]);
        code = SN_EXIT_NOPROC;
    } else {
        fprintf(stderr, "%s: send: %s: %s\n", progname, c->args[0], sn_strerror(rc));
        code = SN_EXIT_FAILED;
    }
    sn_payload_destroy(&how.result);
    sn_client_reply_clear(&cl.status);
    return code;
}

/* send NAME DATA: the name's PID, then a send to it as above; exit 4 if
 * no process has the name. */
static int send_named(const sn_cli_t *c)
{
    sn_pid_t pid;
    int rc = name_lookup(c, c->args[0], &pid);
    if (rc == SN_ENOPROC)
        fprintf(stderr, "%s: send: no process is named %s\n", progname, c->args[0]);
    if (rc != 0)
        return rc == SN_ENOPROC ? SN_EXIT_NOPROC : SN_EXIT_FAILED;
    char text[SN_PID_STRLEN];
    char *args[2] = {sn_pid_format(pid, text, sizeof text), c->args[1]};
    sn_cli_t byid = *c;
    byid.args = args;
    return cmd_send(&byid);
}

/* ---------------------------------------------------------------- call */

/* call stopped waiting (its --timeout, or a signal) with its process
 * started: cancel it (unless told not to). A signal's cancel waits for no
 * further signal: each request it makes is bounded (CANCEL_MS). */
#define CANCEL_MS 2000
static void call_abandoned(const sn_cli_t *c, sn_pid_t pid, int ms)
{
    char text[SN_PID_STRLEN], reason[128];
    sn_pid_format(pid, text, sizeof text);
    if (!c->cancel_on_timeout) {
        fprintf(stderr, "%s: left process %s running (--no-cancel-on-timeout)\n", progname, text);
        return;
    }
    if (got_signal)
        snprintf(reason, sizeof reason, "schednode call stopped by %s", signal_name(got_signal));
    else
        snprintf(reason, sizeof reason, "schednode call timed out after %d ms", ms);
    sn_client_interrupt(-1);
    sn_cli_t bounded = *c;
    bounded.timeout_ms = CANCEL_MS;
    c = &bounded;
    cluster_t cl;
    if (cluster_load(c, &cl) != 0)
        return;
    sn_proc_row_t row;
    uint32_t node = locate(c, &cl, pid, pid.node, &row, NULL);
    int rc = node ? kill_at(c, &cl, node, pid, 0, reason) : SN_ENOPROC;
    if (rc == 0)
        fprintf(stderr, "%s: cancelled process %s (it got a CANCEL; --no-cancel-on-timeout leaves it running)\n",
                progname, text);
    else if (rc == SN_ENOPROC)
        fprintf(stderr, "%s: process %s has ended meanwhile: nothing to cancel\n", progname, text);
    else
        fprintf(stderr, "%s: could not cancel process %s: %s\n", progname, text, sn_strerror(rc));
    sn_client_reply_clear(&cl.status);
}

/* ---------------------------------------------- spawn, send, call, status */

/* spawn --name: a call of the helper that registers the name first,
 * then spawns the process and gives it the name (relay/names.c), so the
 * process exists only if the name was free. */
static sn_wire_request_t named_spawn(const sn_cli_t *c)
{
    if (!*c->name || strlen(c->name) > 255 || strchr(c->name, '\n'))
        usage_error("spawn: --name takes 1 to 255 characters, no newline");
    if (strchr(c->args[0], '\n') || strchr(c->args[1], '\n'))
        usage_error("spawn: TYPE and METHOD have no newline");
    sn_wire_request_t req = {.op = SN_OP_CALL, .type = "sn.names", .method = "spawn"};
    req.arg = sn_payload_printf(SN_CT_TEXT, "%s\n%s\n%s%s%s", c->name, c->args[0], c->args[1],
                                c->nargs == 3 ? "\n" : "", c->nargs == 3 ? c->args[2] : "");
    return req;
}

/* The request of spawn, send, call or status (exits 2 if the arguments are wrong). */
static sn_wire_request_t simple_request(const sn_cli_t *c)
{
    const char *cmd = c->cmd;
    sn_wire_request_t req = {0};
    if (!strcmp(cmd, "status")) {
        if (c->nargs != 0)
            usage_error("usage: status [--json] --connect ENDPOINT");
        req.op = SN_OP_STATUS;
    } else if (!strcmp(cmd, "send")) {
        if (c->nargs != 2)
            usage_error("usage: send PID DATA --connect ENDPOINT");
        if (sn_pid_parse(c->args[0], &req.to) != 0)
            usage_error("send: '%s' is not a PID (NODE.SERIAL, e.g. 2.17)", c->args[0]);
        req.op = SN_OP_SEND;
        req.arg = sn_payload_text(c->args[1]);
    } else {
        if (c->nargs < 2 || c->nargs > 3)
            usage_error("usage: %s TYPE METHOD [ARG] --connect ENDPOINT", cmd);
        req.op = !strcmp(cmd, "spawn") ? SN_OP_SPAWN : SN_OP_CALL;
        req.type = c->args[0];
        req.method = c->args[1];
        if (c->name) /* (the registry's helper takes the name, spawns, gives it: relay/names.c) */
            req = named_spawn(c);
        else
            req.arg = c->nargs == 3 ? sn_payload_text(c->args[2]) : NULL;
    }
    return req;
}

/* What the node answered (rc 0) to spawn, send, call or status. */
static int simple_answer(const sn_cli_t *c, const sn_wire_reply_t *rep)
{
    char buf[SN_PID_STRLEN];
    if (rep->error && !rep->result && rep->reason && *rep->reason) { /* e.g. a refused spawn: the reason says it */
        fprintf(stderr, "%s: %s: %s\n", progname, c->cmd, rep->reason);
        return rep->error == SN_ENOPROC && !strcmp(c->cmd, "send") ? SN_EXIT_NOPROC : SN_EXIT_FAILED;
    }
    if (rep->error) {
        const char *why = rep->result ? (const char *)rep->result->data : rep->reason ? rep->reason : "";
        fprintf(stderr, "%s: %s failed: %s%s%s\n", progname, c->cmd, sn_strerror(rep->error), *why ? ": " : "", why);
        return rep->error == SN_ENOPROC && !strcmp(c->cmd, "send") ? SN_EXIT_NOPROC : SN_EXIT_FAILED;
    }
    if (!strcmp(c->cmd, "spawn") && c->name)
        sn_cli_print_result(0, rep->result);
    else if (!strcmp(c->cmd, "spawn"))
        printf("%s\n", sn_pid_format(rep->pid, buf, sizeof buf));
    else if (!strcmp(c->cmd, "call"))
        sn_cli_print_result(0, rep->result);
    else if (!strcmp(c->cmd, "status"))
        print_status(rep->rows, rep->nrows, c->json);
    return 0;
}

/* --on N: the endpoint of node N, an up member of the cluster of
 * --connect (into ep), or -1 with the reason said. */
static int placement(const sn_cli_t *c, char *ep, size_t len)
{
    cluster_t cl;
    if (cluster_load(c, &cl) != 0)
        return -1;
    const sn_wire_stats_t *n = cluster_node(&cl, c->on_node);
    int rc = n && node_alive(n) ? 0 : -1;
    if (rc == 0)
        snprintf(ep, len, "%s", n->endpoint);
    else
        fprintf(stderr, "%s: %s: cannot start it on node %" PRIu32 ": %s\n", progname, c->cmd, c->on_node,
                n ? (n->state == SN_MEMBER_DOWN ? "the node is down" : "the node is not up")
                  : "no such node in the cluster");
    if (rc == 0 && n->state != SN_MEMBER_UP) /* (suspect: it may be slow only; it is asked) */
        fprintf(stderr, "%s: %s: node %" PRIu32 " is %s\n", progname, c->cmd, c->on_node,
                sn__member_state_name(n->state));
    sn_client_reply_clear(&cl.status);
    return rc;
}

static int cmd_simple(const sn_cli_t *c)
{
    char on[SN_WIRE_ENDPOINT_MAX];
    if (c->on_node && placement(c, on, sizeof on) != 0)
        return SN_EXIT_FAILED;
    sn_wire_request_t req = simple_request(c);
    int call = req.op == SN_OP_CALL;
    int ms = call && !c->name ? c->timeout_ms : request_ms(c); /* call: forever unless --timeout */
    sn_wire_reply_t rep;
    char err[512];
    int rc = ask(c, c->on_node ? on : c->connect, &req, ms, &rep, err, sizeof err);
    sn_payload_destroy(&req.arg);
    int code;
    if (rc == 0) {
        code = simple_answer(c, &rep);
    } else if (rc == SN_ECANCELED) {
        fprintf(stderr, "%s: %s: stopped waiting (%s)\n", progname, c->cmd, signal_name(got_signal));
        if (call && rep.started)
            call_abandoned(c, rep.pid, ms);
        code = SN_EXIT_FAILED; /* (sn_cli_run: 128 + the signal) */
    } else {
        fprintf(stderr, "%s: %s\n", progname, err);
        code = SN_EXIT_FAILED;
        if (rc == SN_ETIMEDOUT && call && rep.started) {
            call_abandoned(c, rep.pid, ms);
            code = SN_EXIT_TIMEOUT;
        }
    }
    sn_client_reply_clear(&rep);
    return code;
}

/* ------------------------------------------------------------- migrate */

#define MIGRATE_WAIT_MS 5000 /* migrate: how long the process may stay busy, unless --timeout says */

/* Asks node `at` to move pid to c->to_node: 0, or an error with the
 * node's reason in why. */
static int migrate_at(const sn_cli_t *c, const cluster_t *cl, uint32_t at, sn_pid_t pid, int wait, char *why,
                      size_t len)
{
    const sn_wire_stats_t *n = cluster_node(cl, at);
    sn_wire_request_t req = {.op = SN_OP_MIGRATE, .to = pid, .node = c->to_node, .timeout_ms = (uint32_t)wait};
    sn_wire_reply_t rep;
    /* (the node answers within the wait and the handover's 3 s bound) */
    int rc = n ? ask(c, n->endpoint, &req, wait + REQUEST_MS, &rep, why, len) : SN_ENOPROC;
    if (rc == 0) {
        rc = rep.error;
        snprintf(why, len, "%s", rep.reason && *rep.reason ? rep.reason : sn_strerror(rc));
        sn_client_reply_clear(&rep);
    }
    return rc;
}

/* migrate PID --to N: found where it is (as kill finds it), then that
 * node pushes it to N; looked for again if it moved on meanwhile.
 * Guarded by migrate.sh. */
static int cmd_migrate(const sn_cli_t *c)
{
    sn_pid_t pid;
    if (c->nargs != 1 || !c->to_node)
        usage_error("usage: migrate PID --to N [--timeout MS] --connect ENDPOINT");
    if (sn_pid_parse(c->args[0], &pid) != 0)
        usage_error("migrate: '%s' is not a PID (NODE.SERIAL, e.g. 2.17)", c->args[0]);
    int wait = c->timeout_ms >= 0 ? c->timeout_ms : MIGRATE_WAIT_MS;
    cluster_t cl;
    if (cluster_load(c, &cl) != 0)
        return SN_EXIT_FAILED;
    const sn_wire_stats_t *to = cluster_node(&cl, c->to_node);
    char why[512] = "";
    int rc = SN_ENOPROC, code = 0;
    uint32_t at = 0;
    if (!to || to->state != SN_MEMBER_UP) {
        fprintf(stderr, "%s: migrate: node %" PRIu32 " %s\n", progname, c->to_node,
                to ? (to->state == SN_MEMBER_DOWN ? "is down" : "is not up") : "is not a member of the cluster");
        sn_client_reply_clear(&cl.status);
        return SN_EXIT_FAILED;
    }
    for (int tries = 0; tries < 3 && rc == SN_ENOPROC && !got_signal; tries++) {
        sn_proc_row_t row;
        if (!(at = locate(c, &cl, pid, at ? at : pid.node, &row, NULL)))
            break;
        rc = at == c->to_node ? 0 : migrate_at(c, &cl, at, pid, wait, why, sizeof why);
    }
    if (rc == 0) {
        printf("%s on node %" PRIu32 "\n", c->args[0], c->to_node);
    } else if (rc == SN_ENOPROC) {
        fprintf(stderr, "%s: migrate: no process %s in the cluster (it has ended, or never existed)\n", progname,
                c->args[0]);
        code = SN_EXIT_NOPROC;
    } else {
        fprintf(stderr, "%s: migrate: %s (%s)\n", progname, why, sn_strerror(rc));
        code = rc == SN_ETIMEDOUT ? SN_EXIT_TIMEOUT : SN_EXIT_FAILED;
    }
    sn_client_reply_clear(&cl.status);
    return code;
}

/* --------------------------------------------------------------- drain */

#define DRAIN_MS 30000 /* drain: the node's wait for what cannot move, unless --timeout says */

/* drain [--node N] [--timeout MS] [--then-stop], undrain [--node N]: one
 * request to that node, answered with its report when the drain ends.
 * Exit 0, 5 if processes are left, 1 if the node refused. Guarded by
 * drain.sh. */
static int cmd_drain(const sn_cli_t *c)
{
    bool drain = !strcmp(c->cmd, "drain");
    if (c->nargs != 0)
        usage_error("usage: %s [--node N]%s --connect ENDPOINT", c->cmd, drain ? " [--timeout MS] [--then-stop]" : "");
    if (c->then_stop && !drain)
        usage_error("--then-stop belongs to drain");
    char ep[SN_WIRE_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "%s", c->connect);
    if (c->only_node) {
        cluster_t cl;
        if (cluster_load(c, &cl) != 0)
            return SN_EXIT_FAILED;
        const sn_wire_stats_t *n = cluster_node(&cl, c->only_node);
        bool alive = n && node_alive(n); /* (n points into cl.status: read before it is cleared) */
        if (alive)
            snprintf(ep, sizeof ep, "%s", n->endpoint);
        else
            fprintf(stderr, "%s: %s: node %" PRIu32 " %s\n", progname, c->cmd, c->only_node,
                    n ? "is not up" : "is not a member of the cluster");
        sn_client_reply_clear(&cl.status);
        if (!alive)
            return SN_EXIT_FAILED;
    }
    int ms = drain && c->timeout_ms >= 0 ? c->timeout_ms : DRAIN_MS;
    sn_wire_request_t req = {
        .op = drain ? SN_OP_DRAIN : SN_OP_UNDRAIN, .timeout_ms = (uint32_t)ms, .then_stop = c->then_stop};
    sn_wire_reply_t rep;
    char err[512];
    /* (the node answers within MS and the last handovers' 3 s bound) */
    int rc = ask(c, ep, &req, ms + REQUEST_MS, &rep, err, sizeof err), code = 0;
    if (rc != 0) {
        fprintf(stderr, "%s: %s: %s\n", progname, c->cmd, err);
        return SN_EXIT_FAILED;
    }
    if (rep.error) {
        fprintf(stderr, "%s: %s: %s\n", progname, c->cmd,
                rep.reason && *rep.reason ? rep.reason : sn_strerror(rep.error));
        code = SN_EXIT_FAILED;
    } else {
        fputs(rep.report ? rep.report : "", stdout);
        code = rep.left ? SN_EXIT_TIMEOUT : 0;
    }
    sn_client_reply_clear(&rep);
    return code;
}

static int cli_run(const sn_cli_t *c)
{
    if (!c->connect)
        usage_error("%s needs --connect ENDPOINT (the node to talk to)", c->cmd);
    bool draining = !strcmp(c->cmd, "drain") || !strcmp(c->cmd, "undrain");
    if (c->only_node && strcmp(c->cmd, "ps") != 0 && strcmp(c->cmd, "types") != 0 && !draining)
        usage_error("--node belongs to ps, types, drain and undrain");
    if (c->then_stop && strcmp(c->cmd, "drain") != 0)
        usage_error("--then-stop belongs to drain");
    if (c->reason && strcmp(c->cmd, "kill") != 0)
        usage_error("--reason belongs to kill");
    if (c->on_node && strcmp(c->cmd, "spawn") != 0 && strcmp(c->cmd, "call") != 0)
        usage_error("--on belongs to spawn and call");
    if (c->to_node && strcmp(c->cmd, "migrate") != 0)
        usage_error("--to belongs to migrate");
    if (!strcmp(c->cmd, "migrate"))
        return cmd_migrate(c);
    if (draining)
        return cmd_drain(c);
    if (!strcmp(c->cmd, "ps"))
        return cmd_list(c, SN_OP_PS);
    if (!strcmp(c->cmd, "types"))
        return cmd_list(c, SN_OP_TYPES);
    if (!strcmp(c->cmd, "kill"))
        return cmd_kill(c);
    if (!strcmp(c->cmd, "send"))
        return cmd_send(c);
    if (!strcmp(c->cmd, "whereis"))
        return cmd_whereis(c);
    if (!strcmp(c->cmd, "names"))
        return cmd_names(c);
    if (!strcmp(c->cmd, "service"))
        return cmd_service(c);
    return cmd_simple(c);
}

int sn_cli_run(const sn_cli_t *c)
{
    catch_signals();
    int code = cli_run(c);
    return got_signal ? SN_EXIT_SIGNAL(got_signal) : code;
}

/* main.c - the schednode program: run a node, the demo, or one process.
 * Flags are parsed with getopt_long; a bad flag or value names what is
 * wrong and exits 2. SIGINT/SIGTERM shut the node down in order.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <czmq.h>
#include <sodium.h>

#include "cli.h"
#include "codec.h"
#include "config.h"
#include "demo.h"
#include "http.h"
#include "log.h"
#include "relay.h"
#include "schednode/schednode.h"
#include "suggest.h"
#include "svcrule.h"

#define EXIT_USAGE SN_EXIT_USAGE
#define EXIT_OUT SN_EXIT_OUT /* this run was put out of its cluster (sn_relay_out) */

static const char *progname = "schednode";
static uint32_t log_node = 1; /* the node every line names: main's thread sets it (again if a join picks another id) */

/* The program's lines go through the one logging layer (log.h, czmq's
 * zsys, which the relay logs through too): one line per event, naming the
 * node once. */
#define logf_(level, ...) sn__logf(log_node, (level), __VA_ARGS__)

static void usage_commands(FILE *f)
{
    fprintf(f,
            "usage: %s [OPTIONS] [COMMAND [ARGS]]\n"
            "\n"
            "Commands:\n"
            "  (none)                  run a node until SIGINT or SIGTERM\n"
            "  demo                    run the demo workload on this node and print what it did\n"
            "  run TYPE METHOD [ARG]   spawn one process (ARG as a text payload), wait for it,\n"
            "                          print its result; exit 1 with the error if it fails, 5 if\n"
            "                          --timeout expired (the process then gets a CANCEL)\n"
            "Client commands (talk to a running node, --connect ENDPOINT):\n"
            "  spawn TYPE METHOD [ARG] [--on N] [--name NAME]\n"
            "                          spawn a process there (or on node N), print its PID; --name:\n"
            "                          it exists only if it got NAME (exit 1 naming the holder if taken)\n"
            "  send PID|NAME DATA      put DATA (text) into PID's mailbox, on the node that holds it (exit 0\n"
            "                          once it is there, or once its home passed it on to where it\n"
            "                          moved when no node has it at the moment; 4 if no such process);\n"
            "                          a NAME (any text that is not a PID) is looked up first\n"
            "  whereis NAME            print the PID registered under NAME (exit 1 if none)\n"
            "  names [--json]          every registered name and its PID, sorted by name\n"
            "  service add NAME TYPE METHOD [ARG] [--restart always|on-failure] [--max-restarts N\n"
            "          --within MS]    keep one instance running under NAME, started again elsewhere\n"
            "                          when it fails or its node dies (back off past N failures in MS)\n"
            "  service rm NAME         stop the instance (CANCEL) and forget the service (4 if none)\n"
            "  service ls [--json]     each service: name, PID, node, restarts, state\n"
            "  call TYPE METHOD [ARG] [--on N]\n"
            "                          spawn, wait (forever, or --timeout MS), print the result; exit 1\n"
            "                          with the error if it fails, 5 if it timed out (the process is\n"
            "                          then cancelled, unless --no-cancel-on-timeout)\n"
            "  status [--json]         one row per node of the cluster: state, load, counters\n"
            "  ps [--json] [--node N]  the processes of every node (or node N): PID, type, state, mailbox\n"
            "                          length, steps run, times moved\n"
            "  kill PID [--reason TEXT] [--timeout MS]\n"
            "                          CANCEL the process (the reason is the event's data); if it has\n"
            "                          not ended after MS (default 5000), force it: it gets no further\n"
            "                          step (one mid-step ends when the step returns) and ends 'killed'\n"
            "                          with the reason, which its monitors get in their DOWN\n"
            "  migrate PID --to N [--timeout MS]\n"
            "                          move the process (with its state and mailbox) to node N once it\n"
            "                          waits for messages (up to MS, default 5000), print where it is;\n"
            "                          exit 1 with the reason if it cannot move, 4 if no such process\n"
            "  drain [--node N] [--timeout MS] [--then-stop]\n"
            "                          move the processes of the node at --connect (or node N) to the\n"
            "                          other nodes; it takes no spawns, steals or moves meanwhile; wait\n"
            "                          up to MS (default 30000) for what cannot move to end; print what\n"
            "                          moved, ended and is left (exit 5 if any is left); --then-stop:\n"
            "                          the node then leaves the cluster and exits (what is left: CANCEL)\n"
            "  undrain [--node N]      the node takes work again\n"
            "  types [--json] [--node N]\n"
            "                          the process types each node (or node N) has loaded\n"
            "Keys:\n"
            "  keygen DIR [--name NAME] [--endpoint EP [-n N]]\n"
            "                          write a CurveZMQ certificate: DIR/NAME.cert (public, goes into\n"
            "                          every node's authorized-keys directory) and DIR/NAME.cert_secret;\n"
            "                          a node's names where it listens (--endpoint: how others find its\n"
            "                          key) and its id (-n): members admit the key as that node only;\n"
            "                          without --endpoint it is a client's, which never joins as a node\n",
            progname);
}

/* The options, after the commands (usage). */
static void usage_options(FILE *f)
{
    fprintf(f, "\n"
               "Options:\n"
               "      --config FILE          read settings from a ZPL file (cluster-config/README.md);\n"
               "                             flags given as well override it\n"
               "  -w, --workers N            worker threads (default: one per online CPU)\n"
               "  -l, --load FILE.so         load a plugin of process types and commands (repeatable;\n"
               "                             a path: a bare name is ./FILE.so)\n"
               "  -n, --node-id N            this node's id in PIDs, 1..4294967295 (default: a listening node\n"
               "                             takes the id its --cert names, else a random unused one; else 1)\n"
               "      --shutdown-timeout MS  time processes get to finish after CANCEL (default 2000)\n"
               "      --timeout MS           run, call: how long to wait for the result (default: forever);\n"
               "                             kill: from CANCEL to the force (default 5000); other client\n"
               "                             commands: how long to wait for each answer (default 10000)\n"
               "      --log-level LEVEL      error, warn, info or debug (default info)\n"
               "      --log-format FORMAT    text (default) or json: one JSON object per line (time in UTC\n"
               "                             with milliseconds, level, ident, node, message)\n"
               "      --listen ENDPOINT      accept other nodes and clients here, e.g. tcp://127.0.0.1:7001\n"
               "                             (port 1..65535, or * for any free one); the same port over UDP\n"
               "                             takes the members' probes (if it is taken: over TCP, said in the log)\n"
               "      --join ENDPOINT        join the cluster through the member at ENDPOINT (repeatable:\n"
               "                             any one that answers will do); without it, start a cluster\n"
               "      --advertise ENDPOINT   where other nodes reach this one (default: the --listen address)\n"
               "      --cluster NAME         cluster name; a node of another cluster is refused (default schednode)\n"
               "      --join-timeout MS      give up joining after this long (default 10000)\n"
               "      --peer N=ENDPOINT      node N listens at ENDPOINT (repeatable; a fixed cluster, no joining)\n"
               "      --cert FILE            this node's (or client's) certificate, from keygen: CurveZMQ on\n"
               "                             every connection\n"
               "      --authorized-keys DIR  public certificates of the nodes and clients allowed in\n"
               "      --insecure             plain TCP, no keys (only for a cluster that is all --insecure)\n"
               "      --no-steal             do not take work from other nodes, nor give any\n"
               "      --steal-batch N        most processes one steal moves (default 64)\n"
               "      --max-frame BYTES      largest frame on the network (default 1 MiB); a batch over it\n"
               "                             goes in parts\n"
               "      --max-message BYTES    largest message to another node (default 64 MiB); a bigger\n"
               "                             send fails at once (message too big)\n"
               "      --max-backlog BYTES    what a node holds for one peer (default 64 MiB); past it, a\n"
               "                             process sending there waits until half of it is sent\n"
               "                             (BYTES: a number, or with K, M or G: 64M)\n"
               "      --backlog-full fail    past --max-backlog a send fails at once (backlog full)\n"
               "                             instead of its process waiting (the default: wait)\n"
               "      --heartbeat-ms MS      probe period, up to ten nodes (default 200; x1.5 at 100)\n"
               "      --down-after-ms MS     suspicion timeout, up to ten nodes (default 1500)\n"
               "      --forget-after-ms MS   a member down or left this long is forgotten (default\n"
               "                             300000: 5 minutes); its id may be taken again\n"
               "      --metrics ENDPOINT     serve Prometheus metrics over HTTP at ENDPOINT/metrics,\n"
               "                             e.g. tcp://127.0.0.1:9101 (port * for any free one)\n"
               "      --dashboard ENDPOINT   serve the cluster's live dashboard over HTTP at ENDPOINT/\n"
               "                             (and /metrics there too); with --metrics each has a server\n"
               "                             and port of its own, one if both name the same fixed port;\n"
               "                             the log gives each one's port and URL\n"
               "  -c, --connect ENDPOINT     client commands: the node to talk to\n"
               "      --json                 status, ps, types: print JSON\n"
               "      --node N               ps, types: ask node N only; drain, undrain: that node\n"
               "      --reason TEXT          kill: why (the CANCEL's data, the DOWN's reason)\n"
               "      --on N                 spawn, call: start the process on node N\n"
               "      --to N                 migrate: the node to move the process to\n"
               "      --then-stop            drain: the node leaves its cluster and exits once drained\n"
               "      --cancel-on-timeout    call: cancel the process when --timeout expires (the default);\n"
               "      --no-cancel-on-timeout leave it running (on --timeout or a signal)\n"
               "  -h, --help                 this help\n"
               "  -V, --version              print the version\n"
               "\n"
               "Exit status (the same whichever node --connect names):\n"
               "  0    success: spawn, call, run: the process was spawned (and ended well); send: the node\n"
               "       holding the process put the message into its mailbox; kill: the process ended\n"
               "  1    the command failed: an error from a node, a failed or refused process, no answer, no\n"
               "       connection; a node that cannot start (a port taken) or join (no seed answered)\n"
               "  2    a bad flag, argument, configuration file or plugin, or a join a seed refused\n"
               "  3    a node put out of its cluster\n"
               "  4    no such process (send, kill): it ended, never existed, or its node is not an up member\n"
               "  5    timed out: call and run --timeout (the process then gets a CANCEL); kill: still in a step\n"
               "       after the force\n"
               "  130  SIGINT, 143 SIGTERM: a waiting command (call, run, kill, a joining node) stopped at once;\n"
               "       call cancels its process (unless --no-cancel-on-timeout), run's gets a CANCEL\n"
               "  A running node stopped by SIGINT or SIGTERM shuts down in order and exits 0.\n");
}

static void usage(FILE *f)
{
    usage_commands(f);
    usage_options(f);
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sn_cli_vusage(fmt, ap);
}

/* A size in bytes: a number, or one with K, M or G (KiB, MiB, GiB: 1024s),
 * from lo to hi; else a usage error naming the flag (exit 2). */
static long long sn_parse_bytes(const char *flag, const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (shift && (!strcmp(end, "iB") || !strcmp(end, "B")))
        end += strlen(end);
    if (errno || end == s || *end || v < 0 || v > (hi >> shift) || (v << shift) < lo)
        die_usage("%s: '%s' is not a size from %lld to %lld bytes (a number, or with K, M or G)", flag, s, lo, hi);
    return v << shift;
}

static long long parse_num(const char *flag, const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die_usage("%s: '%s' is not a number from %lld to %lld", flag, s, lo, hi);
    return v;
}

/* An endpoint flag: tcp://HOST:PORT with a real port, else exit 2 naming
 * the flag (the file's endpoints get the same check, in config.c). */
static void check_endpoint(const char *flag, const char *ep, int flags)
{
    char why[512];
    if (sn_config_endpoint(ep, flags, why, sizeof why) != 0)
        die_usage("%s: %s", flag, why);
}

/* exit() called by another thread than main's (a process's step or a
 * command handler of a plugin, on a worker) while the node runs. exit
 * runs the atexit handlers on that thread, czmq's zsys_shutdown among
 * them: it closes every socket still open, whoever owns it (the relay's
 * and zauth's actors are using theirs), and terminates the context under
 * them, so the actor's next socket call fails a czmq assertion and the
 * program aborts. An orderly shutdown cannot run from a worker either (it
 * waits for the workers to finish). So the program ends at once with the
 * status asked for: the kernel closes the connections, which peers and
 * waiting clients see at once. Registered (on_exit: it gets the status)
 * after zsys_init, so that it runs before czmq's handler. */
static pthread_t main_thread;
static void exit_off_main(int status, void *arg)
{
    (void)arg;
    if (pthread_equal(pthread_self(), main_thread))
        return; /* main's own exit: the node has shut down in order */
    fflush(stdout);
    logf_(SN__LOG_ERROR,
          "exit(%d) called by a process or command (not by schednode) while the node ran: it ends now, "
          "without its orderly shutdown; its processes are lost",
          status);
    _exit(status);
}

/* The relay's on_out: this run was put out of its cluster (sn_relay_out).
 * main waits for SIGTERM with sigwait (every thread blocks it), shuts
 * down and exits EXIT_OUT. */
static void raise_term(void *arg)
{
    (void)arg;
    kill(getpid(), SIGTERM);
}

/* The configuration file, if one was given (read before the flags). */
static sn_node_config_t config_file;
static void free_config_file(void)
{
    sn_config_free(&config_file);
}

/* What the command line (and the configuration file under it) asks for.
 * The lists have room for every argument and the file's entries; their
 * strings are argv's or the file's (which lives until the program ends). */
typedef struct options {
    sn_sched_config_t sched;
    sn_relay_config_t relay; /* peers and seeds point at the arrays below once it starts */
    sn_peer_config_t *peers; /* relay.npeers of them */
    const char **seeds;      /* relay.nseeds of them */
    const char **services;   /* the file's cluster/service lines, nservices of them */
    size_t nservices;
    const char **plugins;
    int nplugins;
    int node_id_given;                      /* -n or node/id; else choose_node_id picks one */
    int node_id_auto;                       /* picked at random: a join refused for a taken id tries another */
    int joins_from_flags, loads_from_flags; /* a repeatable flag replaces the file's list */
    int shutdown_ms, timeout_ms, join_timeout_ms;
    int log_level;  /* SN__LOG_* */
    int log_format; /* SN__LOG_TEXT or _JSON */
    int insecure, json;
    uint32_t only_node;    /* ps, types: --node */
    const char *reason;    /* kill: --reason */
    uint32_t on_node;      /* spawn, call: --on */
    uint32_t to_node;      /* migrate: --to */
    int cancel_on_timeout; /* call: --[no-]cancel-on-timeout */
    int then_stop;         /* drain: --then-stop */
    const char *restart;   /* service add: --restart */
    int max_restarts;      /* service add: --max-restarts, -1 if not given */
    int within_ms;         /* service add: --within, -1 if not given */
    const char *connect, *key_name, *key_endpoint;
    const char *metrics, *dashboard; /* HTTP endpoints (http.c), or NULL */
    const char *cmd;                 /* the command, or NULL: run a node */
    char **args;                     /* its arguments (after it), nargs of them */
    int nargs;
    int argc; /* the whole command line (keygen looks at it again) */
    char **argv;
} options_t;

enum {
    OPT_SHUTDOWN = 256,
    OPT_TIMEOUT,
    OPT_LOGLEVEL,
    OPT_LISTEN,
    OPT_PEER,
    OPT_MAXFRAME,
    OPT_MAXMSG,
    OPT_MAXBACKLOG,
    OPT_BACKLOGFULL,
    OPT_HB,
    OPT_DOWN,
    OPT_FORGET,
    OPT_JSON,
    OPT_JOIN,
    OPT_ADVERTISE,
    OPT_CLUSTER,
    OPT_JOIN_TIMEOUT,
    OPT_CERT,
    OPT_AUTHORIZED,
    OPT_INSECURE,
    OPT_NAME,
    OPT_ENDPOINT,
    OPT_CONFIG,
    OPT_NO_STEAL,
    OPT_STEAL_BATCH,
    OPT_LOG_FORMAT,
    OPT_NODE,
    OPT_REASON,
    OPT_ON,
    OPT_TO,
    OPT_CANCEL_ON_TIMEOUT,
    OPT_NO_CANCEL_ON_TIMEOUT,
    OPT_THEN_STOP,
    OPT_METRICS,
    OPT_DASHBOARD,
    OPT_RESTART,
    OPT_MAX_RESTARTS,
    OPT_WITHIN
};
static const struct option long_opts[] = {{"workers", required_argument, NULL, 'w'},
                                          {"load", required_argument, NULL, 'l'},
                                          {"node-id", required_argument, NULL, 'n'},
                                          {"shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN},
                                          {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                          {"log-level", required_argument, NULL, OPT_LOGLEVEL},
                                          {"listen", required_argument, NULL, OPT_LISTEN},
                                          {"peer", required_argument, NULL, OPT_PEER},
                                          {"join", required_argument, NULL, OPT_JOIN},
                                          {"advertise", required_argument, NULL, OPT_ADVERTISE},
                                          {"cluster", required_argument, NULL, OPT_CLUSTER},
                                          {"join-timeout", required_argument, NULL, OPT_JOIN_TIMEOUT},
                                          {"cert", required_argument, NULL, OPT_CERT},
                                          {"authorized-keys", required_argument, NULL, OPT_AUTHORIZED},
                                          {"insecure", no_argument, NULL, OPT_INSECURE},
                                          {"name", required_argument, NULL, OPT_NAME},
                                          {"endpoint", required_argument, NULL, OPT_ENDPOINT},
                                          {"config", required_argument, NULL, OPT_CONFIG},
                                          {"no-steal", no_argument, NULL, OPT_NO_STEAL},
                                          {"steal-batch", required_argument, NULL, OPT_STEAL_BATCH},
                                          {"max-frame", required_argument, NULL, OPT_MAXFRAME},
                                          {"max-message", required_argument, NULL, OPT_MAXMSG},
                                          {"max-backlog", required_argument, NULL, OPT_MAXBACKLOG},
                                          {"backlog-full", required_argument, NULL, OPT_BACKLOGFULL},
                                          {"heartbeat-ms", required_argument, NULL, OPT_HB},
                                          {"down-after-ms", required_argument, NULL, OPT_DOWN},
                                          {"forget-after-ms", required_argument, NULL, OPT_FORGET},
                                          {"metrics", required_argument, NULL, OPT_METRICS},
                                          {"dashboard", required_argument, NULL, OPT_DASHBOARD},
                                          {"connect", required_argument, NULL, 'c'},
                                          {"json", no_argument, NULL, OPT_JSON},
                                          {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
                                          {"node", required_argument, NULL, OPT_NODE},
                                          {"reason", required_argument, NULL, OPT_REASON},
                                          {"on", required_argument, NULL, OPT_ON},
                                          {"to", required_argument, NULL, OPT_TO},
                                          {"cancel-on-timeout", no_argument, NULL, OPT_CANCEL_ON_TIMEOUT},
                                          {"no-cancel-on-timeout", no_argument, NULL, OPT_NO_CANCEL_ON_TIMEOUT},
                                          {"then-stop", no_argument, NULL, OPT_THEN_STOP},
                                          {"restart", required_argument, NULL, OPT_RESTART},
                                          {"max-restarts", required_argument, NULL, OPT_MAX_RESTARTS},
                                          {"within", required_argument, NULL, OPT_WITHIN},
                                          {"help", no_argument, NULL, 'h'},
                                          {"version", no_argument, NULL, 'V'},
                                          {0, 0, 0, 0}};

static void options_init(options_t *o, int argc, char **argv)
{
    *o = (options_t){.sched = {1, 0, 1},
                     .relay = {.steal = 1, .on_out = raise_term, .on_stop = raise_term},
                     .shutdown_ms = 2000,
                     .timeout_ms = -1,
                     .join_timeout_ms = 10000,
                     .log_level = SN__LOG_INFO,
                     .cancel_on_timeout = 1,
                     .max_restarts = -1,
                     .within_ms = -1,
                     .argc = argc,
                     .argv = argv};
    o->plugins = calloc((size_t)argc, sizeof *o->plugins);
    o->peers = calloc((size_t)argc, sizeof *o->peers);
    o->seeds = calloc((size_t)argc, sizeof *o->seeds);
    if (!o->plugins || !o->peers || !o->seeds)
        die_usage("out of memory");
}

static void options_free(options_t *o)
{
    free(o->plugins);
    free(o->peers);
    free(o->seeds);
}

/* Appends n strings to *list (which holds *len and has room for argc
 * more): the file may name more than argv could. */
static void append(const char ***list, int argc, size_t *len, const char **add, size_t n)
{
    const char **more = realloc(*list, ((size_t)argc + n) * sizeof *more);
    if (!more)
        die_usage("out of memory");
    *list = more;
    for (size_t k = 0; k < n; k++)
        more[(*len)++] = add[k];
}

/* The file's settings, which the flags then override. */
static void apply_config_file(options_t *o, const sn_node_config_t *f)
{
    if (f->node_id)
        o->sched.node_id = f->node_id, o->node_id_given = 1;
    if (f->workers)
        o->sched.workers = f->workers;
    if (f->shutdown_ms >= 0)
        o->shutdown_ms = f->shutdown_ms;
    if (f->log_level >= 0)
        o->log_level = f->log_level;
    if (f->log_format >= 0)
        o->log_format = f->log_format;
    o->relay.listen = f->listen;
    o->relay.advertise = f->advertise;
    o->relay.cluster = f->cluster;
    o->relay.security = (sn_security_t){f->cert, f->authorized};
    o->insecure = f->insecure == 1;
    o->relay.heartbeat_ms = f->heartbeat_ms;
    o->relay.down_after_ms = f->down_after_ms;
    o->relay.forget_after_ms = f->forget_after_ms;
    o->relay.max_frame = (size_t)f->max_frame;
    o->relay.max_message = (size_t)f->max_message;
    o->relay.max_backlog = (size_t)f->max_backlog;
    if (f->backlog_full)
        o->relay.backlog_fails = strcmp(f->backlog_full, "fail") == 0;
    if (f->steal >= 0)
        o->relay.steal = f->steal;
    o->relay.steal_batch = f->steal_batch;
    o->metrics = f->metrics;
    o->dashboard = f->dashboard;
    if (f->join_timeout_ms)
        o->join_timeout_ms = f->join_timeout_ms;
    o->services = f->services;
    o->nservices = f->nservices;
    if (f->nseeds)
        append(&o->seeds, o->argc, &o->relay.nseeds, f->seeds, f->nseeds);
    if (f->nplugins) {
        size_t n = (size_t)o->nplugins;
        append(&o->plugins, o->argc, &n, f->plugins, f->nplugins);
        o->nplugins = (int)n;
    }
}

/* A configuration file that cannot be used: what is wrong (err names the
 * file and the line), where its format is documented, exit 2. */
static void die_config(const char *err) __attribute__((noreturn));
static void die_config(const char *err)
{
    fprintf(stderr,
            "%s: %s\n"
            "The configuration file's format: man schednode (CONFIGURATION FILE), or cluster-config/README.md.\n",
            progname, err);
    exit(EXIT_USAGE);
}

/* The config file first (found before the other flags), so that flags
 * override it; a flag that can repeat (--join, --load) replaces the file's
 * list. */
static void load_config_file(options_t *o)
{
    for (int i = 1; i < o->argc; i++) {
        char **argv = o->argv;
        const char *path = !strcmp(argv[i], "--config") && i + 1 < o->argc ? argv[i + 1]
                           : !strncmp(argv[i], "--config=", 9)             ? argv[i] + 9
                                                                           : NULL;
        if (!strcmp(argv[i], "--"))
            break;
        if (!path)
            continue;
        char err[1024];
        if (sn_config_load(path, &config_file, err, sizeof err) != 0) {
            sn_config_free(&config_file);
            die_config(err);
        }
        atexit(free_config_file); /* its strings live until the program ends */
        apply_config_file(o, &config_file);
        break;
    }
}

/* A flag of the node itself or of the commands: 0 if c is none of them. */
static int node_flag(options_t *o, int c, char *arg)
{
    switch (c) {
    case 'w':
        o->sched.workers = (int)parse_num("--workers", arg, 1, 1024);
        return 1;
    case 'l':
        if (!o->loads_from_flags++)
            o->nplugins = 0;
        o->plugins[o->nplugins++] = arg;
        return 1;
    case OPT_CONFIG:
        return 1; /* read before the flags */
    case 'n':
        o->sched.node_id = (uint32_t)parse_num("--node-id", arg, 1, UINT32_MAX);
        o->node_id_given = 1;
        return 1;
    case OPT_SHUTDOWN:
        o->shutdown_ms = (int)parse_num("--shutdown-timeout", arg, 0, INT_MAX);
        return 1;
    case OPT_TIMEOUT:
        o->timeout_ms = (int)parse_num("--timeout", arg, 0, INT_MAX);
        return 1;
    case OPT_LOGLEVEL:
        o->log_level = sn__log_level_parse(arg);
        if (o->log_level < 0)
            die_usage("--log-level: '%s' is not one of %s", arg, sn__log_level_names());
        return 1;
    case OPT_NAME:
        o->key_name = arg;
        return 1;
    case OPT_ENDPOINT:
        if (strncmp(arg, "tcp://", 6) != 0)
            die_usage("--endpoint: '%s' is not tcp://HOST:PORT", arg);
        o->key_endpoint = arg;
        return 1;
    case OPT_LOG_FORMAT:
        o->log_format = sn__log_format_parse(arg);
        if (o->log_format < 0)
            die_usage("--log-format: '%s' is not text or json", arg);
        return 1;
    }
    return 0;
}

/* A flag of the client commands: 0 if c is none of them. */
static int client_flag(options_t *o, int c, char *arg)
{
    switch (c) {
    case 'c':
        check_endpoint("--connect", arg, 0);
        o->connect = arg;
        return 1;
    case OPT_JSON:
        o->json = 1;
        return 1;
    case OPT_NODE:
        o->only_node = (uint32_t)parse_num("--node", arg, 1, UINT32_MAX);
        return 1;
    case OPT_ON:
        o->on_node = (uint32_t)parse_num("--on", arg, 1, UINT32_MAX);
        return 1;
    case OPT_TO:
        o->to_node = (uint32_t)parse_num("--to", arg, 1, UINT32_MAX);
        return 1;
    case OPT_THEN_STOP:
        o->then_stop = 1;
        return 1;
    case OPT_RESTART:
        if (strcmp(arg, "always") != 0 && strcmp(arg, "on-failure") != 0)
            die_usage("--restart: '%s' is not always or on-failure", arg);
        o->restart = arg;
        return 1;
    case OPT_MAX_RESTARTS:
        o->max_restarts = (int)parse_num("--max-restarts", arg, 0, 1000000);
        return 1;
    case OPT_WITHIN:
        o->within_ms = (int)parse_num("--within", arg, 1, INT32_MAX);
        return 1;
    case OPT_REASON:
        if (!*arg || strlen(arg) > 1000)
            die_usage("--reason: the text must have 1 to 1000 characters");
        o->reason = arg;
        return 1;
    case OPT_CANCEL_ON_TIMEOUT:
    case OPT_NO_CANCEL_ON_TIMEOUT:
        o->cancel_on_timeout = c == OPT_CANCEL_ON_TIMEOUT;
        return 1;
    case OPT_METRICS:
        check_endpoint("--metrics", arg, SN_ENDPOINT_BIND);
        o->metrics = arg;
        return 1;
    case OPT_DASHBOARD:
        check_endpoint("--dashboard", arg, SN_ENDPOINT_BIND);
        o->dashboard = arg;
        return 1;
    }
    return 0;
}

/* --peer N=ENDPOINT */
static void add_peer(options_t *o, char *arg)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || strncmp(eq + 1, "tcp://", 6) != 0)
        die_usage("--peer: '%s' is not N=tcp://HOST:PORT", arg);
    check_endpoint("--peer", eq + 1, 0);
    *eq = 0;
    o->peers[o->relay.npeers].node = (uint32_t)parse_num("--peer", arg, 1, UINT32_MAX);
    o->peers[o->relay.npeers++].endpoint = eq + 1;
}

/* A flag of the cluster (the relay's configuration): 0 if c is none. */
static int cluster_flag(options_t *o, int c, char *arg)
{
    sn_relay_config_t *r = &o->relay;
    switch (c) {
    case OPT_LISTEN:
        check_endpoint("--listen", arg, SN_ENDPOINT_BIND);
        r->listen = arg;
        return 1;
    case OPT_PEER:
        add_peer(o, arg);
        return 1;
    case OPT_JOIN:
        check_endpoint("--join", arg, 0);
        if (!o->joins_from_flags++)
            r->nseeds = 0;
        o->seeds[r->nseeds++] = arg;
        return 1;
    case OPT_ADVERTISE:
        check_endpoint("--advertise", arg, 0);
        r->advertise = arg;
        return 1;
    case OPT_CLUSTER:
        if (!*arg || strlen(arg) >= 64)
            die_usage("--cluster: the name must have 1 to 63 characters");
        r->cluster = arg;
        return 1;
    case OPT_CERT:
        r->security.cert = arg;
        o->insecure = 0; /* overrides the file's insecure = true */
        return 1;
    case OPT_AUTHORIZED:
        r->security.authorized = arg;
        return 1;
    case OPT_INSECURE:
        if (r->security.cert && r->security.cert == config_file.cert) /* the file's keys, overridden */
            r->security = (sn_security_t){NULL, NULL};
        o->insecure = 1;
        return 1;
    case OPT_JOIN_TIMEOUT:
        o->join_timeout_ms = (int)parse_num("--join-timeout", arg, 100, INT_MAX);
        return 1;
    case OPT_MAXFRAME:
        r->max_frame = (size_t)sn_parse_bytes("--max-frame", arg, 4096, 1LL << 30);
        return 1;
    case OPT_MAXMSG:
        r->max_message = (size_t)sn_parse_bytes("--max-message", arg, 1, 1LL << 32);
        return 1;
    case OPT_BACKLOGFULL:
        if (strcmp(arg, "wait") != 0 && strcmp(arg, "fail") != 0)
            die_usage("--backlog-full: '%s' is not wait or fail", arg);
        r->backlog_fails = strcmp(arg, "fail") == 0;
        return 1;
    case OPT_MAXBACKLOG:
        r->max_backlog = (size_t)sn_parse_bytes("--max-backlog", arg, 1LL << 20, 1LL << 40);
        return 1;
    case OPT_HB:
        r->heartbeat_ms = (int)parse_num("--heartbeat-ms", arg, 10, 60000);
        return 1;
    case OPT_FORGET:
        r->forget_after_ms = (int)parse_num("--forget-after-ms", arg, 1000, INT_MAX);
        return 1;
    case OPT_DOWN:
        r->down_after_ms = (int)parse_num("--down-after-ms", arg, 50, 600000);
        return 1;
    case OPT_NO_STEAL:
        r->steal = 0;
        return 1;
    case OPT_STEAL_BATCH:
        r->steal_batch = (int)parse_num("--steal-batch", arg, 1, 4096);
        return 1;
    }
    return 0;
}

/* The long options whose names start with name[0..len): the one named
 * exactly, else every one it abbreviates (as getopt_long takes them). */
static size_t options_named(const char *name, size_t len, const struct option **found, size_t max)
{
    size_t n = 0;
    for (const struct option *lo = long_opts; lo->name; lo++) {
        if (strlen(lo->name) == len && !strncmp(lo->name, name, len)) {
            found[0] = lo;
            return 1;
        }
        if (!strncmp(lo->name, name, len) && n < max)
            found[n++] = lo;
    }
    return n;
}

/* A flag getopt_long refused (c: ':' a value is missing, '?' anything
 * else; arg: the word it refused): says what is wrong with it, and for
 * an unknown one the closest option (did you mean), then exits 2. Guarded
 * by cli.sh (option errors). */
static void die_bad_option(int c, const char *arg)
{
    if (strncmp(arg, "--", 2) != 0) {
        if (c == ':')
            die_usage("option '-%c' needs a value", optopt);
        die_usage("unknown option '-%c'", optopt);
    }
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const struct option *found[64];
    size_t n = options_named(name, len, found, 64);
    if (n == 1 && c == ':')
        die_usage("option '--%s' needs a value", found[0]->name);
    if (n == 1 && eq && found[0]->has_arg == no_argument)
        die_usage("option '--%s' takes no value: give it as '--%s' alone, not '%s'", found[0]->name, found[0]->name,
                  arg);
    if (n > 1) {
        char list[1024] = "";
        for (size_t i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s--%s", i ? ", " : "", found[i]->name);
        die_usage("option '--%.*s' is ambiguous: it could be %s", (int)len, name, list);
    }
    const char *words[sizeof long_opts / sizeof long_opts[0]];
    size_t nwords = 0;
    for (const struct option *lo = long_opts; lo->name; lo++)
        words[nwords++] = lo->name;
    char word[128];
    snprintf(word, sizeof word, "%.*s", (int)len, name);
    const char *near = sn__closest(word, words, nwords);
    if (near)
        die_usage("unknown option '--%s' (did you mean '--%s'?)", word, near);
    die_usage("unknown option '--%s'", word);
}

/* Fills *o from the configuration file and the flags, checking what every
 * command needs (a bad flag or file exits 2 naming it). Returns 1 to go on
 * with o->cmd, 0 if --help or --version was answered. Free *o with
 * options_free either way. */
static int parse_options(options_t *o, int argc, char **argv)
{
    options_init(o, argc, argv);
    load_config_file(o);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":w:l:n:c:hV", long_opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == 'V') {
            printf("schednode %s (API %u)\n", SN_VERSION_STRING, SN_API_VERSION);
            return 0;
        }
        if (c == ':' || c == '?')
            die_bad_option(c, argv[optind - 1]);
        if (node_flag(o, c, optarg) || cluster_flag(o, c, optarg) || client_flag(o, c, optarg))
            continue;
        die_bad_option('?', argv[optind - 1]);
    }
    if (optind < argc) {
        o->cmd = argv[optind];
        o->args = argv + optind + 1;
        o->nargs = argc - optind - 1;
    }
    if (o->key_endpoint && (!o->cmd || strcmp(o->cmd, "keygen") != 0))
        die_usage("--endpoint belongs to keygen");
    if ((o->restart || o->max_restarts >= 0 || o->within_ms >= 0) && (!o->cmd || strcmp(o->cmd, "service") != 0))
        die_usage("%s belongs to service add", o->restart             ? "--restart"
                                               : o->max_restarts >= 0 ? "--max-restarts"
                                                                      : "--within");
    if (o->key_name && (!o->cmd || (strcmp(o->cmd, "keygen") != 0 && strcmp(o->cmd, "spawn") != 0)))
        die_usage("--name belongs to keygen and spawn");
    if (o->insecure && o->relay.security.cert)
        die_usage("--insecure and --cert contradict each other: choose one");
    if (!o->insecure) {
        char err[1024];
        if (sn_keys_check(&o->relay.security, err, sizeof err) != 0)
            die_usage("%s", err);
    }
    return 1;
}

/* `keygen DIR`: writes a certificate (sn_keys_generate). */
static int keygen(const options_t *o)
{
    if (o->nargs != 1)
        die_usage("usage: keygen DIR [--name NAME] [--endpoint tcp://HOST:PORT [--node-id N]]");
    /* -n/--node-id, if given here (not the default 1): the node id the
     * certificate names, which members then hold it to */
    uint32_t key_node = 0;
    for (int i = 1; i < o->argc && strcmp(o->argv[i], "--") != 0; i++) {
        const char *a = o->argv[i];
        size_t n = strcspn(a, "=");
        if ((a[0] == '-' && a[1] == 'n') || (n >= 5 && !strncmp(a, "--node-id", n)))
            key_node = o->sched.node_id;
    }
    if (key_node && !o->key_endpoint)
        die_usage("keygen: --node-id needs --endpoint: a node's certificate names where it listens as well as "
                  "its id (a certificate without either is a client's)");
    const char *dir = o->args[0], *name = o->key_name ? o->key_name : "node";
    char err[1024], key[41];
    if (sn_keys_generate(dir, name, o->key_endpoint, key_node, key, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", progname, err);
        return 1;
    }
    printf("%s/%s.cert %s\n", dir, name, key);
    return 0;
}

/* A command that is none of the program's: the closest one (did you
 * mean), exit 2. Guarded by cli.sh (did you mean). */
static void die_unknown_command(const char *cmd)
{
    const char *words[16] = {"demo", "run", "keygen"};
    size_t n = 3;
    for (size_t i = 0; sn_cli_commands[i] && n < 16; i++)
        words[n++] = sn_cli_commands[i];
    const char *near = sn__closest(cmd, words, n);
    if (near)
        die_usage("unknown command '%s' (did you mean '%s'?)", cmd, near);
    die_usage("unknown command '%s'", cmd);
}

/* What running a node (or demo, or run) needs beyond parse_options. */
static void check_node_options(const options_t *o)
{
    const char *cmd = o->cmd;
    const sn_relay_config_t *r = &o->relay;
    if (cmd && strcmp(cmd, "demo") != 0 && strcmp(cmd, "run") != 0)
        die_unknown_command(cmd);
    if (r->npeers && !r->listen)
        die_usage("--peer needs --listen (peers must be able to answer)");
    if (r->nseeds && !r->listen)
        die_usage("--join needs --listen (members must be able to reach this node)");
    if (r->nseeds && r->npeers)
        die_usage("--join and --peer do not mix: either join a cluster or name a fixed one");
    if (r->listen && !r->security.cert && !o->insecure)
        die_usage("a listening node talks CurveZMQ: give --cert FILE and --authorized-keys DIR (make keys with "
                  "'%s keygen DIR'), or --insecure for plain TCP",
                  progname);
    if (cmd && !strcmp(cmd, "demo") && o->nargs != 0)
        die_usage("demo takes no arguments");
    if (cmd && !strcmp(cmd, "run") && (o->nargs < 2 || o->nargs > 3))
        die_usage("usage: run TYPE METHOD [ARG]");
}

/* Logging (to stderr; stdout carries results) and signals: SIGINT and
 * SIGTERM are taken synchronously by the main thread (sigwait); every
 * thread the scheduler starts inherits the mask that blocks them. */
static void start_process(const options_t *o, sigset_t *sigs)
{
    log_node = o->sched.node_id;
    sn__log_set_level(o->log_level); /* (the relay's too: one layer, log.h) */
    sn__log_set_format(o->log_format);
    zsys_init();
    /* a socket per member, and two for the monitor of its connection
     * (relay.c): libzmq's default cap of 1,024 sockets would cap the
     * members at about 340; 0 is the most libzmq allows */
    zsys_set_max_sockets(0);
    main_thread = pthread_self();
    on_exit(exit_off_main, NULL);
    char ident[64];
    snprintf(ident, sizeof ident, "schednode%s%s", config_file.name ? " " : "",
             config_file.name ? config_file.name : "");
    zsys_set_logident(ident);
    sn__log_set_ident(ident);
    zsys_set_logstream(stderr);
    sigemptyset(sigs);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
}

/* This run of the node: its incarnation (realtime ns, larger for every
 * later run) and its first PID serial, the start time in microseconds
 * times 1024. A run hands out fewer than 1024 serials per microsecond
 * it lives (4 M spawns/s is 4 per microsecond), so every serial of a
 * later run is above every serial of an earlier one: an old PID can
 * never name a new process. Good until the year 2255. */
static void number_this_run(options_t *o)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    o->relay.incarnation = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    o->sched.first_serial = o->relay.incarnation / 1000u * 1024u;
    o->relay.first_serial = o->sched.first_serial;
}

/* --load FILE names a file as a config file's paths do: "counter.so" is
 * ./counter.so, never a name for dlopen's library search path. */
static int load_plugins(const options_t *o, sn_sched_t *sched)
{
    for (int i = 0; i < o->nplugins; i++) {
        char err[512], path[4096];
        snprintf(path, sizeof path, "%s%s", strchr(o->plugins[i], '/') ? "" : "./", o->plugins[i]);
        if (sn_plugin_load(sched, path, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", progname, err);
            return -1;
        }
        logf_(SN__LOG_INFO, "loaded plugin %s", path);
    }
    return 0;
}

/* `demo` runs on the demo plugin's types: unless --load names it, it is
 * loaded from next to the program (the build tree), else from where it is
 * installed (SN_DEMO_PLUGIN, relative to the program's directory). */
static int load_demo_plugin(const options_t *o, sn_sched_t *sched)
{
    for (int i = 0; i < o->nplugins; i++) {
        const char *base = strrchr(o->plugins[i], '/');
        if (!strcmp(base ? base + 1 : o->plugins[i], "schednode-demo.so"))
            return 0;
    }
    char exe[4096], path[4096 + 64], err[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(path, sizeof path, "%s/schednode-demo.so", exe);
    if (access(path, R_OK) != 0)
        snprintf(path, sizeof path, "%s/%s", exe, SN_DEMO_PLUGIN);
    if (sn_plugin_load(sched, path, err, sizeof err) != 0) {
        fprintf(stderr, "%s: demo: cannot load the demo plugin: %s (give it with --load PATH/schednode-demo.so)\n",
                progname, err);
        return -1;
    }
    return 0;
}

/* The node id a certificate names (keygen --node-id), or 0. */
static uint32_t cert_node_id(const char *path)
{
    zcert_t *cert = path ? zcert_load(path) : NULL;
    const char *id = cert ? zcert_meta(cert, "node-id") : NULL;
    unsigned long long v = id ? strtoull(id, NULL, 10) : 0;
    zcert_destroy(&cert);
    return v <= UINT32_MAX ? (uint32_t)v : 0;
}

/* A random id, 1..2^32-1 (libsodium), not `avoid`. */
static uint32_t random_node_id(uint32_t avoid)
{
    uint32_t id;
    do
        id = 1 + randombytes_uniform(UINT32_MAX);
    while (id == avoid);
    return id;
}

/* Without -n (or node/id), a node that listens takes the id its
 * certificate names, else a random one: 32 random bits, which the seed
 * checks against its view at the join (a taken id is refused with
 * SN_EEXIST and start_relay picks another). A node with fixed --peer
 * lists, or one that does not listen, stays node 1. */
static void choose_node_id(options_t *o)
{
    if (o->node_id_given || !o->relay.listen || o->relay.npeers)
        return;
    uint32_t id = cert_node_id(o->relay.security.cert);
    o->node_id_auto = id == 0;
    o->sched.node_id = id ? id : random_node_id(0);
#ifdef SN_FAULT_INJECTION
    const char *first = getenv("SN_FAULT_FIRST_ID"); /* tests/autoid.sh: a collision on purpose */
    if (o->node_id_auto && first)
        o->sched.node_id = (uint32_t)strtoul(first, NULL, 10);
#endif
}

/* Each member costs a node about FDS_PER_MEMBER file descriptors (its
 * outbound connection, the mailboxes of libzmq's socket for it and of the
 * two that monitor that connection, the member's connection to us): the
 * open-file limit, raised as far as the hard limit lets at start-up,
 * bounds the members a node can keep (the table itself grows with the
 * cluster). */
#define FDS_PER_MEMBER 5
static void raise_open_files(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY ? 1048576 : rl.rlim_max;
        struct rlimit up = {want, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl.rlim_cur = want;
    }
    logf_(SN__LOG_INFO, "open files: up to %llu, room for about %llu members", (unsigned long long)rl.rlim_cur,
          (unsigned long long)(rl.rlim_cur > 64 ? (rl.rlim_cur - 64) / FDS_PER_MEMBER : 0));
}

/* Starts the relay (*relay, set as soon as it exists) and joins the
 * cluster; a node whose random id was taken tries again with another
 * (at most 8 times). Returns 0, or the exit status having said why: 2 when
 * a seed refused this node (its configuration: cluster name, keys, a
 * taken -n), 1 when none answered or the relay could not start. */
static int start_relay(options_t *o, sn_sched_t *sched, sn_relay_t **relay, const sigset_t *sigs)
{
    char err[512];
    o->relay.peers = o->peers;
    o->relay.seeds = o->seeds;
    for (int tries = 1;; tries++) {
        *relay = sn_relay_new(sched, &o->relay, err, sizeof err);
        /* a retry: the same settings worked a moment ago, but libzmq closes
         * the old relay's listening socket on its own thread: wait for the
         * port (up to 2 s) */
        for (int w = 0; !*relay && tries > 1 && w < 100; w++) {
            zclock_sleep(20);
            *relay = sn_relay_new(sched, &o->relay, err, sizeof err);
        }
        if (!*relay) {
            fprintf(stderr, "%s: %s\n", progname, err);
            return 1;
        }
        if (tries == 1) {
            logf_(SN__LOG_INFO, "listening on %s%s%s", sn_relay_endpoint(*relay),
                  o->relay.advertise ? ", advertised as " : "", o->relay.advertise ? o->relay.advertise : "");
            raise_open_files();
        }
        int sig = 0, rc = sn_relay_join_wait(*relay, o->join_timeout_ms, sigs, &sig, err, sizeof err);
        if (rc == 0)
            return 0;
        if (rc == SN_ECANCELED) { /* (cli.sh: SIGINT and SIGTERM to a joining node) */
            fprintf(stderr, "%s: %s while joining the cluster: stopped\n", progname,
                    sig == SIGINT ? "SIGINT" : "SIGTERM");
            return SN_EXIT_SIGNAL(sig);
        }
        if (rc != SN_EEXIST || !o->node_id_auto || tries == 8) {
            fprintf(stderr, "%s: cannot join the cluster: %s\n", progname, err);
            return rc == SN_ETIMEDOUT ? 1 : EXIT_USAGE;
        }
        uint32_t old = o->sched.node_id;
        /* no process exists yet, so no worker is in a hook of the old
         * relay: unhook it, free it, make the next with the new id */
        sn__sched_set_relay(sched, NULL);
        sn_relay_destroy(relay);
        o->sched.node_id = random_node_id(old);
        sn__sched_set_node_id(sched, o->sched.node_id);
        log_node = o->sched.node_id;
        logf_(SN__LOG_WARN, "node id %" PRIu32 " (picked at random) is taken: trying again as node %" PRIu32, old,
              o->sched.node_id);
    }
}

/* Where an HTTP server listens, as a URL a user can open: the endpoint's
 * host (localhost for '*') and the port bound. */
static void http_url(char *buf, size_t len, const char *ep, int port, const char *path)
{
    const char *host = ep + strlen("tcp://"), *colon = strrchr(host, ':');
    int hlen = colon ? (int)(colon - host) : (int)strlen(host);
    if (hlen == 1 && host[0] == '*')
        host = "localhost", hlen = 9;
    snprintf(buf, len, "http://%.*s:%d%s", hlen, host, port, path);
}

/* The HTTP servers of --metrics and --dashboard: each flag has a server
 * of its own (port '*': each gets a free port of its own), except that
 * both flags naming one fixed port share one, which serves both. Each
 * logs its port and URL (cli_cluster.sh: --metrics and --dashboard).
 * Returns 0, or -1 having said why. */
static int start_http(const options_t *o, sn_sched_t *sched, sn_relay_t *relay, sn_http_t **http)
{
    const char *eps[2] = {o->dashboard, o->metrics};
    int serve[2] = {SN_HTTP_DASHBOARD | SN_HTTP_METRICS, SN_HTTP_METRICS};
    bool shared =
        o->dashboard && o->metrics && !strcmp(o->dashboard, o->metrics) && strcmp(strrchr(o->metrics, ':'), ":*") != 0;
    for (int i = 0; i < 2; i++) {
        if (!eps[i] || (i == 1 && shared))
            continue;
        char err[512], url[300];
        sn_http_config_t cfg = {eps[i], serve[i], sched, relay, &o->relay.security};
        if (!(http[i] = sn_http_new(&cfg, err, sizeof err))) {
            fprintf(stderr, "%s: %s %s\n", progname, i ? "--metrics:" : "--dashboard:", err);
            return -1;
        }
        sn__sched_time_steps(sched, true);
        int port = sn_http_port(http[i]);
        http_url(url, sizeof url, eps[i], port, i ? "/metrics" : "/");
        if (i)
            logf_(SN__LOG_INFO, "metrics on port %d: %s", port, url);
        else
            logf_(SN__LOG_INFO, "dashboard on port %d: %s (metrics at /metrics%s)", port, url,
                  shared ? ", as --metrics asks" : "");
    }
    return 0;
}

static void service_added(sn_sched_t *sched, sn_pid_t pid, sn_status_t status, int error, sn_payload_t **result,
                          void *arg)
{
    (void)sched, (void)pid;
    if (status != SN_DONE)
        logf_(SN__LOG_WARN, "service %s (config): %s%s%s", (const char *)arg, sn_strerror(error), *result ? ": " : "",
              *result ? (const char *)(*result)->data : "");
}

/* The config's services (cluster/service = "NAME TYPE METHOD [ARG]"),
 * each added as `service add` does (relay/services.c): a service the
 * cluster has already with the same spec is left as it is. */
static void add_services(const options_t *o, sn_sched_t *sched)
{
    for (size_t i = 0; i < o->nservices; i++) {
        char w[3][256] = {"", "", ""};
        const char *arg = o->services[i];
        int k = 0;
        for (; k < 3; k++) { /* (config.c checked the words: NAME TYPE METHOD) */
            arg += strspn(arg, " ");
            size_t len = strcspn(arg, " ");
            if (!len || len > 255)
                break;
            snprintf(w[k], sizeof w[k], "%.*s", (int)len, arg);
            arg += len;
        }
        arg += strspn(arg, " ");
        sn_payload_t *in = sn_payload_printf(SN_CT_TEXT, "%s\n%s\n%s\non-failure\n%d\n%d%s%s", w[0], w[1], w[2],
                                             SN_SVC_MAX_RESTARTS, SN_SVC_WITHIN_MS, *arg ? "\n" : "", arg);
        if (k != 3 || sn_spawn(sched, "sn.services", "add", &in, service_added, (void *)o->services[i], NULL) != 0)
            logf_(SN__LOG_WARN, "service %s (config): cannot add it", o->services[i]);
        sn_payload_destroy(&in);
    }
}

/* No command: the node runs until SIGINT or SIGTERM (raise_term's, when
 * this run was put out of its cluster: then EXIT_OUT). */
static int wait_for_signal(const options_t *o, sn_sched_t *sched, sn_relay_t *relay, const sigset_t *sigs)
{
    int exit_code = 0;
    int workers = sn_sched_workers(sched);
    logf_(SN__LOG_INFO, "up: %d worker%s; stop with SIGINT or SIGTERM", workers, workers == 1 ? "" : "s");
    add_services(o, sched);
    int sig = 0;
    sigwait(sigs, &sig);
    char why[1024];
    if (sn_relay_out(relay, why, sizeof why)) { /* raise_term raised the SIGTERM */
        fprintf(stderr, "%s: %s\n", progname, why);
        exit_code = EXIT_OUT;
    }
    logf_(SN__LOG_INFO, "%s: shutting down (processes get %d ms)", sig == SIGINT ? "SIGINT" : "SIGTERM",
          o->shutdown_ms);
    return exit_code;
}

/* `run`: the process's outcome, from its on_result (a worker) to the main
 * thread. Static, since a run that timed out may still end later, while
 * the node shuts down: its result is then dropped (`gone`). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, gone;
    int sig; /* SIGINT or SIGTERM came (signal_waiter): the wait ends */
    sn_status_t status;
    int error;
    sn_payload_t *result;
} run_out = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void run_done(sn_sched_t *sched, sn_pid_t pid, sn_status_t status, int error, sn_payload_t **result, void *arg)
{
    pthread_mutex_lock(&run_out.mu);
    if (!run_out.gone) { /* (else the runtime frees *result) */
        run_out.done = true;
        run_out.status = status;
        run_out.error = error;
        run_out.result = sn_take(result);
        pthread_cond_signal(&run_out.cv);
    }
    pthread_mutex_unlock(&run_out.mu);
}

/* `run` waits for its process on a condition variable, so a thread of
 * its own takes SIGINT and SIGTERM (sigwait: every thread blocks them) and
 * ends that wait at once; the shutdown that follows CANCELs the process
 * (cli.sh: SIGINT and SIGTERM to run). */
static void *signal_waiter(void *arg)
{
    int sig = 0;
    if (sigwait((const sigset_t *)arg, &sig) == 0) {
        pthread_mutex_lock(&run_out.mu);
        run_out.sig = sig;
        pthread_cond_signal(&run_out.cv);
        pthread_mutex_unlock(&run_out.mu);
    }
    return NULL;
}

/* run TYPE METHOD [ARG]: a refused spawn is named as such (unknown type or
 * method, the type's init refused), apart from a process that ran and
 * failed, and from a timeout. */
static int run_process(const options_t *o, sn_sched_t *sched, const sigset_t *sigs)
{
    const char *type = o->args[0], *method = o->args[1];
    sn_payload_t *in = o->nargs == 3 ? sn_payload_text(o->args[2]) : NULL;
    int rc = sn_spawn(sched, type, method, &in, run_done, NULL, NULL);
    sn_payload_destroy(&in);
    if (rc != 0) {
        char why[256];
        sn__spawn_refusal(why, sizeof why, type, method, rc);
        fprintf(stderr, "%s: cannot run %s %s: %s\n", progname, type, method, why);
        return 1;
    }
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end); /* (the condition variable's clock) */
    end.tv_sec += o->timeout_ms / 1000;
    end.tv_nsec += (long)(o->timeout_ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    pthread_t waiter;
    bool waiting = pthread_create(&waiter, NULL, signal_waiter, (void *)sigs) == 0;
    pthread_mutex_lock(&run_out.mu);
    while (!run_out.done && !run_out.sig)
        if (o->timeout_ms < 0 ? pthread_cond_wait(&run_out.cv, &run_out.mu) != 0
                              : pthread_cond_timedwait(&run_out.cv, &run_out.mu, &end) == ETIMEDOUT)
            break;
    run_out.gone = true;
    bool done = run_out.done;
    rc = run_out.status == SN_DONE ? 0 : (run_out.error ? run_out.error : SN_EFAILED);
    int sig = run_out.sig;
    sn_payload_t *res = sn_take(&run_out.result);
    pthread_mutex_unlock(&run_out.mu);
    if (waiting) { /* (sigwait is a cancellation point) */
        pthread_cancel(waiter);
        pthread_join(waiter, NULL);
    }
    if (!done && sig) {
        fprintf(stderr, "%s: %s %s: %s: the process gets a CANCEL, the node shuts down\n", progname, type, method,
                sig == SIGINT ? "SIGINT" : "SIGTERM");
        sn_payload_destroy(&res);
        return SN_EXIT_SIGNAL(sig);
    }
    if (!done) {
        fprintf(stderr, "%s: %s %s: no result within %d ms (--timeout): the process gets a CANCEL\n", progname, type,
                method, o->timeout_ms);
        return SN_EXIT_TIMEOUT;
    }
    sn_cli_print_result(rc, res);
    sn_payload_destroy(&res);
    return rc == 0 ? 0 : 1;
}

/* demo, run, or (none) the node itself; returns the exit status. */
static int run_command(const options_t *o, sn_sched_t *sched, sn_relay_t *relay, const sigset_t *sigs)
{
    if (!o->cmd)
        return wait_for_signal(o, sched, relay, sigs);
    if (!strcmp(o->cmd, "demo"))
        return sn_demo_run(sched);
    return run_process(o, sched, sigs);
}

/* The node (with no command, demo or run): the scheduler, the demo types
 * and plugins, the relay if it listens; the command; an orderly shutdown. */
static int run_node(options_t *o)
{
    check_node_options(o);
    choose_node_id(o);
    sigset_t sigs;
    start_process(o, &sigs);
    number_this_run(o);
    int exit_code = 1;
    sn_relay_t *relay = NULL;
    sn_http_t *http[2] = {NULL, NULL};
    sn_sched_t *sched = sn_sched_new(&o->sched);
    if (!sched) {
        fprintf(stderr, "%s: cannot start the scheduler (out of memory or threads)\n", progname);
        goto out;
    }
    if (load_plugins(o, sched) != 0 || (o->cmd && !strcmp(o->cmd, "demo") && load_demo_plugin(o, sched) != 0)) {
        exit_code = EXIT_USAGE;
        goto out;
    }
    if (o->relay.listen && (exit_code = start_relay(o, sched, &relay, &sigs)) != 0)
        goto out;
    if (start_http(o, sched, relay, http) != 0) {
        exit_code = 1; /* (start_relay set 0) */
        goto out;
    }

    exit_code = run_command(o, sched, relay, &sigs);
    sn_http_destroy(&http[0]); /* no scrape waits on a relay that is leaving */
    sn_http_destroy(&http[1]);
    sn_relay_stop_stealing(relay); /* handovers end: nothing is half-moved at shutdown */
    int forced = sn_sched_shutdown(sched, o->shutdown_ms);
    sn_relay_leave(relay); /* the members hear we left, not that we failed */
    sn_stats_t st;
    sn_sched_stats(sched, &st);
    logf_(o->cmd ? SN__LOG_DEBUG : SN__LOG_INFO,
          "stopped: %" PRIu64 " process%s run, %" PRIu64 " message%s, %d force-closed", st.completed,
          st.completed == 1 ? "" : "es", st.messages, st.messages == 1 ? "" : "s", forced);
out:
    sn_http_destroy(&http[0]); /* (it reads the scheduler and the relay) */
    sn_http_destroy(&http[1]);
    /* The relay goes after the scheduler has shut down (no more sends): it
     * has, unless joining failed (then at once: it never ran anything). */
    if (relay)
        sn_sched_shutdown(sched, 0);
    sn_relay_destroy(&relay);
    sn_sched_destroy(&sched);
    return exit_code;
}

/* A client command (cli.c) with what the command line gave it. */
static int client(const options_t *o)
{
    sn_cli_t c = {.cmd = o->cmd,
                  .args = o->args,
                  .nargs = o->nargs,
                  .connect = o->connect,
                  .security = &o->relay.security,
                  .timeout_ms = o->timeout_ms,
                  .json = o->json,
                  .only_node = o->only_node,
                  .reason = o->reason,
                  .on_node = o->on_node,
                  .to_node = o->to_node,
                  .cancel_on_timeout = o->cancel_on_timeout,
                  .then_stop = o->then_stop,
                  .name = o->key_name,
                  .restart = o->restart,
                  .max_restarts = o->max_restarts,
                  .within_ms = o->within_ms};
    return sn_cli_run(&c);
}

int main(int argc, char **argv)
{
    options_t o;
    int exit_code = 0;
    if (parse_options(&o, argc, argv)) {
        if (o.cmd && !strcmp(o.cmd, "keygen"))
            exit_code = keygen(&o);
        else if (sn_cli_is_command(o.cmd))
            exit_code = client(&o);
        else
            exit_code = run_node(&o);
    }
    options_free(&o);
    return exit_code;
}

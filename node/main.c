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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <czmq.h>

#include "codec.h"
#include "config.h"
#include "demo.h"
#include "log.h"
#include "relay.h"
#include "schednode/schednode.h"

#define EXIT_USAGE 2
#define EXIT_OUT 3 /* this run was put out of its cluster (sn_relay_out) */

static const char *progname = "schednode";
static uint32_t log_node = 1; /* the node every line names: set once, before any line */

/* The program's lines go through the one logging layer (log.h, czmq's
 * zsys, which the relay logs through too): one line per event, naming the
 * node once. */
#define logf_(level, ...) sn__logf(log_node, (level), __VA_ARGS__)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [OPTIONS] [COMMAND [ARGS]]\n"
            "\n"
            "Commands:\n"
            "  (none)                  run a node until SIGINT or SIGTERM\n"
            "  demo                    run the demo workload on this node and print what it did\n"
            "  run TYPE METHOD [ARG]   spawn one process (ARG as a text payload), wait for it,\n"
            "                          print its result; exit 1 with the error if it fails\n"
            "Client commands (talk to a running node, --connect ENDPOINT):\n"
            "  spawn TYPE METHOD [ARG] spawn a process there, print its PID\n"
            "  send PID DATA           send DATA (text) to PID\n"
            "  call TYPE METHOD [ARG]  spawn, wait, print the result; exit 1 with the error if it fails\n"
            "  status [--json]         one row per node of the cluster: state, load, counters\n"
            "Keys:\n"
            "  keygen DIR [--name NAME] [--endpoint EP [-n N]]\n"
            "                          write a CurveZMQ certificate: DIR/NAME.cert (public, goes into\n"
            "                          every node's authorized-keys directory) and DIR/NAME.cert_secret;\n"
            "                          a node's names where it listens (--endpoint: how others find its\n"
            "                          key) and its id (-n): members admit the key as that node only;\n"
            "                          without --endpoint it is a client's, which never joins as a node\n"
            "\n"
            "Options:\n"
            "      --config FILE          read settings from a ZPL file (cluster-config/README.md);\n"
            "                             flags given as well override it\n"
            "  -w, --workers N            worker threads (default: one per online CPU)\n"
            "  -l, --load FILE.so         load a plugin of process types and commands (repeatable)\n"
            "  -n, --node-id N            this node's id in PIDs, 1..4294967295 (default 1)\n"
            "      --shutdown-timeout MS  time processes get to finish after CANCEL (default 2000)\n"
            "      --timeout MS           run: how long to wait for the result (default: forever)\n"
            "      --log-level LEVEL      error, warn, info or debug (default info)\n"
            "      --listen ENDPOINT      accept other nodes and clients here, e.g. tcp://127.0.0.1:7001\n"
            "                             (port 1..65535, or * for any free one)\n"
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
            "      --max-frame BYTES      largest frame accepted from the network (default 16 MiB)\n"
            "      --heartbeat-ms MS      heartbeat period to peers (default 200)\n"
            "      --down-after-ms MS     a peer silent this long is down (default 1500)\n"
            "  -c, --connect ENDPOINT     client commands: the node to talk to\n"
            "      --json                 status: print JSON\n"
            "  -h, --help                 this help\n"
            "  -V, --version              print the version\n",
            progname);
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", progname);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", progname);
    exit(EXIT_USAGE);
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

static void print_result(int rc, sn_payload_t *res)
{
    if (rc == 0) {
        if (!res)
            printf("ok\n");
        else if (res->ctype == SN_CT_U64 && res->len == 8) {
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
    } else {
        fprintf(stderr, "%s: process failed: %s%s%s\n", progname, sn_strerror(rc), res ? ": " : "",
                res ? (const char *)res->data : "");
    }
}

static const char *state_name(int state)
{
    static const char *names[] = {"up", "suspect", "down", "left"};
    return state >= 0 && state < 4 ? names[state] : "?";
}

/* `status`: one row per node, as a table or as JSON (one object with a
 * "nodes" array; every figure a number, state and endpoint strings). */
static void print_status(const sn_wire_stats_t *rows, size_t n, int json)
{
    if (json) {
        printf("{\"nodes\": [");
        for (size_t i = 0; i < n; i++) {
            const sn_wire_stats_t *r = &rows[i];
            printf("%s\n  {\"id\": %u, \"endpoint\": \"%s\", \"state\": \"%s\", \"workers\": %u, "
                   "\"idle_workers\": %u, \"live\": %" PRIu64 ", \"ready\": %" PRIu64 ", \"idle\": %" PRIu64
                   ", \"blocked\": %" PRIu64 ", \"completed\": %" PRIu64 ", \"msgs_in\": %" PRIu64 ", \"msgs_out\": %" PRIu64
                   ", \"steals_in\": %" PRIu64 ", \"steals_out\": %" PRIu64 ", \"migrated\": %" PRIu64
                   ", \"forwarded\": %" PRIu64 ", \"refused\": %" PRIu64 ", \"disconnects\": %" PRIu64 ", \"forwarding\": %" PRIu64 ", \"bad_frames\": %" PRIu64 ", \"uptime_ms\": %" PRIu64 "}",
                   i ? "," : "", r->node, r->endpoint, state_name(r->state), r->workers, r->idle_workers, r->live,
                   r->ready, r->idle, r->blocked, r->completed, r->msgs_in, r->msgs_out, r->steals_in, r->steals_out,
                   r->migrated, r->forwarded, r->refused, r->disconnects, r->forwarding, r->bad_frames, r->uptime_ms);
        }
        printf("\n]}\n");
        return;
    }
    printf("%-6s %-28s %-8s %7s %7s %7s %7s %9s %10s %10s %6s %6s %10s\n", "NODE", "ENDPOINT", "STATE", "WORKERS",
           "READY", "IDLE", "BLOCKED", "DONE", "MSGS_IN", "MSGS_OUT", "ST_IN", "ST_OUT", "UPTIME");
    for (size_t i = 0; i < n; i++) {
        const sn_wire_stats_t *r = &rows[i];
        char up[32];
        snprintf(up, sizeof up, "%" PRIu64 ".%01" PRIu64 "s", r->uptime_ms / 1000, r->uptime_ms % 1000 / 100);
        printf("%-6u %-28s %-8s %7u %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %9" PRIu64 " %10" PRIu64 " %10" PRIu64 " %6" PRIu64
               " %6" PRIu64 " %10s\n",
               r->node, r->endpoint, state_name(r->state), r->workers, r->ready, r->idle, r->blocked, r->completed,
               r->msgs_in,
               r->msgs_out, r->steals_in, r->steals_out, up);
    }
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
static void free_config_file(void) { sn_config_free(&config_file); }

/* The client commands: one request to the node at `connect`, one reply. */
static int client(const char *cmd, int argc, char **argv, const char *connect, const sn_security_t *sec,
                  int timeout_ms, int json)
{
    if (!connect)
        die_usage("%s needs --connect ENDPOINT (the node to talk to)", cmd);
    sn_wire_request_t req = {.id = (uint64_t)getpid()};
    if (!strcmp(cmd, "status")) {
        if (argc != 0)
            die_usage("usage: status [--json] --connect ENDPOINT");
        req.op = SN_OP_STATUS;
    } else if (!strcmp(cmd, "send")) {
        if (argc != 2)
            die_usage("usage: send PID DATA --connect ENDPOINT");
        if (sn_pid_parse(argv[0], &req.to) != 0)
            die_usage("send: '%s' is not a PID (NODE.SERIAL, e.g. 2.17)", argv[0]);
        req.op = SN_OP_SEND;
        req.arg = sn_payload_text(argv[1]);
    } else {
        if (argc < 2 || argc > 3)
            die_usage("usage: %s TYPE METHOD [ARG] --connect ENDPOINT", cmd);
        req.op = !strcmp(cmd, "spawn") ? SN_OP_SPAWN : SN_OP_CALL;
        req.type = argv[0];
        req.method = argv[1];
        req.arg = argc == 3 ? sn_payload_text(argv[2]) : NULL;
    }
    sn_wire_reply_t rep;
    char err[512];
    int rc = sn_client_call(connect, sec, &req, timeout_ms < 0 ? 30000 : timeout_ms, &rep, err, sizeof err);
    sn_payload_destroy(&req.arg);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", progname, err);
        return 1;
    }
    char buf[SN_PID_STRLEN];
    int exit_code = 0;
    if (rep.error) {
        fprintf(stderr, "%s: %s failed: %s%s%s\n", progname, cmd, sn_strerror(rep.error),
                rep.result ? ": " : (rep.reason && *rep.reason ? ": " : ""),
                rep.result ? (const char *)rep.result->data : (rep.reason ? rep.reason : ""));
        exit_code = 1;
    } else if (!strcmp(cmd, "spawn")) {
        printf("%s\n", sn_pid_format(rep.pid, buf, sizeof buf));
    } else if (!strcmp(cmd, "call")) {
        print_result(0, rep.result);
    } else if (!strcmp(cmd, "status")) {
        print_status(rep.rows, rep.nrows, json);
    }
    sn_client_reply_clear(&rep);
    return exit_code;
}

int main(int argc, char **argv)
{
    enum {
        OPT_SHUTDOWN = 256,
        OPT_TIMEOUT,
        OPT_LOGLEVEL,
        OPT_LISTEN,
        OPT_PEER,
        OPT_MAXFRAME,
        OPT_HB,
        OPT_DOWN,
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
        OPT_STEAL_BATCH
    };
    static const struct option opts[] = {{"workers", required_argument, NULL, 'w'},
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
                                         {"heartbeat-ms", required_argument, NULL, OPT_HB},
                                         {"down-after-ms", required_argument, NULL, OPT_DOWN},
                                         {"connect", required_argument, NULL, 'c'},
                                         {"json", no_argument, NULL, OPT_JSON},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {0, 0, 0, 0}};
    sn_sched_config_t cfg = {1, 0, 1};
    int shutdown_ms = 2000, timeout_ms = -1;
    const char **plugins = calloc((size_t)argc, sizeof *plugins);
    int nplugins = 0;
    sn_relay_config_t rcfg = {.steal = 1, .on_out = raise_term};
    sn_peer_config_t *peers = calloc((size_t)argc, sizeof *peers);
    const char **seeds = calloc((size_t)argc, sizeof *seeds);
    int join_timeout_ms = 10000, insecure = 0, log_level = SN__LOG_INFO;
    const char *key_name = NULL, *key_endpoint = NULL;
    /* The config file first (found before the other flags), so that flags
     * override it; a flag that can repeat (--join, --load) replaces the
     * file's list. */
    int joins_from_flags = 0, loads_from_flags = 0;
    for (int i = 1; i < argc; i++) {
        const char *path = !strcmp(argv[i], "--config") && i + 1 < argc ? argv[i + 1]
                           : !strncmp(argv[i], "--config=", 9)        ? argv[i] + 9
                                                                      : NULL;
        if (!strcmp(argv[i], "--"))
            break;
        if (!path)
            continue;
        char err[1024];
        if (sn_config_load(path, &config_file, err, sizeof err) != 0) {
            sn_config_free(&config_file);
            die_usage("%s", err);
        }
        atexit(free_config_file); /* its strings live until the program ends */
        if (config_file.node_id)
            cfg.node_id = config_file.node_id;
        if (config_file.workers)
            cfg.workers = config_file.workers;
        if (config_file.shutdown_ms >= 0)
            shutdown_ms = config_file.shutdown_ms;
        if (config_file.log_level >= 0)
            log_level = config_file.log_level;
        rcfg.listen = config_file.listen;
        rcfg.advertise = config_file.advertise;
        rcfg.cluster = config_file.cluster;
        rcfg.security = (sn_security_t){config_file.cert, config_file.authorized};
        insecure = config_file.insecure == 1;
        rcfg.heartbeat_ms = config_file.heartbeat_ms;
        rcfg.down_after_ms = config_file.down_after_ms;
        rcfg.max_frame = (size_t)config_file.max_frame;
        if (config_file.steal >= 0)
            rcfg.steal = config_file.steal;
        rcfg.steal_batch = config_file.steal_batch;
        if (config_file.join_timeout_ms)
            join_timeout_ms = config_file.join_timeout_ms;
        if (config_file.nseeds) {
            const char **more = realloc(seeds, ((size_t)argc + config_file.nseeds) * sizeof *more);
            if (!more)
                die_usage("out of memory");
            seeds = more;
            for (size_t k = 0; k < config_file.nseeds; k++)
                seeds[rcfg.nseeds++] = config_file.seeds[k];
        }
        if (config_file.nplugins) { /* more room: the file may name more than argv could */
            const char **more = realloc(plugins, ((size_t)argc + config_file.nplugins) * sizeof *more);
            if (!more)
                die_usage("out of memory");
            plugins = more;
            for (size_t k = 0; k < config_file.nplugins; k++)
                plugins[nplugins++] = config_file.plugins[k];
        }
        break;
    }
    const char *connect = NULL;
    int json = 0;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "w:l:n:c:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'w':
            cfg.workers = (int)parse_num("--workers", optarg, 1, 1024);
            break;
        case 'l':
            if (!loads_from_flags++)
                nplugins = 0;
            plugins[nplugins++] = optarg;
            break;
        case OPT_CONFIG:
            break; /* read above */
        case OPT_NO_STEAL:
            rcfg.steal = 0;
            break;
        case OPT_STEAL_BATCH:
            rcfg.steal_batch = (int)parse_num("--steal-batch", optarg, 1, 4096);
            break;
        case 'n':
            cfg.node_id = (uint32_t)parse_num("--node-id", optarg, 1, UINT32_MAX);
            break;
        case OPT_SHUTDOWN:
            shutdown_ms = (int)parse_num("--shutdown-timeout", optarg, 0, INT_MAX);
            break;
        case OPT_TIMEOUT:
            timeout_ms = (int)parse_num("--timeout", optarg, 0, INT_MAX);
            break;
        case OPT_LISTEN:
            check_endpoint("--listen", optarg, SN_ENDPOINT_BIND);
            rcfg.listen = optarg;
            break;
        case OPT_PEER: {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || strncmp(eq + 1, "tcp://", 6) != 0)
                die_usage("--peer: '%s' is not N=tcp://HOST:PORT", optarg);
            check_endpoint("--peer", eq + 1, 0);
            *eq = 0;
            peers[rcfg.npeers].node = (uint32_t)parse_num("--peer", optarg, 1, UINT32_MAX);
            peers[rcfg.npeers++].endpoint = eq + 1;
            break;
        }
        case OPT_JOIN:
            check_endpoint("--join", optarg, 0);
            if (!joins_from_flags++)
                rcfg.nseeds = 0;
            seeds[rcfg.nseeds++] = optarg;
            break;
        case OPT_ADVERTISE:
            check_endpoint("--advertise", optarg, 0);
            rcfg.advertise = optarg;
            break;
        case OPT_CLUSTER:
            if (!*optarg || strlen(optarg) >= 64)
                die_usage("--cluster: the name must have 1 to 63 characters");
            rcfg.cluster = optarg;
            break;
        case OPT_CERT:
            rcfg.security.cert = optarg;
            insecure = 0; /* overrides the file's insecure = true */
            break;
        case OPT_AUTHORIZED:
            rcfg.security.authorized = optarg;
            break;
        case OPT_INSECURE:
            if (rcfg.security.cert && rcfg.security.cert == config_file.cert) /* the file's keys, overridden */
                rcfg.security = (sn_security_t){NULL, NULL};
            insecure = 1;
            break;
        case OPT_NAME:
            key_name = optarg;
            break;
        case OPT_ENDPOINT:
            if (strncmp(optarg, "tcp://", 6) != 0)
                die_usage("--endpoint: '%s' is not tcp://HOST:PORT", optarg);
            key_endpoint = optarg;
            break;
        case OPT_JOIN_TIMEOUT:
            join_timeout_ms = (int)parse_num("--join-timeout", optarg, 100, INT_MAX);
            break;
        case OPT_MAXFRAME:
            rcfg.max_frame = (size_t)parse_num("--max-frame", optarg, 1024, 1LL << 30);
            break;
        case OPT_HB:
            rcfg.heartbeat_ms = (int)parse_num("--heartbeat-ms", optarg, 10, 60000);
            break;
        case OPT_DOWN:
            rcfg.down_after_ms = (int)parse_num("--down-after-ms", optarg, 50, 600000);
            break;
        case 'c':
            check_endpoint("--connect", optarg, 0);
            connect = optarg;
            break;
        case OPT_JSON:
            json = 1;
            break;
        case OPT_LOGLEVEL:
            log_level = sn__log_level_parse(optarg);
            if (log_level < 0)
                die_usage("--log-level: '%s' is not one of %s", optarg, sn__log_level_names());
            break;
        case 'h':
            usage(stdout);
            free(plugins);
            free(peers);
            free(seeds);
            return 0;
        case 'V':
            printf("schednode %s (API %u)\n", SN_VERSION_STRING, SN_API_VERSION);
            free(plugins);
            free(peers);
            free(seeds);
            return 0;
        case ':':
            die_usage("option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt)
                die_usage("unknown option '-%c'", optopt);
            die_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    const char *cmd = optind < argc ? argv[optind] : NULL;
    if ((key_name || key_endpoint) && (!cmd || strcmp(cmd, "keygen") != 0))
        die_usage("--name and --endpoint belong to keygen");
    if (insecure && rcfg.security.cert)
        die_usage("--insecure and --cert contradict each other: choose one");
    if (!insecure) {
        char err[1024];
        if (sn_keys_check(&rcfg.security, err, sizeof err) != 0)
            die_usage("%s", err);
    }
    if (cmd && !strcmp(cmd, "keygen")) {
        free(plugins);
        free(peers);
        free(seeds);
        if (argc - optind != 2)
            die_usage("usage: keygen DIR [--name NAME] [--endpoint tcp://HOST:PORT [--node-id N]]");
        /* -n/--node-id, if given here (not the default 1): the node id the
         * certificate names, which members then hold it to */
        uint32_t key_node = 0;
        for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
            const char *a = argv[i];
            size_t n = strcspn(a, "=");
            if ((a[0] == '-' && a[1] == 'n') || (n >= 5 && !strncmp(a, "--node-id", n)))
                key_node = cfg.node_id;
        }
        if (key_node && !key_endpoint)
            die_usage("keygen: --node-id needs --endpoint: a node's certificate names where it listens as well as "
                      "its id (a certificate without either is a client's)");
        char err[1024], key[41];
        if (sn_keys_generate(argv[optind + 1], key_name ? key_name : "node", key_endpoint, key_node, key, err,
                             sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", progname, err);
            return 1;
        }
        printf("%s/%s.cert %s\n", argv[optind + 1], key_name ? key_name : "node", key);
        return 0;
    }
    if (cmd && (!strcmp(cmd, "spawn") || !strcmp(cmd, "send") || !strcmp(cmd, "call") || !strcmp(cmd, "status"))) {
        free(plugins);
        free(peers);
        free(seeds);
        return client(cmd, argc - optind - 1, argv + optind + 1, connect, &rcfg.security, timeout_ms, json);
    }
    if (cmd && strcmp(cmd, "demo") != 0 && strcmp(cmd, "run") != 0)
        die_usage("unknown command '%s'", cmd);
    if (rcfg.npeers && !rcfg.listen)
        die_usage("--peer needs --listen (peers must be able to answer)");
    if (rcfg.nseeds && !rcfg.listen)
        die_usage("--join needs --listen (members must be able to reach this node)");
    if (rcfg.nseeds && rcfg.npeers)
        die_usage("--join and --peer do not mix: either join a cluster or name a fixed one");
    if (rcfg.listen && !rcfg.security.cert && !insecure)
        die_usage("a listening node talks CurveZMQ: give --cert FILE and --authorized-keys DIR (make keys with "
                  "'%s keygen DIR'), or --insecure for plain TCP",
                  progname);
    if (cmd && !strcmp(cmd, "demo") && argc - optind != 1)
        die_usage("demo takes no arguments");
    if (cmd && !strcmp(cmd, "run") && (argc - optind < 3 || argc - optind > 4))
        die_usage("usage: run TYPE METHOD [ARG]");
    log_node = cfg.node_id;
    sn__log_set_level(log_level);
    sn_relay_set_log_level(log_level);

    /* Signals are taken synchronously by the main thread (sigwait); every
     * thread the scheduler starts inherits this mask. */
    zsys_init();
    main_thread = pthread_self();
    on_exit(exit_off_main, NULL);
    char ident[64];
    snprintf(ident, sizeof ident, "schednode%s%s", config_file.name ? " " : "", config_file.name ? config_file.name : "");
    zsys_set_logident(ident);
    zsys_set_logstream(stderr); /* logs to stderr; stdout carries results */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    /* This run of the node: its incarnation (realtime ns, larger for every
     * later run) and its first PID serial, the start time in microseconds
     * times 1024. A run hands out fewer than 1024 serials per microsecond
     * it lives (4 M spawns/s is 4 per microsecond), so every serial of a
     * later run is above every serial of an earlier one: an old PID can
     * never name a new process. Good until the year 2255. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    rcfg.incarnation = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    cfg.first_serial = rcfg.incarnation / 1000u * 1024u;
    rcfg.first_serial = cfg.first_serial;
    sn_sched_t *sched = sn_sched_new(&cfg);
    if (!sched) {
        fprintf(stderr, "%s: cannot start the scheduler (out of memory or threads)\n", progname);
        free(plugins);
        free(peers);
        free(seeds);
        return 1;
    }
    int rc = sn_demo_register(sched);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot register the demo types: %s\n", progname, sn_strerror(rc));
        sn_sched_destroy(&sched);
        free(plugins);
        free(peers);
        free(seeds);
        return 1;
    }
    for (int i = 0; i < nplugins; i++) {
        char err[512];
        if (sn_plugin_load(sched, plugins[i], err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", progname, err);
            sn_sched_destroy(&sched);
            free(plugins);
            free(peers);
            free(seeds);
            return EXIT_USAGE;
        }
        logf_(SN__LOG_INFO, "loaded plugin %s", plugins[i]);
    }
    free(plugins);

    sn_relay_t *relay = NULL;
    if (rcfg.listen) {
        char err[512];
        rcfg.peers = peers;
        rcfg.seeds = seeds;
        relay = sn_relay_new(sched, &rcfg, err, sizeof err);
        if (!relay) {
            fprintf(stderr, "%s: %s\n", progname, err);
            sn_sched_destroy(&sched);
            free(peers);
            free(seeds);
            return 1;
        }
        logf_(SN__LOG_INFO, "listening on %s%s%s", sn_relay_endpoint(relay), rcfg.advertise ? ", advertised as " : "",
              rcfg.advertise ? rcfg.advertise : "");
        rc = sn_relay_join_wait(relay, join_timeout_ms, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "%s: cannot join the cluster: %s\n", progname, err);
            sn_sched_shutdown(sched, 0);
            sn_relay_destroy(&relay);
            sn_sched_destroy(&sched);
            free(peers);
            free(seeds);
            return 1;
        }
    }

    int exit_code = 0;
    if (cmd && !strcmp(cmd, "demo")) {
        exit_code = sn_demo_run(sched);
    } else if (cmd && !strcmp(cmd, "run")) {
        const char *arg = argc - optind == 4 ? argv[optind + 3] : NULL;
        sn_payload_t *in = arg ? sn_payload_text(arg) : NULL;
        sn_payload_t *res = NULL;
        rc = sn_call(sched, argv[optind + 1], argv[optind + 2], &in, timeout_ms, &res);
        print_result(rc, res);
        sn_payload_destroy(&res);
        exit_code = rc == 0 ? 0 : 1;
    } else {
        logf_(SN__LOG_INFO, "up: %d workers; stop with SIGINT or SIGTERM", sn_sched_workers(sched));
        int sig = 0;
        sigwait(&sigs, &sig);
        char why[1024];
        if (sn_relay_out(relay, why, sizeof why)) { /* raise_term raised the SIGTERM */
            fprintf(stderr, "%s: %s\n", progname, why);
            exit_code = EXIT_OUT;
        }
        logf_(SN__LOG_INFO, "%s: shutting down (processes get %d ms)", sig == SIGINT ? "SIGINT" : "SIGTERM", shutdown_ms);
    }
    sn_relay_stop_stealing(relay); /* handovers end: nothing is half-moved at shutdown */
    int forced = sn_sched_shutdown(sched, shutdown_ms);
    sn_relay_leave(relay); /* the members hear we left, not that we failed */
    sn_stats_t st;
    sn_sched_stats(sched, &st);
    logf_(cmd ? SN__LOG_DEBUG : SN__LOG_INFO, "stopped: %" PRIu64 " processes run, %" PRIu64 " messages, %d force-closed", st.completed,
          st.messages, forced);
    sn_relay_destroy(&relay);
    sn_sched_destroy(&sched);
    free(peers);
    free(seeds);
    return exit_code;
}

/* main.c - the schednode program: run a node, the demo, or one process.
 * Flags are parsed with getopt_long; a bad flag or value names what is
 * wrong and exits 2. SIGINT/SIGTERM shut the node down in order.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demo.h"
#include "schednode/schednode.h"

#define EXIT_USAGE 2

static const char *progname = "schednode";
static int log_level = 2; /* 0 error, 1 warn, 2 info, 3 debug */
static uint32_t log_node = 1;

static void logf_(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(int level, const char *fmt, ...)
{
    static const char *names[] = {"E", "W", "I", "D"};
    if (level > log_level)
        return;
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
    fprintf(stderr, "%s %s: %s node=%u ", names[level], ts, progname, log_node);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

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
            "\n"
            "Options:\n"
            "  -w, --workers N            worker threads (default: one per online CPU)\n"
            "  -l, --load FILE.so         load a plugin of process types and commands (repeatable)\n"
            "  -n, --node-id N            this node's id in PIDs, 1..4294967295 (default 1)\n"
            "      --shutdown-timeout MS  time processes get to finish after CANCEL (default 2000)\n"
            "      --timeout MS           run: how long to wait for the result (default: forever)\n"
            "      --log-level LEVEL      error, warn, info or debug (default info)\n"
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

int main(int argc, char **argv)
{
    enum { OPT_SHUTDOWN = 256, OPT_TIMEOUT, OPT_LOGLEVEL };
    static const struct option opts[] = {{"workers", required_argument, NULL, 'w'},
                                         {"load", required_argument, NULL, 'l'},
                                         {"node-id", required_argument, NULL, 'n'},
                                         {"shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN},
                                         {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                         {"log-level", required_argument, NULL, OPT_LOGLEVEL},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {0, 0, 0, 0}};
    sn_sched_config_t cfg = {1, 0, 1};
    int shutdown_ms = 2000, timeout_ms = -1;
    const char **plugins = calloc((size_t)argc, sizeof *plugins);
    int nplugins = 0;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+w:l:n:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'w':
            cfg.workers = (int)parse_num("--workers", optarg, 1, 1024);
            break;
        case 'l':
            plugins[nplugins++] = optarg;
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
        case OPT_LOGLEVEL:
            if (!strcmp(optarg, "error"))
                log_level = 0;
            else if (!strcmp(optarg, "warn"))
                log_level = 1;
            else if (!strcmp(optarg, "info"))
                log_level = 2;
            else if (!strcmp(optarg, "debug"))
                log_level = 3;
            else
                die_usage("--log-level: '%s' is not one of error, warn, info, debug", optarg);
            break;
        case 'h':
            usage(stdout);
            free(plugins);
            return 0;
        case 'V':
            printf("schednode %s (API %u)\n", SN_VERSION_STRING, SN_API_VERSION);
            free(plugins);
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
    if (cmd && strcmp(cmd, "demo") != 0 && strcmp(cmd, "run") != 0)
        die_usage("unknown command '%s'", cmd);
    if (cmd && !strcmp(cmd, "demo") && argc - optind != 1)
        die_usage("demo takes no arguments");
    if (cmd && !strcmp(cmd, "run") && (argc - optind < 3 || argc - optind > 4))
        die_usage("usage: run TYPE METHOD [ARG]");
    log_node = cfg.node_id;

    /* Signals are taken synchronously by the main thread (sigwait); every
     * thread the scheduler starts inherits this mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    sn_sched_t *sched = sn_sched_new(&cfg);
    if (!sched) {
        fprintf(stderr, "%s: cannot start the scheduler (out of memory or threads)\n", progname);
        free(plugins);
        return 1;
    }
    int rc = sn_demo_register(sched);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot register the demo types: %s\n", progname, sn_strerror(rc));
        sn_sched_destroy(&sched);
        free(plugins);
        return 1;
    }
    for (int i = 0; i < nplugins; i++) {
        char err[512];
        if (sn_plugin_load(sched, plugins[i], err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", progname, err);
            sn_sched_destroy(&sched);
            free(plugins);
            return EXIT_USAGE;
        }
        logf_(2, "loaded plugin %s", plugins[i]);
    }
    free(plugins);

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
        logf_(2, "up: %d workers; stop with SIGINT or SIGTERM", sn_sched_workers(sched));
        int sig = 0;
        sigwait(&sigs, &sig);
        logf_(2, "%s: shutting down (processes get %d ms)", sig == SIGINT ? "SIGINT" : "SIGTERM", shutdown_ms);
    }
    int forced = sn_sched_shutdown(sched, shutdown_ms);
    sn_stats_t st;
    sn_sched_stats(sched, &st);
    logf_(cmd ? 3 : 2, "stopped: %" PRIu64 " processes run, %" PRIu64 " messages, %d force-closed", st.completed,
          st.messages, forced);
    sn_sched_destroy(&sched);
    return exit_code;
}

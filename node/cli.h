/* cli.h - the client commands of the schednode program (spawn, send, call,
 * status, ps, kill, migrate, drain, undrain, types, whereis, names, service): one request to a node or one to each node
 * of its cluster, and what the user sees (text, or JSON built with json-c).
 */
#ifndef SN_CLI_H
#define SN_CLI_H

#include <stdarg.h>
#include <stdint.h>

#include "client.h"
#include "codec.h"
#include "relay.h"
#include "schednode/schednode.h"

/* Exit statuses of the program (--help and man/schednode.1 list them). */
#define SN_EXIT_FAILED 1  /* the command failed: an error from the node, a failed process, no answer */
#define SN_EXIT_USAGE 2   /* a bad flag, argument or configuration */
#define SN_EXIT_OUT 3     /* a node: this run was put out of its cluster */
#define SN_EXIT_NOPROC 4  /* kill, send, migrate: no such process in the cluster */
#define SN_EXIT_TIMEOUT 5 /* call, run: --timeout expired; kill: a step outlived the force; drain: left */
#define SN_EXIT_SIGNAL(sig) (128 + (sig)) /* a waiting command stopped by SIGINT (130) or SIGTERM (143) */

/* What a client command needs from the command line. */
typedef struct sn_cli {
    const char *cmd;
    char **args; /* its arguments, nargs of them */
    int nargs;
    const char *connect; /* --connect */
    const sn_security_t *security;
    int timeout_ms;        /* --timeout, -1 if not given (call: forever; kill: 5000; others: 10000) */
    int json;              /* --json (status, ps, types) */
    uint32_t only_node;    /* --node N (ps, types): that node only; 0: every node */
    const char *reason;    /* --reason (kill) */
    uint32_t on_node;      /* --on N (spawn, call): start it on node N; 0: the node at --connect */
    uint32_t to_node;      /* --to N (migrate) */
    int cancel_on_timeout; /* call: cancel the process when --timeout expires (default 1) */
    int then_stop;         /* drain: --then-stop */
    const char *name;      /* spawn: --name (NULL: none) */
    const char *restart;   /* service add: --restart (NULL: on-failure) */
    int max_restarts;      /* service add: --max-restarts (-1: the default) */
    int within_ms;         /* service add: --within (-1: the default) */
} sn_cli_t;

/* A member state's name ("up", "suspect", "down", "left", "joining"). */
const char *sn__member_state_name(int state);
/* A status row's state: "draining" for an up node that drains, else its
 * member state's name (status, status --json, the dashboard). */
const char *sn__row_state_name(const sn_wire_stats_t *r);
/* One `status` row as JSON, the keys of `schednode status --json` (the
 * dashboard's /status.json uses it too). */
struct json_object *sn__status_row_json(const sn_wire_stats_t *r);

/* The client commands, NULL-terminated (deploy/local-cluster.sh's
 * `client` passes on each of them). */
extern const char *const sn_cli_commands[];
/* Is cmd one of the client commands? */
int sn_cli_is_command(const char *cmd);
/* Runs a client command; returns the exit status. */
int sn_cli_run(const sn_cli_t *cli);
/* Prints a result (rc 0) to stdout, or the failure to stderr: a u64 as a
 * number, a PID as one, anything else as text. */
void sn_cli_print_result(int rc, const sn_payload_t *res);
/* Prints "schednode: MESSAGE" and a hint to stderr, exits SN_EXIT_USAGE. */
void sn_cli_vusage(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0), noreturn));

#endif

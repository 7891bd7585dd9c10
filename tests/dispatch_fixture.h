/* dispatch_fixture.h - what the yield tests share from dispatch_fixture.c:
 * a scheduler with the test types and commands registered, the "script"
 * runner, the event log its processes write, and the counters their
 * worker-side checks bump.
 */
#ifndef SN_DISPATCH_FIXTURE_H
#define SN_DISPATCH_FIXTURE_H

#include "internal.h"
#include "testutil.h"

#define UNUSED_SERIAL (UINT64_C(1) << 40) /* far beyond any serial a test uses */
#define BOUNCE_N 300
#define ORDER_N 10000
#define NULL_N 300         /* empty messages: more than one step drains (128) */
#define BULK_SENDERS 4     /* senders of one batch each, to one sink */
#define BULK_N 50000       /* messages in each batch */
#define BULK_NOPROC_N 1000 /* a batch to no process: each comes back */

/* A scheduler with 3 workers and the test types ("child", "script",
 * "nullsend", "bulk", "bulksink") and commands ("sync", "later") registered. */
sn_sched_t *mk(void);

/* cmocka setup: zeroes the counters, the bounce tally and the event log. */
int reset(void **unused);

/* Runs a script to completion; returns sn_call's code. */
int run_script(sn_sched_t *s, const char *scenario, sn_payload_t *input);

/* Spawns a "child" "order" receiver that reports to c and expects n
 * numbered messages; returns its PID. */
sn_pid_t spawn_receiver(sn_sched_t *s, collector_t *c, uint64_t n);

/* Waits for a receiver from spawn_receiver: DONE with all n messages, in order. */
void assert_receiver_got(collector_t *c, uint64_t n);

/* sn_payload_text(s), short for the scenarios' payloads. */
sn_payload_t *text(const char *s);

/* Something a worker-side check did not like. */
extern atomic_int g_bad;

/* The events the script processes got, in order. */
typedef struct evrec {
    int type;
    int error;
    uint64_t tag;
    sn_pid_t from;
    int has_data;
    uint32_t ctype, len;
    char text[160];
    int has_u64;
    uint64_t u64;
    int has_pid;
    sn_pid_t pid;
    uint64_t elapsed_ns; /* since the script's first step */
} evrec_t;
#define LOG_MAX 256
extern evrec_t g_log[LOG_MAX];
extern int g_nlog;

/* The logged event with this tag and type (the only one: duplicates fail). */
const evrec_t *find_ev(int type, uint64_t tag);

/* "child": its init, and the type (for the registration tests); victims
 * cancelled; per bounced message, consumed + bounced. */
int child_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input);
extern const sn_type_t child_type;
extern atomic_int g_victim_cancels;
extern atomic_int g_seen[BOUNCE_N];

/* The "bounce" scenario's tally: messages its child consumed, messages
 * that came back, and the child. */
typedef struct bounce {
    uint64_t consumed, bounced;
    sn_pid_t child;
} bounce_t;
extern bounce_t g_bounce;

/* "sync": completes inside the handler with a u64 copy of arg. */
void sync_cmd(sn_sched_t *sched, sn_request_t *req, void *arg);
/* "later": a new thread completes the request 20 ms later; whether the
 * handler ran on a scheduler worker; joins those threads. */
void later_cmd(sn_sched_t *sched, sn_request_t *req, void *arg);
extern atomic_int g_later_on_worker;
void later_join_all(void);

#endif

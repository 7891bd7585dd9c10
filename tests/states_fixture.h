/* states_fixture.h - what the process-state tests (test_state_transitions.c,
 * test_state_races.c) share from states_fixture.c: a scheduler with the test
 * types and commands registered, the counters their worker-side checks bump,
 * the events a "waiter" saw, and the request "hold" keeps.
 */
#ifndef SN_STATES_FIXTURE_H
#define SN_STATES_FIXTURE_H

#include "internal.h"
#include "testutil.h"

/* A scheduler with `workers` workers and every test type and command
 * registered; destroy it with sn_sched_destroy. */
sn_sched_t *mk(int workers);

/* cmocka setup: zeroes every counter, the waiter log and the held request. */
int reset(void **unused);

/* No step overlapped another of its process, ran while the process was not
 * RUNNING, or ran with no event after IDLE/WAIT. */
void assert_step_invariants(void);

/* assert_step_invariants, and no unexpected event or failed completion (the
 * checks of the tests that run completion commands). */
void assert_completion_invariants(void);

/* The state of a process as the PID table has it, or -1 if it is gone. */
int proc_state(sn_sched_t *s, sn_pid_t pid);

/* Spawns a "waiter" (method "idle" or "block") that reports to c, and waits
 * until the PID table has it in state want; returns its PID. */
sn_pid_t spawn_waiter(sn_sched_t *s, const char *method, collector_t *c, int want);

/* n threads that complete the "async" command's requests, until stopped. */
void completers_start(sn_sched_t *s, int n);
void completers_stop(void);

/* "basic": init, step and close calls. */
extern atomic_int g_basic_inits, g_basic_steps, g_basic_closes;

/* "waiter": its steps, and every event it saw with the step that saw it. */
extern atomic_int g_waiter_steps;

typedef struct evrec {
    int step;
    int type;
    int error;
    uint64_t tag;
    sn_pid_t from;
    uint32_t ctype;
    int has_data;
    char text[64];
} evrec_t;
extern pthread_mutex_t g_log_mu;
extern evrec_t g_log[64];
extern int g_nlog;

/* "hold": the request it was given (it never completes one itself). */
typedef struct held {
    int count;
    sn_pid_t from;
    uint64_t tag, arg;
    char text[32];
} held_t;
extern pthread_mutex_t g_held_mu;
extern held_t g_held;

/* "spinner": set g_spin_stop to end it; its steps and the events it saw. */
extern atomic_int g_spin_stop, g_spin_steps, g_spin_events;

/* "sink": messages out of a sender's order; steps of a Blocked sink that
 * had fewer than DRAIN_MAX events, all messages. */
extern atomic_int g_order_bad, g_msgonly_wait;

/* "pingpong": rallies played and players started. */
extern atomic_int g_rallies, g_pp_started;

/* "pump"'s input: m numbered messages, as sender id, to each of n sinks. */
typedef struct pump_cfg {
    uint32_t id, m, n;
    sn_pid_t to[8];
} pump_cfg_t;

/* An external sender thread (sender_main): m numbered messages, as sender id,
 * to each of the nto PIDs at to; each failed send counts in *fail. */
typedef struct sender_arg {
    sn_sched_t *sched;
    const sn_pid_t *to;
    int nto;
    uint32_t id, m;
    atomic_int *fail;
} sender_arg_t;
void *sender_main(void *arg);

#endif

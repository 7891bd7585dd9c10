/* schednode.h - the public API of the schednode scheduler.
 *
 * A process is a step-driven state machine described by a type (a vtable,
 * sn_type_t). The scheduler runs processes on a pool of workers; a process
 * talks to the world only through events it receives and yields it emits.
 *
 * THE OWNERSHIP RULE (one rule for every payload in this API):
 *   Whoever holds the pointer owns it. A payload (sn_payload_t) has exactly
 *   one owner at a time. Functions that take ownership take a
 *   `sn_payload_t **` and set the caller's pointer to NULL; after that the
 *   caller must not touch the payload. When the runtime hands a payload to
 *   your code through a pointer it owns (an event's `data`, init's `*input`,
 *   a command's `req->data`), the runtime frees whatever is still there after
 *   your callback returns: to keep it, move it out and set the pointer to
 *   NULL (sn_take does exactly that). Payloads are never copied on the local
 *   message path: a Send moves the buffer to the receiver.
 *
 *   A SHARED payload (sn_payload_share) is the same rule with references:
 *   each holder owns one reference to one immutable buffer, and everything
 *   above applies to that reference (take it, move it with sn_take, hand it
 *   over, destroy it). sn_payload_dup makes another reference; destroying
 *   one drops it and the last frees the buffer. A holder may only read it.
 *
 * Initialize the API's structs (sn_type_t, sn_sched_config_t, sn_plugin_t)
 * with designated initializers, as in the examples below: fields left out
 * are zero, and a field added in a later version cannot shift the others.
 *
 * A minimal process type (a counter that answers each message with it):
 *
 *     static int init(sn_ctx_t *ctx, void *state, const char *method,
 *                     sn_payload_t **input)
 *     {
 *         (void)ctx, (void)state, (void)input;
 *         return strcmp(method, "count") == 0 ? 0 : SN_ENOMETHOD;
 *     }
 *     static void step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n,
 *                      sn_step_out_t *out)
 *     {
 *         (void)ctx;
 *         uint64_t *count = state;
 *         out->status = SN_IDLE;
 *         for (size_t i = 0; i < n; i++) {
 *             if (ev[i].type == SN_EV_CANCEL) {
 *                 sn_out_done(out, NULL);
 *                 return;
 *             }
 *             if (ev[i].type == SN_EV_MESSAGE) {
 *                 sn_payload_t *r = sn_payload_u64(++*count);
 *                 sn_out_send(out, ev[i].from, ev[i].tag, &r);
 *             }
 *         }
 *     }
 *     static const sn_type_t counter = {
 *         .name = "counter", .version = 1, .state_size = sizeof(uint64_t),
 *         .init = init, .step = step,
 *     };
 */
#ifndef SCHEDNODE_H
#define SCHEDNODE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SN_VERSION_MAJOR 0
#define SN_VERSION_MINOR 1
#define SN_VERSION_PATCH 0
#define SN_VERSION_STRING "0.1.0"
/* Plugins record the API version they were built against; a node refuses a
 * plugin whose API version differs from its own. */
#define SN_API_VERSION 1u

/* ---------------------------------------------------------------- errors */
/* Every function that can fail returns 0 or one of these negative codes.
 * sn_strerror() gives the short reason text ("noproc", "nodedown", ...). */
#define SN_ERRORS(X)                                                                                                   \
    X(SN_ENOMEM, -1, "out of memory")                                                                                  \
    X(SN_EINVAL, -2, "invalid argument")                                                                               \
    X(SN_ENOPROC, -3, "noproc")                                                                                        \
    X(SN_ENODEDOWN, -4, "nodedown")                                                                                    \
    X(SN_EUNREACHABLE, -5, "unreachable")                                                                              \
    X(SN_ENOMETHOD, -6, "unknown method")                                                                              \
    X(SN_ENOTYPE, -7, "unknown process type")                                                                          \
    X(SN_ENOCMD, -8, "unknown command")                                                                                \
    X(SN_ECANCELED, -9, "canceled")                                                                                    \
    X(SN_ESHUTDOWN, -10, "scheduler is shutting down")                                                                 \
    X(SN_EFAILED, -11, "process failed")                                                                               \
    X(SN_ETIMEDOUT, -12, "timed out")                                                                                  \
    X(SN_EPLUGIN, -13, "bad plugin")                                                                                   \
    X(SN_EEXIST, -14, "already registered")                                                                            \
    X(SN_EBADWAIT, -15, "WAIT with no pending yields")                                                                 \
    X(SN_EKILLED, -16, "killed")                                                                                       \
    X(SN_EPROTO, -17, "protocol error")                                                                                \
    X(SN_EREFUSED, -18, "refused")                                                                                     \
    X(SN_ETOOBIG, -19, "message too big")                                                                              \
    X(SN_EDROPPED, -20, "dropped on the way")                                                                          \
    X(SN_EFULL, -21, "backlog full")                                                                                   \
    X(SN_ENOTMOVABLE, -22, "cannot move")

enum {
#define SN__ERR_ENUM(name, code, text) name = code,
    SN_ERRORS(SN__ERR_ENUM)
#undef SN__ERR_ENUM
};

/* Short, static text for an error code (never NULL). */
const char *sn_strerror(int err);

/* ------------------------------------------------------------------ PIDs */
/* A PID names a process cluster-wide: the node that created it (its home)
 * and a per-node serial. Text form "<node>.<serial>", e.g. "3.1042". */
typedef struct sn_pid {
    uint32_t node;
    uint64_t serial;
} sn_pid_t;

#define SN_PID_NONE ((sn_pid_t){0, 0})
/* Longest text form including the terminating NUL. */
#define SN_PID_STRLEN 32

/* Writes the text form of pid into buf (at least SN_PID_STRLEN bytes);
 * returns buf. */
char *sn_pid_format(sn_pid_t pid, char *buf, size_t len);
/* Parses exactly "<node>.<serial>" (decimal, no sign, no spaces, no overflow).
 * Returns 0 and fills *out, or SN_EINVAL. */
int sn_pid_parse(const char *text, sn_pid_t *out);
static inline int sn_pid_eq(sn_pid_t a, sn_pid_t b)
{
    return a.node == b.node && a.serial == b.serial;
}
static inline int sn_pid_is_none(sn_pid_t p)
{
    return p.serial == 0;
}

/* -------------------------------------------------------------- payloads */
/* Content-type tags. Values below SN_CT_USER are reserved by schednode. */
enum {
    SN_CT_BYTES = 0, /* opaque bytes */
    SN_CT_TEXT = 1,  /* UTF-8 text, not NUL-terminated in len */
    SN_CT_U64 = 2,   /* one uint64_t, host byte order, 8 bytes */
    SN_CT_PID = 3,   /* one sn_pid_t */
    SN_CT_ERROR = 4, /* UTF-8 reason text attached to an error */
    SN_CT_USER = 0x10000
};

/* An owned byte buffer with a content-type tag. `data` holds `len` bytes and
 * one extra NUL byte (so text payloads can be printed directly). */
typedef struct sn_payload {
    uint32_t ctype;
    uint32_t len;
    unsigned char data[];
} sn_payload_t;

/* New payload holding a copy of len bytes (bytes may be NULL for zeroed
 * contents). Caller owns the return value; NULL on out-of-memory. */
sn_payload_t *sn_payload_new(uint32_t ctype, const void *bytes, size_t len);
/* Convenience constructors; caller owns the return value. */
sn_payload_t *sn_payload_text(const char *text);
sn_payload_t *sn_payload_printf(uint32_t ctype, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
sn_payload_t *sn_payload_u64(uint64_t value);
sn_payload_t *sn_payload_pid(sn_pid_t pid);
/* Reads an SN_CT_U64 / SN_CT_PID payload; returns 0 or SN_EINVAL. */
int sn_payload_get_u64(const sn_payload_t *p, uint64_t *out);
int sn_payload_get_pid(const sn_payload_t *p, sn_pid_t *out);
/* Frees *p and sets it to NULL; safe on NULL and twice. For a shared
 * payload: drops this holder's reference (the last one frees it). */
void sn_payload_destroy(sn_payload_t **p);

/* Shared read-only payloads: one buffer, many holders, no copies (one 16 KB
 * table sent to 1,000 processes is one 16 KB buffer). Reference counted;
 * the count is atomic, so holders on any threads may dup and destroy at
 * once, and the buffer is freed exactly once, by the last destroy.
 *
 * sn_payload_share takes *p (sets it to NULL) and returns it shared, the
 * caller holding its one reference; *p must not be written after this, by
 * anyone. Sharing a shared payload returns it as it is. NULL for NULL.
 *
 * What a holder may do: read ctype, len and data; hand its reference to
 * anything that takes a payload (sn_out_send, sn_out_send_many, sn_out_done,
 * sn_complete_yield, a yield's data...), which then holds it; sn_take it
 * out of an event (the rule above); destroy it (drops the reference). What
 * it must not: write to it. A receiver cannot tell a shared payload from
 * another by use: both are read the same way (sn_payload_is_shared says).
 * Sent to another node, a shared payload is serialized like any other and
 * arrives there as an ordinary, unshared payload of the receiver's. */
sn_payload_t *sn_payload_share(sn_payload_t **p);
/* Another payload with the same contents, caller owns it: for a shared
 * payload, the same pointer with one more reference (no copy); otherwise
 * a copy. NULL for NULL or on out-of-memory. */
sn_payload_t *sn_payload_dup(const sn_payload_t *p);
/* 1 if p is shared (sn_payload_share), else 0. */
int sn_payload_is_shared(const sn_payload_t *p);
/* Moves a payload out of a slot the runtime owns: returns *slot and sets
 * *slot to NULL. Caller owns the return value. */
static inline sn_payload_t *sn_take(sn_payload_t **slot)
{
    sn_payload_t *p = *slot;
    *slot = NULL;
    return p;
}

/* ---------------------------------------------------------------- events */
/* What each event's fields hold:
 *
 * type                   tag                      from               error / data
 * SN_EV_YIELD_COMPLETE   the yield's tag          see below          0 or the yield's error / its result or reason
 * SN_EV_MESSAGE          the sender's send tag    the sender         0 / the message (never NULL: an empty
 *                        (sn_out_send's `tag`;    (SN_PID_NONE from      message is a 0-byte SN_CT_BYTES payload)
 *                        0 from sn_send)          sn_send)
 * SN_EV_CANCEL           0                        SN_PID_NONE        0 / NULL
 * SN_EV_DOWN             the monitor's tag, or    the process that   why it ended: 0 (it finished),
 *                        the spawn's (SN_YIELD_   ended              its failure code, SN_ENOPROC (there
 *                        MONITOR)                                    was no such process), SN_ENODEDOWN
 *                                                                    (its node went down or left) / see
 *                                                                    sn_out_monitor, SN_YIELD_MONITOR
 *
 * `from` of a YIELD_COMPLETE: for a spawn, the child (its PID); for a
 * failed send, the PID the message was for (its payload comes back as
 * data); for terminate, the process terminated; SN_PID_NONE for the rest
 * (sleep, commands). A reply in a request/reply protocol is sent with the
 * request's tag (sn_out_send(out, ev.from, ev.tag, &reply)), so the
 * requester matches a MESSAGE's tag against the requests it made. */
typedef enum sn_event_type {
    SN_EV_YIELD_COMPLETE = 1, /* a yield finished */
    SN_EV_MESSAGE = 2,        /* a message from `from` */
    SN_EV_CANCEL = 3,         /* please finish: shutdown or terminate */
    SN_EV_DOWN = 4            /* a process ended that this one monitors
                                 (sn_out_monitor) or spawned with
                                 SN_YIELD_MONITOR */
} sn_event_type_t;

typedef struct sn_event {
    sn_event_type_t type;
    int error;          /* 0, or an SN_E* code (e.g. SN_ENOPROC for a failed send) */
    uint64_t tag;       /* YIELD_COMPLETE: the yield's tag; MESSAGE: the sender's
                           send tag; DOWN: the monitor's (or spawn's) tag; CANCEL: 0 */
    sn_pid_t from;      /* sender of a message; the PID concerned; SN_PID_NONE if none */
    sn_payload_t *data; /* result, message or reason; owned by the runtime
                           unless moved out with sn_take() during step */
} sn_event_t;

/* ------------------------------------------------------------ step output */
typedef enum sn_status {
    SN_CONTINUE = 0, /* run me again soon (a long job cut in slices) */
    SN_IDLE = 1,     /* wait for any event (messages, completions, cancel) */
    SN_WAIT = 2,     /* wait for a yield completion (or cancel); messages
                        queue up and are delivered with the next step */
    SN_DONE = 3,     /* finished; `result` goes to whoever awaits it */
    SN_FAIL = 4      /* failed; `error` (and `result` as reason) go to the awaiter */
} sn_status_t;

/* Yield flags. */
/* No event on success (errors still come back); does not count as pending
 * for SN_WAIT. */
#define SN_YIELD_NOREPLY 0x1u
/* spawn: complete when the child finishes, with its result or error
 * (default: at once, with the child's PID as an SN_CT_PID payload); with
 * SN_ENODEDOWN (`from` the child) if it moved to a node that went down
 * (see SN_YIELD_MONITOR). */
#define SN_YIELD_AWAIT 0x2u
/* spawn: complete at once with the child's PID (as without flags), and
 * when the child ends, deliver SN_EV_DOWN to the spawner: `tag` the
 * spawn's tag, `from` the child, `error` 0 (it finished: data is its
 * result, taken as it is, no copy) or its failure code (data: the
 * reason), or SN_EKILLED if it was closed at shutdown. Like Erlang's
 * spawn_monitor: the PID to
 * talk to the child, its result later, no second yield. The PID completion
 * always comes before the DOWN and before anything the child sends. The
 * DOWN comes exactly once per spawn that succeeded; a refused spawn
 * completes with its error and has no DOWN. The DOWN is message-like: it
 * wakes an SN_IDLE process, not an SN_WAIT one (wait for DOWNs with
 * SN_IDLE). With SN_YIELD_NOREPLY: no PID completion, only the DOWN (and a
 * refused spawn's error). Not with SN_YIELD_AWAIT (SN_EINVAL). The child
 * can still move between nodes; its DOWN finds the spawner wherever it is.
 * A child lost with a node that went down after it moved there gives the
 * DOWN with SN_ENODEDOWN (and an awaited child completes the await with
 * it): exactly one outcome; a node only frozen may still run the child,
 * whose result is then dropped. Needs the spawner on the node that spawned
 * the child when that node goes down (docs/guarantees.md). */
#define SN_YIELD_MONITOR 0x4u

/* A command for a handler, emitted by a step. Built-in commands: "send",
 * "spawn", "sleep", "terminate"; more are registered by name. */
typedef struct sn_yield {
    uint32_t cmd;       /* command id, or 0 to resolve `name` at dispatch */
    uint32_t flags;     /* SN_YIELD_* */
    uint64_t tag;       /* echoed in the SN_EV_YIELD_COMPLETE event */
    sn_pid_t target;    /* send, terminate: the process addressed */
    uint64_t arg;       /* sleep: milliseconds; free for user commands */
    sn_payload_t *data; /* owned by the yield until dispatched */
    const char *name;   /* command name (cmd == 0); spawn: the type name */
    const char *method; /* spawn: the entry point */
} sn_yield_t;

#define SN_OUT_INLINE_YIELDS 2

/* What a step writes. The runtime resets it before each step; use the
 * sn_out_* helpers to fill it. Strings referenced by yields (name, method)
 * must stay valid until the step has returned and its yields have been
 * dispatched: literals, or memory in the process state. */
typedef struct sn_step_out {
    sn_status_t status;
    int error;            /* SN_FAIL: an SN_E* code or a negative user code */
    sn_payload_t *result; /* SN_DONE: the result; SN_FAIL: the reason */
    uint32_t nyields;
    uint32_t cap; /* capacity of `overflow` (runtime-managed) */
    sn_yield_t inline_yields[SN_OUT_INLINE_YIELDS];
    sn_yield_t *overflow; /* yields beyond the inline ones (runtime-managed) */
} sn_step_out_t;

/* Appends a yield; returns it zeroed with tag set, or NULL on out-of-memory.
 * A step may emit any number of yields, up to 2^31 (memory permitting; each
 * is 64 bytes until the step's yields are dispatched, right after it
 * returns). For many messages, sn_out_send_many is one yield. */
sn_yield_t *sn_out_yield(sn_step_out_t *out, uint32_t cmd, const char *name, uint64_t tag);
/* Sends msg to `to` (takes ownership of *msg). The receiver gets an
 * SN_EV_MESSAGE with this `tag` and `from` = the sender. msg may be NULL or
 * point to NULL: an empty message (the receiver gets a 0-byte SN_CT_BYTES
 * payload). No event on success; a failed send comes back as
 * SN_EV_YIELD_COMPLETE with `tag`, the error (noproc, nodedown,
 * unreachable), `from` = `to` and the undelivered payload as data. */
int sn_out_send(sn_step_out_t *out, sn_pid_t to, uint64_t tag, sn_payload_t **msg);
/* Sends n messages to `to` as ONE yield: msgs[0..n-1] are taken (each set
 * to NULL; a NULL entry is an empty message) and delivered in that order,
 * each exactly as sn_out_send(out, to, tag, &msgs[i]) would be: the same
 * order with the step's other sends, delivered exactly once, a failed one
 * back as its own error event with its payload. The cost per message is 8
 * bytes and no yield: to a process on this node the whole batch is queued
 * at once (one atomic exchange and one wake for all of them). No limit on
 * n but memory (at most 2^29 per call), and no need to slice a bulk send
 * into CONTINUE steps (do so only to let the receiver start sooner, or to
 * bound what you hold). The array itself stays the caller's. Returns 0,
 * SN_EINVAL (msgs NULL, n too big) or SN_ENOMEM (nothing taken). */
int sn_out_send_many(sn_step_out_t *out, sn_pid_t to, uint64_t tag, sn_payload_t **msgs, size_t n);
/* Spawns a process of `type` at entry point `method` with *input (taken).
 * flags: SN_YIELD_AWAIT, SN_YIELD_MONITOR, SN_YIELD_NOREPLY (see each).
 * Without flags the yield completes at once with the child's PID (data: an
 * SN_CT_PID payload; `from`: the PID), before anything the child sends can
 * arrive. An unknown type or method, or an init that refuses, fails the
 * spawn: the completion carries the error and a reason text naming the
 * type and method. SN_EINVAL (nothing taken) for no type or method, or for
 * SN_YIELD_AWAIT with SN_YIELD_MONITOR. */
int sn_out_spawn(sn_step_out_t *out, uint64_t tag, const char *type, const char *method, sn_payload_t **input,
                 uint32_t flags);
/* Completes with `tag` after `ms` milliseconds, on the node the process is
 * on then: a sleep moves with its process, with the time it has left. */
int sn_out_sleep(sn_step_out_t *out, uint64_t tag, uint64_t ms);
/* Sends SN_EV_CANCEL to `pid`; completes at once (or with SN_ENOPROC). */
int sn_out_terminate(sn_step_out_t *out, uint64_t tag, sn_pid_t pid);
/* Monitors `pid`, on this node or another (Erlang's monitor): exactly one
 * SN_EV_DOWN with `tag` comes when it ends, when its node goes down, or at
 * once if there is no such process. No completion event; a DOWN is
 * delivered like a message (it does not end an SN_WAIT). Monitoring twice
 * gives two DOWNs. */
int sn_out_monitor(sn_step_out_t *out, sn_pid_t pid, uint64_t tag);
/* Drops the monitor of `pid` made with `tag` (one of them, if several). A
 * DOWN already on its way may still arrive. */
int sn_out_demonitor(sn_step_out_t *out, sn_pid_t pid, uint64_t tag);

/* Names (a node with a relay: the "sn.name.*" commands; without one the
 * yields complete with SN_ENOCMD). A name is 1 to 255 bytes of text, with
 * no NUL, held by at most one process of the cluster; it follows its
 * process through every move (the PID does not change) and ends when the
 * process ends or its node goes down. Each is a yield: wait for its
 * completion (SN_WAIT) with `tag`.
 *
 * sn_out_name_register: registers this process under `name`. Completes
 * with 0, or SN_EEXIST with the holder's PID as data (SN_CT_PID) when
 * another process holds it, or SN_ENODEDOWN / SN_ETIMEDOUT when the
 * name's owner went down meanwhile (the name may or may not be held then:
 * look it up). A process may hold several names; registering a name it
 * holds completes with 0. */
int sn_out_name_register(sn_step_out_t *out, uint64_t tag, const char *name);
/* Drops `name`, held by this process: 0, or SN_ENOPROC if it does not hold it. */
int sn_out_name_unregister(sn_step_out_t *out, uint64_t tag, const char *name);
/* Looks `name` up: completes with 0 and the holder's PID as data
 * (SN_CT_PID), or SN_ENOPROC if no process holds it. Answered from this
 * node's cache when it can: an entry goes when its process ends (a
 * monitor) or the name's owner says the name changed hands. To send to a
 * name, look it up once and send to the PID: a PID stays right through
 * every move of the process; look it up again after a send comes back
 * with noproc. */
int sn_out_name_whereis(sn_step_out_t *out, uint64_t tag, const char *name);
/* Monitors the process that holds `name` (Erlang's monitor of a
 * registered name): completes with 0 and the holder's PID as data once
 * the name's owner watches it, then exactly one SN_EV_DOWN with `tag`
 * comes (`from` the holder, data the name as text) when the holder ends
 * (`error` its reason, SN_ENODEDOWN if its node went down) or drops the
 * name (SN_ENOPROC). If no process holds the name it completes with
 * SN_ENOPROC and the DOWN (noproc, `from` SN_PID_NONE) follows at once.
 * Other errors (SN_ENODEDOWN, SN_ETIMEDOUT: the name's owner went down
 * meanwhile) mean no monitor and no DOWN. The monitor is of the holder at
 * the time: a name given up and registered again by another process
 * gives the DOWN, and the watcher monitors the name again if it wants the
 * next holder. It holds when the name's owner goes down (the next owner
 * is asked) and follows the holder through every move. */
int sn_out_name_monitor(sn_step_out_t *out, uint64_t tag, const char *name);
/* Drops this process's monitor of `name` made with `tag`: completes (with
 * `tag`) with 0, or SN_ENOPROC if there is none (its DOWN came already, or
 * the process has moved since it asked: the monitor stays with the node it
 * asked on). After a 0 no DOWN of it comes, except one already delivered. */
int sn_out_name_demonitor(sn_step_out_t *out, uint64_t tag, const char *name);
/* Finish with a result (takes ownership of *result, may be NULL). */
void sn_out_done(sn_step_out_t *out, sn_payload_t **result);
/* Fail with an error code and a reason (printf-style). */
void sn_out_fail(sn_step_out_t *out, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The i-th yield (0 <= i < out->nyields). */
sn_yield_t *sn_out_at(sn_step_out_t *out, uint32_t i);

/* ------------------------------------------------------------- processes */
typedef struct sn_sched sn_sched_t;
/* The context of one process: who it is, where it runs. Valid during
 * init, step and close of that process. */
typedef struct sn_ctx sn_ctx_t;

sn_pid_t sn_ctx_self(const sn_ctx_t *ctx);
sn_pid_t sn_ctx_parent(const sn_ctx_t *ctx);
sn_sched_t *sn_ctx_sched(const sn_ctx_t *ctx);

/* A process type. The scheduler allocates `state_size` bytes of zeroed,
 * 16-byte aligned state with each process and passes it to every callback.
 * The type must stay valid as long as the scheduler lives. */
typedef struct sn_type {
    const char *name;
    uint32_t version;
    size_t state_size;
    /* Prepare a new process for entry point `method` with *input (the rule:
     * take it with sn_take or leave it to be freed). Return 0, or an error:
     * SN_ENOMETHOD for an unknown method fails the spawn with that error. */
    int (*init)(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input);
    /* Advance with `n` events; write status, result and yields to `out`.
     * Events' data belong to the runtime unless taken. Called by one thread
     * at a time, never concurrently for one process: a worker, or now and
     * then the node's relay I/O thread (a message from another node woke
     * the process while no worker was running one); assume no particular
     * thread.
     * THE FIRST STEP (right after init) always has n == 0, even if events
     * arrived before it ran (they come with the next step): it is where a
     * process starts its work (sends, spawns, timers). Later steps have
     * n >= 1, except one after SN_CONTINUE with nothing queued (n == 0
     * again); a process that returns SN_CONTINUE and needs to know its
     * first step keeps a flag in its state. */
    void (*step)(sn_ctx_t *ctx, void *state, sn_event_t *events, size_t n, sn_step_out_t *out);
    /* Release resources held in state (optional). Called once. */
    void (*close)(sn_ctx_t *ctx, void *state);
    /* Optional, for migration between nodes: serialize state into a new
     * payload (*out, caller owns) / rebuild state from one. */
    int (*marshal)(sn_ctx_t *ctx, void *state, sn_payload_t **out);
    int (*unmarshal)(sn_ctx_t *ctx, void *state, const sn_payload_t *in);
} sn_type_t;

/* ------------------------------------------------------------- scheduler */

typedef struct sn_sched_config {
    uint32_t node_id;      /* this node's id in PIDs (default 1) */
    int workers;           /* 0 = one per online CPU */
    uint64_t first_serial; /* first PID serial (default 1) */
} sn_sched_config_t;

/* Creates and starts a scheduler (workers and timer running). `config` may
 * be NULL for defaults. Caller owns the return value; NULL on failure. */
sn_sched_t *sn_sched_new(const sn_sched_config_t *config);
/* Shuts down (if not done) and frees the scheduler; sets *self_p to NULL. */
void sn_sched_destroy(sn_sched_t **self_p);
/* Orderly shutdown: CANCEL to every live process, wait up to timeout_ms for
 * them to finish, then close the rest (their awaiters get SN_EKILLED),
 * stop the workers. Returns how many processes were force-closed. Later
 * spawns fail with SN_ESHUTDOWN; sends still reach processes that are
 * finishing, and fail with SN_ENOPROC once they are gone. Idempotent. */
int sn_sched_shutdown(sn_sched_t *sched, int timeout_ms);

int sn_sched_workers(const sn_sched_t *sched);
uint32_t sn_sched_node_id(const sn_sched_t *sched);

typedef struct sn_stats {
    uint64_t spawned;    /* processes created */
    uint64_t completed;  /* processes finished (done, failed or killed) */
    uint64_t live;       /* processes in the PID table now */
    uint64_t steps;      /* step calls */
    uint64_t messages;   /* messages delivered to local processes */
    uint64_t steals;     /* successful steal_half operations */
    uint64_t stolen;     /* processes moved by those steals */
    uint64_t parks;      /* times a worker went to sleep */
    uint64_t remote_out; /* messages handed to the relay */
    uint64_t noproc;     /* sends answered with noproc */
    /* load, approximate (read without stopping anything): */
    uint64_t ready;        /* processes queued to run (deques + global queue) */
    uint64_t blocked;      /* processes waiting for a yield to complete */
    uint64_t idle;         /* the other live processes: waiting for a message (or running) */
    uint32_t idle_workers; /* workers asleep */
    uint64_t migrated_in;  /* processes that moved here from other nodes */
    uint64_t migrated_out; /* processes that moved from here to other nodes */
} sn_stats_t;
/* Snapshot of the counters (relaxed reads: consistent enough to print). */
void sn_sched_stats(sn_sched_t *sched, sn_stats_t *out);

/* Registers a process type (the pointer is kept, not copied). Returns 0,
 * SN_EEXIST if the name is taken, SN_EINVAL if incomplete. */
int sn_type_register(sn_sched_t *sched, const sn_type_t *type);
const sn_type_t *sn_type_find(sn_sched_t *sched, const char *name);

/* Called when a process finishes: status is SN_DONE or SN_FAIL; *result
 * follows the ownership rule. Runs on the thread that ran the process's
 * last step (see step) or on the shutdown caller: keep it short, never
 * block. */
typedef void (*sn_result_fn)(sn_sched_t *sched, sn_pid_t pid, sn_status_t status, int error, sn_payload_t **result,
                             void *arg);

/* Spawns a process from outside any process (any thread). Takes ownership
 * of *input (may be NULL). If `on_result` is set it is called once with the
 * outcome. Returns 0 and the new PID in *pid_out (may be NULL), or an error:
 * SN_ENOTYPE, the init error (e.g. SN_ENOMETHOD), SN_ESHUTDOWN. On error
 * on_result is not called. */
int sn_spawn(sn_sched_t *sched, const char *type, const char *method, sn_payload_t **input, sn_result_fn on_result,
             void *arg, sn_pid_t *pid_out);
/* Spawns and blocks the calling (non-worker) thread until the process ends
 * or timeout_ms passes (< 0: forever). On return *result (caller owns) holds
 * the result or reason; the return value is 0 for DONE, the process's error
 * for FAIL, or the spawn error / SN_ETIMEDOUT. A refused spawn and a failed
 * process can return the same code: to tell them apart, use sn_spawn, which
 * refuses at once (as `schednode run` does). */
int sn_call(sn_sched_t *sched, const char *type, const char *method, sn_payload_t **input, int timeout_ms,
            sn_payload_t **result);
/* Sends a message from outside any process (from = SN_PID_NONE). Takes
 * ownership of *msg on success; on error *msg stays with the caller. */
int sn_send(sn_sched_t *sched, sn_pid_t to, sn_payload_t **msg);
/* Sends SN_EV_CANCEL to a local process. 0 or SN_ENOPROC. */
int sn_cancel(sn_sched_t *sched, sn_pid_t pid);
/* Moves the process pid, which lives on this node, to node `node` of the
 * cluster, with its state, its place in every sender's order and the
 * messages queued for it (the handover of cross-node stealing). Only a
 * process waiting for messages (SN_IDLE) or for its yields (SN_WAIT) is
 * taken, never one mid-step: a busy one is tried again until timeout_ms
 * (< 0: 5000) has passed. Its pending sleeps move with it, each with the
 * time it has left, and complete there. Blocks
 * the calling (non-worker) thread until the move is decided, at most
 * timeout_ms and the handover's own bound (3 s without an answer from
 * `node`). Returns 0 (it lives on `node` now, or lived there already),
 * SN_ENOPROC (not on this node), SN_ENOTMOVABLE (its type has no
 * marshal, a yield it waits on that is no sleep cannot follow it, a C
 * callback here is tied to it), SN_EREFUSED (`node` refused it: type missing or of
 * another version there, draining, shutting down), SN_EUNREACHABLE (no
 * relay, or `node` is not an up member), SN_ETIMEDOUT (never idle), or
 * SN_ENODEDOWN (`node` went down during the handover: the process stays
 * here). The reason, one line, goes into why (may be NULL). */
int sn_migrate(sn_sched_t *sched, sn_pid_t pid, uint32_t node, int timeout_ms, char *why, size_t whylen);

/* ------------------------------------------------------------- commands */
/* A yield as a command handler sees it. The handler owns `data`. */
typedef struct sn_request {
    sn_pid_t from; /* the yielding process */
    uint64_t tag;
    uint32_t cmd;
    uint32_t flags;
    sn_pid_t target;
    uint64_t arg;
    sn_payload_t *data; /* handler owns it (the rule applies) */
} sn_request_t;

/* A command handler. Called on the thread that ran the step (see step): it
 * must not block. It (or any thread it hands the request to) completes the yield
 * exactly once with sn_complete_yield. */
typedef void (*sn_command_fn)(sn_sched_t *sched, sn_request_t *req, void *arg);

/* Registers a command by name. Returns its id (> 0) or SN_EEXIST/SN_EINVAL. */
int sn_command_register(sn_sched_t *sched, const char *name, sn_command_fn fn, void *arg);
/* Id of a registered command, or SN_ENOCMD. */
int sn_command_id(sn_sched_t *sched, const char *name);

/* Completes the yield `tag` of process `pid`, from any thread: the process
 * gets SN_EV_YIELD_COMPLETE with `error` and *result (taken; may be NULL).
 * Returns 0, or SN_ENOPROC if the process is gone (the result is freed). */
int sn_complete_yield(sn_sched_t *sched, sn_pid_t pid, uint64_t tag, int error, sn_payload_t **result);

/* --------------------------------------------------------------- plugins */
/* A plugin is a shared object exporting one symbol, `schednode_plugin`, of
 * this type (use SN_PLUGIN_DEFINE). Its init registers types and commands. */
typedef struct sn_plugin {
    uint32_t api_version; /* SN_API_VERSION at build time */
    const char *name;
    int (*init)(sn_sched_t *sched);
} sn_plugin_t;

#define SN_PLUGIN_SYMBOL "schednode_plugin"
#define SN_PLUGIN_DEFINE(name_, init_)                                                                                 \
    __attribute__((visibility("default")))                                                                             \
    const sn_plugin_t schednode_plugin = {.api_version = SN_API_VERSION, .name = (name_), .init = (init_)}

/* Loads a plugin and runs its init. On failure returns SN_EPLUGIN (or the
 * init's error) and writes a one-line reason naming the file into err. */
int sn_plugin_load(sn_sched_t *sched, const char *path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

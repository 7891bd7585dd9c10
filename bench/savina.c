/* savina.c - actor benchmarks of the Savina suite (Imam & Sarkar 2014) for
 * schedbench. Every case runs under a root process started with sn_call,
 * checks its result (counts, sums, the ring's last index) and is timed
 * against a Go peer (bench/peers/NAME.go: goroutines and channels) in the
 * same run, round by round, so both see the same machine load.
 *
 * A message's kind rides in its send tag (ev.tag of a MESSAGE is the
 * sender's tag); messages with nothing to say carry a NULL payload.
 * A bulk producer (fjthrput, count, fjcreate, pipeline) slices its work
 * into CONTINUE steps of SLICE yields, so that it does not hold its worker
 * until it is done. Its sends are single sends, as the Go peers send one
 * value at a time (sn_out_send_many would make one of count's slices one
 * yield). big's neighbour table is one array shared by pointer, as the Go
 * peer shares its slice.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "savina.h"
#include "schednode/schednode.h"

#ifndef SN_PEERS_DIR
#define SN_PEERS_DIR "bench/peers"
#endif

#define SLICE 1000 /* sends or spawns per step of a bulk producer */
#define MAX_ROUNDS 15

/* message kinds (send tags) */
enum { K_NEXT = 1, K_TOKEN, K_END, K_STOP, K_MEET, K_MATE, K_REPORT, K_START, K_PING, K_PONG, K_MSG, K_QUERY };

/* The per-message work of fjthrput, fjcreate (the same in the Go peers). */
static uint64_t mix(uint64_t v)
{
    v ^= v >> 31;
    v *= 0x7fb5d329728ea185ull;
    v ^= v >> 27;
    return v;
}

static uint64_t u64_of(const sn_payload_t *p)
{
    uint64_t v = 0;
    if (p && p->len >= 8)
        memcpy(&v, p->data, 8);
    return v;
}

/* Writes v into a payload that came with a message, so it can go on. */
static sn_payload_t *u64_into(sn_payload_t *p, uint64_t v)
{
    if (!p || p->len < 8) {
        sn_payload_destroy(&p);
        return sn_payload_u64(v);
    }
    memcpy(p->data, &v, 8);
    return p;
}

static void send_u64(sn_step_out_t *out, sn_pid_t to, uint64_t kind, uint64_t v)
{
    sn_payload_t *m = sn_payload_u64(v);
    sn_out_send(out, to, kind, &m);
}

static void send_kind(sn_step_out_t *out, sn_pid_t to, uint64_t kind)
{
    sn_payload_t *m = NULL;
    sn_out_send(out, to, kind, &m);
}

/* An event a member does not expect: CANCEL ends it, anything else fails. */
static void unexpected(sn_step_out_t *out, const sn_event_t *ev)
{
    if (ev->type == SN_EV_CANCEL) {
        out->status = SN_DONE;
        return;
    }
    sn_out_fail(out, ev->error ? ev->error : SN_EINVAL, "savina: unexpected event type %d tag %" PRIu64, (int)ev->type,
                ev->tag);
}

/* ------------------------------------------------------------ the root */
struct sv_case;
typedef struct root {
    const struct sv_case *c;
    uint64_t a, b;      /* the case's two sizes */
    sn_pid_t *pid;      /* children, by spawn tag */
    uint32_t npid, got; /* PIDs in so far */
    int phase;
    uint64_t sent, recv, acc;
    uint32_t at;        /* fjthrput: the member sent to next */
    sn_pid_t waiting;   /* chameneos: the one waiting at the mall */
    sn_payload_t *keep; /* chameneos: its request */
} root_t;

typedef void (*root_step_fn)(root_t *s, sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out);

/* Spawns n children of `type` (tag i: the completion brings the PID),
 * input from `in` (NULL: none); the root then waits for the PIDs. */
static void spawn_kids(root_t *s, sn_step_out_t *out, uint32_t n, const char *type,
                       sn_payload_t *(*in)(const root_t *s, uint32_t i))
{
    s->pid = calloc(n, sizeof *s->pid);
    s->npid = n;
    s->got = 0;
    if (!s->pid) {
        sn_out_fail(out, SN_ENOMEM, "savina: no memory for %u PIDs", n);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        sn_payload_t *p = in ? in(s, i) : NULL;
        sn_out_spawn(out, i, type, "member", &p, 0);
    }
    out->status = SN_WAIT;
}

/* Takes spawn completions; 1 when every PID is in, 0 when more are due
 * (status WAIT), -1 on a failed spawn (status FAIL). */
static int take_kids(root_t *s, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_YIELD_COMPLETE || ev[i].error || ev[i].tag >= s->npid) {
            unexpected(out, &ev[i]);
            return -1;
        }
        s->pid[ev[i].tag] = ev[i].from;
        s->got++;
    }
    if (s->got < s->npid) {
        out->status = SN_WAIT;
        return 0;
    }
    return 1;
}

static void stop_kids(root_t *s, sn_step_out_t *out)
{
    for (uint32_t i = 0; i < s->npid; i++)
        send_kind(out, s->pid[i], K_STOP);
}

/* ---------------------------------------------------------- threadring
 * b processes in a ring pass a token a times; the one that gets it at 0
 * tells the root its index, which must be a mod b. */
typedef struct tr {
    sn_pid_t next;
    uint64_t idx;
} tr_t;

static sn_payload_t *in_index(const root_t *s, uint32_t i)
{
    return sn_payload_u64(i);
}

static void tr_root(root_t *s, sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    if (s->phase == 0) {
        s->phase = 1;
        spawn_kids(s, out, (uint32_t)s->b, "sv.tr", in_index);
        return;
    }
    if (s->phase == 1) {
        if (take_kids(s, ev, n, out) <= 0)
            return;
        for (uint32_t i = 0; i < s->npid; i++) {
            sn_payload_t *m = sn_payload_pid(s->pid[(i + 1) % s->npid]);
            sn_out_send(out, s->pid[i], K_NEXT, &m);
        }
        send_u64(out, s->pid[0], K_TOKEN, s->a); /* queued behind every K_NEXT */
        s->phase = 2;
        out->status = SN_IDLE;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE || ev[i].tag != K_END) {
            unexpected(out, &ev[i]);
            return;
        }
        stop_kids(s, out);
        sn_payload_t *r = sn_payload_u64(u64_of(ev[i].data));
        sn_out_done(out, &r);
        return;
    }
    out->status = SN_IDLE;
}

static int tr_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    tr_t *s = state;
    if (strcmp(method, "member") != 0)
        return SN_ENOMETHOD;
    return sn_payload_get_u64(*input, &s->idx);
}

static void tr_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    tr_t *s = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE) {
            unexpected(out, &ev[i]);
            return;
        }
        if (ev[i].tag == K_NEXT) {
            sn_payload_get_pid(ev[i].data, &s->next);
        } else if (ev[i].tag == K_TOKEN) {
            uint64_t v = u64_of(ev[i].data);
            if (v == 0) {
                send_u64(out, sn_ctx_parent(ctx), K_END, s->idx);
                continue;
            }
            sn_payload_t *m = u64_into(sn_take(&ev[i].data), v - 1); /* the same buffer goes on */
            sn_out_send(out, s->next, K_TOKEN, &m);
        } else if (ev[i].tag == K_STOP) {
            out->status = SN_DONE;
            return;
        }
    }
}

/* ----------------------------------------------------------- chameneos
 * The root is the mall: it pairs b chameneos for a meetings; a meeting
 * sends each the other's colour, both change colour and come back. Once
 * the meetings are done every one is told to stop and reports how many it
 * had: they must add up to 2a. */
typedef struct cham {
    uint64_t color, meetings;
} cham_t;

static sn_payload_t *in_color(uint32_t i)
{
    return sn_payload_u64(i % 3);
}

static void mall_meet(root_t *s, sn_event_t *e, sn_step_out_t *out)
{
    if (s->sent >= s->a) {
        send_kind(out, e->from, K_STOP);
        return;
    }
    if (sn_pid_is_none(s->waiting)) {
        s->waiting = e->from;
        s->keep = sn_take(&e->data);
        return;
    }
    sn_payload_t *theirs = sn_take(&e->data); /* each gets the other's colour */
    sn_out_send(out, s->waiting, K_MATE, &theirs);
    sn_out_send(out, e->from, K_MATE, &s->keep);
    s->waiting = SN_PID_NONE;
    s->sent++;
}

static void cham_root(root_t *s, sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    out->status = SN_IDLE;
    if (s->phase == 0) {
        s->phase = 1;
        for (uint32_t i = 0; i < s->b; i++) {
            sn_payload_t *p = in_color(i);
            sn_out_spawn(out, i, "sv.cham", "member", &p, SN_YIELD_NOREPLY);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE || (ev[i].tag != K_MEET && ev[i].tag != K_REPORT)) {
            unexpected(out, &ev[i]);
            return;
        }
        if (ev[i].tag == K_MEET) {
            mall_meet(s, &ev[i], out);
            continue;
        }
        s->acc += u64_of(ev[i].data);
        if (++s->recv == s->b) {
            sn_payload_t *r = sn_payload_u64(s->acc);
            sn_out_done(out, &r);
            return;
        }
    }
}

static int cham_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    cham_t *s = state;
    if (strcmp(method, "member") != 0)
        return SN_ENOMETHOD;
    return sn_payload_get_u64(*input, &s->color);
}

static void cham_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    cham_t *s = state;
    out->status = SN_IDLE;
    if (n == 0) { /* the first step */
        send_u64(out, sn_ctx_parent(ctx), K_MEET, s->color);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE) {
            unexpected(out, &ev[i]);
            return;
        }
        if (ev[i].tag == K_STOP) {
            send_u64(out, sn_ctx_parent(ctx), K_REPORT, s->meetings);
            out->status = SN_DONE;
            return;
        }
        uint64_t other = u64_of(ev[i].data);
        s->color = s->color == other ? s->color : 3 - s->color - other;
        s->meetings++;
        sn_payload_t *m = u64_into(sn_take(&ev[i].data), s->color);
        sn_out_send(out, sn_ctx_parent(ctx), K_MEET, &m);
    }
}

/* ----------------------------------------------------------------- big
 * b processes each ping a random other one a times, one ping at a time,
 * and answer every ping with a pong. When all are done the root stops
 * them; the pings they answered must add up to a*b. */
typedef struct big_start {
    const sn_pid_t *table; /* the root's PID array, read-only until the end */
    uint64_t n, idx, pings;
} big_start_t;

typedef struct big {
    big_start_t st;
    uint64_t answered, rng;
} big_t;

static void big_ping(big_t *s, sn_step_out_t *out)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    uint64_t r = s->rng % (s->st.n - 1);
    send_kind(out, s->st.table[r >= s->st.idx ? r + 1 : r], K_PING);
}

static void big_root(root_t *s, sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    if (s->phase == 0) {
        s->phase = 1;
        spawn_kids(s, out, (uint32_t)s->b, "sv.big", NULL);
        return;
    }
    if (s->phase == 1) {
        if (take_kids(s, ev, n, out) <= 0)
            return;
        for (uint32_t i = 0; i < s->npid; i++) {
            big_start_t st = {s->pid, s->npid, i, s->a};
            sn_payload_t *m = sn_payload_new(SN_CT_USER, &st, sizeof st);
            sn_out_send(out, s->pid[i], K_START, &m);
        }
        s->phase = 2;
        n = 0;
    }
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE || (ev[i].tag != K_REPORT && ev[i].tag != K_END)) {
            unexpected(out, &ev[i]);
            return;
        }
        if (ev[i].tag == K_REPORT && ++s->recv == s->npid) {
            stop_kids(s, out); /* every ping is answered: nothing is in flight */
            s->recv = 0;
        } else if (ev[i].tag == K_END) {
            s->acc += u64_of(ev[i].data);
            if (++s->recv == s->npid) {
                sn_payload_t *r = sn_payload_u64(s->acc);
                sn_out_done(out, &r);
                return;
            }
        }
    }
}

static int big_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    big_t *s = state;
    s->rng = 0x9e3779b97f4a7c15ull ^ (sn_ctx_self(ctx).serial * 0x2545f4914f6cdd1dull);
    return strcmp(method, "member") == 0 ? 0 : SN_ENOMETHOD;
}

static void big_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    big_t *s = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE) {
            unexpected(out, &ev[i]);
            return;
        }
        if (ev[i].tag == K_START && ev[i].data && ev[i].data->len == sizeof s->st) {
            memcpy(&s->st, ev[i].data->data, sizeof s->st);
            big_ping(s, out);
        } else if (ev[i].tag == K_PING) {
            s->answered++;
            send_kind(out, ev[i].from, K_PONG);
        } else if (ev[i].tag == K_PONG) {
            if (--s->st.pings > 0)
                big_ping(s, out);
            else
                send_kind(out, sn_ctx_parent(ctx), K_REPORT);
        } else if (ev[i].tag == K_STOP) {
            send_u64(out, sn_ctx_parent(ctx), K_END, s->answered);
            out->status = SN_DONE;
            return;
        } else {
            unexpected(out, &ev[i]);
            return;
        }
    }
}

/* ------------------------------------------------------------ fjthrput
 * One producer (the root) sends a messages to each of b processes, round
 * robin; each does mix() on every message and reports its sum when it has
 * had a of them. */
typedef struct fjt {
    uint64_t want, count, acc;
} fjt_t;

static sn_payload_t *in_fjt(const root_t *s, uint32_t i)
{
    return sn_payload_u64(s->a);
}

/* Collects the members' reports; true when all are in (status DONE). */
static bool collect(root_t *s, sn_event_t *ev, size_t n, sn_step_out_t *out, uint64_t want)
{
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE || ev[i].tag != K_REPORT) {
            unexpected(out, &ev[i]);
            return true;
        }
        s->acc += u64_of(ev[i].data);
        if (++s->recv == want) {
            sn_payload_t *r = sn_payload_u64(s->acc);
            sn_out_done(out, &r);
            return true;
        }
    }
    return false;
}

static void fjt_root(root_t *s, sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    if (s->phase == 0) {
        s->phase = 1;
        spawn_kids(s, out, (uint32_t)s->b, "sv.fjt", in_fjt);
        return;
    }
    if (s->phase == 1) {
        if (take_kids(s, ev, n, out) <= 0)
            return;
        s->phase = 2;
        n = 0;
    }
    if (collect(s, ev, n, out, s->npid))
        return;
    /* message `sent` to each member in turn, as the Go peer's two loops
     * (no division per message) */
    for (int k = 0; k < SLICE && s->sent < s->a; k++) {
        send_u64(out, s->pid[s->at], K_MSG, s->sent);
        if (++s->at == s->npid)
            s->at = 0, s->sent++;
    }
    out->status = s->sent < s->a ? SN_CONTINUE : SN_IDLE;
}

static int fjt_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    fjt_t *s = state;
    if (strcmp(method, "member") != 0)
        return SN_ENOMETHOD;
    return sn_payload_get_u64(*input, &s->want);
}

static void fjt_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    fjt_t *s = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE || ev[i].tag != K_MSG) {
            unexpected(out, &ev[i]);
            return;
        }
        s->acc += mix(u64_of(ev[i].data));
        if (++s->count == s->want) {
            send_u64(out, sn_ctx_parent(ctx), K_REPORT, s->acc);
            out->status = SN_DONE;
            return;
        }
    }
}

/* --------------------------------------------------------------- count
 * One producer (the root) sends 0..a-1 to one counter, then asks for the
 * count and the sum; the count must be a. */
typedef struct cnt {
    uint64_t count, sum;
} cnt_t;

static void cnt_root(root_t *s, sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    if (s->phase == 0) {
        s->phase = 1;
        spawn_kids(s, out, 1, "sv.cnt", NULL);
        return;
    }
    if (s->phase == 1) {
        if (take_kids(s, ev, n, out) <= 0)
            return;
        s->phase = 2;
        n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        cnt_t r = {0, 0};
        if (ev[i].type != SN_EV_MESSAGE || ev[i].tag != K_REPORT || !ev[i].data || ev[i].data->len != sizeof r) {
            unexpected(out, &ev[i]);
            return;
        }
        memcpy(&r, ev[i].data->data, sizeof r);
        if (r.count != s->a) {
            sn_out_fail(out, SN_EFAILED, "count: %" PRIu64 " messages counted, %" PRIu64 " sent", r.count, s->a);
            return;
        }
        sn_payload_t *res = sn_payload_u64(r.sum);
        sn_out_done(out, &res);
        return;
    }
    for (int k = 0; k < SLICE && s->sent < s->a; k++, s->sent++)
        send_u64(out, s->pid[0], K_MSG, s->sent);
    if (s->sent < s->a) {
        out->status = SN_CONTINUE;
        return;
    }
    if (s->phase == 2)
        send_kind(out, s->pid[0], K_QUERY);
    s->phase = 3;
    out->status = SN_IDLE;
}

static int cnt_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return strcmp(method, "member") == 0 ? 0 : SN_ENOMETHOD;
}

static void cnt_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    cnt_t *s = state;
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_MESSAGE && ev[i].tag == K_MSG) {
            s->count++;
            s->sum += u64_of(ev[i].data);
        } else if (ev[i].type == SN_EV_MESSAGE && ev[i].tag == K_QUERY) {
            sn_payload_t *r = sn_payload_new(SN_CT_USER, s, sizeof *s);
            sn_out_send(out, ev[i].from, K_REPORT, &r);
            out->status = SN_DONE;
            return;
        } else {
            unexpected(out, &ev[i]);
            return;
        }
    }
}

/* ------------------------------------------------------------ fjcreate
 * The root spawns a processes, each with its number; each sends mix() of
 * it back in its first step and ends. The sum must match. */
typedef struct fjc {
    uint64_t v;
} fjc_t;

static void fjc_root(root_t *s, sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    if (collect(s, ev, n, out, s->a))
        return;
    for (int k = 0; k < SLICE && s->sent < s->a; k++, s->sent++) {
        sn_payload_t *in = sn_payload_u64(s->sent);
        sn_out_spawn(out, 0, "sv.fjc", "member", &in, SN_YIELD_NOREPLY);
    }
    out->status = s->sent < s->a ? SN_CONTINUE : SN_IDLE;
}

static int fjc_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    fjc_t *s = state;
    if (strcmp(method, "member") != 0)
        return SN_ENOMETHOD;
    return sn_payload_get_u64(*input, &s->v);
}

static void fjc_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    fjc_t *s = state;
    send_u64(out, sn_ctx_parent(ctx), K_REPORT, mix(s->v));
    out->status = SN_DONE;
}

/* ------------------------------------------------------------ pipeline
 * The root feeds 0..a-1 into a chain of b stages; stage k maps v to
 * 3v + k, the last one sums and, at the end marker, sends the sum back. */
typedef struct stage {
    sn_pid_t next; /* none: the last stage */
    uint64_t k, acc;
} stage_t;

static void pipe_spawn(root_t *s, sn_pid_t next, sn_step_out_t *out)
{
    uint64_t in[3] = {next.node, next.serial, s->b - s->got};
    sn_payload_t *p = sn_payload_new(SN_CT_USER, in, sizeof in);
    sn_out_spawn(out, 0, "sv.stage", "member", &p, 0);
    out->status = SN_WAIT;
}

static void pipe_root(root_t *s, sn_ctx_t *ctx, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    if (s->phase == 0) { /* the last stage first: each is told the next one's PID */
        s->phase = 1;
        s->pid = calloc(1, sizeof *s->pid);
        pipe_spawn(s, SN_PID_NONE, out);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        bool spawned = ev[i].type == SN_EV_YIELD_COMPLETE && !ev[i].error;
        if (!spawned && (ev[i].type != SN_EV_MESSAGE || ev[i].tag != K_REPORT)) {
            unexpected(out, &ev[i]);
            return;
        }
        if (spawned) {
            s->pid[0] = ev[i].from;
            if (++s->got < s->b) {
                pipe_spawn(s, ev[i].from, out);
                return;
            }
            s->phase = 2;
            continue;
        }
        sn_payload_t *r = sn_payload_u64(u64_of(ev[i].data));
        sn_out_done(out, &r);
        return;
    }
    for (int k = 0; k < SLICE && s->sent < s->a; k++, s->sent++)
        send_u64(out, s->pid[0], K_MSG, s->sent);
    if (s->sent < s->a) {
        out->status = SN_CONTINUE;
        return;
    }
    if (s->phase == 2)
        send_kind(out, s->pid[0], K_END);
    s->phase = 3;
    out->status = SN_IDLE;
}

static int stage_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    stage_t *s = state;
    uint64_t in[3];
    if (strcmp(method, "member") != 0)
        return SN_ENOMETHOD;
    if (!*input || (*input)->len != sizeof in)
        return SN_EINVAL;
    memcpy(in, (*input)->data, sizeof in);
    s->next = (sn_pid_t){(uint32_t)in[0], in[1]};
    s->k = in[2];
    return 0;
}

static void stage_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    stage_t *s = state;
    bool last = sn_pid_is_none(s->next);
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_MESSAGE || (ev[i].tag != K_MSG && ev[i].tag != K_END)) {
            unexpected(out, &ev[i]);
            return;
        }
        if (ev[i].tag == K_END) {
            if (last)
                send_u64(out, sn_ctx_parent(ctx), K_REPORT, s->acc);
            else
                send_kind(out, s->next, K_END);
            out->status = SN_DONE;
            return;
        }
        uint64_t v = u64_of(ev[i].data) * 3 + s->k;
        if (last) {
            s->acc += v;
            continue;
        }
        sn_payload_t *m = u64_into(sn_take(&ev[i].data), v);
        sn_out_send(out, s->next, K_MSG, &m);
    }
}

/* ----------------------------------------------------------- the cases */
static uint64_t want_tr(const uint64_t *z)
{
    return z[0] % z[1];
}
static uint64_t want_cham(const uint64_t *z)
{
    return 2 * z[0];
}
static uint64_t want_big(const uint64_t *z)
{
    return z[0] * z[1];
}
static uint64_t want_fjt(const uint64_t *z)
{
    uint64_t sum = 0;
    for (uint64_t j = 0; j < z[0]; j++)
        sum += mix(j);
    return sum * z[1];
}
static uint64_t want_cnt(const uint64_t *z)
{
    return z[0] * (z[0] - 1) / 2;
}
static uint64_t want_fjc(const uint64_t *z)
{
    uint64_t sum = 0;
    for (uint64_t j = 0; j < z[0]; j++)
        sum += mix(j);
    return sum;
}
static uint64_t want_pipe(const uint64_t *z)
{
    uint64_t sum = 0;
    for (uint64_t j = 0; j < z[0]; j++) {
        uint64_t v = j;
        for (uint64_t k = 1; k <= z[1]; k++) /* the first stage adds 1, the last b */
            v = v * 3 + k;
        sum += v;
    }
    return sum;
}

typedef struct sv_case {
    const char *name, *what; /* what: the sizes, for humans */
    root_step_fn root;
    uint64_t full[2], quick[2];
    uint64_t (*want)(const uint64_t *sizes);
} sv_case_t;

static const sv_case_t cases[] = {
    {"threadring", "%" PRIu64 " hops round %" PRIu64 " processes", tr_root, {10000000, 503}, {100000, 503}, want_tr},
    {"chameneos", "%" PRIu64 " meetings of %" PRIu64 " chameneos", cham_root, {2000000, 100}, {20000, 100}, want_cham},
    {"big", "%" PRIu64 " pings by each of %" PRIu64 " processes", big_root, {2000, 1000}, {50, 1000}, want_big},
    {"fjthrput", "%" PRIu64 " messages to each of %" PRIu64 " processes", fjt_root, {150000, 60}, {2000, 60}, want_fjt},
    {"count", "%" PRIu64 " messages to %" PRIu64 " counter", cnt_root, {10000000, 1}, {100000, 1}, want_cnt},
    {"fjcreate", "%" PRIu64 " processes created%.0" PRIu64, fjc_root, {1000000, 0}, {20000, 0}, want_fjc},
    {"pipeline", "%" PRIu64 " items through %" PRIu64 " stages", pipe_root, {2000000, 4}, {20000, 4}, want_pipe},
};
#define NCASES (sizeof cases / sizeof cases[0])

static int root_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    root_t *s = state;
    for (size_t i = 0; i < NCASES; i++)
        if (!strcmp(method, cases[i].name))
            s->c = &cases[i];
    if (!s->c)
        return SN_ENOMETHOD;
    if (!*input || (*input)->len != 16)
        return SN_EINVAL;
    memcpy(&s->a, (*input)->data, 8);
    memcpy(&s->b, (*input)->data + 8, 8);
    return 0;
}

static void root_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    root_t *s = state;
    s->c->root(s, ctx, ev, n, out);
}

static void root_close(sn_ctx_t *ctx, void *state)
{
    root_t *s = state;
    free(s->pid);
    sn_payload_destroy(&s->keep);
}

static const sn_type_t types[] = {
    {"sv", 1, sizeof(root_t), root_init, root_step, root_close, NULL, NULL},
    {"sv.tr", 1, sizeof(tr_t), tr_init, tr_step, NULL, NULL, NULL},
    {"sv.cham", 1, sizeof(cham_t), cham_init, cham_step, NULL, NULL, NULL},
    {"sv.big", 1, sizeof(big_t), big_init, big_step, NULL, NULL, NULL},
    {"sv.fjt", 1, sizeof(fjt_t), fjt_init, fjt_step, NULL, NULL, NULL},
    {"sv.cnt", 1, sizeof(cnt_t), cnt_init, cnt_step, NULL, NULL, NULL},
    {"sv.fjc", 1, sizeof(fjc_t), fjc_init, fjc_step, NULL, NULL, NULL},
    {"sv.stage", 1, sizeof(stage_t), stage_init, stage_step, NULL, NULL, NULL},
};

/* ---------------------------------------------------------- the driver */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, sizeof *v * (size_t)n);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static char peer_dir[64];

/* Builds bench/peers/NAME.go into a temporary directory; returns 0, or -1
 * (with a line saying why) when there is no Go toolchain or it fails. */
static int peer_build(const char *name)
{
    const char *go = getenv("SN_GO") ? getenv("SN_GO") : "go";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s version >/dev/null 2>&1", go);
    if (system(cmd) != 0) {
        printf("%s-go: skipped: no Go toolchain (apt-get install golang-go, or set SN_GO)\n", name);
        return -1;
    }
    if (!peer_dir[0]) {
        strcpy(peer_dir, "/tmp/schedbench-savina-XXXXXX");
        if (!mkdtemp(peer_dir)) {
            peer_dir[0] = 0;
            return -1;
        }
    }
    snprintf(cmd, sizeof cmd, "cd %s && GOCACHE=%s/cache GOPATH=%s/path GO111MODULE=off %s build -o %s/%s %s.go >&2",
             SN_PEERS_DIR, peer_dir, peer_dir, go, peer_dir, name, name);
    if (system(cmd) != 0) {
        printf("%s-go: the Go peer failed to build\n", name);
        return -1;
    }
    return 0;
}

/* One run of the Go peer; its ms (it checks its own result), or -1. */
static double peer_run(const char *name, const uint64_t *z, int workers)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "GOMAXPROCS=%d %s/%s %" PRIu64 " %" PRIu64, workers, peer_dir, name, z[0], z[1]);
    FILE *f = popen(cmd, "r");
    double ms = -1;
    if (!f || fscanf(f, "%lf", &ms) != 1)
        ms = -1;
    if (f && pclose(f) != 0)
        ms = -1;
    if (ms < 0)
        printf("%s-go: the Go peer failed\n", name);
    return ms;
}

/* One round: the case under sn_call; its ms, or -1 on a wrong result. */
static double run_once(sn_sched_t *sched, const sv_case_t *c, const uint64_t *z, uint64_t want, sn_stats_t *d)
{
    sn_stats_t a, b;
    sn_sched_stats(sched, &a);
    sn_payload_t *in = sn_payload_new(SN_CT_USER, z, 16), *res = NULL;
    double t0 = now_ms();
    int rc = sn_call(sched, "sv", c->name, &in, 600000, &res);
    double ms = now_ms() - t0;
    uint64_t got = 0;
    int bad = rc != 0 || sn_payload_get_u64(res, &got) != 0 || got != want;
    if (bad)
        fprintf(stderr, "schedbench: %s: %s (result %" PRIu64 ", want %" PRIu64 ")%s%.*s\n", c->name,
                rc ? sn_strerror(rc) : "wrong result", got, want, res && rc ? ": " : "", res && rc ? (int)res->len : 0,
                res && rc ? (const char *)res->data : "");
    sn_payload_destroy(&res);
    sn_sched_stats(sched, &b);
    *d = (sn_stats_t){.steps = b.steps - a.steps, .steals = b.steals - a.steals, .parks = b.parks - a.parks};
    return bad ? -1 : ms;
}

static sn_sched_t *sv_sched(int workers)
{
    sn_sched_t *s = sn_sched_new(&(sn_sched_config_t){1, workers, 1});
    for (size_t i = 0; s && i < sizeof types / sizeof types[0]; i++)
        if (sn_type_register(s, &types[i]) != 0)
            sn_sched_destroy(&s);
    if (!s)
        fprintf(stderr, "schedbench: cannot start the scheduler\n");
    return s;
}

static void report(const sv_case_t *c, const sn_savina_opts_t *o, const double *ms, const double *go,
                   const uint64_t *steals)
{
    double m = median(ms, o->rounds);
    printf("%s: steals per round:", c->name);
    for (int r = 0; r < o->rounds; r++)
        printf(" %" PRIu64, steals[r]);
    printf("\n");
    if (go) {
        double g = median(go, o->rounds);
        printf("RESULT %s-go %.1f ms\n", c->name, g);
        printf("%s: schednode takes %.2f of Go's time (medians of %d, GOMAXPROCS=%d)\n", c->name, m / g, o->rounds,
               o->workers);
    }
    printf("RESULT %s %.1f ms\n", c->name, m);
}

static int run_case(const sv_case_t *c, const sn_savina_opts_t *o)
{
    const uint64_t *z = o->quick ? c->quick : c->full;
    uint64_t want = c->want(z), steals[MAX_ROUNDS];
    double ms[MAX_ROUNDS], go[MAX_ROUNDS];
    bool peer = !o->quick && peer_build(c->name) == 0;
    sn_sched_t *sched = sv_sched(o->workers);
    if (!sched)
        return 1;
    char what[96];
    snprintf(what, sizeof what, c->what, z[0], z[1]);
    for (int r = 0; r < o->rounds; r++) {
        sn_stats_t d;
        ms[r] = run_once(sched, c, z, want, &d);
        steals[r] = d.steals;
        if (ms[r] < 0) {
            sn_sched_destroy(&sched);
            return 1;
        }
        printf("%s round %d: %s in %.1f ms; %" PRIu64 " steps, %" PRIu64 " steals, %" PRIu64 " parks", c->name, r + 1,
               what, ms[r], d.steps, d.steals, d.parks);
        if (peer && (go[r] = peer_run(c->name, z, o->workers)) < 0)
            peer = false;
        if (peer)
            printf("; Go %.1f ms", go[r]);
        printf("\n");
        fflush(stdout);
    }
    sn_sched_destroy(&sched);
    report(c, o, ms, peer ? go : NULL, steals);
    return 0;
}

int sn_savina_has(const char *name)
{
    for (size_t i = 0; i < NCASES; i++)
        if (!strcmp(name, cases[i].name))
            return 1;
    return !strcmp(name, "savina");
}

int sn_bench_savina(const char *name, const sn_savina_opts_t *opts)
{
    sn_savina_opts_t o = *opts;
    if (o.rounds < 1)
        o.rounds = o.quick ? 1 : 3;
    if (o.rounds > MAX_ROUNDS)
        o.rounds = MAX_ROUNDS;
    int rc = 0;
    for (size_t i = 0; i < NCASES; i++)
        if (!strcmp(name, "savina") || !strcmp(name, cases[i].name))
            rc |= run_case(&cases[i], &o);
    if (peer_dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", peer_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "schedbench: could not remove %s\n", peer_dir);
        peer_dir[0] = 0;
    }
    return rc;
}

/* fuzz_relay.c - everything a frame from the network reaches in the relay:
 * sn__relay_inbound_frame (relay/relay.c) decodes one frame and dispatches
 * it to the data path (sends of every kind, acks, heartbeats), to
 * membership (relay/members.c: Hello, Welcome, Members, Error, Leave), to
 * stealing (relay/steal.c: request, offer, accept, commit) and to client
 * requests (status, spawn, send, call). Each input is a sequence of such
 * frames, probe datagrams (sn__relay_datagram, relay/udp.c) and timer
 * turns (relay_input.h) run against a fresh relay (made
 * by sn__relay_create: sn_relay_new without its I/O thread) of node 1 with
 * members 2 and 3, over a real scheduler with one worker.
 *
 * No socket reaches the network: the ROUTER is bound to an inproc
 * endpoint nobody connects to (answers to routing ids fail, as
 * ROUTER_MANDATORY makes them), and members' DEALERs are never connected
 * (the link flag --wrap=sn__relay_dealer_to swaps members.c's calls for
 * __wrap_sn__relay_dealer_to below), so sends to them stay queued in the
 * relay as with a peer whose pipe is full.
 *
 * Threads: this thread plays the relay's I/O thread and owns the relay
 * state (but for the shutdown, see io_thread); the scheduler's worker runs
 * processes and reaches the relay only through its hooks (relay_deliver,
 * a CALL's reply: the MPSC queue), as in the real node.
 */
#include <arpa/inet.h>
#include <czmq.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "relay_input.h"
#include "relay_int.h"
#include "peer.h"
#include "udp.h"
#include "members.h"
#include "steal.h"

#define FZ_MAX_FRAME 8192 /* smaller than the default, so "oversize" is reachable */
#define SHUTDOWN_MS 2000

static zcert_t *certs[3]; /* ours and members 2 and 3 (secure setups) */
static FILE *devnull;

/* Routing ids on the ROUTER: two as ZeroMQ makes them (5 bytes), the
 * longest it allows (255), and a short one. */
static unsigned char long_id[255];
static const struct {
    const unsigned char *id;
    size_t len;
} idents[FZ_IDENTS] = {{(const unsigned char *)"\0\x6b\x8b\x45\x67", 5},
                       {(const unsigned char *)"\0\x6b\x8b\x45\x68", 5},
                       {long_id, sizeof long_id},
                       {(const unsigned char *)"c", 1}};

/* ------------------------------------------------------- process types */

/* A process of type "fz" does what its method says: "idle" waits for
 * events, "run" finishes at once, "busy" stays Ready (stealable), "fail"
 * fails. A message "stop" or a cancel ends any of them. Its state, the
 * mode, marshals as one SN_CT_U64 payload, so processes can move. */
static const char *const modes[FZ_NMODES] = {"idle", "run", "busy", "fail"};

typedef struct fz_state {
    uint64_t mode;
} fz_state_t;

static int fz_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    fz_state_t *s = state;
    for (uint64_t m = 0; m < FZ_NMODES; m++)
        if (!strcmp(method, modes[m])) {
            s->mode = m;
            return 0;
        }
    return SN_ENOMETHOD;
}

static void fz_step(sn_ctx_t *ctx, void *state, sn_event_t *events, size_t n, sn_step_out_t *out)
{
    fz_state_t *s = state;
    for (size_t i = 0; i < n; i++)
        if (events[i].type == SN_EV_CANCEL || (events[i].type == SN_EV_MESSAGE && events[i].data &&
                                               events[i].data->len == 4 && !memcmp(events[i].data->data, "stop", 4))) {
            sn_out_done(out, NULL);
            return;
        }
    switch (s->mode) {
    case FZ_MODE_RUN:
        sn_out_done(out, NULL);
        break;
    case FZ_MODE_FAIL:
        sn_out_fail(out, SN_EFAILED, "asked to fail");
        break;
    case FZ_MODE_BUSY:
        out->status = SN_CONTINUE;
        break;
    default:
        out->status = SN_IDLE;
        break;
    }
}

static int fz_marshal(sn_ctx_t *ctx, void *state, sn_payload_t **out)
{
    *out = sn_payload_u64(((fz_state_t *)state)->mode);
    return *out ? 0 : SN_ENOMEM;
}

static int fz_unmarshal(sn_ctx_t *ctx, void *state, const sn_payload_t *in)
{
    uint64_t mode;
    if (sn_payload_get_u64(in, &mode) != 0 || mode >= FZ_NMODES)
        return SN_EINVAL;
    ((fz_state_t *)state)->mode = mode;
    return 0;
}

static const sn_type_t fz_type = {FZ_TYPE, 1, sizeof(fz_state_t), fz_init, fz_step, NULL, fz_marshal, fz_unmarshal};
/* the same, but it cannot move */
static const sn_type_t pinned_type = {"pinned", 1, sizeof(fz_state_t), fz_init, fz_step, NULL, NULL, NULL};

/* ----------------------------------------------------------- the relay */

/* members.c dials a member through this: here, a DEALER that is never
 * connected (the --wrap link flag routes the calls here). */
zsock_t *__wrap_sn__relay_dealer_to(sn_relay_t *r, const char *endpoint, const char *server_key);
zsock_t *__wrap_sn__relay_dealer_to(sn_relay_t *r, const char *endpoint, const char *server_key)
{
    return zsock_new(ZMQ_DEALER);
}

/* The relay sn_relay_new makes, without its I/O thread (this thread is
 * it), bound to an inproc endpoint of its own, with members 2 and 3. */
static sn_relay_t *relay_new(sn_sched_t *sched, uint8_t setup)
{
    static unsigned serial; /* a closed inproc endpoint is released later: a new name each time */
    char listen[64], err[256];
    snprintf(listen, sizeof listen, "inproc://sn-fuzz-relay-%u", serial++);
    sn_relay_config_t cfg = {.listen = listen,
                             .advertise = "tcp://127.0.0.1:7001",
                             .first_serial = FZ_FIRST_SERIAL,
                             .steal = (setup & FZ_SETUP_STEAL) != 0,
                             .steal_batch = 4,
                             .incarnation = 7,
                             .max_frame = FZ_MAX_FRAME};
    sn_relay_t *r = sn__relay_create(sched, &cfg, err, sizeof err);
    if (!r) {
        fprintf(stderr, "fuzz_relay: %s\n", err);
        abort(); /* the harness is broken, not the input */
    }
    if (!(setup & FZ_SETUP_JOINED))
        atomic_store(&r->joined, 0); /* as if it had seeds: Welcome and refusals count */
    r->no_steal = (setup & FZ_SETUP_NOSTEAL) != 0;
    if (setup & FZ_SETUP_SECURE) {
        r->cert = certs[0]; /* borrowed: relay_free gives it back before sn_relay_destroy */
        snprintf(r->public_key, sizeof r->public_key, "%s", zcert_public_txt(certs[0]));
    }
    /* member 2 runs our "fz" (a steal partner); member 3 runs another
     * version of it (not one) */
    for (uint32_t node = FZ_PARTNER; node <= FZ_OTHER; node++) {
        sn_wire_type_t t = {FZ_TYPE, node == FZ_PARTNER ? 1 : 2, 1};
        sn_wire_member_t m = {
            .node = node, .state = SN_MEMBER_UP, .incarnation = 5, .first_serial = 100, .types = &t, .ntypes = 1};
        snprintf(m.endpoint, sizeof m.endpoint, "tcp://127.0.0.1:700%u", (unsigned)node);
        if (r->cert)
            snprintf(m.public_key, sizeof m.public_key, "%s", zcert_public_txt(certs[node - 1]));
        if (!sn__members_upsert(r, &m, "fuzz setup"))
            abort();
    }
    sn__relay_install(r, false); /* (no remote-work hook: idle workers would make steal ticks vary) */
    return r;
}

static void relay_free(sn_relay_t **r)
{
    (*r)->cert = NULL; /* ours, shared by every input */
    sn_relay_destroy(r);
}

/* ---------------------------------------------------------- the target */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    zsys_handler_set(NULL); /* libFuzzer handles SIGINT itself */
    zsys_init();
    /* the relay logs at debug level, so every log line's arguments are
     * formatted; the output goes nowhere (SN_FUZZ_LOG=1: to stderr, to see
     * what an input does) */
    devnull = fopen("/dev/null", "w");
    zsys_set_logstream(getenv("SN_FUZZ_LOG") ? stderr : devnull);
    sn_relay_set_log_level(3);
    for (int i = 0; i < 3; i++)
        certs[i] = zcert_new();
    memset(long_id, 'i', sizeof long_id);
    return 0;
}

/* During the shutdown: the I/O thread's part, draining until told to stop
 * (the thread that made it waits in sn_sched_shutdown meanwhile and takes
 * the relay back with pthread_join). */
typedef struct io {
    sn_relay_t *r;
    _Atomic bool stop;
} io_t;

static void *io_thread(void *arg)
{
    io_t *io = arg;
    while (!atomic_load_explicit(&io->stop, memory_order_relaxed)) /* (join orders the rest) */
        if (!sn__relay_drain(io->r))
            usleep(200);
    return NULL;
}

/* Plays the records of an input (relay_input.h) to r. */
static void play(sn_relay_t *r, const uint8_t *data, size_t size)
{
    /* where datagrams come from (the relay has no UDP socket here: an
     * answer to one goes nowhere) */
    struct sockaddr_in udp_from = {
        .sin_family = AF_INET, .sin_port = htons(7002), .sin_addr.s_addr = htonl(0x7f000001)};
    zsock_t *seed = zsock_new(ZMQ_DEALER); /* the relay only compares it with NULL */
    for (size_t i = 0; i < size;) {
        uint8_t op = data[i++];
        switch (op & 7) {
        case FZ_STEAL_TICK:
            if (!r->no_steal) /* as the I/O loop does */
                sn__steal_tick(r, sn__relay_now_ns());
            break;
        case FZ_MEMBERS_TICK:
            sn__members_tick(r);
            break;
        case FZ_PEER_GONE: { /* what members.c does when a member falls silent */
            peer_t *p = sn__relay_peer(r, (op >> 3) % atomic_load(&r->npeers));
            if (atomic_load(&p->node) && p->state == SN_MEMBER_UP) { /* (not a free slot) */
                p->state = SN_MEMBER_DOWN;
                atomic_store_explicit(&p->down, 1, memory_order_release);  /* as set_down */
                sn__relay_bounce_peer(r, p, SN_ENODEDOWN, (op >> 11) & 1); /* down, or gone for good */
            }
            break;
        }
        default: { /* a frame, copied so that ASan sees reads past its end */
            size_t len = 0;
            if (i < size)
                len = data[i++];
            if (i < size)
                len |= (size_t)data[i++] << 8;
            if (len > size - i)
                len = size - i;
            uint8_t *frame = malloc(len ? len : 1);
            if (!frame)
                break;
            memcpy(frame, data + i, len);
            i += len;
            if ((op & 7) == FZ_DATAGRAM)
                sn__relay_datagram(r, frame, len, (const struct sockaddr *)&udp_from, sizeof udp_from);
            else if ((op & 7) == FZ_PEER)
                sn__relay_inbound_frame(r, frame, len, NULL, 0, NULL);
            else if ((op & 7) == FZ_SEED)
                sn__relay_inbound_frame(r, frame, len, NULL, 0, seed);
            else
                sn__relay_inbound_frame(r, frame, len, idents[(op >> 3) % FZ_IDENTS].id,
                                        idents[(op >> 3) % FZ_IDENTS].len, NULL);
            free(frame);
            break;
        }
        }
        while (sn__relay_drain(r)) /* the I/O loop's turn at what workers and the relay queued */
            ;
    }
    zsock_destroy(&seed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!certs[0])
        LLVMFuzzerInitialize(NULL, NULL);
    sn_sched_t *sched = sn_sched_new(&(sn_sched_config_t){FZ_SELF, 1, FZ_FIRST_SERIAL});
    if (!sched)
        return 0;
    sn_type_register(sched, &fz_type);
    sn_type_register(sched, &pinned_type);
    sn_relay_t *r = relay_new(sched, data[0]);
    play(r, data + 1, size - 1);
    /* the node's shutdown order (node/main.c): handovers end, processes
     * finish (the I/O thread still draining what they send: a thread plays
     * it while this one waits), then the relay goes, then the scheduler */
    sn__steal_stop(r);
    io_t io = {.r = r};
    pthread_t t;
    bool draining = pthread_create(&t, NULL, io_thread, &io) == 0;
    int forced = sn_sched_shutdown(sched, SHUTDOWN_MS);
    if (draining) {
        atomic_store_explicit(&io.stop, true, memory_order_relaxed);
        pthread_join(t, NULL); /* the relay is this thread's again */
    }
    sn__relay_drain(r);
    /* every "fz" process ends on the shutdown's CANCEL: one still running
     * when the timeout expired is one the scheduler could not reach */
    FUZZ_CHECK(forced == 0);
    relay_free(&r);
    sn_sched_destroy(&sched);
    return 0;
}

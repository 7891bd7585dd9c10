/* relay.c - the ZeroMQ relay's I/O loop (see relay.h for the relay as a
 * whole, relay_int.h for its parts).
 *
 * Threads and ownership: the I/O thread (the czmq actor whose body is
 * sn__relay_actor) owns every socket and every peer's state. Workers only
 * queue items for it (route.c) and read peers' `down` flags, which it
 * writes. The relay's files, by job:
 *   relay.c     the I/O loop: what it watches, one turn, the thread
 *   lifecycle.c making and unmaking a relay (main's thread)
 *   route.c     the worker side (the deliver hook, the queue) and routing
 *   peer.c      per-peer outbound: batches, acks, backpressure, bounces
 *   inbound.c   frames read, checked and dispatched
 *   members.c   membership (on swim.c), steal.c, locate.c, keys.c, codec.c
 *   udp.c       SWIM's probes over UDP (dgram.c: a datagram's format and seal)
 *   client.c    the command-line client (no relay: the caller's thread)
 */
#include "relay.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "relay_int.h"
#include "peer.h"
#include "udp.h"
#include "members.h"
#include "steal.h"
#include "locate.h"

#define SWEEP_NS 1000000000u /* see turn */

void sn_relay_set_log_level(int level)
{
    sn__log_set_level(level);
}

uint64_t sn__relay_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define SOFT_NS 4000000u /* a soft timer waits at least this long when we sleep (wait_events) */

/* The I/O loop.
 *
 * One epoll set (r->epfd) holds the ZMQ_FD of every socket (the actor's
 * pipe, the ROUTER and its monitor, each peer's DEALER, each seed's DEALER
 * and monitor), the eventfd that workers write and the probes' UDP socket
 * (udp.c: a plain socket, read until it is empty when it wakes us). A turn costs what
 * happened in it, not the number of members: of the peers, only those
 * whose DEALER woke us or was sent on (io_look; io_later: sent on by this
 * thread, looked at within a few milliseconds, peer.c: look_later), got
 * sends (io_batch) or owe acknowledgements (io_ack) are looked at. A ZMQ_FD only says "look at
 * ZMQ_EVENTS", and libzmq may consume its wake-up inside any send or
 * receive on that socket: so a socket we used in a turn is looked at again
 * in the next one, before we sleep. Level-triggered: a socket whose
 * events we have not read keeps waking us. */
void sn__relay_io_watch(sn_relay_t *r, zsock_t *s, uint32_t kind, uint32_t i, bool on)
{
    int fd = kind == SN_IO_EFD ? r->efd : kind == SN_IO_UDP ? r->udp_fd : s ? zsock_fd(s) : -1;
    if (r->epfd < 0 || fd < 0)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)kind << 32 | i};
    if (epoll_ctl(r->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev) != 0 && on)
        SNLOG_ERROR(r, "epoll_ctl: %s: a socket is not watched", strerror(errno));
}

/* Our connection to p closed (libzmq reconnects by itself). The kernel
 * closes a process's connections when it ends, killed or not, so this is
 * the first sign of a death, long before p's turn in the probe order comes
 * round in a large table (membership hears it: sn__members_closed). */
static void peer_closed(sn_relay_t *r, peer_t *p)
{
    char why[128], ep[256];
    while (p->closes && (zsock_events(p->closes) & ZMQ_POLLIN))
        if (sn_keys_failure(p->closes, r->cert != NULL, why, sizeof why, ep, sizeof ep) == SN_KEYS_CLOSED)
            sn__members_closed(r, p);
}

void sn__relay_set_dealer(sn_relay_t *r, peer_t *p, zsock_t *d)
{
    uint32_t i = p->slot;
    if (p->closes) {
        sn__relay_io_watch(r, p->closes, SN_IO_PEER_MON, i, false);
        sn_keys_unmonitor(p->dealer, &p->closes);
    }
    if (p->dealer) {
        sn__relay_io_watch(r, p->dealer, SN_IO_PEER, i, false); /* (before the close: its fd number may be reused) */
        zsock_destroy(&p->dealer);
    }
    p->dealer = d;
    if (d) {
        sn__relay_io_watch(r, d, SN_IO_PEER, i, true);
        sn__relay_io_look(r, p);
        p->closes = sn_keys_monitor_closes(d); /* (none: the probes alone find a death) */
        if (p->closes) {
            sn__relay_io_watch(r, p->closes, SN_IO_PEER_MON, i, true);
            peer_closed(r, p); /* (its ZMQ_FD signals only once ZMQ_EVENTS found it empty) */
        }
    }
}

/* A handshake with a seed failed: with a secure cluster that will not
 * change by trying again, so the join ends with the reason. */
static void seed_refused(sn_relay_t *r, seed_t *sd)
{
    char why[128], ep[256];
    if (sn_keys_failure(sd->monitor, r->cert != NULL, why, sizeof why, ep, sizeof ep) == 0 ||
        atomic_load_explicit(&r->joined, memory_order_relaxed) != 0)
        return;
    snprintf(r->join_error, sizeof r->join_error, "the seed at %s refused this node: %s%s", sd->endpoint, why,
             !strcmp(why, "key not authorized") ? " (add this node's public certificate to the authorized-keys "
                                                  "directory of the cluster's nodes)"
                                                : "");
    SNLOG_ERROR(r, "%s", r->join_error);
    atomic_store_explicit(&r->joined, -1, memory_order_release); /* release: join_error first */
}

/* Someone failed the CurveZMQ handshake with us: logged at most once per
 * two seconds, with the count of the quiet ones (a refused peer retries
 * every few hundred milliseconds). */
static void router_refused(sn_relay_t *r)
{
    char why[256], ep[256];
    int kind = sn_keys_failure(r->router_monitor, true, why, sizeof why, ep, sizeof ep);
    if (kind == 0)
        return;
    if (kind == SN_KEYS_CLOSED) { /* a peer or client went away, or sent a frame over the hard limit */
        sn__add(&r->disconnects, 1);
        return;
    }
    sn__add(&r->refused, 1);
    if (kind == SN_KEYS_FAILED) /* from this side, the usual causes are these */
        snprintf(why, sizeof why, "handshake failed (a client without keys, or with a wrong key for this node)");
    char more[64], who[160] = "";                   /* one rate limit per kind of failure */
    if (kind == SN_KEYS_NOT_AUTHORIZED && r->zap) { /* the ZAP handler saw who */
        char last[128];
        sn_keys_zap_last_refused(r->zap, last, sizeof last);
        if (*last)
            snprintf(who, sizeof who, " from %s", last);
    }
    if (sn__log_limit(&r->refuse_log[kind], sn__relay_now_ns(), 2000000000u, more, sizeof more))
        SNLOG_WARN(r, "refused a connection on %s%s: %s%s%s", ep, who, why,
                   kind == SN_KEYS_NOT_AUTHORIZED ? ": its key is not in the authorized keys" : "", more);
}

/* Frees the connections to seeds once we are a member. */
void sn__relay_drop_seeds(sn_relay_t *r)
{
    for (size_t i = 0; i < r->nseeds; i++) {
        sn__relay_io_watch(r, r->seeds[i].monitor, SN_IO_SEED_MON, (uint32_t)i, false);
        sn__relay_io_watch(r, r->seeds[i].dealer, SN_IO_SEED, (uint32_t)i, false);
        sn_keys_unmonitor(r->seeds[i].dealer, &r->seeds[i].monitor);
        /* a seed's socket holds only Hellos, which no one needs once the
         * join is over: no linger (else a node stopped while it waits for
         * an absent seed exits 500 ms late: cli.sh, SIGINT to a joining node) */
        if (r->seeds[i].dealer)
            zsock_set_linger(r->seeds[i].dealer, 0);
        zsock_destroy(&r->seeds[i].dealer);
    }
    free(r->seeds);
    r->seeds = NULL;
    r->nseeds = 0;
}

/* The commands main sends the actor; true on $TERM. */
static bool pipe_commands(sn_relay_t *r, zsock_t *pipe)
{
    while (zsock_events(pipe) & ZMQ_POLLIN) {
        char *cmd = zstr_recv(pipe);
        bool term = !cmd || streq(cmd, "$TERM");
        if (cmd && streq(cmd, "LEAVE")) { /* members.c signals the pipe when done */
            r->leave_deadline_ns = sn__relay_now_ns() + 1000000000u;
            r->next_tick_ns = 0;
        } else if (cmd && streq(cmd, "NOSTEAL")) {
            sn__steal_stop(r);
            r->no_steal = true; /* (and no more backpressure: the processes end) */
            SN__FOR_PEERS(r, p)
            {
                sn__relay_let_go(r, &p->waiters);
            }
            sn__relay_let_go(r, &r->held_waiters);
            zsock_signal(pipe, 0);
        }
        zstr_free(&cmd);
        if (term)
            return true;
    }
    return false;
}

/* The peers listed to look at: what their DEALERs received (acks, answers
 * to us), and a frame a full pipe refused, once there is room. Returns
 * true if one stopped on the inbound budget. */
static bool look_at_peers(sn_relay_t *r)
{
    if (r->nio_later && sn__relay_now_ns() >= r->later_due_ns) { /* (peer.c: look_later) */
        for (size_t i = 0; i < r->nio_later; i++) {
            sn__relay_peer(r, r->io_later[i])->io_later = false;
            sn__relay_io_look(r, sn__relay_peer(r, r->io_later[i]));
        }
        r->nio_later = 0;
    }
    uint32_t *look = r->io_scratch; /* (a copy: a look may list peers again) */
    size_t n = r->nio_look;
    if (n)
        memcpy(look, r->io_look, n * sizeof *look);
    r->nio_look = 0; /* a send from here on lists its peer for the next turn */
    for (size_t i = 0; i < n; i++)
        sn__relay_peer(r, look[i])->io_look = false;
    bool more = false;
    for (size_t i = 0; i < n; i++) {
        peer_t *p = sn__relay_peer(r, look[i]);
        if (!p->dealer)
            continue;
        /* (a read until EAGAIN looks at the socket's commands, as
         * ZMQ_EVENTS would: one syscall fewer; ZMQ_EVENTS only for room) */
        r->in_dialled = p; /* (what comes on it is p's alone: inbound.c, on_dialled) */
        bool stopped = sn__relay_read_socket(r, zsock_resolve(p->dealer), false, NULL);
        r->in_dialled = NULL;
        if (stopped) {
            sn__relay_io_look(r, p);
            more = true;
        }
        if ((p->pending || p->nctl) && (zsock_events(p->dealer) & ZMQ_POLLOUT))
            sn__relay_flush_peer(r, p);
    }
    return more;
}

/* While joining: the seeds' answers and handshake failures. */
static void look_at_seeds(sn_relay_t *r)
{
    for (size_t i = 0; i < r->nseeds; i++) {
        seed_t *sd = &r->seeds[i];
        while (sd->dealer && (zsock_events(sd->dealer) & ZMQ_POLLIN))
            if (!sn__relay_read_socket(r, zsock_resolve(sd->dealer), false, sd->dealer))
                break;
        while (sd->monitor && (zsock_events(sd->monitor) & ZMQ_POLLIN))
            seed_refused(r, sd);
    }
}

/* What one turn of the loop must look at, carried to the next turn. */
typedef struct turn {
    bool more;      /* something is waiting (a budget ran out, a wake-up was taken): no sleep */
    bool inflight;  /* a push to the queue not yet linked (it may not signal): look again soon */
    bool pipe_look; /* the actor's pipe woke us */
} turn_t;

/* Sleeps until a socket, the eventfd or the next timer (members, steals,
 * acks) wakes us; notes what woke us. False if the wait failed.
 *
 * The soft timers (acks, a look at DEALERs sent on: peer.c) may run a few
 * milliseconds late; when one is near, we sleep SOFT_NS. A timeout shorter
 * than the kernel's tick reprograms the CPU's timer at each sleep, which
 * in a VM costs an exit: a cross-node round trip, which sleeps twice on
 * each side, was about 4 us slower with 1 ms timeouts than with 4 ms ones
 * on a 2-vCPU VM (an eventfd ping-pong between two threads). Each turn
 * sends what is due, so when traffic wakes us they are on time. */
static bool wait_events(sn_relay_t *r, turn_t *t)
{
    uint64_t now = sn__relay_now_ns(), next = sn__members_next_ns(r);
    uint64_t snext = r->no_steal ? UINT64_MAX : sn__steal_next_ns(r), soft = sn__relay_acks_due_ns(r);
    if (snext < next)
        next = snext;
    if (r->nio_later && r->later_due_ns < soft)
        soft = r->later_due_ns;
    if (soft < now + SOFT_NS)
        soft = now + SOFT_NS;
    if (soft < next)
        next = soft;
    bool busy = t->more || r->nio_look || r->nio_batch || r->bq_head < r->bq_n;
    long timeout = busy ? 0 : next > now ? (long)((next - now) / 1000000u) + 1 : 0;
    if (t->inflight && timeout > 1)
        timeout = 1;
    struct epoll_event evs[64];
    /* the only time this thread lets go of the I/O side (relay_int.h) */
    pthread_mutex_unlock(&r->io_mu);
    int nev = epoll_wait(r->epfd, evs, (int)(sizeof evs / sizeof *evs), (int)(timeout > 60000 ? 60000 : timeout));
    pthread_mutex_lock(&r->io_mu);
    if (nev < 0 && errno != EINTR)
        return false;
    for (int k = 0; k < nev; k++) {
        uint32_t kind = (uint32_t)(evs[k].data.u64 >> 32), i = (uint32_t)evs[k].data.u64;
        if (kind == SN_IO_PEER)
            sn__relay_io_look(r, sn__relay_peer(r, i));
        else if (kind == SN_IO_PEER_MON)
            peer_closed(r, sn__relay_peer(r, i));
        else if (kind == SN_IO_ROUTER)
            r->router_look = true;
        else if (kind == SN_IO_UDP)
            r->udp_look = true;
        else if (kind == SN_IO_PIPE)
            t->pipe_look = true;
        else if (kind == SN_IO_EFD) {
            uint64_t v;
            ssize_t got = read(r->efd, &v, sizeof v);
            (void)got;
            atomic_store_explicit(&r->signaled, 0, memory_order_seq_cst);
        } else if (kind == SN_IO_ROUTER_MON) {
            while (r->router_monitor && (zsock_events(r->router_monitor) & ZMQ_POLLIN))
                router_refused(r);
        } /* (the seeds are looked at every turn) */
    }
    return true;
}

/* After a worker sent on sockets (sn__relay_drain on its thread), the I/O
 * thread may be asleep with the rules of "The I/O loop" above broken: a
 * send may have taken the wake-up of a frame that came in on that socket,
 * a full pipe left a frame pending (its room wakes us only if we sleep
 * watching for it), a ROUTER answer or a budget left work. Then it must be
 * woken; else the peers listed to look at wait for its next turn. */
bool sn__relay_drain_here(sn_relay_t *r)
{
    if (!r->io_alive)
        return true; /* (nobody sends: the poke is harmless) */
    if (sn__relay_drain(r) || r->router_look || r->pipe_used || r->bq_head < r->bq_n)
        return true; /* (the bounce queue: a slice a turn, peer.c) */
    for (size_t i = 0; i < r->nio_look; i++) {
        peer_t *p = sn__relay_peer(r, r->io_look[i]);
        if (p->pending || p->nctl || (p->dealer && (zsock_events(p->dealer) & ZMQ_POLLIN)))
            return true;
    }
    return false;
}

/* One turn: commands, the outbound queue, what came in, acks, timers.
 * True on $TERM. */
static bool turn(sn_relay_t *r, zsock_t *pipe, turn_t *t)
{
    /* the pipe, the ROUTER: when they woke us or were used, and once a
     * second (a sweep, at a tick: a wake-up libzmq took inside one of our
     * own calls, which the flags missed, is seen then) */
    uint64_t now = sn__relay_now_ns();
    bool sweep = now >= sn__members_next_ns(r) && now >= r->sweep_ns;
    if (sweep) {
        r->sweep_ns = now + SWEEP_NS;
        r->router_look = true;
        sn__relay_probe_gaps(r, now);
    }
    if ((t->pipe_look || sweep || r->pipe_used) && pipe_commands(r, pipe))
        return true;
    t->pipe_look = r->pipe_used = false;
    /* Every turn drains, not only a signalled one: a GONE is queued
     * without waking us (sn__relay_deliver) and goes out with the next
     * send, or at the next tick (a heartbeat period at most). */
    t->more = sn__relay_drain(r);
    t->inflight = !t->more && sn__mpsc_maybe_nonempty(&r->outq);
    if (r->bq_head < r->bq_n) /* (peer.c: a slice a turn; wait_events does not sleep while any waits) */
        sn__relay_bounce_some(r);
    if (r->router_look) {
        r->router_look = false;
        if (sn__relay_read_socket(r, zsock_resolve(r->router), true, NULL))
            r->router_look = t->more = true;
    }
    if (r->udp_look) {
        r->udp_look = false;
        if (sn__relay_read_udp(r))
            r->udp_look = t->more = true;
    }
    sn__relay_send_acks(r, sn__relay_now_ns());
    if (look_at_peers(r))
        t->more = true;
    look_at_seeds(r);
    /* (at a sweep too: its ZMQ_FD did not always wake us for a refused
     * handshake, cluster.sh) */
    while (sweep && r->router_monitor && (zsock_events(r->router_monitor) & ZMQ_POLLIN))
        router_refused(r);
    if (r->nseeds && atomic_load_explicit(&r->joined, memory_order_relaxed) != 0)
        sn__relay_drop_seeds(r);
    if (r->gossip_due || atomic_load_explicit(&r->load_news, memory_order_acquire) ||
        sn__relay_now_ns() >= sn__members_next_ns(r)) {
        sn__members_tick(r);
        sn__loc_tick(r, sn__relay_now_ns()); /* flushes that got no answer */
    }
    if (!r->no_steal &&
        (atomic_load_explicit(&r->want_work, memory_order_relaxed) || sn__relay_now_ns() >= sn__steal_next_ns(r)))
        sn__steal_tick(r, sn__relay_now_ns());
    /* sends on the ROUTER (acks, answers) or the pipe may have taken
     * their wake-ups: look again at once if something is waiting */
    if (r->router_look || (sweep && (zsock_events(pipe) & ZMQ_POLLIN)))
        t->more = true;
    return false;
}

/* The relay whose I/O thread this is (NULL on every other thread): that
 * thread holds io_mu whenever it is not in epoll_wait (relay_int.h). */
static _Thread_local sn_relay_t *io_thread_of;

bool sn__relay_on_io_thread(const sn_relay_t *r)
{
    return io_thread_of == r;
}

void sn__relay_actor(zsock_t *pipe, void *arg)
{
    sn_relay_t *r = arg;
    io_thread_of = r;
    r->actor_pipe = pipe;
    sn__relay_io_watch(r, pipe, SN_IO_PIPE, 0, true);
    zsock_signal(pipe, 0);
    turn_t t = {.pipe_look = true};
    pthread_mutex_lock(&r->io_mu);
    r->io_alive = true;
    r->router_look = true;
    while (wait_events(r, &t) && !turn(r, pipe, &t))
        ;
    /* the seeds' sockets are ours: close them here */
    sn__relay_drop_seeds(r);
    r->io_alive = false; /* from here on, workers leave the queue to sn_relay_destroy */
    pthread_mutex_unlock(&r->io_mu);
    /* release: everything this thread did happens-before what
     * sn_relay_destroy does after zactor_destroy (that hand-over goes
     * through a ZeroMQ pipe, which TSan cannot see; this it can) */
    io_thread_of = NULL;
    atomic_store_explicit(&r->actor_done, 1, memory_order_release);
}

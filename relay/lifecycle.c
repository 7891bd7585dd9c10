/* lifecycle.c - a relay made and unmade: its sockets, keys, seeds and
 * static peers (sn__relay_create), the I/O thread started
 * (sn_relay_new), and the calls main makes on it afterwards. The calling
 * thread (main); the I/O thread runs relay.c's loop in between.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay_int.h"
#include "move.h"
#include "drain.h"
#include "peer.h"
#include "udp.h"
#include "manage.h"
#include "members.h"
#include "names.h"
#include "services.h"
#include "steal.h"
#include "awaited.h"
#include "locate.h"
#include "swim.h"
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define FOUND_AFTER_NS 2000000000u /* see found_by_ns */

static bool wildcard(const char *ep)
{
    return !strncmp(ep, "tcp://*", 7) || !strncmp(ep, "tcp://0.0.0.0", 13) || !strncmp(ep, "tcp://[::]", 10);
}

/* The relay's own state: ids, counters, the eventfd workers write and the
 * I/O loop's epoll set. NULL (err says why) if the kernel refuses. */
static sn_relay_t *make_state(sn_sched_t *sched, const sn_relay_config_t *cfg, char *err, size_t errlen)
{
    sn_relay_t *r = aligned_alloc(64, sizeof *r); /* (its lines: relay_int.h, the outbound queue) */
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    memset(r, 0, sizeof *r);
    static _Atomic uint64_t serials;
    r->serial = atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed) + 1;
    r->sched = sched;
    r->node = sn_sched_node_id(sched);
    r->incarnation = cfg->incarnation;
    r->first_serial = cfg->first_serial;
    r->max_frame = cfg->max_frame ? cfg->max_frame : SN_WIRE_MAX_FRAME;
    r->max_msg = cfg->max_message ? cfg->max_message : SN_MAX_MESSAGE;
    r->max_backlog = cfg->max_backlog ? cfg->max_backlog : SN_MAX_BACKLOG;
    r->backlog_fails = cfg->backlog_fails == 1;
    r->forget_ns = (uint64_t)(cfg->forget_after_ms > 0 ? cfg->forget_after_ms : SN_FORGET_AFTER_MS) * 1000000u;
    r->hop_trace = getenv("SN_HOP_TRACE") != NULL; /* schedbench xnode-rtt --breakdown */
    r->hb_ms = cfg->heartbeat_ms > 0 ? cfg->heartbeat_ms : SN_SWIM_PERIOD_MS;
    r->down_ms = cfg->down_after_ms > 0 ? cfg->down_after_ms : 1500;
    /* send ids: this node in the top 16 bits, so that ids of different
     * nodes never meet; the run's start time below, so that a restart
     * does not reuse the ids of its earlier run's sends still around */
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    uint64_t wall_us = (uint64_t)wall.tv_sec * 1000000u + (uint64_t)wall.tv_nsec / 1000u;
    atomic_init(&r->next_send_id, ((uint64_t)r->node << 48) | (wall_us & ((UINT64_C(1) << 48) - 1)));
    r->on_out = cfg->on_out;
    r->on_out_arg = cfg->on_out_arg;
    r->on_stop = cfg->on_stop;
    r->on_stop_arg = cfg->on_stop_arg;
    r->start_ns = sn__relay_now_ns();
    snprintf(r->cluster, sizeof r->cluster, "%s", cfg->cluster ? cfg->cluster : "schednode");
    sn__mpsc_init(&r->outq);
    pthread_mutex_init(&r->io_mu, NULL);
    r->udp_fd = -1;
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    r->epfd = r->efd < 0 ? -1 : epoll_create1(EPOLL_CLOEXEC);
    if (r->efd < 0 || r->epfd < 0) {
        snprintf(err, errlen, "%s: %s", r->efd < 0 ? "eventfd" : "epoll_create1", strerror(errno));
        if (r->efd >= 0)
            close(r->efd);
        pthread_mutex_destroy(&r->io_mu);
        free(r);
        return NULL;
    }
    sn__relay_io_watch(r, NULL, SN_IO_EFD, 0, true);
    return r;
}

/* A secure node: its certificate, and the ZAP handler (keys.c), which
 * refuses a key not in the authorized directory during the handshake. -1: err set
 * (or, with err empty, the sockets could not be made). */
static int secure(sn_relay_t *r, const sn_relay_config_t *cfg, char *err, size_t errlen)
{
    if (sn_keys_check(&cfg->security, err, errlen) != 0 || !(r->cert = sn_keys_load(cfg->security.cert, err, errlen)))
        return -1;
    snprintf(r->public_key, sizeof r->public_key, "%s", zcert_public_txt(r->cert));
    snprintf(r->authorized, sizeof r->authorized, "%s", cfg->security.authorized);
    r->zap = sn_keys_zap_new(r->authorized);
    if (!r->zap)
        snprintf(err, errlen, "cannot start the handler of authorized keys (another secure node in this process?)");
    r->keys = r->zap ? sn_keys_cache_new(r->authorized) : NULL;
    if (r->zap && !r->keys)
        snprintf(err, errlen, "out of memory");
    return r->keys ? 0 : -1;
}

/* The ROUTER every peer and client connects to, bound, and the address
 * peers are told to dial. -1: err set (empty: no socket). */
static int open_router(sn_relay_t *r, const sn_relay_config_t *cfg, char *err, size_t errlen)
{
    r->router = zsock_new(ZMQ_ROUTER);
    if (!r->router)
        return -1;
    if (r->cert) {
        zcert_apply(r->cert, r->router);
        zsock_set_curve_server(r->router, 1);
        zsock_set_zap_domain(r->router, "schednode");
    }
    /* refusals (secure), and closed connections: a frame over the hard
     * limit below is cut off by libzmq with its connection, and that is
     * the only trace of it we get */
    r->router_monitor = sn_keys_monitor(r->router, true);
    zsock_set_router_mandatory(r->router, 1);
    zsock_set_sndhwm(r->router, SN_SNDHWM);
    /* what waits for this thread in each peer's pipe is bounded in bytes:
     * frames of max_frame at most, this many (past it libzmq reads no
     * more from that connection, and its sender's backlog fills: it waits) */
    size_t hwm = r->max_backlog / r->max_frame;
    zsock_set_rcvhwm(r->router, hwm < 16 ? 16 : hwm > SN_RCVHWM ? SN_RCVHWM : (int)hwm);
    /* frames up to twice the cap reach us, to be counted and dropped; past
     * that libzmq closes the connection before buffering them */
    zsock_set_maxmsgsize(r->router, (int64_t)r->max_frame * 2 + 1024);
    int bound;
    do /* a signal the program does not block (e.g. a timer) interrupts the bind: try again */
        bound = zsock_bind(r->router, "%s", cfg->listen);
    while (bound < 0 && zmq_errno() == EINTR);
    if (bound < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen, zmq_strerror(zmq_errno()));
        return -1;
    }
    snprintf(r->endpoint, sizeof r->endpoint, "%s", zsock_endpoint(r->router));
    sn__relay_io_watch(r, r->router, SN_IO_ROUTER, 0, true);
    sn__relay_io_watch(r, r->router_monitor, SN_IO_ROUTER_MON, 0, true);
    const char *adv = cfg->advertise ? cfg->advertise : r->endpoint;
    if (wildcard(adv) && (cfg->nseeds || cfg->npeers)) {
        snprintf(err, errlen,
                 "%s listens on every interface: say which address peers should use with --advertise "
                 "tcp://HOST:PORT",
                 r->endpoint);
        return -1;
    }
    if (!sn_wire_endpoint_ok(adv)) {
        snprintf(err, errlen, "'%s' is not an address other nodes can dial (tcp://HOST:PORT)", adv);
        return -1;
    }
    snprintf(r->advertise, sizeof r->advertise, "%s", adv);
    return 0;
}

/* The peers the configuration names (--peer): members from the start. */
static int static_peers(sn_relay_t *r, const sn_relay_config_t *cfg, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->npeers; i++) {
        if (cfg->peers[i].node == r->node || sn__relay_find_peer(r, cfg->peers[i].node)) {
            snprintf(err, errlen, "peer node %" PRIu32 " is this node or listed twice", cfg->peers[i].node);
            return -1;
        }
        sn_wire_member_t m = {.node = cfg->peers[i].node, .state = SN_MEMBER_UP};
        snprintf(m.endpoint, sizeof m.endpoint, "%s", cfg->peers[i].endpoint);
        if (r->cert && sn_keys_server_key(r->authorized, m.endpoint, m.public_key, err, errlen) != 0)
            return -1;
        if (!sn__members_upsert(r, &m, "static peer")) {
            snprintf(err, errlen, "bad peer endpoint %s: %s", cfg->peers[i].endpoint, zmq_strerror(zmq_errno()));
            return -1;
        }
    }
    return 0;
}

/* The seeds to join through (--join): a DEALER to each, watched with its
 * handshake monitor, Hellos sent from the loop. */
static int dial_seeds(sn_relay_t *r, const sn_relay_config_t *cfg, char *err, size_t errlen)
{
    r->seeds = calloc(cfg->nseeds ? cfg->nseeds : 1, sizeof *r->seeds);
    if (!r->seeds)
        return -1;
    for (size_t i = 0; i < cfg->nseeds; i++) {
        if (!strcmp(cfg->seeds[i], r->advertise) || !strcmp(cfg->seeds[i], r->endpoint)) {
            /* ourselves, e.g. one config listing every seed. The first seed
             * listed joins the others if any is running, else it starts
             * the cluster (the rule Akka uses): some node has to. */
            if (i == 0)
                r->found_by_ns = sn__relay_now_ns() + FOUND_AFTER_NS;
            continue;
        }
        seed_t *sd = &r->seeds[r->nseeds];
        snprintf(sd->endpoint, sizeof sd->endpoint, "%s", cfg->seeds[i]);
        char key[41] = "";
        if (r->cert && sn_keys_server_key(r->authorized, cfg->seeds[i], key, err, errlen) != 0)
            return -1;
        sd->dealer = sn__relay_dealer_to(r, cfg->seeds[i], key, &sd->monitor);
        if (!sd->dealer) {
            snprintf(err, errlen, "bad seed endpoint %s: %s", cfg->seeds[i], zmq_strerror(zmq_errno()));
            return -1;
        }
        zsock_set_immediate(sd->dealer, 1); /* no Hellos queued for a seed not there */
        sn__relay_io_watch(r, sd->dealer, SN_IO_SEED, (uint32_t)r->nseeds, true);
        sn__relay_io_watch(r, sd->monitor, SN_IO_SEED_MON, (uint32_t)r->nseeds, true);
        r->nseeds++;
        size_t off = strlen(r->seed_list);
        snprintf(r->seed_list + off, sizeof r->seed_list - off, " %s", cfg->seeds[i]);
    }
    atomic_store(&r->joined, r->nseeds ? 0 : 1);
    return 0;
}

/* The process types this node runs, for members (stealing). */
static int take_types(sn_relay_t *r)
{
    const sn_type_t *types[SN_WIRE_TYPES_MAX];
    r->ntypes = sn__sched_types(r->sched, types, SN_WIRE_TYPES_MAX);
    r->types = calloc(r->ntypes ? r->ntypes : 1, sizeof *r->types);
    if (!r->types)
        return -1;
    for (size_t i = 0; i < r->ntypes; i++) {
        snprintf(r->types[i].name, sizeof r->types[i].name, "%s", types[i]->name);
        r->types[i].version = types[i]->version;
        r->types[i].migratable = types[i]->marshal && types[i]->unmarshal;
    }
    return 0;
}

sn_relay_t *sn__relay_create(sn_sched_t *sched, const sn_relay_config_t *cfg, char *err, size_t errlen)
{
    sn_relay_t *r = make_state(sched, cfg, err, errlen);
    if (!r)
        return NULL;
    err[0] = 0;
    zsys_init();
    zsys_set_linger(0);
    if (sn__members_init(r) != 0 || (cfg->security.cert && secure(r, cfg, err, errlen) != 0) ||
        open_router(r, cfg, err, errlen) != 0 || sn__udp_open(r) != 0 || static_peers(r, cfg, err, errlen) != 0 ||
        dial_seeds(r, cfg, err, errlen) != 0 || sn__names_init(r) != 0 || sn__services_init(r) != 0 ||
        take_types(r) != 0 || sn__steal_init(r, cfg) != 0 || sn__move_init(r) != 0 || sn__loc_init(r) != 0 ||
        sn__manage_init(r) != 0)
        goto fail;
    if (!r->cert) /* (the rule it waives: a key proves who speaks, DESIGN.md) */
        SNLOG_WARN(r,
                   "insecure (plain TCP, no keys): anyone who can reach %s can join this cluster as any node "
                   "and speak in any node's name",
                   r->endpoint);
    return r;
fail:
    if (!err[0]) /* (no reason given: a socket or memory) */
        snprintf(err, errlen, "cannot create sockets: %s", zmq_strerror(zmq_errno()));
    sn_relay_destroy(&r);
    return NULL;
}

sn_relay_t *sn_relay_new(sn_sched_t *sched, const sn_relay_config_t *cfg, char *err, size_t errlen)
{
    sn_relay_t *r = sn__relay_create(sched, cfg, err, errlen);
    if (!r)
        return NULL;
    r->actor = zactor_new(sn__relay_actor, r);
    if (!r->actor) {
        snprintf(err, errlen, "cannot create sockets: %s", zmq_strerror(zmq_errno()));
        sn_relay_destroy(&r);
        return NULL;
    }
    sn__relay_install(r, cfg->steal != 0);
    return r;
}

int sn_relay_join_wait(sn_relay_t *r, int timeout_ms, const sigset_t *sigs, int *sig, char *err, size_t errlen)
{
    uint64_t deadline = sn__relay_now_ns() + (uint64_t)timeout_ms * 1000000u;
    int j;
    /* acquire: join_error is written before joined = -1 (release). Each
     * look sleeps 10 ms in the kernel, or less when one of sigs comes
     * (cli.sh: the CPU of a join wait, a signal to a joining node). */
    while ((j = atomic_load_explicit(&r->joined, memory_order_acquire)) == 0 && sn__relay_now_ns() < deadline) {
        struct timespec ts = {0, 10000000L};
        int got = sigs ? sigtimedwait(sigs, NULL, &ts) : (zclock_sleep(10), -1);
        if (got > 0) {
            *sig = got;
            snprintf(err, errlen, "stopped by signal %d while joining", got);
            return SN_ECANCELED;
        }
    }
    if (j == 1)
        return 0;
    if (j == -1) {
        snprintf(err, errlen, "%s", r->join_error);
        return r->join_code == SN_EEXIST ? SN_EEXIST : SN_EREFUSED;
    }
    snprintf(err, errlen, "no seed answered within %d ms:%s (are they running? is the address right?)", timeout_ms,
             r->seed_list);
    return SN_ETIMEDOUT;
}

void sn_relay_stop_stealing(sn_relay_t *r)
{
    if (!r || !r->actor)
        return;
    zstr_send(r->actor, "NOSTEAL");
    zsock_wait(r->actor);
}

void sn_relay_leave(sn_relay_t *r)
{
    if (!r || !r->actor)
        return;
    zstr_send(r->actor, "LEAVE");
    zsock_wait(r->actor); /* the actor signals when the Leave is out */
}

void sn_relay_destroy(sn_relay_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sn_relay_t *r = *self_p;
    bool had_actor = r->actor != NULL; /* it closed the seeds' sockets itself */
    zactor_destroy(&r->actor);
    /* acquire: pairs with the actor's last store (it has returned by now) */
    while (had_actor && !atomic_load_explicit(&r->actor_done, memory_order_acquire))
        zclock_sleep(1);
    /* whatever is still queued had nowhere to go: drop it */
    sn__mpsc_node_t *n;
    while ((n = sn__mpsc_pop(&r->outq)))
        sn__relay_free_item((item_t *)n);
    sn__relay_table_fini(r);
    sn__relay_bounce_fini(r);
    if (!had_actor)
        sn__relay_drop_seeds(r);
    sn_keys_unmonitor(r->router, &r->router_monitor);
    zsock_destroy(&r->router);
    sn__udp_close(r);
    sn_keys_zap_destroy(&r->zap);
    sn_keys_cache_destroy(&r->keys);
    zcert_destroy(&r->cert);
    sn__names_fini(r);
    sn__services_fini(r);
    sn__drain_fini(r);
    sn__move_fini(r);
    sn__steal_fini(r);
    sn__loc_fini(r);
    sn__await_fini(r);
    sn__manage_fini(r);
    sn__members_fini(r);
    free(r->errs);
    free(r->types);
    if (r->efd >= 0)
        close(r->efd);
    if (r->epfd >= 0)
        close(r->epfd);
    pthread_mutex_destroy(&r->io_mu);
    free(r);
    *self_p = NULL;
}

void sn_relay_stats(sn_relay_t *r, sn_relay_stats_t *out)
{
    out->frames_in = atomic_load(&r->frames_in);
    out->frames_out = atomic_load(&r->frames_out);
    out->msgs_in = atomic_load(&r->msgs_in);
    out->msgs_out = atomic_load(&r->msgs_out);
    out->bad_frames = atomic_load(&r->bad_frames);
    out->bounced = atomic_load(&r->bounced);
    out->refused = atomic_load_explicit(&r->refused, memory_order_relaxed);
    out->steals_in = atomic_load_explicit(&r->steals_in, memory_order_relaxed);
    out->steals_out = atomic_load_explicit(&r->steals_out, memory_order_relaxed);
    /* drained first: the difference is never below what was queued then */
    uint64_t drained = atomic_load_explicit(&r->drained, memory_order_relaxed);
    uint64_t enqueued = atomic_load_explicit(&r->enqueued, memory_order_relaxed);
    out->queued = enqueued > drained ? enqueued - drained : 0;
}

size_t sn_relay_peer_stats(sn_relay_t *r, sn_relay_peer_stats_t *out, size_t max)
{
    /* acquire: pairs with the release that published the slots */
    size_t n = 0;
    SN__FOR_PEERS(r, p)
    {
        if (n++ >= max)
            continue;
        out[n - 1] = (sn_relay_peer_stats_t){
            .node = atomic_load_explicit(&p->node, memory_order_relaxed),
            .up = !atomic_load_explicit(&p->down, memory_order_relaxed),
            .msgs_in = atomic_load_explicit(&p->m_msgs_in, memory_order_relaxed),
            .msgs_out = atomic_load_explicit(&p->m_msgs_out, memory_order_relaxed),
            .steals_in = atomic_load_explicit(&p->m_steals_in, memory_order_relaxed),
            .steals_out = atomic_load_explicit(&p->m_steals_out, memory_order_relaxed),
            .rtt_ns = atomic_load_explicit(&p->m_rtt_ns, memory_order_relaxed),
        };
    }
    return n;
}

void sn_relay_delivery_hist(sn_relay_t *r, uint64_t *counts, uint64_t *sum_ns)
{
    sn__hist_read(&r->delivery, counts, sum_ns);
}

const char *sn_relay_endpoint(sn_relay_t *r)
{
    return r->endpoint;
}

int sn_relay_out(sn_relay_t *r, char *why, size_t len)
{
    if (!r || !atomic_load_explicit(&r->out, memory_order_acquire)) /* acquire: out_reason is written */
        return 0;
    snprintf(why, len, "%s", r->out_reason);
    return 1;
}

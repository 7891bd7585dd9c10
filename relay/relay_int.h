/* relay_int.h - what every file of relay/ shares: the send items, the
 * peer slot, the relay's state, logging, the member table's lookups and
 * the I/O loop. Each module's own interface is its header (locate.h,
 * steal.h, members.h, manage.h, awaited.h, watch.h, udp.h, peer.h), which
 * only the files that call it include. Nothing outside relay/ (and its
 * tests) includes this.
 *
 * Ownership: the I/O thread (the actor) owns every socket and every field
 * of sn_relay and peer_t except those marked "any thread". More exactly,
 * the holder of io_mu does: the I/O thread holds it always but while it
 * sleeps in epoll_wait, and a worker may take it (try-lock, never waits)
 * to send what it sent in a run itself (route.c: relay_flush; below, "I/O
 * thread" means the holder). Workers only read the peer table through
 * find_peer. The table (peer.c: the slots) is chunks of SN_PEER_CHUNK
 * peers that never move; a chunk's pointer is stored before `npeers`
 * covers it (release), and workers read `npeers` with acquire. A slot is
 * a member's while its `node` is not 0: filled before `node` is stored
 * (release), and emptied only after `node` went back to 0 (a member
 * forgotten, members.c: forget), then reused. A worker holding a slot
 * found before it was emptied reads only atomics (down, first_serial,
 * full) and gives the I/O thread the node id, which it looks up again.
 */
#ifndef SN_RELAY_INT_H
#define SN_RELAY_INT_H

#include <czmq.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "codec.h"
#include "dgram.h"
#include "hist.h"
#include "hops.h"
#include "keys.h"
#include "log.h"
#include "mpsc.h"
#include "relay.h"

/* Full mesh: every member keeps one outbound connection to every other.
 * The member table grows a chunk of SN_PEER_CHUNK slots at a time, up to
 * SN_PEER_CHUNKS chunks (262,144 members: the open-file limit binds long
 * before); a restarted node keeps its slot, a forgotten one frees it. */
#define SN_PEER_CHUNK 64
#define SN_PEER_CHUNKS 4096
_Static_assert(SN_PEER_CHUNK *SN_PEER_CHUNKS == SN_WIRE_MEMBERS_MAX, "a member list holds what the table holds");
#define SN_CLUSTER_MAX 64 /* bytes of a cluster name, with the NUL */

enum { ITEM_SEND, ITEM_REPLY, ITEM_MOVE };

/* What workers hand the I/O thread: a send (small: one per message), or a
 * reply to a client, which carries the client's routing id. */
typedef struct item {
    sn__mpsc_node_t link;
    int kind;
    uint32_t dest;  /* ITEM_SEND: the peer it goes to (home node, or where it moved) */
    bool diverted;  /* ITEM_SEND: a sender here, a process settling here (sn__migrate_diverted) */
    bool forwarded; /* ITEM_SEND: passing through (a message or marker that came from
                     * another node): it follows the forwarding table, never the
                     * location cache (locate.c) */
    /* ITEM_SEND held by a location entry (locate.c: hold_passing): the
     * member (node, run) whose frame brought it, whose acknowledgements
     * stop short of that frame until it goes on (peer_t.nheld; node 0:
     * none) */
    uint32_t ack_node;
    uint64_t ack_inc;
    sn_wire_send_t s; /* ITEM_SEND */
} item_t;

typedef struct reply_item {
    item_t base; /* kind ITEM_REPLY */
    sn_wire_reply_t rep;
    unsigned char ident[256];
    size_t ident_len;
} reply_item_t;

/* How a move asked by PID ended (move.c): error 0 and the node it lives
 * on now, or an error and why (a text valid during the call). */
typedef void (*sn__move_done_fn)(void *arg, int error, uint32_t node, const char *why);

typedef struct move_item {
    item_t base; /* kind ITEM_MOVE: sn_migrate from any thread (route.c starts it) */
    sn_pid_t pid;
    uint32_t node;
    int timeout_ms;
    sn__move_done_fn done;
    void *arg;
} move_item_t;

/* An encoded batch kept until the peer acknowledges it. `refs`: the
 * buffer is shared with libzmq, which sends it without a copy (peer.c:
 * send_shared); each holder drops its reference with sn__relay_drop_buf,
 * and the last frees it. NULL: the buffer is only ours (free it). */
typedef struct sent {
    void *buf;
    size_t len;
    uint64_t seq;
    _Atomic uint32_t *refs;
} sent_t;

/* Frees buf, or drops our reference to it when libzmq shares it (refs). */
void sn__relay_drop_buf(void *buf, _Atomic uint32_t *refs);

/* Processes here held by backpressure until a backlog has room (peer.c:
 * sn__relay_hold_sender, sn__relay_let_go); `last`: the one held last,
 * not asked again for each of its sends. I/O thread. */
typedef struct waiters {
    sn_pid_t *pids;
    size_t n, cap;
    sn_pid_t last;
} waiters_t;

/* Batches of a peer's refused by this node, to tell it (peer.c,
 * sn__relay_send_acks): their sends go back to their senders with error. */
typedef struct refusal {
    uint64_t from, to;
    int error;
} refusal_t;

/* A process here watching one on a peer (a remote monitor): if the peer
 * goes down, leaves or restarts, the watcher gets DOWN (nodedown), unless
 * the peer never confirmed it (sn__relay_bounce_peer). Confirmed: the
 * peer is the target's home, or it said it holds the monitor (WATCHED).
 * Unconfirmed, the request went there only because this node's location
 * cache named it, and the process may well live on elsewhere. */
typedef struct watch {
    sn_pid_t target, watcher;
    uint64_t tag;
    bool confirmed;
} watch_t;

/* A frame or a send on its way back to its senders as an error (peer.c:
 * the bounce queue). */
typedef struct bounce {
    void *buf; /* an encoded frame (sent, or refused by a full pipe), or NULL: */
    size_t len;
    _Atomic uint32_t *refs; /* (buf's, as in sent_t) */
    item_t *it;             /* a send not encoded */
    int error;
    uint32_t at;
} bounce_t;

typedef struct peer {
    /* any thread reads these (workers, metrics); a slot reused keeps them
     * and stores each anew (sn__relay_free_slot) */
    _Atomic uint32_t node;         /* 0 while the slot is free (see the top of this file) */
    _Atomic int down;              /* down or left, sends bounce */
    _Atomic uint64_t first_serial; /* lower serials are dead */
    _Atomic int full;              /* its backlog is full: see backlog_changed (relaxed: it orders nothing) */
    /* for metrics: the I/O thread adds, any thread reads (relaxed: they
     * order nothing); kept across the peer's restarts (counters only grow) */
    _Atomic uint64_t m_msgs_in, m_msgs_out, m_steals_in, m_steals_out;
    _Atomic uint64_t m_rtt_ns; /* the last direct probe's round trip */
    uint32_t slot;             /* its index in the table (sn__relay_peer): fixed */
    /* Everything from here (down_ns, the first field) is the I/O
     * thread's, zeroed when the slot is emptied (sn__relay_free_slot). */
    uint64_t down_ns; /* when it went down or left (members.c: forget) */
    int state;        /* SN_MEMBER_UP, _DOWN or _LEFT (suspect is derived) */
    char endpoint[SN_WIRE_ENDPOINT_MAX];
    char public_key[41]; /* its CurveZMQ key ("" when insecure) */
    zsock_t *dealer;     /* NULL until the first send to it (sn__relay_try_send) */
    zsock_t *closes;     /* the dealer's closed connections (relay.c, peer_closed; NULL: none) */
    bool dial;           /* endpoint and key known and usable: a dealer may be made */
    bool tell_load;      /* new here: it gets our row, we have work to give (members.c: tell_load) */
    uint64_t last_heard_ns;
    /* outbound: the batch being filled, a frame the socket refused (full
     * pipe; a frame over max_frame goes as Parts, pending_off of it sent),
     * and frames sent but not yet acknowledged, oldest first */
    item_t **batch;
    size_t nbatch, cap, bytes;
    void *pending;
    _Atomic uint32_t *pending_refs;
    size_t pending_len, pending_off;
    uint64_t pending_seq, next_seq;
    sent_t *unacked;
    size_t nunacked, capunacked, unacked_bytes;
    uint64_t acked_ns; /* the last ack that freed some, or the first kept since none was (peer.c: probe_gaps) */
    /* The backlog's bound (peer.c, backlog_changed): past max_backlog
     * bytes (batch, pending, unacked) `full` is set and every process here
     * that sends to it waits before its next step (sn__throttle), listed
     * in waiters; at half of it they go on. */
    waiters_t waiters;
    /* control frames (stealing) to send after `pending`, before any newer
     * batch: they keep their place in the order of everything sent to p */
    sent_t *ctl;
    size_t nctl, capctl, ctl_off; /* (ctl_off: the first one's bytes sent, as Parts) */
    /* inbound: the peer's batches to us, to acknowledge on its connection,
     * numbered within the peer's incarnation (its run) */
    uint64_t incarnation, recv_seq, acked_seq;
    uint64_t ack_due_ns;   /* recv_seq > acked_seq: acknowledge by then (0: nothing to acknowledge) */
    uint64_t ack_retry_ns; /* an ack to it failed: not again before this (peer.c: sn__relay_send_acks) */
    /* its batches this node refused (a gap in their numbering: lost on the
     * way, or dropped as bad), to tell it before any ack past them */
    refusal_t *refusals;
    size_t nrefusals, caprefusals;
    /* a big batch of its coming in Parts (inbound.c: part_in): the bytes
     * so far, of rx_total, of batch rx_seq */
    unsigned char *rx_buf;
    size_t rx_len, rx_total;
    uint64_t rx_seq;
    /* its messages held for processes on their way here (steal.c:
     * sn__steal_hold) or settling here (locate.c: hold_passing): while
     * any, acknowledge no frame past held_cap */
    uint32_t nheld;
    uint64_t held_cap;
    sn__log_limit_t bad_log; /* its bad-frame log lines */
    uint64_t out_said_ns;    /* when we last told an earlier run of it that it is out */
    unsigned char ident[256];
    size_t ident_len;
    sn_wire_type_t *types; /* its process types (gossip) */
    size_t ntypes;
    int steal_ok;   /* -1 unknown, 0 types conflict (logged once), 1 a steal partner */
    watch_t *watch; /* the remote monitors on its processes */
    size_t nwatch, capwatch;
    /* its last heartbeat's counters, for `status` */
    sn_wire_stats_t stats;
    bool has_stats;
    /* the I/O loop's lists (I/O thread; see "The I/O loop" in relay.c):
     * its dealer was sent on or woke us (look at its events this turn),
     * it has a batch to send, it has batches of its to acknowledge, the
     * I/O thread sent on it (look at it by later_due_ns: peer.c, look_later) */
    bool io_look, io_batch, io_ack, io_later;
    /* probes over UDP (udp.c): the port it takes them on (0: over TCP),
     * its sealed datagrams taken (replays are dropped), its key raw and
     * the key we share with it, made for public_key dg_key_of ("": not
     * made), a note that probes to it go over TCP, its lost probes' log */
    uint32_t probe_port;
    sn_dgram_window_t dg_window;
    uint8_t dg_pk[SN_DGRAM_KEY], dg_key[SN_DGRAM_KEY];
    char dg_key_of[41];
    bool udp_said;
    sn__log_limit_t udp_log;
    unsigned tcp_answers;  /* its answers in a row over TCP, none over UDP (members.c: udp_answers) */
    uint64_t tcp_since_ns; /* since the first of them */
} peer_t;

/* A seed we are joining through (only until the first Welcome). */
typedef struct seed {
    char endpoint[SN_WIRE_ENDPOINT_MAX];
    zsock_t *dealer;
    zsock_t *monitor; /* its handshake failures (secure clusters) */
} seed_t;

struct sn_relay {
    sn_sched_t *sched;
    uint32_t node;
    uint64_t serial; /* this relay's, unique in the process (from 1): route.c's per-thread state names it */
    uint64_t incarnation, first_serial;
    size_t max_frame;
    size_t max_msg;         /* the largest message that crosses nodes (bytes) */
    size_t max_backlog;     /* what is held for one peer (bytes): see peer_t.full; and by locate.c's flushes */
    bool backlog_fails;     /* past it, a process's send fails (SN_EFULL) instead of its sender waiting */
    size_t held_bytes;      /* sends locate.c holds while routes change (I/O thread) */
    waiters_t held_waiters; /* their senders held while held_bytes is over max_backlog */
    int hb_ms, down_ms;
    void (*on_out)(void *arg); /* the config's: see put_out in members.c */
    void *on_out_arg;
    char cluster[SN_CLUSTER_MAX];
    char advertise[SN_WIRE_ENDPOINT_MAX];
    peer_t *_Atomic chunks[SN_PEER_CHUNKS]; /* the member table (any thread: see the top of this file) */
    _Atomic size_t npeers;                  /* slots in use or freed (free ones have node 0) */
    uint32_t *free_slots;                   /* slots of forgotten members, to reuse (I/O thread) */
    size_t nfree, capfree;
    uint64_t forget_ns;      /* a member down or left this long is forgotten (members.c: forget_old) */
    uint64_t forget_next_ns; /* its next look */
    seed_t *seeds;
    size_t nseeds;
    char seed_list[1024]; /* for error messages (immutable after start) */
    uint64_t found_by_ns; /* the first seed listed starts the cluster if no other seed answers by then */
    uint64_t next_hello_ns, next_tick_ns;
    uint64_t ticked_ns; /* when sn__members_tick last ran */
    uint64_t
        last_hb_ns; /* an early heartbeat when work appears comes EARLY_HB_GAP_NS after it at the soonest (members.c) */
    _Atomic int joined;    /* any thread: 0 joining, 1 member, -1 refused */
    _Atomic int out;       /* any thread: 1 once this run was told it is out of the cluster */
    char out_reason[640];  /* why (written before `out` is set, release) */
    char join_error[1024]; /* set before joined = -1 (release) */
    int join_code;         /* with it: SN_EEXIST (the id is taken) or SN_EREFUSED */
    uint64_t sweep_ns;     /* the I/O loop's next sweep (relay.c: turn) */
    bool pipe_used;        /* we signalled the actor's pipe: look at it next turn */
    bool gossip_due;       /* push the view to a member soon (anti-entropy) */
    uint64_t next_push_ns; /* the next anti-entropy push (members.c) */
    unsigned push_round;
    struct sn_swim *swim;  /* failure detection (swim.c, driven by members.c) */
    uint64_t next_load_ns; /* when this node's load goes to every member again while it has work to give */
    bool said_loaded;      /* the last load it sent said it had work to give */
    uint64_t tell_load_ns; /* when tell_load is due (UINT64_MAX: none) */
    /* A seed's joins not yet told to the members: told together, at most
     * once per JOIN_NEWS_GAP_NS (a storm of joins costs one message per
     * member per batch, not per join). Relay thread only (members.c). */
    uint32_t *join_news;
    size_t njoin_news, capjoin_news;
    uint64_t join_told_ns;
    uint64_t leave_deadline_ns; /* nonzero while leaving: flushing, then Leave */
    sn_wire_type_t *types;      /* our process types, for the view */
    size_t ntypes;
    struct sn_steal *steal; /* steal.c's state (I/O thread) */
    struct sn_moves *moves; /* move.c's state (I/O thread) */
    struct sn_drain *drain; /* drain.c's state (I/O thread; NULL while no drain runs or waits to end) */
    /* draining (drain.c): this node takes no spawn from clients, no stolen
     * work and no push, and says so in its status row. I/O thread only:
     * written by drain.c, read by inbound.c, steal.c and members.c */
    bool draining;
    _Atomic bool draining_seen; /* draining, for other threads (services.c; relaxed: it orders nothing) */
    void (*on_stop)(void *arg); /* the config's: drain --then-stop (drain.c) */
    void *on_stop_arg;
    struct sn_locs *locs;     /* locate.c's state (I/O thread) */
    struct sn_awaits *awaits; /* awaited.c's state (I/O thread; NULL until a record) */
    struct sn_ends *ends;     /* manage.c: ends of killed processes (any thread: its own lock) */
    /* Send ids (sn_wire_send_t.id): the next one a send from here gets
     * (any thread: relay_deliver; relaxed, only uniqueness matters), and
     * the errors returned to senders here, by id (I/O thread; relay.c,
     * error_repeat; allocated at the first) */
    alignas(64) _Atomic uint64_t next_send_id; /* (a line of its own: workers take one per send) */
    alignas(64) struct err_slot *errs;
    uint64_t errors_repeated; /* repeats not returned (I/O thread) */
    /* one bit per PID hash: this node sent something over the network to
     * a process with that hash (never cleared). A process that arrives
     * here with its bit clear had nothing on its way from here, so it
     * settles without a flush (locate.c). I/O thread. */
    uint64_t *sent_to;
    /* the CurveZMQ key (Z85) the ROUTER frame being handled came with, or
     * NULL (insecure, or not a ROUTER frame): a member's frames must come
     * with that member's key (I/O thread, set around each inbound_frame) */
    const char *in_key;
    /* the member whose outbound connection (DEALER) the frame being
     * handled came on, or NULL (the ROUTER, a seed's DEALER, a datagram):
     * that connection's CurveZMQ handshake proved the member's key, so
     * only that member speaks on it (inbound.c: on_dialled; hostile.sh
     * case 9). I/O thread, set around each read of a member's DEALER. */
    const peer_t *in_dialled;
    /* the sequence number of the Sends frame being handed in, if its
     * sender keeps it until acknowledged (0: none; inbound.c: sends_in) */
    uint64_t in_seq;
    _Atomic uint64_t forwarded, redirects;  /* any thread reads */
    _Atomic int want_work;                  /* any thread: a worker found nothing locally */
    _Atomic int load_news;                  /* any thread: work piled up after a heartbeat said there was none */
    _Atomic uint64_t steals_in, steals_out; /* any thread reads */
    bool no_steal;                          /* stopped (shutting down) */
    pthread_mutex_t io_mu;                  /* see the top of this file */
    bool io_alive;                          /* under io_mu: the I/O thread runs its loop */
    /* the bounce queue (peer.c), held by the holder of io_mu: entries
     * [bq_head, bq_n) wait, oldest first */
    bounce_t *bq;
    size_t bq_head, bq_n, bq_cap;
    /* hop tracing (hops.h): SN_HOP_TRACE was set when this relay started;
     * when the frame being handled was read (I/O thread) */
    bool hop_trace;
    uint64_t hop_recv_ns;
    /* The outbound queue: producers (any thread) write this line (outq's
     * head, `signaled`, `enqueued`); the consumer (the holder of io_mu)
     * keeps its position (outq_cur: sn__mpsc_pop_at) and count on a line
     * of its own, and writes outq.tail back once per drain (route.c). */
    alignas(64) sn__mpsc_t outq;
    int efd;
    _Atomic int signaled;
    /* items pushed on outq (any thread, relaxed: on the line `signaled`
     * already takes every push to) and popped (I/O thread): the queue's
     * depth for metrics, a display figure */
    _Atomic uint64_t enqueued;
    alignas(64) _Atomic uint64_t drained;
    sn__mpsc_node_t *outq_cur;
    unsigned drain_depth;            /* (a drain inside a drain shares outq_cur) */
    alignas(64) sn__hist_t delivery; /* cross-node delivery times (I/O thread writes; relay.h) */
    zsock_t *router;
    zsock_t *router_monitor;       /* refused connections (secure clusters) */
    sn__log_limit_t refuse_log[4]; /* per SN_KEYS_* kind */
    zcert_t *cert;                 /* this node's certificate; NULL: insecure */
    sn_keys_zap_t *zap;            /* the ZAP handler: the authorized keys (keys.h) */
    sn_keys_cache_t *keys;         /* the authorized keys as the I/O thread asks them (keys.h) */
    char public_key[41];
    char authorized[1024];
    zactor_t *actor;
    zsock_t *actor_pipe; /* the actor's end, to signal a finished leave */
    /* The I/O loop (I/O thread): one epoll set over every socket's ZMQ_FD
     * and the eventfd, and the peers to look at this turn (indexes into
     * peers, each on a list at most once: the io_* flags) */
    int epfd;
    bool router_look; /* the ROUTER woke us, was sent on or stopped on the budget: look at it */
    uint32_t *io_look, *io_batch, *io_ack, *io_later, *io_scratch; /* (as many as slots: peer.c, grow_lists) */
    size_t nio_look, nio_batch, nio_ack, nio_later, io_cap;
    uint64_t later_due_ns;  /* nio_later > 0: when they are looked at */
    _Atomic int actor_done; /* set (release) as the actor returns */
    char endpoint[SN_WIRE_ENDPOINT_MAX];
    uint64_t start_ns;
    /* SWIM's probes over UDP (udp.c; I/O thread): the socket (-1: none,
     * probes go over TCP) and its address family, the port members are
     * told (0: none), the socket woke us, the number of our last sealed
     * datagram, the sender of the datagram being handled (to answer it),
     * sealed datagrams of non-members opened this second, and the
     * buffers (UDP_BATCH to read into, one to seal into, one to open
     * into) */
    int udp_fd, udp_family;
    uint32_t probe_port;
    bool udp_look;
    bool ack_tcp; /* the probe being handled came over TCP: answer it there (members.c) */
    uint64_t dgram_seq;
    const struct sockaddr *in_from;
    unsigned in_fromlen;
    uint64_t stranger_sec;
    unsigned strangers;
    uint8_t *udp_buf;
    sn__log_limit_t bad_log; /* bad frames from senders that are not peers (one for all) */
    /* refused Hellos (members.c, refused_line): a line a second per sender
     * in a slot, and one for all the others */
    struct {
        uint64_t who; /* a hash of the key (or endpoint) and the node it says it is */
        sn__log_limit_t log;
    } hello_log[4];
    sn__log_limit_t hello_rest;
    sn__log_limit_t route_log; /* sends whose path loops (route.c) */
    _Atomic uint64_t frames_in, frames_out, msgs_in, msgs_out, bad_frames, bounced;
    _Atomic uint64_t refused;     /* connections refused in the CurveZMQ handshake */
    _Atomic uint64_t disconnects; /* inbound connections closed */
    /* keys (Z85) seen speaking for nodes that are not members here, and
     * whether each is a node's (sn_keys_is_node): a small cache, so a
     * flood of such frames does not read the key directory for each */
    struct {
        char key[41];
        uint32_t id; /* the node it spoke for */
        bool node;   /* and whether its certificate names that node */
    } key_seen[8];
    unsigned key_next;
};

/* Logging (log.h): each line names this relay's node once. The level is
 * looked at first, so a line filtered out costs no formatting. */
#define SN__RLOG(r, level, ...)                                                                                        \
    do {                                                                                                               \
        if (sn__log_level() >= (level))                                                                                \
            sn__logf((r)->node, (level), __VA_ARGS__);                                                                 \
    } while (0)
#define SNLOG_ERROR(r, ...) SN__RLOG(r, SN__LOG_ERROR, __VA_ARGS__)
#define SNLOG_WARN(r, ...) SN__RLOG(r, SN__LOG_WARN, __VA_ARGS__)
#define SNLOG_INFO(r, ...) SN__RLOG(r, SN__LOG_INFO, __VA_ARGS__)
#define SNLOG_DEBUG(r, ...) SN__RLOG(r, SN__LOG_DEBUG, __VA_ARGS__)

uint64_t sn__relay_now_ns(void);
/* Slot i of the member table (i < npeers; any thread). */
static inline peer_t *sn__relay_peer(sn_relay_t *r, size_t i)
{
    /* (relaxed: npeers' acquire ordered the chunk's store before) */
    return &atomic_load_explicit(&r->chunks[i / SN_PEER_CHUNK], memory_order_relaxed)[i % SN_PEER_CHUNK];
}

/* The next member's slot from *i on (advancing *i past it), or NULL at n. */
static inline peer_t *sn__relay_next_peer(sn_relay_t *r, size_t *i, size_t n)
{
    while (*i < n) {
        peer_t *p = sn__relay_peer(r, (*i)++);
        if (atomic_load_explicit(&p->node, memory_order_acquire))
            return p;
    }
    return NULL;
}

/* Each member's slot, p, in table order, free slots skipped (any thread;
 * on the I/O thread a slot freed in the body is not seen after). The
 * outer loop runs once: a `break` in the body ends the whole loop. */
#define SN__FOR_PEERS(r, p)                                                                                            \
    for (peer_t *p = NULL, **sn__once = &p; sn__once; sn__once = NULL)                                                 \
        for (size_t sn__i = 0, sn__n = atomic_load_explicit(&(r)->npeers, memory_order_acquire);                       \
             (p = sn__relay_next_peer((r), &sn__i, sn__n)) != NULL;)

/* The peer with this node id, or NULL (any thread). */
static inline peer_t *sn__relay_find_peer(sn_relay_t *r, uint32_t node)
{
    if (!node)
        return NULL;
    /* acquire: pairs with the release that published the slots */
    size_t n = atomic_load_explicit(&r->npeers, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        peer_t *p = sn__relay_peer(r, i);
        /* acquire: the slot was filled before its node was stored */
        if (atomic_load_explicit(&p->node, memory_order_acquire) == node)
            return p;
    }
    return NULL;
}

/* Counts and logs (rate-limited) a dropped frame. */
void sn__relay_bad(sn_relay_t *r, const char *why, uint32_t node);
/* sn_relay_new is sn__relay_create, then the I/O thread, then
 * sn__relay_install; tests/fuzz/fuzz_relay.c uses them without the thread
 * and plays it itself. sn__relay_create makes the relay's state (its
 * ROUTER bound, static peers and seeds dialled; free it with
 * sn_relay_destroy); sn__relay_install makes it the scheduler's relay (the
 * deliver hook, and the remote-work hook if asked); sn__relay_drain is the
 * I/O thread's turn at the outbound queue (true: it stopped on its budget,
 * more may be queued). */
sn_relay_t *sn__relay_create(sn_sched_t *sched, const sn_relay_config_t *cfg, char *err, size_t errlen);
void sn__relay_install(sn_relay_t *r, bool remote_work);
bool sn__relay_drain(sn_relay_t *r);
/* A worker's turn at the outbound queue, with io_mu held (route.c:
 * relay_flush): true if the I/O thread must look soon (poke it). */
bool sn__relay_drain_here(sn_relay_t *r);
/* One frame as it came in, decoded and dispatched: on the ROUTER (ident:
 * the sender's routing id), on a member's DEALER (ident NULL), or on a
 * seed's (from_seed). The I/O loop's read_socket calls it for every frame;
 * tests/fuzz/fuzz_relay.c calls it directly, without sockets. */
void sn__relay_inbound_frame(sn_relay_t *r, const void *data, size_t size, const unsigned char *ident, size_t ident_len,
                             zsock_t *from_seed);
/* The same for a frame decoded already (a datagram's, udp.c): checked and
 * dispatched; f stays the caller's. */
void sn__relay_inbound_decoded(sn_relay_t *r, sn_frame_t *f, const unsigned char *ident, size_t ident_len,
                               zsock_t *from_seed);
/* Forgets p's numbering after a restart and takes on the new incarnation. */
static inline void sn__relay_reset_peer(peer_t *p, uint64_t incarnation)
{
    if (!p->incarnation) { /* (learning its run, not a restart: the numbering goes on) */
        p->incarnation = incarnation;
        return;
    }
    p->incarnation = incarnation;
    p->nrefusals = 0;
    free(p->rx_buf);
    p->rx_buf = NULL;
    p->rx_len = p->rx_total = 0;
    p->recv_seq = p->acked_seq = p->ack_due_ns = p->ack_retry_ns = 0;
    p->nheld = 0; /* (what is held from the old run goes in, or on, without it) */
    p->next_seq = 0;
    p->ident_len = 0;
    p->has_stats = false;
    p->probe_port = 0; /* (the new run's comes with its row or its probes) */
}

/* The last of p's frames this node may acknowledge: all it got, short of
 * the first one holding a message still held here (steal.c). */
static inline uint64_t sn__relay_ackable(const peer_t *p)
{
    return p->nheld && p->held_cap < p->recv_seq ? p->held_cap : p->recv_seq;
}

/* Queues an item for the I/O thread (any thread; the I/O thread too, to
 * put something behind what is queued already). */
void sn__relay_enqueue(sn_relay_t *r, item_t *it);
/* A send item (ITEM_SEND), uninitialised, or NULL: from the payload
 * magazines (sn__small_alloc), one per message sent across nodes. Reply
 * items (reply_item_t, calloc) are bigger and rare. */
static inline item_t *sn__relay_new_item(void)
{
    item_t *it = sn__small_alloc(sizeof(item_t));
    if (it)
        it->ack_node = 0;
    return it;
}
/* A send item (ITEM_SEND) to the peer dest carrying s, its payload taken
 * from *msg (none if msg is NULL; s.payload is not read), diverted and
 * forwarded as item_t says; or NULL, *msg still the caller's. */
static inline item_t *sn__relay_send_item(uint32_t dest, bool diverted, bool forwarded, sn_wire_send_t s,
                                          sn_payload_t **msg)
{
    item_t *it = sn__relay_new_item();
    if (!it)
        return NULL;
    it->kind = ITEM_SEND;
    it->dest = dest;
    it->diverted = diverted;
    it->forwarded = forwarded;
    it->s = s;
    it->s.payload = msg ? sn_take(msg) : NULL;
    return it;
}
static inline void sn__relay_free_item(item_t *it)
{
    if (it->kind == ITEM_SEND) {
        sn_payload_destroy(&it->s.payload);
        sn__small_free(it, sizeof *it);
        return;
    }
    if (it->kind == ITEM_MOVE) { /* (never started: the relay stopped) */
        move_item_t *mi = (move_item_t *)it;
        mi->done(mi->arg, SN_ESHUTDOWN, 0, "the node is shutting down");
        free(it);
        return;
    }
    reply_item_t *ri = (reply_item_t *)it;
    free(ri->rep.reason);
    sn_payload_destroy(&ri->rep.result);
    free(it);
}
/* Sends or holds one drained item: the location cache may hold it or
 * change its dest; dest == this node delivers it here. */
void sn__relay_route(sn_relay_t *r, item_t *it);

/* route.c (I/O thread unless said): the scheduler's deliver hook
 * (workers); an error back to the sender of s (here, or on its node); s
 * could not go on from here (to node `at`, if it got that far); drops this
 * node's record of a remote monitor (false: none). */
int sn__relay_deliver(void *arg, sn_pid_t to, sn_pid_t from, uint64_t tag, int kind, int error, uint32_t via,
                      sn_payload_t **msg);
void sn__relay_return_error(sn_relay_t *r, sn_wire_send_t *s, sn_pid_t sender, sn_pid_t target, int error);
void sn__relay_bounce_local(sn_relay_t *r, sn_wire_send_t *s, int error, uint32_t at);
bool sn__relay_unwatch(sn_relay_t *r, sn_pid_t target, sn_pid_t watcher, uint64_t tag);
/* Wakes the I/O thread (any thread). */
void sn__relay_poke(sn_relay_t *r);
/* While the I/O thread hands the scheduler a send from another node (s),
 * whatever the scheduler passes on from here is a forward of it (its id;
 * its hops, if it goes to s's target): begin saves the state before
 * (nested: a flush that ends delivers what it held), end restores it. */
typedef struct sn_passing {
    bool on;
    uint32_t hops;
    uint64_t id;
    sn_pid_t to;
} sn_passing_t;
void sn__relay_pass_begin(const sn_wire_send_t *s, sn_passing_t *saved);
void sn__relay_pass_end(const sn_passing_t *saved);

/* dispatch.c (I/O thread): a frame for members.c or steal.c, handed on
 * by kind; false if it is none of theirs. */
bool sn__relay_logic_frame(sn_relay_t *r, peer_t *p, sn_frame_t *f, const unsigned char *ident, size_t ident_len,
                           zsock_t *from_seed);

/* inbound.c (I/O thread): a send for a process here (from: the peer it
 * came from; NULL: from a sender here, or held here by locate.c); what is
 * waiting on a socket, read and dispatched (true: it stopped on its
 * budget, look again). */
void sn__relay_inbound_send(sn_relay_t *r, const peer_t *from, sn_wire_send_t *s);
bool sn__relay_read_socket(sn_relay_t *r, void *sock, bool router, zsock_t *from_seed);

/* relay.c: the I/O loop (the actor's body), what it watches (kind, index
 * in its table), and the seeds' sockets closed once joined. */
enum {
    SN_IO_PIPE,
    SN_IO_EFD,
    SN_IO_ROUTER,
    SN_IO_ROUTER_MON,
    SN_IO_PEER,
    SN_IO_PEER_MON,
    SN_IO_SEED,
    SN_IO_SEED_MON,
    SN_IO_UDP
};
void sn__relay_actor(zsock_t *pipe, void *arg);
/* Is the calling thread r's I/O thread (which then holds io_mu)? */
bool sn__relay_on_io_thread(const sn_relay_t *r);
void sn__relay_io_watch(sn_relay_t *r, zsock_t *s, uint32_t kind, uint32_t i, bool on);
void sn__relay_drop_seeds(sn_relay_t *r);

/* One turn of the I/O loop gives each kind of work (the outbound queue,
 * one socket's frames) this long at most, then goes on to the rest (the
 * probes over UDP, acks, the membership clock) and comes back without
 * sleeping. Counts alone (DRAIN_BUDGET items, INBOUND_BUDGET frames) let
 * one turn run 250-600 ms in a TSan build under a stream (faults.sh), and
 * every probe waiting behind it went unanswered that long: long enough,
 * at 3 nodes, for a busy node to be declared down. A clock read every
 * SN_TURN_CHECK items, or every frame, costs well under 1 %. */
#define SN_TURN_SLICE_NS 2000000u
#define SN_TURN_CHECK 64
/* Is this turn's slice of one kind of work over? *until is its end, 0
 * until the first look, which starts it. */
static inline bool sn__relay_slice_over(uint64_t *until)
{
    uint64_t now = sn__relay_now_ns();
    if (!*until) {
        *until = now + SN_TURN_SLICE_NS;
        return false;
    }
    return now >= *until;
}

/* High-water marks: messages (frames) queued per peer pipe. A frame holds
 * up to BATCH_MAX sends, so 1000 frames bound a pipe at a few million sends;
 * past that the relay holds the batch itself (backpressure). */
#define SN_SNDHWM 1000
#define SN_RCVHWM 1000

/* A counter of the relay's (relaxed: a statistic, it orders nothing). */
static inline void sn__add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* Whether a send's kind is one for a process (message, DOWN, result, ...)
 * rather than one of the relay's own updates (location, GONE): only the
 * former are counted as messages and mark a PID as sent to. */
static inline bool sn__relay_for_process(int kind)
{
    return kind < SN_WIRE_REDIRECT && kind != SN_RELAY_GONE;
}

#endif

/* codec.h - the wire format: schednode's own types <-> protobuf Envelopes
 * (proto/schednode.proto). wire/codec.c is the only file that includes the
 * generated protobuf-c code; everything else uses these types.
 */
#ifndef SN_CODEC_H
#define SN_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schednode/schednode.h"
#include "sn_node.h"

#define SN_WIRE_VERSION 1u
/* Default cap on one frame; larger frames are dropped before decoding. */
#define SN_WIRE_MAX_FRAME (1u << 20)
/* Decoding a frame of n bytes allocates at most SN_WIRE_DECODE_RATIO * n +
 * SN_WIRE_DECODE_SLACK bytes (protobuf-c's structs and ours, malloc's
 * overhead included): a frame that would cost more (rows too small for
 * their number, such as empty rows of a member list) is refused before
 * anything is allocated. Every frame a node or client makes stays under
 * it: a member list costs 13 to 16 times its size, a node's batch of sends
 * 13 (its PIDs' serials take 8 bytes), a status reply of members held down
 * 28 to 36, and the densest shapes the schema allows for real rows (sends
 * of empty payloads between PIDs of one byte) 47 (test_codec:
 * decode_cost_is_bounded). */
#define SN_WIRE_DECODE_RATIO 48u
#define SN_WIRE_DECODE_SLACK ((size_t)256 << 10)
/* The most rows a member list (Members, Welcome) holds: the member table's
 * capacity (relay_int.h); a longer one is refused before decoding. */
#define SN_WIRE_MEMBERS_MAX 262144u
/* The most membership updates a heartbeat carries (relay/swim.h sends 8). */
#define SN_WIRE_UPDATES_MAX 64u

/* What an Envelope carries (its oneof case). */
typedef enum sn_frame_kind {
    SN_FRAME_NONE = 0,
    SN_FRAME_HELLO,
    SN_FRAME_WELCOME,
    SN_FRAME_MEMBERS,
    SN_FRAME_HEARTBEAT,
    SN_FRAME_SENDS,
    SN_FRAME_STEAL_REQUEST,
    SN_FRAME_STEAL_OFFER,
    SN_FRAME_STEAL_ACCEPT,
    SN_FRAME_STEAL_COMMIT,
    SN_FRAME_LOCATION,
    SN_FRAME_REDIRECT,
    SN_FRAME_ERROR,
    SN_FRAME_STATS,
    SN_FRAME_LEAVE,
    SN_FRAME_REQUEST,
    SN_FRAME_REPLY,
    SN_FRAME_ACK,
    SN_FRAME_PART
} sn_frame_kind_t;

/* Short name of a frame kind, for logs ("sends", "hello", ...). */
const char *sn_frame_kind_name(sn_frame_kind_t kind);

/* One event for a process on another node (Send in the schema). `kind` is
 * an sn_event_type_t. */
typedef struct sn_wire_send {
    sn_pid_t to;
    sn_pid_t from;
    uint64_t tag;
    int kind; /* sn_event_type_t, SN_RELAY_* (sn_node.h), or SN_WIRE_* below */
    int error;
    sn_payload_t *payload; /* see each function for who owns it */
    uint32_t hops;         /* nodes that passed it on so far (relay.c bounds it) */
    uint64_t id;           /* the send's id, named by the node it started from (0: none) */
    /* Delivery timing (metrics): encoding, when a worker here handed it to
     * the relay (monotonic ns; 0: not timed); decoding, 1 + the
     * microseconds it waited on its sender before its batch was encoded
     * (0: not timed), to add to the frame's sent_us. */
    uint64_t handed_ns;
    uint32_t waited_us;
} sn_wire_send_t;

/* The relay's location updates (Send.Kind REDIRECT, FLUSH, FLUSHED; see
 * relay/locate.c). They never reach the scheduler. */
enum {
    SN_WIRE_REDIRECT = 110,
    SN_WIRE_FLUSH = 111,
    SN_WIRE_FLUSHED = 112,
    SN_WIRE_WATCHED = 113,
    SN_WIRE_AWAITED = 114 /* relay/awaited.c */
};

/* Client operations (ClientRequest.Op). */
enum {
    SN_OP_STATUS = 0,
    SN_OP_SPAWN = 1,
    SN_OP_SEND = 2,
    SN_OP_CALL = 3,
    SN_OP_PS = 4,
    SN_OP_KILL = 5,
    SN_OP_TYPES = 6,
    SN_OP_MIGRATE = 7,
    SN_OP_DRAIN = 8,
    SN_OP_UNDRAIN = 9
};

/* A client's request to a node. Strings and payload are owned by whoever
 * filled the struct (the frame, after decoding). */
typedef struct sn_wire_request {
    uint64_t id;
    int op;
    char *type, *method;
    sn_payload_t *arg;
    sn_pid_t to;         /* send, kill; ps: only this process (serial 0: all) */
    char *reason;        /* kill (may be NULL when encoding) */
    int force;           /* kill */
    uint32_t node;       /* migrate: where to */
    uint32_t timeout_ms; /* migrate: the wait for it to be idle; drain: the whole drain's (0: the default) */
    int then_stop;       /* drain: the node stops once it has answered */
} sn_wire_request_t;

/* Member states (Member.State). */
enum { SN_MEMBER_UP = 0, SN_MEMBER_SUSPECT = 1, SN_MEMBER_DOWN = 2, SN_MEMBER_LEFT = 3, SN_MEMBER_JOINING = 4 };
#define SN_WIRE_ENDPOINT_MAX 256 /* bytes, with the terminating NUL */

/* Is ep a tcp:// endpoint made only of characters an address can hold? */
bool sn_wire_endpoint_ok(const char *ep);

/* A process type as members advertise it. */
typedef struct sn_wire_type {
    char name[64];
    uint32_t version;
    int migratable;
} sn_wire_type_t;
#define SN_WIRE_TYPES_MAX 64

/* A member of the cluster, as gossiped. */
typedef struct sn_wire_member {
    uint32_t node;
    int state;
    uint64_t incarnation;
    uint64_t first_serial;
    char endpoint[SN_WIRE_ENDPOINT_MAX];
    char public_key[41];   /* Z85 CurveZMQ key, "" when insecure */
    sn_wire_type_t *types; /* decoding: owned by the frame; encoding: borrowed */
    size_t ntypes;
    uint64_t version;      /* raised by the member to refute a suspicion (relay/swim.c) */
    uint32_t probe_port;   /* its probes' UDP port on its endpoint's host (relay/udp.c); 0: over TCP */
    uint32_t suspected_by; /* SUSPECT: whose probe of it failed (swim.h); 0: not said */
} sn_wire_member_t;

/* A SWIM probe (relay/swim.c) riding on a heartbeat: kind 0 none. */
typedef struct sn_wire_probe {
    int kind; /* SN_SWIM_PING, _ACK, _PING_REQ */
    uint64_t seq;
    uint32_t target;
    uint32_t port; /* the sender's probe_port (sn_wire_member_t) */
} sn_wire_probe_t;

/* A process on the move (StealOffer). */
#define SN_WIRE_SLEEPS 8 /* pending sleeps a migrant carries at most (more: refused) */
typedef struct sn_wire_migrant {
    sn_pid_t pid, parent;
    int awaited; /* sn_migrant_t's: 0, 1 (the completion), 2 (a DOWN) */
    int fresh;   /* not stepped yet */
    int idle;    /* waits for any event (sn_migrant_t's) */
    uint64_t await_tag;
    uint32_t await_node; /* sn_migrant_t's */
    char type[64];
    uint32_t type_version;
    sn_payload_t *state; /* decoding: owned by the frame; encoding: borrowed */
    uint32_t moves;      /* this move included */
    int blocked;         /* waits for its sleeps (sn_migrant_t's) */
    size_t nsleeps;      /* its pending sleeps: each one's tag and time left (us) */
    uint64_t sleep_tag[SN_WIRE_SLEEPS], sleep_left_us[SN_WIRE_SLEEPS];
} sn_wire_migrant_t;

/* A node's counters and load, as heartbeats carry them and `status` shows
 * them (one row per node). */
typedef struct sn_wire_stats {
    uint32_t node, workers, idle_workers;
    int state; /* SN_MEMBER_* as the answering node sees it */
    char endpoint[SN_WIRE_ENDPOINT_MAX];
    uint64_t live, ready, idle, blocked;
    uint64_t completed;   /* processes that finished on the node */
    uint64_t forwarded;   /* messages it passed on to where their process had moved */
    uint64_t refused;     /* connections refused in the CurveZMQ handshake */
    uint64_t disconnects; /* inbound connections closed */
    uint64_t forwarding;  /* forwarding entries held */
    int draining;         /* the node is draining (relay/drain.c) */
    uint64_t msgs_in, msgs_out, steals_in, steals_out, migrated, bad_frames, uptime_ms;
} sn_wire_stats_t;

/* The answering node's traffic with one peer (status replies). */
typedef struct sn_wire_flow {
    uint32_t peer;
    uint64_t msgs_in, msgs_out, steals_in, steals_out;
} sn_wire_flow_t;

/* A node's answer to a client request. */
typedef struct sn_wire_reply {
    uint64_t id;
    int error;
    char *reason;
    sn_pid_t pid;
    sn_payload_t *result;
    sn_wire_stats_t *rows; /* status: one per node known to the answering node */
    size_t nrows;
    sn_proc_row_t *procs; /* ps: the answering node's processes */
    size_t nprocs;
    uint64_t total;                 /* ps: processes on the node (nprocs may be fewer) */
    uint64_t by_state[SN_PS_COUNT]; /* ps: counted by sn_pstate_t */
    sn_wire_type_t *types;          /* types: the node's process types */
    size_t ntypes;
    uint32_t node;     /* ps, kill, types: the answering node */
    uint32_t moved_to; /* ps of one PID, kill: it moved from the answering node to this one */
    int started;       /* call: started as pid, the result comes in a later reply */
    int ended;         /* ps of one PID (noproc): it was killed here and ended, with end_error and result */
    int end_error;
    sn_wire_flow_t *flows; /* status: the answering node's traffic with each peer */
    size_t nflows;
    char *report;  /* drain: what moved, ended and is left, one line each (NULL: none) */
    uint64_t left; /* drain: processes still on the node at the end */
} sn_wire_reply_t;

/* A decoded frame. Decoding allocates; sn_frame_clear frees. */
typedef struct sn_frame {
    uint32_t version;
    uint32_t node;
    uint64_t incarnation;
    sn_frame_kind_t kind;
    sn_wire_send_t *sends; /* SN_FRAME_SENDS: owned by the frame */
    size_t nsends;
    uint64_t seq; /* SN_FRAME_SENDS: batch number; SN_FRAME_ACK: acknowledged up to; SN_FRAME_PART: its batch's */
    /* SN_FRAME_ACK: batches refused_from..refused_to not taken (0: none), and why */
    uint64_t refused_from, refused_to;
    int refused_error;
    /* SN_FRAME_PART: a slice of a big frame: its bytes (owned by the
     * frame), where they go, and the whole frame's length */
    void *part;
    size_t part_len;
    uint64_t part_offset, part_total;
    uint64_t to_incarnation;   /* SN_FRAME_SENDS: the receiver's run it was meant for (0: any) */
    uint64_t sent_us;          /* SN_FRAME_SENDS: the sender's realtime clock at encoding, us (0: not timed) */
    sn_wire_request_t request; /* SN_FRAME_REQUEST */
    sn_wire_reply_t reply;     /* SN_FRAME_REPLY */
    /* SN_FRAME_HELLO */
    char *endpoint, *cluster;
    uint64_t first_serial;
    char public_key[41];
    /* SN_FRAME_WELCOME, SN_FRAME_MEMBERS */
    sn_wire_member_t *members;
    size_t nmembers;
    /* SN_FRAME_HEARTBEAT (its piggybacked membership updates are in members) */
    sn_wire_stats_t stats;
    int has_stats;
    sn_wire_probe_t probe;
    /* SN_FRAME_ERROR (a refusal), SN_FRAME_LEAVE */
    int code;
    char *reason;
    /* stealing: the handover id; a request's max and the thief's Ready
     * count; an offer's migrants; an accept's or commit's PIDs; a commit's
     * forwarded events are in sends (steal_more: more of them follow, in
     * the next commit frame of this id) */
    uint64_t steal_id;
    bool steal_more;
    uint32_t steal_max, steal_ready;
    sn_wire_migrant_t *migrants;
    size_t nmigrants;
    sn_pid_t *pids;
    size_t npids;
} sn_frame_t;

/* Encodes a batch of sends from node/incarnation into one frame, numbered
 * `seq` (0: not acknowledged, e.g. a lone error return). The sends'
 * payloads are read, not taken. On success *buf (caller frees with free())
 * and *len hold the frame. Returns 0, SN_EINVAL (no sends, a bad kind) or
 * SN_ENOMEM. */
int sn_codec_encode_sends(uint32_t node, uint64_t incarnation, uint64_t seq, const sn_wire_send_t *sends, size_t n,
                          void **buf, size_t *len);
/* The same, for the receiver's run to_incarnation only (see the schema). */
int sn_codec_encode_sends_to(uint32_t node, uint64_t incarnation, uint64_t seq, uint64_t to_incarnation,
                             const sn_wire_send_t *sends, size_t n, void **buf, size_t *len);

/* Encodes a heartbeat (stats may be NULL), a client request (node 0) or a
 * reply. Same conventions as sn_codec_encode_sends. */
int sn_codec_encode_heartbeat(uint32_t node, uint64_t incarnation, const sn_wire_stats_t *stats, const char *cluster,
                              void **buf, size_t *len);
/* A heartbeat carrying a SWIM probe (probe may be NULL) and piggybacked
 * membership updates (n may be 0). */
int sn_codec_encode_probe(uint32_t node, uint64_t incarnation, const sn_wire_probe_t *probe,
                          const sn_wire_stats_t *stats, const char *cluster, const sn_wire_member_t *updates, size_t n,
                          void **buf, size_t *len);
/* Membership: a joining node's Hello to a seed; the seed's Welcome, or a
 * gossiped Members view (welcome = 0); a refusal (Error with code and
 * reason); a graceful Leave. */
int sn_codec_encode_hello(uint32_t node, uint64_t incarnation, const char *endpoint, const char *cluster,
                          uint64_t first_serial, const char *public_key, uint32_t probe_port,
                          const sn_wire_type_t *types, size_t ntypes, void **buf, size_t *len);
int sn_codec_encode_members(uint32_t node, uint64_t incarnation, int welcome, const sn_wire_member_t *members, size_t n,
                            void **buf, size_t *len);
int sn_codec_encode_refusal(uint32_t node, uint64_t incarnation, int code, const char *reason, void **buf, size_t *len);
int sn_codec_encode_leave(uint32_t node, uint64_t incarnation, const char *reason, void **buf, size_t *len);
/* Stealing: request, offer, accept, commit (forwarded events in sends; a
 * commit of no PIDs aborts the handover). */
int sn_codec_encode_steal_request(uint32_t node, uint64_t incarnation, uint64_t id, uint32_t max, uint32_t ready,
                                  void **buf, size_t *len);
int sn_codec_encode_steal_offer(uint32_t node, uint64_t incarnation, uint64_t id, const sn_wire_migrant_t *m, size_t n,
                                void **buf, size_t *len);
int sn_codec_encode_steal_accept(uint32_t node, uint64_t incarnation, uint64_t id, const sn_pid_t *pids, size_t n,
                                 void **buf, size_t *len);
int sn_codec_encode_steal_commit(uint32_t node, uint64_t incarnation, uint64_t id, const sn_pid_t *pids, size_t n,
                                 const sn_wire_send_t *sends, size_t nsends, bool more, void **buf, size_t *len);
/* An Ack of every batch up to seq; with refused_from > 0, batches
 * refused_from..refused_to were not taken (their sends go back with
 * error). */
int sn_codec_encode_ack(uint32_t node, uint64_t incarnation, uint64_t seq, uint64_t refused_from, uint64_t refused_to,
                        int error, void **buf, size_t *len);
/* A slice of a big encoded frame (batch seq, total bytes): data[0..n) at
 * offset. */
int sn_codec_encode_part(uint32_t node, uint64_t incarnation, uint64_t seq, uint64_t total, uint64_t offset,
                         const void *data, size_t n, void **buf, size_t *len);
int sn_codec_encode_request(const sn_wire_request_t *req, void **buf, size_t *len);
int sn_codec_encode_reply(uint32_t node, uint64_t incarnation, const sn_wire_reply_t *rep, void **buf, size_t *len);

/* Decodes one frame of at most max_len bytes (0: SN_WIRE_MAX_FRAME). On
 * success returns 0 and fills *out (clear it with sn_frame_clear). Bad input
 * (never asserted on) returns SN_EPROTO with *why naming the reason:
 * "oversize", "undecodable", "a list longer than its kind carries", "costs
 * more to decode than its size allows", "unsupported version", "no body",
 * "no sender node", "bad send". Its cost is bounded by the frame's size
 * (SN_WIRE_DECODE_RATIO): the last two are refused before anything is
 * allocated. */
int sn_codec_decode(const void *buf, size_t len, size_t max_len, sn_frame_t *out, const char **why);

/* The kind of the envelope in buf, read from its fields' tags alone (no
 * allocation, nothing decoded: a cost of its number of fields);
 * SN_FRAME_NONE if it has no body or is not well formed. What decoding
 * would say of it may differ: this only sorts frames before decoding. */
sn_frame_kind_t sn_codec_peek_kind(const void *buf, size_t len);

/* What decoding buf would allocate at most, in bytes, read from its bytes
 * alone (no allocation, a cost of its size); SIZE_MAX if it is malformed
 * or a list in it is longer than its kind carries. For tests and
 * benchmarks: sn_codec_decode checks it against the budget. */
size_t sn_codec_decode_cost(const void *buf, size_t len);

/* Frees what decoding allocated (payloads still in sends included) and
 * zeroes the frame. Safe twice. */
void sn_frame_clear(sn_frame_t *f);

#endif

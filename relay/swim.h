/* swim.h - failure detection and the spreading of membership changes, as
 * SWIM (Das, Gupta, Motivala 2002) with parts of Lifeguard (Dadgar et al.
 * 2018): pure logic, no sockets and no clock of its own, so that the relay
 * (members.c) and the membership simulator (bench/swimsim.c) run the same
 * code, one on ZeroMQ and real time, the other on a fake network and a
 * fake clock.
 *
 * Each period, a member probes one other (a shuffled round robin over the
 * members): PING, answered by ACK. No answer within the probe timeout: k
 * other members are asked to probe it (PING_REQ) and pass its ACK on. No
 * answer by the end of the period: the member is SUSPECT, and it is told
 * so directly (it refutes by raising its version: ALIVE). A suspicion not
 * refuted within the suspicion timeout makes it DEAD. The timeout starts
 * at `suspect_max` and falls toward `suspect_min` as other members report
 * the same suspicion (Lifeguard's independent confirmations: each
 * suspicion names the member whose own probe failed, so that one passed
 * on, or our own heard back, counts once); both grow
 * with log10 of the cluster's size. A member whose own probes go
 * unanswered, whose own ticks run late, or that is suspected doubts itself
 * first (Lifeguard's local health: its timeouts grow), so a starved node,
 * or every node of an overloaded machine, does not accuse the others; a
 * member's age does not matter, so that one that dies right after its
 * join is seen as soon as any other (swim.c, NEW_PERIODS).
 *
 * Changes (a suspicion, a death, a refutation, a join, a leave) ride on
 * the probes and acks (piggybacked, each about 3 log2 N times), and the
 * final ones (dead, left, a refutation) also go to every member at once
 * through io.broadcast: they are rare, and everyone should act on them
 * within one message delay. Steady cost per member per period: one probe
 * and its answer, plus about one probe of it by another.
 *
 * A member's state is ordered by (run, version, state): a newer run (a
 * restart) wins; within a run, a higher version wins; within a version,
 * DEAD > SUSPECT > ALIVE, and LEFT ends the run. Only the member itself
 * raises its version.
 *
 * Ownership: one thread (the relay's I/O thread, or the simulator) calls
 * everything; callbacks are made from inside those calls.
 */
#ifndef SN_SWIM_H
#define SN_SWIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A member's state (the same numbers as the wire's Member.State). */
enum { SN_SWIM_ALIVE = 0, SN_SWIM_SUSPECT = 1, SN_SWIM_DEAD = 2, SN_SWIM_LEFT = 3 };

/* Message kinds (the wire's Heartbeat.probe). */
/* NACK: a member asked to probe another for us (PING_REQ) had no answer
 * either, within NACK_SHARE of our probe timeout (Lifeguard): our own
 * link works, the silence is the target's, not a sign that we are slow. */
enum { SN_SWIM_PING = 1, SN_SWIM_ACK = 2, SN_SWIM_PING_REQ = 3, SN_SWIM_NACK = 4 };

/* One member's state as it spreads. */
typedef struct sn_swim_update {
    uint32_t node;
    int state;
    uint64_t run;     /* the member's run (incarnation): a restart makes a larger one */
    uint64_t version; /* raised by the member itself to refute a suspicion */
    uint32_t by;      /* SUSPECT: the member whose probe of it failed, as the suspicion
                       * spreads (0: not said, as in an anti-entropy view): only another
                       * member's own failed probe shortens the timeout (Lifeguard's
                       * independent confirmations), not our suspicion heard back */
} sn_swim_update_t;

/* The default probe period of a cluster of up to ten members (a node's
 * --heartbeat-ms, swimsim's --period); it grows with log10 of the size
 * past ten, half as fast as the suspicion timeout: 300 ms at 100 members,
 * 400 ms at 1,000. The trade: each node sends and answers about one probe
 * a period, each costing a few thread wake-ups on both ends (three per
 * round trip over UDP, relay/udp.c), so a cluster's idle CPU goes as its
 * size over the period; a dead member is seen down about two periods plus
 * the suspicion timeout after it died. A 100-node cluster on this
 * project's 2-core machine idles at about 6 % of a core and sees a kill -9
 * within about 1.5 s (README, "Joining, failure detection, leaving").
 */
#define SN_SWIM_PERIOD_MS 200

#define SN_SWIM_PIGGYBACK 8 /* updates one message carries at most */

typedef struct sn_swim_msg {
    int kind;        /* SN_SWIM_PING, _ACK, _PING_REQ, _NACK */
    bool reliable;   /* a PING again, when the first got no answer in time: on the reliable
                      * channel if there is one (the relay: TCP; probes go over UDP), so that
                      * a network that drops only datagrams does not make members look dead */
    uint64_t seq;    /* a PING's number, echoed by its ACK */
    uint32_t target; /* PING_REQ: whom to probe; ACK: whose answer it is (a helper passes it on) */
    sn_swim_update_t updates[SN_SWIM_PIGGYBACK];
    size_t nupdates;
} sn_swim_msg_t;

typedef struct sn_swim_io {
    /* send m to member `to` (lost messages are expected; m->reliable: see there) */
    void (*send)(void *arg, uint32_t to, const sn_swim_msg_t *m);
    /* send u to every member at once (may be NULL: piggybacking only) */
    void (*broadcast)(void *arg, const sn_swim_update_t *u);
    /* a member's state changed here (not called for this member itself) */
    void (*changed)(void *arg, uint32_t node, uint64_t run, int state, int was);
    void *arg;
} sn_swim_io_t;

typedef struct sn_swim_config {
    uint64_t period_ns;        /* one probe per period, up to ten members (default SN_SWIM_PERIOD_MS) */
    uint64_t probe_timeout_ns; /* a direct probe's answer, before asking others (default period / 2) */
    uint64_t suspect_min_ns;   /* at log10 N = 1: the suspicion timeout once confirmed (default 500 ms) */
    unsigned suspect_max_mult; /* unconfirmed: this many times the minimum (default 3) */
    unsigned indirect;         /* members asked to probe for us (default 3) */
    unsigned confirmations;    /* independent suspicions that bring the timeout to its minimum (default 3) */
} sn_swim_config_t;

typedef struct sn_swim sn_swim_t;

sn_swim_t *sn_swim_new(uint32_t self, uint64_t run, const sn_swim_config_t *cfg, const sn_swim_io_t *io, uint64_t seed);
void sn_swim_free(sn_swim_t **self_p);

/* An update from elsewhere than a probe: a join, a welcome, a static peer
 * (from 0), or a member's broadcast (from: that member). An unknown member
 * is added (unless dead or departed). */
void sn_swim_apply(sn_swim_t *s, uint32_t from, const sn_swim_update_t *u, uint64_t now);
/* A probe message from member `from`. */
void sn_swim_recv(sn_swim_t *s, uint32_t from, const sn_swim_msg_t *m, uint64_t now);
/* Any frame from member `from` of run `run`: it is running. It answers an
 * outstanding probe of it, and a member we hold suspect or dead is told so
 * (at most once a period), so that it refutes. */
void sn_swim_heard(sn_swim_t *s, uint32_t from, uint64_t run, uint64_t now);
/* The reliable channel's connection to member `node` closed (a process
 * that ends closes its connections): it is suspected now (see swim.c). */
void sn_swim_closed(sn_swim_t *s, uint32_t node, uint64_t now);
/* This node did not run for `late` ns (stopped, starved): the timers that
 * ran meanwhile get that time back. */
void sn_swim_stalled(sn_swim_t *s, uint64_t late);
/* The periodic work: call at sn_swim_next_ns() (or later). */
void sn_swim_tick(sn_swim_t *s, uint64_t now);
/* Forgets node (the relay forgot its row: down or left for long); what
 * others still say of it as dead or left does not bring it back, news of
 * it alive does. */
void sn_swim_forget(sn_swim_t *s, uint32_t node);
uint64_t sn_swim_next_ns(const sn_swim_t *s);

/* Our own version (raised by refutations) and a member's state (-1:
 * unknown). */
uint64_t sn_swim_version(const sn_swim_t *s);
int sn_swim_state(const sn_swim_t *s, uint32_t node, uint64_t *run, uint64_t *version);
size_t sn_swim_members(const sn_swim_t *s); /* not counting this one */
/* Counters for status and the simulator. */
/* The round trip of the last probe answered directly (metrics): true once
 * per answer, with the member and the time (ns). */
bool sn_swim_take_rtt(sn_swim_t *s, uint32_t *node, uint64_t *rtt_ns);
typedef struct sn_swim_stats {
    uint64_t pings, acks, ping_reqs, suspicions, refutations, deaths, sent, broadcasts;
    unsigned health; /* local health: 0 good, higher is worse (probe timeout x (1 + health)) */
} sn_swim_stats_t;
void sn_swim_stats(const sn_swim_t *s, sn_swim_stats_t *out);

#endif

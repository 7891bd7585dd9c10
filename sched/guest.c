/* guest.c - the relay's I/O thread as the scheduler's guest worker: a
 * process that a frame from another node wakes while no worker is awake
 * to take it runs on the I/O thread at once, instead of after a futex
 * wake-up of a parked worker (one thread hand-off fewer per message of a
 * cross-node round trip: schedbench xnode-rtt).
 *
 * How: the relay calls sn__sched_host before it hands a frame to the
 * scheduler and sn__sched_run_guest after. In between, sn__schedule on
 * that thread (sn__guest_keep) keeps the first process woken in the run-
 * next slot of the guest (a sn__worker_t with no thread of its own, which
 * no thief, no migration and no other thread looks at) while no worker is
 * running a process (each is searching or parked). Then
 * sn__sched_run_guest runs it as that worker (worker.c: sn__run_as), and
 * what its runs wake into run-next after it, for at most GUEST_RUNS runs
 * and GUEST_NS; what is left goes to the global queue with a notify, as
 * from any other thread. Its sends go out from that thread inline (the
 * relay's flush hook sees the I/O thread itself: relay/route.c).
 *
 * Invariants:
 * - One thread at a time uses the guest: the relay's I/O thread (one relay
 *   per scheduler), between sn__sched_host and the end of
 *   sn__sched_run_guest. It alone reads and writes the slot (relaxed
 *   atomics), the guest's scratch and its owner-only counters. The slot is
 *   empty outside that window.
 * - A process in the slot is Ready and in no run queue: nobody else can
 *   run, steal or migrate it, so no parked worker needs to hear of it (the
 *   Dekker pair of worker.c is not involved), and nobody ever sees it
 *   half-run: while it runs it is Running, as on a worker.
 * - Shutdown against a run (a store-buffering pair, seq_cst): a run raises
 *   `active`, then reads `stop`; sn__guest_quiesce sets `stop`, then waits
 *   for `active` to be 0. Either the run sees stop and runs nothing (the
 *   process goes to the global queue), or shutdown waits for the run to
 *   end before it force-closes what is left (the release on the way out
 *   pairs with its acquire).
 * - A long step delays the node's I/O by its length. A step cannot be cut
 *   short, but runs take at most 1/GUEST_SHARE of the I/O thread's time
 *   over time (guest_credit): after a long one the workers take everything
 *   until it is paid back (4 ms of quiet after a 1 ms step), so the I/O
 *   thread keeps the time its heartbeats and probes need.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define GUEST_RUNS 4           /* processes run per frame, at most */
#define GUEST_NS 50000         /* and for this long, at most (then the rest goes to the workers) */
#define GUEST_SHARE 4          /* runs take at most 1/GUEST_SHARE of the I/O thread's time, over time */
#define GUEST_CREDIT_NS 200000 /* run time saved up, at most */
#define GUEST_EVENTS 128       /* the step input buffer, as a worker's (it grows) */

typedef struct sn__guest {
    sn__worker_t w; /* first: sched->guest points here */
    _Atomic int active, stop;
    /* the I/O thread's: run time it may still spend (ns; below 0 after a
     * long step) and when that was last topped up (see guest_credit) */
    int64_t credit_ns;
    uint64_t credit_at;
    _Atomic uint64_t runs; /* processes run here (owner-only counter) */
} sn__guest_t;

/* The scheduler whose frame this thread is handing over (sn__sched_host). */
static _Thread_local sn_sched_t *tls_host;

static sn__guest_t *guest_of(sn_sched_t *sched)
{
    return (sn__guest_t *)(void *)sched->guest;
}

int sn__guest_init(sn_sched_t *sched)
{
    size_t size = (sizeof(sn__guest_t) + 63) & ~(size_t)63;
    sn__guest_t *g = aligned_alloc(64, size);
    if (!g)
        return SN_ENOMEM;
    memset(g, 0, size);
    g->w.sched = sched;
    g->w.index = -1;
    g->w.rng = 1;
    g->w.events_cap = GUEST_EVENTS;
    g->w.events = malloc(GUEST_EVENTS * sizeof *g->w.events);
    if (!g->w.events) {
        free(g);
        return SN_ENOMEM;
    }
    atomic_init(&g->w.next, NULL);
    g->credit_ns = GUEST_CREDIT_NS;
    g->credit_at = sn__now_ns();
    sched->guest = &g->w;
    return 0;
}

void sn__guest_fini(sn_sched_t *sched)
{
    sn__guest_t *g = guest_of(sched);
    if (!g)
        return;
    free(g->w.events);
    sn__out_fini(&g->w.out);
    sn__pcache_fini(&g->w);
    free(g);
    sched->guest = NULL;
}

/* Has the I/O thread run time left for a run? A token bucket: runs spend
 * what they take, time tops it up at 1/GUEST_SHARE of its pace, up to
 * GUEST_CREDIT_NS. A long step (or a slow build: sanitizers) overdraws it,
 * and the workers take everything until it is paid back. */
static bool guest_credit(sn__guest_t *g)
{
    if (g->credit_ns > 0)
        return true;
    uint64_t now = sn__now_ns();
    int64_t add = (int64_t)((now - g->credit_at) / GUEST_SHARE);
    g->credit_at = now;
    g->credit_ns = g->credit_ns + add < GUEST_CREDIT_NS ? g->credit_ns + add : GUEST_CREDIT_NS;
    return g->credit_ns > 0;
}

void sn__sched_host(sn_sched_t *sched)
{
    tls_host = sched;
}

bool sn__guest_keep(sn_sched_t *sched, sn__worker_t *w, sn__proc_t *p, bool to_next)
{
    sn__guest_t *g = guest_of(sched);
    if (!to_next || !g)
        return false;
    if (w) { /* a run of the guest woke it: next here, as on a worker */
        sn__proc_t *old = atomic_exchange_explicit(&g->w.next, p, memory_order_relaxed);
        if (old) /* (w is the guest: to the global queue) */
            sn__schedule(sched, old, false);
        return true;
    }
    if (tls_host != sched || atomic_load_explicit(&g->w.next, memory_order_relaxed))
        return false;
    if (!guest_credit(g))
        return false;
    /* Only while no worker runs a process (each is searching or parked):
     * then the frame's process would wait for a futex wake-up, or for a
     * searching worker to see it in the global queue, whose sends then
     * meet this thread at the I/O lock (relay/route.c). (Waiting for all
     * to be parked was too strict: a worker that ran the last message
     * searches for the next one a while, about a round trip's length.)
     * Relaxed: a stale count only makes us keep one a worker would have
     * taken, or queue one we could have run; nothing is lost either way
     * (the process is ours until we run or queue it). */
    if (atomic_load_explicit(&sched->nspinning, memory_order_relaxed) +
            atomic_load_explicit(&sched->nparked, memory_order_relaxed) <
        sched->nworkers)
        return false;
    atomic_store_explicit(&g->w.next, p, memory_order_relaxed);
    return true;
}

void sn__sched_run_guest(sn_sched_t *sched)
{
    tls_host = NULL;
    sn__guest_t *g = guest_of(sched);
    if (!g || !atomic_load_explicit(&g->w.next, memory_order_relaxed))
        return;
    /* seq_cst: the run's half of the pair with sn__guest_quiesce */
    atomic_fetch_add_explicit(&g->active, 1, memory_order_seq_cst);
    bool stopped = atomic_load_explicit(&g->stop, memory_order_seq_cst);
    uint64_t t0 = sn__now_ns(), t = t0;
    sn__proc_t *p;
    for (int runs = 0; (p = atomic_exchange_explicit(&g->w.next, NULL, memory_order_relaxed)); runs++) {
        if (stopped || runs == GUEST_RUNS || t - t0 >= GUEST_NS) {
            sn__schedule(sched, p, false); /* (not the guest now: the global queue, and a notify) */
            break;
        }
        sn__run_as(&g->w, p);
        SN__STAT_ADD(g->runs, 1);
        uint64_t t1 = sn__now_ns();
        g->credit_ns -= (int64_t)(t1 - t);
        t = t1;
    }
    /* A run that returned CONTINUE queued its process globally without a
     * notify (worker.c: the worker that ran it looks there before it
     * parks); we do not look there, so a worker is told. */
    if (sn__gqueue_size(&sched->global) > 0)
        sn__notify(sched);
    /* release: shutdown's acquire sees what the runs did */
    atomic_fetch_sub_explicit(&g->active, 1, memory_order_release);
}

void sn__guest_quiesce(sn_sched_t *sched)
{
    sn__guest_t *g = guest_of(sched);
    if (!g)
        return;
    atomic_store_explicit(&g->stop, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&g->active, memory_order_seq_cst) != 0)
        sched_yield();
}

void sn__guest_stats(sn_sched_t *sched, sn_stats_t *out)
{
    sn__guest_t *g = guest_of(sched);
    if (!g)
        return;
    out->steps += atomic_load_explicit(&g->w.st.steps, memory_order_relaxed);
    out->messages += atomic_load_explicit(&g->w.st.messages, memory_order_relaxed);
    out->spawned += atomic_load_explicit(&g->w.st.spawned, memory_order_relaxed);
    out->completed += atomic_load_explicit(&g->w.st.completed, memory_order_relaxed);
    out->noproc += atomic_load_explicit(&g->w.st.noproc, memory_order_relaxed);
    out->remote_out += atomic_load_explicit(&g->w.st.remote_out, memory_order_relaxed);
}

uint64_t sn__sched_guest_runs(sn_sched_t *sched)
{
    sn__guest_t *g = guest_of(sched);
    return g ? atomic_load_explicit(&g->runs, memory_order_relaxed) : 0;
}

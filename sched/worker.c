/* worker.c - the worker loop: find work, run it, park when there is none.
 *
 * Work finding, in order: the run-next slot, the local deque (LIFO), the
 * global queue (one item plus a batch of up to 16 into the deque), the
 * yield slot (below), half of a random victim's deque or else its yield
 * slot (guarded), a victim's run-next slot (guarded, below), then the
 * relay's remote-work hook.
 * Spinning is adaptive: rounds 0-3 spin tight, 4-15 sched_yield(), then
 * the worker parks.
 *
 * The yield slot: a process that returns CONTINUE goes back into its
 * worker's yield slot, which the worker looks at after its deque and the
 * global queue (so a long job does not starve others, as Tokio's
 * yield_now defers to the back of the local queue), and which a thief
 * takes only once it has seen it there for YIELD_GUARD_NS (the run-next
 * guard, shorter: a spawner that slices its spawns, schedbench fjcreate,
 * must not wait long on a worker busy with its children while the other
 * one is idle). A producer that slices its sends
 * stays on its worker, with what it woke, instead of being picked up from
 * the global queue by whichever worker searched first, with its consumers
 * following it to the other core (schedbench fjthrput and count).
 *
 * The lazy wake: a process woken by an event, queued on the waker's deque,
 * wakes no parked worker at once. The owner will often run it within
 * microseconds (a producer's consumers), and a futex wake, a steal and the
 * messages crossing to the other core cost more than that (a wake per
 * event would wake the other worker every other slice of schedbench
 * fjthrput, which would then run slower on two workers than on one). The
 * owner wakes one once the oldest of it has waited WAKE_AFTER_NS (checked
 * as it picks work), so a real backlog still spreads within that. New
 * processes (spawns) wake a helper at once: a fan-out is work to share
 * (schedbench spawn measures it). A worker awake and searching steals at
 * once; an owner stuck in a long step with work queued is found by the
 * others' timed park (PARK_RECHECK_NS).
 *
 * The steal back-off: a steal pays when the work it takes keeps the thief
 * busy for longer than moving it costs. Short steps that talk to processes
 * left behind on the victim do not: a chameneos member stolen runs one
 * short step on the thief, sends to the mall on the victim and is woken
 * there again, and every such crossing moves its state, its mailbox and
 * the mall's lines between cores (schedbench chameneos measures it: with
 * a steal per crossing, two workers take longer than one). So a thief
 * judges each deque steal once it has run as many picks as it took
 * processes (or ran out of work): if that
 * took less than LOOT_MIN_NS and less than LOOT_PER_PROC_NS a process,
 * thieves leave that victim's deque and yield slot alone for SHUN_MIN_NS,
 * twice as long after each such steal in a row up to SHUN_MAX_NS, and the
 * victim owes no lazy wake meanwhile. A steal that pays ends the doubling;
 * a spawn on the victim ends the back-off at once (a fan-out is work to
 * share). A real backlog of long steps is thus never refused help for
 * more than SHUN_MAX_NS. The run-next guard below is apart from it.
 *
 * The run-next steal guard (as Go's runqsteal leaves runnext alone for a
 * few microseconds, and Tokio's LIFO slot is not stolen): a process woken
 * by a step goes to the waker's run-next slot, where it runs next with the
 * message still in cache. A thief (one that has searched STEAL_NEXT_AFTER
 * rounds) takes it from there only once it has seen the slot full, with
 * the same fill (the owner's `fills` count unchanged), for NEXT_GUARD_NS:
 * the owner is stuck in a long step, which must not hold it. Without the
 * guard, a consumer fed by a producer would be carried off to the other
 * worker each time it is woken, run one short step there, go idle and be
 * woken into the producer's slot again (`schedbench count` measures it),
 * and a pair messaging each other would be split across cores. While it
 * watches a held slot the thief yields rather than parks, so the guard
 * bounds the wait.
 *
 * Parking without lost wakeups (a Dekker pair):
 *   parker:   nspinning--, nparked++ (seq_cst), fence, look at every
 *             queue; sleep only if all are empty.
 *   producer: push the work, fence (seq_cst), read nspinning and nparked;
 *             if nobody is spinning and someone is parked, wake one.
 * Either the parker sees the work or the producer sees the parker. The
 * run-next slot is exempt: only its owner fills it, and the owner drains
 * it before it ever looks elsewhere, so it never parks with it full. But
 * an owner stuck in a long step holds it, so a worker parks for at most
 * PARK_RECHECK_NS while another worker is awake, then searches again (and
 * the guard lets it take the slot); only when all others are parked does
 * it sleep until notified. A deque under the steal back-off is exempt too
 * (work_visible): thieves would not take from it, and the parker sleeps
 * only until the back-off ends (its owner, which owes the lazy wake for
 * what it queues meanwhile, may wake it sooner).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grow.h"
#include "internal.h"

#define BATCH 16      /* extra items moved from the global queue */
#define DRAIN_MAX 128 /* events handed to one step */
#define SPIN_TIGHT 4
#define SPIN_YIELD 16
#define STEAL_NEXT_AFTER 8       /* spin rounds before a thief looks at run-next slots */
#define NEXT_GUARD_NS 100000     /* and it takes one it has seen held this long */
#define YIELD_GUARD_NS 20000     /* the same for a yield slot, looked at in every search */
#define PARK_RECHECK_NS 10000000 /* a parked worker looks again while others run */
#define NEXT_STREAK 32           /* run-next picks in a row before the queues get a turn */
#define GLOBAL_EVERY 61          /* every this many picks, the global queue goes first */
#define WAKE_AFTER_NS 50000      /* the lazy wake: queued work waits this long for its owner */
#define WAKE_CHECK 8             /* the owner reads the clock for it every this many picks */
#define LOOT_MIN_NS 50000        /* the steal back-off: a steal that kept us busy less than this */
#define LOOT_PER_PROC_NS 2000    /* and less than this per process taken did not pay */
#define SHUN_MIN_NS 100000       /* the first back-off from a victim */
#define SHUN_MAX_NS 2000000      /* and the longest (it doubles up to this) */

static _Thread_local sn__worker_t *tls_worker;
static _Thread_local bool tls_running; /* in sn__run: see sn__worker_running */

bool sn__worker_running(void)
{
    return tls_running;
}

/* A run ended: the relay may send what it held back (sn_relay_hooks_t.flush). */
static void run_ended(sn_sched_t *sched)
{
    const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
    if (hk && hk->h.flush)
        hk->h.flush(hk->h.arg);
}

sn__worker_t *sn__self_worker(sn_sched_t *sched)
{
    sn__worker_t *w = tls_worker;
    return w && w->sched == sched ? w : NULL;
}

void sn__notify(sn_sched_t *sched)
{
    /* seq_cst: orders our queue push before the loads below (Dekker) */
    sn__fence(sched);
    if (atomic_load_explicit(&sched->nspinning, memory_order_seq_cst) == 0 &&
        atomic_load_explicit(&sched->nparked, memory_order_seq_cst) > 0) {
        pthread_mutex_lock(&sched->park_mu);
        sched->park_gen++;
        pthread_cond_signal(&sched->park_cv);
        pthread_mutex_unlock(&sched->park_mu);
    }
}

void sn__wake_all(sn_sched_t *sched)
{
    pthread_mutex_lock(&sched->park_mu);
    sched->park_gen++;
    pthread_cond_broadcast(&sched->park_cv);
    pthread_mutex_unlock(&sched->park_mu);
}

/* Appends a Ready process to the global queue. It must never be dropped:
 * on out-of-memory, retry until there is room. The caller notifies. */
static void to_global(sn_sched_t *sched, sn__proc_t *p)
{
    while (sn__gqueue_push(&sched->global, p) != 0)
        sched_yield();
}

/* Work piles up (a process was queued where another waits): tell the
 * relay once, if it asked (its last heartbeat said we had none to give).
 * seq_cst on both sides: the relay arms, then reads the queue sizes; we
 * push, then read the flag; one of the two sees the other. */
static void load_news(sn_sched_t *sched, int64_t queued)
{
    if (queued < 2 || !atomic_load_explicit(&sched->load_watch, memory_order_seq_cst) ||
        !atomic_exchange_explicit(&sched->load_watch, 0, memory_order_seq_cst))
        return;
    const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
    if (hk && hk->h.loaded)
        hk->h.loaded(hk->h.arg);
}

/* The owner filled one of its slots: a relaxed store by the only writer
 * (thieves read the count to tell one process held there from a stream
 * of them: the steal guard, below). */
static void count_fill(_Atomic uint32_t *fills)
{
    atomic_store_explicit(fills, atomic_load_explicit(fills, memory_order_relaxed) + 1, memory_order_relaxed);
}

void sn__schedule(sn_sched_t *sched, sn__proc_t *p, bool to_next)
{
    sn__worker_t *w = sn__self_worker(sched);
    if ((!w || w == sched->guest) && sn__guest_keep(sched, w, p, to_next))
        return; /* the relay's I/O thread runs it itself (guest.c) */
    if (w == sched->guest)
        w = NULL; /* (the guest has no queues of its own: the global queue) */
    if (w) {
        if (to_next) {
            /* Only the owner fills the slot (thieves only empty it), so an
             * empty slot takes a plain release store, no locked
             * instruction: a thief that exchanges it out acquires it. A
             * full one is exchanged (a thief may empty it meanwhile). */
            if (!atomic_load_explicit(&w->next, memory_order_relaxed))
                atomic_store_explicit(&w->next, p, memory_order_release), p = NULL;
            else
                /* acq_rel: a thief that exchanges it out sees the process */
                p = atomic_exchange_explicit(&w->next, p, memory_order_acq_rel);
            count_fill(&w->fills);
            if (!p)
                return;
        }
        if (sn__deque_push(&w->deque, p) == 0) {
            if (!to_next) {
                if (atomic_load_explicit(&w->shun_until, memory_order_relaxed))
                    atomic_store_explicit(&w->shun_until, 0, memory_order_relaxed); /* the back-off ends */
                sn__notify(sched);      /* new work (a spawn): a helper at once */
            } else if (!w->wake_owed) { /* a woken process: the lazy wake (top of this file) */
                w->wake_owed = true;
                w->owed_ns = sn__now_ns();
            }
            load_news(sched, sn__deque_size(&w->deque));
            return;
        }
    }
    to_global(sched, p);
    sn__notify(sched);
    load_news(sched, (int64_t)sn__gqueue_size(&sched->global));
}

static uint64_t rnd(sn__worker_t *w)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return w->rng;
}

static sn__proc_t *from_global(sn__worker_t *w)
{
    void *items[BATCH + 1];
    size_t n = sn__gqueue_pop(&w->sched->global, items, BATCH + 1);
    if (n == 0)
        return NULL;
    for (size_t i = 1; i < n; i++)
        if (sn__deque_push(&w->deque, items[i]) != 0)
            to_global(w->sched, items[i]);
    if (n > 1)
        sn__notify(w->sched);
    return items[0];
}

static _Atomic(sn__proc_t *) *slot_of(sn__worker_t *v, bool yielded)
{
    return yielded ? &v->yielded : &v->next;
}

static _Atomic uint32_t *fills_of(sn__worker_t *v, bool yielded)
{
    return yielded ? &v->yfills : &v->fills;
}

/* Does the watched slot still hold the fill we first saw there? */
static bool watch_holds(sn__worker_t *w)
{
    sn__worker_t *v = w->watch;
    return w->watching && atomic_load_explicit(fills_of(v, w->watch_yielded), memory_order_relaxed) == w->watch_fills &&
           atomic_load_explicit(slot_of(v, w->watch_yielded), memory_order_relaxed);
}

/* The guard: the process in v's run-next slot (or its yield slot) once
 * we have seen it there, the same fill, for NEXT_GUARD_NS; else NULL (and
 * we watch the slot). A slot is only ever emptied by an exchange, so a
 * process leaves it exactly once: to its owner or to one thief. */
static sn__proc_t *steal_next(sn__worker_t *w, sn__worker_t *v, bool yielded)
{
    _Atomic(sn__proc_t *) *slot = slot_of(v, yielded);
    if (!atomic_load_explicit(slot, memory_order_relaxed))
        return NULL;
    uint64_t now = sn__now_ns();
    if (w->watch != v || w->watch_yielded != yielded || !watch_holds(w)) {
        w->watch = v;
        w->watch_yielded = yielded;
        w->watch_fills = atomic_load_explicit(fills_of(v, yielded), memory_order_relaxed);
        w->watching = true;
        w->watch_ns = now;
        return NULL;
    }
    if (now - w->watch_ns < (yielded ? YIELD_GUARD_NS : NEXT_GUARD_NS))
        return NULL;
    w->watching = false;
    /* acq_rel: we see the process as its owner left it (release side: the
     * owner's store or exchange into the slot) */
    return atomic_exchange_explicit(slot, NULL, memory_order_acq_rel);
}

static sn__proc_t *steal(sn__worker_t *w, int spins)
{
    sn_sched_t *sched = w->sched;
    int nw = sched->nworkers;
    if (nw < 2)
        return NULL;
    int start = (int)(rnd(w) % (uint64_t)nw);
    uint64_t now = 0;
    for (int i = 0; i < nw; i++) {
        sn__worker_t *v = &sched->workers[(start + i) % nw];
        if (v == w)
            continue;
        int moved = 0;
        sn__proc_t *p = NULL;
        uint64_t shun = atomic_load_explicit(&v->shun_until, memory_order_relaxed);
        if (shun && !now)
            now = sn__now_ns();
        if (shun && now < shun)
            continue; /* (the back-off: top of this file) */
        if ((p = sn__deque_steal_half_into(&v->deque, &w->deque, &moved))) {
            w->loot_from = v;
            w->loot_n = w->loot_left = (uint32_t)moved;
            w->loot_ns = now ? now : sn__now_ns();
        } else if ((p = steal_next(w, v, true))) { /* its yield slot: a shorter guard */
            moved = 1;
        }
        if (p) {
            SN__STAT_ADD(w->st.steals, 1);
            SN__STAT_ADD(w->st.stolen, (uint64_t)moved);
            return p;
        }
    }
    for (int i = 0; spins >= STEAL_NEXT_AFTER && i < nw; i++) {
        sn__worker_t *v = &sched->workers[(start + i) % nw];
        sn__proc_t *p = v == w ? NULL : steal_next(w, v, false);
        if (p) {
            SN__STAT_ADD(w->st.steals, 1);
            SN__STAT_ADD(w->st.stolen, 1);
            return p;
        }
    }
    return NULL;
}

static sn__proc_t *take_next(sn__worker_t *w)
{
    if (!atomic_load_explicit(&w->next, memory_order_relaxed))
        return NULL;
    return atomic_exchange_explicit(&w->next, NULL, memory_order_acq_rel);
}

/* The lazy wake (top of this file): the wake we owe for work queued on
 * our deque, once the oldest of it has waited WAKE_AFTER_NS. Then the next
 * push starts the clock again, so a backlog that lasts keeps asking for
 * help (sn__notify wakes nobody when a worker is searching already). */
static void pay_wake(sn__worker_t *w)
{
    if (!w->wake_owed || (++w->owed_tick % WAKE_CHECK) != 0)
        return;
    uint64_t now = sn__now_ns();
    if (now - w->owed_ns < WAKE_AFTER_NS || now < atomic_load_explicit(&w->shun_until, memory_order_relaxed))
        return; /* (while thieves back off from us, the wake stays owed) */
    w->wake_owed = false;
    sn__notify(w->sched);
}

/* The steal back-off (top of this file): once we have run as many picks
 * as our last deque steal took processes (or run out of work before), did
 * it pay? If it kept us busy less than LOOT_MIN_NS and less than
 * LOOT_PER_PROC_NS a process, thieves leave that victim alone for a
 * while, twice as long each time in a row; if it paid, the back-off
 * starts again from its shortest. */
static void judge_loot(sn__worker_t *w)
{
    sn__worker_t *v = w->loot_from;
    uint64_t now = sn__now_ns(), took = now - w->loot_ns;
    w->loot_from = NULL;
    w->loot_left = 0;
    uint64_t len = atomic_load_explicit(&v->shun_ns, memory_order_relaxed);
    if (took >= LOOT_MIN_NS || took >= (uint64_t)w->loot_n * LOOT_PER_PROC_NS) {
        if (len)
            atomic_store_explicit(&v->shun_ns, 0, memory_order_relaxed);
        return;
    }
    len = len ? (len * 2 < SHUN_MAX_NS ? len * 2 : SHUN_MAX_NS) : SHUN_MIN_NS;
    atomic_store_explicit(&v->shun_ns, len, memory_order_relaxed);
    atomic_store_explicit(&v->shun_until, now + len, memory_order_relaxed);
}

/* Takes the process in our yield slot, if any. acq_rel: as take_next. */
static sn__proc_t *take_yielded(sn__worker_t *w)
{
    if (!atomic_load_explicit(&w->yielded, memory_order_relaxed))
        return NULL;
    return atomic_exchange_explicit(&w->yielded, NULL, memory_order_acq_rel);
}

/* The hand-off: a process that a step's sends wake (the first one, while
 * the run-next fairness streak lasts) goes to its waker's hand-off, unseen
 * by thieves, and runs next on this worker (find_work). The waker's wake
 * CAS takes it from IDLE (or BLOCKED) straight to RUNNING, under the shard
 * lock, so that its run needs no READY -> RUNNING CAS: one locked
 * instruction less per message in a chain of processes (schedbench
 * threadring, chameneos, pingpong). Invariants: a process in w->handoff is
 * RUNNING and owned by w, as if w ran it (producers that push meanwhile see
 * RUNNING and set SN__WAKE, which go_to_sleep handles as during a step);
 * it leaves the hand-off only to be run by w (sn__run, via w->handed) or
 * made READY by w with a plain release store (no one else writes the state
 * of a RUNNING process but to set SN__WAKE, which READY makes moot: a Ready
 * process drains its queue when it runs) and queued as any woken process
 * (hand_back). */
sn__worker_t *sn__hand_to(sn_sched_t *sched)
{
    sn__worker_t *w = sn__self_worker(sched);
    return w && w != sched->guest && w->handing && !w->handoff && w->streak < NEXT_STREAK ? w : NULL;
}

void sn__hand_over(sn__worker_t *w, sn__proc_t *p)
{
    w->handoff = p;
}

/* A process in the hand-off that will not run next after all: READY, to
 * the run-next slot (release: a thief that takes it sees its state). */
static void hand_back(sn__worker_t *w, sn__proc_t *p)
{
    atomic_store_explicit(&p->state, SN__READY, memory_order_release);
    sn__schedule(w->sched, p, true);
}

void sn__handoff_flush(sn__worker_t *w)
{
    sn__proc_t *p = w->handoff;
    w->handing = false;
    if (p) {
        w->handoff = NULL;
        hand_back(w, p);
    }
}

/* Fairness: two processes messaging each other keep refilling the run-next
 * slot; after NEXT_STREAK such picks the deque and global queue go first,
 * and every GLOBAL_EVERY picks the global queue does, so nothing Ready
 * waits behind a chatty pair. */
static sn__proc_t *find_work(sn__worker_t *w, int spins)
{
    sn__proc_t *p;
    pay_wake(w);
    if (w->loot_from && --w->loot_left == 0)
        judge_loot(w);
    if ((p = w->handoff)) { /* it runs now, as from the run-next slot, if fairness lets it */
        w->handoff = NULL;
        if (w->streak < NEXT_STREAK && (w->picks + 1) % GLOBAL_EVERY != 0) {
            w->picks++;
            w->streak++;
            w->handed = p; /* (RUNNING already: sn__run) */
            return p;
        }
        hand_back(w, p);
    }
    if (++w->picks % GLOBAL_EVERY == 0 && (p = from_global(w)))
        return p;
    if (w->streak < NEXT_STREAK) {
        if ((p = take_next(w))) {
            w->streak++;
            return p;
        }
    }
    w->streak = 0;
    if ((p = sn__deque_pop(&w->deque)))
        return p;
    w->wake_owed = false; /* we ran all we had queued ourselves */
    if ((p = from_global(w)))
        return p;
    if ((p = take_next(w)))
        return p;
    if ((p = take_yielded(w)))
        return p;
    if (w->loot_from)
        judge_loot(w); /* out of work before the count */
    if ((p = steal(w, spins)))
        return p;
    return NULL;
}

/* Work a parker must not sleep past: the global queue, or a deque that
 * thieves may take from. A deque under the steal back-off is left out,
 * and *wake_at (0: none) is when the first such back-off ends: the
 * parker sleeps no longer than that. Counted in, a deque its thief shuns
 * sent that thief round spinning and yielding until the back-off ended
 * (schedbench chameneos, 2 workers: 470,000 sched_yield calls a second). */
static bool work_visible(sn_sched_t *sched, uint64_t *wake_at)
{
    *wake_at = 0;
    if (sn__gqueue_size(&sched->global) > 0)
        return true;
    uint64_t now = 0;
    for (int i = 0; i < sched->nworkers; i++) {
        sn__worker_t *v = &sched->workers[i];
        if (sn__deque_size(&v->deque) == 0)
            continue;
        uint64_t shun = atomic_load_explicit(&v->shun_until, memory_order_relaxed);
        if (shun && !now)
            now = sn__now_ns();
        if (!shun || now >= shun)
            return true;
        if (!*wake_at || shun < *wake_at)
            *wake_at = shun;
    }
    return false;
}

static void park(sn__worker_t *w)
{
    sn_sched_t *sched = w->sched;
    pthread_mutex_lock(&sched->park_mu);
    atomic_fetch_add_explicit(&sched->nparked, 1, memory_order_seq_cst);
    /* seq_cst: our nparked store before our queue loads (Dekker) */
    sn__fence(sched);
    uint64_t shunned_until;
    if (!work_visible(sched, &shunned_until) && !atomic_load_explicit(&sched->stop, memory_order_acquire)) {
        uint64_t gen = sched->park_gen;
        SN__STAT_ADD(w->st.parks, 1);
        /* another worker is awake: it may be stuck in a step with a
         * process in its run-next slot, which nobody would wake us for;
         * or work waits behind a back-off that ends before the recheck */
        bool timed =
            atomic_load_explicit(&sched->nparked, memory_order_seq_cst) < sched->nworkers || shunned_until != 0;
        uint64_t until = sn__now_ns() + PARK_RECHECK_NS;
        if (shunned_until && shunned_until < until)
            until = shunned_until;
        struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
        sched->nuntimed += !timed;
        while (gen == sched->park_gen && !atomic_load_explicit(&sched->stop, memory_order_acquire)) {
            if (!timed)
                pthread_cond_wait(&sched->park_cv, &sched->park_mu);
            else if (pthread_cond_timedwait(&sched->park_cv, &sched->park_mu, &ts) == ETIMEDOUT)
                break;
        }
        sched->nuntimed -= !timed;
    }
    /* Invariant: nobody sleeps untimed while a worker runs, since nobody
     * would wake it for what that worker puts in its run-next slot. A
     * sleeper chooses untimed (under park_mu) only when every worker counts
     * in nparked; but one of them may be leaving (woken or timed out, and
     * waiting for park_mu to decrement nparked). That one reads nuntimed
     * here, under park_mu, after the sleeper's increment; if it then finds
     * work it wakes them all once (sn__worker_main), and they park again
     * timed. One that finds none parks again untimed itself, so an idle
     * scheduler still settles with every worker asleep untimed. */
    w->wake_sleepers = sched->nuntimed > 0;
    atomic_fetch_sub_explicit(&sched->nparked, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&sched->park_mu);
}

static void set_spinning(sn__worker_t *w, bool on)
{
    if (w->spinning == on)
        return;
    w->spinning = on;
    if (on) {
        atomic_fetch_add_explicit(&w->sched->nspinning, 1, memory_order_seq_cst);
    } else if (atomic_fetch_sub_explicit(&w->sched->nspinning, 1, memory_order_seq_cst) == 1) {
        /* The last searcher found work: there may be more, wake a helper. */
        sn__notify(w->sched);
    }
}

void *sn__worker_main(void *arg)
{
    sn__worker_t *w = arg;
    sn_sched_t *sched = w->sched;
    tls_worker = w;
    int spins = 0;
    while (!atomic_load_explicit(&sched->stop, memory_order_acquire)) {
        sn__proc_t *p = find_work(w, spins);
        if (p) {
            set_spinning(w, false);
            spins = 0;
            if (w->wake_sleepers) { /* see park() */
                w->wake_sleepers = false;
                sn__wake_all(sched);
            }
            w->watching = false; /* a later search watches afresh */
            tls_running = true;
            sn__run(w, p);
            tls_running = false;
            run_ended(sched);
            continue;
        }
        set_spinning(w, true);
        spins++;
        if (spins == 1) { /* at once: a remote steal takes a round trip, start it while we spin */
            const sn__hooks_t *hk = atomic_load_explicit(&sched->relay, memory_order_acquire);
            if (hk && hk->h.remote_work && hk->h.remote_work(hk->h.arg, sched) > 0)
                continue;
        }
        if (spins < SPIN_TIGHT) {
            for (int i = 0; i < 32; i++)
                sn__cpu_relax();
        } else if (spins < SPIN_YIELD || watch_holds(w)) {
            SN__STAT_ADD(w->st.yields, 1);
            sched_yield(); /* (a watched run-next slot: the guard bounds this) */
        } else {
            /* leave the searchers first, so producers know to wake us */
            w->spinning = false;
            atomic_fetch_sub_explicit(&sched->nspinning, 1, memory_order_seq_cst);
            park(w);
            spins = 0;
        }
    }
    set_spinning(w, false);
    if (w->handoff) { /* (stopping: READY again, as in a queue; the scheduler frees it) */
        atomic_store_explicit(&w->handoff->state, SN__READY, memory_order_release);
        w->handoff = NULL;
    }
    tls_worker = NULL;
    return NULL;
}

void sn__run_as(sn__worker_t *w, sn__proc_t *p)
{
    /* For the run this thread is w (sn__self_worker, sn__worker_running),
     * and it ends as a worker's run does (the relay's flush). */
    sn__worker_t *was = tls_worker;
    tls_worker = w;
    tls_running = true;
    sn__run(w, p);
    tls_running = false;
    run_ended(w->sched);
    tls_worker = was;
}

/* ---------------------------------------------------------- running one */

/* Is an event that wakes a process sleeping on `target` queued (or being
 * queued: nodes still in flight count as yes; the caller comes round
 * again)? For Blocked, the count of queued wakeup events answers in O(1)
 * however many messages wait in front of them. */
static bool wake_pending(sn__proc_t *p, uint32_t target)
{
    if (target == SN__IDLE)
        return sn__mpsc_maybe_nonempty(&p->q);
    /* seq_cst: the consumer's load in the wake protocol (below) */
    return atomic_load_explicit(&p->wakeups, memory_order_seq_cst) > 0;
}

/* After a step that returned IDLE or WAIT: sleep, unless an event that
 * would wake the process is already queued.
 *
 * The race with producers is a store-buffering pair, so every access in
 * it is seq_cst: a producer pushes (an RMW on the queue head), then loads
 * the state; we write the state (a CAS, or an exchange to clear SN__WAKE),
 * then load the queue (or, when Blocked, the count of wakeup events, which
 * a producer raises before it pushes). Either we see its event, or it sees our write: if
 * it sees RUNNING it sets SN__WAKE, which fails our CAS and sends us round
 * again; if it sees the sleep state it wakes the process. Clearing the
 * flag with a plain store would break this (a producer could read the
 * stale flag while our loads miss its push). */
static void go_to_sleep(sn__worker_t *w, sn__proc_t *p, uint32_t target)
{
    for (;;) {
        if (wake_pending(p, target)) {
            atomic_store_explicit(&p->state, SN__READY, memory_order_seq_cst);
            sn__schedule(w->sched, p, true);
            return;
        }
        uint32_t expect = SN__RUNNING;
        /* also release: whoever wakes the process sees what this step wrote */
        if (atomic_compare_exchange_strong_explicit(&p->state, &expect, target, memory_order_seq_cst,
                                                    memory_order_seq_cst)) {
            if (target == SN__BLOCKED)
                atomic_fetch_add_explicit(&w->sched->nblocked, 1, memory_order_relaxed);
            return;
        }
        /* SN__WAKE was set: clear it with an RMW and look again */
        atomic_exchange_explicit(&p->state, SN__RUNNING, memory_order_seq_cst);
    }
}

/* Is there something for a step to consume now? For Idle a linked event;
 * for Blocked a wakeup event, linked or about to be (drain waits for it). */
static bool step_has_input(sn__proc_t *p, uint32_t target)
{
    if (target == SN__IDLE)
        return sn__mpsc_has_linked(&p->q);
    return atomic_load_explicit(&p->wakeups, memory_order_seq_cst) > 0;
}

/* Moves events into the step's buffer: up to DRAIN_MAX, and past that
 * until the event the process waits for is in (a Blocked process is not
 * stepped with messages alone). `need` is what the caller knows is queued
 * or being queued: any event for an Idle process (linked), a wakeup for a
 * Blocked one (counted in p->wakeups before its producer pushes). A pop can
 * come back empty while a producer is between its exchange and its link,
 * or has counted a wakeup and not pushed it yet: we wait those few
 * instructions out rather than step without it. */
static bool grow_events(sn__worker_t *w)
{
    sn_event_t *e = sn__grow(w->events, &w->events_cap, w->events_cap, sizeof *e, 128, 0);
    if (!e)
        return false;
    w->events = e;
    return true;
}

static size_t drain(sn__worker_t *w, sn__proc_t *p, uint32_t need)
{
    size_t n = 0;
    bool have = need == 0;
    unsigned spins = 0;
    while (n < DRAIN_MAX || !have) {
        if (n == w->events_cap && !grow_events(w))
            break; /* out of memory: step with what we have */
        sn__mpsc_node_t *node = sn__mpsc_pop(&p->q);
        if (!node) {
            bool coming = need == SN__BLOCKED ? atomic_load_explicit(&p->wakeups, memory_order_seq_cst) > 0
                                              : sn__mpsc_maybe_nonempty(&p->q);
            if (have || !coming)
                break;
            if (++spins < 64)
                sn__cpu_relax();
            else
                sched_yield();
            continue;
        }
        sn__evnode_t *e = (sn__evnode_t *)node;
        w->events[n] = (sn_event_t){(sn_event_type_t)e->type, e->error, e->tag, e->from, sn__evnode_data(e)};
        if (e->type == SN_EV_YIELD_COMPLETE && e->counted && p->pending > 0)
            p->pending--;
        if (!sn__message_class(e->type))
            atomic_fetch_sub_explicit(&p->wakeups, 1, memory_order_relaxed);
        if (need == SN__IDLE || !sn__message_class(e->type))
            have = true;
        if (e->bare)
            sn__evnode_free_bare(e);
        n++;
    }
    return n;
}

/* One step call; while metrics ask, one in SN_STEP_SAMPLE is timed into
 * the worker's histogram (two clock reads and a few relaxed stores), the
 * others cost a counter. */
static void step(sn__worker_t *w, sn__proc_t *p, size_t n, sn_step_out_t *out)
{
    if (!atomic_load_explicit(&w->sched->time_steps, memory_order_relaxed) ||
        (w->step_tick++ & (SN_STEP_SAMPLE - 1)) != 0) {
        p->type->step(p, p->user, w->events, n, out);
    } else {
        uint64_t t0 = sn__now_ns();
        p->type->step(p, p->user, w->events, n, out);
        sn__hist_add(&w->step_hist, sn__now_ns() - t0);
    }
    SN__STAT_ADD(w->st.steps, 1);
}

/* A process that returned CONTINUE (Ready again) goes to our yield slot
 * (top of this file): it runs here after what we and the global queue
 * hold. A process already there goes to the back of the global queue: two
 * long jobs take turns with everything else. No parked worker is woken
 * for it (as Go's Gosched wakes no P): we are awake and will run it.
 * Waking one for each slice sent a producer that slices its sends to the
 * other worker at every slice, away from its consumers and the messages
 * in its cache, with a futex wake each time. */
static void yield_back(sn__worker_t *w, sn__proc_t *p)
{
    sn_sched_t *sched = w->sched;
    /* (a step that spawned: its children went out to the workers at once,
     * sn__schedule, so it goes where a worker is free first; keeping it
     * here made a spawner slicing its spawns, schedbench fjcreate, wait
     * for this worker's share of its children: 1.6x slower) */
    if (w == sched->guest || w->fanout) { /* (no yield slot on the guest: guest.c tells a worker) */
        to_global(sched, p);
        return;
    }
    p = atomic_exchange_explicit(&w->yielded, p, memory_order_acq_rel);
    count_fill(&w->yfills);
    if (p)
        to_global(sched, p);
}

/* Backpressure: the relay asked p to wait (sn__throttle) before its
 * next step. It is left Ready and in no queue (a waker sees Ready and
 * does nothing; its events wait in its queue) until sn__unthrottle
 * schedules it. Ready is stored before HELD: the unthrottler schedules
 * only a HELD process, and must find it Ready. If the ask was withdrawn
 * meanwhile, it runs now. Returns true if it was held. Guarded by
 * test_relay_edges backpressure. */
static bool hold(sn__worker_t *w, sn__proc_t *p)
{
    if (atomic_load_explicit(&w->sched->shutting_down, memory_order_acquire)) {
        atomic_fetch_and_explicit(&p->killed, ~SN__THR_BITS, memory_order_relaxed);
        return false;
    }
    atomic_store_explicit(&p->state, SN__READY, memory_order_release);
    uint32_t k = atomic_load_explicit(&p->killed, memory_order_relaxed);
    /* acq_rel: hands the process (and Ready) to the unthrottler; the loop
     * only retries when a killer set its bits meanwhile */
    while (k & SN__THR_ASKED)
        if (atomic_compare_exchange_weak_explicit(&p->killed, &k, (k & ~SN__THR_BITS) | SN__THR_HELD,
                                                  memory_order_acq_rel, memory_order_acquire))
            return true;
    sn__schedule(w->sched, p, false); /* (let go meanwhile: it runs after all) */
    return true;
}

void sn__run(sn__worker_t *w, sn__proc_t *p)
{
    sn_sched_t *sched = w->sched;
    uint32_t expect = SN__READY;
    if (p == w->handed) { /* from our hand-off: RUNNING since its wake, which we did */
        w->handed = NULL;
    } else if (!atomic_compare_exchange_strong_explicit(&p->state, &expect, SN__RUNNING, memory_order_acquire,
                                                        memory_order_relaxed)) {
        /* acquire: we see everything written before the process was made Ready */
        abort(); /* invariant: a queued process is Ready and queued once */
    }
    /* acquire: the reason stored before the flag (kill.c). Killed during
     * its last step, it is here again: the killer's CANCEL woke it */
    if (atomic_load_explicit(&p->killed, memory_order_acquire) & SN__KILL_FORCE) {
        sn__kill_now(w, p); /* no step: it was told to end */
        return;
    }

    if ((atomic_load_explicit(&p->killed, memory_order_relaxed) & SN__THR_ASKED) && hold(w, p))
        return;

    sn_step_out_t *out = &w->out;
    sn__out_reset(out);
    w->fanout = false;
    size_t n = 0;
    if (p->wait_status != 0 && !step_has_input(p, p->wait_status)) {
        /* woken for an event still in flight (or, when Blocked, for none
         * that wakes it): no step, sleep again; go_to_sleep re-checks */
        out->status = p->wait_status == SN__IDLE ? SN_IDLE : SN_WAIT;
    } else {
        /* the first step gets no events (schednode.h: a process starts there) */
        n = p->stepped ? drain(w, p, p->wait_status) : 0;
        p->stepped = 1;
        SN__STAT_ADD(p->popped, (uint32_t)n);
        step(w, p, n, out);
        SN__STAT_ADD(p->steps, 1);
        sn__events_free(w->events, n);
        if (out->nyields)
            sn__dispatch(w, p, out);
    }

    switch (out->status) {
    case SN_DONE:
    case SN_FAIL:
        sn__complete(sched, w, p, out->status, out->status == SN_FAIL ? (out->error ? out->error : SN_EFAILED) : 0,
                     &out->result);
        return;
    case SN_CONTINUE:
        sn_payload_destroy(&out->result);
        p->wait_status = 0;
        atomic_store_explicit(&p->state, SN__READY, memory_order_release);
        yield_back(w, p);
        return;
    case SN_WAIT:
        sn_payload_destroy(&out->result);
        if (p->pending == 0) {
            sn_payload_t *why = sn_payload_text("step returned SN_WAIT with no yield pending");
            sn__complete(sched, w, p, SN_FAIL, SN_EBADWAIT, &why);
            return;
        }
        p->wait_status = SN__BLOCKED;
        go_to_sleep(w, p, SN__BLOCKED);
        return;
    case SN_IDLE:
    default:
        sn_payload_destroy(&out->result);
        p->wait_status = SN__IDLE;
        go_to_sleep(w, p, SN__IDLE);
        return;
    }
}

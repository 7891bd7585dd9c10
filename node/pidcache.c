/* pidcache.c - getpid() answered from memory, linked into the programs
 * (schednode, schedbench), not into the library.
 *
 * libzmq checks for a fork on every operation on a socket's mailbox (its
 * signaler's wait, send and receive: getpid() against the pid it was made
 * in), and glibc has not cached getpid since 2.25, so each check is a
 * system call: on a message's path through a node, four or five in the
 * relay's I/O thread and as many again in libzmq's I/O thread, about a
 * microsecond each on a VM (a system call's cost with a hypervisor in the
 * way). A definition in the executable comes
 * before libc's for every shared library that calls getpid through its
 * PLT (libzmq, czmq; libc's own calls are internal and still ask the
 * kernel), so this one answers them from a cache.
 *
 * The cache holds the pid the process had when it was filled. fork()
 * refreshes it in the child (pthread_atfork, registered at the first
 * fill, before any fork can copy the filled value). A child made without
 * fork's handlers (vfork, clone, posix_spawn) that called getpid through
 * the PLT before its exec would see its parent's pid; this program's
 * children do not (posix_spawn's child runs only libc).
 *
 * Invariant: cached is 0 (not filled) or this process's pid, and it is
 * filled only once the fork handler is registered (registered == 2,
 * release/acquire). The cache itself needs no order: every thread that
 * fills it stores the same value, and a fork's child refreshes it before
 * fork returns there.
 */
#include "pidcache.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static pid_t cached;
static int registered; /* 0; 1 being registered; 2 the fork handler is in; 3 it could not be */
static bool off;
static _Thread_local unsigned long calls; /* this thread's getpid() calls (for tests) */

static pid_t kernel_pid(void)
{
    return (pid_t)syscall(SYS_getpid);
}

static void refresh_in_child(void)
{
    __atomic_store_n(&cached, kernel_pid(), __ATOMIC_RELAXED);
}

void sn__pidcache_off(void)
{
    __atomic_store_n(&off, true, __ATOMIC_RELAXED);
}

bool sn__pidcache_filled(void)
{
    return !__atomic_load_n(&off, __ATOMIC_RELAXED) && __atomic_load_n(&cached, __ATOMIC_RELAXED) != 0;
}

unsigned long sn__pidcache_calls_here(void)
{
    return calls;
}

pid_t getpid(void)
{
    calls++;
    if (__atomic_load_n(&off, __ATOMIC_RELAXED))
        return kernel_pid();
    pid_t p = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (p)
        return p;
    /* The fork handler goes in before the first fill (a fork between
     * the two would leave its child the parent's pid). Until it is in,
     * every call asks the kernel; if it cannot go in, every call will. */
    int zero = 0;
    if (__atomic_compare_exchange_n(&registered, &zero, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        __atomic_store_n(&registered, pthread_atfork(NULL, NULL, refresh_in_child) == 0 ? 2 : 3, __ATOMIC_RELEASE);
    p = kernel_pid();
    if (__atomic_load_n(&registered, __ATOMIC_ACQUIRE) == 2)
        __atomic_store_n(&cached, p, __ATOMIC_RELAXED);
    return p;
}

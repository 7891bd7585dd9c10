/* test_pidcache.c - getpid() from memory (node/pidcache.c): the kernel's
 * answer, in every thread, in a fork's child, for libzmq's calls too, and
 * the kernel's again once it is off. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <cmocka.h>

#include "pidcache.h"

#define THREADS 4
#define CALLS 10000

static pthread_barrier_t start;

static void *caller(void *arg)
{
    pid_t want = (pid_t)syscall(SYS_getpid);
    int *bad = arg;
    pthread_barrier_wait(&start); /* all at once: the first fill races */
    for (int i = 0; i < CALLS; i++)
        if (getpid() != want)
            (*bad)++;
    return NULL;
}

/* First in the file: the cache is cold, and THREADS threads fill it at once. */
static void threads_agree(void **st)
{
    (void)st;
    pthread_t t[THREADS];
    int bad[THREADS] = {0};
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, caller, &bad[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(bad[i], 0);
    }
    pthread_barrier_destroy(&start);
    assert_true(sn__pidcache_filled());
}

static void same_as_kernel(void **st)
{
    (void)st;
    assert_int_equal(getpid(), (pid_t)syscall(SYS_getpid));
    assert_int_equal(getpid(), (pid_t)syscall(SYS_getpid));
    assert_true(sn__pidcache_filled());
}

/* Libraries resolve getpid to this definition: libzmq's fork checks (a
 * socket's mailbox, on send and receive) come here. */
static void libzmq_calls_it(void **st)
{
    (void)st;
    assert_ptr_equal(dlsym(RTLD_DEFAULT, "getpid"), (void *)getpid);
    void *ctx = zmq_ctx_new(), *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
    assert_int_equal(zmq_bind(a, "inproc://pidcache"), 0);
    assert_int_equal(zmq_connect(b, "inproc://pidcache"), 0);
    unsigned long before = sn__pidcache_calls_here();
    char buf[4];
    assert_int_equal(zmq_send(b, "ping", 4, 0), 4);
    assert_int_equal(zmq_recv(a, buf, sizeof buf, 0), 4);
    assert_true(sn__pidcache_calls_here() > before);
    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
}

/* A fork's child answers with its own pid, not the parent's cached one. */
static void fork_refreshes(void **st)
{
    (void)st;
    pid_t parent = getpid();
    assert_true(sn__pidcache_filled());
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pid_t mine = (pid_t)syscall(SYS_getpid);
        _exit(getpid() == mine && mine != parent && getpid() == mine ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(getpid(), parent);
}

/* Last: off for good. */
static void off_asks_kernel(void **st)
{
    (void)st;
    sn__pidcache_off();
    assert_false(sn__pidcache_filled());
    assert_int_equal(getpid(), (pid_t)syscall(SYS_getpid));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_agree),  cmocka_unit_test(same_as_kernel),  cmocka_unit_test(libzmq_calls_it),
        cmocka_unit_test(fork_refreshes), cmocka_unit_test(off_asks_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pidcache.h - getpid() from memory for the programs (pidcache.c). */
#ifndef SN_PIDCACHE_H
#define SN_PIDCACHE_H

#include <stdbool.h>

/* From now on this process's getpid() asks the kernel each time, as libc's
 * does (schedbench's raw libzmq children: the baseline is libzmq as it
 * runs in any other program). Call it before anything calls getpid. */
void sn__pidcache_off(void);

/* True once getpid() answers from memory (not off, filled, the fork
 * handler in): for tests. */
bool sn__pidcache_filled(void);

/* getpid() calls this thread made that reached this definition (a
 * library's included): for tests. */
unsigned long sn__pidcache_calls_here(void);

#endif

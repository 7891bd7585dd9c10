/* fuzz.h - what every fuzz target defines. Built with clang and SN_FUZZ=ON,
 * libFuzzer's main drives the target; otherwise replay.c's main runs every
 * file named on its command line (or found in a directory named there)
 * through it once, so the seed corpus is a regression test in every build.
 */
#ifndef SN_FUZZ_H
#define SN_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* One input. Returns 0; a bug aborts (a sanitizer report or abort()). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional one-time setup, before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A failed property check: says which and aborts, so libFuzzer keeps the
 * input as a crash and the replay test fails. */
#define FUZZ_CHECK(cond)                                                                                               \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            fuzz_fail(__FILE__, __LINE__, #cond);                                                                      \
    } while (0)
static inline __attribute__((noreturn)) void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: property failed: %s\n", file, line, what);
    abort();
}

#endif

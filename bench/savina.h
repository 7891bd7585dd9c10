/* savina.h - the actor benchmarks of the Savina suite in schedbench
 * (savina.c): threadring, chameneos, big, fjthrput, count, fjcreate,
 * pipeline, each checked and timed against a Go peer in the same run. */
#ifndef SN_BENCH_SAVINA_H
#define SN_BENCH_SAVINA_H

typedef struct sn_savina_opts {
    int workers;
    int rounds; /* timed rounds; the medians are compared */
    int quick;  /* small sizes, results checked, no Go peer */
} sn_savina_opts_t;

/* Runs the case `name` (or all seven for "savina"). Returns 0, or 1 when a
 * result is wrong or a process failed. */
int sn_bench_savina(const char *name, const sn_savina_opts_t *opts);
/* Is `name` one of the cases (or "savina")? */
int sn_savina_has(const char *name);

#endif

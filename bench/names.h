/* names.h - the names case of schedbench (names.c). */
#ifndef SN_BENCH_NAMES_H
#define SN_BENCH_NAMES_H

/* Registrations, lookups, and sends by name against sends by PID, across
 * three nodes in this process (`workers` each). */
int sn_bench_names(int workers);

#endif

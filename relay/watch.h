/* watch.h - monitors across nodes (watch.c): the records of remote monitors under
 * each peer (peer_t.watch), and what becomes of them when a peer goes
 * down or a monitor request comes back. I/O thread.
 */
#ifndef SN_WATCH_H
#define SN_WATCH_H

#include "relay_int.h"

/* Records (on) or drops a remote monitor of target (on p) by watcher;
 * false if there was none to drop (or no memory to record it). */
bool sn__watch(peer_t *p, sn_pid_t target, sn_pid_t watcher, uint64_t tag, bool on);
/* Marks p's record of that monitor confirmed (WATCHED from p); false if
 * p holds none. */
bool sn__watch_confirm(peer_t *p, sn_pid_t target, sn_pid_t watcher, uint64_t tag);
/* p went down, left or restarted: each monitor recorded under it gives
 * its watcher DOWN nodedown, or goes to the process's home again (watch.c) */
void sn__relay_watches_lost(sn_relay_t *r, peer_t *p);

/* Our own monitor request s came back here: true if its record was still
 * there (taken now: the request goes on from here); false if it was
 * answered already or demonitored (drop it). See watch.c. */
bool sn__watch_returned(sn_relay_t *r, const sn_wire_send_t *s);
/* Our own monitor request s (its watcher here) could not go on to peer
 * `at` (0: it never left here): the record under `at` answers, its
 * watcher gets DOWN `error`; false if `at` holds none (the record moved on
 * since the request left, or its DOWN came: watch.c). */
bool sn__watch_bounced(sn_relay_t *r, const sn_wire_send_t *s, int error, uint32_t at);

#endif

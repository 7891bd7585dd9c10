/* dashboard.h - what the dashboard page reads (node/http.c serves it): the
 * cluster as this node sees it, and this node's processes, as JSON.
 */
#ifndef SN_DASHBOARD_H
#define SN_DASHBOARD_H

#include <stddef.h>

#include "relay.h"

/* GET /api/status: {"node": ID, "time_ms": T, "nodes": [the rows of
 * `schednode status --json`, same keys], "peers": [this node's counters
 * per peer: {"peer", "up", "msgs_in", "msgs_out", "steals_in",
 * "steals_out", "rtt_ms"}], "flows": [each member's own counts with each
 * peer: {"from", "peer", "msgs_in", "msgs_out", "steals_in",
 * "steals_out"}]}. The rows come from this node's relay the way
 * `status` gets them (a client request on its endpoint, so the relay's
 * I/O thread answers and nothing here reads its state), the other
 * members' flows from a status request to each (up to 16, 500 ms each:
 * see dashboard.c); security: the
 * node's own keys. relay NULL: the node alone. Caller frees; NULL on
 * failure with the reason in err. */
char *sn_dashboard_status(sn_sched_t *sched, sn_relay_t *relay, const sn_security_t *security, char *err,
                          size_t errlen);
/* GET /api/procs: the cluster's processes, this node's first, then each
 * member's (asked with `ps`, as the flows are): {"node": ID, "total": N,
 * "by_state": {"ready": n, ...}, "procs": [{"pid", "node", "type", "state",
 * "mailbox", "steps", "moves"}...], "truncated": bool, "unanswered": [ids]},
 * at most max rows in all. relay NULL: this node only. Caller frees; NULL
 * if out of memory. */
char *sn_dashboard_procs(sn_sched_t *sched, sn_relay_t *relay, const sn_security_t *security, size_t max);

#endif

/* dispatch.c - the frames of the relay's logic files, handed on by kind:
 * heartbeats and probes, joins, gossip and leaves (members.c), steal
 * handovers (steal.c). inbound.c's dispatcher calls it after its checks;
 * the unit tests' fake I/O side (tests/relay_fake.c) calls it the same
 * way. I/O thread only.
 */
#include "relay_int.h"
#include "members.h"
#include "steal.h"

bool sn__relay_logic_frame(sn_relay_t *r, peer_t *p, sn_frame_t *f, const unsigned char *ident, size_t ident_len,
                           zsock_t *from_seed)
{
    switch (f->kind) {
    case SN_FRAME_HEARTBEAT:
        if (!p && f->has_stats && (p = sn__members_stranger(r, f)) != NULL)
            sn__members_heard(r, p, f->incarnation);
        if (p) /* (a probe from a node we just learned of is answered too) */
            sn__members_heartbeat(r, p, f);
        return true;
    case SN_FRAME_STEAL_REQUEST:
    case SN_FRAME_STEAL_OFFER:
    case SN_FRAME_STEAL_ACCEPT:
    case SN_FRAME_STEAL_COMMIT:
        if (p && p->state == SN_MEMBER_UP)
            sn__steal_frame(r, p, f);
        else if (p && p->state == SN_MEMBER_DOWN &&
                 (f->kind == SN_FRAME_STEAL_ACCEPT || f->kind == SN_FRAME_STEAL_COMMIT))
            sn__steal_frame(r, p, f); /* held down, only frozen: a thief's accept gets the abort (its
                                       * offer is undone), a victim's commit or abort ends its handover */
        else
            sn__relay_bad(r, "steal message from a node that is not a live member", f->node);
        return true;
    case SN_FRAME_HELLO:
    case SN_FRAME_WELCOME:
    case SN_FRAME_MEMBERS:
    case SN_FRAME_ERROR:
    case SN_FRAME_LEAVE:
        sn__members_frame(r, f, ident, ident_len, from_seed);
        return true;
    default:
        return false;
    }
}

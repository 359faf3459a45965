/* SPDX-License-Identifier: MIT */
/*
 * Multicast on the engine side (the daemon's gw_mcast.c "Delivery"):
 * which QPs of this host a group has, and the fan-out of a datagram read
 * from the port to each of them.  A sender's copies are the requester's
 * (sv_req.c send_mcast).
 *
 * Membership is the daemon's; it is asked each time (MCAST_MEMBERS, with
 * no lock of ours held), so an attach or a detach counts from the next
 * packet on, as on a NIC whose table the driver just changed.
 */
#include "engine_int.h"
#include "sv_client.h"
#include "sv_wire.h"
#include "sv_log.h"

#include <string.h>

int sv_mcast_members(struct sv_engine *eng, const uint8_t gid[16],
		     uint32_t qpn[SV_MAX_MCAST_QP_ATTACH])
{
	struct sv_mcast_members_req req;
	struct sv_mcast_members_rep rep;
	int err;

	memcpy(req.gid, gid, 16);
	err = sv_call_simple(SV_OP_MCAST_MEMBERS, 0, eng->instance, -1, &req,
			     sizeof(req), &rep, sizeof(rep));
	if (err || rep.count > SV_MAX_MCAST_QP_ATTACH) {
		static int warned;

		/* This host's copies of the datagram are lost: say so (once),
		 * a loss no counter shows. */
		if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			sv_warn("multicast: the device did not name the group's QPs "
				"(%s): this host's copies of a datagram are lost",
				err ? strerror(-err) : "too many");
		return 0;
	}
	memcpy(qpn, rep.qpn, rep.count * sizeof(qpn[0]));
	return (int)rep.count;
}

int sv_mcast_fanout(struct sv_engine *eng, uint8_t *rec, uint32_t len)
{
	uint32_t qpn[SV_MAX_MCAST_QP_ATTACH];
	int n, sent = 0;

	if (len < SV_GRH_BYTES + SV_BTH_BYTES)
		return 0;
	n = sv_mcast_members(eng, grh_dgid(rec), qpn);
	for (int i = 0; i < n; i++) {
		struct sv_link *l;
		uint8_t *r;
		int dead;

		/* Each copy names its QP, as rxe hands each one the packet.
		 * Ours are dispatched here, the port held, not through the
		 * ring to ourselves: a packet another reader forwarded later
		 * would be drained before that ring (sv_wire.h "Order"). */
		st_be24(rec + SV_GRH_BYTES + 5, qpn[i]);
		if (sv_eng_dispatch_own(eng, rec, len, qpn[i])) {
			sent++;
			continue;
		}
		l = sv_eng_link_for_qpn(eng, qpn[i]);
		r = l ? sv_link_reserve_type(l, len, SV_WIRE_REC, &dead) : NULL;
		if (!r)
			continue; /* unreliable: the group's next QP */
		memcpy(r, rec, len);
		sv_link_commit(l);
		sent++;
	}
	return sent;
}

/* SPDX-License-Identifier: MIT */
/*
 * Multicast groups (ibv_attach_mcast; rxe_mcast.c's role): which UD QPs
 * of this namespace are attached to which group, the limits, and the
 * port's membership of the group's IP address.
 *
 * A group is its GID (IBTA A17.5.6: RoCE v2 multicast is IP multicast,
 * the MGID an IPv6 multicast address or an IPv4-mapped one).  It exists
 * while a QP is attached.  Its first attach joins the address on the
 * namespace's RoCE port (IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP on every
 * interface that has an address of its family), so the kernel sends the
 * IGMP or MLD report rxe's dev_mc_add leads to, and datagrams to the
 * group reach the port; the last detach leaves it.
 *
 * Delivery.  A packet for a group carries BTH destination QP 0xFFFFFF.
 * The engines ask MCAST_MEMBERS for the group's QPNs: a sender makes one
 * copy per attached QP of this host but its own (rxe does not hand a
 * multicast packet back to the QP that sent it) and one datagram to the
 * address; whoever reads the port makes one copy per attached QP.  Each
 * copy names its QP in the BTH and goes where a packet for that QP goes;
 * the responder checks the Q_Key per QP as for any UD packet.
 *
 * Locking: the table is the main thread's; it changes it under
 * svd_gw.lock, under which the gateway thread reads it
 * (svd_gw_mcast_find).
 */
#include "gw_int.h"
#include "svd_ops.h"
#include "sv_log.h"

#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MC_BUCKETS 256

static struct svd_mcg *mc_hash[MC_BUCKETS];
static uint32_t mc_groups, mc_attached;

static uint32_t mc_bucket(const uint8_t *gid)
{
	uint32_t h = 2166136261u;

	for (int i = 0; i < 16; i++)
		h = (h ^ gid[i]) * 16777619u;
	return h % MC_BUCKETS;
}

struct svd_mcg *svd_gw_mcast_find(const uint8_t gid[16])
{
	struct svd_mcg *g = mc_hash[mc_bucket(gid)];

	while (g && memcmp(g->gid, gid, 16))
		g = g->next;
	return g;
}

/* Joins (on) or leaves the group's address on the port, on every
 * interface up with an address of its family (not loopback: this host's
 * QPs get their copies from the sender).  Best effort: a namespace with
 * no such interface still has the group on this host. */
static void port_membership(const uint8_t *gid, int on)
{
	struct ifaddrs *ifa, *i;
	int v4 = sv_gid_is_v4(gid), fd;
	unsigned last = 0;

	if (getifaddrs(&ifa))
		return;
	/* The port is published under the lock (gw_port.c): held while it
	 * is used, a few system calls. */
	pthread_mutex_lock(&svd_gw.lock);
	fd = svd_gw.fd;
	for (i = fd < 0 ? NULL : ifa; i; i = i->ifa_next) {
		unsigned idx;
		int rc;

		if (!i->ifa_addr || (i->ifa_flags & IFF_LOOPBACK) ||
		    !(i->ifa_flags & IFF_UP) ||
		    i->ifa_addr->sa_family != (v4 ? AF_INET : AF_INET6))
			continue;
		idx = if_nametoindex(i->ifa_name);
		if (!idx || idx == last)
			continue;
		last = idx;
		if (v4) {
			struct ip_mreqn m = { .imr_ifindex = (int)idx };

			memcpy(&m.imr_multiaddr, gid + 12, 4);
			rc = setsockopt(fd, IPPROTO_IP,
					on ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
					&m, sizeof(m));
		} else {
			struct ipv6_mreq m = { .ipv6mr_interface = idx };

			memcpy(&m.ipv6mr_multiaddr, gid, 16);
			rc = setsockopt(fd, IPPROTO_IPV6,
					on ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP,
					&m, sizeof(m));
		}
		if (rc && errno != EADDRINUSE)
			sv_dbg("mcast: %s the group on %s: %s",
			       on ? "joining" : "leaving", i->ifa_name,
			       strerror(errno));
	}
	pthread_mutex_unlock(&svd_gw.lock);
	freeifaddrs(ifa);
}

static int find_qp(const struct svd_mcg *g, const struct svd_qp *qp)
{
	for (uint32_t i = 0; i < g->n; i++)
		if (g->qp[i] == qp)
			return (int)i;
	return -1;
}

/* Takes qp out of g (at i); the group goes with its last QP.  Main
 * thread. */
static void drop_member(struct svd_mcg *g, int i)
{
	struct svd_qp *qp = g->qp[i];

	pthread_mutex_lock(&svd_gw.lock);
	g->n--;
	memmove(&g->qp[i], &g->qp[i + 1], (g->n - (uint32_t)i) * sizeof(g->qp[0]));
	memmove(&g->qpn[i], &g->qpn[i + 1],
		(g->n - (uint32_t)i) * sizeof(g->qpn[0]));
	if (!g->n) {
		struct svd_mcg **pp = &mc_hash[mc_bucket(g->gid)];

		while (*pp != g)
			pp = &(*pp)->next;
		*pp = g->next;
		mc_groups--;
	}
	pthread_mutex_unlock(&svd_gw.lock);
	qp->mcast--;
	mc_attached--;
	if (!g->n) {
		port_membership(g->gid, 0);
		free(g);
	}
}

/* The kernel's checks before the device's (ib_attach_mcast): a UD QP of
 * this ufile and a multicast GID. */
static int mcast_args(struct svd_req *r, struct svd_qp **qpp)
{
	const struct sv_mcast_req *req = r->body;
	struct svd_obj *o = svd_handle_get(r->uf, req->handle, SVD_OBJ_QP);

	if (!o)
		return svd_lookup_err(r->uf, req->handle);
	*qpp = (struct svd_qp *)o;
	if ((*qpp)->qp_type != IBV_QPT_UD || !sv_gid_is_mcast(req->gid))
		return -EINVAL;
	return 0;
}

int svd_op_attach_mcast(struct svd_req *r)
{
	const struct sv_mcast_req *req = r->body;
	struct svd_qp *qp = NULL; /* (set by mcast_args when it answers 0) */
	struct svd_mcg *g;
	int err = mcast_args(r, &qp), fresh = 0;

	if (err)
		return err;
	g = svd_gw_mcast_find(req->gid);
	if (g && find_qp(g, qp) >= 0)
		return 0; /* attached already: as the kernel, no error */
	if (!g) {
		if (mc_groups >= SV_MAX_MCAST_GRP)
			return -ENOMEM;
		g = calloc(1, sizeof(*g));
		if (!g)
			return -ENOMEM;
		memcpy(g->gid, req->gid, 16);
		fresh = 1;
	}
	if (g->n >= SV_MAX_MCAST_QP_ATTACH ||
	    mc_attached >= SV_MAX_TOTAL_MCAST_QP_ATTACH) {
		if (fresh)
			free(g);
		return -ENOMEM;
	}
	pthread_mutex_lock(&svd_gw.lock);
	g->qp[g->n] = qp;
	g->qpn[g->n] = qp->qpn;
	g->n++;
	if (fresh) {
		uint32_t b = mc_bucket(g->gid);

		g->next = mc_hash[b];
		mc_hash[b] = g;
		mc_groups++;
	}
	pthread_mutex_unlock(&svd_gw.lock);
	qp->mcast++;
	mc_attached++;
	if (fresh)
		port_membership(g->gid, 1);
	sv_dbg("ufile %#x qp#%u: qpn %#x attached to a group (%u QPs)",
	       r->uf->id, qp->obj.handle, qp->qpn, g->n);
	return 0;
}

int svd_op_detach_mcast(struct svd_req *r)
{
	const struct sv_mcast_req *req = r->body;
	struct svd_qp *qp = NULL; /* (set by mcast_args when it answers 0) */
	struct svd_mcg *g;
	int err = mcast_args(r, &qp), i;

	if (err)
		return err;
	g = svd_gw_mcast_find(req->gid);
	i = g ? find_qp(g, qp) : -1;
	if (i < 0)
		return -EINVAL; /* as ib_uverbs: not attached */
	drop_member(g, i);
	return 0;
}

int svd_op_mcast_members(struct svd_req *r)
{
	const struct sv_mcast_members_req *req = r->body;
	struct sv_mcast_members_rep *rep = r->rep;
	const struct svd_mcg *g = svd_gw_mcast_find(req->gid);

	rep->count = g ? g->n : 0;
	if (g)
		memcpy(rep->qpn, g->qpn, g->n * sizeof(g->qpn[0]));
	r->rep_len = sizeof(*rep);
	return 0;
}

void svd_mcast_qp_gone(struct svd_qp *qp)
{
	for (uint32_t b = 0; b < MC_BUCKETS && qp->mcast; b++) {
		struct svd_mcg *g = mc_hash[b], *next;

		for (; g; g = next) {
			int i = find_qp(g, qp);

			next = g->next;
			if (i >= 0)
				drop_member(g, i);
		}
	}
}

/* SPDX-License-Identifier: MIT */
/*
 * Multicast joins (rdma_join_multicast, rdma_join_multicast_ex,
 * rdma_leave_multicast), as rdma-core's librdmacm and the kernel's
 * ib_cma do them on RoCE: the daemon checks the id and answers a join
 * with RDMA_CM_EVENT_MULTICAST_JOIN, whose param.ud holds the group's
 * address (the MGID: the IPv4 address mapped, or the IPv6 address), QP
 * 0xFFFFFF and the id's Q_Key; taking that event attaches the id's QP to
 * the group (ibv_attach_mcast), unless the join was send-only.  Leaving
 * detaches it.  The joins of an id are the library's (idp->mcast), one
 * per call, matched to their events by group in the order made.
 */
#include "cma_int.h"

#include <stdlib.h>
#include <string.h>

struct cma_mcast {
	struct cma_mcast *next;
	void *context;
	struct sockaddr_storage addr;
	int addrlen;
	int flags; /* enum rdma_cm_mc_join_flags */
	int joined; /* its JOIN event was taken */
	union ibv_gid mgid;
	uint16_t mlid;
};

/* The MGID of a group address, as cma_iboe_set_mgid makes it on a RoCE
 * v2 port. */
static void mgid_of(const struct sockaddr *a, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (a->sa_family == AF_INET6) {
		memcpy(g->raw, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	} else {
		g->raw[10] = g->raw[11] = 0xff;
		memcpy(g->raw + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
	}
}

static int join(struct rdma_cm_id *id, struct sockaddr *addr, int len,
		int flags, void *context)
{
	struct cma_id_private *idp = to_idp(id);
	struct sv_cm_addr_req req;
	struct cma_mcast *mc, **pp;
	int e;

	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return cma_err(ENOMEM);
	mc->context = context;
	mc->flags = flags;
	mc->addrlen = len;
	memcpy(&mc->addr, addr, len);
	mgid_of(addr, &mc->mgid);
	/* In the list before the daemon is asked: its event may be taken
	 * by another thread before the call returns. */
	pthread_mutex_lock(&idp->mut);
	for (pp = &idp->mcast; *pp; pp = &(*pp)->next)
		;
	*pp = mc;
	pthread_mutex_unlock(&idp->mut);
	memset(&req, 0, sizeof(req));
	cma_hdr(idp, &req.h);
	memcpy(&req.dst, addr, len);
	req.dst_len = len;
	if (!cma_call(id->channel, SV_OP_CM_JOIN_MCAST, &req, sizeof(req),
		      NULL, 0))
		return 0;
	e = errno;
	pthread_mutex_lock(&idp->mut);
	for (pp = &idp->mcast; *pp != mc; pp = &(*pp)->next)
		;
	*pp = mc->next;
	pthread_mutex_unlock(&idp->mut);
	free(mc);
	return cma_err(e);
}

SV_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
				  void *context)
{
	int len = cma_addrlen(addr);

	if (!id || !len)
		return cma_err(EINVAL);
	return join(id, addr, len, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

SV_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
				     struct rdma_cm_join_mc_attr_ex *attr,
				     void *context)
{
	int len;

	if (!id || !attr)
		return cma_err(EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return cma_err(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return cma_err(EINVAL);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return cma_err(EINVAL);
	len = cma_addrlen(attr->addr);
	if (!len)
		return cma_err(EINVAL);
	return join(id, attr->addr, len, (int)attr->join_flags, context);
}

/* Leaving needs no word to the daemon: the group's membership is the
 * QP's attachment, and a JOIN event still queued finds no join and is
 * dropped (cma_mcast_event). */
SV_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cma_id_private *idp;
	struct cma_mcast *mc, **pp;
	int len = cma_addrlen(addr);

	if (!id || !len)
		return cma_err(EINVAL);
	idp = to_idp(id);
	pthread_mutex_lock(&idp->mut);
	for (pp = &idp->mcast; (mc = *pp); pp = &mc->next)
		if (mc->addrlen == len && !memcmp(&mc->addr, addr, len)) {
			*pp = mc->next;
			break;
		}
	pthread_mutex_unlock(&idp->mut);
	if (!mc)
		return cma_err(EADDRNOTAVAIL);
	if (id->qp && mc->joined &&
	    mc->flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		ibv_detach_mcast(id->qp, &mc->mgid, mc->mlid);
	free(mc);
	return 0;
}

int cma_mcast_event(struct cma_event *evt)
{
	struct cma_id_private *idp = evt->id_priv;
	struct rdma_ud_param *ud = &evt->event.param.ud;
	struct cma_mcast *mc;
	int err = 0;

	pthread_mutex_lock(&idp->mut);
	for (mc = idp->mcast; mc; mc = mc->next)
		if (!mc->joined && !memcmp(&mc->mgid, &ud->ah_attr.grh.dgid, 16))
			break;
	if (mc) {
		mc->joined = 1;
		mc->mlid = ud->ah_attr.dlid;
	}
	pthread_mutex_unlock(&idp->mut);
	if (!mc)
		return 1; /* left before its event came */
	ud->private_data = mc->context;
	ud->private_data_len = 0;
	if (evt->event.event != RDMA_CM_EVENT_MULTICAST_JOIN)
		return 0;
	/* ucma_process_join: a send-only member's QP is not attached. */
	if (idp->id.qp && mc->flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		err = ibv_attach_mcast(idp->id.qp, &mc->mgid, mc->mlid);
	if (err) {
		errno = err;
		evt->event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
		evt->event.status = -1; /* rdma-core's rdma_seterrno */
	}
	return 0;
}

void cma_mcast_free(struct cma_id_private *idp)
{
	while (idp->mcast) {
		struct cma_mcast *mc = idp->mcast;

		idp->mcast = mc->next;
		free(mc);
	}
}

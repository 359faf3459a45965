/* SPDX-License-Identifier: MIT */
/*
 * QPs, SRQs and endpoints made through an rdma_cm id, and the QP state
 * changes the connection steps make, with the attributes the daemon's CM
 * decides (rdma_init_qp_attr), as rdma-core's librdmacm does them.
 */
#include "cma_int.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int seterr(int ret)
{
	return ret ? cma_err(ret) : 0;
}

int cma_modify_qp_rtr(struct rdma_cm_id *id, uint8_t resp_res)
{
	struct ibv_qp_attr a;
	int mask;

	if (!id->qp)
		return 0;
	/* The attributes may have changed since INIT (the REQ/REP). */
	a.qp_state = IBV_QPS_INIT;
	if (rdma_init_qp_attr(id, &a, &mask))
		return -1;
	if (ibv_modify_qp(id->qp, &a, mask))
		return cma_err(errno ? errno : EINVAL);
	a.qp_state = IBV_QPS_RTR;
	if (rdma_init_qp_attr(id, &a, &mask))
		return -1;
	if (resp_res != RDMA_MAX_RESP_RES)
		a.max_dest_rd_atomic = resp_res;
	return seterr(ibv_modify_qp(id->qp, &a, mask));
}

int cma_modify_qp_rts(struct rdma_cm_id *id, uint8_t init_depth)
{
	struct ibv_qp_attr a;
	int mask;

	if (!id->qp)
		return 0;
	a.qp_state = IBV_QPS_RTS;
	if (rdma_init_qp_attr(id, &a, &mask))
		return -1;
	if (init_depth != RDMA_MAX_INIT_DEPTH)
		a.max_rd_atomic = init_depth;
	return seterr(ibv_modify_qp(id->qp, &a, mask));
}

int cma_modify_qp_err(struct rdma_cm_id *id)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	if (!id->qp)
		return 0;
	return seterr(ibv_modify_qp(id->qp, &a, IBV_QP_STATE));
}

static int init_conn_qp(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int mask;

	a.qp_state = IBV_QPS_INIT;
	if (rdma_init_qp_attr(id, &a, &mask))
		return -1;
	return seterr(ibv_modify_qp(qp, &a, mask));
}

/* A UD QP is ready at once: INIT with the id's Q_Key, RTR, RTS. */
static int init_ud_qp(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int mask, ret;

	a.qp_state = IBV_QPS_INIT;
	if (rdma_init_qp_attr(id, &a, &mask))
		return -1;
	ret = ibv_modify_qp(qp, &a, mask);
	if (ret)
		return cma_err(ret);
	a.qp_state = IBV_QPS_RTR;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (ret)
		return cma_err(ret);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return seterr(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
}

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq && id->send_cq != id->recv_cq) {
			ibv_destroy_cq(id->send_cq);
			id->send_cq = NULL;
		}
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel &&
		    id->send_cq_channel != id->recv_cq_channel) {
			ibv_destroy_comp_channel(id->send_cq_channel);
			id->send_cq_channel = NULL;
		}
		id->recv_cq_channel = NULL;
	}
}

/* CQs (each with its completion channel) for the sizes not given. */
static int create_cqs(struct rdma_cm_id *id, uint32_t send_size,
		      uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv_size, id,
					    id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send_size, id,
					    id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	{
		int e = errno;

		destroy_cqs(id);
		return cma_err(e ? e : ENOMEM);
	}
}

SV_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id,
				 struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;

	if (!id || !attr || !id->verbs)
		return cma_err(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return cma_err(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->srq_type == IBV_SRQT_XRC) {
		/* The device's XRC domain and the id's receive CQ unless
		 * given, as rdma-core's librdmacm: rdma_get_recv_comp polls
		 * that CQ. */
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = cma_get_xrcd(to_idp(id)->cma_dev);
			if (!attr->xrcd)
				return -1;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			if (!id->recv_cq && create_cqs(id, 0, attr->attr.max_wr))
				return -1;
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		int e = errno;

		destroy_cqs(id);
		return cma_err(e);
	}
	if (!id->pd)
		id->pd = attr->pd;
	id->srq = srq;
	return 0;
}

SV_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;
	int ret;

	if (!id || !attr)
		return cma_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, attr, sizeof(*attr));
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ax.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC :
							IBV_SRQT_BASIC;
	ax.pd = pd;
	ret = rdma_create_srq_ex(id, &ax);
	memcpy(attr, &ax, sizeof(*attr));
	return ret;
}

SV_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	destroy_cqs(id);
}

/*
 * A QP made on id takes part in ECE as rdma-core's does: its ECE is what id
 * offers (rdma_connect's REQ), and on the passive side, made after the REQ,
 * the options the peer offered are set on it; those it accepts are what the
 * REP answers (rdma_accept).  A QP without ECE (EOPNOTSUPP) changes nothing.
 */
static void init_ece(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	struct cma_id_private *idp = to_idp(id);
	struct ibv_ece ece = { 0 };

	if (ibv_query_ece(qp, &ece))
		return;
	idp->local_ece.vendor_id = ece.vendor_id;
	idp->local_ece.options = ece.options;
	if (!idp->remote_ece.vendor_id)
		return;
	ece.vendor_id = idp->remote_ece.vendor_id;
	ece.options = idp->remote_ece.options;
	ece.comp_mask = 0;
	if (!ibv_set_ece(qp, &ece))
		idp->local_ece.options = ece.options;
}

SV_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id,
				struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp;
	int ret;

	if (!id || !attr)
		return cma_err(EINVAL);
	if (id->qp || !id->verbs)
		return cma_err(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	} else if (id->verbs != attr->pd->context) {
		return cma_err(EINVAL);
	}
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return cma_err(EINVAL);
	if (id->qp_type == IBV_QPT_XRC_RECV) {
		/* A TGT QP: no queues, no CQs; its domain is the device's
		 * unless given (its receives go to the XRC SRQs of the
		 * domain: rdma_create_srq). */
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = cma_get_xrcd(to_idp(id)->cma_dev);
			if (!attr->xrcd)
				return -1;
			attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
		}
		attr->comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_PD;
		attr->send_cq = attr->recv_cq = NULL;
		attr->srq = NULL;
		memset(&attr->cap, 0, sizeof(attr->cap));
	}
	ret = id->qp_type == IBV_QPT_XRC_RECV ? 0 :
	      create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
			 id->qp_type == IBV_QPT_XRC_SEND || attr->recv_cq || id->recv_cq ?
				 0 : attr->cap.max_recv_wr);
	if (ret)
		return ret;
	if (id->qp_type != IBV_QPT_XRC_RECV) {
		if (!attr->send_cq)
			attr->send_cq = id->send_cq;
		if (!attr->recv_cq && id->qp_type != IBV_QPT_XRC_SEND)
			attr->recv_cq = id->recv_cq;
		if (id->srq && !attr->srq && id->qp_type != IBV_QPT_XRC_SEND)
			attr->srq = id->srq;
	}
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		ret = cma_err(errno);
		goto err_cqs;
	}
	ret = id->qp_type == IBV_QPT_UD ? init_ud_qp(id, qp) :
					  init_conn_qp(id, qp);
	if (ret)
		goto err_qp;
	init_ece(id, qp);
	if (qp->pd) /* (a TGT QP has none: the id keeps the device's) */
		id->pd = qp->pd;
	id->qp = qp;
	return 0;

err_qp:
	{
		int e = errno;

		ibv_destroy_qp(qp);
		errno = e;
	}
err_cqs:
	{
		int e = errno;

		destroy_cqs(id);
		errno = e;
	}
	return ret;
}

SV_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ax;
	int ret;

	if (!id || !qp_init_attr)
		return cma_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, qp_init_attr, sizeof(*qp_init_attr));
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd ? pd : id->pd;
	ret = rdma_create_qp_ex(id, &ax);
	memcpy(qp_init_attr, &ax, sizeof(*qp_init_attr));
	return ret;
}

SV_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

/* ---- endpoints (rdma_create_ep & co) ----------------------------------- */

static int passive_ep(struct rdma_cm_id *id, struct rdma_addrinfo *res,
		      struct ibv_pd *pd, struct ibv_qp_init_attr *qia)
{
	struct cma_id_private *idp = to_idp(id);

	if (rdma_bind_addr(id, res->ai_src_addr))
		return -1;
	if (pd)
		id->pd = pd;
	if (qia) {
		idp->qp_init_attr = malloc(sizeof(*qia));
		if (!idp->qp_init_attr)
			return cma_err(ENOMEM);
		*idp->qp_init_attr = *qia;
		idp->qp_init_attr->qp_type = res->ai_qp_type;
	}
	return 0;
}

SV_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
			     struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	struct cma_id_private *idp;
	int ret;

	if (!id || !res)
		return cma_err(EINVAL);
	ret = cma_create_id2(NULL, &cm_id, NULL, res->ai_port_space,
			     res->ai_qp_type);
	if (ret)
		return ret;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = passive_ep(cm_id, res, pd, qp_init_attr);
		if (ret)
			goto err;
		goto out;
	}
	ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
	if (ret)
		goto err;
	if (res->ai_route_len) {
		ret = rdma_set_option(cm_id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
				      res->ai_route, res->ai_route_len);
		if (!ret)
			ret = cma_complete(cm_id);
	} else {
		ret = rdma_resolve_route(cm_id, 2000);
	}
	if (ret)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = res->ai_qp_type;
		ret = rdma_create_qp(cm_id, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	if (res->ai_connect_len) {
		idp = to_idp(cm_id);
		idp->connect = malloc(res->ai_connect_len);
		if (!idp->connect) {
			ret = cma_err(ENOMEM);
			goto err;
		}
		memcpy(idp->connect, res->ai_connect, res->ai_connect_len);
		idp->connect_len = res->ai_connect_len;
	}
out:
	*id = cm_id;
	return 0;
err:
	{
		int e = errno;

		rdma_destroy_ep(cm_id);
		errno = e;
	}
	return ret;
}

SV_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	struct cma_id_private *idp = to_idp(id);

	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	free(idp->qp_init_attr);
	idp->qp_init_attr = NULL;
	rdma_destroy_id(id);
}

SV_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cma_id_private *idp;
	struct rdma_cm_event *event;
	int ret;

	if (!listen || !id)
		return cma_err(EINVAL);
	idp = to_idp(listen);
	if (!idp->sync)
		return cma_err(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	ret = rdma_get_cm_event(listen->channel, &event);
	if (ret)
		return ret;
	if (event->status) {
		ret = cma_err(event->status < 0 ? -event->status : event->status);
		goto err;
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = cma_err(EINVAL);
		goto err;
	}
	if (idp->qp_init_attr) {
		struct ibv_qp_init_attr attr = *idp->qp_init_attr;

		ret = rdma_create_qp(event->id, listen->pd, &attr);
		if (ret)
			goto err;
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
err:
	listen->event = event;
	return ret;
}

/* SPDX-License-Identifier: MIT */
/*
 * The QP attributes an IB CM exchange decides (rdma_init_qp_attr: the
 * kernel's ib_cm_init_qp_attr tables, cma_ib_init_qp_attr before the IB
 * CM is involved), and rdma_notify's COMM_EST: data that arrived before
 * the RTU establishes the connection (cm_establish).
 */
#include "cm_ib_int.h"
#include "svd_ops.h"

#include <errno.h>
#include <string.h>

#include <rdma/rdma_cma.h>

int svd_op_cm_notify(struct svd_req *r)
{
	const struct sv_cm_int_req *req = r->body;
	struct svd_cm_id *id;
	struct svd_ibcm *c;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	c = id->cm;
	if (!id->bound_dev || !c)
		return -EINVAL;
	if (req->val != IBV_EVENT_COMM_EST)
		return -EINVAL; /* no alternate path to migrate to */
	/* cm_establish: data arrived before the RTU. */
	switch (c->state) {
	case IBCM_REP_SENT:
	case IBCM_MRA_REP_RCVD:
		svd_timer_cancel(&c->timer);
		c->state = IBCM_ESTABLISHED;
		if (svd_ibcm_id_wants(c, 0))
			svd_ibcm_id_event(c, RDMA_CM_EVENT_ESTABLISHED, 0);
		return 0;
	case IBCM_ESTABLISHED:
		return -EISCONN;
	default:
		return -EINVAL;
	}
}

/* rdma_init_qp_attr before the IB CM is involved (cma_ib_init_qp_attr). */
static void init_attr_nocm(struct svd_cm_id *id, struct ibv_qp_attr *a,
			   int *mask)
{
	a->pkey_index = 0;
	a->port_num = 1;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (id->qp_type == IBV_QPT_UD) {
		svd_ibcm_set_qkey(id, 0);
		a->qkey = id->qkey;
		*mask |= IBV_QP_QKEY;
	} else {
		a->qp_access_flags = 0;
		*mask |= IBV_QP_ACCESS_FLAGS;
	}
}

/* The kernel's ib_cm_init_qp_attr tables. */
static int init_attr_cm(struct svd_cm_id *id, struct ibv_qp_attr *a,
			int *mask)
{
	struct svd_ibcm *c = id->cm;
	enum svd_ibcm_state s = c->state;
	int connecting = s == IBCM_REQ_RCVD || s == IBCM_MRA_REQ_SENT ||
			 s == IBCM_REP_RCVD || s == IBCM_MRA_REP_SENT ||
			 s == IBCM_REP_SENT || s == IBCM_MRA_REP_RCVD ||
			 s == IBCM_ESTABLISHED;

	switch (a->qp_state) {
	case IBV_QPS_INIT:
		if (!connecting && s != IBCM_REQ_SENT && s != IBCM_MRA_REQ_RCVD)
			return -EINVAL;
		*mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
			IBV_QP_PORT;
		a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (c->responder_resources)
			a->qp_access_flags |= IBV_ACCESS_REMOTE_READ |
					      IBV_ACCESS_REMOTE_ATOMIC;
		a->pkey_index = 0;
		a->port_num = 1;
		return 0;
	case IBV_QPS_RTR:
		if (!connecting)
			return -EINVAL;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		svd_ibcm_path_ah(id, &a->ah_attr);
		a->path_mtu = c->path_mtu;
		a->dest_qp_num = c->remote_qpn;
		a->rq_psn = c->rq_psn;
		if (c->qp_type == IBV_QPT_RC || c->qp_type == IBV_QPT_XRC_RECV) {
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			a->max_dest_rd_atomic = c->responder_resources;
			a->min_rnr_timer = 0;
		}
		return 0;
	case IBV_QPS_RTS:
		if (!connecting)
			return -EINVAL;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		a->sq_psn = c->sq_psn;
		/* An XRC INI QP sends as an RC one; a TGT QP only answers:
		 * its timeout alone. */
		if (c->qp_type == IBV_QPT_RC || c->qp_type == IBV_QPT_XRC_SEND) {
			*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MAX_QP_RD_ATOMIC;
			a->retry_cnt = c->retry_count;
			a->rnr_retry = c->rnr_retry_count;
			a->max_rd_atomic = c->initiator_depth;
		}
		if (c->qp_type == IBV_QPT_RC || c->qp_type == IBV_QPT_XRC_SEND ||
		    c->qp_type == IBV_QPT_XRC_RECV) {
			*mask |= IBV_QP_TIMEOUT;
			a->timeout = c->av_timeout;
		}
		return 0;
	default:
		return -EINVAL;
	}
}

int svd_op_cm_init_qp_attr(struct svd_req *r)
{
	const struct sv_cm_int_req *req = r->body;
	struct sv_cm_qp_attr_rep *rep = r->rep;
	struct svd_cm_id *id;
	int mask = 0, err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	if (!id->bound_dev)
		return -EINVAL;
	if (req->val < IBV_QPS_RESET || req->val > IBV_QPS_ERR)
		return -EINVAL;
	memset(rep, 0, sizeof(*rep));
	rep->attr.qp_state = (enum ibv_qp_state)req->val;
	if (!id->cm || id->qp_type == IBV_QPT_UD)
		init_attr_nocm(id, &rep->attr, &mask);
	else
		err = init_attr_cm(id, &rep->attr, &mask);
	if (err)
		return err;
	if (rep->attr.qp_state == IBV_QPS_RTR)
		rep->attr.rq_psn = id->seq_num;
	if ((mask & IBV_QP_TIMEOUT) && id->timeout_set)
		rep->attr.timeout = id->timeout;
	rep->mask = mask;
	r->rep_len = sizeof(*rep);
	return 0;
}

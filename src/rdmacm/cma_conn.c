/* SPDX-License-Identifier: MIT */
/*
 * Connecting ids (cma.c has the devices, channels, ids and addresses):
 * rdma_connect, rdma_listen, rdma_accept, rdma_reject, rdma_notify,
 * rdma_disconnect, rdma_establish and ECE (joins: cma_mcast.c) -- each with
 * rdma-core's checks before it asks softverbsd's CM.
 */
#include "cma_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* rdma-core's ucma_valid_param: a TCP id needs a QP or parameters, and
 * no more RDMA resources than the device has. */
static int valid_param(struct cma_id_private *idp,
		       const struct rdma_conn_param *p)
{
	if (idp->id.ps != RDMA_PS_TCP)
		return 0;
	if (!idp->id.qp && !p)
		return cma_err(EINVAL);
	if (!p)
		return 0;
	if (!idp->cma_dev)
		return cma_err(EINVAL);
	if (p->responder_resources != RDMA_MAX_RESP_RES &&
	    p->responder_resources > idp->cma_dev->max_responder_resources)
		return cma_err(EINVAL);
	if (p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
	    p->initiator_depth > idp->cma_dev->max_initiator_depth)
		return cma_err(EINVAL);
	return 0;
}

/* The parameters sent with CONNECT/ACCEPT (ucma_copy_conn_param_to_kern):
 * the rdma_getaddrinfo connect data first, then the user's. */
static int fill_param(struct cma_id_private *idp, struct sv_cm_conn_param *d,
		      const struct rdma_conn_param *s, uint32_t qp_num,
		      uint8_t srq)
{
	size_t len = idp->connect_len + (s && s->private_data ?
					 s->private_data_len : 0);

	if (len > 255)
		return cma_err(EINVAL);
	d->qp_num = qp_num;
	d->srq = srq;
	d->responder_resources = idp->responder_resources;
	d->initiator_depth = idp->initiator_depth;
	d->valid = 1;
	if (idp->connect_len)
		memcpy(d->pdata, idp->connect, idp->connect_len);
	d->pdata_len = (uint8_t)idp->connect_len;
	if (s) {
		d->flow_control = s->flow_control;
		d->retry_count = s->retry_count;
		d->rnr_retry_count = s->rnr_retry_count;
		if (s->private_data && s->private_data_len) {
			memcpy(d->pdata + d->pdata_len, s->private_data,
			       s->private_data_len);
			d->pdata_len = (uint8_t)(d->pdata_len + s->private_data_len);
		}
	} else {
		d->retry_count = 7;
		d->rnr_retry_count = 7;
	}
	return 0;
}

SV_EXPORT int rdma_connect(struct rdma_cm_id *id,
			   struct rdma_conn_param *conn_param)
{
	struct cma_id_private *idp;
	struct sv_cm_conn_req req;
	uint32_t qp_num = conn_param ? conn_param->qp_num : 0;
	uint8_t srq = conn_param ? conn_param->srq : 0;

	if (!id)
		return cma_err(EINVAL);
	idp = to_idp(id);
	if (valid_param(idp, conn_param))
		return -1;
	if (conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH)
		idp->initiator_depth = conn_param->initiator_depth;
	else if (idp->cma_dev)
		idp->initiator_depth = idp->cma_dev->max_initiator_depth;
	if (conn_param && conn_param->responder_resources != RDMA_MAX_RESP_RES)
		idp->responder_resources = conn_param->responder_resources;
	else if (idp->cma_dev)
		idp->responder_resources = idp->cma_dev->max_responder_resources;
	if (id->qp) {
		qp_num = id->qp->qp_num;
		srq = !!id->qp->srq;
	}
	memset(&req, 0, sizeof(req));
	cma_hdr(idp, &req.h);
	if (fill_param(idp, &req.p, conn_param, qp_num, srq))
		return -1;
	req.p.ece_vendor_id = idp->local_ece.vendor_id;
	req.p.ece_attr_mod = idp->local_ece.options;
	if (cma_call(id->channel, SV_OP_CM_CONNECT, &req, sizeof(req), NULL, 0))
		return -1;
	if (idp->connect_len) {
		free(idp->connect);
		idp->connect = NULL;
		idp->connect_len = 0;
	}
	return cma_complete(id);
}

SV_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct sv_cm_int_req req;

	if (!id)
		return cma_err(EINVAL);
	memset(&req, 0, sizeof(req));
	cma_hdr(to_idp(id), &req.h);
	req.val = backlog;
	if (cma_call(id->channel, SV_OP_CM_LISTEN, &req, sizeof(req), NULL, 0))
		return -1;
	return cma_query(id);
}

int cma_send_accept(struct cma_id_private *idp,
		    const struct rdma_conn_param *param, uint32_t qp_num,
		    uint8_t srq, int valid)
{
	struct sv_cm_conn_req req;

	memset(&req, 0, sizeof(req));
	cma_hdr(idp, &req.h);
	if (valid) {
		if (fill_param(idp, &req.p, param, qp_num, srq))
			return -1;
		if (param && idp->id.qp_type == IBV_QPT_UD)
			req.p.qkey = 0; /* the default Q_Key */
		/* ECE: the answer to the peer's offer, in its vendor's name:
		 * the options accepted here (rdma_set_local_ece, or the QP's:
		 * cma_qp.c init_ece), none when nothing was accepted. */
		req.p.ece_vendor_id = idp->remote_ece.vendor_id;
		req.p.ece_attr_mod = idp->local_ece.options;
	}
	return cma_call(idp->id.channel, SV_OP_CM_ACCEPT, &req, sizeof(req),
			NULL, 0);
}

SV_EXPORT int rdma_accept(struct rdma_cm_id *id,
			  struct rdma_conn_param *conn_param)
{
	struct cma_id_private *idp;
	uint32_t qp_num;
	uint8_t srq;
	int ret;

	if (!id)
		return cma_err(EINVAL);
	idp = to_idp(id);
	if (valid_param(idp, conn_param))
		return -1;
	qp_num = id->qp ? id->qp->qp_num : conn_param ? conn_param->qp_num : 0;
	srq = id->qp ? !!id->qp->srq : conn_param ? conn_param->srq : 0;
	if (idp->cma_dev) {
		if (!conn_param || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH)
			idp->initiator_depth =
				idp->initiator_depth < idp->cma_dev->max_initiator_depth ?
					idp->initiator_depth :
					idp->cma_dev->max_initiator_depth;
		else
			idp->initiator_depth = conn_param->initiator_depth;
		if (!conn_param ||
		    conn_param->responder_resources == RDMA_MAX_RESP_RES)
			idp->responder_resources =
				idp->responder_resources <
						idp->cma_dev->max_responder_resources ?
					idp->responder_resources :
					idp->cma_dev->max_responder_resources;
		else
			idp->responder_resources = conn_param->responder_resources;
	}
	if (id->qp_type != IBV_QPT_UD) {
		ret = cma_modify_qp_rtr(id, idp->responder_resources);
		if (ret)
			return ret;
		ret = cma_modify_qp_rts(id, idp->initiator_depth);
		if (ret)
			return ret;
	}
	if (cma_send_accept(idp, conn_param, qp_num, srq, 1)) {
		int e = errno;

		cma_modify_qp_err(id);
		return cma_err(e);
	}
	if (id->qp_type == IBV_QPT_UD) {
		if (idp->sync && id->event) {
			rdma_ack_cm_event(id->event);
			id->event = NULL;
		}
		return 0;
	}
	return cma_complete(id);
}

static int reject(struct rdma_cm_id *id, const void *pdata, uint8_t len,
		  uint16_t reason)
{
	struct sv_cm_conn_req req;

	if (!id)
		return cma_err(EINVAL);
	memset(&req, 0, sizeof(req));
	cma_hdr(to_idp(id), &req.h);
	if (pdata && len) {
		memcpy(req.p.pdata, pdata, len);
		req.p.pdata_len = len;
	}
	req.p.reason = reason;
	return cma_call(id->channel, SV_OP_CM_REJECT, &req, sizeof(req), NULL, 0);
}

SV_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			  uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, 0);
}

SV_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			      uint8_t private_data_len)
{
	/* IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED */
	return reject(id, private_data, private_data_len, 35);
}

SV_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct sv_cm_int_req req;

	if (!id)
		return cma_err(EINVAL);
	memset(&req, 0, sizeof(req));
	cma_hdr(to_idp(id), &req.h);
	req.val = event;
	return cma_call(id->channel, SV_OP_CM_NOTIFY, &req, sizeof(req), NULL, 0);
}

SV_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct sv_cm_hdr h;

	if (!id || !id->verbs || !id->verbs->device)
		return cma_err(EINVAL);
	/* An IB transport: the QP goes to the error state first. */
	if (cma_modify_qp_err(id))
		return -1;
	cma_hdr(to_idp(id), &h);
	if (cma_call(id->channel, SV_OP_CM_DISCONNECT, &h, sizeof(h), NULL, 0))
		return -1;
	return cma_complete(id);
}

SV_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	if (!id || id->qp)
		return cma_err(EINVAL);
	/* No QP to move: just the RTU to the passive side. */
	return cma_send_accept(to_idp(id), NULL, 0, 0, 0);
}

SV_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cma_id_private *idp;

	if (!id || id->qp || !ece || !ece->vendor_id || ece->comp_mask)
		return cma_err(EINVAL);
	idp = to_idp(id);
	idp->local_ece.vendor_id = ece->vendor_id;
	idp->local_ece.options = ece->options;
	return 0;
}

SV_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cma_id_private *idp;

	if (!id || id->qp || !ece)
		return cma_err(EINVAL);
	idp = to_idp(id);
	ece->vendor_id = idp->remote_ece.vendor_id;
	ece->options = idp->remote_ece.options;
	ece->comp_mask = 0;
	return 0;
}


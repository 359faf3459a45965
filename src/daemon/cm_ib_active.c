/* SPDX-License-Identifier: MIT */
/*
 * The active side of the IB CM (IBTA 12.6, 12.11; the kernel's
 * cma_connect_ib, cma_resolve_ib_udp, cma_rep_recv): rdma_connect sends
 * the request -- a REQ for RC and UC, a SIDR_REQ for UD, one path that
 * differs only in the message and its wait -- and the answers come here:
 * a REP (the application hears CONNECT_RESPONSE, and its rdma_accept
 * without parameters sends the RTU) or a SIDR_REP (ESTABLISHED with the
 * peer's QPN and Q_Key, or UNREACHABLE).  Design: the top of cm_ib.c.
 */
#include "cm_ib_int.h"
#include "svd_ops.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include <rdma/rdma_cma.h>

static uint64_t service_id(const struct svd_cm_id *id)
{
	return ((uint64_t)id->ps << 16) | svd_cm_port(&id->dst);
}

/* | cma_version | ip_version << 4 | src port (be16) | src addr | dst addr |
 * addresses as 16 bytes, IPv4 in the last 4 (the kernel's struct cma_hdr). */
static void cma_hdr_put(uint8_t *p, const struct svd_cm_id *id)
{
	memset(p, 0, CMA_HDR_LEN);
	p[0] = 0; /* CMA_VERSION */
	if (id->src.sa.sa_family == AF_INET) {
		p[1] = 4 << 4;
		memcpy(p + 2, &id->src.in.sin_port, 2);
		memcpy(p + 4 + 12, &id->src.in.sin_addr, 4);
		memcpy(p + 20 + 12, &id->dst.in.sin_addr, 4);
	} else {
		p[1] = 6 << 4;
		memcpy(p + 2, &id->src.in6.sin6_port, 2);
		memcpy(p + 4, &id->src.in6.sin6_addr, 16);
		memcpy(p + 20, &id->dst.in6.sin6_addr, 16);
	}
}

/* The kernel's cm_ack_timeout: the QP's ACK timeout from the peer's CA
 * ACK delay and the path's packet life time. */
static uint8_t ack_timeout(uint8_t ca_ack_delay, uint8_t plt)
{
	int t = plt + 1;

	if (t >= ca_ack_delay)
		t += ca_ack_delay >= t - 1;
	else
		t = ca_ack_delay + (t >= ca_ack_delay - 1);
	return (uint8_t)(t > 31 ? 31 : t);
}

/* The REQ (RC, UC) and what its connection keeps of it. */
static void req_out(struct svd_ibcm *c, struct svd_cm_id *id,
		    const struct sv_cm_conn_param *p)
{
	struct svd_cm_msg *m = &c->out;

	c->local_qpn = id->qp_num;
	c->rq_psn = id->seq_num;
	c->responder_resources = p->responder_resources;
	c->initiator_depth = p->initiator_depth;
	c->retry_count = p->retry_count > 7 ? 7 : p->retry_count;
	c->rnr_retry_count = p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count;
	c->flow_control = p->flow_control;
	c->path_mtu = id->path.mtu;
	c->av_timeout = (uint8_t)(id->path.packet_life_time + 1);

	svd_ibcm_msg_init(m, c, CM_ATTR_REQ);
	m->req.local_comm_id = c->local_id;
	m->req.service_id = c->service_id;
	m->req.local_ca_guid = svd.node_guid;
	m->req.local_qpn = c->local_qpn;
	m->req.responder_resources = c->responder_resources;
	m->req.initiator_depth = c->initiator_depth;
	m->req.remote_cm_response_timeout = CMA_CM_RESPONSE_TIMEOUT;
	/* XRC: the extended transport (3), XRC (1); an INI QP has no
	 * receive side, so the kernel's cm_format_req leaves its
	 * responder resources, retry counts and SRQ bit out (zero). */
	m->req.transport_service_type = id->qp_type == IBV_QPT_UC ? 1 :
					id->qp_type == IBV_QPT_XRC_SEND ? 3 : 0;
	m->req.ext_transport_type = id->qp_type == IBV_QPT_XRC_SEND;
	m->req.flow_control = c->flow_control;
	m->req.starting_psn = c->rq_psn;
	m->req.local_cm_response_timeout = CMA_CM_RESPONSE_TIMEOUT;
	m->req.retry_count = c->retry_count;
	m->req.pkey = CM_DEFAULT_PKEY;
	m->req.path_mtu = c->path_mtu;
	m->req.rnr_retry_count = c->rnr_retry_count;
	m->req.max_cm_retries = CMA_MAX_CM_RETRIES;
	m->req.srq = id->srq;
	if (id->qp_type == IBV_QPT_XRC_SEND) {
		m->req.responder_resources = 0;
		m->req.retry_count = 0;
		m->req.rnr_retry_count = 0;
		m->req.srq = 0;
	}
	memcpy(m->req.primary_local_gid, c->local_gid, 16);
	memcpy(m->req.primary_remote_gid, c->remote_gid, 16);
	/* No LIDs on RoCE: beyond one hop the kernel's cm_format_req puts
	 * the permissive LID at both ends. */
	if (id->path.hop_limit > 1) {
		m->req.primary_local_lid = 0xffff;
		m->req.primary_remote_lid = 0xffff;
	}
	m->req.primary_flow_label = be32toh(id->path.flow_label);
	m->req.primary_packet_rate = id->path.rate;
	m->req.primary_traffic_class = id->path.traffic_class;
	m->req.primary_hop_limit = id->path.hop_limit;
	m->req.primary_sl = id->path.sl;
	m->req.primary_subnet_local = id->path.hop_limit <= 1;
	m->req.primary_local_ack_timeout =
		ack_timeout(SVD_LOCAL_CA_ACK_DELAY, id->path.packet_life_time);
	m->req.ece_vendor_id = p->ece_vendor_id;
	m->req.ece_attr_mod = p->ece_attr_mod;
}

/* The SIDR_REQ (UD): it asks for the peer's QPN and Q_Key alone. */
static void sidr_req_out(struct svd_ibcm *c)
{
	struct svd_cm_msg *m = &c->out;

	svd_ibcm_msg_init(m, c, CM_ATTR_SIDR_REQ);
	m->sidr_req.request_id = c->local_id;
	m->sidr_req.pkey = CM_DEFAULT_PKEY;
	m->sidr_req.service_id = c->service_id;
}

/*
 * rdma_connect: a connection for id, its GIDs and its MADs' GRH from the
 * route, a new exchange; the request (REQ, or SIDR_REQ for UD) carries
 * the cma header and the application's private data, and waits for its
 * answer: a REQ the CM response timeout plus twice the packet life time,
 * a SIDR_REQ the response timeout alone (the kernel's cma_connect_ib and
 * cma_resolve_ib_udp).  0, -EINVAL (private data too long), -ENOMEM.
 */
static int send_request(struct svd_cm_id *id, const struct sv_cm_conn_param *p)
{
	int ud = id->qp_type == IBV_QPT_UD;
	int room = ud ? CM_SIDR_REQ_PDATA : CM_REQ_PDATA;
	struct svd_ibcm *c;
	uint8_t *pdata;
	uint64_t wait_ms;

	if (CMA_HDR_LEN + p->pdata_len > room)
		return -EINVAL;
	c = svd_ibcm_new(id);
	if (!c)
		return -ENOMEM;
	c->service_id = service_id(id);
	memcpy(c->local_gid, id->sgid, 16);
	memcpy(c->remote_gid, id->dgid, 16);
	c->tclass = id->path.traffic_class;
	c->hop_limit = id->path.hop_limit;
	c->flow_label = be32toh(id->path.flow_label);
	svd_ibcm_new_tid(c);
	c->qp_type = (uint8_t)id->qp_type;
	if (ud) {
		sidr_req_out(c);
		pdata = c->out.sidr_req.private_data;
		c->state = IBCM_SIDR_REQ_SENT;
		wait_ms = svd_cm_ms(CMA_CM_RESPONSE_TIMEOUT);
	} else {
		req_out(c, id, p);
		pdata = c->out.req.private_data;
		c->state = IBCM_REQ_SENT;
		wait_ms = 2 * svd_cm_ms(id->path.packet_life_time) +
			  svd_cm_ms(CMA_CM_RESPONSE_TIMEOUT);
	}
	cma_hdr_put(pdata, id);
	memcpy(pdata + CMA_HDR_LEN, p->pdata, p->pdata_len);
	svd_ibcm_send_expecting(c, wait_ms);
	return 0;
}

int svd_op_cm_connect(struct svd_req *r)
{
	const struct sv_cm_conn_req *req = r->body;
	struct svd_cm_id *id;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	if (id->state != CMS_ROUTE_RESOLVED || id->cm)
		return -EINVAL;
	id->state = CMS_CONNECT;
	svd_ibcm_conn_param(id, &req->p);
	err = send_request(id, &req->p);
	if (err) {
		if (id->cm)
			svd_ibcm_id_gone(id);
		id->state = CMS_ROUTE_RESOLVED;
	}
	return err;
}

void svd_ibcm_recv_rep(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = svd_ibcm_by_local(m, m->rep.remote_comm_id);
	struct sv_cm_event ev;

	if (!c) {
		/* Nobody here: the REP's sender learns (cm_issue_rej). */
		struct svd_cm_msg r;

		svd_ibcm_msg_answer(&r, m, CM_ATTR_REJ);
		r.rej.remote_comm_id = m->rep.local_comm_id;
		r.rej.message_rejected = 1;
		r.rej.reason = CM_REJ_INVALID_COMM_ID;
		svd_cm_send(&r);
		return;
	}
	if (c->state == IBCM_MRA_REP_SENT) {
		/* A REP again while our rdma_cm id moves its QP: now the
		 * delayed MRA goes (cm_dup_rep_handler). */
		svd_ibcm_send_mra(c, 1);
		return;
	}
	if (c->state == IBCM_ESTABLISHED &&
	    c->remote_id == m->rep.local_comm_id) {
		/* Our RTU was lost (cm_dup_rep_handler). */
		svd_ibcm_send_reply(c, CM_ATTR_RTU);
		return;
	}
	if (c->state != IBCM_REQ_SENT && c->state != IBCM_MRA_REQ_RCVD)
		return;
	svd_timer_cancel(&c->timer);
	c->remote_id = m->rep.local_comm_id;
	c->remote_guid = m->rep.local_ca_guid;
	/* An XRC TGT QP's number comes as the REP's local EE context
	 * (the kernel's cm_rep_get_qpn). */
	c->remote_qpn = c->qp_type == IBV_QPT_XRC_SEND ? m->rep.local_eecn :
							 m->rep.local_qpn;
	c->sq_psn = m->rep.starting_psn;
	c->initiator_depth = m->rep.responder_resources;
	c->responder_resources = m->rep.initiator_depth;
	c->rnr_retry_count = m->rep.rnr_retry_count;
	c->av_timeout = ack_timeout(clamp(m->rep.target_ack_delay,
					  SV_CM_MAX_ACK_TIMEOUT),
				    (uint8_t)(c->av_timeout - 1));
	c->state = IBCM_REP_RCVD;
	if (!svd_ibcm_id_wants(c, 0))
		return;
	c->id->ece_vendor_id = m->rep.ece_vendor_id;
	c->id->ece_attr_mod = m->rep.ece_attr_mod;
	/* The rdma_cm takes its time to move the QP (CMA_CM_MRA_SETTING):
	 * the MRA is delayed, it goes only for a duplicate REP. */
	if (c->qp_type != IBV_QPT_UD)
		c->state = IBCM_MRA_REP_SENT;
	svd_ibcm_ev_init(&ev, c->id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
	memcpy(ev.conn.pdata, m->rep.private_data, CM_REP_PDATA);
	ev.conn.pdata_len = CM_REP_PDATA;
	ev.conn.responder_resources = m->rep.initiator_depth;
	ev.conn.initiator_depth = m->rep.responder_resources;
	ev.conn.flow_control = m->rep.flow_control;
	ev.conn.rnr_retry_count = m->rep.rnr_retry_count;
	ev.conn.srq = m->rep.srq;
	ev.conn.qp_num = c->remote_qpn;
	ev.conn.ece_vendor_id = m->rep.ece_vendor_id;
	ev.conn.ece_attr_mod = m->rep.ece_attr_mod;
	svd_cm_post(c->id, NULL, &ev);
}

/* The requester's answer to a REP once its QP is ready (cma_rep_recv). */
int svd_ibcm_send_rtu(struct svd_cm_id *id)
{
	struct svd_ibcm *c = id->cm;

	if (c->state != IBCM_REP_RCVD && c->state != IBCM_MRA_REP_SENT)
		return -EINVAL;
	svd_ibcm_send_reply(c, CM_ATTR_RTU);
	c->state = IBCM_ESTABLISHED;
	return 0;
}

void svd_ibcm_recv_sidr_rep(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = svd_ibcm_by_local(m, m->sidr_rep.request_id);
	struct sv_cm_event ev;
	struct svd_cm_id *id;

	if (!c || c->state != IBCM_SIDR_REQ_SENT)
		return;
	svd_timer_cancel(&c->timer);
	c->state = IBCM_IDLE;
	if (!svd_ibcm_id_wants(c, 0)) {
		if (!c->id)
			svd_ibcm_free(c);
		return;
	}
	id = c->id;
	svd_ibcm_ev_init(&ev, id, RDMA_CM_EVENT_ESTABLISHED, 0);
	memcpy(ev.conn.pdata, m->sidr_rep.private_data, CM_SIDR_REP_PDATA);
	ev.conn.pdata_len = CM_SIDR_REP_PDATA;
	if (m->sidr_rep.status != SIDR_SUCCESS) {
		ev.event = RDMA_CM_EVENT_UNREACHABLE;
		ev.status = m->sidr_rep.status;
	} else if (id->qkey && m->sidr_rep.qkey && id->qkey != m->sidr_rep.qkey) {
		ev.event = RDMA_CM_EVENT_ADDR_ERROR;
		ev.status = -EINVAL;
	} else {
		if (m->sidr_rep.qkey)
			id->qkey = m->sidr_rep.qkey;
		svd_ibcm_path_ah(id, &ev.ah_attr);
		ev.ud_qpn = m->sidr_rep.qpn;
		ev.ud_qkey = m->sidr_rep.qkey;
	}
	svd_cm_post(id, NULL, &ev);
}

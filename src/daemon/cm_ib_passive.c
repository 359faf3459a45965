/* SPDX-License-Identifier: MIT */
/*
 * The passive side of the IB CM (IBTA 12.6, 12.11; the kernel's
 * cma_ib_req_handler, cma_req_handler, cm_req_handler and their SIDR
 * twins): a REQ or SIDR_REQ comes in, finds its listener by service ID and
 * cma header, is bounded (half-open connections per listener and per
 * source), makes a new rdma_cm id and a CONNECT_REQUEST; rdma_accept
 * answers with a REP (RC, UC) or a SIDR_REP (UD), rdma_reject with a REJ
 * or a SIDR_REP "rejected"; the RTU establishes.  Design, and what a
 * hostile REQ can and cannot make us do: the top of cm_ib.c.
 */
#include "cm_ib_int.h"
#include "svd_ops.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include <rdma/rdma_cma.h>

/* ---- the cma header in REQ and SIDR_REQ private data ------------------- */

/* The request's addresses: src = the sender's, dst = the one it asked
 * for; port of dst from the service ID.  -EINVAL if not a cma header. */
static int cma_hdr_get(const uint8_t *p, uint64_t service_id,
		       union sv_sockaddr *src, union sv_sockaddr *dst)
{
	memset(src, 0, sizeof(*src));
	memset(dst, 0, sizeof(*dst));
	if (p[0] != 0)
		return -EINVAL;
	switch (p[1] >> 4) {
	case 4:
		src->in.sin_family = dst->in.sin_family = AF_INET;
		memcpy(&src->in.sin_port, p + 2, 2);
		memcpy(&src->in.sin_addr, p + 4 + 12, 4);
		memcpy(&dst->in.sin_addr, p + 20 + 12, 4);
		break;
	case 6:
		src->in6.sin6_family = dst->in6.sin6_family = AF_INET6;
		memcpy(&src->in6.sin6_port, p + 2, 2);
		memcpy(&src->in6.sin6_addr, p + 4, 16);
		memcpy(&dst->in6.sin6_addr, p + 20, 16);
		break;
	default:
		return -EAFNOSUPPORT;
	}
	svd_cm_set_port(dst, (uint16_t)service_id);
	return 0;
}

/* The kernel's cma_match_private_data. */
static int listener_matches(const struct svd_cm_id *l,
			    const union sv_sockaddr *dst)
{
	if (svd_cm_any_addr(&l->src) && !l->afonly)
		return 1;
	if (l->src.sa.sa_family != dst->sa.sa_family)
		return 0;
	return svd_cm_any_addr(&l->src) || svd_cm_addr_eq(&l->src, dst);
}

/* A new id for an incoming request (cma_new_conn_id / cma_new_udp_id). */
static struct svd_cm_id *conn_id_new(struct svd_cm_id *l, uint32_t qp_type,
				     const union sv_sockaddr *src,
				     const union sv_sockaddr *dst,
				     const uint8_t *local_gid,
				     const uint8_t *remote_gid)
{
	struct svd_cm_id *id = svd_cm_id_new(l->chan, l->ps, qp_type,
					     l->chan->pid);

	if (!id)
		return NULL;
	id->src = *dst; /* ours: the address the request was for */
	svd_cm_set_port(&id->src, svd_cm_port(&l->src));
	id->dst = *src;
	if (svd_cm_acquire_dev(id)) {
		/* The request came to a GID of ours all the same. */
		int idx = svd_cm_gid_index(local_gid);

		if (idx < 0) {
			svd_cm_id_destroy(id);
			return NULL;
		}
		memcpy(id->sgid, local_gid, 16);
		id->sgid_index = (uint32_t)idx;
		id->bound_dev = 1;
		id->hop_limit = 64;
	}
	memcpy(id->dgid, remote_gid, 16);
	id->state = CMS_CONNECT;
	return id;
}

/* The rdma_cm port a service ID names, if an id listens on it; NULL is
 * the kernel's cm_match_req finding no listener for the service ID. */
static struct svd_cm_bind *service_bind(uint64_t sid)
{
	struct svd_cm_bind *b;

	if (sid >> 32)
		return NULL; /* not an IP service ID (RDMA_IB_IP_PS_MASK) */
	b = svd_cm_bind_find((uint32_t)(sid >> 16) & 0xffff, (uint16_t)sid);
	for (struct svd_cm_id *o = b ? b->owners : NULL; o; o = o->bind_next)
		if (o->state == CMS_LISTEN)
			return b;
	return NULL;
}

/* The listener of b that takes a request (REQ or SIDR_REQ m, its private
 * data pdata starting with the cma header) for a QP of type qp_type, the
 * request's addresses in *src and *dst; NULL when the rdma_cm refuses it
 * (cma_ib_req_handler, cma_match_private_data).  From another host, the
 * address asked for must be the one whose GID the request came to
 * (cma_get_net_dev: the netdev of the GID must own the address), and the
 * address it comes from the one whose GID sent it: the application is
 * told that address as its peer's, and our answers go to the sender. */
static struct svd_cm_id *req_listener(const struct svd_cm_msg *m,
				      struct svd_cm_bind *b, const uint8_t *pdata,
				      uint64_t sid, uint32_t qp_type,
				      union sv_sockaddr *src,
				      union sv_sockaddr *dst)
{
	uint8_t gid[16];

	if (cma_hdr_get(pdata, sid, src, dst))
		return NULL;
	svd_cm_ip2gid(dst, gid);
	if (m->wire && memcmp(gid, m->dgid, 16))
		return NULL;
	svd_cm_ip2gid(src, gid);
	if (m->wire && memcmp(gid, m->sgid, 16))
		return NULL;
	for (struct svd_cm_id *o = b->owners; o; o = o->bind_next) {
		if (o->state != CMS_LISTEN || !listener_matches(o, dst))
			continue;
		if (qp_type == IBV_QPT_UD ? o->qp_type == IBV_QPT_UD :
		    !o->qp_type || o->qp_type == qp_type)
			return o;
	}
	return NULL;
}

/*
 * Room for one more half-open connection on listener l from the sender of
 * m: 0, or the counter of the bound that refuses it (SV_CM_MAX_HALF_OPEN_*,
 * sv_param.h).  The source's bound counts only requests from other hosts:
 * this host's own are the listener's business alone.
 */
static uint64_t *half_open_full(const struct svd_cm_id *l,
				const struct svd_cm_msg *m)
{
	uint32_t on_l = 0, from_src = 0;

	for (struct svd_ibcm *c = svd_ibcm_list; c; c = c->next) {
		if (!c->listener || !svd_ibcm_half_open(c))
			continue;
		on_l += c->listener == l->handle;
		from_src += m->wire && !memcmp(c->remote_gid, m->sgid, 16);
	}
	if (on_l >= SV_CM_MAX_HALF_OPEN_LISTENER)
		return &svd_ibcm_counters.rej_listener;
	if (from_src >= SV_CM_MAX_HALF_OPEN_SOURCE)
		return &svd_ibcm_counters.rej_source;
	return NULL;
}

/* ---- requests in ------------------------------------------------------- */

void svd_ibcm_recv_req(const struct svd_cm_msg *m)
{
	union sv_sockaddr src, dst;
	struct svd_cm_bind *b;
	struct svd_cm_id *l, *id;
	struct svd_ibcm *c;
	struct sv_cm_event ev;
	/* The kernel's cm_req_get_qp_type: RC, UC, or XRC (extended
	 * transport 3, XRC 1) for a TGT QP here. */
	uint32_t qp_type = m->req.transport_service_type == 0 ? IBV_QPT_RC :
			   m->req.transport_service_type == 1 ? IBV_QPT_UC :
			   m->req.transport_service_type == 3 &&
					   m->req.ext_transport_type == 1 ?
				   IBV_QPT_XRC_RECV :
				   0;
	/* From another host our GID is the one the REQ came to, and the
	 * peer's the one it came from (the GRH): never the GIDs its primary
	 * path names (cm_init_av_for_response). */
	const uint8_t *local_gid = m->wire ? m->dgid : m->req.primary_remote_gid;
	const uint8_t *remote_gid = m->wire ? m->sgid : m->req.primary_local_gid;
	/* What the REQ asks for, within bounds (sv_param.h SV_CM_MAX_*). */
	uint8_t ack = clamp(m->req.primary_local_ack_timeout,
			    SV_CM_MAX_ACK_TIMEOUT);
	uint8_t plt = (uint8_t)(ack - (ack > 0));
	uint64_t *full;

	/* A REQ we have: answer it again (cm_dup_req_handler); in
	 * MRA_REQ_SENT that is the delayed MRA's moment, and the requester,
	 * alive, may now wait each try an MRA's time. */
	c = svd_ibcm_by_remote(m, m->req.local_comm_id, m->req.local_ca_guid);
	if (c) {
		if (c->state == IBCM_MRA_REQ_SENT) {
			svd_ibcm_send_mra(c, 0);
			svd_timer_arm(&c->timer, svd_ibcm_req_budget(c, 1));
		}
		return;
	}
	if (!qp_type) {
		/* A transport no QP here has: no listener can take it. */
		svd_ibcm_issue_rej(m, CM_REJ_CONSUMER_DEFINED);
		return;
	}
	b = service_bind(m->req.service_id);
	if (!b) {
		/* No listener for the service ID at all (cm_match_req). */
		svd_ibcm_issue_rej(m, CM_REJ_INVALID_SERVICE_ID);
		return;
	}
	l = req_listener(m, b, m->req.private_data, m->req.service_id, qp_type,
			 &src, &dst);
	if (!l) {
		/* The rdma_cm refuses it: the new cm_id dies with a REJ. */
		svd_ibcm_issue_rej(m, CM_REJ_CONSUMER_DEFINED);
		return;
	}
	full = half_open_full(l, m);
	if (full) {
		(*full)++;
		svd_ibcm_issue_rej(m, CM_REJ_NO_RESOURCES);
		return;
	}
	id = conn_id_new(l, qp_type, &src, &dst, local_gid, remote_gid);
	c = id ? svd_ibcm_new(id) : NULL;
	if (!c) {
		if (id)
			svd_cm_id_destroy(id);
		svd_ibcm_issue_rej(m, CM_REJ_CONSUMER_DEFINED);
		return;
	}
	/* The path the request names, as the passive side sees it. */
	svd_cm_make_path(id);
	id->path.mtu = m->req.path_mtu;
	id->path.hop_limit = m->req.primary_hop_limit;
	id->path.traffic_class = m->req.primary_traffic_class;
	id->path.flow_label = htobe32(m->req.primary_flow_label);
	id->path.sl = m->req.primary_sl;
	id->path.packet_life_time = plt;
	id->have_route = 1;
	id->ece_vendor_id = m->req.ece_vendor_id;
	id->ece_attr_mod = m->req.ece_attr_mod;

	c->state = IBCM_REQ_RCVD;
	c->tid = m->tid;
	c->tclass = m->req.primary_traffic_class;
	c->hop_limit = m->req.primary_hop_limit;
	c->flow_label = m->req.primary_flow_label;
	c->remote_id = m->req.local_comm_id;
	c->remote_guid = m->req.local_ca_guid;
	c->service_id = m->req.service_id;
	c->listener = l->handle;
	memcpy(c->local_gid, local_gid, 16);
	memcpy(c->remote_gid, remote_gid, 16);
	c->remote_qpn = m->req.local_qpn;
	c->sq_psn = m->req.starting_psn;
	c->rq_psn = id->seq_num;
	c->qp_type = (uint8_t)qp_type;
	/* Seen from here, the requester's resources swap over. */
	c->responder_resources = m->req.initiator_depth;
	c->initiator_depth = m->req.responder_resources;
	c->path_mtu = m->req.path_mtu;
	c->retry_count = m->req.retry_count;
	c->rnr_retry_count = m->req.rnr_retry_count;
	c->flow_control = m->req.flow_control;
	c->av_timeout = (uint8_t)(plt + 1);
	c->max_cm_retries = clamp(m->req.max_cm_retries, SV_CM_MAX_CM_RETRIES);
	c->timeout_ms = svd_cm_ms(clamp(m->req.local_cm_response_timeout,
					SV_CM_MAX_RESPONSE_TIMEOUT));
	c->req_wait_ms = svd_cm_ms(clamp(m->req.remote_cm_response_timeout,
					 SV_CM_MAX_RESPONSE_TIMEOUT)) +
			 2 * svd_cm_ms(plt);

	svd_ibcm_ev_init(&ev, l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	ev.id = id->handle;
	ev.listen_id = l->handle;
	memcpy(ev.conn.pdata, m->req.private_data + CMA_HDR_LEN,
	       CM_REQ_PDATA - CMA_HDR_LEN);
	ev.conn.pdata_len = CM_REQ_PDATA - CMA_HDR_LEN;
	ev.conn.responder_resources = m->req.initiator_depth;
	ev.conn.initiator_depth = m->req.responder_resources;
	ev.conn.flow_control = m->req.flow_control;
	ev.conn.retry_count = m->req.retry_count;
	ev.conn.rnr_retry_count = m->req.rnr_retry_count;
	ev.conn.srq = m->req.srq;
	ev.conn.qp_num = m->req.local_qpn;
	ev.conn.ece_vendor_id = m->req.ece_vendor_id;
	ev.conn.ece_attr_mod = m->req.ece_attr_mod;
	if (svd_cm_post_request(l, id, &ev)) {
		/* Backlog full: dropped without a word (-ENOMEM); the
		 * requester sends its REQ again after its timeout. */
		c->state = IBCM_IDLE;
		svd_cm_id_destroy(id);
		return;
	}
	/* The rdma_cm asks for time to answer (CMA_CM_MRA_SETTING), with
	 * the delay flag: the MRA goes only for a duplicate REQ.  Until the
	 * requester gives up, and no longer (request_expired). */
	c->state = IBCM_MRA_REQ_SENT;
	svd_timer_arm(&c->timer, svd_ibcm_req_budget(c, 0));
}

void svd_ibcm_recv_sidr_req(const struct svd_cm_msg *m)
{
	union sv_sockaddr src, dst;
	struct svd_cm_bind *b;
	struct svd_cm_id *l, *id;
	struct svd_ibcm *c, tmp;
	struct sv_cm_event ev;
	uint64_t *full;

	memset(&tmp, 0, sizeof(tmp));
	tmp.remote_id = m->sidr_req.request_id;
	tmp.service_id = m->sidr_req.service_id;
	tmp.tid = m->tid;
	tmp.tclass = m->tclass;
	tmp.flow_label = m->flow_label;
	memcpy(tmp.local_gid, m->dgid, 16);
	memcpy(tmp.remote_gid, m->sgid, 16);
	for (c = svd_ibcm_list; c; c = c->next)
		if (c->state == IBCM_SIDR_REQ_RCVD &&
		    c->remote_id == m->sidr_req.request_id &&
		    !memcmp(c->remote_gid, m->sgid, 16)) {
			/* A duplicate: it is being answered, and its
			 * requester is still there. */
			svd_timer_arm(&c->timer, svd_ibcm_req_budget(c, 0));
			return;
		}
	b = service_bind(m->sidr_req.service_id);
	if (!b) {
		svd_ibcm_sidr_rep(&tmp, SIDR_UNSUPPORTED, 0, 0, NULL, 0);
		return;
	}
	l = req_listener(m, b, m->sidr_req.private_data,
			 m->sidr_req.service_id, IBV_QPT_UD, &src, &dst);
	full = l ? half_open_full(l, m) : NULL;
	if (full) {
		(*full)++;
		svd_ibcm_sidr_rep(&tmp, SIDR_REJECT, 0, 0, NULL, 0);
		return;
	}
	id = l ? conn_id_new(l, IBV_QPT_UD, &src, &dst, m->dgid, m->sgid) :
		 NULL;
	c = id ? svd_ibcm_new(id) : NULL;
	if (!c) {
		if (id)
			svd_cm_id_destroy(id);
		svd_ibcm_sidr_rep(&tmp, SIDR_REJECT, 0, 0, NULL, 0);
		return;
	}
	svd_cm_make_path(id);
	id->have_route = 1;
	c->state = IBCM_SIDR_REQ_RCVD;
	c->tid = m->tid;
	c->tclass = m->tclass;
	c->flow_label = m->flow_label;
	c->remote_id = m->sidr_req.request_id;
	c->service_id = m->sidr_req.service_id;
	c->listener = l->handle;
	/* A SIDR_REQ names no timeouts: its requester waits as the rdma_cm's
	 * does (send_request in cm_ib_active.c, the kernel's
	 * cma_resolve_ib_udp). */
	c->max_cm_retries = CMA_MAX_CM_RETRIES;
	c->req_wait_ms = svd_cm_ms(CMA_CM_RESPONSE_TIMEOUT);
	memcpy(c->local_gid, m->dgid, 16);
	memcpy(c->remote_gid, m->sgid, 16);
	c->qp_type = IBV_QPT_UD;

	svd_ibcm_ev_init(&ev, l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	ev.id = id->handle;
	ev.listen_id = l->handle;
	memcpy(ev.conn.pdata, m->sidr_req.private_data + CMA_HDR_LEN,
	       CM_SIDR_REQ_PDATA - CMA_HDR_LEN);
	ev.conn.pdata_len = CM_SIDR_REQ_PDATA - CMA_HDR_LEN;
	if (svd_cm_post_request(l, id, &ev)) {
		/* Destroying a cm_id in SIDR_REQ_RCVD rejects. */
		svd_cm_id_destroy(id);
		return;
	}
	svd_timer_arm(&c->timer, svd_ibcm_req_budget(c, 0));
}

void svd_ibcm_recv_rtu(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = svd_ibcm_by_local(m, m->rtu.remote_comm_id);

	if (!c || c->remote_id != m->rtu.local_comm_id)
		return;
	if (c->state != IBCM_REP_SENT && c->state != IBCM_MRA_REP_RCVD)
		return;
	svd_timer_cancel(&c->timer);
	c->state = IBCM_ESTABLISHED;
	if (svd_ibcm_id_wants(c, 0))
		svd_ibcm_id_event(c, RDMA_CM_EVENT_ESTABLISHED, 0);
}

/* ---- accept, reject ---------------------------------------------------- */

/* The Q_Key of a UD id (the kernel's cma_set_qkey). */
int svd_ibcm_set_qkey(struct svd_cm_id *id, uint32_t qkey)
{
	if (id->qkey)
		return qkey && id->qkey != qkey ? -EINVAL : 0;
	if (qkey) {
		id->qkey = qkey;
		return 0;
	}
	if (id->ps == RDMA_PS_UDP || id->ps == RDMA_PS_IB)
		id->qkey = RDMA_UDP_QKEY;
	return 0;
}

static int accept_rep(struct svd_cm_id *id, const struct sv_cm_conn_param *p)
{
	struct svd_ibcm *c = id->cm;
	struct svd_cm_msg *m;

	if (c->state != IBCM_REQ_RCVD && c->state != IBCM_MRA_REQ_SENT)
		return -EINVAL;
	if (p->pdata_len > CM_REP_PDATA)
		return -EINVAL;
	c->local_qpn = id->qp_num;
	c->responder_resources = p->responder_resources;
	c->initiator_depth = p->initiator_depth;
	m = &c->out;
	svd_ibcm_msg_init(m, c, CM_ATTR_REP);
	m->rep.local_comm_id = c->local_id;
	m->rep.remote_comm_id = c->remote_id;
	m->rep.local_qpn = c->local_qpn;
	m->rep.starting_psn = c->rq_psn;
	m->rep.responder_resources = p->responder_resources;
	m->rep.initiator_depth = p->initiator_depth;
	m->rep.target_ack_delay = SVD_LOCAL_CA_ACK_DELAY;
	m->rep.failover_accepted = 0;
	m->rep.flow_control = p->flow_control;
	m->rep.rnr_retry_count = p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count;
	m->rep.srq = p->srq;
	if (c->qp_type == IBV_QPT_XRC_RECV) {
		/* A TGT QP's number goes as the local EE context, with the
		 * SRQ bit and no initiator depth (the kernel's
		 * cm_format_rep). */
		m->rep.local_qpn = 0;
		m->rep.local_eecn = c->local_qpn;
		m->rep.initiator_depth = 0;
		m->rep.flow_control = 0;
		m->rep.srq = 1;
	}
	m->rep.local_ca_guid = svd.node_guid;
	m->rep.ece_vendor_id = p->ece_vendor_id;
	m->rep.ece_attr_mod = p->ece_attr_mod;
	memcpy(m->rep.private_data, p->pdata, p->pdata_len);
	c->state = IBCM_REP_SENT;
	svd_ibcm_send_expecting(c, c->timeout_ms);
	return 0;
}

static int reject(struct svd_cm_id *id, uint16_t reason, const uint8_t *pdata,
		  uint8_t len)
{
	struct svd_ibcm *c = id->cm;

	if (!c)
		return -EINVAL;
	if (id->qp_type == IBV_QPT_UD) {
		if (len > CM_SIDR_REP_PDATA)
			return -EINVAL;
		if (c->state != IBCM_SIDR_REQ_RCVD)
			return -EINVAL;
		svd_ibcm_sidr_rep(c, SIDR_REJECT, 0, 0, pdata, len);
		return 0;
	}
	if (len > CM_REJ_PDATA)
		return -EINVAL;
	switch (c->state) {
	case IBCM_REQ_SENT:
	case IBCM_MRA_REQ_RCVD:
	case IBCM_REQ_RCVD:
	case IBCM_MRA_REQ_SENT:
	case IBCM_REP_RCVD:
	case IBCM_MRA_REP_SENT:
		svd_ibcm_send_rej(c, reason, pdata, len, 0);
		svd_timer_cancel(&c->timer);
		c->state = IBCM_IDLE;
		return 0;
	case IBCM_REP_SENT:
	case IBCM_MRA_REP_RCVD:
		svd_ibcm_send_rej(c, reason, pdata, len, 0);
		svd_ibcm_timewait(c);
		return 0;
	default:
		return -EINVAL;
	}
}

int svd_op_cm_accept(struct svd_req *r)
{
	const struct sv_cm_conn_req *req = r->body;
	const struct sv_cm_conn_param *p = &req->p;
	struct svd_cm_id *id;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	if (id->state != CMS_CONNECT || !id->cm)
		return -EINVAL;
	if (p->valid)
		svd_ibcm_conn_param(id, p);
	if (id->qp_type == IBV_QPT_UD) {
		if (id->cm->state != IBCM_SIDR_REQ_RCVD)
			return -EINVAL;
		if (p->valid && p->pdata_len > CM_SIDR_REP_PDATA)
			err = -EINVAL;
		else
			err = svd_ibcm_set_qkey(id, p->valid ? p->qkey : 0);
		if (!err) {
			svd_ibcm_sidr_rep(id->cm, SIDR_SUCCESS, id->qp_num, id->qkey,
				 p->valid ? p->pdata : NULL,
				 p->valid ? p->pdata_len : 0);
			return 0;
		}
	} else {
		err = p->valid ? accept_rep(id, p) : svd_ibcm_send_rtu(id);
		if (!err)
			return 0;
	}
	/* A failed accept rejects the request (the kernel's __rdma_accept). */
	reject(id, CM_REJ_CONSUMER_DEFINED, NULL, 0);
	return err;
}

int svd_op_cm_reject(struct svd_req *r)
{
	const struct sv_cm_conn_req *req = r->body;
	struct svd_cm_id *id;
	uint16_t reason = req->p.reason ? req->p.reason : CM_REJ_CONSUMER_DEFINED;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	/* The kernel's ucma_reject: a user may give only these reasons. */
	if (reason != CM_REJ_CONSUMER_DEFINED &&
	    reason != CM_REJ_VENDOR_OPTION_NOT_SUPPORTED)
		return -EINVAL;
	return reject(id, reason, req->p.pdata, req->p.pdata_len);
}

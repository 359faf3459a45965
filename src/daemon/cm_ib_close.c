/* SPDX-License-Identifier: MIT */
/*
 * How an IB CM connection ends (IBTA 12.9, the kernel's ib_cm): a REJ
 * received, the DREQ/DREP exchange (rdma_disconnect, or the peer's), and
 * the rdma_cm id going away while the connection still owes its peer an
 * answer (the kernel's cm_destroy_id): a REJ, a DREQ that goes on past the
 * id, a DREP.  A connection without an id lingers until timewait ends
 * (cm_ib_timer.c).
 */
#include "cm_ib_int.h"
#include "svd_ops.h"

#include <errno.h>
#include <string.h>

#include <rdma/rdma_cma.h>

void svd_ibcm_recv_rej(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = svd_ibcm_by_local(m, m->rej.remote_comm_id);
	struct sv_cm_event ev;

	if (!c && m->rej.reason == CM_REJ_TIMEOUT &&
	    m->rej.reject_info_length >= 8) {
		uint64_t guid;

		memcpy(&guid, m->rej.ari, 8);
		c = svd_ibcm_by_remote(m, m->rej.local_comm_id, guid);
	}
	if (!c)
		return;
	if (c->remote_id && m->rej.local_comm_id &&
	    c->remote_id != m->rej.local_comm_id)
		return;
	switch (c->state) {
	case IBCM_REQ_SENT:
	case IBCM_MRA_REQ_RCVD:
	case IBCM_REP_SENT:
	case IBCM_MRA_REP_RCVD:
	case IBCM_REQ_RCVD:
	case IBCM_MRA_REQ_SENT:
		svd_timer_cancel(&c->timer);
		c->state = IBCM_IDLE;
		break;
	case IBCM_REP_RCVD:
	case IBCM_MRA_REP_SENT:
	case IBCM_ESTABLISHED:
		svd_ibcm_timewait(c);
		break;
	default:
		return;
	}
	if (svd_ibcm_id_wants(c, 0)) {
		svd_ibcm_ev_init(&ev, c->id, RDMA_CM_EVENT_REJECTED, m->rej.reason);
		memcpy(ev.conn.pdata, m->rej.private_data, CM_REJ_PDATA);
		ev.conn.pdata_len = CM_REJ_PDATA;
		svd_cm_post(c->id, NULL, &ev);
	}
	if (!c->id && c->state == IBCM_IDLE)
		svd_ibcm_free(c);
}

void svd_ibcm_recv_dreq(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = svd_ibcm_by_local(m, m->dreq.remote_comm_id);

	if (!c || c->remote_id != m->dreq.local_comm_id) {
		/* Unknown: answer anyway so the sender stops (cm_issue_drep). */
		struct svd_cm_msg r;

		svd_ibcm_msg_answer(&r, m, CM_ATTR_DREP);
		r.drep.local_comm_id = m->dreq.remote_comm_id;
		r.drep.remote_comm_id = m->dreq.local_comm_id;
		svd_cm_send(&r);
		return;
	}
	switch (c->state) {
	case IBCM_REP_SENT:
	case IBCM_DREQ_SENT:
	case IBCM_MRA_REP_RCVD:
		svd_timer_cancel(&c->timer);
		break;
	case IBCM_ESTABLISHED:
		break;
	case IBCM_TIMEWAIT:
		c->tid = m->tid;
		svd_ibcm_send_reply(c, CM_ATTR_DREP);
		return;
	default:
		return;
	}
	c->tid = m->tid;
	c->state = IBCM_DREQ_RCVD;
	svd_ibcm_id_disconnected(c, 0);
	if (!c->id) {
		/* Nobody to answer for: answer now and linger. */
		svd_ibcm_send_reply(c, CM_ATTR_DREP);
		svd_ibcm_timewait(c);
	}
}

void svd_ibcm_recv_drep(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = svd_ibcm_by_local(m, m->drep.remote_comm_id);

	if (!c || c->remote_id != m->drep.local_comm_id)
		return;
	if (c->state != IBCM_DREQ_SENT && c->state != IBCM_DREQ_RCVD)
		return;
	svd_ibcm_timewait(c);
	svd_ibcm_id_disconnected(c, 0);
}

int svd_op_cm_disconnect(struct svd_req *r)
{
	struct svd_cm_id *id;
	struct svd_ibcm *c;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	c = id->cm;
	if (!c)
		return -EINVAL;
	/* Initiate or answer a disconnect; otherwise nothing to do. */
	if (c->state == IBCM_ESTABLISHED) {
		svd_ibcm_send_dreq(c);
	} else if (c->state == IBCM_DREQ_RCVD) {
		svd_ibcm_send_reply(c, CM_ATTR_DREP);
		svd_ibcm_timewait(c);
	}
	return 0;
}

/* ---- the id goes away (the kernel's cm_destroy_id) --------------------- */

void svd_ibcm_id_gone(struct svd_cm_id *id)
{
	struct svd_ibcm *c = id->cm;

	c->id = NULL;
	id->cm = NULL;
	switch (c->state) {
	case IBCM_SIDR_REQ_RCVD:
		svd_ibcm_sidr_rep(c, SIDR_REJECT, 0, 0, NULL, 0);
		break;
	case IBCM_REQ_SENT:
	case IBCM_MRA_REQ_RCVD:
		svd_ibcm_send_rej(c, CM_REJ_TIMEOUT, NULL, 0, 1);
		c->state = IBCM_IDLE;
		break;
	case IBCM_REQ_RCVD:
	case IBCM_MRA_REQ_SENT:
	case IBCM_REP_SENT:
	case IBCM_MRA_REP_RCVD:
	case IBCM_REP_RCVD:
	case IBCM_MRA_REP_SENT:
		svd_ibcm_send_rej(c, CM_REJ_CONSUMER_DEFINED, NULL, 0, 0);
		c->state = IBCM_IDLE;
		break;
	case IBCM_ESTABLISHED:
		/* The DREQ goes on its timer and on past the id (see the top
		 * of cm_ib.c): the peer must learn, or waits for ever. */
		svd_ibcm_send_dreq(c);
		break;
	case IBCM_DREQ_SENT:
		break; /* the same: answered by a DREP, or timewait */
	case IBCM_DREQ_RCVD:
		svd_ibcm_send_reply(c, CM_ATTR_DREP);
		svd_ibcm_timewait(c);
		break;
	case IBCM_TIMEWAIT:
		break;
	default:
		c->state = IBCM_IDLE;
		break;
	}
	/* Lingering without an id: a DREQ in flight, or timewait; either
	 * ends in timewait's timer, which frees it (svd_ibcm_timeout). */
	if (c->state != IBCM_TIMEWAIT && c->state != IBCM_DREQ_SENT)
		svd_ibcm_free(c);
}

/* SPDX-License-Identifier: MIT */
/*
 * The IB CM's timers and retransmission (IBTA 12.9, the kernel's ib_cm
 * and its MAD layer's retries).  One timer per connection (c->timer), and
 * what it means depends on the state:
 *  - a message in flight (c->out: REQ, REP, DREQ, SIDR_REQ) waits its
 *    response timeout, is sent again Max CM Retries times, then the
 *    exchange fails (the connection's id hears UNREACHABLE, or is
 *    disconnected after a DREQ);
 *  - an MRA received stretches that wait to its service timeout;
 *  - a request received and never answered expires when its requester's
 *    own timers would have given up (request_expired);
 *  - timewait lasts the QP's ACK timeout.
 * Which loss costs what is told at the top of cm_ib.c.
 */
#include "cm_ib_int.h"
#include "sv_log.h"

#include <errno.h>
#include <stddef.h>

#include <rdma/rdma_cma.h>

/* Sends the message in c->out and arms its response timer. */
void svd_ibcm_send_expecting(struct svd_ibcm *c, uint64_t timeout_ms)
{
	c->timeout_ms = timeout_ms;
	c->wait_ms = timeout_ms;
	c->retries = 0;
	c->give_up = -ETIMEDOUT;
	if (svd_cm_send(&c->out) == -ENETDOWN) {
		/* Our RoCE port is another process's (svd_gw.h): no answer
		 * can reach us, so the connect fails now, not after every
		 * retry (a minute or more). */
		sv_warn("cm: %s not sent: this device is off the wire "
			"(softverbs daemon status)",
			svd_cm_attr_name(c->out.attr_id));
		c->retries = c->max_cm_retries;
		c->give_up = -ENETDOWN;
		timeout_ms = 0;
	}
	svd_timer_arm(&c->timer, timeout_ms);
}

void svd_ibcm_timewait(struct svd_ibcm *c)
{
	c->state = IBCM_TIMEWAIT;
	/* The kernel's cm_enter_timewait: the QP's ACK timeout. */
	svd_timer_arm(&c->timer, svd_cm_ms(c->av_timeout));
}

/* How long the requester of a REQ waits for our answer, all its tries:
 * (Max CM Retries + 1) x (remote CM response timeout + twice the packet
 * life time), as our send_request (cm_ib_active.c) and the kernel's
 * ib_send_cm_req time their REQ; once we have sent an MRA, each try may
 * also wait its service timeout (svd_ibcm_recv_mra). */
uint64_t svd_ibcm_req_budget(const struct svd_ibcm *c, int mraed)
{
	uint64_t one = c->req_wait_ms;

	if (mraed)
		one += svd_cm_ms(CMA_MRA_SERVICE_TIMEOUT);
	return ((uint64_t)c->max_cm_retries + 1) * one;
}

/*
 * A request received and never answered, its requester silent since: by
 * its own timers (req_wait_ms) the requester has given up, and would have
 * said so with a REJ "timeout" (the kernel's cm_destroy_id in REQ_SENT),
 * which was lost or never comes (nobody at the source).  As if it had
 * come: an application that has the request learns (REJECTED, timeout; a
 * UD request: UNREACHABLE), one that never fetched it never will (the id
 * goes with its CONNECT_REQUEST, the backlog slot comes back).  Nothing
 * is sent: the requester is gone.
 */
static void request_expired(struct svd_ibcm *c)
{
	struct svd_cm_id *id = c->id;
	int ud = c->state == IBCM_SIDR_REQ_RCVD;

	svd_ibcm_counters.expired++;
	c->state = IBCM_IDLE;
	if (id && id->listener) {
		svd_cm_id_destroy(id); /* frees c (svd_ibcm_id_gone) */
		return;
	}
	if (svd_ibcm_id_wants(c, 0))
		svd_ibcm_id_event(c, ud ? RDMA_CM_EVENT_UNREACHABLE :
				 RDMA_CM_EVENT_REJECTED,
			 ud ? -ETIMEDOUT : CM_REJ_TIMEOUT);
	if (!c->id)
		svd_ibcm_free(c);
}

void svd_ibcm_timeout(struct svd_timer *t)
{
	struct svd_ibcm *c = (struct svd_ibcm *)((char *)t -
					       offsetof(struct svd_ibcm, timer));

	if (c->state == IBCM_REQ_RCVD || c->state == IBCM_MRA_REQ_SENT ||
	    c->state == IBCM_SIDR_REQ_RCVD) {
		request_expired(c);
		return;
	}
	if (c->state == IBCM_TIMEWAIT) {
		c->state = IBCM_IDLE;
		if (svd_ibcm_id_wants(c, 1))
			svd_ibcm_id_event(c, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
		if (!c->id)
			svd_ibcm_free(c);
		return;
	}
	/* A message without its answer: send again, up to max_cm_retries
	 * times (the MAD layer's retries), then give up.  MRAed or not: an
	 * MRA stretched the wait, it did not answer the message. */
	if (c->retries < c->max_cm_retries) {
		c->retries++;
		svd_cm_send(&c->out);
		svd_timer_arm(&c->timer, c->wait_ms);
		return;
	}
	switch (c->state) {
	case IBCM_REQ_SENT:
	case IBCM_MRA_REQ_RCVD:
	case IBCM_REP_SENT:
	case IBCM_MRA_REP_RCVD:
		/* REQ_ERROR / REP_ERROR: the peer is unreachable. */
		svd_ibcm_send_rej(c, CM_REJ_TIMEOUT, NULL, 0, 1);
		c->state = IBCM_IDLE;
		if (svd_ibcm_id_wants(c, 0))
			svd_ibcm_id_event(c, RDMA_CM_EVENT_UNREACHABLE, c->give_up);
		break;
	case IBCM_DREQ_SENT:
		svd_ibcm_timewait(c);
		svd_ibcm_id_disconnected(c, -ETIMEDOUT);
		break;
	case IBCM_SIDR_REQ_SENT:
		c->state = IBCM_IDLE;
		if (svd_ibcm_id_wants(c, 0))
			svd_ibcm_id_event(c, RDMA_CM_EVENT_UNREACHABLE, c->give_up);
		break;
	default:
		break;
	}
	if (!c->id && c->state == IBCM_IDLE)
		svd_ibcm_free(c);
}

void svd_ibcm_recv_mra(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = svd_ibcm_by_local(m, m->mra.remote_comm_id);
	uint64_t t;

	if (!c)
		return;
	/* The peer's time, within the kernel rdma_cm's own (sv_param.h). */
	t = svd_cm_ms(clamp(m->mra.service_timeout, SV_CM_MAX_MRA_TIMEOUT)) +
	    2 * svd_cm_ms(CMA_IBOE_PACKET_LIFETIME);
	if (m->mra.message_mraed == 0 && c->state == IBCM_REQ_SENT) {
		c->state = IBCM_MRA_REQ_RCVD;
		c->remote_id = m->mra.local_comm_id;
	} else if (m->mra.message_mraed == 1 && c->state == IBCM_REP_SENT) {
		c->state = IBCM_MRA_REP_RCVD;
	} else {
		return; /* a duplicate MRA changes nothing (cm_mra_handler) */
	}
	/* This wait and the retries left take the MRA's time; the message
	 * still goes again when it runs out (svd_ibcm_timeout). */
	c->wait_ms = t;
	svd_timer_arm(&c->timer, t);
}

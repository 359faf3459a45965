/* SPDX-License-Identifier: MIT */
/*
 * The IB connection manager protocol (IBTA 12, the kernel's ib_cm) and
 * the rdma_cm glue on top of it (the kernel's cma_ib_* functions).
 *
 * Each connecting or connected rdma_cm id has a struct svd_ibcm: the
 * communication's state (IBTA 12.9 state machine), its comm IDs, QPNs,
 * PSNs and the parameters the QPs get (rdma_init_qp_attr).  CM instances
 * talk with struct svd_cm_msg, whose fields are the CM MADs' fields.
 *
 * This file holds the connections (their table, comm IDs, transaction
 * IDs), the messages every side sends, the events to the rdma_cm id, the
 * inbox and svd_cm_recv, which hands each message to its handler; the
 * rest is split by subject (cm_ib_int.h has the map): the active side,
 * the passive side, timers and retransmission, teardown, QP attributes.
 *
 * Where the messages go: svd_cm_send() looks at the destination GID.  One
 * of this host's GIDs: the message goes to the inbox and is handled on the
 * next turn of the event loop (never re-entrantly).  Another host's GID:
 * svd_cm_wire_send() (cm_wire.c) sends it as a CM MAD to QP1 of that host
 * over RoCE v2; the MADs that come back are decoded and handed to
 * svd_cm_recv() on the same turn of the loop as the inbox.  Messages get
 * lost on the wire: the message in flight (`out`) is sent again on its
 * timer, Max CM Retries times, as the kernel's MAD layer does, and every
 * receiver answers a duplicate the way the kernel's cm_dup_*_handler do.
 * What each loss costs (IBTA 12.9, the kernel's ib_cm and rdma_cm):
 *  - REQ, REP, DREQ, SIDR_REQ: sent again on the response timeout.
 *  - An MRA only stretches the wait of the message it answers to the
 *    MRA's service timeout (~70 s); the message still goes again when
 *    that runs out (the kernel's ib_modify_mad on the MAD in flight,
 *    whose retries go on).  And the rdma_cm sends its MRAs
 *    with the kernel's delay flag (CMA_CM_MRA_SETTING): only for a
 *    duplicate REQ or REP, i.e. once the peer has shown it is tired of
 *    waiting, never right away -- an MRA sent at once would make a lost
 *    RTU cost the passive side those ~70 s before its REP goes again.
 *  - RTU: the passive side's REP goes again, and the active side,
 *    established, answers the duplicate REP with the RTU again.
 *  - DREQ: sent again; a duplicate is answered with a DREP from
 *    timewait, or by cm_issue_drep once the connection is forgotten.  It
 *    goes on being sent after the rdma_cm id is destroyed (rping destroys
 *    its id right after rdma_disconnect), until a DREP or Max CM Retries:
 *    the kernel cancels it then (cm_destroy_id), and a peer whose DREQ was
 *    lost would wait for DISCONNECTED for ever.
 *  - DREP: the DREQ goes again.  Retries run out: timewait, and the id
 *    is disconnected all the same.
 *
 * Transaction IDs as the kernel's ib_cm: the side that starts an exchange
 * (REQ, DREQ, SIDR_REQ) makes one, high half per daemon, low half its
 * local comm ID (cm_form_tid); every message of that exchange, answers
 * included, carries it.
 *
 * PSNs follow Linux (which rxe and every RoCE NIC driver share): each
 * side picks the PSN it receives from (the rdma_cm id's seq_num) and
 * sends it as the Starting PSN of its REQ or REP; each side's send queue
 * starts at the PSN the other side sent.
 *
 * Against hostile MADs from the wire (docs/wire.md "The connection
 * manager"):
 *  - Answers go to whoever sent: a REQ's connection talks to the source
 *    GID of the datagram that brought it (the GRH, i.e. the IP source),
 *    as the kernel's ib_cm builds its answers from the received work
 *    completion (cm_init_av_for_response), never to the GIDs the REQ's
 *    primary path names, so a REQ cannot aim the REPs, MRAs, REJs and
 *    their retries at a third host.  The rdma_cm header's source address
 *    must be that GID's (it becomes the peer's address the application
 *    is told); a REQ that names another is refused.  A MAD about a known
 *    connection counts only from that connection's peer (from_peer):
 *    from anyone else it is a MAD about an unknown connection, answered
 *    (if at all) to its sender.
 *  - What a REQ, REP or MRA asks for is clamped (sv_param.h SV_CM_MAX_*,
 *    each bound the kernel's rdma_cm uses for itself): CM response
 *    timeouts, Max CM Retries, the ACK timeout that makes timewait, an
 *    MRA's service timeout.
 *  - Half-open connections (a request received, no RTU yet) are bounded
 *    per listener and per source GID (SV_CM_MAX_HALF_OPEN_*): the next
 *    REQ gets a REJ "no resources" (SIDR_REQ: SIDR_REP "rejected"), and
 *    is counted.  One whose requester goes silent ends when the
 *    requester's own timers would have given up (req_wait_ms), as if its
 *    REJ "timeout" had come: resources come back in bounded time.
 */

#include "cm_ib_int.h"
#include "svd_gw.h"
#include "sv_log.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <rdma/rdma_cma.h>

struct svd_ibcm *svd_ibcm_list;
struct svd_ibcm_stats svd_ibcm_counters;
static uint32_t ncms;

struct inbox_msg {
	struct inbox_msg *next;
	struct svd_cm_msg m;
};
static struct inbox_msg *inbox, **inbox_tail = &inbox;

static uint32_t tid_hi; /* the high half of our transaction IDs */

/* ---- transport --------------------------------------------------------- */

int svd_cm_send(const struct svd_cm_msg *m)
{
	struct inbox_msg *i;

	if (svd_cm_gid_index(m->dgid) < 0)
		return svd_cm_wire_send(m);
	i = malloc(sizeof(*i));
	if (!i) {
		sv_err("cm: out of memory: message %#x lost", m->attr_id);
		return -ENOMEM;
	}
	i->next = NULL;
	i->m = *m;
	*inbox_tail = i;
	inbox_tail = &i->next;
	svd_cm_kick();
	return 0;
}

void svd_cm_inbox_run(void)
{
	/* Only what is there now: handlers may queue more (a REQ makes an
	 * MRA), which the next kick runs. */
	struct inbox_msg *i = inbox;

	inbox = NULL;
	inbox_tail = &inbox;
	while (i) {
		struct inbox_msg *n = i->next;

		svd_cm_recv(&i->m);
		free(i);
		i = n;
	}
	svd_cm_wire_run();
}

/* ---- connections ------------------------------------------------------- */

static uint32_t new_local_id(void)
{
	uint32_t v;

	for (;;) {
		int dup = 0;

		if (getrandom(&v, sizeof(v), 0) != sizeof(v))
			v = (uint32_t)svd_now_ms() * 2654435761u;
		/* With a port service its top byte is our QPN block: the
		 * service steers every answer to us by it (sv_portd.h). */
		if (svd_gw_block())
			v = svd_gw_block() << 24 | (v & 0xffffff);
		if (!v)
			continue;
		for (struct svd_ibcm *c = svd_ibcm_list; c && !dup; c = c->next)
			dup = c->local_id == v;
		if (!dup)
			return v;
	}
}

struct svd_ibcm *svd_ibcm_new(struct svd_cm_id *id)
{
	struct svd_ibcm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->id = id;
	c->local_id = new_local_id();
	c->timer.fn = svd_ibcm_timeout;
	c->max_cm_retries = CMA_MAX_CM_RETRIES;
	c->next = svd_ibcm_list;
	svd_ibcm_list = c;
	ncms++;
	id->cm = c;
	return c;
}

void svd_ibcm_free(struct svd_ibcm *c)
{
	struct svd_ibcm **pp;

	svd_timer_cancel(&c->timer);
	for (pp = &svd_ibcm_list; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (c->id)
		c->id->cm = NULL;
	ncms--;
	free(c);
}

uint32_t svd_ibcm_count(void)
{
	return ncms;
}

/* A request received and not yet established or answered: what the
 * half-open bounds count (SV_CM_MAX_HALF_OPEN_*). */
int svd_ibcm_half_open(const struct svd_ibcm *c)
{
	switch (c->state) {
	case IBCM_REQ_RCVD:
	case IBCM_MRA_REQ_SENT:
	case IBCM_REP_SENT:
	case IBCM_MRA_REP_RCVD:
	case IBCM_SIDR_REQ_RCVD:
		return 1;
	default:
		return 0;
	}
}

void svd_ibcm_stats(struct svd_ibcm_stats *out)
{
	*out = svd_ibcm_counters;
	out->conns = ncms;
	out->half_open = 0;
	for (struct svd_ibcm *c = svd_ibcm_list; c; c = c->next)
		out->half_open += (uint32_t)svd_ibcm_half_open(c);
}

/* Whether m may speak for c: from another host, only the GID c talks to
 * may (the comm IDs are all a stranger would have to guess). */
static int from_peer(const struct svd_ibcm *c, const struct svd_cm_msg *m)
{
	return !m->wire || !memcmp(c->remote_gid, m->sgid, 16);
}

/* The connection m is about by our comm ID; NULL for none, or for one
 * whose peer did not send m. */
struct svd_ibcm *svd_ibcm_by_local(const struct svd_cm_msg *m,
				    uint32_t local_id)
{
	if (!local_id)
		return NULL;
	for (struct svd_ibcm *c = svd_ibcm_list; c; c = c->next)
		if (c->local_id == local_id)
			return from_peer(c, m) ? c : NULL;
	return NULL;
}

struct svd_ibcm *svd_ibcm_by_remote(const struct svd_cm_msg *m,
				     uint32_t remote_id, uint64_t guid)
{
	for (struct svd_ibcm *c = svd_ibcm_list; c; c = c->next)
		if (c->remote_id == remote_id && c->remote_guid == guid &&
		    c->state != IBCM_IDLE && from_peer(c, m))
			return c;
	return NULL;
}

/* A new exchange (REQ, DREQ, SIDR_REQ) starts: its transaction ID. */
void svd_ibcm_new_tid(struct svd_ibcm *c)
{
	while (!tid_hi)
		if (getrandom(&tid_hi, sizeof(tid_hi), 0) != sizeof(tid_hi))
			tid_hi = (uint32_t)svd_now_ms() | 1;
	c->tid = (uint64_t)tid_hi << 32 | c->local_id;
}

void svd_ibcm_msg_init(struct svd_cm_msg *m, struct svd_ibcm *c, uint16_t attr)
{
	memset(m, 0, sizeof(*m));
	m->attr_id = attr;
	m->tid = c->tid;
	memcpy(m->sgid, c->local_gid, 16);
	memcpy(m->dgid, c->remote_gid, 16);
	m->tclass = c->tclass;
	m->hop_limit = c->hop_limit;
	m->flow_label = c->flow_label;
}

/* The header of an answer to m that no connection makes (REJ, DREP,
 * SIDR_REP for an unknown peer): back the way m came. */
void svd_ibcm_msg_answer(struct svd_cm_msg *r, const struct svd_cm_msg *m,
		       uint16_t attr)
{
	memset(r, 0, sizeof(*r));
	r->attr_id = attr;
	r->tid = m->tid;
	memcpy(r->sgid, m->dgid, 16);
	memcpy(r->dgid, m->sgid, 16);
	r->tclass = m->tclass;
	r->flow_label = m->flow_label;
}

void svd_ibcm_conn_param(struct svd_cm_id *id, const struct sv_cm_conn_param *p)
{
	id->qp_num = p->qp_num & 0xffffff;
	id->srq = p->srq;
	id->ece_vendor_id = p->ece_vendor_id;
	id->ece_attr_mod = p->ece_attr_mod;
}

/* ---- events to the rdma_cm id ------------------------------------------ */

void svd_ibcm_ev_init(struct sv_cm_event *ev, struct svd_cm_id *id,
		    uint32_t event, int status)
{
	memset(ev, 0, sizeof(*ev));
	ev->event = event;
	ev->status = status;
	ev->id = id->handle;
}

/* The UD peer's address from the id's route (ib_init_ah_attr_from_path). */
void svd_ibcm_path_ah(const struct svd_cm_id *id, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = 1;
	ah->sl = id->path.sl;
	ah->static_rate = id->path.rate;
	memcpy(ah->grh.dgid.raw, id->path.dgid.raw, 16);
	ah->grh.flow_label = be32toh(id->path.flow_label);
	ah->grh.sgid_index = (uint8_t)id->sgid_index;
	ah->grh.hop_limit = id->path.hop_limit;
	ah->grh.traffic_class = id->path.traffic_class;
}

/* An event of the IB CM for the connection's id, with the kernel's rule
 * (cma_ib_handler): only while the id is connecting or connected, and
 * TIMEWAIT_EXIT only once it is disconnecting. */
int svd_ibcm_id_wants(const struct svd_ibcm *c, int timewait_exit)
{
	const struct svd_cm_id *id = c->id;

	if (!id)
		return 0;
	return timewait_exit ? id->state == CMS_DISCONNECT :
			       id->state == CMS_CONNECT;
}

void svd_ibcm_id_event(struct svd_ibcm *c, uint32_t event, int status)
{
	struct sv_cm_event ev;

	svd_ibcm_ev_init(&ev, c->id, event, status);
	svd_cm_post(c->id, NULL, &ev);
}

/* DREQ/DREP received, or DREQ timed out: the id is disconnected once. */
void svd_ibcm_id_disconnected(struct svd_ibcm *c, int status)
{
	if (!svd_ibcm_id_wants(c, 0))
		return;
	c->id->state = CMS_DISCONNECT;
	svd_ibcm_id_event(c, RDMA_CM_EVENT_DISCONNECTED, status);
}

/* ---- messages out ------------------------------------------------------ */

void svd_ibcm_send_rej(struct svd_ibcm *c, uint16_t reason, const void *pdata,
		     uint8_t len, int with_guid)
{
	struct svd_cm_msg m;

	sv_log(SV_LOG_DEBUG, "cm: REJ reason %u from comm id %#x in state %d",
	       reason, c->local_id, (int)c->state);
	svd_ibcm_msg_init(&m, c, CM_ATTR_REJ);
	m.rej.local_comm_id = c->local_id;
	m.rej.remote_comm_id = c->remote_id;
	switch (c->state) {
	case IBCM_REQ_RCVD:
	case IBCM_MRA_REQ_SENT:
		m.rej.message_rejected = 0; /* REQ */
		break;
	case IBCM_REP_RCVD:
	case IBCM_MRA_REP_SENT:
		m.rej.message_rejected = 1; /* REP */
		break;
	default:
		m.rej.message_rejected = 2;
		break;
	}
	m.rej.reason = reason;
	if (with_guid) {
		uint64_t g = svd.node_guid;

		memcpy(m.rej.ari, &g, 8);
		m.rej.reject_info_length = 8;
	}
	if (pdata && len)
		memcpy(m.rej.private_data, pdata, len);
	svd_cm_send(&m);
}

/* A REJ for a REQ nobody here will take (the kernel's cm_issue_rej). */
void svd_ibcm_issue_rej(const struct svd_cm_msg *req, uint16_t reason)
{
	struct svd_cm_msg m;

	sv_log(SV_LOG_DEBUG, "cm: REJ reason %u for a REQ of comm id %#x to service %#llx",
	       reason, req->req.local_comm_id,
	       (unsigned long long)req->req.service_id);
	svd_ibcm_msg_answer(&m, req, CM_ATTR_REJ);
	m.rej.remote_comm_id = req->req.local_comm_id;
	m.rej.message_rejected = 0;
	m.rej.reason = reason;
	svd_cm_send(&m);
}

void svd_ibcm_send_mra(struct svd_ibcm *c, uint8_t what)
{
	struct svd_cm_msg m;

	svd_ibcm_msg_init(&m, c, CM_ATTR_MRA);
	m.mra.local_comm_id = c->local_id;
	m.mra.remote_comm_id = c->remote_id;
	m.mra.message_mraed = what;
	m.mra.service_timeout = CMA_MRA_SERVICE_TIMEOUT;
	svd_cm_send(&m);
}

void svd_ibcm_send_dreq(struct svd_ibcm *c)
{
	svd_ibcm_new_tid(c);
	svd_ibcm_msg_init(&c->out, c, CM_ATTR_DREQ);
	c->out.dreq.local_comm_id = c->local_id;
	c->out.dreq.remote_comm_id = c->remote_id;
	c->out.dreq.remote_qpn_eecn = c->remote_qpn;
	c->state = IBCM_DREQ_SENT;
	svd_ibcm_send_expecting(c, c->timeout_ms ? c->timeout_ms :
					  svd_cm_ms(CMA_CM_RESPONSE_TIMEOUT));
}

void svd_ibcm_send_reply(struct svd_ibcm *c, uint16_t attr)
{
	struct svd_cm_msg m;
	struct svd_cm_reply *r = attr == CM_ATTR_RTU ? &m.rtu : &m.drep;

	svd_ibcm_msg_init(&m, c, attr);
	r->local_comm_id = c->local_id;
	r->remote_comm_id = c->remote_id;
	svd_cm_send(&m);
}

void svd_ibcm_sidr_rep(struct svd_ibcm *c, uint8_t status, uint32_t qpn,
		     uint32_t qkey, const void *pdata, uint8_t len)
{
	struct svd_cm_msg m;

	svd_ibcm_msg_init(&m, c, CM_ATTR_SIDR_REP);
	m.sidr_rep.request_id = c->remote_id;
	m.sidr_rep.status = status;
	m.sidr_rep.service_id = c->service_id;
	if (status == SIDR_SUCCESS) {
		m.sidr_rep.qpn = qpn;
		m.sidr_rep.qkey = qkey;
	}
	if (pdata && len)
		memcpy(m.sidr_rep.private_data, pdata, len);
	svd_cm_send(&m);
	svd_timer_cancel(&c->timer); /* request_expired's */
	c->state = IBCM_IDLE;
}

/* ---- messages in ------------------------------------------------------- */

void svd_cm_recv(const struct svd_cm_msg *m)
{
	switch (m->attr_id) {
	case CM_ATTR_REQ: svd_ibcm_recv_req(m); break;
	case CM_ATTR_MRA: svd_ibcm_recv_mra(m); break;
	case CM_ATTR_REJ: svd_ibcm_recv_rej(m); break;
	case CM_ATTR_REP: svd_ibcm_recv_rep(m); break;
	case CM_ATTR_RTU: svd_ibcm_recv_rtu(m); break;
	case CM_ATTR_DREQ: svd_ibcm_recv_dreq(m); break;
	case CM_ATTR_DREP: svd_ibcm_recv_drep(m); break;
	case CM_ATTR_SIDR_REQ: svd_ibcm_recv_sidr_req(m); break;
	case CM_ATTR_SIDR_REP: svd_ibcm_recv_sidr_rep(m); break;
	default: break;
	}
}

void svd_ibcm_close_all(void)
{
	while (svd_ibcm_list)
		svd_ibcm_free(svd_ibcm_list);
	while (inbox) {
		struct inbox_msg *i = inbox;

		inbox = i->next;
		free(i);
	}
	inbox_tail = &inbox;
}

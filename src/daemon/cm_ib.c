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
#include "svd_cm.h"
#include "svd_gw.h"
#include "svd_ops.h"
#include "sv_log.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <rdma/rdma_cma.h>

enum svd_ibcm_state {
	IBCM_IDLE,
	IBCM_REQ_SENT,
	IBCM_REQ_RCVD,
	IBCM_MRA_REQ_SENT,
	IBCM_MRA_REQ_RCVD,
	IBCM_REP_SENT,
	IBCM_REP_RCVD,
	IBCM_MRA_REP_SENT,
	IBCM_MRA_REP_RCVD,
	IBCM_ESTABLISHED,
	IBCM_DREQ_SENT,
	IBCM_DREQ_RCVD,
	IBCM_TIMEWAIT,
	IBCM_SIDR_REQ_SENT,
	IBCM_SIDR_REQ_RCVD,
};

struct svd_ibcm {
	struct svd_cm_id *id; /* NULL once the id is gone (timewait) */
	enum svd_ibcm_state state;
	uint32_t local_id, remote_id;
	int32_t give_up; /* the status of UNREACHABLE when retries end */
	uint64_t tid;		/* of the exchange under way */
	/* The GRH of our MADs: the path's (IBTA 13.5.4: a reply goes the
	 * way the request came). */
	uint8_t tclass, hop_limit;
	uint32_t flow_label;
	uint64_t remote_guid;
	uint64_t service_id;
	uint8_t local_gid[16], remote_gid[16];
	uint32_t local_qpn, remote_qpn;
	uint32_t sq_psn, rq_psn;
	uint32_t qkey;
	uint8_t qp_type;
	uint8_t path_mtu;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t flow_control;
	uint8_t av_timeout;	/* local ACK timeout of the QP */
	uint8_t max_cm_retries;
	uint32_t listener;	/* handle of the listener a request came to
				 * (0: we are the active side) */
	uint64_t req_wait_ms;	/* passive: what the requester waits for our
				 * answer, one try (its REQ's timeouts) */
	uint64_t timeout_ms;	/* response timeout of this side's messages */
	uint64_t wait_ms;	/* the message in flight's: timeout_ms, or an
				 * MRA's service timeout once MRAed */
	int retries;
	struct svd_cm_msg out;	/* the message in flight (resent on timeout) */
	struct svd_timer timer;
	struct svd_ibcm *next;
};

static struct svd_ibcm *cms;
static uint32_t ncms;
static struct svd_ibcm_stats stats;

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

/* ---- CM ids ------------------------------------------------------------ */

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
		for (struct svd_ibcm *c = cms; c && !dup; c = c->next)
			dup = c->local_id == v;
		if (!dup)
			return v;
	}
}

static void cm_timeout(struct svd_timer *t);

static struct svd_ibcm *ibcm_new(struct svd_cm_id *id)
{
	struct svd_ibcm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->id = id;
	c->local_id = new_local_id();
	c->timer.fn = cm_timeout;
	c->max_cm_retries = CMA_MAX_CM_RETRIES;
	c->next = cms;
	cms = c;
	ncms++;
	id->cm = c;
	return c;
}

static void ibcm_free(struct svd_ibcm *c)
{
	struct svd_ibcm **pp;

	svd_timer_cancel(&c->timer);
	for (pp = &cms; *pp; pp = &(*pp)->next)
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
static int half_open(const struct svd_ibcm *c)
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
	*out = stats;
	out->conns = ncms;
	out->half_open = 0;
	for (struct svd_ibcm *c = cms; c; c = c->next)
		out->half_open += (uint32_t)half_open(c);
}

/* Whether m may speak for c: from another host, only the GID c talks to
 * may (the comm IDs are all a stranger would have to guess). */
static int from_peer(const struct svd_ibcm *c, const struct svd_cm_msg *m)
{
	return !m->wire || !memcmp(c->remote_gid, m->sgid, 16);
}

/* The connection m is about by our comm ID; NULL for none, or for one
 * whose peer did not send m. */
static struct svd_ibcm *cm_by_local(const struct svd_cm_msg *m,
				    uint32_t local_id)
{
	if (!local_id)
		return NULL;
	for (struct svd_ibcm *c = cms; c; c = c->next)
		if (c->local_id == local_id)
			return from_peer(c, m) ? c : NULL;
	return NULL;
}

static struct svd_ibcm *cm_by_remote(const struct svd_cm_msg *m,
				     uint32_t remote_id, uint64_t guid)
{
	for (struct svd_ibcm *c = cms; c; c = c->next)
		if (c->remote_id == remote_id && c->remote_guid == guid &&
		    c->state != IBCM_IDLE && from_peer(c, m))
			return c;
	return NULL;
}

/* A new exchange (REQ, DREQ, SIDR_REQ) starts: its transaction ID. */
static void new_tid(struct svd_ibcm *c)
{
	while (!tid_hi)
		if (getrandom(&tid_hi, sizeof(tid_hi), 0) != sizeof(tid_hi))
			tid_hi = (uint32_t)svd_now_ms() | 1;
	c->tid = (uint64_t)tid_hi << 32 | c->local_id;
}

static void msg_init(struct svd_cm_msg *m, struct svd_ibcm *c, uint16_t attr)
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
static void msg_answer(struct svd_cm_msg *r, const struct svd_cm_msg *m,
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

/* Sends the message in c->out and arms its response timer. */
static void send_expecting(struct svd_ibcm *c, uint64_t timeout_ms)
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

static void enter_timewait(struct svd_ibcm *c)
{
	c->state = IBCM_TIMEWAIT;
	/* The kernel's cm_enter_timewait: the QP's ACK timeout. */
	svd_timer_arm(&c->timer, svd_cm_ms(c->av_timeout));
}

/* ---- events to the rdma_cm id ------------------------------------------ */

static void ev_init(struct sv_cm_event *ev, struct svd_cm_id *id,
		    uint32_t event, int status)
{
	memset(ev, 0, sizeof(*ev));
	ev->event = event;
	ev->status = status;
	ev->id = id->handle;
}

/* The UD peer's address from the id's route (ib_init_ah_attr_from_path). */
static void path_ah(const struct svd_cm_id *id, struct ibv_ah_attr *ah)
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
static int id_wants(const struct svd_ibcm *c, int timewait_exit)
{
	const struct svd_cm_id *id = c->id;

	if (!id)
		return 0;
	return timewait_exit ? id->state == CMS_DISCONNECT :
			       id->state == CMS_CONNECT;
}

static void id_event(struct svd_ibcm *c, uint32_t event, int status)
{
	struct sv_cm_event ev;

	ev_init(&ev, c->id, event, status);
	svd_cm_post(c->id, NULL, &ev);
}

/* DREQ/DREP received, or DREQ timed out: the id is disconnected once. */
static void id_disconnected(struct svd_ibcm *c, int status)
{
	if (!id_wants(c, 0))
		return;
	c->id->state = CMS_DISCONNECT;
	id_event(c, RDMA_CM_EVENT_DISCONNECTED, status);
}

/* ---- messages out ------------------------------------------------------ */

static void send_rej(struct svd_ibcm *c, uint16_t reason, const void *pdata,
		     uint8_t len, int with_guid)
{
	struct svd_cm_msg m;

	sv_log(SV_LOG_DEBUG, "cm: REJ reason %u from comm id %#x in state %d",
	       reason, c->local_id, (int)c->state);
	msg_init(&m, c, CM_ATTR_REJ);
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
static void issue_rej(const struct svd_cm_msg *req, uint16_t reason)
{
	struct svd_cm_msg m;

	sv_log(SV_LOG_DEBUG, "cm: REJ reason %u for a REQ of comm id %#x to service %#llx",
	       reason, req->req.local_comm_id,
	       (unsigned long long)req->req.service_id);
	msg_answer(&m, req, CM_ATTR_REJ);
	m.rej.remote_comm_id = req->req.local_comm_id;
	m.rej.message_rejected = 0;
	m.rej.reason = reason;
	svd_cm_send(&m);
}

static void send_mra(struct svd_ibcm *c, uint8_t what)
{
	struct svd_cm_msg m;

	msg_init(&m, c, CM_ATTR_MRA);
	m.mra.local_comm_id = c->local_id;
	m.mra.remote_comm_id = c->remote_id;
	m.mra.message_mraed = what;
	m.mra.service_timeout = CMA_MRA_SERVICE_TIMEOUT;
	svd_cm_send(&m);
}

static void send_dreq(struct svd_ibcm *c)
{
	new_tid(c);
	msg_init(&c->out, c, CM_ATTR_DREQ);
	c->out.dreq.local_comm_id = c->local_id;
	c->out.dreq.remote_comm_id = c->remote_id;
	c->out.dreq.remote_qpn_eecn = c->remote_qpn;
	c->state = IBCM_DREQ_SENT;
	send_expecting(c, c->timeout_ms ? c->timeout_ms :
					  svd_cm_ms(CMA_CM_RESPONSE_TIMEOUT));
}

/* The RTU (sent once; again only when a duplicate REP shows it lost). */
static void rtu_out(struct svd_ibcm *c)
{
	struct svd_cm_msg m;

	msg_init(&m, c, CM_ATTR_RTU);
	m.rtu.local_comm_id = c->local_id;
	m.rtu.remote_comm_id = c->remote_id;
	svd_cm_send(&m);
}

static void send_drep(struct svd_ibcm *c)
{
	struct svd_cm_msg m;

	msg_init(&m, c, CM_ATTR_DREP);
	m.drep.local_comm_id = c->local_id;
	m.drep.remote_comm_id = c->remote_id;
	svd_cm_send(&m);
}

static void sidr_rep(struct svd_ibcm *c, uint8_t status, uint32_t qpn,
		     uint32_t qkey, const void *pdata, uint8_t len)
{
	struct svd_cm_msg m;

	msg_init(&m, c, CM_ATTR_SIDR_REP);
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

/* ---- timers ------------------------------------------------------------ */

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

	stats.expired++;
	c->state = IBCM_IDLE;
	if (id && id->listener) {
		svd_cm_id_destroy(id); /* frees c (svd_ibcm_id_gone) */
		return;
	}
	if (id_wants(c, 0))
		id_event(c, ud ? RDMA_CM_EVENT_UNREACHABLE :
				 RDMA_CM_EVENT_REJECTED,
			 ud ? -ETIMEDOUT : CM_REJ_TIMEOUT);
	if (!c->id)
		ibcm_free(c);
}

static void cm_timeout(struct svd_timer *t)
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
		if (id_wants(c, 1))
			id_event(c, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
		if (!c->id)
			ibcm_free(c);
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
		send_rej(c, CM_REJ_TIMEOUT, NULL, 0, 1);
		c->state = IBCM_IDLE;
		if (id_wants(c, 0))
			id_event(c, RDMA_CM_EVENT_UNREACHABLE, c->give_up);
		break;
	case IBCM_DREQ_SENT:
		enter_timewait(c);
		id_disconnected(c, -ETIMEDOUT);
		break;
	case IBCM_SIDR_REQ_SENT:
		c->state = IBCM_IDLE;
		if (id_wants(c, 0))
			id_event(c, RDMA_CM_EVENT_UNREACHABLE, c->give_up);
		break;
	default:
		break;
	}
	if (!c->id && c->state == IBCM_IDLE)
		ibcm_free(c);
}

/* ---- the cma header in REQ and SIDR_REQ private data ------------------- */

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

static uint64_t service_id(const struct svd_cm_id *id)
{
	return ((uint64_t)id->ps << 16) | svd_cm_port(&id->dst);
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

/* ---- messages in ------------------------------------------------------- */

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

	for (struct svd_ibcm *c = cms; c; c = c->next) {
		if (!c->listener || !half_open(c))
			continue;
		on_l += c->listener == l->handle;
		from_src += m->wire && !memcmp(c->remote_gid, m->sgid, 16);
	}
	if (on_l >= SV_CM_MAX_HALF_OPEN_LISTENER)
		return &stats.rej_listener;
	if (from_src >= SV_CM_MAX_HALF_OPEN_SOURCE)
		return &stats.rej_source;
	return NULL;
}

static uint8_t clamp(uint8_t v, uint8_t max)
{
	return v > max ? max : v;
}

/* How long the requester of a REQ waits for our answer, all its tries:
 * (Max CM Retries + 1) x (remote CM response timeout + twice the packet
 * life time), as our connect_rc and the kernel's ib_send_cm_req time
 * their REQ; once we have sent an MRA, each try may also wait its
 * service timeout (recv_mra). */
static uint64_t req_budget(const struct svd_ibcm *c, int mraed)
{
	uint64_t one = c->req_wait_ms;

	if (mraed)
		one += svd_cm_ms(CMA_MRA_SERVICE_TIMEOUT);
	return ((uint64_t)c->max_cm_retries + 1) * one;
}

static void recv_req(const struct svd_cm_msg *m)
{
	union sv_sockaddr src, dst;
	struct svd_cm_bind *b;
	struct svd_cm_id *l, *id;
	struct svd_ibcm *c;
	struct sv_cm_event ev;
	uint32_t qp_type = m->req.transport_service_type == 1 ? IBV_QPT_UC :
								 IBV_QPT_RC;
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
	c = cm_by_remote(m, m->req.local_comm_id, m->req.local_ca_guid);
	if (c) {
		if (c->state == IBCM_MRA_REQ_SENT) {
			send_mra(c, 0);
			svd_timer_arm(&c->timer, req_budget(c, 1));
		}
		return;
	}
	b = service_bind(m->req.service_id);
	if (!b) {
		/* No listener for the service ID at all (cm_match_req). */
		issue_rej(m, CM_REJ_INVALID_SERVICE_ID);
		return;
	}
	l = req_listener(m, b, m->req.private_data, m->req.service_id, qp_type,
			 &src, &dst);
	if (!l) {
		/* The rdma_cm refuses it: the new cm_id dies with a REJ. */
		issue_rej(m, CM_REJ_CONSUMER_DEFINED);
		return;
	}
	full = half_open_full(l, m);
	if (full) {
		(*full)++;
		issue_rej(m, CM_REJ_NO_RESOURCES);
		return;
	}
	id = conn_id_new(l, qp_type, &src, &dst, local_gid, remote_gid);
	c = id ? ibcm_new(id) : NULL;
	if (!c) {
		if (id)
			svd_cm_id_destroy(id);
		issue_rej(m, CM_REJ_CONSUMER_DEFINED);
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

	ev_init(&ev, l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
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
	svd_timer_arm(&c->timer, req_budget(c, 0));
}

static void recv_mra(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = cm_by_local(m, m->mra.remote_comm_id);
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
	 * still goes again when it runs out (cm_timeout). */
	c->wait_ms = t;
	svd_timer_arm(&c->timer, t);
}

static void recv_rej(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = cm_by_local(m, m->rej.remote_comm_id);
	struct sv_cm_event ev;

	if (!c && m->rej.reason == CM_REJ_TIMEOUT &&
	    m->rej.reject_info_length >= 8) {
		uint64_t guid;

		memcpy(&guid, m->rej.ari, 8);
		c = cm_by_remote(m, m->rej.local_comm_id, guid);
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
		enter_timewait(c);
		break;
	default:
		return;
	}
	if (id_wants(c, 0)) {
		ev_init(&ev, c->id, RDMA_CM_EVENT_REJECTED, m->rej.reason);
		memcpy(ev.conn.pdata, m->rej.private_data, CM_REJ_PDATA);
		ev.conn.pdata_len = CM_REJ_PDATA;
		svd_cm_post(c->id, NULL, &ev);
	}
	if (!c->id && c->state == IBCM_IDLE)
		ibcm_free(c);
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

static void recv_rep(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = cm_by_local(m, m->rep.remote_comm_id);
	struct sv_cm_event ev;

	if (!c) {
		/* Nobody here: the REP's sender learns (cm_issue_rej). */
		struct svd_cm_msg r;

		msg_answer(&r, m, CM_ATTR_REJ);
		r.rej.remote_comm_id = m->rep.local_comm_id;
		r.rej.message_rejected = 1;
		r.rej.reason = CM_REJ_INVALID_COMM_ID;
		svd_cm_send(&r);
		return;
	}
	if (c->state == IBCM_MRA_REP_SENT) {
		/* A REP again while our rdma_cm id moves its QP: now the
		 * delayed MRA goes (cm_dup_rep_handler). */
		send_mra(c, 1);
		return;
	}
	if (c->state == IBCM_ESTABLISHED &&
	    c->remote_id == m->rep.local_comm_id) {
		rtu_out(c); /* our RTU was lost (cm_dup_rep_handler) */
		return;
	}
	if (c->state != IBCM_REQ_SENT && c->state != IBCM_MRA_REQ_RCVD)
		return;
	svd_timer_cancel(&c->timer);
	c->remote_id = m->rep.local_comm_id;
	c->remote_guid = m->rep.local_ca_guid;
	c->remote_qpn = m->rep.local_qpn;
	c->sq_psn = m->rep.starting_psn;
	c->initiator_depth = m->rep.responder_resources;
	c->responder_resources = m->rep.initiator_depth;
	c->rnr_retry_count = m->rep.rnr_retry_count;
	c->av_timeout = ack_timeout(clamp(m->rep.target_ack_delay,
					  SV_CM_MAX_ACK_TIMEOUT),
				    (uint8_t)(c->av_timeout - 1));
	c->state = IBCM_REP_RCVD;
	if (!id_wants(c, 0))
		return;
	c->id->ece_vendor_id = m->rep.ece_vendor_id;
	c->id->ece_attr_mod = m->rep.ece_attr_mod;
	/* The rdma_cm takes its time to move the QP (CMA_CM_MRA_SETTING):
	 * the MRA is delayed, it goes only for a duplicate REP. */
	if (c->qp_type != IBV_QPT_UD)
		c->state = IBCM_MRA_REP_SENT;
	ev_init(&ev, c->id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
	memcpy(ev.conn.pdata, m->rep.private_data, CM_REP_PDATA);
	ev.conn.pdata_len = CM_REP_PDATA;
	ev.conn.responder_resources = m->rep.initiator_depth;
	ev.conn.initiator_depth = m->rep.responder_resources;
	ev.conn.flow_control = m->rep.flow_control;
	ev.conn.rnr_retry_count = m->rep.rnr_retry_count;
	ev.conn.srq = m->rep.srq;
	ev.conn.qp_num = m->rep.local_qpn;
	ev.conn.ece_vendor_id = m->rep.ece_vendor_id;
	ev.conn.ece_attr_mod = m->rep.ece_attr_mod;
	svd_cm_post(c->id, NULL, &ev);
}

static void recv_rtu(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = cm_by_local(m, m->rtu.remote_comm_id);

	if (!c || c->remote_id != m->rtu.local_comm_id)
		return;
	if (c->state != IBCM_REP_SENT && c->state != IBCM_MRA_REP_RCVD)
		return;
	svd_timer_cancel(&c->timer);
	c->state = IBCM_ESTABLISHED;
	if (id_wants(c, 0))
		id_event(c, RDMA_CM_EVENT_ESTABLISHED, 0);
}

static void recv_dreq(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = cm_by_local(m, m->dreq.remote_comm_id);

	if (!c || c->remote_id != m->dreq.local_comm_id) {
		/* Unknown: answer anyway so the sender stops (cm_issue_drep). */
		struct svd_cm_msg r;

		msg_answer(&r, m, CM_ATTR_DREP);
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
		send_drep(c);
		return;
	default:
		return;
	}
	c->tid = m->tid;
	c->state = IBCM_DREQ_RCVD;
	id_disconnected(c, 0);
	if (!c->id) {
		/* Nobody to answer for: answer now and linger. */
		send_drep(c);
		enter_timewait(c);
	}
}

static void recv_drep(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = cm_by_local(m, m->drep.remote_comm_id);

	if (!c || c->remote_id != m->drep.local_comm_id)
		return;
	if (c->state != IBCM_DREQ_SENT && c->state != IBCM_DREQ_RCVD)
		return;
	enter_timewait(c);
	id_disconnected(c, 0);
}

static void recv_sidr_req(const struct svd_cm_msg *m)
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
	for (c = cms; c; c = c->next)
		if (c->state == IBCM_SIDR_REQ_RCVD &&
		    c->remote_id == m->sidr_req.request_id &&
		    !memcmp(c->remote_gid, m->sgid, 16)) {
			/* A duplicate: it is being answered, and its
			 * requester is still there. */
			svd_timer_arm(&c->timer, req_budget(c, 0));
			return;
		}
	b = service_bind(m->sidr_req.service_id);
	if (!b) {
		sidr_rep(&tmp, SIDR_UNSUPPORTED, 0, 0, NULL, 0);
		return;
	}
	l = req_listener(m, b, m->sidr_req.private_data,
			 m->sidr_req.service_id, IBV_QPT_UD, &src, &dst);
	full = l ? half_open_full(l, m) : NULL;
	if (full) {
		(*full)++;
		sidr_rep(&tmp, SIDR_REJECT, 0, 0, NULL, 0);
		return;
	}
	id = l ? conn_id_new(l, IBV_QPT_UD, &src, &dst, m->dgid, m->sgid) :
		 NULL;
	c = id ? ibcm_new(id) : NULL;
	if (!c) {
		if (id)
			svd_cm_id_destroy(id);
		sidr_rep(&tmp, SIDR_REJECT, 0, 0, NULL, 0);
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
	 * does (connect_ud, the kernel's cma_resolve_ib_udp). */
	c->max_cm_retries = CMA_MAX_CM_RETRIES;
	c->req_wait_ms = svd_cm_ms(CMA_CM_RESPONSE_TIMEOUT);
	memcpy(c->local_gid, m->dgid, 16);
	memcpy(c->remote_gid, m->sgid, 16);
	c->qp_type = IBV_QPT_UD;

	ev_init(&ev, l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
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
	svd_timer_arm(&c->timer, req_budget(c, 0));
}

static void recv_sidr_rep(const struct svd_cm_msg *m)
{
	struct svd_ibcm *c = cm_by_local(m, m->sidr_rep.request_id);
	struct sv_cm_event ev;
	struct svd_cm_id *id;

	if (!c || c->state != IBCM_SIDR_REQ_SENT)
		return;
	svd_timer_cancel(&c->timer);
	c->state = IBCM_IDLE;
	if (!id_wants(c, 0)) {
		if (!c->id)
			ibcm_free(c);
		return;
	}
	id = c->id;
	ev_init(&ev, id, RDMA_CM_EVENT_ESTABLISHED, 0);
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
		path_ah(id, &ev.ah_attr);
		ev.ud_qpn = m->sidr_rep.qpn;
		ev.ud_qkey = m->sidr_rep.qkey;
	}
	svd_cm_post(id, NULL, &ev);
}

void svd_cm_recv(const struct svd_cm_msg *m)
{
	switch (m->attr_id) {
	case CM_ATTR_REQ: recv_req(m); break;
	case CM_ATTR_MRA: recv_mra(m); break;
	case CM_ATTR_REJ: recv_rej(m); break;
	case CM_ATTR_REP: recv_rep(m); break;
	case CM_ATTR_RTU: recv_rtu(m); break;
	case CM_ATTR_DREQ: recv_dreq(m); break;
	case CM_ATTR_DREP: recv_drep(m); break;
	case CM_ATTR_SIDR_REQ: recv_sidr_req(m); break;
	case CM_ATTR_SIDR_REP: recv_sidr_rep(m); break;
	default: break;
	}
}

/* ---- the id goes away (the kernel's cm_destroy_id) --------------------- */

void svd_ibcm_id_gone(struct svd_cm_id *id)
{
	struct svd_ibcm *c = id->cm;

	c->id = NULL;
	id->cm = NULL;
	switch (c->state) {
	case IBCM_SIDR_REQ_RCVD:
		sidr_rep(c, SIDR_REJECT, 0, 0, NULL, 0);
		break;
	case IBCM_REQ_SENT:
	case IBCM_MRA_REQ_RCVD:
		send_rej(c, CM_REJ_TIMEOUT, NULL, 0, 1);
		c->state = IBCM_IDLE;
		break;
	case IBCM_REQ_RCVD:
	case IBCM_MRA_REQ_SENT:
	case IBCM_REP_SENT:
	case IBCM_MRA_REP_RCVD:
	case IBCM_REP_RCVD:
	case IBCM_MRA_REP_SENT:
		send_rej(c, CM_REJ_CONSUMER_DEFINED, NULL, 0, 0);
		c->state = IBCM_IDLE;
		break;
	case IBCM_ESTABLISHED:
		/* The DREQ goes on its timer and on past the id (see the top
		 * of the file): the peer must learn, or waits for ever. */
		send_dreq(c);
		break;
	case IBCM_DREQ_SENT:
		break; /* the same: answered by a DREP, or timewait */
	case IBCM_DREQ_RCVD:
		send_drep(c);
		enter_timewait(c);
		break;
	case IBCM_TIMEWAIT:
		break;
	default:
		c->state = IBCM_IDLE;
		break;
	}
	/* Lingering without an id: a DREQ in flight, or timewait; either
	 * ends in timewait's timer, which frees it (cm_timeout). */
	if (c->state != IBCM_TIMEWAIT && c->state != IBCM_DREQ_SENT)
		ibcm_free(c);
}

void svd_ibcm_close_all(void)
{
	while (cms)
		ibcm_free(cms);
	while (inbox) {
		struct inbox_msg *i = inbox;

		inbox = i->next;
		free(i);
	}
	inbox_tail = &inbox;
}

/* ---- ops --------------------------------------------------------------- */

static void conn_from_req(struct svd_cm_id *id, const struct sv_cm_conn_param *p)
{
	id->qp_num = p->qp_num & 0xffffff;
	id->srq = p->srq;
	id->ece_vendor_id = p->ece_vendor_id;
	id->ece_attr_mod = p->ece_attr_mod;
}

/* The active side's connection: its GIDs and its MADs' GRH from the
 * route, a new exchange. */
static struct svd_ibcm *ibcm_connect(struct svd_cm_id *id)
{
	struct svd_ibcm *c = ibcm_new(id);

	if (!c)
		return NULL;
	c->service_id = service_id(id);
	memcpy(c->local_gid, id->sgid, 16);
	memcpy(c->remote_gid, id->dgid, 16);
	c->tclass = id->path.traffic_class;
	c->hop_limit = id->path.hop_limit;
	c->flow_label = be32toh(id->path.flow_label);
	new_tid(c);
	return c;
}

static int connect_rc(struct svd_cm_id *id, const struct sv_cm_conn_param *p)
{
	struct svd_ibcm *c;
	struct svd_cm_msg *m;

	if (CMA_HDR_LEN + p->pdata_len > CM_REQ_PDATA)
		return -EINVAL;
	c = ibcm_connect(id);
	if (!c)
		return -ENOMEM;
	c->qp_type = (uint8_t)id->qp_type;
	c->local_qpn = id->qp_num;
	c->rq_psn = id->seq_num;
	c->responder_resources = p->responder_resources;
	c->initiator_depth = p->initiator_depth;
	c->retry_count = p->retry_count > 7 ? 7 : p->retry_count;
	c->rnr_retry_count = p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count;
	c->flow_control = p->flow_control;
	c->path_mtu = id->path.mtu;
	c->av_timeout = (uint8_t)(id->path.packet_life_time + 1);

	m = &c->out;
	msg_init(m, c, CM_ATTR_REQ);
	m->req.local_comm_id = c->local_id;
	m->req.service_id = c->service_id;
	m->req.local_ca_guid = svd.node_guid;
	m->req.local_qpn = c->local_qpn;
	m->req.responder_resources = c->responder_resources;
	m->req.initiator_depth = c->initiator_depth;
	m->req.remote_cm_response_timeout = CMA_CM_RESPONSE_TIMEOUT;
	m->req.transport_service_type = id->qp_type == IBV_QPT_UC ? 1 : 0;
	m->req.flow_control = c->flow_control;
	m->req.starting_psn = c->rq_psn;
	m->req.local_cm_response_timeout = CMA_CM_RESPONSE_TIMEOUT;
	m->req.retry_count = c->retry_count;
	m->req.pkey = 0xffff;
	m->req.path_mtu = c->path_mtu;
	m->req.rnr_retry_count = c->rnr_retry_count;
	m->req.max_cm_retries = CMA_MAX_CM_RETRIES;
	m->req.srq = id->srq;
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
	cma_hdr_put(m->req.private_data, id);
	memcpy(m->req.private_data + CMA_HDR_LEN, p->pdata, p->pdata_len);
	c->state = IBCM_REQ_SENT;
	send_expecting(c, 2 * svd_cm_ms(id->path.packet_life_time) +
				  svd_cm_ms(CMA_CM_RESPONSE_TIMEOUT));
	return 0;
}

static int connect_ud(struct svd_cm_id *id, const struct sv_cm_conn_param *p)
{
	struct svd_ibcm *c;
	struct svd_cm_msg *m;

	if (CMA_HDR_LEN + p->pdata_len > CM_SIDR_REQ_PDATA)
		return -EINVAL;
	c = ibcm_connect(id);
	if (!c)
		return -ENOMEM;
	c->qp_type = IBV_QPT_UD;
	m = &c->out;
	msg_init(m, c, CM_ATTR_SIDR_REQ);
	m->sidr_req.request_id = c->local_id;
	m->sidr_req.pkey = 0xffff;
	m->sidr_req.service_id = c->service_id;
	cma_hdr_put(m->sidr_req.private_data, id);
	memcpy(m->sidr_req.private_data + CMA_HDR_LEN, p->pdata, p->pdata_len);
	c->state = IBCM_SIDR_REQ_SENT;
	send_expecting(c, svd_cm_ms(CMA_CM_RESPONSE_TIMEOUT));
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
	conn_from_req(id, &req->p);
	err = id->qp_type == IBV_QPT_UD ? connect_ud(id, &req->p) :
					  connect_rc(id, &req->p);
	if (err) {
		if (id->cm)
			svd_ibcm_id_gone(id);
		id->state = CMS_ROUTE_RESOLVED;
	}
	return err;
}

/* The Q_Key of a UD id (the kernel's cma_set_qkey). */
static int set_qkey(struct svd_cm_id *id, uint32_t qkey)
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
	msg_init(m, c, CM_ATTR_REP);
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
	m->rep.local_ca_guid = svd.node_guid;
	m->rep.ece_vendor_id = p->ece_vendor_id;
	m->rep.ece_attr_mod = p->ece_attr_mod;
	memcpy(m->rep.private_data, p->pdata, p->pdata_len);
	c->state = IBCM_REP_SENT;
	send_expecting(c, c->timeout_ms);
	return 0;
}

/* The requester's answer to a REP once its QP is ready (cma_rep_recv). */
static int send_rtu(struct svd_cm_id *id)
{
	struct svd_ibcm *c = id->cm;

	if (c->state != IBCM_REP_RCVD && c->state != IBCM_MRA_REP_SENT)
		return -EINVAL;
	rtu_out(c);
	c->state = IBCM_ESTABLISHED;
	return 0;
}

static int reject(struct svd_cm_id *id, uint16_t reason, const uint8_t *pdata,
		  uint8_t len);

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
		conn_from_req(id, p);
	if (id->qp_type == IBV_QPT_UD) {
		if (id->cm->state != IBCM_SIDR_REQ_RCVD)
			return -EINVAL;
		if (p->valid && p->pdata_len > CM_SIDR_REP_PDATA)
			err = -EINVAL;
		else
			err = set_qkey(id, p->valid ? p->qkey : 0);
		if (!err) {
			sidr_rep(id->cm, SIDR_SUCCESS, id->qp_num, id->qkey,
				 p->valid ? p->pdata : NULL,
				 p->valid ? p->pdata_len : 0);
			return 0;
		}
	} else {
		err = p->valid ? accept_rep(id, p) : send_rtu(id);
		if (!err)
			return 0;
	}
	/* A failed accept rejects the request (the kernel's __rdma_accept). */
	reject(id, CM_REJ_CONSUMER_DEFINED, NULL, 0);
	return err;
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
		sidr_rep(c, SIDR_REJECT, 0, 0, pdata, len);
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
		send_rej(c, reason, pdata, len, 0);
		svd_timer_cancel(&c->timer);
		c->state = IBCM_IDLE;
		return 0;
	case IBCM_REP_SENT:
	case IBCM_MRA_REP_RCVD:
		send_rej(c, reason, pdata, len, 0);
		enter_timewait(c);
		return 0;
	default:
		return -EINVAL;
	}
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
		send_dreq(c);
	} else if (c->state == IBCM_DREQ_RCVD) {
		send_drep(c);
		enter_timewait(c);
	}
	return 0;
}

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
		if (id_wants(c, 0))
			id_event(c, RDMA_CM_EVENT_ESTABLISHED, 0);
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
		set_qkey(id, 0);
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
		path_ah(id, &a->ah_attr);
		a->path_mtu = c->path_mtu;
		a->dest_qp_num = c->remote_qpn;
		a->rq_psn = c->rq_psn;
		if (c->qp_type == IBV_QPT_RC) {
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
		if (c->qp_type == IBV_QPT_RC) {
			*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_TIMEOUT;
			a->retry_cnt = c->retry_count;
			a->rnr_retry = c->rnr_retry_count;
			a->max_rd_atomic = c->initiator_depth;
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

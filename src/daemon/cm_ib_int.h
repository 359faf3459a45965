/* SPDX-License-Identifier: MIT */
/*
 * What the files of the IB CM share (private to them; the rest of the
 * daemon sees svd_cm.h): a connection's state and record, the table of
 * connections, and the helpers each file lends the others.  The design --
 * how messages travel, what a loss costs, whom an answer goes to -- is at
 * the top of cm_ib.c.
 *
 *   cm_ib.c          connections, their messages out, events to the
 *                    rdma_cm id, the inbox, svd_cm_recv
 *   cm_ib_active.c   the side that connects: REQ/SIDR_REQ out, REP and
 *                    SIDR_REP in, the RTU
 *   cm_ib_passive.c  the side that listens: REQ/SIDR_REQ in, REP/SIDR_REP
 *                    out (accept), reject, RTU in
 *   cm_ib_timer.c    timers and retransmission: response timeouts,
 *                    retries, MRAs, timewait, requests that expire
 *   cm_ib_close.c    teardown: REJ in, DREQ/DREP, disconnect, the id going
 *   cm_ib_qp.c       the QP attributes the exchange decides
 *                    (rdma_init_qp_attr) and COMM_EST (rdma_notify)
 *
 * The daemon runs one event loop: nothing here takes a lock.
 */
#ifndef CM_IB_INT_H
#define CM_IB_INT_H

#include "svd_cm.h"

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

/* Every connection, newest first, and what the IB CM refused and let
 * expire (cm_ib.c). */
extern struct svd_ibcm *svd_ibcm_list;
extern struct svd_ibcm_stats svd_ibcm_counters;

static inline uint8_t clamp(uint8_t v, uint8_t max)
{
	return v > max ? max : v;
}

/* ---- cm_ib.c: connections ---------------------------------------------- */

/* A new connection for id, in IBCM_IDLE with a fresh local comm ID, on
 * the list and in id->cm: NULL when out of memory. */
struct svd_ibcm *svd_ibcm_new(struct svd_cm_id *id);
/* Off the list, its timer cancelled, id->cm cleared; freed. */
void svd_ibcm_free(struct svd_ibcm *c);
/* A request received and not yet established or answered: what the
 * half-open bounds count (SV_CM_MAX_HALF_OPEN_*). */
int svd_ibcm_half_open(const struct svd_ibcm *c);
/* The connection m is about by our comm ID; NULL for none, or for one
 * whose peer did not send m. */
struct svd_ibcm *svd_ibcm_by_local(const struct svd_cm_msg *m,
				   uint32_t local_id);
/* The connection m is about by the peer's comm ID and CA GUID, not idle
 * and talking to m's sender; NULL for none. */
struct svd_ibcm *svd_ibcm_by_remote(const struct svd_cm_msg *m,
				    uint32_t remote_id, uint64_t guid);
/* A new exchange (REQ, DREQ, SIDR_REQ) starts: its transaction ID. */
void svd_ibcm_new_tid(struct svd_ibcm *c);
/* *m zeroed, addressed from c to its peer, in c's exchange. */
void svd_ibcm_msg_init(struct svd_cm_msg *m, struct svd_ibcm *c,
		       uint16_t attr);
/* The header of an answer to m that no connection makes (REJ, DREP,
 * SIDR_REP for an unknown peer): back the way m came. */
void svd_ibcm_msg_answer(struct svd_cm_msg *r, const struct svd_cm_msg *m,
			 uint16_t attr);
/* The parameters of rdma_connect/rdma_accept that the id keeps. */
void svd_ibcm_conn_param(struct svd_cm_id *id,
			 const struct sv_cm_conn_param *p);

/* ---- cm_ib.c: events to the rdma_cm id --------------------------------- */

void svd_ibcm_ev_init(struct sv_cm_event *ev, struct svd_cm_id *id,
		      uint32_t event, int status);
/* The UD peer's address from the id's route (ib_init_ah_attr_from_path). */
void svd_ibcm_path_ah(const struct svd_cm_id *id, struct ibv_ah_attr *ah);
/* Whether the connection's id takes an event of the IB CM now (the
 * kernel's cma_ib_handler): only while connecting or connected, and
 * TIMEWAIT_EXIT only once disconnecting. */
int svd_ibcm_id_wants(const struct svd_ibcm *c, int timewait_exit);
void svd_ibcm_id_event(struct svd_ibcm *c, uint32_t event, int status);
/* DREQ/DREP received, or DREQ timed out: the id is disconnected once. */
void svd_ibcm_id_disconnected(struct svd_ibcm *c, int status);

/* ---- cm_ib.c: messages out --------------------------------------------- */

/* A REJ from c; with_guid puts our CA GUID in the ARI (reason timeout). */
void svd_ibcm_send_rej(struct svd_ibcm *c, uint16_t reason,
		       const void *pdata, uint8_t len, int with_guid);
/* A REJ for a REQ nobody here will take (the kernel's cm_issue_rej). */
void svd_ibcm_issue_rej(const struct svd_cm_msg *req, uint16_t reason);
/* An MRA for the REQ (what 0) or REP (1) c received. */
void svd_ibcm_send_mra(struct svd_ibcm *c, uint8_t what);
/* The DREQ, in flight until a DREP or its retries end: IBCM_DREQ_SENT. */
void svd_ibcm_send_dreq(struct svd_ibcm *c);
/* The RTU or the DREP: the answer that closes an exchange, sent once
 * (again only when a duplicate REP or DREQ shows it lost). */
void svd_ibcm_send_reply(struct svd_ibcm *c, uint16_t attr);
/* The SIDR_REP for the SIDR_REQ c received (qpn, qkey only on success);
 * c is done: IBCM_IDLE. */
void svd_ibcm_sidr_rep(struct svd_ibcm *c, uint8_t status, uint32_t qpn,
		       uint32_t qkey, const void *pdata, uint8_t len);

/* ---- cm_ib_timer.c ----------------------------------------------------- */

/* Sends the message in c->out and arms its response timer. */
void svd_ibcm_send_expecting(struct svd_ibcm *c, uint64_t timeout_ms);
/* IBCM_TIMEWAIT for the QP's ACK timeout (the kernel's
 * cm_enter_timewait). */
void svd_ibcm_timewait(struct svd_ibcm *c);
/* The connection's timer (c->timer.fn). */
void svd_ibcm_timeout(struct svd_timer *t);
/* How long the requester of the request c received waits for our answer,
 * all its tries (mraed: once we have sent an MRA). */
uint64_t svd_ibcm_req_budget(const struct svd_ibcm *c, int mraed);

/* ---- the active side (cm_ib_active.c) ---------------------------------- */

/* The RTU once the requester's QP is ready (cma_rep_recv): 0 or
 * -EINVAL when no REP waits for it. */
int svd_ibcm_send_rtu(struct svd_cm_id *id);

/* ---- the passive side (cm_ib_passive.c) -------------------------------- */

/* The Q_Key of a UD id (the kernel's cma_set_qkey): 0, or -EINVAL for
 * one that differs from the id's. */
int svd_ibcm_set_qkey(struct svd_cm_id *id, uint32_t qkey);

/* ---- messages in, one handler each (svd_cm_recv) ----------------------- */

void svd_ibcm_recv_req(const struct svd_cm_msg *m);	 /* passive */
void svd_ibcm_recv_sidr_req(const struct svd_cm_msg *m); /* passive */
void svd_ibcm_recv_rtu(const struct svd_cm_msg *m);	 /* passive */
void svd_ibcm_recv_rep(const struct svd_cm_msg *m);	 /* active */
void svd_ibcm_recv_sidr_rep(const struct svd_cm_msg *m); /* active */
void svd_ibcm_recv_mra(const struct svd_cm_msg *m);	 /* timer */
void svd_ibcm_recv_rej(const struct svd_cm_msg *m);	 /* close */
void svd_ibcm_recv_dreq(const struct svd_cm_msg *m);	 /* close */
void svd_ibcm_recv_drep(const struct svd_cm_msg *m);	 /* close */

#endif

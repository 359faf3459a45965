/* SPDX-License-Identifier: MIT */
/*
 * The responder (IBTA 9.7.4 responder side; rxe_resp.c's role): one
 * explicit state machine per inbound request, one function per state
 * (step[] below), run by one loop:
 *
 *   CHK_QP -> CHK_PSN -> CHK_OP_SEQ -> CHK_RESOURCE -> CHK_ACCESS ->
 *   CHK_LENGTH -> CHK_RKEY -> EXECUTE -+-> COMPLETE -> ACKNOWLEDGE
 *                                      +-> READ_REPLY
 *                                      +-> ATOMIC_REPLY
 *                                      +-> ATOMIC_WRITE_REPLY    -> DONE
 *
 * with the side exits DUPLICATE (re-answer, never re-execute), NAK_SEQ
 * (a gap: one NAK), RNR (no receive WQE), ERR_* (a NAK, the QP to ERR)
 * and DROP (silently, as a lost packet).  The checks (every state before
 * EXECUTE) and the answers that move no data are in sv_resp_check.c,
 * where a unit test runs them; the states here move data through
 * sv_resp_exec.c; the packet path's answers leave in sv_resp_reply.c
 * (resp_int.h maps the files).
 *
 * It runs on a QP's shared responder block (sv_shm.h) under its lock, so
 * two kinds of caller share it:
 *   - the packet path (sv_resp_packet): the QP's own engine, one packet
 *     at a time (the lock held across a run of them from one ring,
 *     struct sv_resp_hold); READ and atomic answers are queued (respq)
 *     and sent by sv_resp_flush after the batch, in PSN order, then one
 *     coalesced ACK -- a full ring leaves them queued, so a responder
 *     never blocks on its peer;
 *   - direct execution (sv_resp_direct): the initiator's engine, one
 *     whole message, its payload moved straight between the two
 *     processes' memory (sv_xfer), the outcome returned to the caller
 *     instead of sent.
 * The two differ only through struct resp_ops (resp_int.h has the table
 * of what each does): where the payload is, how a READ's data and an
 * atomic's value reach the initiator, how the outcome leaves, how many
 * PSNs a request spans, and the flag `whole`, read only in the states
 * where a stream of packets and a whole message really differ.  Either
 * way the receive queue, the SRQ and the receive CQ are the shared ones,
 * and what only the owner can do (flush its send queue, raise async
 * events) is left to it as SV_QEV_* bits (sv_rtgt_notify).
 */
#include "resp_int.h"

#include <string.h>

/* ---------------------------------------------------------- states -- */

/*
 * RESPST_EXECUTE: a SEND or WRITE packet placed (then COMPLETE), an
 * atomic executed (then ATOMIC_REPLY), an ATOMIC WRITE's 8 bytes stored
 * (then ATOMIC_WRITE_REPLY); a READ goes to READ_REPLY, where its data is
 * fetched.  Must hold rs->q->lock.
 */
static enum resp_state execute(struct resp *rs)
{
	uint32_t f = rs->flags;
	enum resp_state st;

	if (f & OP_SEND)
		return sv_resp_exec_send(rs);
	if (f & OP_WRITE)
		return sv_resp_exec_write(rs);
	if (f & OP_READ)
		return RESPST_READ_REPLY;
	if (f & OP_ATOMIC) {
		st = sv_resp_exec_atomic(rs);
		return st == RESPST_DONE ? RESPST_ATOMIC_REPLY : st;
	}
	if (f & OP_ATOMIC_WRITE) {
		st = sv_resp_exec_atomic_write(rs);
		return st == RESPST_DONE ? RESPST_ATOMIC_WRITE_REPLY : st;
	}
	return RESPST_ERR_INV_REQ;
}

/*
 * RESPST_READ_REPLY: the READ's data to the initiator (queued responses,
 * or copied in place); the expected PSN moves past the responses it
 * takes (one per path MTU, 9.7.4) and the MSN by one.  Must hold
 * rs->q->lock.
 */
static enum resp_state read_reply(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_qp_shm *q = rs->q;
	uint32_t mtu = resp_mtu(q);
	uint32_t npk = pkt->dma_len ? (pkt->dma_len + mtu - 1) / mtu : 1;
	enum resp_state st = rs->ops->read_reply(rs);

	if (st != RESPST_DONE)
		return st;
	q->epsn = (pkt->psn + npk) & PSN_MASK;
	q->msn++;
	return RESPST_DONE;
}

/*
 * RESPST_ATOMIC_REPLY: the value the atomic found to the initiator (and,
 * on the packet path, into the replay cache for a repeat of it,
 * 9.7.5.1.2).  Must hold rs->q->lock.
 */
static enum resp_state atomic_reply(struct resp *rs)
{
	rs->ops->atomic_reply(rs);
	rs->q->epsn = (rs->pkt->psn + 1) & PSN_MASK;
	rs->q->msn++;
	return RESPST_DONE;
}

/*
 * RESPST_ATOMIC_WRITE_REPLY: the answer that the 8 bytes are stored, an
 * RDMA READ response of no data (IBTA 1.5 answers ATOMIC WRITE as a READ:
 * rxe's send_read_response_ack), whatever AckReq says; on the packet path
 * its PSN is kept, so a repeat is answered again and never stored twice.
 * The expected PSN and the MSN move on.  Must hold rs->q->lock.
 */
static enum resp_state atomic_write_reply(struct resp *rs)
{
	rs->ops->atomic_write_reply(rs);
	rs->q->epsn = (rs->pkt->psn + 1) & PSN_MASK;
	rs->q->msn++;
	return RESPST_DONE;
}

/*
 * RESPST_COMPLETE: the last packet of a SEND or of a WRITE with
 * immediate completes its receive WQE (a SEND with invalidate first
 * invalidates its key: refused, an invalid request); every message's
 * last packet moves the MSN.  Must hold rs->q->lock.
 *
 * The ACK of a message whose receive completes is due before the CQE is
 * seen: an application that answers the CQE at once (a ping-pong) posts
 * its reply after it, and sv_req_run sends a due ACK first.  So the
 * requester's SEND completes before the reply arrives, as on a NIC,
 * whose ACK leaves before software sees the CQE (ops->early_ack; on the
 * direct path the initiator's hook completes its WQE there instead).
 * ACKNOWLEDGE sets the same ACK again.
 */
static enum resp_state complete(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_qp_shm *q = rs->q;
	uint32_t f = rs->flags;

	if (!(f & OP_LAST))
		return RESPST_ACKNOWLEDGE;
	if (f & OP_SEND) {
		int inv = !!(f & OP_IETH);

		if (inv && sv_resp_invalidate(rs, pkt->inv_rkey)) {
			rs->recv_status = IBV_WC_REM_INV_REQ_ERR;
			return RESPST_ERR_INV_REQ;
		}
		rs->ops->early_ack(rs);
		sv_resp_push_recv(rs, IBV_WC_SUCCESS, IBV_WC_RECV,
				  (uint32_t)q->recv_off, !!(f & OP_IMM), inv,
				  pkt->se);
		q->msn++;
	} else if (f & OP_WRITE) {
		if (f & OP_IMM) {
			rs->ops->early_ack(rs);
			sv_resp_push_recv(rs, IBV_WC_SUCCESS,
					  IBV_WC_RECV_RDMA_WITH_IMM,
					  q->wr_total, 1, 0, pkt->se);
		}
		q->msn++;
	}
	return RESPST_ACKNOWLEDGE;
}

/*
 * RESPST_ACKNOWLEDGE: the expected PSN moves past the request (RC, UC)
 * and the ACK goes out (RC: where the requester asked for one, AckReq,
 * 9.7.5.1.1; direct: the outcome).  Must hold rs->q->lock.
 */
static enum resp_state acknowledge(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;

	if (rs->q->type != IBV_QPT_UD)
		rs->q->epsn = (pkt->psn + rs->ops->span(rs)) & PSN_MASK;
	rs->ops->answer(rs, SV_ROUT_ACK,
			sv_resp_syndrome(rs->q, RESPST_ACKNOWLEDGE), pkt->psn);
	return RESPST_DONE;
}

/*
 * The fatal errors (C9-xx: responder classes B, C and J): on RC the NAK
 * of state st, the receive being filled failed with recv_st, then the QP
 * to ERR with its receive side flushed and the owner told.  Must hold
 * rs->q->lock.
 */
static enum resp_state fatal(struct resp *rs, enum resp_state st,
			     enum ibv_wc_status recv_st)
{
	struct sv_qp_shm *q = rs->q;
	uint8_t syn = sv_resp_syndrome(q, st);
	uint8_t nak = syn & 0x1f;
	unsigned ev;

	if (sv_qpt_rc(q->type))
		rs->ops->answer(rs, SV_ROUT_NAK, syn, rs->pkt->psn);
	if (qflag(rs, SV_RF_HAVE_RECV) && recv_st != IBV_WC_SUCCESS)
		sv_resp_push_recv(rs, recv_st, (rs->flags & OP_WRITE) ?
						       IBV_WC_RECV_RDMA_WITH_IMM :
						       IBV_WC_RECV,
				  0, 0, 0, 1);
	qset(rs, SV_RF_IN_SEND | SV_RF_IN_WRITE, 0);
	sv_qshm_set_err(q);
	sv_resp_flush_rq(rs->eng, rs->t);
	/* What a NIC raises on the responder's QP (mlx5: WQ access error,
	 * invalid request, catastrophic): the application learns why its
	 * QP died even without a posted receive. */
	ev = nak == SV_NAK_REM_ACCESS ? SV_QEV_ACCESS_ERR :
	     nak == SV_NAK_INV_REQ    ? SV_QEV_REQ_ERR :
					SV_QEV_FATAL;
	atomic_fetch_or(&q->events, SV_QEV_FLUSH | ev);
	return RESPST_DONE;
}

/* RESPST_ERR_INV_REQ: a request the responder cannot take (opcode out of
 * sequence, a length past its range, a misaligned atomic, an invalidate
 * refused).  Must hold rs->q->lock. */
static enum resp_state err_inv_req(struct resp *rs)
{
	return fatal(rs, RESPST_ERR_INV_REQ,
		     rs->recv_status ? rs->recv_status :
				       IBV_WC_REM_INV_REQ_ERR);
}

/*
 * The misuse checker's view of a refusal (sv_engine_resp_diag, installed
 * only when SOFTVERBS_CHECK asks): called from the error states behind
 * one test of the hook, so a responder without the checker pays a load
 * and a branch never taken, on error paths only.  Must hold rs->q->lock.
 */
static void diag(struct resp *rs, enum sv_rdiag_kind kind)
{
	const struct sv_pkt *pkt = rs->pkt;
	const struct sv_qp_shm *q = rs->q;
	uint32_t f = rs->flags;
	struct sv_rdiag d = {
		.kind = kind,
		.qpn = q->qpn,
		.src_qpn = q->dest_qpn,
		.owner = q->h.owner_pid,
		.qp_type = q->type,
		.qp_access = q->access,
		.pd_id = rs->pd_id, /* the keys' PD: an XRC SRQ's on XRC */
		.psn = pkt->psn,
		.op = sv_opcodes[pkt->opcode].name,
		.direct = rs->ops->whole,
	};

	if (f & (OP_WRITE | OP_ATOMIC_WRITE))
		d.access = IBV_ACCESS_REMOTE_WRITE;
	else if (f & OP_READ)
		d.access = IBV_ACCESS_REMOTE_READ;
	else if (f & OP_ATOMIC)
		d.access = IBV_ACCESS_REMOTE_ATOMIC;
	if (f & OP_WRITE) {
		/* A later packet of a WRITE names the range its first did. */
		d.rkey = (f & OP_FIRST) ? pkt->rkey : q->wr_rkey;
		d.va = (f & OP_FIRST) ? pkt->va : q->wr_va;
		d.len = (f & OP_FIRST) ? pkt->dma_len : q->wr_total;
	} else if (f & (OP_READ | OP_ATOMIC | OP_ATOMIC_WRITE)) {
		d.rkey = pkt->rkey;
		d.va = pkt->va;
		d.len = (f & OP_READ) ? pkt->dma_len : 8;
	}
	d.srq = rs->t->srq != NULL;
	d.recvs = sv_rq_count(d.srq ? &rs->t->srq->rq : &rs->q->rq);
	sv_engine_resp_diag(rs->eng, &d);
}

/* RESPST_ERR_ACCESS: an R_Key or range the request may not use, or the
 * QP's access flags.  Must hold rs->q->lock. */
static enum resp_state err_access(struct resp *rs)
{
	if (__builtin_expect(sv_engine_resp_diag != NULL, 0))
		diag(rs, SV_RDIAG_ACCESS);
	return fatal(rs, RESPST_ERR_ACCESS, IBV_WC_REM_ACCESS_ERR);
}

/* RESPST_RNR (sv_resp_rnr), told to the checker first. */
static enum resp_state rnr(struct resp *rs)
{
	if (__builtin_expect(sv_engine_resp_diag != NULL, 0))
		diag(rs, SV_RDIAG_RNR);
	return sv_resp_rnr(rs);
}

/* RESPST_ERR_OP: the target's memory gone with its owner.  Must hold
 * rs->q->lock. */
static enum resp_state err_op(struct resp *rs)
{
	return fatal(rs, RESPST_ERR_OP, IBV_WC_REM_OP_ERR);
}

/* RESPST_ERR_LKEY: the receive WQE's SGEs do not grant local write.
 * Must hold rs->q->lock. */
static enum resp_state err_lkey(struct resp *rs)
{
	return fatal(rs, RESPST_ERR_LKEY, IBV_WC_LOC_PROT_ERR);
}

/*
 * RESPST_ERR_LENGTH: the message does not fit its receive WQE.  UD: the
 * receive fails and the QP with it (11.6.2), no answer; RC and UC: as an
 * invalid request, the receive failing with LOC_LEN_ERR.  Must hold
 * rs->q->lock.
 */
static enum resp_state err_length(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;

	if (q->type != IBV_QPT_UD || !qflag(rs, SV_RF_HAVE_RECV))
		return fatal(rs, RESPST_ERR_LENGTH, IBV_WC_LOC_LEN_ERR);
	sv_resp_push_recv(rs, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, 0, 0, 1);
	sv_qshm_set_err(q);
	sv_resp_flush_rq(rs->eng, rs->t);
	atomic_fetch_or(&q->events, SV_QEV_FLUSH);
	rs->ops->answer(rs, SV_ROUT_DROP, 0, rs->pkt->psn);
	return RESPST_DONE;
}

/*
 * RESPST_ERR_LOCAL (direct only): the initiator's own buffer faulted
 * mid-message: as if it never sent it.  The receive stays posted for the
 * next message.  Must hold rs->q->lock.
 */
static enum resp_state err_local(struct resp *rs)
{
	rs->q->recv_off = 0;
	qset(rs, SV_RF_IN_SEND | SV_RF_IN_WRITE, 0);
	rs->ops->answer(rs, SV_ROUT_LOCAL, 0, rs->pkt->psn);
	return RESPST_DONE;
}

/* RESPST_DROP: no answer, as a lost packet.  Must hold rs->q->lock. */
static enum resp_state drop(struct resp *rs)
{
	rs->ops->answer(rs, SV_ROUT_DROP, 0, rs->pkt->psn);
	return RESPST_DONE;
}

static enum resp_state (*const step[RESPST_NSTATES])(struct resp *) = {
	[RESPST_CHK_QP] = sv_resp_chk_qp,
	[RESPST_CHK_PSN] = sv_resp_chk_psn,
	[RESPST_CHK_OP_SEQ] = sv_resp_chk_op_seq,
	[RESPST_CHK_RESOURCE] = sv_resp_chk_resource,
	[RESPST_CHK_ACCESS] = sv_resp_chk_access,
	[RESPST_CHK_LENGTH] = sv_resp_chk_length,
	[RESPST_CHK_RKEY] = sv_resp_chk_rkey,
	[RESPST_EXECUTE] = execute,
	[RESPST_READ_REPLY] = read_reply,
	[RESPST_ATOMIC_REPLY] = atomic_reply,
	[RESPST_ATOMIC_WRITE_REPLY] = atomic_write_reply,
	[RESPST_COMPLETE] = complete,
	[RESPST_ACKNOWLEDGE] = acknowledge,
	[RESPST_DUPLICATE] = sv_resp_duplicate,
	[RESPST_NAK_SEQ] = sv_resp_nak_seq,
	[RESPST_RNR] = rnr,
	[RESPST_ERR_INV_REQ] = err_inv_req,
	[RESPST_ERR_ACCESS] = err_access,
	[RESPST_ERR_OP] = err_op,
	[RESPST_ERR_LENGTH] = err_length,
	[RESPST_ERR_LKEY] = err_lkey,
	[RESPST_ERR_LOCAL] = err_local,
	[RESPST_DROP] = drop,
};

/* The state machine: one request from RESPST_CHK_QP to RESPST_DONE.
 * Must hold rs->q->lock. */
static void run(struct resp *rs)
{
	enum resp_state st = RESPST_CHK_QP;

	while (st != RESPST_DONE)
		st = step[st](rs);
}

/* ----------------------------------------------- the packet path's ops -- */

static const struct sv_data *pkt_payload(struct resp *rs, struct sv_data *d,
					 struct sv_seg *s)
{
	sv_data_local(d, s, rs->pkt->payload, rs->pkt->paylen);
	return d;
}

static int pkt_room(struct resp *rs)
{
	return !sv_resp_respq_full(rs->tr);
}

static enum resp_state pkt_read_reply(struct resp *rs)
{
	sv_resp_queue_read(rs->tr, rs->pkt, 0, rs->pd_id);
	return RESPST_DONE;
}

static void pkt_atomic_reply(struct resp *rs)
{
	sv_resp_atomic_record(rs->tr, rs->pkt->psn, rs->orig);
	sv_resp_queue_atomic(rs->tr, rs->pkt->psn, rs->orig);
}

static void pkt_atomic_write_reply(struct resp *rs)
{
	sv_resp_atomic_record(rs->tr, rs->pkt->psn, 0);
	sv_resp_queue_atomic_write(rs->tr, rs->pkt->psn);
}

/* Kept in the owner's transport state until sv_resp_flush: an ACK where
 * the requester asked for one (RC), a NAK or RNR NAK; nothing else
 * leaves. */
static void pkt_answer(struct resp *rs, enum sv_rout kind, uint8_t syn,
		       uint32_t psn)
{
	switch (kind) {
	case SV_ROUT_ACK:
		if (sv_qpt_rc(rs->q->type) && rs->pkt->ackreq)
			sv_resp_set_ack(rs->tr, psn);
		break;
	case SV_ROUT_NAK:
	case SV_ROUT_RNR:
		sv_resp_set_nak(rs->tr, syn, psn);
		break;
	case SV_ROUT_DROP:
	case SV_ROUT_LOCAL:
		break;
	}
}

static void pkt_early_ack(struct resp *rs)
{
	pkt_answer(rs, SV_ROUT_ACK, SV_AETH_ACK | SV_AETH_ACK_UNLIMITED,
		   rs->pkt->psn);
}

static uint32_t pkt_span(struct resp *rs)
{
	(void)rs;
	return 1;
}

static const struct resp_ops packet_ops = {
	.whole = 0,
	.payload = pkt_payload,
	.room = pkt_room,
	.read_reply = pkt_read_reply,
	.atomic_reply = pkt_atomic_reply,
	.atomic_write_reply = pkt_atomic_write_reply,
	.early_ack = pkt_early_ack,
	.answer = pkt_answer,
	.span = pkt_span,
};

/* ------------------------------------------------------ direct ops -- */

static const struct sv_data *direct_payload(struct resp *rs, struct sv_data *d,
					    struct sv_seg *s)
{
	(void)d;
	(void)s;
	return rs->data;
}

static int direct_room(struct resp *rs)
{
	(void)rs;
	return 1;
}

static enum resp_state direct_read_reply(struct resp *rs)
{
	enum resp_state st = sv_resp_read_direct(rs);

	if (st == RESPST_DONE)
		rs->res->kind = SV_ROUT_ACK;
	return st;
}

static void direct_atomic_reply(struct resp *rs)
{
	rs->res->orig = rs->orig;
	rs->res->kind = SV_ROUT_ACK;
}

static void direct_atomic_write_reply(struct resp *rs)
{
	rs->res->kind = SV_ROUT_ACK;
}

static void direct_answer(struct resp *rs, enum sv_rout kind, uint8_t syn,
			  uint32_t psn)
{
	(void)psn;
	rs->res->kind = kind;
	if (kind == SV_ROUT_NAK || kind == SV_ROUT_RNR)
		rs->res->syn = syn;
}

static void direct_early_ack(struct resp *rs)
{
	if (rs->res->before_cqe) {
		rs->res->before_cqe(rs->res->arg);
		rs->res->before_cqe = NULL;
	}
}

/* A whole message stands for its packets: as many as the initiator cut
 * it into (else by the target's MTU). */
static uint32_t direct_span(struct resp *rs)
{
	uint32_t mtu = resp_mtu(rs->q);

	if (rs->res->npsn)
		return rs->res->npsn;
	if (rs->len > mtu)
		return (uint32_t)((rs->len + mtu - 1) / mtu);
	return 1;
}

static const struct resp_ops direct_ops = {
	.whole = 1,
	.payload = direct_payload,
	.room = direct_room,
	.read_reply = direct_read_reply,
	.atomic_reply = direct_atomic_reply,
	.atomic_write_reply = direct_atomic_write_reply,
	.early_ack = direct_early_ack,
	.answer = direct_answer,
	.span = direct_span,
};

/* ---------------------------------------------------- the callers -- */

void sv_resp_notify(struct sv_engine *eng, struct sv_rtgt *t,
		    unsigned cq_bits, int srq_limit)
{
	if (cq_bits)
		sv_rtgt_notify(eng, t, SV_EVK_CQ, cq_bits);
	if (srq_limit)
		sv_rtgt_notify(eng, t, SV_EVK_SRQ, 1);
	if (atomic_load_explicit(&t->q->events, memory_order_relaxed))
		sv_rtgt_notify(eng, t, SV_EVK_QP, 0);
}

/* The PDs of a run (struct resp): the XRC SRQ's on an XRC TGT QP. */
static void resp_pds(struct resp *rs)
{
	if (rs->t->x) {
		rs->pd_id = rs->t->x->pd_id;
		rs->rx_pd_id = rs->t->x->pd_id;
	} else {
		rs->pd_id = rs->q->pd_id;
		rs->rx_pd_id = rs->q->rx_pd_id;
	}
}

void sv_resp_packet(struct sv_qp *qp, const struct sv_pkt *pkt,
		    struct sv_resp_hold *h)
{
	struct sv_tr *tr = tr_of(qp);
	struct resp rs = { .ops = &packet_ops, .eng = qp->eng, .t = &h->t,
			   .q = qp->shm, .tr = tr, .pkt = pkt,
			   .len = pkt->paylen, .flags = pkt->flags };
	struct sv_xsrq *x = NULL;

	if (!tr)
		return;
	rs.rkc = &tr->rkey;
	rs.rxc = &tr->rxkey;
	/* An XRC request lands in the SRQ its XRCETH names: its view is
	 * the run's (a run goes on only while requests name the same one:
	 * its CQ's events are told at the end of the run). */
	if (qp->type == IBV_QPT_XRC_RECV && (pkt->flags & OP_XRCETH))
		x = sv_xsrq_get(qp->eng, pkt->srqn);
	if (h->qp != qp || h->t.x != x) {
		sv_resp_release(h);
		sv_rtgt_own(&h->t, qp);
		if (qp->type == IBV_QPT_XRC_RECV)
			sv_rtgt_set_xsrq(&h->t, x);
		resp_lock(qp->shm);
		h->qp = qp;
	} else {
		sv_xsrq_put(x); /* the run holds it already */
	}
	resp_pds(&rs);
	run(&rs);
	h->cq_bits |= rs.cq_bits;
	h->srq_limit |= rs.srq_limit;
}

void sv_resp_release(struct sv_resp_hold *h)
{
	struct sv_qp *qp = h->qp;
	unsigned cq_bits = h->cq_bits;
	int srq_limit = h->srq_limit;

	if (!qp)
		return;
	sv_unlock_shm(&qp->shm->lock);
	h->qp = NULL;
	h->cq_bits = 0;
	h->srq_limit = 0;
	sv_resp_notify(qp->eng, &h->t, cq_bits, srq_limit);
	sv_xsrq_put(h->t.x);
	h->t.x = NULL;
}

void sv_resp_direct(struct sv_engine *eng, struct sv_rtgt *t,
		    const struct sv_pkt *pkt, const struct sv_data *data,
		    struct sv_resp_res *res)
{
	struct sv_pkt p = *pkt;
	struct resp rs = { .ops = &direct_ops, .eng = eng, .t = t, .q = t->q,
			   .pkt = &p, .data = data, .len = data->len,
			   .flags = pkt->flags, .res = res };

	res->kind = SV_ROUT_DROP;
	res->orig = 0;
	resp_pds(&rs);
	resp_lock(t->q);
	/* A whole message arrives in order by construction: it takes the
	 * PSN the responder expects. */
	p.psn = t->q->epsn;
	p.paylen = (uint32_t)(data->len > UINT32_MAX ? UINT32_MAX : data->len);
	run(&rs);
	sv_unlock_shm(&t->q->lock);
	sv_resp_notify(eng, t, rs.cq_bits, rs.srq_limit);
}


/* SPDX-License-Identifier: MIT */
/*
 * The responder (IBTA 9.7.4 responder side; rxe_resp.c's role), an
 * explicit state machine per inbound request packet:
 *
 *   CHECK_STATE -> CHECK_PSN -> CHECK_OP_SEQ -> CHECK_RESOURCE ->
 *   CHECK_RKEY -> EXECUTE -> COMPLETE -> ACKNOWLEDGE -> DONE
 *
 * with side exits DUPLICATE, NAK_SEQ, RNR, ERR_* (NAK + the QP to ERR,
 * C9-xx classes) and DROP.  READ and atomic answers are queued (respq) and
 * sent by sv_resp_flush after the batch, in PSN order, followed by one
 * coalesced ACK: a ring that is full leaves them queued for the progress
 * thread, so a responder never blocks on its peer.
 */
#include "engine_int.h"
#include "sv_client.h"

#include <errno.h>
#include <string.h>

enum resp_state {
	RESPST_CHECK_STATE,
	RESPST_CHECK_PSN,
	RESPST_CHECK_OP_SEQ,
	RESPST_CHECK_RESOURCE,
	RESPST_CHECK_RKEY,
	RESPST_EXECUTE,
	RESPST_COMPLETE,
	RESPST_ACKNOWLEDGE,
	RESPST_DUPLICATE,
	RESPST_NAK_SEQ,
	RESPST_RNR,
	RESPST_ERR_INV_REQ,  /* NAK invalid request (class C/J) */
	RESPST_ERR_ACCESS,   /* NAK remote access error */
	RESPST_ERR_OP,	     /* NAK remote operational error */
	RESPST_ERR_LENGTH,   /* receive too small: LOC_LEN_ERR + NAK inv req */
	RESPST_ERR_LKEY,     /* receive SGE bad: LOC_PROT_ERR + NAK rem op */
	RESPST_DROP,
	RESPST_DONE,
};

struct resp {
	struct sv_qp *qp;
	struct sv_tr *tr;
	const struct sv_pkt *pkt;
	uint32_t flags;
	uint32_t rx_pd; /* PD of the receive buffers (SRQ's or QP's) */
	enum ibv_wc_status recv_status;
};

static int transport_ok(const struct sv_qp *qp, uint8_t opcode)
{
	switch (qp->type) {
	case IBV_QPT_RC:
		return opcode < 0x20;
	case IBV_QPT_UC:
		return (opcode & 0xe0) == OPC_UC;
	case IBV_QPT_UD:
		return (opcode & 0xe0) == OPC_UD;
	default:
		return 0;
	}
}

/* Takes a receive WQE into tr->recv.  Must hold rq_lock. */
static int take_recv(struct sv_qp *qp, struct sv_tr *tr)
{
	struct sv_recv_wqe *r;

	if (tr->have_recv)
		return 0;
	if (qp->srq) {
		if (sv_srq_take(qp->srq, tr->recv))
			return -1;
	} else {
		if (qp->rq.head == qp->rq.tail)
			return -1;
		r = sv_wq_slot(&qp->rq, qp->rq.head);
		tr->recv->wr_id = r->wr_id;
		tr->recv->num_sge = r->num_sge > tr->recv_cap ? tr->recv_cap :
								  r->num_sge;
		memcpy(tr->recv->sge, r->sge,
		       tr->recv->num_sge * sizeof(struct ibv_sge));
		qp->rq.head++;
	}
	tr->have_recv = 1;
	tr->recv_off = 0;
	return 0;
}

static int is_v4mapped(const uint8_t *g);

/*
 * What mlx5 reports in the SL of a UD receive completion on a RoCE port
 * (rdma-core's mlx5 passes the CQE's 4 bits through): the RoCE packet
 * type, bit 3 "the frame carries a UDP header" (RoCE v2) and bits 2:0 the
 * L3 header, 1 = IPv6, 2 = IPv4 (A17.4.5.1: a RoCE v2 UD completion says
 * whether the frame was IPv4 or IPv6).  UCX's ud_verbs reads it to find
 * the destination address in the 40 bytes before the payload (the last 4
 * for IPv4, the last 16 for IPv6) and drops packets whose address is not
 * one of its GIDs.
 */
static uint8_t roce_pkt_type(const struct sv_pkt *pkt)
{
	if (!pkt->grh)
		return 0;
	return 0x8 | (is_v4mapped(pkt->grh + 8) && is_v4mapped(pkt->grh + 24) ?
			      0x2 : 0x1);
}

static void push_recv(struct resp *rs, enum ibv_wc_status st,
		      enum ibv_wc_opcode opc, uint32_t byte_len, int with_imm,
		      int with_inv, int solicited)
{
	struct sv_qp *qp = rs->qp;
	const struct sv_pkt *pkt = rs->pkt;
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = rs->tr->recv->wr_id;
	wc.status = st;
	wc.opcode = opc;
	wc.byte_len = byte_len;
	wc.qp_num = qp->qpx.qp_base.qp_num;
	if (st == IBV_WC_SUCCESS) {
		if (with_imm) {
			wc.imm_data = pkt->imm;
			wc.wc_flags |= IBV_WC_WITH_IMM;
		}
		if (with_inv) {
			wc.invalidated_rkey = pkt->inv_rkey;
			wc.wc_flags |= IBV_WC_WITH_INV;
		}
		if (qp->type == IBV_QPT_UD) {
			wc.src_qp = pkt->src_qpn;
			wc.wc_flags |= IBV_WC_GRH;
			wc.sl = roce_pkt_type(pkt);
		} else {
			wc.src_qp = qp->dest_qpn;
		}
	}
	rs->tr->have_recv = 0;
	sv_cq_push(qp->rcq, &wc, solicited || st != IBV_WC_SUCCESS);
}

static int is_v4mapped(const uint8_t *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g, pfx, 12);
}

static uint16_t ip_csum(const uint8_t *h)
{
	uint32_t s = 0;

	for (int i = 0; i < 20; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/*
 * The 40 bytes a UD receive starts with.  RoCE v2 between IPv4-mapped
 * GIDs: zeros and the IPv4 header in the last 20 bytes (what the kernel's
 * RoCE drivers deliver and ibv_init_ah_from_wc parses); else an IPv6-style
 * GRH with the sender's and our GIDs.
 */
static void make_grh(const struct sv_pkt *pkt, uint8_t out[40])
{
	const uint8_t *sgid = pkt->grh + 8, *dgid = pkt->grh + 24;

	memset(out, 0, 40);
	if (is_v4mapped(sgid) && is_v4mapped(dgid)) {
		uint8_t *ip = out + 20;
		uint32_t tot = 20 + 8 + SV_BTH_BYTES + SV_DETH_BYTES +
			       ((pkt->flags & OP_IMM) ? 4 : 0) + pkt->paylen + 4;

		ip[0] = 0x45;
		ip[2] = (uint8_t)(tot >> 8);
		ip[3] = (uint8_t)tot;
		ip[6] = 0x40; /* DF */
		ip[8] = 64;
		ip[9] = 17; /* UDP */
		memcpy(ip + 12, sgid + 12, 4);
		memcpy(ip + 16, dgid + 12, 4);
		{
			uint16_t c = ip_csum(ip);

			ip[10] = (uint8_t)(c >> 8);
			ip[11] = (uint8_t)c;
		}
		return;
	}
	memcpy(out, pkt->grh, 40);
}

static void set_nak(struct sv_tr *tr, uint8_t syn, uint32_t psn)
{
	tr->ack_pending = 1;
	tr->ack_syn = syn;
	tr->ack_psn = psn;
}

static void set_ack(struct sv_tr *tr, uint32_t psn)
{
	/* A pending NAK is never replaced by an ACK. */
	if (tr->ack_pending && (tr->ack_syn & SV_AETH_TYPE_MASK) != SV_AETH_ACK)
		return;
	tr->ack_pending = 1;
	tr->ack_syn = SV_AETH_ACK | SV_AETH_ACK_UNLIMITED;
	tr->ack_psn = psn;
}

static int respq_push(struct sv_tr *tr, const struct sv_respq_ent *e)
{
	if (tr->rq_tail - tr->rq_head >= SV_ENG_RESPQ)
		return -1;
	tr->respq[tr->rq_tail % SV_ENG_RESPQ] = *e;
	tr->rq_tail++;
	return 0;
}

/* Queues the answer to a READ request, a new one or a repeated one. */
static void push_read(struct sv_tr *tr, const struct sv_pkt *pkt)
{
	struct sv_respq_ent q = { .kind = 1,
				  .psn = pkt->psn,
				  .left = pkt->dma_len,
				  .total = pkt->dma_len,
				  .va = pkt->va,
				  .rkey = pkt->rkey };

	respq_push(tr, &q);
}

static enum resp_state check_psn(struct resp *rs)
{
	struct sv_tr *tr = rs->tr;
	const struct sv_pkt *pkt = rs->pkt;
	int32_t d = psn_diff(pkt->psn, tr->epsn);

	if (rs->qp->type == IBV_QPT_UD)
		return RESPST_CHECK_RESOURCE;
	if (rs->qp->type == IBV_QPT_UC) {
		if (d != 0) {
			/* A gap: the message in progress is lost (9.8.3). */
			tr->in_send = tr->in_write = 0;
			tr->recv_off = 0;
			tr->epsn = pkt->psn;
			tr->uc_drop = !(rs->flags & OP_FIRST);
			if (tr->uc_drop) {
				tr->epsn = (pkt->psn + 1) & PSN_MASK;
				return RESPST_DROP;
			}
		}
		if (tr->uc_drop && (rs->flags & OP_FIRST))
			tr->uc_drop = 0;
		if (tr->uc_drop) {
			tr->epsn = (pkt->psn + 1) & PSN_MASK;
			return RESPST_DROP;
		}
		return RESPST_CHECK_OP_SEQ;
	}
	if (d > 0)
		return RESPST_NAK_SEQ;
	if (d < 0)
		return RESPST_DUPLICATE;
	tr->nak_sent = 0;
	return RESPST_CHECK_OP_SEQ;
}

static enum resp_state check_op_seq(struct resp *rs)
{
	struct sv_tr *tr = rs->tr;
	uint32_t f = rs->flags, mtu = tr->mtu ? tr->mtu : 4096;
	int bad;

	if (tr->in_send)
		bad = !(f & OP_SEND) || !(f & (OP_MIDDLE | OP_LAST)) ||
		      (f & OP_FIRST);
	else if (tr->in_write)
		bad = !(f & OP_WRITE) || !(f & (OP_MIDDLE | OP_LAST)) ||
		      (f & OP_FIRST);
	else
		bad = !(f & OP_FIRST);
	/* Sizes (9.7.4.1.4): FIRST and MIDDLE carry exactly one MTU. */
	if (!bad && rs->pkt->paylen > mtu)
		bad = 1;
	if (!bad && (f & (OP_FIRST | OP_MIDDLE)) && !(f & OP_LAST) &&
	    (f & (OP_SEND | OP_WRITE)) && rs->pkt->paylen != mtu)
		bad = 1;
	if (!bad)
		return RESPST_CHECK_RESOURCE;
	if (rs->qp->type == IBV_QPT_UC) {
		if (f & OP_FIRST) {
			tr->in_send = tr->in_write = 0;
			tr->recv_off = 0;
			return RESPST_CHECK_RESOURCE;
		}
		tr->uc_drop = 1;
		return RESPST_DROP;
	}
	return RESPST_ERR_INV_REQ;
}

static enum resp_state check_resource(struct resp *rs)
{
	struct sv_qp *qp = rs->qp;
	struct sv_tr *tr = rs->tr;
	uint32_t f = rs->flags;
	int need = ((f & OP_SEND) && (f & OP_FIRST)) ||
		   ((f & OP_WRITE) && (f & OP_IMM));

	if (need && !tr->have_recv && take_recv(qp, tr))
		return qp->type == IBV_QPT_RC ? RESPST_RNR : RESPST_DROP;
	if ((f & (OP_READ | OP_ATOMIC)) &&
	    tr->rq_tail - tr->rq_head >= SV_ENG_RESPQ)
		return RESPST_DROP; /* the requester's retry comes back */
	return RESPST_CHECK_RKEY;
}

static enum resp_state kerr_state(int e)
{
	return e == SV_KERR_OWNER ? RESPST_ERR_OP : RESPST_ERR_ACCESS;
}

static enum resp_state check_rkey(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_qp *qp = rs->qp;
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	struct sv_mem m;
	int e;

	if ((rs->flags & OP_WRITE) && (rs->flags & OP_FIRST)) {
		if (pkt->paylen > pkt->dma_len)
			return RESPST_ERR_INV_REQ;
		if (pkt->dma_len) {
			e = sv_key_resolve(qp->eng, pkt->rkey, qp->pd_id, pkt->va,
					   pkt->dma_len, IBV_ACCESS_REMOTE_WRITE,
					   1, qpn, &m);
			if (e)
				return qp->type == IBV_QPT_UC ? RESPST_DROP :
								 kerr_state(e);
		}
		rs->tr->wr_va = pkt->va;
		rs->tr->wr_rkey = pkt->rkey;
		rs->tr->wr_total = pkt->dma_len;
		rs->tr->wr_left = pkt->dma_len;
	} else if (rs->flags & OP_READ) {
		if (pkt->dma_len) {
			e = sv_key_resolve(qp->eng, pkt->rkey, qp->pd_id, pkt->va,
					   pkt->dma_len, IBV_ACCESS_REMOTE_READ,
					   1, qpn, &m);
			if (e)
				return kerr_state(e);
		}
	} else if (rs->flags & OP_ATOMIC) {
		if (pkt->va & 7)
			return RESPST_ERR_INV_REQ;
		e = sv_key_resolve(qp->eng, pkt->rkey, qp->pd_id, pkt->va, 8,
				   IBV_ACCESS_REMOTE_ATOMIC, 1, qpn, &m);
		if (e)
			return kerr_state(e);
	}
	return RESPST_EXECUTE;
}

static uint64_t do_atomic(struct resp *rs, int *err)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_qp *qp = rs->qp;
	struct sv_mem m;
	uint64_t orig = 0;

	*err = sv_key_resolve(qp->eng, pkt->rkey, qp->pd_id, pkt->va, 8,
			      IBV_ACCESS_REMOTE_ATOMIC, 1,
			      qp->qpx.qp_base.qp_num, &m);
	if (*err)
		return 0;
	/* Atomic with respect to every other atomic of the device: CPU
	 * atomics on the memory, here or in its owner (never CMA). */
	if (sv_mem_atomic(&m, (pkt->opcode & 0x1f) == OPC_CMP_SWAP ?
				      SV_RMEM_CSWAP : SV_RMEM_FADD,
			  pkt->comp, pkt->swap, &orig))
		*err = SV_KERR_OWNER;
	return orig;
}

static enum resp_state execute(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_qp *qp = rs->qp;
	struct sv_tr *tr = rs->tr;
	uint32_t f = rs->flags;
	int e;

	if (f & OP_SEND) {
		struct sv_recv_wqe *r = tr->recv;

		if (qp->type == IBV_QPT_UD) {
			uint8_t grh[40];

			make_grh(pkt, grh);
			if (!pkt->grh)
				memset(grh, 0, sizeof(grh));
			e = sv_sge_copy(qp->eng, r->sge, (int)r->num_sge,
					rs->rx_pd, 0, grh, 40, 1);
			if (!e)
				tr->recv_off = 40;
		} else {
			e = 0;
		}
		if (!e && pkt->paylen)
			e = sv_sge_copy(qp->eng, r->sge, (int)r->num_sge,
					rs->rx_pd, tr->recv_off,
					(void *)pkt->payload, pkt->paylen, 1);
		if (e)
			return e < 0 ? RESPST_ERR_LENGTH : RESPST_ERR_LKEY;
		tr->recv_off += pkt->paylen;
		tr->in_send = !(f & OP_LAST);
		return RESPST_COMPLETE;
	}
	if (f & OP_WRITE) {
		if (pkt->paylen > tr->wr_left)
			return qp->type == IBV_QPT_UC ? RESPST_DROP :
							 RESPST_ERR_INV_REQ;
		if (pkt->paylen) {
			struct sv_mem m;
			uint64_t va = tr->wr_va + (tr->wr_total - tr->wr_left);

			/* Checked again per packet: a rereg or dereg while a
			 * long write is in flight stops it. */
			e = sv_key_resolve(qp->eng, tr->wr_rkey, qp->pd_id, va,
					   pkt->paylen, IBV_ACCESS_REMOTE_WRITE,
					   1, qp->qpx.qp_base.qp_num, &m);
			if (!e && sv_mem_write(&m, 0, pkt->payload, pkt->paylen))
				e = SV_KERR_OWNER;
			if (e)
				return qp->type == IBV_QPT_UC ? RESPST_DROP :
								 kerr_state(e);
		}
		tr->wr_left -= pkt->paylen;
		tr->in_write = !(f & OP_LAST);
		if ((f & OP_LAST) && tr->wr_left)
			return qp->type == IBV_QPT_UC ? RESPST_DROP :
							 RESPST_ERR_INV_REQ;
		return RESPST_COMPLETE;
	}
	if (f & OP_READ) {
		uint32_t mtu = tr->mtu ? tr->mtu : 4096;
		uint32_t npk = pkt->dma_len ? (pkt->dma_len + mtu - 1) / mtu : 1;

		push_read(tr, pkt);
		tr->epsn = (pkt->psn + npk) & PSN_MASK;
		tr->msn++;
		return RESPST_DONE;
	}
	if (f & OP_ATOMIC) {
		struct sv_respq_ent q = { .kind = 2, .psn = pkt->psn };
		uint32_t slot = pkt->psn & (SV_ENG_ATOMIC_CACHE - 1);

		q.orig = do_atomic(rs, &e);
		if (e)
			return kerr_state(e);
		tr->atomic_cache[slot].psn = pkt->psn;
		tr->atomic_cache[slot].orig = q.orig;
		tr->atomic_cache[slot].valid = 1;
		respq_push(tr, &q);
		tr->epsn = (pkt->psn + 1) & PSN_MASK;
		tr->msn++;
		return RESPST_DONE;
	}
	return RESPST_ERR_INV_REQ;
}

/* Invalidates key for SEND_WITH_INV: the daemon owns the key table, and
 * must not be called with rq_lock held. */
static int invalidate(struct resp *rs, uint32_t key)
{
	struct sv_qp *qp = rs->qp;
	struct sv_key_req req = { .key = key,
				  .pd_id = qp->pd_id,
				  .qpn = qp->qpx.qp_base.qp_num };
	int err;

	pthread_spin_unlock(&qp->rq_lock);
	err = sv_call_simple(SV_OP_KEY_INVALIDATE, 0, qp->eng->instance, -1,
			     &req, sizeof(req), NULL, 0);
	sv_spin_lock(&qp->rq_lock);
	return err;
}

static enum resp_state complete(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_tr *tr = rs->tr;
	uint32_t f = rs->flags;
	int se = __bth_se(pkt->bth);

	if (!(f & OP_LAST))
		return RESPST_ACKNOWLEDGE;
	if (f & OP_SEND) {
		int inv = !!(f & OP_IETH);

		if (inv && invalidate(rs, pkt->inv_rkey)) {
			rs->recv_status = IBV_WC_REM_INV_REQ_ERR;
			return RESPST_ERR_INV_REQ;
		}
		if (rs->qp->state == IBV_QPS_ERR || !tr->have_recv)
			return RESPST_DONE; /* flushed while unlocked */
		push_recv(rs, IBV_WC_SUCCESS, IBV_WC_RECV,
			  (uint32_t)tr->recv_off, !!(f & OP_IMM), inv, se);
		tr->recv_off = 0;
		tr->msn++;
	} else if (f & OP_WRITE) {
		if (f & OP_IMM)
			push_recv(rs, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
				  tr->wr_total, 1, 0, se);
		tr->msn++;
	}
	return RESPST_ACKNOWLEDGE;
}

static enum resp_state duplicate(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_tr *tr = rs->tr;

	/* 9.7.5.1.2: re-answer, never re-execute a SEND or WRITE. */
	if (rs->flags & OP_READ) {
		push_read(tr, pkt);
		return RESPST_DONE;
	}
	if (rs->flags & OP_ATOMIC) {
		uint32_t i = pkt->psn & (SV_ENG_ATOMIC_CACHE - 1);

		if (tr->atomic_cache[i].valid &&
		    tr->atomic_cache[i].psn == pkt->psn) {
			struct sv_respq_ent q = {
				.kind = 2,
				.psn = pkt->psn,
				.orig = tr->atomic_cache[i].orig
			};

			respq_push(tr, &q);
			return RESPST_DONE;
		}
		return RESPST_DROP;
	}
	set_ack(tr, (tr->epsn - 1) & PSN_MASK);
	return RESPST_DONE;
}

/* Fatal responder errors (C9-xx class B/C/J): NAK, then the QP to ERR. */
static void fatal(struct resp *rs, uint8_t nak, enum ibv_wc_status recv_st)
{
	struct sv_qp *qp = rs->qp;
	struct sv_tr *tr = rs->tr;

	if (qp->type == IBV_QPT_RC)
		set_nak(tr, SV_AETH_NAK | nak, rs->pkt->psn);
	if (tr->have_recv && recv_st != IBV_WC_SUCCESS)
		push_recv(rs, recv_st, (rs->flags & OP_WRITE) ?
					       IBV_WC_RECV_RDMA_WITH_IMM :
					       IBV_WC_RECV,
			  0, 0, 0, 1);
	tr->in_send = tr->in_write = 0;
	sv_qp_set_err(qp);
	tr->need_flush = 1;
	/* What a NIC raises on the responder's QP (mlx5: WQ access error,
	 * invalid request, catastrophic): the application learns why its
	 * QP died even without a posted receive. */
	sv_eng_async(qp->eng, qp->qpx.qp_base.context,
		     nak == SV_NAK_REM_ACCESS ? IBV_EVENT_QP_ACCESS_ERR :
		     nak == SV_NAK_INV_REQ    ? IBV_EVENT_QP_REQ_ERR :
						IBV_EVENT_QP_FATAL,
		     &qp->qpx.qp_base);
}

void sv_resp_packet(struct sv_qp *qp, const struct sv_pkt *pkt)
{
	struct sv_tr *tr = tr_of(qp);
	struct resp rs = { .qp = qp, .tr = tr, .pkt = pkt, .flags = pkt->flags };
	enum resp_state st = RESPST_CHECK_STATE;

	if (!tr)
		return;
	rs.rx_pd = qp->srq ? qp->srq->pd_id : qp->pd_id;
	sv_spin_lock(&qp->rq_lock);
	while (st != RESPST_DONE) {
		switch (st) {
		case RESPST_CHECK_STATE:
			if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS &&
			    qp->state != IBV_QPS_SQD && qp->state != IBV_QPS_SQE)
				st = RESPST_DROP;
			else if (!transport_ok(qp, pkt->opcode))
				st = RESPST_DROP;
			else if (qp->type == IBV_QPT_UD &&
				 pkt->qkey != qp->attr.qkey)
				st = RESPST_DROP; /* Q_Key violation: silent */
			else
				st = RESPST_CHECK_PSN;
			if (st == RESPST_CHECK_PSN && qp->state == IBV_QPS_RTR &&
			    qp->type != IBV_QPT_UD && !tr->comm_est) {
				/* First packet while in RTR (IBTA 11.6.3). */
				tr->comm_est = 1;
				sv_eng_async(qp->eng, qp->qpx.qp_base.context,
					     IBV_EVENT_COMM_EST, &qp->qpx.qp_base);
			}
			break;
		case RESPST_CHECK_PSN:
			st = check_psn(&rs);
			break;
		case RESPST_CHECK_OP_SEQ:
			st = check_op_seq(&rs);
			break;
		case RESPST_CHECK_RESOURCE:
			st = check_resource(&rs);
			break;
		case RESPST_CHECK_RKEY:
			st = check_rkey(&rs);
			break;
		case RESPST_EXECUTE:
			st = execute(&rs);
			break;
		case RESPST_COMPLETE:
			st = complete(&rs);
			break;
		case RESPST_ACKNOWLEDGE:
			if (qp->type != IBV_QPT_UD)
				tr->epsn = (pkt->psn + 1) & PSN_MASK;
			if (qp->type == IBV_QPT_RC && __bth_ackreq(pkt->bth))
				set_ack(tr, pkt->psn);
			st = RESPST_DONE;
			break;
		case RESPST_DUPLICATE:
			st = duplicate(&rs);
			break;
		case RESPST_NAK_SEQ:
			if (!tr->nak_sent) {
				tr->nak_sent = 1;
				set_nak(tr, SV_AETH_NAK | SV_NAK_PSN_SEQ, tr->epsn);
			}
			st = RESPST_DROP;
			break;
		case RESPST_RNR:
			/* Drop what follows until the retry comes back to
			 * epsn (nak_sent), so it is not NAKed as a gap. */
			set_nak(tr, SV_AETH_RNR_NAK | (qp->attr.min_rnr_timer & 0x1f),
				pkt->psn);
			tr->nak_sent = 1;
			st = RESPST_DROP;
			break;
		case RESPST_ERR_INV_REQ:
			fatal(&rs, SV_NAK_INV_REQ,
			      rs.recv_status ? rs.recv_status : IBV_WC_REM_INV_REQ_ERR);
			st = RESPST_DONE;
			break;
		case RESPST_ERR_ACCESS:
			fatal(&rs, SV_NAK_REM_ACCESS, IBV_WC_REM_ACCESS_ERR);
			st = RESPST_DONE;
			break;
		case RESPST_ERR_OP:
			fatal(&rs, SV_NAK_REM_OP, IBV_WC_REM_OP_ERR);
			st = RESPST_DONE;
			break;
		case RESPST_ERR_LENGTH:
			if (qp->type == IBV_QPT_UD && tr->have_recv) {
				/* UD: the receive fails, the QP too (11.6.2). */
				push_recv(&rs, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV,
					  0, 0, 0, 1);
				sv_qp_set_err(qp);
				tr->need_flush = 1;
			} else {
				fatal(&rs, SV_NAK_INV_REQ, IBV_WC_LOC_LEN_ERR);
			}
			st = RESPST_DONE;
			break;
		case RESPST_ERR_LKEY:
			fatal(&rs, SV_NAK_REM_OP, IBV_WC_LOC_PROT_ERR);
			st = RESPST_DONE;
			break;
		case RESPST_DROP:
		case RESPST_DONE:
			st = RESPST_DONE;
			break;
		}
	}
	pthread_spin_unlock(&qp->rq_lock);
}

/* Sends queued answers, then the coalesced ACK.  Must hold rq_lock.
 * Returns 0, or -1 when the ring filled (the rest stays queued). */
static int send_queued(struct sv_qp *qp, struct sv_tr *tr)
{
	struct sv_link *link = tr->link;
	uint32_t mtu = tr->mtu ? tr->mtu : 4096;
	int dead = 0;

	while (tr->rq_head != tr->rq_tail) {
		struct sv_respq_ent *q = &tr->respq[tr->rq_head % SV_ENG_RESPQ];

		if (!link) {
			tr->rq_head++; /* nowhere to send: the requester times out */
			continue;
		}
		if (q->kind == 2) {
			uint8_t *p = sv_link_reserve(link, SV_BTH_BYTES + SV_AETH_BYTES +
							   SV_ATMACK_BYTES, 0, &dead);

			if (!p)
				return dead ? (tr->rq_head = tr->rq_tail, 0) : -1;
			bth_init(p, OPC_ATOMIC_ACK, 0, 0xffff, qp->dest_qpn, 0, q->psn);
			aeth_set(p + SV_BTH_BYTES, SV_AETH_ACK | SV_AETH_ACK_UNLIMITED,
				 tr->msn);
			atmack_set(p + SV_BTH_BYTES + SV_AETH_BYTES, q->orig);
			sv_link_commit(link);
			tr->rq_head++;
			continue;
		}
		do {
			uint32_t sent = q->total - q->left;
			uint32_t chunk = q->left > mtu ? mtu : q->left;
			int first = sent == 0, last = chunk == q->left;
			uint8_t opc = first && last ? OPC_READ_RESP_ONLY :
				      first	    ? OPC_READ_RESP_FIRST :
				      last	    ? OPC_READ_RESP_LAST :
						      OPC_READ_RESP_MIDDLE;
			unsigned hl = sv_op_hdr_len(sv_opcodes[opc].flags);
			struct sv_mem m;
			uint8_t *p;
			int e = 0;

			if (chunk)
				e = sv_key_resolve(qp->eng, q->rkey, qp->pd_id,
						   q->va + sent, chunk,
						   IBV_ACCESS_REMOTE_READ, 1,
						   qp->qpx.qp_base.qp_num, &m);
			if (e) {
				/* Revoked mid-read: the rest is a NAK. */
				p = sv_link_reserve(link, SV_BTH_BYTES + SV_AETH_BYTES,
						    0, &dead);
				if (!p)
					return dead ? 0 : -1;
				bth_init(p, OPC_ACK, 0, 0xffff, qp->dest_qpn, 0, q->psn);
				aeth_set(p + SV_BTH_BYTES,
					 SV_AETH_NAK | (e == SV_KERR_OWNER ?
							SV_NAK_REM_OP : SV_NAK_REM_ACCESS),
					 tr->msn);
				sv_link_commit(link);
				q->left = 0;
				break;
			}
			p = sv_link_reserve(link, hl + chunk, 0, &dead);
			if (!p)
				return dead ? (tr->rq_head = tr->rq_tail, 0) : -1;
			bth_init(p, opc, 0, 0xffff, qp->dest_qpn, 0, q->psn);
			if (sv_opcodes[opc].flags & OP_AETH)
				aeth_set(p + SV_BTH_BYTES,
					 SV_AETH_ACK | SV_AETH_ACK_UNLIMITED, tr->msn);
			if (chunk && sv_mem_read(&m, 0, p + hl, chunk)) {
				sv_link_abort(link);
				q->left = 0;
				break;
			}
			sv_link_commit(link);
			q->left -= chunk;
			q->psn = (q->psn + 1) & PSN_MASK;
		} while (q->left);
		tr->rq_head++;
	}
	if (tr->ack_pending && link) {
		uint8_t *p = sv_link_reserve(link, SV_BTH_BYTES + SV_AETH_BYTES, 0,
					     &dead);

		if (!p)
			return dead ? (tr->ack_pending = 0, 0) : -1;
		bth_init(p, OPC_ACK, 0, 0xffff, qp->dest_qpn, 0, tr->ack_psn);
		aeth_set(p + SV_BTH_BYTES, tr->ack_syn, tr->msn);
		sv_link_commit(link);
	}
	tr->ack_pending = 0;
	return 0;
}

void sv_resp_flush(struct sv_qp *qp)
{
	struct sv_tr *tr = tr_of(qp);
	int full;

	if (!tr)
		return;
	sv_spin_lock(&qp->rq_lock);
	if (qp->type != IBV_QPT_RC ||
	    (!tr->ack_pending && tr->rq_head == tr->rq_tail)) {
		pthread_spin_unlock(&qp->rq_lock);
		return;
	}
	if (!tr->link)
		tr->link = qp->link;
	full = send_queued(qp, tr);
	pthread_spin_unlock(&qp->rq_lock);
	if (full)
		sv_eng_want_work(qp->eng);
}

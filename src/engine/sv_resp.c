/* SPDX-License-Identifier: MIT */
/*
 * The responder (IBTA 9.7.4 responder side; rxe_resp.c's role), an
 * explicit state machine per inbound request:
 *
 *   CHECK_STATE -> CHECK_PSN -> CHECK_OP_SEQ -> CHECK_RESOURCE ->
 *   CHECK_RKEY -> EXECUTE -> COMPLETE -> ACKNOWLEDGE -> DONE
 *
 * with side exits DUPLICATE, NAK_SEQ, RNR, ERR_* (NAK + the QP to ERR,
 * C9-xx classes) and DROP.
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
 * Either way the receive queue, the SRQ and the receive CQ are the
 * shared ones, and what only the owner can do (flush its send queue,
 * raise async events) is left to it as SV_QEV_* bits (sv_rtgt_notify).
 */
#include "engine_int.h"
#include "sv_client.h"
#include "sv_proc.h"
#include "sv_roce.h"

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
	RESPST_LOCAL,	     /* direct: the initiator's memory faulted */
	RESPST_DROP,
	RESPST_DONE,
};

struct resp {
	struct sv_engine *eng;
	struct sv_rtgt *t;
	struct sv_qp_shm *q;
	struct sv_tr *tr;	    /* packet path: the owner's replies */
	const struct sv_pkt *pkt;
	const struct sv_data *data; /* payload, or a direct READ's target */
	uint32_t flags;
	enum ibv_wc_status recv_status;
	unsigned cq_bits;	/* SV_CQP_* from the receive CQ */
	int srq_limit;		/* the SRQ's limit was crossed */
	struct sv_resp_res *res; /* direct: the outcome */
};

static uint32_t qflag(struct resp *rs, uint32_t f)
{
	return rs->q->rflags & f;
}

static void qset(struct resp *rs, uint32_t f, int on)
{
	if (on)
		rs->q->rflags |= f;
	else
		rs->q->rflags &= ~f;
}

/* sv_key_resolve of a remote key for this QP; on the packet path through
 * the owner's copy of the last one it checked (sv_key_cache): a stream of
 * requests under one key reads one word of the key table each. */
static int rkey_resolve(struct resp *rs, uint32_t key, uint64_t va,
			uint64_t len, uint32_t access, struct sv_mem *m)
{
	struct sv_qp_shm *q = rs->q;
	uint8_t *p;

	if (!rs->tr)
		return sv_key_resolve(rs->eng, key, q->pd_id, va, len, access,
				      1, q->qpn, m);
	p = sv_key_cached_local(rs->eng, &rs->tr->rkey, key, q->pd_id, va, len,
				access);
	if (p) {
		*m = (struct sv_mem){ .ptr = p, .key = key, .eng = rs->eng };
		return SV_KOK;
	}
	return sv_key_resolve_cached(rs->eng, &rs->tr->rkey, key, q->pd_id, va,
				     len, access, 1, q->qpn, m);
}

static int transport_ok(uint32_t type, uint8_t opcode)
{
	switch (type) {
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

/* SGEs the slot for the receive being filled holds. */
static uint32_t cur_cap(struct resp *rs)
{
	return rs->t->srq ? SV_MAX_SRQ_SGE : rs->q->rq.max_sge;
}

/* Takes a receive WQE into the responder's cur slot.  Must hold q->lock. */
static int take_recv(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;
	int limit = 0, err;

	if (qflag(rs, SV_RF_HAVE_RECV))
		return 0;
	if (rs->t->srq)
		err = sv_srq_take(rs->t->srq, sv_qp_cur(q), cur_cap(rs), &limit);
	else
		err = sv_rq_take(q, &q->rq, sv_qp_cur(q), cur_cap(rs));
	if (err)
		return -1;
	rs->srq_limit |= limit;
	qset(rs, SV_RF_HAVE_RECV, 1);
	q->recv_off = 0;
	return 0;
}

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
	int v4;

	if (!pkt->grh)
		return 0;
	v4 = sv_gid_is_v4(grh_sgid(pkt->grh)) &&
	     sv_gid_is_v4(grh_dgid(pkt->grh));
	return 0x8 | (v4 ? 0x2 : 0x1);
}

static void push_recv(struct resp *rs, enum ibv_wc_status st,
		      enum ibv_wc_opcode opc, uint32_t byte_len, int with_imm,
		      int with_inv, int solicited)
{
	struct sv_qp_shm *q = rs->q;
	const struct sv_pkt *pkt = rs->pkt;
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = sv_qp_cur(q)->wr_id;
	wc.status = st;
	wc.opcode = opc;
	wc.byte_len = byte_len;
	wc.qp_num = q->qpn;
	if (st == IBV_WC_SUCCESS) {
		if (with_imm) {
			wc.imm_data = pkt->imm;
			wc.wc_flags |= IBV_WC_WITH_IMM;
		}
		if (with_inv) {
			wc.invalidated_rkey = pkt->inv_rkey;
			wc.wc_flags |= IBV_WC_WITH_INV;
		}
		if (q->type == IBV_QPT_UD) {
			wc.src_qp = pkt->src_qpn;
			wc.wc_flags |= IBV_WC_GRH;
			wc.sl = roce_pkt_type(pkt);
		} else {
			wc.src_qp = q->dest_qpn;
		}
	}
	qset(rs, SV_RF_HAVE_RECV, 0);
	q->recv_off = 0;
	rs->cq_bits |= sv_cq_produce(rs->t->rcq, &wc,
				     solicited || st != IBV_WC_SUCCESS);
}

/*
 * The 40 bytes a UD receive starts with.  RoCE v2 between IPv4-mapped
 * GIDs: zeros and the IPv4 header in the last 20 bytes (what the kernel's
 * RoCE drivers deliver and ibv_init_ah_from_wc parses); else an IPv6-style
 * GRH with the sender's and our GIDs.
 */
static void make_grh(const struct sv_pkt *pkt, uint8_t out[40])
{
	struct sv_roce_flow f;

	memset(out, 0, 40);
	if (!pkt->grh)
		return;
	sv_roce_grh_flow(pkt->grh, &f);
	if (!f.ipv6) {
		/* The IPv4 header the packet had (or would have) on the
		 * wire: class and hop limit from the GRH, its UDP length
		 * from the GRH's payload length. */
		sv_roce_ip4_hdr(out + 20, &f, __grh_paylen(pkt->grh));
		return;
	}
	memcpy(out, pkt->grh, 40);
}

/* ------------------------------------------------ replies (packets) -- */

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

/*
 * A repeated READ request asks again from its PSN on: the requester has
 * every response before it (it asks from its first missing one), so
 * what is still queued of the same READ -- the original's stream, or an
 * earlier repeat's -- is superseded, as a NIC's responder restarts the
 * READ's resource rather than adding a stream (rxe does so).  Without
 * this, each lost response of a long READ on a lossy link queued the
 * rest of the READ once more, and the streams fed each other: tens of
 * thousands of responses for one 512 KiB READ, the responder sending
 * them for a second while it read nothing of its port, so the request
 * after the READ was lost with the datagrams the kernel dropped.
 * Entries of the same READ: same rkey, same last byte.
 */
static void supersede_read(struct sv_tr *tr, const struct sv_pkt *pkt)
{
	uint64_t end = pkt->va + pkt->dma_len;
	uint32_t j = tr->rq_head;

	for (uint32_t i = tr->rq_head; i != tr->rq_tail; i++) {
		const struct sv_respq_ent *e = &tr->respq[i % SV_ENG_RESPQ];

		if (e->kind == 1 && e->rkey == pkt->rkey &&
		    e->va + e->total == end)
			continue;
		if (i != j)
			tr->respq[j % SV_ENG_RESPQ] = *e;
		j++;
	}
	tr->rq_tail = j;
}

/* ------------------------------------------------------ the checks -- */

static enum resp_state check_psn(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;
	const struct sv_pkt *pkt = rs->pkt;
	int32_t d = psn_diff(pkt->psn, q->epsn);

	if (q->type == IBV_QPT_UD)
		return RESPST_CHECK_RESOURCE;
	if (q->type == IBV_QPT_UC) {
		if (d != 0) {
			/* A gap: the message in progress is lost (9.8.3). */
			qset(rs, SV_RF_IN_SEND | SV_RF_IN_WRITE, 0);
			q->recv_off = 0;
			q->epsn = pkt->psn;
			qset(rs, SV_RF_UC_DROP, !(rs->flags & OP_FIRST));
		}
		if (qflag(rs, SV_RF_UC_DROP) && (rs->flags & OP_FIRST))
			qset(rs, SV_RF_UC_DROP, 0);
		if (qflag(rs, SV_RF_UC_DROP)) {
			q->epsn = (pkt->psn + 1) & PSN_MASK;
			return RESPST_DROP;
		}
		return RESPST_CHECK_OP_SEQ;
	}
	if (d > 0)
		return RESPST_NAK_SEQ;
	if (d < 0)
		return RESPST_DUPLICATE;
	qset(rs, SV_RF_NAK_SENT, 0);
	if (rs->tr)
		rs->tr->dup_acked = 0;
	return RESPST_CHECK_OP_SEQ;
}

static enum resp_state check_op_seq(struct resp *rs)
{
	uint32_t f = rs->flags, mtu = rs->q->mtu ? rs->q->mtu : 4096;
	int bad;

	if (qflag(rs, SV_RF_IN_SEND))
		bad = !(f & OP_SEND) || !(f & (OP_MIDDLE | OP_LAST)) ||
		      (f & OP_FIRST);
	else if (qflag(rs, SV_RF_IN_WRITE))
		bad = !(f & OP_WRITE) || !(f & (OP_MIDDLE | OP_LAST)) ||
		      (f & OP_FIRST);
	else
		bad = !(f & OP_FIRST);
	/* Sizes (9.7.4.1.4): FIRST and MIDDLE carry exactly one MTU.  A
	 * directly executed message is one whole message of any size. */
	if (!rs->res) {
		if (!bad && rs->pkt->paylen > mtu)
			bad = 1;
		if (!bad && (f & (OP_FIRST | OP_MIDDLE)) && !(f & OP_LAST) &&
		    (f & (OP_SEND | OP_WRITE)) && rs->pkt->paylen != mtu)
			bad = 1;
	}
	if (!bad)
		return RESPST_CHECK_RESOURCE;
	if (rs->q->type == IBV_QPT_UC) {
		if (f & OP_FIRST) {
			qset(rs, SV_RF_IN_SEND | SV_RF_IN_WRITE, 0);
			rs->q->recv_off = 0;
			return RESPST_CHECK_RESOURCE;
		}
		qset(rs, SV_RF_UC_DROP, 1);
		return RESPST_DROP;
	}
	return RESPST_ERR_INV_REQ;
}

static enum resp_state check_resource(struct resp *rs)
{
	uint32_t f = rs->flags;
	int need = ((f & OP_SEND) && (f & OP_FIRST)) ||
		   ((f & OP_WRITE) && (f & OP_IMM));

	if (need && take_recv(rs))
		return rs->q->type == IBV_QPT_RC ? RESPST_RNR : RESPST_DROP;
	if (rs->tr && (f & (OP_READ | OP_ATOMIC)) &&
	    rs->tr->rq_tail - rs->tr->rq_head >= SV_ENG_RESPQ)
		return RESPST_DROP; /* the requester's retry comes back */
	return RESPST_CHECK_RKEY;
}

static enum resp_state kerr_state(int e)
{
	return e == SV_KERR_OWNER ? RESPST_ERR_OP : RESPST_ERR_ACCESS;
}

/* An access error a UC QP takes silently (9.8.3). */
static enum resp_state access_err(struct resp *rs, enum resp_state st)
{
	return rs->q->type == IBV_QPT_UC ? RESPST_DROP : st;
}

static enum resp_state check_rkey(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_qp_shm *q = rs->q;
	struct sv_mem m;
	int e;

	/* The QP's own access flags gate remote operations before any key
	 * is looked at (qp_access_flags, IBTA 10.2.4; mlx5 answers a remote
	 * access error). */
	if (((rs->flags & OP_WRITE) && (rs->flags & OP_FIRST) &&
	     !(q->access & IBV_ACCESS_REMOTE_WRITE)) ||
	    ((rs->flags & OP_READ) && !(q->access & IBV_ACCESS_REMOTE_READ)) ||
	    ((rs->flags & OP_ATOMIC) && !(q->access & IBV_ACCESS_REMOTE_ATOMIC)))
		return access_err(rs, RESPST_ERR_ACCESS);
	if ((rs->flags & OP_WRITE) && (rs->flags & OP_FIRST)) {
		uint64_t have = rs->res ? rs->data->len : pkt->paylen;

		if (have > pkt->dma_len || (rs->res && have != pkt->dma_len))
			return access_err(rs, RESPST_ERR_INV_REQ);
		if (pkt->dma_len) {
			e = rkey_resolve(rs, pkt->rkey, pkt->va, pkt->dma_len,
					 IBV_ACCESS_REMOTE_WRITE, &m);
			if (e)
				return access_err(rs, kerr_state(e));
		}
		q->wr_va = pkt->va;
		q->wr_rkey = pkt->rkey;
		q->wr_total = pkt->dma_len;
		q->wr_left = pkt->dma_len;
	} else if (rs->flags & OP_READ) {
		if (pkt->dma_len) {
			e = rkey_resolve(rs, pkt->rkey, pkt->va, pkt->dma_len,
					 IBV_ACCESS_REMOTE_READ, &m);
			if (e)
				return kerr_state(e);
		}
	} else if (rs->flags & OP_ATOMIC) {
		if (pkt->va & 7)
			return RESPST_ERR_INV_REQ;
		e = rkey_resolve(rs, pkt->rkey, pkt->va, 8,
				 IBV_ACCESS_REMOTE_ATOMIC, &m);
		if (e)
			return kerr_state(e);
	}
	return RESPST_EXECUTE;
}

/* ----------------------------------------------------------- execute -- */

/*
 * What a failed move of the payload means.  `mine` is the initiator's side
 * (direct execution only: its fault is the initiator's local error); the
 * other side is the target's memory: a fault there is `fault` (a remote
 * access error, or the receive buffer's protection error), its owner gone
 * is a remote operational error -- unless the target QP's own process is
 * gone or in its exit (its memory goes before it is a zombie): then nobody
 * is there to answer (as a lost packet).
 */
static enum resp_state xerr_state(struct resp *rs, int e, int mine,
				  enum resp_state fault)
{
	if (rs->res && (e & mine))
		return RESPST_LOCAL;
	if (!(e & SV_XERR_GONE))
		return fault;
	if (rs->t->peer && sv_pid_state(rs->t->peer->pid) != SV_PID_RUNNING)
		return RESPST_DROP;
	return RESPST_ERR_OP;
}

/* The payload of this request as a data description. */
static const struct sv_data *payload(struct resp *rs, struct sv_data *d,
				     struct sv_seg *s)
{
	if (rs->res)
		return rs->data;
	sv_data_local(d, s, rs->pkt->payload, rs->pkt->paylen);
	return d;
}

/* sv_sge_resolve of the receive's [off, off + n) for writing; a receive of
 * one range on the packet path goes through the owner's copy of the last
 * receive key (sv_key_cache), as rkey_resolve does for remote keys. */
static int rx_resolve(struct resp *rs, const struct sv_recv_wqe *r,
		      uint32_t nsge, uint64_t off, uint64_t n,
		      struct sv_data *dst, struct sv_seg *segs)
{
	struct sv_qp_shm *q = rs->q;
	const struct ibv_sge *g = &r->sge[0];
	uint8_t *p;
	int e;

	if (!rs->tr || nsge != 1 || !n)
		return sv_sge_resolve(rs->eng, r->sge, (int)nsge, q->rx_pd_id,
				      IBV_ACCESS_LOCAL_WRITE, off, n, dst, segs,
				      SV_MAX_SEGS);
	if (off > g->length || n > g->length - off)
		return SV_KERR_LEN;
	p = sv_key_cached_local(rs->eng, &rs->tr->rxkey, g->lkey, q->rx_pd_id,
				g->addr + off, n, IBV_ACCESS_LOCAL_WRITE);
	if (p) {
		segs[0].m = (struct sv_mem){ .ptr = p, .key = g->lkey,
					     .eng = rs->eng };
	} else {
		e = sv_key_resolve_cached(rs->eng, &rs->tr->rxkey, g->lkey,
					  q->rx_pd_id, g->addr + off, n,
					  IBV_ACCESS_LOCAL_WRITE, 0, 0,
					  &segs[0].m);
		if (e)
			return e;
	}
	segs[0].len = n;
	*dst = (struct sv_data){ .seg = segs, .nseg = 1, .len = n };
	return SV_KOK;
}

static enum resp_state exec_send(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;
	struct sv_recv_wqe *r = sv_qp_cur(q);
	struct sv_seg dsegs[SV_MAX_SEGS], gseg, pseg;
	struct sv_data dst, gd, pd;
	const struct sv_data *src = payload(rs, &pd, &pseg);
	uint64_t off = q->recv_off;
	uint32_t nsge = r->num_sge > cur_cap(rs) ? cur_cap(rs) : r->num_sge;
	uint8_t grh[40];
	int e;

	if (q->type == IBV_QPT_UD) {
		/* The GRH first (40 bytes), then the payload. */
		make_grh(rs->pkt, grh);
		e = sv_sge_resolve(rs->eng, r->sge, (int)nsge, q->rx_pd_id,
				   IBV_ACCESS_LOCAL_WRITE, 0, 40, &dst, dsegs,
				   SV_MAX_SEGS);
		if (e)
			return e < 0 ? RESPST_ERR_LENGTH : RESPST_ERR_LKEY;
		sv_data_local(&gd, &gseg, grh, 40);
		if (sv_xfer(&dst, 0, &gd, 0, 40))
			return RESPST_ERR_LKEY;
		off = 40;
	}
	if (src->len) {
		e = rx_resolve(rs, r, nsge, off, src->len, &dst, dsegs);
		if (e)
			return e < 0 ? RESPST_ERR_LENGTH : RESPST_ERR_LKEY;
		e = sv_xfer(&dst, 0, src, 0, src->len);
		if (e)
			return xerr_state(rs, e, SV_XERR_SRC, RESPST_ERR_LKEY);
	}
	q->recv_off = off + src->len;
	qset(rs, SV_RF_IN_SEND, !(rs->flags & OP_LAST));
	return RESPST_COMPLETE;
}

static enum resp_state exec_write(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;
	struct sv_seg pseg, dseg;
	struct sv_data pd, dst;
	const struct sv_data *src = payload(rs, &pd, &pseg);
	int e;

	if (src->len > q->wr_left)
		return access_err(rs, RESPST_ERR_INV_REQ);
	if (src->len) {
		uint64_t va = q->wr_va + (q->wr_total - q->wr_left);

		/* Checked again per packet: a rereg or dereg while a long
		 * write is in flight stops it. */
		e = rkey_resolve(rs, q->wr_rkey, va, src->len,
				 IBV_ACCESS_REMOTE_WRITE, &dseg.m);
		if (e)
			return access_err(rs, kerr_state(e));
		dseg.len = src->len;
		dst = (struct sv_data){ .seg = &dseg, .nseg = 1, .len = src->len };
		e = sv_xfer(&dst, 0, src, 0, src->len);
		if (e) {
			enum resp_state st = xerr_state(rs, e, SV_XERR_SRC,
							RESPST_ERR_ACCESS);

			return st == RESPST_LOCAL ? st : access_err(rs, st);
		}
	}
	q->wr_left -= (uint32_t)src->len;
	qset(rs, SV_RF_IN_WRITE, !(rs->flags & OP_LAST));
	if ((rs->flags & OP_LAST) && q->wr_left)
		return access_err(rs, RESPST_ERR_INV_REQ);
	return RESPST_COMPLETE;
}

/* A READ executed in place (direct): the target's memory into the
 * initiator's buffers. */
static enum resp_state exec_read_direct(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_seg sseg;
	struct sv_data src;
	int e;

	if (pkt->dma_len) {
		e = rkey_resolve(rs, pkt->rkey, pkt->va, pkt->dma_len,
				 IBV_ACCESS_REMOTE_READ, &sseg.m);
		if (e)
			return kerr_state(e);
		sseg.len = pkt->dma_len;
		src = (struct sv_data){ .seg = &sseg, .nseg = 1,
					.len = pkt->dma_len };
		e = sv_xfer(rs->data, 0, &src, 0, pkt->dma_len);
		if (e)
			return xerr_state(rs, e, SV_XERR_DST, RESPST_ERR_ACCESS);
	}
	return RESPST_DONE;
}

static enum resp_state exec_atomic(struct resp *rs, uint64_t *orig)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_mem m;
	int e;

	e = rkey_resolve(rs, pkt->rkey, pkt->va, 8, IBV_ACCESS_REMOTE_ATOMIC,
			 &m);
	if (e)
		return kerr_state(e);
	/* Atomic with respect to every other atomic of the device: CPU
	 * atomics on the memory, here or in its owner (never CMA). */
	if (sv_mem_atomic(&m, (pkt->opcode & 0x1f) == OPC_CMP_SWAP ?
				      SV_RMEM_CSWAP : SV_RMEM_FADD,
			  pkt->comp, pkt->swap, orig))
		return m.ptr ? RESPST_ERR_ACCESS : RESPST_ERR_OP;
	return RESPST_DONE;
}

static enum resp_state execute(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_qp_shm *q = rs->q;
	uint32_t f = rs->flags;

	if (f & OP_SEND)
		return exec_send(rs);
	if (f & OP_WRITE)
		return exec_write(rs);
	if (f & OP_READ) {
		uint32_t mtu = q->mtu ? q->mtu : 4096;
		uint32_t npk = pkt->dma_len ? (pkt->dma_len + mtu - 1) / mtu : 1;
		enum resp_state st = RESPST_DONE;

		if (rs->res)
			st = exec_read_direct(rs);
		else
			push_read(rs->tr, pkt);
		if (st != RESPST_DONE)
			return st;
		q->epsn = (pkt->psn + npk) & PSN_MASK;
		q->msn++;
		return RESPST_DONE;
	}
	if (f & OP_ATOMIC) {
		struct sv_respq_ent e = { .kind = 2, .psn = pkt->psn };
		enum resp_state st = exec_atomic(rs, &e.orig);

		if (st != RESPST_DONE)
			return st;
		if (rs->res) {
			rs->res->orig = e.orig;
		} else {
			uint32_t slot = pkt->psn & (SV_ENG_ATOMIC_CACHE - 1);

			rs->tr->atomic_cache[slot].psn = pkt->psn;
			rs->tr->atomic_cache[slot].orig = e.orig;
			rs->tr->atomic_cache[slot].valid = 1;
			respq_push(rs->tr, &e);
		}
		q->epsn = (pkt->psn + 1) & PSN_MASK;
		q->msn++;
		return RESPST_DONE;
	}
	return RESPST_ERR_INV_REQ;
}

/* Invalidates key for SEND_WITH_INV: the daemon owns the key table.  The
 * responder lock stays held: the daemon takes none of ours. */
static int invalidate(struct resp *rs, uint32_t key)
{
	struct sv_key_req req = { .key = key,
				  .pd_id = rs->q->pd_id,
				  .qpn = rs->q->qpn };

	return sv_call_simple(SV_OP_KEY_INVALIDATE, 0, rs->eng->instance, -1,
			      &req, sizeof(req), NULL, 0);
}

/* The ACK of a message whose receive completes is due before the CQE is
 * seen: an application that answers the CQE at once (a ping-pong) posts
 * its reply after it, and sv_req_run sends a due ACK first.  So the
 * requester's SEND completes before the reply arrives, as on a NIC,
 * whose ACK leaves before software sees the CQE.  ACKNOWLEDGE sets the
 * same ACK again.  On the direct path the initiator's hook completes its
 * WQE here instead. */
static void ack_before_cqe(struct resp *rs)
{
	if (rs->res && rs->res->before_cqe) {
		rs->res->before_cqe(rs->res->arg); /* direct: the same */
		rs->res->before_cqe = NULL;
	} else if (rs->tr && !rs->res && rs->q->type == IBV_QPT_RC &&
		   rs->pkt->ackreq) {
		set_ack(rs->tr, rs->pkt->psn);
	}
}

static enum resp_state complete(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_qp_shm *q = rs->q;
	uint32_t f = rs->flags;

	if (!(f & OP_LAST))
		return RESPST_ACKNOWLEDGE;
	if (f & OP_SEND) {
		int inv = !!(f & OP_IETH);

		if (inv && invalidate(rs, pkt->inv_rkey)) {
			rs->recv_status = IBV_WC_REM_INV_REQ_ERR;
			return RESPST_ERR_INV_REQ;
		}
		ack_before_cqe(rs);
		push_recv(rs, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)q->recv_off,
			  !!(f & OP_IMM), inv, pkt->se);
		q->msn++;
	} else if (f & OP_WRITE) {
		if (f & OP_IMM) {
			ack_before_cqe(rs);
			push_recv(rs, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
				  q->wr_total, 1, 0, pkt->se);
		}
		q->msn++;
	}
	return RESPST_ACKNOWLEDGE;
}

static enum resp_state duplicate(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_tr *tr = rs->tr;

	/* 9.7.5.1.2: re-answer, never re-execute a SEND or WRITE. */
	if (rs->flags & OP_READ) {
		/* A repeat is answered as the READ it repeats was: a QP
		 * without remote READ executed none, so this repeats nothing
		 * (rxe drops a repeat it has no READ for).  The rkey is
		 * checked as each response is built (send_queued). */
		if (!(rs->q->access & IBV_ACCESS_REMOTE_READ))
			return RESPST_DROP;
		supersede_read(tr, pkt);
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
	/* One ACK per burst of duplicates (a resend of packets the
	 * responder already has), and again where the requester asks for
	 * one: it needs to hear where we stand, not once per packet. */
	if (!tr->dup_acked || pkt->ackreq) {
		tr->dup_acked = 1;
		set_ack(tr, (rs->q->epsn - 1) & PSN_MASK);
	}
	return RESPST_DONE;
}

/* Fatal responder errors (C9-xx class B/C/J): NAK, the failed receive,
 * then the QP to ERR with its receive side flushed and the owner told. */
static void fatal(struct resp *rs, uint8_t nak, enum ibv_wc_status recv_st)
{
	struct sv_qp_shm *q = rs->q;
	unsigned ev;

	if (q->type == IBV_QPT_RC) {
		if (rs->res) {
			rs->res->kind = SV_ROUT_NAK;
			rs->res->syn = SV_AETH_NAK | nak;
		} else {
			set_nak(rs->tr, SV_AETH_NAK | nak, rs->pkt->psn);
		}
	}
	if (qflag(rs, SV_RF_HAVE_RECV) && recv_st != IBV_WC_SUCCESS)
		push_recv(rs, recv_st, (rs->flags & OP_WRITE) ?
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
}

void sv_resp_flush_rq(struct sv_engine *eng, struct sv_rtgt *t)
{
	struct sv_qp_shm *q = t->q;
	struct ibv_wc wc;
	unsigned bits = 0;

	memset(&wc, 0, sizeof(wc));
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = q->qpn;
	/* The receive being filled first, then the queue. */
	if (q->rflags & SV_RF_HAVE_RECV) {
		wc.wr_id = sv_qp_cur(q)->wr_id;
		bits |= sv_cq_produce(t->rcq, &wc, 1);
		q->rflags &= ~(uint32_t)SV_RF_HAVE_RECV;
	}
	q->recv_off = 0;
	if (!t->srq) {
		struct sv_recv_wqe *r = sv_qp_cur(q);

		while (!sv_rq_take(q, &q->rq, r, 0)) {
			wc.wr_id = r->wr_id;
			bits |= sv_cq_produce(t->rcq, &wc, 1);
		}
	} else if (!(q->rflags & SV_RF_LAST_WQE)) {
		/* IBTA 11.6.3: a QP of an SRQ in ERR reports its last WQE. */
		q->rflags |= SV_RF_LAST_WQE;
		atomic_fetch_or(&q->events, SV_QEV_LAST_WQE);
	}
	if (bits)
		sv_rtgt_notify(eng, t, SV_EVK_CQ, bits);
}

/* The state machine.  Must hold q->lock. */
static void run(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;
	const struct sv_pkt *pkt = rs->pkt;
	enum resp_state st = RESPST_CHECK_STATE;
	uint32_t state;

	while (st != RESPST_DONE) {
		switch (st) {
		case RESPST_CHECK_STATE:
			state = q->state;
			if (atomic_load_explicit(&q->h.dead, memory_order_relaxed))
				st = RESPST_DROP; /* destroyed under us */
			else if (state != IBV_QPS_RTR && state != IBV_QPS_RTS &&
			    state != IBV_QPS_SQD && state != IBV_QPS_SQE)
				st = RESPST_DROP;
			else if (!transport_ok(q->type, pkt->opcode))
				st = RESPST_DROP;
			else if (q->type == IBV_QPT_UD && pkt->qkey != q->qkey)
				st = RESPST_DROP; /* Q_Key violation: silent */
			else
				st = RESPST_CHECK_PSN;
			if (st == RESPST_CHECK_PSN && state == IBV_QPS_RTR &&
			    q->type != IBV_QPT_UD && !qflag(rs, SV_RF_COMM_EST)) {
				/* First packet while in RTR (IBTA 11.6.3). */
				qset(rs, SV_RF_COMM_EST, 1);
				atomic_fetch_or(&q->events, SV_QEV_COMM_EST);
			}
			break;
		case RESPST_CHECK_PSN:
			st = check_psn(rs);
			break;
		case RESPST_CHECK_OP_SEQ:
			st = check_op_seq(rs);
			break;
		case RESPST_CHECK_RESOURCE:
			st = check_resource(rs);
			break;
		case RESPST_CHECK_RKEY:
			st = check_rkey(rs);
			break;
		case RESPST_EXECUTE:
			st = execute(rs);
			if (st == RESPST_DONE && rs->res)
				rs->res->kind = SV_ROUT_ACK;
			break;
		case RESPST_COMPLETE:
			st = complete(rs);
			break;
		case RESPST_ACKNOWLEDGE: {
			uint32_t mtu = q->mtu ? q->mtu : 4096;

			if (q->type != IBV_QPT_UD)
				q->epsn = (pkt->psn + 1) & PSN_MASK;
			if (rs->res) {
				/* A whole message stands for its packets: as
				 * many as the initiator cut it into. */
				if (q->type != IBV_QPT_UD && rs->res->npsn)
					q->epsn = (pkt->psn + rs->res->npsn) &
						  PSN_MASK;
				else if (q->type != IBV_QPT_UD &&
					 rs->data->len > mtu)
					q->epsn = (pkt->psn +
						   (uint32_t)((rs->data->len +
							       mtu - 1) / mtu)) &
						  PSN_MASK;
				rs->res->kind = SV_ROUT_ACK;
			} else if (q->type == IBV_QPT_RC && pkt->ackreq) {
				set_ack(rs->tr, pkt->psn);
			}
			st = RESPST_DONE;
			break;
		}
		case RESPST_DUPLICATE:
			st = rs->tr ? duplicate(rs) : RESPST_DROP;
			break;
		case RESPST_NAK_SEQ:
			if (rs->res) {
				rs->res->kind = SV_ROUT_NAK;
				rs->res->syn = SV_AETH_NAK | SV_NAK_PSN_SEQ;
			} else if (!qflag(rs, SV_RF_NAK_SENT)) {
				qset(rs, SV_RF_NAK_SENT, 1);
				set_nak(rs->tr, SV_AETH_NAK | SV_NAK_PSN_SEQ,
					q->epsn);
			}
			st = RESPST_DONE;
			break;
		case RESPST_RNR:
			if (rs->res) {
				rs->res->kind = SV_ROUT_RNR;
				rs->res->syn = SV_AETH_RNR_NAK |
					       (q->min_rnr & 0x1f);
			} else {
				/* Drop what follows until the retry comes
				 * back to epsn (NAK_SENT), so it is not NAKed
				 * as a gap. */
				set_nak(rs->tr, SV_AETH_RNR_NAK |
						(q->min_rnr & 0x1f), pkt->psn);
				qset(rs, SV_RF_NAK_SENT, 1);
			}
			st = RESPST_DONE;
			break;
		case RESPST_ERR_INV_REQ:
			fatal(rs, SV_NAK_INV_REQ,
			      rs->recv_status ? rs->recv_status :
						IBV_WC_REM_INV_REQ_ERR);
			st = RESPST_DONE;
			break;
		case RESPST_ERR_ACCESS:
			fatal(rs, SV_NAK_REM_ACCESS, IBV_WC_REM_ACCESS_ERR);
			st = RESPST_DONE;
			break;
		case RESPST_ERR_OP:
			fatal(rs, SV_NAK_REM_OP, IBV_WC_REM_OP_ERR);
			st = RESPST_DONE;
			break;
		case RESPST_ERR_LENGTH:
			if (q->type == IBV_QPT_UD &&
			    qflag(rs, SV_RF_HAVE_RECV)) {
				/* UD: the receive fails, the QP too (11.6.2). */
				push_recv(rs, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV,
					  0, 0, 0, 1);
				sv_qshm_set_err(q);
				sv_resp_flush_rq(rs->eng, rs->t);
				atomic_fetch_or(&q->events, SV_QEV_FLUSH);
				if (rs->res)
					rs->res->kind = SV_ROUT_DROP;
			} else {
				fatal(rs, SV_NAK_INV_REQ, IBV_WC_LOC_LEN_ERR);
			}
			st = RESPST_DONE;
			break;
		case RESPST_ERR_LKEY:
			fatal(rs, SV_NAK_REM_OP, IBV_WC_LOC_PROT_ERR);
			st = RESPST_DONE;
			break;
		case RESPST_LOCAL:
			/* The initiator's own buffer faulted mid-message: as
			 * if it never sent it.  The receive stays posted for
			 * the next message. */
			q->recv_off = 0;
			qset(rs, SV_RF_IN_SEND | SV_RF_IN_WRITE, 0);
			rs->res->kind = SV_ROUT_LOCAL;
			st = RESPST_DONE;
			break;
		case RESPST_DROP:
			if (rs->res)
				rs->res->kind = SV_ROUT_DROP;
			st = RESPST_DONE;
			break;
		case RESPST_DONE:
			break;
		}
	}
}

/* Lock q, repairing what a dead holder left half done: a message in
 * progress is abandoned (its packets are resent or lost as on a wire). */
static void resp_lock(struct sv_qp_shm *q)
{
	if (sv_shlock_lock(&q->lock))
		q->rflags &= ~(uint32_t)(SV_RF_IN_SEND | SV_RF_IN_WRITE);
}

/* After target t's lock is dropped: its owner hears what it must (the
 * receive CQ's bits, the SRQ's limit crossed, the QP's events). */
static void resp_notify(struct sv_engine *eng, struct sv_rtgt *t,
			unsigned cq_bits, int srq_limit)
{
	if (cq_bits)
		sv_rtgt_notify(eng, t, SV_EVK_CQ, cq_bits);
	if (srq_limit)
		sv_rtgt_notify(eng, t, SV_EVK_SRQ, 1);
	if (atomic_load_explicit(&t->q->events, memory_order_relaxed))
		sv_rtgt_notify(eng, t, SV_EVK_QP, 0);
}

void sv_resp_packet(struct sv_qp *qp, const struct sv_pkt *pkt,
		    struct sv_resp_hold *h)
{
	struct sv_tr *tr = tr_of(qp);
	struct resp rs = { .eng = qp->eng, .t = &h->t, .q = qp->shm, .tr = tr,
			   .pkt = pkt, .flags = pkt->flags };

	if (!tr)
		return;
	if (h->qp != qp) {
		sv_resp_release(h);
		sv_rtgt_own(&h->t, qp);
		resp_lock(qp->shm);
		h->qp = qp;
	}
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
	sv_shlock_unlock(&qp->shm->lock);
	h->qp = NULL;
	h->cq_bits = 0;
	h->srq_limit = 0;
	resp_notify(qp->eng, &h->t, cq_bits, srq_limit);
}

void sv_resp_direct(struct sv_engine *eng, struct sv_rtgt *t,
		    const struct sv_pkt *pkt, const struct sv_data *data,
		    struct sv_resp_res *res)
{
	struct sv_pkt p = *pkt;
	struct resp rs = { .eng = eng, .t = t, .q = t->q, .pkt = &p,
			   .data = data, .flags = pkt->flags, .res = res };

	res->kind = SV_ROUT_DROP;
	res->orig = 0;
	resp_lock(t->q);
	/* A whole message arrives in order by construction: it takes the
	 * PSN the responder expects. */
	p.psn = t->q->epsn;
	p.paylen = (uint32_t)(data->len > UINT32_MAX ? UINT32_MAX : data->len);
	run(&rs);
	sv_shlock_unlock(&t->q->lock);
	resp_notify(eng, t, rs.cq_bits, rs.srq_limit);
}

/*
 * A run of whole RDMA WRITEs without immediate, or of RDMA READs (a
 * bandwidth stream), moved in one transfer -- one system call for up to
 * SV_DIRECT_BATCH messages where each would cost one.  Only a run that
 * would succeed message by message is taken: the QP ready and allowing
 * the remote access, no message in progress, every rkey good; anything
 * else (and a transfer that fails) is left to sv_resp_direct one message
 * at a time, which says why.  Each message takes its PSNs and one MSN, as
 * one by one.
 */
int sv_resp_rw_batch(struct sv_engine *eng, struct sv_rtgt *t,
		     const struct sv_drw *ws, int n, int read, uint32_t req_mtu)
{
	struct sv_qp_shm *q = t->q;
	struct sv_seg rsegs[SV_DIRECT_BATCH], lsegs[SV_DIRECT_BATCH * 2];
	struct sv_data rem = { .seg = rsegs }, loc = { .seg = lsegs };
	uint32_t access = read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
	uint32_t mtu, npk = 0, state;
	int k = 0;

	if (n > SV_DIRECT_BATCH)
		n = SV_DIRECT_BATCH;
	resp_lock(q);
	state = q->state;
	mtu = req_mtu ? req_mtu : q->mtu ? q->mtu : 4096;
	if (atomic_load_explicit(&q->h.dead, memory_order_relaxed) ||
	    (state != IBV_QPS_RTS && state != IBV_QPS_SQD &&
	     state != IBV_QPS_SQE && !(state == IBV_QPS_RTR &&
				       (q->rflags & SV_RF_COMM_EST))) ||
	    (q->type != IBV_QPT_RC && (read || q->type != IBV_QPT_UC)) ||
	    !(q->access & access) ||
	    (q->rflags & (SV_RF_IN_SEND | SV_RF_IN_WRITE | SV_RF_UC_DROP)))
		goto out;
	for (; k < n; k++) {
		const struct sv_drw *w = &ws[k];

		if (!w->len || loc.nseg + w->nseg > SV_DIRECT_BATCH * 2 ||
		    sv_key_resolve(eng, w->rkey, q->pd_id, w->va, w->len,
				   access, 1, q->qpn, &rsegs[k].m))
			break;
		rsegs[k].len = w->len;
		memcpy(lsegs + loc.nseg, w->local, (size_t)w->nseg * sizeof(*lsegs));
		loc.nseg += w->nseg;
		loc.len += w->len;
		npk += (uint32_t)((w->len + mtu - 1) / mtu);
	}
	rem.nseg = k;
	rem.len = loc.len;
	if (k && (read ? sv_xfer(&loc, 0, &rem, 0, loc.len) :
			 sv_xfer(&rem, 0, &loc, 0, loc.len)))
		k = 0; /* one by one, to learn which and why */
	if (k) {
		q->epsn = (q->epsn + npk) & PSN_MASK;
		q->msn += (uint32_t)k;
	}
out:
	sv_shlock_unlock(&q->lock);
	return k;
}

/* ----------------------------------------------- replies on the link -- */

/* Sends queued answers, then the coalesced ACK.  Must hold shm->lock.
 * Returns 0, or -1 when the ring filled (the rest stays queued). */
static int send_queued(struct sv_qp *qp, struct sv_tr *tr)
{
	struct sv_qp_shm *q = qp->shm;
	struct sv_link *link = tr->link;
	uint32_t mtu = q->mtu ? q->mtu : 4096;
	int dead = 0;

	while (tr->rq_head != tr->rq_tail) {
		struct sv_respq_ent *e = &tr->respq[tr->rq_head % SV_ENG_RESPQ];

		if (!link) {
			tr->rq_head++; /* nowhere to send: the requester times out */
			continue;
		}
		if (e->kind == 2) {
			uint8_t *p = sv_link_reserve(link, SV_BTH_BYTES + SV_AETH_BYTES +
							   SV_ATMACK_BYTES, 0, &dead);

			if (!p)
				return dead ? (tr->rq_head = tr->rq_tail, 0) : -1;
			bth_init(p, OPC_ATOMIC_ACK, 0, 0xffff, q->dest_qpn, 0, e->psn);
			aeth_set(p + SV_BTH_BYTES, SV_AETH_ACK | SV_AETH_ACK_UNLIMITED,
				 q->msn);
			atmack_set(p + SV_BTH_BYTES + SV_AETH_BYTES, e->orig);
			sv_cap_commit(link, qp);
			tr->rq_head++;
			continue;
		}
		do {
			uint32_t sent = e->total - e->left;
			uint32_t chunk = e->left > mtu ? mtu : e->left;
			int first = sent == 0, last = chunk == e->left;
			uint8_t opc = first && last ? OPC_READ_RESP_ONLY :
				      first	    ? OPC_READ_RESP_FIRST :
				      last	    ? OPC_READ_RESP_LAST :
						      OPC_READ_RESP_MIDDLE;
			unsigned hl = sv_op_hdr_len(sv_opcodes[opc].flags);
			struct sv_seg sseg, dseg;
			struct sv_data src, dst;
			uint8_t *p;
			int e2 = 0;

			if (chunk)
				e2 = sv_key_resolve(qp->eng, e->rkey, q->pd_id,
						    e->va + sent, chunk,
						    IBV_ACCESS_REMOTE_READ, 1,
						    q->qpn, &sseg.m);
			if (e2) {
				/* Revoked mid-read: the rest is a NAK. */
				p = sv_link_reserve(link, SV_BTH_BYTES + SV_AETH_BYTES,
						    0, &dead);
				if (!p)
					return dead ? 0 : -1;
				bth_init(p, OPC_ACK, 0, 0xffff, q->dest_qpn, 0, e->psn);
				aeth_set(p + SV_BTH_BYTES,
					 SV_AETH_NAK | (e2 == SV_KERR_OWNER ?
							SV_NAK_REM_OP : SV_NAK_REM_ACCESS),
					 q->msn);
				sv_cap_commit(link, qp);
				e->left = 0;
				break;
			}
			p = sv_link_reserve(link, hl + chunk, 0, &dead);
			if (!p)
				return dead ? (tr->rq_head = tr->rq_tail, 0) : -1;
			bth_init(p, opc, 0, 0xffff, q->dest_qpn, 0, e->psn);
			if (sv_opcodes[opc].flags & OP_AETH)
				aeth_set(p + SV_BTH_BYTES,
					 SV_AETH_ACK | SV_AETH_ACK_UNLIMITED, q->msn);
			if (chunk) {
				sseg.len = chunk;
				src = (struct sv_data){ .seg = &sseg, .nseg = 1,
							.len = chunk };
				sv_data_local(&dst, &dseg, p + hl, chunk);
				e2 = sv_xfer(&dst, 0, &src, 0, chunk);
				if (e2) {
					/* The memory is gone under the key:
					 * a remote access error (its owner
					 * gone: operational). */
					sv_link_abort(link);
					p = sv_link_reserve(link, SV_BTH_BYTES +
								  SV_AETH_BYTES,
							    0, &dead);
					if (!p)
						return dead ? 0 : -1;
					bth_init(p, OPC_ACK, 0, 0xffff,
						 q->dest_qpn, 0, e->psn);
					aeth_set(p + SV_BTH_BYTES,
						 SV_AETH_NAK |
							 ((e2 & SV_XERR_GONE) ?
								  SV_NAK_REM_OP :
								  SV_NAK_REM_ACCESS),
						 q->msn);
					sv_cap_commit(link, qp);
					e->left = 0;
					break;
				}
			}
			sv_cap_commit(link, qp);
			e->left -= chunk;
			e->psn = (e->psn + 1) & PSN_MASK;
		} while (e->left);
		tr->rq_head++;
	}
	if (tr->ack_pending && link) {
		uint8_t *p = sv_link_reserve(link, SV_BTH_BYTES + SV_AETH_BYTES, 0,
					     &dead);

		if (!p)
			return dead ? (tr->ack_pending = 0, 0) : -1;
		bth_init(p, OPC_ACK, 0, 0xffff, q->dest_qpn, 0, tr->ack_psn);
		aeth_set(p + SV_BTH_BYTES, tr->ack_syn, q->msn);
		sv_cap_commit(link, qp);
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
	if (qp->type != IBV_QPT_RC ||
	    (!tr->ack_pending && tr->rq_head == tr->rq_tail))
		return;
	/* What we answer is published (and the requester's doorbell rung)
	 * only once the lock is dropped.  The requester may execute its next
	 * message directly as soon as it sees its last ACK, and that takes
	 * this lock: had we been stopped (SIGSTOP, a debugger) between the
	 * two -- a stop lands at the end of a system call, the doorbell's
	 * write -- its ibv_post_send would wait for us to run again.  READ
	 * responses above the size a batch keeps back still go out at once
	 * (eng_link.c, lazy_keep). */
	sv_link_batch_begin();
	resp_lock(qp->shm);
	if (!tr->link)
		tr->link = qp->link;
	full = send_queued(qp, tr);
	sv_shlock_unlock(&qp->shm->lock);
	sv_link_batch_end();
	sv_wire_flush(qp->eng);
	if (full)
		sv_eng_want_work(qp->eng);
}

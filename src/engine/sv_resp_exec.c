/* SPDX-License-Identifier: MIT */
/*
 * The responder's data: receive WQEs taken and completed, remote keys
 * looked up, a SEND or WRITE placed, a READ fetched in place (direct), an
 * atomic executed, an ATOMIC WRITE stored, and a run of whole WRITEs or READs moved in one
 * transfer (sv_resp_rw_batch).  The state machine (sv_resp.c) decides
 * when; this file moves the bytes, through sv_xfer, between the packet or
 * the initiator's memory and the target's.
 */
#include "resp_int.h"
#include "sv_client.h"
#include "sv_proc.h"
#include "sv_roce.h"

#include <errno.h>
#include <string.h>

/* ----------------------------------------------------------- keys -- */

/* On the packet path through the owner's copy of the last key it checked
 * (rs->rkc, sv_key_cache): a stream of requests under one key reads one
 * word of the key table each.  Direct execution runs in the initiator's
 * process, which has no such copy. */
int sv_resp_rkey(struct resp *rs, uint32_t key, uint64_t va, uint64_t len,
		 uint32_t access, struct sv_mem *m)
{
	struct sv_qp_shm *q = rs->q;
	uint8_t *p;

	if (!rs->rkc)
		return sv_key_resolve(rs->eng, key, rs->pd_id, va, len, access,
				      1, q->qpn, m);
	p = sv_key_cached_local(rs->eng, rs->rkc, key, rs->pd_id, va, len,
				access);
	if (p) {
		*m = (struct sv_mem){ .ptr = p, .key = key, .eng = rs->eng };
		return SV_KOK;
	}
	return sv_key_resolve_cached(rs->eng, rs->rkc, key, rs->pd_id, va,
				     len, access, 1, q->qpn, m);
}

/* SGEs the slot for the receive being filled holds. */
static uint32_t cur_cap(struct resp *rs)
{
	return rs->t->srq ? SV_MAX_SRQ_SGE : rs->q->rq.max_sge;
}

int sv_resp_take_recv(struct resp *rs)
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

/* The receive completion of WQE wr_id on q, as far as it does not depend
 * on the packet: status, opcode, length, the QP numbers (RC, UC: the
 * source is the connected QP) and, with_imm, the immediate data. */
static void recv_wc(struct ibv_wc *wc, const struct sv_qp_shm *q,
		    uint64_t wr_id, enum ibv_wc_status st,
		    enum ibv_wc_opcode opc, uint32_t byte_len, int with_imm,
		    uint32_t imm)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = wr_id;
	wc->status = st;
	wc->opcode = opc;
	wc->byte_len = byte_len;
	wc->qp_num = q->qpn;
	if (st != IBV_WC_SUCCESS)
		return;
	if (with_imm) {
		wc->imm_data = imm;
		wc->wc_flags |= IBV_WC_WITH_IMM;
	}
	if (q->type != IBV_QPT_UD)
		wc->src_qp = q->dest_qpn;
}

void sv_resp_push_recv(struct resp *rs, enum ibv_wc_status st,
		       enum ibv_wc_opcode opc, uint32_t byte_len, int with_imm,
		       int with_inv, int solicited)
{
	struct sv_qp_shm *q = rs->q;
	const struct sv_pkt *pkt = rs->pkt;
	struct ibv_wc wc;

	recv_wc(&wc, q, sv_qp_cur(q)->wr_id, st, opc, byte_len, with_imm,
		pkt->imm);
	if (st == IBV_WC_SUCCESS) {
		if (with_inv) {
			wc.invalidated_rkey = pkt->inv_rkey;
			wc.wc_flags |= IBV_WC_WITH_INV;
		}
		if (q->type == IBV_QPT_UD) {
			wc.src_qp = pkt->src_qpn;
			wc.wc_flags |= IBV_WC_GRH;
			wc.sl = roce_pkt_type(pkt);
		}
	}
	qset(rs, SV_RF_HAVE_RECV, 0);
	q->recv_off = 0;
	if (rs->t->rcq) /* (an XRC request naming no SRQ took no receive) */
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

/* ------------------------------------------------------ placement -- */

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
	if (rs->ops->whole && (e & mine))
		return RESPST_ERR_LOCAL;
	if (!(e & SV_XERR_GONE))
		return fault;
	if (rs->t->peer && sv_pid_state(rs->t->peer->pid) != SV_PID_RUNNING)
		return RESPST_DROP;
	return RESPST_ERR_OP;
}

/* sv_sge_resolve of the receive's [off, off + n) for writing; a receive of
 * one range on the packet path goes through the owner's copy of the last
 * receive key (rs->rxc), as sv_resp_rkey does for remote keys. */
static int rx_resolve(struct resp *rs, const struct sv_recv_wqe *r,
		      uint32_t nsge, uint64_t off, uint64_t n,
		      struct sv_data *dst, struct sv_seg *segs)
{
	const struct ibv_sge *g = &r->sge[0];
	uint8_t *p;
	int e;

	if (!rs->rxc || nsge != 1 || !n)
		return sv_sge_resolve(rs->eng, r->sge, (int)nsge, rs->rx_pd_id,
				      IBV_ACCESS_LOCAL_WRITE, off, n, dst, segs,
				      SV_MAX_SEGS);
	if (off > g->length || n > g->length - off)
		return SV_KERR_LEN;
	p = sv_key_cached_local(rs->eng, rs->rxc, g->lkey, rs->rx_pd_id,
				g->addr + off, n, IBV_ACCESS_LOCAL_WRITE);
	if (p) {
		segs[0].m = (struct sv_mem){ .ptr = p, .key = g->lkey,
					     .eng = rs->eng };
	} else {
		e = sv_key_resolve_cached(rs->eng, rs->rxc, g->lkey,
					  rs->rx_pd_id, g->addr + off, n,
					  IBV_ACCESS_LOCAL_WRITE, 0, 0,
					  &segs[0].m);
		if (e)
			return e;
	}
	segs[0].len = n;
	*dst = (struct sv_data){ .seg = segs, .nseg = 1, .len = n };
	return SV_KOK;
}

/* A SEND's packet (or whole message) into the receive WQE at recv_off; a
 * UD receive gets the 40 bytes of the GRH first. */
enum resp_state sv_resp_exec_send(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;
	struct sv_recv_wqe *r = sv_qp_cur(q);
	struct sv_seg dsegs[SV_MAX_SEGS], gseg, pseg;
	struct sv_data dst, gd, pd;
	const struct sv_data *src = rs->ops->payload(rs, &pd, &pseg);
	uint64_t off = q->recv_off;
	uint32_t nsge = r->num_sge > cur_cap(rs) ? cur_cap(rs) : r->num_sge;
	uint8_t grh[40];
	int e;

	if (q->type == IBV_QPT_UD) {
		/* The GRH first (40 bytes), then the payload. */
		make_grh(rs->pkt, grh);
		e = sv_sge_resolve(rs->eng, r->sge, (int)nsge, rs->rx_pd_id,
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

/* A WRITE's packet (or whole message) at its place in the range its
 * first packet named (wr_va, wr_total, wr_left). */
enum resp_state sv_resp_exec_write(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;
	struct sv_seg pseg, dseg;
	struct sv_data pd, dst;
	const struct sv_data *src = rs->ops->payload(rs, &pd, &pseg);
	int e;

	if (src->len > q->wr_left)
		return sv_resp_uc_silent(rs, RESPST_ERR_INV_REQ);
	if (src->len) {
		uint64_t va = q->wr_va + (q->wr_total - q->wr_left);

		/* Checked again per packet: a rereg or dereg while a long
		 * write is in flight stops it. */
		e = sv_resp_rkey(rs, q->wr_rkey, va, src->len,
				 IBV_ACCESS_REMOTE_WRITE, &dseg.m);
		if (e)
			return sv_resp_uc_silent(rs, sv_resp_kerr_state(e));
		dseg.len = src->len;
		dst = (struct sv_data){ .seg = &dseg, .nseg = 1, .len = src->len };
		e = sv_xfer(&dst, 0, src, 0, src->len);
		if (e) {
			enum resp_state st = xerr_state(rs, e, SV_XERR_SRC,
							RESPST_ERR_ACCESS);

			return st == RESPST_ERR_LOCAL ? st :
						       sv_resp_uc_silent(rs, st);
		}
	}
	q->wr_left -= (uint32_t)src->len;
	qset(rs, SV_RF_IN_WRITE, !(rs->flags & OP_LAST));
	if ((rs->flags & OP_LAST) && q->wr_left)
		return sv_resp_uc_silent(rs, RESPST_ERR_INV_REQ);
	return RESPST_COMPLETE;
}

enum resp_state sv_resp_read_direct(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_seg sseg;
	struct sv_data src;
	int e;

	if (pkt->dma_len) {
		e = sv_resp_rkey(rs, pkt->rkey, pkt->va, pkt->dma_len,
				 IBV_ACCESS_REMOTE_READ, &sseg.m);
		if (e)
			return sv_resp_kerr_state(e);
		sseg.len = pkt->dma_len;
		src = (struct sv_data){ .seg = &sseg, .nseg = 1,
					.len = pkt->dma_len };
		e = sv_xfer(rs->data, 0, &src, 0, pkt->dma_len);
		if (e)
			return xerr_state(rs, e, SV_XERR_DST, RESPST_ERR_ACCESS);
	}
	return RESPST_DONE;
}

/* The atomic itself; its original value into rs->orig. */
enum resp_state sv_resp_exec_atomic(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_mem m;
	int e;

	e = sv_resp_rkey(rs, pkt->rkey, pkt->va, 8, IBV_ACCESS_REMOTE_ATOMIC,
			 &m);
	if (e)
		return sv_resp_kerr_state(e);
	/* Atomic with respect to every other atomic of the device: CPU
	 * atomics on the memory, here or in its owner (never CMA). */
	if (sv_mem_atomic(&m, (pkt->opcode & 0x1f) == OPC_CMP_SWAP ?
				      SV_RMEM_CSWAP : SV_RMEM_FADD,
			  pkt->comp, pkt->swap, &rs->orig))
		return m.ptr ? RESPST_ERR_ACCESS : RESPST_ERR_OP;
	return RESPST_DONE;
}

/*
 * An ATOMIC WRITE: its 8 bytes stored at the key's address as one unit
 * (IBTA 1.5; A19.4.2): an aligned 64-bit store, atomic with respect to
 * every other atomic of the device and to any aligned 8-byte load --
 * compare-and-swap until it takes, on the memory here or by its owner
 * (sv_mem_atomic, never CMA, whose copy may split it) -- and sequentially
 * consistent, so it lands after everything before it on this QP (rxe:
 * smp_store_release, "after all prior operations have completed").
 */
enum resp_state sv_resp_exec_atomic_write(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_seg pseg, vseg;
	struct sv_data pd, vd;
	const struct sv_data *src = rs->ops->payload(rs, &pd, &pseg);
	uint64_t v, cur = 0, orig;
	struct sv_mem m;
	int e;

	sv_data_local(&vd, &vseg, &v, 8);
	e = sv_xfer(&vd, 0, src, 0, 8);
	if (e)
		return xerr_state(rs, e, SV_XERR_SRC, RESPST_ERR_INV_REQ);
	e = sv_resp_rkey(rs, pkt->rkey, pkt->va, 8, IBV_ACCESS_REMOTE_WRITE,
			 &m);
	if (e)
		return sv_resp_kerr_state(e);
	/* Where the bytes land, as rxe checks (a zero-based window moves
	 * them off the iova's alignment). */
	if ((m.ptr ? (uint64_t)(uintptr_t)m.ptr : m.raddr) & 7)
		return RESPST_ERR_INV_REQ;
	for (;;) {
		if (sv_mem_atomic(&m, SV_RMEM_CSWAP, cur, v, &orig))
			return m.ptr ? RESPST_ERR_ACCESS : RESPST_ERR_OP;
		if (orig == cur)
			return RESPST_DONE;
		cur = orig; /* what it holds now: swap that for v */
	}
}

/* Invalidates key for SEND_WITH_INV: the daemon owns the key table.  The
 * responder lock stays held: the daemon takes none of ours. */
int sv_resp_invalidate(struct resp *rs, uint32_t key)
{
	struct sv_key_req req = { .key = key,
				  .pd_id = rs->pd_id,
				  .qpn = rs->q->qpn };

	return sv_call_simple(SV_OP_KEY_INVALIDATE, 0, rs->eng->instance, -1,
			      &req, sizeof(req), NULL, 0);
}

/* ------------------------------------------- the receive side's end -- */

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
		if (t->rcq)
			bits |= sv_cq_produce(t->rcq, &wc, 1);
		q->rflags &= ~(uint32_t)SV_RF_HAVE_RECV;
	}
	q->recv_off = 0;
	if (q->type == IBV_QPT_XRC_RECV) {
		/* No queue of its own, and no SRQ: each request names one
		 * (the receive being filled went to that SRQ's CQ when the
		 * responder knew it, t->x). */
	} else if (!t->srq) {
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

/* ---------------------------------------------------------- batches -- */

/* A batch may run on q (must hold q->lock): alive, ready to receive (RTR
 * only once its first message raised COMM_EST), no message in progress
 * nor any of the flags busy. */
static int batch_takes(const struct sv_qp_shm *q, uint32_t busy)
{
	uint32_t state = q->state;

	return !atomic_load_explicit(&q->h.dead, memory_order_relaxed) &&
	       (state == IBV_QPS_RTS || state == IBV_QPS_SQD ||
		state == IBV_QPS_SQE ||
		(state == IBV_QPS_RTR && (q->rflags & SV_RF_COMM_EST))) &&
	       !(q->rflags & (SV_RF_IN_SEND | SV_RF_IN_WRITE | SV_RF_UC_DROP |
			      busy));
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
	uint32_t mtu, npk = 0;
	int k = 0;

	if (n > SV_DIRECT_BATCH)
		n = SV_DIRECT_BATCH;
	resp_lock(q);
	mtu = req_mtu ? req_mtu : resp_mtu(q);
	if (!batch_takes(q, 0) ||
	    (q->type != IBV_QPT_RC && (read || q->type != IBV_QPT_UC)) ||
	    !(q->access & access))
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
	sv_unlock_shm(&q->lock);
	return k;
}

/*
 * A run of whole SENDs (a stream of them: UCX cuts a 64 KiB stream
 * message into SENDs of its segment size, 8 KiB), moved in one transfer
 * into the receives they take.  The receives are looked at in place
 * (sv_rq_peek) and taken only once the bytes have moved, under the
 * queue's consumer lock -- the QP's responder lock, or the SRQ's, held
 * across the transfer -- so a run that fails takes nothing and leaves
 * sv_resp_direct to take each receive and say why.  Only a run that
 * would succeed message by message is taken: the QP ready (not RTR
 * before its first message, which raises COMM_EST), no message in
 * progress, each receive there and long enough, its lkeys good.
 */
int sv_resp_send_batch(struct sv_engine *eng, struct sv_rtgt *t,
		       const struct sv_drw *ws, int n, uint32_t req_mtu,
		       void (*sent)(void *arg, int k), void *arg)
{
	struct sv_qp_shm *q = t->q;
	struct sv_srq_shm *srq = t->srq;
	void *region = srq ? (void *)srq : (void *)q;
	struct sv_rq_shm *rq = srq ? &srq->rq : &q->rq;
	struct sv_seg rsegs[SV_DIRECT_BATCH * 2], lsegs[SV_DIRECT_BATCH * 2];
	struct sv_data rem = { .seg = rsegs }, loc = { .seg = lsegs };
	union {
		struct sv_recv_wqe w;
		uint8_t b[sizeof(struct sv_recv_wqe) +
			  SV_MAX_SRQ_SGE * sizeof(struct ibv_sge)];
	} r;
	uint64_t wr_id[SV_DIRECT_BATCH];
	uint32_t mtu, npk = 0, cap;
	unsigned cq_bits = 0;
	int k = 0, limit = 0;

	if (n > SV_DIRECT_BATCH)
		n = SV_DIRECT_BATCH;
	resp_lock(q);
	mtu = req_mtu ? req_mtu : resp_mtu(q);
	cap = srq ? SV_MAX_SRQ_SGE : q->rq.max_sge;
	if (cap > SV_MAX_SRQ_SGE)
		cap = SV_MAX_SRQ_SGE;
	if (!batch_takes(q, SV_RF_HAVE_RECV) ||
	    (q->type != IBV_QPT_RC && q->type != IBV_QPT_UC) || t->x ||
	    !t->rcq)
		goto out;
	if (srq)
		sv_lock_shm(&srq->lock, SV_LOCK_SRQ);
	for (; k < n; k++) {
		const struct sv_drw *w = &ws[k];
		struct sv_data d;

		if (!w->len || loc.nseg + w->nseg > SV_DIRECT_BATCH * 2 ||
		    rem.nseg >= SV_DIRECT_BATCH * 2 ||
		    sv_rq_peek(region, rq, (uint32_t)k, &r.w, cap) ||
		    sv_sge_resolve(eng, r.w.sge, (int)r.w.num_sge, q->rx_pd_id,
				   IBV_ACCESS_LOCAL_WRITE, 0, w->len, &d,
				   rsegs + rem.nseg,
				   SV_DIRECT_BATCH * 2 - rem.nseg))
			break;
		rem.nseg += d.nseg;
		rem.len += d.len;
		memcpy(lsegs + loc.nseg, w->local, (size_t)w->nseg * sizeof(*lsegs));
		loc.nseg += w->nseg;
		loc.len += w->len;
		wr_id[k] = r.w.wr_id;
		npk += (uint32_t)((w->len + mtu - 1) / mtu);
	}
	if (k < 2 || sv_xfer(&rem, 0, &loc, 0, loc.len)) {
		k = 0; /* one by one, to learn which and why */
	} else {
		sv_rq_drop(rq, (uint32_t)k);
		if (srq)
			limit = sv_srq_dropped(srq);
	}
	if (srq)
		sv_unlock_shm(&srq->lock);
	if (!k)
		goto out;
	q->epsn = (q->epsn + npk) & PSN_MASK;
	q->msn += (uint32_t)k;
	q->rflags &= ~(uint32_t)SV_RF_NAK_SENT; /* the retry came */
	if (sent)
		sent(arg, k);
	for (int i = 0; i < k; i++) {
		struct ibv_wc wc;

		recv_wc(&wc, q, wr_id[i], IBV_WC_SUCCESS, IBV_WC_RECV,
			(uint32_t)ws[i].len, ws[i].with_imm, ws[i].imm);
		cq_bits |= sv_cq_produce(t->rcq, &wc, ws[i].se);
	}
out:
	sv_unlock_shm(&q->lock);
	sv_resp_notify(eng, t, cq_bits, limit);
	return k;
}

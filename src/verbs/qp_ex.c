/* SPDX-License-Identifier: MIT */
/*
 * The extended post API (struct ibv_qp_ex: wr_start ... wr_complete).
 *
 * wr_start takes the send queue lock and wr_complete / wr_abort drop it,
 * as mlx5 does: WQEs are built in place past the tail the engine knows,
 * and a failure anywhere in the batch (wr_err) makes wr_complete discard
 * the whole batch and answer that error.  Ops not asked for in
 * send_ops_flags answer EOPNOTSUPP through wr_err.
 */
#include "check.h"
#include "dp_int.h"
#include "sv_lock.h"

#include <string.h>

static struct sv_qp *qx(struct ibv_qp_ex *q)
{
	return (struct sv_qp *)q;
}

static void fail(struct sv_qp *qp, int err)
{
	if (!qp->wr_err)
		qp->wr_err = err;
}

/* The WQE the last wr_<op> made, or NULL (then the setter fails). */
static struct sv_send_wqe *cur_wqe(struct sv_qp *qp)
{
	if (qp->sq.tail == qp->wr_start_tail)
		return NULL;
	return sv_wq_slot(&qp->sq, qp->sq.tail - 1);
}

static void wr_start(struct ibv_qp_ex *q)
{
	struct sv_qp *qp = qx(q);

	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	qp->wr_err = 0;
	qp->wr_start_tail = qp->sq.tail;
}

static int wr_complete(struct ibv_qp_ex *q)
{
	struct sv_qp *qp = qx(q);
	int err = qp->wr_err;

	if (err) {
		qp->sq.tail = qp->wr_start_tail;
		sv_unlock_spin(&qp->sq_lock);
		return err;
	}
	SV_CHECK(sv_check_wr_batch(qp, qp->wr_start_tail, qp->sq.tail));
	sv_engine_posted(qp); /* releases sq_lock */
	return 0;
}

static void wr_abort(struct ibv_qp_ex *q)
{
	struct sv_qp *qp = qx(q);

	qp->sq.tail = qp->wr_start_tail;
	sv_unlock_spin(&qp->sq_lock);
}

/* Starts a WQE of opcode op with the qp_ex's wr_id and wr_flags. */
static struct sv_send_wqe *new_wqe(struct sv_qp *qp, enum ibv_wr_opcode op)
{
	struct sv_send_wqe *w;
	uint32_t flags = qp->qpx.wr_flags;

	if (qp->wr_err)
		return NULL;
	if (sv_qp_state(qp) < IBV_QPS_RTS ||
	    !sv_wr_takes(qp->type, op)) {
		SV_CHECK(sv_check_wr_state(qp, op));
		fail(qp, EINVAL);
		return NULL;
	}
	if (qp->sq.tail - qp->sq.head >= qp->sq.max_wr) {
		fail(qp, ENOMEM);
		return NULL;
	}
	w = sv_wq_slot(&qp->sq, qp->sq.tail);
	memset(w, 0, sizeof(*w));
	w->wr_id = qp->qpx.wr_id;
	w->opcode = op;
	if (qp->sq_sig_all)
		flags |= IBV_SEND_SIGNALED;
	/* INLINE is decided by wr_set_inline_data*. */
	w->send_flags = flags & ~(uint32_t)IBV_SEND_INLINE;
	qp->sq.tail++;
	return w;
}

static void unsupported(struct ibv_qp_ex *q)
{
	fail(qx(q), EOPNOTSUPP);
}

static void wr_send(struct ibv_qp_ex *q)
{
	new_wqe(qx(q), IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	struct sv_send_wqe *w = new_wqe(qx(q), IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}

static void wr_send_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct sv_send_wqe *w = new_wqe(qx(q), IBV_WR_SEND_WITH_INV);

	if (w) {
		w->invalidate_rkey = rkey;
		w->imm_data = htobe32(rkey);
	}
}

static void wr_rdma(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey,
		    uint64_t addr, __be32 imm)
{
	struct sv_send_wqe *w = new_wqe(qx(q), op);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->imm_data = imm;
	}
}

static void wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	wr_rdma(q, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey,
			      uint64_t addr, __be32 imm)
{
	wr_rdma(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	wr_rdma(q, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void wr_atomic(struct ibv_qp_ex *q, enum ibv_wr_opcode op,
		      uint32_t rkey, uint64_t addr, uint64_t cmp_add,
		      uint64_t swap)
{
	struct sv_send_wqe *w = new_wqe(qx(q), op);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->compare_add = cmp_add;
		w->swap = swap;
	}
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey,
			      uint64_t addr, uint64_t compare, uint64_t swap)
{
	wr_atomic(q, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *q, uint32_t rkey,
				uint64_t addr, uint64_t add)
{
	wr_atomic(q, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

/* IBTA 1.5 ATOMIC WRITE: the 8 bytes at data are copied into the WQE now
 * (as rxe's provider does), so the caller's buffer is free on return and
 * no SGE is set: a setter after it fails the batch. */
static void wr_atomic_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			    const void *data)
{
	struct sv_send_wqe *w = new_wqe(qx(q), IBV_WR_ATOMIC_WRITE);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		memcpy(&w->compare_add, data, 8);
	}
}

static void wr_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct sv_send_wqe *w = new_wqe(qx(q), IBV_WR_BIND_MW);

	if (w) {
		w->mw = mw;
		w->mw_new_rkey = rkey;
		w->bind_info = *info;
	}
}

static void wr_local_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct sv_send_wqe *w = new_wqe(qx(q), IBV_WR_LOCAL_INV);

	if (w)
		w->invalidate_rkey = rkey;
}

static void wr_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct sv_qp *qp = qx(q);
	struct sv_send_wqe *w = cur_wqe(qp);

	if (!w || qp->type != IBV_QPT_UD || !ah) {
		fail(qp, EINVAL);
		return;
	}
	sv_wqe_set_ah(w, to_svah(ah));
	w->remote_qpn = remote_qpn & 0xffffff;
	w->remote_qkey = (remote_qkey & 0x80000000u) ? qp->attr.qkey :
						       remote_qkey;
}

/* The XRC SRQ the WQE's requests name (their XRCETH); an INI QP's WQE
 * only (rdma-core's providers ignore it elsewhere; we refuse it). */
static void wr_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t srqn)
{
	struct sv_qp *qp = qx(q);
	struct sv_send_wqe *w = cur_wqe(qp);

	if (!w || qp->type != IBV_QPT_XRC_SEND) {
		fail(qp, EINVAL);
		return;
	}
	w->xrc_srqn = srqn & 0xffffff;
}

static void wr_set_sge_list(struct ibv_qp_ex *q, size_t n,
			    const struct ibv_sge *sge)
{
	struct sv_qp *qp = qx(q);
	struct sv_send_wqe *w = cur_wqe(qp);

	if (!w || n > qp->cap.max_send_sge || w->opcode == IBV_WR_ATOMIC_WRITE) {
		fail(qp, EINVAL);
		return;
	}
	w->num_sge = (uint32_t)n;
	w->inline_len = 0;
	w->send_flags &= ~(uint32_t)IBV_SEND_INLINE;
	if (n)
		memcpy(w->sge, sge, n * sizeof(*sge));
}

static void wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(q, 1, &sge);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *q, size_t n,
				    const struct ibv_data_buf *buf)
{
	struct sv_qp *qp = qx(q);
	struct sv_send_wqe *w = cur_wqe(qp);
	size_t len = 0;
	uint8_t *dst;

	if (!w || w->opcode == IBV_WR_ATOMIC_WRITE) {
		fail(qp, EINVAL);
		return;
	}
	for (size_t i = 0; i < n; i++)
		len += buf[i].length;
	if (len > qp->cap.max_inline_data) {
		fail(qp, EINVAL);
		return;
	}
	dst = sv_send_wqe_inline(&qp->sq, w);
	w->num_sge = 0;
	w->inline_len = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(dst + w->inline_len, buf[i].addr, buf[i].length);
		w->inline_len += (uint32_t)buf[i].length;
	}
	w->send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t length)
{
	struct ibv_data_buf b = { .addr = addr, .length = length };

	wr_set_inline_data_list(q, 1, &b);
}

/* The op setters this device never has. */
static void wr_send_tso(struct ibv_qp_ex *q, void *hdr, uint16_t hdr_sz,
			uint16_t mss)
{
	(void)hdr;
	(void)hdr_sz;
	(void)mss;
	unsupported(q);
}

/* Placeholders for ops the QP was not created with: same signatures,
 * EOPNOTSUPP through wr_err. */
static void no_send(struct ibv_qp_ex *q)
{
	unsupported(q);
}

static void no_imm(struct ibv_qp_ex *q, __be32 imm)
{
	(void)imm;
	unsupported(q);
}

static void no_rkey(struct ibv_qp_ex *q, uint32_t rkey)
{
	(void)rkey;
	unsupported(q);
}

static void no_rdma(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	(void)rkey;
	(void)addr;
	unsupported(q);
}

static void no_rdma_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			__be32 imm)
{
	(void)rkey;
	(void)addr;
	(void)imm;
	unsupported(q);
}

static void no_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
		       uint64_t c, uint64_t s)
{
	(void)rkey;
	(void)addr;
	(void)c;
	(void)s;
	unsupported(q);
}

static void no_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			 uint64_t a)
{
	(void)rkey;
	(void)addr;
	(void)a;
	unsupported(q);
}

static void no_atomic_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			    const void *data)
{
	(void)rkey;
	(void)addr;
	(void)data;
	unsupported(q);
}

static void no_bind(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
		    const struct ibv_mw_bind_info *info)
{
	(void)mw;
	(void)rkey;
	(void)info;
	unsupported(q);
}

void sv_qp_ex_init(struct sv_qp *qp)
{
	struct ibv_qp_ex *q = &qp->qpx;
	uint64_t f = qp->send_ops_flags;

	q->comp_mask = 0;
	q->wr_start = wr_start;
	q->wr_complete = wr_complete;
	q->wr_abort = wr_abort;
	q->wr_send = (f & IBV_QP_EX_WITH_SEND) ? wr_send : no_send;
	q->wr_send_imm = (f & IBV_QP_EX_WITH_SEND_WITH_IMM) ? wr_send_imm : no_imm;
	q->wr_send_inv = (f & IBV_QP_EX_WITH_SEND_WITH_INV) ? wr_send_inv : no_rkey;
	q->wr_rdma_write = (f & IBV_QP_EX_WITH_RDMA_WRITE) ? wr_rdma_write : no_rdma;
	q->wr_rdma_write_imm = (f & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) ?
				       wr_rdma_write_imm : no_rdma_imm;
	q->wr_rdma_read = (f & IBV_QP_EX_WITH_RDMA_READ) ? wr_rdma_read : no_rdma;
	q->wr_atomic_cmp_swp = (f & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) ?
				       wr_atomic_cmp_swp : no_cmp_swp;
	q->wr_atomic_fetch_add = (f & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) ?
					 wr_atomic_fetch_add : no_fetch_add;
	q->wr_bind_mw = (f & IBV_QP_EX_WITH_BIND_MW) ? wr_bind_mw : no_bind;
	q->wr_local_inv = (f & IBV_QP_EX_WITH_LOCAL_INV) ? wr_local_inv : no_rkey;
	q->wr_send_tso = wr_send_tso;
	q->wr_atomic_write = (f & IBV_QP_EX_WITH_ATOMIC_WRITE) ?
				     wr_atomic_write : no_atomic_write;
	q->wr_set_ud_addr = wr_set_ud_addr;
	q->wr_set_xrc_srqn = wr_set_xrc_srqn;
	q->wr_set_inline_data = wr_set_inline_data;
	q->wr_set_inline_data_list = wr_set_inline_data_list;
	q->wr_set_sge = wr_set_sge;
	q->wr_set_sge_list = wr_set_sge_list;
}

/* All families' ops on a new context (device.c's new_context). */
void sv_set_dp_ops(struct verbs_context *vctx)
{
	sv_cq_set_ops(vctx);
	sv_qp_set_ops(vctx);
	sv_post_set_ops(vctx);
	sv_srq_set_ops(vctx);
	sv_mw_set_ops(vctx);
}

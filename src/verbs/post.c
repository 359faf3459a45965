/* SPDX-License-Identifier: MIT */
/*
 * ibv_post_send and ibv_post_recv (ibv_context ops behind verbs.h's static
 * inlines), and the work queue rings they fill.
 *
 * Posting checks only what hardware checks when a WR is posted: the QP
 * state, the opcode against the QP type, the SGE count, inline length, the
 * UD address handle being there, and room in the queue.  Keys, bounds, PDs
 * and access rights are the engine's, when the WQE executes
 * (docs/architecture.md "Checks at execution time").
 */
#include "dp_int.h"
#include "check.h"
#include "sv_lock.h"

#include <stdlib.h>
#include <string.h>

#define WQE_ALIGN 64u

size_t sv_send_wqe_size(uint32_t max_sge, uint32_t max_inline)
{
	size_t sz = sizeof(struct sv_send_wqe) +
		    (size_t)max_sge * sizeof(struct ibv_sge) + max_inline;

	return (sz + WQE_ALIGN - 1) & ~(size_t)(WQE_ALIGN - 1);
}

int sv_wq_init(struct sv_wq *wq, uint32_t max_wr, uint32_t max_sge,
	       size_t wqe_size)
{
	uint32_t cap = 1;

	while (cap < max_wr)
		cap <<= 1;
	wq->buf = calloc(cap, wqe_size);
	if (!wq->buf)
		return -ENOMEM;
	wq->wqe_size = (uint32_t)wqe_size;
	wq->cap = cap;
	wq->max_wr = max_wr;
	wq->max_sge = max_sge;
	wq->head = wq->tail = wq->next = 0;
	return 0;
}

void sv_wq_free(struct sv_wq *wq)
{
	free(wq->buf);
	wq->buf = NULL;
}

/* The bytes wr's sg_list names. */
static uint64_t sge_bytes(const struct ibv_send_wr *wr)
{
	uint64_t n = 0;

	for (int i = 0; i < wr->num_sge; i++)
		n += wr->sg_list[i].length;
	return n;
}

int sv_post_one_send(struct sv_qp *qp, const struct ibv_send_wr *wr)
{
	struct sv_send_wqe *w;
	uint32_t op = (uint32_t)wr->opcode, flags = wr->send_flags;
	const struct sv_wrinfo *wi = sv_wrinfo(op);
	int is_inline;

	/* Sends need RTS (or SQD/SQE/ERR, where they wait or flush). */
	if (sv_qp_state(qp) < IBV_QPS_RTS)
		return EINVAL;
	if (!sv_wr_takes(qp->type, op))
		return EINVAL;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	/* IBV_SEND_INLINE is ignored where there is no payload to send, as
	 * hardware does. */
	is_inline = (flags & IBV_SEND_INLINE) && (wi->flags & SV_WR_INLINE);
	if (is_inline && sge_bytes(wr) > qp->cap.max_inline_data)
		return EINVAL;
	if (qp->type == IBV_QPT_UD && !wr->wr.ud.ah)
		return EINVAL;
	if ((wi->flags & SV_WR_ATOMIC_WRITE) && sge_bytes(wr) != 8)
		return EINVAL; /* its sg_list is the 8 bytes, no more, no less */
	if (qp->sq.tail - qp->sq.head >= qp->sq.max_wr)
		return ENOMEM;

	w = sv_wq_slot(&qp->sq, qp->sq.tail);
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = op;
	if (qp->sq_sig_all)
		flags |= IBV_SEND_SIGNALED;
	if (!is_inline)
		flags &= ~(uint32_t)IBV_SEND_INLINE;
	w->send_flags = flags;
	w->imm_data = wr->imm_data;
	if (wi->flags & SV_WR_INV)
		w->invalidate_rkey = wr->invalidate_rkey;
	if (is_inline && (wi->flags & SV_WR_ATOMIC_WRITE)) {
		/* The 8 bytes go where ibv_wr_atomic_write puts them
		 * (sv_engine.h, struct sv_send_wqe). */
		uint8_t *dst = (uint8_t *)&w->compare_add;

		for (int i = 0, n = 0; i < wr->num_sge; i++) {
			memcpy(dst + n, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			n += (int)wr->sg_list[i].length;
		}
		flags &= ~(uint32_t)IBV_SEND_INLINE;
		w->send_flags = flags;
	} else if (is_inline) {
		uint8_t *dst = sv_send_wqe_inline(&qp->sq, w);

		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(dst + w->inline_len,
			       (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			w->inline_len += wr->sg_list[i].length;
		}
	} else {
		w->num_sge = (uint32_t)wr->num_sge;
		if (wr->num_sge)
			memcpy(w->sge, wr->sg_list,
			       (size_t)wr->num_sge * sizeof(struct ibv_sge));
	}
	if (wi->flags & SV_WR_ATOMIC) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else if (wi->flags & SV_WR_REMOTE) {
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	} else if (op == IBV_WR_BIND_MW) {
		w->mw = wr->bind_mw.mw;
		w->mw_new_rkey = wr->bind_mw.rkey;
		w->bind_info = wr->bind_mw.bind_info;
	}
	if (qp->type == IBV_QPT_XRC_SEND)
		w->xrc_srqn = wr->qp_type.xrc.remote_srqn & 0xffffff;
	if (qp->type == IBV_QPT_UD) {
		struct sv_ah *ah = to_svah(wr->wr.ud.ah);

		sv_wqe_set_ah(w, ah);
		w->remote_qpn = wr->wr.ud.remote_qpn & 0xffffff;
		/* A Q_Key with the high bit set means "the QP's own"
		 * (IBTA 10.2.5). */
		w->remote_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ?
					 qp->attr.qkey :
					 wr->wr.ud.remote_qkey;
	}
	qp->sq.tail++;
	return 0;
}

static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr)
{
	struct sv_qp *qp = to_svqp(ibqp);
	int err = sv_fault_verb(SV_FV_POST_SEND); /* docs/faults.md */

	if (!err && ibqp->qp_type == IBV_QPT_XRC_RECV)
		err = EINVAL; /* an XRC TGT QP has no send queue (xrc.c) */
	if (err) {
		*bad_wr = wr;
		return err;
	}
	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	for (; wr; wr = wr->next) {
		SV_CHECK(sv_check_send(qp, wr));
		err = sv_post_one_send(qp, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	sv_engine_posted(qp); /* releases sq_lock */
	return err;
}

static int post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr)
{
	struct sv_qp *qp = to_svqp(ibqp);
	int err = sv_fault_verb(SV_FV_POST_RECV); /* docs/faults.md */

	if (err) {
		*bad_wr = wr;
		return err;
	}
	if (ibqp->qp_type == IBV_QPT_XRC_SEND ||
	    ibqp->qp_type == IBV_QPT_XRC_RECV || qp->srq) {
		/* Its receives come from an SRQ, or it has none. */
		*bad_wr = wr;
		return EINVAL;
	}
	sv_lock_spin(&qp->rq_post_lock, SV_LOCK_RQ_POST);
	for (; wr; wr = wr->next) {
		SV_CHECK(sv_check_recv(qp, wr));
		err = sv_qp_state(qp) == IBV_QPS_RESET ?
			      EINVAL :
			      sv_rq_post(qp->shm, &qp->shm->rq, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	sv_unlock_spin(&qp->rq_post_lock);
	/* Posted to a QP in error: flushed at once, as hardware does. */
	if (sv_qp_state(qp) == IBV_QPS_ERR)
		sv_engine_flush(qp);
	return err;
}

void sv_post_set_ops(struct verbs_context *vctx)
{
	vctx->context.ops.post_send = post_send;
	vctx->context.ops.post_recv = post_recv;
}

/* SPDX-License-Identifier: MIT */
/*
 * The completer (IBTA 9.7.5 requester side; rxe_comp.c's role): ACKs,
 * NAKs, READ responses and atomic ACKs retire send WQEs in order; the
 * retransmission and RNR timers live here; flushing and the per-QP
 * transport state too.
 *
 * A WQE is retired (its CQE pushed, sq.head advanced) only when it and
 * every WQE before it are done, so send completions come in post order.
 * A WQE finished with an error moves the QP to ERR when it is retired and
 * everything after it is flushed (IBV_WC_WR_FLUSH_ERR).
 */
#include "engine_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WQE_STATE(w) ((w)->state & 0xff)
#define WQE_STATUS(w) ((enum ibv_wc_status)((w)->state >> 8))

static void wqe_done(struct sv_send_wqe *w, enum ibv_wc_status status)
{
	w->state = WQE_DONE | (uint32_t)status << 8;
}

uint64_t sv_timeout_ns(uint8_t t)
{
	uint64_t ns;

	/* 0 means infinite (C9-141); a dead peer still fails at once
	 * through PEER_GONE, so nothing hangs. */
	if (t == 0)
		return 3600ull * 1000000000ull;
	ns = 4096ull << (t > 31 ? 31 : t);
	return ns < SV_ENG_MIN_TIMEOUT_NS ? SV_ENG_MIN_TIMEOUT_NS : ns;
}

uint64_t sv_rnr_ns(uint8_t code)
{
	/* 9.7.5.2.8, table 45: microseconds. */
	static const uint32_t us[32] = {
		655360, 10,    20,    30,    40,    60,     80,     120,
		160,	240,   320,   480,   640,   960,    1280,   1920,
		2560,	3840,  5120,  7680,  10240, 15360,  20480,  30720,
		40960,	61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};
	return (uint64_t)us[code & 31] * 1000;
}

uint32_t sv_mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 1024;
}

void sv_qp_set_err(struct sv_qp *qp)
{
	qp->state = IBV_QPS_ERR;
	qp->attr.qp_state = IBV_QPS_ERR;
	qp->qpx.qp_base.state = IBV_QPS_ERR;
}

static enum ibv_wc_opcode wc_opcode(uint32_t op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	default:
		return IBV_WC_SEND;
	}
}

static void push_send_cqe(struct sv_qp *qp, struct sv_send_wqe *w,
			  enum ibv_wc_status status)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = status;
	wc.opcode = wc_opcode(w->opcode);
	wc.qp_num = qp->qpx.qp_base.qp_num;
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		wc.byte_len = 8;
	else if (w->send_flags & IBV_SEND_INLINE)
		wc.byte_len = w->inline_len;
	else
		wc.byte_len = (uint32_t)sv_sge_total(w->sge, (int)w->num_sge);
	if (status != IBV_WC_SUCCESS)
		wc.vendor_err = 0;
	sv_cq_push(qp->scq, &wc, status != IBV_WC_SUCCESS);
}

void sv_comp_retire(struct sv_qp *qp)
{
	while (qp->sq.head != qp->sq.next) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, qp->sq.head);
		enum ibv_wc_status st;

		if (WQE_STATE(w) != WQE_DONE)
			break;
		st = WQE_STATUS(w);
		if (st != IBV_WC_SUCCESS || (w->send_flags & IBV_SEND_SIGNALED))
			push_send_cqe(qp, w, st);
		qp->sq.head++;
		if (st != IBV_WC_SUCCESS) {
			sv_qp_set_err(qp);
			break; /* the rest is flushed */
		}
	}
}

/* Finds the outstanding WQE whose PSN range holds psn. */
static int find_wqe(struct sv_qp *qp, uint32_t psn, uint32_t *idx)
{
	for (uint32_t i = qp->sq.head; i != qp->sq.next; i++) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(w) == WQE_DONE || WQE_STATE(w) == WQE_NEW)
			continue;
		if (psn_diff(psn, w->first_psn) >= 0 &&
		    psn_diff(psn, w->last_psn) <= 0) {
			*idx = i;
			return 1;
		}
	}
	return 0;
}

/* The oldest WQE not yet done in [head, next), or next. */
static uint32_t oldest_open(struct sv_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.head; i != qp->sq.next; i++) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(w) != WQE_DONE)
			break;
	}
	return i;
}

static int outstanding(struct sv_qp *qp)
{
	return oldest_open(qp) != qp->sq.next;
}

/* Everything sent before idx that only needed an ACK is acknowledged
 * (a later response implies it, 9.7.5.1.3). */
static void implicit_ack(struct sv_qp *qp, uint32_t idx)
{
	for (uint32_t i = qp->sq.head; i != idx; i++) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(w) == WQE_SENT &&
		    w->opcode != IBV_WR_RDMA_READ &&
		    w->opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
		    w->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD)
			wqe_done(w, IBV_WC_SUCCESS);
	}
}

static void progress_made(struct sv_qp *qp, struct sv_tr *tr)
{
	tr->retry_left = qp->attr.retry_cnt;
	tr->rnr_left = qp->attr.rnr_retry;
	tr->timer_at = outstanding(qp) ?
			       sv_now_ns() + sv_timeout_ns(qp->attr.timeout) :
			       0;
}

static int is_read_or_atomic(uint32_t op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/*
 * Go back N: resend from WQE idx (done local operations stay done), from
 * PSN psn when it falls inside a SEND/WRITE the responder partly has (its
 * NAK's expected PSN, or the last ACK + 1), and a READ from its first
 * byte not yet received: a long message on a lossy link resumes, it does
 * not start over.
 */
static void rewind_to(struct sv_qp *qp, struct sv_tr *tr, uint32_t idx,
		      uint32_t psn)
{
	struct sv_send_wqe *w = sv_wq_slot(&qp->sq, idx);
	uint32_t mtu = tr->mtu ? tr->mtu : 4096;

	tr->psn = w->first_psn;
	if (w->opcode == IBV_WR_RDMA_READ && WQE_STATE(w) != WQE_NEW &&
	    w->bytes_sent) {
		/* Ask for the rest (the responder answers a repeated READ
		 * from its PSN, 9.7.5.1.2). */
		tr->psn = (w->first_psn + (uint32_t)(w->bytes_sent / mtu)) &
			  PSN_MASK;
		w->state = WQE_SENDING;
	} else if (!is_read_or_atomic(w->opcode) && WQE_STATE(w) != WQE_NEW &&
		   psn_diff(psn, w->first_psn) > 0 &&
		   (WQE_STATE(w) == WQE_SENDING ||
		    psn_diff(psn, w->last_psn) <= 0) &&
		   (uint64_t)(uint32_t)psn_diff(psn, w->first_psn) * mtu <
			   w->bytes_sent) {
		w->bytes_sent = (uint64_t)(uint32_t)psn_diff(psn, w->first_psn) *
				mtu;
		w->state = WQE_SENDING;
		tr->psn = psn;
	} else if (WQE_STATE(w) != WQE_DONE) {
		w->state = WQE_NEW;
		w->bytes_sent = 0;
	}
	for (uint32_t i = idx + 1; (int32_t)(qp->sq.next - i) > 0; i++) {
		struct sv_send_wqe *x = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(x) != WQE_DONE) {
			x->state = WQE_NEW;
			x->bytes_sent = 0;
		}
	}
	/* The WQE at sq.next may be half sent (blocked on a full ring): it
	 * starts over too, or it would go on with PSNs from the rewind. */
	if (idx != qp->sq.next && qp->sq.next != qp->sq.tail) {
		struct sv_send_wqe *x = sv_wq_slot(&qp->sq, qp->sq.next);

		if (WQE_STATE(x) == WQE_SENDING) {
			x->state = WQE_NEW;
			x->bytes_sent = 0;
		}
	}
	qp->sq.next = idx;
	tr->blocked = 1; /* the progress thread (or the caller) resends */
}

static void fail_at(struct sv_qp *qp, struct sv_tr *tr, uint32_t idx,
		    enum ibv_wc_status st)
{
	struct sv_send_wqe *w = sv_wq_slot(&qp->sq, idx);

	implicit_ack(qp, idx);
	wqe_done(w, st);
	if (qp->sq.next == idx)
		qp->sq.next++;
	tr->stopped = 1;
	tr->timer_at = 0;
}

void sv_comp_fail(struct sv_qp *qp, enum ibv_wc_status status)
{
	struct sv_tr *tr = tr_of(qp);
	uint32_t idx = oldest_open(qp);

	if (idx == qp->sq.next && qp->sq.next == qp->sq.tail)
		return;
	fail_at(qp, tr, idx, status);
	sv_comp_retire(qp);
}

static void ack_upto(struct sv_qp *qp, struct sv_tr *tr, uint32_t psn)
{
	int progressed = 0;

	for (uint32_t i = qp->sq.head; i != qp->sq.next; i++) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(w) == WQE_DONE)
			continue;
		if (WQE_STATE(w) != WQE_SENT || psn_diff(psn, w->last_psn) < 0)
			break;
		if (w->opcode == IBV_WR_RDMA_READ ||
		    w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		    w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
			break; /* done by its response only */
		wqe_done(w, IBV_WC_SUCCESS);
		progressed = 1;
	}
	if (progressed || psn_diff(psn, tr->last_ack_psn) > 0) {
		tr->last_ack_psn = psn;
		progress_made(qp, tr);
	}
}

static void read_resp(struct sv_qp *qp, struct sv_tr *tr,
		      const struct sv_pkt *pkt)
{
	uint32_t idx, mtu = tr->mtu ? tr->mtu : 4096;
	struct sv_send_wqe *w;
	uint64_t off;
	int err;

	if (!find_wqe(qp, pkt->psn, &idx))
		return; /* duplicate or unexpected: ignored */
	w = sv_wq_slot(&qp->sq, idx);
	if (w->opcode != IBV_WR_RDMA_READ)
		return;
	implicit_ack(qp, idx);
	off = (uint64_t)(uint32_t)psn_diff(pkt->psn, w->first_psn) * mtu;
	if (off != w->bytes_sent) {
		/* A response was lost (or this one repeats): only in order.
		 * Ask once per gap for the rest. */
		uint32_t mark = (uint32_t)(w->bytes_sent / mtu) + 1;

		if (off > w->bytes_sent && w->retries != mark &&
		    WQE_STATE(w) == WQE_SENT) {
			w->retries = mark;
			rewind_to(qp, tr, idx, pkt->psn);
		}
		return;
	}
	if (off + pkt->paylen > sv_sge_total(w->sge, (int)w->num_sge)) {
		fail_at(qp, tr, idx, IBV_WC_LOC_LEN_ERR);
		return;
	}
	err = sv_sge_copy(qp->eng, w->sge, (int)w->num_sge, qp->pd_id, off,
			  (void *)pkt->payload, pkt->paylen, 1);
	if (err) {
		fail_at(qp, tr, idx,
			err < 0 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR);
		return;
	}
	w->bytes_sent = off + pkt->paylen;
	if (pkt->psn == w->last_psn) {
		wqe_done(w, IBV_WC_SUCCESS);
		tr->last_ack_psn = pkt->psn;
		progress_made(qp, tr);
	}
}

static void atomic_resp(struct sv_qp *qp, struct sv_tr *tr,
			const struct sv_pkt *pkt)
{
	uint64_t v = pkt->orig;
	struct sv_send_wqe *w;
	uint32_t idx;
	int err;

	if (!find_wqe(qp, pkt->psn, &idx))
		return;
	w = sv_wq_slot(&qp->sq, idx);
	if (w->opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
	    w->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD)
		return;
	implicit_ack(qp, idx);
	err = sv_sge_copy(qp->eng, w->sge, 1, qp->pd_id, 0, &v, 8, 1);
	if (err) {
		fail_at(qp, tr, idx,
			err < 0 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR);
		return;
	}
	wqe_done(w, IBV_WC_SUCCESS);
	tr->last_ack_psn = pkt->psn;
	progress_made(qp, tr);
}

static void nak(struct sv_qp *qp, struct sv_tr *tr, const struct sv_pkt *pkt)
{
	uint8_t type = pkt->syn & SV_AETH_TYPE_MASK;
	uint32_t idx;

	if (!find_wqe(qp, pkt->psn, &idx)) {
		struct sv_send_wqe *cur = sv_wq_slot(&qp->sq, qp->sq.next);

		/* The WQE being sent (blocked on a full ring: at sq.next,
		 * its last PSN not known yet), or a NAK for the PSN right
		 * after everything we sent: the oldest open WQE. */
		if (qp->sq.next != qp->sq.tail && WQE_STATE(cur) == WQE_SENDING &&
		    psn_diff(pkt->psn, cur->first_psn) >= 0 &&
		    psn_diff(pkt->psn, tr->psn) < 0) {
			idx = qp->sq.next;
		} else {
			idx = oldest_open(qp);
			if (idx == qp->sq.next)
				return;
		}
	}
	if (type == SV_AETH_RNR_NAK) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, idx);

		implicit_ack(qp, idx);
		if (qp->attr.rnr_retry != 7) {
			if (!tr->rnr_left) {
				fail_at(qp, tr, idx, IBV_WC_RNR_RETRY_EXC_ERR);
				return;
			}
			tr->rnr_left--;
		}
		(void)w;
		rewind_to(qp, tr, idx, pkt->psn);
		tr->blocked = 0;
		tr->rnr_at = sv_now_ns() + sv_rnr_ns(pkt->syn & 0x1f);
		tr->timer_at = 0;
		return;
	}
	switch (pkt->syn & 0x1f) {
	case SV_NAK_PSN_SEQ:
		implicit_ack(qp, idx);
		/* The responder has everything before psn: progress, which
		 * renews the retry budget (as an ACK would). */
		if (psn_diff((pkt->psn - 1) & PSN_MASK, tr->last_ack_psn) > 0) {
			tr->last_ack_psn = (pkt->psn - 1) & PSN_MASK;
			progress_made(qp, tr);
		} else if (!tr->retry_left) {
			fail_at(qp, tr, idx, IBV_WC_RETRY_EXC_ERR);
			return;
		} else {
			tr->retry_left--;
		}
		rewind_to(qp, tr, idx, pkt->psn);
		return;
	case SV_NAK_INV_REQ:
		fail_at(qp, tr, idx, IBV_WC_REM_INV_REQ_ERR);
		return;
	case SV_NAK_REM_ACCESS:
		fail_at(qp, tr, idx, IBV_WC_REM_ACCESS_ERR);
		return;
	default:
		fail_at(qp, tr, idx, IBV_WC_REM_OP_ERR);
		return;
	}
}

int sv_comp_packet(struct sv_qp *qp, const struct sv_pkt *pkt)
{
	struct sv_tr *tr = tr_of(qp);
	uint64_t rnr, timer;
	int flush = 0, kick = 0;

	sv_spin_lock(&qp->sq_lock);
	if (qp->type != IBV_QPT_RC || !tr ||
	    (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD &&
	     qp->state != IBV_QPS_SQE)) {
		pthread_spin_unlock(&qp->sq_lock);
		return 0;
	}
	if ((pkt->flags & OP_AETH) &&
	    (pkt->syn & SV_AETH_TYPE_MASK) != SV_AETH_ACK) {
		nak(qp, tr, pkt);
	} else if (pkt->flags & OP_READ) {
		read_resp(qp, tr, pkt);
	} else if (pkt->flags & OP_ATOMIC) {
		atomic_resp(qp, tr, pkt);
	} else if (pkt->flags & OP_ACK) {
		ack_upto(qp, tr, pkt->psn);
	}
	sv_comp_retire(qp);
	if (qp->state == IBV_QPS_ERR)
		flush = 1;
	else if (qp->sq.next != qp->sq.tail || tr->blocked)
		kick = !tr->rnr_at;
	rnr = tr->rnr_at;
	timer = tr->timer_at;
	pthread_spin_unlock(&qp->sq_lock);
	if (rnr)
		sv_eng_deadline(qp->eng, rnr);
	else if (timer)
		sv_eng_deadline(qp->eng, timer);
	if (kick)
		sv_req_run(qp);
	return flush;
}

int sv_comp_timers(struct sv_qp *qp, uint64_t now, uint64_t *next)
{
	struct sv_tr *tr = tr_of(qp);
	int flush = 0;

	sv_spin_lock(&qp->sq_lock);
	if (qp->type == IBV_QPT_RC && outstanding(qp) &&
	    (qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD)) {
		struct sv_link *l = tr->link;

		if (l && atomic_load(&l->dead)) {
			/* The peer's process is gone: no retry can help. */
			sv_comp_fail(qp, IBV_WC_RETRY_EXC_ERR);
		} else if (tr->timer_at && now >= tr->timer_at) {
			uint64_t head = l ? atomic_load_explicit(
						    &l->tx.h->head,
						    memory_order_acquire) :
					    0;

			if (l && head < tr->ring_mark) {
				/* Still in the ring: the peer is alive but
				 * slow.  Not a lost packet; wait again. */
				tr->timer_at = now + sv_timeout_ns(qp->attr.timeout);
			} else if (!tr->retry_left) {
				sv_comp_fail(qp, IBV_WC_RETRY_EXC_ERR);
			} else {
				tr->retry_left--;
				rewind_to(qp, tr, oldest_open(qp),
					  (tr->last_ack_psn + 1) & PSN_MASK);
				tr->timer_at = now + sv_timeout_ns(qp->attr.timeout);
			}
		}
	}
	if (tr->rnr_at && now >= tr->rnr_at) {
		tr->rnr_at = 0;
		tr->blocked = 1;
	}
	if (qp->state == IBV_QPS_ERR && qp->sq.head != qp->sq.tail)
		flush = 1;
	if (tr->timer_at && (!*next || tr->timer_at < *next))
		*next = tr->timer_at;
	if (tr->rnr_at && (!*next || tr->rnr_at < *next))
		*next = tr->rnr_at;
	pthread_spin_unlock(&qp->sq_lock);
	return flush;
}

static void push_recv_flush(struct sv_qp *qp, uint64_t wr_id)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr_id;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = qp->qpx.qp_base.qp_num;
	sv_cq_push(qp->rcq, &wc, 1);
}

void sv_engine_flush(struct sv_qp *qp)
{
	struct sv_tr *tr = tr_of(qp);
	int last_wqe = 0;

	sv_spin_lock(&qp->sq_lock);
	sv_spin_lock(&qp->rq_lock);
	if (qp->state != IBV_QPS_ERR) {
		pthread_spin_unlock(&qp->rq_lock);
		pthread_spin_unlock(&qp->sq_lock);
		return;
	}
	/* Send queue: what finished keeps its status, the rest flushes. */
	while (qp->sq.head != qp->sq.tail) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, qp->sq.head);
		int started = (int32_t)(qp->sq.next - qp->sq.head) > 0;
		enum ibv_wc_status st = started && WQE_STATE(w) == WQE_DONE ?
						WQE_STATUS(w) :
						IBV_WC_WR_FLUSH_ERR;

		if (st != IBV_WC_SUCCESS || (w->send_flags & IBV_SEND_SIGNALED))
			push_send_cqe(qp, w, st);
		qp->sq.head++;
	}
	qp->sq.next = qp->sq.head;
	if (tr) {
		tr->timer_at = 0;
		tr->rnr_at = 0;
		tr->blocked = 0;
		/* The receive being filled first, then the queue. */
		if (tr->have_recv) {
			push_recv_flush(qp, tr->recv->wr_id);
			tr->have_recv = 0;
		}
		tr->rq_head = tr->rq_tail = 0;
		tr->ack_pending = 0;
	}
	if (!qp->srq) {
		while (qp->rq.head != qp->rq.tail) {
			struct sv_recv_wqe *r = sv_wq_slot(&qp->rq, qp->rq.head);

			push_recv_flush(qp, r->wr_id);
			qp->rq.head++;
		}
	} else if (tr && !tr->last_wqe_sent) {
		tr->last_wqe_sent = 1;
		last_wqe = 1;
	}
	pthread_spin_unlock(&qp->rq_lock);
	pthread_spin_unlock(&qp->sq_lock);
	/* IBTA 11.6.3: a QP of an SRQ in ERR reports its last WQE. */
	if (last_wqe)
		sv_eng_async(qp->eng, qp->qpx.qp_base.context,
			     IBV_EVENT_QP_LAST_WQE_REACHED, &qp->qpx.qp_base);
}

int sv_tr_init(struct sv_qp *qp)
{
	struct sv_tr *tr = calloc(1, sizeof(*tr));
	uint32_t max_sge = qp->srq ? qp->srq->rq.max_sge : qp->rq.max_sge;

	if (!tr)
		return -ENOMEM;
	tr->recv = calloc(1, sizeof(struct sv_recv_wqe) +
				     (max_sge ? max_sge : 1) * sizeof(struct ibv_sge));
	if (!tr->recv) {
		free(tr);
		return -ENOMEM;
	}
	tr->recv_cap = max_sge ? max_sge : 1;
	qp->tr = tr;
	sv_tr_reset(qp);
	return 0;
}

void sv_tr_free(struct sv_qp *qp)
{
	struct sv_tr *tr = tr_of(qp);

	if (!tr)
		return;
	free(tr->recv);
	free(tr);
	qp->tr = NULL;
}

void sv_tr_reset(struct sv_qp *qp)
{
	struct sv_tr *tr = tr_of(qp);
	struct sv_recv_wqe *recv = tr->recv;
	uint32_t cap = tr->recv_cap;

	memset(tr, 0, sizeof(*tr));
	tr->recv = recv;
	tr->recv_cap = cap;
	tr->mtu = qp->type == IBV_QPT_UD ? 4096 : sv_mtu_bytes(qp->attr.path_mtu);
	tr->retry_left = qp->attr.retry_cnt;
	tr->rnr_left = qp->attr.rnr_retry;
	tr->epsn = qp->attr.rq_psn & PSN_MASK;
	tr->psn = qp->attr.sq_psn & PSN_MASK;
	tr->last_ack_psn = (tr->psn - 1) & PSN_MASK;
}

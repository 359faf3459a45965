/* SPDX-License-Identifier: MIT */
/*
 * The completer (IBTA 9.7.5 requester side; rxe_comp.c's role): ACKs,
 * NAKs, READ responses and atomic ACKs retire send WQEs in order; the
 * retransmission and RNR timers live here; flushing and the per-QP
 * transport state too.  Directly executed WQEs (sv_direct.c) report
 * through the same entry points (sv_comp_acked, sv_comp_nak), so a NAK
 * means the same thing whichever way the request travelled.
 *
 * A WQE is retired (its CQE pushed, sq.head advanced) only when it and
 * every WQE before it are done, so send completions come in post order.
 * A WQE finished with an error moves the QP to ERR when it is retired and
 * everything after it is flushed (IBV_WC_WR_FLUSH_ERR).
 */
#include "engine_int.h"
#include "sv_comp_decide.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

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

/* Moves our QP to ERR.  Must hold sq_lock. */
static void set_err(struct sv_qp *qp)
{
	sv_lock_shm(&qp->shm->lock, SV_LOCK_RESP);
	if (qp->shm->state != IBV_QPS_RESET)
		sv_qshm_set_err(qp->shm);
	sv_unlock_shm(&qp->shm->lock);
}

static void push_send_cqe(struct sv_qp *qp, struct sv_send_wqe *w,
			  enum ibv_wc_status status)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = status;
	wc.opcode = (enum ibv_wc_opcode)sv_wrinfo(w->opcode)->wc;
	wc.qp_num = qp->qpx.qp_base.qp_num;
	if (sv_wrinfo(w->opcode)->flags & (SV_WR_ATOMIC | SV_WR_ATOMIC_WRITE))
		wc.byte_len = 8;
	else if (w->send_flags & IBV_SEND_INLINE)
		wc.byte_len = w->inline_len;
	else
		wc.byte_len = (uint32_t)sv_sge_total(w->sge, (int)w->num_sge);
	sv_cq_push(qp->scq, &wc, status != IBV_WC_SUCCESS);
}

void sv_comp_retire(struct sv_qp *qp)
{
	while (qp->sq.head != qp->sq.next) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, qp->sq.head);
		enum ibv_wc_status st;

		if (WQE_STATE(w) != WQE_DONE)
			break;
		st = sv_fault_wc(qp, WQE_STATUS(w)); /* eng_fault.c */
		if (st != IBV_WC_SUCCESS || (w->send_flags & IBV_SEND_SIGNALED))
			push_send_cqe(qp, w, st);
		qp->sq.head++;
		if (st != IBV_WC_SUCCESS) {
			set_err(qp);
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
	struct sv_tr *tr = tr_of(qp);

	/* An open WQE before sq.next, or packets of the one at sq.next (a
	 * long message stopped by the window) not acknowledged yet. */
	return oldest_open(qp) != qp->sq.next ||
	       (tr && qp->sq.next != qp->sq.tail &&
		psn_diff(tr->psn, (tr->last_ack_psn + 1) & PSN_MASK) > 0);
}

/* Everything sent before idx that only needed an ACK is acknowledged
 * (a later response implies it, 9.7.5.1.3). */
static void implicit_ack(struct sv_qp *qp, uint32_t idx)
{
	for (uint32_t i = qp->sq.head; i != idx; i++) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(w) == WQE_SENT && !sv_is_read_or_atomic(w->opcode))
			sv_wqe_done(w, IBV_WC_SUCCESS);
	}
}

static void progress_made(struct sv_qp *qp, struct sv_tr *tr)
{
	tr->probe_ns = 0;
	tr->retry_left = qp->attr.retry_cnt;
	tr->rnr_left = qp->attr.rnr_retry;
	tr->timer_at = outstanding(qp) ?
			       sv_now_ns() + sv_timeout_ns(qp->attr.timeout) :
			       0;
}

uint64_t sv_comp_arm_timer(struct sv_qp *qp, struct sv_tr *tr)
{
	if (tr->timer_at)
		return 0;
	tr->probe_ns = 0;
	tr->timer_at = sv_now_ns() + sv_timeout_ns(qp->attr.timeout);
	return tr->timer_at;
}

static void note_psn_hi(struct sv_tr *tr)
{
	/* Called on every completion and rewind, so psn_hi never falls half
	 * the PSN space behind psn, where the comparison would turn. */
	if (psn_diff(tr->psn, tr->psn_hi) > 0)
		tr->psn_hi = tr->psn;
}

/*
 * Resends from WQE idx (done local operations stay done), from PSN psn
 * when it falls inside a SEND/WRITE the responder partly has (its NAK's
 * expected PSN, or the last ACK + 1), and a READ from its first byte not
 * yet received: a long message on a lossy link resumes where the
 * responder stands, it does not start over.
 */
static void rewind_to(struct sv_qp *qp, struct sv_tr *tr, uint32_t idx,
		      uint32_t psn)
{
	struct sv_send_wqe *w = sv_wq_slot(&qp->sq, idx);
	uint32_t mtu = tr->mtu ? tr->mtu : 4096;

	note_psn_hi(tr);
	tr->psn = w->first_psn;
	if (w->opcode == IBV_WR_RDMA_READ && WQE_STATE(w) != WQE_NEW &&
	    w->bytes_sent) {
		/* Ask for the rest (the responder answers a repeated READ
		 * from its PSN, 9.7.5.1.2). */
		tr->psn = (w->first_psn + (uint32_t)(w->bytes_sent / mtu)) &
			  PSN_MASK;
		w->state = WQE_SENDING;
	} else if (!sv_is_read_or_atomic(w->opcode) && WQE_STATE(w) != WQE_NEW &&
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
	/* The WQE at sq.next may be half sent (blocked on a full ring or
	 * the window): it starts over too, or it would go on with PSNs from
	 * the rewind. */
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

/*
 * On the wire, after the rewind a NAK-sequence asked for: the responder
 * drops everything until the resend's first packet comes and says nothing
 * more meanwhile (one NAK per gap), so when that packet is lost too only
 * a timer finds out -- the QP's timeout, 67 ms at perftest's 14, for one
 * lost packet.  Here the resend goes again after SV_ENG_PROBE_NS, then
 * after twice that, and so on while the interval ends before the QP's own
 * timer (resend_probe), which keeps its deadline and its count of
 * retries: at worst the responder gets a duplicate and ACKs it again.
 */
static void probe_start(struct sv_qp *qp, struct sv_tr *tr)
{
	uint64_t now = sv_now_ns(), full = sv_timeout_ns(qp->attr.timeout);

	if (!tr->wlink || 2 * SV_ENG_PROBE_NS > full)
		return;
	tr->probe_end = tr->timer_at ? tr->timer_at : now + full;
	tr->probe_ns = SV_ENG_PROBE_NS;
	tr->timer_at = now + tr->probe_ns;
}

/* The probe's interval ended with no progress: the resend again, and the
 * next interval twice as long -- or the QP's own timer, if that comes
 * first. */
static void resend_probe(struct sv_qp *qp, struct sv_tr *tr, uint64_t now)
{
	rewind_to(qp, tr, oldest_open(qp), (tr->last_ack_psn + 1) & PSN_MASK);
	tr->probe_ns *= 2;
	if (now + tr->probe_ns >= tr->probe_end) {
		tr->probe_ns = 0;
		tr->timer_at = tr->probe_end;
	} else {
		tr->timer_at = now + tr->probe_ns;
	}
}

static void fail_at(struct sv_qp *qp, struct sv_tr *tr, uint32_t idx,
		    enum ibv_wc_status st)
{
	struct sv_send_wqe *w = sv_wq_slot(&qp->sq, idx);

	implicit_ack(qp, idx);
	sv_wqe_done(w, st);
	if (qp->sq.next == idx)
		qp->sq.next++;
	tr->stopped = 1;
	tr->timer_at = 0;
	tr->probe_ns = 0;
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

/*
 * A response names a PSN we sent: one before the highest next PSN the
 * requester has reached (tr->psn, or more before a rewind lowered it: the
 * responder may still ACK what it got of the first transmission).
 * Anything else (a forged ACK a few million PSNs ahead) acknowledges
 * nothing outstanding and is dropped silently, as rxe's completer drops
 * it, so an off-path sender cannot complete work the peer never got.
 */
static int psn_sent(struct sv_tr *tr, uint32_t psn)
{
	note_psn_hi(tr);
	return sv_comp_psn_sent(psn, tr->psn_hi);
}

static void ack_upto(struct sv_qp *qp, struct sv_tr *tr, uint32_t psn)
{
	int progressed = 0;

	if (!psn_sent(tr, psn))
		return;

	for (uint32_t i = qp->sq.head; i != qp->sq.next; i++) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(w) == WQE_DONE)
			continue;
		if (WQE_STATE(w) != WQE_SENT || psn_diff(psn, w->last_psn) < 0)
			break;
		if (sv_is_read_or_atomic(w->opcode))
			break; /* done by its response only */
		sv_wqe_done(w, IBV_WC_SUCCESS);
		progressed = 1;
	}
	if (progressed || psn_diff(psn, tr->last_ack_psn) > 0) {
		if (psn_diff(psn, tr->last_ack_psn) > 0)
			tr->last_ack_psn = psn;
		progress_made(qp, tr);
	}
}

void sv_comp_acked(struct sv_qp *qp, struct sv_tr *tr, uint32_t idx)
{
	struct sv_send_wqe *w = sv_wq_slot(&qp->sq, idx);

	implicit_ack(qp, idx);
	sv_wqe_done(w, IBV_WC_SUCCESS);
	note_psn_hi(tr);
	if (psn_diff(w->last_psn, tr->last_ack_psn) > 0)
		tr->last_ack_psn = w->last_psn;
	progress_made(qp, tr);
}

static void read_resp(struct sv_qp *qp, struct sv_tr *tr,
		      const struct sv_pkt *pkt)
{
	uint32_t idx, mtu = tr->mtu ? tr->mtu : 4096;
	struct sv_send_wqe *w;
	struct sv_seg dsegs[SV_MAX_SEGS], sseg;
	struct sv_data dst, src;
	uint64_t off, total;
	int err;

	if (!find_wqe(qp, pkt->psn, &idx))
		return; /* duplicate or unexpected: ignored */
	w = sv_wq_slot(&qp->sq, idx);
	if (w->opcode == IBV_WR_ATOMIC_WRITE && !pkt->paylen) {
		/* Its answer, a READ response of no data: an ACK to rxe's
		 * completer, and to ours. */
		ack_upto(qp, tr, pkt->psn);
		return;
	}
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
	total = sv_sge_total(w->sge, (int)w->num_sge);
	if (off + pkt->paylen > total) {
		fail_at(qp, tr, idx, IBV_WC_LOC_LEN_ERR);
		return;
	}
	/* A response carries one path MTU of the READ, the last one what is
	 * left: the offsets above count on it.  A shorter one is malformed
	 * and dropped, as a corrupt packet is (the READ is asked again from
	 * where its data stops, as after a lost response).  Taken, a short
	 * last response completed the READ with success without the bytes
	 * after it, and a short first or middle one put bytes_sent off the
	 * MTU grid, where no later response fitted (test_wire_fuzz). */
	if (pkt->paylen != (total - off < mtu ? total - off : mtu))
		return;
	err = sv_sge_resolve(qp->eng, w->sge, (int)w->num_sge, qp->pd_id,
			     IBV_ACCESS_LOCAL_WRITE, off, pkt->paylen, &dst,
			     dsegs, SV_MAX_SEGS);
	if (!err) {
		sv_data_local(&src, &sseg, pkt->payload, pkt->paylen);
		if (sv_xfer(&dst, 0, &src, 0, pkt->paylen))
			err = SV_KERR_ACCESS;
	}
	if (err) {
		fail_at(qp, tr, idx,
			err < 0 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR);
		return;
	}
	w->bytes_sent = off + pkt->paylen;
	if (pkt->psn == w->last_psn)
		sv_wqe_done(w, IBV_WC_SUCCESS);
	/* Every response in order is progress (as rxe's completer): it
	 * acknowledges its PSN, so the send window opens for the request
	 * that resumes this READ after a lost response (else a gap 128
	 * packets in would block it forever), and the retry budget and the
	 * timer start again, so a long READ over a lossy link, resumed gap
	 * after gap, is not given up on while its data keeps coming. */
	if (psn_diff(pkt->psn, tr->last_ack_psn) > 0)
		tr->last_ack_psn = pkt->psn;
	progress_made(qp, tr);
}

enum ibv_wc_status sv_comp_atomic_result(struct sv_qp *qp,
					 struct sv_send_wqe *w, uint64_t v)
{
	struct sv_seg dseg, sseg;
	struct sv_data dst, src;
	int err = sv_sge_resolve(qp->eng, w->sge, 1, qp->pd_id,
				 IBV_ACCESS_LOCAL_WRITE, 0, 8, &dst, &dseg, 1);

	if (!err) {
		sv_data_local(&src, &sseg, &v, 8);
		if (sv_xfer(&dst, 0, &src, 0, 8))
			err = SV_KERR_ACCESS;
	}
	return !err ? IBV_WC_SUCCESS :
	       err < 0 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
}

static void atomic_resp(struct sv_qp *qp, struct sv_tr *tr,
			const struct sv_pkt *pkt)
{
	struct sv_send_wqe *w;
	enum ibv_wc_status st;
	uint32_t idx;

	if (!find_wqe(qp, pkt->psn, &idx))
		return;
	w = sv_wq_slot(&qp->sq, idx);
	if (!(sv_wrinfo(w->opcode)->flags & SV_WR_ATOMIC))
		return;
	implicit_ack(qp, idx);
	st = sv_comp_atomic_result(qp, w, pkt->orig);
	if (st != IBV_WC_SUCCESS) {
		fail_at(qp, tr, idx, st);
		return;
	}
	sv_wqe_done(w, IBV_WC_SUCCESS);
	tr->last_ack_psn = pkt->psn;
	progress_made(qp, tr);
}

void sv_comp_nak(struct sv_qp *qp, struct sv_tr *tr, uint32_t idx,
		 uint8_t syn, uint32_t psn)
{
	switch (sv_comp_nak_step(syn, psn, tr->last_ack_psn, tr->retry_left,
				 tr->rnr_left, qp->attr.rnr_retry)) {
	case SV_NAK_RNR_EXCEEDED:
		implicit_ack(qp, idx);
		fail_at(qp, tr, idx, IBV_WC_RNR_RETRY_EXC_ERR);
		return;
	case SV_NAK_RNR_WAIT:
		implicit_ack(qp, idx);
		if (qp->attr.rnr_retry != 7)
			tr->rnr_left--;
		rewind_to(qp, tr, idx, psn);
		tr->blocked = 0;
		tr->rnr_at = sv_now_ns() + sv_rnr_ns(syn & 0x1f);
		tr->timer_at = 0;
		tr->probe_ns = 0;
		return;
	case SV_NAK_REWIND_PROGRESS:
		implicit_ack(qp, idx);
		tr->last_ack_psn = (psn - 1) & PSN_MASK;
		progress_made(qp, tr);
		rewind_to(qp, tr, idx, psn);
		probe_start(qp, tr);
		return;
	case SV_NAK_REWIND_RETRY:
		implicit_ack(qp, idx);
		tr->retry_left--;
		rewind_to(qp, tr, idx, psn);
		probe_start(qp, tr);
		return;
	case SV_NAK_RETRY_EXCEEDED:
		implicit_ack(qp, idx);
		fail_at(qp, tr, idx, IBV_WC_RETRY_EXC_ERR);
		return;
	case SV_NAK_FAIL_INV_REQ:
		fail_at(qp, tr, idx, IBV_WC_REM_INV_REQ_ERR);
		return;
	case SV_NAK_FAIL_ACCESS:
		fail_at(qp, tr, idx, IBV_WC_REM_ACCESS_ERR);
		return;
	case SV_NAK_FAIL_OP:
		fail_at(qp, tr, idx, IBV_WC_REM_OP_ERR);
		return;
	}
}

static void nak(struct sv_qp *qp, struct sv_tr *tr, const struct sv_pkt *pkt)
{
	uint32_t idx;

	if (!find_wqe(qp, pkt->psn, &idx)) {
		struct sv_send_wqe *cur = sv_wq_slot(&qp->sq, qp->sq.next);

		/* The WQE being sent (blocked on a full ring: at sq.next,
		 * its last PSN not known yet).  A NAK of any other PSN names
		 * no request outstanding: ignored, as rxe's completer does,
		 * or one packet that knows only the QPN could fail a live
		 * connection (a NAK) or stall it (RNR NAKs). */
		if (qp->sq.next == qp->sq.tail || WQE_STATE(cur) != WQE_SENDING ||
		    psn_diff(pkt->psn, cur->first_psn) < 0 ||
		    !psn_sent(tr, pkt->psn))
			return;
		idx = qp->sq.next;
	}
	sv_comp_nak(qp, tr, idx, pkt->syn, pkt->psn);
}

int sv_comp_packet(struct sv_qp *qp, const struct sv_pkt *pkt)
{
	struct sv_tr *tr = tr_of(qp);
	uint64_t rnr, timer;
	enum ibv_qp_state st;
	int flush = 0, kick = 0;

	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	st = sv_qp_state(qp);
	if (!sv_qpt_rc(qp->type) || !tr ||
	    (st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE)) {
		sv_unlock_spin(&qp->sq_lock);
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
	if (sv_qp_state(qp) == IBV_QPS_ERR)
		flush = 1;
	else if ((qp->sq.next != qp->sq.tail &&
		  /* a held stream waits for its batch (sv_path.h) */
		  !__atomic_load_n(&tr->path.held, __ATOMIC_RELAXED)) ||
		 tr->blocked)
		kick = !tr->rnr_at;
	rnr = tr->rnr_at;
	timer = tr->timer_at;
	sv_unlock_spin(&qp->sq_lock);
	if (rnr)
		sv_eng_deadline(qp->eng, rnr);
	else if (timer)
		sv_eng_deadline(qp->eng, timer);
	if (kick)
		sv_req_run(qp);
	return flush;
}

/* Records from the link's peer wait unread in our inbound ring: an ACK
 * may be among them, so a timeout now would be ours, not the peer's. */
static int inbound_pending(struct sv_engine *eng, uint32_t peer)
{
	unsigned nin = atomic_load_explicit(&eng->nin, memory_order_acquire);

	for (unsigned i = 0; i < nin; i++) {
		struct sv_inring *in = eng->in[i];

		if (in->peer_id == peer && !in->broken && !in->box &&
		    atomic_load_explicit(&in->rx.h->tail, memory_order_acquire) !=
			    in->rx.head)
			return 1;
	}
	return 0;
}

/* Datagrams wait unread on the namespace's RoCE port: whoever reads it is
 * behind (a busy machine), and an answer of the peer's may be among them.
 * Not a lost packet yet, as a record waiting in a ring is not. */
static int wire_unread(struct sv_engine *eng)
{
	int fd = __atomic_load_n(&eng->wire_sock, __ATOMIC_ACQUIRE), n = 0;

	return fd >= 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

int sv_comp_timers(struct sv_qp *qp, uint64_t now, uint64_t *next)
{
	struct sv_tr *tr = tr_of(qp);
	enum ibv_qp_state st;
	int flush = 0;
	uint64_t t = __atomic_load_n(&tr->timer_at, __ATOMIC_RELAXED),
		 r = __atomic_load_n(&tr->rnr_at, __ATOMIC_RELAXED);

	/* Nothing to look at -- no timer, no RNR wait, not in ERR (packets
	 * in flight always have a timer): leave the lock alone.  The
	 * application may hold it through a direct copy of megabytes, and
	 * this scan spun on it for a third of a CPU beside the copy.  A
	 * timer armed after this look rings us (sv_eng_deadline). */
	if (!t && !r && sv_qp_state(qp) != IBV_QPS_ERR)
		return 0;
	/* Timers not due: a look only if nobody holds the lock (whoever
	 * does works on the QP; a dead peer is seen at a later scan).  In a
	 * stream the timer is always armed, and the two threads' scans spun
	 * and yielded on the lock the other held, tens of thousands of times
	 * a second between two hosts. */
	if ((!t || now < t) && (!r || now < r) &&
	    sv_qp_state(qp) != IBV_QPS_ERR) {
		if (sv_trylock_spin(&qp->sq_lock, SV_LOCK_SQ)) {
			if (t && (!*next || t < *next))
				*next = t;
			if (r && (!*next || r < *next))
				*next = r;
			return 0;
		}
	} else {
		sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	}
	st = sv_qp_state(qp);
	if (sv_qpt_rc(qp->type) && outstanding(qp) &&
	    (st == IBV_QPS_RTS || st == IBV_QPS_SQD)) {
		struct sv_link *l = tr->link;
		/* An XRC TGT QP outlives its server's process when another
		 * process holds it: the daemon names the new server
		 * (eng_xrc.c relinks us), so a dead link times out and
		 * retries as a lost packet does. */
		int dead = l && atomic_load(&l->dead),
		    moves = dead && qp->type == IBV_QPT_XRC_SEND && !l->w;

		if (dead && !moves) {
			/* The peer's process is gone: no retry can help --
			 * unless its last answers wait in our ring (an
			 * application that exits on its last completion may
			 * have ACKed our last SEND just before): read them
			 * first, as a NIC has them on the wire already. */
			if (!l->w && inbound_pending(qp->eng, l->peer_id)) {
				uint64_t soon = now + sv_tune.nap_ns;

				if (!*next || soon < *next)
					*next = soon;
			} else {
				sv_comp_fail(qp, IBV_WC_RETRY_EXC_ERR);
			}
		} else if (tr->timer_at && now >= tr->timer_at) {
			/* (A wire link has no ring: whatever the peer did
			 * not answer is lost, or its answer is in our
			 * gateway ring, peer 0.) */
			uint64_t head = l && !l->w ? atomic_load_explicit(
						    &l->tx.h->head,
						    memory_order_acquire) :
					    0;

			if (l && !dead && (head < tr->ring_mark ||
				  inbound_pending(qp->eng, l->peer_id) ||
				  (l->w && wire_unread(qp->eng)))) {
				/* Still in a ring: the peer is alive but
				 * slow, or its answer waits for us to read
				 * it (in a ring or on the port).  Not a lost
				 * packet; wait again (a probe's interval, short
				 * of the QP's own deadline). */
				tr->timer_at = now + (tr->probe_ns ? tr->probe_ns :
						      sv_timeout_ns(qp->attr.timeout));
				if (tr->probe_ns && tr->timer_at >= tr->probe_end) {
					tr->timer_at = tr->probe_end;
					tr->probe_ns = 0;
				}
			} else if (tr->probe_ns) {
				resend_probe(qp, tr, now);
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
	if (sv_qp_state(qp) == IBV_QPS_ERR && qp->sq.head != qp->sq.tail)
		flush = 1;
	if (tr->timer_at && (!*next || tr->timer_at < *next))
		*next = tr->timer_at;
	if (tr->rnr_at && (!*next || tr->rnr_at < *next))
		*next = tr->rnr_at;
	sv_unlock_spin(&qp->sq_lock);
	return flush;
}

void sv_engine_flush(struct sv_qp *qp)
{
	struct sv_tr *tr = tr_of(qp);
	struct sv_rtgt t;

	/* A NAK the responder queued when it moved the QP to ERR goes out
	 * first: the requester must hear why (as a NIC NAKs, then errors). */
	sv_resp_flush(qp);
	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	if (sv_qp_state(qp) != IBV_QPS_ERR) {
		sv_unlock_spin(&qp->sq_lock);
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
		tr->probe_ns = 0;
		tr->rnr_at = 0;
		tr->blocked = 0;
	}
	/* The receive side: the receive being filled, then the queue. */
	sv_rtgt_own(&t, qp);
	sv_lock_shm(&qp->shm->lock, SV_LOCK_RESP);
	/* The responder's queue of answers is the responder lock's: another
	 * thread may be sending it (sv_resp_flush).  Emptied without the
	 * lock, that sender's next step took its head past the tail and it
	 * sent 2^32 answers, holding the lock (test_wire_fuzz hung so). */
	if (tr) {
		SV_LOCK_HELD(&qp->shm->lock);
		tr->rq_head = tr->rq_tail = 0;
		tr->ack_pending = 0;
	}
	sv_resp_flush_rq(qp->eng, &t);
	sv_unlock_shm(&qp->shm->lock);
	sv_unlock_spin(&qp->sq_lock);
	/* LAST_WQE_REACHED of an SRQ QP (IBTA 11.6.3), left in the events:
	 * the progress scan raises it. */
	if (atomic_load(&qp->shm->events))
		sv_eng_want_work(qp->eng);
}

int sv_tr_init(struct sv_qp *qp)
{
	struct sv_tr *tr = calloc(1, sizeof(*tr));

	if (!tr)
		return -ENOMEM;
	qp->tr = tr;
	sv_tr_reset(qp);
	return 0;
}

void sv_tr_free(struct sv_qp *qp)
{
	free(qp->tr);
	qp->tr = NULL;
}

void sv_tr_reset(struct sv_qp *qp)
{
	struct sv_tr *tr = tr_of(qp);

	if (!tr)
		return;
	memset(tr, 0, sizeof(*tr));
	tr->mtu = qp->type == IBV_QPT_UD ? sv_eng_port_mtu(qp->eng) :
					  sv_mtu_bytes(qp->attr.path_mtu);
	tr->retry_left = qp->attr.retry_cnt;
	tr->rnr_left = qp->attr.rnr_retry;
	tr->psn = tr->psn_hi = qp->attr.sq_psn & PSN_MASK;
	tr->last_ack_psn = (tr->psn - 1) & PSN_MASK;
}

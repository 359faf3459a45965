/* SPDX-License-Identifier: MIT */
/*
 * Direct execution: the initiator places the data itself, as a NIC's DMA
 * does (engine.c "Direct execution").  A send WQE becomes one whole
 * message -- an *_ONLY request -- that the initiator hands to the target
 * QP's responder (sv_resp_direct) on the target's shared block, with the
 * payload described as ranges of the initiator's memory: the responder
 * checks everything a responder checks and moves the bytes with one CMA
 * call (or memcpy when the target is in this process).  The outcome comes
 * back at once, so the WQE completes without an ACK:
 *
 *   ACK   done (an atomic's original value is written locally first)
 *   NAK   RC: the completer's NAK handling (remote access, invalid
 *         request, operational errors), the target is in ERR already
 *   RNR   RC: the RNR timer and rnr_retry, as for an RNR NAK; UC/UD:
 *         the message is lost
 *   DROP  the target did not take it (not ready, Q_Key, gone): RC waits
 *         for the transport timer and retries, as after a lost packet;
 *         UC/UD: lost, the send completes
 *   LOCAL our own buffer faulted: IBV_WC_LOC_PROT_ERR
 *
 * Whether a WQE comes here at all is sv_path.c's choice; what became of
 * it is enum sv_direct_out (engine_int.h): done, placed by the completer,
 * later (an earlier message waits for its retry, or a big one waits for
 * the ACK of our packets still in the ring) or packets (the target cannot
 * take it directly now).
 *
 * Order.  One requester runs a QP's WQEs in order, and each is complete
 * when the call returns, so a later SEND never overtakes an earlier
 * WRITE.  After a DROP on RC nothing newer starts until the retry: the
 * dropped message must still land first.
 */
#include "engine_int.h"

#include <errno.h>
#include <string.h>

/* Our QP qpn, pinned against destruction (busy) while we execute on it.
 * Must hold sq_lock: qp_lock's read side taken under it, which the order
 * allows (sv_lock.h: readers first, and no writer of qp_lock waits for an
 * sq_lock or for a pin). */
static struct sv_qp *local_pin(struct sv_engine *eng, uint32_t qpn)
{
	struct sv_qp *q;

	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	q = sv_eng_qp(eng, qpn);
	if (q)
		atomic_fetch_add(&q->busy, 1);
	sv_unlock_rw(&eng->qp_lock);
	return q;
}

/* Every packet we put on link (published or not yet) was consumed. */
static int ring_idle(struct sv_link *link)
{
	return !link || link->tx.pending == atomic_load_explicit(&link->tx.h->head,
								memory_order_acquire);
}

/* Every range of d in another process can be read (one byte each). */
static int remote_src_ok(const struct sv_data *d)
{
	for (int i = 0; i < d->nseg; i++) {
		struct sv_seg one = d->seg[i], bseg;
		struct sv_data src = { .seg = &one, .nseg = 1, .len = 1 }, dst;
		uint8_t b;

		if (one.m.ptr || !one.len)
			continue;
		one.len = 1;
		sv_data_local(&dst, &bseg, &b, 1);
		if (sv_xfer(&dst, 0, &src, 0, 1))
			return 0;
	}
	return 1;
}

/* A WQE the target accepted, completed before the target's receive CQE
 * is pushed (sv_resp_res.before_cqe): as on a NIC, where the ACK comes
 * back (UC, UD: the packet leaves) before the target's application sees
 * the message, our CQE is there before its reply can be.  Only when every
 * WQE before it is retired or done well: its CQE can then be pushed at
 * once, and nothing moves the QP to ERR under the target's lock. */
struct early {
	struct sv_qp *qp;
	struct sv_tr *tr;
	uint32_t idx;
	int done;
};

/* Every WQE before idx is retired or done well. */
static int done_well_before(struct sv_qp *qp, uint32_t idx)
{
	for (uint32_t i = qp->sq.head; i != idx; i++) {
		struct sv_send_wqe *p = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(p) != WQE_DONE || WQE_STATUS(p) != IBV_WC_SUCCESS)
			return 0;
	}
	return 1;
}

static void complete_early(void *arg)
{
	struct early *e = arg;
	struct sv_qp *qp = e->qp;
	struct sv_send_wqe *w = sv_wq_slot(&qp->sq, e->idx);

	if (!done_well_before(qp, e->idx))
		return;
	if (sv_qpt_rc(qp->type)) {
		w->state = WQE_SENT;
		sv_comp_acked(qp, e->tr, e->idx);
	} else {
		sv_wqe_done(w, IBV_WC_SUCCESS);
	}
	qp->sq.next = e->idx + 1;
	sv_comp_retire(qp);
	e->done = 1;
}

/* A directly executed RC message takes the PSN its target expects, which
 * is ours when both ends were set up alike (sq_psn of one = rq_psn of the
 * other) and nothing is in flight.  Where they differ (a mistake in the
 * setup) the message goes as packets, whose PSN the target checks as a
 * NIC's would (a sequence NAK, then RETRY_EXC_ERR), so the mistake shows
 * the same whichever way a message would have gone. */
static int psn_agrees(const struct sv_tr *tr, const struct sv_qp_shm *q)
{
	uint32_t st = __atomic_load_n(&q->state, __ATOMIC_RELAXED);

	/* A target that does not receive yet (its RTR still to come) has no
	 * PSN to agree with: its responder drops the message either way. */
	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD &&
	    st != IBV_QPS_SQE)
		return 1;
	return __atomic_load_n(&q->epsn, __ATOMIC_RELAXED) == tr->psn;
}

/*
 * The target of w, pinned: our own QP (*lq, busy held) or the peer's
 * view (*peer; UD: a reference the caller puts).  SV_DIRECT_DONE when
 * found (t filled), else why not: the destination cannot take it
 * directly now (packets), or w must wait behind our packets.
 */
static enum sv_direct_out find_target(struct sv_qp *qp, struct sv_tr *tr,
				      const struct sv_send_wqe *w,
				      struct sv_rtgt *t, struct sv_qp **lq,
				      struct sv_peer **peerp)
{
	struct sv_engine *eng = qp->eng;
	int ud = qp->type == IBV_QPT_UD, rc = sv_qpt_rc(qp->type);
	uint32_t dqpn = ud ? w->remote_qpn : qp->dest_qpn;
	struct sv_peer *peer;

	*lq = NULL;
	*peerp = NULL;
	/* A packet to this destination may still sit in a ring: this
	 * message must not overtake it (UC and UD have no ACK that says it
	 * landed; RC waits for its ACK below, and for the ring too). */
	if (!ring_idle(eng->loop))
		return SV_DIRECT_PACKETS;
	/* (A target that takes a packet at once: sv_path_choose asked for
	 * RC and UC; a UD target once it is looked up, below.) */
	*lq = local_pin(eng, dqpn);
	if (*lq) {
		sv_rtgt_own(t, *lq);
		return SV_DIRECT_DONE;
	}
	peer = ud ? sv_peer_find(eng, dqpn) : tr->peer;
	if (!peer)
		return SV_DIRECT_PACKETS;
	if (atomic_load_explicit(&peer->q->h.dead, memory_order_acquire)) {
		/* Destroyed (its process may be gone): nobody to answer, as
		 * on a fabric. */
		goto packets;
	}
	if (!ring_idle(peer->link)) {
		/* Behind packets of ours that wait for their ACK, a big RC
		 * message waits too (the completer runs us again) rather
		 * than join them: as packets it would keep the ring busy for
		 * the next one, and a stream of big messages that once went
		 * as packets stayed packets (two copies each, not one). */
		if (rc && sv_wqe_bytes(w) > sv_tune.direct_small &&
		    sv_path_retry_pending(qp))
			return SV_DIRECT_LATER; /* (RC: no reference taken) */
		goto packets;
	}
	if (ud && sv_path_takes_packet(peer->link, w)) {
		/* Its application (or thread) is draining right now: a
		 * packet in shared memory costs no system call and it will
		 * take it at once. */
		goto packets;
	}
	if (peer->link && atomic_load(&peer->link->dead)) {
		/* Its process is gone: packets find out as a fabric would
		 * (RC: RETRY_EXC_ERR). */
		goto packets;
	}
	*t = (struct sv_rtgt){ .q = peer->q, .rcq = peer->rcq,
			       .srq = peer->srq, .peer = peer };
	*peerp = peer;
	return SV_DIRECT_DONE;
packets:
	if (ud)
		sv_peer_put(peer);
	return SV_DIRECT_PACKETS;
}

/* The whole message of w as the *_ONLY request its packets would carry
 * (len bytes; UD: with the GRH written into grh). */
static void direct_pkt(struct sv_qp *qp, const struct sv_send_wqe *w,
		       uint64_t len, uint8_t *grh, struct sv_pkt *pkt)
{
	int ud = qp->type == IBV_QPT_UD;
	uint32_t op = w->opcode;
	uint8_t opc = sv_req_opcode(op, 1, 1) | sv_opc_transport(qp->type);

	memset(pkt, 0, sizeof(*pkt));
	pkt->opcode = opc;
	pkt->flags = sv_opcodes[opc].flags;
	pkt->qpn = ud ? w->remote_qpn : qp->dest_qpn;
	pkt->srqn = w->xrc_srqn;
	pkt->se = (w->send_flags & IBV_SEND_SOLICITED) &&
		  (pkt->flags & (OP_SEND | OP_IMM));
	pkt->ackreq = 1;
	pkt->imm = w->imm_data;
	pkt->inv_rkey = w->invalidate_rkey;
	if (pkt->flags & (OP_RETH | OP_ATMETH)) {
		pkt->va = w->remote_addr;
		pkt->rkey = w->rkey;
		pkt->dma_len = (uint32_t)len;
	}
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		pkt->comp = w->compare_add;
		pkt->swap = w->swap;
	} else if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		pkt->swap = w->compare_add;
	}
	if (ud) {
		pkt->qkey = w->remote_qkey;
		pkt->src_qpn = qp->qpx.qp_base.qp_num;
		sv_ud_grh(w, sv_op_hdr_len(pkt->flags) + (uint32_t)len, grh);
		pkt->grh = grh;
	}
}

/* The initiator's side of w's payload (SEND/WRITE/ATOMIC WRITE: the
 * source; READ: the destination) into data.  Nonzero when w ended
 * there with a local error. */
static int direct_payload(struct sv_qp *qp, struct sv_send_wqe *w,
			  uint64_t len, struct sv_data *data,
			  struct sv_seg *segs)
{
	uint32_t op = w->opcode;
	int err;

	if (sv_is_read_or_atomic(op) && op != IBV_WR_RDMA_READ) {
		data->nseg = 0;
		data->len = 0;
		return 0;
	}
	if (op == IBV_WR_ATOMIC_WRITE) {
		/* Its 8 bytes, in the WQE (sv_req_start put them there). */
		sv_data_local(data, segs, &w->compare_add, 8);
		return 0;
	}
	if (w->send_flags & IBV_SEND_INLINE) {
		sv_data_local(data, segs, sv_send_wqe_inline(&qp->sq, w),
			      w->inline_len);
	} else {
		err = sv_sge_resolve(qp->eng, w->sge, (int)w->num_sge,
				     qp->pd_id,
				     op == IBV_WR_RDMA_READ ?
					     IBV_ACCESS_LOCAL_WRITE : 0,
				     0, len, data, segs, SV_MAX_SEGS);
		if (err) {
			sv_wqe_done(w, err < 0 ? IBV_WC_LOC_LEN_ERR :
						 IBV_WC_LOC_PROT_ERR);
			return 1;
		}
	}
	/* A NIC reads the payload before anything leaves: memory of another
	 * process behind our lkey that cannot be read is our local error,
	 * before the target sees the message (and before an RNR). */
	if (!sv_is_read_or_atomic(op) && !remote_src_ok(data)) {
		sv_wqe_done(w, IBV_WC_LOC_PROT_ERR);
		return 1;
	}
	return 0;
}

/* What the target's responder said about w (at idx), as the completer
 * takes an ACK or a NAK. */
static enum sv_direct_out outcome(struct sv_qp *qp, struct sv_tr *tr,
				  struct sv_send_wqe *w, uint32_t idx,
				  const struct sv_resp_res *res, int early_done)
{
	int rc = sv_qpt_rc(qp->type);
	uint32_t op = w->opcode;

	switch (res->kind) {
	case SV_ROUT_ACK:
		if (early_done)
			break; /* completed (and retired) already */
		if (sv_is_read_or_atomic(op) && op != IBV_WR_RDMA_READ) {
			enum ibv_wc_status st = sv_comp_atomic_result(qp, w, res->orig);

			if (st != IBV_WC_SUCCESS) {
				sv_wqe_done(w, st);
				break;
			}
		}
		if (rc)
			sv_comp_acked(qp, tr, idx);
		else
			sv_wqe_done(w, IBV_WC_SUCCESS);
		break;
	case SV_ROUT_NAK:
	case SV_ROUT_RNR:
		if (rc) {
			w->state = WQE_SENT;
			sv_comp_nak(qp, tr, idx, res->syn, w->first_psn);
			return SV_DIRECT_PLACED;
		}
		sv_wqe_done(w, IBV_WC_SUCCESS); /* UC/UD: lost */
		break;
	case SV_ROUT_DROP:
		if (rc)
			w->state = WQE_SENT; /* the timer retries it */
		else
			sv_wqe_done(w, IBV_WC_SUCCESS);
		break;
	case SV_ROUT_LOCAL:
		sv_wqe_done(w, IBV_WC_LOC_PROT_ERR);
		break;
	}
	return SV_DIRECT_DONE;
}

enum sv_direct_out sv_direct_wqe(struct sv_qp *qp, struct sv_tr *tr,
				 struct sv_send_wqe *w)
{
	int ud = qp->type == IBV_QPT_UD, rc = sv_qpt_rc(qp->type);
	uint32_t op = w->opcode, mtu = tr->mtu ? tr->mtu : 4096, npk;
	uint32_t idx = qp->sq.next;
	struct sv_seg segs[SV_MAX_SEGS];
	struct sv_data data = { .seg = segs };
	struct early early = { .qp = qp, .tr = tr, .idx = qp->sq.next };
	struct sv_resp_res res = { .before_cqe = complete_early,
				   .arg = &early };
	struct sv_peer *peer;
	struct sv_qp *lq;
	struct sv_rtgt t;
	struct sv_pkt pkt;
	uint8_t grh[SV_GRH_BYTES];
	uint64_t len;
	enum sv_direct_out out;

	out = find_target(qp, tr, w, &t, &lq, &peer);
	if (out != SV_DIRECT_DONE)
		return out;
	/* XRC: the target's receive side is the SRQ the WQE names (the
	 * daemon is asked the first time: a leaf, allowed under sq_lock). */
	if (qp->type == IBV_QPT_XRC_SEND)
		sv_rtgt_set_xsrq(&t, sv_xsrq_get(qp->eng, w->xrc_srqn));
	if (rc && sv_path_retry_pending(qp)) {
		/* Packets, or a message the target dropped, still wait for
		 * their answer: they land first. */
		out = SV_DIRECT_LATER;
		goto out;
	}
	if (rc && !psn_agrees(tr, t.q)) {
		out = SV_DIRECT_PACKETS;
		goto out;
	}
	if (sv_req_start(qp, tr, w, &len, !sv_is_read_or_atomic(op)))
		goto out; /* finished with a local error */
	direct_pkt(qp, w, len, grh, &pkt);
	if (direct_payload(qp, w, len, &data, segs))
		goto out;

	npk = sv_is_read_or_atomic(op) && op != IBV_WR_RDMA_READ ? 1 :
	      len ? (uint32_t)((len + mtu - 1) / mtu) : 1;
	w->first_psn = tr->psn;
	w->last_psn = (tr->psn + npk - 1) & PSN_MASK;
	w->bytes_sent = len;
	if (!ud)
		tr->psn = (tr->psn + npk) & PSN_MASK;

	res.npsn = npk;
	sv_resp_direct(qp->eng, &t, &pkt, &data, &res);
	if (peer)
		sv_path_after_direct(peer->link, op, len);
	out = outcome(qp, tr, w, idx, &res, early.done);
out:
	if (lq)
		atomic_fetch_sub(&lq->busy, 1);
	if (ud)
		sv_peer_put(peer);
	sv_xsrq_put(t.x);
	return out;
}

/* The first k WQEs of a batch at sq.next (ws: their messages) went
 * through: each takes its PSNs, RC's wait for nothing more (as acked),
 * UC's are done; sq.next moves past them. */
static void batch_went(struct sv_qp *qp, struct sv_tr *tr,
		       const struct sv_drw *ws, int k, uint32_t mtu)
{
	for (int i = 0; i < k; i++) {
		uint32_t idx = qp->sq.next + (uint32_t)i;
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, idx);
		uint32_t npk = (uint32_t)((ws[i].len + mtu - 1) / mtu);

		w->bytes_sent = ws[i].len;
		w->first_psn = tr->psn;
		w->last_psn = (tr->psn + npk - 1) & PSN_MASK;
		tr->psn = (tr->psn + npk) & PSN_MASK;
		if (sv_qpt_rc(qp->type)) {
			w->state = WQE_SENT;
			sv_comp_acked(qp, tr, idx);
		} else {
			sv_wqe_done(w, IBV_WC_SUCCESS);
		}
	}
	qp->sq.next += (uint32_t)k;
}

/* A batch of SENDs, from the target's lock once their data is placed
 * (sv_resp_send_batch's sent): the WQEs complete, and their CQEs are
 * pushed before the target's receive CQEs when every WQE before them is
 * retired or done well, as complete_early does for one. */
struct sends_went {
	struct sv_qp *qp;
	struct sv_tr *tr;
	const struct sv_drw *ws;
	uint32_t mtu;
};

static void sends_went(void *arg, int k)
{
	struct sends_went *s = arg;
	struct sv_qp *qp = s->qp;
	int clean = done_well_before(qp, qp->sq.next);

	batch_went(qp, s->tr, s->ws, k, s->mtu);
	if (clean)
		sv_comp_retire(qp);
}

/*
 * The RDMA WRITEs (no immediate), the RDMA READs or the SENDs (with
 * immediate or none) waiting at sq.next, one opcode, executed as one
 * batch (sv_resp_rw_batch, sv_resp_send_batch: one transfer for all of
 * them), as sv_path_choose decided: RC/UC reaching the peer directly, two
 * WQEs or more queued, no capture, no retry pending.  Must hold sq_lock.
 * Returns how many it completed and moves sq.next past them; 0 when
 * there is no run of two or more, or the target would refuse one: the
 * caller then goes one by one.  A READ's ordering rules hold: each is
 * complete before the next starts, so no fence and no max_rd_atomic can
 * be waiting.
 */
int sv_direct_batch(struct sv_qp *qp, struct sv_tr *tr)
{
	struct sv_engine *eng = qp->eng;
	struct sv_drw ws[SV_DIRECT_BATCH];
	struct sv_seg segs[SV_DIRECT_BATCH * 2];
	uint64_t most = sv_tune.direct_batch;
	const struct sv_send_wqe *first;
	uint32_t mtu = tr->mtu ? tr->mtu : 4096, avail, op;
	uint64_t bytes = 0;
	struct sv_qp *lq = NULL;
	struct sv_rtgt t;
	int n = 0, nseg = 0, k, read, send;

	avail = qp->sq.tail - qp->sq.next;
	first = sv_wq_slot(&qp->sq, qp->sq.next);
	op = first->opcode;
	read = op == IBV_WR_RDMA_READ;
	send = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
	for (uint32_t i = 0; i < avail && (uint64_t)n < most; i++) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, qp->sq.next + i);
		struct sv_data d;
		uint64_t len;

		if (WQE_STATE(w) != WQE_NEW || w->opcode != op)
			break;
		if (w->send_flags & IBV_SEND_INLINE) {
			if (read || nseg + 1 > SV_DIRECT_BATCH * 2)
				break;
			sv_data_local(&d, &segs[nseg], sv_send_wqe_inline(&qp->sq, w),
				      w->inline_len);
		} else if (sv_sge_resolve(eng, w->sge, (int)w->num_sge, qp->pd_id,
					  read ? IBV_ACCESS_LOCAL_WRITE : 0, 0,
					  sv_sge_total(w->sge, (int)w->num_sge),
					  &d, &segs[nseg],
					  SV_DIRECT_BATCH * 2 - nseg)) {
			break; /* its error is the single path's to report */
		}
		len = d.len;
		if (!len || len > SV_ENG_MAX_MSG || bytes + len > sv_tune.direct_budget ||
		    (!read && !remote_src_ok(&d)))
			break;
		ws[n] = (struct sv_drw){ .va = w->remote_addr, .rkey = w->rkey,
					 .nseg = (uint32_t)d.nseg, .len = len,
					 .local = &segs[nseg], .imm = w->imm_data,
					 .with_imm = op == IBV_WR_SEND_WITH_IMM,
					 .se = !!(w->send_flags & IBV_SEND_SOLICITED) };
		nseg += d.nseg;
		bytes += len;
		n++;
	}
	if (n < 2)
		return 0;
	if (!ring_idle(eng->loop))
		return 0;
	lq = local_pin(eng, qp->dest_qpn);
	if (lq) {
		sv_rtgt_own(&t, lq);
	} else if (tr->peer && !atomic_load(&tr->peer->q->h.dead) &&
		   ring_idle(tr->peer->link) &&
		   !(tr->peer->link && atomic_load(&tr->peer->link->dead))) {
		t = (struct sv_rtgt){ .q = tr->peer->q, .rcq = tr->peer->rcq,
				      .srq = tr->peer->srq, .peer = tr->peer };
	} else {
		return 0;
	}
	if (sv_qpt_rc(qp->type) && !psn_agrees(tr, t.q)) {
		k = 0;
	} else if (send) {
		struct sends_went sw = { .qp = qp, .tr = tr, .ws = ws,
					 .mtu = mtu };

		k = sv_resp_send_batch(eng, &t, ws, n, mtu, sends_went, &sw);
	} else {
		k = sv_resp_rw_batch(eng, &t, ws, n, read, mtu);
		batch_went(qp, tr, ws, k, mtu);
	}
	if (lq)
		atomic_fetch_sub(&lq->busy, 1);
	else
		sv_path_after_direct(tr->peer->link, op, bytes / (uint64_t)n);
	return k;
}

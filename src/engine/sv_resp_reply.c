/* SPDX-License-Identifier: MIT */
/*
 * The packet path's answers on the link.  The responder (sv_resp.c) only
 * keeps what it owes in the owner's transport state (struct sv_tr, under
 * the QP's responder lock): READ responses and atomic ACKs queued in PSN
 * order (respq), and one coalesced ACK or NAK (ack_pending, ack_syn,
 * ack_psn; sv_resp_check.c decides them).  sv_resp_flush sends them after
 * a batch of requests: the queued answers first, then the ACK.  A full
 * ring leaves them queued, so a responder never blocks on its peer.  A
 * READ response is cut by the path MTU and its bytes fetched under its
 * rkey as it is built: a key revoked mid-READ ends it with a NAK.  An
 * ATOMIC WRITE's answer (kind 3) is a READ of 0 bytes: one READ RESPONSE
 * ONLY with its AETH and no payload, as rxe sends it.
 */
#include "resp_int.h"

/* ----------------------------------------------- replies on the link -- */

/* Sends queued answers, then the coalesced ACK.  Must hold shm->lock.
 * Returns 0, or -1 when the ring filled (the rest stays queued). */
static int send_queued(struct sv_qp *qp, struct sv_tr *tr)
{
	struct sv_qp_shm *q = qp->shm;
	struct sv_link *link = tr->link;
	uint32_t mtu = resp_mtu(q);
	/* An XRC TGT QP answers with XRC opcodes (RC's headers). */
	uint8_t tp = sv_opc_transport(qp->type);
	int dead = 0;

	SV_LOCK_HELD(&q->lock);
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
			bth_init(p, OPC_ATOMIC_ACK | tp, 0, 0xffff, q->dest_qpn, 0, e->psn);
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
			uint8_t opc = (first && last ? OPC_READ_RESP_ONLY :
				       first	     ? OPC_READ_RESP_FIRST :
				       last	     ? OPC_READ_RESP_LAST :
						       OPC_READ_RESP_MIDDLE) |
				      tp;
			unsigned hl = sv_op_hdr_len(sv_opcodes[opc].flags);
			struct sv_seg sseg, dseg;
			struct sv_data src, dst;
			uint8_t *p;
			int e2 = 0;

			if (chunk)
				e2 = sv_key_resolve(qp->eng, e->rkey, e->pd_id,
						    e->va + sent, chunk,
						    IBV_ACCESS_REMOTE_READ, 1,
						    q->qpn, &sseg.m);
			if (e2) {
				/* Revoked mid-read: the rest is a NAK. */
				p = sv_link_reserve(link, SV_BTH_BYTES + SV_AETH_BYTES,
						    0, &dead);
				if (!p)
					return dead ? 0 : -1;
				bth_init(p, OPC_ACK | tp, 0, 0xffff, q->dest_qpn, 0, e->psn);
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
					bth_init(p, OPC_ACK | tp, 0, 0xffff,
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
		bth_init(p, OPC_ACK | tp, 0, 0xffff, q->dest_qpn, 0, tr->ack_psn);
		aeth_set(p + SV_BTH_BYTES, tr->ack_syn, q->msn);
		sv_cap_commit(link, qp);
	}
	tr->ack_pending = 0;
	return 0;
}

/* An XRC TGT QP brought to RTR through another process's handle (or
 * adopted, eng_xrc.c) routes its answers when the daemon tells its
 * engine (SV_ENGINE_XRC_SERVE); should there be something to answer
 * before that, the peer on this host is looked up from the QP's region
 * now (one on another host admits no packet before: sv_wire_admit). */
static struct sv_link *tgt_route(struct sv_qp *qp)
{
	uint32_t dqpn = __atomic_load_n(&qp->shm->dest_qpn, __ATOMIC_RELAXED);
	uint32_t st = __atomic_load_n(&qp->shm->state, __ATOMIC_ACQUIRE);

	if (!dqpn || st < IBV_QPS_RTR || st == IBV_QPS_ERR)
		return NULL;
	return sv_eng_link_for_qpn(qp->eng, dqpn); /* takes locks: not
						      under the QP's */
}

void sv_resp_flush(struct sv_qp *qp)
{
	struct sv_tr *tr = tr_of(qp);
	struct sv_link *found = NULL;
	int full;

	if (!tr)
		return;
	if (!sv_qpt_rc(qp->type) ||
	    (!tr->ack_pending && tr->rq_head == tr->rq_tail))
		return;
	/* A look without the lock; set under it, below. */
	if (qp->type == IBV_QPT_XRC_RECV && !qp->link &&
	    !__atomic_load_n(&tr->link, __ATOMIC_RELAXED))
		found = tgt_route(qp);
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
		tr->link = qp->link ? qp->link : found;
	full = send_queued(qp, tr);
	sv_unlock_shm(&qp->shm->lock);
	sv_link_batch_end();
	sv_wire_flush(qp->eng);
	if (full)
		sv_eng_want_work(qp->eng);
}

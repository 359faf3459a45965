/* SPDX-License-Identifier: MIT */
/*
 * The requester (IBTA 9.7.x requester side; rxe_req.c's role): takes send
 * WQEs in order and executes them -- directly on the target QP where it
 * can (sv_direct.c), else as packets on the QP's link, segmented by the
 * path MTU.  Local operations (LOCAL_INV, BIND_MW) ask the daemon, which
 * owns the key table, with the SQ lock dropped; `req_busy` keeps a second
 * thread from overtaking meanwhile, so the SQ stays in order.
 *
 * Keys are checked here when a WQE starts (not when it was posted), so a
 * dereg or rereg between post and execution is honoured.
 *
 * Which way each WQE goes is sv_path.c's choice (sv_path_choose); the
 * run below switches on it and carries it out.
 *
 * Window.  On the packet path an RC QP has at most window_pkts packets
 * (sv_tune.h) sent and not acknowledged; it asks for an ACK every
 * ack_every packets and on the last of each message, so the window
 * reopens while a long message is still going out.  On the wire the
 * window is bytes (wire_window_kb, wire_ack_kb: sv_path_window), for a
 * kernel's round trip is longer than a ring's and a packet of MTU 1024
 * carries a quarter of one of 4096.  One run sends at most
 * req_budget packets and leaves the rest to the progress thread:
 * a thread that handles an ACK never runs a whole queue inside it, and a
 * loss resends at most a window.
 */
#include "engine_int.h"
#include "sv_client.h"

#include <errno.h>
#include <string.h>

void sv_ud_grh(const struct sv_send_wqe *w, uint32_t ib_len, uint8_t *h)
{
	/* As on the wire: UDP header, packet, pad, ICRC (A17.4.3). */
	uint32_t plen = 8 + ((ib_len + 3) & ~3u) + 4;

	grh_set(h, w->tclass, w->flow_label, (uint16_t)plen,
		w->hop_limit ? w->hop_limit : SV_DEFAULT_HOP_LIMIT,
		w->sgid.raw, w->dgid.raw);
}

/* Writes the headers of a packet at p; returns the header length. */
static unsigned build_hdrs(struct sv_qp *qp, struct sv_engine *eng,
			   struct sv_send_wqe *w, uint8_t *p, uint8_t opcode,
			   uint32_t psn, int last, int ackreq, uint32_t paylen,
			   uint64_t len, uint64_t raddr)
{
	uint32_t flags = sv_opcodes[opcode].flags;
	uint32_t dqpn = qp->type == IBV_QPT_UD ? w->remote_qpn : qp->dest_qpn;
	uint8_t *h = p;

	if (qp->type == IBV_QPT_UD) {
		sv_ud_grh(w, sv_op_hdr_len(flags) + paylen, h);
		h += SV_GRH_BYTES;
	}
	bth_init(h, opcode,
		 last && (w->send_flags & IBV_SEND_SOLICITED) &&
			 (flags & (OP_SEND | OP_IMM)),
		 0xffff, dqpn, sv_qpt_rc(qp->type) && ackreq, psn);
	h += SV_BTH_BYTES;
	if (flags & OP_DETH) {
		deth_set(h, w->remote_qkey, qp->qpx.qp_base.qp_num);
		h += SV_DETH_BYTES;
	}
	if (flags & OP_XRCETH) {
		xrceth_set(h, w->xrc_srqn);
		h += SV_XRCETH_BYTES;
	}
	if (flags & OP_RETH) {
		reth_set(h, raddr, w->rkey, (uint32_t)len);
		h += SV_RETH_BYTES;
	}
	if (flags & OP_ATMETH) {
		if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP)
			atmeth_set(h, w->remote_addr, w->rkey, w->swap,
				   w->compare_add);
		else
			atmeth_set(h, w->remote_addr, w->rkey, w->compare_add, 0);
		h += SV_ATMETH_BYTES;
	}
	if (flags & OP_IMM) {
		immdt_set_raw(h, w->imm_data);
		h += SV_IMMDT_BYTES;
	}
	if (flags & OP_IETH) {
		ieth_set(h, w->invalidate_rkey);
		h += SV_IETH_BYTES;
	}
	return (unsigned)(h - p);
}

/* Checks every local SGE of w now (execution time). */
static int check_sges(struct sv_qp *qp, struct sv_send_wqe *w, uint32_t access)
{
	for (uint32_t i = 0; i < w->num_sge; i++) {
		struct sv_mem m;

		if (!w->sge[i].length)
			continue;
		if (sv_key_resolve(qp->eng, w->sge[i].lkey, qp->pd_id,
				   w->sge[i].addr, w->sge[i].length, access, 0,
				   0, &m))
			return -1;
	}
	return 0;
}

/* An ATOMIC WRITE posted with an sg_list (ibv_post_send): its 8 bytes,
 * read now under the SGEs' lkeys as a NIC reads them when the WQE
 * executes, into the WQE where ibv_wr_atomic_write puts them
 * (sv_engine.h); a resend sends the same bytes.  A completion status. */
static enum ibv_wc_status atomic_write_gather(struct sv_qp *qp,
					      struct sv_send_wqe *w)
{
	struct sv_seg ssegs[SV_MAX_SEGS], dseg;
	struct sv_data src, dst;
	uint64_t v;
	int err = sv_sge_resolve(qp->eng, w->sge, (int)w->num_sge, qp->pd_id,
				 0, 0, 8, &src, ssegs, SV_MAX_SEGS);

	if (err)
		return err < 0 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
	sv_data_local(&dst, &dseg, &v, 8);
	if (sv_xfer(&dst, 0, &src, 0, 8))
		return IBV_WC_LOC_PROT_ERR;
	memcpy(&w->compare_add, &v, 8);
	w->num_sge = 0;
	return IBV_WC_SUCCESS;
}

enum step { STEP_NEXT, STEP_BLOCKED, STEP_UNLOCKED, STEP_STAY };

/* A local operation: the daemon changes the key table.  Called with
 * sq_lock held; drops and retakes it. */
static enum step local_op(struct sv_qp *qp, struct sv_send_wqe *w,
			  uint32_t idx)
{
	struct sv_engine *eng = qp->eng;
	enum ibv_wc_status status = IBV_WC_SUCCESS;
	uint32_t op = w->opcode;
	struct sv_mw_bind_req b;
	struct sv_key_req k;
	const void *req;
	size_t req_len;
	uint16_t cmd;
	int err;

	if (op == IBV_WR_BIND_MW) {
		memset(&b, 0, sizeof(b));
		b.mw_key = w->mw ? w->mw->rkey : w->mw_new_rkey;
		b.new_key = w->mw_new_rkey;
		b.mr_key = w->bind_info.mr ? w->bind_info.mr->lkey : 0;
		b.access = w->bind_info.mw_access_flags;
		b.addr = w->bind_info.addr;
		b.length = w->bind_info.length;
		b.pd_id = qp->pd_id;
		b.qpn = qp->qpx.qp_base.qp_num;
		cmd = SV_OP_MW_BIND;
		req = &b;
		req_len = sizeof(b);
	} else {
		k = (struct sv_key_req){ .key = w->invalidate_rkey,
					 .pd_id = qp->pd_id,
					 .qpn = qp->qpx.qp_base.qp_num };
		cmd = SV_OP_KEY_INVALIDATE;
		req = &k;
		req_len = sizeof(k);
	}
	sv_unlock_spin(&qp->sq_lock);
	err = sv_call_simple(cmd, 0, eng->instance, -1, req, req_len, NULL, 0);
	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	/* Flushed or reset meanwhile: the WQE is no longer ours. */
	if (qp->sq.next != idx || sv_qp_state(qp) == IBV_QPS_ERR ||
	    sv_qp_state(qp) == IBV_QPS_RESET)
		return STEP_UNLOCKED;
	if (err) {
		status = op == IBV_WR_BIND_MW ? IBV_WC_MW_BIND_ERR :
						IBV_WC_LOC_QP_OP_ERR;
		/* Like any local error: nothing after it starts, the QP
		 * goes to ERR when it retires. */
		tr_of(qp)->stopped = 1;
	}
	sv_wqe_done(w, status);
	qp->sq.next++;
	return STEP_UNLOCKED;
}

/* The WQE's first checks (once, when it starts).  Returns nonzero when
 * it finished (with an error status) right there. */
int sv_req_start(struct sv_qp *qp, struct sv_tr *tr, struct sv_send_wqe *w,
		 uint64_t *lenp, int keys_later)
{
	int ud = qp->type == IBV_QPT_UD;
	uint32_t op = w->opcode, mtu = tr->mtu ? tr->mtu : 4096, acc = 0;
	int aw = !!(sv_wrinfo(op)->flags & SV_WR_ATOMIC_WRITE);
	enum ibv_wc_status st;
	uint64_t len;

	if (sv_is_read_or_atomic(op))
		len = op == IBV_WR_RDMA_READ ? sv_sge_total(w->sge, (int)w->num_sge) : 8;
	else if (aw)
		len = 8;
	else
		len = sv_wqe_bytes(w);
	*lenp = len;
	if (WQE_STATE(w) != WQE_NEW)
		return 0;
	if (!sv_wr_takes(qp->type, op) ||
	    sv_req_opcode(op, 1, 1) == SV_OPC_NONE) {
		sv_wqe_done(w, IBV_WC_LOC_QP_OP_ERR);
		return 1;
	}
	if (len > SV_ENG_MAX_MSG || (ud && len > mtu)) {
		sv_wqe_done(w, IBV_WC_LOC_LEN_ERR);
		return 1;
	}
	if ((sv_wrinfo(op)->flags & SV_WR_ATOMIC) &&
	    (w->num_sge < 1 || w->sge[0].length < 8)) {
		sv_wqe_done(w, IBV_WC_LOC_LEN_ERR);
		return 1;
	}
	if (sv_is_read_or_atomic(op))
		acc = IBV_ACCESS_LOCAL_WRITE;
	if (!(w->send_flags & IBV_SEND_INLINE) && (acc || !keys_later) &&
	    check_sges(qp, w, acc)) {
		sv_wqe_done(w, IBV_WC_LOC_PROT_ERR);
		return 1;
	}
	if (aw && w->num_sge &&
	    (st = atomic_write_gather(qp, w)) != IBV_WC_SUCCESS) {
		sv_wqe_done(w, st);
		return 1;
	}
	w->bytes_sent = 0;
	w->first_psn = tr->psn;
	w->retries = 0;
	return 0;
}

/* One packet of w (a UD SEND of one MTU at most) to QP dqpn on link l,
 * counted in *copies when it went.  0, or the SV_KERR of its payload's
 * keys.  Must hold sq_lock. */
static int put_ud(struct sv_qp *qp, struct sv_send_wqe *w, struct sv_link *l,
		  uint32_t dqpn, uint32_t psn, uint32_t len, int *copies)
{
	uint8_t opc = sv_req_opcode(w->opcode, 1, 1) | OPC_UD;
	unsigned hl = sv_op_hdr_len(sv_opcodes[opc].flags) + SV_GRH_BYTES;
	uint32_t to = w->remote_qpn;
	int dead, err = 0;
	uint8_t *p = sv_link_reserve(l, hl + len, 1, &dead);

	if (!p)
		return 0; /* full or gone: this copy is lost, as UD may be */
	w->remote_qpn = dqpn;
	build_hdrs(qp, qp->eng, w, p, opc, psn, 1, 0, len, len, 0);
	w->remote_qpn = to;
	if (w->send_flags & IBV_SEND_INLINE) {
		memcpy(p + hl, sv_send_wqe_inline(&qp->sq, w), len);
	} else if (len) {
		struct sv_seg ssegs[SV_MAX_SEGS], dseg;
		struct sv_data src, dst;

		err = sv_sge_resolve(qp->eng, w->sge, (int)w->num_sge, qp->pd_id,
				     0, 0, len, &src, ssegs, SV_MAX_SEGS);
		if (!err) {
			sv_data_local(&dst, &dseg, p + hl, len);
			if (sv_xfer(&dst, 0, &src, 0, len))
				err = SV_KERR_ACCESS;
		}
	}
	if (err) {
		sv_link_abort(l);
		return err;
	}
	sv_cap_commit(l, qp);
	(*copies)++;
	return 0;
}

/*
 * A UD SEND to a multicast group (the daemon's gw_mcast.c "Delivery"):
 * a copy to each QP of this host attached to the group but this one (rxe
 * does not loop a multicast packet back to its sender), each on the link
 * to its engine, and one datagram to the group's address on the QP's
 * wire link (BTH QP 0xFFFFFF).  Never direct: a copy is a packet.  Must
 * hold sq_lock; drops it while the daemon is asked.
 */
static enum step send_mcast(struct sv_qp *qp, struct sv_tr *tr,
			    struct sv_send_wqe *w, uint64_t len)
{
	uint32_t qpn[SV_MAX_MCAST_QP_ATTACH], me = qp->qpx.qp_base.qp_num;
	uint32_t idx = qp->sq.next;
	struct sv_link *l[SV_MAX_MCAST_QP_ATTACH];
	int n, err = 0, copies = 0;

	sv_unlock_spin(&qp->sq_lock);
	n = sv_mcast_members(qp->eng, w->dgid.raw, qpn);
	for (int i = 0; i < n; i++)
		l[i] = qpn[i] == me ? NULL : sv_eng_link_for_qpn(qp->eng, qpn[i]);
	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	/* Flushed or reset meanwhile: the WQE is no longer ours (local_op's
	 * rule). */
	if (qp->sq.next != idx || WQE_STATE(w) == WQE_DONE ||
	    sv_qp_state(qp) == IBV_QPS_ERR || sv_qp_state(qp) == IBV_QPS_RESET)
		return STEP_UNLOCKED;
	for (int i = 0; i < n && !err; i++)
		if (l[i])
			err = put_ud(qp, w, l[i], qpn[i], tr->psn, (uint32_t)len,
				     &copies);
	if (!err && tr->wlink)
		err = put_ud(qp, w, tr->wlink, SV_MCAST_QPN, tr->psn,
			     (uint32_t)len, &copies);
	/* No copy went (lost, as on a fabric): the keys are checked all
	 * the same. */
	if (!err && !copies && !(w->send_flags & IBV_SEND_INLINE) &&
	    check_sges(qp, w, 0))
		err = SV_KERR_ACCESS;
	tr->psn = (tr->psn + 1) & PSN_MASK;
	w->bytes_sent = len;
	w->last_psn = w->first_psn;
	sv_wqe_done(w, !err ? IBV_WC_SUCCESS :
		       err < 0 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR);
	return STEP_NEXT;
}

/* Sends (the rest of) w, at most *budget packets.  Must hold sq_lock. */
static enum step send_wqe(struct sv_qp *qp, struct sv_tr *tr,
			  struct sv_send_wqe *w, int *budget)
{
	struct sv_engine *eng = qp->eng;
	int inl = !!(w->send_flags & IBV_SEND_INLINE);
	int ud = qp->type == IBV_QPT_UD, rc = sv_qpt_rc(qp->type);
	uint32_t op = w->opcode, mtu = tr->mtu ? tr->mtu : 4096;
	uint64_t len;
	struct sv_link *link = ud ? NULL : qp->link;
	/* A message of one packet: its copy below resolves the keys. */
	int keys_later = sv_wqe_bytes(w) <= mtu && !sv_is_read_or_atomic(op);

	if (sv_req_start(qp, tr, w, &len, keys_later))
		return STEP_NEXT;
	if (ud && sv_gid_is_mcast(w->dgid.raw)) {
		(*budget)--;
		return send_mcast(qp, tr, w, len);
	}
	if (ud && !sv_gid_local(eng, w->dgid.raw)) {
		/* Another host: the QP's wire link (none: no route, the
		 * datagram is lost as on a fabric). */
		link = tr->wlink;
	} else if (!ud && !link && sv_av_remote(eng, &qp->attr.ah_attr)) {
		/* The wire route failed at RTR: route_late retries it. */
	} else if (ud || !link) {
		uint32_t dqpn = ud ? w->remote_qpn : qp->dest_qpn;

		/* Resolving a destination may call the daemon: not with the
		 * SQ lock held. */
		sv_unlock_spin(&qp->sq_lock);
		link = sv_eng_link_for_qpn(eng, dqpn);
		if (ud && link)
			sv_peer_learn(eng, dqpn); /* next time: directly */
		sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
		if (!ud && link) {
			qp->link = link;
			tr->link = link;
		}
		if (WQE_STATE(w) == WQE_DONE)
			return STEP_UNLOCKED;
	}

	if (sv_is_read_or_atomic(op)) {
		uint32_t npk = op == IBV_WR_RDMA_READ && len ?
				       (uint32_t)((len + mtu - 1) / mtu) : 1;
		uint8_t opc = sv_req_opcode(op, 1, 1) |
			      sv_opc_transport(qp->type);
		unsigned hl = sv_op_hdr_len(sv_opcodes[opc].flags);
		int dead = 0, resume = op == IBV_WR_RDMA_READ &&
				       WQE_STATE(w) == WQE_SENDING;
		/* A resumed READ asks for what has not arrived (sv_comp.c
		 * rewind_to): the same PSNs and bytes as the original's tail. */
		uint64_t done = resume ? w->bytes_sent : 0;
		uint32_t psn = resume ? (w->first_psn + (uint32_t)(done / mtu)) &
						PSN_MASK :
					tr->psn;
		uint8_t *p;

		if (sv_path_window_full(qp, tr))
			return STEP_BLOCKED;
		p = link ? sv_link_reserve(link, hl, 0, &dead) : NULL;
		if (link && !p && !dead) {
			tr->blocked = 1;
			return STEP_BLOCKED;
		}
		if (p) {
			build_hdrs(qp, eng, w, p, opc, psn, 1, 1, 0, len - done,
				   w->remote_addr + done);
			sv_cap_commit(link, qp);
		}
		if (!resume) {
			w->first_psn = tr->psn;
			w->last_psn = (tr->psn + npk - 1) & PSN_MASK;
		}
		tr->psn = (w->last_psn + 1) & PSN_MASK;
		tr->since_ackreq = 0;
		w->state = WQE_SENT;
		(*budget)--;
		return STEP_NEXT;
	}

	/* SEND / WRITE: one packet per MTU, at least one; an ATOMIC WRITE:
	 * one packet, RETH and its 8 bytes. */
	do {
		uint64_t off = w->bytes_sent;
		uint32_t chunk = len - off > mtu ? mtu : (uint32_t)(len - off);
		int first = off == 0, last = off + chunk == len, dead = 0;
		uint8_t opc = sv_req_opcode(op, first, last) |
			      sv_opc_transport(qp->type);
		unsigned hl = sv_op_hdr_len(sv_opcodes[opc].flags) +
			      (ud ? SV_GRH_BYTES : 0);
		int ackreq = last || tr->since_ackreq + 1 >= sv_path_ack_every(tr);
		uint8_t *p;
		int err = 0;

		if (*budget <= 0 || sv_path_window_full(qp, tr)) {
			w->state = WQE_SENDING;
			if (*budget <= 0)
				tr->blocked = 1;
			return STEP_BLOCKED;
		}
		p = link ? sv_link_reserve(link, hl + chunk, ud, &dead) : NULL;
		if (link && !p && !dead) {
			w->state = WQE_SENDING;
			tr->blocked = 1;
			return STEP_BLOCKED;
		}
		if (p) {
			build_hdrs(qp, eng, w, p, opc, tr->psn, last, ackreq,
				   chunk, len, w->remote_addr);
			if (op == IBV_WR_ATOMIC_WRITE) {
				/* Its 8 bytes (sv_req_start put them there). */
				memcpy(p + hl, &w->compare_add, 8);
			} else if (inl) {
				memcpy(p + hl, sv_send_wqe_inline(&qp->sq, w) + off,
				       chunk);
			} else if (chunk) {
				struct sv_seg ssegs[SV_MAX_SEGS], dseg;
				struct sv_data src, dst;
				int zc = 0;

				err = sv_sge_resolve(eng, w->sge, (int)w->num_sge,
						     qp->pd_id, 0, off, chunk, &src,
						     ssegs, SV_MAX_SEGS);
				/* An RC request's payload on the wire leaves
				 * from the MR itself, one copy (the kernel's)
				 * instead of two: its WQE completes only once
				 * the peer has it. */
				if (!err && rc && link->w && src.nseg >= 1 &&
				    src.seg[0].m.ptr && !src.seg[0].m.null &&
				    src.seg[0].len >= chunk)
					zc = sv_wire_payload(link, src.seg[0].m.ptr,
							     chunk);
				if (zc < 0)
					err = SV_KERR_ACCESS;
				if (!err && !zc) {
					sv_data_local(&dst, &dseg, p + hl, chunk);
					if (sv_xfer(&dst, 0, &src, 0, chunk))
						err = SV_KERR_ACCESS;
				}
			}
			if (err) {
				sv_link_abort(link);
				if (rc && !first) {
					/* Half a message went out: the peer
					 * sees it cut by the error. */
					w->last_psn = (tr->psn - 1) & PSN_MASK;
				}
				sv_wqe_done(w, err < 0 ? IBV_WC_LOC_LEN_ERR :
							 IBV_WC_LOC_PROT_ERR);
				return STEP_NEXT;
			}
			sv_cap_commit(link, qp);
			if (rc && link && !tr->timer_at)
				sv_comp_arm_timer(qp, tr);
			tr->ring_mark = link && !link->w ? link->tx.pending : 0;
		} else if (keys_later && !inl && check_sges(qp, w, 0)) {
			/* Nowhere to send it (lost, as on a fabric): the
			 * keys are checked all the same. */
			sv_wqe_done(w, IBV_WC_LOC_PROT_ERR);
			return STEP_NEXT;
		}
		tr->since_ackreq = ackreq ? 0 : tr->since_ackreq + 1;
		w->bytes_sent = off + chunk;
		tr->psn = (tr->psn + 1) & PSN_MASK;
		(*budget)--;
	} while (w->bytes_sent < len);
	w->last_psn = (tr->psn - 1) & PSN_MASK;
	if (rc)
		w->state = WQE_SENT;
	else
		sv_wqe_done(w, IBV_WC_SUCCESS); /* UC, UD: sent is done */
	return STEP_NEXT;
}

/*
 * Sends w, a new SEND or WRITE of one small packet, on the QP's ring
 * link, as sv_path_choose decided (SV_PATH_SMALL_PKT: the whole of a
 * message-rate test).  send_wqe does the same with every case it must
 * handle (big messages, lost routes, errors); this does the one case in
 * one pass: 1 = sent, 0 = declined (its key or the ring said no: the next
 * way is asked, and an error among them ends the WQE there).  Must hold
 * sq_lock.
 */
static int send_small(struct sv_qp *qp, struct sv_tr *tr,
		      struct sv_send_wqe *w)
{
	struct sv_link *link = qp->link;
	int inl = !!(w->send_flags & IBV_SEND_INLINE), dead;
	uint32_t len = inl ? w->inline_len : w->num_sge ? w->sge[0].length : 0;
	struct sv_mem m = { .ptr = NULL };
	unsigned hl;
	uint8_t opc, *p;

	if (!inl && len &&
	    !(m.ptr = sv_key_cached_local(qp->eng, &tr->lkey, w->sge[0].lkey,
					  qp->pd_id, w->sge[0].addr, len, 0)) &&
	    (sv_key_resolve_cached(qp->eng, &tr->lkey, w->sge[0].lkey,
				   qp->pd_id, w->sge[0].addr, len, 0, 0, 0,
				   &m) ||
	     !m.ptr))
		return 0;
	opc = sv_req_opcode(w->opcode, 1, 1) | sv_opc_transport(qp->type);
	hl = sv_op_hdr_len(sv_opcodes[opc].flags);
	p = sv_link_reserve(link, hl + len, 0, &dead);
	if (!p)
		return 0;
	build_hdrs(qp, qp->eng, w, p, opc, tr->psn, 1, 1, len, len,
		   w->remote_addr);
	if (inl) {
		memcpy(p + hl, sv_send_wqe_inline(&qp->sq, w), len);
	} else if (len && sv_safe_copy(p + hl, m.ptr, len)) {
		sv_link_abort(link);
		return 0;
	}
	sv_cap_commit(link, qp);
	tr->ring_mark = link->tx.pending;
	w->bytes_sent = len;
	w->retries = 0;
	w->first_psn = w->last_psn = tr->psn;
	w->state = WQE_SENT;
	tr->psn = (tr->psn + 1) & PSN_MASK;
	tr->since_ackreq = 0;
	sv_comp_arm_timer(qp, tr);
	return 1;
}

/* RC/UC whose peer was not known at RTR: find it now (the daemon is
 * asked with the SQ lock dropped).  Must hold sq_lock; may drop it. */
static void route_late(struct sv_qp *qp, struct sv_tr *tr)
{
	struct sv_link *link;
	struct sv_peer *peer;

	sv_unlock_spin(&qp->sq_lock);
	sv_engine_qp_route(qp, &qp->attr, &link, &peer);
	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	if (tr->path.reach != SV_REACH_UNKNOWN || !link) {
		sv_peer_put(peer);
		if (link && link->w)
			sv_wire_link_free(link);
		return;
	}
	if (link->w)
		sv_tr_set_wlink(tr, link);
	qp->link = link;
	tr->link = link;
	tr->peer = peer;
	tr->path.reach = sv_path_reach(qp, link, peer, 1);
}

/* After w went out (send_wqe's step s, or executed directly: STEP_NEXT):
 * moves sq.next past it and arms the timer, or ends the run.  Must hold
 * sq_lock. */
static enum step wqe_sent(struct sv_qp *qp, struct sv_tr *tr,
			  struct sv_send_wqe *w, uint32_t idx, enum step s)
{
	if (s == STEP_BLOCKED)
		return STEP_BLOCKED;
	if (s == STEP_UNLOCKED)
		return STEP_NEXT;
	if (WQE_STATE(w) == WQE_DONE && WQE_STATUS(w) &&
	    sv_qpt_rc(qp->type)) {
		/* Local error: the QP stops here; it retires (and errors
		 * the QP) after what is before it. */
		if (qp->sq.next == idx)
			qp->sq.next++;
		tr->stopped = 1;
		return STEP_BLOCKED;
	}
	if (qp->sq.next == idx)
		qp->sq.next++;
	if (sv_qpt_rc(qp->type) && WQE_STATE(w) != WQE_DONE)
		sv_comp_arm_timer(qp, tr);
	return STEP_NEXT;
}

/* The WQE at sq.next goes the way sv_path_choose says; a way that
 * declines hands it to the next.  STEP_NEXT: the run goes on;
 * STEP_BLOCKED: it stops here.  Must hold sq_lock (a local operation
 * drops it meanwhile). */
static enum step req_wqe(struct sv_qp *qp, struct sv_tr *tr,
			 enum ibv_qp_state st, int *budget)
{
	uint32_t idx = qp->sq.next;
	struct sv_send_wqe *w = sv_wq_slot(&qp->sq, idx);
	enum sv_wqe_path p = sv_path_choose(qp, tr, w, st, *budget,
					    SV_PATH_SMALL_PKT);
	int k;

	for (;;) {
		switch (p) {
		case SV_PATH_DONE:
			/* A local op kept by a rewind, or a READ whose
			 * missing responses came before its resend: its
			 * PSNs stay used. */
			if (w->opcode != IBV_WR_BIND_MW &&
			    w->opcode != IBV_WR_LOCAL_INV &&
			    psn_diff((w->last_psn + 1) & PSN_MASK, tr->psn) > 0)
				tr->psn = (w->last_psn + 1) & PSN_MASK;
			qp->sq.next++;
			return STEP_NEXT;
		case SV_PATH_STOP:
		case SV_PATH_WAIT: /* the completer runs us again */
			return STEP_BLOCKED;
		case SV_PATH_BUDGET:
			tr->blocked = 1;
			return STEP_BLOCKED;
		case SV_PATH_LOCAL_ERR:
			sv_wqe_done(w, IBV_WC_LOC_QP_OP_ERR);
			qp->sq.next++;
			return STEP_NEXT;
		case SV_PATH_LOCAL:
			local_op(qp, w, idx);
			return STEP_NEXT;
		case SV_PATH_SMALL_PKT:
			if (send_small(qp, tr, w)) {
				qp->sq.next++;
				(*budget)--;
				return STEP_NEXT;
			}
			p = sv_path_choose(qp, tr, w, st, *budget,
					   SV_PATH_DIRECT_BATCH);
			continue;
		case SV_PATH_DIRECT_BATCH:
			k = sv_direct_batch(qp, tr);
			if (k) {
				*budget -= k;
				return STEP_NEXT;
			}
			p = sv_path_choose(qp, tr, w, st, *budget,
					   SV_PATH_DIRECT);
			continue;
		case SV_PATH_DIRECT:
			switch (sv_direct_wqe(qp, tr, w)) {
			case SV_DIRECT_DONE:
				(*budget)--;
				return wqe_sent(qp, tr, w, idx, STEP_NEXT);
			case SV_DIRECT_PLACED:
				return STEP_NEXT;
			case SV_DIRECT_LATER:
				return STEP_BLOCKED;
			case SV_DIRECT_PACKETS:
				break;
			}
			p = SV_PATH_PACKET;
			continue;
		case SV_PATH_PACKET:
			return wqe_sent(qp, tr, w, idx,
					send_wqe(qp, tr, w, budget));
		}
	}
}

void sv_req_run(struct sv_qp *qp)
{
	sv_req_kick(qp, NULL);
}

/* One run of qp's requester with budget packets (sv_req_kick, sv_req_turn).
 * Returns 1 when it stopped on the budget with work left (turn: the
 * caller runs it again; else the progress thread goes on), else 0. */
static int req_run(struct sv_qp *qp, const struct sv_kick *k, int budget,
		   int turn)
{
	struct sv_tr *tr = tr_of(qp);
	uint64_t new_deadline = 0, timer0;
	int flush = 0, more;
	enum ibv_qp_state st;

	if (!tr)
		return 0;
	/* An ACK our responder owes goes out before our new requests: the
	 * peer's SEND completes before our reply to it arrives (see
	 * ack_before_cqe).  Read without the responder's lock: a CQE the
	 * caller acted on was published after its ACK was set. */
	if (__atomic_load_n(&tr->ack_pending, __ATOMIC_RELAXED))
		sv_resp_flush(qp);
	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	if (tr->req_busy) {
		tr->req_again = 1;
		if (k && k->record)
			sv_path_kicked(tr, k);
		sv_unlock_spin(&qp->sq_lock);
		return 0;
	}
	tr->req_busy = 1;
	__atomic_store_n(&tr->path.held, 0, __ATOMIC_RELAXED);
	sv_link_batch_begin();
	timer0 = tr->timer_at;
	if (qp->type != IBV_QPT_UD && tr->path.reach == SV_REACH_UNKNOWN &&
	    qp->sq.next != qp->sq.tail && sv_direct_enabled())
		route_late(qp, tr);
	do {
		tr->req_again = 0;
		tr->blocked = 0;
		while (((st = sv_qp_state(qp)) == IBV_QPS_RTS ||
			st == IBV_QPS_SQD) &&
		       !tr->rnr_at && !tr->stopped && qp->sq.next != qp->sq.tail &&
		       req_wqe(qp, tr, st, &budget) == STEP_NEXT)
			;
		sv_comp_retire(qp);
		if (sv_qp_state(qp) == IBV_QPS_ERR && qp->sq.head != qp->sq.tail)
			flush = 1;
	} while (tr->req_again);
	/* A timer armed now: the progress thread may sleep past it. */
	if (tr->timer_at && tr->timer_at != timer0)
		new_deadline = tr->timer_at;
	tr->req_busy = 0;
	/* Stopped on the budget (not on a full ring or window, which the
	 * progress thread retries anyway). */
	more = tr->blocked && budget <= 0;
	if (k && k->record)
		sv_path_kicked(tr, k);
	sv_link_batch_end();
	sv_unlock_spin(&qp->sq_lock);
	if (!turn) /* turns: once after all of them */
		sv_wire_flush(qp->eng);
	if (k && k->record && tr->wlink) /* a stream is timed from here */
		__atomic_store_n(&tr->path.kick_end, sv_now_ns(),
				 __ATOMIC_RELAXED);
	if (tr->blocked && !(turn && more))
		sv_eng_want_work(qp->eng);
	if (tr->rnr_at)
		sv_eng_deadline(qp->eng, tr->rnr_at);
	if (new_deadline)
		sv_eng_deadline(qp->eng, new_deadline);
	if (flush)
		sv_engine_flush(qp);
	return more;
}

/* A run's budget: req_budget packets, on the wire whole trains of them
 * (62 at MTU 1024: a budget of 64 sent a train of 62 and two datagrams of
 * one packet each, three trips through the kernel's stack for one). */
void sv_req_kick(struct sv_qp *qp, const struct sv_kick *k)
{
	struct sv_tr *tr = tr_of(qp);
	int budget = (int)sv_tune.req_budget;

	if (tr && tr->wlink && tr->mtu) {
		int t = (int)sv_wire_train_pkts(tr->mtu);

		if (budget > t)
			budget -= budget % t;
	}
	req_run(qp, k, budget, 0);
}

int sv_req_turn(struct sv_qp *qp, int budget)
{
	return req_run(qp, NULL, budget, 1);
}

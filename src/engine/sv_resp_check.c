/* SPDX-License-Identifier: MIT */
/*
 * The responder's checks and decisions: every state before EXECUTE, and
 * the answers that need no data moved (DUPLICATE, NAK_SEQ, RNR).  They
 * read the QP's responder block (struct sv_qp_shm), the parsed packet
 * and, on the packet path, the owner's transport state (struct sv_tr);
 * they reach the receive queue and the key table only through
 * sv_resp_take_recv and sv_resp_rkey (sv_resp_exec.c), and send only
 * through rs->ops->answer.  So the same code serves both callers, and a
 * unit test (tests/unit/test_resp.c) links this file alone, with its own
 * two stand-ins for those functions, and runs the checks on a responder
 * block of its own.
 *
 * Also here, because they are decisions over sv_tr alone: the packet
 * path's coalesced ACK/NAK, its queue of READ and atomic answers, and
 * the atomic replay cache (a repeated atomic is answered with the value
 * the first execution found, 9.7.5.1.2).
 */
#include "resp_int.h"

/* ------------------------------------------------------------ rules -- */

enum sv_psn_class sv_resp_psn_class(uint32_t epsn, uint32_t psn)
{
	int32_t d = psn_diff(psn, epsn);

	return d > 0 ? SV_PSN_AHEAD : d < 0 ? SV_PSN_DUPLICATE : SV_PSN_EXPECTED;
}

int sv_resp_op_seq_ok(uint32_t rflags, uint32_t f)
{
	/* Inside a message only its MIDDLE or LAST may come; outside one,
	 * only a FIRST (or ONLY). */
	if (rflags & SV_RF_IN_SEND)
		return (f & OP_SEND) && (f & (OP_MIDDLE | OP_LAST)) &&
		       !(f & OP_FIRST);
	if (rflags & SV_RF_IN_WRITE)
		return (f & OP_WRITE) && (f & (OP_MIDDLE | OP_LAST)) &&
		       !(f & OP_FIRST);
	return !!(f & OP_FIRST);
}

int sv_resp_size_ok(uint32_t f, uint32_t paylen, uint32_t mtu)
{
	/* No packet carries more than the path MTU; FIRST and MIDDLE of a
	 * SEND or WRITE carry exactly one. */
	if (paylen > mtu)
		return 0;
	return !((f & (OP_FIRST | OP_MIDDLE)) && !(f & OP_LAST) &&
		 (f & (OP_SEND | OP_WRITE)) && paylen != mtu);
}

int sv_resp_needs_recv(uint32_t f)
{
	return ((f & OP_SEND) && (f & OP_FIRST)) ||
	       ((f & OP_WRITE) && (f & OP_IMM));
}

uint8_t sv_resp_syndrome(const struct sv_qp_shm *q, enum resp_state st)
{
	switch (st) {
	case RESPST_NAK_SEQ:
		return SV_AETH_NAK | SV_NAK_PSN_SEQ;
	case RESPST_RNR:
		/* The timer the requester waits (9.7.5.2.8, table 45). */
		return SV_AETH_RNR_NAK | (q->min_rnr & 0x1f);
	case RESPST_ERR_INV_REQ:
	case RESPST_ERR_LENGTH:
		return SV_AETH_NAK | SV_NAK_INV_REQ;
	case RESPST_ERR_ACCESS:
		return SV_AETH_NAK | SV_NAK_REM_ACCESS;
	case RESPST_ERR_OP:
	case RESPST_ERR_LKEY:
		return SV_AETH_NAK | SV_NAK_REM_OP;
	default:
		return SV_AETH_ACK | SV_AETH_ACK_UNLIMITED;
	}
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
	case IBV_QPT_XRC_RECV:
		return (opcode & 0xe0) == OPC_XRC;
	default:
		return 0;
	}
}

enum resp_state sv_resp_kerr_state(int e)
{
	return e == SV_KERR_OWNER ? RESPST_ERR_OP : RESPST_ERR_ACCESS;
}

enum resp_state sv_resp_uc_silent(const struct resp *rs, enum resp_state st)
{
	return rs->q->type == IBV_QPT_UC ? RESPST_DROP : st;
}

/* ----------------------------------------------------------- states -- */

/*
 * RESPST_CHK_QP: a QP that takes requests (RTR and after, not ERR), an
 * opcode of its transport, a UD Q_Key that matches; anything else is
 * dropped silently.  The first request a QP takes in RTR raises
 * COMM_EST (11.6.3).  Must hold rs->q->lock.
 */
enum resp_state sv_resp_chk_qp(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;
	uint32_t state = q->state;

	if (atomic_load_explicit(&q->h.dead, memory_order_relaxed))
		return RESPST_DROP; /* destroyed under us */
	if (state != IBV_QPS_RTR && state != IBV_QPS_RTS &&
	    state != IBV_QPS_SQD && state != IBV_QPS_SQE)
		return RESPST_DROP;
	if (!transport_ok(q->type, rs->pkt->opcode))
		return RESPST_DROP;
	if (q->type == IBV_QPT_UD && rs->pkt->qkey != q->qkey)
		return RESPST_DROP; /* Q_Key violation: silent */
	/* XRC: the XRCETH names an XRC SRQ of the TGT QP's own domain, or
	 * the request is invalid (9.3.1.2; mlx5 and rxe's XRC NAK it). */
	if (q->type == IBV_QPT_XRC_RECV &&
	    (!rs->t->x || rs->t->x->xrcd_id != q->xrcd_id))
		return RESPST_ERR_INV_REQ;
	if (state == IBV_QPS_RTR && q->type != IBV_QPT_UD &&
	    !qflag(rs, SV_RF_COMM_EST)) {
		qset(rs, SV_RF_COMM_EST, 1);
		atomic_fetch_or(&q->events, SV_QEV_COMM_EST);
	}
	return RESPST_CHK_PSN;
}

/*
 * RESPST_CHK_PSN: RC takes the expected PSN, re-answers one behind it
 * (a duplicate) and NAKs one ahead of it (a sequence error); UC has no
 * answers, so a gap loses the message in progress and what follows is
 * dropped up to the next FIRST (9.8.3); UD has no sequence.  Must hold
 * rs->q->lock.
 */
enum resp_state sv_resp_chk_psn(struct resp *rs)
{
	struct sv_qp_shm *q = rs->q;
	const struct sv_pkt *pkt = rs->pkt;

	if (q->type == IBV_QPT_UD)
		return RESPST_CHK_RESOURCE;
	if (q->type == IBV_QPT_UC) {
		if (psn_diff(pkt->psn, q->epsn) != 0) {
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
		return RESPST_CHK_OP_SEQ;
	}
	switch (sv_resp_psn_class(q->epsn, pkt->psn)) {
	case SV_PSN_AHEAD:
		return RESPST_NAK_SEQ;
	case SV_PSN_DUPLICATE:
		return RESPST_DUPLICATE;
	case SV_PSN_EXPECTED:
		break;
	}
	/* The retry a NAK asked for has come: the next gap is NAKed again,
	 * and the next burst of duplicates ACKed again. */
	qset(rs, SV_RF_NAK_SENT, 0);
	if (!rs->ops->whole)
		rs->tr->dup_acked = 0;
	return RESPST_CHK_OP_SEQ;
}

/*
 * RESPST_CHK_OP_SEQ: the opcode may follow what came before, and a
 * packet's size is what its place in the message allows (9.7.4.1.4; a
 * whole message is of any size).  RC: an invalid request; UC: a FIRST
 * starts over, anything else drops the rest of the message.  Must hold
 * rs->q->lock.
 */
enum resp_state sv_resp_chk_op_seq(struct resp *rs)
{
	uint32_t f = rs->flags;
	int ok = sv_resp_op_seq_ok(rs->q->rflags, f);

	if (ok && !rs->ops->whole)
		ok = sv_resp_size_ok(f, rs->pkt->paylen, resp_mtu(rs->q));
	if (ok)
		return RESPST_CHK_RESOURCE;
	if (rs->q->type == IBV_QPT_UC) {
		if (f & OP_FIRST) {
			qset(rs, SV_RF_IN_SEND | SV_RF_IN_WRITE, 0);
			rs->q->recv_off = 0;
			return RESPST_CHK_RESOURCE;
		}
		qset(rs, SV_RF_UC_DROP, 1);
		return RESPST_DROP;
	}
	return RESPST_ERR_INV_REQ;
}

/*
 * RESPST_CHK_RESOURCE: a request that consumes a receive WQE takes one
 * now (none: RC answers RNR, UC and UD drop it, 9.7.4, 9.8.3); a READ,
 * atomic or ATOMIC WRITE needs room for its answer (none: dropped, the requester's retry
 * comes back).  Must hold rs->q->lock.
 */
enum resp_state sv_resp_chk_resource(struct resp *rs)
{
	uint32_t f = rs->flags;

	if (sv_resp_needs_recv(f) && sv_resp_take_recv(rs))
		return sv_qpt_rc(rs->q->type) ? RESPST_RNR : RESPST_DROP;
	if ((f & (OP_READ | OP_ATOMIC | OP_ATOMIC_WRITE)) && !rs->ops->room(rs))
		return RESPST_DROP;
	return RESPST_CHK_ACCESS;
}

/*
 * RESPST_CHK_ACCESS: the QP's own access flags gate remote operations
 * before any key is looked at (qp_access_flags, 10.2.4; mlx5 answers a
 * remote access error, a UC QP drops it, 9.8.3).  An ATOMIC WRITE needs
 * remote WRITE, as rxe's responder asks (rxe answers an invalid request
 * for it as for a WRITE; we answer both as mlx5 answers a WRITE).  Must
 * hold rs->q->lock.
 */
enum resp_state sv_resp_chk_access(struct resp *rs)
{
	uint32_t f = rs->flags, a = rs->q->access;

	if (((f & (OP_WRITE | OP_ATOMIC_WRITE)) && (f & OP_FIRST) &&
	     !(a & IBV_ACCESS_REMOTE_WRITE)) ||
	    ((f & OP_READ) && !(a & IBV_ACCESS_REMOTE_READ)) ||
	    ((f & OP_ATOMIC) && !(a & IBV_ACCESS_REMOTE_ATOMIC)))
		return rs->q->type == IBV_QPT_UC ? RESPST_DROP :
						   RESPST_ERR_ACCESS;
	return RESPST_CHK_LENGTH;
}

/*
 * RESPST_CHK_LENGTH: a WRITE carries no more than its RETH's DMA length
 * (a whole message exactly that); an atomic names an aligned 8 bytes, an
 * ATOMIC WRITE carries them.  All are invalid requests (UC: dropped).
 * Must hold rs->q->lock.
 */
enum resp_state sv_resp_chk_length(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;

	if ((rs->flags & OP_WRITE) && (rs->flags & OP_FIRST) &&
	    (rs->len > pkt->dma_len ||
	     (rs->ops->whole && rs->len != pkt->dma_len)))
		return rs->q->type == IBV_QPT_UC ? RESPST_DROP :
						   RESPST_ERR_INV_REQ;
	if ((rs->flags & OP_ATOMIC) && (pkt->va & 7))
		return RESPST_ERR_INV_REQ;
	/* ATOMIC WRITE: exactly 8 bytes, in the RETH and in the packet (rxe:
	 * a length error, answered as an invalid request), at an address
	 * aligned to them (A19.4.2; rxe's misaligned atomic, an invalid
	 * request too; sv_resp_exec_atomic_write checks the host address). */
	if ((rs->flags & OP_ATOMIC_WRITE) &&
	    (pkt->dma_len != 8 || rs->len != 8 || (pkt->va & 7)))
		return RESPST_ERR_INV_REQ;
	return RESPST_CHK_RKEY;
}

/*
 * RESPST_CHK_RKEY: the remote key grants the access over the whole range
 * (C10-xx: an R_Key violation is a remote access error; its owner gone,
 * a remote operational one).  A WRITE's first packet records the range
 * its later packets fill.  Must hold rs->q->lock.
 */
enum resp_state sv_resp_chk_rkey(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_qp_shm *q = rs->q;
	struct sv_mem m;
	int e;

	if ((rs->flags & OP_WRITE) && (rs->flags & OP_FIRST)) {
		if (pkt->dma_len) {
			e = sv_resp_rkey(rs, pkt->rkey, pkt->va, pkt->dma_len,
					 IBV_ACCESS_REMOTE_WRITE, &m);
			if (e)
				return sv_resp_uc_silent(rs,
							 sv_resp_kerr_state(e));
		}
		q->wr_va = pkt->va;
		q->wr_rkey = pkt->rkey;
		q->wr_total = pkt->dma_len;
		q->wr_left = pkt->dma_len;
	} else if (rs->flags & OP_READ) {
		if (pkt->dma_len) {
			e = sv_resp_rkey(rs, pkt->rkey, pkt->va, pkt->dma_len,
					 IBV_ACCESS_REMOTE_READ, &m);
			if (e)
				return sv_resp_kerr_state(e);
		}
	} else if (rs->flags & OP_ATOMIC) {
		e = sv_resp_rkey(rs, pkt->rkey, pkt->va, 8,
				 IBV_ACCESS_REMOTE_ATOMIC, &m);
		if (e)
			return sv_resp_kerr_state(e);
	} else if (rs->flags & OP_ATOMIC_WRITE) {
		/* Remote WRITE on the key, as rxe's check_rkey asks. */
		e = sv_resp_rkey(rs, pkt->rkey, pkt->va, 8,
				 IBV_ACCESS_REMOTE_WRITE, &m);
		if (e)
			return sv_resp_kerr_state(e);
	}
	return RESPST_EXECUTE;
}

/*
 * RESPST_DUPLICATE: a request behind the expected PSN is answered again,
 * never executed again (9.7.5.1.2): a READ from its PSN on, an atomic
 * with the value its execution found (none cached: dropped, the
 * requester retries), an ATOMIC WRITE with its READ response of no data
 * (the same), a SEND or WRITE with an ACK of where we stand.
 * Only a stream of packets has duplicates.  Must hold rs->q->lock.
 */
enum resp_state sv_resp_duplicate(struct resp *rs)
{
	const struct sv_pkt *pkt = rs->pkt;
	struct sv_tr *tr = rs->tr;
	uint64_t orig;

	if (rs->ops->whole)
		return RESPST_DROP;
	if (rs->flags & OP_READ) {
		/* A repeat is answered as the READ it repeats was: a QP
		 * without remote READ executed none, so this repeats nothing
		 * (rxe drops a repeat it has no READ for).  The rkey is
		 * checked as each response is built (sv_resp_reply.c). */
		if (!(rs->q->access & IBV_ACCESS_REMOTE_READ))
			return RESPST_DROP;
		sv_resp_queue_read(tr, pkt, 1, rs->pd_id);
		return RESPST_DONE;
	}
	if (rs->flags & OP_ATOMIC) {
		if (!sv_resp_atomic_replay(tr, pkt->psn, &orig))
			return RESPST_DROP;
		sv_resp_queue_atomic(tr, pkt->psn, orig);
		return RESPST_DONE;
	}
	if (rs->flags & OP_ATOMIC_WRITE) {
		/* As rxe: the resource of the one executed is answered again
		 * (its READ response of no data), the 8 bytes never stored
		 * twice; none kept, dropped (class D). */
		if (!sv_resp_atomic_replay(tr, pkt->psn, &orig))
			return RESPST_DROP;
		sv_resp_queue_atomic_write(tr, pkt->psn);
		return RESPST_DONE;
	}
	/* One ACK per burst of duplicates (a resend of packets the
	 * responder already has), and again where the requester asks for
	 * one: it needs to hear where we stand, not once per packet. */
	if (!tr->dup_acked || pkt->ackreq) {
		tr->dup_acked = 1;
		sv_resp_set_ack(tr, (rs->q->epsn - 1) & PSN_MASK);
	}
	return RESPST_DONE;
}

/*
 * RESPST_NAK_SEQ: a request ahead of the expected PSN: something before
 * it was lost.  One NAK (PSN sequence error, naming the PSN expected) per
 * gap: what follows it is dropped until the resend arrives (NAK_SENT,
 * cleared in CHK_PSN).  Must hold rs->q->lock.
 */
enum resp_state sv_resp_nak_seq(struct resp *rs)
{
	if (qflag(rs, SV_RF_NAK_SENT))
		return RESPST_DONE;
	qset(rs, SV_RF_NAK_SENT, 1);
	rs->ops->answer(rs, SV_ROUT_NAK, sv_resp_syndrome(rs->q, RESPST_NAK_SEQ),
			rs->q->epsn);
	return RESPST_DONE;
}

/*
 * RESPST_RNR: a request that needs a receive WQE found none (RC only):
 * an RNR NAK with the QP's timer, naming this PSN, which the requester
 * sends again when the timer ends (9.7.5.2.8).  The packets of a stream
 * that follow are dropped until that retry comes back to the expected
 * PSN (NAK_SENT), so they are not NAKed as a gap.  Must hold rs->q->lock.
 */
enum resp_state sv_resp_rnr(struct resp *rs)
{
	rs->ops->answer(rs, SV_ROUT_RNR, sv_resp_syndrome(rs->q, RESPST_RNR),
			rs->pkt->psn);
	if (!rs->ops->whole)
		qset(rs, SV_RF_NAK_SENT, 1);
	return RESPST_DONE;
}

/* ------------------------------------------- answers (packet path) -- */

void sv_resp_set_nak(struct sv_tr *tr, uint8_t syn, uint32_t psn)
{
	tr->ack_pending = 1;
	tr->ack_syn = syn;
	tr->ack_psn = psn;
}

void sv_resp_set_ack(struct sv_tr *tr, uint32_t psn)
{
	/* A pending NAK is never replaced by an ACK. */
	if (tr->ack_pending && (tr->ack_syn & SV_AETH_TYPE_MASK) != SV_AETH_ACK)
		return;
	tr->ack_pending = 1;
	tr->ack_syn = SV_AETH_ACK | SV_AETH_ACK_UNLIMITED;
	tr->ack_psn = psn;
}

int sv_resp_respq_full(const struct sv_tr *tr)
{
	return tr->rq_tail - tr->rq_head >= SV_ENG_RESPQ;
}

static void respq_push(struct sv_tr *tr, const struct sv_respq_ent *e)
{
	if (sv_resp_respq_full(tr))
		return; /* the requester's retry comes back */
	tr->respq[tr->rq_tail % SV_ENG_RESPQ] = *e;
	tr->rq_tail++;
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

void sv_resp_queue_read(struct sv_tr *tr, const struct sv_pkt *pkt, int repeat,
			uint32_t pd_id)
{
	struct sv_respq_ent q = { .kind = 1,
				  .psn = pkt->psn,
				  .left = pkt->dma_len,
				  .total = pkt->dma_len,
				  .va = pkt->va,
				  .rkey = pkt->rkey,
				  .pd_id = pd_id };

	if (repeat)
		supersede_read(tr, pkt);
	respq_push(tr, &q);
}

void sv_resp_queue_atomic(struct sv_tr *tr, uint32_t psn, uint64_t orig)
{
	struct sv_respq_ent q = { .kind = 2, .psn = psn, .orig = orig };

	respq_push(tr, &q);
}

void sv_resp_queue_atomic_write(struct sv_tr *tr, uint32_t psn)
{
	/* A READ response of no data (rxe's send_read_response_ack):
	 * sv_resp_reply.c sends a READ of 0 bytes as one. */
	struct sv_respq_ent q = { .kind = 3, .psn = psn };

	respq_push(tr, &q);
}

void sv_resp_atomic_record(struct sv_tr *tr, uint32_t psn, uint64_t orig)
{
	uint32_t slot = psn & (SV_ENG_ATOMIC_CACHE - 1);

	tr->atomic_cache[slot].psn = psn;
	tr->atomic_cache[slot].orig = orig;
	tr->atomic_cache[slot].valid = 1;
}

int sv_resp_atomic_replay(const struct sv_tr *tr, uint32_t psn,
			  uint64_t *orig)
{
	uint32_t slot = psn & (SV_ENG_ATOMIC_CACHE - 1);

	if (!tr->atomic_cache[slot].valid || tr->atomic_cache[slot].psn != psn)
		return 0;
	*orig = tr->atomic_cache[slot].orig;
	return 1;
}

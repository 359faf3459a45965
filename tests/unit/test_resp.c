/* SPDX-License-Identifier: MIT */
/*
 * The responder's checks and decisions (src/engine/sv_resp_check.c) in
 * one process: a responder block, a transport state and a parsed packet
 * of the test's own, no daemon, no shared memory, no link.  The two
 * functions the checks reach the data through are stood in for here
 * (sv_resp_take_recv: is a receive WQE posted; sv_resp_rkey: what the key
 * lookup answers), and the answers the checks send are recorded by the
 * test's resp_ops.  Each check runs the states in the machine's order
 * from RESPST_CHK_QP until the request leaves the checks (EXECUTE, or an
 * answer state), as sv_resp.c run() does.
 */
#include "resp_int.h"
#include "unit_test.h"

#include <stdlib.h>

/* ------------------------------------------------------ stand-ins -- */

static int recv_posted = 1;	  /* sv_resp_take_recv finds a WQE */
static int rkey_answer = SV_KOK;  /* what sv_resp_rkey says */

int sv_resp_take_recv(struct resp *rs)
{
	if (!recv_posted)
		return -1;
	qset(rs, SV_RF_HAVE_RECV, 1);
	return 0;
}

int sv_resp_rkey(struct resp *rs, uint32_t key, uint64_t va, uint64_t len,
		 uint32_t access, struct sv_mem *m)
{
	(void)rs, (void)key, (void)va, (void)len, (void)access;
	memset(m, 0, sizeof(*m));
	return rkey_answer;
}

/* The answers sent through ops->answer. */
static struct {
	int n;
	enum sv_rout kind;
	uint8_t syn;
	uint32_t psn;
} ans;

static void t_answer(struct resp *rs, enum sv_rout kind, uint8_t syn,
		     uint32_t psn)
{
	(void)rs;
	ans.n++;
	ans.kind = kind;
	ans.syn = syn;
	ans.psn = psn;
}

static int t_room(struct resp *rs)
{
	return !sv_resp_respq_full(rs->tr);
}

static const struct resp_ops stream_ops = { .whole = 0, .room = t_room,
					    .answer = t_answer };
static const struct resp_ops whole_ops = { .whole = 1, .room = t_room,
					   .answer = t_answer };

/* ------------------------------------------------------- fixture -- */

struct fx {
	struct sv_qp_shm q;
	struct sv_tr *tr;
	struct sv_pkt pkt;
	struct resp rs;
};

static struct fx *fx_new(enum ibv_qp_type type, uint32_t epsn)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->tr = calloc(1, sizeof(*f->tr));
	f->q.type = type;
	f->q.state = IBV_QPS_RTS;
	f->q.mtu = 1024;
	f->q.epsn = epsn;
	f->q.min_rnr = 14;
	f->q.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		      IBV_ACCESS_REMOTE_ATOMIC;
	recv_posted = 1;
	rkey_answer = SV_KOK;
	memset(&ans, 0, sizeof(ans));
	return f;
}

static void fx_free(struct fx *f)
{
	free(f->tr);
	free(f);
}

/* A request of transport opcode opc (RC numbering; the QP type's offset
 * added) at psn carrying paylen bytes. */
static void fx_pkt(struct fx *f, uint8_t opc, uint32_t psn, uint32_t paylen)
{
	uint8_t o = opc | (f->q.type == IBV_QPT_UC ? OPC_UC :
			   f->q.type == IBV_QPT_UD ? OPC_UD :
						     0);

	memset(&f->pkt, 0, sizeof(f->pkt));
	f->pkt.opcode = o;
	f->pkt.flags = sv_opcodes[o].flags;
	f->pkt.psn = psn & PSN_MASK;
	f->pkt.paylen = paylen;
}

/* Runs the checks on the fixture's packet, as sv_resp.c run() does, and
 * returns the state the request leaves them in; the answer states
 * (DUPLICATE, NAK_SEQ, RNR) are run too, and their end is RESPST_DONE. */
static enum resp_state check(struct fx *f, const struct resp_ops *ops)
{
	enum resp_state st = RESPST_CHK_QP;

	f->rs = (struct resp){ .ops = ops, .q = &f->q, .tr = f->tr,
			       .pkt = &f->pkt, .len = f->pkt.paylen,
			       .flags = f->pkt.flags };
	for (;;) {
		switch (st) {
		case RESPST_CHK_QP: st = sv_resp_chk_qp(&f->rs); break;
		case RESPST_CHK_PSN: st = sv_resp_chk_psn(&f->rs); break;
		case RESPST_CHK_OP_SEQ: st = sv_resp_chk_op_seq(&f->rs); break;
		case RESPST_CHK_RESOURCE:
			st = sv_resp_chk_resource(&f->rs);
			break;
		case RESPST_CHK_ACCESS: st = sv_resp_chk_access(&f->rs); break;
		case RESPST_CHK_LENGTH: st = sv_resp_chk_length(&f->rs); break;
		case RESPST_CHK_RKEY: st = sv_resp_chk_rkey(&f->rs); break;
		case RESPST_DUPLICATE:
			if (sv_resp_duplicate(&f->rs) == RESPST_DROP)
				return RESPST_DROP;
			return RESPST_DONE;
		case RESPST_NAK_SEQ: return sv_resp_nak_seq(&f->rs);
		case RESPST_RNR: return sv_resp_rnr(&f->rs);
		default: return st;
		}
	}
}

/* ---------------------------------------------------------- tests -- */

/* 9.7.1: PSNs are 24-bit; half the space ahead is ahead. */
static void psn_arithmetic(void)
{
	EXPECT(psn_diff(0, 0xffffff) == 1);
	EXPECT(psn_diff(0xffffff, 0) == -1);
	EXPECT(psn_diff(3, 0xfffff0) == 19);
	EXPECT(psn_diff(0x7fffff, 0) == 0x7fffff);
	EXPECT(psn_diff(0x800000, 0) == -0x800000);
	EXPECT(sv_resp_psn_class(5, 5) == SV_PSN_EXPECTED);
	EXPECT(sv_resp_psn_class(0xffffff, 0) == SV_PSN_AHEAD);
	EXPECT(sv_resp_psn_class(0, 0xffffff) == SV_PSN_DUPLICATE);
	EXPECT(sv_resp_psn_class(0xfffff0, 3) == SV_PSN_AHEAD);
	EXPECT(sv_resp_psn_class(3, 0xfffff0) == SV_PSN_DUPLICATE);
	EXPECT(sv_resp_psn_class(0, 0x7fffff) == SV_PSN_AHEAD);
	EXPECT(sv_resp_psn_class(0, 0x800000) == SV_PSN_DUPLICATE);
}

/* RC: the expected PSN executes, one ahead is NAKed once per gap with the
 * PSN expected, across the wrap. */
static void psn_new_ahead(void)
{
	struct fx *f = fx_new(IBV_QPT_RC, 0xfffffe);

	fx_pkt(f, OPC_SEND_ONLY, 0xfffffe, 8);
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	EXPECT(ans.n == 0);
	/* Three ahead across 2^24: a sequence NAK naming 0xfffffe. */
	fx_pkt(f, OPC_SEND_ONLY, 1, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(ans.n == 1 && ans.kind == SV_ROUT_NAK);
	EXPECT(ans.syn == (SV_AETH_NAK | SV_NAK_PSN_SEQ));
	EXPECT(ans.psn == 0xfffffe);
	/* The rest of the gap: no second NAK. */
	fx_pkt(f, OPC_SEND_ONLY, 2, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(ans.n == 1);
	/* The resend arrives: taken, and the next gap is NAKed again. */
	fx_pkt(f, OPC_SEND_ONLY, 0xfffffe, 8);
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	EXPECT(!(f->q.rflags & SV_RF_NAK_SENT));
	fx_pkt(f, OPC_SEND_ONLY, 5, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(ans.n == 2 && ans.psn == 0xfffffe);
	fx_free(f);
}

/* RC: a duplicate SEND is not executed again; one ACK of where we stand
 * per burst, and again where the requester asks for one. */
static void psn_duplicate(void)
{
	struct fx *f = fx_new(IBV_QPT_RC, 1);

	fx_pkt(f, OPC_SEND_ONLY, 0xffffff, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(ans.n == 0);
	EXPECT(f->tr->ack_pending);
	EXPECT(f->tr->ack_syn == (SV_AETH_ACK | SV_AETH_ACK_UNLIMITED));
	EXPECT(f->tr->ack_psn == 0);
	f->tr->ack_pending = 0;
	fx_pkt(f, OPC_SEND_ONLY, 0xfffffe, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(!f->tr->ack_pending);
	f->pkt.ackreq = 1;
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(f->tr->ack_pending && f->tr->ack_psn == 0);
	/* A pending NAK is never replaced by an ACK. */
	sv_resp_set_nak(f->tr, SV_AETH_NAK | SV_NAK_PSN_SEQ, 1);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(f->tr->ack_syn == (SV_AETH_NAK | SV_NAK_PSN_SEQ));
	fx_free(f);
}

/* A duplicate atomic is answered with the value its execution found,
 * never executed again (9.7.5.1.2); one the cache does not hold is
 * dropped (the requester retries). */
static void duplicate_atomic(void)
{
	struct fx *f = fx_new(IBV_QPT_RC, 1);
	const struct sv_respq_ent *e;
	uint64_t v;

	sv_resp_atomic_record(f->tr, 0xffffff, 0x1122334455667788ull);
	EXPECT(sv_resp_atomic_replay(f->tr, 0xffffff, &v));
	EXPECT(v == 0x1122334455667788ull);
	fx_pkt(f, OPC_FETCH_ADD, 0xffffff, 0);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(f->tr->rq_tail - f->tr->rq_head == 1);
	e = &f->tr->respq[f->tr->rq_head % SV_ENG_RESPQ];
	EXPECT(e->kind == 2 && e->psn == 0xffffff);
	EXPECT(e->orig == 0x1122334455667788ull);
	/* The same cache slot, another PSN: not ours to replay. */
	fx_pkt(f, OPC_CMP_SWAP, (0xffffff - SV_ENG_ATOMIC_CACHE) & PSN_MASK, 0);
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	EXPECT(f->tr->rq_tail - f->tr->rq_head == 1);
	fx_free(f);
}

/*
 * ATOMIC WRITE (IBTA 1.5), as rxe's responder checks it: remote WRITE on
 * the QP (else a remote access error, as a WRITE here) and on the key;
 * exactly 8 bytes in the RETH and the packet, an aligned address (else an
 * invalid request); room for its answer (else dropped: the retry comes
 * back); UC and UD take no such opcode.  A duplicate is answered again
 * with its READ response of no data (kind 3), never executed again; one
 * whose PSN is not kept is dropped.
 */
static void atomic_write(void)
{
	struct fx *f = fx_new(IBV_QPT_RC, 10);
	const struct sv_respq_ent *e;

	fx_pkt(f, OPC_ATOMIC_WRITE, 10, 8);
	f->pkt.dma_len = 8;
	f->pkt.va = 0x1008;
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	EXPECT(check(f, &whole_ops) == RESPST_EXECUTE);
	/* Lengths and alignment: invalid requests (rxe: a length error and
	 * a misaligned atomic, both NAK invalid request). */
	f->pkt.dma_len = 16;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	f->pkt.dma_len = 8;
	fx_pkt(f, OPC_ATOMIC_WRITE, 10, 4);
	f->pkt.dma_len = 8;
	f->pkt.va = 0x1008;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	fx_pkt(f, OPC_ATOMIC_WRITE, 10, 8);
	f->pkt.dma_len = 8;
	f->pkt.va = 0x1004;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	EXPECT(sv_resp_syndrome(&f->q, RESPST_ERR_INV_REQ) ==
	       (SV_AETH_NAK | SV_NAK_INV_REQ));
	f->pkt.va = 0x1008;
	/* The key: remote WRITE (the stand-in answers for the key). */
	rkey_answer = SV_KERR_ACCESS;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_ACCESS);
	rkey_answer = SV_KERR_OWNER;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_OP);
	rkey_answer = SV_KOK;
	/* The QP: remote WRITE, not ATOMIC, is what it needs. */
	f->q.access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_ACCESS);
	f->q.access = IBV_ACCESS_REMOTE_WRITE;
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	/* Inside a WRITE: out of sequence. */
	f->q.rflags |= SV_RF_IN_WRITE;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	f->q.rflags &= ~(uint32_t)SV_RF_IN_WRITE;
	/* No room for the answer: dropped. */
	f->tr->rq_tail = f->tr->rq_head + SV_ENG_RESPQ;
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	f->tr->rq_tail = f->tr->rq_head;
	/* A duplicate: answered from the kept PSN, or dropped. */
	fx_pkt(f, OPC_ATOMIC_WRITE, 9, 8);
	f->pkt.dma_len = 8;
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	EXPECT(f->tr->rq_tail == f->tr->rq_head);
	sv_resp_atomic_record(f->tr, 9, 0);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(f->tr->rq_tail - f->tr->rq_head == 1);
	e = &f->tr->respq[f->tr->rq_head % SV_ENG_RESPQ];
	EXPECT(e->kind == 3 && e->psn == 9 && e->left == 0 && e->total == 0);
	EXPECT(ans.n == 0); /* no ACK besides it */
	fx_free(f);
	/* UC and UD have no ATOMIC WRITE: an RC opcode there is dropped. */
	f = fx_new(IBV_QPT_UC, 10);
	f->pkt = (struct sv_pkt){ .opcode = OPC_ATOMIC_WRITE, .psn = 10,
				  .paylen = 8, .dma_len = 8,
				  .flags = sv_opcodes[OPC_ATOMIC_WRITE].flags };
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	fx_free(f);
	f = fx_new(IBV_QPT_UD, 0);
	f->q.qkey = 0x11111111;
	f->pkt = (struct sv_pkt){ .opcode = OPC_ATOMIC_WRITE, .paylen = 8,
				  .dma_len = 8, .qkey = 0x11111111,
				  .flags = sv_opcodes[OPC_ATOMIC_WRITE].flags };
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	fx_free(f);
}

/* A repeated READ supersedes what is queued of the same READ; a new READ
 * of the same range does not; a QP without remote READ repeats none. */
static void duplicate_read(void)
{
	struct fx *f = fx_new(IBV_QPT_RC, 200);
	const struct sv_respq_ent *e;

	fx_pkt(f, OPC_READ_REQ, 100, 0);
	f->pkt.va = 0x10000;
	f->pkt.rkey = 7;
	f->pkt.dma_len = 4096;
	sv_resp_queue_read(f->tr, &f->pkt, 0, 0);
	sv_resp_queue_read(f->tr, &f->pkt, 0, 0);
	EXPECT(f->tr->rq_tail - f->tr->rq_head == 2);
	/* The requester has two responses; it asks for the rest. */
	fx_pkt(f, OPC_READ_REQ, 102, 0);
	f->pkt.va = 0x10000 + 2048;
	f->pkt.rkey = 7;
	f->pkt.dma_len = 2048;
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(f->tr->rq_tail - f->tr->rq_head == 1);
	e = &f->tr->respq[f->tr->rq_head % SV_ENG_RESPQ];
	EXPECT(e->kind == 1 && e->psn == 102 && e->left == 2048);
	f->q.access &= ~(uint32_t)IBV_ACCESS_REMOTE_READ;
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	fx_free(f);
}

/* Opcode sequence and sizes (9.7.4.1.4): RC answers an invalid request;
 * UC drops to the next FIRST; a whole message is of any size. */
static void op_sequence(void)
{
	struct fx *f = fx_new(IBV_QPT_RC, 10);

	fx_pkt(f, OPC_SEND_MIDDLE, 10, 1024);
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	fx_pkt(f, OPC_SEND_FIRST, 10, 1000);
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	fx_pkt(f, OPC_SEND_ONLY, 10, 1025);
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	fx_pkt(f, OPC_SEND_FIRST, 10, 1024);
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	f->q.rflags |= SV_RF_IN_SEND; /* what EXECUTE leaves */
	f->q.epsn = 11;
	fx_pkt(f, OPC_WRITE_MIDDLE, 11, 1024);
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	fx_pkt(f, OPC_SEND_FIRST, 11, 1024);
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	fx_pkt(f, OPC_SEND_LAST, 11, 1);
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	f->q.rflags = 0;
	fx_pkt(f, OPC_SEND_ONLY, 11, 100000);
	EXPECT(check(f, &whole_ops) == RESPST_EXECUTE);
	EXPECT(sv_resp_syndrome(&f->q, RESPST_ERR_INV_REQ) ==
	       (SV_AETH_NAK | SV_NAK_INV_REQ));
	fx_free(f);

	f = fx_new(IBV_QPT_UC, 10);
	fx_pkt(f, OPC_WRITE_MIDDLE, 10, 1024);
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	EXPECT(f->q.rflags & SV_RF_UC_DROP);
	fx_pkt(f, OPC_WRITE_LAST, 11, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	fx_pkt(f, OPC_SEND_FIRST, 12, 1024);
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	EXPECT(!(f->q.rflags & SV_RF_UC_DROP));
	/* A gap loses the message in progress (9.8.3). */
	f->q.rflags |= SV_RF_IN_SEND;
	f->q.epsn = 13;
	fx_pkt(f, OPC_SEND_LAST, 15, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	EXPECT(!(f->q.rflags & SV_RF_IN_SEND));
	EXPECT(f->q.epsn == 16);
	EXPECT(ans.n == 0); /* UC answers nothing */
	fx_free(f);
}

/* The NAK each refusal answers with (table 44) and which check refuses. */
static void nak_syndromes(void)
{
	struct fx *f = fx_new(IBV_QPT_RC, 10);

	EXPECT(sv_resp_syndrome(&f->q, RESPST_NAK_SEQ) == 0x60);
	EXPECT(sv_resp_syndrome(&f->q, RESPST_ERR_INV_REQ) == 0x61);
	EXPECT(sv_resp_syndrome(&f->q, RESPST_ERR_LENGTH) == 0x61);
	EXPECT(sv_resp_syndrome(&f->q, RESPST_ERR_ACCESS) == 0x62);
	EXPECT(sv_resp_syndrome(&f->q, RESPST_ERR_OP) == 0x63);
	EXPECT(sv_resp_syndrome(&f->q, RESPST_ERR_LKEY) == 0x63);
	EXPECT(sv_resp_syndrome(&f->q, RESPST_ACKNOWLEDGE) == 0x1f);

	/* The QP's access flags, before any key. */
	f->q.access = IBV_ACCESS_REMOTE_READ;
	fx_pkt(f, OPC_WRITE_ONLY, 10, 8);
	f->pkt.dma_len = 8;
	rkey_answer = SV_KERR_OWNER;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_ACCESS);
	fx_pkt(f, OPC_FETCH_ADD, 10, 0);
	EXPECT(check(f, &stream_ops) == RESPST_ERR_ACCESS);
	/* The key: a violation is a remote access error, its memory's owner
	 * gone a remote operational error. */
	f->q.access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	rkey_answer = SV_KERR_BOUNDS;
	fx_pkt(f, OPC_WRITE_ONLY, 10, 8);
	f->pkt.dma_len = 8;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_ACCESS);
	rkey_answer = SV_KERR_OWNER;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_OP);
	rkey_answer = SV_KOK;
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	EXPECT(f->q.wr_left == 8);
	/* Lengths: more than the RETH says; a misaligned atomic. */
	f->pkt.dma_len = 4;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	fx_pkt(f, OPC_CMP_SWAP, 10, 0);
	f->pkt.va = 0x1004;
	EXPECT(check(f, &stream_ops) == RESPST_ERR_INV_REQ);
	f->pkt.va = 0x1008;
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	fx_free(f);

	/* UC takes access errors silently (9.8.3). */
	f = fx_new(IBV_QPT_UC, 10);
	f->q.access = 0;
	fx_pkt(f, OPC_WRITE_ONLY, 10, 8);
	f->pkt.dma_len = 8;
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	fx_free(f);
}

/* No receive WQE: RC answers an RNR NAK with the QP's timer, naming the
 * request's PSN, and drops what follows until the retry; UC drops. */
static void rnr(void)
{
	struct fx *f = fx_new(IBV_QPT_RC, 0xffffff);

	recv_posted = 0;
	fx_pkt(f, OPC_SEND_ONLY, 0xffffff, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(ans.n == 1 && ans.kind == SV_ROUT_RNR);
	EXPECT(ans.syn == (SV_AETH_RNR_NAK | 14));
	EXPECT(ans.psn == 0xffffff);
	EXPECT(f->q.rflags & SV_RF_NAK_SENT);
	/* The packet after it, across the wrap: no sequence NAK. */
	fx_pkt(f, OPC_SEND_ONLY, 0, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(ans.n == 1);
	/* A WRITE with immediate needs a receive too; one without not. */
	fx_pkt(f, OPC_WRITE_ONLY_IMM, 0xffffff, 8);
	f->pkt.dma_len = 8;
	EXPECT(check(f, &stream_ops) == RESPST_DONE);
	EXPECT(ans.n == 2 && ans.kind == SV_ROUT_RNR);
	fx_pkt(f, OPC_WRITE_ONLY, 0xffffff, 8);
	f->pkt.dma_len = 8;
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	/* The timer code is 5 bits (9.7.5.2.8). */
	f->q.min_rnr = 0x3f;
	EXPECT(sv_resp_syndrome(&f->q, RESPST_RNR) == (SV_AETH_RNR_NAK | 0x1f));
	/* A whole message (direct) has no packets after it to drop. */
	f->q.rflags = 0;
	f->q.min_rnr = 1;
	fx_pkt(f, OPC_SEND_ONLY, 0xffffff, 8);
	EXPECT(check(f, &whole_ops) == RESPST_DONE);
	EXPECT(ans.kind == SV_ROUT_RNR && ans.syn == (SV_AETH_RNR_NAK | 1));
	EXPECT(!(f->q.rflags & SV_RF_NAK_SENT));
	fx_free(f);

	f = fx_new(IBV_QPT_UC, 3);
	recv_posted = 0;
	fx_pkt(f, OPC_SEND_ONLY, 3, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	EXPECT(ans.n == 0);
	fx_free(f);
}

/* What is dropped before any sequence: a QP not ready, another
 * transport's opcode, a UD Q_Key that differs. */
static void qp_checks(void)
{
	struct fx *f = fx_new(IBV_QPT_RC, 0);

	f->q.state = IBV_QPS_INIT;
	fx_pkt(f, OPC_SEND_ONLY, 0, 8);
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	f->q.state = IBV_QPS_RTR;
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE);
	EXPECT(f->q.rflags & SV_RF_COMM_EST);
	EXPECT(f->q.events & SV_QEV_COMM_EST);
	f->pkt.opcode = OPC_UC | OPC_SEND_ONLY;
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	fx_free(f);

	f = fx_new(IBV_QPT_UD, 0);
	f->q.qkey = 0x11111111;
	fx_pkt(f, OPC_SEND_ONLY, 77, 8);
	f->pkt.qkey = 0x22222222;
	EXPECT(check(f, &stream_ops) == RESPST_DROP);
	f->pkt.qkey = 0x11111111;
	EXPECT(check(f, &stream_ops) == RESPST_EXECUTE); /* any PSN */
	fx_free(f);
}

int main(void)
{
	psn_arithmetic();
	psn_new_ahead();
	psn_duplicate();
	duplicate_atomic();
	duplicate_read();
	atomic_write();
	op_sequence();
	nak_syndromes();
	rnr();
	qp_checks();
	return unit_result();
}

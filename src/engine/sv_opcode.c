/* SPDX-License-Identifier: MIT */
/*
 * The opcode tables (sv_opcode.h): by transport opcode (IBTA 9.2.1, table
 * 39: which headers each carries, what it does, where it sits in a
 * message), and by work-request opcode (what posting, the requester and
 * the completer need to know of each).
 */
#include "sv_opcode.h"
#include "sv_hdr.h"

#include <string.h>

#define RC(op) (0x00 | (op))
#define UC(op) (0x20 | (op))
#define UD(op) (0x60 | (op))
#define XRC(op) (0xa0 | (op))
/* An XRC request: RC's headers with the XRCETH after the BTH (9.3.1.2);
 * XRC responses are RC's under the XRC transport bits. */
#define XR (OP_XRCETH)

const struct sv_opinfo sv_opcodes[256] = {
	[RC(0x00)] = { "RC_SEND_FIRST", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_PAYLOAD },
	[RC(0x01)] = { "RC_SEND_MIDDLE", OP_VALID | OP_REQ | OP_SEND | OP_MIDDLE | OP_PAYLOAD },
	[RC(0x02)] = { "RC_SEND_LAST", OP_VALID | OP_REQ | OP_SEND | OP_LAST | OP_PAYLOAD },
	[RC(0x03)] = { "RC_SEND_LAST_IMM", OP_VALID | OP_REQ | OP_SEND | OP_LAST | OP_PAYLOAD | OP_IMM },
	[RC(0x04)] = { "RC_SEND_ONLY", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD },
	[RC(0x05)] = { "RC_SEND_ONLY_IMM", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_IMM },
	[RC(0x06)] = { "RC_WRITE_FIRST", OP_VALID | OP_REQ | OP_WRITE | OP_FIRST | OP_PAYLOAD | OP_RETH },
	[RC(0x07)] = { "RC_WRITE_MIDDLE", OP_VALID | OP_REQ | OP_WRITE | OP_MIDDLE | OP_PAYLOAD },
	[RC(0x08)] = { "RC_WRITE_LAST", OP_VALID | OP_REQ | OP_WRITE | OP_LAST | OP_PAYLOAD },
	[RC(0x09)] = { "RC_WRITE_LAST_IMM", OP_VALID | OP_REQ | OP_WRITE | OP_LAST | OP_PAYLOAD | OP_IMM },
	[RC(0x0a)] = { "RC_WRITE_ONLY", OP_VALID | OP_REQ | OP_WRITE | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_RETH },
	[RC(0x0b)] = { "RC_WRITE_ONLY_IMM", OP_VALID | OP_REQ | OP_WRITE | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_RETH | OP_IMM },
	[RC(0x0c)] = { "RC_READ_REQUEST", OP_VALID | OP_REQ | OP_READ | OP_FIRST | OP_LAST | OP_RETH },
	[RC(0x0d)] = { "RC_READ_RESPONSE_FIRST", OP_VALID | OP_RESP | OP_READ | OP_FIRST | OP_PAYLOAD | OP_AETH },
	[RC(0x0e)] = { "RC_READ_RESPONSE_MIDDLE", OP_VALID | OP_RESP | OP_READ | OP_MIDDLE | OP_PAYLOAD },
	[RC(0x0f)] = { "RC_READ_RESPONSE_LAST", OP_VALID | OP_RESP | OP_READ | OP_LAST | OP_PAYLOAD | OP_AETH },
	[RC(0x10)] = { "RC_READ_RESPONSE_ONLY", OP_VALID | OP_RESP | OP_READ | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_AETH },
	[RC(0x11)] = { "RC_ACKNOWLEDGE", OP_VALID | OP_RESP | OP_ACK | OP_FIRST | OP_LAST | OP_AETH },
	[RC(0x12)] = { "RC_ATOMIC_ACKNOWLEDGE", OP_VALID | OP_RESP | OP_ATOMIC | OP_FIRST | OP_LAST | OP_AETH | OP_ATMACK },
	[RC(0x13)] = { "RC_COMPARE_SWAP", OP_VALID | OP_REQ | OP_ATOMIC | OP_FIRST | OP_LAST | OP_ATMETH },
	[RC(0x14)] = { "RC_FETCH_ADD", OP_VALID | OP_REQ | OP_ATOMIC | OP_FIRST | OP_LAST | OP_ATMETH },
	[RC(0x16)] = { "RC_SEND_LAST_INV", OP_VALID | OP_REQ | OP_SEND | OP_LAST | OP_PAYLOAD | OP_IETH },
	[RC(0x17)] = { "RC_SEND_ONLY_INV", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_IETH },
	/* IBTA 1.5 (rxe since Linux 6.2): a RETH and the 8 bytes. */
	[RC(0x1d)] = { "RC_ATOMIC_WRITE", OP_VALID | OP_REQ | OP_ATOMIC_WRITE | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_RETH },
	[UC(0x00)] = { "UC_SEND_FIRST", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_PAYLOAD },
	[UC(0x01)] = { "UC_SEND_MIDDLE", OP_VALID | OP_REQ | OP_SEND | OP_MIDDLE | OP_PAYLOAD },
	[UC(0x02)] = { "UC_SEND_LAST", OP_VALID | OP_REQ | OP_SEND | OP_LAST | OP_PAYLOAD },
	[UC(0x03)] = { "UC_SEND_LAST_IMM", OP_VALID | OP_REQ | OP_SEND | OP_LAST | OP_PAYLOAD | OP_IMM },
	[UC(0x04)] = { "UC_SEND_ONLY", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD },
	[UC(0x05)] = { "UC_SEND_ONLY_IMM", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_IMM },
	[UC(0x06)] = { "UC_WRITE_FIRST", OP_VALID | OP_REQ | OP_WRITE | OP_FIRST | OP_PAYLOAD | OP_RETH },
	[UC(0x07)] = { "UC_WRITE_MIDDLE", OP_VALID | OP_REQ | OP_WRITE | OP_MIDDLE | OP_PAYLOAD },
	[UC(0x08)] = { "UC_WRITE_LAST", OP_VALID | OP_REQ | OP_WRITE | OP_LAST | OP_PAYLOAD },
	[UC(0x09)] = { "UC_WRITE_LAST_IMM", OP_VALID | OP_REQ | OP_WRITE | OP_LAST | OP_PAYLOAD | OP_IMM },
	[UC(0x0a)] = { "UC_WRITE_ONLY", OP_VALID | OP_REQ | OP_WRITE | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_RETH },
	[UC(0x0b)] = { "UC_WRITE_ONLY_IMM", OP_VALID | OP_REQ | OP_WRITE | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_RETH | OP_IMM },
	[UD(0x04)] = { "UD_SEND_ONLY", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_DETH },
	[UD(0x05)] = { "UD_SEND_ONLY_IMM", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_DETH | OP_IMM },
	/* XRC (IBTA 9.2.1 transport 101; what rxe's XRC tables give): the
	 * requests carry an XRCETH, the answers are RC's. */
	[XRC(0x00)] = { "XRC_SEND_FIRST", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_PAYLOAD | XR },
	[XRC(0x01)] = { "XRC_SEND_MIDDLE", OP_VALID | OP_REQ | OP_SEND | OP_MIDDLE | OP_PAYLOAD | XR },
	[XRC(0x02)] = { "XRC_SEND_LAST", OP_VALID | OP_REQ | OP_SEND | OP_LAST | OP_PAYLOAD | XR },
	[XRC(0x03)] = { "XRC_SEND_LAST_IMM", OP_VALID | OP_REQ | OP_SEND | OP_LAST | OP_PAYLOAD | OP_IMM | XR },
	[XRC(0x04)] = { "XRC_SEND_ONLY", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD | XR },
	[XRC(0x05)] = { "XRC_SEND_ONLY_IMM", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_IMM | XR },
	[XRC(0x06)] = { "XRC_WRITE_FIRST", OP_VALID | OP_REQ | OP_WRITE | OP_FIRST | OP_PAYLOAD | OP_RETH | XR },
	[XRC(0x07)] = { "XRC_WRITE_MIDDLE", OP_VALID | OP_REQ | OP_WRITE | OP_MIDDLE | OP_PAYLOAD | XR },
	[XRC(0x08)] = { "XRC_WRITE_LAST", OP_VALID | OP_REQ | OP_WRITE | OP_LAST | OP_PAYLOAD | XR },
	[XRC(0x09)] = { "XRC_WRITE_LAST_IMM", OP_VALID | OP_REQ | OP_WRITE | OP_LAST | OP_PAYLOAD | OP_IMM | XR },
	[XRC(0x0a)] = { "XRC_WRITE_ONLY", OP_VALID | OP_REQ | OP_WRITE | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_RETH | XR },
	[XRC(0x0b)] = { "XRC_WRITE_ONLY_IMM", OP_VALID | OP_REQ | OP_WRITE | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_RETH | OP_IMM | XR },
	[XRC(0x0c)] = { "XRC_READ_REQUEST", OP_VALID | OP_REQ | OP_READ | OP_FIRST | OP_LAST | OP_RETH | XR },
	[XRC(0x0d)] = { "XRC_READ_RESPONSE_FIRST", OP_VALID | OP_RESP | OP_READ | OP_FIRST | OP_PAYLOAD | OP_AETH },
	[XRC(0x0e)] = { "XRC_READ_RESPONSE_MIDDLE", OP_VALID | OP_RESP | OP_READ | OP_MIDDLE | OP_PAYLOAD },
	[XRC(0x0f)] = { "XRC_READ_RESPONSE_LAST", OP_VALID | OP_RESP | OP_READ | OP_LAST | OP_PAYLOAD | OP_AETH },
	[XRC(0x10)] = { "XRC_READ_RESPONSE_ONLY", OP_VALID | OP_RESP | OP_READ | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_AETH },
	[XRC(0x11)] = { "XRC_ACKNOWLEDGE", OP_VALID | OP_RESP | OP_ACK | OP_FIRST | OP_LAST | OP_AETH },
	[XRC(0x12)] = { "XRC_ATOMIC_ACKNOWLEDGE", OP_VALID | OP_RESP | OP_ATOMIC | OP_FIRST | OP_LAST | OP_AETH | OP_ATMACK },
	[XRC(0x13)] = { "XRC_COMPARE_SWAP", OP_VALID | OP_REQ | OP_ATOMIC | OP_FIRST | OP_LAST | OP_ATMETH | XR },
	[XRC(0x14)] = { "XRC_FETCH_ADD", OP_VALID | OP_REQ | OP_ATOMIC | OP_FIRST | OP_LAST | OP_ATMETH | XR },
	[XRC(0x16)] = { "XRC_SEND_LAST_INV", OP_VALID | OP_REQ | OP_SEND | OP_LAST | OP_PAYLOAD | OP_IETH | XR },
	[XRC(0x17)] = { "XRC_SEND_ONLY_INV", OP_VALID | OP_REQ | OP_SEND | OP_FIRST | OP_LAST | OP_PAYLOAD | OP_IETH | XR },
};

/* By work-request opcode.  Positions: first, middle, last, only. */
#define NONE SV_OPC_NONE
#define ALL(o) { (o), (o), (o), (o) }
#define RDMA_RW (SV_WR_RC | SV_WR_UC | SV_WR_XRC)
#define RC_ONLY (SV_WR_RC | SV_WR_XRC) /* reliable connected: RC, XRC */
#define ANY_QP (SV_WR_RC | SV_WR_UC | SV_WR_UD | SV_WR_XRC)

const struct sv_wrinfo sv_wr_opcodes[SV_WR_OPCODES] = {
	[IBV_WR_SEND] = {
		"SEND", ANY_QP | SV_WR_SEND | SV_WR_INLINE | SV_WR_RECV,
		{ OPC_SEND_FIRST, OPC_SEND_MIDDLE, OPC_SEND_LAST,
		  OPC_SEND_ONLY },
		IBV_WC_SEND, 0 },
	[IBV_WR_SEND_WITH_IMM] = {
		"SEND_WITH_IMM",
		ANY_QP | SV_WR_SEND | SV_WR_IMM | SV_WR_INLINE | SV_WR_RECV,
		{ OPC_SEND_FIRST, OPC_SEND_MIDDLE, OPC_SEND_LAST_IMM,
		  OPC_SEND_ONLY_IMM },
		IBV_WC_SEND, 0 },
	[IBV_WR_SEND_WITH_INV] = {
		"SEND_WITH_INV",
		RC_ONLY | SV_WR_SEND | SV_WR_INV | SV_WR_INLINE | SV_WR_RECV,
		{ OPC_SEND_FIRST, OPC_SEND_MIDDLE, OPC_SEND_LAST_INV,
		  OPC_SEND_ONLY_INV },
		IBV_WC_SEND, 0 },
	[IBV_WR_RDMA_WRITE] = {
		"RDMA_WRITE",
		RDMA_RW | SV_WR_WRITE | SV_WR_INLINE | SV_WR_REMOTE,
		{ OPC_WRITE_FIRST, OPC_WRITE_MIDDLE, OPC_WRITE_LAST,
		  OPC_WRITE_ONLY },
		IBV_WC_RDMA_WRITE, IBV_ACCESS_REMOTE_WRITE },
	[IBV_WR_RDMA_WRITE_WITH_IMM] = {
		"RDMA_WRITE_WITH_IMM",
		RDMA_RW | SV_WR_WRITE | SV_WR_IMM | SV_WR_INLINE |
			SV_WR_REMOTE | SV_WR_RECV,
		{ OPC_WRITE_FIRST, OPC_WRITE_MIDDLE, OPC_WRITE_LAST_IMM,
		  OPC_WRITE_ONLY_IMM },
		IBV_WC_RDMA_WRITE, IBV_ACCESS_REMOTE_WRITE },
	[IBV_WR_RDMA_READ] = {
		"RDMA_READ", RC_ONLY | SV_WR_READ | SV_WR_REMOTE,
		ALL(OPC_READ_REQ), IBV_WC_RDMA_READ, IBV_ACCESS_REMOTE_READ },
	[IBV_WR_ATOMIC_CMP_AND_SWP] = {
		"ATOMIC_CMP_AND_SWP", RC_ONLY | SV_WR_ATOMIC | SV_WR_REMOTE,
		ALL(OPC_CMP_SWAP), IBV_WC_COMP_SWAP,
		IBV_ACCESS_REMOTE_ATOMIC },
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = {
		"ATOMIC_FETCH_AND_ADD", RC_ONLY | SV_WR_ATOMIC | SV_WR_REMOTE,
		ALL(OPC_FETCH_ADD), IBV_WC_FETCH_ADD,
		IBV_ACCESS_REMOTE_ATOMIC },
	[IBV_WR_LOCAL_INV] = {
		"LOCAL_INV", RDMA_RW | SV_WR_LOCAL | SV_WR_INV, ALL(NONE),
		IBV_WC_LOCAL_INV, 0 },
	[IBV_WR_BIND_MW] = {
		"BIND_MW", RDMA_RW | SV_WR_LOCAL, ALL(NONE), IBV_WC_BIND_MW,
		0 },
	/* RC only (rxe's table gives it no other type, XRC included); the
	 * target grants remote WRITE, as rxe's responder asks of both the QP
	 * and the MR. */
	[IBV_WR_ATOMIC_WRITE] = {
		"ATOMIC_WRITE",
		SV_WR_RC | SV_WR_ATOMIC_WRITE | SV_WR_INLINE | SV_WR_REMOTE,
		ALL(OPC_ATOMIC_WRITE), IBV_WC_ATOMIC_WRITE,
		IBV_ACCESS_REMOTE_WRITE },
	/* TSO, DRIVER1, FLUSH: not taken (no QP types). */
};

#undef NONE
#undef ALL
#undef RDMA_RW
#undef RC_ONLY
#undef ANY_QP
#undef XR

/* Header bytes after the BTH, in the order of 9.2: DETH, XRCETH, RETH,
 * AtomicETH, AETH, AtomicAckETH, ImmDt, IETH. */
unsigned sv_op_hdr_len(uint32_t flags)
{
	return SV_BTH_BYTES + ((flags & OP_DETH) ? SV_DETH_BYTES : 0) +
	       ((flags & OP_XRCETH) ? SV_XRCETH_BYTES : 0) +
	       ((flags & OP_RETH) ? SV_RETH_BYTES : 0) +
	       ((flags & OP_ATMETH) ? SV_ATMETH_BYTES : 0) +
	       ((flags & OP_AETH) ? SV_AETH_BYTES : 0) +
	       ((flags & OP_ATMACK) ? SV_ATMACK_BYTES : 0) +
	       ((flags & OP_IMM) ? SV_IMMDT_BYTES : 0) +
	       ((flags & OP_IETH) ? SV_IETH_BYTES : 0);
}

int sv_pkt_parse(struct sv_pkt *pkt, const uint8_t *buf, uint32_t len,
		 int grh)
{
	const struct sv_opinfo *oi;
	const uint8_t *p = buf;
	unsigned hl;

	memset(pkt, 0, sizeof(*pkt));
	if (grh) {
		if (len < SV_GRH_BYTES)
			return -1;
		pkt->grh = p;
		p += SV_GRH_BYTES;
		len -= SV_GRH_BYTES;
	}
	if (len < SV_BTH_BYTES)
		return -1;
	pkt->bth = p;
	pkt->opcode = __bth_opcode(p);
	oi = &sv_opcodes[pkt->opcode];
	if (!(oi->flags & OP_VALID))
		return -1;
	pkt->flags = oi->flags;
	hl = sv_op_hdr_len(oi->flags);
	if (len < hl)
		return -1;
	pkt->qpn = __bth_qpn(p);
	pkt->psn = __bth_psn(p);
	pkt->se = (uint8_t)__bth_se(p);
	pkt->ackreq = (uint8_t)__bth_ackreq(p);
	p += SV_BTH_BYTES;
	if (oi->flags & OP_DETH) {
		pkt->qkey = __deth_qkey(p);
		pkt->src_qpn = __deth_sqp(p);
		p += SV_DETH_BYTES;
	}
	if (oi->flags & OP_XRCETH) {
		pkt->srqn = __xrceth_srqn(p);
		p += SV_XRCETH_BYTES;
	}
	if (oi->flags & OP_RETH) {
		pkt->va = __reth_va(p);
		pkt->rkey = __reth_rkey(p);
		pkt->dma_len = __reth_len(p);
		p += SV_RETH_BYTES;
	}
	if (oi->flags & OP_ATMETH) {
		pkt->va = __atmeth_va(p);
		pkt->rkey = __atmeth_rkey(p);
		pkt->swap = __atmeth_swap(p);
		pkt->comp = __atmeth_comp(p);
		p += SV_ATMETH_BYTES;
	}
	if (oi->flags & OP_AETH) {
		pkt->syn = __aeth_syn(p);
		pkt->msn = __aeth_msn(p);
		p += SV_AETH_BYTES;
	}
	if (oi->flags & OP_ATMACK) {
		pkt->orig = __atmack_orig(p);
		p += SV_ATMACK_BYTES;
	}
	if (oi->flags & OP_IMM) {
		pkt->imm = __immdt_raw(p);
		p += SV_IMMDT_BYTES;
	}
	if (oi->flags & OP_IETH) {
		pkt->inv_rkey = __ieth_rkey(p);
		p += SV_IETH_BYTES;
	}
	pkt->payload = p;
	pkt->paylen = len - hl;
	if (pkt->paylen && !(oi->flags & OP_PAYLOAD))
		return -1;
	return 0;
}

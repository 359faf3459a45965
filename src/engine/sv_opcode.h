/* SPDX-License-Identifier: MIT */
/*
 * The opcode tables (sv_opcode.c), every opcode fact in one place:
 *
 *   - sv_opcodes[256], by IBTA transport opcode (9.2.1, table 39): which
 *     headers a packet carries (sv_hdr.h lays them out), what it does,
 *     where it sits in a message;
 *   - sv_wr_opcodes[], by work-request opcode (enum ibv_wr_opcode): which
 *     QP types take it, the transport opcode of each packet of its
 *     message, whether it reads or is an atomic (and so holds one of the
 *     initiator's RDMA READ/atomic credits), what it completes as, the
 *     remote access the target must grant, whether it consumes a receive
 *     there, whether its payload may be inline.
 * Posting (src/verbs/post.c, qp_ex.c), the requester (sv_req.c), direct
 * execution (sv_direct.c) and the completer (sv_comp.c) ask these tables;
 * tests/unit/test_hdr.c checks that the two agree.
 */
#ifndef SV_OPCODE_H
#define SV_OPCODE_H

#include <stdint.h>

#include <infiniband/verbs.h>

enum {
	OP_VALID = 1 << 0,
	OP_REQ = 1 << 1,
	OP_RESP = 1 << 2,
	OP_SEND = 1 << 3,
	OP_WRITE = 1 << 4,
	OP_READ = 1 << 5,
	OP_ATOMIC = 1 << 6,
	OP_ACK = 1 << 7,
	OP_FIRST = 1 << 8,
	OP_MIDDLE = 1 << 9,
	OP_LAST = 1 << 10,
	OP_PAYLOAD = 1 << 11,
	OP_RETH = 1 << 12,
	OP_AETH = 1 << 13,
	OP_ATMETH = 1 << 14,
	OP_ATMACK = 1 << 15,
	OP_IMM = 1 << 16,
	OP_IETH = 1 << 17,
	OP_DETH = 1 << 18,
	OP_ATOMIC_WRITE = 1 << 19, /* IBTA 1.5 ATOMIC WRITE (not OP_WRITE) */
	OP_XRCETH = 1 << 20,	   /* an XRC request: XRCETH after the BTH */
};

struct sv_opinfo {
	const char *name;
	uint32_t flags;
};
extern const struct sv_opinfo sv_opcodes[256];

/* Opcode numbers (low 5 bits; | 0x20 for UC, | 0x60 for UD, | 0xa0 for
 * XRC). */
enum {
	OPC_SEND_FIRST = 0x00,
	OPC_SEND_MIDDLE = 0x01,
	OPC_SEND_LAST = 0x02,
	OPC_SEND_LAST_IMM = 0x03,
	OPC_SEND_ONLY = 0x04,
	OPC_SEND_ONLY_IMM = 0x05,
	OPC_WRITE_FIRST = 0x06,
	OPC_WRITE_MIDDLE = 0x07,
	OPC_WRITE_LAST = 0x08,
	OPC_WRITE_LAST_IMM = 0x09,
	OPC_WRITE_ONLY = 0x0a,
	OPC_WRITE_ONLY_IMM = 0x0b,
	OPC_READ_REQ = 0x0c,
	OPC_READ_RESP_FIRST = 0x0d,
	OPC_READ_RESP_MIDDLE = 0x0e,
	OPC_READ_RESP_LAST = 0x0f,
	OPC_READ_RESP_ONLY = 0x10,
	OPC_ACK = 0x11,
	OPC_ATOMIC_ACK = 0x12,
	OPC_CMP_SWAP = 0x13,
	OPC_FETCH_ADD = 0x14,
	OPC_SEND_LAST_INV = 0x16,
	OPC_SEND_ONLY_INV = 0x17,
	OPC_ATOMIC_WRITE = 0x1d, /* IBTA 1.5, RC only: RETH + 8 bytes */
};
#define OPC_UC 0x20
#define OPC_UD 0x60
#define OPC_XRC 0xa0

/* A parsed packet: header fields in host order, payload in place. */
struct sv_pkt {
	const uint8_t *grh, *bth;
	uint8_t opcode;
	uint8_t se;	/* solicited event */
	uint8_t ackreq;
	uint32_t flags; /* sv_opcodes[opcode].flags */
	uint32_t qpn, psn;
	uint64_t va;
	uint32_t rkey, dma_len;
	uint64_t swap, comp, orig;
	uint8_t syn;
	uint32_t msn;
	uint32_t imm; /* network order, as ibv_wc.imm_data */
	uint32_t inv_rkey;
	uint32_t qkey, src_qpn;
	uint32_t srqn; /* XRC: the XRCETH's SRQ number */
	const uint8_t *payload;
	uint32_t paylen;
};

unsigned sv_op_hdr_len(uint32_t flags);
/* Parses buf (len bytes, a GRH first when grh).  Returns 0 or -1 for a
 * packet that is not one (the caller drops it). */
int sv_pkt_parse(struct sv_pkt *pkt, const uint8_t *buf, uint32_t len,
		 int grh);

/* ---------------------------------------------- work-request opcodes -- */

/* sv_wrinfo.flags */
enum {
	SV_WR_RC = 1 << 0, /* QP types that take it */
	SV_WR_UC = 1 << 1,
	SV_WR_UD = 1 << 2,
	SV_WR_XRC = 1 << 14, /* an XRC INI QP (IBV_QPT_XRC_SEND) */
	SV_WR_QPT_MASK = SV_WR_RC | SV_WR_UC | SV_WR_UD | SV_WR_XRC,
	SV_WR_SEND = 1 << 3,   /* a SEND message */
	SV_WR_WRITE = 1 << 4,  /* an RDMA WRITE message */
	SV_WR_READ = 1 << 5,   /* an RDMA READ: the data comes back */
	SV_WR_ATOMIC = 1 << 6, /* an atomic: 8 bytes come back */
	SV_WR_LOCAL = 1 << 7,  /* no packet: served by the daemon (MW bind,
				  local invalidate) */
	SV_WR_IMM = 1 << 8,    /* carries immediate data (ImmDt) */
	SV_WR_INV = 1 << 9,    /* carries an R_Key to invalidate (IETH) */
	SV_WR_INLINE = 1 << 10, /* IBV_SEND_INLINE applies (else ignored) */
	SV_WR_RECV = 1 << 11,  /* consumes a receive WQE at the target */
	SV_WR_REMOTE = 1 << 12, /* names remote memory: remote_addr, rkey */
	SV_WR_ATOMIC_WRITE = 1 << 13, /* an ATOMIC WRITE: 8 bytes stored as
					 one unit; answered by an RDMA READ
					 response of no data */
};
/* Holds one of the initiator's outstanding RDMA READ/atomic credits
 * (the QP's max_rd_atomic): a READ, an atomic, an ATOMIC WRITE (rxe's
 * requester counts it, and its responder keeps a resource for it). */
#define SV_WR_RD_ATOMIC (SV_WR_READ | SV_WR_ATOMIC | SV_WR_ATOMIC_WRITE)

/* The transport opcode of a message's packet by its position. */
enum sv_wr_pos { SV_POS_FIRST, SV_POS_MIDDLE, SV_POS_LAST, SV_POS_ONLY };
#define SV_OPC_NONE 0xff

/*
 * One work-request opcode.
 *
 * | field  | meaning                                                   |
 * |--------|-----------------------------------------------------------|
 * | name   | its IBV_WR_ name; NULL for an opcode we do not take       |
 * | flags  | SV_WR_*                                                   |
 * | opc    | transport opcode by enum sv_wr_pos, RC numbering (the     |
 * |        | requester adds OPC_UC / OPC_UD); SV_OPC_NONE: no packet.  |
 * |        | A READ request and an atomic are one packet whatever the  |
 * |        | length, so every position names it                        |
 * | wc     | enum ibv_wc_opcode of its send completion                 |
 * | access | IBV_ACCESS_REMOTE_* the target's MR (or QP) must grant    |
 */
struct sv_wrinfo {
	const char *name;
	uint32_t flags;
	uint8_t opc[4];
	uint8_t wc;
	uint8_t access;
};
#define SV_WR_OPCODES 32
extern const struct sv_wrinfo sv_wr_opcodes[SV_WR_OPCODES];

/* The row of op (a row without QP types when we do not take op). */
static inline const struct sv_wrinfo *sv_wrinfo(uint32_t op)
{
	static const struct sv_wrinfo none = {
		NULL, 0,
		{ SV_OPC_NONE, SV_OPC_NONE, SV_OPC_NONE, SV_OPC_NONE }, 0, 0
	};

	return op < SV_WR_OPCODES ? &sv_wr_opcodes[op] : &none;
}

/* The SV_WR_ QP-type bit of type; 0 for the types we do not send on. */
static inline uint32_t sv_wr_qpt(enum ibv_qp_type type)
{
	return type == IBV_QPT_RC	? SV_WR_RC :
	       type == IBV_QPT_UC	? SV_WR_UC :
	       type == IBV_QPT_UD	? SV_WR_UD :
	       type == IBV_QPT_XRC_SEND ? SV_WR_XRC :
					  0;
}

/* A reliable connected QP: RC, or either end of XRC (an INI QP sends as
 * an RC requester, a TGT QP answers as an RC responder: IBTA 9.7, with
 * the XRC opcodes and XRCETH of 9.3.1.2). */
static inline int sv_qpt_rc(uint32_t type)
{
	return type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND ||
	       type == IBV_QPT_XRC_RECV;
}

/* The transport bits (9.2.1) a QP of type sends its packets with, to be
 * or-ed into an opcode of RC numbering. */
static inline uint8_t sv_opc_transport(uint32_t type)
{
	return type == IBV_QPT_UC ? OPC_UC :
	       type == IBV_QPT_UD ? OPC_UD :
	       (type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV) ?
				    OPC_XRC :
				    0;
}

/* A QP of type takes work requests of opcode op (IBTA ch. 10: the
 * operations each service type supports). */
static inline int sv_wr_takes(enum ibv_qp_type type, uint32_t op)
{
	return !!(sv_wrinfo(op)->flags & sv_wr_qpt(type));
}

/* The transport opcode (RC numbering: sv_opc_transport's bits are the
 * caller's) of a packet of a message of op at a position: SV_OPC_NONE
 * for an opcode that sends no packet. */
static inline uint8_t sv_req_opcode(uint32_t op, int first, int last)
{
	const struct sv_wrinfo *wi = sv_wrinfo(op);

	if (!(wi->flags & SV_WR_QPT_MASK))
		return SV_OPC_NONE;
	return wi->opc[first && last ? SV_POS_ONLY :
		       first	      ? SV_POS_FIRST :
		       last	      ? SV_POS_LAST :
					SV_POS_MIDDLE];
}

/* op asks for data back (a READ or an atomic), so only its response
 * completes it; an ATOMIC WRITE is not one (its answer carries nothing,
 * and a later ACK implies it, as rxe's completer takes it). */
static inline int sv_is_read_or_atomic(uint32_t op)
{
	return !!(sv_wrinfo(op)->flags & (SV_WR_READ | SV_WR_ATOMIC));
}

/* op holds a READ/atomic credit while outstanding (SV_WR_RD_ATOMIC): a
 * fence and max_rd_atomic wait for it. */
static inline int sv_wr_rd_credit(uint32_t op)
{
	return !!(sv_wrinfo(op)->flags & SV_WR_RD_ATOMIC);
}

#endif

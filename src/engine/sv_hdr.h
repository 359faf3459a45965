/* SPDX-License-Identifier: MIT */
/*
 * IBTA transport headers (IBTA vol. 1, ch. 9.2-9.3), big-endian on the
 * link exactly as on the wire.  Every field has a pair of accessors that
 * own the byte order: __bth_psn(p) / bth_set_psn(p, v) work on the raw
 * header, so no code outside this file shifts or swaps.
 *
 * A packet on a ring (one record, sv_ring.h) is:
 *   [GRH 40 bytes, UD only: record type has SV_REC_F_GRH]
 *   BTH 12 | extension headers by opcode (sv_opcode.c) | payload
 * There is no ICRC on a ring (shared memory does not corrupt) and the pad
 * count is always 0: the payload length is what is left of the record.
 */
#ifndef SV_HDR_H
#define SV_HDR_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ld_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}
static inline void st_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}
static inline uint32_t ld_be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}
static inline void st_be24(uint8_t *p, uint32_t v)
{
	p[0] = v >> 16, p[1] = v >> 8, p[2] = v;
}
static inline uint64_t ld_be64(const uint8_t *p)
{
	return (uint64_t)ld_be32(p) << 32 | ld_be32(p + 4);
}
static inline void st_be64(uint8_t *p, uint64_t v)
{
	st_be32(p, v >> 32);
	st_be32(p + 4, (uint32_t)v);
}

/* Header sizes. */
#define SV_GRH_BYTES 40
#define SV_BTH_BYTES 12
#define SV_RETH_BYTES 16
#define SV_AETH_BYTES 4
#define SV_ATMETH_BYTES 28
#define SV_ATMACK_BYTES 8
#define SV_IMMDT_BYTES 4
#define SV_IETH_BYTES 4
#define SV_DETH_BYTES 8

/*
 * BTH (9.2):
 * | byte | bits | field                                              |
 * |------|------|----------------------------------------------------|
 * | 0    | 8    | OpCode                                             |
 * | 1    | 1,1,2,4 | SE, MigReq, PadCnt, TVer                         |
 * | 2-3  | 16   | P_Key                                              |
 * | 4    | 8    | reserved (FECN/BECN on RoCE)                       |
 * | 5-7  | 24   | DestQP                                             |
 * | 8    | 1,7  | AckReq, reserved                                   |
 * | 9-11 | 24   | PSN                                                |
 */
static inline uint8_t __bth_opcode(const uint8_t *b) { return b[0]; }
static inline int __bth_se(const uint8_t *b) { return b[1] >> 7; }
static inline int __bth_pad(const uint8_t *b) { return (b[1] >> 4) & 3; }
static inline int __bth_tver(const uint8_t *b) { return b[1] & 0xf; }
static inline uint16_t __bth_pkey(const uint8_t *b)
{
	return (uint16_t)(b[2] << 8 | b[3]);
}
static inline uint32_t __bth_qpn(const uint8_t *b) { return ld_be24(b + 5); }
static inline int __bth_ackreq(const uint8_t *b) { return b[8] >> 7; }
static inline uint32_t __bth_psn(const uint8_t *b) { return ld_be24(b + 9); }

static inline void bth_init(uint8_t *b, uint8_t opcode, int se, uint16_t pkey,
			    uint32_t qpn, int ackreq, uint32_t psn)
{
	b[0] = opcode;
	b[1] = (uint8_t)((se ? 0x80 : 0) | 0x40 /* MigReq: migrated */);
	b[2] = pkey >> 8, b[3] = (uint8_t)pkey;
	b[4] = 0;
	st_be24(b + 5, qpn);
	b[8] = ackreq ? 0x80 : 0;
	st_be24(b + 9, psn);
}

/* RETH (9.3.3): VA 8, R_Key 4, DMA length 4. */
static inline uint64_t __reth_va(const uint8_t *h) { return ld_be64(h); }
static inline uint32_t __reth_rkey(const uint8_t *h) { return ld_be32(h + 8); }
static inline uint32_t __reth_len(const uint8_t *h) { return ld_be32(h + 12); }
static inline void reth_set(uint8_t *h, uint64_t va, uint32_t rkey,
			    uint32_t len)
{
	st_be64(h, va);
	st_be32(h + 8, rkey);
	st_be32(h + 12, len);
}

/* AETH (9.3.6): syndrome 1, MSN 3. */
static inline uint8_t __aeth_syn(const uint8_t *h) { return h[0]; }
static inline uint32_t __aeth_msn(const uint8_t *h) { return ld_be24(h + 1); }
static inline void aeth_set(uint8_t *h, uint8_t syn, uint32_t msn)
{
	h[0] = syn;
	st_be24(h + 1, msn);
}

/* Syndromes (9.7.5.1.1, table 44). */
#define SV_AETH_TYPE_MASK 0xe0
#define SV_AETH_ACK 0x00
#define SV_AETH_RNR_NAK 0x20
#define SV_AETH_NAK 0x60
#define SV_AETH_ACK_UNLIMITED 0x1f /* credit field: no flow control */
#define SV_NAK_PSN_SEQ 0
#define SV_NAK_INV_REQ 1
#define SV_NAK_REM_ACCESS 2
#define SV_NAK_REM_OP 3

/* AtomicETH (9.3.4): VA 8, R_Key 4, Swap 8, Compare 8. */
static inline uint64_t __atmeth_va(const uint8_t *h) { return ld_be64(h); }
static inline uint32_t __atmeth_rkey(const uint8_t *h)
{
	return ld_be32(h + 8);
}
static inline uint64_t __atmeth_swap(const uint8_t *h)
{
	return ld_be64(h + 12);
}
static inline uint64_t __atmeth_comp(const uint8_t *h)
{
	return ld_be64(h + 20);
}
static inline void atmeth_set(uint8_t *h, uint64_t va, uint32_t rkey,
			      uint64_t swap, uint64_t comp)
{
	st_be64(h, va);
	st_be32(h + 8, rkey);
	st_be64(h + 12, swap);
	st_be64(h + 20, comp);
}

/* AtomicAckETH (9.5.3): original remote data. */
static inline uint64_t __atmack_orig(const uint8_t *h) { return ld_be64(h); }
static inline void atmack_set(uint8_t *h, uint64_t v) { st_be64(h, v); }

/* ImmDt and IETH carry 32 bits each; imm_data stays in network order as
 * ibv_send_wr.imm_data and ibv_wc.imm_data are, so it is copied as is. */
static inline uint32_t __immdt_raw(const uint8_t *h)
{
	uint32_t v;

	memcpy(&v, h, 4);
	return v;
}
static inline void immdt_set_raw(uint8_t *h, uint32_t v) { memcpy(h, &v, 4); }
static inline uint32_t __ieth_rkey(const uint8_t *h) { return ld_be32(h); }
static inline void ieth_set(uint8_t *h, uint32_t rkey) { st_be32(h, rkey); }

/* DETH (9.3.2): Q_Key 4, reserved 1, SrcQP 3. */
static inline uint32_t __deth_qkey(const uint8_t *h) { return ld_be32(h); }
static inline uint32_t __deth_sqp(const uint8_t *h) { return ld_be24(h + 5); }
static inline void deth_set(uint8_t *h, uint32_t qkey, uint32_t sqp)
{
	st_be32(h, qkey);
	h[4] = 0;
	st_be24(h + 5, sqp);
}

/* PSNs are 24-bit serial numbers (9.7.1): a - b in that space. */
static inline int32_t psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}
#define PSN_MASK 0xffffffu

#endif

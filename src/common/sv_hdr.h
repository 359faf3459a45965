/* SPDX-License-Identifier: MIT */
/*
 * The packet codec: every header softverbs puts on or takes off a packet,
 * one accessor pair each that owns the byte order (__bth_psn(p) reads,
 * bth_init / reth_set ... write), so no code outside this header and its
 * out-of-line half, sv_roce.c, shifts or swaps packet bytes.  The engines,
 * the daemon's gateway and capture, the port service and the verbs
 * library all read and write headers here.
 *
 *   - IBTA transport headers (IBTA vol. 1, 9.2-9.3): BTH, XRCETH, DETH,
 *     RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH;
 *   - the GRH (9.2 / RoCE v2 Annex A17.4: the IPv6 header's layout), the
 *     IPv4 header (RFC 791) with its checksum (RFC 1071), the UDP header
 *     (RFC 768);
 *   - IPv4-mapped GIDs (::ffff:a.b.c.d);
 *   - big- and little-endian loads and stores (the latter for pcap).
 * sv_roce.h declares the rest: frames (IP | UDP | IBTA packet | ICRC),
 * the ICRC, a ring record's GRH as a flow and back, pcap records.
 *
 * A packet on a ring (one record, sv_ring.h) is:
 *   [GRH 40 bytes, UD only: record type has SV_REC_F_GRH]
 *   BTH 12 | extension headers by opcode (sv_opcode.c) | payload
 * There is no ICRC on a ring (shared memory does not corrupt) and the pad
 * count is always 0: the payload length is what is left of the record.
 */
#ifndef SV_HDR_H
#define SV_HDR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t ld_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static inline void st_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}
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
/* pcap files are written little-endian (sv_roce.c, the capture command). */
static inline uint32_t ld_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}
static inline void st_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
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
#define SV_XRCETH_BYTES 4

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

/* The pad count (9.2.4: bytes after the payload up to a multiple of 4)
 * and MigReq (9.2.2), for writers that set them apart from bth_init. */
static inline void bth_set_pad(uint8_t *b, unsigned pad)
{
	b[1] = (uint8_t)((b[1] & ~0x30u) | (pad & 3) << 4);
}
static inline int __bth_mig(const uint8_t *b) { return (b[1] >> 6) & 1; }
static inline void bth_set_mig(uint8_t *b, int mig)
{
	b[1] = (uint8_t)((b[1] & ~0x40u) | (mig ? 0x40 : 0));
}
/* The opcode's transport (9.2.1, the top 3 bits): RC 0x00, UC 0x20,
 * UD 0x60, XRC 0xA0 (its opcodes are RC's, transport bits 101). */
#define SV_OPC_TRANSPORT_MASK 0xe0
#define SV_OPC_RC 0x00
#define SV_OPC_UC 0x20
#define SV_OPC_UD 0x60
#define SV_OPC_XRC 0xa0
static inline uint8_t __bth_transport(const uint8_t *b)
{
	return b[0] & SV_OPC_TRANSPORT_MASK;
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

/*
 * XRCETH (9.3.1.2): right after the BTH of every XRC request, before a
 * RETH, AtomicETH or ImmDt; names the XRC SRQ a SEND lands in, which must
 * be in the XRC domain of the TGT QP the BTH names.
 * | byte | bits | field                                              |
 * |------|------|----------------------------------------------------|
 * | 0    | 8    | reserved (sent 0, ignored)                         |
 * | 1-3  | 24   | XRCSRQ: the XRC SRQ number                         |
 */
static inline uint32_t __xrceth_srqn(const uint8_t *h) { return ld_be24(h + 1); }
static inline void xrceth_set(uint8_t *h, uint32_t srqn)
{
	h[0] = 0;
	st_be24(h + 1, srqn);
}

/*
 * GRH (8.3; under RoCE v2, Annex A17, the IPv6 header; the 40 bytes a
 * UD receive and a ring record start with):
 * | byte  | bits    | field                                          |
 * |-------|---------|------------------------------------------------|
 * | 0-3   | 4,8,20  | IPVer (6), TClass, FlowLabel                   |
 * | 4-5   | 16      | PayLen (RoCE v2: the UDP length)               |
 * | 6     | 8       | NxtHdr (17, UDP)                               |
 * | 7     | 8       | HopLmt                                         |
 * | 8-23  | 128     | SGID                                           |
 * | 24-39 | 128     | DGID                                           |
 * Callers pass a flow label that fits its 20 bits.
 */
static inline void grh_set(uint8_t *h, uint8_t tclass, uint32_t flow_label,
			   uint16_t paylen, uint8_t hop, const uint8_t *sgid,
			   const uint8_t *dgid)
{
	st_be32(h, 6u << 28 | (uint32_t)tclass << 20 | flow_label);
	st_be16(h + 4, paylen);
	h[6] = 17; /* UDP */
	h[7] = hop;
	memcpy(h + 8, sgid, 16);
	memcpy(h + 24, dgid, 16);
}
static inline int __grh_ipver(const uint8_t *h) { return h[0] >> 4; }
static inline uint8_t __grh_tclass(const uint8_t *h)
{
	return (uint8_t)(ld_be32(h) >> 20);
}
static inline uint32_t __grh_flow(const uint8_t *h)
{
	return ld_be32(h) & 0xfffff;
}
static inline uint16_t __grh_paylen(const uint8_t *h) { return ld_be16(h + 4); }
static inline uint8_t __grh_nxthdr(const uint8_t *h) { return h[6]; }
static inline uint8_t __grh_hop(const uint8_t *h) { return h[7]; }
static inline const uint8_t *grh_sgid(const uint8_t *h) { return h + 8; }
static inline const uint8_t *grh_dgid(const uint8_t *h) { return h + 24; }

/*
 * IPv4 header (RFC 791), no options, as RoCE v2 sends it:
 * | byte  | field                                                    |
 * |-------|----------------------------------------------------------|
 * | 0     | version 4, IHL 5 (0x45)                                  |
 * | 1     | TOS (DSCP, ECN)                                          |
 * | 2-3   | total length                                             |
 * | 4-5   | identification                                           |
 * | 6-7   | flags (DF 0x4000, MF 0x2000), fragment offset            |
 * | 8     | TTL                                                      |
 * | 9     | protocol (17, UDP)                                       |
 * | 10-11 | header checksum (ip4_set_csum)                           |
 * | 12-15 | source address                                           |
 * | 16-19 | destination address                                      |
 */
#define SV_IP4_DF 0x4000
static inline void ip4_set(uint8_t *h, uint8_t tos, uint16_t tot_len,
			   uint16_t id, int df, uint8_t ttl,
			   const uint8_t *saddr, const uint8_t *daddr)
{
	h[0] = 0x45;
	h[1] = tos;
	st_be16(h + 2, tot_len);
	st_be16(h + 4, id);
	st_be16(h + 6, df ? SV_IP4_DF : 0);
	h[8] = ttl;
	h[9] = 17; /* UDP */
	h[10] = h[11] = 0;
	memcpy(h + 12, saddr, 4);
	memcpy(h + 16, daddr, 4);
}
static inline uint8_t __ip4_tos(const uint8_t *h) { return h[1]; }
static inline uint16_t __ip4_tot_len(const uint8_t *h) { return ld_be16(h + 2); }
static inline uint16_t __ip4_id(const uint8_t *h) { return ld_be16(h + 4); }
static inline uint16_t __ip4_frag(const uint8_t *h) { return ld_be16(h + 6); }
static inline uint8_t __ip4_ttl(const uint8_t *h) { return h[8]; }
static inline uint8_t __ip4_proto(const uint8_t *h) { return h[9]; }
static inline const uint8_t *ip4_saddr(const uint8_t *h) { return h + 12; }
static inline const uint8_t *ip4_daddr(const uint8_t *h) { return h + 16; }

/* The Internet checksum (RFC 1071): the ones' complement sum of n bytes
 * as big-endian 16-bit words (an odd last byte padded with zero), added
 * to sum and not yet folded; inet_csum_fold folds and complements it. */
static inline uint32_t inet_csum_add(uint32_t sum, const uint8_t *p, size_t n)
{
	while (n >= 2) {
		sum += ld_be16(p);
		p += 2;
		n -= 2;
	}
	if (n)
		sum += (uint32_t)p[0] << 8;
	return sum;
}
static inline uint16_t inet_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}
/* Writes the IPv4 header checksum of h (its other fields set); a header
 * with a correct one sums to 0 (inet_csum_fold(inet_csum_add(0, h, 20))). */
static inline void ip4_set_csum(uint8_t *h)
{
	h[10] = h[11] = 0;
	st_be16(h + 10, inet_csum_fold(inet_csum_add(0, h, 20)));
}

/* UDP header (RFC 768): source port, destination port, length (header
 * and data), checksum; 8 bytes. */
static inline void udp_set(uint8_t *u, uint16_t sport, uint16_t dport,
			   uint16_t len)
{
	st_be16(u, sport);
	st_be16(u + 2, dport);
	st_be16(u + 4, len);
	st_be16(u + 6, 0);
}
static inline uint16_t __udp_sport(const uint8_t *u) { return ld_be16(u); }
static inline uint16_t __udp_dport(const uint8_t *u) { return ld_be16(u + 2); }
static inline uint16_t __udp_len(const uint8_t *u) { return ld_be16(u + 4); }
static inline uint16_t __udp_csum(const uint8_t *u) { return ld_be16(u + 6); }

/* An IPv4 address as a GID (RoCE v2, Annex A17): ::ffff:a.b.c.d. */
static inline int sv_gid_is_v4(const uint8_t *g)
{
	static const uint8_t pfx[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g, pfx, 12);
}
static inline void sv_gid_set_v4(uint8_t *g, const void *in4)
{
	memset(g, 0, 10);
	g[10] = g[11] = 0xff;
	memcpy(g + 12, in4, 4);
}

/* A multicast group's GID (the kernel's rdma_is_multicast_addr): an IPv6
 * multicast address, or an IPv4 one (224.0.0.0/4) mapped. */
static inline int sv_gid_is_mcast(const uint8_t *g)
{
	return g[0] == 0xff || (sv_gid_is_v4(g) && (g[12] & 0xf0) == 0xe0);
}
/* The BTH destination QP of a multicast packet (IBTA 9.2: 0xFFFFFF). */
#define SV_MCAST_QPN 0xffffffu

/* PSNs are 24-bit serial numbers (9.7.1): a - b in that space. */
static inline int32_t psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}
#define PSN_MASK 0xffffffu

#endif

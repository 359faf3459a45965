/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the packet codec (src/common/sv_hdr.h with sv_roce.c) and
 * the opcode tables (src/engine/sv_opcode.c), against byte arrays written
 * by hand from the layouts (IBTA vol. 1, 9.2-9.3; RoCE v2, Annex A17;
 * RFC 791 and 768), not from the code under test:
 *   - BTH: opcode, SE, MigReq, pad count, TVer, P_Key, DestQP, AckReq and
 *     PSN at their bit positions, read and written; the pad and MigReq
 *     setters leave every other bit alone;
 *   - DETH, RETH, AtomicETH, AETH (ACK, RNR NAK and NAK syndromes),
 *     AtomicAckETH, ImmDt, IETH;
 *   - GRH (the IPv6 header's layout), IPv4 header with its checksum
 *     (RFC 1071's worked example, and the one scapy computed for the
 *     frame test_roce.c checks), UDP header, IPv4-mapped GIDs;
 *   - the IPv4 header a UD receive gets from a ring record's GRH;
 *   - a whole IPv6 frame (RC RDMA WRITE only with immediate, pad 1)
 *     equal to one built in Python from the definition (zlib.crc32 over
 *     the masked pseudo packet, as tests/compat/roce_check.py checks the
 *     ICRC; the UDP checksum over the IPv6 pseudo-header), and parsed
 *     back by sv_pkt_parse;
 *   - the work-request opcode table agrees with the transport opcode
 *     table: every transport opcode it names exists for each QP type it
 *     allows, with the right kind, position, immediate and invalidate
 *     flags; what it completes as, the access it needs, whether it takes
 *     a receive.
 */
#include "sv_hdr.h"
#include "sv_opcode.h"
#include "sv_roce.h"
#include "unit_test.h"

#include <stdio.h>
#include <string.h>

static void unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sscanf(s + 2 * i, "%2hhx", &out[i]);
}

static void test_bth(void)
{
	/* RC RDMA WRITE only (0x0a); byte 1: SE 1, MigReq 1, pad 2, TVer 0
	 * = 1110 0000; P_Key 0xffff; resv8a 0; DestQP 0x123456; byte 8:
	 * AckReq 1; PSN 0xabcdef. */
	static const uint8_t want[12] = { 0x0a, 0xe0, 0xff, 0xff, 0x00, 0x12,
					  0x34, 0x56, 0x80, 0xab, 0xcd, 0xef };
	/* UD SEND only (0x64); SE 0, MigReq 0, pad 3, TVer 0; P_Key
	 * 0x8001; DestQP 1; AckReq 0; PSN 0. */
	static const uint8_t ud[12] = { 0x64, 0x30, 0x80, 0x01, 0x00, 0x00,
					0x00, 0x01, 0x00, 0x00, 0x00, 0x00 };
	uint8_t b[12];

	EXPECT(__bth_opcode(want) == 0x0a);
	EXPECT(__bth_se(want) == 1);
	EXPECT(__bth_mig(want) == 1);
	EXPECT(__bth_pad(want) == 2);
	EXPECT(__bth_tver(want) == 0);
	EXPECT(__bth_pkey(want) == 0xffff);
	EXPECT(__bth_qpn(want) == 0x123456);
	EXPECT(__bth_ackreq(want) == 1);
	EXPECT(__bth_psn(want) == 0xabcdef);
	EXPECT(__bth_transport(want) == SV_OPC_RC);
	memset(b, 0x5a, sizeof(b));
	bth_init(b, 0x0a, 1, 0xffff, 0x123456, 1, 0xabcdef);
	bth_set_pad(b, 2);
	EXPECT(memcmp(b, want, 12) == 0);

	EXPECT(__bth_transport(ud) == SV_OPC_UD);
	EXPECT(__bth_pad(ud) == 3 && !__bth_mig(ud) && !__bth_se(ud));
	EXPECT(__bth_pkey(ud) == 0x8001 && __bth_qpn(ud) == 1);
	bth_init(b, 0x64, 0, 0x8001, 1, 0, 0);
	bth_set_mig(b, 0);
	bth_set_pad(b, 3);
	EXPECT(memcmp(b, ud, 12) == 0);
	/* Pad 0 again touches nothing else. */
	bth_set_pad(b, 0);
	EXPECT(b[1] == 0x00 && __bth_pkey(b) == 0x8001);
	/* 24-bit fields drop the bits above. */
	bth_init(b, 0x04, 0, 0xffff, 0xff000001u, 0, 0x01000002u);
	EXPECT(__bth_qpn(b) == 1 && __bth_psn(b) == 2 && b[4] == 0);
}

static void test_ext(void)
{
	/* RETH: VA 8, R_Key 4, DMA length 4. */
	static const uint8_t reth[16] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
					  0x07, 0x08, 0x11, 0x22, 0x33, 0x44,
					  0x00, 0x00, 0x10, 0x00 };
	/* DETH: Q_Key 0x80010000 (the GSI's well-known key), reserved,
	 * SrcQP 0x000001. */
	static const uint8_t deth[8] = { 0x80, 0x01, 0x00, 0x00,
					 0x00, 0x00, 0x00, 0x01 };
	/* AtomicETH: VA, R_Key, Swap (add), Compare. */
	static const uint8_t atm[28] = {
		0x00, 0x00, 0x7f, 0xff, 0x00, 0x00, 0x10, 0x08, /* VA */
		0xca, 0xfe, 0xba, 0xbe,				/* R_Key */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, /* Swap */
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, /* Compare */
	};
	/* AtomicAckETH: original data. */
	static const uint8_t atmack[8] = { 0x01, 0x23, 0x45, 0x67,
					   0x89, 0xab, 0xcd, 0xef };
	/* AETH: syndrome 1, MSN 3.  0x1f: ACK, no credit limit; 0x2e: RNR
	 * NAK, timer 14; 0x63: NAK, remote operational error. */
	static const uint8_t ack[4] = { 0x1f, 0x00, 0x01, 0x02 };
	static const uint8_t rnr[4] = { 0x2e, 0xff, 0xff, 0xff };
	static const uint8_t nak[4] = { 0x63, 0x00, 0x00, 0x00 };
	/* ImmDt is kept in network order; IETH is an R_Key. */
	static const uint8_t imm[4] = { 0xde, 0xad, 0xbe, 0xef };
	static const uint8_t ieth[4] = { 0x00, 0x12, 0x34, 0x01 };
	/* XRCETH: reserved 8 bits, XRC SRQ number 0xabcdef. */
	static const uint8_t xrceth[4] = { 0x00, 0xab, 0xcd, 0xef };
	/* An XRC SEND ONLY (opcode 0xA4; SE 0, MigReq 1; DestQP 0x12c,
	 * AckReq, PSN 7): BTH, then the XRCETH naming SRQ 5. */
	static const uint8_t xrc_send[16] = {
		0xa4, 0x40, 0xff, 0xff, 0x00, 0x00, 0x01, 0x2c, /* BTH */
		0x80, 0x00, 0x00, 0x07,
		0x00, 0x00, 0x00, 0x05, /* XRCETH: SRQ 5 */
	};
	uint8_t b[28];
	uint32_t raw;

	EXPECT(__reth_va(reth) == 0x0102030405060708ull);
	EXPECT(__reth_rkey(reth) == 0x11223344 && __reth_len(reth) == 4096);
	reth_set(b, 0x0102030405060708ull, 0x11223344, 4096);
	EXPECT(memcmp(b, reth, 16) == 0);

	EXPECT(__deth_qkey(deth) == 0x80010000u && __deth_sqp(deth) == 1);
	memset(b, 0x5a, sizeof(b));
	deth_set(b, 0x80010000u, 1);
	EXPECT(memcmp(b, deth, 8) == 0);

	EXPECT(__atmeth_va(atm) == 0x00007fff00001008ull);
	EXPECT(__atmeth_rkey(atm) == 0xcafebabe);
	EXPECT(__atmeth_swap(atm) == 2);
	EXPECT(__atmeth_comp(atm) == 0xfffffffffffffffeull);
	atmeth_set(b, 0x00007fff00001008ull, 0xcafebabe, 2,
		   0xfffffffffffffffeull);
	EXPECT(memcmp(b, atm, 28) == 0);

	EXPECT(__atmack_orig(atmack) == 0x0123456789abcdefull);
	atmack_set(b, 0x0123456789abcdefull);
	EXPECT(memcmp(b, atmack, 8) == 0);

	EXPECT(__aeth_syn(ack) == (SV_AETH_ACK | SV_AETH_ACK_UNLIMITED));
	EXPECT(__aeth_msn(ack) == 0x000102);
	EXPECT((__aeth_syn(rnr) & SV_AETH_TYPE_MASK) == SV_AETH_RNR_NAK);
	EXPECT(__aeth_msn(rnr) == 0xffffff);
	EXPECT((__aeth_syn(nak) & SV_AETH_TYPE_MASK) == SV_AETH_NAK);
	EXPECT((__aeth_syn(nak) & 0x1f) == SV_NAK_REM_OP);
	aeth_set(b, SV_AETH_ACK | SV_AETH_ACK_UNLIMITED, 0x000102);
	EXPECT(memcmp(b, ack, 4) == 0);
	aeth_set(b, SV_AETH_RNR_NAK | 14, 0xffffff);
	EXPECT(memcmp(b, rnr, 4) == 0);
	aeth_set(b, SV_AETH_NAK | SV_NAK_REM_OP, 0);
	EXPECT(memcmp(b, nak, 4) == 0);

	memcpy(&raw, imm, 4); /* as ibv_send_wr.imm_data holds it */
	EXPECT(__immdt_raw(imm) == raw);
	immdt_set_raw(b, raw);
	EXPECT(memcmp(b, imm, 4) == 0);
	EXPECT(__ieth_rkey(ieth) == 0x00123401);
	ieth_set(b, 0x00123401);
	EXPECT(memcmp(b, ieth, 4) == 0);

	EXPECT(__xrceth_srqn(xrceth) == 0xabcdef);
	memset(b, 0x5a, sizeof(b));
	xrceth_set(b, 0xabcdef);
	EXPECT(memcmp(b, xrceth, 4) == 0 && b[4] == 0x5a);
	/* The number is 24 bits; the reserved byte is sent 0, read past. */
	xrceth_set(b, 0xff000005u);
	EXPECT(memcmp(b, xrc_send + 12, 4) == 0);
	b[0] = 0xff;
	EXPECT(__xrceth_srqn(b) == 5);
	EXPECT(__bth_transport(xrc_send) == SV_OPC_XRC);
	EXPECT(__bth_opcode(xrc_send) == 0xa4 && __bth_qpn(xrc_send) == 0x12c);
	EXPECT(__bth_ackreq(xrc_send) && __bth_psn(xrc_send) == 7);
	EXPECT(!__bth_se(xrc_send) && __bth_mig(xrc_send) &&
	       !__bth_pad(xrc_send));
	bth_init(b, 0xa4, 0, 0xffff, 0x12c, 1, 7);
	xrceth_set(b + SV_BTH_BYTES, 5);
	EXPECT(memcmp(b, xrc_send, 16) == 0);
	{
		/* Parsed: the XRCETH's SRQ, the payload after it; an XRC
		 * RDMA WRITE's RETH after the XRCETH (9.2's order). */
		struct sv_pkt pkt;
		uint8_t w[40];

		memset(b + 16, 0x77, 8);
		EXPECT(sv_pkt_parse(&pkt, b, 24, 0) == 0);
		EXPECT(pkt.srqn == 5 && (pkt.flags & OP_XRCETH) &&
		       (pkt.flags & OP_SEND) && pkt.paylen == 8 &&
		       pkt.payload == b + 16);
		bth_init(w, OPC_XRC | OPC_WRITE_ONLY, 0, 0xffff, 0x12c, 1, 8);
		xrceth_set(w + SV_BTH_BYTES, 0x4242);
		reth_set(w + SV_BTH_BYTES + SV_XRCETH_BYTES, 0x1000, 0x77, 4);
		EXPECT(sv_pkt_parse(&pkt, w, 36, 0) == 0);
		EXPECT(pkt.srqn == 0x4242 && pkt.va == 0x1000 &&
		       pkt.rkey == 0x77 && pkt.dma_len == 4 && pkt.paylen == 4);
		/* XRC answers are RC's: no XRCETH. */
		EXPECT(!(sv_opcodes[OPC_XRC | OPC_ACK].flags & OP_XRCETH) &&
		       (sv_opcodes[OPC_XRC | OPC_ACK].flags & OP_AETH));
		EXPECT(sv_op_hdr_len(sv_opcodes[OPC_XRC | OPC_CMP_SWAP].flags) ==
		       SV_BTH_BYTES + SV_XRCETH_BYTES + SV_ATMETH_BYTES);
	}

	/* PSN arithmetic wraps at 24 bits. */
	EXPECT(psn_diff(0, 0xffffff) == 1 && psn_diff(0xffffff, 0) == -1);
	EXPECT(psn_diff(0x000010, 0x000008) == 8);
}

static void test_ip(void)
{
	/* RFC 1071's worked example as usually given (a 0x73-byte UDP
	 * datagram 192.168.0.1 -> 192.168.0.199, TTL 64, DF): checksum
	 * 0xb861. */
	static const uint8_t rfc[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00,
					 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61,
					 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
					 0x00, 0xc7 };
	static const uint8_t a1[4] = { 192, 168, 0, 1 }, a2[4] = { 192, 168, 0, 199 };
	/* GRH: IPVer 6, TClass 0xb8, flow label 0x12345, PayLen 0x0400,
	 * NxtHdr 17, HopLmt 2. */
	static const uint8_t grh_hdr[8] = { 0x6b, 0x81, 0x23, 0x45,
					    0x04, 0x00, 0x11, 0x02 };
	/* UDP: 49152 -> 4791, length 36, checksum 0. */
	static const uint8_t udp[8] = { 0xc0, 0x00, 0x12, 0xb7,
					0x00, 0x24, 0x00, 0x00 };
	uint8_t h[40], sg[16], dg[16];

	ip4_set(h, 0, 0x73, 0, 1, 64, a1, a2);
	EXPECT(h[10] == 0 && h[11] == 0);
	ip4_set_csum(h);
	EXPECT(memcmp(h, rfc, 20) == 0);
	EXPECT(inet_csum_fold(inet_csum_add(0, rfc, 20)) == 0);
	EXPECT(__ip4_tot_len(rfc) == 0x73 && __ip4_ttl(rfc) == 64);
	EXPECT(__ip4_frag(rfc) == SV_IP4_DF && __ip4_proto(rfc) == 17);
	EXPECT(memcmp(ip4_saddr(rfc), a1, 4) == 0);
	EXPECT(memcmp(ip4_daddr(rfc), a2, 4) == 0);
	/* An odd byte counts as the high half of a word. */
	EXPECT(inet_csum_add(0, (const uint8_t *)"\x01", 1) == 0x100);

	for (int i = 0; i < 16; i++)
		sg[i] = (uint8_t)(0x20 + i), dg[i] = (uint8_t)(0x40 + i);
	grh_set(h, 0xb8, 0x12345, 0x400, 2, sg, dg);
	EXPECT(memcmp(h, grh_hdr, 8) == 0);
	EXPECT(memcmp(h + 8, sg, 16) == 0 && memcmp(h + 24, dg, 16) == 0);
	EXPECT(__grh_ipver(h) == 6 && __grh_tclass(h) == 0xb8);
	EXPECT(__grh_flow(h) == 0x12345 && __grh_paylen(h) == 0x400);
	EXPECT(__grh_nxthdr(h) == 17 && __grh_hop(h) == 2);
	EXPECT(grh_sgid(h) == h + 8 && grh_dgid(h) == h + 24);

	udp_set(h, 49152, SV_ROCE_PORT, 36);
	EXPECT(memcmp(h, udp, 8) == 0);
	EXPECT(__udp_sport(udp) == 49152 && __udp_dport(udp) == 4791);
	EXPECT(__udp_len(udp) == 36 && __udp_csum(udp) == 0);

	sv_gid_set_v4(sg, a1);
	EXPECT(sv_gid_is_v4(sg) && sg[10] == 0xff && sg[11] == 0xff);
	EXPECT(sg[0] == 0 && sg[9] == 0 && memcmp(sg + 12, a1, 4) == 0);
	EXPECT(!sv_gid_is_v4(dg));
}

/*
 * A ring record's GRH between two IPv4-mapped GIDs gives a UD receive the
 * IPv4 header the packet had: scapy's frame of test_roce.c
 * (198.51.100.1 -> .2, TOS 0, TTL 64, identification 0, DF, a 36-byte
 * UDP datagram) has checksum 0xe64a.
 */
static void test_grh_ip4(void)
{
	static const char scapy_ip[] =
		"45000038000040004011e64ac6336401c6336402";
	static const uint8_t s4[4] = { 198, 51, 100, 1 }, d4[4] = { 198, 51, 100, 2 };
	uint8_t want[20], grh[40], out[20], sg[16], dg[16];
	struct sv_roce_flow f;

	unhex(scapy_ip, want, 20);
	sv_gid_set_v4(sg, s4);
	sv_gid_set_v4(dg, d4);
	grh_set(grh, 0, 0, 36, 64, sg, dg);
	sv_roce_grh_flow(grh, &f);
	EXPECT(!f.ipv6 && f.hop_limit == 64 && f.tclass == 0);
	EXPECT(f.sport == 0 && f.dport == 0);
	sv_roce_ip4_hdr(out, &f, __grh_paylen(grh));
	EXPECT(memcmp(out, want, 20) == 0);

	dg[0] = 0x20; /* not IPv4-mapped any more */
	grh_set(grh, 0x28, 0xabcde, 100, 9, sg, dg);
	sv_roce_grh_flow(grh, &f);
	EXPECT(f.ipv6 && f.tclass == 0x28 && f.flow_label == 0xabcde);
	EXPECT(f.hop_limit == 9 && memcmp(f.dgid, dg, 16) == 0);
}

/*
 * An IPv6 frame built in Python from the definition (struct.pack for the
 * headers, zlib.crc32 for the ICRC over the masked pseudo packet, the UDP
 * checksum over the IPv6 pseudo-header):
 *   IPv6 2001:db8::1 -> 2001:db8::2, traffic class 0x28, flow label
 *   0xabcde, hop limit 64; UDP 0xc123 -> 4791;
 *   BTH RC RDMA WRITE only with immediate (0x0b), SE, MigReq, pad 1,
 *   P_Key 0xffff, DestQP 0x11, AckReq, PSN 0x100;
 *   RETH VA 0x7f0012345678, R_Key 0xabcdef, length 7; ImmDt 0xdeadbeef;
 *   "payload", one pad byte; ICRC 0xd19746cd (as bytes on the wire).
 */
static const char py_frame[] =
	"628abcde0034114020010db800000000000000000000000120010db800000000"
	"0000000000000002c12312b7003419d40bd0ffff000000118000010000007f00"
	"1234567800abcdef00000007deadbeef7061796c6f616400d19746cd";

static void test_frame(void)
{
	uint8_t want[92], ib[48], out[128];
	struct sv_roce_flow f = { .ipv6 = 1, .tclass = 0x28,
				  .flow_label = 0xabcde, .hop_limit = 64,
				  .sport = 0xc123, .dport = SV_ROCE_PORT };
	const uint8_t *pib;
	size_t ib_len;
	struct sv_roce_flow g;
	struct sv_pkt pkt;
	uint32_t imm, icrc;
	unsigned hl;

	unhex(py_frame, want, sizeof(want));
	memcpy(f.sgid, want + 8, 16);
	memcpy(f.dgid, want + 24, 16);
	EXPECT(OPC_WRITE_ONLY_IMM == 0x0b);
	hl = sv_op_hdr_len(sv_opcodes[OPC_WRITE_ONLY_IMM].flags);
	EXPECT(hl == SV_BTH_BYTES + SV_RETH_BYTES + SV_IMMDT_BYTES);
	bth_init(ib, OPC_WRITE_ONLY_IMM, 1, 0xffff, 0x11, 1, 0x100);
	bth_set_pad(ib, 1);
	reth_set(ib + SV_BTH_BYTES, 0x7f0012345678ull, 0xabcdef, 7);
	memcpy(&imm, "\xde\xad\xbe\xef", 4);
	immdt_set_raw(ib + SV_BTH_BYTES + SV_RETH_BYTES, imm);
	memcpy(ib + hl, "payload\0", 8);
	EXPECT(sv_roce_frame(out, sizeof(out), &f, ib, hl + 8) == 92);
	EXPECT(memcmp(out, want, 92) == 0);
	icrc = sv_icrc(&f, ib, hl + 8);
	EXPECT(memcmp(&icrc, want + 88, 4) == 0);

	EXPECT(sv_roce_parse(want, sizeof(want), &g, &pib, &ib_len) == 0);
	EXPECT(ib_len == hl + 8 && g.ipv6 && g.flow_label == 0xabcde);
	EXPECT(g.tclass == 0x28 && g.sport == 0xc123);
	/* On a ring the pad is gone: the payload is what is left. */
	memcpy(ib, pib, ib_len);
	bth_set_pad(ib, 0);
	EXPECT(sv_pkt_parse(&pkt, ib, (uint32_t)ib_len - 1, 0) == 0);
	EXPECT(pkt.opcode == OPC_WRITE_ONLY_IMM && pkt.se && pkt.ackreq);
	EXPECT(pkt.qpn == 0x11 && pkt.psn == 0x100);
	EXPECT(pkt.va == 0x7f0012345678ull && pkt.rkey == 0xabcdef);
	EXPECT(pkt.dma_len == 7 && pkt.imm == imm);
	EXPECT(pkt.paylen == 7 && memcmp(pkt.payload, "payload", 7) == 0);
	/* Too short for its headers, or an opcode that is not one. */
	EXPECT(sv_pkt_parse(&pkt, ib, hl - 1, 0) == -1);
	ib[0] = 0x15;
	EXPECT(sv_pkt_parse(&pkt, ib, (uint32_t)ib_len - 1, 0) == -1);
}

/* IBTA 1.5 ATOMIC WRITE as rxe sends it: opcode 0x1d, BTH | RETH | the 8
 * bytes (no pad); and its answer, an RDMA READ RESPONSE ONLY of no data. */
static void test_atomic_write_pkt(void)
{
	static const uint8_t req[] = {
		0x1d, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, /* BTH */
		0x80, 0x00, 0x01, 0x00,
		0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x56, 0x78, /* RETH VA */
		0x00, 0xab, 0xcd, 0xef,				/* R_Key */
		0x00, 0x00, 0x00, 0x08,				/* DMA length */
		'a', 't', 'o', 'm', 'i', 'c', '!', '!',		/* the 8 bytes */
	};
	static const uint8_t resp[] = {
		0x10, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x22, /* BTH */
		0x00, 0x00, 0x01, 0x00,
		0x1f, 0x00, 0x00, 0x05, /* AETH: ACK, MSN 5 */
	};
	uint8_t b[sizeof(req)];
	struct sv_pkt pkt;

	EXPECT(sv_pkt_parse(&pkt, req, sizeof(req), 0) == 0);
	EXPECT(pkt.opcode == OPC_ATOMIC_WRITE);
	EXPECT(!strcmp(sv_opcodes[OPC_ATOMIC_WRITE].name, "RC_ATOMIC_WRITE"));
	EXPECT((pkt.flags & (OP_REQ | OP_ATOMIC_WRITE | OP_RETH | OP_FIRST |
			     OP_LAST | OP_PAYLOAD)) ==
	       (OP_REQ | OP_ATOMIC_WRITE | OP_RETH | OP_FIRST | OP_LAST |
		OP_PAYLOAD));
	EXPECT(!(pkt.flags & (OP_WRITE | OP_ATOMIC | OP_ATMETH | OP_IMM)));
	EXPECT(pkt.qpn == 0x11 && pkt.psn == 0x100 && pkt.ackreq);
	EXPECT(pkt.va == 0x00007f0012345678ull && pkt.rkey == 0xabcdef);
	EXPECT(pkt.dma_len == 8 && pkt.paylen == 8);
	EXPECT(memcmp(pkt.payload, "atomic!!", 8) == 0);
	EXPECT(sv_op_hdr_len(pkt.flags) == SV_BTH_BYTES + SV_RETH_BYTES);
	/* Written back with the codec: the same bytes. */
	bth_init(b, OPC_ATOMIC_WRITE, 0, 0xffff, 0x11, 1, 0x100);
	reth_set(b + SV_BTH_BYTES, 0x00007f0012345678ull, 0xabcdef, 8);
	memcpy(b + SV_BTH_BYTES + SV_RETH_BYTES, "atomic!!", 8);
	EXPECT(memcmp(b, req, sizeof(req)) == 0);
	/* Not a UC or UD opcode (RC only). */
	EXPECT(!(sv_opcodes[OPC_UC | OPC_ATOMIC_WRITE].flags & OP_VALID));
	EXPECT(!(sv_opcodes[OPC_UD | OPC_ATOMIC_WRITE].flags & OP_VALID));

	EXPECT(sv_pkt_parse(&pkt, resp, sizeof(resp), 0) == 0);
	EXPECT(pkt.opcode == OPC_READ_RESP_ONLY && (pkt.flags & OP_READ));
	EXPECT(pkt.paylen == 0 && pkt.psn == 0x100 && pkt.msn == 5);
	EXPECT(pkt.syn == (SV_AETH_ACK | SV_AETH_ACK_UNLIMITED));
}

/* The transport opcodes of a row at its positions, for a transport. */
static void check_row(uint32_t op, const struct sv_wrinfo *wi, uint8_t tp)
{
	static const uint32_t pos_flags[4] = {
		[SV_POS_FIRST] = OP_FIRST, [SV_POS_MIDDLE] = OP_MIDDLE,
		[SV_POS_LAST] = OP_LAST, [SV_POS_ONLY] = OP_FIRST | OP_LAST,
	};
	uint32_t kind = (wi->flags & SV_WR_SEND)	 ? OP_SEND :
			(wi->flags & SV_WR_WRITE)	 ? OP_WRITE :
			(wi->flags & SV_WR_READ)	 ? OP_READ :
			(wi->flags & SV_WR_ATOMIC)	 ? OP_ATOMIC :
			(wi->flags & SV_WR_ATOMIC_WRITE) ? OP_ATOMIC_WRITE :
							   0;
	/* One packet whatever the length: what holds a READ/atomic
	 * credit (READ requests, atomics, ATOMIC WRITE). */
	int single = !!(wi->flags & SV_WR_RD_ATOMIC);

	for (int pos = 0; pos < 4; pos++) {
		uint8_t opc = wi->opc[pos];
		uint32_t f;

		/* UD messages are one packet. */
		if (tp == SV_OPC_UD && pos != SV_POS_ONLY)
			continue;
		EXPECT(opc != SV_OPC_NONE && opc < 0x20);
		EXPECT(sv_req_opcode(op, pos == SV_POS_FIRST || pos == SV_POS_ONLY,
				     pos == SV_POS_LAST || pos == SV_POS_ONLY) ==
		       opc);
		f = sv_opcodes[opc | tp].flags;
		if (!(f & OP_VALID))
			fprintf(stderr, "%s at %d: no opcode %#x\n", wi->name,
				pos, opc | tp);
		EXPECT(f & OP_VALID);
		EXPECT((f & (OP_REQ | OP_RESP)) == OP_REQ);
		EXPECT(f & kind);
		EXPECT((f & (OP_FIRST | OP_MIDDLE | OP_LAST)) ==
		       (single ? (OP_FIRST | OP_LAST) : pos_flags[pos]));
		/* ImmDt and IETH ride on the message's last packet. */
		EXPECT(!!(f & OP_IMM) == (!!(wi->flags & SV_WR_IMM) &&
					  (f & OP_LAST)));
		EXPECT(!!(f & OP_IETH) == (!!(wi->flags & SV_WR_INV) &&
					   (f & OP_LAST)));
		/* The remote address rides on the first packet. */
		if (wi->flags & SV_WR_REMOTE)
			EXPECT(!!(f & (OP_RETH | OP_ATMETH)) == !!(f & OP_FIRST));
		EXPECT(!!(f & OP_DETH) == (tp == SV_OPC_UD));
		/* Every XRC request names its SRQ (9.3.1.2). */
		EXPECT(!!(f & OP_XRCETH) == (tp == SV_OPC_XRC));
		/* READ requests and atomics carry no payload; ATOMIC
		 * WRITE carries its 8 bytes. */
		EXPECT(!!(f & OP_PAYLOAD) ==
		       !(wi->flags & (SV_WR_READ | SV_WR_ATOMIC)));
	}
}

static void test_wr_table(void)
{
	static const struct {
		uint32_t op;
		uint32_t qpts;
		enum ibv_wc_opcode wc;
		unsigned access;
		int recv;
	} want[] = {
		/* IBTA ch. 10: UD sends only; UC adds RDMA WRITE and the
		 * memory operations; RC adds READ, atomics, invalidation;
		 * an XRC INI QP takes what RC takes (but ATOMIC WRITE). */
		{ IBV_WR_SEND, SV_WR_RC | SV_WR_UC | SV_WR_UD | SV_WR_XRC,
		  IBV_WC_SEND, 0, 1 },
		{ IBV_WR_SEND_WITH_IMM,
		  SV_WR_RC | SV_WR_UC | SV_WR_UD | SV_WR_XRC, IBV_WC_SEND, 0,
		  1 },
		{ IBV_WR_SEND_WITH_INV, SV_WR_RC | SV_WR_XRC, IBV_WC_SEND, 0, 1 },
		{ IBV_WR_RDMA_WRITE, SV_WR_RC | SV_WR_UC | SV_WR_XRC,
		  IBV_WC_RDMA_WRITE, IBV_ACCESS_REMOTE_WRITE, 0 },
		{ IBV_WR_RDMA_WRITE_WITH_IMM, SV_WR_RC | SV_WR_UC | SV_WR_XRC,
		  IBV_WC_RDMA_WRITE, IBV_ACCESS_REMOTE_WRITE, 1 },
		{ IBV_WR_RDMA_READ, SV_WR_RC | SV_WR_XRC, IBV_WC_RDMA_READ,
		  IBV_ACCESS_REMOTE_READ, 0 },
		{ IBV_WR_ATOMIC_CMP_AND_SWP, SV_WR_RC | SV_WR_XRC,
		  IBV_WC_COMP_SWAP, IBV_ACCESS_REMOTE_ATOMIC, 0 },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, SV_WR_RC | SV_WR_XRC,
		  IBV_WC_FETCH_ADD, IBV_ACCESS_REMOTE_ATOMIC, 0 },
		{ IBV_WR_LOCAL_INV, SV_WR_RC | SV_WR_UC | SV_WR_XRC,
		  IBV_WC_LOCAL_INV, 0, 0 },
		{ IBV_WR_BIND_MW, SV_WR_RC | SV_WR_UC | SV_WR_XRC,
		  IBV_WC_BIND_MW, 0, 0 },
		/* IBTA 1.5, RC only as in rxe; remote WRITE at the target. */
		{ IBV_WR_ATOMIC_WRITE, SV_WR_RC, IBV_WC_ATOMIC_WRITE,
		  IBV_ACCESS_REMOTE_WRITE, 0 },
	};
	int named = 0;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct sv_wrinfo *wi = sv_wrinfo(want[i].op);

		EXPECT(wi->name);
		EXPECT((wi->flags & SV_WR_QPT_MASK) == want[i].qpts);
		EXPECT(wi->wc == want[i].wc);
		EXPECT(wi->access == want[i].access);
		EXPECT(!!(wi->flags & SV_WR_RECV) == want[i].recv);
		EXPECT(sv_wr_takes(IBV_QPT_RC, want[i].op) ==
		       !!(want[i].qpts & SV_WR_RC));
		EXPECT(sv_wr_takes(IBV_QPT_UC, want[i].op) ==
		       !!(want[i].qpts & SV_WR_UC));
		EXPECT(sv_wr_takes(IBV_QPT_UD, want[i].op) ==
		       !!(want[i].qpts & SV_WR_UD));
		EXPECT(sv_wr_takes(IBV_QPT_XRC_SEND, want[i].op) ==
		       !!(want[i].qpts & SV_WR_XRC));
	}
	for (uint32_t op = 0; op < SV_WR_OPCODES + 4; op++) {
		const struct sv_wrinfo *wi = sv_wrinfo(op);
		uint32_t kinds = wi->flags & (SV_WR_SEND | SV_WR_WRITE |
					      SV_WR_READ | SV_WR_ATOMIC |
					      SV_WR_ATOMIC_WRITE | SV_WR_LOCAL);

		if (!wi->name) {
			/* Not ours: no QP type takes it, and no packet. */
			EXPECT(!(wi->flags & SV_WR_QPT_MASK));
			EXPECT(sv_req_opcode(op, 1, 1) == SV_OPC_NONE);
			EXPECT(!sv_wr_takes(IBV_QPT_RC, op));
			continue;
		}
		named++;
		EXPECT(kinds && !(kinds & (kinds - 1))); /* exactly one */
		EXPECT(!!(wi->flags & SV_WR_RD_ATOMIC) == sv_wr_rd_credit(op));
		EXPECT(!!(wi->flags & (SV_WR_READ | SV_WR_ATOMIC)) ==
		       sv_is_read_or_atomic(op));
		/* A receive at the target: SENDs, and WRITE with immediate
		 * (the responder's rule: sv_resp_needs_recv, sv_resp_check.c). */
		EXPECT(!!(wi->flags & SV_WR_RECV) ==
		       (!!(wi->flags & SV_WR_SEND) ||
			((wi->flags & SV_WR_WRITE) && (wi->flags & SV_WR_IMM))));
		/* Inline data: the payload-carrying requests. */
		EXPECT(!!(wi->flags & SV_WR_INLINE) ==
		       !!(wi->flags & (SV_WR_SEND | SV_WR_WRITE |
				       SV_WR_ATOMIC_WRITE)));
		if (wi->flags & SV_WR_LOCAL) {
			for (int pos = 0; pos < 4; pos++)
				EXPECT(wi->opc[pos] == SV_OPC_NONE);
			EXPECT(!(wi->flags & SV_WR_UD));
			continue;
		}
		if (wi->flags & SV_WR_RC)
			check_row(op, wi, SV_OPC_RC);
		if (wi->flags & SV_WR_UC)
			check_row(op, wi, SV_OPC_UC);
		if (wi->flags & SV_WR_UD)
			check_row(op, wi, SV_OPC_UD);
		if (wi->flags & SV_WR_XRC)
			check_row(op, wi, SV_OPC_XRC);
		if (failures)
			return;
	}
	EXPECT(named == 11);
	/* QP types we send on none of. */
	EXPECT(!sv_wr_takes(IBV_QPT_RAW_PACKET, IBV_WR_SEND));
	EXPECT(!sv_wr_takes(IBV_QPT_XRC_RECV, IBV_WR_SEND));
	EXPECT(!sv_wr_takes(IBV_QPT_XRC_SEND, IBV_WR_ATOMIC_WRITE));
	/* The OPC_ transport bits are the BTH codec's. */
	EXPECT(OPC_UC == SV_OPC_UC && OPC_UD == SV_OPC_UD &&
	       OPC_XRC == SV_OPC_XRC);
}

int main(void)
{
	test_bth();
	test_ext();
	test_ip();
	test_grh_ip4();
	test_frame();
	test_atomic_write_pkt();
	test_wr_table();
	return unit_result();
}

/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the CM MAD codec (src/daemon/cm_mad.c):
 *   - every message type (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ,
 *     SIDR_REP), each field given a value of its own, encodes to a MAD
 *     written out here by hand from the IBTA vol. 1 layouts (13.4.3 for
 *     the header, the message tables of 12.6 and 12.11; the ECE VendorID
 *     and attribute as IBTA 1.4 places them), and that MAD decodes back
 *     to the same struct;
 *   - reserved bits (REQ's byte 4 and 24..27, the alternate path, the
 *     bits after a field) are ignored when received;
 *   - decoding refuses a bad header (length, class, version, method,
 *     LAP/APR and unknown attributes) and every value out of the range
 *     the protocol fixes; encoding refuses an unknown attribute;
 *   - whatever decodes re-encodes and decodes to the same struct
 *     (random MADs of every type);
 *   - the field tables pass their own consistency check.
 */
#include "svd_cm.h"
#include "unit_test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The MAD header (IBTA 13.4.3) of a CM Send of attribute attr. */
static void hdr(uint8_t *w, uint16_t attr, uint64_t tid, uint32_t attr_mod)
{
	memset(w, 0, CM_MAD_LEN);
	w[0] = 1;    /* BaseVersion */
	w[1] = 0x07; /* MgmtClass: CM */
	w[2] = 2;    /* ClassVersion */
	w[3] = 0x03; /* Method: Send */
	for (int i = 0; i < 8; i++)
		w[8 + i] = (uint8_t)(tid >> (56 - 8 * i));
	w[16] = (uint8_t)(attr >> 8);
	w[17] = (uint8_t)attr;
	w[20] = (uint8_t)(attr_mod >> 24);
	w[21] = (uint8_t)(attr_mod >> 16);
	w[22] = (uint8_t)(attr_mod >> 8);
	w[23] = (uint8_t)attr_mod;
}

/* Bytes at byte `off` of the message (the MAD's byte 24 + off). */
#define AT(w, off, ...)                                                        \
	memcpy((w) + 24 + (off), (const uint8_t[]){ __VA_ARGS__ },             \
	       sizeof((const uint8_t[]){ __VA_ARGS__ }))

/* A byte pattern for strings (GIDs, ARI, private data). */
static void pat(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + 7 * i);
}

/* m encodes to exactly want, and want decodes to exactly m. */
static void expect_mad(const char *what, const struct svd_cm_msg *m,
		       const uint8_t *want)
{
	uint8_t mad[CM_MAD_LEN];
	struct svd_cm_msg back;

	memset(mad, 0xa5, sizeof(mad));
	EXPECT(svd_cm_mad_encode(m, mad) == 0);
	for (int i = 0; i < CM_MAD_LEN; i++)
		if (mad[i] != want[i]) {
			fprintf(stderr, "%s: MAD byte %d (message byte %d) is "
				"%#04x, IBTA says %#04x\n", what, i, i - 24,
				mad[i], want[i]);
			EXPECT(mad[i] == want[i]);
		}
	memset(&back, 0x5a, sizeof(back));
	EXPECT(svd_cm_mad_decode(want, CM_MAD_LEN, &back) == 0);
	EXPECT(memcmp(&back, m, sizeof(back)) == 0);
}

static void msg_new(struct svd_cm_msg *m, uint16_t attr)
{
	memset(m, 0, sizeof(*m));
	m->attr_id = attr;
	m->tid = 0x0102030405060708ull;
}

/* Table 106 REQ (primary path; the alternate left zero). */
static void req_msg(struct svd_cm_msg *m, uint8_t *w)
{
	msg_new(m, CM_ATTR_REQ);
	m->req.ece_attr_mod = 0xa1b2c3d4;
	m->req.local_comm_id = 0x11223344;
	m->req.ece_vendor_id = 0x5a5b5c;
	m->req.service_id = 0x0000000001064452ull;
	m->req.local_ca_guid = 0x8899aabbccddeeffull;
	m->req.local_qkey = 0x12345678;
	m->req.local_qpn = 0xabcdef;
	m->req.responder_resources = 0x10;
	m->req.local_eecn = 0x123456;
	m->req.initiator_depth = 0x20;
	m->req.remote_eecn = 0x654321;
	m->req.remote_cm_response_timeout = 20;
	m->req.transport_service_type = 1;
	m->req.flow_control = 1;
	m->req.starting_psn = 0x7a7b7c;
	m->req.local_cm_response_timeout = 19;
	m->req.retry_count = 5;
	m->req.pkey = 0xffff;
	m->req.path_mtu = 5;
	m->req.rdc_exists = 0;
	m->req.rnr_retry_count = 7;
	m->req.max_cm_retries = 15;
	m->req.srq = 1;
	m->req.ext_transport_type = 0;
	m->req.primary_local_lid = 0xffff;
	m->req.primary_remote_lid = 0xfffe;
	pat(m->req.primary_local_gid, 16, 0x10);
	pat(m->req.primary_remote_gid, 16, 0x20);
	m->req.primary_flow_label = 0xabcde;
	m->req.primary_packet_rate = 0x2a;
	m->req.primary_traffic_class = 0x68;
	m->req.primary_hop_limit = 0x40;
	m->req.primary_sl = 3;
	m->req.primary_subnet_local = 1;
	m->req.primary_local_ack_timeout = 18;
	pat(m->req.private_data, CM_REQ_PDATA, 0x30);

	hdr(w, 0x10, 0x0102030405060708ull, 0xa1b2c3d4);
	AT(w, 0, 0x11, 0x22, 0x33, 0x44);	/* Local Communication ID */
	AT(w, 5, 0x5a, 0x5b, 0x5c);		/* VendorID */
	AT(w, 8, 0, 0, 0, 0, 0x01, 0x06, 0x44, 0x52); /* ServiceID */
	AT(w, 16, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff);
	AT(w, 28, 0x12, 0x34, 0x56, 0x78);	/* Local Q_Key */
	AT(w, 32, 0xab, 0xcd, 0xef, 0x10);	/* Local QPN, Responder Res. */
	AT(w, 36, 0x12, 0x34, 0x56, 0x20);	/* Local EECN, Initiator Depth */
	/* Remote EECN; Remote CM Response Timeout 10100b, Transport
	 * Service Type 01b, End-to-End Flow Control 1b. */
	AT(w, 40, 0x65, 0x43, 0x21, 0xa3);
	/* Starting PSN; Local CM Response Timeout 10011b, Retry Count 101b. */
	AT(w, 44, 0x7a, 0x7b, 0x7c, 0x9d);
	/* P_Key; Path MTU 0101b, RDC Exists 0b, RNR Retry Count 111b; Max
	 * CM Retries 1111b, SRQ 1b, Extended Transport Type 000b. */
	AT(w, 48, 0xff, 0xff, 0x57, 0xf8);
	AT(w, 52, 0xff, 0xff, 0xff, 0xfe);	/* Primary Local/Remote LID */
	pat(w + 24 + 56, 16, 0x10);		/* Primary Local Port GID */
	pat(w + 24 + 72, 16, 0x20);		/* Primary Remote Port GID */
	/* Primary Flow Label (20 bits), reserved 6 bits, Primary Packet
	 * Rate (6 bits); Traffic Class; Hop Limit; SL 0011b, Subnet Local
	 * 1b; Local ACK Timeout 10010b. */
	AT(w, 88, 0xab, 0xcd, 0xe0, 0x2a, 0x68, 0x40, 0x38, 0x90);
	pat(w + 24 + 140, CM_REQ_PDATA, 0x30);	/* Private Data */
}

static void test_req(void)
{
	struct svd_cm_msg m;
	uint8_t w[CM_MAD_LEN];

	req_msg(&m, w);
	expect_mad("REQ", &m, w);
}

/* Table 107 MRA */
static void test_mra(void)
{
	struct svd_cm_msg m;
	uint8_t w[CM_MAD_LEN];

	msg_new(&m, CM_ATTR_MRA);
	m.mra.local_comm_id = 0x01020304;
	m.mra.remote_comm_id = 0x05060708;
	m.mra.message_mraed = 1;
	m.mra.service_timeout = 24;
	pat(m.mra.private_data, CM_MRA_PDATA, 0x40);

	hdr(w, 0x11, m.tid, 0);
	AT(w, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08);
	/* Message MRAed 01b; Service Timeout 11000b. */
	AT(w, 8, 0x40, 0xc0);
	pat(w + 24 + 10, CM_MRA_PDATA, 0x40);
	expect_mad("MRA", &m, w);
}

/* Table 108 REJ */
static void test_rej(void)
{
	struct svd_cm_msg m;
	uint8_t w[CM_MAD_LEN];

	msg_new(&m, CM_ATTR_REJ);
	m.rej.local_comm_id = 0x0a0b0c0d;
	m.rej.remote_comm_id = 0x0e0f1011;
	m.rej.message_rejected = 2;
	m.rej.reject_info_length = 8;
	m.rej.reason = 28;
	pat(m.rej.ari, CM_ARI_LEN, 0x50);
	pat(m.rej.private_data, CM_REJ_PDATA, 0x60);

	hdr(w, 0x12, m.tid, 0);
	AT(w, 0, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11);
	/* Message REJected 10b; Reject Info Length 0001000b; Reason. */
	AT(w, 8, 0x80, 0x10, 0x00, 0x1c);
	pat(w + 24 + 12, CM_ARI_LEN, 0x50);
	pat(w + 24 + 84, CM_REJ_PDATA, 0x60);
	expect_mad("REJ", &m, w);
}

/* Table 110 REP, the VendorID's bytes in 15, 19 and 23. */
static void test_rep(void)
{
	struct svd_cm_msg m;
	uint8_t w[CM_MAD_LEN];

	msg_new(&m, CM_ATTR_REP);
	m.rep.ece_attr_mod = 0x0badcafe;
	m.rep.local_comm_id = 0x21222324;
	m.rep.remote_comm_id = 0x25262728;
	m.rep.local_qkey = 0x01234567;
	m.rep.local_qpn = 0x0a0b0c;
	m.rep.ece_vendor_id = 0xd1d2d3;
	m.rep.local_eecn = 0x0e0f10;
	m.rep.starting_psn = 0x202122;
	m.rep.responder_resources = 4;
	m.rep.initiator_depth = 3;
	m.rep.target_ack_delay = 15;
	m.rep.failover_accepted = 2;
	m.rep.flow_control = 1;
	m.rep.rnr_retry_count = 6;
	m.rep.srq = 1;
	m.rep.local_ca_guid = 0x0011223344556677ull;
	pat(m.rep.private_data, CM_REP_PDATA, 0x70);

	hdr(w, 0x13, m.tid, 0x0badcafe);
	AT(w, 0, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28);
	AT(w, 8, 0x01, 0x23, 0x45, 0x67);	/* Local Q_Key */
	AT(w, 12, 0x0a, 0x0b, 0x0c, 0xd1);	/* Local QPN, VendorID 23:16 */
	AT(w, 16, 0x0e, 0x0f, 0x10, 0xd2);	/* Local EECN, VendorID 15:8 */
	AT(w, 20, 0x20, 0x21, 0x22, 0xd3);	/* Starting PSN, VendorID 7:0 */
	/* Responder Resources; Initiator Depth; Target ACK Delay 01111b,
	 * Failover Accepted 10b, End-to-End Flow Control 1b; RNR Retry
	 * Count 110b, SRQ 1b. */
	AT(w, 24, 0x04, 0x03, 0x7d, 0xd0);
	AT(w, 28, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77);
	pat(w + 24 + 36, CM_REP_PDATA, 0x70);
	expect_mad("REP", &m, w);
}

/* Table 111 RTU, Table 113 DREP: the two comm IDs and private data. */
static void test_rtu_drep(void)
{
	static const uint16_t attrs[] = { CM_ATTR_RTU, CM_ATTR_DREP };

	for (int i = 0; i < 2; i++) {
		struct svd_cm_msg m;
		uint8_t w[CM_MAD_LEN];
		uint8_t *pdata = attrs[i] == CM_ATTR_RTU ? m.rtu.private_data :
							   m.drep.private_data;

		msg_new(&m, attrs[i]);
		if (attrs[i] == CM_ATTR_RTU) {
			m.rtu.local_comm_id = 0x31323334;
			m.rtu.remote_comm_id = 0x35363738;
		} else {
			m.drep.local_comm_id = 0x31323334;
			m.drep.remote_comm_id = 0x35363738;
		}
		pat(pdata, CM_RTU_PDATA, 0x80);

		hdr(w, attrs[i], m.tid, 0);
		AT(w, 0, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38);
		pat(w + 24 + 8, CM_RTU_PDATA, 0x80);
		expect_mad(i ? "DREP" : "RTU", &m, w);
	}
}

/* Table 112 DREQ */
static void test_dreq(void)
{
	struct svd_cm_msg m;
	uint8_t w[CM_MAD_LEN];

	msg_new(&m, CM_ATTR_DREQ);
	m.dreq.local_comm_id = 0x41424344;
	m.dreq.remote_comm_id = 0x45464748;
	m.dreq.remote_qpn_eecn = 0x123abc;
	pat(m.dreq.private_data, CM_DREQ_PDATA, 0x90);

	hdr(w, 0x15, m.tid, 0);
	AT(w, 0, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48);
	AT(w, 8, 0x12, 0x3a, 0xbc, 0x00);	/* Remote QPN/EECN, reserved */
	pat(w + 24 + 12, CM_DREQ_PDATA, 0x90);
	expect_mad("DREQ", &m, w);
}

/* Table 119 SIDR_REQ, Table 120 SIDR_REP */
static void test_sidr(void)
{
	struct svd_cm_msg m;
	uint8_t w[CM_MAD_LEN];

	msg_new(&m, CM_ATTR_SIDR_REQ);
	m.sidr_req.request_id = 0x51525354;
	m.sidr_req.pkey = 0xffff;
	m.sidr_req.service_id = 0x0000000002114455ull;
	pat(m.sidr_req.private_data, CM_SIDR_REQ_PDATA, 0xa0);
	hdr(w, 0x17, m.tid, 0);
	AT(w, 0, 0x51, 0x52, 0x53, 0x54, 0xff, 0xff, 0x00, 0x00);
	AT(w, 8, 0, 0, 0, 0, 0x02, 0x11, 0x44, 0x55);
	pat(w + 24 + 16, CM_SIDR_REQ_PDATA, 0xa0);
	expect_mad("SIDR_REQ", &m, w);

	msg_new(&m, CM_ATTR_SIDR_REP);
	m.sidr_rep.request_id = 0x61626364;
	m.sidr_rep.status = 2;
	m.sidr_rep.add_info_length = 0x10;
	m.sidr_rep.qpn = 0xfedcba;
	m.sidr_rep.service_id = 0x0000000002114455ull;
	m.sidr_rep.qkey = 0x01234567;
	pat(m.sidr_rep.class_port_info, CM_ARI_LEN, 0xb0);
	pat(m.sidr_rep.private_data, CM_SIDR_REP_PDATA, 0xc0);
	hdr(w, 0x18, m.tid, 0);
	/* Request ID; Status; Additional Information Length; reserved. */
	AT(w, 0, 0x61, 0x62, 0x63, 0x64, 0x02, 0x10, 0x00, 0x00);
	AT(w, 8, 0xfe, 0xdc, 0xba, 0x00);	/* QPN, reserved */
	AT(w, 12, 0, 0, 0, 0, 0x02, 0x11, 0x44, 0x55); /* ServiceID */
	AT(w, 20, 0x01, 0x23, 0x45, 0x67);	/* Q_Key */
	pat(w + 24 + 24, CM_ARI_LEN, 0xb0);	/* ClassPortInfo */
	pat(w + 24 + 96, CM_SIDR_REP_PDATA, 0xc0);
	expect_mad("SIDR_REP", &m, w);
}

/* Reserved bits are not read: a REQ with them all set decodes the same. */
static void test_reserved(void)
{
	struct svd_cm_msg m, back;
	uint8_t w[CM_MAD_LEN];

	req_msg(&m, w);
	w[24 + 4] = 0xff;			/* byte 4 */
	memset(w + 24 + 24, 0xff, 4);		/* bytes 24..27 */
	w[24 + 90] |= 0x0f;			/* after the flow label */
	w[24 + 91] |= 0xc0;
	w[24 + 94] |= 0x07;			/* after Subnet Local */
	w[24 + 95] |= 0x07;			/* after Local ACK Timeout */
	memset(w + 24 + 96, 0xff, 44);		/* the alternate path */
	w[4] = 0xff;				/* Status */
	w[7] = 0xff;				/* ClassSpecific */
	EXPECT(svd_cm_mad_decode(w, CM_MAD_LEN, &back) == 0);
	EXPECT(memcmp(&back, &m, sizeof(m)) == 0);
}

static int decodes(const uint8_t *w, size_t len)
{
	struct svd_cm_msg m;

	return svd_cm_mad_decode(w, len, &m);
}

/* A REQ with one byte changed: whether it decodes. */
static int req_with(unsigned mad_byte, uint8_t v)
{
	struct svd_cm_msg m;
	uint8_t w[CM_MAD_LEN];

	req_msg(&m, w);
	w[mad_byte] = v;
	return decodes(w, CM_MAD_LEN);
}

static void test_refused(void)
{
	struct svd_cm_msg m;
	uint8_t w[CM_MAD_LEN], mad[CM_MAD_LEN];

	req_msg(&m, w);
	EXPECT(decodes(w, CM_MAD_LEN) == 0);
	EXPECT(decodes(w, CM_MAD_LEN - 1) == -EBADMSG);
	EXPECT(req_with(0, 2) == -EBADMSG);	  /* BaseVersion */
	EXPECT(req_with(1, 0x04) == -EBADMSG);	  /* MgmtClass: SA */
	EXPECT(req_with(2, 1) == -EBADMSG);	  /* ClassVersion */
	EXPECT(req_with(3, 0x81) == -EBADMSG);	  /* GetResp */
	EXPECT(req_with(17, 0x19) == -EBADMSG);	  /* LAP */
	EXPECT(req_with(17, 0x1a) == -EBADMSG);	  /* APR */
	EXPECT(req_with(17, 0x00) == -EBADMSG);
	/* Transport Service Types 10b (RD) and 11b (extended) decode: the
	 * CM answers RD with a REJ, 11b with the XRC extended type takes
	 * an XRC TGT QP. */
	EXPECT(req_with(24 + 43, 0xa5) == 0);
	EXPECT(req_with(24 + 43, 0xa7) == 0);
	EXPECT(req_with(24 + 43, 0xa1) == 0);	  /* RC */
	/* Path MTU 0 and 6 (the codes are 1 = 256 .. 5 = 4096). */
	EXPECT(req_with(24 + 50, 0x07) == -EBADMSG);
	EXPECT(req_with(24 + 50, 0x67) == -EBADMSG);
	EXPECT(req_with(24 + 50, 0x17) == 0);
	/* Extended Transport Type 001b (XRC) decodes, 010b does not. */
	EXPECT(req_with(24 + 51, 0xf9) == 0);
	EXPECT(req_with(24 + 51, 0xfa) == -EBADMSG);

	/* MRA about message 11b; REJ of message 11b; an ARI longer than
	 * 72 bytes; SIDR_REP with 73 bytes of additional information. */
	msg_new(&m, CM_ATTR_MRA);
	EXPECT(svd_cm_mad_encode(&m, mad) == 0);
	mad[24 + 8] = 0xc0;
	EXPECT(decodes(mad, CM_MAD_LEN) == -EBADMSG);
	mad[24 + 8] = 0x80;
	EXPECT(decodes(mad, CM_MAD_LEN) == 0);
	msg_new(&m, CM_ATTR_REJ);
	EXPECT(svd_cm_mad_encode(&m, mad) == 0);
	mad[24 + 8] = 0xc0;
	EXPECT(decodes(mad, CM_MAD_LEN) == -EBADMSG);
	mad[24 + 8] = 0x80;
	mad[24 + 9] = 73 << 1;
	EXPECT(decodes(mad, CM_MAD_LEN) == -EBADMSG);
	mad[24 + 9] = 72 << 1;
	EXPECT(decodes(mad, CM_MAD_LEN) == 0);
	msg_new(&m, CM_ATTR_SIDR_REP);
	EXPECT(svd_cm_mad_encode(&m, mad) == 0);
	mad[24 + 5] = 73;
	EXPECT(decodes(mad, CM_MAD_LEN) == -EBADMSG);
	mad[24 + 5] = 72;
	EXPECT(decodes(mad, CM_MAD_LEN) == 0);

	msg_new(&m, 0x19);
	EXPECT(svd_cm_mad_encode(&m, mad) == -EINVAL);
}

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* decode -> encode -> decode is a fixed point, for random MADs. */
static void test_random(void)
{
	uint32_t seed = 1;

	for (uint16_t attr = CM_ATTR_REQ; attr <= CM_ATTR_SIDR_REP; attr++) {
		int ok = 0;

		for (int round = 0; round < 20000; round++) {
			struct svd_cm_msg m1, m2;
			uint8_t w[CM_MAD_LEN], mad[CM_MAD_LEN];

			hdr(w, attr, (uint64_t)rnd(&seed) << 32 | rnd(&seed),
			    rnd(&seed));
			for (int i = 24; i < CM_MAD_LEN; i++)
				w[i] = (uint8_t)rnd(&seed);
			if (svd_cm_mad_decode(w, CM_MAD_LEN, &m1))
				continue;
			ok++;
			EXPECT(m1.attr_id == attr);
			EXPECT(svd_cm_mad_encode(&m1, mad) == 0);
			EXPECT(memcmp(mad, w, 20) == 0); /* to AttributeModifier */
			EXPECT(svd_cm_mad_decode(mad, CM_MAD_LEN, &m2) == 0);
			EXPECT(memcmp(&m1, &m2, sizeof(m1)) == 0);
		}
		/* Enough of them decode for the check to mean something. */
		EXPECT(ok > 100);
	}
}

static void test_names(void)
{
	EXPECT(!strcmp(svd_cm_attr_name(CM_ATTR_REQ), "REQ"));
	EXPECT(!strcmp(svd_cm_attr_name(CM_ATTR_SIDR_REP), "SIDR_REP"));
	EXPECT(!strcmp(svd_cm_attr_name(0x19), "unknown"));
}

int main(void)
{
	if (svd_cm_mad_selfcheck()) {
		fprintf(stderr, "FAIL: the field tables are inconsistent\n");
		failures++;
	}
	test_req();
	test_mra();
	test_rej();
	test_rep();
	test_rtu_drep();
	test_dreq();
	test_sidr();
	test_reserved();
	test_refused();
	test_random();
	test_names();
	return unit_result();
}

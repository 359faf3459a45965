/* SPDX-License-Identifier: MIT */
/*
 * CM MADs: struct svd_cm_msg <-> the 256 bytes of an IB CM MAD (IBTA
 * vol. 1 chapter 12), the one place that owns their byte order.
 *
 * A MAD is the 24-byte common header (IBTA 13.4.3: BaseVersion 1,
 * MgmtClass 0x07 CM, ClassVersion 2, Method Send 0x03, Status,
 * ClassSpecific, TransactionID, AttributeID, AttributeModifier) and 232
 * bytes of message.  Each message is a table of fields (IBTA Tables 106
 * ff.) in the spec's Byte[Bit] notation: a field starts at bit `bit` of
 * byte `byte` of the message, bit 0 being the byte's most significant,
 * and runs `width` bits on towards the less significant bits and the
 * next bytes (big-endian bit order, so a 24-bit QPN at byte 32 fills
 * bytes 32..34 and the 5-bit response timeout at 43[0] the top of byte
 * 43).  Fields wider than 64 bits are byte strings (GIDs, ARI, private
 * data).  Unused and reserved bits are sent as zero and ignored when
 * received.
 *
 * Three things beyond the plain fields are rows of the same tables, so
 * that a field is written down once, for both directions:
 *  - a range (R): the values the protocol allows (IBTA 12.6: an
 *    extended transport of none or XRC, an MTU code of 256..4096, which
 *    message an MRA or REJ is about, an ARI no longer than its room);
 *    decoding refuses any other;
 *  - a part (P): some bits of a member, placed apart -- REP's ECE
 *    VendorID (IBTA 1.4 / the kernel's cm_format_mad_ece_hdr), whose high,
 *    middle and low bytes are bytes 15, 19 and 23;
 *  - a header field (H): ECE's attribute travels in the MAD header's
 *    AttributeModifier (REQ and REP).
 * What no table holds: the alternate path of REQ (bytes 96..139), LAP
 * and APR: there is no path migration here; received LAP/APR are dropped
 * as unknown.
 *
 * Decoding checks the header and the fields whose range the protocol
 * fixes; anything else (wrong length, another class, version or method,
 * an unknown attribute, a value out of range) is -EBADMSG and the MAD is
 * dropped.  It reads only the 256 bytes it was given.
 */
#include "svd_cm.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* The common MAD header (IBTA 13.4.3), offsets in bytes. */
enum {
	MH_BASE_VERSION = 0,
	MH_MGMT_CLASS = 1,
	MH_CLASS_VERSION = 2,
	MH_METHOD = 3,
	MH_STATUS = 4,
	MH_CLASS_SPECIFIC = 6,
	MH_TID = 8,
	MH_ATTR_ID = 16,
	MH_ATTR_MOD = 20,
	MH_LEN = 24,
};

/*
 * One row of a message's table: where a field lies in the MAD and which
 * member of struct svd_cm_msg holds it.  svd_cm_mad_encode and
 * svd_cm_mad_decode both walk these rows; nothing else places a field.
 */
struct mad_field {
	uint16_t pos;	/* first bit, counted from the MAD's first byte
			 * (0 = its most significant bit) */
	uint16_t width; /* bits; more than 64: a byte string */
	uint16_t off;	/* of the member in struct svd_cm_msg */
	uint16_t size;	/* of the member, bytes */
	uint8_t shift;	/* the field is the member's bits shift.. (P) */
	uint8_t ranged; /* decoding refuses a value outside lo..hi (R) */
	uint8_t lo, hi;
};

#define MEMBER_SIZE(m) sizeof(((struct svd_cm_msg *)0)->m)
#define ROW(msg, m, pos, width, shift, ranged, lo, hi)                         \
	{ (pos), (width), offsetof(struct svd_cm_msg, msg.m),                  \
	  MEMBER_SIZE(msg.m), (shift), (ranged), (lo), (hi) }
/* A field at Byte[Bit] of the message (after the MAD header). */
#define F(msg, m, byte, bit, width)                                            \
	ROW(msg, m, (MH_LEN + (byte)) * 8 + (bit), width, 0, 0, 0, 0)
/* The same, whose value must lie in lo..hi. */
#define R(msg, m, byte, bit, width, lo, hi)                                    \
	ROW(msg, m, (MH_LEN + (byte)) * 8 + (bit), width, 0, 1, lo, hi)
/* The member's bits shift..shift+width-1, at Byte[Bit] of the message. */
#define P(msg, m, byte, bit, width, shift)                                     \
	ROW(msg, m, (MH_LEN + (byte)) * 8 + (bit), width, shift, 0, 0, 0)
/* A field of the MAD header, at byte hbyte of the MAD. */
#define H(msg, m, hbyte, width) ROW(msg, m, (hbyte) * 8, width, 0, 0, 0, 0)

/* Table 106 REQ Message Contents (the primary path; no alternate). */
static const struct mad_field req_fields[] = {
	H(req, ece_attr_mod, MH_ATTR_MOD, 32),
	F(req, local_comm_id, 0, 0, 32),
	F(req, ece_vendor_id, 5, 0, 24),
	F(req, service_id, 8, 0, 64),
	F(req, local_ca_guid, 16, 0, 64),
	F(req, local_qkey, 28, 0, 32),
	F(req, local_qpn, 32, 0, 24),
	F(req, responder_resources, 35, 0, 8),
	F(req, local_eecn, 36, 0, 24),
	F(req, initiator_depth, 39, 0, 8),
	F(req, remote_eecn, 40, 0, 24),
	F(req, remote_cm_response_timeout, 43, 0, 5),
	/* RC, UC, RD (refused with a REJ: cm_ib_passive.c) or 11b: the
	 * extended transport (XRC) */
	R(req, transport_service_type, 43, 5, 2, 0, 3),
	F(req, flow_control, 43, 7, 1),
	F(req, starting_psn, 44, 0, 24),
	F(req, local_cm_response_timeout, 47, 0, 5),
	F(req, retry_count, 47, 5, 3),
	F(req, pkey, 48, 0, 16),
	R(req, path_mtu, 50, 0, 4, 1, 5), /* 256..4096 */
	F(req, rdc_exists, 50, 4, 1),
	F(req, rnr_retry_count, 50, 5, 3),
	F(req, max_cm_retries, 51, 0, 4),
	F(req, srq, 51, 4, 1),
	R(req, ext_transport_type, 51, 5, 3, 0, 1), /* none, or XRC */
	F(req, primary_local_lid, 52, 0, 16),
	F(req, primary_remote_lid, 54, 0, 16),
	F(req, primary_local_gid, 56, 0, 128),
	F(req, primary_remote_gid, 72, 0, 128),
	F(req, primary_flow_label, 88, 0, 20),
	F(req, primary_packet_rate, 91, 2, 6),
	F(req, primary_traffic_class, 92, 0, 8),
	F(req, primary_hop_limit, 93, 0, 8),
	F(req, primary_sl, 94, 0, 4),
	F(req, primary_subnet_local, 94, 4, 1),
	F(req, primary_local_ack_timeout, 95, 0, 5),
	F(req, private_data, 140, 0, CM_REQ_PDATA * 8),
};

/* Table 107 MRA */
static const struct mad_field mra_fields[] = {
	F(mra, local_comm_id, 0, 0, 32),
	F(mra, remote_comm_id, 4, 0, 32),
	R(mra, message_mraed, 8, 0, 2, 0, 2), /* REQ, REP or LAP */
	F(mra, service_timeout, 9, 0, 5),
	F(mra, private_data, 10, 0, CM_MRA_PDATA * 8),
};

/* Table 108 REJ */
static const struct mad_field rej_fields[] = {
	F(rej, local_comm_id, 0, 0, 32),
	F(rej, remote_comm_id, 4, 0, 32),
	R(rej, message_rejected, 8, 0, 2, 0, 2), /* REQ, REP or other */
	R(rej, reject_info_length, 9, 0, 7, 0, CM_ARI_LEN),
	F(rej, reason, 10, 0, 16),
	F(rej, ari, 12, 0, CM_ARI_LEN * 8),
	F(rej, private_data, 84, 0, CM_REJ_PDATA * 8),
};

/* Table 110 REP */
static const struct mad_field rep_fields[] = {
	H(rep, ece_attr_mod, MH_ATTR_MOD, 32),
	F(rep, local_comm_id, 0, 0, 32),
	F(rep, remote_comm_id, 4, 0, 32),
	F(rep, local_qkey, 8, 0, 32),
	F(rep, local_qpn, 12, 0, 24),
	P(rep, ece_vendor_id, 15, 0, 8, 16),
	F(rep, local_eecn, 16, 0, 24),
	P(rep, ece_vendor_id, 19, 0, 8, 8),
	F(rep, starting_psn, 20, 0, 24),
	P(rep, ece_vendor_id, 23, 0, 8, 0),
	F(rep, responder_resources, 24, 0, 8),
	F(rep, initiator_depth, 25, 0, 8),
	F(rep, target_ack_delay, 26, 0, 5),
	F(rep, failover_accepted, 26, 5, 2),
	F(rep, flow_control, 26, 7, 1),
	F(rep, rnr_retry_count, 27, 0, 3),
	F(rep, srq, 27, 3, 1),
	F(rep, local_ca_guid, 28, 0, 64),
	F(rep, private_data, 36, 0, CM_REP_PDATA * 8),
};

/* Table 111 RTU */
static const struct mad_field rtu_fields[] = {
	F(rtu, local_comm_id, 0, 0, 32),
	F(rtu, remote_comm_id, 4, 0, 32),
	F(rtu, private_data, 8, 0, CM_RTU_PDATA * 8),
};

/* Table 112 DREQ */
static const struct mad_field dreq_fields[] = {
	F(dreq, local_comm_id, 0, 0, 32),
	F(dreq, remote_comm_id, 4, 0, 32),
	F(dreq, remote_qpn_eecn, 8, 0, 24),
	F(dreq, private_data, 12, 0, CM_DREQ_PDATA * 8),
};

/* Table 113 DREP */
static const struct mad_field drep_fields[] = {
	F(drep, local_comm_id, 0, 0, 32),
	F(drep, remote_comm_id, 4, 0, 32),
	F(drep, private_data, 8, 0, CM_DREP_PDATA * 8),
};

/* Table 119 SIDR_REQ */
static const struct mad_field sidr_req_fields[] = {
	F(sidr_req, request_id, 0, 0, 32),
	F(sidr_req, pkey, 4, 0, 16),
	F(sidr_req, service_id, 8, 0, 64),
	F(sidr_req, private_data, 16, 0, CM_SIDR_REQ_PDATA * 8),
};

/* Table 120 SIDR_REP (VendorID: none sent) */
static const struct mad_field sidr_rep_fields[] = {
	F(sidr_rep, request_id, 0, 0, 32),
	F(sidr_rep, status, 4, 0, 8),
	R(sidr_rep, add_info_length, 5, 0, 8, 0, CM_ARI_LEN),
	F(sidr_rep, qpn, 8, 0, 24),
	F(sidr_rep, service_id, 12, 0, 64),
	F(sidr_rep, qkey, 20, 0, 32),
	F(sidr_rep, class_port_info, 24, 0, CM_ARI_LEN * 8),
	F(sidr_rep, private_data, 96, 0, CM_SIDR_REP_PDATA * 8),
};

#undef H
#undef P
#undef R
#undef F
#undef ROW

static const struct {
	uint16_t attr;
	const char *name;
	const struct mad_field *f;
	size_t n;
} msgs[] = {
#define M(a, n, t) { a, n, t, sizeof(t) / sizeof(t[0]) }
	M(CM_ATTR_REQ, "REQ", req_fields),
	M(CM_ATTR_MRA, "MRA", mra_fields),
	M(CM_ATTR_REJ, "REJ", rej_fields),
	M(CM_ATTR_REP, "REP", rep_fields),
	M(CM_ATTR_RTU, "RTU", rtu_fields),
	M(CM_ATTR_DREQ, "DREQ", dreq_fields),
	M(CM_ATTR_DREP, "DREP", drep_fields),
	M(CM_ATTR_SIDR_REQ, "SIDR_REQ", sidr_req_fields),
	M(CM_ATTR_SIDR_REP, "SIDR_REP", sidr_rep_fields),
#undef M
};

static int msg_index(uint16_t attr)
{
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++)
		if (msgs[i].attr == attr)
			return (int)i;
	return -1;
}

const char *svd_cm_attr_name(uint16_t attr)
{
	int i = msg_index(attr);

	return i < 0 ? "unknown" : msgs[i].name;
}

/* ---- bits -------------------------------------------------------------- */

/* width bits of v at absolute bit position pos of buf (0 = MSB of buf[0]). */
static void put_bits(uint8_t *buf, unsigned pos, unsigned width, uint64_t v)
{
	for (unsigned i = 0; i < width; i++) {
		unsigned p = pos + i;
		uint8_t mask = (uint8_t)(0x80u >> (p & 7));

		if ((v >> (width - 1 - i)) & 1)
			buf[p >> 3] |= mask;
		else
			buf[p >> 3] &= (uint8_t)~mask;
	}
}

static uint64_t get_bits(const uint8_t *buf, unsigned pos, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < width; i++) {
		unsigned p = pos + i;

		v = v << 1 | ((buf[p >> 3] >> (7 - (p & 7))) & 1);
	}
	return v;
}

static uint64_t member_get(const struct svd_cm_msg *m, const struct mad_field *f)
{
	const char *p = (const char *)m + f->off;
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (f->size) {
	case 1: memcpy(&u8, p, 1); return u8;
	case 2: memcpy(&u16, p, 2); return u16;
	case 4: memcpy(&u32, p, 4); return u32;
	default: memcpy(&u64, p, 8); return u64;
	}
}

static void member_set(struct svd_cm_msg *m, const struct mad_field *f,
		       uint64_t v)
{
	char *p = (char *)m + f->off;
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;

	switch (f->size) {
	case 1: memcpy(p, &u8, 1); break;
	case 2: memcpy(p, &u16, 2); break;
	case 4: memcpy(p, &u32, 4); break;
	default: memcpy(p, &v, 8); break;
	}
}

static void put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
	put_bits(p, 0, bytes * 8, v);
}

static uint64_t get_be(const uint8_t *p, unsigned bytes)
{
	return get_bits(p, 0, bytes * 8);
}

/* One row, struct to MAD. */
static void field_put(uint8_t *mad, const struct svd_cm_msg *m,
		      const struct mad_field *f)
{
	if (f->width > 64)
		memcpy(mad + f->pos / 8, (const char *)m + f->off, f->width / 8);
	else
		put_bits(mad, f->pos, f->width, member_get(m, f) >> f->shift);
}

/* One row, MAD to struct (whose member starts at zero: a part ORs in
 * its bits): 0, or -EBADMSG for a value outside the row's range. */
static int field_get(const uint8_t *mad, struct svd_cm_msg *m,
		     const struct mad_field *f)
{
	uint64_t v;

	if (f->width > 64) {
		memcpy((char *)m + f->off, mad + f->pos / 8, f->width / 8);
		return 0;
	}
	v = get_bits(mad, f->pos, f->width);
	if (f->ranged && (v < f->lo || v > f->hi))
		return -EBADMSG;
	member_set(m, f, member_get(m, f) | v << f->shift);
	return 0;
}

/* ---- MADs -------------------------------------------------------------- */

int svd_cm_mad_encode(const struct svd_cm_msg *m, uint8_t mad[CM_MAD_LEN])
{
	int i = msg_index(m->attr_id);

	if (i < 0)
		return -EINVAL;
	memset(mad, 0, CM_MAD_LEN);
	mad[MH_BASE_VERSION] = CM_MAD_BASE_VERSION;
	mad[MH_MGMT_CLASS] = CM_MAD_CLASS;
	mad[MH_CLASS_VERSION] = CM_MAD_CLASS_VERSION;
	mad[MH_METHOD] = CM_MAD_METHOD_SEND;
	put_be(mad + MH_TID, m->tid, 8);
	put_be(mad + MH_ATTR_ID, m->attr_id, 2);
	for (size_t k = 0; k < msgs[i].n; k++)
		field_put(mad, m, &msgs[i].f[k]);
	return 0;
}

int svd_cm_mad_decode(const uint8_t *mad, size_t len, struct svd_cm_msg *m)
{
	uint16_t attr;
	int i;

	if (len != CM_MAD_LEN || mad[MH_BASE_VERSION] != CM_MAD_BASE_VERSION ||
	    mad[MH_MGMT_CLASS] != CM_MAD_CLASS ||
	    mad[MH_CLASS_VERSION] != CM_MAD_CLASS_VERSION ||
	    mad[MH_METHOD] != CM_MAD_METHOD_SEND)
		return -EBADMSG;
	attr = (uint16_t)get_be(mad + MH_ATTR_ID, 2);
	i = msg_index(attr);
	if (i < 0)
		return -EBADMSG;
	memset(m, 0, sizeof(*m));
	m->attr_id = attr;
	m->tid = get_be(mad + MH_TID, 8);
	for (size_t k = 0; k < msgs[i].n; k++)
		if (field_get(mad, m, &msgs[i].f[k]))
			return -EBADMSG;
	return 0;
}

int svd_cm_mad_selfcheck(void)
{
	/* Every row inside the MAD: in the message, or in the header's
	 * AttributeModifier; no two rows of a message on the same bit; byte
	 * strings whole bytes of the member's size, integers (shifted) no
	 * wider than their member, ranges within what the width holds. */
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		uint8_t used[CM_MAD_LEN * 8] = { 0 };

		for (unsigned b = 0; b < MH_LEN * 8u; b++)
			used[b] = b < MH_ATTR_MOD * 8u ||
				  b >= (MH_ATTR_MOD + 4) * 8u;
		for (size_t k = 0; k < msgs[i].n; k++) {
			const struct mad_field *f = &msgs[i].f[k];
			unsigned end = f->pos + (unsigned)f->width;

			if (end > CM_MAD_LEN * 8u)
				return -1;
			for (unsigned b = f->pos; b < end; b++) {
				if (used[b])
					return -1;
				used[b] = 1;
			}
			if (f->width > 64 ? f->pos % 8 || f->shift || f->ranged ||
						    f->width != f->size * 8u :
					    f->shift + f->width > f->size * 8u)
				return -1;
			if (f->ranged && (f->lo > f->hi || f->width > 8 ||
					  f->hi >> f->width))
				return -1;
		}
	}
	return 0;
}

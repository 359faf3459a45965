/* SPDX-License-Identifier: MIT */
/*
 * Multicast between two hosts (network namespaces, wire_util.h): host A
 * sends UD datagrams to a group; two QPs of host B and one of A attached
 * to it get each one (B's through the IP multicast group its port
 * joined, A's as the sender's local copies), the sender's own QP none.
 * IPv4 (::ffff:239.x) and IPv6 (ff0e::) groups.  Root only.
 */
#include "wire_util.h"

#define MSGS 10
#define QKEY 0x11111111u

static union ibv_gid grp;

static void group_of(const char *ip)
{
	memset(&grp, 0, sizeof(grp));
	if (strchr(ip, ':')) {
		grp.raw[0] = 0xff;
		grp.raw[1] = 0x0e;
		grp.raw[14] = 0x12;
		grp.raw[15] = 0x34; /* ff0e::1234 */
	} else {
		grp.raw[10] = grp.raw[11] = 0xff;
		grp.raw[12] = 239;
		grp.raw[13] = 51;
		grp.raw[14] = 100;
		grp.raw[15] = 7; /* 239.51.100.7 */
	}
}

static const char *b_ip;

/* MSGS datagrams from src_qp must come to s, each once, with its pattern
 * and the group as the GRH's destination, in any order: UD promises none
 * (src/common/sv_wire.h "Order"). */
static int got_all(struct side *s, uint32_t src_qp)
{
	int ok = 1, v4 = !strchr(b_ip, ':');
	uint32_t seen = 0;

	for (uint32_t k = 0; k < MSGS; k++) {
		struct ibv_wc wc;
		const uint8_t *g;
		uint8_t m;

		wc1(s, &wc);
		g = s->buf + wc.wr_id * 2048;
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    wc.src_qp != src_qp || !(wc.wc_flags & IBV_WC_GRH) ||
		    wc.byte_len != 40 + 64) {
			fprintf(stderr, "datagram %u: status %d opcode %d "
				"src_qp %#x (not %#x) flags %#x length %u\n",
				k, wc.status, wc.opcode, wc.src_qp, src_qp,
				wc.wc_flags, wc.byte_len);
			ok = 0;
			continue;
		}
		if (v4 ? memcmp(g + 20 + 16, grp.raw + 12, 4) :
			 memcmp(g + 24, grp.raw, 16))
			ok = 0;
		/* Datagram m carries (i * 7 + m) at byte i. */
		m = g[40];
		if (m >= MSGS || (seen & 1u << m)) {
			fprintf(stderr, "receive %u: datagram %u again or "
				"unknown\n", (unsigned)wc.wr_id, m);
			ok = 0;
			continue;
		}
		seen |= 1u << m;
		for (uint32_t i = 0; i < 64; i++)
			if (g[40 + i] != (uint8_t)(i * 7 + m)) {
				fprintf(stderr, "receive %u: datagram %u "
					"damaged at byte %u\n",
					(unsigned)wc.wr_id, m, i);
				ok = 0;
				break;
			}
	}
	return ok && seen == (1u << MSGS) - 1;
}

static void rx_side(struct side *s, const char *ip)
{
	side_open(s, IBV_QPT_UD, ip);
	CHECK_EQ(ibv_attach_mcast(s->qp, &grp, 0), 0);
	for (uint32_t k = 0; k < MSGS; k++)
		post_recv(s, k, k * 2048, 2048);
}

/* B: two QPs attached; says when, then checks what came. */
static void mc_b(int in, int out)
{
	struct side x, y;
	uint32_t src;
	uint8_t ok;

	rx_side(&x, b_ip);
	rx_side(&y, b_ip);
	ok = 'r';
	put(out, &ok, 1);
	get(in, &src, sizeof(src));
	ok = (uint8_t)(got_all(&x, src) && got_all(&y, src));
	put(out, &ok, 1);
	CHECK_EQ(ibv_detach_mcast(x.qp, &grp, 0), 0);
	CHECK_EQ(ibv_detach_mcast(y.qp, &grp, 0), 0);
	side_close(&x);
	side_close(&y);
}

static void mc_across(const char *a_ip, const char *peer_ip)
{
	struct host h;
	struct side s, l;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint32_t src;
	uint8_t c;

	b_ip = peer_ip;
	group_of(a_ip);
	two_hosts(&h, mc_b);
	get(h.from, &c, 1);
	side_open(&s, IBV_QPT_UD, a_ip);
	CHECK_EQ(ibv_attach_mcast(s.qp, &grp, 0), 0);
	rx_side(&l, a_ip);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.dgid = grp;
	aa.grh.sgid_index = (uint8_t)s.gid;
	aa.grh.hop_limit = 1;
	ah = ibv_create_ah(s.pd, &aa);
	CHECK(ah);
	src = s.qp->qp_num;
	put(h.to, &src, sizeof(src));
	for (uint32_t k = 0; k < MSGS; k++) {
		struct ibv_sge sge = { (uintptr_t)s.buf + 65536 + k * 128, 64,
				       s.mr->lkey };
		struct ibv_send_wr wr, *bad;

		for (uint32_t i = 0; i < 64; i++)
			s.buf[65536 + k * 128 + i] = (uint8_t)(i * 7 + k);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = k;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 0xffffff;
		wr.wr.ud.remote_qkey = QKEY;
		CHECK_EQ(ibv_post_send(s.qp, &wr, &bad), 0);
		wc1(&s, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
	}
	/* A's other QP had the local copies; B's two, the wire's. */
	CHECK(got_all(&l, src));
	get(h.from, &c, 1);
	CHECK_EQ(c, 1);
	/* The sender's QP, attached, had none of its own. */
	CHECK_EQ(ibv_poll_cq(s.cq, 1, &wc), 0);
	CHECK_EQ(ibv_detach_mcast(s.qp, &grp, 0), 0);
	CHECK_EQ(ibv_detach_mcast(l.qp, &grp, 0), 0);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	side_close(&l);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

SV_TEST_T(group_across_ipv4, 120)
{
	mc_across(IP4_A, IP4_B);
}

SV_TEST_T(group_across_ipv6, 120)
{
	mc_across(IP6_A, IP6_B);
}

SV_TEST_MAIN()

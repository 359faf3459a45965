/* SPDX-License-Identifier: MIT */
/*
 * UD receive completions on our RoCE v2 port, as mlx5 reports them: the SL
 * carries the RoCE packet type (bit 3 = UDP header, bits 2:0 = 2 for IPv4,
 * 1 for IPv6), and the 40 bytes before the payload hold the IPv4 header in
 * their last 20 (IPv4) or the GRH (IPv6).  UCX's ud_verbs takes the
 * destination address from there at the length the SL names and drops the
 * packet unless it is one of its GIDs: this test reads it the same way.
 */
#include "engine_util.h"

struct udp {
	struct ep a, b;
	struct ibv_ah *ah;
};

static void ud_pair(struct udp *u, struct ibv_context *ctx, int sgid_index,
		    const union ibv_gid *dgid)
{
	struct ibv_ah_attr aa;

	ep_open(&u->a, ctx, IBV_QPT_UD);
	ep_open(&u->b, ctx, IBV_QPT_UD);
	ep_connect(&u->a, 0);
	ep_connect(&u->b, 0);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.sgid_index = sgid_index;
	aa.grh.hop_limit = 64;
	aa.grh.dgid = *dgid;
	u->ah = ibv_create_ah(u->a.pd, &aa);
	CHECK(u->ah);
}

/* Sends len bytes from a to b; returns b's receive completion. */
static struct ibv_wc ud_send(struct udp *u, uint32_t len)
{
	struct ibv_sge s = { .addr = (uintptr_t)u->a.buf, .length = len,
			     .lkey = u->a.mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc, rwc;

	post_recv(&u->b, 7, u->b.buf, 40 + 1024);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = u->ah;
	wr.wr.ud.remote_qpn = u->b.qp->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(u->a.qp, &wr, &bad), 0);
	EXPECT_WC(u->a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(u->b.cq, &rwc, IBV_WC_SUCCESS);
	CHECK_EQ(rwc.opcode, IBV_WC_RECV);
	CHECK_EQ(rwc.byte_len, 40 + len);
	CHECK(rwc.wc_flags & IBV_WC_GRH);
	CHECK_EQ(rwc.src_qp, u->a.qp->qp_num);
	return rwc;
}

static void ud_close(struct udp *u)
{
	CHECK_EQ(ibv_destroy_ah(u->ah), 0);
	ep_close(&u->a);
	ep_close(&u->b);
}

static int v4mapped(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g->raw, pfx, 12);
}

/* UCX's check: the destination address at the length the SL names. */
static void check_dgid_as_ucx(const struct ibv_wc *wc, const uint8_t *grh,
			      const union ibv_gid *mine)
{
	size_t len = (wc->sl & 0x7) == 0x2 ? 4 : 16;

	CHECK(!memcmp(grh + 40 - len, mine->raw + 16 - len, len));
}

/* Every GID of the port, IPv4-mapped and IPv6: the SL and the address the
 * receiver finds. */
SV_TEST(ud_sl_is_roce_packet_type)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_port_attr pa;
	int v4 = 0, v6 = 0;

	CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid g, zero;
		struct udp u;
		struct ibv_wc wc;

		memset(&zero, 0, sizeof(zero));
		if (ibv_query_gid(ctx, 1, i, &g) || !memcmp(&g, &zero, 16))
			break;
		ud_pair(&u, ctx, i, &g);
		eu_pattern((uint8_t *)u.a.buf, 100, (unsigned)i);
		wc = ud_send(&u, 100);
		if (v4mapped(&g)) {
			/* IPv4 header in the last 20 of the 40 bytes. */
			CHECK_EQ(wc.sl, 0xa);
			CHECK_EQ((uint8_t)u.b.buf[20], 0x45);
			CHECK(!memcmp(u.b.buf + 36, g.raw + 12, 4));
			v4++;
		} else {
			CHECK_EQ(wc.sl, 0x9);
			CHECK(!memcmp(u.b.buf + 24, g.raw, 16));
			v6++;
		}
		check_dgid_as_ucx(&wc, (uint8_t *)u.b.buf, &g);
		{
			uint8_t want[100];

			eu_pattern(want, 100, (unsigned)i);
			CHECK(!memcmp(u.b.buf + 40, want, 100));
		}
		/* The completion still makes a reply AH (as udaddy does). */
		{
			struct ibv_ah *r = ibv_create_ah_from_wc(
				u.b.pd, &wc, (struct ibv_grh *)u.b.buf, 1);

			CHECK(r);
			CHECK_EQ(ibv_destroy_ah(r), 0);
		}
		ud_close(&u);
	}
	/* 127.0.0.1 is always in the table; ::1 when IPv6 is up. */
	CHECK(v4 >= 1);
	fprintf(stderr, "checked %d IPv4 and %d IPv6 GIDs\n", v4, v6);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST_MAIN()

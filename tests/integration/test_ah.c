/* SPDX-License-Identifier: MIT */
/* AHs on a RoCE port: GRH required, source GID must exist, PD use count,
 * and ibv_init_ah_from_wc / ibv_create_ah_from_wc from the 40-byte GRH
 * (IPv6 header, or IPv4 header in its last 20 bytes). */
#include "dp_util.h"

#include <arpa/inet.h>

SV_TEST(create_rules)
{
	struct sv_status_rep base;
	struct ibv_ah_attr a;
	struct ibv_ah *ah;
	struct dp d;

	sv_test_baseline(&base);
	dp_open(&d, 4);
	memset(&a, 0, sizeof(a));
	a.port_num = 1;
	a.dlid = 1;
	CHECK_NULL_ERRNO(ibv_create_ah(d.pd, &a), EINVAL); /* no GRH */
	a.is_global = 1;
	a.grh.sgid_index = 250;
	CHECK_NULL_ERRNO(ibv_create_ah(d.pd, &a), EINVAL);
	a.grh.sgid_index = 0;
	a.port_num = 2;
	CHECK_NULL_ERRNO(ibv_create_ah(d.pd, &a), EINVAL);
	a.port_num = 1;
	CHECK_EQ(ibv_query_gid(d.ctx, 1, 0, &a.grh.dgid), 0);
	ah = ibv_create_ah(d.pd, &a);
	CHECK(ah);
	CHECK(ah->pd == d.pd && ah->context == d.ctx);
	CHECK_EQ(ibv_dealloc_pd(d.pd), EBUSY);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	dp_close(&d);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(from_wc_ipv6)
{
	struct ibv_grh grh;
	struct ibv_wc wc = { .wc_flags = IBV_WC_GRH, .sl = 0 };
	struct ibv_ah_attr a;
	union ibv_gid mine, peer;
	struct ibv_ah *ah;
	struct dp d;

	dp_open(&d, 4);
	CHECK_EQ(ibv_query_gid(d.ctx, 1, 0, &mine), 0);
	memset(&peer, 0, sizeof(peer));
	peer.raw[0] = 0xfe;
	peer.raw[1] = 0x80;
	peer.raw[15] = 0x42;
	memset(&grh, 0, sizeof(grh));
	grh.version_tclass_flow = htonl(6u << 28 | 0x12u << 20 | 0xabcde);
	grh.sgid = peer;
	grh.dgid = mine;
	CHECK_EQ(ibv_init_ah_from_wc(d.ctx, 1, &wc, &grh, &a), 0);
	CHECK_EQ(a.is_global, 1);
	CHECK(!memcmp(&a.grh.dgid, &peer, 16));
	CHECK_EQ(a.grh.flow_label, 0xabcde);
	CHECK_EQ(a.grh.traffic_class, 0x12);
	CHECK_EQ(a.port_num, 1);
	{
		union ibv_gid g;

		CHECK_EQ(ibv_query_gid(d.ctx, 1, a.grh.sgid_index, &g), 0);
		CHECK(!memcmp(&g, &mine, 16));
	}
	/* A destination GID this port does not have. */
	grh.dgid = peer;
	errno = 0;
	CHECK_EQ(ibv_init_ah_from_wc(d.ctx, 1, &wc, &grh, &a), -1);
	CHECK_EQ(errno, EINVAL);
	grh.dgid = mine;
	ah = ibv_create_ah_from_wc(d.pd, &wc, &grh, 1);
	CHECK(ah);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	dp_close(&d);
}

SV_TEST(from_wc_ipv4)
{
	uint8_t raw[40];
	struct ibv_wc wc = { .wc_flags = IBV_WC_GRH };
	struct ibv_ah_attr a;
	union ibv_gid mine;
	struct dp d;

	dp_open(&d, 4);
	CHECK_EQ(ibv_query_gid(d.ctx, 1, 0, &mine), 0);
	memset(raw, 0, sizeof(raw));
	raw[20] = 0x45;
	raw[21] = 0x08; /* TOS */
	raw[32] = 10, raw[33] = 1, raw[34] = 2, raw[35] = 3; /* source */
	memcpy(raw + 36, &mine.raw[12], 4);		   /* destination */
	if (mine.raw[10] == 0xff && mine.raw[11] == 0xff) {
		CHECK_EQ(ibv_init_ah_from_wc(d.ctx, 1, &wc,
					     (struct ibv_grh *)raw, &a), 0);
		CHECK_EQ(a.grh.dgid.raw[10], 0xff);
		CHECK_EQ(a.grh.dgid.raw[12], 10);
		CHECK_EQ(a.grh.dgid.raw[15], 3);
		CHECK_EQ(a.grh.traffic_class, 0x08);
	} else {
		/* GID 0 is not IPv4-mapped: no entry matches. */
		CHECK_EQ(ibv_init_ah_from_wc(d.ctx, 1, &wc,
					     (struct ibv_grh *)raw, &a), -1);
	}
	/* Without IBV_WC_GRH there is no address to take. */
	wc.wc_flags = 0;
	CHECK_EQ(ibv_init_ah_from_wc(d.ctx, 1, &wc, NULL, &a), 0);
	CHECK_EQ(a.is_global, 0);
	dp_close(&d);
}

SV_TEST_MAIN()

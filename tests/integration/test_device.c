/* SPDX-License-Identifier: MIT */
/* Device list, open/close and every query verb, with good and bad input. */
#include "sv_test.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <unistd.h>

/* Private in rdma-core (IBVERBS_PRIVATE_34), used by rdma-cm. */
int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port_num,
		       unsigned int index, int *type);

SV_TEST(device_list)
{
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);

	CHECK(list);
	CHECK_EQ(n, 1);
	CHECK(!strcmp(ibv_get_device_name(list[0]), "sv0"));
	CHECK(ibv_get_device_guid(list[0]) != 0);
	CHECK_EQ(ibv_get_device_index(list[0]), 0);
	CHECK_EQ(list[0]->node_type, IBV_NODE_CA);
	CHECK_EQ(list[0]->transport_type, IBV_TRANSPORT_IB);
	ibv_free_device_list(list);
	/* NULL num_devices is allowed. */
	list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	ibv_free_device_list(list);
}

SV_TEST(device_name_from_env)
{
	/* The daemon takes its name from the environment it starts in. */
	char sock[64];
	struct ibv_device **list;

	snprintf(sock, sizeof(sock), "svtest.name.%d", (int)getpid());
	setenv("SOFTVERBS_SOCKET", sock, 1);
	setenv("SOFTVERBS_DEVICE_NAME", "myrdma7", 1);
	setenv("SOFTVERBS_IDLE_TIMEOUT", "1", 1);
	list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	CHECK(!strcmp(ibv_get_device_name(list[0]), "myrdma7"));
	ibv_free_device_list(list);
}

SV_TEST(query_device)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_device_attr a;

	memset(&a, 0xab, sizeof(a));
	CHECK_EQ(ibv_query_device(ctx, &a), 0);
	CHECK(a.max_qp > 0 && a.max_cq > 0 && a.max_mr > 0);
	CHECK(a.max_mr_size >= (1ULL << 40));
	CHECK(a.max_sge > 0 && a.max_qp_wr > 0 && a.page_size_cap);
	CHECK_EQ(a.atomic_cap, IBV_ATOMIC_HCA);
	CHECK(a.vendor_id != 0x02c9 && a.vendor_id != 0x1d0f);
	CHECK(!strncmp(a.fw_ver, "softverbs ", 10));
	CHECK_EQ(a.phys_port_cnt, 1);
	CHECK(a.node_guid == ibv_get_device_guid(ctx->device));
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* Multicast announced with rxe's limits (test_mcast.c has the rest). */
SV_TEST(multicast_announced)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_device_attr a;

	CHECK_EQ(ibv_query_device(ctx, &a), 0);
	CHECK_EQ(a.max_mcast_grp, 8192);
	CHECK_EQ(a.max_mcast_qp_attach, 56);
	CHECK_EQ(a.max_total_mcast_qp_attach, 8192 * 56);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(query_device_ex)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_query_device_ex_input in = { .comp_mask = 0 };
	struct ibv_device_attr_ex ax;
	struct {
		struct ibv_device_attr a;
		uint64_t guard;
	} small;

	memset(&ax, 0, sizeof(ax));
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &ax), 0);
	CHECK(ax.max_dm_size > 0);
	CHECK(ax.odp_caps.general_caps & IBV_ODP_SUPPORT);
	CHECK_EQ(ibv_query_device_ex(ctx, &in, &ax), 0);
	in.comp_mask = 1;
	CHECK_EQ(ibv_query_device_ex(ctx, &in, &ax), EINVAL);
	/* A caller with only the legacy struct gets exactly that much. */
	small.guard = 0x1122334455667788ULL;
	CHECK_EQ(verbs_get_ctx(ctx)->query_device_ex(ctx, NULL,
						     (struct ibv_device_attr_ex *)&small,
						     sizeof(small.a)), 0);
	CHECK_EQ(small.guard, 0x1122334455667788ULL);
	CHECK_EQ(small.a.phys_port_cnt, 1);
	/* Smaller than the legacy struct: refused. */
	CHECK_EQ(verbs_get_ctx(ctx)->query_device_ex(ctx, NULL, &ax, 8), EINVAL);
	ibv_close_device(ctx);
}

SV_TEST(query_port)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_port_attr p;
	struct {
		char b[offsetof(struct ibv_port_attr, port_cap_flags2)];
		char guard[8];
	} compat;

	memset(&p, 0xff, sizeof(p));
	CHECK_EQ(ibv_query_port(ctx, 1, &p), 0);
	CHECK_EQ(p.state, IBV_PORT_ACTIVE);
	CHECK_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
	CHECK(p.gid_tbl_len > 0);
	CHECK(p.active_mtu >= IBV_MTU_1024 && p.active_mtu <= p.max_mtu);
	CHECK_EQ(p.pkey_tbl_len, 1);
	CHECK_EQ(p.port_cap_flags2, 0);
	CHECK_EQ(ibv_query_port(ctx, 2, &p), EINVAL);
	CHECK_EQ(ibv_query_port(ctx, 0, &p), EINVAL);
	/* The exported symbol writes only the old struct. */
	memset(compat.guard, 0x5a, sizeof(compat.guard));
#undef ibv_query_port
	CHECK_EQ(ibv_query_port(ctx, 1, (struct _compat_ibv_port_attr *)&compat), 0);
	CHECK_EQ(compat.guard[0], 0x5a);
	CHECK_EQ(((struct ibv_port_attr *)&compat)->state, IBV_PORT_ACTIVE);
	/* The op writes only port_attr_len bytes. */
	memset(&p, 0x77, sizeof(p));
	CHECK_EQ(verbs_get_ctx(ctx)->query_port(ctx, 1, &p, 4), 0);
	CHECK_EQ(p.state, IBV_PORT_ACTIVE);
	CHECK_EQ(p.max_mtu, 0x77777777);
	ibv_close_device(ctx);
}

SV_TEST(query_gid)
{
	struct ibv_context *ctx = sv_test_open_dev();
	union ibv_gid gid, zero = { 0 };
	struct ibv_gid_entry e, tbl[64];
	int found_lo = 0, type = -1;
	ssize_t n;

	n = ibv_query_gid_table(ctx, tbl, 64, 0);
	CHECK(n >= 1);
	for (ssize_t i = 0; i < n; i++) {
		CHECK_EQ(tbl[i].gid_index, i);
		CHECK_EQ(tbl[i].port_num, 1);
		CHECK_EQ(tbl[i].gid_type, IBV_GID_TYPE_ROCE_V2);
		if (!memcmp(tbl[i].gid.raw,
			    "\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f\0\0\1", 16))
			found_lo = 1;
		CHECK_EQ(ibv_query_gid(ctx, 1, i, &gid), 0);
		CHECK(!memcmp(&gid, &tbl[i].gid, 16));
		CHECK_EQ(ibv_query_gid_ex(ctx, 1, i, &e, 0), 0);
		CHECK(!memcmp(&e, &tbl[i], sizeof(e)));
	}
	CHECK(found_lo);
	/* Empty slot: _ex says ENODATA, the old API a zero GID. */
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, n, &e, 0), ENODATA);
	memset(&gid, 0xff, sizeof(gid));
	CHECK_EQ(ibv_query_gid(ctx, 1, n, &gid), 0);
	CHECK(!memcmp(&gid, &zero, 16));
	/* Out of the table, bad port, bad flags. */
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 100000, &e, 0), EINVAL);
	CHECK_EQ(ibv_query_gid_ex(ctx, 2, 0, &e, 0), EINVAL);
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 0, &e, 1), EINVAL);
	errno = 0;
	CHECK_EQ(ibv_query_gid(ctx, 2, 0, &gid), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(ibv_query_gid(ctx, 1, 100000, &gid), -1);
	/* Table: zero entries, too few entries, flags. */
	CHECK_EQ(ibv_query_gid_table(ctx, tbl, 0, 0), -EINVAL);
	CHECK_EQ(ibv_query_gid_table(ctx, tbl, 64, 1), -EINVAL);
	if (n > 1)
		CHECK_EQ(ibv_query_gid_table(ctx, tbl, n - 1, 0), -EINVAL);
	CHECK_EQ(ibv_query_gid_type(ctx, 1, 0, &type), 0);
	CHECK_EQ(type, 1); /* IBV_GID_TYPE_SYSFS_ROCE_V2 */
	ibv_close_device(ctx);
}

SV_TEST(query_pkey)
{
	struct ibv_context *ctx = sv_test_open_dev();
	__be16 pkey = 0;

	CHECK_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
	CHECK_EQ(ntohs(pkey), 0xffff);
	CHECK_EQ(ibv_query_pkey(ctx, 1, 1, &pkey), -1);
	CHECK_EQ(ibv_query_pkey(ctx, 2, 0, &pkey), -1);
	CHECK_EQ(ibv_get_pkey_index(ctx, 1, htons(0xffff)), 0);
	CHECK_EQ(ibv_get_pkey_index(ctx, 1, htons(0x1234)), -1);
	ibv_close_device(ctx);
}

SV_TEST(open_close_no_leak)
{
	struct sv_status_rep base;
	struct ibv_context *ctx[8];

	ibv_free_device_list(ibv_get_device_list(NULL));
	CHECK_EQ(sv_test_status(&base), 0);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 8; i++)
			ctx[i] = sv_test_open_dev();
		for (int i = 0; i < 8; i++)
			CHECK_EQ(ibv_close_device(ctx[i]), 0);
	}
	sv_test_wait_quiet(&base, 2000);
}

SV_TEST_MAIN()

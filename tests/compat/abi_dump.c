/* SPDX-License-Identifier: MIT */
/*
 * Prints what the pure helpers of libibverbs answer: enum strings, rate
 * conversions, kernel-struct marshalling, sysfs helpers.  Built against
 * Debian's libibverbs like any consumer, and run twice by abi_symbols.sh:
 * once on rdma-core's library, once on ours; the outputs must be identical.
 * Needs no device and no daemon.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

/* Exported by libibverbs but declared only in uninstalled headers. */
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
				struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
				struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
				 struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
			       struct ibv_sa_path_rec *src);
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);

static uint32_t seed = 12345;

static void fill_random(void *p, size_t n)
{
	unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = seed >> 16;
	}
}

static void hexdump(const char *tag, int iter, const void *p, size_t n)
{
	const unsigned char *b = p;

	printf("%s[%d]", tag, iter);
	for (size_t i = 0; i < n; i++)
		printf("%s%02x", i % 32 ? "" : "\n  ", b[i]);
	printf("\n");
}

static void dump_strings(void)
{
	for (int i = -2; i < 40; i++)
		printf("wc_status %d %s\n", i, ibv_wc_status_str(i));
	for (int i = -2; i < 40; i++)
		printf("event %d %s\n", i, ibv_event_type_str(i));
	for (int i = -3; i < 12; i++)
		printf("node %d %s\n", i, ibv_node_type_str(i));
	for (int i = -2; i < 12; i++)
		printf("port_state %d %s\n", i, ibv_port_state_str(i));
}

static void dump_rates(void)
{
	for (int r = -2; r < 40; r++) {
		int mult = ibv_rate_to_mult(r), mbps = ibv_rate_to_mbps(r);

		printf("rate %d mult %d mbps %d back %d %d\n", r, mult, mbps,
		       mult_to_ibv_rate(mult), mbps_to_ibv_rate(mbps));
		printf("near %d %d %d %d\n", mbps_to_ibv_rate(mbps + 1),
		       mbps_to_ibv_rate(mbps - 1), mult_to_ibv_rate(mult + 1),
		       mult_to_ibv_rate(mult * 2));
	}
	for (int m = -3; m < 1000; m++)
		if (mult_to_ibv_rate(m) != IBV_RATE_MAX)
			printf("mult %d -> %d\n", m, mult_to_ibv_rate(m));
	for (int m = -3; m < 2000000; m += 7)
		if (mbps_to_ibv_rate(m) != IBV_RATE_MAX)
			printf("mbps %d -> %d\n", m, mbps_to_ibv_rate(m));
}

static void dump_marshall(void)
{
	for (int it = 0; it < 8; it++) {
		struct ib_uverbs_qp_attr kqp;
		struct ib_uverbs_ah_attr kah;
		struct ib_user_path_rec kpr;
		struct ibv_sa_path_rec upr;
		struct ibv_qp_attr qp;
		struct ibv_ah_attr ah;

		fill_random(&kqp, sizeof(kqp));
		memset(&qp, 0xa5, sizeof(qp));
		ibv_copy_qp_attr_from_kern(&qp, &kqp);
		hexdump("qp_attr_from_kern", it, &qp, sizeof(qp));

		fill_random(&kah, sizeof(kah));
		memset(&ah, 0x5a, sizeof(ah));
		ibv_copy_ah_attr_from_kern(&ah, &kah);
		hexdump("ah_attr_from_kern", it, &ah, sizeof(ah));

		fill_random(&kpr, sizeof(kpr));
		memset(&upr, 0xc3, sizeof(upr));
		ibv_copy_path_rec_from_kern(&upr, &kpr);
		hexdump("path_rec_from_kern", it, &upr, sizeof(upr));

		fill_random(&upr, sizeof(upr));
		memset(&kpr, 0x3c, sizeof(kpr));
		ibv_copy_path_rec_to_kern(&kpr, &upr);
		hexdump("path_rec_to_kern", it, &kpr, sizeof(kpr));
	}
}

static void dump_sysfs(void)
{
	char buf[64] = "untouched";
	int ret;

	printf("sysfs_path %s\n", ibv_get_sysfs_path());
	errno = 0;
	ret = ibv_read_sysfs_file("/nonexistent-softverbs-dir", "node_guid",
				  buf, sizeof(buf));
	printf("read_sysfs_file %d errno %d\n", ret, errno);
}

int main(void)
{
	dump_strings();
	dump_rates();
	dump_marshall();
	dump_sysfs();
	return 0;
}

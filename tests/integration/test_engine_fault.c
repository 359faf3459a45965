/* SPDX-License-Identifier: MIT */
/*
 * The transport on a lossy link (SOFTVERBS_FAULT=drop:P,dup:P,reorder:P):
 * RC sends, writes, reads and atomics still complete, in order, with the
 * right bytes, each executed once; UC loses whole messages but never
 * delivers a corrupt one; with every packet dropped RC gives up with
 * IBV_WC_RETRY_EXC_ERR after retry_cnt retries.
 */
#include "engine_util.h"

#include <stdlib.h>

static void pair_faulty(struct ep *a, struct ep *b, enum ibv_qp_type t,
			const char *fault, uint8_t retry)
{
	/* Read when the engine attaches (the first QP of this process). */
	setenv("SOFTVERBS_FAULT", fault, 1);
	ep_open(a, NULL, t);
	ep_open(b, a->ctx, t);
	/* timeout 8: ~1 ms (the engine's floor is 10 ms) */
	ep_connect_ex(a, b->qp->qp_num, 8, retry, 7, 1);
	ep_connect_ex(b, a->qp->qp_num, 8, retry, 7, 1);
}

static void stamp(uint8_t *p, uint32_t n, uint32_t id)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = (uint8_t)(id * 7 + i * 3 + (i >> 9));
}

static int stamped(const uint8_t *p, uint32_t n, uint32_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(id * 7 + i * 3 + (i >> 9)))
			return 0;
	return 1;
}

#define NMSG 150
#define SLOT 10000 /* receive slot; messages up to 9000 bytes */

static uint32_t msg_len(uint32_t i)
{
	return 1 + (i * 2654435761u) % 9000;
}

SV_TEST_T(rc_under_loss_sends_in_order, 120)
{
	struct ep a, b;
	struct ibv_wc wc;
	uint8_t *src = malloc(9000);
	uint8_t *rbuf;
	struct ibv_mr *rmr;
	uint32_t posted = 0, got = 0;

	CHECK(src);
	pair_faulty(&a, &b, IBV_QPT_RC, "drop:0.05,dup:0.01,reorder:0.01,seed:1",
		    7);
	CHECK(posix_memalign((void **)&rbuf, 4096, (size_t)NMSG * SLOT) == 0);
	rmr = ibv_reg_mr(b.pd, rbuf, (size_t)NMSG * SLOT, IBV_ACCESS_LOCAL_WRITE);
	CHECK(rmr);
	for (uint32_t i = 0; i < NMSG; i++) {
		struct ibv_sge s = { (uintptr_t)rbuf + (size_t)i * SLOT, SLOT,
				     rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &s,
					  .num_sge = 1 },
				   *bad;

		if (i < 60)
			CHECK_EQ(ibv_post_recv(b.qp, &wr, &bad), 0);
	}
	posted = 60;
	for (uint32_t i = 0; i < NMSG; i++) {
		uint32_t n = msg_len(i);

		stamp((uint8_t *)a.buf, n, i);
		post_send_op(&a, 1000 + i, IBV_WR_SEND, a.buf, n, 0, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 1000 + i);
		/* Drain receives, checking order and bytes. */
		while (ibv_poll_cq(b.cq, 1, &wc) == 1) {
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, got);
			CHECK_EQ(wc.byte_len, msg_len(got));
			CHECK(stamped(rbuf + (size_t)got * SLOT, wc.byte_len, got));
			got++;
		}
		while (posted < NMSG && posted < got + 60) {
			struct ibv_sge s = { (uintptr_t)rbuf + (size_t)posted * SLOT,
					     SLOT, rmr->lkey };
			struct ibv_recv_wr wr = { .wr_id = posted, .sg_list = &s,
						  .num_sge = 1 },
					   *bad;

			CHECK_EQ(ibv_post_recv(b.qp, &wr, &bad), 0);
			posted++;
		}
	}
	while (got < NMSG) {
		EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, got);
		CHECK_EQ(wc.byte_len, msg_len(got));
		CHECK(stamped(rbuf + (size_t)got * SLOT, wc.byte_len, got));
		got++;
	}
	CHECK(!poll1(b.cq, &wc, 50)); /* nothing twice */
	CHECK_EQ(ibv_dereg_mr(rmr), 0);
	free(rbuf);
	free(src);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST_T(rc_under_loss_write_read_atomic, 120)
{
	struct ep a, b;
	struct ibv_wc wc;
	uint64_t *counter, old;

	pair_faulty(&a, &b, IBV_QPT_RC, "drop:0.05,dup:0.02,reorder:0.02,seed:2",
		    7);
	/* Writes of many sizes, pipelined (8 in flight), each read back. */
	for (uint32_t round = 0; round < 40; round++) {
		for (uint32_t k = 0; k < 4; k++) {
			uint32_t id = round * 4 + k, n = 1 + (id * 977) % 8000;

			stamp((uint8_t *)a.buf + k * 8192, n, id);
			post_send_op(&a, id, IBV_WR_RDMA_WRITE, a.buf + k * 8192, n,
				     (uintptr_t)b.buf + k * 8192, b.mr->rkey);
		}
		for (uint32_t k = 0; k < 4; k++) {
			uint32_t id = round * 4 + k, n = 1 + (id * 977) % 8000;

			post_send_op(&a, 5000 + id, IBV_WR_RDMA_READ,
				     a.buf + 32768 + k * 8192, n,
				     (uintptr_t)b.buf + k * 8192, b.mr->rkey);
		}
		for (uint32_t k = 0; k < 8; k++) {
			EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, k < 4 ? round * 4 + k :
						   5000 + round * 4 + k - 4);
		}
		for (uint32_t k = 0; k < 4; k++) {
			uint32_t id = round * 4 + k, n = 1 + (id * 977) % 8000;

			CHECK(stamped((uint8_t *)b.buf + k * 8192, n, id));
			CHECK(stamped((uint8_t *)a.buf + 32768 + k * 8192, n, id));
		}
	}
	/* Atomics: a duplicate or a retry never applies twice. */
	counter = (uint64_t *)(void *)(b.buf + 60000);
	*counter = 0;
	for (uint32_t i = 0; i < 200; i++) {
		eu_post_keyed(&a, i, IBV_WR_ATOMIC_FETCH_AND_ADD,
			      (uintptr_t)a.buf + 60000, 8, a.mr->lkey,
			      (uintptr_t)counter, b.mr->rkey, 1, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		memcpy(&old, a.buf + 60000, 8);
		CHECK_EQ(old, i);
	}
	CHECK_EQ(*counter, 200);
	ep_close(&a);
	ep_close(&b);
}

/*
 * Four long RDMA WRITEs (A's memory into B's) or READs (B's into A's)
 * of len bytes under the given faults, each checked byte for byte.
 */
static void long_transfers(enum ibv_wr_opcode op, uint32_t len,
			   const char *faults)
{
	struct ep a, b;
	struct ibv_wc wc;
	uint8_t *src, *dst;
	struct ibv_mr *smr, *dmr;
	int rd = op == IBV_WR_RDMA_READ;

	pair_faulty(&a, &b, IBV_QPT_RC, faults, 7);
	CHECK(posix_memalign((void **)&src, 4096, len) == 0);
	CHECK(posix_memalign((void **)&dst, 4096, len) == 0);
	/* The target's memory takes remote access, the initiator's local. */
	smr = ibv_reg_mr(rd ? b.pd : a.pd, src, len,
			 rd ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(rd ? a.pd : b.pd, dst, len,
			 IBV_ACCESS_LOCAL_WRITE |
				 (rd ? 0 : IBV_ACCESS_REMOTE_WRITE));
	CHECK(smr && dmr);
	for (uint32_t i = 0; i < 4; i++) {
		struct ibv_sge s = { (uintptr_t)(rd ? dst : src), len,
				     rd ? dmr->lkey : smr->lkey };
		struct ibv_send_wr wr, *bad;

		stamp(src, len, 100 + i);
		memset(dst, 0, len);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = i;
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.opcode = op;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)(rd ? src : dst);
		wr.wr.rdma.rkey = rd ? smr->rkey : dmr->rkey;
		CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, i);
		CHECK(stamped(dst, len, 100 + i));
	}
	CHECK_EQ(ibv_dereg_mr(smr), 0);
	CHECK_EQ(ibv_dereg_mr(dmr), 0);
	free(src);
	free(dst);
	ep_close(&a);
	ep_close(&b);
}

/* Messages longer than the send window (128 packets of 1 KiB): the
 * window fills while the WQE is half sent, and when the packets before
 * it are the lost ones only the retransmission timer can resume it. */
SV_TEST_T(rc_under_loss_messages_longer_than_the_window, 120)
{
	long_transfers(IBV_WR_RDMA_WRITE, 1u << 20,
		       "drop:0.05,dup:0.01,reorder:0.01,seed:3");
}

/* READs of 512 KiB under loss: each lost response is asked for again
 * from where the data stopped (more than a window into the READ too),
 * and the READ completes with every byte. */
SV_TEST_T(rc_under_loss_long_reads, 120)
{
	long_transfers(IBV_WR_RDMA_READ, 512u << 10,
		       "drop:0.03,dup:0.01,reorder:0.01,seed:5");
}

SV_TEST_T(uc_loses_but_never_corrupts, 120)
{
	struct ep a, b;
	struct ibv_wc wc;
	uint32_t n = 3000, last = 0, got = 0;
	int first = 1;
	uint8_t *rbuf;
	struct ibv_mr *rmr;

	pair_faulty(&a, &b, IBV_QPT_UC, "drop:0.1,dup:0.02,reorder:0.02,seed:3",
		    7);
	CHECK(posix_memalign((void **)&rbuf, 4096, 200 * 4096) == 0);
	memset(rbuf, 0, 200 * 4096);
	rmr = ibv_reg_mr(b.pd, rbuf, 200 * 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(rmr);
	for (uint32_t i = 0; i < 200; i++) {
		struct ibv_sge s = { (uintptr_t)rbuf + i * 4096, 4096, rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &s,
					  .num_sge = 1 },
				   *bad;

		if (i < 60)
			CHECK_EQ(ibv_post_recv(b.qp, &wr, &bad), 0);
	}
	for (uint32_t i = 0; i < 200; i++) {
		uint32_t *w = (uint32_t *)(void *)a.buf;

		for (uint32_t k = 0; k < n / 4; k++)
			w[k] = 0xabc00000u | i;
		post_send_op(&a, i, IBV_WR_SEND, a.buf, n, 0, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS); /* UC: sent is done */
		while (ibv_poll_cq(b.cq, 1, &wc) == 1) {
			const uint32_t *r =
				(const uint32_t *)(void *)(rbuf + wc.wr_id * 4096);

			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, got);
			CHECK_EQ(wc.byte_len, n);
			/* One whole message, newer than the previous one. */
			CHECK((r[0] & 0xfff00000u) == 0xabc00000u);
			for (uint32_t k = 1; k < n / 4; k++)
				CHECK_EQ(r[k], r[0]);
			CHECK(first || (r[0] & 0xfffff) > last);
			first = 0;
			last = r[0] & 0xfffff;
			got++;
			{
				struct ibv_sge s = { (uintptr_t)rbuf + (got + 59) % 200 * 4096,
						     4096, rmr->lkey };
				struct ibv_recv_wr rw = { .wr_id = got + 59,
							  .sg_list = &s,
							  .num_sge = 1 },
						   *bad;

				if (got + 59 < 200)
					CHECK_EQ(ibv_post_recv(b.qp, &rw, &bad), 0);
			}
		}
	}
	while (poll1(b.cq, &wc, 200)) {
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		got++;
	}
	/* 10% of 600 packets lost: some messages lost, most delivered. */
	CHECK(got < 200);
	CHECK(got > 50);
	CHECK_EQ(ibv_dereg_mr(rmr), 0);
	free(rbuf);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST_T(everything_dropped_is_retry_exceeded, 60)
{
	struct ep a, b;
	struct ibv_wc wc;

	pair_faulty(&a, &b, IBV_QPT_RC, "drop:1", 3);
	post_recv(&b, 1, b.buf, 4096);
	post_send_op(&a, 2, IBV_WR_SEND, a.buf, 100, 0, 0);
	post_send_op(&a, 3, IBV_WR_SEND, a.buf, 100, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_RETRY_EXC_ERR);
	CHECK_EQ(wc.wr_id, 2);
	EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 3);
	CHECK(!poll1(b.cq, &wc, 50)); /* nothing arrived */
	ep_close(&a);
	ep_close(&b);
}

SV_TEST_MAIN()

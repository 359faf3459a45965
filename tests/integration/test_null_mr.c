/* SPDX-License-Identifier: MIT */
/*
 * ibv_alloc_null_mr (ibv_alloc_null_mr(3), as mlx5 does it): an lkey that
 * drops what the device writes through it and reads as zeros, over every
 * address; no rkey; ibv_rereg_mr refuses it; its PD stays busy while it
 * lives.  Data cases within one process and between two (the copy into
 * another process's memory); tests.cmake runs them again with
 * SOFTVERBS_DIRECT=0 (packets).
 */
#include "engine_util.h"

#include <stdint.h>

static struct ibv_mr *null_mr(struct ibv_pd *pd)
{
	struct ibv_mr *mr = ibv_alloc_null_mr(pd);

	CHECK(mr);
	return mr;
}

SV_TEST(alloc_rules)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr, *imp;
	struct ibv_context *ictx;
	struct ibv_pd *ipd;
	char buf[64];

	CHECK(pd);
	mr = null_mr(pd);
	CHECK(mr->addr == NULL);
	CHECK_EQ(mr->length, SIZE_MAX);
	CHECK_EQ(mr->rkey, 0);
	CHECK(mr->lkey != 0);
	CHECK(mr->pd == pd && mr->context == ctx);
	/* "The use of ibv_rereg_mr() ... with this MR is invalid." */
	errno = 0;
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf,
			      sizeof(buf), 0),
		 IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE),
		 IBV_REREG_MR_ERR_INPUT);
	/* The MR holds its PD. */
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	/* Its handle names nothing another context can import. */
	ictx = ibv_import_device(dup(ctx->cmd_fd));
	CHECK(ictx);
	ipd = ibv_import_pd(ictx, pd->handle);
	CHECK(ipd);
	errno = 0;
	imp = ibv_import_mr(ipd, mr->handle);
	CHECK(!imp);
	CHECK_EQ(errno, ENOENT);
	ibv_unimport_pd(ipd);
	CHECK_EQ(ibv_close_device(ictx), 0);
	/* The daemon lists it as a null MR without an rkey. */
	{
		static struct sv_res_rep rep;
		struct sv_res_req req = { .type = 0 };
		int seen = 0;

		sv_test_res_page(&req, &rep);
		for (uint32_t i = 0; i < rep.count; i++) {
			const struct sv_res_entry *e = &rep.e[i];

			if (e->type != SV_RES_MR || e->handle != mr->handle)
				continue;
			CHECK_EQ(e->flags & 4, 4);
			CHECK_EQ(e->rkey, 0);
			CHECK_EQ(e->lkey, mr->lkey);
			CHECK_EQ(e->length, UINT64_MAX);
			seen = 1;
		}
		CHECK(seen);
	}
	/* Two at once are two MRs. */
	{
		struct ibv_mr *mr2 = null_mr(pd);

		CHECK(mr2->lkey != mr->lkey);
		CHECK_EQ(ibv_dereg_mr(mr2), 0);
	}
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* Two connected RC endpoints on one context (each its own PD), and a
 * null MR in each PD. */
struct nm {
	struct ep a, b;
	struct ibv_mr *na, *nb;
};

static void nm_open(struct nm *n)
{
	ep_open(&n->a, NULL, IBV_QPT_RC);
	ep_open(&n->b, n->a.ctx, IBV_QPT_RC);
	ep_connect(&n->a, n->b.qp->qp_num);
	ep_connect(&n->b, n->a.qp->qp_num);
	n->na = null_mr(n->a.pd);
	n->nb = null_mr(n->b.pd);
}

static void nm_close(struct nm *n)
{
	CHECK_EQ(ibv_dereg_mr(n->na), 0);
	CHECK_EQ(ibv_dereg_mr(n->nb), 0);
	ep_close(&n->a);
	ep_close(&n->b);
	CHECK_EQ(ibv_close_device(n->a.ctx), 0);
}

static void post_sges(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op,
		      struct ibv_sge *s, int n, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = s;
	wr.num_sge = n;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
}

SV_TEST(send_from_null_reads_zeros)
{
	struct nm n;
	struct ibv_wc wc;
	struct ibv_sge s[2];

	nm_open(&n);
	/* A, B: a null-MR range (any address) then 16 real bytes. */
	memset(n.b.buf, 0xaa, 8192);
	memcpy(n.a.buf, "0123456789abcdef", 16);
	post_recv(&n.b, 1, n.b.buf, 8192);
	s[0] = (struct ibv_sge){ 0x1234567, 3000, n.na->lkey };
	s[1] = (struct ibv_sge){ (uintptr_t)n.a.buf, 16, n.a.mr->lkey };
	post_sges(n.a.qp, 2, IBV_WR_SEND, s, 2, 0, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(n.b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 3016);
	for (int i = 0; i < 3000; i++)
		CHECK_EQ((uint8_t)n.b.buf[i], 0);
	CHECK(!memcmp(n.b.buf + 3000, "0123456789abcdef", 16));
	CHECK_EQ((uint8_t)n.b.buf[3016], 0xaa);
	/* An RDMA WRITE from it writes zeros. */
	memset(n.b.buf, 0xaa, 8192);
	s[0] = (struct ibv_sge){ 0, 5000, n.na->lkey };
	post_sges(n.a.qp, 3, IBV_WR_RDMA_WRITE, s, 1, (uintptr_t)n.b.buf + 100,
		  n.b.mr->rkey);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ((uint8_t)n.b.buf[99], 0xaa);
	for (int i = 100; i < 5100; i++)
		CHECK_EQ((uint8_t)n.b.buf[i], 0);
	CHECK_EQ((uint8_t)n.b.buf[5100], 0xaa);
	nm_close(&n);
}

SV_TEST(writes_into_null_are_dropped)
{
	struct nm n;
	struct ibv_wc wc;
	struct ibv_sge s[2];
	struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = s, .num_sge = 2 }, *rb;

	nm_open(&n);
	eu_pattern((uint8_t *)n.a.buf, 4096, 3);
	/* A receive whose first 2000 bytes go to the null MR. */
	memset(n.b.buf, 0xaa, 8192);
	s[0] = (struct ibv_sge){ 0xdead0000, 2000, n.nb->lkey };
	s[1] = (struct ibv_sge){ (uintptr_t)n.b.buf, 4096, n.b.mr->lkey };
	CHECK_EQ(ibv_post_recv(n.b.qp, &rw, &rb), 0);
	post_send_op(&n.a, 1, IBV_WR_SEND, n.a.buf, 3000, 0, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(n.b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 7);
	CHECK_EQ(wc.byte_len, 3000);
	CHECK(!memcmp(n.b.buf, n.a.buf + 2000, 1000));
	CHECK_EQ((uint8_t)n.b.buf[1000], 0xaa);
	/* An RDMA READ into it: the bytes are fetched and dropped. */
	memset(n.a.buf + 8000, 0x55, 64);
	s[0] = (struct ibv_sge){ 0, 4000, n.na->lkey };
	s[1] = (struct ibv_sge){ (uintptr_t)n.a.buf + 8000, 32, n.a.mr->lkey };
	eu_pattern((uint8_t *)n.b.buf, 8192, 9);
	post_sges(n.a.qp, 4, IBV_WR_RDMA_READ, s, 2, (uintptr_t)n.b.buf,
		  n.b.mr->rkey);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
	CHECK(!memcmp(n.a.buf + 8000, n.b.buf + 4000, 32));
	CHECK_EQ((uint8_t)n.a.buf[8032], 0x55);
	/* An atomic's original value into it. */
	s[0] = (struct ibv_sge){ 0, 8, n.na->lkey };
	{
		struct ibv_send_wr wr = { .wr_id = 5, .sg_list = s, .num_sge = 1,
					  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		uint64_t *target = (uint64_t *)(void *)(n.b.buf + 4096);

		*target = 40;
		wr.wr.atomic.remote_addr = (uintptr_t)target;
		wr.wr.atomic.rkey = n.b.mr->rkey;
		wr.wr.atomic.compare_add = 2;
		CHECK_EQ(ibv_post_send(n.a.qp, &wr, &bad), 0);
		EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(*target, 42);
	}
	nm_close(&n);
}

SV_TEST(lkey_only)
{
	struct nm n;
	struct ibv_wc wc;

	nm_open(&n);
	/* The target's null MR's lkey used as an rkey names no memory. */
	post_send_op(&n.a, 1, IBV_WR_RDMA_WRITE, n.a.buf, 16, 0x1000,
		     n.nb->lkey);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	nm_close(&n);
}

SV_TEST(other_pd_refused)
{
	struct nm n;
	struct ibv_wc wc;
	struct ibv_sge s;

	nm_open(&n);
	/* b's null MR in a's send: another PD's lkey. */
	s = (struct ibv_sge){ 0, 64, n.nb->lkey };
	post_sges(n.a.qp, 1, IBV_WR_SEND, &s, 1, 0, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_LOC_PROT_ERR);
	nm_close(&n);
}

/* ---------------------------------------------- two processes -- */

/* The peer: receives twice into [null 16][buf 48], then a SEND of zeros
 * from the test's null MR into its buf, and reports what it got. */
static void peer(int s)
{
	struct ep e;
	struct ibv_mr *null;
	struct ibv_wc wc;
	struct ibv_sge g[2];
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = g, .num_sge = 2 }, *rb;
	char ok;

	eu_exchange_as_peer(&e, s);
	null = null_mr(e.pd);
	memset(e.buf, 0xaa, 4096);
	g[0] = (struct ibv_sge){ 0, 16, null->lkey };
	g[1] = (struct ibv_sge){ (uintptr_t)e.buf, 48, e.mr->lkey };
	CHECK_EQ(ibv_post_recv(e.qp, &rw, &rb), 0);
	post_recv(&e, 2, e.buf + 1024, 1024);
	xsend(s, "r", 1);
	CHECK(poll1(e.cq, &wc, 20000));
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 64);
	ok = !memcmp(e.buf, "the last forty-eight bytes arrive, the rest not",
		     48) && (uint8_t)e.buf[48] == 0xaa;
	CHECK(poll1(e.cq, &wc, 20000));
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 1024);
	for (int i = 1024; i < 2048; i++)
		ok = ok && e.buf[i] == 0;
	xsend(s, &ok, 1);
	CHECK_EQ(ibv_dereg_mr(null), 0);
	ep_close(&e);
	ibv_close_device(e.ctx);
	_exit(0);
}

SV_TEST(between_processes)
{
	struct ep a;
	struct ep_info peer_info;
	struct ibv_mr *null;
	struct ibv_wc wc;
	struct ibv_sge s;
	int sv[2], status;
	pid_t pid;
	char c;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		peer(sv[1]);
	}
	close(sv[1]);
	peer_info = eu_exchange_as_test(&a, sv[0]);
	ep_connect(&a, peer_info.qpn);
	null = null_mr(a.pd);
	xrecv(sv[0], &c, 1);
	memset(a.buf, '-', 16);
	memcpy(a.buf + 16, "the last forty-eight bytes arrive, the rest not",
	       48);
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 64, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	s = (struct ibv_sge){ 0x40000, 1024, null->lkey };
	post_sges(a.qp, 2, IBV_WR_SEND, &s, 1, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	xrecv(sv[0], &c, 1);
	CHECK_EQ(c, 1);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(sv[0]);
	CHECK_EQ(ibv_dereg_mr(null), 0);
	ep_close(&a);
	ibv_close_device(a.ctx);
}

SV_TEST_MAIN()

/* SPDX-License-Identifier: MIT */
/*
 * The data path where it must answer as hardware does (issue: conformance):
 *   - RESET removes the QP's completions from its CQs (mlx5 and the other
 *     providers clean the CQ), and only that QP's;
 *   - the responder QP's access flags gate RDMA WRITE, READ and atomics
 *     (set at INIT, changed RTS -> RTS), with IBV_WC_REM_ACCESS_ERR;
 *   - completion channels with UD QPs, used the common way in one thread;
 *   - memory unmapped after registration: error completions, no crash;
 *   - the daemon dying: every QP of the context flushes, loopback ones too.
 * Every case runs as it is (direct execution where it can) and again with
 * SOFTVERBS_DIRECT=0 (packets), see tests.cmake.
 */
#include "engine_util.h"

#include <sys/mman.h>

/* a <-> b in one context, b's INIT access flags given. */
static void pair_access(struct ep *a, struct ep *b, unsigned b_access)
{
	struct ibv_qp_attr at;

	ep_open(a, NULL, IBV_QPT_RC);
	ep_open(b, a->ctx, IBV_QPT_RC);
	ep_connect(a, b->qp->qp_num);
	ep_connect(b, a->qp->qp_num);
	/* Back to RESET and up again with the access asked for. */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RESET;
	CHECK_EQ(ibv_modify_qp(b->qp, &at, IBV_QP_STATE), 0);
	at.qp_state = IBV_QPS_INIT;
	at.port_num = 1;
	at.qp_access_flags = b_access;
	CHECK_EQ(ibv_modify_qp(b->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_1024;
	at.dest_qp_num = a->qp->qp_num;
	at.rq_psn = 0x100;
	at.ah_attr.port_num = 1;
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.hop_limit = 1;
	at.max_dest_rd_atomic = 16;
	at.min_rnr_timer = 12;
	CHECK_EQ(ibv_modify_qp(b->qp, &at, IBV_QP_STATE | IBV_QP_AV |
					       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					       IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC |
					       IBV_QP_MIN_RNR_TIMER),
		 0);
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.sq_psn = 0x100;
	at.timeout = 14;
	at.retry_cnt = 7;
	at.rnr_retry = 7;
	at.max_rd_atomic = 16;
	CHECK_EQ(ibv_modify_qp(b->qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN |
					       IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					       IBV_QP_RNR_RETRY |
					       IBV_QP_MAX_QP_RD_ATOMIC),
		 0);
}

static void post_atomic(struct ep *e, uint64_t id, void *local,
			uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge s = { .addr = (uintptr_t)local, .length = 8,
			     .lkey = e->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = 5;
	CHECK_EQ(ibv_post_send(e->qp, &wr, &bad), 0);
}

static void expect_async(struct ibv_context *ctx, enum ibv_event_type t)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	for (;;) {
		CHECK_EQ(poll(&p, 1, 10000), 1);
		CHECK_EQ(ibv_get_async_event(ctx, &ev), 0);
		ibv_ack_async_event(&ev);
		if (ev.event_type == t)
			return;
	}
}

/* ------------------------------------------------------------ RESET -- */

SV_TEST(reset_cleans_the_qps_completions)
{
	struct ep a, b, c, d;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr at;
	struct ibv_wc wc;

	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	/* c shares b's CQ; its completion must survive b's reset. */
	ep_open(&d, a.ctx, IBV_QPT_RC);
	c = d;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = b.cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	c.qp = ibv_create_qp(d.pd, &ia);
	CHECK(c.qp);
	ep_connect(&c, d.qp->qp_num);
	ep_connect(&d, c.qp->qp_num);
	post_recv(&c, 70, d.buf, 64);
	post_send_op(&d, 71, IBV_WR_SEND, d.buf, 16, 0, 0);
	EXPECT_WC(d.cq, &wc, IBV_WC_SUCCESS);

	/* b: a receive flushed by ERR, then RESET before anyone polls (the
	 * move to ERR flushes before it returns: engine.c,
	 * sv_engine_qp_modified). */
	post_recv(&b, 7, b.buf, 256);
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_ERR;
	CHECK_EQ(ibv_modify_qp(b.qp, &at, IBV_QP_STATE), 0);
	at.qp_state = IBV_QPS_RESET;
	CHECK_EQ(ibv_modify_qp(b.qp, &at, IBV_QP_STATE), 0);
	/* Only c's completion is left on the shared CQ. */
	CHECK(poll1(b.cq, &wc, 2000));
	CHECK_EQ(wc.wr_id, 70);
	CHECK_EQ(wc.qp_num, c.qp->qp_num);
	CHECK(!poll1(b.cq, &wc, 100));

	/* Restated and used again: nothing stale comes back. */
	ep_connect(&b, a.qp->qp_num);
	post_recv(&b, 8, b.buf, 256);
	post_send_op(&a, 9, IBV_WR_SEND, a.buf, 32, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 8);
	CHECK_EQ(wc.byte_len, 32);
	CHECK(!poll1(b.cq, &wc, 100));
	CHECK_EQ(ibv_destroy_qp(c.qp), 0);
	ep_close(&d);
	ep_close(&a);
	ep_close(&b);
}

/* ------------------------------------------------ QP access flags -- */

/* One remote operation against a target QP without the right access:
 * REM_ACCESS_ERR, the target's memory untouched, both QPs in error. */
static void denied(enum ibv_wr_opcode op, unsigned b_access)
{
	struct ep a, b;
	struct ibv_wc wc;

	pair_access(&a, &b, b_access);
	memset(b.buf, 0x5a, 64);
	memset(a.buf, 0x11, 64);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		post_atomic(&a, 1, a.buf, (uintptr_t)b.buf, b.mr->rkey);
	else
		post_send_op(&a, 1, op, a.buf, 64, (uintptr_t)b.buf, b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(wc.wr_id, 1);
	for (int i = 0; i < 64; i++)
		CHECK_EQ((uint8_t)b.buf[i], 0x5a);
	if (op == IBV_WR_RDMA_READ)
		for (int i = 0; i < 64; i++)
			CHECK_EQ((uint8_t)a.buf[i], 0x11);
	/* The target QP is in error as well (the kernel/mlx5: the
	 * responder's error moves it), and says why. */
	expect_async(a.ctx, IBV_EVENT_QP_ACCESS_ERR);
	{
		struct ibv_qp_attr at;
		struct ibv_qp_init_attr ia;

		CHECK_EQ(ibv_query_qp(b.qp, &at, IBV_QP_STATE, &ia), 0);
		CHECK_EQ(at.qp_state, IBV_QPS_ERR);
	}
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(qp_access_flags_gate_remote_ops)
{
	/* The MR allows everything; the QP does not. */
	denied(IBV_WR_RDMA_WRITE, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	denied(IBV_WR_RDMA_READ, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	denied(IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_ACCESS_LOCAL_WRITE);
	denied(IBV_WR_ATOMIC_FETCH_AND_ADD,
	       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
}

SV_TEST(qp_access_changed_in_rts)
{
	struct ep a, b;
	struct ibv_qp_attr at;
	struct ibv_wc wc;

	pair_access(&a, &b, IBV_ACCESS_REMOTE_WRITE);
	memset(a.buf, 0x21, 64);
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 64, (uintptr_t)b.buf,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ((uint8_t)b.buf[63], 0x21);
	/* RTS -> RTS with no remote access: the next write is refused. */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.qp_access_flags = 0;
	CHECK_EQ(ibv_modify_qp(b.qp, &at, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS), 0);
	memset(a.buf, 0x22, 64);
	post_send_op(&a, 2, IBV_WR_RDMA_WRITE, a.buf, 64, (uintptr_t)b.buf,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ((uint8_t)b.buf[0], 0x21);
	ep_close(&a);
	ep_close(&b);
}

/* ------------------------------------------- UD completion channels -- */

struct ud_ep {
	struct ep e;
	struct ibv_comp_channel *ch;
	struct ibv_ah *ah; /* to the other */
};

static void ud_ep_open(struct ud_ep *u, struct ibv_context *ctx)
{
	struct ibv_qp_init_attr ia;

	memset(u, 0, sizeof(*u));
	u->e.ctx = ctx;
	u->e.pd = ibv_alloc_pd(ctx);
	CHECK(u->e.pd);
	u->ch = ibv_create_comp_channel(ctx);
	CHECK(u->ch);
	u->e.cq = ibv_create_cq(ctx, 64, NULL, u->ch, 0);
	CHECK(u->e.cq);
	CHECK(posix_memalign((void **)&u->e.buf, 4096, EP_BUF) == 0);
	u->e.mr = ibv_reg_mr(u->e.pd, u->e.buf, EP_BUF, EU_ACCESS);
	CHECK(u->e.mr);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = u->e.cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	u->e.qp = ibv_create_qp(u->e.pd, &ia);
	CHECK(u->e.qp);
	ep_connect(&u->e, 0);
	CHECK_EQ(ibv_req_notify_cq(u->e.cq, 0), 0);
}

static struct ibv_ah *ah_to_self_port(struct ibv_pd *pd)
{
	struct ibv_ah_attr aa;

	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.hop_limit = 1;
	CHECK_EQ(ibv_query_gid(pd->context, 1, 0, &aa.grh.dgid), 0);
	return ibv_create_ah(pd, &aa);
}

static void ud_send(struct ud_ep *u, uint32_t dqpn, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)u->e.buf + 8192, 32, u->e.mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = u->ah;
	wr.wr.ud.remote_qpn = dqpn;
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(u->e.qp, &wr, &bad), 0);
}

/* The ibv_ud_pingpong -e way: wait for an event, ack it, re-arm, then
 * poll everything.  Returns the completions polled; fails on a hang. */
static int wait_and_drain(struct ud_ep *u, struct ibv_wc *wcs, int max)
{
	struct pollfd p = { .fd = u->ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *cctx;
	int n = 0, k;

	CHECK_EQ(poll(&p, 1, 5000), 1);
	CHECK_EQ(ibv_get_cq_event(u->ch, &cq, &cctx), 0);
	CHECK(cq == u->e.cq);
	ibv_ack_cq_events(cq, 1);
	CHECK_EQ(ibv_req_notify_cq(cq, 0), 0);
	while (n < max && (k = ibv_poll_cq(cq, max - n, wcs + n)) > 0)
		n += k;
	return n;
}

SV_TEST(ud_completion_channels_one_thread)
{
	struct ud_ep a, b;
	struct ibv_context *ctx = eu_open();
	struct ibv_wc wc[8];

	ud_ep_open(&a, ctx);
	ud_ep_open(&b, ctx);
	a.ah = ah_to_self_port(a.e.pd);
	b.ah = ah_to_self_port(b.e.pd);
	CHECK(a.ah && b.ah);
	post_recv(&a.e, 1000, a.e.buf, 4096);
	post_recv(&b.e, 2000, b.e.buf, 4096);
	for (int i = 0; i < 200; i++) {
		struct ud_ep *s = i & 1 ? &b : &a, *r = i & 1 ? &a : &b;
		int got_send = 0, got_recv = 0;

		ud_send(s, r->e.qp->qp_num, (uint64_t)i);
		/* Every completion that lands in an armed CQ raises exactly
		 * one event: the receiver's, then the sender's. */
		while (!got_recv) {
			int n = wait_and_drain(r, wc, 8);

			for (int k = 0; k < n; k++) {
				CHECK_EQ(wc[k].status, IBV_WC_SUCCESS);
				CHECK_EQ(wc[k].opcode, IBV_WC_RECV);
				CHECK_EQ(wc[k].byte_len, 40 + 32);
				got_recv++;
			}
		}
		while (!got_send) {
			int n = wait_and_drain(s, wc, 8);

			for (int k = 0; k < n; k++) {
				CHECK_EQ(wc[k].status, IBV_WC_SUCCESS);
				CHECK_EQ(wc[k].opcode, IBV_WC_SEND);
				CHECK_EQ(wc[k].wr_id, (uint64_t)i);
				got_send++;
			}
		}
		CHECK_EQ(got_recv, 1);
		CHECK_EQ(got_send, 1);
		post_recv(&r->e, 3000 + (uint64_t)i, r->e.buf, 4096);
	}
	CHECK_EQ(ibv_destroy_ah(a.ah), 0);
	CHECK_EQ(ibv_destroy_ah(b.ah), 0);
	CHECK_EQ(ibv_destroy_qp(a.e.qp), 0);
	CHECK_EQ(ibv_destroy_qp(b.e.qp), 0);
	CHECK_EQ(ibv_destroy_cq(a.e.cq), 0);
	CHECK_EQ(ibv_destroy_cq(b.e.cq), 0);
	CHECK_EQ(ibv_destroy_comp_channel(a.ch), 0);
	CHECK_EQ(ibv_destroy_comp_channel(b.ch), 0);
	CHECK_EQ(ibv_dereg_mr(a.e.mr), 0);
	CHECK_EQ(ibv_dereg_mr(b.e.mr), 0);
	CHECK_EQ(ibv_dealloc_pd(a.e.pd), 0);
	CHECK_EQ(ibv_dealloc_pd(b.e.pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* -------------------------------------- memory unmapped under an MR -- */

/* Registers 64 KiB of anonymous memory, then throws its pages away: the
 * MR stays.  The range is left reserved with no access (PROT_NONE), not
 * unmapped, so that no later mapping of this process (a ring, a region)
 * can land there while the test runs: what a peer then finds behind the
 * key is memory that is not there.  shared: the reservation is shared
 * memory -- for a peer in another process, whose small accesses go
 * through /proc/PID/mem, which like a debugger (and like a NIC on the
 * pages it pinned) reaches private PROT_NONE memory but never writes
 * shared memory that is not writable. */
static struct ibv_mr *reg_then_unmap(struct ibv_pd *pd, void **addr,
				     int shared)
{
	void *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;

	CHECK(p != MAP_FAILED);
	mr = ibv_reg_mr(pd, p, 65536, EU_ACCESS);
	CHECK(mr);
	CHECK(mmap(p, 65536, PROT_NONE,
		   (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_FIXED,
		   -1, 0) == p);
	*addr = p;
	return mr;
}

/* One op whose remote memory is gone: REM_ACCESS_ERR, nobody dies. */
static void remote_gone(enum ibv_wr_opcode op)
{
	struct ep a, b;
	struct ibv_mr *gone;
	struct ibv_wc wc;
	void *addr;

	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	gone = reg_then_unmap(b.pd, &addr, 0);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		post_atomic(&a, 1, a.buf, (uintptr_t)addr, gone->rkey);
	else
		post_send_op(&a, 1, op, a.buf, 4096, (uintptr_t)addr + 4096,
			     gone->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(ibv_dereg_mr(gone), 0);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(unmapped_memory_is_an_error_not_a_crash)
{
	struct ep a, b;
	struct ibv_mr *gone;
	struct ibv_wc wc;
	void *addr;

	remote_gone(IBV_WR_RDMA_WRITE);
	remote_gone(IBV_WR_RDMA_READ);
	remote_gone(IBV_WR_ATOMIC_FETCH_AND_ADD);

	/* Our own SGE over memory gone: a local protection error. */
	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	post_recv(&b, 5, b.buf, 8192);
	gone = reg_then_unmap(a.pd, &addr, 0);
	{
		struct ibv_sge s = { (uintptr_t)addr, 4096, gone->lkey };
		struct ibv_send_wr wr = { .wr_id = 6, .sg_list = &s, .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	}
	EXPECT_WC(a.cq, &wc, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(wc.wr_id, 6);
	CHECK_EQ(ibv_dereg_mr(gone), 0);
	ep_close(&a);
	ep_close(&b);

	/* A READ into our own memory gone: local too. */
	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	gone = reg_then_unmap(a.pd, &addr, 0);
	{
		struct ibv_sge s = { (uintptr_t)addr, 4096, gone->lkey };
		struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &s, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_READ,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
		wr.wr.rdma.rkey = b.mr->rkey;
		CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	}
	EXPECT_WC(a.cq, &wc, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(ibv_dereg_mr(gone), 0);
	ep_close(&a);
	ep_close(&b);
}

/* The same with the memory in another process (/proc/PID/mem for this
 * 4 KiB write, then CMA, which says why; or the owner's engine with
 * SOFTVERBS_NO_CMA=1). */
static void unmapped_in_peer(void)
{
	int sv[2];
	pid_t pid;
	struct ep a;
	struct ep_info theirs;
	struct ibv_wc wc;
	char c;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct ep e;
		struct ibv_mr *gone;
		void *addr;
		struct {
			uint64_t addr;
			uint32_t rkey;
		} g;

		close(sv[0]);
		eu_exchange_as_peer(&e, sv[1]);
		gone = reg_then_unmap(e.pd, &addr, 1);
		g.addr = (uintptr_t)addr;
		g.rkey = gone->rkey;
		xsend(sv[1], &g, sizeof(g));
		xrecv(sv[1], &c, 1); /* done */
		_exit(0);
	}
	close(sv[1]);
	theirs = eu_exchange_as_test(&a, sv[0]);
	ep_connect(&a, theirs.qpn);
	{
		struct {
			uint64_t addr;
			uint32_t rkey;
		} g;

		xrecv(sv[0], &g, sizeof(g));
		post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 4096, g.addr,
			     g.rkey);
		EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	}
	xsend(sv[0], "x", 1);
	CHECK_EQ(sv_test_wait_child(pid), 0); /* the peer lived */
	ep_close(&a);
	close(sv[0]);
}

SV_TEST(unmapped_memory_in_another_process)
{
	unsetenv("SOFTVERBS_NO_CMA");
	unmapped_in_peer();
}

SV_TEST(unmapped_memory_in_another_process_without_cma)
{
	setenv("SOFTVERBS_NO_CMA", "1", 1);
	unmapped_in_peer();
}

/* ------------------------------------------------- the daemon dies -- */

SV_TEST(device_fatal_flushes_every_qp)
{
	struct ep a, b;
	struct ibv_wc wc;
	pid_t d;

	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 64, (uintptr_t)b.buf,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	post_recv(&b, 20, b.buf, 256);
	post_recv(&b, 21, b.buf, 256);
	d = sv_test_daemon_pid();
	CHECK(d > 0);
	CHECK_EQ(kill(d, SIGKILL), 0);
	expect_async(a.ctx, IBV_EVENT_DEVICE_FATAL);
	/* The receives a process waits on flush: it is not left hanging. */
	EXPECT_WC(b.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 20);
	EXPECT_WC(b.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 21);
	/* And nothing completes successfully any more, loopback included. */
	post_send_op(&a, 2, IBV_WR_RDMA_WRITE, a.buf, 64, (uintptr_t)b.buf,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 2);
	{
		struct ibv_qp_attr at;
		struct ibv_qp_init_attr ia;

		CHECK_EQ(ibv_query_qp(a.qp, &at, IBV_QP_STATE, &ia), 0);
		CHECK_EQ(at.qp_state, IBV_QPS_ERR);
	}
}

SV_TEST_MAIN()

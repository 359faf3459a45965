/* SPDX-License-Identifier: MIT */
/*
 * Async events the data path raises, read from the context's async_fd:
 * IBV_EVENT_SRQ_LIMIT_REACHED (once per arming), IBV_EVENT_CQ_ERR when
 * traffic overflows a CQ, IBV_EVENT_QP_ACCESS_ERR / QP_REQ_ERR /
 * QP_FATAL on the responder's QP when it fails a request, and
 * IBV_EVENT_COMM_EST when a QP in RTR receives its first packet.
 */
#include "engine_util.h"

/* The next async event within ms: 1 (in *ev, to be acked) or 0. */
static int next_event(struct ibv_context *ctx, int ms,
		      struct ibv_async_event *ev)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };

	if (poll(&p, 1, ms) != 1)
		return 0;
	CHECK_EQ(ibv_get_async_event(ctx, ev), 0);
	return 1;
}

static void expect_event(struct ibv_context *ctx, enum ibv_event_type t,
			 void *element)
{
	struct ibv_async_event ev;

	CHECK(next_event(ctx, 10000, &ev));
	if (ev.event_type != t)
		sv_test_fail(__FILE__, __LINE__, "event %s, wanted %s",
			     ibv_event_type_str(ev.event_type),
			     ibv_event_type_str(t));
	CHECK(ev.element.qp == element); /* a union: qp, cq, srq alike */
	ibv_ack_async_event(&ev);
}

static void expect_no_event(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	if (next_event(ctx, 100, &ev)) {
		sv_test_fail(__FILE__, __LINE__, "unexpected event %s",
			     ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
}

static void pair_local(struct ep *a, struct ep *b)
{
	ep_open(a, NULL, IBV_QPT_RC);
	ep_open(b, a->ctx, IBV_QPT_RC);
	ep_connect(a, b->qp->qp_num);
	ep_connect(b, a->qp->qp_num);
}

static void send_one(struct ep *a, uint64_t id)
{
	struct ibv_wc wc;

	post_send_op(a, id, IBV_WR_SEND, a->buf, 16, 0, 0);
	EXPECT_WC(a->cq, &wc, IBV_WC_SUCCESS);
}

static void srq_post(struct ibv_srq *srq, struct ibv_mr *mr, char *buf,
		     int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge s = { (uintptr_t)buf + (size_t)i * 64, 64,
				     mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &s,
					  .num_sge = 1 },
				   *bad;

		CHECK_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
	}
}

/* A plain QP on e again, in place of one the test destroyed, for
 * ep_close. */
static void plain_qp(struct ep *e)
{
	e->qp = ibv_create_qp(e->pd, &(struct ibv_qp_init_attr){
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 } });
	CHECK(e->qp);
}

/* Two RC endpoints of one context connected to each other, b's QP
 * taking its receives from the SRQ made here (max_wr, max_sge). */
static struct ibv_srq *srq_pair_open(struct ep *a, struct ep *b,
				     uint32_t max_wr, uint32_t max_sge)
{
	struct ibv_srq_init_attr sa;
	struct ibv_qp_init_attr ia;
	struct ibv_srq *srq;

	ep_open(a, NULL, IBV_QPT_RC);
	ep_open(b, a->ctx, IBV_QPT_RC);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = max_wr;
	sa.attr.max_sge = max_sge;
	srq = ibv_create_srq(b->pd, &sa);
	CHECK(srq);
	CHECK_EQ(ibv_destroy_qp(b->qp), 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = b->cq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_send_sge = 1;
	b->qp = ibv_create_qp(b->pd, &ia);
	CHECK(b->qp);
	ep_connect(a, b->qp->qp_num);
	ep_connect(b, a->qp->qp_num);
	return srq;
}

static void srq_pair_close(struct ep *a, struct ep *b, struct ibv_srq *srq)
{
	CHECK_EQ(ibv_destroy_qp(b->qp), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	plain_qp(b);
	ep_close(a);
	ep_close(b);
}

SV_TEST(srq_limit_reached_end_to_end)
{
	struct ep a, b;
	struct ibv_srq_attr attr;
	struct ibv_srq *srq;
	struct ibv_wc wc;

	srq = srq_pair_open(&a, &b, 32, 1);

	srq_post(srq, b.mr, b.buf, 10);
	memset(&attr, 0, sizeof(attr));
	attr.srq_limit = 5;
	CHECK_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), 0);
	for (int i = 0; i < 5; i++) { /* 10 -> 5: not below the limit */
		send_one(&a, (uint64_t)i);
		EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	}
	expect_no_event(a.ctx);
	send_one(&a, 5); /* 4 < 5 */
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	expect_event(a.ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq);
	/* Disarmed by the event. */
	send_one(&a, 6);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	expect_no_event(a.ctx);
	/* Armed again: fires again. */
	srq_post(srq, b.mr, b.buf + 4096, 10); /* 13 */
	attr.srq_limit = 12;
	CHECK_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), 0);
	send_one(&a, 7); /* 12: not below */
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	expect_no_event(a.ctx);
	send_one(&a, 8); /* 11 */
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	expect_event(a.ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq);

	srq_pair_close(&a, &b, srq);
}

/* SENDs posted together to a QP on an SRQ run as one batch (one
 * transfer into the receives they take): each lands in its own receive,
 * in order, scattered over the receive's two SGEs, and the SRQ's limit,
 * crossed by the run, raises its event once. */
SV_TEST(srq_limit_reached_by_a_run_of_sends)
{
	static const uint32_t len[6] = { 500, 100, 101, 1, 499, 300 };
	struct ibv_send_wr wr[6], *badw;
	struct ibv_sge sg[6];
	struct ep a, b;
	struct ibv_srq_attr attr;
	struct ibv_srq *srq;
	struct ibv_wc wc;

	srq = srq_pair_open(&a, &b, 16, 2);
	/* Receive i: 100 bytes at i KiB, then 400 at i KiB + 512. */
	for (int i = 0; i < 8; i++) {
		struct ibv_sge s[2] = {
			{ (uintptr_t)b.buf + i * 1024, 100, b.mr->lkey },
			{ (uintptr_t)b.buf + i * 1024 + 512, 400, b.mr->lkey },
		};
		struct ibv_recv_wr rw = { .wr_id = (uint64_t)i, .sg_list = s,
					  .num_sge = 2 },
				   *bad;

		CHECK_EQ(ibv_post_srq_recv(srq, &rw, &bad), 0);
	}
	memset(&attr, 0, sizeof(attr));
	attr.srq_limit = 5;
	CHECK_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), 0);
	eu_pattern((uint8_t *)a.buf, 6 * 1024, 17);
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 6; i++) {
		sg[i] = (struct ibv_sge){ (uintptr_t)a.buf + i * 1024, len[i],
					  a.mr->lkey };
		wr[i].wr_id = 100 + (uint64_t)i;
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < 5 ? &wr[i + 1] : NULL;
	}
	CHECK_EQ(ibv_post_send(a.qp, wr, &badw), 0);
	for (int i = 0; i < 6; i++) {
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 100 + (uint64_t)i);
	}
	for (int i = 0; i < 6; i++) {
		const char *m = a.buf + i * 1024, *r = b.buf + i * 1024;
		uint32_t head = len[i] < 100 ? len[i] : 100;

		EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, (uint64_t)i);
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
		CHECK_EQ(wc.byte_len, len[i]);
		CHECK_EQ(wc.qp_num, b.qp->qp_num);
		CHECK_EQ(wc.src_qp, a.qp->qp_num);
		CHECK(!memcmp(r, m, head));
		CHECK(!memcmp(r + 512, m + head, len[i] - head));
	}
	/* 8 - 6 = 2 < 5: once. */
	expect_event(a.ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq);
	expect_no_event(a.ctx);

	srq_pair_close(&a, &b, srq);
}

SV_TEST(cq_overflow_by_traffic)
{
	struct ep a, b;
	struct ibv_cq *small;
	struct ibv_qp_init_attr ia;
	struct ibv_wc wc[64];
	int n;

	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	small = ibv_create_cq(b.ctx, 2, NULL, NULL, 0);
	CHECK(small);
	CHECK(small->cqe < 32);
	CHECK_EQ(ibv_destroy_qp(b.qp), 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = b.cq;
	ia.recv_cq = small;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 64;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	b.qp = ibv_create_qp(b.pd, &ia);
	CHECK(b.qp);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	for (int i = 0; i < small->cqe + 2; i++)
		post_recv(&b, (uint64_t)i, b.buf + i * 64, 64);
	for (int i = 0; i < small->cqe + 2; i++)
		send_one(&a, (uint64_t)i);
	expect_event(a.ctx, IBV_EVENT_CQ_ERR, small);
	n = ibv_poll_cq(small, 64, wc);
	CHECK_EQ(n, small->cqe); /* what did not fit is lost */
	CHECK_EQ(ibv_destroy_qp(b.qp), 0);
	CHECK_EQ(ibv_destroy_cq(small), 0);
	plain_qp(&b);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(responder_errors_raise_qp_events)
{
	struct ep a, b;
	struct ibv_wc wc;
	struct ibv_mr *gone;
	uint32_t lkey;

	/* An rkey violation: the requester gets REM_ACCESS_ERR, the
	 * responder's QP an IBV_EVENT_QP_ACCESS_ERR. */
	pair_local(&a, &b);
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 64, (uintptr_t)b.buf,
		     b.mr->rkey + 0x100);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	expect_event(a.ctx, IBV_EVENT_QP_ACCESS_ERR, b.qp);
	expect_no_event(a.ctx); /* nothing for the requester's QP */
	ep_close(&a);
	ep_close(&b);

	/* An invalid request (misaligned atomic): IBV_EVENT_QP_REQ_ERR. */
	pair_local(&a, &b);
	eu_post_keyed(&a, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)a.buf, 8,
		      a.mr->lkey, (uintptr_t)b.buf + 4, b.mr->rkey, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_INV_REQ_ERR);
	expect_event(a.ctx, IBV_EVENT_QP_REQ_ERR, b.qp);
	ep_close(&a);
	ep_close(&b);

	/* The responder's own receive buffer is bad: IBV_EVENT_QP_FATAL. */
	pair_local(&a, &b);
	gone = ibv_reg_mr(b.pd, b.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(gone);
	lkey = gone->lkey;
	CHECK_EQ(ibv_dereg_mr(gone), 0);
	{
		struct ibv_sge s = { (uintptr_t)b.buf, 64, lkey };
		struct ibv_recv_wr wr = { .wr_id = 9, .sg_list = &s,
					  .num_sge = 1 },
				   *bad;

		CHECK_EQ(ibv_post_recv(b.qp, &wr, &bad), 0);
	}
	post_send_op(&a, 2, IBV_WR_SEND, a.buf, 32, 0, 0);
	EXPECT_WC(b.cq, &wc, IBV_WC_LOC_PROT_ERR);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_OP_ERR);
	expect_event(a.ctx, IBV_EVENT_QP_FATAL, b.qp);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(comm_est_in_rtr)
{
	struct ep a, b;
	struct ibv_qp_attr at;
	struct ibv_wc wc;

	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	/* b: INIT -> RTR only. */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = 1;
	at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	CHECK_EQ(ibv_modify_qp(b.qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_1024;
	at.dest_qp_num = a.qp->qp_num;
	at.rq_psn = 0x100;
	at.ah_attr.port_num = 1;
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.hop_limit = 1;
	at.max_dest_rd_atomic = 1;
	at.min_rnr_timer = 12;
	CHECK_EQ(ibv_modify_qp(b.qp, &at,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER),
		 0);
	expect_no_event(a.ctx);
	post_recv(&b, 1, b.buf, 64);
	post_send_op(&a, 2, IBV_WR_SEND, a.buf, 16, 0, 0);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS); /* RTR receives */
	expect_event(a.ctx, IBV_EVENT_COMM_EST, b.qp);
	/* Once. */
	post_recv(&b, 3, b.buf, 64);
	post_send_op(&a, 4, IBV_WR_SEND, a.buf, 16, 0, 0);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	expect_no_event(a.ctx);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST_MAIN()

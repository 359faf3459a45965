/* SPDX-License-Identifier: MIT */
/* QPs: the modify state machine and its masks, query round trips, create
 * limits, post-time validation, flush on ERR, QPNs, use counts, ECE. */
#include "dp_util.h"

static void walk(enum ibv_qp_type type)
{
	struct sv_status_rep base;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct dp d;
	struct ibv_qp *qp;

	sv_test_baseline(&base);
	dp_open(&d, 16);
	qp = dp_qp(&d, type, NULL, 4, 0);
	/* RESET -> RTR / RTS skip INIT: illegal. */
	CHECK_EQ(to_rtr(qp, qp->qp_num), EINVAL);
	CHECK_EQ(to_rts(qp), EINVAL);
	CHECK_EQ(qp->state, IBV_QPS_RESET);
	CHECK_EQ(to_init(qp), 0);
	CHECK_EQ(qp->state, IBV_QPS_INIT);
	CHECK_EQ(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PORT, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_INIT);
	CHECK_EQ(qa.port_num, 1);
	if (type == IBV_QPT_UD)
		CHECK_EQ(qa.qkey, 0x11111111);
	else
		CHECK_EQ(qa.qp_access_flags, IBV_ACCESS_REMOTE_WRITE);
	/* INIT -> INIT is legal; INIT -> RTS is not. */
	CHECK_EQ(to_state(qp, IBV_QPS_INIT), 0);
	CHECK_EQ(to_rts(qp), EINVAL);
	CHECK_EQ(to_rtr(qp, qp->qp_num), 0);
	CHECK_EQ(qp->state, IBV_QPS_RTR);
	CHECK_EQ(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTR);
	if (type != IBV_QPT_UD) {
		CHECK_EQ(qa.dest_qp_num, qp->qp_num);
		CHECK_EQ(qa.rq_psn, 0x123);
		CHECK_EQ(qa.path_mtu, IBV_MTU_1024);
		CHECK_EQ(qa.ah_attr.is_global, 1);
	}
	CHECK_EQ(to_rts(qp), 0);
	CHECK_EQ(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
	CHECK_EQ(qa.sq_psn, 0x456);
	if (type == IBV_QPT_RC) {
		CHECK_EQ(qa.timeout, 14);
		CHECK_EQ(qa.retry_cnt, 7);
		CHECK_EQ(qa.rnr_retry, 7);
		CHECK_EQ(qa.min_rnr_timer, 12);
	}
	CHECK_EQ(qi.qp_type, type);
	CHECK(qi.send_cq == d.cq && qi.recv_cq == d.cq);
	/* RTS -> RTS with nothing but the state; RTS -> SQD -> RTS. */
	CHECK_EQ(to_state(qp, IBV_QPS_RTS), 0);
	CHECK_EQ(to_state(qp, IBV_QPS_SQD), 0);
	CHECK_EQ(qp->state, IBV_QPS_SQD);
	CHECK_EQ(to_state(qp, IBV_QPS_INIT), EINVAL);
	CHECK_EQ(to_state(qp, IBV_QPS_RTS), 0);
	/* RTS -> RTR is not a transition. */
	CHECK_EQ(to_state(qp, IBV_QPS_RTR), EINVAL);
	CHECK_EQ(to_state(qp, IBV_QPS_ERR), 0);
	CHECK_EQ(qp->state, IBV_QPS_ERR);
	CHECK_EQ(to_state(qp, IBV_QPS_RTS), EINVAL);
	CHECK_EQ(to_state(qp, IBV_QPS_RESET), 0);
	CHECK_EQ(to_init(qp), 0); /* usable again after RESET */
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	dp_close(&d);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(state_machine_rc) { walk(IBV_QPT_RC); }
SV_TEST(state_machine_uc) { walk(IBV_QPT_UC); }
SV_TEST(state_machine_ud) { walk(IBV_QPT_UD); }

/* Every required bit of RESET->INIT and INIT->RTR(RC) is required, and a
 * bit outside req|opt is refused. */
SV_TEST(masks)
{
	struct dp d;
	struct ibv_qp *qp;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;

	dp_open(&d, 8);
	qp = dp_qp(&d, IBV_QPT_RC, NULL, 4, 0);
	for (int bit = 1; bit <= IBV_QP_DEST_QPN; bit <<= 1)
		if (req & bit)
			CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | (req & ~bit)),
				 EINVAL);
	/* QKEY is a UD attribute: not allowed on RC. */
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | req | IBV_QP_QKEY), EINVAL);
	/* CUR_STATE may not be asserted from RESET. */
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | req | IBV_QP_CUR_STATE),
		 EINVAL);
	/* CAP is never modifiable. */
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | req | IBV_QP_CAP), EINVAL);
	/* Values out of range. */
	a.port_num = 2;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | req), EINVAL);
	a.port_num = 1;
	a.pkey_index = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | req), EINVAL);
	a.pkey_index = 0;
	CHECK_EQ(qp->state, IBV_QPS_RESET); /* nothing changed */
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | req), 0);

	/* INIT->RTR on RC without MIN_RNR_TIMER / without AV. */
	{
		struct ibv_qp_attr r = { .qp_state = IBV_QPS_RTR,
					 .path_mtu = IBV_MTU_1024,
					 .dest_qp_num = 7,
					 .max_dest_rd_atomic = 1 };
		int full = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

		r.ah_attr.is_global = 1;
		r.ah_attr.port_num = 1;
		CHECK_EQ(ibv_modify_qp(qp, &r, full & ~IBV_QP_MIN_RNR_TIMER),
			 EINVAL);
		/* RoCE: an AV without a GRH is refused. */
		r.ah_attr.is_global = 0;
		CHECK_EQ(ibv_modify_qp(qp, &r, full), EINVAL);
		r.ah_attr.is_global = 1;
		r.ah_attr.grh.sgid_index = 200; /* no such GID */
		CHECK_EQ(ibv_modify_qp(qp, &r, full), EINVAL);
		r.ah_attr.grh.sgid_index = 0;
		r.max_dest_rd_atomic = 255;
		CHECK_EQ(ibv_modify_qp(qp, &r, full), EINVAL);
		r.max_dest_rd_atomic = 1;
		r.dest_qp_num = 1u << 24;
		CHECK_EQ(ibv_modify_qp(qp, &r, full), EINVAL);
		r.dest_qp_num = 7;
		CHECK_EQ(qp->state, IBV_QPS_INIT);
		CHECK_EQ(ibv_modify_qp(qp, &r, full), 0);
	}
	/* RTR->RTS on RC without RETRY_CNT, and retry_cnt 8. */
	{
		struct ibv_qp_attr s = { .qp_state = IBV_QPS_RTS, .timeout = 14,
					 .retry_cnt = 7, .rnr_retry = 7,
					 .max_rd_atomic = 1 };
		int full = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			   IBV_QP_MAX_QP_RD_ATOMIC;

		CHECK_EQ(ibv_modify_qp(qp, &s, full & ~IBV_QP_RETRY_CNT), EINVAL);
		s.retry_cnt = 8;
		CHECK_EQ(ibv_modify_qp(qp, &s, full), EINVAL);
		s.retry_cnt = 7;
		/* CUR_STATE that is not the current state. */
		s.cur_qp_state = IBV_QPS_RTS;
		CHECK_EQ(ibv_modify_qp(qp, &s, full | IBV_QP_CUR_STATE), EINVAL);
		s.cur_qp_state = IBV_QPS_RTR;
		CHECK_EQ(ibv_modify_qp(qp, &s, full | IBV_QP_CUR_STATE), 0);
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	dp_close(&d);
}

SV_TEST(create_limits)
{
	struct ibv_device_attr da;
	struct dp d;
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	dp_open(&d, 8);
	CHECK_EQ(ibv_query_device(d.ctx, &da), 0);
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = d.cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = (uint32_t)da.max_qp_wr + 1;
	CHECK_NULL_ERRNO(ibv_create_qp(d.pd, &a), EINVAL);
	a.cap.max_send_wr = 1;
	a.cap.max_recv_sge = (uint32_t)da.max_sge + 1;
	CHECK_NULL_ERRNO(ibv_create_qp(d.pd, &a), EINVAL);
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = 1u << 20;
	CHECK_NULL_ERRNO(ibv_create_qp(d.pd, &a), EINVAL);
	a.cap.max_inline_data = 0;
	/* An XRC INI QP is made (test_xrc has the rest); raw packet QPs
	 * are not. */
	a.qp_type = IBV_QPT_XRC_SEND;
	qp = ibv_create_qp(d.pd, &a);
	CHECK(qp);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	a.qp_type = IBV_QPT_RAW_PACKET;
	CHECK_NULL_ERRNO(ibv_create_qp(d.pd, &a), EOPNOTSUPP);
	a.qp_type = IBV_QPT_RC;
	a.send_cq = NULL;
	CHECK_NULL_ERRNO(ibv_create_qp(d.pd, &a), EINVAL);
	a.send_cq = d.cq;
	a.cap.max_inline_data = 100;
	qp = ibv_create_qp(d.pd, &a);
	CHECK(qp);
	CHECK(a.cap.max_inline_data >= 100);
	CHECK(qp->qp_num > 1 && qp->qp_num <= 0xffffff);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	/* No inline asked for: the bytes of the WQE's SGEs all the same,
	 * as rxe grants them (3 SGEs: 48). */
	a.cap.max_inline_data = 0;
	a.cap.max_send_sge = 3;
	qp = ibv_create_qp(d.pd, &a);
	CHECK(qp);
	CHECK_EQ(a.cap.max_inline_data, 48);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	dp_close(&d);
}

SV_TEST(qpn_unique_not_reused)
{
	struct dp d;
	struct ibv_qp *q[8];
	uint32_t old;

	dp_open(&d, 8);
	for (int i = 0; i < 8; i++) {
		q[i] = dp_qp(&d, i & 1 ? IBV_QPT_UD : IBV_QPT_RC, NULL, 1, 0);
		CHECK(q[i]->qp_num > 1 && q[i]->qp_num <= 0xffffff);
		for (int j = 0; j < i; j++)
			CHECK(q[i]->qp_num != q[j]->qp_num);
	}
	old = q[0]->qp_num;
	CHECK_EQ(ibv_destroy_qp(q[0]), 0);
	q[0] = dp_qp(&d, IBV_QPT_RC, NULL, 1, 0);
	CHECK(q[0]->qp_num != old);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(ibv_destroy_qp(q[i]), 0);
	dp_close(&d);
}

SV_TEST(busy_rules)
{
	struct dp d;
	struct ibv_cq *rcq;
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	dp_open(&d, 8);
	rcq = ibv_create_cq(d.ctx, 8, NULL, NULL, 0);
	CHECK(rcq);
	memset(&a, 0, sizeof(a));
	a.send_cq = d.cq;
	a.recv_cq = rcq;
	a.qp_type = IBV_QPT_UC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	qp = ibv_create_qp(d.pd, &a);
	CHECK(qp);
	CHECK_EQ(ibv_dealloc_pd(d.pd), EBUSY);
	CHECK_EQ(ibv_destroy_cq(d.cq), EBUSY);
	CHECK_EQ(ibv_destroy_cq(rcq), EBUSY);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(rcq), 0);
	dp_close(&d);
}

SV_TEST(post_validation)
{
	static char buf[256];
	struct ibv_sge sge[3] = { { (uintptr_t)buf, 8, 0 },
				  { (uintptr_t)buf + 8, 8, 0 },
				  { (uintptr_t)buf + 16, 8, 0 } };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND }, *bad = NULL;
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = sge, .num_sge = 1 },
			   *rbad = NULL;
	struct dp d;
	struct ibv_qp *qp, *ud, *peer;
	struct ibv_mr *mr;

	dp_open(&d, 64);
	qp = dp_qp(&d, IBV_QPT_RC, NULL, 2, 16);
	/* RESET: neither queue takes work. */
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	CHECK(rbad == &rwr);
	CHECK_EQ(to_init(qp), 0);
	/* INIT: receives yes, sends no. */
	bad = NULL;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	rwr.num_sge = 3;
	CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	rwr.num_sge = 1;
	CHECK_EQ(post_recvs(qp, 2, 10), 0);
	CHECK_EQ(post_recvs(qp, 1, 12), ENOMEM); /* max_recv_wr 2 */
	/* The sends really execute: give them a registered buffer and a peer
	 * that never posts a receive, so each one waits in RNR retries
	 * (rnr_retry 7) and keeps its send-queue slot. */
	mr = ibv_reg_mr(d.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	for (int i = 0; i < 3; i++)
		sge[i].lkey = mr->lkey;
	peer = dp_qp(&d, IBV_QPT_RC, NULL, 2, 0);
	CHECK_EQ(to_init(peer), 0);
	CHECK_EQ(to_rtr(peer, qp->qp_num), 0);
	CHECK_EQ(to_rtr(qp, peer->qp_num), 0);
	CHECK_EQ(to_rts(qp), 0);
	/* RTS: the checks hardware makes at post time, in a chain: the bad
	 * WR is the first that fails, the ones before it are posted. */
	{
		struct ibv_send_wr w2 = wr;

		wr.next = &w2;
		w2.num_sge = 3; /* > max_send_sge 2 */
		bad = NULL;
		CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
		CHECK(bad == &w2);
		wr.next = NULL;
	}
	wr.opcode = (enum ibv_wr_opcode)99;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	/* ATOMIC WRITE: its sg_list is exactly the 8 bytes (none, 16, or
	 * two SGEs of 8 are EINVAL); tests/integration/test_atomic_write.c
	 * has the rest. */
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	sge[0].length = 16;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	sge[0].length = 8;
	wr.num_sge = 2;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	wr.num_sge = 0;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_INLINE;
	/* 16 asked for, 32 granted: the two SGEs' bytes (as rxe). */
	sge[0].length = 33;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	sge[0].length = 32;
	/* One slot is taken by the first WR of the chain above. */
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), ENOMEM);
	CHECK(bad == &wr);

	/* UD: RDMA and atomics are not UD opcodes; an AH is required. */
	ud = dp_qp(&d, IBV_QPT_UD, NULL, 2, 0);
	CHECK_EQ(to_init(ud), 0);
	CHECK_EQ(to_rtr(ud, ud->qp_num), 0);
	CHECK_EQ(to_rts(ud), 0);
	wr.send_flags = 0;
	wr.opcode = IBV_WR_RDMA_WRITE;
	CHECK_EQ(ibv_post_send(ud, &wr, &bad), EINVAL);
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	CHECK_EQ(ibv_post_send(ud, &wr, &bad), EINVAL);
	wr.opcode = IBV_WR_ATOMIC_WRITE; /* RC only */
	sge[0].length = 8;
	CHECK_EQ(ibv_post_send(ud, &wr, &bad), EINVAL);
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.ah = NULL;
	CHECK_EQ(ibv_post_send(ud, &wr, &bad), EINVAL);
	CHECK_EQ(ibv_destroy_qp(ud), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_qp(peer), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	dp_close(&d);
}

/* ERR flushes every outstanding receive with WR_FLUSH_ERR, in order;
 * RESET drops them without completions. */
SV_TEST(flush_and_reset)
{
	struct ibv_wc wc[8];
	struct dp d;
	struct ibv_qp *qp;

	dp_open(&d, 16);
	qp = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
	CHECK_EQ(to_init(qp), 0);
	CHECK_EQ(post_recvs(qp, 3, 100), 0);
	CHECK_EQ(to_state(qp, IBV_QPS_RESET), 0);
	CHECK_EQ(to_state(qp, IBV_QPS_ERR), 0);
	CHECK_EQ(ibv_poll_cq(d.cq, 8, wc), 0);
	CHECK_EQ(to_state(qp, IBV_QPS_RESET), 0);
	CHECK_EQ(to_init(qp), 0);
	CHECK_EQ(post_recvs(qp, 4, 200), 0);
	CHECK_EQ(to_state(qp, IBV_QPS_ERR), 0);
	poll_n(d.cq, wc, 4);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ(wc[i].wr_id, 200 + i);
		CHECK_EQ(wc[i].qp_num, qp->qp_num);
	}
	/* Posting in ERR completes at once, flushed. */
	CHECK_EQ(post_recvs(qp, 1, 300), 0);
	poll_n(d.cq, wc, 1);
	CHECK_EQ(wc[0].wr_id, 300);
	CHECK_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	dp_close(&d);
}

/* A destroyed QP's completions still in a CQ go with it (mlx5 and mlx4
 * clean them; a program frees what their wr_ids point to); another QP's
 * in the same CQ stay, in order. */
SV_TEST(destroy_cleans_its_completions)
{
	struct ibv_wc wc[8];
	struct dp d;
	struct ibv_qp *a, *b;

	dp_open(&d, 16);
	a = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
	b = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
	CHECK_EQ(to_init(a), 0);
	CHECK_EQ(to_init(b), 0);
	CHECK_EQ(post_recvs(a, 2, 100), 0);
	CHECK_EQ(post_recvs(b, 2, 200), 0);
	CHECK_EQ(post_recvs(a, 1, 102), 0);
	/* Flushed: a's 3 and b's 2 completions wait in the shared CQ. */
	CHECK_EQ(to_state(a, IBV_QPS_ERR), 0);
	CHECK_EQ(to_state(b, IBV_QPS_ERR), 0);
	CHECK_EQ(ibv_destroy_qp(a), 0);
	poll_n(d.cq, wc, 2);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(wc[i].wr_id, 200 + i);
		CHECK_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ(wc[i].qp_num, b->qp_num);
	}
	CHECK_EQ(ibv_poll_cq(d.cq, 8, wc), 0);
	CHECK_EQ(ibv_destroy_qp(b), 0);
	dp_close(&d);
}

SV_TEST(qp_ex_ops)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp_ex *qx;
	struct ibv_qp *qp, *plain, *peer;
	struct ibv_mr *mr;
	struct ibv_wc wc[4];
	struct dp d;
	static char buf[64];

	dp_open(&d, 16);
	plain = dp_qp(&d, IBV_QPT_RC, NULL, 2, 0);
	CHECK(ibv_qp_to_qp_ex(plain) == NULL);
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = d.cq;
	a.qp_type = IBV_QPT_UD;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.pd = d.pd;
	a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
	CHECK_NULL_ERRNO(ibv_create_qp_ex(d.ctx, &a), EOPNOTSUPP);
	/* ATOMIC WRITE is RC's alone (rxe's send_ops_flags for UC and UD
	 * lack it); test_atomic_write.c has it on RC. */
	a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_WRITE;
	CHECK_NULL_ERRNO(ibv_create_qp_ex(d.ctx, &a), EOPNOTSUPP);
	a.qp_type = IBV_QPT_UC;
	CHECK_NULL_ERRNO(ibv_create_qp_ex(d.ctx, &a), EOPNOTSUPP);
	a.qp_type = IBV_QPT_RC;
	a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
	qp = ibv_create_qp_ex(d.ctx, &a);
	CHECK(qp);
	qx = ibv_qp_to_qp_ex(qp);
	CHECK(qx);
	/* Queued sends must stay queued until the ERR flush: a registered
	 * buffer and a peer without receives (RNR retries forever). */
	mr = ibv_reg_mr(d.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	peer = dp_qp(&d, IBV_QPT_RC, NULL, 2, 0);
	CHECK_EQ(to_init(peer), 0);
	CHECK_EQ(to_rtr(peer, qp->qp_num), 0);
	CHECK_EQ(to_init(qp), 0);
	CHECK_EQ(to_rtr(qp, peer->qp_num), 0);
	CHECK_EQ(to_rts(qp), 0);
	/* An op not asked for spoils the batch. */
	ibv_wr_start(qx);
	qx->wr_id = 1;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 8);
	ibv_wr_rdma_read(qx, 0, 0);
	CHECK_EQ(ibv_wr_complete(qx), EOPNOTSUPP);
	ibv_wr_start(qx);
	ibv_wr_atomic_write(qx, 0, 0, buf);
	CHECK_EQ(ibv_wr_complete(qx), EOPNOTSUPP);
	/* Inline longer than max_inline_data: none was asked for, and the
	 * QP has the 16 bytes of its one SGE (as rxe grants them). */
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_inline_data(qx, buf, 17);
	CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	/* Abort discards; a good batch then fills the queue exactly. */
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_abort(qx);
	ibv_wr_start(qx);
	for (int i = 0; i < 5; i++) {
		qx->wr_id = 10 + (uint64_t)i;
		ibv_wr_rdma_write(qx, 0, 0);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 8);
	}
	CHECK_EQ(ibv_wr_complete(qx), ENOMEM); /* 5 > max_send_wr 4 */
	/* The ERR flush shows which WQEs were really queued: none so far;
	 * now two. */
	ibv_wr_start(qx);
	qx->wr_id = 20;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 8);
	qx->wr_id = 21;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 8);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	CHECK_EQ(to_state(qp, IBV_QPS_ERR), 0);
	poll_n(d.cq, wc, 2);
	CHECK_EQ(wc[0].wr_id, 20);
	CHECK_EQ(wc[1].wr_id, 21);
	CHECK_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(ibv_poll_cq(d.cq, 4, wc), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_qp(peer), 0);
	CHECK_EQ(ibv_destroy_qp(plain), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	dp_close(&d);
}

SV_TEST(mw_and_teardown)
{
	struct sv_status_rep base;
	struct ibv_mw *mw1, *mw2;
	struct ibv_mw_bind bind = { .wr_id = 5 };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct dp d;
	static char buf[4096];

	sv_test_baseline(&base);
	dp_open(&d, 8);
	CHECK_NULL_ERRNO(ibv_alloc_mw(d.pd, (enum ibv_mw_type)3), EINVAL);
	mw1 = ibv_alloc_mw(d.pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(d.pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2);
	CHECK(mw1->rkey != mw2->rkey);
	CHECK_EQ(mw1->type, IBV_MW_TYPE_1);
	CHECK(mw1->pd == d.pd);
	CHECK_EQ(ibv_dealloc_mw(mw2), 0);
	mr = ibv_reg_mr(d.pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(mr);
	qp = dp_qp(&d, IBV_QPT_RC, NULL, 2, 0);
	bind.bind_info.mr = mr;
	bind.bind_info.addr = (uintptr_t)buf;
	bind.bind_info.length = 64;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	/* A bind is a send WR: not in RESET. */
	CHECK_EQ(ibv_bind_mw(qp, mw1, &bind), EINVAL);
	/* Type 2 windows are bound with ibv_post_send only. */
	mw2 = ibv_alloc_mw(d.pd, IBV_MW_TYPE_2);
	CHECK(mw2);
	CHECK_EQ(ibv_bind_mw(qp, mw2, &bind), EINVAL);
	CHECK_EQ(ibv_dealloc_pd(d.pd), EBUSY);
	/* Everything still alive when the device closes: the daemon frees
	 * it all (QP first, then what it used). */
	CHECK(ibv_create_srq(d.pd, &sa));
	CHECK_EQ(ibv_query_gid(d.ctx, 1, 0, &aa.grh.dgid), 0);
	CHECK(ibv_create_ah(d.pd, &aa));
	CHECK_EQ(ibv_close_device(d.ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

/* qp_access_flags take what rxe's QPs take (RXE_ACCESS_SUPPORTED_QP):
 * ODP programs set IBV_ACCESS_ON_DEMAND and move to INIT; bits no QP
 * has (ZERO_BASED, HUGETLB, unknown ones) stay EINVAL. */
SV_TEST(access_flags_accepted)
{
	const unsigned ok[] = {
		IBV_ACCESS_ON_DEMAND,
		IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE,
		IBV_ACCESS_MW_BIND | IBV_ACCESS_REMOTE_ATOMIC,
		IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_REMOTE_WRITE,
		1u << 8, 1u << 9, /* the kernel's FLUSH_GLOBAL, FLUSH_PERSISTENT */
		0,
	};
	const unsigned bad[] = { IBV_ACCESS_ZERO_BASED, IBV_ACCESS_HUGETLB,
				 1u << 10, 1u << 15, 1u << 30, 1u << 31 };
	struct ibv_qp_attr a, qa;
	struct ibv_qp_init_attr qi;
	int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		   IBV_QP_ACCESS_FLAGS;
	struct dp d;

	dp_open(&d, 8);
	for (int t = 0; t < 2; t++) {
		enum ibv_qp_type type = t ? IBV_QPT_UC : IBV_QPT_RC;

		for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
			struct ibv_qp *qp = dp_qp(&d, type, NULL, 4, 0);

			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_INIT;
			a.port_num = 1;
			a.qp_access_flags = ok[i];
			CHECK_EQ(ibv_modify_qp(qp, &a, init), 0);
			CHECK_EQ(qp->state, IBV_QPS_INIT);
			CHECK_EQ(ibv_query_qp(qp, &qa, IBV_QP_ACCESS_FLAGS, &qi), 0);
			CHECK_EQ(qa.qp_access_flags, ok[i]);
			/* INIT -> INIT and on to RTS keep taking them. */
			a.qp_access_flags = ok[(i + 1) % (sizeof(ok) / sizeof(ok[0]))];
			CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE |
							       IBV_QP_ACCESS_FLAGS),
				 0);
			CHECK_EQ(to_rtr(qp, qp->qp_num), 0);
			CHECK_EQ(to_rts(qp), 0);
			a.qp_state = IBV_QPS_RTS;
			a.qp_access_flags = ok[i];
			CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE |
							       IBV_QP_ACCESS_FLAGS),
				 0);
			CHECK_EQ(ibv_destroy_qp(qp), 0);
		}
		for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct ibv_qp *qp = dp_qp(&d, type, NULL, 4, 0);

			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_INIT;
			a.port_num = 1;
			a.qp_access_flags = bad[i];
			CHECK_EQ(ibv_modify_qp(qp, &a, init), EINVAL);
			CHECK_EQ(qp->state, IBV_QPS_RESET);
			CHECK_EQ(ibv_destroy_qp(qp), 0);
		}
	}
	dp_close(&d);
}

/* Two RC QPs made on a parent domain (pd.c) move data between MRs
 * registered on it and on its PD: it stands for the PD everywhere. */
SV_TEST(parent_domain_traffic)
{
	struct dp d, par;
	struct ibv_parent_domain_init_attr pa = { 0 };
	char *buf = pages(1);
	struct ibv_mr *src, *dst;
	struct ibv_qp *a, *b;
	struct ibv_wc wc;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { 0 }, *bad;

	dp_open(&d, 16);
	par = d;
	pa.pd = d.pd;
	par.pd = ibv_alloc_parent_domain(d.ctx, &pa);
	CHECK(par.pd);
	a = dp_qp(&par, IBV_QPT_RC, NULL, 4, 0);
	b = dp_qp(&par, IBV_QPT_RC, NULL, 4, 0);
	src = ibv_reg_mr(d.pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
	dst = ibv_reg_mr(par.pd, buf + 2048, 64,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(src && dst);
	dp_connect(a, b);
	strcpy(buf, "through a parent domain");
	sge = (struct ibv_sge){ (uintptr_t)buf, 24, src->lkey };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + 2048;
	wr.wr.rdma.rkey = dst->rkey;
	CHECK_EQ(ibv_post_send(a, &wr, &bad), 0);
	poll_n(d.cq, &wc, 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK(!strcmp(buf + 2048, "through a parent domain"));
	CHECK_EQ(ibv_destroy_qp(a), 0);
	CHECK_EQ(ibv_destroy_qp(b), 0);
	CHECK_EQ(ibv_dereg_mr(src), 0);
	CHECK_EQ(ibv_dereg_mr(dst), 0);
	CHECK_EQ(ibv_dealloc_pd(par.pd), 0);
	dp_close(&d);
	munmap(buf, 4096);
}

/*
 * ECE: the QP's is this device's vendor id (0xffffff: no IEEE OUI) with no
 * options, which it has none of; ibv_set_ece answers as rdma-core and its
 * providers do (no vendor: EOPNOTSUPP; comp_mask or another vendor: EINVAL)
 * and gives back the options it accepted: none.
 */
SV_TEST(ece)
{
	struct ibv_ece e;
	struct ibv_qp *qp;
	struct dp d;

	dp_open(&d, 4);
	qp = dp_qp(&d, IBV_QPT_RC, NULL, 1, 0);
	memset(&e, 0xa5, sizeof(e));
	CHECK_EQ(ibv_query_ece(qp, &e), 0);
	CHECK_EQ(e.vendor_id, 0xffffff);
	CHECK_EQ(e.options, 0);
	CHECK_EQ(e.comp_mask, 0);
	e = (struct ibv_ece){ .vendor_id = 0, .options = 1 };
	CHECK_EQ(ibv_set_ece(qp, &e), EOPNOTSUPP);
	e = (struct ibv_ece){ .vendor_id = 0x15b3, .options = 1 };
	CHECK_EQ(ibv_set_ece(qp, &e), EINVAL);
	e = (struct ibv_ece){ .vendor_id = 0xffffff, .comp_mask = 1 };
	CHECK_EQ(ibv_set_ece(qp, &e), EINVAL);
	e = (struct ibv_ece){ .vendor_id = 0xffffff, .options = 0x30000005 };
	CHECK_EQ(ibv_set_ece(qp, &e), 0);
	CHECK_EQ(e.options, 0); /* none accepted */
	CHECK_EQ(ibv_query_ece(qp, &e), 0);
	CHECK_EQ(e.vendor_id, 0xffffff);
	CHECK_EQ(e.options, 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	dp_close(&d);
}

SV_TEST_MAIN()

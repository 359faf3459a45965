/* SPDX-License-Identifier: MIT */
/* Helpers shared by the data-path object tests (test_cq.c, test_qp.c,
 * test_srq.c, test_ah.c). */
#ifndef DP_UTIL_H
#define DP_UTIL_H

#include "pd_mr_util.h"

#include <poll.h>

struct dp {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static inline void dp_open(struct dp *d, int cqe)
{
	d->ctx = sv_test_open_dev();
	d->pd = ibv_alloc_pd(d->ctx);
	CHECK(d->pd);
	d->cq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	CHECK(d->cq);
}

static inline void dp_close(struct dp *d)
{
	CHECK_EQ(ibv_destroy_cq(d->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(d->pd), 0);
	CHECK_EQ(ibv_close_device(d->ctx), 0);
}

static inline struct ibv_qp *dp_qp(struct dp *d, enum ibv_qp_type type,
				   struct ibv_srq *srq, uint32_t wr,
				   uint32_t inl)
{
	struct ibv_qp_init_attr a = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.srq = srq,
		.cap = { .max_send_wr = wr, .max_recv_wr = wr,
			 .max_send_sge = 2, .max_recv_sge = 2,
			 .max_inline_data = inl },
		.qp_type = type,
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &a);

	CHECK(qp);
	CHECK_EQ(qp->state, IBV_QPS_RESET);
	return qp;
}

/* The masks a caller needs for each legal step (kernel table). */
static inline int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = 0x11111111,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	mask |= qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	return ibv_modify_qp(qp, &a, mask);
}

static inline int to_rtr_psn(struct ibv_qp *qp, uint32_t dest_qpn,
			     uint32_t rq_psn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = dest_qpn,
				 .rq_psn = rq_psn,
				 .max_dest_rd_atomic = 1,
				 .min_rnr_timer = 12 };
	int mask = IBV_QP_STATE;

	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	if (qp->qp_type != IBV_QPT_UD)
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
	if (qp->qp_type == IBV_QPT_RC)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_query_gid(qp->context, 1, 0, &a.ah_attr.grh.dgid))
		return errno;
	return ibv_modify_qp(qp, &a, mask);
}

static inline int to_rtr(struct ibv_qp *qp, uint32_t dest_qpn)
{
	return to_rtr_psn(qp, dest_qpn, 0x123);
}

/* PSNs to_rts sends with: what a peer's to_rtr_psn expects, for traffic. */
#define DP_SQ_PSN 0x456

static inline int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = DP_SQ_PSN,
				 .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .max_rd_atomic = 1 };
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

	if (qp->qp_type == IBV_QPT_RC)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	return ibv_modify_qp(qp, &a, mask);
}

/* Two RC QPs of this process connected to each other, to RTS, with the
 * PSNs each sends agreeing with what the other expects (for traffic). */
static inline void dp_connect(struct ibv_qp *a, struct ibv_qp *b)
{
	CHECK_EQ(to_init(a), 0);
	CHECK_EQ(to_init(b), 0);
	CHECK_EQ(to_rtr_psn(a, b->qp_num, DP_SQ_PSN), 0);
	CHECK_EQ(to_rtr_psn(b, a->qp_num, DP_SQ_PSN), 0);
	CHECK_EQ(to_rts(a), 0);
	CHECK_EQ(to_rts(b), 0);
}

static inline int to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* Polls until n completions arrived (the flush path is immediate in
 * practice; the loop only absorbs scheduling). */
static inline void poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	int got = 0;

	for (int spins = 0; got < n && spins < 2000000; spins++) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		CHECK(r >= 0);
		got += r;
	}
	CHECK_EQ(got, n);
}

static inline int post_recvs(struct ibv_qp *qp, int n, uint64_t first_id)
{
	static char buf[64];
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64 };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

	for (int i = 0; i < n; i++) {
		int err;

		wr.wr_id = first_id + (uint64_t)i;
		err = ibv_post_recv(qp, &wr, &bad);
		if (err)
			return err;
	}
	return 0;
}

#endif

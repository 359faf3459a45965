/* SPDX-License-Identifier: MIT */
/* SRQs: create limits, query, limit arming, resize, post-time checks,
 * use counts, and a QP drawing from the SRQ being flushed. */
#include "dp_util.h"

static struct ibv_srq *mk_srq(struct dp *d, uint32_t wr, uint32_t limit)
{
	struct ibv_srq_init_attr a = { .srq_context = (void *)0x55,
				       .attr = { .max_wr = wr, .max_sge = 2,
						 .srq_limit = limit } };
	struct ibv_srq *srq = ibv_create_srq(d->pd, &a);

	CHECK(srq);
	CHECK(a.attr.max_wr >= wr);
	CHECK(srq->srq_context == (void *)0x55);
	CHECK(srq->pd == d->pd);
	return srq;
}

static int post_srq(struct ibv_srq *srq, int n, int nsge)
{
	static char buf[64];
	struct ibv_sge sge[3] = { { (uintptr_t)buf, 8, 0 },
				  { (uintptr_t)buf, 8, 0 },
				  { (uintptr_t)buf, 8, 0 } };
	struct ibv_recv_wr wr = { .sg_list = sge, .num_sge = nsge }, *bad;

	for (int i = 0; i < n; i++) {
		int err = ibv_post_srq_recv(srq, &wr, &bad);

		if (err) {
			CHECK(bad == &wr);
			return err;
		}
	}
	return 0;
}

SV_TEST(create_query_modify)
{
	struct sv_status_rep base;
	struct ibv_device_attr da;
	struct ibv_srq_init_attr a = { 0 };
	struct ibv_srq_attr q;
	struct ibv_srq *srq;
	struct dp d;

	sv_test_baseline(&base);
	dp_open(&d, 4);
	CHECK_EQ(ibv_query_device(d.ctx, &da), 0);
	a.attr.max_wr = 0;
	a.attr.max_sge = 1;
	CHECK_NULL_ERRNO(ibv_create_srq(d.pd, &a), EINVAL);
	a.attr.max_wr = (uint32_t)da.max_srq_wr + 1;
	CHECK_NULL_ERRNO(ibv_create_srq(d.pd, &a), EINVAL);
	a.attr.max_wr = 8;
	a.attr.max_sge = (uint32_t)da.max_srq_sge + 1;
	CHECK_NULL_ERRNO(ibv_create_srq(d.pd, &a), EINVAL);
	a.attr.max_sge = 1;
	a.attr.srq_limit = 9;
	CHECK_NULL_ERRNO(ibv_create_srq(d.pd, &a), EINVAL);

	srq = mk_srq(&d, 8, 0);
	CHECK_EQ(ibv_query_srq(srq, &q), 0);
	CHECK(q.max_wr >= 8);
	CHECK_EQ(q.max_sge, 2);
	CHECK_EQ(q.srq_limit, 0);
	q.srq_limit = 3;
	CHECK_EQ(ibv_modify_srq(srq, &q, IBV_SRQ_LIMIT), 0);
	CHECK_EQ(ibv_query_srq(srq, &q), 0);
	CHECK_EQ(q.srq_limit, 3);
	q.srq_limit = 100;
	CHECK_EQ(ibv_modify_srq(srq, &q, IBV_SRQ_LIMIT), EINVAL);
	CHECK_EQ(ibv_modify_srq(srq, &q, 1 << 5), EINVAL);
	/* Post-time checks: SGE count, then room. */
	CHECK_EQ(post_srq(srq, 1, 3), EINVAL);
	CHECK_EQ(post_srq(srq, 8, 2), 0);
	CHECK_EQ(post_srq(srq, 1, 1), ENOMEM);
	/* Resize: not below what it holds; bigger takes more. */
	q.max_wr = 4;
	CHECK_EQ(ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR), EINVAL);
	q.max_wr = 16;
	CHECK_EQ(ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR), 0);
	CHECK_EQ(ibv_query_srq(srq, &q), 0);
	CHECK(q.max_wr >= 16);
	CHECK_EQ(post_srq(srq, 8, 1), 0);
	CHECK_EQ(post_srq(srq, 1, 1), ENOMEM);
	CHECK_EQ(ibv_dealloc_pd(d.pd), EBUSY);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	dp_close(&d);
	sv_test_wait_quiet(&base, 5000);
}

/* ibv_create_srq_ex: an XRC SRQ needs its XRCD and CQ (EINVAL without:
 * test_xrc has the rest of XRC); tag matching is EOPNOTSUPP; basic works. */
SV_TEST(srq_ex_types)
{
	struct ibv_srq_init_attr_ex a;
	struct ibv_srq *srq;
	struct dp d;

	dp_open(&d, 4);
	memset(&a, 0, sizeof(a));
	a.attr.max_wr = 4;
	a.attr.max_sge = 1;
	a.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	a.pd = d.pd;
	a.srq_type = IBV_SRQT_XRC;
	CHECK_NULL_ERRNO(ibv_create_srq_ex(d.ctx, &a), EINVAL);
	a.srq_type = IBV_SRQT_TM;
	CHECK_NULL_ERRNO(ibv_create_srq_ex(d.ctx, &a), EOPNOTSUPP);
	a.srq_type = IBV_SRQT_BASIC;
	srq = ibv_create_srq_ex(d.ctx, &a);
	CHECK(srq);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	dp_close(&d);
}

SV_TEST(qp_on_srq)
{
	struct ibv_recv_wr rwr = { 0 }, *bad;
	struct ibv_wc wc[4];
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr qa;
	struct dp d;

	dp_open(&d, 8);
	srq = mk_srq(&d, 4, 0);
	qp = dp_qp(&d, IBV_QPT_RC, srq, 2, 0);
	CHECK_EQ(ibv_query_qp(qp, &(struct ibv_qp_attr){ 0 }, 0, &qa), 0);
	CHECK(qa.srq == srq);
	CHECK_EQ(ibv_destroy_srq(srq), EBUSY);
	CHECK_EQ(to_init(qp), 0);
	/* Its receives come from the SRQ. */
	CHECK_EQ(ibv_post_recv(qp, &rwr, &bad), EINVAL);
	CHECK_EQ(post_srq(srq, 2, 1), 0);
	/* ERR flushes the QP's own queues, not the shared one. */
	CHECK_EQ(to_state(qp, IBV_QPS_ERR), 0);
	CHECK_EQ(ibv_poll_cq(d.cq, 4, wc), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	dp_close(&d);
}

/* IBV_SRQ_MAX_WR grows max_sge too where asked for more (rdma-core's
 * tests expect it), ignores a smaller or out-of-range one, and keeps the
 * WQEs posted before: they still scatter as posted, the new ones as
 * wide as allowed now. */
SV_TEST(resize_grows_max_sge)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 2, .max_sge = 1 } };
	struct ibv_send_wr swr = { 0 }, *sbad;
	struct ibv_recv_wr rwr = { 0 }, *rbad;
	struct ibv_sge sge[3], ssge;
	struct ibv_srq_attr q;
	struct ibv_srq *srq;
	struct ibv_qp *a, *b;
	struct ibv_wc wc[2];
	struct ibv_mr *mr;
	char *buf = pages(1);
	struct dp d;

	dp_open(&d, 8);
	srq = ibv_create_srq(d.pd, &sa);
	CHECK(srq);
	mr = ibv_reg_mr(d.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	a = dp_qp(&d, IBV_QPT_RC, NULL, 4, 0);
	b = dp_qp(&d, IBV_QPT_RC, srq, 4, 0);
	dp_connect(a, b);
	/* One WQE of one SGE, posted before the resize. */
	sge[0] = (struct ibv_sge){ (uintptr_t)buf + 1024, 64, mr->lkey };
	rwr.wr_id = 1;
	rwr.sg_list = sge;
	rwr.num_sge = 1;
	CHECK_EQ(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	rwr.num_sge = 3;
	CHECK_EQ(ibv_post_srq_recv(srq, &rwr, &rbad), EINVAL);
	/* Garbage max_sge beside IBV_SRQ_MAX_WR: ignored. */
	q = (struct ibv_srq_attr){ .max_wr = 4, .max_sge = 1000 };
	CHECK_EQ(ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR), 0);
	CHECK_EQ(ibv_query_srq(srq, &q), 0);
	CHECK_EQ(q.max_sge, 1);
	q = (struct ibv_srq_attr){ .max_wr = 8, .max_sge = 3 };
	CHECK_EQ(ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR), 0);
	CHECK_EQ(ibv_query_srq(srq, &q), 0);
	CHECK(q.max_wr >= 8);
	CHECK_EQ(q.max_sge, 3);
	/* Smaller: ignored, never a shrink. */
	q.max_sge = 2;
	CHECK_EQ(ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR), 0);
	CHECK_EQ(ibv_query_srq(srq, &q), 0);
	CHECK_EQ(q.max_sge, 3);
	/* Three SGEs now. */
	for (int i = 0; i < 3; i++)
		sge[i] = (struct ibv_sge){ (uintptr_t)buf + 2048 + 100 * i, 8,
					   mr->lkey };
	rwr.wr_id = 2;
	CHECK_EQ(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	memcpy(buf, "first message, one piece", 25);
	memcpy(buf + 512, "abcdefghABCDEFGH01234567", 24);
	swr.sg_list = &ssge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	ssge = (struct ibv_sge){ (uintptr_t)buf, 25, mr->lkey };
	CHECK_EQ(ibv_post_send(a, &swr, &sbad), 0);
	poll_n(d.cq, wc, 2);
	ssge = (struct ibv_sge){ (uintptr_t)buf + 512, 24, mr->lkey };
	CHECK_EQ(ibv_post_send(a, &swr, &sbad), 0);
	poll_n(d.cq, wc, 2);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(wc[i].status, IBV_WC_SUCCESS);
	CHECK(!memcmp(buf + 1024, "first message, one piece", 25));
	CHECK(!memcmp(buf + 2048, "abcdefgh", 8));
	CHECK(!memcmp(buf + 2148, "ABCDEFGH", 8));
	CHECK(!memcmp(buf + 2248, "01234567", 8));
	CHECK_EQ(ibv_destroy_qp(a), 0);
	CHECK_EQ(ibv_destroy_qp(b), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	dp_close(&d);
	munmap(buf, 4096);
}

SV_TEST_MAIN()

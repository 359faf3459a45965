/* SPDX-License-Identifier: MIT */
/*
 * Multicast on UD QPs (ibv_attach_mcast, ibv_detach_mcast; the daemon's
 * gw_mcast.c): the kernel's errors, rxe's limits enforced with its
 * errors, and delivery on one host to every attached QP of every process
 * but the sender, each with its own Q_Key check.  The _packets variant
 * runs the same with SOFTVERBS_DIRECT=0.
 */
#include "engine_util.h"

#include <sys/wait.h>

#define QKEY 0x11111111u
#define MSGS 8

/* ::ffff:239.1.1.n, an IPv4 group as RoCE v2 names it. */
static union ibv_gid group4(uint32_t n)
{
	union ibv_gid g;

	memset(&g, 0, sizeof(g));
	g.raw[10] = g.raw[11] = 0xff;
	g.raw[12] = 239;
	g.raw[13] = (uint8_t)(n >> 16);
	g.raw[14] = (uint8_t)(n >> 8);
	g.raw[15] = (uint8_t)n;
	return g;
}

SV_TEST(attach_errors)
{
	struct ep ud, rc;
	union ibv_gid g = group4(1), uni = group4(1), v6;
	struct ibv_device_attr da;

	ep_open(&ud, NULL, IBV_QPT_UD);
	ep_open(&rc, ud.ctx, IBV_QPT_RC);
	CHECK_EQ(ibv_query_device(ud.ctx, &da), 0);
	CHECK_EQ(da.max_mcast_grp, 8192);
	CHECK_EQ(da.max_mcast_qp_attach, 56);
	CHECK_EQ(da.max_total_mcast_qp_attach, 8192 * 56);

	/* ib_attach_mcast: a UD QP and a multicast GID, else EINVAL. */
	errno = 0;
	CHECK_EQ(ibv_attach_mcast(rc.qp, &g, 0), EINVAL);
	CHECK_EQ(errno, EINVAL);
	uni.raw[12] = 198; /* 198.1.1.1: not a group */
	CHECK_EQ(ibv_attach_mcast(ud.qp, &uni, 0), EINVAL);
	CHECK_EQ(ibv_detach_mcast(rc.qp, &g, 0), EINVAL);

	CHECK_EQ(ibv_attach_mcast(ud.qp, &g, 0), 0);
	CHECK_EQ(ibv_attach_mcast(ud.qp, &g, 0xc001), 0); /* twice: no error */
	memset(&v6, 0, sizeof(v6));
	v6.raw[0] = 0xff;
	v6.raw[1] = 0x0e;
	v6.raw[15] = 7; /* ff0e::7 */
	CHECK_EQ(ibv_attach_mcast(ud.qp, &v6, 0), 0);

	/* A QP with groups is busy, as ib_uverbs answers. */
	errno = 0;
	CHECK_EQ(ibv_destroy_qp(ud.qp), EBUSY);
	CHECK_EQ(ibv_detach_mcast(ud.qp, &g, 0), 0);
	CHECK_EQ(ibv_detach_mcast(ud.qp, &g, 0), EINVAL); /* not attached */
	CHECK_EQ(ibv_detach_mcast(ud.qp, &uni, 0), EINVAL);
	CHECK_EQ(ibv_destroy_qp(ud.qp), EBUSY);
	CHECK_EQ(ibv_detach_mcast(ud.qp, &v6, 0), 0);
	ep_close(&rc);
	ep_close(&ud); /* destroys the QP: no group left */
}

/* 56 QPs in a group, not 57; a QP in 8192 groups, not 8193; each ENOMEM
 * changes nothing. */
SV_TEST_T(limits, 120)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp[57];
	struct ibv_qp_init_attr ia;
	union ibv_gid g = group4(2);

	CHECK(pd && cq);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	for (int i = 0; i < 57; i++) {
		qp[i] = ibv_create_qp(pd, &ia);
		CHECK(qp[i]);
	}
	for (int i = 0; i < 56; i++)
		CHECK_EQ(ibv_attach_mcast(qp[i], &g, 0), 0);
	errno = 0;
	CHECK_EQ(ibv_attach_mcast(qp[56], &g, 0), ENOMEM);
	CHECK_EQ(errno, ENOMEM);
	CHECK_EQ(ibv_detach_mcast(qp[56], &g, 0), EINVAL);
	CHECK_EQ(ibv_detach_mcast(qp[0], &g, 0), 0);
	CHECK_EQ(ibv_attach_mcast(qp[56], &g, 0), 0); /* room again */

	for (uint32_t n = 100; n < 100 + 8192 - 1; n++) {
		union ibv_gid gn = group4(n);

		CHECK_EQ(ibv_attach_mcast(qp[0], &gn, 0), 0);
	}
	/* 8191 new groups and g: the device's 8192. */
	{
		union ibv_gid more = group4(100 + 8192);

		CHECK_EQ(ibv_attach_mcast(qp[0], &more, 0), ENOMEM);
		CHECK_EQ(ibv_detach_mcast(qp[0], &more, 0), EINVAL);
		/* A group that exists takes another QP all the same (when
		 * it has room). */
		CHECK_EQ(ibv_attach_mcast(qp[0], &g, 0), ENOMEM);
		CHECK_EQ(ibv_detach_mcast(qp[56], &g, 0), 0);
		CHECK_EQ(ibv_attach_mcast(qp[0], &g, 0), 0);
		CHECK_EQ(ibv_detach_mcast(qp[0], &g, 0), 0);
		CHECK_EQ(ibv_attach_mcast(qp[56], &g, 0), 0);
	}
	/* Destroying a QP whose groups were left to the end: detach first. */
	for (uint32_t n = 100; n < 100 + 8192 - 1; n++) {
		union ibv_gid gn = group4(n);

		CHECK_EQ(ibv_detach_mcast(qp[0], &gn, 0), 0);
	}
	for (int i = 1; i < 57; i++)
		CHECK_EQ(ibv_detach_mcast(qp[i], &g, 0), 0);
	for (int i = 0; i < 57; i++)
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* A process that exits with its QPs attached leaves no group behind: its
 * 8192 groups are free again for the next one. */
SV_TEST_T(exit_leaves_groups, 120)
{
	int fds[2];
	char c;
	pid_t pid;

	CHECK_EQ(pipe(fds), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		struct ep e;

		ep_open(&e, NULL, IBV_QPT_UD);
		for (uint32_t n = 0; n < 8192; n++) {
			union ibv_gid g = group4(0x10000 + n);

			if (ibv_attach_mcast(e.qp, &g, 0))
				_exit(2);
		}
		_exit(write(fds[1], "r", 1) == 1 ? 0 : 3);
	}
	close(fds[1]);
	CHECK_EQ(read(fds[0], &c, 1), 1);
	{
		int st;

		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	{
		struct ep e;
		union ibv_gid g = group4(0x30000);
		struct timespec t0, t;
		int rc;

		ep_open(&e, NULL, IBV_QPT_UD);
		/* The daemon tears the child's ufile down when it sees it
		 * close: wait for that, not for a time. */
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while ((rc = ibv_attach_mcast(e.qp, &g, 0)) == ENOMEM) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			CHECK(t.tv_sec - t0.tv_sec < 20);
			usleep(1000);
		}
		CHECK_EQ(rc, 0);
		CHECK_EQ(ibv_detach_mcast(e.qp, &g, 0), 0);
		ep_close(&e);
	}
}

/* ------------------------------------------------------- delivery -- */

/* A receiver's QP on ctx with its own CQ, RTS, qkey given, attached to g
 * (when attach) with MSGS receives posted. */
static void rx_open(struct ep *e, struct ibv_context *ctx, uint32_t qkey,
		    const union ibv_gid *g, int attach)
{
	struct ibv_qp_attr a;

	ep_open(e, ctx, IBV_QPT_UD);
	ep_connect(e, 0);
	memset(&a, 0, sizeof(a));
	a.qkey = qkey;
	CHECK_EQ(ibv_modify_qp(e->qp, &a, IBV_QP_QKEY), 0);
	if (attach)
		CHECK_EQ(ibv_attach_mcast(e->qp, g, 0), 0);
	for (int i = 0; i < MSGS; i++)
		post_recv(e, (uint64_t)i, e->buf + i * 1024, 1024);
}

/* MSGS messages must arrive on e, from src_qp, to group g. */
static void rx_expect(struct ep *e, uint32_t src_qp, const union ibv_gid *g)
{
	for (int i = 0; i < MSGS; i++) {
		struct ibv_wc wc;
		const uint8_t *b;

		EXPECT_WC(e->cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
		CHECK(wc.wc_flags & IBV_WC_GRH);
		CHECK_EQ(wc.src_qp, src_qp);
		CHECK_EQ(wc.byte_len, 40 + 100);
		b = (const uint8_t *)e->buf + wc.wr_id * 1024;
		/* The GRH's destination is the group (its IPv4 header's
		 * destination in the last 20 bytes for an IPv4 group). */
		CHECK(!memcmp(b + 20 + 16, g->raw + 12, 4));
		CHECK_EQ(b[40], (uint8_t)(0xa0 + wc.wr_id));
		CHECK_EQ(b[40 + 99], (uint8_t)wc.wr_id);
	}
}

/* Nothing may arrive on e for a while (a QP that must not get copies);
 * the copies to the others came first, so a late one would be here. */
static void rx_none(struct ep *e)
{
	struct ibv_wc wc;

	CHECK_EQ(poll1(e->cq, &wc, 200), 0);
}

static void send_group(struct ep *s, struct ibv_ah *ah, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sg = { .addr = (uintptr_t)s->buf + i * 128,
				      .length = 100, .lkey = s->mr->lkey };
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;

		s->buf[i * 128] = (char)(0xa0 + i);
		s->buf[i * 128 + 99] = (char)i;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)i;
		wr.sg_list = &sg;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 0xffffff;
		wr.wr.ud.remote_qkey = QKEY;
		CHECK_EQ(ibv_post_send(s->qp, &wr, &bad), 0);
		EXPECT_WC(s->cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
	}
}

/*
 * One sender; three children, each with two QPs attached (one of them
 * with another Q_Key: dropped, 9.6.1.1 per QP) and one not attached;
 * the sender's own QP attached too.  Every attached QP with the Q_Key
 * gets every message, the sender's own none.  Then a child's QP detaches
 * and gets no more.
 */
#define KIDS 3
SV_TEST_T(deliver_processes, 60)
{
	union ibv_gid g = group4(3);
	int ready[2], go[KIDS][2];
	pid_t pid[KIDS];
	struct ep s;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	char c;

	CHECK_EQ(pipe(ready), 0);
	for (int k = 0; k < KIDS; k++) {
		CHECK_EQ(pipe(go[k]), 0);
		pid[k] = fork();
		CHECK(pid[k] >= 0);
		if (!pid[k]) {
			struct ep a, b, bad, none;
			uint32_t src;

			close(ready[0]);
			rx_open(&a, NULL, QKEY, &g, 1);
			rx_open(&b, a.ctx, QKEY, &g, 1);
			rx_open(&bad, a.ctx, QKEY + 1, &g, 1);
			rx_open(&none, a.ctx, QKEY, &g, 0);
			CHECK_EQ(write(ready[1], "r", 1), 1);
			CHECK_EQ(read(go[k][0], &src, sizeof(src)), sizeof(src));
			rx_expect(&a, src, &g);
			rx_expect(&b, src, &g);
			rx_none(&bad);
			rx_none(&none);
			/* b leaves; a stays. */
			CHECK_EQ(ibv_detach_mcast(b.qp, &g, 0), 0);
			for (int i = 0; i < MSGS; i++) {
				post_recv(&a, (uint64_t)i, a.buf + i * 1024, 1024);
				post_recv(&b, (uint64_t)i, b.buf + i * 1024, 1024);
			}
			CHECK_EQ(write(ready[1], "r", 1), 1);
			rx_expect(&a, src, &g);
			rx_none(&b);
			CHECK_EQ(ibv_detach_mcast(a.qp, &g, 0), 0);
			CHECK_EQ(ibv_detach_mcast(bad.qp, &g, 0), 0);
			_exit(0);
		}
		close(go[k][0]);
	}
	close(ready[1]);
	for (int k = 0; k < KIDS; k++)
		CHECK_EQ(read(ready[0], &c, 1), 1);

	ep_open(&s, NULL, IBV_QPT_UD);
	ep_connect(&s, 0);
	CHECK_EQ(ibv_attach_mcast(s.qp, &g, 0), 0);
	for (int i = 0; i < MSGS; i++)
		post_recv(&s, 100 + (uint64_t)i, s.buf + 32768 + i * 1024, 1024);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.sgid_index = 0;
	aa.grh.hop_limit = 1;
	aa.grh.dgid = g;
	ah = ibv_create_ah(s.pd, &aa);
	CHECK(ah);
	for (int k = 0; k < KIDS; k++) {
		uint32_t src = s.qp->qp_num;

		CHECK_EQ(write(go[k][1], &src, sizeof(src)), sizeof(src));
	}
	send_group(&s, ah, MSGS);
	for (int k = 0; k < KIDS; k++)
		CHECK_EQ(read(ready[0], &c, 1), 1);
	send_group(&s, ah, MSGS);
	for (int k = 0; k < KIDS; k++) {
		int st;

		CHECK_EQ(waitpid(pid[k], &st, 0), pid[k]);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			sv_test_fail(__FILE__, __LINE__, "receiver %d: status %#x",
				     k, st);
	}
	/* The sender's own QP had none of its messages (rxe's rule). */
	{
		struct ibv_wc wc;

		CHECK_EQ(poll1(s.cq, &wc, 100), 0);
	}
	CHECK_EQ(ibv_detach_mcast(s.qp, &g, 0), 0);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	ep_close(&s);
}

/* Two QPs of the sender's own process are members: each gets a copy. */
SV_TEST(deliver_same_process)
{
	union ibv_gid g = group4(4);
	struct ep s, a, b;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;

	ep_open(&s, NULL, IBV_QPT_UD);
	ep_connect(&s, 0);
	rx_open(&a, s.ctx, QKEY, &g, 1);
	rx_open(&b, NULL, QKEY, &g, 1); /* another context */
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.hop_limit = 1;
	aa.grh.dgid = g;
	ah = ibv_create_ah(s.pd, &aa);
	CHECK(ah);
	send_group(&s, ah, MSGS);
	rx_expect(&a, s.qp->qp_num, &g);
	rx_expect(&b, s.qp->qp_num, &g);
	CHECK_EQ(ibv_detach_mcast(a.qp, &g, 0), 0);
	CHECK_EQ(ibv_detach_mcast(b.qp, &g, 0), 0);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	ep_close(&a);
	ep_close(&b);
	ep_close(&s);
}

/* A send's keys are checked as for any UD send, whether a QP of this
 * host is attached or none is: a bad lkey completes LOC_PROT_ERR and
 * nothing arrives. */
SV_TEST(bad_lkey_is_prot_err)
{
	union ibv_gid g = group4(5), none = group4(6);
	struct ibv_ah_attr aa;
	struct ibv_ah *ah[2];
	struct ep s, a;

	ep_open(&s, NULL, IBV_QPT_UD);
	ep_connect(&s, 0);
	rx_open(&a, NULL, QKEY, &g, 1);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.hop_limit = 1;
	aa.grh.dgid = g;
	ah[0] = ibv_create_ah(s.pd, &aa);
	aa.grh.dgid = none;
	ah[1] = ibv_create_ah(s.pd, &aa);
	CHECK(ah[0] && ah[1]);
	for (int k = 0; k < 2; k++) {
		struct ibv_sge sg = { .addr = (uintptr_t)s.buf, .length = 100,
				      .lkey = s.mr->lkey ^ 0x5a5a00 };
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;

		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &sg;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.ud.ah = ah[k];
		wr.wr.ud.remote_qpn = 0xffffff;
		wr.wr.ud.remote_qkey = QKEY;
		CHECK_EQ(ibv_post_send(s.qp, &wr, &bad), 0);
		EXPECT_WC(s.cq, &wc, IBV_WC_LOC_PROT_ERR);
		/* The QP is in ERR now: a fresh one for the next. */
		CHECK_EQ(ibv_destroy_qp(s.qp), 0);
		{
			struct ibv_qp_init_attr ia;

			memset(&ia, 0, sizeof(ia));
			ia.send_cq = ia.recv_cq = s.cq;
			ia.qp_type = IBV_QPT_UD;
			ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
			ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
			s.qp = ibv_create_qp(s.pd, &ia);
			CHECK(s.qp);
			ep_connect(&s, 0);
		}
	}
	rx_none(&a);
	CHECK_EQ(ibv_detach_mcast(a.qp, &g, 0), 0);
	CHECK_EQ(ibv_destroy_ah(ah[0]), 0);
	CHECK_EQ(ibv_destroy_ah(ah[1]), 0);
	ep_close(&a);
	ep_close(&s);
}

SV_TEST_MAIN()

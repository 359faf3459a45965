/* SPDX-License-Identifier: MIT */
/*
 * XRC (issue 24 item 1) on one host: ibv_open_xrcd and ibv_close_xrcd
 * with the kernel's sharing by inode (between processes too), XRC SRQs
 * and ibv_get_srq_num, XRC TGT QPs (ibv_create_qp_ex, ibv_open_qp from
 * another process, one state for every handle, the QP living while any
 * handle does), XRC INI QPs, every error the kernel's ib_uverbs and
 * rdma-core's libibverbs answer -- and the data they move (the "data_"
 * cases), directly executed here and as packets in test_xrc_packets
 * (SOFTVERBS_DIRECT=0).  Between hosts: test_xrc_wire.c.
 */
#include "engine_util.h"
#include "sv_param.h"

#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>

static struct ibv_xrcd *xrcd_open(struct ibv_context *ctx, int fd, int oflags)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd,
		.oflags = oflags,
	};

	return ibv_open_xrcd(ctx, &a);
}

static int tmpfile_fd(char *path, size_t len)
{
	int fd;

	snprintf(path, len, "/tmp/sv-xrc-XXXXXX");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	return fd;
}

static struct ibv_srq *xsrq_new(struct ibv_context *ctx, struct ibv_pd *pd,
				struct ibv_xrcd *x, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	a.srq_type = IBV_SRQT_XRC;
	a.pd = pd;
	a.xrcd = x;
	a.cq = cq;
	a.attr.max_wr = 16;
	a.attr.max_sge = 1;
	return ibv_create_srq_ex(ctx, &a);
}

static struct ibv_qp *tgt_new(struct ibv_context *ctx, struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_RECV;
	a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	a.xrcd = x;
	return ibv_create_qp_ex(ctx, &a);
}

static struct ibv_qp *tgt_open(struct ibv_context *ctx, struct ibv_xrcd *x,
			       uint32_t qpn)
{
	struct ibv_qp_open_attr a = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_CONTEXT,
		.qp_num = qpn,
		.xrcd = x,
		.qp_context = (void *)0x1234,
		.qp_type = IBV_QPT_XRC_RECV,
	};

	return ibv_open_qp(ctx, &a);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	CHECK_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
	return a.qp_state;
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static void rtr_attr(struct ibv_qp_attr *a, uint32_t dqpn)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = dqpn;
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	a->ah_attr.grh.hop_limit = 1;
	a->max_dest_rd_atomic = 4;
	a->min_rnr_timer = 12;
}

#define RTR_MASK                                                               \
	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |        \
	 IBV_QP_RQ_PSN)

/* The device has XRC (as mlx5 says it): IBV_DEVICE_XRC in
 * device_cap_flags, in the extended query too; ODP MRs over XRC as over
 * RC (xrc_odp_caps, which rdma-core's test_odp_xrc_traffic asks for). */
SV_TEST(xrc_advertised)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_device_attr a;
	struct ibv_device_attr_ex ax;

	CHECK_EQ(ibv_query_device(ctx, &a), 0);
	CHECK(a.device_cap_flags & IBV_DEVICE_XRC);
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &ax), 0);
	CHECK(ax.orig_attr.device_cap_flags & IBV_DEVICE_XRC);
	CHECK(ax.device_cap_flags_ex & IBV_DEVICE_XRC);
	CHECK_EQ(ax.xrc_odp_caps,
		 ax.odp_caps.per_transport_caps.rc_odp_caps);
	CHECK(ax.xrc_odp_caps & IBV_ODP_SUPPORT_SRQ_RECV);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* The XRCD of a file: comp_mask checks, private domains, EBADF. */
SV_TEST(xrcd_open_errors)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_xrcd_init_attr a = { .fd = -1 };
	struct ibv_xrcd *x, *y;

	/* rdma-core's ibv_cmd_open_xrcd: both FD and OFLAGS, nothing else. */
	a.comp_mask = IBV_XRCD_INIT_ATTR_FD;
	CHECK_NULL_ERRNO(ibv_open_xrcd(ctx, &a), EINVAL);
	a.comp_mask = IBV_XRCD_INIT_ATTR_OFLAGS;
	CHECK_NULL_ERRNO(ibv_open_xrcd(ctx, &a), EINVAL);
	a.comp_mask = IBV_XRCD_INIT_ATTR_RESERVED;
	CHECK_NULL_ERRNO(ibv_open_xrcd(ctx, &a), EOPNOTSUPP);
	/* A descriptor that is not open: the kernel's fdget fails. */
	CHECK_NULL_ERRNO(xrcd_open(ctx, 999, O_CREAT), EBADF);
	/* fd -1: a new private domain each time. */
	x = xrcd_open(ctx, -1, 0);
	CHECK(x);
	CHECK(x->context == ctx);
	y = xrcd_open(ctx, -1, O_CREAT);
	CHECK(y && y != x);
	CHECK_EQ(ibv_close_xrcd(y), 0);
	CHECK_EQ(ibv_close_xrcd(x), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* One inode, one domain: O_CREAT, EAGAIN, O_EXCL, between contexts and
 * processes; the domain goes with its last handle. */
SV_TEST(xrcd_inode_shared)
{
	struct sv_status_rep base;
	struct ibv_context *ctx, *ctx2;
	char path[64];
	int fd = tmpfile_fd(path, sizeof(path)), fd2, sv[2];
	struct ibv_xrcd *x, *x2;
	struct ibv_qp *tgt, *opened;
	pid_t pid;
	int st;

	sv_test_baseline(&base);
	ctx = eu_open();
	/* No XRCD on this inode yet: without O_CREAT the kernel's EAGAIN. */
	CHECK_NULL_ERRNO(xrcd_open(ctx, fd, 0), EAGAIN);
	x = xrcd_open(ctx, fd, O_CREAT);
	CHECK(x);
	/* Another descriptor of the same file names the same domain ... */
	fd2 = open(path, O_RDONLY);
	CHECK(fd2 >= 0);
	CHECK_NULL_ERRNO(xrcd_open(ctx, fd2, O_CREAT | O_EXCL), EINVAL);
	ctx2 = eu_open();
	x2 = xrcd_open(ctx2, fd2, 0);
	CHECK(x2);
	/* ... so a TGT QP made through one opens through the other. */
	tgt = tgt_new(ctx, x);
	CHECK(tgt);
	opened = tgt_open(ctx2, x2, tgt->qp_num);
	CHECK(opened);
	CHECK_EQ(opened->qp_num, tgt->qp_num);
	CHECK(opened->qp_context == (void *)0x1234);
	CHECK_EQ(ibv_destroy_qp(opened), 0);
	/* And from another process, by the file alone. */
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct ibv_context *c = eu_open();
		int f = open(path, O_RDONLY);
		struct ibv_xrcd *cx = xrcd_open(c, f, 0);
		struct ibv_qp *q;
		uint32_t qpn;
		char ok = 1;

		xrecv(sv[1], &qpn, sizeof(qpn));
		if (!cx)
			_exit(2);
		q = tgt_open(c, cx, qpn);
		if (!q || to_init(q))
			_exit(3);
		xsend(sv[1], &ok, 1);
		xrecv(sv[1], &ok, 1); /* hold the handle until told */
		if (ibv_destroy_qp(q) || ibv_close_xrcd(cx))
			_exit(4);
		_exit(0);
	}
	xsend(sv[0], &tgt->qp_num, sizeof(tgt->qp_num));
	{
		char ok;

		xrecv(sv[0], &ok, 1);
	}
	/* The child's transition is the state every handle sees. */
	CHECK_EQ(qp_state(tgt), IBV_QPS_INIT);
	/* The creator's handle goes first: the QP stays for the child. */
	CHECK_EQ(ibv_destroy_qp(tgt), 0);
	CHECK_EQ(ibv_close_xrcd(x), 0);
	{
		char ok = 1;

		xsend(sv[0], &ok, 1);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* x2 is the last handle: the domain lives, the QP is gone. */
	CHECK_NULL_ERRNO(tgt_open(ctx2, x2, 0), EINVAL);
	CHECK_EQ(ibv_close_xrcd(x2), 0);
	/* With every handle closed the inode names no domain any more. */
	CHECK_NULL_ERRNO(xrcd_open(ctx, fd, 0), EAGAIN);
	close(sv[0]);
	close(sv[1]);
	close(fd2);
	close(fd);
	unlink(path);
	CHECK_EQ(ibv_close_device(ctx2), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	/* Every object gone, and the descriptor that pinned the inode. */
	sv_test_wait_quiet(&base, 5000);
}

/* XRC SRQs: what they need, their numbers, the counts they hold. */
SV_TEST(xrc_srq)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_xrcd *x = xrcd_open(ctx, -1, 0);
	struct ibv_srq_init_attr_ex a;
	struct ibv_srq_init_attr ba = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *s1, *s2, *basic;
	struct ibv_recv_wr wr = { .wr_id = 1 }, *bad;
	uint32_t n1 = 0, n2 = 0;

	CHECK(pd && cq && x);
	/* IBV_SRQT_XRC needs its XRCD and CQ. */
	memset(&a, 0, sizeof(a));
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		      IBV_SRQ_INIT_ATTR_CQ;
	a.srq_type = IBV_SRQT_XRC;
	a.pd = pd;
	a.cq = cq;
	a.attr.max_wr = 4;
	a.attr.max_sge = 1;
	CHECK_NULL_ERRNO(ibv_create_srq_ex(ctx, &a), EINVAL);
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		      IBV_SRQ_INIT_ATTR_XRCD;
	a.xrcd = x;
	CHECK_NULL_ERRNO(ibv_create_srq_ex(ctx, &a), EINVAL);
	a.srq_type = IBV_SRQT_TM;
	a.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	CHECK_NULL_ERRNO(ibv_create_srq_ex(ctx, &a), EOPNOTSUPP);
	s1 = xsrq_new(ctx, pd, x, cq);
	CHECK(s1);
	s2 = xsrq_new(ctx, pd, x, cq);
	CHECK(s2);
	CHECK_EQ(ibv_get_srq_num(s1, &n1), 0);
	CHECK_EQ(ibv_get_srq_num(s2, &n2), 0);
	CHECK(n1 && n2 && n1 != n2 && n1 <= 0xffffff && n2 <= 0xffffff);
	/* A basic SRQ has no number. */
	basic = ibv_create_srq(pd, &ba);
	CHECK(basic);
	CHECK_EQ(ibv_get_srq_num(basic, &n1), EINVAL);
	CHECK_EQ(ibv_destroy_srq(basic), 0);
	/* Receives post as to any SRQ. */
	CHECK_EQ(ibv_post_srq_recv(s1, &wr, &bad), 0);
	/* It holds its CQ, PD and XRCD. */
	CHECK_EQ(ibv_destroy_cq(cq), EBUSY);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_close_xrcd(x), EBUSY);
	CHECK_EQ(ibv_destroy_srq(s1), 0);
	CHECK_EQ(ibv_close_xrcd(x), EBUSY);
	CHECK_EQ(ibv_destroy_srq(s2), 0);
	CHECK_EQ(ibv_close_xrcd(x), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* TGT QPs: made in an XRCD, the kernel's transitions for them, no send
 * or receive queue, ibv_open_qp's errors, EBUSY on the XRCD. */
SV_TEST(tgt_qp)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_xrcd *x = xrcd_open(ctx, -1, 0), *other = xrcd_open(ctx, -1, 0);
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp_open_attr oa;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr qia;
	struct ibv_send_wr swr = { .wr_id = 1, .opcode = IBV_WR_SEND }, *sbad;
	struct ibv_recv_wr rwr = { .wr_id = 2 }, *rbad;
	struct ibv_qp *tgt, *h;

	CHECK(x && other);
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_RECV;
	CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EINVAL); /* no XRCD */
	tgt = tgt_new(ctx, x);
	CHECK(tgt);
	CHECK_EQ(tgt->qp_type, IBV_QPT_XRC_RECV);
	CHECK(!tgt->pd && !tgt->send_cq && !tgt->recv_cq && !tgt->srq);
	CHECK(!ibv_qp_to_qp_ex(tgt));
	CHECK_EQ(qp_state(tgt), IBV_QPS_RESET);
	CHECK_EQ(ibv_query_qp(tgt, &a, IBV_QP_STATE, &qia), 0);
	CHECK_EQ(qia.qp_type, IBV_QPT_XRC_RECV);
	CHECK_EQ(to_init(tgt), 0);
	/* INIT -> RTR of a TGT QP needs what an RC responder needs. */
	rtr_attr(&a, 0x123);
	CHECK_EQ(ibv_modify_qp(tgt, &a, RTR_MASK), EINVAL);
	CHECK_EQ(qp_state(tgt), IBV_QPS_INIT);
	CHECK_EQ(ibv_modify_qp(tgt, &a, RTR_MASK | IBV_QP_MAX_DEST_RD_ATOMIC |
						IBV_QP_MIN_RNR_TIMER),
		 0);
	/* RTR -> RTS: timeout and SQ PSN only (no retry counts). */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	CHECK_EQ(ibv_modify_qp(tgt, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
						IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT),
		 EINVAL);
	CHECK_EQ(ibv_modify_qp(tgt, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
						IBV_QP_SQ_PSN),
		 0);
	CHECK_EQ(qp_state(tgt), IBV_QPS_RTS);
	/* Nothing posts to it. */
	CHECK_EQ(ibv_post_send(tgt, &swr, &sbad), EINVAL);
	CHECK(sbad == &swr);
	CHECK_EQ(ibv_post_recv(tgt, &rwr, &rbad), EINVAL);
	/* ibv_open_qp: the right QP number, XRCD and type, all given. */
	CHECK_NULL_ERRNO(tgt_open(ctx, other, tgt->qp_num), EINVAL);
	CHECK_NULL_ERRNO(tgt_open(ctx, x, tgt->qp_num ^ 0x800), EINVAL);
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
		       IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = tgt->qp_num;
	oa.xrcd = x;
	oa.qp_type = IBV_QPT_RC;
	CHECK_NULL_ERRNO(ibv_open_qp(ctx, &oa), EINVAL);
	oa.qp_type = IBV_QPT_XRC_RECV;
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD;
	CHECK_NULL_ERRNO(ibv_open_qp(ctx, &oa), EINVAL);
	oa.comp_mask |= IBV_QP_OPEN_ATTR_TYPE;
	h = ibv_open_qp(ctx, &oa);
	CHECK(h);
	CHECK_EQ(qp_state(h), IBV_QPS_RTS);
	/* res show: the opened handle is a QP row of its own, marked. */
	{
		static struct sv_res_rep rep;
		struct sv_res_req req = { .type = SV_RES_QP };
		int seen = 0;

		sv_test_res_page(&req, &rep);
		for (uint32_t i = 0; i < rep.count; i++) {
			const struct sv_res_entry *e = &rep.e[i];

			if (e->lkey != tgt->qp_num)
				continue;
			if (e->handle == h->handle) {
				CHECK_EQ(e->flags, 4);
				seen++;
			} else if (e->handle == tgt->handle) {
				CHECK_EQ(e->flags, 0);
				seen++;
			}
		}
		CHECK_EQ(seen, 2);
	}
	/* A transition through either handle is the QP's. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	CHECK_EQ(ibv_modify_qp(h, &a, IBV_QP_STATE), 0);
	CHECK_EQ(qp_state(tgt), IBV_QPS_ERR);
	/* Each handle holds the XRCD. */
	CHECK_EQ(ibv_close_xrcd(x), EBUSY);
	CHECK_EQ(ibv_destroy_qp(tgt), 0);
	CHECK_EQ(ibv_close_xrcd(x), EBUSY);
	/* The QP outlives its creator's handle: open it once more. */
	{
		struct ibv_qp *h2 = ibv_open_qp(ctx, &oa);

		CHECK(h2);
		CHECK_EQ(ibv_destroy_qp(h2), 0);
	}
	CHECK_EQ(ibv_destroy_qp(h), 0);
	CHECK_NULL_ERRNO(ibv_open_qp(ctx, &oa), EINVAL); /* gone */
	CHECK_EQ(ibv_close_xrcd(x), 0);
	CHECK_EQ(ibv_close_xrcd(other), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* INI QPs: a PD and a send CQ, no receive side; the kernel's INI
 * transitions (no responder attributes at RTR). */
SV_TEST(ini_qp)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr_ex ia;
	struct ibv_recv_wr rwr = { .wr_id = 2 }, *rbad;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	CHECK(pd && cq);
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_SEND;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = pd;
	ia.cap.max_send_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_wr = 8;
	CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EINVAL); /* no send CQ */
	ia.send_cq = cq;
	qp = ibv_create_qp_ex(ctx, &ia);
	CHECK(qp);
	CHECK_EQ(qp->qp_type, IBV_QPT_XRC_SEND);
	CHECK(!qp->recv_cq && !qp->srq && qp->send_cq == cq);
	CHECK_EQ(ia.cap.max_recv_wr, 0);
	CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	CHECK_EQ(to_init(qp), 0);
	rtr_attr(&a, 0x123);
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK | IBV_QP_MIN_RNR_TIMER), EINVAL);
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					       IBV_QP_SQ_PSN),
		 EINVAL);
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					       IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT |
					       IBV_QP_RNR_RETRY |
					       IBV_QP_MAX_QP_RD_ATOMIC),
		 0);
	CHECK_EQ(qp_state(qp), IBV_QPS_RTS);
	CHECK_EQ(ibv_destroy_cq(cq), EBUSY);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* The device's XRCD limit (at most SV_MAX_XRCD handles, fewer where the
 * daemon's descriptor budget shrinks it): ENOMEM past it, nothing kept;
 * closing one gives its room back. */
SV_TEST(xrcd_limit)
{
	struct ibv_context *ctx = eu_open();
	static struct ibv_xrcd *x[SV_MAX_XRCD + 1];
	int n = 0;

	while (n <= SV_MAX_XRCD && (x[n] = xrcd_open(ctx, -1, 0)))
		n++;
	CHECK(n > 0 && n <= SV_MAX_XRCD);
	CHECK_EQ(errno, ENOMEM);
	CHECK_EQ(ibv_close_xrcd(x[--n]), 0);
	x[n] = xrcd_open(ctx, -1, 0);
	CHECK(x[n]);
	n++;
	while (n)
		CHECK_EQ(ibv_close_xrcd(x[--n]), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* A process that exits holding an XRCD, an XRC SRQ and a TGT QP another
 * process opened: its objects go, the opened QP stays, the daemon lives. */
SV_TEST(teardown)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	char path[64];
	int fd = tmpfile_fd(path, sizeof(path)), sv[2];
	struct ibv_xrcd *x;
	struct ibv_qp *h;
	uint32_t qpn;
	pid_t pid;
	int st;

	sv_test_baseline(&base);
	ctx = eu_open();
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct ibv_context *c = eu_open();
		struct ibv_pd *pd = ibv_alloc_pd(c);
		struct ibv_cq *cq = ibv_create_cq(c, 4, NULL, NULL, 0);
		struct ibv_xrcd *cx = xrcd_open(c, fd, O_CREAT);
		struct ibv_qp *q = cx ? tgt_new(c, cx) : NULL;

		if (!q || !xsrq_new(c, pd, cx, cq))
			_exit(2);
		xsend(sv[1], &q->qp_num, sizeof(q->qp_num));
		xrecv(sv[1], &qpn, 1);
		_exit(0); /* everything still open */
	}
	xrecv(sv[0], &qpn, sizeof(qpn));
	x = xrcd_open(ctx, fd, 0);
	CHECK(x);
	h = tgt_open(ctx, x, qpn);
	CHECK(h);
	xsend(sv[0], &qpn, 1);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* Its ufile goes when the daemon sees its descriptors close; the
	 * TGT QP stays ours, and moves on our handle. */
	CHECK_EQ(to_init(h), 0);
	CHECK_EQ(qp_state(h), IBV_QPS_INIT);
	CHECK_EQ(ibv_destroy_qp(h), 0);
	CHECK_EQ(ibv_close_xrcd(x), 0);
	close(sv[0]);
	close(sv[1]);
	close(fd);
	unlink(path);
	CHECK_EQ(ibv_close_device(ctx), 0);
	/* The child's objects and ours: all gone, no descriptor left. */
	sv_test_wait_quiet(&base, 5000);
}


/* ------------------------------------------------------------ data -- */

/*
 * XRC moving data on one host: an INI QP connected to a TGT QP, XRC SRQs
 * in the TGT QP's domain each with its own CQ, one buffer under a PD.
 * ini, tgt and the SRQs may be in one process or in several (the cases
 * below say which); a fixture holds what one process made.
 */
#define XBUF 65536

struct xside {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *buf;
	struct ibv_cq *cq;	 /* INI: its send CQ; else the SRQs' */
	struct ibv_xrcd *x;
	struct ibv_srq *srq[2];
	uint32_t srqn[2];
	struct ibv_qp *qp;	 /* INI or TGT */
};

static void xside_mem(struct xside *s, struct ibv_context *ctx)
{
	memset(s, 0, sizeof(*s));
	s->ctx = ctx ? ctx : eu_open();
	s->pd = ibv_alloc_pd(s->ctx);
	CHECK(s->pd);
	CHECK(posix_memalign((void **)&s->buf, 4096, XBUF) == 0);
	memset(s->buf, 0, XBUF);
	s->mr = ibv_reg_mr(s->pd, s->buf, XBUF, EU_ACCESS);
	CHECK(s->mr);
	s->cq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	CHECK(s->cq);
}

/* Two XRC SRQs in domain x (this side's PD and CQ), receives posted. */
static void xside_srqs(struct xside *s, struct ibv_xrcd *x, int nrecv)
{
	s->x = x;
	for (int i = 0; i < 2; i++) {
		struct ibv_srq_init_attr_ex a;

		memset(&a, 0, sizeof(a));
		a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		a.srq_type = IBV_SRQT_XRC;
		a.pd = s->pd;
		a.xrcd = x;
		a.cq = s->cq;
		a.attr.max_wr = 32;
		a.attr.max_sge = 2;
		s->srq[i] = ibv_create_srq_ex(s->ctx, &a);
		CHECK(s->srq[i]);
		CHECK_EQ(ibv_get_srq_num(s->srq[i], &s->srqn[i]), 0);
		for (int k = 0; k < nrecv; k++) {
			/* SRQ i's receives: 4 KiB each, in its half. */
			struct ibv_sge g = {
				.addr = (uintptr_t)s->buf + 32768 * (uint32_t)i +
					4096 * (uint32_t)k,
				.length = 4096,
				.lkey = s->mr->lkey,
			};
			struct ibv_recv_wr wr = { .wr_id = (uint64_t)i << 8 | (uint64_t)k,
						  .sg_list = &g,
						  .num_sge = 1 },
					   *bad;

			CHECK_EQ(ibv_post_srq_recv(s->srq[i], &wr, &bad), 0);
		}
	}
}

static struct ibv_qp *ini_new(struct xside *s, int ex)
{
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_SEND;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = s->pd;
	ia.send_cq = s->cq;
	ia.cap.max_send_wr = 32;
	ia.cap.max_send_sge = 2;
	ia.cap.max_inline_data = 64;
	if (ex) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = IBV_QP_EX_WITH_SEND |
				    IBV_QP_EX_WITH_SEND_WITH_IMM |
				    IBV_QP_EX_WITH_RDMA_WRITE |
				    IBV_QP_EX_WITH_RDMA_READ;
	}
	qp = ibv_create_qp_ex(s->ctx, &ia);
	CHECK(qp);
	return qp;
}

/* RESET -> RTS towards dqpn: an INI QP with RC's requester attributes, a
 * TGT QP with RC's responder ones (PSNs 0x100 both ways). */
static void xconnect(struct ibv_qp *qp, uint32_t dqpn)
{
	int tgt = qp->qp_type == IBV_QPT_XRC_RECV;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
	rtr_attr(&a, dqpn);
	a.rq_psn = 0x100;
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK | (tgt ? IBV_QP_MAX_DEST_RD_ATOMIC |
								   IBV_QP_MIN_RNR_TIMER :
							   0)),
		 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 16;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					       IBV_QP_SQ_PSN |
					       (tgt ? 0 : IBV_QP_RETRY_CNT |
							       IBV_QP_RNR_RETRY |
							       IBV_QP_MAX_QP_RD_ATOMIC)),
		 0);
}

/* One signalled WR on INI qp naming SRQ srqn (ibv_post_send's way). */
static int xpost(struct ibv_qp *qp, uint32_t lkey, uint64_t id,
		 enum ibv_wr_opcode op, void *laddr, uint32_t len,
		 uint32_t srqn, uint64_t raddr, uint32_t rkey, uint64_t add,
		 uint64_t swap)
{
	struct ibv_sge g = { .addr = (uintptr_t)laddr, .length = len,
			     .lkey = lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &g;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(0xabc00000u | (uint32_t)id);
	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* The receive completion of a SEND (or WRITE with immediate) from ini at
 * tgt, in the SRQ's CQ: the TGT QP's number, the INI QP's as source. */
static void expect_recv(struct ibv_cq *cq, uint64_t wr_id,
			enum ibv_wc_opcode opc, uint32_t len, uint32_t tgt,
			uint32_t ini, int imm, uint32_t imm_id)
{
	struct ibv_wc wc;

	EXPECT_WC(cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, wr_id);
	CHECK_EQ(wc.opcode, opc);
	CHECK_EQ(wc.byte_len, len);
	CHECK_EQ(wc.qp_num, tgt);
	CHECK_EQ(wc.src_qp, ini);
	CHECK_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM), !!imm);
	if (imm)
		CHECK_EQ(ntohl(wc.imm_data), 0xabc00000u | imm_id);
}

static void expect_send(struct ibv_cq *cq, uint64_t wr_id,
			enum ibv_wc_status st)
{
	struct ibv_wc wc;

	EXPECT_WC(cq, &wc, st);
	CHECK_EQ(wc.wr_id, wr_id);
}

/* Nothing (more) in cq. */
static void expect_none(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0);
}

/* SENDs land in the SRQ each names, its completion in that SRQ's CQ
 * (wc.qp_num the TGT QP's, src_qp the INI QP's); a SEND of several MTUs,
 * with immediate; RDMA WRITE, WRITE with immediate (a receive of the SRQ
 * named), READ, both atomics at the TGT side's memory; the INI's
 * completions in its send CQ. */
SV_TEST(data_one_process)
{
	struct xside t, i;
	struct ibv_cq *cq2;
	struct ibv_qp_init_attr_ex ia;
	uint64_t *word;

	xside_mem(&t, NULL);
	xside_mem(&i, t.ctx);
	t.x = xrcd_open(t.ctx, -1, 0);
	CHECK(t.x);
	xside_srqs(&t, t.x, 8);
	/* SRQ 1 completes into a CQ of its own: the SRQ's, not a QP's. */
	cq2 = ibv_create_cq(t.ctx, 16, NULL, NULL, 0);
	CHECK(cq2);
	CHECK_EQ(ibv_destroy_srq(t.srq[1]), 0);
	{
		struct ibv_srq_init_attr_ex a;
		struct ibv_sge g = { .addr = (uintptr_t)t.buf + 32768,
				     .length = 4096, .lkey = t.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 0x100, .sg_list = &g,
					  .num_sge = 1 },
				   *bad;

		memset(&a, 0, sizeof(a));
		a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		a.srq_type = IBV_SRQT_XRC;
		a.pd = t.pd;
		a.xrcd = t.x;
		a.cq = cq2;
		a.attr.max_wr = 8;
		a.attr.max_sge = 1;
		t.srq[1] = ibv_create_srq_ex(t.ctx, &a);
		CHECK(t.srq[1]);
		CHECK_EQ(ibv_get_srq_num(t.srq[1], &t.srqn[1]), 0);
		CHECK_EQ(ibv_post_srq_recv(t.srq[1], &wr, &bad), 0);
		wr.wr_id = 0x101;
		g.addr += 4096;
		CHECK_EQ(ibv_post_srq_recv(t.srq[1], &wr, &bad), 0);
	}
	t.qp = tgt_new(t.ctx, t.x);
	CHECK(t.qp);
	memset(&ia, 0, sizeof(ia));
	i.qp = ini_new(&i, 0);
	xconnect(t.qp, i.qp->qp_num);
	xconnect(i.qp, t.qp->qp_num);

	/* SEND with immediate to SRQ 1: its CQ, not SRQ 0's. */
	eu_pattern((uint8_t *)i.buf, 3000, 1);
	CHECK_EQ(xpost(i.qp, i.mr->lkey, 1, IBV_WR_SEND_WITH_IMM, i.buf, 100,
		       t.srqn[1], 0, 0, 0, 0),
		 0);
	expect_send(i.cq, 1, IBV_WC_SUCCESS);
	expect_recv(cq2, 0x100, IBV_WC_RECV, 100, t.qp->qp_num, i.qp->qp_num,
		    1, 1);
	CHECK(!memcmp(t.buf + 32768, i.buf, 100));
	expect_none(t.cq);
	/* A SEND of three MTUs to SRQ 0. */
	CHECK_EQ(xpost(i.qp, i.mr->lkey, 2, IBV_WR_SEND, i.buf, 3000,
		       t.srqn[0], 0, 0, 0, 0),
		 0);
	expect_send(i.cq, 2, IBV_WC_SUCCESS);
	expect_recv(t.cq, 0, IBV_WC_RECV, 3000, t.qp->qp_num, i.qp->qp_num,
		    0, 0);
	CHECK(!memcmp(t.buf, i.buf, 3000));
	expect_none(cq2);
	/* RDMA WRITE: no receive taken. */
	eu_pattern((uint8_t *)i.buf + 4096, 5000, 2);
	CHECK_EQ(xpost(i.qp, i.mr->lkey, 3, IBV_WR_RDMA_WRITE, i.buf + 4096,
		       5000, t.srqn[0], (uintptr_t)t.buf + 16384, t.mr->rkey,
		       0, 0),
		 0);
	expect_send(i.cq, 3, IBV_WC_SUCCESS);
	CHECK(!memcmp(t.buf + 16384, i.buf + 4096, 5000));
	expect_none(t.cq);
	/* WRITE with immediate: a receive of the SRQ named, byte_len its
	 * length. */
	CHECK_EQ(xpost(i.qp, i.mr->lkey, 4, IBV_WR_RDMA_WRITE_WITH_IMM,
		       i.buf + 4096, 64, t.srqn[1], (uintptr_t)t.buf + 24576,
		       t.mr->rkey, 0, 0),
		 0);
	expect_send(i.cq, 4, IBV_WC_SUCCESS);
	expect_recv(cq2, 0x101, IBV_WC_RECV_RDMA_WITH_IMM, 64, t.qp->qp_num,
		    i.qp->qp_num, 1, 4);
	CHECK(!memcmp(t.buf + 24576, i.buf + 4096, 64));
	/* READ back what was written. */
	CHECK_EQ(xpost(i.qp, i.mr->lkey, 5, IBV_WR_RDMA_READ, i.buf + 16384,
		       5000, t.srqn[0], (uintptr_t)t.buf + 16384, t.mr->rkey,
		       0, 0),
		 0);
	expect_send(i.cq, 5, IBV_WC_SUCCESS);
	CHECK(!memcmp(i.buf + 16384, i.buf + 4096, 5000));
	/* Atomics on an aligned word of the TGT side's memory. */
	word = (uint64_t *)(t.buf + 30000 - 30000 % 8);
	*word = 40;
	CHECK_EQ(xpost(i.qp, i.mr->lkey, 6, IBV_WR_ATOMIC_FETCH_AND_ADD,
		       i.buf + 8192, 8, t.srqn[0], (uintptr_t)word, t.mr->rkey,
		       2, 0),
		 0);
	expect_send(i.cq, 6, IBV_WC_SUCCESS);
	CHECK_EQ(*(uint64_t *)(i.buf + 8192), 40);
	CHECK_EQ(xpost(i.qp, i.mr->lkey, 7, IBV_WR_ATOMIC_CMP_AND_SWP,
		       i.buf + 8192, 8, t.srqn[1], (uintptr_t)word, t.mr->rkey,
		       42, 7),
		 0);
	expect_send(i.cq, 7, IBV_WC_SUCCESS);
	CHECK_EQ(*(uint64_t *)(i.buf + 8192), 42);
	CHECK_EQ(*word, 7);
	expect_none(t.cq);
	expect_none(cq2);
	/* ATOMIC WRITE is RC's alone (as rxe): refused at post. */
	CHECK_EQ(xpost(i.qp, i.mr->lkey, 8, IBV_WR_ATOMIC_WRITE, i.buf, 8,
		       t.srqn[0], (uintptr_t)word, t.mr->rkey, 0, 0),
		 EINVAL);

	CHECK_EQ(ibv_destroy_qp(i.qp), 0);
	CHECK_EQ(ibv_destroy_qp(t.qp), 0);
	for (int k = 0; k < 2; k++)
		CHECK_EQ(ibv_destroy_srq(t.srq[k]), 0);
	CHECK_EQ(ibv_close_xrcd(t.x), 0);
	CHECK_EQ(ibv_destroy_cq(cq2), 0);
	CHECK_EQ(ibv_close_device(t.ctx), 0);
}

/* The extended API: ibv_wr_set_xrc_srqn names the SRQ of the WR being
 * built; on a QP that is not an INI QP it fails the batch (EINVAL). */
SV_TEST(data_wr_api)
{
	struct xside t, i;
	struct ibv_qp_ex *qx;
	struct ibv_wc wc;

	xside_mem(&t, NULL);
	xside_mem(&i, t.ctx);
	t.x = xrcd_open(t.ctx, -1, 0);
	CHECK(t.x);
	xside_srqs(&t, t.x, 4);
	t.qp = tgt_new(t.ctx, t.x);
	CHECK(t.qp);
	i.qp = ini_new(&i, 1);
	qx = ibv_qp_to_qp_ex(i.qp);
	CHECK(qx);
	xconnect(t.qp, i.qp->qp_num);
	xconnect(i.qp, t.qp->qp_num);
	memcpy(i.buf, "xrc over wr_*", 14);
	ibv_wr_start(qx);
	qx->wr_id = 11;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qx, htonl(0xabc00000u | 11));
	ibv_wr_set_xrc_srqn(qx, t.srqn[1]);
	ibv_wr_set_sge(qx, i.mr->lkey, (uintptr_t)i.buf, 14);
	qx->wr_id = 12;
	ibv_wr_rdma_write(qx, t.mr->rkey, (uintptr_t)t.buf + 20000);
	ibv_wr_set_xrc_srqn(qx, t.srqn[0]);
	ibv_wr_set_sge(qx, i.mr->lkey, (uintptr_t)i.buf, 14);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	expect_send(i.cq, 11, IBV_WC_SUCCESS);
	expect_send(i.cq, 12, IBV_WC_SUCCESS);
	expect_recv(t.cq, 1 << 8, IBV_WC_RECV, 14, t.qp->qp_num, i.qp->qp_num,
		    1, 11);
	CHECK(!memcmp(t.buf + 32768, "xrc over wr_*", 14));
	CHECK(!memcmp(t.buf + 20000, "xrc over wr_*", 14));
	CHECK_EQ(ibv_poll_cq(t.cq, 1, &wc), 0);
	{
		/* An RC QP has no SRQ number to set. */
		struct ibv_cq *cq = ibv_create_cq(t.ctx, 4, NULL, NULL, 0);
		struct ibv_qp_init_attr_ex ia;
		struct ibv_qp *rc;
		struct ibv_qp_ex *rx;
		struct ibv_qp_attr a;

		memset(&ia, 0, sizeof(ia));
		ia.qp_type = IBV_QPT_RC;
		ia.comp_mask = IBV_QP_INIT_ATTR_PD |
			       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.pd = t.pd;
		ia.send_cq = ia.recv_cq = cq;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
		rc = ibv_create_qp_ex(t.ctx, &ia);
		CHECK(rc);
		rx = ibv_qp_to_qp_ex(rc);
		CHECK(rx);
		CHECK_EQ(to_init(rc), 0);
		rtr_attr(&a, rc->qp_num);
		CHECK_EQ(ibv_modify_qp(rc, &a, RTR_MASK |
						     IBV_QP_MAX_DEST_RD_ATOMIC |
						     IBV_QP_MIN_RNR_TIMER),
			 0);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		CHECK_EQ(ibv_modify_qp(rc, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
						     IBV_QP_SQ_PSN |
						     IBV_QP_RETRY_CNT |
						     IBV_QP_RNR_RETRY |
						     IBV_QP_MAX_QP_RD_ATOMIC),
			 0);
		ibv_wr_start(rx);
		ibv_wr_send(rx);
		ibv_wr_set_xrc_srqn(rx, t.srqn[0]);
		ibv_wr_set_sge(rx, t.mr->lkey, (uintptr_t)t.buf, 4);
		CHECK_EQ(ibv_wr_complete(rx), EINVAL);
		CHECK_EQ(ibv_destroy_qp(rc), 0);
		CHECK_EQ(ibv_destroy_cq(cq), 0);
	}
	CHECK_EQ(ibv_destroy_qp(i.qp), 0);
	CHECK_EQ(ibv_destroy_qp(t.qp), 0);
	for (int k = 0; k < 2; k++)
		CHECK_EQ(ibv_destroy_srq(t.srq[k]), 0);
	CHECK_EQ(ibv_close_xrcd(t.x), 0);
	CHECK_EQ(ibv_close_device(t.ctx), 0);
}

/*
 * What the responder refuses, each on a fresh pair (the refusal ends
 * both QPs): an SRQ number no SRQ has, an SRQ of another XRC domain
 * (invalid requests: IBV_WC_REM_INV_REQ_ERR at the INI, the TGT QP in
 * ERR), an rkey of a PD that is not the named SRQ's (XRC checks keys
 * against the SRQ's PD: IBV_WC_REM_ACCESS_ERR) -- and the same rkey
 * accepted when the SRQ named is of its PD.
 */
SV_TEST(data_refused)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_xrcd *other = xrcd_open(ctx, -1, 0);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_cq *ocq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_srq *osrq, *psrq;
	uint32_t osrqn, psrqn;

	CHECK(other && pd2 && ocq);
	osrq = xsrq_new(ctx, pd2, other, ocq);
	CHECK(osrq);
	CHECK_EQ(ibv_get_srq_num(osrq, &osrqn), 0);
	for (int round = 0; round < 4; round++) {
		struct xside t, i;
		enum ibv_wc_status want = IBV_WC_REM_INV_REQ_ERR;
		uint32_t srqn;
		enum ibv_wr_opcode op = IBV_WR_SEND;

		xside_mem(&t, ctx);
		xside_mem(&i, ctx);
		t.x = xrcd_open(ctx, -1, 0);
		CHECK(t.x);
		xside_srqs(&t, t.x, 2);
		/* An SRQ of the TGT's domain on another PD than t.mr's. */
		psrq = xsrq_new(ctx, pd2, t.x, t.cq);
		CHECK(psrq);
		CHECK_EQ(ibv_get_srq_num(psrq, &psrqn), 0);
		t.qp = tgt_new(ctx, t.x);
		CHECK(t.qp);
		i.qp = ini_new(&i, 0);
		xconnect(t.qp, i.qp->qp_num);
		xconnect(i.qp, t.qp->qp_num);
		switch (round) {
		case 0: /* no such SRQ (numbers go up from 1, round robin) */
			srqn = 0xfffffe;
			break;
		case 1: /* an SRQ of another domain */
			srqn = osrqn;
			break;
		case 2: /* the rkey's PD is not the SRQ's */
			srqn = psrqn;
			op = IBV_WR_RDMA_WRITE;
			want = IBV_WC_REM_ACCESS_ERR;
			break;
		default: /* ... and is, naming another SRQ */
			srqn = t.srqn[1];
			op = IBV_WR_RDMA_WRITE;
			want = IBV_WC_SUCCESS;
			break;
		}
		memcpy(i.buf, "refused?", 8);
		CHECK_EQ(xpost(i.qp, i.mr->lkey, 1, op, i.buf, 8, srqn,
			       (uintptr_t)t.buf + 40000, t.mr->rkey, 0, 0),
			 0);
		expect_send(i.cq, 1, want);
		if (want == IBV_WC_SUCCESS) {
			CHECK(!memcmp(t.buf + 40000, "refused?", 8));
			CHECK_EQ(qp_state(t.qp), IBV_QPS_RTS);
		} else {
			CHECK(memcmp(t.buf + 40000, "refused?", 8));
			CHECK_EQ(qp_state(t.qp), IBV_QPS_ERR);
			CHECK_EQ(qp_state(i.qp), IBV_QPS_ERR);
		}
		expect_none(t.cq);
		expect_none(ocq);
		CHECK_EQ(ibv_destroy_qp(i.qp), 0);
		CHECK_EQ(ibv_destroy_qp(t.qp), 0);
		CHECK_EQ(ibv_destroy_srq(psrq), 0);
		for (int k = 0; k < 2; k++)
			CHECK_EQ(ibv_destroy_srq(t.srq[k]), 0);
		CHECK_EQ(ibv_close_xrcd(t.x), 0);
		CHECK_EQ(ibv_dereg_mr(t.mr), 0);
		CHECK_EQ(ibv_dereg_mr(i.mr), 0);
		CHECK_EQ(ibv_destroy_cq(t.cq), 0);
		CHECK_EQ(ibv_destroy_cq(i.cq), 0);
		CHECK_EQ(ibv_dealloc_pd(t.pd), 0);
		CHECK_EQ(ibv_dealloc_pd(i.pd), 0);
		free(t.buf);
		free(i.buf);
	}
	CHECK_EQ(ibv_destroy_srq(osrq), 0);
	CHECK_EQ(ibv_close_xrcd(other), 0);
	CHECK_EQ(ibv_destroy_cq(ocq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/*
 * Three processes, one domain (a file): the TGT QP and the SRQs in one
 * child, the INI QP in the test, and -- second round -- the SRQs in a
 * second child while the first keeps the TGT QP.  SENDs land in the
 * SRQ's process and complete into its CQ; WRITEs and READs reach the
 * memory of the SRQ's PD.  The TGT QP's process need not be the SRQ's.
 */
struct xinfo {
	uint32_t tgt_qpn;
	uint32_t srqn[2];
	uint32_t rkey;
	uint64_t addr;
};

struct xpeers {
	uint32_t ini_qpn, tgt_qpn;
};

/* What a child does with the TGT QP. */
enum {
	XT_NONE,
	XT_MAKE,      /* makes it and connects it */
	XT_MAKE_ONLY, /* makes it; another process connects it */
	XT_OPEN,      /* opens the one the test names and connects it */
};

/* A child's part: what it makes (the TGT QP: tgt, XT_*; the SRQs: srqs)
 * in the domain of the file at path, told on s; with the SRQs it checks
 * the two SENDs the test makes and says so; it lives until the test is
 * done. */
static void xchild(const char *path, int s, int tgt, int srqs)
{
	struct xside c;
	int fd;
	struct xinfo info = { 0 };
	struct xpeers pr;
	char go = 1;

	/* Its turn (the test's round), however long the rounds before take:
	 * no timeout; the test gone, the socket closes. */
	if (read(s, &go, 1) != 1)
		_exit(6);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		_exit(2);
	xside_mem(&c, NULL);
	c.x = xrcd_open(c.ctx, fd, O_CREAT);
	if (!c.x)
		_exit(3);
	if (srqs) {
		xside_srqs(&c, c.x, 4);
		info.srqn[0] = c.srqn[0];
		info.srqn[1] = c.srqn[1];
		info.rkey = c.mr->rkey;
		info.addr = (uintptr_t)c.buf;
	}
	if (tgt == XT_MAKE || tgt == XT_MAKE_ONLY) {
		c.qp = tgt_new(c.ctx, c.x);
		if (!c.qp)
			_exit(4);
		info.tgt_qpn = c.qp->qp_num;
	}
	xsend(s, &info, sizeof(info));
	xrecv(s, &pr, sizeof(pr));
	if (tgt == XT_OPEN) {
		c.qp = tgt_open(c.ctx, c.x, pr.tgt_qpn);
		if (!c.qp)
			_exit(7);
	}
	if (tgt == XT_MAKE || tgt == XT_OPEN)
		xconnect(c.qp, pr.ini_qpn);
	xsend(s, &go, 1);
	if (srqs) {
		uint8_t want[3000];

		expect_recv(c.cq, 1 << 8, IBV_WC_RECV, 2000, pr.tgt_qpn,
			    pr.ini_qpn, 1, 1);
		expect_recv(c.cq, 0, IBV_WC_RECV, 3000, pr.tgt_qpn, pr.ini_qpn,
			    0, 0);
		eu_pattern(want, sizeof(want), 3);
		if (memcmp(c.buf + 32768, want, 2000) ||
		    memcmp(c.buf, want, 3000))
			_exit(5);
		expect_none(c.cq);
		xsend(s, &go, 1);
	}
	xrecv(s, &go, 1); /* the test is done with our memory */
	_exit(0);
}

static pid_t xchild_start(const char *path, int *s, int tgt, int srqs)
{
	int sv[2];
	pid_t pid;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		xchild(path, sv[1], tgt, srqs);
	}
	close(sv[1]);
	*s = sv[0];
	return pid;
}

static void xchild_end(pid_t pid, int s)
{
	char go = 1;
	int st;

	xsend(s, &go, 1);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	close(s);
}

SV_TEST_T(data_processes, 60)
{
	char path[64];
	int fd = tmpfile_fd(path, sizeof(path)), cs[5];
	pid_t cp[5];

	close(fd);
	/* Every child is forked now, while this process has no thread yet:
	 * a fork beside the engine's threads is the fork tests' business,
	 * and under ASan a child forked while another thread is inside the
	 * sanitizer's allocator can hang in its first malloc. */
	cp[0] = xchild_start(path, &cs[0], XT_MAKE, 1);
	cp[1] = xchild_start(path, &cs[1], XT_MAKE, 0);
	cp[2] = xchild_start(path, &cs[2], XT_NONE, 1);
	cp[3] = xchild_start(path, &cs[3], XT_MAKE_ONLY, 0);
	cp[4] = xchild_start(path, &cs[4], XT_OPEN, 1);
	for (int round = 0; round < 3; round++) {
		/* Round 0: one child has the TGT QP and the SRQs; round 1:
		 * one the TGT QP, another the SRQs; round 2: one makes the
		 * TGT QP, another opens it, brings it to RTR and has the
		 * SRQs (the maker's engine answers, to the peer that the
		 * other's modify named). */
		int nc = round ? 2 : 1, *s = cs + (round ? 2 * round - 1 : 0);
		pid_t *pid = cp + (round ? 2 * round - 1 : 0);
		struct xinfo info[2], srqs, tgt;
		struct xside i;
		struct xpeers pr;
		char go = 1;

		for (int k = 0; k < nc; k++)
			xsend(s[k], &go, 1); /* its turn */
		for (int k = 0; k < nc; k++)
			xrecv(s[k], &info[k], sizeof(info[k]));
		tgt = info[0];
		srqs = info[nc - 1];
		xside_mem(&i, NULL);
		i.qp = ini_new(&i, 0);
		pr = (struct xpeers){ .ini_qpn = i.qp->qp_num,
				      .tgt_qpn = tgt.tgt_qpn };
		for (int k = 0; k < nc; k++) {
			xsend(s[k], &pr, sizeof(pr));
			xrecv(s[k], &go, 1);
		}
		xconnect(i.qp, tgt.tgt_qpn);
		eu_pattern((uint8_t *)i.buf, 3000, 3);
		CHECK_EQ(xpost(i.qp, i.mr->lkey, 1, IBV_WR_SEND_WITH_IMM, i.buf,
			       2000, srqs.srqn[1], 0, 0, 0, 0),
			 0);
		CHECK_EQ(xpost(i.qp, i.mr->lkey, 2, IBV_WR_SEND, i.buf, 3000,
			       srqs.srqn[0], 0, 0, 0, 0),
			 0);
		expect_send(i.cq, 1, IBV_WC_SUCCESS);
		expect_send(i.cq, 2, IBV_WC_SUCCESS);
		/* The SRQs' process saw both, in their CQ. */
		xrecv(s[nc - 1], &go, 1);
		/* Its memory, under its PD's key, through the SRQ named. */
		eu_pattern((uint8_t *)i.buf + 8192, 6000, 4);
		CHECK_EQ(xpost(i.qp, i.mr->lkey, 3, IBV_WR_RDMA_WRITE,
			       i.buf + 8192, 6000, srqs.srqn[1],
			       srqs.addr + 16384, srqs.rkey, 0, 0),
			 0);
		CHECK_EQ(xpost(i.qp, i.mr->lkey, 4, IBV_WR_RDMA_READ,
			       i.buf + 24576, 6000, srqs.srqn[0],
			       srqs.addr + 16384, srqs.rkey, 0, 0),
			 0);
		expect_send(i.cq, 3, IBV_WC_SUCCESS);
		expect_send(i.cq, 4, IBV_WC_SUCCESS);
		CHECK(!memcmp(i.buf + 24576, i.buf + 8192, 6000));
		for (int k = 0; k < nc; k++)
			xchild_end(pid[k], s[k]);
		CHECK_EQ(ibv_destroy_qp(i.qp), 0);
		CHECK_EQ(ibv_close_device(i.ctx), 0);
	}
	unlink(path);
}

/*
 * A TGT QP outlives its creator's process, and its creator's handle: a
 * process that opened it serves it from then on (the kernel's QP lives
 * in the device).  The maker makes and connects the TGT QP; the opener
 * opens it (and never modifies it) and has the SRQs.  After a SEND, the
 * maker exits with its handle still open (round 0) or destroys its
 * handle and lives on (round 1); the INI QP's next SEND, WRITE and READ
 * complete, served by the opener.
 */
enum { TK_EXIT = 'x', TK_DESTROY = 'd' };

static void tmaker(const char *path, int s)
{
	struct xside c;
	struct xpeers pr;
	char how;
	int fd;

	if (read(s, &how, 1) != 1) /* its turn */
		_exit(6);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		_exit(2);
	xside_mem(&c, NULL);
	c.x = xrcd_open(c.ctx, fd, O_CREAT);
	c.qp = c.x ? tgt_new(c.ctx, c.x) : NULL;
	if (!c.qp)
		_exit(3);
	xsend(s, &c.qp->qp_num, sizeof(c.qp->qp_num));
	xrecv(s, &pr, sizeof(pr));
	xconnect(c.qp, pr.ini_qpn);
	xsend(s, &how, 1);
	if (read(s, &how, 1) != 1)
		_exit(7);
	if (how == TK_EXIT)
		_exit(0); /* with the QP, the XRCD and the context open */
	if (ibv_destroy_qp(c.qp))
		_exit(8);
	xsend(s, &how, 1);
	if (read(s, &how, 1) != 1) /* the test is done */
		_exit(9);
	_exit(0);
}

static void topener(const char *path, int s)
{
	struct xside c;
	struct xinfo info = { 0 };
	struct xpeers pr;
	uint8_t want[3000];
	char go;
	int fd;

	if (read(s, &go, 1) != 1)
		_exit(6);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		_exit(2);
	xrecv(s, &pr, sizeof(pr));
	xside_mem(&c, NULL);
	c.x = xrcd_open(c.ctx, fd, O_CREAT);
	if (!c.x)
		_exit(3);
	xside_srqs(&c, c.x, 4);
	c.qp = tgt_open(c.ctx, c.x, pr.tgt_qpn);
	if (!c.qp)
		_exit(4);
	info.srqn[0] = c.srqn[0];
	info.srqn[1] = c.srqn[1];
	info.rkey = c.mr->rkey;
	info.addr = (uintptr_t)c.buf;
	xsend(s, &info, sizeof(info));
	eu_pattern(want, sizeof(want), 3);
	/* Before the maker goes, then after. */
	expect_recv(c.cq, 0, IBV_WC_RECV, 2000, pr.tgt_qpn, pr.ini_qpn, 0, 0);
	if (memcmp(c.buf, want, 2000))
		_exit(5);
	xsend(s, &go, 1);
	expect_recv(c.cq, 1 << 8, IBV_WC_RECV, 3000, pr.tgt_qpn, pr.ini_qpn,
		    0, 0);
	if (memcmp(c.buf + 32768, want, 3000))
		_exit(5);
	expect_none(c.cq);
	xsend(s, &go, 1);
	if (read(s, &go, 1) != 1) /* the test is done with our memory */
		_exit(9);
	if (ibv_destroy_qp(c.qp))
		_exit(10);
	_exit(0);
}

static pid_t tchild_start(void (*fn)(const char *, int), const char *path,
			  int *s)
{
	int sv[2];
	pid_t pid;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		fn(path, sv[1]);
	}
	close(sv[1]);
	*s = sv[0];
	return pid;
}

SV_TEST_T(tgt_takeover, 60)
{
	char path[64];
	int fd = tmpfile_fd(path, sizeof(path)), ms[2], os[2];
	pid_t mp[2], op[2];

	close(fd);
	/* Forked while this process has no thread (data_processes says
	 * why). */
	for (int r = 0; r < 2; r++) {
		mp[r] = tchild_start(tmaker, path, &ms[r]);
		op[r] = tchild_start(topener, path, &os[r]);
	}
	for (int r = 0; r < 2; r++) {
		char how = r ? TK_DESTROY : TK_EXIT, go = 1;
		struct xpeers pr;
		struct xinfo o;
		struct xside i;
		uint32_t tgt;
		int st;

		xsend(ms[r], &how, 1);
		xrecv(ms[r], &tgt, sizeof(tgt));
		xside_mem(&i, NULL);
		i.qp = ini_new(&i, 0);
		pr = (struct xpeers){ .ini_qpn = i.qp->qp_num, .tgt_qpn = tgt };
		xsend(ms[r], &pr, sizeof(pr));
		xrecv(ms[r], &how, 1); /* connected */
		xsend(os[r], &go, 1);
		xsend(os[r], &pr, sizeof(pr));
		xrecv(os[r], &o, sizeof(o));
		xconnect(i.qp, tgt);
		eu_pattern((uint8_t *)i.buf, 3000, 3);
		CHECK_EQ(xpost(i.qp, i.mr->lkey, 1, IBV_WR_SEND, i.buf, 2000,
			       o.srqn[0], 0, 0, 0, 0),
			 0);
		expect_send(i.cq, 1, IBV_WC_SUCCESS);
		xrecv(os[r], &go, 1);
		/* The maker's handle goes. */
		xsend(ms[r], &how, 1);
		if (how == TK_EXIT) {
			CHECK_EQ(waitpid(mp[r], &st, 0), mp[r]);
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		} else {
			xrecv(ms[r], &how, 1);
		}
		CHECK_EQ(xpost(i.qp, i.mr->lkey, 2, IBV_WR_SEND, i.buf, 3000,
			       o.srqn[1], 0, 0, 0, 0),
			 0);
		expect_send(i.cq, 2, IBV_WC_SUCCESS);
		xrecv(os[r], &go, 1); /* it took the SEND */
		eu_pattern((uint8_t *)i.buf + 8192, 6000, 4 + r);
		CHECK_EQ(xpost(i.qp, i.mr->lkey, 3, IBV_WR_RDMA_WRITE,
			       i.buf + 8192, 6000, o.srqn[1], o.addr + 16384,
			       o.rkey, 0, 0),
			 0);
		CHECK_EQ(xpost(i.qp, i.mr->lkey, 4, IBV_WR_RDMA_READ,
			       i.buf + 24576, 6000, o.srqn[0], o.addr + 16384,
			       o.rkey, 0, 0),
			 0);
		expect_send(i.cq, 3, IBV_WC_SUCCESS);
		expect_send(i.cq, 4, IBV_WC_SUCCESS);
		CHECK(!memcmp(i.buf + 24576, i.buf + 8192, 6000));
		CHECK_EQ(qp_state(i.qp), IBV_QPS_RTS);
		if (how != TK_EXIT)
			xchild_end(mp[r], ms[r]);
		else
			close(ms[r]);
		xchild_end(op[r], os[r]);
		CHECK_EQ(ibv_destroy_qp(i.qp), 0);
		CHECK_EQ(ibv_close_device(i.ctx), 0);
	}
	unlink(path);
}

/* One process, two contexts: the TGT QP made in one, opened in the other
 * (with the SRQs and the INI QP).  The first context closes with the QP
 * in it: the other context's handle serves on. */
SV_TEST(tgt_context_closes)
{
	char path[64];
	int fd = tmpfile_fd(path, sizeof(path));
	struct ibv_context *c1 = eu_open();
	struct ibv_xrcd *x1 = xrcd_open(c1, fd, O_CREAT);
	struct ibv_qp *tgt = x1 ? tgt_new(c1, x1) : NULL;
	uint8_t want[3000];
	struct xside i;

	CHECK(tgt);
	xside_mem(&i, NULL);
	i.x = xrcd_open(i.ctx, fd, O_CREAT);
	CHECK(i.x);
	xside_srqs(&i, i.x, 4);
	i.qp = tgt_open(i.ctx, i.x, tgt->qp_num);
	CHECK(i.qp);
	{
		/* The INI QP completes into a CQ of its own. */
		struct ibv_cq *rcq = i.cq, *scq = ibv_create_cq(i.ctx, 16, NULL,
								 NULL, 0);
		struct ibv_qp *ini;
		uint32_t tqpn = tgt->qp_num;

		CHECK(scq);
		i.cq = scq;
		ini = ini_new(&i, 0);
		i.cq = rcq;

		xconnect(ini, tqpn);
		xconnect(i.qp, ini->qp_num); /* through the opened handle */
		eu_pattern(want, sizeof(want), 3);
		memcpy(i.buf + 49152, want, sizeof(want));
		CHECK_EQ(xpost(ini, i.mr->lkey, 1, IBV_WR_SEND, i.buf + 49152,
			       2000, i.srqn[0], 0, 0, 0, 0),
			 0);
		expect_recv(i.cq, 0, IBV_WC_RECV, 2000, tqpn, ini->qp_num, 0, 0);
		expect_send(scq, 1, IBV_WC_SUCCESS);
		/* The creator's context goes, its handle still open. */
		CHECK_EQ(ibv_close_device(c1), 0);
		CHECK_EQ(xpost(ini, i.mr->lkey, 2, IBV_WR_SEND, i.buf + 49152,
			       3000, i.srqn[1], 0, 0, 0, 0),
			 0);
		expect_recv(i.cq, 1 << 8, IBV_WC_RECV, 3000, tqpn, ini->qp_num,
			    0, 0);
		expect_send(scq, 2, IBV_WC_SUCCESS);
		CHECK(!memcmp(i.buf, want, 2000));
		CHECK(!memcmp(i.buf + 32768, want, 3000));
		CHECK_EQ(ibv_destroy_qp(ini), 0);
		CHECK_EQ(ibv_destroy_cq(scq), 0);
	}
	CHECK_EQ(ibv_destroy_qp(i.qp), 0);
	for (int k = 0; k < 2; k++)
		CHECK_EQ(ibv_destroy_srq(i.srq[k]), 0);
	CHECK_EQ(ibv_close_xrcd(i.x), 0);
	CHECK_EQ(ibv_close_device(i.ctx), 0);
	close(fd);
	unlink(path);
}

/* The next async event of ctx within 20 s: its type and QP (acked). */
static int next_qp_event(struct ibv_context *ctx, struct ibv_qp **qp)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int type;

	if (poll(&p, 1, 20000) != 1 || ibv_get_async_event(ctx, &ev))
		return -1;
	type = (int)ev.event_type;
	*qp = ev.element.qp;
	ibv_ack_async_event(&ev);
	return type;
}

/* The maker of tgt_events_every_handle: its TGT QP to RTR (not RTS: the
 * first request raises COMM_EST), then its own handle's event. */
static void emaker(const char *path, int s)
{
	struct ibv_context *ctx;
	struct ibv_xrcd *x;
	struct ibv_qp *tgt, *got = NULL;
	struct ibv_qp_attr a;
	uint32_t ini;
	char ok;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		_exit(2);
	ctx = eu_open();
	x = xrcd_open(ctx, fd, O_CREAT);
	tgt = x ? tgt_new(ctx, x) : NULL;
	if (!tgt || to_init(tgt))
		_exit(3);
	xsend(s, &tgt->qp_num, sizeof(tgt->qp_num));
	xrecv(s, &ini, sizeof(ini));
	rtr_attr(&a, ini);
	a.rq_psn = 0x100;
	if (ibv_modify_qp(tgt, &a, RTR_MASK | IBV_QP_MAX_DEST_RD_ATOMIC |
					   IBV_QP_MIN_RNR_TIMER))
		_exit(4);
	xsend(s, &ok, 1);
	ok = next_qp_event(ctx, &got) == IBV_EVENT_COMM_EST && got == tgt;
	xsend(s, &ok, 1);
	if (read(s, &ok, 1) != 1) /* the test is done */
		_exit(9);
	if (ibv_destroy_qp(tgt))
		_exit(5);
	_exit(0);
}

/*
 * Events of a TGT QP reach every handle, as the kernel gives a shared
 * QP's events to each (its open list): the maker's (it serves the QP) and
 * two opened in this process, each event naming its own handle.
 */
SV_TEST_T(tgt_events_every_handle, 60)
{
	char path[64];
	int fd = tmpfile_fd(path, sizeof(path)), ms, seen = 0;
	pid_t mp;
	struct ibv_cq *rcq, *scq;
	struct ibv_qp *h[2], *ini, *got;
	struct xside i;
	uint32_t tqpn;
	char ok;

	close(fd);
	mp = tchild_start(emaker, path, &ms);
	xrecv(ms, &tqpn, sizeof(tqpn));
	xside_mem(&i, NULL);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	i.x = xrcd_open(i.ctx, fd, O_CREAT);
	CHECK(i.x);
	xside_srqs(&i, i.x, 4);
	for (int k = 0; k < 2; k++) {
		h[k] = tgt_open(i.ctx, i.x, tqpn);
		CHECK(h[k]);
	}
	rcq = i.cq;
	scq = ibv_create_cq(i.ctx, 16, NULL, NULL, 0);
	CHECK(scq);
	i.cq = scq;
	ini = ini_new(&i, 0);
	i.cq = rcq;
	xsend(ms, &ini->qp_num, sizeof(ini->qp_num));
	xrecv(ms, &ok, 1); /* the TGT QP is in RTR */
	xconnect(ini, tqpn);
	CHECK_EQ(xpost(ini, i.mr->lkey, 1, IBV_WR_SEND, i.buf + 49152, 100,
		       i.srqn[0], 0, 0, 0, 0),
		 0);
	expect_send(scq, 1, IBV_WC_SUCCESS);
	for (int k = 0; k < 2; k++) {
		CHECK_EQ(next_qp_event(i.ctx, &got), IBV_EVENT_COMM_EST);
		CHECK(got == h[0] || got == h[1]);
		seen |= got == h[0] ? 1 : 2;
	}
	CHECK_EQ(seen, 3);
	xrecv(ms, &ok, 1);
	CHECK_EQ(ok, 1); /* the maker's handle had it too */
	xchild_end(mp, ms);
	CHECK_EQ(ibv_destroy_qp(ini), 0);
	for (int k = 0; k < 2; k++)
		CHECK_EQ(ibv_destroy_qp(h[k]), 0);
	for (int k = 0; k < 2; k++)
		CHECK_EQ(ibv_destroy_srq(i.srq[k]), 0);
	CHECK_EQ(ibv_close_xrcd(i.x), 0);
	CHECK_EQ(ibv_destroy_cq(scq), 0);
	CHECK_EQ(ibv_close_device(i.ctx), 0);
	close(fd);
	unlink(path);
}

SV_TEST_MAIN()

/* SPDX-License-Identifier: MIT */
/*
 * XRC objects (issue 24 item 1, the verbs layer): ibv_open_xrcd and
 * ibv_close_xrcd with the kernel's sharing by inode (between processes
 * too), XRC SRQs and ibv_get_srq_num, XRC TGT QPs (ibv_create_qp_ex,
 * ibv_open_qp from another process, one state for every handle, the QP
 * living while any handle does), XRC INI QPs, and every error the kernel's
 * ib_uverbs and rdma-core's libibverbs answer.
 */
#include "engine_util.h"
#include "sv_param.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>

/* XRC objects are made only with SOFTVERBS_XRC=1 (no data moves over XRC
 * yet); every case but the first asks for them. */
__attribute__((constructor)) static void xrc_on(void)
{
	setenv("SOFTVERBS_XRC", "1", 1);
}

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

/* Without SOFTVERBS_XRC=1 the device answers as one without XRC. */
SV_TEST(xrc_off_by_default)
{
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0) {
		struct ibv_context *ctx;
		struct ibv_pd *pd;
		struct ibv_cq *cq;
		struct ibv_qp_init_attr_ex ia;

		unsetenv("SOFTVERBS_XRC");
		ctx = eu_open();
		pd = ibv_alloc_pd(ctx);
		cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		errno = 0;
		if (xrcd_open(ctx, -1, O_CREAT) || errno != EOPNOTSUPP)
			_exit(2);
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = IBV_QPT_XRC_SEND;
		ia.comp_mask = IBV_QP_INIT_ATTR_PD;
		ia.pd = pd;
		ia.send_cq = cq;
		ia.cap.max_send_wr = 1;
		errno = 0;
		if (ibv_create_qp_ex(ctx, &ia) || errno != EOPNOTSUPP)
			_exit(3);
		if (xsrq_new(ctx, pd, NULL, cq) || errno != EOPNOTSUPP)
			_exit(4);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
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

SV_TEST_MAIN()

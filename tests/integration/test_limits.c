/* SPDX-License-Identifier: MIT */
/*
 * Every limit ibv_query_device advertises is enforced, with the kernel's
 * errno (issue 7, item 9): one object past max_pd, max_mr, max_cq, max_qp,
 * max_srq, max_ah or max_mw fails with ENOMEM, device wide (whichever
 * context holds the others) and changes nothing; a request past max_cqe,
 * max_qp_wr, max_sge, max_inline_data, max_srq_wr, max_srq_sge,
 * max_qp_rd_atom, max_mr_size or max_dm_size fails with EINVAL, and the
 * limit itself is accepted.
 *
 * The counts are tested at the device's real values (through the verbs
 * for PDs, through the control protocol for the rest), and all of them
 * through the verbs on a daemon told lower ones (SOFTVERBS_LIMITS), whose
 * ibv_query_device reports those instead.
 */
#include "raw_util.h"

#include <fcntl.h>
#include "pd_mr_util.h"

#include <sys/mman.h>
#include <sys/resource.h>

/* A private daemon for the case, optionally with lowered limits. */
static void daemon_with(const char *limits, struct sv_status_rep *base)
{
	char name[108];

	snprintf(name, sizeof(name), "svtest.limits.%d", (int)getpid());
	setenv("SOFTVERBS_SOCKET", name, 1);
	if (limits)
		setenv("SOFTVERBS_LIMITS", limits, 1);
	sv_test_baseline(base);
}

static void done(const struct sv_status_rep *base)
{
	sv_test_wait_quiet(base, 60000);
	sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
}

static uint32_t objects_now(void)
{
	struct sv_status_rep st;

	CHECK_EQ(sv_test_status(&st), 0);
	return st.objects;
}

/* ---- counts at the device's own limits -------------------------------- */

SV_TEST_T(max_pd_device_wide, 300)
{
	struct sv_status_rep base;
	struct ibv_device_attr da;
	struct ibv_context *c1, *c2;
	struct ibv_pd **pds, *last;
	uint32_t before;
	int n;

	daemon_with(NULL, &base);
	c1 = sv_test_open_dev();
	c2 = sv_test_open_dev();
	CHECK_EQ(ibv_query_device(c1, &da), 0);
	CHECK(da.max_pd > 0);
	n = da.max_pd;
	pds = calloc(n, sizeof(*pds));
	CHECK(pds);
	/* Half in each context: the limit is the device's. */
	for (int i = 0; i < n; i++) {
		pds[i] = ibv_alloc_pd(i % 2 ? c2 : c1);
		if (!pds[i])
			sv_test_fail(__FILE__, __LINE__, "pd %d of %d: %s", i, n,
				     strerror(errno));
	}
	before = objects_now();
	CHECK_NULL_ERRNO(ibv_alloc_pd(c1), ENOMEM);
	CHECK_NULL_ERRNO(ibv_alloc_pd(c2), ENOMEM);
	CHECK_EQ(objects_now(), before);
	/* One freed anywhere makes room anywhere. */
	CHECK_EQ(ibv_dealloc_pd(pds[1]), 0);
	last = ibv_alloc_pd(c1);
	CHECK(last);
	CHECK_NULL_ERRNO(ibv_alloc_pd(c2), ENOMEM);
	CHECK_EQ(ibv_close_device(c1), 0);
	CHECK_EQ(ibv_close_device(c2), 0);
	free(pds);
	done(&base);
}

/*
 * Every count at the device's own limit, through the control protocol
 * itself: the library's side of a QP or CQ costs memory that 65,536 of
 * them would make this test heavy, and the daemon is what enforces the
 * counts.  Requests go out on many channels of one ufile at once, so the
 * daemon serves them in batches (a few microseconds each, not a wake-up).
 */
#define NCH 32

struct raw_uf {
	int ch[NCH];
	uint32_t ufile;
	int cmd_fd, async_fd;
};

/* A queue region as the library makes them (a sealed memfd of a page),
 * for the create commands that carry one. */
static int region_fd(void)
{
	static int fd = -1;

	if (fd < 0) {
		fd = memfd_create("test-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		CHECK(fd >= 0);
		CHECK_EQ(ftruncate(fd, 4096), 0);
		CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	}
	return fd;
}

/* Sends one request on fd, for ufile (with a region for the creates of
 * CQs, QPs and SRQs). */
static void rq_send(int fd, uint16_t op, uint32_t ufile, const void *body,
		    size_t blen)
{
	int rfd;

	if (op == SV_OP_CREATE_CQ || op == SV_OP_CREATE_QP ||
	    op == SV_OP_CREATE_SRQ) {
		rfd = region_fd();
		raw_send(fd, SV_PROTO_VERSION, op, 0, ufile, body, blen, &rfd, 1);
		return;
	}
	raw_send(fd, SV_PROTO_VERSION, op, 0, ufile, body, blen, NULL, 0);
}

/* One reply on fd: its status; the payload's first 8 bytes in *rep. */
static int rq_recv(int fd, uint64_t *rep, int *rfds, int *nrfds)
{
	union {
		struct sv_msg_hdr h;
		char b[SV_MSG_MAX];
	} m;
	int fds[SV_MAX_FDS], nfds = 0;
	ssize_t n = sv_recv_msg(fd, m.b, sizeof(m.b), fds, SV_MAX_FDS, &nfds);

	CHECK(n >= (ssize_t)sizeof(m.h));
	if (rep)
		memcpy(rep, m.b + sizeof(m.h), 8);
	if (rfds) {
		memcpy(rfds, fds, sizeof(int) * nfds);
		*nrfds = nfds;
	} else {
		sv_close_fds(fds, nfds);
	}
	return m.h.status;
}

static void raw_uf_open(struct raw_uf *u)
{
	struct sv_ctx_rep rep;
	int fds[2], nfds = 0;

	for (int i = 0; i < NCH; i++)
		u->ch[i] = raw_connect();
	rq_send(u->ch[0], SV_OP_OPEN_DEVICE, 0, NULL, 0);
	CHECK_EQ(rq_recv(u->ch[0], (uint64_t *)(void *)&rep, fds, &nfds), 0);
	CHECK_EQ(nfds, 2);
	u->ufile = rep.ufile;
	u->cmd_fd = fds[0];
	u->async_fd = fds[1];
	for (int i = 1; i < NCH; i++) {
		raw_send(u->ch[i], SV_PROTO_VERSION, SV_OP_ATTACH, 0, u->ufile,
			 NULL, 0, &u->cmd_fd, 1);
		CHECK_EQ(rq_recv(u->ch[i], NULL, NULL, NULL), 0);
	}
}

static void raw_uf_close(struct raw_uf *u)
{
	for (int i = 0; i < NCH; i++)
		close(u->ch[i]);
	close(u->cmd_fd); /* the last copy: the daemon ends the ufile */
	close(u->async_fd);
}

/*
 * Makes objects with op/body until the daemon refuses one; returns how
 * many it made, the refusal's status in *err and the lowest handle made
 * in *first (handles are lowest free first: the others follow it).  A refusal is repeated on every channel, so the answer does
 * not depend on one unlucky request.
 */
static long fill(struct raw_uf *u, uint16_t op, const void *body, size_t blen,
		 int *err, uint32_t *first)
{
	long made = 0;

	*err = 0;
	while (!*err) {
		uint64_t rep;
		int st;

		for (int i = 0; i < NCH; i++)
			rq_send(u->ch[i], op, u->ufile, body, blen);
		for (int i = 0; i < NCH; i++) {
			st = rq_recv(u->ch[i], &rep, NULL, NULL);
			if (st)
				*err = st;
			else if (!made++ || (uint32_t)rep < *first)
				*first = (uint32_t)rep;
		}
	}
	return made;
}

SV_TEST_T(every_count_at_its_device_limit, 600)
{
	static char buf[4096];
	struct sv_status_rep base, st;
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	struct raw_uf u;
	uint32_t pd = 0, cq = 0, first = 0;
	int err;

	daemon_with(NULL, &base);
	ctx = sv_test_open_dev();
	CHECK_EQ(ibv_query_device(ctx, &da), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	raw_uf_open(&u);

	/* PDs: the limit, then ENOMEM. */
	CHECK_EQ(fill(&u, SV_OP_ALLOC_PD, NULL, 0, &err, &pd), da.max_pd);
	CHECK_EQ(err, -ENOMEM);
	/* Keep one PD, give the rest back. */
	for (uint32_t h = pd + 1; h < pd + (uint32_t)da.max_pd; h += NCH) {
		int k = 0;

		for (; k < NCH && h + k < pd + (uint32_t)da.max_pd; k++) {
			struct sv_handle_req r = { .handle = h + k };

			rq_send(u.ch[k], SV_OP_DEALLOC_PD, u.ufile, &r, sizeof(r));
		}
		while (k--)
			CHECK_EQ(rq_recv(u.ch[k], NULL, NULL, NULL), 0);
	}

	{
		struct sv_create_cq_req c = { .cqe = 1 };

		CHECK_EQ(fill(&u, SV_OP_CREATE_CQ, &c, sizeof(c), &err, &cq),
			 da.max_cq);
		CHECK_EQ(err, -ENOMEM);
	}
	{
		struct sv_create_qp_req q = { .pd_handle = pd,
					      .scq_handle = cq,
					      .rcq_handle = cq,
					      .srq_handle = UINT32_MAX,
					      .qp_type = IBV_QPT_UD,
					      .max_send_wr = 1,
					      .max_recv_wr = 1,
					      .cookie = 1 };

		CHECK_EQ(fill(&u, SV_OP_CREATE_QP, &q, sizeof(q), &err, &first),
			 da.max_qp);
		CHECK_EQ(err, -ENOMEM);
	}
	{
		/* Not ENOSPC (the handle table used to run out first). */
		struct sv_reg_mr_req m = { .addr = (uintptr_t)buf,
					   .length = sizeof(buf),
					   .iova = (uintptr_t)buf,
					   .pd_handle = pd };

		CHECK_EQ(fill(&u, SV_OP_REG_MR, &m, sizeof(m), &err, &first),
			 da.max_mr);
		CHECK_EQ(err, -ENOMEM);
	}
	{
		struct sv_create_srq_req q = { .pd_handle = pd, .max_wr = 1,
					       .max_sge = 1 };

		CHECK_EQ(fill(&u, SV_OP_CREATE_SRQ, &q, sizeof(q), &err, &first),
			 da.max_srq);
		CHECK_EQ(err, -ENOMEM);
	}
	{
		struct sv_create_ah_req a = { .pd_handle = pd };

		CHECK_EQ(fill(&u, SV_OP_CREATE_AH, &a, sizeof(a), &err, &first),
			 da.max_ah);
		CHECK_EQ(err, -ENOMEM);
	}
	{
		struct sv_alloc_mw_req w = { .pd_handle = pd,
					     .type = IBV_MW_TYPE_2 };

		CHECK_EQ(fill(&u, SV_OP_ALLOC_MW, &w, sizeof(w), &err, &first),
			 da.max_mw);
		CHECK_EQ(err, -ENOMEM);
	}
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.objects, base.objects + 1 + (uint32_t)da.max_cq +
				     (uint32_t)da.max_qp + (uint32_t)da.max_mr +
				     (uint32_t)da.max_srq + (uint32_t)da.max_ah +
				     (uint32_t)da.max_mw);
	raw_uf_close(&u);
	done(&base);
}

/* ---- every count, on a daemon told small ones -------------------------- */

#define LIMITS "pd=6,mr=5,cq=4,qp=3,srq=2,ah=3,mw=4,dm=2"

SV_TEST(lowered_limits_reported_and_enforced)
{
	struct sv_status_rep base;
	struct ibv_device_attr da;
	struct ibv_context *ctx, *ctx2;
	struct ibv_pd *pd[6];
	struct ibv_mr *mr[5];
	struct ibv_cq *cq[4];
	struct ibv_qp *qp[3];
	struct ibv_srq *srq[2];
	struct ibv_ah *ah[3];
	struct ibv_mw *mw[4];
	struct ibv_dm *dm[2];
	struct ibv_qp_init_attr qa;
	struct ibv_srq_init_attr sa;
	struct ibv_ah_attr aa;
	struct ibv_alloc_dm_attr dma = { .length = 4096 };
	char *buf = pages(1);
	uint32_t before;

	daemon_with(LIMITS, &base);
	ctx = sv_test_open_dev();
	ctx2 = sv_test_open_dev();
	CHECK_EQ(ibv_query_device(ctx, &da), 0);
	CHECK_EQ(da.max_pd, 6);
	CHECK_EQ(da.max_mr, 5);
	CHECK_EQ(da.max_cq, 4);
	CHECK_EQ(da.max_qp, 3);
	CHECK_EQ(da.max_srq, 2);
	CHECK_EQ(da.max_ah, 3);
	CHECK_EQ(da.max_mw, 4);

	for (int i = 0; i < 6; i++)
		CHECK((pd[i] = ibv_alloc_pd(i ? ctx : ctx2)));
	for (int i = 0; i < 5; i++)
		CHECK((mr[i] = ibv_reg_mr(pd[1], buf, 4096, IBV_ACCESS_LOCAL_WRITE |
								    IBV_ACCESS_MW_BIND)));
	for (int i = 0; i < 4; i++)
		CHECK((cq[i] = ibv_create_cq(ctx, 4, NULL, NULL, 0)));
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq[0];
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	for (int i = 0; i < 3; i++)
		CHECK((qp[i] = ibv_create_qp(pd[1], &qa)));
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	for (int i = 0; i < 2; i++)
		CHECK((srq[i] = ibv_create_srq(pd[1], &sa)));
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.hop_limit = 1;
	for (int i = 0; i < 3; i++)
		CHECK((ah[i] = ibv_create_ah(pd[1], &aa)));
	for (int i = 0; i < 4; i++)
		CHECK((mw[i] = ibv_alloc_mw(pd[1], i % 2 ? IBV_MW_TYPE_2 :
							       IBV_MW_TYPE_1)));
	for (int i = 0; i < 2; i++)
		CHECK((dm[i] = ibv_alloc_dm(ctx, &dma)));

	/* One more of anything: ENOMEM, from either context, nothing made. */
	before = objects_now();
	CHECK_NULL_ERRNO(ibv_alloc_pd(ctx), ENOMEM);
	CHECK_NULL_ERRNO(ibv_alloc_pd(ctx2), ENOMEM);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd[1], buf, 4096, 0), ENOMEM);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd[0], buf, 4096, 0), ENOMEM);
	CHECK_NULL_ERRNO(ibv_create_cq(ctx, 4, NULL, NULL, 0), ENOMEM);
	CHECK_NULL_ERRNO(ibv_create_cq(ctx2, 4, NULL, NULL, 0), ENOMEM);
	CHECK_NULL_ERRNO(ibv_create_qp(pd[1], &qa), ENOMEM);
	CHECK_NULL_ERRNO(ibv_create_srq(pd[1], &sa), ENOMEM);
	CHECK_NULL_ERRNO(ibv_create_ah(pd[1], &aa), ENOMEM);
	CHECK_NULL_ERRNO(ibv_alloc_mw(pd[1], IBV_MW_TYPE_1), ENOMEM);
	CHECK_NULL_ERRNO(ibv_alloc_mw(pd[1], IBV_MW_TYPE_2), ENOMEM);
	CHECK_NULL_ERRNO(ibv_alloc_dm(ctx, &dma), ENOMEM);
	CHECK_NULL_ERRNO(ibv_alloc_dm(ctx2, &dma), ENOMEM);
	CHECK_EQ(objects_now(), before);

	/* Freed, one of each can be made again. */
	CHECK_EQ(ibv_dereg_mr(mr[4]), 0);
	CHECK((mr[4] = ibv_reg_mr(pd[1], buf, 4096, 0)));
	CHECK_EQ(ibv_destroy_qp(qp[2]), 0);
	CHECK((qp[2] = ibv_create_qp(pd[1], &qa)));
	CHECK_EQ(ibv_destroy_srq(srq[1]), 0);
	CHECK((srq[1] = ibv_create_srq(pd[1], &sa)));
	CHECK_EQ(ibv_destroy_ah(ah[2]), 0);
	CHECK((ah[2] = ibv_create_ah(pd[1], &aa)));
	CHECK_EQ(ibv_dealloc_mw(mw[3]), 0);
	CHECK((mw[3] = ibv_alloc_mw(pd[1], IBV_MW_TYPE_2)));
	CHECK_EQ(ibv_free_dm(dm[1]), 0);
	CHECK((dm[1] = ibv_alloc_dm(ctx, &dma)));
	CHECK_EQ(ibv_destroy_cq(cq[3]), 0);
	CHECK((cq[3] = ibv_create_cq(ctx2, 4, NULL, NULL, 0)));
	CHECK_EQ(ibv_dealloc_pd(pd[5]), 0);
	CHECK((pd[5] = ibv_alloc_pd(ctx2)));
	/* The ufiles take all of it down. */
	CHECK_EQ(ibv_close_device(ctx), 0);
	CHECK_EQ(ibv_close_device(ctx2), 0);
	done(&base);
}

/* A limits string the daemon cannot use leaves the defaults. */
SV_TEST(bad_limits_string_keeps_defaults)
{
	struct sv_status_rep base;
	struct ibv_device_attr da;
	struct ibv_context *ctx;

	daemon_with("qp=3,bogus=1", &base);
	ctx = sv_test_open_dev();
	CHECK_EQ(ibv_query_device(ctx, &da), 0);
	CHECK(da.max_qp > 3);
	CHECK_EQ(ibv_close_device(ctx), 0);
	done(&base);
}

/* ---- sizes of one request ---------------------------------------------- */

SV_TEST_T(size_limits, 120)
{
	struct sv_status_rep base;
	struct ibv_device_attr_ex dx;
	struct ibv_device_attr *da = &dx.orig_attr;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_srq *srq;
	struct ibv_qp_init_attr qa;
	struct ibv_srq_init_attr sa;
	struct ibv_srq_attr sm;
	struct ibv_alloc_dm_attr dma;
	struct ibv_qp_attr at;
	struct ibv_dm *dm;
	uint32_t before;

	daemon_with(NULL, &base);
	ctx = sv_test_open_dev();
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &dx), 0);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	before = objects_now();

	/* max_cqe: at the limit fine, past it EINVAL (create and resize). */
	CHECK_NULL_ERRNO(ibv_create_cq(ctx, da->max_cqe + 1, NULL, NULL, 0),
			 EINVAL);
	cq = ibv_create_cq(ctx, da->max_cqe, NULL, NULL, 0);
	CHECK(cq);
	CHECK_EQ(ibv_resize_cq(cq, da->max_cqe + 1), EINVAL);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq);

	/* max_qp_wr, max_sge, max_inline_data. */
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = da->max_qp_wr + 1;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &qa), EINVAL);
	qa.cap.max_send_wr = 1;
	qa.cap.max_recv_wr = da->max_qp_wr + 1;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &qa), EINVAL);
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = da->max_sge + 1;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &qa), EINVAL);
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = da->max_sge + 1;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &qa), EINVAL);
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = 1u << 20;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &qa), EINVAL);
	qa.cap.max_inline_data = 0;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = da->max_qp_wr;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = da->max_sge;
	qp = ibv_create_qp(pd, &qa);
	CHECK(qp);
	CHECK(qa.cap.max_send_wr >= (uint32_t)da->max_qp_wr);
	CHECK(qa.cap.max_send_sge >= (uint32_t)da->max_sge);
	/* max_qp_rd_atom in modify. */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = 1;
	CHECK_EQ(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_1024;
	at.dest_qp_num = qp->qp_num;
	at.ah_attr.is_global = 1;
	at.ah_attr.port_num = 1;
	at.max_dest_rd_atomic = da->max_qp_rd_atom + 1;
	CHECK_EQ(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV |
						IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						IBV_QP_RQ_PSN | IBV_QP_MIN_RNR_TIMER |
						IBV_QP_MAX_DEST_RD_ATOMIC),
		 EINVAL);
	at.max_dest_rd_atomic = da->max_qp_rd_atom;
	CHECK_EQ(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV |
						IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						IBV_QP_RQ_PSN | IBV_QP_MIN_RNR_TIMER |
						IBV_QP_MAX_DEST_RD_ATOMIC),
		 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	/* The largest inline the device takes. */
	for (uint32_t inl = 1;; inl *= 2) {
		qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
		qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
		qa.cap.max_inline_data = inl;
		qp = ibv_create_qp(pd, &qa);
		if (!qp) {
			CHECK_EQ(errno, EINVAL);
			CHECK(inl > 64);
			break;
		}
		CHECK(qa.cap.max_inline_data >= inl);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	}

	/* max_srq_wr, max_srq_sge (create and modify). */
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = da->max_srq_wr + 1;
	sa.attr.max_sge = 1;
	CHECK_NULL_ERRNO(ibv_create_srq(pd, &sa), EINVAL);
	sa.attr.max_wr = 1;
	sa.attr.max_sge = da->max_srq_sge + 1;
	CHECK_NULL_ERRNO(ibv_create_srq(pd, &sa), EINVAL);
	sa.attr.max_wr = da->max_srq_wr;
	sa.attr.max_sge = da->max_srq_sge;
	srq = ibv_create_srq(pd, &sa);
	CHECK(srq);
	sm.max_wr = da->max_srq_wr + 1;
	CHECK_EQ(ibv_modify_srq(srq, &sm, IBV_SRQ_MAX_WR), EINVAL);
	CHECK_EQ(ibv_destroy_srq(srq), 0);

	/* max_mr_size, max_dm_size. */
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, pages(1), da->max_mr_size + 1,
				    IBV_ACCESS_ON_DEMAND),
			 EINVAL);
	memset(&dma, 0, sizeof(dma));
	dma.length = dx.max_dm_size + 1;
	CHECK_NULL_ERRNO(ibv_alloc_dm(ctx, &dma), EINVAL);
	dma.length = dx.max_dm_size;
	dm = ibv_alloc_dm(ctx, &dma);
	CHECK(dm);
	CHECK_EQ(ibv_free_dm(dm), 0);

	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(objects_now(), before);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	done(&base);
}

/* ---- a daemon with few descriptors ------------------------------------ */

/*
 * Started where RLIMIT_NOFILE is small, the daemon shrinks what holds a
 * descriptor of its own (open devices, contexts, DMs, dma-buf MRs) to fit,
 * so it refuses cleanly (ENOMEM for DMs, EMFILE for devices) long before it
 * would run out itself, and keeps serving.
 */
SV_TEST_T(descriptor_budget, 120)
{
	struct rlimit rl = { 1500, 1500 };
	struct sv_status_rep base, st;
	struct ibv_alloc_dm_attr da = { .length = 4096 };
	static struct ibv_context *ctxs[1500];
	static struct ibv_dm *dms[1500];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int ndm = 0, nctx = 0;

	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	daemon_with(NULL, &base);
	ctx = sv_test_open_dev();
	while (ndm < 1500 && (dms[ndm] = ibv_alloc_dm(ctx, &da)))
		ndm++;
	CHECK_EQ(errno, ENOMEM);
	CHECK(ndm > 0 && ndm < 1500);
	/* More devices than it can hold: EMFILE, from the daemon. */
	while (nctx < 1500) {
		struct ibv_device **l = ibv_get_device_list(NULL);

		CHECK(l);
		ctxs[nctx] = ibv_open_device(l[0]);
		ibv_free_device_list(l);
		if (!ctxs[nctx])
			break;
		nctx++;
	}
	CHECK_EQ(errno, EMFILE);
	CHECK(nctx > 0 && nctx < 700); /* the daemon's limit, not ours */
	/* Still serving, with descriptors to spare. */
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK(st.open_fds < 1500 - 100);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	while (nctx--)
		CHECK_EQ(ibv_close_device(ctxs[nctx]), 0);
	CHECK((ctxs[0] = sv_test_open_dev()));
	CHECK_EQ(ibv_close_device(ctxs[0]), 0);
	while (ndm--)
		CHECK_EQ(ibv_free_dm(dms[ndm]), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	done(&base);
}

SV_TEST_MAIN()

/* SPDX-License-Identifier: MIT */
/*
 * Import and unimport of PDs and MRs between processes sharing a ufile
 * (the cmd_fd passed over a Unix socket), the kernel's lifetime rules, and
 * a ufile that outlives the process that opened it.
 */
#include "pd_mr_util.h"

struct shared {
	uint32_t pd_handle, mr_handle, lkey, rkey;
	uint64_t length;
	int32_t pid;
};

SV_TEST(import_bogus_handles)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	CHECK_NULL_ERRNO(ibv_import_pd(ctx, 0), ENOENT);
	CHECK_NULL_ERRNO(ibv_import_pd(ctx, 123456), ENOENT);
	CHECK_NULL_ERRNO(ibv_import_pd(ctx, UINT32_MAX), ENOENT);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK_NULL_ERRNO(ibv_import_mr(pd, 77), ENOENT);
	/* A handle of another type. */
	CHECK_NULL_ERRNO(ibv_import_mr(pd, pd->handle), EINVAL);
	mr = ibv_reg_mr(pd, pages(1), 4096, 0);
	CHECK(mr);
	CHECK_NULL_ERRNO(ibv_import_pd(ctx, mr->handle), EINVAL);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

/* What a peer needs to import pd and mr; this process registered mr. */
static struct shared shared_of(const struct ibv_pd *pd,
				const struct ibv_mr *mr)
{
	return (struct shared){ pd->handle, mr->handle, mr->lkey, mr->rkey,
				mr->length, getpid() };
}

static void send_shared(int sock, int fd, const struct shared *s)
{
	CHECK_EQ(sv_test_send_fd(sock, fd, s, sizeof(*s)), 0);
}

static void sync_byte(int sock, int send_it)
{
	char b = 'x';

	if (send_it)
		CHECK_EQ(write(sock, &b, 1), 1);
	else
		CHECK_EQ(read(sock, &b, 1), 1);
}

/* The owner's side: a PD and an MR of n pages on a new context, described
 * in *s, and a socketpair sv to hand them over on. */
static struct ibv_context *owner_open(struct ibv_pd **pd, struct ibv_mr **mr,
				      size_t n, int access, int sv[2],
				      struct shared *s)
{
	struct ibv_context *ctx = sv_test_open_dev();

	*pd = ibv_alloc_pd(ctx);
	CHECK(*pd);
	*mr = ibv_reg_mr(*pd, pages(n), n * 4096, access);
	CHECK(*mr);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	*s = shared_of(*pd, *mr);
	return ctx;
}

/* The other side: the context sent on sock and views of its PD and MR. */
static struct ibv_context *import_shared(int sock, struct shared *s,
					 struct ibv_pd **pd, struct ibv_mr **mr)
{
	struct ibv_context *ctx = sv_test_recv_context(sock, s, sizeof(*s));

	*pd = ibv_import_pd(ctx, s->pd_handle);
	*mr = ibv_import_mr(*pd, s->mr_handle);
	CHECK(*pd && *mr);
	return ctx;
}

static void unimport_shared(struct ibv_context *ctx, struct ibv_pd *pd,
			    struct ibv_mr *mr)
{
	ibv_unimport_mr(mr);
	ibv_unimport_pd(pd);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* The importer: a view of everything, and its own MR on the shared PD. */
static void importer(void *arg)
{
	int sock = *(int *)arg;
	struct shared s;
	struct ibv_context *ctx = sv_test_recv_context(sock, &s, sizeof(s));
	struct ibv_pd *pd;
	struct ibv_mr *mr, *own;
	struct sv_res_entry e;
	char *buf = pages(1);

	pd = ibv_import_pd(ctx, s.pd_handle);
	CHECK(pd);
	CHECK(pd->context == ctx);
	CHECK_EQ(pd->handle, s.pd_handle);
	mr = ibv_import_mr(pd, s.mr_handle);
	CHECK(mr);
	CHECK(mr->addr == NULL);
	CHECK_EQ(mr->lkey, s.lkey);
	CHECK_EQ(mr->rkey, s.rkey);
	CHECK_EQ(mr->length, s.length);
	CHECK_EQ(mr->handle, s.mr_handle);
	CHECK(mr->pd == pd && mr->context == ctx);
	/* Unimport makes no daemon call; the object is still there. */
	ibv_unimport_mr(mr);
	mr = ibv_import_mr(pd, s.mr_handle);
	CHECK(mr);
	CHECK_EQ(mr->lkey, s.lkey);
	ibv_unimport_mr(mr);
	/* An MR of its own on the imported PD: its owner is this process. */
	own = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(own);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, own->lkey, &e), 0);
	CHECK_EQ(e.owner_pid, getpid());
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, s.lkey, &e), 0);
	CHECK_EQ(e.owner_pid, s.pid);
	CHECK_EQ(ibv_dereg_mr(own), 0);
	{
		/* Objects made on the imported view outlive it: unimport
		 * frees the view only (as the kernel), and destroying them
		 * later never reads it (ASan sees it if it does). */
		struct ibv_pd *view = ibv_import_pd(ctx, s.pd_handle);
		struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 2,
							  .max_sge = 1 } };
		struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC };
		struct ibv_srq *srq;
		struct ibv_qp *qp;

		CHECK(view && cq);
		qa.send_cq = qa.recv_cq = cq;
		qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
		qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
		qp = ibv_create_qp(view, &qa);
		srq = ibv_create_srq(view, &sa);
		CHECK(qp && srq);
		ibv_unimport_pd(view);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
		CHECK_EQ(ibv_destroy_srq(srq), 0);
		CHECK_EQ(ibv_destroy_cq(cq), 0);
	}
	ibv_unimport_pd(pd);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sync_byte(sock, 1);
}

SV_TEST(import_in_another_process)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct shared s;
	int sv[2];

	sv_test_baseline(&base);
	ctx = owner_open(&pd, &mr, 2,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, sv, &s);
	send_shared(sv[0], ctx->cmd_fd, &s);
	CHECK_EQ(sv_test_child(importer, &sv[1]), 0);
	sync_byte(sv[0], 0);
	/* The importer's views are gone; the objects are not. */
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

/* The other view is destroyed: it can only be unimported. */
static void survivor(void *arg)
{
	int sock = *(int *)arg;
	struct shared s;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_context *ctx = import_shared(sock, &s, &pd, &mr);

	sync_byte(sock, 1);
	sync_byte(sock, 0); /* the owner destroyed both */
	CHECK_EQ(ibv_dereg_mr(mr), ENOENT);
	CHECK_EQ(ibv_dealloc_pd(pd), ENOENT);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, pages(1), 4096, 0), EINVAL);
	CHECK_NULL_ERRNO(ibv_import_mr(pd, s.mr_handle), ENOENT);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0),
		 IBV_REREG_MR_ERR_INPUT);
	unimport_shared(ctx, pd, mr);
	sync_byte(sock, 1);
}

SV_TEST(destroy_through_one_view_seen_by_all)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct shared s;
	int sv[2];
	pid_t pid;
	int st;

	sv_test_baseline(&base);
	ctx = owner_open(&pd, &mr, 1, 0, sv, &s);
	pid = fork();
	if (pid == 0) {
		survivor(&sv[1]);
		_exit(0);
	}
	send_shared(sv[0], ctx->cmd_fd, &s);
	sync_byte(sv[0], 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	sync_byte(sv[0], 1);
	sync_byte(sv[0], 0);
	st = sv_test_wait_child(pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

/* The importer destroys; the creator's handles are dead. */
static void destroyer(void *arg)
{
	int sock = *(int *)arg;
	struct shared s;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_context *ctx = import_shared(sock, &s, &pd, &mr);

	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(destroy_by_importer)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct shared s;
	int sv[2];

	sv_test_baseline(&base);
	ctx = owner_open(&pd, &mr, 1, 0, sv, &s);
	send_shared(sv[0], ctx->cmd_fd, &s);
	CHECK_EQ(sv_test_child(destroyer, &sv[1]), 0);
	CHECK_EQ(ibv_dereg_mr(mr), ENOENT);
	CHECK_EQ(ibv_dealloc_pd(pd), ENOENT);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0),
		 IBV_REREG_MR_ERR_CMD);
	CHECK_EQ(errno, ENOENT);
	unimport_shared(ctx, pd, mr);
	sv_test_wait_quiet(&base, 5000);
}

/* Creates objects, hands the cmd_fd over and exits without cleaning up. */
static void creator(void *arg)
{
	int sock = *(int *)arg;
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr(pd, pages(1), 4096,
				       IBV_ACCESS_LOCAL_WRITE);
	struct shared s;

	CHECK(pd && mr);
	s = shared_of(pd, mr);
	send_shared(sock, ctx->cmd_fd, &s);
}

SV_TEST(ufile_outlives_creator)
{
	struct sv_status_rep base;
	struct sv_res_entry e;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr, *mine;
	struct shared s;
	int sv[2];

	sv_test_baseline(&base);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	CHECK_EQ(sv_test_child(creator, &sv[1]), 0);
	/* The creator is gone; the fd in flight keeps the ufile. */
	ctx = sv_test_recv_context(sv[0], &s, sizeof(s));
	pd = ibv_import_pd(ctx, s.pd_handle);
	CHECK(pd);
	mr = ibv_import_mr(pd, s.mr_handle);
	CHECK(mr);
	CHECK_EQ(mr->lkey, s.lkey);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, s.lkey, &e), 0);
	CHECK_EQ(e.owner_pid, s.pid);
	mine = ibv_reg_mr(pd, pages(1), 4096, 0);
	CHECK(mine);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dereg_mr(mine), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

/* A forked child uses its parent's context directly (its own channel
 * attaches with the inherited cmd_fd) and leaves its MR behind. */
SV_TEST(forked_child_registers_on_parent_pd)
{
	struct sv_status_rep base;
	struct sv_res_entry e;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct shared s;
	int p[2], st;
	pid_t pid;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK_EQ(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		struct ibv_mr *cmr = ibv_reg_mr(pd, pages(1), 4096, 0);

		if (!cmr)
			_exit(1);
		s = (struct shared){ .mr_handle = cmr->handle,
				     .lkey = cmr->lkey,
				     .pid = getpid() };
		_exit(write(p[1], &s, sizeof(s)) == sizeof(s) ? 0 : 2);
	}
	st = sv_test_wait_child(pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(read(p[0], &s, sizeof(s)), sizeof(s));
	mr = ibv_import_mr(pd, s.mr_handle);
	CHECK(mr);
	CHECK_EQ(mr->lkey, s.lkey);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, s.lkey, &e), 0);
	CHECK_EQ(e.owner_pid, pid);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST_MAIN()

/* SPDX-License-Identifier: MIT */
/*
 * Device memory: allocation rules, memcpy bounds, DM MRs (ZERO_BASED, use
 * counts), import across processes through the cmd_fd, and the DM living on
 * after its creator exits while somebody holds the cmd_fd.
 */
#include "sv_test.h"
#include "sv_client.h"

#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <unistd.h>

static struct ibv_dm *alloc_dm(struct ibv_context *ctx, size_t len)
{
	struct ibv_alloc_dm_attr attr = { .length = len };
	struct ibv_dm *dm = ibv_alloc_dm(ctx, &attr);

	CHECK(dm);
	return dm;
}

SV_TEST(alloc_write_read_free)
{
	struct sv_status_rep base, st;
	struct ibv_context *ctx;
	struct ibv_dm *dm;
	char buf[8192], zero[8192] = { 0 };

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	dm = alloc_dm(ctx, 5000);
	CHECK(dm->context == ctx);
	CHECK(dm->comp_mask & IBV_DM_MASK_HANDLE);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.objects, base.objects + 1);
	/* Fresh device memory reads as zeros. */
	memset(buf, 0x55, sizeof(buf));
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 0, 5000), 0);
	CHECK(!memcmp(buf, zero, 5000));
	for (int i = 0; i < 5000; i++)
		buf[i] = (char)(i * 7);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 0, buf, 5000), 0);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 4096, 904), 0);
	for (int i = 0; i < 904; i++)
		CHECK_EQ(buf[i], (char)((i + 4096) * 7));
	CHECK_EQ(ibv_free_dm(dm), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(alloc_attr_checks)
{
	struct sv_status_rep base, st;
	struct ibv_context *ctx;
	struct ibv_device_attr_ex ax;
	struct ibv_alloc_dm_attr a;
	struct ibv_dm *dm;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &ax), 0);
	CHECK(ax.max_dm_size > 0);

	a = (struct ibv_alloc_dm_attr){ .length = 0 };
	CHECK_NULL_ERRNO(ibv_alloc_dm(ctx, &a), EINVAL);
	a = (struct ibv_alloc_dm_attr){ .length = ax.max_dm_size + 1 };
	CHECK_NULL_ERRNO(ibv_alloc_dm(ctx, &a), EINVAL);
	a = (struct ibv_alloc_dm_attr){ .length = 64, .comp_mask = 1 };
	CHECK_NULL_ERRNO(ibv_alloc_dm(ctx, &a), EINVAL);
	a = (struct ibv_alloc_dm_attr){ .length = 64, .log_align_req = 64 };
	CHECK_NULL_ERRNO(ibv_alloc_dm(ctx, &a), EINVAL);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.objects, base.objects); /* refusals leave nothing */

	/* The largest size, and an alignment request, are fine. */
	a = (struct ibv_alloc_dm_attr){ .length = ax.max_dm_size,
					.log_align_req = 12 };
	dm = ibv_alloc_dm(ctx, &a);
	CHECK(dm);
	CHECK_EQ(ibv_memcpy_to_dm(dm, ax.max_dm_size - 4, "tail", 4), 0);
	CHECK_EQ(ibv_free_dm(dm), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(memcpy_bounds)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_dm *dm = alloc_dm(ctx, 100);
	char buf[256];

	memset(buf, 'x', sizeof(buf));
	CHECK_EQ(ibv_memcpy_to_dm(dm, 0, buf, 100), 0);
	/* Out of range: EFAULT (mlx5), and nothing written. */
	memset(buf, 'y', sizeof(buf));
	CHECK_EQ(ibv_memcpy_to_dm(dm, 4, buf, 100), EFAULT);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 0, buf, 104), EFAULT);
	CHECK_EQ(ibv_memcpy_to_dm(dm, UINT64_MAX - 3, buf, 4), EFAULT);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 4, buf, SIZE_MAX - 3), EFAULT);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 100, 4), EFAULT);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 104, 0), EFAULT);
	/* Out of range wins over misalignment (mlx5's order). */
	CHECK_EQ(ibv_memcpy_to_dm(dm, 1, buf, 100), EFAULT);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 99, 2), EFAULT);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 101, 0), EFAULT);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 100, 0), 0);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 0, 100), 0);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(buf[i], 'x');
	CHECK_EQ(ibv_free_dm(dm), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* In range, an offset or a length that is not a multiple of 4 is EINVAL
 * (mlx5's MEMIC words), and nothing is copied either way. */
SV_TEST(memcpy_granularity)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_dm *dm = alloc_dm(ctx, 64);
	char buf[64];

	memset(buf, 'x', sizeof(buf));
	CHECK_EQ(ibv_memcpy_to_dm(dm, 0, buf, 64), 0);
	memset(buf, 'y', sizeof(buf));
	for (int off = 0; off < 4; off++)
		for (int len = 0; len < 9; len++) {
			int want = (off % 4 || len % 4) ? EINVAL : 0;

			CHECK_EQ(ibv_memcpy_to_dm(dm, 8 + off, buf, len), want);
			CHECK_EQ(ibv_memcpy_from_dm(buf + 32, dm, 8 + off, len),
				 want);
		}
	CHECK_EQ(ibv_memcpy_to_dm(dm, 3, "abcde", 5), EINVAL);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 2, "abcd", 4), EINVAL);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 4, "abcde", 5), EINVAL);
	/* Only the aligned copies above (all 'y') went through. */
	CHECK_EQ(ibv_memcpy_to_dm(dm, 60, "wxyz", 4), 0);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 0, 64), 0);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(buf[i], 'x');
	for (int i = 8; i < 16; i++)
		CHECK_EQ(buf[i], 'y');
	for (int i = 16; i < 60; i++)
		CHECK_EQ(buf[i], 'x');
	CHECK(!memcmp(buf + 60, "wxyz", 4));
	CHECK_EQ(ibv_free_dm(dm), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(reg_dm_mr_rules)
{
	struct sv_status_rep base;
	struct ibv_context *ctx, *ctx2;
	struct ibv_pd *pd, *pd2;
	struct ibv_dm *dm;
	struct ibv_mr *mr, *mr2;
	const unsigned zb = IBV_ACCESS_ZERO_BASED;
	const unsigned rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	dm = alloc_dm(ctx, 8192);

	CHECK_NULL_ERRNO(ibv_reg_dm_mr(pd, dm, 0, 4096, rw), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_dm_mr(pd, dm, 0, 4096,
				       zb | IBV_ACCESS_MW_BIND), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_dm_mr(pd, dm, 0, 4096,
				       zb | IBV_ACCESS_REMOTE_WRITE), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_dm_mr(pd, dm, 4096, 4097, zb | rw), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_dm_mr(pd, dm, 8193, 0, zb | rw), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_dm_mr(pd, dm, UINT64_MAX, 2, zb | rw),
			 EINVAL);

	/* A PD of another context (another ufile) cannot take this DM. */
	ctx2 = sv_test_open_dev();
	pd2 = ibv_alloc_pd(ctx2);
	CHECK(pd2);
	CHECK_NULL_ERRNO(ibv_reg_dm_mr(pd2, dm, 0, 64, zb | rw), EINVAL);

	/* Empty MRs are fine anywhere in the DM, its end included (the
	 * kernel's DM_MR_REG handler checks only the range). */
	for (uint64_t off = 0; off <= 8192; off += 4096) {
		mr = ibv_reg_dm_mr(pd, dm, off, 0, zb | rw);
		CHECK(mr);
		CHECK_EQ(mr->length, 0);
		CHECK(mr->lkey != 0);
		CHECK_EQ(ibv_free_dm(dm), EBUSY);
		CHECK_EQ(ibv_dereg_mr(mr), 0);
	}
	mr = ibv_reg_dm_mr(pd, dm, 100, 4000, zb | rw);
	CHECK(mr);
	CHECK(mr->addr == NULL); /* zero based: no address */
	CHECK_EQ(mr->length, 4000);
	CHECK(mr->pd == pd && mr->context == ctx);
	CHECK(mr->lkey && mr->rkey);
	mr2 = ibv_reg_dm_mr(pd, dm, 0, 8192, zb | IBV_ACCESS_REMOTE_ATOMIC |
					       IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr2);
	CHECK(mr2->lkey != mr->lkey && mr2->rkey != mr->rkey);
	CHECK(mr2->handle != mr->handle);

	/* The MRs hold the DM and the PD. */
	CHECK_EQ(ibv_free_dm(dm), EBUSY);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 0, "still", 6), EINVAL);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 0, "still", 4), 0); /* still usable */
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_free_dm(dm), EBUSY);
	CHECK_EQ(ibv_dereg_mr(mr2), 0);
	CHECK_EQ(ibv_free_dm(dm), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	CHECK_EQ(ibv_close_device(ctx2), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(teardown_with_dm_mr_alive)
{
	/* Closing the device with a DM, a DM MR and the PD still there:
	 * the ufile teardown frees them in dependency order. */
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_dm *dm;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	dm = alloc_dm(ctx, 4096);
	CHECK(ibv_reg_dm_mr(pd, dm, 0, 4096,
			    IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE));
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(import_in_same_context)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_dm *dm = alloc_dm(ctx, 300), *view;
	char buf[16] = { 0 };

	CHECK(pd);
	CHECK_NULL_ERRNO(ibv_import_dm(ctx, 4242), ENOENT);
	CHECK_NULL_ERRNO(ibv_import_dm(ctx, pd->handle), EINVAL);
	view = ibv_import_dm(ctx, dm->handle);
	CHECK(view);
	CHECK(view != dm && view->handle == dm->handle);
	CHECK(view->comp_mask & IBV_DM_MASK_HANDLE);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 288, "0123456789a", 12), 0);
	CHECK_EQ(ibv_memcpy_from_dm(buf, view, 288, 12), 0);
	CHECK(!memcmp(buf, "0123456789a", 12));
	/* Same bounds and rules as the original. */
	CHECK_EQ(ibv_memcpy_from_dm(buf, view, 292, 12), EFAULT);
	CHECK_EQ(ibv_memcpy_from_dm(buf, view, 290, 8), EINVAL);
	/* Unimport drops the view only. */
	ibv_unimport_dm(view);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 288, 12), 0);
	view = ibv_import_dm(ctx, dm->handle);
	CHECK(view);
	/* Freeing through any view destroys the DM for everyone. */
	CHECK_EQ(ibv_free_dm(view), 0);
	CHECK_NULL_ERRNO(ibv_import_dm(ctx, dm->handle), ENOENT);
	CHECK_EQ(ibv_free_dm(dm), ENOENT);
	/* The stale view can still be unimported, and reading it does not
	 * crash (its mapping is its own). */
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 0, 12), 0);
	ibv_unimport_dm(dm);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

struct peer {
	int sock;
};

/* The importer: gets the cmd_fd and the DM handle, reads what the owner
 * wrote, writes an answer, and tells the owner. */
static const char answer[16] = "from importer";

static void importer(void *arg)
{
	struct peer *p = arg;
	struct ibv_context *ctx;
	struct ibv_dm *dm;
	uint32_t handle;
	char buf[32] = { 0 };

	ctx = sv_test_recv_context(p->sock, &handle, sizeof(handle));
	dm = ibv_import_dm(ctx, handle);
	CHECK(dm);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 0, 12), 0);
	CHECK(!memcmp(buf, "from owner!", 12));
	CHECK_EQ(ibv_memcpy_to_dm(dm, 1000, answer, sizeof(answer)), 0);
	ibv_unimport_dm(dm);
	CHECK_EQ(ibv_close_device(ctx), 0);
	CHECK_EQ(write(p->sock, "k", 1), 1);
}

SV_TEST(import_across_processes)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_dm *dm;
	struct peer p;
	char buf[32] = { 0 };
	int sv[2], status;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	dm = alloc_dm(ctx, 2048);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 0, "from owner!", 12), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	CHECK_EQ(sv_test_send_fd(sv[0], ctx->cmd_fd, &dm->handle,
				 sizeof(dm->handle)), 0);
	p.sock = sv[1];
	status = sv_test_child(importer, &p);
	CHECK_EQ(status, 0);
	CHECK_EQ(read(sv[0], buf, 1), 1);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 1000, 16), 0);
	CHECK(!memcmp(buf, "from importer", 14));
	CHECK_EQ(ibv_free_dm(dm), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	close(sv[0]);
	close(sv[1]);
	sv_test_wait_quiet(&base, 5000);
}

/* The creator: allocates a DM, fills it, hands over the cmd_fd and exits
 * without freeing anything. */
static void creator(void *arg)
{
	struct peer *p = arg;
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_dm *dm = alloc_dm(ctx, 4096);

	CHECK_EQ(ibv_memcpy_to_dm(dm, 4000, "left behind", 12), 0);
	CHECK_EQ(sv_test_send_fd(p->sock, ctx->cmd_fd, &dm->handle,
				 sizeof(dm->handle)), 0);
	_exit(0); /* no free, no close: the process just goes */
}

SV_TEST(dm_outlives_creator)
{
	struct sv_status_rep base, st;
	struct ibv_context *ctx;
	struct ibv_dm *dm;
	struct peer p;
	uint32_t handle;
	char buf[16] = { 0 };
	int sv[2], fd;

	sv_test_baseline(&base);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	p.sock = sv[1];
	CHECK_EQ(sv_test_child(creator, &p), 0);
	fd = sv_test_recv_fd(sv[0], &handle, sizeof(handle));
	CHECK(fd >= 0);
	close(sv[1]);
	/* The creator is gone; our copy of the cmd_fd keeps the ufile. */
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.ufiles, base.ufiles + 1);
	CHECK_EQ(st.objects, base.objects + 1);
	ctx = ibv_import_device(fd);
	CHECK(ctx);
	dm = ibv_import_dm(ctx, handle);
	CHECK(dm);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 4000, 12), 0);
	CHECK(!memcmp(buf, "left behind", 12));
	/* Closing the last cmd_fd takes the DM with it. */
	ibv_unimport_dm(dm);
	CHECK_EQ(ibv_close_device(ctx), 0);
	close(sv[0]);
	sv_test_wait_quiet(&base, 5000);
}

/* One page of the daemon's resource list (variable-size reply). */
static void res_list(uint32_t type, struct sv_res_rep *rep)
{
	struct sv_res_req req = { .type = type };

	sv_test_res_page(&req, rep);
}

SV_TEST(res_list_shows_dm)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_dm *dm = alloc_dm(ctx, 1000);
	struct ibv_mr *mr;
	static struct sv_res_rep rep;
	int seen_dm = 0, seen_mr = 0;

	CHECK(pd);
	mr = ibv_reg_dm_mr(pd, dm, 8, 512,
			   IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	res_list(0, &rep);
	for (uint32_t i = 0; i < rep.count; i++) {
		const struct sv_res_entry *e = &rep.e[i];

		if (e->type == SV_RES_DM && e->handle == dm->handle) {
			CHECK_EQ(e->length, 1000);
			CHECK_EQ(e->usecnt, 1);
			CHECK_EQ(e->owner_pid, getpid());
			seen_dm = 1;
		}
		if (e->type == SV_RES_MR && e->handle == mr->handle) {
			CHECK_EQ(e->flags & 1, 1); /* DM MR */
			CHECK_EQ(e->length, 512);
			CHECK_EQ(e->lkey, mr->lkey);
			seen_mr = 1;
		}
	}
	CHECK(seen_dm && seen_mr);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_free_dm(dm), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* The ufile id of the DM called handle (from the daemon's resource list). */
static uint32_t ufile_of_dm(uint32_t handle)
{
	static struct sv_res_rep rep;

	res_list(SV_RES_DM, &rep);
	for (uint32_t i = 0; i < rep.count; i++)
		if (rep.e[i].handle == handle)
			return rep.e[i].ufile;
	sv_test_fail(__FILE__, __LINE__, "dm#%u not listed", handle);
}

/* body, sent as op on the DM's ufile, is refused with EINVAL. */
#define CHECK_REFUSED(op, body)                                                \
	CHECK_EQ(sv_call_simple(op, uf, 0, ctx->cmd_fd, &(body), sizeof(body), \
				NULL, 0),                                      \
		 -EINVAL)

SV_TEST(bad_requests_change_nothing)
{
	/* What a broken client could send straight to the daemon. */
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_dm *dm = alloc_dm(ctx, 64);
	struct sv_status_rep before, after;
	uint32_t uf = ufile_of_dm(dm->handle);
	struct sv_handle_req h = { .handle = dm->handle, .pad = 1 };
	struct sv_alloc_dm_req a = { .length = 1ULL << 63 };
	struct sv_reg_dm_mr_req m = { .length = 8,
				      .dm_handle = dm->handle,
				      .access = IBV_ACCESS_ZERO_BASED,
				      .pad = 1 };
	struct {
		struct sv_handle_req h;
		uint32_t extra;
	} longer = { .h = { .handle = dm->handle } };
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct sv_call c;
	int fd = dup(0);
	char buf[64];

	CHECK(pd);
	m.pd_handle = pd->handle;
	CHECK_EQ(sv_test_status(&before), 0);
	CHECK_REFUSED(SV_OP_FREE_DM, longer);
	CHECK_REFUSED(SV_OP_FREE_DM, h);
	CHECK_REFUSED(SV_OP_IMPORT_DM, h);
	CHECK_REFUSED(SV_OP_ALLOC_DM, a);
	CHECK_REFUSED(SV_OP_REG_DM_MR, m);
	/* A descriptor where none belongs. */
	h.pad = 0;
	c = (struct sv_call){ .op = SV_OP_FREE_DM, .ufile = uf,
			      .attach_fd = ctx->cmd_fd, .req = &h,
			      .req_len = sizeof(h), .fds = &fd, .nfds = 1 };
	CHECK_EQ(sv_call(&c), -EINVAL);
	CHECK_EQ(sv_test_status(&after), 0);
	CHECK_EQ(after.objects, before.objects);
	CHECK_EQ(after.open_fds, before.open_fds);
	/* The DM is intact and its memory still shared with the daemon. */
	CHECK_EQ(ibv_memcpy_to_dm(dm, 0, "ok!", 4), 0);
	CHECK_EQ(ibv_memcpy_from_dm(buf, dm, 0, 4), 0);
	CHECK(!memcmp(buf, "ok!", 4));
	CHECK_EQ(ibv_free_dm(dm), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	close(fd);
}

SV_TEST_MAIN()

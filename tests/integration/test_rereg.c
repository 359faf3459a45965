/* SPDX-License-Identifier: MIT */
/* ibv_rereg_mr: every error code, the order of checks, keys and handle
 * stable, use counts moved by CHANGE_PD, fork protection moved with the
 * range. */
#include "pd_mr_util.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>

struct fixture {
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *buf;
	uint32_t lkey, rkey, handle;
};

static void setup(struct fixture *f)
{
	sv_test_baseline(&f->base);
	f->ctx = sv_test_open_dev();
	f->pd = ibv_alloc_pd(f->ctx);
	CHECK(f->pd);
	f->buf = pages(4);
	f->mr = ibv_reg_mr(f->pd, f->buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(f->mr);
	f->lkey = f->mr->lkey;
	f->rkey = f->mr->rkey;
	f->handle = f->mr->handle;
}

/* The MR is as registered at setup (or moved to addr/len). */
static void unchanged(struct fixture *f, void *addr, size_t len)
{
	CHECK(f->mr->addr == addr);
	CHECK_EQ(f->mr->length, len);
	CHECK_EQ(f->mr->lkey, f->lkey);
	CHECK_EQ(f->mr->rkey, f->rkey);
	CHECK_EQ(f->mr->handle, f->handle);
}

static void teardown(struct fixture *f)
{
	CHECK_EQ(ibv_dereg_mr(f->mr), 0);
	CHECK_EQ(ibv_dealloc_pd(f->pd), 0);
	CHECK_EQ(ibv_close_device(f->ctx), 0);
	sv_test_wait_quiet(&f->base, 5000);
}

#define CHECK_REREG(call, code, err)                                           \
	do {                                                                   \
		errno = 0;                                                     \
		CHECK_EQ(call, code);                                          \
		CHECK_EQ(errno, err);                                          \
	} while (0)

SV_TEST(input_errors_leave_mr_alone)
{
	struct fixture f;

	setup(&f);
	/* Unknown flag bits, negative flags. */
	CHECK_REREG(ibv_rereg_mr(f.mr, 8, NULL, NULL, 0, 0),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_REREG(ibv_rereg_mr(f.mr, -1, NULL, NULL, 0, 0),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	/* Translation without an address or a length. */
	CHECK_REREG(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
				 NULL, 4096, 0),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_REREG(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
				 f.buf, 0, 0),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	/* Access without CHANGE_ACCESS. */
	CHECK_REREG(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
				 f.buf, 4096, IBV_ACCESS_LOCAL_WRITE),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	/* The order: unknown flags win over a bad translation. */
	CHECK_REREG(ibv_rereg_mr(f.mr, 8 | IBV_REREG_MR_CHANGE_TRANSLATION,
				 NULL, NULL, 0, 1),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	unchanged(&f, f.buf, 4096);
	teardown(&f);
}

SV_TEST(input_error_for_imported_and_dmabuf)
{
	struct fixture f;
	struct ibv_mr *imp, *dmr;
	int mfd = (int)syscall(SYS_memfd_create, "svtest", 0);

	CHECK(mfd >= 0);
	CHECK_EQ(ftruncate(mfd, 8192), 0);
	setup(&f);
	imp = ibv_import_mr(f.pd, f.mr->handle);
	CHECK(imp);
	CHECK_REREG(ibv_rereg_mr(imp, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				 0, 0),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	ibv_unimport_mr(imp);
	dmr = ibv_reg_dmabuf_mr(f.pd, 0, 8192, 0, mfd, 0);
	CHECK(dmr);
	CHECK_REREG(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				 0, 0),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_EQ(ibv_dereg_mr(dmr), 0);
	close(mfd);
	unchanged(&f, f.buf, 4096);
	teardown(&f);
}

/* v44 lets DM MRs through to the kernel (ERR_CMD); our spec refuses them
 * in the library like the other MRs that are not plain registrations. */
SV_TEST(input_error_for_dm_mr)
{
	struct fixture f;
	struct ibv_alloc_dm_attr attr = { .length = 4096 };
	struct ibv_dm *dm;
	struct ibv_mr *dmr;

	setup(&f);
	dm = ibv_alloc_dm(f.ctx, &attr);
	CHECK(dm);
	dmr = ibv_reg_dm_mr(f.pd, dm, 0, 4096,
			    IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE);
	CHECK(dmr);
	CHECK_REREG(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				 0, 0),
		    IBV_REREG_MR_ERR_INPUT, EINVAL);
	CHECK_EQ(ibv_dereg_mr(dmr), 0);
	CHECK_EQ(ibv_free_dm(dm), 0);
	teardown(&f);
}

SV_TEST(cmd_errors)
{
	struct fixture f;
	struct ibv_pd *gone, *view;

	setup(&f);
	/* flags 0 passes the library and the device refuses it. */
	CHECK_REREG(ibv_rereg_mr(f.mr, 0, NULL, NULL, 0, 0),
		    IBV_REREG_MR_ERR_CMD, EINVAL);
	/* Remote write without local write. */
	CHECK_REREG(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				 0, IBV_ACCESS_REMOTE_WRITE),
		    IBV_REREG_MR_ERR_CMD, EINVAL);
	CHECK_REREG(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				 0, 1 << 14),
		    IBV_REREG_MR_ERR_CMD, EINVAL);
	/* A PD that no longer exists. */
	gone = ibv_alloc_pd(f.ctx);
	CHECK(gone);
	view = ibv_import_pd(f.ctx, gone->handle);
	CHECK(view);
	CHECK_EQ(ibv_dealloc_pd(gone), 0);
	CHECK_REREG(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_PD, view, NULL, 0,
				 0),
		    IBV_REREG_MR_ERR_CMD, EINVAL);
	ibv_unimport_pd(view);
	/* A bad translation with the command failing: ERR_CMD, and the new
	 * range's fork protection given back. */
	CHECK_REREG(ibv_rereg_mr(f.mr,
				 IBV_REREG_MR_CHANGE_TRANSLATION |
					 IBV_REREG_MR_CHANGE_ACCESS,
				 NULL, f.buf + 4096, 4096,
				 IBV_ACCESS_REMOTE_ATOMIC),
		    IBV_REREG_MR_ERR_CMD, EINVAL);
	CHECK(f.mr->pd == f.pd);
	unchanged(&f, f.buf, 4096);
	teardown(&f);
}

SV_TEST(change_pd_moves_use_count)
{
	struct fixture f;
	struct ibv_pd *pd2, *old;
	struct sv_res_entry e;

	setup(&f);
	pd2 = ibv_alloc_pd(f.ctx);
	CHECK(pd2);
	CHECK_EQ(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0),
		 0);
	CHECK(f.mr->pd == pd2);
	CHECK(f.mr->context == f.ctx);
	unchanged(&f, f.buf, 4096);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, f.lkey, &e), 0);
	CHECK_EQ(e.pd_handle, pd2->handle);
	CHECK_EQ(ibv_dealloc_pd(pd2), EBUSY);
	/* The old PD is free now. */
	old = f.pd;
	f.pd = pd2;
	CHECK_EQ(ibv_dealloc_pd(old), 0);
	teardown(&f);
}

SV_TEST(pd_untouched_without_change_pd)
{
	struct fixture f;
	struct sv_res_entry e;

	setup(&f);
	/* pd is garbage: it must not be read. */
	CHECK_EQ(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_ACCESS,
			      (struct ibv_pd *)(uintptr_t)0x10,
			      NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ),
		 0);
	CHECK(f.mr->pd == f.pd);
	unchanged(&f, f.buf, 4096);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, f.lkey, &e), 0);
	CHECK_EQ(e.access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ);
	teardown(&f);
}

SV_TEST(change_translation_keeps_keys)
{
	struct fixture f;
	struct sv_res_entry e;
	struct ibv_pd *pd2;

	setup(&f);
	CHECK_EQ(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			      f.buf + 4096 + 12, 8000, 0),
		 0);
	unchanged(&f, f.buf + 4096 + 12, 8000);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, f.lkey, &e), 0);
	CHECK_EQ(e.iova, (uintptr_t)f.buf + 4096 + 12);
	CHECK_EQ(e.length, 8000);
	/* All three at once. */
	pd2 = ibv_alloc_pd(f.ctx);
	CHECK(pd2);
	CHECK_EQ(ibv_rereg_mr(f.mr,
			      IBV_REREG_MR_CHANGE_TRANSLATION |
				      IBV_REREG_MR_CHANGE_PD |
				      IBV_REREG_MR_CHANGE_ACCESS,
			      pd2, f.buf, 16384, IBV_ACCESS_ON_DEMAND),
		 0);
	unchanged(&f, f.buf, 16384);
	CHECK(f.mr->pd == pd2);
	CHECK_EQ(ibv_dealloc_pd(f.pd), 0);
	f.pd = pd2;
	teardown(&f);
}

/* With ibv_fork_init: the protection follows the range. */
SV_TEST(translation_moves_fork_protection)
{
	struct fixture f;

	CHECK_EQ(ibv_fork_init(), 0);
	setup(&f);
	CHECK_EQ(sv_test_child_read(f.buf), -SIGSEGV);
	CHECK_EQ(sv_test_child_read(f.buf + 8192), 0x5a);
	CHECK_EQ(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			      f.buf + 8192, 4096, 0),
		 0);
	CHECK_EQ(sv_test_child_read(f.buf), 0x5a);
	CHECK_EQ(sv_test_child_read(f.buf + 8192), -SIGSEGV);
	teardown(&f);
}

SV_TEST(err_dont_fork_new)
{
	struct fixture f;
	char *hole;

	CHECK_EQ(ibv_fork_init(), 0);
	setup(&f);
	hole = f.buf + 8192;
	CHECK_EQ(munmap(hole, 8192), 0);
	/* madvise(MADV_DONTFORK) on unmapped memory fails. */
	CHECK_EQ(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			      hole, 4096, 0),
		 IBV_REREG_MR_ERR_DONT_FORK_NEW);
	unchanged(&f, f.buf, 4096);
	/* The old MR is valid and still protected. */
	CHECK_EQ(sv_test_child_read(f.buf), -SIGSEGV);
	CHECK_EQ(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      0),
		 0);
	teardown(&f);
}

/* ibv_dofork_range cannot fail for an unprivileged process (MADV_DOFORK
 * fails only on VM_IO mappings), so these two use the library's test-only
 * fault injection (SOFTVERBS_FAULT, src/verbs/mr.c). */
SV_TEST(err_do_fork_old)
{
	struct fixture f;
	struct sv_res_entry e;

	CHECK_EQ(ibv_fork_init(), 0);
	setup(&f);
	setenv("SOFTVERBS_FAULT", "rereg_dofork_old", 1);
	CHECK_EQ(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			      f.buf + 8192, 4096, 0),
		 IBV_REREG_MR_ERR_DO_FORK_OLD);
	unsetenv("SOFTVERBS_FAULT");
	/* The new MR is in force. */
	unchanged(&f, f.buf + 8192, 4096);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, f.lkey, &e), 0);
	CHECK_EQ(e.iova, (uintptr_t)f.buf + 8192);
	CHECK_EQ(sv_test_child_read(f.buf + 8192), -SIGSEGV);
	teardown(&f);
}

SV_TEST(err_cmd_and_do_fork_new)
{
	struct fixture f;

	CHECK_EQ(ibv_fork_init(), 0);
	setup(&f);
	setenv("SOFTVERBS_FAULT", "rereg_dofork_new", 1);
	/* The command fails (remote write without local write)... */
	CHECK_REREG(ibv_rereg_mr(f.mr,
				 IBV_REREG_MR_CHANGE_TRANSLATION |
					 IBV_REREG_MR_CHANGE_ACCESS,
				 NULL, f.buf + 8192, 4096,
				 IBV_ACCESS_REMOTE_WRITE),
		    IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW, EINVAL);
	/* ...and without a translation there is no new range to give back. */
	CHECK_REREG(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				 0, IBV_ACCESS_REMOTE_WRITE),
		    IBV_REREG_MR_ERR_CMD, EINVAL);
	unsetenv("SOFTVERBS_FAULT");
	unchanged(&f, f.buf, 4096);
	teardown(&f);
}

SV_TEST(rereg_stale_mr)
{
	struct fixture f;
	struct ibv_mr *view;

	setup(&f);
	view = ibv_import_mr(f.pd, f.mr->handle);
	CHECK(view);
	/* Destroyed through the imported view: the original is dead too. */
	CHECK_EQ(ibv_dereg_mr(view), 0);
	CHECK_REREG(ibv_rereg_mr(f.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				 0, 0),
		    IBV_REREG_MR_ERR_CMD, ENOENT);
	CHECK_EQ(ibv_dereg_mr(f.mr), ENOENT);
	ibv_unimport_mr(f.mr);
	CHECK_EQ(ibv_dealloc_pd(f.pd), 0);
	CHECK_EQ(ibv_close_device(f.ctx), 0);
	sv_test_wait_quiet(&f.base, 5000);
}

SV_TEST_MAIN()

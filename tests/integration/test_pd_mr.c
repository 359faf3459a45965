/* SPDX-License-Identifier: MIT */
/* PDs and MRs: allocation, use counts, access checks, ODP, dma-buf, keys,
 * handles, owners, fork protection, and no leak in the daemon. */
#include "pd_mr_util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

SV_TEST(pd_alloc_dealloc)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd2;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK(pd->context == ctx);
	pd2 = ibv_alloc_pd(ctx);
	CHECK(pd2);
	CHECK(pd2->handle != pd->handle);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(pd_busy_until_mr_gone)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr1, *mr2;
	char *buf = pages(2);

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	mr1 = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	mr2 = ibv_reg_mr(pd, buf + 4096, 4096, 0);
	CHECK(mr1 && mr2);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_dereg_mr(mr1), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_dereg_mr(mr2), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

static void check_mr(struct ibv_mr *mr, struct ibv_pd *pd, void *addr,
		     size_t len)
{
	CHECK(mr);
	CHECK(mr->pd == pd);
	CHECK(mr->context == pd->context);
	CHECK(mr->addr == addr);
	CHECK_EQ(mr->length, len);
	CHECK(mr->lkey >= 256);
	CHECK_EQ(mr->rkey, mr->lkey);
}

SV_TEST(reg_mr_every_entry_point)
{
	struct sv_status_rep base;
	struct sv_res_entry e;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr[5];
	char *buf = pages(4);
	volatile int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	/* The exported symbol, as an old binary calls it. */
	mr[0] = (ibv_reg_mr)(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	check_mr(mr[0], pd, buf, 4096);
	/* The verbs.h macro with a non-constant access: ibv_reg_mr_iova2. */
	mr[1] = ibv_reg_mr(pd, buf + 100, 300, access);
	check_mr(mr[1], pd, buf + 100, 300);
	/* iova: same page offset as the address. */
	mr[2] = (ibv_reg_mr_iova)(pd, buf + 8, 4096, 0x7000000008ULL,
				  IBV_ACCESS_LOCAL_WRITE);
	check_mr(mr[2], pd, buf + 8, 4096);
	mr[3] = ibv_reg_mr_iova2(pd, buf, 8192, 0x10000, access);
	check_mr(mr[3], pd, buf, 8192);
	mr[4] = ibv_reg_mr(pd, buf + 16, 64,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED);
	check_mr(mr[4], pd, buf + 16, 64);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < i; j++)
			CHECK(mr[i]->lkey != mr[j]->lkey &&
			      mr[i]->handle != mr[j]->handle);

	/* What the device recorded. */
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, mr[1]->lkey, &e), 0);
	CHECK_EQ(e.iova, (uintptr_t)buf + 100);
	CHECK_EQ(e.length, 300);
	CHECK_EQ(e.access, access);
	CHECK_EQ(e.pd_handle, pd->handle);
	CHECK_EQ(e.owner_pid, getpid());
	CHECK_EQ(e.flags, 0);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, mr[2]->lkey, &e), 0);
	CHECK_EQ(e.iova, 0x7000000008ULL);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, mr[4]->lkey, &e), 0);
	CHECK_EQ(e.iova, 0); /* zero based */
	CHECK_EQ(res_find(SV_RES_PD, e.ufile, pd->handle, 0, &e), 0);
	CHECK_EQ(e.usecnt, 5);
	CHECK_EQ(e.owner_pid, getpid());

	for (int i = 0; i < 5; i++)
		CHECK_EQ(ibv_dereg_mr(mr[i]), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(reg_mr_access_checks)
{
	struct sv_status_rep base;
	struct sv_res_entry e;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *buf = pages(2);
	volatile unsigned int opt = 1u << 25; /* optional, unknown to us */

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE),
			 EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_ATOMIC),
			 EINVAL);
	CHECK_NULL_ERRNO((ibv_reg_mr)(pd, buf, 4096, 1 << 15), EINVAL);
	/* iova must keep the address's page offset. */
	CHECK_NULL_ERRNO(ibv_reg_mr_iova(pd, buf + 8, 64, 0x10000, 0), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 0, 0), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, SIZE_MAX, 0), EINVAL);

	/* Unsupported optional bits are dropped, relaxed ordering kept. */
	mr = ibv_reg_mr(pd, buf, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_RELAXED_ORDERING | opt);
	CHECK(mr);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, mr->lkey, &e), 0);
	CHECK_EQ(e.access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_RELAXED_ORDERING);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	/* Every classic bit together is fine. */
	mr = ibv_reg_mr(pd, buf, 4096, 0xff & ~IBV_ACCESS_ON_DEMAND);
	CHECK(mr);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(reg_mr_bad_pd)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd, *view;
	char *buf = pages(1);

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	view = ibv_import_pd(ctx, pd->handle);
	CHECK(view);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	/* The view's PD is gone: the kernel's write ABI answers EINVAL. */
	CHECK_NULL_ERRNO(ibv_reg_mr(view, buf, 4096, 0), EINVAL);
	ibv_unimport_pd(view);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

static long rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

SV_TEST(odp_and_no_pinning)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr, *huge, *odp;
	size_t big = 1ULL << 40; /* 1 TiB of address space */
	/* Reserved writable address space: the kernel's pinning would need
	 * every page, and would fail on PROT_NONE (see efault tests). */
	void *space = mmap(NULL, big, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char *buf = pages(1);
	long before;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK(space != MAP_FAILED);
	before = rss_kb();
	/* Nothing is pinned or touched: no page of it exists. */
	huge = ibv_reg_mr(pd, space, big, IBV_ACCESS_LOCAL_WRITE);
	CHECK(huge);
	CHECK_EQ(huge->length, big);
	CHECK(rss_kb() - before < 16 * 1024);

	odp = ibv_reg_mr(pd, buf, 4096,
			 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE);
	CHECK(odp);
	/* Implicit ODP: the whole address space. */
	mr = ibv_reg_mr(pd, NULL, SIZE_MAX,
			IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	CHECK(mr->addr == NULL);
	CHECK_EQ(mr->length, SIZE_MAX);
	CHECK(mr->lkey != odp->lkey);
	/* SIZE_MAX is only implicit ODP from address 0. */
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, SIZE_MAX, IBV_ACCESS_ON_DEMAND),
			 EINVAL);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dereg_mr(odp), 0);
	CHECK_EQ(ibv_dereg_mr(huge), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	munmap(space, big);
	sv_test_wait_quiet(&base, 5000);
}

/* One SGE advised; the return value, and errno the same when it fails. */
static int advise1(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		   uint32_t flags, uint32_t lkey, void *addr, uint32_t len)
{
	struct ibv_sge sg = { (uintptr_t)addr, len, lkey };
	int r;

	errno = 0;
	r = ibv_advise_mr(pd, advice, flags, &sg, 1);
	if (r)
		CHECK_EQ(errno, r);
	return r;
}

/* ibv_advise_mr: every prefetch of a good range succeeds, synchronous or
 * not; the man page's errors otherwise. */
SV_TEST(advise_mr_prefetch)
{
	const uint32_t flush = IBV_ADVISE_MR_FLAG_FLUSH;
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	char *buf = pages(4), *gone = pages(1);
	struct ibv_mr *odp, *ro, *imp;
	struct ibv_sge two[2];

	CHECK(pd && pd2);
	odp = ibv_reg_mr(pd, buf, 4 * 4096,
			 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE);
	ro = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_ON_DEMAND);
	imp = ibv_reg_mr(pd, NULL, SIZE_MAX,
			 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE);
	CHECK(odp && ro && imp);
	/* Unmapped only now: what the library maps came before. */
	munmap(gone, 4096);
	for (int a = IBV_ADVISE_MR_ADVICE_PREFETCH;
	     a <= IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT; a++) {
		CHECK_EQ(advise1(pd, a, flush, odp->lkey, buf, 4 * 4096), 0);
		CHECK_EQ(advise1(pd, a, 0, odp->lkey, buf + 100, 5000), 0);
		CHECK_EQ(advise1(pd, a, flush, imp->lkey, buf, 4096), 0);
	}
	two[0] = (struct ibv_sge){ (uintptr_t)buf, 4096, odp->lkey };
	two[1] = (struct ibv_sge){ (uintptr_t)buf + 8192, 8192, imp->lkey };
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, flush,
			       two, 2), 0);
	/* Not an advice this device knows; flags and the list. */
	CHECK_EQ(advise1(pd, 3, flush, odp->lkey, buf, 4096), EOPNOTSUPP);
	CHECK_EQ(advise1(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, odp->lkey, buf,
			 4096), EINVAL);
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, two, 0),
		 EINVAL);
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, NULL,
			       1), EINVAL);
	/* An lkey that is no MR, or of another PD; out of the MR; a write
	 * prefetch without LOCAL_WRITE (a read one is fine); memory not
	 * mapped under the implicit MR; the second SGE of two bad. */
	CHECK_EQ(advise1(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush,
			 odp->lkey ^ 0x100, buf, 4096), EFAULT);
	CHECK_EQ(advise1(pd2, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, odp->lkey,
			 buf, 4096), EFAULT);
	CHECK_EQ(advise1(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, odp->lkey,
			 buf + 4096, 4 * 4096), EFAULT);
	CHECK_EQ(advise1(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, flush,
			 ro->lkey, buf, 4096), EFAULT);
	CHECK_EQ(advise1(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, ro->lkey,
			 buf, 4096), 0);
	CHECK_EQ(advise1(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, imp->lkey,
			 gone, 4096), EFAULT);
	two[1].addr = (uintptr_t)gone;
	two[1].length = 4096;
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, two, 2),
		 EFAULT);
	CHECK_EQ(ibv_dereg_mr(imp), 0);
	CHECK_EQ(ibv_dereg_mr(ro), 0);
	/* Deregistered: its lkey is no MR any more. */
	{
		uint32_t lkey = odp->lkey;

		CHECK_EQ(ibv_dereg_mr(odp), 0);
		CHECK_EQ(advise1(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, lkey,
				 buf, 4096), EFAULT);
	}
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	munmap(buf, 4 * 4096);
}

static int pd_allocs;

static void *count_alloc(struct ibv_pd *pd, void *ctx, size_t size,
			 size_t align, uint64_t type)
{
	(void)pd, (void)ctx, (void)size, (void)align, (void)type;
	pd_allocs++;
	return IBV_ALLOCATOR_USE_DEFAULT;
}

static void count_free(struct ibv_pd *pd, void *ctx, void *ptr, uint64_t type)
{
	(void)pd, (void)ctx, (void)ptr, (void)type;
	pd_allocs++;
}

/* Thread and parent domains: a parent domain stands for its PD (same
 * handle; MRs, CQs, QPs, SRQs made on it), and nothing goes while
 * something made on it is left, as with mlx5. */
SV_TEST(parent_domain_and_td)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *par, *pd2 = ibv_alloc_pd(ctx);
	struct ibv_td_init_attr tda = { .comp_mask = 1 };
	struct ibv_parent_domain_init_attr pa = { 0 };
	struct ibv_cq_init_attr_ex ca = { .cqe = 8,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC };
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr got;
	char *buf = pages(1);
	struct ibv_cq_ex *cq;
	struct ibv_srq *srq;
	struct ibv_td *td;
	struct ibv_mr *mr;
	struct ibv_qp *qp;

	CHECK(pd && pd2);
	CHECK_NULL_ERRNO(ibv_alloc_td(ctx, &tda), EINVAL);
	tda.comp_mask = 0;
	td = ibv_alloc_td(ctx, &tda);
	CHECK(td);
	CHECK(td->context == ctx);
	/* No PD; unknown comp_mask bits. */
	CHECK_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	pa.pd = pd;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT << 1;
	CHECK_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	pa.td = td;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
		       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	pa.alloc = count_alloc;
	pa.free = count_free;
	par = ibv_alloc_parent_domain(ctx, &pa);
	CHECK(par);
	CHECK(par != pd && par->handle == pd->handle && par->context == ctx);
	/* A parent domain is not a PD for another one. */
	pa.pd = par;
	CHECK_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	/* The PD and the TD stay while the parent domain does. */
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(errno, EBUSY);
	CHECK_EQ(ibv_dealloc_td(td), EBUSY);

	/* Objects on it: a CQ wants a parent domain, not a PD. */
	ca.parent_domain = pd2;
	CHECK_NULL_ERRNO(ibv_create_cq_ex(ctx, &ca), EINVAL);
	ca.parent_domain = par;
	cq = ibv_create_cq_ex(ctx, &ca);
	CHECK(cq);
	mr = ibv_reg_mr(par, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	CHECK(mr->pd == par);
	srq = ibv_create_srq(par, &sa);
	CHECK(srq);
	qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(cq);
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qp = ibv_create_qp(par, &qa);
	CHECK(qp);
	CHECK(qp->pd == par);
	CHECK_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &got), 0);
	CHECK(got.send_cq == ibv_cq_ex_to_cq(cq));
	CHECK_EQ(ibv_dealloc_pd(par), EBUSY);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_dealloc_pd(par), EBUSY); /* the SRQ and the CQ */
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	CHECK_EQ(ibv_dealloc_pd(par), EBUSY); /* the CQ */
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	CHECK_EQ(ibv_dealloc_pd(par), 0);
	/* The MR was registered on the PD: it keeps it busy in the daemon. */
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_td(td), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	/* Its allocators are never called (the queues are shared regions). */
	CHECK_EQ(pd_allocs, 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	munmap(buf, 4096);
}

SV_TEST(dmabuf_memfd)
{
	struct sv_status_rep base;
	struct sv_res_entry e;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	int mfd = (int)syscall(SYS_memfd_create, "svtest", 0);
	int pfd[2];

	CHECK(mfd >= 0);
	CHECK_EQ(ftruncate(mfd, 65536), 0);
	CHECK_EQ(pipe(pfd), 0);
	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	mr = ibv_reg_dmabuf_mr(pd, 4096, 8192, 0x20000,
			       mfd, IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_READ);
	CHECK(mr);
	CHECK((uintptr_t)mr->addr == 4096);
	CHECK_EQ(mr->length, 8192);
	CHECK(mr->pd == pd && mr->context == ctx);
	CHECK_EQ(res_find(SV_RES_MR, 0, 0, mr->lkey, &e), 0);
	CHECK_EQ(e.flags, 2); /* dma-buf */
	CHECK_EQ(e.iova, 0x20000);
	/* The daemon keeps its own reference: closing ours changes nothing. */
	CHECK_EQ(close(mfd), 0);
	mfd = (int)syscall(SYS_memfd_create, "svtest2", 0);
	CHECK(mfd >= 0);
	CHECK_EQ(ftruncate(mfd, 8192), 0);
	/* Beyond the end of the file. */
	CHECK_NULL_ERRNO(ibv_reg_dmabuf_mr(pd, 4096, 8192, 4096, mfd, 0),
			 EINVAL);
	/* ODP makes no sense on a dma-buf. */
	CHECK_NULL_ERRNO(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, mfd,
					   IBV_ACCESS_ON_DEMAND),
			 EINVAL);
	/* Neither a dma-buf nor shared memory. */
	CHECK_NULL_ERRNO(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, pfd[0], 0),
			 EOPNOTSUPP);
	CHECK_NULL_ERRNO(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, 0), EBADF);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	close(mfd);
	sv_test_wait_quiet(&base, 5000);
}

/* udmabuf needs /dev/udmabuf (a kernel module); skipped when absent. */
SV_TEST(dmabuf_udmabuf)
{
	struct udmabuf_create {
		uint32_t memfd, flags;
		uint64_t offset, size;
	} cr;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	int dev = open("/dev/udmabuf", O_RDWR), mfd, buf;

	if (dev < 0) {
		fprintf(stderr, "SKIP: no /dev/udmabuf\n");
		return;
	}
	mfd = (int)syscall(SYS_memfd_create, "svtest", 2 /* ALLOW_SEALING */);
	CHECK(mfd >= 0);
	CHECK_EQ(ftruncate(mfd, 65536), 0);
	CHECK_EQ(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	cr = (struct udmabuf_create){ .memfd = (uint32_t)mfd, .size = 65536 };
	buf = ioctl(dev, 0x40187542 /* UDMABUF_CREATE */, &cr);
	CHECK(buf >= 0);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	mr = ibv_reg_dmabuf_mr(pd, 0, 65536, 0, buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(keys_stale_after_reuse)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *a, *b, *c;
	char *buf = pages(1);
	uint32_t old;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	a = ibv_reg_mr(pd, buf, 4096, 0);
	b = ibv_reg_mr(pd, buf, 4096, 0);
	CHECK(a && b);
	old = a->lkey;
	CHECK_EQ(ibv_dereg_mr(a), 0);
	c = ibv_reg_mr(pd, buf, 4096, 0);
	CHECK(c);
	/* Same slot of the key table, another tag: the old key is dead. */
	CHECK_EQ(c->lkey >> 8, old >> 8);
	CHECK(c->lkey != old);
	CHECK_EQ(c->rkey, c->lkey);
	/* Keys are device wide: another ufile gets other keys. */
	{
		struct ibv_context *ctx2 = sv_test_open_dev();
		struct ibv_pd *pd2 = ibv_alloc_pd(ctx2);
		struct ibv_mr *d = ibv_reg_mr(pd2, buf, 4096, 0);
		struct sv_res_entry e;

		CHECK(d);
		CHECK(d->lkey != b->lkey && d->lkey != c->lkey);
		CHECK_EQ(res_find(SV_RES_MR, 0, 0, old, &e), -1);
		CHECK_EQ(res_find(SV_RES_MR, 0, 0, c->lkey, &e), 0);
		CHECK_EQ(e.handle, c->handle);
		CHECK_EQ(ibv_dereg_mr(d), 0);
		CHECK_EQ(ibv_dealloc_pd(pd2), 0);
		CHECK_EQ(ibv_close_device(ctx2), 0);
	}
	CHECK_EQ(ibv_dereg_mr(b), 0);
	CHECK_EQ(ibv_dereg_mr(c), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(handles_lowest_free_shared)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd0, *pd3, *pdx;
	struct ibv_mr *mr1, *mr2, *mry;
	char *buf = pages(1);

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd0 = ibv_alloc_pd(ctx);
	mr1 = ibv_reg_mr(pd0, buf, 4096, 0);
	mr2 = ibv_reg_mr(pd0, buf, 4096, 0);
	pd3 = ibv_alloc_pd(ctx);
	CHECK(pd0 && mr1 && mr2 && pd3);
	CHECK_EQ(pd0->handle, 0);
	CHECK_EQ(mr1->handle, 1);
	CHECK_EQ(mr2->handle, 2);
	CHECK_EQ(pd3->handle, 3);
	/* A freed MR handle goes to the next object, whatever its type. */
	CHECK_EQ(ibv_dereg_mr(mr1), 0);
	pdx = ibv_alloc_pd(ctx);
	CHECK(pdx);
	CHECK_EQ(pdx->handle, 1);
	CHECK_EQ(ibv_dealloc_pd(pdx), 0);
	CHECK_EQ(ibv_dealloc_pd(pd3), 0);
	mry = ibv_reg_mr(pd0, buf, 4096, 0);
	CHECK(mry);
	CHECK_EQ(mry->handle, 1);
	CHECK_EQ(ibv_dereg_mr(mry), 0);
	CHECK_EQ(ibv_dereg_mr(mr2), 0);
	CHECK_EQ(ibv_dealloc_pd(pd0), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

/* Closing the device with objects left destroys them all (no leak). */
SV_TEST(close_with_objects_left)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char *buf = pages(1);

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	for (int i = 0; i < 100; i++)
		CHECK(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE));
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

/* With ibv_fork_init, registered memory is not inherited by children
 * (MADV_DONTFORK) until the last registration covering it goes; ODP
 * memory is never protected. */
SV_TEST(fork_protection_follows_registration)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr, *mr2, *odp;
	char *buf = pages(2);

	CHECK_EQ(ibv_fork_init(), 0);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	mr2 = ibv_reg_mr(pd, buf, 4096, 0);
	CHECK(mr && mr2);
	CHECK_EQ(sv_test_child_read(buf), -SIGSEGV);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(sv_test_child_read(buf), -SIGSEGV);
	CHECK_EQ(ibv_dereg_mr(mr2), 0);
	CHECK_EQ(sv_test_child_read(buf), 0x5a);
	odp = ibv_reg_mr(pd, buf + 4096, 4096, IBV_ACCESS_ON_DEMAND);
	CHECK(odp);
	CHECK_EQ(sv_test_child_read(buf + 4096), 0x5a);
	CHECK_EQ(ibv_dereg_mr(odp), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* A failed registration gives the fork protection back. */
SV_TEST(failed_reg_undoes_dontfork)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char *buf = pages(1);

	CHECK_EQ(ibv_fork_init(), 0);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE),
			 EINVAL);
	CHECK_EQ(sv_test_child_read(buf), 0x5a);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* Registration makes ibv_fork_init too late (v44). */
SV_TEST(fork_init_after_reg_is_too_late)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr(pd, pages(1), 4096, 0);

	CHECK(mr);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_fork_init(), EINVAL);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* ---- memory that is not there ------------------------------------------ */

#define LW IBV_ACCESS_LOCAL_WRITE

/* reg must fail with EFAULT and leave nothing behind. */
static void check_efault(struct ibv_pd *pd, void *addr, size_t len,
			 int access)
{
	struct sv_status_rep before, after;

	CHECK_EQ(sv_test_status(&before), 0);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, addr, len, access), EFAULT);
	CHECK_EQ(sv_test_status(&after), 0);
	CHECK_EQ(after.objects, before.objects);
}

/*
 * The same for a range we unmapped: another thread of this process (the
 * sanitizer's allocator, a progress thread) may map something there
 * between our munmap and the registration.  A registration that succeeds
 * over memory that is there again is right; only one over a hole is not.
 */
static void check_efault_hole(struct ibv_pd *pd, void *addr, size_t len,
			      int access)
{
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)4095;
	size_t l = (uintptr_t)addr + len - a;
	struct sv_status_rep before, after;
	struct ibv_mr *mr;

	CHECK_EQ(sv_test_status(&before), 0);
	mr = ibv_reg_mr(pd, addr, len, access);
	if (!mr) {
		CHECK_EQ(errno, EFAULT);
		CHECK_EQ(sv_test_status(&after), 0);
		CHECK_EQ(after.objects, before.objects);
		return;
	}
	/* msync: ENOMEM when any page of the range is unmapped. */
	if (msync((void *)a, l, MS_ASYNC) != 0)
		sv_test_fail(__FILE__, __LINE__,
			     "ibv_reg_mr over a hole at %p+%zu succeeded", addr, len);
	printf("note: %p+%zu was mapped again meanwhile\n", addr, len);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
}

static void check_regs(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);

	CHECK(mr);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
}

/*
 * ibv_reg_mr answers what the kernel's pinning (ib_umem_get) answers:
 * EFAULT for a hole anywhere in the range, for memory that cannot be read,
 * and for read-only memory when the MR may be written (LOCAL_WRITE, REMOTE
 * WRITE, REMOTE_ATOMIC, MW_BIND).  ODP registrations are not pinned.
 */
static void efault_cases(void)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *gone = pages(4), *holed = pages(3), *ro, *none, *mixed;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK_EQ(munmap(gone, 4 * 4096), 0);
	CHECK_EQ(munmap(holed + 4096, 4096), 0);
	ro = mmap(NULL, 2 * 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED && none != MAP_FAILED);
	/* rw page then ro page, adjacent (one range, two mappings). */
	mixed = pages(2);
	CHECK_EQ(mprotect(mixed + 4096, 4096, PROT_READ), 0);

	/* Unmapped, whole or in part. */
	check_efault_hole(pd, gone, 4096, 0);
	check_efault_hole(pd, gone + 100, 8000, LW);
	check_efault_hole(pd, holed, 3 * 4096, 0);
	check_efault_hole(pd, holed + 4000, 200, LW);
	check_efault_hole(pd, holed + 4095, 2, 0);
	check_regs(pd, holed, 4096, LW);
	check_regs(pd, holed + 2 * 4096, 4096, LW);
	/* Read-only memory: readable MRs only. */
	check_regs(pd, ro, 2 * 4096, 0);
	check_regs(pd, ro + 10, 100, IBV_ACCESS_REMOTE_READ);
	check_efault(pd, ro, 4096, LW);
	check_efault(pd, ro, 4096, LW | IBV_ACCESS_REMOTE_WRITE);
	check_efault(pd, ro, 4096, LW | IBV_ACCESS_REMOTE_ATOMIC);
	check_efault(pd, ro, 4096, IBV_ACCESS_MW_BIND);
	check_efault(pd, mixed, 2 * 4096, LW);
	check_regs(pd, mixed, 2 * 4096, IBV_ACCESS_REMOTE_READ);
	check_regs(pd, mixed, 4096, LW);
	/* Memory nobody can read. */
	check_efault(pd, none, 4096, 0);
	check_efault(pd, none, 4096, LW);
	/* The kernel checks access flags first: EINVAL wins. */
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, gone, 4096, IBV_ACCESS_REMOTE_WRITE),
			 EINVAL);
	/* ODP is not pinned: holes and read-only memory are fine. */
	check_regs(pd, gone, 4 * 4096, IBV_ACCESS_ON_DEMAND | LW);
	check_regs(pd, ro, 4096, IBV_ACCESS_ON_DEMAND | LW);
	check_regs(pd, none, 4096, IBV_ACCESS_ON_DEMAND);

	/* rereg: a new translation is pinned anew and may fail; the MR
	 * keeps its old one then. */
	mr = ibv_reg_mr(pd, holed, 4096, LW);
	CHECK(mr);
	if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, gone, 4096,
			 0) == IBV_REREG_MR_ERR_CMD) {
		CHECK_EQ(errno, EFAULT);
	} else {
		/* As in check_efault_hole: right only if the hole was
		 * mapped again meanwhile (the sanitizer's allocator). */
		if (msync(gone, 4096, MS_ASYNC) != 0)
			sv_test_fail(__FILE__, __LINE__,
				     "ibv_rereg_mr onto a hole at %p succeeded",
				     (void *)gone);
		printf("note: %p was mapped again meanwhile\n", (void *)gone);
		CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
				      holed, 4096, 0),
			 0);
	}
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, ro,
			      4096, 0),
		 IBV_REREG_MR_ERR_CMD);
	CHECK_EQ(errno, EFAULT);
	CHECK(mr->addr == holed);
	{
		struct sv_res_entry e;

		CHECK_EQ(res_find(SV_RES_MR, 0, 0, mr->lkey, &e), 0);
		CHECK_EQ(e.iova, (uintptr_t)holed);
	}
	/* Read-only memory with a read-only MR: fine; a new access alone
	 * is not pinned again (mlx5, rxe), so making it writable is too. */
	CHECK_EQ(ibv_rereg_mr(mr,
			      IBV_REREG_MR_CHANGE_TRANSLATION |
				      IBV_REREG_MR_CHANGE_ACCESS,
			      NULL, ro, 4096, IBV_ACCESS_REMOTE_READ),
		 0);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      LW),
		 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

SV_TEST(reg_mr_efault_like_pinning) { efault_cases(); }

/* The same answers from the text of /proc/self/maps (kernels before 6.11
 * have no PROCMAP_QUERY). */
SV_TEST(reg_mr_efault_from_maps_text)
{
	setenv("SOFTVERBS_FAULT", "maps_text", 1);
	efault_cases();
}

/* With ibv_fork_init, a registration that fails to pin gives its fork
 * protection back. */
SV_TEST(reg_mr_readonly_with_fork_init)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);

	CHECK(ro != MAP_FAILED);
	CHECK_EQ(ibv_fork_init(), 0);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	/* Read-only: the dontfork works, the pinning fails and gives the
	 * range back (a child still sees it). */
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, ro, 4096, LW), EFAULT);
	CHECK_EQ(sv_test_child_read(ro), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST_MAIN()

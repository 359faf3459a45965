/* SPDX-License-Identifier: MIT */
/*
 * Fork safety: ibv_fork_init's answers, the environment variables, and what
 * a fork()ed child really sees of registered memory (MADV_DONTFORK: the
 * child dies with SIGSEGV touching it).  Every case runs in a fresh child
 * of the runner, so the library's process-wide fork state starts clean.
 */
#include "sv_test.h"

#include <infiniband/verbs.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Exported by libibverbs but declared only in rdma-core's driver.h. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

#define SEGV_STATUS (128 + SIGSEGV)

static size_t pg;

static char *map_pages(int n)
{
	char *p;

	pg = (size_t)sysconf(_SC_PAGESIZE);
	p = mmap(NULL, n * pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	for (int i = 0; i < n; i++)
		memset(p + i * pg, 'a' + i, pg);
	return p;
}

/* What a fork()ed child gets reading addr: 0 (the parent's bytes), or
 * SEGV_STATUS (no page at all). */
static int child_reads(void *addr)
{
	int v = sv_test_child_read(addr);

	return v < 0 ? 128 - v : (v >= 'a' && v <= 'z' ? 0 : 3);
}

SV_TEST(fork_init_idempotent)
{
	CHECK_EQ(ibv_is_fork_initialized(), IBV_FORK_DISABLED);
	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_is_fork_initialized(), IBV_FORK_ENABLED);
	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_is_fork_initialized(), IBV_FORK_ENABLED);
	/* Registration after init does not make a later call fail. */
	char *p = map_pages(1);
	CHECK_EQ(ibv_dontfork_range(p, pg), 0);
	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_dofork_range(p, pg), 0);
}

SV_TEST(without_init_ranges_do_nothing)
{
	char *p = map_pages(1);

	CHECK_EQ(ibv_dontfork_range(p, pg), 0);
	CHECK_EQ(child_reads(p), 0); /* no MADV_DONTFORK was issued */
	CHECK_EQ(ibv_dofork_range(p, pg), 0);
	CHECK_EQ(ibv_is_fork_initialized(), IBV_FORK_DISABLED);
}

SV_TEST(fork_init_einval_after_dontfork)
{
	char *p = map_pages(1);

	CHECK_EQ(ibv_dontfork_range(p, pg), 0);
	CHECK_EQ(ibv_dofork_range(p, pg), 0);
	/* Too late even though nothing is registered any more. */
	CHECK_EQ(ibv_fork_init(), EINVAL);
	CHECK_EQ(ibv_is_fork_initialized(), IBV_FORK_DISABLED);
	CHECK_EQ(ibv_fork_init(), EINVAL);
}

SV_TEST(fork_init_einval_after_empty_dofork)
{
	/* v44: any range call before init counts, even NULL/0 (the dofork
	 * that ibv_dereg_mr of a DM MR makes). */
	CHECK_EQ(ibv_dofork_range(NULL, 0), 0);
	CHECK_EQ(ibv_fork_init(), EINVAL);
}

SV_TEST(fork_init_einval_after_reg_mr)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	char *p = map_pages(1);
	struct ibv_mr *mr;

	CHECK(pd);
	mr = ibv_reg_mr(pd, p, pg, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_fork_init(), EINVAL);
	CHECK_EQ(child_reads(p), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(fork_init_ok_after_odp_mr)
{
	/* ODP registrations skip the dontfork step, so they are not "too
	 * late" (v44 ibv_reg_mr). */
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	char *p = map_pages(1);
	struct ibv_mr *mr;

	CHECK(pd);
	mr = ibv_reg_mr(pd, p, pg,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	CHECK(mr);
	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

static void check_env_enables(const char *name, const char *value,
			      enum ibv_fork_status want)
{
	struct ibv_device **list;

	setenv(name, value, 1);
	/* Read on the first device enumeration, not at load or open. */
	CHECK_EQ(ibv_is_fork_initialized(), IBV_FORK_DISABLED);
	list = ibv_get_device_list(NULL);
	CHECK(list);
	ibv_free_device_list(list);
	CHECK_EQ(ibv_is_fork_initialized(), want);
}

SV_TEST(env_rdmav_fork_safe)
{
	char *p = map_pages(1);

	check_env_enables("RDMAV_FORK_SAFE", "1", IBV_FORK_ENABLED);
	CHECK_EQ(ibv_dontfork_range(p, pg), 0);
	CHECK_EQ(child_reads(p), SEGV_STATUS);
}

SV_TEST(env_ibv_fork_safe)
{
	check_env_enables("IBV_FORK_SAFE", "yes", IBV_FORK_ENABLED);
}

SV_TEST(env_empty_value_enables)
{
	check_env_enables("RDMAV_FORK_SAFE", "", IBV_FORK_ENABLED);
}

SV_TEST(env_zero_does_not_enable)
{
	/* rdma-core's check_env: "0" means unset. */
	check_env_enables("RDMAV_FORK_SAFE", "0", IBV_FORK_DISABLED);
	CHECK_EQ(ibv_fork_init(), 0);
}

SV_TEST(env_after_registration_warns_and_stays_off)
{
	char *p = map_pages(1);

	/* A range call before the first enumeration: init must fail. */
	CHECK_EQ(ibv_dontfork_range(p, pg), 0);
	check_env_enables("RDMAV_FORK_SAFE", "1", IBV_FORK_DISABLED);
}

SV_TEST(registered_page_invisible_to_child)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *p = map_pages(3);

	CHECK_EQ(ibv_fork_init(), 0);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	/* Middle page, not page aligned: the whole page goes. */
	mr = ibv_reg_mr(pd, p + pg + 100, 200, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	CHECK_EQ(child_reads(p + pg), SEGV_STATUS);
	CHECK_EQ(child_reads(p + pg + pg - 1), SEGV_STATUS);
	CHECK_EQ(child_reads(p), 0);
	CHECK_EQ(child_reads(p + 2 * pg), 0);
	/* The parent keeps its memory. */
	CHECK_EQ(p[pg + 100], 'b');
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(child_reads(p + pg), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(overlapping_mrs_nest)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *a, *b;
	char *p = map_pages(3);

	CHECK_EQ(ibv_fork_init(), 0);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	a = ibv_reg_mr(pd, p, 2 * pg, IBV_ACCESS_LOCAL_WRITE);
	b = ibv_reg_mr(pd, p + pg, 2 * pg, IBV_ACCESS_LOCAL_WRITE);
	CHECK(a && b);
	CHECK_EQ(ibv_dereg_mr(a), 0);
	CHECK_EQ(child_reads(p), 0);
	CHECK_EQ(child_reads(p + pg), SEGV_STATUS); /* still b's */
	CHECK_EQ(child_reads(p + 2 * pg), SEGV_STATUS);
	CHECK_EQ(ibv_dereg_mr(b), 0);
	CHECK_EQ(child_reads(p + pg), 0);
	CHECK_EQ(child_reads(p + 2 * pg), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(range_refcounts)
{
	char *p = map_pages(4);

	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_dontfork_range(p, pg), 0);
	CHECK_EQ(ibv_dontfork_range(p, pg), 0);
	CHECK_EQ(ibv_dofork_range(p, pg), 0);
	CHECK_EQ(child_reads(p), SEGV_STATUS); /* one count left */
	CHECK_EQ(ibv_dofork_range(p, pg), 0);
	CHECK_EQ(child_reads(p), 0);

	/* Overlaps split and merge: [0,2) + [1,3) + [0,4), then undo in
	 * another order; each page is visible exactly when its count is 0. */
	CHECK_EQ(ibv_dontfork_range(p, 2 * pg), 0);
	CHECK_EQ(ibv_dontfork_range(p + pg, 2 * pg), 0);
	CHECK_EQ(ibv_dontfork_range(p, 4 * pg), 0);
	CHECK_EQ(ibv_dofork_range(p, 4 * pg), 0);
	CHECK_EQ(child_reads(p + 3 * pg), 0);
	CHECK_EQ(child_reads(p + 2 * pg), SEGV_STATUS);
	CHECK_EQ(ibv_dofork_range(p, 2 * pg), 0);
	CHECK_EQ(child_reads(p), 0);
	CHECK_EQ(child_reads(p + pg), SEGV_STATUS);
	CHECK_EQ(child_reads(p + 2 * pg), SEGV_STATUS);
	CHECK_EQ(ibv_dofork_range(p + pg + 7, pg), 0); /* rounds to [1,3) */
	for (int i = 0; i < 4; i++)
		CHECK_EQ(child_reads(p + i * pg), 0);

	/* Empty and NULL ranges are no-ops. */
	CHECK_EQ(ibv_dontfork_range(p, 0), 0);
	CHECK_EQ(ibv_dontfork_range(NULL, pg), 0);
	CHECK_EQ(child_reads(p), 0);
}

SV_TEST(dontfork_failure_rolls_back)
{
	char *p = map_pages(4);

	CHECK_EQ(ibv_fork_init(), 0);
	/* Page 1 counted once; page 3 is a hole. */
	CHECK_EQ(ibv_dontfork_range(p + pg, pg), 0);
	CHECK_EQ(munmap(p + 3 * pg, pg), 0);
	errno = 0;
	CHECK_EQ(ibv_dontfork_range(p, 4 * pg), -1);
	CHECK_EQ(errno, ENOMEM);
	/* Pages 0 and 2 got their advice back, page 1 still counts 1. */
	CHECK_EQ(child_reads(p), 0);
	CHECK_EQ(child_reads(p + 2 * pg), 0);
	CHECK_EQ(child_reads(p + pg), SEGV_STATUS);
	CHECK_EQ(ibv_dofork_range(p + pg, pg), 0);
	CHECK_EQ(child_reads(p + pg), 0);
}

SV_TEST(reg_mr_of_unmapped_memory_fails_after_init)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char *p = map_pages(2);

	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(munmap(p + pg, pg), 0);
	ctx = sv_test_open_dev();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	/* v44: the failed MADV_DONTFORK fails the registration. */
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, p, 2 * pg, IBV_ACCESS_LOCAL_WRITE),
			 ENOMEM);
	CHECK_EQ(child_reads(p), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(dofork_of_freed_memory_succeeds)
{
	char *p = map_pages(3);

	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_dontfork_range(p, 3 * pg), 0);
	/* The application frees part of it before deregistering. */
	CHECK_EQ(munmap(p + pg, pg), 0);
	CHECK_EQ(ibv_dofork_range(p, 3 * pg), 0);
	CHECK_EQ(child_reads(p), 0);
	CHECK_EQ(child_reads(p + 2 * pg), 0);
}

/* Whether a fork()ed child reads every page of [p, p + n pages) from
 * map_pages that hole[] (n bytes, 1: unmapped) does not mark, each with
 * its bytes: 0, or the signal that killed it at the first page it did
 * not inherit. */
static int child_reads_all(const char *p, int n, const char *hole)
{
	struct rlimit no_core = { 0, 0 };
	int st;
	pid_t pid = fork();

	if (!pid) {
		/* As sv_test_child_read: the kernel's SIGSEGV, not a
		 * sanitizer's report and abort, and no core. */
		setrlimit(RLIMIT_CORE, &no_core);
		signal(SIGSEGV, SIG_DFL);
		for (int i = 0; i < n; i++)
			if (!hole[i] &&
			    *(volatile const char *)(p + i * pg) != (char)('a' + i))
				_exit(3);
		_exit(0);
	}
	CHECK(pid > 0);
	st = sv_test_wait_child(pid);
	CHECK(st >= 0);
	return WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
}

SV_TEST(dofork_of_a_large_range_with_holes)
{
	/* 1000 pages, freed in places before the deregistration: a page in
	 * the middle, a run crossing the range's halves, the last pages.
	 * Every page still mapped is the child's again, each of them: one
	 * MADV_DOFORK over the whole range, which Linux applies to every
	 * mapping in it and answers ENOMEM for the holes (fork.c,
	 * dofork_all: no retry page by page). */
	enum { N = 1000 };
	static char hole[N];
	char *p = map_pages(N);

	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_dontfork_range(p, N * pg), 0);
	CHECK_EQ(child_reads_all(p, N, hole), SIGSEGV);
	for (int i = 0; i < N; i++)
		hole[i] = i == 101 || (i >= 437 && i < 613) || i >= N - 23;
	for (int i = 0; i < N; i++)
		if (hole[i])
			CHECK_EQ(munmap(p + i * pg, pg), 0);
	CHECK_EQ(ibv_dofork_range(p, N * pg), 0);
	CHECK_EQ(child_reads_all(p, N, hole), 0);
}

SV_TEST(hugepages_safe_rounding)
{
	/* With RDMAV_HUGEPAGES_SAFE the page size comes from the mapping
	 * (smaps); for normal memory that is the base page. */
	char *p = map_pages(2);

	setenv("RDMAV_HUGEPAGES_SAFE", "1", 1);
	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_dontfork_range(p + 10, 1), 0);
	CHECK_EQ(child_reads(p), SEGV_STATUS);
	CHECK_EQ(child_reads(p + pg), 0);
	CHECK_EQ(ibv_dofork_range(p + 10, 1), 0);
	CHECK_EQ(child_reads(p), 0);
}

struct hammer {
	char *base;
	int id;
};

static void *hammer_thread(void *arg)
{
	struct hammer *h = arg;

	/* Each thread registers and releases overlapping windows. */
	for (int i = 0; i < 2000; i++) {
		char *s = h->base + ((h->id + i) % 6) * pg;
		size_t len = (1 + (i + h->id) % 3) * pg;

		if (ibv_dontfork_range(s, len) || ibv_dofork_range(s, len))
			return (void *)1;
	}
	return NULL;
}

SV_TEST(ranges_thread_safe)
{
	pthread_t t[4];
	struct hammer h[4];
	char *p = map_pages(8);
	void *ret;

	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_dontfork_range(p + 7 * pg, pg), 0);
	for (int i = 0; i < 4; i++) {
		h[i] = (struct hammer){ p, i };
		CHECK_EQ(pthread_create(&t[i], NULL, hammer_thread, &h[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(pthread_join(t[i], &ret), 0);
		CHECK(ret == NULL);
	}
	/* Balanced calls leave every count where it started. */
	for (int i = 0; i < 7; i++)
		CHECK_EQ(child_reads(p + i * pg), 0);
	CHECK_EQ(child_reads(p + 7 * pg), SEGV_STATUS);
}

SV_TEST_MAIN()

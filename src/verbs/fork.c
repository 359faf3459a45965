/* SPDX-License-Identifier: MIT */
/*
 * Fork safety: ibv_fork_init and the dontfork/dofork range counts
 * (rdma-core v44 memory.c semantics, our own implementation).
 *
 * softverbs never pins memory, so a fork() cannot corrupt what the parent's
 * engine reads or writes: the engine always works on the parent's own
 * virtual addresses.  Still, applications call ibv_fork_init precisely so
 * that a child does *not* inherit registered memory (MADV_DONTFORK: the
 * child gets SIGSEGV touching it), and some rely on that for isolation or
 * to keep fork() cheap.  So we do exactly what rdma-core does: after
 * ibv_fork_init every registered range is MADV_DONTFORK until its last
 * registration goes away.
 *
 * The ranges live in a sorted array of disjoint [start, end) intervals with
 * a registration count each; addresses not in the array count 0.  Adjacent
 * intervals with equal counts are merged, so the array stays as small as
 * the set of distinct overlaps.  One mutex (fork_lock) guards everything.
 */
#include "verbs_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct fork_range {
	uintptr_t start; /* page aligned */
	uintptr_t end;	 /* exclusive, page aligned */
	long refcnt;	 /* never 0 in the array; may go negative, as v44 */
};

/* A slice of the range being changed, with the count it had before. */
struct fork_piece {
	uintptr_t start, end;
	long old;
	int advised; /* madvise was issued for it (for the rollback) */
};

static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static int fork_enabled;   /* ibv_fork_init succeeded (rdma-core: mm_root) */
static int too_late;	   /* a range call happened before ibv_fork_init */
static int huge_page_safe; /* RDMAV_HUGEPAGES_SAFE seen by ibv_fork_init */
static uintptr_t page_size;
static struct fork_range *ranges; /* sorted by start, disjoint */
static size_t nranges;

/* rdma-core's check_env: set and not "0". */
static int env_set(const char *name)
{
	const char *v = getenv(name);

	return v && strcmp(v, "0") != 0;
}

/*
 * Page size the kernel uses for the mapping containing addr: the
 * "KernelPageSize" of its /proc/self/smaps entry (hugetlbfs mappings must be
 * advised in whole huge pages).  Falls back to the system page size.
 */
static uintptr_t mapping_page_size(uintptr_t addr)
{
	uintptr_t ps = page_size, lo, hi;
	int inside = 0;
	char line[512];
	FILE *f;

	f = fopen("/proc/self/smaps", "re");
	if (!f)
		return ps;
	while (fgets(line, sizeof(line), f)) {
		unsigned long kb;

		if (!inside) {
			if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
			    lo <= addr && addr < hi)
				inside = 1;
			continue;
		}
		if (sscanf(line, "KernelPageSize: %lu kB", &kb) == 1) {
			if (kb && !((kb * 1024) & (kb * 1024 - 1)))
				ps = kb * 1024;
			break;
		}
	}
	fclose(f);
	return ps;
}

static uintptr_t range_page_size(uintptr_t addr)
{
	return huge_page_safe ? mapping_page_size(addr) : page_size;
}

/* MADV_DOFORK that may not fail.  Part of the range unmapped meanwhile
 * (freed before ibv_dereg_mr) is ENOMEM, and Linux has advised every page
 * still mapped by then (madvise(2), "Linux notes"): nothing is left to do.
 * Any other failure stopped at a mapping the advice does not apply to
 * (VM_IO): the range is retried page by page.  ENOMEM retried so cost
 * 9728 calls (10 ms) for a 38 MiB range half unmapped; UCX's registration
 * cache deregistered a 38 MiB range partly unmapped in an MPI run. */
static void dofork_all(uintptr_t start, uintptr_t end, uintptr_t ps)
{
	if (!madvise((void *)start, end - start, MADV_DOFORK) ||
	    errno == ENOMEM)
		return;
	for (uintptr_t p = start; p < end; p += ps)
		madvise((void *)p, ps, MADV_DOFORK);
}

/* First array index whose interval ends after addr.  Must hold fork_lock. */
static size_t first_after(uintptr_t addr)
{
	size_t lo = 0, hi = nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ranges[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Appends [s, e) with count c to out, merging with its left neighbour when
 * they touch and agree; zero counts are "not in the array". */
static void emit(struct fork_range *out, size_t *n, uintptr_t s, uintptr_t e,
		 long c)
{
	if (s >= e || !c)
		return;
	if (*n && out[*n - 1].end == s && out[*n - 1].refcnt == c) {
		out[*n - 1].end = e;
		return;
	}
	out[*n] = (struct fork_range){ s, e, c };
	(*n)++;
}

/*
 * Adds inc (+1 DONTFORK, -1 DOFORK) to the count of every page of
 * [base, base+size), issuing madvise where a count leaves 0 (DONTFORK) or
 * reaches 0 (DOFORK).  All or nothing: on failure the pages already advised
 * get the opposite advice back and the counts are unchanged.  Returns 0, or
 * -1 with errno set.  Must hold fork_lock.
 */
static int madvise_range(uintptr_t base, size_t size, int inc)
{
	int advice = inc > 0 ? MADV_DONTFORK : MADV_DOFORK;
	uintptr_t ps = range_page_size(base);
	uintptr_t start, end, cur;
	struct fork_piece *pieces;
	struct fork_range *out;
	size_t first, i, np = 0, nout = 0;

	if (base > UINTPTR_MAX - (ps - 1) ||
	    size > UINTPTR_MAX - (ps - 1) - base) {
		errno = EINVAL;
		return -1;
	}
	start = base & ~(ps - 1);
	end = (base + size + ps - 1) & ~(ps - 1);

	/* Slice [start, end) along the existing intervals: each overlapped
	 * interval and each gap between them is one piece. */
	first = first_after(start);
	for (i = first; i < nranges && ranges[i].start < end; i++)
		;
	pieces = calloc(2 * (i - first) + 1, sizeof(*pieces));
	out = malloc((nranges + 2 * (i - first) + 3) * sizeof(*out));
	if (!pieces || !out) {
		free(pieces);
		free(out);
		errno = ENOMEM;
		return -1;
	}
	cur = start;
	for (i = first; i < nranges && ranges[i].start < end; i++) {
		const struct fork_range *r = &ranges[i];
		uintptr_t s = r->start > cur ? r->start : cur;
		uintptr_t e = r->end < end ? r->end : end;

		if (r->start > cur)
			pieces[np++] =
				(struct fork_piece){ cur, r->start, 0, 0 };
		pieces[np++] = (struct fork_piece){ s, e, r->refcnt, 0 };
		cur = e;
	}
	if (cur < end)
		pieces[np++] = (struct fork_piece){ cur, end, 0, 0 };

	for (i = 0; i < np; i++) {
		struct fork_piece *p = &pieces[i];

		if (p->old != (inc > 0 ? 0 : 1))
			continue;
		if (inc < 0) {
			dofork_all(p->start, p->end, ps);
			continue;
		}
		p->advised = 1;
		if (madvise((void *)p->start, p->end - p->start, advice)) {
			int err = errno;

			/* madvise may have advised part of the piece (the
			 * mapped parts around a hole) before failing. */
			while (1) {
				if (pieces[i].advised)
					dofork_all(pieces[i].start,
						   pieces[i].end, ps);
				if (!i--)
					break;
			}
			free(pieces);
			free(out);
			errno = err;
			return -1;
		}
	}

	/* Rebuild: what lies before start, the pieces with their new counts,
	 * what lies after end. */
	for (i = 0; i < first; i++)
		emit(out, &nout, ranges[i].start, ranges[i].end,
		     ranges[i].refcnt);
	if (first < nranges && ranges[first].start < start)
		emit(out, &nout, ranges[first].start, start,
		     ranges[first].refcnt);
	for (i = 0; i < np; i++)
		emit(out, &nout, pieces[i].start, pieces[i].end,
		     pieces[i].old + inc);
	for (i = first; i < nranges; i++) {
		uintptr_t s = ranges[i].start > end ? ranges[i].start : end;

		if (ranges[i].end > end)
			emit(out, &nout, s, ranges[i].end, ranges[i].refcnt);
	}
	free(pieces);
	free(ranges);
	ranges = out;
	nranges = nout;
	return 0;
}

static int range_call(void *base, size_t size, int inc)
{
	int ret = 0;

	pthread_mutex_lock(&fork_lock);
	if (!fork_enabled)
		too_late = 1; /* later ibv_fork_init answers EINVAL */
	else if (base && size)
		ret = madvise_range((uintptr_t)base, size, inc);
	pthread_mutex_unlock(&fork_lock);
	return ret;
}

/*
 * Marks [base, base+size) (rounded out to pages, huge pages with
 * RDMAV_HUGEPAGES_SAFE) as not inherited by fork() children, counting
 * nested calls.  Without ibv_fork_init it does nothing and returns 0 (and
 * ibv_fork_init refuses from then on).  Returns 0, or -1 with errno.
 */
SV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	return range_call(base, size, +1);
}

/* Undoes one ibv_dontfork_range; the pages are inherited again once no
 * call covering them is left.  Same return convention. */
SV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	return range_call(base, size, -1);
}

/* Returns 0, EINVAL when memory was registered before, ENOSYS when the
 * kernel has no MADV_DONTFORK, ENOMEM. */
SV_EXPORT int ibv_fork_init(void)
{
	uintptr_t ps;
	long sys_ps;
	void *probe, *start;
	int ret = 0;

	pthread_mutex_lock(&fork_lock);
	/* As v44: read even when already initialised. */
	if (getenv("RDMAV_HUGEPAGES_SAFE"))
		huge_page_safe = 1;
	if (fork_enabled)
		goto out;
	if (too_late) {
		ret = EINVAL;
		goto out;
	}
	sys_ps = sysconf(_SC_PAGESIZE);
	if (sys_ps <= 0) {
		ret = errno ? errno : EINVAL;
		goto out;
	}
	page_size = (uintptr_t)sys_ps;
	ps = page_size;
	if (posix_memalign(&probe, ps, ps)) {
		ret = ENOMEM;
		goto out;
	}
	/* Prove the kernel honours the advice before promising anything. */
	ps = range_page_size((uintptr_t)probe);
	start = (void *)((uintptr_t)probe & ~(ps - 1));
	if (madvise(start, ps, MADV_DONTFORK) || madvise(start, ps, MADV_DOFORK))
		ret = ENOSYS;
	free(probe);
	if (!ret)
		fork_enabled = 1;
out:
	pthread_mutex_unlock(&fork_lock);
	return ret;
}

/*
 * rdma-core answers IBV_FORK_UNNEEDED when the kernel copies pinned DMA
 * pages on fork (5.13+, learned over RDMA netlink).  softverbs pins
 * nothing, so the parent is always safe; but UNNEEDED would tell an
 * application that ibv_fork_init changes nothing, while with us it still
 * does something the application can observe: registered memory
 * disappears from children.  So we report the state of that promise:
 * ENABLED once ibv_fork_init succeeded, DISABLED before (what v44 answers
 * on a host without RDMA netlink, such as a container).
 */
SV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	int on;

	pthread_mutex_lock(&fork_lock);
	on = fork_enabled;
	pthread_mutex_unlock(&fork_lock);
	return on ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
}

/*
 * Called once, on the first device enumeration (as rdma-core's
 * ibverbs_init): RDMAV_FORK_SAFE / IBV_FORK_SAFE mean "call ibv_fork_init".
 */
void sv_fork_env_init(void)
{
	if (!env_set("RDMAV_FORK_SAFE") && !env_set("IBV_FORK_SAFE"))
		return;
	if (ibv_fork_init())
		fprintf(stderr, "libibverbs: Warning: fork()-safety requested "
				"but init failed\n");
}

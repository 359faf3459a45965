/* SPDX-License-Identifier: MIT */
/* Helpers shared by test_pd_mr.c, test_rereg.c and test_import.c. */
#ifndef PD_MR_UTIL_H
#define PD_MR_UTIL_H

#include "sv_test.h"
#include "sv_client.h"

#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * The `softverbs res show` row of the live MR with this key (keys are
 * device wide), or of the object (type, handle) in the ufile of that MR
 * when key is 0 and ufile given.  Returns 0 when found, -1 when not
 * listed; a failing list call fails the case.
 */
static inline int res_find(uint32_t type, uint32_t ufile, uint32_t handle,
			   uint32_t lkey, struct sv_res_entry *out)
{
	static struct sv_res_rep rep;
	struct sv_res_req req = { .type = type };

	for (;;) {
		sv_test_res_page(&req, &rep);
		for (uint32_t i = 0; i < rep.count; i++) {
			const struct sv_res_entry *e = &rep.e[i];

			if (e->type != type)
				continue;
			if ((lkey && e->lkey == lkey) ||
			    (!lkey && e->ufile == ufile && e->handle == handle)) {
				*out = *e;
				return 0;
			}
		}
		if (!rep.more)
			return -1;
	}
}

/* Reserved address space, never touched: registering it must not cost
 * memory (nothing is pinned). */
static inline void *reserve(size_t len)
{
	void *p = mmap(NULL, len, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	CHECK(p != MAP_FAILED);
	return p;
}

static inline void *pages(size_t n)
{
	void *p = mmap(NULL, n * 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED);
	memset(p, 0x5a, n * 4096);
	return p;
}

#endif

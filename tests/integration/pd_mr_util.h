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

static inline struct ibv_context *open_dev(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	CHECK(list && list[0]);
	ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	ibv_free_device_list(list);
	return ctx;
}

/* The daemon's counters before the case made anything. */
static inline void baseline(struct sv_status_rep *st)
{
	struct ibv_device **list = ibv_get_device_list(NULL); /* starts it */

	CHECK(list);
	ibv_free_device_list(list);
	CHECK_EQ(sv_test_status(st), 0);
}

/*
 * The `softverbs res show` row of the live MR with this key (keys are
 * device wide), or of the object (type, handle) in the ufile of that MR
 * when key is 0 and ufile given.  Returns 0 when found.
 */
static inline int res_find(uint32_t type, uint32_t ufile, uint32_t handle,
			   uint32_t lkey, struct sv_res_entry *out)
{
	static struct sv_res_rep rep;
	struct sv_res_req req = { .type = type };

	for (;;) {
		struct sv_call c = { .op = SV_OP_RES_LIST,
				     .attach_fd = -1,
				     .req = &req,
				     .req_len = sizeof(req),
				     .rep = &rep,
				     .rep_cap = sizeof(rep) };

		if (sv_call(&c))
			return -1;
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
		req.cursor_ufile = rep.next_ufile;
		req.cursor_handle = rep.next_handle;
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

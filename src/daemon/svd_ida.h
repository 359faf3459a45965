/* SPDX-License-Identifier: MIT */
/*
 * Id allocator: the lowest free id in O(1), as the kernel's IDA/xarray
 * gives its handles (ida.c).  Handles (per ufile), MR key indices and
 * window key indices use it, so a control verb costs the same with 100
 * live objects as with 100,000 (issue 8: the daemon used to scan from 0).
 *
 * Three levels of bitmaps: bit i of l0 is id i in use; bit j of l1 says
 * l0 word j is full; bit k of l2 says l1 word k is full.  Finding the
 * lowest free id reads one word per level after a scan of l2, which has
 * cap / 262144 words (4 for a million ids).  The capacity grows by
 * doubling, in steps of 4096 ids, up to the limit given at init; nothing
 * is allocated before the first id.
 */
#ifndef SVD_IDA_H
#define SVD_IDA_H

#include <stdint.h>

struct svd_ida {
	uint64_t *l0, *l1, *l2;
	uint32_t cap;	/* ids 0..cap-1 have bits; a multiple of 4096 */
	uint32_t limit; /* ids are < limit */
	uint32_t used;
	uint64_t words_read; /* by svd_ida_alloc's search: its cost, which
				the unit test checks does not grow */
};

/* An empty allocator for ids 0..limit-1. */
void svd_ida_init(struct svd_ida *a, uint32_t limit);
void svd_ida_destroy(struct svd_ida *a);
/* The lowest free id, now in use; -ENOSPC when every id below the limit
 * is, -ENOMEM when the bitmaps cannot grow. */
int64_t svd_ida_alloc(struct svd_ida *a);
/* Marks id in use (reserving ids that must never be handed out, such as
 * key index 0).  0, -ENOSPC (id >= limit) or -ENOMEM. */
int svd_ida_set(struct svd_ida *a, uint32_t id);
/* id is free again (no-op if it was not in use). */
void svd_ida_free(struct svd_ida *a, uint32_t id);
/* 1 when id is in use. */
int svd_ida_test(const struct svd_ida *a, uint32_t id);

#endif

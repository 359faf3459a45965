/* SPDX-License-Identifier: MIT */
/*
 * The id allocator of svd_ida.h.  Invariants, for every word index:
 *   l1 bit j  <=>  l0[j] == ~0
 *   l2 bit k  <=>  l1[k] == ~0, or l1 word k lies beyond cap
 * so a clear bit at any level leads to a free id below cap.
 */
#include "svd_ida.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STEP 4096u /* ids per l1 word: cap stays a multiple of it */
#define FULL (~(uint64_t)0)

static uint32_t n0(uint32_t cap) { return cap / 64; }
static uint32_t n1(uint32_t cap) { return cap / STEP; }
static uint32_t n2(uint32_t cap) { return (n1(cap) + 63) / 64; }

void svd_ida_init(struct svd_ida *a, uint32_t limit)
{
	memset(a, 0, sizeof(*a));
	a->limit = limit;
}

void svd_ida_destroy(struct svd_ida *a)
{
	free(a->l0);
	free(a->l1);
	free(a->l2);
	svd_ida_init(a, a->limit);
}

/* Grows the bitmaps to cover at least id `need`. */
static int grow(struct svd_ida *a, uint32_t need)
{
	uint32_t cap = a->cap ? a->cap : STEP;
	uint64_t *p0, *p1, *p2;

	while (cap <= need)
		cap *= 2;
	p0 = realloc(a->l0, (size_t)n0(cap) * 8);
	if (!p0)
		return -ENOMEM;
	a->l0 = p0;
	p1 = realloc(a->l1, (size_t)n1(cap) * 8);
	if (!p1)
		return -ENOMEM;
	a->l1 = p1;
	p2 = realloc(a->l2, (size_t)n2(cap) * 8);
	if (!p2)
		return -ENOMEM;
	a->l2 = p2;
	memset(p0 + n0(a->cap), 0, (size_t)(n0(cap) - n0(a->cap)) * 8);
	memset(p1 + n1(a->cap), 0, (size_t)(n1(cap) - n1(a->cap)) * 8);
	/* l2 from scratch: new l1 words are empty, words past cap full. */
	for (uint32_t k = 0; k < n2(cap); k++) {
		uint64_t w = 0;

		for (uint32_t b = 0; b < 64; b++) {
			uint32_t j = k * 64 + b;

			if (j >= n1(cap) || p1[j] == FULL)
				w |= 1ULL << b;
		}
		p2[k] = w;
	}
	a->cap = cap;
	return 0;
}

static void mark(struct svd_ida *a, uint32_t id)
{
	uint32_t i = id / 64, j = i / 64, k = j / 64;

	a->l0[i] |= 1ULL << (id % 64);
	if (a->l0[i] != FULL)
		return;
	a->l1[j] |= 1ULL << (i % 64);
	if (a->l1[j] != FULL)
		return;
	a->l2[k] |= 1ULL << (j % 64);
}

int svd_ida_test(const struct svd_ida *a, uint32_t id)
{
	return id < a->cap && (a->l0[id / 64] >> (id % 64)) & 1;
}

int svd_ida_set(struct svd_ida *a, uint32_t id)
{
	int err;

	if (id >= a->limit)
		return -ENOSPC;
	if (id >= a->cap) {
		err = grow(a, id);
		if (err)
			return err;
	}
	if (!svd_ida_test(a, id)) {
		mark(a, id);
		a->used++;
	}
	return 0;
}

int64_t svd_ida_alloc(struct svd_ida *a)
{
	uint32_t id = a->cap; /* the first id past the bitmaps, if all full */
	int err;

	for (uint32_t k = 0; k < n2(a->cap); k++) {
		uint32_t j, i;

		a->words_read++;
		if (a->l2[k] == FULL)
			continue;
		a->words_read += 2;
		j = k * 64 + (uint32_t)__builtin_ctzll(~a->l2[k]);
		i = j * 64 + (uint32_t)__builtin_ctzll(~a->l1[j]);
		id = i * 64 + (uint32_t)__builtin_ctzll(~a->l0[i]);
		break;
	}
	err = svd_ida_set(a, id);
	return err ? err : (int64_t)id;
}

void svd_ida_free(struct svd_ida *a, uint32_t id)
{
	uint32_t i = id / 64, j = i / 64, k = j / 64;

	if (!svd_ida_test(a, id))
		return;
	a->l0[i] &= ~(1ULL << (id % 64));
	a->l1[j] &= ~(1ULL << (i % 64));
	a->l2[k] &= ~(1ULL << (j % 64));
	a->used--;
}

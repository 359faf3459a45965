/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the daemon's id allocator (src/daemon/ida.c) against a
 * plain array: after every random alloc/free, the id handed out is the
 * lowest free one, frees are exact, the limit holds, and the words an
 * allocation reads do not grow with the number of live ids.
 */
#include "svd_ida.h"
#include "unit_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t lowest_free(const unsigned char *used, uint32_t limit)
{
	for (uint32_t i = 0; i < limit; i++)
		if (!used[i])
			return i;
	return limit;
}

/* Random alloc/free against the model, for a limit that is not a
 * multiple of the growth step. */
static void against_model(uint32_t limit, unsigned seed, int rounds)
{
	struct svd_ida a;
	unsigned char *used = calloc(limit, 1);
	uint32_t *live = calloc(limit, sizeof(*live)), nlive = 0;

	EXPECT(used && live);
	svd_ida_init(&a, limit);
	for (int r = 0; r < rounds; r++) {
		int grow = nlive == 0 || (rand_r(&seed) % 100) < 55;

		if (grow) {
			uint32_t want = lowest_free(used, limit);
			int64_t id = svd_ida_alloc(&a);

			if (want == limit) {
				EXPECT(id == -ENOSPC);
				continue;
			}
			EXPECT(id == (int64_t)want);
			used[id] = 1;
			live[nlive++] = (uint32_t)id;
		} else {
			uint32_t k = (uint32_t)rand_r(&seed) % nlive;

			EXPECT(svd_ida_test(&a, live[k]));
			svd_ida_free(&a, live[k]);
			EXPECT(!svd_ida_test(&a, live[k]));
			used[live[k]] = 0;
			live[k] = live[--nlive];
		}
		EXPECT(a.used == nlive);
	}
	svd_ida_destroy(&a);
	free(used);
	free(live);
}

static void fill_to_limit(uint32_t limit)
{
	struct svd_ida a;

	svd_ida_init(&a, limit);
	EXPECT(svd_ida_set(&a, 0) == 0); /* reserved, like key index 0 */
	for (uint32_t i = 1; i < limit; i++)
		EXPECT(svd_ida_alloc(&a) == (int64_t)i);
	EXPECT(svd_ida_alloc(&a) == -ENOSPC);
	EXPECT(svd_ida_set(&a, limit) == -ENOSPC);
	/* Holes are found wherever they are, lowest first. */
	svd_ida_free(&a, limit - 1);
	svd_ida_free(&a, limit / 2);
	svd_ida_free(&a, 7);
	EXPECT(svd_ida_alloc(&a) == 7);
	EXPECT(svd_ida_alloc(&a) == (int64_t)(limit / 2));
	EXPECT(svd_ida_alloc(&a) == (int64_t)(limit - 1));
	EXPECT(svd_ida_alloc(&a) == -ENOSPC);
	svd_ida_free(&a, 12345678); /* not in use: nothing happens */
	EXPECT(a.used == limit);
	svd_ida_destroy(&a);
}

/* Words the search reads per alloc + free of the lowest id, with n ids
 * live below it. */
static double churn_words(uint32_t n)
{
	struct svd_ida a;
	uint64_t w0;
	int64_t id = 0;

	svd_ida_init(&a, 1u << 21);
	for (uint32_t i = 0; i < n; i++)
		svd_ida_alloc(&a);
	w0 = a.words_read;
	for (int i = 0; i < 1000; i++) {
		id = svd_ida_alloc(&a);
		svd_ida_free(&a, (uint32_t)id);
	}
	w0 = a.words_read - w0;
	svd_ida_destroy(&a);
	return id == (int64_t)n ? w0 / 1000.0 : -1;
}

int main(void)
{
	against_model(5000, 1, 40000);
	against_model(64, 2, 2000);
	against_model(4096 * 3 + 17, 3, 60000);
	fill_to_limit(100000);
	fill_to_limit(1u << 20);
	{
		/* Flat cost, counted in words read (not timed): a scan from
		 * 0 would read n / 64 of them. */
		double lo = churn_words(1000), hi = churn_words(1000000);

		printf("alloc: %.1f words read with 1e3 live, %.1f with 1e6\n",
		       lo, hi);
		if (lo < 0 || hi < 0 || hi > 12) {
			fprintf(stderr, "FAIL: allocation cost grows with live ids\n");
			failures++;
		}
	}
	return unit_result();
}

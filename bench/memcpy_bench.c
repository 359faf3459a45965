// SPDX-License-Identifier: MIT
/*
 * memcpy_bench: the single-thread memcpy bandwidth of this machine, one line
 * per size, so bench/perf_bench.sh can put the data path next to the copy
 * it can at best approach (moving a message costs at least one copy).
 *
 *   memcpy_bench [SIZE...]     default: 8 B, 16 B, ... 4 MiB
 * Prints "SIZE MIB_PER_S" lines (MiB = 2^20 bytes, perftest's "MB").
 *
 * Each size copies between two buffers that are touched first (no page
 * faults in the measurement) for 50-200 ms; the destination and source
 * alternate so both stay warm the way a ping-pong's buffers do.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZE (4u << 20)
#define MIN_NS 50000000ull /* 50 ms: long enough to time */

/* Through a volatile pointer the compiler can neither inline nor elide it. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double measure(char *a, char *b, size_t size)
{
	uint64_t iters = 1, t0, dt;

	/* Grow the batch until it lasts long enough to time. */
	for (;;) {
		t0 = now_ns();
		for (uint64_t i = 0; i < iters; i++) {
			if (i & 1)
				copy_fn(a, b, size);
			else
				copy_fn(b, a, size);
		}
		dt = now_ns() - t0;
		if (dt >= MIN_NS || iters >= (1ull << 40))
			break;
		iters *= 4;
	}
	return (double)size * (double)iters / ((double)dt / 1e9) / 1048576.0;
}

int main(int argc, char **argv)
{
	size_t sizes[64];
	int n = 0;
	char *a, *b;

	if (argc > 1) {
		for (int i = 1; i < argc && n < 64; i++) {
			char *end;
			unsigned long v = strtoul(argv[i], &end, 0);

			if (*end || v == 0 || v > MAX_SIZE) {
				fprintf(stderr, "memcpy_bench: size '%s' not in 1..%u\n",
					argv[i], MAX_SIZE);
				return 2;
			}
			sizes[n++] = v;
		}
	} else {
		for (size_t s = 8; s <= MAX_SIZE; s *= 2)
			sizes[n++] = s;
	}
	a = aligned_alloc(4096, MAX_SIZE);
	b = aligned_alloc(4096, MAX_SIZE);
	if (!a || !b) {
		perror("memcpy_bench: aligned_alloc");
		return 1;
	}
	memset(a, 1, MAX_SIZE);
	memset(b, 2, MAX_SIZE);
	for (int i = 0; i < n; i++)
		printf("%zu %.2f\n", sizes[i], measure(a, b, sizes[i]));
	free(a);
	free(b);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * What the machine itself gives a large one-sided ping-pong, without
 * softverbs: two processes take turns writing SIZE bytes into each
 * other's memory with one process_vm_writev and spinning on its last
 * byte -- what ib_write_lat does over direct execution.  Its 99th
 * percentile over its typical (median) latency is the floor beside which
 * bench/dp_bench.sh reports ib_write_lat's tails.  Half a round trip per
 * sample, as perftest counts.
 *
 *   cma_pingpong SIZE ITERS   prints "cma_pingpong_typical SIZE us" and
 *                             "cma_pingpong_p99 SIZE us"
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Writes src (its last byte set to v) over the peer's buf. */
static int put(pid_t peer, uint8_t *src, volatile uint8_t *buf, size_t n,
	       uint8_t v)
{
	struct iovec l = { src, n }, r = { (void *)buf, n };

	src[n - 1] = v;
	return process_vm_writev(peer, &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

static void wait_for(volatile uint8_t *p, uint8_t v)
{
	while (*p != v)
		__asm__ __volatile__("pause");
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 0;
	int iters = argc > 2 ? atoi(argv[2]) : 0;
	volatile uint8_t *buf;
	uint8_t *src;
	double *t;
	pid_t pid;

	if (n < 1 || iters < 10) {
		fprintf(stderr, "usage: cma_pingpong SIZE ITERS (ITERS >= 10)\n");
		return 2;
	}
	/* Same addresses in both after the fork. */
	buf = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
	src = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
	t = calloc((size_t)iters, sizeof(*t));
	if (!buf || !src || !t)
		return 1;
	memset((void *)buf, 0, n);
	memset(src, 0, n);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		pid_t parent = getppid();

		for (int i = 0; i < iters; i++) {
			wait_for(buf + n - 1, (uint8_t)(2 * i + 1));
			if (put(parent, src, buf, n, (uint8_t)(2 * i + 2)))
				_exit(1);
		}
		_exit(0);
	}
	for (int i = 0; i < iters; i++) {
		double t0 = now_us();

		if (put(pid, src, buf, n, (uint8_t)(2 * i + 1))) {
			perror("process_vm_writev");
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return 1;
		}
		wait_for(buf + n - 1, (uint8_t)(2 * i + 2));
		t[i] = (now_us() - t0) / 2;
	}
	if (waitpid(pid, NULL, 0) != pid)
		return 1;
	qsort(t, (size_t)iters, sizeof(*t), cmp);
	printf("cma_pingpong_typical %zu %.2f\n", n, t[iters / 2]);
	printf("cma_pingpong_p99 %zu %.2f\n", n, t[iters * 99 / 100]);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * What a system call costs on this machine, one 8-byte process_vm_writev
 * into another process and one 8-byte pwrite on its /proc/PID/mem: direct
 * execution pays one of the two per message (or per batch), so these are
 * its floor (bench/dp_bench.sh).
 * Prints "what nanoseconds" lines.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static char target[4096];
static char src[8] = "softvrb";
static pid_t child;
static int memfd = -1;

static int op_getppid(void)
{
	return syscall(SYS_getppid) < 0;
}

static int op_cma(void)
{
	struct iovec l = { src, sizeof(src) }, r = { target, sizeof(src) };

	return process_vm_writev(child, &l, 1, &r, 1, 0) != sizeof(src);
}

static int op_proc_mem(void)
{
	return pwrite(memfd, src, sizeof(src), (off_t)(uintptr_t)target) !=
	       sizeof(src);
}

static int op_clock(void)
{
	return now_ns() < 0;
}

/* Nanoseconds per op: the best of 5 rounds of n (the machine is
 * shared); negative when op fails. */
static double best_of_5(int (*op)(void), int n)
{
	double best = 1e18;

	for (int round = 0; round < 5; round++) {
		double t0 = now_ns(), t;

		for (int i = 0; i < n; i++)
			if (op())
				return -1;
		t = (now_ns() - t0) / n;
		if (t < best)
			best = t;
	}
	return best;
}

int main(void)
{
	static const struct {
		const char *what;
		int (*op)(void);
		int n;
	} ops[] = {
		{ "syscall_getppid", op_getppid, 200000 },
		{ "process_vm_writev_8B", op_cma, 50000 },
		{ "proc_pid_mem_pwrite_8B", op_proc_mem, 50000 },
		{ "clock_gettime", op_clock, 200000 },
	};
	char path[32];
	int rc = 0;

	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		pause();
		_exit(0);
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)child);
	memfd = open(path, O_RDWR | O_CLOEXEC);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		double v;

		if (ops[i].op == op_proc_mem && memfd < 0)
			continue; /* not allowed here: no line */
		v = best_of_5(ops[i].op, ops[i].n);
		if (v < 0) {
			rc = 1;
			break;
		}
		printf("%s %.0f\n", ops[i].what, v);
	}
	if (memfd >= 0)
		close(memfd);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return rc;
}

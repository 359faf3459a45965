/* SPDX-License-Identifier: MIT */
/*
 * Unit test of sv_pid_state (src/common/sv_proc.c): this process runs, a
 * zombie and a reaped child are gone, and a process caught in its exit
 * is EXITING while its memory is already gone -- the moment a copy into
 * it (process_vm_writev) answers ESRCH although it is not yet a zombie,
 * which the engine must take for its death, not for a remote error.
 *
 * A process is held in that moment by the kernel's own rule: the init of
 * a PID namespace, when it exits, waits until every other process of the
 * namespace has been reaped.  Its other process here is a child of ours
 * that we leave a zombie until we have looked.  That needs a PID
 * namespace (root, or an unprivileged user namespace); without one that
 * part is skipped, and said so.
 */
#include "sv_proc.h"
#include "unit_test.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void running_zombie_reaped(void)
{
	pid_t c;

	EXPECT(sv_pid_state(getpid()) == SV_PID_RUNNING);
	EXPECT(sv_pid_alive(getpid()));
	c = fork();
	EXPECT(c >= 0);
	if (c == 0)
		_exit(0);
	/* Not reaped: a zombie, gone. */
	for (int i = 0; i < 500 && sv_pid_state(c) != SV_PID_GONE; i++)
		sleep_ms(10);
	EXPECT(sv_pid_state(c) == SV_PID_GONE);
	EXPECT(!sv_pid_alive(c));
	EXPECT(waitpid(c, NULL, 0) == c);
	EXPECT(sv_pid_state(c) == SV_PID_GONE);
}

/* In a process that has its own PID namespace for its children: the
 * namespace's init and a second process; returns what went wrong
 * (0 = all held). */
static int exiting_init(void)
{
	pid_t init, other = -1;
	char byte = 0;
	struct iovec l = { &byte, 1 }, r = { &byte, 1 };
	int i, cma, err = 0;

	init = fork();
	if (init < 0)
		return 10;
	if (init == 0) {
		pause();
		_exit(0);
	}
	other = fork(); /* in init's namespace (ours for children) */
	if (other < 0) {
		err = 11;
		goto out;
	}
	if (other == 0) {
		pause();
		_exit(0);
	}
	if (sv_pid_state(init) != SV_PID_RUNNING) {
		err = 12;
		goto out;
	}
	/* (Yama's ptrace_scope 2 or 3 refuses CMA even to a child: then
	 * only the state is checked.) */
	cma = process_vm_readv(init, &l, 1, &r, 1, 0) == 1;
	/* init's exit kills `other`, which stays our zombie: init waits. */
	kill(init, SIGKILL);
	for (i = 0; i < 1000; i++) {
		if (sv_pid_state(init) == SV_PID_EXITING &&
		    (!cma || (process_vm_readv(init, &l, 1, &r, 1, 0) < 0 &&
			      errno == ESRCH)))
			break;
		sleep_ms(10);
	}
	if (i == 1000) {
		err = 13; /* never seen exiting with its memory gone */
		goto out;
	}
	if (!sv_pid_alive(init)) {
		err = 14;
		goto out;
	}
	/* Held there as long as `other` is not reaped. */
	sleep_ms(50);
	if (sv_pid_state(init) != SV_PID_EXITING) {
		err = 15;
		goto out;
	}
	if (waitpid(other, NULL, 0) != other) {
		err = 16;
		goto out;
	}
	other = -1;
	for (i = 0; i < 1000 && sv_pid_state(init) != SV_PID_GONE; i++)
		sleep_ms(10);
	if (sv_pid_state(init) != SV_PID_GONE)
		err = 17;
out:
	/* Nothing left behind, whatever failed. */
	kill(init, SIGKILL);
	if (other > 0) {
		kill(other, SIGKILL);
		waitpid(other, NULL, 0);
	}
	if (waitpid(init, NULL, 0) != init && !err)
		err = 18;
	return err;
}

static void exiting(void)
{
	int st = 0;
	pid_t h = fork();

	EXPECT(h >= 0);
	if (h == 0) {
		if (unshare(CLONE_NEWPID) &&
		    unshare(CLONE_NEWUSER | CLONE_NEWPID))
			_exit(77);
		_exit(exiting_init());
	}
	EXPECT(waitpid(h, &st, 0) == h);
	EXPECT(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77) {
		printf("skipped: no PID namespace here (not root, no user "
		       "namespaces): EXITING not checked\n");
		return;
	}
	if (WEXITSTATUS(st))
		fprintf(stderr, "exiting: step %d failed\n", WEXITSTATUS(st));
	EXPECT(WEXITSTATUS(st) == 0);
}

int main(void)
{
	running_zombie_reaped();
	exiting();
	return unit_result();
}

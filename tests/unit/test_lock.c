/* SPDX-License-Identifier: MIT */
/*
 * The lock order's run-time check (src/engine/sv_lock.h, sv_lock.c),
 * built here with SV_LOCK_CHECK=1 whatever the build's option: locks
 * taken in the order's ranks pass; one taken out of order aborts, in a
 * child, with a message naming both locks, their ranks and where each was
 * taken; so does touching what a lock guards without it (SV_LOCK_HELD).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sv_lock.h"
#include "unit_test.h"

#if !SV_LOCK_CHECK
#error "test_lock needs SV_LOCK_CHECK=1"
#endif

static pthread_spinlock_t sq, sq2;
static pthread_mutex_t eng_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t async_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t qp_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct sv_shlock resp;

/* Runs fn in a child; its exit signal (0: it exited) and stderr. */
static int in_child(void (*fn)(void), char *err, size_t cap)
{
	int fds[2], st;
	ssize_t n, got = 0;
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		fn();
		_exit(0);
	}
	close(fds[1]);
	while (got < (ssize_t)cap - 1 &&
	       (n = read(fds[0], err + got, cap - 1 - (size_t)got)) > 0)
		got += n;
	err[got] = 0;
	close(fds[0]);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

/* The data path's order: SQ, responder, engine, a leaf. */
static void right_order(void)
{
	sv_lock_read(&qp_lock, SV_LOCK_QPTAB);
	sv_lock_spin(&sq, SV_LOCK_SQ);
	sv_lock_shm(&resp, SV_LOCK_RESP);
	sv_lock_mutex(&eng_lock, SV_LOCK_ENGINE);
	sv_lock_mutex(&async_lock, SV_LOCK_ASYNC);
	sv_unlock_mutex(&async_lock);
	sv_unlock_mutex(&eng_lock);
	sv_unlock_shm(&resp);
	sv_unlock_spin(&sq);
	sv_unlock_rw(&qp_lock);
}

/* qp_lock's read side under sq_lock (sv_direct.c local_pin), and again
 * under a lock of its own read (sv_rmem_serve in a box wait). */
static void read_exception(void)
{
	sv_lock_spin(&sq, SV_LOCK_SQ);
	sv_lock_read(&qp_lock, SV_LOCK_QPTAB);
	sv_lock_shm(&resp, SV_LOCK_RESP);
	sv_lock_read(&qp_lock, SV_LOCK_QPTAB);
	sv_unlock_rw(&qp_lock);
	sv_unlock_shm(&resp);
	sv_unlock_rw(&qp_lock);
	sv_unlock_spin(&sq);
}

/* A writer takes eng->lock under it (sv_engine_qp_add). */
static void writer_then_engine(void)
{
	sv_lock_write(&qp_lock, SV_LOCK_QPTAB);
	sv_lock_mutex(&eng_lock, SV_LOCK_ENGINE);
	sv_unlock_mutex(&eng_lock);
	sv_unlock_rw(&qp_lock);
}

/* Two of one kind, the second at rank + 1 as the order allows. */
static void two_declared(void)
{
	sv_lock_spin(&sq, SV_LOCK_SQ);
	sv_lock_spin(&sq2, SV_LOCK_SQ + 1);
	sv_unlock_spin(&sq);
	sv_unlock_spin(&sq2);
}

static void engine_then_sq(void)
{
	sv_lock_mutex(&eng_lock, SV_LOCK_ENGINE);
	sv_lock_spin(&sq, SV_LOCK_SQ);
}

static void engine_then_read(void)
{
	sv_lock_mutex(&eng_lock, SV_LOCK_ENGINE);
	sv_lock_read(&qp_lock, SV_LOCK_QPTAB);
}

static void writer_then_sq(void)
{
	sv_lock_write(&qp_lock, SV_LOCK_QPTAB);
	sv_lock_spin(&sq, SV_LOCK_SQ);
}

static void two_undeclared(void)
{
	sv_lock_spin(&sq, SV_LOCK_SQ);
	sv_lock_spin(&sq2, SV_LOCK_SQ);
}

static void unlock_unheld(void)
{
	sv_unlock_mutex(&eng_lock);
}

/* What a lock guards, touched with it held, then without. */
static void guarded_held(void)
{
	sv_lock_shm(&resp, SV_LOCK_RESP);
	SV_LOCK_HELD(&resp);
	sv_unlock_shm(&resp);
}

static void guarded_unheld(void)
{
	sv_lock_spin(&sq, SV_LOCK_SQ);
	SV_LOCK_HELD(&resp);
}

static void check_passes(void (*fn)(void), const char *name)
{
	char err[1024];
	int sig = in_child(fn, err, sizeof(err));

	if (sig || err[0])
		fprintf(stderr, "%s: signal %d, stderr: %s\n", name, sig, err);
	EXPECT(sig == 0);
	EXPECT(err[0] == 0);
}

/* fn aborts, and says why, naming the lock wanted, the one held and the
 * lines they were taken at. */
static void check_aborts(void (*fn)(void), const char *why,
			 const char *wanted, const char *held)
{
	char err[1024];
	int sig = in_child(fn, err, sizeof(err));

	if (sig != SIGABRT || !strstr(err, why))
		fprintf(stderr, "expected SIGABRT and '%s': signal %d, stderr: %s\n",
			why, sig, err);
	EXPECT(sig == SIGABRT);
	EXPECT(strstr(err, "softverbs: lock order: "));
	EXPECT(strstr(err, why));
	EXPECT(strstr(err, wanted));
	EXPECT(!held || strstr(err, held));
	EXPECT(strstr(err, "test_lock.c:"));
}

int main(void)
{
	pthread_spin_init(&sq, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&sq2, PTHREAD_PROCESS_PRIVATE);
	pthread_mutex_init(&resp.m, NULL); /* a private one will do here */
	check_passes(right_order, "right_order");
	check_passes(read_exception, "read_exception");
	check_passes(writer_then_engine, "writer_then_engine");
	check_passes(two_declared, "two_declared");
	check_aborts(engine_then_sq, "out of order", "&sq (rank 30)",
		     "&eng_lock (rank 140)");
	check_aborts(engine_then_read, "out of order", "&qp_lock (read) (rank 20)",
		     "&eng_lock (rank 140)");
	check_aborts(writer_then_sq, "for writing only ranks from SV_LOCK_ENGINE",
		     "&sq (rank 30)", "&qp_lock (write) (rank 20)");
	check_aborts(two_undeclared, "out of order", "&sq2 (rank 30)",
		     "&sq (rank 30)");
	check_aborts(unlock_unheld, "not held by this thread", "releasing &eng_lock",
		     NULL);
	check_passes(guarded_held, "guarded_held");
	check_aborts(guarded_unheld, "not held by this thread",
		     "touching what is guarded by &resp", NULL);
	return unit_result();
}

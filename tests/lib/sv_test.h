/* SPDX-License-Identifier: MIT */
/*
 * A small test runner in the manner of libuv's test/runner.c: every case
 * runs in its own child process with a timeout, so a crash or a hang fails
 * that case only; a case still running at its timeout (or when the
 * program's budget, SV_TEST_BUDGET seconds, 560 by default, runs out) is
 * killed after its processes' and its daemon's stacks are printed (gdb).
 * Each test program gets its own daemon: the runner sets SOFTVERBS_SOCKET
 * to a name unique to the program and shuts that daemon down at the end.
 *
 *   SV_TEST(name) { ... CHECK(...); ... }
 *   SV_TEST_MAIN()
 *
 * Run one case: ./test name.   List: ./test --list.
 */
#ifndef SV_TEST_H
#define SV_TEST_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "sv_proto.h"

struct sv_test_case {
	const char *name;
	void (*fn)(void);
	int timeout; /* seconds */
};

#define SV_TEST_MAX 256
extern struct sv_test_case sv_test_cases[SV_TEST_MAX];
extern int sv_test_ncases;
void sv_test_register(const char *name, void (*fn)(void), int timeout);

#define SV_TEST_T(name, secs)                                                  \
	static void test_##name(void);                                         \
	__attribute__((constructor)) static void register_##name(void)         \
	{                                                                      \
		sv_test_register(#name, test_##name, secs);                    \
	}                                                                      \
	static void test_##name(void)
#define SV_TEST(name) SV_TEST_T(name, 30)

#define SV_TEST_MAIN()                                                         \
	int main(int argc, char **argv)                                        \
	{                                                                      \
		return sv_test_main(argc, argv);                               \
	}
int sv_test_main(int argc, char **argv);

void sv_test_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
/* Ends the case as skipped: what it needs (root, a command, a kernel
 * feature) is missing here.  A program whose cases all skip exits 77,
 * which its ctest entry counts as skipped (SKIP_RETURN_CODE). */
#define SV_TEST_SKIPPED 77
void sv_test_skip(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
/* Runs a shell command (printf-style); the case fails unless it exits 0. */
void sv_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A failing check prints the expression and errno, and ends the case. */
#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond))                                                   \
			sv_test_fail(__FILE__, __LINE__, "CHECK(%s) (errno %d: %s)", \
				     #cond, errno, strerror(errno));           \
	} while (0)
#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		long long __a = (long long)(a), __b = (long long)(b);          \
		if (__a != __b)                                                \
			sv_test_fail(__FILE__, __LINE__,                       \
				     "CHECK_EQ(%s, %s): %lld != %lld (errno %d: %s)", \
				     #a, #b, __a, __b, errno, strerror(errno)); \
	} while (0)
/* For pointer verbs: NULL with this errno. */
#define CHECK_NULL_ERRNO(expr, err)                                            \
	do {                                                                   \
		errno = 0;                                                     \
		void *__p = (void *)(expr);                                    \
		if (__p || errno != (err))                                     \
			sv_test_fail(__FILE__, __LINE__,                       \
				     "%s: expected NULL/%s, got %p/errno %d (%s)", \
				     #expr, strerror(err), __p, errno,         \
				     strerror(errno));                         \
	} while (0)

/* The daemon's own counters (SV_OP_STATUS), through a private channel. */
int sv_test_status(struct sv_status_rep *st);
/* The daemon's counters before the case made anything: starts the daemon
 * (through the device list) first. */
void sv_test_baseline(struct sv_status_rep *st);
struct ibv_context;
/* Opens the device, starting the daemon if needed; fails the case unless
 * the list holds exactly one device. */
struct ibv_context *sv_test_open_dev(void);
/* Waits until the daemon's counters satisfy the leak check: no ufile,
 * no context, no object, and as many fds as baseline.  Returns 0 or fails
 * the case after timeout_ms. */
void sv_test_wait_quiet(const struct sv_status_rep *baseline, int timeout_ms);
/* One page of the daemon's resource list (SV_OP_RES_LIST) for req, and req's
 * cursor moved on to the next page.  Fails the case unless the call works
 * and the reply is exactly as long as its rows. */
void sv_test_res_page(struct sv_res_req *req, struct sv_res_rep *rep);
/* pid of the daemon of this test, or -1. */
pid_t sv_test_daemon_pid(void);
/* waitpid(pid) through EINTR: the wait status, or -1. */
int sv_test_wait_child(pid_t pid);
/* A raw control connection to this test's socket (no uid check, no
 * HELLO), or -1. */
int sv_test_raw_connect(void);
/* Runs fn in a child; returns its exit status (or 128+signal). */
int sv_test_child(void (*fn)(void *), void *arg);
/*
 * A fork()ed child reads the byte at addr.  Returns that byte (0..255), or
 * -signal when the child died reading it (-SIGSEGV: the page was not
 * inherited, as after MADV_DONTFORK).  The child restores the default
 * SIGSEGV action first, so sanitizer builds see the plain signal too.
 */
int sv_test_child_read(const volatile char *addr);
/* Unix socketpair helpers for passing fds between processes. */
int sv_test_send_fd(int sock, int fd, const void *data, size_t len);
int sv_test_recv_fd(int sock, void *data, size_t len);
/* Receives a cmd_fd with len bytes of data and imports its device; fails
 * the case unless both work. */
struct ibv_context *sv_test_recv_context(int sock, void *data, size_t len);
void sv_test_sleep_ms(int ms);

#endif

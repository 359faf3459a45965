/* SPDX-License-Identifier: MIT */
/*
 * A small test runner in the manner of libuv's test/runner.c: every case
 * runs in its own child process with a timeout, so a crash or a hang fails
 * that case only.  Each test program gets its own daemon: the runner sets
 * SOFTVERBS_SOCKET to a name unique to the program and shuts that daemon
 * down at the end.
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
/* Waits until the daemon's counters satisfy the leak check: no ufile,
 * no context, no object, and as many fds as baseline.  Returns 0 or fails
 * the case after timeout_ms. */
void sv_test_wait_quiet(const struct sv_status_rep *baseline, int timeout_ms);
/* pid of the daemon of this test, or -1. */
pid_t sv_test_daemon_pid(void);
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
void sv_test_sleep_ms(int ms);

#endif

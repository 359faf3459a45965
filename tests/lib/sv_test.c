/* SPDX-License-Identifier: MIT */
#include "sv_test.h"
#include "sv_client.h"
#include "sv_sock.h"

#include <dirent.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct sv_test_case sv_test_cases[SV_TEST_MAX];
int sv_test_ncases;
static const char *current = "?";

static void dump_stacks(pid_t group);
static pid_t runner_pid; /* sv_test_main's process */

void sv_test_register(const char *name, void (*fn)(void), int timeout)
{
	if (sv_test_ncases < SV_TEST_MAX)
		sv_test_cases[sv_test_ncases++] =
			(struct sv_test_case){ name, fn, timeout };
}

void sv_test_fail(const char *file, int line, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "FAIL %s: %s:%d: %s\n", current, file, line, buf);
	fflush(stderr);
	if (getenv("SV_TEST_STACKS"))
		dump_stacks(getpgrp());
	_exit(1);
}

void sv_test_sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st != 0)
		sv_test_fail(__FILE__, __LINE__, "`%s` exited with %d", cmd, st);
}

void sv_test_skip(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	printf("skip %s: %s\n", current, buf);
	fflush(stdout);
	_exit(SV_TEST_SKIPPED);
}

void sv_test_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int sv_test_status(struct sv_status_rep *st)
{
	return sv_call_simple(SV_OP_STATUS, 0, 0, -1, NULL, 0, st, sizeof(*st));
}

void sv_test_baseline(struct sv_status_rep *st)
{
	struct ibv_device **list = ibv_get_device_list(NULL); /* starts it */

	CHECK(list);
	ibv_free_device_list(list);
	CHECK_EQ(sv_test_status(st), 0);
}

struct ibv_context *sv_test_open_dev(void)
{
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx;

	CHECK(list);
	CHECK_EQ(n, 1);
	CHECK(list[0] && !list[1]);
	ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	ibv_free_device_list(list);
	return ctx;
}

pid_t sv_test_daemon_pid(void)
{
	struct sv_status_rep st;

	if (sv_chan_probe() || sv_test_status(&st))
		return -1;
	return st.pid;
}

void sv_test_wait_quiet(const struct sv_status_rep *base, int timeout_ms)
{
	struct sv_status_rep st;
	int waited = 0;

	for (;;) {
		if (sv_test_status(&st))
			sv_test_fail(__FILE__, __LINE__, "daemon status failed");
		if (st.ufiles == base->ufiles && st.contexts == base->contexts &&
		    st.objects == base->objects && st.open_fds == base->open_fds)
			return;
		if (waited >= timeout_ms)
			sv_test_fail(__FILE__, __LINE__,
				     "daemon not back to baseline: ufiles %u/%u contexts %u/%u objects %u/%u fds %u/%u",
				     st.ufiles, base->ufiles, st.contexts,
				     base->contexts, st.objects, base->objects,
				     st.open_fds, base->open_fds);
		sv_test_sleep_ms(20);
		waited += 20;
	}
}

void sv_test_res_page(struct sv_res_req *req, struct sv_res_rep *rep)
{
	struct sv_call c = { .op = SV_OP_RES_LIST,
			     .attach_fd = -1,
			     .req = req,
			     .req_len = sizeof(*req),
			     .rep = rep,
			     .rep_cap = sizeof(*rep) };

	CHECK_EQ(sv_call(&c), 0);
	CHECK_EQ(c.rep_len, offsetof(struct sv_res_rep, e) +
				    rep->count * sizeof(rep->e[0]));
	req->cursor_ufile = rep->next_ufile;
	req->cursor_handle = rep->next_handle;
}

int sv_test_wait_child(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}

int sv_test_raw_connect(void)
{
	struct sockaddr_un addr;
	socklen_t len = sv_socket_addr(&addr);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&addr, len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int sv_test_child(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	status = sv_test_wait_child(pid);
	if (status < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int sv_test_child_read(const volatile char *addr)
{
	struct rlimit no_core = { 0, 0 };
	int status;
	pid_t pid = fork();

	if (pid < 0)
		sv_test_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
	if (pid == 0) {
		setrlimit(RLIMIT_CORE, &no_core); /* a SIGSEGV may be expected */
		signal(SIGSEGV, SIG_DFL);
		_exit((unsigned char)*addr);
	}
	status = sv_test_wait_child(pid);
	if (status < 0)
		sv_test_fail(__FILE__, __LINE__, "waitpid: %s", strerror(errno));
	return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
}

int sv_test_send_fd(int sock, int fd, const void *data, size_t len)
{
	return sv_send_msg(sock, data, len, &fd, fd >= 0 ? 1 : 0, 0);
}

int sv_test_recv_fd(int sock, void *data, size_t len)
{
	int fd = -1, n;
	ssize_t r = sv_recv_msg(sock, data, len, &fd, 1, &n);

	if (r < 0)
		return (int)r;
	return n ? fd : -1;
}

struct ibv_context *sv_test_recv_context(int sock, void *data, size_t len)
{
	int fd = sv_test_recv_fd(sock, data, len);
	struct ibv_context *ctx;

	CHECK(fd >= 0);
	ctx = ibv_import_device(fd);
	CHECK(ctx);
	return ctx;
}

/* Whether process pid belongs to the case: in its process group, or
 * started with our SOFTVERBS_SOCKET (the daemon, and what the case's
 * helpers started). */
static int belongs(pid_t pid, pid_t group, const char *sock_env)
{
	char path[64], env[65536];
	ssize_t n;
	int fd;

	if (getpgid(pid) == group)
		return 1;
	if (!sock_env)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, env, sizeof(env) - 1);
	close(fd);
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(env + i) + 1) {
		env[n] = 0;
		if (!strcmp(env + i, sock_env))
			return 1;
	}
	return 0;
}

/* A case that ran out of time (or failed, with SV_TEST_STACKS): every
 * thread's stack of its processes and of its daemon, on stderr (ctest
 * shows a failing test's output), when gdb is there -- a hang in a loaded
 * CI run is seen once and must say where. */
static void dump_stacks(pid_t group)
{
	const char *sock = getenv("SOFTVERBS_SOCKET");
	char sock_env[160], cmd[256];
	pid_t pids[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	if (access("/usr/bin/gdb", X_OK) || !(d = opendir("/proc")))
		return;
	if (sock)
		snprintf(sock_env, sizeof(sock_env), "SOFTVERBS_SOCKET=%s", sock);
	/* Listed first, dumped after: /proc changes under gdb's processes. */
	while ((e = readdir(d)) && n < 64) {
		pid_t pid = (pid_t)atoi(e->d_name);

		if (pid > 0 && pid != runner_pid &&
		    belongs(pid, group, sock ? sock_env : NULL))
			pids[n++] = pid;
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		snprintf(cmd, sizeof(cmd),
			 "echo '--- stacks of %d:' $(tr '\\0' ' ' < /proc/%d/cmdline) >&2;"
			 " gdb -batch -nx -p %d -ex 'thread apply all bt' </dev/null 2>&1"
			 " | grep -v '^\\[New LWP\\|^$' >&2",
			 (int)pids[i], (int)pids[i], (int)pids[i]);
		if (system(cmd) == -1)
			break;
	}
}

/* Whole seconds since the runner started. */
static long runner_secs(void)
{
	static struct timespec t0;
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	if (!t0.tv_sec && !t0.tv_nsec)
		t0 = t;
	return (long)(t.tv_sec - t0.tv_sec);
}

/*
 * How long a case may run: its own timeout, but no longer than the
 * program's budget (SV_TEST_BUDGET seconds, 560 by default: under the 600
 * ctest gives a program, so a hang is reported with its stacks here rather
 * than killed silently by ctest).  SV_TEST_BUDGET=0 lifts the budget, for
 * long fuzz runs (SV_FUZZ_SECONDS).
 */
static long case_secs(const struct sv_test_case *t)
{
	const char *env = getenv("SV_TEST_BUDGET");
	long budget = env ? atol(env) : 560, left;

	if (budget <= 0)
		return t->timeout;
	left = budget - runner_secs();
	return left < t->timeout ? (left > 1 ? left : 1) : t->timeout;
}

/* 0 passed, 1 failed, 2 skipped. */
static int run_case(const struct sv_test_case *t)
{
	long secs = case_secs(t);
	struct timespec t0, now;
	int status, timed_out = 0;
	sigset_t chld, old;
	pid_t pid;

	current = t->name;
	fflush(NULL);
	/* The case's end wakes us (SIGCHLD, taken by sigtimedwait). */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	pid = fork();
	if (pid < 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		return 1;
	}
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		setpgid(0, 0);
		t->fn();
		_exit(0);
	}
	setpgid(pid, pid); /* both sides: the group exists before we look */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct timespec tick = { 1, 0 };
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			sigprocmask(SIG_SETMASK, &old, NULL);
			return 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= secs) {
			fprintf(stderr, "FAIL %s: still running after %ld s; "
				"the stacks of its processes:\n", t->name, secs);
			/* gdb needs SIGCHLD: it learns of the stops by it. */
			sigprocmask(SIG_SETMASK, &old, NULL);
			dump_stacks(pid);
			kill(-pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			timed_out = 1;
			break;
		}
		sigtimedwait(&chld, NULL, &tick);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* Helpers the case forked live in its process group. */
	kill(-pid, SIGKILL);
	if (timed_out) {
		printf("FAIL %s: timeout (%ld s)\n", t->name, secs);
		return 1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("ok %s\n", t->name);
		return 0;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == SV_TEST_SKIPPED)
		return 2; /* the case said why */
	if (WIFSIGNALED(status))
		printf("FAIL %s: %s\n", t->name, strsignal(WTERMSIG(status)));
	else
		printf("FAIL %s\n", t->name);
	return 1;
}

int sv_test_main(int argc, char **argv)
{
	char sock[108];
	const char *only = argc > 1 ? argv[1] : NULL;
	int failed = 0, ran = 0, skipped = 0;

	if (only && !strcmp(only, "--list")) {
		for (int i = 0; i < sv_test_ncases; i++)
			printf("%s\n", sv_test_cases[i].name);
		return 0;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	runner_secs(); /* the budget counts from here */
	runner_pid = getpid();
	/* A daemon of our own, named after this program and pid. */
	if (!getenv("SV_TEST_SHARED_DAEMON")) {
		const char *base = strrchr(argv[0], '/');

		snprintf(sock, sizeof(sock), "svtest.%s.%d",
			 base ? base + 1 : argv[0], (int)getpid());
		setenv("SOFTVERBS_SOCKET", sock, 1);
		/* And a RoCE port of its own (below the ephemeral range):
		 * daemons of tests running side by side would contend for
		 * 4791, and one that gets it later, when the holder exits,
		 * opens its sockets in the middle of a test's fd count. */
		if (!getenv("SOFTVERBS_ROCE_PORT")) {
			char port[16];

			snprintf(port, sizeof(port), "%d",
				 20000 + (int)(getpid() % 10000));
			setenv("SOFTVERBS_ROCE_PORT", port, 1);
		}
	}
	for (int i = 0; i < sv_test_ncases; i++) {
		if (only && strcmp(only, sv_test_cases[i].name))
			continue;
		ran++;
		switch (run_case(&sv_test_cases[i])) {
		case 1:
			failed++;
			break;
		case 2:
			skipped++;
			break;
		}
	}
	if (!getenv("SV_TEST_SHARED_DAEMON") && sv_chan_probe() == 0)
		sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
	if (skipped)
		printf("%d passed, %d failed, %d skipped\n",
		       ran - failed - skipped, failed, skipped);
	else
		printf("%d passed, %d failed\n", ran - failed, failed);
	if (only && !ran) {
		fprintf(stderr, "no test named %s\n", only);
		return 2;
	}
	if (failed)
		return 1;
	return ran && skipped == ran ? SV_TEST_SKIPPED : 0;
}

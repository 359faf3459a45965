/* SPDX-License-Identifier: MIT */
/*
 * Our abstract socket name held first by a process of another uid (any
 * user may bind any abstract name): the owner still gets a working device,
 * from a daemon on a socket in the owner's private directory
 * (src/common/sv_addr.h), and the squatter is sent nothing, whatever it
 * does with the name: bind it only, listen and never accept, fill its
 * backlog, accept and never answer, or answer as our protocol would.
 *
 * Root only: the squatter is a child of ours that becomes uid 65534.
 * Each case has its own socket name and its own runtime directory
 * (XDG_RUNTIME_DIR, a fresh 0700 directory), removed at its end.
 */
#include "sv_test.h"
#include "sv_addr.h"
#include "sv_client.h"
#include "sv_proc.h"
#include "sv_sock.h"

#include <fcntl.h>
#include <grp.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOBODY 65534

enum squat_kind {
	SQ_BOUND,  /* bind() only */
	SQ_LISTEN, /* listen(), never accept() */
	SQ_FULL,   /* listen(fd, 0) and its one place taken: connect() waits */
	SQ_SILENT, /* accept(), read, never answer */
	SQ_ANSWER, /* accept(), and send a HELLO reply at once and to anything */
};

/* What the squatter tells us through its pipe, one record per event. */
struct squat_ev {
	char kind; /* 'R' ready, 'C' accepted a connection, 'B' got bytes */
	uint32_t n;
};

struct squatter {
	pid_t pid;
	int rd; /* its events */
};

static char run_dir[64];
static char sockname[108];

static void need_root(void)
{
	if (getuid() != 0)
		sv_test_skip("needs root for a squatter of another uid");
}

/* A socket name and a runtime directory of the case's own. */
static void private_setup(const char *tag)
{
	snprintf(sockname, sizeof(sockname), "svtest.sq%s.%d", tag, (int)getpid());
	setenv("SOFTVERBS_SOCKET", sockname, 1);
	snprintf(run_dir, sizeof(run_dir), "/tmp/svtest-run.XXXXXX");
	CHECK(mkdtemp(run_dir));
	setenv("XDG_RUNTIME_DIR", run_dir, 1);
}

static void ev(int wr, char kind, uint32_t n)
{
	struct squat_ev e = { kind, n };

	if (write(wr, &e, sizeof(e)) != sizeof(e))
		_exit(3);
}

/* The squatter's life, as uid 65534. */
static void squat_main(enum squat_kind kind, int wr)
{
	struct sockaddr_un addr;
	socklen_t len = sv_socket_addr(&addr);
	struct pollfd p[64];
	int np = 1, fd;

	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
		_exit(2);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, len) < 0)
		_exit(4);
	if (kind != SQ_BOUND && listen(fd, kind == SQ_FULL ? 0 : 128) < 0)
		_exit(5);
	if (kind == SQ_FULL) {
		/* Backlog 0 holds one connection: ours. */
		int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);

		if (c < 0 || connect(c, (struct sockaddr *)&addr, len) < 0)
			_exit(6);
	}
	ev(wr, 'R', 0);
	if (kind == SQ_BOUND || kind == SQ_LISTEN || kind == SQ_FULL)
		for (;;)
			pause();
	p[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
	for (;;) {
		if (poll(p, np, -1) < 0)
			continue;
		if ((p[0].revents & POLLIN) && np < 64) {
			int c = accept(fd, NULL, NULL);

			if (c >= 0) {
				ev(wr, 'C', 1);
				p[np++] = (struct pollfd){ .fd = c, .events = POLLIN };
				if (kind == SQ_ANSWER) {
					/* A daemon's HELLO reply, unasked. */
					struct {
						struct sv_msg_hdr h;
						struct sv_hello_rep r;
					} m = { .h = { .magic = SV_PROTO_MAGIC,
						       .version = SV_PROTO_VERSION,
						       .op = SV_OP_HELLO,
						       .len = sizeof(m),
						       .seq = 1 },
						.r = { .instance = 7,
						       .daemon_pid = getpid(),
						       .proto_version = SV_PROTO_VERSION } };

					send(c, &m, sizeof(m), MSG_NOSIGNAL);
				}
			}
		}
		for (int i = 1; i < np; i++) {
			char buf[SV_MSG_MAX];
			ssize_t n;

			if (!p[i].revents)
				continue;
			n = recv(p[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n > 0)
				ev(wr, 'B', (uint32_t)n);
			if (n == 0 || (p[i].revents & (POLLHUP | POLLERR))) {
				close(p[i].fd);
				p[i--] = p[--np];
			}
		}
	}
}

static struct squatter squat_start(enum squat_kind kind)
{
	struct squatter s;
	struct squat_ev e;
	int pfd[2];

	CHECK_EQ(pipe2(pfd, O_CLOEXEC), 0);
	s.pid = fork();
	CHECK(s.pid >= 0);
	if (s.pid == 0) {
		close(pfd[0]);
		squat_main(kind, pfd[1]);
		_exit(0);
	}
	close(pfd[1]);
	s.rd = pfd[0];
	/* Its first word: the name is ours... its, now. */
	if (read(s.rd, &e, sizeof(e)) != sizeof(e) || e.kind != 'R') {
		int st = sv_test_wait_child(s.pid);

		sv_test_fail(__FILE__, __LINE__, "squatter did not start (status %d)", st);
	}
	return s;
}

/* Ends the squatter; returns the bytes it received, *conns the connections
 * it accepted. */
static uint32_t squat_stop(struct squatter *s, uint32_t *conns)
{
	struct squat_ev e;
	uint32_t bytes = 0;

	*conns = 0;
	CHECK(sv_pid_alive(s->pid)); /* untouched until now */
	CHECK_EQ(kill(s->pid, SIGKILL), 0);
	sv_test_wait_child(s->pid);
	while (read(s->rd, &e, sizeof(e)) == sizeof(e)) {
		if (e.kind == 'C')
			*conns += e.n;
		else if (e.kind == 'B')
			bytes += e.n;
	}
	close(s->rd);
	return bytes;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The owner's program: device, PD, MR, as any verbs program starts. */
static void use_device(void)
{
	static char buf[4096];
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd;
	struct ibv_mr *mr;

	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	mr = ibv_reg_mr(pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	CHECK(mr->lkey != 0 && mr->addr == buf);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* Our daemon's socket: in the case's runtime directory. */
static void check_where(char *path, size_t cap)
{
	char prefix[256];
	const char *w;

	CHECK_EQ(sv_chan_probe(), 0);
	w = sv_chan_where();
	snprintf(prefix, sizeof(prefix), "%s/softverbs/%s.net", run_dir, sockname);
	if (strncmp(w, prefix, strlen(prefix)))
		sv_test_fail(__FILE__, __LINE__, "our daemon is on '%s', not %s*", w, prefix);
	snprintf(path, cap, "%s", w);
}

/* `softverbs daemon status` says where it listens and who holds the name. */
static void check_status(const char *path, int uid_known)
{
	char cmd[256], out[8192], want[PATH_MAX + 256];
	const char *sv = getenv("SOFTVERBS");
	size_t n;
	FILE *f;

	CHECK(sv);
	snprintf(cmd, sizeof(cmd), "%s daemon status 2>&1", sv);
	f = popen(cmd, "r");
	CHECK(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	CHECK_EQ(pclose(f), 0);
	snprintf(want, sizeof(want), "socket:       %s\n", path);
	if (!strstr(out, want))
		sv_test_fail(__FILE__, __LINE__, "status does not say '%s':\n%s", want, out);
	snprintf(want, sizeof(want), "abstract:     @%s is held by %s", sockname,
		 uid_known ? "uid 65534" : "");
	if (!strstr(out, want))
		sv_test_fail(__FILE__, __LINE__, "status does not say '%s':\n%s", want, out);
}

/* Stops our daemon; its socket file goes with it. */
static void stop_daemon(const char *path)
{
	pid_t pid = sv_test_daemon_pid();

	CHECK(pid > 0);
	sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
	for (int waited = 0; sv_pid_alive(pid); waited += 10) {
		CHECK(waited < 10000);
		sv_test_sleep_ms(10);
	}
	sv_chan_reset();
	CHECK(access(path, F_OK) < 0 && errno == ENOENT);
}

static void cleanup(void)
{
	sv_test_sh("rm -rf %s", run_dir);
}

/* Whether the kernel's socket list names the owner of a bound socket
 * (sock_diag with UNIX_DIAG_UID); without it the holder's uid of a
 * squatter that does not listen is unknown. */
static int holder_uid_known(void)
{
	struct sv_holder h;

	sv_abstract_holder(&h);
	return h.uid == NOBODY;
}

/* One squatter of this kind, then the owner's program. */
static void owner_despite(enum squat_kind kind, const char *tag)
{
	char path[PATH_MAX + 96];
	struct squatter s;
	uint32_t bytes, conns;
	double t0, took;
	int uid_known;

	need_root();
	private_setup(tag);
	s = squat_start(kind);
	uid_known = holder_uid_known();
	t0 = now_s();
	use_device();
	took = now_s() - t0;
	printf("%s: device used in %.2f s\n", tag, took);
	/* A squatter makes us wait at most one bounded connect
	 * (SV_CONNECT_WAIT_MS, 2 s) on top of the daemon's start. */
	CHECK(took < 8.0);
	check_where(path, sizeof(path));
	check_status(path, uid_known);
	/* A second program finds the same daemon at once. */
	t0 = now_s();
	use_device();
	CHECK(now_s() - t0 < 2.0);
	stop_daemon(path);
	bytes = squat_stop(&s, &conns);
	if (bytes)
		sv_test_fail(__FILE__, __LINE__, "the squatter received %u bytes", bytes);
	/* It did see us knock (and hang up at once): the test met it. */
	if (kind == SQ_SILENT || kind == SQ_ANSWER)
		CHECK(conns >= 1);
	cleanup();
}

SV_TEST(squatter_bound_only)
{
	owner_despite(SQ_BOUND, "bound");
}

SV_TEST(squatter_listening_never_accepts)
{
	owner_despite(SQ_LISTEN, "listen");
}

SV_TEST(squatter_backlog_full)
{
	owner_despite(SQ_FULL, "full");
}

SV_TEST(squatter_accepts_never_answers)
{
	owner_despite(SQ_SILENT, "silent");
}

SV_TEST(squatter_answers_as_daemon)
{
	owner_despite(SQ_ANSWER, "answer");
}

/* An unmodified program under `softverbs run`, with the name squatted. */
SV_TEST(squatter_softverbs_run_devinfo)
{
	char cmd[512], out[4096];
	struct squatter s;
	uint32_t bytes, conns;
	size_t n;
	FILE *f;

	need_root();
	if (access("/usr/bin/ibv_devinfo", X_OK))
		sv_test_skip("no ibv_devinfo (ibverbs-utils)");
#ifdef __SANITIZE_ADDRESS__
	/* An uninstrumented program cannot load a sanitized library without
	 * the runtime preloaded: the compat tests' business, not run here. */
	sv_test_skip("a sanitized build: ibv_devinfo cannot load this library");
#endif
	private_setup("run");
	s = squat_start(SQ_ANSWER);
	snprintf(cmd, sizeof(cmd), "%s run /usr/bin/ibv_devinfo -d sv0 2>&1",
		 getenv("SOFTVERBS"));
	f = popen(cmd, "r");
	CHECK(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	if (pclose(f) != 0 || !strstr(out, "hca_id:\tsv0") ||
	    !strstr(out, "PORT_ACTIVE"))
		sv_test_fail(__FILE__, __LINE__, "ibv_devinfo failed:\n%s", out);
	/* It said, once, who holds the name. */
	CHECK(strstr(out, "held by uid 65534"));
	CHECK_EQ(sv_chan_probe(), 0);
	{
		char path[PATH_MAX + 96];

		check_where(path, sizeof(path));
		stop_daemon(path);
	}
	bytes = squat_stop(&s, &conns);
	CHECK_EQ(bytes, 0);
	CHECK(conns >= 1);
	cleanup();
}

/* A fallback daemon SIGKILLed leaves its socket file; the next one, under
 * the lock, replaces it. */
SV_TEST(fallback_daemon_killed_then_replaced)
{
	char path[PATH_MAX + 96];
	struct squatter s;
	uint32_t bytes, conns;
	pid_t first;

	need_root();
	private_setup("kill");
	s = squat_start(SQ_LISTEN);
	use_device();
	check_where(path, sizeof(path));
	first = sv_test_daemon_pid();
	CHECK(first > 0);
	CHECK_EQ(kill(first, SIGKILL), 0);
	/* Gone = nothing of ours answers: the leader of a killed process can
	 * be a zombie while another of its threads still holds the socket. */
	for (int waited = 0;; waited += 10) {
		sv_chan_reset();
		if (!sv_pid_alive(first) && sv_chan_probe() != 0)
			break;
		CHECK(waited < 10000);
		sv_test_sleep_ms(10);
	}
	sv_chan_reset();
	CHECK_EQ(access(path, F_OK), 0); /* left behind */
	use_device();
	CHECK(sv_test_daemon_pid() != first);
	check_where(path, sizeof(path));
	stop_daemon(path);
	bytes = squat_stop(&s, &conns);
	CHECK_EQ(bytes, 0);
	cleanup();
}

/* Every network namespace keeps its own daemon, squatted or not: the file
 * name carries the namespace's inode. */
SV_TEST(fallback_one_daemon_per_netns)
{
	char path[PATH_MAX + 96], other[PATH_MAX + 96];
	struct squatter s;
	uint32_t bytes, conns;
	pid_t kid, mine;
	int pfd[2], status;
	ssize_t n;

	need_root();
	private_setup("ns");
	s = squat_start(SQ_LISTEN);
	use_device();
	check_where(path, sizeof(path));
	mine = sv_test_daemon_pid();
	CHECK_EQ(pipe(pfd), 0);
	kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		struct squatter s2;
		char w[PATH_MAX + 96];
		pid_t d;

		close(pfd[0]);
		sv_chan_reset();
		if (unshare(CLONE_NEWNET) < 0)
			_exit(77);
		s2 = squat_start(SQ_LISTEN);
		use_device();
		CHECK_EQ(sv_chan_probe(), 0);
		snprintf(w, sizeof(w), "%s", sv_chan_where());
		d = sv_test_daemon_pid();
		CHECK(d > 0 && d != mine);
		CHECK(write(pfd[1], w, strlen(w)) == (ssize_t)strlen(w));
		close(pfd[1]);
		stop_daemon(w);
		CHECK_EQ(squat_stop(&s2, &conns), 0);
		_exit(0);
	}
	close(pfd[1]);
	n = read(pfd[0], other, sizeof(other) - 1);
	close(pfd[0]);
	status = sv_test_wait_child(kid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		sv_test_skip("unshare(CLONE_NEWNET) refused");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(n > 0);
	other[n] = 0;
	/* Same directory, another file; ours still serves us. */
	CHECK(strcmp(path, other) != 0);
	CHECK(!strncmp(path, other, strrchr(path, '.') - path));
	CHECK_EQ(sv_test_daemon_pid(), mine);
	stop_daemon(path);
	bytes = squat_stop(&s, &conns);
	CHECK_EQ(bytes, 0);
	cleanup();
}

/* A runtime directory open to others is refused: the daemon goes to the
 * next candidate (/run/user/0, else the home directory), never there. */
SV_TEST(runtime_dir_open_to_others_refused)
{
	char path[PATH_MAX + 96], home[64], want[PATH_MAX];
	struct squatter s;
	uint32_t conns;
	struct stat st;

	need_root();
	private_setup("mode");
	CHECK_EQ(chmod(run_dir, 0777), 0);
	snprintf(home, sizeof(home), "/tmp/svtest-home.XXXXXX");
	CHECK(mkdtemp(home));
	setenv("HOME", home, 1);
	if (stat("/run/user/0", &st) == 0)
		snprintf(want, sizeof(want), "/run/user/0/softverbs/");
	else
		snprintf(want, sizeof(want), "%s/.softverbs/", home);
	s = squat_start(SQ_BOUND);
	use_device();
	CHECK_EQ(sv_chan_probe(), 0);
	snprintf(path, sizeof(path), "%s", sv_chan_where());
	if (strncmp(path, want, strlen(want)))
		sv_test_fail(__FILE__, __LINE__, "our daemon is on '%s', not in %s", path, want);
	/* Nothing of ours went into the refused directory. */
	CHECK(access(strcat(strcpy(want, run_dir), "/softverbs"), F_OK) < 0);
	stop_daemon(path);
	CHECK_EQ(squat_stop(&s, &conns), 0);
	if (!strncmp(path, "/run/user/0/", 12)) {
		/* Not ours to remove: only the lock file we made. */
		char lock[PATH_MAX + 104];

		snprintf(lock, sizeof(lock), "%s.lock", path);
		unlink(lock);
	}
	sv_test_sh("rm -rf %s", home);
	cleanup();
}

SV_TEST_MAIN()

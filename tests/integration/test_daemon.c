/* SPDX-License-Identifier: MIT */
/*
 * The daemon's life: started by the first verb, exits when idle (and only
 * then), stops cleanly on SIGTERM/SIGINT, loses a start race quietly, and
 * talks only to its own uid in both directions.
 *
 * Every case uses a socket name of its own, so "no daemon yet" is true at
 * its start whatever the other cases left behind.
 */
#include "sv_test.h"
#include "sv_client.h"
#include "sv_proc.h"
#include "sv_sock.h"

#include <fcntl.h>
#include <grp.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char sockname[108];

static void private_socket(const char *tag)
{
	snprintf(sockname, sizeof(sockname), "svtest.%s.%d", tag, (int)getpid());
	setenv("SOFTVERBS_SOCKET", sockname, 1);
}

/* Waits (up to timeout_ms) until no daemon of ours answers (a squatter
 * of another uid may) and pid is gone.  Returns 1 when gone. */
static int wait_gone(pid_t pid, int timeout_ms)
{
	for (int waited = 0; waited <= timeout_ms; waited += 20) {
		int err;

		sv_chan_reset();
		err = sv_chan_probe();
		if ((err == -ENODEV || err == -EACCES) &&
		    (pid <= 0 || !sv_pid_alive(pid)))
			return 1;
		sv_test_sleep_ms(20);
	}
	return 0;
}

static void shutdown_daemon(void)
{
	pid_t pid = sv_test_daemon_pid();

	if (pid > 0) {
		sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
		CHECK(wait_gone(pid, 10000));
	}
}

static const char *daemon_bin(void)
{
	return sv_daemon_path();
}

/* Starts softverbsd (not detached) as our child on our socket; stderr to
 * errfile (or /dev/null).  With uid >= 0 the child drops to that uid. */
static pid_t start_daemon_child(int uid, const char *errfile, const char *idle)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(errfile ? errfile : "/dev/null",
			      O_WRONLY | O_CREAT | O_TRUNC, 0666);

		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
		if (uid >= 0 && (setgroups(0, NULL) || setgid(uid) || setuid(uid)))
			_exit(99);
		execl(daemon_bin(), "softverbsd", "--socket", sockname, "--idle",
		      idle, (char *)NULL);
		_exit(98);
	}
	return pid;
}

/* Whether uid may execute the daemon binary (a build tree under a 0700
 * home directory is out of reach for other users). */
static int can_exec_as(int uid)
{
	pid_t pid = fork();
	int status;

	CHECK(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(uid) || setuid(uid))
			_exit(2);
		_exit(access(daemon_bin(), X_OK) == 0 ? 0 : 1);
	}
	status = sv_test_wait_child(pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void wait_listening(int timeout_ms)
{
	for (int waited = 0;; waited += 10) {
		int fd = sv_test_raw_connect();

		if (fd >= 0) {
			close(fd);
			return;
		}
		if (waited > timeout_ms)
			sv_test_fail(__FILE__, __LINE__, "daemon never listened");
		sv_test_sleep_ms(10);
	}
}

SV_TEST(autostart_on_first_use)
{
	struct ibv_context *ctx;
	struct sv_status_rep st;
	pid_t pid, pid2;

	private_socket("auto");
	CHECK_EQ(sv_chan_probe(), -ENODEV); /* nothing runs yet */
	CHECK_EQ(sv_test_daemon_pid(), -1);
	ctx = sv_test_open_dev();
	pid = sv_test_daemon_pid();
	CHECK(pid > 0);
	CHECK(pid != getpid());
	/* Detached: not our child (our waitpid(-1) never reaps it). */
	CHECK_EQ(waitpid(pid, NULL, WNOHANG), -1);
	CHECK_EQ(errno, ECHILD);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.ufiles, 1);
	CHECK_EQ(st.contexts, 1);
	/* A second open uses the same daemon. */
	struct ibv_context *ctx2 = sv_test_open_dev();
	pid2 = sv_test_daemon_pid();
	CHECK_EQ(pid2, pid);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.ufiles, 2);
	CHECK_EQ(ibv_close_device(ctx2), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	shutdown_daemon();
	CHECK(!sv_pid_alive(pid));
}

SV_TEST(autostart_race_one_daemon)
{
	/* Processes that start the device at the same moment share one
	 * daemon. */
	enum { N = 4 };
	int go[2], res[2];
	pid_t kids[N], pids[N];

	private_socket("race");
	CHECK_EQ(pipe(go), 0);
	CHECK_EQ(pipe(res), 0);
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		CHECK(kids[i] >= 0);
		if (kids[i] == 0) {
			char c;
			int n = -1;
			struct ibv_device **list;
			pid_t p;

			close(go[1]);
			if (read(go[0], &c, 1) < 0)
				_exit(2);
			list = ibv_get_device_list(&n);
			if (!list || n != 1)
				_exit(3);
			p = sv_test_daemon_pid();
			if (write(res[1], &p, sizeof(p)) != sizeof(p))
				_exit(4);
			_exit(0);
		}
	}
	close(go[0]);
	close(go[1]); /* everybody goes */
	for (int i = 0; i < N; i++) {
		int st = sv_test_wait_child(kids[i]);

		CHECK(WIFEXITED(st));
		CHECK_EQ(WEXITSTATUS(st), 0);
		CHECK_EQ(read(res[0], &pids[i], sizeof(pids[i])), sizeof(pids[i]));
	}
	for (int i = 0; i < N; i++) {
		CHECK(pids[i] > 0);
		CHECK_EQ(pids[i], pids[0]);
	}
	CHECK_EQ(sv_test_daemon_pid(), pids[0]);
	shutdown_daemon();
}

SV_TEST_T(idle_exit_only_without_ufiles, 60)
{
	struct ibv_context *ctx;
	struct sv_status_rep st;
	pid_t pid, pid2;

	private_socket("idle");
	setenv("SOFTVERBS_IDLE_TIMEOUT", "0.3", 1);
	ctx = sv_test_open_dev();
	pid = sv_test_daemon_pid();
	CHECK(pid > 0);
	/* Five idle periods with a context open: it stays. */
	sv_test_sleep_ms(1500);
	CHECK(sv_pid_alive(pid));
	CHECK_EQ(sv_test_daemon_pid(), pid);
	CHECK_EQ(ibv_query_port(ctx, 1, &(struct ibv_port_attr){ 0 }), 0);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.ufiles, 1);
	/* Closed: it goes away by itself (and our channel does not keep it). */
	CHECK_EQ(ibv_close_device(ctx), 0);
	CHECK(wait_gone(pid, 20000));
	/* The next use starts a new one. */
	setenv("SOFTVERBS_IDLE_TIMEOUT", "30", 1);
	ctx = sv_test_open_dev();
	pid2 = sv_test_daemon_pid();
	CHECK(pid2 > 0 && pid2 != pid);
	CHECK_EQ(ibv_query_port(ctx, 1, &(struct ibv_port_attr){ 0 }), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	shutdown_daemon();
}

SV_TEST(idle_timeout_zero_never_exits)
{
	pid_t pid;

	private_socket("idle0");
	setenv("SOFTVERBS_IDLE_TIMEOUT", "0", 1);
	CHECK(ibv_get_device_list(NULL));
	pid = sv_test_daemon_pid();
	CHECK(pid > 0);
	sv_test_sleep_ms(1000);
	CHECK_EQ(sv_test_daemon_pid(), pid);
	shutdown_daemon();
}

static void signal_stops_cleanly(int sig)
{
	struct ibv_async_event ev;
	struct ibv_port_attr pa;
	struct ibv_context *ctx;
	pid_t pid, pid2;
	int status;

	pid = start_daemon_child(-1, NULL, "0");
	wait_listening(10000);
	ctx = sv_test_open_dev();
	CHECK_EQ(sv_test_daemon_pid(), pid);
	CHECK_EQ(kill(pid, sig), 0);
	status = sv_test_wait_child(pid);
	CHECK(WIFEXITED(status)); /* handled, not killed by the signal */
	CHECK_EQ(WEXITSTATUS(status), 0);
	/* The context learns the device is gone; nothing hangs. */
	CHECK_EQ(ibv_get_async_event(ctx, &ev), 0);
	CHECK_EQ(ev.event_type, IBV_EVENT_DEVICE_FATAL);
	ibv_ack_async_event(&ev);
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), EIO);
	CHECK_EQ(ibv_close_device(ctx), 0);
	/* The next use starts a new daemon. */
	ctx = sv_test_open_dev();
	pid2 = sv_test_daemon_pid();
	CHECK(pid2 > 0 && pid2 != pid);
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
	CHECK_EQ(ibv_close_device(ctx), 0);
	shutdown_daemon();
}

SV_TEST(sigterm_stops_cleanly)
{
	private_socket("term");
	signal_stops_cleanly(SIGTERM);
}

SV_TEST(sigint_stops_cleanly)
{
	private_socket("int");
	signal_stops_cleanly(SIGINT);
}

SV_TEST(second_daemon_loses_quietly)
{
	enum { N = 5 };
	char errs[N][128];
	pid_t kids[N];
	int exited = 0, winner = -1;

	private_socket("two");
	for (int i = 0; i < N; i++) {
		snprintf(errs[i], sizeof(errs[i]), "/tmp/svtest.two.%d.%d.err",
			 (int)getpid(), i);
		kids[i] = start_daemon_child(-1, errs[i], "0");
	}
	/* All but one exit 0, silently; the winner serves. */
	for (int waited = 0; exited < N - 1; waited += 10) {
		for (int i = 0; i < N; i++) {
			int status;

			if (kids[i] <= 0 || waitpid(kids[i], &status, WNOHANG) != kids[i])
				continue;
			CHECK(WIFEXITED(status));
			CHECK_EQ(WEXITSTATUS(status), 0);
			kids[i] = 0;
			exited++;
		}
		CHECK(waited < 20000);
		sv_test_sleep_ms(10);
	}
	for (int i = 0; i < N; i++) {
		FILE *f = fopen(errs[i], "r");
		char line[256];

		CHECK(f);
		if (kids[i] == 0 && fgets(line, sizeof(line), f))
			sv_test_fail(__FILE__, __LINE__, "loser %d said: %s", i, line);
		fclose(f);
		unlink(errs[i]);
		if (kids[i] > 0)
			winner = i;
	}
	CHECK(winner >= 0);
	CHECK_EQ(sv_test_daemon_pid(), kids[winner]);
	struct ibv_context *ctx = sv_test_open_dev();
	CHECK_EQ(ibv_close_device(ctx), 0);
	CHECK_EQ(kill(kids[winner], SIGTERM), 0);
	int status = sv_test_wait_child(kids[winner]);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

SV_TEST(daemon_refuses_other_uid)
{
	pid_t pid, kid;
	int status;

	if (getuid() != 0) {
		printf("skip daemon_refuses_other_uid: needs root to setuid\n");
		return;
	}
	private_socket("uidd");
	CHECK(ibv_get_device_list(NULL));
	pid = sv_test_daemon_pid();
	CHECK(pid > 0);
	kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		struct sv_msg_hdr h = { .magic = SV_PROTO_MAGIC,
					.version = SV_PROTO_VERSION,
					.op = SV_OP_HELLO,
					.len = sizeof(h),
					.seq = 1 };
		char buf[SV_MSG_MAX];
		int fd;
		ssize_t n;

		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(10);
		/* The library refuses a daemon of another uid... */
		if (sv_chan_probe() != -EACCES)
			_exit(11);
		/* ...and the daemon hangs up on us even if we insist. */
		fd = sv_test_raw_connect();
		if (fd < 0)
			_exit(0); /* refused at connect: fine too */
		send(fd, &h, sizeof(h), MSG_NOSIGNAL);
		n = recv(fd, buf, sizeof(buf), 0);
		if (n > 0)
			_exit(12); /* it answered a stranger */
		_exit(0);
	}
	status = sv_test_wait_child(kid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	/* Still healthy for its own uid. */
	CHECK_EQ(sv_test_daemon_pid(), pid);
	struct ibv_context *ctx = sv_test_open_dev();
	CHECK_EQ(ibv_close_device(ctx), 0);
	shutdown_daemon();
}

/* Someone else's daemon squats our name: the library sends it nothing
 * and gets a daemon of ours on a socket of our own (src/common/sv_addr.h);
 * test_daemon_squat.c tries squatters of every other kind. */
SV_TEST(library_refuses_daemon_of_other_uid)
{
	char errfile[128], buf[4096], run[] = "/tmp/svtest-run.XXXXXX";
	struct ibv_device **list;
	const char *where;
	pid_t d;
	int n = -1, fd, saved, status;
	ssize_t len;

	if (getuid() != 0) {
		printf("skip library_refuses_daemon_of_other_uid: needs root\n");
		return;
	}
	if (!can_exec_as(65534)) {
		printf("skip library_refuses_daemon_of_other_uid: uid 65534 cannot run %s\n",
		       daemon_bin());
		return;
	}
	private_socket("uidl");
	CHECK(mkdtemp(run));
	setenv("XDG_RUNTIME_DIR", run, 1);
	d = start_daemon_child(65534, NULL, "0");
	wait_listening(10000);
	CHECK(sv_pid_alive(d));

	snprintf(errfile, sizeof(errfile), "/tmp/svtest.uidl.%d.err", (int)getpid());
	fd = open(errfile, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	saved = dup(2);
	dup2(fd, 2);
	list = ibv_get_device_list(&n);
	dup2(saved, 2);
	close(saved);
	/* Our own device, and on stderr who holds our name. */
	CHECK(list);
	CHECK_EQ(n, 1);
	ibv_free_device_list(list);
	len = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(errfile);
	CHECK(len > 0);
	buf[len] = 0;
	if (!strstr(buf, "uid 65534"))
		sv_test_fail(__FILE__, __LINE__, "no word of the squatter on stderr: '%s'", buf);
	CHECK_EQ(sv_chan_probe(), 0);
	where = sv_chan_where();
	if (strncmp(where, run, strlen(run)))
		sv_test_fail(__FILE__, __LINE__, "our daemon listens on %s, not in %s",
			     where, run);
	CHECK(sv_test_daemon_pid() != d);
	/* The squatter is untouched: we neither used nor replaced it. */
	CHECK(sv_pid_alive(d));
	shutdown_daemon();
	CHECK_EQ(kill(d, SIGTERM), 0);
	status = sv_test_wait_child(d);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	sv_test_sh("rm -rf %s", run);
}

SV_TEST_MAIN()

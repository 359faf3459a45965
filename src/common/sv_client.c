/* SPDX-License-Identifier: MIT */
#include "sv_client.h"
#include "sv_addr.h"
#include "sv_log.h"
#include "sv_sock.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static struct {
	pthread_mutex_t lock; /* serialises whole request/reply exchanges */
	int fd;		      /* -1: not connected */
	uint32_t seq;
	uint64_t instance;    /* daemon instance of fd */
	int atfork_done;
} chan = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
	pthread_mutex_lock(&chan.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&chan.lock);
}

/* The child must never talk on the parent's connection: replies would go
 * to whichever process reads first. */
static void atfork_child(void)
{
	if (chan.fd >= 0)
		close(chan.fd);
	chan.fd = -1;
	pthread_mutex_init(&chan.lock, NULL);
}

static void register_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static char daemon_path_buf[PATH_MAX + 32];

/*
 * The file of the object this code is linked into, resolved: the library
 * (PREFIX/lib/softverbs/libibverbs.so.1) or the softverbs command.  For the
 * main program dladdr() names argv[0] as typed ("softverbs" found through
 * PATH), which is relative to nothing: the kernel's /proc/self/exe is the
 * binary that really runs, wherever it was called from.
 */
static int own_object_path(char *out)
{
	struct link_map *lm = NULL;
	Dl_info info;
	ssize_t n;

	if (!dladdr1((void *)own_object_path, &info, (void **)&lm,
		     RTLD_DL_LINKMAP) || !info.dli_fname)
		return -1;
	if (lm && lm->l_name && lm->l_name[0])
		return realpath(info.dli_fname, out) ? 0 : -1;
	/* The main program's link_map has an empty name. */
	n = readlink("/proc/self/exe", out, PATH_MAX - 1);
	if (n <= 0)
		return -1;
	out[n] = 0;
	return 0;
}

const char *sv_daemon_path(void)
{
	const char *env = getenv("SOFTVERBSD");
	char dir[PATH_MAX];
	char *slash;

	if (env && *env)
		return env;
	/* Next to our own object: build/lib/libibverbs.so.1 and
	 * build/bin/softverbs both find build/bin/softverbsd. */
	if (own_object_path(dir) == 0) {
		slash = strrchr(dir, '/');
		if (slash) {
			*slash = 0;
			snprintf(daemon_path_buf, sizeof(daemon_path_buf),
				 "%s/../bin/softverbsd", dir);
			if (access(daemon_path_buf, X_OK) == 0)
				return daemon_path_buf;
			snprintf(daemon_path_buf, sizeof(daemon_path_buf),
				 "%s/softverbsd", dir);
			if (access(daemon_path_buf, X_OK) == 0)
				return daemon_path_buf;
#ifdef SV_PRIVLIB_TO_BINDIR
			/* Installed: PREFIX/lib/softverbs/libibverbs.so.1
			 * finds PREFIX/bin/softverbsd wherever PREFIX was
			 * chosen at install time (cmake --install --prefix). */
			snprintf(daemon_path_buf, sizeof(daemon_path_buf),
				 "%s/" SV_PRIVLIB_TO_BINDIR "/softverbsd", dir);
			if (access(daemon_path_buf, X_OK) == 0)
				return daemon_path_buf;
#endif
		}
	}
	snprintf(daemon_path_buf, sizeof(daemon_path_buf), "%s/softverbsd",
		 SV_INSTALL_BINDIR);
	return daemon_path_buf;
}

/*
 * A holder of another uid on our abstract name (sv_addr.h), met by this
 * process: said once as a warning when our daemon is found elsewhere, and
 * in the error when it cannot be had at all.
 */
static struct {
	int met, warned;
	unsigned uid;
	int pid;
} squat;

/* Where chan.fd is connected: "@NAME" or the fallback socket's path. */
static char chan_where[sizeof(((struct sv_fallback *)0)->path) + 1];

/* A daemon of ours on the fallback socket of one of the private
 * directories: 0 (connected, *out set), -EACCES when only one of another
 * uid answers there, or another negative errno. */
static int connect_fallback(int *out, char *where, size_t cap)
{
	struct sv_fallback fb;
	struct ucred cred;
	int err = -ENOENT, fd;

	for (int i = 0; i < SV_FALLBACK_DIRS; i++) {
		if (sv_fallback_open(&fb, i, 0, NULL, 0))
			continue;
		fd = sv_connect_addr(&fb.addr, fb.len, 0, &cred);
		if (fd >= 0 && cred.uid == getuid()) {
			snprintf(where, cap, "%s", fb.path);
			sv_fallback_close(&fb);
			*out = fd;
			return 0;
		}
		/* Only root can bind in our directory; still not ours. */
		if (fd >= 0) {
			sv_err("the daemon on %s runs as uid %u, not %u: refusing it",
			       fb.path, (unsigned)cred.uid, (unsigned)getuid());
			close(fd);
			err = -EACCES;
		} else if (err != -EACCES) {
			err = fd;
		}
		sv_fallback_close(&fb);
	}
	return err;
}

/* The longest we wait for room in the backlog of a listener on our
 * abstract name before we look no further: a daemon of ours accepts in
 * microseconds; a holder of another uid may never accept. */
#define SV_CONNECT_WAIT_MS 2000

/*
 * Connects to a daemon of ours: on the abstract name, else on the fallback
 * socket (sv_addr.h).  Nothing is ever sent before SO_PEERCRED says the
 * listener is of our uid.  Returns 0, -EACCES when only a listener of
 * another uid answers, or another negative errno (no daemon of ours).
 */
static int connect_once(int *out)
{
	struct sockaddr_un addr;
	socklen_t len = sv_socket_addr(&addr);
	struct ucred cred;
	int fd, err;

	fd = sv_connect_addr(&addr, len, 0, &cred);
	/* A full backlog: a busy daemon of ours, or a holder that never
	 * accepts while ours listens elsewhere.  Look there first. */
	if (fd == -EAGAIN) {
		if (connect_fallback(out, chan_where, sizeof(chan_where)) == 0)
			goto found_fallback;
		fd = sv_connect_addr(&addr, len, SV_CONNECT_WAIT_MS, &cred);
	}
	if (fd >= 0 && cred.uid == getuid()) {
		snprintf(chan_where, sizeof(chan_where), "@%s", addr.sun_path + 1);
		*out = fd;
		return 0;
	}
	if (fd >= 0) {
		/* Abstract names can be squatted: talk only to our own uid. */
		close(fd);
		squat.met = 1;
		squat.uid = cred.uid;
		squat.pid = cred.pid;
	}
	err = connect_fallback(out, chan_where, sizeof(chan_where));
	if (!err)
		goto found_fallback;
	return squat.met && fd >= 0 ? -EACCES : err;

found_fallback:
	if (squat.met && !squat.warned) {
		squat.warned = 1;
		sv_warn("the socket @%s is held by uid %u (pid %d), not by us: refusing it; our daemon listens on %s",
			addr.sun_path + 1, squat.uid, squat.pid, chan_where);
	}
	return 0;
}

static int spawn_daemon(void)
{
	const char *path = sv_daemon_path();
	char logpath[PATH_MAX], name[108];
	const char *tmp = getenv("TMPDIR");
	char *const argv[] = { "softverbsd", "--detach", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t set;
	pid_t pid;
	int status, err;

	if (access(path, X_OK) < 0) {
		sv_err("cannot start the device: daemon %s: %s (set SOFTVERBSD)",
		       path, strerror(errno));
		return -ENODEV;
	}
	snprintf(logpath, sizeof(logpath), "%s/softverbsd-%u.log",
		 tmp && *tmp ? tmp : "/tmp", (unsigned)getuid());

	/* posix_spawn, not fork: we hold chan.lock and fork() would run our
	 * own atfork handlers.  The daemon detaches itself (--detach: setsid,
	 * fork, parent exits once the socket listens), so it is nobody's child:
	 * neither reaped by the application's waitpid(-1) nor killed with its
	 * process group, and it holds none of the application's descriptors. */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, logpath,
					 O_WRONLY | O_CREAT | O_APPEND, 0600);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID |
					       POSIX_SPAWN_SETSIGMASK |
					       POSIX_SPAWN_SETSIGDEF);
	sigemptyset(&set);
	posix_spawnattr_setsigmask(&attr, &set);
	sigfillset(&set);
	posix_spawnattr_setsigdefault(&attr, &set);
	err = posix_spawn(&pid, path, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (err) {
		sv_err("cannot start the device: %s: %s", path, strerror(err));
		return -ENODEV;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	/* It exits 0 once it listens or when a daemon of ours does already;
	 * anything else is a daemon that could not start (its log says why,
	 * e.g. our name held by another uid and no private directory). */
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (squat.met)
			sv_err("the socket @%s is held by uid %u (pid %d) and the daemon %s could not listen elsewhere (see %s)",
			       sv_socket_name(name, sizeof(name)), squat.uid,
			       squat.pid, path, logpath);
		else
			sv_err("the daemon %s could not start (see %s)", path,
			       logpath);
		return -ENODEV;
	}
	return 0;
}

static int hello(int fd, uint64_t *instance);

/* Nanoseconds of CLOCK_MONOTONIC. */
static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Must hold chan.lock. */
static int chan_connect(int spawn)
{
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	char name[108];
	int fd = -1, err;

	pthread_once(&atfork_once, register_atfork);
	err = connect_once(&fd);
	/* -EACCES too: a holder of another uid on our name makes our
	 * daemon listen on a socket of our own (sv_addr.h). */
	if (err && spawn) {
		int64_t deadline;

		err = spawn_daemon();
		if (err)
			return err;
		/* Up to ~10 s: a loaded CI machine may be slow to exec.  By
		 * the clock, as one look may wait SV_CONNECT_WAIT_MS. */
		deadline = now_ns() + 10 * 1000000000LL;
		for (;;) {
			err = connect_once(&fd);
			if (!err || now_ns() >= deadline)
				break;
			nanosleep(&ts, NULL);
		}
		if (err == -EACCES)
			sv_err("the socket @%s is held by uid %u (pid %d), and no daemon of ours came up elsewhere (see %s/softverbsd-%u.log)",
			       sv_socket_name(name, sizeof(name)), squat.uid,
			       squat.pid,
			       getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
			       (unsigned)getuid());
		else if (err)
			sv_err("the daemon %s did not come up (see %s/softverbsd-%u.log)",
			       sv_daemon_path(),
			       getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
			       (unsigned)getuid());
	}
	/* Without spawn (probes, calls of a context): -EACCES says that only
	 * a listener of another uid answered; the caller tells the user. */
	if (err)
		return err == -EACCES ? err : -ENODEV;
	err = hello(fd, &chan.instance);
	if (err) {
		close(fd);
		return err;
	}
	chan.fd = fd;
	return 0;
}

/* Poll first, block later (docs/architecture.md "Progress"): the daemon
 * answers most requests within a few microseconds, while going to sleep in
 * recv() and being woken costs tens of them on a busy machine.  Spin briefly
 * before the blocking receive. */
#define SV_REPLY_SPIN_NS 30000

static void await_reply(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (poll(&pfd, 1, 0) != 0)
			return;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) <
		 SV_REPLY_SPIN_NS);
}

/* One exchange on fd.  Must hold chan.lock (or own fd alone). */
static int exchange(int fd, struct sv_call *c)
{
	union {
		struct sv_msg_hdr hdr;
		char buf[SV_MSG_MAX];
	} m;
	size_t len = sizeof(struct sv_msg_hdr) + c->req_len;
	int fds[SV_MAX_FDS];
	int nfds = 0, err;
	ssize_t n;

	c->rep_len = 0;
	c->nrfds = 0;
	if (len > SV_MSG_MAX)
		return -EINVAL;
	memset(&m.hdr, 0, sizeof(m.hdr));
	m.hdr.magic = SV_PROTO_MAGIC;
	m.hdr.version = SV_PROTO_VERSION;
	m.hdr.op = c->op;
	m.hdr.len = len;
	m.hdr.seq = ++chan.seq;
	m.hdr.ufile = c->ufile;
	if (c->req_len)
		memcpy(m.buf + sizeof(m.hdr), c->req, c->req_len);
	err = sv_send_msg(fd, m.buf, len, c->fds, c->nfds, 0);
	if (err)
		return -EPIPE;
	await_reply(fd);
	n = sv_recv_msg(fd, m.buf, sizeof(m.buf), fds, SV_MAX_FDS, &nfds);
	if (n <= 0)
		return -EPIPE;
	if ((size_t)n < sizeof(m.hdr) || m.hdr.magic != SV_PROTO_MAGIC ||
	    m.hdr.len != (size_t)n || m.hdr.seq != chan.seq) {
		sv_close_fds(fds, nfds);
		sv_err("malformed reply from the daemon (op %u)", c->op);
		return -EPIPE;
	}
	if (m.hdr.status) {
		sv_close_fds(fds, nfds);
		return m.hdr.status;
	}
	n -= sizeof(m.hdr);
	if ((size_t)n > c->rep_cap || nfds > c->max_rfds) {
		sv_close_fds(fds, nfds);
		return -EPROTO;
	}
	if (n)
		memcpy(c->rep, m.buf + sizeof(m.hdr), n);
	c->rep_len = n;
	for (int i = 0; i < nfds; i++)
		c->rfds[i] = fds[i];
	c->nrfds = nfds;
	return 0;
}

static int hello(int fd, uint64_t *instance)
{
	struct sv_hello_rep rep;
	struct sv_call c = { .op = SV_OP_HELLO,
			     .rep = &rep,
			     .rep_cap = sizeof(rep) };
	int err = exchange(fd, &c);

	if (err == -EPIPE)
		return -ENODEV;
	if (err) {
		sv_err("the daemon refused us: %s (version mismatch? restart it with 'softverbs daemon stop')",
		       strerror(-err));
		return err;
	}
	if (c.rep_len != sizeof(rep))
		return -EPROTO;
	*instance = rep.instance;
	return 0;
}

/* Must hold chan.lock. */
static void chan_drop(void)
{
	if (chan.fd >= 0)
		close(chan.fd);
	chan.fd = -1;
}

int sv_call(struct sv_call *c)
{
	int err, tries = 0;

	c->nrfds = 0;
	pthread_mutex_lock(&chan.lock);
again:
	if (chan.fd < 0) {
		err = chan_connect(c->instance == 0);
		if (err) {
			pthread_mutex_unlock(&chan.lock);
			return c->instance ? -EIO : err;
		}
	}
	if (c->instance && c->instance != chan.instance) {
		pthread_mutex_unlock(&chan.lock);
		return -EIO; /* the daemon that knew this context is gone */
	}
	err = exchange(chan.fd, c);
	if (err == -EPIPE) {
		/* The daemon went away.  Requests that belong to no context are
		 * safe to repeat once on a fresh daemon. */
		chan_drop();
		if (!c->instance && tries++ == 0)
			goto again;
		pthread_mutex_unlock(&chan.lock);
		return c->instance ? -EIO : -ENODEV;
	}
	if (err == SV_ERR_NOT_ATTACHED && c->attach_fd >= 0 && tries++ == 0) {
		struct sv_ctx_rep rep;
		struct sv_call a = { .op = SV_OP_ATTACH,
				     .ufile = c->ufile,
				     .fds = &c->attach_fd,
				     .nfds = 1,
				     .rep = &rep,
				     .rep_cap = sizeof(rep) };

		err = exchange(chan.fd, &a);
		if (err == -EPIPE) {
			chan_drop();
			err = -EIO;
		} else if (!err) {
			goto again;
		}
	}
	if (err == SV_ERR_NOT_ATTACHED)
		err = -EIO;
	pthread_mutex_unlock(&chan.lock);
	return err;
}

int sv_call_simple(uint16_t op, uint32_t ufile, uint64_t instance,
		   int attach_fd, const void *req, size_t req_len, void *rep,
		   size_t rep_cap)
{
	struct sv_call c = { .op = op,
			     .ufile = ufile,
			     .instance = instance,
			     .attach_fd = attach_fd,
			     .req = req,
			     .req_len = req_len,
			     .rep = rep,
			     .rep_cap = rep_cap };
	int err = sv_call(&c);

	if (!err && c.rep_len != rep_cap)
		return -EPROTO;
	return err;
}

uint64_t sv_chan_instance(int *err)
{
	uint64_t inst = 0;

	pthread_mutex_lock(&chan.lock);
	*err = chan.fd < 0 ? chan_connect(1) : 0;
	if (!*err)
		inst = chan.instance;
	pthread_mutex_unlock(&chan.lock);
	return inst;
}

int sv_chan_probe(void)
{
	int err = 0;

	pthread_mutex_lock(&chan.lock);
	/* The daemon never speaks unasked: anything to read on an idle
	 * channel is its EOF, i.e. it died since our last call. */
	if (chan.fd >= 0) {
		struct pollfd pfd = { .fd = chan.fd, .events = POLLIN };

		if (poll(&pfd, 1, 0) != 0)
			chan_drop();
	}
	if (chan.fd < 0)
		err = chan_connect(0);
	pthread_mutex_unlock(&chan.lock);
	return err;
}

const char *sv_chan_where(void)
{
	static char copy[sizeof(chan_where)];

	pthread_mutex_lock(&chan.lock);
	snprintf(copy, sizeof(copy), "%s", chan.fd >= 0 ? chan_where : "");
	pthread_mutex_unlock(&chan.lock);
	return copy;
}

void sv_chan_reset(void)
{
	pthread_mutex_lock(&chan.lock);
	chan_drop();
	pthread_mutex_unlock(&chan.lock);
}

int sv_daemon_ensure(void)
{
	int err;

	sv_chan_instance(&err);
	return err;
}

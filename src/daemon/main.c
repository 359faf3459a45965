/* SPDX-License-Identifier: MIT */
/*
 * softverbsd: the device.  Plays the part of the kernel (ib_uverbs: ufiles,
 * handles, objects, lifetimes) for every process of one user in one network
 * namespace.  One thread, one epoll loop.
 */
#include "svd_int.h"
#include "svd_engine.h"
#include "svd_cm.h"
#include "svd_gw.h"
#include "svd_port.h"
#include "svd_capture.h"
#include "sv_addr.h"
#include "sv_log.h"
#include "sv_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct svd_state svd;

uint64_t svd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int svd_watch_add(struct svd_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	return epoll_ctl(svd.epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0 ? -errno : 0;
}

int svd_watch_mod(struct svd_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	return epoll_ctl(svd.epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0 ? -errno : 0;
}

void svd_watch_del(struct svd_watch *w)
{
	epoll_ctl(svd.epfd, EPOLL_CTL_DEL, w->fd, NULL);
}

/* Objects closed while an epoll batch may still point at them are freed
 * after the batch (redis' freeClientAsync). */
static struct deferred {
	void *p;
	struct deferred *next;
} *deferred;

void svd_defer_free(void *p)
{
	struct deferred *d = malloc(sizeof(*d));

	if (!d) {
		/* Leaking beats a use-after-free. */
		return;
	}
	d->p = p;
	d->next = deferred;
	deferred = d;
}

void svd_reap_deferred(void)
{
	while (deferred) {
		struct deferred *d = deferred;

		deferred = d->next;
		free(d->p);
		free(d);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softverbsd [--name NAME] [--idle SECONDS] [--socket NAME] [--detach]\n"
		"\n"
		"The softverbs device.  Normally started by libibverbs.so.1 on first use;\n"
		"'softverbs daemon start|stop|status' manages it by hand.\n"
		"\n"
		"  --name NAME      device name (default $SOFTVERBS_DEVICE_NAME or %s)\n"
		"  --idle SECONDS   exit after this long with no open device (default\n"
		"                   $SOFTVERBS_IDLE_TIMEOUT or %d; 0 = never)\n"
		"  --socket NAME    abstract socket name (default $SOFTVERBS_SOCKET or\n"
		"                   softverbs.UID); when a process of another uid holds\n"
		"                   it, a socket in the user's private directory instead\n"
		"  --detach         go to the background once the socket listens\n",
		SV_DEFAULT_DEVICE_NAME, SV_DEFAULT_IDLE_MS / 1000);
}

static int parse_idle(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || v < 0 || v > 86400.0 * 365) {
		fprintf(stderr, "softverbsd: bad idle timeout '%s'\n", s);
		exit(2);
	}
	return (int)(v * 1000);
}

static int bind_listen(const struct sockaddr_un *addr, socklen_t len)
{
	int fd, err;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (const struct sockaddr *)addr, len) < 0 ||
	    listen(fd, 128) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/*
 * Where we listen (sv_addr.h): the abstract name, or, when a socket of
 * another uid holds it, a socket file in the user's private directory,
 * whose descriptor and lock we keep until we exit.
 */
static struct {
	struct sv_fallback fb; /* fb.dirfd >= 0: listening there */
	int lockfd;
} where = { .fb = { .dirfd = -1 }, .lockfd = -1 };

/* How long a socket of ours may hold the name without listening before we
 * take it for something else than a daemon of ours between its bind() and
 * its listen(), which takes microseconds (more on a loaded machine). */
#define SVD_HOLDER_WAIT_MS 2000

/*
 * The abstract name is taken.  1: by a daemon of ours, which won the race
 * for it (we exit quietly); 0: by something else, described in *h; -EAGAIN:
 * the name is free again.  Sends nothing to the holder.
 */
static int name_holder(struct sv_holder *h)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	for (int waited = 0;; waited += 10) {
		sv_abstract_holder(h);
		if (h->state == SV_HOLDER_FREE)
			return -EAGAIN;
		if (h->uid >= 0 && h->uid != (long)getuid())
			return 0;
		if (h->uid == (long)getuid() &&
		    (h->state == SV_HOLDER_LISTENING || h->state == SV_HOLDER_FULL))
			return 1;
		/* Ours and not listening yet, or nobody can say whose. */
		if (waited >= SVD_HOLDER_WAIT_MS)
			return 0;
		nanosleep(&ts, NULL);
	}
}

/* Listens in the first private directory that will do.  *lost set: a
 * daemon of ours listens there already (or on the abstract name, free
 * again). */
static int listen_fallback(const struct sockaddr_un *abs, socklen_t alen,
			   const struct sv_holder *h, int *lost)
{
	char why[SV_FALLBACK_DIRS][PATH_MAX + 128], holder[96], name[108];
	struct sv_fallback *fb = &where.fb;
	struct sv_holder again;
	int fd, i, err = -ENOENT;

	sv_holder_str(h, holder, sizeof(holder));
	sv_socket_name(name, sizeof(name));
	for (i = 0; i < SV_FALLBACK_DIRS; i++) {
		err = sv_fallback_open(fb, i, 1, why[i], sizeof(why[i]));
		if (!err)
			break;
	}
	if (err) {
		fprintf(stderr,
			"softverbsd: the socket @%s is held by %s, and there is no private directory for a socket of our own: %s; %s; %s\n",
			name, holder, why[0], why[1], why[2]);
		return err;
	}
	where.lockfd = openat(fb->dirfd, fb->lock,
			      O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (where.lockfd < 0) {
		err = -errno;
		fprintf(stderr, "softverbsd: %s/%s: %s\n", fb->dir, fb->lock,
			strerror(errno));
		goto err_close;
	}
	if (flock(where.lockfd, LOCK_EX | LOCK_NB) < 0) {
		err = -errno;
		if (errno == EWOULDBLOCK) {
			*lost = 1;
			goto err_close;
		}
		fprintf(stderr, "softverbsd: flock %s/%s: %s\n", fb->dir,
			fb->lock, strerror(errno));
		goto err_close;
	}
	/* With the lock, look once more: the holder may have gone, and a
	 * daemon of ours that took the name since would not look here.  One
	 * window stays: the holder leaves between this look and our listen()
	 * below, and a program that found neither socket in that moment
	 * starts a daemon that takes the name.  Two daemons then serve the
	 * same name until one idles out; new programs go to the abstract
	 * one.  Closing it would mean every daemon taking this lock, on a
	 * home directory too (NFS), for a holder that leaves within
	 * microseconds of our look. */
	fd = bind_listen(abs, alen);
	if (fd >= 0) {
		close(where.lockfd);
		where.lockfd = -1;
		sv_fallback_close(fb);
		return fd;
	}
	sv_abstract_holder(&again);
	if (again.uid == (long)getuid() && (again.state == SV_HOLDER_LISTENING ||
					    again.state == SV_HOLDER_FULL)) {
		*lost = 1;
		err = -EADDRINUSE;
		goto err_close;
	}
	/* Under the lock no daemon of ours listens on this file: whatever is
	 * there was left by one that was killed. */
	unlinkat(fb->dirfd, fb->file, 0);
	fd = bind_listen(&fb->addr, fb->len);
	if (fd < 0) {
		err = fd;
		fprintf(stderr, "softverbsd: cannot listen on %s: %s\n",
			fb->path, strerror(-err));
		goto err_close;
	}
	sv_warn("the socket @%s is held by %s: listening on %s instead", name,
		holder, fb->path);
	return fd;

err_close:
	if (where.lockfd >= 0)
		close(where.lockfd);
	where.lockfd = -1;
	sv_fallback_close(fb);
	return err;
}

/* The listening socket, or a negative errno (said on stderr); *lost set
 * when a daemon of ours already listens: then we are not needed. */
static int listen_socket(int *lost)
{
	struct sockaddr_un addr;
	socklen_t len = sv_socket_addr(&addr);
	struct sv_holder h;
	int fd, r;

	*lost = 0;
	/* Bounded: a name taken and freed again and again. */
	for (int tries = 0; tries < 100; tries++) {
		fd = bind_listen(&addr, len);
		if (fd != -EADDRINUSE)
			break;
		r = name_holder(&h);
		if (r == 1) {
			*lost = 1;
			return fd;
		}
		if (r == 0)
			return listen_fallback(&addr, len, &h, lost);
	}
	if (fd < 0)
		fprintf(stderr, "softverbsd: cannot listen on @%s: %s\n",
			addr.sun_path + 1, strerror(-fd));
	return fd;
}

static int next_timeout(void)
{
	uint64_t now, deadline;

	if (!svd.idle_ms || svd.nufiles || svd_cm_busy() || svd_capture_busy())
		return -1;
	now = svd_now_ms();
	deadline = svd.idle_since_ms + svd.idle_ms;
	return now >= deadline ? 0 : (int)(deadline - now);
}

/*
 * Poll first, block later (docs/architecture.md "Progress"): right after
 * serving a request the next one often follows within microseconds (reg then
 * dereg, a burst of creates), and an epoll_wait that sleeps costs a wake-up of
 * tens of them.  So after activity, look again without sleeping for a
 * short while; an idle daemon still sleeps and uses no CPU.
 */
#define SVD_SPIN_NS 30000

static int wait_events(struct epoll_event *evs, int max)
{
	static uint64_t last_busy_ns;
	struct timespec ts;
	uint64_t now;
	int n;

	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
		if (now - last_busy_ns >= SVD_SPIN_NS)
			break;
		n = epoll_wait(svd.epfd, evs, max, 0);
		if (n != 0) {
			last_busy_ns = now;
			return n;
		}
	}
	n = epoll_wait(svd.epfd, evs, max, next_timeout());
	if (n > 0) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		last_busy_ns = (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	}
	return n;
}

int main(int argc, char **argv)
{
	static struct svd_watch lw = { .kind = SVD_W_LISTEN };
	static struct svd_watch sw = { .kind = SVD_W_SIGNAL };
	const char *env;
	sigset_t mask;
	int i, detach = 0, lost;

	sv_log_init("softverbsd");
	snprintf(svd.name, sizeof(svd.name), "%s", SV_DEFAULT_DEVICE_NAME);
	env = getenv("SOFTVERBS_DEVICE_NAME");
	if (env && *env)
		snprintf(svd.name, sizeof(svd.name), "%s", env);
	svd.idle_ms = SV_DEFAULT_IDLE_MS;
	env = getenv("SOFTVERBS_IDLE_TIMEOUT");
	if (env && *env)
		svd.idle_ms = parse_idle(env);

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--name") && i + 1 < argc) {
			snprintf(svd.name, sizeof(svd.name), "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--idle") && i + 1 < argc) {
			svd.idle_ms = parse_idle(argv[++i]);
		} else if (!strcmp(argv[i], "--detach")) {
			detach = 1;
		} else if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
			setenv("SOFTVERBS_SOCKET", argv[++i], 1);
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!svd.name[0] || strlen(svd.name) >= IBV_SYSFS_NAME_MAX) {
		fprintf(stderr, "softverbsd: device name must be 1..%d characters\n",
			IBV_SYSFS_NAME_MAX - 1);
		return 2;
	}

	/* Every ufile, context, DM and dma-buf MR holds a descriptor here
	 * (sv_param.h): take all the process may have, as servers do. */
	{
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			rlim_t want = rl.rlim_max > (1u << 20) ? (1u << 20) :
								 rl.rlim_max;
			struct rlimit big = { 1u << 20, 1u << 20 };

			/* Every CQ, QP and SRQ holds its queue region's
			 * descriptor here: where allowed (root), beyond the
			 * hard limit, up to the kernel's nr_open default. */
			if (rl.rlim_max < big.rlim_max &&
			    setrlimit(RLIMIT_NOFILE, &big) == 0) {
				rl = big;
			} else if (want > rl.rlim_cur) {
				rl.rlim_cur = want;
				setrlimit(RLIMIT_NOFILE, &rl);
			}
		}
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);

	lw.fd = listen_socket(&lost);
	if (lw.fd < 0) {
		/* Another daemon won the race for the name: that is success. */
		return lost ? 0 : 1;
	}
	if (detach) {
		/* The socket listens: the starter may connect as soon as we
		 * (the parent) exit; the child carries on, nobody's child. */
		pid_t pid = fork();

		if (pid < 0) {
			fprintf(stderr, "softverbsd: fork: %s\n", strerror(errno));
			return 1;
		}
		if (pid > 0)
			_exit(0);
		setsid();
	}
	if (getrandom(&svd.instance, sizeof(svd.instance), 0) !=
	    sizeof(svd.instance))
		svd.instance = ((uint64_t)getpid() << 32) ^ svd_now_ms();
	svd.instance |= 1; /* never 0: 0 means "no context" */
	svd.start_ms = svd_now_ms();
	svd.idle_since_ms = svd.start_ms;
	svd_device_init();
	svd_limits_init(getenv("SOFTVERBS_LIMITS"));
	if (svd_keytab_init())
		sv_warn("no key table: the data path is unavailable");

	svd_gw_init();
	svd_conn_reserve_fd();
	svd.epfd = epoll_create1(EPOLL_CLOEXEC);
	sw.fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (svd.epfd < 0 || sw.fd < 0 || svd_watch_add(&lw, EPOLLIN) ||
	    svd_watch_add(&sw, EPOLLIN) || svd_cm_init() || svd_port_init()) {
		fprintf(stderr, "softverbsd: epoll setup: %s\n", strerror(errno));
		return 1;
	}
	sv_info("device %s up, pid %d, idle timeout %d ms", svd.name,
		(int)getpid(), svd.idle_ms);

	while (!svd.stopping) {
		struct epoll_event evs[64];
		int n = wait_events(evs, 64);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			sv_err("epoll_wait: %s", strerror(errno));
			break;
		}
		if (n == 0 && next_timeout() == 0) {
			sv_info("idle for %d ms with no open device: exiting",
				svd.idle_ms);
			break;
		}
		for (i = 0; i < n && !svd.stopping; i++) {
			struct svd_watch *w = evs[i].data.ptr;

			/* Closed earlier in this batch: memory is still ours
			 * (deferred free) but the fd is gone. */
			if (w->fd < 0)
				continue;
			switch (w->kind) {
			case SVD_W_LISTEN:
				svd_conn_accept(w->fd);
				break;
			case SVD_W_CONN:
				svd_conn_readable((struct svd_conn *)w);
				break;
			case SVD_W_UFILE:
				svd_ufile_readable((struct svd_ufile *)w);
				break;
			case SVD_W_ENGINE:
				svd_engine_readable((struct svd_engine *)w);
				break;
			case SVD_W_CM:
				svd_cm_readable(w, evs[i].events);
				break;
			case SVD_W_PORT:
				svd_port_readable();
				break;
			case SVD_W_CAPTURE:
				svd_capture_event(w, evs[i].events);
				break;
			case SVD_W_SIGNAL:
				sv_info("signal: exiting");
				svd.stopping = 1;
				break;
			}
		}
		svd_capture_flush();
		svd_reap_deferred();
	}

	/* Orderly teardown: clients see EOF on their channels and async fds. */
	close(lw.fd);
	if (where.fb.dirfd >= 0) {
		/* Still under our lock: nobody else's file. */
		unlinkat(where.fb.dirfd, where.fb.file, 0);
		sv_fallback_close(&where.fb);
		close(where.lockfd);
	}
	svd_cm_close_all();
	svd_capture_close_all();
	svd_engines_close();
	svd_gw_close();
	while (svd.conns)
		svd_conn_close(svd.conns);
	for (i = 0; i < SV_MAX_UFILES; i++)
		if (svd.ufiles[i])
			svd_ufile_destroy(svd.ufiles[i]);
	svd_reap_deferred();
	svd_port_close();
	close(sw.fd);
	close(svd.epfd);
	return 0;
}

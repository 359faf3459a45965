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
#include "sv_log.h"
#include "sv_sock.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
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
		"                   softverbs.UID)\n"
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

static int listen_socket(void)
{
	struct sockaddr_un addr;
	socklen_t len = sv_socket_addr(&addr);
	int fd;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&addr, len) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (listen(fd, 128) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
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
 * Poll first, block later (DESIGN.md "Progress"): right after serving a
 * request the next one often follows within microseconds (reg then dereg,
 * a burst of creates), and an epoll_wait that sleeps costs a wake-up of
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
	int i, detach = 0;

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

	lw.fd = listen_socket();
	if (lw.fd < 0) {
		/* Another daemon won the race for the name: that is success. */
		if (lw.fd == -EADDRINUSE)
			return 0;
		fprintf(stderr, "softverbsd: cannot listen: %s\n", strerror(-lw.fd));
		return 1;
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

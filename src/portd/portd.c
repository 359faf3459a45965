/* SPDX-License-Identifier: MIT */
/*
 * softverbs-portd: the owner of a network namespace's RoCE v2 port
 * (sv_portd.h, docs/wire.md "Who owns port 4791").
 *
 *   softverbs-portd [--port N]
 *
 * Runs as root (the Debian package starts it at boot with systemd, in the
 * host's namespace; in another namespace start it there).  It binds the
 * port with SO_REUSEPORT and attaches the steering program (steer.c), then
 * serves daemons on the abstract socket SV_PORTD_NAME: each daemon that
 * says HELLO gets a QPN block and a socket of the group that receives that
 * block's datagrams, for as long as it keeps the connection.  Datagrams
 * for QP1 (the CM) and for blocks nobody holds reach this process's own
 * socket: a CM MAD is passed to the daemon it belongs to, anything else is
 * dropped.  One thread, one epoll loop; a daemon that misbehaves is hung
 * up on, and a full daemon connection loses the MAD (CM retries), never
 * blocks the loop.
 */
#include "portd_int.h"
#include "sv_hdr.h"
#include "sv_roce.h"
#include "sv_sock.h"
#include "sv_wire.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 255     /* every block but 0 */
#define BLOCKS_PER_UID 8    /* one user cannot take every block */
#define LISTENS_PER_CLIENT 4096
#define GW_RCVBUF (32 << 20)

/* A CM MAD's fields the steering reads (IBTA 13.4 MAD header, 12.6 CM). */
#define MAD_OFF (40 + 12 + 8) /* the record's GRH, BTH, DETH */
#define MAD_CLASS_CM 0x07
#define CM_REQ 0x0010
#define CM_SIDR_REQ 0x0017
#define CM_SIDR_REP 0x0018

struct client {
	int fd;
	uid_t uid;
	pid_t pid;
	uint32_t block;
	int sock; /* its member of the group (ours, until it hangs up) */
	uint64_t *sids;
	uint32_t nsids;
};

static struct {
	uint16_t port;
	int sock0, listen_fd, epfd;
	struct portd_steer steer;
	struct client *block[PORTD_BLOCKS]; /* [0] unused: ours */
	struct sv_wire_rxb rxb;
	uint64_t rx, qp1, qp1_lost, dropped;
} pd;

static int bind_member(void)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6,
				  .sin6_port = htons(pd.port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1, off = 0, rb = GW_RCVBUF;

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rb, sizeof(rb)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb));
	return fd;
}

static void send_msg(struct client *c, const struct sv_portd_msg *m, int fd)
{
	int err = sv_send_msg(c->fd, m, sizeof(*m), &fd, fd >= 0, 1);

	if (err)
		sv_dbg("portd: daemon %d: %s", (int)c->pid, strerror(-err));
}

static void client_gone(struct client *c)
{
	if (c->block) {
		portd_steer_clear(&pd.steer, c->block);
		pd.block[c->block] = NULL;
		sv_info("portd: block %u of uid %u (pid %d) free", c->block,
			(unsigned)c->uid, (int)c->pid);
	}
	epoll_ctl(pd.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->sock >= 0)
		close(c->sock);
	free(c->sids);
	free(c);
}

static uint32_t uid_blocks(uid_t uid)
{
	uint32_t n = 0;

	for (uint32_t b = 1; b < PORTD_BLOCKS; b++)
		n += pd.block[b] && pd.block[b]->uid == uid;
	return n;
}

/* Whether fd is a UDP socket on our port: a member of our reuseport
 * group (only root's sockets can be), one a daemon got from us before
 * our restart. */
static int our_member(int fd)
{
	struct sockaddr_in6 a;
	socklen_t al = sizeof(a);
	int type = 0, rp = 0;
	socklen_t tl = sizeof(type), rl = sizeof(rp);

	return getsockname(fd, (struct sockaddr *)&a, &al) == 0 &&
	       a.sin6_family == AF_INET6 && ntohs(a.sin6_port) == pd.port &&
	       getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 &&
	       type == SOCK_DGRAM &&
	       getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &rp, &rl) == 0 && rp;
}

/*
 * Steers block b to a daemon's socket again after our restart.  A socket
 * sits in one REUSEPORT_SOCKARRAY at a time, and the map of the service
 * before us holds it until the kernel frees that service's program, which
 * ours replaced when we started (EBUSY meanwhile): try for a while.
 */
static int steer_back(uint32_t b, int fd)
{
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	int err = -EBUSY;

	for (int i = 0; i < 100 && err == -EBUSY; i++) {
		err = portd_steer_set(&pd.steer, b, fd);
		if (err == -EBUSY)
			nanosleep(&ts, NULL);
	}
	return err;
}

static int hello(struct client *c, const struct sv_portd_msg *m, int theirs)
{
	struct sv_portd_msg r = { .op = SV_PORTD_HELLO,
				  .version = SV_PORTD_VERSION };
	uint32_t b = m->block;

	if (c->block || m->version != SV_PORTD_VERSION)
		return -EPROTO;
	if (uid_blocks(c->uid) >= BLOCKS_PER_UID) {
		r.err = -EUSERS;
		goto out;
	}
	/* The block it had before our restart, if nobody took it. */
	if (!b || b >= PORTD_BLOCKS || pd.block[b])
		for (b = 1; b < PORTD_BLOCKS && pd.block[b]; b++)
			;
	if (b >= PORTD_BLOCKS) {
		r.err = -ENOSPC;
		goto out;
	}
	/* A daemon back after our restart brings the socket it has (its
	 * engines hold copies): its block steers there again. */
	if (theirs >= 0 && b == m->block && our_member(theirs) &&
	    !steer_back(b, theirs)) {
		c->block = b;
		pd.block[b] = c;
		r.block = b;
		sv_info("portd: block %u back to uid %u (pid %d)", b,
			(unsigned)c->uid, (int)c->pid);
		send_msg(c, &r, -1);
		return 0;
	}
	c->sock = bind_member();
	if (c->sock < 0) {
		r.err = c->sock;
		goto out;
	}
	r.err = portd_steer_set(&pd.steer, b, c->sock);
	if (r.err) {
		close(c->sock);
		c->sock = -1;
		goto out;
	}
	c->block = b;
	pd.block[b] = c;
	r.block = b;
	sv_info("portd: block %u to uid %u (pid %d)", b, (unsigned)c->uid,
		(int)c->pid);
	send_msg(c, &r, c->sock);
	/* The daemon has its dup: ours would keep the socket (and its
	 * queue) alive after the daemon is gone. */
	close(c->sock);
	c->sock = -1;
	return 0;
out:
	send_msg(c, &r, -1);
	return 0;
}

static struct client *sid_owner(uint64_t sid, uint32_t *at)
{
	for (uint32_t b = 1; b < PORTD_BLOCKS; b++) {
		struct client *c = pd.block[b];

		for (uint32_t i = 0; c && i < c->nsids; i++)
			if (c->sids[i] == sid) {
				if (at)
					*at = i;
				return c;
			}
	}
	return NULL;
}

static int listen_op(struct client *c, const struct sv_portd_msg *m)
{
	struct sv_portd_msg r = { .op = SV_PORTD_LISTEN };
	struct client *o = sid_owner(m->arg, NULL);
	uint32_t at;

	if (!c->block)
		return -EPROTO;
	if (m->op == SV_PORTD_UNLISTEN) {
		if (sid_owner(m->arg, &at) == c)
			c->sids[at] = c->sids[--c->nsids];
		return 0;
	}
	if (o && o != c) {
		r.err = -EADDRINUSE;
	} else if (!o) {
		uint64_t *n;

		if (c->nsids >= LISTENS_PER_CLIENT ||
		    !(n = realloc(c->sids, (c->nsids + 1) * sizeof(*n)))) {
			r.err = -ENOSPC;
		} else {
			c->sids = n;
			c->sids[c->nsids++] = m->arg;
		}
	}
	send_msg(c, &r, -1);
	return 0;
}

static void client_readable(struct client *c)
{
	struct sv_portd_msg m;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	int err, fd = -1;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm;
	     cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (n != (ssize_t)sizeof(m) || (mh.msg_flags & MSG_CTRUNC)) {
		if (fd >= 0)
			close(fd);
		client_gone(c);
		return;
	}
	switch (m.op) {
	case SV_PORTD_HELLO:
		err = hello(c, &m, fd);
		break;
	case SV_PORTD_LISTEN:
	case SV_PORTD_UNLISTEN:
		err = listen_op(c, &m);
		break;
	default:
		err = -EPROTO;
	}
	if (fd >= 0)
		close(fd); /* the map holds the socket, the daemon its copy */
	if (err) {
		sv_warn("portd: daemon %d (uid %u) broke the protocol: hung up",
			(int)c->pid, (unsigned)c->uid);
		client_gone(c);
	}
}

static void accept_one(void)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	struct epoll_event ev = { .events = EPOLLIN };
	struct client *c;
	int fd = accept4(pd.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
		free(c);
		close(fd);
		return;
	}
	c->fd = fd;
	c->sock = -1;
	c->uid = cr.uid;
	c->pid = cr.pid;
	ev.data.ptr = c;
	if (epoll_ctl(pd.epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		client_gone(c);
}

/* The daemon a CM MAD (a ring record) belongs to, or NULL. */
static struct client *mad_owner(const uint8_t *rec, uint32_t len)
{
	const uint8_t *mad = rec + MAD_OFF, *data = mad + 24;
	uint16_t attr;
	uint32_t id;

	if (len < MAD_OFF + 24 + 16 || mad[1] != MAD_CLASS_CM)
		return NULL;
	attr = ld_be16(mad + 16);
	if (attr == CM_REQ || attr == CM_SIDR_REQ)
		return sid_owner((uint64_t)ld_be32(data + 8) << 32 |
					 ld_be32(data + 12),
				 NULL);
	/* The ID the daemon chose: a SIDR REP's request ID, the remote
	 * communication ID of everything else answering us. */
	id = ld_be32(attr == CM_SIDR_REP ? data : data + 4);
	return pd.block[id >> 24];
}

static void port_readable(void)
{
	int n = sv_wire_recv(pd.sock0, &pd.rxb, SV_WIRE_BATCH);

	for (int i = 0; i < n; i++) {
		struct sv_wire_pkt p;
		struct sv_portd_msg m = { .op = SV_PORTD_QP1 };
		struct iovec iov[2];
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
		struct client *c;

		pd.rx++;
		if (sv_wire_rx_parse(&pd.rxb.mm[i].msg_hdr, pd.rxb.mm[i].msg_len,
				     pd.rxb.buf[i], pd.port, &p) ||
		    p.qpn != 1 || !(c = mad_owner(p.rec, p.rec_len))) {
			pd.dropped++;
			continue;
		}
		iov[0] = (struct iovec){ &m, sizeof(m) };
		iov[1] = (struct iovec){ p.rec, p.rec_len };
		if (sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			pd.qp1_lost++;
		else
			pd.qp1++;
	}
}

static int listen_on(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, SV_PORTD_NAME,
		 (unsigned)pd.port);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  strlen(a.sun_path + 1));
	if (bind(fd, (struct sockaddr *)&a, len) < 0 || listen(fd, 64) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int port_arg(int argc, char **argv)
{
	const char *e = getenv("SOFTVERBS_ROCE_PORT");
	long v = SV_ROCE_PORT;

	if (argc == 3 && !strcmp(argv[1], "--port"))
		e = argv[2];
	else if (argc != 1)
		return -1;
	if (e && *e) {
		char *end;

		v = strtol(e, &end, 10);
		if (*end || v < 1 || v > 65535)
			return -1;
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN };
	sigset_t sigs;
	int port = port_arg(argc, argv), sfd, err;

	sv_log_init("softverbs-portd");
	if (port < 0) {
		fprintf(stderr, "usage: softverbs-portd [--port N]\n"
				"holds a network namespace's RoCE v2 port for "
				"every user's softverbs daemon (run as root)\n");
		return 2;
	}
	pd.port = (uint16_t)port;
	err = portd_steer_init(&pd.steer);
	if (err) {
		fprintf(stderr, "softverbs-portd: cannot load the steering "
				"program: %s%s\n", strerror(-err),
			err == -EPERM ? " (run it as root)" : "");
		return 1;
	}
	pd.sock0 = bind_member();
	if (pd.sock0 < 0 || (err = portd_steer_set(&pd.steer, 0, pd.sock0)) ||
	    (err = portd_steer_attach(&pd.steer, pd.sock0))) {
		fprintf(stderr, "softverbs-portd: UDP port %u: %s\n", pd.port,
			strerror(pd.sock0 < 0 ? -pd.sock0 : -err));
		return 1;
	}
	sv_wire_rx_sockopts(pd.sock0, AF_INET6);
	pd.listen_fd = listen_on();
	if (pd.listen_fd < 0) {
		fprintf(stderr, "softverbs-portd: @" SV_PORTD_NAME ": %s\n",
			(unsigned)pd.port, strerror(-pd.listen_fd));
		return 1;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	pd.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || pd.epfd < 0)
		return 1;
	ev.data.ptr = &pd.sock0;
	epoll_ctl(pd.epfd, EPOLL_CTL_ADD, pd.sock0, &ev);
	ev.data.ptr = &pd.listen_fd;
	epoll_ctl(pd.epfd, EPOLL_CTL_ADD, pd.listen_fd, &ev);
	ev.data.ptr = &sfd;
	epoll_ctl(pd.epfd, EPOLL_CTL_ADD, sfd, &ev);
	/* A line a starter can wait on (tests, systemd's journal). */
	printf("softverbs-portd: UDP port %u, @" SV_PORTD_NAME "\n", pd.port,
	       (unsigned)pd.port);
	fflush(stdout);
	for (;;) {
		struct epoll_event evs[32];
		int n = epoll_wait(pd.epfd, evs, 32, -1);

		if (n < 0 && errno != EINTR)
			return 1;
		for (int i = 0; i < n; i++) {
			void *w = evs[i].data.ptr;

			if (w == &pd.sock0)
				port_readable();
			else if (w == &pd.listen_fd)
				accept_one();
			else if (w == &sfd)
				goto out;
			else
				client_readable(w);
		}
	}
out:
	sv_info("portd: exiting (%llu datagrams, %llu CM MADs passed on, %llu "
		"lost, %llu dropped)",
		(unsigned long long)pd.rx, (unsigned long long)pd.qp1,
		(unsigned long long)pd.qp1_lost,
		(unsigned long long)pd.dropped);
	return 0;
}

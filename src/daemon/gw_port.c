/* SPDX-License-Identifier: MIT */
/*
 * Taking the namespace's RoCE v2 port for the wire gateway (gateway.c):
 * through the port service softverbs-portd when one runs (src/portd,
 * src/common/sv_portd.h: it holds UDP 4791 for every daemon and steers
 * each one's QPN block to the socket it gives it), else by binding it;
 * the service's hang-up and return; the socket options the port needs.
 */
#include "gw_int.h"
#include "svd_cm.h"
#include "sv_log.h"
#include "sv_portd.h"
#include "sv_sock.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void setopt(int fd, int level, int name, int v)
{
	if (setsockopt(fd, level, name, &v, sizeof(v)) < 0)
		sv_dbg("wire: setsockopt %d/%d: %s", level, name, strerror(errno));
}

/* What the port's socket needs, whoever bound it. */
static void port_opts(int fd, int v6)
{
	int rb = GW_RCVBUF;

	sv_wire_rx_sockopts(fd, v6 ? AF_INET6 : AF_INET);
	/* A train (eng_wire.c) comes as one datagram: every reader of this
	 * socket splits it (sv_wire.h). */
	sv_wire_rx_gro(fd);
	/* What the daemon sends (QP1's CM MADs) leaves as the engines'
	 * packets do: DF, so Linux numbers an unconnected socket's IPv4
	 * packets ID 0 -- the ID the ICRC was computed with (PMTU discovery
	 * "want" lets the kernel fragment, and then it picks random IDs:
	 * rxe would drop every MAD for its ICRC) -- and UDP checksum 0 over
	 * IPv4 (the ICRC covers the packet), as rxe sends. */
	setopt(fd, SOL_SOCKET, SO_NO_CHECK, 1);
	setopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
	if (v6)
		setopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
	/* Room for the windows of many QPs at once (root: beyond
	 * rmem_max). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rb, sizeof(rb)) < 0)
		setopt(fd, SOL_SOCKET, SO_RCVBUF, rb);
}

/* Binds the port ourselves (no port service): the socket, or -errno. */
static int open_port(uint16_t port, int *v6out)
{
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int v6 = fd >= 0, err;

	if (fd < 0)
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (v6)
		setopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
	if (v6) {
		struct sockaddr_in6 a = { .sin6_family = AF_INET6,
					  .sin6_port = htons(port),
					  .sin6_addr = IN6ADDR_ANY_INIT };

		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			goto err;
	} else {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons(port),
					 .sin_addr.s_addr = htonl(INADDR_ANY) };

		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			goto err;
	}
	port_opts(fd, v6);
	*v6out = v6;
	return fd;
err:
	err = -errno;
	close(fd);
	return err;
}

/* One message of the service's, with its descriptor if any (else *fd
 * is -1).  Returns the bytes, 0 at hang-up, -errno. */
static ssize_t portd_recv(int c, struct sv_portd_msg *m, uint8_t *rec,
			  size_t cap, int *fd, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov[2] = { { m, sizeof(*m) }, { rec, cap } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = rec ? 2 : 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t n = recvmsg(c, &mh, flags | MSG_CMSG_CLOEXEC);

	*fd = -1;
	if (n < 0)
		return -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm;
	     cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(cm), sizeof(int));
	if (n < (ssize_t)sizeof(*m) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -EPROTO;
	}
	return n;
}

/*
 * Asks the namespace's port service (sv_portd.h) for our share of the
 * port: a connection to a root process on SV_PORTD_NAME, HELLO (with
 * `mine`, our socket, and *block when we reconnect after it restarted),
 * and the socket that receives our block.  Returns the socket (or mine
 * again) with *conn and *block set, -ENOENT when no service runs here (or
 * one not run by root: ignored), or another -errno.
 */
static int portd_open(uint16_t port, int mine, uint32_t *block, int *conn)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct sv_portd_msg m = { .op = SV_PORTD_HELLO,
				  .version = SV_PORTD_VERSION,
				  .block = *block };
	struct timeval tv = { .tv_sec = 2 };
	struct ucred cr;
	socklen_t cl = sizeof(cr), len;
	int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), fd = -1;
	ssize_t n;

	if (c < 0)
		return -errno;
	snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, SV_PORTD_NAME,
		 (unsigned)port);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  strlen(a.sun_path + 1));
	if (connect(c, (struct sockaddr *)&a, len) < 0) {
		close(c);
		return -ENOENT;
	}
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != 0) {
		sv_warn("wire: @" SV_PORTD_NAME " is held by uid %u, not root: "
			"not a port service, ignored", (unsigned)port,
			(unsigned)cr.uid);
		close(c);
		return -ENOENT;
	}
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = sv_send_msg(c, &m, sizeof(m), &mine, mine >= 0, 0);
	if (n < 0) {
		errno = (int)-n;
		goto err;
	}
	/* The answer comes first: no block, no QP1 traffic yet. */
	n = portd_recv(c, &m, NULL, 0, &fd, 0);
	if (n < 0 || m.op != SV_PORTD_HELLO) {
		errno = n < 0 ? (int)-n : EPROTO;
		goto err;
	}
	if (m.err || !m.block || m.block >= SV_PORTD_BLOCKS ||
	    (fd < 0 && mine < 0)) {
		errno = m.err ? -m.err : EPROTO;
		goto err;
	}
	if (fd < 0)
		fd = mine;
	tv.tv_sec = 0;
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	*block = m.block;
	*conn = c;
	return fd;
err:
	n = -errno;
	if (fd >= 0 && fd != mine)
		close(fd);
	close(c);
	return (int)n;
}

/*
 * Takes the port: through the port service when one runs in this
 * namespace, else by binding it.  Publishes svd_gw.fd (under svd_gw.lock: the
 * main thread reads it) and logs a change.  Any thread; the gateway
 * thread retries it every SV_WIRE_RETRY_MS while the port is not ours.
 */
void svd_gw_take_port(void)
{
	uint32_t block = svd_gw.block;
	int conn = -1, v6 = 1, fd, mine;

	pthread_mutex_lock(&svd_gw.lock);
	mine = svd_gw.portd_lost ? svd_gw.fd : -1;
	pthread_mutex_unlock(&svd_gw.lock);
	fd = portd_open(svd_gw.port, mine, &block, &conn);
	if (fd >= 0) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			v6 = ss.ss_family == AF_INET6;
		if (fd != mine)
			port_opts(fd, v6);
		if (mine >= 0 && fd != mine) {
			/* Our block went to another daemon while the service
			 * was away: a new one, on a new socket.  Processes
			 * attached before keep reading the old one, which
			 * hears nothing now: they are off the wire until they
			 * attach again. */
			sv_warn("wire: the port service gave us QPN block %#x "
				"for %#x: QPs made before are unreachable",
				block, svd_gw.block);
			pthread_mutex_lock(&svd_gw.lock);
			close(svd_gw.fd);
			svd_gw.fd = -1;
			pthread_mutex_unlock(&svd_gw.lock);
		}
	} else if (mine >= 0) {
		return; /* keep what we have; try the service again later */
	} else if (fd == -ENOENT) {
		fd = open_port(svd_gw.port, &v6);
	}
	pthread_mutex_lock(&svd_gw.lock);
	if (fd < 0) {
		if (svd_gw.err != fd)
			sv_err("wire: cannot bind UDP port %u: %s%s", svd_gw.port,
			       strerror(-fd),
			       fd == -EADDRINUSE ?
				       " (another softverbsd or rdma_rxe of this "
				       "network namespace has it): packets from "
				       "other hosts cannot reach this device "
				       "until it is free (tried again every "
				       "second); see docs/wire.md" :
				       "");
		svd_gw.err = fd;
		pthread_mutex_unlock(&svd_gw.lock);
		return;
	}
	svd_gw.fd = fd;
	svd_gw.v6 = v6;
	svd_gw.portd = conn;
	svd_gw.portd_lost = 0;
	svd_gw.block = conn >= 0 ? block : 0;
	svd_gw.err = 0;
	pthread_mutex_unlock(&svd_gw.lock);
	if (conn >= 0)
		sv_info("wire: RoCE v2 on UDP port %u through the port service "
			"(QPN block %#x)", svd_gw.port, block);
	else
		sv_info("wire: RoCE v2 on UDP port %u (%s), bound by this daemon "
			"(no port service here: docs/wire.md)", svd_gw.port,
			v6 ? "IPv4 and IPv6" : "IPv4 only");
}

/* The service hung up (a restart): our socket and block stay ours until
 * it is back and takes them again (take_port). */
static void portd_gone(void)
{
	pthread_mutex_lock(&svd_gw.lock);
	close(svd_gw.portd);
	svd_gw.portd = -1;
	svd_gw.portd_lost = 1;
	svd_gw.lreply_got = 1;
	svd_gw.lreply_err = -ECONNRESET;
	pthread_cond_broadcast(&svd_gw.lreply_cond);
	pthread_mutex_unlock(&svd_gw.lock);
	sv_warn("wire: the port service hung up: CM messages cannot reach us "
		"until it is back");
}

/* What the service sends: CM MADs for us and LISTEN answers. */
void svd_gw_portd_readable(void)
{
	static uint8_t rec[SV_WIRE_BUF];

	for (;;) {
		struct sv_portd_msg m;
		int fd;
		ssize_t n = portd_recv(svd_gw.portd, &m, rec, sizeof(rec), &fd,
				       MSG_DONTWAIT);

		if (fd >= 0)
			close(fd);
		if (n == -EAGAIN || n == -EINTR)
			return;
		if (n <= 0) {
			portd_gone();
			return;
		}
		if (m.op == SV_PORTD_QP1 && n > (ssize_t)sizeof(m)) {
			pthread_mutex_lock(&svd_gw.lock);
			svd_gw_qp1_queue(rec, (size_t)n - sizeof(m));
			pthread_mutex_unlock(&svd_gw.lock);
			svd_cm_kick();
		} else if (m.op == SV_PORTD_LISTEN) {
			pthread_mutex_lock(&svd_gw.lock);
			svd_gw.lreply_got = 1;
			svd_gw.lreply_err = m.err;
			pthread_cond_broadcast(&svd_gw.lreply_cond);
			pthread_mutex_unlock(&svd_gw.lock);
		}
	}
}


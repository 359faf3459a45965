/* SPDX-License-Identifier: MIT */
#include "sv_sock.h"
#include "sv_proto.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int sv_send_msg(int sock, const void *buf, size_t len, const int *fds,
		int nfds, int dontwait)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SV_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds < 0 || nfds > SV_MAX_FDS)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do {
		n = sendmsg(sock, &msg,
			    MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0));
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

enum sv_sock_state sv_sock_hup(int sock)
{
	struct pollfd pfd = { .fd = sock, .events = POLLIN | POLLRDHUP };

	if (poll(&pfd, 1, 0) < 0 ||
	    (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)))
		return SV_SOCK_HUP;
	return (pfd.revents & POLLRDHUP) ? SV_SOCK_RDHUP : SV_SOCK_OPEN;
}

void sv_close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

ssize_t sv_recv_msg(int sock, void *buf, size_t cap, int *fds, int maxfds,
		    int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * (SV_MAX_FDS + 4))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = cbuf.buf,
			      .msg_controllen = sizeof(cbuf.buf) };
	struct cmsghdr *c;
	ssize_t n;
	int got = 0, trunc;

	*nfds = 0;
	do {
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;

	trunc = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		int k, *in;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		in = (int *)CMSG_DATA(c);
		for (int i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, &in[i], sizeof(fd));
			if (got < maxfds && !trunc)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	if (trunc) {
		sv_close_fds(fds, got);
		return -EMSGSIZE;
	}
	*nfds = got;
	return n;
}

const char *sv_socket_name(char *buf, size_t cap)
{
	const char *name = getenv("SOFTVERBS_SOCKET");
	char own[sizeof(((struct sockaddr_un *)0)->sun_path)];

	if (name && *name)
		snprintf(own, sizeof(own), "%s", name);
	else
		snprintf(own, sizeof(own), "softverbs.%u", (unsigned)getuid());
	snprintf(buf, cap, "%s", own);
	return buf;
}

socklen_t sv_socket_addr(struct sockaddr_un *addr)
{
	char buf[sizeof(addr->sun_path)];
	size_t n;

	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	sv_socket_name(buf, sizeof(buf));
	/* Abstract namespace: leading NUL, no file, one per network namespace. */
	n = strlen(buf);
	if (n > sizeof(addr->sun_path) - 1)
		n = sizeof(addr->sun_path) - 1;
	memcpy(addr->sun_path + 1, buf, n);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

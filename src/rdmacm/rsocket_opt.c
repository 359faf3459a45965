/* SPDX-License-Identifier: MIT */
/*
 * rsockets' readiness and options (rsocket.c has the sockets' lifetime
 * and connections, rsocket_io.c their data path): rpoll and rselect,
 * rgetpeername/rgetsockname, rsetsockopt/rgetsockopt, rfcntl.
 */
#include "rsocket_int.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

/* ---- polling ----------------------------------------------------------- */

/* What rs is ready for now (progressing it first).  Must hold rs->lock. */
static short rs_revents(struct rsock *rs)
{
	short r = 0;

	switch (rs->state) {
	case RS_LISTENING: {
		struct pollfd p = { .fd = rs->ch->fd, .events = POLLIN };

		if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
			r |= POLLIN;
		break;
	}
	case RS_RESOLVING_ADDR:
	case RS_RESOLVING_ROUTE:
	case RS_CONNECTING:
		if (!rs_do_connect(rs, 0))
			r |= POLLOUT;
		else if (errno != EINPROGRESS)
			r |= POLLOUT | POLLERR;
		break;
	case RS_CONNECTED:
	case RS_DISCONNECTED:
		rs_progress(rs);
		if (rs_can_recv(rs))
			r |= POLLIN;
		if (rs_can_write(rs))
			r |= POLLOUT;
		/* As TCP: the peer's shutdown is readable (EOF), and the
		 * connection is hung up once it is gone and drained. */
		if (rs->state == RS_DISCONNECTED && !rs->rq_count)
			r |= POLLHUP;
		if (rs->state == RS_ERROR)
			r |= POLLERR;
		break;
	case RS_ERROR:
		r |= POLLERR | POLLHUP | POLLIN | POLLOUT;
		break;
	default:
		break;
	}
	return r;
}

/* One pass: the ready count, revents filled. */
static int check(struct pollfd *fds, nfds_t nfds)
{
	int n = 0;

	for (nfds_t i = 0; i < nfds; i++) {
		struct rsock *rs = rs_get(fds[i].fd);

		fds[i].revents = 0;
		if (fds[i].fd < 0)
			continue;
		if (rs) {
			pthread_mutex_lock(&rs->lock);
			fds[i].revents = rs_revents(rs) &
					 (fds[i].events | POLLERR | POLLHUP);
			pthread_mutex_unlock(&rs->lock);
		} else {
			struct pollfd p = fds[i];

			if (poll(&p, 1, 0) > 0)
				fds[i].revents = p.revents;
		}
		if (fds[i].revents)
			n++;
	}
	return n;
}

SV_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	uint64_t start = rs_now_ns();
	struct pollfd *p;
	int ret;

	if (!fds && nfds)
		return cma_err(EFAULT);
	/* Poll first (RS_SPIN_NS): most answers come within it. */
	do {
		ret = check(fds, nfds);
		if (ret || !timeout)
			return ret;
	} while (rs_now_ns() - start < RS_SPIN_NS);

	p = calloc(nfds * 2 + 1, sizeof(*p));
	if (!p)
		return cma_err(ENOMEM);
	for (;;) {
		nfds_t n = 0;
		int left = -1;

		ret = check(fds, nfds);
		if (ret)
			break;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsock *rs = rs_get(fds[i].fd);

			if (fds[i].fd < 0)
				continue;
			if (!rs) {
				p[n++] = fds[i];
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			if (rs->cq && (rs->state == RS_CONNECTED ||
				       rs->state == RS_DISCONNECTED)) {
				ibv_req_notify_cq(rs->cq, 0);
				p[n].fd = rs->cc->fd;
				p[n++].events = POLLIN;
			}
			p[n].fd = rs->ch->fd;
			p[n++].events = POLLIN;
			pthread_mutex_unlock(&rs->lock);
		}
		/* What arrived while arming is seen before sleeping. */
		ret = check(fds, nfds);
		if (ret)
			break;
		if (timeout >= 0) {
			uint64_t el = (rs_now_ns() - start) / 1000000;

			if (el >= (uint64_t)timeout)
				break;
			left = timeout - (int)el;
		}
		if (poll(p, n, left) < 0 && errno != EINTR) {
			ret = -1;
			break;
		}
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsock *rs = rs_get(fds[i].fd);
			struct ibv_cq *cq;
			void *ctx;

			if (!rs || fds[i].fd < 0)
				continue;
			pthread_mutex_lock(&rs->lock);
			while (rs->cc && !ibv_get_cq_event(rs->cc, &cq, &ctx))
				ibv_ack_cq_events(cq, 1);
			rs_cm_progress_now(rs);
			pthread_mutex_unlock(&rs->lock);
		}
	}
	free(p);
	return ret;
}

SV_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds,
		      fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *p;
	int n = 0, ret, to;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return cma_err(EINVAL);
	p = calloc((size_t)nfds + 1, sizeof(*p));
	if (!p)
		return cma_err(ENOMEM);
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (exceptfds && FD_ISSET(fd, exceptfds))
			ev |= POLLPRI;
		if (ev) {
			p[n].fd = fd;
			p[n++].events = ev;
		}
	}
	to = timeout ? (int)(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
	ret = rpoll(p, (nfds_t)n, to);
	if (ret >= 0) {
		ret = 0;
		if (readfds)
			FD_ZERO(readfds);
		if (writefds)
			FD_ZERO(writefds);
		if (exceptfds)
			FD_ZERO(exceptfds);
		for (int i = 0; i < n; i++) {
			int hit = 0;

			if (readfds && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    (p[i].events & POLLIN)) {
				FD_SET(p[i].fd, readfds);
				hit = 1;
			}
			if (writefds && (p[i].revents & (POLLOUT | POLLERR)) &&
			    (p[i].events & POLLOUT)) {
				FD_SET(p[i].fd, writefds);
				hit = 1;
			}
			if (exceptfds && (p[i].revents & POLLPRI)) {
				FD_SET(p[i].fd, exceptfds);
				hit = 1;
			}
			ret += hit;
		}
	}
	free(p);
	return ret;
}

/* ---- names, options, fcntl --------------------------------------------- */

static int copy_name(const struct sockaddr *a, struct sockaddr *addr,
		     socklen_t *addrlen)
{
	socklen_t len = (socklen_t)cma_addrlen(a);

	if (!addr || !addrlen)
		return cma_err(EFAULT);
	memcpy(addr, a, len < *addrlen ? len : *addrlen);
	*addrlen = len;
	return 0;
}

SV_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = rs_get(socket);

	if (!rs)
		return cma_err(EBADF);
	if (rs->state != RS_CONNECTED && rs->state != RS_DISCONNECTED)
		return cma_err(ENOTCONN);
	return copy_name(rdma_get_peer_addr(rs->id), addr, addrlen);
}

SV_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = rs_get(socket);

	if (!rs)
		return cma_err(EBADF);
	return copy_name(rdma_get_local_addr(rs->id), addr, addrlen);
}

static int int_opt(const void *v, socklen_t len, int *out)
{
	if (!v || len < sizeof(int))
		return cma_err(EINVAL);
	memcpy(out, v, sizeof(int));
	return 0;
}

SV_EXPORT int rsetsockopt(int socket, int level, int optname,
			  const void *optval, socklen_t optlen)
{
	struct rsock *rs = rs_get(socket);
	int v = 0, ret = 0;

	if (!rs)
		return cma_err(EBADF);
	if (level != SOL_RDMA || optname != RDMA_ROUTE)
		if (int_opt(optval, optlen, &v) &&
		    !(level == SOL_SOCKET && optname == SO_LINGER))
			return -1;
	pthread_mutex_lock(&rs->lock);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			ret = rdma_set_option(rs->id, RDMA_OPTION_ID,
					      RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v));
			if (!ret)
				rs->reuseaddr = !!v;
			break;
		case SO_RCVBUF:
			rs->rcvbuf = v > 0 ? v : DEF_BUF;
			break;
		case SO_SNDBUF:
			rs->sndbuf = v > 0 ? v : DEF_BUF;
			break;
		case SO_KEEPALIVE:
			rs->keepalive = !!v;
			break;
		case SO_OOBINLINE:
			rs->oobinline = !!v;
			break;
		case SO_LINGER:
			if (!optval || optlen < sizeof(rs->linger))
				ret = cma_err(EINVAL);
			else
				memcpy(&rs->linger, optval, sizeof(rs->linger));
			break;
		default:
			ret = cma_err(ENOTSUP);
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			rs->nodelay = !!v;
			break;
		case TCP_KEEPIDLE:
			if (v <= 0)
				ret = cma_err(EINVAL);
			else
				rs->keepidle = v;
			break;
		case TCP_MAXSEG:
			break;
		default:
			ret = cma_err(ENOTSUP);
		}
		break;
	case IPPROTO_IPV6:
		if (optname != IPV6_V6ONLY) {
			ret = cma_err(ENOTSUP);
			break;
		}
		ret = rdma_set_option(rs->id, RDMA_OPTION_ID,
				      RDMA_OPTION_ID_AFONLY, &v, sizeof(v));
		break;
	case SOL_RDMA:
		if (rs->state >= RS_CONNECTING && optname != RDMA_ROUTE) {
			ret = cma_err(EINVAL);
			break;
		}
		switch (optname) {
		case RDMA_SQSIZE:
			rs->sqsize = v > 0 ? v : 0;
			break;
		case RDMA_RQSIZE:
			rs->rqsize = v > 0 ? v : 0;
			break;
		case RDMA_INLINE:
			rs->inline_size = v >= 0 ? v : 0;
			break;
		case RDMA_IOMAPSIZE:
			rs->iomap_size = v >= 0 ? v : 0;
			break;
		case RDMA_ROUTE:
			ret = rdma_set_option(rs->id, RDMA_OPTION_IB,
					      RDMA_OPTION_IB_PATH, (void *)optval,
					      optlen);
			break;
		default:
			ret = cma_err(ENOTSUP);
		}
		break;
	default:
		ret = cma_err(ENOTSUP);
	}
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

SV_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval,
			  socklen_t *optlen)
{
	struct rsock *rs = rs_get(socket);
	int v, ret = 0;

	if (!rs)
		return cma_err(EBADF);
	if (!optval || !optlen)
		return cma_err(EFAULT);
	pthread_mutex_lock(&rs->lock);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR: v = rs->reuseaddr; break;
		case SO_RCVBUF: v = rs->rcvbuf; break;
		case SO_SNDBUF: v = rs->sndbuf; break;
		case SO_KEEPALIVE: v = rs->keepalive; break;
		case SO_OOBINLINE: v = rs->oobinline; break;
		case SO_ERROR:
			if (rs->state == RS_RESOLVING_ADDR ||
			    rs->state == RS_RESOLVING_ROUTE ||
			    rs->state == RS_CONNECTING)
				rs_do_connect(rs, 0);
			v = rs->err;
			rs->err = 0;
			break;
		case SO_LINGER:
			if (*optlen < sizeof(rs->linger)) {
				ret = cma_err(EINVAL);
				goto out;
			}
			memcpy(optval, &rs->linger, sizeof(rs->linger));
			*optlen = sizeof(rs->linger);
			goto out;
		default:
			ret = cma_err(ENOTSUP);
			goto out;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY: v = rs->nodelay; break;
		case TCP_KEEPIDLE: v = rs->keepidle ? rs->keepidle : 7200; break;
		case TCP_MAXSEG: v = (int)(rs->msgmax ? rs->msgmax : RS_SLOT); break;
		default:
			ret = cma_err(ENOTSUP);
			goto out;
		}
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE: v = (int)(rs->nsend ? rs->nsend : (uint32_t)rs->sqsize); break;
		case RDMA_RQSIZE: v = (int)(rs->nrecv ? rs->nrecv : (uint32_t)rs->rqsize); break;
		case RDMA_INLINE: v = rs->inline_size; break;
		case RDMA_IOMAPSIZE: v = rs->iomap_size; break;
		default:
			ret = cma_err(ENOTSUP);
			goto out;
		}
		break;
	default:
		ret = cma_err(ENOTSUP);
		goto out;
	}
	if (*optlen < sizeof(int)) {
		ret = cma_err(EINVAL);
		goto out;
	}
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(v);
out:
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

SV_EXPORT int rfcntl(int socket, int cmd, ...)
{
	struct rsock *rs = rs_get(socket);
	va_list ap;
	long arg;
	int ret = 0;

	if (!rs)
		return cma_err(EBADF);
	pthread_mutex_lock(&rs->lock);
	switch (cmd) {
	case F_GETFL:
		ret = rs->fd_flags;
		break;
	case F_SETFL:
		va_start(ap, cmd);
		arg = va_arg(ap, long);
		va_end(ap);
		rs->fd_flags = (int)arg;
		break;
	default:
		ret = cma_err(ENOTSUP);
	}
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

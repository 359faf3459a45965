/* SPDX-License-Identifier: MIT */
/*
 * The rsocket API: stream sockets over RDMA (rsocket_int.h has the design
 * and the protocol).  Sockets, connection set-up and tear-down (blocking
 * or not), and the data calls' entry points; rsocket_opt.c has options,
 * names, and rpoll/rselect over rsockets and ordinary fds together.
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

/* ---- the table: rsocket number -> rsock -------------------------------- */

static pthread_mutex_t tbl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsock **tbl;
static int tbl_cap;

struct rsock *rs_get(int index)
{
	struct rsock *rs = NULL;

	pthread_mutex_lock(&tbl_lock);
	if (index >= 0 && index < tbl_cap)
		rs = tbl[index];
	pthread_mutex_unlock(&tbl_lock);
	return rs;
}

static int tbl_set(int index, struct rsock *rs)
{
	int ret = 0;

	pthread_mutex_lock(&tbl_lock);
	if (index >= tbl_cap) {
		int cap = tbl_cap ? tbl_cap : 64;
		struct rsock **n;

		while (cap <= index)
			cap *= 2;
		n = realloc(tbl, (size_t)cap * sizeof(*n));
		if (!n) {
			ret = -1;
			goto out;
		}
		memset(n + tbl_cap, 0, (size_t)(cap - tbl_cap) * sizeof(*n));
		tbl = n;
		tbl_cap = cap;
	}
	tbl[index] = rs;
out:
	pthread_mutex_unlock(&tbl_lock);
	return ret;
}

void rs_set_error(struct rsock *rs, int err)
{
	rs->state = RS_ERROR;
	rs->err = err;
}

static struct rsock *rs_alloc(int type)
{
	struct rsock *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->type = type;
	rs->sndbuf = rs->rcvbuf = DEF_BUF;
	rs->inline_size = 64;
	pthread_mutex_init(&rs->lock, NULL);
	return rs;
}

/* A new rsocket around an id on its own channel (the listener's new
 * connections come with their id). */
static int rs_init_chan(struct rsock *rs, struct rdma_cm_id *id, int domain)
{
	rs->ch = rdma_create_event_channel();
	if (!rs->ch)
		return -1;
	/* Our waits poll the fd: every rdma_get_cm_event here is a try. */
	fcntl(rs->ch->fd, F_SETFL, fcntl(rs->ch->fd, F_GETFL) | O_NONBLOCK);
	if (id) {
		if (rdma_migrate_id(id, rs->ch))
			goto err;
		id->context = rs;
		rs->id = id;
	} else {
		if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP))
			goto err;
		rs->id->route.addr.src_addr.sa_family = (sa_family_t)domain;
	}
	rs->index = rs->ch->fd;
	if (tbl_set(rs->index, rs)) {
		errno = ENOMEM;
		goto err;
	}
	return 0;
err:
	{
		int e = errno;

		if (rs->id && !id)
			rdma_destroy_id(rs->id);
		rs->id = NULL;
		rdma_destroy_event_channel(rs->ch);
		rs->ch = NULL;
		errno = e;
	}
	return -1;
}

static void rs_free(struct rsock *rs)
{
	rs_free_ep(rs);
	if (rs->ch)
		tbl_set(rs->index, NULL);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

SV_EXPORT int rsocket(int domain, int type, int protocol)
{
	struct rsock *rs;

	if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM ||
	    (protocol && protocol != IPPROTO_TCP))
		return cma_err(ENOTSUP);
	if (cma_init())
		return -1;
	rs = rs_alloc(type);
	if (!rs)
		return cma_err(ENOMEM);
	if (rs_init_chan(rs, NULL, domain)) {
		int e = errno;

		pthread_mutex_destroy(&rs->lock);
		free(rs);
		return cma_err(e);
	}
	return rs->index;
}

SV_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = rs_get(socket);
	int ret;

	if (!rs)
		return cma_err(EBADF);
	if (!addr || (int)addrlen < cma_addrlen(addr) || !cma_addrlen(addr))
		return cma_err(EINVAL);
	pthread_mutex_lock(&rs->lock);
	ret = rdma_bind_addr(rs->id, (struct sockaddr *)addr);
	if (!ret)
		rs->state = RS_BOUND;
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

SV_EXPORT int rlisten(int socket, int backlog)
{
	struct rsock *rs = rs_get(socket);
	int ret;

	if (!rs)
		return cma_err(EBADF);
	pthread_mutex_lock(&rs->lock);
	ret = rdma_listen(rs->id, backlog);
	if (!ret)
		rs->state = RS_LISTENING;
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* One CM event of rs's channel, waiting up to timeout_ms (0: a try). */
static int next_event(struct rsock *rs, struct rdma_cm_event **ev,
		      int timeout_ms)
{
	struct pollfd p = { .fd = rs->ch->fd, .events = POLLIN };

	for (;;) {
		if (!rdma_get_cm_event(rs->ch, ev))
			return 0;
		if (errno != EAGAIN || !timeout_ms)
			return -1;
		pthread_mutex_unlock(&rs->lock);
		poll(&p, 1, timeout_ms);
		pthread_mutex_lock(&rs->lock);
		if (timeout_ms > 0 && !(p.revents & POLLIN)) {
			errno = ETIMEDOUT;
			return -1;
		}
	}
}

static int event_errno(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev->status < 0 && ev->status != -ETIMEDOUT ? -ev->status :
								      ETIMEDOUT;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return ENODEV;
	default:
		return ev->status < 0 ? -ev->status : ECONNREFUSED;
	}
}

/* The active side's steps, as far as events allow (all of them when
 * blocking).  0 connected, -1 with errno (EINPROGRESS: not yet). */
int rs_do_connect(struct rsock *rs, int blocking)
{
	struct rdma_cm_event *ev;
	struct rdma_conn_param p;
	struct rs_conn c;
	int e;

	while (rs->state == RS_RESOLVING_ADDR || rs->state == RS_RESOLVING_ROUTE ||
	       rs->state == RS_CONNECTING) {
		if (next_event(rs, &ev, blocking ? 30000 : 0)) {
			if (errno == EAGAIN)
				return cma_err(EINPROGRESS);
			e = errno;
			goto fail;
		}
		switch (rs->state) {
		case RS_RESOLVING_ADDR:
			if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
				break;
			rdma_ack_cm_event(ev);
			if (rdma_resolve_route(rs->id, 2000)) {
				e = errno;
				goto fail;
			}
			rs->state = RS_RESOLVING_ROUTE;
			continue;
		case RS_RESOLVING_ROUTE:
			if (ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED)
				break;
			rdma_ack_cm_event(ev);
			if (rs_create_ep(rs)) {
				e = errno;
				goto fail;
			}
			rs_fill_conn(rs, &c);
			memset(&p, 0, sizeof(p));
			p.private_data = &c;
			p.private_data_len = sizeof(c);
			p.responder_resources = 1;
			p.initiator_depth = 1;
			p.retry_count = 7;
			p.rnr_retry_count = 7;
			if (rdma_connect(rs->id, &p)) {
				e = errno;
				goto fail;
			}
			rs->state = RS_CONNECTING;
			continue;
		default:
			if (ev->event != RDMA_CM_EVENT_ESTABLISHED)
				break;
			rs_peer_params(rs, ev->param.conn.private_data,
				       ev->param.conn.private_data_len);
			rdma_ack_cm_event(ev);
			if (!rs->credits) {
				e = EPROTO; /* not a softverbs rsocket */
				goto fail;
			}
			rs->state = RS_CONNECTED;
			return 0;
		}
		e = event_errno(ev);
		rdma_ack_cm_event(ev);
		goto fail;
	}
	if (rs->state == RS_CONNECTED)
		return 0;
	return cma_err(rs->state == RS_ERROR && rs->err ? rs->err : ENOTCONN);
fail:
	rs_set_error(rs, e);
	return cma_err(e);
}

SV_EXPORT int rconnect(int socket, const struct sockaddr *addr,
		       socklen_t addrlen)
{
	struct rsock *rs = rs_get(socket);
	int ret;

	if (!rs)
		return cma_err(EBADF);
	if (!addr || !cma_addrlen(addr) || (int)addrlen < cma_addrlen(addr))
		return cma_err(EINVAL);
	pthread_mutex_lock(&rs->lock);
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
		if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr, 2000)) {
			ret = -1;
			goto out;
		}
		rs->state = RS_RESOLVING_ADDR;
		break;
	case RS_RESOLVING_ADDR:
	case RS_RESOLVING_ROUTE:
	case RS_CONNECTING:
		ret = cma_err(EALREADY);
		goto out;
	case RS_CONNECTED:
		ret = cma_err(EISCONN);
		goto out;
	default:
		ret = cma_err(EINVAL);
		goto out;
	}
	ret = rs_do_connect(rs, !rs_nonblocking(rs, 0));
out:
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* The passive side of one request: a new rsocket, accepted, connected. */
static struct rsock *rs_accept_one(struct rsock *l, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct rdma_conn_param p;
	struct rdma_cm_event *e2;
	struct rsock *rs = rs_alloc(l->type);
	struct rs_conn c;
	int e;

	if (!rs) {
		rdma_reject(id, NULL, 0);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(id);
		errno = ENOMEM;
		return NULL;
	}
	rs->sndbuf = l->sndbuf;
	rs->rcvbuf = l->rcvbuf;
	rs->sqsize = l->sqsize;
	rs->rqsize = l->rqsize;
	rs->inline_size = l->inline_size;
	rs->iomap_size = l->iomap_size;
	rs->nodelay = l->nodelay;
	pthread_mutex_lock(&rs->lock);
	rs_peer_params(rs, ev->param.conn.private_data,
		       ev->param.conn.private_data_len);
	rdma_ack_cm_event(ev);
	if (!rs->credits) {
		e = EPROTO;
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		goto err_free;
	}
	{
		int credits = rs->credits;

		if (rs_init_chan(rs, id, 0)) {
			e = errno;
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			goto err_free;
		}
		if (rs_create_ep(rs)) {
			e = errno;
			rdma_reject(id, NULL, 0);
			goto err_free;
		}
		rs->credits = credits;
	}
	rs_fill_conn(rs, &c);
	memset(&p, 0, sizeof(p));
	p.private_data = &c;
	p.private_data_len = sizeof(c);
	p.responder_resources = 1;
	p.initiator_depth = 1;
	p.rnr_retry_count = 7;
	if (rdma_accept(id, &p)) {
		e = errno;
		goto err_free;
	}
	/* Send nothing before the requester's QP is ready (its RTU). */
	rs->state = RS_CONNECTING;
	if (next_event(rs, &e2, 30000)) {
		e = errno;
		goto err_free;
	}
	if (e2->event != RDMA_CM_EVENT_ESTABLISHED) {
		e = event_errno(e2);
		rdma_ack_cm_event(e2);
		goto err_free;
	}
	rdma_ack_cm_event(e2);
	rs->state = RS_CONNECTED;
	pthread_mutex_unlock(&rs->lock);
	return rs;
err_free:
	pthread_mutex_unlock(&rs->lock);
	rs_free(rs);
	errno = e;
	return NULL;
}

SV_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *l = rs_get(socket), *rs;
	struct rdma_cm_event *ev;

	if (!l)
		return cma_err(EBADF);
	pthread_mutex_lock(&l->lock);
	if (l->state != RS_LISTENING) {
		pthread_mutex_unlock(&l->lock);
		return cma_err(EINVAL);
	}
	for (;;) {
		if (next_event(l, &ev, rs_nonblocking(l, 0) ? 0 : -1)) {
			pthread_mutex_unlock(&l->lock);
			return -1;
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev);
	}
	pthread_mutex_unlock(&l->lock);
	rs = rs_accept_one(l, ev);
	if (!rs)
		return -1;
	if (addr && addrlen) {
		struct sockaddr *pa = rdma_get_peer_addr(rs->id);
		socklen_t len = (socklen_t)cma_addrlen(pa);

		memcpy(addr, pa, len < *addrlen ? len : *addrlen);
		*addrlen = len;
	}
	return rs->index;
}

/* Events on a connected rsocket's channel: the peer hanging up.  Must hold
 * rs->lock. */
void rs_cm_progress(struct rsock *rs)
{
	struct rdma_cm_event *ev;

	if (rs->state != RS_CONNECTED && rs->state != RS_DISCONNECTED)
		return;
	while (!rdma_get_cm_event(rs->ch, &ev)) {
		switch (ev->event) {
		case RDMA_CM_EVENT_DISCONNECTED:
			if (rs->state == RS_CONNECTED)
				rs->state = RS_DISCONNECTED;
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			rs_set_error(rs, ENODEV);
			break;
		default:
			break;
		}
		rdma_ack_cm_event(ev);
	}
}

SV_EXPORT int rshutdown(int socket, int how)
{
	struct rsock *rs = rs_get(socket);

	if (!rs)
		return cma_err(EBADF);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return cma_err(EINVAL);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONNECTED && rs->state != RS_DISCONNECTED) {
		pthread_mutex_unlock(&rs->lock);
		return cma_err(ENOTCONN);
	}
	if (how != SHUT_WR)
		rs->shut_rd = 1;
	if (how != SHUT_RD)
		rs_shutdown_wr(rs);
	if (how == SHUT_RDWR && !rs->disconnect_sent) {
		rs->disconnect_sent = 1;
		rdma_disconnect(rs->id);
		if (rs->state == RS_CONNECTED)
			rs->state = RS_DISCONNECTED;
	}
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

SV_EXPORT int rclose(int socket)
{
	struct rsock *rs = rs_get(socket);

	if (!rs)
		return cma_err(EBADF);
	pthread_mutex_lock(&rs->lock);
	if ((rs->state == RS_CONNECTED || rs->state == RS_DISCONNECTED) &&
	    !rs->disconnect_sent) {
		rs_shutdown_wr(rs);
		rs->disconnect_sent = 1;
		rdma_disconnect(rs->id);
	}
	pthread_mutex_unlock(&rs->lock);
	rs_free(rs);
	return 0;
}

/* ---- data calls -------------------------------------------------------- */

static ssize_t do_send(int socket, const struct iovec *iov, int n, int flags)
{
	struct rsock *rs = rs_get(socket);
	ssize_t ret;

	if (!rs)
		return cma_err(EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_RESOLVING_ADDR || rs->state == RS_RESOLVING_ROUTE ||
	    rs->state == RS_CONNECTING) {
		if (rs_do_connect(rs, !rs_nonblocking(rs, flags))) {
			pthread_mutex_unlock(&rs->lock);
			return cma_err(errno == EINPROGRESS ? EAGAIN : errno);
		}
	}
	if (rs->state == RS_INIT || rs->state == RS_BOUND ||
	    rs->state == RS_LISTENING)
		ret = cma_err(ENOTCONN);
	else
		ret = rs_send(rs, iov, n, flags);
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

static ssize_t do_recv(int socket, const struct iovec *iov, int n, int flags)
{
	struct rsock *rs = rs_get(socket);
	ssize_t ret;

	if (!rs)
		return cma_err(EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_RESOLVING_ADDR || rs->state == RS_RESOLVING_ROUTE ||
	    rs->state == RS_CONNECTING) {
		if (rs_do_connect(rs, !rs_nonblocking(rs, flags))) {
			pthread_mutex_unlock(&rs->lock);
			return cma_err(errno == EINPROGRESS ? EAGAIN : errno);
		}
	}
	if (rs->state == RS_INIT || rs->state == RS_BOUND ||
	    rs->state == RS_LISTENING)
		ret = cma_err(ENOTCONN);
	else
		ret = rs_recv(rs, iov, n, flags);
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

SV_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };

	return do_send(socket, &v, 1, flags);
}

SV_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			  const struct sockaddr *dest_addr, socklen_t addrlen)
{
	(void)dest_addr;
	(void)addrlen; /* a connected stream: the address is ignored */
	return rsend(socket, buf, len, flags);
}

SV_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (!msg)
		return cma_err(EINVAL);
	return do_send(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SV_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

SV_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return do_send(socket, iov, iovcnt, 0);
}

SV_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec v = { .iov_base = buf, .iov_len = len };

	return do_recv(socket, &v, 1, flags);
}

SV_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			    struct sockaddr *src_addr, socklen_t *addrlen)
{
	ssize_t ret = rrecv(socket, buf, len, flags);

	if (ret >= 0 && src_addr && addrlen)
		rgetpeername(socket, src_addr, addrlen);
	return ret;
}

SV_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (!msg)
		return cma_err(EINVAL);
	return do_recv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SV_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

SV_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return do_recv(socket, iov, iovcnt, 0);
}

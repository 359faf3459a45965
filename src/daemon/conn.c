/* SPDX-License-Identifier: MIT */
/*
 * Control channels: accept, read one datagram at a time, check it, run the
 * op, reply.  Nothing a client sends can crash the daemon: every length,
 * range and descriptor count is checked here or in the op.
 */
#include "svd_int.h"
#include "svd_ops.h"
#include "svd_engine.h"
#include "svd_gw.h"
#include "svd_capture.h"
#include "svd_cm.h"
#include "sv_log.h"
#include "sv_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * A descriptor kept in reserve for the day the daemon runs out: accept()
 * failing with EMFILE leaves the connection queued and the listening
 * socket readable, so the loop would spin.  Giving the reserve back for a
 * moment lets the daemon accept the connection and close it (the client
 * sees EOF and an error), then the reserve is taken again.
 */
static int reserve_fd = -1;

void svd_conn_reserve_fd(void)
{
	if (reserve_fd < 0)
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void svd_conn_accept(int lfd)
{
	struct svd_conn *c;
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE) && reserve_fd >= 0) {
		sv_warn("out of descriptors: refusing a client");
		close(reserve_fd);
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			close(fd);
		reserve_fd = -1;
		svd_conn_reserve_fd();
		return;
	}
	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
	    cred.uid != getuid()) {
		sv_warn("refusing a client of uid %u", (unsigned)cred.uid);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->w.kind = SVD_W_CONN;
	c->w.fd = fd;
	c->pid = cred.pid;
	c->uid = cred.uid;
	if (svd_watch_add(&c->w, EPOLLIN)) {
		close(fd);
		free(c);
		return;
	}
	c->next = svd.conns;
	if (svd.conns)
		svd.conns->prev = c;
	svd.conns = c;
	svd.nconns++;
	sv_dbg("client pid %d connected", (int)c->pid);
}

/* Drops the channel and every view it holds; the ufiles and their objects
 * stay (they belong to the cmd_fd, not to the process). */
void svd_conn_close(struct svd_conn *c)
{
	if (c->w.fd < 0)
		return;
	sv_dbg("client pid %d gone", (int)c->pid);
	svd_engine_conn_gone(c);
	svd_capture_conn_gone(c);
	while (c->ctxs)
		svd_ctx_destroy(c->ctxs);
	svd_watch_del(&c->w);
	close(c->w.fd);
	c->w.fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		svd.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	svd.nconns--;
	svd_defer_free(c);
}

int svd_reply(struct svd_conn *c, const struct sv_msg_hdr *req, int status,
	      const void *payload, size_t len, const int *fds, int nfds)
{
	union {
		struct sv_msg_hdr hdr;
		char buf[SV_MSG_MAX];
	} m;
	int err;

	if (status)
		len = 0, nfds = 0;
	if (len > SV_MSG_MAX - sizeof(m.hdr))
		return -EINVAL;
	memset(&m.hdr, 0, sizeof(m.hdr));
	m.hdr.magic = SV_PROTO_MAGIC;
	m.hdr.version = SV_PROTO_VERSION;
	m.hdr.op = req->op;
	m.hdr.len = sizeof(m.hdr) + len;
	m.hdr.seq = req->seq;
	m.hdr.ufile = req->ufile;
	m.hdr.status = status;
	if (len)
		memcpy(m.buf + sizeof(m.hdr), payload, len);
	/* Never block on a client: one that does not read its replies is
	 * broken and loses its channel. */
	err = sv_send_msg(c->w.fd, m.buf, m.hdr.len, fds, nfds, 1);
	if (err) {
		sv_dbg("pid %d: reply failed: %s", (int)c->pid, strerror(-err));
		svd_conn_close(c);
	}
	return err;
}

static int op_hello(struct svd_req *r)
{
	struct sv_hello_rep *rep = r->rep;

	rep->instance = svd.instance;
	rep->daemon_pid = getpid();
	rep->proto_version = SV_PROTO_VERSION;
	snprintf(rep->version, sizeof(rep->version), "%s", SV_VERSION);
	r->rep_len = sizeof(*rep);
	return 0;
}

static int op_ping(struct svd_req *r)
{
	return 0;
}

static int op_device_info(struct svd_req *r)
{
	struct sv_device_info *rep = r->rep;

	snprintf(rep->name, sizeof(rep->name), "%s", svd.name);
	rep->node_guid = svd.node_guid;
	rep->num_ports = 1;
	r->rep_len = sizeof(*rep);
	return 0;
}

static int op_open_device(struct svd_req *r)
{
	struct sv_ctx_rep *rep = r->rep;
	struct svd_ufile *uf;
	struct svd_ctx *ctx;
	int cmd_fd, async_fd, err;

	err = svd_ufile_create(r->conn, &cmd_fd, &uf);
	if (err)
		return err;
	err = svd_ctx_create(r->conn, uf, 1, &async_fd, &ctx);
	if (err) {
		close(cmd_fd);
		svd_ufile_destroy(uf);
		return err;
	}
	rep->ufile = uf->id;
	rep->ctx = ctx->id;
	rep->instance = svd.instance;
	r->rep_len = sizeof(*rep);
	r->out_fds[0] = cmd_fd;
	r->out_fds[1] = async_fd;
	r->n_out_fds = 2;
	return 0;
}

/* IMPORT_DEVICE and ATTACH: possession of a copy of the cmd_fd proves
 * membership (docs/architecture.md "ufile and cmd_fd"). */
static int import_or_attach(struct svd_req *r, int want_async)
{
	struct sv_ctx_rep *rep = r->rep;
	struct svd_ufile *uf;
	struct svd_ctx *ctx;
	int async_fd = -1, err;

	if (r->nfds != 1)
		return -EINVAL;
	uf = svd_ufile_by_fd(r->fds[0]);
	if (!uf)
		return -EINVAL; /* not a softverbs cmd_fd */
	if (!want_async && r->hdr->ufile != uf->id)
		return -EINVAL;
	if (!want_async && svd_conn_view(r->conn, uf))
		goto done; /* already attached */
	err = svd_ctx_create(r->conn, uf, want_async, &async_fd, &ctx);
	if (err)
		return err;
	if (want_async) {
		rep->ctx = ctx->id;
		r->out_fds[0] = async_fd;
		r->n_out_fds = 1;
	}
done:
	rep->ufile = uf->id;
	rep->instance = svd.instance;
	r->rep_len = sizeof(*rep);
	return 0;
}

static int op_import_device(struct svd_req *r)
{
	return import_or_attach(r, 1);
}

static int op_attach(struct svd_req *r)
{
	return import_or_attach(r, 0);
}

static int op_close_context(struct svd_req *r)
{
	const struct sv_ctx_req *req = r->body;
	struct svd_ctx *ctx;

	for (ctx = r->conn->ctxs; ctx; ctx = ctx->next_in_conn)
		if (ctx->id == req->ctx && ctx->uf == r->uf && ctx->id)
			break;
	if (!ctx)
		return -EINVAL;
	svd_ctx_destroy(ctx);
	return 0;
}

static int op_query_device(struct svd_req *r)
{
	svd_query_device(r->rep);
	r->rep_len = sizeof(struct ibv_device_attr_ex);
	return 0;
}

static int op_query_port(struct svd_req *r)
{
	const struct sv_port_req *req = r->body;
	int err = svd_query_port(req->port, r->rep);

	if (!err)
		r->rep_len = sizeof(struct ibv_port_attr);
	return err;
}

static int op_query_gids(struct svd_req *r)
{
	const struct sv_port_req *req = r->body;
	int err = svd_query_gids(req->port, r->rep);

	if (!err)
		r->rep_len = sizeof(struct sv_gid_table);
	return err;
}

static int op_status(struct svd_req *r)
{
	struct sv_status_rep *rep = r->rep;

	rep->instance = svd.instance;
	rep->uptime_ms = svd_now_ms() - svd.start_ms;
	rep->pid = getpid();
	rep->clients = svd.nconns;
	rep->ufiles = svd.nufiles;
	rep->contexts = svd.nctxs;
	rep->objects = svd.nobjs;
	rep->open_fds = svd_count_fds();
	rep->requests = svd.requests;
	rep->bad_requests = svd.bad_requests;
	rep->busy_ns = svd.busy_ns;
	snprintf(rep->name, sizeof(rep->name), "%s", svd.name);
	{
		struct svd_gw_stats st;
		uint16_t port;

		svd_gw_status(&st, &rep->wire_err, &port, &rep->wire_block);
		rep->wire_port = port;
		rep->wire_rx_pkts = st.rx_pkts;
		rep->wire_rx_bytes = st.rx_bytes;
		rep->wire_rx_bad_icrc = st.rx_bad_icrc;
		rep->wire_rx_dropped = st.rx_malformed + st.rx_no_qp +
				       st.rx_ring_full + st.rx_not_peer +
				       st.rx_too_big;
		rep->wire_rx_no_qp = st.rx_no_qp;
		rep->wire_rx_not_peer = st.rx_not_peer;
		rep->wire_rx_too_big = st.rx_too_big;
		rep->wire_rx_ring_full = st.rx_ring_full;
		rep->wire_tx_pkts = st.tx_pkts;
		rep->wire_tx_bytes = st.tx_bytes;
		rep->wire_tx_errors = st.tx_errors;
	}
	{
		struct svd_cm_wire_stats cs;

		svd_cm_wire_stats(&cs);
		rep->cm_mads_tx = cs.tx;
		rep->cm_mads_rx = cs.rx;
		rep->cm_mads_tx_errors = cs.tx_errors;
		rep->cm_mads_dropped = cs.rx_dropped;
	}
	{
		struct svd_ibcm_stats is;

		svd_ibcm_stats(&is);
		rep->cm_conns = is.conns;
		rep->cm_half_open = is.half_open;
		rep->cm_rej_listener = is.rej_listener;
		rep->cm_rej_source = is.rej_source;
		rep->cm_expired = is.expired;
	}
	r->rep_len = sizeof(*rep);
	return 0;
}

static int op_shutdown(struct svd_req *r)
{
	svd.stopping = 1;
	return 0;
}

static const struct svd_op ops[SV_OP_MAX] = {
	[SV_OP_HELLO] = { op_hello, 0, 0 },
	[SV_OP_PING] = { op_ping, 0, 0 },
	[SV_OP_DEVICE_INFO] = { op_device_info, 0, 0 },
	[SV_OP_OPEN_DEVICE] = { op_open_device, 0, 0 },
	[SV_OP_IMPORT_DEVICE] = { op_import_device, 0, ONE_FD },
	[SV_OP_ATTACH] = { op_attach, 0, ONE_FD },
	[SV_OP_CLOSE_CONTEXT] = { op_close_context, sizeof(struct sv_ctx_req),
				  NEED_UFILE },
	[SV_OP_QUERY_DEVICE] = { op_query_device, 0, 0 },
	[SV_OP_QUERY_PORT] = { op_query_port, sizeof(struct sv_port_req), 0 },
	[SV_OP_QUERY_GIDS] = { op_query_gids, sizeof(struct sv_port_req), 0 },
	[SV_OP_STATUS] = { op_status, 0, 0 },
	[SV_OP_SHUTDOWN] = { op_shutdown, 0, 0 },
	SVD_OBJECT_OPS
};

/* Runs one well-framed request and replies.  Returns nonzero when the
 * connection was closed. */
static int dispatch(struct svd_conn *c, struct sv_msg_hdr *hdr, size_t n,
		    int *fds, int nfds)
{
	static union {
		char buf[SV_MSG_MAX];
		uint64_t align;
	} rep;
	struct svd_req r = { .conn = c,
			     .hdr = hdr,
			     .body = hdr + 1,
			     .len = n - sizeof(*hdr),
			     .fds = fds,
			     .nfds = nfds,
			     .rep = rep.buf };
	const struct svd_op *op = hdr->op < SV_OP_MAX ? &ops[hdr->op] : NULL;
	int status, closed;

	memset(rep.buf, 0, sizeof(rep.buf));
	svd.requests++;
	if (!op || !op->fn) {
		status = -EOPNOTSUPP;
		goto bad;
	}
	if ((op->flags & VAR_SIZE) ? r.len < op->size : r.len != op->size) {
		status = -EINVAL;
		goto bad;
	}
	if ((op->flags & ONE_FD) ? nfds != 1 :
				   nfds > ((op->flags & OPT_FD) ? 1 : 0)) {
		status = -EINVAL;
		goto bad;
	}
	if (op->flags & NEED_UFILE) {
		r.uf = svd_ufile_by_id(hdr->ufile);
		if (!r.uf) {
			status = -EIO; /* the ufile is gone */
			goto out;
		}
		r.view = svd_conn_view(c, r.uf);
		if (!r.view) {
			status = SV_ERR_NOT_ATTACHED;
			goto out;
		}
	}
	{
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		status = op->fn(&r);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		/* STATUS, which reads it, does not count itself. */
		if (hdr->op != SV_OP_STATUS)
			svd.busy_ns += (uint64_t)(t1.tv_sec - t0.tv_sec) *
					       1000000000ULL +
				       (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
	}
	goto out;
bad:
	svd.bad_requests++;
out:
	sv_close_fds(fds, nfds); /* ops keep what they need via dup/ownership */
	closed = svd_reply(c, hdr, status, rep.buf, status ? 0 : r.rep_len,
			   r.out_fds, r.n_out_fds) != 0;
	/* The client ends were sent (or not): the daemon keeps none. */
	sv_close_fds(r.out_fds, r.n_out_fds);
	return closed;
}

/* A client that keeps sending garbage must not fill the log: one line a
 * second at most, with the count of the others. */
static void warn_garbage(const struct svd_conn *c)
{
	static uint64_t last_ms;
	static unsigned suppressed;
	uint64_t now = svd_now_ms();

	if (last_ms && now - last_ms < 1000) {
		suppressed++;
		return;
	}
	if (suppressed)
		sv_warn("pid %d: garbage on the control channel (and %u more "
			"times since the last report)",
			(int)c->pid, suppressed);
	else
		sv_warn("pid %d: garbage on the control channel", (int)c->pid);
	last_ms = now;
	suppressed = 0;
}

void svd_conn_readable(struct svd_conn *c)
{
	static union {
		char buf[SV_MSG_MAX];
		struct sv_msg_hdr hdr;
	} m;
	int fds[SV_MAX_FDS];
	int nfds, budget;
	ssize_t n;

	/* A few messages per wakeup keeps one chatty client from starving the
	 * others. */
	for (budget = 16; budget > 0; budget--) {
		n = sv_recv_msg(c->w.fd, m.buf, sizeof(m.buf), fds, SV_MAX_FDS,
				&nfds);
		if (n == -EAGAIN)
			return;
		if (n == -EMSGSIZE) {
			/* Oversized: the header is there, answer it. */
			svd.bad_requests++;
			if (m.hdr.magic == SV_PROTO_MAGIC) {
				if (svd_reply(c, &m.hdr, -EMSGSIZE, NULL, 0,
					      NULL, 0))
					return;
				continue;
			}
			svd_conn_close(c);
			return;
		}
		if (n <= 0) {
			/* EOF, or an empty datagram (not our protocol: hang
			 * up), whose descriptors are not ours to keep. */
			sv_close_fds(fds, nfds);
			if (n == 0 && nfds)
				svd.bad_requests++;
			svd_conn_close(c);
			return;
		}
		if ((size_t)n < sizeof(m.hdr) || m.hdr.magic != SV_PROTO_MAGIC) {
			/* Not our protocol at all: hang up. */
			sv_close_fds(fds, nfds);
			svd.bad_requests++;
			warn_garbage(c);
			svd_conn_close(c);
			return;
		}
		if (m.hdr.version != SV_PROTO_VERSION || m.hdr.len != (size_t)n) {
			sv_close_fds(fds, nfds);
			svd.bad_requests++;
			if (svd_reply(c, &m.hdr,
				      m.hdr.version != SV_PROTO_VERSION ? -EPROTO :
									  -EINVAL,
				      NULL, 0, NULL, 0))
				return;
			continue;
		}
		if (dispatch(c, &m.hdr, n, fds, nfds))
			return;
		if (svd.stopping)
			return;
	}
}

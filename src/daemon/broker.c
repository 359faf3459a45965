/* SPDX-License-Identifier: MIT */
/*
 * The link broker: introduces engines to each other (docs/architecture.md
 * "Data path: the engine").  The daemon never carries data; it hands a
 * sender's ring memfd and doorbell to the receiving engine and answers
 * with the receiver's doorbell.  After that the two engines talk through shared memory only.
 *
 * An engine is a process's data path (one per process).  It attaches with
 * its doorbell eventfd and gets an engine socket: the daemon pushes
 * sv_engine_msg on it (new inbound links, dead peers).  EOF on the engine
 * socket means the process died (or detached its engine): the daemon
 * forgets the engine and tells every other engine, which fail their links
 * to it (error completions, never a hang).
 */
#include "svd_engine.h"
#include "svd_gw.h"
#include "svd_ops.h"
#include "svd_qp.h"
#include "sv_log.h"
#include "sv_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

struct svd_engine {
	struct svd_watch w; /* daemon end of the engine socket */
	uint32_t id;
	pid_t pid;
	int doorbell;
	struct svd_conn *conn; /* the process's channel */
	struct svd_engine *next;
};

static struct svd_engine *engines;
static uint32_t next_engine_id;

/* Until the QP objects exist (verbs side): no QP is known. */
__attribute__((weak)) struct svd_qp *svd_qp_by_qpn(uint32_t qpn)
{
	(void)qpn;
	return NULL;
}

/* ... nor any XRC SRQ. */
__attribute__((weak)) struct svd_srq *svd_xrc_srq(uint32_t srqn,
						  uint32_t *xrcd_id)
{
	(void)srqn;
	(void)xrcd_id;
	return NULL;
}

static struct svd_engine *engine_by_id(uint32_t id)
{
	for (struct svd_engine *e = engines; e; e = e->next)
		if (e->id == id)
			return e;
	return NULL;
}

static struct svd_engine *engine_by_pid(pid_t pid)
{
	for (struct svd_engine *e = engines; e; e = e->next)
		if (e->pid == pid)
			return e;
	return NULL;
}

static void engine_push(struct svd_engine *e, const struct sv_engine_msg *m,
			const int *fds, int nfds)
{
	int err = sv_send_msg(e->w.fd, m, sizeof(*m), fds, nfds, 1);

	if (err)
		sv_warn("engine %u (pid %d): push failed: %s", e->id,
			(int)e->pid, strerror(-err));
}

int svd_engine_fault_notify(pid_t pid)
{
	struct sv_engine_msg m = { .type = SV_ENGINE_FAULT };
	struct svd_engine *e = engine_by_pid(pid);

	if (!e)
		return -ESRCH;
	engine_push(e, &m, NULL, 0);
	return 0;
}

static void engine_destroy(struct svd_engine *e)
{
	struct sv_engine_msg m = { .type = SV_ENGINE_PEER_GONE,
				   .peer = e->id,
				   .peer_pid = (uint32_t)e->pid };
	struct svd_engine **pp;

	for (pp = &engines; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	svd_watch_del(&e->w);
	close(e->w.fd);
	e->w.fd = -1;
	close(e->doorbell);
	svd_gw_engine_gone(e->pid);
	sv_dbg("engine %u (pid %d) gone", e->id, (int)e->pid);
	for (struct svd_engine *o = engines; o; o = o->next)
		engine_push(o, &m, NULL, 0);
	svd_defer_free(e);
}

void svd_engine_readable(struct svd_engine *e)
{
	uint8_t buf[4 + SV_ENGINE_UP_MAX];
	int fds[SV_MAX_FDS], nfds;
	ssize_t n;

	for (int i = 0; i < 16; i++) {
		uint32_t type;

		n = sv_recv_msg(e->w.fd, buf, sizeof(buf), fds, SV_MAX_FDS,
				&nfds);
		if (n == -EAGAIN)
			return;
		/* Engines send only what the wire brought for QP1; anything
		 * else is dropped, an empty datagram and its descriptors
		 * included (as on a cmd_fd). */
		if (n > 4 && !nfds) {
			memcpy(&type, buf, 4);
			if (type == SV_ENGINE_UP_QP1)
				svd_gw_qp1_record(buf + 4, (size_t)n - 4);
			continue;
		}
		if (n > 0 || n == -EMSGSIZE || nfds) {
			sv_close_fds(fds, nfds);
			continue;
		}
		if (n == 0) {
			enum sv_sock_state st = sv_sock_hup(e->w.fd);

			if (st == SV_SOCK_OPEN)
				continue;
			if (st == SV_SOCK_RDHUP) {
				svd_watch_mod(&e->w, 0);
				return;
			}
		}
		engine_destroy(e);
		return;
	}
}

void svd_engine_conn_gone(struct svd_conn *c)
{
	struct svd_engine *e = engines, *next;

	for (; e; e = next) {
		next = e->next;
		if (e->conn == c)
			engine_destroy(e);
	}
}

void svd_engines_ufile_gone(uint32_t id)
{
	struct sv_engine_msg m = { .type = SV_ENGINE_UFILE_GONE, .peer = id };

	/* To all: which processes registered memory there is the engines'
	 * business, and a ufile's end is rare. */
	for (struct svd_engine *e = engines; e; e = e->next)
		engine_push(e, &m, NULL, 0);
}

void svd_engines_xrc_serve(uint32_t qpn, pid_t pid)
{
	struct sv_engine_msg m = { .type = SV_ENGINE_XRC_SERVE,
				   .peer = qpn,
				   .peer_pid = (uint32_t)pid };

	/* To all: any engine may have a link there (a QP of this host
	 * connected to it); a TGT QP changes hands rarely. */
	for (struct svd_engine *e = engines; e; e = e->next)
		engine_push(e, &m, NULL, 0);
}

int svd_engine_of_pid(pid_t pid)
{
	return engine_by_pid(pid) != NULL;
}

void svd_engine_xrc_event(pid_t pid, uint32_t qpn, uint32_t type)
{
	struct sv_engine_msg m = { .type = SV_ENGINE_XRC_EVENT,
				   .peer = qpn,
				   .peer_pid = type };
	struct svd_engine *e = engine_by_pid(pid);

	if (e)
		engine_push(e, &m, NULL, 0);
}

void svd_engines_close(void)
{
	while (engines)
		engine_destroy(engines);
}

int svd_op_engine_attach(struct svd_req *r)
{
	struct sv_engine_attach_rep *rep = r->rep;
	struct sv_gid_table gids;
	struct svd_engine *e, *old;
	int sv[2], ktfd, err;

	ktfd = svd_keytab_dup();
	if (ktfd < 0)
		return ktfd;
	e = calloc(1, sizeof(*e));
	if (!e) {
		err = -ENOMEM;
		goto err_kt;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		err = -errno;
		goto err_free;
	}
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
		err = -errno;
		goto err_close;
	}
	e->w.kind = SVD_W_ENGINE;
	e->w.fd = sv[0];
	e->pid = r->conn->pid;
	e->doorbell = r->fds[0];
	e->conn = r->conn;
	if (!++next_engine_id)
		++next_engine_id;
	e->id = next_engine_id;
	err = svd_watch_add(&e->w, EPOLLIN);
	if (err)
		goto err_close;
	/* One engine per process: a re-attach (after a detach the daemon has
	 * not noticed yet) replaces the old one. */
	old = engine_by_pid(e->pid);
	if (old)
		engine_destroy(old);
	r->fds[0] = -1;
	e->next = engines;
	engines = e;
	rep->engine_id = e->id;
	rep->kt_size = svd_keytab_size();
	if (!svd_query_gids(1, &gids))
		for (uint32_t i = 0; i < gids.count; i++)
			if (sv_gid_valid(&gids, i)) {
				memcpy(rep->gid, gids.entries[i].gid.raw, 16);
				break;
			}
	r->rep_len = sizeof(*rep);
	r->out_fds[0] = sv[1];
	r->out_fds[1] = ktfd;
	r->n_out_fds = 2;
	sv_dbg("engine %u attached by pid %d", e->id, (int)e->pid);
	return 0;

err_close:
	close(sv[0]);
	close(sv[1]);
err_free:
	free(e);
err_kt:
	close(ktfd);
	return err;
}

int svd_op_qpn_lookup(struct svd_req *r)
{
	const struct sv_qpn_req *req = r->body;
	struct sv_qpn_rep *rep = r->rep;
	struct svd_qp *qp;
	struct svd_engine *e;

	if (req->flags == SV_QPN_BY_PID) {
		/* The engine of an MR's owner (remote memory requests). */
		e = engine_by_pid((pid_t)req->qpn);
		if (!e || req->qpn == 0)
			return -ENOENT;
		rep->engine_id = e->id;
		rep->pid = (uint32_t)e->pid;
		rep->qp_type = 0;
		r->rep_len = sizeof(*rep);
		return 0;
	}
	if (req->qpn > 0xffffff || req->flags)
		return -EINVAL;
	qp = svd_qp_by_qpn(req->qpn);
	if (!qp)
		return -ENOENT;
	e = engine_by_pid(svd_qp_server(qp));
	if (!e)
		return -ENOENT;
	rep->engine_id = e->id;
	rep->pid = (uint32_t)e->pid;
	rep->qp_type = qp->qp_type;
	r->rep_len = sizeof(*rep);
	return 0;
}

/*
 * The regions of a QP, for an engine that executes on it directly: the
 * QP's own, its receive CQ's and its SRQ's, as dups (the reply closes
 * them; the objects keep theirs).  Any engine of the device may ask: QPNs
 * are device wide, and the regions say nothing a packet to that QP could
 * not learn.
 */
int svd_op_qp_peer(struct svd_req *r)
{
	const struct sv_qpn_req *req = r->body;
	struct sv_qp_peer_rep *rep = r->rep;
	struct svd_engine *e;
	struct svd_qp *qp;
	int n = 0;

	if (req->qpn > 0xffffff || req->flags)
		return -EINVAL;
	qp = svd_qp_by_qpn(req->qpn);
	/* An XRC TGT QP has no receive CQ or SRQ of its own: each request
	 * names its SRQ (SRQ_PEER). */
	if (!qp || (!qp->rcq && qp->qp_type != IBV_QPT_XRC_RECV))
		return -ENOENT;
	e = engine_by_pid(svd_qp_server(qp));
	r->out_fds[n++] = fcntl(qp->shm_fd, F_DUPFD_CLOEXEC, 0);
	if (qp->rcq)
		r->out_fds[n++] = fcntl(qp->rcq->shm_fd, F_DUPFD_CLOEXEC, 0);
	if (qp->srq)
		r->out_fds[n++] = fcntl(qp->srq->shm_fd, F_DUPFD_CLOEXEC, 0);
	r->n_out_fds = n;
	for (int i = 0; i < n; i++)
		if (r->out_fds[i] < 0)
			return -EMFILE; /* the reply path closes the others */
	rep->engine_id = e ? e->id : 0;
	rep->pid = (uint32_t)svd_qp_server(qp);
	rep->qp_type = qp->qp_type;
	rep->qp_cookie = qp->cookie;
	r->rep_len = sizeof(*rep);
	return 0;
}

/*
 * The regions of an XRC SRQ and its CQ, for an engine whose responder
 * takes a request an XRCETH sends there (as QP_PEER's), with what the
 * responder checks: the SRQ's domain against its TGT QP's, the keys
 * against the SRQ's PD.
 */
int svd_op_srq_peer(struct svd_req *r)
{
	const struct sv_qpn_req *req = r->body;
	struct sv_srq_peer_rep *rep = r->rep;
	struct svd_engine *e;
	struct svd_srq *srq;
	uint32_t xrcd_id = 0;

	if (req->qpn > 0xffffff || req->flags)
		return -EINVAL;
	srq = svd_xrc_srq(req->qpn, &xrcd_id);
	if (!srq)
		return -ENOENT;
	e = engine_by_pid(srq->obj.owner_pid);
	r->out_fds[0] = fcntl(srq->shm_fd, F_DUPFD_CLOEXEC, 0);
	r->out_fds[1] = fcntl(srq->cq->shm_fd, F_DUPFD_CLOEXEC, 0);
	r->n_out_fds = 2;
	if (r->out_fds[0] < 0 || r->out_fds[1] < 0)
		return -EMFILE; /* the reply path closes the other */
	rep->engine_id = e ? e->id : 0;
	rep->pid = (uint32_t)srq->obj.owner_pid;
	rep->xrcd_id = xrcd_id;
	rep->pd_id = srq->pd->pd_id;
	r->rep_len = sizeof(*rep);
	return 0;
}

/*
 * A ring is shared memory two processes map: if its creator could shrink
 * it afterwards, the receiver's next access would die of SIGBUS.  So only
 * a memfd sealed against shrinking (and growing: the size is part of the
 * contract), exactly as large as announced, is handed on.  The receiving
 * engine checks the same again, since it trusts nobody's word for it.
 */
int svd_check_ring_fd(int fd, uint64_t ring_size)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return -EINVAL; /* not a memfd */
	if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
	    (F_SEAL_SHRINK | F_SEAL_GROW))
		return -EINVAL;
	if ((uint64_t)st.st_size != ring_size)
		return -EINVAL;
	return 0;
}

int svd_op_link_connect(struct svd_req *r)
{
	const struct sv_link_req *req = r->body;
	struct sv_link_rep *rep = r->rep;
	struct svd_engine *from = engine_by_pid(r->conn->pid);
	struct svd_engine *to = engine_by_id(req->engine_id);
	struct sv_engine_msg m = { .type = SV_ENGINE_LINK_NEW };
	int fds[2], db, err;

	if (!from)
		return -ENOTCONN;
	if (!to)
		return -ENOENT;
	if (req->pad || req->ring_size < 8192 || req->ring_size > (1u << 30))
		return -EINVAL;
	err = svd_check_ring_fd(r->fds[0], req->ring_size);
	if (err)
		return err;
	db = fcntl(to->doorbell, F_DUPFD_CLOEXEC, 0);
	if (db < 0)
		return -errno;
	m.peer = from->id;
	m.peer_pid = (uint32_t)from->pid;
	m.ring_size = req->ring_size;
	fds[0] = r->fds[0];
	fds[1] = from->doorbell;
	err = sv_send_msg(to->w.fd, &m, sizeof(m), fds, 2, 1);
	if (err) {
		close(db);
		return err == -EAGAIN ? -EAGAIN : -ECONNRESET;
	}
	rep->engine_id = to->id;
	rep->pid = (uint32_t)to->pid;
	r->rep_len = sizeof(*rep);
	r->out_fds[0] = db;
	r->n_out_fds = 1;
	return 0;
}

/* The caller's engine joins the wire (gateway.c): its gateway ring, the
 * shared page, the port. */
int svd_op_wire_attach(struct svd_req *r)
{
	struct sv_wire_attach_rep *rep = r->rep;
	struct svd_engine *e = engine_by_pid(r->conn->pid);
	struct svd_gw_stats st;
	int fds[3] = { -1, -1, -1 }, n = 0, err;
	uint16_t port;

	if (!e)
		return -ENOTCONN;
	err = svd_gw_attach(e->pid, e->id, e->doorbell, fds, &rep->ring_size);
	if (fds[0] < 0)
		return err;
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			r->out_fds[n++] = fds[i];
	r->n_out_fds = n;
	if (fds[1] < 0)
		return -ENOMEM; /* the reply path closes what it holds */
	svd_gw_status(&st, &rep->wire_err, &port, NULL);
	rep->port = port;
	r->rep_len = sizeof(*rep);
	return 0;
}

/* An engine raises an async event on one of the process's contexts. */
int svd_op_async_event(struct svd_req *r)
{
	const struct sv_async_req *req = r->body;
	struct sv_async_msg m = { .event_type = req->event_type,
				  .element = req->element };

	if (req->event_type > IBV_EVENT_WQ_FATAL)
		return -EINVAL;
	for (struct svd_ctx *ctx = r->conn->ctxs; ctx; ctx = ctx->next_in_conn)
		if (ctx->uf == r->uf && ctx->id == req->ctx &&
		    ctx->async_fd >= 0)
			return sv_send_msg(ctx->async_fd, &m, sizeof(m), NULL,
					   0, 1);
	return -ENOENT;
}

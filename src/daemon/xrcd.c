/* SPDX-License-Identifier: MIT */
/*
 * XRC domains, XRC SRQs and the handles of XRC TGT QPs: what the kernel's
 * ib_uverbs keeps for the eXtended Reliable Connected transport
 * (uverbs_cmd.c: ib_uverbs_open_xrcd, create_srq with IB_SRQT_XRC,
 * create_qp with IB_QPT_XRC_TGT, ib_uverbs_open_qp; verbs.c: the shared
 * TGT QP).
 *
 * An XRC domain is a device object (struct svd_xrcd); every OPEN_XRCD
 * gives the ufile a handle to it (struct svd_uxrcd, type SVD_OBJ_XRCD).
 * A domain opened with a file is named by the file's inode, so two
 * processes opening the same file share it, as the kernel's inode table
 * makes them: the daemon keeps the first opener's descriptor, which pins
 * the inode (the kernel's igrab) so its number is not reused while the
 * domain lives.  Two counts, as the kernel's:
 *  - a handle's obj.usecnt: SRQs and TGT QPs made or opened through it;
 *    closing the handle answers -EBUSY while it is not 0
 *    (ib_uxrcd_object.refcnt);
 *  - the domain's opens and usecnt: handles, and SRQs and TGT QPs in it;
 *    closing the last handle answers -EBUSY while usecnt is not 0
 *    (ib_dealloc_xrcd_user).  At ufile teardown nothing can refuse: a
 *    domain left with users stays until the last of them goes.
 *
 * A TGT QP lives while any handle to it does (the kernel's
 * __ib_destroy_shared_qp): the creator's handle is the QP itself (in the
 * QPN table); OPEN_QP makes another struct svd_qp whose `real` names it.
 * When the creator's handle goes first the QP stays, an orphan of no
 * ufile, until the last opened handle goes.
 *
 * The QP's packets go to one process's engine (serve_pid): its
 * creator's, while that process holds a handle, then a process holding
 * an opened handle -- the kernel's QP lives in the device, and any
 * process of the domain can serve ours, since its state is in the QP's
 * region.  Every engine is told (SV_ENGINE_XRC_SERVE): the new server
 * adopts the QP through its handle and routes the answers from the
 * region's address vector, the others forget where the QP was.  The
 * server is told again when an opened handle modifies the QP (the
 * creator's modify routes in its own engine).
 *
 * XRC SRQ numbers are device wide, 24 bits, never 0, handed out round
 * robin like QPNs.
 */
#include "svd_engine.h"
#include "svd_gw.h"
#include "svd_qp.h"
#include "svd_ops.h"
#include "sv_log.h"
#include "sv_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct svd_xrcd {
	uint32_t id;	 /* device wide, never 0 */
	dev_t dev;	 /* the naming file's inode, when fd >= 0 */
	ino_t ino;
	int fd;		 /* pins that inode; -1: a private domain */
	uint32_t opens;	 /* handles to it */
	uint32_t usecnt; /* SRQs and TGT QPs in it */
	struct svd_xrcd *next;
};

struct svd_uxrcd {
	struct svd_obj obj; /* type SVD_OBJ_XRCD; usecnt: SRQs, TGT QPs */
	struct svd_xrcd *x;
};

static struct svd_xrcd *xrcds;
static uint32_t next_xrcd_id;

static struct svd_xrcd *xrcd_by_inode(dev_t dev, ino_t ino)
{
	struct svd_xrcd *x;

	for (x = xrcds; x; x = x->next)
		if (x->fd >= 0 && x->dev == dev && x->ino == ino)
			return x;
	return NULL;
}

/* Frees x once nothing holds it. */
static void xrcd_maybe_free(struct svd_xrcd *x)
{
	struct svd_xrcd **pp;

	if (x->opens || x->usecnt)
		return;
	for (pp = &xrcds; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	sv_dbg("xrcd %u: freed", x->id);
	if (x->fd >= 0)
		close(x->fd);
	free(x);
}

static void xrcd_put(struct svd_xrcd *x)
{
	if (x->usecnt)
		x->usecnt--;
	xrcd_maybe_free(x);
}

static struct svd_uxrcd *uxrcd_get(struct svd_ufile *uf, uint32_t handle)
{
	return (struct svd_uxrcd *)svd_handle_get(uf, handle, SVD_OBJ_XRCD);
}

static void uxrcd_destroy(struct svd_obj *obj)
{
	struct svd_uxrcd *ux = (struct svd_uxrcd *)obj;

	if (ux->x->opens)
		ux->x->opens--;
	xrcd_maybe_free(ux->x);
	free(ux);
}

static void uxrcd_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_uxrcd *ux = (const struct svd_uxrcd *)obj;

	e->type = SV_RES_XRCD;
	e->pd_handle = UINT32_MAX;
	e->lkey = ux->x->id;
	e->rkey = ux->x->opens;
	e->flags = ux->x->fd >= 0 ? 1u : 0;
}

int svd_op_open_xrcd(struct svd_req *r)
{
	const struct sv_open_xrcd_req *req = r->body;
	struct sv_xrcd_rep *rep = r->rep;
	struct svd_xrcd *x = NULL;
	struct svd_uxrcd *ux;
	struct stat st;
	int err, created = 0;

	if (req->has_fd > 1 || (int)req->has_fd != r->nfds)
		return -EINVAL;
	if (req->has_fd) {
		if (fstat(r->fds[0], &st) < 0)
			return -EBADF;
		x = xrcd_by_inode(st.st_dev, st.st_ino);
		if (!x && !(req->oflags & O_CREAT))
			return -EAGAIN; /* the kernel's answer: no such XRCD */
		if (x && (req->oflags & O_EXCL))
			return -EINVAL;
	}
	ux = calloc(1, sizeof(*ux));
	if (!ux)
		return -ENOMEM;
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x) {
			free(ux);
			return -ENOMEM;
		}
		if (!++next_xrcd_id)
			++next_xrcd_id;
		x->id = next_xrcd_id;
		x->fd = -1;
		created = 1;
	}
	ux->x = x;
	ux->obj.type = SVD_OBJ_XRCD;
	ux->obj.owner_pid = r->conn->pid;
	ux->obj.destroy = uxrcd_destroy;
	ux->obj.describe = uxrcd_describe;
	err = svd_handle_alloc(r->uf, &ux->obj);
	if (err) {
		if (created)
			free(x);
		free(ux);
		return err;
	}
	if (created) {
		if (req->has_fd) {
			x->dev = st.st_dev;
			x->ino = st.st_ino;
			x->fd = r->fds[0];
			r->fds[0] = -1; /* ours now: it pins the inode */
		}
		x->next = xrcds;
		xrcds = x;
	}
	x->opens++;
	rep->handle = ux->obj.handle;
	rep->xrcd_id = x->id;
	r->rep_len = sizeof(*rep);
	sv_dbg("ufile %#x xrcd#%u: xrcd %u (%s, %u opens)", r->uf->id,
	       ux->obj.handle, x->id, x->fd >= 0 ? "inode" : "private",
	       x->opens);
	return 0;
}

int svd_op_close_xrcd(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;
	struct svd_obj *o;
	struct svd_uxrcd *ux;
	int err = svd_handle_lookup(r->uf, req->handle, SVD_OBJ_XRCD, &o);

	if (err)
		return err;
	ux = (struct svd_uxrcd *)o;
	if (o->usecnt)
		return -EBUSY; /* SRQs or TGT QPs through this handle */
	if (ux->x->opens == 1 && ux->x->usecnt)
		return -EBUSY; /* the last handle of a domain still used */
	svd_handle_free(o);
	o->destroy(o);
	return 0;
}

/* ------------------------------------------------------------ SRQs -- */

/* XRC SRQs by number: a short list (at most max_srq), read on the
 * control path only. */
static struct svd_srq **srqn_tab;
static uint32_t srqn_n, srqn_cap, srqn_cursor;

static struct svd_srq *srq_by_srqn(uint32_t srqn)
{
	for (uint32_t i = 0; i < srqn_n; i++)
		if (srqn_tab[i]->srqn == srqn)
			return srqn_tab[i];
	return NULL;
}

static int srqn_alloc(struct svd_srq *srq)
{
	if (srqn_n == srqn_cap) {
		uint32_t cap = srqn_cap ? 2 * srqn_cap : 64;
		struct svd_srq **t = realloc(srqn_tab, cap * sizeof(*t));

		if (!t)
			return -ENOMEM;
		srqn_tab = t;
		srqn_cap = cap;
	}
	do
		srqn_cursor = (srqn_cursor + 1) & 0xffffff;
	while (!srqn_cursor || srq_by_srqn(srqn_cursor));
	srq->srqn = srqn_cursor;
	srqn_tab[srqn_n++] = srq;
	return 0;
}

static void srqn_free(struct svd_srq *srq)
{
	for (uint32_t i = 0; i < srqn_n; i++)
		if (srqn_tab[i] == srq) {
			srqn_tab[i] = srqn_tab[--srqn_n];
			return;
		}
}

struct svd_srq *svd_xrc_srq(uint32_t srqn, uint32_t *xrcd_id)
{
	struct svd_srq *srq = srqn ? srq_by_srqn(srqn) : NULL;

	if (srq)
		*xrcd_id = srq->uxrcd->x->id;
	return srq;
}

static void put(struct svd_obj *o)
{
	if (o && o->usecnt)
		o->usecnt--;
}

static void xsrq_destroy(struct svd_obj *obj)
{
	struct svd_srq *srq = (struct svd_srq *)obj;
	struct svd_xrcd *x = srq->uxrcd->x;

	/* Engines that mapped it for XRC requests (SRQ_PEER) stop using it
	 * (a later SRQ may take its number). */
	svd_region_mark_dead(srq->shm_fd);
	srqn_free(srq);
	put(&srq->pd->obj);
	put(&srq->cq->obj);
	put(&srq->uxrcd->obj);
	xrcd_put(x);
	close(srq->shm_fd);
	free(srq);
}

static void xsrq_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_srq *srq = (const struct svd_srq *)obj;

	e->type = SV_RES_SRQ;
	e->pd_handle = srq->pd->obj.handle;
	e->length = srq->max_wr;
	e->lkey = srq->srqn;
	e->rkey = srq->uxrcd->x->id;
	e->flags = 1; /* XRC */
}

int svd_op_create_xrc_srq(struct svd_req *r)
{
	const struct sv_create_xrc_srq_req *req = r->body;
	struct sv_xrc_srq_rep *rep = r->rep;
	struct svd_pd *pd = svd_pd_get(r->uf, req->pd_handle);
	struct svd_uxrcd *ux = uxrcd_get(r->uf, req->xrcd_handle);
	struct svd_obj *cq = svd_handle_get(r->uf, req->cq_handle, SVD_OBJ_CQ);
	struct svd_srq *srq;
	int err, fd;

	if (!pd || !ux || !cq || req->pad)
		return -EINVAL;
	if (!req->max_wr || req->max_wr > SV_MAX_SRQ_WR || !req->max_sge ||
	    req->max_sge > SV_MAX_SRQ_SGE)
		return -EINVAL;
	fd = svd_take_region_fd(r);
	if (fd < 0)
		return fd;
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		close(fd);
		return -ENOMEM;
	}
	srq->shm_fd = fd;
	srq->obj.type = SVD_OBJ_SRQ;
	srq->obj.owner_pid = r->conn->pid;
	srq->obj.destroy = xsrq_destroy;
	srq->obj.describe = xsrq_describe;
	srq->max_wr = req->max_wr;
	srq->max_sge = req->max_sge;
	err = srqn_alloc(srq);
	if (err)
		goto err_free;
	err = svd_handle_alloc(r->uf, &srq->obj);
	if (err)
		goto err_srqn;
	srq->pd = pd;
	pd->obj.usecnt++;
	srq->cq = (struct svd_cq *)cq;
	cq->usecnt++;
	srq->uxrcd = ux;
	ux->obj.usecnt++;
	ux->x->usecnt++;
	rep->handle = srq->obj.handle;
	rep->srqn = srq->srqn;
	r->rep_len = sizeof(*rep);
	sv_dbg("ufile %#x srq#%u: XRC srqn %#x in xrcd %u", r->uf->id,
	       srq->obj.handle, srq->srqn, ux->x->id);
	return 0;

err_srqn:
	srqn_free(srq);
err_free:
	close(fd);
	free(srq);
	return err;
}

/* --------------------------------------------------------- TGT QPs -- */

int svd_xrc_tgt_args(struct svd_ufile *uf, const struct sv_create_qp_req *req,
		     struct svd_uxrcd **ux)
{
	*ux = uxrcd_get(uf, req->pd_handle);
	if (!*ux || req->scq_handle != UINT32_MAX ||
	    req->rcq_handle != UINT32_MAX || req->srq_handle != UINT32_MAX)
		return -EINVAL;
	return 0;
}

void svd_xrc_tgt_made(struct svd_qp *qp)
{
	qp->xrcd = qp->uxrcd->x;
	qp->shares = 1;
	qp->serve_pid = qp->obj.owner_pid;
	qp->uxrcd->obj.usecnt++;
	qp->xrcd->usecnt++;
}

/* Nonzero when process pid holds a handle to TGT QP real other than
 * `going` (the creator's is real itself). */
static int pid_holds(const struct svd_qp *real, pid_t pid,
		     const struct svd_qp *going)
{
	if (real != going && !real->orphan && real->obj.owner_pid == pid)
		return 1;
	for (const struct svd_qp *h = real->opens; h; h = h->next_open)
		if (h != going && h->obj.owner_pid == pid)
			return 1;
	return 0;
}

/* Handle `going` of TGT QP real goes: while its server's process holds
 * another handle it stays the server (its engine moves the QP to that
 * handle), else the first process of the opened handles with an engine
 * takes over. */
static void reserve(struct svd_qp *real, const struct svd_qp *going)
{
	pid_t pid = 0;

	if (real->serve_pid && pid_holds(real, real->serve_pid, going))
		return;
	for (const struct svd_qp *h = real->opens; h && !pid; h = h->next_open)
		if (h != going && svd_engine_of_pid(h->obj.owner_pid))
			pid = h->obj.owner_pid;
	real->serve_pid = pid;
	if (pid)
		svd_gw_qp_add(real->qpn, pid);
	svd_engines_xrc_serve(real->qpn, pid);
	sv_dbg("TGT QP %#x: served by pid %d now", real->qpn, (int)pid);
}

void svd_xrc_tgt_modified(struct svd_qp *real)
{
	if (real->serve_pid)
		svd_engines_xrc_serve(real->qpn, real->serve_pid);
}

/* Nonzero when a handle of real before `h` (the creator's first, while
 * it lives, then the opened ones in list order) is process pid's. */
static int pid_seen(const struct svd_qp *real, const struct svd_qp *h,
		    pid_t pid)
{
	if (h != real && !real->orphan && real->obj.owner_pid == pid)
		return 1;
	for (const struct svd_qp *o = real->opens; o && o != h; o = o->next_open)
		if (o->obj.owner_pid == pid)
			return 1;
	return 0;
}

int svd_op_xrc_event(struct svd_req *r)
{
	const struct sv_xrc_event_req *req = r->body;
	struct svd_qp *real = svd_qp_by_qpn(req->qpn);
	pid_t me = r->conn->pid;

	switch (req->event_type) {
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		break;
	default:
		return -EINVAL;
	}
	/* (One from a server that has lost the QP since is dropped.) */
	if (!real || real->qp_type != IBV_QPT_XRC_RECV || real->real ||
	    real->serve_pid != me)
		return -EINVAL;
	if (!real->orphan && real->obj.owner_pid != me)
		svd_engine_xrc_event(real->obj.owner_pid, req->qpn,
				     req->event_type);
	for (const struct svd_qp *h = real->opens; h; h = h->next_open)
		if (h->obj.owner_pid != me && !pid_seen(real, h, h->obj.owner_pid))
			svd_engine_xrc_event(h->obj.owner_pid, req->qpn,
					     req->event_type);
	return 0;
}

int svd_xrc_tgt_gone(struct svd_qp *qp)
{
	if (qp->uxrcd) {
		put(&qp->uxrcd->obj);
		qp->uxrcd = NULL;
	}
	if (qp->shares && --qp->shares) {
		reserve(qp, qp);
		qp->orphan = 1; /* its own handle went first */
		return 1;
	}
	xrcd_put(qp->xrcd);
	return 0;
}

static void opened_destroy(struct svd_obj *obj)
{
	struct svd_qp *h = (struct svd_qp *)obj;
	struct svd_qp *real = h->real, **pp;

	put(&h->uxrcd->obj);
	if (real->shares)
		real->shares--;
	if (!real->shares && real->orphan) {
		real->obj.destroy(&real->obj); /* the last handle: the QP goes */
	} else {
		reserve(real, h);
		for (pp = &real->opens; *pp; pp = &(*pp)->next_open)
			if (*pp == h) {
				*pp = h->next_open;
				break;
			}
	}
	free(h);
}

static void opened_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_qp *h = (const struct svd_qp *)obj;

	e->type = SV_RES_QP;
	e->pd_handle = UINT32_MAX;
	e->lkey = h->real->qpn;
	e->access = IBV_QPT_XRC_RECV;
	e->iova = h->real->state;
	e->rkey = h->real->dest_qpn;
	e->flags = 4; /* a handle from ibv_open_qp */
}

int svd_op_open_qp(struct svd_req *r)
{
	const struct sv_open_qp_req *req = r->body;
	struct sv_qp_rep *rep = r->rep;
	struct svd_uxrcd *ux = uxrcd_get(r->uf, req->xrcd_handle);
	struct svd_qp *real = svd_qp_by_qpn(req->qpn), *h;
	int err, fd;

	if (!ux || req->pad || req->qp_type != IBV_QPT_XRC_RECV)
		return -EINVAL;
	if (!real || real->qp_type != IBV_QPT_XRC_RECV || real->xrcd != ux->x)
		return -EINVAL;
	fd = dup(real->shm_fd);
	if (fd < 0)
		return -errno;
	h = calloc(1, sizeof(*h));
	if (!h) {
		close(fd);
		return -ENOMEM;
	}
	h->obj.type = SVD_OBJ_QP;
	h->obj.owner_pid = r->conn->pid;
	h->obj.destroy = opened_destroy;
	h->obj.describe = opened_describe;
	h->qpn = real->qpn;
	h->qp_type = IBV_QPT_XRC_RECV;
	h->shm_fd = -1;
	h->real = real;
	err = svd_handle_alloc(r->uf, &h->obj);
	if (err) {
		close(fd);
		free(h);
		return err;
	}
	h->uxrcd = ux;
	ux->obj.usecnt++;
	real->shares++;
	h->next_open = real->opens;
	real->opens = h;
	rep->handle = h->obj.handle;
	rep->qpn = real->qpn;
	r->rep_len = sizeof(*rep);
	r->out_fds[r->n_out_fds++] = fd;
	sv_dbg("ufile %#x qp#%u: opened TGT QP %#x (%u handles)", r->uf->id,
	       h->obj.handle, real->qpn, real->shares);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs in the daemon: handles, the use counts a QP holds (PD, both
 * CQs, SRQ) and the device-wide QPN table.
 *
 * QPNs are 24 bits, device wide (every process and ufile draws from one
 * space, as on one HCA), never 0 or 1 (IBTA reserves them for SMI/GSI),
 * and handed out round robin so a number just freed is not reused at once:
 * a late packet for a destroyed QP must not reach its successor.
 */
#include "svd_qp.h"
#include "svd_ops.h"
#include "svd_gw.h"
#include "sv_portd.h"
#include "sv_log.h"
#include "sv_shm.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define QPN_MASK 0xffffffu
/* As many buckets as the device has QPs: chains of one on average, so a
 * lookup (every packet steering, every QPN_LOOKUP) costs the same with
 * 100 live QPs as with max_qp. */
#define QPN_BUCKETS ((uint32_t)SV_MAX_QP)

static struct svd_qp *qpn_hash[QPN_BUCKETS];
static struct svd_qp **qpn_next_link(struct svd_qp *qp);
static uint32_t qpn_cursor;

/* Chain links live beside the table, not in struct svd_qp, so the struct
 * stays what other files see. */
struct qpn_node {
	struct svd_qp qp;
	struct svd_qp *next;
};

static struct svd_qp **qpn_next_link(struct svd_qp *qp)
{
	return &((struct qpn_node *)qp)->next;
}

struct svd_qp *svd_qp_by_qpn(uint32_t qpn)
{
	struct svd_qp *qp = qpn_hash[qpn % QPN_BUCKETS];

	while (qp && qp->qpn != qpn)
		qp = *qpn_next_link(qp);
	return qp;
}

static int qpn_alloc(struct svd_qp *qp)
{
	uint32_t tries;

	uint32_t block = svd_gw_block();

	if (!qpn_cursor)
		qpn_cursor = (uint32_t)(svd.instance & 0xfff) + 0x10;
	for (tries = 0; tries < (block ? 0x10000u : QPN_MASK); tries++) {
		/* With a port service, only our block's QPNs reach us. */
		uint32_t qpn = block ? block << SV_PORTD_BLOCK_SHIFT |
					       (qpn_cursor++ & 0xffff) :
				       qpn_cursor++ & QPN_MASK;

		if (qpn < 2 || svd_qp_by_qpn(qpn))
			continue;
		qp->qpn = qpn;
		*qpn_next_link(qp) = qpn_hash[qpn % QPN_BUCKETS];
		qpn_hash[qpn % QPN_BUCKETS] = qp;
		return 0;
	}
	return -ENOMEM;
}

static void qpn_free(struct svd_qp *qp)
{
	struct svd_qp **pp = &qpn_hash[qp->qpn % QPN_BUCKETS];

	svd_gw_qp_del(qp->qpn);
	for (; *pp; pp = qpn_next_link(*pp))
		if (*pp == qp) {
			*pp = *qpn_next_link(qp);
			return;
		}
}

static void put(struct svd_obj *o)
{
	if (o && o->usecnt)
		o->usecnt--;
}

void svd_region_mark_dead(int fd)
{
	struct sv_shm_hdr *h = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				    MAP_SHARED, fd, 0);

	if (h == MAP_FAILED)
		return;
	atomic_store_explicit(&h->dead, 1, memory_order_release);
	munmap(h, 4096);
}

static void qp_destroy(struct svd_obj *obj)
{
	struct svd_qp *qp = (struct svd_qp *)obj;

	if (qp->qp_type == IBV_QPT_XRC_RECV && svd_xrc_tgt_gone(qp))
		return; /* ibv_open_qp handles hold it (xrcd.c) */
	svd_mcast_qp_gone(qp);
	qpn_free(qp);
	put(qp->pd ? &qp->pd->obj : NULL);
	put(qp->scq ? &qp->scq->obj : NULL);
	put(qp->rcq ? &qp->rcq->obj : NULL);
	put(qp->srq ? &qp->srq->obj : NULL);
	svd_region_mark_dead(qp->shm_fd);
	close(qp->shm_fd);
	free((struct qpn_node *)qp);
}

static void qp_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_qp *qp = (const struct svd_qp *)obj;

	e->type = SV_RES_QP;
	e->pd_handle = qp->pd ? qp->pd->obj.handle : UINT32_MAX;
	/* lkey: the QPN; access: the type; iova: the state; rkey: dest QPN. */
	e->lkey = qp->qpn;
	e->rkey = qp->dest_qpn;
	e->access = qp->qp_type;
	e->iova = qp->state;
	e->flags = (qp->srq ? 1u : 0) | (qp->last_err.status ? 2u : 0);
}

int svd_op_create_qp(struct svd_req *r)
{
	const struct sv_create_qp_req *req = r->body;
	struct sv_qp_rep *rep = r->rep;
	struct svd_obj *scq, *rcq, *srq = NULL;
	struct qpn_node *n;
	struct svd_uxrcd *ux = NULL;
	struct svd_qp *qp;
	struct svd_pd *pd;
	int err, fd;

	if (req->pad || !req->cookie)
		return -EINVAL;
	if (req->qp_type != IBV_QPT_RC && req->qp_type != IBV_QPT_UC &&
	    req->qp_type != IBV_QPT_UD && req->qp_type != IBV_QPT_XRC_SEND &&
	    req->qp_type != IBV_QPT_XRC_RECV)
		return -EOPNOTSUPP;
	if (req->qp_type == IBV_QPT_XRC_RECV) {
		/* No PD, CQs or SRQ: the domain pd_handle names (xrcd.c). */
		err = svd_xrc_tgt_args(r->uf, req, &ux);
		if (err)
			return err;
		pd = NULL;
		scq = rcq = NULL;
	} else {
		pd = svd_pd_get(r->uf, req->pd_handle);
		scq = svd_handle_get(r->uf, req->scq_handle, SVD_OBJ_CQ);
		/* An XRC INI QP sends only: no receive CQ, no SRQ. */
		rcq = req->qp_type == IBV_QPT_XRC_SEND &&
				      req->rcq_handle == UINT32_MAX ?
			      scq :
			      svd_handle_get(r->uf, req->rcq_handle, SVD_OBJ_CQ);
		if (req->srq_handle != UINT32_MAX) {
			srq = svd_handle_get(r->uf, req->srq_handle,
					     SVD_OBJ_SRQ);
			if (!srq || req->qp_type == IBV_QPT_XRC_SEND ||
			    ((struct svd_srq *)srq)->srqn)
				return -EINVAL;
		}
		if (!pd || !scq || !rcq)
			return -EINVAL;
	}
	if (req->max_send_wr > SV_MAX_QP_WR || req->max_recv_wr > SV_MAX_QP_WR)
		return -EINVAL;
	fd = svd_take_region_fd(r);
	if (fd < 0)
		return fd;
	n = calloc(1, sizeof(*n));
	if (!n) {
		close(fd);
		return -ENOMEM;
	}
	qp = &n->qp;
	qp->shm_fd = fd;
	qp->cookie = req->cookie;
	qp->obj.type = SVD_OBJ_QP;
	qp->obj.owner_pid = r->conn->pid;
	qp->obj.destroy = qp_destroy;
	qp->obj.describe = qp_describe;
	qp->qp_type = req->qp_type;
	qp->state = IBV_QPS_RESET;
	err = qpn_alloc(qp);
	if (err)
		goto err_free;
	err = svd_handle_alloc(r->uf, &qp->obj);
	if (err)
		goto err_qpn;
	if (ux) {
		qp->uxrcd = ux;
		svd_xrc_tgt_made(qp);
	} else {
		qp->pd = pd;
		pd->obj.usecnt++;
		qp->scq = (struct svd_cq *)scq;
		scq->usecnt++;
		qp->rcq = (struct svd_cq *)rcq;
		rcq->usecnt++;
	}
	if (srq) {
		qp->srq = (struct svd_srq *)srq;
		srq->usecnt++;
	}
	rep->handle = qp->obj.handle;
	rep->qpn = qp->qpn;
	svd_gw_qp_add(qp->qpn, qp->obj.owner_pid);
	r->rep_len = sizeof(*rep);
	sv_dbg("ufile %#x qp#%u: qpn %#x type %u pid %d", r->uf->id,
	       qp->obj.handle, qp->qpn, qp->qp_type, (int)r->conn->pid);
	return 0;

err_qpn:
	qpn_free(qp);
err_free:
	close(fd);
	free(n);
	return err;
}

int svd_op_modify_qp(struct svd_req *r)
{
	const struct sv_modify_qp_req *req = r->body;
	struct svd_obj *o = svd_handle_get(r->uf, req->handle, SVD_OBJ_QP);
	struct svd_qp *qp;

	if (!o)
		return svd_lookup_err(r->uf, req->handle);
	if (req->state > IBV_QPS_ERR || req->dest_qpn > QPN_MASK)
		return -EINVAL;
	qp = (struct svd_qp *)o;
	if (qp->real)
		qp = qp->real; /* a handle from ibv_open_qp */
	qp->state = req->state;
	qp->dest_qpn = req->dest_qpn;
	qp->qkey = req->qkey;
	if (qp != (struct svd_qp *)o)
		svd_xrc_tgt_modified(qp);
	return 0;
}

int svd_op_destroy_qp(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;
	struct svd_obj *o = svd_handle_get(r->uf, req->handle, SVD_OBJ_QP);

	if (!o)
		return svd_lookup_err(r->uf, req->handle);
	if (((struct svd_qp *)o)->mcast)
		return -EBUSY; /* ib_uverbs: detach its groups first */
	sv_dbg("ufile %#x qp#%u: destroyed (qpn %#x)", r->uf->id, o->handle,
	       ((struct svd_qp *)o)->qpn);
	svd_handle_free(o);
	o->destroy(o);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Shared receive queues in the daemon: a handle on a PD (one use count on
 * it) with a use count of its own for the QPs attached to it.
 */
#include "svd_qp.h"
#include "svd_ops.h"
#include "sv_log.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static void srq_destroy(struct svd_obj *obj)
{
	struct svd_srq *srq = (struct svd_srq *)obj;

	if (srq->pd && srq->pd->obj.usecnt)
		srq->pd->obj.usecnt--;
	close(srq->shm_fd);
	free(srq);
}

static void srq_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_srq *srq = (const struct svd_srq *)obj;

	e->type = SV_RES_SRQ;
	e->pd_handle = srq->pd ? srq->pd->obj.handle : UINT32_MAX;
	e->length = srq->max_wr;
}

int svd_op_create_srq(struct svd_req *r)
{
	const struct sv_create_srq_req *req = r->body;
	struct sv_obj_rep *rep = r->rep;
	struct svd_pd *pd;
	struct svd_srq *srq;
	int err, fd;

	pd = svd_pd_get(r->uf, req->pd_handle);
	if (!pd)
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
	srq->obj.destroy = srq_destroy;
	srq->obj.describe = srq_describe;
	srq->max_wr = req->max_wr;
	srq->max_sge = req->max_sge;
	err = svd_handle_alloc(r->uf, &srq->obj);
	if (err) {
		close(fd);
		free(srq);
		return err;
	}
	srq->pd = pd;
	pd->obj.usecnt++;
	rep->handle = srq->obj.handle;
	r->rep_len = sizeof(*rep);
	return 0;
}

int svd_op_modify_srq(struct svd_req *r)
{
	const struct sv_create_srq_req *req = r->body;
	struct svd_obj *o = svd_handle_get(r->uf, req->handle, SVD_OBJ_SRQ);

	if (!o)
		return svd_lookup_err(r->uf, req->handle);
	if (!req->max_wr || req->max_wr > SV_MAX_SRQ_WR)
		return -EINVAL;
	((struct svd_srq *)o)->max_wr = req->max_wr;
	return 0;
}

int svd_op_destroy_srq(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;

	return svd_destroy_unused(r->uf, req->handle, SVD_OBJ_SRQ);
}

/* SPDX-License-Identifier: MIT */
/*
 * Protection domains.  A PD is only a handle and a use count: every MR, MW,
 * QP, SRQ and AH on it holds one, and an explicit dealloc of a PD still in
 * use answers -EBUSY (the kernel's uverbs_free_pd).  At ufile teardown the
 * dependents go first (svd_ufile_destroy), so the count never blocks it.
 */
#include "svd_mr.h"
#include "svd_ops.h"
#include "sv_log.h"

#include <errno.h>
#include <stdlib.h>

static void pd_destroy(struct svd_obj *obj)
{
	free(obj);
}

static void pd_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	(void)obj;
	e->type = SV_RES_PD;
	e->pd_handle = UINT32_MAX;
}

struct svd_pd *svd_pd_get(struct svd_ufile *uf, uint32_t handle)
{
	struct svd_obj *o = svd_handle_get(uf, handle, SVD_OBJ_PD);

	return o ? (struct svd_pd *)o : NULL;
}

/* Device-wide PD ids: the engines compare them (key table pd_id against
 * the QP's) where handles, being per ufile, would not do. */
static uint32_t next_pd_id;

int svd_op_alloc_pd(struct svd_req *r)
{
	struct sv_pd_rep *rep = r->rep;
	struct svd_pd *pd = calloc(1, sizeof(*pd));
	int err;

	if (!pd)
		return -ENOMEM;
	pd->obj.type = SVD_OBJ_PD;
	pd->obj.owner_pid = r->conn->pid;
	pd->obj.destroy = pd_destroy;
	pd->obj.describe = pd_describe;
	err = svd_handle_alloc(r->uf, &pd->obj);
	if (err) {
		free(pd);
		return err;
	}
	if (!++next_pd_id)
		++next_pd_id;
	pd->pd_id = next_pd_id;
	rep->handle = pd->obj.handle;
	rep->pd_id = pd->pd_id;
	r->rep_len = sizeof(*rep);
	sv_dbg("ufile %#x pd#%u: allocated by pid %d", r->uf->id,
	       pd->obj.handle, (int)r->conn->pid);
	return 0;
}

int svd_op_dealloc_pd(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;
	struct svd_pd *pd = svd_pd_get(r->uf, req->handle);

	if (!pd)
		return svd_lookup_err(r->uf, req->handle);
	if (pd->obj.usecnt)
		return -EBUSY;
	sv_dbg("ufile %#x pd#%u: deallocated", r->uf->id, pd->obj.handle);
	svd_handle_free(&pd->obj);
	pd->obj.destroy(&pd->obj);
	return 0;
}

int svd_op_import_pd(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;
	struct sv_pd_rep *rep = r->rep;
	struct svd_pd *pd = svd_pd_get(r->uf, req->handle);

	if (!pd)
		return svd_lookup_err(r->uf, req->handle);
	rep->handle = pd->obj.handle;
	rep->pd_id = pd->pd_id;
	r->rep_len = sizeof(*rep);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Address handles in the daemon: only a handle and a PD use count (the
 * address itself is resolved and kept by the library, as a provider's AH).
 */
#include "svd_qp.h"
#include "svd_ops.h"

#include <errno.h>
#include <stdlib.h>

static void ah_destroy(struct svd_obj *obj)
{
	struct svd_ah *ah = (struct svd_ah *)obj;

	if (ah->pd && ah->pd->obj.usecnt)
		ah->pd->obj.usecnt--;
	free(ah);
}

static void ah_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_ah *ah = (const struct svd_ah *)obj;

	e->type = SV_RES_AH;
	e->pd_handle = ah->pd ? ah->pd->obj.handle : UINT32_MAX;
}

int svd_op_create_ah(struct svd_req *r)
{
	const struct sv_create_ah_req *req = r->body;
	struct sv_obj_rep *rep = r->rep;
	struct svd_pd *pd = svd_pd_get(r->uf, req->pd_handle);
	struct svd_ah *ah;
	int err;

	if (!pd || req->pad)
		return -EINVAL;
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return -ENOMEM;
	ah->obj.type = SVD_OBJ_AH;
	ah->obj.owner_pid = r->conn->pid;
	ah->obj.destroy = ah_destroy;
	ah->obj.describe = ah_describe;
	err = svd_handle_alloc(r->uf, &ah->obj);
	if (err) {
		free(ah);
		return err;
	}
	ah->pd = pd;
	pd->obj.usecnt++;
	rep->handle = ah->obj.handle;
	r->rep_len = sizeof(*rep);
	return 0;
}

int svd_op_destroy_ah(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;
	struct svd_obj *o = svd_handle_get(r->uf, req->handle, SVD_OBJ_AH);

	if (!o)
		return svd_lookup_err(r->uf, req->handle);
	svd_handle_free(o);
	o->destroy(o);
	return 0;
}

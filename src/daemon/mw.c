/* SPDX-License-Identifier: MIT */
/*
 * Memory windows in the daemon: a handle, a PD use count and an rkey in
 * the device-wide key space.  What a window is bound to lives in the key
 * table (svd_mw_key_alloc / svd_mw_key_free, the engine's side); binding
 * and invalidation happen on the data path.
 */
#include "svd_qp.h"
#include "svd_ops.h"

#include <errno.h>
#include <stdlib.h>

/*
 * Fallback keys until the key table knows windows: index above every MR
 * index (SV_MAX_MR), so a window key never names an MR.  Marked weak: the
 * key table's real functions replace these.
 */
static uint32_t fallback_next;

__attribute__((weak)) int svd_mw_key_alloc(struct svd_mw *mw)
{
	uint32_t idx = SV_MAX_MR + 1 + (fallback_next++ % 0xfff000u);

	mw->rkey = idx << 8 | (uint8_t)(svd.instance + fallback_next);
	return 0;
}

__attribute__((weak)) void svd_mw_key_free(struct svd_mw *mw)
{
	(void)mw;
}

static void mw_destroy(struct svd_obj *obj)
{
	struct svd_mw *mw = (struct svd_mw *)obj;

	svd_mw_key_free(mw);
	if (mw->pd && mw->pd->obj.usecnt)
		mw->pd->obj.usecnt--;
	free(mw);
}

static void mw_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_mw *mw = (const struct svd_mw *)obj;

	e->type = SV_RES_MW;
	e->rkey = mw->rkey;
	e->pd_handle = mw->pd ? mw->pd->obj.handle : UINT32_MAX;
	e->flags = mw->mw_type;
}

int svd_op_alloc_mw(struct svd_req *r)
{
	const struct sv_alloc_mw_req *req = r->body;
	struct sv_mw_rep *rep = r->rep;
	struct svd_pd *pd = svd_pd_get(r->uf, req->pd_handle);
	struct svd_mw *mw;
	int err;

	if (!pd)
		return -EINVAL;
	if (req->type != IBV_MW_TYPE_1 && req->type != IBV_MW_TYPE_2)
		return -EINVAL;
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return -ENOMEM;
	mw->obj.type = SVD_OBJ_MW;
	mw->obj.owner_pid = r->conn->pid;
	mw->obj.destroy = mw_destroy;
	mw->obj.describe = mw_describe;
	mw->mw_type = req->type;
	mw->pd = pd;
	err = svd_mw_key_alloc(mw);
	if (err)
		goto err_free;
	err = svd_handle_alloc(r->uf, &mw->obj);
	if (err)
		goto err_key;
	pd->obj.usecnt++;
	rep->handle = mw->obj.handle;
	rep->rkey = mw->rkey;
	r->rep_len = sizeof(*rep);
	return 0;

err_key:
	svd_mw_key_free(mw);
err_free:
	free(mw);
	return err;
}

int svd_op_dealloc_mw(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;
	struct svd_obj *o = svd_handle_get(r->uf, req->handle, SVD_OBJ_MW);

	if (!o)
		return svd_lookup_err(r->uf, req->handle);
	svd_handle_free(o);
	o->destroy(o);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * RES_LIST: the live ufiles and objects, for `softverbs res show` (the
 * kernel's rdma netlink resource dump).  Read-only; any channel of our uid
 * may list everything, as every process of the user shares the device.
 *
 * Paging: rows are ordered by ufile slot, then row index within the ufile:
 * row 0 is the ufile itself, row h + 1 the object with handle h.  The
 * cursor (cursor_ufile, cursor_handle) names the row to resume at; a ufile
 * that went away or was replaced between pages is simply resumed at the
 * start of its slot, so a listing never fails because things changed.
 */
#include "svd_int.h"
#include "svd_ops.h"
#include "svd_qp.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define UFILE_SLOT(id) ((id) & 0xffffu)

static uint32_t res_type(enum svd_obj_type t)
{
	switch (t) {
	case SVD_OBJ_PD: return SV_RES_PD;
	case SVD_OBJ_MR: return SV_RES_MR;
	case SVD_OBJ_DM: return SV_RES_DM;
	case SVD_OBJ_MW: return SV_RES_MW;
	case SVD_OBJ_CQ: return SV_RES_CQ;
	case SVD_OBJ_QP: return SV_RES_QP;
	case SVD_OBJ_SRQ: return SV_RES_SRQ;
	case SVD_OBJ_AH: return SV_RES_AH;
	case SVD_OBJ_XRCD: return SV_RES_XRCD;
	case SVD_OBJ_NTYPES: break;
	}
	return 0;
}

static void ufile_row(const struct svd_ufile *uf, struct sv_res_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->type = SV_RES_UFILE;
	e->ufile = uf->id;
	e->owner_pid = uf->creator_pid;
	e->pd_handle = UINT32_MAX;
	e->usecnt = uf->nobjs;
}

static void obj_row(const struct svd_obj *o, struct sv_res_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->type = res_type(o->type);
	e->pd_handle = UINT32_MAX;
	if (o->describe)
		o->describe(o, e);
	e->ufile = o->uf->id;
	e->handle = o->handle;
	e->owner_pid = o->owner_pid;
	e->usecnt = o->usecnt;
}

/*
 * SV_OP_RES_LIST: sv_res_req -> sv_res_rep holding .count entries (the
 * reply is cut after the last one).  -EINVAL for an unknown type, a
 * non-zero pad or a cursor out of range.
 */
int svd_op_res_list(struct svd_req *r)
{
	const struct sv_res_req *req = r->body;
	struct sv_res_rep *rep = r->rep;
	uint32_t slot = UFILE_SLOT(req->cursor_ufile);
	uint32_t row = req->cursor_handle;

	if (req->type == SV_RES_CM_ID && !req->pad)
		return svd_cm_res_list(r);
	if (req->pad || (req->type > SV_RES_AH && req->type != SV_RES_XRCD) ||
	    slot >= SV_MAX_UFILES ||
	    row > SV_MAX_HANDLES || (req->cursor_ufile >> 16 && !slot))
		return -EINVAL;
	if (!slot)
		slot = 1, row = 0;
	for (; slot < SV_MAX_UFILES; slot++, row = 0) {
		const struct svd_ufile *uf = svd.ufiles[slot];

		if (!uf)
			continue;
		if (uf->id != req->cursor_ufile)
			row = 0; /* not the ufile the cursor was made on */
		for (; row <= uf->handles_cap; row++) {
			struct sv_res_entry e;

			if (row == 0) {
				if (req->type && req->type != SV_RES_UFILE)
					continue;
				ufile_row(uf, &e);
			} else {
				const struct svd_obj *o = uf->handles[row - 1];

				if (!o || (req->type && res_type(o->type) != req->type))
					continue;
				obj_row(o, &e);
			}
			if (rep->count == SV_RES_PER_MSG) {
				rep->more = 1;
				rep->next_ufile = uf->id;
				rep->next_handle = row;
				goto done;
			}
			rep->e[rep->count++] = e;
		}
	}
done:
	r->rep_len = offsetof(struct sv_res_rep, e) +
		     rep->count * sizeof(struct sv_res_entry);
	return 0;
}

/* SV_OP_QP_ERR_SET: the caller's QP's last error completion (its
 * checker's diagnosis in diag).  The lookup's error for a bad handle. */
int svd_op_qp_err_set(struct svd_req *r)
{
	const struct sv_qp_err *req = r->body;
	struct svd_obj *o;
	struct svd_qp *qp;
	int err = svd_handle_lookup(r->uf, req->handle, SVD_OBJ_QP, &o);

	if (err)
		return err;
	if (!req->status)
		return -EINVAL;
	qp = (struct svd_qp *)o;
	qp->last_err = *req;
	qp->last_err.diag[SV_QP_ERR_DIAG - 1] = 0;
	return 0;
}

/* SV_OP_QP_ERR_GET: the last error completion of the QP of a res row;
 * -ENOENT when the row is no QP or it has none. */
int svd_op_qp_err_get(struct svd_req *r)
{
	const struct sv_qp_err_get_req *req = r->body;
	uint32_t slot = UFILE_SLOT(req->ufile);
	const struct svd_ufile *uf;
	const struct svd_qp *qp;

	if (!slot || slot >= SV_MAX_UFILES)
		return -EINVAL;
	uf = svd.ufiles[slot];
	if (!uf || uf->id != req->ufile || req->handle >= uf->handles_cap)
		return -ENOENT;
	qp = (const struct svd_qp *)uf->handles[req->handle];
	if (!qp || qp->obj.type != SVD_OBJ_QP || !qp->last_err.status)
		return -ENOENT;
	memcpy(r->rep, &qp->last_err, sizeof(qp->last_err));
	r->rep_len = sizeof(qp->last_err);
	return 0;
}

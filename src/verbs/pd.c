/* SPDX-License-Identifier: MIT */
/*
 * Protection domains: allocate, deallocate, import, unimport.  The daemon
 * keeps the PD and its use count; the library keeps a handle.
 */
#include "verbs_int.h"

#include <stdlib.h>

static struct ibv_pd *new_pd(struct ibv_context *ctx, uint32_t handle,
			     uint32_t pd_id, int imported)
{
	struct sv_pd *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pd.context = ctx;
	p->pd.handle = handle;
	p->imported = imported;
	p->pd_id = pd_id;
	return &p->pd;
}

/* Returns a PD, or NULL with errno (EIO: the device is gone). */
SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct sv_pd_rep rep;
	struct sv_handle_req undo;
	struct ibv_pd *pd;
	int err;

	if (!ctx)
		return sv_null_errno(-EINVAL);
	err = sv_ctx_call_simple(ctx, SV_OP_ALLOC_PD, NULL, 0, &rep, sizeof(rep));
	if (err)
		return sv_null_errno(err);
	pd = new_pd(ctx, rep.handle, rep.pd_id, 0);
	if (!pd) {
		undo = (struct sv_handle_req){ .handle = rep.handle };
		sv_ctx_call_simple(ctx, SV_OP_DEALLOC_PD, &undo, sizeof(undo),
				   NULL, 0);
		return sv_null_errno(-ENOMEM);
	}
	return pd;
}

/*
 * Destroys the PD for every context of the ufile (imported views too).
 * Returns 0, EBUSY while MRs, MWs, QPs, SRQs or AHs use it, ENOENT/EINVAL
 * when the handle no longer names a PD (destroyed through another view):
 * then pd stays allocated and only ibv_unimport_pd frees it.
 */
SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct sv_handle_req req = { .handle = pd->handle };
	int err;

	err = sv_ctx_call_simple(pd->context, SV_OP_DEALLOC_PD, &req,
				 sizeof(req), NULL, 0);
	if (err) {
		errno = -err;
		return -err;
	}
	free(to_svpd(pd));
	return 0;
}

/* A view of a PD another context of the same ufile made.  NULL with errno
 * ENOENT (no such object) or EINVAL (the handle is not a PD). */
SV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *ctx,
				       uint32_t pd_handle)
{
	struct sv_handle_req req = { .handle = pd_handle };
	struct sv_pd_rep rep;
	struct ibv_pd *pd;
	int err;

	if (!ctx)
		return sv_null_errno(-EINVAL);
	err = sv_ctx_call_simple(ctx, SV_OP_IMPORT_PD, &req, sizeof(req), &rep,
				 sizeof(rep));
	if (err)
		return sv_null_errno(err);
	pd = new_pd(ctx, pd_handle, rep.pd_id, 1);
	return pd ? pd : sv_null_errno(-ENOMEM);
}

/* Frees this view only; the PD lives on (no daemon call, as the kernel). */
SV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	if (pd)
		free(to_svpd(pd));
}

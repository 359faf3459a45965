/* SPDX-License-Identifier: MIT */
/*
 * Protection domains: allocate, deallocate, import, unimport; thread
 * domains and parent domains, which live in the library only (as in
 * mlx5's).  The daemon keeps the PD and its use count; the library keeps
 * a handle.
 */
#include "verbs_int.h"
#include "check.h"

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
	SV_CHECK(sv_check_obj(SV_CK_PD, &p->pd, 1, NULL));
	return &p->pd;
}

/* Returns a PD, or NULL with errno (EIO: the device is gone). */
SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct sv_pd_rep rep;
	struct sv_handle_req undo;
	struct ibv_pd *pd;
	int err;

	if (!ctx || sv_fault_verb(SV_FV_ALLOC_PD)) /* docs/faults.md */
		return ctx ? NULL : sv_null_errno(-EINVAL);
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
 * Returns 0, EBUSY while MRs, MWs, QPs, SRQs or AHs use it (or parent
 * domains stand for it; a parent domain: while CQs, QPs or SRQs made on
 * it are left, and only the parent domain goes), ENOENT/EINVAL
 * when the handle no longer names a PD (destroyed through another view):
 * then pd stays allocated and only ibv_unimport_pd frees it.
 */
SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct sv_handle_req req = { .handle = pd->handle };
	struct sv_pd *p = to_svpd(pd);
	int err;

	SV_CHECK(sv_check_destroy(SV_CK_PD, pd));
	if (atomic_load(&p->uses)) {
		errno = EBUSY;
		return EBUSY;
	}
	if (p->protection) { /* a parent domain: nothing in the daemon */
		atomic_fetch_sub(&p->protection->uses, 1);
		if (p->td)
			atomic_fetch_sub(&p->td->uses, 1);
		free(p);
		return 0;
	}
	err = sv_ctx_call_simple(pd->context, SV_OP_DEALLOC_PD, &req,
				 sizeof(req), NULL, 0);
	if (err) {
		errno = -err;
		return -err;
	}
	SV_CHECK(sv_check_obj(SV_CK_PD, pd, 0, NULL));
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
	if (pd) {
		SV_CHECK(sv_check_obj(SV_CK_PD, pd, 0, NULL));
		free(to_svpd(pd));
	}
}

struct ibv_pd *sv_pd_parent(struct ibv_pd *pd)
{
	return pd && to_svpd(pd)->protection ? pd : NULL;
}

void sv_pd_use(struct ibv_pd *parent, int delta)
{
	if (parent)
		atomic_fetch_add(&to_svpd(parent)->uses, delta);
}

/* A thread domain: comp_mask must be 0 (none is defined). */
static struct ibv_td *alloc_td(struct ibv_context *ctx,
			       struct ibv_td_init_attr *attr)
{
	struct sv_td *td;

	if (!attr || attr->comp_mask)
		return sv_null_errno(-EINVAL);
	td = calloc(1, sizeof(*td));
	if (!td)
		return sv_null_errno(-ENOMEM);
	td->td.context = ctx;
	return &td->td;
}

/* EBUSY while a parent domain uses it. */
static int dealloc_td(struct ibv_td *ibtd)
{
	struct sv_td *td = (struct sv_td *)ibtd;

	if (atomic_load(&td->uses)) {
		errno = EBUSY;
		return EBUSY;
	}
	free(td);
	return 0;
}

/*
 * A parent domain over attr->pd (a PD of this context, not another parent
 * domain), with attr->td if given.  Its allocators are kept but never
 * called: this device's queues are regions shared with the daemon and the
 * peers that reach them, not memory the application could hand out (the
 * allocators' resource types are provider-specific anyway).  EINVAL for
 * no PD, one of another context, a parent domain as PD, a TD of another
 * context, or comp_mask bits beyond ALLOCATORS and PD_CONTEXT.
 */
static struct ibv_pd *alloc_parent_domain(struct ibv_context *ctx,
					  struct ibv_parent_domain_init_attr *a)
{
	struct sv_pd *p, *prot;

	if (!a || !a->pd || a->pd->context != ctx ||
	    (a->comp_mask & ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
					IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)) ||
	    (a->td && a->td->context != ctx))
		return sv_null_errno(-EINVAL);
	prot = to_svpd(a->pd);
	if (prot->protection)
		return sv_null_errno(-EINVAL);
	p = calloc(1, sizeof(*p));
	if (!p)
		return sv_null_errno(-ENOMEM);
	p->pd.context = ctx;
	p->pd.handle = a->pd->handle;
	p->pd_id = prot->pd_id;
	p->imported = prot->imported;
	p->protection = prot;
	p->td = (struct sv_td *)a->td;
	if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		p->pd_context = a->pd_context;
	atomic_fetch_add(&prot->uses, 1);
	if (p->td)
		atomic_fetch_add(&p->td->uses, 1);
	return &p->pd;
}

void sv_set_pd_ops(struct verbs_context *vctx)
{
	vctx->alloc_td = alloc_td;
	vctx->dealloc_td = dealloc_td;
	vctx->alloc_parent_domain = alloc_parent_domain;
}

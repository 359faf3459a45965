/* SPDX-License-Identifier: MIT */
/*
 * Memory windows: ibv_alloc_mw (types 1 and 2), ibv_dealloc_mw, and the
 * bind_mw op behind ibv_bind_mw (type 1: a BIND_MW work request on the
 * QP's send queue).  Type 2 windows are bound with IBV_WR_BIND_MW through
 * ibv_post_send.  The bind itself happens when the WQE executes, against
 * the daemon's key table (the engine's side).
 */
#include "dp_int.h"
#include "check.h"
#include "sv_lock.h"

#include <stdlib.h>

static struct ibv_mw *alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct sv_alloc_mw_req req;
	struct sv_mw_rep rep;
	struct sv_mw *mw;
	int err;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return sv_null_errno(-EINVAL);
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return sv_null_errno(-ENOMEM);
	req = (struct sv_alloc_mw_req){ .pd_handle = pd->handle, .type = type };
	err = sv_ctx_call_simple(pd->context, SV_OP_ALLOC_MW, &req, sizeof(req),
				 &rep, sizeof(rep));
	if (err) {
		free(mw);
		return sv_null_errno(err);
	}
	mw->mw.context = pd->context;
	mw->mw.pd = pd;
	mw->mw.rkey = rep.rkey;
	mw->mw.handle = rep.handle;
	mw->mw.type = type;
	mw->pd_id = to_svpd(pd)->pd_id;
	SV_CHECK(sv_check_obj(SV_CK_MW, &mw->mw, 1, NULL));
	return &mw->mw;
}

static int dealloc_mw(struct ibv_mw *mw)
{
	struct sv_handle_req req = { .handle = mw->handle };
	int err = sv_ctx_call_simple(mw->context, SV_OP_DEALLOC_MW, &req,
				     sizeof(req), NULL, 0);

	if (err)
		return -err;
	SV_CHECK(sv_check_obj(SV_CK_MW, mw, 0, NULL));
	free((struct sv_mw *)mw);
	return 0;
}

/* verbs.h's ibv_bind_mw already checked the type and the MR's PD. */
static int bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw,
		   struct ibv_mw_bind *mw_bind)
{
	struct sv_qp *qp = to_svqp(ibqp);
	struct ibv_send_wr wr = { 0 };
	uint32_t new_rkey = ibv_inc_rkey(mw->rkey);
	int err;

	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = new_rkey;
	wr.bind_mw.bind_info = mw_bind->bind_info;
	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	SV_CHECK(sv_check_bind(qp, "ibv_bind_mw", &wr));
	err = sv_post_one_send(qp, &wr);
	if (err) {
		sv_unlock_spin(&qp->sq_lock);
		return err;
	}
	/* The key the window will answer to once the bind executes. */
	mw->rkey = new_rkey;
	sv_engine_posted(qp); /* releases sq_lock */
	return 0;
}

void sv_mw_set_ops(struct verbs_context *vctx)
{
	vctx->context.ops.alloc_mw = alloc_mw;
	vctx->context.ops.dealloc_mw = dealloc_mw;
	vctx->context.ops.bind_mw = bind_mw;
}

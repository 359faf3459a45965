/* SPDX-License-Identifier: MIT */
/*
 * Shared receive queues: create (basic SRQs only), modify (limit arming,
 * resize), query, destroy, ibv_post_srq_recv.  The queue is the engine's
 * (a shared-memory ring, src/engine/sv_queue.c) that the responders of
 * the QPs attached to it consume, whichever process runs them.
 */
#include "dp_int.h"
#include "check.h"
#include "sv_lock.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A basic SRQ, or an XRC one when xa names an XRCD and a CQ (the daemon's
 * CREATE_XRC_SRQ; xrc.c has the rest of XRC). */
static struct ibv_srq *srq_new(struct ibv_pd *pd, void *srq_context,
			       struct ibv_srq_attr *attr,
			       const struct ibv_srq_init_attr_ex *xa)
{
	struct ibv_context *ctx = pd->context;
	struct sv_ctx_ref cref = sv_cref(ctx);
	struct sv_create_srq_req req;
	struct sv_create_xrc_srq_req xreq;
	struct sv_xrc_srq_rep rep;
	struct sv_engine *eng;
	struct sv_srq *srq;
	struct sv_call c = { .op = SV_OP_CREATE_SRQ,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .nfds = 1 };
	int err, fd = -1;

	if (!attr->max_wr || attr->max_wr > SV_MAX_SRQ_WR || !attr->max_sge ||
	    attr->max_sge > SV_MAX_SRQ_SGE || attr->srq_limit > attr->max_wr)
		return sv_null_errno(-EINVAL);
	eng = sv_engine_get(&cref);
	if (!eng)
		return NULL;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return sv_null_errno(-ENOMEM);
	srq->pd_id = to_svpd(pd)->pd_id;
	err = sv_srq_shm_create(srq, attr->max_wr, attr->max_sge, &fd);
	if (err)
		goto err_free;
	srq->shm->limit = attr->srq_limit;
	srq->eng = eng;
	srq->cref = cref;
	err = sv_engine_srq_add(eng, srq);
	if (err)
		goto err_shm;
	req = (struct sv_create_srq_req){ .pd_handle = pd->handle,
					  .max_wr = attr->max_wr,
					  .max_sge = attr->max_sge };
	if (xa) {
		xreq = (struct sv_create_xrc_srq_req){
			.pd_handle = pd->handle,
			.xrcd_handle = sv_xrcd_handle(xa->xrcd),
			.cq_handle = xa->cq->handle,
			.max_wr = attr->max_wr,
			.max_sge = attr->max_sge };
		c.op = SV_OP_CREATE_XRC_SRQ;
		c.req = &xreq;
		c.req_len = sizeof(xreq);
	}
	c.fds = &fd;
	err = sv_ctx_call(ctx, &c);
	close(fd);
	fd = -1;
	if (err)
		goto err_tab;
	srq->srq.context = ctx;
	srq->srq.srq_context = srq_context;
	srq->srq.pd = pd;
	srq->srq.handle = rep.handle;
	srq->srq.events_completed = 0;
	if (xa) {
		srq->srqn = rep.srqn;
		srq->xrc_cq = xa->cq;
		srq->xrcd = xa->xrcd;
		atomic_fetch_add(&to_svcq(xa->cq)->usecnt, 1);
	}
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	pthread_spin_init(&srq->post_lock, PTHREAD_PROCESS_PRIVATE);
	sv_dp_obj_add(srq);
	srq->parent = sv_pd_parent(pd);
	sv_pd_use(srq->parent, 1);
	SV_CHECK(sv_check_obj(SV_CK_SRQ, &srq->srq, 1, NULL));
	return &srq->srq;

err_tab:
	sv_engine_srq_del(srq);
err_shm:
	sv_shm_release(srq->shm);
	if (fd >= 0)
		close(fd);
err_free:
	free(srq);
	return sv_null_errno(err);
}

/* Creates a basic SRQ; attr->max_wr and max_sge come back as granted. */
SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
					 struct ibv_srq_init_attr *srq_init_attr)
{
	if (!pd || !srq_init_attr)
		return sv_null_errno(-EINVAL);
	if (sv_fault_verb(SV_FV_CREATE_SRQ)) /* a fault plan: docs/faults.md */
		return NULL;
	return srq_new(pd, srq_init_attr->srq_context, &srq_init_attr->attr,
		       NULL);
}

/* Reached by ibv_create_srq_ex only for what ibv_create_srq can't do:
 * XRC SRQs (a PD, an XRCD and a CQ, as the kernel's create_srq with
 * IB_SRQT_XRC) and tag-matching SRQs, which this device lacks. */
static struct ibv_srq *create_srq_ex(struct ibv_context *ctx,
				     struct ibv_srq_init_attr_ex *a)
{
	int xrc;

	if (a->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_RESERVED - 1))
		return sv_null_errno(-EINVAL);
	xrc = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	      a->srq_type == IBV_SRQT_XRC;
	if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    a->srq_type != IBV_SRQT_BASIC && !xrc)
		return sv_null_errno(-EOPNOTSUPP); /* tag matching */
	if (a->comp_mask & IBV_SRQ_INIT_ATTR_TM)
		return sv_null_errno(-EOPNOTSUPP);
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd ||
	    a->pd->context != ctx)
		return sv_null_errno(-EINVAL);
	if (xrc && (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !a->xrcd ||
		    a->xrcd->context != ctx ||
		    !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->cq ||
		    a->cq->context != ctx))
		return sv_null_errno(-EINVAL);
	return srq_new(a->pd, a->srq_context, &a->attr, xrc ? a : NULL);
}

/*
 * IBV_SRQ_LIMIT arms the limit event (0 disarms); IBV_SRQ_MAX_WR resizes
 * the queue (not below the WQEs it holds), and grows its max_sge to
 * srq_attr->max_sge where that is larger and within the device's limit,
 * as rdma-core's tests expect; a max_sge the man page calls irrelevant
 * (smaller, or out of range) is ignored, never an error.  EINVAL for
 * anything else, a limit above max_wr, or a size out of range.
 */
SV_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq,
			     struct ibv_srq_attr *srq_attr, int srq_attr_mask)
{
	struct sv_srq *srq = to_svsrq(ibsrq);
	struct sv_srq_shm *s = srq->shm;
	uint32_t mask = (uint32_t)srq_attr_mask;
	int err = 0;

	if (!srq_attr || (mask & ~(uint32_t)(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		goto einval;
	if ((mask & IBV_SRQ_MAX_WR) &&
	    (!srq_attr->max_wr || srq_attr->max_wr > SV_MAX_SRQ_WR))
		goto einval;
	/* The post side stays still while the ring moves. */
	sv_lock_spin(&srq->post_lock, SV_LOCK_RQ_POST);
	if (((mask & IBV_SRQ_LIMIT) ? srq_attr->srq_limit : s->limit) >
	    ((mask & IBV_SRQ_MAX_WR) ? srq_attr->max_wr : s->rq.max_wr))
		err = -EINVAL;
	if (!err && (mask & IBV_SRQ_MAX_WR))
		err = sv_srq_resize(srq, srq_attr->max_wr, srq_attr->max_sge);
	if (!err && (mask & IBV_SRQ_LIMIT)) {
		sv_lock_shm(&s->lock, SV_LOCK_SRQ);
		s->limit = srq_attr->srq_limit;
		sv_unlock_shm(&s->lock);
	}
	sv_unlock_spin(&srq->post_lock);
	if (err) {
		errno = -err;
		return -err;
	}
	if (mask & IBV_SRQ_MAX_WR) {
		struct sv_create_srq_req req = { .handle = ibsrq->handle,
						 .max_wr = srq_attr->max_wr };

		/* Recorded for res show only. */
		sv_ctx_call_simple(ibsrq->context, SV_OP_MODIFY_SRQ, &req,
				   sizeof(req), NULL, 0);
	}
	return 0;

einval:
	errno = EINVAL;
	return EINVAL;
}

SV_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sv_srq_shm *s = to_svsrq(ibsrq)->shm;

	sv_lock_shm(&s->lock, SV_LOCK_SRQ);
	attr->max_wr = s->rq.max_wr;
	attr->max_sge = s->rq.max_sge;
	attr->srq_limit = s->limit;
	sv_unlock_shm(&s->lock);
	return 0;
}

/* EBUSY while a QP uses it; then waits for acks of the events read. */
SV_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sv_srq *srq = to_svsrq(ibsrq);
	struct sv_handle_req req = { .handle = ibsrq->handle };
	int err;

	SV_CHECK(sv_check_destroy(SV_CK_SRQ, ibsrq));
	if (atomic_load(&srq->usecnt)) {
		errno = EBUSY;
		return EBUSY;
	}
	err = sv_ctx_call_simple(ibsrq->context, SV_OP_DESTROY_SRQ, &req,
				 sizeof(req), NULL, 0);
	if (err) {
		errno = -err;
		return -err;
	}
	SV_CHECK(sv_check_obj(SV_CK_SRQ, ibsrq, 0, NULL));
	sv_dp_obj_del(srq);
	sv_engine_srq_del(srq);
	sv_dp_wait_acks(&ibsrq->mutex, &ibsrq->cond, &ibsrq->events_completed,
			&srq->events_delivered);
	sv_pd_use(srq->parent, -1);
	if (srq->xrc_cq)
		atomic_fetch_sub(&to_svcq(srq->xrc_cq)->usecnt, 1);
	pthread_spin_destroy(&srq->post_lock);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_cond_destroy(&ibsrq->cond);
	sv_shm_release(srq->shm);
	free(srq);
	return 0;
}

static int post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr)
{
	struct sv_srq *srq = to_svsrq(ibsrq);
	int err = 0;

	sv_lock_spin(&srq->post_lock, SV_LOCK_RQ_POST);
	for (; wr; wr = wr->next) {
		SV_CHECK(sv_check_srq_recv(srq, wr));
		err = sv_rq_post(srq->shm, &srq->shm->rq, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	sv_unlock_spin(&srq->post_lock);
	return err;
}

/* ibv_get_srq_num: an XRC SRQ's number; EINVAL for a basic SRQ, as
 * rdma-core's verbs_get_srq_num answers for an SRQ without one. */
static int get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct sv_srq *srq = to_svsrq(ibsrq);

	if (!srq->srqn || !srq_num)
		return EINVAL;
	*srq_num = srq->srqn;
	return 0;
}

void sv_srq_set_ops(struct verbs_context *vctx)
{
	vctx->context.ops.post_srq_recv = post_srq_recv;
	vctx->create_srq_ex = create_srq_ex;
	vctx->get_srq_num = get_srq_num;
}

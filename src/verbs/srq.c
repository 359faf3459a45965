/* SPDX-License-Identifier: MIT */
/*
 * Shared receive queues: create (basic SRQs only), modify (limit arming,
 * resize), query, destroy, ibv_post_srq_recv, and sv_srq_take, the engine's
 * way to consume one receive WQE.
 */
#include "dp_int.h"

#include <stdlib.h>
#include <string.h>

static struct ibv_srq *srq_new(struct ibv_pd *pd, void *srq_context,
			       struct ibv_srq_attr *attr)
{
	struct ibv_context *ctx = pd->context;
	struct sv_create_srq_req req;
	struct sv_obj_rep rep;
	struct sv_engine *eng;
	struct sv_srq *srq;
	int err;

	if (!attr->max_wr || attr->max_wr > SV_MAX_SRQ_WR || !attr->max_sge ||
	    attr->max_sge > SV_MAX_SRQ_SGE || attr->srq_limit > attr->max_wr)
		return sv_null_errno(-EINVAL);
	eng = sv_engine_get(ctx);
	if (!eng)
		return NULL;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return sv_null_errno(-ENOMEM);
	err = sv_wq_init(&srq->rq, attr->max_wr, attr->max_sge,
			 sv_recv_wqe_size(attr->max_sge));
	if (err)
		goto err_free;
	req = (struct sv_create_srq_req){ .pd_handle = pd->handle,
					  .max_wr = attr->max_wr,
					  .max_sge = attr->max_sge };
	err = sv_ctx_call_simple(ctx, SV_OP_CREATE_SRQ, &req, sizeof(req), &rep,
				 sizeof(rep));
	if (err)
		goto err_wq;
	srq->srq.context = ctx;
	srq->srq.srq_context = srq_context;
	srq->srq.pd = pd;
	srq->srq.handle = rep.handle;
	srq->srq.events_completed = 0;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
	srq->srq_limit = attr->srq_limit;
	srq->pd_id = to_svpd(pd)->pd_id;
	srq->eng = eng;
	sv_dp_obj_add(srq);
	return &srq->srq;

err_wq:
	sv_wq_free(&srq->rq);
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
	return srq_new(pd, srq_init_attr->srq_context, &srq_init_attr->attr);
}

/* Reached by ibv_create_srq_ex only for what ibv_create_srq can't do:
 * XRC and tag-matching SRQs, which this device lacks. */
static struct ibv_srq *create_srq_ex(struct ibv_context *ctx,
				     struct ibv_srq_init_attr_ex *a)
{
	if (a->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_RESERVED - 1))
		return sv_null_errno(-EINVAL);
	if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    a->srq_type != IBV_SRQT_BASIC)
		return sv_null_errno(-EOPNOTSUPP);
	if (a->comp_mask & (IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
			    IBV_SRQ_INIT_ATTR_TM))
		return sv_null_errno(-EOPNOTSUPP);
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd ||
	    a->pd->context != ctx)
		return sv_null_errno(-EINVAL);
	return srq_new(a->pd, a->srq_context, &a->attr);
}

/*
 * IBV_SRQ_LIMIT arms the limit event (0 disarms); IBV_SRQ_MAX_WR resizes
 * the queue (not below the WQEs it holds).  EINVAL for anything else, a
 * limit above max_wr, or a size out of range.
 */
SV_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq,
			     struct ibv_srq_attr *srq_attr, int srq_attr_mask)
{
	struct sv_srq *srq = to_svsrq(ibsrq);
	uint32_t mask = (uint32_t)srq_attr_mask;
	struct sv_wq nq = { 0 };
	char *old = NULL;
	int err = 0;

	if (!srq_attr || (mask & ~(uint32_t)(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		goto einval;
	if (mask & IBV_SRQ_MAX_WR) {
		if (!srq_attr->max_wr || srq_attr->max_wr > SV_MAX_SRQ_WR)
			goto einval;
		if (sv_wq_init(&nq, srq_attr->max_wr, srq->rq.max_sge,
			       srq->rq.wqe_size)) {
			errno = ENOMEM;
			return ENOMEM;
		}
	}
	pthread_spin_lock(&srq->lock);
	if (mask & IBV_SRQ_MAX_WR) {
		uint32_t n = srq->rq.tail - srq->rq.head;

		if (n > srq_attr->max_wr ||
		    ((mask & IBV_SRQ_LIMIT) ? srq_attr->srq_limit :
					      srq->srq_limit) > srq_attr->max_wr) {
			err = EINVAL;
		} else {
			for (uint32_t i = 0; i < n; i++)
				memcpy(sv_wq_slot(&nq, i),
				       sv_wq_slot(&srq->rq, srq->rq.head + i),
				       srq->rq.wqe_size);
			old = srq->rq.buf;
			nq.tail = n;
			srq->rq = nq;
		}
	}
	if (!err && (mask & IBV_SRQ_LIMIT)) {
		if (srq_attr->srq_limit > srq->rq.max_wr)
			err = EINVAL;
		else
			srq->srq_limit = srq_attr->srq_limit;
	}
	pthread_spin_unlock(&srq->lock);
	if (err) {
		free(nq.buf);
		errno = err;
		return err;
	}
	free(old);
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
	struct sv_srq *srq = to_svsrq(ibsrq);

	pthread_spin_lock(&srq->lock);
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->srq_limit;
	pthread_spin_unlock(&srq->lock);
	return 0;
}

/* EBUSY while a QP uses it; then waits for acks of the events read. */
SV_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sv_srq *srq = to_svsrq(ibsrq);
	struct sv_handle_req req = { .handle = ibsrq->handle };
	int err;

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
	sv_dp_obj_del(srq);
	sv_dp_wait_acks(&ibsrq->mutex, &ibsrq->cond, &ibsrq->events_completed,
			&srq->events_delivered);
	pthread_spin_destroy(&srq->lock);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_cond_destroy(&ibsrq->cond);
	sv_wq_free(&srq->rq);
	free(srq);
	return 0;
}

static int post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr)
{
	struct sv_srq *srq = to_svsrq(ibsrq);
	int err = 0;

	pthread_spin_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		err = sv_post_one_recv(&srq->rq, srq->rq.max_sge, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	pthread_spin_unlock(&srq->lock);
	return err;
}

int sv_srq_take(struct sv_srq *srq, struct sv_recv_wqe *out)
{
	struct sv_recv_wqe *w;
	int fire = 0;

	pthread_spin_lock(&srq->lock);
	if (srq->rq.head == srq->rq.tail) {
		pthread_spin_unlock(&srq->lock);
		return -EAGAIN;
	}
	w = sv_wq_slot(&srq->rq, srq->rq.head);
	out->wr_id = w->wr_id;
	out->num_sge = w->num_sge;
	memcpy(out->sge, w->sge, (size_t)w->num_sge * sizeof(struct ibv_sge));
	srq->rq.head++;
	/* The limit fires once when the count drops below it, then is
	 * disarmed until the next ibv_modify_srq (IBTA 10.2.9.2). */
	if (srq->srq_limit && srq->rq.tail - srq->rq.head < srq->srq_limit) {
		srq->srq_limit = 0;
		fire = 1;
	}
	pthread_spin_unlock(&srq->lock);
	if (fire)
		sv_engine_async_event(srq->srq.context,
				      IBV_EVENT_SRQ_LIMIT_REACHED, &srq->srq);
	return 0;
}

void sv_srq_set_ops(struct verbs_context *vctx)
{
	vctx->context.ops.post_srq_recv = post_srq_recv;
	vctx->create_srq_ex = create_srq_ex;
}

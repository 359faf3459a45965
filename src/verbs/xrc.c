/* SPDX-License-Identifier: MIT */
/*
 * XRC, the verbs side: ibv_open_xrcd / ibv_close_xrcd, the checks of an
 * XRC TGT QP's creation, and the handles ibv_open_qp gives (their modify,
 * query and destroy).  XRC SRQs are srq.c's (a basic SRQ with a number, an
 * XRCD and a CQ); XRC INI QPs and the TGT QP its creator holds are qp.c's
 * (an RC send queue; an RC responder with no queue).  The daemon's xrcd.c
 * keeps the domains, their sharing by inode and the TGT QPs' handles.
 *
 * Data: an INI QP sends as an RC requester whose requests carry an XRCETH
 * naming an XRC SRQ; the TGT QP answers as an RC responder whose receives
 * come from that SRQ, complete into its CQ and are checked against its PD
 * (src/engine: sv_resp_check.c, eng_peer.c's XRC SRQ views).  The TGT QP
 * is in its creator's engine, which takes its packets, until the creator's
 * handle goes: then a process with an opened handle serves it
 * (src/engine/eng_xrc.c).
 *
 * A TGT QP has no queue of its own: its state lives in its QP region (the
 * responder block, struct sv_qp_shm), which every handle maps -- the
 * creator's region, and the same memfd for each ibv_open_qp --, so a
 * transition made through one handle is the state every other handle
 * sees, as the kernel's shared QP gives.  An opened handle is a struct
 * sv_qp (xopen) that maps the region, on its engine's list until its
 * engine is asked to serve the QP; handles only unmap the region, the
 * daemon marks it dead when the QP goes.  The address vector of a modify
 * through any handle goes into the region too, for whichever process
 * serves the QP to route its answers by.
 */
#include "dp_int.h"
#include "check.h"
#include "sv_lock.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* rdma-core's struct verbs_xrcd prefix (comp_mask, handle), then ours. */
struct sv_xrcd {
	struct ibv_xrcd xrcd; /* must be first */
	uint32_t comp_mask;
	uint32_t handle;
	uint32_t id; /* device wide */
};


uint32_t sv_xrcd_handle(struct ibv_xrcd *xrcd)
{
	return ((struct sv_xrcd *)xrcd)->handle;
}

/*
 * rdma-core's ibv_cmd_open_xrcd checks, then the daemon's (xrcd.c):
 * EOPNOTSUPP for comp_mask bits it does not know, EINVAL unless both FD
 * and OFLAGS are given; EBADF for a descriptor that is not open, EAGAIN
 * for a file no XRCD is open on without O_CREAT, EINVAL for one with
 * O_EXCL.
 */
static struct ibv_xrcd *open_xrcd(struct ibv_context *ctx,
				  struct ibv_xrcd_init_attr *a)
{
	struct sv_open_xrcd_req req = { 0 };
	struct sv_xrcd_rep rep;
	struct sv_call c = { .op = SV_OP_OPEN_XRCD,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = &rep,
			     .rep_cap = sizeof(rep) };
	struct sv_xrcd *x;
	int err;

	if (!a)
		return sv_null_errno(-EINVAL);
	if (a->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED)
		return sv_null_errno(-EOPNOTSUPP);
	if (!(a->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    !(a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
		return sv_null_errno(-EINVAL);
	req.oflags = (uint32_t)a->oflags;
	if (a->fd != -1) {
		/* The kernel's fdget: a descriptor that is not open. */
		if (a->fd < 0 || fcntl(a->fd, F_GETFD) < 0)
			return sv_null_errno(-EBADF);
		req.has_fd = 1;
		c.fds = &a->fd;
		c.nfds = 1;
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return sv_null_errno(-ENOMEM);
	err = sv_ctx_call(ctx, &c);
	if (err) {
		free(x);
		return sv_null_errno(err);
	}
	x->xrcd.context = ctx;
	x->comp_mask = 1; /* rdma-core's VERBS_XRCD_HANDLE */
	x->handle = rep.handle;
	x->id = rep.xrcd_id;
	return &x->xrcd;
}

/* EBUSY while an SRQ or TGT QP made or opened through it lives, or while
 * the domain is used and this is its last handle (the daemon decides). */
static int close_xrcd(struct ibv_xrcd *ibx)
{
	struct sv_xrcd *x = (struct sv_xrcd *)ibx;
	struct sv_handle_req req = { .handle = x->handle };
	int err = sv_ctx_call_simple(ibx->context, SV_OP_CLOSE_XRCD, &req,
				     sizeof(req), NULL, 0);

	if (err)
		return -err;
	free(x);
	return 0;
}

/* ------------------------------------------------------------ TGT QPs -- */

static void tgt_free(struct sv_qp *t)
{
	pthread_spin_destroy(&t->sq_lock);
	pthread_spin_destroy(&t->rq_post_lock);
	pthread_mutex_destroy(&t->qpx.qp_base.mutex);
	pthread_cond_destroy(&t->qpx.qp_base.cond);
	sv_wq_free(&t->sq);
	free(t);
}

/* A handle from ibv_open_qp: a struct sv_qp (xopen) that maps the QP's
 * region; its attr is this handle's view, but the state.  Its engine may
 * be asked to serve the QP (src/engine/eng_xrc.c): it has what the
 * creator's QP has there, a send queue of one unused slot included. */
static struct ibv_qp *tgt_new(struct ibv_context *ctx, void *qp_context,
			      uint32_t handle, uint32_t qpn,
			      struct sv_qp_shm *shm)
{
	struct sv_ctx_ref cref = sv_cref(ctx);
	struct sv_engine *eng = sv_engine_get(&cref);
	struct sv_qp *t = eng ? calloc(1, sizeof(*t)) : NULL;

	if (!t)
		return NULL;
	if (sv_wq_init(&t->sq, 1, 1, sv_send_wqe_size(1, 0))) {
		free(t);
		return NULL;
	}
	t->sq.max_wr = 0;
	t->eng = eng;
	t->cref = cref;
	t->xopen = 1;
	pthread_spin_init(&t->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&t->rq_post_lock, PTHREAD_PROCESS_PRIVATE);
	t->shm = shm;
	t->type = IBV_QPT_XRC_RECV;
	t->qpx.qp_base.context = ctx;
	t->qpx.qp_base.qp_context = qp_context;
	t->qpx.qp_base.handle = handle;
	t->qpx.qp_base.qp_num = qpn;
	t->qpx.qp_base.qp_type = IBV_QPT_XRC_RECV;
	t->qpx.qp_base.state = IBV_QPS_RESET;
	pthread_mutex_init(&t->qpx.qp_base.mutex, NULL);
	pthread_cond_init(&t->qpx.qp_base.cond, NULL);
	t->attr.qp_state = IBV_QPS_RESET;
	t->attr.path_mtu = IBV_MTU_1024;
	t->attr.port_num = 1;
	if (sv_engine_tgt_open(eng, t)) {
		tgt_free(t);
		return NULL;
	}
	sv_dp_obj_add(t); /* its events: the QP's (eng_xrc.c) */
	return &t->qpx.qp_base;
}

int sv_xrc_opened(struct ibv_qp *qp)
{
	return qp->qp_type == IBV_QPT_XRC_RECV && to_svqp(qp)->xopen;
}

/*
 * ibv_create_qp_ex of an XRC TGT QP, what xrc.c checks before qp.c makes
 * it: the XRCD names its domain; no PD, CQs, SRQ or queues (the kernel
 * ignores the capabilities and gives none back).
 */
int sv_xrc_tgt_check(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd ||
	    a->xrcd->context != ctx)
		return EINVAL;
	if (a->comp_mask & (IBV_QP_INIT_ATTR_IND_TABLE |
			    IBV_QP_INIT_ATTR_RX_HASH |
			    IBV_QP_INIT_ATTR_MAX_TSO_HEADER |
			    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return EINVAL;
	if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags)
		return EOPNOTSUPP;
	return 0;
}

uint32_t sv_xrcd_id(struct ibv_xrcd *xrcd)
{
	return ((struct sv_xrcd *)xrcd)->id;
}

/* ibv_open_qp: another handle to an XRC TGT QP of the XRCD (the kernel's
 * ib_uverbs_open_qp).  EINVAL: not an XRC TGT open, or no such QP in
 * that domain. */
static struct ibv_qp *open_qp(struct ibv_context *ctx,
			      struct ibv_qp_open_attr *a)
{
	struct sv_open_qp_req req;
	struct sv_qp_rep rep;
	int rfd = -1;
	struct sv_call c = { .op = SV_OP_OPEN_QP,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = &rfd,
			     .max_rfds = 1 };
	struct sv_qp_shm *shm;
	struct ibv_qp *qp;
	int err;

	if (!a || a->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED)
		return sv_null_errno(-EINVAL);
	if (!(a->comp_mask & IBV_QP_OPEN_ATTR_NUM) ||
	    !(a->comp_mask & IBV_QP_OPEN_ATTR_XRCD) ||
	    !(a->comp_mask & IBV_QP_OPEN_ATTR_TYPE) || !a->xrcd ||
	    a->xrcd->context != ctx || a->qp_type != IBV_QPT_XRC_RECV)
		return sv_null_errno(-EINVAL);
	req = (struct sv_open_qp_req){ .xrcd_handle = sv_xrcd_handle(a->xrcd),
				       .qpn = a->qp_num,
				       .qp_type = a->qp_type };
	err = sv_ctx_call(ctx, &c);
	if (err)
		return sv_null_errno(err);
	shm = c.nrfds == 1 ? sv_qp_shm_open(rfd) : NULL;
	if (rfd >= 0)
		close(rfd);
	qp = shm ? tgt_new(ctx,
			   (a->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ?
				   a->qp_context :
				   NULL,
			   rep.handle, rep.qpn, shm) :
		   NULL;
	if (!qp) {
		struct sv_handle_req d = { .handle = rep.handle };

		sv_ctx_call_simple(ctx, SV_OP_DESTROY_QP, &d, sizeof(d), NULL,
				   0);
		if (shm)
			sv_qp_shm_close(shm);
		return sv_null_errno(-ENOMEM);
	}
	return qp;
}

static enum ibv_qp_state tgt_state(struct sv_qp *t)
{
	return (enum ibv_qp_state)__atomic_load_n(&t->shm->state,
						  __ATOMIC_ACQUIRE);
}

/* The attribute values the device checks for a TGT QP (a subset of qp.c's
 * check_values: it has no send side of its own). */
static int tgt_check_values(const struct ibv_qp_attr *a, uint32_t mask)
{
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= SV_MAX_PKEYS)
		return EINVAL;
	if ((mask & IBV_QP_AV) && (!a->ah_attr.is_global ||
				   (a->ah_attr.port_num &&
				    a->ah_attr.port_num != 1)))
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) &&
	    (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    a->max_dest_rd_atomic > SV_MAX_QP_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_PATH_MIG_STATE) && a->path_mig_state > IBV_MIG_ARMED)
		return EINVAL;
	return 0;
}

int sv_xrc_modify_tgt(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		      int attr_mask)
{
	struct sv_qp *t = to_svqp(ibqp);
	uint32_t mask = (uint32_t)attr_mask, req, opt;
	enum ibv_qp_state cur, next, old;
	struct sv_modify_qp_req mreq;
	int err = EINVAL;

	if (!attr || (mask & IBV_QP_CAP))
		return EINVAL;
	sv_lock_mutex(&ibqp->mutex, SV_LOCK_OBJ);
	sv_lock_shm(&t->shm->lock, SV_LOCK_RESP);
	old = tgt_state(t);
	cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : old;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if ((mask & IBV_QP_CUR_STATE) && cur != old)
		goto out;
	if (!sv_qp_trans_masks(cur, next, IBV_QPT_XRC_RECV, &req, &opt) ||
	    (mask & req) != req || (mask & ~(req | opt | IBV_QP_STATE)))
		goto out;
	err = tgt_check_values(attr, mask);
	if (err)
		goto out;
	if (mask & IBV_QP_ACCESS_FLAGS)
		t->shm->access = attr->qp_access_flags;
	if (mask & IBV_QP_RQ_PSN)
		t->shm->epsn = attr->rq_psn & 0xffffff;
	if (mask & IBV_QP_DEST_QPN)
		t->shm->dest_qpn = attr->dest_qp_num;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		t->shm->min_rnr = attr->min_rnr_timer;
	if (mask & IBV_QP_PATH_MTU)
		t->shm->mtu = 128u << attr->path_mtu;
	if (mask & IBV_QP_AV)
		sv_qp_av_store(t->shm, &attr->ah_attr);
	__atomic_store_n(&t->shm->state, (uint32_t)next, __ATOMIC_RELEASE);
	/* This handle's view of the rest (ibv_query_qp). */
	if (mask & IBV_QP_ACCESS_FLAGS)
		t->attr.qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		t->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_AV)
		t->attr.ah_attr = attr->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		t->attr.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		t->attr.dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		t->attr.rq_psn = attr->rq_psn & 0xffffff;
	if (mask & IBV_QP_SQ_PSN)
		t->attr.sq_psn = attr->sq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		t->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		t->attr.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		t->attr.timeout = attr->timeout;
	ibqp->state = next;
	err = 0;
out:
	sv_unlock_shm(&t->shm->lock);
	if (!err) {
		mreq = (struct sv_modify_qp_req){ .handle = ibqp->handle,
						  .state = next,
						  .dest_qpn = t->attr.dest_qp_num };
		/* The daemon records it (res show). */
		sv_ctx_call_simple(ibqp->context, SV_OP_MODIFY_QP, &mreq,
				   sizeof(mreq), NULL, 0);
	}
	sv_unlock_mutex(&ibqp->mutex);
	return err;
}

int sv_xrc_query_tgt(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		     struct ibv_qp_init_attr *init_attr)
{
	struct sv_qp *t = to_svqp(ibqp);

	if (!attr || !init_attr)
		return EINVAL;
	sv_lock_mutex(&ibqp->mutex, SV_LOCK_OBJ);
	*attr = t->attr;
	attr->qp_state = tgt_state(t);
	attr->cur_qp_state = attr->qp_state;
	sv_unlock_mutex(&ibqp->mutex);
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = ibqp->qp_context;
	init_attr->qp_type = IBV_QPT_XRC_RECV;
	return 0;
}

/* The handle goes; the QP itself with its last handle (daemon). */
int sv_xrc_destroy_tgt(struct ibv_qp *ibqp)
{
	struct sv_qp *t = to_svqp(ibqp);
	struct sv_handle_req req = { .handle = ibqp->handle };
	int err = sv_ctx_call_simple(ibqp->context, SV_OP_DESTROY_QP, &req,
				     sizeof(req), NULL, 0);

	if (err)
		return -err;
	sv_engine_tgt_close(t);
	sv_dp_obj_del(t);
	sv_dp_wait_acks(&ibqp->mutex, &ibqp->cond, &ibqp->events_completed,
			&t->events_delivered);
	sv_qp_shm_close(t->shm);
	tgt_free(t);
	return 0;
}

void sv_xrc_set_ops(struct verbs_context *vctx)
{
	vctx->open_xrcd = open_xrcd;
	vctx->close_xrcd = close_xrcd;
	vctx->open_qp = open_qp;
}

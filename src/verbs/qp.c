/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs: create (RC, UC, UD), modify with the kernel's state machine,
 * query, destroy.  The daemon gives the QP its handle and device-wide
 * number and counts it on the PD, CQs and SRQ; the queues are here, and
 * the engine is told about every change (sv_engine_qp_*).
 */
#include "dp_int.h"
#include "check.h"
#include "sv_lock.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ----------------------------------------------------- state machine -- */

/*
 * Which attributes each transition requires and allows, per QP type: the
 * table of IBTA 11.2.4.2 / the kernel's ib_modify_qp_is_ok, for the three
 * types this device has.  IBV_QP_STATE itself is always allowed.
 */
struct trans {
	uint8_t valid;
	uint32_t req[5], opt[5]; /* [T_RC], [T_UC], [T_UD], XRC INI, TGT */
};
enum { T_RC, T_UC, T_UD, T_XI, T_XT };

#define M(x) IBV_QP_##x
#define PATH_OPTS (M(ALT_PATH) | M(ACCESS_FLAGS) | M(PATH_MIG_STATE))
/* Every state may go to RESET and to ERR, with no attribute but the state. */
#define TO_RESET_OR_ERR                                                        \
	[IBV_QPS_RESET] = { .valid = 1 }, [IBV_QPS_ERR] = { .valid = 1 }
/* Required by RESET -> INIT, allowed by INIT -> INIT. */
#define INIT_ATTRS                                                             \
	{ [T_RC] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),                  \
	  [T_UC] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),                  \
	  [T_UD] = M(PKEY_INDEX) | M(PORT) | M(QKEY),                          \
	  [T_XI] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS),                  \
	  [T_XT] = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS) }
/* Allowed by RTR -> RTS, RTS -> RTS and SQD -> RTS. */
#define RTS_OPTS                                                               \
	{ [T_RC] = M(CUR_STATE) | PATH_OPTS | M(MIN_RNR_TIMER),                \
	  [T_UC] = M(CUR_STATE) | PATH_OPTS,                                   \
	  [T_UD] = M(CUR_STATE) | M(QKEY),                                     \
	  [T_XI] = M(CUR_STATE) | PATH_OPTS,                                   \
	  [T_XT] = M(CUR_STATE) | PATH_OPTS | M(MIN_RNR_TIMER) }

static const struct trans qp_table[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_INIT] = { .valid = 1, .req = INIT_ATTRS },
	},
	[IBV_QPS_INIT] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_INIT] = { .valid = 1, .opt = INIT_ATTRS },
		[IBV_QPS_RTR] = { .valid = 1,
			.req = {
			[T_RC] = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN) |
				 M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER),
			[T_UC] = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN),
			[T_XI] = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN),
			[T_XT] = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN) |
				 M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER) },
			.opt = {
			[T_RC] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
			[T_UC] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
			[T_UD] = M(PKEY_INDEX) | M(QKEY),
			[T_XI] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX),
			[T_XT] = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) } },
	},
	[IBV_QPS_RTR] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_RTS] = { .valid = 1,
			.req = {
			[T_RC] = M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) |
				 M(SQ_PSN) | M(MAX_QP_RD_ATOMIC),
			[T_UC] = M(SQ_PSN),
			[T_UD] = M(SQ_PSN),
			[T_XI] = M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) |
				 M(SQ_PSN) | M(MAX_QP_RD_ATOMIC),
			[T_XT] = M(TIMEOUT) | M(SQ_PSN) },
			.opt = RTS_OPTS },
	},
	[IBV_QPS_RTS] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_RTS] = { .valid = 1, .opt = RTS_OPTS },
		[IBV_QPS_SQD] = { .valid = 1, .opt = {
			[T_RC] = M(EN_SQD_ASYNC_NOTIFY),
			[T_UC] = M(EN_SQD_ASYNC_NOTIFY),
			[T_UD] = M(EN_SQD_ASYNC_NOTIFY),
			[T_XI] = M(EN_SQD_ASYNC_NOTIFY),
			[T_XT] = M(EN_SQD_ASYNC_NOTIFY) } },
	},
	[IBV_QPS_SQD] = {
		TO_RESET_OR_ERR,
		[IBV_QPS_RTS] = { .valid = 1, .opt = RTS_OPTS },
		[IBV_QPS_SQD] = { .valid = 1, .opt = {
			[T_RC] = M(PORT) | M(AV) | M(TIMEOUT) | M(RETRY_CNT) |
				 M(RNR_RETRY) | M(MAX_QP_RD_ATOMIC) |
				 M(MAX_DEST_RD_ATOMIC) | PATH_OPTS |
				 M(PKEY_INDEX) | M(MIN_RNR_TIMER),
			[T_UC] = M(AV) | PATH_OPTS | M(PKEY_INDEX),
			[T_UD] = M(PKEY_INDEX) | M(QKEY),
			[T_XI] = M(PORT) | M(AV) | M(TIMEOUT) | M(RETRY_CNT) |
				 M(RNR_RETRY) | M(MAX_QP_RD_ATOMIC) |
				 PATH_OPTS | M(PKEY_INDEX),
			[T_XT] = M(PORT) | M(AV) | M(TIMEOUT) |
				 M(MAX_DEST_RD_ATOMIC) | PATH_OPTS |
				 M(PKEY_INDEX) | M(MIN_RNR_TIMER) } },
	},
	[IBV_QPS_SQE] = {
		TO_RESET_OR_ERR,
		/* RC never enters SQE (its send errors go to ERR). */
		[IBV_QPS_RTS] = { .valid = 1, .opt = {
			[T_UC] = M(CUR_STATE) | M(ACCESS_FLAGS),
			[T_UD] = M(CUR_STATE) | M(QKEY) } },
	},
	[IBV_QPS_ERR] = {
		TO_RESET_OR_ERR,
	},
};

static int type_index(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC: return T_RC;
	case IBV_QPT_UC: return T_UC;
	case IBV_QPT_XRC_SEND: return T_XI;
	case IBV_QPT_XRC_RECV: return T_XT;
	default: return T_UD;
	}
}

/* ib_modify_qp_is_ok in our words: 1 when the transition cur -> next with
 * mask is legal for type. */
static int transition_ok(enum ibv_qp_state cur, enum ibv_qp_state next,
			 enum ibv_qp_type type, uint32_t mask)
{
	const struct trans *t;
	uint32_t req, opt;

	if ((unsigned)cur > IBV_QPS_ERR || (unsigned)next > IBV_QPS_ERR)
		return 0;
	/* "current state" may only be asserted where the IBTA allows it. */
	if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR &&
	    cur != IBV_QPS_RTS && cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
		return 0;
	t = &qp_table[cur][next];
	if (!t->valid)
		return 0;
	req = t->req[type_index(type)];
	opt = t->opt[type_index(type)];
	if ((mask & req) != req)
		return 0;
	return !(mask & ~(req | opt | IBV_QP_STATE));
}

int sv_qp_trans_masks(enum ibv_qp_state cur, enum ibv_qp_state next,
		      enum ibv_qp_type type, uint32_t *req, uint32_t *opt)
{
	const struct trans *t;

	if ((unsigned)cur > IBV_QPS_ERR || (unsigned)next > IBV_QPS_ERR)
		return 0;
	t = &qp_table[cur][next];
	*req = t->req[type_index(type)];
	*opt = t->opt[type_index(type)];
	return t->valid;
}

/* An AV's source GID (RoCE AVs need one): 0, ENODATA for an empty slot,
 * EINVAL past the table, as the kernel's rdma_fill_sgid_attr answers. */
static int sgid_check(struct ibv_context *ctx, unsigned index)
{
	struct ibv_gid_entry e;

	return _ibv_query_gid_ex(ctx, 1, index, &e, 0, sizeof(e));
}

/* qp_access_flags a QP takes: rxe's RXE_ACCESS_SUPPORTED_QP, i.e. every
 * MR bit it supports (ODP programs pass IBV_ACCESS_ON_DEMAND here), the
 * kernel's flush bits (1 << 8, 1 << 9) and the optional range. */
#define SV_QP_ACCESS                                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                   \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND | (1u << 8) | (1u << 9) |   \
	 IBV_ACCESS_OPTIONAL_RANGE)

/* The attribute values the device checks (rxe_qp_chk_attr's list, for a
 * RoCE port): 0, EINVAL, or ENODATA for an AV whose source GID slot is
 * empty. */
static int check_values(struct sv_qp *qp, const struct ibv_qp_attr *a,
			uint32_t mask)
{
	struct ibv_context *ctx = qp->qpx.qp_base.context;
	int err;

	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= SV_MAX_PKEYS)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~(unsigned)SV_QP_ACCESS))
		return EINVAL;
	if (mask & IBV_QP_AV) {
		/* RoCE: every address is a GRH address. */
		if (!a->ah_attr.is_global ||
		    (a->ah_attr.port_num && a->ah_attr.port_num != 1))
			return EINVAL;
		err = sgid_check(ctx, a->ah_attr.grh.sgid_index);
		if (err)
			return err;
	}
	if (mask & IBV_QP_ALT_PATH) {
		if (!a->alt_ah_attr.is_global || a->alt_port_num != 1 ||
		    a->alt_pkey_index >= SV_MAX_PKEYS)
			return EINVAL;
		err = sgid_check(ctx, a->alt_ah_attr.grh.sgid_index);
		if (err)
			return err;
	}
	if (mask & IBV_QP_PATH_MTU) {
		enum ibv_mtu active;

		if (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096)
			return EINVAL;
		/* Above what the port's interfaces carry: refused, as RoCE
		 * drivers that check it do (hns_roce check_mtu_validate:
		 * path_mtu > iboe_get_mtu(netdev MTU) is EINVAL, whatever the
		 * QP type or transition that takes the attribute; rxe checks
		 * max_mtu only and its packets then exceed the netdev MTU). */
		if (!sv_port_active_mtu(ctx, &active) && a->path_mtu > active)
			return EINVAL;
	}
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
	    a->max_rd_atomic > SV_MAX_QP_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    a->max_dest_rd_atomic > SV_MAX_QP_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_PATH_MIG_STATE) &&
	    a->path_mig_state > IBV_MIG_ARMED)
		return EINVAL;
	return 0;
}

/* Copies the accepted attributes into q (what becomes qp->attr). */
static void apply(struct ibv_qp_attr *q, const struct ibv_qp_attr *a,
		  uint32_t m)
{
	if (m & IBV_QP_STATE)
		q->qp_state = a->qp_state;
	if (m & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		q->en_sqd_async_notify = a->en_sqd_async_notify;
	if (m & IBV_QP_ACCESS_FLAGS)
		q->qp_access_flags = a->qp_access_flags;
	if (m & IBV_QP_PKEY_INDEX)
		q->pkey_index = a->pkey_index;
	if (m & IBV_QP_PORT)
		q->port_num = a->port_num;
	if (m & IBV_QP_QKEY)
		q->qkey = a->qkey;
	if (m & IBV_QP_AV) {
		q->ah_attr = a->ah_attr;
		q->ah_attr.port_num = 1;
	}
	if (m & IBV_QP_PATH_MTU)
		q->path_mtu = a->path_mtu;
	if (m & IBV_QP_TIMEOUT)
		q->timeout = a->timeout;
	if (m & IBV_QP_RETRY_CNT)
		q->retry_cnt = a->retry_cnt;
	if (m & IBV_QP_RNR_RETRY)
		q->rnr_retry = a->rnr_retry;
	if (m & IBV_QP_RQ_PSN)
		q->rq_psn = a->rq_psn & 0xffffff;
	if (m & IBV_QP_MAX_QP_RD_ATOMIC)
		q->max_rd_atomic = a->max_rd_atomic;
	if (m & IBV_QP_ALT_PATH) {
		q->alt_ah_attr = a->alt_ah_attr;
		q->alt_pkey_index = a->alt_pkey_index;
		q->alt_port_num = a->alt_port_num;
		q->alt_timeout = a->alt_timeout;
	}
	if (m & IBV_QP_MIN_RNR_TIMER)
		q->min_rnr_timer = a->min_rnr_timer;
	if (m & IBV_QP_SQ_PSN)
		q->sq_psn = a->sq_psn & 0xffffff;
	if (m & IBV_QP_MAX_DEST_RD_ATOMIC)
		q->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (m & IBV_QP_PATH_MIG_STATE)
		q->path_mig_state = a->path_mig_state;
	if (m & IBV_QP_DEST_QPN)
		q->dest_qp_num = a->dest_qp_num;
}

static void lock_both(struct sv_qp *qp)
{
	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	sv_lock_spin(&qp->rq_post_lock, SV_LOCK_RQ_POST);
}

static void unlock_both(struct sv_qp *qp)
{
	sv_unlock_spin(&qp->rq_post_lock);
	sv_unlock_spin(&qp->sq_lock);
}

#define KNOWN_MASK ((((uint32_t)IBV_QP_DEST_QPN << 1) - 1) | \
		    (uint32_t)IBV_QP_RATE_LIMIT)

/*
 * ibv_modify_qp's body.  Returns 0 or a positive errno:
 * EINVAL for an illegal transition, a mask the transition does not take,
 * or an attribute value out of range.  Nothing changes on failure.
 */
static int modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		     int attr_mask)
{
	struct sv_qp *qp = to_svqp(ibqp);
	uint32_t mask = (uint32_t)attr_mask;
	enum ibv_qp_state cur, next, old;
	struct sv_modify_qp_req req;
	struct sv_link *link = NULL;
	struct sv_peer *peer = NULL;
	struct ibv_qp_attr na;
	int err;

	SV_CHECK(sv_check_modify(qp, attr, attr_mask));
	if (!attr || (mask & ~KNOWN_MASK) || (mask & IBV_QP_CAP))
		return EINVAL;
	/* A NIC has taken what reached it before the QP leaves its working
	 * states: an ACK already in our ring completes its send rather than
	 * be flushed with it.  rdma_cm's peer disconnects right after its
	 * last completion, and the DREQ can overtake that ACK here (the
	 * daemon carries it, our engine drains the ring; pinned by
	 * test_engine_err ack_in_ring_taken_before_err). */
	if ((mask & IBV_QP_STATE) &&
	    (attr->qp_state == IBV_QPS_ERR || attr->qp_state == IBV_QPS_RESET) &&
	    sv_qp_state(qp) >= IBV_QPS_RTR && sv_qp_state(qp) != IBV_QPS_ERR)
		sv_engine_take_arrived(qp->eng);
	sv_lock_mutex(&ibqp->mutex, SV_LOCK_OBJ); /* one modify at a time */
	old = sv_qp_state(qp);
	cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : old;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	err = EINVAL;
	if ((mask & IBV_QP_CUR_STATE) && cur != old)
		goto out;
	if (!transition_ok(cur, next, qp->type, mask))
		goto out;
	err = check_values(qp, attr, mask);
	if (err)
		goto out;

	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	na = qp->attr;
	sv_unlock_spin(&qp->sq_lock);
	apply(&na, attr, mask);
	na.qp_state = next;
	na.cur_qp_state = next;
	if (next == IBV_QPS_RTR && old != IBV_QPS_RTR && qp->type != IBV_QPT_UD)
		sv_engine_qp_route(qp, &na, &link, &peer);

	lock_both(qp);
	err = -sv_engine_qp_commit(qp, old, &na, attr_mask, link, peer);
	if (!err) {
		if (mask & IBV_QP_AV)
			qp->dgid = na.ah_attr.grh.dgid;
		qp->dest_qpn = na.dest_qp_num;
		ibqp->state = next;
	}
	unlock_both(qp);
	if (err)
		goto out;

	req = (struct sv_modify_qp_req){ .handle = ibqp->handle,
					 .state = next,
					 .dest_qpn = na.dest_qp_num,
					 .qkey = na.qkey };
	/* The daemon only records it (res show, wire demux). */
	if (sv_ctx_call_simple(ibqp->context, SV_OP_MODIFY_QP, &req,
			       sizeof(req), NULL, 0))
		sv_dbg("qp %#x: modify not recorded", ibqp->qp_num);
	sv_engine_qp_modified(qp, old, next);
	SV_CHECK(sv_check_modified(qp));
out:
	sv_unlock_mutex(&ibqp->mutex);
	return err;
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			    int attr_mask)
{
	int err = sv_fault_verb(SV_FV_MODIFY_QP) ?:
		  sv_xrc_opened(qp) ? sv_xrc_modify_tgt(qp, attr, attr_mask) :
			  modify_qp(qp, attr, attr_mask);

	if (err)
		errno = err;
	return err;
}

/* ----------------------------------------------------------- query -- */

SV_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			   int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct sv_qp *qp = to_svqp(ibqp);

	(void)attr_mask; /* everything is cheap: fill it all, as rxe */
	if (sv_xrc_opened(ibqp)) {
		int err = sv_xrc_query_tgt(ibqp, attr, init_attr);

		if (err)
			errno = err;
		return err;
	}
	if (!attr || !init_attr) {
		errno = EINVAL;
		return EINVAL;
	}
	sv_lock_mutex(&ibqp->mutex, SV_LOCK_OBJ);
	lock_both(qp);
	*attr = qp->attr;
	attr->qp_state = sv_qp_state(qp);
	attr->cur_qp_state = attr->qp_state;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	unlock_both(qp);
	sv_unlock_mutex(&ibqp->mutex);
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	init_attr->cap = qp->cap;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->sq_sig_all = qp->sq_sig_all;
	return 0;
}

/* ---------------------------------------------------------- create -- */

#define SV_QP_COMP_MASK (IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | \
			 IBV_QP_INIT_ATTR_CREATE_FLAGS | \
			 IBV_QP_INIT_ATTR_MAX_TSO_HEADER | \
			 IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH | \
			 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)

/* The ibv_qp_ex ops each type can carry (IBV_QP_EX_WITH_*). */
static uint64_t type_send_ops(enum ibv_qp_type t)
{
	uint64_t ud = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	uint64_t uc = ud | IBV_QP_EX_WITH_RDMA_WRITE |
		      IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
		      IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW;
	uint64_t rc = uc | IBV_QP_EX_WITH_SEND_WITH_INV |
		      IBV_QP_EX_WITH_RDMA_READ |
		      IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

	if (t == IBV_QPT_UD)
		return ud;
	if (t == IBV_QPT_UC)
		return uc;
	/* XRC: RC's but ATOMIC WRITE (sv_opcode.c: rxe gives it RC only). */
	return t == IBV_QPT_XRC_SEND ? rc : rc | IBV_QP_EX_WITH_ATOMIC_WRITE;
}

/* What the device checks at create (rxe_qp_chk_init / chk_cap). */
static int check_init(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp_cap *c = &a->cap;

	if (a->comp_mask & ~(uint32_t)SV_QP_COMP_MASK)
		return EINVAL;
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC &&
	    a->qp_type != IBV_QPT_UD && a->qp_type != IBV_QPT_XRC_SEND)
		return EOPNOTSUPP; /* raw packet, driver QPs (TGT: xrc.c) */
	if (a->comp_mask & (IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_IND_TABLE |
			    IBV_QP_INIT_ATTR_RX_HASH |
			    IBV_QP_INIT_ATTR_MAX_TSO_HEADER))
		return EOPNOTSUPP;
	if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags)
		return EOPNOTSUPP;
	if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (a->send_ops_flags & ~type_send_ops(a->qp_type)))
		return EOPNOTSUPP;
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd ||
	    a->pd->context != ctx)
		return EINVAL;
	if (a->qp_type == IBV_QPT_XRC_SEND) {
		/* Send side only: the receive CQ is ignored, as the kernel
		 * ignores it; an SRQ makes no sense. */
		if (!a->send_cq || a->send_cq->context != ctx || a->srq)
			return EINVAL;
		return c->max_send_wr > SV_MAX_QP_WR ||
			       c->max_send_sge > SV_MAX_SGE ||
			       c->max_inline_data > SV_MAX_INLINE ?
		       EINVAL : 0;
	}
	if (!a->send_cq || !a->recv_cq || a->send_cq->context != ctx ||
	    a->recv_cq->context != ctx)
		return EINVAL;
	if (a->srq && a->srq->context != ctx)
		return EINVAL;
	if (c->max_send_wr > SV_MAX_QP_WR || c->max_send_sge > SV_MAX_SGE ||
	    c->max_inline_data > SV_MAX_INLINE)
		return EINVAL;
	if (!a->srq && (c->max_recv_wr > SV_MAX_QP_WR ||
			c->max_recv_sge > SV_MAX_SGE))
		return EINVAL;
	return 0;
}

/* The QP's hold on its CQs (none for an XRC TGT QP). */
static void cq_use(struct sv_qp *qp, int delta)
{
	if (qp->scq) {
		atomic_fetch_add(&qp->scq->usecnt, delta);
		atomic_fetch_add(&qp->scq->senders, delta);
	}
	if (qp->rcq)
		atomic_fetch_add(&qp->rcq->usecnt, delta);
}

static void destroy_cmd(struct ibv_context *ctx, uint32_t handle)
{
	struct sv_handle_req req = { .handle = handle };

	sv_ctx_call_simple(ctx, SV_OP_DESTROY_QP, &req, sizeof(req), NULL, 0);
}

static struct ibv_qp *qp_new(struct ibv_context *ctx,
			     struct ibv_qp_init_attr_ex *a)
{
	struct sv_create_qp_req req;
	struct sv_ctx_ref cref = sv_cref(ctx);
	struct sv_qp_rep rep;
	struct ibv_qp_cap cap;
	struct sv_engine *eng;
	struct sv_qp *qp;
	struct ibv_qp *ib;
	struct sv_call c = { .op = SV_OP_CREATE_QP,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .nfds = 1 };
	int xini = a->qp_type == IBV_QPT_XRC_SEND;
	int xtgt = a->qp_type == IBV_QPT_XRC_RECV; /* checked by xrc.c */
	int err = xtgt ? 0 : check_init(ctx, a), fd = -1;
	uint32_t sge_bytes;

	if (err)
		return sv_null_errno(-err);
	eng = sv_engine_get(&cref);
	if (!eng)
		return NULL;
	/* Granted: what was asked (at least one WR and SGE on each queue, so
	 * the rings are never empty arrays); inline space as asked, and at
	 * least the bytes the WQE's SGEs take (rxe's rxe_qp_init_req and
	 * mlx5 round it up so): a program that inlines 16 bytes with one
	 * SGE and no inline asked for (rdma_xclient) works. */
	cap = a->cap;
	sge_bytes = cap.max_send_sge * (uint32_t)sizeof(struct ibv_sge);
	if (cap.max_inline_data < sge_bytes)
		cap.max_inline_data = sge_bytes < SV_MAX_INLINE ? sge_bytes :
								  SV_MAX_INLINE;
	if (xtgt)
		memset(&cap, 0, sizeof(cap)); /* a responder, no queue */
	if (a->srq || a->qp_type == IBV_QPT_XRC_SEND) {
		cap.max_recv_wr = 0;
		cap.max_recv_sge = 0;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return sv_null_errno(-ENOMEM);
	err = sv_wq_init(&qp->sq, cap.max_send_wr ? cap.max_send_wr : 1,
			 cap.max_send_sge ? cap.max_send_sge : 1,
			 sv_send_wqe_size(cap.max_send_sge ? cap.max_send_sge : 1,
					  cap.max_inline_data));
	if (err)
		goto err_free;
	qp->sq.max_wr = cap.max_send_wr;
	qp->srq = !xtgt && a->srq ? to_svsrq(a->srq) : NULL;
	err = sv_qp_shm_create(qp, cap.max_recv_wr, cap.max_recv_sge,
			       qp->srq || xini || xtgt, &fd);
	if (err)
		goto err_sq;
	req = (struct sv_create_qp_req){
		/* A TGT QP: the XRCD's handle stands for the PD's. */
		.pd_handle = xtgt ? sv_xrcd_handle(a->xrcd) : a->pd->handle,
		.scq_handle = xtgt ? UINT32_MAX : a->send_cq->handle,
		.rcq_handle = xini || xtgt ? UINT32_MAX : a->recv_cq->handle,
		.srq_handle = qp->srq ? a->srq->handle : UINT32_MAX,
		.qp_type = a->qp_type,
		.max_send_wr = cap.max_send_wr,
		.max_recv_wr = cap.max_recv_wr,
		.cookie = qp->shm->h.cookie,
	};
	c.fds = &fd;
	err = -sv_ctx_call(ctx, &c);
	close(fd);
	fd = -1;
	if (err)
		goto err_rq;

	ib = &qp->qpx.qp_base;
	ib->context = ctx;
	ib->qp_context = a->qp_context;
	ib->pd = xtgt ? NULL : a->pd;
	ib->send_cq = xtgt ? NULL : a->send_cq;
	ib->recv_cq = xini || xtgt ? NULL : a->recv_cq;
	ib->srq = qp->srq ? a->srq : NULL;
	ib->handle = rep.handle;
	ib->qp_num = rep.qpn;
	ib->state = IBV_QPS_RESET;
	ib->qp_type = a->qp_type;
	ib->events_completed = 0;
	pthread_mutex_init(&ib->mutex, NULL);
	pthread_cond_init(&ib->cond, NULL);
	qp->eng = eng;
	qp->cref = cref;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_post_lock, PTHREAD_PROCESS_PRIVATE);
	qp->type = a->qp_type;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->attr.port_num = 1;
	qp->cap = cap;
	qp->attr.cap = cap;
	qp->sq_sig_all = !xtgt && a->sq_sig_all;
	/* An XRC TGT QP has no PD or CQ: each request names an XRC SRQ,
	 * whose PD and CQ are used (src/engine: the responder). */
	qp->pd_id = xtgt ? 0 : to_svpd(a->pd)->pd_id;
	qp->scq = xtgt ? NULL : to_svcq(a->send_cq);
	/* An XRC INI QP receives nothing; its send CQ stands in. */
	qp->rcq = xtgt ? NULL : to_svcq(xini ? a->send_cq : a->recv_cq);
	/* What a responder run by any process needs to know. */
	qp->shm->qpn = rep.qpn;
	qp->shm->type = a->qp_type;
	qp->shm->pd_id = qp->pd_id;
	qp->shm->rx_pd_id = qp->srq ? qp->srq->pd_id : qp->pd_id;
	qp->shm->rcq_cookie = qp->rcq ? qp->rcq->shm->h.cookie : 0;
	qp->shm->srq_cookie = qp->srq ? qp->srq->shm->h.cookie : 0;
	qp->shm->xrcd_id = xtgt ? sv_xrcd_id(a->xrcd) : 0;
	cq_use(qp, 1);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->usecnt, 1);
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qp->send_ops_flags = a->send_ops_flags;
		sv_qp_ex_init(qp);
	}
	sv_dp_obj_add(qp);
	err = -sv_engine_qp_add(eng, qp);
	if (err)
		goto err_undo;
	a->cap = cap;
	qp->parent = xtgt ? NULL : sv_pd_parent(a->pd);
	sv_pd_use(qp->parent, 1);
	SV_CHECK(sv_check_obj(SV_CK_QP, ib, 1, NULL));
	if (qp->scq)
		SV_CHECK(sv_check_cq_depth(qp->scq, "ibv_create_qp"));
	if (qp->rcq && qp->rcq != qp->scq)
		SV_CHECK(sv_check_cq_depth(qp->rcq, "ibv_create_qp"));
	return ib;

err_undo:
	sv_dp_obj_del(qp);
	cq_use(qp, -1);
	if (qp->srq)
		atomic_fetch_sub(&qp->srq->usecnt, 1);
	destroy_cmd(ctx, rep.handle);
err_rq:
	if (fd >= 0)
		close(fd);
	sv_shm_release(qp->shm);
err_sq:
	sv_wq_free(&qp->sq);
err_free:
	free(qp);
	return sv_null_errno(-err);
}

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
				       struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;

	if (!pd || !qp_init_attr)
		return sv_null_errno(-EINVAL);
	if (sv_fault_verb(SV_FV_CREATE_QP)) /* a fault plan: docs/faults.md */
		return NULL;
	memset(&a, 0, sizeof(a));
	a.qp_context = qp_init_attr->qp_context;
	a.send_cq = qp_init_attr->send_cq;
	a.recv_cq = qp_init_attr->recv_cq;
	a.srq = qp_init_attr->srq;
	a.cap = qp_init_attr->cap;
	a.qp_type = qp_init_attr->qp_type;
	a.sq_sig_all = qp_init_attr->sq_sig_all;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	qp = qp_new(pd->context, &a);
	if (qp)
		qp_init_attr->cap = a.cap; /* what was granted */
	return qp;
}

static struct ibv_qp *create_qp_ex(struct ibv_context *ctx,
				   struct ibv_qp_init_attr_ex *a)
{
	int err;

	if (sv_fault_verb(SV_FV_CREATE_QP)) /* ibv_create_qp_ex: faults.md */
		return NULL;
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		err = sv_xrc_tgt_check(ctx, a); /* xrc.c */
		if (err)
			return sv_null_errno(-err);
	}
	return qp_new(ctx, a);
}

/* NULL unless the QP was made with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (the
 * only way its wr_* ops exist). */
SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct sv_qp *q = to_svqp(qp);

	if (qp->qp_type == IBV_QPT_XRC_RECV)
		return NULL; /* no send queue */
	return q->send_ops_flags ? &q->qpx : NULL;
}

/*
 * Destroys the QP: the daemon frees its number and counts, the engine
 * forgets it, then we wait for acks of the async events the application
 * read for it (rdma-core's rule) and free the queues.
 */
SV_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sv_qp *qp = to_svqp(ibqp);
	struct sv_handle_req req = { .handle = ibqp->handle };
	int err;

	if (sv_xrc_opened(ibqp)) {
		err = sv_xrc_destroy_tgt(ibqp); /* xrc.c */
		if (err)
			errno = err;
		return err;
	}
	SV_CHECK(sv_check_destroy(SV_CK_QP, qp));
	sv_engine_take_arrived(qp->eng);
	err = sv_ctx_call_simple(ibqp->context, SV_OP_DESTROY_QP, &req,
				 sizeof(req), NULL, 0);
	if (err) {
		errno = -err;
		return -err;
	}
	SV_CHECK(sv_check_obj(SV_CK_QP, qp, 0, NULL));
	sv_engine_qp_del(qp);
	if (qp->type == IBV_QPT_XRC_RECV)
		sv_engine_tgt_gone(qp); /* our ibv_open_qp handle serves on */
	/* Its completions still in the CQs go with it, as mlx5 and mlx4
	 * clean them: a program frees what a QP's wr_ids point to when it
	 * destroys the QP (libfabric's rxm polls its shared CQ after closing
	 * an endpoint, and reposts what it finds). */
	if (qp->scq)
		sv_cq_clean(qp->scq, ibqp->qp_num);
	if (qp->rcq && qp->rcq != qp->scq)
		sv_cq_clean(qp->rcq, ibqp->qp_num);
	sv_dp_obj_del(qp);
	sv_dp_wait_acks(&ibqp->mutex, &ibqp->cond, &ibqp->events_completed,
			&qp->events_delivered);
	cq_use(qp, -1);
	if (qp->srq)
		atomic_fetch_sub(&qp->srq->usecnt, 1);
	sv_pd_use(qp->parent, -1);
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_post_lock);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	sv_wq_free(&qp->sq);
	if (qp->type == IBV_QPT_XRC_RECV)
		sv_qp_shm_close(qp->shm); /* ibv_open_qp handles may live on:
					     the daemon marks it dead */
	else
		sv_shm_release(qp->shm);
	free(qp);
	return 0;
}

/* A group's QPs on this device (the daemon's gw_mcast.c keeps them and
 * checks as the kernel does; lid is unused on RoCE, IBTA A17.5.6). */
static int mcast_call(struct ibv_qp *qp, const union ibv_gid *gid,
		      uint16_t lid, uint16_t op)
{
	struct sv_mcast_req req = { .lid = lid };
	int err;

	if (!qp || !gid) {
		errno = EINVAL;
		return EINVAL;
	}
	req.handle = qp->handle;
	memcpy(req.gid, gid->raw, sizeof(req.gid));
	err = sv_ctx_call_simple(qp->context, op, &req, sizeof(req), NULL, 0);
	if (err) {
		errno = -err;
		return -err;
	}
	return 0;
}

SV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			       uint16_t lid)
{
	return mcast_call(qp, gid, lid, SV_OP_ATTACH_MCAST);
}

SV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			       uint16_t lid)
{
	return mcast_call(qp, gid, lid, SV_OP_DETACH_MCAST);
}

void sv_qp_set_ops(struct verbs_context *vctx)
{
	vctx->create_qp_ex = create_qp_ex;
	sv_xrc_set_ops(vctx);
}

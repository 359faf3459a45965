/* SPDX-License-Identifier: MIT */
/*
 * Private glue of the data-path verbs (cq.c, qp.c, post.c, qp_ex.c, srq.c,
 * ah.c, mw.c, dp_obj.c).  The objects themselves are in
 * src/engine/sv_engine.h, the contract with the engine.
 */
#ifndef SV_DP_INT_H
#define SV_DP_INT_H

#include "verbs_int.h"
#include "sv_engine.h"
#include "sv_opcode.h"

/* An address handle: what a UD send needs, resolved at create time. */
struct sv_ah {
	struct ibv_ah ah; /* must be first */
	struct ibv_ah_attr attr;
	union ibv_gid sgid;
	uint32_t pd_id;
};

static inline struct sv_ah *to_svah(struct ibv_ah *ah)
{
	return (struct sv_ah *)ah;
}

/* A UD WQE's destination from its AH (post time): GIDs, the IP header's
 * class, label and hop limit, the AH's PD (checked at execution). */
static inline void sv_wqe_set_ah(struct sv_send_wqe *w, const struct sv_ah *ah)
{
	w->dgid = ah->attr.grh.dgid;
	w->sgid = ah->sgid;
	w->flow_label = ah->attr.grh.flow_label & 0xfffff;
	w->tclass = ah->attr.grh.traffic_class;
	w->hop_limit = ah->attr.grh.hop_limit;
	w->ah_pd_id = ah->pd_id;
}

struct sv_mw {
	struct ibv_mw mw; /* must be first */
	uint32_t pd_id;
};

/* Per-file op setters, called by sv_set_dp_ops. */
void sv_cq_set_ops(struct verbs_context *vctx);
void sv_qp_set_ops(struct verbs_context *vctx);
void sv_post_set_ops(struct verbs_context *vctx);
void sv_srq_set_ops(struct verbs_context *vctx);
void sv_mw_set_ops(struct verbs_context *vctx);

/* xrc.c: XRC domains and the handles of TGT QPs ibv_open_qp gives (a
 * struct sv_qp of no engine: sv_xrc_opened; the creator's TGT QP is
 * qp.c's).  The int verbs return 0 or a positive errno. */
void sv_xrc_set_ops(struct verbs_context *vctx);
uint32_t sv_xrcd_handle(struct ibv_xrcd *xrcd);
/* The domain's device-wide id (a TGT QP's region carries it). */
uint32_t sv_xrcd_id(struct ibv_xrcd *xrcd);
/* ibv_create_qp_ex of a TGT QP: 0, or the errno it answers. */
int sv_xrc_tgt_check(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);
/* qp is a handle from ibv_open_qp (the sv_xrc_*_tgt below take those). */
int sv_xrc_opened(struct ibv_qp *qp);
int sv_xrc_modify_tgt(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask);
int sv_xrc_query_tgt(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		     struct ibv_qp_init_attr *init_attr);
int sv_xrc_destroy_tgt(struct ibv_qp *qp);

/* post.c: ibv_post_send's body for one work request, shared with
 * ibv_bind_mw.  Must hold qp->sq_lock.  Returns 0 or a positive errno. */
int sv_post_one_send(struct sv_qp *qp, const struct ibv_send_wr *wr);
/* Size of a send WQE slot for max_sge SGEs and max_inline bytes. */
size_t sv_send_wqe_size(uint32_t max_sge, uint32_t max_inline);
/* Allocates a ring of at least max_wr slots of wqe_size bytes. */
int sv_wq_init(struct sv_wq *wq, uint32_t max_wr, uint32_t max_sge,
	       size_t wqe_size);
void sv_wq_free(struct sv_wq *wq);

/* qp_ex.c: fills the wr_* pointers of a QP created with send_ops_flags. */
void sv_qp_ex_init(struct sv_qp *qp);
/* The opcodes a QP type accepts on its send queue: sv_wr_takes
 * (sv_opcode.h). */

/*
 * Live objects that async events may name (dp_obj.c).  The async socket may
 * still hold an event for an object the application destroyed since; the
 * kernel drops such events at destroy, so ibv_get_async_event skips them.
 *  - sv_dp_obj_add/del: publish / withdraw obj (a CQ, QP or SRQ pointer);
 *    after del returns no event for obj is counted any more.
 *  - sv_dp_event_delivered: counts the event against its object; -1 when
 *    the object is gone (the caller drops the event).
 *  - sv_dp_event_ack: ibv_ack_async_event's count (wakes a destroy).
 */
void sv_dp_obj_add(void *obj);
void sv_dp_obj_del(void *obj);
/* Waits until every async event read for the object was acked.  Must be
 * called after sv_dp_obj_del. */
void sv_dp_wait_acks(pthread_mutex_t *mutex, pthread_cond_t *cond,
		     const uint32_t *acked, const uint32_t *delivered);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Public verbs that the data path will implement and that do not exist yet:
 * completion channels, CQs, SRQs, QPs, AHs, multicast and ECE.
 *
 * Each entry point is here so that every program linked against rdma-core
 * v44 loads, and so that calling one fails the way the verb reports
 * errors (pointer verbs: NULL and errno; "errno value" verbs: positive
 * EOPNOTSUPP; "-1 and errno" verbs: -1) instead of crashing.  None of them
 * touches its arguments: no object of these kinds can exist yet.
 *
 * When a family lands (cq.c, qp.c, srq.c, ah.c, ...), MOVE its functions
 * there with their real bodies and delete them from this file; the symbol
 * check (tests/compat/abi_symbols.sh) fails on a duplicate or a gap.
 */
#include "verbs_int.h"

#define NOSUP_PTR                                                              \
	do {                                                                   \
		errno = EOPNOTSUPP;                                            \
		return NULL;                                                   \
	} while (0)

#define NOSUP_ERRVAL                                                           \
	do {                                                                   \
		errno = EOPNOTSUPP;                                            \
		return EOPNOTSUPP;                                             \
	} while (0)

#define NOSUP_MINUS1                                                           \
	do {                                                                   \
		errno = EOPNOTSUPP;                                            \
		return -1;                                                     \
	} while (0)

/* Completion channels and CQ events */

SV_EXPORT struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *context)
{
	NOSUP_PTR;
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	NOSUP_ERRVAL;
}

SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel,
			       struct ibv_cq **cq, void **cq_context)
{
	NOSUP_MINUS1;
}

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
}

/* CQs */

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
				       void *cq_context,
				       struct ibv_comp_channel *channel,
				       int comp_vector)
{
	NOSUP_PTR;
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	NOSUP_ERRVAL;
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	NOSUP_ERRVAL;
}

/* SRQs */

SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
					 struct ibv_srq_init_attr *srq_init_attr)
{
	NOSUP_PTR;
}

SV_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
			     int srq_attr_mask)
{
	NOSUP_ERRVAL;
}

SV_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	NOSUP_ERRVAL;
}

SV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	NOSUP_ERRVAL;
}

/* QPs */

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
				       struct ibv_qp_init_attr *qp_init_attr)
{
	NOSUP_PTR;
}

SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	NOSUP_PTR;
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			    int attr_mask)
{
	NOSUP_ERRVAL;
}

SV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			   int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	NOSUP_ERRVAL;
}

/* 0 means "not guaranteed in order", the safe answer for any QP. */
SV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp,
					 enum ibv_wr_opcode op, uint32_t flags)
{
	return 0;
}

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	NOSUP_ERRVAL;
}

SV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	NOSUP_ERRVAL;
}

SV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	NOSUP_ERRVAL;
}

/* Multicast */

SV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			       uint16_t lid)
{
	NOSUP_ERRVAL;
}

SV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			       uint16_t lid)
{
	NOSUP_ERRVAL;
}

/* AHs */

SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd,
				       struct ibv_ah_attr *attr)
{
	NOSUP_PTR;
}

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	NOSUP_ERRVAL;
}

SV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				  struct ibv_wc *wc, struct ibv_grh *grh,
				  struct ibv_ah_attr *ah_attr)
{
	NOSUP_MINUS1;
}

SV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd,
					       struct ibv_wc *wc,
					       struct ibv_grh *grh,
					       uint8_t port_num)
{
	NOSUP_PTR;
}

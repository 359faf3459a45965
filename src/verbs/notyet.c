/* SPDX-License-Identifier: MIT */
/*
 * Public verbs the device does not implement (yet): the data ordering
 * query.  Each answers the way the verb reports errors, so every
 * program linked against rdma-core v44 loads and fails cleanly.
 * The data-path families live in cq.c, qp.c, srq.c, ah.c and mw.c.
 */
#include "verbs_int.h"

/* 0 means "not guaranteed in order", the safe answer for any QP. */
SV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp,
					 enum ibv_wr_opcode op, uint32_t flags)
{
	return 0;
}


/* SPDX-License-Identifier: MIT */
/*
 * ECE (Enhanced Connection Establishment, IBTA 1.4): a QP's vendor options,
 * offered in the CM's REQ and answered in its REP (librdmacm: rdma_cm_id's
 * local and remote ECE, src/rdmacm/cma.c and cma_qp.c).
 *
 * This device has no vendor options (SV_ECE_OPTIONS is 0): its ECE is its
 * vendor id with no options, and of the options a peer offers it accepts
 * none -- the answer names only options both sides support.
 */
#include "verbs_int.h"

/* The ECE options this device implements (none yet). */
#define SV_ECE_OPTIONS 0u

/* As rdma-core: a zero vendor id is no ECE at all (EOPNOTSUPP); then as a
 * provider: comp_mask or another vendor's id EINVAL.  ece is IN/OUT: the
 * options accepted come back in it. */
SV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	if (!ece->vendor_id) {
		errno = EOPNOTSUPP;
		return EOPNOTSUPP;
	}
	if (ece->comp_mask || ece->vendor_id != SV_VENDOR_ID) {
		errno = EINVAL;
		return EINVAL;
	}
	ece->options &= SV_ECE_OPTIONS;
	return 0;
}

/* The QP's ECE: our vendor id and the options in force (none). */
SV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	ece->vendor_id = SV_VENDOR_ID;
	ece->options = SV_ECE_OPTIONS;
	ece->comp_mask = 0;
	return 0;
}

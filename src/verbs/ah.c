/* SPDX-License-Identifier: MIT */
/*
 * Address handles for a RoCE port: every address is a GRH address (a
 * destination GID), the source GID index must name an entry of the port's
 * table, and the daemon counts the AH on its PD.  ibv_init_ah_from_wc
 * reads the 40 bytes in front of every UD receive: an IPv6 header (RoCEv2
 * with IPv6 GIDs, and the IB GRH) or, in its last 20 bytes, an IPv4 header
 * (RoCEv2 with IPv4-mapped GIDs).
 */
#include "dp_int.h"
#include "check.h"
#include "sv_hdr.h"

#include <stdlib.h>
#include <string.h>

static int check_ah_attr(struct ibv_context *ctx, const struct ibv_ah_attr *a,
			 union ibv_gid *sgid)
{
	struct ibv_gid_entry e;
	int err;

	if (a->port_num != 1 || !a->is_global)
		return EINVAL;
	/* The kernel's rdma_fill_sgid_attr: an empty slot ENODATA, past the
	 * table EINVAL. */
	err = _ibv_query_gid_ex(ctx, 1, a->grh.sgid_index, &e, 0, sizeof(e));
	if (err)
		return err;
	*sgid = e.gid;
	return 0;
}

SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd,
				       struct ibv_ah_attr *attr)
{
	struct sv_create_ah_req req;
	struct sv_obj_rep rep;
	union ibv_gid sgid;
	struct sv_ah *ah;
	int err;

	if (!pd || !attr)
		return sv_null_errno(-EINVAL);
	if (sv_fault_verb(SV_FV_CREATE_AH)) /* a fault plan: docs/faults.md */
		return NULL;
	err = check_ah_attr(pd->context, attr, &sgid);
	if (err)
		return sv_null_errno(-err);
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return sv_null_errno(-ENOMEM);
	req = (struct sv_create_ah_req){ .pd_handle = pd->handle };
	err = sv_ctx_call_simple(pd->context, SV_OP_CREATE_AH, &req, sizeof(req),
				 &rep, sizeof(rep));
	if (err) {
		free(ah);
		return sv_null_errno(err);
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->ah.handle = rep.handle;
	ah->attr = *attr;
	ah->sgid = sgid;
	ah->pd_id = to_svpd(pd)->pd_id;
	SV_CHECK(sv_check_obj(SV_CK_AH, &ah->ah, 1, NULL));
	return &ah->ah;
}

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	struct sv_handle_req req = { .handle = ah->handle };
	int err = sv_ctx_call_simple(ah->context, SV_OP_DESTROY_AH, &req,
				     sizeof(req), NULL, 0);

	if (err) {
		errno = -err;
		return -err;
	}
	SV_CHECK(sv_check_obj(SV_CK_AH, ah, 0, NULL));
	free(to_svah(ah));
	return 0;
}

/* Index of gid in the port's table, preferring a RoCEv2 entry; -1 if the
 * port does not have it. */
static int find_gid_index(struct ibv_context *ctx, const union ibv_gid *gid)
{
	struct ibv_gid_entry tbl[SV_GID_TBL_LEN];
	ssize_t n = _ibv_query_gid_table(ctx, tbl, SV_GID_TBL_LEN, 0,
					 sizeof(tbl[0]));
	int found = -1;

	for (ssize_t i = 0; i < n; i++) {
		if (tbl[i].port_num != 1 ||
		    memcmp(&tbl[i].gid, gid, sizeof(*gid)))
			continue;
		if (tbl[i].gid_type == IBV_GID_TYPE_ROCE_V2)
			return (int)tbl[i].gid_index;
		if (found < 0)
			found = (int)tbl[i].gid_index;
	}
	return found;
}

/*
 * Fills ah_attr to answer the sender of wc (a UD receive whose first 40
 * bytes are grh).  Returns 0, or -1 with errno EINVAL when the header is
 * neither IPv6 nor IPv4 or names a GID this port does not have.
 */
SV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				  struct ibv_wc *wc, struct ibv_grh *grh,
				  struct ibv_ah_attr *ah_attr)
{
	union ibv_gid sgid, dgid;
	uint8_t tclass = 0;
	uint32_t flow = 0;
	int idx;

	if (!context || !wc || !ah_attr) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;
	if (!grh) {
		errno = EINVAL;
		return -1;
	}
	{
		const uint8_t *raw = (const uint8_t *)grh;
		const uint8_t *ip4 = raw + 20;

		if (__grh_ipver(raw) == 6) {
			memcpy(sgid.raw, grh_sgid(raw), 16);
			memcpy(dgid.raw, grh_dgid(raw), 16);
			tclass = __grh_tclass(raw);
			flow = __grh_flow(raw);
		} else if (ip4[0] == 0x45) {
			/* IPv4 in the last 20 bytes (sv_resp_exec.c make_grh). */
			sv_gid_set_v4(sgid.raw, ip4_saddr(ip4));
			sv_gid_set_v4(dgid.raw, ip4_daddr(ip4));
			tclass = __ip4_tos(ip4);
		} else {
			errno = EINVAL;
			return -1;
		}
	}
	idx = find_gid_index(context, &dgid);
	if (idx < 0) {
		errno = EINVAL;
		return -1;
	}
	ah_attr->is_global = 1;
	ah_attr->grh.dgid = sgid;
	ah_attr->grh.sgid_index = (uint8_t)idx;
	ah_attr->grh.flow_label = flow;
	ah_attr->grh.hop_limit = 0xff;
	ah_attr->grh.traffic_class = tclass;
	return 0;
}

SV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd,
					       struct ibv_wc *wc,
					       struct ibv_grh *grh,
					       uint8_t port_num)
{
	struct ibv_ah_attr a;

	if (!pd)
		return sv_null_errno(-EINVAL);
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a))
		return NULL;
	return ibv_create_ah(pd, &a);
}

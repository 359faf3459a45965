/* SPDX-License-Identifier: MIT */
/*
 * The op table's contract: what an op handler gets and gives.  The table
 * itself is in conn.c; object ops (pd.c, mr.c, dm.c, ...) add their
 * entries through SVD_OBJECT_OPS below.
 */
#ifndef SVD_OPS_H
#define SVD_OPS_H

#include "svd_int.h"

struct svd_req {
	struct svd_conn *conn;
	const struct sv_msg_hdr *hdr;
	const void *body; /* payload, r->len bytes, size already checked */
	size_t len;
	int *fds; /* received descriptors; an op that keeps one sets it to -1,
		     the rest are closed after the op */
	int nfds;
	struct svd_ufile *uf; /* NEED_UFILE ops: the ufile, viewed by conn */
	struct svd_ctx *view;
	void *rep;	 /* reply payload buffer (SV_MSG_MAX - header), zeroed */
	size_t rep_len;	 /* set by the op */
	int out_fds[SV_MAX_FDS]; /* sent with the reply, then closed */
	int n_out_fds;
};

/* flags of struct svd_op */
#define NEED_UFILE 1u /* hdr.ufile must name a ufile this channel views */
#define VAR_SIZE 2u   /* payload of at least .size bytes (op checks more) */
#define ONE_FD 4u     /* exactly one descriptor attached */
#define OPT_FD 8u     /* at most one descriptor attached */

struct svd_op {
	/* Returns 0 or a negative errno (the reply's status). */
	int (*fn)(struct svd_req *r);
	uint32_t size; /* exact payload size (or minimum with VAR_SIZE) */
	uint32_t flags;
};

#include "svd_mr.h" /* pd.c, mr.c: PD and MR ops */
#include "svd_qp.h" /* cq.c, qp.c, srq.c, ah.c, mw.c: data-path objects */
#include "svd_gw.h" /* gw_mcast.c: multicast groups */

/* res.c */
int svd_op_res_list(struct svd_req *r);
int svd_op_qp_err_set(struct svd_req *r);
int svd_op_qp_err_get(struct svd_req *r);

/* dm.c: device memory (memfd segments) and the MRs on them. */
int svd_op_alloc_dm(struct svd_req *r);
int svd_op_free_dm(struct svd_req *r);
int svd_op_import_dm(struct svd_req *r);
int svd_op_reg_dm_mr(struct svd_req *r);
/* The daemon's memfd of a DM object, or -1 if obj is not a DM: for the
 * engines that execute on DM MRs (they map it, as ALLOC_DM's reply). */
int svd_dm_fd(struct svd_obj *obj);

/* Object ops, one line per op: [SV_OP_X] = { fn, sizeof(req), flags }, */
#define SVD_OBJECT_OPS \
	[SV_OP_RES_LIST] = { svd_op_res_list, sizeof(struct sv_res_req), 0 }, \
	[SV_OP_ALLOC_PD] = { svd_op_alloc_pd, 0, NEED_UFILE }, \
	[SV_OP_DEALLOC_PD] = { svd_op_dealloc_pd, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_IMPORT_PD] = { svd_op_import_pd, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_REG_MR] = { svd_op_reg_mr, sizeof(struct sv_reg_mr_req), NEED_UFILE }, \
	[SV_OP_REG_DMABUF_MR] = { svd_op_reg_dmabuf_mr, sizeof(struct sv_reg_mr_req), NEED_UFILE | ONE_FD }, \
	[SV_OP_REREG_MR] = { svd_op_rereg_mr, sizeof(struct sv_rereg_mr_req), NEED_UFILE }, \
	[SV_OP_DEREG_MR] = { svd_op_dereg_mr, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_IMPORT_MR] = { svd_op_import_mr, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_ALLOC_DM] = { svd_op_alloc_dm, sizeof(struct sv_alloc_dm_req), NEED_UFILE }, \
	[SV_OP_FREE_DM] = { svd_op_free_dm, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_IMPORT_DM] = { svd_op_import_dm, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_REG_DM_MR] = { svd_op_reg_dm_mr, sizeof(struct sv_reg_dm_mr_req), NEED_UFILE }, \
	[SV_OP_ALLOC_NULL_MR] = { svd_op_alloc_null_mr, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_QP_ERR_SET] = { svd_op_qp_err_set, sizeof(struct sv_qp_err), NEED_UFILE }, \
	[SV_OP_QP_ERR_GET] = { svd_op_qp_err_get, sizeof(struct sv_qp_err_get_req), 0 }, \
	[SV_OP_CREATE_CQ] = { svd_op_create_cq, sizeof(struct sv_create_cq_req), NEED_UFILE | ONE_FD }, \
	[SV_OP_DESTROY_CQ] = { svd_op_destroy_cq, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_RESIZE_CQ] = { svd_op_resize_cq, sizeof(struct sv_create_cq_req), NEED_UFILE }, \
	[SV_OP_CREATE_QP] = { svd_op_create_qp, sizeof(struct sv_create_qp_req), NEED_UFILE | ONE_FD }, \
	[SV_OP_MODIFY_QP] = { svd_op_modify_qp, sizeof(struct sv_modify_qp_req), NEED_UFILE }, \
	[SV_OP_DESTROY_QP] = { svd_op_destroy_qp, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_CREATE_SRQ] = { svd_op_create_srq, sizeof(struct sv_create_srq_req), NEED_UFILE | ONE_FD }, \
	[SV_OP_MODIFY_SRQ] = { svd_op_modify_srq, sizeof(struct sv_create_srq_req), NEED_UFILE }, \
	[SV_OP_DESTROY_SRQ] = { svd_op_destroy_srq, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_CREATE_AH] = { svd_op_create_ah, sizeof(struct sv_create_ah_req), NEED_UFILE }, \
	[SV_OP_DESTROY_AH] = { svd_op_destroy_ah, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_ALLOC_MW] = { svd_op_alloc_mw, sizeof(struct sv_alloc_mw_req), NEED_UFILE }, \
	[SV_OP_DEALLOC_MW] = { svd_op_dealloc_mw, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_ATTACH_MCAST] = { svd_op_attach_mcast, sizeof(struct sv_mcast_req), NEED_UFILE }, \
	[SV_OP_DETACH_MCAST] = { svd_op_detach_mcast, sizeof(struct sv_mcast_req), NEED_UFILE }, \
	[SV_OP_OPEN_XRCD] = { svd_op_open_xrcd, sizeof(struct sv_open_xrcd_req), NEED_UFILE | OPT_FD }, \
	[SV_OP_CLOSE_XRCD] = { svd_op_close_xrcd, sizeof(struct sv_handle_req), NEED_UFILE }, \
	[SV_OP_CREATE_XRC_SRQ] = { svd_op_create_xrc_srq, sizeof(struct sv_create_xrc_srq_req), NEED_UFILE | ONE_FD }, \
	[SV_OP_OPEN_QP] = { svd_op_open_qp, sizeof(struct sv_open_qp_req), NEED_UFILE }, \
	SVD_ENGINE_OPS

/* cm.c, cm_addr.c, cm_ib.c: the connection manager (svd_cm.h). */
#include "svd_cm.h"

/* broker.c, keytab.c: the engines' ops (svd_engine.h). */
#include "svd_engine.h"
/* capture.c: `softverbs capture` and the capture rings. */
#include "svd_capture.h"
#include "svd_fault.h"
#define SVD_ENGINE_OPS \
	[SV_OP_ENGINE_ATTACH] = { svd_op_engine_attach, 0, ONE_FD }, \
	[SV_OP_QPN_LOOKUP] = { svd_op_qpn_lookup, sizeof(struct sv_qpn_req), 0 }, \
	[SV_OP_LINK_CONNECT] = { svd_op_link_connect, sizeof(struct sv_link_req), ONE_FD }, \
	[SV_OP_KEY_FD] = { svd_op_key_fd, sizeof(struct sv_key_req), 0 }, \
	[SV_OP_MW_BIND] = { svd_op_mw_bind, sizeof(struct sv_mw_bind_req), 0 }, \
	[SV_OP_KEY_INVALIDATE] = { svd_op_key_invalidate, sizeof(struct sv_key_req), 0 }, \
	[SV_OP_ASYNC_EVENT] = { svd_op_async_event, sizeof(struct sv_async_req), NEED_UFILE }, \
	[SV_OP_QP_PEER] = { svd_op_qp_peer, sizeof(struct sv_qpn_req), 0 }, \
	[SV_OP_SRQ_PEER] = { svd_op_srq_peer, sizeof(struct sv_qpn_req), 0 }, \
	[SV_OP_XRC_EVENT] = { svd_op_xrc_event, sizeof(struct sv_xrc_event_req), 0 }, \
	[SV_OP_WIRE_ATTACH] = { svd_op_wire_attach, 0, 0 }, \
	[SV_OP_MCAST_MEMBERS] = { svd_op_mcast_members, sizeof(struct sv_mcast_members_req), 0 }, \
	SVD_CM_OPS \
	SVD_CAPTURE_OPS \
	SVD_FAULT_OPS

#define SVD_CAPTURE_OPS \
	[SV_OP_CAPTURE_START] = { svd_op_capture_start, sizeof(struct sv_capture_req), 0 }, \
	[SV_OP_CAPTURE_RING] = { svd_op_capture_ring, sizeof(struct sv_capture_ring_req), ONE_FD }, \
	[SV_OP_CAPTURE_STATS] = { svd_op_capture_stats, sizeof(struct sv_capture_rep), 0 },

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Data-path objects in the daemon (cq.c, qp.c, srq.c, ah.c, mw.c): what the
 * "kernel" keeps about CQs, QPs, SRQs, AHs and MWs.  The queues themselves
 * live in the creating process (docs/architecture.md "Queues"); the daemon
 * keeps handles, use counts and the device-wide QPN table, so the engine side
 * of the daemon (broker, wire gateway) can find which process serves a QPN.
 */
#ifndef SVD_QP_H
#define SVD_QP_H

#include "svd_int.h"
#include "svd_mr.h"

struct svd_cq {
	struct svd_obj obj; /* type SVD_OBJ_CQ; usecnt = QPs (and SRQs) on it */
	uint32_t cqe;
	int shm_fd;	    /* the CQ's region (engines produce into it) */
};

struct svd_uxrcd;
struct svd_xrcd;

struct svd_srq {
	struct svd_obj obj; /* type SVD_OBJ_SRQ; usecnt = QPs using it */
	struct svd_pd *pd;  /* holds one use count */
	uint32_t max_wr, max_sge;
	int shm_fd;	    /* the SRQ's region */
	/* XRC SRQs (xrcd.c): the XRCD handle it was made through and its
	 * CQ hold one use count each; srqn is device wide (0: not XRC). */
	struct svd_uxrcd *uxrcd;
	struct svd_cq *cq;
	uint32_t srqn;
};

/*
 * A QP.  qpn is device wide (24 bits, never 0 or 1, not reused at once);
 * obj.owner_pid is the process whose engine serves it: the QP's queues are
 * in that process, so every packet for qpn goes to it -- but an XRC TGT
 * QP, which has no queue, may be served by another process that holds a
 * handle to it (serve_pid, svd_qp_server).
 */
struct svd_qp {
	struct svd_obj obj; /* type SVD_OBJ_QP */
	uint32_t qpn;
	uint32_t qp_type; /* enum ibv_qp_type */
	uint32_t state;	  /* enum ibv_qp_state, as the library last set it */
	uint32_t dest_qpn; /* RC/UC after RTR */
	uint32_t qkey;	   /* UD */
	struct svd_pd *pd; /* each holds one use count */
	struct svd_cq *scq, *rcq;
	struct svd_srq *srq; /* or NULL */
	int shm_fd;	     /* the QP's region (responder block, RQ) */
	uint64_t cookie;     /* its cookie (SV_OP_QP_PEER) */
	uint32_t mcast;	     /* multicast groups it is attached to */
	/* The last error completion its process's checker told (res.c,
	 * SV_OP_QP_ERR_SET); status 0: none. */
	struct sv_qp_err last_err;
	/* XRC TGT QPs (xrcd.c).  The QP itself (in the QPN table, real
	 * NULL) lives while any handle to it does: shares counts them, its
	 * creator's included; a handle from OPEN_QP is a struct svd_qp of
	 * its own whose real names the QP.  uxrcd: the XRCD handle this
	 * handle was made or opened through (one use count on it). */
	struct svd_uxrcd *uxrcd;
	struct svd_xrcd *xrcd; /* the QP's domain (one use count on it) */
	struct svd_qp *real;
	uint32_t shares;
	int orphan; /* its creator's handle is gone, others remain */
	/* The QP: its OPEN_QP handles (linked by next_open), and the
	 * process whose engine serves it (0: none), its creator's first
	 * (svd_qp_server). */
	struct svd_qp *opens, *next_open;
	pid_t serve_pid;
};

/* The process whose engine takes qp's packets: its creator's, but an XRC
 * TGT QP's may move to a process that opened it (xrcd.c). */
static inline pid_t svd_qp_server(const struct svd_qp *qp)
{
	return qp->qp_type == IBV_QPT_XRC_RECV ? qp->serve_pid :
						 qp->obj.owner_pid;
}

struct svd_ah {
	struct svd_obj obj; /* type SVD_OBJ_AH */
	struct svd_pd *pd;
};

struct svd_mw {
	struct svd_obj obj; /* type SVD_OBJ_MW; usecnt unused */
	struct svd_pd *pd;
	uint32_t mw_type; /* 1 or 2 */
	uint32_t rkey;	  /* index << 8 | tag, from the key table */
};

/* The live QP with this number, or NULL. */
struct svd_qp *svd_qp_by_qpn(uint32_t qpn);

/* The queue region the create command r carries (its one fd): sealed
 * against resizing and at least a page, or -EINVAL.  On success the fd is
 * the caller's (taken out of r). */
int svd_take_region_fd(struct svd_req *r);

/*
 * Key table side of memory windows.  Implemented with the MR keys (the
 * engine helper's key table); weak fallbacks in mw.c hand out keys from a
 * private counter until it exists.
 *  - svd_mw_key_alloc: gives mw an rkey (index << 8 | tag) in the
 *    device-wide key space, unbound; 0 or -ENOMEM.
 *  - svd_mw_key_free: the key stops naming mw (and anything bound).
 */
int svd_mw_key_alloc(struct svd_mw *mw);
void svd_mw_key_free(struct svd_mw *mw);

/* xrcd.c: XRC domains, XRC SRQs, TGT QPs' handles.
 *  - svd_xrc_tgt_args: CREATE_QP of an XRC TGT QP: the XRCD handle its
 *    pd_handle names, and no CQ or SRQ; 0 or -EINVAL.
 *  - svd_xrc_tgt_made: the TGT QP qp exists (its uxrcd set): counts it.
 *  - svd_xrc_tgt_gone: qp's handle goes; 1 when the QP must stay (other
 *    handles hold it), 0 when it is to be freed now.
 *  - svd_xrc_tgt_modified: a handle from OPEN_QP modified the QP: its
 *    server routes its answers again. */
int svd_xrc_tgt_args(struct svd_ufile *uf, const struct sv_create_qp_req *req,
		     struct svd_uxrcd **ux);
void svd_xrc_tgt_made(struct svd_qp *qp);
int svd_xrc_tgt_gone(struct svd_qp *qp);
void svd_xrc_tgt_modified(struct svd_qp *real);
struct svd_req;
int svd_op_xrc_event(struct svd_req *r);
/* The live XRC SRQ numbered srqn (its domain's id in *xrcd_id), or NULL. */
struct svd_srq *svd_xrc_srq(uint32_t srqn, uint32_t *xrcd_id);

/* Op handlers (svd_ops.h SVD_OBJECT_OPS). */
struct svd_req;
int svd_op_create_cq(struct svd_req *r);
int svd_op_destroy_cq(struct svd_req *r);
int svd_op_resize_cq(struct svd_req *r);
int svd_op_create_qp(struct svd_req *r);
int svd_op_modify_qp(struct svd_req *r);
int svd_op_destroy_qp(struct svd_req *r);
int svd_op_create_srq(struct svd_req *r);
int svd_op_modify_srq(struct svd_req *r);
int svd_op_destroy_srq(struct svd_req *r);
int svd_op_create_ah(struct svd_req *r);
int svd_op_destroy_ah(struct svd_req *r);
int svd_op_alloc_mw(struct svd_req *r);
int svd_op_dealloc_mw(struct svd_req *r);
int svd_op_qp_peer(struct svd_req *r);
int svd_op_srq_peer(struct svd_req *r);
int svd_op_open_xrcd(struct svd_req *r);
int svd_op_close_xrcd(struct svd_req *r);
int svd_op_create_xrc_srq(struct svd_req *r);
int svd_op_open_qp(struct svd_req *r);

/* Engines that mapped a QP's or an SRQ's region (fd) stop using it: the
 * device destroyed it, whether or not its process is still there to say
 * so.  One word at a fixed place (sv_shm_hdr.dead) is all the daemon
 * writes; the region is at least a page (checked when it is made). */
void svd_region_mark_dead(int fd);

#endif

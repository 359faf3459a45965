/* SPDX-License-Identifier: MIT */
/*
 * PDs, MRs and the device-wide key table (pd.c, mr.c).  Other object files
 * take use counts on a PD through svd_pd_get(); dm.c makes DM MRs with
 * svd_mr_new(kind SVD_MR_DM) so handles, keys and use counts stay in one
 * place.
 */
#ifndef SVD_MR_H
#define SVD_MR_H

#include "svd_int.h"

struct svd_pd {
	struct svd_obj obj; /* type SVD_OBJ_PD; usecnt = MRs, MWs, QPs... */
	uint32_t pd_id;	    /* device-wide id (key table, engines), never 0 */
};

enum svd_mr_kind {
	SVD_MR_USER = 0, /* ibv_reg_mr*: memory of owner_pid */
	SVD_MR_DM,	 /* ibv_reg_dm_mr: addr is an offset in dm */
	SVD_MR_DMABUF,	 /* ibv_reg_dmabuf_mr: addr is an offset in fd */
	SVD_MR_NULL,	 /* ibv_alloc_null_mr: no memory, every address */
};

struct svd_mr {
	struct svd_obj obj; /* type SVD_OBJ_MR; owner_pid = registering pid */
	enum svd_mr_kind kind;
	struct svd_pd *pd;  /* holds one use count on pd */
	struct svd_obj *dm; /* SVD_MR_DM: holds one use count on it */
	int fd;		    /* SVD_MR_DMABUF: the daemon's copy, else -1 */
	uint64_t addr;	    /* start in the owner (DM, dma-buf: offset) */
	uint64_t length;    /* UINT64_MAX: implicit ODP */
	uint64_t iova;	    /* keys accept [iova, iova + length) */
	uint32_t access;
	uint32_t key; /* lkey == rkey: index << 8 | tag */
};

/* Attributes of a new MR, already checked by the caller except for what
 * svd_mr_new checks itself (access flags, page offsets, ranges). */
struct svd_mr_attr {
	enum svd_mr_kind kind;
	uint64_t addr;
	uint64_t length;
	uint64_t iova;
	uint32_t access;
	struct svd_obj *dm; /* SVD_MR_DM; svd_mr_new takes a use count */
	int fd;		    /* SVD_MR_DMABUF; svd_mr_new takes ownership
			       on success only */
	int mem_fault;	    /* SVD_MR_USER: the owner's pages would not pin
			       (sv_reg_mr_req.mem_fault): -EFAULT */
};

/* pd.c */
/* The PD called handle in uf, or NULL (stale or another type). */
struct svd_pd *svd_pd_get(struct svd_ufile *uf, uint32_t handle);

/* mr.c */
/*
 * Checks access flags as the kernel's ib_check_mr_access: REMOTE_WRITE or
 * REMOTE_ATOMIC need LOCAL_WRITE; unknown bits are refused.  Returns 0 or
 * -EINVAL.
 */
int svd_mr_check_access(uint32_t access);
/*
 * Makes an MR on pd for a client of uf: a handle (lowest free), a key, a
 * use count on pd (and on a->dm).  owner is the creating process.
 * Returns 0 with *out set, or a negative errno with nothing changed.
 */
int svd_mr_new(struct svd_ufile *uf, pid_t owner, struct svd_pd *pd,
	       const struct svd_mr_attr *a, struct svd_mr **out);
/* Fills the reply every MR op sends. */
void svd_mr_fill_rep(const struct svd_mr *mr, struct sv_mr_rep *rep);
/* The live MR a key names, or NULL: unknown index, or a tag that belongs
 * to an MR deregistered since (a stale key). */
struct svd_mr *svd_mr_by_key(uint32_t key);

/* Op handlers (svd_ops.h SVD_OBJECT_OPS). */
struct svd_req;
int svd_op_alloc_pd(struct svd_req *r);
int svd_op_dealloc_pd(struct svd_req *r);
int svd_op_import_pd(struct svd_req *r);
int svd_op_reg_mr(struct svd_req *r);
int svd_op_reg_dmabuf_mr(struct svd_req *r);
int svd_op_rereg_mr(struct svd_req *r);
int svd_op_dereg_mr(struct svd_req *r);
int svd_op_import_mr(struct svd_req *r);
int svd_op_alloc_null_mr(struct svd_req *r);

#endif

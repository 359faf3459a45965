/* SPDX-License-Identifier: MIT */
/*
 * libibverbs.so.1 internals.  The public ABI is the system's
 * <infiniband/verbs.h>; nothing here is exported (-fvisibility=hidden and
 * the version script).
 */
#ifndef SV_VERBS_INT_H
#define SV_VERBS_INT_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "sv_client.h"
#include "sv_engine.h"
#include "eng_fault.h"
#include "sv_log.h"
#include "sv_param.h"
#include "sv_proto.h"

#define SV_EXPORT __attribute__((visibility("default")))

#define sv_container_of(ptr, type, member)                                     \
	((type *)((char *)(ptr) - offsetof(type, member)))

/*
 * Our ibv_device.  The pointer right after struct ibv_device mirrors
 * rdma-core's struct verbs_device "ops": Debian's libmlx5 and libefa decide
 * "is this device mine?" by comparing it with their own ops table, so it
 * must point at something that is not theirs.
 */
struct sv_device {
	struct ibv_device dev; /* must be first */
	const void *verbs_device_ops;
	uint32_t index;
	__be64 guid;
};

/*
 * Our ibv_context.  verbs_context must be first: the static inlines of
 * verbs.h find it from ibv_context by container_of and check .sz.
 */
struct sv_context {
	struct verbs_context vctx; /* must be first; its .context is last */
	uint32_t ufile;		   /* daemon's ufile id */
	uint32_t ctx_id;	   /* daemon's id of this view */
	uint64_t instance;	   /* daemon instance that knows this ufile */
	int fatal_reported;	   /* IBV_EVENT_DEVICE_FATAL already returned */
};

static inline struct sv_context *to_svctx(struct ibv_context *ctx)
{
	return sv_container_of(ctx, struct sv_context, vctx.context);
}

/* What the engine needs to know of ctx (sv_engine.h struct sv_ctx_ref). */
static inline struct sv_ctx_ref sv_cref(struct ibv_context *ctx)
{
	struct sv_context *c = to_svctx(ctx);
	struct sv_ctx_ref r = { .ctx = ctx,
				.ufile = c->ufile,
				.ctx_id = c->ctx_id,
				.instance = c->instance };

	return r;
}

/*
 * A control call on behalf of a context: fills ufile, instance and the
 * cmd_fd to attach with.  Returns 0 or a negative errno.
 */
int sv_ctx_call(struct ibv_context *ctx, struct sv_call *c);
int sv_ctx_call_simple(struct ibv_context *ctx, uint16_t op, const void *req,
		       size_t req_len, void *rep, size_t rep_cap);

/* device.c */
struct sv_device *sv_get_device(int *err);

/* dummy_ops.c: every op answers EOPNOTSUPP until a family file sets it. */
void sv_set_dummy_ops(struct verbs_context *vctx);

/* query.c */
void sv_set_query_ops(struct verbs_context *vctx);
/* Port 1's active MTU now: 0, or a negative errno (daemon gone). */
int sv_port_active_mtu(struct ibv_context *ctx, enum ibv_mtu *mtu);

/*
 * PDs and MRs (pd.c, mr.c).  The verbs.h objects are wrapped so the library
 * knows what each one is: rereg refuses every MR that is not SV_MR_REGULAR,
 * dereg gives fork protection back only for the ranges it took it for, and
 * the data path reads access and iova from here.
 */
struct sv_pd {
	struct ibv_pd pd; /* must be first */
	int imported;	  /* made by ibv_import_pd */
	uint32_t pd_id;	  /* device-wide PD identity (the data path checks
			     MR/MW/AH/SRQ PD == QP PD with it) */
	/* A parent domain (ibv_alloc_parent_domain) stands for `protection`:
	 * the same handle and pd_id, so every verb given it acts on that PD.
	 * uses: a PD's parent domains, or a parent domain's CQs, QPs and
	 * SRQs; ibv_dealloc_pd answers EBUSY while it is not 0 (as mlx5). */
	struct sv_pd *protection;
	struct sv_td *td;
	void *pd_context;
	atomic_int uses;
};

/* A thread domain (ibv_alloc_td): a promise the application keeps about
 * its threads, which this device's locks do not need; uses: the parent
 * domains made with it. */
struct sv_td {
	struct ibv_td td; /* must be first */
	atomic_int uses;
};

/* pd when it is a parent domain, else NULL: what a CQ, QP or SRQ made on
 * pd keeps, so that it never reads pd again (an imported view may be
 * unimported before the object goes). */
struct ibv_pd *sv_pd_parent(struct ibv_pd *pd);
/* A CQ, QP or SRQ was made on parent domain `parent` (delta 1) or was
 * destroyed (-1); nothing for NULL. */
void sv_pd_use(struct ibv_pd *parent, int delta);

/* pd.c: sets alloc_td, dealloc_td and alloc_parent_domain on a new
 * context. */
void sv_set_pd_ops(struct verbs_context *vctx);

static inline struct sv_pd *to_svpd(struct ibv_pd *pd)
{
	return sv_container_of(pd, struct sv_pd, pd);
}

enum sv_mr_kind {
	SV_MR_REGULAR = 0, /* ibv_reg_mr*: memory of this process */
	SV_MR_IMPORTED,	   /* ibv_import_mr: addr NULL, owner elsewhere */
	SV_MR_DM,	   /* ibv_reg_dm_mr: addr is the offset in the DM */
	SV_MR_DMABUF,	   /* ibv_reg_dmabuf_mr: addr is the offset */
	SV_MR_NULL,	   /* ibv_alloc_null_mr */
};

struct sv_mr {
	struct ibv_mr mr; /* must be first */
	enum sv_mr_kind kind;
	uint32_t access;  /* access in force (the daemon's answer) */
	uint64_t iova;	  /* first address the keys accept */
	int dontfork;	  /* [addr, addr+length) was given ibv_dontfork_range */
};

static inline struct sv_mr *to_svmr(struct ibv_mr *mr)
{
	return sv_container_of(mr, struct sv_mr, mr);
}

/*
 * Wraps a daemon reply into a new MR of the given kind on pd (for dm.c:
 * kind SV_MR_DM, addr = offset in the DM).  Sets context, pd, addr,
 * length, handle, keys.  Returns NULL on ENOMEM (errno set); the caller
 * then deregisters rep->handle itself.
 */
struct ibv_mr *sv_mr_wrap(struct ibv_pd *pd, enum sv_mr_kind kind,
			  const struct sv_mr_rep *rep, void *addr,
			  size_t length);
/* Deregisters an MR of any kind in the daemon and frees it on success.
 * Returns 0 or a positive errno (ibv_dereg_mr's convention). */
int sv_mr_dereg(struct ibv_mr *mr);

/* memcheck.c: 0 when the kernel's pinning would take [addr, addr + len)
 * (mapped throughout; writable when write, else readable), -EFAULT when
 * it would fail.  Ranges that are empty or wrap answer 0 (the daemon
 * refuses them with EINVAL). */
int sv_mem_check(const void *addr, size_t len, int write);

/* mr.c: sets advise_mr on a new context. */
void sv_set_mr_ops(struct verbs_context *vctx);

/* dm.c: sets alloc_dm, free_dm and reg_dm_mr on a new context. */
void sv_set_dm_ops(struct verbs_context *vctx);

/* Data path (cq.c, qp.c, post.c, srq.c, mw.c ...): sets their ops on a new
 * context. */
void sv_set_dp_ops(struct verbs_context *vctx);
/* dp_obj.c, for ibv_get_async_event / ibv_ack_async_event: CQ, QP and SRQ
 * events are counted so destroy can wait for their acks.  delivered
 * returns -1 when the event names an object destroyed since (drop it). */
int sv_dp_event_delivered(struct ibv_async_event *ev);
void sv_dp_event_ack(struct ibv_async_event *ev);

/* fork.c (seed verbs) */
void sv_fork_env_init(void);
/* Exported (IBVERBS_1.1) but declared only in rdma-core's private
 * driver.h; ibv_reg_mr/ibv_dereg_mr/ibv_rereg_mr call them as v44 does. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

/* IBVERBS_PRIVATE_34 symbols we implement (rdma-core's driver.h is not
 * installed by libibverbs-dev, so the prototypes live here). */
int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port_num,
		       unsigned int index, int *type);

/* Sets errno from a negative errno and returns NULL: for pointer verbs. */
static inline void *sv_null_errno(int neg)
{
	errno = neg < 0 ? -neg : (neg ? neg : EINVAL);
	return NULL;
}

#endif

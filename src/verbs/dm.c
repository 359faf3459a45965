/* SPDX-License-Identifier: MIT */
/*
 * Device memory: ibv_alloc_dm / ibv_free_dm / ibv_reg_dm_mr (verbs_context
 * ops behind the static inlines of verbs.h), ibv_memcpy_to/from_dm (the
 * function pointers in struct ibv_dm), ibv_import_dm / ibv_unimport_dm.
 *
 * The memory is a memfd the daemon owns (src/daemon/dm.c); every process
 * that allocates or imports a DM maps its own copy of it MAP_SHARED, so all
 * of them see the same bytes, and the engine reaches it through DM MRs.
 */
#include "verbs_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sv_sock.h"

struct sv_dm {
	struct ibv_dm dm; /* must be first */
	void *addr;	  /* our MAP_SHARED view of the daemon's memfd */
	uint64_t length;  /* bytes the user asked for: the memcpy bounds */
	size_t map_len;
};

static inline struct sv_dm *to_svdm(struct ibv_dm *dm)
{
	return sv_container_of(dm, struct sv_dm, dm);
}

/*
 * The rules of mlx5, the only v44 provider with device memory: out of
 * range is EFAULT, then an offset or a length that is not a multiple of 4
 * is EINVAL (MEMIC is reached in 4-byte words).  Our memory has no such
 * limit, but a program that works here must work on the hardware.
 */
static int check_bounds(const struct sv_dm *d, uint64_t off, size_t len)
{
	if (off > d->length || len > d->length - off)
		return EFAULT;
	if ((off & 3) || (len & 3))
		return EINVAL;
	return 0;
}

static int memcpy_to_dm(struct ibv_dm *dm, uint64_t off, const void *src,
			size_t len)
{
	struct sv_dm *d = to_svdm(dm);
	int err = check_bounds(d, off, len);

	if (!err && len)
		memcpy((char *)d->addr + off, src, len);
	return err;
}

static int memcpy_from_dm(void *dst, struct ibv_dm *dm, uint64_t off,
			  size_t len)
{
	struct sv_dm *d = to_svdm(dm);
	int err = check_bounds(d, off, len);

	if (!err && len)
		memcpy(dst, (char *)d->addr + off, len);
	return err;
}

static int dm_call(struct ibv_context *ctx, uint16_t op, uint32_t handle)
{
	struct sv_handle_req req = { .handle = handle };

	return sv_ctx_call_simple(ctx, op, &req, sizeof(req), NULL, 0);
}

/*
 * Turns an ALLOC_DM/IMPORT_DM reply and its memfd into a struct ibv_dm.
 * Consumes fd.  Returns NULL with errno set on failure (the caller decides
 * whether the daemon's object must go).
 */
static struct ibv_dm *dm_wrap(struct ibv_context *ctx,
			      const struct sv_dm_rep *rep, int fd)
{
	struct sv_dm *d;
	int err;

	if (!rep->length || rep->map_len < rep->length ||
	    rep->map_len > SIZE_MAX) {
		close(fd);
		return sv_null_errno(-EPROTO);
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		close(fd);
		return sv_null_errno(-ENOMEM);
	}
	d->addr = mmap(NULL, rep->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fd, 0);
	err = -errno;
	/* The mapping holds the memory; the descriptor is not needed. */
	close(fd);
	if (d->addr == MAP_FAILED) {
		free(d);
		return sv_null_errno(err);
	}
	d->length = rep->length;
	d->map_len = rep->map_len;
	d->dm.context = ctx;
	d->dm.memcpy_to_dm = memcpy_to_dm;
	d->dm.memcpy_from_dm = memcpy_from_dm;
	d->dm.comp_mask = IBV_DM_MASK_HANDLE;
	d->dm.handle = rep->handle;
	return &d->dm;
}

/* Sends op with a handle request and receives sv_dm_rep plus the memfd. */
static int dm_fetch(struct ibv_context *ctx, uint16_t op,
		    const void *req, size_t req_len, struct sv_dm_rep *rep,
		    int *fd)
{
	struct sv_call c = { .op = op,
			     .req = req,
			     .req_len = req_len,
			     .rep = rep,
			     .rep_cap = sizeof(*rep),
			     .rfds = fd,
			     .max_rfds = 1 };
	int err;

	*fd = -1;
	err = sv_ctx_call(ctx, &c);
	if (err)
		return err;
	if (c.rep_len != sizeof(*rep) || c.nrfds != 1) {
		sv_close_fds(fd, c.nrfds);
		return -EPROTO;
	}
	return 0;
}

static struct ibv_dm *alloc_dm(struct ibv_context *ctx,
			       struct ibv_alloc_dm_attr *attr)
{
	struct sv_alloc_dm_req req;
	struct sv_dm_rep rep;
	struct ibv_dm *dm;
	int fd, err;

	if (!attr)
		return sv_null_errno(-EINVAL);
	/* mlx5 checks comp_mask in the library; the daemon checks the rest
	 * (length 0 or above max_dm_size: EINVAL). */
	if (attr->comp_mask)
		return sv_null_errno(-EINVAL);
	req = (struct sv_alloc_dm_req){ .length = attr->length,
					.log_align_req = attr->log_align_req };
	err = dm_fetch(ctx, SV_OP_ALLOC_DM, &req, sizeof(req), &rep, &fd);
	if (err)
		return sv_null_errno(err);
	dm = dm_wrap(ctx, &rep, fd);
	if (!dm) {
		err = errno;
		dm_call(ctx, SV_OP_FREE_DM, rep.handle);
		errno = err;
	}
	return dm;
}

/* The daemon's free comes first: while MRs are on the DM it answers EBUSY
 * and the DM stays usable here. */
static int free_dm(struct ibv_dm *dm)
{
	struct sv_dm *d = to_svdm(dm);
	int err = dm_call(dm->context, SV_OP_FREE_DM, dm->handle);

	if (err)
		return -err;
	munmap(d->addr, d->map_len);
	free(d);
	return 0;
}

/* What a DM MR may allow (mlx5's set; the daemon checks it again). */
#define DM_MR_ACCESS                                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                   \
	 IBV_ACCESS_ZERO_BASED)

/*
 * A DM MR is zero based: its keys take offsets from dm_offset, and
 * mr->addr is NULL (rdma-core's ibv_cmd_reg_dm_mr).  Its keys are
 * device-wide like any MR's and it holds a use count on the DM and the PD.
 */
static struct ibv_mr *reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm,
				uint64_t off, size_t len, unsigned int access)
{
	struct sv_reg_dm_mr_req req;
	struct sv_mr_rep rep;
	struct ibv_mr *mr;
	int err;

	if (!pd || !dm || (access & ~DM_MR_ACCESS))
		return sv_null_errno(-EINVAL);
	/* ibv_reg_dm_mr(3): "user must set IBV_ACCESS_ZERO_BASED". */
	if (!(access & IBV_ACCESS_ZERO_BASED))
		return sv_null_errno(-EINVAL);
	/* Both handles must name objects of the same ufile. */
	if (to_svctx(pd->context)->ufile != to_svctx(dm->context)->ufile)
		return sv_null_errno(-EINVAL);
	req = (struct sv_reg_dm_mr_req){ .offset = off,
					 .length = len,
					 .dm_handle = dm->handle,
					 .pd_handle = pd->handle,
					 .access = access };
	err = sv_ctx_call_simple(pd->context, SV_OP_REG_DM_MR, &req,
				 sizeof(req), &rep, sizeof(rep));
	if (err)
		return sv_null_errno(err);
	mr = sv_mr_wrap(pd, SV_MR_DM, &rep, NULL, len);
	if (!mr) {
		err = errno;
		dm_call(pd->context, SV_OP_DEREG_MR, rep.handle);
		errno = err;
	}
	return mr;
}

/* Returns the DM called dm_handle in ctx's ufile, mapped into this
 * process, or NULL with errno (ENOENT: no such handle; EINVAL: not a DM). */
SV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *ctx,
				       uint32_t dm_handle)
{
	struct sv_handle_req req = { .handle = dm_handle };
	struct sv_dm_rep rep;
	int fd, err;

	if (!ctx)
		return sv_null_errno(-EINVAL);
	err = dm_fetch(ctx, SV_OP_IMPORT_DM, &req, sizeof(req), &rep, &fd);
	if (err)
		return sv_null_errno(err);
	/* A failed import changes nothing in the daemon. */
	return dm_wrap(ctx, &rep, fd);
}

/* Drops this process's view only; the DM lives on for the ufile. */
SV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	struct sv_dm *d;

	if (!dm)
		return;
	d = to_svdm(dm);
	munmap(d->addr, d->map_len);
	free(d);
}

void sv_set_dm_ops(struct verbs_context *vctx)
{
	vctx->alloc_dm = alloc_dm;
	vctx->free_dm = free_dm;
	vctx->reg_dm_mr = reg_dm_mr;
}

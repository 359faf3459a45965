/* SPDX-License-Identifier: MIT */
/*
 * Device memory (ibv_alloc_dm).  A real NIC has a small on-chip memory the
 * process maps through its cmd_fd; ours is a memfd owned by the daemon.  The
 * daemon keeps its copy until the DM is freed or the ufile dies, so the
 * memory outlives the process that allocated it as long as anybody holds
 * the cmd_fd (ibv_import_dm in another process maps the same pages).
 *
 * Every process gets its own copy of the memfd and maps it MAP_SHARED.  The
 * memfd is sealed against shrinking and growing: a client that ftruncate()s
 * its copy gets EPERM instead of making the other processes' mappings fault.
 */
#include "svd_mr.h"
#include "svd_ops.h"
#include "sv_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define DM_PAGE 4096ULL

struct svd_dm {
	struct svd_obj obj; /* type SVD_OBJ_DM; usecnt = MRs on it */
	int memfd;
	uint64_t length;  /* what the user asked for: memcpy and MR bounds */
	uint64_t map_len; /* memfd size, whole pages */
	uint32_t log_align;
};

static void dm_destroy(struct svd_obj *obj)
{
	struct svd_dm *dm = (struct svd_dm *)obj;

	close(dm->memfd);
	free(dm);
}

static void dm_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_dm *dm = (const struct svd_dm *)obj;

	e->type = SV_RES_DM;
	e->pd_handle = UINT32_MAX;
	e->length = dm->length;
	e->flags = dm->log_align; /* requested alignment, log2 */
}

/* The DM a FREE_DM or IMPORT_DM names; its pad must be zero. */
static int dm_lookup(struct svd_req *r, struct svd_obj **out)
{
	const struct sv_handle_req *req = r->body;

	if (req->pad)
		return -EINVAL;
	return svd_handle_lookup(r->uf, req->handle, SVD_OBJ_DM, out);
}

/* Reply shared by ALLOC_DM and IMPORT_DM: the sizes and a copy of the
 * memfd (sent, then closed by the dispatcher). */
static int reply_dm(struct svd_req *r, const struct svd_dm *dm)
{
	struct sv_dm_rep *rep = r->rep;
	int fd = fcntl(dm->memfd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	rep->handle = dm->obj.handle;
	rep->length = dm->length;
	rep->map_len = dm->map_len;
	r->rep_len = sizeof(*rep);
	r->out_fds[0] = fd;
	r->n_out_fds = 1;
	return 0;
}

int svd_op_alloc_dm(struct svd_req *r)
{
	const struct sv_alloc_dm_req *req = r->body;
	struct svd_dm *dm;
	int err;

	/* As mlx5: unknown comp_mask bits and lengths beyond max_dm_size are
	 * EINVAL; 0 bytes is too (the kernel's MEMIC allocator). */
	if (req->comp_mask || !req->length || req->length > SV_MAX_DM_SIZE)
		return -EINVAL;
	/* The DM's device address is offset 0 of its own segment, so every
	 * alignment is met; only nonsense (a shift past 63) is refused. */
	if (req->log_align_req >= 64)
		return -EINVAL;
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return -ENOMEM;
	dm->length = req->length;
	dm->map_len = (req->length + DM_PAGE - 1) & ~(DM_PAGE - 1);
	dm->log_align = req->log_align_req;
	dm->memfd =
		memfd_create("softverbs-dm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (dm->memfd < 0) {
		err = -errno;
		goto err_free;
	}
	if (ftruncate(dm->memfd, (off_t)dm->map_len) < 0 ||
	    fcntl(dm->memfd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		err = errno == EFBIG ? -ENOMEM : -errno;
		goto err_close;
	}
	dm->obj.type = SVD_OBJ_DM;
	dm->obj.owner_pid = r->conn->pid;
	dm->obj.destroy = dm_destroy;
	dm->obj.describe = dm_describe;
	err = svd_handle_alloc(r->uf, &dm->obj);
	if (err)
		goto err_close;
	err = reply_dm(r, dm);
	if (err)
		goto err_handle;
	sv_dbg("ufile %#x dm#%u: %llu bytes for pid %d", r->uf->id,
	       dm->obj.handle, (unsigned long long)dm->length,
	       (int)r->conn->pid);
	return 0;

err_handle:
	svd_handle_free(&dm->obj);
err_close:
	close(dm->memfd);
err_free:
	free(dm);
	return err;
}

int svd_op_free_dm(struct svd_req *r)
{
	struct svd_obj *o;
	int err = dm_lookup(r, &o);

	if (err)
		return err;
	if (o->usecnt)
		return -EBUSY; /* MRs on it (the kernel's dm->usecnt) */
	sv_dbg("ufile %#x dm#%u: freed", r->uf->id, o->handle);
	svd_handle_free(o);
	o->destroy(o);
	return 0;
}

int svd_op_import_dm(struct svd_req *r)
{
	struct svd_obj *o;
	int err = dm_lookup(r, &o);

	if (err)
		return err;
	return reply_dm(r, (struct svd_dm *)o);
}

/* Access a DM MR may have: the remote and local data bits and ZERO_BASED
 * (mlx5's allowed set; no MW_BIND, ON_DEMAND or HUGETLB on device memory). */
#define DM_MR_ACCESS                                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                   \
	 IBV_ACCESS_ZERO_BASED)

/* Checks in the order of the kernel's DM_MR_REG handler: objects, access
 * bits, ZERO_BASED, the access rules, then the range. */
int svd_op_reg_dm_mr(struct svd_req *r)
{
	const struct sv_reg_dm_mr_req *req = r->body;
	struct svd_mr_attr a = { .kind = SVD_MR_DM, .fd = -1 };
	struct svd_obj *dmo, *pdo;
	struct svd_dm *dm;
	struct svd_mr *mr;
	int err;

	if (req->pad)
		return -EINVAL;
	err = svd_handle_lookup(r->uf, req->pd_handle, SVD_OBJ_PD, &pdo);
	if (!err)
		err = svd_handle_lookup(r->uf, req->dm_handle, SVD_OBJ_DM,
					&dmo);
	if (err)
		return err;
	dm = (struct svd_dm *)dmo;
	if (req->access & ~DM_MR_ACCESS ||
	    !(req->access & IBV_ACCESS_ZERO_BASED))
		return -EINVAL;
	err = svd_mr_check_access(req->access);
	if (err)
		return err;
	if (req->offset > dm->length || req->length > dm->length - req->offset)
		return -EINVAL;
	a.addr = req->offset;
	a.length = req->length;
	a.iova = 0;
	a.access = req->access;
	a.dm = &dm->obj;
	/* The memory is the daemon's (kind SVD_MR_DM): owner_pid only tells
	 * `softverbs res show` who registered it. */
	err = svd_mr_new(r->uf, r->conn->pid, (struct svd_pd *)pdo, &a, &mr);
	if (err)
		return err;
	svd_mr_fill_rep(mr, r->rep);
	r->rep_len = sizeof(struct sv_mr_rep);
	sv_dbg("ufile %#x dm#%u: mr#%u [%llu, +%llu)", r->uf->id,
	       dm->obj.handle, mr->obj.handle, (unsigned long long)req->offset,
	       (unsigned long long)req->length);
	return 0;
}

int svd_dm_fd(struct svd_obj *obj)
{
	if (!obj || obj->type != SVD_OBJ_DM)
		return -1;
	return ((struct svd_dm *)obj)->memfd;
}

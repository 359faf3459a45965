/* SPDX-License-Identifier: MIT */
/*
 * Memory regions and the device-wide key table.
 *
 * An MR is a description, never a pin: the daemon records (owner, range,
 * iova, access, PD) and the engines check every access against it when a
 * WQE executes.  So registering 64 TiB costs what registering a page does.
 *
 * Keys: key = index << 8 | tag.  The index names a slot of the key table;
 * the slot's tag advances every time the slot is handed out again, so a key
 * kept after ibv_dereg_mr does not name the MR that reuses its slot (until
 * the 8-bit tag wraps, as on hardware).  lkey == rkey.  Keys are kept
 * across ibv_rereg_mr.
 */
#include "svd_mr.h"
#include "svd_ops.h"
#include "svd_engine.h"
#include "sv_log.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE_OFF(x) ((x) & 4095u)

/* Every bit ib_check_mr_access lets through: the classic bits 0..7 and the
 * optional range (drivers ignore optional bits they do not implement). */
#define KNOWN_ACCESS ((((uint32_t)IBV_ACCESS_HUGETLB << 1) - 1) | \
		      (uint32_t)IBV_ACCESS_OPTIONAL_RANGE)
/* The optional bits this device honours; others are dropped. */
#define KEPT_ACCESS ((((uint32_t)IBV_ACCESS_HUGETLB << 1) - 1) | \
		     (uint32_t)IBV_ACCESS_RELAXED_ORDERING)
/* ibv_reg_dmabuf_mr(3): the flags a dma-buf MR may have. */
#define DMABUF_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
		       IBV_ACCESS_RELAXED_ORDERING)

/* Key table.  Slot 0 is never used, so no valid key is below 256.  Slots
 * are handed out lowest free first (svd_ida: O(1) whatever the number of
 * live MRs). */
struct key_slot {
	struct svd_mr *mr;
	uint8_t tag;
};

static struct key_slot *keys;
static uint32_t keys_cap; /* slots allocated */
static struct svd_ida key_ids;

static int key_alloc(struct svd_mr *mr)
{
	int64_t i;

	if (!key_ids.limit) {
		svd_ida_init(&key_ids, SV_MAX_MR + 1);
		if (svd_ida_set(&key_ids, 0))
			return -ENOMEM;
	}
	i = svd_ida_alloc(&key_ids);
	if (i < 0)
		return -ENOMEM; /* max_mr reached, or no memory */
	if ((uint32_t)i >= keys_cap) {
		uint32_t cap = key_ids.cap;
		struct key_slot *n = realloc(keys, cap * sizeof(*n));

		if (!n) {
			svd_ida_free(&key_ids, (uint32_t)i);
			return -ENOMEM;
		}
		/* Fresh slots start at a tag from the instance id, so keys
		 * of two daemon lives rarely look alike. */
		for (uint32_t j = keys_cap; j < cap; j++) {
			n[j].mr = NULL;
			n[j].tag = (uint8_t)(svd.instance >> (8 * (j & 7)));
		}
		keys = n;
		keys_cap = cap;
	}
	keys[i].tag++;
	keys[i].mr = mr;
	mr->key = (uint32_t)i << 8 | keys[i].tag;
	return 0;
}

static void key_free(struct svd_mr *mr)
{
	uint32_t i = mr->key >> 8;

	if (i < keys_cap && keys[i].mr == mr) {
		keys[i].mr = NULL;
		svd_ida_free(&key_ids, i);
	}
}

struct svd_mr *svd_mr_by_key(uint32_t key)
{
	uint32_t i = key >> 8;

	if (i == 0 || i >= keys_cap || !keys[i].mr ||
	    keys[i].tag != (uint8_t)key)
		return NULL;
	return keys[i].mr;
}

int svd_mr_check_access(uint32_t access)
{
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & ~KNOWN_ACCESS)
		return -EINVAL;
	return 0;
}

/* The range checks a driver makes at registration (ib_umem_get and the ODP
 * rules of ibv_cmd_reg_mr): implicit ODP is exactly addr 0, length
 * UINT64_MAX, ON_DEMAND. */
static int check_range(uint64_t addr, uint64_t length, uint32_t access)
{
	if (length == UINT64_MAX && (access & IBV_ACCESS_ON_DEMAND))
		return addr ? -EINVAL : 0;
	if (!length || length > SV_MAX_MR_SIZE || addr + length < addr)
		return -EINVAL;
	/* Pinning page 0 would fail with EFAULT; we pin nothing but keep
	 * the answer.  ODP registers address space, not pages. */
	if (!addr && !(access & IBV_ACCESS_ON_DEMAND))
		return -EFAULT;
	return 0;
}

/* dma-buf MRs alive: each holds a descriptor in the daemon. */
static uint32_t ndmabuf;

static void mr_destroy(struct svd_obj *obj)
{
	struct svd_mr *mr = (struct svd_mr *)obj;

	svd_keytab_unpublish(mr->key);
	key_free(mr);
	if (mr->pd && mr->pd->obj.usecnt)
		mr->pd->obj.usecnt--;
	if (mr->dm && mr->dm->usecnt)
		mr->dm->usecnt--;
	if (mr->fd >= 0) {
		close(mr->fd);
		ndmabuf--;
	}
	free(mr);
}

static void mr_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_mr *mr = (const struct svd_mr *)obj;

	e->type = SV_RES_MR;
	e->lkey = mr->key;
	e->rkey = mr->key;
	e->pd_handle = mr->pd ? mr->pd->obj.handle : UINT32_MAX;
	e->access = mr->access;
	e->iova = mr->iova;
	e->length = mr->length;
	e->flags = (mr->kind == SVD_MR_DM ? 1u : 0) |
		   (mr->kind == SVD_MR_DMABUF ? 2u : 0) |
		   (mr->kind == SVD_MR_NULL ? 4u : 0);
	if (mr->kind == SVD_MR_NULL)
		e->rkey = 0;
}

int svd_mr_new(struct svd_ufile *uf, pid_t owner, struct svd_pd *pd,
	       const struct svd_mr_attr *a, struct svd_mr **out)
{
	uint32_t access = a->access;
	struct svd_mr *mr;
	int err;

	if (a->kind != SVD_MR_DM && PAGE_OFF(a->addr) != PAGE_OFF(a->iova))
		return -EINVAL;
	err = svd_mr_check_access(access);
	if (err)
		return err;
	access &= KEPT_ACCESS;
	/* A DM MR may be empty: the kernel's DM_MR_REG handler checks only
	 * that [offset, offset + length) lies in the DM (dm.c did). */
	if (a->kind == SVD_MR_NULL) {
		if (a->addr || a->iova || a->length != UINT64_MAX)
			err = -EINVAL;
	} else if (a->kind == SVD_MR_USER) {
		err = check_range(a->addr, a->length, access);
		/* Where ib_umem_get fails: after the range, never for ODP
		 * (not pinned). */
		if (!err && a->mem_fault && !(access & IBV_ACCESS_ON_DEMAND))
			err = -EFAULT;
	}
	else if ((a->kind != SVD_MR_DM && !a->length) ||
		 a->addr + a->length < a->addr)
		err = -EINVAL;
	if (err)
		return err;
	if (a->kind == SVD_MR_DMABUF && (access & ~DMABUF_ACCESS))
		return -EINVAL;
	if (a->kind == SVD_MR_DM && !a->dm)
		return -EINVAL;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->obj.type = SVD_OBJ_MR;
	mr->obj.owner_pid = owner;
	mr->obj.destroy = mr_destroy;
	mr->obj.describe = mr_describe;
	mr->kind = a->kind;
	mr->fd = -1;
	mr->addr = a->addr;
	mr->length = a->length;
	/* "Specifying 0 for hca_va has the same effect as ZERO_BASED". */
	mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : a->iova;
	mr->access = access;
	err = key_alloc(mr);
	if (err)
		goto err_free;
	err = svd_handle_alloc(uf, &mr->obj);
	if (err)
		goto err_key;
	/* Published: from here on only counts and ownership change. */
	mr->pd = pd;
	pd->obj.usecnt++;
	if (a->kind == SVD_MR_DM) {
		mr->dm = a->dm;
		mr->dm->usecnt++;
	}
	if (a->kind == SVD_MR_DMABUF) {
		mr->fd = a->fd;
		ndmabuf++;
	}
	svd_keytab_publish(mr);
	*out = mr;
	sv_dbg("ufile %#x mr#%u: key %#x len %#llx access %#x pid %d", uf->id,
	       mr->obj.handle, mr->key, (unsigned long long)mr->length,
	       mr->access, (int)owner);
	return 0;

err_key:
	key_free(mr);
err_free:
	free(mr);
	return err;
}

void svd_mr_fill_rep(const struct svd_mr *mr, struct sv_mr_rep *rep)
{
	rep->handle = mr->obj.handle;
	rep->lkey = mr->key;
	/* A null MR is "not exposed as an rkey" (ibv_alloc_null_mr(3)). */
	rep->rkey = mr->kind == SVD_MR_NULL ? 0 : mr->key;
	rep->access = mr->access;
	rep->length = mr->length;
	rep->iova = mr->iova;
}

static int mr_lookup(struct svd_ufile *uf, uint32_t handle,
		     struct svd_mr **out)
{
	struct svd_obj *o;
	int err = svd_handle_lookup(uf, handle, SVD_OBJ_MR, &o);

	*out = (struct svd_mr *)o;
	return err;
}

static int reg_common(struct svd_req *r, enum svd_mr_kind kind, int fd)
{
	const struct sv_reg_mr_req *req = r->body;
	struct svd_mr_attr a = { .kind = kind,
				 .addr = req->addr,
				 .length = req->length,
				 .iova = req->iova,
				 .access = req->access,
				 .fd = fd,
				 .mem_fault = req->mem_fault };
	struct svd_pd *pd;
	struct svd_mr *mr;
	int err;

	if (req->pad || req->mem_fault > 1)
		return -EINVAL;
	/* The kernel checks access before it looks the PD up. */
	err = svd_mr_check_access(req->access);
	if (err)
		return err;
	pd = svd_pd_get(r->uf, req->pd_handle);
	if (!pd)
		return -EINVAL;
	err = svd_mr_new(r->uf, r->conn->pid, pd, &a, &mr);
	if (err)
		return err;
	svd_mr_fill_rep(mr, r->rep);
	r->rep_len = sizeof(struct sv_mr_rep);
	return 0;
}

int svd_op_reg_mr(struct svd_req *r)
{
	return reg_common(r, SVD_MR_USER, -1);
}

/* What a dma-buf MR can stand on: a shmem file (memfd, /dev/shm) or a
 * dma-buf (udmabuf and friends), both of which any process can mmap.
 * Returns the size in bytes, or a negative errno. */
static int64_t dmabuf_size(int fd)
{
	char path[64], link[128];
	struct stat st;
	ssize_t n;
	off_t end;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISREG(st.st_mode) && fcntl(fd, F_GET_SEALS) >= 0)
		return st.st_size;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -EOPNOTSUPP;
	link[n] = 0;
	if (strncmp(link, "/dmabuf:", 8) && strncmp(link, "anon_inode:dmabuf", 17))
		return -EOPNOTSUPP;
	/* dma-buf answers its size to SEEK_END (it has no file position
	 * anyone reads or writes through). */
	end = lseek(fd, 0, SEEK_END);
	if (end < 0)
		return -EOPNOTSUPP;
	return end;
}

int svd_op_reg_dmabuf_mr(struct svd_req *r)
{
	const struct sv_reg_mr_req *req = r->body;
	int64_t size = dmabuf_size(r->fds[0]);
	int err;

	if (size < 0)
		return (int)size;
	if (ndmabuf >= svd.max_dmabuf)
		return -ENOMEM; /* the descriptors the daemon can afford */
	if (req->addr + req->length < req->addr ||
	    req->addr + req->length > (uint64_t)size)
		return -EINVAL;
	err = reg_common(r, SVD_MR_DMABUF, r->fds[0]);
	if (!err)
		r->fds[0] = -1; /* the MR keeps it */
	return err;
}

int svd_op_rereg_mr(struct svd_req *r)
{
	const struct sv_rereg_mr_req *req = r->body;
	uint32_t flags = req->flags, access;
	uint64_t addr, length;
	struct svd_pd *pd;
	struct svd_mr *mr;
	int err;

	/* The order of ib_uverbs_rereg_mr (notes section 9.4). */
	if (!flags || req->pad || req->mem_fault > 1)
		return -EINVAL;
	if (flags & ~(uint32_t)IBV_REREG_MR_FLAGS_SUPPORTED)
		return -EOPNOTSUPP;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
	    PAGE_OFF(req->addr) != PAGE_OFF(req->iova))
		return -EINVAL;
	err = mr_lookup(r->uf, req->handle, &mr);
	if (err)
		return err;
	if (mr->kind != SVD_MR_USER)
		return -EINVAL;
	access = mr->access;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		err = svd_mr_check_access(req->access);
		if (err)
			return err;
		access = req->access & KEPT_ACCESS;
	}
	pd = mr->pd;
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		pd = svd_pd_get(r->uf, req->pd_handle);
		if (!pd)
			return -EINVAL;
	}
	addr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? req->addr : mr->addr;
	length = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? req->length :
							      mr->length;
	err = check_range(addr, length, access);
	if (err)
		return err;
	/* A new translation is pinned anew (ib_umem_get of the new range);
	 * an access change alone keeps the old pages (mlx5, rxe). */
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && req->mem_fault &&
	    !(access & IBV_ACCESS_ON_DEMAND))
		return -EFAULT;

	/* Nothing can fail from here: the MR changes in place, under the
	 * same handle and keys. */
	if (pd != mr->pd) {
		mr->pd->obj.usecnt--;
		pd->obj.usecnt++;
		mr->pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->addr = addr;
		mr->length = length;
		mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : req->iova;
	}
	mr->access = access;
	/* The registering process of the new range is the caller. */
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		mr->obj.owner_pid = r->conn->pid;
	svd_keytab_publish(mr);
	svd_mr_fill_rep(mr, r->rep);
	r->rep_len = sizeof(struct sv_mr_rep);
	return 0;
}

int svd_op_dereg_mr(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;
	struct svd_mr *mr;
	int err = mr_lookup(r->uf, req->handle, &mr);

	if (err)
		return err;
	/* ibv_dereg_mr(3): "fails if any memory window is still bound to this
	 * MR".  EBUSY, the errno of every other object still in use (rxe says
	 * EINVAL; the man page names none). */
	if (mr->obj.usecnt)
		return -EBUSY;
	sv_dbg("ufile %#x mr#%u: deregistered (key %#x)", r->uf->id,
	       mr->obj.handle, mr->key);
	svd_handle_free(&mr->obj);
	mr->obj.destroy(&mr->obj);
	return 0;
}

int svd_op_import_mr(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;
	struct svd_mr *mr;
	int err = mr_lookup(r->uf, req->handle, &mr);

	if (err)
		return err;
	/* A null MR is no kernel object on mlx5: its handle names nothing
	 * another process could import. */
	if (mr->kind == SVD_MR_NULL)
		return -ENOENT;
	svd_mr_fill_rep(mr, r->rep);
	r->rep_len = sizeof(struct sv_mr_rep);
	return 0;
}

/*
 * ibv_alloc_null_mr: an MR of no memory covering every address, whose
 * lkey sinks what the device writes and sources zeros for what it reads
 * (the engines: SV_KEY_MR_NULL in keys.c and eng_xfer.c).  It has local
 * write access only and no rkey; ibv_rereg_mr refuses it (SVD_MR_USER
 * only) and ibv_bind_mw finds no MW_BIND access on it.
 */
int svd_op_alloc_null_mr(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;
	struct svd_mr_attr a = { .kind = SVD_MR_NULL,
				 .length = UINT64_MAX,
				 .access = IBV_ACCESS_LOCAL_WRITE,
				 .fd = -1 };
	struct svd_pd *pd = svd_pd_get(r->uf, req->handle);
	struct svd_mr *mr;
	int err;

	if (!pd)
		return -EINVAL;
	err = svd_mr_new(r->uf, r->conn->pid, pd, &a, &mr);
	if (err)
		return err;
	svd_mr_fill_rep(mr, r->rep);
	r->rep_len = sizeof(struct sv_mr_rep);
	return 0;
}

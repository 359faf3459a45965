/* SPDX-License-Identifier: MIT */
/*
 * Memory registration: reg (all three symbols and the verbs.h macro path),
 * dma-buf reg, rereg, dereg, import, unimport.
 *
 * The daemon decides (access checks, ranges, keys, PD use counts); the
 * library does what rdma-core's verbs.c does around the command: optional
 * access bits, fork protection of the range (ibv_dontfork_range before a
 * non-ODP registration, ibv_dofork_range after its dereg), ibv_rereg_mr's
 * input checks and its five error codes.  A registration over our own
 * memory also takes an engine hold (sv_engine_mr_hold), so that other
 * processes of the ufile reach that memory through our engine.
 *
 * Test-only fault injection: SOFTVERBS_FAULT containing "rereg_dofork_new"
 * (or "rereg_dofork_old") makes ibv_rereg_mr treat the ibv_dofork_range of
 * the new (old) range as failed, after doing it: that is the only way to
 * reach IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW and IBV_REREG_MR_ERR_DO_FORK_OLD,
 * because MADV_DOFORK fails only on VM_IO mappings, which an unprivileged
 * process cannot make, and our ibv_dofork_range retries page by page.
 */
#include "verbs_int.h"
#include "sv_engine.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

/* verbs.h turns these into macros that choose a symbol; here we are the
 * symbols. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* Optional access bits this device implements; the others are dropped, as
 * rdma-core and the kernel do with optional bits a device lacks. */
#define SV_OPTIONAL_KEPT IBV_ACCESS_RELAXED_ORDERING

static unsigned int mask_optional(unsigned int access)
{
	return access & ~((unsigned int)IBV_ACCESS_OPTIONAL_RANGE &
			  ~(unsigned int)SV_OPTIONAL_KEPT);
}

/* ib_access_writable: the access flags that make the kernel pin the
 * pages for writing. */
static int writable(unsigned int access)
{
	return !!(access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND));
}

static int fault(const char *what)
{
	const char *f = getenv("SOFTVERBS_FAULT");

	return f && strstr(f, what);
}

struct ibv_mr *sv_mr_wrap(struct ibv_pd *pd, enum sv_mr_kind kind,
			  const struct sv_mr_rep *rep, void *addr,
			  size_t length)
{
	struct sv_mr *m = calloc(1, sizeof(*m));

	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = rep->handle;
	m->mr.lkey = rep->lkey;
	m->mr.rkey = rep->rkey;
	m->kind = kind;
	m->access = rep->access;
	m->iova = rep->iova;
	SV_CHECK(sv_check_obj(SV_CK_MR, m, 1, NULL));
	return &m->mr;
}

static int dereg_cmd(struct ibv_context *ctx, uint32_t handle)
{
	struct sv_handle_req req = { .handle = handle };

	return sv_ctx_call_simple(ctx, SV_OP_DEREG_MR, &req, sizeof(req), NULL,
				  0);
}

int sv_mr_dereg(struct ibv_mr *mr)
{
	struct sv_mr *m = to_svmr(mr);
	int err;

	SV_CHECK(sv_check_destroy(SV_CK_MR, m));
	err = dereg_cmd(mr->context, mr->handle);
	if (err) {
		errno = -err;
		return -err;
	}
	SV_CHECK(sv_check_obj(SV_CK_MR, m, 0, "ibv_dereg_mr"));
	if (m->kind == SV_MR_REGULAR) {
		struct sv_ctx_ref cr = sv_cref(mr->context);

		sv_engine_mr_release(&cr);
	}
	/* Only the ranges reg/rereg protected (v44: MR type, not ODP). */
	if (m->kind == SV_MR_REGULAR && m->dontfork)
		ibv_dofork_range(mr->addr, mr->length);
	free(m);
	return 0;
}

static struct ibv_mr *reg_common(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t iova, unsigned int access)
{
	struct sv_reg_mr_req req;
	struct sv_ctx_ref cref;
	struct sv_mr_rep rep;
	struct ibv_mr *mr;
	int dontfork, err;

	if (!pd || sv_fault_verb(SV_FV_REG_MR)) /* a fault plan: docs/faults.md */
		return pd ? NULL : sv_null_errno(-EINVAL);
	access = mask_optional(access);
	/* Implicit ODP is addr 0 with length SIZE_MAX (ibv_cmd_reg_mr). */
	if ((access & IBV_ACCESS_ON_DEMAND) && length == SIZE_MAX && addr)
		return sv_null_errno(-EINVAL);
	dontfork = !(access & IBV_ACCESS_ON_DEMAND);
	if (dontfork && ibv_dontfork_range(addr, length))
		return NULL; /* errno from madvise */
	req = (struct sv_reg_mr_req){ .addr = (uintptr_t)addr,
				      .length = length,
				      .iova = iova,
				      .pd_handle = pd->handle,
				      .access = access,
				      .mem_fault = dontfork && sv_mem_check(
					      addr, length, writable(access)) };
	err = sv_ctx_call_simple(pd->context, SV_OP_REG_MR, &req, sizeof(req),
				 &rep, sizeof(rep));
	if (err)
		goto err_dofork;
	mr = sv_mr_wrap(pd, SV_MR_REGULAR, &rep, addr, length);
	if (!mr) {
		err = -ENOMEM;
		goto err_dereg;
	}
	/* Another process may import the MR and use it as soon as we
	 * return: our engine must be there to serve it. */
	cref = sv_cref(pd->context);
	err = sv_engine_mr_hold(&cref);
	if (err)
		goto err_free;
	to_svmr(mr)->dontfork = dontfork;
	return mr;

err_free:
	SV_CHECK(sv_check_obj(SV_CK_MR, to_svmr(mr), 0, NULL));
	free(to_svmr(mr));
err_dereg:
	dereg_cmd(pd->context, rep.handle);
err_dofork:
	if (dontfork)
		ibv_dofork_range(addr, length);
	return sv_null_errno(err);
}

/*
 * The three registration symbols.  All mask optional access bits (as v44
 * does even for plain ibv_reg_mr); ibv_reg_mr's iova is the address.
 * NULL with errno: EINVAL (access, range, PD), EFAULT (the pages would
 * not pin: sv_mem_check), ENOMEM, EIO.
 */
SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				    size_t length, int access)
{
	return reg_common(pd, addr, length, (uintptr_t)addr,
			  (unsigned int)access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					 size_t length, uint64_t iova,
					 int access)
{
	return reg_common(pd, addr, length, iova, (unsigned int)access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					  size_t length, uint64_t iova,
					  unsigned int access)
{
	return reg_common(pd, addr, length, iova, access);
}

/*
 * An MR over [offset, offset+length) of a dma-buf (e.g. udmabuf) or a
 * shmem file (memfd, /dev/shm): memory any process of the ufile can map.
 * Other fds: EOPNOTSUPP.  No fork protection and no optional masking (v44).
 */
SV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					   size_t length, uint64_t iova, int fd,
					   int access)
{
	struct sv_reg_mr_req req = { .addr = offset,
				     .length = length,
				     .iova = iova,
				     .access = (uint32_t)access };
	struct sv_mr_rep rep;
	struct sv_call c = { .op = SV_OP_REG_DMABUF_MR,
			     .req = &req,
			     .req_len = sizeof(req),
			     .fds = &fd,
			     .nfds = 1,
			     .rep = &rep,
			     .rep_cap = sizeof(rep) };
	struct ibv_mr *mr;
	int err;

	if (!pd)
		return sv_null_errno(-EINVAL);
	if (fd < 0)
		return sv_null_errno(-EBADF);
	req.pd_handle = pd->handle;
	err = sv_ctx_call(pd->context, &c);
	if (err)
		return sv_null_errno(err);
	if (c.rep_len != sizeof(rep))
		return sv_null_errno(-EPROTO);
	mr = sv_mr_wrap(pd, SV_MR_DMABUF, &rep, (void *)(uintptr_t)offset,
			length);
	if (!mr)
		dereg_cmd(pd->context, rep.handle);
	return mr;
}

/* Destroys the MR for every context of the ufile; 0 or a positive errno
 * (ENOENT/EINVAL when another view destroyed it: mr stays allocated). */
SV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	return sv_mr_dereg(mr);
}

/*
 * ibv_rereg_mr(3).  The order is part of the contract: input checks (old
 * MR untouched, errno EINVAL), fork protection of the new range, the
 * command, fork protection given back.  Handle, lkey and rkey never change.
 * pd is read only with IBV_REREG_MR_CHANGE_PD.
 */
SV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			   void *addr, size_t length, int access)
{
	struct sv_mr *m = to_svmr(mr);
	int trans = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	struct sv_rereg_mr_req req;
	struct sv_mr_rep rep;
	unsigned int new_access;
	void *old_addr;
	size_t old_len;
	int new_dontfork, old_dontfork, err, ret;

	if (!mr || m->kind != SV_MR_REGULAR ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) ||
	    ((unsigned int)flags & ~(unsigned int)IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    (trans && (!addr || !length)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ?
			     (unsigned int)access :
			     m->access;
	/* ODP ranges were never protected, so they are not given back
	 * either (v44 would drive the fork counts negative here). */
	new_dontfork = trans ? !(new_access & IBV_ACCESS_ON_DEMAND) :
			       m->dontfork;
	if (trans && new_dontfork && ibv_dontfork_range(addr, length))
		return IBV_REREG_MR_ERR_DONT_FORK_NEW;

	/* A PD of another ufile: handles are per ufile, so the daemon would
	 * find some other PD under that number.  The command refuses it. */
	if ((flags & IBV_REREG_MR_CHANGE_PD) &&
	    to_svctx(pd->context)->ufile != to_svctx(mr->context)->ufile) {
		ret = IBV_REREG_MR_ERR_CMD;
		if (trans && new_dontfork && ibv_dofork_range(addr, length))
			ret = IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW;
		errno = EINVAL;
		return ret;
	}
	req = (struct sv_rereg_mr_req){
		.addr = (uintptr_t)addr,
		.length = length,
		.iova = (uintptr_t)addr, /* as ibv_cmd_rereg_mr callers */
		.handle = mr->handle,
		.flags = (uint32_t)flags,
		.pd_handle = (flags & IBV_REREG_MR_CHANGE_PD) ? pd->handle : 0,
		.access = (uint32_t)access,
		.mem_fault = trans && new_dontfork &&
			     sv_mem_check(addr, length, writable(new_access)),
	};
	err = sv_ctx_call_simple(mr->context, SV_OP_REREG_MR, &req, sizeof(req),
				 &rep, sizeof(rep));
	if (err) {
		ret = IBV_REREG_MR_ERR_CMD;
		if (trans && new_dontfork &&
		    (ibv_dofork_range(addr, length) ||
		     fault("rereg_dofork_new")))
			ret = IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW;
		errno = -err;
		return ret;
	}

	if (flags & IBV_REREG_MR_CHANGE_PD) {
		mr->pd = pd;
		mr->context = pd->context;
	}
	mr->lkey = rep.lkey;
	mr->rkey = rep.rkey;
	m->access = rep.access;
	m->iova = rep.iova;
	if (!trans)
		return 0;
	old_addr = mr->addr;
	old_len = mr->length;
	old_dontfork = m->dontfork;
	mr->addr = addr;
	mr->length = length;
	m->dontfork = new_dontfork;
	if (old_dontfork && (ibv_dofork_range(old_addr, old_len) ||
			     fault("rereg_dofork_old")))
		return IBV_REREG_MR_ERR_DO_FORK_OLD;
	return 0;
}

/* A view of an MR of the same ufile: addr NULL, the object's keys, length
 * and handle, on the caller's pd.  NULL with errno ENOENT/EINVAL. */
SV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct sv_handle_req req = { .handle = mr_handle };
	struct sv_mr_rep rep;
	int err;

	if (!pd)
		return sv_null_errno(-EINVAL);
	err = sv_ctx_call_simple(pd->context, SV_OP_IMPORT_MR, &req,
				 sizeof(req), &rep, sizeof(rep));
	if (err)
		return sv_null_errno(err);
	return sv_mr_wrap(pd, SV_MR_IMPORTED, &rep, NULL, rep.length);
}

/* Frees this view only (no daemon call, as the kernel). */
SV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	if (mr) {
		SV_CHECK(sv_check_obj(SV_CK_MR, to_svmr(mr), 0,
				      "ibv_unimport_mr"));
		free(to_svmr(mr));
	}
}

/*
 * ibv_advise_mr: every page of a registration is present here (memory is
 * reached where it lives, nothing is pinned or faulted in), so a prefetch
 * has nothing left to do once its request is checked as the man page
 * says: an advice other than the three prefetches is not supported
 * (EOPNOTSUPP), flags other than IBV_ADVISE_MR_FLAG_FLUSH or no SGE are
 * EINVAL, and an SGE whose lkey is not an MR of this PD, lacks
 * IBV_ACCESS_LOCAL_WRITE for a write prefetch, or leaves the MR or the
 * readable memory (sv_mem_check, as ibv_reg_mr) is EFAULT.  Synchronous
 * (FLUSH) or not, it is done when the call returns.
 */
static int advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		     uint32_t flags, struct ibv_sge *sg, uint32_t n)
{
	struct sv_ctx_ref cr;
	int err = 0;

	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		err = EOPNOTSUPP;
	else if ((flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH) || !sg || !n)
		err = EINVAL;
	if (err) {
		errno = err;
		return err;
	}
	cr = sv_cref(pd->context);
	for (uint32_t i = 0; i < n && !err; i++) {
		void *local = NULL;

		err = -sv_engine_key_check(
			&cr, sg[i].lkey, to_svpd(pd)->pd_id, sg[i].addr,
			sg[i].length,
			advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE ?
				IBV_ACCESS_LOCAL_WRITE : 0,
			&local);
		/* Our own memory: mapped, as ibv_reg_mr's check sees it. */
		if (!err && local)
			err = -sv_mem_check(local, sg[i].length, 0);
	}
	if (err)
		errno = err;
	return err;
}

/*
 * ibv_alloc_null_mr (verbs.h calls it through the context): an MR of no
 * memory whose lkey drops what the device writes through it and reads as
 * zeros, as mlx5 does.  addr NULL, length SIZE_MAX, rkey 0: only the lkey
 * is valid.  ibv_dereg_mr frees it; ibv_rereg_mr refuses it
 * (IBV_REREG_MR_ERR_INPUT, EINVAL), and a window cannot be bound to it
 * (it has no IBV_ACCESS_MW_BIND: the bind fails as on any such MR).
 */
static struct ibv_mr *alloc_null_mr(struct ibv_pd *pd)
{
	struct sv_handle_req req;
	struct sv_mr_rep rep;
	struct ibv_mr *mr;
	int err;

	if (!pd)
		return sv_null_errno(-EINVAL);
	req = (struct sv_handle_req){ .handle = pd->handle };
	err = sv_ctx_call_simple(pd->context, SV_OP_ALLOC_NULL_MR, &req,
				 sizeof(req), &rep, sizeof(rep));
	if (err)
		return sv_null_errno(err);
	mr = sv_mr_wrap(pd, SV_MR_NULL, &rep, NULL, SIZE_MAX);
	if (!mr) {
		(void)dereg_cmd(pd->context, rep.handle);
		errno = ENOMEM;
	}
	return mr;
}

void sv_set_mr_ops(struct verbs_context *vctx)
{
	vctx->advise_mr = advise_mr;
	vctx->alloc_null_mr = alloc_null_mr;
}

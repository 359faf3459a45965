/* SPDX-License-Identifier: MIT */
/*
 * Completion queues in the daemon: a handle, a size and a use count.  The
 * ring is in the creating process; QPs (and nothing else) hold counts, so
 * ibv_destroy_cq of a CQ in use answers -EBUSY as the kernel does.
 */
#include "svd_qp.h"
#include "svd_ops.h"
#include "sv_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int svd_take_region_fd(struct svd_req *r)
{
	int fd = r->nfds == 1 ? r->fds[0] : -1;
	int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
	struct stat st;

	/* Engines of other processes map it: it must not shrink under them. */
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
				 (F_SEAL_SHRINK | F_SEAL_GROW) ||
	    fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 4096)
		return -EINVAL;
	r->fds[0] = -1;
	return fd;
}

static void cq_destroy(struct svd_obj *obj)
{
	close(((struct svd_cq *)obj)->shm_fd);
	free(obj);
}

static void cq_describe(const struct svd_obj *obj, struct sv_res_entry *e)
{
	const struct svd_cq *cq = (const struct svd_cq *)obj;

	e->type = SV_RES_CQ;
	e->length = cq->cqe;
}

int svd_op_create_cq(struct svd_req *r)
{
	const struct sv_create_cq_req *req = r->body;
	struct sv_obj_rep *rep = r->rep;
	struct svd_cq *cq;
	int err, fd;

	if (!req->cqe || req->cqe > SV_MAX_CQE)
		return -EINVAL;
	fd = svd_take_region_fd(r);
	if (fd < 0)
		return fd;
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		close(fd);
		return -ENOMEM;
	}
	cq->shm_fd = fd;
	cq->obj.type = SVD_OBJ_CQ;
	cq->obj.owner_pid = r->conn->pid;
	cq->obj.destroy = cq_destroy;
	cq->obj.describe = cq_describe;
	cq->cqe = req->cqe;
	err = svd_handle_alloc(r->uf, &cq->obj);
	if (err) {
		close(fd);
		free(cq);
		return err;
	}
	rep->handle = cq->obj.handle;
	r->rep_len = sizeof(*rep);
	return 0;
}

int svd_op_resize_cq(struct svd_req *r)
{
	const struct sv_create_cq_req *req = r->body;
	struct svd_obj *o = svd_handle_get(r->uf, req->handle, SVD_OBJ_CQ);

	if (!o)
		return svd_lookup_err(r->uf, req->handle);
	if (!req->cqe || req->cqe > SV_MAX_CQE)
		return -EINVAL;
	((struct svd_cq *)o)->cqe = req->cqe;
	return 0;
}

int svd_op_destroy_cq(struct svd_req *r)
{
	const struct sv_handle_req *req = r->body;

	return svd_destroy_unused(r->uf, req->handle, SVD_OBJ_CQ);
}

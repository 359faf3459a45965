/* SPDX-License-Identifier: MIT */
/*
 * The key table (sv_keytab.h): the daemon writes, the engines read.
 *
 * MR keys are allocated by mr.c (index 1..SV_MAX_MR); this file publishes
 * them.  Memory window keys are allocated here (indices from
 * SV_KEYTAB_MW_BASE) and their binding state lives only in the table: a
 * BIND_MW or an invalidation executing in an engine asks for it with
 * SV_OP_MW_BIND / SV_OP_KEY_INVALIDATE, and the table changes before the
 * reply, so the engine completes the work request only once every other
 * engine sees the new state.
 *
 * A bound window holds a use count on its MR (ibv_dereg_mr: EBUSY while
 * windows are bound), dropped at unbind, invalidation or dealloc.
 */
#include "svd_engine.h"
#include "svd_ops.h"
#include "svd_qp.h"
#include "sv_keytab.h"
#include "sv_log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

static struct sv_keytab_hdr *kt;
static struct sv_key_entry *ents;
static int kt_fd = -1;
static uint64_t obj_serial;

/* Windows: index SV_KEYTAB_MW_BASE + i, i lowest free first. */
static struct svd_mw *mw_tab[SV_MAX_MW];
static uint8_t mw_tag[SV_MAX_MW];
static struct svd_ida mw_ids;

int svd_keytab_init(void)
{
	size_t size = SV_KEYTAB_SIZE;
	void *p;
	int fd, err;

	if (kt)
		return 0;
	fd = memfd_create("softverbs-keys", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		err = -errno;
		goto err_close;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		err = -errno;
		goto err_close;
	}
	/* Ours stays the only writable mapping: engines can map the copies
	 * they get read-only only (kernels before 5.1 lack the seal; then
	 * the table is merely as trustworthy as the processes of the uid). */
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
	fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE);
	kt = p;
	kt->magic = SV_KEYTAB_MAGIC;
	kt->version = SV_KEYTAB_VERSION;
	kt->size = size;
	kt->owner_pid = (uint32_t)getpid();
	kt->entry_size = sizeof(struct sv_key_entry);
	kt->nentries = SV_KEYTAB_ENTRIES;
	kt->port_off = SV_KEYTAB_PORT_OFF;
	kt->entries_off = SV_KEYTAB_ENTRIES_OFF;
	kt->instance = svd.instance;
	ents = (struct sv_key_entry *)((char *)p + kt->entries_off);
	kt_fd = fd;
	return 0;

err_close:
	close(fd);
	return err;
}

int svd_keytab_dup(void)
{
	int fd;

	if (kt_fd < 0)
		return -ENODEV;
	fd = fcntl(kt_fd, F_DUPFD_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

uint64_t svd_keytab_size(void)
{
	return kt ? kt->size : 0;
}

void svd_keytab_set_capture(uint32_t n)
{
	if (kt)
		atomic_store_explicit(&kt->capture, n, memory_order_release);
}

/* The seqlock writer: odd, the fields after seq (len bytes of the
 * object), even.  Entries and the port block both start with their seq. */
static void seq_write(_Atomic uint32_t *seq, const void *v, size_t len)
{
	uint32_t s = atomic_load_explicit(seq, memory_order_relaxed);

	atomic_store_explicit(seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy((char *)seq + sizeof(*seq), (const char *)v + sizeof(*seq),
	       len - sizeof(*seq));
	atomic_store_explicit(seq, s + 2, memory_order_release);
}

static void entry_write(uint32_t idx, const struct sv_key_entry *v)
{
	seq_write(&ents[idx].seq, v, sizeof(*v));
}

void svd_keytab_port_publish(const struct sv_keytab_port *v)
{
	struct sv_keytab_port *p;

	if (!kt)
		return;
	p = (struct sv_keytab_port *)((char *)kt + kt->port_off);
	seq_write(&p->seq, v, sizeof(*v));
}

static void entry_get(uint32_t idx, struct sv_key_entry *out)
{
	memcpy(out, &ents[idx], sizeof(*out)); /* we are the only writer */
}

void svd_keytab_publish(const struct svd_mr *mr)
{
	uint32_t idx = mr->key >> 8;
	struct sv_key_entry v = { 0 };

	if (!kt || idx == 0 || idx >= SV_KEYTAB_MW_BASE)
		return;
	entry_get(idx, &v);
	v.tag = (uint8_t)mr->key;
	v.kind = mr->kind == SVD_MR_DM	   ? SV_KEY_MR_DM :
		 mr->kind == SVD_MR_DMABUF ? SV_KEY_MR_DMABUF :
		 mr->kind == SVD_MR_NULL   ? SV_KEY_MR_NULL :
					     SV_KEY_MR_USER;
	v.flags = 0;
	v.access = mr->access;
	v.pd_id = mr->pd ? mr->pd->pd_id : 0;
	v.owner_pid = (uint32_t)mr->obj.owner_pid;
	v.bound_qpn = 0;
	v.addr = mr->addr;
	v.iova = mr->iova;
	v.length = mr->length;
	/* A new object id whenever the key comes to name another object, so
	 * an engine's cached mapping of the old one is never reused. */
	if ((v.kind == SV_KEY_MR_DM || v.kind == SV_KEY_MR_DMABUF) &&
	    (v.obj_id == 0 || v.mr_key != mr->key))
		v.obj_id = ++obj_serial;
	v.mr_key = mr->key; /* MRs: the key the entry was published for */
	entry_write(idx, &v);
}

void svd_keytab_unpublish(uint32_t key)
{
	uint32_t idx = key >> 8;
	struct sv_key_entry v;

	if (!kt || idx == 0 || idx >= SV_KEYTAB_ENTRIES)
		return;
	entry_get(idx, &v);
	if (v.tag != (uint8_t)key)
		return;
	memset((char *)&v + sizeof(v.seq), 0, sizeof(v) - sizeof(v.seq));
	v.tag = (uint8_t)key;
	entry_write(idx, &v);
}

/* ------------------------------------------------------------ windows -- */

static void mw_unbind(uint32_t idx, struct sv_key_entry *v)
{
	struct svd_mr *mr;

	if (!(v->flags & SV_KEY_F_BOUND))
		return;
	mr = svd_mr_by_key(v->mr_key);
	if (mr && mr->obj.usecnt)
		mr->obj.usecnt--;
	v->flags &= ~SV_KEY_F_BOUND;
	v->mr_key = 0;
	v->addr = v->iova = v->length = 0;
	v->access = 0;
	v->bound_qpn = 0;
	(void)idx;
}

int svd_mw_key_alloc(struct svd_mw *mw)
{
	struct sv_key_entry v = { 0 };
	int64_t id;
	uint32_t i;

	if (!kt)
		return -ENODEV;
	if (!mw_ids.limit)
		svd_ida_init(&mw_ids, SV_MAX_MW);
	id = svd_ida_alloc(&mw_ids);
	if (id < 0)
		return -ENOMEM;
	i = (uint32_t)id;
	if (!mw_tag[i])
		mw_tag[i] = (uint8_t)(svd.instance >> (8 * (i & 7)));
	mw_tag[i]++;
	mw_tab[i] = mw;
	mw->rkey = (SV_KEYTAB_MW_BASE + i) << 8 | mw_tag[i];
	v.tag = mw_tag[i];
	v.kind = mw->mw_type == IBV_MW_TYPE_2 ? SV_KEY_MW2 : SV_KEY_MW1;
	v.pd_id = mw->pd ? mw->pd->pd_id : 0;
	v.owner_pid = (uint32_t)mw->obj.owner_pid;
	entry_write(SV_KEYTAB_MW_BASE + i, &v);
	return 0;
}

void svd_mw_key_free(struct svd_mw *mw)
{
	uint32_t idx = mw->rkey >> 8, i = idx - SV_KEYTAB_MW_BASE;
	struct sv_key_entry v;

	if (!kt || idx < SV_KEYTAB_MW_BASE || i >= SV_MAX_MW || mw_tab[i] != mw)
		return;
	entry_get(idx, &v);
	mw_unbind(idx, &v);
	memset((char *)&v + sizeof(v.seq), 0, sizeof(v) - sizeof(v.seq));
	entry_write(idx, &v);
	mw_tab[i] = NULL;
	svd_ida_free(&mw_ids, i);
}

/* The window at key's index (any tag: callers check it), or NULL. */
static struct svd_mw *mw_by_key(uint32_t key, struct sv_key_entry *v)
{
	uint32_t idx = key >> 8, i = idx - SV_KEYTAB_MW_BASE;

	if (!kt || idx < SV_KEYTAB_MW_BASE || i >= SV_MAX_MW || !mw_tab[i])
		return NULL;
	entry_get(idx, v);
	return mw_tab[i];
}

/* The kernel's flush bits (ib_user_ioctl_verbs.h; rdma-core v44's verbs.h
 * does not name them yet). */
#define SV_ACCESS_FLUSH_GLOBAL (1u << 8)
#define SV_ACCESS_FLUSH_PERSISTENT (1u << 9)
/*
 * What a bind may ask for: rxe's RXE_ACCESS_SUPPORTED_MW (every MR bit it
 * supports, ZERO_BASED, the optional range).  mlx5 and rxe bind windows
 * with IBV_ACCESS_LOCAL_WRITE in the flags (ibv_bind_mw(3) lists it among
 * the window's access; programs pass their MR's flags along): it means
 * nothing for a remote key, and only the remote bits gate the window.
 */
#define MW_ACCESS                                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                   \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND |   \
	 SV_ACCESS_FLUSH_GLOBAL | SV_ACCESS_FLUSH_PERSISTENT |                 \
	 IBV_ACCESS_OPTIONAL_RANGE)

/* The checks of IBTA 10.6.7.2 (rxe_check_bind_mw), in that order. */
int svd_op_mw_bind(struct svd_req *r)
{
	const struct sv_mw_bind_req *req = r->body;
	struct sv_key_entry v;
	struct svd_mw *mw;
	struct svd_mr *mr;
	uint64_t end;

	/* By index: the library moved the window's rkey to new_key when it
	 * posted the bind (as rxe), the table still has the old tag. */
	if ((req->new_key >> 8) != (req->mw_key >> 8))
		return -EINVAL;
	mw = mw_by_key(req->mw_key, &v);
	if (!mw)
		return -EINVAL;
	if (!mw->pd || mw->pd->pd_id != req->pd_id)
		return -EINVAL;
	if (mw->mw_type == IBV_MW_TYPE_2 && (v.flags & SV_KEY_F_BOUND))
		return -EINVAL;
	if (req->access & ~(uint32_t)MW_ACCESS)
		return -EINVAL;
	if (mw->mw_type == IBV_MW_TYPE_1 && (req->access & IBV_ACCESS_ZERO_BASED))
		return -EINVAL;
	if (mw->mw_type == IBV_MW_TYPE_1 && req->length == 0) {
		/* Unbinding a type 1 window (C10-xx: zero length bind). */
		mw_unbind(req->mw_key >> 8, &v);
		goto publish;
	}
	mr = svd_mr_by_key(req->mr_key);
	if (!mr || !mr->pd || mr->pd->pd_id != req->pd_id)
		return -EINVAL;
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return -EPERM;
	if ((req->access &
	     (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	end = req->addr + req->length;
	if (end < req->addr ||
	    (mr->length != UINT64_MAX &&
	     (req->addr < mr->iova || end > mr->iova + mr->length)))
		return -EINVAL;
	mw_unbind(req->mw_key >> 8, &v);
	mr->obj.usecnt++;
	v.flags |= SV_KEY_F_BOUND;
	v.mr_key = req->mr_key;
	v.access = req->access;
	v.addr = req->addr;
	v.iova = (req->access & IBV_ACCESS_ZERO_BASED) ? 0 : req->addr;
	v.length = req->length;
	v.bound_qpn = mw->mw_type == IBV_MW_TYPE_2 ? req->qpn : 0;
publish:
	v.tag = (uint8_t)req->new_key;
	mw->rkey = req->new_key;
	entry_write(req->mw_key >> 8, &v);
	return 0;
}

/* Invalidation (IBTA 10.6.7.3 / rxe_invalidate_mw): only a bound type 2
 * window of the QP's PD; user MRs cannot be invalidated. */
int svd_op_key_invalidate(struct svd_req *r)
{
	const struct sv_key_req *req = r->body;
	struct sv_key_entry v;
	struct svd_mw *mw = mw_by_key(req->key, &v);

	if (!mw || v.tag != (uint8_t)req->key || mw->mw_type != IBV_MW_TYPE_2 || !mw->pd ||
	    mw->pd->pd_id != req->pd_id || !(v.flags & SV_KEY_F_BOUND))
		return -EINVAL;
	mw_unbind(req->key >> 8, &v);
	entry_write(req->key >> 8, &v);
	return 0;
}

/* The memory object under a DM or dma-buf MR, for engines that execute on
 * it (they map it, as the DM's users do). */
int svd_op_key_fd(struct svd_req *r)
{
	const struct sv_key_req *req = r->body;
	struct sv_key_fd_rep *rep = r->rep;
	struct svd_mr *mr = svd_mr_by_key(req->key);
	struct sv_key_entry v;
	struct stat st;
	int fd;

	if (!mr)
		return -ENOENT;
	if (mr->kind == SVD_MR_DM)
		fd = svd_dm_fd(mr->dm);
	else if (mr->kind == SVD_MR_DMABUF)
		fd = mr->fd;
	else
		return -EINVAL;
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0)
		return -errno;
	entry_get(mr->key >> 8, &v);
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rep->map_len = st.st_size > 0 ? (uint64_t)st.st_size :
					(uint64_t)lseek(fd, 0, SEEK_END);
	rep->obj_id = v.obj_id;
	r->rep_len = sizeof(*rep);
	r->out_fds[0] = fd;
	r->n_out_fds = 1;
	return 0;
}

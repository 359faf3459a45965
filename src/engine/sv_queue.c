/* SPDX-License-Identifier: MIT */
/*
 * The queues in shared memory (sv_shm.h): regions, completion queues,
 * receive queues and SRQs.  The owner's side (create, post_recv, poll,
 * arm, clean, resize) and the side of whoever delivers (take a receive,
 * produce a completion) -- which may be another process's engine.
 *
 * A region is a memfd sealed against shrinking and growing before anyone
 * else sees it, so a peer's mapping can never fault (SIGBUS) because the
 * owner truncated it.  Regions that must be able to grow (CQ and SRQ
 * resize) are made for the device's maximum from the start: the file is
 * sparse, only the pages touched cost memory.
 */
#include "engine_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

int sv_shlock_init(struct sv_shlock *l)
{
	pthread_mutexattr_t a;
	int err;

	err = pthread_mutexattr_init(&a);
	if (err)
		return err;
	err = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (!err)
		err = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (!err)
		err = pthread_mutex_init(&l->m, &a);
	pthread_mutexattr_destroy(&a);
	return err;
}

static uint64_t new_cookie(void)
{
	static _Atomic uint64_t ctr;
	uint64_t c = 0;

	if (getrandom(&c, sizeof(c), GRND_NONBLOCK) != sizeof(c))
		c = sv_now_ns() ^ ((uint64_t)getpid() << 40);
	c ^= atomic_fetch_add(&ctr, 1) * 0x9e3779b97f4a7c15ull;
	return c ? c : 1;
}

#define SV_SHM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

void *sv_shm_create(uint32_t magic, size_t size, int *fdp)
{
	struct sv_shm_hdr *h;
	int fd = memfd_create("softverbs-queue", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return NULL;
	size = (size + 4095) & ~(size_t)4095;
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, SV_SHM_SEALS) < 0)
		goto err_close;
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		goto err_close;
	h->magic = magic;
	h->version = SV_SHM_VERSION;
	h->size = size;
	h->owner_pid = (uint32_t)getpid();
	h->cookie = new_cookie();
	h->owner_va = (uint64_t)(uintptr_t)h;
	*fdp = fd;
	return h;

err_close:
	close(fd);
	return NULL;
}

void sv_shm_unmap(void *region)
{
	struct sv_shm_hdr *h = region;

	if (h)
		munmap(h, h->size);
}

void *sv_shm_map(int fd, uint32_t magic, uint64_t cookie)
{
	struct sv_shm_hdr *h;
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	/* Unsealed or tiny: the owner could cut it under us. */
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
				 (F_SEAL_SHRINK | F_SEAL_GROW) ||
	    fstat(fd, &st) < 0 || (uint64_t)st.st_size < 4096)
		return NULL;
	h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	if (h == MAP_FAILED)
		return NULL;
	if (h->magic != magic || h->version != SV_SHM_VERSION ||
	    h->size != (uint64_t)st.st_size || (cookie && h->cookie != cookie)) {
		munmap(h, (size_t)st.st_size);
		return NULL;
	}
	return h;
}

struct sv_qp_shm *sv_qp_shm_open(int fd)
{
	return sv_shm_map(fd, SV_SHM_QP, 0);
}

void sv_qp_shm_close(struct sv_qp_shm *q)
{
	sv_shm_unmap(q);
}

/* --------------------------------------------------------------- CQ -- */

/* Entries a CQ region holds: room to grow by resize (4x, at least 64 Ki),
 * as the region can never grow under its producers' mappings.  A resize
 * beyond it answers ENOMEM (ibv_resize_cq's "not enough resources"). */
static uint32_t cq_room(uint32_t cqe)
{
	uint64_t room = (uint64_t)cqe * 4 < 65536 ? 65536 : (uint64_t)cqe * 4;

	return room > SV_MAX_CQE ? SV_MAX_CQE : (uint32_t)room;
}

int sv_cq_shm_create(struct sv_cq *cq, uint32_t cqe, int stamps)
{
	uint32_t room = cq_room(cqe);
	size_t ents = sizeof(struct sv_cq_shm) + (size_t)room * sizeof(struct ibv_wc);
	size_t size = ents + (stamps ? (size_t)room * sizeof(uint64_t) : 0);
	struct sv_cq_shm *c = sv_shm_create(SV_SHM_CQ, size, &cq->fd);

	if (!c)
		return -errno ? -errno : -ENOMEM;
	if (sv_shlock_init(&c->lock)) {
		sv_shm_unmap(c);
		close(cq->fd);
		cq->fd = -1;
		return -ENOMEM;
	}
	c->max = room;
	c->cap = cqe;
	c->entries_off = sizeof(*c);
	c->stamps_off = stamps ? ents : 0;
	cq->shm = c;
	return 0;
}

unsigned sv_cq_produce(struct sv_cq_shm *c, const struct ibv_wc *wc,
		       int solicited)
{
	unsigned ret = 0;
	uint64_t tail, head;
	uint32_t armed;

	sv_lock_shm(&c->lock, SV_LOCK_CQ);
	tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
	head = atomic_load_explicit(&c->head, memory_order_acquire);
	if (c->cap == 0 || c->cap > c->max || tail - head >= c->cap ||
	    head > tail) {
		if (!c->overflowed)
			ret |= SV_CQP_OVERFLOW;
		c->overflowed = 1;
		sv_unlock_shm(&c->lock);
		return ret;
	}
	*sv_cq_entry(c, tail) = *wc;
	/* Under the lock: the stamps of one CQ never go backwards. */
	if (c->stamps_off)
		*sv_cq_stamp(c, tail) = sv_now_ns();
	atomic_store_explicit(&c->tail, tail + 1, memory_order_release);
	armed = atomic_load_explicit(&c->armed, memory_order_relaxed);
	if (armed == SV_CQ_ARM_ALL ||
	    (armed == SV_CQ_ARM_SOLICITED &&
	     (solicited || wc->status != IBV_WC_SUCCESS))) {
		atomic_store_explicit(&c->armed, 0, memory_order_relaxed);
		ret |= SV_CQP_EVENT;
	}
	sv_unlock_shm(&c->lock);
	return ret;
}

int sv_cq_consume(struct sv_cq *cq, int n, struct ibv_wc *wc, uint64_t *stamp)
{
	struct sv_cq_shm *c = cq->shm;
	uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
	int i = 0;

	/* A tail behind head or further than the ring is a producer's
	 * garbage: nothing to read. */
	if (tail <= head || tail - head > c->cap)
		return 0;
	for (; i < n && head != tail; i++, head++) {
		wc[i] = *sv_cq_entry(c, head);
		if (stamp)
			stamp[i] = c->stamps_off ? *sv_cq_stamp(c, head) : 0;
	}
	atomic_store_explicit(&c->head, head, memory_order_release);
	return i;
}

void sv_cq_arm(struct sv_cq *cq, int solicited_only)
{
	struct sv_cq_shm *c = cq->shm;

	sv_lock_shm(&c->lock, SV_LOCK_CQ);
	/* "all" is stronger than "solicited": it stays. */
	if (!solicited_only)
		atomic_store(&c->armed, SV_CQ_ARM_ALL);
	else if (atomic_load(&c->armed) != SV_CQ_ARM_ALL)
		atomic_store(&c->armed, SV_CQ_ARM_SOLICITED);
	sv_unlock_shm(&c->lock);
}

/*
 * Rewrites the entries [head, tail) keeping those keep() accepts, at
 * positions 0.. of a ring of new_cap.  Must hold c->lock and the owner's
 * poll lock.  Returns the entries kept, or -1 when they do not fit.
 */
static int cq_rewrite(struct sv_cq_shm *c, uint32_t new_cap, uint32_t qpn,
		      int clean)
{
	uint64_t head = atomic_load(&c->head), tail = atomic_load(&c->tail);
	uint64_t n = tail > head && tail - head <= c->cap ? tail - head : 0;
	struct ibv_wc *tmp = n ? malloc(n * sizeof(*tmp)) : NULL;
	uint64_t *ts = n && c->stamps_off ? malloc(n * sizeof(*ts)) : NULL;
	uint64_t kept = 0;

	if (n && (!tmp || (c->stamps_off && !ts))) {
		free(tmp);
		free(ts);
		return -1;
	}
	for (uint64_t i = 0; i < n; i++) {
		struct ibv_wc *e = sv_cq_entry(c, head + i);

		if (clean && e->qp_num == qpn)
			continue;
		if (ts)
			ts[kept] = *sv_cq_stamp(c, head + i);
		tmp[kept++] = *e;
	}
	if (kept > new_cap) {
		free(tmp);
		free(ts);
		return -1;
	}
	c->cap = new_cap;
	for (uint64_t i = 0; i < kept; i++) {
		*sv_cq_entry(c, i) = tmp[i];
		if (ts)
			*sv_cq_stamp(c, i) = ts[i];
	}
	free(tmp);
	free(ts);
	atomic_store(&c->head, 0);
	atomic_store(&c->tail, kept);
	return (int)kept;
}

void sv_cq_clean(struct sv_cq *cq, uint32_t qpn)
{
	sv_lock_spin(&cq->poll_lock, SV_LOCK_CQ_POLL);
	sv_lock_shm(&cq->shm->lock, SV_LOCK_CQ);
	if (cq_rewrite(cq->shm, cq->shm->cap, qpn, 1) < 0)
		sv_warn("cq %p: cannot clean the completions of qp %#x",
			(void *)cq, qpn);
	sv_unlock_shm(&cq->shm->lock);
	sv_unlock_spin(&cq->poll_lock);
}

int sv_cq_resize(struct sv_cq *cq, uint32_t cqe)
{
	int err = 0;

	if (!cqe || cqe > SV_MAX_CQE)
		return -EINVAL;
	if (cqe > cq->shm->max)
		return -ENOMEM;
	sv_lock_spin(&cq->poll_lock, SV_LOCK_CQ_POLL);
	sv_lock_shm(&cq->shm->lock, SV_LOCK_CQ);
	if (cq_rewrite(cq->shm, cqe, 0, 0) < 0)
		err = -EINVAL; /* fewer entries than it holds now */
	sv_unlock_shm(&cq->shm->lock);
	sv_unlock_spin(&cq->poll_lock);
	return err;
}

/* ------------------------------------------------- receive queues -- */

size_t sv_recv_wqe_size(uint32_t max_sge)
{
	size_t sz = sizeof(struct sv_recv_wqe) +
		    (size_t)max_sge * sizeof(struct ibv_sge);

	return (sz + 15) & ~(size_t)15;
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t c = 1;

	while (c < n)
		c <<= 1;
	return c;
}

void sv_rq_shm_init(struct sv_rq_shm *q, uint32_t max_wr, uint32_t max_sge,
		    uint64_t slots_off)
{
	q->cap = pow2_at_least(max_wr ? max_wr : 1);
	q->max_wr = max_wr;
	q->max_sge = max_sge ? max_sge : 1;
	q->wqe_size = (uint32_t)sv_recv_wqe_size(q->max_sge);
	q->slots_off = slots_off;
	atomic_store(&q->tail, 0);
	atomic_store(&q->head, 0);
}

int sv_rq_post(void *region, struct sv_rq_shm *q, const struct ibv_recv_wr *wr)
{
	uint64_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&q->head, memory_order_acquire);
	struct sv_recv_wqe *w;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->max_sge)
		return EINVAL;
	if (tail - head >= q->max_wr)
		return ENOMEM;
	w = sv_rq_slot(region, q, tail);
	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	if (wr->num_sge)
		memcpy(w->sge, wr->sg_list,
		       (size_t)wr->num_sge * sizeof(struct ibv_sge));
	atomic_store_explicit(&q->tail, tail + 1, memory_order_release);
	return 0;
}

uint32_t sv_rq_count(struct sv_rq_shm *q)
{
	uint64_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);
	uint64_t head = atomic_load_explicit(&q->head, memory_order_relaxed);

	return tail >= head && tail - head <= q->cap ? (uint32_t)(tail - head) : 0;
}

int sv_rq_peek(void *region, struct sv_rq_shm *q, uint32_t i,
	       struct sv_recv_wqe *out, uint32_t out_sge)
{
	uint64_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
	struct sv_recv_wqe *w;
	uint32_t n;

	if (i >= sv_rq_count(q))
		return -EAGAIN;
	w = sv_rq_slot(region, q, head + i);
	out->wr_id = w->wr_id;
	n = w->num_sge;
	if (n > q->max_sge)
		n = q->max_sge; /* garbage from a scribbler: bounded */
	if (n > out_sge)
		n = out_sge;
	out->num_sge = n;
	memcpy(out->sge, w->sge, n * sizeof(struct ibv_sge));
	return 0;
}

void sv_rq_drop(struct sv_rq_shm *q, uint32_t n)
{
	uint64_t head = atomic_load_explicit(&q->head, memory_order_relaxed);

	atomic_store_explicit(&q->head, head + n, memory_order_release);
}

int sv_rq_take(void *region, struct sv_rq_shm *q, struct sv_recv_wqe *out,
	       uint32_t out_sge)
{
	int err = sv_rq_peek(region, q, 0, out, out_sge);

	if (!err)
		sv_rq_drop(q, 1);
	return err;
}

/* -------------------------------------------------------------- SRQ -- */

int sv_srq_shm_create(struct sv_srq *srq, uint32_t max_wr, uint32_t max_sge,
		      int *fdp)
{
	size_t slots = pow2_at_least(SV_MAX_SRQ_WR);
	size_t size = sizeof(struct sv_srq_shm) + slots * sv_recv_wqe_size(max_sge);
	struct sv_srq_shm *s = sv_shm_create(SV_SHM_SRQ, size, fdp);

	if (!s)
		return -ENOMEM;
	if (sv_shlock_init(&s->lock)) {
		sv_shm_unmap(s);
		close(*fdp);
		return -ENOMEM;
	}
	sv_rq_shm_init(&s->rq, max_wr, max_sge, sizeof(*s));
	s->pd_id = srq->pd_id;
	srq->shm = s;
	srq->slot_bytes = size - sizeof(*s);
	return 0;
}

int sv_srq_dropped(struct sv_srq_shm *s)
{
	if (s->limit && sv_rq_count(&s->rq) < s->limit) {
		/* IBTA 10.2.9.3: the event fires once, then disarms. */
		s->limit = 0;
		return 1;
	}
	return 0;
}

int sv_srq_take(struct sv_srq_shm *s, struct sv_recv_wqe *out,
		uint32_t out_sge, int *limit_event)
{
	int err;

	*limit_event = 0;
	sv_lock_shm(&s->lock, SV_LOCK_SRQ);
	err = sv_rq_take(s, &s->rq, out, out_sge);
	if (!err)
		*limit_event = sv_srq_dropped(s);
	sv_unlock_shm(&s->lock);
	return err;
}

int sv_srq_resize(struct sv_srq *srq, uint32_t max_wr, uint32_t max_sge)
{
	struct sv_srq_shm *s = srq->shm;
	struct sv_rq_shm *q = &s->rq;
	uint32_t cap = pow2_at_least(max_wr), old_size;
	uint64_t head, n;
	char *tmp;
	int err = 0;

	if (cap > pow2_at_least(SV_MAX_SRQ_WR))
		return -EINVAL;
	sv_lock_shm(&s->lock, SV_LOCK_SRQ);
	head = atomic_load(&q->head);
	n = sv_rq_count(q);
	if (n > max_wr) {
		err = -EINVAL;
		goto out;
	}
	tmp = n ? malloc(n * q->wqe_size) : NULL;
	if (n && !tmp) {
		err = -ENOMEM;
		goto out;
	}
	old_size = q->wqe_size;
	for (uint64_t i = 0; i < n; i++)
		memcpy(tmp + i * old_size, sv_rq_slot(s, q, head + i), old_size);
	q->cap = cap;
	q->max_wr = max_wr;
	if (max_sge > q->max_sge && max_sge <= SV_MAX_SRQ_SGE &&
	    (size_t)cap * sv_recv_wqe_size(max_sge) <= srq->slot_bytes) {
		q->max_sge = max_sge;
		q->wqe_size = (uint32_t)sv_recv_wqe_size(max_sge);
	}
	for (uint64_t i = 0; i < n; i++)
		memcpy(sv_rq_slot(s, q, i), tmp + i * old_size, old_size);
	free(tmp);
	atomic_store(&q->head, 0);
	atomic_store(&q->tail, n);
out:
	sv_unlock_shm(&s->lock);
	return err;
}

/* --------------------------------------------------------------- QP -- */

int sv_qp_shm_create(struct sv_qp *qp, uint32_t max_recv_wr,
		     uint32_t max_recv_sge, int has_srq, int *fdp)
{
	uint32_t sge = max_recv_sge ? max_recv_sge : 1;
	size_t wsz = sv_recv_wqe_size(has_srq ? SV_MAX_SRQ_SGE : sge);
	uint32_t cap = has_srq ? 0 : pow2_at_least(max_recv_wr ? max_recv_wr : 1);
	size_t size = sizeof(struct sv_qp_shm) + wsz /* cur */ +
		      (size_t)cap * sv_recv_wqe_size(sge);
	struct sv_qp_shm *q = sv_shm_create(SV_SHM_QP, size, fdp);

	if (!q)
		return -ENOMEM;
	if (sv_shlock_init(&q->lock)) {
		sv_shm_unmap(q);
		close(*fdp);
		return -ENOMEM;
	}
	q->cur_off = sizeof(*q);
	if (!has_srq)
		sv_rq_shm_init(&q->rq, max_recv_wr, sge, sizeof(*q) + wsz);
	q->state = IBV_QPS_RESET;
	q->mtu = 1024;
	qp->shm = q;
	return 0;
}

/* ------------------------------------------------- owner's CQ events -- */

void sv_cq_comp_event(struct sv_cq *cq)
{
	struct sv_channel *c = (struct sv_channel *)cq->ex.channel;
	uint64_t one = 1;
	ssize_t n;

	if (!c)
		return;
	sv_lock_mutex(&c->lock, SV_LOCK_CHANNEL);
	if (cq->chan_pending++ == 0) {
		cq->chan_next = NULL;
		if (c->tail)
			c->tail->chan_next = cq;
		else
			c->head = cq;
		c->tail = cq;
	}
	sv_unlock_mutex(&c->lock);
	n = write(c->ch.fd, &one, sizeof(one));
	(void)n; /* an eventfd counter does not overflow in practice */
}

void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited)
{
	unsigned bits = sv_cq_produce(cq->shm, wc, solicited);

	if (bits & SV_CQP_EVENT)
		sv_cq_comp_event(cq);
	if (bits & SV_CQP_OVERFLOW) {
		sv_warn("cq %p: overflow (%u entries), completion lost",
			(void *)cq, cq->shm->cap);
		sv_eng_async(cq->eng, &cq->cref, IBV_EVENT_CQ_ERR,
			     ibv_cq_ex_to_cq(&cq->ex));
	}
}

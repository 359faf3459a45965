/* SPDX-License-Identifier: MIT */
/*
 * Memory of another process through its owner's engine (keys.c "Memory of
 * another process"): where CMA is refused, and always for atomics, the
 * engine that owns the memory executes the access after checking that the
 * MR key names that memory.  A request box follows a small ring in a link
 * to the owner (engine_int.h struct sv_rmem_box); the owner serves boxes
 * from any of its threads that drains, and from threads that wait on a
 * box of their own, so two engines waiting on each other always make
 * progress.  The owner gone: an error, never a hang.
 */
#include "engine_int.h"
#include "sv_proc.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The link to the engine of process pid, for remote memory requests.
 * Under rmem_lock only: our callers may hold QP locks. */
static struct sv_link *rlink_get(struct sv_engine *eng, pid_t pid)
{
	size_t ring = SV_RING_DATA_OFF + 8192, size = ring + SV_RMEM_BOX_BYTES;
	struct sv_link *l;
	uint32_t peer;

	for (l = eng->rlinks; l; l = l->next)
		if (l->peer_pid == pid && !atomic_load(&l->dead))
			return l;
	if (!eng->attached)
		return NULL;
	peer = sv_lookup_engine(eng, (uint32_t)pid, SV_QPN_BY_PID, NULL);
	if (!peer || peer == eng->id)
		return NULL;
	/* A small ring nobody writes (the owner's consumer wants one), then
	 * the box. */
	l = sv_link_new(eng, peer, ring, size);
	if (!l)
		return NULL;
	pthread_mutex_init(&l->box_lock, NULL);
	l->box = (struct sv_rmem_box *)((char *)l->map + ring);
	l->next = eng->rlinks;
	eng->rlinks = l;
	return l;
}

int sv_rmem_call(struct sv_engine *eng, pid_t pid, uint32_t op, uint32_t key,
		 uint64_t addr, void *buf, uint32_t len, uint64_t comp,
		 uint64_t swap, uint64_t *orig)
{
	struct sv_rmem_box *b;
	struct sv_link *l;
	uint64_t t0, last_check;
	uint32_t spins = 0;
	int err;

	if (len > SV_RMEM_CHUNK)
		return -EINVAL;
	sv_lock_mutex(&eng->rmem_lock, SV_LOCK_RMEM);
	l = rlink_get(eng, pid);
	sv_unlock_mutex(&eng->rmem_lock);
	if (!l)
		return -EHOSTDOWN;
	sv_lock_mutex(&l->box_lock, SV_LOCK_BOX);
	b = l->box;
	if (atomic_load(&l->dead)) {
		sv_unlock_mutex(&l->box_lock);
		return -EHOSTDOWN;
	}
	b->op = op;
	b->key = key;
	b->addr = addr;
	b->len = len;
	b->comp = comp;
	b->swap = swap;
	b->result = -EIO;
	b->seq++;
	if (op == SV_RMEM_WRITE && sv_safe_copy(b->data, buf, len)) {
		sv_unlock_mutex(&l->box_lock);
		return -EFAULT;
	}
	atomic_store_explicit(&b->state, SV_RMEM_REQ, memory_order_release);
	sv_link_ring(l);
	t0 = last_check = sv_now_ns();
	for (;;) {
		uint64_t now;

		if (atomic_load_explicit(&b->state, memory_order_acquire) ==
		    SV_RMEM_DONE)
			break;
		/* Serve requests to our memory meanwhile: the owner may be
		 * waiting on us right now. */
		if (sv_rmem_serve(eng))
			continue;
		if (++spins < 1000)
			continue;
		{
			struct timespec ts = { 0, 20000 };

			nanosleep(&ts, NULL);
		}
		now = sv_now_ns();
		if (now - last_check < 5000000)
			continue;
		last_check = now;
		if (atomic_load(&l->dead) ||
		    sv_pid_state(l->peer_pid) != SV_PID_RUNNING ||
		    now - t0 > SV_RMEM_TIMEOUT_NS) {
			/* The box may still be claimed: never reuse it. */
			atomic_store(&l->dead, 1);
			sv_unlock_mutex(&l->box_lock);
			return -EHOSTDOWN;
		}
	}
	err = b->result;
	if (!err && op == SV_RMEM_READ && sv_safe_copy(buf, b->data, len))
		err = -EFAULT;
	if (!err && orig)
		*orig = b->orig;
	atomic_store_explicit(&b->state, SV_RMEM_IDLE, memory_order_relaxed);
	sv_unlock_mutex(&l->box_lock);
	return err;
}

/* Executes the request in box b on our memory (unmapped memory is an
 * error, not a crash). */
static void rmem_exec(struct sv_engine *eng, struct sv_rmem_box *b)
{
	uint32_t op = b->op, key = b->key, len = b->len;
	uint64_t addr = b->addr, comp = b->comp, swap = b->swap, orig = 0;
	int atomic = op == SV_RMEM_CSWAP || op == SV_RMEM_FADD, err;

	/* Only what an MR of ours names: a peer cannot reach the rest of
	 * our address space. */
	if (len > SV_RMEM_CHUNK || (atomic && (len != 8 || (addr & 7))) ||
	    (op < SV_RMEM_READ || op > SV_RMEM_FADD) ||
	    !sv_key_owned(eng, key, addr, len)) {
		b->result = -EACCES;
		return;
	}
	switch (op) {
	case SV_RMEM_READ:
		err = sv_safe_copy(b->data, (void *)(uintptr_t)addr, len);
		break;
	case SV_RMEM_WRITE:
		err = sv_safe_copy((void *)(uintptr_t)addr, b->data, len);
		break;
	default:
		err = sv_safe_atomic((uint64_t *)(uintptr_t)addr, op, comp, swap,
				     &orig);
		b->orig = orig;
		break;
	}
	b->result = err;
}

int sv_rmem_serve(struct sv_engine *eng)
{
	unsigned nin = atomic_load_explicit(&eng->nin, memory_order_acquire);
	int n = 0;

	for (unsigned i = 0; i < nin; i++) {
		struct sv_inring *in = eng->in[i];
		uint32_t want = SV_RMEM_REQ;

		if (!in || !in->box)
			continue;
		if (atomic_load_explicit(&in->box->state, memory_order_relaxed) !=
			    SV_RMEM_REQ ||
		    !atomic_compare_exchange_strong_explicit(
			    &in->box->state, &want, SV_RMEM_SERVING,
			    memory_order_acquire, memory_order_relaxed))
			continue;
		/* Read-held as for the rings: ibv_dereg_mr waits for a copy
		 * under a key checked before it (a reader may be ours
		 * already: the lock prefers readers). */
		sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
		rmem_exec(eng, in->box);
		sv_unlock_rw(&eng->qp_lock);
		atomic_store_explicit(&in->box->state, SV_RMEM_DONE,
				      memory_order_release);
		n++;
	}
	return n;
}

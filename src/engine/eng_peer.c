/* SPDX-License-Identifier: MIT */
/*
 * Views of other processes' QPs, for direct execution (sv_direct.c): the
 * initiator maps the target QP's responder block, its receive CQ and its
 * SRQ (the fds the daemon keeps, SV_OP_QP_PEER) and runs the target's
 * responder itself, moving the payload with CMA.  What only the owner can
 * do -- a completion event on its channel, an async event, flushing its
 * send queue -- travels to its engine as an event record on our link to
 * it (SV_REC_EVENT), with a doorbell.
 *
 * A view lives in a per-engine list keyed by QPN.  The owner marks a
 * region dead when it destroys the QP; a QPN reused later names a new
 * region (another cookie), so a stale view is never used: it is dropped
 * at the next lookup, or when the owner's engine is reported gone.
 */
#include "engine_int.h"
#include "sv_client.h"
#include "sv_sock.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void peer_free(struct sv_peer *p)
{
	sv_shm_unmap(p->q);
	sv_shm_unmap(p->rcq);
	sv_shm_unmap(p->srq);
	free(p);
}

static int peer_stale(struct sv_peer *p)
{
	return atomic_load_explicit(&p->q->h.dead, memory_order_acquire) ||
	       (p->link && atomic_load(&p->link->dead)) ||
	       atomic_load_explicit(&p->moved, memory_order_relaxed);
}

static void xsrq_free(struct sv_xsrq *x)
{
	sv_shm_unmap(x->srq);
	sv_shm_unmap(x->cq);
	free(x);
}

/* The daemon destroyed the SRQ (its number may name another one now), or
 * its owner is gone. */
static int xsrq_stale(struct sv_xsrq *x)
{
	return atomic_load_explicit(&x->srq->h.dead, memory_order_acquire) ||
	       (x->link && atomic_load(&x->link->dead));
}

/* Removes stale views nobody uses.  Must hold peer_lock. */
static void prune_locked(struct sv_engine *eng, uint32_t dead_engine)
{
	struct sv_peer **pp = &eng->peers, *p;
	struct sv_xsrq **xp = &eng->xsrqs, *x;

	while ((p = *pp)) {
		if ((peer_stale(p) || (dead_engine && p->engine_id == dead_engine)) &&
		    atomic_load(&p->refs) == 0) {
			*pp = p->next;
			peer_free(p);
			continue;
		}
		pp = &p->next;
	}
	while ((x = *xp)) {
		if ((xsrq_stale(x) || (dead_engine && x->engine_id == dead_engine)) &&
		    atomic_load(&x->refs) == 0) {
			*xp = x->next;
			xsrq_free(x);
			continue;
		}
		xp = &x->next;
	}
}

void sv_peer_prune(struct sv_engine *eng, uint32_t dead_engine)
{
	sv_lock_mutex(&eng->peer_lock, SV_LOCK_PEER);
	prune_locked(eng, dead_engine);
	sv_unlock_mutex(&eng->peer_lock);
}

void sv_peer_moved(struct sv_engine *eng, uint32_t qpn)
{
	sv_lock_mutex(&eng->peer_lock, SV_LOCK_PEER);
	for (struct sv_peer *p = eng->peers; p; p = p->next)
		if (p->qpn == qpn)
			atomic_store(&p->moved, 1);
	prune_locked(eng, 0);
	sv_unlock_mutex(&eng->peer_lock);
}

void sv_peer_clear(struct sv_engine *eng)
{
	while (eng->peers) {
		struct sv_peer *p = eng->peers;

		eng->peers = p->next;
		peer_free(p);
	}
	while (eng->xsrqs) {
		struct sv_xsrq *x = eng->xsrqs;

		eng->xsrqs = x->next;
		xsrq_free(x);
	}
}

/* Checks that a mapped QP region describes itself consistently (a region
 * is the owner's to scribble on, but never makes us read outside it).
 * xrc: an XRC TGT QP (the daemon says so), whose receives come from the
 * SRQs its requests name. */
static int qregion_ok(const struct sv_qp_shm *q, uint32_t qpn, int xrc)
{
	int srq = xrc || q->srq_cookie;
	uint64_t cur_sge = srq ? SV_MAX_SRQ_SGE : q->rq.max_sge;

	if (q->qpn != qpn || q->cur_off < sizeof(*q) ||
	    q->cur_off + sv_recv_wqe_size((uint32_t)cur_sge) > q->h.size)
		return 0;
	if (srq)
		return 1;
	return q->rq.cap && !(q->rq.cap & (q->rq.cap - 1)) &&
	       q->rq.max_wr <= q->rq.cap && q->rq.max_sge <= SV_MAX_SGE &&
	       q->rq.wqe_size == sv_recv_wqe_size(q->rq.max_sge) &&
	       q->rq.slots_off + (uint64_t)q->rq.cap * q->rq.wqe_size <= q->h.size;
}

static int cregion_ok(const struct sv_cq_shm *c)
{
	return c->entries_off >= sizeof(*c) &&
	       c->entries_off + (uint64_t)c->max * sizeof(struct ibv_wc) <=
		       c->h.size &&
	       (!c->stamps_off ||
		(c->stamps_off >= sizeof(*c) &&
		 c->stamps_off + (uint64_t)c->max * sizeof(uint64_t) <=
			 c->h.size));
}

static int sregion_ok(const struct sv_srq_shm *s)
{
	const struct sv_rq_shm *q = &s->rq;

	return q->max_sge <= SV_MAX_SRQ_SGE &&
	       q->wqe_size == sv_recv_wqe_size(q->max_sge) &&
	       q->slots_off >= sizeof(*s) &&
	       q->slots_off + (uint64_t)q->cap * q->wqe_size <= s->h.size;
}

int sv_qp_peer_fds(struct sv_engine *eng, uint32_t qpn,
		   struct sv_qp_peer_rep *rep, int fds[3])
{
	struct sv_qpn_req req = { .qpn = qpn };
	struct sv_call c = { .op = SV_OP_QP_PEER,
			     .instance = eng->instance,
			     .attach_fd = -1,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = rep,
			     .rep_cap = sizeof(*rep),
			     .rfds = fds,
			     .max_rfds = 3 };

	fds[0] = fds[1] = fds[2] = -1;
	if (sv_call(&c) || c.rep_len != sizeof(*rep) || c.nrfds < 1) {
		sv_close_fds(fds, 3);
		return -1;
	}
	return (int)c.nrfds;
}

/* Maps the regions of QP qpn from the daemon's fds.  NULL if it is not
 * there, not complete, or not consistent. */
static struct sv_peer *peer_map(struct sv_engine *eng, uint32_t qpn)
{
	struct sv_qp_peer_rep rep;
	int fds[3] = { -1, -1, -1 };
	struct sv_peer *p = calloc(1, sizeof(*p));
	int xrc, nfds;

	if (!p)
		return NULL;
	nfds = sv_qp_peer_fds(eng, qpn, &rep, fds);
	if (nfds < 1)
		goto err;
	/* An XRC TGT QP comes alone: each request names its SRQ and CQ. */
	xrc = rep.qp_type == IBV_QPT_XRC_RECV;
	if (!xrc && nfds < 2)
		goto err;
	p->qpn = qpn;
	p->engine_id = rep.engine_id;
	p->pid = (pid_t)rep.pid;
	p->q = sv_shm_map(fds[0], SV_SHM_QP, rep.qp_cookie);
	if (!p->q || !qregion_ok(p->q, qpn, xrc))
		goto err;
	if (xrc) {
		sv_close_fds(fds, 3);
		return p;
	}
	p->rcq = sv_shm_map(fds[1], SV_SHM_CQ, p->q->rcq_cookie);
	if (!p->rcq || !cregion_ok(p->rcq))
		goto err;
	if (p->q->srq_cookie) {
		if (nfds < 3)
			goto err;
		p->srq = sv_shm_map(fds[2], SV_SHM_SRQ, p->q->srq_cookie);
		if (!p->srq || !sregion_ok(p->srq))
			goto err;
	}
	sv_close_fds(fds, 3);
	return p;

err:
	sv_close_fds(fds, 3);
	if (p->q)
		sv_shm_unmap(p->q);
	if (p->rcq)
		sv_shm_unmap(p->rcq);
	if (p->srq)
		sv_shm_unmap(p->srq);
	free(p);
	return NULL;
}

struct sv_peer *sv_peer_get(struct sv_engine *eng, uint32_t qpn)
{
	struct sv_peer *p;

	sv_lock_mutex(&eng->peer_lock, SV_LOCK_PEER);
	for (p = eng->peers; p; p = p->next)
		if (p->qpn == qpn && !peer_stale(p)) {
			atomic_fetch_add(&p->refs, 1);
			sv_unlock_mutex(&eng->peer_lock);
			return p;
		}
	prune_locked(eng, 0);
	sv_unlock_mutex(&eng->peer_lock);

	p = peer_map(eng, qpn);
	if (!p)
		return NULL;
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	p->link = sv_link_get(eng, p->engine_id);
	sv_unlock_mutex(&eng->lock);
	/* Direct execution needs CMA to the owner (its memory is reached
	 * that way), which the owner's region proves readable. */
	if (!p->link || !sv_cma_probe(p->pid, p->q->h.owner_va, SV_SHM_QP)) {
		peer_free(p);
		return NULL;
	}
	atomic_store(&p->refs, 1);
	sv_lock_mutex(&eng->peer_lock, SV_LOCK_PEER);
	p->next = eng->peers;
	eng->peers = p;
	sv_unlock_mutex(&eng->peer_lock);
	return p;
}

void sv_peer_put(struct sv_peer *p)
{
	if (p)
		atomic_fetch_sub(&p->refs, 1);
}

/* ------------------------------------------------------ XRC SRQs -- */

/* Maps XRC SRQ srqn from the daemon's fds; NULL when there is none, or
 * its regions are not whole. */
static struct sv_xsrq *xsrq_map(struct sv_engine *eng, uint32_t srqn)
{
	struct sv_qpn_req req = { .qpn = srqn };
	struct sv_srq_peer_rep rep;
	int fds[2] = { -1, -1 };
	struct sv_call c = { .op = SV_OP_SRQ_PEER,
			     .instance = eng->instance,
			     .attach_fd = -1,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = fds,
			     .max_rfds = 2 };
	struct sv_xsrq *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	if (sv_call(&c) || c.rep_len != sizeof(rep) || c.nrfds != 2)
		goto err;
	x->srqn = srqn;
	x->xrcd_id = rep.xrcd_id;
	x->pd_id = rep.pd_id;
	x->engine_id = rep.engine_id;
	x->srq = sv_shm_map(fds[0], SV_SHM_SRQ, 0);
	x->cq = sv_shm_map(fds[1], SV_SHM_CQ, 0);
	if (!x->srq || !sregion_ok(x->srq) || !x->cq || !cregion_ok(x->cq))
		goto err;
	sv_close_fds(fds, 2);
	return x;

err:
	sv_close_fds(fds, 2);
	sv_shm_unmap(x->srq);
	sv_shm_unmap(x->cq);
	free(x);
	return NULL;
}

struct sv_xsrq *sv_xsrq_get(struct sv_engine *eng, uint32_t srqn)
{
	struct sv_xsrq *x;

	sv_lock_mutex(&eng->peer_lock, SV_LOCK_PEER);
	for (x = eng->xsrqs; x; x = x->next)
		if (x->srqn == srqn && !xsrq_stale(x)) {
			atomic_fetch_add(&x->refs, 1);
			sv_unlock_mutex(&eng->peer_lock);
			return x;
		}
	prune_locked(eng, 0);
	sv_unlock_mutex(&eng->peer_lock);

	x = srqn ? xsrq_map(eng, srqn) : NULL;
	if (!x)
		return NULL;
	if (x->engine_id) {
		sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
		x->link = sv_link_get(eng, x->engine_id);
		sv_unlock_mutex(&eng->lock);
	}
	atomic_store(&x->refs, 1);
	sv_lock_mutex(&eng->peer_lock, SV_LOCK_PEER);
	x->next = eng->xsrqs;
	eng->xsrqs = x;
	sv_unlock_mutex(&eng->peer_lock);
	return x;
}

void sv_xsrq_put(struct sv_xsrq *x)
{
	if (x)
		atomic_fetch_sub(&x->refs, 1);
}

/* ------------------------------------------------------ owner events -- */

/* Sends an event record to the owner of p (its doorbell rings: events
 * are rare and the owner may sleep).  A full ring is retried: the owner
 * drains it, and an event lost would leave a waiter blocked. */
static void link_event(struct sv_link *l, uint32_t kind, uint32_t id,
		       uint64_t cookie, uint32_t bits)
{
	struct sv_ev_rec *r;
	int dead = 0;

	for (unsigned tries = 0;; tries++) {
		r = (struct sv_ev_rec *)sv_link_reserve_type(l, sizeof(*r),
							     SV_REC_EVENT,
							     &dead);
		if (r || dead)
			break;
		if (tries > 100000) {
			sv_warn("engine %u: the owner does not drain its ring: "
				"event lost", l->peer_id);
			return;
		}
		sched_yield();
	}
	if (!r)
		return;
	*r = (struct sv_ev_rec){ .kind = kind, .id = id, .cookie = cookie,
				 .bits = bits };
	sv_link_commit(l);
	sv_link_ring(l);
}

static void peer_event(struct sv_peer *p, uint32_t kind, uint32_t id,
		       uint64_t cookie, uint32_t bits)
{
	link_event(p->link, kind, id, cookie, bits);
}

/* An event of t's XRC SRQ or its CQ, for the SRQ's owner: ours, told at
 * once, or another process's, told on our link to it. */
static void xsrq_event(struct sv_engine *eng, struct sv_xsrq *x, int kind,
		       unsigned bits)
{
	const struct sv_shm_hdr *h = kind == SV_EVK_CQ ? &x->cq->h : &x->srq->h;
	struct sv_cq *cq;
	struct sv_srq *srq;

	if (x->engine_id != eng->id) {
		if (x->link)
			link_event(x->link, (uint32_t)kind, h->obj_id, h->cookie,
				   bits);
		return;
	}
	if (kind == SV_EVK_CQ) {
		cq = sv_eng_cq(eng, h->obj_id, h->cookie);
		if (cq && (bits & SV_CQP_EVENT))
			sv_cq_comp_event(cq);
		if (cq && (bits & SV_CQP_OVERFLOW))
			sv_eng_async(eng, &cq->cref, IBV_EVENT_CQ_ERR,
				     ibv_cq_ex_to_cq(&cq->ex));
		return;
	}
	srq = sv_eng_srq(eng, h->obj_id, h->cookie);
	if (srq)
		sv_eng_async(eng, &srq->cref, IBV_EVENT_SRQ_LIMIT_REACHED,
			     &srq->srq);
}

void sv_rtgt_notify(struct sv_engine *eng, struct sv_rtgt *t, int kind,
		    unsigned bits)
{
	struct sv_qp *own = t->own;

	if (t->x && kind != SV_EVK_QP) {
		xsrq_event(eng, t->x, kind, bits);
		return;
	}
	if (own) {
		switch (kind) {
		case SV_EVK_CQ:
			if (bits & SV_CQP_EVENT)
				sv_cq_comp_event(own->rcq);
			if (bits & SV_CQP_OVERFLOW)
				sv_eng_async(eng, &own->rcq->cref, IBV_EVENT_CQ_ERR,
					     ibv_cq_ex_to_cq(&own->rcq->ex));
			break;
		case SV_EVK_SRQ:
			if (own->srq)
				sv_eng_async(eng, &own->srq->cref,
					     IBV_EVENT_SRQ_LIMIT_REACHED,
					     &own->srq->srq);
			break;
		default:
			/* Flushing needs the QP's send lock, which our caller
			 * may hold (of another QP): the progress scan does it. */
			sv_eng_want_work(eng);
			break;
		}
		return;
	}
	if (!t->peer || !t->peer->link)
		return;
	switch (kind) {
	case SV_EVK_CQ:
		peer_event(t->peer, SV_EVK_CQ, t->rcq->h.obj_id, t->rcq->h.cookie,
			   bits);
		break;
	case SV_EVK_SRQ:
		if (t->srq)
			peer_event(t->peer, SV_EVK_SRQ, t->srq->h.obj_id,
				   t->srq->h.cookie, bits);
		break;
	default:
		peer_event(t->peer, SV_EVK_QP, t->q->qpn, t->q->h.cookie, 0);
		break;
	}
}

/* --------------------------------------------------- UD destinations -- */

struct sv_peer *sv_peer_find(struct sv_engine *eng, uint32_t qpn)
{
	struct sv_peer *p;

	sv_lock_mutex(&eng->peer_lock, SV_LOCK_PEER);
	for (p = eng->peers; p; p = p->next)
		if (p->qpn == qpn && !peer_stale(p)) {
			atomic_fetch_add(&p->refs, 1);
			break;
		}
	sv_unlock_mutex(&eng->peer_lock);
	return p;
}

void sv_peer_learn(struct sv_engine *eng, uint32_t qpn)
{
	struct sv_peer *p;
	uint32_t slot = qpn & 255;
	int local;

	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	local = !!sv_eng_qp(eng, qpn);
	sv_unlock_rw(&eng->qp_lock);
	if (local || eng->nodirect[slot] == qpn + 1)
		return;
	p = sv_peer_find(eng, qpn);
	if (!p)
		p = sv_peer_get(eng, qpn);
	if (!p) {
		eng->nodirect[slot] = qpn + 1;
		return;
	}
	sv_peer_put(p); /* stays cached */
}

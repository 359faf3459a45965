/* SPDX-License-Identifier: MIT */
/*
 * XRC TGT QPs that change hands: which process's engine takes a TGT QP's
 * packets (docs/differences.md "XRC").
 *
 * A TGT QP lives while any handle to it does: its creator's, or one from
 * ibv_open_qp in another process of the domain.  Its state is in its
 * region, which every handle maps, so any of those processes can serve
 * it; the daemon names one (its creator's first, src/daemon/xrcd.c) and
 * tells every engine when that changes (SV_ENGINE_XRC_SERVE):
 *  - the new server adopts the QP through one of its opened handles (a
 *    struct sv_qp that maps the region, listed here at ibv_open_qp) --
 *    it gets a transport state and a place in the QP table, as the
 *    creator's QP has -- and routes its answers from the region's
 *    address vector, which any handle's modify wrote;
 *  - every engine forgets where the QP was: its QPN cache entry, its
 *    views of the QP's region, and the link of each of its QPs that
 *    send to it (an INI QP's next packet finds the new server).
 * The daemon tells the server again when an opened handle modifies the
 * QP: the route it answers on may have changed.
 *
 * A process keeps its engine attached while it holds an opened handle
 * (engine_wanted), so the daemon can hand it the QP.
 *
 * Events of the QP go to every handle, as the kernel gives a shared QP's
 * events to each: the server's own at once, other processes' through
 * the daemon (SV_OP_XRC_EVENT, SV_ENGINE_XRC_EVENT).
 */
#include "engine_int.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

int sv_engine_tgt_open(struct sv_engine *eng, struct sv_qp *t)
{
	int err = 0;

	/* qp_lock before eng->lock, as sv_engine_qp_add. */
	sv_lock_write(&eng->qp_lock, SV_LOCK_QPTAB);
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	if (!eng->attached)
		err = sv_eng_attach(eng);
	if (!err) {
		t->xnext = eng->xopens;
		eng->xopens = t;
		eng->nxopen++;
	}
	sv_unlock_mutex(&eng->lock);
	sv_unlock_rw(&eng->qp_lock);
	return err;
}

/* Must hold eng->lock. */
static int listed(struct sv_engine *eng, const struct sv_qp *t)
{
	for (struct sv_qp *h = eng->xopens; h; h = h->xnext)
		if (h == t)
			return 1;
	return 0;
}

/* One of our opened handles of qpn other than `not`, or NULL.  Must hold
 * eng->lock. */
static struct sv_qp *handle_of(struct sv_engine *eng, uint32_t qpn,
			       const struct sv_qp *not)
{
	for (struct sv_qp *h = eng->xopens; h; h = h->xnext)
		if (h != not && h->qpx.qp_base.qp_num == qpn)
			return h;
	return NULL;
}

/* Routes t's answers from its region: the peer its address vector and
 * destination QP name, on this host or on the wire (the flow the
 * creator's modify would have made).  t is pinned (busy); no lock held. */
static void reroute(struct sv_qp *t)
{
	struct sv_engine *eng = t->eng;
	struct sv_qp_shm *q = t->shm;
	struct sv_tr *tr = tr_of(t);
	struct ibv_qp_attr na;
	struct sv_link *link;
	uint32_t st, mtu;
	int set;

	memset(&na, 0, sizeof(na));
	sv_lock_shm(&q->lock, SV_LOCK_RESP);
	st = q->state;
	mtu = q->mtu;
	set = q->av.set;
	na.dest_qp_num = q->dest_qpn;
	memcpy(na.ah_attr.grh.dgid.raw, q->av.dgid, 16);
	na.ah_attr.grh.flow_label = q->av.flow_label;
	na.ah_attr.grh.sgid_index = q->av.sgid_index;
	na.ah_attr.grh.hop_limit = q->av.hop_limit;
	na.ah_attr.grh.traffic_class = q->av.traffic_class;
	na.ah_attr.is_global = q->av.is_global;
	na.ah_attr.port_num = 1;
	sv_unlock_shm(&q->lock);
	if (!set || st < IBV_QPS_RTR || st == IBV_QPS_ERR)
		return; /* nothing to answer yet: the next modify says */
	link = sv_av_remote(eng, &na.ah_attr) ? sv_eng_wire_route(t, &na) :
						sv_eng_link_for_qpn(eng, na.dest_qp_num);
	if (!link)
		return; /* answers find their peer later (sv_resp_flush) */
	sv_lock_shm(&q->lock, SV_LOCK_RESP);
	if (mtu)
		tr->mtu = mtu;
	if (link->w)
		sv_tr_set_wlink(tr, link); /* frees the one it replaces */
	t->link = link;
	tr->link = link;
	sv_unlock_shm(&q->lock);
}

/* t, an opened handle of ours, serves its QP: in the QP table with a
 * transport state, pinned (busy) for the caller.  0, or why not: another
 * of our QPs serves qpn (t itself perhaps: the daemon's word and our own
 * hand-over may both come), or t is no longer listed. */
static int adopt(struct sv_engine *eng, struct sv_qp *t)
{
	uint32_t qpn = t->qpx.qp_base.qp_num;
	int err;

	sv_lock_write(&eng->qp_lock, SV_LOCK_QPTAB);
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	if (!listed(eng, t) || sv_eng_qp(eng, qpn) || t->tr) {
		err = -EEXIST;
	} else {
		err = sv_tr_init(t);
		if (!err) {
			err = sv_qtab_put(eng, qpn, t);
			if (err)
				sv_tr_free(t);
		}
	}
	if (!err)
		atomic_fetch_add(&t->busy, 1);
	sv_unlock_mutex(&eng->lock);
	sv_unlock_rw(&eng->qp_lock);
	if (!err)
		sv_dbg("engine %u: serves TGT QP %#x", eng->id, qpn);
	return err;
}

/* The QP numbered qpn that serves it here, pinned, or one of our opened
 * handles of it adopted now; NULL when we have neither. */
static struct sv_qp *server_pin(struct sv_engine *eng, uint32_t qpn)
{
	struct sv_qp *t;

	for (int tries = 0; tries < 4; tries++) {
		sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
		t = sv_eng_qp(eng, qpn);
		if (t)
			atomic_fetch_add(&t->busy, 1);
		sv_unlock_rw(&eng->qp_lock);
		if (t)
			return t;
		sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
		t = handle_of(eng, qpn, NULL);
		sv_unlock_mutex(&eng->lock);
		if (!t)
			return NULL;
		/* (Gone from the list, or another took the place, since:
		 * look again.) */
		if (!adopt(eng, t))
			return t;
	}
	return NULL;
}

/* Our QPs that send to qpn find it again at their next packet: the link
 * of each (a ring towards the old server) is looked up anew, and so is
 * its view of the QP. */
static void relink_senders(struct sv_engine *eng, uint32_t qpn)
{
	uint32_t i = 0;

	for (;;) {
		struct sv_qp *qp = NULL;
		struct sv_link *link;
		struct sv_peer *peer;
		struct sv_tr *tr;

		sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
		for (; i < eng->qcap && !qp; i++) {
			struct sv_qp *q = eng->qtab[i].qp;

			if (q && q->type == IBV_QPT_XRC_SEND && q->dest_qpn == qpn &&
			    q->link && !q->link->w) {
				qp = q;
				atomic_fetch_add(&qp->busy, 1);
			}
		}
		sv_unlock_rw(&eng->qp_lock);
		if (!qp)
			return;
		tr = tr_of(qp);
		sv_engine_qp_route(qp, &qp->attr, &link, &peer);
		sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
		if (link && qp->link && !qp->link->w) {
			qp->link = link;
			tr->link = link;
			tr->ring_mark = 0;
			sv_peer_put(tr->peer);
			tr->peer = peer;
			peer = NULL;
			tr->path.reach = sv_path_reach(qp, link, tr->peer, 1);
		}
		sv_unlock_spin(&qp->sq_lock);
		sv_peer_put(peer);
		atomic_fetch_sub(&qp->busy, 1);
	}
}

void sv_engine_xrc_serve(struct sv_engine *eng, uint32_t qpn, uint32_t pid)
{
	struct sv_qp *t;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	if (eng->dcache[qpn & 255].qpn == qpn)
		eng->dcache[qpn & 255].engine_id = 0;
	sv_unlock_mutex(&eng->lock);
	sv_peer_moved(eng, qpn);
	if (pid == (uint32_t)eng->pid) {
		t = server_pin(eng, qpn);
		if (t) {
			reroute(t);
			atomic_fetch_sub(&t->busy, 1);
		}
	}
	relink_senders(eng, qpn);
	atomic_store(&eng->work, 1);
}

/* Our QP that served qpn went (t, the creator's or an adopted handle):
 * another opened handle of ours takes its place, as the daemon keeps us
 * the server while we hold one. */
static void hand_on(struct sv_engine *eng, uint32_t qpn, const struct sv_qp *t)
{
	struct sv_qp *h;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	h = handle_of(eng, qpn, t);
	sv_unlock_mutex(&eng->lock);
	if (h && !adopt(eng, h)) {
		reroute(h);
		atomic_fetch_sub(&h->busy, 1);
	}
}

void sv_engine_tgt_gone(struct sv_qp *qp)
{
	hand_on(qp->eng, qp->qpx.qp_base.qp_num, qp);
}

void sv_engine_tgt_close(struct sv_qp *t)
{
	struct sv_engine *eng = t->eng;
	struct sv_qp **pp;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	for (pp = &eng->xopens; *pp; pp = &(*pp)->xnext)
		if (*pp == t) {
			*pp = t->xnext;
			eng->nxopen--;
			break;
		}
	sv_unlock_mutex(&eng->lock);
	if (t->tr) { /* it served the QP */
		sv_engine_qp_del(t);
		hand_on(eng, t->qpx.qp_base.qp_num, t);
	} else {
		sv_eng_detach(eng); /* (only when nothing else wants it) */
	}
}

void sv_engine_tgt_ctx_close(struct sv_engine *eng, struct ibv_context *ctx)
{
	struct sv_qp **pp;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	for (pp = &eng->xopens; *pp;) {
		if ((*pp)->qpx.qp_base.context == ctx) {
			*pp = (*pp)->xnext;
			eng->nxopen--;
			continue;
		}
		pp = &(*pp)->xnext;
	}
	sv_unlock_mutex(&eng->lock);
}

/* Each of our opened handles of qpn gets event `type`, and `also` (the
 * creator's QP), when given.  No lock held but qp_lock (read) perhaps. */
static void deliver(struct sv_engine *eng, uint32_t qpn,
		    enum ibv_event_type type, struct sv_qp *also)
{
	if (also)
		sv_eng_async(eng, &also->cref, type, &also->qpx.qp_base);
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	for (struct sv_qp *h = eng->xopens; h; h = h->xnext)
		if (h->qpx.qp_base.qp_num == qpn)
			sv_eng_async(eng, &h->cref, type, &h->qpx.qp_base);
	sv_unlock_mutex(&eng->lock);
}

void sv_eng_xrc_event_raise(struct sv_qp *qp, enum ibv_event_type type)
{
	struct sv_engine *eng = qp->eng;
	uint32_t qpn = qp->qpx.qp_base.qp_num;

	/* An adopted handle is on the list; the creator's QP is not. */
	deliver(eng, qpn, type, qp->xopen ? NULL : qp);
	sv_eng_async_xrc(eng, qp->cref.instance, qpn, type);
}

void sv_engine_xrc_event(struct sv_engine *eng, uint32_t qpn, uint32_t type)
{
	deliver(eng, qpn, (enum ibv_event_type)type, NULL);
}

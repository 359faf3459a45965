/* SPDX-License-Identifier: MIT */
/*
 * The engine's QPs and objects (engine.c "Design" is the whole picture):
 * the tables that find them by number (QPs by QPN, CQs and SRQs by
 * obj_id), and the QP hooks src/verbs calls between creation and
 * destruction -- routing and committing a modify, the state changes, and
 * a post (sv_engine_posted), which does what sv_path_on_post decides.
 * Creation and destruction themselves attach and detach the engine:
 * engine.c.
 */
#include "engine_int.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "sv_roce.h"

/* -------------------------------------------------------- QP table -- */

static uint32_t qhash(uint32_t qpn, uint32_t cap)
{
	return (qpn * 2654435761u) & (cap - 1);
}

struct sv_qp *sv_eng_qp(struct sv_engine *eng, uint32_t qpn)
{
	if (!eng->qcap)
		return NULL;
	for (uint32_t i = qhash(qpn, eng->qcap);; i = (i + 1) & (eng->qcap - 1)) {
		if (!eng->qtab[i].qp)
			return NULL;
		if (eng->qtab[i].qpn == qpn)
			return eng->qtab[i].qp;
	}
}

/* Must hold qp_lock (write). */
int sv_qtab_put(struct sv_engine *eng, uint32_t qpn, struct sv_qp *qp)
{
	if ((eng->nqps + 1) * 2 > eng->qcap) {
		uint32_t ncap = eng->qcap ? eng->qcap * 2 : 64;
		struct sv_qpent *n = calloc(ncap, sizeof(*n)), *o = eng->qtab;
		uint32_t ocap = eng->qcap;

		if (!n)
			return -ENOMEM;
		eng->qtab = n;
		eng->qcap = ncap;
		for (uint32_t i = 0; i < ocap; i++)
			if (o[i].qp) {
				uint32_t j = qhash(o[i].qpn, ncap);

				while (n[j].qp)
					j = (j + 1) & (ncap - 1);
				n[j] = o[i];
			}
		free(o);
	}
	uint32_t i = qhash(qpn, eng->qcap);

	while (eng->qtab[i].qp)
		i = (i + 1) & (eng->qcap - 1);
	eng->qtab[i].qpn = qpn;
	eng->qtab[i].qp = qp;
	eng->nqps++;
	return 0;
}

/* Must hold qp_lock (write).  Backward-shift deletion keeps probes short
 * without tombstones. */
void sv_qtab_del(struct sv_engine *eng, uint32_t qpn)
{
	uint32_t mask = eng->qcap - 1, i, j;

	if (!eng->qcap)
		return;
	for (i = qhash(qpn, eng->qcap);; i = (i + 1) & mask) {
		if (!eng->qtab[i].qp)
			return;
		if (eng->qtab[i].qpn == qpn)
			break;
	}
	eng->qtab[i].qp = NULL;
	eng->nqps--;
	for (j = (i + 1) & mask; eng->qtab[j].qp; j = (j + 1) & mask) {
		uint32_t h = qhash(eng->qtab[j].qpn, eng->qcap);

		/* Move j back to i if its home is not in (i, j]. */
		if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
			eng->qtab[i] = eng->qtab[j];
			eng->qtab[j].qp = NULL;
			i = j;
		}
	}
}

/* ---------------------------------------------------- object tables -- */

#define OBJ_SLOT_BITS 20

/* Gives obj an id (slot | generation << 20).  Must hold eng->lock. */
static int objtab_add(struct sv_objtab *t, void *obj, uint32_t *id)
{
	uint32_t i;

	for (i = t->free_hint; i < t->cap && t->obj[i]; i++)
		;
	if (i == t->cap) {
		uint32_t ncap = t->cap ? t->cap * 2 : 64;
		void **no = realloc(t->obj, ncap * sizeof(*no));
		uint32_t *ng;

		if (!no || ncap > (1u << OBJ_SLOT_BITS)) {
			if (no)
				t->obj = no;
			return -ENOMEM;
		}
		t->obj = no;
		ng = realloc(t->gen, ncap * sizeof(*ng));
		if (!ng)
			return -ENOMEM;
		t->gen = ng;
		memset(t->obj + t->cap, 0, (ncap - t->cap) * sizeof(*no));
		memset(t->gen + t->cap, 0, (ncap - t->cap) * sizeof(*ng));
		t->cap = ncap;
	}
	t->obj[i] = obj;
	t->gen[i] = (t->gen[i] + 1) & ((1u << (32 - OBJ_SLOT_BITS)) - 1);
	t->free_hint = i + 1;
	*id = i | t->gen[i] << OBJ_SLOT_BITS;
	return 0;
}

static void *objtab_get(struct sv_objtab *t, uint32_t id)
{
	uint32_t i = id & ((1u << OBJ_SLOT_BITS) - 1);

	if (i >= t->cap || t->gen[i] != id >> OBJ_SLOT_BITS)
		return NULL;
	return t->obj[i];
}

static void objtab_del(struct sv_objtab *t, uint32_t id)
{
	uint32_t i = id & ((1u << OBJ_SLOT_BITS) - 1);

	if (i < t->cap && t->gen[i] == id >> OBJ_SLOT_BITS) {
		t->obj[i] = NULL;
		if (i < t->free_hint)
			t->free_hint = i;
	}
}

int sv_engine_cq_add(struct sv_engine *eng, struct sv_cq *cq)
{
	int err;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	err = objtab_add(&eng->cqs, cq, &cq->obj_id);
	sv_unlock_mutex(&eng->lock);
	if (!err)
		cq->shm->h.obj_id = cq->obj_id;
	return err;
}

void sv_engine_cq_del(struct sv_cq *cq)
{
	sv_lock_mutex(&cq->eng->lock, SV_LOCK_ENGINE);
	objtab_del(&cq->eng->cqs, cq->obj_id);
	sv_unlock_mutex(&cq->eng->lock);
}

int sv_engine_srq_add(struct sv_engine *eng, struct sv_srq *srq)
{
	int err;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	err = objtab_add(&eng->srqs, srq, &srq->obj_id);
	sv_unlock_mutex(&eng->lock);
	if (!err)
		srq->shm->h.obj_id = srq->obj_id;
	return err;
}

void sv_engine_srq_del(struct sv_srq *srq)
{
	sv_lock_mutex(&srq->eng->lock, SV_LOCK_ENGINE);
	objtab_del(&srq->eng->srqs, srq->obj_id);
	sv_unlock_mutex(&srq->eng->lock);
}

struct sv_cq *sv_eng_cq(struct sv_engine *eng, uint32_t id, uint64_t cookie)
{
	struct sv_cq *cq;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	cq = objtab_get(&eng->cqs, id);
	if (cq && cq->shm->h.cookie != cookie)
		cq = NULL;
	sv_unlock_mutex(&eng->lock);
	return cq;
}

struct sv_srq *sv_eng_srq(struct sv_engine *eng, uint32_t id, uint64_t cookie)
{
	struct sv_srq *srq;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	srq = objtab_get(&eng->srqs, id);
	if (srq && srq->shm->h.cookie != cookie)
		srq = NULL;
	sv_unlock_mutex(&eng->lock);
	return srq;
}

void sv_shm_release(void *region)
{
	struct sv_shm_hdr *h = region;

	if (!h)
		return;
	/* Peers that mapped it see the object is gone before its memory
	 * goes from under our own feet. */
	atomic_store_explicit(&h->dead, 1, memory_order_release);
	sv_shm_unmap(h);
}

/* ----------------------------------------------------- QP hooks -- */

/* An RC/UC QP's path to another host, from its AV (na): a wire link, or
 * NULL (the AV's source GID is not ours, no socket). */
struct sv_link *sv_eng_wire_route(struct sv_qp *qp, const struct ibv_qp_attr *na)
{
	const struct ibv_global_route *g = &na->ah_attr.grh;
	struct sv_engine *eng = qp->eng;
	struct sv_roce_flow f;

	memset(&f, 0, sizeof(f));
	if (sv_gid_at(eng, g->sgid_index, f.sgid)) {
		sv_warn("qp %#x: source GID index %u is empty: packets cannot "
			"leave", qp->qpx.qp_base.qp_num, g->sgid_index);
		return NULL;
	}
	memcpy(f.dgid, g->dgid.raw, 16);
	f.ipv6 = !(sv_gid_is_v4(f.sgid) && sv_gid_is_v4(f.dgid));
	f.tclass = g->traffic_class;
	f.flow_label = g->flow_label & 0xfffff;
	f.hop_limit = g->hop_limit;
	f.sport = sv_wire_sport(f.flow_label, qp->qpx.qp_base.qp_num,
				na->dest_qp_num, 0);
	f.dport = SV_ROCE_PORT;
	sv_wire_attach(eng);
	return sv_wire_link_new(eng, &f);
}

void sv_engine_qp_route(struct sv_qp *qp, const struct ibv_qp_attr *na,
			struct sv_link **link, struct sv_peer **peer)
{
	struct sv_engine *eng = qp->eng;
	uint32_t dqpn = na->dest_qp_num;
	int local;

	*peer = NULL;
	if (sv_av_remote(eng, &na->ah_attr)) {
		*link = sv_eng_wire_route(qp, na);
		return;
	}
	/* May fail (peer not there yet): retried at the first send;
	 * packets to nowhere end in RETRY_EXC_ERR, as on a fabric. */
	*link = sv_eng_link_for_qpn(eng, dqpn);
	if (!*link || !sv_direct_enabled())
		return;
	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	local = !!sv_eng_qp(eng, dqpn);
	sv_unlock_rw(&eng->qp_lock);
	if (!local)
		*peer = sv_peer_get(eng, dqpn);
}

int sv_engine_qp_commit(struct sv_qp *qp, enum ibv_qp_state cur,
			const struct ibv_qp_attr *na, int attr_mask,
			struct sv_link *link, struct sv_peer *peer)
{
	struct sv_qp_shm *q = qp->shm;
	struct sv_tr *tr = tr_of(qp);
	enum ibv_qp_state next = na->qp_state;
	uint32_t mask = (uint32_t)attr_mask;

	sv_lock_shm(&q->lock, SV_LOCK_RESP);
	if (q->state != cur) {
		/* A responder error moved it to ERR since it was checked. */
		sv_unlock_shm(&q->lock);
		return -EINVAL;
	}
	qp->attr = *na;
	q->access = na->qp_access_flags;
	q->qkey = na->qkey;
	q->mtu = qp->type == IBV_QPT_UD ? sv_eng_port_mtu(qp->eng) :
					 sv_mtu_bytes(na->path_mtu);
	q->dest_qpn = na->dest_qp_num;
	q->min_rnr = na->min_rnr_timer;
	if (mask & IBV_QP_RQ_PSN)
		q->epsn = na->rq_psn & PSN_MASK;
	q->rq_psn = na->rq_psn & PSN_MASK;
	q->sq_psn = na->sq_psn & PSN_MASK;
	q->max_rd_atomic = na->max_rd_atomic;
	q->max_dest_rd_atomic = na->max_dest_rd_atomic;
	if (qp->type == IBV_QPT_XRC_RECV && (mask & IBV_QP_AV))
		sv_qp_av_store(q, &na->ah_attr);
	if (next == IBV_QPS_RESET || (next == IBV_QPS_INIT && cur == IBV_QPS_RESET)) {
		/* RESET empties both queues without completions. */
		qp->sq.head = qp->sq.tail = qp->sq.next = 0;
		if (!qp->srq) {
			atomic_store(&q->rq.head, 0);
			atomic_store(&q->rq.tail, 0);
		}
		q->rflags = 0;
		q->recv_off = 0;
		q->wr_left = 0;
		q->msn = 0;
		atomic_store(&q->events, 0);
		qp->attr.sq_draining = 0;
		sv_peer_put(tr->peer);
		tr->peer = NULL;
		{
			struct sv_link *wl = tr->wlink;

			sv_tr_reset(qp);
			tr->wlink = wl; /* UD keeps its own; RC/UC: below */
		}
		qp->link = NULL;
	}
	if (tr) {
		if ((mask & IBV_QP_PATH_MTU) || qp->type == IBV_QPT_UD)
			tr->mtu = q->mtu;
		if (mask & IBV_QP_SQ_PSN) {
			tr->psn = tr->psn_hi = na->sq_psn & PSN_MASK;
			tr->last_ack_psn = (tr->psn - 1) & PSN_MASK;
		}
		if (mask & IBV_QP_RETRY_CNT)
			tr->retry_left = na->retry_cnt;
		if (mask & IBV_QP_RNR_RETRY)
			tr->rnr_left = na->rnr_retry;
		if (link) {
			if (link->w) /* the wire: the QP's own link now */
				sv_tr_set_wlink(tr, link);
			qp->link = link;
			tr->link = link;
		}
		if ((mask & IBV_QP_STATE) && next == IBV_QPS_RTR &&
		    qp->type != IBV_QPT_UD) {
			sv_peer_put(tr->peer);
			tr->peer = peer;
			tr->path.reach = sv_path_reach(qp, link, peer, 0);
		} else if (peer) {
			sv_peer_put(peer);
		}
	}
	__atomic_store_n(&q->state, next, __ATOMIC_RELEASE);
	sv_unlock_shm(&q->lock);
	return 0;
}

/* A UD QP reaches other hosts through a wire link of its own (each
 * packet addressed by its AH) and hears from them on the gateway ring. */
static void ud_wire(struct sv_qp *qp)
{
	struct sv_engine *eng = qp->eng;
	struct sv_roce_flow f;
	struct sv_link *l;

	memset(&f, 0, sizeof(f));
	f.sport = sv_wire_sport(0, qp->qpx.qp_base.qp_num, 0, 1);
	f.dport = SV_ROCE_PORT;
	sv_wire_attach(eng);
	l = sv_wire_link_new(eng, &f);
	sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	if (!tr_of(qp)->wlink) {
		tr_of(qp)->wlink = l;
		l = NULL;
	}
	sv_unlock_spin(&qp->sq_lock);
	sv_wire_link_free(l);
}

void sv_engine_qp_modified(struct sv_qp *qp, enum ibv_qp_state old,
			   enum ibv_qp_state now)
{
	if (now == IBV_QPS_RESET && old != IBV_QPS_RESET) {
		/* Completions of the old life are gone with it (mlx5 and the
		 * other providers clean the CQs on RESET). */
		if (qp->scq) /* (an XRC TGT QP has no CQ of its own) */
			sv_cq_clean(qp->scq, qp->qpx.qp_base.qp_num);
		if (qp->rcq && qp->rcq != qp->scq)
			sv_cq_clean(qp->rcq, qp->qpx.qp_base.qp_num);
	}
	if (now == IBV_QPS_ERR)
		sv_engine_flush(qp);
	if (now == IBV_QPS_RTR && qp->type == IBV_QPT_UD && !tr_of(qp)->wlink)
		ud_wire(qp);
	sv_fault_qp_state(qp, now);
	if (now == IBV_QPS_RTS)
		sv_req_run(qp);
}

/* ------------------------------------------------------------ posts -- */

void sv_engine_posted(struct sv_qp *qp)
{
	struct sv_engine *eng = qp->eng;
	enum sv_post_action act;
	struct sv_kick k;

	if (sv_cap_on(eng) && !eng->cap_state) {
		/* A capture starts: its ring before our packets (the daemon
		 * is asked, not with a spinlock held). */
		sv_unlock_spin(&qp->sq_lock);
		sv_cap_prepare(eng);
		sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
	}
	act = sv_path_on_post(qp, &k);
	sv_unlock_spin(&qp->sq_lock);
	switch (act) {
	case SV_POST_NOTHING:
		return;
	case SV_POST_FLUSH:
		sv_engine_flush(qp);
		return;
	case SV_POST_HOLD:
		/* The first held stream: the progress thread runs it by
		 * k.due, unless the application is in a polling loop --
		 * its next poll runs it (sv_engine_note_poll), and a
		 * doorbell that woke the thread for it would cost a system
		 * call on every stream and a wake-up beside it.  If it
		 * stops polling, the thread's nap (nap_ns) bounds the wait;
		 * if it asks for an event, sv_engine_note_notify runs it.
		 * A thread asleep armed beside a polling application looks
		 * again only after nap_max_ns while nothing is held
		 * (eng_progress.c sleep_once): ring it, once, so it takes
		 * the shorter nap now -- unless the application's polls ran
		 * the held streams themselves within nap_max_ns: then they
		 * will run this one too, and a ring would only wake the
		 * thread for nothing, a system call and a wake-up on every
		 * stream (UCX's stream_bw on one host: 1.09 GB/s with them,
		 * 1.5-1.6 without).  The same holds for an application
		 * whose polls ran them but that did not poll in the last
		 * live_ns, as libfabric's rxm between a message's arrival
		 * and its answer (20-30 us): there the deadline rang the
		 * thread on every stream, and the thread, woken on the
		 * CPU of the application, took the stream from it -- so
		 * the polls never ran one again, and the ring went on
		 * (fi_pingpong 64 KiB between two namespaces: 110-155 us
		 * a message with it, 103-118 without).  An application that
		 * stops polling then has its stream run within
		 * nap_max_ns -- unless it asked for an event since that
		 * poll (ibv_req_notify_cq): it is about to wait on a
		 * channel (in poll() as often as in ibv_get_cq_event), and
		 * its stream has the deadline or the ring as before. */
		if (!atomic_exchange(&eng->deferred, 1) &&
		    (k.now - atomic_load_explicit(&eng->app_ran_held,
						  memory_order_relaxed) >
			     sv_tune.nap_max_ns ||
		     atomic_load_explicit(&eng->notify_seq,
					  memory_order_relaxed) !=
			     atomic_load_explicit(&eng->ran_held_notify,
						  memory_order_relaxed))) {
			if (!sv_eng_app_polling(eng, k.now))
				sv_eng_deadline(eng, k.due);
			else if (atomic_load(&eng->sleep_until) >
				 k.now + sv_tune.nap_ns)
				sv_eng_ring(eng);
		}
		return;
	case SV_POST_RUN:
		sv_req_kick(qp, &k);
		return;
	}
}

/*
 * The held streams run together, as a NIC's send scheduler serves the
 * send queues that have work: in turns of sched_pkts packets, QP after
 * QP, until each has sent what it holds (or its run's budget,
 * req_budget: the progress thread goes on), all published at once.  So
 * windows posted together complete together, whatever the order of the
 * posts: a program that keeps one window per QP on a shared CQ and
 * reposts as each completes (perftest -q, UCX, MPI) sees its QPs move in
 * lock step, none falling behind for good.  One QP held runs alone.
 */
#define SV_SCHED_MAX 64 /* QPs in one pass of the scheduler */

static void run_turns(struct sv_qp **q, int n)
{
	int left[SV_SCHED_MAX], quantum = (int)sv_tune.sched_pkts, live = n;
	struct sv_engine *eng = q[0]->eng;

	if (n == 1) {
		sv_req_run(q[0]);
		return;
	}
	for (int i = 0; i < n; i++)
		left[i] = (int)sv_tune.req_budget;
	sv_path_sched_begin();
	sv_link_batch_begin();
	while (live) {
		/* A round of turns leaves in one batch of datagrams: the
		 * windows' last packets reach the target together. */
		if (sv_wire_pending(eng) + live * quantum > SV_WIRE_SLOTS - 2)
			sv_wire_flush(eng);
		live = 0;
		for (int i = 0; i < n; i++) {
			int b, more;

			if (!q[i])
				continue;
			b = left[i] < quantum ? left[i] : quantum;
			left[i] -= b;
			more = sv_req_turn(q[i], b);
			if (more && left[i] > 0) {
				live++;
				continue;
			}
			if (more) /* its run's budget spent: the thread goes on */
				sv_eng_want_work(eng);
			q[i] = NULL;
		}
	}
	sv_link_batch_end();
	sv_path_sched_end();
	sv_wire_flush(eng);
}

uint64_t sv_eng_run_deferred(struct sv_engine *eng, uint64_t due)
{
	struct sv_qp *q[SV_SCHED_MAX];
	uint64_t next = 0;
	int n = 0, go = !due;

	if (!atomic_exchange(&eng->deferred, 0))
		return 0;
	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	/* With a deadline: once one held stream is due, all of them run
	 * (together, as the windows were posted); else the earliest. */
	for (uint32_t i = 0; i < eng->qcap && !go; i++) {
		struct sv_qp *qp = eng->qtab[i].qp;
		struct sv_tr *tr;
		uint64_t at;

		/* A look without sq_lock (sv_path.h): the run takes it. */
		if (!qp || !(tr = tr_of(qp)) ||
		    !__atomic_load_n(&tr->path.held, __ATOMIC_RELAXED))
			continue;
		at = __atomic_load_n(&tr->path.kick_end, __ATOMIC_RELAXED) +
		     sv_tune.defer_ns;
		if (at <= due)
			go = 1;
		else if (!next || at < next)
			next = at;
	}
	for (uint32_t i = 0; i < eng->qcap && go; i++) {
		struct sv_qp *qp = eng->qtab[i].qp;
		struct sv_tr *tr;

		if (!qp || !(tr = tr_of(qp)) ||
		    !__atomic_load_n(&tr->path.held, __ATOMIC_RELAXED))
			continue;
		q[n++] = qp;
		if (n == SV_SCHED_MAX) {
			run_turns(q, n);
			n = 0;
		}
	}
	if (n)
		run_turns(q, n);
	sv_unlock_rw(&eng->qp_lock);
	if (!go && next)
		atomic_store(&eng->deferred, 1);
	return go ? 0 : next;
}

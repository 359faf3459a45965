/* SPDX-License-Identifier: MIT */
/*
 * Progress (engine.c "Progress"): the progress thread, inbound packets and
 * owner events, timers, async events, and the engine socket.
 *
 * A progress thread per attached engine drains the inbound rings, runs
 * timers (retransmission, RNR), retries blocked senders and acts on what
 * other engines left for us (owner events: a completion event on one of
 * our CQs, an SRQ limit, a QP a peer's direct execution moved to ERR).
 * Producers ring a doorbell only when the consumer armed its ring (poll
 * first, block later); a wake-up, by doorbell or by timer, costs tens of
 * microseconds on a VM while a shared cache line answers in 0.1 us.
 * ibv_poll_cq drains inline too (sv_engine_progress); a per-ring trylock
 * makes one thread consume a ring at a time, so packets of a ring are
 * processed in order.  The thread's policy, by what the application does:
 *   - it polls no CQ (a one-sided target that sleeps, a passive side):
 *     after activity the thread spins SOFTVERBS_SPIN_US (default
 *     SV_ENG_SPIN_NS) with a pause, then arms every inbound ring and sleeps
 *     in epoll (doorbell, engine socket, stop eventfd) with a timeout only
 *     when a timer is pending: an idle process uses no CPU;
 *   - it polls a CQ and takes every packet itself: the thread keeps off
 *     the rings (one thread preempted with a ring or QP lock held stalls
 *     the other for a time slice when 2 CPUs run 4 threads), leaves them
 *     unarmed (no doorbell: the poller sees packets at once) and looks
 *     again every SV_ENG_NAP_NS for timers, or at a deadline;
 *   - it polls a CQ but leaves packets to the thread (it waits on its
 *     memory between polls: ib_write_lat's target over packets): the
 *     thread sleeps armed, so the next packet wakes it at once.
 * The thread never spins next to a polling application: on a small
 * machine it would take that application's CPU.
 */
#include "engine_int.h"
#include "sv_roce.h"
#include "sv_wire.h"
#include "sv_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sv_sock.h"

/* ---------------------------------------------------- async events -- */

static void async_send(const struct sv_async_ev *ev)
{
	struct sv_async_req req = { .ctx = ev->ctx_id,
				    .event_type = ev->type,
				    .element = ev->element };

	if (sv_call_simple(SV_OP_ASYNC_EVENT, ev->ufile, ev->instance, -1, &req,
			   sizeof(req), NULL, 0))
		sv_dbg("async event %u dropped", ev->type);
}

void sv_eng_async(struct sv_engine *eng, const struct sv_ctx_ref *cref,
		  enum ibv_event_type type, void *element)
{
	struct sv_async_ev *ev = calloc(1, sizeof(*ev));
	uint64_t one = 1;

	if (!ev)
		return;
	ev->ufile = cref->ufile;
	ev->ctx_id = cref->ctx_id;
	ev->instance = cref->instance;
	ev->type = type;
	ev->element = (uint64_t)(uintptr_t)element;
	/* async_lock is a leaf: the responder raises events with QP locks
	 * held. */
	pthread_mutex_lock(&eng->async_lock);
	if (!eng->thread_running) {
		pthread_mutex_unlock(&eng->async_lock);
		async_send(ev); /* no thread: our caller holds no lock */
		free(ev);
		return;
	}
	*eng->async_tail = ev;
	eng->async_tail = &ev->next;
	pthread_mutex_unlock(&eng->async_lock);
	if (write(eng->doorbell, &one, sizeof(one)) < 0)
		sv_dbg("doorbell: %s", strerror(errno));
}

void sv_engine_async_event(const struct sv_ctx_ref *cref,
			   enum ibv_event_type type, void *element)
{
	struct sv_engine *eng = sv_engine_get(cref);

	if (eng)
		sv_eng_async(eng, cref, type, element);
}

void sv_eng_async_drain(struct sv_engine *eng)
{
	struct sv_async_ev *ev;

	for (;;) {
		pthread_mutex_lock(&eng->async_lock);
		ev = eng->async_head;
		if (ev) {
			eng->async_head = ev->next;
			if (!eng->async_head)
				eng->async_tail = &eng->async_head;
		}
		pthread_mutex_unlock(&eng->async_lock);
		if (!ev)
			return;
		async_send(ev);
		free(ev);
	}
}

void sv_eng_deadline(struct sv_engine *eng, uint64_t when)
{
	uint64_t one = 1;

	/* The deadline's store (under the QP's sq_lock) before the look
	 * at sleep_until, against the progress thread's store of
	 * sleep_until before its lockless look at the timers
	 * (sv_comp_timers): one of the two sees the other. */
	atomic_thread_fence(memory_order_seq_cst);
	if (when < atomic_load(&eng->sleep_until) && eng->doorbell >= 0)
		if (write(eng->doorbell, &one, sizeof(one)) < 0)
			sv_dbg("doorbell: %s", strerror(errno));
}

void sv_eng_want_work(struct sv_engine *eng)
{
	uint64_t one = 1;

	if (!atomic_exchange(&eng->work, 1) && eng->doorbell >= 0)
		if (write(eng->doorbell, &one, sizeof(one)) < 0)
			sv_dbg("doorbell: %s", strerror(errno));
}

/* ---------------------------------------------------- owner events -- */

void sv_qp_owner_events(struct sv_qp *qp)
{
	unsigned bits = atomic_exchange(&qp->shm->events, 0);
	static const struct {
		unsigned bit;
		enum ibv_event_type type;
	} map[] = {
		{ SV_QEV_COMM_EST, IBV_EVENT_COMM_EST },
		{ SV_QEV_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR },
		{ SV_QEV_REQ_ERR, IBV_EVENT_QP_REQ_ERR },
		{ SV_QEV_FATAL, IBV_EVENT_QP_FATAL },
		{ SV_QEV_LAST_WQE, IBV_EVENT_QP_LAST_WQE_REACHED },
	};

	if (!bits)
		return;
	if (bits & SV_QEV_FLUSH)
		sv_engine_flush(qp);
	for (unsigned i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (bits & map[i].bit)
			sv_eng_async(qp->eng, &qp->cref, map[i].type,
				     &qp->qpx.qp_base);
}

/* An event record from another engine.  Must hold qp_lock (read). */
static void owner_event(struct sv_engine *eng, const struct sv_ev_rec *r)
{
	struct sv_qp *qp;
	struct sv_cq *cq;
	struct sv_srq *srq;

	switch (r->kind) {
	case SV_EVK_CQ:
		cq = sv_eng_cq(eng, r->id, r->cookie);
		if (!cq)
			return;
		if (r->bits & SV_CQP_EVENT)
			sv_cq_comp_event(cq);
		if (r->bits & SV_CQP_OVERFLOW)
			sv_eng_async(eng, &cq->cref, IBV_EVENT_CQ_ERR,
				     ibv_cq_ex_to_cq(&cq->ex));
		return;
	case SV_EVK_SRQ:
		srq = sv_eng_srq(eng, r->id, r->cookie);
		if (srq)
			sv_eng_async(eng, &srq->cref,
				     IBV_EVENT_SRQ_LIMIT_REACHED, &srq->srq);
		return;
	case SV_EVK_QP:
		qp = sv_eng_qp(eng, r->id);
		if (qp && qp->shm->h.cookie == r->cookie)
			sv_qp_owner_events(qp);
		return;
	}
}

/* ------------------------------------------------------- inbound -- */

/* Up to 64 QPs touched by one drain: their ACKs go out once, after it. */
struct touched {
	struct sv_qp *qp[64];
	int n;
	int contended; /* a ring with packets was locked by another thread */
	int left;      /* a ring still holds packets (the batch limit) */
	int silent;    /* requests that end in no completion of ours (RDMA
			* WRITE without immediate, READ, atomic) */
	struct sv_resp_hold hold; /* the run of requests being taken */
};

static void touch(struct touched *t, struct sv_qp *qp)
{
	for (int i = 0; i < t->n; i++)
		if (t->qp[i] == qp)
			return;
	if (t->n == 64) {
		sv_resp_flush(qp);
		return;
	}
	t->qp[t->n++] = qp;
}

static void dispatch(struct sv_engine *eng, const uint8_t *buf, uint32_t len,
		     uint32_t type, struct touched *t)
{
	struct sv_pkt pkt;
	struct sv_qp *qp;

	if ((type & 0xffff) == SV_REC_EVENT) {
		sv_resp_release(&t->hold);
		if (len == sizeof(struct sv_ev_rec)) {
			struct sv_ev_rec r;

			memcpy(&r, buf, sizeof(r));
			owner_event(eng, &r);
		}
		return;
	}
	if ((type & 0xffff) != SV_REC_PKT ||
	    sv_pkt_parse(&pkt, buf, len, !!(type & SV_REC_F_GRH)))
		return; /* not a packet: dropped (C9-xx: silently) */
	qp = sv_eng_qp(eng, pkt.qpn);
	if (!qp || ((type & SV_REC_F_WIRE) && !sv_wire_admit(eng, qp, &pkt)))
		return;
	if ((type & SV_REC_F_WIRE) && sv_cap_on(eng) && pkt.grh) {
		/* Arrived from the wire: the capture sees it come in. */
		struct sv_roce_flow f;

		sv_cap_flow_grh(pkt.grh, 0, &f);
		sv_cap(eng, 1, pkt.qpn, &f, pkt.bth, len - SV_GRH_BYTES);
	}
	if (pkt.flags & OP_REQ) {
		if (!(pkt.flags & (OP_SEND | OP_IMM)))
			t->silent++;
		sv_engine_note_got(eng); /* the peer answers: a ping-pong */
		sv_resp_packet(qp, &pkt, &t->hold);
		touch(t, qp);
	} else {
		/* The completer takes sq_lock, which comes before any
		 * QP's responder lock. */
		sv_resp_release(&t->hold);
		if (sv_comp_packet(qp, &pkt))
			sv_engine_flush(qp);
	}
}

/* Drains one ring if no other thread does.  Must hold qp_lock (read).
 * Returns the records processed. */
static int drain_ring(struct sv_engine *eng, struct sv_inring *in,
		      struct touched *t)
{
	int n = 0;

	if (in->broken)
		return 0;
	if (pthread_mutex_trylock(&in->lock)) {
		/* Another thread drains it; if that thread is preempted
		 * (by us, on a small machine) the packets wait for it. */
		if (atomic_load_explicit(&in->rx.h->tail, memory_order_relaxed) !=
		    in->rx.head)
			t->contended = 1;
		return 0;
	}
	sv_ring_prefetch(&in->rx);
	while (n < SV_ENG_BATCH) {
		const void *p;
		uint32_t type, len;
		int r = sv_ring_peek(&in->rx, &type, &p, &len);

		if (r == 0)
			break;
		if (r < 0) {
			sv_warn("engine %u: ring from engine %u is corrupt: "
				"ignoring it", eng->id, in->peer_id);
			in->broken = 1;
			break;
		}
		dispatch(eng, p, len, type, t);
		sv_ring_pop(&in->rx, len);
		if (++n % 16 == 0)
			sv_ring_prefetch(&in->rx);
	}
	sv_resp_release(&t->hold);
	if (n == SV_ENG_BATCH &&
	    atomic_load_explicit(&in->rx.h->tail, memory_order_relaxed) != in->rx.head)
		t->left = 1;
	pthread_mutex_unlock(&in->lock);
	return n;
}

static void up_qp1(struct sv_engine *eng, const struct sv_wire_pkt *p)
{
	uint8_t msg[4 + SV_ENGINE_UP_MAX];
	uint32_t type = SV_ENGINE_UP_QP1;

	if (p->rec_len > SV_ENGINE_UP_MAX)
		return;
	memcpy(msg, &type, 4);
	memcpy(msg + 4, p->rec, p->rec_len);
	if (send(eng->sock, msg, 4 + p->rec_len, MSG_DONTWAIT) < 0)
		sv_dbg("engine %u: a CM packet could not go up: %s", eng->id,
		       strerror(errno));
}

/*
 * The wire port (sv_wire.h): when nobody else reads it, reads a batch;
 * packets for our QPs are dispatched here, the others are marked in
 * fwd[] for wire_forward (after qp_lock is dropped: finding a link may
 * take eng->lock and call the daemon).  Must hold qp_lock (read) and the
 * port (wire_rx_begin).  Returns how many datagrams it read.
 */
static int wire_read(struct sv_engine *eng, struct touched *t, uint8_t *fwd)
{
	struct sv_wire_rxb *b = eng->rxb;
	struct sv_wire_shm *m = eng->wshm;
	uint64_t pkts = 0, bytes = 0, bad = 0, junk = 0, noqp = 0;
	int n = sv_wire_recv(eng->wire_sock, b, SV_WIRE_BATCH);

	for (int i = 0; i < n; i++) {
		struct sv_wire_pkt p;
		int err;

		fwd[i] = 0;
		if (sv_wire_qpn_missing(m, b->buf[i] + SV_WIRE_HEADROOM,
					b->mm[i].msg_len)) {
			noqp++;
			continue;
		}
		err = sv_wire_rx_parse(&b->mm[i].msg_hdr, b->mm[i].msg_len,
				       b->buf[i], eng->wire_port, &p);
		if (err) {
			if (err == -EBADMSG)
				bad++;
			else
				junk++;
			continue;
		}
		if (p.qpn == 1) {
			/* QP1 is the daemon's (the CM): up the engine
			 * socket (no lock of ours is waited on there). */
			sv_resp_release(&t->hold);
			up_qp1(eng, &p);
			pkts++;
			bytes += p.ib_len;
			continue;
		}
		if (!sv_eng_qp(eng, p.qpn)) {
			/* Another process's QP (live in the map, looked at
			 * above): its engine is found after the port is
			 * given up (a daemon call on a cache miss). */
			fwd[i] = 1;
			continue;
		}
		dispatch(eng, p.rec, p.rec_len, SV_WIRE_REC, t);
		pkts++;
		bytes += p.ib_len;
	}
	sv_resp_release(&t->hold);
	if (pkts)
		atomic_fetch_add_explicit(&m->rx_pkts, pkts, memory_order_relaxed);
	if (bytes)
		atomic_fetch_add_explicit(&m->rx_bytes, bytes, memory_order_relaxed);
	if (bad)
		atomic_fetch_add_explicit(&m->rx_bad_icrc, bad, memory_order_relaxed);
	if (junk)
		atomic_fetch_add_explicit(&m->rx_malformed, junk,
					  memory_order_relaxed);
	if (noqp)
		atomic_fetch_add_explicit(&m->rx_no_qp, noqp,
					  memory_order_relaxed);
	return n < 0 ? 0 : n;
}

/* Hands what wire_read marked to the engines serving those QPs, in the
 * order read, before the port is given up (sv_wire.h "Order").  No lock
 * but the port held. */
static void wire_forward(struct sv_engine *eng, int n, const uint8_t *fwd)
{
	struct sv_wire_rxb *b = eng->rxb;
	struct sv_wire_shm *m = eng->wshm;

	for (int i = 0; i < n; i++) {
		struct sv_wire_pkt p;
		struct sv_link *l;
		uint8_t *r;
		int dead;

		if (!fwd[i])
			continue;
		/* Parsed in place already: the record is at the buffer. */
		p.rec = b->buf[i];
		p.rec_len = b->mm[i].msg_len + SV_WIRE_HEADROOM - SV_ICRC_BYTES -
			    ((b->buf[i][SV_WIRE_HEADROOM + 1] >> 4) & 3);
		p.qpn = ld_be24(b->buf[i] + SV_WIRE_HEADROOM + 5);
		l = sv_eng_link_for_qpn(eng, p.qpn);
		r = l ? sv_link_reserve_type(l, p.rec_len, SV_WIRE_REC, &dead) :
			NULL;
		if (!r) {
			atomic_fetch_add_explicit(l ? &m->rx_ring_full : &m->rx_no_qp,
						  1, memory_order_relaxed);
			continue;
		}
		memcpy(r, p.rec, p.rec_len);
		sv_link_commit(l);
		atomic_fetch_add_explicit(&m->rx_pkts, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&m->rx_bytes,
					  b->mm[i].msg_len, memory_order_relaxed);
	}
}

/* Takes the port for reading (this thread of ours, then the namespace's
 * turn).  Nonzero when taken. */
static int wire_rx_begin(struct sv_engine *eng)
{
	uint64_t now;

	if (eng->wire_sock < 0)
		return 0;
	/* An empty read costs a system call: after one, the port rests a
	 * moment (an application polling its CQ in a loop would spend its
	 * time there). */
	now = sv_now_ns();
	if (now < atomic_load_explicit(&eng->wire_idle_until, memory_order_relaxed) ||
	    pthread_mutex_trylock(&eng->wire_rx_lock))
		return 0;
	if (!sv_wire_rx_trylock(eng->wshm, (uint32_t)eng->pid, now)) {
		pthread_mutex_unlock(&eng->wire_rx_lock);
		return 0;
	}
	atomic_store_explicit(&eng->wshm->poll_ns, now, memory_order_relaxed);
	return 1;
}

static void wire_rx_end(struct sv_engine *eng)
{
	sv_wire_rx_unlock(eng->wshm, (uint32_t)eng->pid);
	pthread_mutex_unlock(&eng->wire_rx_lock);
}

int sv_eng_drain_all(struct sv_engine *eng, int *contended, int *silent)
{
	unsigned nin = atomic_load_explicit(&eng->nin, memory_order_acquire);
	struct touched t = { .n = 0 };
	uint8_t fwd[SV_WIRE_BATCH];
	int n = 0, wire = wire_rx_begin(eng), nw = 0;

	n += sv_rmem_serve(eng);
	pthread_rwlock_rdlock(&eng->qp_lock);
	/* The rings first: what another reader of the port forwarded to us
	 * is older than what the port holds now. */
	for (unsigned i = 0; i < nin; i++)
		n += drain_ring(eng, eng->in[i], &t);
	/* A ring still holds packets (another thread of ours dispatches
	 * from it, or the batch limit left some): they are older than what
	 * the port holds, so the port waits. */
	if (wire && !t.contended && !t.left)
		nw = wire_read(eng, &t, fwd);
	else
		nw = -1;
	for (int i = 0; i < t.n; i++) {
		sv_resp_flush(t.qp[i]);
		if (atomic_load_explicit(&t.qp[i]->shm->events,
					 memory_order_relaxed))
			sv_qp_owner_events(t.qp[i]);
	}
	pthread_rwlock_unlock(&eng->qp_lock);
	if (wire) {
		wire_forward(eng, nw, fwd);
		/* Empty: rest.  A few packets of a stream: let more
		 * gather (a NIC's interrupt moderation), so a read takes a
		 * batch, not two packets.  One packet (a ping-pong) or a
		 * full batch: read again at once. */
		if (!nw || (nw >= 2 && nw < SV_WIRE_BATCH / 2))
			atomic_store_explicit(&eng->wire_idle_until,
					      sv_now_ns() + (nw ? SV_WIRE_GATHER_NS :
								  SV_WIRE_REST_NS),
					      memory_order_relaxed);
		wire_rx_end(eng);
		if (nw > 0)
			n += nw;
	}
	sv_wire_flush(eng);
	if (contended)
		*contended = t.contended;
	if (silent)
		*silent = t.silent;
	return n;
}

/* Timers, blocked senders, pending responses and owner events of every
 * QP.  Returns the earliest deadline (ns) or 0. */
uint64_t sv_eng_scan_qps(struct sv_engine *eng, uint64_t now, int *busy)
{
	uint64_t next = 0;
	struct sv_qp *flush[32];
	int nflush = 0;

	pthread_rwlock_rdlock(&eng->qp_lock);
	for (uint32_t i = 0; i < eng->qcap; i++) {
		struct sv_qp *qp = eng->qtab[i].qp;
		struct sv_tr *tr;

		if (!qp)
			continue;
		tr = tr_of(qp);
		if (atomic_load_explicit(&qp->shm->events, memory_order_relaxed))
			sv_qp_owner_events(qp);
		if (sv_comp_timers(qp, now, &next) && nflush < 32)
			flush[nflush++] = qp;
		if (tr->blocked)
			sv_req_run(qp);
		if (tr->ack_pending || tr->rq_head != tr->rq_tail)
			sv_resp_flush(qp);
		if (tr->blocked || tr->ack_pending || tr->rq_head != tr->rq_tail)
			*busy = 1;
	}
	for (int i = 0; i < nflush; i++)
		sv_engine_flush(flush[i]);
	pthread_rwlock_unlock(&eng->qp_lock);
	return next;
}

/* -------------------------------------------------- engine socket -- */

/* The daemon is gone: the device with it.  Every QP of ours goes to the
 * error state and flushes, loopback ones too, as a NIC that died does
 * (IBV_EVENT_DEVICE_FATAL reaches the application on its async fd). */
static void device_gone(struct sv_engine *eng)
{
	atomic_store(&eng->device_gone, 1);
	pthread_rwlock_rdlock(&eng->qp_lock);
	for (uint32_t i = 0; i < eng->qcap; i++) {
		struct sv_qp *qp = eng->qtab[i].qp;

		if (!qp)
			continue;
		sv_shlock_lock(&qp->shm->lock);
		if (qp->shm->state != IBV_QPS_RESET)
			sv_qshm_set_err(qp->shm);
		sv_shlock_unlock(&qp->shm->lock);
		atomic_fetch_or(&qp->shm->events, SV_QEV_FLUSH);
	}
	pthread_rwlock_unlock(&eng->qp_lock);
	atomic_store(&eng->work, 1);
}

static void peer_gone(struct sv_engine *eng, uint32_t peer)
{
	pthread_mutex_lock(&eng->lock);
	for (struct sv_link *l = eng->links; l; l = l->next)
		if (l->peer_id == peer)
			atomic_store(&l->dead, 1);
	for (int i = 0; i < 256; i++)
		if (eng->dcache[i].engine_id == peer)
			eng->dcache[i].engine_id = 0;
	pthread_mutex_unlock(&eng->lock);
	pthread_mutex_lock(&eng->rmem_lock);
	for (struct sv_link *l = eng->rlinks; l; l = l->next)
		if (l->peer_id == peer)
			atomic_store(&l->dead, 1);
	pthread_mutex_unlock(&eng->rmem_lock);
	sv_peer_prune(eng, peer);
	atomic_store(&eng->work, 1);
}

static void sock_readable(struct sv_engine *eng)
{
	for (;;) {
		struct sv_engine_msg m;
		int fds[SV_MAX_FDS], nfds = 0, seals;
		ssize_t n = sv_recv_msg(eng->sock, &m, sizeof(m), fds,
					SV_MAX_FDS, &nfds);
		struct stat st;
		uint64_t ring_len;
		void *map;

		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			sv_close_fds(fds, nfds);
			/* The daemon is gone: every link is. */
			sv_warn("engine %u: the device went away", eng->id);
			epoll_ctl(eng->epfd, EPOLL_CTL_DEL, eng->sock, NULL);
			pthread_mutex_lock(&eng->lock);
			for (struct sv_link *l = eng->links; l; l = l->next)
				if (l->peer_id != eng->id)
					atomic_store(&l->dead, 1);
			pthread_mutex_unlock(&eng->lock);
			pthread_mutex_lock(&eng->rmem_lock);
			for (struct sv_link *l = eng->rlinks; l; l = l->next)
				atomic_store(&l->dead, 1);
			pthread_mutex_unlock(&eng->rmem_lock);
			device_gone(eng);
			return;
		}
		if (n != sizeof(m)) {
			sv_close_fds(fds, nfds);
			continue;
		}
		if (m.type == SV_ENGINE_PEER_GONE) {
			sv_close_fds(fds, nfds);
			peer_gone(eng, m.peer);
			continue;
		}
		if (m.type == SV_ENGINE_UFILE_GONE) {
			sv_close_fds(fds, nfds);
			sv_holds_ufile_gone(eng, m.peer);
			continue;
		}
		/* A ring a peer made: sealed, so it cannot shrink under our
		 * mapping, and exactly the size announced. */
		seals = nfds >= 1 ? fcntl(fds[0], F_GET_SEALS) : -1;
		if (m.type != SV_ENGINE_LINK_NEW || nfds != 2 || seals < 0 ||
		    (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
			    (F_SEAL_SHRINK | F_SEAL_GROW) ||
		    fstat(fds[0], &st) < 0 || (uint64_t)st.st_size != m.ring_size ||
		    m.ring_size < SV_RING_DATA_OFF + 4096) {
			sv_close_fds(fds, nfds);
			continue;
		}
		map = mmap(NULL, m.ring_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_POPULATE, fds[0], 0);
		sv_close_fds(fds, nfds); /* the peer's doorbell: not needed */
		if (map == MAP_FAILED)
			continue;
		sv_map_touch(map, m.ring_size, 0);
		/* The ring's own size, then (newer peers) a request box. */
		ring_len = ((const struct sv_ring_hdr *)map)->size;
		pthread_mutex_lock(&eng->lock);
		if ((ring_len != m.ring_size &&
		     ring_len + SV_RMEM_BOX_BYTES != m.ring_size) ||
		    sv_add_inring(eng, map, m.ring_size, ring_len,
				  ring_len != m.ring_size, m.peer, 1)) {
			sv_warn("engine %u: refusing a link from engine %u",
				eng->id, m.peer);
			munmap(map, m.ring_size);
		}
		pthread_mutex_unlock(&eng->lock);
	}
}

/* -------------------------------------------------- progress thread -- */

static void arm_all(struct sv_engine *eng, int arm, int *ready)
{
	unsigned nin = atomic_load_explicit(&eng->nin, memory_order_acquire);

	for (unsigned i = 0; i < nin; i++) {
		struct sv_inring *in = eng->in[i];

		if (in->broken)
			continue;
		if (!arm)
			sv_ring_disarm(&in->rx);
		else if (sv_ring_arm(&in->rx))
			*ready = 1;
	}
}

/* Tells the producers of every inbound ring whether this thread polls
 * them (sv_ring_peer_spins). */
static void spin_all(struct sv_engine *eng, int on)
{
	unsigned nin = atomic_load_explicit(&eng->nin, memory_order_acquire);

	for (unsigned i = 0; i < nin; i++)
		if (!eng->in[i]->broken)
			sv_ring_set_spin(&eng->in[i]->rx, on);
}

/* Spin budget after work when the thread is the only consumer
 * (SOFTVERBS_SPIN_US, read when the first progress thread starts). */
static uint64_t spin_ns = SV_ENG_SPIN_NS;
static pthread_once_t spin_once = PTHREAD_ONCE_INIT;

static void spin_init(void)
{
	const char *e = getenv("SOFTVERBS_SPIN_US");
	char *end;
	unsigned long v;

	if (!e || !*e)
		return;
	v = strtoul(e, &end, 10);
	if (*end || v > 1000000)
		sv_warn("SOFTVERBS_SPIN_US=%s: not a number of microseconds "
			"(0..1000000), ignored", e);
	else
		spin_ns = (uint64_t)v * 1000;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Counts an event of the application's thread: a plain store, not a
 * locked add (a poll is the hottest path there is); a bump lost to a
 * race between two polling threads only delays a hint. */
static void bump(_Atomic uint32_t *c)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

void sv_engine_note_got(struct sv_engine *eng)
{
	if (eng)
		bump(&eng->got_seq);
}

void sv_engine_note_notify(struct sv_engine *eng)
{
	if (eng)
		bump(&eng->notify_seq);
}

void sv_engine_note_poll(struct sv_engine *eng)
{
	if (!eng)
		return;
	bump(&eng->poll_seq);
	if (atomic_load_explicit(&eng->idle_armed, memory_order_relaxed) &&
	    atomic_exchange(&eng->idle_armed, 0)) {
		/* The thread went to sleep armed when nobody polled; now the
		 * application does (whether or not it finds completions): the
		 * thread should nap unarmed, or every peer keeps paying a
		 * doorbell or a system call to reach us. */
		uint64_t one = 1;

		if (eng->doorbell >= 0 &&
		    write(eng->doorbell, &one, sizeof(one)) < 0)
			sv_dbg("doorbell: %s", strerror(errno));
	}
}

/* The application polled a CQ lately (*seen: when the thread last saw
 * the poll counter move): it is the main consumer, the thread only backs
 * it up.  Engines that deliver to us see our rings unarmed then, and
 * send what ends in a receive as packets we drain at our next poll. */
/* The application's counter c (bump) moved since *seq: *seen = now. */
static void note_moved(_Atomic uint32_t *c, uint64_t now, uint32_t *seq,
		       uint64_t *seen)
{
	uint32_t s = atomic_load_explicit(c, memory_order_relaxed);

	if (s != *seq) {
		*seq = s;
		*seen = now;
	}
}

static int app_polls(struct sv_engine *eng, uint64_t now, uint32_t *seq,
		     uint64_t *seen)
{
	note_moved(&eng->poll_seq, now, seq, seen);
	return now - *seen < SV_ENG_INLINE_NS ||
	       now - atomic_load_explicit(&eng->last_inline,
					  memory_order_relaxed) <
		       SV_ENG_INLINE_NS;
}

void *sv_progress_main(void *arg)
{
	struct sv_engine *eng = arg;
	uint64_t now = sv_now_ns(), last_work = now;
	uint64_t last_found = now - SV_ENG_TARGET_NS, next_deadline = 0;
	uint64_t last_scan = now, poll_seen = now - SV_ENG_INLINE_NS;
	uint32_t poll_seq = atomic_load(&eng->poll_seq);
	uint32_t notify_seq = atomic_load(&eng->notify_seq);
	uint64_t notify_seen = now - SV_ENG_INLINE_NS;
	int spinning = 0;

	pthread_once(&spin_once, spin_init);
	atomic_store(&eng->thread_tid, (unsigned)syscall(SYS_gettid));
	while (!atomic_load(&eng->stop)) {
		struct epoll_event evs[4];
		struct timespec ts;
		uint64_t tmo;
		int n, busy = 0, ready = 0, app, armed, live, wsock, silent = 0;

		now = sv_now_ns();
		sv_cap_prepare(eng);
		/* The application drains right now: keep off its rings (a
		 * thread preempted with a ring lock held stalls it for a
		 * time slice). */
		live = now - atomic_load_explicit(&eng->last_inline,
						  memory_order_relaxed) <
		       SV_ENG_LIVE_NS;
		n = live ? 0 : sv_eng_drain_all(eng, NULL, &silent);
		if (n || atomic_exchange(&eng->work, 0) ||
		    (next_deadline && now >= next_deadline) ||
		    now - last_scan >= SV_ENG_NAP_NS) {
			uint64_t d;

			next_deadline = sv_eng_scan_qps(eng, now, &busy);
			last_scan = now;
			d = sv_eng_run_deferred(eng, now);
			if (d && (!next_deadline || d < next_deadline))
				next_deadline = d;
		}
		if (busy)
			atomic_store(&eng->work, 1);
		if (eng->async_head)
			sv_eng_async_drain(eng);
		app = app_polls(eng, now, &poll_seq, &poll_seen);
		note_moved(&eng->notify_seq, now, &notify_seq, &notify_seen);
		if (n) {
			last_work = now;
			/* Packets the application left, though it polls: it
			 * waits elsewhere between polls -- on a completion
			 * channel (it asks for events), or on its memory (the
			 * packets were requests that end in no completion of
			 * its own).  Other packets it left were there while
			 * it was preempted: its next poll takes them. */
			if (app && (silent || now - notify_seen < SV_ENG_INLINE_NS))
				last_found = now;
		}
		if (n >= SV_ENG_BATCH)
			continue; /* more where those came from */
		if (!app && now - last_work < spin_ns) {
			/* Spin only when nobody else drains: a spinning
			 * thread next to a polling application halves its
			 * CPU on a small machine.  Peers that see us spin
			 * send even a small one-sided request as a packet
			 * (sv_direct.c): cheaper than their system call. */
			if (!spinning)
				spin_all(eng, spinning = 1);
			cpu_relax();
			continue;
		}
		if (spinning)
			spin_all(eng, spinning = 0);

		/*
		 * Sleep.  Armed (peers ring our doorbell) unless the
		 * application takes every packet itself: then a doorbell
		 * would cost more than the whole message, and we only look
		 * again now and then, for timers and in case it stops.  An
		 * application that polls a CQ but leaves us packets (it
		 * waits on its memory: a one-sided target) gets the
		 * doorbell: sooner than any nap on a machine where a timer
		 * wake-up takes tens of microseconds.
		 */
		armed = !app || now - last_found < SV_ENG_TARGET_NS;
		tmo = app ? SV_ENG_NAP_NS : UINT64_MAX;
		if (armed) {
			arm_all(eng, 1, &ready);
			if (ready) {
				arm_all(eng, 0, &ready);
				if (!n) {
					/* Another thread (the application)
					 * holds the ring: let it run, we may
					 * have preempted it. */
					ts = (struct timespec){ 0, 1000 };
					nanosleep(&ts, NULL);
				}
				continue;
			}
		}
		if (atomic_load(&eng->work) && tmo > 1000000)
			tmo = 1000000; /* blocked senders: poll gently */
		if (next_deadline && tmo > (next_deadline > now ? next_deadline - now : 0))
			tmo = next_deadline > now ? next_deadline - now : 0;
		/* Deadlines set from now on by other threads ring us when
		 * they are earlier than our wake-up (sv_eng_deadline); the
		 * scan after publishing closes the race with a setter that
		 * looked before. */
		atomic_store(&eng->sleep_until,
			     tmo == UINT64_MAX ? UINT64_MAX : now + tmo);
		{
			uint64_t d = sv_eng_scan_qps(eng, now, &busy);

			if (d && (!next_deadline || d < next_deadline))
				next_deadline = d;
			if (d && (d <= now || d - now < tmo)) {
				tmo = d > now ? d - now : 0;
				atomic_store(&eng->sleep_until, d);
			}
		}
		ts = (struct timespec){ (time_t)(tmo / 1000000000u),
					(long)(tmo % 1000000000u) };
		/* Asleep armed: the wire's port wakes us too (one waiter of
		 * the namespace per datagram). */
		wsock = armed ? eng->wire_sock : -1;
		if (!app)
			atomic_store(&eng->idle_armed, 1);
		if (wsock >= 0) {
			struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE,
						  .data.fd = wsock };

			if (epoll_ctl(eng->epfd, EPOLL_CTL_ADD, wsock, &ev) < 0)
				wsock = -1;
		}
		n = epoll_pwait2(eng->epfd, evs, 4,
				 tmo == UINT64_MAX ? NULL : &ts, NULL);
		if (wsock >= 0) {
			epoll_ctl(eng->epfd, EPOLL_CTL_DEL, wsock, NULL);
			atomic_store(&eng->wire_idle_until, 0);
		}
		atomic_store(&eng->sleep_until, 0);
		atomic_store(&eng->idle_armed, 0);
		if (armed)
			arm_all(eng, 0, &ready);
		last_work = sv_now_ns();
		if (n <= 0)
			last_work -= spin_ns; /* a timeout: no spin */
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			uint64_t v;

			if (fd == eng->doorbell || fd == eng->stopfd) {
				if (read(fd, &v, sizeof(v)) < 0)
					continue;
			} else if (fd == eng->sock) {
				sock_readable(eng);
			}
		}
	}
	if (spinning)
		spin_all(eng, 0);
	sv_eng_async_drain(eng);
	return NULL;
}

void sv_engine_take_arrived(struct sv_engine *eng)
{
	int contended;

	if (!eng || !eng->attached || pthread_rwlock_tryrdlock(&eng->attach_lock))
		return;
	/* Until the rings are empty (a few batches at most: a ring holds
	 * what the peer sent before it saw our last answers).  A ring
	 * another thread of ours drains is done when it lets go: wait for
	 * it (taking qp_lock for writing waits for every drain in progress,
	 * its ACKs included).  Yielding a few times was not enough on a
	 * loaded machine: the progress thread, preempted in the middle of
	 * a batch, took its last packets after the daemon had destroyed the
	 * QP, and the peer's SENDs ended in RETRY_EXC_ERR. */
	for (int i = 0; i < 16; i++) {
		contended = 0;
		if (!eng->attached ||
		    (sv_eng_drain_all(eng, &contended, NULL) <= 0 && !contended))
			break;
		if (contended) {
			pthread_rwlock_wrlock(&eng->qp_lock);
			pthread_rwlock_unlock(&eng->qp_lock);
		}
	}
	/* A drain that emptied the rings before ours may still be sending
	 * its ACKs. */
	pthread_rwlock_wrlock(&eng->qp_lock);
	pthread_rwlock_unlock(&eng->qp_lock);
	pthread_rwlock_unlock(&eng->attach_lock);
}

static __thread unsigned contended_polls;

void sv_engine_progress(struct sv_engine *eng)
{
	int contended = 0;

	if (!eng || !eng->attached || pthread_rwlock_tryrdlock(&eng->attach_lock))
		return;
	atomic_store_explicit(&eng->last_inline, sv_now_ns(),
			      memory_order_relaxed);
	if (eng->attached) {
		sv_cap_prepare(eng);
		/* The application polls: what it posted in a burst runs now. */
		if (atomic_load_explicit(&eng->deferred, memory_order_relaxed))
			sv_eng_run_deferred(eng, 0);
		sv_eng_drain_all(eng, &contended, NULL);
		if (atomic_load_explicit(&eng->work, memory_order_relaxed)) {
			int busy = 0;

			sv_eng_scan_qps(eng, sv_now_ns(), &busy);
		}
	}
	pthread_rwlock_unlock(&eng->attach_lock);
	/* A ring with packets held by another thread of ours: mostly the
	 * progress thread busy on the other CPU, which is done in a moment
	 * (the application polls again anyway).  Only when that goes on
	 * poll after poll may the holder be preempted on our CPU: then let
	 * it finish.  (A yield is a system call: microseconds on a VM.) */
	if (!contended)
		contended_polls = 0;
	else if (++contended_polls >= SV_CONTENDED_POLLS) {
		contended_polls = 0;
		sched_yield();
	}
}

/* SPDX-License-Identifier: MIT */
/*
 * Inbound (eng_progress.c "Progress" says who calls it when): draining
 * the rings other engines fill and the wire's port, dispatching what they
 * hold -- request packets to our responder, responses to our completer,
 * owner events (a completion event on one of our CQs, an SRQ limit, a QP
 * a peer's direct execution moved to ERR) -- and the scan of every QP's
 * timers, blocked senders and pending responses.  A per-ring trylock makes
 * one thread consume a ring at a time, so packets of a ring are processed
 * in order.
 */
#include "engine_int.h"
#include "sv_roce.h"
#include "sv_wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

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
	for (unsigned i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (!(bits & map[i].bit))
			continue;
		if (qp->type == IBV_QPT_XRC_RECV) /* every handle's */
			sv_eng_xrc_event_raise(qp, map[i].type);
		else
			sv_eng_async(qp->eng, &qp->cref, map[i].type,
				     &qp->qpx.qp_base);
	}
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

/* Up to 64 QPs touched by one drain: their ACKs go out once, after it.
 * qp[] last: a drain zeroes what is before it (a poll of an empty CQ
 * drains, and zeroing the whole of it took a tenth of UCX's poll). */
struct touched {
	int n;
	int contended; /* a ring with packets was locked by another thread */
	int left;      /* a ring still holds packets (the batch limit) */
	int silent;    /* requests that end in no completion of ours (RDMA
			* WRITE without immediate, READ, atomic) */
	int ends;      /* messages that end (a WRITE without immediate too) */
	int reqs;      /* request packets */
	struct sv_resp_hold hold; /* the run of requests being taken */
	struct sv_qp *qp[64];
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

/* After a drain: the ACKs of the QPs it touched, published together (a
 * requester sees the windows a drain took complete at once, as a NIC
 * acknowledges what it took in one pass), and what their responders left
 * for the owner.  Must hold qp_lock (read). */
static void touched_flush(struct touched *t)
{
	sv_link_batch_begin();
	for (int i = 0; i < t->n; i++)
		sv_resp_flush(t->qp[i]);
	sv_link_batch_end();
	for (int i = 0; i < t->n; i++)
		if (atomic_load_explicit(&t->qp[i]->shm->events,
					 memory_order_relaxed))
			sv_qp_owner_events(t->qp[i]);
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
		t->reqs++;
		if (!(pkt.flags & (OP_SEND | OP_IMM)))
			t->silent++;
		if (pkt.flags & OP_LAST)
			t->ends++;
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
	/* Empty as the shared header says (the head we published is the
	 * tail): nothing to take the lock for.  A head behind ours (records
	 * of padding skipped) only sends us to look under the lock. */
	if (atomic_load_explicit(&in->rx.h->tail, memory_order_acquire) ==
	    atomic_load_explicit(&in->rx.h->head, memory_order_relaxed))
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
	while ((uint64_t)n < sv_tune.ring_batch) {
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
	if ((uint64_t)n == sv_tune.ring_batch &&
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

/* A wire record (GRH first) for a QP of ours, dispatched as wire_read
 * does; 0 when the QP is not ours.  Must hold the port, and no QP lock. */
int sv_eng_dispatch_own(struct sv_engine *eng, const uint8_t *rec,
			uint32_t len, uint32_t qpn)
{
	struct touched t = { .n = 0 };
	int ours;

	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	ours = sv_eng_qp(eng, qpn) != NULL;
	if (ours)
		dispatch(eng, rec, len, SV_WIRE_REC, &t);
	sv_resp_release(&t.hold);
	touched_flush(&t);
	sv_unlock_rw(&eng->qp_lock);
	return ours;
}

/* A packet wire_read leaves to wire_forward: packet k of datagram i, its
 * record's length (packet 0's record is in place; k > 0 is parsed again
 * from the aggregate, sv_wire_rx_packet). */
struct wire_fwd {
	uint16_t i, k;
	uint32_t rec_len;
};
#define WIRE_FWD_MAX (SV_WIRE_BATCH * 64)

/*
 * The wire port (sv_wire.h): when nobody else reads it, reads a batch;
 * each packet (a datagram, or each of a UDP_GRO aggregate's) for our QPs
 * is dispatched here, the others are listed in fwd[] for wire_forward
 * (after qp_lock is dropped: finding a link may take eng->lock and call
 * the daemon).  Must hold qp_lock (read) and the port (wire_rx_begin).
 * Returns how many datagrams it read; *npk the packets they held.
 */
static int wire_read(struct sv_engine *eng, struct touched *t,
		     struct wire_fwd *fwd, int *nfwd, int *npk)
{
	struct sv_wire_rxb *b = eng->rxb;
	struct sv_wire_shm *m = eng->wshm;
	uint64_t pkts = 0, bytes = 0, bad = 0, junk = 0, noqp = 0, full = 0;
	int n = sv_wire_recv(eng->wire_sock, b, SV_WIRE_BATCH);

	*nfwd = 0;
	*npk = 0;
	for (int i = 0; i < n; i++) {
		uint32_t np = sv_wire_rx_packets(b, i);

		for (uint32_t k = 0; k < np; k++) {
			struct sv_wire_pkt p;
			uint32_t len;
			uint8_t *buf = sv_wire_rx_packet(b, i, k, &len);
			int err;

			++*npk;
			if (!buf) {
				junk++;
				continue;
			}
			if (sv_wire_qpn_missing(m, buf + SV_WIRE_HEADROOM, len)) {
				noqp++;
				continue;
			}
			err = sv_wire_rx_parse(&b->mm[i].msg_hdr, len, buf,
					       eng->wire_port, &p);
			if (err) {
				if (err == -EBADMSG)
					bad++;
				else
					junk++;
				continue;
			}
			if (p.qpn == 1) {
				/* QP1 is the daemon's (the CM): up the
				 * engine socket (no lock of ours is waited
				 * on there). */
				sv_resp_release(&t->hold);
				up_qp1(eng, &p);
				pkts++;
				bytes += p.ib_len;
				continue;
			}
			if (p.qpn == SV_MCAST_QPN || !sv_eng_qp(eng, p.qpn)) {
				/* A group's (its QPs are asked for) or
				 * another process's QP (live in the map,
				 * looked at above): its engine is found
				 * after the port is given up (a daemon call
				 * on a cache miss). */
				if (*nfwd < WIRE_FWD_MAX)
					fwd[(*nfwd)++] = (struct wire_fwd){
						(uint16_t)i, (uint16_t)k, p.rec_len
					};
				else
					full++;
				continue;
			}
			dispatch(eng, p.rec, p.rec_len, SV_WIRE_REC, t);
			pkts++;
			bytes += p.ib_len;
		}
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
	if (full)
		atomic_fetch_add_explicit(&m->rx_ring_full, full,
					  memory_order_relaxed);
	return n < 0 ? 0 : n;
}

/* Hands what wire_read listed to the engines serving those QPs, in the
 * order read, before the port is given up (sv_wire.h "Order").  No lock
 * but the port held. */
static void wire_forward(struct sv_engine *eng, const struct wire_fwd *fwd,
			 int nfwd)
{
	struct sv_wire_rxb *b = eng->rxb;
	struct sv_wire_shm *m = eng->wshm;

	for (int j = 0; j < nfwd; j++) {
		struct sv_wire_pkt p;
		struct sv_link *l;
		uint32_t len;
		uint8_t *r;
		int dead;

		p.rec = sv_wire_rx_packet(b, fwd[j].i, fwd[j].k, &len);
		p.rec_len = fwd[j].rec_len;
		/* Packet 0's record is in place (parsed); a later one of an
		 * aggregate was copied out again: parsed again, and it is
		 * as good as it was. */
		if (fwd[j].k &&
		    sv_wire_rx_parse(&b->mm[fwd[j].i].msg_hdr, len, p.rec,
				     eng->wire_port, &p))
			continue;
		p.qpn = ld_be24(p.rec + SV_GRH_BYTES + 5);
		if (p.qpn == SV_MCAST_QPN) {
			int k = sv_mcast_fanout(eng, p.rec, p.rec_len);

			atomic_fetch_add_explicit(k ? &m->rx_pkts : &m->rx_no_qp,
						  1, memory_order_relaxed);
			if (k)
				atomic_fetch_add_explicit(&m->rx_bytes, len,
							  memory_order_relaxed);
			continue;
		}
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
		atomic_fetch_add_explicit(&m->rx_bytes, len, memory_order_relaxed);
	}
}

/* Takes the port for reading (this thread of ours, then the namespace's
 * turn).  Nonzero when taken. */
static int wire_rx_begin(struct sv_engine *eng, uint64_t now)
{
	if (eng->wire_sock < 0)
		return 0;
	/* An empty read costs a system call: after one, the port rests a
	 * moment (an application polling its CQ in a loop would spend its
	 * time there); while our progress thread waits on it in its nap
	 * (the port quiet for wire_watch_ns, eng_progress.c), nobody of ours
	 * reads it: the thread wakes when a datagram comes. */
	if (!now)
		now = sv_now_ns();
	if (now < atomic_load_explicit(&eng->wire_idle_until, memory_order_relaxed) ||
	    atomic_load_explicit(&eng->wire_watched, memory_order_relaxed) ||
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

/*
 * After a read of the port that found nw datagrams (-1: not read).
 * Empty: rest a while, since an empty read costs a system call.  The
 * longer the port has been quiet, the longer the rest (a sixteenth of the
 * quiet, up to wire_quiet_rest_ns, sv_tune.h): a requester waiting for
 * the answer to a READ or an atomic a few microseconds after the last
 * datagram reads again within a microsecond (a floor of 2 us cost
 * ib_read_lat between namespaces 1 us of its 14), and a program that
 * talks only on this host (UCX's ud_verbs QPs keep the port open) polls
 * it rarely and its polls stay short.  A few packets of a stream:
 * let more gather (a NIC's interrupt moderation), so a read takes a
 * batch, not two packets.  One packet or a full batch: read again at
 * once -- unless it was a ping-pong's message (asked, 1: one short
 * message that the application is to answer, its ACK kept for the
 * answer), whose next one comes after the answer: rest wire_rest_ns
 * (libfabric's rxm polls its CQ several times before the application
 * answers, each an empty read of the port).
 */
static void wire_rest(struct sv_engine *eng, int nw, int asked)
{
	uint64_t now, rest, quiet;

	if (nw < 0)
		return;
	now = sv_now_ns();
	if (nw) {
		atomic_store_explicit(&eng->wire_last_rx, now,
				      memory_order_relaxed);
		if (asked)
			rest = sv_tune.wire_rest_ns;
		else if (nw == 1 || nw >= SV_WIRE_BATCH / 2)
			return;
		else
			rest = sv_tune.wire_gather_ns;
	} else {
		quiet = now - atomic_load_explicit(&eng->wire_last_rx,
						   memory_order_relaxed);
		rest = quiet / 16;
		if (rest > sv_tune.wire_quiet_rest_ns)
			rest = sv_tune.wire_quiet_rest_ns;
	}
	atomic_store_explicit(&eng->wire_idle_until, now + rest,
			      memory_order_relaxed);
}

int sv_eng_drain_all(struct sv_engine *eng, uint64_t now, int *contended,
		     int *silent, int port)
{
	unsigned nin = atomic_load_explicit(&eng->nin, memory_order_acquire);
	struct touched t;
	struct wire_fwd fwd[WIRE_FWD_MAX];
	int n, wire, nw = 0, nfwd = 0, npk = 0;

	memset(&t, 0, offsetof(struct touched, qp));
	wire = port && wire_rx_begin(eng, now);
	n = 0;

	n += sv_rmem_serve(eng);
	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	/* The rings first: what another reader of the port forwarded to us
	 * is older than what the port holds now. */
	for (unsigned i = 0; i < nin; i++)
		n += drain_ring(eng, eng->in[i], &t);
	/* A ring still holds packets (another thread of ours dispatches
	 * from it, or the batch limit left some): they are older than what
	 * the port holds, so the port waits. */
	if (wire && !t.contended && !t.left)
		nw = wire_read(eng, &t, fwd, &nfwd, &npk);
	else
		nw = -1;
	/* The ACKs of this pass wait for the application's next call
	 * (sv_wire_hold_acks) only when it took one short message, which
	 * the application may answer at once (a ping-pong) -- a WRITE
	 * without immediate too: ib_write_lat's side polls its send CQ for
	 * its own WRITE's ACK, which comes with the peer's WRITE, sees its
	 * memory change and answers; the ACK left alone cost a datagram
	 * more each way, and its 8 B typical went from 50 to 8 us when it
	 * rode with the answer (between namespaces).  In a stream
	 * -- no message ended, several did, or a long one -- the sender
	 * waits for them: held, they cost a stream of 1 MiB SENDs between
	 * namespaces a quarter of its speed.  A drain that took no request
	 * changes nothing: the application polls again before it answers
	 * (libfabric's rxm reads its CQ until it is empty), and the ACKs
	 * an earlier poll kept stay kept (sv_wire_flush_polled). */
	if (t.reqs && (t.ends != 1 || t.reqs > 4))
		sv_wire_hold_acks(0);
	touched_flush(&t);
	sv_unlock_rw(&eng->qp_lock);
	if (wire) {
		wire_forward(eng, fwd, nfwd);
		wire_rest(eng, nw, t.reqs && sv_wire_acks_held());
		wire_rx_end(eng);
		n += npk;
	}
	sv_wire_flush(eng);
	if (contended)
		*contended = t.contended;
	if (silent)
		*silent = t.silent;
	return n;
}

/* Timers, blocked senders, pending responses and owner events of every
 * QP.  Returns the earliest deadline (ns) or 0.  app: the caller is the
 * progress thread and the application polls right now, so the blocked
 * senders are left to its next poll (eng->work says so): two threads
 * running one QP's requester took turns at its locks, each spinning and
 * yielding while the other's sendmmsg of a train ran, a tenth of the
 * sender's CPU in a stream between two hosts. */
uint64_t sv_eng_scan_qps(struct sv_engine *eng, uint64_t now, int app,
			 int *busy)
{
	uint64_t next = 0;
	struct sv_qp *flush[32];
	int nflush = 0;

	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
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
		if (tr->blocked && app)
			atomic_store_explicit(&eng->work, 1, memory_order_relaxed);
		else if (tr->blocked)
			sv_req_run(qp);
		if (tr->ack_pending || tr->rq_head != tr->rq_tail)
			sv_resp_flush(qp);
		if (tr->blocked || tr->ack_pending || tr->rq_head != tr->rq_tail)
			*busy = 1;
	}
	for (int i = 0; i < nflush; i++)
		sv_engine_flush(flush[i]);
	sv_unlock_rw(&eng->qp_lock);
	return next;
}

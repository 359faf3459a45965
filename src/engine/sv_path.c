/* SPDX-License-Identifier: MIT */
/*
 * Where a work request goes (sv_path.h): every choice between the ways a
 * message can travel, made here and nowhere else; the code that carries a
 * choice out (sv_req.c, sv_direct.c) executes it, and says so when it
 * cannot (it declines, and the next way is asked).
 *
 * The ways, by what they cost (docs/architecture.md "Which way a message goes"):
 *
 *   direct       the initiator moves the bytes into the target's memory
 *                itself (sv_direct.c): one system call (process_vm_writev)
 *                per message when the target is another process, no CPU
 *                of the target, no ACK;
 *   direct batch a run of WRITEs or READs in one such call;
 *   small packet a message of one packet into a ring the target drains
 *                now (its application polls, or its thread spins): no
 *                system call on either side, a copy in and a copy out;
 *   packets      the IBTA transport on a link: the fallback where CMA is
 *                refused, with SOFTVERBS_DIRECT=0, and to other hosts.
 *
 * Doorbell batching.  A direct execution costs one system call whatever
 * its size, and a system call costs microseconds on a VM: a stream of
 * small posts (a bandwidth test) is worth gathering into one call, a lone
 * post (a latency test, a request) must run at once.  A post that comes
 * within burst_ns of the end of the previous one is a stream: it waits,
 * and so does every post after it, until direct_batch WQEs are queued,
 * the application polls a CQ or asks for a completion event, or defer_ns
 * pass (the progress thread runs them then: sv_eng_run_deferred; beside
 * an application in a polling loop no doorbell wakes the thread for it:
 * the next poll comes first, and the thread's nap bounds the wait).
 *
 * Packets (sv_path_packets_now: the target takes them at once; always
 * to a peer we reach only by packets, on a ring or the wire) cost no
 * system call on a ring, but each publication moves the ring's cache
 * lines between the CPUs, and one requester run publishes all its
 * packets together (sv_link_batch_begin); on the wire a run ends in a
 * system call (sendmmsg).  A stream of them waits for pkt_batch WQEs the
 * same way (pkt_batch_shared when other QPs send through its CQ:
 * batch_of).  A post after anything came back -- a completion polled, a
 * request received: a ping-pong, the peer waits for this one -- runs at
 * once, however soon it comes, unless other QPs' streams are held: then
 * it joins them.
 *
 * Held streams run at the next poll of a CQ (sv_engine_note_poll), found
 * empty or not, QP after QP in turns (eng_qp.c run_turns): windows that
 * several QPs posted together complete together, as a NIC's send
 * scheduler makes them, and a program that reposts each QP's window as
 * it completes keeps its QPs in lock step.
 */
#include "engine_int.h"

/* The operation ends in a receive completion at the target. */
static int wants_recv(uint32_t op)
{
	return !!(sv_wrinfo(op)->flags & SV_WR_RECV); /* sv_opcode.h */
}

/* The engine at the other end of link consumes its ring now (its
 * application polls, or its thread spins): it has not armed it. */
static int target_drains(struct sv_link *link)
{
	return !atomic_load_explicit(&link->tx.h->armed, memory_order_relaxed);
}

/*
 * A small message (up to direct_small) to an engine in another process
 * that takes a packet at once, without a system call on either side: a
 * SEND or WRITE with immediate when the target consumes its ring now (its
 * application polls, or its thread spins: the ring is unarmed); a WRITE,
 * READ or atomic, which end in no completion there, only when its thread
 * spins.  Bigger messages go direct: one system call moves them cheaper
 * than a copy into packets and one out.
 */
int sv_path_takes_packet(struct sv_link *link, const struct sv_send_wqe *w)
{
	if (!link || sv_wqe_bytes(w) > sv_tune.direct_small)
		return 0;
	return wants_recv(w->opcode) ? target_drains(link) :
				       sv_ring_peer_spins(&link->tx);
}

int sv_path_packets_now(struct sv_qp *qp, struct sv_tr *tr)
{
	struct sv_link *link = tr->peer ? tr->peer->link : NULL;

	if (!link || qp->sq.tail == qp->sq.next)
		return 0;
	return sv_path_takes_packet(link, sv_wq_slot(&qp->sq, qp->sq.next));
}

int sv_path_retry_pending(struct sv_qp *qp)
{
	for (uint32_t i = qp->sq.head; i != qp->sq.next; i++) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(w) != WQE_DONE)
			return 1;
	}
	return 0;
}

/*
 * On the wire a window that filled reopens by a whole train (what one
 * UDP_SEGMENT send carries, eng_wire.c), not by whatever an ACK frees: the
 * sender then sends 62 packets at MTU 1024 in one datagram through the
 * kernel's stack instead of two of 32, and the kernel's cost per
 * datagram, which is most of the sender's, is paid half as often (a bare
 * UDP stream on a veth, bench/udp_floor.c: 2.3 GB/s in trains of 32,
 * 3.0-3.5 GB/s in trains of 62).  At most a quarter of the window, so
 * the ACKs of what stays in flight always reopen it.
 */
int sv_path_window_full(struct sv_qp *qp, struct sv_tr *tr)
{
	uint32_t out = (uint32_t)psn_diff(tr->psn, tr->last_ack_psn) - 1,
		 win = sv_path_window(tr), reopen;

	if (!sv_qpt_rc(qp->type) || out >= (1u << 23))
		return 0;
	if (out >= win) {
		tr->win_shut = 1;
		return 1;
	}
	if (!tr->win_shut || !tr->wlink)
		return 0;
	reopen = sv_wire_train_pkts(tr->mtu);
	if (reopen > win / 4)
		reopen = win / 4;
	if (win - out < reopen)
		return 1;
	tr->win_shut = 0;
	return 0;
}

uint32_t sv_path_window(const struct sv_tr *tr)
{
	/* The wire's round trip is a kernel's, not a ring's: its window is
	 * bytes (at MTU 1024 four times the packets of MTU 4096). */
	return tr->wlink ? sv_tune_pkts(sv_tune.wire_window_kb, tr->mtu,
					sv_tune.window_pkts) :
			   (uint32_t)sv_tune.window_pkts;
}

/* On the wire a multiple of a train when at least one (each ACK then
 * reopens a filled window by whole trains: sv_path_window_full). */
uint32_t sv_path_ack_every(const struct sv_tr *tr)
{
	uint32_t n, t;

	if (!tr->wlink)
		return (uint32_t)sv_tune.ack_every;
	n = sv_tune_pkts(sv_tune.wire_ack_kb, tr->mtu, sv_tune.ack_every);
	t = sv_wire_train_pkts(tr->mtu);
	return n >= t ? n - n % t : n;
}

/* A scheduler pass (sv_path_sched_begin/end) rings the doorbells it
 * decided on at its end: a target woken in the middle of the pass would
 * take the rest of its windows as packets, which complete later than the
 * ones executed before, and the QPs served first would run ahead. */
#define SV_WAKE_LATER 8
static __thread struct {
	int depth, n;
	struct sv_link *link[SV_WAKE_LATER];
} sched;

void sv_path_sched_begin(void)
{
	sched.depth++;
}

void sv_path_sched_end(void)
{
	if (--sched.depth)
		return;
	for (int i = 0; i < sched.n; i++)
		sv_link_ring(sched.link[i]);
	sched.n = 0;
}

/* Rings link's doorbell now, or at the end of the scheduler pass. */
static void wake(struct sv_link *link)
{
	if (sched.depth) {
		for (int i = 0; i < sched.n; i++)
			if (sched.link[i] == link)
				return;
		if (sched.n < SV_WAKE_LATER) {
			sched.link[sched.n++] = link;
			return;
		}
	}
	sv_link_ring(link);
}

/*
 * A small one-sided request was just executed directly on a target whose
 * thread sleeps.  The second such request in a stream (within stream_ns
 * of the last) wakes that thread, at most once per spin_ns: awake, it
 * spins a while and the rest of the stream travels as packets
 * (sv_path_takes_packet), at a fraction of a system call each.  A lone request
 * pays nothing extra and needs no CPU of the target.
 */
void sv_path_after_direct(struct sv_link *link, uint32_t op, uint64_t len)
{
	uint64_t now, last;

	if (!link || wants_recv(op) || len > sv_tune.direct_small ||
	    target_drains(link))
		return; /* its thread (or application) is awake */
	now = sv_now_ns();
	last = atomic_exchange_explicit(&link->last_small, now,
					memory_order_relaxed);
	if (now - last >= sv_tune.stream_ns ||
	    now - atomic_load_explicit(&link->woken, memory_order_relaxed) <
		    sv_tune.spin_ns)
		return;
	atomic_store_explicit(&link->woken, now, memory_order_relaxed);
	wake(link);
}

enum sv_reach sv_path_reach(const struct sv_qp *qp, const struct sv_link *link,
			    const struct sv_peer *peer, int late)
{
	int ours = link && link->peer_id == qp->eng->id;

	if (sv_fault_packets(qp))
		return SV_REACH_PACKETS; /* a packet plan must see them */
	if (late)
		return peer || ours ? SV_REACH_DIRECT : SV_REACH_PACKETS;
	/* Our own QP, or a peer CMA reaches: directly; another host:
	 * packets. */
	if (!sv_direct_enabled() || (link && link->w))
		return SV_REACH_PACKETS;
	return peer || ours ? SV_REACH_DIRECT : SV_REACH_UNKNOWN;
}

/* ------------------------------------------------------------ posts -- */

/* How many WQEs a held stream gathers before it runs.  Packets: a QP
 * alone on its send CQ runs in parts (pkt_batch), so the target works on
 * one part while the application posts the next; QPs that share a send
 * CQ gather a window each (pkt_batch_shared), for the scheduler to run
 * all of them together at the next poll -- a QP that ran its window
 * alone at its 16th post would complete ahead of the others. */
static uint32_t batch_of(const struct sv_qp *qp, int pk)
{
	if (!pk)
		return sv_tune.direct_batch;
	return qp->scq && atomic_load_explicit(&qp->scq->senders,
					       memory_order_relaxed) > 1 ?
		       sv_tune.pkt_batch_shared :
		       sv_tune.pkt_batch;
}

enum sv_post_action sv_path_on_post(struct sv_qp *qp, struct sv_kick *k)
{
	struct sv_tr *tr = tr_of(qp);
	struct sv_path_state *ps;
	int hold;

	k->record = 0;
	if (sv_qp_state(qp) == IBV_QPS_ERR)
		return SV_POST_FLUSH;
	if (!tr)
		return SV_POST_NOTHING;
	ps = &tr->path;
	if (ps->reach == SV_REACH_DIRECT)
		k->pk = (uint8_t)sv_path_packets_now(qp, tr);
	else if (ps->reach == SV_REACH_PACKETS && qp->link)
		k->pk = 1; /* packets, on a ring or the wire, always */
	else
		return SV_POST_RUN; /* not routed yet: the run routes it */
	k->got = atomic_load_explicit(&qp->eng->got_seq, memory_order_relaxed);
	hold = !tr->req_busy && sv_qp_state(qp) == IBV_QPS_RTS &&
	       qp->sq.tail - qp->sq.next < batch_of(qp, k->pk);
	if (hold && !__atomic_load_n(&ps->held, __ATOMIC_RELAXED) &&
	    atomic_load_explicit(&qp->eng->deferred, memory_order_relaxed)) {
		/* Other QPs' streams are held: this post joins them, and all
		 * run together at the next poll (sv_eng_run_deferred), so the
		 * windows posted together complete together. */
		k->now = sv_now_ns();
		__atomic_store_n(&ps->held, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&ps->kick_end, k->now, __ATOMIC_RELAXED);
		ps->kick_got = k->got;
		k->due = k->now + (k->pk ? sv_tune.nap_ns : sv_tune.defer_ns);
		return SV_POST_HOLD;
	}
	if (k->pk && k->got != ps->kick_got) {
		/* Something came back since our last post: a ping-pong,
		 * the peer waits for this one. */
		ps->kick_got = k->got;
		return SV_POST_RUN;
	}
	if (hold && __atomic_load_n(&ps->held, __ATOMIC_RELAXED)) {
		/* A stream held already (no run since): it waits for its
		 * batch, and the progress thread knows (no clock read: one
		 * costs tens of ns on a VM, a good part of a small packet). */
		return SV_POST_NOTHING;
	}
	k->now = sv_now_ns();
	if (hold && k->now - ps->kick_end < sv_tune.burst_ns) {
		/* A stream: wait for more. */
		__atomic_store_n(&ps->held, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&ps->kick_end, k->now, __ATOMIC_RELAXED);
		k->due = k->now + (k->pk ? sv_tune.nap_ns : sv_tune.defer_ns);
		return SV_POST_HOLD;
	}
	k->record = 1;
	return SV_POST_RUN;
}

void sv_path_kicked(struct sv_tr *tr, const struct sv_kick *k)
{
	/* A run of packets is short: its start will do (a clock read is
	 * tens of ns on a VM, a good part of a small message).  On the wire
	 * its end is after the system call that sends it: sv_req.c reads
	 * the clock again there. */
	__atomic_store_n(&tr->path.kick_end, k->pk ? k->now : sv_now_ns(),
			 __ATOMIC_RELAXED);
	tr->path.kick_got = k->got;
}

/* ------------------------------------------------------------- WQEs -- */

/* w (new, at `idx`) must wait for the READs and atomics (ATOMIC WRITEs
 * too: sv_wr_rd_credit) before it: a fence waits for all of them, a READ
 * or atomic while max_rd_atomic are outstanding.  Walks back from idx
 * and stops at the answer, and only for the WQEs that can wait: a stream
 * of WRITEs or SENDs pays nothing. */
static int reads_block(struct sv_qp *qp, uint32_t idx,
		       const struct sv_send_wqe *w)
{
	int fence = (w->send_flags & IBV_SEND_FENCE) != 0;
	uint32_t n = 0, max = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;

	if (!fence && !sv_wr_rd_credit(w->opcode))
		return 0;
	for (uint32_t i = idx; i != qp->sq.head;) {
		const struct sv_send_wqe *p = sv_wq_slot(&qp->sq, --i);

		if (WQE_STATE(p) != WQE_DONE && WQE_STATE(p) != WQE_NEW &&
		    sv_wr_rd_credit(p->opcode) && (fence || ++n >= max))
			return 1;
	}
	return 0;
}

/* A new SEND or WRITE of one packet of at most direct_small bytes (one
 * SGE or inline), no fence, on a ring link with room in the window, to a
 * target that takes it at once: directly reachable and draining now, or
 * one we only reach by packets. */
static int small_ok(struct sv_qp *qp, struct sv_tr *tr,
		    const struct sv_send_wqe *w)
{
	struct sv_link *link = qp->link;
	uint32_t op = w->opcode, mtu = tr->mtu ? tr->mtu : 4096, len;

	if ((op != IBV_WR_RDMA_WRITE && op != IBV_WR_SEND) ||
	    (w->send_flags & IBV_SEND_FENCE) || !link || link->w)
		return 0;
	if (w->send_flags & IBV_SEND_INLINE)
		len = w->inline_len;
	else if (w->num_sge <= 1)
		len = w->num_sge ? w->sge[0].length : 0;
	else
		return 0;
	if (len > sv_tune.direct_small || len > mtu || sv_path_window_full(qp, tr))
		return 0;
	return tr->path.reach == SV_REACH_DIRECT ?
		       tr->peer && sv_path_packets_now(qp, tr) :
		       tr->path.reach == SV_REACH_PACKETS;
}

/* Direct execution of w may be tried: RC/UC reach the peer directly; a
 * UD destination is on this host.  A capture sees packets only. */
static int direct_ok(struct sv_qp *qp, struct sv_tr *tr,
		     const struct sv_send_wqe *w)
{
	int ud = qp->type == IBV_QPT_UD;

	return (ud || tr->path.reach == SV_REACH_DIRECT) &&
	       sv_direct_enabled() && !sv_cap_on(qp->eng) &&
	       (!ud || sv_gid_local(qp->eng, w->dgid.raw)) &&
	       !sv_fault_packets(qp);
}

enum sv_wqe_path sv_path_choose(struct sv_qp *qp, struct sv_tr *tr,
				const struct sv_send_wqe *w,
				enum ibv_qp_state st, int budget,
				enum sv_wqe_path from)
{
	int fresh = WQE_STATE(w) == WQE_NEW, pk;

	if (WQE_STATE(w) == WQE_DONE)
		return SV_PATH_DONE;
	if (st == IBV_QPS_SQD && fresh)
		return SV_PATH_STOP; /* finish what started only */
	if (from <= SV_PATH_SMALL_PKT && fresh && sv_qpt_rc(qp->type) &&
	    budget > 0 && small_ok(qp, tr, w))
		return SV_PATH_SMALL_PKT;
	if (fresh && reads_block(qp, qp->sq.next, w))
		return SV_PATH_WAIT;
	if (w->opcode == IBV_WR_BIND_MW || w->opcode == IBV_WR_LOCAL_INV)
		return qp->type == IBV_QPT_UD ? SV_PATH_LOCAL_ERR : SV_PATH_LOCAL;
	if (budget <= 0)
		return SV_PATH_BUDGET;
	/* A packet the target takes at once: asked before the direct
	 * paths' big frames. */
	pk = fresh && qp->type != IBV_QPT_UD && tr->peer &&
	     sv_path_packets_now(qp, tr);
	if (!fresh || pk)
		return SV_PATH_PACKET;
	if (from <= SV_PATH_DIRECT_BATCH &&
	    (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_READ ||
	     w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM) &&
	    tr->path.reach == SV_REACH_DIRECT && qp->type != IBV_QPT_UD &&
	    /* XRC: each WQE names its SRQ, whose PD checks its key */
	    qp->type != IBV_QPT_XRC_SEND &&
	    qp->sq.tail - qp->sq.next >= 2 && !sv_cap_on(qp->eng) &&
	    !(sv_qpt_rc(qp->type) && sv_path_retry_pending(qp)))
		return SV_PATH_DIRECT_BATCH;
	if (from <= SV_PATH_DIRECT && direct_ok(qp, tr, w))
		return SV_PATH_DIRECT;
	return SV_PATH_PACKET;
}

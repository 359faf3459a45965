/* SPDX-License-Identifier: MIT */
/*
 * Progress (docs/architecture.md "Progress"): the progress thread and its
 * policy, the application's inline share (sv_engine_progress), async
 * events, and the engine socket.  What a pass drains -- the inbound
 * rings, the wire's port, owner events, the QPs' timers -- is
 * eng_inbound.c.
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
 *     after activity the thread spins spin_ns (sv_tune.h; or
 *     SOFTVERBS_SPIN_US) with a pause, then arms every inbound ring and sleeps
 *     in epoll (doorbell, engine socket, stop eventfd) with a timeout only
 *     when a timer is pending: an idle process uses no CPU;
 *   - it polls a CQ and takes every packet itself: the thread keeps off
 *     the rings (one thread preempted with a ring or QP lock held stalls
 *     the other for a time slice when 2 CPUs run 4 threads), leaves them
 *     unarmed (no doorbell: the poller sees packets at once) and looks
 *     again after a nap for timers, or at a deadline (the nap doubles
 *     from nap_ns up to nap_max_ns while the looks find nothing to do:
 *     each is a wake-up that takes the application's CPU on a small
 *     machine); a request for an event ends the nap (the application is
 *     about to sleep);
 *   - it polls a CQ but leaves packets to the thread (it waits on its
 *     memory between polls: ib_write_lat's target over packets): the
 *     thread sleeps armed, so the next packet wakes it at once, and looks
 *     again only after nap_max_ns unless streams are held (sleep_once).
 * The thread never spins next to a polling application: on a small
 * machine it would take that application's CPU.  struct policy and
 * policy_decide below hold this policy; the tunables it reads are
 * sv_tune.h's.
 */
#include "engine_int.h"
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
	struct sv_xrc_event_req xreq = { .qpn = ev->xrc_qpn,
					 .event_type = ev->type };

	if (ev->xrc_qpn ?
		    sv_call_simple(SV_OP_XRC_EVENT, 0, ev->instance, -1, &xreq,
				   sizeof(xreq), NULL, 0) :
		    sv_call_simple(SV_OP_ASYNC_EVENT, ev->ufile, ev->instance,
				   -1, &req, sizeof(req), NULL, 0))
		sv_dbg("async event %u dropped", ev->type);
}

/* Sends ev to the daemon from the progress thread (or now, with none);
 * takes it. */
static void async_queue(struct sv_engine *eng, struct sv_async_ev *ev)
{
	/* The responder raises events with QP locks held: async_lock ranks
	 * last (sv_lock.h). */
	sv_lock_mutex(&eng->async_lock, SV_LOCK_ASYNC);
	if (!eng->thread_running) {
		sv_unlock_mutex(&eng->async_lock);
		async_send(ev); /* no thread: our caller holds no lock */
		free(ev);
		return;
	}
	__atomic_store_n(eng->async_tail, ev, __ATOMIC_RELAXED); /* looked at */
	eng->async_tail = &ev->next;
	sv_unlock_mutex(&eng->async_lock);
	sv_eng_ring(eng);
}

void sv_eng_async(struct sv_engine *eng, const struct sv_ctx_ref *cref,
		  enum ibv_event_type type, void *element)
{
	struct sv_async_ev *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return;
	ev->ufile = cref->ufile;
	ev->ctx_id = cref->ctx_id;
	ev->instance = cref->instance;
	ev->type = type;
	ev->element = (uint64_t)(uintptr_t)element;
	async_queue(eng, ev);
}

void sv_eng_async_xrc(struct sv_engine *eng, uint64_t instance, uint32_t qpn,
		      enum ibv_event_type type)
{
	struct sv_async_ev *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return;
	ev->instance = instance;
	ev->type = type;
	ev->xrc_qpn = qpn;
	async_queue(eng, ev);
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
		sv_lock_mutex(&eng->async_lock, SV_LOCK_ASYNC);
		ev = eng->async_head;
		if (ev) {
			eng->async_head = ev->next;
			if (!eng->async_head)
				eng->async_tail = &eng->async_head;
		}
		sv_unlock_mutex(&eng->async_lock);
		if (!ev)
			return;
		async_send(ev);
		free(ev);
	}
}

void sv_eng_ring(struct sv_engine *eng)
{
	uint64_t one = 1;

	if (eng->doorbell >= 0 && write(eng->doorbell, &one, sizeof(one)) < 0)
		sv_dbg("doorbell: %s", strerror(errno));
}

void sv_eng_deadline(struct sv_engine *eng, uint64_t when)
{
	/* The deadline's store (under the QP's sq_lock) before the look
	 * at sleep_until, against the progress thread's store of
	 * sleep_until before its lockless look at the timers
	 * (sv_comp_timers): one of the two sees the other. */
	atomic_thread_fence(memory_order_seq_cst);
	if (when < atomic_load(&eng->sleep_until))
		sv_eng_ring(eng);
}

void sv_eng_want_work(struct sv_engine *eng)
{
	if (!atomic_exchange(&eng->work, 1))
		sv_eng_ring(eng);
}

/* -------------------------------------------------- engine socket -- */

/* The daemon is gone: the device with it.  Every QP of ours goes to the
 * error state and flushes, loopback ones too, as a NIC that died does
 * (IBV_EVENT_DEVICE_FATAL reaches the application on its async fd). */
static void device_gone(struct sv_engine *eng)
{
	atomic_store(&eng->device_gone, 1);
	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	for (uint32_t i = 0; i < eng->qcap; i++) {
		struct sv_qp *qp = eng->qtab[i].qp;

		if (!qp)
			continue;
		sv_lock_shm(&qp->shm->lock, SV_LOCK_RESP);
		if (qp->shm->state != IBV_QPS_RESET)
			sv_qshm_set_err(qp->shm);
		sv_unlock_shm(&qp->shm->lock);
		atomic_fetch_or(&qp->shm->events, SV_QEV_FLUSH);
	}
	sv_unlock_rw(&eng->qp_lock);
	atomic_store(&eng->work, 1);
}

static void peer_gone(struct sv_engine *eng, uint32_t peer)
{
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	for (struct sv_link *l = eng->links; l; l = l->next)
		if (l->peer_id == peer)
			atomic_store(&l->dead, 1);
	for (int i = 0; i < 256; i++)
		if (eng->dcache[i].engine_id == peer)
			eng->dcache[i].engine_id = 0;
	sv_unlock_mutex(&eng->lock);
	sv_lock_mutex(&eng->rmem_lock, SV_LOCK_RMEM);
	for (struct sv_link *l = eng->rlinks; l; l = l->next)
		if (l->peer_id == peer)
			atomic_store(&l->dead, 1);
	sv_unlock_mutex(&eng->rmem_lock);
	sv_peer_prune(eng, peer);
	atomic_store(&eng->work, 1);
}

static void sock_read_all(struct sv_engine *eng)
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
			sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
			for (struct sv_link *l = eng->links; l; l = l->next)
				if (l->peer_id != eng->id)
					atomic_store(&l->dead, 1);
			sv_unlock_mutex(&eng->lock);
			sv_lock_mutex(&eng->rmem_lock, SV_LOCK_RMEM);
			for (struct sv_link *l = eng->rlinks; l; l = l->next)
				atomic_store(&l->dead, 1);
			sv_unlock_mutex(&eng->rmem_lock);
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
		if (m.type == SV_ENGINE_FAULT) {
			sv_close_fds(fds, nfds);
			sv_fault_sync(eng);
			continue;
		}
		if (m.type == SV_ENGINE_XRC_EVENT) {
			sv_close_fds(fds, nfds);
			sv_engine_xrc_event(eng, m.peer, m.peer_pid);
			continue;
		}
		if (m.type == SV_ENGINE_XRC_SERVE) {
			sv_close_fds(fds, nfds);
			sv_engine_xrc_serve(eng, m.peer, m.peer_pid);
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
		sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
		if ((ring_len != m.ring_size &&
		     ring_len + SV_RMEM_BOX_BYTES != m.ring_size) ||
		    sv_add_inring(eng, map, m.ring_size, ring_len,
				  ring_len != m.ring_size, m.peer, 1)) {
			sv_warn("engine %u: refusing a link from engine %u",
				eng->id, m.peer);
			munmap(map, m.ring_size);
		}
		sv_unlock_mutex(&eng->lock);
	}
}

/* What the daemon sent us, all of it, by whichever thread asks first: the
 * progress thread when the socket wakes it, or sv_engine_take_arrived,
 * which must see a ring whose first packets are already there. */
static void sock_readable(struct sv_engine *eng)
{
	sv_lock_mutex(&eng->sock_lock, SV_LOCK_SOCK);
	if (!atomic_load(&eng->device_gone))
		sock_read_all(eng);
	sv_unlock_mutex(&eng->sock_lock);
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

/* Spin budget after work when the thread is the only consumer: spin_ns
 * (sv_tune.h), or SOFTVERBS_SPIN_US, read when the first progress thread
 * starts. */
static uint64_t spin_ns;
static pthread_once_t spin_once = PTHREAD_ONCE_INIT;

static void spin_init(void)
{
	const char *e = getenv("SOFTVERBS_SPIN_US");
	char *end;
	unsigned long v;

	spin_ns = sv_tune.spin_ns;
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

/* What the application posted in a stream and holds (sv_path.c) runs
 * now, all together. */
static void run_held(struct sv_engine *eng)
{
	if (atomic_load_explicit(&eng->deferred, memory_order_relaxed) &&
	    !sv_trylock_read(&eng->attach_lock, SV_LOCK_ATTACH)) {
		if (eng->attached)
			sv_eng_run_deferred(eng, 0);
		sv_unlock_rw(&eng->attach_lock);
	}
}

void sv_engine_note_notify(struct sv_engine *eng)
{
	if (!eng)
		return;
	bump(&eng->notify_seq);
	/* (The bump before the look at napping, against the thread's store
	 * of napping before its look at notify_seq: one sees the other.) */
	atomic_thread_fence(memory_order_seq_cst);
	/* It is going to wait for an event: what it posted and what its
	 * last poll kept (ACKs, sv_wire_hold_acks) leave now, not at the
	 * thread's next pass. */
	run_held(eng);
	sv_wire_flush(eng);
	/* And the thread, napping while it polled, sleeps armed from now
	 * on (policy_decide): the packets it waits for wake it, not the
	 * end of a nap. */
	if (atomic_load_explicit(&eng->napping, memory_order_relaxed) &&
	    atomic_exchange(&eng->napping, 0))
		sv_eng_ring(eng);
}

int sv_eng_app_polling(struct sv_engine *eng, uint64_t now)
{
	return now - atomic_load_explicit(&eng->last_inline,
					  memory_order_relaxed) < sv_tune.live_ns;
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
		sv_eng_ring(eng);
	}
	if (atomic_load_explicit(&eng->deferred, memory_order_relaxed)) {
		atomic_store_explicit(&eng->ran_held_notify,
				      atomic_load_explicit(&eng->notify_seq,
							   memory_order_relaxed),
				      memory_order_relaxed);
		atomic_store_explicit(&eng->app_ran_held, sv_now_ns(),
				      memory_order_relaxed);
	}
	run_held(eng);
}

/*
 * The thread's policy (the top comment says why), its state in one place.
 * Each pass: drain (unless the application drains right now), scan the
 * QPs' timers when one is due, then policy_decide: go again, spin, or
 * sleep -- armed (a doorbell wakes us) or not (we look again after a nap).
 */
struct policy {
	uint64_t spin_ns;	/* spin budget after work (spin_init) */
	uint64_t last_work;	/* the last pass that found packets, or the
				   end of the last sleep */
	uint64_t last_found;	/* the last packets a polling application
				   left to us */
	uint64_t last_scan;	/* the last look at every QP */
	uint64_t next_deadline; /* the earliest timer of a QP (ns), 0: none */
	uint64_t nap;		/* the next nap (nap_ns .. nap_max_ns) */
	uint64_t poll_seen;	/* when the application last polled a CQ */
	uint64_t notify_seen;	/* ... or asked for a completion event */
	uint32_t poll_seq;	/* eng->poll_seq as last seen */
	uint32_t notify_seq;	/* eng->notify_seq as last seen */
	uint32_t app_silent_seq; /* eng->app_silent_seq as last seen */
	int spinning;		/* the producers know we poll (spin_all) */
	int app;		/* this pass: the application polls a CQ */
	int napped;		/* the last sleep was a POLICY_NAP */
	int wire_woke;		/* a datagram on the port ended the last
				   sleep (sleep_once) */
};

enum policy_step {
	POLICY_AGAIN,	    /* a full batch: more where it came from */
	POLICY_SPIN,	    /* nobody else drains: spin, look again */
	POLICY_NAP,	    /* the application takes every packet: sleep
			       unarmed, look again after nap_ns */
	POLICY_SLEEP_ARMED, /* sleep with the rings armed: the next packet
			       rings our doorbell */
};

static void policy_init(struct policy *p, struct sv_engine *eng, uint64_t now)
{
	*p = (struct policy){
		.spin_ns = spin_ns,
		.last_work = now,
		.last_found = now - sv_tune.target_ns,
		.last_scan = now,
		.nap = sv_tune.nap_ns,
		.poll_seen = now - sv_tune.inline_ns,
		.notify_seen = now - sv_tune.inline_ns,
		.poll_seq = atomic_load(&eng->poll_seq),
		.notify_seq = atomic_load(&eng->notify_seq),
		.app_silent_seq = atomic_load(&eng->app_silent_seq),
	};
}

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

/* The QPs' timers are due for a look: packets came, someone asked for
 * work, a deadline passed, or a nap went by. */
static int policy_scan_due(struct policy *p, struct sv_engine *eng,
			   uint64_t now, int n)
{
	return n || atomic_exchange(&eng->work, 0) ||
	       (p->next_deadline && now >= p->next_deadline) ||
	       now - p->last_scan >= p->nap;
}

/*
 * After a pass that took n records (silent of them requests that end in
 * no completion of ours).  The application polled a CQ lately (p->app):
 * it is the main consumer, the thread only backs it up.  Engines that
 * deliver to us see our rings unarmed then, and send what ends in a
 * receive as packets we drain at our next poll.
 */
static enum policy_step policy_decide(struct policy *p, struct sv_engine *eng,
				      uint64_t now, int n, int silent)
{
	note_moved(&eng->poll_seq, now, &p->poll_seq, &p->poll_seen);
	p->app = now - p->poll_seen < sv_tune.inline_ns ||
		 now - atomic_load_explicit(&eng->last_inline,
					    memory_order_relaxed) <
			 sv_tune.inline_ns;
	note_moved(&eng->notify_seq, now, &p->notify_seq, &p->notify_seen);
	if (n) {
		uint32_t as = atomic_load_explicit(&eng->app_silent_seq,
						   memory_order_relaxed);

		p->last_work = now;
		/* Packets the application left, though it polls: it waits
		 * elsewhere between polls -- on a completion channel (it asks
		 * for events), or on its memory (the packets were requests
		 * that end in no completion of its own).  Other packets it
		 * left were there while it was preempted: its next poll takes
		 * them -- and so were such requests when its own polls took
		 * some since our last find (ib_write_lat's side polls its
		 * send CQ and takes the peer's WRITE with its ACK; armed
		 * after each WRITE we took while it was preempted, we woke
		 * for every datagram for target_ns, took more of them, and
		 * each waited for our wake-up on a CPU the application held:
		 * its 99th percentile). */
		if (p->app && (now - p->notify_seen < sv_tune.inline_ns ||
			       (silent && as == p->app_silent_seq)))
			p->last_found = now;
		p->app_silent_seq = as;
	}
	if ((uint64_t)n >= sv_tune.ring_batch)
		return POLICY_AGAIN;
	/* Spin only when nobody else drains: a spinning thread next to a
	 * polling application halves its CPU on a small machine.  Peers
	 * that see us spin send even a small one-sided request as a packet
	 * (sv_path.c): cheaper than their system call. */
	if (!p->app && now - p->last_work < p->spin_ns)
		return POLICY_SPIN;
	/* Armed (peers ring our doorbell) unless the application takes
	 * every packet itself: then a doorbell would cost more than the
	 * whole message, and we only look again now and then, for timers
	 * and in case it stops.  An application that polls a CQ but leaves
	 * us packets (it waits on its memory: a one-sided target) gets the
	 * doorbell: sooner than any nap on a machine where a timer wake-up
	 * takes tens of microseconds.  So does one that asked for an event
	 * lately (it sleeps between polls). */
	if (!p->app || now - p->last_found < sv_tune.target_ns ||
	    now - p->notify_seen < sv_tune.nap_max_ns) {
		p->nap = sv_tune.nap_ns;
		return POLICY_SLEEP_ARMED;
	}
	/* A nap after which there was nothing to do (no packet for us, no
	 * timer, nobody blocked) makes the next one twice as long, up to
	 * nap_max_ns: each look is a wake-up, which on a small machine takes
	 * the CPU from the application polling beside us (on 2 CPUs, 2,000
	 * naps a second preempted each side of an ib_send_lat between two
	 * namespaces as often, and doubled its 99th percentile).  What the
	 * looks are for: timers (their deadlines wake us anyway), and an
	 * application that stops polling without asking for an event (its
	 * packets wait until our next look). */
	p->nap = n ? sv_tune.nap_ns :
		     p->nap >= sv_tune.nap_max_ns / 2 ? sv_tune.nap_max_ns :
							2 * p->nap;
	return POLICY_NAP;
}

/* A sleep ended (timed out: nothing woke us). */
static void policy_woke(struct policy *p, int timed_out)
{
	p->last_work = sv_now_ns();
	if (timed_out)
		p->last_work -= p->spin_ns; /* a timeout: no spin */
}

/* Sleeps as step says (POLICY_NAP or POLICY_SLEEP_ARMED) after a pass
 * that took n records, until a doorbell, the engine socket, a deadline or
 * the nap's end; handles what woke it. */
static void sleep_once(struct sv_engine *eng, struct policy *p, uint64_t now,
		       int n, enum policy_step step)
{
	int armed = step == POLICY_SLEEP_ARMED, ready = 0, wsock, watch;
	/* Armed, packets and doorbells wake us: beside an application that
	 * polls, a look every nap_max_ns, or every nap_ns while streams are
	 * held (below).  A look every nap_ns while the application polls and
	 * waits on its memory (ib_write_lat's target) was thousands of
	 * wake-ups a second, each taking a polling application's CPU, and
	 * the woken thread then waited behind that application for the CPU
	 * when its packet came.  Not no look at all: then every deadline set
	 * meanwhile rings us -- the ACKs a poll keeps for the application's
	 * answer set one nap_max_ns away (eng_wire.c), and a ping-pong of
	 * SENDs (rsockets) then woke us once a message. */
	uint64_t tmo = !p->app ? UINT64_MAX :
		       armed	? sv_tune.nap_max_ns :
				  p->nap;
	struct epoll_event evs[4];
	struct timespec ts;

	if (armed) {
		arm_all(eng, 1, &ready);
		if (ready) {
			arm_all(eng, 0, &ready);
			if (!n) {
				/* Another thread (the application) holds the
				 * ring: let it run, we may have preempted it. */
				ts = (struct timespec){ 0, 1000 };
				nanosleep(&ts, NULL);
			}
			return;
		}
	}
	if (atomic_load(&eng->work) && tmo > 1000000)
		tmo = 1000000; /* blocked senders: poll gently */
	if (p->next_deadline &&
	    tmo > (p->next_deadline > now ? p->next_deadline - now : 0))
		tmo = p->next_deadline > now ? p->next_deadline - now : 0;
	/* Deadlines set from now on by other threads ring us when they are
	 * earlier than our wake-up (sv_eng_deadline); the scan after
	 * publishing closes the race with a setter that looked before. */
	atomic_store(&eng->sleep_until, tmo == UINT64_MAX ? UINT64_MAX : now + tmo);
	/* Streams held for an application that polls: its next poll runs
	 * them, but it may instead go on to wait on a completion channel
	 * (rping does), and only we run them then -- after a nap.  A stream
	 * held from now on while we sleep longer rings us (eng_qp.c): its
	 * look at sleep_until after setting deferred, ours at deferred after
	 * setting sleep_until, one sees the other. */
	if (tmo > p->nap && p->app && atomic_load(&eng->deferred)) {
		tmo = p->nap;
		atomic_store(&eng->sleep_until, now + tmo);
	}
	{
		int busy = 0;
		uint64_t d = sv_eng_scan_qps(eng, now,
					     sv_eng_app_polling(eng, now), &busy),
			 late = sv_fault_late_next(eng);

		if (late && (!d || late < d))
			d = late;
		/* Streams held since our last pass (sv_path.c): their post
		 * saw us awake and rang nobody (sv_eng_deadline), and the
		 * timers above do not hold them.  Due: run now and look
		 * again; else wake when they are.  Without this an
		 * application that posted a burst and then waited for an
		 * event (test_check's cq_overrun) waited for ever, one run
		 * in ten on a loaded machine. */
		if (atomic_load(&eng->deferred) && !sv_eng_app_polling(eng, now)) {
			uint64_t h = sv_eng_run_deferred(eng, now);

			if (!h || !d || h < d)
				d = h ? h : now;
		}

		if (d && (!p->next_deadline || d < p->next_deadline))
			p->next_deadline = d;
		if (d && (d <= now || d - now < tmo)) {
			tmo = d > now ? d - now : 0;
			atomic_store(&eng->sleep_until, d);
		}
	}
	ts = (struct timespec){ (time_t)(tmo / 1000000000u),
				(long)(tmo % 1000000000u) };
	/* Asleep armed: the wire's port wakes us too (one waiter of the
	 * namespace per datagram).  Napping beside an application that
	 * polls, once the port has been quiet for wire_watch_ns: we wait on
	 * it too, and the application's polls leave it alone meanwhile
	 * (eng_inbound.c wire_rx_begin).  Its polls read an empty port
	 * every wire_quiet_rest_ns otherwise, each read a system call:
	 * beside UCX's ud_verbs QPs, which keep the port open on one host,
	 * an eighth of a CPU, and ucx_perftest tag_lat's average on one
	 * host went from 1.06-1.22 us to 0.90-0.94 without them.  Not right
	 * after a datagram woke us: the application takes it first. */
	watch = !armed && p->app && !p->wire_woke &&
		now - atomic_load(&eng->wire_last_rx) >= sv_tune.wire_watch_ns;
	wsock = armed || watch ? __atomic_load_n(&eng->wire_sock, __ATOMIC_ACQUIRE) :
				 -1;
	if (!p->app)
		atomic_store(&eng->idle_armed, 1);
	if (!armed) {
		atomic_store(&eng->napping, 1);
		if (atomic_load(&eng->notify_seq) != p->notify_seq) {
			/* It asked for an event meanwhile: decide again. */
			atomic_store(&eng->napping, 0);
			atomic_store(&eng->sleep_until, 0);
			return;
		}
	}
	if (wsock >= 0) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE,
					  .data.fd = wsock };

		if (epoll_ctl(eng->epfd, EPOLL_CTL_ADD, wsock, &ev) < 0)
			wsock = -1;
		else if (watch)
			atomic_store(&eng->wire_watched, 1);
	}
	n = epoll_pwait2(eng->epfd, evs, 4, tmo == UINT64_MAX ? NULL : &ts,
			 NULL);
	if (wsock >= 0) {
		atomic_store(&eng->wire_watched, 0);
		epoll_ctl(eng->epfd, EPOLL_CTL_DEL, wsock, NULL);
		atomic_store(&eng->wire_idle_until, 0);
	}
	p->wire_woke = 0;
	atomic_store(&eng->sleep_until, 0);
	atomic_store(&eng->idle_armed, 0);
	atomic_store(&eng->napping, 0);
	if (armed)
		arm_all(eng, 0, &ready);
	policy_woke(p, n <= 0);
	for (int i = 0; i < n; i++) {
		int fd = evs[i].data.fd;
		uint64_t v;

		if (fd == eng->doorbell || fd == eng->stopfd) {
			if (read(fd, &v, sizeof(v)) < 0)
				continue;
		} else if (fd == eng->sock) {
			sock_readable(eng);
		} else if (fd == wsock) {
			p->wire_woke = 1;
		}
	}
}

void *sv_progress_main(void *arg)
{
	struct sv_engine *eng = arg;
	struct policy pol;
	uint64_t sock_look = 0;

	pthread_once(&spin_once, spin_init);
	/* Named, for top -H, perf and the tests (tests/integration/
	 * test_engine_rc.c finds it by this name). */
	pthread_setname_np(pthread_self(), "sv-progress");
	policy_init(&pol, eng, sv_now_ns());
	atomic_store(&eng->thread_tid, (unsigned)syscall(SYS_gettid));
	while (!atomic_load(&eng->stop)) {
		uint64_t now = sv_now_ns();
		enum policy_step step;
		int n, busy = 0, silent = 0, port;

		sv_cap_prepare(eng);
		/* An application in a polling loop drains right now: keep
		 * off its rings (a thread preempted with a ring lock held
		 * stalls it for a time slice).  One that takes every packet
		 * itself (we napped beside it) and polled within inline_ns
		 * keeps the namespace's port too: we drain only our rings.
		 * Such a look comes while the application is preempted, and
		 * one that took the port was often preempted in turn with
		 * it held (one reader at a time, sv_wire.h): 1-4 ms in which
		 * the application, running again, could not read its own
		 * packets.  An MPI_Allreduce of 8 B between two namespaces
		 * averaged 20-26 us so, its median 11-14.  The packets wait
		 * for its next poll, or for the daemon's thread (after
		 * SV_WIRE_HANDOFF_NS without a reader) and our next look;
		 * once it has not polled for inline_ns we sleep armed and
		 * read the port again. */
		port = !pol.napped || now - atomic_load(&eng->last_inline) >=
					      sv_tune.inline_ns;
		n = sv_eng_app_polling(eng, now) ?
			    0 :
			    sv_eng_drain_all(eng, now, NULL, &silent, port);
		if (policy_scan_due(&pol, eng, now, n)) {
			uint64_t d;

			pol.next_deadline = sv_eng_scan_qps(
				eng, now, sv_eng_app_polling(eng, now), &busy);
			pol.last_scan = now;
			/* Held streams: an application that polls runs them
			 * at its next poll, all together; else we do. */
			d = sv_eng_app_polling(eng, now) ? 0 :
						  sv_eng_run_deferred(eng, now);
			if (d && (!pol.next_deadline || d < pol.next_deadline))
				pol.next_deadline = d;
		}
		if (busy)
			atomic_store(&eng->work, 1);
		if (__atomic_load_n(&sv_fault_pending, __ATOMIC_RELAXED))
			sv_fault_drain(eng); /* before: it queues events */
		sv_fault_late_run(eng, now); /* delay plans' packets */
		/* The engine socket wakes a sleeping thread; one that never
		 * sleeps (its application polls all the time) reads it every
		 * millisecond, so what the daemon pushes (a fault plan) is
		 * not left waiting for a pause. */
		if (now - sock_look >= 1000000 && !atomic_load(&eng->device_gone)) {
			sock_look = now;
			sock_readable(eng);
		}
		/* A look without async_lock; the drain takes it. */
		if (__atomic_load_n(&eng->async_head, __ATOMIC_RELAXED))
			sv_eng_async_drain(eng);
		/* ACKs an application's poll left for its next call. */
		sv_wire_flush(eng);
		step = policy_decide(&pol, eng, now, n, silent);
		if (step == POLICY_AGAIN)
			continue;
		if (step == POLICY_SPIN) {
			if (!pol.spinning)
				spin_all(eng, pol.spinning = 1);
			cpu_relax();
			continue;
		}
		if (pol.spinning)
			spin_all(eng, pol.spinning = 0);
		pol.napped = step == POLICY_NAP;
		sleep_once(eng, &pol, now, n, step);
	}
	if (pol.spinning)
		spin_all(eng, 0);
	sv_fault_drain(eng); /* firings not yet in the daemon's log */
	sv_eng_async_drain(eng);
	return NULL;
}

void sv_engine_take_arrived(struct sv_engine *eng)
{
	int contended;

	if (!eng || !eng->attached || sv_trylock_read(&eng->attach_lock, SV_LOCK_ATTACH))
		return;
	/* A peer's first packets can be in a ring we do not know yet: the
	 * daemon hands it to us (SV_ENGINE_LINK_NEW) and its producer writes
	 * at once.  The message may still be in the socket, or the progress
	 * thread mapping the ring: read the socket, or wait for it to finish
	 * (test_engine_err ack_in_ring_taken_before_err lost its ACK so). */
	sock_readable(eng);
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
		    (sv_eng_drain_all(eng, 0, &contended, NULL, 1) <= 0 && !contended))
			break;
		if (contended) {
			sv_lock_write(&eng->qp_lock, SV_LOCK_QPTAB);
			sv_unlock_rw(&eng->qp_lock);
		}
	}
	/* A drain that emptied the rings before ours may still be sending
	 * its ACKs. */
	sv_lock_write(&eng->qp_lock, SV_LOCK_QPTAB);
	sv_unlock_rw(&eng->qp_lock);
	sv_unlock_rw(&eng->attach_lock);
}

static __thread unsigned contended_polls;

void sv_engine_progress(struct sv_engine *eng)
{
	int contended = 0, silent = 0;
	uint64_t now;

	if (!eng || !eng->attached || sv_trylock_read(&eng->attach_lock, SV_LOCK_ATTACH))
		return;
	now = sv_now_ns();
	atomic_store_explicit(&eng->last_inline, now, memory_order_relaxed);
	if (eng->attached) {
		sv_cap_prepare(eng);
		/* ACKs the last poll kept (they met no answer in
		 * wire_ack_hold_ns). */
		sv_wire_flush_polled(eng);
		/* The application polls: what it posted in a burst runs now. */
		if (atomic_load_explicit(&eng->deferred, memory_order_relaxed))
			sv_eng_run_deferred(eng, 0);
		sv_wire_hold_acks(1);
		sv_eng_drain_all(eng, now, &contended, &silent, 1);
		sv_wire_hold_acks(0);
		if (silent)
			atomic_fetch_add_explicit(&eng->app_silent_seq, 1,
						  memory_order_relaxed);
		if (atomic_load_explicit(&eng->work, memory_order_relaxed)) {
			int busy = 0;

			sv_eng_scan_qps(eng, sv_now_ns(), 0, &busy);
		}
	}
	sv_unlock_rw(&eng->attach_lock);
	/* A ring with packets held by another thread of ours: mostly the
	 * progress thread busy on the other CPU, which is done in a moment
	 * (the application polls again anyway).  Only when that goes on
	 * poll after poll may the holder be preempted on our CPU: then let
	 * it finish.  (A yield is a system call: microseconds on a VM.) */
	if (!contended)
		contended_polls = 0;
	else if (++contended_polls >= sv_tune.contended_polls) {
		contended_polls = 0;
		sched_yield();
	}
}

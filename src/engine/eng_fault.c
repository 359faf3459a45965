/* SPDX-License-Identifier: MIT */
/*
 * Fault plans in the library (docs/faults.md; the grammar is sv_fault.h).
 * A plan targets one object and makes it fail the way hardware or a
 * fabric would, deterministically:
 *
 *   - packets (drop/dup/reorder): the packets a QP sends -- requests,
 *     ACKs, READ responses -- are lost, doubled or held behind the next
 *     one, as they leave through a link (eng_link.c fault_commit) or the
 *     wire (eng_wire.c).  A QP a packet plan targets never executes
 *     directly (sv_path.c asks sv_fault_packets), so the plan sees every
 *     request it sends, on one host too;
 *   - status: a send WQE that would retire with success retires with the
 *     plan's status instead (sv_comp.c sv_comp_retire), which moves the QP
 *     to ERR and flushes what follows, as any error there does.  Its QP
 *     sends packets too: direct execution retires a WQE holding the
 *     target's responder lock, where no error is ever decided (sv_lock.h
 *     would not let the move to ERR take our own);
 *   - event: an async event on the QP, its send CQ, port 1 or the device,
 *     with the state change it implies (QP_FATAL, QP_REQ_ERR,
 *     QP_ACCESS_ERR: the QP to ERR; DEVICE_FATAL: every QP to ERR);
 *   - verb: the n-th call of a verb fails with the plan's errno before it
 *     changes anything.
 *
 * Plans come from SOFTVERBS_FAULT (read at the first verb that can fail,
 * or the first QP) or from the daemon (`softverbs fault add`: the daemon
 * pushes SV_ENGINE_FAULT, the progress thread asks for the list,
 * sv_fault_sync).  They live in a fixed table of slots that are never
 * reused, so the hooks read them without a lock: a slot is filled, then
 * published (live = 1, release); clearing sets live = 0.
 *
 * Determinism.  Each plan counts what it sees (packets, calls, successful
 * completions) with an atomic counter; the k-th is decided by nth= and by
 * a draw that hashes (seed, the plan's text, k) (sv_fault_draw), never by
 * a shared generator, so the same seed makes the same decisions for the
 * same sequence whatever the other plans and threads do.
 *
 * Every firing writes one line to stderr ("softverbs-fault: ...") and
 * sends it to the daemon's log: at once for verbs (no lock held there),
 * through a small queue the progress thread drains (sv_fault_drain) for
 * the hooks that run under the data path's locks.  Events are raised from
 * that drain too, with no lock held.  The queue's lock (qlock, a spin on
 * an atomic flag) is a leaf taken under any of the engine's locks.
 */
#include "engine_int.h"
#include "eng_fault.h"
#include "sv_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SLOTS 64   /* plans a process holds in its life */
#define ORDS 256   /* qp=#K: the first ORDS QPs are numbered */
#define QLINES 32  /* log lines waiting for the daemon */
#define QEVENTS 16 /* events waiting for the progress thread */
#define NONE 0xfffffffeu /* qp=#K not created yet: matches nothing */

struct slot {
	int live;		/* atomic: the plan acts */
	struct sv_fault_plan p;
	uint32_t qpn;		/* the QP it names (qp=#K resolved), NONE, or
				   SV_FAULT_ANY (every QP) */
	uint32_t dst;		/* that QP's remote QPN; SV_FAULT_ANY unknown */
	uint64_t seed, salt;
	uint64_t seen, fired;	/* atomics */
};

static struct slot slots[SLOTS];
static int nslots; /* slots used, never fewer: atomic */
int sv_fault_nverb = -1, sv_fault_npkt, sv_fault_ncomp, sv_fault_pending;
static uint32_t ords[ORDS], nords;
static uint64_t list_seed;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static struct {
	atomic_flag lock;
	char line[QLINES][320];
	unsigned nline;
	struct {
		int slot;
		uint32_t qpn;
	} ev[QEVENTS];
	unsigned nev;
} q = { .lock = ATOMIC_FLAG_INIT };

static void qlock(void)
{
	while (atomic_flag_test_and_set_explicit(&q.lock, memory_order_acquire))
		;
}

static void qunlock(void)
{
	atomic_flag_clear_explicit(&q.lock, memory_order_release);
}

static int *counter(uint32_t kind)
{
	switch (kind) {
	case SV_FK_VERB:
		return &sv_fault_nverb;
	case SV_FK_PACKET:
		return &sv_fault_npkt;
	case SV_FK_STATUS:
	case SV_FK_EVENT:
		return &sv_fault_ncomp;
	}
	return NULL;
}

static int nused(void)
{
	return __atomic_load_n(&nslots, __ATOMIC_ACQUIRE);
}

static int live(const struct slot *s)
{
	return __atomic_load_n(&s->live, __ATOMIC_ACQUIRE);
}

/* --------------------------------------------------------- logging -- */

/* One line on stderr, and (queue 1) for the daemon's log. */
static void fire_log(const struct slot *s, int queue, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fire_log(const struct slot *s, int queue, const char *fmt, ...)
{
	char what[96], line[sizeof(q.line[0])];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (s->p.id)
		snprintf(line, sizeof(line), "plan %u '%.159s' seed %llu: %.95s",
			 s->p.id, s->p.text, (unsigned long long)s->seed, what);
	else
		snprintf(line, sizeof(line), "plan '%.159s' seed %llu: %.95s",
			 s->p.text, (unsigned long long)s->seed, what);
	n = dprintf(STDERR_FILENO, "softverbs-fault: pid %d %s\n", (int)getpid(),
		    line);
	(void)n;
	if (!queue) {
		struct sv_fault_req req = { .cmd = SV_FAULT_LOG };
		uint64_t inst;
		int err;

		snprintf(req.text, sizeof(req.text), "%.255s", line);
		inst = sv_chan_instance(&err);
		if (inst)
			sv_call_simple(SV_OP_FAULT, 0, inst, -1, &req,
				       sizeof(req), NULL, 0);
		return;
	}
	qlock();
	if (q.nline < QLINES)
		memcpy(q.line[q.nline++], line, sizeof(line));
	qunlock();
	__atomic_store_n(&sv_fault_pending, 1, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------- plans -- */

static uint32_t ord_qpn(uint32_t k)
{
	if (k == 0 || k > __atomic_load_n(&nords, __ATOMIC_ACQUIRE) || k > ORDS)
		return NONE;
	return ords[k - 1];
}

static void publish(int i)
{
	__atomic_store_n(&slots[i].live, 1, __ATOMIC_RELEASE);
	__atomic_fetch_add(counter(slots[i].p.kind), 1, __ATOMIC_RELEASE);
}

/* Fills a slot for plan p, not acting yet: its index, or -ENOSPC. */
static int reserve(const struct sv_fault_plan *p)
{
	struct slot *s;
	int i;

	i = __atomic_fetch_add(&nslots, 0, __ATOMIC_RELAXED);
	do {
		if (i >= SLOTS)
			return -ENOSPC;
	} while (!__atomic_compare_exchange_n(&nslots, &i, i + 1, 0,
					      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	s = &slots[i];
	s->p = *p;
	s->qpn = p->has_gid ? NONE : p->qp_ord ? ord_qpn(p->qp_ord) : p->qpn;
	s->dst = SV_FAULT_ANY;
	s->seed = p->has_seed ? p->seed : list_seed;
	/* The plan's text, not its slot or number: the same plan draws the
	 * same from the environment or from `softverbs fault add`. */
	s->salt = 0xcbf29ce484222325ull;
	for (const char *c = p->text; *c; c++)
		s->salt = (s->salt ^ (uint8_t)*c) * 0x100000001b3ull;
	return i;
}

/* Publishes a plan: 0 or -ENOSPC.  Seed plans only set the list's seed. */
static int add_plan(const struct sv_fault_plan *p)
{
	int i;

	if (p->kind == SV_FK_SEED) {
		list_seed = p->seed;
		return 0;
	}
	i = reserve(p);
	if (i < 0)
		return i;
	publish(i);
	return 0;
}

static void clear_slot(struct slot *s)
{
	int one = 1;

	if (__atomic_compare_exchange_n(&s->live, &one, 0, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_RELAXED))
		__atomic_fetch_sub(counter(s->p.kind), 1, __ATOMIC_RELEASE);
}

/* SOFTVERBS_FAULT: ';'-separated plans; segments without '=' are the
 * process-wide items others read (eng_link.c, mr.c, ...).  The seed=N
 * plans first, so the order does not matter. */
static void env_read(void)
{
	const char *env = getenv("SOFTVERBS_FAULT");
	int nverb = 0;

	for (int pass = 0; env && pass < 2; pass++) {
		const char *s = env;

		while (*s) {
			size_t len = strcspn(s, ";");
			struct sv_fault_plan p;
			char why[128];

			if (sv_fault_is_plan(s, len)) {
				if (sv_fault_parse(s, len, &p, why, sizeof(why)))
					pass ? (void)0 :
					       (void)dprintf(STDERR_FILENO,
							     "softverbs-fault: SOFTVERBS_FAULT: "
							     "'%.*s': %s (ignored)\n",
							     (int)len, s, why);
				else if ((p.kind == SV_FK_SEED) == !pass &&
					 add_plan(&p))
					dprintf(STDERR_FILENO,
						"softverbs-fault: more than %d plans\n",
						SLOTS);
			}
			s += len;
			if (*s)
				s++;
		}
	}
	for (int i = 0; i < nused(); i++)
		if (slots[i].p.kind == SV_FK_VERB)
			nverb++;
	/* -1 (unread) becomes the count of verb plans. */
	__atomic_store_n(&sv_fault_nverb, nverb, __ATOMIC_RELEASE);
}

static void env_init(void)
{
	pthread_once(&env_once, env_read);
}

/* gid=G[,peer=N]: the first QP connected to G (and N) becomes the QP the
 * plan names. */
static void resolve_gid(struct slot *s, const struct sv_qp *qp)
{
	uint32_t none = NONE;

	if (!s->p.has_gid || __atomic_load_n(&s->qpn, __ATOMIC_ACQUIRE) != NONE ||
	    memcmp(qp->dgid.raw, s->p.gid, 16) ||
	    (s->p.peer != SV_FAULT_ANY && s->p.peer != qp->shm->dest_qpn))
		return;
	__atomic_compare_exchange_n(&s->qpn, &none, qp->qpx.qp_base.qp_num, 0,
				    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* Whether plan s names QP qpn whose remote QP is dest. */
static int names_qp(const struct slot *s, uint32_t qpn, uint32_t dest)
{
	uint32_t t = __atomic_load_n(&s->qpn, __ATOMIC_ACQUIRE);

	if (t != SV_FAULT_ANY && t != qpn)
		return 0;
	return s->p.peer == SV_FAULT_ANY || s->p.peer == dest;
}

/* ----------------------------------------------------------- verbs -- */

int sv_fault_verb_slow(int verb)
{
	env_init();
	if (!__atomic_load_n(&sv_fault_nverb, __ATOMIC_ACQUIRE))
		return 0;
	for (int i = 0; i < nused(); i++) {
		struct slot *s = &slots[i];
		uint64_t k;

		if (!live(s) || s->p.kind != SV_FK_VERB || s->p.verb != verb)
			continue;
		k = __atomic_add_fetch(&s->seen, 1, __ATOMIC_RELAXED);
		if (!sv_fault_in_range(&s->p, k))
			continue;
		__atomic_add_fetch(&s->fired, 1, __ATOMIC_RELAXED);
		fire_log(s, 0, "%s call %llu fails with %s", sv_fault_verb_name(verb),
			 (unsigned long long)k, sv_fault_errno_name(s->p.err));
		errno = s->p.err;
		return s->p.err;
	}
	return 0;
}

/* --------------------------------------------------------- packets -- */

int sv_fault_packet_slow(const uint8_t *bth, uint32_t len, uint64_t *delay_ns)
{
	uint32_t dqp, sqp = SV_FAULT_ANY, psn;
	uint8_t op;

	if (len < 12)
		return SV_FP_NONE;
	op = bth[0];
	dqp = (uint32_t)bth[5] << 16 | (uint32_t)bth[6] << 8 | bth[7];
	psn = (uint32_t)bth[9] << 16 | (uint32_t)bth[10] << 8 | bth[11];
	/* UD (transport 011): the DETH after the BTH names the sender. */
	if ((op >> 5) == 3 && len >= 20)
		sqp = (uint32_t)bth[17] << 16 | (uint32_t)bth[18] << 8 | bth[19];
	for (int i = 0; i < nused(); i++) {
		struct slot *s = &slots[i];
		uint32_t t;
		uint64_t k;

		if (!live(s) || s->p.kind != SV_FK_PACKET ||
		    (s->p.pkt == SV_FP_DELAY && !delay_ns))
			continue;
		if (s->p.peer != SV_FAULT_ANY && s->p.peer != dqp)
			continue;
		t = __atomic_load_n(&s->qpn, __ATOMIC_ACQUIRE);
		if (t != SV_FAULT_ANY &&
		    (sqp != SV_FAULT_ANY ?
			     sqp != t :
			     __atomic_load_n(&s->dst, __ATOMIC_ACQUIRE) != dqp))
			continue;
		k = __atomic_add_fetch(&s->seen, 1, __ATOMIC_RELAXED);
		if (!sv_fault_in_range(&s->p, k) ||
		    (s->p.p < 1 && sv_fault_draw(s->seed, s->salt, k) >= s->p.p))
			continue;
		__atomic_add_fetch(&s->fired, 1, __ATOMIC_RELAXED);
		if (s->p.pkt == SV_FP_DELAY) {
			*delay_ns = s->p.delay_ns;
			fire_log(s, 1, "packet %llu (opcode 0x%02x psn %u to QP "
				 "0x%06x) delayed %llu us",
				 (unsigned long long)k, op, psn, dqp,
				 (unsigned long long)(s->p.delay_ns / 1000));
			return SV_FP_DELAY;
		}
		fire_log(s, 1, "packet %llu (opcode 0x%02x psn %u to QP 0x%06x) %s",
			 (unsigned long long)k, op, psn, dqp,
			 s->p.pkt == SV_FP_DROP ? "dropped" :
			 s->p.pkt == SV_FP_DUP	? "duplicated" :
						  "held behind the next");
		return (int)s->p.pkt;
	}
	return SV_FP_NONE;
}

/*
 * Delayed packets: copies in one list of the process, in due order (a
 * plan's few), under late_lock -- a leaf like qlock, taken under a link's
 * tx lock.  Each names its engine (pointer and id: a later engine may
 * have the address) and where it goes: the ring to a peer engine (a
 * record), or the wire (a datagram, on a duplicate of its socket: the QP
 * that owned the socket may be gone when it is due).  The progress
 * thread sends it when due, past the fault model (it was counted when
 * held).
 */
struct late {
	struct late *next;
	struct sv_engine *eng;
	uint32_t eng_id, peer, type, len;
	uint64_t due;
	int fd; /* -1: a ring record; else a datagram's socket */
	struct sockaddr_in6 dst;
	uint32_t ctl_len; /* its ancillary data, after rec */
	uint8_t rec[];
};

static void late_insert(struct late *d);

static struct late *late_head;
static atomic_flag late_flag = ATOMIC_FLAG_INIT;

static void late_lock(void)
{
	while (atomic_flag_test_and_set_explicit(&late_flag,
						 memory_order_acquire))
		;
}

static void late_unlock(void)
{
	atomic_flag_clear_explicit(&late_flag, memory_order_release);
}

int sv_fault_late_add(struct sv_link *l, const uint8_t *rec, uint32_t len,
		      uint32_t type, uint64_t delay_ns)
{
	struct late *d = malloc(sizeof(*d) + len);

	if (!d)
		return -ENOMEM;
	d->eng = l->eng;
	d->eng_id = l->eng->id;
	d->peer = l->peer_id;
	d->type = type;
	d->len = len;
	d->fd = -1;
	d->ctl_len = 0;
	d->due = sv_now_ns() + delay_ns;
	memcpy(d->rec, rec, len);
	late_insert(d);
	return 0;
}

int sv_fault_late_dgram(struct sv_engine *eng, int fd,
			const struct sockaddr_in6 *dst, const void *ctl,
			uint32_t ctl_len, const uint8_t *pkt, uint32_t len,
			uint64_t delay_ns)
{
	struct late *d = malloc(sizeof(*d) + len + ctl_len);

	if (!d)
		return -ENOMEM;
	d->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (d->fd < 0) {
		int err = -errno;

		free(d);
		return err;
	}
	d->eng = eng;
	d->eng_id = eng->id;
	d->peer = 0;
	d->type = 0;
	d->len = len;
	d->dst = *dst;
	d->ctl_len = ctl_len;
	d->due = sv_now_ns() + delay_ns;
	memcpy(d->rec, pkt, len);
	memcpy(d->rec + len, ctl, ctl_len);
	late_insert(d);
	return 0;
}

/* Into the list in due order, and the engine's thread told. */
static void late_insert(struct late *d)
{
	struct late **at;

	late_lock();
	for (at = &late_head; *at && (*at)->due <= d->due; at = &(*at)->next)
		;
	d->next = *at;
	*at = d;
	late_unlock();
	sv_eng_deadline(d->eng, d->due);
}

/* A held datagram goes out (lost if the socket refuses it now, as on a
 * fabric). */
static void late_send(struct late *d)
{
	struct iovec iov = { d->rec, d->len };
	struct msghdr mh = {
		.msg_name = &d->dst,
		.msg_namelen = d->dst.sin6_family == AF_INET6 ?
				       sizeof(struct sockaddr_in6) :
				       sizeof(struct sockaddr_in),
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = d->ctl_len ? d->rec + d->len : NULL,
		.msg_controllen = d->ctl_len,
	};

	if (sendmsg(d->fd, &mh, MSG_DONTWAIT) < 0)
		sv_dbg("fault: a delayed datagram could not go: %s",
		       strerror(errno));
	close(d->fd);
}

uint64_t sv_fault_late_next(struct sv_engine *eng)
{
	uint64_t due = 0;

	if (!__atomic_load_n(&late_head, __ATOMIC_RELAXED))
		return 0;
	late_lock();
	for (struct late *d = late_head; d; d = d->next)
		if (d->eng == eng && d->eng_id == eng->id) {
			due = d->due;
			break;
		}
	late_unlock();
	return due;
}

void sv_fault_late_run(struct sv_engine *eng, uint64_t now)
{
	struct late *due = NULL, **tail = &due, **at;

	if (!__atomic_load_n(&late_head, __ATOMIC_RELAXED))
		return;
	late_lock();
	for (at = &late_head; *at;) {
		struct late *d = *at;

		if (d->due > now)
			break;
		if (d->eng != eng || d->eng_id != eng->id) {
			at = &d->next;
			continue;
		}
		*at = d->next;
		d->next = NULL;
		*tail = d;
		tail = &d->next;
	}
	late_unlock();
	while (due) {
		struct late *d = due;
		struct sv_link *l;
		uint8_t *r;
		int ring = 0;

		due = d->next;
		if (d->fd >= 0) {
			late_send(d);
			free(d);
			continue;
		}
		sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
		l = eng->attached ? sv_link_get(eng, d->peer) : NULL;
		sv_unlock_mutex(&eng->lock);
		if (l && !atomic_load_explicit(&l->dead, memory_order_relaxed)) {
			/* Lost if the ring is full, as on a fabric. */
			sv_lock_spin(&l->tx_lock, SV_LOCK_TX);
			r = sv_ring_reserve(&l->tx, d->len, d->type);
			if (r) {
				memcpy(r, d->rec, d->len);
				ring = sv_ring_commit(&l->tx);
			}
			sv_unlock_spin(&l->tx_lock);
			if (ring)
				sv_link_ring(l);
		}
		free(d);
	}
	now = sv_fault_late_next(eng);
	if (now)
		sv_eng_deadline(eng, now);
}

int sv_fault_packets_slow(const struct sv_qp *qp)
{
	for (int i = 0; i < nused(); i++) {
		const struct slot *s = &slots[i];

		if (live(s) &&
		    (s->p.kind == SV_FK_PACKET ||
		     (s->p.kind == SV_FK_STATUS && !s->p.recv)) &&
		    names_qp(s, qp->qpx.qp_base.qp_num, qp->shm->dest_qpn))
			return 1;
	}
	return 0;
}

/* ----------------------------------------------- completions, events -- */

static void queue_event(struct sv_engine *eng, int slot, uint32_t qpn)
{
	qlock();
	if (q.nev < QEVENTS) {
		q.ev[q.nev].slot = slot;
		q.ev[q.nev].qpn = qpn;
		q.nev++;
	}
	qunlock();
	__atomic_store_n(&sv_fault_pending, 1, __ATOMIC_RELEASE);
	sv_eng_want_work(eng);
}

/* Fires event plan i once: 1 when this call won. */
static int event_once(struct slot *s)
{
	uint64_t zero = 0;

	return __atomic_compare_exchange_n(&s->fired, &zero, 1, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

enum ibv_wc_status sv_fault_wc_slow(struct sv_qp *qp, enum ibv_wc_status st)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num, dest = qp->shm->dest_qpn;
	enum ibv_wc_status out = st;

	if (st != IBV_WC_SUCCESS)
		return st;
	for (int i = 0; i < nused(); i++) {
		struct slot *s = &slots[i];
		uint64_t k;

		if (!live(s) || (s->p.kind != SV_FK_STATUS &&
				 (s->p.kind != SV_FK_EVENT || !s->p.after)) ||
		    s->p.recv || !names_qp(s, qpn, dest))
			continue;
		k = __atomic_add_fetch(&s->seen, 1, __ATOMIC_RELAXED);
		if (s->p.kind == SV_FK_EVENT) {
			if (k == s->p.after && event_once(s))
				queue_event(qp->eng, i, qpn);
			continue;
		}
		if (out != IBV_WC_SUCCESS || k <= s->p.after ||
		    __atomic_fetch_add(&s->fired, 1, __ATOMIC_RELAXED) >=
			    s->p.count)
			continue;
		out = (enum ibv_wc_status)s->p.status;
		fire_log(s, 1, "QP 0x%06x send completion %llu: %s, the QP to ERR",
			 qpn, (unsigned long long)k, sv_fault_status_name(out));
	}
	if (out == st)
		return out;
	/* What finished after it (direct batches) flushes as hardware's
	 * would: an error ends the queue (sv_engine_flush keeps the status
	 * of a finished WQE).  The receive queue flushes too: the progress
	 * thread's scan acts on SV_QEV_FLUSH. */
	for (uint32_t i = qp->sq.head + 1; i != qp->sq.next; i++) {
		struct sv_send_wqe *w = sv_wq_slot(&qp->sq, i);

		if (WQE_STATE(w) == WQE_DONE)
			sv_wqe_done(w, IBV_WC_WR_FLUSH_ERR);
	}
	atomic_fetch_or(&qp->shm->events, SV_QEV_FLUSH);
	sv_eng_want_work(qp->eng);
	return out;
}

/* Moves qp to ERR and has its queues flushed, as a catastrophic error
 * does.  Must hold qp_lock (read). */
static void qp_to_err(struct sv_qp *qp)
{
	sv_lock_shm(&qp->shm->lock, SV_LOCK_RESP);
	if (qp->shm->state != IBV_QPS_RESET)
		sv_qshm_set_err(qp->shm);
	sv_unlock_shm(&qp->shm->lock);
	atomic_fetch_or(&qp->shm->events, SV_QEV_FLUSH);
	sv_qp_owner_events(qp);
}

/* One polled receive completion of qp: a recv plan's status when it
 * fires (the QP to ERR, as a receive error does on a NIC), flushed when
 * an earlier firing left the QP in ERR and this success was already in
 * the CQ.  Must hold qp_lock (read).  1 when it fired. */
static int recv_polled(struct sv_qp *qp, struct ibv_wc *wc)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num, dest = qp->shm->dest_qpn;
	enum ibv_wc_status out = IBV_WC_SUCCESS;
	int fired_before = 0;

	for (int i = 0; i < nused(); i++) {
		struct slot *s = &slots[i];
		uint64_t k;

		if (!live(s) || s->p.kind != SV_FK_STATUS || !s->p.recv ||
		    !names_qp(s, qpn, dest))
			continue;
		if (__atomic_load_n(&s->fired, __ATOMIC_RELAXED))
			fired_before = 1;
		k = __atomic_add_fetch(&s->seen, 1, __ATOMIC_RELAXED);
		if (out != IBV_WC_SUCCESS || k <= s->p.after ||
		    __atomic_fetch_add(&s->fired, 1, __ATOMIC_RELAXED) >=
			    s->p.count)
			continue;
		out = (enum ibv_wc_status)s->p.status;
		fire_log(s, 1, "QP 0x%06x receive completion %llu: %s, the QP "
			 "to ERR", qpn, (unsigned long long)k,
			 sv_fault_status_name(out));
	}
	if (out == IBV_WC_SUCCESS && fired_before &&
	    sv_qp_state(qp) == IBV_QPS_ERR)
		out = IBV_WC_WR_FLUSH_ERR;
	if (out == IBV_WC_SUCCESS)
		return 0;
	/* An error completion: wr_id, status, qp_num and vendor_err are
	 * all it says (ibv_poll_cq(3)). */
	*wc = (struct ibv_wc){ .wr_id = wc->wr_id, .status = out,
			       .opcode = wc->opcode, .qp_num = wc->qp_num };
	if (out == IBV_WC_WR_FLUSH_ERR)
		return 0;
	qp_to_err(qp);
	return 1;
}

void sv_fault_polled_slow(struct sv_engine *eng, struct ibv_wc *wc, int n)
{
	int fired = 0;

	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	for (int i = 0; i < n; i++) {
		struct sv_qp *qp;

		if (!(wc[i].opcode & IBV_WC_RECV) ||
		    wc[i].status != IBV_WC_SUCCESS)
			continue;
		qp = sv_eng_qp(eng, wc[i].qp_num);
		if (qp)
			fired |= recv_polled(qp, &wc[i]);
	}
	sv_unlock_rw(&eng->qp_lock);
	if (fired)
		sv_eng_want_work(eng); /* its log line (fire_log queued it) */
}

/* Raises plan s's event on QP qpn, the one that triggered it (nothing
 * when it is gone since).  No lock held. */
static void raise_event(struct sv_engine *eng, struct slot *s, uint32_t qpn)
{
	int ev = s->p.event, elem = sv_fault_event_elem(ev);
	struct sv_qp *qp;

	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	qp = sv_eng_qp(eng, qpn);
	if (!qp) {
		sv_unlock_rw(&eng->qp_lock);
		return;
	}
	qpn = qp->qpx.qp_base.qp_num;
	switch (elem) {
	case SV_FE_QP:
		if (ev == IBV_EVENT_QP_FATAL || ev == IBV_EVENT_QP_REQ_ERR ||
		    ev == IBV_EVENT_QP_ACCESS_ERR)
			qp_to_err(qp);
		sv_eng_async(eng, &qp->cref, (enum ibv_event_type)ev,
			     &qp->qpx.qp_base);
		break;
	case SV_FE_CQ:
		if (qp->scq) /* (an XRC TGT QP has none) */
			sv_eng_async(eng, &qp->scq->cref,
				     (enum ibv_event_type)ev,
				     ibv_cq_ex_to_cq(&qp->scq->ex));
		break;
	case SV_FE_PORT:
		sv_eng_async(eng, &qp->cref, (enum ibv_event_type)ev,
			     (void *)(uintptr_t)1);
		break;
	default:
		/* A device that died: every QP errors and flushes, and each
		 * context of ours hears it once. */
		for (uint32_t i = 0; i < eng->qcap; i++) {
			struct sv_qp *o = eng->qtab[i].qp;
			int seen = 0;

			if (!o)
				continue;
			qp_to_err(o);
			for (uint32_t j = 0; j < i; j++)
				if (eng->qtab[j].qp &&
				    eng->qtab[j].qp->cref.ctx == o->cref.ctx)
					seen = 1;
			if (!seen)
				sv_eng_async(eng, &o->cref, IBV_EVENT_DEVICE_FATAL,
					     NULL);
		}
		break;
	}
	sv_unlock_rw(&eng->qp_lock);
	fire_log(s, 1, "%s raised (QP 0x%06x)", sv_fault_event_name(ev), qpn);
	sv_eng_want_work(eng);
}

/* ----------------------------------------------------- QP life -- */

void sv_fault_qp_added(struct sv_qp *qp)
{
	uint32_t k, qpn = qp->qpx.qp_base.qp_num;

	env_init();
	k = __atomic_add_fetch(&nords, 0, __ATOMIC_RELAXED);
	if (k >= ORDS)
		return;
	ords[k] = qpn;
	__atomic_store_n(&nords, k + 1, __ATOMIC_RELEASE);
	for (int i = 0; i < nused(); i++)
		if (slots[i].p.qp_ord == k + 1)
			__atomic_store_n(&slots[i].qpn, qpn, __ATOMIC_RELEASE);
}

void sv_fault_qp_state(struct sv_qp *qp, enum ibv_qp_state now)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num, dest = qp->shm->dest_qpn;

	if (now != IBV_QPS_RTR && now != IBV_QPS_RTS)
		return;
	for (int i = 0; i < nused(); i++) {
		struct slot *s = &slots[i];

		if (!live(s))
			continue;
		resolve_gid(s, qp);
		if (__atomic_load_n(&s->qpn, __ATOMIC_ACQUIRE) == qpn)
			__atomic_store_n(&s->dst, dest, __ATOMIC_RELEASE);
		if (now == IBV_QPS_RTS && s->p.kind == SV_FK_EVENT &&
		    !s->p.after && names_qp(s, qpn, dest) && event_once(s))
			queue_event(qp->eng, i, qpn);
	}
}

/* ------------------------------------------------ progress thread -- */

void sv_fault_drain(struct sv_engine *eng)
{
	char lines[QLINES][sizeof(q.line[0])];
	unsigned nl, ne;
	struct {
		int slot;
		uint32_t qpn;
	} ev[QEVENTS];

	if (!__atomic_exchange_n(&sv_fault_pending, 0, __ATOMIC_ACQ_REL))
		return;
	qlock();
	ne = q.nev;
	memcpy(ev, q.ev, ne * sizeof(ev[0]));
	q.nev = 0;
	qunlock();
	for (unsigned i = 0; i < ne; i++)
		raise_event(eng, &slots[ev[i].slot], ev[i].qpn);
	qlock();
	nl = q.nline;
	memcpy(lines, q.line, nl * sizeof(lines[0]));
	q.nline = 0;
	qunlock();
	for (unsigned i = 0; i < nl; i++) {
		struct sv_fault_req req = { .cmd = SV_FAULT_LOG };

		snprintf(req.text, sizeof(req.text), "%.255s", lines[i]);
		sv_call_simple(SV_OP_FAULT, 0, eng->instance, -1, &req,
			       sizeof(req), NULL, 0);
	}
}

/* A run-time plan about to be published acts on the QPs we already have:
 * a packet or status plan moves them to packets first (under sq_lock, so
 * no direct execution is under way when the plan starts to act). */
static void apply_now(struct sv_engine *eng, int i)
{
	struct slot *s = &slots[i];
	struct sv_qp *fire = NULL;

	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	for (uint32_t j = 0; j < eng->qcap; j++) {
		struct sv_qp *qp = eng->qtab[j].qp;
		uint32_t qpn, dest;

		if (!qp)
			continue;
		qpn = qp->qpx.qp_base.qp_num;
		dest = qp->shm->dest_qpn;
		if (sv_qp_state(qp) >= IBV_QPS_RTR)
			resolve_gid(s, qp);
		if (!names_qp(s, qpn, dest))
			continue;
		if (s->qpn == qpn && sv_qp_state(qp) >= IBV_QPS_RTR)
			__atomic_store_n(&s->dst, dest, __ATOMIC_RELEASE);
		if ((s->p.kind == SV_FK_PACKET ||
		     (s->p.kind == SV_FK_STATUS && !s->p.recv)) &&
		    qp->type != IBV_QPT_UD && tr_of(qp)) {
			sv_lock_spin(&qp->sq_lock, SV_LOCK_SQ);
			tr_of(qp)->path.reach = SV_REACH_PACKETS;
			sv_unlock_spin(&qp->sq_lock);
		}
		if (s->p.kind == SV_FK_EVENT && !s->p.after && !fire &&
		    sv_qp_state(qp) == IBV_QPS_RTS)
			fire = qp;
	}
	if (fire && event_once(s)) {
		uint32_t qpn = fire->qpx.qp_base.qp_num;

		sv_unlock_rw(&eng->qp_lock);
		raise_event(eng, s, qpn);
		return;
	}
	sv_unlock_rw(&eng->qp_lock);
}

void sv_fault_sync(struct sv_engine *eng)
{
	struct sv_fault_req req = { .cmd = SV_FAULT_SYNC };
	struct sv_fault_rep *rep = malloc(sizeof(*rep));
	int err;

	if (!rep)
		return;
	env_init();
	err = sv_call_simple(SV_OP_FAULT, 0, eng->instance, -1, &req,
			     sizeof(req), rep, sizeof(*rep));
	if (err || rep->n > SV_FAULT_MAX_PLANS) {
		free(rep);
		return;
	}
	/* Gone from the daemon's list: cleared. */
	for (int i = 0; i < nused(); i++) {
		struct slot *s = &slots[i];
		int keep = 0;

		if (!s->p.id || !live(s))
			continue;
		for (uint32_t j = 0; j < rep->n; j++)
			keep |= rep->ent[j].id == s->p.id;
		if (!keep) {
			clear_slot(s);
			fire_log(s, 1, "cleared");
		}
	}
	for (uint32_t j = 0; j < rep->n; j++) {
		struct sv_fault_plan p;
		char why[128];
		int have = 0, n;

		for (int i = 0; i < nused(); i++)
			have |= slots[i].p.id == rep->ent[j].id;
		rep->ent[j].text[SV_FAULT_TEXT - 1] = 0;
		if (have || sv_fault_parse(rep->ent[j].text,
					   strlen(rep->ent[j].text), &p, why,
					   sizeof(why)))
			continue;
		p.id = rep->ent[j].id;
		if (p.kind == SV_FK_SEED) /* the daemon refuses those */
			continue;
		n = reserve(&p);
		if (n < 0)
			continue;
		apply_now(eng, n);
		publish(n);
	}
	free(rep);
}

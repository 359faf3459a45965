/* SPDX-License-Identifier: MIT */
/*
 * The engine: everything that moves bytes between QPs of processes on one
 * host (DESIGN.md "Data path: the engine").  This file is the plumbing:
 * attach, links, the progress thread, the QP table.  The transport is
 * sv_req.c (requester), sv_resp.c (responder), sv_comp.c (completer);
 * keys.c finds the memory behind keys.
 *
 * Design
 * ------
 * Attach.  A process's engine attaches to the daemon when its first QP is
 * added or its first MR is registered (before ibv_reg_mr returns: another
 * process may import the MR and use it at once, and only our engine can
 * serve its accesses when CMA is refused, and always its atomics).  It
 * detaches when it is no longer wanted -- no QP and no MR registered here
 * left in an open context -- but this is decided only when a QP goes or a
 * context closes, never in ibv_dereg_mr: a reg/dereg loop attaches once.
 * The MRs of a closed context live on while their ufile does (another
 * process may hold its cmd_fd, as in the kernel), so their holds last
 * until the daemon says the ufile is gone (SV_ENGINE_UFILE_GONE); then a
 * process with no context and no QP holds nothing in the daemon.  SV_OP_ENGINE_ATTACH gives the daemon our
 * doorbell (an eventfd) and returns an engine id, the engine socket and
 * the key table memfd (mapped read-only, kept for the life of the
 * process).
 *
 * Links.  Per pair of engines, one SPSC ring per direction (sv_ring.h) in
 * a memfd the sender creates.  SV_OP_LINK_CONNECT hands it to the receiver
 * (the daemon pushes it on the receiver's engine socket) and returns the
 * receiver's doorbell.  Which engine serves a QPN: SV_OP_QPN_LOOKUP (cached
 * for UD).  A QP in this process is reached through a loopback ring, the
 * same code path.  When an engine dies the daemon tells every other one
 * (SV_ENGINE_PEER_GONE); links to it are dead and the RC QPs using them
 * fail their outstanding work with IBV_WC_RETRY_EXC_ERR at once.
 *
 * Progress.  A progress thread per attached engine drains the inbound
 * rings, runs timers (retransmission, RNR) and retries blocked senders.
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
 *     memory between polls: ib_write_lat's target): the thread sleeps
 *     armed, so the next packet wakes it at once instead of after a nap.
 * The thread never spins next to a polling application: on a small
 * machine it would take that application's CPU.  Locks the application
 * also takes are acquired with sv_spin_lock (yield after a short spin),
 * and a drainer that finds a ring locked by another thread yields, so a
 * preempted holder on the same CPU gets to finish.
 *
 * Locks, in order: eng->qp_lock (read, while packets are processed) ->
 * qp->sq_lock -> qp->rq_lock -> cq->lock; link->tx_lock is a leaf;
 * eng->lock guards the links list and attach state and
 * is never taken with a QP lock held.  Leaves, taken with QP locks held:
 * eng->async_lock (the async event queue), eng->rmem_lock (links to
 * memory owners) and link->box_lock (one remote memory request).  No
 * daemon call is made with a QP lock held, except fetching a DM mapping
 * or connecting to a memory owner on first use (keys.c).
 *
 * Remote memory.  Memory another process of the ufile registered is
 * reached with CMA where allowed, else (and always for atomics) through
 * a request box in a small link to the owner's engine: the owner's
 * progress thread (or any of its threads that drains, or waits on a box
 * of its own) executes it after checking the MR key names that memory
 * (sv_rmem_call / sv_rmem_serve).  The owner gone: an error, never a hang.
 *
 * Faults.  SOFTVERBS_FAULT=drop:P,dup:P,reorder:P makes every link lossy
 * at commit time; RC hides it (NAK-sequence and timeouts resume a long
 * SEND/WRITE at the PSN the responder expects and a READ at its first
 * missing response), UC loses whole messages.
 *
 * Transport (IBTA ch. 9): real BTH/RETH/AETH/AtomicETH/AtomicAckETH/
 * ImmDt/IETH/DETH packets, PSNs, ACK/NAK (sequence, RNR, access, invalid
 * request, operational), coalesced ACKs (one per drained batch),
 * go-back-N retransmission on timeout.  The ring itself is lossless, so a
 * timeout only counts as a retry when the peer consumed our packets and
 * still did not answer (its QP is gone or not ready, or a fault dropped
 * them): a slow but living peer never exhausts retry_cnt.
 */
#include "engine_int.h"
#include "sv_client.h"
#include "verbs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sv_sock.h"

static struct sv_engine *the_engine;
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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
static int qtab_put(struct sv_engine *eng, uint32_t qpn, struct sv_qp *qp)
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
static void qtab_del(struct sv_engine *eng, uint32_t qpn)
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

/* ----------------------------------------------------------- links -- */

static int make_ring(size_t size, int *fdp, void **mapp)
{
	int fd = memfd_create("softverbs-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		close(fd);
		return -errno;
	}
	/* Neither side may shrink it under the other's mapping (the daemon
	 * and the receiver refuse a ring without these seals). */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		close(fd);
		return -errno;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -errno;
	}
	*fdp = fd;
	*mapp = p;
	return 0;
}

/* 1 when fd is a memfd nobody can resize any more (make_ring's seals). */
static int ring_sealed(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	return seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) ==
				     (F_SEAL_SHRINK | F_SEAL_GROW);
}

/* Adds an inbound ring (mapping map of len bytes, the ring its first
 * ring_len, then a remote memory box when box; map owned when own_map).
 * Must hold eng->lock. */
static int add_inring(struct sv_engine *eng, void *map, size_t len,
		      size_t ring_len, int box, uint32_t peer, int own_map)
{
	unsigned n = atomic_load(&eng->nin);
	struct sv_inring *in;

	if (n >= SV_ENG_MAX_INRINGS)
		return -ENOSPC;
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	if (sv_ring_cons_init(&in->rx, map, ring_len)) {
		free(in);
		return -EPROTO;
	}
	in->box = box ? (struct sv_rmem_box *)((char *)map + ring_len) : NULL;
	pthread_mutex_init(&in->lock, NULL);
	in->map = own_map ? map : NULL;
	in->map_len = len;
	in->peer_id = peer;
	eng->in[n] = in;
	atomic_store_explicit(&eng->nin, n + 1, memory_order_release);
	return 0;
}

/* A link to engine `peer` with a fresh shared mapping of size bytes, of
 * which the first ring bytes are our packet ring; *fdp is the mapping's
 * fd, for the caller to hand on and close.  NULL when out of memory. */
static struct sv_link *link_alloc(struct sv_engine *eng, uint32_t peer,
				  size_t ring, size_t size, int *fdp)
{
	struct sv_link *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	if (make_ring(size, fdp, &l->map)) {
		free(l);
		return NULL;
	}
	l->map_len = size;
	sv_ring_init(l->map, ring, (uint32_t)eng->pid);
	sv_ring_prod_init(&l->tx, l->map);
	pthread_spin_init(&l->tx_lock, PTHREAD_PROCESS_PRIVATE);
	l->eng = eng;
	l->peer_id = peer;
	return l;
}

/* Hands l's mapping (fd, closed here) to engine l->peer_id through the
 * daemon and takes back its doorbell and pid.  0 or negative errno. */
static int link_connect(struct sv_engine *eng, struct sv_link *l,
			size_t size, int fd)
{
	struct sv_link_req req = { .engine_id = l->peer_id,
				   .ring_size = size };
	struct sv_link_rep rep;
	int db = -1, err;
	struct sv_call c = { .op = SV_OP_LINK_CONNECT,
			     .instance = eng->instance,
			     .attach_fd = -1,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .fds = &fd,
			     .nfds = 1,
			     .rfds = &db,
			     .max_rfds = 1 };

	err = sv_call(&c);
	close(fd);
	if (err || c.nrfds != 1 || c.rep_len != sizeof(rep)) {
		if (db >= 0)
			close(db);
		return err < 0 ? err : -EPROTO;
	}
	l->peer_db = db;
	l->peer_pid = (pid_t)rep.pid;
	return 0;
}

/* The link to engine `peer`, made if needed.  Must hold eng->lock (the
 * daemon is called with it: no QP lock is held by our callers). */
static struct sv_link *link_get(struct sv_engine *eng, uint32_t peer)
{
	size_t ring = SV_RING_DATA_OFF + SV_ENG_RING_BYTES;
	size_t size = ring; /* packets only: boxes travel on rlinks */
	struct sv_link *l;
	int fd, err;

	for (l = eng->links; l; l = l->next)
		if (l->peer_id == peer && !atomic_load(&l->dead))
			return l;
	if (!eng->attached)
		return NULL;
	l = link_alloc(eng, peer, ring, size, &fd);
	if (!l)
		return NULL;
	if (peer == eng->id) {
		/* Loopback: we consume what we produce. */
		l->peer_pid = eng->pid;
		l->peer_db = fcntl(eng->doorbell, F_DUPFD_CLOEXEC, 0);
		close(fd);
		if (l->peer_db < 0 ||
		    add_inring(eng, l->map, size, ring, 0, peer, 0))
			goto err_unmap;
	} else {
		err = link_connect(eng, l, size, fd);
		if (err) {
			sv_dbg("engine %u: link to engine %u: %s", eng->id, peer,
			       strerror(-err));
			goto err_unmap;
		}
	}
	l->next = eng->links;
	eng->links = l;
	return l;

err_unmap:
	munmap(l->map, size);
	free(l);
	return NULL;
}

static uint32_t lookup_engine(struct sv_engine *eng, uint32_t qpn,
			      uint32_t flags)
{
	struct sv_qpn_req req = { .qpn = qpn, .flags = flags };
	struct sv_qpn_rep rep;

	if (sv_call_simple(SV_OP_QPN_LOOKUP, 0, eng->instance, -1, &req,
			   sizeof(req), &rep, sizeof(rep)))
		return 0;
	return rep.engine_id;
}

struct sv_link *sv_eng_link_for_qpn(struct sv_engine *eng, uint32_t qpn)
{
	struct sv_link *l = NULL;
	uint32_t peer = 0, slot = qpn & 255;

	pthread_rwlock_rdlock(&eng->qp_lock);
	if (sv_eng_qp(eng, qpn))
		peer = eng->id;
	pthread_rwlock_unlock(&eng->qp_lock);

	pthread_mutex_lock(&eng->lock);
	if (!peer && eng->dcache[slot].qpn == qpn && eng->dcache[slot].engine_id)
		peer = eng->dcache[slot].engine_id;
	pthread_mutex_unlock(&eng->lock);
	if (!peer) {
		peer = lookup_engine(eng, qpn, 0);
		if (!peer)
			return NULL;
	}
	pthread_mutex_lock(&eng->lock);
	eng->dcache[slot].qpn = qpn;
	eng->dcache[slot].engine_id = peer;
	l = link_get(eng, peer);
	pthread_mutex_unlock(&eng->lock);
	return l;
}

/* ------------------------------------------------- fault injection -- */

/*
 * SOFTVERBS_FAULT (tests; README "Environment"): comma-separated items,
 * drop:P, dup:P, reorder:P (probabilities 0..1) and seed:N, make every
 * link lose, duplicate or hold back (until the link's next packet) the
 * packets its producer commits, as a lossy fabric would.  The transport's
 * reliability (PSN, ACK/NAK, retransmission) must hide it on RC.  Read
 * once, when the first engine attaches.  Other items belong to others.
 */
static struct {
	int on;
	double drop, dup, reorder;
	uint64_t seed;
} fault;
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;

static void fault_parse(void)
{
	const char *env = getenv("SOFTVERBS_FAULT");
	char *copy, *save = NULL, *it;

	if (!env || !*env)
		return;
	copy = strdup(env);
	if (!copy)
		return;
	fault.seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
	for (it = strtok_r(copy, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(it, ':');
		double v;

		if (!colon)
			continue;
		*colon = 0;
		v = strtod(colon + 1, NULL);
		if (v < 0)
			v = 0;
		if (v > 1 && strcmp(it, "seed"))
			v = 1;
		if (!strcmp(it, "drop"))
			fault.drop = v;
		else if (!strcmp(it, "dup"))
			fault.dup = v;
		else if (!strcmp(it, "reorder"))
			fault.reorder = v;
		else if (!strcmp(it, "seed"))
			fault.seed = strtoull(colon + 1, NULL, 0) + 1;
	}
	free(copy);
	fault.on = fault.drop > 0 || fault.dup > 0 || fault.reorder > 0;
	if (fault.on)
		sv_info("fault injection: drop %.3f dup %.3f reorder %.3f",
			fault.drop, fault.dup, fault.reorder);
}

/* Uniform in [0, 1), per link (under tx_lock). */
static double fault_roll(struct sv_link *l)
{
	uint64_t x = l->rng;

	if (!x)
		x = fault.seed ^ ((uint64_t)l->peer_id << 32) ^
		    (uint64_t)(uintptr_t)l;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	l->rng = x;
	return (double)(x >> 11) / 9007199254740992.0;
}

/* Appends a copy of a record; nothing when the ring is full (lost). */
static void fault_append(struct sv_link *l, const uint8_t *p, uint32_t len,
			 uint32_t type)
{
	uint8_t *q = sv_ring_reserve(&l->tx, len, type);

	if (q)
		memcpy(q, p, len);
}

/* Commits the reserved record through the fault model.  Must hold
 * tx_lock.  Returns the ring's "consumer armed" answer. */
static int fault_commit(struct sv_link *l)
{
	double r = fault_roll(l);
	uint8_t copy[SV_ENG_MAX_PKT + SV_GRH_BYTES];
	uint32_t len = l->cur_len, type = l->cur_type;
	int ring, dup = 0;

	if (r < fault.drop) {
		sv_ring_abort(&l->tx);
		return 0;
	}
	r -= fault.drop;
	if (r < fault.reorder && !l->held && len <= sizeof(copy)) {
		l->held = malloc(len ? len : 1);
		if (l->held) {
			memcpy(l->held, l->cur, len);
			l->held_len = len;
			l->held_type = type;
			sv_ring_abort(&l->tx);
			return 0;
		}
	}
	r -= fault.reorder;
	if (r < fault.dup && len <= sizeof(copy)) {
		memcpy(copy, l->cur, len);
		dup = 1;
	}
	if (dup)
		fault_append(l, copy, len, type);
	if (l->held) {
		fault_append(l, l->held, l->held_len, l->held_type);
		free(l->held);
		l->held = NULL;
	}
	ring = sv_ring_commit(&l->tx);
	return ring;
}

uint8_t *sv_link_reserve(struct sv_link *link, uint32_t len, int grh,
			 int *dead)
{
	uint8_t *p;
	uint32_t type = SV_REC_PKT | (grh ? SV_REC_F_GRH : 0);

	*dead = atomic_load_explicit(&link->dead, memory_order_relaxed);
	if (*dead)
		return NULL;
	sv_spin_lock(&link->tx_lock);
	p = sv_ring_reserve(&link->tx, len, type);
	if (!p) {
		pthread_spin_unlock(&link->tx_lock);
		return NULL;
	}
	link->cur = p;
	link->cur_len = len;
	link->cur_type = type;
	return p;
}

void sv_link_commit(struct sv_link *link)
{
	int ring = fault.on ? fault_commit(link) : sv_ring_commit(&link->tx);

	pthread_spin_unlock(&link->tx_lock);
	if (ring) {
		uint64_t one = 1;

		if (write(link->peer_db, &one, sizeof(one)) < 0 &&
		    errno != EAGAIN)
			sv_dbg("doorbell of engine %u: %s", link->peer_id,
			       strerror(errno));
	}
}

void sv_link_abort(struct sv_link *link)
{
	sv_ring_abort(&link->tx);
	pthread_spin_unlock(&link->tx_lock);
}

/* --------------------------------------------------- remote memory -- */

/* The link to the engine of process pid, for remote memory requests.
 * Under rmem_lock only: our callers may hold QP locks. */
static struct sv_link *rlink_get(struct sv_engine *eng, pid_t pid)
{
	size_t ring = SV_RING_DATA_OFF + 8192, size = ring + SV_RMEM_BOX_BYTES;
	struct sv_link *l;
	uint32_t peer;
	int fd;

	for (l = eng->rlinks; l; l = l->next)
		if (l->peer_pid == pid && !atomic_load(&l->dead))
			return l;
	if (!eng->attached)
		return NULL;
	peer = lookup_engine(eng, (uint32_t)pid, SV_QPN_BY_PID);
	if (!peer || peer == eng->id)
		return NULL;
	/* A small ring nobody writes (the owner's consumer wants one), then
	 * the box. */
	l = link_alloc(eng, peer, ring, size, &fd);
	if (!l)
		return NULL;
	pthread_mutex_init(&l->box_lock, NULL);
	l->box = (struct sv_rmem_box *)((char *)l->map + ring);
	if (link_connect(eng, l, size, fd))
		goto err_unmap;
	l->next = eng->rlinks;
	eng->rlinks = l;
	return l;

err_unmap:
	munmap(l->map, size);
	free(l);
	return NULL;
}

/* The process is gone (or a zombie: its descriptors are closed). */
static int pid_dead(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

int sv_rmem_call(struct sv_engine *eng, pid_t pid, uint32_t op, uint32_t key,
		 uint64_t addr, void *buf, uint32_t len, uint64_t comp,
		 uint64_t swap, uint64_t *orig)
{
	struct sv_rmem_box *b;
	struct sv_link *l;
	uint64_t one = 1, t0, last_check;
	uint32_t spins = 0;
	int err;

	if (len > SV_RMEM_CHUNK)
		return -EINVAL;
	pthread_mutex_lock(&eng->rmem_lock);
	l = rlink_get(eng, pid);
	pthread_mutex_unlock(&eng->rmem_lock);
	if (!l)
		return -EHOSTDOWN;
	pthread_mutex_lock(&l->box_lock);
	b = l->box;
	if (atomic_load(&l->dead)) {
		pthread_mutex_unlock(&l->box_lock);
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
	if (op == SV_RMEM_WRITE)
		memcpy(b->data, buf, len);
	atomic_store_explicit(&b->state, SV_RMEM_REQ, memory_order_release);
	if (write(l->peer_db, &one, sizeof(one)) < 0 && errno != EAGAIN)
		sv_dbg("doorbell of engine %u: %s", l->peer_id, strerror(errno));
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
		if (atomic_load(&l->dead) || pid_dead(l->peer_pid) ||
		    now - t0 > SV_RMEM_TIMEOUT_NS) {
			/* The box may still be claimed: never reuse it. */
			atomic_store(&l->dead, 1);
			pthread_mutex_unlock(&l->box_lock);
			return -EHOSTDOWN;
		}
	}
	err = b->result;
	if (!err && op == SV_RMEM_READ)
		memcpy(buf, b->data, len);
	if (!err && orig)
		*orig = b->orig;
	atomic_store_explicit(&b->state, SV_RMEM_IDLE, memory_order_relaxed);
	pthread_mutex_unlock(&l->box_lock);
	return err;
}

/* Executes the request in box b on our memory. */
static void rmem_exec(struct sv_engine *eng, struct sv_rmem_box *b)
{
	uint32_t op = b->op, key = b->key, len = b->len;
	uint64_t addr = b->addr, comp = b->comp, swap = b->swap;
	int atomic = op == SV_RMEM_CSWAP || op == SV_RMEM_FADD;

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
		memcpy(b->data, (void *)(uintptr_t)addr, len);
		break;
	case SV_RMEM_WRITE:
		memcpy((void *)(uintptr_t)addr, b->data, len);
		break;
	case SV_RMEM_CSWAP:
		b->orig = comp;
		__atomic_compare_exchange_n((uint64_t *)(uintptr_t)addr,
					    &b->orig, swap, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		break;
	default:
		b->orig = __atomic_fetch_add((uint64_t *)(uintptr_t)addr, swap,
					     __ATOMIC_SEQ_CST);
		break;
	}
	b->result = 0;
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
		rmem_exec(eng, in->box);
		atomic_store_explicit(&in->box->state, SV_RMEM_DONE,
				      memory_order_release);
		n++;
	}
	return n;
}

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

void sv_eng_async(struct sv_engine *eng, struct ibv_context *ctx,
		  enum ibv_event_type type, void *element)
{
	struct sv_context *sc = to_svctx(ctx);
	struct sv_async_ev *ev = calloc(1, sizeof(*ev));
	uint64_t one = 1;

	if (!ev)
		return;
	ev->ufile = sc->ufile;
	ev->ctx_id = sc->ctx_id;
	ev->instance = sc->instance;
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

void sv_engine_async_event(struct ibv_context *ctx, enum ibv_event_type type,
			   void *element)
{
	int err;
	struct sv_engine *eng = sv_engine_get(ctx);

	(void)err;
	if (eng)
		sv_eng_async(eng, ctx, type, element);
}

static void async_drain(struct sv_engine *eng)
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

/* ------------------------------------------------------- inbound -- */

/* Up to 64 QPs touched by one drain: their ACKs go out once, after it. */
struct touched {
	struct sv_qp *qp[64];
	int n;
	int contended; /* a ring with packets was locked by another thread */
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

	if ((type & 0xffff) != SV_REC_PKT ||
	    sv_pkt_parse(&pkt, buf, len, !!(type & SV_REC_F_GRH)))
		return; /* not a packet: dropped (C9-xx: silently) */
	qp = sv_eng_qp(eng, pkt.qpn);
	if (!qp)
		return;
	if (pkt.flags & OP_REQ) {
		sv_resp_packet(qp, &pkt);
		touch(t, qp);
	} else if (sv_comp_packet(qp, &pkt)) {
		sv_engine_flush(qp);
	}
}

/* Drains one ring if no other thread does.  Must hold qp_lock (read).
 * Returns the packets processed. */
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
		n++;
	}
	pthread_mutex_unlock(&in->lock);
	return n;
}

static int drain_all(struct sv_engine *eng, int *contended)
{
	unsigned nin = atomic_load_explicit(&eng->nin, memory_order_acquire);
	struct touched t = { .n = 0 };
	int n = 0;

	n += sv_rmem_serve(eng);
	pthread_rwlock_rdlock(&eng->qp_lock);
	for (unsigned i = 0; i < nin; i++)
		n += drain_ring(eng, eng->in[i], &t);
	for (int i = 0; i < t.n; i++) {
		struct sv_tr *tr = tr_of(t.qp[i]);

		sv_resp_flush(t.qp[i]);
		if (tr->need_flush) {
			tr->need_flush = 0;
			sv_engine_flush(t.qp[i]);
		}
	}
	pthread_rwlock_unlock(&eng->qp_lock);
	if (contended)
		*contended = t.contended;
	return n;
}

/* Timers, blocked senders, pending responses of every QP.  Returns the
 * earliest deadline (ns) or 0. */
static uint64_t scan_qps(struct sv_engine *eng, uint64_t now, int *busy)
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
	atomic_store(&eng->work, 1);
}

static void holds_ufile_gone(struct sv_engine *eng, uint32_t ufile);

static void sock_readable(struct sv_engine *eng)
{
	for (;;) {
		struct sv_engine_msg m;
		int fds[SV_MAX_FDS], nfds = 0;
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
			atomic_store(&eng->work, 1);
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
			holds_ufile_gone(eng, m.peer);
			continue;
		}
		/* Only a sealed memfd of the announced size: its creator
		 * must not be able to shrink it under our mapping (SIGBUS). */
		if (m.type != SV_ENGINE_LINK_NEW || nfds != 2 ||
		    fstat(fds[0], &st) < 0 || (uint64_t)st.st_size != m.ring_size ||
		    m.ring_size < SV_RING_DATA_OFF || !ring_sealed(fds[0])) {
			sv_close_fds(fds, nfds);
			continue;
		}
		map = mmap(NULL, m.ring_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, fds[0], 0);
		sv_close_fds(fds, nfds); /* the peer's doorbell: not needed */
		if (map == MAP_FAILED)
			continue;
		/* The ring's own size, then (newer peers) a request box. */
		ring_len = ((const struct sv_ring_hdr *)map)->size;
		pthread_mutex_lock(&eng->lock);
		if ((ring_len != m.ring_size &&
		     ring_len + SV_RMEM_BOX_BYTES != m.ring_size) ||
		    add_inring(eng, map, m.ring_size, ring_len,
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

/* The application polled a CQ (drained inline) lately: it is the main
 * consumer, the thread only backs it up. */
static int app_polls(struct sv_engine *eng, uint64_t now)
{
	return now - atomic_load_explicit(&eng->last_inline,
					  memory_order_relaxed) <
	       SV_ENG_INLINE_NS;
}

static void *progress_main(void *arg)
{
	struct sv_engine *eng = arg;
	uint64_t now = sv_now_ns(), last_work = now;
	uint64_t last_found = now - SV_ENG_TARGET_NS, next_deadline = 0;
	uint64_t last_scan = now;

	pthread_once(&spin_once, spin_init);
	atomic_store(&eng->thread_tid, (unsigned)syscall(SYS_gettid));
	while (!atomic_load(&eng->stop)) {
		struct epoll_event evs[4];
		struct timespec ts;
		uint64_t tmo;
		int n, busy = 0, ready = 0, app, armed, live;

		now = sv_now_ns();
		/* The application drains right now: keep off its rings (a
		 * thread preempted with a ring lock held stalls it for a
		 * time slice). */
		live = now - atomic_load_explicit(&eng->last_inline,
						  memory_order_relaxed) <
		       SV_ENG_LIVE_NS;
		n = live ? 0 : drain_all(eng, NULL);
		if (n || atomic_exchange(&eng->work, 0) ||
		    (next_deadline && now >= next_deadline) ||
		    now - last_scan >= SV_ENG_NAP_NS) {
			next_deadline = scan_qps(eng, now, &busy);
			last_scan = now;
		}
		if (busy)
			atomic_store(&eng->work, 1);
		if (eng->async_head)
			async_drain(eng);
		app = app_polls(eng, now);
		if (n) {
			last_work = now;
			/* Packets the application left, though it polls: it
			 * waits elsewhere (on its memory) between polls. */
			if (app)
				last_found = now;
		}
		if (n >= SV_ENG_BATCH)
			continue; /* more where those came from */
		if (!app && now - last_work < spin_ns) {
			/* Spin only when nobody else drains: a spinning
			 * thread next to a polling application halves its
			 * CPU on a small machine. */
			cpu_relax();
			continue;
		}

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
			uint64_t d = scan_qps(eng, now, &busy);

			if (d && (!next_deadline || d < next_deadline))
				next_deadline = d;
			if (d && (d <= now || d - now < tmo)) {
				tmo = d > now ? d - now : 0;
				atomic_store(&eng->sleep_until, d);
			}
		}
		ts = (struct timespec){ (time_t)(tmo / 1000000000u),
					(long)(tmo % 1000000000u) };
		n = epoll_pwait2(eng->epfd, evs, 4,
				 tmo == UINT64_MAX ? NULL : &ts, NULL);
		atomic_store(&eng->sleep_until, 0);
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
	async_drain(eng);
	return NULL;
}

/*
 * Starts the progress thread and returns once it runs its own code.  A
 * thread still being set up (TLS, a sanitizer's thread record) may hold an
 * allocator lock; a fork() in that window would hand the child a lock
 * nobody releases.  Called by attach and detach, which are serialised.
 * Returns 0 or a positive errno.
 */
static int start_thread(struct sv_engine *eng)
{
	int err;

	atomic_store(&eng->thread_tid, 0);
	err = pthread_create(&eng->thread, NULL, progress_main, eng);
	if (err)
		return err;
	while (!atomic_load(&eng->thread_tid))
		sched_yield();
	return 0;
}

void sv_engine_progress(struct sv_engine *eng)
{
	int contended = 0;

	if (!eng || !eng->attached || pthread_rwlock_tryrdlock(&eng->attach_lock))
		return;
	atomic_store_explicit(&eng->last_inline, sv_now_ns(),
			      memory_order_relaxed);
	if (eng->attached) {
		drain_all(eng, &contended);
		if (atomic_load_explicit(&eng->work, memory_order_relaxed)) {
			int busy = 0;

			scan_qps(eng, sv_now_ns(), &busy);
		}
	}
	pthread_rwlock_unlock(&eng->attach_lock);
	if (contended)
		sched_yield(); /* let a preempted drainer finish */
}

/* ------------------------------------------------ attach / detach -- */

static int map_keytab(struct sv_engine *eng, int fd, uint64_t size)
{
	const struct sv_keytab_hdr *h;
	void *p;

	if (eng->kt) {
		close(fd);
		return 0;
	}
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	h = p;
	if (size < sizeof(*h) || h->magic != SV_KEYTAB_MAGIC ||
	    h->version != SV_KEYTAB_VERSION || h->size != size ||
	    h->entry_size != sizeof(struct sv_key_entry) ||
	    h->entries_off < sizeof(*h) ||
	    (uint64_t)h->entries_off + (uint64_t)h->nentries * h->entry_size > size) {
		munmap(p, size);
		return -EPROTO;
	}
	eng->kt = h;
	eng->keys = (const struct sv_key_entry *)((const char *)p + h->entries_off);
	eng->nkeys = h->nentries;
	eng->kt_len = size;
	return 0;
}

/* Must hold eng->lock. */
static int attach(struct sv_engine *eng)
{
	struct sv_engine_attach_rep rep;
	int rfds[2] = { -1, -1 }, err;
	struct epoll_event ev = { .events = EPOLLIN };
	struct sv_call c = { .op = SV_OP_ENGINE_ATTACH,
			     .instance = eng->instance,
			     .attach_fd = -1,
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = rfds,
			     .max_rfds = 2 };

	pthread_once(&fault_once, fault_parse);
	eng->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	eng->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	eng->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (eng->doorbell < 0 || eng->stopfd < 0 || eng->epfd < 0) {
		err = -errno;
		goto err_close;
	}
	c.fds = &eng->doorbell;
	c.nfds = 1;
	err = sv_call(&c);
	if (!err && (c.nrfds != 2 || c.rep_len != sizeof(rep)))
		err = -EPROTO;
	if (err)
		goto err_close;
	eng->sock = rfds[0];
	rfds[0] = -1;
	err = map_keytab(eng, rfds[1], rep.kt_size);
	rfds[1] = -1;
	if (err)
		goto err_close;
	fcntl(eng->sock, F_SETFL, O_NONBLOCK);
	eng->id = rep.engine_id;
	memcpy(eng->gid, rep.gid, 16);
	ev.data.fd = eng->doorbell;
	epoll_ctl(eng->epfd, EPOLL_CTL_ADD, eng->doorbell, &ev);
	ev.data.fd = eng->sock;
	epoll_ctl(eng->epfd, EPOLL_CTL_ADD, eng->sock, &ev);
	ev.data.fd = eng->stopfd;
	epoll_ctl(eng->epfd, EPOLL_CTL_ADD, eng->stopfd, &ev);
	atomic_store(&eng->stop, 0);
	eng->attached = 1;
	err = start_thread(eng);
	if (err) {
		err = -err;
		eng->attached = 0;
		goto err_close;
	}
	pthread_mutex_lock(&eng->async_lock);
	eng->thread_running = 1;
	pthread_mutex_unlock(&eng->async_lock);
	sv_dbg("engine %u attached (pid %d)", eng->id, (int)eng->pid);
	return 0;

err_close:
	sv_close_fds(rfds, 2);
	if (eng->sock >= 0)
		close(eng->sock);
	if (eng->doorbell >= 0)
		close(eng->doorbell);
	if (eng->stopfd >= 0)
		close(eng->stopfd);
	if (eng->epfd >= 0)
		close(eng->epfd);
	eng->sock = eng->doorbell = eng->stopfd = eng->epfd = -1;
	sv_err("cannot start the data path: %s", strerror(-err));
	return err;
}

/* Frees links and inbound rings; closes descriptors.  Must hold
 * attach_lock (write) or be the only thread (fork child). */
static void release_all(struct sv_engine *eng, int close_fds)
{
	unsigned nin = atomic_load(&eng->nin);

	while (eng->links || eng->rlinks) {
		struct sv_link *l = eng->links ? eng->links : eng->rlinks;

		if (l == eng->links)
			eng->links = l->next;
		else
			eng->rlinks = l->next;
		free(l->held);
		if (close_fds)
			close(l->peer_db);
		munmap(l->map, l->map_len);
		free(l);
	}
	for (unsigned i = 0; i < nin; i++) {
		if (eng->in[i]->map)
			munmap(eng->in[i]->map, eng->in[i]->map_len);
		free(eng->in[i]);
		eng->in[i] = NULL;
	}
	atomic_store(&eng->nin, 0);
	memset(eng->dcache, 0, sizeof(eng->dcache));
	if (close_fds) {
		close(eng->sock);
		close(eng->doorbell);
		close(eng->stopfd);
		close(eng->epfd);
	}
	eng->sock = eng->doorbell = eng->stopfd = eng->epfd = -1;
	eng->attached = 0;
}

/*
 * Engine holds of registered memory: per context that registered an MR of
 * this process's memory, the MRs it still has (under eng->lock).  When
 * the context closes its record loses ctx (NULL) and lives until the
 * daemon destroys the ufile.
 */
struct mr_hold {
	struct mr_hold *next;
	struct ibv_context *ctx; /* NULL: closed, the ufile may live on */
	uint64_t instance;
	uint32_t ufile;
	unsigned long nmr;
};
static struct mr_hold *mr_holds;
static unsigned long mr_holds_total;
static int detaching; /* under eng->lock: one detach() at a time */

/* Must hold eng->lock.  What keeps the engine attached: QPs, or memory
 * of ours another process may reach. */
static int engine_wanted(const struct sv_engine *eng)
{
	return eng->nqps || mr_holds_total;
}

/* Must hold eng->lock. */
static struct mr_hold *hold_find(const struct ibv_context *ctx)
{
	struct mr_hold *h;

	for (h = mr_holds; h; h = h->next)
		if (h->ctx == ctx)
			return h;
	return NULL;
}

/* Must hold eng->lock.  ctx is closing: its MRs live on in the ufile,
 * but this process can no longer deregister them through ctx.  Another
 * record of ours for the same ufile (an open context, or one closed
 * before) takes its holds over; without one the record stays, ctx-less,
 * because another process may hold the ufile's cmd_fd and use the MRs:
 * the daemon's SV_ENGINE_UFILE_GONE ends it. */
static void hold_ctx_close(const struct ibv_context *ctx)
{
	struct mr_hold **pp, *h, *o;

	for (pp = &mr_holds; *pp && (*pp)->ctx != ctx;)
		pp = &(*pp)->next;
	h = *pp;
	if (!h)
		return;
	for (o = mr_holds; o; o = o->next)
		if (o != h && o->ufile == h->ufile &&
		    o->instance == h->instance)
			break;
	if (!o) {
		h->ctx = NULL;
		return;
	}
	*pp = h->next;
	o->nmr += h->nmr;
	free(h);
}

static void detach(struct sv_engine *eng);

static void *detach_main(void *arg)
{
	detach(arg);
	return NULL;
}

/* The daemon destroyed ufile `ufile`: the MRs our closed contexts left
 * there are gone, and with them perhaps the last reason to stay
 * attached.  Runs on the progress thread, which cannot join itself: a
 * short-lived thread detaches. */
static void holds_ufile_gone(struct sv_engine *eng, uint32_t ufile)
{
	struct mr_hold **pp = &mr_holds, *h;
	pthread_attr_t attr;
	pthread_t t;
	int last;

	pthread_mutex_lock(&eng->lock);
	while ((h = *pp)) {
		if (!h->ctx && h->ufile == ufile &&
		    h->instance == eng->instance) {
			*pp = h->next;
			mr_holds_total -= h->nmr;
			free(h);
			continue;
		}
		pp = &h->next;
	}
	last = eng->attached && !engine_wanted(eng) && !detaching;
	pthread_mutex_unlock(&eng->lock);
	if (!last || pthread_attr_init(&attr))
		return;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, detach_main, eng))
		sv_warn("engine %u: cannot detach: %s", eng->id,
			strerror(errno));
	pthread_attr_destroy(&attr);
}

static void detach(struct sv_engine *eng)
{
	uint64_t one = 1;

	pthread_mutex_lock(&eng->lock);
	if (!eng->attached || engine_wanted(eng) || detaching) {
		pthread_mutex_unlock(&eng->lock);
		return;
	}
	detaching = 1;
	atomic_store(&eng->stop, 1);
	if (write(eng->stopfd, &one, sizeof(one)) < 0)
		sv_dbg("stopfd: %s", strerror(errno));
	pthread_mutex_lock(&eng->async_lock);
	eng->thread_running = 0;
	pthread_mutex_unlock(&eng->async_lock);
	pthread_mutex_unlock(&eng->lock);
	pthread_join(eng->thread, NULL);
	async_drain(eng);
	pthread_rwlock_wrlock(&eng->attach_lock);
	pthread_mutex_lock(&eng->lock);
	if (!engine_wanted(eng)) {
		release_all(eng, 1);
		sv_dbg("engine %u detached", eng->id);
	} else {
		/* A QP or an MR came meanwhile: keep the links, restart the
		 * thread. */
		atomic_store(&eng->stop, 0);
		if (!start_thread(eng)) {
			pthread_mutex_lock(&eng->async_lock);
			eng->thread_running = 1;
			pthread_mutex_unlock(&eng->async_lock);
		}
	}
	detaching = 0;
	pthread_mutex_unlock(&eng->lock);
	pthread_rwlock_unlock(&eng->attach_lock);
}

/* A fork()ed child has its own engine: forget the parent's (its rings
 * and sockets are the parent's business). */
static void atfork_child(void)
{
	struct sv_engine *eng = the_engine;

	pthread_mutex_init(&engine_lock, NULL);
	if (!eng)
		return;
	pthread_mutex_init(&eng->lock, NULL);
	pthread_mutex_init(&eng->rmem_lock, NULL);
	pthread_mutex_init(&eng->async_lock, NULL);
	pthread_rwlock_init(&eng->attach_lock, NULL);
	pthread_rwlock_init(&eng->qp_lock, NULL);
	if (eng->attached)
		release_all(eng, 1);
	eng->thread_running = 0;
	eng->pid = getpid();
	free(eng->qtab);
	eng->qtab = NULL;
	eng->qcap = eng->nqps = 0;
	/* The parent's MRs are the parent's memory. */
	while (mr_holds) {
		struct mr_hold *h = mr_holds;

		mr_holds = h->next;
		free(h);
	}
	mr_holds_total = 0;
	detaching = 0;
	eng->async_head = NULL;
	eng->async_tail = &eng->async_head;
	atomic_store(&eng->work, 0);
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

struct sv_engine *sv_engine_get(struct ibv_context *ctx)
{
	struct sv_engine *eng;

	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&engine_lock);
	eng = the_engine;
	if (!eng) {
		eng = calloc(1, sizeof(*eng));
		if (!eng) {
			pthread_mutex_unlock(&engine_lock);
			errno = ENOMEM;
			return NULL;
		}
		pthread_mutex_init(&eng->lock, NULL);
		pthread_mutex_init(&eng->rmem_lock, NULL);
		pthread_mutex_init(&eng->async_lock, NULL);
		pthread_rwlock_init(&eng->attach_lock, NULL);
		pthread_rwlock_init(&eng->qp_lock, NULL);
		eng->sock = eng->doorbell = eng->stopfd = eng->epfd = -1;
		eng->async_tail = &eng->async_head;
		eng->pid = getpid();
		the_engine = eng;
	}
	/* The daemon instance the engine talks to: the newest context's. */
	if (ctx && !eng->attached)
		eng->instance = to_svctx(ctx)->instance;
	pthread_mutex_unlock(&engine_lock);
	return eng;
}

/* ----------------------------------------------------- QP hooks -- */

int sv_engine_qp_add(struct sv_engine *eng, struct sv_qp *qp)
{
	int err = sv_tr_init(qp);

	if (err)
		return err;
	pthread_mutex_lock(&eng->lock);
	if (!eng->attached) {
		err = attach(eng);
		if (err) {
			pthread_mutex_unlock(&eng->lock);
			sv_tr_free(qp);
			return err;
		}
	}
	pthread_rwlock_wrlock(&eng->qp_lock);
	err = qtab_put(eng, qp->qpx.qp_base.qp_num, qp);
	pthread_rwlock_unlock(&eng->qp_lock);
	pthread_mutex_unlock(&eng->lock);
	if (err) {
		sv_tr_free(qp);
		detach(eng);
	}
	return err;
}

int sv_engine_qp_modify(struct sv_qp *qp, enum ibv_qp_state old_state,
			int attr_mask)
{
	struct sv_engine *eng = qp->eng;
	struct sv_tr *tr = tr_of(qp);
	enum ibv_qp_state st = qp->state;
	struct sv_link *link = NULL;

	if (!tr)
		return 0;
	if (st == IBV_QPS_RESET || (st == IBV_QPS_INIT && old_state == IBV_QPS_RESET)) {
		pthread_spin_lock(&qp->sq_lock);
		pthread_spin_lock(&qp->rq_lock);
		sv_tr_reset(qp);
		qp->link = NULL;
		tr->link = NULL;
		pthread_spin_unlock(&qp->rq_lock);
		pthread_spin_unlock(&qp->sq_lock);
		return 0;
	}
	if ((attr_mask & IBV_QP_STATE) && st == IBV_QPS_RTR &&
	    qp->type != IBV_QPT_UD) {
		uint32_t dqpn = qp->dest_qpn ? qp->dest_qpn : qp->attr.dest_qp_num;

		/* May fail (peer not there yet): retried at the first send;
		 * packets to nowhere end in RETRY_EXC_ERR, as on a fabric. */
		link = sv_eng_link_for_qpn(eng, dqpn);
	}
	pthread_spin_lock(&qp->sq_lock);
	pthread_spin_lock(&qp->rq_lock);
	if (attr_mask & IBV_QP_PATH_MTU)
		tr->mtu = sv_mtu_bytes(qp->attr.path_mtu);
	if (attr_mask & IBV_QP_RQ_PSN)
		tr->epsn = qp->attr.rq_psn & PSN_MASK;
	if (attr_mask & IBV_QP_SQ_PSN) {
		tr->psn = qp->attr.sq_psn & PSN_MASK;
		tr->last_ack_psn = (tr->psn - 1) & PSN_MASK;
	}
	if (attr_mask & IBV_QP_RETRY_CNT)
		tr->retry_left = qp->attr.retry_cnt;
	if (attr_mask & IBV_QP_RNR_RETRY)
		tr->rnr_left = qp->attr.rnr_retry;
	if (link) {
		qp->link = link;
		tr->link = link;
	}
	pthread_spin_unlock(&qp->rq_lock);
	pthread_spin_unlock(&qp->sq_lock);
	if (st == IBV_QPS_RTS)
		sv_req_run(qp);
	return 0;
}

void sv_engine_qp_del(struct sv_qp *qp)
{
	struct sv_engine *eng = qp->eng;
	int last;

	if (!eng || !qp->tr)
		return;
	pthread_mutex_lock(&eng->lock);
	pthread_rwlock_wrlock(&eng->qp_lock);
	qtab_del(eng, qp->qpx.qp_base.qp_num);
	last = eng->nqps == 0;
	pthread_rwlock_unlock(&eng->qp_lock);
	pthread_mutex_unlock(&eng->lock);
	sv_tr_free(qp);
	if (last)
		detach(eng);
}

void sv_engine_ctx_close(struct ibv_context *ctx)
{
	struct sv_engine *eng = the_engine;
	int last;

	if (!eng)
		return;
	pthread_mutex_lock(&eng->lock);
	pthread_rwlock_wrlock(&eng->qp_lock);
	for (uint32_t i = 0; i < eng->qcap;) {
		struct sv_qp *qp = eng->qtab[i].qp;

		if (qp && qp->qpx.qp_base.context == ctx) {
			qtab_del(eng, eng->qtab[i].qpn);
			sv_tr_free(qp);
			continue; /* the slot may hold a moved entry now */
		}
		i++;
	}
	hold_ctx_close(ctx);
	last = !engine_wanted(eng);
	pthread_rwlock_unlock(&eng->qp_lock);
	pthread_mutex_unlock(&eng->lock);
	if (last)
		detach(eng);
}

int sv_engine_mr_hold(struct ibv_context *ctx)
{
	struct sv_engine *eng = sv_engine_get(ctx);
	struct mr_hold *h;
	int err = 0;

	if (!eng)
		return -errno;
	pthread_mutex_lock(&eng->lock);
	h = hold_find(ctx);
	if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h) {
			pthread_mutex_unlock(&eng->lock);
			return -ENOMEM;
		}
		h->ctx = ctx;
		h->instance = to_svctx(ctx)->instance;
		h->ufile = to_svctx(ctx)->ufile;
		h->next = mr_holds;
		mr_holds = h;
	}
	if (!eng->attached)
		err = attach(eng);
	if (!err) {
		h->nmr++;
		mr_holds_total++;
	}
	pthread_mutex_unlock(&eng->lock);
	return err;
}

void sv_engine_mr_release(struct ibv_context *ctx)
{
	struct sv_engine *eng = the_engine;
	struct mr_hold *h;

	if (!eng)
		return;
	pthread_mutex_lock(&eng->lock);
	h = hold_find(ctx);
	if (!h || !h->nmr) {
		/* Moved to another view of the ufile (rereg CHANGE_PD). */
		for (h = mr_holds; h; h = h->next)
			if (h->nmr && h->ufile == to_svctx(ctx)->ufile &&
			    h->instance == to_svctx(ctx)->instance)
				break;
	}
	if (h && h->nmr) {
		h->nmr--;
		mr_holds_total--;
	}
	pthread_mutex_unlock(&eng->lock);
}

void sv_engine_kick_sq(struct sv_qp *qp)
{
	if (qp->tr)
		sv_req_run(qp);
}

void sv_engine_kick_rq(struct sv_qp *qp)
{
	(void)qp; /* peers waiting on RNR retry on their timer */
}

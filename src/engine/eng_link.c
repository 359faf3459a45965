/* SPDX-License-Identifier: MIT */
/*
 * Links between engines (architecture.md "Data path").  Per engine pair, one
 * SPSC ring per direction (sv_ring.h) in a memfd the sender creates and
 * seals before anyone else sees it; SV_OP_LINK_CONNECT hands it to the
 * receiver (the daemon pushes it on the receiver's engine socket) and
 * returns the receiver's doorbell.  A QP in this process is reached
 * through a loopback ring, the same code path.
 *
 * Faults.  SOFTVERBS_FAULT=drop:P,dup:P,reorder:P makes every link lossy
 * at commit time; RC hides it (NAK-sequence and timeouts resume a long
 * SEND/WRITE at the PSN the responder expects and a READ at its first
 * missing response), UC loses whole messages.  A fault plan on one QP
 * (eng_fault.c) decides first, packet by packet.
 */
#include "engine_int.h"
#include "sv_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * Every page of a ring mapping is faulted in when the link is made, as a
 * NIC's queues are pinned when they are created, not on the data path:
 * on the VMs we test on a first touch costs 6-14 us a page even after
 * MAP_POPULATE, so the first lap of a 1 MiB ring cost each side ~3 ms of
 * a stream of small messages.  Writing is for a ring nobody else has yet
 * (its pages are zero); reading for a peer's.
 */
void sv_map_touch(void *map, size_t len, int write)
{
	volatile uint8_t *p = map;

	for (size_t off = 0; off < len; off += 4096) {
		if (write)
			p[off] = 0;
		else
			(void)p[off];
	}
}

static int make_ring(size_t size, int *fdp, void **mapp)
{
	int fd = memfd_create("softverbs-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;

	if (fd < 0)
		return -errno;
	/* Sealed before it leaves us: neither side may shrink it under the
	 * other's mapping (the receiver refuses an unsealed ring). */
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		close(fd);
		return -errno;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		 fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -errno;
	}
	sv_map_touch(p, size, 1);
	*fdp = fd;
	*mapp = p;
	return 0;
}

int sv_add_inring(struct sv_engine *eng, void *map, size_t len,
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
	/* A progress thread asleep armed every ring it knew: this one is not
	 * armed, and its producer would never ring.  Wake it to arm it. */
	sv_eng_ring(eng);
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
	l->peer_db = -1;
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

struct sv_link *sv_link_new(struct sv_engine *eng, uint32_t peer, size_t ring,
			    size_t size)
{
	struct sv_link *l;
	int fd, err;

	l = link_alloc(eng, peer, ring, size, &fd);
	if (!l)
		return NULL;
	err = link_connect(eng, l, size, fd);
	if (err) {
		sv_dbg("engine %u: link to engine %u: %s", eng->id, peer,
		       strerror(-err));
		munmap(l->map, size);
		free(l);
		return NULL;
	}
	return l;
}

void sv_link_free(struct sv_link *l, int close_fds)
{
	free(l->held);
	if (close_fds && l->peer_db >= 0)
		close(l->peer_db);
	munmap(l->map, l->map_len);
	free(l);
}

struct sv_link *sv_link_get(struct sv_engine *eng, uint32_t peer)
{
	size_t ring = SV_RING_DATA_OFF + SV_ENG_RING_BYTES;
	struct sv_link *l;
	int fd;

	for (l = eng->links; l; l = l->next)
		if (l->peer_id == peer && !atomic_load(&l->dead))
			return l;
	if (!eng->attached)
		return NULL;
	if (peer != eng->id) {
		/* Packets only: boxes travel on rlinks. */
		l = sv_link_new(eng, peer, ring, ring);
	} else {
		/* Loopback: we consume what we produce. */
		l = link_alloc(eng, peer, ring, ring, &fd);
		if (!l)
			return NULL;
		close(fd);
		l->peer_pid = eng->pid;
		l->cma = 1;
		l->peer_db = fcntl(eng->doorbell, F_DUPFD_CLOEXEC, 0);
		if (l->peer_db < 0 ||
		    sv_add_inring(eng, l->map, ring, ring, 0, peer, 0)) {
			sv_link_free(l, 1);
			l = NULL;
		}
	}
	if (!l)
		return NULL;
	l->next = eng->links;
	eng->links = l;
	if (peer == eng->id)
		eng->loop = l;
	return l;
}

uint32_t sv_lookup_engine(struct sv_engine *eng, uint32_t qpn, uint32_t flags,
			  struct sv_qpn_rep *out)
{
	struct sv_qpn_req req = { .qpn = qpn, .flags = flags };
	struct sv_qpn_rep rep;

	if (sv_call_simple(SV_OP_QPN_LOOKUP, 0, eng->instance, -1, &req,
			   sizeof(req), &rep, sizeof(rep)))
		return 0;
	if (out)
		*out = rep;
	return rep.engine_id;
}

struct sv_link *sv_eng_link_for_qpn(struct sv_engine *eng, uint32_t qpn)
{
	struct sv_link *l = NULL;
	uint32_t peer = 0, slot = qpn & 255;

	sv_lock_read(&eng->qp_lock, SV_LOCK_QPTAB);
	if (sv_eng_qp(eng, qpn))
		peer = eng->id;
	sv_unlock_rw(&eng->qp_lock);

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	if (!peer && eng->dcache[slot].qpn == qpn && eng->dcache[slot].engine_id)
		peer = eng->dcache[slot].engine_id;
	sv_unlock_mutex(&eng->lock);
	if (!peer) {
		peer = sv_lookup_engine(eng, qpn, 0, NULL);
		if (!peer)
			return NULL;
	}
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	eng->dcache[slot].qpn = qpn;
	eng->dcache[slot].engine_id = peer;
	l = sv_link_get(eng, peer);
	sv_unlock_mutex(&eng->lock);
	return l;
}

/* ------------------------------------------------- fault injection -- */

/*
 * SOFTVERBS_FAULT (tests; docs/environment.md): comma-separated items,
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
	char *copy, *save = NULL, *it, *seg, *segs = NULL;

	if (!env || !*env)
		return;
	copy = strdup(env);
	if (!copy)
		return;
	fault.seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
	/* ';' separates fault plans (with '=': eng_fault.c) from these. */
	for (seg = strtok_r(copy, ";", &segs); seg; seg = strtok_r(NULL, ";", &segs))
	for (it = strchr(seg, '=') ? NULL : strtok_r(seg, ",", &save); it;
	     it = strtok_r(NULL, ",", &save)) {
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

int sv_fault_init(void)
{
	pthread_once(&fault_once, fault_parse);
	return fault.on;
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

int sv_fault_pick(struct sv_link *l, const uint8_t *bth, uint32_t len,
		  uint64_t *delay_ns)
{
	double r;

	switch (sv_fault_packet(bth, len, delay_ns)) {
	case SV_FP_DROP:
		return SV_FAULT_DROP;
	case SV_FP_DUP:
		return SV_FAULT_DUP;
	case SV_FP_REORDER:
		return SV_FAULT_REORDER;
	case SV_FP_DELAY:
		return SV_FAULT_DELAY;
	}
	if (!fault.on)
		return SV_FAULT_NONE;
	r = fault_roll(l);
	if (r < fault.drop)
		return SV_FAULT_DROP;
	r -= fault.drop;
	if (r < fault.reorder)
		return SV_FAULT_REORDER;
	r -= fault.reorder;
	return r < fault.dup ? SV_FAULT_DUP : SV_FAULT_NONE;
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
 * tx_lock.  Returns the ring's "consumer armed" answer.  Only packets are
 * lost: owner events are not on any wire. */
static int fault_commit(struct sv_link *l)
{
	uint8_t copy[SV_ENG_MAX_PKT + SV_GRH_BYTES];
	uint32_t len = l->cur_len, type = l->cur_type;
	uint32_t grh = type & SV_REC_F_GRH ? SV_GRH_BYTES : 0;
	uint64_t delay_ns = 0;
	int a = SV_FP_NONE;

	if ((type & 0xffff) != SV_REC_PKT)
		return sv_ring_commit(&l->tx);
	/* A plan on the sending QP decides first (eng_fault.c), then the
	 * process-wide probabilities. */
	if (len > grh)
		a = sv_fault_packet(l->cur + grh, len - grh, &delay_ns);
	if (a == SV_FP_NONE && fault.on) {
		double r = fault_roll(l);

		if (r < fault.drop)
			a = SV_FP_DROP;
		else if ((r -= fault.drop) < fault.reorder && !l->held)
			a = SV_FP_REORDER;
		else if (r - fault.reorder < fault.dup)
			a = SV_FP_DUP;
	}
	if (a == SV_FP_DROP ||
	    (a == SV_FP_DELAY &&
	     !sv_fault_late_add(l, l->cur, len, type, delay_ns))) {
		/* Not sent (now): the reservation is given back. */
		l->tx.pending = l->cur_prev;
		return 0;
	}
	if (a == SV_FP_REORDER && !l->held && len <= sizeof(copy)) {
		l->held = malloc(len ? len : 1);
		if (l->held) {
			memcpy(l->held, l->cur, len);
			l->held_len = len;
			l->held_type = type;
			l->tx.pending = l->cur_prev;
			return 0;
		}
	}
	if (a == SV_FP_DUP && len <= sizeof(copy)) {
		memcpy(copy, l->cur, len);
		fault_append(l, copy, len, type);
	}
	if (l->held) {
		fault_append(l, l->held, l->held_len, l->held_type);
		free(l->held);
		l->held = NULL;
	}
	return sv_ring_commit(&l->tx);
}

uint8_t *sv_link_reserve_type(struct sv_link *link, uint32_t len,
			      uint32_t type, int *dead)
{
	uint8_t *p;

	if (link->w)
		return sv_wire_reserve(link, len, type, dead);
	*dead = atomic_load_explicit(&link->dead, memory_order_relaxed);
	if (*dead)
		return NULL;
	sv_lock_spin(&link->tx_lock, SV_LOCK_TX);
	link->cur_prev = link->tx.pending;
	p = sv_ring_reserve(&link->tx, len, type);
	if (!p) {
		sv_unlock_spin(&link->tx_lock);
		return NULL;
	}
	link->cur = p;
	link->cur_len = len;
	link->cur_type = type;
	return p;
}

uint8_t *sv_link_reserve(struct sv_link *link, uint32_t len, int grh,
			 int *dead)
{
	return sv_link_reserve_type(link, len,
				    SV_REC_PKT | (grh ? SV_REC_F_GRH : 0), dead);
}

void sv_link_ring(struct sv_link *link)
{
	uint64_t one = 1;

	if (link->peer_db >= 0 && write(link->peer_db, &one, sizeof(one)) < 0 &&
	    errno != EAGAIN)
		sv_dbg("doorbell of engine %u: %s", link->peer_id,
		       strerror(errno));
}

/*
 * Publishing in batches.  Inside sv_link_batch_begin/end (a requester
 * run: one thread, a QP's WQEs), records committed on a ring stay
 * reserved but unpublished until the end, and then appear together: the
 * consumer's cache line with tail moves once per run instead of once per
 * packet.  Another producer of the same ring publishes them with its own
 * (they come first: reservations are in order), and ring_idle (sv_direct.c)
 * counts them as not yet consumed.  Fault injection publishes one by one,
 * and so do big records: a message of MTU-sized packets gains nothing
 * from it, and a consumer that sees its packets at once empties the ring
 * sooner, so the next big message can go direct again.
 */
#define SV_LAZY_LINKS 8
#define SV_LAZY_MAX_REC 512 /* bytes of a record kept back at most */
static __thread struct {
	int depth, n;
	struct sv_link *link[SV_LAZY_LINKS];
} lazy;

void sv_link_batch_begin(void)
{
	lazy.depth++;
}

void sv_link_batch_end(void)
{
	if (--lazy.depth)
		return;
	for (int i = 0; i < lazy.n; i++) {
		struct sv_link *l = lazy.link[i];
		int ring;

		sv_lock_spin(&l->tx_lock, SV_LOCK_TX);
		ring = sv_ring_commit(&l->tx);
		sv_unlock_spin(&l->tx_lock);
		if (ring)
			sv_link_ring(l);
	}
	lazy.n = 0;
}

/* Keeps link's commit for sv_link_batch_end: 1, or 0 (publish now). */
static int lazy_keep(struct sv_link *link)
{
	if (!lazy.depth || fault.on || sv_fault_npkt ||
	    link->cur_len > SV_LAZY_MAX_REC)
		return 0;
	for (int i = 0; i < lazy.n; i++)
		if (lazy.link[i] == link)
			return 1;
	if (lazy.n == SV_LAZY_LINKS)
		return 0;
	lazy.link[lazy.n++] = link;
	return 1;
}

void sv_link_commit(struct sv_link *link)
{
	int ring;

	if (link->w) {
		sv_wire_commit(link);
		return;
	}
	if (lazy_keep(link)) {
		sv_unlock_spin(&link->tx_lock);
		return;
	}
	ring = fault.on || __atomic_load_n(&sv_fault_npkt, __ATOMIC_RELAXED) ?
		       fault_commit(link) :
		       sv_ring_commit(&link->tx);

	sv_unlock_spin(&link->tx_lock);
	if (ring)
		sv_link_ring(link);
}

int sv_link_cur(struct sv_link *l, uint8_t **p, uint32_t *len, uint32_t *type)
{
	if (l->w)
		return sv_wire_cur(l, p, len, type);
	*p = l->cur;
	*len = l->cur_len;
	*type = l->cur_type;
	return l->cur != NULL;
}

void sv_link_abort(struct sv_link *link)
{
	if (link->w) {
		sv_wire_abort(link);
		return;
	}
	link->tx.pending = link->cur_prev; /* this record only */
	sv_unlock_spin(&link->tx_lock);
}

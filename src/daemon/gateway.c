/* SPDX-License-Identifier: MIT */
/*
 * The wire gateway: the namespace's RoCE v2 port (docs/wire.md,
 * sv_wire.h).
 *
 * One UDP port per network namespace can be bound, and a RoCE v2 peer
 * sends every packet to port 4791 whatever its destination QP, so the
 * daemon binds it and shares it: every engine on the wire gets a
 * duplicate of the socket and the shared page (SV_OP_WIRE_ATTACH), and
 * whoever polls reads, one reader at a time, steering each packet to the
 * engine serving its QP.  An application that polls its CQ thus takes
 * its packets itself.  This file's thread reads only while no engine has
 * read for SV_WIRE_HANDOFF_NS (they all sleep): it copies each packet
 * into the serving engine's gateway ring (shared memory, sv_ring.h, one
 * per engine on the wire, this thread its only producer) and rings the
 * engine's doorbell when its consumer sleeps.  Sending needs no daemon:
 * engines send their own datagrams (eng_wire.c).
 *
 * A packet on a ring is a GRH (the IPv6 header the packet came in, or an
 * IPv4 header's fields in IPv6 form for IPv4-mapped GIDs: what a UD
 * receive needs) then BTH .. payload with the pad removed and the pad
 * count cleared: the engines' ring format (sv_hdr.h).
 *
 * Locking: the thread's state (QPN table, engine rings) is under svd_gw.lock;
 * the main thread takes it to add and remove QPs and engines.  The thread
 * holds it for one batch, never across a system call other than the
 * doorbells' writes; it lets go while it waits for room in a full ring
 * (reserve_waiting).
 *
 * A full ring.  The engine behind it is descheduled (a loaded machine) or
 * stopped.  Dropping the packet would cost RC a retransmission and lose a
 * UC message on a link that lost nothing, so the thread waits for room,
 * up to GW_FULL_WAIT_NS, reading nothing meanwhile (the socket's 32 MiB
 * buffer takes what comes).  An engine that lets the wait run out is
 * stopped, not slow: its packets are dropped at once (rx_ring_full) until
 * its ring takes one again, so it costs the namespace one wait.
 */
#include "svd_gw.h"
#include "svd_capture.h"
#include "svd_cm.h"
#include "sv_log.h"
#include "sv_hdr.h"
#include "sv_portd.h"
#include "sv_ring.h"
#include "sv_sock.h"
#include "sv_roce.h"
#include "sv_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "gw_int.h"

struct svd_gw_state svd_gw = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .wake = -1,
			   .shm_fd = -1, .portd = -1,
			   .lreply_cond = PTHREAD_COND_INITIALIZER };


/* ------------------------------------------------------- QPN table -- */

static uint32_t qhash(uint32_t qpn, uint32_t cap)
{
	return (qpn * 2654435761u) & (cap - 1);
}

static struct gw_qpent *qfind(uint32_t qpn)
{
	if (!svd_gw.qcap)
		return NULL;
	for (uint32_t i = qhash(qpn, svd_gw.qcap);; i = (i + 1) & (svd_gw.qcap - 1)) {
		if (svd_gw.qtab[i].qpn == qpn)
			return &svd_gw.qtab[i];
		if (!svd_gw.qtab[i].qpn)
			return NULL;
	}
}

static int qput(uint32_t qpn, pid_t pid)
{
	struct gw_qpent *e;

	if ((svd_gw.nq + 1) * 2 > svd_gw.qcap) {
		uint32_t ncap = svd_gw.qcap ? svd_gw.qcap * 2 : 64;
		struct gw_qpent *n = calloc(ncap, sizeof(*n)), *old = svd_gw.qtab;
		uint32_t ocap = svd_gw.qcap;

		if (!n)
			return -ENOMEM;
		svd_gw.qtab = n;
		svd_gw.qcap = ncap;
		for (uint32_t i = 0; i < ocap; i++)
			if (old[i].qpn) {
				uint32_t j = qhash(old[i].qpn, ncap);

				while (n[j].qpn)
					j = (j + 1) & (ncap - 1);
				n[j] = old[i];
			}
		free(old);
	}
	e = qfind(qpn);
	if (!e) {
		uint32_t j = qhash(qpn, svd_gw.qcap);

		while (svd_gw.qtab[j].qpn)
			j = (j + 1) & (svd_gw.qcap - 1);
		e = &svd_gw.qtab[j];
		e->qpn = qpn;
		svd_gw.nq++;
	}
	e->pid = pid;
	return 0;
}

/* Removes by backward shift (linear probing stays valid). */
static void qdel(uint32_t qpn)
{
	struct gw_qpent *e = qfind(qpn);
	uint32_t i, j;

	if (!e)
		return;
	i = (uint32_t)(e - svd_gw.qtab);
	svd_gw.qtab[i].qpn = 0;
	svd_gw.nq--;
	for (j = (i + 1) & (svd_gw.qcap - 1); svd_gw.qtab[j].qpn;
	     j = (j + 1) & (svd_gw.qcap - 1)) {
		uint32_t h = qhash(svd_gw.qtab[j].qpn, svd_gw.qcap);

		/* Entry j may move to the hole at i if its home is not in
		 * the (cyclic) range (i, j]. */
		if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
			svd_gw.qtab[i] = svd_gw.qtab[j];
			svd_gw.qtab[j].qpn = 0;
			i = j;
		}
	}
}

void svd_gw_qp_add(uint32_t qpn, pid_t pid)
{
	pthread_mutex_lock(&svd_gw.lock);
	if (qput(qpn, pid))
		sv_warn("wire: no memory for QP %#x: its packets are dropped",
			qpn);
	else if (svd_gw.shm) /* made at start (svd_gw_init) */
		atomic_fetch_or_explicit(sv_wire_qpn_byte(svd_gw.shm, qpn),
					 (uint8_t)(1u << (qpn & 7)),
					 memory_order_release);
	pthread_mutex_unlock(&svd_gw.lock);
}

void svd_gw_qp_del(uint32_t qpn)
{
	pthread_mutex_lock(&svd_gw.lock);
	qdel(qpn);
	if (svd_gw.shm)
		atomic_fetch_and_explicit(sv_wire_qpn_byte(svd_gw.shm, qpn),
					  (uint8_t)~(1u << (qpn & 7)),
					  memory_order_release);
	pthread_mutex_unlock(&svd_gw.lock);
}

static struct gw_eng *eng_by_pid(pid_t pid)
{
	for (struct gw_eng *e = svd_gw.engs; e; e = e->next)
		if (e->pid == pid)
			return e;
	return NULL;
}

static void eng_free(struct gw_eng *e)
{
	munmap(e->map, e->map_len);
	close(e->doorbell);
	free(e);
}

void svd_gw_engine_gone(pid_t pid)
{
	struct gw_eng **pp, *e = NULL;

	pthread_mutex_lock(&svd_gw.lock);
	for (pp = &svd_gw.engs; *pp; pp = &(*pp)->next)
		if ((*pp)->pid == pid) {
			e = *pp;
			*pp = e->next;
			break;
		}
	pthread_mutex_unlock(&svd_gw.lock);
	if (e)
		eng_free(e);
}

/* A ring record for QP1: a UD SEND to the CM, queued for the main
 * thread.  Must hold svd_gw.lock. */
void svd_gw_qp1_queue(const uint8_t *rec, size_t len)
{
	const uint8_t *b = rec + SV_GRH_BYTES;
	struct gw_udq *q;
	size_t hl = SV_BTH_BYTES + SV_DETH_BYTES;

	/* UD SEND only (0x64), a DETH, a payload that fits. */
	if (len < SV_GRH_BYTES + hl || __bth_opcode(b) != 0x64 ||
	    len - SV_GRH_BYTES - hl > SV_GW_UD_MAX || svd_gw.nudq >= GW_UDQ_MAX) {
		atomic_fetch_add_explicit(&svd_gw.shm->rx_malformed, 1,
					  memory_order_relaxed);
		return;
	}
	q = calloc(1, sizeof(*q));
	if (!q)
		return;
	memcpy(q->u.sgid, grh_sgid(rec), 16);
	memcpy(q->u.dgid, grh_dgid(rec), 16);
	q->u.tclass = __grh_tclass(rec);
	q->u.flow_label = __grh_flow(rec);
	q->u.hop_limit = __grh_hop(rec);
	q->u.pkey = __bth_pkey(b);
	q->u.dst_qpn = __bth_qpn(b);
	q->u.qkey = __deth_qkey(b + SV_BTH_BYTES);
	q->u.src_qpn = __deth_sqp(b + SV_BTH_BYTES);
	q->u.len = (uint32_t)(len - SV_GRH_BYTES - hl);
	memcpy(q->u.data, b + hl, q->u.len);
	memcpy(q->hdr, b, hl);
	if (!svd_gw.udq_tail)
		svd_gw.udq_tail = &svd_gw.udq;
	*svd_gw.udq_tail = q;
	svd_gw.udq_tail = &q->next;
	svd_gw.nudq++;
}

void svd_gw_qp1_record(const uint8_t *rec, size_t len)
{
	pthread_mutex_lock(&svd_gw.lock);
	svd_gw_qp1_queue(rec, len);
	pthread_mutex_unlock(&svd_gw.lock);
	svd_cm_kick();
}

/* A QP1 datagram the daemon sent (dir 0) or received (dir 1) goes to
 * the capture sessions: ib is BTH .. payload and pad, without ICRC. */
static void qp1_capture(uint32_t dir, const struct svd_gw_ud *u,
			const uint8_t *ib, uint32_t ib_len)
{
	struct sv_cap_rec r;
	struct timespec ts;

	memset(&r, 0, sizeof(r));
	clock_gettime(CLOCK_REALTIME, &ts);
	r.ts_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	r.dir = dir;
	r.ib_len = ib_len;
	r.pid = (uint32_t)getpid();
	r.qpn = 1;
	r.flow.ipv6 = !(sv_gid_is_v4(u->sgid) && sv_gid_is_v4(u->dgid));
	r.flow.tclass = u->tclass;
	r.flow.flow_label = u->flow_label & 0xfffff;
	r.flow.hop_limit = u->hop_limit ? u->hop_limit : 64;
	r.flow.sport = svd_gw.port;
	r.flow.dport = svd_gw.port;
	memcpy(r.flow.sgid, u->sgid, 16);
	memcpy(r.flow.dgid, u->dgid, 16);
	svd_capture_frame(&r, ib);
}

int svd_gw_ud_pop(struct svd_gw_ud *u)
{
	uint8_t ib[SV_BTH_BYTES + SV_DETH_BYTES + SV_GW_UD_MAX];
	struct gw_udq *q;

	pthread_mutex_lock(&svd_gw.lock);
	q = svd_gw.udq;
	if (q) {
		svd_gw.udq = q->next;
		if (!svd_gw.udq)
			svd_gw.udq_tail = &svd_gw.udq;
		svd_gw.nudq--;
	}
	pthread_mutex_unlock(&svd_gw.lock);
	if (!q)
		return 0;
	*u = q->u;
	memcpy(ib, q->hdr, sizeof(q->hdr));
	memcpy(ib + sizeof(q->hdr), u->data, u->len);
	qp1_capture(1, u, ib, (uint32_t)sizeof(q->hdr) + u->len);
	free(q);
	return 1;
}

static int gw_start(void);

static uint64_t now_ms(void)
{
	return svd_gw_now_ns() / 1000000;
}

int svd_gw_ud_send(const struct svd_gw_ud *u)
{
	uint8_t pkt[SV_BTH_BYTES + SV_DETH_BYTES + SV_GW_UD_MAX + 3 +
		    SV_ICRC_BYTES];
	struct sv_roce_flow f = { 0 };
	uint32_t len = SV_BTH_BYTES + SV_DETH_BYTES + u->len;
	uint32_t pad = (0u - len) & 3, icrc;
	union {
		uint8_t b[SV_WIRE_CTL_BYTES];
		struct cmsghdr align;
	} ctl = { { 0 } };
	struct sockaddr_in6 dst;
	struct iovec iov;
	struct msghdr mh = { 0 };
	int v4 = sv_gid_is_v4(u->sgid) && sv_gid_is_v4(u->dgid);

	int fd, v6;

	/* Not ours (another process has it): the CM hears at once, rather
	 * than a peer that never answers. */
	if (gw_start())
		return -ENETDOWN;
	pthread_mutex_lock(&svd_gw.lock);
	fd = svd_gw.fd;
	v6 = svd_gw.v6;
	pthread_mutex_unlock(&svd_gw.lock);
	if (u->len > SV_GW_UD_MAX || (!v6 && !v4))
		return -EINVAL;
	memset(pkt, 0, sizeof(pkt));
	pthread_mutex_lock(&svd_gw.lock);
	svd_gw.ud_psn = (svd_gw.ud_psn + 1) & 0xffffff;
	/* UD SEND only (0x64), MigReq 0 */
	bth_init(pkt, 0x64, 0, u->pkey, u->dst_qpn, 0, svd_gw.ud_psn);
	pthread_mutex_unlock(&svd_gw.lock);
	bth_set_mig(pkt, 0);
	bth_set_pad(pkt, pad);
	deth_set(pkt + SV_BTH_BYTES, u->qkey, u->src_qpn);
	memcpy(pkt + SV_BTH_BYTES + SV_DETH_BYTES, u->data, u->len);
	len += pad;
	f.ipv6 = !v4;
	f.tclass = u->tclass;
	f.flow_label = u->flow_label & 0xfffff;
	f.hop_limit = u->hop_limit;
	f.sport = svd_gw.port;
	f.dport = svd_gw.port;
	memcpy(f.sgid, u->sgid, 16);
	memcpy(f.dgid, u->dgid, 16);
	icrc = sv_icrc(&f, pkt, len);
	memcpy(pkt + len, &icrc, SV_ICRC_BYTES);
	iov = (struct iovec){ pkt, len + SV_ICRC_BYTES };
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = ctl.b;
	mh.msg_controllen = sv_wire_address(&f, v6 ? AF_INET6 : AF_INET,
					    &dst, ctl.b);
	mh.msg_name = &dst;
	mh.msg_namelen = v6 ? sizeof(struct sockaddr_in6) :
			      sizeof(struct sockaddr_in);
	if (sendmsg(fd, &mh, MSG_DONTWAIT) < 0) {
		int err = -errno;

		atomic_fetch_add_explicit(&svd_gw.shm->tx_errors, 1,
					  memory_order_relaxed);
		return err;
	}
	qp1_capture(0, u, pkt, len);
	atomic_fetch_add_explicit(&svd_gw.shm->tx_pkts, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&svd_gw.shm->tx_bytes, len + SV_ICRC_BYTES,
				  memory_order_relaxed);
	return 0;
}

/* Copies a group's packet to the ring of each attached QP's engine, each
 * copy naming its QP (gw_mcast.c "Delivery").  Must hold svd_gw.lock. */
static void deliver_mcast(const struct sv_wire_pkt *p)
{
	const struct svd_mcg *g = svd_gw_mcast_find(grh_dgid(p->rec));
	uint32_t sent = 0;

	for (uint32_t i = 0; g && i < g->n; i++) {
		struct gw_qpent *q = qfind(g->qpn[i]);
		struct gw_eng *e = q ? eng_by_pid(q->pid) : NULL;
		uint8_t *r = e ? sv_ring_reserve(&e->prod, p->rec_len,
						 SV_GW_REC_PKT) :
				 NULL;

		if (!r)
			continue;
		memcpy(r, p->rec, p->rec_len);
		st_be24(r + SV_GRH_BYTES + 5, g->qpn[i]);
		if (sv_ring_commit(&e->prod))
			e->ring = 1;
		sent++;
	}
	atomic_fetch_add_explicit(sent ? &svd_gw.shm->rx_pkts : &svd_gw.shm->rx_no_qp,
				  1, memory_order_relaxed);
	if (sent)
		atomic_fetch_add_explicit(&svd_gw.shm->rx_bytes, p->ib_len,
					  memory_order_relaxed);
}

/* Wakes engine e's consumer (its ring's records wait).  Must hold
 * svd_gw.lock. */
static void ring_doorbell(struct gw_eng *e)
{
	uint64_t one = 1;

	e->ring = 0;
	if (write(e->doorbell, &one, sizeof(one)) < 0 && errno != EAGAIN)
		sv_dbg("wire: doorbell of engine %u: %s", e->engine_id,
		       strerror(errno));
}

/* Room for a record of len bytes in the ring of the engine serving qpn,
 * *ep: waits while it is full (see "A full ring" above), the lock let go
 * meanwhile, so the engine is looked up again (*ep: NULL when it went).
 * Must hold svd_gw.lock.  The record, or NULL. */
static uint8_t *reserve_waiting(uint32_t qpn, struct gw_eng **ep,
				uint32_t len)
{
	const struct timespec nap = { 0, 20 * 1000 };
	struct gw_eng *e = *ep;
	uint8_t *r = sv_ring_reserve(&e->prod, len, SV_GW_REC_PKT);
	uint64_t until;

	if (r)
		e->stuck = 0;
	if (r || e->stuck)
		return r;
	until = svd_gw_now_ns() + GW_FULL_WAIT_NS;
	do {
		struct gw_qpent *q;

		/* Its consumer may sleep on what this batch committed. */
		ring_doorbell(e);
		pthread_mutex_unlock(&svd_gw.lock);
		nanosleep(&nap, NULL);
		pthread_mutex_lock(&svd_gw.lock);
		q = qfind(qpn);
		*ep = e = q ? eng_by_pid(q->pid) : NULL;
		if (!e)
			return NULL;
		r = sv_ring_reserve(&e->prod, len, SV_GW_REC_PKT);
	} while (!r && svd_gw_now_ns() < until);
	e->stuck = !r;
	return r;
}

/* Delivers one checked packet.  Must hold svd_gw.lock. */
static void deliver(const struct sv_wire_pkt *p)
{
	struct gw_qpent *q = qfind(p->qpn);
	struct gw_eng *e = q ? eng_by_pid(q->pid) : NULL;
	uint8_t *r;

	if (p->qpn == SV_MCAST_QPN) {
		deliver_mcast(p);
		return;
	}
	if (p->qpn == 1) {
		svd_gw_qp1_queue(p->rec, p->rec_len);
		svd_gw.qp1_kick = 1;
		return;
	}
	if (!e) {
		atomic_fetch_add_explicit(&svd_gw.shm->rx_no_qp, 1, memory_order_relaxed);
		return;
	}
	r = reserve_waiting(p->qpn, &e, p->rec_len);
	if (!r) {
		atomic_fetch_add_explicit(e ? &svd_gw.shm->rx_ring_full :
					      &svd_gw.shm->rx_no_qp,
					  1, memory_order_relaxed);
		return;
	}
	memcpy(r, p->rec, p->rec_len);
	if (sv_ring_commit(&e->prod))
		e->ring = 1;
	atomic_fetch_add_explicit(&svd_gw.shm->rx_pkts, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&svd_gw.shm->rx_bytes, p->ib_len, memory_order_relaxed);
}

uint64_t svd_gw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reads what waits on the port (the engines are all asleep).  Returns 0
 * when an engine holds the port's turn: nothing was read. */
static int rx_batch(struct sv_wire_rxb *b)
{
	static uint32_t me;
	int n, kick;

	if (!me)
		me = (uint32_t)getpid(); /* the thread's, once */
	if (!sv_wire_rx_trylock(svd_gw.shm, me, svd_gw_now_ns()))
		return 0; /* an engine reads */
	n = sv_wire_recv(svd_gw.fd, b, SV_WIRE_BATCH);
	pthread_mutex_lock(&svd_gw.lock);
	for (int i = 0; i < n; i++) {
		uint32_t np = sv_wire_rx_packets(b, i);

		/* Each packet of a UDP_GRO aggregate alone (sv_wire.h). */
		for (uint32_t k = 0; k < np; k++) {
			struct sv_wire_pkt p;
			uint32_t len;
			uint8_t *buf = sv_wire_rx_packet(b, i, k, &len);
			int err;

			if (buf && sv_wire_qpn_missing(svd_gw.shm,
						       buf + SV_WIRE_HEADROOM, len)) {
				atomic_fetch_add_explicit(&svd_gw.shm->rx_no_qp, 1,
							  memory_order_relaxed);
				continue;
			}
			err = buf ? sv_wire_rx_parse(&b->mm[i].msg_hdr, len, buf,
						     svd_gw.port, &p) :
				    -EINVAL;
			if (err == -EBADMSG)
				atomic_fetch_add_explicit(&svd_gw.shm->rx_bad_icrc,
							  1, memory_order_relaxed);
			else if (err)
				atomic_fetch_add_explicit(&svd_gw.shm->rx_malformed,
							  1, memory_order_relaxed);
			else
				deliver(&p);
		}
	}
	for (struct gw_eng *e = svd_gw.engs; e; e = e->next)
		if (e->ring)
			ring_doorbell(e);
	kick = svd_gw.qp1_kick;
	svd_gw.qp1_kick = 0;
	pthread_mutex_unlock(&svd_gw.lock);
	sv_wire_rx_unlock(svd_gw.shm, me);
	if (kick)
		svd_cm_kick();
	return 1;
}

/* The port was readable but an engine held its turn: the gateway leaves
 * the port out of its poll this long.  Polled again at once, a socket
 * with datagrams waiting answers at once, and the thread would spin
 * until the holder lets go -- on a machine of 2 CPUs, in the holder's
 * own time: a preempted holder waits for the next tick, milliseconds. */
#define GW_HELD_NS 200000ull
/* While engines read, the thread looks again whether they stopped after
 * SV_WIRE_HANDOFF_NS, then twice as late each time it finds them still
 * reading, up to this: each look is a wake-up, and a wake-up takes a CPU
 * from an application that polls (on 2 CPUs, a thousand a second pushed
 * an ib_send_lat's 99.9th percentile between two namespaces from about
 * 60 to 600 us).  A process's progress thread reads the port when its
 * application stops polling (eng_progress.c), so the daemon's look is
 * only the last resort. */
#define GW_LOOK_MAX_NS 16000000ull

/*
 * The gateway thread: reads the port while no engine does, serves the
 * port service's connection, and, while the port is not ours (another
 * process holds it, or the service restarted), tries to take it every
 * SV_WIRE_RETRY_MS -- so a daemon is back on the wire within a second of
 * the port coming free.  A port it found readable but could not take (an
 * engine held the turn) it leaves out for GW_HELD_NS.
 */
static void *gw_main(void *arg)
{
	struct sv_wire_rxb *b = malloc(sizeof(*b));
	uint64_t held_until = 0; /* the port is left out until then */
	uint64_t look = SV_WIRE_HANDOFF_NS; /* engines read: look this late */

	(void)arg;
	if (!b) {
		sv_err("wire: no memory for the receive thread");
		return NULL;
	}
	for (;;) {
		uint64_t last = atomic_load_explicit(&svd_gw.shm->poll_ns,
						     memory_order_relaxed);
		uint64_t now = svd_gw_now_ns();
		/* An engine reads (its application polls): look again when
		 * it may have stopped, without waking for every packet. */
		int engines = last && now - last < SV_WIRE_HANDOFF_NS;
		int held = now < held_until;
		int fd, conn, lost, timeout, np = 1;
		struct pollfd pf[3] = { { .fd = svd_gw.wake, .events = POLLIN } };
		struct timespec ts, *tp;

		pthread_mutex_lock(&svd_gw.lock);
		fd = svd_gw.fd;
		conn = svd_gw.portd;
		lost = svd_gw.portd_lost;
		pthread_mutex_unlock(&svd_gw.lock);
		if ((fd < 0 || lost) && now / 1000000 >= svd_gw.retry_ms) {
			/* A restarting service steers our block nowhere until
			 * we are back: look often, so RC peers' retries (half a
			 * second at timeout 14) outlast the gap. */
			svd_gw.retry_ms = now / 1000000 +
				      (lost ? SV_WIRE_RETRY_MS / 10 :
					      SV_WIRE_RETRY_MS);
			svd_gw_take_port();
			continue;
		}
		timeout = engines ?
				  1 + (int)((last + look - now) / 1000000) :
				  -1;
		look = !engines ? SV_WIRE_HANDOFF_NS :
		       look < GW_LOOK_MAX_NS ? 2 * look :
					       GW_LOOK_MAX_NS;
		if (fd < 0 || lost)
			timeout = (int)(svd_gw.retry_ms - now / 1000000) + 1;
		/* Until then (none: for ever), or the end of a hold, the
		 * port left out meanwhile. */
		tp = NULL;
		if (timeout >= 0) {
			ts = (struct timespec){ timeout / 1000,
						(long)(timeout % 1000) * 1000000 };
			tp = &ts;
		}
		if (held && !engines && fd >= 0 && !lost) {
			ts = (struct timespec){ 0, (long)(held_until - now) };
			tp = &ts;
		}
		if (conn >= 0)
			pf[np++] = (struct pollfd){ .fd = conn, .events = POLLIN };
		if (fd >= 0 && !engines && !held)
			pf[np++] = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (ppoll(pf, (nfds_t)np, tp, NULL) < 0) {
			if (errno == EINTR)
				continue;
			sv_err("wire: poll: %s", strerror(errno));
			break;
		}
		if (pf[0].revents)
			break;
		for (int i = 1; i < np; i++) {
			if (!pf[i].revents)
				continue;
			if (pf[i].fd == conn)
				svd_gw_portd_readable();
			else if (!rx_batch(b))
				held_until = svd_gw_now_ns() + GW_HELD_NS;
		}
	}
	free(b);
	return NULL;
}

static uint16_t wire_port(void)
{
	const char *e = getenv("SOFTVERBS_ROCE_PORT");
	char *end;
	long v;

	if (!e || !*e)
		return SV_ROCE_PORT;
	v = strtol(e, &end, 10);
	if (*end || v < 1 || v > 65535) {
		sv_warn("SOFTVERBS_ROCE_PORT=%s is not a port: using %d", e,
			SV_ROCE_PORT);
		return SV_ROCE_PORT;
	}
	return (uint16_t)v;
}

/* The shared page, made once (it outlives a port lost and found). */
static int shm_make(void)
{
	int fd = memfd_create("softverbs-wire-page", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, SV_WIRE_SHM_BYTES) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
		close(fd);
		return -errno;
	}
	p = mmap(NULL, SV_WIRE_SHM_BYTES, PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -errno;
	}
	svd_gw.shm = p;
	svd_gw.shm->magic = SV_WIRE_MAGIC;
	svd_gw.shm->version = SV_WIRE_VERSION;
	svd_gw.shm_fd = fd;
	return 0;
}

/* Takes the port if we can and starts the thread (once).  Main thread.
 * Returns 0 when the port is ours, else why not (-errno). */
static int gw_start(void)
{
	int err;

	if (!svd_gw.thread_on) {
		svd_gw.port = wire_port();
		if (svd_gw.wake < 0)
			svd_gw.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (svd_gw.wake < 0 || (!svd_gw.shm && shm_make()))
			return svd_gw.err = -ENOMEM;
		svd_gw_take_port();
		svd_gw.retry_ms = now_ms() + SV_WIRE_RETRY_MS;
		err = pthread_create(&svd_gw.thread, NULL, gw_main, NULL);
		if (err) {
			sv_err("wire: no receive thread: %s", strerror(err));
			return -err;
		}
		svd_gw.thread_on = 1;
	}
	pthread_mutex_lock(&svd_gw.lock);
	err = svd_gw.fd >= 0 ? 0 : svd_gw.err ? svd_gw.err : -ENOTCONN;
	pthread_mutex_unlock(&svd_gw.lock);
	return err;
}

void svd_gw_init(void)
{
	if (shm_make())
		sv_err("wire: no shared page: the wire is unavailable");
	gw_start();
}

void svd_gw_close(void)
{
	uint64_t one = 1;

	if (svd_gw.thread_on) {
		if (write(svd_gw.wake, &one, sizeof(one)) < 0)
			sv_warn("wire: cannot stop the thread");
		pthread_join(svd_gw.thread, NULL);
		svd_gw.thread_on = 0;
	}
	if (svd_gw.fd >= 0)
		close(svd_gw.fd);
	if (svd_gw.portd >= 0)
		close(svd_gw.portd);
	svd_gw.portd = -1;
	svd_gw.portd_lost = 0;
	svd_gw.block = 0;
	if (svd_gw.wake >= 0)
		close(svd_gw.wake);
	if (svd_gw.shm_fd >= 0)
		close(svd_gw.shm_fd);
	if (svd_gw.shm)
		munmap(svd_gw.shm, SV_WIRE_SHM_BYTES);
	svd_gw.shm = NULL;
	svd_gw.fd = svd_gw.wake = svd_gw.shm_fd = -1;
	while (svd_gw.engs) {
		struct gw_eng *e = svd_gw.engs;

		svd_gw.engs = e->next;
		eng_free(e);
	}
	free(svd_gw.qtab);
	svd_gw.qtab = NULL;
	svd_gw.qcap = svd_gw.nq = 0;
	while (svd_gw.udq) {
		struct gw_udq *q = svd_gw.udq;

		svd_gw.udq = q->next;
		free(q);
	}
	svd_gw.udq_tail = &svd_gw.udq;
	svd_gw.nudq = 0;
}

uint32_t svd_gw_block(void)
{
	uint32_t b;

	pthread_mutex_lock(&svd_gw.lock);
	b = svd_gw.block;
	pthread_mutex_unlock(&svd_gw.lock);
	return b;
}

int svd_gw_listen(uint64_t sid, int on)
{
	struct sv_portd_msg m = { .op = on ? SV_PORTD_LISTEN : SV_PORTD_UNLISTEN,
				  .arg = sid };
	struct timespec until;
	int err = 0;

	pthread_mutex_lock(&svd_gw.lock);
	if (svd_gw.portd < 0) {
		pthread_mutex_unlock(&svd_gw.lock);
		return 0;
	}
	svd_gw.lreply_got = 0;
	if (send(svd_gw.portd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		err = -errno;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	/* The gateway thread reads the answer (portd_readable). */
	while (on && !err && !svd_gw.lreply_got &&
	       pthread_cond_timedwait(&svd_gw.lreply_cond, &svd_gw.lock, &until) == 0)
		;
	if (on && !err)
		err = svd_gw.lreply_got ? svd_gw.lreply_err : -ETIMEDOUT;
	pthread_mutex_unlock(&svd_gw.lock);
	if (err)
		sv_warn("wire: the port service %s service ID %#llx: %s",
			on ? "refused" : "did not hear of the end of",
			(unsigned long long)sid, strerror(-err));
	return err;
}

void svd_gw_status(struct svd_gw_stats *out, int32_t *err, uint16_t *port,
		   uint32_t *block)
{
	memset(out, 0, sizeof(*out));
	if (svd_gw.shm) {
		struct sv_wire_shm *m = svd_gw.shm;

		out->rx_pkts = atomic_load(&m->rx_pkts);
		out->rx_bytes = atomic_load(&m->rx_bytes);
		out->rx_bad_icrc = atomic_load(&m->rx_bad_icrc);
		out->rx_malformed = atomic_load(&m->rx_malformed);
		out->rx_no_qp = atomic_load(&m->rx_no_qp);
		out->rx_ring_full = atomic_load(&m->rx_ring_full);
		out->rx_not_peer = atomic_load(&m->rx_not_peer);
		out->rx_too_big = atomic_load(&m->rx_too_big);
		out->tx_pkts = atomic_load(&m->tx_pkts);
		out->tx_bytes = atomic_load(&m->tx_bytes);
		out->tx_errors = atomic_load(&m->tx_errors);
	}
	pthread_mutex_lock(&svd_gw.lock);
	*err = svd_gw.fd >= 0 ? 0 : svd_gw.err ? svd_gw.err : -ENOTCONN;
	*port = svd_gw.port ? svd_gw.port : wire_port();
	if (block)
		*block = svd_gw.fd >= 0 && !svd_gw.portd_lost ? svd_gw.block : 0;
	pthread_mutex_unlock(&svd_gw.lock);
}

int svd_gw_attach(pid_t pid, uint32_t engine_id, int doorbell, int *fds,
		  uint64_t *ring_size)
{
	size_t size = SV_RING_DATA_OFF + GW_RING_DATA;
	struct gw_eng *e;
	int fd, err;

	/* A port lost to another daemon may be free by now. */
	gw_start();
	fd = memfd_create("softverbs-wire", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	e = calloc(1, sizeof(*e));
	if (!e) {
		err = -ENOMEM;
		goto err_fd;
	}
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
		err = -errno;
		goto err_free;
	}
	e->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (e->map == MAP_FAILED) {
		err = -errno;
		goto err_free;
	}
	e->doorbell = fcntl(doorbell, F_DUPFD_CLOEXEC, 0);
	if (e->doorbell < 0) {
		err = -errno;
		munmap(e->map, size);
		goto err_free;
	}
	e->map_len = size;
	e->pid = pid;
	e->engine_id = engine_id;
	sv_ring_init(e->map, size, (uint32_t)getpid());
	sv_ring_prod_init(&e->prod, e->map);
	pthread_mutex_lock(&svd_gw.lock);
	{
		struct gw_eng *old = eng_by_pid(pid), **pp;

		if (old) {
			for (pp = &svd_gw.engs; *pp != old; pp = &(*pp)->next)
				;
			*pp = old->next;
		}
		e->next = svd_gw.engs;
		svd_gw.engs = e;
		pthread_mutex_unlock(&svd_gw.lock);
		if (old)
			eng_free(old);
	}
	fds[0] = fd;
	fds[1] = svd_gw.shm_fd >= 0 ? fcntl(svd_gw.shm_fd, F_DUPFD_CLOEXEC, 0) : -1;
	*ring_size = size;
	pthread_mutex_lock(&svd_gw.lock);
	fds[2] = svd_gw.fd >= 0 ? fcntl(svd_gw.fd, F_DUPFD_CLOEXEC, 0) : -1;
	err = svd_gw.fd >= 0 ? 0 : svd_gw.err ? svd_gw.err : -ENOTCONN;
	pthread_mutex_unlock(&svd_gw.lock);
	return err;

err_free:
	free(e);
err_fd:
	close(fd);
	return err;
}

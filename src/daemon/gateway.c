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
 * Locking: the thread's state (QPN table, engine rings) is under gw.lock;
 * the main thread takes it to add and remove QPs and engines.  The thread
 * holds it for one batch, never across a system call other than the
 * doorbells' writes.
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
#include <unistd.h>

#define GW_RING_DATA (4u << 20)
/* While the port is not ours, how often the thread tries it again. */
#define SV_WIRE_RETRY_MS 1000
#define GW_RCVBUF (32 << 20)

/* An engine's ring from the gateway. */
struct gw_eng {
	pid_t pid;
	uint32_t engine_id;
	int doorbell;
	void *map;
	size_t map_len;
	struct sv_ring_prod prod;
	int ring; /* a record committed to a sleeping consumer this batch */
	struct gw_eng *next;
};

struct gw_udq {
	struct svd_gw_ud u;
	/* its BTH and DETH, for the capture */
	uint8_t hdr[SV_BTH_BYTES + SV_DETH_BYTES];
	struct gw_udq *next;
};
#define GW_UDQ_MAX 1024 /* datagrams for QP1 waiting for the CM */

struct gw_qpent {
	uint32_t qpn; /* 0: free */
	pid_t pid;
};

static struct {
	pthread_mutex_t lock;
	int fd;	    /* the RoCE port, or -1 */
	int v6;	    /* fd is AF_INET6 (dual stack) */
	int err;    /* why fd is -1 (negative errno), 0 when bound */
	int shm_fd; /* the shared page (sv_wire_shm) */
	struct sv_wire_shm *shm;
	uint16_t port;
	int wake;   /* eventfd: stop the thread */
	pthread_t thread;
	int thread_on; /* gw_main runs (from the first gw_start on) */
	struct gw_eng *engs;
	struct gw_qpent *qtab;
	uint32_t qcap, nq;
	/* The port service (sv_portd.h): its connection (-1: none; the
	 * port is then a socket we bound ourselves), the QPN block it gave
	 * us (0: none), and a LISTEN's answer for the main thread. */
	int portd;
	uint32_t block;
	int portd_lost; /* it hung up: reconnect, keeping our socket */
	int lreply_got;
	int32_t lreply_err;
	pthread_cond_t lreply_cond;
	uint64_t retry_ms; /* when the thread tries the port again */
	/* Datagrams for QP1, oldest first (under lock). */
	struct gw_udq *udq, **udq_tail;
	uint32_t nudq;
	uint32_t ud_psn;
	int qp1_kick; /* the rx thread queued some: kick the CM */
} gw = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .wake = -1, .shm_fd = -1,
	  .portd = -1, .lreply_cond = PTHREAD_COND_INITIALIZER };

/* ------------------------------------------------------- QPN table -- */

static uint32_t qhash(uint32_t qpn, uint32_t cap)
{
	return (qpn * 2654435761u) & (cap - 1);
}

static struct gw_qpent *qfind(uint32_t qpn)
{
	if (!gw.qcap)
		return NULL;
	for (uint32_t i = qhash(qpn, gw.qcap);; i = (i + 1) & (gw.qcap - 1)) {
		if (gw.qtab[i].qpn == qpn)
			return &gw.qtab[i];
		if (!gw.qtab[i].qpn)
			return NULL;
	}
}

static int qput(uint32_t qpn, pid_t pid)
{
	struct gw_qpent *e;

	if ((gw.nq + 1) * 2 > gw.qcap) {
		uint32_t ncap = gw.qcap ? gw.qcap * 2 : 64;
		struct gw_qpent *n = calloc(ncap, sizeof(*n)), *old = gw.qtab;
		uint32_t ocap = gw.qcap;

		if (!n)
			return -ENOMEM;
		gw.qtab = n;
		gw.qcap = ncap;
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
		uint32_t j = qhash(qpn, gw.qcap);

		while (gw.qtab[j].qpn)
			j = (j + 1) & (gw.qcap - 1);
		e = &gw.qtab[j];
		e->qpn = qpn;
		gw.nq++;
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
	i = (uint32_t)(e - gw.qtab);
	gw.qtab[i].qpn = 0;
	gw.nq--;
	for (j = (i + 1) & (gw.qcap - 1); gw.qtab[j].qpn;
	     j = (j + 1) & (gw.qcap - 1)) {
		uint32_t h = qhash(gw.qtab[j].qpn, gw.qcap);

		/* Entry j may move to the hole at i if its home is not in
		 * the (cyclic) range (i, j]. */
		if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
			gw.qtab[i] = gw.qtab[j];
			gw.qtab[j].qpn = 0;
			i = j;
		}
	}
}

void svd_gw_qp_add(uint32_t qpn, pid_t pid)
{
	pthread_mutex_lock(&gw.lock);
	if (qput(qpn, pid))
		sv_warn("wire: no memory for QP %#x: its packets are dropped",
			qpn);
	else if (gw.shm) /* made at start (svd_gw_init) */
		atomic_fetch_or_explicit(sv_wire_qpn_byte(gw.shm, qpn),
					 (uint8_t)(1u << (qpn & 7)),
					 memory_order_release);
	pthread_mutex_unlock(&gw.lock);
}

void svd_gw_qp_del(uint32_t qpn)
{
	pthread_mutex_lock(&gw.lock);
	qdel(qpn);
	if (gw.shm)
		atomic_fetch_and_explicit(sv_wire_qpn_byte(gw.shm, qpn),
					  (uint8_t)~(1u << (qpn & 7)),
					  memory_order_release);
	pthread_mutex_unlock(&gw.lock);
}

static struct gw_eng *eng_by_pid(pid_t pid)
{
	for (struct gw_eng *e = gw.engs; e; e = e->next)
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

	pthread_mutex_lock(&gw.lock);
	for (pp = &gw.engs; *pp; pp = &(*pp)->next)
		if ((*pp)->pid == pid) {
			e = *pp;
			*pp = e->next;
			break;
		}
	pthread_mutex_unlock(&gw.lock);
	if (e)
		eng_free(e);
}

/* A ring record for QP1: a UD SEND to the CM, queued for the main
 * thread.  Must hold gw.lock. */
static void qp1_queue(const uint8_t *rec, size_t len)
{
	const uint8_t *b = rec + SV_GRH_BYTES;
	struct gw_udq *q;
	size_t hl = SV_BTH_BYTES + SV_DETH_BYTES;

	/* UD SEND only (0x64), a DETH, a payload that fits. */
	if (len < SV_GRH_BYTES + hl || __bth_opcode(b) != 0x64 ||
	    len - SV_GRH_BYTES - hl > SV_GW_UD_MAX || gw.nudq >= GW_UDQ_MAX) {
		atomic_fetch_add_explicit(&gw.shm->rx_malformed, 1,
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
	if (!gw.udq_tail)
		gw.udq_tail = &gw.udq;
	*gw.udq_tail = q;
	gw.udq_tail = &q->next;
	gw.nudq++;
}

void svd_gw_qp1_record(const uint8_t *rec, size_t len)
{
	pthread_mutex_lock(&gw.lock);
	qp1_queue(rec, len);
	pthread_mutex_unlock(&gw.lock);
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
	r.flow.sport = gw.port;
	r.flow.dport = gw.port;
	memcpy(r.flow.sgid, u->sgid, 16);
	memcpy(r.flow.dgid, u->dgid, 16);
	svd_capture_frame(&r, ib);
}

int svd_gw_ud_pop(struct svd_gw_ud *u)
{
	uint8_t ib[SV_BTH_BYTES + SV_DETH_BYTES + SV_GW_UD_MAX];
	struct gw_udq *q;

	pthread_mutex_lock(&gw.lock);
	q = gw.udq;
	if (q) {
		gw.udq = q->next;
		if (!gw.udq)
			gw.udq_tail = &gw.udq;
		gw.nudq--;
	}
	pthread_mutex_unlock(&gw.lock);
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
	pthread_mutex_lock(&gw.lock);
	fd = gw.fd;
	v6 = gw.v6;
	pthread_mutex_unlock(&gw.lock);
	if (u->len > SV_GW_UD_MAX || (!v6 && !v4))
		return -EINVAL;
	memset(pkt, 0, sizeof(pkt));
	pthread_mutex_lock(&gw.lock);
	gw.ud_psn = (gw.ud_psn + 1) & 0xffffff;
	/* UD SEND only (0x64), MigReq 0 */
	bth_init(pkt, 0x64, 0, u->pkey, u->dst_qpn, 0, gw.ud_psn);
	pthread_mutex_unlock(&gw.lock);
	bth_set_mig(pkt, 0);
	bth_set_pad(pkt, pad);
	deth_set(pkt + SV_BTH_BYTES, u->qkey, u->src_qpn);
	memcpy(pkt + SV_BTH_BYTES + SV_DETH_BYTES, u->data, u->len);
	len += pad;
	f.ipv6 = !v4;
	f.tclass = u->tclass;
	f.flow_label = u->flow_label & 0xfffff;
	f.hop_limit = u->hop_limit;
	f.sport = gw.port;
	f.dport = gw.port;
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

		atomic_fetch_add_explicit(&gw.shm->tx_errors, 1,
					  memory_order_relaxed);
		return err;
	}
	qp1_capture(0, u, pkt, len);
	atomic_fetch_add_explicit(&gw.shm->tx_pkts, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&gw.shm->tx_bytes, len + SV_ICRC_BYTES,
				  memory_order_relaxed);
	return 0;
}

/* Delivers one checked packet.  Must hold gw.lock. */
static void deliver(const struct sv_wire_pkt *p)
{
	struct gw_qpent *q = qfind(p->qpn);
	struct gw_eng *e = q ? eng_by_pid(q->pid) : NULL;
	uint8_t *r;

	if (p->qpn == 1) {
		qp1_queue(p->rec, p->rec_len);
		gw.qp1_kick = 1;
		return;
	}
	if (!e) {
		atomic_fetch_add_explicit(&gw.shm->rx_no_qp, 1, memory_order_relaxed);
		return;
	}
	r = sv_ring_reserve(&e->prod, p->rec_len, SV_GW_REC_PKT);
	if (!r) {
		atomic_fetch_add_explicit(&gw.shm->rx_ring_full, 1,
					  memory_order_relaxed);
		return;
	}
	memcpy(r, p->rec, p->rec_len);
	if (sv_ring_commit(&e->prod))
		e->ring = 1;
	atomic_fetch_add_explicit(&gw.shm->rx_pkts, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&gw.shm->rx_bytes, p->ib_len, memory_order_relaxed);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reads what waits on the port (the engines are all asleep). */
static void rx_batch(struct sv_wire_rxb *b)
{
	static uint32_t me;
	int n, kick;

	if (!me)
		me = (uint32_t)getpid(); /* the thread's, once */
	if (!sv_wire_rx_trylock(gw.shm, me, now_ns()))
		return; /* an engine reads */
	n = sv_wire_recv(gw.fd, b, SV_WIRE_BATCH);
	pthread_mutex_lock(&gw.lock);
	for (int i = 0; i < n; i++) {
		struct sv_wire_pkt p;
		int err;

		if (sv_wire_qpn_missing(gw.shm, b->buf[i] + SV_WIRE_HEADROOM,
					b->mm[i].msg_len)) {
			atomic_fetch_add_explicit(&gw.shm->rx_no_qp, 1,
						  memory_order_relaxed);
			continue;
		}
		err = sv_wire_rx_parse(&b->mm[i].msg_hdr, b->mm[i].msg_len,
				       b->buf[i], gw.port, &p);
		if (err == -EBADMSG)
			atomic_fetch_add_explicit(&gw.shm->rx_bad_icrc, 1,
						  memory_order_relaxed);
		else if (err)
			atomic_fetch_add_explicit(&gw.shm->rx_malformed, 1,
						  memory_order_relaxed);
		else
			deliver(&p);
	}
	for (struct gw_eng *e = gw.engs; e; e = e->next) {
		uint64_t one = 1;

		if (!e->ring)
			continue;
		e->ring = 0;
		if (write(e->doorbell, &one, sizeof(one)) < 0 && errno != EAGAIN)
			sv_dbg("wire: doorbell of engine %u: %s", e->engine_id,
			       strerror(errno));
	}
	kick = gw.qp1_kick;
	gw.qp1_kick = 0;
	pthread_mutex_unlock(&gw.lock);
	sv_wire_rx_unlock(gw.shm, me);
	if (kick)
		svd_cm_kick();
}

/* ----------------------------------------------------------- setup -- */

static void setopt(int fd, int level, int name, int v)
{
	if (setsockopt(fd, level, name, &v, sizeof(v)) < 0)
		sv_dbg("wire: setsockopt %d/%d: %s", level, name, strerror(errno));
}

/* What the port's socket needs, whoever bound it. */
static void port_opts(int fd, int v6)
{
	int rb = GW_RCVBUF;

	sv_wire_rx_sockopts(fd, v6 ? AF_INET6 : AF_INET);
	/* What the daemon sends (QP1's CM MADs) leaves as the engines'
	 * packets do: DF, so Linux numbers an unconnected socket's IPv4
	 * packets ID 0 -- the ID the ICRC was computed with (PMTU discovery
	 * "want" lets the kernel fragment, and then it picks random IDs:
	 * rxe would drop every MAD for its ICRC) -- and UDP checksum 0 over
	 * IPv4 (the ICRC covers the packet), as rxe sends. */
	setopt(fd, SOL_SOCKET, SO_NO_CHECK, 1);
	setopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
	if (v6)
		setopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
	/* Room for the windows of many QPs at once (root: beyond
	 * rmem_max). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rb, sizeof(rb)) < 0)
		setopt(fd, SOL_SOCKET, SO_RCVBUF, rb);
}

/* Binds the port ourselves (no port service): the socket, or -errno. */
static int open_port(uint16_t port, int *v6out)
{
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int v6 = fd >= 0, err;

	if (fd < 0)
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (v6)
		setopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
	if (v6) {
		struct sockaddr_in6 a = { .sin6_family = AF_INET6,
					  .sin6_port = htons(port),
					  .sin6_addr = IN6ADDR_ANY_INIT };

		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			goto err;
	} else {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons(port),
					 .sin_addr.s_addr = htonl(INADDR_ANY) };

		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			goto err;
	}
	port_opts(fd, v6);
	*v6out = v6;
	return fd;
err:
	err = -errno;
	close(fd);
	return err;
}

/* One message of the service's, with its descriptor if any (else *fd
 * is -1).  Returns the bytes, 0 at hang-up, -errno. */
static ssize_t portd_recv(int c, struct sv_portd_msg *m, uint8_t *rec,
			  size_t cap, int *fd, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov[2] = { { m, sizeof(*m) }, { rec, cap } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = rec ? 2 : 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t n = recvmsg(c, &mh, flags | MSG_CMSG_CLOEXEC);

	*fd = -1;
	if (n < 0)
		return -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm;
	     cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(cm), sizeof(int));
	if (n < (ssize_t)sizeof(*m) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -EPROTO;
	}
	return n;
}

/*
 * Asks the namespace's port service (sv_portd.h) for our share of the
 * port: a connection to a root process on SV_PORTD_NAME, HELLO (with
 * `mine`, our socket, and *block when we reconnect after it restarted),
 * and the socket that receives our block.  Returns the socket (or mine
 * again) with *conn and *block set, -ENOENT when no service runs here (or
 * one not run by root: ignored), or another -errno.
 */
static int portd_open(uint16_t port, int mine, uint32_t *block, int *conn)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct sv_portd_msg m = { .op = SV_PORTD_HELLO,
				  .version = SV_PORTD_VERSION,
				  .block = *block };
	struct timeval tv = { .tv_sec = 2 };
	struct ucred cr;
	socklen_t cl = sizeof(cr), len;
	int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), fd = -1;
	ssize_t n;

	if (c < 0)
		return -errno;
	snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, SV_PORTD_NAME,
		 (unsigned)port);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  strlen(a.sun_path + 1));
	if (connect(c, (struct sockaddr *)&a, len) < 0) {
		close(c);
		return -ENOENT;
	}
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != 0) {
		sv_warn("wire: @" SV_PORTD_NAME " is held by uid %u, not root: "
			"not a port service, ignored", (unsigned)port,
			(unsigned)cr.uid);
		close(c);
		return -ENOENT;
	}
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = sv_send_msg(c, &m, sizeof(m), &mine, mine >= 0, 0);
	if (n < 0) {
		errno = (int)-n;
		goto err;
	}
	/* The answer comes first: no block, no QP1 traffic yet. */
	n = portd_recv(c, &m, NULL, 0, &fd, 0);
	if (n < 0 || m.op != SV_PORTD_HELLO) {
		errno = n < 0 ? (int)-n : EPROTO;
		goto err;
	}
	if (m.err || !m.block || m.block >= SV_PORTD_BLOCKS ||
	    (fd < 0 && mine < 0)) {
		errno = m.err ? -m.err : EPROTO;
		goto err;
	}
	if (fd < 0)
		fd = mine;
	tv.tv_sec = 0;
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	*block = m.block;
	*conn = c;
	return fd;
err:
	n = -errno;
	if (fd >= 0 && fd != mine)
		close(fd);
	close(c);
	return (int)n;
}

static uint64_t now_ms(void)
{
	return now_ns() / 1000000;
}

/*
 * Takes the port: through the port service when one runs in this
 * namespace, else by binding it.  Publishes gw.fd (under gw.lock: the
 * main thread reads it) and logs a change.  Any thread; the gateway
 * thread retries it every SV_WIRE_RETRY_MS while the port is not ours.
 */
static void take_port(void)
{
	uint32_t block = gw.block;
	int conn = -1, v6 = 1, fd, mine;

	pthread_mutex_lock(&gw.lock);
	mine = gw.portd_lost ? gw.fd : -1;
	pthread_mutex_unlock(&gw.lock);
	fd = portd_open(gw.port, mine, &block, &conn);
	if (fd >= 0) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			v6 = ss.ss_family == AF_INET6;
		if (fd != mine)
			port_opts(fd, v6);
		if (mine >= 0 && fd != mine) {
			/* Our block went to another daemon while the service
			 * was away: a new one, on a new socket.  Processes
			 * attached before keep reading the old one, which
			 * hears nothing now: they are off the wire until they
			 * attach again. */
			sv_warn("wire: the port service gave us QPN block %#x "
				"for %#x: QPs made before are unreachable",
				block, gw.block);
			pthread_mutex_lock(&gw.lock);
			close(gw.fd);
			gw.fd = -1;
			pthread_mutex_unlock(&gw.lock);
		}
	} else if (mine >= 0) {
		return; /* keep what we have; try the service again later */
	} else if (fd == -ENOENT) {
		fd = open_port(gw.port, &v6);
	}
	pthread_mutex_lock(&gw.lock);
	if (fd < 0) {
		if (gw.err != fd)
			sv_err("wire: cannot bind UDP port %u: %s%s", gw.port,
			       strerror(-fd),
			       fd == -EADDRINUSE ?
				       " (another softverbsd or rdma_rxe of this "
				       "network namespace has it): packets from "
				       "other hosts cannot reach this device "
				       "until it is free (tried again every "
				       "second); see docs/wire.md" :
				       "");
		gw.err = fd;
		pthread_mutex_unlock(&gw.lock);
		return;
	}
	gw.fd = fd;
	gw.v6 = v6;
	gw.portd = conn;
	gw.portd_lost = 0;
	gw.block = conn >= 0 ? block : 0;
	gw.err = 0;
	pthread_mutex_unlock(&gw.lock);
	if (conn >= 0)
		sv_info("wire: RoCE v2 on UDP port %u through the port service "
			"(QPN block %#x)", gw.port, block);
	else
		sv_info("wire: RoCE v2 on UDP port %u (%s), bound by this daemon "
			"(no port service here: docs/wire.md)", gw.port,
			v6 ? "IPv4 and IPv6" : "IPv4 only");
}

/* The service hung up (a restart): our socket and block stay ours until
 * it is back and takes them again (take_port). */
static void portd_gone(void)
{
	pthread_mutex_lock(&gw.lock);
	close(gw.portd);
	gw.portd = -1;
	gw.portd_lost = 1;
	gw.lreply_got = 1;
	gw.lreply_err = -ECONNRESET;
	pthread_cond_broadcast(&gw.lreply_cond);
	pthread_mutex_unlock(&gw.lock);
	sv_warn("wire: the port service hung up: CM messages cannot reach us "
		"until it is back");
}

/* What the service sends: CM MADs for us and LISTEN answers. */
static void portd_readable(void)
{
	static uint8_t rec[SV_WIRE_BUF];

	for (;;) {
		struct sv_portd_msg m;
		int fd;
		ssize_t n = portd_recv(gw.portd, &m, rec, sizeof(rec), &fd,
				       MSG_DONTWAIT);

		if (fd >= 0)
			close(fd);
		if (n == -EAGAIN || n == -EINTR)
			return;
		if (n <= 0) {
			portd_gone();
			return;
		}
		if (m.op == SV_PORTD_QP1 && n > (ssize_t)sizeof(m)) {
			pthread_mutex_lock(&gw.lock);
			qp1_queue(rec, (size_t)n - sizeof(m));
			pthread_mutex_unlock(&gw.lock);
			svd_cm_kick();
		} else if (m.op == SV_PORTD_LISTEN) {
			pthread_mutex_lock(&gw.lock);
			gw.lreply_got = 1;
			gw.lreply_err = m.err;
			pthread_cond_broadcast(&gw.lreply_cond);
			pthread_mutex_unlock(&gw.lock);
		}
	}
}

/*
 * The gateway thread: reads the port while no engine does, serves the
 * port service's connection, and, while the port is not ours (another
 * process holds it, or the service restarted), tries to take it every
 * SV_WIRE_RETRY_MS -- so a daemon is back on the wire within a second of
 * the port coming free.
 */
static void *gw_main(void *arg)
{
	struct sv_wire_rxb *b = malloc(sizeof(*b));

	(void)arg;
	if (!b) {
		sv_err("wire: no memory for the receive thread");
		return NULL;
	}
	for (;;) {
		uint64_t last = atomic_load_explicit(&gw.shm->poll_ns,
						     memory_order_relaxed);
		uint64_t now = now_ns();
		/* An engine reads (its application polls): look again when
		 * it may have stopped, without waking for every packet. */
		int engines = last && now - last < SV_WIRE_HANDOFF_NS;
		int fd, conn, lost, timeout, np = 1;
		struct pollfd pf[3] = { { .fd = gw.wake, .events = POLLIN } };

		pthread_mutex_lock(&gw.lock);
		fd = gw.fd;
		conn = gw.portd;
		lost = gw.portd_lost;
		pthread_mutex_unlock(&gw.lock);
		if ((fd < 0 || lost) && now / 1000000 >= gw.retry_ms) {
			/* A restarting service steers our block nowhere until
			 * we are back: look often, so RC peers' retries (half a
			 * second at timeout 14) outlast the gap. */
			gw.retry_ms = now / 1000000 +
				      (lost ? SV_WIRE_RETRY_MS / 10 :
					      SV_WIRE_RETRY_MS);
			take_port();
			continue;
		}
		timeout = engines ? 1 + (int)((last + SV_WIRE_HANDOFF_NS - now) /
					      1000000) :
				    -1;
		if (fd < 0 || lost)
			timeout = (int)(gw.retry_ms - now / 1000000) + 1;
		if (conn >= 0)
			pf[np++] = (struct pollfd){ .fd = conn, .events = POLLIN };
		if (fd >= 0 && !engines)
			pf[np++] = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (poll(pf, (nfds_t)np, timeout) < 0) {
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
				portd_readable();
			else
				rx_batch(b);
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
	gw.shm = p;
	gw.shm->magic = SV_WIRE_MAGIC;
	gw.shm->version = SV_WIRE_VERSION;
	gw.shm_fd = fd;
	return 0;
}

/* Takes the port if we can and starts the thread (once).  Main thread.
 * Returns 0 when the port is ours, else why not (-errno). */
static int gw_start(void)
{
	int err;

	if (!gw.thread_on) {
		gw.port = wire_port();
		if (gw.wake < 0)
			gw.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (gw.wake < 0 || (!gw.shm && shm_make()))
			return gw.err = -ENOMEM;
		take_port();
		gw.retry_ms = now_ms() + SV_WIRE_RETRY_MS;
		err = pthread_create(&gw.thread, NULL, gw_main, NULL);
		if (err) {
			sv_err("wire: no receive thread: %s", strerror(err));
			return -err;
		}
		gw.thread_on = 1;
	}
	pthread_mutex_lock(&gw.lock);
	err = gw.fd >= 0 ? 0 : gw.err ? gw.err : -ENOTCONN;
	pthread_mutex_unlock(&gw.lock);
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

	if (gw.thread_on) {
		if (write(gw.wake, &one, sizeof(one)) < 0)
			sv_warn("wire: cannot stop the thread");
		pthread_join(gw.thread, NULL);
		gw.thread_on = 0;
	}
	if (gw.fd >= 0)
		close(gw.fd);
	if (gw.portd >= 0)
		close(gw.portd);
	gw.portd = -1;
	gw.portd_lost = 0;
	gw.block = 0;
	if (gw.wake >= 0)
		close(gw.wake);
	if (gw.shm_fd >= 0)
		close(gw.shm_fd);
	if (gw.shm)
		munmap(gw.shm, SV_WIRE_SHM_BYTES);
	gw.shm = NULL;
	gw.fd = gw.wake = gw.shm_fd = -1;
	while (gw.engs) {
		struct gw_eng *e = gw.engs;

		gw.engs = e->next;
		eng_free(e);
	}
	free(gw.qtab);
	gw.qtab = NULL;
	gw.qcap = gw.nq = 0;
	while (gw.udq) {
		struct gw_udq *q = gw.udq;

		gw.udq = q->next;
		free(q);
	}
	gw.udq_tail = &gw.udq;
	gw.nudq = 0;
}

uint32_t svd_gw_block(void)
{
	uint32_t b;

	pthread_mutex_lock(&gw.lock);
	b = gw.block;
	pthread_mutex_unlock(&gw.lock);
	return b;
}

int svd_gw_listen(uint64_t sid, int on)
{
	struct sv_portd_msg m = { .op = on ? SV_PORTD_LISTEN : SV_PORTD_UNLISTEN,
				  .arg = sid };
	struct timespec until;
	int err = 0;

	pthread_mutex_lock(&gw.lock);
	if (gw.portd < 0) {
		pthread_mutex_unlock(&gw.lock);
		return 0;
	}
	gw.lreply_got = 0;
	if (send(gw.portd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		err = -errno;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	/* The gateway thread reads the answer (portd_readable). */
	while (on && !err && !gw.lreply_got &&
	       pthread_cond_timedwait(&gw.lreply_cond, &gw.lock, &until) == 0)
		;
	if (on && !err)
		err = gw.lreply_got ? gw.lreply_err : -ETIMEDOUT;
	pthread_mutex_unlock(&gw.lock);
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
	if (gw.shm) {
		struct sv_wire_shm *m = gw.shm;

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
	pthread_mutex_lock(&gw.lock);
	*err = gw.fd >= 0 ? 0 : gw.err ? gw.err : -ENOTCONN;
	*port = gw.port ? gw.port : wire_port();
	if (block)
		*block = gw.fd >= 0 && !gw.portd_lost ? gw.block : 0;
	pthread_mutex_unlock(&gw.lock);
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
	pthread_mutex_lock(&gw.lock);
	{
		struct gw_eng *old = eng_by_pid(pid), **pp;

		if (old) {
			for (pp = &gw.engs; *pp != old; pp = &(*pp)->next)
				;
			*pp = old->next;
		}
		e->next = gw.engs;
		gw.engs = e;
		pthread_mutex_unlock(&gw.lock);
		if (old)
			eng_free(old);
	}
	fds[0] = fd;
	fds[1] = gw.shm_fd >= 0 ? fcntl(gw.shm_fd, F_DUPFD_CLOEXEC, 0) : -1;
	*ring_size = size;
	pthread_mutex_lock(&gw.lock);
	fds[2] = gw.fd >= 0 ? fcntl(gw.fd, F_DUPFD_CLOEXEC, 0) : -1;
	err = gw.fd >= 0 ? 0 : gw.err ? gw.err : -ENOTCONN;
	pthread_mutex_unlock(&gw.lock);
	return err;

err_free:
	free(e);
err_fd:
	close(fd);
	return err;
}

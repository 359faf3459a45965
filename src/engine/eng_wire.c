/* SPDX-License-Identifier: MIT */
/*
 * The wire (docs/wire.md): RoCE v2 to other hosts.
 *
 * Routing.  A destination GID in the port's GID table (published by the
 * daemon in the key table, sv_keytab.h) or a loopback address is this
 * host: today's paths.  Any other goes on the wire: an RC/UC QP whose
 * AV names such a GID gets a wire link at RTR; a UD QP has one for the
 * WQEs whose AH does.
 *
 * Sending.  A wire link is a struct sv_link whose `w` is set: the same
 * reserve/commit calls as a ring, so the requester, responder and
 * completer do not know the difference.  Reserve hands out a slot of the
 * engine's batch; commit pads the payload to 4 bytes (BTH pad count),
 * appends the ICRC and addresses the datagram; sv_wire_flush sends the
 * batch with sendmmsg, one call per run of packets of the same socket --
 * at the end of every requester run, responder pass and progress pass.
 * A full socket buffer (EAGAIN) or device queue (ENOBUFS: IP_RECVERR,
 * sock_open) keeps the rest for the progress thread, and a full batch
 * makes reserve fail like a full ring: the QP blocks, nothing is
 * dropped by us.
 *
 * Sockets.  RoCE gives each QP (flow) a UDP source port, as rxe does
 * (0xC000 | the flow label folded to 14 bits, the label computed from
 * both QPNs when the AV has none).  A datagram's source port is its
 * socket's, so the engine keeps one socket per source port in use, bound
 * with SO_REUSEPORT (other processes of the user may have the same
 * port).  Each datagram carries its source address (IPV6_PKTINFO: the
 * GID the AV's sgid_index names), class and hop limit as ancillary data;
 * IPv6 flow labels go in the destination's sin6_flowinfo.  DF is set and
 * the socket is unconnected, so Linux sends IPv4 identification 0: the
 * ICRC is computed for exactly that header (sv_roce.h).
 *
 * Receiving (sv_wire.h): SV_OP_WIRE_ATTACH, once, gives us a duplicate
 * of the namespace's port, the shared page and our gateway ring (peer id
 * 0).  Whoever of us drains (eng_progress.c wire_read) reads the port
 * when nobody else of the namespace does: our packets are dispatched at
 * once, others forwarded to their engine; the daemon's thread fills the
 * gateway ring only while no engine reads.
 */
#include "engine_int.h"
#include "sv_client.h"
#include "sv_roce.h"
#include "sv_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 /* linux/udp.h */
#endif
#ifndef IPV6_FLOWINFO_SEND
#define IPV6_FLOWINFO_SEND 33 /* linux/in6.h */
#endif

static_assert(SV_WIRE_REC == (SV_REC_PKT | SV_REC_F_GRH | SV_REC_F_WIRE),
	      "wire record type");

/* GRH + the longest packet + pad + ICRC. */
#define SLOT_BYTES (SV_GRH_BYTES + SV_ENG_MAX_PKT + 8)
/* Segments of one UDP_SEGMENT send: the kernel's UDP_MAX_SEGMENTS was 64
 * before Linux 6.3 (128 since), and the datagram the kernel cuts must
 * fit a UDP length. */
#define GSO_SEGS 64
#define GSO_BYTES 65000
struct sv_wire_slot {
	int fd, gfd;	   /* the flow's socket; its GSO twin (-1: none) */
	uint32_t off, len; /* the datagram: pkt[off .. off + len) */
	uint32_t ctl_len;
	uint16_t seg;	   /* its place in a train (0: the first, or alone) */
	uint8_t solo;	   /* nothing joins it (a fault moved or doubled it) */
	uint8_t ack;	   /* a plain ACK (ack_behind) */
	/* The payload left where it was (sv_wire_payload): the datagram is
	 * pkt[off .. at), ext[0 .. ext_len), then pkt[at ..) (pad, ICRC). */
	const uint8_t *ext;
	uint32_t ext_len, at;
	struct sv_roce_flow f; /* its addressing, for an ICRC made again */
	struct sockaddr_in6 dst;
	union {
		char buf[SV_WIRE_CTL_BYTES + CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl;
	uint8_t pkt[SLOT_BYTES];
};

static int materialize(struct sv_wire_slot *s);

struct sv_wire_sock {
	uint16_t sport; /* asked for */
	uint16_t bound; /* got (another program's socket may hold sport) */
	int fd;
	int gfd; /* the same port, with UDP checksums: for UDP_SEGMENT */
};

struct sv_wire {
	pthread_spinlock_t lock; /* the batch (SV_LOCK_TX, as a link's tx_lock;
				    held through sendmmsg: sv_lock_spin_long) */
	uint32_t head, n;	 /* slots [head, head + n) wait to be sent */
	uint32_t urgent;	 /* ... of them not ACKs (sv_wire_hold_acks) */
	uint64_t held_at;	 /* when ACKs only were first kept (0: not) */
	struct sv_link *cur;	 /* reserved by (until commit or abort) */
	uint32_t cur_type;
	int warned;
	int gso_off; /* the kernel refused a UDP_SEGMENT send: none again */
	pthread_mutex_t sock_lock; /* socks */
	struct sv_wire_sock *socks;
	uint32_t nsocks;
	int fam; /* AF_INET6 (dual stack) or AF_INET */
	struct sv_wire_slot slot[SV_WIRE_SLOTS];
};

struct sv_wlink {
	struct sv_roce_flow flow; /* RC/UC: all of it; UD: sport */
	int fd, gfd;
};

/* ------------------------------------------------------------ GIDs -- */

/* Loopback, or no address at all (an AH without GRH): this host. */
static int is_loopback(const uint8_t *g)
{
	static const uint8_t one[16] = { [15] = 1 }, zero[16];

	return !memcmp(g, one, 16) || !memcmp(g, zero, 16) ||
	       (sv_gid_is_v4(g) && g[12] == 127);
}

int sv_gid_local(struct sv_engine *eng, const uint8_t gid[16])
{
	const struct sv_keytab_port *p = eng->port;
	uint32_t seq;
	int local;

	if (!p || is_loopback(gid))
		return 1;
	seq = atomic_load_explicit(&p->seq, memory_order_acquire);
	sv_lock_mutex(&eng->port_lock, SV_LOCK_PORT);
	if (seq != eng->port_seq || !eng->port_copy) {
		if (!eng->port_copy)
			eng->port_copy = calloc(1, sizeof(*eng->port_copy));
		if (eng->port_copy && !sv_port_read(p, eng->port_copy))
			eng->port_seq = atomic_load_explicit(
				&eng->port_copy->seq, memory_order_relaxed);
	}
	if (!eng->port_copy || !eng->port_copy->gen) {
		/* Nothing published (an older daemon): all is here. */
		sv_unlock_mutex(&eng->port_lock);
		return 1;
	}
	local = sv_port_gid_local(eng->port_copy, gid);
	sv_unlock_mutex(&eng->port_lock);
	return local;
}

uint32_t sv_eng_port_mtu(struct sv_engine *eng)
{
	struct sv_keytab_port p;

	if (!eng->port || sv_port_read(eng->port, &p) || !p.gen)
		return 4096;
	return sv_port_mtu_bytes(&p);
}

int sv_av_remote(struct sv_engine *eng, const struct ibv_ah_attr *av)
{
	return av->is_global && !sv_gid_local(eng, av->grh.dgid.raw);
}

int sv_gid_at(struct sv_engine *eng, uint32_t index, uint8_t gid[16])
{
	struct sv_keytab_port p;

	if (!eng->port || sv_port_read(eng->port, &p) || index >= p.ngids ||
	    index >= SV_KEYTAB_GIDS || !p.gid[index].ifindex)
		return -1;
	memcpy(gid, p.gid[index].raw, 16);
	return 0;
}

/* ------------------------------------------------------- the ring -- */

/* Checks that fd is a sealed memfd of exactly size bytes (a region the
 * daemon made: it cannot shrink under our mapping). */
static int sealed_size(int fd, uint64_t size)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	return seals >= 0 &&
	       (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) ==
		       (F_SEAL_SHRINK | F_SEAL_GROW) &&
	       fstat(fd, &st) == 0 && (uint64_t)st.st_size == size;
}

int sv_wire_attach(struct sv_engine *eng)
{
	struct sv_wire_attach_rep rep;
	int fds[3] = { -1, -1, -1 }, err;
	struct sv_call c = { .op = SV_OP_WIRE_ATTACH,
			     .instance = eng->instance,
			     .attach_fd = -1,
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = fds,
			     .max_rfds = 3 };
	struct sv_wire_shm *m = MAP_FAILED;
	struct sv_wire_rxb *rxb = NULL;
	void *map = MAP_FAILED;

	sv_lock_mutex(&eng->wire_lock, SV_LOCK_WIRE);
	if (eng->wire_attached) {
		sv_unlock_mutex(&eng->wire_lock);
		return 0;
	}
	err = sv_call(&c);
	if (!err && (c.nrfds < 2 || c.rep_len != sizeof(rep)))
		err = -EPROTO;
	if (err)
		goto out;
	if (!sealed_size(fds[0], rep.ring_size) ||
	    rep.ring_size < SV_RING_DATA_OFF + 4096 ||
	    !sealed_size(fds[1], SV_WIRE_SHM_BYTES)) {
		err = -EPROTO;
		goto out;
	}
	map = mmap(NULL, rep.ring_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   fds[0], 0);
	m = mmap(NULL, SV_WIRE_SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fds[1], 0);
	rxb = c.nrfds == 3 ? malloc(sizeof(*rxb)) : NULL;
	if (map == MAP_FAILED || m == MAP_FAILED || (c.nrfds == 3 && !rxb)) {
		err = -ENOMEM;
		goto out;
	}
	if (m->magic != SV_WIRE_MAGIC || m->version != SV_WIRE_VERSION) {
		err = -EPROTO;
		goto out;
	}
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	err = eng->attached ? sv_add_inring(eng, map, rep.ring_size,
					    rep.ring_size, 0, 0, 1) :
			      -ENOTCONN;
	sv_unlock_mutex(&eng->lock);
	if (err)
		goto out;
	map = MAP_FAILED; /* the inring's now */
	eng->wshm = m;
	eng->rxb = rxb;
	eng->wire_port = (uint16_t)rep.port;
	m = MAP_FAILED;
	rxb = NULL;
	if (c.nrfds == 3) {
		/* Published last: drainers look at wire_sock alone. */
		__atomic_store_n(&eng->wire_sock, fds[2], __ATOMIC_RELEASE);
		fds[2] = -1;
	}
	eng->wire_attached = 1;
	if (rep.wire_err)
		sv_warn("the device cannot receive from other hosts: UDP port %u: "
			"%s (softverbs daemon status; docs/wire.md)",
			rep.port, strerror(-rep.wire_err));
out:
	if (map != MAP_FAILED)
		munmap(map, rep.ring_size);
	if (m != MAP_FAILED)
		munmap(m, SV_WIRE_SHM_BYTES);
	free(rxb);
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	sv_unlock_mutex(&eng->wire_lock);
	if (err)
		sv_warn("no packets from other hosts: %s", strerror(-err));
	return err;
}

/* --------------------------------------------------------- sockets -- */

static void setopt(int fd, int level, int name, int v)
{
	if (setsockopt(fd, level, name, &v, sizeof(v)) < 0)
		sv_dbg("wire: setsockopt %d/%d: %s", level, name, strerror(errno));
}

/* A socket sending from UDP port sport (the port actually bound in
 * *bound: an ephemeral one when another program holds sport).  gso: the
 * twin for UDP_SEGMENT sends, bound to exactly sport (or failing), with
 * UDP checksums, for the kernel refuses to segment a datagram without
 * (udp_send_skb: SO_NO_CHECK and a segment size are EINVAL together).
 * Must hold sock_lock. */
static int sock_open(struct sv_wire *w, uint16_t sport, uint16_t *bound,
		     int gso)
{
	int fd = socket(w->fam, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int sb = 4 << 20;
	union {
		struct sockaddr_in6 in6;
		struct sockaddr_in in;
	} a;
	socklen_t al;

	if (fd < 0)
		return -errno;
	setopt(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	setopt(fd, SOL_SOCKET, SO_REUSEPORT, 1);
	/* IPv4: checksum 0, as RoCE NICs and rxe send (the ICRC covers the
	 * packet); DF, so the identification is 0 (a train of segments:
	 * 0, 1, 2, ...). */
	if (!gso)
		setopt(fd, SOL_SOCKET, SO_NO_CHECK, 1);
	setopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
	/* The link's refusals come back to us (IP_RECVERR): a datagram
	 * that a full device queue drops (a veth whose peer's backlog is
	 * full while its softirq waits for a CPU, a qdisc) fails with
	 * ENOBUFS and stays for the next pass, as on a full socket buffer,
	 * instead of vanishing -- the link's flow control, as a NIC's pause
	 * frames are; UC could not resend it.  The price: an ICMP error
	 * (a host with no RoCE port) makes the next send fail once
	 * (flush_locked drains and retries). */
	setopt(fd, IPPROTO_IP, IP_RECVERR, 1);
	/* A datagram to a group is not looped back: this host's QPs had
	 * their copies from the sender (sv_req.c send_mcast). */
	setopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, 0);
	if (w->fam == AF_INET6) {
		setopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, 0);
		setopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
		setopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
		setopt(fd, IPPROTO_IPV6, IPV6_FLOWINFO_SEND, 1);
		setopt(fd, IPPROTO_IPV6, IPV6_RECVERR, 1);
	}
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sb, sizeof(sb)) < 0)
		setopt(fd, SOL_SOCKET, SO_SNDBUF, sb);
	memset(&a, 0, sizeof(a));
	if (w->fam == AF_INET6) {
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_port = htons(sport);
		al = sizeof(a.in6);
	} else {
		a.in.sin_family = AF_INET;
		a.in.sin_port = htons(sport);
		al = sizeof(a.in);
	}
	if (bind(fd, (struct sockaddr *)&a, al) < 0) {
		/* Somebody else's socket (without SO_REUSEPORT) has it. */
		if (gso) {
			close(fd);
			return -EADDRINUSE;
		}
		if (w->fam == AF_INET6)
			a.in6.sin6_port = 0;
		else
			a.in.sin_port = 0;
		if (bind(fd, (struct sockaddr *)&a, al) < 0) {
			int err = -errno;

			close(fd);
			return err;
		}
	}
	al = sizeof(a);
	if (getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	*bound = ntohs(w->fam == AF_INET6 ? a.in6.sin6_port : a.in.sin_port);
	return fd;
}

/* The socket of source port sport (*gfd: its UDP_SEGMENT twin, or -1). */
static int sock_get(struct sv_wire *w, uint16_t sport, uint16_t *bound,
		    int *gfd)
{
	struct sv_wire_sock *n;
	uint16_t gb;
	int fd;

	sv_lock_mutex(&w->sock_lock, SV_LOCK_PORT);
	for (uint32_t i = 0; i < w->nsocks; i++)
		if (w->socks[i].sport == sport) {
			fd = w->socks[i].fd;
			*bound = w->socks[i].bound;
			*gfd = w->socks[i].gfd;
			sv_unlock_mutex(&w->sock_lock);
			return fd;
		}
	*bound = 0;
	*gfd = -1;
	fd = sock_open(w, sport, bound, 0);
	if (fd >= 0 && sv_tune.wire_gso) {
		*gfd = sock_open(w, *bound, &gb, 1);
		if (*gfd < 0)
			*gfd = -1;
	}
	if (fd >= 0) {
		/* Kept for the engine's life (slots waiting to go name it). */
		n = realloc(w->socks, (w->nsocks + 1) * sizeof(*n));
		if (!n) {
			close(fd);
			if (*gfd >= 0)
				close(*gfd);
			*gfd = -1;
			fd = -ENOMEM;
		} else {
			w->socks = n;
			w->socks[w->nsocks++] =
				(struct sv_wire_sock){ sport, *bound, fd, *gfd };
		}
	}
	sv_unlock_mutex(&w->sock_lock);
	return fd;
}

/* The engine's wire state, made on first use.  NULL when out of memory
 * or no UDP socket can be made. */
static struct sv_wire *wire_get(struct sv_engine *eng)
{
	struct sv_wire *w;
	int fd;

	sv_lock_mutex(&eng->wire_lock, SV_LOCK_WIRE);
	w = eng->wire;
	if (w) {
		sv_unlock_mutex(&eng->wire_lock);
		return w;
	}
	w = calloc(1, sizeof(*w));
	if (w) {
		pthread_spin_init(&w->lock, PTHREAD_PROCESS_PRIVATE);
		pthread_mutex_init(&w->sock_lock, NULL);
		fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		w->fam = fd >= 0 ? AF_INET6 : AF_INET;
		if (fd >= 0)
			close(fd);
		/* Published: sv_wire_flush looks without the lock. */
		__atomic_store_n(&eng->wire, w, __ATOMIC_RELEASE);
	}
	sv_unlock_mutex(&eng->wire_lock);
	return w;
}

void sv_wire_free(struct sv_engine *eng)
{
	struct sv_wire *w = eng->wire;

	if (eng->wire_sock >= 0)
		close(eng->wire_sock);
	eng->wire_sock = -1;
	if (eng->wshm)
		munmap(eng->wshm, SV_WIRE_SHM_BYTES);
	eng->wshm = NULL;
	free(eng->rxb);
	eng->rxb = NULL;
	eng->wire_attached = 0;
	if (!w)
		return;
	for (uint32_t i = 0; i < w->nsocks; i++) {
		close(w->socks[i].fd);
		if (w->socks[i].gfd >= 0)
			close(w->socks[i].gfd);
	}
	free(w->socks);
	pthread_spin_destroy(&w->lock);
	pthread_mutex_destroy(&w->sock_lock);
	free(w);
	eng->wire = NULL;
	eng->wire_attached = 0;
}

/* ----------------------------------------------------------- links -- */

/* rdma_calc_flow_label / rdma_flow_label_to_udp_sport (ib_verbs.h): a
 * symmetric label from both QPNs, folded to a port in 0xC000..0xFFFF. */
static uint32_t calc_flow_label(uint32_t lqpn, uint32_t rqpn)
{
	uint64_t fl = (uint64_t)lqpn * rqpn;

	fl ^= fl >> 20;
	fl ^= fl >> 40;
	return (uint32_t)(fl & 0xfffff);
}

static uint16_t label_to_sport(uint32_t fl)
{
	uint32_t lo = fl & 0x3fff, hi = fl & 0xfc000;

	lo ^= hi >> 14;
	return (uint16_t)(lo | 0xc000);
}

uint16_t sv_wire_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn,
		       int ud)
{
	if (ud) /* rxe: the QP's own, from its number (hash_32(qpn, 14)) */
		return (uint16_t)(0xc000 | ((lqpn * 0x61c88647u) >> 18));
	return label_to_sport(flow_label ? flow_label :
					   calc_flow_label(lqpn, rqpn));
}

struct sv_link *sv_wire_link_new(struct sv_engine *eng,
				 const struct sv_roce_flow *f)
{
	struct sv_wire *w = wire_get(eng);
	struct sv_link *l;
	struct sv_wlink *wl;
	uint16_t bound;
	int fd, gfd;

	if (!w)
		return NULL;
	if (f->ipv6 && w->fam != AF_INET6) {
		sv_warn("wire: no IPv6 sockets here: cannot reach an IPv6 GID");
		return NULL;
	}
	fd = sock_get(w, f->sport, &bound, &gfd);
	if (fd < 0) {
		sv_warn("wire: no UDP socket: %s", strerror(-fd));
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	wl = calloc(1, sizeof(*wl));
	if (!l || !wl) {
		free(l);
		free(wl);
		return NULL;
	}
	wl->flow = *f;
	wl->flow.sport = bound;
	wl->flow.dport = SV_ROCE_PORT;
	wl->fd = fd;
	wl->gfd = gfd;
	pthread_spin_init(&l->tx_lock, PTHREAD_PROCESS_PRIVATE);
	l->eng = eng;
	l->peer_db = -1;
	l->w = wl;
	return l;
}

const struct sv_roce_flow *sv_wire_link_flow(const struct sv_link *l)
{
	return &l->w->flow;
}

void sv_tr_set_wlink(struct sv_tr *tr, struct sv_link *l)
{
	if (tr->wlink != l)
		sv_wire_link_free(tr->wlink);
	tr->wlink = l;
	if (l) {
		memcpy(tr->peer_src, l->w->flow.dgid, 16);
		memcpy(tr->peer_dst, l->w->flow.sgid, 16);
	}
}

int sv_wire_admit(struct sv_engine *eng, struct sv_qp *qp,
		  const struct sv_pkt *pkt)
{
	struct sv_tr *tr = tr_of(qp);
	struct sv_wire_shm *m = eng->wshm;
	uint32_t mtu = tr && tr->mtu ? tr->mtu : sv_eng_port_mtu(eng);
	_Atomic uint64_t *why = NULL;

	/* No QP takes more than its MTU in one packet (a UD datagram above
	 * the port's MTU came IP-fragmented, as no RoCE sender sends it):
	 * dropped, so it cannot end the QP with a length error. */
	if (pkt->paylen > mtu)
		why = m ? &m->rx_too_big : NULL;
	else if ((sv_qpt_rc(qp->type) || qp->type == IBV_QPT_UC) &&
		 (!tr || !tr->wlink || qp->link != tr->wlink || !pkt->grh ||
		  memcmp(pkt->grh + 8, tr->peer_src, 16) ||
		  memcmp(pkt->grh + 24, tr->peer_dst, 16)))
		why = m ? &m->rx_not_peer : NULL;
	else
		return 1;
	if (why)
		atomic_fetch_add_explicit(why, 1, memory_order_relaxed);
	return 0;
}

int sv_wire_cur(struct sv_link *l, uint8_t **p, uint32_t *len, uint32_t *type)
{
	struct sv_wire *w = l->eng->wire;
	struct sv_wire_slot *s;

	if (!w || w->cur != l)
		return 0;
	s = &w->slot[(w->head + w->n) % SV_WIRE_SLOTS];
	materialize(s);
	*p = s->pkt;
	*len = s->len;
	*type = w->cur_type;
	return 1;
}

void sv_wire_link_free(struct sv_link *l)
{
	if (!l || !l->w)
		return;
	free(l->w);
	pthread_spin_destroy(&l->tx_lock);
	free(l);
}

/* --------------------------------------------------- reserve/commit -- */

/*
 * Trains.  Packets of one flow committed one after another, all as long
 * as the first but the last, leave in one sendmsg with UDP_SEGMENT (the
 * first's length as the segment size) on the flow's GSO twin socket: the
 * kernel sends one datagram through its stack and cuts it into the
 * packets at the last moment (or the NIC does, or a veth hands the train
 * over whole and the receiver's UDP_GRO or its kernel cuts it), so every
 * packet is still its own RoCE v2 datagram of at most the path MTU with
 * its own ICRC.  Each segment of an IPv4 train gets the next
 * identification (0, 1, 2, ...: inet_gso_segment numbers them from the
 * first's, which is 0 for DF on an unconnected socket), and the ICRC
 * covers the identification, so segment k's ICRC is made for
 * identification k (sv_icrc_ipv4).  A train's segments differ from a
 * lone datagram in one more way: the UDP checksum is computed (the kernel
 * segments only with checksums), which RoCE receivers ignore (the ICRC
 * masks it).
 */

uint32_t sv_wire_train_pkts(uint32_t mtu)
{
	uint32_t n = GSO_BYTES / (mtu + SV_BTH_BYTES + SV_ICRC_BYTES);

	return n < 1 ? 1 : n > GSO_SEGS ? GSO_SEGS : n;
}

/* Writes the ICRC of slot s, whose packet is all in the slot (no
 * payload left in the MR), for its place in a train: an IPv4 segment's
 * covers its identification. */
static void slot_seal(struct sv_wire_slot *s)
{
	uint8_t *ib = s->pkt + s->off;
	uint32_t n = s->len - SV_ICRC_BYTES, icrc;

	icrc = s->seg && !s->f.ipv6 ? sv_icrc_ipv4(&s->f, ib, n, s->seg, 1) :
				      sv_icrc(&s->f, ib, n);
	memcpy(ib + n, &icrc, SV_ICRC_BYTES);
}

/* Makes slot s a lone datagram again: identification 0, so the ICRC of
 * identification 0, and nothing joins it.  Must hold w->lock. */
static void make_solo(struct sv_wire_slot *s)
{
	if (s->seg && !s->f.ipv6 && s->ext) {
		uint8_t *ib = s->pkt + s->off;
		uint32_t hl = s->at - s->off,
			 pad = s->len - SV_ICRC_BYTES - hl - s->ext_len,
			 c = sv_icrc_start(&s->f, ib, hl, s->len - SV_ICRC_BYTES, 0),
			 icrc;

		/* (Memory gone meanwhile: the old ICRC stays, and the
		 * receiver drops the packet as a lost one.) */
		if (!sv_safe_crc(&c, s->ext, s->ext_len)) {
			icrc = sv_icrc_end(sv_crc32_le(c, s->pkt + s->at, pad));
			memcpy(s->pkt + s->at + pad, &icrc, SV_ICRC_BYTES);
		}
	} else if (s->seg && !s->f.ipv6) {
		s->seg = 0;
		slot_seal(s);
	}
	s->seg = 0;
	s->solo = 1;
}

/* The place in a train of slot s, about to be committed at index idx: the
 * slot before it (when idx is not the first waiting) plus one when s may
 * follow it, else 0.
 * Must hold w->lock. */
static uint16_t train_place(struct sv_wire *w, uint32_t idx,
			    const struct sv_wire_slot *s)
{
	const struct sv_wire_slot *p, *first;

	if (idx == w->head || s->gfd < 0 || w->gso_off)
		return 0;
	p = &w->slot[(idx + SV_WIRE_SLOTS - 1) % SV_WIRE_SLOTS];
	first = &w->slot[(idx + SV_WIRE_SLOTS - 1 - p->seg) % SV_WIRE_SLOTS];
	if (p->solo || p->gfd != s->gfd || p->seg + 1u >= GSO_SEGS ||
	    p->len != first->len || s->len > first->len ||
	    (p->seg + 2u) * first->len > GSO_BYTES || p->ctl_len != s->ctl_len ||
	    memcmp(&p->dst, &s->dst, sizeof(s->dst)) ||
	    memcmp(p->ctl.buf, s->ctl.buf, s->ctl_len))
		return 0;
	return (uint16_t)(p->seg + 1);
}

/* How many waiting slots from index i (left of them) leave as one
 * datagram: the train starting there, or 1.  Must hold w->lock. */
static uint32_t train_len(struct sv_wire *w, uint32_t i, uint32_t left)
{
	const struct sv_wire_slot *s = &w->slot[i];
	uint32_t k = 1;

	if (s->gfd < 0 || s->solo || s->seg || w->gso_off)
		return 1;
	while (k < left) {
		const struct sv_wire_slot *t = &w->slot[(i + k) % SV_WIRE_SLOTS];

		if (t->solo || t->seg != k)
			break;
		k++;
	}
	return k;
}

/* The kernel refused a train (a kernel without UDP_SEGMENT, a route that
 * cannot segment): every slot goes alone from now on, with the ICRC of
 * identification 0.  Must hold w->lock. */
static void trains_off(struct sv_wire *w)
{
	if (!w->gso_off)
		sv_dbg("wire: UDP segmentation refused (%s): one datagram per "
		       "packet from now on", strerror(errno));
	w->gso_off = 1;
	for (uint32_t k = 0; k < w->n; k++)
		make_solo(&w->slot[(w->head + k) % SV_WIRE_SLOTS]);
}

/* Empties fd's error queue (IP_RECVERR): what ICMP or the stack itself
 * reported about earlier datagrams.  Returns how many there were. */
static int drain_errors(int fd)
{
	char buf[64], ctl[256];
	int n = 0;

	for (;;) {
		struct iovec v = { buf, sizeof(buf) };
		struct msghdr h = { .msg_iov = &v,
				    .msg_iovlen = 1,
				    .msg_control = ctl,
				    .msg_controllen = sizeof(ctl) };

		if (recvmsg(fd, &h, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return n;
		n++;
	}
}

/* How many of the waiting slots to send when the batch is full and more
 * packets come: all but a last train that may still grow (the next
 * packets join it), unless that train is all there is.  A READ response
 * of a megabyte filled the batch at 63 packets, and each train of 62 left
 * with a lone packet behind it.  Must hold w->lock. */
static uint32_t complete_trains(struct sv_wire *w)
{
	uint32_t used = 0, last = 0, t = 0;
	const struct sv_wire_slot *s;

	while (used < w->n) {
		t = train_len(w, (w->head + used) % SV_WIRE_SLOTS, w->n - used);
		last = used;
		used += t;
	}
	if (!last)
		return w->n;
	s = &w->slot[(w->head + last) % SV_WIRE_SLOTS];
	if (s->gfd < 0 || s->solo || s->seg || w->gso_off ||
	    t + 1 >= GSO_SEGS || (t + 1) * s->len > GSO_BYTES)
		return w->n; /* it cannot grow */
	return last;
}

/* Sends what waits (the first upto slots of it), as far as the sockets
 * take it.  Must hold w->lock. */
static void flush_upto(struct sv_wire *w, struct sv_wire_shm *m, uint32_t upto)
{
	struct mmsghdr mm[SV_WIRE_SLOTS];
	struct iovec iov[3 * SV_WIRE_SLOTS]; /* a slot: 1, or 3 (ext) */
	uint32_t nseg[SV_WIRE_SLOTS], niov[SV_WIRE_SLOTS], keep = w->n - upto;
	int retried = 0;

	while (w->n > keep) {
		uint32_t k = 0, used = 0, at = 0, vi = 0;
		int fd = -1, r, ok;

		/* Datagrams of one socket: trains on the GSO twin, lone
		 * packets on the flow's own. */
		while (used < w->n - keep) {
			uint32_t i = (w->head + used) % SV_WIRE_SLOTS;
			struct sv_wire_slot *s = &w->slot[i];
			uint32_t t = train_len(w, i, w->n - keep - used);
			int sfd = t > 1 ? s->gfd : s->fd;

			if (k && sfd != fd)
				break;
			fd = sfd;
			niov[k] = 0;
			for (uint32_t j = 0; j < t; j++) {
				struct sv_wire_slot *q =
					&w->slot[(i + j) % SV_WIRE_SLOTS];
				struct iovec *v = &iov[vi + niov[k]];

				if (!q->ext) {
					v[0] = (struct iovec){ q->pkt + q->off,
							       q->len };
					niov[k] += 1;
					continue;
				}
				v[0] = (struct iovec){ q->pkt + q->off,
						       q->at - q->off };
				v[1] = (struct iovec){ (void *)(uintptr_t)q->ext,
						       q->ext_len };
				v[2] = (struct iovec){
					q->pkt + q->at,
					q->len - (q->at - q->off) - q->ext_len
				};
				niov[k] += 3;
			}
			mm[k].msg_hdr = (struct msghdr){
				.msg_name = &s->dst,
				.msg_namelen = s->dst.sin6_family == AF_INET6 ?
						       sizeof(struct sockaddr_in6) :
						       sizeof(struct sockaddr_in),
				.msg_iov = &iov[vi],
				.msg_iovlen = niov[k],
				.msg_control = s->ctl_len ? s->ctl.buf : NULL,
				.msg_controllen = s->ctl_len,
			};
			if (t > 1) {
				struct cmsghdr *c =
					(struct cmsghdr *)(s->ctl.buf + s->ctl_len);
				uint16_t gs = (uint16_t)s->len;

				c->cmsg_level = SOL_UDP;
				c->cmsg_type = UDP_SEGMENT;
				c->cmsg_len = CMSG_LEN(sizeof(gs));
				memcpy(CMSG_DATA(c), &gs, sizeof(gs));
				mm[k].msg_hdr.msg_control = s->ctl.buf;
				mm[k].msg_hdr.msg_controllen =
					s->ctl_len + CMSG_SPACE(sizeof(gs));
			}
			vi += niov[k];
			nseg[k++] = t;
			used += t;
		}
		r = sendmmsg(fd, mm, k, MSG_DONTWAIT);
		ok = r >= 0;
		if (r < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR))
			return; /* the socket is full: later */
		if (r < 0 && errno == EFAULT) {
			/* A payload sent from where it was (sv_wire_payload)
			 * is gone: the memory was unmapped before the packet
			 * left.  Lost, as on a fabric (a resend finds the
			 * key gone). */
			ok = 0;
			r = 1;
		}
		if (r < 0 && !retried) {
			/* Maybe not this datagram's fault: an ICMP error
			 * about an earlier one (IP_RECVERR) fails the next
			 * send once.  Empty the queue and try again. */
			drain_errors(fd);
			retried = 1;
			continue;
		}
		if (r < 0 && nseg[0] > 1) {
			trains_off(w);
			continue;
		}
		if (r < 0) {
			/* This datagram cannot go (no route, too big for the
			 * path, the address went away): lost, as on a
			 * fabric; RC retries and gives up. */
			if (!w->warned++)
				sv_warn("wire: a packet could not be sent: %s",
					strerror(errno));
			r = 1;
		}
		retried = 0;
		at = 0;
		vi = 0;
		for (int i = 0; i < r; i++) {
			at += nseg[i];
			vi += niov[i];
		}
		if (m) {
			uint64_t bytes = 0;

			for (uint32_t i = 0; i < vi; i++)
				bytes += iov[i].iov_len;
			atomic_fetch_add_explicit(ok ? &m->tx_pkts : &m->tx_errors,
						  (uint64_t)at, memory_order_relaxed);
			if (ok)
				atomic_fetch_add_explicit(&m->tx_bytes, bytes,
							  memory_order_relaxed);
		}
		w->head = (w->head + at) % SV_WIRE_SLOTS;
		w->n -= at;
	}
	if (!w->n) {
		w->head = 0;
		w->urgent = 0;
		__atomic_store_n(&w->held_at, 0, __ATOMIC_RELAXED);
	}
}

/* Sends all that waits, as far as the sockets take it.  Must hold
 * w->lock. */
static void flush_locked(struct sv_wire *w, struct sv_wire_shm *m)
{
	flush_upto(w, m, w->n);
}

/* Set while the application's poll drains (sv_wire_hold_acks). */
static __thread int acks_wait;

void sv_wire_hold_acks(int on)
{
	acks_wait = on && sv_tune.wire_ack_hold;
}

int sv_wire_acks_held(void)
{
	return acks_wait;
}

/* The batch: sent, as far as the sockets take it; the progress thread
 * woken for what is left. */
static void flush_now(struct sv_engine *eng, struct sv_wire *w)
{
	int left;

	sv_lock_spin_long(&w->lock, SV_LOCK_TX);
	flush_locked(w, eng->wshm);
	left = w->n != 0;
	sv_unlock_spin(&w->lock);
	if (left)
		sv_eng_want_work(eng);
}

void sv_wire_flush(struct sv_engine *eng)
{
	struct sv_wire *w = __atomic_load_n(&eng->wire, __ATOMIC_ACQUIRE);

	if (!w || !__atomic_load_n(&w->n, __ATOMIC_RELAXED))
		return;
	if (acks_wait && !__atomic_load_n(&w->urgent, __ATOMIC_RELAXED)) {
		/* ACKs only: they leave with the application's next call
		 * (its answer, most often: one system call for both), or
		 * the progress thread's next pass -- at most nap_max_ns (a
		 * deadline sooner would ring a napping thread every time). */
		uint64_t now = sv_now_ns();

		if (!__atomic_load_n(&w->held_at, __ATOMIC_RELAXED))
			__atomic_store_n(&w->held_at, now, __ATOMIC_RELAXED);
		sv_eng_deadline(eng, now + sv_tune.nap_max_ns);
		return;
	}
	flush_now(eng, w);
}

void sv_wire_flush_polled(struct sv_engine *eng)
{
	struct sv_wire *w = __atomic_load_n(&eng->wire, __ATOMIC_ACQUIRE);
	uint64_t at;

	if (!w || !__atomic_load_n(&w->n, __ATOMIC_RELAXED))
		return;
	at = __atomic_load_n(&w->held_at, __ATOMIC_RELAXED);
	if (at && !__atomic_load_n(&w->urgent, __ATOMIC_RELAXED) &&
	    sv_now_ns() - at < sv_tune.wire_ack_hold_ns)
		return;
	flush_now(eng, w);
}

void sv_wire_flush_all(struct sv_engine *eng)
{
	struct sv_wire *w = __atomic_load_n(&eng->wire, __ATOMIC_ACQUIRE);

	if (w && __atomic_load_n(&w->n, __ATOMIC_RELAXED))
		flush_now(eng, w);
}

void sv_wire_drain(struct sv_engine *eng)
{
	struct sv_wire *w = __atomic_load_n(&eng->wire, __ATOMIC_ACQUIRE);

	if (!w)
		return;
	for (int i = 0; i < 1000; i++) {
		int left;

		sv_lock_spin_long(&w->lock, SV_LOCK_TX);
		flush_locked(w, eng->wshm);
		left = w->n != 0;
		sv_unlock_spin(&w->lock);
		if (!left)
			return;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	sv_warn("engine %u: %u datagrams not sent when the device closed",
		eng->id, (unsigned)w->n);
}

int sv_wire_pending(struct sv_engine *eng)
{
	struct sv_wire *w = __atomic_load_n(&eng->wire, __ATOMIC_ACQUIRE);

	return w ? (int)__atomic_load_n(&w->n, __ATOMIC_RELAXED) : 0;
}

uint8_t *sv_wire_reserve(struct sv_link *l, uint32_t len, uint32_t type,
			 int *dead)
{
	struct sv_wire *w = l->eng->wire;
	struct sv_wire_slot *s;

	*dead = 0;
	if (!w || len + 8 > SLOT_BYTES)
		return NULL;
	sv_lock_spin_long(&w->lock, SV_LOCK_TX);
	/* Room for a duplicate too (fault injection). */
	if (w->n + 2 > SV_WIRE_SLOTS)
		flush_upto(w, l->eng->wshm, complete_trains(w));
	if (w->n + 2 > SV_WIRE_SLOTS) {
		sv_unlock_spin(&w->lock);
		sv_eng_want_work(l->eng);
		return NULL;
	}
	s = &w->slot[(w->head + w->n) % SV_WIRE_SLOTS];
	s->len = len;
	s->ext = NULL;
	w->cur = l;
	w->cur_type = type;
	return s->pkt;
}

/* Payloads shorter than this are copied: a copy of a few hundred bytes
 * costs less than the kernel's two more iovecs. */
#define WIRE_EXT_MIN 512

int sv_wire_payload(struct sv_link *l, const uint8_t *p, uint32_t len)
{
	struct sv_wire *w = l->eng->wire;
	struct sv_wire_slot *s;

	/* A capture copies the packet from the batch: it must be whole. */
	if (!w || w->cur != l || len < WIRE_EXT_MIN || sv_cap_on(l->eng))
		return 0;
	s = &w->slot[(w->head + w->n) % SV_WIRE_SLOTS];
	if (len > s->len)
		return 0;
	/* Memory that is not there fails the request now, as a copy would
	 * (IBV_WC_LOC_PROT_ERR), not its packets, one retry after another. */
	if (sv_safe_probe(p, len))
		return -EFAULT;
	s->ext = p;
	s->ext_len = len;
	return 1;
}

/* Copies slot s's payload into the batch, where a record without one has
 * it (a capture or a fault needs the packet whole); before its commit.
 * 0, or -EFAULT when the memory went away (the payload stays where it
 * was). */
static int materialize(struct sv_wire_slot *s)
{
	if (!s->ext)
		return 0;
	if (sv_safe_copy(s->pkt + s->len - s->ext_len, s->ext, s->ext_len))
		return -EFAULT;
	s->ext = NULL;
	return 0;
}

void sv_wire_abort(struct sv_link *l)
{
	struct sv_wire *w = l->eng->wire;

	w->cur = NULL;
	sv_unlock_spin(&w->lock);
}

/* Slot s into d: its fields and its packet's bytes (not the payload left
 * in the MR, sv_wire_payload). */
static void slot_copy(struct sv_wire_slot *d, const struct sv_wire_slot *s)
{
	memcpy(d, s, offsetof(struct sv_wire_slot, pkt));
	memcpy(d->pkt, s->pkt, s->off + s->len - (s->ext ? s->ext_len : 0));
}

/*
 * An ACK and the request behind it in one datagram.  A ping-pong's ACK
 * waits for the answer (sv_wire_hold_acks), and both leave in one
 * sendmmsg, but as two datagrams, each through the kernel's UDP stack on
 * both sides: a bare UDP ping-pong on a veth takes 4.5-5 us a way with
 * one datagram, 8-8.5 us with two (measured by hand, sendmmsg of one or
 * two).  An ACK is as short as a packet gets and a train's last segment
 * may be shorter than the others, so a request of the same flow
 * committed right after a lone plain ACK takes the ACK's place and the
 * ACK follows it as the train's last segment (sent as two RoCE packets,
 * the request first: the request and the ACK answer different PSN
 * sequences, one per direction, so their order is free).
 *
 * ack_behind: slot s (about to be committed at idx, its fields set) may
 * go before the waiting slot ahead of it.  Must hold w->lock.
 */
static int ack_behind(struct sv_wire *w, uint32_t idx,
		      const struct sv_wire_slot *s)
{
	const struct sv_wire_slot *p;

	if (idx == w->head || s->gfd < 0 || w->gso_off)
		return 0;
	p = &w->slot[(idx + SV_WIRE_SLOTS - 1) % SV_WIRE_SLOTS];
	return p->ack && !p->seg && !p->solo && !p->ext && p->gfd == s->gfd &&
	       p->len < s->len && 2u * s->len <= GSO_BYTES &&
	       p->ctl_len == s->ctl_len &&
	       !memcmp(&p->dst, &s->dst, sizeof(s->dst)) &&
	       !memcmp(p->ctl.buf, s->ctl.buf, s->ctl_len);
}

/* Moves slot idx (being committed) before the ACK at idx - 1, the ACK to
 * idx, its place in a train and its ICRC (an IPv4 segment's covers its
 * identification) made again.  Returns the slot's new index.  The slot
 * after idx is free (sv_wire_reserve keeps room for two).  Must hold
 * w->lock. */
static uint32_t ack_after(struct sv_wire *w, uint32_t idx)
{
	uint32_t prev = (idx + SV_WIRE_SLOTS - 1) % SV_WIRE_SLOTS,
		 spare = (idx + 1) % SV_WIRE_SLOTS;
	struct sv_wire_slot *a = &w->slot[spare], *r = &w->slot[prev];

	slot_copy(a, r);
	slot_copy(r, &w->slot[idx]);
	r->seg = train_place(w, prev, r);
	slot_copy(&w->slot[idx], a);
	a = &w->slot[idx];
	a->seg = train_place(w, idx, a);
	if (a->seg && !a->f.ipv6)
		slot_seal(a);
	return prev;
}

void sv_wire_commit(struct sv_link *l)
{
	struct sv_wire *w = l->eng->wire;
	uint32_t idx = (w->head + w->n) % SV_WIRE_SLOTS;
	struct sv_wire_slot *s = &w->slot[idx];
	struct sv_roce_flow f = l->w->flow;
	int grh = !!(w->cur_type & SV_REC_F_GRH), act;
	uint8_t *ib = s->pkt + (grh ? SV_GRH_BYTES : 0);
	uint32_t len = s->len - (grh ? SV_GRH_BYTES : 0), pad, icrc, hl = 0;
	uint64_t delay_ns = 0;

	if (grh) {
		/* UD: the AH's addressing, from the GRH the requester wrote;
		 * the link's ports. */
		uint16_t sport = f.sport, dport = f.dport;

		sv_roce_grh_flow(s->pkt, &f);
		f.sport = sport;
		f.dport = dport;
	}
	pad = (0u - len) & 3;
	bth_set_pad(ib, pad);
	/* What the fault model does to it first: a packet that is moved,
	 * doubled or held is made whole (its payload copied in). */
	act = sv_fault_pick(l, ib, len + pad, &delay_ns);
	if (act != SV_FAULT_NONE && act != SV_FAULT_DROP && materialize(s))
		act = SV_FAULT_DROP;
	if (s->ext)
		hl = len - s->ext_len; /* the headers, before the payload */
	s->off = grh ? SV_GRH_BYTES : 0;
	s->len = len + pad + SV_ICRC_BYTES;
	s->fd = l->w->fd;
	s->gfd = l->w->gfd;
	s->f = f;
	s->solo = 0;
	s->ctl_len = sv_wire_address(&f, l->eng->wire->fam, &s->dst, s->ctl.buf);
	s->ack = ib[0] == OPC_ACK && len >= SV_BTH_BYTES + SV_AETH_BYTES &&
		 (__aeth_syn(ib + SV_BTH_BYTES) & SV_AETH_TYPE_MASK) ==
			 SV_AETH_ACK;
	if (act == SV_FAULT_NONE && ack_behind(w, idx, s)) {
		idx = ack_after(w, idx);
		s = &w->slot[idx];
		ib = s->pkt + s->off;
	} else {
		/* In a train, segment k has identification k (above:
		 * "Trains"). */
		s->seg = train_place(w, idx, s);
	}
	if (!s->ext) {
		memset(ib + len, 0, pad);
		len += pad;
		slot_seal(s);
	} else {
		/* The pad and the ICRC right after the headers, the payload
		 * between them on the way out (flush_upto). */
		uint32_t c = sv_icrc_start(&f, ib, hl, len + pad,
					   f.ipv6 ? 0 : s->seg);

		if (sv_safe_crc(&c, s->ext, s->ext_len))
			act = SV_FAULT_DROP; /* the memory went away: lost */
		memset(ib + hl, 0, pad);
		icrc = sv_icrc_end(sv_crc32_le(c, ib + hl, pad));
		memcpy(ib + hl + pad, &icrc, SV_ICRC_BYTES);
		s->at = s->off + hl;
		len += pad;
	}
	w->cur = NULL;
	/* Only a plain ACK may wait (sv_wire_hold_acks); a NAK (a PSN
	 * missing, a receive missing) stops a stream that runs on. */
	if (!s->ack)
		__atomic_store_n(&w->urgent, w->urgent + 1, __ATOMIC_RELAXED);
	switch (act) {
	case SV_FAULT_DROP:
		break;
	case SV_FAULT_DELAY:
		/* Held (eng_fault.c), alone: the ones after it pass. */
		make_solo(s);
		if (sv_fault_late_dgram(l->eng, s->fd, &s->dst, s->ctl.buf,
					s->ctl_len, s->pkt + s->off, s->len,
					delay_ns))
			w->n++; /* could not hold it: now */
		break;
	case SV_FAULT_DUP:
		w->slot[(idx + 1) % SV_WIRE_SLOTS] = *s;
		make_solo(&w->slot[(idx + 1) % SV_WIRE_SLOTS]);
		w->n += 2;
		break;
	case SV_FAULT_REORDER:
		if (w->n && w->slot[(idx + SV_WIRE_SLOTS - 1) % SV_WIRE_SLOTS].fd ==
				    s->fd) {
			/* Swapped with the one before: it arrives late (and
			 * neither is in a train any more). */
			struct sv_wire_slot *p =
				&w->slot[(idx + SV_WIRE_SLOTS - 1) % SV_WIRE_SLOTS];
			struct sv_wire_slot tmp = *p;

			*p = *s;
			*s = tmp;
			make_solo(p);
			make_solo(s);
		}
		w->n++;
		break;
	default:
		w->n++;
		break;
	}
	sv_unlock_spin(&w->lock);
}

/* SPDX-License-Identifier: MIT */
/*
 * Receiving RoCE v2 (sv_wire.h): the checks and the ring record every
 * reader of the port makes of a datagram, the daemon's thread and the
 * engines alike.
 */
#include "sv_wire.h"
#include "sv_hdr.h"
#include "sv_roce.h"

#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#ifndef UDP_NO_CHECK6_RX
#define UDP_NO_CHECK6_RX 102
#endif
#ifndef IPV6_FLOWINFO
#define IPV6_FLOWINFO 11 /* linux/in6.h: receive the flow label */
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_GRO
#define UDP_GRO 104 /* linux/udp.h */
#endif

/* -------------------------------------------------------- the port -- */

int sv_wire_rx_trylock(struct sv_wire_shm *s, uint32_t pid, uint64_t now)
{
	uint32_t now_ms = (uint32_t)(now / 1000000u), holder;
	uint64_t cur = 0, mine = (uint64_t)pid << 32 | now_ms;
	int32_t age;

	if (atomic_compare_exchange_strong(&s->rx_owner, &cur, mine))
		return 1;
	holder = (uint32_t)(cur >> 32);
	if (holder == pid)
		return 0;
	/* Its reader died holding it, or sits stopped (SIGSTOP, a
	 * debugger) with it: the port is nobody's.  The take time is in the
	 * word we replace, so a reader that took the port again since is
	 * never robbed on the strength of an older take.  The age is signed:
	 * our `now` was read before the holder took the port, so a take a
	 * moment younger than it is a negative age, not a huge one. */
	age = (int32_t)(now_ms - (uint32_t)cur);
	if (age < (int32_t)(SV_WIRE_ALIVE_NS / 1000000u))
		return 0;
	if ((age > (int32_t)(SV_WIRE_STEAL_NS / 1000000u) ||
	     (kill((pid_t)holder, 0) < 0 && errno == ESRCH)) &&
	    atomic_compare_exchange_strong(&s->rx_owner, &cur, mine))
		return 1;
	return 0;
}

void sv_wire_rx_unlock(struct sv_wire_shm *s, uint32_t pid)
{
	uint64_t cur = atomic_load(&s->rx_owner);

	/* Ours still (not taken from us as stopped): give it up. */
	if ((uint32_t)(cur >> 32) == pid)
		atomic_compare_exchange_strong(&s->rx_owner, &cur, 0);
}

static void setopt(int fd, int level, int name, int v)
{
	(void)setsockopt(fd, level, name, &v, sizeof(v));
}

void sv_wire_rx_sockopts(int fd, int fam)
{
	if (fam == AF_INET6) {
		setopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
		setopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
		setopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
		setopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, 1);
		setopt(fd, IPPROTO_IPV6, IPV6_FLOWINFO, 1);
		/* rxe may send IPv6 with checksum 0 (the ICRC covers). */
		setopt(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, 1);
	} else {
		setopt(fd, IPPROTO_IP, IP_PKTINFO, 1);
	}
	setopt(fd, IPPROTO_IP, IP_RECVTOS, 1);
	setopt(fd, IPPROTO_IP, IP_RECVTTL, 1);
}

void sv_wire_rx_gro(int fd)
{
	setopt(fd, SOL_UDP, UDP_GRO, 1);
}

static uint32_t put_cmsg(void *ctl, uint32_t at, int level, int type,
			 const void *v, size_t n)
{
	struct cmsghdr *c = (struct cmsghdr *)((char *)ctl + at);

	c->cmsg_level = level;
	c->cmsg_type = type;
	c->cmsg_len = CMSG_LEN(n);
	memcpy(CMSG_DATA(c), v, n);
	return at + (uint32_t)CMSG_SPACE(n);
}

/*
 * The interface holding IPv6 address a, or 0: a datagram to an IPv6 group
 * must name it, for the kernel routes a group by interface (every one has
 * ff00::/8; an IPv4 group goes out the source address's own), where rxe
 * sends on its netdev.  A few addresses cached for a second.
 */
static unsigned mcast_ifindex(const uint8_t a[16])
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct {
		uint8_t a[16];
		unsigned idx;
		time_t at;
	} c[4];
	static unsigned next;
	struct ifaddrs *ifa, *i;
	time_t now = time(NULL);
	unsigned idx = 0, k;

	pthread_mutex_lock(&lock);
	for (k = 0; k < 4; k++)
		if (c[k].at && now - c[k].at < 2 && !memcmp(c[k].a, a, 16)) {
			idx = c[k].idx;
			pthread_mutex_unlock(&lock);
			return idx;
		}
	pthread_mutex_unlock(&lock);
	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && !idx; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET6 &&
		    !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, a, 16))
			idx = if_nametoindex(i->ifa_name);
	freeifaddrs(ifa);
	pthread_mutex_lock(&lock);
	k = next++ % 4;
	memcpy(c[k].a, a, 16);
	c[k].idx = idx;
	c[k].at = now;
	pthread_mutex_unlock(&lock);
	return idx;
}

uint32_t sv_wire_address(const struct sv_roce_flow *f, int fam,
			 struct sockaddr_in6 *dst, void *ctl)
{
	int hop = f->hop_limit ? f->hop_limit : 64;
	int tc = f->tclass;
	uint32_t n = 0;

	memset(dst, 0, sizeof(*dst));
	if (fam == AF_INET6) {
		struct in6_pktinfo pi;

		dst->sin6_family = AF_INET6;
		dst->sin6_port = htons(f->dport);
		memcpy(&dst->sin6_addr, f->dgid, 16);
		memset(&pi, 0, sizeof(pi));
		memcpy(&pi.ipi6_addr, f->sgid, 16);
		if (f->ipv6 && f->dgid[0] == 0xff)
			pi.ipi6_ifindex = mcast_ifindex(f->sgid);
		n = put_cmsg(ctl, n, IPPROTO_IPV6, IPV6_PKTINFO, &pi, sizeof(pi));
		if (f->ipv6) {
			dst->sin6_flowinfo = htonl(f->flow_label & 0xfffff);
			n = put_cmsg(ctl, n, IPPROTO_IPV6, IPV6_TCLASS, &tc,
				     sizeof(tc));
			return put_cmsg(ctl, n, IPPROTO_IPV6, IPV6_HOPLIMIT, &hop,
					sizeof(hop));
		}
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)dst;
		struct in_pktinfo pi;

		in->sin_family = AF_INET;
		in->sin_port = htons(f->dport);
		memcpy(&in->sin_addr, f->dgid + 12, 4);
		memset(&pi, 0, sizeof(pi));
		memcpy(&pi.ipi_spec_dst, f->sgid + 12, 4);
		n = put_cmsg(ctl, n, IPPROTO_IP, IP_PKTINFO, &pi, sizeof(pi));
	}
	n = put_cmsg(ctl, n, IPPROTO_IP, IP_TOS, &tc, sizeof(tc));
	return put_cmsg(ctl, n, IPPROTO_IP, IP_TTL, &hop, sizeof(hop));
}

int sv_wire_recv(int fd, struct sv_wire_rxb *b, int n)
{
	if (n > SV_WIRE_BATCH)
		n = SV_WIRE_BATCH;
	for (int i = 0; i < n; i++) {
		b->iov[i] = (struct iovec){ .iov_base = b->buf[i] + SV_WIRE_HEADROOM,
					    .iov_len = SV_WIRE_BUF - SV_WIRE_HEADROOM };
		b->mm[i].msg_hdr = (struct msghdr){ .msg_name = &b->name[i],
						    .msg_namelen = sizeof(b->name[i]),
						    .msg_iov = &b->iov[i],
						    .msg_iovlen = 1,
						    .msg_control = b->ctl[i],
						    .msg_controllen = sizeof(b->ctl[i]) };
		b->mm[i].msg_len = 0;
	}
	n = recvmmsg(fd, b->mm, (unsigned)n, MSG_DONTWAIT, NULL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		struct msghdr *mh = &b->mm[i].msg_hdr;

		b->seg[i] = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c;
		     c = CMSG_NXTHDR(mh, c))
			if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
				int g;

				memcpy(&g, CMSG_DATA(c), sizeof(g));
				b->seg[i] = g > 0 ? (uint32_t)g : 0;
			}
	}
	return n;
}

/* --------------------------------------------------------- receive -- */

struct gw_pkt {
	struct sv_roce_flow f;
	uint32_t flowinfo; /* IPv6: class and label as received */
	uint8_t *ib;
	size_t ib_len; /* with pad, without ICRC */
};

/* Fills p from a received datagram; 0 or -1 (not a RoCE packet). */
static int read_meta(const struct msghdr *mh, size_t n, uint8_t *buf,
		     uint16_t port, struct gw_pkt *p)
{
	int have_dst = 0;

	memset(&p->f, 0, sizeof(p->f));
	p->flowinfo = 0;
	p->f.dport = port;
	p->f.hop_limit = 64;
	if (mh->msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return -1;
	if (((const struct sockaddr *)mh->msg_name)->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = mh->msg_name;

		memcpy(p->f.sgid, &s->sin6_addr, 16);
		p->f.sport = ntohs(s->sin6_port);
	} else {
		const struct sockaddr_in *s = mh->msg_name;

		sv_gid_set_v4(p->f.sgid, &s->sin_addr);
		p->f.sport = ntohs(s->sin_port);
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)mh); c;
	     c = CMSG_NXTHDR((struct msghdr *)mh, c)) {
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(p->f.dgid, &pi.ipi6_addr, 16);
			have_dst = 1;
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			sv_gid_set_v4(p->f.dgid, &pi.ipi_addr);
			have_dst = 1;
		} else if (c->cmsg_level == IPPROTO_IPV6 &&
			   c->cmsg_type == IPV6_TCLASS) {
			int v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			p->f.tclass = (uint8_t)v;
		} else if (c->cmsg_level == IPPROTO_IPV6 &&
			   c->cmsg_type == IPV6_HOPLIMIT) {
			int v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			p->f.hop_limit = (uint8_t)v;
		} else if (c->cmsg_level == IPPROTO_IPV6 &&
			   c->cmsg_type == IPV6_FLOWINFO) {
			uint32_t v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			p->flowinfo = ntohl(v);
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
			p->f.tclass = *(const uint8_t *)CMSG_DATA(c);
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
			int v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			p->f.hop_limit = (uint8_t)v;
		}
	}
	if (!have_dst || n < SV_BTH_BYTES + SV_ICRC_BYTES)
		return -1;
	p->f.ipv6 = !sv_gid_is_v4(p->f.sgid);
	if (p->f.ipv6 == sv_gid_is_v4(p->f.dgid))
		return -1;
	p->f.flow_label = p->flowinfo & 0xfffff;
	p->ib = buf;
	p->ib_len = n - SV_ICRC_BYTES;
	return 0;
}

static int icrc_ok(const struct gw_pkt *p)
{
	uint32_t got;

	/* IPv4: identification 0 with DF (a lone datagram of ours), or
	 * any other (a segment of a train, rxe's, a NIC's), solved for. */
	memcpy(&got, p->ib + p->ib_len, 4);
	return !sv_icrc_check(&p->f, p->ib, p->ib_len, got);
}


int sv_wire_rx_parse(const struct msghdr *mh, size_t n, uint8_t *buf,
		     uint16_t port, struct sv_wire_pkt *out)
{
	struct gw_pkt p;
	uint8_t *b;
	unsigned pad;

	if (read_meta(mh, n, buf + SV_WIRE_HEADROOM, port, &p))
		return -EINVAL;
	if (!icrc_ok(&p))
		return -EBADMSG;
	b = p.ib;
	pad = (unsigned)__bth_pad(b);
	/* Transport version 0 only (9.2.6); the pad within the payload. */
	if (__bth_tver(b) != 0 || p.ib_len < SV_BTH_BYTES + pad)
		return -EINVAL;
	/* The record's GRH: the IPv6 header the packet came in, IPv4
	 * fields in the same places (sv_hdr.h). */
	grh_set(buf, p.f.tclass, p.f.flow_label,
		(uint16_t)(SV_ROCE_UDP_HDR + p.ib_len + SV_ICRC_BYTES),
		p.f.hop_limit, p.f.sgid, p.f.dgid);
	bth_set_pad(b, 0); /* none on a ring */
	out->rec = buf;
	out->rec_len = (uint32_t)(SV_GRH_BYTES + p.ib_len - pad);
	out->qpn = __bth_qpn(b);
	out->ib_len = (uint32_t)(p.ib_len + SV_ICRC_BYTES);
	return 0;
}

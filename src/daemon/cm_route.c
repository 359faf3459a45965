/* SPDX-License-Identifier: MIT */
/*
 * The way to another host, for rdma_resolve_addr (the kernel's
 * drivers/infiniband/core/addr.c, as rdma_cm uses it on a RoCE port).
 *
 * The kernel resolves an IP address in two steps:
 *  1. the route (ip_route_output_key, ip6_route_output): the source
 *     address and the netdev.  No route is an error of rdma_resolve_addr
 *     itself (-ENETUNREACH and the like), no event;
 *  2. the neighbour of the next hop (the gateway, or the destination on
 *     its link): until it answers ARP or ND the request waits, and when
 *     timeout_ms passes first the id gets ADDR_ERROR -ETIMEDOUT.
 * RoCE v2 needs the neighbour only for the Ethernet header, which our UDP
 * socket leaves to the kernel; but its answer is what tells a host that is
 * there from one that is not, so softverbs waits for it the same way: the
 * route and the neighbour come from rtnetlink (RTM_GETROUTE,
 * RTM_GETNEIGH), and a neighbour that is unknown or failed is probed by
 * sending it an empty UDP datagram (to the discard port), which makes the
 * kernel resolve it.  cm_addr.c asks again on a timer until it is
 * resolved or the time is up.
 */
#include "svd_cm.h"
#include "sv_log.h"

#include <errno.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define DISCARD_PORT 9
/* NUD_VALID of the kernel's net/neighbour.h: a link-layer address known. */
#define NEIGH_VALID (NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | \
		     NUD_STALE | NUD_DELAY)

int svd_cm_route_source(const union sv_sockaddr *dst, union sv_sockaddr *src)
{
	union sv_sockaddr d = *dst, s;
	socklen_t len = sizeof(s);
	int fd, ret = 0;

	/* connect() on a UDP socket is the route lookup and source address
	 * selection of the kernel's addr4_resolve/addr6_resolve. */
	svd_cm_set_port(&d, DISCARD_PORT);
	fd = socket(dst->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, &d.sa, svd_cm_addr_len(&d)) < 0 ||
	    getsockname(fd, &s.sa, &len) < 0)
		ret = -errno;
	close(fd);
	if (!ret)
		*src = s;
	return ret;
}

/* ---- rtnetlink: one request, one answer -------------------------------- */

struct nl_req {
	struct nlmsghdr h;
	union {
		struct rtmsg rt;
		struct ndmsg nd;
	};
	uint8_t attrs[64];
};

static void nl_attr(struct nl_req *r, uint16_t type, const void *data,
		    uint16_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)r + NLMSG_ALIGN(r->h.nlmsg_len));

	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	r->h.nlmsg_len = NLMSG_ALIGN(r->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* Sends r and reads its answer into buf: the answer's length, or a
 * negative errno (the kernel's NLMSG_ERROR included). */
static int nl_ask(struct nl_req *r, uint8_t *buf, size_t size)
{
	struct sockaddr_nl k = { .nl_family = AF_NETLINK };
	struct timeval tv = { .tv_sec = 1 };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	ssize_t n;

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r->h.nlmsg_flags = NLM_F_REQUEST;
	r->h.nlmsg_seq = 1;
	if (sendto(fd, r, r->h.nlmsg_len, 0, (struct sockaddr *)&k,
		   sizeof(k)) < 0) {
		n = -errno;
		goto out;
	}
	do
		n = recv(fd, buf, size, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		n = -errno;
		goto out;
	}
	if (!NLMSG_OK(h, (size_t)n)) {
		n = -EBADMSG;
	} else if (h->nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(h);

		n = h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error ?
			    e->error : -EBADMSG;
	}
out:
	close(fd);
	return (int)n;
}

static int addr_bytes(const union sv_sockaddr *a, const void **p)
{
	if (a->sa.sa_family == AF_INET) {
		*p = &a->in.sin_addr;
		return 4;
	}
	*p = &a->in6.sin6_addr;
	return 16;
}

/* The next hop towards dst (the gateway, else dst) and its interface;
 * 1 when no neighbour is needed (a local or loopback route). */
static int next_hop(const union sv_sockaddr *dst, uint8_t hop[16],
		    uint32_t *oif)
{
	struct nl_req r;
	uint8_t buf[4096];
	const void *addr;
	int alen = addr_bytes(dst, &addr), n;
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	const struct rtmsg *rt;
	const struct rtattr *a;
	int left;

	memset(&r, 0, sizeof(r));
	r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	r.h.nlmsg_type = RTM_GETROUTE;
	r.rt.rtm_family = (unsigned char)dst->sa.sa_family;
	r.rt.rtm_dst_len = (unsigned char)(alen * 8);
	nl_attr(&r, RTA_DST, addr, (uint16_t)alen);
	if (dst->sa.sa_family == AF_INET6 && dst->in6.sin6_scope_id)
		nl_attr(&r, RTA_OIF, &dst->in6.sin6_scope_id, 4);
	n = nl_ask(&r, buf, sizeof(buf));
	if (n < 0)
		return n;
	if (h->nlmsg_type != RTM_NEWROUTE ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*rt)))
		return -EBADMSG;
	rt = NLMSG_DATA(h);
	if (rt->rtm_type == RTN_LOCAL)
		return 1;
	if (rt->rtm_type != RTN_UNICAST)
		return -EHOSTUNREACH;
	memcpy(hop, addr, (size_t)alen);
	*oif = 0;
	left = (int)RTM_PAYLOAD(h);
	for (a = RTM_RTA(rt); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
		if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) == 4)
			memcpy(oif, RTA_DATA(a), 4);
		else if (a->rta_type == RTA_GATEWAY &&
			 RTA_PAYLOAD(a) == (unsigned)alen)
			memcpy(hop, RTA_DATA(a), (size_t)alen);
	}
	return *oif ? 0 : -EHOSTUNREACH;
}

/* The neighbour's NUD_* state, or 0 when it has no entry. */
static int neigh_state(int family, uint32_t oif, const uint8_t *hop)
{
	struct nl_req r;
	uint8_t buf[1024];
	const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
	int n;

	memset(&r, 0, sizeof(r));
	r.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
	r.h.nlmsg_type = RTM_GETNEIGH;
	r.nd.ndm_family = (uint8_t)family;
	r.nd.ndm_ifindex = (int)oif;
	nl_attr(&r, NDA_DST, hop, family == AF_INET ? 4 : 16);
	n = nl_ask(&r, buf, sizeof(buf));
	if (n < 0 || h->nlmsg_type != RTM_NEWNEIGH ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ndmsg)))
		return 0;
	return ((const struct ndmsg *)NLMSG_DATA(h))->ndm_state;
}

/* Interfaces without neighbours (loopback, point-to-point, IFF_NOARP). */
static int link_needs_neigh(uint32_t oif)
{
	struct ifreq ifr;
	int fd, need = 1;

	memset(&ifr, 0, sizeof(ifr));
	if (!if_indextoname(oif, ifr.ifr_name))
		return 1;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
		need = !(ifr.ifr_flags & (IFF_LOOPBACK | IFF_NOARP |
					  IFF_POINTOPOINT));
	close(fd);
	return need;
}

/* An empty datagram to dst: the kernel resolves the next hop to send it. */
static void probe(const union sv_sockaddr *dst)
{
	union sv_sockaddr d = *dst;
	int fd = socket(dst->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	svd_cm_set_port(&d, DISCARD_PORT);
	if (sendto(fd, "", 0, MSG_DONTWAIT, &d.sa, svd_cm_addr_len(&d)) < 0)
		sv_dbg("cm: neighbour probe: %s", strerror(errno));
	close(fd);
}

int svd_cm_neigh_resolve(const union sv_sockaddr *dst)
{
	uint8_t hop[16];
	uint32_t oif = 0;
	int st, ret = next_hop(dst, hop, &oif);

	if (ret)
		return ret < 0 ? ret : 1;
	if (!link_needs_neigh(oif))
		return 1;
	st = neigh_state(dst->sa.sa_family, oif, hop);
	if (st & NEIGH_VALID)
		return 1;
	/* Unknown or failed: ask; INCOMPLETE: the kernel is asking. */
	if (!(st & NUD_INCOMPLETE))
		probe(dst);
	return 0;
}

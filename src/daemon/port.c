/* SPDX-License-Identifier: MIT */
/*
 * Port 1 follows the namespace's network, as a RoCE device's port follows
 * its netdev in the kernel.
 *
 * GIDs (drivers/infiniband/core/roce_gid_mgmt.c): every IPv4 and IPv6
 * address of the namespace is a RoCE v2 GID.  The daemon subscribes to
 * rtnetlink (RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR) on
 * its event loop and keeps the table in stable slots (port_tab.c):
 *
 *  - RTM_NEWADDR adds the address (the inetaddr/inet6addr notifiers'
 *    NETDEV_UP -> ib_cache_gid_add), RTM_DELADDR removes it (NETDEV_DOWN
 *    -> ib_cache_gid_del), RTM_DELLINK removes all of the interface's
 *    (NETDEV_UNREGISTER -> ib_cache_gid_del_all_netdev_gids);
 *  - like the kernel, the address's state does not matter: an IPv6
 *    address is a GID from the moment it is added, tentative (DAD not
 *    done) or not, since the inet6addr notifier runs in ipv6_add_addr,
 *    before DAD; and an interface going down removes nothing by itself
 *    (roce_gid_mgmt ignores the netdev's NETDEV_DOWN): its IPv6 addresses
 *    leave because addrconf deletes them (RTM_DELADDR), its IPv4 ones stay;
 *  - each change sends IBV_EVENT_GID_CHANGE, element port 1, to every
 *    open context (cache.c dispatch_gid_change_event: one per add or
 *    delete, one for a whole interface);
 *  - deliberately unlike the kernel, which has no RoCE device on
 *    loopback: lo's addresses are GIDs too, and ::ffff:127.0.0.1 is always
 *    there, even where lo is down, so that programs of one host can always
 *    meet; and the GID of an IPv4 address with a peer is its local address.
 *
 * MTU (rxe.c rxe_set_mtu, rxe_net.c rxe_notify): rxe's port MTU is the
 * largest IB MTU that fits its netdev's MTU less the RoCE headers, and
 * NETDEV_CHANGEMTU changes it with no event.  Our one port spans every
 * interface: its active MTU is the smallest of those that are up, not
 * loopback and hold an address (4096 when there are none), updated on
 * RTM_NEWLINK, with no event either.  max_mtu stays 4096.
 *
 * The table and the MTUs are published in the key table's port block
 * (sv_keytab.h) before the event leaves, so the engines route by what
 * the event announces.
 *
 * Robustness: the socket overflowing (ENOBUFS: events were lost) or a
 * truncated message makes a full resync by dump, reconciled against the
 * table so that what is still there keeps its slot.  Without netlink at
 * all (socket refused, or SOFTVERBS_FAULT=no_netlink), the table is
 * reconciled from getifaddrs() at every query instead; events then leave
 * when a query finds the change.  Only the kernel's messages count.
 */
#include "svd_engine.h"
#include "svd_port.h"
#include "sv_keytab.h"
#include "sv_log.h"
#include "sv_sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static_assert(SV_KEYTAB_GIDS == SV_GID_TBL_LEN, "port block holds the table");

static struct {
	struct svd_watch w; /* rtnetlink subscription; fd -1: polling */
	struct svd_port_tab tab;
	struct sv_keytab_port pub; /* last published block */
	int full_warned;
} port = { .w = { .kind = SVD_W_PORT, .fd = -1 } };

/* What a dump or getifaddrs found: addresses and interfaces. */
struct snap {
	struct svd_port_addr *a;
	uint32_t na, capa;
	struct svd_port_link *l;
	uint32_t nl, capl;
};

static int grow(void **p, uint32_t *cap, uint32_t n, size_t size)
{
	void *q;

	if (n < *cap)
		return 0;
	q = realloc(*p, (*cap ? 2 * *cap : 16) * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = *cap ? 2 * *cap : 16;
	return 0;
}

static int snap_addr(struct snap *s, const struct svd_port_addr *a)
{
	if (grow((void **)&s->a, &s->capa, s->na, sizeof(*s->a)))
		return -ENOMEM;
	s->a[s->na++] = *a;
	return 0;
}

static int snap_link(struct snap *s, const struct svd_port_link *l)
{
	for (uint32_t i = 0; i < s->nl; i++)
		if (s->l[i].ifindex == l->ifindex)
			return 0;
	if (grow((void **)&s->l, &s->capl, s->nl, sizeof(*s->l)))
		return -ENOMEM;
	s->l[s->nl++] = *l;
	return 0;
}

static void snap_free(struct snap *s)
{
	free(s->a);
	free(s->l);
	memset(s, 0, sizeof(*s));
}

static void make_gid(int family, const void *addr, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, addr, 4);
	} else {
		memcpy(gid, addr, 16);
	}
}

/* ---- publishing ------------------------------------------------------- */

/* Writes the port block when it differs from the last one written. */
static void publish(void)
{
	struct sv_keytab_port p;
	const struct svd_port_tab *t = &port.tab;

	memset(&p, 0, sizeof(p));
	p.active_mtu = svd_ptab_active_mtu(t);
	p.ngids = svd_ptab_ngids(t);
	for (uint32_t i = 0; i < SV_KEYTAB_GIDS; i++) {
		const struct svd_gid_slot *s = &t->slot[i];

		if (!s->used)
			continue;
		memcpy(p.gid[i].raw, s->gid, 16);
		p.gid[i].ifindex = s->ifindex;
		p.gid[i].mtu = svd_ptab_link_mtu(t, s->ifindex);
	}
	p.gen = port.pub.gen;
	if (!memcmp(&p, &port.pub, sizeof(p)))
		return;
	p.gen++;
	port.pub = p;
	svd_keytab_port_publish(&p);
}

/* n changes of the table happened: publish, then one event for each. */
static void commit(int n)
{
	publish();
	for (int i = 0; i < n; i++)
		svd_ctx_event_all(IBV_EVENT_GID_CHANGE, 1);
}

static void full_warning(void)
{
	if (!port.full_warned)
		sv_warn("GID table full (%d slots): addresses beyond it are "
			"not GIDs", SV_GID_TBL_LEN);
	port.full_warned = 1;
}

/* ---- rtnetlink -------------------------------------------------------- */

/* The address of an RTM_NEWADDR/RTM_DELADDR: 0, or -1 to ignore it. */
static int parse_addr(const struct nlmsghdr *h, struct svd_port_addr *a)
{
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	const void *local = NULL, *address = NULL;
	struct rtattr *rta;
	int len;
	size_t alen;

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifa)))
		return -1;
	if (ifa->ifa_family == AF_INET)
		alen = 4;
	else if (ifa->ifa_family == AF_INET6)
		alen = 16;
	else
		return -1;
	len = (int)IFA_PAYLOAD(h);
	for (rta = IFA_RTA(ifa); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		if (RTA_PAYLOAD(rta) < alen)
			continue;
		if (rta->rta_type == IFA_LOCAL)
			local = RTA_DATA(rta);
		else if (rta->rta_type == IFA_ADDRESS)
			address = RTA_DATA(rta);
	}
	/* IFA_LOCAL is the interface's own address where there is a peer
	 * (IFA_ADDRESS then names the peer). */
	if (!local)
		local = address;
	if (!local || !ifa->ifa_index)
		return -1;
	memset(a, 0, sizeof(*a));
	make_gid(ifa->ifa_family, local, a->gid);
	a->ifindex = ifa->ifa_index;
	a->family = ifa->ifa_family;
	return 0;
}

/* The interface of an RTM_NEWLINK/RTM_DELLINK: 0, or -1 to ignore it. */
static int parse_link(const struct nlmsghdr *h, struct svd_port_link *l)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	struct rtattr *rta;
	int len;

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)) || ifi->ifi_index <= 0)
		return -1;
	memset(l, 0, sizeof(*l));
	l->ifindex = (uint32_t)ifi->ifi_index;
	l->flags = ifi->ifi_flags;
	len = (int)IFLA_PAYLOAD(h);
	for (rta = IFLA_RTA(ifi); RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
		if (rta->rta_type == IFLA_MTU && RTA_PAYLOAD(rta) >= 4)
			memcpy(&l->mtu, RTA_DATA(rta), 4);
	return 0;
}

/* One message of the subscription, applied at once. */
static void apply_msg(const struct nlmsghdr *h)
{
	struct svd_port_addr a;
	struct svd_port_link l;
	int r;

	switch (h->nlmsg_type) {
	case RTM_NEWADDR:
	case RTM_DELADDR:
		if (parse_addr(h, &a))
			return;
		r = h->nlmsg_type == RTM_NEWADDR ? svd_ptab_addr_add(&port.tab, &a) :
						   svd_ptab_addr_del(&port.tab, &a);
		if (r == -ENOSPC)
			full_warning();
		commit(r > 0);
		break;
	case RTM_NEWLINK:
		if (parse_link(h, &l))
			return;
		if (svd_ptab_link_set(&port.tab, &l))
			sv_warn("no memory for interface %u", l.ifindex);
		commit(0);
		break;
	case RTM_DELLINK:
		if (parse_link(h, &l))
			return;
		/* One event for the whole interface, as the kernel's. */
		commit(svd_ptab_link_del(&port.tab, l.ifindex) > 0);
		break;
	}
}

/* Adds what one dump message says to s: 0, 1 at NLMSG_DONE, or a
 * negative errno (the dump failed; -EINTR: interrupted by a change). */
static int dump_msg(const struct nlmsghdr *h, struct snap *s)
{
	struct svd_port_addr a;
	struct svd_port_link l;

	if (h->nlmsg_flags & NLM_F_DUMP_INTR)
		return -EINTR;
	switch (h->nlmsg_type) {
	case NLMSG_DONE:
		return 1;
	case NLMSG_ERROR: {
		const struct nlmsgerr *e = NLMSG_DATA(h);

		if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
			return -EIO;
		return e->error ? e->error : -EIO;
	}
	case RTM_NEWADDR:
		return parse_addr(h, &a) ? 0 : snap_addr(s, &a);
	case RTM_NEWLINK:
		return parse_link(h, &l) ? 0 : snap_link(s, &l);
	}
	return 0;
}

static union {
	char buf[65536];
	struct nlmsghdr align;
} nlbuf;

/* One datagram from the kernel into nlbuf: its length, -EAGAIN, -ENOBUFS
 * (events were lost), -EMSGSIZE (truncated: lost too), or another
 * negative errno.  Datagrams of anyone but the kernel are dropped. */
static ssize_t nl_recv(int fd)
{
	struct sockaddr_nl from;
	struct iovec iov = { nlbuf.buf, sizeof(nlbuf.buf) };
	struct msghdr m = { .msg_name = &from, .msg_namelen = sizeof(from),
			    .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	for (;;) {
		n = recvmsg(fd, &m, MSG_DONTWAIT);
		if (n < 0)
			return errno == EINTR ? -EAGAIN : -errno;
		if (m.msg_flags & MSG_TRUNC)
			return -EMSGSIZE;
		if (m.msg_namelen == sizeof(from) && from.nl_family == AF_NETLINK &&
		    from.nl_pid == 0)
			return n;
		m.msg_namelen = sizeof(from);
	}
}

/* Dumps type (RTM_GETLINK or RTM_GETADDR) into s: 0 or a negative errno. */
static int nl_dump(uint16_t type, struct snap *s)
{
	static uint32_t seq;
	struct {
		struct nlmsghdr h;
		union {
			struct ifinfomsg link;
			struct ifaddrmsg addr;
		} m;
	} req;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct timeval tv = { 2, 0 };
	int fd, err = 0;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	/* A dump answers at once; never let a silent kernel hang the loop. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(type == RTM_GETLINK ?
					       sizeof(req.m.link) :
					       sizeof(req.m.addr));
	req.h.nlmsg_type = type;
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.h.nlmsg_seq = ++seq;
	if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) < 0) {
		err = -errno;
		goto out;
	}
	while (!err) {
		ssize_t n;
		int len;

		n = recv(fd, nlbuf.buf, sizeof(nlbuf.buf), MSG_TRUNC);
		if (n < 0) {
			err = errno == EINTR ? 0 : -errno;
			continue;
		}
		if ((size_t)n > sizeof(nlbuf.buf)) {
			err = -EMSGSIZE;
			break;
		}
		len = (int)n;
		for (struct nlmsghdr *h = &nlbuf.align; !err && NLMSG_OK(h, len);
		     h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_seq != seq)
				continue;
			err = dump_msg(h, s);
		}
	}
out:
	close(fd);
	return err > 0 ? 0 : err;
}

/* Links then addresses, again while a change interrupts the dump. */
static int dump_all(struct snap *s)
{
	int err = -EINTR;

	for (int tries = 0; tries < 5 && err == -EINTR; tries++) {
		snap_free(s);
		err = nl_dump(RTM_GETLINK, s);
		if (!err)
			err = nl_dump(RTM_GETADDR, s);
	}
	return err;
}

/* ---- getifaddrs: where there is no netlink ---------------------------- */

static uint32_t ioctl_mtu(int sock, const char *name)
{
	struct ifreq ifr;

	if (sock < 0)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	return ioctl(sock, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0 ?
		       (uint32_t)ifr.ifr_mtu : 0;
}

static int getifaddrs_all(struct snap *s)
{
	struct ifaddrs *ifa, *i;
	int sock, err = 0;

	if (getifaddrs(&ifa) < 0)
		return -errno;
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	for (i = ifa; i && !err; i = i->ifa_next) {
		struct svd_port_link l = { .ifindex = if_nametoindex(i->ifa_name),
					   .flags = i->ifa_flags };
		const struct sockaddr *sa = i->ifa_addr;
		struct svd_port_addr a;

		if (!l.ifindex)
			continue;
		l.mtu = ioctl_mtu(sock, i->ifa_name);
		err = snap_link(s, &l);
		if (err || !sa ||
		    (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
			continue;
		memset(&a, 0, sizeof(a));
		make_gid(sa->sa_family,
			 sa->sa_family == AF_INET ?
				 (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr :
				 (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
			 a.gid);
		a.ifindex = l.ifindex;
		a.family = (uint8_t)sa->sa_family;
		err = snap_addr(s, &a);
	}
	if (sock >= 0)
		close(sock);
	freeifaddrs(ifa);
	return err;
}

/* ---- the table -------------------------------------------------------- */

/* Makes the table what the namespace holds now (a dump where netlink
 * works, else getifaddrs), moving nothing that stays. */
static void resync(void)
{
	struct snap s = { 0 };
	int n, err = port.w.fd >= 0 ? dump_all(&s) : -ENOTSUP;

	if (err) {
		if (port.w.fd >= 0)
			sv_warn("rtnetlink dump: %s; reading getifaddrs",
				strerror(-err));
		snap_free(&s);
		err = getifaddrs_all(&s);
	}
	if (err) {
		sv_warn("cannot read the namespace's addresses: %s",
			strerror(-err));
		snap_free(&s);
		return;
	}
	n = svd_ptab_reconcile(&port.tab, s.a, s.na, s.l, s.nl);
	snap_free(&s);
	if (n < 0) {
		sv_warn("GID table: %s", strerror(-n));
		return;
	}
	commit(n);
}

/* Without the subscription, the table is as fresh as the last query. */
static void refresh(void)
{
	if (port.w.fd < 0)
		resync();
}

static int fault_no_netlink(void)
{
	const char *f = getenv("SOFTVERBS_FAULT");

	return f && strstr(f, "no_netlink");
}

int svd_port_init(void)
{
	struct sockaddr_nl me = { .nl_family = AF_NETLINK,
				  .nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR |
					       RTMGRP_IPV6_IFADDR };
	int fd = -1, buf = 1 << 20;

	if (!fault_no_netlink())
		fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    NETLINK_ROUTE);
	if (fd >= 0) {
		/* Room for bursts (an interface with many addresses going
		 * away); past it ENOBUFS makes a resync. */
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf,
			       sizeof(buf)) < 0)
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
		port.w.fd = fd;
		if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
		    svd_watch_add(&port.w, EPOLLIN)) {
			sv_warn("rtnetlink: %s; the GID table is read at each "
				"query", strerror(errno));
			close(fd);
			port.w.fd = -1;
		}
	} else {
		sv_info("no rtnetlink: the GID table is read at each query");
	}
	/* Subscribed first, dumped second: a change in between shows in
	 * both, and applying it twice changes nothing. */
	resync();
	return 0;
}

void svd_port_readable(void)
{
	int lost = 0;
	ssize_t n;

	while ((n = nl_recv(port.w.fd)) != -EAGAIN) {
		int len = (int)n;

		if (n == -ENOBUFS || n == -EMSGSIZE) {
			lost = 1;
			continue;
		}
		if (n < 0) {
			sv_warn("rtnetlink: %s", strerror((int)-n));
			break;
		}
		for (struct nlmsghdr *h = &nlbuf.align; NLMSG_OK(h, len);
		     h = NLMSG_NEXT(h, len))
			apply_msg(h);
	}
	if (lost) {
		sv_info("rtnetlink overflowed: reading the whole table again");
		resync();
	}
}

void svd_port_close(void)
{
	if (port.w.fd >= 0) {
		svd_watch_del(&port.w);
		close(port.w.fd);
		port.w.fd = -1;
	}
	svd_ptab_free(&port.tab);
}

uint32_t svd_port_active_mtu(void)
{
	refresh();
	return svd_ptab_active_mtu(&port.tab);
}

/* ---- queries ---------------------------------------------------------- */

int svd_query_port(uint32_t port_num, struct ibv_port_attr *p)
{
	if (port_num != 1)
		return -EINVAL;
	refresh();
	memset(p, 0, sizeof(*p));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = svd_ptab_active_mtu(&port.tab);
	p->gid_tbl_len = SV_GID_TBL_LEN;
	p->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	p->max_msg_sz = SV_MAX_MSG_SZ;
	p->pkey_tbl_len = SV_MAX_PKEYS;
	p->lid = 0;
	p->sm_lid = 0;
	p->lmc = 0;
	p->max_vl_num = 1;	/* one data VL */
	p->active_width = 2;	/* 4X */
	p->active_speed = 32;	/* EDR: 4X EDR = 100 Gb/s */
	p->phys_state = 5;	/* LinkUp */
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

int svd_query_gids(uint32_t port_num, struct sv_gid_table *t)
{
	if (port_num != 1)
		return -EINVAL;
	refresh();
	memset(t, 0, sizeof(*t));
	t->count = svd_ptab_ngids(&port.tab);
	for (uint32_t i = 0; i < t->count; i++) {
		const struct svd_gid_slot *s = &port.tab.slot[i];
		struct ibv_gid_entry *e = &t->entries[i];

		if (!s->used)
			continue;
		t->valid |= 1u << i;
		memcpy(e->gid.raw, s->gid, 16);
		e->gid_index = i;
		e->port_num = 1;
		e->gid_type = IBV_GID_TYPE_ROCE_V2;
		e->ndev_ifindex = s->ifindex;
	}
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * rdma_cm addressing (the kernel's cma.c bind/resolve/listen half and
 * addr.c): IP addresses to this device's RoCE v2 GIDs, port spaces,
 * rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, rdma_listen.
 *
 * Every address of this network namespace is a GID of our one port
 * (device.c), 127.0.0.1 and ::1 included: an id bound to one of them
 * uses the device, except a loopback address, which binds like the
 * wildcard (svd_cm_any_addr), and an id resolving to any of them goes to
 * ourselves.  A destination that is not ours is another host, reached
 * over the wire (RoCE v2): the source address the route picks, the
 * destination's address as the destination GID, and the neighbour's
 * answer waited for as the kernel's addr.c does (cm_route.c).
 */
#include "svd_cm.h"
#include "svd_gw.h"
#include "svd_ops.h"
#include "svd_port.h"
#include "sv_hdr.h"
#include "sv_log.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#define PROT_SOCK 1024	 /* ports below need CAP_NET_BIND_SERVICE */
#define CAP_NET_BIND_SERVICE_BIT 10
#define MAX_BACKLOG 1024 /* the kernel's rdma_ucm max_backlog */

static struct svd_cm_bind *binds;

/* ---- addresses --------------------------------------------------------- */

/*
 * The kernel's cma_any_addr: the wildcard or a loopback address.  So, as
 * on any kernel device, binding to 127.0.0.1 or ::1 attaches no device
 * (id->verbs stays NULL: libfabric's verbs provider then takes the
 * device's interface address), a listener on it listens on every device
 * and takes requests to any address of its family, and resolving it goes
 * to ourselves through loopback.
 */
int svd_cm_any_addr(const union sv_sockaddr *a)
{
	switch (a->sa.sa_family) {
	case AF_INET:
		return a->in.sin_addr.s_addr == htonl(INADDR_ANY) ||
		       (ntohl(a->in.sin_addr.s_addr) >> 24) == 127;
	case AF_INET6:
		return IN6_IS_ADDR_UNSPECIFIED(&a->in6.sin6_addr) ||
		       IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr);
	default:
		return 0;
	}
}

/* Addresses only, not ports (the kernel's cma_addr_cmp): 1 when equal. */
int svd_cm_addr_eq(const union sv_sockaddr *a, const union sv_sockaddr *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return 0;
	if (a->sa.sa_family == AF_INET)
		return a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
	return !memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16) &&
	       (!IN6_IS_ADDR_LINKLOCAL(&a->in6.sin6_addr) ||
		a->in6.sin6_scope_id == b->in6.sin6_scope_id);
}

uint16_t svd_cm_port(const union sv_sockaddr *a)
{
	if (a->sa.sa_family == AF_INET)
		return ntohs(a->in.sin_port);
	if (a->sa.sa_family == AF_INET6)
		return ntohs(a->in6.sin6_port);
	return 0;
}

void svd_cm_set_port(union sv_sockaddr *a, uint16_t port)
{
	if (a->sa.sa_family == AF_INET)
		a->in.sin_port = htons(port);
	else if (a->sa.sa_family == AF_INET6)
		a->in6.sin6_port = htons(port);
}

socklen_t svd_cm_addr_len(const union sv_sockaddr *a)
{
	return a->sa.sa_family == AF_INET ? sizeof(a->in) :
	       a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : 0;
}

/* RoCE v2: an IPv4 address is the GID ::ffff:a.b.c.d (rdma_ip2gid). */
void svd_cm_ip2gid(const union sv_sockaddr *a, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (a->sa.sa_family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &a->in.sin_addr, 4);
	} else if (a->sa.sa_family == AF_INET6) {
		memcpy(gid, &a->in6.sin6_addr, 16);
	}
}

static int gid_lookup(const uint8_t gid[16], struct ibv_gid_entry *out)
{
	struct sv_gid_table t;

	svd_query_gids(1, &t);
	for (uint32_t i = 0; i < t.count; i++)
		if (sv_gid_valid(&t, i) && !memcmp(t.entries[i].gid.raw, gid, 16)) {
			if (out)
				*out = t.entries[i];
			return (int)i;
		}
	return -1;
}

int svd_cm_gid_index(const uint8_t gid[16])
{
	return gid_lookup(gid, NULL);
}

/* Whether the address is configured on an interface of this namespace
 * (the kernel's rdma_translate_ip: -EADDRNOTAVAIL otherwise). */
static int addr_is_ours(const union sv_sockaddr *a)
{
	struct ifaddrs *ifa, *i;
	int found = 0;

	if (a->sa.sa_family == AF_INET &&
	    (ntohl(a->in.sin_addr.s_addr) >> 24) == 127)
		return 1; /* all of 127/8 is local */
	if (getifaddrs(&ifa) < 0)
		return 0;
	for (i = ifa; i && !found; i = i->ifa_next) {
		union sv_sockaddr x;

		if (!i->ifa_addr || i->ifa_addr->sa_family != a->sa.sa_family)
			continue;
		memset(&x, 0, sizeof(x));
		memcpy(&x, i->ifa_addr, a->sa.sa_family == AF_INET ?
						sizeof(x.in) : sizeof(x.in6));
		if (a->sa.sa_family == AF_INET6)
			x.in6.sin6_scope_id = a->in6.sin6_scope_id;
		found = svd_cm_addr_eq(&x, a);
	}
	freeifaddrs(ifa);
	return found;
}

static uint32_t netdev_mtu(uint32_t ifindex)
{
	struct ifreq ifr;
	int fd, mtu = 1500;

	memset(&ifr, 0, sizeof(ifr));
	if (!if_indextoname(ifindex, ifr.ifr_name))
		return 1500;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1500;
	if (ioctl(fd, SIOCGIFMTU, &ifr) == 0)
		mtu = ifr.ifr_mtu;
	close(fd);
	return (uint32_t)mtu;
}

/* The IB MTU a netdev MTU carries (the kernel's iboe_get_mtu). */
static uint8_t iboe_mtu(uint32_t mtu)
{
	/* GRH/IP + UDP + BTH + XRC + AtomicETH + ICRC */
	if (mtu < 40 + 8 + 12 + 4 + 28 + 4)
		return 0;
	mtu -= 40 + 8 + 12 + 4 + 28 + 4;
	return mtu >= 4096 ? IBV_MTU_4096 : mtu >= 2048 ? IBV_MTU_2048 :
	       mtu >= 1024 ? IBV_MTU_1024 : mtu >= 512 ? IBV_MTU_512 :
	       mtu >= 256 ? IBV_MTU_256 : 0;
}

int svd_cm_acquire_dev(struct svd_cm_id *id)
{
	struct ibv_gid_entry e;
	uint8_t gid[16];
	int idx;

	if (!addr_is_ours(&id->src))
		return -EADDRNOTAVAIL;
	/* RoCE carries no IPoIB port space (cma_acquire_dev). */
	if (id->ps == RDMA_PS_IPOIB)
		return -EINVAL;
	svd_cm_ip2gid(&id->src, gid);
	idx = gid_lookup(gid, &e);
	if (idx < 0)
		return -ENODEV;
	memcpy(id->sgid, gid, 16);
	id->sgid_index = (uint32_t)idx;
	id->ifindex = e.ndev_ifindex;
	id->netdev_mtu = netdev_mtu(e.ndev_ifindex);
	id->hop_limit = 64;
	id->bound_dev = 1;
	return 0;
}

static void release_dev(struct svd_cm_id *id)
{
	id->bound_dev = 0;
	memset(id->sgid, 0, 16);
}

/* ---- port spaces (the kernel's rdma_bind_list) ------------------------- */

struct svd_cm_bind *svd_cm_bind_find(uint32_t ps, uint16_t port)
{
	for (struct svd_cm_bind *b = binds; b; b = b->next)
		if (b->ps == ps && b->port == port)
			return b;
	return NULL;
}

static void bind_add(struct svd_cm_bind *b, struct svd_cm_id *id)
{
	svd_cm_set_port(&id->src, b->port);
	id->bind = b;
	id->bind_next = b->owners;
	b->owners = id;
}

static int bind_new(uint32_t ps, uint16_t port, struct svd_cm_id *id)
{
	struct svd_cm_bind *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->ps = ps;
	b->port = port;
	b->next = binds;
	binds = b;
	bind_add(b, id);
	return 0;
}

void svd_cm_release_port(struct svd_cm_id *id)
{
	struct svd_cm_bind *b = id->bind, **pp;
	struct svd_cm_id **ip;

	if (!b)
		return;
	for (ip = &b->owners; *ip; ip = &(*ip)->bind_next)
		if (*ip == id) {
			*ip = id->bind_next;
			break;
		}
	id->bind = NULL;
	if (b->owners)
		return;
	for (pp = &binds; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	free(b);
}

/* The kernel's cma_check_port. */
static int check_port(struct svd_cm_bind *b, struct svd_cm_id *id,
		      int reuseaddr)
{
	for (struct svd_cm_id *cur = b->owners; cur; cur = cur->bind_next) {
		if (cur == id)
			continue;
		if (cur->state != CMS_LISTEN && reuseaddr && cur->reuseaddr)
			continue;
		if (id->afonly && cur->afonly &&
		    id->src.sa.sa_family != cur->src.sa.sa_family)
			continue;
		if (svd_cm_any_addr(&id->src) || svd_cm_any_addr(&cur->src))
			return -EADDRNOTAVAIL;
		if (svd_cm_addr_eq(&id->src, &cur->src))
			return -EADDRINUSE;
	}
	return 0;
}

/* The kernel's cma_port_is_unique, for ephemeral ports. */
static int port_is_unique(struct svd_cm_bind *b, struct svd_cm_id *id)
{
	uint16_t dport = svd_cm_port(&id->dst);

	for (struct svd_cm_id *cur = b->owners; cur; cur = cur->bind_next) {
		uint16_t cur_dport = svd_cm_port(&cur->dst);

		if (cur == id)
			continue;
		/* Unique when the two differ in the destination port, the
		 * source address or the destination address, each compared
		 * only where both have one: a listener (no destination) never
		 * shares an ephemeral port with a connection. */
		if (dport && cur_dport && dport != cur_dport)
			continue;
		if (!svd_cm_any_addr(&id->src) && !svd_cm_any_addr(&cur->src) &&
		    !svd_cm_addr_eq(&id->src, &cur->src))
			continue;
		if (!svd_cm_any_addr(&id->dst) && !svd_cm_any_addr(&cur->dst) &&
		    !svd_cm_addr_eq(&id->dst, &cur->dst))
			continue;
		return -EADDRNOTAVAIL;
	}
	return 0;
}

static void local_port_range(int *lo, int *hi)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

	*lo = 32768;
	*hi = 60999;
	if (f) {
		if (fscanf(f, "%d %d", lo, hi) != 2 || *lo < 1 || *hi < *lo ||
		    *hi > 65535) {
			*lo = 32768;
			*hi = 60999;
		}
		fclose(f);
	}
}

static int alloc_any_port(struct svd_cm_id *id)
{
	static unsigned last_used;
	int lo, hi, remaining;
	unsigned rover, r;

	local_port_range(&lo, &hi);
	remaining = hi - lo + 1;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (unsigned)svd_now_ms();
	rover = r % (unsigned)remaining + (unsigned)lo;
	for (; remaining > 0; remaining--) {
		if (rover != last_used) {
			struct svd_cm_bind *b = svd_cm_bind_find(id->ps, (uint16_t)rover);
			int ret;

			if (!b) {
				ret = bind_new(id->ps, (uint16_t)rover, id);
			} else {
				ret = port_is_unique(b, id);
				if (!ret)
					bind_add(b, id);
			}
			if (!ret)
				last_used = rover;
			if (ret != -EADDRNOTAVAIL)
				return ret;
		}
		if (++rover > (unsigned)hi)
			rover = (unsigned)lo;
	}
	return -EADDRNOTAVAIL;
}

/* Whether pid may bind ports below 1024 (CAP_NET_BIND_SERVICE). */
static int may_bind_low(pid_t pid)
{
	char path[64], line[256];
	unsigned long long caps = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return (caps >> CAP_NET_BIND_SERVICE_BIT) & 1;
}

/* The kernel's cma_get_port. */
static int get_port(struct svd_cm_id *id, pid_t caller)
{
	struct svd_cm_bind *b;
	uint16_t port;
	int ret;

	switch (id->ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
	case RDMA_PS_IB:
		break;
	default:
		return -EPROTONOSUPPORT;
	}
	port = svd_cm_port(&id->src);
	if (!port)
		return alloc_any_port(id);
	if (port < PROT_SOCK && !may_bind_low(caller))
		return -EACCES;
	b = svd_cm_bind_find(id->ps, port);
	if (!b)
		return bind_new(id->ps, port, id);
	ret = check_port(b, id, id->reuseaddr);
	if (!ret)
		bind_add(b, id);
	return ret;
}

static int bindv6only(void)
{
	FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "re");
	int v = 0;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* The kernel's rdma_bind_addr. */
int svd_cm_bind_addr(struct svd_cm_id *id, const union sv_sockaddr *a,
		     socklen_t len, pid_t caller)
{
	int ret;

	if (a->sa.sa_family != AF_INET && a->sa.sa_family != AF_INET6)
		return -EAFNOSUPPORT;
	if (len < svd_cm_addr_len(a))
		return -EINVAL;
	if (id->state != CMS_IDLE)
		return -EINVAL;
	/* A link-local IPv6 address needs its interface. */
	if (a->sa.sa_family == AF_INET6 &&
	    IN6_IS_ADDR_LINKLOCAL(&a->in6.sin6_addr) && !a->in6.sin6_scope_id)
		return -EINVAL;
	id->state = CMS_ADDR_BOUND;
	memset(&id->src, 0, sizeof(id->src));
	memcpy(&id->src, a, svd_cm_addr_len(a));
	if (!svd_cm_any_addr(a)) {
		ret = svd_cm_acquire_dev(id);
		if (ret)
			goto err;
	}
	if (!id->afonly_set)
		id->afonly = a->sa.sa_family == AF_INET ? 1 : (uint8_t)bindv6only();
	ret = get_port(id, caller);
	if (ret)
		goto err_dev;
	memset(&id->dst, 0, sizeof(id->dst));
	id->dst.sa.sa_family = a->sa.sa_family;
	return 0;

err_dev:
	release_dev(id);
err:
	id->state = CMS_IDLE;
	memset(&id->src, 0, sizeof(id->src));
	return ret;
}

int svd_op_cm_bind(struct svd_req *r)
{
	const struct sv_cm_addr_req *req = r->body;
	struct svd_cm_id *id;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	if (!req->src_len || req->src_len > sizeof(req->src))
		return -EINVAL;
	return svd_cm_bind_addr(id, &req->src, req->src_len, r->conn->pid);
}

/* ---- resolution -------------------------------------------------------- */

static void post_simple(struct svd_cm_id *id, uint32_t event, int status)
{
	struct sv_cm_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = event;
	ev.status = status;
	ev.id = id->handle;
	svd_cm_post(id, NULL, &ev);
}

/* The end of an address resolution (the kernel's addr_handler). */
static void addr_done(struct svd_cm_id *id, int status)
{
	if (id->state != CMS_ADDR_QUERY)
		return;
	if (status) {
		id->state = CMS_ADDR_BOUND;
		post_simple(id, RDMA_CM_EVENT_ADDR_ERROR, status);
		return;
	}
	id->state = CMS_ADDR_RESOLVED;
	post_simple(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
}

#define NEIGH_POLL_MS 5 /* how often a pending neighbour is looked at */

/* Another host's address waits for its neighbour (cm_route.c), until
 * the id's deadline. */
static void addr_timeout(struct svd_timer *t)
{
	struct svd_cm_id *id = (struct svd_cm_id *)((char *)t -
		offsetof(struct svd_cm_id, addr_timer));
	int r;

	if (id->state != CMS_ADDR_QUERY)
		return;
	r = svd_cm_neigh_resolve(&id->dst);
	if (r == 0 && svd_now_ms() < id->addr_deadline_ms) {
		svd_timer_arm(&id->addr_timer, NEIGH_POLL_MS);
		return;
	}
	addr_done(id, r > 0 ? 0 : r < 0 ? r : -ETIMEDOUT);
}

int svd_op_cm_resolve_addr(struct svd_req *r)
{
	const struct sv_cm_addr_req *req = r->body;
	const union sv_sockaddr *dst = &req->dst;
	struct svd_cm_id *id;
	uint16_t port;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	if (!req->dst_len || req->dst_len > sizeof(req->dst) ||
	    (dst->sa.sa_family != AF_INET && dst->sa.sa_family != AF_INET6) ||
	    req->dst_len < svd_cm_addr_len(dst) || req->src_len > sizeof(req->src))
		return -EINVAL;
	memset(&id->dst, 0, sizeof(id->dst));
	memcpy(&id->dst, dst, svd_cm_addr_len(dst));
	if (id->state == CMS_IDLE) {
		/* cma_bind_addr: the source given, or the wildcard of the
		 * destination's family (same scope for link-local). */
		union sv_sockaddr src;

		memset(&src, 0, sizeof(src));
		if (req->src_len && req->src.sa.sa_family) {
			memcpy(&src, &req->src, req->src_len);
		} else {
			src.sa.sa_family = dst->sa.sa_family;
			if (dst->sa.sa_family == AF_INET6)
				src.in6.sin6_scope_id = dst->in6.sin6_scope_id;
		}
		err = svd_cm_bind_addr(id, &src, svd_cm_addr_len(&src),
				       r->conn->pid);
		if (err)
			goto err_dst;
		memcpy(&id->dst, dst, svd_cm_addr_len(dst));
	}
	if (id->src.sa.sa_family != dst->sa.sa_family) {
		err = -EINVAL;
		goto err_dst;
	}
	if (id->state != CMS_ADDR_BOUND) {
		err = -EINVAL;
		goto err_dst;
	}
	id->state = CMS_ADDR_QUERY;
	port = svd_cm_port(&id->src);
	if (svd_cm_any_addr(dst)) {
		/* cma_resolve_loopback: to ourselves through loopback. */
		if (!id->bound_dev) {
			union sv_sockaddr lo = id->src;

			if (lo.sa.sa_family == AF_INET)
				lo.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			else
				lo.in6.sin6_addr = in6addr_loopback;
			id->src = lo;
			err = svd_cm_acquire_dev(id);
		}
		memcpy(id->dgid, id->sgid, 16);
		addr_done(id, err);
		return 0;
	}
	svd_cm_ip2gid(dst, id->dgid);
	if (svd_cm_gid_index(id->dgid) >= 0) {
		/* One of our own addresses: resolved here and now. */
		if (svd_cm_any_addr(&id->src)) {
			union sv_sockaddr s;

			err = svd_cm_route_source(dst, &s);
			if (!err) {
				memcpy(&id->src, &s, svd_cm_addr_len(&s));
				svd_cm_set_port(&id->src, port);
			}
		}
		if (!err && !id->bound_dev)
			err = svd_cm_acquire_dev(id);
		addr_done(id, err);
		return 0;
	}
	if (sv_gid_is_mcast(id->dgid)) {
		/* A multicast group (before rdma_join_multicast): the kernel
		 * routes it from the bound source's device, and a multicast
		 * neighbour is mapped, never waited for. */
		union sv_sockaddr s;

		if (svd_cm_any_addr(&id->src)) {
			err = svd_cm_route_source(dst, &s);
			if (err) {
				id->state = CMS_ADDR_BOUND;
				goto err_dst;
			}
			memcpy(&id->src, &s, svd_cm_addr_len(&s));
			svd_cm_set_port(&id->src, port);
		}
		if (!id->bound_dev)
			err = svd_cm_acquire_dev(id);
		addr_done(id, err);
		return 0;
	}
	/*
	 * Another host: the route's source address (the kernel's
	 * rdma_resolve_ip: no route fails the call itself, the id stays
	 * bound), that address's GID, the destination's address as its GID
	 * (RoCE v2), then the neighbour of the route, waited for up to
	 * timeout_ms.
	 */
	{
		union sv_sockaddr s, old = id->src;

		err = svd_cm_route_source(dst, &s);
		if (!err && svd_cm_any_addr(&id->src)) {
			memcpy(&id->src, &s, svd_cm_addr_len(&s));
			svd_cm_set_port(&id->src, port);
		}
		if (!err && !id->bound_dev)
			err = svd_cm_acquire_dev(id);
		if (err) {
			id->src = old;
			id->state = CMS_ADDR_BOUND;
			return err;
		}
		id->addr_timer.fn = addr_timeout;
		id->addr_deadline_ms = svd_now_ms() +
			(req->timeout_ms > 0 ? (uint64_t)req->timeout_ms : 0);
		svd_timer_arm(&id->addr_timer, 0);
	}
	return 0;

err_dst:
	memset(&id->dst, 0, sizeof(id->dst));
	return err;
}

/* The flow label of a RoCE v2 route (cma_get_roce_udp_flow_label): the
 * IPv6 source's own, else a hash of the ports; the UDP source port of
 * the connection's packets is made from it. */
static uint32_t roce_flow_label(const struct svd_cm_id *id)
{
	uint32_t fl = 0;

	if (id->src.sa.sa_family == AF_INET6)
		fl = ntohl(id->src.in6.sin6_flowinfo) & 0xfffff;
	if (!fl)
		fl = ((uint32_t)svd_cm_port(&id->src) * 31 +
		      svd_cm_port(&id->dst)) & 0xfffff;
	return fl;
}

void svd_cm_make_path(struct svd_cm_id *id)
{
	struct ibv_sa_path_rec *p = &id->path;

	memset(p, 0, sizeof(*p));
	memcpy(p->dgid.raw, id->dgid, 16);
	memcpy(p->sgid.raw, id->sgid, 16);
	p->hop_limit = id->hop_limit ? id->hop_limit : 64;
	p->traffic_class = id->tos;
	p->reversible = 1;
	p->numb_path = 1;
	p->pkey = htobe16(0xffff);
	p->sl = 0;
	p->mtu_selector = 2; /* exactly */
	p->mtu = iboe_mtu(id->netdev_mtu ? id->netdev_mtu : 1500);
	/* Our one port spans every interface and modify_qp refuses a path
	 * MTU above its active MTU: no path may promise more (lo's 64 KiB
	 * included). */
	if (p->mtu > svd_port_active_mtu())
		p->mtu = (uint8_t)svd_port_active_mtu();
	p->rate_selector = 2;
	p->rate = 0; /* the port's current rate */
	p->packet_life_time_selector = 2;
	/* An ACK timeout set with rdma_set_option makes the packet life time
	 * (IBTA 12.7.34, as cma_resolve_iboe_route). */
	p->packet_life_time = id->timeout_set && id->timeout ?
				      (uint8_t)(id->timeout - 1) :
				      CMA_IBOE_PACKET_LIFETIME;
	p->flow_label = htobe32(roce_flow_label(id));
}

int svd_op_cm_resolve_route(struct svd_req *r)
{
	struct svd_cm_id *id;
	struct sv_cm_event ev;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	if (id->state != CMS_ADDR_RESOLVED)
		return -EINVAL;
	/* cma_resolve_iboe_route: the path is the addresses themselves. */
	svd_cm_make_path(id);
	if (!id->path.mtu)
		return -EINVAL;
	id->have_route = 1;
	id->state = CMS_ROUTE_RESOLVED;
	memset(&ev, 0, sizeof(ev));
	ev.event = RDMA_CM_EVENT_ROUTE_RESOLVED;
	ev.id = id->handle;
	svd_cm_post(id, NULL, &ev);
	return 0;
}

/* RDMA_OPTION_IB_PATH (the kernel's ucma_set_ib_path + rdma_set_ib_path):
 * a bidirectional primary path record makes the route. */
int svd_cm_set_ib_path(struct svd_cm_id *id, const void *optval,
		       uint32_t optlen)
{
	const struct ibv_path_data *pd = optval;
	const uint32_t want = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
			      IBV_PATH_FLAG_BIDIRECTIONAL;
	struct sv_cm_event ev;
	uint32_t n, i;

	if (!optlen || optlen % sizeof(*pd))
		return -EINVAL;
	n = optlen / sizeof(*pd);
	for (i = 0; i < n; i++)
		if (pd[i].flags == want)
			break;
	if (i == n)
		return -EINVAL;
	if (id->state != CMS_ADDR_RESOLVED)
		return -EINVAL;
	svd_cm_make_path(id);
	{
		const struct ibv_path_record *p = &pd[i].path;
		uint32_t fl = be32toh(p->flowlabel_hoplimit);

		memcpy(id->path.dgid.raw, p->dgid.raw, 16);
		memcpy(id->path.sgid.raw, p->sgid.raw, 16);
		id->path.flow_label = htobe32(fl >> 8);
		id->path.hop_limit = (uint8_t)fl;
		id->path.traffic_class = p->tclass;
		id->path.sl = be16toh(p->qosclass_sl) & 0xf;
		if (p->mtu & 0x3f)
			id->path.mtu = p->mtu & 0x3f;
		id->path.rate = p->rate & 0x3f;
		if (p->packetlifetime & 0x3f)
			id->path.packet_life_time = p->packetlifetime & 0x3f;
	}
	id->have_route = 1;
	id->state = CMS_ROUTE_RESOLVED;
	memset(&ev, 0, sizeof(ev));
	ev.event = RDMA_CM_EVENT_ROUTE_RESOLVED;
	ev.id = id->handle;
	svd_cm_post(id, NULL, &ev);
	return 0;
}

/* ---- listen ------------------------------------------------------------ */

/* The CM service ID of the port a listener is bound to (the kernel's
 * rdma_get_service_id: port space << 16 | port). */
static uint64_t listen_sid(const struct svd_cm_id *id)
{
	return (uint64_t)id->ps << 16 | svd_cm_port(&id->src);
}

void svd_cm_unlisten(struct svd_cm_id *id)
{
	for (struct svd_cm_id *o = id->bind ? id->bind->owners : NULL; o;
	     o = o->bind_next)
		if (o != id && o->state == CMS_LISTEN)
			return; /* the port still listens */
	svd_gw_listen(listen_sid(id), 0);
}

int svd_op_cm_listen(struct svd_req *r)
{
	const struct sv_cm_int_req *req = r->body;
	struct svd_cm_id *id;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	if (id->state == CMS_IDLE) {
		union sv_sockaddr any;

		memset(&any, 0, sizeof(any));
		any.sa.sa_family = AF_INET;
		err = svd_cm_bind_addr(id, &any, sizeof(any.in), r->conn->pid);
		if (err)
			return err;
	}
	if (id->state != CMS_ADDR_BOUND)
		return -EINVAL;
	id->state = CMS_LISTEN;
	if (id->reuseaddr && id->bind && id->bind->owners->bind_next) {
		err = check_port(id->bind, id, 0);
		if (err) {
			id->state = CMS_ADDR_BOUND;
			return err;
		}
	}
	/* Other users' daemons share the namespace's port service: the
	 * port's REQs must come to us, as a TCP port is one process's. */
	err = svd_gw_listen(listen_sid(id), 1);
	if (err) {
		id->state = CMS_ADDR_BOUND;
		return err;
	}
	id->backlog = req->val > 0 && req->val < MAX_BACKLOG ? req->val :
							       MAX_BACKLOG;
	sv_dbg("cm: id %#x listens on port %u (space %#x)", id->handle,
	       svd_cm_port(&id->src), id->ps);
	return 0;
}

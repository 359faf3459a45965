/* SPDX-License-Identifier: MIT */
/*
 * The port follows the namespace's network (daemon/port.c), as a RoCE
 * port follows its netdev in the kernel: what a user sees.
 *
 *  - an address added is a GID in the first empty slot, with
 *    IBV_EVENT_GID_CHANGE (port 1) on every open context; an address
 *    removed empties its slot and no other GID moves; an empty slot reads
 *    as the zero GID from ibv_query_gid, ENODATA from ibv_query_gid_ex,
 *    and ibv_query_gid_table skips it;
 *  - a tentative IPv6 address is a GID at once; an interface going down
 *    loses its IPv6 GIDs (addrconf deletes the addresses), keeps its IPv4
 *    ones; an interface deleted loses them all;
 *  - active_mtu follows `ip link set dev X mtu N` (rxe's formula, the
 *    smallest over the interfaces up with an address), and so does the key
 *    table's port block the engines route by;
 *  - ibv_modify_qp refuses a path_mtu above active_mtu with EINVAL and
 *    takes it at active_mtu;
 *  - lost netlink events (the daemon stopped while thousands of changes
 *    overflowed its socket) end in a resync that keeps every slot that
 *    stays; without netlink the table is read at each query.
 *
 * Each case makes a network namespace of its own (unshare: it dies with
 * its last process) holding a veth pair and addresses from the
 * documentation ranges only; the case's daemon starts inside it and is
 * shut down at the end (a failed case's daemon leaves when idle).  Root
 * only: skipped without root, `ip` or veth.  No timing: a change is known
 * applied when its event arrives, and a change without an event (an MTU)
 * when a later address's event arrives (netlink keeps order).
 */
#include "sv_test.h"
#include "sv_client.h"
#include "sv_keytab.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>


static int have_ipv6(void)
{
	return access("/proc/net/if_inet6", F_OK) == 0;
}

/* A namespace of our own: lo up, veth svg0 <-> svg1 up, no automatic
 * IPv6 link-local addresses (each GID is one the case adds). */
static void netns(void)
{
	if (geteuid() != 0)
		sv_test_skip("needs root for a network namespace of its own");
	if (system("command -v ip >/dev/null 2>&1") != 0)
		sv_test_skip("no ip command (iproute2)");
	if (unshare(CLONE_NEWNET) < 0)
		sv_test_skip("unshare(CLONE_NEWNET): %s", strerror(errno));
	/* The namespace's default, so that it holds for an interface whose
	 * IPv6 restarts too (an MTU back above 1280). */
	if (have_ipv6())
		sv_test_sh("echo 1 >/proc/sys/net/ipv6/conf/default/addr_gen_mode");
	if (system("ip link add svg0 type veth peer name svg1 2>/dev/null"))
		sv_test_skip("no veth interfaces here");
	sv_test_sh("ip link set lo up && ip link set svg0 up && ip link set svg1 up");
}

/* The namespace's daemon goes, and the namespace with it. */
static void done(void)
{
	CHECK_EQ(sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0), 0);
}

static void gid_of(const char *ip, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (inet_pton(AF_INET, ip, &g->raw[12]) == 1) {
		g->raw[10] = g->raw[11] = 0xff;
		return;
	}
	CHECK_EQ(inet_pton(AF_INET6, ip, g->raw), 1);
}

/* The index of ip's GID, from ibv_query_gid_table, or -1. */
static int idx(struct ibv_context *ctx, const char *ip)
{
	struct ibv_gid_entry t[SV_GID_TBL_LEN];
	union ibv_gid g;
	ssize_t n = ibv_query_gid_table(ctx, t, SV_GID_TBL_LEN, 0);

	CHECK(n > 0);
	gid_of(ip, &g);
	for (ssize_t i = 0; i < n; i++)
		if (!memcmp(&t[i].gid, &g, sizeof(g)))
			return (int)t[i].gid_index;
	return -1;
}

/* The next async event, waited for: it must be a GID change on port 1. */
static void gid_event(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	CHECK_EQ(ibv_get_async_event(ctx, &ev), 0);
	CHECK_EQ(ev.event_type, IBV_EVENT_GID_CHANGE);
	CHECK_EQ(ev.element.port_num, 1);
	ibv_ack_async_event(&ev);
}

/* Everything changed before this is applied: an address added now (then
 * removed) shows only after all that came before it. */
static void settle(struct ibv_context *ctx)
{
	sv_test_sh("ip addr add 127.1.0.1/32 dev lo");
	gid_event(ctx);
	CHECK(idx(ctx, "127.1.0.1") >= 0);
	sv_test_sh("ip addr del 127.1.0.1/32 dev lo");
	gid_event(ctx);
	CHECK_EQ(idx(ctx, "127.1.0.1"), -1);
}

static enum ibv_mtu active_mtu(struct ibv_context *ctx)
{
	struct ibv_port_attr pa;

	CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ(pa.max_mtu, IBV_MTU_4096);
	return pa.active_mtu;
}

/* INIT -> RTR of a connected QP with path_mtu mtu: ibv_modify_qp's
 * answer. */
static int to_rtr(struct ibv_qp *qp, enum ibv_mtu mtu, uint8_t sgid)
{
	struct ibv_qp_attr a;
	int rc = qp->qp_type == IBV_QPT_RC;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.sgid_index = sgid;
	CHECK_EQ(ibv_query_gid(qp->context, 1, sgid, &a.ah_attr.grh.dgid), 0);
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     (rc ? IBV_QP_MAX_DEST_RD_ATOMIC |
						   IBV_QP_MIN_RNR_TIMER :
					   0));
}

static struct ibv_qp *qp_init(struct ibv_pd *pd, struct ibv_cq *cq,
			      enum ibv_qp_type type)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq,
				       .qp_type = type,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	CHECK(qp);
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
	return qp;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	CHECK_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
	return a.qp_state;
}

SV_TEST(gid_slots_stable_and_events)
{
	struct ibv_context *ctx, *ctx2;
	struct ibv_gid_entry e, t[SV_GID_TBL_LEN];
	union ibv_gid g, zero;
	struct ibv_port_attr pa;
	struct ibv_ah_attr aa;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	int v6 = have_ipv6();
	ssize_t n;

	netns();
	sv_test_sh("ip addr add 198.51.100.1/24 dev svg0");
	sv_test_sh("ip addr add 203.0.113.1/24 dev svg0");
	if (v6)
		sv_test_sh("ip -6 addr add 2001:db8::1/64 dev svg0 nodad");
	ctx = sv_test_open_dev();
	ctx2 = sv_test_open_dev();

	/* The table built at start: IPv4 of real interfaces first, then
	 * 127.0.0.1, then IPv6 global, loopback. */
	CHECK_EQ(idx(ctx, "198.51.100.1"), 0);
	CHECK_EQ(idx(ctx, "203.0.113.1"), 1);
	CHECK_EQ(idx(ctx, "127.0.0.1"), 2);
	if (v6) {
		CHECK_EQ(idx(ctx, "2001:db8::1"), 3);
		CHECK_EQ(idx(ctx, "::1"), 4);
	}
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 1, &e, 0), 0);
	CHECK_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
	CHECK_EQ(e.port_num, 1);
	CHECK_EQ(e.ndev_ifindex, if_nametoindex("svg0"));

	/* GID 0 goes: its slot empties, nothing moves, every context
	 * hears it. */
	sv_test_sh("ip addr del 198.51.100.1/24 dev svg0");
	gid_event(ctx);
	gid_event(ctx2);
	memset(&zero, 0, sizeof(zero));
	memset(&g, 0xa5, sizeof(g));
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &g), 0);
	CHECK(!memcmp(&g, &zero, sizeof(g)));
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 0, &e, 0), ENODATA);
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, SV_GID_TBL_LEN, &e, 0), EINVAL);
	CHECK_EQ(idx(ctx, "198.51.100.1"), -1);
	CHECK_EQ(idx(ctx, "203.0.113.1"), 1);
	CHECK_EQ(idx(ctx, "127.0.0.1"), 2);
	if (v6) {
		CHECK_EQ(idx(ctx, "2001:db8::1"), 3);
		CHECK_EQ(idx(ctx, "::1"), 4);
	}
	n = ibv_query_gid_table(ctx, t, SV_GID_TBL_LEN, 0);
	CHECK_EQ(n, v6 ? 4 : 2);
	for (ssize_t i = 0; i < n; i++) {
		CHECK(t[i].gid_index != 0);
		CHECK(memcmp(&t[i].gid, &zero, sizeof(zero)));
		CHECK(!i || t[i].gid_index > t[i - 1].gid_index);
	}
	CHECK_EQ(ibv_query_gid_table(ctx, t, (size_t)n - 1, 0), -EINVAL);
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ(pa.gid_tbl_len, SV_GID_TBL_LEN);
	/* An address vector from the empty slot: ENODATA, as the kernel's
	 * rdma_fill_sgid_attr; from a live one it works. */
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(pd && cq);
	memset(&aa, 0, sizeof(aa));
	aa.port_num = 1;
	aa.is_global = 1;
	aa.grh.hop_limit = 1;
	gid_of("203.0.113.1", &aa.grh.dgid);
	CHECK_NULL_ERRNO(ibv_create_ah(pd, &aa), ENODATA);
	aa.grh.sgid_index = 1;
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	qp = qp_init(pd, cq, IBV_QPT_RC);
	CHECK_EQ(to_rtr(qp, IBV_MTU_256, 0), ENODATA);
	CHECK_EQ(to_rtr(qp, IBV_MTU_256, 1), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);

	/* A new address takes the first empty slot: 0 again. */
	sv_test_sh("ip addr add 198.51.100.7/24 dev svg0");
	gid_event(ctx);
	gid_event(ctx2);
	CHECK_EQ(idx(ctx, "198.51.100.7"), 0);
	CHECK_EQ(idx(ctx2, "198.51.100.7"), 0);
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &g), 0);
	gid_of("198.51.100.7", &zero);
	CHECK(!memcmp(&g, &zero, sizeof(g)));
	/* The next one goes after the last. */
	sv_test_sh("ip addr add 203.0.113.9/32 dev svg1");
	gid_event(ctx);
	gid_event(ctx2);
	CHECK_EQ(idx(ctx, "203.0.113.9"), v6 ? 5 : 3);

	/* A context closed meanwhile is simply not told. */
	CHECK_EQ(ibv_close_device(ctx2), 0);
	sv_test_sh("ip addr del 203.0.113.9/32 dev svg1");
	gid_event(ctx);
	CHECK_EQ(idx(ctx, "203.0.113.9"), -1);
	CHECK_EQ(ibv_close_device(ctx), 0);
	done();
}

/* As the kernel (the inet6addr notifier runs in ipv6_add_addr, before
 * DAD): a tentative address is a GID at once. */
SV_TEST(tentative_ipv6_is_a_gid)
{
	struct ibv_context *ctx;

	netns();
	if (!have_ipv6())
		sv_test_skip("no IPv6 in this kernel");
	/* Without a carrier on svg0, DAD cannot finish. */
	sv_test_sh("ip link set svg1 down");
	ctx = sv_test_open_dev();
	sv_test_sh("ip -6 addr add 2001:db8::5/64 dev svg0");
	gid_event(ctx);
	CHECK(idx(ctx, "2001:db8::5") >= 0);
	sv_test_sh("ip -6 addr show dev svg0 tentative | grep -q 2001:db8::5");
	CHECK_EQ(ibv_close_device(ctx), 0);
	done();
}

/* An interface going down keeps its IPv4 GIDs (the kernel removes only
 * what addrconf deletes: IPv6); deleted, it loses all; others stay. */
SV_TEST(interface_down_and_deleted)
{
	struct ibv_context *ctx;
	int v6 = have_ipv6(), a, b, lo4, lo6 = -1;

	netns();
	sv_test_sh("ip addr add 198.51.100.1/24 dev svg0");
	sv_test_sh("ip addr add 203.0.113.1/24 dev svg1");
	if (v6)
		sv_test_sh("ip -6 addr add 2001:db8::1/64 dev svg0 nodad");
	ctx = sv_test_open_dev();
	a = idx(ctx, "198.51.100.1");
	b = idx(ctx, "203.0.113.1");
	lo4 = idx(ctx, "127.0.0.1");
	if (v6)
		lo6 = idx(ctx, "::1");
	CHECK(a >= 0 && b >= 0 && lo4 >= 0);

	sv_test_sh("ip link set svg0 down");
	if (v6) {
		gid_event(ctx);
		CHECK_EQ(idx(ctx, "2001:db8::1"), -1);
	}
	settle(ctx);
	CHECK_EQ(idx(ctx, "198.51.100.1"), a);
	CHECK_EQ(idx(ctx, "203.0.113.1"), b);

	/* Deleting svg0 deletes its peer: two addresses, two events. */
	sv_test_sh("ip link del svg0");
	gid_event(ctx);
	gid_event(ctx);
	CHECK_EQ(idx(ctx, "198.51.100.1"), -1);
	CHECK_EQ(idx(ctx, "203.0.113.1"), -1);
	CHECK_EQ(idx(ctx, "127.0.0.1"), lo4);
	if (v6)
		CHECK_EQ(idx(ctx, "::1"), lo6);
	settle(ctx);
	CHECK_EQ(ibv_close_device(ctx), 0);
	done();
}

/* The key table's port block, as an engine maps it (an engine of our
 * own: this case makes no QP, so the library has none). */
static const struct sv_keytab_port *map_port(void)
{
	struct sv_engine_attach_rep rep;
	int db = eventfd(0, EFD_CLOEXEC), rfds[2];
	struct sv_call c = { .op = SV_OP_ENGINE_ATTACH,
			     .attach_fd = -1,
			     .fds = &db,
			     .nfds = 1,
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = rfds,
			     .max_rfds = 2 };
	const struct sv_keytab_hdr *h;
	void *p;

	CHECK(db >= 0);
	CHECK_EQ(sv_call(&c), 0);
	CHECK_EQ(c.nrfds, 2);
	p = mmap(NULL, rep.kt_size, PROT_READ, MAP_SHARED, rfds[1], 0);
	CHECK(p != MAP_FAILED);
	h = p;
	CHECK_EQ(h->magic, SV_KEYTAB_MAGIC);
	return (const void *)((const char *)p + h->port_off);
}

/* What the engines read: active MTU in bytes, GIDs local or not, each
 * slot's interface MTU. */
static void check_block(const struct sv_keytab_port *shared,
			uint32_t mtu_bytes, const char *local_ip,
			uint32_t local_mtu)
{
	struct sv_keytab_port p;
	union ibv_gid g;

	CHECK_EQ(sv_port_read(shared, &p), 0);
	CHECK_EQ(sv_port_mtu_bytes(&p), mtu_bytes);
	gid_of("203.0.113.200", &g);
	CHECK_EQ(sv_port_gid_local(&p, g.raw), 0);
	gid_of("127.0.0.1", &g);
	CHECK_EQ(sv_port_gid_local(&p, g.raw), 1);
	if (!local_ip)
		return;
	gid_of(local_ip, &g);
	CHECK_EQ(sv_port_gid_local(&p, g.raw), 1);
	for (uint32_t i = 0; i < p.ngids && i < SV_KEYTAB_GIDS; i++)
		if (!memcmp(p.gid[i].raw, g.raw, 16))
			CHECK_EQ(p.gid[i].mtu, local_mtu);
}

SV_TEST(mtu_follows_links)
{
	static const struct {
		unsigned netdev;
		enum ibv_mtu ib;
	} steps[] = { { 9000, IBV_MTU_4096 }, { 2200, IBV_MTU_2048 },
		      { 1100, IBV_MTU_512 },  { 300, IBV_MTU_256 },
		      { 4176, IBV_MTU_4096 }, { 4175, IBV_MTU_2048 } };
	const struct sv_keytab_port *port;
	struct sv_keytab_port p;
	struct ibv_context *ctx;
	union ibv_gid g;
	uint32_t gen;

	netns();
	sv_test_sh("ip addr add 198.51.100.1/24 dev svg0");
	ctx = sv_test_open_dev();
	port = map_port();
	CHECK_EQ(active_mtu(ctx), IBV_MTU_1024); /* 1500 - 80 */
	check_block(port, 1024, "198.51.100.1", 1500);
	CHECK_EQ(sv_port_read(port, &p), 0);
	gen = p.gen;

	/* svg0's MTU -> the port's: MTU less 80, rounded down to an IB
	 * MTU, 256 at least. */
	for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		sv_test_sh("ip link set svg0 mtu %u", steps[i].netdev);
		settle(ctx);
		CHECK_EQ(active_mtu(ctx), steps[i].ib);
		check_block(port, 128u << steps[i].ib, "198.51.100.1",
			    steps[i].netdev);
	}
	CHECK_EQ(sv_port_read(port, &p), 0);
	CHECK(p.gen != gen);

	/* The smallest among the interfaces up with an address. */
	sv_test_sh("ip link set svg0 mtu 9000 && ip link set svg1 mtu 1500");
	settle(ctx);
	CHECK_EQ(active_mtu(ctx), IBV_MTU_4096); /* svg1 has no address */
	sv_test_sh("ip addr add 203.0.113.1/24 dev svg1");
	gid_event(ctx);
	CHECK_EQ(active_mtu(ctx), IBV_MTU_1024);
	check_block(port, 1024, "203.0.113.1", 1500);
	sv_test_sh("ip link set svg1 down");
	settle(ctx);
	CHECK_EQ(active_mtu(ctx), IBV_MTU_4096); /* svg1 is down */
	/* Only loopback left up with an address: 4096. */
	sv_test_sh("ip addr del 198.51.100.1/24 dev svg0");
	gid_event(ctx);
	CHECK_EQ(active_mtu(ctx), IBV_MTU_4096);
	check_block(port, 4096, NULL, 0);
	gid_of("198.51.100.1", &g);
	CHECK_EQ(sv_port_read(port, &p), 0);
	CHECK_EQ(sv_port_gid_local(&p, g.raw), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	done();
}

SV_TEST(path_mtu_above_active_refused)
{
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC };
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int s;

	netns();
	sv_test_sh("ip addr add 198.51.100.1/24 dev svg0"); /* MTU 1500: 1024 */
	ctx = sv_test_open_dev();
	s = idx(ctx, "198.51.100.1");
	CHECK(s >= 0);
	CHECK_EQ(active_mtu(ctx), IBV_MTU_1024);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(pd && cq);
	for (unsigned i = 0; i < 2; i++) {
		qp = qp_init(pd, cq, types[i]);
		CHECK_EQ(to_rtr(qp, IBV_MTU_2048, (uint8_t)s), EINVAL);
		CHECK_EQ(to_rtr(qp, IBV_MTU_4096, (uint8_t)s), EINVAL);
		CHECK_EQ(qp_state(qp), IBV_QPS_INIT); /* nothing changed */
		CHECK_EQ(to_rtr(qp, IBV_MTU_1024, (uint8_t)s), 0);
		CHECK_EQ(qp_state(qp), IBV_QPS_RTR);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	}
	qp = qp_init(pd, cq, IBV_QPT_RC);
	CHECK_EQ(to_rtr(qp, IBV_MTU_512, (uint8_t)s), 0); /* below: fine */
	CHECK_EQ(ibv_destroy_qp(qp), 0);

	/* The interface grows: so does what a QP may take. */
	sv_test_sh("ip link set svg0 mtu 9000 && ip link set svg1 mtu 9000");
	settle(ctx);
	CHECK_EQ(active_mtu(ctx), IBV_MTU_4096);
	qp = qp_init(pd, cq, IBV_QPT_RC);
	CHECK_EQ(to_rtr(qp, IBV_MTU_4096, (uint8_t)s), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	done();
}

/* Without netlink the table is read at each query: same slots, same
 * events (sent when a query finds the change). */
SV_TEST(polling_without_netlink)
{
	struct ibv_context *ctx;
	struct ibv_gid_entry e;
	int v6 = have_ipv6(), b;

	setenv("SOFTVERBS_FAULT", "no_netlink", 1);
	netns();
	sv_test_sh("ip addr add 198.51.100.1/24 dev svg0");
	ctx = sv_test_open_dev();
	CHECK_EQ(idx(ctx, "198.51.100.1"), 0);
	CHECK_EQ(idx(ctx, "127.0.0.1"), 1);
	sv_test_sh("ip addr add 203.0.113.1/24 dev svg0");
	b = idx(ctx, "203.0.113.1");
	CHECK_EQ(b, v6 ? 3 : 2); /* after ::1 */
	gid_event(ctx);
	sv_test_sh("ip addr del 198.51.100.1/24 dev svg0");
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 0, &e, 0), ENODATA);
	CHECK_EQ(idx(ctx, "203.0.113.1"), b);
	CHECK_EQ(idx(ctx, "127.0.0.1"), 1);
	gid_event(ctx);
	CHECK_EQ(active_mtu(ctx), IBV_MTU_1024);
	sv_test_sh("ip link set svg0 mtu 9000");
	CHECK_EQ(active_mtu(ctx), IBV_MTU_4096);
	CHECK_EQ(ibv_close_device(ctx), 0);
	done();
}

/* Reads async events without waiting until none is left. */
static void drain_events(struct ibv_context *ctx)
{
	struct ibv_async_event ev;
	int fl = fcntl(ctx->async_fd, F_GETFL);

	CHECK(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	while (ibv_get_async_event(ctx, &ev) == 0) {
		CHECK_EQ(ev.event_type, IBV_EVENT_GID_CHANGE);
		ibv_ack_async_event(&ev);
	}
	CHECK_EQ(errno, EAGAIN);
	CHECK(fcntl(ctx->async_fd, F_SETFL, fl) == 0);
}

/* The daemon stopped while 8000 changes overflow its netlink socket:
 * back, it reads the whole table again and every slot that stays keeps
 * its index.  A context that never reads its events meanwhile (its
 * socket fills up) blocks nothing. */
SV_TEST_T(overflow_resyncs_keeping_slots, 120)
{
	struct ibv_context *ctx, *deaf;
	struct sv_status_rep st;
	char path[64];
	int v6 = have_ipv6(), b, lo4, lo6 = -1;
	pid_t pid;
	FILE *f;

	netns();
	sv_test_sh("ip addr add 198.51.100.1/24 dev svg0");
	sv_test_sh("ip addr add 203.0.113.1/24 dev svg1");
	ctx = sv_test_open_dev();
	deaf = sv_test_open_dev();
	CHECK(idx(ctx, "198.51.100.1") >= 0);
	b = idx(ctx, "203.0.113.1");
	lo4 = idx(ctx, "127.0.0.1");
	if (v6)
		lo6 = idx(ctx, "::1");
	pid = sv_test_daemon_pid();
	CHECK(pid > 0);

	snprintf(path, sizeof(path), "/tmp/svgid-batch.%d", (int)getpid());
	f = fopen(path, "w");
	CHECK(f);
	for (int i = 0; i < 4000; i++)
		fprintf(f, "address add 127.2.%d.%d/32 dev lo\n"
			   "address del 127.2.%d.%d/32 dev lo\n",
			i / 250, 1 + i % 250, i / 250, 1 + i % 250);
	fprintf(f, "address del 198.51.100.1/24 dev svg0\n"
		   "address add 198.51.100.9/24 dev svg0\n");
	CHECK_EQ(fclose(f), 0);
	CHECK_EQ(kill(pid, SIGSTOP), 0);
	sv_test_sh("ip -batch %s", path);
	unlink(path);
	CHECK_EQ(kill(pid, SIGCONT), 0);

	/* Until the end state shows; the daemon sends every event of a
	 * batch before it answers the next query, so then none is left
	 * to come. */
	while (idx(ctx, "198.51.100.9") < 0 || idx(ctx, "198.51.100.1") >= 0)
		gid_event(ctx);
	drain_events(ctx);
	CHECK_EQ(idx(ctx, "203.0.113.1"), b);
	CHECK_EQ(idx(ctx, "127.0.0.1"), lo4);
	if (v6)
		CHECK_EQ(idx(ctx, "::1"), lo6);
	CHECK_EQ(idx(ctx, "127.2.0.1"), -1);
	CHECK_EQ(idx(ctx, "127.2.15.250"), -1);
	settle(ctx);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.pid, pid);
	CHECK_EQ(st.contexts, 2);
	CHECK_EQ(ibv_close_device(deaf), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	done();
}

SV_TEST_MAIN()

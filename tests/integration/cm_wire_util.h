/* SPDX-License-Identifier: MIT */
/*
 * The connection manager against the wire (test_cm_hostile.c,
 * test_cm_fuzz.c; docs/wire.md "The connection manager").
 *
 * Three hosts, each a network namespace joined to ours by a veth, with
 * addresses from the documentation ranges only:
 *
 *   L  this process: its daemon, its rdma_cm listeners.
 *      198.51.100.1/25 and 2001:db8::1/64 towards X, 198.51.100.129/25
 *      towards Y.
 *   X  a child that only holds the namespace: the addresses of other
 *      hosts -- B .2, C .3, D1..D4 .4-.7, C6 2001:db8::3 -- whose CM MADs
 *      this process crafts and reads through UDP sockets it makes in X
 *      (xsock_open: setns there and back).  A MAD "from C" is a RoCE v2
 *      datagram (BTH, DETH, the 256-byte MAD, the ICRC of src/common/
 *      sv_roce.c) from C's address to L's port 4791; what L's daemon
 *      answers to B or C arrives at their port 4791.  No daemon there.
 *   Y  a forked child with a daemon of its own: an honest rdma_cm client
 *      (y_client), told by a pipe when to connect.
 *
 * The MADs are the daemon's own struct svd_cm_msg, written and read by
 * src/daemon/cm_mad.c (linked in), so every field is where IBTA 12.6 puts
 * it.  Root only: cmnet_up skips otherwise.
 */
#ifndef CM_WIRE_UTIL_H
#define CM_WIRE_UTIL_H

#include "cm_util.h"
#include "sv_client.h"
#include "sv_roce.h"
#include "svd_cm.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#define L_IP "198.51.100.1"
#define L_IPY "198.51.100.129"
#define L_IP6 "2001:db8::1"
#define B_IP "198.51.100.2"
#define C_IP "198.51.100.3"
#define D_IP(i) ("198.51.100." #i) /* D1..D4: 4..7 */
#define C_IP6 "2001:db8::3"
#define Y_IP "198.51.100.130"
#define ROCE_PORT 4791

struct cmnet {
	pid_t x;	    /* holds namespace X */
	int xns, lns;	    /* X's and our namespace */
	pid_t y;	    /* the client host, 0 if none */
	int y_to, y_from;   /* pipes to and from it */
};

/* A UDP socket of namespace X at ip:port (port 0: any), and its GID. */
struct xsock {
	int fd;
	int v6;
	uint16_t port;
	uint8_t gid[16];
};

static inline void cm_gid_of(const char *ip, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (inet_pton(AF_INET, ip, gid + 12) == 1)
		gid[10] = gid[11] = 0xff;
	else
		CHECK_EQ(inet_pton(AF_INET6, ip, gid), 1);
}

static inline void pipe_put(int fd, const void *p, size_t n)
{
	CHECK_EQ(write(fd, p, n), (ssize_t)n);
}

/* n bytes from fd; 0 when it is closed first. */
static inline int pipe_get(int fd, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);

		if (r == 0)
			return 0;
		CHECK(r > 0);
		got += (size_t)r;
	}
	return 1;
}

/* The child that holds namespace X: dies with us. */
static inline void x_holder(int out)
{
	char c = 'u';

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (unshare(CLONE_NEWNET) < 0)
		_exit(3);
	if (write(out, &c, 1) != 1)
		_exit(3);
	for (;;)
		pause();
}

/*
 * This process into namespace L, X and (y_fn non-NULL) Y made and
 * linked.  y_fn runs in Y with the pipe ends (from us, to us) once the
 * links are up; its daemon is told to go when it returns.
 */
static inline void cmnet_up(struct cmnet *n, void (*y_fn)(int in, int out))
{
	int p[2], a2y[2], y2a[2];
	char c;

	memset(n, 0, sizeof(*n));
	if (geteuid() != 0)
		sv_test_skip("needs root for network namespaces");
	/* Our namespaces are ours alone: RoCE's own port, as the crafted
	 * datagrams say. */
	CHECK_EQ(setenv("SOFTVERBS_ROCE_PORT", "4791", 1), 0);
	if (system("command -v ip >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1"))
		sv_test_skip("no ip or nsenter here");
	if (unshare(CLONE_NEWNET) < 0)
		sv_test_skip("unshare(CLONE_NEWNET): %s", strerror(errno));
	n->lns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	CHECK(n->lns >= 0);
	CHECK_EQ(pipe(p), 0);
	n->x = fork();
	CHECK(n->x >= 0);
	if (n->x == 0) {
		close(p[0]);
		x_holder(p[1]);
	}
	close(p[1]);
	CHECK_EQ(pipe_get(p[0], &c, 1), 1);
	close(p[0]);
	if (y_fn) {
		CHECK_EQ(pipe(a2y), 0);
		CHECK_EQ(pipe(y2a), 0);
		n->y = fork();
		CHECK(n->y >= 0);
		if (n->y == 0) {
			close(a2y[1]);
			close(y2a[0]);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (unshare(CLONE_NEWNET) < 0)
				_exit(3);
			c = 'u';
			pipe_put(y2a[1], &c, 1);
			if (!pipe_get(a2y[0], &c, 1)) /* the links are up */
				_exit(3);
			y_fn(a2y[0], y2a[1]);
			sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
			_exit(0);
		}
		close(a2y[0]);
		close(y2a[1]);
		n->y_to = a2y[1];
		n->y_from = y2a[0];
		CHECK_EQ(pipe_get(n->y_from, &c, 1), 1);
	}
	if (system("ip link add svc0 type veth peer name svc1 2>/dev/null"))
		sv_test_skip("no veth interfaces here");
	sv_test_sh("ip link set svc1 netns %d", (int)n->x);
	sv_test_sh("ip link set lo up && ip addr add " L_IP "/25 dev svc0 && "
		   "ip -6 addr add " L_IP6 "/64 dev svc0 nodad && "
		   "ip link set svc0 up");
	sv_test_sh("nsenter --net=/proc/%d/ns/net sh -c 'ip link set lo up && "
		   "for i in 2 3 4 5 6 7; do ip addr add 198.51.100.$i/25 dev svc1; done && "
		   "ip -6 addr add 2001:db8::2/64 dev svc1 nodad && "
		   "ip -6 addr add " C_IP6 "/64 dev svc1 nodad && "
		   "ip link set svc1 up'", (int)n->x);
	sv_test_sh("ping -c1 -W5 " C_IP " >/dev/null && "
		   "ping -6 -c1 -W5 " C_IP6 " >/dev/null");
	if (n->y) {
		sv_test_sh("ip link add svy0 type veth peer name svy1 && "
			   "ip link set svy1 netns %d", (int)n->y);
		sv_test_sh("ip addr add " L_IPY "/25 dev svy0 && ip link set svy0 up");
		sv_test_sh("nsenter --net=/proc/%d/ns/net sh -c 'ip link set lo up && "
			   "ip addr add " Y_IP "/25 dev svy1 && ip link set svy1 up'",
			   (int)n->y);
		sv_test_sh("ping -c1 -W5 " Y_IP " >/dev/null");
		c = 'g';
		pipe_put(n->y_to, &c, 1);
	}
	{
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)n->x);
		n->xns = open(path, O_RDONLY | O_CLOEXEC);
		CHECK(n->xns >= 0);
	}
}

/* The client host's exit status, once it is done; then our daemon goes. */
static inline void cmnet_down(struct cmnet *n)
{
	int st;

	if (n->y) {
		close(n->y_to);
		CHECK_EQ(waitpid(n->y, &st, 0), n->y);
		CHECK(WIFEXITED(st));
		CHECK_EQ(WEXITSTATUS(st), 0);
		close(n->y_from);
	}
	kill(n->x, SIGKILL);
	waitpid(n->x, &st, 0);
	CHECK_EQ(sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0), 0);
}

/* A UDP socket in namespace X bound to ip:port. */
static inline void xsock_open(const struct cmnet *n, struct xsock *s,
			      const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	memset(s, 0, sizeof(s[0]));
	memset(&ss, 0, sizeof(ss));
	s->v6 = strchr(ip, ':') != NULL;
	if (s->v6)
		cm_addr6((struct sockaddr_in6 *)&ss, ip, port);
	else
		cm_addr4((struct sockaddr_in *)&ss, ip, port);
	cm_gid_of(ip, s->gid);
	CHECK_EQ(setns(n->xns, CLONE_NEWNET), 0);
	s->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	CHECK(s->fd >= 0);
	CHECK_EQ(bind(s->fd, (struct sockaddr *)&ss,
		      s->v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)),
		 0);
	CHECK_EQ(setns(n->lns, CLONE_NEWNET), 0);
	CHECK_EQ(getsockname(s->fd, (struct sockaddr *)&ss, &sl), 0);
	s->port = ntohs(s->v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
				((struct sockaddr_in *)&ss)->sin_port);
	{
		int big = 4 << 20;

		setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	}
}

/* How a crafted datagram differs from a good one (the fuzz's knobs). */
struct xbad {
	uint8_t opcode;	  /* 0: UD SEND only (0x64) */
	int qkey_bad, pkey_bad, icrc_bad;
	uint32_t dst_qpn; /* 0: QP1 */
};

/* mad (len bytes) in a RoCE v2 UD SEND from s's address and port to QP1
 * of L (its IPv4 or IPv6 address, as s's family), port 4791. */
static inline void xsend_raw(const struct xsock *s, const uint8_t *mad,
			     size_t len, const struct xbad *bad)
{
	uint8_t pkt[20 + 1024 + 3 + SV_ICRC_BYTES];
	struct sv_roce_flow f;
	struct sockaddr_storage to;
	size_t ib = 20 + len, pad = (0u - ib) & 3;
	uint32_t icrc, qpn = bad && bad->dst_qpn ? bad->dst_qpn : 1;
	uint32_t qkey = bad && bad->qkey_bad ? 0x80010001u : CM_GSI_QKEY;
	uint16_t pkey = bad && bad->pkey_bad ? 0x1234 : 0xffff;

	CHECK(len <= 1024);
	memset(pkt, 0, sizeof(pkt));
	pkt[0] = bad && bad->opcode ? bad->opcode : 0x64;
	pkt[1] = (uint8_t)(pad << 4);
	pkt[2] = (uint8_t)(pkey >> 8);
	pkt[3] = (uint8_t)pkey;
	pkt[5] = (uint8_t)(qpn >> 16);
	pkt[6] = (uint8_t)(qpn >> 8);
	pkt[7] = (uint8_t)qpn;
	pkt[11] = 1; /* PSN */
	pkt[12] = (uint8_t)(qkey >> 24);
	pkt[13] = (uint8_t)(qkey >> 16);
	pkt[14] = (uint8_t)(qkey >> 8);
	pkt[15] = (uint8_t)qkey;
	pkt[19] = 1; /* source QP 1 */
	memcpy(pkt + 20, mad, len);
	ib += pad;
	memset(&f, 0, sizeof(f));
	f.ipv6 = (uint8_t)s->v6;
	f.hop_limit = 64;
	f.sport = s->port;
	f.dport = ROCE_PORT;
	memcpy(f.sgid, s->gid, 16);
	cm_gid_of(s->v6 ? L_IP6 : L_IP, f.dgid);
	icrc = sv_icrc(&f, pkt, ib);
	if (bad && bad->icrc_bad)
		icrc ^= 0x5a5a;
	memcpy(pkt + ib, &icrc, SV_ICRC_BYTES);
	memset(&to, 0, sizeof(to));
	if (s->v6)
		cm_addr6((struct sockaddr_in6 *)&to, L_IP6, ROCE_PORT);
	else
		cm_addr4((struct sockaddr_in *)&to, L_IP, ROCE_PORT);
	CHECK_EQ(sendto(s->fd, pkt, ib + SV_ICRC_BYTES, 0, (struct sockaddr *)&to,
			s->v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)),
		 (ssize_t)(ib + SV_ICRC_BYTES));
}

/* m as a CM MAD from s. */
static inline void xsend(const struct xsock *s, const struct svd_cm_msg *m)
{
	uint8_t mad[CM_MAD_LEN];

	CHECK_EQ(svd_cm_mad_encode(m, mad), 0);
	xsend_raw(s, mad, sizeof(mad), NULL);
}

/* The next CM MAD that came to s, waiting up to ms: 1 and *m (its GIDs
 * left zero), or 0 when none came.  Anything else arriving there fails
 * the case: the daemon sends only well-formed CM MADs to QP1. */
static inline int xrecv(const struct xsock *s, int ms, struct svd_cm_msg *m)
{
	uint8_t pkt[2048];
	struct pollfd p = { .fd = s->fd, .events = POLLIN };
	ssize_t r;

	if (ms && poll(&p, 1, ms) != 1)
		return 0;
	r = recv(s->fd, pkt, sizeof(pkt), MSG_DONTWAIT);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	CHECK_EQ(r, 20 + CM_MAD_LEN + SV_ICRC_BYTES);
	CHECK_EQ(pkt[0], 0x64);
	CHECK_EQ(pkt[5] << 16 | pkt[6] << 8 | pkt[7], 1);
	CHECK_EQ(svd_cm_mad_decode(pkt + 20, CM_MAD_LEN, m), 0);
	return 1;
}

/* The next CM MAD at s of attribute attr within ms (others skipped and
 * counted in *skipped when not NULL); fails the case when none comes. */
static inline void xexpect(const struct xsock *s, uint16_t attr, int ms,
			   struct svd_cm_msg *m)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int left;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - (int)((t.tv_sec - t0.tv_sec) * 1000 +
				  (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			sv_test_fail(__FILE__, __LINE__, "no %s within %d ms",
				     svd_cm_attr_name(attr), ms);
		if (xrecv(s, left, m) && m->attr_id == attr)
			return;
	}
}

/* The rdma_cm header (cma.c struct cma_hdr) at the start of a REQ's or
 * SIDR_REQ's private data: version 0, IP version, the source port and
 * both addresses (16 bytes each, IPv4 in the last 4). */
static inline void cma_hdr(uint8_t *p, const char *src_ip, uint16_t src_port,
			   const char *dst_ip)
{
	int v6 = strchr(src_ip, ':') != NULL;

	memset(p, 0, CMA_HDR_LEN);
	p[1] = (uint8_t)((v6 ? 6 : 4) << 4);
	p[2] = (uint8_t)(src_port >> 8);
	p[3] = (uint8_t)src_port;
	if (v6) {
		CHECK_EQ(inet_pton(AF_INET6, src_ip, p + 4), 1);
		CHECK_EQ(inet_pton(AF_INET6, dst_ip, p + 20), 1);
	} else {
		CHECK_EQ(inet_pton(AF_INET, src_ip, p + 16), 1);
		CHECK_EQ(inet_pton(AF_INET, dst_ip, p + 32), 1);
	}
}

/*
 * A REQ to the rdma_cm TCP port `port` of L from src_ip (its rdma_cm
 * header's source), comm ID comm, the primary path from path_ip (what a
 * REQ names as its sender) to L.  Timeouts: lcrt/rcrt the local/remote
 * CM response timeouts, ack the local ACK timeout, retries Max CM
 * Retries.  Everything else as the kernel's rdma_cm would send it.
 */
struct reqp {
	uint32_t comm;
	uint16_t port;
	const char *src_ip, *path_ip;
	uint8_t lcrt, rcrt, ack, retries;
};

static inline void req_make(struct svd_cm_msg *m, const struct reqp *p)
{
	int v6 = strchr(p->src_ip, ':') != NULL;

	memset(m, 0, sizeof(*m));
	m->attr_id = CM_ATTR_REQ;
	m->tid = 0x7e57000000000000ull | p->comm;
	m->req.local_comm_id = p->comm;
	m->req.service_id = (uint64_t)RDMA_PS_TCP << 16 | p->port;
	m->req.local_ca_guid = 0x5e5e000000000000ull | p->comm;
	m->req.local_qpn = 0x4242;
	m->req.responder_resources = 1;
	m->req.initiator_depth = 1;
	m->req.remote_cm_response_timeout = p->rcrt;
	m->req.starting_psn = 0x1234;
	m->req.local_cm_response_timeout = p->lcrt;
	m->req.retry_count = 7;
	m->req.pkey = 0xffff;
	m->req.path_mtu = IBV_MTU_1024;
	m->req.rnr_retry_count = 7;
	m->req.max_cm_retries = p->retries;
	cm_gid_of(p->path_ip, m->req.primary_local_gid);
	cm_gid_of(v6 ? L_IP6 : L_IP, m->req.primary_remote_gid);
	m->req.primary_hop_limit = 64;
	m->req.primary_subnet_local = 1;
	m->req.primary_local_ack_timeout = p->ack;
	cma_hdr(m->req.private_data, p->src_ip, 5000, v6 ? L_IP6 : L_IP);
}

/* A listener of ch on every address of L at *port (0: any), with the
 * largest backlog (the kernel's max_backlog). */
static inline struct rdma_cm_id *l_listen(struct rdma_event_channel *ch,
					  enum rdma_port_space ps,
					  uint16_t *port)
{
	struct sockaddr_in a;
	struct rdma_cm_id *id;

	cm_addr4(&a, "0.0.0.0", *port);
	CHECK_EQ(rdma_create_id(ch, &id, NULL, ps), 0);
	CHECK_EQ(rdma_bind_addr(id, (struct sockaddr *)&a), 0);
	CHECK_EQ(rdma_listen(id, 1024), 0);
	*port = ntohs(rdma_get_src_port(id));
	return id;
}

/* The next event of ch, or NULL when none waits. */
static inline struct rdma_cm_event *cm_try(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;
	int fl = fcntl(ch->fd, F_GETFL);

	if (!(fl & O_NONBLOCK))
		CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0);
	if (!rdma_get_cm_event(ch, &ev))
		return ev;
	CHECK_EQ(errno, EAGAIN);
	return NULL;
}

/* The IPv4 address id's peer has (what the application is told). */
static inline int cm_peer_is(struct rdma_cm_id *id, const char *ip)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	struct in_addr want;

	CHECK_EQ(inet_pton(AF_INET, ip, &want), 1);
	return sa->sa_family == AF_INET &&
	       ((struct sockaddr_in *)sa)->sin_addr.s_addr == want.s_addr;
}

/* ---- the honest client host ---------------------------------------------- */

/*
 * Y: for each port read from `in`, an rdma_cm RC connection to L (its
 * address towards Y), one 64-byte SEND over it, a disconnect; writes 1
 * when all of it worked, else the REJECTED status (or 255) to `out`.
 */
static inline void y_client(int in, int out)
{
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_RC);
	uint16_t port;

	while (pipe_get(in, &port, sizeof(port))) {
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct rdma_conn_param cp = { .responder_resources = 1,
					      .initiator_depth = 1,
					      .retry_count = 7 };
		struct rdma_cm_event *ev;
		struct rdma_cm_id *id;
		struct ibv_mr *mr;
		struct ibv_wc wc;
		uint8_t buf[64], res = 255;

		CHECK(ch);
		id = cm_resolved(ch, RDMA_PS_TCP, L_IPY, port);
		CHECK_EQ(cm_create_qp(id, &qa), 0);
		CHECK_EQ(rdma_connect(id, &cp), 0);
		ev = cm_next(ch, 30000);
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			res = (uint8_t)ev->status;
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
			CHECK_EQ(rdma_ack_cm_event(ev), 0);
			memset(buf, 0x5a, sizeof(buf));
			mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
			CHECK(mr);
			CHECK_EQ(rdma_post_send(id, NULL, buf, sizeof(buf), mr, 0), 0);
			CHECK_EQ(rdma_get_send_comp(id, &wc), 1);
			res = wc.status == IBV_WC_SUCCESS;
			CHECK_EQ(rdma_disconnect(id), 0);
			CM_EXPECT_ACK(ch, RDMA_CM_EVENT_DISCONNECTED, 0);
			CHECK_EQ(ibv_dereg_mr(mr), 0);
		} else {
			CHECK_EQ(rdma_ack_cm_event(ev), 0);
		}
		rdma_destroy_qp(id);
		CHECK_EQ(rdma_destroy_id(id), 0);
		rdma_destroy_event_channel(ch);
		pipe_put(out, &res, 1);
	}
}

/*
 * L's half of one y_client connection to listener port `port` of ch
 * (no other event expected meanwhile): accepted with a QP, the 64 bytes
 * received, disconnected by the client; fails the case otherwise.
 */
static inline void y_connect_ok(struct cmnet *n, struct rdma_event_channel *ch,
				uint16_t port)
{
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_RC);
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *s;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t buf[64], res;

	pipe_put(n->y_to, &port, sizeof(port));
	ev = CM_EXPECT(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK(cm_peer_is(s, Y_IP));
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(cm_create_qp(s, &qa), 0);
	mr = ibv_reg_mr(s->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(rdma_post_recv(s, NULL, buf, sizeof(buf), mr), 0);
	CHECK_EQ(rdma_accept(s, &cp), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_ESTABLISHED, 0);
	CHECK_EQ(rdma_get_recv_comp(s, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		CHECK_EQ(buf[i], 0x5a);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_DISCONNECTED, 0);
	CHECK_EQ(rdma_disconnect(s), 0);
	CHECK(pipe_get(n->y_from, &res, 1));
	CHECK_EQ(res, 1);
	rdma_destroy_qp(s);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(rdma_destroy_id(s), 0);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * RoCE v2 between two hosts (docs/wire.md), through our own library,
 * engine and daemon -- so the sanitizer build runs the wire too (the
 * unmodified programs of tests/compat/pairs.sh --wire4/6 cannot load an
 * ASan library):
 *
 *  - RC across: 1 MiB RDMA WRITE, read back with RDMA READ, SENDs of
 *    many sizes into posted receives, 100 fetch-and-adds applied once
 *    each, over IPv4 and over IPv6 GIDs; every byte checked;
 *  - UD across: the receive's GRH names the sender's address, wc.src_qp
 *    and the RoCE packet type in wc.sl;
 *  - the peer's process killed: RC work ends in IBV_WC_RETRY_EXC_ERR after
 *    retry_cnt retries, never a hang;
 *  - datagrams that are not RoCE v2 (a bad ICRC, too short) reach the
 *    port: dropped, counted in the daemon's status, nothing else happens.
 *
 * Two hosts: the case runs in a network namespace of its own (unshare),
 * and forks the other host into another one; a veth joins them, with
 * addresses from the documentation ranges only (198.51.100.0/24,
 * 2001:db8::/32).  Each namespace starts its own daemon (the daemon's
 * abstract socket is per namespace).  Root only: skipped otherwise.
 */
#include "sv_test.h"
#include "sv_client.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IP4_A "198.51.100.1"
#define IP4_B "198.51.100.2"
#define IP6_A "2001:db8::1"
#define IP6_B "2001:db8::2"
#define BUF (1u << 20)


/* The other host's half of a conversation: a child in a namespace of its
 * own; pipes both ways. */
struct host {
	pid_t pid;
	int to, from; /* our ends */
};

static void put(int fd, const void *p, size_t n)
{
	CHECK_EQ(write(fd, p, n), (ssize_t)n);
}

static void get(int fd, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);

		CHECK(r > 0);
		got += (size_t)r;
	}
}

/* Percent of the RoCE packets each host drops on receipt (0: none). */
static int loss_pct;
#define NFT_LOSS                                                              \
	"nft add table inet svloss && nft add chain inet svloss input "        \
	"\"{ type filter hook input priority 0; policy accept; }\" && "        \
	"nft add rule inet svloss input udp dport 4791 "                      \
	"numgen random mod 100 \"<\" %d counter drop"

/*
 * This process into namespace A, the other host (running fn) into B, a
 * veth between: A 198.51.100.1 / 2001:db8::1, B .2 / ::2.  fn runs in B
 * with the pipe ends (from us, to us) once the link is up.
 */
static void two_hosts(struct host *h, void (*fn)(int in, int out))
{
	int a2b[2], b2a[2];
	char c;

	if (geteuid() != 0)
		sv_test_skip("needs root for network namespaces");
	/* Our namespaces are ours alone: RoCE's own port, as the raw
	 * packets and the loss rule below say. */
	CHECK_EQ(setenv("SOFTVERBS_ROCE_PORT", "4791", 1), 0);
	if (system("command -v ip >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1"))
		sv_test_skip("no ip or nsenter here");
	if (unshare(CLONE_NEWNET) < 0)
		sv_test_skip("unshare(CLONE_NEWNET): %s", strerror(errno));
	CHECK_EQ(pipe(a2b), 0);
	CHECK_EQ(pipe(b2a), 0);
	h->pid = fork();
	CHECK(h->pid >= 0);
	if (h->pid == 0) {
		close(a2b[1]);
		close(b2a[0]);
		if (unshare(CLONE_NEWNET) < 0)
			_exit(3);
		c = 'u';
		put(b2a[1], &c, 1);
		get(a2b[0], &c, 1); /* the link is up */
		fn(a2b[0], b2a[1]);
		sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
		_exit(0);
	}
	close(a2b[0]);
	close(b2a[1]);
	h->to = a2b[1];
	h->from = b2a[0];
	get(h->from, &c, 1);
	if (system("ip link add svw0 type veth peer name svw1 2>/dev/null"))
		sv_test_skip("no veth interfaces here");
	sv_test_sh("ip link set svw1 netns %d", (int)h->pid);
	sv_test_sh("ip link set lo up && ip addr add " IP4_A "/24 dev svw0 && "
	   "ip -6 addr add " IP6_A "/64 dev svw0 nodad && ip link set svw0 up");
	sv_test_sh("nsenter --net=/proc/%d/ns/net sh -c 'ip link set lo up && "
	   "ip addr add " IP4_B "/24 dev svw1 && "
	   "ip -6 addr add " IP6_B "/64 dev svw1 nodad && ip link set svw1 up'",
	   (int)h->pid);
	sv_test_sh("ping -c1 -W5 " IP4_B " >/dev/null && ping -6 -c1 -W5 " IP6_B " >/dev/null");
	if (loss_pct) {
		/* Both hosts drop a share of the RoCE packets they receive
		 * (nftables: this kernel has no netem): requests, ACKs and
		 * read responses all get lost. */
		if (system("command -v nft >/dev/null 2>&1"))
			sv_test_skip("no nft here (scripts/deps.sh installs nftables)");
		sv_test_sh(NFT_LOSS, loss_pct);
		sv_test_sh("nsenter --net=/proc/%d/ns/net sh -c '" NFT_LOSS "'", (int)h->pid,
		   loss_pct);
	}
	c = 'g';
	put(h->to, &c, 1);
}

/* Packets the loss rule of this namespace dropped. */
static long nft_dropped(void)
{
	char line[256];
	long n = -1;
	FILE *f;

	f = popen("nft list table inet svloss", "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "counter packets ");

		if (p)
			n = strtol(p + 16, NULL, 10);
	}
	pclose(f);
	return n;
}

/* The other host's exit status, once it is done. */
static int host_done(struct host *h)
{
	int st;

	close(h->to);
	CHECK_EQ(waitpid(h->pid, &st, 0), h->pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* This host's daemon goes (its namespace with it, once we exit). */
static void a_done(void)
{
	CHECK_EQ(sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0), 0);
}

/* ----------------------------------------------------------- a side -- */

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	int gid;
};

/* What one side tells the other. */
struct card {
	uint32_t qpn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static int gid_index(struct ibv_context *ctx, const char *ip)
{
	union ibv_gid want, g;

	memset(&want, 0, sizeof(want));
	if (inet_pton(AF_INET, ip, &want.raw[12]) == 1)
		want.raw[10] = want.raw[11] = 0xff;
	else
		CHECK_EQ(inet_pton(AF_INET6, ip, want.raw), 1);
	for (int i = 0; i < SV_GID_TBL_LEN; i++)
		if (!ibv_query_gid(ctx, 1, i, &g) && !memcmp(&g, &want, 16))
			return i;
	sv_test_fail(__FILE__, __LINE__, "no GID for %s", ip);
}

static void side_open(struct side *s, enum ibv_qp_type t, const char *ip)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	CHECK(l && l[0]);
	s->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	CHECK(s->ctx);
	s->gid = gid_index(s->ctx, ip);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	CHECK(s->pd && s->cq);
	CHECK_EQ(posix_memalign((void **)&s->buf, 4096, BUF), 0);
	memset(s->buf, 0, BUF);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(s->mr);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = s->cq;
	ia.qp_type = t;
	ia.cap.max_send_wr = 128;
	ia.cap.max_recv_wr = 128;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	s->qp = ibv_create_qp(s->pd, &ia);
	CHECK(s->qp);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (t == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		CHECK_EQ(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
							  IBV_QP_PORT | IBV_QP_QKEY),
			 0);
		a.qp_state = IBV_QPS_RTR;
		CHECK_EQ(ibv_modify_qp(s->qp, &a, IBV_QP_STATE), 0);
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 1;
		CHECK_EQ(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
		return;
	}
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	CHECK_EQ(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
}

static void side_card(struct side *s, struct card *c)
{
	memset(c, 0, sizeof(*c));
	c->qpn = s->qp->qp_num;
	c->rkey = s->mr->rkey;
	c->addr = (uintptr_t)s->buf;
	CHECK_EQ(ibv_query_gid(s->ctx, 1, s->gid, &c->gid), 0);
}

/* RC to RTS towards the peer of card c (timeout/retry: the QP's). */
static void side_connect(struct side *s, const struct card *c, uint8_t timeout,
			 uint8_t retry)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = c->qpn;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = c->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)s->gid;
	a.ah_attr.grh.hop_limit = 8;
	CHECK_EQ(ibv_modify_qp(s->qp, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER),
		 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	CHECK_EQ(ibv_modify_qp(s->qp, &a,
			       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_MAX_QP_RD_ATOMIC),
		 0);
}

static void side_close(struct side *s)
{
	CHECK_EQ(ibv_destroy_qp(s->qp), 0);
	CHECK_EQ(ibv_dereg_mr(s->mr), 0);
	CHECK_EQ(ibv_destroy_cq(s->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(s->pd), 0);
	CHECK_EQ(ibv_close_device(s->ctx), 0);
	free(s->buf);
}

/* One completion within 20 s. */
static void wc1(struct side *s, struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(s->cq, 1, wc);

		CHECK(n >= 0);
		if (n)
			return;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			sv_test_fail(__FILE__, __LINE__, "no completion in 20 s");
	}
}

static void post(struct side *s, uint64_t id, enum ibv_wr_opcode op,
		 uint32_t off, uint32_t len, const struct card *c, uint64_t roff,
		 uint64_t add)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = c->addr + roff;
		wr.wr.atomic.rkey = c->rkey;
		wr.wr.atomic.compare_add = add;
	} else if (c) {
		wr.wr.rdma.remote_addr = c->addr + roff;
		wr.wr.rdma.rkey = c->rkey;
	}
	CHECK_EQ(ibv_post_send(s->qp, &wr, &bad), 0);
}

static void post_recv(struct side *s, uint64_t id, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	CHECK_EQ(ibv_post_recv(s->qp, &wr, &bad), 0);
}

static uint8_t pat(uint32_t i, uint32_t k)
{
	return (uint8_t)(i * 131 + k * 7 + (i >> 8));
}

/* ------------------------------------------------------------- RC -- */

#define NSEND 40
static uint32_t send_len(uint32_t k)
{
	return 1 + (k * 2654435761u) % 9000;
}

static const char *b_ip; /* the other host's address family */

/* B: the passive side.  Posts receives, checks what the SENDs brought. */
static void rc_b(int in, int out)
{
	struct side s;
	struct card mine, peer;
	struct ibv_wc wc;
	uint8_t ok = 1;

	side_open(&s, IBV_QPT_RC, b_ip);
	side_card(&s, &mine);
	put(out, &mine, sizeof(mine));
	get(in, &peer, sizeof(peer));
	side_connect(&s, &peer, 15, 7);
	for (uint32_t k = 0; k < NSEND; k++)
		post_recv(&s, k, BUF / 2 + k * 10000, 10000);
	put(out, &ok, 1); /* receives posted */
	for (uint32_t k = 0; k < NSEND; k++) {
		wc1(&s, &wc);
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != k ||
		    wc.byte_len != send_len(k))
			ok = 0;
		for (uint32_t i = 0; ok && i < send_len(k); i++)
			if (s.buf[BUF / 2 + k * 10000 + i] != pat(i, k + 1000))
				ok = 0;
	}
	put(out, &ok, 1);
	get(in, &ok, 1); /* A is done with our memory */
	side_close(&s);
}

static void rc_across(const char *a_ip, const char *peer_ip)
{
	struct host h;
	struct side s;
	struct card mine, peer;
	struct ibv_wc wc;
	uint8_t ok;
	uint64_t old, first;

	b_ip = peer_ip;
	two_hosts(&h, rc_b);
	side_open(&s, IBV_QPT_RC, a_ip);
	side_card(&s, &mine);
	get(h.from, &peer, sizeof(peer));
	put(h.to, &mine, sizeof(mine));
	/* timeout 15 (~134 ms), 7 retries: a budget of a second, for a
	 * peer that a busy machine keeps from its port a while. */
	side_connect(&s, &peer, 15, 7);
	CHECK(memcmp(&peer.gid, &mine.gid, 16) != 0);

	/* 1 MiB less the receive area: WRITE, then READ it back. */
	for (uint32_t i = 0; i < BUF / 2; i++)
		s.buf[i] = pat(i, 1);
	post(&s, 1, IBV_WR_RDMA_WRITE, 0, BUF / 2, &peer, 0, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	memset(s.buf + BUF / 2, 0, BUF / 2);
	post(&s, 2, IBV_WR_RDMA_READ, BUF / 2, BUF / 2, &peer, 0, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK(!memcmp(s.buf, s.buf + BUF / 2, BUF / 2));

	/* Atomics on what the WRITE left at 4096: each applied once, in
	 * order, each returning the value before it. */
	memcpy(&first, s.buf + 4096, 8);
	for (uint32_t i = 0; i < 100; i++) {
		post(&s, 100 + i, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 8, &peer, 4096, 1);
		wc1(&s, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 100 + i);
		memcpy(&old, s.buf, 8);
		CHECK_EQ(old, first + i);
	}
	post(&s, 300, IBV_WR_RDMA_READ, 0, 8, &peer, 4096, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	memcpy(&old, s.buf, 8);
	CHECK_EQ(old, first + 100);

	/* SENDs of many sizes into B's receives. */
	get(h.from, &ok, 1);
	for (uint32_t k = 0; k < NSEND; k++) {
		for (uint32_t i = 0; i < send_len(k); i++)
			s.buf[i] = pat(i, k + 1000);
		post(&s, 1000 + k, IBV_WR_SEND, 0, send_len(k), NULL, 0, 0);
		wc1(&s, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}
	get(h.from, &ok, 1);
	CHECK_EQ(ok, 1);
	put(h.to, &ok, 1);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

SV_TEST_T(rc_across_ipv4, 120)
{
	rc_across(IP4_A, IP4_B);
}

SV_TEST_T(rc_across_ipv6, 120)
{
	rc_across(IP6_A, IP6_B);
}

/* The same with each host dropping 5% of what it receives: RC's
 * retransmission (NAK sequence errors, the retry timer) brings every byte
 * across, each atomic applied once; the rules did drop packets. */
SV_TEST_T(rc_across_under_loss, 300)
{
	loss_pct = 5;
	rc_across(IP4_A, IP4_B);
	CHECK(nft_dropped() > 0); /* A's rule: ACKs and read responses */
}

/* And with both engines duplicating and delaying (reordering) 5% of the
 * packets they send on the wire (SOFTVERBS_FAULT): nothing is delivered
 * twice or out of order to the application. */
SV_TEST_T(rc_across_dup_and_reorder, 300)
{
	CHECK_EQ(setenv("SOFTVERBS_FAULT", "dup:0.05,reorder:0.05,seed:9", 1), 0);
	rc_across(IP4_A, IP4_B);
	CHECK_EQ(unsetenv("SOFTVERBS_FAULT"), 0);
}

/* ------------------------------------------------------------- UD -- */

/* B: receives 20 datagrams, checks each one's GRH and completion. */
static void ud_b(int in, int out)
{
	struct side s;
	struct card mine, peer;
	struct ibv_wc wc;
	uint8_t ok = 1, v4 = !strchr(b_ip, ':');

	side_open(&s, IBV_QPT_UD, b_ip);
	side_card(&s, &mine);
	for (uint32_t k = 0; k < 20; k++)
		post_recv(&s, k, k * 2048, 2048);
	put(out, &mine, sizeof(mine));
	get(in, &peer, sizeof(peer));
	for (uint32_t k = 0; k < 20; k++) {
		const uint8_t *g = s.buf + k * 2048;

		wc1(&s, &wc);
		if (wc.status != IBV_WC_SUCCESS || wc.src_qp != peer.qpn ||
		    !(wc.wc_flags & IBV_WC_GRH) || wc.byte_len != 40 + 100 + k ||
		    wc.sl != (v4 ? 0xa : 0x9))
			ok = 0;
		/* The sender's address where the IP header has it. */
		if (v4 ? memcmp(g + 20 + 12, peer.gid.raw + 12, 4) :
			 memcmp(g + 8, peer.gid.raw, 16))
			ok = 0;
		for (uint32_t i = 0; i < 100 + k; i++)
			if (g[40 + i] != pat(i, k))
				ok = 0;
	}
	put(out, &ok, 1);
	side_close(&s);
}

static void ud_across(const char *a_ip, const char *peer_ip)
{
	struct host h;
	struct side s;
	struct card mine, peer;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint8_t ok;

	b_ip = peer_ip;
	two_hosts(&h, ud_b);
	side_open(&s, IBV_QPT_UD, a_ip);
	side_card(&s, &mine);
	get(h.from, &peer, sizeof(peer));
	put(h.to, &mine, sizeof(mine));
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.dgid = peer.gid;
	aa.grh.sgid_index = (uint8_t)s.gid;
	aa.grh.hop_limit = 8;
	ah = ibv_create_ah(s.pd, &aa);
	CHECK(ah);
	for (uint32_t k = 0; k < 20; k++) {
		struct ibv_sge sge = { (uintptr_t)s.buf, 100 + k, s.mr->lkey };
		struct ibv_send_wr wr, *bad;

		for (uint32_t i = 0; i < 100 + k; i++)
			s.buf[i] = pat(i, k);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = k;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = peer.qpn;
		wr.wr.ud.remote_qkey = 0x11111111;
		CHECK_EQ(ibv_post_send(s.qp, &wr, &bad), 0);
		wc1(&s, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}
	get(h.from, &ok, 1);
	CHECK_EQ(ok, 1);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

SV_TEST_T(ud_across_ipv4, 120)
{
	ud_across(IP4_A, IP4_B);
}

SV_TEST_T(ud_across_ipv6, 120)
{
	ud_across(IP6_A, IP6_B);
}

/* -------------------------------------------------- a peer killed -- */

static void kill_b(int in, int out)
{
	struct side s;
	struct card mine, peer;

	side_open(&s, IBV_QPT_RC, IP4_B);
	side_card(&s, &mine);
	put(out, &mine, sizeof(mine));
	get(in, &peer, sizeof(peer));
	side_connect(&s, &peer, 14, 7);
	put(out, &mine, 1);
	pause(); /* until killed */
}

SV_TEST_T(rc_peer_killed_is_retry_exceeded, 120)
{
	struct host h;
	struct side s;
	struct card mine, peer;
	struct ibv_wc wc;
	uint8_t c;

	two_hosts(&h, kill_b);
	side_open(&s, IBV_QPT_RC, IP4_A);
	side_card(&s, &mine);
	get(h.from, &peer, sizeof(peer));
	put(h.to, &mine, sizeof(mine));
	/* timeout 12 (~17 ms), 2 retries: the budget is well under a second. */
	side_connect(&s, &peer, 12, 2);
	get(h.from, &c, 1);
	post(&s, 1, IBV_WR_RDMA_WRITE, 0, 4096, &peer, 0, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(kill(h.pid, SIGKILL), 0);
	CHECK_EQ(host_done(&h), 128 + SIGKILL);
	post(&s, 2, IBV_WR_RDMA_WRITE, 0, 65536, &peer, 0, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.wr_id, 2);
	CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	side_close(&s);
	a_done();
}

/* ------------------------------------------------- not RoCE v2 -- */

static uint64_t status_u64(size_t off)
{
	struct sv_status_rep st;
	uint64_t v;

	CHECK_EQ(sv_call_simple(SV_OP_STATUS, 0, 0, -1, NULL, 0, &st, sizeof(st)), 0);
	memcpy(&v, (const char *)&st + off, sizeof(v));
	return v;
}

/* B: the daemon's counters before and after A's garbage. */
static void junk_b(int in, int out)
{
	struct side s;
	uint64_t v[2];
	uint8_t c;

	side_open(&s, IBV_QPT_RC, IP4_B); /* starts our daemon */
	v[0] = status_u64(offsetof(struct sv_status_rep, wire_rx_bad_icrc));
	v[1] = status_u64(offsetof(struct sv_status_rep, wire_rx_dropped));
	put(out, v, sizeof(v));
	get(in, &c, 1); /* sent */
	for (int i = 0; i < 200; i++) {
		if (status_u64(offsetof(struct sv_status_rep, wire_rx_bad_icrc)) >= v[0] + 1 &&
		    status_u64(offsetof(struct sv_status_rep, wire_rx_dropped)) >= v[1] + 1)
			break;
		usleep(10000);
	}
	v[0] = status_u64(offsetof(struct sv_status_rep, wire_rx_bad_icrc)) - v[0];
	v[1] = status_u64(offsetof(struct sv_status_rep, wire_rx_dropped)) - v[1];
	put(out, v, sizeof(v));
	side_close(&s);
}

SV_TEST_T(not_roce_is_dropped_and_counted, 120)
{
	struct host h;
	struct sockaddr_in b = { .sin_family = AF_INET, .sin_port = htons(4791) };
	uint8_t pkt[64], c = 's';
	uint64_t before[2], delta[2];
	int fd;

	two_hosts(&h, junk_b);
	get(h.from, before, sizeof(before));
	CHECK_EQ(inet_pton(AF_INET, IP4_B, &b.sin_addr), 1);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(fd >= 0);
	/* A well-formed BTH (UD SEND to QP 0x123456) with a wrong ICRC. */
	memset(pkt, 0, sizeof(pkt));
	pkt[0] = 0x64;
	pkt[2] = pkt[3] = 0xff;
	pkt[5] = 0x12, pkt[6] = 0x34, pkt[7] = 0x56;
	CHECK_EQ(sendto(fd, pkt, 12 + 8 + 16 + 4, 0, (struct sockaddr *)&b,
			sizeof(b)), 12 + 8 + 16 + 4);
	/* Too short for a BTH and an ICRC; transport version 1. */
	CHECK_EQ(sendto(fd, pkt, 7, 0, (struct sockaddr *)&b, sizeof(b)), 7);
	close(fd);
	put(h.to, &c, 1);
	get(h.from, delta, sizeof(delta));
	CHECK_EQ(delta[0], 1); /* bad ICRC */
	CHECK(delta[1] >= 1);  /* the short one */
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

SV_TEST_MAIN()

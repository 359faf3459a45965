/* SPDX-License-Identifier: MIT */
/*
 * Two hosts for the wire tests (test_wire.c, test_wire_trust.c): this
 * process in network namespace A, a forked child (the other host) in B,
 * a veth between them with addresses from the documentation ranges only,
 * pipes both ways; and a verbs "side" on either host (device, PD, CQ, a
 * 1 MiB MR, one QP) with what one side tells the other (struct card).
 * Each namespace starts its own daemon (its abstract socket is per
 * namespace).  Root only: two_hosts skips otherwise.
 */
#ifndef WIRE_UTIL_H
#define WIRE_UTIL_H

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

static inline void put(int fd, const void *p, size_t n)
{
	CHECK_EQ(write(fd, p, n), (ssize_t)n);
}

static inline void get(int fd, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);

		CHECK(r > 0);
		got += (size_t)r;
	}
}

/* Percent of the RoCE packets each host drops on receipt (0: none). */
static int loss_pct __attribute__((unused));
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
static inline void two_hosts(struct host *h, void (*fn)(int in, int out))
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
static inline long nft_dropped(void)
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
static inline int host_done(struct host *h)
{
	int st;

	close(h->to);
	CHECK_EQ(waitpid(h->pid, &st, 0), h->pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* This host's daemon goes (its namespace with it, once we exit). */
static inline void a_done(void)
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

static inline int gid_index(struct ibv_context *ctx, const char *ip)
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

static inline void side_open(struct side *s, enum ibv_qp_type t, const char *ip)
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

static inline void side_card(struct side *s, struct card *c)
{
	memset(c, 0, sizeof(*c));
	c->qpn = s->qp->qp_num;
	c->rkey = s->mr->rkey;
	c->addr = (uintptr_t)s->buf;
	CHECK_EQ(ibv_query_gid(s->ctx, 1, s->gid, &c->gid), 0);
}

/* Host A's half of the exchange: B's card in, ours out (B sends first). */
static inline void a_swap_cards(struct host *h, struct side *s,
				struct card *peer)
{
	struct card mine;

	side_card(s, &mine);
	get(h->from, peer, sizeof(*peer));
	put(h->to, &mine, sizeof(mine));
}

/* Host B's half (a two_hosts function's in and out): ours out, A's in. */
static inline void b_swap_cards(int in, int out, struct side *s,
				struct card *peer)
{
	struct card mine;

	side_card(s, &mine);
	put(out, &mine, sizeof(mine));
	get(in, peer, sizeof(*peer));
}

/* RC or UC to RTS towards the peer of card c (timeout/retry: the QP's;
 * UC takes none of RC's attributes, and ignores them). */

static inline void side_connect(struct side *s, const struct card *c,
				uint8_t timeout, uint8_t retry)
{
	int rc = s->qp->qp_type == IBV_QPT_RC;
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
				       (rc ? IBV_QP_MAX_DEST_RD_ATOMIC |
						     IBV_QP_MIN_RNR_TIMER :
					     0)),
		 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	CHECK_EQ(ibv_modify_qp(s->qp, &a,
			       IBV_QP_STATE | IBV_QP_SQ_PSN |
				       (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						     IBV_QP_RNR_RETRY |
						     IBV_QP_MAX_QP_RD_ATOMIC :
					     0)),
		 0);
}

static inline void side_close(struct side *s)
{
	CHECK_EQ(ibv_destroy_qp(s->qp), 0);
	CHECK_EQ(ibv_dereg_mr(s->mr), 0);
	CHECK_EQ(ibv_destroy_cq(s->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(s->pd), 0);
	CHECK_EQ(ibv_close_device(s->ctx), 0);
	free(s->buf);
}

/* One completion within 20 s: 1, or 0 (nothing came). */
static inline int wc1_try(struct side *s, struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(s->cq, 1, wc);

		CHECK(n >= 0);
		if (n)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			return 0;
	}
}

/* One completion within 20 s. */
static inline void wc1(struct side *s, struct ibv_wc *wc)
{
	if (!wc1_try(s, wc))
		sv_test_fail(__FILE__, __LINE__, "no completion in 20 s");
}

static inline void post(struct side *s, uint64_t id, enum ibv_wr_opcode op,
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

static inline void post_recv(struct side *s, uint64_t id, uint32_t off,
			     uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	CHECK_EQ(ibv_post_recv(s->qp, &wr, &bad), 0);
}

static inline uint64_t status_u64(size_t off)
{
	struct sv_status_rep st;
	uint64_t v;

	CHECK_EQ(sv_call_simple(SV_OP_STATUS, 0, 0, -1, NULL, 0, &st, sizeof(st)), 0);
	memcpy(&v, (const char *)&st + off, sizeof(v));
	return v;
}

#endif

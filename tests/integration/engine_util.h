/* SPDX-License-Identifier: MIT */
/* Helpers for the engine tests (test_engine_*.c): endpoints, connection,
 * polling with a bound, and a peer process over a socketpair. */
#ifndef ENGINE_UTIL_H
#define ENGINE_UTIL_H

#include "sv_test.h"
#include "sv_ring.h"

#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EP_BUF 65536

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

/* What a peer needs to reach an endpoint. */
struct ep_info {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	uint32_t qkey;
	uint32_t pad;
};

static inline struct ibv_context *eu_open(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	CHECK(list && list[0]);
	ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	ibv_free_device_list(list);
	return ctx;
}

#define EU_ACCESS                                                             \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                   \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* An endpoint on ctx (NULL: a new context) with a registered buffer, its
 * CQ reporting to completion channel ch (or none). */
static inline void ep_open_chan(struct ep *e, struct ibv_context *ctx,
				enum ibv_qp_type type,
				struct ibv_comp_channel *ch)
{
	struct ibv_qp_init_attr ia;

	memset(e, 0, sizeof(*e));
	e->ctx = ctx ? ctx : eu_open();
	e->pd = ibv_alloc_pd(e->ctx);
	CHECK(e->pd);
	e->cq = ibv_create_cq(e->ctx, 256, NULL, ch, 0);
	CHECK(e->cq);
	CHECK(posix_memalign((void **)&e->buf, 4096, EP_BUF) == 0);
	memset(e->buf, 0, EP_BUF);
	e->mr = ibv_reg_mr(e->pd, e->buf, EP_BUF, EU_ACCESS);
	CHECK(e->mr);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->cq;
	ia.recv_cq = e->cq;
	ia.qp_type = type;
	ia.cap.max_send_wr = 64;
	ia.cap.max_recv_wr = 64;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 4;
	ia.cap.max_inline_data = 64;
	e->qp = ibv_create_qp(e->pd, &ia);
	CHECK(e->qp);
}

/* The same with no channel. */
static inline void ep_open(struct ep *e, struct ibv_context *ctx,
			   enum ibv_qp_type type)
{
	ep_open_chan(e, ctx, type, NULL);
}

static inline struct ep_info ep_info(const struct ep *e)
{
	struct ep_info i = { .qpn = e->qp->qp_num,
			     .rkey = e->mr->rkey,
			     .addr = (uintptr_t)e->buf,
			     .qkey = 0x11111111 };
	return i;
}

/* RESET -> INIT -> RTR -> RTS towards dqpn (UD: dqpn ignored). */
/* RESET to RTS with the PSNs given (rq_psn expected, sq_psn sent) and
 * path MTU mtu. */
static inline void ep_connect_psn(struct ep *e, uint32_t dqpn, uint8_t timeout,
				  uint8_t retry, uint8_t rnr_retry,
				  uint8_t min_rnr, uint32_t rq_psn,
				  uint32_t sq_psn, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a;
	int ud = e->qp->qp_type == IBV_QPT_UD;
	int rc = e->qp->qp_type == IBV_QPT_RC;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	if (ud) {
		a.qkey = 0x11111111;
		CHECK_EQ(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						  IBV_QP_PORT | IBV_QP_QKEY), 0);
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ |
				    (rc ? IBV_ACCESS_REMOTE_ATOMIC : 0);
		CHECK_EQ(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ud) {
		CHECK_EQ(ibv_modify_qp(e->qp, &a, IBV_QP_STATE), 0);
	} else {
		a.path_mtu = mtu;
		a.dest_qp_num = dqpn;
		a.rq_psn = rq_psn;
		a.ah_attr.port_num = 1;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.hop_limit = 1;
		a.max_dest_rd_atomic = 16;
		a.min_rnr_timer = min_rnr;
		CHECK_EQ(ibv_modify_qp(e->qp, &a,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       (rc ? IBV_QP_MAX_DEST_RD_ATOMIC |
							     IBV_QP_MIN_RNR_TIMER :
						     0)),
			 0);
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = ud ? 0 : sq_psn;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = 16;
	CHECK_EQ(ibv_modify_qp(e->qp, &a,
			       IBV_QP_STATE | IBV_QP_SQ_PSN |
				       (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						     IBV_QP_RNR_RETRY |
						     IBV_QP_MAX_QP_RD_ATOMIC :
					     0)),
		 0);
}

static inline void ep_connect_ex(struct ep *e, uint32_t dqpn, uint8_t timeout,
				 uint8_t retry, uint8_t rnr_retry,
				 uint8_t min_rnr)
{
	ep_connect_psn(e, dqpn, timeout, retry, rnr_retry, min_rnr, 0x100,
		       0x100, IBV_MTU_1024);
}

static inline void ep_connect(struct ep *e, uint32_t dqpn)
{
	ep_connect_ex(e, dqpn, 14, 7, 7, 12);
}

/* Polls one completion, for at most ms milliseconds.  1 or 0. */
static inline int poll1(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		CHECK(n >= 0);
		if (n)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
			    (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return 0;
		usleep(50);
	}
}

/* One completion that must come within 10 s, with this status. */
#define EXPECT_WC(cq, wcp, st)                                                 \
	do {                                                                   \
		CHECK(poll1((cq), (wcp), 10000));                              \
		if ((wcp)->status != (st))                                     \
			sv_test_fail(__FILE__, __LINE__,                       \
				     "wc status %s (%d), wanted %s",           \
				     ibv_wc_status_str((wcp)->status),         \
				     (wcp)->status, ibv_wc_status_str(st));    \
	} while (0)

static inline void post_recv(struct ep *e, uint64_t id, void *addr,
			     uint32_t len)
{
	struct ibv_sge s = { .addr = (uintptr_t)addr, .length = len,
			     .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1 },
			   *bad;

	CHECK_EQ(ibv_post_recv(e->qp, &wr, &bad), 0);
}

static inline void post_send_op(struct ep *e, uint64_t id,
				enum ibv_wr_opcode op, void *addr,
				uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge s = { .addr = (uintptr_t)addr, .length = len,
			     .lkey = e->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &s;
	wr.num_sge = len || op != IBV_WR_SEND ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK_EQ(ibv_post_send(e->qp, &wr, &bad), 0);
}

static inline void ep_close(struct ep *e)
{
	CHECK_EQ(ibv_destroy_qp(e->qp), 0);
	CHECK_EQ(ibv_dereg_mr(e->mr), 0);
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(e->pd), 0);
	free(e->buf);
}

/* Deterministic bytes for seed: one process writes them, another checks. */
static inline void eu_pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 13 + (i >> 8));
}

/* An RC endpoint on an existing ctx and pd: its own CQ, no buffer (the
 * caller's MRs are used with explicit keys). */
static inline void eu_rc_qp(struct ep *e, struct ibv_context *ctx,
			    struct ibv_pd *pd, int cqe, uint32_t wrs,
			    uint32_t sges)
{
	struct ibv_qp_init_attr ia;

	memset(e, 0, sizeof(*e));
	e->ctx = ctx;
	e->pd = pd;
	e->cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
	CHECK(e->cq);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = e->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = wrs;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = sges;
	e->qp = ibv_create_qp(pd, &ia);
	CHECK(e->qp);
}

/* Two eu_rc_qp endpoints connected to each other. */
static inline void eu_pair_new(struct ep *a, struct ep *b,
			       struct ibv_context *ctx, struct ibv_pd *pd,
			       int cqe, uint32_t wrs, uint32_t sges)
{
	eu_rc_qp(a, ctx, pd, cqe, wrs, sges);
	eu_rc_qp(b, ctx, pd, cqe, wrs, sges);
	ep_connect(a, b->qp->qp_num);
	ep_connect(b, a->qp->qp_num);
}

static inline void eu_pair_free(struct ep *a, struct ep *b)
{
	CHECK_EQ(ibv_destroy_qp(a->qp), 0);
	CHECK_EQ(ibv_destroy_qp(b->qp), 0);
	CHECK_EQ(ibv_destroy_cq(a->cq), 0);
	CHECK_EQ(ibv_destroy_cq(b->cq), 0);
}

/* One signalled send WR with an explicit lkey (possibly an imported MR's);
 * add and swap are used by the atomics only. */
static inline void eu_post_keyed(struct ep *e, uint64_t id,
				 enum ibv_wr_opcode op, uint64_t laddr,
				 uint32_t len, uint32_t lkey, uint64_t raddr,
				 uint32_t rkey, uint64_t add, uint64_t swap)
{
	struct ibv_sge s = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	CHECK_EQ(ibv_post_send(e->qp, &wr, &bad), 0);
}

/* One receive with an explicit lkey (possibly an imported MR's). */
static inline void eu_recv_keyed(struct ep *e, uint64_t id, uint64_t addr,
				 uint32_t len, uint32_t lkey)
{
	struct ibv_sge s = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1 },
			   *bad;

	CHECK_EQ(ibv_post_recv(e->qp, &wr, &bad), 0);
}

/* Socketpair messages between the test and its peer process. */
static inline void xsend(int s, const void *p, size_t n)
{
	CHECK_EQ(write(s, p, n), (ssize_t)n);
}

static inline void xrecv(int s, void *p, size_t n)
{
	struct pollfd pfd = { .fd = s, .events = POLLIN };

	CHECK_EQ(poll(&pfd, 1, 20000), 1);
	CHECK_EQ(read(s, p, n), (ssize_t)n);
}

/* The next mapping in f (/proc/self/maps) that is a ring this process's
 * engine produces, with its inode in *inode; NULL at the end. */
static inline const struct sv_ring_hdr *eu_next_own_ring(FILE *f,
							unsigned long *inode)
{
	unsigned long start, end, off;
	char line[512], perms[8];
	int pos;

	while (fgets(line, sizeof(line), f)) {
		const struct sv_ring_hdr *h;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %lu %n", &start, &end,
			   perms, &off, inode, &pos) != 5 || off ||
		    !strstr(line + pos, "/memfd:softverbs-ring") ||
		    end - start < sizeof(*h))
			continue;
		h = (const struct sv_ring_hdr *)start;
		if (h->magic == SV_RING_MAGIC &&
		    h->owner_pid == (uint32_t)getpid())
			return h;
	}
	return NULL;
}

/*
 * The header of the ring on which this process's engine sends packets to
 * the engine of process pid (src/engine/eng_link.c: one "softverbs-ring"
 * memfd per direction, made by its producer), or NULL while pid has not
 * mapped it yet.  Our loopback ring has the same name and owner but is
 * ours alone, hence the look at pid's mappings (so pid must not have
 * inherited ours: fork it before our engine makes rings).  Its armed bit
 * (src/common/sv_ring.h) is that engine's word on whether it consumes the
 * ring now, which decides whether a small SEND to it travels as a packet
 * (src/engine/sv_direct.c, small_packet).
 */
static inline const struct sv_ring_hdr *eu_ring_to(pid_t pid)
{
	unsigned long ino[64], start, end, off, inode;
	char path[64], line[512], perms[8];
	const struct sv_ring_hdr *h, *found = NULL;
	size_t n = 0;
	FILE *f;
	int pos;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	CHECK(f);
	while (n < 64 && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %lx %*s %lu %n", &start, &end,
			   perms, &off, &inode, &pos) == 5 &&
		    strstr(line + pos, "/memfd:softverbs-ring"))
			ino[n++] = inode;
	fclose(f);
	f = fopen("/proc/self/maps", "r");
	CHECK(f);
	while (!found && (h = eu_next_own_ring(f, &inode)))
		for (size_t k = 0; k < n; k++)
			if (ino[k] == inode)
				found = h;
	fclose(f);
	return found;
}

/*
 * The sum of the tails of every ring this process's engine produces (its
 * packets to other engines, and its loopback ring): it moves when the
 * engine publishes a packet, whether or not the consumer has mapped the
 * ring yet -- a new ring's first packets can be there before the daemon's
 * word of it reaches the other engine.
 */
static inline uint64_t eu_own_ring_tails(void)
{
	const struct sv_ring_hdr *h;
	unsigned long inode;
	uint64_t sum = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	CHECK(f);
	while ((h = eu_next_own_ring(f, &inode)))
		sum += atomic_load(&h->tail);
	fclose(f);
	return sum;
}

/* The tids of this process's threads named comm ("sv-progress\n" as
 * /proc prints it): how many, the first in *tid. */
static inline int eu_threads_named(const char *comm, pid_t *tid)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	CHECK(d);
	while ((de = readdir(d))) {
		char path[300], c[32] = "";
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(c, sizeof(c), f) && !strcmp(c, comm) && !n++)
			*tid = (pid_t)atoi(de->d_name);
		fclose(f);
	}
	closedir(d);
	return n;
}

/*
 * One thread of this process stopped, the others running: a helper
 * process traces it (ptrace stops only the task it is told to) until
 * eu_thaw.  It is stopped only where it sleeps in system call sysno,
 * holding no lock of ours (the progress thread waits in epoll_pwait2 so):
 * stopped elsewhere it is let go and tried again.
 */
struct eu_frozen {
	pid_t helper;
	int sock;
};

/* 0 with tid stopped, or -1 where this machine refuses the tracing. */
static inline int eu_freeze(struct eu_frozen *z, pid_t tid, long sysno)
{
	int sv[2];
	char c = 0;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	z->helper = fork();
	CHECK(z->helper >= 0);
	if (z->helper == 0) {
		int frozen = 0;

		close(sv[0]);
		(void)!read(sv[1], &c, 1); /* allowed to trace, below */
		if (ptrace(PTRACE_SEIZE, tid, NULL, NULL)) {
			(void)!write(sv[1], "n", 1);
			_exit(0);
		}
		for (int i = 0; i < 20000 && !frozen; i++) {
			char path[64], line[64] = "";
			int st;
			FILE *f;

			if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) ||
			    waitpid(tid, &st, __WALL) != tid)
				break;
			snprintf(path, sizeof(path), "/proc/%d/syscall", (int)tid);
			f = fopen(path, "r");
			frozen = f && fgets(line, sizeof(line), f) &&
				 atol(line) == sysno;
			if (f)
				fclose(f);
			if (!frozen) {
				ptrace(PTRACE_CONT, tid, NULL, NULL);
				usleep(100);
			}
		}
		(void)!write(sv[1], frozen ? "y" : "n", 1);
		if (frozen)
			(void)!read(sv[1], &c, 1); /* eu_thaw */
		ptrace(PTRACE_DETACH, tid, NULL, NULL);
		_exit(0);
	}
	close(sv[1]);
	z->sock = sv[0];
	/* Where Yama restricts tracing to descendants, allow our helper. */
	(void)prctl(PR_SET_PTRACER, (unsigned long)z->helper, 0, 0, 0);
	xsend(z->sock, "g", 1);
	xrecv(z->sock, &c, 1);
	if (c != 'y') {
		close(z->sock);
		CHECK_EQ(waitpid(z->helper, NULL, 0), z->helper);
		return -1;
	}
	return 0;
}

static inline void eu_thaw(struct eu_frozen *z)
{
	xsend(z->sock, "t", 1);
	close(z->sock);
	CHECK_EQ(waitpid(z->helper, NULL, 0), z->helper);
}

/* The peer process's half of the out-of-band exchange on socket s: a new
 * RC endpoint e, its info sent first, the test's received, e connected. */
static inline void eu_exchange_as_peer(struct ep *e, int s)
{
	struct ep_info mine, theirs;

	ep_open(e, NULL, IBV_QPT_RC);
	mine = ep_info(e);
	xsend(s, &mine, sizeof(mine));
	xrecv(s, &theirs, sizeof(theirs));
	ep_connect(e, theirs.qpn);
}

/* The test's half: a new RC endpoint e, the peer's info received, ours
 * sent.  Connecting is left to the caller (with its retry settings). */
static inline struct ep_info eu_exchange_as_test(struct ep *e, int s)
{
	struct ep_info mine, theirs;

	ep_open(e, NULL, IBV_QPT_RC);
	xrecv(s, &theirs, sizeof(theirs));
	mine = ep_info(e);
	xsend(s, &mine, sizeof(mine));
	return theirs;
}

#endif

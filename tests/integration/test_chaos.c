/* SPDX-License-Identifier: MIT */
/*
 * SIGKILL chaos (issue 7, "What must show"): a few hundred processes that
 * hold PDs, MRs, CQs, QPs (RC pairs with traffic, UD), SRQs, AHs, bound
 * memory windows of both types, DMs and DM MRs, imported contexts in
 * forked children, and RC connections to each other are killed at random
 * moments, mid-verb as often as not.  Afterwards the daemon is the same
 * process, holds no ufile, context or object, and exactly the descriptors
 * it held before; and it still serves a new client.
 *
 * A worker never stops on its own: it is killed.  Any other end (a
 * crash, a verb that failed for no reason) fails the test.  Traffic with
 * a peer that was killed may fail; that is what the peer's death means.
 */
#include "raw_util.h"
#include "engine_util.h"

#include <sys/prctl.h>

#define KILLS 300
#define BUF 65536

static unsigned wseed;
static unsigned wr(unsigned n) { return n ? (unsigned)rand_r(&wseed) % n : 0; }

/* A verb that must not fail: the worker's exit code names the step. */
#define MUST(x, step)                                                          \
	do {                                                                   \
		if (!(x))                                                      \
			_exit(10 + (step));                                    \
	} while (0)

struct wk {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *buf;
};

static void wk_open(struct wk *w)
{
	w->ctx = eu_open();
	MUST((w->pd = ibv_alloc_pd(w->ctx)), 0);
	MUST((w->cq = ibv_create_cq(w->ctx, 512, NULL, NULL, 0)), 1);
	MUST(posix_memalign((void **)&w->buf, 4096, BUF) == 0, 2);
	memset(w->buf, 0, BUF);
	MUST((w->mr = ibv_reg_mr(w->pd, w->buf, BUF,
				 EU_ACCESS | IBV_ACCESS_MW_BIND)), 3);
}

static struct ibv_qp *wk_qp(struct wk *w, enum ibv_qp_type t,
			    struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = w->cq;
	ia.srq = srq;
	ia.qp_type = t;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 64;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(w->pd, &ia);
	MUST(qp, 4);
	return qp;
}

/* RESET -> RTS towards dqpn (RC), or to RTS (UD); 0 or an errno. */
static int wk_connect(struct ibv_qp *qp, uint32_t dqpn)
{
	struct ep e = { .qp = qp };

	/* engine_util's ep_connect CHECKs: fine, it cannot fail here. */
	ep_connect(&e, dqpn);
	return 0;
}

static void post_write(struct ibv_qp *qp, struct wk *w, uint64_t raddr,
		       uint32_t rkey, uint32_t len, int signaled)
{
	struct ibv_sge s = { (uintptr_t)w->buf, len, w->mr->lkey };
	struct ibv_send_wr wrq, *bad;

	memset(&wrq, 0, sizeof(wrq));
	wrq.sg_list = &s;
	wrq.num_sge = 1;
	wrq.opcode = wr(3) ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	wrq.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	wrq.wr.rdma.remote_addr = raddr;
	wrq.wr.rdma.rkey = rkey;
	ibv_post_send(qp, &wrq, &bad); /* may fail once the QP is in error */
}

static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];

	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
}

/* Binds a window of each type on qp (connected) over w's buffer. */
static void bind_windows(struct wk *w, struct ibv_qp *qp)
{
	struct ibv_mw *m1 = ibv_alloc_mw(w->pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = ibv_alloc_mw(w->pd, IBV_MW_TYPE_2);
	struct ibv_mw_bind b;
	struct ibv_send_wr wrq, *bad;

	MUST(m1 && m2, 5);
	memset(&b, 0, sizeof(b));
	b.send_flags = IBV_SEND_SIGNALED;
	b.bind_info.mr = w->mr;
	b.bind_info.addr = (uintptr_t)w->buf;
	b.bind_info.length = 4096;
	b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_LOCAL_WRITE;
	ibv_bind_mw(qp, m1, &b);
	memset(&wrq, 0, sizeof(wrq));
	wrq.opcode = IBV_WR_BIND_MW;
	wrq.send_flags = IBV_SEND_SIGNALED;
	wrq.bind_mw.mw = m2;
	wrq.bind_mw.rkey = ibv_inc_rkey(m2->rkey);
	wrq.bind_mw.bind_info = b.bind_info;
	ibv_post_send(qp, &wrq, &bad);
	if (wr(2)) {
		drain(w->cq);
		ibv_dealloc_mw(m1);
	}
}

/* ---- a worker on its own: everything, in one or two contexts ----------- */

static void alone(void)
{
	for (;;) {
		struct wk w;
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
		struct ibv_alloc_dm_attr da = { .length = 8192 };
		struct ibv_ah_attr aa;
		struct ibv_qp *a, *b, *ud, *sq;
		struct ibv_srq *srq;
		struct ibv_dm *dm;
		struct ibv_mr *dmr;
		struct ibv_ah *ah;

		wk_open(&w);
		MUST((srq = ibv_create_srq(w.pd, &sa)), 6);
		a = wk_qp(&w, IBV_QPT_RC, NULL);
		b = wk_qp(&w, IBV_QPT_RC, srq);
		ud = wk_qp(&w, IBV_QPT_UD, NULL);
		sq = wk_qp(&w, IBV_QPT_UC, srq);
		wk_connect(a, b->qp_num);
		wk_connect(b, a->qp_num);
		wk_connect(ud, 0);
		MUST((dm = ibv_alloc_dm(w.ctx, &da)), 7);
		MUST((dmr = ibv_reg_dm_mr(w.pd, dm, 0, 8192,
					  IBV_ACCESS_ZERO_BASED |
						  IBV_ACCESS_LOCAL_WRITE |
						  IBV_ACCESS_REMOTE_WRITE)),
		     8);
		memset(&aa, 0, sizeof(aa));
		aa.is_global = 1;
		aa.port_num = 1;
		aa.grh.hop_limit = 1;
		MUST((ah = ibv_create_ah(w.pd, &aa)), 9);
		bind_windows(&w, b);
		for (int i = 0; i < 20; i++) {
			post_write(a, &w, (uintptr_t)w.buf + 4096 * wr(8),
				   w.mr->rkey, 1 + wr(4096), i % 4 == 0);
			post_write(a, &w, 512, dmr->rkey, 64, 0);
			drain(w.cq);
		}
		/* A forked child imports the context and dies with us. */
		if (wr(4) == 0) {
			int fd = dup(w.ctx->cmd_fd);
			pid_t me = getpid(), kid = fork();

			if (kid == 0) {
				struct ibv_context *c2;

				/* Dies with us, even if we die right now. */
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				if (getppid() != me)
					_exit(0);
				c2 = ibv_import_device(fd);
				if (c2) {
					struct ibv_pd *p2 = ibv_alloc_pd(c2);

					(void)p2;
				}
				pause();
				_exit(0);
			}
			close(fd);
		}
		/* Sometimes tidy, sometimes not: teardown does the rest. */
		switch (wr(3)) {
		case 0:
			ibv_destroy_qp(sq);
			ibv_destroy_qp(ud);
			ibv_destroy_ah(ah);
			ibv_dereg_mr(dmr);
			ibv_free_dm(dm);
			break;
		case 1:
			ibv_close_device(w.ctx);
			break;
		default:
			break; /* left for the kill */
		}
	}
}

/* ---- two workers connected to each other -------------------------------- */

static void paired(int s, int first)
{
	struct wk w;
	struct ibv_qp *qp;
	struct ep_info mine, theirs;
	struct pollfd p = { .fd = s, .events = POLLIN };

	wk_open(&w);
	qp = wk_qp(&w, IBV_QPT_RC, NULL);
	mine = (struct ep_info){ .qpn = qp->qp_num, .rkey = w.mr->rkey,
				 .addr = (uintptr_t)w.buf };
	if (write(s, &mine, sizeof(mine)) != sizeof(mine) ||
	    poll(&p, 1, 5000) != 1 ||
	    read(s, &theirs, sizeof(theirs)) != sizeof(theirs))
		alone(); /* the peer died first: carry on alone */
	wk_connect(qp, theirs.qpn);
	if (first)
		bind_windows(&w, qp);
	for (unsigned i = 0;; i++) {
		struct ibv_sge sg = { (uintptr_t)w.buf + 8192, 256, w.mr->lkey };
		struct ibv_recv_wr rw = { .sg_list = &sg, .num_sge = 1 }, *bad;

		ibv_post_recv(qp, &rw, &bad);
		post_write(qp, &w, theirs.addr + 4096 * wr(8), theirs.rkey,
			   1 + wr(16384), i % 8 == 0);
		if (i % 16 == 0) {
			struct ibv_send_wr sw, *sbad;

			memset(&sw, 0, sizeof(sw));
			sw.sg_list = &sg;
			sw.num_sge = 1;
			sw.opcode = IBV_WR_SEND;
			ibv_post_send(qp, &sw, &sbad);
		}
		drain(w.cq);
		if (i % 64 == 63)
			usleep(100);
	}
}

/* ---- the test ------------------------------------------------------------ */

static pid_t spawn(void (*fn)(int, int), int s, int first, unsigned seed)
{
	pid_t kid = fork();

	CHECK(kid >= 0);
	if (kid == 0) {
		wseed = seed;
		fn(s, first);
		_exit(99);
	}
	return kid;
}

static void run_alone(int s, int first)
{
	(void)s;
	(void)first;
	alone();
}

static void kill_and_check(pid_t kid)
{
	int st;

	kill(kid, SIGKILL);
	st = sv_test_wait_child(kid);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		sv_test_fail(__FILE__, __LINE__, "worker %d ended by itself: %s %d",
			     (int)kid, WIFSIGNALED(st) ? "signal" : "exit",
			     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

SV_TEST_T(sigkill_chaos, 600)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	unsigned seed = (unsigned)getpid() * 2246822519u;
	int kills = 0, rounds = 0;
	unsigned long objs = 0, max_objs = 0;

	printf("chaos: seed %u\n", seed);
	while (kills < KILLS) {
		pid_t a, b;
		int sv[2];

		rounds++;
		if (rand_r(&seed) % 2) {
			/* A connected pair; one dies first, the other later. */
			CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC,
					    0, sv),
				 0);
			a = spawn(paired, sv[0], 1, rand_r(&seed));
			b = spawn(paired, sv[1], 0, rand_r(&seed));
			close(sv[0]);
			close(sv[1]);
		} else {
			a = spawn(run_alone, -1, 0, rand_r(&seed));
			b = spawn(run_alone, -1, 0, rand_r(&seed));
		}
		sv_test_sleep_ms(rand_r(&seed) % 40);
		{
			/* What the kill takes down, for the record. */
			struct sv_status_rep st;

			CHECK_EQ(sv_test_status(&st), 0);
			objs += st.objects;
			if (st.objects > max_objs)
				max_objs = st.objects;
		}
		kill_and_check(a);
		sv_test_sleep_ms(rand_r(&seed) % 20);
		kill_and_check(b);
		kills += 2;
	}
	printf("chaos: %d processes killed in %d rounds; objects alive at the "
	       "first kill of a round: %.1f on average, %lu at most\n",
	       kills, rounds, (double)objs / rounds, max_objs);
	fflush(stdout);
	check_healthy(pid, &base);
}

SV_TEST_MAIN()

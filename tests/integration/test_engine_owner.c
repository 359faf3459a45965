/* SPDX-License-Identifier: MIT */
/*
 * An MR owner without a QP (the ibv_import_mr use: one process registers
 * memory and hands the cmd_fd to another that does the networking).  Its
 * engine must serve the other process's accesses anyway -- imported lkey
 * in SEND / RECV / READ-result, its rkey under RDMA WRITE, READ and
 * atomics -- with CMA and without (SOFTVERBS_NO_CMA=1 in the networker,
 * so the owner's engine does every access; atomics go to it always).
 * The data is checked in the owner.  The owner killed: error completions
 * in the networker, never a hang.  A reg/dereg loop attaches once.  The
 * owner closing its context while another process holds the cmd_fd keeps
 * serving its MR; the ufile's end detaches: the process is back to one
 * thread.
 */
#include "engine_util.h"

#include <dirent.h>
#include <stdlib.h>

#define OBUF 65536
#define SEND_OFF 0	/* owner's pattern 1, gathered by a SEND */
#define RECV_OFF 8192	/* a RECV scatters pattern 2 here */
#define READ_OFF 16384	/* a READ's result (pattern 3) lands here */
#define WRITE_OFF 24576 /* an RDMA WRITE puts pattern 4 here */
#define ATOM_OFF 32768	/* the atomic word; CMP_SWP's result at +8 */
#define ATOM_INIT 5u
#define ADDS 100u

struct minfo {
	uint32_t pd_handle, mr_handle, lkey, rkey;
	uint64_t addr;
};

static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	CHECK(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The engine detaches asynchronously when the daemon destroys a ufile
 * (its MRs outlive our context until then): wait for the thread count. */
static void wait_threads(int want)
{
	for (int i = 0; i < 20000 && threads() != want; i++)
		usleep(1000);
	CHECK_EQ(threads(), want);
}

/* What the networker needs to import pd and mr. */
static struct minfo minfo_of(const struct ibv_pd *pd, const struct ibv_mr *mr)
{
	return (struct minfo){ .pd_handle = pd->handle,
			       .mr_handle = mr->handle,
			       .lkey = mr->lkey,
			       .rkey = mr->rkey,
			       .addr = (uintptr_t)mr->addr };
}

/* ---------------------------------------------------- the networker -- */

struct net {
	struct ibv_context *ctx;
	struct ibv_pd *pd;	/* the owner's, imported */
	struct ibv_mr *omr;	/* the owner's, imported */
	struct ibv_mr *mymr;	/* ours */
	uint8_t *mine;
	struct ep a, b;		/* connected to each other */
	struct minfo mi;
};

static void pair_new(struct net *n)
{
	eu_pair_new(&n->a, &n->b, n->ctx, n->pd, 16, 8, 1);
}

static void pair_free(struct net *n)
{
	eu_pair_free(&n->a, &n->b);
}

/* Takes the owner's context from socket s and sets up a connected pair on
 * its PD.  no_cma is set before our first verbs call. */
static void net_open(struct net *n, int s, int no_cma)
{
	memset(n, 0, sizeof(*n));
	if (no_cma)
		setenv("SOFTVERBS_NO_CMA", "1", 1);
	else
		unsetenv("SOFTVERBS_NO_CMA");
	n->ctx = sv_test_recv_context(s, &n->mi, sizeof(n->mi));
	n->pd = ibv_import_pd(n->ctx, n->mi.pd_handle);
	CHECK(n->pd);
	n->omr = ibv_import_mr(n->pd, n->mi.mr_handle);
	CHECK(n->omr);
	CHECK_EQ(n->omr->lkey, n->mi.lkey);
	CHECK_EQ(n->omr->rkey, n->mi.rkey);
	CHECK(posix_memalign((void **)&n->mine, 4096, OBUF) == 0);
	memset(n->mine, 0, OBUF);
	n->mymr = ibv_reg_mr(n->pd, n->mine, OBUF, EU_ACCESS);
	CHECK(n->mymr);
	pair_new(n);
}

static void net_close(struct net *n)
{
	pair_free(n);
	CHECK_EQ(ibv_dereg_mr(n->mymr), 0);
	ibv_unimport_mr(n->omr); /* the owner's MR stays */
	ibv_unimport_pd(n->pd);
	CHECK_EQ(ibv_close_device(n->ctx), 0);
	free(n->mine);
}

/* Every kind of access to the owner's memory; the owner checks the bytes
 * afterwards.  Exits 0 when every completion was a success. */
static void networker(int s, int no_cma)
{
	struct net n;
	struct ibv_wc wc;
	uint8_t want[8192];
	uint64_t oaddr, v;
	char go;

	net_open(&n, s, no_cma);
	oaddr = n.mi.addr;

	/* SEND gathered from the imported lkey. */
	eu_pattern(want, sizeof(want), 1);
	eu_recv_keyed(&n.b, 1, (uintptr_t)n.mine, 8192, n.mymr->lkey);
	eu_post_keyed(&n.a, 2, IBV_WR_SEND, oaddr + SEND_OFF + 100, 5000,
		      n.omr->lkey, 0, 0, 0, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(n.b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 5000);
	CHECK(!memcmp(n.mine, want + 100, 5000));

	/* RECV scattered into the imported lkey. */
	eu_pattern(n.mine + 8192, 6000, 2);
	eu_recv_keyed(&n.b, 3, oaddr + RECV_OFF, 6000, n.omr->lkey);
	eu_post_keyed(&n.a, 4, IBV_WR_SEND, (uintptr_t)n.mine + 8192, 6000,
		      n.mymr->lkey, 0, 0, 0, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(n.b.cq, &wc, IBV_WC_SUCCESS);

	/* RDMA READ of our memory whose result lands in the imported lkey. */
	eu_pattern(n.mine + 16384, 3000, 3);
	eu_post_keyed(&n.a, 5, IBV_WR_RDMA_READ, oaddr + READ_OFF, 3000,
		      n.omr->lkey, (uintptr_t)n.mine + 16384, n.mymr->rkey, 0,
		      0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);

	/* RDMA WRITE to the owner's rkey. */
	eu_pattern(n.mine + 24576, 7000, 4);
	eu_post_keyed(&n.a, 6, IBV_WR_RDMA_WRITE, (uintptr_t)n.mine + 24576,
		      7000, n.mymr->lkey, oaddr + WRITE_OFF, n.mi.rkey, 0, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);

	/* RDMA READ from the owner's rkey. */
	memset(n.mine + 40960, 0, 4000);
	eu_post_keyed(&n.a, 7, IBV_WR_RDMA_READ, (uintptr_t)n.mine + 40960,
		      4000, n.mymr->lkey, oaddr + SEND_OFF + 200, n.mi.rkey, 0,
		      0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!memcmp(n.mine + 40960, want + 200, 4000));

	/* Atomics on the owner's word: fetch-and-add, each old value seen. */
	for (uint32_t i = 0; i < ADDS; i++) {
		eu_post_keyed(&n.a, 8, IBV_WR_ATOMIC_FETCH_AND_ADD,
			      (uintptr_t)n.mine + 49152, 8, n.mymr->lkey,
			      oaddr + ATOM_OFF, n.mi.rkey, 3, 0);
		EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
		memcpy(&v, n.mine + 49152, 8);
		CHECK_EQ(v, (uint64_t)ATOM_INIT + 3ull * i);
	}
	/* Compare-and-swap whose old value lands in the imported lkey. */
	eu_post_keyed(&n.a, 9, IBV_WR_ATOMIC_CMP_AND_SWP, oaddr + ATOM_OFF + 8,
		      8, n.omr->lkey, oaddr + ATOM_OFF, n.mi.rkey,
		      ATOM_INIT + 3ull * ADDS, 777);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);

	xsend(s, "D", 1);
	xrecv(s, &go, 1); /* the owner checked its memory */
	net_close(&n);
	_exit(0);
}

static pid_t fork_networker(int s, int other, int no_cma)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		close(other);
		networker(s, no_cma);
	}
	return pid;
}

/* ------------------------------------------------------- the owner -- */

static void owner_serves(int no_cma)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct minfo mi;
	uint8_t *buf, want[8192];
	uint64_t v;
	pid_t net;
	int sv[2], st;
	char ack;

	sv_test_baseline(&base);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* Before our own first verbs call: the child starts clean. */
	net = fork_networker(sv[1], sv[0], no_cma);
	close(sv[1]);

	CHECK(posix_memalign((void **)&buf, 4096, OBUF) == 0);
	memset(buf, 0, OBUF);
	eu_pattern(buf + SEND_OFF, 8192, 1);
	v = ATOM_INIT;
	memcpy(buf + ATOM_OFF, &v, 8);
	ctx = eu_open();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	mr = ibv_reg_mr(pd, buf, OBUF, EU_ACCESS);
	CHECK(mr);
	/* No QP here, ever. */
	mi = minfo_of(pd, mr);
	CHECK_EQ(sv_test_send_fd(sv[0], ctx->cmd_fd, &mi, sizeof(mi)), 0);
	xrecv(sv[0], &ack, 1);
	CHECK_EQ(ack, 'D');

	eu_pattern(want, 6000, 2);
	CHECK(!memcmp(buf + RECV_OFF, want, 6000));
	eu_pattern(want, 3000, 3);
	CHECK(!memcmp(buf + READ_OFF, want, 3000));
	eu_pattern(want, 7000, 4);
	CHECK(!memcmp(buf + WRITE_OFF, want, 7000));
	memcpy(&v, buf + ATOM_OFF, 8);
	CHECK_EQ(v, 777u);
	memcpy(&v, buf + ATOM_OFF + 8, 8);
	CHECK_EQ(v, (uint64_t)ATOM_INIT + 3ull * ADDS);

	xsend(sv[0], "G", 1);
	st = sv_test_wait_child(net);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	close(sv[0]);
	free(buf);
	sv_test_wait_quiet(&base, 10000);
}

SV_TEST_T(owner_without_qp_with_cma, 60)
{
	owner_serves(0);
}

SV_TEST_T(owner_without_qp_without_cma, 60)
{
	owner_serves(1);
}

/* ------------------------------------------------- owner closed -- */

/* Imports the owner's MR, waits for the owner to close its context, then
 * writes, reads and adds to the owner's memory (without CMA: the owner's
 * engine does each access).  Closing our context ends the ufile. */
static void closed_user(int s)
{
	struct net n;
	struct ibv_wc wc;
	uint8_t want[8192];
	uint64_t v;
	char go;

	net_open(&n, s, 1);
	xsend(s, "I", 1);
	xrecv(s, &go, 1); /* the owner closed its context */

	eu_pattern(n.mine + 24576, 7000, 4);
	eu_post_keyed(&n.a, 1, IBV_WR_RDMA_WRITE, (uintptr_t)n.mine + 24576,
		      7000, n.mymr->lkey, n.mi.addr + WRITE_OFF, n.mi.rkey, 0,
		      0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	eu_pattern(want, sizeof(want), 1);
	memset(n.mine + 40960, 0, 4000);
	eu_post_keyed(&n.a, 2, IBV_WR_RDMA_READ, (uintptr_t)n.mine + 40960,
		      4000, n.mymr->lkey, n.mi.addr + SEND_OFF + 200, n.mi.rkey,
		      0, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!memcmp(n.mine + 40960, want + 200, 4000));
	eu_post_keyed(&n.a, 3, IBV_WR_ATOMIC_FETCH_AND_ADD,
		      (uintptr_t)n.mine + 49152, 8, n.mymr->lkey,
		      n.mi.addr + ATOM_OFF, n.mi.rkey, 3, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	memcpy(&v, n.mine + 49152, 8);
	CHECK_EQ(v, (uint64_t)ATOM_INIT);
	xsend(s, "D", 1);
	xrecv(s, &go, 1); /* the owner checked its memory */
	net_close(&n);
	_exit(0);
}

/* The owner closes its only context while another process holds the
 * ufile's cmd_fd: its MR lives on, as in the kernel, so its engine keeps
 * serving it until the ufile dies, then detaches. */
SV_TEST_T(owner_closed_ufile_lives, 60)
{
	struct sv_status_rep base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct minfo mi;
	uint8_t *buf, want[8192];
	uint64_t v;
	pid_t net;
	int sv[2], st, t0;
	char ack;

	sv_test_baseline(&base);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	net = fork();
	CHECK(net >= 0);
	if (net == 0) {
		close(sv[0]);
		closed_user(sv[1]);
	}
	close(sv[1]);

	CHECK(posix_memalign((void **)&buf, 4096, OBUF) == 0);
	memset(buf, 0, OBUF);
	eu_pattern(buf + SEND_OFF, 8192, 1);
	v = ATOM_INIT;
	memcpy(buf + ATOM_OFF, &v, 8);
	t0 = threads();
	ctx = eu_open();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	mr = ibv_reg_mr(pd, buf, OBUF, EU_ACCESS);
	CHECK(mr);
	CHECK_EQ(threads(), t0 + 1);
	mi = minfo_of(pd, mr);
	CHECK_EQ(sv_test_send_fd(sv[0], ctx->cmd_fd, &mi, sizeof(mi)), 0);
	xrecv(sv[0], &ack, 1);
	CHECK_EQ(ack, 'I');
	/* MR and PD left registered: they belong to the ufile now. */
	CHECK_EQ(ibv_close_device(ctx), 0);
	CHECK_EQ(threads(), t0 + 1); /* still serving */
	xsend(sv[0], "C", 1);
	xrecv(sv[0], &ack, 1);
	CHECK_EQ(ack, 'D');

	eu_pattern(want, 7000, 4);
	CHECK(!memcmp(buf + WRITE_OFF, want, 7000));
	memcpy(&v, buf + ATOM_OFF, 8);
	CHECK_EQ(v, (uint64_t)ATOM_INIT + 3);
	xsend(sv[0], "G", 1);
	st = sv_test_wait_child(net);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The child's close ended the ufile: nothing keeps our engine. */
	wait_threads(t0);
	close(sv[0]);
	free(buf);
	sv_test_wait_quiet(&base, 10000);
}

/* ---------------------------------------------------- owner killed -- */

/* Registers, hands the context over, then waits to be killed. */
static void owner_main(int s)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr;
	struct minfo mi;
	uint8_t *buf;

	CHECK(pd);
	CHECK(posix_memalign((void **)&buf, 4096, OBUF) == 0);
	memset(buf, 0, OBUF);
	mr = ibv_reg_mr(pd, buf, OBUF, EU_ACCESS);
	CHECK(mr);
	mi = minfo_of(pd, mr);
	CHECK_EQ(sv_test_send_fd(s, ctx->cmd_fd, &mi, sizeof(mi)), 0);
	for (;;)
		pause(); /* until SIGKILL */
}

/* Works with the owner alive, then (told the owner is dead) gets an
 * error completion for every kind of access. */
static void survivor(int s, int no_cma)
{
	struct net n;
	struct ibv_wc wc;
	char go;

	net_open(&n, s, no_cma);
	eu_post_keyed(&n.a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)n.mine,
		      8, n.mymr->lkey, n.mi.addr + ATOM_OFF, n.mi.rkey, 1, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	eu_recv_keyed(&n.b, 2, (uintptr_t)n.mine, 64, n.mymr->lkey);
	eu_post_keyed(&n.a, 3, IBV_WR_SEND, n.mi.addr, 64, n.omr->lkey, 0, 0, 0,
		      0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(n.b.cq, &wc, IBV_WC_SUCCESS);
	xsend(s, "R", 1);
	xrecv(s, &go, 1);

	eu_post_keyed(&n.a, 4, IBV_WR_SEND, n.mi.addr, 64, n.omr->lkey, 0, 0, 0,
		      0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_LOC_PROT_ERR);
	pair_free(&n);

	pair_new(&n);
	eu_post_keyed(&n.a, 5, IBV_WR_RDMA_WRITE, (uintptr_t)n.mine, 64,
		      n.mymr->lkey, n.mi.addr, n.mi.rkey, 0, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_REM_OP_ERR);
	pair_free(&n);

	pair_new(&n);
	eu_post_keyed(&n.a, 6, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)n.mine,
		      8, n.mymr->lkey, n.mi.addr + ATOM_OFF, n.mi.rkey, 1, 0);
	EXPECT_WC(n.a.cq, &wc, IBV_WC_REM_OP_ERR);
	net_close(&n);
	_exit(0);
}

static void owner_killed(int no_cma)
{
	struct sv_status_rep base;
	struct minfo mi;
	int to[2], tn[2], fd, st;
	pid_t owner, net;
	char ack;

	sv_test_baseline(&base);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, to), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, tn), 0);
	net = fork();
	CHECK(net >= 0);
	if (net == 0) {
		close(to[0]);
		close(to[1]);
		close(tn[0]);
		survivor(tn[1], no_cma);
	}
	close(tn[1]);
	owner = fork();
	CHECK(owner >= 0);
	if (owner == 0) {
		close(to[0]);
		close(tn[0]);
		owner_main(to[1]);
	}
	close(to[1]);
	/* Relay the owner's context (we make no verbs call ourselves). */
	fd = sv_test_recv_fd(to[0], &mi, sizeof(mi));
	CHECK(fd >= 0);
	CHECK_EQ(sv_test_send_fd(tn[0], fd, &mi, sizeof(mi)), 0);
	close(fd);
	xrecv(tn[0], &ack, 1);
	CHECK_EQ(ack, 'R');
	CHECK_EQ(kill(owner, SIGKILL), 0);
	/* Dead before the survivor goes on (a signal is delivered when the
	 * target next runs: on a loaded machine that can be after the
	 * survivor's next WRITE), but not reaped before the survivor is
	 * done: a zombie is gone too. */
	{
		siginfo_t si;

		CHECK_EQ(waitid(P_PID, (id_t)owner, &si, WEXITED | WNOWAIT), 0);
	}
	xsend(tn[0], "G", 1);
	st = sv_test_wait_child(net);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st = sv_test_wait_child(owner);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	close(to[0]);
	close(tn[0]);
	sv_test_wait_quiet(&base, 10000);
}

SV_TEST_T(owner_killed_with_cma, 60)
{
	owner_killed(0);
}

SV_TEST_T(owner_killed_without_cma, 60)
{
	owner_killed(1);
}

/* ------------------------------------------------------ attach cost -- */

/* The first registration attaches the engine (a thread, one daemon
 * request); more registrations and deregistrations cost their own
 * request each and no more; closing the context detaches. */
SV_TEST(engine_attached_once)
{
	struct sv_status_rep base, s0, s1, s2;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint64_t per_status;
	char *buf;
	int t0;

	sv_test_baseline(&base);
	ctx = eu_open();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK(posix_memalign((void **)&buf, 4096, OBUF) == 0);
	t0 = threads();
	mr = ibv_reg_mr(pd, buf, OBUF, EU_ACCESS);
	CHECK(mr);
	CHECK_EQ(threads(), t0 + 1); /* the progress thread */
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(threads(), t0 + 1);

	CHECK_EQ(sv_test_status(&s0), 0);
	CHECK_EQ(sv_test_status(&s1), 0);
	per_status = s1.requests - s0.requests;
	for (int i = 0; i < 20; i++) {
		mr = ibv_reg_mr(pd, buf, OBUF,
				i & 1 ? IBV_ACCESS_LOCAL_WRITE |
						IBV_ACCESS_ON_DEMAND :
					EU_ACCESS);
		CHECK(mr);
		CHECK_EQ(ibv_dereg_mr(mr), 0);
	}
	CHECK_EQ(sv_test_status(&s2), 0);
	CHECK_EQ(s2.requests - s1.requests - per_status, 40u);
	CHECK_EQ(threads(), t0 + 1);

	/* A live MR left at close: the engine goes with the ufile. */
	mr = ibv_reg_mr(pd, buf, OBUF, EU_ACCESS);
	CHECK(mr);
	CHECK_EQ(ibv_close_device(ctx), 0);
	wait_threads(t0);
	free(buf);
	sv_test_wait_quiet(&base, 10000);
}

SV_TEST_MAIN()

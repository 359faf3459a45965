/* SPDX-License-Identifier: MIT */
/*
 * Memory owned by another process of the ufile: an imported MR's lkey in
 * our WQEs (gather, scatter, READ and atomic results) and the rkey of an
 * MR another process registered (WRITE, READ, atomics), with CMA and with
 * CMA forbidden (SOFTVERBS_NO_CMA=1: the owner's engine does the work).
 * Atomics always run in the owner: they stay atomic against the owner's
 * own CPU atomics.  The owner killed: error completions, never a hang.
 */
#include "engine_util.h"

#include <stdatomic.h>
#include <stdlib.h>

#define OBUF (128 * 1024)
#define ATOM_OFF 65536
#define OWNER_ADDS 2000000u
#define OUR_ADDS 300u

struct oinfo {
	uint32_t handle, lkey, rkey, pad;
	uint64_t addr;
};

struct cmd {
	uint32_t op, off, len, pad;
};

/* The owner: registers OBUF bytes on the parent's PD, keeps an engine
 * (a QP), answers commands until told to quit. */
static void owner_main(struct ibv_context *ctx, struct ibv_pd *pd, int s)
{
	uint8_t *buf;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr ia;
	struct oinfo oi;
	struct cmd c;

	CHECK(posix_memalign((void **)&buf, 4096, OBUF) == 0);
	eu_pattern(buf, OBUF, 1);
	memset(buf + ATOM_OFF, 0, 64);
	mr = ibv_reg_mr(pd, buf, OBUF, EU_ACCESS);
	CHECK(mr);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(cq);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia); /* our engine serves our memory */
	CHECK(qp);
	oi = (struct oinfo){ .handle = mr->handle, .lkey = mr->lkey,
			     .rkey = mr->rkey, .addr = (uintptr_t)buf };
	xsend(s, &oi, sizeof(oi));
	for (;;) {
		xrecv(s, &c, sizeof(c));
		if (c.op == 'r') {
			xsend(s, buf + c.off, c.len);
		} else if (c.op == 'a') {
			uint64_t *w = (uint64_t *)(void *)(buf + ATOM_OFF);

			for (uint32_t i = 0; i < OWNER_ADDS; i++)
				__atomic_fetch_add(w, 1, __ATOMIC_SEQ_CST);
			xsend(s, "A", 1);
		} else {
			break;
		}
	}
	/* Objects outlive their creator in the ufile: clean up. */
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	xsend(s, "Q", 1);
	_exit(0);
}

struct world {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ep a, b; /* connected, both on pd */
	uint8_t *mine;
	struct ibv_mr *mymr;
	struct ibv_mr *omr; /* the owner's, imported */
	struct oinfo oi;
	int s;
	pid_t owner;
};

static void pair_new(struct world *w)
{
	eu_pair_new(&w->a, &w->b, w->ctx, w->pd, 64, 32, 2);
}

static void pair_free(struct world *w)
{
	eu_pair_free(&w->a, &w->b);
}

static void world_open(struct world *w)
{
	int sv[2];

	memset(w, 0, sizeof(*w));
	w->ctx = eu_open();
	w->pd = ibv_alloc_pd(w->ctx);
	CHECK(w->pd);
	CHECK(posix_memalign((void **)&w->mine, 4096, OBUF) == 0);
	memset(w->mine, 0, OBUF);
	w->mymr = ibv_reg_mr(w->pd, w->mine, OBUF, EU_ACCESS);
	CHECK(w->mymr);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	w->owner = fork();
	CHECK(w->owner >= 0);
	if (w->owner == 0) {
		close(sv[0]);
		owner_main(w->ctx, w->pd, sv[1]);
	}
	close(sv[1]);
	w->s = sv[0];
	xrecv(w->s, &w->oi, sizeof(w->oi));
	w->omr = ibv_import_mr(w->pd, w->oi.handle);
	CHECK(w->omr);
	CHECK_EQ(w->omr->lkey, w->oi.lkey);
	pair_new(w);
}

static void world_close(struct world *w)
{
	struct cmd c = { .op = 'q' };
	int st;

	char ack;

	pair_free(w);
	CHECK_EQ(ibv_dereg_mr(w->omr), 0);
	CHECK_EQ(ibv_dereg_mr(w->mymr), 0);
	if (w->owner > 0) {
		xsend(w->s, &c, sizeof(c));
		xrecv(w->s, &ack, 1);
		CHECK_EQ(waitpid(w->owner, &st, 0), w->owner);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK_EQ(ibv_dealloc_pd(w->pd), 0);
	}
	/* (A killed owner's QP and CQ go with the ufile.) */
	CHECK_EQ(ibv_close_device(w->ctx), 0);
	close(w->s);
	free(w->mine);
}

/* The owner's bytes [off, off + len). */
static void owner_read(struct world *w, uint32_t off, uint32_t len, void *out)
{
	struct cmd c = { .op = 'r', .off = off, .len = len };
	size_t got = 0;

	xsend(w->s, &c, sizeof(c));
	while (got < len) {
		ssize_t n;

		{
			struct pollfd pfd = { .fd = w->s, .events = POLLIN };

			CHECK_EQ(poll(&pfd, 1, 20000), 1);
		}
		n = read(w->s, (char *)out + got, len - got);
		CHECK(n > 0);
		got += (size_t)n;
	}
}

/* CMP_SWP swaps in add + 1. */
static void post(struct ep *e, uint64_t id, enum ibv_wr_opcode op,
		 uint64_t laddr, uint32_t len, uint32_t lkey, uint64_t raddr,
		 uint32_t rkey, uint64_t add)
{
	eu_post_keyed(e, id, op, laddr, len, lkey, raddr, rkey, add, add + 1);
}

static void scenario(void)
{
	struct world w;
	struct ibv_wc wc;
	uint8_t *want = malloc(OBUF), *got = malloc(OBUF);
	uint64_t oaddr, v;

	CHECK(want && got);
	eu_pattern(want, OBUF, 1);
	world_open(&w);
	oaddr = w.oi.addr;

	/* 1. A SEND gathered from the imported lkey (several packets). */
	eu_recv_keyed(&w.b, 1, (uintptr_t)w.mine, 8192, w.mymr->lkey);
	post(&w.a, 2, IBV_WR_SEND, oaddr + 100, 5000, w.omr->lkey, 0, 0, 0);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(w.b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 5000);
	CHECK(!memcmp(w.mine, want + 100, 5000));

	/* 2. A receive scattered into the imported lkey. */
	eu_pattern(w.mine + 8192, 6000, 2);
	eu_recv_keyed(&w.b, 3, oaddr + 8192, 6000, w.omr->lkey);
	post(&w.a, 4, IBV_WR_SEND, (uintptr_t)w.mine + 8192, 6000,
	     w.mymr->lkey, 0, 0, 0);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(w.b.cq, &wc, IBV_WC_SUCCESS);
	owner_read(&w, 8192, 6000, got);
	CHECK(!memcmp(got, w.mine + 8192, 6000));

	/* 3. RDMA WRITE to the owner's rkey (our responder writes it). */
	eu_pattern(w.mine + 16384, 9000, 3);
	post(&w.a, 5, IBV_WR_RDMA_WRITE, (uintptr_t)w.mine + 16384, 9000,
	     w.mymr->lkey, oaddr + 16384, w.oi.rkey, 0);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_SUCCESS);
	owner_read(&w, 16384, 9000, got);
	CHECK(!memcmp(got, w.mine + 16384, 9000));

	/* 4. RDMA READ from the owner's rkey. */
	post(&w.a, 6, IBV_WR_RDMA_READ, (uintptr_t)w.mine + 32768, 7000,
	     w.mymr->lkey, oaddr + 40000, w.oi.rkey, 0);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!memcmp(w.mine + 32768, want + 40000, 7000));

	/* 5. A READ whose result lands in the imported lkey. */
	eu_pattern(w.mine + 49152, 3000, 4);
	post(&w.a, 7, IBV_WR_RDMA_READ, oaddr + 100000, 3000, w.omr->lkey,
	     (uintptr_t)w.mine + 49152, w.mymr->rkey, 0);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_SUCCESS);
	owner_read(&w, 100000, 3000, got);
	CHECK(!memcmp(got, w.mine + 49152, 3000));

	/* 6. Atomics on the owner's memory while the owner itself hammers
	 * the same word: no update is lost. */
	{
		struct cmd c = { .op = 'a' };
		char ack;

		xsend(w.s, &c, sizeof(c));
		for (uint32_t i = 0; i < OUR_ADDS; i++) {
			post(&w.a, 8, IBV_WR_ATOMIC_FETCH_AND_ADD,
			     (uintptr_t)w.mine + 60000, 8, w.mymr->lkey,
			     oaddr + ATOM_OFF, w.oi.rkey, 1000);
			EXPECT_WC(w.a.cq, &wc, IBV_WC_SUCCESS);
		}
		xrecv(w.s, &ack, 1);
		owner_read(&w, ATOM_OFF, 8, &v);
		CHECK_EQ(v, (uint64_t)OWNER_ADDS + 1000ull * OUR_ADDS);
	}
	/* Compare and swap: the result (the old value) into the imported
	 * lkey, the swap done in the owner. */
	post(&w.a, 9, IBV_WR_ATOMIC_CMP_AND_SWP, oaddr + ATOM_OFF + 16, 8,
	     w.omr->lkey, oaddr + ATOM_OFF, w.oi.rkey, v);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_SUCCESS);
	owner_read(&w, ATOM_OFF, 24, got);
	memcpy(&v, got, 8);
	CHECK_EQ(v, (uint64_t)OWNER_ADDS + 1000ull * OUR_ADDS + 1);
	memcpy(&v, got + 16, 8);
	CHECK_EQ(v, (uint64_t)OWNER_ADDS + 1000ull * OUR_ADDS);
	world_close(&w);
	free(want);
	free(got);
}

SV_TEST_T(owner_memory_with_cma, 120)
{
	unsetenv("SOFTVERBS_NO_CMA");
	scenario();
}

SV_TEST_T(owner_memory_without_cma, 120)
{
	setenv("SOFTVERBS_NO_CMA", "1", 1);
	scenario();
}

static void owner_killed(void)
{
	struct world w;
	struct ibv_wc wc;
	int st;

	world_open(&w);
	/* Working first (the link to the owner exists). */
	post(&w.a, 1, IBV_WR_RDMA_READ, (uintptr_t)w.mine, 64, w.mymr->lkey,
	     w.oi.addr, w.oi.rkey, 0);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_SUCCESS);
	kill(w.owner, SIGKILL);
	/* Dead, but not reaped on purpose: a zombie is gone too.  (Until
	 * its last thread is gone, a copy through a /proc/PID/mem file
	 * opened before can still land in the dying process's memory.) */
	{
		siginfo_t si;

		CHECK_EQ(waitid(P_PID, (id_t)w.owner, &si, WEXITED | WNOWAIT), 0);
	}
	post(&w.a, 2, IBV_WR_SEND, w.oi.addr, 64, w.omr->lkey, 0, 0, 0);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_LOC_PROT_ERR);
	pair_free(&w);

	pair_new(&w);
	post(&w.a, 3, IBV_WR_RDMA_WRITE, (uintptr_t)w.mine, 64, w.mymr->lkey,
	     w.oi.addr, w.oi.rkey, 0);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_REM_OP_ERR);
	pair_free(&w);

	pair_new(&w);
	post(&w.a, 4, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)w.mine, 8,
	     w.mymr->lkey, w.oi.addr + ATOM_OFF, w.oi.rkey, 1);
	EXPECT_WC(w.a.cq, &wc, IBV_WC_REM_OP_ERR);

	CHECK_EQ(waitpid(w.owner, &st, 0), w.owner);
	CHECK(WIFSIGNALED(st));
	w.owner = 0;
	world_close(&w);
}

SV_TEST_T(owner_killed_with_cma, 60)
{
	unsetenv("SOFTVERBS_NO_CMA");
	owner_killed();
}

SV_TEST_T(owner_killed_without_cma, 60)
{
	setenv("SOFTVERBS_NO_CMA", "1", 1);
	owner_killed();
}

SV_TEST_MAIN()

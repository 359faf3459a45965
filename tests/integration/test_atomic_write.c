/* SPDX-License-Identifier: MIT */
/*
 * IBTA 1.5 ATOMIC WRITE (issue 24 item 2), as the kernel's rxe gives it
 * (Linux 6.2; rdma-core's rxe provider for ibv_wr_atomic_write):
 *
 *  - ibv_query_device_ex advertises it (bit 40 of device_cap_flags_ex,
 *    the kernel's IB_UVERBS_DEVICE_ATOMIC_WRITE);
 *  - the two forms: ibv_wr_atomic_write (the 8 bytes copied at the call)
 *    and ibv_post_send with IBV_WR_ATOMIC_WRITE (the 8 bytes from the
 *    sg_list, read when the WQE executes, or inline), remote address and
 *    rkey in wr.rdma; exactly 8 bytes, RC only; the completion is
 *    IBV_WC_ATOMIC_WRITE with byte_len 8, and it lands after what was
 *    posted before it;
 *  - the responder's checks: remote WRITE on the QP and on the key, an
 *    aligned address (IBV_WC_REM_INV_REQ_ERR), the key's range
 *    (IBV_WC_REM_ACCESS_ERR), the local SGE's lkey (IBV_WC_LOC_PROT_ERR);
 *  - the 8 bytes land as one unit: a reader thread in the target's process
 *    never sees a torn value while thousands of writes of distinct
 *    patterns land;
 *  - between two hosts (network namespaces, root): opcode 0x1D with a RETH
 *    and the 8 bytes on the wire, answered by an RDMA READ RESPONSE ONLY
 *    of no data, as tshark reads them; duplicated and reordered packets
 *    (SOFTVERBS_FAULT) never store a value twice.
 *
 * Every case runs on both paths: directly executed here, and with
 * SOFTVERBS_DIRECT=0 as packets (test_atomic_write_packets).
 */
/* Both helpers have a post_recv (this file uses neither). */
#define post_recv eu_post_recv_unused
#include "engine_util.h"
#undef post_recv
#include "wire_util.h"

#include <pthread.h>

/* The kernel's IB_UVERBS_DEVICE_ATOMIC_WRITE: rdma-core v44's headers
 * have no name for it. */
#define AW_DEVICE_CAP (1ULL << 40)

#define AW_OPS                                                                \
	(IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_RDMA_WRITE |            \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND)

/* Eight bytes that are all b: a torn mix of two of them is not. */
static uint64_t pat8(uint8_t b)
{
	return 0x0101010101010101ull * b;
}

/* e on ctx (NULL: a new context) with an RC QP made by ibv_create_qp_ex
 * with the ATOMIC WRITE op (and the others the cases use); its buffer's
 * MR has mr_access. */
static void aw_open(struct ep *e, struct ibv_context *ctx, unsigned mr_access)
{
	struct ibv_qp_init_attr_ex a;

	memset(e, 0, sizeof(*e));
	e->ctx = ctx ? ctx : eu_open();
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 256, NULL, NULL, 0);
	CHECK(e->pd && e->cq);
	CHECK_EQ(posix_memalign((void **)&e->buf, 4096, EP_BUF), 0);
	memset(e->buf, 0, EP_BUF);
	e->mr = ibv_reg_mr(e->pd, e->buf, EP_BUF, mr_access);
	CHECK(e->mr);
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = e->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 64;
	a.cap.max_send_sge = a.cap.max_recv_sge = 4;
	a.cap.max_inline_data = 64;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.pd = e->pd;
	a.send_ops_flags = AW_OPS;
	e->qp = ibv_create_qp_ex(e->ctx, &a);
	CHECK(e->qp);
	CHECK(ibv_qp_to_qp_ex(e->qp));
}

/* Two connected endpoints in this process: a the initiator, b the target
 * whose MR has mr_access. */
static void aw_pair(struct ep *a, struct ep *b, unsigned mr_access)
{
	aw_open(a, NULL, EU_ACCESS);
	aw_open(b, a->ctx, mr_access);
	ep_connect(a, b->qp->qp_num);
	ep_connect(b, a->qp->qp_num);
}

static void aw_pair_close(struct ep *a, struct ep *b)
{
	struct ibv_context *ctx = a->ctx;

	ep_close(a);
	ep_close(b);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* ibv_wr_atomic_write of v to raddr/rkey, signaled; the batch's answer. */
static int wr_aw(struct ep *e, uint64_t id, uint64_t raddr, uint32_t rkey,
		 uint64_t v)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(e->qp);

	ibv_wr_start(qx);
	qx->wr_id = id;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qx, rkey, raddr, &v);
	v = ~v; /* copied at the call: this must not be what lands */
	return ibv_wr_complete(qx);
}

/* ibv_post_send of IBV_WR_ATOMIC_WRITE with the SGEs given. */
static int post_aw(struct ep *e, uint64_t id, struct ibv_sge *sge, int n,
		   unsigned flags, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = sge;
	wr.num_sge = n;
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED | flags;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

/* One successful ATOMIC WRITE completion of id. */
static void expect_aw_done(struct ep *e, uint64_t id)
{
	struct ibv_wc wc;

	EXPECT_WC(e->cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, id);
	CHECK_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
	CHECK_EQ(wc.byte_len, 8);
	CHECK_EQ(wc.qp_num, e->qp->qp_num);
}

static uint64_t at(const struct ep *e, size_t off)
{
	uint64_t v;

	memcpy(&v, e->buf + off, 8);
	return v;
}

/* ------------------------------------------------------- one host -- */

SV_TEST(device_advertises_it)
{
	struct ibv_context *ctx = eu_open();
	struct ibv_device_attr_ex ax;

	memset(&ax, 0, sizeof(ax));
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &ax), 0);
	CHECK(ax.device_cap_flags_ex & AW_DEVICE_CAP);
	/* The classic flags are still there below it. */
	CHECK_EQ(ax.device_cap_flags_ex & 0xffffffffull,
		 (uint64_t)(unsigned)ax.orig_attr.device_cap_flags);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* Both forms land their 8 bytes there and nowhere else, complete as
 * IBV_WC_ATOMIC_WRITE, and what the caller holds after the call is not
 * what travels. */
SV_TEST(both_forms)
{
	struct ep a, b;
	struct ibv_sge sge[2];
	uint64_t v = 0x0123456789abcdefull, inl = pat8(0x5a);
	uint64_t base;

	aw_pair(&a, &b, EU_ACCESS);
	base = (uintptr_t)b.buf;
	memset(b.buf, 0xee, 256);

	/* ibv_wr_atomic_write */
	CHECK_EQ(wr_aw(&a, 1, base + 64, b.mr->rkey, v), 0);
	expect_aw_done(&a, 1);
	CHECK_EQ(at(&b, 64), v);
	CHECK_EQ(at(&b, 56), pat8(0xee));
	CHECK_EQ(at(&b, 72), pat8(0xee));

	/* ibv_post_send: one SGE of 8 in our MR. */
	memcpy(a.buf, "ATOMIC!!", 8);
	sge[0] = (struct ibv_sge){ (uintptr_t)a.buf, 8, a.mr->lkey };
	CHECK_EQ(post_aw(&a, 2, sge, 1, 0, base + 128, b.mr->rkey), 0);
	expect_aw_done(&a, 2);
	CHECK(!memcmp(b.buf + 128, "ATOMIC!!", 8));

	/* Two SGEs of 3 and 5: gathered in order. */
	memcpy(a.buf + 100, "abc", 3);
	memcpy(a.buf + 200, "defgh", 5);
	sge[0] = (struct ibv_sge){ (uintptr_t)a.buf + 100, 3, a.mr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)a.buf + 200, 5, a.mr->lkey };
	CHECK_EQ(post_aw(&a, 3, sge, 2, 0, base + 136, b.mr->rkey), 0);
	expect_aw_done(&a, 3);
	CHECK(!memcmp(b.buf + 136, "abcdefgh", 8));

	/* Inline, from memory no MR covers. */
	sge[0] = (struct ibv_sge){ (uintptr_t)&inl, 8, 0 };
	CHECK_EQ(post_aw(&a, 4, sge, 1, IBV_SEND_INLINE, base + 144,
			 b.mr->rkey), 0);
	inl = 0;
	expect_aw_done(&a, 4);
	CHECK_EQ(at(&b, 144), pat8(0x5a));

	/* Not 8 bytes: refused at post, nothing queued. */
	sge[0] = (struct ibv_sge){ (uintptr_t)a.buf, 16, a.mr->lkey };
	CHECK_EQ(post_aw(&a, 5, sge, 1, 0, base, b.mr->rkey), EINVAL);
	sge[0].length = 4;
	CHECK_EQ(post_aw(&a, 5, sge, 1, 0, base, b.mr->rkey), EINVAL);
	CHECK_EQ(post_aw(&a, 5, sge, 0, 0, base, b.mr->rkey), EINVAL);
	/* The bytes come with ibv_wr_atomic_write: an SGE after it spoils
	 * the batch. */
	{
		struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(a.qp);

		ibv_wr_start(qx);
		ibv_wr_atomic_write(qx, b.mr->rkey, base, &v);
		ibv_wr_set_sge(qx, a.mr->lkey, (uintptr_t)a.buf, 8);
		CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	}
	CHECK_EQ(ibv_poll_cq(a.cq, 1, &(struct ibv_wc){ 0 }), 0);
	aw_pair_close(&a, &b);
}

/* It lands after what was posted before it: a reader that sees the flag
 * sees the data (rxe: "after all prior operations have completed"). */
SV_TEST(ordered_after_writes)
{
	struct ep a, b;
	struct ibv_qp_ex *qx;
	uint64_t base, flag;

	aw_pair(&a, &b, EU_ACCESS);
	base = (uintptr_t)b.buf;
	qx = ibv_qp_to_qp_ex(a.qp);
	for (uint32_t round = 1; round <= 20; round++) {
		memset(a.buf, (int)round, 16384);
		ibv_wr_start(qx);
		qx->wr_id = round;
		qx->wr_flags = 0;
		ibv_wr_rdma_write(qx, b.mr->rkey, base + 4096);
		ibv_wr_set_sge(qx, a.mr->lkey, (uintptr_t)a.buf, 16384);
		qx->wr_flags = IBV_SEND_SIGNALED;
		flag = pat8((uint8_t)round);
		ibv_wr_atomic_write(qx, b.mr->rkey, base, &flag);
		CHECK_EQ(ibv_wr_complete(qx), 0);
		expect_aw_done(&a, round);
		CHECK_EQ(at(&b, 0), pat8((uint8_t)round));
		for (size_t i = 0; i < 16384; i += 512)
			CHECK_EQ((uint8_t)b.buf[4096 + i], round);
	}
	aw_pair_close(&a, &b);
}

enum fault {
	F_MISALIGNED, F_RKEY, F_RANGE, F_MR_ACCESS, F_QP_ACCESS, F_LKEY,
	F_NFAULTS
};

/* Each refusal, on a pair of its own (the error moves the QPs to ERR):
 * the requester's status, the target's memory untouched, and a refusal
 * of the responder's (not our lkey) leaves the target QP in ERR too. */
SV_TEST(refusals)
{
	static const struct {
		const char *what;
		enum ibv_wc_status st;
	} want[F_NFAULTS] = {
		[F_MISALIGNED] = { "misaligned", IBV_WC_REM_INV_REQ_ERR },
		[F_RKEY] = { "bad rkey", IBV_WC_REM_ACCESS_ERR },
		[F_RANGE] = { "outside the MR", IBV_WC_REM_ACCESS_ERR },
		[F_MR_ACCESS] = { "MR without remote WRITE",
				  IBV_WC_REM_ACCESS_ERR },
		[F_QP_ACCESS] = { "QP without remote WRITE",
				  IBV_WC_REM_ACCESS_ERR },
		[F_LKEY] = { "bad lkey", IBV_WC_LOC_PROT_ERR },
	};

	for (int f = 0; f < F_NFAULTS; f++) {
		struct ep a, b;
		struct ibv_sge sge;
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;
		struct ibv_wc wc;
		unsigned mr_access = f == F_MR_ACCESS ?
					     IBV_ACCESS_LOCAL_WRITE |
						     IBV_ACCESS_REMOTE_READ |
						     IBV_ACCESS_REMOTE_ATOMIC :
					     EU_ACCESS;
		uint64_t raddr, v = pat8(0x77);
		uint32_t rkey;
		int err;

		aw_pair(&a, &b, mr_access);
		raddr = (uintptr_t)b.buf + 256;
		rkey = b.mr->rkey;
		if (f == F_MISALIGNED)
			raddr += 4;
		if (f == F_RKEY)
			rkey ^= 0x80;
		if (f == F_RANGE)
			raddr = (uintptr_t)b.buf + EP_BUF;
		if (f == F_QP_ACCESS) {
			memset(&qa, 0, sizeof(qa));
			qa.qp_access_flags = IBV_ACCESS_REMOTE_READ |
					     IBV_ACCESS_REMOTE_ATOMIC;
			CHECK_EQ(ibv_modify_qp(b.qp, &qa, IBV_QP_ACCESS_FLAGS), 0);
		}
		if (f == F_LKEY) {
			sge = (struct ibv_sge){ (uintptr_t)a.buf, 8,
						a.mr->lkey ^ 0x80 };
			err = post_aw(&a, 9, &sge, 1, 0, raddr, rkey);
		} else {
			err = wr_aw(&a, 9, raddr, rkey, v);
		}
		CHECK_EQ(err, 0);
		CHECK(poll1(a.cq, &wc, 10000));
		if (wc.status != want[f].st)
			sv_test_fail(__FILE__, __LINE__, "%s: %s, wanted %s",
				     want[f].what, ibv_wc_status_str(wc.status),
				     ibv_wc_status_str(want[f].st));
		CHECK_EQ(wc.wr_id, 9);
		for (size_t i = 0; i < 512; i += 8)
			CHECK_EQ(at(&b, i), 0);
		CHECK_EQ(ibv_query_qp(b.qp, &qa, IBV_QP_STATE, &qia), 0);
		if (f == F_LKEY)
			CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
		else
			CHECK_EQ(qa.qp_state, IBV_QPS_ERR);
		aw_pair_close(&a, &b);
	}
}

/* RC only, as rxe: a UC QP takes no ATOMIC WRITE. */
SV_TEST(rc_only)
{
	struct ep u;
	struct ibv_sge sge;

	ep_open(&u, NULL, IBV_QPT_UC);
	ep_connect(&u, u.qp->qp_num);
	sge = (struct ibv_sge){ (uintptr_t)u.buf, 8, u.mr->lkey };
	CHECK_EQ(post_aw(&u, 1, &sge, 1, 0, (uintptr_t)u.buf + 64, u.mr->rkey),
		 EINVAL);
	{
		struct ibv_context *ctx = u.ctx;

		ep_close(&u);
		CHECK_EQ(ibv_close_device(ctx), 0);
	}
}

/* ------------------------------------------ torn values: two processes -- */

#define TORN_N 4000 /* writes */
#define TORN_SLOTS 4 /* 8-byte words the writes go to, round robin */

struct reader {
	volatile uint64_t *w;
	_Atomic int stop;
	uint64_t reads, torn, changes, bad;
};

/* Reads the words as fast as it can: each value must be 8 equal bytes. */
static void *read_loop(void *arg)
{
	struct reader *r = arg;
	uint64_t last[TORN_SLOTS] = { 0 };

	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		for (int k = 0; k < TORN_SLOTS; k++) {
			uint64_t v = __atomic_load_n(&r->w[k], __ATOMIC_RELAXED);

			r->reads++;
			if (v != pat8((uint8_t)v)) {
				if (!r->torn++)
					r->bad = v;
			}
			if (v != last[k]) {
				__atomic_fetch_add(&r->changes, 1,
						   __ATOMIC_RELAXED);
				last[k] = v;
			}
		}
	}
	return NULL;
}

/* The target process: its memory read by a thread of its own while the
 * test writes it; says what the reader saw. */
static void torn_target(int s)
{
	struct ep b;
	struct reader r = { 0 };
	struct ep_info mine, theirs;
	pthread_t t;
	uint64_t res[4];
	uint8_t go;

	aw_open(&b, NULL, EU_ACCESS);
	mine = ep_info(&b);
	xsend(s, &mine, sizeof(mine));
	xrecv(s, &theirs, sizeof(theirs));
	ep_connect(&b, theirs.qpn);
	r.w = (volatile uint64_t *)(void *)b.buf;
	CHECK_EQ(pthread_create(&t, NULL, read_loop, &r), 0);
	xsend(s, &go, 1); /* reading */
	/* After each round of writes (go 1) say how many changes the reader
	 * saw so far; go 0: the writes are done. */
	for (xrecv(s, &go, 1); go; xrecv(s, &go, 1)) {
		uint64_t seen = __atomic_load_n(&r.changes, __ATOMIC_RELAXED);

		xsend(s, &seen, sizeof(seen));
	}
	atomic_store(&r.stop, 1);
	CHECK_EQ(pthread_join(t, NULL), 0);
	res[0] = r.reads;
	res[1] = r.torn;
	res[2] = r.changes;
	res[3] = r.bad;
	xsend(s, res, sizeof(res));
	for (int k = 0; k < TORN_SLOTS; k++)
		xsend(s, (const void *)&r.w[k], 8);
	xrecv(s, &go, 1);
	ep_close(&b);
	_exit(0);
}

SV_TEST_T(no_torn_values, 180)
{
	int sv[2];
	struct ep a;
	struct ep_info theirs, mine;
	uint64_t res[4], fin[TORN_SLOTS], last[TORN_SLOTS] = { 0 };
	uint8_t go = 1;
	pid_t pid;
	struct ibv_sge sge;
	int out = 0;
	uint64_t done = 0, id = 0, goal = TORN_N, seen = 0;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		torn_target(sv[1]);
	}
	close(sv[1]);
	aw_open(&a, NULL, EU_ACCESS);
	xrecv(sv[0], &theirs, sizeof(theirs));
	mine = ep_info(&a);
	xsend(sv[0], &mine, sizeof(mine));
	ep_connect(&a, theirs.qpn);
	xrecv(sv[0], &go, 1);
	/* Distinct patterns, both forms, up to 32 outstanding; rounds of
	 * TORN_N until the reader has seen some land (a loaded machine may
	 * not run its thread during one round), 20 at most. */
	for (;;) {
		while (done < goal) {
			while (out < 32 && id < goal) {
				uint8_t b = (uint8_t)(1 + id % 255);
				uint64_t v = pat8(b), raddr = theirs.addr +
							       8 * (id % TORN_SLOTS);

				if (id & 1) {
					memcpy(a.buf + 8 * (id % 64), &v, 8);
					sge = (struct ibv_sge){ (uintptr_t)a.buf +
									8 * (id % 64),
								8, a.mr->lkey };
					CHECK_EQ(post_aw(&a, id, &sge, 1, 0, raddr,
							 theirs.rkey), 0);
				} else {
					CHECK_EQ(wr_aw(&a, id, raddr, theirs.rkey, v), 0);
				}
				last[id % TORN_SLOTS] = v;
				id++;
				out++;
			}
			{
				struct ibv_wc wc;

				EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
				CHECK_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
				CHECK_EQ(wc.wr_id, done);
				done++;
				out--;
			}
		}
		go = 1;
		xsend(sv[0], &go, 1);
		xrecv(sv[0], &seen, sizeof(seen));
		if (seen || goal >= 20 * TORN_N)
			break;
		goal += TORN_N;
	}
	go = 0;
	xsend(sv[0], &go, 1);
	xrecv(sv[0], res, sizeof(res));
	for (int k = 0; k < TORN_SLOTS; k++)
		xrecv(sv[0], &fin[k], 8);
	xsend(sv[0], &go, 1);
	CHECK_EQ(sv_test_wait_child(pid), 0);
	if (res[1])
		sv_test_fail(__FILE__, __LINE__,
			     "the reader saw %llu torn values of %llu (first "
			     "%#llx)", (unsigned long long)res[1],
			     (unsigned long long)res[0],
			     (unsigned long long)res[3]);
	/* The reader really watched them land (some of them at least). */
	CHECK(res[0] > 0);
	CHECK(res[2] > 0);
	for (int k = 0; k < TORN_SLOTS; k++)
		CHECK_EQ(fin[k], last[k]);
	{
		struct ibv_context *ctx = a.ctx;

		ep_close(&a);
		CHECK_EQ(ibv_close_device(ctx), 0);
	}
	close(sv[0]);
}

/* ----------------------------------------------------- two hosts -- */

/* s's QP again, made by ibv_create_qp_ex with the ATOMIC WRITE op, in
 * INIT as side_open leaves it. */
static void side_qp_ex(struct side *s)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp_attr qa;

	CHECK_EQ(ibv_destroy_qp(s->qp), 0);
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = s->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 128;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.pd = s->pd;
	a.send_ops_flags = AW_OPS;
	s->qp = ibv_create_qp_ex(s->ctx, &a);
	CHECK(s->qp);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC;
	CHECK_EQ(ibv_modify_qp(s->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
}

/* B: the target.  Its memory is the test's to write; it answers when A
 * is done. */
static void wire_b(int in, int out)
{
	struct side s;
	struct card peer;
	uint8_t ok;

	side_open(&s, IBV_QPT_RC, IP4_B);
	b_swap_cards(in, out, &s, &peer);
	side_connect(&s, &peer, 14, 7);
	get(in, &ok, 1); /* A is done with our memory */
	side_close(&s);
}

/* The rounds: an ATOMIC WRITE of a pattern to X, then an RDMA WRITE of
 * another over it, then a READ of X: it must hold the WRITE's, so an
 * ATOMIC WRITE repeated (a duplicate packet, a resend) was never stored
 * again after it. */
static void wire_rounds(struct side *s, const struct card *peer, int n,
			int classic)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(s->qp);
	struct ibv_wc wc;

	for (int i = 0; i < n; i++) {
		uint64_t v = pat8((uint8_t)(1 + i % 250)), w = ~v, got;
		uint64_t x = peer->addr + 8 * (uint64_t)(i % 16);

		if (classic) {
			struct ibv_sge sge = { (uintptr_t)s->buf + 64, 8,
					       s->mr->lkey };
			struct ibv_send_wr wr, *bad;

			memcpy(s->buf + 64, &v, 8);
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = 3 * (uint64_t)i;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_ATOMIC_WRITE;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = x;
			wr.wr.rdma.rkey = peer->rkey;
			CHECK_EQ(ibv_post_send(s->qp, &wr, &bad), 0);
		} else {
			ibv_wr_start(qx);
			qx->wr_id = 3 * (uint64_t)i;
			qx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_atomic_write(qx, peer->rkey, x, &v);
			CHECK_EQ(ibv_wr_complete(qx), 0);
		}
		memcpy(s->buf + 128, &w, 8);
		post(s, 3 * (uint64_t)i + 1, IBV_WR_RDMA_WRITE, 128, 8, peer,
		     x - peer->addr, 0);
		post(s, 3 * (uint64_t)i + 2, IBV_WR_RDMA_READ, 192, 8, peer,
		     x - peer->addr, 0);
		for (int k = 0; k < 3; k++) {
			wc1(s, &wc);
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, 3 * (uint64_t)i + (uint64_t)k);
			if (k == 0) {
				CHECK_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
				CHECK_EQ(wc.byte_len, 8);
			}
		}
		memcpy(&got, s->buf + 192, 8);
		CHECK_EQ(got, w);
	}
}

/* 8 bytes in hex (16 characters at h) that are all one byte. */
static int hex_pat8(const char *h)
{
	if (!h || strlen(h) < 16)
		return 0;
	for (int i = 2; i < 16; i++)
		if (h[i] != h[i % 2])
			return 0;
	return 1;
}

/*
 * tshark's reading of the capture: RC ATOMIC WRITEs (0x1d) to the peer's
 * QP, each a RETH (a VA in the peer's first 128 bytes, its rkey, DMA
 * length 8) and the 8 bytes of a pattern (tshark 4.0 knows no layout for
 * 0x1d and shows the headers after the BTH as data; later ones decode the
 * RETH); RDMA READ RESPONSE ONLYs (0x10) of no data (the UDP datagram is
 * its headers alone: BTH, AETH, ICRC); nothing malformed.
 * Returns how many of each were seen through *req and *resp; *bad counts
 * what was not as it should be.
 */
static void read_capture(const char *pcap, const struct card *peer, int *req,
			 int *resp, int *bad)
{
	char cmd[512], line[2048];
	FILE *f;

	*req = *resp = *bad = 0;
	snprintf(cmd, sizeof(cmd),
		 "tshark -n -r %s -T fields -E separator=/t "
		 "-e infiniband.bth.opcode -e infiniband.bth.destqp "
		 "-e infiniband.reth.dmalen -e infiniband.vendor "
		 "-e infiniband.payload -e _ws.malformed -e udp.length "
		 "2>/dev/null",
		 pcap);
	f = popen(cmd, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f)) {
		char *fld[7] = { 0 }, *p = line;

		line[strcspn(line, "\n")] = 0;
		for (int i = 0; i < 7; i++)
			fld[i] = p ? strsep(&p, "\t") : NULL;
		if (!fld[0] || !*fld[0])
			continue;
		if (fld[5] && *fld[5])
			(*bad)++;
		if (atoi(fld[0]) == 29) {
			/* (tshark 4.0 gives the data field twice: the
			 * last is the whole of it.) */
			const char *h = fld[3] && strrchr(fld[3], ',') ?
						strrchr(fld[3], ',') + 1 :
						fld[3];
			char rk[9];

			(*req)++;
			if (!fld[1] || strtoul(fld[1], NULL, 0) != peer->qpn)
				(*bad)++;
			if (fld[2] && *fld[2]) {
				/* A tshark that decodes the RETH. */
				if (atoi(fld[2]) != 8 || !hex_pat8(fld[4]))
					(*bad)++;
				continue;
			}
			snprintf(rk, sizeof(rk), "%08x", peer->rkey);
			if (!h || strlen(h) < 48 || strncmp(h + 16, rk, 8) ||
			    strncmp(h + 24, "00000008", 8) || !hex_pat8(h + 32)) {
				if (!(*bad)++)
					fprintf(stderr, "tshark: %s\n", h ? h : "-");
				continue;
			}
			{
				char va[17];
				uint64_t v;

				memcpy(va, h, 16);
				va[16] = 0;
				v = strtoull(va, NULL, 16);
				if (v < peer->addr || v >= peer->addr + 128 ||
				    (v & 7))
					(*bad)++;
			}
		} else if (atoi(fld[0]) == 16 && fld[6] &&
			   atoi(fld[6]) == 8 + 12 + 4 + 4) {
			/* A READ response of no data: UDP, BTH, AETH, ICRC. */
			(*resp)++;
		}
	}
	pclose(f);
}

/* tcpdump on A's end of the veth into pcap, once it listens (its
 * "listening on" line in log). */
static pid_t dump_start(const char *pcap, const char *log)
{
	pid_t pid = fork();
	char line[256];

	CHECK(pid >= 0);
	if (pid == 0) {
		if (!freopen(log, "w", stderr))
			_exit(126);
		execlp("tcpdump", "tcpdump", "-i", "svw0", "-U", "-n", "-w", pcap,
		       "udp", "port", "4791", (char *)NULL);
		_exit(127);
	}
	for (int i = 0;; i++) {
		FILE *f = fopen(log, "r");
		int up = 0;

		while (f && fgets(line, sizeof(line), f))
			up |= !!strstr(line, "listening on");
		if (f)
			fclose(f);
		if (up)
			return pid;
		if (i > 200)
			sv_test_fail(__FILE__, __LINE__, "tcpdump did not start");
		sv_test_sleep_ms(50);
	}
}

static void wire_case(int capture, const char *fault)
{
	struct host h;
	struct side s;
	struct card peer;
	char pcap[64], log[64];
	pid_t dump = -1;
	uint8_t ok = 1;
	int rounds = fault ? 150 : 20;

	if (capture && system("command -v tshark >/dev/null 2>&1 && "
			      "command -v tcpdump >/dev/null 2>&1"))
		sv_test_skip("no tshark or tcpdump here (scripts/deps.sh)");
	if (fault)
		CHECK_EQ(setenv("SOFTVERBS_FAULT", fault, 1), 0);
	two_hosts(&h, wire_b);
	snprintf(pcap, sizeof(pcap), "/tmp/sv-aw-%d.pcap", (int)getpid());
	snprintf(log, sizeof(log), "/tmp/sv-aw-%d.log", (int)getpid());
	if (capture) {
		char cut[160];

		/* Both ends cut UDP_SEGMENT trains (eng_wire.c "Trains")
		 * as a NIC would; else a veth hands a train over whole,
		 * one frame for many packets.  Best effort: an older ip
		 * cannot set it. */
		snprintf(cut, sizeof(cut),
			 "ip link set svw0 gso_max_segs 1; nsenter "
			 "--net=/proc/%d/ns/net ip link set svw1 gso_max_segs 1",
			 (int)h.pid);
		if (system(cut))
			fprintf(stderr, "note: gso_max_segs not set\n");
		dump = dump_start(pcap, log);
	}
	side_open(&s, IBV_QPT_RC, IP4_A);
	side_qp_ex(&s);
	a_swap_cards(&h, &s, &peer);
	side_connect(&s, &peer, 14, 7);
	wire_rounds(&s, &peer, rounds, 0);
	wire_rounds(&s, &peer, rounds, 1);
	if (capture) {
		int req = 0, resp = 0, bad = 0;

		/* Every packet was on the veth before its completion: wait
		 * until tcpdump has written them all. */
		for (int i = 0; req < 2 * rounds || resp < 2 * rounds; i++) {
			if (i > 100)
				break;
			sv_test_sleep_ms(100);
			read_capture(pcap, &peer, &req, &resp, &bad);
		}
		kill(dump, SIGINT);
		CHECK(sv_test_wait_child(dump) >= 0);
		read_capture(pcap, &peer, &req, &resp, &bad);
		/* (More of each when a busy machine made the requester
		 * resend one: its repeat is answered again.) */
		if (req < 2 * rounds || resp < 2 * rounds || bad)
			sv_test_fail(__FILE__, __LINE__,
				     "tshark: %d ATOMIC WRITEs, %d READ responses "
				     "of no data (want %d of each), %d not as "
				     "they should be",
				     req, resp, 2 * rounds, bad);
		unlink(pcap);
		unlink(log);
	}
	/* Misaligned across: the responder's NAK, invalid request. */
	if (!fault) {
		struct ibv_wc wc;
		struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(s.qp);
		uint64_t v = 1;

		ibv_wr_start(qx);
		qx->wr_id = 77;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_atomic_write(qx, peer.rkey, peer.addr + 4, &v);
		CHECK_EQ(ibv_wr_complete(qx), 0);
		wc1(&s, &wc);
		CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
		CHECK_EQ(wc.wr_id, 77);
	}
	put(h.to, &ok, 1);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
	if (fault)
		CHECK_EQ(unsetenv("SOFTVERBS_FAULT"), 0);
}

/* Across, captured with tcpdump on the veth and read by tshark. */
SV_TEST_T(wire_across, 120)
{
	wire_case(1, NULL);
}

/* Both engines duplicate and reorder 10% of what they send: every
 * ATOMIC WRITE is stored once, before the WRITE that follows it. */
SV_TEST_T(wire_dup_and_reorder, 300)
{
	wire_case(0, "dup:0.1,reorder:0.05,seed:24");
}

SV_TEST_MAIN()

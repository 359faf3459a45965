/* SPDX-License-Identifier: MIT */
/*
 * The misuse checker (SOFTVERBS_CHECK=1, src/verbs/check.c; the codes:
 * docs/checker.md).  Each case runs a program with one bug in it (this
 * binary, re-executed as `test_check --bug NAME`) twice: with the
 * variable, its stderr must hold the line the bug program announces on its
 * stdout ("EXPECT <line after 'softverbs-check: '>", the objects it made
 * filled in) and name the bug function as the caller; without it, no
 * checker line at all.  The lines are read through pipes until the program
 * exits: no sleeps.
 *
 * Bug functions are non-static and exported (-rdynamic) so that the
 * checker's dladdr(3) names them; each calls the wrong verb itself.
 */
#include "dp_util.h"
#include "sv_client.h"
#include "sv_test.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

/* One completion, polled by the function it is written in. */
#define POLL1(cq, wc)                                                          \
	do {                                                                   \
		int __r;                                                       \
		while ((__r = ibv_poll_cq((cq), 1, (wc))) == 0)                \
			;                                                      \
		CHECK_EQ(__r, 1);                                              \
	} while (0)

/* What the parent will look for; flushed at exit. */
#define EXPECT(...)                                                            \
	do {                                                                   \
		printf("EXPECT ");                                             \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
	} while (0)

/* A line printed where no function of the bug calls (a responder run by
 * the progress thread of another process): no caller asserted. */
#define EXPECT_HERE(...)                                                       \
	do {                                                                   \
		printf("EXPECT_HERE ");                                        \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
	} while (0)

static char page_buf[2 * 4096] __attribute__((aligned(4096)));

/* An RC pair of this process, connected, on one CQ of cqe entries. */
struct pair {
	struct dp d;
	struct ibv_qp *a, *b;
};

static void pair_open(struct pair *p, int cqe, uint32_t wr)
{
	dp_open(&p->d, cqe);
	p->a = dp_qp(&p->d, IBV_QPT_RC, NULL, wr, 0);
	p->b = dp_qp(&p->d, IBV_QPT_RC, NULL, wr, 0);
	dp_connect(p->a, p->b);
}

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t len, int acc)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, acc);

	CHECK(mr);
	return mr;
}

/* Inlined into the bug function, so that it is the verb's caller. */
static inline __attribute__((always_inline)) int
send1(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
		 uint64_t addr, uint32_t len, uint32_t lkey, int signaled)
{
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = signaled ? IBV_SEND_SIGNALED : 0 },
			   *bad;

	return ibv_post_send(qp, &wr, &bad);
}

/* n receives of 64 bytes into page_buf under mr. */
static void recvs(struct ibv_qp *qp, struct ibv_mr *mr, int n)
{
	struct ibv_sge sge = { .addr = (uintptr_t)page_buf, .length = 64,
			       .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 100, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	for (int i = 0; i < n; i++)
		CHECK_EQ(ibv_post_recv(qp, &wr, &bad), 0);
}

/* -------------------------------------------------------------- bugs -- */

NOINLINE void bug_sge_outside_mr(void);
void bug_sge_outside_mr(void)
{
	struct pair p;
	struct ibv_mr *small, *big;

	pair_open(&p, 64, 16);
	small = reg(p.d.pd, page_buf, 4000, IBV_ACCESS_LOCAL_WRITE);
	big = reg(p.d.pd, page_buf, sizeof(page_buf), IBV_ACCESS_LOCAL_WRITE);
	EXPECT("SGE_OUTSIDE_MR ibv_post_send qp %#x wr_id 0x7 sge[0] [%p,+4096) "
	       "lkey %#x: ends 96 bytes past mr [%p,+4000) of this process; "
	       "mr lkey %#x [%p,+8192) of the same pd holds it",
	       p.a->qp_num, (void *)page_buf, small->lkey, (void *)page_buf,
	       big->lkey, (void *)page_buf);
	CHECK_EQ(send1(p.a, IBV_WR_RDMA_WRITE, 7, (uintptr_t)page_buf, 4096,
		       small->lkey, 1) + 0, 0);
	fflush(stdout);
	_exit(0); /* the WR stays where the engine put it */
}

/* Two binds the daemon would refuse (IBV_WC_MW_BIND_ERR): a type 1
 * window on an MR without IBV_ACCESS_MW_BIND (ibv_bind_mw), a type 2
 * window over more than its MR (IBV_WR_BIND_MW in ibv_post_send). */
NOINLINE void bug_bind_mw(void);
void bug_bind_mw(void)
{
	struct pair p;
	struct ibv_mr *nobind, *bind;
	struct ibv_mw *mw1, *mw2;
	struct ibv_mw_bind mb = { .wr_id = 0x21,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr wr = { .wr_id = 0x22,
				  .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	pair_open(&p, 64, 16);
	nobind = reg(p.d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	bind = reg(p.d.pd, page_buf + 4096, 4096,
		   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	mw1 = ibv_alloc_mw(p.d.pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(p.d.pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2);
	mb.bind_info = (struct ibv_mw_bind_info){
		.mr = nobind, .addr = (uintptr_t)page_buf, .length = 64,
		.mw_access_flags = IBV_ACCESS_REMOTE_READ };
	EXPECT("ACCESS_DENIED ibv_bind_mw qp %#x wr_id 0x21 bind of mw rkey "
	       "%#x to [%p,+64): mr lkey %#x lacks IBV_ACCESS_MW_BIND (has "
	       "IBV_ACCESS_LOCAL_WRITE)",
	       p.a->qp_num, mw1->rkey, (void *)page_buf, nobind->lkey);
	CHECK_EQ(ibv_bind_mw(p.a, mw1, &mb), 0);
	wr.bind_mw.mw = mw2;
	wr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = bind, .addr = (uintptr_t)page_buf + 4096, .length = 8192,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	EXPECT("SGE_OUTSIDE_MR ibv_post_send qp %#x wr_id 0x22 bind of mw rkey "
	       "%#x to [%p,+8192): the window ends 4096 bytes past mr lkey %#x "
	       "[%p,+4096)",
	       p.a->qp_num, mw2->rkey, (void *)(page_buf + 4096), bind->lkey,
	       (void *)(page_buf + 4096));
	CHECK_EQ(ibv_post_send(p.a, &wr, &bad), 0);
	fflush(stdout);
	_exit(0);
}

NOINLINE void bug_lkey_unknown(void);
void bug_lkey_unknown(void)
{
	struct pair p;
	struct ibv_mr *mr;
	uint32_t lkey;

	pair_open(&p, 64, 16);
	mr = reg(p.d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	lkey = mr->lkey;
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	EXPECT("LKEY_UNKNOWN ibv_post_send qp %#x wr_id 0x8 sge[0] [%p,+64) "
	       "lkey %#x: the lkey names no live MR of pid %d; it named mr "
	       "[%p,+4096) of this process until ibv_dereg_mr ",
	       p.a->qp_num, (void *)page_buf, lkey, (int)getpid(),
	       (void *)page_buf);
	CHECK_EQ(send1(p.a, IBV_WR_RDMA_WRITE, 8, (uintptr_t)page_buf, 64, lkey,
		       1) + 0, 0);
	fflush(stdout);
	_exit(0);
}

NOINLINE void bug_qp_state(void);
void bug_qp_state(void)
{
	struct dp d;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr = { .wr_id = 10, .sg_list = &sge, .num_sge = 1 },
			   *rbad;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .max_dest_rd_atomic = 1 };
	int mask;

	dp_open(&d, 64);
	mr = reg(d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	sge = (struct ibv_sge){ .addr = (uintptr_t)page_buf, .length = 64,
				.lkey = mr->lkey };
	qp = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
	EXPECT("QP_STATE ibv_post_recv qp %#x wr_id 0xa: the QP is in RESET, "
	       "receives need INIT or later", qp->qp_num);
	CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	CHECK_EQ(to_init(qp), 0);
	EXPECT("QP_STATE ibv_post_send qp %#x wr_id 0x9 SEND: the QP is in INIT, "
	       "sends need RTS", qp->qp_num);
	CHECK_EQ(send1(qp, IBV_WR_SEND, 9, (uintptr_t)page_buf, 64, mr->lkey, 1),
		 EINVAL);
	/* RTR without IBV_QP_MIN_RNR_TIMER, and with IBV_QP_SQ_PSN. */
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	CHECK_EQ(ibv_query_gid(d.ctx, 1, 0, &a.ah_attr.grh.dgid), 0);
	a.dest_qp_num = qp->qp_num;
	mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_SQ_PSN;
	EXPECT("QP_STATE ibv_modify_qp qp %#x RC INIT -> RTR: attr_mask %#x "
	       "lacks IBV_QP_MIN_RNR_TIMER, and has IBV_QP_SQ_PSN the "
	       "transition does not take", qp->qp_num, mask);
	CHECK_EQ(ibv_modify_qp(qp, &a, mask), EINVAL);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	dp_close(&d);
}

/* SENDs that stay outstanding: the peers have no receive, and RNR
 * retries forever (rnr_retry 7).  Each QP's WR names its own MR, so that
 * deregistering one does not fail the other QP's WR. */
NOINLINE void bug_destroy_busy(void);
void bug_destroy_busy(void)
{
	struct pair p, q;
	struct ibv_mr *m1, *m2;

	pair_open(&p, 64, 16);
	q.d = p.d;
	q.a = dp_qp(&p.d, IBV_QPT_RC, NULL, 16, 0);
	q.b = dp_qp(&p.d, IBV_QPT_RC, NULL, 16, 0);
	dp_connect(q.a, q.b);
	m1 = reg(p.d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	m2 = reg(p.d.pd, page_buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK_EQ(send1(p.a, IBV_WR_SEND, 11, (uintptr_t)page_buf, 64, m1->lkey,
		       1), 0);
	CHECK_EQ(send1(q.a, IBV_WR_SEND, 12, (uintptr_t)page_buf + 4096, 64,
		       m2->lkey, 1), 0);
	EXPECT("DESTROY_BUSY ibv_destroy_cq cq %p is still used by qp %#x (send "
	       "and recv cq), qp %#x (send and recv cq), qp %#x (send and recv "
	       "cq), qp %#x (send and recv cq)",
	       (void *)p.d.cq, q.b->qp_num, q.a->qp_num, p.b->qp_num,
	       p.a->qp_num);
	CHECK_EQ(ibv_destroy_cq(p.d.cq), EBUSY);
	EXPECT("DESTROY_BUSY ibv_destroy_qp qp %#x (RTS) has 1 send WRs "
	       "outstanding, oldest wr_id 0xb: their completions never come",
	       p.a->qp_num);
	CHECK_EQ(ibv_destroy_qp(p.a), 0);
	EXPECT("DESTROY_BUSY ibv_dereg_mr mr lkey %#x [%p,+4096) is named by 1 "
	       "outstanding WRs: qp %#x wr_id 0xc",
	       m2->lkey, (void *)(page_buf + 4096), q.a->qp_num);
	CHECK_EQ(ibv_dereg_mr(m2), 0);
	EXPECT("DESTROY_BUSY ibv_dealloc_pd pd %p (handle %u) still has 4 "
	       "dependants: qp %#x, qp %#x, qp %#x, mr lkey %#x",
	       (void *)p.d.pd, p.d.pd->handle, q.b->qp_num, q.a->qp_num,
	       p.b->qp_num, m1->lkey);
	CHECK_EQ(ibv_dealloc_pd(p.d.pd), EBUSY);
	CHECK_EQ(ibv_destroy_qp(q.a), 0);
	CHECK_EQ(ibv_destroy_qp(q.b), 0);
	CHECK_EQ(ibv_destroy_qp(p.b), 0);
	CHECK_EQ(ibv_dereg_mr(m1), 0);
	dp_close(&p.d);
}

NOINLINE void bug_unsignaled_overflow(void);
void bug_unsignaled_overflow(void)
{
	struct pair p;
	struct ibv_mr *mr;

	pair_open(&p, 64, 4);
	mr = reg(p.d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	recvs(p.b, mr, 4);
	EXPECT("UNSIGNALED_OVERFLOW ibv_post_send qp %#x wr_id 0x4: the send "
	       "queue (max_send_wr 4) now holds 4 unsignaled WRs and no "
	       "signaled one, sq_sig_all is 0", p.a->qp_num);
	for (uint64_t i = 1; i <= 4; i++)
		CHECK_EQ(send1(p.a, IBV_WR_SEND, i, (uintptr_t)page_buf, 8,
			       mr->lkey, 0), 0);
	fflush(stdout);
	_exit(0);
}

NOINLINE void bug_cq_overrun(void);
void bug_cq_overrun(void)
{
	struct pair p;
	struct ibv_mr *mr;
	struct ibv_async_event ev;
	struct ibv_wc wc[4];
	struct ibv_qp *c;

	dp_open(&p.d, 4);
	{
		struct ibv_qp_init_attr a = {
			.send_cq = p.d.cq, .recv_cq = p.d.cq,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4,
				 .max_send_sge = 1, .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
		};

		c = ibv_create_qp(p.d.pd, &a);
		CHECK(c);
	}
	EXPECT("CQ_OVERRUN ibv_create_qp: cq %p holds 4 completions but its QPs "
	       "can have 8 outstanding (qp %#x send 4 recv 4): a burst "
	       "overflows it", (void *)p.d.cq, c->qp_num);
	p.a = dp_qp(&p.d, IBV_QPT_RC, NULL, 4, 0);
	p.b = c;
	dp_connect(p.a, p.b);
	mr = reg(p.d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	recvs(p.b, mr, 4);
	for (uint64_t i = 1; i <= 4; i++)
		CHECK_EQ(send1(p.a, IBV_WR_SEND, i, (uintptr_t)page_buf, 8,
			       mr->lkey, 1), 0);
	/* Eight completions into four entries: CQ_ERR tells it happened. */
	do
		CHECK_EQ(ibv_get_async_event(p.d.ctx, &ev), 0);
	while (ev.event_type != IBV_EVENT_CQ_ERR && (ibv_ack_async_event(&ev), 1));
	ibv_ack_async_event(&ev);
	EXPECT("CQ_OVERRUN cq %p overflowed: a completion was lost and "
	       "IBV_EVENT_CQ_ERR raised; it holds 4, its QPs can have 16 "
	       "outstanding", (void *)p.d.cq);
	CHECK(ibv_poll_cq(p.d.cq, 4, wc) >= 0);
	fflush(stdout);
	_exit(0);
}

NOINLINE void bug_mismatched_peer(void);
void bug_mismatched_peer(void)
{
	struct dp d;
	struct ibv_qp *a, *b;
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_512,
				 .rq_psn = 0x123,
				 .max_dest_rd_atomic = 1,
				 .min_rnr_timer = 12 };
	struct ibv_qp_attr s = { .qp_state = IBV_QPS_RTS, .sq_psn = 0x456,
				 .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .max_rd_atomic = 4 };

	dp_open(&d, 64);
	a = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
	b = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
	CHECK_EQ(to_init(a), 0);
	CHECK_EQ(to_init(b), 0);
	CHECK_EQ(to_rtr_psn(a, b->qp_num, 0x456), 0); /* MTU 1024 */
	r.ah_attr.is_global = 1;
	r.ah_attr.port_num = 1;
	CHECK_EQ(ibv_query_gid(d.ctx, 1, 0, &r.ah_attr.grh.dgid), 0);
	r.dest_qp_num = a->qp_num;
	EXPECT("MISMATCHED_PEER ibv_modify_qp qp %#x: path_mtu 512 bytes, its "
	       "peer qp %#x has 1024", b->qp_num, a->qp_num);
	CHECK_EQ(ibv_modify_qp(b, &r,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER),
		 0);
	EXPECT("MISMATCHED_PEER ibv_modify_qp qp %#x: max_rd_atomic 4 is above "
	       "its peer qp %#x's max_dest_rd_atomic 1", a->qp_num, b->qp_num);
	EXPECT("MISMATCHED_PEER ibv_modify_qp qp %#x: sq_psn 0x456, its peer qp "
	       "%#x expects rq_psn 0x123", a->qp_num, b->qp_num);
	CHECK_EQ(ibv_modify_qp(a, &s,
			       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_MAX_QP_RD_ATOMIC),
		 0);
	CHECK_EQ(ibv_destroy_qp(a), 0);
	CHECK_EQ(ibv_destroy_qp(b), 0);
	dp_close(&d);
}

NOINLINE void bug_leak_at_exit(void);
void bug_leak_at_exit(void)
{
	struct dp d;

	dp_open(&d, 8);
	reg(d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	EXPECT("LEAK_AT_EXIT pid %d: 1 CQ, 1 MR, 1 PD, 1 context left at exit",
	       (int)getpid());
	fflush(stdout);
	exit(0);
}

NOINLINE void bug_buffer_unmapped(void);
void bug_buffer_unmapped(void)
{
	struct pair p;
	struct ibv_mr *mr;
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(m != MAP_FAILED);
	pair_open(&p, 64, 16);
	mr = reg(p.d.pd, m, 8192, IBV_ACCESS_LOCAL_WRITE);
	CHECK_EQ(munmap(m + 4096, 4096), 0);
	EXPECT("BUFFER_UNMAPPED ibv_post_send qp %#x wr_id 0xc sge[0] [%p,+8192) "
	       "lkey %#x: [%p,+8192) of mr [%p,+8192) is not mapped readable "
	       "any more",
	       p.a->qp_num, (void *)m, mr->lkey, (void *)m, (void *)m);
	CHECK_EQ(send1(p.a, IBV_WR_RDMA_WRITE, 12, (uintptr_t)m, 8192, mr->lkey,
		       1) + 0, 0);
	fflush(stdout);
	_exit(0);
}

/* RDMA WRITE into the peer's MR registered without REMOTE_WRITE, then
 * with the rkey of an MR deregistered since. */
NOINLINE void bug_remote_access(void);
void bug_remote_access(void)
{
	struct pair p;
	struct ibv_mr *src, *dst, *gone;
	struct ibv_wc wc;
	uint32_t rkey;

	pair_open(&p, 64, 16);
	src = reg(p.d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	dst = reg(p.d.pd, page_buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	EXPECT("ACCESS_DENIED qp %#x wr_id 0xd RDMA_WRITE to qp %#x [%p,+64) "
	       "rkey %#x completed IBV_WC_REM_ACCESS_ERR: the mr under the rkey "
	       "(pid %d) lacks IBV_ACCESS_REMOTE_WRITE (has "
	       "IBV_ACCESS_LOCAL_WRITE)",
	       p.a->qp_num, p.b->qp_num, (void *)(page_buf + 4096), dst->rkey,
	       (int)getpid());
	{
		struct ibv_sge sge = { .addr = (uintptr_t)page_buf,
				       .length = 64,
				       .lkey = src->lkey };
		struct ibv_send_wr wr = { .wr_id = 13,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.wr.rdma.remote_addr = (uintptr_t)(page_buf + 4096);
		wr.wr.rdma.rkey = dst->rkey;
		CHECK_EQ(ibv_post_send(p.a, &wr, &bad), 0);
		POLL1(p.d.cq, &wc);
		CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	}
	/* A second pair: the first is in ERR now. */
	{
		struct ibv_qp *c = dp_qp(&p.d, IBV_QPT_RC, NULL, 16, 0);
		struct ibv_qp *e = dp_qp(&p.d, IBV_QPT_RC, NULL, 16, 0);
		struct ibv_sge sge = { .addr = (uintptr_t)page_buf,
				       .length = 64,
				       .lkey = src->lkey };
		struct ibv_send_wr wr = { .wr_id = 14,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		dp_connect(c, e);
		gone = reg(p.d.pd, page_buf + 4096, 4096,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		rkey = gone->rkey;
		CHECK_EQ(ibv_dereg_mr(gone), 0);
		EXPECT("RKEY_UNKNOWN qp %#x wr_id 0xe RDMA_WRITE to qp %#x "
		       "[%p,+64) rkey %#x completed IBV_WC_REM_ACCESS_ERR: the "
		       "rkey names no live MR or MW of the device; it named mr "
		       "[%p,+4096) of this process until ibv_dereg_mr ",
		       c->qp_num, e->qp_num, (void *)(page_buf + 4096), rkey,
		       (void *)(page_buf + 4096));
		wr.wr.rdma.remote_addr = (uintptr_t)(page_buf + 4096);
		wr.wr.rdma.rkey = rkey;
		CHECK_EQ(ibv_post_send(c, &wr, &bad), 0);
		do
			POLL1(p.d.cq, &wc);
		while (wc.wr_id != 14);
		CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	}
	fflush(stdout);
	_exit(0);
}

/* A SEND to a peer with no receive, and no RNR retry. */
NOINLINE void bug_recv_not_posted(void);
void bug_recv_not_posted(void)
{
	struct dp d;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct ibv_qp_attr s = { .qp_state = IBV_QPS_RTS, .sq_psn = DP_SQ_PSN,
				 .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 0, .max_rd_atomic = 1 };

	dp_open(&d, 64);
	a = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
	b = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
	CHECK_EQ(to_init(a), 0);
	CHECK_EQ(to_init(b), 0);
	CHECK_EQ(to_rtr_psn(a, b->qp_num, DP_SQ_PSN), 0);
	CHECK_EQ(to_rtr_psn(b, a->qp_num, DP_SQ_PSN), 0);
	CHECK_EQ(ibv_modify_qp(a, &s,
			       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_MAX_QP_RD_ATOMIC),
		 0);
	mr = reg(d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	EXPECT("RECV_NOT_POSTED qp %#x wr_id 0xf completed "
	       "IBV_WC_RNR_RETRY_EXC_ERR: the responder qp %#x (this process) "
	       "had no receive posted (0 now)", a->qp_num, b->qp_num);
	CHECK_EQ(send1(a, IBV_WR_SEND, 15, (uintptr_t)page_buf, 8, mr->lkey, 1),
		 0);
	POLL1(d.cq, &wc);
	CHECK_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
	fflush(stdout);
	_exit(0);
}

/* An RC QP of d made by ibv_create_qp_ex for the ibv_wr_* calls. */
static struct ibv_qp *qp_ex(struct dp *d, uint32_t wr)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.cap = { .max_send_wr = wr, .max_recv_wr = wr,
			 .max_send_sge = 2, .max_recv_sge = 2 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = d->pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND |
				  IBV_QP_EX_WITH_BIND_MW,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(d->ctx, &a);

	CHECK(qp);
	return qp;
}

/* The extended post API: an ibv_wr_* WR below RTS, then a batch (checked
 * at ibv_wr_complete) with an SGE past its MR and a deregistered lkey. */
NOINLINE void bug_wr_ex(void);
void bug_wr_ex(void)
{
	struct dp d;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *x;
	struct ibv_mr *small, *gone;
	uint32_t lkey;

	dp_open(&d, 64);
	a = qp_ex(&d, 16);
	b = qp_ex(&d, 16);
	x = ibv_qp_to_qp_ex(a);
	CHECK(x);
	CHECK_EQ(to_init(a), 0);
	EXPECT("QP_STATE ibv_wr_* qp %#x wr_id 0x20 RDMA_WRITE: the QP is "
	       "in INIT, sends need RTS", a->qp_num);
	ibv_wr_start(x);
	x->wr_id = 0x20;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, 0x1234, (uintptr_t)page_buf);
	CHECK_EQ(ibv_wr_complete(x), EINVAL);
	CHECK_EQ(to_init(b), 0);
	CHECK_EQ(to_rtr_psn(a, b->qp_num, DP_SQ_PSN), 0);
	CHECK_EQ(to_rtr_psn(b, a->qp_num, DP_SQ_PSN), 0);
	CHECK_EQ(to_rts(a), 0);
	small = reg(d.pd, page_buf, 4000,
		    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	gone = reg(d.pd, page_buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	lkey = gone->lkey;
	CHECK_EQ(ibv_dereg_mr(gone), 0);
	EXPECT("SGE_OUTSIDE_MR ibv_wr_complete qp %#x wr_id 0x21 sge[0] "
	       "[%p,+4096) lkey %#x: ends 96 bytes past mr [%p,+4000) of this "
	       "process; no MR of the pd holds it",
	       a->qp_num, (void *)page_buf, small->lkey, (void *)page_buf);
	EXPECT("LKEY_UNKNOWN ibv_wr_complete qp %#x wr_id 0x22 sge[1] "
	       "[%p,+64) lkey %#x: the lkey names no live MR of pid %d; it "
	       "named mr [%p,+4096) of this process until ibv_dereg_mr ",
	       a->qp_num, (void *)(page_buf + 4096), lkey, (int)getpid(),
	       (void *)(page_buf + 4096));
	ibv_wr_start(x);
	x->wr_id = 0x21;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, small->rkey, (uintptr_t)page_buf);
	ibv_wr_set_sge(x, small->lkey, (uintptr_t)page_buf, 4096);
	x->wr_id = 0x22;
	ibv_wr_send(x);
	{
		struct ibv_sge sg[2] = {
			{ .addr = (uintptr_t)page_buf, .length = 8,
			  .lkey = small->lkey },
			{ .addr = (uintptr_t)(page_buf + 4096), .length = 64,
			  .lkey = lkey },
		};

		ibv_wr_set_sge_list(x, 2, sg);
	}
	CHECK_EQ(ibv_wr_complete(x), 0);
	/* A bind built with ibv_wr_bind_mw, on an MR without MW_BIND. */
	{
		struct ibv_mw *mw = ibv_alloc_mw(d.pd, IBV_MW_TYPE_2);
		struct ibv_mw_bind_info bi = {
			.mr = small, .addr = (uintptr_t)page_buf, .length = 64,
			.mw_access_flags = IBV_ACCESS_REMOTE_READ };

		CHECK(mw);
		EXPECT("ACCESS_DENIED ibv_wr_complete qp %#x wr_id 0x23 bind of "
		       "mw rkey %#x to [%p,+64): mr lkey %#x lacks "
		       "IBV_ACCESS_MW_BIND",
		       a->qp_num, mw->rkey, (void *)page_buf, small->lkey);
		ibv_wr_start(x);
		x->wr_id = 0x23;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_bind_mw(x, mw, ibv_inc_rkey(mw->rkey), &bi);
		CHECK_EQ(ibv_wr_complete(x), 0);
	}
	fflush(stdout);
	_exit(0); /* the WRs stay where the engine put them */
}

/* ------------------------------------------- two processes of the device -- */

/* What the child of the two-process bugs tells its parent. */
struct child_info {
	uint32_t qpn[2];
	uint32_t rkey;
	uint64_t addr;
};

static void xfer(int fd, void *p, size_t n, int out)
{
	ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

	CHECK_EQ(r, (ssize_t)n);
}

/* The child: two RC QPs (the peers of the parent's two), an MR of
 * page_buf without remote access, no receive posted.  mtu512: the first
 * QP connects with path MTU 512, rq_psn 0x123 and max_dest_rd_atomic 1
 * (the peer's attributes the parent's connect will not match).  It stays
 * until the parent says so. */
static void child_side(int up, int down, int mtu512)
{
	struct child_info ci;
	struct ibv_qp *b[2];
	struct ibv_mr *mr;
	uint32_t peer[2];
	struct dp d;
	char c = 'r';

	dp_open(&d, 64);
	for (int i = 0; i < 2; i++) {
		b[i] = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
		CHECK_EQ(to_init(b[i]), 0);
		ci.qpn[i] = b[i]->qp_num;
	}
	mr = reg(d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	ci.rkey = mr->rkey;
	ci.addr = (uintptr_t)page_buf;
	xfer(up, &ci, sizeof(ci), 1);
	xfer(down, peer, sizeof(peer), 0);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr r = { .qp_state = IBV_QPS_RTR,
					 .path_mtu = IBV_MTU_1024,
					 .dest_qp_num = peer[i],
					 .rq_psn = DP_SQ_PSN,
					 .max_dest_rd_atomic = 1,
					 .min_rnr_timer = 1 };

		if (mtu512 && i == 0) {
			r.path_mtu = IBV_MTU_512;
			r.rq_psn = 0x123;
		}
		r.ah_attr.is_global = 1;
		r.ah_attr.port_num = 1;
		r.ah_attr.grh.hop_limit = 1;
		CHECK_EQ(ibv_query_gid(d.ctx, 1, 0, &r.ah_attr.grh.dgid), 0);
		CHECK_EQ(ibv_modify_qp(b[i], &r,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC |
					       IBV_QP_MIN_RNR_TIMER),
			 0);
	}
	xfer(up, &c, 1, 1);
	xfer(down, &c, 1, 0);
	_exit(0);
}

/* The parent's half: a forked child made and connected its QPs first;
 * its info in *ci.  Returns the child's pid. */
static pid_t fork_child(int mtu512, int *up, int *down,
			struct child_info *ci)
{
	int u[2], dn[2];
	pid_t pid;

	CHECK_EQ(pipe(u), 0);
	CHECK_EQ(pipe(dn), 0);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(u[0]);
		close(dn[1]);
		child_side(u[1], dn[0], mtu512);
	}
	close(u[1]);
	close(dn[0]);
	*up = u[0];
	*down = dn[1];
	xfer(*up, ci, sizeof(*ci), 0);
	return pid;
}

/* Connects a to the child's QP qpn (RTR with MTU 1024 and rq_psn
 * DP_SQ_PSN, RTS with sq_psn and max_rd_atomic rd, no RNR retry). */
static void connect_to(struct dp *d, struct ibv_qp *a, uint32_t qpn,
		       uint32_t sq_psn, uint8_t rd)
{
	struct ibv_qp_attr s = { .qp_state = IBV_QPS_RTS, .sq_psn = sq_psn,
				 .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 0, .max_rd_atomic = rd };

	(void)d;
	CHECK_EQ(to_rtr_psn(a, qpn, DP_SQ_PSN), 0);
	CHECK_EQ(ibv_modify_qp(a, &s,
			       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_MAX_QP_RD_ATOMIC),
		 0);
}

/* MISMATCHED_PEER across processes: the child's QP is at RTR with path
 * MTU 512, rq_psn 0x123, max_dest_rd_atomic 1; this process connects
 * with MTU 1024, sq_psn 0x456, max_rd_atomic 4. */
NOINLINE void bug_peer_other_process(void);
void bug_peer_other_process(void)
{
	struct child_info ci;
	struct ibv_qp *a[2];
	uint32_t qpn[2];
	int up, down;
	struct dp d;
	pid_t pid;
	char c;

	pid = fork_child(1, &up, &down, &ci);
	dp_open(&d, 64);
	for (int i = 0; i < 2; i++) {
		a[i] = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
		CHECK_EQ(to_init(a[i]), 0);
		qpn[i] = a[i]->qp_num;
	}
	xfer(down, qpn, sizeof(qpn), 1);
	xfer(up, &c, 1, 0); /* its QPs are at RTR */
	EXPECT("MISMATCHED_PEER ibv_modify_qp qp %#x: path_mtu 1024 bytes, its "
	       "peer qp %#x (pid %d) has 512", a[0]->qp_num, ci.qpn[0], (int)pid);
	EXPECT("MISMATCHED_PEER ibv_modify_qp qp %#x (pid %d): path_mtu 512 "
	       "bytes, its peer qp %#x has 1024", ci.qpn[0], (int)pid,
	       a[0]->qp_num);
	EXPECT("MISMATCHED_PEER ibv_modify_qp qp %#x: max_rd_atomic 4 is above "
	       "its peer qp %#x (pid %d)'s max_dest_rd_atomic 1", a[0]->qp_num,
	       ci.qpn[0], (int)pid);
	EXPECT("MISMATCHED_PEER ibv_modify_qp qp %#x: sq_psn 0x456, its peer qp "
	       "%#x (pid %d) expects rq_psn 0x123", a[0]->qp_num, ci.qpn[0],
	       (int)pid);
	connect_to(&d, a[0], ci.qpn[0], 0x456, 4);
	/* The second pair agrees: no line. */
	connect_to(&d, a[1], ci.qpn[1], DP_SQ_PSN, 1);
	xfer(down, &c, 1, 1);
	CHECK_EQ(sv_test_wait_child(pid), 0);
	fflush(stdout);
	_exit(0);
}

/* The responder's side in another process: an RDMA WRITE into the
 * child's MR without REMOTE_WRITE, a SEND to its QP with no receive.
 * Both ends say why: the requester as it polls the error, the responder
 * as it refuses (the child's progress thread on packets, this process
 * under direct execution). */
NOINLINE void bug_remote_other_process(void);
void bug_remote_other_process(void)
{
	struct child_info ci;
	struct ibv_qp *a[2];
	struct ibv_mr *src;
	struct ibv_wc wc;
	uint32_t qpn[2];
	int up, down;
	struct dp d;
	pid_t pid;
	char c;

	pid = fork_child(0, &up, &down, &ci);
	dp_open(&d, 64);
	for (int i = 0; i < 2; i++) {
		a[i] = dp_qp(&d, IBV_QPT_RC, NULL, 8, 0);
		CHECK_EQ(to_init(a[i]), 0);
		qpn[i] = a[i]->qp_num;
	}
	xfer(down, qpn, sizeof(qpn), 1);
	xfer(up, &c, 1, 0);
	for (int i = 0; i < 2; i++)
		connect_to(&d, a[i], ci.qpn[i], DP_SQ_PSN, 1);
	src = reg(d.pd, page_buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	EXPECT_HERE("ACCESS_DENIED responder qp %#x (pid %d) RC_WRITE_ONLY from "
		    "qp %#x [%#llx,+64) rkey %#x: refused (remote access "
		    "error): the mr under the rkey (pid %d) lacks "
		    "IBV_ACCESS_REMOTE_WRITE (has IBV_ACCESS_LOCAL_WRITE)",
		    ci.qpn[0], (int)pid, a[0]->qp_num,
		    (unsigned long long)ci.addr, ci.rkey, (int)pid);
	EXPECT("ACCESS_DENIED qp %#x wr_id 0x30 RDMA_WRITE to qp %#x "
	       "[%#llx,+64) rkey %#x completed IBV_WC_REM_ACCESS_ERR: the mr "
	       "under the rkey (pid %d) lacks IBV_ACCESS_REMOTE_WRITE (has "
	       "IBV_ACCESS_LOCAL_WRITE)",
	       a[0]->qp_num, ci.qpn[0], (unsigned long long)ci.addr, ci.rkey,
	       (int)pid);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)(page_buf + 4096),
				       .length = 64,
				       .lkey = src->lkey };
		struct ibv_send_wr wr = { .wr_id = 0x30,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.wr.rdma.remote_addr = ci.addr;
		wr.wr.rdma.rkey = ci.rkey;
		CHECK_EQ(ibv_post_send(a[0], &wr, &bad), 0);
		POLL1(d.cq, &wc);
		CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	}
	EXPECT_HERE("RECV_NOT_POSTED responder qp %#x (pid %d) RC_SEND_ONLY from "
		    "qp %#x: an RNR NAK: the QP had no receive posted (0 in its "
		    "receive queue)", ci.qpn[1], (int)pid, a[1]->qp_num);
	EXPECT("RECV_NOT_POSTED qp %#x wr_id 0x31 completed "
	       "IBV_WC_RNR_RETRY_EXC_ERR: the responder qp %#x (pid %d) had no "
	       "receive posted (0 now)", a[1]->qp_num, ci.qpn[1], (int)pid);
	CHECK_EQ(send1(a[1], IBV_WR_SEND, 0x31, (uintptr_t)(page_buf + 4096), 8,
		       src->lkey, 1),
		 0);
	do
		POLL1(d.cq, &wc);
	while (wc.wr_id != 0x31);
	CHECK_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
	xfer(down, &c, 1, 1);
	CHECK_EQ(sv_test_wait_child(pid), 0);
	fflush(stdout);
	_exit(0);
}

static const struct {
	const char *name;
	void (*fn)(void);
	const char *caller;
} bugs[] = {
#define BUG(n) { #n, bug_##n, "bug_" #n "+" }
	BUG(sge_outside_mr),  BUG(lkey_unknown),   BUG(qp_state),
	BUG(destroy_busy),    BUG(unsignaled_overflow), BUG(cq_overrun),
	BUG(mismatched_peer), BUG(leak_at_exit),   BUG(buffer_unmapped),
	BUG(remote_access),   BUG(recv_not_posted), BUG(wr_ex),
	BUG(peer_other_process), BUG(remote_other_process), BUG(bind_mw),
#undef BUG
};

/* ------------------------------------------------------------ runner -- */

struct run {
	char out[16384], err[65536];
	size_t nout, nerr;
	int status;
};

/* Runs this binary's bug `name` with SOFTVERBS_CHECK=check (NULL: unset),
 * collecting its stdout and stderr until it exits. */
static void run_bug(const char *name, const char *check, struct run *r)
{
	int po[2], pe[2];
	pid_t pid;
	struct pollfd fds[2];
	int open_fds = 2;

	memset(r, 0, sizeof(*r));
	CHECK_EQ(pipe2(po, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(pe, O_CLOEXEC), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		const char *asan = getenv("ASAN_OPTIONS");
		char opt[1024];

		if (check)
			setenv("SOFTVERBS_CHECK", check, 1);
		else
			unsetenv("SOFTVERBS_CHECK");
		/* The bugs leave objects behind on purpose (LEAK_AT_EXIT is
		 * one): the sanitizer build's leak check must not fail them. */
		snprintf(opt, sizeof(opt), "%s%sdetect_leaks=0", asan ? asan : "",
			 asan && *asan ? ":" : "");
		setenv("ASAN_OPTIONS", opt, 1);
		execl("/proc/self/exe", "test_check", "--bug", name,
		      (char *)NULL);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	fds[0] = (struct pollfd){ .fd = po[0], .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = pe[0], .events = POLLIN };
	while (open_fds) {
		CHECK(poll(fds, 2, -1) > 0 || errno == EINTR);
		for (int i = 0; i < 2; i++) {
			char *buf = i ? r->err : r->out;
			size_t *n = i ? &r->nerr : &r->nout;
			size_t cap = (i ? sizeof(r->err) : sizeof(r->out)) - 1;
			char junk[4096];
			ssize_t got;

			if (fds[i].fd < 0 || !fds[i].revents)
				continue;
			got = *n < cap ? read(fds[i].fd, buf + *n, cap - *n) :
					 read(fds[i].fd, junk, sizeof(junk));
			if (got <= 0) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
			} else if (*n < cap) {
				*n += (size_t)got;
			}
		}
	}
	r->out[r->nout] = 0;
	r->err[r->nerr] = 0;
	r->status = sv_test_wait_child(pid);
}

/* The case: every EXPECT line of the bug is a checker line on stderr
 * naming the bug function; without the variable no checker line. */
static void check_bug(const char *name)
{
	static struct run r;
	const char *caller = NULL;
	int expects = 0;

	for (size_t i = 0; i < sizeof(bugs) / sizeof(bugs[0]); i++)
		if (!strcmp(bugs[i].name, name))
			caller = strcmp(name, "leak_at_exit") ? bugs[i].caller :
								"";
	CHECK(caller);
	run_bug(name, "1", &r);
	if (r.status != 0)
		fprintf(stderr, "bug %s exited %d; stderr:\n%s\n", name,
			r.status, r.err);
	CHECK_EQ(r.status, 0);
	for (char *l = r.out, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		char want[2048];
		const char *hit, *eol;

		nl = strchr(l, '\n');
		if (nl)
			*nl = 0;
		int here = !strncmp(l, "EXPECT_HERE ", 12);

		if (strncmp(l, "EXPECT ", 7) && !here)
			continue;
		expects++;
		snprintf(want, sizeof(want), "softverbs-check: %s",
			 l + (here ? 12 : 7));
		hit = strstr(r.err, want);
		if (!hit || (hit != r.err && hit[-1] != '\n')) {
			fprintf(stderr, "missing: %s\nstderr was:\n%s\n", want,
				r.err);
			CHECK(!"the checker line is there");
		}
		eol = strchr(hit, '\n');
		if (caller[0] && !here) {
			const char *c = strstr(hit, "; called from ");

			if (!c || (eol && c > eol) ||
			    strncmp(c + 14, caller, strlen(caller))) {
				fprintf(stderr, "caller not %s in: %.*s\n",
					caller,
					(int)(eol ? eol - hit : (long)strlen(hit)),
					hit);
				CHECK(!"the line names the bug's function");
			}
		}
	}
	CHECK(expects > 0);
	run_bug(name, NULL, &r);
	CHECK_EQ(r.status, 0);
	if (strstr(r.err, "softverbs-check")) {
		fprintf(stderr, "unchecked run printed:\n%s\n", r.err);
		CHECK(!"no checker line without SOFTVERBS_CHECK");
	}
}

SV_TEST(sge_outside_mr) { check_bug("sge_outside_mr"); }
SV_TEST(lkey_unknown) { check_bug("lkey_unknown"); }
SV_TEST(qp_state) { check_bug("qp_state"); }
SV_TEST(destroy_busy) { check_bug("destroy_busy"); }
SV_TEST(unsignaled_overflow) { check_bug("unsignaled_overflow"); }
SV_TEST(cq_overrun) { check_bug("cq_overrun"); }
SV_TEST(mismatched_peer) { check_bug("mismatched_peer"); }
SV_TEST(leak_at_exit) { check_bug("leak_at_exit"); }
SV_TEST(buffer_unmapped) { check_bug("buffer_unmapped"); }
SV_TEST(remote_access) { check_bug("remote_access"); }
SV_TEST(recv_not_posted) { check_bug("recv_not_posted"); }
SV_TEST(wr_ex) { check_bug("wr_ex"); }
SV_TEST(peer_other_process) { check_bug("peer_other_process"); }
SV_TEST(remote_other_process) { check_bug("remote_other_process"); }
SV_TEST(bind_mw) { check_bug("bind_mw"); }

/* The lines reach the daemon's log too ($TMPDIR/softverbsd-UID.log),
 * each as "softverbs-check: pid N CODE ...": a daemon of this case's own,
 * with its log in a directory of its own, gets the lines of two bugs (one
 * told at a post, one at exit). */
static int log_has(const char *path, const char *want)
{
	char line[2048];
	int hit = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (!hit && fgets(line, sizeof(line), f)) {
		const char *c = strstr(line, "softverbs-check: pid ");
		char *end;

		if (!c)
			continue;
		strtol(c + 21, &end, 10);
		hit = end > c + 21 && *end == ' ' &&
		      !strncmp(end + 1, want, strlen(want));
	}
	fclose(f);
	return hit;
}

SV_TEST(daemon_log)
{
	static const char *const bugs_logged[] = { "sge_outside_mr",
						   "leak_at_exit" };
	char dir[] = "/tmp/svcheck.XXXXXX", path[4200], sock[64];
	static struct run r;

	CHECK(mkdtemp(dir));
	CHECK_EQ(setenv("TMPDIR", dir, 1), 0);
	snprintf(sock, sizeof(sock), "svtest.check-log.%d", (int)getpid());
	CHECK_EQ(setenv("SOFTVERBS_SOCKET", sock, 1), 0);
	snprintf(path, sizeof(path), "%s/softverbsd-%u.log", dir,
		 (unsigned)getuid());
	for (size_t b = 0; b < 2; b++) {
		int expects = 0;

		run_bug(bugs_logged[b], "1", &r);
		CHECK_EQ(r.status, 0);
		for (char *l = r.out, *nl; l && *l; l = nl ? nl + 1 : NULL) {
			char want[1024], *semi;
			int i;

			nl = strchr(l, '\n');
			if (nl)
				*nl = 0;
			if (strncmp(l, "EXPECT ", 7))
				continue;
			/* The line up to the caller (the test prints that
			 * part: the daemon's copy may be cut short). */
			snprintf(want, sizeof(want), "%s", l + 7);
			semi = strstr(want, "; called from");
			if (semi)
				*semi = 0;
			expects++;
			/* The bug exited after its line went to the daemon
			 * (a checked process waits for that at exit); a
			 * loaded machine may still be writing the file. */
			for (i = 0; i < 200 && !log_has(path, want); i++)
				usleep(50000);
			if (i == 200) {
				fprintf(stderr, "not in %s: softverbs-check: pid N %s\n",
					path, want);
				CHECK(!"the daemon's log has the line");
			}
		}
		CHECK(expects > 0);
	}
	/* This case's daemon, if it did not idle out yet (never a new one). */
	if (!sv_chan_probe())
		sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
	unlink(path);
	rmdir(dir);
}

/* `softverbs res show qp` lists a QP's last error completion and the
 * checker's diagnosis: a checked program (this binary, --hold) makes a
 * WRITE fail with IBV_WC_REM_ACCESS_ERR, polls it, says READY and waits;
 * the command, run then, prints it on the QP's row. */
SV_TEST(res_show_last_err)
{
	char exe[4096], cmd[4200], line[4096], want[256];
	int in[2], out[2], found = 0;
	unsigned qpn = 0;
	ssize_t n;
	FILE *f;
	pid_t pid;

	CHECK(readlink("/proc/self/exe", exe, sizeof(exe) - 1) > 0);
	exe[sizeof(exe) - 1] = 0;
	CHECK_EQ(pipe(in), 0);
	CHECK_EQ(pipe(out), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		setenv("SOFTVERBS_CHECK", "1", 1);
		execl("/proc/self/exe", "test_check", "--hold", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	n = read(out[0], line, sizeof(line) - 1);
	CHECK(n > 0);
	line[n] = 0;
	CHECK(sscanf(line, "READY %x", &qpn) == 1);
	*strrchr(exe, '/') = 0;
	snprintf(cmd, sizeof(cmd), "%s/softverbs res show qp", exe);
	f = popen(cmd, "r");
	CHECK(f);
	snprintf(want, sizeof(want), " qpn %#x ", qpn);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, want)) {
			found = 1;
			if (!strstr(line, " last-err IBV_WC_REM_ACCESS_ERR wr_id "
					  "0xd vendor_err ") ||
			    !strstr(line, " diag ACCESS_DENIED qp ") ||
			    !strstr(line, "lacks IBV_ACCESS_REMOTE_WRITE")) {
				fprintf(stderr, "row: %s", line);
				CHECK(!"the row has the last error and its diagnosis");
			}
		}
	CHECK_EQ(pclose(f), 0);
	CHECK(found);
	close(in[1]); /* the program ends */
	close(out[0]);
	CHECK_EQ(sv_test_wait_child(pid), 0);
}

/* --hold: a WRITE refused for its MR's access, polled, then "READY
 * <qpn>" and wait for stdin to close (res_show_last_err). */
static int hold(void)
{
	struct pair p;
	struct ibv_mr *src, *dst;
	struct ibv_wc wc;
	char c;

	pair_open(&p, 64, 16);
	src = reg(p.d.pd, page_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	dst = reg(p.d.pd, page_buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)page_buf,
				       .length = 64,
				       .lkey = src->lkey };
		struct ibv_send_wr wr = { .wr_id = 13,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.wr.rdma.remote_addr = (uintptr_t)(page_buf + 4096);
		wr.wr.rdma.rkey = dst->rkey;
		CHECK_EQ(ibv_post_send(p.a, &wr, &bad), 0);
		POLL1(p.d.cq, &wc);
		CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	}
	printf("READY %#x\n", p.a->qp_num);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--hold"))
		return hold();
	if (argc == 3 && !strcmp(argv[1], "--bug")) {
		for (size_t i = 0; i < sizeof(bugs) / sizeof(bugs[0]); i++)
			if (!strcmp(bugs[i].name, argv[2])) {
				bugs[i].fn();
				fflush(stdout);
				return 0;
			}
		return 2;
	}
	return sv_test_main(argc, argv);
}

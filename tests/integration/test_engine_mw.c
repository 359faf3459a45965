/* SPDX-License-Identifier: MIT */
/*
 * Memory windows end to end: type 1 (ibv_bind_mw) and type 2
 * (IBV_WR_BIND_MW, ibv_qp_ex wr_bind_mw) rkeys used by RDMA write, read
 * and atomics within their range and access; REM_ACCESS_ERR outside;
 * invalidation by LOCAL_INV, SEND_WITH_INV (IBV_WC_WITH_INV on the
 * receiver) and ibv_dealloc_mw; MW_BIND_ERR for bad binds; an MR with
 * bound windows refuses ibv_dereg_mr.
 */
#include "engine_util.h"

#define WIN_OFF 4096
#define WIN_LEN 8192
#define RW (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* a: the requester; b: owns the memory, its windows and their MR. */
struct fix {
	struct ep a, b;
	struct ibv_mr *mr; /* b.buf with MW_BIND */
	struct ibv_mw *mw;
};

static void fix_open(struct fix *f, enum ibv_mw_type type)
{
	ep_open(&f->a, NULL, IBV_QPT_RC);
	ep_open(&f->b, f->a.ctx, IBV_QPT_RC);
	ep_connect(&f->a, f->b.qp->qp_num);
	ep_connect(&f->b, f->a.qp->qp_num);
	f->mr = ibv_reg_mr(f->b.pd, f->b.buf, EP_BUF,
			   EU_ACCESS | IBV_ACCESS_MW_BIND);
	CHECK(f->mr);
	f->mw = ibv_alloc_mw(f->b.pd, type);
	CHECK(f->mw);
	CHECK_EQ(f->mw->type, type);
}

static void fix_close(struct fix *f)
{
	if (f->mw)
		CHECK_EQ(ibv_dealloc_mw(f->mw), 0);
	CHECK_EQ(ibv_dereg_mr(f->mr), 0);
	ep_close(&f->a);
	ep_close(&f->b);
	ibv_close_device(f->a.ctx);
}

/* Binds type 1 window f->mw over b.buf + [off, off + len) with access
 * through ibv_bind_mw on b's QP; the bind must complete with `st`. */
static void bind1(struct fix *f, uint64_t off, uint64_t len,
		  unsigned access, struct ibv_mr *mr, enum ibv_wc_status st)
{
	struct ibv_mw_bind bind;
	struct ibv_wc wc;
	uint32_t old = f->mw->rkey;

	memset(&bind, 0, sizeof(bind));
	bind.wr_id = 50;
	bind.send_flags = IBV_SEND_SIGNALED;
	bind.bind_info.mr = mr;
	bind.bind_info.addr = mr ? (uintptr_t)f->b.buf + off : 0;
	bind.bind_info.length = len;
	bind.bind_info.mw_access_flags = access;
	CHECK_EQ(ibv_bind_mw(f->b.qp, f->mw, &bind), 0);
	/* The key changes at once (rdma-core: ibv_inc_rkey), same index. */
	CHECK(f->mw->rkey != old);
	CHECK_EQ(f->mw->rkey >> 8, old >> 8);
	EXPECT_WC(f->b.cq, &wc, st);
	CHECK_EQ(wc.wr_id, 50);
	if (st == IBV_WC_SUCCESS)
		CHECK_EQ(wc.opcode, IBV_WC_BIND_MW);
}

/* Posts wr on qp; its completion on cq has status st, wr's wr_id and, on
 * success, opcode op. */
static void post_expect(struct ibv_qp *qp, struct ibv_cq *cq,
			struct ibv_send_wr *wr, enum ibv_wc_status st,
			enum ibv_wc_opcode op)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	CHECK_EQ(ibv_post_send(qp, wr, &bad), 0);
	EXPECT_WC(cq, &wc, st);
	CHECK_EQ(wc.wr_id, wr->wr_id);
	if (st == IBV_WC_SUCCESS)
		CHECK_EQ(wc.opcode, op);
}

/* Posts IBV_WR_BIND_MW for type 2 window f->mw with rkey; the bind must
 * complete with st. */
static void bind2(struct fix *f, struct ibv_qp *qp, struct ibv_cq *cq,
		  uint32_t rkey, uint64_t off, uint64_t len, unsigned access,
		  enum ibv_wc_status st)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 60;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = f->mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = f->mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)f->b.buf + off;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;
	post_expect(qp, cq, &wr, st, IBV_WC_BIND_MW);
}

static void local_inv(struct ep *e, uint32_t rkey, enum ibv_wc_status st)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 70;
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = rkey;
	post_expect(e->qp, e->cq, &wr, st, IBV_WC_LOCAL_INV);
}

/* a writes n bytes at window offset woff through rkey; status st. */
static void win_write(struct fix *f, uint32_t rkey, uint64_t woff, uint32_t n,
		      enum ibv_wc_status st)
{
	struct ibv_wc wc;

	post_send_op(&f->a, 1, IBV_WR_RDMA_WRITE, f->a.buf, n,
		     (uintptr_t)f->b.buf + WIN_OFF + woff, rkey);
	EXPECT_WC(f->a.cq, &wc, st);
}

static void fill(char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(seed + i * 7);
}

SV_TEST(mw1_write_read_atomic_in_range)
{
	struct fix f;
	struct ibv_wc wc;
	struct ibv_sge s;
	struct ibv_send_wr wr, *bad;
	uint64_t *target, got;

	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RW | IBV_ACCESS_REMOTE_ATOMIC, f.mr,
	      IBV_WC_SUCCESS);

	fill(f.a.buf, 3000, 3);
	win_write(&f, f.mw->rkey, 100, 3000, IBV_WC_SUCCESS);
	CHECK(!memcmp(f.b.buf + WIN_OFF + 100, f.a.buf, 3000));

	/* The whole window, exactly, read back. */
	fill(f.b.buf + WIN_OFF, WIN_LEN, 9);
	post_send_op(&f.a, 2, IBV_WR_RDMA_READ, f.a.buf + 16384, WIN_LEN,
		     (uintptr_t)f.b.buf + WIN_OFF, f.mw->rkey);
	EXPECT_WC(f.a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
	CHECK(!memcmp(f.a.buf + 16384, f.b.buf + WIN_OFF, WIN_LEN));

	target = (uint64_t *)(void *)(f.b.buf + WIN_OFF + 1024);
	*target = 40;
	memset(&wr, 0, sizeof(wr));
	s = (struct ibv_sge){ (uintptr_t)f.a.buf + 40000, 8, f.a.mr->lkey };
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = f.mw->rkey;
	wr.wr.atomic.compare_add = 2;
	CHECK_EQ(ibv_post_send(f.a.qp, &wr, &bad), 0);
	EXPECT_WC(f.a.cq, &wc, IBV_WC_SUCCESS);
	memcpy(&got, f.a.buf + 40000, 8);
	CHECK_EQ(got, 40);
	CHECK_EQ(*target, 42);
	fix_close(&f);
}

SV_TEST(mw1_outside_range_or_access_fails)
{
	struct fix f;
	struct ibv_wc wc;
	uint32_t old;

	/* Past the end of the window (the MR goes on: still refused). */
	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RW, f.mr, IBV_WC_SUCCESS);
	win_write(&f, f.mw->rkey, WIN_LEN - 32, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* Before its start. */
	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RW, f.mr, IBV_WC_SUCCESS);
	post_send_op(&f.a, 2, IBV_WR_RDMA_READ, f.a.buf, 64,
		     (uintptr_t)f.b.buf + WIN_OFF - 8, f.mw->rkey);
	EXPECT_WC(f.a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* Read-only window: reads work, writes and atomics do not. */
	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, IBV_ACCESS_REMOTE_READ, f.mr,
	      IBV_WC_SUCCESS);
	post_send_op(&f.a, 2, IBV_WR_RDMA_READ, f.a.buf, 64,
		     (uintptr_t)f.b.buf + WIN_OFF, f.mw->rkey);
	EXPECT_WC(f.a.cq, &wc, IBV_WC_SUCCESS);
	win_write(&f, f.mw->rkey, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* A rebind moves the key: the old one is dead, the new one works. */
	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RW, f.mr, IBV_WC_SUCCESS);
	old = f.mw->rkey;
	bind1(&f, WIN_OFF, 4096, RW, f.mr, IBV_WC_SUCCESS);
	win_write(&f, f.mw->rkey, 0, 64, IBV_WC_SUCCESS);
	win_write(&f, old, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* A zero-length bind unbinds. */
	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RW, f.mr, IBV_WC_SUCCESS);
	bind1(&f, 0, 0, 0, NULL, IBV_WC_SUCCESS);
	win_write(&f, f.mw->rkey, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* An unbound window answers nothing. */
	fix_open(&f, IBV_MW_TYPE_1);
	win_write(&f, f.mw->rkey, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);
}

SV_TEST(mw_dealloc_invalidates)
{
	struct fix f;
	uint32_t key;

	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RW, f.mr, IBV_WC_SUCCESS);
	key = f.mw->rkey;
	CHECK_EQ(ibv_dealloc_mw(f.mw), 0);
	f.mw = NULL;
	win_write(&f, key, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	fix_open(&f, IBV_MW_TYPE_2);
	key = ibv_inc_rkey(f.mw->rkey);
	bind2(&f, f.b.qp, f.b.cq, key, WIN_OFF, WIN_LEN, RW, IBV_WC_SUCCESS);
	win_write(&f, key, 0, 64, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_dealloc_mw(f.mw), 0);
	f.mw = NULL;
	win_write(&f, key, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);
}

SV_TEST(mw_bind_errors)
{
	struct fix f;
	struct ibv_mr *plain;
	struct ibv_wc wc;

	/* The MR lacks IBV_ACCESS_MW_BIND. */
	fix_open(&f, IBV_MW_TYPE_1);
	plain = ibv_reg_mr(f.b.pd, f.b.buf, EP_BUF, EU_ACCESS);
	CHECK(plain);
	bind1(&f, WIN_OFF, WIN_LEN, RW, plain, IBV_WC_MW_BIND_ERR);
	/* The QP is in error: what follows is flushed. */
	post_send_op(&f.b, 3, IBV_WR_SEND, f.b.buf, 8, 0, 0);
	EXPECT_WC(f.b.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(ibv_dereg_mr(plain), 0);
	fix_close(&f);

	/* The range leaves the MR. */
	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, EP_BUF - 4096, 8192, RW, f.mr, IBV_WC_MW_BIND_ERR);
	fix_close(&f);

	/* Remote write on an MR without local write. */
	fix_open(&f, IBV_MW_TYPE_1);
	plain = ibv_reg_mr(f.b.pd, f.b.buf, EP_BUF,
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	CHECK(plain);
	bind1(&f, WIN_OFF, WIN_LEN, RW, plain, IBV_WC_MW_BIND_ERR);
	CHECK_EQ(ibv_dereg_mr(plain), 0);
	fix_close(&f);

	/* Type 1 windows cannot be zero based. */
	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RW | IBV_ACCESS_ZERO_BASED, f.mr,
	      IBV_WC_MW_BIND_ERR);
	fix_close(&f);

	/* A type 2 window bound through a QP of another PD. */
	fix_open(&f, IBV_MW_TYPE_2);
	bind2(&f, f.a.qp, f.a.cq, ibv_inc_rkey(f.mw->rkey), WIN_OFF, WIN_LEN,
	      RW, IBV_WC_MW_BIND_ERR);
	fix_close(&f);

	/* A bound type 2 window must be invalidated before a new bind. */
	fix_open(&f, IBV_MW_TYPE_2);
	bind2(&f, f.b.qp, f.b.cq, ibv_inc_rkey(f.mw->rkey), WIN_OFF, WIN_LEN,
	      RW, IBV_WC_SUCCESS);
	bind2(&f, f.b.qp, f.b.cq, ibv_inc_rkey(ibv_inc_rkey(f.mw->rkey)),
	      WIN_OFF, WIN_LEN, RW, IBV_WC_MW_BIND_ERR);
	fix_close(&f);

	/* A type 2 key whose index is not the window's. */
	fix_open(&f, IBV_MW_TYPE_2);
	bind2(&f, f.b.qp, f.b.cq, f.mw->rkey + 0x100, WIN_OFF, WIN_LEN, RW,
	      IBV_WC_MW_BIND_ERR);
	fix_close(&f);

	/* ibv_bind_mw is for type 1 only (verbs.h: EINVAL). */
	fix_open(&f, IBV_MW_TYPE_2);
	{
		struct ibv_mw_bind bind;

		memset(&bind, 0, sizeof(bind));
		bind.bind_info.mr = f.mr;
		bind.bind_info.addr = (uintptr_t)f.b.buf;
		bind.bind_info.length = 64;
		CHECK_EQ(ibv_bind_mw(f.b.qp, f.mw, &bind), EINVAL);
	}
	fix_close(&f);
}

SV_TEST(mw2_local_inv)
{
	struct fix f;
	uint32_t k1, k2;

	fix_open(&f, IBV_MW_TYPE_2);
	k1 = ibv_inc_rkey(f.mw->rkey);
	bind2(&f, f.b.qp, f.b.cq, k1, WIN_OFF, WIN_LEN,
	      RW | IBV_ACCESS_ZERO_BASED, IBV_WC_SUCCESS);
	/* Zero based: the window's first byte is address 0. */
	fill(f.a.buf, 256, 5);
	post_send_op(&f.a, 1, IBV_WR_RDMA_WRITE, f.a.buf, 256, 512, k1);
	{
		struct ibv_wc wc;

		EXPECT_WC(f.a.cq, &wc, IBV_WC_SUCCESS);
	}
	CHECK(!memcmp(f.b.buf + WIN_OFF + 512, f.a.buf, 256));
	local_inv(&f.b, k1, IBV_WC_SUCCESS);
	/* Bound again with another key: only the new key works. */
	k2 = ibv_inc_rkey(k1);
	bind2(&f, f.b.qp, f.b.cq, k2, WIN_OFF, WIN_LEN, RW, IBV_WC_SUCCESS);
	win_write(&f, k2, 0, 64, IBV_WC_SUCCESS);
	win_write(&f, k1, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* After LOCAL_INV the key is dead. */
	fix_open(&f, IBV_MW_TYPE_2);
	k1 = ibv_inc_rkey(f.mw->rkey);
	bind2(&f, f.b.qp, f.b.cq, k1, WIN_OFF, WIN_LEN, RW, IBV_WC_SUCCESS);
	local_inv(&f.b, k1, IBV_WC_SUCCESS);
	win_write(&f, k1, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* LOCAL_INV of an MR key or an unbound window fails. */
	fix_open(&f, IBV_MW_TYPE_2);
	local_inv(&f.b, f.mr->rkey, IBV_WC_LOC_QP_OP_ERR);
	fix_close(&f);
}

SV_TEST(mw2_send_with_inv)
{
	struct fix f;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge s;
	struct ibv_wc wc;
	uint32_t k1;

	fix_open(&f, IBV_MW_TYPE_2);
	k1 = ibv_inc_rkey(f.mw->rkey);
	bind2(&f, f.b.qp, f.b.cq, k1, WIN_OFF, WIN_LEN, RW, IBV_WC_SUCCESS);
	win_write(&f, k1, 0, 64, IBV_WC_SUCCESS);

	post_recv(&f.b, 80, f.b.buf + 32768, 4096);
	strcpy(f.a.buf, "done with your window");
	memset(&wr, 0, sizeof(wr));
	s = (struct ibv_sge){ (uintptr_t)f.a.buf, 22, f.a.mr->lkey };
	wr.wr_id = 81;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = k1;
	CHECK_EQ(ibv_post_send(f.a.qp, &wr, &bad), 0);
	EXPECT_WC(f.a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_SEND);
	EXPECT_WC(f.b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 80);
	CHECK_EQ(wc.opcode, IBV_WC_RECV);
	CHECK(wc.wc_flags & IBV_WC_WITH_INV);
	CHECK(!(wc.wc_flags & IBV_WC_WITH_IMM));
	CHECK_EQ(wc.invalidated_rkey, k1);
	CHECK_EQ(wc.byte_len, 22);
	CHECK(!strcmp(f.b.buf + 32768, "done with your window"));
	win_write(&f, k1, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* Invalidating what cannot be: the sender sees REM_INV_REQ_ERR. */
	fix_open(&f, IBV_MW_TYPE_2);
	post_recv(&f.b, 80, f.b.buf + 32768, 4096);
	memset(&wr, 0, sizeof(wr));
	s = (struct ibv_sge){ (uintptr_t)f.a.buf, 8, f.a.mr->lkey };
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = f.mw->rkey; /* never bound */
	CHECK_EQ(ibv_post_send(f.a.qp, &wr, &bad), 0);
	EXPECT_WC(f.a.cq, &wc, IBV_WC_REM_INV_REQ_ERR);
	fix_close(&f);
}

/* Type 2 windows answer only the QP they are bound to. */
SV_TEST(mw2_other_qp_refused)
{
	struct fix f;
	struct ep c, d;
	struct ibv_qp_init_attr ia;
	struct ibv_wc wc;
	uint32_t k1;

	fix_open(&f, IBV_MW_TYPE_2);
	k1 = ibv_inc_rkey(f.mw->rkey);
	bind2(&f, f.b.qp, f.b.cq, k1, WIN_OFF, WIN_LEN, RW, IBV_WC_SUCCESS);
	/* c -> d where d shares b's PD (so only the QP differs). */
	ep_open(&c, f.a.ctx, IBV_QPT_RC);
	memset(&d, 0, sizeof(d));
	d.ctx = f.a.ctx;
	d.cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	CHECK(d.cq);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = d.cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	d.qp = ibv_create_qp(f.b.pd, &ia);
	CHECK(d.qp);
	ep_connect(&c, d.qp->qp_num);
	ep_connect(&d, c.qp->qp_num);
	post_send_op(&c, 1, IBV_WR_RDMA_WRITE, c.buf, 64,
		     (uintptr_t)f.b.buf + WIN_OFF, k1);
	EXPECT_WC(c.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	/* ... while the QP it is bound to still gets in. */
	win_write(&f, k1, 0, 64, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_destroy_qp(d.qp), 0);
	CHECK_EQ(ibv_destroy_cq(d.cq), 0);
	ep_close(&c);
	fix_close(&f);
}

/* The extended post API binds and invalidates too. */
SV_TEST(mw2_qp_ex_bind_and_inv)
{
	struct fix f;
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp_ex *qx;
	struct ibv_qp *saved;
	struct ibv_mw_bind_info bi;
	struct ibv_wc wc;
	uint32_t k1;

	fix_open(&f, IBV_MW_TYPE_2);
	/* Replace b's QP by an extended one. */
	saved = f.b.qp;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = f.b.cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.pd = f.b.pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
			    IBV_QP_EX_WITH_SEND;
	f.b.qp = ibv_create_qp_ex(f.b.ctx, &ia);
	CHECK(f.b.qp);
	CHECK_EQ(ibv_destroy_qp(f.a.qp), 0);
	CHECK_EQ(ibv_destroy_qp(saved), 0);
	{
		struct ibv_qp_init_attr a2;

		memset(&a2, 0, sizeof(a2));
		a2.send_cq = a2.recv_cq = f.a.cq;
		a2.qp_type = IBV_QPT_RC;
		a2.cap.max_send_wr = a2.cap.max_recv_wr = 16;
		a2.cap.max_send_sge = a2.cap.max_recv_sge = 1;
		f.a.qp = ibv_create_qp(f.a.pd, &a2);
		CHECK(f.a.qp);
	}
	ep_connect(&f.a, f.b.qp->qp_num);
	ep_connect(&f.b, f.a.qp->qp_num);
	qx = ibv_qp_to_qp_ex(f.b.qp);
	CHECK(qx);
	k1 = ibv_inc_rkey(f.mw->rkey);
	bi = (struct ibv_mw_bind_info){ .mr = f.mr,
					.addr = (uintptr_t)f.b.buf + WIN_OFF,
					.length = WIN_LEN,
					.mw_access_flags = RW };
	ibv_wr_start(qx);
	qx->wr_id = 91;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qx, f.mw, k1, &bi);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	EXPECT_WC(f.b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 91);
	CHECK_EQ(wc.opcode, IBV_WC_BIND_MW);
	win_write(&f, k1, 0, 64, IBV_WC_SUCCESS);
	ibv_wr_start(qx);
	qx->wr_id = 92;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(qx, k1);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	EXPECT_WC(f.b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 92);
	CHECK_EQ(wc.opcode, IBV_WC_LOCAL_INV);
	win_write(&f, k1, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);
}

SV_TEST(dereg_mr_with_bound_window)
{
	struct fix f;

	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RW, f.mr, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_dereg_mr(f.mr), EBUSY);
	/* Refused means untouched: the window still works. */
	win_write(&f, f.mw->rkey, 0, 64, IBV_WC_SUCCESS);
	/* Unbound (zero-length bind), the MR goes. */
	bind1(&f, 0, 0, 0, NULL, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_dereg_mr(f.mr), 0);
	f.mr = ibv_reg_mr(f.b.pd, f.b.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(f.mr);
	fix_close(&f);

	/* Type 2: invalidation releases the MR too. */
	fix_open(&f, IBV_MW_TYPE_2);
	bind2(&f, f.b.qp, f.b.cq, ibv_inc_rkey(f.mw->rkey), WIN_OFF, WIN_LEN,
	      RW, IBV_WC_SUCCESS);
	CHECK(ibv_dereg_mr(f.mr) != 0);
	local_inv(&f.b, ibv_inc_rkey(f.mw->rkey), IBV_WC_SUCCESS);
	CHECK_EQ(ibv_dereg_mr(f.mr), 0);
	f.mr = ibv_reg_mr(f.b.pd, f.b.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(f.mr);
	fix_close(&f);
}

/*
 * LOCAL_WRITE in a bind's access flags (programs pass their MR's flags
 * along): mlx5 and rxe bind, and the window then works, is invalidated
 * and dies with its dealloc exactly like one bound without it.
 */
#define RWA_LW (RW | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE)

/* a reads, writes and adds through rkey: all succeed. */
static void win_rw_atomic(struct fix *f, uint32_t rkey)
{
	struct ibv_wc wc;
	uint64_t *target = (uint64_t *)(void *)(f->b.buf + WIN_OFF + 2048), got;

	fill(f->a.buf, 512, 11);
	win_write(f, rkey, 0, 512, IBV_WC_SUCCESS);
	CHECK(!memcmp(f->b.buf + WIN_OFF, f->a.buf, 512));
	post_send_op(&f->a, 2, IBV_WR_RDMA_READ, f->a.buf + 8192, 512,
		     (uintptr_t)f->b.buf + WIN_OFF, rkey);
	EXPECT_WC(f->a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!memcmp(f->a.buf + 8192, f->b.buf + WIN_OFF, 512));
	*target = 100;
	eu_post_keyed(&f->a, 3, IBV_WR_ATOMIC_FETCH_AND_ADD,
		      (uintptr_t)f->a.buf + 40000, 8, f->a.mr->lkey,
		      (uintptr_t)target, rkey, 5, 0);
	EXPECT_WC(f->a.cq, &wc, IBV_WC_SUCCESS);
	memcpy(&got, f->a.buf + 40000, 8);
	CHECK_EQ(got, 100);
	CHECK_EQ(*target, 105);
}

SV_TEST(mw_bind_with_local_write)
{
	struct fix f;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge s;
	struct ibv_wc wc;
	uint32_t k;

	/* Type 1 (ibv_bind_mw): works, then dies with the window. */
	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RWA_LW, f.mr, IBV_WC_SUCCESS);
	win_rw_atomic(&f, f.mw->rkey);
	k = f.mw->rkey;
	CHECK_EQ(ibv_dealloc_mw(f.mw), 0);
	f.mw = NULL;
	win_write(&f, k, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* Type 1, rebound by a zero-length bind: unbound. */
	fix_open(&f, IBV_MW_TYPE_1);
	bind1(&f, WIN_OFF, WIN_LEN, RWA_LW, f.mr, IBV_WC_SUCCESS);
	bind1(&f, 0, 0, 0, NULL, IBV_WC_SUCCESS);
	win_write(&f, f.mw->rkey, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* Type 2 (IBV_WR_BIND_MW), invalidated locally. */
	fix_open(&f, IBV_MW_TYPE_2);
	k = ibv_inc_rkey(f.mw->rkey);
	bind2(&f, f.b.qp, f.b.cq, k, WIN_OFF, WIN_LEN, RWA_LW, IBV_WC_SUCCESS);
	win_rw_atomic(&f, k);
	local_inv(&f.b, k, IBV_WC_SUCCESS);
	win_write(&f, k, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* Type 2, invalidated by the remote's SEND_WITH_INV. */
	fix_open(&f, IBV_MW_TYPE_2);
	k = ibv_inc_rkey(f.mw->rkey);
	bind2(&f, f.b.qp, f.b.cq, k, WIN_OFF, WIN_LEN,
	      RWA_LW | IBV_ACCESS_ZERO_BASED, IBV_WC_SUCCESS);
	fill(f.a.buf, 64, 4);
	post_send_op(&f.a, 1, IBV_WR_RDMA_WRITE, f.a.buf, 64, 128, k);
	EXPECT_WC(f.a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!memcmp(f.b.buf + WIN_OFF + 128, f.a.buf, 64));
	post_recv(&f.b, 80, f.b.buf + 32768, 64);
	memset(&wr, 0, sizeof(wr));
	s = (struct ibv_sge){ (uintptr_t)f.a.buf, 8, f.a.mr->lkey };
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = k;
	CHECK_EQ(ibv_post_send(f.a.qp, &wr, &bad), 0);
	EXPECT_WC(f.a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(f.b.cq, &wc, IBV_WC_SUCCESS);
	CHECK(wc.wc_flags & IBV_WC_WITH_INV);
	CHECK_EQ(wc.invalidated_rkey, k);
	post_send_op(&f.a, 1, IBV_WR_RDMA_WRITE, f.a.buf, 64, 128, k);
	EXPECT_WC(f.a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* Type 2, through a dealloc. */
	fix_open(&f, IBV_MW_TYPE_2);
	k = ibv_inc_rkey(f.mw->rkey);
	bind2(&f, f.b.qp, f.b.cq, k, WIN_OFF, WIN_LEN, RWA_LW, IBV_WC_SUCCESS);
	win_write(&f, k, 0, 64, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_dealloc_mw(f.mw), 0);
	f.mw = NULL;
	win_write(&f, k, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);

	/* Still checked: LOCAL_WRITE does not stand in for the MR's own
	 * LOCAL_WRITE that remote write needs (C10-74). */
	fix_open(&f, IBV_MW_TYPE_1);
	{
		struct ibv_mr *ro = ibv_reg_mr(f.b.pd, f.b.buf, EP_BUF,
					       IBV_ACCESS_REMOTE_READ |
						       IBV_ACCESS_MW_BIND);

		CHECK(ro);
		bind1(&f, WIN_OFF, WIN_LEN, RWA_LW, ro, IBV_WC_MW_BIND_ERR);
		CHECK_EQ(ibv_dereg_mr(ro), 0);
	}
	fix_close(&f);
}

/* The extended API binds with LOCAL_WRITE too. */
SV_TEST(mw_qp_ex_bind_with_local_write)
{
	struct fix f;
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp_ex *qx;
	struct ibv_mw_bind_info bi;
	struct ibv_wc wc;
	uint32_t k;

	fix_open(&f, IBV_MW_TYPE_2);
	CHECK_EQ(ibv_destroy_qp(f.a.qp), 0);
	CHECK_EQ(ibv_destroy_qp(f.b.qp), 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = f.b.cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.pd = f.b.pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
	f.b.qp = ibv_create_qp_ex(f.b.ctx, &ia);
	CHECK(f.b.qp);
	ia.send_cq = ia.recv_cq = f.a.cq;
	ia.pd = f.a.pd;
	ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
	f.a.qp = ibv_create_qp_ex(f.a.ctx, &ia);
	CHECK(f.a.qp);
	ep_connect(&f.a, f.b.qp->qp_num);
	ep_connect(&f.b, f.a.qp->qp_num);
	qx = ibv_qp_to_qp_ex(f.b.qp);
	k = ibv_inc_rkey(f.mw->rkey);
	bi = (struct ibv_mw_bind_info){ .mr = f.mr,
					.addr = (uintptr_t)f.b.buf + WIN_OFF,
					.length = WIN_LEN,
					.mw_access_flags = RWA_LW };
	ibv_wr_start(qx);
	qx->wr_id = 91;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qx, f.mw, k, &bi);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	EXPECT_WC(f.b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_BIND_MW);
	win_write(&f, k, 0, 64, IBV_WC_SUCCESS);
	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(qx, k);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	EXPECT_WC(f.b.cq, &wc, IBV_WC_SUCCESS);
	win_write(&f, k, 0, 64, IBV_WC_REM_ACCESS_ERR);
	fix_close(&f);
}

SV_TEST_MAIN()

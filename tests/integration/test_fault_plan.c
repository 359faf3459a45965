/* SPDX-License-Identifier: MIT */
/*
 * Fault plans (docs/faults.md) from SOFTVERBS_FAULT, each kind as an
 * application sees it: a verb that fails the n-th time with the chosen
 * errno and changes nothing; a QP whose packets are lost, doubled or
 * reordered (exactly the k-th, or by a seed that gives the same losses
 * every run); a send or receive completion forced to an error status that
 * moves the QP to ERR and flushes what follows; async events with their element
 * and state change.  Run by default (direct execution) and with
 * SOFTVERBS_DIRECT=0: a packet plan makes its QP send packets on both.
 * Each case sets the variable before its first verb (read once).
 */
#include "engine_util.h"
#include "sv_client.h"

#include <stdlib.h>

static void pair_plan(struct ep *a, struct ep *b, enum ibv_qp_type t,
		      const char *plan, uint8_t retry)
{
	setenv("SOFTVERBS_FAULT", plan, 1);
	ep_open(a, NULL, t); /* QP #1 */
	ep_open(b, a->ctx, t); /* QP #2 */
	/* timeout 8: ~1 ms (the engine's floor is 10 ms) */
	ep_connect_ex(a, b->qp->qp_num, 8, retry, 7, 1);
	ep_connect_ex(b, a->qp->qp_num, 8, retry, 7, 1);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	CHECK_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
	return a.qp_state;
}

/* The next async event of ctx, within 10 s. */
static void next_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };

	CHECK(poll(&p, 1, 10000) == 1);
	CHECK_EQ(ibv_get_async_event(ctx, ev), 0);
}

/* ------------------------------------------------------------ verbs -- */

SV_TEST(verb_reg_mr_fails_the_nth_call_only)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *m1, *m2, *m3;
	static char buf[3][4096];

	setenv("SOFTVERBS_FAULT", "verb=ibv_reg_mr,errno=ENOMEM,nth=2", 1);
	ctx = eu_open();
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	m1 = ibv_reg_mr(pd, buf[0], 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(m1);
	errno = 0;
	m2 = ibv_reg_mr(pd, buf[1], 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(!m2);
	CHECK_EQ(errno, ENOMEM);
	m3 = ibv_reg_mr(pd, buf[2], 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(m3);
	CHECK(m3->lkey != m1->lkey);
	CHECK_EQ(ibv_dereg_mr(m1), 0);
	CHECK_EQ(ibv_dereg_mr(m3), 0);
	/* Nothing was left behind by the failed call: the PD goes. */
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(verb_create_and_alloc_fail_with_the_errno)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp_init_attr ia;

	setenv("SOFTVERBS_FAULT",
	       "verb=ibv_alloc_pd,errno=EIO;verb=create_cq,errno=ENOSPC,nth=1;"
	       "verb=ibv_create_qp,errno=EAGAIN,nth=2+;bogus=1", 1);
	ctx = eu_open();
	errno = 0;
	CHECK(!ibv_alloc_pd(ctx));
	CHECK_EQ(errno, EIO);
	pd = ibv_alloc_pd(ctx); /* nth=1 by default: once */
	CHECK(pd);
	errno = 0;
	CHECK(!ibv_create_cq(ctx, 16, NULL, NULL, 0));
	CHECK_EQ(errno, ENOSPC);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	{
		struct ibv_qp *q1 = ibv_create_qp(pd, &ia);

		CHECK(q1);
		/* nth=2+: the second call and every one after, the
		 * extended verb's too (rdma_create_qp calls that one). */
		for (int i = 0; i < 3; i++) {
			errno = 0;
			CHECK(!ibv_create_qp(pd, &ia));
			CHECK_EQ(errno, EAGAIN);
		}
		{
			struct ibv_qp_init_attr_ex ix;

			memset(&ix, 0, sizeof(ix));
			ix.send_cq = ix.recv_cq = cq;
			ix.qp_type = IBV_QPT_RC;
			ix.cap = ia.cap;
			ix.comp_mask = IBV_QP_INIT_ATTR_PD;
			ix.pd = pd;
			errno = 0;
			CHECK(!ibv_create_qp_ex(ctx, &ix));
			CHECK_EQ(errno, EAGAIN);
		}
		CHECK_EQ(ibv_destroy_qp(q1), 0);
	}
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST(verb_modify_and_post_fail_and_change_nothing)
{
	struct ep a, b;
	struct ibv_qp_attr attr;
	struct ibv_sge s;
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_recv_wr rwr, *rbad = NULL;
	struct ibv_wc wc;

	setenv("SOFTVERBS_FAULT",
	       "verb=ibv_modify_qp,errno=EINVAL,nth=1;"
	       "verb=ibv_post_send,errno=ENOMEM,nth=1;"
	       "verb=ibv_post_recv,errno=ENOMEM,nth=1", 1);
	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	CHECK_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						    IBV_QP_PORT |
						    IBV_QP_ACCESS_FLAGS),
		 EINVAL);
	CHECK_EQ(qp_state(a.qp), IBV_QPS_RESET);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	CHECK_EQ(qp_state(a.qp), IBV_QPS_RTS);
	/* post_recv's first call fails: nothing queued (the send below
	 * finds the one posted after it). */
	s = (struct ibv_sge){ (uintptr_t)b.buf, 64, b.mr->lkey };
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 7;
	rwr.sg_list = &s;
	rwr.num_sge = 1;
	CHECK_EQ(ibv_post_recv(b.qp, &rwr, &rbad), ENOMEM);
	CHECK(rbad == &rwr);
	rwr.wr_id = 8;
	CHECK_EQ(ibv_post_recv(b.qp, &rwr, &rbad), 0);
	memset(&wr, 0, sizeof(wr));
	s = (struct ibv_sge){ (uintptr_t)a.buf, 16, a.mr->lkey };
	wr.wr_id = 1;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), ENOMEM);
	CHECK(bad == &wr);
	CHECK(!poll1(a.cq, &wc, 50)); /* nothing was posted */
	wr.wr_id = 2;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 2);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 8);
}

/* ---------------------------------------------------------- status -- */

SV_TEST_T(status_after_three_successes_then_err_and_flush, 60)
{
	struct ep a, b;
	struct ibv_wc wc;

	pair_plan(&a, &b, IBV_QPT_RC, "qp=#1,status=RETRY_EXC_ERR,after=3", 7);
	for (int i = 0; i < 5; i++)
		post_recv(&b, 100 + i, b.buf + 64 * i, 64);
	post_recv(&a, 200, a.buf + 8192, 64);
	for (int i = 0; i < 3; i++) {
		post_send_op(&a, i, IBV_WR_SEND, a.buf, 16, 0, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, (uint64_t)i);
	}
	post_send_op(&a, 3, IBV_WR_SEND, a.buf, 16, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_RETRY_EXC_ERR);
	CHECK_EQ(wc.wr_id, 3);
	CHECK_EQ(wc.qp_num, a.qp->qp_num);
	/* The rest flushes, as after a real error: a's receive, and what is
	 * posted from now on. */
	EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 200);
	CHECK_EQ(qp_state(a.qp), IBV_QPS_ERR);
	post_send_op(&a, 4, IBV_WR_SEND, a.buf, 16, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 4);
	/* The peer is untouched. */
	CHECK_EQ(qp_state(b.qp), IBV_QPS_RTS);
}

/* A receive completion forced (recv): b's third receive, as b polls it,
 * is LOC_LEN_ERR; b moves to ERR and its other receives flush; the
 * sender saw its three SENDs succeed (the data was placed). */
SV_TEST_T(status_recv_after_two_then_err_and_flush, 60)
{
	struct ep a, b;
	struct ibv_wc wc;

	pair_plan(&a, &b, IBV_QPT_RC, "qp=#2,status=LOC_LEN_ERR,recv,after=2",
		  7);
	for (int i = 0; i < 5; i++)
		post_recv(&b, 100 + i, b.buf + 64 * i, 64);
	for (int i = 0; i < 3; i++) {
		post_send_op(&a, i, IBV_WR_SEND, a.buf, 16, 0, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	}
	for (int i = 0; i < 2; i++) {
		EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, (uint64_t)(100 + i));
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
		CHECK_EQ(wc.byte_len, 16);
	}
	EXPECT_WC(b.cq, &wc, IBV_WC_LOC_LEN_ERR);
	CHECK_EQ(wc.wr_id, 102);
	CHECK_EQ(wc.qp_num, b.qp->qp_num);
	CHECK_EQ(qp_state(b.qp), IBV_QPS_ERR);
	for (int i = 3; i < 5; i++) {
		EXPECT_WC(b.cq, &wc, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ(wc.wr_id, (uint64_t)(100 + i));
	}
	/* Send completions are not what the plan names. */
	CHECK_EQ(qp_state(a.qp), IBV_QPS_RTS);
}

/* ---------------------------------------------------------- events -- */

SV_TEST_T(event_qp_fatal_at_rts_moves_the_qp_to_err, 60)
{
	struct ep a, b;
	struct ibv_async_event ev;
	struct ibv_wc wc;

	pair_plan(&a, &b, IBV_QPT_RC, "event=QP_FATAL,qp=#1", 7);
	next_event(a.ctx, &ev);
	CHECK_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
	CHECK(ev.element.qp == a.qp);
	ibv_ack_async_event(&ev);
	CHECK_EQ(qp_state(a.qp), IBV_QPS_ERR);
	CHECK_EQ(qp_state(b.qp), IBV_QPS_RTS);
	post_send_op(&a, 9, IBV_WR_SEND, a.buf, 16, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 9);
}

SV_TEST_T(event_path_mig_and_cq_err_change_no_state, 60)
{
	struct ep a, b;
	struct ibv_async_event ev;
	struct ibv_wc wc;

	pair_plan(&a, &b, IBV_QPT_RC,
		  "event=PATH_MIG,qp=#1;event=IBV_EVENT_CQ_ERR,qp=#1", 7);
	next_event(a.ctx, &ev);
	CHECK_EQ(ev.event_type, IBV_EVENT_PATH_MIG);
	CHECK(ev.element.qp == a.qp);
	ibv_ack_async_event(&ev);
	next_event(a.ctx, &ev);
	CHECK_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
	CHECK(ev.element.cq == a.cq);
	ibv_ack_async_event(&ev);
	CHECK_EQ(qp_state(a.qp), IBV_QPS_RTS);
	post_recv(&b, 1, b.buf, 64);
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 16, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
}

SV_TEST_T(event_port_err_after_two_completions, 60)
{
	struct ep a, b;
	struct ibv_async_event ev;
	struct ibv_wc wc;

	pair_plan(&a, &b, IBV_QPT_RC, "qp=#1,event=PORT_ERR,after=2", 7);
	for (int i = 0; i < 2; i++) {
		post_recv(&b, 100 + i, b.buf + 64 * i, 64);
		post_send_op(&a, i, IBV_WR_SEND, a.buf, 16, 0, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	}
	next_event(a.ctx, &ev);
	CHECK_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
	CHECK_EQ(ev.element.port_num, 1);
	ibv_ack_async_event(&ev);
	/* A port event changes no QP. */
	CHECK_EQ(qp_state(a.qp), IBV_QPS_RTS);
}

SV_TEST_T(event_device_fatal_errors_every_qp, 60)
{
	struct ep a, b;
	struct ibv_async_event ev;
	struct ibv_wc wc;

	pair_plan(&a, &b, IBV_QPT_RC, "event=DEVICE_FATAL,qp=#2,after=1", 7);
	post_recv(&a, 300, a.buf + 8192, 64);
	post_recv(&a, 301, a.buf + 8192, 64);
	post_send_op(&b, 1, IBV_WR_SEND, b.buf, 16, 0, 0);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	next_event(a.ctx, &ev);
	CHECK_EQ(ev.event_type, IBV_EVENT_DEVICE_FATAL);
	ibv_ack_async_event(&ev);
	CHECK_EQ(qp_state(a.qp), IBV_QPS_ERR);
	CHECK_EQ(qp_state(b.qp), IBV_QPS_ERR);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS); /* the send b made */
	CHECK_EQ(wc.wr_id, 300);
	EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 301);
}

/* --------------------------------------------------------- packets -- */

/* Sends n one-packet messages a -> b (UC or RC), message i stamped i.
 * Returns in got[] the stamps b received, in order; *ngot of them.  The
 * last message passes every plan used here, so its arrival ends the
 * wait. */
static void stream(struct ep *a, struct ep *b, int n, uint8_t *got, int *ngot)
{
	struct ibv_wc wc;

	for (int i = 0; i < n; i++)
		post_recv(b, (uint64_t)i, b->buf + 64 * i, 64);
	for (int i = 0; i < n; i++) {
		a->buf[64 * i] = (char)(i + 1);
		post_send_op(a, (uint64_t)i, IBV_WR_SEND, a->buf + 64 * i, 32,
			     0, 0);
		EXPECT_WC(a->cq, &wc, IBV_WC_SUCCESS);
	}
	*ngot = 0;
	for (;;) {
		CHECK(poll1(b->cq, &wc, 10000));
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		got[(*ngot)++] = (uint8_t)b->buf[64 * wc.wr_id];
		if (got[*ngot - 1] == n)
			return;
	}
}

SV_TEST_T(packet_uc_drop_exactly_the_second, 60)
{
	struct ep a, b;
	uint8_t got[8];
	int n;

	pair_plan(&a, &b, IBV_QPT_UC, "qp=#1:drop,nth=2", 7);
	stream(&a, &b, 4, got, &n);
	CHECK_EQ(n, 3);
	CHECK_EQ(got[0], 1);
	CHECK_EQ(got[1], 3);
	CHECK_EQ(got[2], 4);
}

/* delay: the 2nd packet leaves a second late, the ones after it do not
 * wait: b receives 1, 3, 4, then 2 (UC takes a message that starts late,
 * as rxe does). */
SV_TEST_T(packet_uc_delay_the_second, 60)
{
	struct ep a, b;
	struct ibv_wc wc;
	uint8_t got[4];

	pair_plan(&a, &b, IBV_QPT_UC, "qp=#1,delay=1s,nth=2", 7);
	for (int i = 0; i < 4; i++)
		post_recv(&b, (uint64_t)i, b.buf + 64 * i, 64);
	for (int i = 0; i < 4; i++) {
		a.buf[64 * i] = (char)(i + 1);
		post_send_op(&a, (uint64_t)i, IBV_WR_SEND, a.buf + 64 * i, 32,
			     0, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	}
	for (int i = 0; i < 4; i++) {
		CHECK(poll1(b.cq, &wc, 10000));
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		got[i] = (uint8_t)b.buf[64 * wc.wr_id];
	}
	CHECK_EQ(got[0], 1);
	CHECK_EQ(got[1], 3);
	CHECK_EQ(got[2], 4);
	CHECK_EQ(got[3], 2);
}

SV_TEST_T(packet_gid_names_the_qp_by_its_peer, 60)
{
	struct ep a, b;
	uint8_t got[8];
	int n;

	/* Both QPs reach GID :: (engine_util's paths name no GID); a gets
	 * to RTR first, so the plan is a's. */
	pair_plan(&a, &b, IBV_QPT_UC, "gid=::,drop,nth=3", 7);
	stream(&a, &b, 4, got, &n);
	CHECK_EQ(n, 3);
	CHECK_EQ(got[0], 1);
	CHECK_EQ(got[1], 2);
	CHECK_EQ(got[2], 4);
}

SV_TEST_T(packet_rc_drop_all_gives_retry_exceeded, 60)
{
	struct ep a, b;
	struct ibv_wc wc;

	/* Direct execution would never lose a packet: the plan makes the
	 * QP use packets. */
	pair_plan(&a, &b, IBV_QPT_RC, "qp=#1,drop", 2);
	post_recv(&b, 1, b.buf, 64);
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 16, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_RETRY_EXC_ERR);
	CHECK_EQ(qp_state(a.qp), IBV_QPS_ERR);
	/* b's receive never filled. */
	CHECK(!poll1(b.cq, &wc, 50));
}

SV_TEST_T(packet_rc_dup_and_reorder_are_hidden, 60)
{
	struct ep a, b;
	uint8_t got[8];
	int n;

	pair_plan(&a, &b, IBV_QPT_RC,
		  "qp=#1,dup,nth=2;qp=#1,reorder,nth=4;peer=999999,drop", 7);
	stream(&a, &b, 6, got, &n);
	CHECK_EQ(n, 6);
	for (int i = 0; i < 6; i++)
		CHECK_EQ(got[i], i + 1);
}

/* The messages a seeded plan lets through, in a fresh process. */
static uint64_t seeded_run(const char *plan)
{
	int fds[2];
	pid_t pid;
	uint64_t mask = 0;
	int st;

	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct ep a, b;
		uint8_t got[64];
		int n;

		close(fds[0]);
		pair_plan(&a, &b, IBV_QPT_UC, plan, 7);
		stream(&a, &b, 41, got, &n);
		for (int i = 0; i < n; i++)
			mask |= 1ull << (got[i] - 1);
		if (write(fds[1], &mask, sizeof(mask)) != sizeof(mask))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	CHECK_EQ(read(fds[0], &mask, sizeof(mask)), (ssize_t)sizeof(mask));
	close(fds[0]);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return mask;
}

SV_TEST_T(packet_seed_gives_the_same_losses, 120)
{
	uint64_t m1 = seeded_run("qp=#1,drop=0.5,nth=1-40,seed=7");
	uint64_t m2 = seeded_run("qp=#1,drop=0.5,nth=1-40,seed=7");
	uint64_t m3 = seeded_run("qp=#1,drop=0.5,nth=1-40,seed=8");
	int lost = 40 - __builtin_popcountll(m1 & ((1ull << 40) - 1));

	CHECK_EQ(m1, m2);
	CHECK(m1 != m3);
	CHECK(lost > 5 && lost < 35); /* about half */
}

/* ---------------------------------------------------------- run time -- */

/* Adds a plan for this process through the daemon, as `softverbs fault
 * add --pid` does.  Its number. */
static uint32_t add_runtime(const char *plan)
{
	struct sv_fault_req req = { .cmd = SV_FAULT_ADD,
				    .pid = (uint32_t)getpid() };
	struct sv_fault_rep *rep = calloc(1, sizeof(*rep));
	uint32_t id;

	CHECK(rep);
	snprintf(req.text, sizeof(req.text), "%s", plan);
	CHECK_EQ(sv_call_simple(SV_OP_FAULT, 0, 0, -1, &req, sizeof(req), rep,
				sizeof(*rep)),
		 0);
	CHECK_EQ(rep->pid, (uint32_t)getpid());
	id = rep->id;
	free(rep);
	return id;
}

/* Sends a -> b until a send completes with st (the plan reached the
 * engine: it syncs on its own thread), for at most 20 s. */
static void send_until(struct ep *a, struct ep *b, enum ibv_wc_status st)
{
	struct ibv_wc wc;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0;; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			break;
		post_recv(b, (uint64_t)i, b->buf, 64);
		post_send_op(a, (uint64_t)i, IBV_WR_SEND, a->buf, 16, 0, 0);
		CHECK(poll1(a->cq, &wc, 10000));
		if (wc.status == st)
			return;
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK(poll1(b->cq, &wc, 10000));
	}
	CHECK(!"the run-time plan never acted");
}

SV_TEST_T(runtime_peer_plan_loses_what_a_sends, 120)
{
	struct ep a, b;
	struct sv_fault_req req = { .cmd = SV_FAULT_CLEAR };
	struct sv_fault_rep *rep = calloc(1, sizeof(*rep));
	char plan[64];

	/* a's QP runs directly before the plan (by default): the plan moves
	 * it to packets, so losses are possible at all. */
	pair_plan(&a, &b, IBV_QPT_RC, "", 2);
	snprintf(plan, sizeof(plan), "peer=%u,drop", b.qp->qp_num);
	req.id = add_runtime(plan);
	send_until(&a, &b, IBV_WC_RETRY_EXC_ERR);
	CHECK_EQ(qp_state(a.qp), IBV_QPS_ERR);
	CHECK(rep);
	CHECK_EQ(sv_call_simple(SV_OP_FAULT, 0, 0, -1, &req, sizeof(req), rep,
				sizeof(*rep)),
		 0);
	CHECK_EQ(rep->n, 1);
	free(rep);
}

SV_TEST_T(runtime_status_plan_on_a_running_qp, 120)
{
	struct ep a, b;
	struct ibv_wc wc;
	char plan[64];

	pair_plan(&a, &b, IBV_QPT_RC, "", 7);
	snprintf(plan, sizeof(plan), "qp=%u,status=REM_OP_ERR", a.qp->qp_num);
	add_runtime(plan);
	send_until(&a, &b, IBV_WC_REM_OP_ERR);
	CHECK_EQ(qp_state(a.qp), IBV_QPS_ERR);
	post_send_op(&a, 999, IBV_WR_SEND, a.buf, 16, 0, 0);
	for (;;) { /* b's receives flushed first, then this one */
		EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
		if (wc.wr_id == 999)
			break;
	}
}

SV_TEST_MAIN()

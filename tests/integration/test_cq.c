/* SPDX-License-Identifier: MIT */
/* CQs: create limits, resize, destroy rules, completion channels as real
 * fds, notification arming, the ibv_cq_ex poll API, completion timestamps,
 * overflow. */
#include "dp_util.h"

#include <fcntl.h>
#include <time.h>

SV_TEST(create_destroy_limits)
{
	struct sv_status_rep base;
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	struct ibv_cq *cq;
	struct ibv_wc wc;

	sv_test_baseline(&base);
	ctx = sv_test_open_dev();
	CHECK_EQ(ibv_query_device(ctx, &da), 0);
	CHECK_NULL_ERRNO(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
	CHECK_NULL_ERRNO(ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0),
			 EINVAL);
	CHECK_NULL_ERRNO(ibv_create_cq(ctx, 4, NULL, NULL, ctx->num_comp_vectors),
			 EINVAL);
	cq = ibv_create_cq(ctx, 16, (void *)0x1234, NULL, 0);
	CHECK(cq);
	CHECK(cq->cqe >= 16);
	CHECK(cq->context == ctx);
	CHECK(cq->cq_context == (void *)0x1234);
	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0);
	CHECK_EQ(ibv_req_notify_cq(cq, 0), 0);
	CHECK_EQ(ibv_resize_cq(cq, 64), 0);
	CHECK(cq->cqe >= 64);
	CHECK_EQ(ibv_resize_cq(cq, 0), EINVAL);
	CHECK_EQ(ibv_resize_cq(cq, da.max_cqe + 1), EINVAL);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(&base, 5000);
}

/* The channel is a real fd: poll() sees an event; ibv_get_cq_event names
 * the CQ; a non-blocking fd answers EAGAIN when empty; the channel is
 * busy while a CQ uses it. */
SV_TEST(channel_events)
{
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *ev_cq;
	struct ibv_qp *qp;
	struct ibv_wc wc[4];
	struct pollfd pfd;
	void *ev_ctx;
	struct dp d;

	dp_open(&d, 4);
	ch = ibv_create_comp_channel(d.ctx);
	CHECK(ch);
	CHECK(ch->fd >= 0);
	cq = ibv_create_cq(d.ctx, 8, (void *)0xabc, ch, 0);
	CHECK(cq);
	CHECK(cq->channel == ch);
	CHECK_EQ(ibv_destroy_comp_channel(ch), EBUSY);
	pfd = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	CHECK_EQ(fcntl(ch->fd, F_SETFL, O_NONBLOCK), 0);
	errno = 0;
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
	CHECK_EQ(errno, EAGAIN);

	/* Completions made by an ERR flush of the receive queue. */
	{
		struct ibv_qp_init_attr a = {
			.send_cq = d.cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 1, .max_recv_wr = 4,
				 .max_send_sge = 1, .max_recv_sge = 1 } };

		qp = ibv_create_qp(d.pd, &a);
		CHECK(qp);
	}
	CHECK_EQ(to_init(qp), 0);
	CHECK_EQ(post_recvs(qp, 1, 7), 0);
	/* Not armed: a completion makes no event. */
	CHECK_EQ(to_state(qp, IBV_QPS_ERR), 0);
	poll_n(cq, wc, 1);
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	/* Solicited-only arming still reports error completions, and a flush
	 * is one (ibv_req_notify_cq(3): a CQE is solicited "if the status is
	 * not successful"). */
	CHECK_EQ(ibv_req_notify_cq(cq, 1), 0);
	CHECK_EQ(post_recvs(qp, 1, 8), 0);
	CHECK_EQ(poll(&pfd, 1, 5000), 1);
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
	CHECK(ev_cq == cq);
	poll_n(cq, wc, 1);
	CHECK_EQ(wc[0].wr_id, 8);
	ibv_ack_cq_events(cq, 1);
	/* Armed for all: exactly one event, then disarmed. */
	CHECK_EQ(ibv_req_notify_cq(cq, 0), 0);
	CHECK_EQ(post_recvs(qp, 2, 9), 0);
	CHECK_EQ(poll(&pfd, 1, 5000), 1);
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
	CHECK(ev_cq == cq);
	CHECK(ev_ctx == (void *)0xabc);
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
	poll_n(cq, wc, 2);
	CHECK_EQ(wc[0].wr_id, 9);
	CHECK_EQ(wc[1].wr_id, 10);
	ibv_ack_cq_events(cq, 1);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0);
	dp_close(&d);
}

/* Destroying a CQ waits for the acks of the events read for it. */
struct ack_arg {
	struct ibv_cq *cq;
	volatile int acked;
};

static void *late_ack(void *p)
{
	struct ack_arg *a = p;

	sv_test_sleep_ms(200);
	a->acked = 1;
	ibv_ack_cq_events(a->cq, 1);
	return NULL;
}

SV_TEST(destroy_waits_for_ack)
{
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *ev_cq;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct ack_arg arg;
	pthread_t t;
	void *ev_ctx;
	struct dp d;

	dp_open(&d, 4);
	ch = ibv_create_comp_channel(d.ctx);
	CHECK(ch);
	cq = ibv_create_cq(d.ctx, 4, NULL, ch, 0);
	CHECK(cq);
	{
		struct ibv_qp_init_attr a = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 } };

		qp = ibv_create_qp(d.pd, &a);
		CHECK(qp);
	}
	CHECK_EQ(to_init(qp), 0);
	CHECK_EQ(ibv_req_notify_cq(cq, 0), 0);
	CHECK_EQ(post_recvs(qp, 1, 1), 0);
	CHECK_EQ(to_state(qp, IBV_QPS_ERR), 0);
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
	poll_n(cq, &wc, 1);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	arg.cq = cq;
	arg.acked = 0;
	CHECK_EQ(pthread_create(&t, NULL, late_ack, &arg), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(arg.acked, 1); /* it did wait */
	pthread_join(t, NULL);
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0);
	dp_close(&d);
}

SV_TEST(cq_ex_poll)
{
	struct ibv_cq_init_attr_ex a;
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_cq_ex *cx;
	struct ibv_qp *qp;
	struct dp d;

	dp_open(&d, 4);
	memset(&a, 0, sizeof(a));
	a.cqe = 8;
	a.wc_flags = IBV_WC_EX_WITH_CVLAN; /* a VLAN: not on this device */
	CHECK_NULL_ERRNO(ibv_create_cq_ex(d.ctx, &a), EOPNOTSUPP);
	a.wc_flags = IBV_WC_STANDARD_FLAGS;
	a.comp_mask = 1u << 7; /* unknown bit */
	CHECK_NULL_ERRNO(ibv_create_cq_ex(d.ctx, &a), EINVAL);
	a.comp_mask = 0;
	cx = ibv_create_cq_ex(d.ctx, &a);
	CHECK(cx);
	CHECK_EQ(ibv_start_poll(cx, &pa), ENOENT);
	{
		struct ibv_qp_init_attr qa = {
			.send_cq = ibv_cq_ex_to_cq(cx),
			.recv_cq = ibv_cq_ex_to_cq(cx), .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 1, .max_recv_wr = 4,
				 .max_send_sge = 1, .max_recv_sge = 1 } };

		qp = ibv_create_qp(d.pd, &qa);
		CHECK(qp);
	}
	CHECK_EQ(to_init(qp), 0);
	CHECK_EQ(post_recvs(qp, 3, 40), 0);
	CHECK_EQ(to_state(qp, IBV_QPS_ERR), 0);
	{
		int n = 0, err;

		for (int spins = 0; (err = ibv_start_poll(cx, &pa)) == ENOENT &&
				    spins < 1000000; spins++)
			;
		CHECK_EQ(err, 0);
		do {
			CHECK_EQ(cx->wr_id, 40 + n);
			CHECK_EQ(cx->status, IBV_WC_WR_FLUSH_ERR);
			CHECK_EQ(ibv_wc_read_qp_num(cx), qp->qp_num);
			CHECK_EQ(ibv_wc_read_opcode(cx), IBV_WC_RECV);
			n++;
		} while (ibv_next_poll(cx) == 0);
		ibv_end_poll(cx);
		CHECK_EQ(n, 3);
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cx)), 0);
	dp_close(&d);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Completion timestamps (ibv_create_cq_ex with the timestamp wc_flags):
 * the device clock is CLOCK_MONOTONIC in ns (hca_core_clock 1,000,000 kHz),
 * each completion stamped when it was made, between the post and the poll,
 * never going backwards on a CQ, kept by ibv_resize_cq; the wall-clock
 * reading is the same instant in CLOCK_REALTIME.  Both paths run this
 * (test_cq_packets: SOFTVERBS_DIRECT=0).
 */
SV_TEST(cq_ex_timestamps)
{
	enum { N = 16 };
	struct ibv_cq_init_attr_ex a = {
		.cqe = 4 * N,
		.wc_flags = IBV_WC_STANDARD_FLAGS |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
	};
	struct ibv_cq_init_attr_ex pl = { .cqe = 4,
					  .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_device_attr_ex dx;
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	uint64_t t0, t1, r0, r1, last;
	static char buf[2][64];
	struct ibv_cq_ex *scq, *rcq, *plain;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *mr;
	struct dp d;

	dp_open(&d, 4);
	CHECK_EQ(ibv_query_device_ex(d.ctx, NULL, &dx), 0);
	CHECK_EQ(dx.hca_core_clock, 1000000);
	CHECK_EQ(dx.completion_timestamp_mask, UINT64_MAX);
	t0 = mono_ns();
	CHECK_EQ(ibv_query_rt_values_ex(d.ctx, &v), 0);
	t1 = mono_ns();
	CHECK_EQ(v.comp_mask, IBV_VALUES_MASK_RAW_CLOCK);
	CHECK_EQ(v.raw_clock.tv_sec, 0);
	CHECK((uint64_t)v.raw_clock.tv_nsec >= t0 &&
	      (uint64_t)v.raw_clock.tv_nsec <= t1);
	v.comp_mask = 0;
	CHECK_EQ(ibv_query_rt_values_ex(d.ctx, &v), 0);
	CHECK_EQ(v.comp_mask, 0);

	/* Without the flags the accessors are not there. */
	plain = ibv_create_cq_ex(d.ctx, &pl);
	CHECK(plain);
	CHECK(plain->read_completion_ts == NULL);
	CHECK(plain->read_completion_wallclock_ns == NULL);
	scq = ibv_create_cq_ex(d.ctx, &a);
	CHECK(scq);
	rcq = ibv_create_cq_ex(d.ctx, &a);
	CHECK(rcq);
	CHECK(rcq->read_completion_ts != NULL);
	CHECK(rcq->read_completion_wallclock_ns != NULL);
	mr = ibv_reg_mr(d.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	{
		struct ibv_qp_init_attr qi = {
			.send_cq = ibv_cq_ex_to_cq(scq),
			.recv_cq = ibv_cq_ex_to_cq(rcq), .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = N, .max_recv_wr = N,
				 .max_send_sge = 1, .max_recv_sge = 1 } };

		qa = ibv_create_qp(d.pd, &qi);
		CHECK(qa);
		qb = ibv_create_qp(d.pd, &qi);
		CHECK(qb);
	}
	dp_connect(qa, qb);
	t0 = mono_ns();
	r0 = real_ns();
	for (int i = 0; i < N; i++) {
		struct ibv_sge rs = { .addr = (uintptr_t)buf[1], .length = 64,
				      .lkey = mr->lkey };
		struct ibv_sge ss = { .addr = (uintptr_t)buf[0], .length = 8,
				      .lkey = mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 100 + (uint64_t)i,
					  .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct ibv_send_wr sw = { .wr_id = (uint64_t)i, .sg_list = &ss,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *sbad;

		CHECK_EQ(ibv_post_recv(qb, &rw, &rbad), 0);
		CHECK_EQ(ibv_post_send(qa, &sw, &sbad), 0);
	}
	/* The sends' completions, stamped in order between post and poll. */
	last = t0;
	for (int n = 0; n < N; n++) {
		int err;

		for (int spins = 0;
		     (err = ibv_start_poll(scq, &pa)) == ENOENT && spins < 5000000;
		     spins++)
			;
		CHECK_EQ(err, 0);
		CHECK_EQ(scq->status, IBV_WC_SUCCESS);
		CHECK_EQ(scq->wr_id, (uint64_t)n);
		CHECK(ibv_wc_read_completion_ts(scq) >= last);
		last = ibv_wc_read_completion_ts(scq);
		ibv_end_poll(scq);
	}
	CHECK(last <= mono_ns());
	/* The receives' completions were made by now, or are coming: a
	 * resize to N (never fewer than they will be) rewrites those held,
	 * and must carry their stamps. */
	CHECK_EQ(ibv_resize_cq(ibv_cq_ex_to_cq(rcq), N), 0);
	last = t0;
	for (int n = 0; n < N; n++) {
		uint64_t ts, wall;
		int err;

		for (int spins = 0;
		     (err = ibv_start_poll(rcq, &pa)) == ENOENT && spins < 5000000;
		     spins++)
			;
		CHECK_EQ(err, 0);
		CHECK_EQ(rcq->status, IBV_WC_SUCCESS);
		CHECK_EQ(rcq->wr_id, 100 + (uint64_t)n);
		ts = ibv_wc_read_completion_ts(rcq);
		wall = ibv_wc_read_completion_wallclock_ns(rcq);
		t1 = mono_ns();
		r1 = real_ns();
		CHECK(ts >= last && ts <= t1);
		last = ts;
		/* The same instant on the wall clock (a second of slack: the
		 * conversion reads two clocks, and a loaded machine may stop
		 * us between them). */
		CHECK(wall + 1000000000u >= r0 && wall <= r1 + 1000000000u);
		ibv_end_poll(rcq);
	}
	CHECK_EQ(ibv_destroy_qp(qa), 0);
	CHECK_EQ(ibv_destroy_qp(qb), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(scq)), 0);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(rcq)), 0);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(plain)), 0);
	dp_close(&d);
}

/* A full CQ loses the next completion and reports IBV_EVENT_CQ_ERR. */
SV_TEST(overflow)
{
	struct ibv_async_event ev;
	struct ibv_wc wc[8];
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct dp d;

	dp_open(&d, 4);
	cq = ibv_create_cq(d.ctx, 2, NULL, NULL, 0);
	CHECK(cq);
	{
		struct ibv_qp_init_attr a = {
			.send_cq = d.cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 1, .max_recv_wr = 8,
				 .max_send_sge = 1, .max_recv_sge = 1 } };

		qp = ibv_create_qp(d.pd, &a);
		CHECK(qp);
	}
	CHECK_EQ(to_init(qp), 0);
	CHECK_EQ(post_recvs(qp, (int)cq->cqe + 2, 0), 0);
	CHECK_EQ(to_state(qp, IBV_QPS_ERR), 0);
	CHECK_EQ(ibv_get_async_event(d.ctx, &ev), 0);
	CHECK_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
	CHECK(ev.element.cq == cq);
	ibv_ack_async_event(&ev);
	CHECK_EQ(ibv_poll_cq(cq, 8, wc), cq->cqe);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	dp_close(&d);
}

SV_TEST_MAIN()

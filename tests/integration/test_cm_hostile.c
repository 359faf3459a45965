/* SPDX-License-Identifier: MIT */
/*
 * The connection manager against hostile CM MADs from the wire (docs/
 * wire.md "The connection manager"; cm_wire_util.h for the three hosts):
 *
 *  - answers go to the datagram's sender: a REQ from C whose primary path
 *    names B is C's connection -- its REPs, their retries and the REJ
 *    that ends them reach C, never B; so do the REJ, DREP and SIDR_REP
 *    that answer MADs about nothing; a REQ whose rdma_cm header claims
 *    B's address is refused (to C);
 *  - what a REQ asks for is clamped: a REQ asking for 2.4-hour ACK and
 *    response timeouts gets a QP ACK timeout and REP retries of ~4 s;
 *  - a request whose requester goes silent ends when the requester would
 *    have given up: REJECTED (timeout) if the application has it, gone
 *    with its CONNECT_REQUEST if not;
 *  - half-open connections are bounded per source and per listener: the
 *    excess REQs get REJ "no resources", counted in the daemon's status;
 *    another host connects meanwhile; all of it ends in bounded time and
 *    the daemon holds what it held before.
 */
#include "cm_wire_util.h"

static struct rdma_event_channel *chan_new(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	CHECK(ch);
	return ch;
}

static uint64_t ms_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* A CM message of attr with a transaction ID, all else zero. */
static void msg_new(struct svd_cm_msg *m, uint16_t attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	m->attr_id = attr;
	m->tid = tid;
}

SV_TEST_T(answers_go_to_the_sender, 120)
{
	struct rdma_conn_param cp = { .qp_num = 0x777, .responder_resources = 1,
				      .initiator_depth = 1 };
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *s;
	struct xsock b, c, tx;
	struct svd_cm_msg m, r;
	struct cmnet n;
	struct reqp p;
	uint16_t port = 0;
	int reps = 0;

	cmnet_up(&n, NULL);
	xsock_open(&n, &b, B_IP, ROCE_PORT);
	xsock_open(&n, &c, C_IP, ROCE_PORT);
	xsock_open(&n, &tx, C_IP, 0);
	ch = chan_new();
	l = l_listen(ch, RDMA_PS_TCP, &port);

	/* A REQ from C whose primary path names B as the requester: the
	 * connection is C's.  Accepted, its REP goes to C, again on the
	 * REQ's timeout (64 ms) twice, and the REJ "timeout" when the
	 * retries are spent. */
	p = (struct reqp){ .comm = 0x1001, .port = port, .src_ip = C_IP,
			   .path_ip = B_IP, .lcrt = 14, .rcrt = 20, .ack = 16,
			   .retries = 2 };
	req_make(&m, &p);
	xsend(&tx, &m);
	ev = CM_EXPECT(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK(cm_peer_is(s, C_IP));
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(rdma_accept(s, &cp), 0);
	for (;;) {
		if (!xrecv(&c, 10000, &r))
			sv_test_fail(__FILE__, __LINE__,
				     "C got %d REPs and no REJ in 10 s", reps);
		CHECK_EQ(r.tid, m.tid);
		if (r.attr_id == CM_ATTR_REP) {
			CHECK_EQ(r.rep.remote_comm_id, 0x1001);
			CHECK_EQ(r.rep.local_qpn, 0x777);
			reps++;
			continue;
		}
		CHECK_EQ(r.attr_id, CM_ATTR_REJ);
		CHECK_EQ(r.rej.reason, CM_REJ_TIMEOUT);
		CHECK_EQ(r.rej.remote_comm_id, 0x1001);
		break;
	}
	CHECK_EQ(reps, 3);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
	CHECK_EQ(rdma_destroy_id(s), 0);

	/* A REQ from C whose rdma_cm header says it comes from B's address
	 * (what the application would be told): refused, to C. */
	p.comm = 0x1002;
	p.src_ip = B_IP;
	req_make(&m, &p);
	xsend(&tx, &m);
	xexpect(&c, CM_ATTR_REJ, 10000, &r);
	CHECK_EQ(r.rej.reason, CM_REJ_CONSUMER_DEFINED);
	CHECK_EQ(r.rej.remote_comm_id, 0x1002);
	cm_none(ch, 100);

	/* A REQ from C for a port nobody listens on, naming B: to C. */
	p.comm = 0x1003;
	p.src_ip = C_IP;
	p.port = (uint16_t)(port + 1);
	req_make(&m, &p);
	xsend(&tx, &m);
	xexpect(&c, CM_ATTR_REJ, 10000, &r);
	CHECK_EQ(r.rej.reason, CM_REJ_INVALID_SERVICE_ID);
	CHECK_EQ(r.rej.remote_comm_id, 0x1003);

	/* A DREQ, a REP and a SIDR_REQ about nothing: DREP, REJ "invalid
	 * comm ID" and SIDR_REP "unsupported", each to C. */
	msg_new(&m, CM_ATTR_DREQ, 0x1004);
	m.dreq.local_comm_id = 0x1004;
	m.dreq.remote_comm_id = 0xdead;
	xsend(&tx, &m);
	xexpect(&c, CM_ATTR_DREP, 10000, &r);
	CHECK_EQ(r.drep.remote_comm_id, 0x1004);
	msg_new(&m, CM_ATTR_REP, 0x1005);
	m.rep.local_comm_id = 0x1005;
	m.rep.remote_comm_id = 0xbeef;
	xsend(&tx, &m);
	xexpect(&c, CM_ATTR_REJ, 10000, &r);
	CHECK_EQ(r.rej.reason, CM_REJ_INVALID_COMM_ID);
	CHECK_EQ(r.rej.remote_comm_id, 0x1005);
	msg_new(&m, CM_ATTR_SIDR_REQ, 0x1006);
	m.sidr_req.request_id = 0x1006;
	m.sidr_req.pkey = 0xffff;
	m.sidr_req.service_id = (uint64_t)RDMA_PS_UDP << 16 | port;
	cma_hdr(m.sidr_req.private_data, C_IP, 5000, L_IP);
	xsend(&tx, &m);
	xexpect(&c, CM_ATTR_SIDR_REP, 10000, &r);
	CHECK_EQ(r.sidr_rep.request_id, 0x1006);
	CHECK_EQ(r.sidr_rep.status, SIDR_UNSUPPORTED);

	/* Not one of them went to B (all of them left before C's last). */
	CHECK(!xrecv(&b, 200, &r));
	CHECK_EQ(rdma_destroy_id(l), 0);
	rdma_destroy_event_channel(ch);
	cmnet_down(&n);
}

/* A REQ asking for 2.4-hour timeouts and 15 retries is served within the
 * bounds (sv_param.h): its QP's ACK timeout, its REP's retries. */
SV_TEST_T(req_times_are_clamped, 120)
{
	struct rdma_conn_param cp = { .qp_num = 0x778, .responder_resources = 1,
				      .initiator_depth = 1 };
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *s;
	struct ibv_qp_attr a;
	struct xsock c, tx;
	struct svd_cm_msg m, r;
	struct cmnet n;
	struct reqp p;
	uint64_t t1, t2;
	uint16_t port = 0;
	int mask = 0;

	cmnet_up(&n, NULL);
	xsock_open(&n, &c, C_IP, ROCE_PORT);
	xsock_open(&n, &tx, C_IP, 0);
	ch = chan_new();
	l = l_listen(ch, RDMA_PS_TCP, &port);
	p = (struct reqp){ .comm = 0x2001, .port = port, .src_ip = C_IP,
			   .path_ip = C_IP, .lcrt = 31, .rcrt = 31, .ack = 31,
			   .retries = 15 };
	req_make(&m, &p);
	xsend(&tx, &m);
	ev = CM_EXPECT(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	/* The QP's ACK timeout (and timewait's length): the bound, not 31. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	CHECK_EQ(rdma_init_qp_attr(s, &a, &mask), 0);
	CHECK(mask & IBV_QP_TIMEOUT);
	CHECK_EQ(a.timeout, SV_CM_MAX_ACK_TIMEOUT);
	/* The REP goes again after ~4.1 s (the bound), not 2.3 hours: its
	 * timer starts inside rdma_accept. */
	t1 = ms_now();
	CHECK_EQ(rdma_accept(s, &cp), 0);
	xexpect(&c, CM_ATTR_REP, 10000, &r);
	xexpect(&c, CM_ATTR_REP, 15000, &r);
	t2 = ms_now();
	CHECK(t2 - t1 + 2 >= svd_cm_ms(SV_CM_MAX_RESPONSE_TIMEOUT));
	CHECK_EQ(r.rep.remote_comm_id, 0x2001);
	/* C turns it down: the application hears. */
	msg_new(&m, CM_ATTR_REJ, m.tid);
	m.rej.local_comm_id = 0x2001;
	m.rej.remote_comm_id = r.rep.local_comm_id;
	m.rej.message_rejected = 1;
	m.rej.reason = CM_REJ_CONSUMER_DEFINED;
	xsend(&tx, &m);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_REJECTED, CM_REJ_CONSUMER_DEFINED);
	CHECK_EQ(rdma_destroy_id(s), 0);
	CHECK_EQ(rdma_destroy_id(l), 0);
	rdma_destroy_event_channel(ch);
	cmnet_down(&n);
}

/* Whether the daemon's CM holds n rdma_cm ids, within ms. */
static int wait_ids(int want, int ms)
{
	uint64_t end = ms_now() + (uint64_t)ms;

	while (cm_daemon_ids() != want) {
		if (ms_now() > end)
			return 0;
		cm_sleep_ms(10);
	}
	return 1;
}

/* Requests whose requester never says another word: each ends when the
 * requester would have given up (2 x (256 ms + 2 x 2 ms) here). */
SV_TEST_T(silent_requests_expire, 120)
{
	struct rdma_event_channel *cha, *chb;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *la, *lb, *s;
	struct sv_status_rep st0, st;
	struct svd_cm_msg m;
	struct xsock tx;
	struct cmnet n;
	struct reqp p;
	uint16_t pa = 0, pb = 0;
	int ids;

	cmnet_up(&n, NULL);
	xsock_open(&n, &tx, C_IP, 0);
	cha = chan_new();
	chb = chan_new();
	la = l_listen(cha, RDMA_PS_TCP, &pa);
	lb = l_listen(chb, RDMA_PS_TCP, &pb);
	ids = cm_daemon_ids();
	CHECK_EQ(sv_test_status(&st0), 0);
	/* To la: the application has it. */
	p = (struct reqp){ .comm = 0x3001, .port = pa, .src_ip = C_IP,
			   .path_ip = C_IP, .lcrt = 14, .rcrt = 16, .ack = 10,
			   .retries = 1 };
	req_make(&m, &p);
	xsend(&tx, &m);
	ev = CM_EXPECT(cha, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	/* To lb: never fetched. */
	p.comm = 0x3002;
	p.port = pb;
	req_make(&m, &p);
	xsend(&tx, &m);
	CHECK(wait_ids(ids + 2, 10000));
	/* As if the requester's REJ "timeout" had come: */
	CM_EXPECT_ACK(cha, RDMA_CM_EVENT_REJECTED, CM_REJ_TIMEOUT);
	CHECK_EQ(rdma_destroy_id(s), 0);
	/* ... and the unfetched one is gone with its CONNECT_REQUEST. */
	CHECK(wait_ids(ids, 10000));
	cm_none(chb, 0);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.cm_expired - st0.cm_expired, 2);
	CHECK_EQ(st.cm_conns, 0);
	CHECK_EQ(rdma_destroy_id(la), 0);
	CHECK_EQ(rdma_destroy_id(lb), 0);
	rdma_destroy_event_channel(cha);
	rdma_destroy_event_channel(chb);
	cmnet_down(&n);
}

/* ---- half-open bounds ----------------------------------------------------- */

struct flood {
	struct rdma_event_channel *ch;
	struct xsock *rx, *tx;	/* where the source's answers come, whence it sends */
	const char *ip;
	struct reqp p;
	int reqs, rejs;		/* CONNECT_REQUESTs seen, REJs "no resources" */
};

/* count REQs from f's source (comm IDs from base), in bursts of 64 that
 * the daemon is let to take in before the next: each becomes a
 * CONNECT_REQUEST (its id kept, not answered) or a REJ to the source. */
static void flood(struct flood *f, uint32_t base, int count)
{
	struct svd_cm_msg m, r;
	int sent = 0;

	while (sent < count) {
		int burst = count - sent < 64 ? count - sent : 64;
		uint64_t end = ms_now() + 20000;

		for (int i = 0; i < burst; i++) {
			f->p.comm = base + (uint32_t)sent++;
			f->p.src_ip = f->p.path_ip = f->ip;
			req_make(&m, &f->p);
			xsend(f->tx, &m);
		}
		while (f->reqs + f->rejs < sent) {
			struct rdma_cm_event *ev = cm_try(f->ch);
			int got = 0;

			if (ev) {
				CHECK_EQ(ev->event, RDMA_CM_EVENT_CONNECT_REQUEST);
				CHECK(cm_peer_is(ev->id, f->ip));
				CHECK_EQ(rdma_ack_cm_event(ev), 0);
				f->reqs++;
				got = 1;
			}
			if (xrecv(f->rx, 0, &r)) {
				CHECK_EQ(r.attr_id, CM_ATTR_REJ);
				CHECK_EQ(r.rej.reason, CM_REJ_NO_RESOURCES);
				CHECK(r.rej.remote_comm_id >= base &&
				      r.rej.remote_comm_id < base + (uint32_t)count);
				f->rejs++;
				got = 1;
			}
			if (!got && ms_now() > end)
				sv_test_fail(__FILE__, __LINE__,
					     "%s: %d sent, %d CONNECT_REQUESTs and "
					     "%d REJs in 20 s", f->ip, sent,
					     f->reqs, f->rejs);
			if (!got)
				cm_sleep_ms(1);
		}
	}
}

SV_TEST_T(half_open_bounded, 300)
{
	enum { SRC = SV_CM_MAX_HALF_OPEN_SOURCE, LIS = SV_CM_MAX_HALF_OPEN_LISTENER };
	static struct xsock rx[5], tx[5];
	static struct flood f[5];
	static const char *ips[5] = { C_IP, D_IP(4), D_IP(5), D_IP(6), D_IP(7) };
	struct rdma_event_channel *ch;
	struct sv_status_rep st0, st;
	struct rdma_cm_id *l, *s;
	struct cmnet n;
	uint16_t port = 0;
	int ids, expired = 0;
	uint64_t end;

	cmnet_up(&n, y_client);
	ch = chan_new();
	l = l_listen(ch, RDMA_PS_TCP, &port);
	ids = cm_daemon_ids();
	CHECK_EQ(sv_test_status(&st0), 0);
	for (int i = 0; i < 5; i++) {
		xsock_open(&n, &rx[i], ips[i], ROCE_PORT);
		xsock_open(&n, &tx[i], ips[i], 0);
		/* Silent requesters that give up after 8 x (4.1 s + 2 x 128 ms),
		 * 35 s: long enough for what follows on a loaded machine,
		 * short enough to wait for. */
		f[i] = (struct flood){ .ch = ch, .rx = &rx[i], .tx = &tx[i],
				       .ip = ips[i],
				       .p = { .port = port, .lcrt = 20,
					      .rcrt = 20, .ack = 16,
					      .retries = 7 } };
	}

	/* One source: SRC requests are taken, the next 8 are refused. */
	flood(&f[0], 0x100000, SRC + 8);
	CHECK_EQ(f[0].reqs, SRC);
	CHECK_EQ(f[0].rejs, 8);
	/* Another host connects meanwhile, as if nothing happened. */
	y_connect_ok(&n, ch, port);
	/* Three more sources fill the listener; a fifth is refused. */
	for (int i = 1; i < 4; i++) {
		flood(&f[i], 0x200000 * (uint32_t)(i + 1), (LIS - SRC) / 3);
		CHECK_EQ(f[i].reqs, (LIS - SRC) / 3);
		CHECK_EQ(f[i].rejs, 0);
	}
	flood(&f[4], 0x900000, 1);
	CHECK_EQ(f[4].rejs, 1);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.cm_half_open, LIS);
	CHECK_EQ(st.cm_rej_source - st0.cm_rej_source, 8);
	CHECK_EQ(st.cm_rej_listener - st0.cm_rej_listener, 1);

	/* The requesters stay silent: each request ends when its requester
	 * would have given up, as if its REJ "timeout" had come. */
	end = ms_now() + 120000;
	while (expired < LIS) {
		struct rdma_cm_event *ev = cm_try(ch);

		if (!ev) {
			if (ms_now() > end)
				sv_test_fail(__FILE__, __LINE__,
					     "%d of %d requests ended in 120 s",
					     expired, LIS);
			cm_sleep_ms(5);
			continue;
		}
		CHECK_EQ(ev->event, RDMA_CM_EVENT_REJECTED);
		CHECK_EQ(ev->status, CM_REJ_TIMEOUT);
		s = ev->id;
		CHECK_EQ(rdma_ack_cm_event(ev), 0);
		CHECK_EQ(rdma_destroy_id(s), 0);
		expired++;
	}
	CHECK(wait_ids(ids, 10000));
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.cm_half_open, 0);
	CHECK_EQ(st.cm_expired - st0.cm_expired, LIS);
	/* And the listener serves again. */
	y_connect_ok(&n, ch, port);
	CHECK_EQ(rdma_destroy_id(l), 0);
	rdma_destroy_event_channel(ch);
	CHECK(wait_ids(0, 10000));
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.objects, st0.objects);
	cmnet_down(&n);
}

SV_TEST_MAIN()

/* SPDX-License-Identifier: MIT */
/*
 * rdma_cm as rdma-core gives it on a RoCE device (librdmacm.so.1 on the
 * daemon's CM): every event in order on both sides with its parameters,
 * the connection parameters in the QPs, private data at the IB CM limits,
 * rejects, nobody listening, a peer killed, the daemon killed, UD (SIDR),
 * many ids, and the errors for bad input.
 */
#include "cm_util.h"

#include <stdlib.h>

static struct rdma_event_channel *chan(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	CHECK(ch);
	return ch;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* One message src -> dst over their QPs (registered on the ids' PDs). */
static void exchange(struct rdma_cm_id *src, struct rdma_cm_id *dst,
		     uint8_t seed)
{
	uint8_t sbuf[256], rbuf[256], want[256];
	struct ibv_mr *smr = ibv_reg_mr(src->pd, sbuf, sizeof(sbuf),
					IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rmr = ibv_reg_mr(dst->pd, rbuf, sizeof(rbuf),
					IBV_ACCESS_LOCAL_WRITE);
	struct ibv_wc wc;

	CHECK(smr && rmr);
	fill(sbuf, sizeof(sbuf), seed);
	memcpy(want, sbuf, sizeof(want));
	memset(rbuf, 0, sizeof(rbuf));
	CHECK_EQ(rdma_post_recv(dst, NULL, rbuf, sizeof(rbuf), rmr), 0);
	CHECK_EQ(rdma_post_send(src, NULL, sbuf, sizeof(sbuf), smr, 0), 0);
	CHECK_EQ(rdma_get_send_comp(src, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(rdma_get_recv_comp(dst, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, sizeof(rbuf));
	CHECK(!memcmp(rbuf, want, sizeof(want)));
	CHECK_EQ(ibv_dereg_mr(smr), 0);
	CHECK_EQ(ibv_dereg_mr(rmr), 0);
}

/* A whole RC life: every event of both sides in order, with its
 * parameters; the parameters in both QPs; data both ways; disconnect with
 * DISCONNECTED and TIMEWAIT_EXIT on both sides. */
SV_TEST_T(rc_events_in_order, 60)
{
	struct rdma_event_channel *sch = chan(), *cch = chan();
	struct rdma_cm_id *l, *c, *s;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_RC), qia;
	struct rdma_conn_param cp, sp;
	struct ibv_qp_attr ca, sa;
	uint8_t cdata[56], sdata[196];
	union ibv_gid lo_gid;
	struct ibv_port_attr pa;
	uint16_t port = 0;

	l = cm_listen(sch, RDMA_PS_TCP, "0.0.0.0", &port);
	CHECK(!l->verbs); /* a wildcard binds no device */
	c = cm_resolved(cch, RDMA_PS_TCP, "127.0.0.1", port);
	/* The route: ours, loopback's GID both ways. */
	CHECK_EQ(((struct sockaddr_in *)rdma_get_local_addr(c))->sin_addr.s_addr,
		 htonl(INADDR_LOOPBACK));
	memset(&lo_gid, 0, sizeof(lo_gid));
	lo_gid.raw[10] = lo_gid.raw[11] = 0xff;
	lo_gid.raw[12] = 127;
	lo_gid.raw[15] = 1;
	CHECK(!memcmp(&c->route.addr.addr.ibaddr.sgid, &lo_gid, 16));
	CHECK(!memcmp(&c->route.addr.addr.ibaddr.dgid, &lo_gid, 16));
	CHECK_EQ(c->route.num_paths, 1);
	/* lo carries 64 KiB, but no path promises more than the port's
	 * active MTU, which modify_qp would refuse. */
	CHECK_EQ(ibv_query_port(c->verbs, 1, &pa), 0);
	CHECK_EQ(c->route.path_rec->mtu, pa.active_mtu);
	CHECK_EQ(c->route.path_rec->pkey, htobe16(0xffff));
	CHECK_EQ(cm_create_qp(c, &qa), 0);
	CHECK_EQ(c->qp->state, IBV_QPS_INIT);

	fill(cdata, sizeof(cdata), 1);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = cdata;
	cp.private_data_len = sizeof(cdata); /* the REQ's limit: 92 - 36 */
	cp.responder_resources = 2;
	cp.initiator_depth = 3;
	cp.retry_count = 5;
	cp.rnr_retry_count = 6;
	CHECK_EQ(rdma_connect(c, &cp), 0);

	ev = CM_EXPECT(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	CHECK(ev->listen_id == l);
	s = ev->id;
	CHECK(s != l && s->verbs && s->channel == sch);
	CHECK_EQ(ev->param.conn.private_data_len, 56);
	CHECK(!memcmp(ev->param.conn.private_data, cdata, sizeof(cdata)));
	/* Seen from the responder: the requester's depth is its resources. */
	CHECK_EQ(ev->param.conn.responder_resources, 3);
	CHECK_EQ(ev->param.conn.initiator_depth, 2);
	CHECK_EQ(ev->param.conn.retry_count, 5);
	CHECK_EQ(ev->param.conn.rnr_retry_count, 6);
	CHECK_EQ(ev->param.conn.qp_num, c->qp->qp_num);
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(ntohs(rdma_get_src_port(s)), port);
	CHECK_EQ(rdma_get_dst_port(s), rdma_get_src_port(c));
	CHECK_EQ(cm_create_qp(s, &qa), 0);

	fill(sdata, sizeof(sdata), 2);
	memset(&sp, 0, sizeof(sp));
	sp.private_data = sdata;
	sp.private_data_len = sizeof(sdata); /* the REP's limit */
	sp.responder_resources = 3;
	sp.initiator_depth = 2;
	sp.rnr_retry_count = 4;
	CHECK_EQ(rdma_accept(s, &sp), 0);

	ev = CM_EXPECT(cch, RDMA_CM_EVENT_ESTABLISHED, 0);
	CHECK(ev->id == c);
	CHECK_EQ(ev->param.conn.private_data_len, 196);
	CHECK(!memcmp(ev->param.conn.private_data, sdata, sizeof(sdata)));
	CHECK_EQ(ev->param.conn.qp_num, s->qp->qp_num);
	CHECK_EQ(ev->param.conn.responder_resources, 2);
	CHECK_EQ(ev->param.conn.initiator_depth, 3);
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	ev = CM_EXPECT(sch, RDMA_CM_EVENT_ESTABLISHED, 0);
	CHECK(ev->id == s);
	CHECK_EQ(ev->param.conn.private_data_len, 0);
	CHECK_EQ(rdma_ack_cm_event(ev), 0);

	/* The parameters are in the QPs, and the PSNs meet. */
	CHECK_EQ(ibv_query_qp(c->qp, &ca, IBV_QP_STATE | IBV_QP_DEST_QPN |
				     IBV_QP_SQ_PSN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_PATH_MTU |
				     IBV_QP_TIMEOUT, &qia), 0);
	CHECK_EQ(ibv_query_qp(s->qp, &sa, IBV_QP_STATE | IBV_QP_DEST_QPN |
				     IBV_QP_SQ_PSN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_ACCESS_FLAGS, &qia), 0);
	CHECK_EQ(ca.qp_state, IBV_QPS_RTS);
	CHECK_EQ(sa.qp_state, IBV_QPS_RTS);
	CHECK_EQ(ca.dest_qp_num, s->qp->qp_num);
	CHECK_EQ(sa.dest_qp_num, c->qp->qp_num);
	CHECK_EQ(ca.sq_psn, sa.rq_psn);
	CHECK_EQ(sa.sq_psn, ca.rq_psn);
	CHECK_EQ(ca.max_rd_atomic, 3);
	CHECK_EQ(ca.max_dest_rd_atomic, 2);
	CHECK_EQ(sa.max_rd_atomic, 2);
	CHECK_EQ(sa.max_dest_rd_atomic, 3);
	CHECK_EQ(ca.retry_cnt, 5);
	CHECK_EQ(sa.retry_cnt, 5);
	CHECK_EQ(ca.rnr_retry, 4);
	CHECK_EQ(sa.rnr_retry, 6);
	CHECK_EQ(ca.path_mtu, pa.active_mtu);
	CHECK_EQ(ca.timeout, 19); /* the kernel's CM: packet life 18 + 1 */
	CHECK(sa.qp_access_flags & IBV_ACCESS_REMOTE_READ);

	exchange(c, s, 3);
	exchange(s, c, 4);

	/* Disconnect from the requester; the responder answers. */
	CHECK_EQ(rdma_disconnect(c), 0);
	CM_EXPECT_ACK(sch, RDMA_CM_EVENT_DISCONNECTED, 0);
	cm_none(cch, 200); /* DISCONNECTED waits for the DREP */
	CHECK_EQ(rdma_disconnect(s), 0);
	CM_EXPECT_ACK(cch, RDMA_CM_EVENT_DISCONNECTED, 0);
	CM_EXPECT_ACK(cch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
	CM_EXPECT_ACK(sch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
	cm_none(cch, 100);
	cm_none(sch, 100);

	rdma_destroy_qp(c);
	rdma_destroy_qp(s);
	CHECK_EQ(rdma_destroy_id(c), 0);
	CHECK_EQ(rdma_destroy_id(s), 0);
	CHECK_EQ(rdma_destroy_id(l), 0);
	CHECK_EQ(cm_daemon_ids(), 0);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
}

/* Rejects carry the reason and 148 bytes of private data; the IB CM
 * limits on private data are EINVAL (a failed accept rejects). */
SV_TEST(reject_and_private_data_limits)
{
	struct rdma_event_channel *sch = chan(), *cch = chan();
	struct rdma_cm_id *l, *c, *s;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_RC);
	struct rdma_conn_param cp;
	uint8_t big[200], rej[148];
	uint16_t port = 0;

	l = cm_listen(sch, RDMA_PS_TCP, "127.0.0.1", &port);
	c = cm_resolved(cch, RDMA_PS_TCP, "127.0.0.1", port);
	CHECK_EQ(cm_create_qp(c, &qa), 0);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = big;
	cp.private_data_len = 57; /* one over the REQ's 56 */
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	errno = 0;
	CHECK_EQ(rdma_connect(c, &cp), -1);
	CHECK_EQ(errno, EINVAL);
	cp.private_data_len = 0;
	CHECK_EQ(rdma_connect(c, &cp), 0);
	ev = CM_EXPECT(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	errno = 0;
	CHECK_EQ(rdma_reject(s, big, 149), -1);
	CHECK_EQ(errno, EINVAL);
	fill(rej, sizeof(rej), 9);
	CHECK_EQ(rdma_reject(s, rej, sizeof(rej)), 0);
	ev = CM_EXPECT(cch, RDMA_CM_EVENT_REJECTED, IB_REJ_CONSUMER_DEFINED);
	CHECK_EQ(ev->param.conn.private_data_len, 148);
	CHECK(!memcmp(ev->param.conn.private_data, rej, sizeof(rej)));
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(c->qp->state, IBV_QPS_ERR); /* as rdma-core moves it */
	CHECK_EQ(rdma_destroy_id(s), 0);
	rdma_destroy_qp(c);
	CHECK_EQ(rdma_destroy_id(c), 0);

	/* Accept with one byte over the REP's 196: EINVAL, and rejected. */
	c = cm_resolved(cch, RDMA_PS_TCP, "127.0.0.1", port);
	CHECK_EQ(cm_create_qp(c, &qa), 0);
	cp.private_data_len = 0;
	CHECK_EQ(rdma_connect(c, &cp), 0);
	ev = CM_EXPECT(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = big;
	cp.private_data_len = 197;
	cp.qp_num = 1;
	errno = 0;
	CHECK_EQ(rdma_accept(s, &cp), -1);
	CHECK_EQ(errno, EINVAL);
	CM_EXPECT_ACK(cch, RDMA_CM_EVENT_REJECTED, IB_REJ_CONSUMER_DEFINED);
	rdma_destroy_qp(c);
	CHECK_EQ(rdma_destroy_id(c), 0);
	CHECK_EQ(rdma_destroy_id(s), 0);
	CHECK_EQ(rdma_destroy_id(l), 0);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
}

/*
 * ECE in the CM exchange, as rdma-core's librdmacm carries it: with
 * external QPs (rdma_set_local_ece) the REQ offers the active side's and
 * the REP answers in the offer's vendor id with the passive side's options;
 * with rdma_create_qp the QP's ECE is offered, and the passive side's QP,
 * made after the REQ, accepts only options it supports (none here).
 */
SV_TEST(ece_exchange)
{
	struct rdma_event_channel *sch = chan(), *cch = chan();
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_RC);
	struct ibv_ece e = { .vendor_id = 0xffffff, .options = 0x5 }, got;
	struct rdma_cm_id *l, *c, *s;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	uint16_t port = 0;

	l = cm_listen(sch, RDMA_PS_TCP, "127.0.0.1", &port);
	c = cm_resolved(cch, RDMA_PS_TCP, "127.0.0.1", port);
	/* rdma_set_local_ece: a vendor id, no comp_mask, no QP on the id. */
	got = (struct ibv_ece){ 0 };
	errno = 0;
	CHECK_EQ(rdma_set_local_ece(c, &got), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(rdma_set_local_ece(c, &e), 0);
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x123;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	CHECK_EQ(rdma_connect(c, &cp), 0);
	ev = CM_EXPECT(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(rdma_get_remote_ece(s, &got), 0);
	CHECK_EQ(got.vendor_id, 0xffffff);
	CHECK_EQ(got.options, 0x5);
	e.options = 0x1;
	CHECK_EQ(rdma_set_local_ece(s, &e), 0);
	cp.qp_num = 0x456;
	CHECK_EQ(rdma_accept(s, &cp), 0);
	ev = CM_EXPECT(cch, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(rdma_get_remote_ece(c, &got), 0);
	CHECK_EQ(got.vendor_id, 0xffffff);
	CHECK_EQ(got.options, 0x1);
	CHECK_EQ(rdma_destroy_id(c), 0);
	CHECK_EQ(rdma_destroy_id(s), 0);

	/* With QPs made by rdma_create_qp: the active QP's ECE is offered
	 * (no options), the passive side accepts none. */
	c = cm_resolved(cch, RDMA_PS_TCP, "127.0.0.1", port);
	CHECK_EQ(cm_create_qp(c, &qa), 0);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	CHECK_EQ(rdma_connect(c, &cp), 0);
	ev = CM_EXPECT(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(rdma_get_remote_ece(s, &got), 0);
	CHECK_EQ(got.vendor_id, 0xffffff);
	CHECK_EQ(got.options, 0);
	CHECK_EQ(cm_create_qp(s, &qa), 0);
	CHECK_EQ(rdma_accept(s, &cp), 0);
	CM_EXPECT_ACK(cch, RDMA_CM_EVENT_ESTABLISHED, 0);
	CM_EXPECT_ACK(sch, RDMA_CM_EVENT_ESTABLISHED, 0);
	CHECK_EQ(c->qp->state, IBV_QPS_RTS);
	rdma_destroy_qp(c);
	rdma_destroy_qp(s);
	CHECK_EQ(rdma_destroy_id(c), 0);
	CHECK_EQ(rdma_destroy_id(s), 0);
	CHECK_EQ(rdma_destroy_id(l), 0);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
}

/* The first IPv4 address of this host that is not loopback, or NULL. */
static const char *own_ipv4(char *buf, size_t len)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	const char *ret = NULL;

	ibv_free_device_list(list);
	CHECK(ctx);
	for (int i = 0; i < 32 && !ret; i++) {
		union ibv_gid g;

		if (ibv_query_gid(ctx, 1, i, &g))
			break;
		if (g.raw[10] == 0xff && g.raw[11] == 0xff && g.raw[12] != 127 &&
		    g.raw[12])
			ret = inet_ntop(AF_INET, g.raw + 12, buf, (socklen_t)len);
	}
	ibv_close_device(ctx);
	return ret;
}

/* Nobody on the port: REJECTED with "invalid service ID" (8), as the
 * kernel's IB CM answers a REQ without a listener; a sync id's
 * rdma_connect fails with ECONNREFUSED; UD gets UNREACHABLE (SIDR
 * "unsupported").  A listener on another address refuses (28). */
SV_TEST(nobody_listening)
{
	struct rdma_event_channel *ch = chan();
	struct rdma_cm_id *c, *l;
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_RC);
	struct rdma_conn_param cp;
	struct sockaddr_in dst;
	uint16_t port = 0;

	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 123;
	c = cm_resolved(ch, RDMA_PS_TCP, "127.0.0.1", 5);
	CHECK_EQ(rdma_connect(c, &cp), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_REJECTED, IB_REJ_INVALID_SERVICE_ID);
	CHECK_EQ(rdma_destroy_id(c), 0);

	/* A synchronous id. */
	cm_addr4(&dst, "127.0.0.1", 6);
	CHECK_EQ(rdma_create_id(NULL, &c, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_resolve_addr(c, NULL, (struct sockaddr *)&dst, 2000), 0);
	CHECK_EQ(rdma_resolve_route(c, 2000), 0);
	CHECK_EQ(cm_create_qp(c, &qa), 0);
	errno = 0;
	CHECK_EQ(rdma_connect(c, NULL), -1);
	CHECK_EQ(errno, ECONNREFUSED);
	rdma_destroy_qp(c);
	CHECK_EQ(rdma_destroy_id(c), 0);

	/* UD. */
	c = cm_resolved(ch, RDMA_PS_UDP, "127.0.0.1", 7);
	CHECK_EQ(rdma_connect(c, &cp), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_UNREACHABLE, IB_SIDR_UNSUPPORTED);
	CHECK_EQ(rdma_destroy_id(c), 0);

	/* Listening on ::1 (v6 only), asked on an IPv4 address. */
	{
		int one = 1;

		port = 0;
		CHECK_EQ(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP), 0);
		CHECK_EQ(rdma_set_option(l, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
					 &one, sizeof(one)), 0);
		cm_listen_id(l, "::1", &port);
		c = cm_resolved(ch, RDMA_PS_TCP, "127.0.0.1", port);
		CHECK_EQ(rdma_connect(c, &cp), 0);
		CM_EXPECT_ACK(ch, RDMA_CM_EVENT_REJECTED, IB_REJ_CONSUMER_DEFINED);
		CHECK_EQ(rdma_destroy_id(c), 0);
		CHECK_EQ(rdma_destroy_id(l), 0);
	}
	rdma_destroy_event_channel(ch);
}

/* One connection request to l through ip: it arrives, names ip, and is
 * refused by hand. */
static void request_through(struct rdma_event_channel *ch,
			    struct rdma_cm_id *l, const char *ip, uint16_t port)
{
	struct rdma_conn_param cp = { .qp_num = 9 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c = cm_resolved(ch, RDMA_PS_TCP, ip, port), *s;
	char got[64];
	struct sockaddr *a;

	CHECK_EQ(rdma_connect(c, &cp), 0);
	ev = CM_EXPECT(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	CHECK(ev->listen_id == l);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	a = rdma_get_local_addr(s);
	CHECK(inet_ntop(a->sa_family, a->sa_family == AF_INET ?
				(void *)&((struct sockaddr_in *)a)->sin_addr :
				(void *)&((struct sockaddr_in6 *)a)->sin6_addr,
			got, sizeof(got)));
	if (strcmp(got, ip))
		sv_test_fail(__FILE__, __LINE__, "request through %s names %s",
			     ip, got);
	CHECK_EQ(rdma_reject(s, NULL, 0), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_REJECTED, IB_REJ_CONSUMER_DEFINED);
	CHECK_EQ(rdma_destroy_id(s), 0);
	CHECK_EQ(rdma_destroy_id(c), 0);
}

/* A listener on 0.0.0.0 is reachable through every address of the host,
 * and one on :: (not v6-only) through IPv4 and IPv6. */
SV_TEST(wildcard_listener_everywhere)
{
	struct rdma_event_channel *ch = chan();
	struct rdma_cm_id *l;
	uint16_t port = 0;
	char ip[64];

	l = cm_listen(ch, RDMA_PS_TCP, "0.0.0.0", &port);
	request_through(ch, l, "127.0.0.1", port);
	if (own_ipv4(ip, sizeof(ip)))
		request_through(ch, l, ip, port);
	CHECK_EQ(rdma_destroy_id(l), 0);
	/* Loopback is a wildcard to the kernel's rdma_cm (cma_any_addr): no
	 * device once bound, and every IPv4 address of the host reaches it. */
	port = 0;
	l = cm_listen(ch, RDMA_PS_TCP, "127.0.0.1", &port);
	CHECK(l->verbs == NULL);
	request_through(ch, l, "127.0.0.1", port);
	if (own_ipv4(ip, sizeof(ip)))
		request_through(ch, l, ip, port);
	CHECK_EQ(rdma_destroy_id(l), 0);
	port = 0;
	l = cm_listen(ch, RDMA_PS_TCP, "::", &port);
	request_through(ch, l, "127.0.0.1", port);
	request_through(ch, l, "::1", port);
	CHECK_EQ(rdma_destroy_id(l), 0);
	rdma_destroy_event_channel(ch);
}

/* ---- peers that die ---------------------------------------------------- */

struct kid {
	pid_t pid;
	int sock; /* our end of a socketpair with the child */
};

static void kid_start(struct kid *k, void (*fn)(int sock, uint16_t port),
		      uint16_t port)
{
	int sv[2];

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	k->pid = fork();
	CHECK(k->pid >= 0);
	if (!k->pid) {
		close(sv[0]);
		fn(sv[1], port);
		_exit(0);
	}
	close(sv[1]);
	k->sock = sv[0];
}

static void kid_wait_byte(struct kid *k)
{
	struct pollfd p = { .fd = k->sock, .events = POLLIN };
	char b;

	CHECK_EQ(poll(&p, 1, 10000), 1);
	CHECK_EQ(read(k->sock, &b, 1), 1);
}

static void kid_kill(struct kid *k)
{
	kill(k->pid, SIGKILL);
	CHECK(sv_test_wait_child(k->pid) >= 0);
	close(k->sock);
}

/* Child: listens on port, says so, and (accept = 1) accepts the first
 * request then says so; then sleeps until killed. */
static void server_kid(int sock, uint16_t port, int accept)
{
	struct rdma_event_channel *ch = chan();
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_RC);
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *s;

	cm_listen(ch, RDMA_PS_TCP, "127.0.0.1", &port);
	CHECK_EQ(write(sock, "l", 1), 1);
	ev = CM_EXPECT(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	if (accept) {
		CHECK_EQ(cm_create_qp(s, &qa), 0);
		CHECK_EQ(rdma_accept(s, &cp), 0);
		CM_EXPECT_ACK(ch, RDMA_CM_EVENT_ESTABLISHED, 0);
	}
	CHECK_EQ(write(sock, "r", 1), 1);
	for (;;)
		pause();
}

static void accepting_kid(int sock, uint16_t port)
{
	server_kid(sock, port, 1);
}

static void silent_kid(int sock, uint16_t port)
{
	server_kid(sock, port, 0);
}

static uint16_t free_cm_port(void)
{
	static uint16_t next = 20000;

	return next++;
}

/* The responder dies with the connection up: the requester gets
 * DISCONNECTED (the CM of the dead process sends its DREQ). */
SV_TEST(peer_killed_established)
{
	struct rdma_event_channel *ch = chan();
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_RC);
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1 };
	uint16_t port = free_cm_port();
	struct rdma_cm_id *c;
	struct kid k;

	kid_start(&k, accepting_kid, port);
	kid_wait_byte(&k);
	c = cm_resolved(ch, RDMA_PS_TCP, "127.0.0.1", port);
	CHECK_EQ(cm_create_qp(c, &qa), 0);
	CHECK_EQ(rdma_connect(c, &cp), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_ESTABLISHED, 0);
	kid_wait_byte(&k);
	kid_kill(&k);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_DISCONNECTED, 0);
	CHECK_EQ(rdma_disconnect(c), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
	rdma_destroy_qp(c);
	CHECK_EQ(rdma_destroy_id(c), 0);
	rdma_destroy_event_channel(ch);
}

/* The responder dies holding the request: the requester is rejected
 * (its REQ's cm_id dies in REQ_RCVD: "consumer defined"). */
SV_TEST(peer_killed_before_accept)
{
	struct rdma_event_channel *ch = chan();
	struct rdma_conn_param cp = { .qp_num = 77 };
	uint16_t port = free_cm_port();
	struct rdma_cm_id *c;
	struct kid k;

	kid_start(&k, silent_kid, port);
	kid_wait_byte(&k);
	c = cm_resolved(ch, RDMA_PS_TCP, "127.0.0.1", port);
	CHECK_EQ(rdma_connect(c, &cp), 0);
	kid_wait_byte(&k);
	kid_kill(&k);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_REJECTED, IB_REJ_CONSUMER_DEFINED);
	CHECK_EQ(rdma_destroy_id(c), 0);
	rdma_destroy_event_channel(ch);
}

static void requesting_kid(int sock, uint16_t port)
{
	struct rdma_event_channel *ch = chan();
	struct rdma_conn_param cp = { .qp_num = 78 };
	struct rdma_cm_id *c = cm_resolved(ch, RDMA_PS_TCP, "127.0.0.1", port);

	CHECK_EQ(rdma_connect(c, &cp), 0);
	CHECK_EQ(write(sock, "c", 1), 1);
	for (;;)
		pause();
}

/* The requester dies before the answer: the responder's new id is
 * rejected with "timeout" (4), as the kernel's dying REQ_SENT cm_id says. */
SV_TEST(requester_killed)
{
	struct rdma_event_channel *ch = chan();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *s;
	uint16_t port = free_cm_port();
	struct kid k;

	l = cm_listen(ch, RDMA_PS_TCP, "127.0.0.1", &port);
	kid_start(&k, requesting_kid, port);
	ev = CM_EXPECT(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	kid_wait_byte(&k);
	kid_kill(&k);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_REJECTED, IB_REJ_TIMEOUT);
	CHECK_EQ(rdma_destroy_id(s), 0);
	CHECK_EQ(rdma_destroy_id(l), 0);
	rdma_destroy_event_channel(ch);
}

/* The daemon dies: one DEVICE_REMOVAL for each id bound to the device,
 * none for an id without one, then ENODEV; ids still destroy. */
SV_TEST(daemon_killed_device_removal)
{
	struct rdma_event_channel *ch = chan();
	struct rdma_cm_id *bound, *unbound;
	struct rdma_cm_event *ev;
	pid_t d;

	bound = cm_resolved(ch, RDMA_PS_TCP, "127.0.0.1", 1);
	CHECK(bound->verbs);
	CHECK_EQ(rdma_create_id(ch, &unbound, NULL, RDMA_PS_TCP), 0);
	d = sv_test_daemon_pid();
	CHECK(d > 0);
	CHECK_EQ(kill(d, SIGKILL), 0);
	ev = CM_EXPECT(ch, RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
	CHECK(ev->id == bound);
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	errno = 0;
	CHECK_EQ(rdma_get_cm_event(ch, &ev), -1);
	CHECK_EQ(errno, ENODEV);
	CHECK_EQ(rdma_destroy_id(bound), 0);
	CHECK_EQ(rdma_destroy_id(unbound), 0);
	rdma_destroy_event_channel(ch);
}

/* ---- UD ---------------------------------------------------------------- */

SV_TEST(ud_sidr)
{
	struct rdma_event_channel *sch = chan(), *cch = chan();
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_UD);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c, *s;
	struct ibv_mr *smr, *rmr;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint8_t pd[181] /* one more than SIDR_REQ carries */, sbuf[64], rbuf[40 + 64];
	uint32_t qpn, qkey;
	uint16_t port = 0;

	l = cm_listen(sch, RDMA_PS_UDP, "127.0.0.1", &port);
	c = cm_resolved(cch, RDMA_PS_UDP, "127.0.0.1", port);
	CHECK_EQ(cm_create_qp(c, &qa), 0);
	CHECK_EQ(c->qp->state, IBV_QPS_RTS); /* UD is ready at once */
	fill(pd, sizeof(pd), 5);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = pd;
	cp.private_data_len = 181; /* SIDR_REQ: 216 - 36 */
	errno = 0;
	CHECK_EQ(rdma_connect(c, &cp), -1);
	CHECK_EQ(errno, EINVAL);
	cp.private_data_len = 180;
	CHECK_EQ(rdma_connect(c, &cp), 0);
	ev = CM_EXPECT(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(ev->param.ud.private_data_len, 180);
	CHECK(!memcmp(ev->param.ud.private_data, pd, 180));
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(cm_create_qp(s, &qa), 0);
	smr = ibv_reg_mr(c->pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
	rmr = ibv_reg_mr(s->pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(smr && rmr);
	CHECK_EQ(rdma_post_recv(s, NULL, rbuf, sizeof(rbuf), rmr), 0);
	memset(&cp, 0, sizeof(cp));
	CHECK_EQ(rdma_accept(s, &cp), 0);
	ev = CM_EXPECT(cch, RDMA_CM_EVENT_ESTABLISHED, 0);
	qpn = ev->param.ud.qp_num;
	qkey = ev->param.ud.qkey;
	CHECK_EQ(qpn, s->qp->qp_num);
	CHECK_EQ(qkey, RDMA_UDP_QKEY);
	CHECK_EQ(ev->param.ud.private_data_len, 136);
	CHECK(ev->param.ud.ah_attr.is_global);
	ah = ibv_create_ah(c->pd, &ev->param.ud.ah_attr);
	CHECK(ah);
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	fill(sbuf, sizeof(sbuf), 6);
	CHECK_EQ(rdma_post_ud_send(c, NULL, sbuf, sizeof(sbuf), smr, 0, ah, qpn), 0);
	CHECK_EQ(rdma_get_send_comp(c, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(rdma_get_recv_comp(s, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 40 + sizeof(sbuf));
	CHECK(!memcmp(rbuf + 40, sbuf, sizeof(sbuf)));
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	CHECK_EQ(ibv_dereg_mr(smr), 0);
	CHECK_EQ(ibv_dereg_mr(rmr), 0);
	rdma_destroy_qp(s);
	CHECK_EQ(rdma_destroy_id(s), 0);

	/* A UD reject: UNREACHABLE with the SIDR status "rejected". */
	rdma_destroy_qp(c);
	CHECK_EQ(rdma_destroy_id(c), 0);
	c = cm_resolved(cch, RDMA_PS_UDP, "127.0.0.1", port);
	memset(&cp, 0, sizeof(cp));
	CHECK_EQ(rdma_connect(c, &cp), 0);
	ev = CM_EXPECT(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	s = ev->id;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(rdma_reject(s, "no", 2), 0);
	ev = CM_EXPECT(cch, RDMA_CM_EVENT_UNREACHABLE, IB_SIDR_REJECT);
	CHECK(!memcmp(ev->param.ud.private_data, "no", 2));
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(rdma_destroy_id(s), 0);
	CHECK_EQ(rdma_destroy_id(c), 0);
	CHECK_EQ(rdma_destroy_id(l), 0);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
}

/* ---- many ids, leaks --------------------------------------------------- */

#define MANY 2000
#define CONNS 32

static void many_ids_work(void *arg)
{
	struct rdma_event_channel *ch = chan(), *sch = chan();
	struct rdma_cm_id **ids = calloc(MANY, sizeof(*ids)), *l;
	struct rdma_cm_id *cs[CONNS], *ss[CONNS];
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_RC);
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1 };
	uint8_t *seen = calloc(65536, 1);
	struct sockaddr_in a;
	uint16_t port = 0;
	int est = 0;

	(void)arg;
	cm_addr4(&a, "127.0.0.1", 0);
	for (int i = 0; i < MANY; i++) {
		uint16_t p;

		CHECK_EQ(rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP), 0);
		CHECK_EQ(rdma_bind_addr(ids[i], (struct sockaddr *)&a), 0);
		p = ntohs(rdma_get_src_port(ids[i]));
		CHECK(p && !seen[p]); /* every one its own ephemeral port */
		seen[p] = 1;
	}
	CHECK_EQ(cm_daemon_ids(), MANY);
	for (int i = 0; i < MANY; i++)
		CHECK_EQ(rdma_destroy_id(ids[i]), 0);
	CHECK_EQ(cm_daemon_ids(), 0);

	/* Many connections to one listener at once. */
	l = cm_listen(sch, RDMA_PS_TCP, "0.0.0.0", &port);
	for (int i = 0; i < CONNS; i++) {
		cs[i] = cm_resolved(ch, RDMA_PS_TCP, "127.0.0.1", port);
		CHECK_EQ(cm_create_qp(cs[i], &qa), 0);
		CHECK_EQ(rdma_connect(cs[i], &cp), 0);
	}
	for (int i = 0; i < CONNS; i++) {
		struct rdma_cm_event *ev = CM_EXPECT(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 0);

		ss[i] = ev->id;
		CHECK_EQ(rdma_ack_cm_event(ev), 0);
		CHECK_EQ(cm_create_qp(ss[i], &qa), 0);
		CHECK_EQ(rdma_accept(ss[i], &cp), 0);
	}
	for (int i = 0; i < 2 * CONNS; i++) {
		struct rdma_cm_event *ev = cm_next(i & 1 ? sch : ch, 10000);

		est += ev->event == RDMA_CM_EVENT_ESTABLISHED;
		CHECK_EQ(rdma_ack_cm_event(ev), 0);
	}
	CHECK_EQ(est, 2 * CONNS);
	for (int i = 0; i < CONNS; i++) {
		rdma_destroy_qp(cs[i]);
		rdma_destroy_qp(ss[i]);
		CHECK_EQ(rdma_destroy_id(cs[i]), 0);
		CHECK_EQ(rdma_destroy_id(ss[i]), 0);
	}
	CHECK_EQ(rdma_destroy_id(l), 0);
	CHECK_EQ(cm_daemon_ids(), 0);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(sch);
	free(ids);
	free(seen);
}

/* Thousands of ids, each its own port; dozens of connections at once;
 * afterwards the daemon holds nothing and no more fds than before. */
SV_TEST_T(many_ids_then_nothing_left, 120)
{
	struct sv_status_rep base;

	sv_test_baseline(&base);
	CHECK_EQ(sv_test_child(many_ids_work, NULL), 0);
	sv_test_wait_quiet(&base, 10000);
	CHECK_EQ(cm_daemon_ids(), 0);
}

/* ---- bad input --------------------------------------------------------- */

SV_TEST(bad_input_errors)
{
	struct rdma_event_channel *ch = chan();
	struct rdma_cm_id *id, *id2;
	struct rdma_cm_event *ev;
	struct sockaddr_in a, b;
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	uint8_t tos = 1;
	int one = 1, fl;

#define ERRNO_IS(expr, e)                                                      \
	do {                                                                   \
		errno = 0;                                                     \
		CHECK_EQ((expr), -1);                                          \
		CHECK_EQ(errno, (e));                                          \
	} while (0)
	ERRNO_IS(rdma_create_id(ch, &id, NULL, (enum rdma_port_space)0x1234), EINVAL);
	CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ERRNO_IS(rdma_bind_addr(id, (struct sockaddr *)&un), EINVAL);
	ERRNO_IS(rdma_resolve_route(id, 100), EINVAL);     /* no address */
	ERRNO_IS(rdma_disconnect(id), EINVAL);	           /* no device */
	ERRNO_IS(rdma_set_option(id, 99, 0, &one, sizeof(one)), ENOSYS);
	ERRNO_IS(rdma_set_option(id, RDMA_OPTION_ID, 99, &one, sizeof(one)), ENOSYS);
	ERRNO_IS(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one,
				 sizeof(one)), EINVAL); /* TOS is one byte */
	CHECK_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos,
				 sizeof(tos)), 0);
	cm_addr4(&a, "192.0.2.250", 0); /* not this host's */
	ERRNO_IS(rdma_bind_addr(id, (struct sockaddr *)&a), EADDRNOTAVAIL);
	cm_addr4(&a, "127.0.0.1", 0);
	ERRNO_IS(rdma_join_multicast(id, (struct sockaddr *)&a, NULL), EINVAL);
	CHECK_EQ(rdma_bind_addr(id, (struct sockaddr *)&a), 0);
	ERRNO_IS(rdma_bind_addr(id, (struct sockaddr *)&a), EINVAL); /* bound */
	cm_addr4(&b, "239.1.1.1", 0);
	/* Bound to loopback: no device yet (the kernel's EINVAL). */
	ERRNO_IS(rdma_join_multicast(id, (struct sockaddr *)&b, NULL), EINVAL);
	/* Never joined: nothing to leave. */
	ERRNO_IS(rdma_leave_multicast(id, (struct sockaddr *)&b), EADDRNOTAVAIL);
	ERRNO_IS(rdma_accept(id, NULL), EINVAL);
	ERRNO_IS(rdma_connect(id, NULL), EINVAL);
	/* The same port again, or a wildcard over it: not available (to the
	 * kernel's cma_check_port loopback is a wildcard too). */
	a.sin_port = rdma_get_src_port(id);
	CHECK_EQ(rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP), 0);
	ERRNO_IS(rdma_bind_addr(id2, (struct sockaddr *)&a), EADDRNOTAVAIL);
	CHECK_EQ(rdma_destroy_id(id2), 0);
	CHECK_EQ(rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP), 0);
	b = a;
	b.sin_addr.s_addr = htonl(INADDR_ANY);
	ERRNO_IS(rdma_bind_addr(id2, (struct sockaddr *)&b), EADDRNOTAVAIL);
	CHECK_EQ(rdma_destroy_id(id2), 0);
	CHECK_EQ(rdma_listen(id, 1), 0);
	ERRNO_IS(rdma_listen(id, 1), EINVAL);
	/* A UDP id may use the same port number: another port space. */
	CHECK_EQ(rdma_create_id(ch, &id2, NULL, RDMA_PS_UDP), 0);
	CHECK_EQ(rdma_bind_addr(id2, (struct sockaddr *)&a), 0);
	CHECK_EQ(rdma_destroy_id(id2), 0);
	CHECK_EQ(rdma_destroy_id(id), 0);
	/* Two binds of one address of the host and one port: in use. */
	{
		char ip[64];
		struct rdma_cm_id *id3;

		if (own_ipv4(ip, sizeof(ip))) {
			cm_addr4(&a, ip, 0);
			CHECK_EQ(rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP), 0);
			CHECK_EQ(rdma_bind_addr(id2, (struct sockaddr *)&a), 0);
			CHECK(id2->verbs);
			a.sin_port = rdma_get_src_port(id2);
			CHECK_EQ(rdma_create_id(ch, &id3, NULL, RDMA_PS_TCP), 0);
			ERRNO_IS(rdma_bind_addr(id3, (struct sockaddr *)&a), EADDRINUSE);
			CHECK_EQ(rdma_destroy_id(id3), 0);
			CHECK_EQ(rdma_destroy_id(id2), 0);
		}
	}
	/* Ports below 1024 are the privileged's. */
	if (geteuid() == 0) {
		cm_addr4(&a, "127.0.0.1", 999);
		CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
		CHECK_EQ(rdma_bind_addr(id, (struct sockaddr *)&a), 0);
		CHECK_EQ(rdma_destroy_id(id), 0);
	}
	/* A non-blocking channel with nothing on it. */
	fl = fcntl(ch->fd, F_GETFL);
	CHECK_EQ(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
	ERRNO_IS(rdma_get_cm_event(ch, &ev), EAGAIN);
	CHECK_EQ(fcntl(ch->fd, F_SETFL, fl), 0);
	ERRNO_IS(rdma_get_cm_event(ch, NULL), EINVAL);
	ERRNO_IS(rdma_ack_cm_event(NULL), EINVAL);
	rdma_destroy_event_channel(ch);
}

/* Resolution: an unused address of a routed network times out as the
 * kernel's (no neighbour answers: there is no wire yet), an unroutable
 * one fails at once; rdma_migrate_id moves an id's events. */
/*
 * Multicast joins (ib_cma on RoCE v2, rdma-core's ucma_process_join):
 * the event's param.ud has the group's address handle, QP 0xFFFFFF, the
 * UDP port space's Q_Key and the join's context; the id's QP is attached
 * when the event is taken (its destroy is then EBUSY, as ib_uverbs
 * answers), not for a send-only join; leaving detaches it; a second
 * leave, or one for another group, is EADDRNOTAVAIL; join_ex's checks.
 */
SV_TEST(multicast_join_leave)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_qp_init_attr qa = cm_qp_attr(IBV_QPT_UD);
	struct rdma_cm_join_mc_attr_ex x;
	struct sockaddr_in lo, g, g2;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	union ibv_gid mgid;
	int ctx1, ctx2;

	CHECK(ch);
	cm_addr4(&lo, "127.0.0.1", 0);
	cm_addr4(&g, "239.1.2.3", 0);
	cm_addr4(&g2, "239.1.2.4", 0);
	CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&lo, 2000), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	CHECK_EQ(cm_create_qp(id, &qa), 0);

	CHECK_EQ(rdma_join_multicast(id, (struct sockaddr *)&g, &ctx1), 0);
	ev = CM_EXPECT(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
	CHECK(ev->id == id);
	CHECK(ev->param.ud.private_data == &ctx1);
	CHECK_EQ(ev->param.ud.qp_num, 0xffffff);
	CHECK_EQ(ev->param.ud.qkey, RDMA_UDP_QKEY);
	CHECK_EQ(ev->param.ud.ah_attr.is_global, 1);
	CHECK_EQ(ev->param.ud.ah_attr.grh.dgid.raw[10], 0xff);
	CHECK_EQ(ev->param.ud.ah_attr.grh.dgid.raw[12], 239);
	CHECK_EQ(ev->param.ud.ah_attr.grh.dgid.raw[15], 3);
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	/* Attached: the QP is busy until it leaves. */
	errno = 0;
	CHECK_EQ(ibv_destroy_qp(id->qp), EBUSY);
	ERRNO_IS(rdma_leave_multicast(id, (struct sockaddr *)&g2), EADDRNOTAVAIL);
	CHECK_EQ(rdma_leave_multicast(id, (struct sockaddr *)&g), 0);
	ERRNO_IS(rdma_leave_multicast(id, (struct sockaddr *)&g), EADDRNOTAVAIL);

	/* rdma_join_multicast_ex: address and flags required. */
	memset(&x, 0, sizeof(x));
	x.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	x.addr = (struct sockaddr *)&g2;
	ERRNO_IS(rdma_join_multicast_ex(id, &x, &ctx2), EINVAL);
	x.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	x.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	ERRNO_IS(rdma_join_multicast_ex(id, &x, &ctx2), EINVAL);
	x.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	ERRNO_IS(rdma_join_multicast_ex(id, &x, &ctx2), ENOTSUP);
	/* Send-only: the event, and no attachment (the QP goes). */
	x.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	x.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	CHECK_EQ(rdma_join_multicast_ex(id, &x, &ctx2), 0);
	ev = CM_EXPECT(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
	CHECK(ev->param.ud.private_data == &ctx2);
	mgid = ev->param.ud.ah_attr.grh.dgid;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	CHECK_EQ(ibv_detach_mcast(id->qp, &mgid, 0), EINVAL);
	CHECK_EQ(rdma_leave_multicast(id, (struct sockaddr *)&g2), 0);
	/* Full member again, and the id destroyed with its join: the QP
	 * left first (rdma_destroy_qp cannot take an attached QP). */
	CHECK_EQ(rdma_join_multicast(id, (struct sockaddr *)&g2, &ctx1), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
	CHECK_EQ(rdma_leave_multicast(id, (struct sockaddr *)&g2), 0);
	rdma_destroy_qp(id);
	CHECK_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

SV_TEST(addr_error_and_migrate)
{
	struct rdma_event_channel *a = chan(), *b = chan();
	struct rdma_cm_id *id;
	struct sockaddr_in dst;
	int udp, routed;

	cm_addr4(&dst, "192.0.2.77", 9);
	udp = socket(AF_INET, SOCK_DGRAM, 0);
	routed = connect(udp, (struct sockaddr *)&dst, sizeof(dst)) == 0;
	close(udp);
	CHECK_EQ(rdma_create_id(a, &id, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 300), 0);
	CM_EXPECT_ACK(a, RDMA_CM_EVENT_ADDR_ERROR,
		      routed ? -ETIMEDOUT : -ENETUNREACH);
	/* Migrated, the id's next events come on b. */
	CHECK_EQ(rdma_migrate_id(id, b), 0);
	CHECK(id->channel == b);
	cm_addr4(&dst, "127.0.0.1", 9);
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 300), 0);
	CM_EXPECT_ACK(b, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	cm_none(a, 100);
	CHECK_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(a);
	rdma_destroy_event_channel(b);
}

SV_TEST_MAIN()

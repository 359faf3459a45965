/* SPDX-License-Identifier: MIT */
/* Helpers for the rdma_cm tests (test_rdmacm*.c): events with a bound,
 * addresses, a connected RC pair made through the CM. */
#ifndef CM_UTIL_H
#define CM_UTIL_H

#include "sv_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IB_REJ_TIMEOUT 4
#define IB_REJ_INVALID_SERVICE_ID 8
#define IB_REJ_CONSUMER_DEFINED 28
#define IB_SIDR_UNSUPPORTED 1
#define IB_SIDR_REJECT 2

static inline void cm_addr4(struct sockaddr_in *a, const char *ip,
			    uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons(port);
	CHECK(inet_pton(AF_INET, ip, &a->sin_addr) == 1);
}

static inline void cm_addr6(struct sockaddr_in6 *a, const char *ip,
			    uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	a->sin6_port = htons(port);
	CHECK(inet_pton(AF_INET6, ip, &a->sin6_addr) == 1);
}

/* The next event of ch within ms (fails the case otherwise). */
static inline struct rdma_cm_event *cm_next(struct rdma_event_channel *ch,
					    int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int fl = fcntl(ch->fd, F_GETFL);

	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0);
	for (;;) {
		if (!rdma_get_cm_event(ch, &ev))
			break;
		CHECK_EQ(errno, EAGAIN);
		if (poll(&p, 1, ms) != 1)
			sv_test_fail(__FILE__, __LINE__, "no CM event within %d ms", ms);
	}
	CHECK(fcntl(ch->fd, F_SETFL, fl) == 0);
	return ev;
}

/* The next event must be `type` with `status`; returned unacked. */
#define CM_EXPECT(ch, type, st)                                                \
	({                                                                     \
		struct rdma_cm_event *__e = cm_next((ch), 10000);              \
		if (__e->event != (type) || __e->status != (st))               \
			sv_test_fail(__FILE__, __LINE__,                       \
				     "event %s status %d, wanted %s status %d", \
				     rdma_event_str(__e->event), __e->status,  \
				     rdma_event_str(type), (int)(st));         \
		__e;                                                           \
	})

#define CM_EXPECT_ACK(ch, type, st)                                            \
	CHECK_EQ(rdma_ack_cm_event(CM_EXPECT(ch, type, st)), 0)

/* No event on ch for ms. */
static inline void cm_none(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int fl = fcntl(ch->fd, F_GETFL);

	if (poll(&p, 1, ms) == 0)
		return;
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0);
	if (!rdma_get_cm_event(ch, &ev))
		sv_test_fail(__FILE__, __LINE__, "unexpected event %s status %d",
			     rdma_event_str(ev->event), ev->status);
	CHECK_EQ(errno, EAGAIN);
	CHECK(fcntl(ch->fd, F_SETFL, fl) == 0);
}

static inline struct ibv_qp_init_attr cm_qp_attr(enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_type = t;
	a.cap.max_send_wr = 16;
	a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.sq_sig_all = 1;
	return a;
}

/* rdma_create_qp() writes the CQs it made into the attributes (as
 * rdma-core does): each id gets a fresh copy. */
static inline int cm_create_qp(struct rdma_cm_id *id,
			       const struct ibv_qp_init_attr *a)
{
	struct ibv_qp_init_attr c = *a;
	int ret = rdma_create_qp(id, NULL, &c);

	if (!ret && (c.send_cq != id->send_cq || c.recv_cq != id->recv_cq))
		sv_test_fail(__FILE__, __LINE__, "CQs not written back");
	return ret;
}

/* id bound to ip (port 0: any) and listening. */
static inline void cm_listen_id(struct rdma_cm_id *id, const char *ip,
				uint16_t *port)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(ip, ':'))
		cm_addr6((struct sockaddr_in6 *)&ss, ip, *port);
	else
		cm_addr4((struct sockaddr_in *)&ss, ip, *port);
	CHECK_EQ(rdma_bind_addr(id, (struct sockaddr *)&ss), 0);
	CHECK_EQ(rdma_listen(id, 64), 0);
	*port = ntohs(rdma_get_src_port(id));
	CHECK(*port != 0);
}

/* A listener on ip (port 0: any), with its own channel. */
static inline struct rdma_cm_id *cm_listen(struct rdma_event_channel *ch,
					   enum rdma_port_space ps,
					   const char *ip, uint16_t *port)
{
	struct rdma_cm_id *id;

	CHECK_EQ(rdma_create_id(ch, &id, NULL, ps), 0);
	cm_listen_id(id, ip, port);
	return id;
}

/* An id of ch resolved (address and route) towards ip:port. */
static inline struct rdma_cm_id *cm_resolved(struct rdma_event_channel *ch,
					     enum rdma_port_space ps,
					     const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	struct rdma_cm_id *id;

	memset(&ss, 0, sizeof(ss));
	if (strchr(ip, ':'))
		cm_addr6((struct sockaddr_in6 *)&ss, ip, port);
	else
		cm_addr4((struct sockaddr_in *)&ss, ip, port);
	CHECK_EQ(rdma_create_id(ch, &id, NULL, ps), 0);
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, 2000), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	CHECK(id->verbs);
	CHECK_EQ(rdma_resolve_route(id, 2000), 0);
	CM_EXPECT_ACK(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	return id;
}

/* Counts the daemon's rdma_cm ids (SV_RES_CM_ID rows). */
static inline int cm_daemon_ids(void)
{
	struct sv_res_req req = { .type = SV_RES_CM_ID };
	static struct sv_res_rep rep;
	int n = 0;

	do {
		memset(&rep, 0, sizeof(rep));
		sv_test_res_page(&req, &rep);
		n += (int)rep.count;
	} while (rep.more);
	return n;
}

static inline void cm_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

#endif

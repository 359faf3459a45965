/* SPDX-License-Identifier: MIT */
/*
 * A bounded fuzz of the connection manager from the wire (issue 26): for
 * SV_FUZZ_SECONDS (default 5) three sources of namespace X (two IPv4, one
 * IPv6; cm_wire_util.h) throw CM MADs at QP1 of L's daemon, at random:
 *   - REQs that are nearly right: fresh comm IDs, to the listener's port
 *     or another, the rdma_cm header's source true or not, timeouts and
 *     retries mostly small, MTU and transport sometimes out of range;
 *   - every attribute the daemon knows (REQ, MRA, REJ, REP, RTU, DREQ,
 *     DREP, SIDR_REQ, SIDR_REP) with random fields, their comm IDs and
 *     transaction IDs mostly drawn from live connections (ours and the
 *     daemon's, learned from its answers);
 *   - LAP, APR, ClassPortInfo and unknown attributes; wrong base and
 *     class versions, classes and methods; truncated and overlong MADs;
 *     random bytes;
 *   - datagrams QP1 must not take: another Q_Key, P_Key, opcode or QP, a
 *     bad ICRC.
 * X answers some of what comes back as a peer would (RTU to a REP, DREP
 * to a DREQ, sometimes a REJ), and L's application plays a server that
 * accepts, rejects, ignores, disconnects and destroys at random.
 * Afterwards L's application lets go of everything, X answers what still
 * comes (REJ to a REP, DREP to a DREQ), and the daemon, the same process,
 * holds exactly the objects, descriptors and rdma_cm ids it held before
 * and no CM connection; then host Y connects and sends through the
 * listener.  The numbers are printed.
 */
#include "cm_wire_util.h"

static unsigned seed;
static uint32_t rnd(void)
{
	return (uint32_t)rand_r(&seed) ^ ((uint32_t)rand_r(&seed) << 16);
}
static uint32_t pick(uint32_t n) { return n ? rnd() % n : 0; }

static uint64_t ms_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

#define NSRC 3
#define POOL 128
#define HELD 4096

static struct {
	struct cmnet n;
	struct xsock rx[NSRC], tx[NSRC];
	const char *ip[NSRC];
	struct rdma_event_channel *ch;
	struct rdma_cm_id *ltcp, *ludp;
	uint16_t ptcp, pudp;
	/* Comm IDs of live conversations: ours[i] with theirs[i] (0 while
	 * the daemon has not told its own), their tids and sources. */
	uint32_t ours[POOL], theirs[POOL];
	uint64_t tids[POOL];
	unsigned npool;
	/* The application's connection ids. */
	struct rdma_cm_id *held[HELD];
	unsigned nheld;
	/* What happened. */
	uint64_t sent, kinds[7], answers, replied, events, accepted, rejected,
		established, app_destroyed;
} z;

/* ---- pools ---------------------------------------------------------------- */

static void pool_add(uint32_t ours, uint32_t theirs, uint64_t tid)
{
	unsigned i = z.npool < POOL ? z.npool++ : pick(POOL);

	z.ours[i] = ours;
	z.theirs[i] = theirs;
	z.tids[i] = tid;
}

/* A comm ID: mostly one of a live conversation's. */
static uint32_t comm(int theirs)
{
	unsigned i = pick(z.npool);

	switch (pick(8)) {
	case 0: return 0;
	case 1: return rnd();
	default:
		if (!z.npool)
			return rnd();
		return theirs ? z.theirs[i] : z.ours[i];
	}
}

static uint64_t tid(void)
{
	return z.npool && pick(2) ? z.tids[pick(z.npool)] :
				    (uint64_t)rnd() << 32 | rnd();
}

/* A time exponent: mostly what a peer sends, now and then anything. */
static uint8_t small_time(void)
{
	return (uint8_t)(pick(8) ? 8 + pick(9) : pick(32));
}

/* ---- what X sends --------------------------------------------------------- */

/* Another source of s's address family (the IPv6 one has none). */
static const char *other_ip(unsigned s)
{
	return s == 2 ? z.ip[2] : z.ip[1 - s];
}

/* A REQ that is nearly right. */
static void send_req(unsigned s)
{
	struct svd_cm_msg m;
	struct reqp p = {
		.comm = rnd() | 1,
		.port = pick(10) ? z.ptcp : (uint16_t)rnd(),
		.src_ip = pick(10) ? z.ip[s] : other_ip(s),
		.path_ip = pick(4) ? z.ip[s] : other_ip(s),
		.lcrt = small_time(), .rcrt = small_time(),
		.ack = small_time(),
		.retries = (uint8_t)(pick(5) ? pick(4) : pick(16)),
	};

	req_make(&m, &p);
	if (!pick(8))
		m.req.path_mtu = (uint8_t)pick(16);
	if (!pick(8))
		m.req.transport_service_type = (uint8_t)pick(4);
	if (!pick(4))
		for (int i = CMA_HDR_LEN; i < CM_REQ_PDATA; i++)
			m.req.private_data[i] = (uint8_t)rnd();
	if (!pick(16))
		m.req.private_data[pick(CMA_HDR_LEN)] ^= (uint8_t)(1 + pick(255));
	pool_add(p.comm, 0, m.tid);
	xsend(&z.tx[s], &m);
	z.kinds[0]++;
}

/* Any known attribute, random fields, comm IDs mostly live ones. */
static void send_random_attr(unsigned s)
{
	static const uint16_t attrs[] = { CM_ATTR_REQ, CM_ATTR_MRA, CM_ATTR_REJ,
					  CM_ATTR_REP, CM_ATTR_RTU, CM_ATTR_DREQ,
					  CM_ATTR_DREP, CM_ATTR_SIDR_REQ,
					  CM_ATTR_SIDR_REP };
	struct svd_cm_msg m;
	uint8_t *b = (uint8_t *)&m;

	for (size_t i = 0; i < sizeof(m); i++)
		b[i] = (uint8_t)rnd();
	m.attr_id = attrs[pick(sizeof(attrs) / sizeof(attrs[0]))];
	m.tid = tid();
	switch (m.attr_id) {
	case CM_ATTR_REQ:
		m.req.local_comm_id = rnd();
		m.req.service_id = (uint64_t)(pick(2) ? RDMA_PS_TCP : rnd() & 0xffff)
				   << 16 | (pick(2) ? z.ptcp : (uint16_t)rnd());
		if (pick(2))
			cma_hdr(m.req.private_data, z.ip[s], (uint16_t)rnd(),
				s == 2 ? L_IP6 : L_IP);
		m.req.local_cm_response_timeout = small_time();
		m.req.remote_cm_response_timeout = small_time();
		break;
	case CM_ATTR_MRA:
		m.mra.local_comm_id = comm(0);
		m.mra.remote_comm_id = comm(1);
		break;
	case CM_ATTR_REJ:
		m.rej.local_comm_id = comm(0);
		m.rej.remote_comm_id = comm(1);
		if (pick(2))
			m.rej.reason = (uint16_t)pick(40);
		break;
	case CM_ATTR_REP:
		m.rep.local_comm_id = comm(0);
		m.rep.remote_comm_id = comm(1);
		break;
	case CM_ATTR_RTU:
		m.rtu.local_comm_id = comm(0);
		m.rtu.remote_comm_id = comm(1);
		break;
	case CM_ATTR_DREQ:
		m.dreq.local_comm_id = comm(0);
		m.dreq.remote_comm_id = comm(1);
		break;
	case CM_ATTR_DREP:
		m.drep.local_comm_id = comm(0);
		m.drep.remote_comm_id = comm(1);
		break;
	case CM_ATTR_SIDR_REQ:
		m.sidr_req.request_id = rnd();
		m.sidr_req.service_id = (uint64_t)(pick(2) ? RDMA_PS_UDP : rnd() & 0xffff)
					<< 16 | (pick(2) ? z.pudp : (uint16_t)rnd());
		if (pick(2))
			cma_hdr(m.sidr_req.private_data, z.ip[s], (uint16_t)rnd(),
				s == 2 ? L_IP6 : L_IP);
		if (pick(2))
			pool_add(m.sidr_req.request_id, 0, m.tid);
		break;
	case CM_ATTR_SIDR_REP:
		m.sidr_rep.request_id = comm(1);
		break;
	}
	xsend(&z.tx[s], &m);
	z.kinds[1]++;
}

/* A well-formed header of an attribute the daemon does not serve (LAP
 * 0x19, APR 0x1A, ClassPortInfo 0x01, anything), random message. */
static void send_other_attr(unsigned s)
{
	static const uint16_t attrs[] = { 0x19, 0x1a, 0x01, 0x00, 0x0f, 0x1b,
					  0xffff };
	uint8_t mad[CM_MAD_LEN];

	for (size_t i = 0; i < sizeof(mad); i++)
		mad[i] = (uint8_t)rnd();
	mad[0] = CM_MAD_BASE_VERSION;
	mad[1] = CM_MAD_CLASS;
	mad[2] = CM_MAD_CLASS_VERSION;
	mad[3] = pick(4) ? CM_MAD_METHOD_SEND : (uint8_t)pick(256);
	{
		uint16_t a = pick(3) ? attrs[pick(sizeof(attrs) / sizeof(attrs[0]))] :
				       (uint16_t)rnd();

		mad[16] = (uint8_t)(a >> 8);
		mad[17] = (uint8_t)a;
	}
	xsend_raw(&z.tx[s], mad, sizeof(mad), NULL);
	z.kinds[2]++;
}

/* A valid MAD with its header broken: versions, class, method. */
static void send_bad_header(unsigned s)
{
	struct svd_cm_msg m;
	struct reqp p = { .comm = rnd(), .port = z.ptcp, .src_ip = z.ip[s],
			  .path_ip = z.ip[s], .lcrt = 10, .rcrt = 10,
			  .ack = 10 };
	uint8_t mad[CM_MAD_LEN];

	req_make(&m, &p);
	CHECK_EQ(svd_cm_mad_encode(&m, mad), 0);
	switch (pick(5)) {
	case 0: mad[0] = (uint8_t)(pick(2) ? 2 : rnd()); break;	/* base */
	case 1: mad[1] = (uint8_t)(pick(2) ? 0x01 : rnd()); break; /* class */
	case 2: mad[2] = (uint8_t)(pick(2) ? 1 : rnd()); break;	/* class v */
	case 3: mad[3] = (uint8_t)(pick(2) ? 0x81 : rnd()); break; /* method */
	default:
		for (int i = 0; i < 1 + (int)pick(8); i++)
			mad[pick(CM_MAD_LEN)] = (uint8_t)rnd();
	}
	xsend_raw(&z.tx[s], mad, sizeof(mad), NULL);
	z.kinds[3]++;
}

/* A MAD of the wrong length: truncated, overlong, or nothing at all. */
static void send_bad_length(unsigned s)
{
	uint8_t mad[600];
	struct svd_cm_msg m;
	struct reqp p = { .comm = rnd(), .port = z.ptcp, .src_ip = z.ip[s],
			  .path_ip = z.ip[s], .lcrt = 10, .rcrt = 10,
			  .ack = 10 };
	size_t len = pick(2) ? pick(CM_MAD_LEN) : CM_MAD_LEN + 1 + pick(300);

	for (size_t i = 0; i < sizeof(mad); i++)
		mad[i] = (uint8_t)rnd();
	req_make(&m, &p);
	if (pick(2))
		CHECK_EQ(svd_cm_mad_encode(&m, mad), 0);
	xsend_raw(&z.tx[s], mad, len, NULL);
	z.kinds[4]++;
}

/* A good REQ in a datagram QP1 must not take. */
static void send_bad_datagram(unsigned s)
{
	static const uint8_t ops[] = { 0x04, 0x0a, 0x65, 0x11, 0x64 };
	struct xbad bad = { 0 };
	struct svd_cm_msg m;
	struct reqp p = { .comm = rnd(), .port = z.ptcp, .src_ip = z.ip[s],
			  .path_ip = z.ip[s], .lcrt = 10, .rcrt = 10,
			  .ack = 10 };
	uint8_t mad[CM_MAD_LEN];

	switch (pick(5)) {
	case 0: bad.qkey_bad = 1; break;
	case 1: bad.pkey_bad = 1; break;
	case 2: bad.icrc_bad = 1; break;
	case 3: bad.opcode = ops[pick(sizeof(ops))]; break;
	default: bad.dst_qpn = pick(2) ? 0 : 2 + pick(0xfffffe); break;
	}
	if (!bad.opcode && !bad.dst_qpn && !bad.qkey_bad && !bad.pkey_bad)
		bad.icrc_bad = 1;
	if (bad.opcode == 0x64)
		bad.qkey_bad = 1;
	req_make(&m, &p);
	CHECK_EQ(svd_cm_mad_encode(&m, mad), 0);
	xsend_raw(&z.tx[s], mad, sizeof(mad), &bad);
	z.kinds[5]++;
}

/* ---- X hears the daemon --------------------------------------------------- */

/* What came back to X: remembered, and answered as a peer might (at the
 * end, `closing`: a REJ to every REP, a DREP to every DREQ). */
static void hear(int closing)
{
	for (unsigned s = 0; s < NSRC; s++) {
		struct svd_cm_msg r, a;

		while (xrecv(&z.rx[s], 0, &r)) {
			z.answers++;
			memset(&a, 0, sizeof(a));
			a.tid = r.tid;
			switch (r.attr_id) {
			case CM_ATTR_REP:
				pool_add(r.rep.remote_comm_id, r.rep.local_comm_id,
					 r.tid);
				if (closing || !pick(8)) {
					a.attr_id = CM_ATTR_REJ;
					a.rej.local_comm_id = r.rep.remote_comm_id;
					a.rej.remote_comm_id = r.rep.local_comm_id;
					a.rej.message_rejected = 1;
					a.rej.reason = CM_REJ_CONSUMER_DEFINED;
				} else if (pick(3)) {
					a.attr_id = CM_ATTR_RTU;
					a.rtu.local_comm_id = r.rep.remote_comm_id;
					a.rtu.remote_comm_id = r.rep.local_comm_id;
				}
				break;
			case CM_ATTR_DREQ:
				pool_add(r.dreq.remote_comm_id, r.dreq.local_comm_id,
					 r.tid);
				if (closing || pick(4)) {
					a.attr_id = CM_ATTR_DREP;
					a.drep.local_comm_id = r.dreq.remote_comm_id;
					a.drep.remote_comm_id = r.dreq.local_comm_id;
				}
				break;
			case CM_ATTR_MRA:
				pool_add(r.mra.remote_comm_id, r.mra.local_comm_id,
					 r.tid);
				break;
			case CM_ATTR_REJ:
				if (r.rej.local_comm_id)
					pool_add(r.rej.remote_comm_id,
						 r.rej.local_comm_id, r.tid);
				break;
			default:
				break;
			}
			if (a.attr_id) {
				xsend(&z.tx[s], &a);
				z.replied++;
			}
		}
	}
}

/* ---- L's application -------------------------------------------------------- */

static void app_destroy(struct rdma_cm_id *id)
{
	for (unsigned i = 0; i < z.nheld; i++)
		if (z.held[i] == id) {
			z.held[i] = z.held[--z.nheld];
			break;
		}
	CHECK_EQ(rdma_destroy_id(id), 0);
	z.app_destroyed++;
}

/* The application keeps id (a full hand lets go of one at random). */
static void app_hold(struct rdma_cm_id *id)
{
	for (unsigned i = 0; i < z.nheld; i++)
		if (z.held[i] == id)
			return;
	if (z.nheld == HELD)
		app_destroy(z.held[pick(HELD)]);
	z.held[z.nheld++] = id;
}

/* One event, handled the way a server at random might; `closing`: any
 * new request is turned away and its id destroyed. */
static int app_event(int closing)
{
	struct rdma_cm_event *ev = cm_try(z.ch);
	struct rdma_cm_id *id;
	enum rdma_cm_event_type type;

	if (!ev)
		return 0;
	z.events++;
	id = ev->id;
	type = ev->event;
	CHECK_EQ(rdma_ack_cm_event(ev), 0);
	switch (type) {
	case RDMA_CM_EVENT_CONNECT_REQUEST: {
		struct rdma_conn_param cp = { .qp_num = rnd() & 0xffffff,
					      .responder_resources = 1,
					      .initiator_depth = 1 };
		uint32_t k = closing ? 3 : pick(20);

		if (k < 10) {
			z.accepted += rdma_accept(id, &cp) == 0;
			app_hold(id);
		} else if (k < 14) {
			z.rejected += rdma_reject(id, NULL, 0) == 0;
			app_hold(id);
		} else if (k < 17) {
			app_destroy(id);
		} else {
			app_hold(id); /* left waiting */
		}
		break;
	}
	case RDMA_CM_EVENT_ESTABLISHED:
		z.established++;
		app_hold(id);
		if (!pick(3))
			rdma_disconnect(id);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rdma_disconnect(id);
		if (pick(2))
			app_destroy(id);
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		if (pick(4))
			app_destroy(id);
		break;
	default:
		sv_test_fail(__FILE__, __LINE__, "unexpected event %s status %d",
			     rdma_event_str(type), 0);
	}
	return 1;
}

/* ---- the case --------------------------------------------------------------- */

SV_TEST_T(cm_mad_fuzz, 600)
{
	const char *env = getenv("SV_FUZZ_SECONDS");
	int secs = env && atoi(env) > 0 ? atoi(env) : 5;
	struct sv_status_rep st0, st;
	struct rdma_cm_id *dev;
	struct sockaddr_in a;
	uint64_t t0, end;
	int ids0;

	cmnet_up(&z.n, y_client);
	z.ip[0] = C_IP;
	z.ip[1] = D_IP(4);
	z.ip[2] = C_IP6;
	for (unsigned s = 0; s < NSRC; s++) {
		xsock_open(&z.n, &z.rx[s], z.ip[s], ROCE_PORT);
		xsock_open(&z.n, &z.tx[s], z.ip[s], 0);
	}
	z.ch = rdma_create_event_channel();
	CHECK(z.ch);
	z.ltcp = l_listen(z.ch, RDMA_PS_TCP, &z.ptcp);
	/* A UD listener on the same port number, for the SIDR_REQs. */
	z.pudp = z.ptcp;
	{
		struct sockaddr_in u;

		cm_addr4(&u, "0.0.0.0", z.pudp);
		CHECK_EQ(rdma_create_id(z.ch, &z.ludp, NULL, RDMA_PS_UDP), 0);
		CHECK_EQ(rdma_bind_addr(z.ludp, (struct sockaddr *)&u), 0);
		CHECK_EQ(rdma_listen(z.ludp, 1024), 0);
	}
	/* The device, as the connection ids will have it, before the
	 * baseline: an id bound to L's address. */
	cm_addr4(&a, L_IP, 0);
	CHECK_EQ(rdma_create_id(z.ch, &dev, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_bind_addr(dev, (struct sockaddr *)&a), 0);
	CHECK(dev->verbs);
	CHECK_EQ(rdma_destroy_id(dev), 0);
	CHECK_EQ(sv_test_status(&st0), 0);
	ids0 = cm_daemon_ids();

	seed = getenv("SV_FUZZ_SEED") ? (unsigned)atoi(getenv("SV_FUZZ_SEED")) :
					(unsigned)getpid() * 2654435761u;
	printf("cm fuzz: seed %u, %d s\n", seed, secs);
	fflush(stdout);
	t0 = ms_now();
	while (ms_now() - t0 < (uint64_t)secs * 1000) {
		unsigned s = pick(NSRC), k = pick(20);

		if (k < 6)
			send_req(s);
		else if (k < 13)
			send_random_attr(s);
		else if (k < 15)
			send_other_attr(s);
		else if (k < 17)
			send_bad_header(s);
		else if (k < 18)
			send_bad_length(s);
		else
			send_bad_datagram(s);
		z.sent++;
		hear(0);
		while (app_event(0))
			;
		/* Now and then the server closes a connection of its own. */
		if (z.nheld && !pick(32))
			app_destroy(z.held[pick(z.nheld)]);
		/* Let the daemon keep up: the gateway queues at most 1024
		 * datagrams for QP1 and drops the rest. */
		if (!(z.sent % 64))
			cm_sleep_ms(2);
	}

	/* The application lets go of everything; X answers what still comes
	 * as a peer that is done would. */
	while (z.nheld)
		app_destroy(z.held[z.nheld - 1]);
	end = ms_now() + 120000;
	for (;;) {
		hear(1);
		while (app_event(1))
			while (z.nheld)
				app_destroy(z.held[z.nheld - 1]);
		CHECK_EQ(sv_test_status(&st), 0);
		if (!st.cm_conns && cm_daemon_ids() == ids0)
			break;
		if (ms_now() > end)
			sv_test_fail(__FILE__, __LINE__,
				     "after 120 s the CM still holds %u "
				     "connections (%u half-open), %d ids (%d before)",
				     st.cm_conns, st.cm_half_open,
				     cm_daemon_ids(), ids0);
		cm_sleep_ms(5);
	}
	printf("cm fuzz: %llu MADs sent (nearly right REQs %llu, random "
	       "attributes %llu, unserved attributes %llu, broken headers "
	       "%llu, bad lengths %llu, datagrams QP1 refuses %llu); %llu "
	       "answers heard, %llu replied; the application had %llu events, "
	       "accepted %llu, rejected %llu, %llu established, destroyed %llu "
	       "ids; the daemon counted %llu MADs in, %llu dropped, %llu out, "
	       "%llu REQs refused at a bound, %llu requests expired\n",
	       (unsigned long long)z.sent, (unsigned long long)z.kinds[0],
	       (unsigned long long)z.kinds[1], (unsigned long long)z.kinds[2],
	       (unsigned long long)z.kinds[3], (unsigned long long)z.kinds[4],
	       (unsigned long long)z.kinds[5], (unsigned long long)z.answers,
	       (unsigned long long)z.replied, (unsigned long long)z.events,
	       (unsigned long long)z.accepted, (unsigned long long)z.rejected,
	       (unsigned long long)z.established,
	       (unsigned long long)z.app_destroyed,
	       (unsigned long long)(st.cm_mads_rx - st0.cm_mads_rx),
	       (unsigned long long)(st.cm_mads_dropped - st0.cm_mads_dropped),
	       (unsigned long long)(st.cm_mads_tx - st0.cm_mads_tx),
	       (unsigned long long)(st.cm_rej_listener + st.cm_rej_source -
				    st0.cm_rej_listener - st0.cm_rej_source),
	       (unsigned long long)(st.cm_expired - st0.cm_expired));
	fflush(stdout);
	/* The same daemon, holding what it held. */
	CHECK_EQ(st.pid, st0.pid);
	CHECK_EQ(st.cm_half_open, 0);
	CHECK_EQ(st.ufiles, st0.ufiles);
	CHECK_EQ(st.contexts, st0.contexts);
	CHECK_EQ(st.objects, st0.objects);
	CHECK_EQ(st.open_fds, st0.open_fds);
	/* Things happened: the daemon took MADs, dropped some, answered. */
	CHECK(st.cm_mads_rx > st0.cm_mads_rx);
	CHECK(st.cm_mads_dropped > st0.cm_mads_dropped);
	CHECK(z.answers > 0);
	/* And a client from another host is served. */
	y_connect_ok(&z.n, z.ch, z.ptcp);
	CHECK_EQ(rdma_destroy_id(z.ltcp), 0);
	CHECK_EQ(rdma_destroy_id(z.ludp), 0);
	rdma_destroy_event_channel(z.ch);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.pid, st0.pid);
	cmnet_down(&z.n);
}

SV_TEST_MAIN()

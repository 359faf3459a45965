/* SPDX-License-Identifier: MIT */
/*
 * A bounded fuzz of the daemon's protocol (issue 7, "What must show").
 * For SV_FUZZ_SECONDS (default 20) one client throws at the daemon, at
 * random:
 *   - random bytes, of any length, with or without descriptors;
 *   - valid headers with random ops, versions, lengths and payloads;
 *   - valid requests of every op, the right size or nearly, whose fields
 *     are drawn from the client's own live handles, keys, PD ids, QPNs
 *     and engine ids, from edge values and from noise, with descriptors
 *     where none belong and the wrong ones where some do;
 *   - empty datagrams with descriptors, on the control channel, into its
 *     cmd_fd and into its engine socket, and junk into both.
 * Every framed message must get a reply and garbage a hang-up (then the
 * client reconnects and attaches again); the daemon never goes silent.
 * Afterwards the daemon, still the same process, holds exactly the
 * descriptors and objects it held before, and two processes play
 * ping-pong through the verbs API.  The number of messages is printed.
 */
#include "raw_util.h"
#include "engine_util.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>

/* ---- the fuzzer's world ------------------------------------------------ */

static unsigned seed;
static uint32_t rnd(void) { return (uint32_t)rand_r(&seed) ^ ((uint32_t)rand_r(&seed) << 16); }
static uint32_t pick(uint32_t n) { return n ? rnd() % n : 0; }

#define POOL 64
static struct {
	int chan;		    /* control channel, -1 when hung up */
	uint32_t ufile;
	int cmd_fd, async_fd;	    /* our ufile's client ends */
	int eng_sock, kt_fd;	    /* our engine, once attached */
	int region;		    /* a queue region (sealed memfd) */
	int doorbell;
	uint32_t vals[POOL];	    /* interesting 32-bit values */
	unsigned nvals;
	uint64_t sent, replies, hangups;
	char *buf;		    /* 64 KiB of our memory, for MRs */
} f = { .chan = -1, .eng_sock = -1, .kt_fd = -1, .region = -1 };

static void remember(uint32_t v)
{
	if (f.nvals < POOL)
		f.vals[f.nvals++] = v;
	else
		f.vals[pick(POOL)] = v;
}

/* A value for a 32-bit field: mostly something meaningful. */
static uint32_t field32(void)
{
	switch (pick(8)) {
	case 0: return 0;
	case 1: return UINT32_MAX;
	case 2: return pick(16);
	case 3: return rnd();
	default: return f.nvals ? f.vals[pick(f.nvals)] : rnd();
	}
}

/* ---- messages ---------------------------------------------------------- */

/* Waits for the reply to what was just sent: 1 reply, 0 hang-up.  A
 * daemon that does neither within 20 s fails the test. */
static int reply(uint64_t *first8)
{
	union {
		struct sv_msg_hdr h;
		char b[SV_MSG_MAX];
	} m;
	int fds[SV_MAX_FDS], nfds = 0;
	struct pollfd p = { .fd = f.chan, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, 20000) != 1)
		sv_test_fail(__FILE__, __LINE__, "daemon silent after message %llu",
			     (unsigned long long)f.sent);
	n = sv_recv_msg(f.chan, m.b, sizeof(m.b), fds, SV_MAX_FDS, &nfds);
	sv_close_fds(fds, nfds); /* whatever we were given, we drop */
	if (n <= 0) {
		f.hangups++;
		close(f.chan);
		f.chan = -1;
		return 0;
	}
	CHECK(n >= (ssize_t)sizeof(m.h));
	CHECK_EQ(m.h.magic, SV_PROTO_MAGIC);
	CHECK_EQ(m.h.len, n);
	f.replies++;
	if (first8) {
		*first8 = 0;
		if (!m.h.status && n >= (ssize_t)sizeof(m.h) + 8)
			memcpy(first8, m.b + sizeof(m.h), 8);
	}
	/* What the daemon hands out is worth trying again. */
	if (!m.h.status && n >= (ssize_t)sizeof(m.h) + 8) {
		uint32_t w[2];

		memcpy(w, m.b + sizeof(m.h), 8);
		remember(w[0]);
		remember(w[1]);
	}
	return 1;
}

/* A framed request; its status (1: hung up). */
static int request(uint16_t op, uint32_t ufile, const void *body, size_t len,
		   const int *fds, int nfds, uint64_t *first8)
{
	union {
		struct sv_msg_hdr h;
		char b[SV_MSG_MAX];
	} m;

	memset(&m.h, 0, sizeof(m.h));
	m.h.magic = SV_PROTO_MAGIC;
	m.h.version = SV_PROTO_VERSION;
	m.h.op = op;
	m.h.len = (uint32_t)(sizeof(m.h) + len);
	m.h.seq = (uint32_t)++f.sent;
	m.h.ufile = ufile;
	if (len)
		memcpy(m.b + sizeof(m.h), body, len);
	CHECK_EQ(sv_send_msg(f.chan, m.b, m.h.len, fds, nfds, 0), 0);
	if (!reply(first8))
		return 1;
	return 0;
}

/* A fresh control channel with a view of our ufile. */
static void connect_chan(void)
{
	f.chan = raw_connect();
	CHECK_EQ(request(SV_OP_ATTACH, f.ufile, NULL, 0, &f.cmd_fd, 1, NULL), 0);
}

/* Descriptors to attach: ours of every kind, or pipes nobody needs. */
static int some_fds(int *fds, int *pipes)
{
	int n = pick(4) ? 0 : 1 + (int)pick(SV_MAX_FDS + 1);
	int p[2];

	pipes[0] = pipes[1] = -1;
	if (n > SV_MAX_FDS)
		n = SV_MAX_FDS;
	for (int i = 0; i < n; i++) {
		switch (pick(6)) {
		case 0: fds[i] = f.cmd_fd; break;
		case 1: fds[i] = f.async_fd; break;
		case 2: fds[i] = f.eng_sock >= 0 ? f.eng_sock : f.cmd_fd; break;
		case 3: fds[i] = f.kt_fd >= 0 && pick(2) ? f.kt_fd :
				 f.region >= 0 ? f.region : 0; break;
		default:
			if (pipes[0] < 0) {
				CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
				pipes[0] = p[0];
				pipes[1] = p[1];
			}
			fds[i] = pipes[1];
		}
	}
	return n;
}

/* ---- the kinds of abuse ------------------------------------------------- */

static char junk[SV_MSG_MAX + 512];

static void random_bytes(void)
{
	size_t len = pick(3) ? pick(64) : pick(sizeof(junk));
	int fds[SV_MAX_FDS], pipes[2], nfds = some_fds(fds, pipes);

	for (size_t i = 0; i < len; i++)
		junk[i] = (char)rnd();
	/* Sometimes a magic, so it gets further. */
	if (len >= 4 && pick(2)) {
		uint32_t m = SV_PROTO_MAGIC;

		memcpy(junk, &m, 4);
	}
	f.sent++;
	CHECK_EQ(sv_send_msg(f.chan, junk, len, fds, nfds, 0), 0);
	reply(NULL);
	if (pipes[0] >= 0) {
		close(pipes[0]);
		close(pipes[1]);
	}
}

static void random_header(void)
{
	union {
		struct sv_msg_hdr h;
		char b[SV_MSG_MAX + 256];
	} m;
	size_t blen = pick(3) ? pick(96) : pick(SV_MSG_MAX + 200 - sizeof(m.h));
	int fds[SV_MAX_FDS], pipes[2], nfds = some_fds(fds, pipes);

	m.h.magic = SV_PROTO_MAGIC;
	m.h.version = pick(8) ? SV_PROTO_VERSION : (uint16_t)rnd();
	do
		m.h.op = pick(4) ? (uint16_t)pick(SV_OP_MAX + 8) : (uint16_t)rnd();
	while (m.h.op == SV_OP_SHUTDOWN);
	m.h.len = (uint32_t)(sizeof(m.h) + blen);
	if (!pick(6))
		m.h.len += pick(9) - 4;
	m.h.seq = (uint32_t)++f.sent;
	m.h.ufile = pick(2) ? f.ufile : field32();
	m.h.status = (int32_t)rnd();
	for (size_t i = 0; i < blen; i++)
		m.b[sizeof(m.h) + i] = pick(3) ? 0 : (char)rnd();
	CHECK_EQ(sv_send_msg(f.chan, m.b, sizeof(m.h) + blen, fds, nfds, 0), 0);
	reply(NULL);
	if (pipes[0] >= 0) {
		close(pipes[0]);
		close(pipes[1]);
	}
}

/* Request sizes and descriptor counts of every op (svd_ops.h). */
static const struct {
	uint16_t op;
	uint16_t size;
	uint8_t nfds;
} ops[] = {
	{ SV_OP_HELLO, 0, 0 }, { SV_OP_PING, 0, 0 }, { SV_OP_DEVICE_INFO, 0, 0 },
	{ SV_OP_OPEN_DEVICE, 0, 0 }, { SV_OP_IMPORT_DEVICE, 0, 1 },
	{ SV_OP_ATTACH, 0, 1 },
	{ SV_OP_CLOSE_CONTEXT, sizeof(struct sv_ctx_req), 0 },
	{ SV_OP_QUERY_DEVICE, 0, 0 },
	{ SV_OP_QUERY_PORT, sizeof(struct sv_port_req), 0 },
	{ SV_OP_QUERY_GIDS, sizeof(struct sv_port_req), 0 },
	{ SV_OP_STATUS, 0, 0 },
	{ SV_OP_RES_LIST, sizeof(struct sv_res_req), 0 },
	{ SV_OP_ALLOC_PD, 0, 0 },
	{ SV_OP_DEALLOC_PD, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_IMPORT_PD, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_REG_MR, sizeof(struct sv_reg_mr_req), 0 },
	{ SV_OP_REG_DMABUF_MR, sizeof(struct sv_reg_mr_req), 1 },
	{ SV_OP_REREG_MR, sizeof(struct sv_rereg_mr_req), 0 },
	{ SV_OP_DEREG_MR, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_IMPORT_MR, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_ALLOC_DM, sizeof(struct sv_alloc_dm_req), 0 },
	{ SV_OP_FREE_DM, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_IMPORT_DM, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_REG_DM_MR, sizeof(struct sv_reg_dm_mr_req), 0 },
	{ SV_OP_CREATE_CQ, sizeof(struct sv_create_cq_req), 1 },
	{ SV_OP_DESTROY_CQ, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_RESIZE_CQ, sizeof(struct sv_create_cq_req), 0 },
	{ SV_OP_CREATE_QP, sizeof(struct sv_create_qp_req), 1 },
	{ SV_OP_MODIFY_QP, sizeof(struct sv_modify_qp_req), 0 },
	{ SV_OP_DESTROY_QP, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_CREATE_SRQ, sizeof(struct sv_create_srq_req), 1 },
	{ SV_OP_MODIFY_SRQ, sizeof(struct sv_create_srq_req), 0 },
	{ SV_OP_DESTROY_SRQ, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_CREATE_AH, sizeof(struct sv_create_ah_req), 0 },
	{ SV_OP_DESTROY_AH, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_ALLOC_MW, sizeof(struct sv_alloc_mw_req), 0 },
	{ SV_OP_DEALLOC_MW, sizeof(struct sv_handle_req), 0 },
	{ SV_OP_ENGINE_ATTACH, 0, 1 },
	{ SV_OP_QPN_LOOKUP, sizeof(struct sv_qpn_req), 0 },
	{ SV_OP_LINK_CONNECT, sizeof(struct sv_link_req), 1 },
	{ SV_OP_KEY_FD, sizeof(struct sv_key_req), 0 },
	{ SV_OP_MW_BIND, sizeof(struct sv_mw_bind_req), 0 },
	{ SV_OP_KEY_INVALIDATE, sizeof(struct sv_key_req), 0 },
	{ SV_OP_ASYNC_EVENT, sizeof(struct sv_async_req), 0 },
	{ SV_OP_QP_PEER, sizeof(struct sv_qpn_req), 0 },
	{ SV_OP_CAPTURE_START, sizeof(struct sv_capture_req), 0 },
	{ SV_OP_CAPTURE_RING, sizeof(struct sv_capture_ring_req), 1 },
	{ SV_OP_CAPTURE_STATS, sizeof(struct sv_capture_rep), 0 },
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

/* A well-formed request of a random op with mutated fields. */
static void mutated_request(void)
{
	uint32_t body[32];
	unsigned k = pick(NOPS);
	uint16_t op = ops[k].op;
	size_t len = ops[k].size;
	int fds[SV_MAX_FDS], pipes[2] = { -1, -1 }, nfds = 0, memfd = -1;
	uint64_t rep;

	for (unsigned i = 0; i < 32; i++)
		body[i] = field32();
	/* Addresses and lengths that mean something to the daemon. */
	if (op == SV_OP_REG_MR || op == SV_OP_REREG_MR) {
		uint64_t a = (uintptr_t)f.buf + pick(65536), l = pick(70000);

		if (pick(4)) {
			memcpy(&body[0], &a, 8);
			memcpy(&body[2], &l, 8);
			memcpy(&body[4], &a, 8);
		}
		if (pick(3))
			body[8] = pick(2); /* mem_fault */
		if (pick(3))
			body[9] = 0; /* pad */
	}
	if (op == SV_OP_ALLOC_DM && pick(2)) {
		uint64_t l = 1 + pick(1 << 16);

		memcpy(&body[0], &l, 8);
		body[2] = pick(13);
		body[3] = 0;
	}
	if (!pick(6)) {
		/* Nearly the right size. */
		len += pick(9);
		len = len > 4 ? len - 4 : 0;
	}
	if (ops[k].nfds ? pick(6) != 0 : !pick(8))
		nfds = some_fds(fds, pipes);
	if (ops[k].nfds && nfds == 0 && pick(2)) {
		fds[0] = f.cmd_fd;
		nfds = 1;
	}
	if (nfds && (op == SV_OP_LINK_CONNECT || op == SV_OP_ENGINE_ATTACH ||
		     op == SV_OP_REG_DMABUF_MR || op == SV_OP_CAPTURE_RING) &&
	    pick(2)) {
		/* A memfd, sealed or not, of a few sizes. */
		memfd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		CHECK(memfd >= 0);
		CHECK_EQ(ftruncate(memfd, 8192 + pick(3) * 4096), 0);
		if (pick(2))
			fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
		fds[0] = memfd;
	}
	request(op, pick(10) ? f.ufile : field32(), body, len, fds, nfds, &rep);
	if (memfd >= 0)
		close(memfd);
	if (pipes[0] >= 0) {
		close(pipes[0]);
		close(pipes[1]);
	}
}

/* Empty datagrams and junk, with descriptors, where no reply comes: our
 * cmd_fd and engine socket (the control channel gets them elsewhere). */
static void side_channels(void)
{
	int fds[SV_MAX_FDS], pipes[2], nfds = some_fds(fds, pipes);
	int sock = (f.eng_sock >= 0 && pick(2)) ? f.eng_sock : f.cmd_fd;
	size_t len = pick(2) ? 0 : pick(300);
	int err;

	for (size_t i = 0; i < len; i++)
		junk[i] = (char)rnd();
	f.sent++;
	err = sv_send_msg(sock, junk, len, fds, nfds, 1);
	/* The cmd_fd always takes it (or is full for a moment); an engine
	 * socket may be gone (a mutated ENGINE_ATTACH replaced it). */
	CHECK(err == 0 || err == -EAGAIN || sock == f.eng_sock);
	if (pipes[0] >= 0) {
		close(pipes[0]);
		close(pipes[1]);
	}
}

static void empty_on_control(void)
{
	int fds[SV_MAX_FDS], pipes[2], nfds = some_fds(fds, pipes);

	f.sent++;
	CHECK_EQ(sv_send_msg(f.chan, "", 0, fds, nfds, 0), 0);
	CHECK_EQ(reply(NULL), 0); /* hung up on */
	if (pipes[0] >= 0) {
		close(pipes[0]);
		close(pipes[1]);
	}
}

/* ---- set-up: a ufile with one of everything ----------------------------- */

static void setup(void)
{
	struct sv_ctx_rep cr;
	int rfds[2], nr = 0;
	uint64_t rep;
	union {
		struct sv_msg_hdr h;
		char b[SV_MSG_MAX];
	} m;

	f.buf = mmap(NULL, 65536, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(f.buf != MAP_FAILED);
	f.chan = raw_connect();
	/* OPEN_DEVICE by hand: its reply carries our cmd_fd and async_fd. */
	memset(&m.h, 0, sizeof(m.h));
	m.h.magic = SV_PROTO_MAGIC;
	m.h.version = SV_PROTO_VERSION;
	m.h.op = SV_OP_OPEN_DEVICE;
	m.h.len = sizeof(m.h);
	CHECK_EQ(sv_send_msg(f.chan, m.b, sizeof(m.h), NULL, 0, 0), 0);
	CHECK((size_t)sv_recv_msg(f.chan, m.b, sizeof(m.b), rfds, 2, &nr) ==
	      sizeof(m.h) + sizeof(cr));
	CHECK_EQ(m.h.status, 0);
	CHECK_EQ(nr, 2);
	memcpy(&cr, m.b + sizeof(m.h), sizeof(cr));
	f.ufile = cr.ufile;
	f.cmd_fd = rfds[0];
	f.async_fd = rfds[1];
	remember(cr.ctx);
	/* Our engine (its socket is a target too). */
	f.doorbell = eventfd(0, EFD_CLOEXEC);
	{
		struct sv_engine_attach_rep er;

		memset(&m.h, 0, sizeof(m.h));
		m.h.magic = SV_PROTO_MAGIC;
		m.h.version = SV_PROTO_VERSION;
		m.h.op = SV_OP_ENGINE_ATTACH;
		m.h.len = sizeof(m.h);
		CHECK_EQ(sv_send_msg(f.chan, m.b, sizeof(m.h), &f.doorbell, 1, 0), 0);
		CHECK((size_t)sv_recv_msg(f.chan, m.b, sizeof(m.b), rfds, 2, &nr) ==
		      sizeof(m.h) + sizeof(er));
		CHECK_EQ(nr, 2);
		memcpy(&er, m.b + sizeof(m.h), sizeof(er));
		f.eng_sock = rfds[0];
		f.kt_fd = rfds[1];
		remember(er.engine_id);
		remember((uint32_t)getpid());
	}
	/* One object of each kind; their handles and keys go to the pool. */
	{
		uint32_t pd, cq;
		struct sv_create_cq_req c = { .cqe = 8 };
		struct sv_create_qp_req q = { .srq_handle = UINT32_MAX,
					      .qp_type = IBV_QPT_RC,
					      .max_send_wr = 4, .max_recv_wr = 4 };
		struct sv_reg_mr_req r = { .addr = (uintptr_t)f.buf,
					   .length = 65536,
					   .iova = (uintptr_t)f.buf,
					   .access = IBV_ACCESS_LOCAL_WRITE |
						     IBV_ACCESS_MW_BIND };
		struct sv_alloc_mw_req w = { .type = IBV_MW_TYPE_2 };
		struct sv_alloc_dm_req d = { .length = 8192 };
		struct sv_create_srq_req s = { .max_wr = 4, .max_sge = 1 };

		f.region = memfd_create("fuzz-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		CHECK(f.region >= 0);
		CHECK_EQ(ftruncate(f.region, 4096), 0);
		CHECK_EQ(fcntl(f.region, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
		CHECK_EQ(request(SV_OP_ALLOC_PD, f.ufile, NULL, 0, NULL, 0, &rep), 0);
		pd = (uint32_t)rep;
		CHECK_EQ(request(SV_OP_CREATE_CQ, f.ufile, &c, sizeof(c), &f.region, 1, &rep), 0);
		cq = (uint32_t)rep;
		q.pd_handle = pd;
		q.scq_handle = q.rcq_handle = cq;
		q.cookie = 7;
		CHECK_EQ(request(SV_OP_CREATE_QP, f.ufile, &q, sizeof(q), &f.region, 1, &rep), 0);
		r.pd_handle = pd;
		CHECK_EQ(request(SV_OP_REG_MR, f.ufile, &r, sizeof(r), NULL, 0, &rep), 0);
		w.pd_handle = pd;
		CHECK_EQ(request(SV_OP_ALLOC_MW, f.ufile, &w, sizeof(w), NULL, 0, &rep), 0);
		CHECK_EQ(request(SV_OP_ALLOC_DM, f.ufile, &d, sizeof(d), NULL, 0, &rep), 0);
		s.pd_handle = pd;
		CHECK_EQ(request(SV_OP_CREATE_SRQ, f.ufile, &s, sizeof(s), &f.region, 1, &rep), 0);
	}
}

static void teardown(void)
{
	if (f.chan >= 0)
		close(f.chan);
	close(f.cmd_fd);
	close(f.async_fd);
	close(f.eng_sock);
	close(f.kt_fd);
	if (f.region >= 0)
		close(f.region);
	close(f.doorbell);
	munmap(f.buf, 65536);
}

/* ---- ping-pong through the verbs, two processes ------------------------- */

#define ROUNDS 50

static void pong_side(struct ep *e, int ping)
{
	enum ibv_wc_opcode opc;
	struct ibv_wc wc;
	int recvs = 0, sends = 0;

	for (int i = 0; i < ROUNDS; i++) {
		if (ping) {
			snprintf(e->buf, 64, "ping %d", i);
			post_send_op(e, 1, IBV_WR_SEND, e->buf, 16, 0, 0);
			/* The pong may complete before our SEND does (its ACK
			 * can follow the pong): one of each, in either order. */
			EXPECT_WC(e->cq, &wc, IBV_WC_SUCCESS);
			opc = wc.opcode;
			EXPECT_WC(e->cq, &wc, IBV_WC_SUCCESS);
			CHECK((opc == IBV_WC_SEND && wc.opcode == IBV_WC_RECV) ||
			      (opc == IBV_WC_RECV && wc.opcode == IBV_WC_SEND));
			CHECK(!strncmp(e->buf + 4096, "pong", 4));
			post_recv(e, 2, e->buf + 4096, 64);
		} else {
			/* Our last SEND may complete after the next ping
			 * arrives (its ACK can follow that ping): the two
			 * queues' completions come in either order. */
			while (recvs <= i) {
				EXPECT_WC(e->cq, &wc, IBV_WC_SUCCESS);
				if (wc.opcode == IBV_WC_RECV) {
					recvs++;
				} else {
					CHECK_EQ(wc.opcode, IBV_WC_SEND);
					sends++;
				}
			}
			CHECK(!strncmp(e->buf + 4096, "ping", 4));
			post_recv(e, 2, e->buf + 4096, 64);
			snprintf(e->buf, 64, "pong %d", i);
			post_send_op(e, 1, IBV_WR_SEND, e->buf, 16, 0, 0);
		}
	}
	while (!ping && sends < ROUNDS) {
		EXPECT_WC(e->cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
		sends++;
	}
}

static void ponger(void *arg)
{
	int s = *(int *)arg;
	struct ep e;
	char go;

	eu_exchange_as_peer(&e, s);
	post_recv(&e, 2, e.buf + 4096, 64);
	xsend(s, "r", 1);
	xrecv(s, &go, 1);
	pong_side(&e, 0);
	ep_close(&e);
	ibv_close_device(e.ctx);
}

static void ping_pong(void)
{
	struct ep e;
	struct ep_info peer;
	int sv[2], st;
	pid_t kid;
	char ready;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		close(sv[0]);
		ponger(&sv[1]);
		_exit(0);
	}
	close(sv[1]);
	peer = eu_exchange_as_test(&e, sv[0]);
	ep_connect(&e, peer.qpn);
	post_recv(&e, 2, e.buf + 4096, 64);
	xrecv(sv[0], &ready, 1);
	xsend(sv[0], "g", 1);
	pong_side(&e, 1);
	st = sv_test_wait_child(kid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ep_close(&e);
	CHECK_EQ(ibv_close_device(e.ctx), 0);
	close(sv[0]);
}

SV_TEST_T(protocol_fuzz, 600)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	const char *env = getenv("SV_FUZZ_SECONDS");
	int secs = env && atoi(env) > 0 ? atoi(env) : 20;
	struct timespec t0, t;
	unsigned kinds[6] = { 0 };

	seed = (unsigned)getpid() * 2654435761u;
	printf("fuzz: seed %u, %d s\n", seed, secs);
	setup();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		unsigned k = pick(20);

		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= secs)
			break;
		if (f.chan < 0)
			connect_chan();
		if (k < 2) {
			random_bytes();
			kinds[0]++;
		} else if (k < 5) {
			random_header();
			kinds[1]++;
		} else if (k < 16) {
			mutated_request();
			kinds[2]++;
		} else if (k < 19) {
			side_channels();
			kinds[3]++;
		} else {
			empty_on_control();
			kinds[4]++;
		}
	}
	printf("fuzz: %llu messages sent (random bytes %u, random headers %u, "
	       "mutated requests %u, into cmd_fd/engine socket %u, empty with "
	       "fds %u); %llu replies, %llu hang-ups\n",
	       (unsigned long long)f.sent, kinds[0], kinds[1], kinds[2],
	       kinds[3], kinds[4], (unsigned long long)f.replies,
	       (unsigned long long)f.hangups);
	fflush(stdout);
	teardown();
	/* Same process, same descriptors, no object left. */
	sv_test_wait_quiet(&base, 30000);
	ping_pong();
	check_healthy(pid, &base);
}

SV_TEST_MAIN()

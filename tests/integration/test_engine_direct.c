/* SPDX-License-Identifier: MIT */
/*
 * The initiator places the data itself (direct execution): a target
 * process that is stopped (SIGSTOP: no CPU at all) still takes RDMA WRITEs,
 * answers READs and receives SENDs into its posted receives; RC order
 * holds (a SEND never overtakes the WRITE before it); READs posted
 * together (one transfer) complete each in order, a bad key failing just
 * its own; big messages over many SGEs land whole; UD messages to one
 * destination arrive in order while the path to it changes from packets
 * to direct; a thread that copied to many peers keeps few /proc/PID/mem
 * fds, and none once it ends; a fork's child inherits none; a fenced
 * WRITE carries what the READs before it brought.  All but the first run
 * over packets too (tests.cmake, SOFTVERBS_DIRECT=0); packets over a fresh
 * link take no page fault on its rings (over packets only).
 */
#include "engine_util.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

/* A peer process with an RC endpoint connected to ours; it obeys
 * one-byte commands on the socket. */
struct peer {
	pid_t pid;
	int s;
	struct ep_info info;
};

enum {
	CMD_RECV = 'r',	  /* post n receives of 4 KiB (n follows) */
	CMD_POLL = 'p',	  /* poll n receives, send back their byte_len + crc */
	CMD_POLL_TELL = 'P', /* the same, one byte after its first poll */
	CMD_POLL_ANY = 'a', /* poll n receives of any status, send back
			       wr_id, byte_len, crc, imm (0: none), status */
	CMD_SUM = 's',	  /* send back a checksum of its buffer (len follows) */
	CMD_QUIT = 'q',
};

static uint32_t sum32(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void peer_main(int s)
{
	struct ep e;
	uint32_t posted = 0;

	eu_exchange_as_peer(&e, s);
	xsend(s, "c", 1);
	for (;;) {
		char c;
		uint32_t n;

		xrecv(s, &c, 1);
		if (c == CMD_QUIT)
			break;
		xrecv(s, &n, sizeof(n));
		if (c == CMD_RECV) {
			for (uint32_t i = 0; i < n; i++, posted++)
				post_recv(&e, posted,
					  e.buf + 32768 + (posted % 8) * 4096, 4096);
			xsend(s, "k", 1);
		} else if (c == CMD_POLL || c == CMD_POLL_TELL) {
			int tell = c == CMD_POLL_TELL;

			for (uint32_t i = 0; i < n; i++) {
				struct ibv_wc wc;
				uint32_t r[3];
				int got = 0;

				if (tell) {
					/* Our engine has seen us poll: the
					 * test waits on what it does then. */
					got = ibv_poll_cq(e.cq, 1, &wc);
					CHECK(got >= 0);
					xsend(s, &c, 1);
					tell = 0;
				}
				if (got)
					CHECK_EQ(wc.status, IBV_WC_SUCCESS);
				else
					EXPECT_WC(e.cq, &wc, IBV_WC_SUCCESS);
				r[0] = (uint32_t)wc.wr_id;
				r[1] = wc.byte_len;
				r[2] = sum32((uint8_t *)e.buf + 32768 +
						     (wc.wr_id % 8) * 4096,
					     wc.byte_len);
				xsend(s, r, sizeof(r));
			}
		} else if (c == CMD_POLL_ANY) {
			for (uint32_t i = 0; i < n; i++) {
				struct ibv_wc wc;
				uint32_t r[5];

				CHECK(poll1(e.cq, &wc, 10000));
				r[0] = (uint32_t)wc.wr_id;
				r[1] = wc.status ? 0 : wc.byte_len;
				r[2] = sum32((uint8_t *)e.buf + 32768 +
						     (wc.wr_id % 8) * 4096,
					     r[1]);
				r[3] = wc.status || !(wc.wc_flags & IBV_WC_WITH_IMM) ?
					       0 : ntohl(wc.imm_data);
				r[4] = wc.status;
				xsend(s, r, sizeof(r));
			}
		} else if (c == CMD_SUM) {
			uint32_t h = sum32((uint8_t *)e.buf, n);

			xsend(s, &h, sizeof(h));
		}
	}
	_exit(0);
}

static void peer_open(struct peer *p, struct ep *mine)
{
	int sv[2];
	char c;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	p->pid = fork();
	CHECK(p->pid >= 0);
	if (p->pid == 0) {
		close(sv[0]);
		peer_main(sv[1]);
	}
	close(sv[1]);
	p->s = sv[0];
	p->info = eu_exchange_as_test(mine, p->s);
	ep_connect(mine, p->info.qpn);
	/* Its QP is ready before we send: a request that reaches it before
	 * its RTR is dropped, and on a loaded machine, where the peer may
	 * wait long for a CPU, the retries could run out first. */
	xrecv(p->s, &c, 1);
}

static void peer_cmd(struct peer *p, char c, uint32_t n)
{
	xsend(p->s, &c, 1);
	xsend(p->s, &n, sizeof(n));
}

static void peer_close(struct peer *p, struct ep *mine)
{
	char c = CMD_QUIT;

	xsend(p->s, &c, 1);
	CHECK_EQ(sv_test_wait_child(p->pid), 0);
	close(p->s);
	ep_close(mine);
}

/*
 * Stops the peer once the ring from our engine to its engine is armed
 * (armed = 1: its progress thread sleeps and wants a doorbell) or not
 * (0: its application polls its CQ, or its thread spins), as
 * src/common/sv_ring.h puts it.  That bit decides how our engine sends to
 * it (src/engine/sv_direct.c), and while the peer is stopped nobody
 * changes it.  The peer may leave the state before the stop lands (its
 * thread arms the ring when its application has not polled for a while,
 * as on a loaded machine where it waits for a CPU): then it runs on and
 * is stopped again.
 */
static void stop_peer_armed(struct peer *p, uint32_t armed)
{
	const struct sv_ring_hdr *h = NULL;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int st;

		if (!h)
			h = eu_ring_to(p->pid);
		if (h && atomic_load(&h->armed) == armed) {
			CHECK_EQ(kill(p->pid, SIGSTOP), 0);
			/* Stopped for sure: kill only sends the signal, and
			 * until each thread takes it, it may still run (and
			 * take what we send). */
			while (waitpid(p->pid, &st, WUNTRACED) < 0)
				CHECK_EQ(errno, EINTR);
			CHECK(WIFSTOPPED(st));
			if (atomic_load(&h->armed) == armed)
				return;
			CHECK_EQ(kill(p->pid, SIGCONT), 0);
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 10)
			sv_test_fail(__FILE__, __LINE__,
				     "the peer's ring never %s",
				     armed ? "armed" : "unarmed");
		usleep(100);
	}
}

static int direct_off(void)
{
	const char *e = getenv("SOFTVERBS_DIRECT");

	return e && !strcmp(e, "0");
}

SV_TEST(stopped_target_takes_write_read_send)
{
	struct peer p;
	struct ep a;
	struct ibv_wc wc;
	uint32_t h, r[3];
	char k;

	if (direct_off()) {
		printf("skip: packets need the target's CPU\n");
		return;
	}
	peer_open(&p, &a);
	peer_cmd(&p, CMD_RECV, 2);
	xrecv(p.s, &k, 1);
	/* Its progress thread asleep first (it spins a moment after
	 * activity): a sleeping target is what direct execution is for, and
	 * a small SEND goes to it directly. */
	stop_peer_armed(&p, 1);
	/* Nothing of the target runs now; a NIC does not need it to. */
	eu_pattern((uint8_t *)a.buf, 8192, 7);
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 8192, p.info.addr,
		     p.info.rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	memset(a.buf + 16384, 0, 8192);
	post_send_op(&a, 2, IBV_WR_RDMA_READ, a.buf + 16384, 8192, p.info.addr,
		     p.info.rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!memcmp(a.buf, a.buf + 16384, 8192));
	eu_pattern((uint8_t *)a.buf + 24576, 3000, 9);
	post_send_op(&a, 3, IBV_WR_SEND, a.buf + 24576, 3000, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(kill(p.pid, SIGCONT), 0);
	/* The target finds all of it when it runs again. */
	peer_cmd(&p, CMD_SUM, 8192);
	xrecv(p.s, &h, sizeof(h));
	CHECK_EQ(h, sum32((uint8_t *)a.buf, 8192));
	peer_cmd(&p, CMD_POLL, 1);
	xrecv(p.s, r, sizeof(r));
	CHECK_EQ(r[0], 0);
	CHECK_EQ(r[1], 3000);
	CHECK_EQ(r[2], sum32((uint8_t *)a.buf + 24576, 3000));
	peer_close(&p, &a);
}

/* Posts n RDMA READs of len bytes as one list: READ i takes the
 * peer's [i * len, +len) into ours at dst + i * len; READ bad (if < n)
 * names a key the peer does not have. */
static void post_reads(struct ep *a, const struct peer *p, char *dst,
		       uint32_t n, uint32_t len, uint32_t bad)
{
	struct ibv_send_wr wr[16], *badwr;
	struct ibv_sge sg[16];

	CHECK(n <= 16);
	memset(wr, 0, sizeof(wr));
	for (uint32_t i = 0; i < n; i++) {
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)(dst + i * len),
					  .length = len, .lkey = a->mr->lkey };
		wr[i].wr_id = 100 + i;
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_READ;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = p->info.addr + (uint64_t)i * len;
		wr[i].wr.rdma.rkey = i == bad ? p->info.rkey ^ 0x5a5a00 :
						p->info.rkey;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	CHECK_EQ(ibv_post_send(a->qp, wr, &badwr), 0);
}

/* A fenced WRITE waits for the READs before it: it carries the bytes
 * they brought (over packets a READ's response comes later, and an
 * unfenced WRITE would go with the old ones).  Small READs may travel as
 * packets even here (to a target that polls), bigger ones go direct. */
SV_TEST(fenced_write_carries_what_the_reads_before_it_brought)
{
	struct ibv_send_wr wr[3], *bad;
	struct ibv_sge sg[3];
	struct peer p;
	struct ep a;
	struct ibv_wc wc;
	uint8_t *want, *got;
	uint32_t h;
	char k;

	peer_open(&p, &a);
	want = (uint8_t *)a.buf + 16384;
	got = (uint8_t *)a.buf + 32768;
	peer_cmd(&p, CMD_RECV, 1);
	xrecv(p.s, &k, 1);
	for (int round = 0; round < 20; round++) {
		uint32_t len = round & 1 ? 64 : 3072; /* per READ */

		/* The peer's [0, 16 KiB): a pattern, then zeros. */
		memset(a.buf, 0, 16384);
		eu_pattern((uint8_t *)a.buf, 2 * len, (uint32_t)round + 11);
		post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 16384, p.info.addr,
			     p.info.rkey);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		/* Two READs of it into ours, then a fenced WRITE of what
		 * they brought to the peer's 8 KiB, posted together. */
		memset(got, 0, 2 * len);
		memset(wr, 0, sizeof(wr));
		for (uint32_t i = 0; i < 3; i++) {
			sg[i] = (struct ibv_sge){ .addr = (uintptr_t)got +
							  (i < 2 ? i * len : 0),
						  .length = i < 2 ? len : 2 * len,
						  .lkey = a.mr->lkey };
			wr[i].wr_id = 200 + i;
			wr[i].sg_list = &sg[i];
			wr[i].num_sge = 1;
			wr[i].opcode = i < 2 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
			wr[i].send_flags = IBV_SEND_SIGNALED |
					   (i == 2 ? IBV_SEND_FENCE : 0);
			wr[i].wr.rdma.remote_addr =
				p.info.addr + (i < 2 ? i * len : 8192);
			wr[i].wr.rdma.rkey = p.info.rkey;
			wr[i].next = i < 2 ? &wr[i + 1] : NULL;
		}
		CHECK_EQ(ibv_post_send(a.qp, wr, &bad), 0);
		for (uint32_t i = 0; i < 3; i++) {
			EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, 200 + i);
		}
		CHECK(!memcmp(a.buf, got, 2 * len));
		memcpy(want, a.buf, 8192);
		memcpy(want + 8192, a.buf, 2 * len);
		peer_cmd(&p, CMD_SUM, 8192 + 2 * len);
		xrecv(p.s, &h, sizeof(h));
		CHECK_EQ(h, sum32(want, 8192 + 2 * len));
	}
	peer_close(&p, &a);
}

/* READs posted together run as one batch (one transfer); each still
 * completes in order with its own data, and a bad key in the run fails
 * exactly that READ, after the good ones before it, as one by one. */
SV_TEST(read_runs_complete_each_in_order)
{
	struct peer p;
	struct ep a;
	struct ibv_wc wc;
	uint32_t h;
	char k;

	peer_open(&p, &a);
	peer_cmd(&p, CMD_RECV, 1);
	xrecv(p.s, &k, 1);
	/* The peer's first 30 KiB, written by us, then read back in 5
	 * READs of 6 KiB at once (above the size that may go as packets). */
	eu_pattern((uint8_t *)a.buf, 30720, 3);
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 30720, p.info.addr,
		     p.info.rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	peer_cmd(&p, CMD_SUM, 30720);
	xrecv(p.s, &h, sizeof(h));
	CHECK_EQ(h, sum32((uint8_t *)a.buf, 30720));
	for (int round = 0; round < 20; round++) {
		memset(a.buf + 32768, 0, 30720);
		post_reads(&a, &p, a.buf + 32768, 5, 6144, 5);
		for (uint32_t i = 0; i < 5; i++) {
			EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, 100 + i);
			CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
			CHECK_EQ(wc.byte_len, 6144);
		}
		CHECK(!memcmp(a.buf, a.buf + 32768, 30720));
	}
	/* The PSNs and MSNs the batches took are the ones the responder
	 * expects next: a SEND still lands. */
	post_send_op(&a, 2, IBV_WR_SEND, a.buf, 100, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 2);
	peer_cmd(&p, CMD_POLL, 1);
	{
		uint32_t r[3];

		xrecv(p.s, r, sizeof(r));
		CHECK_EQ(r[1], 100);
		CHECK_EQ(r[2], sum32((uint8_t *)a.buf, 100));
	}
	/* READ 3 of 5 names a bad key: 0..2 complete with their data, 3
	 * fails remotely, the last is flushed. */
	memset(a.buf + 32768, 0, 30720);
	post_reads(&a, &p, a.buf + 32768, 5, 6144, 3);
	for (uint32_t i = 0; i < 3; i++) {
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 100 + i);
	}
	CHECK(!memcmp(a.buf, a.buf + 32768, 3 * 6144));
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(wc.wr_id, 103);
	for (uint32_t i = 4; i < 5; i++) {
		EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ(wc.wr_id, 100 + i);
	}
	peer_close(&p, &a);
}

/* Posts n SENDs of op as one list: SEND i carries len[i] bytes of ours
 * from 8 KiB in (i * 4 KiB apart), immediate data 0x1000 + i. */
static void post_sends(struct ep *a, enum ibv_wr_opcode op, uint32_t n,
		       const uint32_t *len, uint64_t id0)
{
	struct ibv_send_wr wr[8], *badwr;
	struct ibv_sge sg[8];

	CHECK(n <= 8);
	memset(wr, 0, sizeof(wr));
	for (uint32_t i = 0; i < n; i++) {
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)a->buf + 8192 + i * 4096,
					  .length = len[i], .lkey = a->mr->lkey };
		wr[i].wr_id = id0 + i;
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].opcode = op;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].imm_data = htonl(0x1000 + i);
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	CHECK_EQ(ibv_post_send(a->qp, wr, &badwr), 0);
}

/* The peer's next n receives, as CMD_POLL_ANY reports them: receive
 * first + i holds SEND i of len (or failed with st[i]). */
static void expect_recvs(struct peer *p, struct ep *a, uint32_t n,
			 uint32_t first, const uint32_t *len, int imm,
			 const enum ibv_wc_status *st)
{
	peer_cmd(p, CMD_POLL_ANY, n);
	for (uint32_t i = 0; i < n; i++) {
		enum ibv_wc_status want = st ? st[i] : IBV_WC_SUCCESS;
		uint32_t r[5];

		xrecv(p->s, r, sizeof(r));
		CHECK_EQ(r[0], first + i);
		CHECK_EQ(r[4], (uint32_t)want);
		if (want != IBV_WC_SUCCESS)
			continue;
		CHECK_EQ(r[1], len[i]);
		CHECK_EQ(r[2], sum32((uint8_t *)a->buf + 8192 + i * 4096, len[i]));
		CHECK_EQ(r[3], imm ? 0x1000 + i : 0);
	}
}

/* The peer posts n receives; then, with stop, it is stopped with its
 * progress thread asleep (a SEND reaches it only directly). */
static void recvs_then_stop(struct peer *p, uint32_t n, int stop)
{
	char k;

	peer_cmd(p, CMD_RECV, n);
	xrecv(p->s, &k, 1);
	if (stop)
		stop_peer_armed(p, 1);
}

/* The next n completions of ours: SENDs id0.. done well, in order. */
static void expect_sent(struct ep *a, uint64_t id0, uint32_t n)
{
	struct ibv_wc wc;

	for (uint32_t i = 0; i < n; i++) {
		EXPECT_WC(a->cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, id0 + i);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
	}
}

/* SENDs posted together run as one batch (one transfer into the
 * receives they take); each lands whole in its own receive, in order,
 * with its length and immediate data; a run longer than the receives
 * posted lands as far as they go and the rest waits for more (RNR); a
 * SEND too long for its receive fails just itself, after the good ones
 * before it, as one by one.  With the target stopped the batch is the
 * only way in (direct); over packets the same holds. */
SV_TEST(send_runs_land_each_in_its_receive)
{
	static const uint32_t len[8] = { 4096, 1, 3000, 4095, 64, 2048, 4096, 777 };
	static const uint32_t bad[4] = { 1000, 2000, 6000, 1000 };
	static const enum ibv_wc_status bad_st[4] = {
		IBV_WC_SUCCESS, IBV_WC_SUCCESS, IBV_WC_LOC_LEN_ERR,
		IBV_WC_WR_FLUSH_ERR
	};
	int stop = !direct_off();
	struct peer p;
	struct ep a;
	struct ibv_wc wc;

	peer_open(&p, &a);
	eu_pattern((uint8_t *)a.buf + 8192, 8 * 4096, 21);
	for (int op = 0; op < 2; op++) {
		recvs_then_stop(&p, 8, stop);
		post_sends(&a, op ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 8, len,
			   10 * (uint64_t)op);
		expect_sent(&a, 10 * (uint64_t)op, 8);
		if (stop)
			CHECK_EQ(kill(p.pid, SIGCONT), 0);
		expect_recvs(&p, &a, 8, 8 * (uint32_t)op, len, op, NULL);
	}
	/* Two receives for four SENDs: two land (while the target is
	 * stopped: nobody but us takes them), the others wait for the two
	 * receives it posts when it runs again. */
	recvs_then_stop(&p, 2, stop);
	post_sends(&a, IBV_WR_SEND, 4, len, 20);
	expect_sent(&a, 20, 2);
	if (stop)
		CHECK_EQ(kill(p.pid, SIGCONT), 0);
	recvs_then_stop(&p, 2, 0);
	expect_sent(&a, 22, 2);
	expect_recvs(&p, &a, 4, 16, len, 0, NULL);
	/* The third of four does not fit its 4 KiB receive. */
	recvs_then_stop(&p, 4, stop);
	post_sends(&a, IBV_WR_SEND, 4, bad, 30);
	expect_sent(&a, 30, 2);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_INV_REQ_ERR);
	CHECK_EQ(wc.wr_id, 32);
	EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 33);
	if (stop)
		CHECK_EQ(kill(p.pid, SIGCONT), 0);
	expect_recvs(&p, &a, 4, 20, bad, 0, bad_st);
	peer_close(&p, &a);
}

SV_TEST(send_never_overtakes_write)
{
	struct peer p;
	struct ep a;
	struct ibv_wc wc;
	char k;

	peer_open(&p, &a);
	for (uint32_t i = 0; i < 300; i++) {
		uint32_t r[3], h;

		peer_cmd(&p, CMD_RECV, 1);
		xrecv(p.s, &k, 1);
		eu_pattern((uint8_t *)a.buf, 4096, i);
		post_send_op(&a, 10 + i, IBV_WR_RDMA_WRITE, a.buf, 4096,
			     p.info.addr, p.info.rkey);
		post_send_op(&a, 20000 + i, IBV_WR_SEND, a.buf, 64, 0, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 10 + i);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 20000 + i);
		/* When the SEND has landed, the WRITE before it has. */
		peer_cmd(&p, CMD_POLL, 1);
		xrecv(p.s, r, sizeof(r));
		peer_cmd(&p, CMD_SUM, 4096);
		xrecv(p.s, &h, sizeof(h));
		CHECK_EQ(h, sum32((uint8_t *)a.buf, 4096));
	}
	peer_close(&p, &a);
}

/* A big WRITE posted behind a SEND that sits in the ring as a packet (its
 * target polls, then stops before it takes it): the WRITE waits for that
 * SEND's ACK rather than join it as packets (which path it then takes is
 * measured by bench/dp_bench.sh, not here), and the SEND after it waits
 * for it.  All three complete in order once the target runs again, and
 * the second SEND finds the WRITE's bytes landed. */
SV_TEST(big_write_behind_a_queued_packet)
{
	struct peer p;
	struct ep a;
	struct ibv_wc wc;
	uint32_t r[3], h;
	char k;

	peer_open(&p, &a);
	peer_cmd(&p, CMD_RECV, 2);
	xrecv(p.s, &k, 1);
	/* It polls its CQ: its ring is unarmed, so a small SEND goes as a
	 * packet; stopped, it takes none. */
	peer_cmd(&p, CMD_POLL_TELL, 2);
	xrecv(p.s, &k, 1);
	stop_peer_armed(&p, 0);
	eu_pattern((uint8_t *)a.buf, 16384, 5);
	post_send_op(&a, 1, IBV_WR_SEND, a.buf + 24576, 64, 0, 0);
	post_send_op(&a, 2, IBV_WR_RDMA_WRITE, a.buf, 16384, p.info.addr,
		     p.info.rkey);
	post_send_op(&a, 3, IBV_WR_SEND, a.buf + 24576, 64, 0, 0);
	if (!direct_off()) {
		/* The first SEND waits in the ring (else the target's
		 * stopped CPU would not matter and this tests nothing). */
		CHECK(!poll1(a.cq, &wc, 100));
	}
	CHECK_EQ(kill(p.pid, SIGCONT), 0);
	for (uint32_t i = 1; i <= 3; i++) {
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, i);
	}
	for (int i = 0; i < 2; i++) {
		xrecv(p.s, r, sizeof(r));
		CHECK_EQ(r[0], (uint32_t)i);
		CHECK_EQ(r[1], 64);
	}
	peer_cmd(&p, CMD_SUM, 16384);
	xrecv(p.s, &h, sizeof(h));
	CHECK_EQ(h, sum32((uint8_t *)a.buf, 16384));
	peer_close(&p, &a);
}

SV_TEST_T(big_messages_over_many_sges, 120)
{
	struct ep a, b;
	struct ibv_wc wc;
	size_t big = 8u << 20;
	uint8_t *src, *dst, *back;
	struct ibv_mr *ms, *md, *mb;
	struct ibv_sge s[4], d[4];
	struct ibv_send_wr wr, *bad;

	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	CHECK(posix_memalign((void **)&src, 4096, big) == 0);
	CHECK(posix_memalign((void **)&dst, 4096, big) == 0);
	CHECK(posix_memalign((void **)&back, 4096, big) == 0);
	eu_pattern(src, big, 3);
	memset(dst, 0, big);
	memset(back, 0, big);
	ms = ibv_reg_mr(a.pd, src, big, EU_ACCESS);
	md = ibv_reg_mr(b.pd, dst, big, EU_ACCESS);
	mb = ibv_reg_mr(a.pd, back, big, EU_ACCESS);
	CHECK(ms && md && mb);
	/* 4 uneven SGEs of the source into one remote range. */
	for (int i = 0; i < 4; i++) {
		s[i].addr = (uintptr_t)src + (size_t)i * (big / 4);
		s[i].length = (uint32_t)(big / 4);
		s[i].lkey = ms->lkey;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.sg_list = s;
	wr.num_sge = 4;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = md->rkey;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!memcmp(src, dst, big));
	/* Read it back into 4 SGEs in another order of sizes. */
	for (int i = 0; i < 4; i++) {
		size_t off = i == 0 ? 0 : i == 1 ? 4096 : i == 2 ? big / 2 : big - 12288;
		size_t end = i == 0 ? 4096 : i == 1 ? big / 2 : i == 2 ? big - 12288 : big;

		d[i].addr = (uintptr_t)back + off;
		d[i].length = (uint32_t)(end - off);
		d[i].lkey = mb->lkey;
	}
	wr.wr_id = 2;
	wr.sg_list = d;
	wr.opcode = IBV_WR_RDMA_READ;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, (uint32_t)big);
	CHECK(!memcmp(src, back, big));
	CHECK_EQ(ibv_dereg_mr(ms), 0);
	CHECK_EQ(ibv_dereg_mr(md), 0);
	CHECK_EQ(ibv_dereg_mr(mb), 0);
	free(src);
	free(dst);
	free(back);
	ep_close(&a);
	ep_close(&b);
}

/* UD to a QP of another process: the first messages go as packets (the
 * sender learns the destination meanwhile), later ones directly; none may
 * overtake another. */
SV_TEST(ud_in_order_while_the_path_changes)
{
	int sv[2];
	pid_t pid;
	const int n = 300;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct ep e;
		uint32_t qpn;

		close(sv[0]);
		ep_open(&e, NULL, IBV_QPT_UD);
		ep_connect(&e, 0);
		for (int i = 0; i < 64; i++)
			post_recv(&e, (uint64_t)i, e.buf + (size_t)i * 512, 512);
		qpn = e.qp->qp_num;
		xsend(sv[1], &qpn, sizeof(qpn));
		for (int i = 0; i < n; i++) {
			struct ibv_wc wc;
			uint32_t seq;

			EXPECT_WC(e.cq, &wc, IBV_WC_SUCCESS);
			memcpy(&seq, e.buf + (wc.wr_id % 64) * 512 + 40, 4);
			CHECK_EQ(seq, (uint32_t)i);
			post_recv(&e, wc.wr_id + 64, e.buf + (wc.wr_id % 64) * 512,
				  512);
			if (i % 32 == 31)
				xsend(sv[1], "c", 1); /* room for 32 more */
		}
		xsend(sv[1], "k", 1);
		ep_close(&e);
		_exit(0);
	}
	close(sv[1]);
	{
		struct ep a;
		struct ibv_ah_attr aa;
		struct ibv_ah *ah;
		uint32_t qpn;
		char k;

		ep_open(&a, NULL, IBV_QPT_UD);
		ep_connect(&a, 0);
		xrecv(sv[0], &qpn, sizeof(qpn));
		memset(&aa, 0, sizeof(aa));
		aa.is_global = 1;
		aa.port_num = 1;
		aa.grh.hop_limit = 1;
		CHECK_EQ(ibv_query_gid(a.ctx, 1, 0, &aa.grh.dgid), 0);
		ah = ibv_create_ah(a.pd, &aa);
		CHECK(ah);
		for (int i = 0; i < n; i++) {
			struct ibv_sge s = { (uintptr_t)a.buf + 4096, 16, a.mr->lkey };
			struct ibv_send_wr wr, *bad;
			struct ibv_wc wc;
			uint32_t seq = (uint32_t)i;

			memcpy(a.buf + 4096, &seq, 4);
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = (uint64_t)i;
			wr.sg_list = &s;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_SEND;
			wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = qpn;
			wr.wr.ud.remote_qkey = 0x11111111;
			CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
			EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
			/* Never more in flight than it has receives for. */
			if (i % 32 == 31)
				xrecv(sv[0], &k, 1);
		}
		xrecv(sv[0], &k, 1);
		CHECK_EQ(sv_test_wait_child(pid), 0);
		CHECK_EQ(ibv_destroy_ah(ah), 0);
		ep_close(&a);
	}
	close(sv[0]);
}

/* How many of our fds name some process's /proc/PID/mem. */
static int proc_mem_fds(void)
{
	char link[64], target[128];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		ssize_t r;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		r = readlink(link, target, sizeof(target) - 1);
		if (r <= 0)
			continue;
		target[r] = 0;
		if (!strncmp(target, "/proc/", 6) &&
		    !strcmp(target + r - 4, "/mem"))
			n++;
	}
	return n;
}

struct fd_run {
	int base, most, peers, end;
};

/* 8 KiB WRITEs and READs (always direct) to ten peers, one after the
 * other, in this thread; each lands whole. */
static void *ten_peers(void *arg)
{
	struct fd_run *run = arg;

	for (int i = 0; i < 10; i++) {
		struct peer p;
		struct ep a;
		struct ibv_wc wc;
		uint32_t h;
		int now;

		peer_open(&p, &a);
		eu_pattern((uint8_t *)a.buf, 8192, 20 + (unsigned)i);
		post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 8192, p.info.addr,
			     p.info.rkey);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		memset(a.buf + 16384, 0, 8192);
		post_send_op(&a, 2, IBV_WR_RDMA_READ, a.buf + 16384, 8192,
			     p.info.addr, p.info.rkey);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		CHECK(!memcmp(a.buf, a.buf + 16384, 8192));
		peer_cmd(&p, CMD_SUM, 8192);
		xrecv(p.s, &h, sizeof(h));
		CHECK_EQ(h, sum32((uint8_t *)a.buf, 8192));
		now = proc_mem_fds() - run->base;
		if (now > run->most)
			run->most = now;
		peer_close(&p, &a);
		run->peers++;
	}
	run->end = proc_mem_fds() - run->base;
	return NULL;
}

/* A copy of one small range to another process goes through its
 * /proc/PID/mem (keys.c): a thread keeps at most four such fds however
 * many peers it wrote to, and closes them when it ends.  Two threads copy
 * here: this one, and the progress thread now and then (a post it ran
 * later), which lives on. */
SV_TEST(proc_mem_fds_bounded_per_thread)
{
	struct fd_run run = { .base = proc_mem_fds() };
	pthread_t t;
	const char *cma = getenv("SOFTVERBS_NO_CMA");
	int left;

	CHECK_EQ(pthread_create(&t, NULL, ten_peers, &run), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	left = proc_mem_fds() - run.base;
	CHECK_EQ(run.peers, 10);
	CHECK(run.most <= 8);
	CHECK(left <= 4);
	if (!direct_off() && !(cma && strcmp(cma, "0"))) {
		CHECK(run.end >= 1); /* the path was taken */
		CHECK(left < run.end); /* the copying thread's fds closed */
	}
}

/* A fork's child inherits none of those fds, whichever thread opened
 * them: the parent's peers are not its peers. */
SV_TEST(fork_child_inherits_no_proc_mem_fds)
{
	struct peer p;
	struct ep a;
	struct ibv_wc wc;
	const char *cma = getenv("SOFTVERBS_NO_CMA");
	int status;
	pid_t child;

	peer_open(&p, &a);
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 8192, p.info.addr,
		     p.info.rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	if (!direct_off() && !(cma && strcmp(cma, "0")))
		CHECK(proc_mem_fds() >= 1);
	child = fork();
	CHECK(child >= 0);
	if (child == 0)
		_exit(proc_mem_fds());
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	peer_close(&p, &a);
}

/* A link's rings are faulted in when it is made, as a NIC's queues are
 * pinned at creation: a stream of packets over a fresh link takes no page
 * fault for its first lap of either ring (on a VM each cost 6-14 us, ~3
 * ms a ring of 256 pages).  Over packets only: direct execution uses no ring. */
SV_TEST(packets_take_no_page_fault_on_a_fresh_link)
{
	struct rusage r0, r1;
	struct peer p;
	struct ep a;
	struct ibv_wc wc;

	if (!direct_off()) {
		printf("skip: direct execution sends no packets\n");
		return;
	}
	peer_open(&p, &a);
	/* One round trip first: the peer's ring back to us (its ACKs) is
	 * mapped by our progress thread when it first arrives. */
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 64, p.info.addr,
		     p.info.rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(getrusage(RUSAGE_SELF, &r0), 0);
	/* ~2 MiB of WRITE packets out (two laps of our 1 MiB ring), an ACK
	 * for each back. */
	for (uint32_t i = 0; i < 16000; i++) {
		post_send_op(&a, 2, IBV_WR_RDMA_WRITE, a.buf + (i % 64) * 64, 64,
			     p.info.addr + (i % 64) * 64, p.info.rkey);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	}
	CHECK_EQ(getrusage(RUSAGE_SELF, &r1), 0);
	/* A ring is 256 pages; a few faults may come from elsewhere. */
	printf("minor faults during the stream: %ld\n",
	       r1.ru_minflt - r0.ru_minflt);
	CHECK(r1.ru_minflt - r0.ru_minflt < 64);
	peer_close(&p, &a);
}

SV_TEST_MAIN()

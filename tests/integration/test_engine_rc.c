/* SPDX-License-Identifier: MIT */
/*
 * The engine's RC transport: send/recv, write, read, atomics within one
 * process (loopback link) and between two processes (shared-memory rings
 * brokered by the daemon), segmentation, immediate data, inline data.
 */
#include "engine_util.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/mman.h>

/* Two connected RC endpoints in this process. */
static void pair_local(struct ep *a, struct ep *b)
{
	ep_open(a, NULL, IBV_QPT_RC);
	ep_open(b, a->ctx, IBV_QPT_RC);
	ep_connect(a, b->qp->qp_num);
	ep_connect(b, a->qp->qp_num);
}

SV_TEST(rc_loopback_send_recv)
{
	struct ep a, b;
	struct ibv_wc wc;

	pair_local(&a, &b);
	post_recv(&b, 7, b.buf, 4096);
	strcpy(a.buf, "hello over a ring");
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 18, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	if (wc.wr_id == 7) { /* one CQ per endpoint: not mixed */
		CHECK(0);
	}
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(wc.opcode, IBV_WC_SEND);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 7);
	CHECK_EQ(wc.opcode, IBV_WC_RECV);
	CHECK_EQ(wc.byte_len, 18);
	CHECK_EQ(wc.qp_num, b.qp->qp_num);
	CHECK_EQ(wc.src_qp, a.qp->qp_num);
	CHECK(!strcmp(b.buf, "hello over a ring"));
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(rc_loopback_multi_packet_imm_inline)
{
	struct ep a, b;
	struct ibv_wc wc;
	struct ibv_sge s;
	struct ibv_send_wr wr, *bad;

	pair_local(&a, &b);
	/* 10000 bytes at MTU 1024: 10 packets, two SGEs on the receive. */
	for (int i = 0; i < 10000; i++)
		a.buf[i] = (char)(i * 7);
	{
		struct ibv_sge rs[2] = {
			{ (uintptr_t)b.buf, 3000, b.mr->lkey },
			{ (uintptr_t)b.buf + 20000, 8000, b.mr->lkey },
		};
		struct ibv_recv_wr rw = { .wr_id = 9, .sg_list = rs, .num_sge = 2 },
				   *rbad;

		CHECK_EQ(ibv_post_recv(b.qp, &rw, &rbad), 0);
	}
	s = (struct ibv_sge){ (uintptr_t)a.buf, 10000, a.mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(0xabcd1234);
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 10000);
	CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
	CHECK_EQ(ntohl(wc.imm_data), 0xabcd1234);
	for (int i = 0; i < 3000; i++)
		CHECK_EQ((uint8_t)b.buf[i], (uint8_t)(i * 7));
	for (int i = 3000; i < 10000; i++)
		CHECK_EQ((uint8_t)b.buf[20000 + i - 3000], (uint8_t)(i * 7));

	/* Inline: the buffer may change right after the post. */
	post_recv(&b, 10, b.buf, 64);
	strcpy(a.buf + 100, "inline!");
	s = (struct ibv_sge){ (uintptr_t)a.buf + 100, 8, 0 /* no lkey needed */ };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 3;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	strcpy(a.buf + 100, "changed");
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 8);
	CHECK(!strcmp(b.buf, "inline!"));
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(rc_loopback_write_read_atomics)
{
	struct ep a, b;
	struct ibv_wc wc;
	struct ibv_sge s;
	struct ibv_send_wr wr, *bad;
	uint64_t *remote;

	pair_local(&a, &b);
	for (int i = 0; i < 5000; i++)
		a.buf[i] = (char)(i + 3);
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 5000,
		     (uintptr_t)b.buf + 1000, b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	for (int i = 0; i < 5000; i++)
		CHECK_EQ((uint8_t)b.buf[1000 + i], (uint8_t)(i + 3));
	/* Nothing arrives at b's CQ for a plain write. */
	CHECK_EQ(ibv_poll_cq(b.cq, 1, &wc), 0);

	/* Read it back into another spot. */
	post_send_op(&a, 2, IBV_WR_RDMA_READ, a.buf + 30000, 5000,
		     (uintptr_t)b.buf + 1000, b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
	CHECK_EQ(wc.byte_len, 5000);
	CHECK(!memcmp(a.buf + 30000, a.buf, 5000));

	/* Atomics on an aligned word of b. */
	remote = (uint64_t *)(void *)(b.buf + 4096);
	*remote = 100;
	memset(&wr, 0, sizeof(wr));
	s = (struct ibv_sge){ (uintptr_t)a.buf + 8192, 8, a.mr->lkey };
	wr.wr_id = 3;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = (uintptr_t)remote;
	wr.wr.atomic.rkey = b.mr->rkey;
	wr.wr.atomic.compare_add = 5;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_FETCH_ADD);
	CHECK_EQ(*(uint64_t *)(void *)(a.buf + 8192), 100);
	CHECK_EQ(*remote, 105);
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 105;
	wr.wr.atomic.swap = 7;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_COMP_SWAP);
	CHECK_EQ(*(uint64_t *)(void *)(a.buf + 8192), 105);
	CHECK_EQ(*remote, 7);
	/* A failed compare leaves memory alone and returns the value. */
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(*(uint64_t *)(void *)(a.buf + 8192), 7);
	CHECK_EQ(*remote, 7);

	/* Write with immediate consumes a receive at b. */
	post_recv(&b, 44, b.buf, 16);
	memset(&wr, 0, sizeof(wr));
	s = (struct ibv_sge){ (uintptr_t)a.buf, 100, a.mr->lkey };
	wr.wr_id = 4;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(77);
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 50000;
	wr.wr.rdma.rkey = b.mr->rkey;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 44);
	CHECK_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	CHECK_EQ(ntohl(wc.imm_data), 77);
	CHECK_EQ(wc.byte_len, 100);
	CHECK(!memcmp(b.buf + 50000, a.buf, 100));
	ep_close(&a);
	ep_close(&b);
}

/* Many messages in flight, unsignaled ones between: completions in
 * order, nothing lost. */
SV_TEST(rc_loopback_stream)
{
	struct ep a, b;
	struct ibv_wc wc;
	int got = 0, sent = 0, done = 0;

	pair_local(&a, &b);
	for (int i = 0; i < 64; i++)
		post_recv(&b, 1000 + i, b.buf + i * 512, 512);
	while (done < 200) {
		while (sent < 200 && sent - done < 32) {
			struct ibv_sge s = { (uintptr_t)a.buf + (sent % 64) * 256,
					     256, a.mr->lkey };
			struct ibv_send_wr wr, *bad;

			memset(&wr, 0, sizeof(wr));
			wr.wr_id = sent;
			wr.sg_list = &s;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_SEND;
			wr.send_flags = IBV_SEND_SIGNALED;
			CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
			sent++;
		}
		if (ibv_poll_cq(a.cq, 1, &wc) == 1) {
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, done);
			done++;
		}
		while (ibv_poll_cq(b.cq, 1, &wc) == 1) {
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, 1000 + got % 64);
			post_recv(&b, 1000 + got % 64, b.buf + (got % 64) * 512,
				  512);
			got++;
		}
	}
	while (got < 200) {
		EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
		got++;
	}
	ep_close(&a);
	ep_close(&b);
}

/* N SENDs from a to b posted back to back (a stream: sv_path.c holds
 * them), the last solicited when `solicit`. */
static void post_burst(struct ep *a, int n, int solicit)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sg = { (uintptr_t)a->buf + i * 64, 64,
				      a->mr->lkey };
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = i;
		wr.sg_list = &sg;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED |
				(solicit && i == n - 1 ? IBV_SEND_SOLICITED : 0);
		CHECK_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	}
}

/* Takes n completions of cq, all successful (in order of wr_id when
 * ordered). */
static void take_all(struct ibv_cq *cq, int n, int ordered)
{
	struct ibv_wc wc;

	for (int got = 0; got < n; got++) {
		CHECK(poll1(cq, &wc, 20000));
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		if (ordered)
			CHECK_EQ(wc.wr_id, got);
	}
}

/*
 * A stream held for an application that polls (sv_path.c: posts that
 * follow one another within burst_ns wait for its next poll) still runs
 * when the application, instead of polling again, waits on a completion
 * channel it armed before posting -- rping's pattern.  Only the progress
 * thread can run it then; it must not sleep past it for good
 * (eng_progress.c sleep_once: a short nap while streams are held, and
 * eng_qp.c: a stream held beside a thread asleep longer rings it).  The
 * last SEND is solicited and b's CQ asks for solicited events only, so
 * the event needs the whole stream to have run.  primed: each round
 * first runs a stream by polling, so its polls ran held streams just
 * before the application stops polling (a post then rings no thread
 * asleep longer: eng_qp.c; the thread's next look runs the stream).
 * Whether the thread sleeps long at the post depends on timing: the
 * test pins that the stream runs, not which way.
 */
static void held_stream_channel(int primed)
{
	enum { N = 8, ROUNDS = 20 };
	struct ibv_comp_channel *ch;
	struct ep a, b;
	struct ibv_wc wc;

	ep_open(&a, NULL, IBV_QPT_RC);
	ch = ibv_create_comp_channel(a.ctx);
	CHECK(ch);
	ep_open_chan(&b, a.ctx, IBV_QPT_RC, ch);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	for (int r = 0; r < ROUNDS; r++) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		struct ibv_cq *ev_cq;
		void *ev_ctx;

		if (primed) {
			for (int i = 0; i < N; i++)
				post_recv(&b, i, b.buf + i * 64, 64);
			post_burst(&a, N, 0);
			take_all(a.cq, N, 0);
			take_all(b.cq, N, 1);
		}
		for (int i = 0; i < N; i++)
			post_recv(&b, i, b.buf + i * 64, 64);
		CHECK_EQ(ibv_req_notify_cq(b.cq, 1), 0);
		/* We poll (an empty CQ), then post a burst. */
		CHECK_EQ(ibv_poll_cq(a.cq, 1, &wc), 0);
		post_burst(&a, N, 1);
		/* And wait for the event, polling nothing. */
		CHECK_EQ(poll(&pfd, 1, 20000), 1);
		CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
		CHECK(ev_cq == b.cq);
		ibv_ack_cq_events(b.cq, 1);
		take_all(b.cq, N, 1);
		take_all(a.cq, N, 0);
	}
	ep_close(&a);
	ep_close(&b);
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0);
}

SV_TEST(held_stream_runs_for_a_channel_waiter)
{
	held_stream_channel(0);
}

SV_TEST(held_stream_runs_for_a_channel_waiter_that_polled)
{
	held_stream_channel(1);
}

/*
 * A stream held for an application whose polls ran the held streams
 * before (a post then rings no progress thread: eng_qp.c) still runs
 * when the application makes no verbs call at all after posting it --
 * no poll, no event asked for: it spins on the memory the WRITEs fill.
 * Only the progress thread's next look can run it then (within
 * nap_max_ns); without that look the WRITEs would never land.
 */
SV_TEST(held_stream_runs_for_an_app_that_stops_polling)
{
	enum { N = 8, ROUNDS = 20, AT = 8192 };
	struct ep a, b;

	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	for (int r = 0; r < ROUNDS; r++) {
		volatile unsigned char *last =
			(volatile unsigned char *)b.buf + AT + (N - 1) * 64;
		unsigned char want = (unsigned char)(r + 1);
		struct timespec t0, t;

		/* A stream that our polls run. */
		for (int i = 0; i < N; i++)
			post_recv(&b, i, b.buf + i * 64, 64);
		post_burst(&a, N, 0);
		take_all(a.cq, N, 0);
		take_all(b.cq, N, 1);
		/* Then WRITEs in a burst, and no verbs call until the last
		 * one's bytes are in b's memory. */
		for (int i = 0; i < N; i++) {
			memset(a.buf + 4096 + i * 64, want, 64);
			post_send_op(&a, i, IBV_WR_RDMA_WRITE,
				     a.buf + 4096 + i * 64, 64,
				     (uintptr_t)b.buf + AT + i * 64,
				     b.mr->rkey);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			if (last[0] == want && last[63] == want)
				break;
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (t.tv_sec - t0.tv_sec < 20);
		CHECK_EQ(last[0], want);
		CHECK_EQ(last[63], want);
		for (int i = 0; i < N; i++)
			CHECK_EQ(((unsigned char *)b.buf)[AT + i * 64], want);
		take_all(a.cq, N, 1);
	}
	ep_close(&a);
	ep_close(&b);
}

/* ------------------------------------------------ two processes -- */

#define PINGS 2000

/* The peer: an RC endpoint that connects to the test's QP, then serves
 * commands until told to stop. */
static void peer_main(int s, uint32_t *unused)
{
	struct ep e;
	struct ibv_wc wc;
	char cmd;

	(void)unused;
	eu_exchange_as_peer(&e, s);
	post_recv(&e, 5, e.buf, 4096);
	xsend(s, "r", 1);
	for (;;) {
		xrecv(s, &cmd, 1);
		if (cmd == 'q')
			break;
		if (cmd == 'w') { /* wait for the receive, echo it back */
			CHECK(poll1(e.cq, &wc, 10000));
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			post_send_op(&e, 6, IBV_WR_SEND, e.buf, wc.byte_len, 0, 0);
			CHECK(poll1(e.cq, &wc, 10000));
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			xsend(s, "k", 1);
		}
		if (cmd == 'p' || cmd == 's') {
			/* Echo sends, each in turn; 's': polling slowly, so
			 * the test's SENDs find us not draining (its direct
			 * path). */
			int n = cmd == 'p' ? PINGS : PINGS / 10;

			post_recv(&e, 5, e.buf, 4096);
			xsend(s, "r", 1);
			for (int i = 0; i < n; i++) {
				if (cmd == 's')
					while (!ibv_poll_cq(e.cq, 1, &wc))
						usleep(50);
				else
					CHECK(poll1(e.cq, &wc, 10000));
				CHECK_EQ(wc.status, IBV_WC_SUCCESS);
				CHECK_EQ(wc.opcode, IBV_WC_RECV);
				post_recv(&e, 5, e.buf, 4096);
				post_send_op(&e, 6, IBV_WR_SEND, e.buf,
					     wc.byte_len, 0, 0);
				/* Our SEND completes before the next ping
				 * comes in: its ACK went out first. */
				CHECK(poll1(e.cq, &wc, 10000));
				CHECK_EQ(wc.status, IBV_WC_SUCCESS);
				CHECK_EQ(wc.opcode, IBV_WC_SEND);
			}
			xsend(s, "k", 1);
		}
		if (cmd == 'c') { /* check the write landed */
			CHECK(!memcmp(e.buf + 8000, "written by the other process", 28));
			xsend(s, "k", 1);
		}
	}
	ep_close(&e);
	ibv_close_device(e.ctx);
	_exit(0);
}

/* A peer process running fn on its end of a socketpair (and flag, a
 * word shared with it), the test's end in *sock. */
static pid_t start_peer(int *sock, void (*fn)(int, uint32_t *), uint32_t *flag)
{
	int sv[2];
	pid_t pid;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		fn(sv[1], flag);
	}
	close(sv[1]);
	*sock = sv[0];
	return pid;
}

/* Rounds of ping-pong with the peer (command cmd): each side's SEND
 * completes before the other's reply to it is received, as on a NIC,
 * where the responder's ACK leaves before the application can answer.
 * (The IBTA does not order a send queue's completions against a receive
 * queue's; rdma-core's tests and many programs poll as if it did.) */
static void pings(struct ep *a, int s, char cmd, int n)
{
	struct ibv_wc wc;
	char c;

	xsend(s, &cmd, 1);
	xrecv(s, &c, 1);
	for (int i = 0; i < n; i++) {
		post_recv(a, 9, a->buf + 10000, 4096);
		post_send_op(a, 1, IBV_WR_SEND, a->buf, 19, 0, 0);
		EXPECT_WC(a->cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
		EXPECT_WC(a->cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
	}
	xrecv(s, &c, 1);
	CHECK_EQ(c, 'k');
}

SV_TEST(rc_two_processes)
{
	struct ep a;
	struct ep_info theirs;
	struct ibv_wc wc;
	int s, status;
	char c;
	pid_t pid = start_peer(&s, peer_main, NULL);

	theirs = eu_exchange_as_test(&a, s);
	ep_connect(&a, theirs.qpn);
	xrecv(s, &c, 1);

	/* Ping-pong: a send, the peer echoes it. */
	post_recv(&a, 9, a.buf + 10000, 4096);
	strcpy(a.buf, "ping from the test");
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 19, 0, 0);
	xsend(s, "w", 1);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_SEND);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RECV);
	CHECK_EQ(wc.byte_len, 19);
	CHECK(!strcmp(a.buf + 10000, "ping from the test"));
	xrecv(s, &c, 1);

	/* Many rounds: each side's SEND completes before the other's
	 * reply to it is received, as on a NIC, where the responder's ACK
	 * leaves before the application can answer.  (The IBTA does not
	 * order a send queue's completions against a receive queue's;
	 * rdma-core's tests and many programs poll as if it did.) */
	pings(&a, s, 'p', PINGS);
	pings(&a, s, 's', PINGS / 10);

	/* One-sided: the peer does nothing while we write and read. */
	strcpy(a.buf + 200, "written by the other process");
	post_send_op(&a, 2, IBV_WR_RDMA_WRITE, a.buf + 200, 28,
		     theirs.addr + 8000, theirs.rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	post_send_op(&a, 3, IBV_WR_RDMA_READ, a.buf + 20000, 28,
		     theirs.addr + 8000, theirs.rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!memcmp(a.buf + 20000, "written by the other process", 28));
	xsend(s, "c", 1);
	xrecv(s, &c, 1);
	CHECK_EQ(c, 'k');
	xsend(s, "q", 1);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ep_close(&a);
	ibv_close_device(a.ctx);
}

/* ------------------------------------- arrived before the destroy -- */

#define ARRIVE_N 16
#define ARRIVE_ROUNDS 10

/* Spins (no system call) until *flag is v; at most 20 s. */
static void wait_flag(uint32_t *flag, uint32_t v)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; __atomic_load_n(flag, __ATOMIC_ACQUIRE) != v; i++) {
		if (i % 4096)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 20);
	}
}

/* The peer: polls (so SENDs to it travel as packets into its ring, which
 * nobody needs to wake it for) until told to stop, then waits without a
 * system call -- its ring now read by nobody -- and destroys its QP the
 * moment the test says the SENDs are in that ring, and exits. */
static void arrive_peer(int s, uint32_t *flag)
{
	struct ep e;
	struct ibv_wc wc;
	char c;

	/* Forked before the test had threads; our round starts on 'G' (no
	 * time limit: the rounds before may be slow; the test gone, 0). */
	if (read(s, &c, 1) != 1)
		_exit(1);
	eu_exchange_as_peer(&e, s);
	for (int i = 0; i <= ARRIVE_N; i++)
		post_recv(&e, (uint64_t)i, e.buf + i * 64, 64);
	xsend(s, "r", 1);
	/* The first SEND: our ring from the test is there. */
	CHECK(poll1(e.cq, &wc, 10000));
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	xsend(s, "g", 1);
	for (unsigned i = 0; !__atomic_load_n(flag, __ATOMIC_ACQUIRE); i++) {
		CHECK_EQ(ibv_poll_cq(e.cq, 1, &wc), 0);
		if (i % 4096 == 0)
			CHECK(getppid() != 1); /* the test is still there */
	}
	__atomic_store_n(flag, 2, __ATOMIC_RELEASE);
	wait_flag(flag, 3);
	CHECK_EQ(ibv_destroy_qp(e.qp), 0);
	_exit(0);
}

/* SENDs that reached a peer before it destroyed its QP are acknowledged,
 * as a NIC acknowledges what it took before the QP went away, even when
 * the peer's application never polled for them and exits at once: the
 * sender's WQEs complete with success, not RETRY_EXC_ERR.  (The end of
 * ibv_srq_pingpong: its server's last SENDs are extra ones the client
 * does not wait for.) */
SV_TEST(rc_arrived_before_destroy_acked)
{
	uint32_t *flags = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int socks[ARRIVE_ROUNDS];
	pid_t pids[ARRIVE_ROUNDS];

	CHECK(flags != MAP_FAILED);
	/* Every round's peer is forked now, while this process has no
	 * thread: under ASan, a child forked while one of the library's
	 * threads (a progress thread, a detach) is inside the sanitizer's
	 * allocator hangs in its first malloc (Debian 12's libasan takes no
	 * lock around fork), as a loaded run saw here once. */
	for (int r = 0; r < ARRIVE_ROUNDS; r++) {
		int sv[2];

		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		pids[r] = fork();
		CHECK(pids[r] >= 0);
		if (!pids[r]) {
			/* Only our own socket: the test's end of another
			 * round kept open here would keep that peer from
			 * seeing the test go. */
			for (int k = 0; k < r; k++)
				close(socks[k]);
			close(sv[0]);
			arrive_peer(sv[1], &flags[r * 16]);
		}
		close(sv[1]);
		socks[r] = sv[0];
	}
	for (int r = 0; r < ARRIVE_ROUNDS; r++) {
		struct ep a;
		struct ep_info theirs;
		struct ibv_wc wc;
		struct ibv_send_wr ws[ARRIVE_N], *bad;
		struct ibv_sge sge;
		uint32_t *flag = &flags[r * 16];
		int s = socks[r], status;
		char c = 'G';
		pid_t pid = pids[r];

		xsend(s, &c, 1);
		theirs = eu_exchange_as_test(&a, s);
		sge = (struct ibv_sge){ (uintptr_t)a.buf, 8, a.mr->lkey };
		ep_connect_ex(&a, theirs.qpn, 12, 7, 7, 12);
		xrecv(s, &c, 1);
		post_send_op(&a, 99, IBV_WR_SEND, a.buf, 8, 0, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
		xrecv(s, &c, 1);
		__atomic_store_n(flag, 1, __ATOMIC_RELEASE);
		wait_flag(flag, 2);
		/* One post of them all: sent before it returns (a batch
		 * that big is not held back, and nothing else of ours runs
		 * the requester now). */
		for (int i = 0; i < ARRIVE_N; i++) {
			ws[i] = (struct ibv_send_wr){
				.wr_id = (uint64_t)i, .sg_list = &sge,
				.num_sge = 1, .opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED,
				.next = i + 1 < ARRIVE_N ? &ws[i + 1] : NULL
			};
		}
		CHECK_EQ(ibv_post_send(a.qp, ws, &bad), 0);
		__atomic_store_n(flag, 3, __ATOMIC_RELEASE);
		/* Round 0 polls while the peer goes, the others after it
		 * is gone: its last ACKs wait in our ring then. */
		if (r) {
			CHECK_EQ(waitpid(pid, &status, 0), pid);
			usleep(10000);
		}
		for (int i = 0; i < ARRIVE_N; i++) {
			EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, (uint64_t)i);
		}
		if (!r)
			CHECK_EQ(waitpid(pid, &status, 0), pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		close(s);
		ep_close(&a);
		ibv_close_device(a.ctx);
	}
	munmap(flags, 4096);
}

/* ------------------------------------------- the progress thread -- */

/* The progress thread shows as sv-progress (top -H, perf): one per
 * attached engine, running once a QP has moved a message, gone with the
 * last context. */
SV_TEST(progress_thread_named)
{
	struct ep a, b;
	struct ibv_wc wc;
	pid_t tid = 0;
	int n = 0;

	CHECK_EQ(eu_threads_named("sv-progress\n", &tid), 0);
	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	post_recv(&b, 1, b.buf, 64);
	post_send_op(&a, 2, IBV_WR_SEND, a.buf, 16, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	for (int t = 0; t < 1000 && !(n = eu_threads_named("sv-progress\n", &tid));
	     t++)
		usleep(10000);
	CHECK_EQ(n, 1);
	CHECK(tid != getpid());
	ep_close(&b);
	ep_close(&a);
	CHECK_EQ(ibv_close_device(a.ctx), 0);
	for (int t = 0; t < 1000 && eu_threads_named("sv-progress\n", &tid); t++)
		usleep(10000);
	CHECK_EQ(eu_threads_named("sv-progress\n", &tid), 0);
}

SV_TEST_MAIN()

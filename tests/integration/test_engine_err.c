/* SPDX-License-Identifier: MIT */
/*
 * The engine's error paths, as hardware reports them: RNR retry, keys
 * checked when the WQE executes (rereg, dereg), peer death, and UD/UC
 * behaviour (GRH, Q_Key, silent drops).  Also: an idle process's progress
 * thread uses no CPU.
 */
#include "engine_util.h"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static void pair_local(struct ep *a, struct ep *b, uint8_t rnr_retry,
		       uint8_t min_rnr)
{
	ep_open(a, NULL, IBV_QPT_RC);
	ep_open(b, a->ctx, IBV_QPT_RC);
	ep_connect_ex(a, b->qp->qp_num, 14, 7, rnr_retry, min_rnr);
	ep_connect_ex(b, a->qp->qp_num, 14, 7, rnr_retry, min_rnr);
}

SV_TEST(rnr_retry_exceeded_then_infinite)
{
	struct ep a, b;
	struct ibv_wc wc;

	pair_local(&a, &b, 2, 1);
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 10, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_RNR_RETRY_EXC_ERR);
	CHECK_EQ(wc.wr_id, 1);
	ep_close(&a);
	ep_close(&b);

	/* rnr_retry 7: waits as long as it takes. */
	pair_local(&a, &b, 7, 1);
	post_send_op(&a, 2, IBV_WR_SEND, a.buf, 10, 0, 0);
	CHECK(!poll1(a.cq, &wc, 200));
	post_recv(&b, 3, b.buf, 64);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 10);
	ep_close(&a);
	ep_close(&b);
}

/* An RC pair set up with the sender's PSN ahead of what the receiver
 * expects (sq_psn 0x400, rq_psn 0x100): the receiver NAKs the sequence
 * and never takes the message, the sender's retries run out
 * (RETRY_EXC_ERR), as on a NIC -- however the message would have gone
 * (a direct execution takes the target's PSN only where the two agree). */
SV_TEST(psn_mismatch_retry_exceeded)
{
	struct ep a, b;
	struct ibv_wc wc;

	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect_psn(&a, b.qp->qp_num, 10, 1, 7, 12, 0x100, 0x400,
		       IBV_MTU_1024);
	ep_connect_psn(&b, a.qp->qp_num, 10, 1, 7, 12, 0x100, 0x100,
		       IBV_MTU_1024);
	/* The other way agrees: b's messages reach a. */
	post_recv(&a, 8, a.buf + 8192, 4096);
	strcpy(b.buf + 100, "taken");
	post_send_op(&b, 2, IBV_WR_SEND, b.buf + 100, 6, 0, 0);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 8);
	CHECK(!strcmp(a.buf + 8192, "taken"));
	post_recv(&b, 7, b.buf, 4096);
	strcpy(a.buf, "never taken");
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 12, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_RETRY_EXC_ERR);
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(ibv_poll_cq(b.cq, 1, &wc), 0);
	CHECK(b.buf[0] == 0);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(rereg_access_then_write_fails)
{
	struct ep a, b;
	struct ibv_wc wc;

	pair_local(&a, &b, 7, 1);
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 64, (uintptr_t)b.buf,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
		 0);
	post_send_op(&a, 2, IBV_WR_RDMA_WRITE, a.buf, 64, (uintptr_t)b.buf,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(wc.wr_id, 2);
	/* The QP is in error: the next WQE flushes. */
	post_send_op(&a, 3, IBV_WR_SEND, a.buf, 8, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 3);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(rereg_pd_then_send_fails)
{
	struct ep a, b;
	struct ibv_wc wc;
	struct ibv_pd *pd2;

	pair_local(&a, &b, 7, 1);
	post_recv(&b, 11, b.buf, 256);
	pd2 = ibv_alloc_pd(b.ctx);
	CHECK(pd2);
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0);
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 32, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_OP_ERR);
	EXPECT_WC(b.cq, &wc, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(wc.wr_id, 11);
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, b.pd, NULL, 0, 0), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(recv_before_change_translation_fails)
{
	struct ep a, b;
	struct ibv_wc wc;
	char *other;

	pair_local(&a, &b, 7, 1);
	CHECK(posix_memalign((void **)&other, 4096, EP_BUF) == 0);
	post_recv(&b, 12, b.buf, 256);
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			      other, EP_BUF, 0),
		 0);
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 32, 0, 0);
	EXPECT_WC(b.cq, &wc, IBV_WC_LOC_PROT_ERR);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_OP_ERR);
	ep_close(&a);
	ep_close(&b);
	free(other);
}

SV_TEST(dereg_keys_fail)
{
	struct ep a, b;
	struct ibv_wc wc;
	struct ibv_mr *mr2;
	uint32_t rkey, lkey;

	pair_local(&a, &b, 7, 1);
	mr2 = ibv_reg_mr(b.pd, b.buf + 4096, 4096, EU_ACCESS);
	CHECK(mr2);
	rkey = mr2->rkey;
	CHECK_EQ(ibv_dereg_mr(mr2), 0);
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 64,
		     (uintptr_t)b.buf + 4096, rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	ep_close(&a);
	ep_close(&b);

	/* A local key deregistered after the post. */
	pair_local(&a, &b, 7, 1);
	mr2 = ibv_reg_mr(a.pd, a.buf, 4096, EU_ACCESS);
	CHECK(mr2);
	lkey = mr2->lkey;
	CHECK_EQ(ibv_dereg_mr(mr2), 0);
	{
		struct ibv_sge s = { (uintptr_t)a.buf, 64, lkey };
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
		wr.wr.rdma.rkey = b.mr->rkey;
		CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	}
	EXPECT_WC(a.cq, &wc, IBV_WC_LOC_PROT_ERR);
	ep_close(&a);
	ep_close(&b);
}

/* An 8-byte WRITE from src under lkey to b's buffer at off. */
static void write8(struct ep *a, struct ep *b, uint64_t id, void *src,
		   uint32_t lkey, uint64_t off)
{
	eu_post_keyed(a, id, IBV_WR_RDMA_WRITE, (uintptr_t)src, 8, lkey,
		      (uintptr_t)b->buf + off, b->mr->rkey, 0, 0);
}

/* Moves mr to [addr, addr + len) (IBV_REREG_MR_CHANGE_TRANSLATION). */
static void retranslate(struct ibv_mr *mr, void *addr, size_t len)
{
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, addr,
			      len, 0),
		 0);
}

/* A small message's keys are looked up once for a stream and kept while
 * the key table's entries stay the same (the requester's local key, the
 * responder's remote key and receive key): a rereg or a dereg between two
 * posts is seen by the next one.  Over packets (test_engine_err_packets)
 * every post here takes the path that keeps them. */
SV_TEST(keys_changed_between_posts)
{
	struct ep a, b;
	struct ibv_wc wc;
	struct ibv_mr *mr2;
	char *other;

	pair_local(&a, &b, 7, 1);
	CHECK(posix_memalign((void **)&other, 4096, 4096) == 0);
	memset(other, 'y', 4096);
	memset(a.buf + 4096, 'x', 4096);
	mr2 = ibv_reg_mr(a.pd, a.buf + 4096, 4096, EU_ACCESS);
	CHECK(mr2);
	for (int i = 0; i < 4; i++) {
		write8(&a, &b, 1, a.buf + 4096 + 8 * i, mr2->lkey, 8 * i);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	}
	CHECK(!memcmp(b.buf, a.buf + 4096, 32));
	/* The key moves to other memory: the next post reads that. */
	retranslate(mr2, other, 4096);
	write8(&a, &b, 2, other, mr2->lkey, 64);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!memcmp(b.buf + 64, other, 8));
	/* The old range is no longer the key's. */
	write8(&a, &b, 3, a.buf + 4096, mr2->lkey, 128);
	EXPECT_WC(a.cq, &wc, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(wc.wr_id, 3);
	CHECK(b.buf[128] != 'x');
	CHECK_EQ(ibv_dereg_mr(mr2), 0);
	ep_close(&a);
	ep_close(&b);

	/* Deregistered after a stream used it. */
	pair_local(&a, &b, 7, 1);
	mr2 = ibv_reg_mr(a.pd, other, 4096, EU_ACCESS);
	CHECK(mr2);
	for (int i = 0; i < 4; i++) {
		write8(&a, &b, 4, other, mr2->lkey, 0);
		EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	}
	{
		uint32_t lkey = mr2->lkey;

		CHECK_EQ(ibv_dereg_mr(mr2), 0);
		write8(&a, &b, 5, other, lkey, 0);
	}
	EXPECT_WC(a.cq, &wc, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(wc.wr_id, 5);
	ep_close(&a);
	ep_close(&b);

	/* The target's key moves between two WRITEs under it: the second
	 * lands in the new memory, and the old range answers an error. */
	pair_local(&a, &b, 7, 1);
	memset(other, 0, 4096);
	memset(a.buf, 'z', 64);
	post_send_op(&a, 6, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)b.buf,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(b.buf[0], 'z');
	retranslate(b.mr, other, 4096);
	post_send_op(&a, 7, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)other + 8,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(other[8], 'z');
	post_send_op(&a, 8, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)b.buf + 16,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(wc.wr_id, 8);
	CHECK(b.buf[16] != 'z');
	retranslate(b.mr, b.buf, EP_BUF);
	ep_close(&a);
	ep_close(&b);

	/* The same for the receive's key between two SENDs. */
	pair_local(&a, &b, 7, 1);
	memset(other, 0, 4096);
	memset(a.buf, 's', 64);
	post_recv(&b, 9, b.buf, 64);
	post_send_op(&a, 10, IBV_WR_SEND, a.buf, 8, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(b.buf[0], 's');
	retranslate(b.mr, other, 4096);
	post_recv(&b, 11, other + 8, 64);
	post_send_op(&a, 12, IBV_WR_SEND, a.buf, 8, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 11);
	CHECK_EQ(other[8], 's');
	post_recv(&b, 13, b.buf + 64, 64);
	post_send_op(&a, 14, IBV_WR_SEND, a.buf, 8, 0, 0);
	EXPECT_WC(b.cq, &wc, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(wc.wr_id, 13);
	CHECK(b.buf[64] != 's');
	retranslate(b.mr, b.buf, EP_BUF);
	ep_close(&a);
	ep_close(&b);
	free(other);
}

SV_TEST(remote_bounds_and_atomic_alignment)
{
	struct ep a, b;
	struct ibv_wc wc;

	pair_local(&a, &b, 7, 1);
	post_send_op(&a, 1, IBV_WR_RDMA_READ, a.buf, 64,
		     (uintptr_t)b.buf + EP_BUF - 32, b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_ACCESS_ERR);
	ep_close(&a);
	ep_close(&b);

	pair_local(&a, &b, 7, 1);
	eu_post_keyed(&a, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)a.buf, 8,
		      a.mr->lkey, (uintptr_t)b.buf + 4, b.mr->rkey, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_REM_INV_REQ_ERR);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST_T(peer_death_is_retry_exceeded, 60)
{
	struct ep a;
	struct ibv_wc wc;
	struct ep_info theirs;
	int sv[2];
	pid_t pid;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct ep e;

		close(sv[0]);
		eu_exchange_as_peer(&e, sv[1]);
		xsend(sv[1], "r", 1);
		pause();
		_exit(0);
	}
	close(sv[1]);
	theirs = eu_exchange_as_test(&a, sv[0]);
	/* timeout 0 is "infinite": only the peer's death can end it. */
	ep_connect_ex(&a, theirs.qpn, 0, 7, 7, 1);
	{
		char c;

		xrecv(sv[0], &c, 1);
	}
	post_send_op(&a, 1, IBV_WR_RDMA_WRITE, a.buf, 64, theirs.addr,
		     theirs.rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	kill(pid, SIGKILL);
	CHECK_EQ(waitpid(pid, NULL, 0), pid);
	post_send_op(&a, 2, IBV_WR_RDMA_WRITE, a.buf, 64, theirs.addr,
		     theirs.rkey);
	CHECK(poll1(a.cq, &wc, 20000));
	CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	CHECK_EQ(wc.wr_id, 2);
	ep_close(&a);
}

/*
 * What reached the QP before it leaves its working states is taken, as a
 * NIC takes it: an ACK already in our ring completes its SEND with
 * success when the application moves the QP to ERR before anything
 * drained the ring -- rdma_cm's peer disconnects right after its last
 * completion, and its DREQ could overtake that ACK (rdmacm_fi_rdm_rxm's
 * last message ended flushed in 3 runs of 20 beside busy loops).  The
 * peer takes our SEND in its poll loop (so it travels as a packet and the
 * ACK as one back) and says so through shared memory, and we, having
 * polled a moment before (our progress thread naps, our ring unarmed:
 * nobody takes the ACK but a poll), move the QP to ERR at once.  A ring
 * the peer made for it is handed to us by the daemon, and the ACK can be
 * in it before our engine has mapped it: that ACK has reached us too (the
 * sanitizer pass of a CI run flushed the SEND so, the progress thread
 * slow to map the new ring).  Our progress thread is kept stopped
 * meanwhile, so the daemon's word of the ring waits in our socket.
 */
SV_TEST_T(ack_in_ring_taken_before_err, 60)
{
	enum { ROUNDS = 5 };
	volatile int *got = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int sv[2];
	pid_t pid;

	CHECK(got != MAP_FAILED);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		for (int r = 0; r < ROUNDS; r++) {
			struct ep e;
			struct ibv_wc wc;
			char c;

			uint64_t t0;

			eu_exchange_as_peer(&e, sv[1]);
			t0 = eu_own_ring_tails();
			post_recv(&e, 1, e.buf, 64);
			xsend(sv[1], "r", 1);
			CHECK(poll1(e.cq, &wc, 20000));
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			/* Our ACK published first (the progress thread that
			 * took the SEND may publish it just after the CQE
			 * shows), but not necessarily seen: when the ring is
			 * new, the test's engine may not have mapped it yet
			 * when it moves the QP.  (A
			 * SEND that came direct has no ACK: after a second,
			 * go on.) */
			for (int i = 0; i < 1000; i++) {
				if (eu_own_ring_tails() != t0)
					break;
				usleep(1000);
			}
			__atomic_store_n(&got[0], r + 1, __ATOMIC_RELEASE);
			xrecv(sv[1], &c, 1); /* the round is over */
			ep_close(&e);
		}
		_exit(0);
	}
	close(sv[1]);
	for (int r = 0; r < ROUNDS; r++) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		struct ep_info mine, theirs;
		struct eu_frozen z = { 0, -1 };
		struct ibv_wc wc;
		int frozen;
		pid_t tid = 0;
		struct ep e;
		char c;

		ep_open(&e, NULL, IBV_QPT_RC);
		/* Our progress thread stopped asleep (where this machine lets
		 * a process trace its parent) before the peer connects: the
		 * daemon's word of the ring the peer makes for us then stays
		 * in our engine's socket, and only the move to ERR reads it. */
		for (int i = 0; i < 1000 && !eu_threads_named("sv-progress\n", &tid);
		     i++)
			usleep(1000);
		frozen = tid && !eu_freeze(&z, tid, SYS_epoll_pwait2);
		if (!frozen && !r)
			printf("# the progress thread runs: tracing refused\n");
		xrecv(sv[0], &theirs, sizeof(theirs));
		mine = ep_info(&e);
		xsend(sv[0], &mine, sizeof(mine));
		ep_connect(&e, theirs.qpn);
		xrecv(sv[0], &c, 1); /* its receive is posted */
		/* We poll (the application takes the packets itself). */
		for (int i = 0; i < 100; i++)
			CHECK_EQ(ibv_poll_cq(e.cq, 1, &wc), 0);
		post_send_op(&e, 7, IBV_WR_SEND, e.buf, 8, 0, 0);
		{
			struct timespec t0, t;

			clock_gettime(CLOCK_MONOTONIC, &t0);
			while (__atomic_load_n(&got[0], __ATOMIC_ACQUIRE) != r + 1) {
				clock_gettime(CLOCK_MONOTONIC, &t);
				if (t.tv_sec - t0.tv_sec > 20)
					sv_test_fail(__FILE__, __LINE__,
						     "the peer took no SEND in 20 s");
			}
		}
		CHECK_EQ(ibv_modify_qp(e.qp, &a, IBV_QP_STATE), 0);
		EXPECT_WC(e.cq, &wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 7);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
		if (frozen)
			eu_thaw(&z);
		xsend(sv[0], "n", 1);
		ep_close(&e);
	}
	CHECK_EQ(waitpid(pid, NULL, 0), pid);
	munmap((void *)got, 4096);
}

/* utime + stime (ticks) of every thread of this process but the main. */
static long other_threads_cpu(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	long total = 0;

	CHECK(d);
	while ((de = readdir(d))) {
		char path[300], buf[1024], *p;
		unsigned long ut, st;
		FILE *f;

		if (de->d_name[0] == '.' || atoi(de->d_name) == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(buf, sizeof(buf), f)) {
			fclose(f);
			continue;
		}
		fclose(f);
		p = strrchr(buf, ')');
		CHECK(p);
		/* fields after ")": state(3) ... utime(14) stime(15) */
		CHECK_EQ(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
				&ut, &st), 2);
		total += (long)(ut + st);
	}
	closedir(d);
	return total;
}

SV_TEST(idle_process_uses_no_cpu)
{
	struct ep a, b;
	struct ibv_wc wc;
	long before, after;

	pair_local(&a, &b, 7, 1);
	post_recv(&b, 1, b.buf, 64);
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 8, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	sv_test_sleep_ms(100); /* past the spin and the poller window */
	before = other_threads_cpu();
	sv_test_sleep_ms(1000);
	after = other_threads_cpu();
	/* Flat: at most one tick of rounding. */
	CHECK(after - before <= 1);
	/* And it still answers after sleeping. */
	post_send_op(&a, 2, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)b.buf,
		     b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(ud_grh_qkey_drop)
{
	struct ep a, b;
	struct ibv_wc wc;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	union ibv_gid gid;
	struct ibv_sge s;
	struct ibv_send_wr wr, *bad;

	ep_open(&a, NULL, IBV_QPT_UD);
	ep_open(&b, a.ctx, IBV_QPT_UD);
	ep_connect(&a, 0);
	ep_connect(&b, 0);
	CHECK_EQ(ibv_query_gid(a.ctx, 1, 0, &gid), 0);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.grh.dgid = gid;
	aa.grh.sgid_index = 0;
	aa.grh.hop_limit = 1;
	aa.port_num = 1;
	ah = ibv_create_ah(a.pd, &aa);
	CHECK(ah);

	post_recv(&b, 5, b.buf, 40 + 100);
	strcpy(a.buf, "datagram");
	memset(&wr, 0, sizeof(wr));
	s = (struct ibv_sge){ (uintptr_t)a.buf, 100, a.mr->lkey };
	wr.wr_id = 1;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = b.qp->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 140);
	CHECK(wc.wc_flags & IBV_WC_GRH);
	CHECK_EQ(wc.src_qp, a.qp->qp_num);
	CHECK(!strcmp(b.buf + 40, "datagram"));
	/* RoCE v2 over IPv4 GIDs: the IPv4 header in the last 20 bytes. */
	if (gid.raw[10] == 0xff && gid.raw[11] == 0xff) {
		CHECK_EQ((uint8_t)b.buf[20], 0x45);
		CHECK(!memcmp(b.buf + 20 + 12, gid.raw + 12, 4));
	}

	/* A wrong Q_Key is dropped silently: the sender still succeeds. */
	post_recv(&b, 6, b.buf, 40 + 100);
	wr.wr.ud.remote_qkey = 0x22222222;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!poll1(b.cq, &wc, 200));
	/* No receive posted at all: dropped too; the posted one is unused. */
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 6);
	/* Larger than the MTU: a local length error. */
	s.length = 5000;
	CHECK_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_LOC_LEN_ERR);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	ep_close(&a);
	ep_close(&b);
}

SV_TEST(uc_send_and_write)
{
	struct ep a, b;
	struct ibv_wc wc;

	ep_open(&a, NULL, IBV_QPT_UC);
	ep_open(&b, a.ctx, IBV_QPT_UC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	/* No receive: UC drops, the sender completes anyway. */
	post_send_op(&a, 1, IBV_WR_SEND, a.buf, 3000, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!poll1(b.cq, &wc, 100));
	post_recv(&b, 2, b.buf, 4096);
	for (int i = 0; i < 3000; i++)
		a.buf[i] = (char)i;
	post_send_op(&a, 3, IBV_WR_SEND, a.buf, 3000, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 3000);
	CHECK(!memcmp(a.buf, b.buf, 3000));
	post_send_op(&a, 4, IBV_WR_RDMA_WRITE, a.buf, 3000,
		     (uintptr_t)b.buf + 10000, b.mr->rkey);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	/* No ACK on UC: look until it lands. */
	for (int i = 0; i < 1000 && memcmp(a.buf, b.buf + 10000, 3000); i++) {
		ibv_poll_cq(b.cq, 1, &wc);
		usleep(1000);
	}
	CHECK(!memcmp(a.buf, b.buf + 10000, 3000));
	ep_close(&a);
	ep_close(&b);
}

SV_TEST_MAIN()

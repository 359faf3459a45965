/* SPDX-License-Identifier: MIT */
/*
 * RoCE v2 between two hosts (docs/wire.md), through our own library,
 * engine and daemon -- so the sanitizer build runs the wire too (the
 * unmodified programs of tests/compat/pairs.sh --wire4/6 cannot load an
 * ASan library):
 *
 *  - RC across: 1 MiB RDMA WRITE, read back with RDMA READ, SENDs of
 *    many sizes into posted receives, 100 fetch-and-adds applied once
 *    each, over IPv4 and over IPv6 GIDs; every byte checked; a WRITE
 *    from memory unmapped under its MR ends in IBV_WC_LOC_PROT_ERR;
 *  - UD across: the receive's GRH names the sender's address, wc.src_qp
 *    and the RoCE packet type in wc.sl;
 *  - UC across to a process stopped while 4.5 MiB arrive: every message
 *    arrives (the daemon waits for room in the process's ring);
 *  - the peer's process killed: RC work ends in IBV_WC_RETRY_EXC_ERR after
 *    retry_cnt retries, never a hang;
 *  - datagrams that are not RoCE v2 (a bad ICRC, too short) reach the
 *    port: dropped, counted in the daemon's status, nothing else happens.
 *
 * Two hosts: the case runs in a network namespace of its own (unshare),
 * and forks the other host into another one; a veth joins them, with
 * addresses from the documentation ranges only (198.51.100.0/24,
 * 2001:db8::/32).  Each namespace starts its own daemon (the daemon's
 * abstract socket is per namespace).  Root only: skipped otherwise.
 */
#include "wire_util.h"

#include <sys/mman.h>

static uint8_t pat(uint32_t i, uint32_t k)
{
	return (uint8_t)(i * 131 + k * 7 + (i >> 8));
}

/* ------------------------------------------------------------- RC -- */

#define NSEND 40
static uint32_t send_len(uint32_t k)
{
	return 1 + (k * 2654435761u) % 9000;
}

static const char *b_ip; /* the other host's address family */

/* B: the passive side.  Posts receives, checks what the SENDs brought. */
static void rc_b(int in, int out)
{
	struct side s;
	struct card peer;
	struct ibv_wc wc;
	uint8_t ok = 1;

	side_open(&s, IBV_QPT_RC, b_ip);
	b_swap_cards(in, out, &s, &peer);
	side_connect(&s, &peer, 15, 7);
	for (uint32_t k = 0; k < NSEND; k++)
		post_recv(&s, k, BUF / 2 + k * 10000, 10000);
	put(out, &ok, 1); /* receives posted */
	for (uint32_t k = 0; k < NSEND; k++) {
		wc1(&s, &wc);
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != k ||
		    wc.byte_len != send_len(k))
			ok = 0;
		for (uint32_t i = 0; ok && i < send_len(k); i++)
			if (s.buf[BUF / 2 + k * 10000 + i] != pat(i, k + 1000))
				ok = 0;
	}
	put(out, &ok, 1);
	get(in, &ok, 1); /* A is done with our memory */
	side_close(&s);
}

/* A's buffer unmapped under its MR: a WRITE from it ends in
 * IBV_WC_LOC_PROT_ERR at once, as a copy of it would (on the wire an RC
 * request's payload leaves from the MR itself, looked at first), not in
 * RETRY_EXC_ERR after its packets failed one retry after another, and
 * the process goes on.  Last: the QP is in the error state then. */
static void write_from_unmapped(struct side *s, const struct card *peer)
{
	size_t len = 64 * 1024;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr, *keep_mr = s->mr;
	uint8_t *keep_buf = s->buf;
	struct ibv_wc wc;

	CHECK(m != MAP_FAILED);
	memset(m, 7, len);
	mr = ibv_reg_mr(s->pd, m, len, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	CHECK_EQ(munmap(m, len), 0);
	s->buf = m;
	s->mr = mr;
	post(s, 500, IBV_WR_RDMA_WRITE, 0, 16384, peer, 0, 0);
	wc1(s, &wc);
	CHECK_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
	s->buf = keep_buf;
	s->mr = keep_mr;
	CHECK_EQ(ibv_dereg_mr(mr), 0);
}

static void rc_across(const char *a_ip, const char *peer_ip)
{
	struct host h;
	struct side s;
	struct card mine, peer;
	struct ibv_wc wc;
	uint8_t ok;
	uint64_t old, first;

	b_ip = peer_ip;
	two_hosts(&h, rc_b);
	side_open(&s, IBV_QPT_RC, a_ip);
	side_card(&s, &mine);
	a_swap_cards(&h, &s, &peer);
	/* timeout 15 (~134 ms), 7 retries: a budget of a second, for a
	 * peer that a busy machine keeps from its port a while. */
	side_connect(&s, &peer, 15, 7);
	CHECK(memcmp(&peer.gid, &mine.gid, 16) != 0);

	/* 1 MiB less the receive area: WRITE, then READ it back. */
	for (uint32_t i = 0; i < BUF / 2; i++)
		s.buf[i] = pat(i, 1);
	post(&s, 1, IBV_WR_RDMA_WRITE, 0, BUF / 2, &peer, 0, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	memset(s.buf + BUF / 2, 0, BUF / 2);
	post(&s, 2, IBV_WR_RDMA_READ, BUF / 2, BUF / 2, &peer, 0, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK(!memcmp(s.buf, s.buf + BUF / 2, BUF / 2));

	/* Atomics on what the WRITE left at 4096: each applied once, in
	 * order, each returning the value before it. */
	memcpy(&first, s.buf + 4096, 8);
	for (uint32_t i = 0; i < 100; i++) {
		post(&s, 100 + i, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 8, &peer, 4096, 1);
		wc1(&s, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 100 + i);
		memcpy(&old, s.buf, 8);
		CHECK_EQ(old, first + i);
	}
	post(&s, 300, IBV_WR_RDMA_READ, 0, 8, &peer, 4096, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	memcpy(&old, s.buf, 8);
	CHECK_EQ(old, first + 100);

	/* SENDs of many sizes into B's receives. */
	get(h.from, &ok, 1);
	for (uint32_t k = 0; k < NSEND; k++) {
		for (uint32_t i = 0; i < send_len(k); i++)
			s.buf[i] = pat(i, k + 1000);
		post(&s, 1000 + k, IBV_WR_SEND, 0, send_len(k), NULL, 0, 0);
		wc1(&s, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}
	get(h.from, &ok, 1);
	CHECK_EQ(ok, 1);
	write_from_unmapped(&s, &peer);
	put(h.to, &ok, 1);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

SV_TEST_T(rc_across_ipv4, 120)
{
	rc_across(IP4_A, IP4_B);
}

SV_TEST_T(rc_across_ipv6, 120)
{
	rc_across(IP6_A, IP6_B);
}

/* The same with each host dropping 5% of what it receives: RC's
 * retransmission (NAK sequence errors, the retry timer) brings every byte
 * across, each atomic applied once; the rules did drop packets. */
SV_TEST_T(rc_across_under_loss, 300)
{
	loss_pct = 5;
	rc_across(IP4_A, IP4_B);
	CHECK(nft_dropped() > 0); /* A's rule: ACKs and read responses */
}

/* And with both engines duplicating and delaying (reordering) 5% of the
 * packets they send on the wire (SOFTVERBS_FAULT): nothing is delivered
 * twice or out of order to the application. */
SV_TEST_T(rc_across_dup_and_reorder, 300)
{
	CHECK_EQ(setenv("SOFTVERBS_FAULT", "dup:0.05,reorder:0.05,seed:9", 1), 0);
	rc_across(IP4_A, IP4_B);
	CHECK_EQ(unsetenv("SOFTVERBS_FAULT"), 0);
}

/* B: an RC side connected to A that does nothing until A is done. */
static void idle_b(int in, int out)
{
	struct side s;
	struct card peer;
	uint8_t up = 1;

	side_open(&s, IBV_QPT_RC, IP4_B);
	b_swap_cards(in, out, &s, &peer);
	side_connect(&s, &peer, 0, 7);
	put(out, &up, 1);
	get(in, &up, 1);
	side_close(&s);
}

/* Two one-packet WRITEs; the first is lost, and B's NAK asks for it
 * again -- and that resend is lost too (A's 1st and 3rd packets: two drop
 * plans, the second counting what the first let pass).  B says nothing
 * more until it comes (one NAK per gap), and A's timeout is 0, infinite:
 * only the requester's own second resend (docs/wire.md, "Reliability")
 * completes the WRITEs -- before, it waited for the QP's timer, here
 * forever. */
SV_TEST_T(rc_lost_resend_is_sent_again, 120)
{
	struct host h;
	struct side s;
	struct card peer;
	struct ibv_wc wc;
	uint8_t c = 1;

	two_hosts(&h, idle_b);
	/* Ours only: the other host forked before. */
	CHECK_EQ(setenv("SOFTVERBS_FAULT", "qp=#1,drop,nth=1;qp=#1,drop,nth=2", 1), 0);
	side_open(&s, IBV_QPT_RC, IP4_A);
	a_swap_cards(&h, &s, &peer);
	side_connect(&s, &peer, 0, 7);
	get(h.from, &c, 1);
	for (uint32_t i = 0; i < 2048; i++)
		s.buf[i] = pat(i, 3);
	post(&s, 1, IBV_WR_RDMA_WRITE, 0, 1024, &peer, 0, 0);
	post(&s, 2, IBV_WR_RDMA_WRITE, 1024, 1024, &peer, 1024, 0);
	for (uint64_t id = 1; id <= 2; id++) {
		wc1(&s, &wc);
		CHECK_EQ(wc.wr_id, id);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}
	memset(s.buf + BUF / 2, 0, 2048);
	post(&s, 3, IBV_WR_RDMA_READ, BUF / 2, 2048, &peer, 0, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK(!memcmp(s.buf, s.buf + BUF / 2, 2048));
	CHECK_EQ(unsetenv("SOFTVERBS_FAULT"), 0);
	put(h.to, &c, 1);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

/* ------------------------------------------------------------- UD -- */

/* B: receives 20 datagrams, checks each one's GRH and completion. */
static void ud_b(int in, int out)
{
	struct side s;
	struct card mine, peer;
	struct ibv_wc wc;
	uint8_t ok = 1, v4 = !strchr(b_ip, ':');

	side_open(&s, IBV_QPT_UD, b_ip);
	side_card(&s, &mine);
	for (uint32_t k = 0; k < 20; k++)
		post_recv(&s, k, k * 2048, 2048);
	put(out, &mine, sizeof(mine));
	get(in, &peer, sizeof(peer));
	for (uint32_t k = 0; k < 20; k++) {
		const uint8_t *g = s.buf + k * 2048;

		wc1(&s, &wc);
		if (wc.status != IBV_WC_SUCCESS || wc.src_qp != peer.qpn ||
		    !(wc.wc_flags & IBV_WC_GRH) || wc.byte_len != 40 + 100 + k ||
		    wc.sl != (v4 ? 0xa : 0x9))
			ok = 0;
		/* The sender's address where the IP header has it. */
		if (v4 ? memcmp(g + 20 + 12, peer.gid.raw + 12, 4) :
			 memcmp(g + 8, peer.gid.raw, 16))
			ok = 0;
		for (uint32_t i = 0; i < 100 + k; i++)
			if (g[40 + i] != pat(i, k))
				ok = 0;
	}
	put(out, &ok, 1);
	side_close(&s);
}

/* An AH from s to the other host's card. */
static struct ibv_ah *ah_to(struct side *s, const struct card *peer)
{
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;

	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.dgid = peer->gid;
	aa.grh.sgid_index = (uint8_t)s->gid;
	aa.grh.hop_limit = 8;
	ah = ibv_create_ah(s->pd, &aa);
	CHECK(ah);
	return ah;
}

/* Datagram k (100 + k bytes of pat(i, k)) to QP qpn through ah; its send
 * completes. */
static void ud_send(struct side *s, struct ibv_ah *ah, uint32_t qpn,
		    uint32_t k)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, 100 + k, s->mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	for (uint32_t i = 0; i < 100 + k; i++)
		s->buf[i] = pat(i, k);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = k;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(s->qp, &wr, &bad), 0);
	wc1(s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
}

static void ud_across(const char *a_ip, const char *peer_ip)
{
	struct host h;
	struct side s;
	struct card peer;
	struct ibv_ah *ah;
	uint8_t ok;

	b_ip = peer_ip;
	two_hosts(&h, ud_b);
	side_open(&s, IBV_QPT_UD, a_ip);
	a_swap_cards(&h, &s, &peer);
	ah = ah_to(&s, &peer);
	for (uint32_t k = 0; k < 20; k++)
		ud_send(&s, ah, peer.qpn, k);
	get(h.from, &ok, 1);
	CHECK_EQ(ok, 1);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

/* A delay plan on the wire (docs/faults.md): A's 2nd datagram leaves a
 * second late, the ones after it do not wait; B receives them 0, 2, 3,
 * 1 (told by their lengths). */
static void ud_delay_b(int in, int out)
{
	struct side s;
	struct card mine, peer;
	struct ibv_wc wc;
	uint8_t order[4];

	side_open(&s, IBV_QPT_UD, b_ip);
	side_card(&s, &mine);
	for (uint32_t k = 0; k < 4; k++)
		post_recv(&s, k, k * 2048, 2048);
	put(out, &mine, sizeof(mine));
	get(in, &peer, sizeof(peer));
	for (uint32_t k = 0; k < 4; k++) {
		wc1(&s, &wc);
		order[k] = wc.status == IBV_WC_SUCCESS ?
				   (uint8_t)(wc.byte_len - 40 - 100) :
				   0xff;
	}
	put(out, order, sizeof(order));
	side_close(&s);
}

SV_TEST_T(ud_delay_plan_across, 120)
{
	struct host h;
	struct side s;
	struct card peer;
	struct ibv_ah *ah;
	uint8_t order[4];

	b_ip = IP4_B;
	two_hosts(&h, ud_delay_b);
	/* Ours only: the other host forked before. */
	CHECK_EQ(setenv("SOFTVERBS_FAULT", "qp=#1,delay=1s,nth=2", 1), 0);
	side_open(&s, IBV_QPT_UD, IP4_A);
	a_swap_cards(&h, &s, &peer);
	ah = ah_to(&s, &peer);
	for (uint32_t k = 0; k < 4; k++)
		ud_send(&s, ah, peer.qpn, k);
	get(h.from, order, sizeof(order));
	CHECK_EQ(order[0], 0);
	CHECK_EQ(order[1], 2);
	CHECK_EQ(order[2], 3);
	CHECK_EQ(order[3], 1);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

SV_TEST_T(ud_across_ipv4, 120)
{
	ud_across(IP4_A, IP4_B);
}

SV_TEST_T(ud_across_ipv6, 120)
{
	ud_across(IP6_A, IP6_B);
}

/* -------------------------------------------------- a peer killed -- */

static void kill_b(int in, int out)
{
	struct side s;
	struct card peer;
	uint8_t up = 1;

	side_open(&s, IBV_QPT_RC, IP4_B);
	b_swap_cards(in, out, &s, &peer);
	side_connect(&s, &peer, 14, 7);
	put(out, &up, 1);
	pause(); /* until killed */
}

SV_TEST_T(rc_peer_killed_is_retry_exceeded, 120)
{
	struct host h;
	struct side s;
	struct card peer;
	struct ibv_wc wc;
	uint8_t c;

	two_hosts(&h, kill_b);
	side_open(&s, IBV_QPT_RC, IP4_A);
	a_swap_cards(&h, &s, &peer);
	/* timeout 12 (~17 ms), 2 retries: the budget is well under a second. */
	side_connect(&s, &peer, 12, 2);
	get(h.from, &c, 1);
	post(&s, 1, IBV_WR_RDMA_WRITE, 0, 4096, &peer, 0, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(kill(h.pid, SIGKILL), 0);
	CHECK_EQ(host_done(&h), 128 + SIGKILL);
	post(&s, 2, IBV_WR_RDMA_WRITE, 0, 65536, &peer, 0, 0);
	wc1(&s, &wc);
	CHECK_EQ(wc.wr_id, 2);
	CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	side_close(&s);
	a_done();
}

/* --------------------------------------- an ACK a poll left behind -- */

/* B's half: an RC side connected to A, a receive posted (A hears so), and
 * polled until A's SEND completes it; 1 when it came whole. */
static uint8_t b_take_send(int in, int out, struct side *s)
{
	struct card peer;
	struct ibv_wc wc;
	uint8_t ok = 1;

	side_open(s, IBV_QPT_RC, IP4_B);
	b_swap_cards(in, out, s, &peer);
	side_connect(s, &peer, 20, 0);
	post_recv(s, 7, 0, 4096);
	put(out, &ok, 1); /* the receive is posted */
	wc1(s, &wc);
	return wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 && wc.byte_len == 64;
}

/* B: takes the SEND, then calls nothing more (it waits on the pipe)
 * until A is done. */
static void ack_b(int in, int out)
{
	struct side s;
	uint8_t ok = b_take_send(in, out, &s);

	put(out, &ok, 1);
	get(in, &ok, 1); /* A has its completion */
	side_close(&s);
}

/* A: a SEND to B (fn), which must complete with success though A allows
 * no retransmission (retry_cnt 0, a timeout of ~4 s: a lost ACK would end
 * it in RETRY_EXC_ERR); B hears when A has its completion. */
static void ack_across(void (*fn)(int in, int out))
{
	struct host h;
	struct side s;
	struct card peer;
	struct ibv_wc wc;
	uint8_t c;

	two_hosts(&h, fn);
	side_open(&s, IBV_QPT_RC, IP4_A);
	a_swap_cards(&h, &s, &peer);
	side_connect(&s, &peer, 20, 0);
	get(h.from, &c, 1);
	post(&s, 1, IBV_WR_SEND, 0, 64, NULL, 0, 0);
	get(h.from, &c, 1);
	CHECK_EQ(c, 1); /* B received it, and calls no verbs from now */
	wc1(&s, &wc);
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	put(h.to, &c, 1);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

/* The ACK of a SEND that B's poll received waits for B's next verbs call
 * (to leave with its answer, in one system call); B makes none, and the
 * ACK still leaves (B's progress thread sends it). */
SV_TEST_T(rc_ack_leaves_without_the_app, 120)
{
	ack_across(ack_b);
}

/* B: a child of its own (its engine is not B's) receives the SEND in a
 * poll and exits at once, without tearing anything down; B waits for it
 * and shuts its daemon down as usual. */
static void ack_exit_b(int in, int out)
{
	pid_t pid = fork();
	uint8_t ok;
	int st;

	CHECK(pid >= 0);
	if (pid == 0) {
		struct side s;

		ok = b_take_send(in, out, &s);
		put(out, &ok, 1);
		exit(0); /* exit(), not _exit(): what a program does */
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	get(in, &ok, 1); /* A has its completion */
}

/* The same ACK, kept by B's poll for its answer, when B's program exits
 * right after that poll: it leaves on the way out (the library's exit
 * handler), as a NIC has sent it. */
SV_TEST_T(rc_ack_leaves_when_the_app_exits, 120)
{
	ack_across(ack_exit_b);
}

/* ----------------------------------------------- a stopped receiver -- */

/* UC SENDs to a process that is stopped while they arrive: more than the
 * daemon's ring to its engine holds (gw_int.h GW_RING_DATA, 4 MiB).  The
 * daemon waits for room (gateway.c "A full ring") instead of dropping,
 * and UC, which nothing retransmits, loses no message on a link that lost
 * nothing. */
#define UC_MSGS 72
#define UC_LEN 65536

/* B: posts a receive for each SEND (all into one buffer), says so, and
 * counts what arrives once A has let it run again. */
static void uc_b(int in, int out)
{
	struct side s;
	struct card peer;
	struct ibv_wc wc;
	uint8_t ok = 1;

	side_open(&s, IBV_QPT_UC, IP4_B);
	b_swap_cards(in, out, &s, &peer);
	side_connect(&s, &peer, 14, 7);
	for (uint32_t k = 0; k < UC_MSGS; k++)
		post_recv(&s, k, 0, UC_LEN);
	put(out, &ok, 1); /* receives posted: stop us */
	/* Not polling meanwhile: our engine's thread sleeps, so the
	 * daemon's thread reads the port (sv_wire.h) once we are stopped. */
	get(in, &ok, 1);
	for (uint32_t k = 0; k < UC_MSGS; k++) {
		if (!wc1_try(&s, &wc)) {
			/* Say which message and what the namespace's port
			 * counted (drops, full rings) before failing. */
			fprintf(stderr, "B: UC message %u of %u never came\n", k,
				UC_MSGS);
			if (getenv("SOFTVERBS") &&
			    system("\"$SOFTVERBS\" daemon status --json >&2"))
				fprintf(stderr, "B: no daemon status\n");
			sv_test_fail(__FILE__, __LINE__, "no completion in 20 s");
		}
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != k ||
		    wc.byte_len != UC_LEN)
			ok = 0;
	}
	put(out, &ok, 1);
	get(in, &ok, 1);
	side_close(&s);
}

SV_TEST_T(uc_to_a_stopped_receiver_loses_nothing, 120)
{
	struct host h;
	struct side s;
	struct card peer;
	struct ibv_wc wc;
	uint8_t ok;
	int st;

	two_hosts(&h, uc_b);
	side_open(&s, IBV_QPT_UC, IP4_A);
	a_swap_cards(&h, &s, &peer);
	side_connect(&s, &peer, 14, 7);
	get(h.from, &ok, 1);
	CHECK_EQ(kill(h.pid, SIGSTOP), 0);
	CHECK_EQ(waitpid(h.pid, &st, WUNTRACED), h.pid);
	CHECK(WIFSTOPPED(st));
	/* 4.5 MiB while B's engine cannot take any: its daemon reads them
	 * from the port into B's ring until the ring is full, and B stays
	 * stopped a tenth of a second more (the scenario, not a wait for a
	 * state: well inside the daemon's GW_FULL_WAIT_NS). */
	for (uint32_t k = 0; k < UC_MSGS; k++) {
		post(&s, k, IBV_WR_SEND, 0, UC_LEN, NULL, 0, 0);
		wc1(&s, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}
	nanosleep(&(struct timespec){ 0, 100 * 1000 * 1000 }, NULL);
	CHECK_EQ(kill(h.pid, SIGCONT), 0);
	put(h.to, &ok, 1);
	get(h.from, &ok, 1);
	CHECK_EQ(ok, 1); /* every SEND arrived, whole */
	put(h.to, &ok, 1);
	side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

/* A link slower than the sender: A's veth sends through a token bucket
 * (tc tbf: 300 Mbit/s, 96 KiB bursts -- a whole 64 KiB train passes
 * unsplit -- and a 192 KiB queue) and A posts 4.5 MiB of UC SENDs at
 * once.  The kernel drops what the full queue cannot take; the engine
 * hears of each drop (ENOBUFS) and sends the datagram again later, as a
 * NIC waits for a link's pause frames to end.  Before, every drop was a
 * lost UC message and B waited for it in vain.  A's side, for this case
 * and the next: it hears from B whether every SEND arrived whole, with
 * its device still open, or (close_first) closed right after the
 * completions. */
static void uc_slow_link(int close_first)
{
	struct host h;
	struct side s;
	struct card peer;
	struct ibv_wc wc;
	uint8_t ok;

	two_hosts(&h, uc_b);
	if (system("command -v tc >/dev/null 2>&1"))
		sv_test_skip("no tc here (iproute2)");
	if (system("tc qdisc add dev svw0 root tbf rate 300mbit burst 96kb "
		   "limit 192kb 2>/dev/null"))
		sv_test_skip("no tbf qdisc in this kernel");
	side_open(&s, IBV_QPT_UC, IP4_A);
	a_swap_cards(&h, &s, &peer);
	side_connect(&s, &peer, 14, 7);
	get(h.from, &ok, 1);
	put(h.to, &ok, 1); /* B polls from now on */
	for (uint32_t k = 0; k < UC_MSGS; k++)
		post(&s, k, IBV_WR_SEND, 0, UC_LEN, NULL, 0, 0);
	for (uint32_t k = 0; k < UC_MSGS; k++) {
		wc1(&s, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}
	if (close_first)
		side_close(&s);
	get(h.from, &ok, 1);
	CHECK_EQ(ok, 1); /* every SEND arrived, whole */
	put(h.to, &ok, 1);
	if (!close_first)
		side_close(&s);
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

SV_TEST_T(uc_over_a_slow_link_loses_nothing, 120)
{
	uc_slow_link(0);
}

/* The same SENDs, and A closes its device as soon as they completed: a
 * UC SEND is complete once sent, so all of them arrive though their
 * sender is gone (what waits in the engine's queue leaves first:
 * sv_wire_drain). */
SV_TEST_T(uc_completed_then_closed_arrives, 120)
{
	uc_slow_link(1);
}

/* ------------------------------------------------- not RoCE v2 -- */

/* B: the daemon's counters before and after A's garbage. */
static void junk_b(int in, int out)
{
	struct side s;
	uint64_t v[3];
	uint8_t c;

	side_open(&s, IBV_QPT_RC, IP4_B); /* starts our daemon */
	v[0] = status_u64(offsetof(struct sv_status_rep, wire_rx_bad_icrc));
	v[1] = status_u64(offsetof(struct sv_status_rep, wire_rx_dropped));
	v[2] = s.qp->qp_num; /* a live QP: junk to a missing one is no-QP */
	put(out, v, sizeof(v));
	get(in, &c, 1); /* sent */
	for (int i = 0; i < 200; i++) {
		if (status_u64(offsetof(struct sv_status_rep, wire_rx_bad_icrc)) >= v[0] + 1 &&
		    status_u64(offsetof(struct sv_status_rep, wire_rx_dropped)) >= v[1] + 1)
			break;
		usleep(10000);
	}
	v[0] = status_u64(offsetof(struct sv_status_rep, wire_rx_bad_icrc)) - v[0];
	v[1] = status_u64(offsetof(struct sv_status_rep, wire_rx_dropped)) - v[1];
	put(out, v, 2 * sizeof(v[0]));
	side_close(&s);
}

SV_TEST_T(not_roce_is_dropped_and_counted, 120)
{
	struct host h;
	struct sockaddr_in b = { .sin_family = AF_INET, .sin_port = htons(4791) };
	uint8_t pkt[64], c = 's';
	uint64_t before[3], delta[2];
	uint32_t qpn;
	int fd;

	two_hosts(&h, junk_b);
	get(h.from, before, sizeof(before));
	qpn = (uint32_t)before[2];
	CHECK_EQ(inet_pton(AF_INET, IP4_B, &b.sin_addr), 1);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(fd >= 0);
	/* A well-formed BTH (UD SEND to B's QP) with a wrong ICRC. */
	memset(pkt, 0, sizeof(pkt));
	pkt[0] = 0x64;
	pkt[2] = pkt[3] = 0xff;
	pkt[5] = (uint8_t)(qpn >> 16), pkt[6] = (uint8_t)(qpn >> 8);
	pkt[7] = (uint8_t)qpn;
	CHECK_EQ(sendto(fd, pkt, 12 + 8 + 16 + 4, 0, (struct sockaddr *)&b,
			sizeof(b)), 12 + 8 + 16 + 4);
	/* Too short for a BTH and an ICRC; transport version 1. */
	CHECK_EQ(sendto(fd, pkt, 7, 0, (struct sockaddr *)&b, sizeof(b)), 7);
	close(fd);
	put(h.to, &c, 1);
	get(h.from, delta, sizeof(delta));
	CHECK_EQ(delta[0], 1); /* bad ICRC */
	CHECK(delta[1] >= 1);  /* the short one */
	CHECK_EQ(host_done(&h), 0);
	a_done();
}

SV_TEST_MAIN()

/* SPDX-License-Identifier: MIT */
/*
 * Hostile packets on the wire (docs/wire.md "Hostile packets"): what an
 * off-path sender can do with well-formed RoCE v2 datagrams whose ICRC is
 * right.  Host A runs our library and daemon; host B is not softverbs at
 * all but this test's own UDP sockets in B's namespace (wire_fake.h):
 * one on B's address and port 4791, playing A's peer (it sees A's
 * requests and answers them by hand), and one on a third address,
 * 198.51.100.3, the stranger.
 *
 *  - an ACK whose PSN is past everything A sent completes nothing, and a
 *    NAK for a PSN no request of A's has is ignored: a later, true ACK
 *    completes the work with success (rxe's completer does the same);
 *  - an RDMA WRITE with the right QPN, PSN and rkey from the stranger's
 *    address is dropped and counted, the same WRITE from the peer lands
 *    (rxe's check_addr);
 *  - a UD datagram above the port's active MTU (it came IP-fragmented) is
 *    dropped and counted, never ends the QP; one of exactly the MTU is
 *    received;
 *  - datagrams to QPNs that do not exist are dropped by whoever reads the
 *    port without asking the daemon (the daemon's map of live QPNs).
 */
#include "wire_fake.h"

#define QKEY 0x11111111u

/* An ACK or NAK (AETH syndrome syn) for PSN psn to A's QP qpn. */
static void send_aeth(int fd, const char *from_ip, uint32_t qpn, uint32_t psn,
		      uint8_t syn)
{
	uint8_t p[12 + 4 + 4];

	bth(p, 0x11, 0, qpn, 0, psn); /* RC ACKNOWLEDGE */
	p[12] = syn;
	be24(p + 13, 1);
	fake_send_ib(fd, from_ip, p, 16, 0);
}

/* The next datagram A sends to B's port (20 s at most); returns its
 * length, the BTH opcode and PSN in *op and *psn. */
static size_t b_recv(uint8_t *buf, size_t cap, uint8_t *op, uint32_t *psn)
{
	struct pollfd pfd = { sock_b, POLLIN, 0 };
	ssize_t n;

	CHECK_EQ(poll(&pfd, 1, 20000), 1);
	n = recv(sock_b, buf, cap, 0);
	CHECK(n >= 12 + 4);
	*op = buf[0];
	*psn = (uint32_t)buf[9] << 16 | (uint32_t)buf[10] << 8 | buf[11];
	return (size_t)n;
}

/* ------------------------------------------------------------ cases -- */

/* A RC QP on A towards the fake peer (B's address, FAKE_QPN); requests
 * are retransmitted only after ~17 s (timeout 22), so whatever A
 * completes in a case was completed by the packets the case sent. */
static void rc_to_fake(struct side *s)
{
	struct card c;

	side_open(s, IBV_QPT_RC, IP4_A);
	memset(&c, 0, sizeof(c));
	c.qpn = FAKE_QPN;
	v4map(c.gid.raw, IP4_B);
	side_connect(s, &c, 22, 7);
}

SV_TEST_T(forged_ack_beyond_sent_completes_nothing, 120)
{
	struct host h;
	struct side s;
	struct ibv_wc wc;
	uint8_t buf[4200], op;
	uint32_t psn1, psn2;

	fake_hosts(&h);
	rc_to_fake(&s);
	post(&s, 1, IBV_WR_SEND, 0, 8, NULL, 0, 0);
	post(&s, 2, IBV_WR_SEND, 0, 8, NULL, 0, 0);
	b_recv(buf, sizeof(buf), &op, &psn1);
	CHECK_EQ(op, 0x04); /* RC SEND only */
	b_recv(buf, sizeof(buf), &op, &psn2);
	CHECK_EQ(psn2, (psn1 + 1) & 0xffffff);
	/* 2^22 past the last PSN sent: it would retire both SENDs. */
	send_aeth(sock_b, IP4_B, s.qp->qp_num, (psn2 + (1u << 22)) & 0xffffff,
		  0x1f);
	/* A true ACK of the first only, after it on the same flow. */
	send_aeth(sock_b, IP4_B, s.qp->qp_num, psn1, 0x1f);
	wc1(&s, &wc);
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	/* Had the forged ACK counted, the second's completion would have
	 * been pushed with the first's, before the true ACK was read. */
	CHECK_EQ(ibv_poll_cq(s.cq, 1, &wc), 0);
	send_aeth(sock_b, IP4_B, s.qp->qp_num, psn2, 0x1f);
	wc1(&s, &wc);
	CHECK_EQ(wc.wr_id, 2);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	side_close(&s);
	fake_hosts_done(&h);
}

SV_TEST_T(nak_for_no_outstanding_psn_is_ignored, 120)
{
	struct host h;
	struct side s;
	struct ibv_wc wc;
	uint8_t buf[4200], op;
	uint32_t psn;

	fake_hosts(&h);
	rc_to_fake(&s);
	post(&s, 1, IBV_WR_SEND, 0, 8, NULL, 0, 0);
	b_recv(buf, sizeof(buf), &op, &psn);
	/* NAKs (remote access error, then RNR) from the peer's address for
	 * PSNs that name no request of A's, then the true ACK. */
	send_aeth(sock_b, IP4_B, s.qp->qp_num, (psn + 1000) & 0xffffff, 0x62);
	send_aeth(sock_b, IP4_B, s.qp->qp_num, (psn - 1000) & 0xffffff, 0x62);
	send_aeth(sock_b, IP4_B, s.qp->qp_num, (psn + 5) & 0xffffff, 0x20);
	send_aeth(sock_b, IP4_B, s.qp->qp_num, psn, 0x1f);
	wc1(&s, &wc);
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	side_close(&s);
	fake_hosts_done(&h);
}

/* A RDMA WRITE only of 4 bytes at A's buffer + off, PSN psn. */
static void send_write(int fd, const char *from_ip, const struct side *s,
		       uint32_t psn, uint32_t off, const char *what)
{
	uint8_t p[12 + 16 + 4 + 4];

	bth(p, 0x0a, 0, s->qp->qp_num, 1, psn); /* RC RDMA WRITE only */
	be32(p + 12, (uint32_t)(((uintptr_t)s->buf + off) >> 32));
	be32(p + 16, (uint32_t)((uintptr_t)s->buf + off));
	be32(p + 20, s->mr->rkey);
	be32(p + 24, 4);
	memcpy(p + 28, what, 4);
	fake_send_ib(fd, from_ip, p, 32, 0);
}

SV_TEST_T(rc_packet_not_from_the_peer_is_dropped, 120)
{
	struct host h;
	struct side s;
	uint8_t buf[4200], op;
	uint32_t psn;
	uint64_t before;
	int i;

	fake_hosts(&h);
	rc_to_fake(&s);
	before = status_u64(offsetof(struct sv_status_rep, wire_rx_not_peer));
	/* rq_psn is 7 (side_connect): the PSN A expects next. */
	send_write(sock_c, IP4_C, &s, 7, 0, "EVIL");
	for (i = 0; i < 2000; i++) {
		if (status_u64(offsetof(struct sv_status_rep, wire_rx_not_peer)) >
		    before)
			break;
		usleep(10000);
	}
	CHECK(i < 2000); /* dropped and counted */
	/* The same from the peer: it lands and A acknowledges it. */
	send_write(sock_b, IP4_B, &s, 7, 64, "GOOD");
	b_recv(buf, sizeof(buf), &op, &psn);
	CHECK_EQ(op, 0x11);
	CHECK_EQ(psn, 7);
	CHECK_EQ(buf[12] & 0xe0, 0); /* an ACK */
	CHECK(!memcmp(s.buf + 64, "GOOD", 4));
	CHECK(!memcmp(s.buf, "\0\0\0\0", 4));
	side_close(&s);
	fake_hosts_done(&h);
}

/* A UD SEND only with len payload bytes to A's QP. */
static void send_ud(const struct side *s, uint32_t len, uint8_t fill)
{
	static uint8_t p[12 + 8 + 8192 + 4];
	unsigned pad = (4 - len % 4) % 4;

	bth(p, 0x64, pad, s->qp->qp_num, 0, 1);
	be32(p + 12, QKEY);
	be24(p + 17, FAKE_QPN);
	p[16] = 0;
	memset(p + 20, fill, len + pad);
	fake_send_ib(sock_b, IP4_B, p, 20 + len + pad, 0);
}

SV_TEST_T(ud_datagram_above_mtu_is_dropped, 120)
{
	struct host h;
	struct side s;
	struct ibv_wc wc;
	struct ibv_port_attr pa;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	uint32_t mtu;
	uint64_t before;

	fake_hosts(&h);
	side_open(&s, IBV_QPT_UD, IP4_A);
	CHECK_EQ(ibv_query_port(s.ctx, 1, &pa), 0);
	mtu = 128u << pa.active_mtu;
	CHECK_EQ(mtu, 1024); /* the veth's 1500 bytes */
	for (uint64_t k = 0; k < 4; k++)
		post_recv(&s, k, (uint32_t)k * 16384, 16384);
	before = status_u64(offsetof(struct sv_status_rep, wire_rx_too_big));
	send_ud(&s, 4056, 0xee);    /* fits a receive, not the MTU */
	send_ud(&s, mtu + 1, 0xdd); /* one byte too many */
	send_ud(&s, mtu, 0x5a);     /* exactly the MTU: taken */
	wc1(&s, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 0);
	CHECK_EQ(wc.byte_len, 40 + mtu);
	CHECK_EQ(s.buf[40], 0x5a);
	CHECK_EQ(ibv_poll_cq(s.cq, 1, &wc), 0);
	CHECK_EQ(status_u64(offsetof(struct sv_status_rep, wire_rx_too_big)) -
			 before,
		 2);
	CHECK_EQ(ibv_query_qp(s.qp, &qa, IBV_QP_STATE, &qia), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
	side_close(&s);
	fake_hosts_done(&h);
}

/* What A's daemon has served so far (SV_OP_* requests). */
static uint64_t daemon_requests(void)
{
	return status_u64(offsetof(struct sv_status_rep, requests));
}

SV_TEST_T(junk_to_unknown_qpns_costs_no_daemon_call, 120)
{
	struct host h;
	struct side s;
	struct ibv_wc wc;
	uint64_t noqp, req;
	uint8_t p[12 + 8 + 4 + 4];
	int i;

	fake_hosts(&h);
	/* A polls (its engine reads the port) with a QP on the wire. */
	side_open(&s, IBV_QPT_UD, IP4_A);
	noqp = status_u64(offsetof(struct sv_status_rep, wire_rx_no_qp));
	req = daemon_requests();
	for (uint32_t k = 0; k < 2000; k++) {
		/* UD SENDs to QPNs no QP has, each another one. */
		bth(p, 0x64, 0, 0x800000 + k * 7919 % 0x7fffff, 0, k);
		be32(p + 12, QKEY);
		be24(p + 17, FAKE_QPN);
		p[16] = 0;
		memset(p + 20, 0, 4);
		fake_send_ib(sock_b, IP4_B, p, 24, 0);
		if (k % 64 == 0)
			CHECK_EQ(ibv_poll_cq(s.cq, 1, &wc), 0);
	}
	for (i = 0; i < 2000; i++) {
		CHECK_EQ(ibv_poll_cq(s.cq, 1, &wc), 0);
		if (status_u64(offsetof(struct sv_status_rep, wire_rx_no_qp)) >=
		    noqp + 2000)
			break;
		usleep(10000);
	}
	CHECK(i < 2000); /* all dropped as for no QP */
	/* Each of them used to cost the reader a QPN lookup in the daemon;
	 * the status calls of this loop are the requests left. */
	CHECK(daemon_requests() - req < (uint64_t)i + 100);
	side_close(&s);
	fake_hosts_done(&h);
}

SV_TEST_MAIN()

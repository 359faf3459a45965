/* SPDX-License-Identifier: MIT */
/*
 * A fake RoCE v2 peer (test_wire_trust.c, test_wire_fuzz.c): host B (wire_util.h's
 * two_hosts) runs no softverbs at all but two UDP sockets on port 4791,
 * made in B's namespace and handed to this process: one on B's address,
 * playing the peer of host A's QP (it sees A's packets and answers them
 * by hand), and one on a third address, 198.51.100.3, the stranger.
 * Packets are written byte by byte and carry the ICRC a RoCE v2 sender
 * computes (sv_icrc), so A takes them as it would take a NIC's.
 */
#ifndef WIRE_FAKE_H
#define WIRE_FAKE_H

#include "wire_util.h"
#include "sv_roce.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/uio.h>

#define IP4_C "198.51.100.3"
#define FAKE_QPN 0x123456u

/* B's two sockets, made in B's namespace and handed to us. */
static int sock_b = -1, sock_c = -1;
static int fake_pair[2]; /* a Unix socket pair for the descriptors */

static inline void fake_send_fds(int s, const int fds[2])
{
	char c = 'f';
	struct iovec iov = { &c, 1 };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, 2 * sizeof(int));
	CHECK_EQ(sendmsg(s, &mh, 0), 1);
}

static inline void fake_recv_fds(int s, int fds[2])
{
	char c;
	struct iovec iov = { &c, 1 };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm;

	CHECK_EQ(recvmsg(s, &mh, 0), 1);
	cm = CMSG_FIRSTHDR(&mh);
	CHECK(cm && cm->cmsg_type == SCM_RIGHTS &&
	      cm->cmsg_len == CMSG_LEN(2 * sizeof(int)));
	memcpy(fds, CMSG_DATA(cm), 2 * sizeof(int));
}

static inline int fake_udp_on(const char *ip)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(4791) };
	int fd = socket(AF_INET, SOCK_DGRAM, 0), off = IP_PMTUDISC_DONT;
	int big = 4 << 20;

	CHECK(fd >= 0);
	CHECK_EQ(inet_pton(AF_INET, ip, &a.sin_addr), 1);
	CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	/* DF off: a datagram above the link's MTU leaves in fragments,
	 * as a hostile sender would send it. */
	CHECK_EQ(setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &off, sizeof(off)), 0);
	/* Room for everything A answers while the test is busy sending
	 * (root: beyond rmem_max). */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	return fd;
}

/* B: a second address for the stranger, both sockets to A, then waits
 * for A to finish (EOF).  No softverbs here: nothing else holds 4791. */
static inline void fake_b(int in, int out)
{
	int fds[2];
	char c;

	(void)out;
	sv_test_sh("ip addr add " IP4_C "/24 dev svw1");
	fds[0] = fake_udp_on(IP4_B);
	fds[1] = fake_udp_on(IP4_C);
	fake_send_fds(fake_pair[1], fds);
	while (read(in, &c, 1) > 0)
		;
	_exit(0);
}

/* Both hosts up; B's sockets in sock_b and sock_c. */
static inline void fake_hosts(struct host *h)
{
	int fds[2];

	CHECK_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, fake_pair), 0);
	two_hosts(h, fake_b);
	fake_recv_fds(fake_pair[0], fds);
	sock_b = fds[0];
	sock_c = fds[1];
}

static inline void fake_hosts_done(struct host *h)
{
	close(sock_b);
	close(sock_c);
	close(fake_pair[0]);
	close(fake_pair[1]);
	CHECK_EQ(host_done(h), 0);
	a_done();
}

/* ---------------------------------------------------------- packets -- */

static inline void v4map(uint8_t g[16], const char *ip)
{
	memset(g, 0, 16);
	g[10] = g[11] = 0xff;
	CHECK_EQ(inet_pton(AF_INET, ip, g + 12), 1);
}

static inline void be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void be32(uint8_t *p, uint32_t v)
{
	be24(p + 1, v);
	p[0] = (uint8_t)(v >> 24);
}

static inline void be64(uint8_t *p, uint64_t v)
{
	be32(p, (uint32_t)(v >> 32));
	be32(p + 4, (uint32_t)v);
}

static inline uint32_t ld24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | ld24(p + 1);
}

static inline uint64_t ld64(const uint8_t *p)
{
	return (uint64_t)ld32(p) << 32 | ld32(p + 4);
}

/* A BTH at p (IBTA 9.2): opcode, pad count, P_Key 0xffff, QPN, PSN. */
static inline void bth(uint8_t *p, uint8_t opcode, unsigned pad, uint32_t qpn,
		       int ackreq, uint32_t psn)
{
	memset(p, 0, 12);
	p[0] = opcode;
	p[1] = (uint8_t)(pad << 4);
	p[2] = p[3] = 0xff;
	be24(p + 5, qpn);
	p[8] = ackreq ? 0x80 : 0;
	be24(p + 9, psn);
}

/* The ICRC for ib (len bytes, pad included) sent from socket fd (address
 * from_ip) to A's port, as a RoCE v2 sender computes it. */
static inline uint32_t fake_icrc(int fd, const char *from_ip,
				 const uint8_t *ib, size_t len)
{
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	struct sv_roce_flow f;

	CHECK_EQ(getsockname(fd, (struct sockaddr *)&me, &ml), 0);
	memset(&f, 0, sizeof(f));
	v4map(f.sgid, from_ip);
	v4map(f.dgid, IP4_A);
	f.sport = ntohs(me.sin_port);
	f.dport = 4791;
	f.hop_limit = 64;
	return sv_icrc(&f, ib, len);
}

/*
 * The extension headers of each opcode (IBTA 9.2.1, table 39): every RC
 * one, and a SEND and WRITE of UC and a SEND of UD (the other transports:
 * an RC QP drops them).  0: no such opcode.
 */
enum {
	H_PAY = 1, H_RETH = 2, H_ATMETH = 4, H_AETH = 8, H_ATMACK = 16,
	H_IMM = 32, H_IETH = 64, H_DETH = 128,
};
static const uint8_t fake_hdrs[256] = {
	[0x00] = H_PAY, [0x01] = H_PAY, [0x02] = H_PAY,
	[0x03] = H_PAY | H_IMM, [0x04] = H_PAY, [0x05] = H_PAY | H_IMM,
	[0x06] = H_PAY | H_RETH, [0x07] = H_PAY, [0x08] = H_PAY,
	[0x09] = H_PAY | H_IMM, [0x0a] = H_PAY | H_RETH,
	[0x0b] = H_PAY | H_RETH | H_IMM, [0x0c] = H_RETH,
	[0x0d] = H_PAY | H_AETH, [0x0e] = H_PAY, [0x0f] = H_PAY | H_AETH,
	[0x10] = H_PAY | H_AETH, [0x11] = H_AETH, [0x12] = H_AETH | H_ATMACK,
	[0x13] = H_ATMETH, [0x14] = H_ATMETH, [0x16] = H_PAY | H_IETH,
	[0x17] = H_PAY | H_IETH, [0x24] = H_PAY, [0x2a] = H_PAY | H_RETH,
	[0x64] = H_PAY | H_DETH,
};

/* The extension headers' fields: each opcode takes those it has. */
struct fake_fields {
	uint64_t va, swap, comp, orig; /* RETH/AtomicETH, AtomicAckETH */
	uint32_t rkey, dma_len;	       /* RETH/AtomicETH */
	uint32_t msn, imm, ieth, qkey; /* AETH, ImmDt, IETH, DETH */
	uint8_t syn;		       /* AETH */
};

/*
 * A packet written by hand:
 *
 * | field    | what                                                    |
 * |----------|---------------------------------------------------------|
 * | b, len   | BTH .. pad (len bytes), then room for the ICRC          |
 * | pad      | the BTH pad count; -1: the right one for the payload    |
 * | se, mig  | the BTH's SE and MigReq bits                            |
 * | tver     | the BTH's transport version (0 is the only valid one)   |
 * | qpn      | the destination QP                                      |
 * | from_c   | sent from the stranger's address, not B's               |
 * | bad_icrc | sent with a wrong ICRC                                  |
 */
struct fake_pkt {
	uint8_t b[5200];
	size_t len;
	int pad, se, mig, tver;
	uint32_t qpn;
	int from_c, bad_icrc;
};

/* Writes k's BTH for op and psn and the extension headers op has, from
 * f; `extra` more header bytes and paylen payload bytes follow, which
 * the caller fills, then the pad (zeros).  Returns where `extra` starts. */
static inline uint8_t *fake_build(struct fake_pkt *k, uint8_t op, uint32_t psn,
				  int ackreq, const struct fake_fields *f,
				  uint32_t extra, uint32_t paylen)
{
	uint8_t h = fake_hdrs[op], *p = k->b;
	unsigned pad = (4 - paylen % 4) % 4;

	CHECK(12 + 72 + extra + paylen + pad + 4 <= sizeof(k->b));
	bth(p, op, k->pad < 0 ? pad : (unsigned)k->pad, k->qpn, ackreq, psn);
	p[1] |= (uint8_t)((k->se ? 0x80 : 0) | (k->mig ? 0x40 : 0) |
			  (k->tver & 0xf));
	p += 12;
	if (h & H_DETH) {
		be32(p, f->qkey);
		p[4] = 0;
		be24(p + 5, FAKE_QPN);
		p += 8;
	}
	if (h & (H_RETH | H_ATMETH)) {
		be64(p, f->va);
		be32(p + 8, f->rkey);
		if (h & H_RETH) {
			be32(p + 12, f->dma_len);
			p += 16;
		} else {
			be64(p + 12, f->swap);
			be64(p + 20, f->comp);
			p += 28;
		}
	}
	if (h & H_AETH) {
		p[0] = f->syn;
		be24(p + 1, f->msn);
		p += 4;
	}
	if (h & H_ATMACK) {
		be64(p, f->orig);
		p += 8;
	}
	if (h & H_IMM) {
		be32(p, f->imm);
		p += 4;
	}
	if (h & H_IETH) {
		be32(p, f->ieth);
		p += 4;
	}
	memset(p + extra + paylen, 0, pad);
	k->len = (size_t)(p - k->b) + extra + paylen + pad;
	return p;
}

/* Sends ib (len bytes, pad included, and 4 more bytes for the ICRC)
 * from socket fd (address from_ip) to A's port, with the ICRC a RoCE v2
 * sender computes (bad_icrc: a wrong one). */
static inline void fake_send_ib(int fd, const char *from_ip, uint8_t *ib,
				size_t len, int bad_icrc)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(4791) };
	uint32_t icrc = fake_icrc(fd, from_ip, ib, len) ^ (bad_icrc ? 1u : 0);

	memcpy(ib + len, &icrc, 4);
	CHECK_EQ(inet_pton(AF_INET, IP4_A, &a.sin_addr), 1);
	CHECK_EQ(sendto(fd, ib, len + 4, 0, (struct sockaddr *)&a, sizeof(a)),
		 (ssize_t)(len + 4));
}

/* Sends k to A's port from B's address or the stranger's. */
static inline void fake_send(struct fake_pkt *k)
{
	fake_send_ib(k->from_c ? sock_c : sock_b, k->from_c ? IP4_C : IP4_B,
		     k->b, k->len, k->bad_icrc);
}

/* Whether the datagram p (n bytes, ICRC included) that A sent from UDP
 * port sport to B carries the right ICRC: a socket does not see the IPv4
 * identification, which is 1, 2, ... for the packets of a train after
 * its first (eng_wire.c "Trains"), so it is solved for, as the port's
 * readers do (sv_icrc_check). */
static inline int fake_icrc_ok(const uint8_t *p, size_t n, uint16_t sport)
{
	struct sv_roce_flow f;
	uint32_t icrc;

	memset(&f, 0, sizeof(f));
	v4map(f.sgid, IP4_A);
	v4map(f.dgid, IP4_B);
	f.sport = sport;
	f.dport = 4791;
	f.hop_limit = 64;
	memcpy(&icrc, p + n - 4, 4);
	return !sv_icrc_check(&f, p, n - 4, icrc);
}

#endif

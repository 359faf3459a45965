/* SPDX-License-Identifier: MIT */
/*
 * Receiving RoCE v2 from the namespace's UDP port (docs/wire.md), shared
 * by the daemon's gateway thread and the engines.
 *
 * The daemon binds the port and hands every engine on the wire a
 * duplicate of the socket and a shared page (struct sv_wire_shm).  One
 * reader at a time (rx_owner) takes a batch of datagrams and steers each
 * by its BTH destination QP: packets for the reader's own QPs are handled
 * at once, others go on to the engine that serves them (an engine's link
 * ring, or the daemon's gateway ring).  So an application that polls its
 * CQ receives its packets itself, with no other thread in between, and
 * the daemon's thread reads only while no engine has read for a while
 * (SV_WIRE_HANDOFF_NS): nobody polls, or everybody sleeps.
 *
 * Order: a reader forwards what it read before it gives the port up,
 * dispatches its own QPs' packets (a group's copies included) itself,
 * and drains its rings before it reads, so a QP's packets mostly reach
 * it in the order they arrived.  Packets two other readers forwarded wait
 * in two rings, drained in ring order, and on a loaded machine a UD QP
 * has been seen to receive two datagrams swapped: RC puts them back in
 * order through its PSNs; UD promises no order; UC loses the message
 * (docs/wire.md).  Holding the port until the rings a reader filled are
 * drained would keep the order, at the price of one descheduled process
 * stalling its namespace's port.
 */
#ifndef SV_WIRE_H
#define SV_WIRE_H

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "sv_hdr.h"

#define SV_WIRE_MAGIC 0x31525753u /* "SWR1" */
#define SV_WIRE_VERSION 5 /* 5: the port's socket has UDP_GRO */
/* An engine read the port this recently: the daemon's thread leaves it. */
#define SV_WIRE_HANDOFF_NS 1000000ull
/* Room in front of a received datagram for the GRH a ring record needs. */
#define SV_WIRE_HEADROOM 40
/* A receive buffer: headroom + the largest datagram we take, a UDP_GRO
 * aggregate (sv_wire_recv). */
#define SV_WIRE_BUF (SV_WIRE_HEADROOM + 65536)
/* The largest packet of an aggregate we take (MTU 4096 + headers). */
#define SV_WIRE_SEG_MAX 8192

/*
 * The shared page (daemon-made memfd, mapped read-write by the engines on
 * the wire).  Counters are the namespace's, whoever counted.
 *
 * | field        | meaning                                           |
 * |--------------|---------------------------------------------------|
 * | magic        | SV_WIRE_MAGIC                                     |
 * | version      | SV_WIRE_VERSION                                   |
 * | rx_owner     | who reads the port now (0: nobody): pid << 32 and |
 * |              | the low 32 bits of CLOCK_MONOTONIC in ms when it  |
 * |              | took it, one word, so a reader judged stale is    |
 * |              | the one that took it then, never a newer one      |
 * | poll_ns      | CLOCK_MONOTONIC of an engine's last read          |
 * | owner_ns     | unused (version 1's take time)                    |
 * | rx_pkts      | packets taken (ICRC good, a QP to go to)          |
 * | rx_bytes     | their bytes (BTH .. ICRC)                         |
 * | rx_bad_icrc  | dropped: ICRC wrong                               |
 * | rx_malformed | dropped: not a RoCE v2 packet we take             |
 * | rx_no_qp     | dropped: no such QP (or its process is gone)      |
 * | rx_ring_full | dropped: the serving engine's ring was full (the  |
 * |              | daemon's thread waits for room first: gateway.c)  |
 * | rx_not_peer  | dropped: RC/UC packet whose addresses are not the |
 * |              | QP's path (rxe's check_addr)                      |
 * | rx_too_big   | dropped: payload above the port's active MTU      |
 * | tx_pkts      | packets engines sent                              |
 * | tx_bytes     | their bytes (BTH .. ICRC)                         |
 * | tx_errors    | packets the kernel refused (no route, too big)    |
 */
struct sv_wire_shm {
	uint32_t magic;
	uint32_t version;
	_Atomic uint64_t rx_owner;
	_Atomic uint64_t poll_ns;
	_Atomic uint64_t rx_pkts, rx_bytes, rx_bad_icrc, rx_malformed, rx_no_qp,
		rx_ring_full;
	_Atomic uint64_t tx_pkts, tx_bytes, tx_errors;
	_Atomic uint64_t owner_ns;
	_Atomic uint64_t rx_not_peer, rx_too_big;
	uint8_t reserved[4096 - 120];
};
static_assert(sizeof(struct sv_wire_shm) == 4096, "wire page layout");

/*
 * After the page, the daemon's map of live QPNs: bit n of byte n / 8 is
 * set while QP n exists in this namespace (set before the QP can be
 * reached, cleared when it is destroyed).  Whoever reads the port drops a
 * packet whose bit is clear without asking the daemon, so a flood to
 * QPNs that do not exist costs a load each, not a round trip
 * (docs/wire.md "Hostile packets").  2 MiB of a sparse memfd: only the
 * pages of QPNs in use are ever touched.
 */
#define SV_WIRE_QPN_MAP_OFF sizeof(struct sv_wire_shm)
#define SV_WIRE_SHM_BYTES (SV_WIRE_QPN_MAP_OFF + (1u << 24) / 8)

static inline _Atomic uint8_t *sv_wire_qpn_byte(struct sv_wire_shm *m,
					       uint32_t qpn)
{
	return (_Atomic uint8_t *)((char *)m + SV_WIRE_QPN_MAP_OFF) +
	       ((qpn & 0xffffff) >> 3);
}

static inline int sv_wire_qpn_live(struct sv_wire_shm *m, uint32_t qpn)
{
	return (atomic_load_explicit(sv_wire_qpn_byte(m, qpn),
				     memory_order_acquire) >>
		(qpn & 7)) & 1;
}

/*
 * Whether datagram payload b (n bytes, as received) names a QP that is
 * not there: QP1, multicast (0xFFFFFF: its reader asks for the group's
 * QPs) and QPNs in the map are, and anything too short to hold
 * a BTH is left to sv_wire_rx_parse to refuse.  Asked before the ICRC
 * is computed, so junk to missing QPNs costs one load.
 */
static inline int sv_wire_qpn_missing(struct sv_wire_shm *m, const uint8_t *b,
				      size_t n)
{
	uint32_t qpn;

	if (n < SV_BTH_BYTES)
		return 0;
	qpn = __bth_qpn(b);
	return qpn != 1 && qpn != SV_MCAST_QPN && !sv_wire_qpn_live(m, qpn);
}

/* Takes the port for reading if nobody has it, or its holder died or
 * kept it SV_WIRE_STEAL_NS (a stopped process must not stop the
 * namespace's wire).  now: CLOCK_MONOTONIC ns.  A second, not less: a
 * reader merely preempted on a busy machine must keep the port, or two
 * would read at once and reorder a stream (UC loses messages then).
 * Whether the holder lives is asked of the kernel (a system call) only
 * once its take is SV_WIRE_ALIVE_NS old: a reader holds the port for
 * the microseconds of a read, and every reader refused asked it before
 * (10,000 times a second beside UCX's stream_bw on one host). */
#define SV_WIRE_STEAL_NS 1000000000ull
#define SV_WIRE_ALIVE_NS 2000000ull
int sv_wire_rx_trylock(struct sv_wire_shm *s, uint32_t pid, uint64_t now);
void sv_wire_rx_unlock(struct sv_wire_shm *s, uint32_t pid);

/*
 * Addresses a datagram of flow f (struct sv_roce_flow, sv_roce.h) on a
 * socket of family fam (the port's or an engine's): the destination into
 * dst (for AF_INET a sockaddr_in in its room), the source address, traffic
 * class (or TOS) and hop limit (TTL; 0 in f: 64) as control messages into
 * ctl, which holds SV_WIRE_CTL_BYTES and is aligned for a cmsghdr.  The
 * IPv6 flow label goes into dst for an IPv6 flow.  Returns the control
 * bytes used; the name's length is that of dst's family.
 */
#define SV_WIRE_CTL_BYTES                                                      \
	(CMSG_SPACE(sizeof(struct in6_pktinfo)) + 2 * CMSG_SPACE(sizeof(int)))
struct sv_roce_flow;
struct sockaddr_in6;
uint32_t sv_wire_address(const struct sv_roce_flow *f, int fam,
			 struct sockaddr_in6 *dst, void *ctl);

/* One received datagram made a ring record. */
struct sv_wire_pkt {
	uint8_t *rec;	  /* GRH (40 bytes) + BTH .. payload, no pad or ICRC */
	uint32_t rec_len;
	uint32_t qpn;	  /* BTH destination QP */
	uint32_t ib_len;  /* bytes counted (BTH .. ICRC) */
};

/*
 * Turns datagram i of a recvmmsg (its payload at buf + SV_WIRE_HEADROOM,
 * n bytes; mh its header with the sender's address and the ancillary data
 * the port's socket asks for, see sv_wire_rx_sockopts) into a ring record
 * in place.  port: the UDP port the datagram came to.  Returns 0,
 * -EBADMSG (ICRC wrong) or -EINVAL (anything else: not RoCE v2 as we
 * take it).
 */
int sv_wire_rx_parse(const struct msghdr *mh, size_t n, uint8_t *buf,
		     uint16_t port, struct sv_wire_pkt *out);

/* Sets what sv_wire_rx_parse needs on the port's socket (fam: AF_INET6
 * dual stack or AF_INET). */
void sv_wire_rx_sockopts(int fd, int fam);

/*
 * Receives up to n datagrams into bufs (n <= SV_WIRE_BATCH), without
 * waiting.  Returns how many (0 none, < 0 an error).
 *
 * The engines' port socket has UDP_GRO (the daemon sets it,
 * sv_wire_rx_gro): a train of packets of one flow (eng_wire.c "Trains",
 * or a NIC's packets the kernel merged) comes as one datagram with the
 * segment size beside it, seg[i]; 0 when datagram i is one packet.
 * sv_wire_rx_packets says how many packets a datagram holds and
 * sv_wire_rx_packet hands out each as a datagram of its own, so every
 * RoCE packet is parsed, checked (its ICRC), counted and captured alone.
 */
#define SV_WIRE_BATCH 16
struct sv_wire_rxb {
	uint8_t buf[SV_WIRE_BATCH][SV_WIRE_BUF];
	struct sockaddr_storage name[SV_WIRE_BATCH];
	uint64_t ctl[SV_WIRE_BATCH][32];
	struct mmsghdr mm[SV_WIRE_BATCH];
	struct iovec iov[SV_WIRE_BATCH];
	uint32_t seg[SV_WIRE_BATCH];
	/* Packet k > 0 of an aggregate, copied out with room for its
	 * record's GRH in front (the one before it holds the bytes there). */
	uint8_t one[SV_WIRE_HEADROOM + SV_WIRE_SEG_MAX];
};
int sv_wire_recv(int fd, struct sv_wire_rxb *b, int n);

/* Asks the port's socket for UDP_GRO (every reader of it must split
 * aggregates: sv_wire_rx_packet). */
void sv_wire_rx_gro(int fd);

/* The packets datagram i of the last sv_wire_recv holds (1, or an
 * aggregate's). */
static inline uint32_t sv_wire_rx_packets(const struct sv_wire_rxb *b, int i)
{
	uint32_t g = b->seg[i], n = b->mm[i].msg_len;

	return g && n > g ? (n + g - 1) / g : 1;
}

/*
 * Packet k of datagram i as sv_wire_rx_parse takes it: *len bytes after
 * SV_WIRE_HEADROOM bytes of room at the buffer returned.  Packet 0 is in
 * place; packet k > 0 is copied into b->one, valid until the next call.
 * NULL when the packet is larger than SV_WIRE_SEG_MAX.
 */
static inline uint8_t *sv_wire_rx_packet(struct sv_wire_rxb *b, int i,
					 uint32_t k, uint32_t *len)
{
	uint32_t g = b->seg[i], n = b->mm[i].msg_len;

	if (!k) {
		*len = g && n > g ? g : n;
		return b->buf[i];
	}
	*len = n - k * g < g ? n - k * g : g;
	if (*len > SV_WIRE_SEG_MAX)
		return NULL;
	memcpy(b->one + SV_WIRE_HEADROOM, b->buf[i] + SV_WIRE_HEADROOM + k * g,
	       *len);
	return b->one;
}

#endif

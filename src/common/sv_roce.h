/* SPDX-License-Identifier: MIT */
/*
 * RoCE v2 encapsulation (IBTA vol. 1, Annex A17): an IBTA packet (BTH ..
 * payload and pad) travels in UDP to port 4791 over IPv4 or IPv6, followed
 * by the 4-byte ICRC.  This module, with the header accessors of
 * sv_hdr.h (its inline half), owns those bytes: the engines' wire
 * path, the daemon's gateway and `softverbs capture` all build and check
 * frames here, so what is captured is exactly what is sent.
 *
 * A frame (what sv_roce_frame writes and sv_roce_parse reads; no link
 * layer header, as LINKTYPE_RAW in a pcap):
 *
 *   | bytes       | what                                              |
 *   |-------------|---------------------------------------------------|
 *   | 20 or 40    | IPv4 header (no options) or IPv6 header           |
 *   | 8           | UDP header: sport, dport 4791, length, checksum   |
 *   | ib_len      | BTH, extension headers, payload, pad              |
 *   | 4           | ICRC                                              |
 *
 * The ICRC (Annex A17, and the kernel's rxe, drivers/infiniband/sw/rxe/
 * rxe_icrc.c) is the Ethernet CRC-32 over a pseudo packet: 8 bytes of
 * 0xff standing for the LRH, then the IP header, UDP header and IBTA
 * packet with the fields a router may change set to all ones (sv_roce.c
 * lists them where it masks them).  Everything else in the IP and UDP
 * headers is covered, the IPv4 identification and flags included: a
 * sender must put into the header what it computed the ICRC with.
 *
 * GIDs are IPv6 addresses; an IPv4 address is the GID ::ffff:a.b.c.d
 * (RoCE v2's IPv4-mapped GIDs, as the device's GID table lists them).
 */
#ifndef SV_ROCE_H
#define SV_ROCE_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define SV_ROCE_PORT 4791 /* UDP destination port of RoCE v2 (IANA) */
#define SV_ICRC_BYTES 4
#define SV_ROCE_IP4_HDR 20
#define SV_ROCE_IP6_HDR 40
#define SV_ROCE_UDP_HDR 8
/* The longest IBTA packet a frame can carry (the IP length fields are 16
 * bits: IPv4 counts its own header, IPv6 does not). */
#define SV_ROCE_MAX_IB4 (65535 - SV_ROCE_IP4_HDR - SV_ROCE_UDP_HDR - SV_ICRC_BYTES)
#define SV_ROCE_MAX_IB6 (65535 - SV_ROCE_UDP_HDR - SV_ICRC_BYTES)

/*
 * The IP and UDP headers of one packet, in host terms.
 *
 * | field      | meaning                                                 |
 * |------------|---------------------------------------------------------|
 * | ipv6       | 0: IPv4 (both GIDs are ::ffff:a.b.c.d); 1: IPv6          |
 * | tclass     | IPv4 TOS / IPv6 traffic class (DSCP and ECN)            |
 * | hop_limit  | IPv4 TTL / IPv6 hop limit                               |
 * | pad        | 0                                                       |
 * | flow_label | IPv6 flow label, 20 bits (IPv4: unused)                  |
 * | sport      | UDP source port, host order (RoCE: per QP or flow)      |
 * | dport      | UDP destination port, host order (SV_ROCE_PORT)         |
 * | pad2       | 0                                                       |
 * | sgid       | source GID (the source address)                         |
 * | dgid       | destination GID (the destination address)               |
 */
struct sv_roce_flow {
	uint8_t ipv6;
	uint8_t tclass;
	uint8_t hop_limit;
	uint8_t pad;
	uint32_t flow_label;
	uint16_t sport;
	uint16_t dport;
	uint16_t pad2[2];
	uint8_t sgid[16];
	uint8_t dgid[16];
};
static_assert(sizeof(struct sv_roce_flow) == 48, "roce flow layout");
static_assert(offsetof(struct sv_roce_flow, sgid) == 16, "roce flow layout");

/*
 * The 4 ICRC bytes of the IBTA packet ib (BTH .. payload and pad, without
 * ICRC) travelling in the IP/UDP headers of f, as a value whose memory
 * representation is what follows the packet on the wire (memcpy it
 * there).  IPv4: identification 0 and DF set, as Linux sends a DF
 * datagram from an unconnected UDP socket (and the frames sv_roce_frame
 * writes).  Thread-safe; about 1 ns per byte or better (sv_roce.c).
 */
uint32_t sv_icrc(const struct sv_roce_flow *f, const void *ib, size_t ib_len);

/* The bytes in front of the IBTA packet: 20 + 8 (IPv4) or 40 + 8 (IPv6). */
size_t sv_roce_hdr_len(const struct sv_roce_flow *f);

/*
 * The same ICRC in pieces, for a packet whose payload is elsewhere (a
 * sender that hands the kernel the packet's headers and its payload
 * separately): sv_icrc_start covers the IP and UDP headers and the
 * packet's first hl bytes (its headers, hl >= 12) of a packet of ib_len
 * bytes in all, pad included, with IPv4 identification id (and DF; IPv6:
 * id unused); then sv_crc32_le over the rest of the packet, in order;
 * sv_icrc_end gives the value to store after it.  Equal to sv_icrc_ipv4
 * (and to sv_icrc for id 0 or IPv6).
 */
uint32_t sv_icrc_start(const struct sv_roce_flow *f, const void *ib,
		       size_t hl, size_t ib_len, uint16_t id);
uint32_t sv_icrc_end(uint32_t crc);

/*
 * sv_icrc with another IPv4 identification and DF than 0 and set: for a
 * sender whose kernel numbers the datagrams, as UDP GSO does (the
 * segments of one send carry identifications 0, 1, 2, ... when the first
 * is 0).  IPv6 flows: sv_icrc.
 */
uint32_t sv_icrc_ipv4(const struct sv_roce_flow *f, const void *ib,
		      size_t ib_len, uint16_t id, int df);

/*
 * For a receiver that never sees the IPv4 header (a UDP socket): the ICRC
 * covers the IPv4 identification and flags, which the kernel's rxe fills
 * with __ip_select_ident (not 0) and a UDP socket does not report.  Finds
 * the identification (and DF) that make `icrc` (the 4 bytes after the
 * packet, as sv_icrc returns them) the ICRC of ib in the IPv4 flow f:
 * 0 with *id and *df set, or -EBADMSG when none does.  The CRC is linear,
 * so this is a 16-unknown linear system, not a search (a few hundred ns;
 * per-thread cache by packet length); what is left of the check is 15 of
 * the CRC's 32 bits.  IPv6 has no such field: use sv_icrc.
 */
int sv_icrc_ipv4_id(const struct sv_roce_flow *f, const void *ib,
		    size_t ib_len, uint32_t icrc, uint16_t *id, int *df);

/*
 * Whether icrc (the 4 bytes after ib, as sv_icrc returns them) is ib's
 * ICRC in flow f: for IPv6 sv_icrc's; for IPv4 that of identification 0
 * and DF, or else of the identification and DF sv_icrc_ipv4_id finds, the
 * CRC computed once either way (the segments of a UDP_SEGMENT train carry
 * identifications 1, 2, ...).  0 or -EBADMSG.
 */
int sv_icrc_check(const struct sv_roce_flow *f, const void *ib, size_t ib_len,
		  uint32_t icrc);

/*
 * Writes IP | UDP | ib | ICRC into out.  IPv4: identification 0, DF, the
 * header checksum computed, UDP checksum 0 (as RoCE v2 NICs and rxe send
 * it; the ICRC protects the packet).  IPv6: the UDP checksum is
 * computed, since IPv6 forbids a zero one (RFC 8200; decoders flag it)
 * and Linux computes it for a UDP socket's datagrams.  Returns the
 * frame's length; 0 when cap is too small or ib_len exceeds what the IP
 * length fields hold (SV_ROCE_MAX_IB4 / SV_ROCE_MAX_IB6).
 */
size_t sv_roce_frame(void *out, size_t cap, const struct sv_roce_flow *f,
		     const void *ib, size_t ib_len);

/*
 * Parses a raw IP frame (len bytes; bytes after the IP datagram, such as
 * Ethernet padding, are ignored).  Returns 0 with *f filled and *ib,
 * *ib_len the IBTA packet (without its ICRC, at least a BTH) when it is
 * RoCE v2 to UDP port 4791 with a good ICRC; -EBADMSG when only the ICRC
 * is wrong; -EINVAL for anything else (not IPv4/IPv6 + UDP to 4791, IP
 * options or extension headers, a fragment, inconsistent lengths, a bad
 * IPv4 header checksum, no room for BTH and ICRC).  The ICRC is checked
 * over the header bytes as received (whatever identification the sender
 * chose), as rxe checks it.
 */
int sv_roce_parse(const void *frame, size_t len, struct sv_roce_flow *f,
		  const uint8_t **ib, size_t *ib_len);

/*
 * The flow of a ring record's GRH (sv_hdr.h: the IPv6 header a packet
 * came in or goes out with, IPv4 between two ::ffff:a.b.c.d GIDs):
 * traffic class, flow label, hop limit (as written, 0 included), GIDs and
 * ipv6; ports 0.
 */
void sv_roce_grh_flow(const uint8_t *grh, struct sv_roce_flow *f);

/*
 * The IPv4 header (20 bytes) of an IPv4 flow f carrying a UDP datagram of
 * udp_len bytes, as sv_roce_frame writes it: identification 0, DF, the
 * checksum computed.  A UD receive's first 40 bytes end with it.
 */
void sv_roce_ip4_hdr(uint8_t *h, const struct sv_roce_flow *f, size_t udp_len);

/*
 * pcap (the libpcap file format, nanosecond timestamps, LINKTYPE_RAW:
 * frames as sv_roce_frame makes them, IPv4 or IPv6).  sv_pcap_header
 * writes the 24-byte file header, sv_pcap_record one record (16-byte
 * record header, then the frame), each with complete writes (retried
 * after a partial one or EINTR).  0 or -errno.
 */
#define SV_PCAP_MAGIC_NS 0xa1b23c4du /* pcap, nanosecond timestamps */
#define SV_PCAP_LINKTYPE_RAW 101     /* frames start with the IP header */
#define SV_PCAP_SNAPLEN 262144	     /* as tcpdump's default */
#define SV_PCAP_FILE_HDR 24	     /* bytes of the file header */
#define SV_PCAP_REC_HDR 16	     /* bytes of a record header */
int sv_pcap_header(int fd);
int sv_pcap_record(int fd, uint64_t ts_ns, const void *frame, size_t len);

/* The same headers in memory, for writers that buffer (the daemon):
 * SV_PCAP_FILE_HDR and SV_PCAP_REC_HDR bytes. */
void sv_pcap_file_hdr(void *out);
void sv_pcap_rec_hdr(void *out, uint64_t ts_ns, size_t len);

/* The raw CRC-32 register update (reflected polynomial 0xedb88320, no
 * inversion before or after, as the kernel's crc32_le): exposed for the
 * tests and the benchmark. */
uint32_t sv_crc32_le(uint32_t crc, const void *p, size_t n);
/* The same with the portable tables only (slicing-by-8). */
uint32_t sv_crc32_le_tables(uint32_t crc, const void *p, size_t n);
/* Turns the 512-bit folding (VPCLMULQDQ, AVX-512) of long buffers on or
 * off, for the tests and the benchmark; on where the CPU has it, from
 * the start.  Returns whether it is on now. */
int sv_crc_wide(int on);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the RoCE v2 encapsulation and ICRC (src/common/sv_roce.c):
 *   - the CRC-32 (both the PCLMUL path and the tables) equals a bitwise
 *     reference on every length up to 1 KiB, at every alignment, and on
 *     large buffers; the standard check value; rxe's seed;
 *   - a whole frame equals, byte for byte, the one scapy's RoCE layer
 *     builds (a known answer taken from an independent implementation);
 *   - frames round-trip through sv_roce_parse, IPv4 and IPv6, every
 *     length from an empty payload up, odd lengths with a pad count;
 *   - flipping any bit of a frame: in a field the ICRC masks (TOS/traffic
 *     class, TTL/hop limit, flow label, the checksums, BTH resv8a) the
 *     frame still parses; anywhere else it is refused (-EBADMSG wherever
 *     the frame still looks like RoCE v2, the IPv4 identification and
 *     flags included);
 *   - the ICRC for a given IPv4 identification and DF (sv_icrc_ipv4), and
 *     a receiver that sees no IPv4 header recovers the identification and
 *     DF the sender used (sv_icrc_ipv4_id; sv_icrc_check, the
 *     receiver's one call) and refuses corruption;
 *   - pcap headers and records are laid out as libpcap reads them.
 * `test_roce --bench` measures the CRC and the ICRC of a 4 KiB packet.
 */
#include "sv_roce.h"
#include "unit_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Bit by bit, straight from the definition. */
static uint32_t crc_ref(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return crc;
}

static uint32_t rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd(&seed);
}

static void test_crc(void)
{
	static uint8_t buf[70000 + 64];
	const char *check = "123456789";
	uint8_t ff[8];

	EXPECT(~sv_crc32_le(~0u, check, 9) == 0xcbf43926u);
	EXPECT(~sv_crc32_le_tables(~0u, check, 9) == 0xcbf43926u);
	memset(ff, 0xff, sizeof(ff));
	/* rxe's seed: the register after a masked LRH. */
	EXPECT(sv_crc32_le(~0u, ff, 8) == 0xdebb20e3u);
	fill(buf, sizeof(buf), 7);
	/* Every path: the 512-bit folding where the CPU has it, then the
	 * 128-bit one (and the tables throughout). */
	for (int wide = sv_crc_wide(1); wide >= 0; wide--) {
		EXPECT(sv_crc_wide(wide) == wide);
		for (size_t off = 0; off < 16; off++)
			for (size_t n = 0; n <= 1024; n++) {
				uint32_t c = 0x12345678u ^ (uint32_t)n,
					 want = crc_ref(c, buf + off, n);

				EXPECT(sv_crc32_le(c, buf + off, n) == want);
				EXPECT(sv_crc32_le_tables(c, buf + off, n) ==
				       want);
			}
		for (size_t n = 4096; n <= 70000; n += 4093) {
			uint32_t want = crc_ref(~0u, buf + 3, n);

			EXPECT(sv_crc32_le(~0u, buf + 3, n) == want);
			EXPECT(sv_crc32_le_tables(~0u, buf + 3, n) == want);
		}
	}
	sv_crc_wide(1);
}

static void gid4(uint8_t *g, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	memset(g, 0, 16);
	g[10] = g[11] = 0xff;
	g[12] = a, g[13] = b, g[14] = c, g[15] = d;
}

static void gid6(uint8_t *g, uint16_t last)
{
	memset(g, 0, 16);
	g[0] = 0x20, g[1] = 0x01, g[2] = 0x0d, g[3] = 0xb8;
	g[14] = (uint8_t)(last >> 8), g[15] = (uint8_t)last;
}

/* A BTH: opcode, pad count, QPN, AckReq, PSN. */
static void bth(uint8_t *b, uint8_t op, int pad, uint32_t qpn, int ack,
		uint32_t psn)
{
	b[0] = op;
	b[1] = (uint8_t)(0x40 | pad << 4);
	b[2] = b[3] = 0xff;
	b[4] = 0;
	b[5] = (uint8_t)(qpn >> 16), b[6] = (uint8_t)(qpn >> 8), b[7] = (uint8_t)qpn;
	b[8] = ack ? 0x80 : 0;
	b[9] = (uint8_t)(psn >> 16), b[10] = (uint8_t)(psn >> 8), b[11] = (uint8_t)psn;
}

/*
 * scapy 2.5 (scapy.contrib.roce) built this frame:
 *   IP(src="198.51.100.1", dst="198.51.100.2", tos=0, ttl=64, id=0,
 *      flags="DF") / UDP(sport=49152, dport=4791, chksum=0) /
 *   BTH(opcode=0x04, migreq=1, padcount=3, pkey=0xffff, dqpn=0x12,
 *       ackreq=1, psn=1) / b"softverbs\0\0\0"
 */
static const char scapy_frame[] =
	"45000038000040004011e64ac6336401c6336402c00012b7002400000470ffff"
	"0000001280000001736f66747665726273000000605e90ef";

static void test_known_answer(void)
{
	struct sv_roce_flow f = { .hop_limit = 64, .sport = 49152,
				  .dport = SV_ROCE_PORT };
	uint8_t ib[24], want[56], out[64];
	uint32_t icrc;

	for (size_t i = 0; i < sizeof(want); i++)
		sscanf(scapy_frame + 2 * i, "%2hhx", &want[i]);
	gid4(f.sgid, 198, 51, 100, 1);
	gid4(f.dgid, 198, 51, 100, 2);
	bth(ib, 0x04, 3, 0x12, 1, 1);
	memcpy(ib + 12, "softverbs\0\0\0", 12);
	EXPECT(sv_roce_hdr_len(&f) == 28);
	EXPECT(sv_roce_frame(out, sizeof(out), &f, ib, sizeof(ib)) == 56);
	EXPECT(memcmp(out, want, 56) == 0);
	icrc = sv_icrc(&f, ib, sizeof(ib));
	EXPECT(memcmp(&icrc, want + 52, 4) == 0);
	/* Too small a buffer: nothing. */
	EXPECT(sv_roce_frame(out, 55, &f, ib, sizeof(ib)) == 0);
}

static void flow_init(struct sv_roce_flow *f, int ipv6, unsigned seed)
{
	memset(f, 0, sizeof(*f));
	f->ipv6 = (uint8_t)ipv6;
	f->tclass = (uint8_t)rnd(&seed);
	f->hop_limit = (uint8_t)(rnd(&seed) | 1);
	f->flow_label = ipv6 ? rnd(&seed) & 0xfffff : 0;
	f->sport = (uint16_t)(49152 + rnd(&seed) % 16384);
	f->dport = SV_ROCE_PORT;
	if (ipv6) {
		gid6(f->sgid, (uint16_t)(1 + rnd(&seed) % 100));
		gid6(f->dgid, (uint16_t)(101 + rnd(&seed) % 100));
	} else {
		gid4(f->sgid, 198, 51, 100, (uint8_t)(1 + rnd(&seed) % 100));
		gid4(f->dgid, 203, 0, 113, (uint8_t)(1 + rnd(&seed) % 100));
	}
}

/* The ICRC in pieces (headers, then the payload in parts, as a sender
 * that hands the kernel a packet's payload from elsewhere computes it)
 * equals the ICRC of the whole, IPv4 with any identification and IPv6. */
static void test_icrc_pieces(void)
{
	static uint8_t ib[4096 + 64];
	unsigned seed = 5;

	fill(ib, sizeof(ib), 3);
	for (int v6 = 0; v6 <= 1; v6++)
		for (int i = 0; i < 200; i++) {
			struct sv_roce_flow f;
			size_t len = 12 + rnd(&seed) % 4096, hl, cut;
			uint16_t id = (uint16_t)(i % 3 ? rnd(&seed) : 0);
			uint32_t c, want;

			flow_init(&f, v6, (unsigned)i);
			hl = 12 + rnd(&seed) % (len - 12 + 1);
			cut = hl + rnd(&seed) % (len - hl + 1);
			want = v6 ? sv_icrc(&f, ib, len) :
				    sv_icrc_ipv4(&f, ib, len, id, 1);
			c = sv_icrc_start(&f, ib, hl, len, id);
			c = sv_crc32_le(c, ib + hl, cut - hl);
			c = sv_crc32_le(c, ib + cut, len - cut);
			EXPECT(sv_icrc_end(c) == want);
			if (!id)
				EXPECT(sv_icrc(&f, ib, len) == want);
		}
}

static void test_round_trip(void)
{
	static uint8_t ib[9000], frame[9200];

	for (int v6 = 0; v6 <= 1; v6++)
		for (size_t n = 12; n < 9000; n += n < 80 ? 1 : 997) {
			struct sv_roce_flow f, g;
			const uint8_t *pib;
			size_t plen, len;

			flow_init(&f, v6, (unsigned)n);
			fill(ib, n, (unsigned)n * 3);
			bth(ib, 0x04, (int)((4 - n % 4) % 4), (uint32_t)n, 0,
			    (uint32_t)n * 7);
			len = sv_roce_frame(frame, sizeof(frame), &f, ib, n);
			EXPECT(len == sv_roce_hdr_len(&f) + n + 4);
			EXPECT(sv_roce_parse(frame, len, &g, &pib, &plen) == 0);
			EXPECT(memcmp(&f, &g, sizeof(f)) == 0);
			EXPECT(plen == n && pib == frame + sv_roce_hdr_len(&f));
			EXPECT(memcmp(pib, ib, n) == 0);
			/* Trailing bytes (Ethernet padding) are not the packet. */
			EXPECT(sv_roce_parse(frame, len + 10, &g, &pib, &plen) == 0);
			EXPECT(plen == n);
			/* Cut short: not a packet. */
			EXPECT(sv_roce_parse(frame, len - 1, &g, &pib, &plen) ==
			       -EINVAL);
		}
}

static uint16_t csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Which bits of a frame the ICRC leaves out (Annex A17, rxe_icrc.c). */
static int masked(int v6, size_t byte, int bit)
{
	size_t ip = v6 ? 40 : 20;

	if (!v6 && (byte == 1 || byte == 8 || byte == 10 || byte == 11))
		return 1; /* TOS, TTL, header checksum */
	if (v6 && ((byte == 0 && bit < 4) || byte == 1 || byte == 2 ||
		   byte == 3 || byte == 7))
		return 1; /* traffic class, flow label, hop limit */
	if (byte == ip + 6 || byte == ip + 7)
		return 1; /* UDP checksum */
	if (byte == ip + 8 + 4)
		return 1; /* BTH resv8a */
	return 0;
}

/* Fields whose change leaves something that is not RoCE v2 to 4791 with
 * a BTH (parse: -EINVAL, not an ICRC question). */
static int structural(int v6, size_t byte)
{
	size_t ip = v6 ? 40 : 20;

	if (!v6)
		return byte == 0 || byte == 2 || byte == 3 || byte == 6 ||
		       byte == 7 || byte == 9 || byte == ip + 2 ||
		       byte == ip + 3 || byte == ip + 4 || byte == ip + 5;
	return byte == 0 || byte == 4 || byte == 5 || byte == 6 ||
	       byte == ip + 2 || byte == ip + 3 || byte == ip + 4 ||
	       byte == ip + 5;
}

static void test_masking(void)
{
	static const size_t lens[] = { 12, 13, 31, 44, 257 };

	for (int v6 = 0; v6 <= 1; v6++)
		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
			uint8_t ib[300], frame[400], m[400];
			struct sv_roce_flow f, g;
			const uint8_t *pib;
			size_t n = lens[li], len, plen;

			flow_init(&f, v6, (unsigned)(n + 100 * v6));
			fill(ib, n, 99);
			bth(ib, 0x0a, 0, 0x123456, 1, 0xabcdef);
			len = sv_roce_frame(frame, sizeof(frame), &f, ib, n);
			EXPECT(len > 0);
			for (size_t byte = 0; byte < len; byte++)
				for (int bit = 0; bit < 8; bit++) {
					int rc;

					memcpy(m, frame, len);
					m[byte] ^= (uint8_t)(1u << bit);
					/* Keep the IPv4 header checksum right,
					 * unless it is the byte under test. */
					if (!v6 && byte != 10 && byte != 11) {
						m[10] = m[11] = 0;
						uint16_t c = csum(m, 20);

						m[10] = (uint8_t)(c >> 8);
						m[11] = (uint8_t)c;
					}
					rc = sv_roce_parse(m, len, &g, &pib, &plen);
					if (!v6 && (byte == 10 || byte == 11)) {
						/* masked by the ICRC, but IPv4
						 * checks its header checksum */
						EXPECT(rc == -EINVAL);
						continue;
					}
					if (masked(v6, byte, bit)) {
						if (rc != 0)
							fprintf(stderr, "v6 %d byte %zu bit %d\n",
								v6, byte, bit);
						EXPECT(rc == 0);
					} else if (structural(v6, byte)) {
						EXPECT(rc != 0);
					} else {
						if (rc != -EBADMSG)
							fprintf(stderr, "v6 %d byte %zu bit %d: %d\n",
								v6, byte, bit, rc);
						EXPECT(rc == -EBADMSG);
					}
				}
		}
}

/* Through the flow: the masked fields leave sv_icrc alone, the others
 * change it. */
static void test_flow_fields(void)
{
	uint8_t ib[64];

	fill(ib, sizeof(ib), 5);
	bth(ib, 0x04, 0, 77, 0, 5);
	for (int v6 = 0; v6 <= 1; v6++) {
		struct sv_roce_flow f, g;
		uint32_t base;

		flow_init(&f, v6, 11);
		base = sv_icrc(&f, ib, sizeof(ib));
		g = f, g.tclass ^= 0xff;
		EXPECT(sv_icrc(&g, ib, sizeof(ib)) == base);
		g = f, g.hop_limit ^= 0x3c;
		EXPECT(sv_icrc(&g, ib, sizeof(ib)) == base);
		g = f, g.flow_label ^= 0xabcde;
		EXPECT(sv_icrc(&g, ib, sizeof(ib)) == base);
		g = f, g.sport ^= 1;
		EXPECT(sv_icrc(&g, ib, sizeof(ib)) != base);
		g = f, g.dport ^= 0x100;
		EXPECT(sv_icrc(&g, ib, sizeof(ib)) != base);
		g = f, g.sgid[15] ^= 1;
		EXPECT(sv_icrc(&g, ib, sizeof(ib)) != base);
		g = f, g.dgid[12] ^= 0x80;
		EXPECT(sv_icrc(&g, ib, sizeof(ib)) != base);
		g = f;
		EXPECT(sv_icrc(&g, ib, sizeof(ib) - 4) != base);
		ib[4] = 0xc0; /* FECN/BECN: masked */
		EXPECT(sv_icrc(&f, ib, sizeof(ib)) == base);
		ib[4] = 0;
		ib[40] ^= 1;
		EXPECT(sv_icrc(&f, ib, sizeof(ib)) != base);
		ib[40] ^= 1;
	}
}

static void test_parse_refuses(void)
{
	struct sv_roce_flow f, g;
	uint8_t ib[32], frame[128];
	const uint8_t *pib;
	size_t len, plen;

	flow_init(&f, 0, 3);
	bth(ib, 0x04, 0, 9, 0, 9);
	memset(ib + 12, 0xab, 20);
	len = sv_roce_frame(frame, sizeof(frame), &f, ib, sizeof(ib));
	EXPECT(sv_roce_parse(frame, len, &g, &pib, &plen) == 0);
	/* Another UDP port. */
	f.dport = 4789;
	len = sv_roce_frame(frame, sizeof(frame), &f, ib, sizeof(ib));
	EXPECT(sv_roce_parse(frame, len, &g, &pib, &plen) == -EINVAL);
	f.dport = SV_ROCE_PORT;
	/* No room for a BTH. */
	len = sv_roce_frame(frame, sizeof(frame), &f, ib, 11);
	EXPECT(len == 28 + 11 + 4);
	EXPECT(sv_roce_parse(frame, len, &g, &pib, &plen) == -EINVAL);
	/* Empty, garbage, IPv6 with another next header. */
	EXPECT(sv_roce_parse(frame, 0, &g, &pib, &plen) == -EINVAL);
	memset(frame, 0x55, sizeof(frame));
	EXPECT(sv_roce_parse(frame, sizeof(frame), &g, &pib, &plen) == -EINVAL);
	flow_init(&f, 1, 3);
	len = sv_roce_frame(frame, sizeof(frame), &f, ib, sizeof(ib));
	EXPECT(sv_roce_parse(frame, len, &g, &pib, &plen) == 0);
	frame[6] = 0; /* hop-by-hop options */
	EXPECT(sv_roce_parse(frame, len, &g, &pib, &plen) == -EINVAL);
	/* An IBTA packet longer than the IP length fields can carry. */
	{
		static uint8_t big[70000], out[70100];

		flow_init(&f, 0, 4);
		EXPECT(sv_roce_frame(out, sizeof(out), &f, big,
				     SV_ROCE_MAX_IB4 + 1) == 0);
		EXPECT(sv_roce_frame(out, sizeof(out), &f, big,
				     SV_ROCE_MAX_IB4) == 65535);
		flow_init(&f, 1, 4);
		EXPECT(sv_roce_frame(out, sizeof(out), &f, big,
				     SV_ROCE_MAX_IB6 + 1) == 0);
		EXPECT(sv_roce_frame(out, sizeof(out), &f, big,
				     SV_ROCE_MAX_IB6) == 65535 + 40);
	}
}

/* IPv6's UDP checksum verifies (it is computed, not left 0). */
static void test_udp6_checksum(void)
{
	for (size_t n = 12; n < 60; n++) {
		struct sv_roce_flow f;
		uint8_t ib[64], fr[128];
		uint32_t s = 0;
		size_t len, ul;

		flow_init(&f, 1, (unsigned)n);
		fill(ib, n, (unsigned)n);
		bth(ib, 0x64, 0, 1, 0, 2);
		len = sv_roce_frame(fr, sizeof(fr), &f, ib, n);
		ul = len - 40;
		for (size_t i = 8; i < 40; i += 2)
			s += (uint32_t)(fr[i] << 8 | fr[i + 1]);
		s += (uint32_t)ul + 17;
		for (size_t i = 0; i < ul; i += 2)
			s += (uint32_t)(fr[40 + i] << 8 |
					(i + 1 < ul ? fr[40 + i + 1] : 0));
		while (s >> 16)
			s = (s & 0xffff) + (s >> 16);
		EXPECT(s == 0xffff);
		EXPECT(fr[46] | fr[47]);
	}
}

/* The ICRC of a frame from the definition, over its header bytes as they
 * are (the test's own reference: masks, bitwise CRC). */
static uint32_t icrc_ref(const uint8_t *fr, size_t len)
{
	uint8_t p[256];
	uint32_t c;

	memset(p, 0xff, 8);
	memcpy(p + 8, fr, len - 4);
	p[8 + 1] = p[8 + 8] = p[8 + 10] = p[8 + 11] = 0xff;
	p[8 + 26] = p[8 + 27] = 0xff;
	p[8 + 32] = 0xff;
	c = ~crc_ref(~0u, p, 8 + len - 4);
	return c; /* little-endian host: as stored */
}

/* A receiver without the IPv4 header finds the identification and DF the
 * sender used (rxe: __ip_select_ident), and refuses a corrupt packet. */
/* A SEND of n bytes (ib, filled from seed) in flow f, and the ICRC a
 * sender that set this IPv4 identification and DF gives it
 * (icrc_ref over the whole frame). */
static uint32_t ipv4_send(const struct sv_roce_flow *f, uint8_t *ib,
			  size_t n, unsigned seed, uint16_t id, int df)
{
	uint8_t fr[256];
	size_t len;

	fill(ib, n, seed);
	bth(ib, 0x04, 0, 5, 0, 6);
	len = sv_roce_frame(fr, sizeof(fr), f, ib, n);
	fr[4] = (uint8_t)(id >> 8), fr[5] = (uint8_t)id;
	fr[6] = df ? 0x40 : 0;
	return icrc_ref(fr, len);
}

static void test_ipv4_id(void)
{
	unsigned seed = 42;
	int false_ok = 0;

	for (int t = 0; t < 400; t++) {
		struct sv_roce_flow f;
		uint8_t ib[200];
		size_t n = 12 + rnd(&seed) % 180;
		uint16_t id = (uint16_t)rnd(&seed), got;
		int df = t % 3 != 0, gdf;
		uint32_t icrc;

		flow_init(&f, 0, seed);
		icrc = ipv4_send(&f, ib, n, seed, id, df);
		EXPECT(sv_icrc_ipv4(&f, ib, n, id, df) == icrc);
		EXPECT(sv_icrc_ipv4_id(&f, ib, n, icrc, &got, &gdf) == 0);
		EXPECT(got == id && gdf == df);
		/* The receiver's one check: the same answer. */
		EXPECT(sv_icrc_check(&f, ib, n, icrc) == 0);
		/* id 0 with DF: what sv_icrc gives. */
		EXPECT(sv_icrc_ipv4_id(&f, ib, n, sv_icrc(&f, ib, n), &got,
				       &gdf) == 0);
		EXPECT(got == 0 && gdf == 1);
		EXPECT(sv_icrc_check(&f, ib, n, sv_icrc(&f, ib, n)) == 0);
		/* A corrupt payload: refused, but for 1 in 2^15. */
		ib[n - 1] ^= 0x10;
		if (sv_icrc_ipv4_id(&f, ib, n, icrc, &got, &gdf) == 0)
			false_ok++;
		if (sv_icrc_check(&f, ib, n, icrc) == 0)
			false_ok++;
	}
	EXPECT(false_ok <= 2);
	/* Packets of a few lengths in turn, as a stream's come (the
	 * solver keeps a basis per length, sv_roce.c): every one solved
	 * right, whether its length's basis was kept or made again --
	 * three lengths, then six, more than it keeps. */
	for (int kinds = 3; kinds <= 6; kinds += 3) {
		struct sv_roce_flow f;

		flow_init(&f, 0, 7);
		for (int t = 0; t < 60; t++) {
			uint8_t ib[200];
			size_t n = 16 + (size_t)(t % kinds) * 28;
			uint16_t id = (uint16_t)rnd(&seed), got;
			int df = t % 4 != 0, gdf;
			uint32_t icrc = ipv4_send(&f, ib, n, seed, id, df);

			EXPECT(sv_icrc_ipv4_id(&f, ib, n, icrc, &got, &gdf) == 0);
			EXPECT(got == id && gdf == df);
			EXPECT(sv_icrc_check(&f, ib, n, icrc) == 0);
		}
	}
	{
		struct sv_roce_flow f6;
		uint8_t ib[32] = { 0x04 };
		uint16_t got;
		int gdf;

		flow_init(&f6, 1, 1);
		EXPECT(sv_icrc_ipv4_id(&f6, ib, 32, sv_icrc(&f6, ib, 32), &got,
				       &gdf) == -EBADMSG);
		/* IPv6 has no identification: its ICRC, or nothing. */
		EXPECT(sv_icrc_check(&f6, ib, 32, sv_icrc(&f6, ib, 32)) == 0);
		EXPECT(sv_icrc_check(&f6, ib, 32, sv_icrc(&f6, ib, 32) ^ 1) ==
		       -EBADMSG);
	}
}

static void test_pcap(void)
{
	char path[] = "/tmp/test_roce_XXXXXX";
	uint8_t frame[3] = { 1, 2, 3 }, got[64];
	int fd = mkstemp(path);

	EXPECT(fd >= 0);
	unlink(path);
	EXPECT(sv_pcap_header(fd) == 0);
	EXPECT(sv_pcap_record(fd, 1700000000123456789ull, frame, 3) == 0);
	EXPECT(lseek(fd, 0, SEEK_CUR) == 24 + 16 + 3);
	EXPECT(pread(fd, got, sizeof(got), 0) == 43);
	close(fd);
	/* Magic (nanosecond pcap, little-endian), v2.4, snaplen, RAW. */
	EXPECT(memcmp(got, "\x4d\x3c\xb2\xa1\x02\x00\x04\x00", 8) == 0);
	EXPECT(memcmp(got + 16, "\x00\x00\x04\x00\x65\x00\x00\x00", 8) == 0);
	/* 1700000000 s, 123456789 ns, 3 and 3 bytes, the frame. */
	EXPECT(memcmp(got + 24, "\x00\xf1\x53\x65\x15\xcd\x5b\x07"
				"\x03\x00\x00\x00\x03\x00\x00\x00\x01\x02\x03",
		      19) == 0);
	EXPECT(sv_pcap_record(-1, 0, frame, 3) == -EBADF);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void bench(void)
{
	static uint8_t buf[1 << 20];
	struct sv_roce_flow f;
	volatile uint32_t sink = 0;
	double t;
	int i;

	fill(buf, sizeof(buf), 1);
	flow_init(&f, 0, 1);
	t = now_s();
	for (i = 0; i < 2000; i++)
		sink ^= sv_crc32_le(~0u, buf, sizeof(buf));
	printf("crc32 (dispatch%s): %.2f GB/s\n",
	       sv_crc_wide(1) ? ", 512-bit folding" : "",
	       2000.0 * sizeof(buf) / (now_s() - t) / 1e9);
	if (sv_crc_wide(0) == 0 && sv_crc_wide(1)) {
		sv_crc_wide(0);
		t = now_s();
		for (i = 0; i < 2000; i++)
			sink ^= sv_crc32_le(~0u, buf, sizeof(buf));
		printf("crc32 (128-bit folding): %.2f GB/s\n",
		       2000.0 * sizeof(buf) / (now_s() - t) / 1e9);
		sv_crc_wide(1);
	}
	t = now_s();
	for (i = 0; i < 200; i++)
		sink ^= sv_crc32_le_tables(~0u, buf, sizeof(buf));
	printf("crc32 (slicing-by-8): %.2f GB/s\n", 200.0 * sizeof(buf) / (now_s() - t) / 1e9);
	{
		uint16_t id;
		int df, iters = 200000;
		uint32_t ic = sv_icrc(&f, buf, 1024);

		t = now_s();
		for (i = 0; i < iters; i++)
			sink ^= (uint32_t)sv_icrc_ipv4_id(&f, buf, 1024, ic, &id, &df);
		printf("sv_icrc_ipv4_id 1024 B: %.0f ns/packet\n",
		       (now_s() - t) / iters * 1e9);
	}
	for (size_t n = 64; n <= 4096; n *= 4) {
		int iters = (int)(400000000 / n);

		t = now_s();
		for (i = 0; i < iters; i++)
			sink ^= sv_icrc(&f, buf + (i & 1023), n);
		t = now_s() - t;
		printf("sv_icrc %4zu B: %.0f ns/packet, %.2f GB/s\n", n,
		       t / iters * 1e9, (double)iters * n / t / 1e9);
	}
	(void)sink;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--bench")) {
		bench();
		return 0;
	}
	test_crc();
	test_known_answer();
	test_round_trip();
	test_icrc_pieces();
	test_masking();
	test_flow_fields();
	test_parse_refuses();
	test_udp6_checksum();
	test_ipv4_id();
	test_pcap();
	if (failures) {
		fprintf(stderr, "test_roce: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_roce: ok\n");
	return 0;
}

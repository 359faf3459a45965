/* SPDX-License-Identifier: MIT */
/*
 * RoCE v2 encapsulation and the ICRC (sv_roce.h; IBTA Annex A17).
 *
 * The ICRC runs on every packet that crosses the wire, twice (sender and
 * receiver), so its speed is the wire's: a plain byte-at-a-time CRC
 * (~0.4 GB/s) would cap a link below what the kernel's UDP path moves.
 * Two implementations of the same function, chosen once:
 *   - carry-less multiplication (PCLMULQDQ, x86-64): the data is folded
 *     128 bits at a time, four lanes in parallel, then reduced (the
 *     method of Intel's "Fast CRC Computation for Generic Polynomials
 *     Using PCLMULQDQ"); the folding constants are x^n mod P for the
 *     fold distances, computed here from the polynomial at start.  On
 *     CPUs with VPCLMULQDQ and AVX-512 the bulk of a buffer of 256 bytes
 *     or more is folded 512 bits per instruction, four registers in
 *     parallel (vclmul_bulk), about twice as fast again;
 *   - slicing-by-8 tables (8 x 256 entries, computed at start) everywhere
 *     else and for short tails.
 * The unit test checks both against a bitwise reference on every length
 * and alignment it tries; bench/ (test_roce --bench) measures them.
 */
#include "sv_roce.h"
#include "sv_hdr.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define SV_HAVE_CLMUL 1
#endif

#define CRC_POLY 0xedb88320u /* x^32 + ... reflected (IEEE 802.3) */

static uint32_t crc_tab[8][256];

/* Folding constants for the PCLMUL path (see fold_constants()). */
static uint64_t k_fold16[2], k_fold4[2], k_fold3[2], k_fold2[2], k_fold1[2],
	k_fold64, k_barrett[2];
static int use_clmul, use_vclmul, has_vclmul;

/* --------------------------------------------------------- tables -- */

static void make_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (CRC_POLY & (0u - (c & 1)));
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^
					crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

static uint32_t crc_slice8(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
		n--;
	}
	while (n >= 8) {
		uint32_t lo, hi;

		memcpy(&lo, p, 4);
		memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		lo = __builtin_bswap32(lo);
		hi = __builtin_bswap32(hi);
#endif
		lo ^= crc;
		crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		      crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^
		      crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
		      crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
	return crc;
}

/* ---------------------------------------------------------- clmul -- */

#ifdef SV_HAVE_CLMUL
/*
 * In the reflected domain a 32-bit CRC register stands for the
 * polynomial whose x^0 coefficient is bit 31 and x^31 bit 0; xpow(n) is
 * x^n mod P in that form.  Shifted left by one (a carry-less product of
 * reflected operands comes out one bit short), x^(d+32) mod P and
 * x^(d-32) mod P are the pair that folds a 128-bit lane d bits further
 * along: the high and the low 64 bits of the lane land, multiplied, on
 * the lane d bits ahead, which is then XORed in.
 */
static uint32_t xpow(unsigned n)
{
	uint32_t r = 0x80000000u; /* x^0 */

	while (n--)
		r = (r >> 1) ^ (CRC_POLY & (0u - (r & 1)));
	return r;
}

/* floor(x^64 / P) reflected into 33 bits: the Barrett reduction's mu.
 * Long division in the normal domain (P = 0x104c11db7), one bit of the
 * dividend x^64 at a time. */
static uint64_t barrett_mu(void)
{
	const uint64_t poly = 0x104c11db7ull;
	uint64_t q = 0, rem = 0, r = 0;

	for (int bit = 64; bit >= 0; bit--) {
		rem = (rem << 1) | (bit == 64);
		q <<= 1;
		if (rem & (1ull << 32)) {
			rem ^= poly;
			q |= 1;
		}
	}
	for (int i = 0; i < 33; i++)
		if (q & (1ull << i))
			r |= 1ull << (32 - i);
	return r;
}

static void fold_constants(void)
{
	/* Four lanes of 512 bits (VPCLMULQDQ): fold distance 2048 bits. */
	k_fold16[0] = (uint64_t)xpow(16 * 128 + 32) << 1;
	k_fold16[1] = (uint64_t)xpow(16 * 128 - 32) << 1;
	/* Four lanes of 128 bits: fold distance 512 bits (low, high). */
	k_fold4[0] = (uint64_t)xpow(4 * 128 + 32) << 1;
	k_fold4[1] = (uint64_t)xpow(4 * 128 - 32) << 1;
	/* The lanes of one 512-bit register onto its last: 384, 256 bits. */
	k_fold3[0] = (uint64_t)xpow(3 * 128 + 32) << 1;
	k_fold3[1] = (uint64_t)xpow(3 * 128 - 32) << 1;
	k_fold2[0] = (uint64_t)xpow(2 * 128 + 32) << 1;
	k_fold2[1] = (uint64_t)xpow(2 * 128 - 32) << 1;
	/* One lane: 128 bits. */
	k_fold1[0] = (uint64_t)xpow(128 + 32) << 1;
	k_fold1[1] = (uint64_t)xpow(128 - 32) << 1;
	/* 96 -> 64 bits. */
	k_fold64 = (uint64_t)xpow(64) << 1;
	k_barrett[0] = ((uint64_t)CRC_POLY << 1) | 1; /* P reflected, 33 bits */
	k_barrett[1] = barrett_mu();
}

__attribute__((target("pclmul,sse4.1"))) static inline __m128i
fold(__m128i acc, __m128i k, __m128i data)
{
	__m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
	__m128i hi = _mm_clmulepi64_si128(acc, k, 0x11);

	return _mm_xor_si128(_mm_xor_si128(lo, hi), data);
}

#define KPAIR(k) _mm_set_epi64x((long long)(k)[1], (long long)(k)[0])

/*
 * The same folding, 512 bits per instruction (VPCLMULQDQ with AVX-512:
 * four 128-bit lanes each), four registers in parallel, for the bulk of
 * a long buffer (n >= 256).  Returns the 128-bit remainder to go on with
 * and advances *pp, *pn past what it took (a multiple of 256 bytes).
 */
__attribute__((target("pclmul,sse4.1,avx512f,avx512vl,vpclmulqdq"))) static __m128i
vclmul_bulk(uint32_t crc, const uint8_t **pp, size_t *pn)
{
	const uint8_t *p = *pp;
	size_t n = *pn;
	__m512i k = _mm512_broadcast_i32x4(KPAIR(k_fold16)), x[4];
	__m128i l[4], r;

	for (int i = 0; i < 4; i++)
		x[i] = _mm512_loadu_si512((const void *)(p + 64 * i));
	x[0] = _mm512_xor_si512(x[0], _mm512_zextsi128_si512(
					      _mm_cvtsi32_si128((int)crc)));
	p += 256;
	n -= 256;
	for (; n >= 256; p += 256, n -= 256)
		for (int i = 0; i < 4; i++)
			x[i] = _mm512_ternarylogic_epi64(
				_mm512_clmulepi64_epi128(x[i], k, 0x00),
				_mm512_clmulepi64_epi128(x[i], k, 0x11),
				_mm512_loadu_si512((const void *)(p + 64 * i)),
				0x96); /* a ^ b ^ c */
	/* Four registers into one (512 bits apart), then its four lanes
	 * onto the last (384, 256 and 128 bits apart). */
	k = _mm512_broadcast_i32x4(KPAIR(k_fold4));
	for (int i = 1; i < 4; i++)
		x[0] = _mm512_ternarylogic_epi64(
			_mm512_clmulepi64_epi128(x[0], k, 0x00),
			_mm512_clmulepi64_epi128(x[0], k, 0x11), x[i], 0x96);
	l[0] = _mm512_extracti32x4_epi32(x[0], 0);
	l[1] = _mm512_extracti32x4_epi32(x[0], 1);
	l[2] = _mm512_extracti32x4_epi32(x[0], 2);
	l[3] = _mm512_extracti32x4_epi32(x[0], 3);
	r = fold(l[0], KPAIR(k_fold3), l[3]);
	r = fold(l[1], KPAIR(k_fold2), r);
	r = fold(l[2], KPAIR(k_fold1), r);
	*pp = p;
	*pn = n;
	return r;
}

/* n >= 16 and a multiple of 16.  Returns the register after p[0..n). */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc_clmul(uint32_t crc, const uint8_t *p, size_t n)
{
	__m128i k4 = KPAIR(k_fold4);
	__m128i k1 = KPAIR(k_fold1);
	__m128i x0, x1, x2, x3, t;

	if (use_vclmul && n >= 256) {
		x0 = vclmul_bulk(crc, &p, &n);
	} else if (n >= 64) {
		x0 = _mm_loadu_si128((const __m128i *)p);
		x1 = _mm_loadu_si128((const __m128i *)(p + 16));
		x2 = _mm_loadu_si128((const __m128i *)(p + 32));
		x3 = _mm_loadu_si128((const __m128i *)(p + 48));
		x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)crc));
		p += 64;
		n -= 64;
		while (n >= 64) {
			x0 = fold(x0, k4, _mm_loadu_si128((const __m128i *)p));
			x1 = fold(x1, k4,
				  _mm_loadu_si128((const __m128i *)(p + 16)));
			x2 = fold(x2, k4,
				  _mm_loadu_si128((const __m128i *)(p + 32)));
			x3 = fold(x3, k4,
				  _mm_loadu_si128((const __m128i *)(p + 48)));
			p += 64;
			n -= 64;
		}
		/* Four lanes into one. */
		x0 = fold(x0, k1, x1);
		x0 = fold(x0, k1, x2);
		x0 = fold(x0, k1, x3);
	} else {
		x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p),
				   _mm_cvtsi32_si128((int)crc));
		p += 16;
		n -= 16;
	}
	while (n >= 16) {
		x0 = fold(x0, k1, _mm_loadu_si128((const __m128i *)p));
		p += 16;
		n -= 16;
	}
	/* 128 -> 96 bits: the low half, multiplied, onto the high half. */
	t = _mm_clmulepi64_si128(x0, k1, 0x10);
	x0 = _mm_xor_si128(_mm_srli_si128(x0, 8), t);
	/* 96 -> 64 bits. */
	t = _mm_and_si128(x0, _mm_set_epi32(0, 0, 0, -1));
	t = _mm_clmulepi64_si128(t, _mm_set_epi64x(0, (long long)k_fold64), 0x00);
	x0 = _mm_xor_si128(_mm_srli_si128(x0, 4), t);
	/* Barrett: 64 -> 32 bits. */
	{
		__m128i kb = _mm_set_epi64x((long long)k_barrett[1],
					    (long long)k_barrett[0]);
		__m128i m32 = _mm_set_epi32(0, 0, 0, -1);

		t = _mm_and_si128(x0, m32);
		t = _mm_clmulepi64_si128(t, kb, 0x10);
		t = _mm_and_si128(t, m32);
		t = _mm_clmulepi64_si128(t, kb, 0x00);
		x0 = _mm_xor_si128(x0, t);
	}
	return (uint32_t)_mm_extract_epi32(x0, 1);
}
#endif

static void make_x2n(void); /* below, with its users */

__attribute__((constructor)) static void crc_init(void)
{
	make_tables();
	make_x2n();
#ifdef SV_HAVE_CLMUL
	fold_constants();
	__builtin_cpu_init();
	use_clmul = __builtin_cpu_supports("pclmul") &&
		    __builtin_cpu_supports("sse4.1");
	use_vclmul = use_clmul && __builtin_cpu_supports("avx512f") &&
		     __builtin_cpu_supports("avx512vl") &&
		     __builtin_cpu_supports("vpclmulqdq");
	has_vclmul = use_vclmul;
#endif
}

uint32_t sv_crc32_le(uint32_t crc, const void *data, size_t n)
{
	const uint8_t *p = data;

#ifdef SV_HAVE_CLMUL
	if (use_clmul && n >= 16) {
		size_t bulk = n & ~(size_t)15;

		crc = crc_clmul(crc, p, bulk);
		p += bulk;
		n -= bulk;
	}
#endif
	return crc_slice8(crc, p, n);
}

int sv_crc_wide(int on)
{
	use_vclmul = on && has_vclmul;
	return use_vclmul;
}

uint32_t sv_crc32_le_tables(uint32_t crc, const void *p, size_t n)
{
	return crc_slice8(crc, p, n);
}

/* ----------------------------------------------------------- ICRC -- */

/* The masked IP and UDP headers, as rxe_icrc_hdr builds them.
 * IPv4: TOS, TTL and the header checksum all ones.
 * IPv6: traffic class, flow label and hop limit all ones.
 * UDP: the checksum all ones.
 * (BTH: resv8a, the byte before DestQP, all ones: see icrc_of.) */
static void mask_hdr(uint8_t *h, int ipv6)
{
	if (!ipv6) {
		h[1] = 0xff;	       /* TOS */
		h[8] = 0xff;	       /* TTL */
		h[10] = h[11] = 0xff;  /* header checksum */
		h[SV_ROCE_IP4_HDR + 6] = h[SV_ROCE_IP4_HDR + 7] = 0xff;
	} else {
		h[0] |= 0x0f;	       /* traffic class, high nibble */
		h[1] = h[2] = h[3] = 0xff; /* traffic class low, flow label */
		h[7] = 0xff;	       /* hop limit */
		h[SV_ROCE_IP6_HDR + 6] = h[SV_ROCE_IP6_HDR + 7] = 0xff;
	}
}

/* The CRC register after the 8 bytes of 0xff that stand for the LRH,
 * from the initial all ones: the value rxe seeds with. */
#define ICRC_SEED 0xdebb20e3u

/* ICRC of a packet whose IP and UDP headers (hl bytes) are at the start
 * of hdr, which has room for a BTH after them: masks them in place,
 * appends the BTH with resv8a masked (FECN, BECN and reserved bits on
 * RoCE), and returns the value stored little-endian after the packet. */
static uint32_t icrc_of(uint8_t *hdr, size_t hl, int ipv6, const uint8_t *ib,
			size_t ib_len)
{
	size_t b = ib_len < 12 ? ib_len : 12;
	uint32_t crc;

	mask_hdr(hdr, ipv6);
	memcpy(hdr + hl, ib, b);
	if (b == 12)
		hdr[hl + 4] = 0xff;
	crc = sv_crc32_le(ICRC_SEED, hdr, hl + b);
	return sv_icrc_end(sv_crc32_le(crc, ib + b, ib_len - b));
}

uint32_t sv_icrc_end(uint32_t crc)
{
	crc = ~crc;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	crc = __builtin_bswap32(crc); /* its bytes go out least significant first */
#endif
	return crc;
}

size_t sv_roce_hdr_len(const struct sv_roce_flow *f)
{
	return (f->ipv6 ? SV_ROCE_IP6_HDR : SV_ROCE_IP4_HDR) + SV_ROCE_UDP_HDR;
}

/* Writes the IP header of f for a UDP datagram of udp_len bytes into h
 * (IPv4: identification 0, DF, checksum 0; IPv6: the GRH's layout);
 * returns its length. */
static size_t ip_hdr(uint8_t *h, const struct sv_roce_flow *f, size_t udp_len)
{
	if (!f->ipv6) {
		ip4_set(h, f->tclass, (uint16_t)(SV_ROCE_IP4_HDR + udp_len), 0,
			1, f->hop_limit, f->sgid + 12, f->dgid + 12);
		return SV_ROCE_IP4_HDR;
	}
	grh_set(h, f->tclass, f->flow_label & 0xfffff, (uint16_t)udp_len,
		f->hop_limit, f->sgid, f->dgid);
	return SV_ROCE_IP6_HDR;
}

/* Writes the IP and UDP headers of a frame carrying ib_len IBTA bytes
 * (checksums 0) into h; returns their length. */
static size_t build_hdr(uint8_t *h, const struct sv_roce_flow *f,
			size_t ib_len)
{
	size_t udp_len = SV_ROCE_UDP_HDR + ib_len + SV_ICRC_BYTES;
	size_t ip = ip_hdr(h, f, udp_len);

	udp_set(h + ip, f->sport, f->dport, (uint16_t)udp_len);
	return ip + SV_ROCE_UDP_HDR;
}

void sv_roce_ip4_hdr(uint8_t *h, const struct sv_roce_flow *f, size_t udp_len)
{
	ip_hdr(h, f, udp_len);
	ip4_set_csum(h);
}

void sv_roce_grh_flow(const uint8_t *grh, struct sv_roce_flow *f)
{
	memset(f, 0, sizeof(*f));
	f->tclass = __grh_tclass(grh);
	f->flow_label = __grh_flow(grh);
	f->hop_limit = __grh_hop(grh);
	memcpy(f->sgid, grh_sgid(grh), 16);
	memcpy(f->dgid, grh_dgid(grh), 16);
	f->ipv6 = !(sv_gid_is_v4(f->sgid) && sv_gid_is_v4(f->dgid));
}

static int ib_len_fits(const struct sv_roce_flow *f, size_t ib_len)
{
	return ib_len <= (f->ipv6 ? SV_ROCE_MAX_IB6 : SV_ROCE_MAX_IB4);
}

uint32_t sv_icrc(const struct sv_roce_flow *f, const void *ib, size_t ib_len)
{
	uint8_t h[SV_ROCE_IP6_HDR + SV_ROCE_UDP_HDR + 12];
	size_t hl = build_hdr(h, f, ib_len);

	return icrc_of(h, hl, f->ipv6, ib, ib_len);
}

/* ------------------------------------------- unknown IPv4 identification -- */

/*
 * Over GF(2), the CRC register is linear in the message: flipping bits at
 * byte offset o of an n-byte message XORs the register with the register
 * those bits alone give, carried through the n - o - 1 bytes after them,
 * i.e. multiplied by x^(8(n-o-1)) mod P.  mulmod multiplies two registers
 * (reflected: bit 31 is x^0); x2n[k] = x^(2^k) mod P builds any power.
 */
static uint32_t x2n[32];

static uint32_t mulmod(uint32_t a, uint32_t b)
{
	uint32_t p = 0;

	for (uint32_t m = 0x80000000u; m; m >>= 1) {
		if (a & m)
			p ^= b;
		b = (b >> 1) ^ (CRC_POLY & (0u - (b & 1))); /* b *= x */
	}
	return p;
}

static void make_x2n(void)
{
	x2n[0] = 0x40000000u; /* x^1 */
	for (int k = 1; k < 32; k++)
		x2n[k] = mulmod(x2n[k - 1], x2n[k - 1]);
}

/* x^(8 n) mod P: the effect of n zero bytes. */
static uint32_t zeros(size_t n)
{
	uint32_t r = 0x80000000u; /* x^0 */
	uint64_t e = (uint64_t)n * 8;

	for (int k = 0; e; k++, e >>= 1)
		if (e & 1)
			r = mulmod(r, x2n[k]);
	return r;
}

/* The reduced basis for one packet length: pivot[b] is a combination of
 * identification bits (tag) whose effect has bit b as its highest. */
struct id_basis {
	size_t ib_len;
	uint32_t df; /* the effect of the DF bit */
	uint32_t v[32];
	uint16_t tag[32];
	uint8_t valid;
};

static void basis_make(struct id_basis *B, size_t ib_len)
{
	/* Offsets in the pseudo packet after the seed: identification at
	 * bytes 4-5 of the IPv4 header, DF in byte 6; n bytes in all. */
	size_t n = SV_ROCE_IP4_HDR + SV_ROCE_UDP_HDR + ib_len;
	uint32_t z5 = zeros(n - 5 - 1), z4 = mulmod(z5, x2n[3]);

	memset(B, 0, sizeof(*B));
	B->ib_len = ib_len;
	B->df = mulmod(crc_tab[0][0x40], zeros(n - 6 - 1));
	for (int i = 0; i < 16; i++) {
		/* tag bit i: bit i of the 16-bit identification */
		uint32_t v = i < 8 ? mulmod(crc_tab[0][1u << i], z5) :
				     mulmod(crc_tab[0][1u << (i - 8)], z4);
		uint16_t tag = (uint16_t)(1u << i);

		for (int b = 31; b >= 0 && v; b--) {
			if (!(v >> b & 1))
				continue;
			if (!B->v[b]) {
				B->v[b] = v;
				B->tag[b] = tag;
				break;
			}
			v ^= B->v[b];
			tag ^= B->tag[b];
		}
	}
	B->valid = 1;
}

/* The identification whose effect is d, or -1. */
static int basis_solve(const struct id_basis *B, uint32_t d)
{
	uint16_t x = 0;

	for (int b = 31; b >= 0; b--) {
		if (!(d >> b & 1))
			continue;
		if (!B->v[b])
			return -1;
		d ^= B->v[b];
		x ^= B->tag[b];
	}
	return x;
}

/* The bases a thread made last, one per length: a message's packets
 * come in two or three lengths (full ones, a shorter last one, a first
 * one with a RETH), and a basis costs far more to make than to use --
 * with one, a stream of 16 KiB SENDs (libfabric's rxm) made one for
 * every second packet, 6% of its receiver's time. */
#define ID_BASES 4

/* sv_icrc_ipv4_id given c0, the packet's sv_icrc (identification 0,
 * DF): the CRC is not computed again. */
static int solve_id(const struct sv_roce_flow *f, size_t ib_len, uint32_t c0,
		    uint32_t icrc, uint16_t *id, int *df)
{
	static __thread struct id_basis bases[ID_BASES];
	static __thread unsigned next;
	struct id_basis *B = NULL;
	uint32_t want, d;
	int x;

	if (f->ipv6 || !ib_len_fits(f, ib_len))
		return -EBADMSG;
	for (int i = 0; i < ID_BASES && !B; i++)
		if (bases[i].valid && bases[i].ib_len == ib_len)
			B = &bases[i];
	if (!B) {
		B = &bases[next++ % ID_BASES];
		basis_make(B, ib_len);
	}
	/* Registers before the final inversion, in host order. */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	c0 = __builtin_bswap32(c0);
	icrc = __builtin_bswap32(icrc);
#endif
	c0 = ~c0;
	want = ~icrc;
	d = c0 ^ want;
	x = basis_solve(B, d);
	if (x >= 0) {
		*id = (uint16_t)x;
		*df = 1;
		return 0;
	}
	x = basis_solve(B, d ^ B->df);
	if (x >= 0) {
		*id = (uint16_t)x;
		*df = 0;
		return 0;
	}
	return -EBADMSG;
}

int sv_icrc_ipv4_id(const struct sv_roce_flow *f, const void *ib,
		    size_t ib_len, uint32_t icrc, uint16_t *id, int *df)
{
	if (f->ipv6 || !ib_len_fits(f, ib_len))
		return -EBADMSG;
	return solve_id(f, ib_len, sv_icrc(f, ib, ib_len), icrc, id, df);
}

int sv_icrc_check(const struct sv_roce_flow *f, const void *ib, size_t ib_len,
		  uint32_t icrc)
{
	uint32_t c0 = sv_icrc(f, ib, ib_len);
	uint16_t id;
	int df;

	if (c0 == icrc)
		return 0;
	return f->ipv6 ? -EBADMSG : solve_id(f, ib_len, c0, icrc, &id, &df);
}

uint32_t sv_icrc_ipv4(const struct sv_roce_flow *f, const void *ib,
		      size_t ib_len, uint16_t id, int df)
{
	uint8_t h[SV_ROCE_IP6_HDR + SV_ROCE_UDP_HDR + 12];
	size_t hl = build_hdr(h, f, ib_len);

	if (!f->ipv6) {
		st_be16(h + 4, id);
		st_be16(h + 6, df ? SV_IP4_DF : 0);
	}
	return icrc_of(h, hl, f->ipv6, ib, ib_len);
}

uint32_t sv_icrc_start(const struct sv_roce_flow *f, const void *ib,
		       size_t hl, size_t ib_len, uint16_t id)
{
	uint8_t h[SV_ROCE_IP6_HDR + SV_ROCE_UDP_HDR + 12];
	size_t pl = build_hdr(h, f, ib_len);
	uint32_t crc;

	if (!f->ipv6) {
		st_be16(h + 4, id);
		st_be16(h + 6, SV_IP4_DF);
	}
	mask_hdr(h, f->ipv6);
	memcpy(h + pl, ib, 12);
	h[pl + 4] = 0xff;
	crc = sv_crc32_le(ICRC_SEED, h, pl + 12);
	return sv_crc32_le(crc, (const uint8_t *)ib + 12, hl - 12);
}

size_t sv_roce_frame(void *out, size_t cap, const struct sv_roce_flow *f,
		     const void *ib, size_t ib_len)
{
	uint8_t *o = out;
	size_t hl = sv_roce_hdr_len(f);
	size_t len = hl + ib_len + SV_ICRC_BYTES;
	uint8_t h[SV_ROCE_IP6_HDR + SV_ROCE_UDP_HDR + 12];
	uint32_t icrc;

	if (!ib_len_fits(f, ib_len) || cap < len)
		return 0;
	build_hdr(o, f, ib_len);
	memcpy(h, o, hl);
	icrc = icrc_of(h, hl, f->ipv6, ib, ib_len);
	memcpy(o + hl, ib, ib_len);
	memcpy(o + hl + ib_len, &icrc, SV_ICRC_BYTES);
	if (!f->ipv6) {
		ip4_set_csum(o);
	} else {
		/* Pseudo-header: addresses, upper-layer length, next header. */
		size_t ul = len - SV_ROCE_IP6_HDR;
		uint32_t sum = inet_csum_add(0, o + 8, 32);
		uint16_t c;

		sum += (uint32_t)ul + 17;
		sum = inet_csum_add(sum, o + SV_ROCE_IP6_HDR, ul);
		c = inet_csum_fold(sum);
		/* UDP checksum: 0 is sent as all ones (RFC 768). */
		st_be16(o + SV_ROCE_IP6_HDR + 6, c ? c : 0xffff);
	}
	return len;
}

int sv_roce_parse(const void *frame, size_t len, struct sv_roce_flow *f,
		  const uint8_t **ib, size_t *ib_len)
{
	const uint8_t *p = frame;
	uint8_t h[SV_ROCE_IP6_HDR + SV_ROCE_UDP_HDR + 12];
	const uint8_t *u;
	size_t ip, total, udp_len, n;
	uint32_t icrc, got;

	if (len < 1)
		return -EINVAL;
	memset(f, 0, sizeof(*f));
	if (__grh_ipver(p) == 4) {
		ip = SV_ROCE_IP4_HDR;
		if (len < ip + SV_ROCE_UDP_HDR || p[0] != 0x45 ||
		    __ip4_proto(p) != 17)
			return -EINVAL; /* options, or not UDP */
		if (__ip4_frag(p) & 0x3fff)
			return -EINVAL; /* a fragment (MF or an offset) */
		if (inet_csum_fold(inet_csum_add(0, p, ip)) != 0)
			return -EINVAL;
		total = __ip4_tot_len(p);
		f->tclass = __ip4_tos(p);
		f->hop_limit = __ip4_ttl(p);
		sv_gid_set_v4(f->sgid, ip4_saddr(p));
		sv_gid_set_v4(f->dgid, ip4_daddr(p));
	} else if (__grh_ipver(p) == 6) {
		ip = SV_ROCE_IP6_HDR;
		if (len < ip + SV_ROCE_UDP_HDR || __grh_nxthdr(p) != 17)
			return -EINVAL; /* extension headers, or not UDP */
		total = ip + __grh_paylen(p);
		f->ipv6 = 1;
		f->tclass = __grh_tclass(p);
		f->flow_label = __grh_flow(p);
		f->hop_limit = __grh_hop(p);
		memcpy(f->sgid, grh_sgid(p), 16);
		memcpy(f->dgid, grh_dgid(p), 16);
	} else {
		return -EINVAL;
	}
	u = p + ip;
	udp_len = __udp_len(u);
	if (total > len || total < ip + SV_ROCE_UDP_HDR ||
	    udp_len != total - ip)
		return -EINVAL;
	f->sport = __udp_sport(u);
	f->dport = __udp_dport(u);
	if (f->dport != SV_ROCE_PORT)
		return -EINVAL;
	if (udp_len < SV_ROCE_UDP_HDR + 12 + SV_ICRC_BYTES)
		return -EINVAL; /* no room for a BTH and the ICRC */
	n = udp_len - SV_ROCE_UDP_HDR - SV_ICRC_BYTES;
	memcpy(h, p, ip + SV_ROCE_UDP_HDR);
	icrc = icrc_of(h, ip + SV_ROCE_UDP_HDR, f->ipv6, u + SV_ROCE_UDP_HDR, n);
	memcpy(&got, u + SV_ROCE_UDP_HDR + n, SV_ICRC_BYTES);
	if (got != icrc)
		return -EBADMSG;
	*ib = u + SV_ROCE_UDP_HDR;
	*ib_len = n;
	return 0;
}

/* ----------------------------------------------------------- pcap -- */

void sv_pcap_file_hdr(void *out)
{
	uint8_t *h = out;

	/* Written little-endian with the magic to match: readers swap by
	 * the magic they find. */
	st_le32(h, SV_PCAP_MAGIC_NS);
	h[4] = 2, h[5] = 0; /* version 2.4 */
	h[6] = 4, h[7] = 0;
	st_le32(h + 8, 0);   /* thiszone */
	st_le32(h + 12, 0);  /* sigfigs */
	st_le32(h + 16, SV_PCAP_SNAPLEN);
	st_le32(h + 20, SV_PCAP_LINKTYPE_RAW);
}

void sv_pcap_rec_hdr(void *out, uint64_t ts_ns, size_t len)
{
	uint8_t *h = out;

	st_le32(h, (uint32_t)(ts_ns / 1000000000u));
	st_le32(h + 4, (uint32_t)(ts_ns % 1000000000u));
	st_le32(h + 8, (uint32_t)len);
	st_le32(h + 12, (uint32_t)len);
}

/* Writes every byte of iov (retrying after partial writes and EINTR). */
static int write_all(int fd, struct iovec *iov, int cnt)
{
	while (cnt) {
		ssize_t n = writev(fd, iov, cnt);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (cnt && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int sv_pcap_header(int fd)
{
	uint8_t h[SV_PCAP_FILE_HDR];
	struct iovec iov = { h, sizeof(h) };

	sv_pcap_file_hdr(h);
	return write_all(fd, &iov, 1);
}

int sv_pcap_record(int fd, uint64_t ts_ns, const void *frame, size_t len)
{
	uint8_t h[SV_PCAP_REC_HDR];
	struct iovec iov[2] = { { h, sizeof(h) }, { (void *)frame, len } };

	if (len > SV_PCAP_SNAPLEN)
		return -EINVAL;
	sv_pcap_rec_hdr(h, ts_ns, len);
	return write_all(fd, iov, 2);
}

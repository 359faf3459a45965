/* SPDX-License-Identifier: MIT */
/*
 * A stateful RC fuzzer on the wire (docs/wire.md "Hostile packets").
 * Host A (this process) has a RC QP connected to a fake peer on host B
 * (wire_fake.h: this test's UDP sockets in B's namespace).  For
 * SV_FUZZ_SECONDS (default 5) the peer sends it random but well-formed
 * RoCE v2 packets, with right ICRCs, in bursts: every RC opcode of IBTA
 * table 39 with its extension headers (RETH, AtomicETH, AETH,
 * AtomicAckETH, ImmDt, IETH), a few opcodes of other transports and some
 * that no table has, whose fields are drawn at random: PSNs mostly near
 * the one the victim expects, rkeys valid, of a weaker MR or made up,
 * addresses inside, across and outside the MRs, any DMA length, payloads
 * up to and beyond the MTU, any pad count; whole valid messages now and
 * then, some cut short; answers to the victim's own requests (SENDs,
 * WRITEs, READs, atomics it posts meanwhile), right or wrong; and a few
 * packets from a stranger's address, a wrong ICRC or a transport version
 * that is not 0.
 *
 * Staying in RTS.  Each burst ends with a duplicate SEND asking for an
 * ACK, which the victim answers with its expected PSN minus one; every
 * answer it sends moves our idea of that PSN forward (never past it).  A
 * packet the victim must refuse fatally (C9-xx class B/C/J) moves the QP
 * to ERR, as it should: then the QP goes RESET -> INIT -> RTR -> RTS with
 * new PSNs, timers and rights, its receives posted again, and once a
 * duplicate SEND's ACK shows that all the old epoch sent has come, the
 * fuzz goes on; the resets are counted.
 *
 * What must hold:
 *  - the process survives (the sanitizer build: no ASan or UBSan report);
 *  - memory nobody was granted is unchanged: the guard pages around the
 *    MRs, the whole of the weaker MR (remote READ only), the bytes of our
 *    local MR outside every SGE posted, the sources of our own SENDs and
 *    WRITEs, and all of A while the QP has neither remote WRITE nor
 *    atomic rights; nothing the stranger sent lands anywhere;
 *  - every READ response the victim sends carries bytes a READ of ours
 *    asked for at its PSN, from inside the MR its rkey names (those of
 *    the weaker MR as they are), and none comes from a QP without remote
 *    READ;
 *  - a READ of the victim's that completes with success has all its
 *    bytes; a receive completion never says more than its SGEs hold;
 *  - every packet the victim sends has a right ICRC and is for the peer;
 *  - every RC opcode went out;
 *  - the daemon is the same process and holds the objects and
 *    descriptors it held before the fuzz, and after the victim closes,
 *    those it held before the victim opened; the victim holds the
 *    descriptors it held before, and its heap has not grown with the
 *    packets (the sanitizer build: LeakSanitizer finds no leak);
 *  - afterwards a legitimate exchange both ways works: a SEND, a WRITE
 *    and a READ to the victim, a SEND, a READ and an atomic from it.
 *
 * The fuzzer's findings, each a case of its own below, with the packets
 * that showed it.
 *
 * The packet and seed counts are printed.  SV_FUZZ_SEED replays the
 * choices (the victim's timing still varies); SV_FUZZ_TRACE=file writes
 * every packet both ways, in hex, to reproduce a finding by hand.
 */
#include "wire_fake.h"

#include <dirent.h>
#include <malloc.h>

#define PG 4096u

/*
 * The victim's buffer, one allocation, guard pages between the MRs:
 *
 * | range  | what                                                     |
 * |--------|----------------------------------------------------------|
 * | G0     | guard                                                    |
 * | A      | MR: local write, remote write, read and atomic           |
 * | G1     | guard                                                    |
 * | W      | MR: remote read only (the weaker rkey)                   |
 * | G2     | guard                                                    |
 * | L      | MR: local write only, for our own work requests:         |
 * |        |  NRECV receive slots (SGEs [0, 1536) and [2048, 3584)),   |
 * |        |  NREAD READ targets ([0, READ_MAX)), NATOM atomic        |
 * |        |  results ([0, 8)), and the source of our SENDs/WRITEs    |
 * | G3     | guard                                                    |
 */
#define OFF_A PG
#define LEN_A (16u * 1024)
#define OFF_W (OFF_A + LEN_A + PG)
#define LEN_W (8u * 1024)
#define OFF_L (OFF_W + LEN_W + PG)
#define NRECV 16
#define RSLOT 4096u
#define RSGE 1536u
#define RSGE2 2048u /* where a receive's second SGE starts in its slot */
#define NREAD 4
#define READ_SLOT 4096u
#define READ_MAX 3072u
#define NATOM 4
#define ATOM_SLOT 64u
#define OFF_RECV OFF_L
#define OFF_READ (OFF_RECV + NRECV * RSLOT)
#define OFF_ATOM (OFF_READ + NREAD * READ_SLOT)
#define OFF_SRC (OFF_ATOM + PG)
#define LEN_SRC (4u * 1024)
#define LEN_L (OFF_SRC + LEN_SRC - OFF_L)
#define VBUF (OFF_L + LEN_L + PG)

/* What a READ target holds until a response writes it. */
#define UNREAD 0xee

/* What the stranger's payloads start with: found nowhere, ever. */
static const uint8_t MARK[8] = { 0x5a, 0xa5, 'S', 'T', 'R', 'A', 'N', 'G' };

/* ------------------------------------------------------------ random -- */

static uint64_t rs, seed;

static uint32_t rnd(void)
{
	rs ^= rs >> 12;
	rs ^= rs << 25;
	rs ^= rs >> 27;
	return (uint32_t)((rs * 0x2545f4914f6cdd1dull) >> 32);
}

static uint32_t below(uint32_t n) { return n ? rnd() % n : 0; }
static int chance(unsigned pct) { return below(100) < pct; }
static uint64_t rnd64(void) { return (uint64_t)rnd() << 32 | rnd(); }

static int32_t pdiff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

#define PSN(x) ((uint32_t)(x) & 0xffffffu)

/* The path MTU of the current epoch, in bytes (256 to 4096). */
static uint32_t mtu = 1024;

/* ------------------------------------------------------------ victim -- */

enum { K_RECV = 1, K_SEND, K_READ, K_ATOM }; /* wr_id kinds */

struct victim {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *a, *w, *l;
	uint8_t *buf;
	uint8_t *may; /* 1: a byte someone was granted (may change) */
	int gid;
	uint32_t epoch;
	uint32_t rq_psn, sq_psn;
	uint32_t access; /* the QP's remote rights this epoch */
	int frozen;	 /* neither remote WRITE nor atomic: A keeps snap */
	uint8_t *snap;
	int recv_on[NRECV], read_on[NREAD], atom_on[NATOM];
	uint32_t read_len[NREAD];
	int lazy; /* this epoch posts receives only when none is left */
	unsigned sends_out;
};

static uint8_t pattern(size_t i) { return (uint8_t)(i * 131 + 7); }

static void grant(struct victim *v, size_t off, size_t len)
{
	memset(v->may + off, 1, len);
}

static uint64_t wr_id(const struct victim *v, unsigned kind, unsigned slot)
{
	return (uint64_t)v->epoch << 32 | kind << 16 | slot;
}

static enum ibv_qp_state qp_state(const struct victim *v)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	CHECK_EQ(ibv_query_qp(v->qp, &a, IBV_QP_STATE, &ia), 0);
	return a.qp_state;
}

static void victim_open(struct victim *v)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr ia;
	int fl;

	memset(v, 0, sizeof(*v));
	CHECK(l && l[0]);
	v->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	CHECK(v->ctx);
	/* Async events are read as they come, never waited for. */
	fl = fcntl(v->ctx->async_fd, F_GETFL);
	CHECK_EQ(fcntl(v->ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
	v->gid = gid_index(v->ctx, IP4_A);
	v->pd = ibv_alloc_pd(v->ctx);
	v->cq = ibv_create_cq(v->ctx, 1024, NULL, NULL, 0);
	CHECK(v->pd && v->cq);
	CHECK_EQ(posix_memalign((void **)&v->buf, PG, VBUF), 0);
	v->may = calloc(1, VBUF);
	v->snap = malloc(LEN_A);
	CHECK(v->may && v->snap);
	for (size_t i = 0; i < VBUF; i++)
		v->buf[i] = pattern(i);
	v->a = ibv_reg_mr(v->pd, v->buf + OFF_A, LEN_A,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ |
				  IBV_ACCESS_REMOTE_ATOMIC);
	v->w = ibv_reg_mr(v->pd, v->buf + OFF_W, LEN_W, IBV_ACCESS_REMOTE_READ);
	v->l = ibv_reg_mr(v->pd, v->buf + OFF_L, LEN_L, IBV_ACCESS_LOCAL_WRITE);
	CHECK(v->a && v->w && v->l);
	grant(v, OFF_A, LEN_A);
	for (unsigned i = 0; i < NRECV; i++) {
		grant(v, OFF_RECV + i * RSLOT, RSGE);
		grant(v, OFF_RECV + i * RSLOT + RSGE2, RSGE);
	}
	for (unsigned i = 0; i < NREAD; i++)
		grant(v, OFF_READ + i * READ_SLOT, READ_MAX);
	for (unsigned i = 0; i < NATOM; i++)
		grant(v, OFF_ATOM + i * ATOM_SLOT, 8);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = v->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 32;
	ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
	v->qp = ibv_create_qp(v->pd, &ia);
	CHECK(v->qp);
}

static void victim_close(struct victim *v)
{
	CHECK_EQ(ibv_destroy_qp(v->qp), 0);
	CHECK_EQ(ibv_dereg_mr(v->a), 0);
	CHECK_EQ(ibv_dereg_mr(v->w), 0);
	CHECK_EQ(ibv_dereg_mr(v->l), 0);
	CHECK_EQ(ibv_destroy_cq(v->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(v->pd), 0);
	CHECK_EQ(ibv_close_device(v->ctx), 0);
	free(v->buf);
	free(v->may);
	free(v->snap);
}

/* Bytes nobody was granted that changed: the first, or -1. */
static long changed_at(const struct victim *v)
{
	for (size_t i = 0; i < VBUF; i++)
		if (!v->may[i] && v->buf[i] != pattern(i))
			return (long)i;
	return -1;
}

/* ------------------------------------------------------------- trace -- */

static FILE *trace;

static void trace_pkt(char dir, const uint8_t *p, size_t n)
{
	if (!trace)
		return;
	fputc(dir, trace);
	fputc(' ', trace);
	for (size_t i = 0; i < n; i++)
		fprintf(trace, "%02x", p[i]);
	fputc('\n', trace);
}

static void trace_note(const char *what, uint64_t a, uint64_t b)
{
	if (trace)
		fprintf(trace, "# %s %#llx %#llx\n", what, (unsigned long long)a,
			(unsigned long long)b);
}

/* ------------------------------------------------------------- model -- */

/* A READ request we sent: what its responses may carry. */
struct rreq {
	uint32_t psn, npk, len, rkey;
	uint64_t va;
};

/* A request of the victim's, as seen on B's socket. */
struct vreq {
	uint32_t psn;
	uint8_t op;
	uint32_t dma_len; /* READ */
};

static struct {
	uint32_t guess;	 /* the victim's ePSN, as far as its answers tell */
	uint32_t cursor; /* where this burst's requests are near */
	struct vreq vr[32];
	unsigned nvr;	    /* requests recorded (ring of 32) */
	uint32_t vsq_hi;    /* past the last PSN the victim sent */
	int quiet;	    /* bursts in a row without an answer */
	int strange;	    /* the stranger spoke in this burst */
	int fencing;	    /* what comes is of the epoch before */
	uint32_t fence_psn; /* until an ACK of this PSN */
	struct rreq rr[256];
	unsigned nrr;	    /* READ requests sent this epoch (ring of 256) */
	uint64_t sent, stranger, bad_icrc, answers, vreqs, resets, resyncs,
		silent, posted, cqe_ok, cqe_err, events, bursts;
	uint64_t by_op[256]; /* packets sent, by opcode */
} z;

static void model_reset(const struct victim *v)
{
	z.guess = v->rq_psn;
	z.nvr = 0;
	z.nrr = 0;
	z.vsq_hi = v->sq_psn;
	z.quiet = 0;
}

static int is_request(uint8_t op)
{
	return op <= 0x0c || op == 0x13 || op == 0x14 || op == 0x16 || op == 0x17;
}

static const struct victim *the_victim; /* the fuzz's, for the checks */

/* The bytes [va, va + len) lie in the MR rkey names, which the remote
 * side may read. */
static int readable(const struct victim *v, uint32_t rkey, uint64_t va,
		    uint64_t len)
{
	uint64_t lo = (uintptr_t)v->buf, hi;

	if (rkey == v->a->rkey)
		lo += OFF_A, hi = lo + LEN_A;
	else if (rkey == v->w->rkey)
		lo += OFF_W, hi = lo + LEN_W;
	else
		return 0;
	return va >= lo && va <= hi && len <= hi - va;
}

/*
 * A READ response of the victim's (n bytes, ICRC included) carries bytes
 * of a READ we sent at its PSN, from inside the MR its rkey names, and
 * only when the QP takes remote READs.  Bytes of the weaker MR, which
 * never change, are checked too.  (Several READs of ours may have the
 * same PSN, a repeat among them: any of them will do.)
 */
static void check_read_response(const uint8_t *p, size_t n)
{
	const struct victim *v = the_victim;
	unsigned hl = 12 + (p[0] == 0x0e ? 0 : 4), cands = 0, ok = 0;
	uint32_t psn = ld24(p + 9), len;
	const struct rreq *hit = NULL;

	CHECK(n >= hl + 4 + ((p[1] >> 4) & 3));
	len = (uint32_t)(n - 4 - hl - ((p[1] >> 4) & 3));
	if (!v || !len)
		return;
	if (!(v->access & IBV_ACCESS_REMOTE_READ))
		sv_test_fail(__FILE__, __LINE__,
			     "a READ response of %u bytes (PSN %#x) from a QP "
			     "without remote READ (seed %llu)", len, psn,
			     (unsigned long long)seed);
	for (unsigned i = 0; i < z.nrr && i < 256; i++) {
		const struct rreq *r = &z.rr[i];
		int32_t d = pdiff(psn, r->psn);
		uint64_t off = (uint64_t)(uint32_t)d * mtu;

		if (d < 0 || (uint32_t)d >= r->npk)
			continue;
		cands++;
		if (off + len <= r->len && readable(v, r->rkey, r->va + off, len)) {
			ok++;
			hit = r;
		}
	}
	if (!cands && z.nrr > 256)
		return; /* forgotten */
	if (!ok)
		sv_test_fail(__FILE__, __LINE__,
			     "a READ response of %u bytes (PSN %#x) answers no "
			     "READ of ours there with bytes it may read (%u "
			     "READs at that PSN; seed %llu)", len, psn, cands,
			     (unsigned long long)seed);
	if (cands == 1 && hit->rkey == v->w->rkey) {
		uint64_t off = (uint64_t)(uint32_t)pdiff(psn, hit->psn) * mtu;
		size_t at = (size_t)(hit->va + off - (uintptr_t)v->buf);

		for (uint32_t i = 0; i < len; i++)
			if (p[hl + i] != pattern(at + i))
				sv_test_fail(__FILE__, __LINE__,
					     "a READ response carries byte %zu "
					     "of the weaker MR wrong", at + i);
	}
}

/* One datagram from the victim (ICRC included): checked, then learnt
 * from.  Returns 1 for an ACK or NAK (opcode 0x11). */
static int from_victim(const uint8_t *p, size_t n, uint16_t sport)
{
	uint32_t psn = ld24(p + 9);
	uint8_t op = p[0];

	trace_pkt('<', p, n);
	CHECK(fake_icrc_ok(p, n, sport));
	CHECK_EQ(ld24(p + 5), FAKE_QPN);
	CHECK_EQ(p[1] & 0xf, 0); /* TVer */
	z.answers++;
	if (z.fencing)
		return op == 0x11 && (p[12] & 0xe0) == 0 && psn == z.fence_psn;
	if (is_request(op)) {
		struct vreq *r = &z.vr[z.nvr++ % 32];
		uint32_t npk = 1;

		r->psn = psn;
		r->op = op;
		r->dma_len = op == 0x0c ? ld32(p + 24) : 0;
		if (op == 0x0c && r->dma_len > mtu)
			npk = (r->dma_len + mtu - 1) / mtu;
		if (pdiff(PSN(psn + npk), z.vsq_hi) > 0)
			z.vsq_hi = PSN(psn + npk);
		z.vreqs++;
		return 0;
	}
	if (op == 0x11 && (p[12] & 0xe0) != 0) {
		/* A NAK names the PSN expected: exactly. */
		if ((p[12] & 0xe0) == 0x20 || p[12] == 0x60)
			z.guess = psn;
		return 1;
	}
	if (op >= 0x0d && op <= 0x10)
		check_read_response(p, n);
	if (op >= 0x0d && op <= 0x12 && pdiff(PSN(psn + 1), z.guess) > 0)
		z.guess = PSN(psn + 1);
	return op == 0x11;
}

/* Reads what the victim sent: waits up to ms for the first datagram.
 * Returns how many ACKs and NAKs came. */
static int drain_b(int ms)
{
	uint8_t buf[9000];
	int acks = 0;

	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		struct pollfd pfd = { sock_b, POLLIN, 0 };
		ssize_t n;

		if (poll(&pfd, 1, ms) != 1)
			return acks;
		n = recvfrom(sock_b, buf, sizeof(buf), MSG_DONTWAIT,
			     (struct sockaddr *)&from, &fl);
		if (n < 0 && errno == EAGAIN)
			return acks;
		CHECK(n >= 12 + 4);
		acks += from_victim(buf, (size_t)n, ntohs(from.sin_port));
		ms = 0;
	}
}

/* ----------------------------------------------------------- packets -- */

/* Writes op's packet into k (wire_fake.h), its SE and MigReq bits at
 * random, paylen random payload bytes (the stranger's starting with
 * MARK), and for an opcode that does not exist, some header bytes. */
static void build(struct fake_pkt *k, uint8_t op, uint32_t psn, int ackreq,
		  const struct fake_fields *f, uint32_t paylen)
{
	uint32_t extra = !fake_hdrs[op] && chance(70) ? below(40) : 0;
	uint8_t *p;

	k->se = chance(30);
	k->mig = chance(50);
	p = fake_build(k, op, psn, ackreq, f, extra, paylen);
	for (uint32_t i = 0; i < extra + paylen; i++)
		p[i] = (uint8_t)rnd();
	if (k->from_c && paylen >= sizeof(MARK))
		memcpy(p + extra, MARK, sizeof(MARK));
}

static void send_pkt(struct fake_pkt *k)
{
	trace_pkt(k->from_c ? 'C' : '>', k->b, k->len);
	fake_send(k);
	if (k->b[0] == 0x0c && !k->from_c && !k->bad_icrc && !k->tver &&
	    k->len >= 28 && the_victim && k->qpn == the_victim->qp->qp_num) {
		struct rreq *r = &z.rr[z.nrr++ % 256];

		r->psn = ld24(k->b + 9);
		r->va = ld64(k->b + 12);
		r->rkey = ld32(k->b + 20);
		r->len = ld32(k->b + 24);
		/* (no READ longer than a few dozen packets is answered) */
		r->npk = r->len > 64 * mtu ? 64 : r->len ? (r->len + mtu - 1) / mtu : 1;
	}
	z.sent++;
	z.by_op[k->b[0]]++;
	if (k->from_c) {
		z.stranger++;
		z.strange = 1;
	}
	if (k->bad_icrc)
		z.bad_icrc++;
}

/* A fresh packet for the victim's QP: the right pad, TVer 0, from B. */
static void pkt_new(struct fake_pkt *k, const struct victim *v)
{
	k->pad = -1;
	k->se = k->mig = k->tver = k->from_c = k->bad_icrc = 0;
	k->qpn = v->qp->qp_num;
}

/* --------------------------------------------------- random fields -- */

static uint64_t rand_va(const struct victim *v, uint32_t len)
{
	uint64_t a = (uintptr_t)v->buf;

	switch (below(16)) {
	case 0: return a + OFF_A + LEN_A - below(64);	  /* across A's end */
	case 1: return a + OFF_A - below(64);		  /* across its start */
	case 2: return a + OFF_W + below(LEN_W);	  /* the weaker MR */
	case 3: return a + OFF_W - PG + below(PG);	  /* a guard */
	case 4: return a + OFF_L + below(LEN_L);	  /* local only */
	case 5: return rnd64();
	case 6: return chance(50) ? 0 : UINT64_MAX - below(16);
	case 7: return a + OFF_A + below(LEN_A);	  /* may not fit */
	default:
		/* Inside A, fitting when it can. */
		return a + OFF_A + (len < LEN_A ? below(LEN_A - len + 1) : 0);
	}
}

static uint32_t rand_rkey(const struct victim *v)
{
	switch (below(12)) {
	case 0: return v->w->rkey;
	case 1: return v->l->rkey;
	case 2: return v->a->rkey ^ 1;		   /* wrong tag */
	case 3: return (v->a->rkey & 0xff) | rnd() << 8; /* wrong index */
	case 4: return rnd();
	case 5: return 0;
	default: return v->a->rkey;
	}
}

static uint32_t rand_dma_len(uint32_t paylen)
{
	switch (below(12)) {
	case 0: return 0;
	case 1: return mtu * (1 + below(4));
	case 2: return below(LEN_A + 256);
	case 3: return rnd();
	case 4: return chance(50) ? UINT32_MAX : 0x80000000u;
	case 5: return paylen + below(8);
	default: return paylen;
	}
}

static uint32_t rand_paylen(uint8_t op)
{
	int first_mid = op == 0x00 || op == 0x01 || op == 0x06 || op == 0x07 ||
			op == 0x0d || op == 0x0e;

	if (!(fake_hdrs[op] & H_PAY))
		return chance(97) ? 0 : below(16); /* a payload where none goes */
	switch (below(20)) {
	case 0: return 0;
	case 1: return mtu + 1 + below(400); /* above the MTU */
	case 2: return chance(20) ? 4000 + below(1000) : mtu - 1;
	case 3: case 4: case 5: case 6: return first_mid ? mtu : below(mtu + 1);
	default: return first_mid && chance(60) ? mtu : 1 + below(mtu);
	}
}

static uint8_t rand_syn(void)
{
	switch (below(10)) {
	case 0: return (uint8_t)(0x20 | below(32));	  /* RNR NAK */
	case 1: return (uint8_t)(0x60 | below(4));	  /* NAK */
	case 2: return (uint8_t)(0x60 | below(32));	  /* NAK, any code */
	case 3: return (uint8_t)rnd();			  /* reserved too */
	case 4: return (uint8_t)below(0x20);		  /* ACK, credits */
	default: return 0x1f;
	}
}

static void rand_fields(const struct victim *v, struct fake_fields *f, uint8_t op,
			uint32_t paylen)
{
	f->dma_len = rand_dma_len(paylen);
	f->va = rand_va(v, f->dma_len);
	f->rkey = rand_rkey(v);
	if (op == 0x13 || op == 0x14) {
		f->va = rand_va(v, 8);
		if (chance(80))
			f->va &= ~7ull;
	}
	f->swap = chance(50) ? rnd64() : below(4);
	f->comp = chance(50) ? rnd64() : below(4);
	f->orig = rnd64();
	f->syn = rand_syn();
	f->msn = rnd() & 0xffffff;
	f->imm = rnd();
	f->ieth = chance(50) ? rand_rkey(v) : rnd();
	f->qkey = rnd();
}

/* A PSN near at: mostly just behind it (a duplicate: answered, never
 * executed again) or just ahead (a gap: NAKed once), sometimes at it
 * (executed: most random requests there end the QP), sometimes far. */
static uint32_t near_psn(uint32_t at)
{
	switch (below(20)) {
	case 0: return rnd() & 0xffffff;
	case 1: return PSN(at + 0x800000 - 2 + below(4)); /* half the space */
	case 2: case 3: return PSN(at - 300 + below(600));
	case 4: case 5: return PSN(at + 1 + below(4));
	case 6: case 7: return at;
	default: return PSN(at - 1 - below(8));
	}
}

/* ------------------------------------------------------------ bursts -- */

/* A request with random fields at a PSN near the cursor. */
static void random_request(const struct victim *v)
{
	static const uint8_t ops[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x05,
				       0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
				       0x0c, 0x13, 0x14, 0x16, 0x17 };
	static struct fake_pkt k;
	struct fake_fields f;
	uint8_t op = ops[below(sizeof(ops))];
	uint32_t paylen = rand_paylen(op);

	pkt_new(&k, v);
	rand_fields(v, &f, op, paylen);
	/* At the cursor itself seldom: most of these end the QP there. */
	build(&k, op, chance(5) ? z.cursor : near_psn(z.cursor), chance(70),
	      &f, paylen);
	send_pkt(&k);
}

/* Puts [va, va + len) at an edge of A or of the weaker MR: ending at its
 * last byte or starting at its first (it fits), or 1-64 bytes over, into
 * the guard (a remote access error; the QP goes to ERR).  align: 8 for
 * an atomic. */
static void edge(const struct victim *v, struct fake_fields *f, uint32_t len,
		 uint32_t align)
{
	int weak = chance(25);
	uint64_t lo = (uintptr_t)v->buf + (weak ? OFF_W : OFF_A);
	uint64_t hi = lo + (weak ? LEN_W : LEN_A);
	uint32_t over = chance(50) ? 0 : (1 + below(64)) & ~(align - 1);

	f->rkey = weak ? v->w->rkey : v->a->rkey;
	f->va = chance(50) ? hi - len + over : lo - over;
}

/* A whole valid message at the cursor (a SEND or WRITE of 1-3 packets,
 * a READ or an atomic into A), the cursor moved past it; sometimes one
 * packet is left out or changed, or the message is cut short. */
static void coherent(const struct victim *v, int from_c)
{
	static struct fake_pkt k;
	struct fake_fields f;
	int kind = (int)below(5), n = chance(85) ? 1 + (int)below(2) : 3, skip;
	/* A SEND fits the largest receive (two SGEs) mostly. */
	uint32_t cap = kind < 2 && chance(90) ? 2 * RSGE : LEN_A, last, total;

	while (n > 1 && (uint32_t)(n - 1) * mtu >= cap)
		n--;
	last = cap - (uint32_t)(n - 1) * mtu;
	if (last > mtu)
		last = mtu;
	if (chance(80))
		last = 1 + below(last);
	total = (uint32_t)(n - 1) * mtu + last;
	skip = chance(8) ? (int)below((uint32_t)n) : -1;

	memset(&f, 0, sizeof(f));
	f.rkey = v->a->rkey;
	f.dma_len = total;
	f.va = (uintptr_t)v->buf + OFF_A + below(LEN_A - total + 1);
	f.imm = rnd();
	f.ieth = rnd();
	if (kind >= 3) {
		pkt_new(&k, v);
		k.from_c = from_c;
		if (kind == 3) {
			f.dma_len = below(LEN_A / 2 + 1);
			f.va = (uintptr_t)v->buf + OFF_A + below(LEN_A - f.dma_len + 1);
			if (chance(30))
				edge(v, &f, f.dma_len, 1);
			build(&k, 0x0c, z.cursor, 1, &f, 0);
			z.cursor = PSN(z.cursor + (f.dma_len > mtu ?
							   (f.dma_len + mtu - 1) / mtu : 1));
		} else {
			f.va = ((uintptr_t)v->buf + OFF_A + below(LEN_A - 7)) & ~7ull;
			if (chance(30))
				edge(v, &f, 8, 8);
			f.swap = rnd64();
			f.comp = chance(50) ? rnd64() : 0;
			build(&k, chance(50) ? 0x13 : 0x14, z.cursor, 1, &f, 0);
			z.cursor = PSN(z.cursor + 1);
		}
		send_pkt(&k);
		return;
	}
	if (kind == 2 && chance(30))
		edge(v, &f, total, 1);
	for (int i = 0; i < n; i++) {
		int first = i == 0, lst = i == n - 1;
		uint8_t op;

		if (kind == 0 || kind == 1) /* SEND, SEND with imm/inv */
			/* (no window to invalidate: WITH_INV fails) */
			op = first && lst ? (kind ? (chance(90) ? 0x05 : 0x17) : 0x04) :
			     first ? 0x00 :
			     lst   ? (kind ? (chance(90) ? 0x03 : 0x16) : 0x02) :
				     0x01;
		else
			op = first && lst ? (chance(50) ? 0x0a : 0x0b) :
			     first ? 0x06 :
			     lst   ? (chance(50) ? 0x08 : 0x09) :
				     0x07;
		pkt_new(&k, v);
		k.from_c = from_c;
		if (i == skip) {
			z.cursor = PSN(z.cursor + 1);
			continue;
		}
		if (chance(5))
			rand_fields(v, &f, op, lst ? last : mtu);
		build(&k, op, z.cursor, lst || chance(20), &f, lst ? last : mtu);
		send_pkt(&k);
		z.cursor = PSN(z.cursor + 1);
	}
}

/* An answer to one of the victim's requests: right (an ACK, its READ
 * responses, an atomic ACK) or not quite. */
static void answer(const struct victim *v)
{
	static struct fake_pkt k;
	const struct vreq *r;
	struct fake_fields f;
	int bent = chance(25);

	if (!z.nvr)
		return;
	r = &z.vr[(z.nvr - 1 - below(z.nvr < 32 ? z.nvr : 32)) % 32];
	memset(&f, 0, sizeof(f));
	f.syn = bent && chance(30) ? rand_syn() : 0x1f;
	f.msn = rnd() & 0xffffff;
	f.orig = rnd64();
	pkt_new(&k, v);
	if (r->op == 0x0c) {
		uint32_t left = r->dma_len, psn = r->psn;

		do {
			uint32_t chunk = left > mtu ? mtu : left;
			int first = left == r->dma_len, lst = chunk == left;
			uint8_t op = first && lst ? 0x10 : first ? 0x0d :
				     lst ? 0x0f : 0x0e;

			if (bent && chance(30))
				chunk = rand_paylen(op);
			if (bent && chance(20))
				op = (uint8_t)(0x0d + below(4));
			pkt_new(&k, v);
			build(&k, op, bent && chance(20) ? near_psn(psn) : psn, 0,
			      &f, chunk);
			send_pkt(&k);
			left -= chunk > left ? left : chunk;
			psn = PSN(psn + 1);
		} while (left && !(bent && chance(20)));
		return;
	}
	build(&k, r->op == 0x13 || r->op == 0x14 ? 0x12 : 0x11,
	      bent ? near_psn(r->psn) : r->psn, 0, &f, 0);
	send_pkt(&k);
}

/* A response opcode with random fields near what the victim sent. */
static void random_response(const struct victim *v)
{
	static struct fake_pkt k;
	struct fake_fields f;
	uint8_t op = (uint8_t)(0x0d + below(6));
	uint32_t paylen = rand_paylen(op);

	pkt_new(&k, v);
	rand_fields(v, &f, op, paylen);
	build(&k, op, near_psn(PSN(z.vsq_hi - 1)), 0, &f, paylen);
	send_pkt(&k);
}

/* Something no RC QP takes: no such opcode, another transport's, a
 * TVer that is not 0, a bad ICRC, another QPN. */
static void odd(const struct victim *v)
{
	static const uint8_t other[] = { 0x15, 0x18, 0x1b, 0x1f, 0x24, 0x2a,
					 0x40, 0x64, 0x81, 0xff };
	static struct fake_pkt k;
	struct fake_fields f;
	uint8_t op = chance(50) ? other[below(sizeof(other))] : (uint8_t)rnd();
	uint32_t paylen;

	pkt_new(&k, v);
	switch (below(4)) {
	case 0:
		k.tver = 1 + (int)below(15);
		op = (uint8_t)below(0x18);
		break;
	case 1:
		k.bad_icrc = 1;
		op = (uint8_t)below(0x18);
		break;
	case 2:
		k.qpn = chance(50) ? v->qp->qp_num ^ 1 : rnd() & 0xffffff;
		if (k.qpn == 1)
			k.qpn = 2; /* QP1 is the daemon's CM */
		op = (uint8_t)below(0x18);
		break;
	default:
		if (chance(50))
			k.pad = (int)below(4);
		break;
	}
	paylen = fake_hdrs[op] & H_PAY ? rand_paylen(op) : below(8);
	rand_fields(v, &f, op, paylen);
	build(&k, op, near_psn(z.cursor), chance(50), &f, paylen);
	send_pkt(&k);
}

/* The end of every burst: a duplicate SEND asking for an ACK, far
 * enough behind to be one wherever the victim stands, so it answers with
 * its expected PSN minus one (or the NAK it owes). */
static void probe(const struct victim *v)
{
	static struct fake_pkt k;
	struct fake_fields f;

	memset(&f, 0, sizeof(f));
	pkt_new(&k, v);
	build(&k, 0x04, PSN(z.guess - 512 - below(256)), 1, &f, 0);
	send_pkt(&k);
}

static void burst(const struct victim *v)
{
	unsigned n = 1 + below(12);

	z.cursor = z.guess;
	z.bursts++;
	for (unsigned i = 0; i < n; i++) {
		unsigned c = below(100);

		if (c < 30)
			random_request(v);
		else if (c < 55)
			coherent(v, 0);
		else if (c < 72)
			answer(v);
		else if (c < 82)
			random_response(v);
		else if (c < 96)
			odd(v);
		else
			coherent(v, 1); /* the stranger */
	}
	probe(v);
}

/* ------------------------------------------------- the victim's side -- */

/* The next epochs are plain: path MTU 1024, every right, a timeout of
 * ~17 s (no retransmission within a case), receives always posted. */
static int calm;
static uint32_t calm_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC; /* a calm QP's rights */

/* Connects the QP to the fake peer anew, with new PSNs, timers and
 * rights, from RESET. */
static void connect_qp(struct victim *v)
{
	struct ibv_qp_attr a;
	uint32_t acc = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = calm ? calm_access : chance(90) ? acc : acc & rnd();
	v->access = a.qp_access_flags;
	CHECK_EQ(ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
	/* Near the end of the PSN space now and then: the wrap. */
	v->rq_psn = chance(20) ? PSN(0 - below(64)) : rnd() & 0xffffff;
	v->sq_psn = chance(20) ? PSN(0 - below(8)) : rnd() & 0xffffff;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	/* Any path MTU (the links' 9000 bytes allow 4096), mostly 1024. */
	a.path_mtu = calm ? IBV_MTU_1024 :
		     chance(40) ? IBV_MTU_1024 : (enum ibv_mtu)(IBV_MTU_256 + below(5));
	mtu = 128u << a.path_mtu;
	a.dest_qp_num = FAKE_QPN;
	a.rq_psn = v->rq_psn;
	a.max_dest_rd_atomic = (uint8_t)(1 + below(16));
	a.min_rnr_timer = (uint8_t)below(32);
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	v4map(a.ah_attr.grh.dgid.raw, IP4_B);
	a.ah_attr.grh.sgid_index = (uint8_t)v->gid;
	a.ah_attr.grh.hop_limit = 64;
	CHECK_EQ(ibv_modify_qp(v->qp, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER),
		 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = v->sq_psn;
	/* 10 ms to ~1 s: retries and retry-exceeded errors happen. */
	a.timeout = calm ? 22 : (uint8_t)(11 + below(8));
	a.retry_cnt = calm ? 7 : (uint8_t)below(8);
	a.rnr_retry = calm ? 7 : (uint8_t)below(8);
	a.max_rd_atomic = (uint8_t)(1 + below(4));
	CHECK_EQ(ibv_modify_qp(v->qp, &a,
			       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_MAX_QP_RD_ATOMIC),
		 0);
}

static void post_recv_slot(struct victim *v, unsigned i)
{
	uint64_t base = (uintptr_t)v->buf + OFF_RECV + i * RSLOT;
	struct ibv_sge sge[2] = { { base, RSGE, v->l->lkey },
				  { base + RSGE2, RSGE, v->l->lkey } };
	struct ibv_recv_wr wr = { .wr_id = wr_id(v, K_RECV, i), .sg_list = sge,
				  .num_sge = chance(70) ? 2 : 1 },
			   *bad;

	CHECK_EQ(ibv_post_recv(v->qp, &wr, &bad), 0);
	v->recv_on[i] = 1 + wr.num_sge;
}

static void post_recvs(struct victim *v)
{
	if (v->lazy)
		for (unsigned i = 0; i < NRECV; i++)
			if (v->recv_on[i])
				return;
	for (unsigned i = 0; i < NRECV; i++)
		if (!v->recv_on[i])
			post_recv_slot(v, i);
}

/* One request of our own: a SEND, a WRITE, a READ into a READ slot or
 * an atomic into an atomic slot, to made-up remote addresses. */
static void post_own(struct victim *v)
{
	struct ibv_sge sge = { (uintptr_t)v->buf + OFF_SRC, 0, v->l->lkey };
	struct ibv_send_wr wr, *bad;
	unsigned c = below(6), slot;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = chance(50) ? 0x10000 + below(1 << 20) : rnd64();
	wr.wr.rdma.rkey = rnd();
	wr.imm_data = rnd();
	wr.wr_id = wr_id(v, K_SEND, 0);
	sge.length = below(LEN_SRC - 512);
	if (c == 0 || c == 1) {
		wr.opcode = c ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	} else if (c == 2) {
		wr.opcode = chance(50) ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
	} else if (c == 3 || c == 4) {
		for (slot = 0; slot < NREAD && v->read_on[slot]; slot++)
			;
		if (slot == NREAD)
			return;
		wr.opcode = IBV_WR_RDMA_READ;
		sge.addr = (uintptr_t)v->buf + OFF_READ + slot * READ_SLOT;
		sge.length = 1 + below(READ_MAX);
		/* What no response wrote is still UNREAD (reap). */
		memset(v->buf + OFF_READ + slot * READ_SLOT, UNREAD, READ_MAX);
		v->read_len[slot] = sge.length;
		wr.wr_id = wr_id(v, K_READ, slot);
		v->read_on[slot] = 1;
	} else {
		for (slot = 0; slot < NATOM && v->atom_on[slot]; slot++)
			;
		if (slot == NATOM)
			return;
		wr.opcode = chance(50) ? IBV_WR_ATOMIC_CMP_AND_SWP :
					 IBV_WR_ATOMIC_FETCH_AND_ADD;
		sge.addr = (uintptr_t)v->buf + OFF_ATOM + slot * ATOM_SLOT;
		sge.length = 8;
		wr.wr.atomic.remote_addr = rnd64() & ~7ull;
		wr.wr.atomic.rkey = rnd();
		wr.wr.atomic.compare_add = rnd64();
		wr.wr.atomic.swap = rnd64();
		wr.wr_id = wr_id(v, K_ATOM, slot);
		v->atom_on[slot] = 1;
	}
	trace_note("post", wr.opcode, sge.length);
	CHECK_EQ(ibv_post_send(v->qp, &wr, &bad), 0);
	v->sends_out++;
	z.posted++;
}

/* A READ that completed with success has every byte it asked for: no
 * 16 bytes in a row are still what it was filled with at post (the
 * responses' payloads are random). */
static void check_read(const struct victim *v, unsigned slot)
{
	const uint8_t *p = v->buf + OFF_READ + slot * READ_SLOT;
	uint32_t run = 0;

	for (uint32_t i = 0; i < v->read_len[slot]; i++) {
		run = p[i] == UNREAD ? run + 1 : 0;
		if (run == 16)
			sv_test_fail(__FILE__, __LINE__,
				     "a READ of %u bytes completed with success, "
				     "but bytes %u.. of it never arrived (seed "
				     "%llu)", v->read_len[slot], i - 15,
				     (unsigned long long)seed);
	}
}

/* Takes the victim's completions: each frees what its work request
 * held; one of an earlier epoch (before a reset) only is counted. */
static void reap(struct victim *v)
{
	struct ibv_wc wc[32];
	int n;

	while ((n = ibv_poll_cq(v->cq, 32, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			unsigned kind = (unsigned)(wc[i].wr_id >> 16) & 0xffff;
			unsigned slot = (unsigned)wc[i].wr_id & 0xffff;

			if (wc[i].status == IBV_WC_SUCCESS)
				z.cqe_ok++;
			else
				z.cqe_err++;
			CHECK_EQ(wc[i].qp_num, v->qp->qp_num);
			CHECK(kind >= K_RECV && kind <= K_ATOM);
			if (kind == K_RECV) {
				CHECK(slot < NRECV);
				/* A SEND never says more than the receive
				 * holds (its SGEs' bytes, as posted); a WRITE
				 * with immediate says the WRITE's length. */
				if (wc[i].status == IBV_WC_SUCCESS &&
				    wc[i].opcode == IBV_WC_RECV &&
				    (wc[i].wr_id >> 32) == v->epoch &&
				    wc[i].byte_len >
					    RSGE * (uint32_t)(v->recv_on[slot] - 1))
					sv_test_fail(__FILE__, __LINE__,
						     "a receive of %u bytes says %u",
						     RSGE * (v->recv_on[slot] - 1),
						     wc[i].byte_len);
			}
			if ((wc[i].wr_id >> 32) != v->epoch)
				continue;
			switch (kind) {
			case K_RECV:
				v->recv_on[slot] = 0;
				break;
			case K_READ:
				if (wc[i].status == IBV_WC_SUCCESS)
					check_read(v, slot);
				v->read_on[slot] = 0;
				v->sends_out--;
				break;
			case K_ATOM:
				v->atom_on[slot] = 0;
				v->sends_out--;
				break;
			default:
				v->sends_out--;
			}
		}
	}
	CHECK_EQ(n, 0);
}

static void async_events(struct victim *v)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(v->ctx, &ev)) {
		z.events++;
		ibv_ack_async_event(&ev);
	}
	CHECK_EQ(errno, EAGAIN);
}

/*
 * The packets of ours the victim had not read when it was reset are read
 * in the new epoch, and what it said before may still be on its way (the
 * engine sends its batch after it drops the QP's lock): a SEND of 0 bytes
 * at the new expected PSN, and all before its ACK, which names that PSN
 * as nothing else can, is the old epoch's.  (A NAK the old packets caused
 * may go out instead of that ACK: the SEND again, a duplicate now, is
 * ACKed with the same PSN.)
 */
static int fence(struct victim *v)
{
	static struct fake_pkt k;
	struct fake_fields f;
	struct timespec t0, t;

	memset(&f, 0, sizeof(f));
	z.fencing = 1;
	z.fence_psn = v->rq_psn;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0;; i++) {
		if (i % 25 == 0) {
			/* Out of RTS before its first ACK: the old epoch's
			 * packets, read in this one, ended it as they would
			 * have ended the old one (counted as a reset, and
			 * another epoch; a fatal request is NAKed first, and
			 * that NAK ends the fence as an ACK does). */
			if (i && qp_state(v) != IBV_QPS_RTS) {
				z.fencing = 0;
				z.resets++;
				return -1;
			}
			pkt_new(&k, v);
			build(&k, 0x04, v->rq_psn, 1, &f, 0);
			send_pkt(&k);
			if (trace)
				fflush(trace);
		}
		if (drain_b(20))
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			sv_test_fail(__FILE__, __LINE__,
				     "no ACK from the QP in RTS in 10 s (state %d, "
				     "epoch %u, seed %llu)", (int)qp_state(v),
				     v->epoch, (unsigned long long)seed);
	}
	z.fencing = 0;
	z.guess = PSN(v->rq_psn + 1);
	return 0;
}

/* The QP back to RTS from whatever state it is in, a new epoch. */
static void recover(struct victim *v)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	int tries = 0;

	do {
		if (++tries > 20)
			sv_test_fail(__FILE__, __LINE__,
				     "20 epochs in a row left RTS before their "
				     "first ACK (seed %llu)",
				     (unsigned long long)seed);
		trace_note("reset", v->epoch, 0);
		CHECK_EQ(ibv_modify_qp(v->qp, &a, IBV_QP_STATE), 0);
		reap(v);
		v->epoch++;
		memset(v->recv_on, 0, sizeof(v->recv_on));
		memset(v->read_on, 0, sizeof(v->read_on));
		memset(v->atom_on, 0, sizeof(v->atom_on));
		v->sends_out = 0;
		/* Some epochs run out of receives: RNR NAKs. */
		v->lazy = !calm && chance(15);
		connect_qp(v);
		model_reset(v);
		post_recvs(v);
	} while (fence(v) < 0);
	v->frozen = !(v->access & (IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_ATOMIC));
	memcpy(v->snap, v->buf + OFF_A, LEN_A);
	trace_note("rts", v->rq_psn, v->sq_psn);
}

static void check_memory(const struct victim *v)
{
	long at = changed_at(v);

	if (at >= 0)
		sv_test_fail(__FILE__, __LINE__,
			     "byte %ld of the victim's buffer changed (%#x, was "
			     "%#x): nobody was granted it (A at %u, W at %u, L "
			     "at %u; seed %llu)", at, v->buf[at], pattern((size_t)at),
			     OFF_A, OFF_W, OFF_L, (unsigned long long)seed);
	if (memmem(v->buf, VBUF, MARK, sizeof(MARK)))
		sv_test_fail(__FILE__, __LINE__,
			     "the stranger's payload landed in the victim's "
			     "memory at %zu",
			     (size_t)((uint8_t *)memmem(v->buf, VBUF, MARK,
							sizeof(MARK)) - v->buf));
	if (v->frozen && memcmp(v->snap, v->buf + OFF_A, LEN_A))
		sv_test_fail(__FILE__, __LINE__,
			     "A changed under a QP with neither remote WRITE "
			     "nor atomic (seed %llu)", (unsigned long long)seed);
}

/* Waits for the victim's answer to a burst (an ACK or NAK: the probe
 * always gets one while the QP is in RTS), checking its state meanwhile.
 * Returns the QP's state; *answered says whether the answer came. */
static enum ibv_qp_state settle(struct victim *v, int *answered)
{
	enum ibv_qp_state s = IBV_QPS_RTS;

	*answered = 0;
	for (int waited = 0; waited < 2000; waited += 20) {
		if (drain_b(20)) {
			*answered = 1;
			return qp_state(v);
		}
		reap(v);
		s = qp_state(v);
		if (s != IBV_QPS_RTS)
			return s;
	}
	z.silent++;
	return s;
}

/* ------------------------------------------------ afterwards: checks -- */

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	CHECK(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own */
}

/* The daemon's status once its objects and descriptors are those of
 * want (30 s at most: a client's hang-up is handled asynchronously). */
static void daemon_back_to(const struct sv_status_rep *want, const char *when)
{
	struct sv_status_rep st;

	for (int waited = 0;; waited += 20) {
		CHECK_EQ(sv_test_status(&st), 0);
		CHECK_EQ(st.pid, want->pid);
		if (st.objects == want->objects && st.open_fds == want->open_fds &&
		    st.ufiles == want->ufiles && st.contexts == want->contexts)
			return;
		if (waited > 30000)
			sv_test_fail(__FILE__, __LINE__,
				     "%s: the daemon holds %u objects and %u fds "
				     "(ufiles %u, contexts %u), not %u and %u "
				     "(%u, %u)", when, st.objects, st.open_fds,
				     st.ufiles, st.contexts, want->objects,
				     want->open_fds, want->ufiles, want->contexts);
		sv_test_sleep_ms(20);
	}
}

/* The next datagram from the victim (taken as usual); 10 s at most. */
static size_t next_pkt(uint8_t *buf, size_t cap)
{
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	struct pollfd pfd = { sock_b, POLLIN, 0 };
	ssize_t n;

	if (poll(&pfd, 1, 10000) != 1)
		sv_test_fail(__FILE__, __LINE__, "the victim sent nothing in 10 s");
	n = recvfrom(sock_b, buf, cap, 0, (struct sockaddr *)&from, &fl);
	CHECK(n >= 16);
	from_victim(buf, (size_t)n, ntohs(from.sin_port));
	return (size_t)n;
}

/* The next datagram from the victim with opcode op (others are taken
 * as usual). */
static size_t expect_op(uint8_t *buf, size_t cap, uint8_t op)
{
	for (;;) {
		size_t n = next_pkt(buf, cap);

		if (buf[0] == op)
			return n;
	}
}

/* The next completion of this epoch (earlier ones are skipped): it is
 * id's, with status st; 20 s at most. */
static struct ibv_wc wc_expect(struct victim *v, uint64_t id,
			       enum ibv_wc_status st)
{
	struct timespec t0, t;
	struct ibv_wc wc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(v->cq, 1, &wc);

		CHECK(n >= 0);
		if (n && (wc.wr_id >> 32) == v->epoch)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			sv_test_fail(__FILE__, __LINE__, "no completion in 20 s");
	}
	CHECK_EQ(wc.wr_id, id);
	CHECK_EQ(wc.status, st);
	return wc;
}

/* The victim posts wr (one SGE at L + off, len bytes). */
static void own(struct victim *v, struct ibv_send_wr *wr, uint32_t off,
		uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)v->buf + off, len, v->l->lkey };
	struct ibv_send_wr *bad;

	wr->sg_list = &sge;
	wr->num_sge = 1;
	wr->send_flags = IBV_SEND_SIGNALED;
	CHECK_EQ(ibv_post_send(v->qp, wr, &bad), 0);
}

/* A legitimate exchange both ways on a fresh epoch: the QP works. */
static void legit(struct victim *v)
{
	static struct fake_pkt k;
	static const char text[65] = "a legitimate WRITE of sixty-four bytes, which is read back later";
	uint8_t buf[4200], *a = v->buf + OFF_A + 512, *rd = v->buf + OFF_READ;
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	struct fake_fields f;
	uint64_t got;

	uint32_t psn;

	calm = 1;
	recover(v);
	/* The fence's SEND took PSN rq_psn and the receive of slot 0. */
	wc_expect(v, wr_id(v, K_RECV, 0), IBV_WC_SUCCESS);
	psn = PSN(v->rq_psn + 1);
	/* A SEND to it lands in the next receive posted (slot 1). */
	memset(&f, 0, sizeof(f));
	pkt_new(&k, v);
	build(&k, 0x04, psn, 1, &f, 100);
	memcpy(k.b + 12, "legit send", 10);
	send_pkt(&k);
	expect_op(buf, sizeof(buf), 0x11);
	CHECK_EQ(buf[12] & 0xe0, 0);
	CHECK_EQ(ld24(buf + 9), psn);
	wc = wc_expect(v, wr_id(v, K_RECV, 1), IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 100);
	CHECK(!memcmp(v->buf + OFF_RECV + RSLOT, "legit send", 10));
	/* A WRITE into A, then a READ of it back. */
	pkt_new(&k, v);
	f.va = (uintptr_t)a;
	f.rkey = v->a->rkey;
	f.dma_len = 64;
	build(&k, 0x0a, PSN(psn + 1), 1, &f, 64);
	memcpy(k.b + 28, text, 64);
	send_pkt(&k);
	expect_op(buf, sizeof(buf), 0x11);
	CHECK_EQ(buf[12] & 0xe0, 0);
	CHECK_EQ(ld24(buf + 9), PSN(psn + 1));
	CHECK(!memcmp(a, text, 64));
	pkt_new(&k, v);
	build(&k, 0x0c, PSN(psn + 2), 1, &f, 0);
	send_pkt(&k);
	expect_op(buf, sizeof(buf), 0x10);
	CHECK_EQ(ld24(buf + 9), PSN(psn + 2));
	CHECK(!memcmp(buf + 16, text, 64));
	/* From it: a SEND, a READ of 2000 bytes, a FETCH_ADD. */
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	wr.wr_id = wr_id(v, K_SEND, 1);
	own(v, &wr, OFF_SRC, 40);
	expect_op(buf, sizeof(buf), 0x04);
	CHECK_EQ(ld24(buf + 9), v->sq_psn);
	CHECK(!memcmp(buf + 12, v->buf + OFF_SRC, 40));
	pkt_new(&k, v);
	f.syn = 0x1f;
	build(&k, 0x11, v->sq_psn, 0, &f, 0);
	send_pkt(&k);
	wc_expect(v, wr.wr_id, IBV_WC_SUCCESS);
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = 0x100000;
	wr.wr.rdma.rkey = 0x4242;
	wr.wr_id = wr_id(v, K_SEND, 2);
	own(v, &wr, OFF_READ, 2000);
	expect_op(buf, sizeof(buf), 0x0c);
	CHECK_EQ(ld24(buf + 9), PSN(v->sq_psn + 1));
	CHECK_EQ(ld32(buf + 24), 2000);
	pkt_new(&k, v);
	build(&k, 0x0d, PSN(v->sq_psn + 1), 0, &f, mtu);
	memset(k.b + 16, 'r', mtu);
	send_pkt(&k);
	pkt_new(&k, v);
	build(&k, 0x0f, PSN(v->sq_psn + 2), 0, &f, 2000 - mtu);
	memset(k.b + 16, 's', 2000 - mtu);
	send_pkt(&k);
	wc_expect(v, wr.wr_id, IBV_WC_SUCCESS);
	for (unsigned i = 0; i < 2000; i++)
		CHECK_EQ(rd[i], i < mtu ? 'r' : 's');
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = 0x100008;
	wr.wr.atomic.rkey = 0x4242;
	wr.wr.atomic.compare_add = 1;
	wr.wr_id = wr_id(v, K_SEND, 3);
	own(v, &wr, OFF_ATOM, 8);
	expect_op(buf, sizeof(buf), 0x14);
	CHECK_EQ(ld24(buf + 9), PSN(v->sq_psn + 3));
	pkt_new(&k, v);
	f.orig = 0x1122334455667788ull;
	build(&k, 0x12, PSN(v->sq_psn + 3), 0, &f, 0);
	send_pkt(&k);
	wc_expect(v, wr.wr_id, IBV_WC_SUCCESS);
	memcpy(&got, v->buf + OFF_ATOM, 8);
	CHECK_EQ(got, 0x1122334455667788ull);
	CHECK_EQ(qp_state(v), IBV_QPS_RTS);
}

/* ------------------------------------------------------------- cases -- */

int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

/* The first MR of a process opens a descriptor of /proc/self/maps that
 * the library keeps (src/verbs/memcheck.c): opened before the count. */
static void warm_up(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	static char b[64];

	CHECK(l && l[0]);
	ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	CHECK(ctx);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	mr = ibv_reg_mr(pd, b, sizeof(b), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

SV_TEST_T(rc_fuzz, 900)
{
	const char *env = getenv("SV_FUZZ_SECONDS");
	const char *seed_env = getenv("SV_FUZZ_SEED");
	const char *trace_env = getenv("SV_FUZZ_TRACE");
	int secs = env && atoi(env) > 0 ? atoi(env) : 5;
	struct sv_status_rep st0, st1;
	struct timespec t0, t;
	unsigned fds0;
	size_t heap0;
	struct host h;
	struct victim v;

	seed = seed_env ? strtoull(seed_env, NULL, 0) :
			  (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^
				  (uint64_t)time(NULL);
	if (!seed)
		seed = 1;
	rs = seed;
	printf("wire fuzz: seed %llu, %d s\n", (unsigned long long)seed, secs);
	fflush(stdout);
	if (trace_env)
		CHECK((trace = fopen(trace_env, "w")));
	fake_hosts(&h);
	/* Jumbo frames: path MTUs up to 4096 (the port's active MTU follows
	 * the links', docs/wire.md "Path MTU"). */
	sv_test_sh("ip link set svw0 mtu 9000");
	sv_test_sh("nsenter --net=/proc/%d/ns/net ip link set svw1 mtu 9000",
		   (int)h.pid);
	warm_up();
	sv_test_baseline(&st0);
	fds0 = count_fds();
	heap0 = mallinfo2().uordblks;
	victim_open(&v);
	the_victim = &v;
	connect_qp(&v);
	model_reset(&v);
	post_recvs(&v);
	CHECK_EQ(sv_test_status(&st1), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		enum ibv_qp_state s;
		int answered;

		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= secs)
			break;
		if (v.sends_out < 8 && chance(30))
			post_own(&v);
		burst(&v);
		if (trace)
			fflush(trace); /* a failing case ends with _exit */
		s = settle(&v, &answered);
		reap(&v);
		async_events(&v);
		/* Each time the stranger spoke: before others write over
		 * what it may have written. */
		if (z.strange || z.bursts % 16 == 0)
			check_memory(&v);
		z.strange = 0;
		if (s == IBV_QPS_RTS) {
			z.quiet = answered ? 0 : z.quiet + 1;
			if (z.quiet < 5) {
				post_recvs(&v);
				continue;
			}
			/* Silent five times in RTS: we lost track of its
			 * PSN (or it hangs; the exchange afterwards says). */
			z.resyncs++;
		} else {
			z.resets++; /* ERR: as it should for some packets */
		}
		check_memory(&v);
		recover(&v);
	}
	reap(&v);
	async_events(&v);
	check_memory(&v);
	printf("wire fuzz: %llu packets in %llu bursts (%llu from the "
	       "stranger, %llu with a bad ICRC); the victim sent %llu (%llu "
	       "requests of its %llu posted); %llu resets after ERR, %llu "
	       "resyncs, %llu silent bursts; %llu completions ok, %llu with "
	       "errors; %llu async events\n",
	       (unsigned long long)z.sent, (unsigned long long)z.bursts,
	       (unsigned long long)z.stranger, (unsigned long long)z.bad_icrc,
	       (unsigned long long)z.answers, (unsigned long long)z.vreqs,
	       (unsigned long long)z.posted, (unsigned long long)z.resets,
	       (unsigned long long)z.resyncs, (unsigned long long)z.silent,
	       (unsigned long long)z.cqe_ok, (unsigned long long)z.cqe_err,
	       (unsigned long long)z.events);
	fflush(stdout);
	/* Every RC opcode of table 39 went out. */
	for (unsigned op = 0; op < 0x20; op++)
		if (fake_hdrs[op] && !z.by_op[op])
			sv_test_fail(__FILE__, __LINE__, "opcode %#x never sent", op);
	/* The daemon holds what it held before the fuzz. */
	daemon_back_to(&st1, "after the fuzz");
	legit(&v);
	check_memory(&v);
	async_events(&v);
	victim_close(&v);
	daemon_back_to(&st0, "after the victim closed");
	CHECK_EQ(count_fds(), fds0);
	/* The heap in use: what the first packets, resets and completions
	 * left (a few KiB, the same after 1 s as after 10), not what each
	 * of them left.  The sanitizer build asks LeakSanitizer instead. */
	if (mallinfo2().uordblks > heap0 + 32768)
		sv_test_fail(__FILE__, __LINE__, "the heap grew from %zu to %zu bytes",
			     heap0, mallinfo2().uordblks);
	if (__lsan_do_recoverable_leak_check)
		CHECK_EQ(__lsan_do_recoverable_leak_check(), 0);
	if (trace)
		fclose(trace);
	fake_hosts_done(&h);
}

/* A response to the victim's READ: op at psn, len bytes of fill. */
static void read_response(const struct victim *v, uint8_t op, uint32_t psn,
			  uint32_t len, uint8_t fill)
{
	static struct fake_pkt k;
	struct fake_fields f = { .syn = 0x1f };

	pkt_new(&k, v);
	build(&k, op, psn, 0, &f, len);
	memset(k.b + (op == 0x0e ? 12 : 16), fill, len);
	send_pkt(&k);
}

/* The victim READs len bytes into its first READ slot (filled with
 * UNREAD first); returns the PSN of its request. */
static uint32_t victim_read(struct victim *v, uint64_t id, uint32_t len)
{
	struct ibv_send_wr wr;
	uint8_t buf[4200];

	memset(v->buf + OFF_READ, UNREAD, READ_MAX);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = 0x100000;
	wr.wr.rdma.rkey = 0x4242;
	wr.wr_id = id;
	own(v, &wr, OFF_READ, len);
	expect_op(buf, sizeof(buf), 0x0c);
	CHECK_EQ(ld32(buf + 24), len);
	return ld24(buf + 9);
}

/* Bytes [from, to) of the victim's first READ slot are all c. */
static void read_holds(const struct victim *v, uint32_t from, uint32_t to,
		       uint8_t c)
{
	for (uint32_t i = from; i < to; i++)
		if (v->buf[OFF_READ + i] != c)
			sv_test_fail(__FILE__, __LINE__,
				     "byte %u of the READ is %#x, not %#x", i,
				     v->buf[OFF_READ + i], c);
}

/*
 * What the fuzzer found first: a READ response shorter than the path MTU
 * where the READ has more to come was taken.  A short last one (or only
 * one) completed the READ with success although the bytes after it
 * never arrived (here 1124..1999 stayed as they were: the true last
 * response came after the READ was done and was ignored); a short first
 * or middle one left the READ's progress off the MTU grid, so the
 * responses after it never fitted and the READ was asked again until its
 * retries ran out.  Such a response is malformed: dropped, as a corrupt
 * packet is, and the true ones complete the READ.
 */
SV_TEST_T(short_read_responses_are_dropped, 120)
{
	struct host h;
	struct victim v;
	uint32_t psn;

	fake_hosts(&h);
	victim_open(&v);
	calm = 1;
	connect_qp(&v);
	/* 2000 bytes: first 1024, then a last of 100, then the true last. */
	psn = victim_read(&v, wr_id(&v, K_READ, 0), 2000);
	read_response(&v, 0x0d, psn, 1024, 'r');
	read_response(&v, 0x0f, PSN(psn + 1), 100, 'x');
	read_response(&v, 0x0f, PSN(psn + 1), 976, 's');
	wc_expect(&v, wr_id(&v, K_READ, 0), IBV_WC_SUCCESS);
	read_holds(&v, 0, 1024, 'r');
	read_holds(&v, 1024, 2000, 's');
	/* 3000 bytes: a middle of 500 among them. */
	psn = victim_read(&v, wr_id(&v, K_READ, 1), 3000);
	read_response(&v, 0x0d, psn, 1024, 'a');
	read_response(&v, 0x0e, PSN(psn + 1), 500, 'x');
	read_response(&v, 0x0e, PSN(psn + 1), 1024, 'b');
	read_response(&v, 0x0f, PSN(psn + 2), 952, 'c');
	wc_expect(&v, wr_id(&v, K_READ, 1), IBV_WC_SUCCESS);
	read_holds(&v, 0, 1024, 'a');
	read_holds(&v, 1024, 2048, 'b');
	read_holds(&v, 2048, 3000, 'c');
	/* And a READ of one packet: an only response of 2 bytes, then the
	 * true one. */
	psn = victim_read(&v, wr_id(&v, K_READ, 2), 591);
	read_response(&v, 0x10, psn, 2, 'x');
	read_response(&v, 0x10, psn, 591, 'o');
	wc_expect(&v, wr_id(&v, K_READ, 2), IBV_WC_SUCCESS);
	read_holds(&v, 0, 591, 'o');
	CHECK_EQ(qp_state(&v), IBV_QPS_RTS);
	victim_close(&v);
	fake_hosts_done(&h);
}

/*
 * A READ request whose PSN is behind the one expected is a repeat: the
 * responder answers it again (9.7.5.1.2) -- but only if it could have
 * answered it the first time.  A QP without remote READ answered such a
 * "repeat" with the bytes it named (their rkey allowing remote READ),
 * though it never executed a READ: one packet with an old PSN read what
 * the QP's access flags refuse.  Now the repeat is dropped; the
 * duplicate SEND after it is ACKed, and that ACK is the next packet.
 */
SV_TEST_T(repeated_read_needs_remote_read, 120)
{
	static struct fake_pkt k;
	struct fake_fields f;
	struct host h;
	struct victim v;
	uint8_t buf[4200];

	fake_hosts(&h);
	victim_open(&v);
	calm = 1;
	calm_access = IBV_ACCESS_REMOTE_WRITE;
	connect_qp(&v);
	post_recvs(&v);
	/* A SEND takes PSN rq_psn: a READ there is a repeat from now on. */
	memset(&f, 0, sizeof(f));
	pkt_new(&k, &v);
	build(&k, 0x04, v.rq_psn, 1, &f, 16);
	send_pkt(&k);
	expect_op(buf, sizeof(buf), 0x11);
	CHECK_EQ(ld24(buf + 9), v.rq_psn);
	pkt_new(&k, &v);
	f.va = (uintptr_t)v.buf + OFF_A;
	f.rkey = v.a->rkey;
	f.dma_len = 64;
	build(&k, 0x0c, v.rq_psn, 1, &f, 0);
	send_pkt(&k);
	pkt_new(&k, &v);
	build(&k, 0x04, v.rq_psn, 1, &f, 0);
	send_pkt(&k);
	next_pkt(buf, sizeof(buf));
	CHECK_EQ(buf[0], 0x11); /* not a READ response */
	CHECK_EQ(buf[12] & 0xe0, 0);
	CHECK_EQ(ld24(buf + 9), v.rq_psn);
	CHECK_EQ(qp_state(&v), IBV_QPS_RTS);
	victim_close(&v);
	fake_hosts_done(&h);
}

SV_TEST_MAIN()

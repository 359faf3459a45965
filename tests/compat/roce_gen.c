/* SPDX-License-Identifier: MIT */
/*
 * RoCE v2 packets for the decoder tests (tests/compat/capture.sh): every
 * opcode of the engine's table (src/engine/sv_opcode.c) with the headers
 * the table gives it, built with the engine's own header writers
 * (sv_hdr.h), in IPv4 and IPv6, with ACK/NAK/RNR NAK syndromes, immediate
 * data, IETH, DETH, odd payload lengths and their pad, and varied
 * traffic class, flow label and hop limit (what the GRH holds on IB).
 *
 *   roce_gen pcap FILE MANIFEST      the pcap, written directly (sv_roce.c)
 *   roce_gen produce MANIFEST [--repeat N] [--qpn-base Q] [--fake-pid P]
 *                                    the same packets as a fake engine:
 *     attaches (to read the key table's capture count), hands the daemon a
 *     capture ring (SV_OP_CAPTURE_RING), waits until a capture runs, writes
 *     one record per packet (N times over), waits until the daemon took
 *     them all, prints "produced K" and exits
 *   roce_gen count                   prints the key table's capture count
 *
 * MANIFEST: one line per packet, tab-separated: index, opcode, DestQP,
 * PSN, ipv6, source address, destination address, IBTA length, pad
 * count, local QPN, opcode name.
 */
#include "engine_int.h"
#include "sv_client.h"
#include "sv_hdr.h"
#include "sv_keytab.h"
#include "sv_ring.h"
#include "sv_roce.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAXPKT 512

struct gpkt {
	struct sv_roce_flow flow;
	uint8_t ib[4200];
	size_t ib_len;
	uint32_t qpn; /* local QP */
	uint8_t opcode;
	int pad;
	uint32_t dqpn, psn;
};

static struct gpkt pkts[MAXPKT];
static int npkts;

static void die(const char *what, int err)
{
	fprintf(stderr, "roce_gen: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static void addr4(uint8_t *g, const char *s)
{
	memset(g, 0, 16);
	g[10] = g[11] = 0xff;
	if (inet_pton(AF_INET, s, g + 12) != 1)
		die("inet_pton", EINVAL);
}

static void addr6(uint8_t *g, const char *s)
{
	if (inet_pton(AF_INET6, s, g) != 1)
		die("inet_pton", EINVAL);
}

/* One packet of opcode op; syn is the AETH syndrome where there is one. */
static void add(uint8_t op, int v6, size_t paylen, uint8_t syn,
		uint32_t qpn_base)
{
	uint32_t f = sv_opcodes[op].flags;
	struct gpkt *p = &pkts[npkts];
	int i = npkts++;
	uint8_t *h;
	int pad;

	if (npkts > MAXPKT)
		die("too many packets", ENOSPC);
	if (!(f & OP_PAYLOAD))
		paylen = 0;
	pad = (int)((4 - paylen % 4) % 4);
	p->opcode = op;
	p->pad = pad;
	p->dqpn = (qpn_base + 2 * (uint32_t)i) & 0xffffff;
	p->qpn = (p->dqpn + 1) & 0xffffff;
	/* PSNs all over the 24-bit space, near the wrap too. */
	p->psn = (i % 5 == 4) ? (0xffffff - (uint32_t)i) :
				(uint32_t)i * 7919u & PSN_MASK;
	h = p->ib;
	bth_init(h, op, i % 3 == 0, 0xffff, p->dqpn, (f & OP_REQ) && i % 2,
		 p->psn);
	h[1] |= (uint8_t)(pad << 4);
	h += SV_BTH_BYTES;
	if (f & OP_DETH) {
		deth_set(h, 0x11111111u + (uint32_t)i, p->qpn);
		h += SV_DETH_BYTES;
	}
	if (f & OP_RETH) {
		reth_set(h, 0x7f0000001000ull + (uint64_t)i * 4096,
			 0x1234500u + (uint32_t)i,
			 (f & OP_READ) ? 8192 : (uint32_t)paylen);
		h += SV_RETH_BYTES;
	}
	if (f & OP_ATMETH) {
		atmeth_set(h, 0x7f0000002000ull + (uint64_t)i * 8,
			   0xabc00u + (uint32_t)i, 0x1111222233334444ull,
			   0x5555666677778888ull);
		h += SV_ATMETH_BYTES;
	}
	if (f & OP_AETH) {
		aeth_set(h, syn, (uint32_t)i * 3);
		h += SV_AETH_BYTES;
	}
	if (f & OP_ATMACK) {
		atmack_set(h, 0x0123456789abcdefull ^ (uint64_t)i);
		h += SV_ATMACK_BYTES;
	}
	if (f & OP_IMM) {
		immdt_set_raw(h, htonl(0xc0de0000u + (uint32_t)i));
		h += SV_IMMDT_BYTES;
	}
	if (f & OP_IETH) {
		ieth_set(h, 0x99000u + (uint32_t)i);
		h += SV_IETH_BYTES;
	}
	for (size_t k = 0; k < paylen; k++)
		*h++ = (uint8_t)(k * 31 + (size_t)i);
	memset(h, 0, (size_t)pad);
	h += pad;
	p->ib_len = (size_t)(h - p->ib);

	memset(&p->flow, 0, sizeof(p->flow));
	p->flow.ipv6 = (uint8_t)v6;
	/* GRH-like fields: DSCP/ECN, flow label, hop limit. */
	p->flow.tclass = (uint8_t[]){ 0, 0x68, 0x03, 0xb8 }[i % 4];
	p->flow.hop_limit = (uint8_t[]){ 64, 1, 255, 128 }[i % 4];
	p->flow.flow_label = v6 ? (i % 2 ? 0xabcde : (uint32_t)i) : 0;
	p->flow.sport = (uint16_t)(49152 + (p->qpn & 0x3fff));
	p->flow.dport = SV_ROCE_PORT;
	if (v6) {
		char s[64];

		snprintf(s, sizeof(s), "2001:db8::%x", 1 + i % 200);
		addr6(p->flow.sgid, s);
		snprintf(s, sizeof(s), "2001:db8:1::%x", 1 + i % 100);
		addr6(p->flow.dgid, s);
	} else {
		char s[32];

		snprintf(s, sizeof(s), "198.51.100.%d", 1 + i % 200);
		addr4(p->flow.sgid, s);
		snprintf(s, sizeof(s), "203.0.113.%d", 1 + i % 200);
		addr4(p->flow.dgid, s);
	}
}

static void catalogue(uint32_t qpn_base)
{
	static const size_t lens[] = { 0, 1, 3, 256, 1023, 4096 };
	static const uint8_t syns[] = {
		SV_AETH_ACK | SV_AETH_ACK_UNLIMITED,
		SV_AETH_ACK | 3,
		SV_AETH_NAK | SV_NAK_PSN_SEQ,
		SV_AETH_NAK | SV_NAK_INV_REQ,
		SV_AETH_NAK | SV_NAK_REM_ACCESS,
		SV_AETH_NAK | SV_NAK_REM_OP,
		SV_AETH_RNR_NAK | 14,
	};
	int n = 0;

	npkts = 0;
	for (int op = 0; op < 256; op++) {
		if (!(sv_opcodes[op].flags & OP_VALID))
			continue;
		for (int v6 = 0; v6 <= 1; v6++) {
			add((uint8_t)op, v6, lens[n % 6], syns[0], qpn_base);
			n++;
		}
	}
	/* Every ACK syndrome the responder sends, both address families. */
	for (size_t s = 0; s < sizeof(syns); s++)
		for (int v6 = 0; v6 <= 1; v6++)
			add(0x11, v6, 0, syns[s], qpn_base);
	/* Payload lengths and pads around the MTU, on SEND and WRITE. */
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		add(0x04, (int)l % 2, lens[l], 0, qpn_base);
		add(0x2a, (int)(l + 1) % 2, lens[l] + 2, 0, qpn_base);
		add(0x64, (int)l % 2, lens[l] + 1, 0, qpn_base);
	}
}

static void fmt_addr(const struct gpkt *p, const uint8_t *g, char *s, size_t n)
{
	if (p->flow.ipv6)
		inet_ntop(AF_INET6, g, s, (socklen_t)n);
	else
		inet_ntop(AF_INET, g + 12, s, (socklen_t)n);
}

static void manifest(const char *path, int repeat)
{
	FILE *f = fopen(path, "w");

	if (!f)
		die(path, errno);
	for (int r = 0; r < repeat; r++)
		for (int i = 0; i < npkts; i++) {
			const struct gpkt *p = &pkts[i];
			char s[64], d[64];

			fmt_addr(p, p->flow.sgid, s, sizeof(s));
			fmt_addr(p, p->flow.dgid, d, sizeof(d));
			fprintf(f, "%d\t%u\t%u\t%u\t%d\t%s\t%s\t%zu\t%d\t%u\t%s\n",
				r * npkts + i, p->opcode, p->dqpn, p->psn,
				p->flow.ipv6, s, d, p->ib_len, p->pad, p->qpn,
				sv_opcodes[p->opcode].name);
		}
	if (fclose(f))
		die(path, errno);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int write_pcap(const char *path)
{
	static uint8_t frame[SV_ROCE_IP6_HDR + SV_ROCE_UDP_HDR + 4200 + 4];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int err;

	if (fd < 0)
		die(path, errno);
	err = sv_pcap_header(fd);
	for (int i = 0; i < npkts && !err; i++) {
		size_t len = sv_roce_frame(frame, sizeof(frame), &pkts[i].flow,
					   pkts[i].ib, pkts[i].ib_len);

		if (!len)
			die("sv_roce_frame", EINVAL);
		err = sv_pcap_record(fd, now_ns(), frame, len);
	}
	if (err)
		die(path, err);
	close(fd);
	return 0;
}

/* The key table (read-only), through an engine attach as an engine gets
 * it.  Also returns our engine's control call's doorbell. */
static const struct sv_keytab_hdr *attach(void)
{
	struct sv_engine_attach_rep rep;
	int db = eventfd(0, EFD_CLOEXEC), fds[2];
	struct sv_call c = { .op = SV_OP_ENGINE_ATTACH,
			     .attach_fd = -1,
			     .fds = &db,
			     .nfds = 1,
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = fds,
			     .max_rfds = 2 };
	void *kt;
	int err;

	if (db < 0)
		die("eventfd", errno);
	err = sv_call(&c);
	if (err || c.nrfds != 2)
		die("ENGINE_ATTACH", err ? err : EPROTO);
	kt = mmap(NULL, rep.kt_size, PROT_READ, MAP_SHARED, fds[1], 0);
	if (kt == MAP_FAILED)
		die("mmap key table", errno);
	close(fds[1]);
	/* fds[0], the engine socket, stays open: it is our engine. */
	return kt;
}

static int produce(int repeat, uint32_t fake_pid)
{
	const struct sv_keytab_hdr *kt = attach();
	const size_t size = SV_RING_DATA_OFF + (4u << 20);
	struct sv_capture_ring_req req = { .ring_size = size };
	struct sv_ring_prod prod;
	struct sv_ring_hdr *h;
	int fd, db = -1, err, produced = 0;
	struct sv_call c = { .op = SV_OP_CAPTURE_RING,
			     .attach_fd = -1,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rfds = &db,
			     .max_rfds = 1 };

	fd = memfd_create("roce_gen-capture", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		die("capture ring memfd", errno);
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		die("mmap ring", errno);
	sv_ring_init(h, size, (uint32_t)getpid());
	sv_ring_prod_init(&prod, h);
	c.fds = &fd;
	c.nfds = 1;
	err = sv_call(&c);
	if (err || c.nrfds != 1)
		die("CAPTURE_RING", err ? err : EPROTO);
	close(fd);
	/* An engine copies packets only while a capture runs. */
	for (int waited = 0; !atomic_load(&((struct sv_keytab_hdr *)kt)->capture);
	     waited++) {
		if (waited > 20000)
			die("no capture started", ETIMEDOUT);
		usleep(1000);
	}
	for (int r = 0; r < repeat; r++)
		for (int i = 0; i < npkts; i++) {
			const struct gpkt *p = &pkts[i];
			struct sv_cap_rec rec = { .ts_ns = now_ns(),
						  .dir = (uint32_t)(i % 2),
						  .ib_len = (uint32_t)p->ib_len,
						  .pid = fake_pid ? fake_pid :
								    (uint32_t)getpid(),
						  .qpn = p->qpn,
						  .flow = p->flow };
			uint8_t *dst;

			for (int tries = 0;
			     !(dst = sv_ring_reserve(&prod, (uint32_t)(sizeof(rec) + p->ib_len),
						     SV_REC_CAPTURE));
			     tries++) {
				/* Full: the daemon drains it; wait as an
				 * engine would (or drop, in a real one). */
				if (tries > 200000)
					die("capture ring stays full", ETIMEDOUT);
				usleep(50);
			}
			memcpy(dst, &rec, sizeof(rec));
			memcpy(dst + sizeof(rec), p->ib, p->ib_len);
			if (sv_ring_commit(&prod)) {
				uint64_t one = 1;

				if (write(db, &one, sizeof(one)) < 0)
					die("doorbell", errno);
			}
			produced++;
		}
	/* Done when the daemon has taken everything. */
	for (int waited = 0; atomic_load(&h->head) != prod.tail; waited++) {
		if (waited > 20000)
			die("daemon does not drain the ring", ETIMEDOUT);
		usleep(1000);
	}
	printf("produced %d\n", produced);
	return 0;
}

int main(int argc, char **argv)
{
	uint32_t qpn_base = 0x100, fake_pid = 0;
	int repeat = 1;

	for (int i = 3; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--repeat"))
			repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--qpn-base"))
			qpn_base = (uint32_t)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--fake-pid"))
			fake_pid = (uint32_t)strtoul(argv[++i], NULL, 0);
	}
	catalogue(qpn_base);
	if (argc >= 4 && !strcmp(argv[1], "pcap")) {
		manifest(argv[3], 1);
		return write_pcap(argv[2]);
	}
	if (argc >= 3 && !strcmp(argv[1], "produce")) {
		manifest(argv[2], repeat);
		return produce(repeat, fake_pid);
	}
	if (argc == 2 && !strcmp(argv[1], "count")) {
		const struct sv_keytab_hdr *kt = attach();

		printf("%u\n", atomic_load(&((struct sv_keytab_hdr *)kt)->capture));
		return 0;
	}
	fprintf(stderr, "usage: roce_gen pcap FILE MANIFEST | produce MANIFEST "
			"[--repeat N] [--qpn-base Q] [--fake-pid P] | count\n");
	return 2;
}

/* SPDX-License-Identifier: MIT */
/*
 * A flood of valid RoCE v2 packets to QPs that do not exist (docs/wire.md
 * "Hostile packets"): UD SEND-only packets (BTH + DETH + 16 bytes of
 * payload) with a correct ICRC, each to another random QPN in
 * 0x800000-0xffffff (softverbs numbers its QPs upwards from a few
 * thousand, so none of them is live), sent over IPv4 to DEST's UDP port
 * 4791 at RATE packets per second for SECONDS seconds.  The pacing is an
 * absolute schedule: a batch of packets (one sendmmsg) every
 * BATCH / RATE seconds, clock_nanosleep between batches; a sender that
 * fell behind catches up, so the average rate is RATE as long as the
 * machine keeps up, and it never sends past SECONDS + 1 s.  SIGINT or
 * SIGTERM ends it early, with the same report (bench/wire_flood.sh
 * starts it before an ibv_rc_pingpong pair and stops it after).
 *
 *   roce_flood [-b BATCH] DEST RATE SECONDS
 *     DEST     IPv4 address (only documentation ranges in the benches)
 *     RATE     packets per second
 *     SECONDS  how long (fractions allowed)
 *     -b       packets per sendmmsg (default RATE / 1000, 1 to 64)
 *
 *   prints "roce_flood sent N packets in T s: R packets/s (asked RATE),
 *   E send errors" (a failed sendmmsg is counted and its packets sent in
 *   a later batch); exit status 0 when it sent every packet of the
 *   schedule up to its end or the signal, 1 when it fell behind.
 */
#include "sv_roce.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH 64
#define PAYLOAD 16
#define IB_LEN (12 + 8 + PAYLOAD) /* BTH, DETH, payload (no pad) */
#define OP_UD_SEND_ONLY 0x64
#define QKEY 0x11111111u
#define SRC_QPN 0x123456u

static volatile sig_atomic_t stopped;

static void on_stop(int sig)
{
	(void)sig;
	stopped = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: roce_flood [-b BATCH] DEST RATE SECONDS\n");
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static void v4map(uint8_t g[16], struct in_addr a)
{
	memset(g, 0, 16);
	g[10] = g[11] = 0xff;
	memcpy(g + 12, &a, 4);
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	/* xorshift64*: a different QPN per packet, nothing more. */
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return (uint32_t)((rnd_state * 0x2545f4914f6cdd1dull) >> 32);
}

/* One UD SEND-only packet to a missing QPN, PSN psn, with its ICRC. */
static void build(uint8_t *p, const struct sv_roce_flow *f, uint32_t psn)
{
	uint32_t icrc;

	memset(p, 0, IB_LEN);
	p[0] = OP_UD_SEND_ONLY;
	p[2] = p[3] = 0xff; /* P_Key */
	be24(p + 5, 0x800000u | (rnd() & 0x7fffffu));
	be24(p + 9, psn & 0xffffff);
	p[12] = (uint8_t)(QKEY >> 24); /* DETH: Q_Key, source QPN */
	be24(p + 13, QKEY & 0xffffff);
	be24(p + 17, SRC_QPN);
	memset(p + 20, 0x5a, PAYLOAD);
	icrc = sv_icrc(f, p, IB_LEN);
	memcpy(p + IB_LEN, &icrc, 4);
}

int main(int argc, char **argv)
{
	static uint8_t pkt[MAX_BATCH][IB_LEN + 4];
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons(SV_ROCE_PORT) };
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	struct mmsghdr mm[MAX_BATCH];
	struct iovec iov[MAX_BATCH];
	struct sv_roce_flow f;
	struct timespec ts;
	struct sigaction sa;
	uint64_t rate, total, sent = 0, errs = 0, period, start, next, stop, t;
	uint64_t due;
	uint32_t psn = 0;
	double secs;
	long batch = 0;
	int fd, probe, c, pmtu = IP_PMTUDISC_DO;

	while ((c = getopt(argc, argv, "b:")) != -1) {
		if (c != 'b')
			usage();
		batch = strtol(optarg, NULL, 0);
		if (batch < 1 || batch > MAX_BATCH)
			usage();
	}
	if (argc - optind != 3 ||
	    inet_pton(AF_INET, argv[optind], &dst.sin_addr) != 1)
		usage();
	rate = strtoull(argv[optind + 1], NULL, 0);
	secs = strtod(argv[optind + 2], NULL);
	if (rate < 1 || rate > 10000000 || !(secs > 0 && secs <= 3600))
		usage();
	if (!batch)
		batch = rate / 1000 < 1 ? 1 : rate / 1000 > MAX_BATCH ? MAX_BATCH
								   : (long)(rate / 1000);
	total = (uint64_t)(rate * secs + 0.5);
	period = (uint64_t)(1e9 * (double)batch / (double)rate);

	/* The source address and port go into the ICRC: the address the
	 * route to DEST takes (a connected probe says which), the port our
	 * own socket got.  DF set, as sv_icrc assumes. */
	probe = socket(AF_INET, SOCK_DGRAM, 0);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (probe < 0 || fd < 0 ||
	    connect(probe, (struct sockaddr *)&dst, sizeof(dst)) < 0 ||
	    getsockname(probe, (struct sockaddr *)&me, &ml) < 0) {
		perror("roce_flood: socket");
		return 1;
	}
	close(probe);
	me.sin_port = 0;
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&me, &ml) < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) < 0) {
		perror("roce_flood: bind");
		return 1;
	}
	memset(&f, 0, sizeof(f));
	v4map(f.sgid, me.sin_addr);
	v4map(f.dgid, dst.sin_addr);
	f.sport = ntohs(me.sin_port);
	f.dport = SV_ROCE_PORT;
	f.hop_limit = 64;
	for (int i = 0; i < MAX_BATCH; i++) {
		iov[i].iov_base = pkt[i];
		iov[i].iov_len = IB_LEN + 4;
		memset(&mm[i], 0, sizeof(mm[i]));
		mm[i].msg_hdr.msg_name = &dst;
		mm[i].msg_hdr.msg_namelen = sizeof(dst);
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop; /* no SA_RESTART: the sleep ends at once */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	start = next = now_ns();
	stop = start + (uint64_t)(secs * 1e9) + 1000000000ull;
	while (!stopped && sent < total && (t = now_ns()) < stop) {
		unsigned n = (unsigned)(total - sent < (uint64_t)batch ? total - sent
								   : (uint64_t)batch);
		int r;

		if (t < next) {
			ts.tv_sec = (time_t)(next / 1000000000ull);
			ts.tv_nsec = (long)(next % 1000000000ull);
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
					       NULL) == EINTR && !stopped)
				;
			if (stopped)
				break;
		}
		next += period;
		for (unsigned i = 0; i < n; i++)
			build(pkt[i], &f, psn++);
		r = sendmmsg(fd, mm, n, 0);
		if (r < 0) {
			/* ENOBUFS and the like: the packets are lost, counted. */
			errs += n;
			continue;
		}
		sent += (uint64_t)r;
		errs += n - (unsigned)r;
	}
	t = now_ns() - start;
	/* What the schedule asked for by now (all of it, unless stopped). */
	due = stopped ? (uint64_t)((double)rate * (double)t / 1e9) : total;
	printf("roce_flood sent %llu packets in %.3f s: %.0f packets/s (asked %llu), "
	       "%llu send errors\n",
	       (unsigned long long)sent, (double)t / 1e9,
	       (double)sent * 1e9 / (double)(t ? t : 1),
	       (unsigned long long)rate, (unsigned long long)errs);
	fflush(stdout);
	/* Behind by more than two batches: the machine did not keep up. */
	return sent + 2 * (uint64_t)batch >= (due < total ? due : total) ? 0 : 1;
}

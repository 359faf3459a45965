/* SPDX-License-Identifier: MIT */
/*
 * The floor of moving a stream in UDP datagrams between two hosts: what
 * the kernel's UDP path gives a design that is as cheap as a datagram
 * design can be, measured beside softverbs' RoCE figures
 * (bench/wire_bench.sh).  No RoCE, no ICRC, no acknowledgements, no
 * window: the sender sends trains of datagrams of one size with UDP
 * segmentation offload (UDP_SEGMENT, as softverbs' trains) straight from
 * a 1 MiB source buffer (one copy, the kernel's, as TCP's sender does);
 * the receiver reads with UDP_GRO and recvmmsg and copies each
 * datagram's payload into a 1 MiB destination buffer, as a responder
 * places a WRITE (the kernel's copy and one of its own).
 *
 *   udp_floor recv PORT SECONDS [ack]    prints "MB/s cpu_s_per_GB"
 *   udp_floor send ADDR PORT SECONDS PAYLOAD [roce]
 *
 * The receiver counts from its first datagram for SECONDS (or until the
 * sender has been quiet for a second); the sender sends for SECONDS plus
 * one.  Each datagram carries a 16-byte header (a RoCE packet's BTH and
 * ICRC) before PAYLOAD bytes.  IPv4 only.  For the sender, FLOOR_K=N
 * sends trains of at most N datagrams (64 or 65,000 bytes at most, as
 * softverbs), and FLOOR_STAGE=1 copies each payload into a ring of
 * packet buffers first, as softverbs' requester builds its packets.
 *
 * The RoCE-shaped floor ("roce" and "ack"): the same stream cut as
 * softverbs cuts a 64 KiB RDMA WRITE into packets of PAYLOAD bytes and
 * trains -- its first packet carries a 28-byte header (BTH and RETH), the
 * others 12 (BTH), each a 4-byte ICRC after it; the first train is the
 * FIRST packet and one MIDDLE (a train's segments are as long as its
 * first but the last), then trains of the rest -- one sendmmsg a message,
 * as softverbs' batch; and the receiver answers each datagram it reads (a
 * train, mostly) with one of 20 bytes (an ACK: BTH, AETH and ICRC), which
 * the sender reads after each message.  What RoCE's framing and
 * acknowledgements cost in UDP here, still with no ICRC computed, no
 * window, no parsing and no placement by PSN.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define HDR 16
#define BUF (1u << 20)
#define TRAIN_MAX 65000u
#define BATCH 16

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The result line: MB/s over the time since t0, and the CPU seconds
 * since c0 a GB. */
static void report(uint64_t bytes, double t0, double c0)
{
	printf("%.0f %.2f\n", (double)bytes / (now() - t0) / 1e6,
	       (cpu() - c0) / ((double)bytes / 1e9));
}

/* A send that failed for a moment (the socket's buffer, the receiver not
 * up yet): try again. */
static int transient(int err)
{
	return err == ENOBUFS || err == EAGAIN || err == ECONNREFUSED;
}

/* Datagrams of seg bytes in one train: 65,000 bytes, 64 at most. */
static unsigned train_pkts(unsigned seg)
{
	unsigned k = TRAIN_MAX / seg;

	return k > 64 ? 64 : k;
}

static int do_recv(int port, double secs, int ack)
{
	static uint8_t buf[BATCH][TRAIN_MAX + 1024], dst[BUF], ackb[20];
	static char ctl[BATCH][CMSG_SPACE(sizeof(int))];
	static struct sockaddr_in from[BATCH];
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	struct mmsghdr m[BATCH];
	struct iovec iov[BATCH];
	int s = socket(AF_INET, SOCK_DGRAM, 0), one = 1, sz = 32 << 20;
	double t0 = 0, last = 0, c0 = 0;
	uint64_t bytes = 0, off = 0;
	struct timeval tv = { 0, 100000 };

	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) ||
	    setsockopt(s, IPPROTO_UDP, UDP_GRO, &one, sizeof(one))) {
		perror("udp_floor recv");
		return 1;
	}
	if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
		setsockopt(s, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int n;

		for (int i = 0; i < BATCH; i++) {
			iov[i] = (struct iovec){ buf[i], sizeof(buf[i]) };
			m[i].msg_hdr = (struct msghdr){ .msg_name = &from[i],
							.msg_namelen = sizeof(from[i]),
							.msg_iov = &iov[i],
							.msg_iovlen = 1,
							.msg_control = ctl[i],
							.msg_controllen =
								sizeof(ctl[i]) };
		}
		n = recvmmsg(s, m, BATCH, 0, NULL);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR) {
				perror("recvmmsg");
				return 1;
			}
			if (t0 && now() - last > 1.0)
				break;
			continue;
		}
		last = now();
		for (int i = 0; ack && i < n; i++)
			sendto(s, ackb, sizeof(ackb), MSG_DONTWAIT,
			       (struct sockaddr *)&from[i], m[i].msg_hdr.msg_namelen);
		if (!t0) {
			t0 = last;
			c0 = cpu();
		}
		for (int i = 0; i < n; i++) {
			uint32_t len = m[i].msg_len, seg = len;

			for (struct cmsghdr *c = CMSG_FIRSTHDR(&m[i].msg_hdr); c;
			     c = CMSG_NXTHDR(&m[i].msg_hdr, c))
				if (c->cmsg_level == IPPROTO_UDP &&
				    c->cmsg_type == UDP_GRO) {
					int gs;

					memcpy(&gs, CMSG_DATA(c), sizeof(gs));
					seg = (uint32_t)gs;
				}
			for (uint32_t o = 0; o < len; o += seg) {
				uint32_t pl = (len - o < seg ? len - o : seg);

				if (pl <= HDR)
					continue;
				pl -= HDR;
				if (off + pl > BUF)
					off = 0;
				memcpy(dst + off, buf[i] + o + HDR, pl);
				off += pl;
				bytes += pl;
			}
		}
		if (last - t0 >= secs)
			break;
	}
	if (!t0) {
		fprintf(stderr, "udp_floor recv: nothing came\n");
		return 1;
	}
	report(bytes, t0, c0);
	return 0;
}

/* One 64 KiB message of packets of pl bytes as softverbs' trains (see
 * the top): fills mm[] (iovecs in v, UDP_SEGMENT in ctl) from src.
 * Returns how many datagrams (trains) it takes. */
#define MSG_BYTES 65536u
#define ROCE_TRAINS 8
static unsigned roce_message(const uint8_t *src, unsigned pl,
			     struct mmsghdr *mm, struct iovec *v,
			     char (*ctl)[CMSG_SPACE(sizeof(uint16_t))])
{
	static uint8_t first_hdr[28], hdr12[12], icrc[4];
	unsigned npk = MSG_BYTES / pl, k = train_pkts(pl + 16), t = 0, nv = 0;

	for (unsigned i = 0; i < npk; t++) {
		/* The first train: FIRST and one MIDDLE; then up to k. */
		unsigned n = i == 0 ? 2 : npk - i < k ? npk - i : k;
		uint16_t seg = (uint16_t)((i == 0 ? 28 : 12) + pl + 4);
		struct cmsghdr *c;

		mm[t].msg_hdr = (struct msghdr){ .msg_iov = v + nv,
						 .msg_control = ctl[t],
						 .msg_controllen = sizeof(ctl[t]) };
		for (unsigned j = 0; j < n; j++, i++) {
			v[nv++] = (struct iovec){ i ? hdr12 : first_hdr,
						  i ? 12u : 28u };
			v[nv++] = (struct iovec){ (void *)(src + (size_t)i * pl), pl };
			v[nv++] = (struct iovec){ icrc, 4 };
		}
		mm[t].msg_hdr.msg_iovlen = 3 * n;
		c = CMSG_FIRSTHDR(&mm[t].msg_hdr);
		c->cmsg_level = IPPROTO_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	}
	return t;
}

/* The RoCE-shaped stream on s until t0 + secs + 1, reading the ACKs
 * after each message.  Returns the bytes sent, or -1 (said why). */
static int64_t send_roce(int s, double t0, double secs, unsigned pl,
			 const uint8_t *src)
{
	static struct mmsghdr mm[ROCE_TRAINS];
	static struct iovec v[3 * 64 * ROCE_TRAINS];
	static char ctl[ROCE_TRAINS][CMSG_SPACE(sizeof(uint16_t))];
	uint8_t ack[64];
	uint64_t off = 0, sent = 0;

	while (now() - t0 < secs + 1) {
		unsigned t, done = 0;

		if (off + MSG_BYTES > BUF)
			off = 0;
		t = roce_message(src + off, pl, mm, v, ctl);
		while (done < t) {
			int r = sendmmsg(s, mm + done, t - done, 0);

			if (r < 0) {
				if (transient(errno))
					continue;
				perror("sendmmsg");
				return -1;
			}
			done += (unsigned)r;
		}
		sent += MSG_BYTES;
		off += MSG_BYTES;
		while (recv(s, ack, sizeof(ack), MSG_DONTWAIT) > 0)
			;
	}
	return (int64_t)sent;
}

static int do_send(const char *addr, int port, double secs, unsigned pl,
		   int roce)
{
	static uint8_t src[BUF];
	static uint8_t hdr[64][HDR];
	static uint8_t stage[64][4400];
	int staged = getenv("FLOOR_STAGE") != NULL;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	unsigned seg = pl + HDR, k = train_pkts(seg);
	struct iovec iov[64 * 2];
	int s = socket(AF_INET, SOCK_DGRAM, 0), g = (int)seg;
	uint64_t off = 0, sent = 0;
	double t0 = now(), c0 = cpu();

	if (getenv("FLOOR_K") && (unsigned)atoi(getenv("FLOOR_K")) < k)
		k = (unsigned)atoi(getenv("FLOOR_K"));
	if (s < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1 ||
	    connect(s, (struct sockaddr *)&a, sizeof(a)) ||
	    setsockopt(s, IPPROTO_UDP, UDP_SEGMENT, &g, sizeof(g))) {
		perror("udp_floor send");
		return 1;
	}
	memset(src, 0x5a, sizeof(src));
	if (roce) {
		int64_t r = send_roce(s, t0, secs, pl, src);

		if (r < 0)
			return 1;
		report((uint64_t)r, t0, c0);
		return 0;
	}
	while (now() - t0 < secs + 1) {
		for (unsigned i = 0; i < k; i++) {
			if (off + pl > BUF)
				off = 0;
			iov[2 * i] = (struct iovec){ hdr[i], HDR };
			iov[2 * i + 1] = (struct iovec){ src + off, pl };
			if (staged) {
				memcpy(stage[i], src + off, pl);
				iov[2 * i + 1].iov_base = stage[i];
			}
			off += pl;
		}
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 * k };

		if (sendmsg(s, &mh, 0) < 0) {
			if (transient(errno))
				continue;
			perror("sendmsg");
			return 1;
		}
		sent += (uint64_t)k * pl;
	}
	report(sent, t0, c0);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || (argc == 5 && !strcmp(argv[4], "ack"))) &&
	    !strcmp(argv[1], "recv"))
		return do_recv(atoi(argv[2]), atof(argv[3]), argc == 5);
	if ((argc == 6 || (argc == 7 && !strcmp(argv[6], "roce"))) &&
	    !strcmp(argv[1], "send") && atoi(argv[5]) > 0 &&
	    atoi(argv[5]) <= 9000 &&
	    (argc == 6 || (atoi(argv[5]) >= 256 && atoi(argv[5]) <= 4096 &&
			   MSG_BYTES % (unsigned)atoi(argv[5]) == 0)))
		return do_send(argv[2], atoi(argv[3]), atof(argv[4]),
			       (unsigned)atoi(argv[5]), argc == 7);
	fprintf(stderr, "usage: udp_floor recv PORT SECONDS [ack]\n"
			"       udp_floor send ADDR PORT SECONDS PAYLOAD [roce]\n"
			"       (roce: PAYLOAD a RoCE MTU, 256 to 4096)\n");
	return 2;
}

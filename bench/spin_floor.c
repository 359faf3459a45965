/* SPDX-License-Identifier: MIT */
/*
 * The floor under ib_write_lat between two hosts without a NIC: a UDP
 * ping-pong shaped as that test is (bench/wire_bench.sh runs it beside
 * softverbs' figure).  ib_write_lat's application never asks for the
 * message it waits for: it spins on a word of its memory until the
 * peer's WRITE lands there.  With no NIC to place it, a thread of the
 * target process must wake for each message, on a CPU the spinning
 * application holds -- unless the application's poll of its send CQ takes
 * it, as softverbs' does (docs/wire.md).  This program does only the
 * wake-up, in plain UDP: on each
 * side the main thread sends a datagram, polls a second socket for its
 * acknowledgement (as perftest polls its CQ for the WRITE's completion)
 * and then spins on a word; a receiver thread, blocked in recv(), stores
 * each datagram's sequence number into the word and sends the
 * acknowledgement.  No RoCE, no ICRC, no window: what is left is the
 * kernel's UDP path and the scheduler's wake-up of a sleeping thread
 * next to a spinning one.
 *
 *   spin_floor server PORT ITERS           (waits for the client)
 *   spin_floor client ADDR PORT ITERS      prints "typical_us p99_us"
 *
 * Latencies are one-way (half the round trip), as perftest's; typical is
 * the median.  PORT and PORT + 1 are used on both sides (data and
 * acknowledgements).  SPIN_FLOOR_ACK=0 leaves the acknowledgements out.
 * IPv4 only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 1000u

static int data_fd, ack_fd, use_ack = 1;
static uint16_t port;
static _Atomic uint32_t word;	       /* the target's memory */
static _Atomic uint32_t acked;	       /* the last placed (and acknowledged) */
static struct sockaddr_in peer;	       /* where our data goes */
static _Atomic int peer_known;

static void die(const char *what)
{
	fprintf(stderr, "spin_floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int bound(uint16_t p)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(p),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("socket");
	return fd;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The "NIC": blocked until a datagram comes, then places it and
 * acknowledges it. */
static void *receiver(void *arg)
{
	(void)arg;
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		uint32_t seq;
		ssize_t n = recvfrom(data_fd, &seq, sizeof(seq), 0,
				     (struct sockaddr *)&from, &fl);

		if (n != sizeof(seq)) {
			if (n < 0 && errno == EINTR)
				continue;
			die("recv");
		}
		if (!atomic_load(&peer_known)) {
			peer = from;
			peer.sin_port = htons(port);
			atomic_store(&peer_known, 1);
		}
		atomic_store_explicit(&word, seq, memory_order_release);
		if (use_ack) {
			from.sin_port = htons((uint16_t)(port + 1));
			if (sendto(ack_fd, &seq, sizeof(seq), 0,
				   (struct sockaddr *)&from, sizeof(from)) < 0)
				die("send ack");
		}
		atomic_store(&acked, seq);
	}
	return NULL;
}

/* The application's post and its poll for the completion. */
static void post(uint32_t seq)
{
	uint32_t got;

	if (sendto(data_fd, &seq, sizeof(seq), 0, (struct sockaddr *)&peer,
		   sizeof(peer)) < 0)
		die("send");
	while (use_ack) {
		ssize_t n = recv(ack_fd, &got, sizeof(got), MSG_DONTWAIT);

		if (n == sizeof(got) && got == seq)
			break;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			die("recv ack");
	}
}

static void spin_until(uint32_t seq)
{
	while (atomic_load_explicit(&word, memory_order_acquire) < seq)
		;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int client = argc == 5 && !strcmp(argv[1], "client");
	uint32_t iters;
	uint64_t *rtt = NULL;
	pthread_t t;
	const char *e = getenv("SPIN_FLOOR_ACK");

	if (!client && !(argc == 4 && !strcmp(argv[1], "server"))) {
		fprintf(stderr, "usage: spin_floor server PORT ITERS\n"
				"       spin_floor client ADDR PORT ITERS\n");
		return 2;
	}
	use_ack = !e || atoi(e);
	port = (uint16_t)atoi(argv[client ? 3 : 2]);
	iters = (uint32_t)atoi(argv[client ? 4 : 3]) + WARMUP;
	data_fd = bound(port);
	ack_fd = bound((uint16_t)(port + 1));
	if (client) {
		peer = (struct sockaddr_in){ .sin_family = AF_INET,
					     .sin_port = htons(port) };
		if (inet_pton(AF_INET, argv[2], &peer.sin_addr) != 1) {
			fprintf(stderr, "spin_floor: %s: not an IPv4 address\n", argv[2]);
			return 2;
		}
		peer_known = 1;
		rtt = calloc(iters, sizeof(*rtt));
		if (!rtt)
			die("calloc");
	}
	if (pthread_create(&t, NULL, receiver, NULL))
		die("pthread_create");
	if (!client) {
		printf("ready\n");
		fflush(stdout);
	}
	for (uint32_t i = 1; i <= iters; i++) {
		if (client) {
			uint64_t t0 = now_ns();

			post(i);
			spin_until(i);
			rtt[i - 1] = now_ns() - t0;
		} else {
			spin_until(i);
			post(i);
		}
	}
	/* The peer waits for our last acknowledgement. */
	while (atomic_load(&acked) < iters)
		;
	if (client) {
		uint32_t n = iters - WARMUP;

		qsort(rtt + WARMUP, n, sizeof(*rtt), cmp);
		printf("%.2f %.2f\n", rtt[WARMUP + n / 2] / 2000.0,
		       rtt[WARMUP + (uint32_t)(n * 0.99)] / 2000.0);
		free(rtt);
	}
	return 0;
}

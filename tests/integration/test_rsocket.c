/* SPDX-License-Identifier: MIT */
/*
 * rsockets (our librdmacm's rsocket/rsend/rrecv, what rdma-core's
 * librspreload calls) as a TCP user sees them: a byte stream that arrives
 * whole and in order whatever the sizes of the writes, small writes that
 * the sender gathers while it has no credit (a non-blocking writer can
 * write far more than one peer buffer per write), POLLOUT that follows
 * it, and a shutdown that delivers every byte written before it.
 *
 * The server runs in a child process (its own rsockets: they do not
 * cross a fork); both sides on 127.0.0.1.
 */
#include "sv_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOTAL (4u << 20) /* bytes of the stream */

/* Byte i of the stream. */
static uint8_t pat(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 12));
}

static void xwrite(int fd, const void *p, size_t n)
{
	CHECK_EQ(write(fd, p, n), (ssize_t)n);
}

static void xread(int fd, void *p, size_t n)
{
	CHECK_EQ(read(fd, p, n), (ssize_t)n);
}

/* A listening rsocket on 127.0.0.1; its port in *port. */
static int listener(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = rsocket(AF_INET, SOCK_STREAM, 0);

	CHECK(l >= 0);
	CHECK_EQ(rbind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(rlisten(l, 1), 0);
	CHECK_EQ(rgetsockname(l, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return l;
}

static int connect_to(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int s = rsocket(AF_INET, SOCK_STREAM, 0);

	CHECK(s >= 0);
	CHECK_EQ(rconnect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	return s;
}

/*
 * The server: accepts, says so, waits for the word to read (the client
 * first fills what it can without reading) with the stream's length,
 * then reads the whole stream in reads of varying size until EOF and
 * checks every byte.  Writes 1 on `out` when it all arrived, in order,
 * and EOF came after it.
 */
static void server(int in, int out)
{
	static uint8_t buf[70000];
	size_t got = 0, sizes[] = { 1, 100, 4096, 65536, 70000, 3000 };
	uint8_t ok = 1;
	uint32_t total;
	uint16_t port;
	int l = listener(&port), s, k = 0;

	xwrite(out, &port, sizeof(port));
	s = raccept(l, NULL, NULL);
	if (s < 0)
		_exit(2);
	xwrite(out, "a", 1);
	xread(in, &total, sizeof(total)); /* read now, this many bytes */
	for (;;) {
		ssize_t r = rrecv(s, buf, sizes[k++ % 6], 0);

		if (r < 0)
			_exit(3);
		if (r == 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != pat(got + (size_t)i))
				ok = 0;
		got += (size_t)r;
	}
	if (got != total)
		ok = 0;
	xwrite(out, &ok, 1);
	rclose(s);
	rclose(l);
	_exit(0);
}

struct peer {
	pid_t pid;
	int to, from;
	uint16_t port;
};

static void start_server(struct peer *p)
{
	int a[2], b[2];

	CHECK_EQ(pipe(a), 0);
	CHECK_EQ(pipe(b), 0);
	p->pid = fork();
	CHECK(p->pid >= 0);
	if (!p->pid) {
		close(a[1]);
		close(b[0]);
		server(a[0], b[1]);
	}
	close(a[0]);
	close(b[1]);
	p->to = a[1];
	p->from = b[0];
	xread(p->from, &p->port, sizeof(p->port));
}

static void end_server(struct peer *p)
{
	int st;
	uint8_t ok = 0;

	xread(p->from, &ok, 1);
	CHECK_EQ(ok, 1); /* every byte, in order, then EOF */
	CHECK_EQ(waitpid(p->pid, &st, 0), p->pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(p->to);
	close(p->from);
}

/*
 * 1 KiB writes to a peer that reads nothing yet: a non-blocking writer is
 * refused (EAGAIN) only once the credits are spent and a whole message
 * is gathered -- far more than one write per peer buffer (16 buffers:
 * without gathering, EAGAIN came after 14 KiB).  rpoll says POLLOUT
 * until then and not after; once the peer reads, the rest of the stream
 * goes in writes of every size, and shutdown(SHUT_WR) leaves nothing
 * behind.
 */
SV_TEST_T(small_writes_gather_and_arrive, 120)
{
	static uint8_t buf[200000];
	size_t sent = 0, sizes[] = { 1, 1000, 3, 65536, 150000, 7, 4096 };
	struct peer p;
	struct pollfd pf;
	uint8_t c;
	int s, k = 0;

	start_server(&p);
	s = connect_to(p.port);
	xread(p.from, &c, 1); /* accepted */
	CHECK_EQ(rfcntl(s, F_SETFL, O_NONBLOCK), 0);
	for (;;) {
		ssize_t r;

		for (size_t i = 0; i < 1024; i++)
			buf[i] = pat(sent + i);
		r = rsend(s, buf, 1024, 0);
		if (r < 0) {
			CHECK_EQ(errno, EAGAIN);
			break;
		}
		CHECK(r > 0);
		sent += (size_t)r;
		CHECK(sent < TOTAL / 2); /* it does stop */
	}
	CHECK(sent >= 64 * 1024);
	pf = (struct pollfd){ .fd = s, .events = POLLOUT };
	CHECK_EQ(rpoll(&pf, 1, 0), 0); /* full: not writable */
	xwrite(p.to, &(uint32_t){ TOTAL }, 4); /* now read */
	pf.revents = 0;
	CHECK_EQ(rpoll(&pf, 1, 10000), 1);
	CHECK(pf.revents & POLLOUT);
	while (sent < TOTAL) {
		size_t n = sizes[k++ % 7];
		ssize_t r;

		if (n > TOTAL - sent)
			n = TOTAL - sent;
		for (size_t i = 0; i < n; i++)
			buf[i] = pat(sent + i);
		r = rsend(s, buf, n, 0);
		if (r < 0) {
			CHECK_EQ(errno, EAGAIN);
			pf.revents = 0;
			CHECK_EQ(rpoll(&pf, 1, 10000), 1);
			continue;
		}
		sent += (size_t)r; /* a partial write: the rest next round */
	}
	CHECK_EQ(rshutdown(s, SHUT_WR), 0);
	end_server(&p);
	CHECK_EQ(rclose(s), 0);
}

/* A blocking writer in writes of 1 to 3 bytes, shut down at once after
 * the last: it is always short of credits (each message the reader
 * acknowledges frees one), so its last bytes are gathered, still waiting
 * for a credit, when it shuts down -- and arrive before the EOF. */
SV_TEST_T(tiny_blocking_writes_then_shutdown, 120)
{
	const uint32_t total = 256 * 1024;
	struct peer p;
	uint8_t c, b[3];
	size_t sent = 0;
	int s;

	start_server(&p);
	s = connect_to(p.port);
	xread(p.from, &c, 1);
	xwrite(p.to, &total, sizeof(total));
	while (sent < total) {
		size_t n = 1 + sent % 3;

		if (n > total - sent)
			n = total - sent;
		for (size_t i = 0; i < n; i++)
			b[i] = pat(sent + i);
		CHECK_EQ(rsend(s, b, n, 0), (ssize_t)n);
		sent += n;
	}
	CHECK_EQ(rshutdown(s, SHUT_WR), 0);
	end_server(&p);
	CHECK_EQ(rclose(s), 0);
}

/*
 * A peer killed without a word -- no shutdown message, no rclose -- ends
 * the stream: rpoll reports it and rrecv sees the end (EOF, or
 * ECONNRESET), whether the reader sleeps in rpoll or spins on rpoll(0)
 * (a spinner reads the connection's events only every so often: each
 * read is a system call).
 */
static void killed_peer(int spin)
{
	struct pollfd pf;
	struct peer p;
	struct timespec t0, t;
	uint8_t c, b;
	ssize_t r;
	int s, st;

	start_server(&p);
	s = connect_to(p.port);
	xread(p.from, &c, 1); /* accepted; it waits for the word */
	CHECK_EQ(kill(p.pid, SIGKILL), 0);
	CHECK_EQ(waitpid(p.pid, &st, 0), p.pid);
	pf = (struct pollfd){ .fd = s, .events = POLLIN };
	if (spin) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			CHECK(rpoll(&pf, 1, 0) >= 0);
			clock_gettime(CLOCK_MONOTONIC, &t);
			CHECK(t.tv_sec - t0.tv_sec < 30); /* it does come */
		} while (!pf.revents);
	} else {
		CHECK_EQ(rpoll(&pf, 1, 30000), 1);
	}
	CHECK(pf.revents & (POLLIN | POLLHUP | POLLERR));
	r = rrecv(s, &b, 1, MSG_DONTWAIT);
	CHECK(r == 0 || (r < 0 && errno == ECONNRESET));
	close(p.to);
	close(p.from);
	rclose(s);
}

SV_TEST_T(a_killed_peer_ends_a_sleeping_reader, 60)
{
	killed_peer(0);
}

SV_TEST_T(a_killed_peer_ends_a_spinning_reader, 60)
{
	killed_peer(1);
}

SV_TEST_MAIN()

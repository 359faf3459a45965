/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the tests that talk to the daemon directly (test_robust.c,
 * test_proto.c, test_fuzz.c, test_chaos.c): a private daemon per case,
 * its quiet baseline and health check, and raw control messages.
 */
#ifndef RAW_UTIL_H
#define RAW_UTIL_H

#include "sv_test.h"
#include "sv_client.h"
#include "sv_param.h"
#include "sv_sock.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* A daemon of the case's own that never exits for idleness, so the
 * pid stays comparable however slow the machine is. */
static inline void private_daemon(const char *tag)
{
	char name[108];

	snprintf(name, sizeof(name), "svtest.robust.%s.%d", tag, (int)getpid());
	setenv("SOFTVERBS_SOCKET", name, 1);
	setenv("SOFTVERBS_IDLE_TIMEOUT", "0", 1);
}

/* Starts the daemon and returns the quiet baseline (our channels open:
 * this program has two, the library's and the test runner's). */
static inline pid_t baseline(struct sv_status_rep *base)
{
	private_daemon("base");
	CHECK(ibv_get_device_list(NULL));
	CHECK_EQ(sv_test_status(base), 0);
	CHECK_EQ(base->ufiles, 0);
	CHECK_EQ(base->contexts, 0);
	CHECK_EQ(base->objects, 0);
	return base->pid;
}

static inline void check_healthy(pid_t pid, const struct sv_status_rep *base)
{
	struct ibv_context *ctx;
	struct ibv_port_attr pa;
	struct sv_status_rep st;

	sv_test_wait_quiet(base, 15000);
	/* Connections of dead or hung-up clients are gone too. */
	for (int waited = 0;; waited += 20) {
		CHECK_EQ(sv_test_status(&st), 0);
		if (st.clients == base->clients)
			break;
		if (waited > 15000)
			sv_test_fail(__FILE__, __LINE__, "clients %u, baseline %u",
				     st.clients, base->clients);
		sv_test_sleep_ms(20);
	}
	CHECK_EQ(st.pid, pid);
	CHECK_EQ(st.instance, base->instance);
	ctx = sv_test_open_dev();
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_test_wait_quiet(base, 15000);
	sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
}

static inline int raw_connect(void)
{
	int fd = sv_test_raw_connect();
	struct timeval tv = { 20, 0 };

	CHECK(fd >= 0);
	/* A daemon that neither answers nor hangs up fails the case. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

#define CLOSED 1 /* raw_recv: the daemon hung up */

/* One reply: its status (0 or negative errno), or CLOSED.  Replies are
 * checked for framing and for echoing our seq.  Descriptors received are
 * stored in rfds (closed by the caller) or closed. */
static inline int raw_recv(int fd, uint32_t seq, int *rfds, int *nrfds)
{
	union {
		struct sv_msg_hdr h;
		char b[SV_MSG_MAX];
	} m;
	int fds[SV_MAX_FDS], nfds = 0;
	ssize_t n = sv_recv_msg(fd, m.b, sizeof(m.b), fds, SV_MAX_FDS, &nfds);

	if (n == 0 || n == -ECONNRESET)
		return CLOSED;
	if (n == -EAGAIN)
		sv_test_fail(__FILE__, __LINE__, "daemon neither answered nor hung up");
	CHECK(n >= (ssize_t)sizeof(m.h));
	CHECK_EQ(m.h.magic, SV_PROTO_MAGIC);
	CHECK_EQ(m.h.len, n);
	CHECK_EQ(m.h.seq, seq);
	if (rfds) {
		memcpy(rfds, fds, sizeof(int) * nfds);
		*nrfds = nfds;
	} else {
		sv_close_fds(fds, nfds);
	}
	return m.h.status;
}

static uint32_t raw_seq __attribute__((unused));

/* Sends one message with the given header fields and payload. */
static inline void raw_send(int fd, uint16_t version, uint16_t op, int len_delta,
		     uint32_t ufile, const void *body, size_t blen,
		     const int *fds, int nfds)
{
	static union {
		struct sv_msg_hdr h;
		char b[3 * SV_MSG_MAX];
	} m;
	size_t len = sizeof(m.h) + blen;

	CHECK(blen <= sizeof(m.b) - sizeof(m.h));
	memset(&m.h, 0, sizeof(m.h));
	m.h.magic = SV_PROTO_MAGIC;
	m.h.version = version;
	m.h.op = op;
	m.h.len = (uint32_t)(len + len_delta);
	m.h.seq = ++raw_seq;
	m.h.ufile = ufile;
	if (blen)
		memcpy(m.b + sizeof(m.h), body, blen);
	CHECK_EQ(sv_send_msg(fd, m.b, len, fds, nfds, 0), 0);
}

/* Sends op with payload and returns the reply status (or CLOSED). */
static inline int ask(int fd, uint16_t op, uint32_t ufile, const void *body,
	       size_t blen, const int *fds, int nfds)
{
	raw_send(fd, SV_PROTO_VERSION, op, 0, ufile, body, blen, fds, nfds);
	return raw_recv(fd, raw_seq, NULL, NULL);
}

/* Sends op with body and fds, returns the reply status; the reply's body
 * (when the status is 0) into rep, its fds into rfds (closed when rfds is
 * NULL). */
static inline int raw_call_fds(int fd, uint16_t op, const void *body,
			       size_t blen, const int *fds, int nfds, void *rep,
			       size_t rep_len, int *rfds, int *nrfds)
{
	union {
		struct sv_msg_hdr h;
		char b[SV_MSG_MAX];
	} m;
	int got[SV_MAX_FDS], ngot = 0;
	ssize_t n;

	raw_send(fd, SV_PROTO_VERSION, op, 0, 0, body, blen, fds, nfds);
	n = sv_recv_msg(fd, m.b, sizeof(m.b), got, SV_MAX_FDS, &ngot);
	CHECK(n >= (ssize_t)sizeof(m.h));
	CHECK_EQ(m.h.seq, raw_seq);
	if (!m.h.status && rep)
		memcpy(rep, m.b + sizeof(m.h), rep_len);
	if (rfds) {
		memcpy(rfds, got, sizeof(int) * ngot);
		*nrfds = ngot;
	} else {
		sv_close_fds(got, ngot);
	}
	return m.h.status;
}

/* A pipe whose write end we hand to the daemon: once the daemon has closed
 * its copy, the read end sees EOF.  Returns the read end. */
static inline int pipe_probe(int *wr)
{
	int p[2];

	CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
	*wr = p[1];
	return p[0];
}

static inline void expect_eof(int rd)
{
	struct pollfd pfd = { .fd = rd, .events = POLLIN };
	char c;

	/* The daemon closes what it was sent, right after the reply. */
	CHECK_EQ(poll(&pfd, 1, 15000), 1);
	CHECK_EQ(read(rd, &c, 1), 0);
	close(rd);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The daemon survives what clients do to it: dying mid-call, garbage on
 * the control socket, junk written into a cmd_fd, concurrent processes;
 * and clients survive the daemon dying.  "Survives" means: still answers,
 * same pid, and its counters (ufiles, contexts, objects, fds) back to the
 * baseline, so nothing leaked.
 */
#include "raw_util.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- clients killed at random moments ---------------------------------- */

static void hammer(void)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid gid;

	for (unsigned i = 0;; i++) {
		int n;
		struct ibv_device **list = ibv_get_device_list(&n);
		struct ibv_context *ctx, *ctx2;

		if (!list || n != 1)
			_exit(3);
		ctx = ibv_open_device(list[0]);
		ibv_free_device_list(list);
		if (!ctx)
			_exit(4);
		if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa) ||
		    ibv_query_gid(ctx, 1, 0, &gid))
			_exit(5);
		/* Objects too: a PD and an MR, freed only every other time
		 * (the ufile teardown must get the rest). */
		{
			static char buf[8192];
			struct ibv_pd *pd = ibv_alloc_pd(ctx);
			struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf),
							    IBV_ACCESS_LOCAL_WRITE) :
						 NULL;

			if (!pd || !mr)
				_exit(8);
			if (i % 2 && (ibv_dereg_mr(mr) || ibv_dealloc_pd(pd)))
				_exit(9);
		}
		/* Some die with a context open, some with two. */
		if (i % 3 == 1) {
			ctx2 = ibv_import_device(dup(ctx->cmd_fd));
			if (!ctx2)
				_exit(6);
			if (i % 2)
				ibv_close_device(ctx2);
		}
		if (i % 2 == 0 && ibv_close_device(ctx))
			_exit(7);
	}
}

SV_TEST_T(sigkill_midcall_leaks_nothing, 240)
{
	struct sv_status_rep base;
	unsigned seed = (unsigned)getpid();
	pid_t pid = baseline(&base);

	for (int i = 0; i < 50; i++) {
		pid_t kid = fork();
		int status;

		CHECK(kid >= 0);
		if (kid == 0)
			hammer();
		/* 0..20 ms: early ones die in the first connect or open. */
		sv_test_sleep_ms(rand_r(&seed) % 21);
		CHECK_EQ(kill(kid, SIGKILL), 0);
		status = sv_test_wait_child(kid);
		if (!WIFSIGNALED(status))
			sv_test_fail(__FILE__, __LINE__,
				     "hammer child failed on its own: exit %d",
				     WEXITSTATUS(status));
	}
	check_healthy(pid, &base);
}

/* ---- malformed messages on a raw control connection ------------------- */

SV_TEST(malformed_messages)
{
	struct sv_status_rep base, st;
	pid_t pid = baseline(&base);
	struct sv_port_req port = { .port = 1 };
	char junk[64];
	int fd, rd, wr, fds[2];

	memset(junk, 0x5a, sizeof(junk));

	/* Not our protocol: hang up. */
	fd = raw_connect();
	CHECK_EQ(send(fd, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
	CHECK_EQ(raw_recv(fd, 0, NULL, NULL), CLOSED);
	close(fd);

	/* Truncated: magic but less than a header. */
	fd = raw_connect();
	{
		uint32_t magic = SV_PROTO_MAGIC;

		CHECK_EQ(send(fd, &magic, sizeof(magic), 0), 4);
	}
	CHECK_EQ(raw_recv(fd, 0, NULL, NULL), CLOSED);
	close(fd);

	/* Empty datagram. */
	fd = raw_connect();
	CHECK_EQ(send(fd, junk, 0, 0), 0);
	CHECK_EQ(raw_recv(fd, 0, NULL, NULL), CLOSED);
	close(fd);

	fd = raw_connect();
	/* Wrong version: -EPROTO, connection stays. */
	raw_send(fd, SV_PROTO_VERSION + 1, SV_OP_PING, 0, 0, NULL, 0, NULL, 0);
	CHECK_EQ(raw_recv(fd, raw_seq, NULL, NULL), -EPROTO);
	raw_send(fd, 0, SV_OP_PING, 0, 0, NULL, 0, NULL, 0);
	CHECK_EQ(raw_recv(fd, raw_seq, NULL, NULL), -EPROTO);
	/* Header length that lies. */
	raw_send(fd, SV_PROTO_VERSION, SV_OP_PING, 1, 0, NULL, 0, NULL, 0);
	CHECK_EQ(raw_recv(fd, raw_seq, NULL, NULL), -EINVAL);
	raw_send(fd, SV_PROTO_VERSION, SV_OP_QUERY_PORT, -4, 0, &port,
		 sizeof(port), NULL, 0);
	CHECK_EQ(raw_recv(fd, raw_seq, NULL, NULL), -EINVAL);
	/* Unknown ops. */
	CHECK_EQ(ask(fd, 0, 0, NULL, 0, NULL, 0), -EOPNOTSUPP);
	CHECK_EQ(ask(fd, SV_OP_MAX, 0, NULL, 0, NULL, 0), -EOPNOTSUPP);
	CHECK_EQ(ask(fd, 0xffff, 0, NULL, 0, NULL, 0), -EOPNOTSUPP);
	CHECK_EQ(ask(fd, 31, 0, NULL, 0, NULL, 0), -EOPNOTSUPP);
	/* Wrong payload sizes. */
	CHECK_EQ(ask(fd, SV_OP_QUERY_PORT, 0, &port, 4, NULL, 0), -EINVAL);
	CHECK_EQ(ask(fd, SV_OP_QUERY_PORT, 0, NULL, 0, NULL, 0), -EINVAL);
	CHECK_EQ(ask(fd, SV_OP_QUERY_PORT, 0, junk, sizeof(junk), NULL, 0), -EINVAL);
	CHECK_EQ(ask(fd, SV_OP_PING, 0, junk, 1, NULL, 0), -EINVAL);
	CHECK_EQ(ask(fd, SV_OP_STATUS, 0, junk, 8, NULL, 0), -EINVAL);
	CHECK_EQ(ask(fd, SV_OP_SHUTDOWN, 0, junk, 8, NULL, 0), -EINVAL);
	/* Out-of-range fields. */
	port.port = 0;
	CHECK_EQ(ask(fd, SV_OP_QUERY_PORT, 0, &port, sizeof(port), NULL, 0), -EINVAL);
	port.port = 2;
	CHECK_EQ(ask(fd, SV_OP_QUERY_GIDS, 0, &port, sizeof(port), NULL, 0), -EINVAL);
	port.port = 0xffffffff;
	CHECK_EQ(ask(fd, SV_OP_QUERY_PORT, 0, &port, sizeof(port), NULL, 0), -EINVAL);
	/* Ufiles that do not exist or are not ours. */
	{
		struct sv_ctx_req cr = { .ctx = 1 };

		CHECK_EQ(ask(fd, SV_OP_CLOSE_CONTEXT, 0, &cr, sizeof(cr), NULL, 0), -EIO);
		CHECK_EQ(ask(fd, SV_OP_CLOSE_CONTEXT, 0xffffffff, &cr, sizeof(cr), NULL, 0), -EIO);
		CHECK_EQ(ask(fd, SV_OP_CLOSE_CONTEXT, 1, &cr, sizeof(cr), NULL, 0), -EIO);
	}
	/* Still answering properly on the same connection. */
	port.port = 1;
	CHECK_EQ(ask(fd, SV_OP_QUERY_PORT, 0, &port, sizeof(port), NULL, 0), 0);

	/* Descriptors where none belong: refused, and closed by the daemon. */
	rd = pipe_probe(&wr);
	CHECK_EQ(ask(fd, SV_OP_PING, 0, NULL, 0, &wr, 1), -EINVAL);
	close(wr);
	expect_eof(rd);
	rd = pipe_probe(&wr);
	fds[0] = wr;
	fds[1] = wr;
	CHECK_EQ(ask(fd, SV_OP_QUERY_PORT, 0, &port, sizeof(port), fds, 2), -EINVAL);
	close(wr);
	expect_eof(rd);
	/* IMPORT/ATTACH with something that is not a cmd_fd, or two fds. */
	rd = pipe_probe(&wr);
	CHECK_EQ(ask(fd, SV_OP_IMPORT_DEVICE, 0, NULL, 0, &wr, 1), -EINVAL);
	CHECK_EQ(ask(fd, SV_OP_ATTACH, 0, NULL, 0, &wr, 1), -EINVAL);
	CHECK_EQ(ask(fd, SV_OP_IMPORT_DEVICE, 0, NULL, 0, NULL, 0), -EINVAL);
	fds[0] = wr;
	fds[1] = fd; /* a socket, even: still not a cmd_fd */
	CHECK_EQ(ask(fd, SV_OP_IMPORT_DEVICE, 0, NULL, 0, fds, 2), -EINVAL);
	CHECK_EQ(ask(fd, SV_OP_IMPORT_DEVICE, 0, NULL, 0, &fd, 1), -EINVAL);
	close(wr);
	expect_eof(rd);

	/* More descriptors than any message carries (SV_MAX_FDS): refused
	 * or hung up on, and every one closed. */
	{
		union {
			char buf[CMSG_SPACE(sizeof(int) * 16)];
			struct cmsghdr align;
		} cbuf;
		struct sv_msg_hdr h = { .magic = SV_PROTO_MAGIC,
					.version = SV_PROTO_VERSION,
					.op = SV_OP_PING,
					.len = sizeof(h),
					.seq = ++raw_seq };
		struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = cbuf.buf,
				      .msg_controllen = sizeof(cbuf.buf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		int st2;

		rd = pipe_probe(&wr);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * 16);
		for (int i = 0; i < 16; i++)
			memcpy(CMSG_DATA(c) + i * sizeof(int), &wr, sizeof(int));
		CHECK_EQ(sendmsg(fd, &msg, MSG_NOSIGNAL), (ssize_t)sizeof(h));
		close(wr);
		st2 = raw_recv(fd, raw_seq, NULL, NULL);
		CHECK(st2 == -EINVAL || st2 == -EMSGSIZE || st2 == CLOSED);
		expect_eof(rd);
		if (st2 == CLOSED) {
			close(fd);
			fd = raw_connect();
		}
	}

	/* Oversized: more than SV_MSG_MAX, with a valid header. */
	{
		static char big[2 * SV_MSG_MAX];

		rd = pipe_probe(&wr);
		raw_send(fd, SV_PROTO_VERSION, SV_OP_PING, 0, 0, big, sizeof(big),
			 &wr, 1);
		close(wr);
		CHECK_EQ(raw_recv(fd, raw_seq, NULL, NULL), -EMSGSIZE);
		expect_eof(rd);
	}
	/* And the connection still works after all that. */
	CHECK_EQ(ask(fd, SV_OP_PING, 0, NULL, 0, NULL, 0), 0);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK(st.bad_requests > base.bad_requests);
	close(fd);
	check_healthy(pid, &base);
}

SV_TEST(res_list_checks_its_request)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	struct sv_res_req rq = { 0 };
	int fd = raw_connect();

	rq.type = SV_RES_XRCD + 1; /* the last type + 1 */
	CHECK_EQ(ask(fd, SV_OP_RES_LIST, 0, &rq, sizeof(rq), NULL, 0), -EINVAL);
	rq.type = 0;
	rq.pad = 1;
	CHECK_EQ(ask(fd, SV_OP_RES_LIST, 0, &rq, sizeof(rq), NULL, 0), -EINVAL);
	rq.pad = 0;
	rq.cursor_ufile = SV_MAX_UFILES;
	CHECK_EQ(ask(fd, SV_OP_RES_LIST, 0, &rq, sizeof(rq), NULL, 0), -EINVAL);
	rq.cursor_ufile = 0;
	rq.cursor_handle = 0xffffffff;
	CHECK_EQ(ask(fd, SV_OP_RES_LIST, 0, &rq, sizeof(rq), NULL, 0), -EINVAL);
	rq.cursor_handle = 0;
	CHECK_EQ(ask(fd, SV_OP_RES_LIST, 0, &rq, 8, NULL, 0), -EINVAL);
	CHECK_EQ(ask(fd, SV_OP_RES_LIST, 0, &rq, sizeof(rq), NULL, 0), 0);
	close(fd);
	check_healthy(pid, &base);
}

/* Lists every row of a type through the library's channel. */
static int res_list(uint32_t type, struct sv_res_entry *out, int max)
{
	static struct sv_res_rep rep;
	struct sv_res_req rq = { .type = type };
	int n = 0;

	do {
		sv_test_res_page(&rq, &rep);
		for (uint32_t i = 0; i < rep.count && n < max; i++)
			out[n++] = rep.e[i];
	} while (rep.more);
	return n;
}

SV_TEST(res_list_pages_through_ufiles)
{
	/* More ufiles than one reply holds: every one listed exactly once. */
	enum { N = SV_RES_PER_MSG + 20 };
	static struct ibv_context *ctx[N];
	static struct sv_res_entry rows[2 * N];
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	int n;

	for (int i = 0; i < N; i++)
		ctx[i] = sv_test_open_dev();
	n = res_list(SV_RES_UFILE, rows, 2 * N);
	CHECK_EQ(n, N);
	for (int i = 0; i < n; i++) {
		CHECK_EQ(rows[i].type, SV_RES_UFILE);
		CHECK_EQ(rows[i].owner_pid, getpid());
		for (int j = 0; j < i; j++)
			CHECK(rows[i].ufile != rows[j].ufile);
	}
	/* "All types" includes the same ufile rows. */
	n = res_list(0, rows, 2 * N);
	CHECK(n >= N);
	for (int i = 0; i < N; i++)
		CHECK_EQ(ibv_close_device(ctx[i]), 0);
	sv_test_wait_quiet(&base, 15000);
	CHECK_EQ(res_list(SV_RES_UFILE, rows, 2 * N), 0);
	check_healthy(pid, &base);
}

SV_TEST(res_list_shows_pd_and_mr)
{
	static char buf[3 * 4096];
	struct sv_res_entry rows[16];
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr;
	int n, found_pd = 0, found_mr = 0, found_uf = 0;
	uint32_t uf = 0;

	CHECK(pd);
	mr = ibv_reg_mr(pd, buf + 100, 5000,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(mr);
	n = res_list(0, rows, 16);
	for (int i = 0; i < n; i++) {
		const struct sv_res_entry *e = &rows[i];

		CHECK_EQ(e->owner_pid, getpid());
		if (e->type == SV_RES_UFILE) {
			found_uf++;
			uf = e->ufile;
			CHECK_EQ(e->usecnt, 2); /* its objects */
		} else if (e->type == SV_RES_PD) {
			found_pd++;
			CHECK_EQ(e->handle, pd->handle);
			CHECK_EQ(e->usecnt, 1); /* the MR */
		} else if (e->type == SV_RES_MR) {
			found_mr++;
			CHECK_EQ(e->handle, mr->handle);
			CHECK_EQ(e->lkey, mr->lkey);
			CHECK_EQ(e->rkey, mr->rkey);
			CHECK_EQ(e->pd_handle, pd->handle);
			CHECK_EQ(e->access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
			CHECK_EQ(e->iova, (uintptr_t)(buf + 100));
			CHECK_EQ(e->length, 5000);
		}
	}
	CHECK_EQ(found_uf, 1);
	CHECK_EQ(found_pd, 1);
	CHECK_EQ(found_mr, 1);
	for (int i = 0; i < n; i++)
		CHECK_EQ(rows[i].ufile, uf);
	/* Filters. */
	n = res_list(SV_RES_MR, rows, 16);
	CHECK_EQ(n, 1);
	CHECK_EQ(rows[0].type, SV_RES_MR);
	n = res_list(SV_RES_PD, rows, 16);
	CHECK_EQ(n, 1);
	CHECK_EQ(rows[0].type, SV_RES_PD);
	CHECK_EQ(res_list(SV_RES_DM, rows, 16), 0);
	/* Gone from the list once destroyed. */
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(res_list(SV_RES_MR, rows, 16), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	check_healthy(pid, &base);
}

SV_TEST_T(fuzz_headers, 120)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	unsigned seed = (unsigned)getpid() * 2654435761u;
	static char body[SV_MSG_MAX];
	int fd = raw_connect();

	for (int i = 0; i < 3000; i++) {
		uint16_t op = rand_r(&seed) % (SV_OP_MAX + 4);
		uint16_t ver = rand_r(&seed) % 8 ? SV_PROTO_VERSION : rand_r(&seed);
		size_t blen = rand_r(&seed) % 4 ? rand_r(&seed) % 80 :
						  rand_r(&seed) % (SV_MSG_MAX - 24);
		uint32_t ufile = rand_r(&seed) % 2 ? 0 : rand_r(&seed) % 0x30000;
		int len_delta = rand_r(&seed) % 10 ? 0 : (int)(rand_r(&seed) % 9) - 4;
		int rfds[SV_MAX_FDS], nrfds = 0, st, wr = -1, rd = -1;

		if (op == SV_OP_SHUTDOWN)
			continue;
		for (size_t k = 0; k < blen; k++)
			body[k] = rand_r(&seed) % 3 ? 0 : rand_r(&seed);
		if (rand_r(&seed) % 8 == 0)
			rd = pipe_probe(&wr);
		raw_send(fd, ver, op, len_delta, ufile, body, blen,
			 wr >= 0 ? &wr : NULL, wr >= 0);
		if (wr >= 0)
			close(wr);
		st = raw_recv(fd, raw_seq, rfds, &nrfds);
		if (st == CLOSED) {
			close(fd);
			fd = raw_connect();
		} else {
			CHECK(st <= 0);
			/* Whatever we were given (a cmd_fd from a lucky
			 * OPEN_DEVICE) we close: the daemon must clean up. */
			sv_close_fds(rfds, nrfds);
		}
		if (rd >= 0)
			expect_eof(rd);
	}
	close(fd);
	check_healthy(pid, &base);
}

/* ---- junk written into a cmd_fd --------------------------------------- */

SV_TEST(cmd_fd_data_is_ignored)
{
	struct sv_status_rep base, st;
	pid_t pid = baseline(&base);
	struct ibv_context *ctx = sv_test_open_dev();
	static char big[64 * 1024];
	struct ibv_port_attr pa;
	int rd, wr, fd2;

	memset(big, 0xa5, sizeof(big));
	for (int i = 0; i < 200; i++) {
		ssize_t len = i % 10 == 9 ? (ssize_t)sizeof(big) : 1 + i % 300;
		/* The daemon must drain it: never block on the pipe. */
		CHECK_EQ(write(ctx->cmd_fd, big, len), len);
		CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	}
	/* Descriptors sent into it are dropped, including the cmd_fd
	 * itself (which would otherwise keep the ufile alive forever). */
	rd = pipe_probe(&wr);
	CHECK_EQ(sv_send_msg(ctx->cmd_fd, "x", 1, &wr, 1, 0), 0);
	close(wr);
	expect_eof(rd);
	CHECK_EQ(sv_send_msg(ctx->cmd_fd, "y", 1, &ctx->cmd_fd, 1, 0), 0);
	/* An import made from a dup still names the same ufile. */
	fd2 = dup(ctx->cmd_fd);
	struct ibv_context *imp = ibv_import_device(fd2);
	CHECK(imp);
	CHECK_EQ(ibv_query_port(imp, 1, &pa), 0);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.ufiles, 1);
	CHECK_EQ(st.contexts, 2);
	CHECK_EQ(st.pid, pid);
	CHECK_EQ(ibv_close_device(imp), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	check_healthy(pid, &base);
}

/* ---- two processes at once --------------------------------------------- */

/* Each process asks questions whose answers tell its own replies apart
 * from the other's: valid port 1 and invalid port 2 in opposite phase. */
static int check_queries(struct ibv_context *ctx, unsigned phase)
{
	struct ibv_port_attr pa;
	struct ibv_device_attr da;
	int port = phase % 2 ? 1 : 2;
	int rc = ibv_query_port(ctx, port, &pa);

	if (port == 1 && (rc != 0 || pa.state != IBV_PORT_ACTIVE))
		return 1;
	if (port == 2 && rc != EINVAL)
		return 2;
	if (ibv_query_device(ctx, &da) || da.phys_port_cnt != 1 ||
	    da.node_guid != ibv_get_device_guid(ctx->device))
		return 3;
	return 0;
}

static void open_close_loop(unsigned who)
{
	for (unsigned i = 0; i < 100; i++) {
		struct ibv_context *ctx;
		int n, rc;
		struct ibv_device **list = ibv_get_device_list(&n);

		if (!list || n != 1)
			_exit(10);
		ctx = ibv_open_device(list[0]);
		ibv_free_device_list(list);
		if (!ctx)
			_exit(11);
		rc = check_queries(ctx, i + who);
		if (rc)
			_exit(20 + rc);
		if (i % 10 == 0) {
			/* A forked child uses the inherited context over its
			 * own channel while we use ours. */
			pid_t kid = fork();

			if (kid < 0)
				_exit(12);
			if (kid == 0) {
				for (unsigned k = 0; k < 20; k++)
					if (check_queries(ctx, k + who + 1))
						_exit(30 + check_queries(ctx, k + who + 1));
				_exit(0);
			}
			for (unsigned k = 0; k < 20; k++)
				if (check_queries(ctx, k + who))
					_exit(40);
			int st = sv_test_wait_child(kid);
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 50);
		}
		if (ibv_close_device(ctx))
			_exit(13);
	}
	_exit(0);
}

SV_TEST_T(two_processes_open_close, 240)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	pid_t kids[2];

	for (unsigned w = 0; w < 2; w++) {
		kids[w] = fork();
		CHECK(kids[w] >= 0);
		if (kids[w] == 0)
			open_close_loop(w);
	}
	for (int w = 0; w < 2; w++) {
		int st = sv_test_wait_child(kids[w]);

		if (!WIFEXITED(st) || WEXITSTATUS(st))
			sv_test_fail(__FILE__, __LINE__, "process %d: %s %d", w,
				     WIFEXITED(st) ? "exit" : "signal",
				     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	}
	check_healthy(pid, &base);
}

/* ---- the daemon dies under a client ------------------------------------ */

struct waiter {
	struct ibv_context *ctx;
	int rc, type, rc2, err2;
};

static void *async_waiter(void *p)
{
	struct waiter *w = p;
	struct ibv_async_event ev;

	w->rc = ibv_get_async_event(w->ctx, &ev);
	w->type = ev.event_type;
	if (!w->rc)
		ibv_ack_async_event(&ev);
	errno = 0;
	w->rc2 = ibv_get_async_event(w->ctx, &ev);
	w->err2 = errno;
	return NULL;
}

SV_TEST(daemon_killed_under_client)
{
	struct ibv_context *ctx;
	struct waiter w;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct sv_status_rep st;
	pthread_t t;
	pid_t pid;

	private_daemon("killed");
	ctx = sv_test_open_dev();
	w = (struct waiter){ .ctx = ctx };
	pid = sv_test_daemon_pid();
	CHECK(pid > 0);
	/* A thread already blocked for async events must wake up. */
	CHECK_EQ(pthread_create(&t, NULL, async_waiter, &w), 0);
	sv_test_sleep_ms(50);
	CHECK_EQ(kill(pid, SIGKILL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(w.rc, 0);
	CHECK_EQ(w.type, IBV_EVENT_DEVICE_FATAL);
	CHECK_EQ(w.rc2, -1);
	CHECK_EQ(w.err2, EIO);
	/* Verbs fail with EIO, never hang, never start a daemon for a dead
	 * context. */
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), EIO);
	CHECK_EQ(ibv_query_device(ctx, &da), EIO);
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), EIO);
	errno = 0;
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), -1);
	CHECK(errno != 0);
	CHECK_EQ(sv_chan_probe(), -ENODEV);
	CHECK_EQ(ibv_close_device(ctx), 0);
	/* Afterwards a fresh open starts a new daemon and works. */
	ctx = sv_test_open_dev();
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK(st.pid != (uint32_t)pid);
	CHECK_EQ(st.ufiles, 1);
	CHECK_EQ(ibv_close_device(ctx), 0);
	sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
}

SV_TEST_MAIN()

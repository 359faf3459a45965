/* SPDX-License-Identifier: MIT */
/*
 * The daemon's sockets take bad input without changing anything (issue 7,
 * items 11 and 12): empty datagrams, with or without descriptors, on the
 * control channel, on a context's cmd_fd and on an engine socket; and
 * shared rings that their creator could still shrink are refused, so no
 * receiver can be made to die of SIGBUS.
 */
#include "raw_util.h"
#include "engine_util.h"
#include "sv_ring.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* Sends an empty datagram on fd carrying nfds descriptors. */
static void send_empty(int fd, const int *fds, int nfds)
{
	CHECK_EQ(sv_send_msg(fd, "", 0, fds, nfds, 0), 0);
}

/* ---- control channel ---------------------------------------------------- */

SV_TEST(empty_datagram_with_fds_on_control_channel)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	int fd, rd, wr, fds[2];

	/* One descriptor: the daemon hangs up (not our protocol) and closes
	 * what it was given. */
	fd = raw_connect();
	rd = pipe_probe(&wr);
	send_empty(fd, &wr, 1);
	close(wr);
	CHECK_EQ(raw_recv(fd, 0, NULL, NULL), CLOSED);
	expect_eof(rd);
	close(fd);

	/* Two, one of them the write end twice over. */
	fd = raw_connect();
	rd = pipe_probe(&wr);
	fds[0] = wr;
	fds[1] = wr;
	send_empty(fd, fds, 2);
	close(wr);
	CHECK_EQ(raw_recv(fd, 0, NULL, NULL), CLOSED);
	expect_eof(rd);
	close(fd);
	check_healthy(pid, &base);
}

/* A process hands its own cmd_fd to the daemon in an empty datagram and
 * dies: had the daemon kept the copy, the ufile would live forever. */
static void die_after_sending_cmd_fd(void *arg)
{
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	int fd = sv_test_raw_connect();

	(void)arg;
	if (!pd || fd < 0)
		_exit(2);
	if (sv_send_msg(fd, "", 0, &ctx->cmd_fd, 1, 0))
		_exit(3);
	/* Into the cmd_fd itself too. */
	if (sv_send_msg(ctx->cmd_fd, "", 0, &ctx->cmd_fd, 1, 0))
		_exit(4);
	_exit(0);
}

SV_TEST(cmd_fd_in_empty_datagram_does_not_keep_ufile)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);

	CHECK_EQ(sv_test_child(die_after_sending_cmd_fd, NULL), 0);
	check_healthy(pid, &base);
}

/* ---- cmd_fd ------------------------------------------------------------- */

SV_TEST(empty_write_to_cmd_fd_changes_nothing)
{
	struct sv_status_rep base, st;
	pid_t pid = baseline(&base);
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_port_attr pa;
	int rd, wr;

	CHECK(pd);
	for (int i = 0; i < 20; i++) {
		CHECK_EQ(write(ctx->cmd_fd, "", 0), 0);
		CHECK_EQ(send(ctx->cmd_fd, "", 0, 0), 0);
	}
	/* With descriptors: dropped, never kept. */
	rd = pipe_probe(&wr);
	send_empty(ctx->cmd_fd, &wr, 1);
	close(wr);
	expect_eof(rd);
	/* The ufile and its PD are still there and answer. */
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.ufiles, 1);
	CHECK_EQ(st.objects, 1);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	/* Closing it still ends the ufile. */
	CHECK_EQ(ibv_close_device(ctx), 0);
	check_healthy(pid, &base);
}

/* A shut-down write side is not a close: the ufile lives while any copy
 * of the cmd_fd does. */
SV_TEST(cmd_fd_shutdown_write_keeps_ufile)
{
	struct sv_status_rep base, st;
	pid_t pid = baseline(&base);
	struct ibv_context *ctx = sv_test_open_dev();
	struct ibv_pd *pd;

	CHECK_EQ(shutdown(ctx->cmd_fd, SHUT_WR), 0);
	sv_test_sleep_ms(50);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK_EQ(sv_test_status(&st), 0);
	CHECK_EQ(st.ufiles, 1);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	check_healthy(pid, &base);
}

/* ---- engine socket ------------------------------------------------------ */

struct raw_engine {
	int chan;     /* raw control connection */
	int sock;     /* engine socket */
	int kt;	      /* key table memfd */
	int doorbell; /* our eventfd */
	uint32_t id;
};

/* Attaches an engine of our own on a raw channel (what the library's
 * engine does with SV_OP_ENGINE_ATTACH). */
static void raw_engine_attach(struct raw_engine *e)
{
	struct sv_engine_attach_rep rep;
	int rfds[2], nr = 0;

	e->chan = raw_connect();
	e->doorbell = eventfd(0, EFD_CLOEXEC);
	CHECK(e->doorbell >= 0);
	CHECK_EQ(raw_call_fds(e->chan, SV_OP_ENGINE_ATTACH, NULL, 0,
			      &e->doorbell, 1, &rep, sizeof(rep), rfds, &nr),
		 0);
	CHECK_EQ(nr, 2);
	e->sock = rfds[0];
	e->kt = rfds[1];
	e->id = rep.engine_id;
}

static void raw_engine_close(struct raw_engine *e)
{
	close(e->sock);
	close(e->kt);
	close(e->doorbell);
	close(e->chan);
}

/* The engine id the daemon has for our pid, or 0. */
static uint32_t engine_of(int chan, pid_t pid)
{
	struct sv_qpn_req q = { .qpn = (uint32_t)pid, .flags = SV_QPN_BY_PID };
	struct sv_qpn_rep rep;

	if (raw_call_fds(chan, SV_OP_QPN_LOOKUP, &q, sizeof(q), NULL, 0, &rep,
			 sizeof(rep), NULL, NULL))
		return 0;
	return rep.engine_id;
}

SV_TEST(empty_datagram_on_engine_socket)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	struct raw_engine e;
	int rd, wr;

	raw_engine_attach(&e);
	CHECK_EQ(engine_of(e.chan, getpid()), e.id);
	/* Empty, then empty with a descriptor: dropped, engine kept. */
	for (int i = 0; i < 5; i++)
		send_empty(e.sock, NULL, 0);
	rd = pipe_probe(&wr);
	send_empty(e.sock, &wr, 1);
	close(wr);
	expect_eof(rd);
	/* Data with a descriptor: the same. */
	rd = pipe_probe(&wr);
	CHECK_EQ(sv_send_msg(e.sock, "junk", 4, &wr, 1, 0), 0);
	close(wr);
	expect_eof(rd);
	CHECK_EQ(engine_of(e.chan, getpid()), e.id);
	/* Closing the engine socket still ends the engine. */
	close(e.sock);
	for (int i = 0; engine_of(e.chan, getpid()); i++) {
		CHECK(i < 500);
		sv_test_sleep_ms(10);
	}
	e.sock = open("/dev/null", O_RDONLY | O_CLOEXEC);
	raw_engine_close(&e);
	check_healthy(pid, &base);
}

/* ---- shared rings ------------------------------------------------------- */

#define RING (SV_RING_DATA_OFF + (1u << 16))

/* A ring region the way an engine makes one, with the seals asked for
 * (-1: not a memfd at all but a regular file in /tmp). */
static int ring_fd(int seals, uint64_t size)
{
	int fd;
	void *p;

	if (seals < 0) {
		char path[] = "/tmp/svtest-ring-XXXXXX";

		fd = mkstemp(path);
		CHECK(fd >= 0);
		unlink(path);
	} else {
		fd = memfd_create("svtest-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		CHECK(fd >= 0);
	}
	CHECK_EQ(ftruncate(fd, (off_t)size), 0);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	sv_ring_init(p, size, (uint32_t)getpid());
	munmap(p, size);
	if (seals > 0)
		CHECK_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

static int link_to(struct raw_engine *e, uint32_t target, uint64_t size,
		   int fd)
{
	struct sv_link_req req = { .engine_id = target, .ring_size = size };
	struct sv_link_rep rep;

	return raw_call_fds(e->chan, SV_OP_LINK_CONNECT, &req, sizeof(req),
			    &fd, 1, &rep, sizeof(rep), NULL, NULL);
}

/* The peer: a hostile engine that offers rings to engine `target` and
 * shrinks whatever it got accepted.  Exits 0 when every unsafe ring was
 * refused and the one accepted cannot be shrunk. */
static void hostile_linker(void *arg)
{
	uint32_t target = *(uint32_t *)arg;
	const int both = F_SEAL_SHRINK | F_SEAL_GROW;
	struct raw_engine e;
	int fd, st;

	raw_engine_attach(&e);
	struct {
		int seals;
		uint64_t size, announced;
	} bad[] = {
		{ 0, RING, RING },		  /* no seal */
		{ F_SEAL_GROW, RING, RING },	  /* may still shrink */
		{ F_SEAL_SHRINK, RING, RING },	  /* may still grow */
		{ -1, RING, RING },		  /* not a memfd */
		{ both, RING, RING + 4096 },	  /* shorter than announced */
		{ both, RING + 4096, RING },	  /* longer than announced */
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fd = ring_fd(bad[i].seals, bad[i].size);
		st = link_to(&e, target, bad[i].announced, fd);
		/* What was refused, its creator may shrink: nobody maps it. */
		if (bad[i].seals == 0 || bad[i].seals == F_SEAL_GROW ||
		    bad[i].seals < 0)
			CHECK_EQ(ftruncate(fd, 0), 0);
		close(fd);
		if (st != -EINVAL) {
			fprintf(stderr, "ring %u: LINK_CONNECT answered %d\n", i, st);
			_exit(10 + i);
		}
	}
	/* A properly sealed ring goes through, and stays whole. */
	fd = ring_fd(both | F_SEAL_SEAL, RING);
	CHECK_EQ(link_to(&e, target, RING, fd), 0);
	errno = 0;
	CHECK_EQ(ftruncate(fd, 0), -1);
	CHECK_EQ(errno, EPERM);
	close(fd);
	raw_engine_close(&e);
	_exit(0);
}

/* Some mapping of this process is of a file named name. */
static int mapped_here(const char *name)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int found = 0;

	CHECK(f);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

SV_TEST(unsealed_rings_are_refused)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	struct ep a, b;
	struct ibv_wc wc;
	uint32_t target;
	int chan = raw_connect();

	/* A real engine in this process (two connected QPs). */
	ep_open(&a, NULL, IBV_QPT_RC);
	ep_open(&b, a.ctx, IBV_QPT_RC);
	ep_connect(&a, b.qp->qp_num);
	ep_connect(&b, a.qp->qp_num);
	target = engine_of(chan, getpid());
	CHECK(target != 0);
	close(chan);
	CHECK_EQ(sv_test_child(hostile_linker, &target), 0);
	/* Our engine took the sealed ring (its progress thread maps what
	 * the daemon hands on), we are alive, and our data path still
	 * works. */
	for (int i = 0; !mapped_here("/memfd:svtest-ring"); i++) {
		CHECK(i < 1000);
		sv_test_sleep_ms(10);
	}
	strcpy(a.buf, "still here");
	post_recv(&b, 7, b.buf, 64);
	post_send_op(&a, 8, IBV_WR_SEND, a.buf, 11, 0, 0);
	EXPECT_WC(a.cq, &wc, IBV_WC_SUCCESS);
	EXPECT_WC(b.cq, &wc, IBV_WC_SUCCESS);
	CHECK(!strcmp(b.buf, "still here"));
	ep_close(&a);
	ep_close(&b);
	CHECK_EQ(ibv_close_device(a.ctx), 0);
	check_healthy(pid, &base);
}

SV_TEST_MAIN()

/* SPDX-License-Identifier: MIT */
/*
 * Capture at the protocol level (sv_proto.h "Capture", src/daemon/
 * capture.c), with a raw channel standing for the command and another for
 * an engine:
 *   - bad requests (flags, pad, QPN, unknown session) change nothing;
 *     SV_CAPTURE_MAX sessions, then -EBUSY, and a slot again once a
 *     reader hangs up; the key table counts the sessions;
 *   - capture rings must be sealed memfds of the announced size with a
 *     ring in them; a good one gets the doorbell;
 *   - garbage records in a ring are skipped, a garbled ring is dropped,
 *     the daemon stays healthy and holds no descriptor afterwards;
 *   - a reader that never reads blocks neither the producer nor the
 *     daemon: drops are counted, the stream stays whole records;
 *   - a producer that dies before ringing: its records still reach the
 *     stream (the last drain), with its pid whatever it wrote.
 */
#include "raw_util.h"
#include "sv_keytab.h"
#include "sv_ring.h"
#include "sv_roce.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* The key table, read-only, through an engine attach. */
static const struct sv_keytab_hdr *keytab(int chan)
{
	struct sv_engine_attach_rep rep;
	int db = eventfd(0, EFD_CLOEXEC), rfds[2], nr = 0;
	void *p;

	CHECK(db >= 0);
	CHECK_EQ(raw_call_fds(chan, SV_OP_ENGINE_ATTACH, NULL, 0, &db, 1, &rep,
		      sizeof(rep), rfds, &nr), 0);
	CHECK_EQ(nr, 2);
	p = mmap(NULL, rep.kt_size, PROT_READ, MAP_SHARED, rfds[1], 0);
	CHECK(p != MAP_FAILED);
	close(rfds[1]);
	/* rfds[0] (the engine socket) and db stay: the engine lives on. */
	return p;
}

static uint32_t sessions_now(const struct sv_keytab_hdr *kt)
{
	return atomic_load(&((struct sv_keytab_hdr *)kt)->capture);
}

static void wait_sessions(const struct sv_keytab_hdr *kt, uint32_t n)
{
	for (int i = 0; sessions_now(kt) != n; i++) {
		if (i > 1000)
			sv_test_fail(__FILE__, __LINE__, "capture count %u, want %u",
				     sessions_now(kt), n);
		sv_test_sleep_ms(10);
	}
}

/* Starts a session: its id, the stream in *fd. */
static uint32_t start(int chan, uint32_t flags, uint32_t qpn, uint32_t pid,
		      int *fd)
{
	struct sv_capture_req req = { .qpn = qpn, .pid = pid, .flags = flags };
	struct sv_capture_rep rep;
	int nr = 0;

	CHECK_EQ(raw_call_fds(chan, SV_OP_CAPTURE_START, &req, sizeof(req), NULL, 0,
		      &rep, sizeof(rep), fd, &nr), 0);
	CHECK_EQ(nr, 1);
	CHECK(rep.session != 0);
	return rep.session;
}

static struct sv_capture_stats_rep stats(int chan, uint32_t session)
{
	struct sv_capture_rep req = { .session = session };
	struct sv_capture_stats_rep st;

	CHECK_EQ(raw_call_fds(chan, SV_OP_CAPTURE_STATS, &req, sizeof(req), NULL, 0,
		      &st, sizeof(st), NULL, NULL), 0);
	return st;
}

/* A sealed ring memfd of size bytes, mapped; the fd in *fd. */
static struct sv_ring_hdr *make_ring(size_t size, int seal, int *fd)
{
	struct sv_ring_hdr *h;

	*fd = memfd_create("test-capture", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(*fd >= 0);
	CHECK_EQ(ftruncate(*fd, (off_t)size), 0);
	if (seal)
		CHECK_EQ(fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	CHECK(h != MAP_FAILED);
	return h;
}

static int give_ring(int chan, int fd, uint64_t size, int *db)
{
	struct sv_capture_ring_req req = { .ring_size = size };
	int nr = 0, rfds[SV_MAX_FDS], err;

	err = raw_call_fds(chan, SV_OP_CAPTURE_RING, &req, sizeof(req), &fd, 1,
			   NULL, 0, rfds, &nr);
	if (!err) {
		CHECK_EQ(nr, 1);
		*db = rfds[0];
	}
	return err;
}

static void ring_doorbell(int db)
{
	uint64_t one = 1;

	CHECK_EQ(write(db, &one, sizeof(one)), (ssize_t)sizeof(one));
}

/* A record of a SEND_ONLY to qpn with n payload bytes. */
static void put_rec(struct sv_ring_prod *p, uint32_t type, uint32_t qpn,
		    uint32_t ib_len, uint32_t rec_len, uint32_t dir)
{
	struct sv_cap_rec r = { .ts_ns = 1, .dir = dir, .ib_len = ib_len,
				.pid = 1, .qpn = qpn };
	uint8_t *dst = sv_ring_reserve(p, rec_len, type);

	CHECK(dst);
	r.flow.hop_limit = 64;
	r.flow.dport = SV_ROCE_PORT;
	r.flow.sgid[10] = r.flow.sgid[11] = 0xff;
	r.flow.sgid[12] = 198, r.flow.sgid[13] = 51, r.flow.sgid[14] = 100;
	r.flow.sgid[15] = 1;
	memcpy(r.flow.dgid, r.flow.sgid, 16);
	r.flow.dgid[15] = 2;
	memset(dst, 0, rec_len);
	memcpy(dst, &r, rec_len < sizeof(r) ? rec_len : sizeof(r));
	if (rec_len >= sizeof(r) + 12) {
		uint8_t *b = dst + sizeof(r);

		b[0] = 0x04;
		b[2] = b[3] = 0xff;
		b[5] = (uint8_t)(qpn >> 16), b[6] = (uint8_t)(qpn >> 8);
		b[7] = (uint8_t)qpn;
	}
}

/* Reads the stream until it has `want` records (or ms pass); returns
 * how many, checking the pcap framing and each frame's ICRC. */
static int read_records_ms(int fd, int want, uint32_t *qpns, int ms)
{
	static uint8_t buf[1 << 20];
	size_t have = 0, pos = 0;
	int n = 0, header = 0;

	for (int waited = 0; n < want && waited < ms;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&pfd, 1, 50) <= 0) {
			waited += 50;
			continue;
		}
		r = read(fd, buf + have, sizeof(buf) - have);
		if (r <= 0)
			break;
		have += (size_t)r;
		if (!header && have >= SV_PCAP_FILE_HDR) {
			CHECK_EQ(memcmp(buf, "\x4d\x3c\xb2\xa1", 4), 0);
			pos = SV_PCAP_FILE_HDR;
			header = 1;
		}
		while (header && have - pos >= SV_PCAP_REC_HDR) {
			uint32_t len;
			struct sv_roce_flow f;
			const uint8_t *ib;
			size_t ib_len;

			memcpy(&len, buf + pos + 8, 4);
			CHECK(len < 70000);
			if (have - pos - SV_PCAP_REC_HDR < len)
				break;
			CHECK_EQ(sv_roce_parse(buf + pos + SV_PCAP_REC_HDR, len,
					       &f, &ib, &ib_len), 0);
			if (qpns)
				qpns[n] = (uint32_t)ib[5] << 16 | ib[6] << 8 | ib[7];
			n++;
			pos += SV_PCAP_REC_HDR + len;
		}
		memmove(buf, buf + pos, have - pos);
		have -= pos;
		pos = 0;
	}
	return n;
}

static int read_records(int fd, int want, uint32_t *qpns)
{
	return read_records_ms(fd, want, qpns, 10000);
}

/* Records that should not come: what came within a short while (the
 * daemon writes a drain pass's records to every session at once, so
 * this follows a read_records of another session that saw them all). */
static int read_extra(int fd, int want, uint32_t *qpns)
{
	return read_records_ms(fd, want, qpns, 300);
}

SV_TEST(start_refuses_bad_requests)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	int chan = raw_connect(), eng = raw_connect();
	const struct sv_keytab_hdr *kt = keytab(eng);
	struct sv_capture_req req = { 0 };
	struct sv_capture_rep sreq = { .session = 12345 };
	struct sv_capture_stats_rep st;

	req.flags = 4;
	CHECK_EQ(raw_call_fds(chan, SV_OP_CAPTURE_START, &req, sizeof(req), NULL, 0,
		      NULL, 0, NULL, NULL), -EINVAL);
	req.flags = SV_CAPTURE_QPN, req.qpn = 0x1000000;
	CHECK_EQ(raw_call_fds(chan, SV_OP_CAPTURE_START, &req, sizeof(req), NULL, 0,
		      NULL, 0, NULL, NULL), -EINVAL);
	req.qpn = 5, req.pad = 1;
	CHECK_EQ(raw_call_fds(chan, SV_OP_CAPTURE_START, &req, sizeof(req), NULL, 0,
		      NULL, 0, NULL, NULL), -EINVAL);
	CHECK_EQ(ask(chan, SV_OP_CAPTURE_START, 0, &req, sizeof(req) - 4,
		     NULL, 0), -EINVAL);
	CHECK_EQ(raw_call_fds(chan, SV_OP_CAPTURE_STATS, &sreq, sizeof(sreq), NULL, 0,
		      &st, sizeof(st), NULL, NULL), -ENOENT);
	CHECK_EQ(sessions_now(kt), 0);
	close(chan);
	close(eng);
	check_healthy(pid, &base);
}

SV_TEST(sessions_counted_and_limited)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	int chan = raw_connect(), eng = raw_connect();
	const struct sv_keytab_hdr *kt = keytab(eng);
	int fds[SV_CAPTURE_MAX + 1], extra;
	uint32_t ids[SV_CAPTURE_MAX];
	struct sv_capture_req req = { 0 };

	for (int i = 0; i < SV_CAPTURE_MAX; i++) {
		ids[i] = start(chan, 0, 0, 0, &fds[i]);
		CHECK_EQ(sessions_now(kt), (uint32_t)i + 1);
		for (int j = 0; j < i; j++)
			CHECK(ids[j] != ids[i]);
	}
	CHECK_EQ(raw_call_fds(chan, SV_OP_CAPTURE_START, &req, sizeof(req), NULL, 0,
		      NULL, 0, NULL, NULL), -EBUSY);
	/* A reader hangs up: its session ends, a slot is free. */
	close(fds[3]);
	wait_sessions(kt, SV_CAPTURE_MAX - 1);
	{
		struct sv_capture_rep sreq = { .session = ids[3] };
		struct sv_capture_stats_rep st;

		CHECK_EQ(raw_call_fds(chan, SV_OP_CAPTURE_STATS, &sreq, sizeof(sreq),
			      NULL, 0, &st, sizeof(st), NULL, NULL), -ENOENT);
	}
	start(chan, SV_CAPTURE_PID, 0, 1, &extra);
	CHECK_EQ(sessions_now(kt), SV_CAPTURE_MAX);
	close(extra);
	for (int i = 0; i < SV_CAPTURE_MAX; i++)
		if (i != 3)
			close(fds[i]);
	wait_sessions(kt, 0);
	close(chan);
	close(eng);
	check_healthy(pid, &base);
}

SV_TEST(rings_must_be_sealed_memfds)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	const size_t RS = SV_RING_DATA_OFF + 65536;
	int chan = raw_connect(), fd, db, p[2];
	struct sv_ring_hdr *h;
	struct stat st;
	char link[64], target[64] = "";

	/* Unsealed. */
	h = make_ring(RS, 0, &fd);
	sv_ring_init(h, RS, (uint32_t)getpid());
	CHECK_EQ(give_ring(chan, fd, RS, &db), -EINVAL);
	close(fd);
	munmap(h, RS);
	/* Sealed, another size than announced; too small; too big. */
	h = make_ring(RS, 1, &fd);
	CHECK_EQ(give_ring(chan, fd, RS - 4096, &db), -EINVAL);
	CHECK_EQ(give_ring(chan, fd, 4096, &db), -EINVAL);
	CHECK_EQ(give_ring(chan, fd, 2ull << 30, &db), -EINVAL);
	/* The right size, but no ring in it. */
	CHECK_EQ(give_ring(chan, fd, RS, &db), -EINVAL);
	/* Not a memfd. */
	CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
	CHECK_EQ(give_ring(chan, p[0], RS, &db), -EINVAL);
	close(p[0]);
	close(p[1]);
	/* No descriptor at all. */
	{
		struct sv_capture_ring_req req = { .ring_size = RS };

		CHECK_EQ(raw_call_fds(chan, SV_OP_CAPTURE_RING, &req, sizeof(req), NULL,
			      0, NULL, 0, NULL, NULL), -EINVAL);
	}
	/* A real one: the reply carries the doorbell, an eventfd. */
	sv_ring_init(h, RS, (uint32_t)getpid());
	CHECK_EQ(give_ring(chan, fd, RS, &db), 0);
	CHECK_EQ(fstat(db, &st), 0);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", db);
	CHECK(readlink(link, target, sizeof(target) - 1) > 0);
	CHECK(strstr(target, "eventfd") != NULL);
	/* A second one replaces the first. */
	{
		int fd2, db2;
		struct sv_ring_hdr *h2 = make_ring(RS, 1, &fd2);

		sv_ring_init(h2, RS, (uint32_t)getpid());
		CHECK_EQ(give_ring(chan, fd2, RS, &db2), 0);
		close(db2);
		close(fd2);
		munmap(h2, RS);
	}
	close(db);
	close(fd);
	munmap(h, RS);
	close(chan);
	/* The channel gone, its ring and the doorbell go too. */
	check_healthy(pid, &base);
}

SV_TEST(garbage_records_skipped_garbled_ring_dropped)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	int cmd = raw_connect(), eng = raw_connect(), fd, db, stream;
	const struct sv_keytab_hdr *kt = keytab(eng);
	const size_t size = SV_RING_DATA_OFF + 65536;
	struct sv_ring_hdr *h = make_ring(size, 1, &fd);
	struct sv_ring_prod p;
	uint32_t qpns[8], session;
	const uint32_t R = sizeof(struct sv_cap_rec);

	sv_ring_init(h, size, (uint32_t)getpid());
	sv_ring_prod_init(&p, h);
	CHECK_EQ(give_ring(eng, fd, size, &db), 0);
	session = start(cmd, 0, 0, 0, &stream);
	CHECK_EQ(sessions_now(kt), 1);
	put_rec(&p, SV_REC_CAPTURE, 0x101, 40, R + 40, 0);	/* good */
	put_rec(&p, 7, 0x102, 40, R + 40, 0);			/* other type */
	put_rec(&p, SV_REC_CAPTURE, 0x103, 40, R - 1, 0);	/* short */
	put_rec(&p, SV_REC_CAPTURE, 0x104, 41, R + 40, 0);	/* ib_len > rec */
	put_rec(&p, SV_REC_CAPTURE, 0x105, 11, R + 11, 0);	/* no BTH */
	put_rec(&p, SV_REC_CAPTURE, 0x106, 40, R + 40, 2);	/* bad dir */
	put_rec(&p, SV_REC_CAPTURE, 0x107, 12, R + 12, 1);	/* good */
	sv_ring_commit(&p);
	ring_doorbell(db);
	CHECK_EQ(read_records(stream, 2, qpns), 2);
	CHECK_EQ(read_extra(stream, 1, NULL), 0);
	CHECK_EQ(qpns[0], 0x101);
	CHECK_EQ(qpns[1], 0x107);
	CHECK_EQ(stats(cmd, session).packets, 2);
	/* A tail that cannot be: the ring is dropped, nothing else. */
	atomic_store(&h->tail, atomic_load(&h->tail) + (1u << 30));
	ring_doorbell(db);
	CHECK_EQ(read_extra(stream, 1, NULL), 0);
	CHECK_EQ(ask(cmd, SV_OP_PING, 0, NULL, 0, NULL, 0), 0);
	close(db);
	close(fd);
	munmap(h, size);
	close(eng);
	close(stream);
	wait_sessions(kt, 0);
	close(cmd);
	check_healthy(pid, &base);
}

SV_TEST(stalled_reader_blocks_nobody)
{
	struct sv_status_rep base, st;
	pid_t pid = baseline(&base);
	int cmd = raw_connect(), eng = raw_connect(), fd, db, stream, n;
	const size_t size = SV_RING_DATA_OFF + (1u << 20);
	struct sv_ring_hdr *h = make_ring(size, 1, &fd);
	const uint32_t R = sizeof(struct sv_cap_rec);
	struct sv_capture_stats_rep cs;
	struct sv_ring_prod p;
	uint32_t session;
	int produced = 0;

	sv_ring_init(h, size, (uint32_t)getpid());
	sv_ring_prod_init(&p, h);
	CHECK_EQ(give_ring(eng, fd, size, &db), 0);
	session = start(cmd, 0, 0, 0, &stream);
	/* ~16 MB of 4 KiB packets while nobody reads the stream. */
	while (produced < 4000) {
		if (!sv_ring_reserve(&p, R + 4108, SV_REC_CAPTURE)) {
			if (sv_ring_commit(&p))
				ring_doorbell(db);
			sv_test_sleep_ms(1);
			continue;
		}
		sv_ring_abort(&p);
		put_rec(&p, SV_REC_CAPTURE, 0x200 + (uint32_t)produced % 16,
			4108, R + 4108, 0);
		produced++;
		if (sv_ring_commit(&p))
			ring_doorbell(db);
	}
	for (int i = 0; atomic_load(&h->head) != p.tail; i++) {
		CHECK(i < 5000);
		sv_test_sleep_ms(1);
	}
	/* The daemon answered all along and still does. */
	CHECK_EQ(sv_test_status(&st), 0);
	cs = stats(cmd, session);
	CHECK_EQ(cs.packets + cs.dropped, 4000);
	CHECK(cs.dropped > 0);
	/* What was kept is whole records. */
	n = read_records(stream, (int)cs.packets, NULL);
	CHECK_EQ(n, (int)cs.packets);
	close(db);
	close(fd);
	munmap(h, size);
	close(eng);
	close(stream);
	close(cmd);
	check_healthy(pid, &base);
}

/* The producer, in a child: hands a ring, writes records, never rings. */
static void dying_producer(void *arg)
{
	const size_t size = SV_RING_DATA_OFF + 65536;
	int chan = raw_connect(), fd, db;
	struct sv_ring_hdr *h = make_ring(size, 1, &fd);
	struct sv_ring_prod p;

	(void)arg;
	sv_ring_init(h, size, (uint32_t)getpid());
	sv_ring_prod_init(&p, h);
	CHECK_EQ(give_ring(chan, fd, size, &db), 0);
	for (int i = 0; i < 5; i++)
		put_rec(&p, SV_REC_CAPTURE, 0x300 + (uint32_t)i, 20,
			(uint32_t)sizeof(struct sv_cap_rec) + 20, 0);
	sv_ring_commit(&p); /* and no doorbell: the daemon does not know */
	_exit(0);
}

SV_TEST(dead_producer_records_still_arrive)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	int cmd = raw_connect(), stream;
	uint32_t qpns[8];

	start(cmd, 0, 0, 0, &stream);
	CHECK_EQ(sv_test_child(dying_producer, NULL), 0);
	CHECK_EQ(read_records(stream, 5, qpns), 5);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(qpns[i], 0x300 + (uint32_t)i);
	close(stream);
	close(cmd);
	check_healthy(pid, &base);
}

SV_TEST(filters_and_pid_from_the_channel)
{
	struct sv_status_rep base;
	pid_t pid = baseline(&base);
	int cmd = raw_connect(), eng = raw_connect(), fd, db, s_all, s_qpn,
	    s_me, s_other;
	const size_t size = SV_RING_DATA_OFF + 65536;
	struct sv_ring_hdr *h = make_ring(size, 1, &fd);
	const uint32_t R = sizeof(struct sv_cap_rec);
	struct sv_ring_prod p;
	uint32_t qpns[8];

	sv_ring_init(h, size, (uint32_t)getpid());
	sv_ring_prod_init(&p, h);
	CHECK_EQ(give_ring(eng, fd, size, &db), 0);
	start(cmd, 0, 0, 0, &s_all);
	start(cmd, SV_CAPTURE_QPN, 0x402, 0, &s_qpn);
	start(cmd, SV_CAPTURE_PID, 0, (uint32_t)getpid(), &s_me);
	/* Our records say pid 1: the daemon knows better. */
	start(cmd, SV_CAPTURE_PID, 0, 1, &s_other);
	for (uint32_t i = 0; i < 4; i++)
		put_rec(&p, SV_REC_CAPTURE, 0x400 + i, 20, R + 20, 0);
	if (sv_ring_commit(&p))
		ring_doorbell(db);
	CHECK_EQ(read_records(s_all, 4, qpns), 4);
	CHECK_EQ(read_records(s_me, 4, NULL), 4);
	CHECK_EQ(read_extra(s_qpn, 4, qpns), 1);
	CHECK_EQ(qpns[0], 0x402);
	CHECK_EQ(read_extra(s_other, 1, NULL), 0);
	close(s_all);
	close(s_qpn);
	close(s_me);
	close(s_other);
	close(db);
	close(fd);
	munmap(h, size);
	close(eng);
	close(cmd);
	check_healthy(pid, &base);
}

SV_TEST_MAIN()

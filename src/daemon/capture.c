/* SPDX-License-Identifier: MIT */
/*
 * Capture: every packet the device sends and receives, as a pcap stream
 * (sv_proto.h "Capture"; `softverbs capture`).
 *
 * Who copies what.  The engines see every packet (on the wire and between
 * processes of this host); while the key table's `capture` count is
 * nonzero, each engine copies the packets it sends and receives into a
 * capture ring of its own (SV_OP_CAPTURE_RING hands it to us): a record
 * with the packet's IP/UDP description (struct sv_cap_rec) and its IBTA
 * bytes.  Packets the daemon itself handles (the wire gateway) come in
 * through svd_capture_frame().  When no session runs the count is 0 and
 * an engine pays one load per packet.
 *
 * Draining.  The rings use the links' doorbell protocol (sv_ring.h): one
 * eventfd of ours for all of them.  When it rings we disarm every ring,
 * drain them, and arm each again once empty (a producer that commits
 * meanwhile sees it unarmed and makes no system call), so a busy producer
 * rings rarely and an idle one not at all.  A drain pass takes at most
 * DRAIN_BUDGET records per ring, then rings the doorbell itself and lets
 * the event loop serve others first.
 *
 * Writing.  A session is a pipe whose read end went to the command.  The
 * daemon never blocks on it: each session has a buffer of whole pcap
 * records, flushed with non-blocking writes once per turn of the event
 * loop (svd_capture_flush) and on EPOLLOUT.  A record that finds neither room in the buffer nor in the
 * pipe is dropped and counted; records are never cut, so the stream stays
 * a valid pcap whatever the reader's speed.  The reader closing its end
 * (EPOLLERR on ours) ends the session.
 */
#include "svd_capture.h"
#include "svd_engine.h"
#include "svd_ops.h"
#include "sv_keytab.h"
#include "sv_log.h"
#include "sv_ring.h"
#include "sv_hdr.h"
#include "sv_roce.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#define SESSION_BUF (512u << 10) /* bytes of whole records waiting */
#define PIPE_BYTES (1u << 20)	 /* asked for; unprivileged maximum */
#define DRAIN_BUDGET 512
#define MAX_RINGS 4096

struct cap_session {
	struct svd_watch w; /* our (write) end of the pipe */
	uint32_t id;
	uint32_t flags, qpn, pid;
	uint8_t *buf; /* [off, len): bytes not yet in the pipe */
	size_t off, len;
	int want_out; /* EPOLLOUT registered */
	struct sv_capture_stats_rep st;
	struct cap_session *next;
};

struct cap_ring {
	struct svd_conn *conn; /* the channel that handed it */
	pid_t pid;
	void *map;
	uint64_t size;
	struct sv_ring_cons c;
	int broken; /* the producer wrote something impossible */
	struct cap_ring *next;
};

static struct cap_session *sessions;
static uint32_t nsessions, next_session_id;
static int dirty; /* records appended since the last flush_all */
static struct cap_ring *rings;
static uint32_t nrings;
static struct svd_watch doorbell = { .kind = SVD_W_CAPTURE, .fd = -1 };
static uint8_t frame[SV_ROCE_IP6_HDR + SV_ROCE_UDP_HDR + SV_ROCE_MAX_IB6 +
		     SV_ICRC_BYTES];

static void publish_count(void)
{
	svd_keytab_set_capture(nsessions);
}

/* ------------------------------------------------------- sessions -- */

/* Moves buffered bytes into the pipe until it is full. */
static void flush(struct cap_session *s)
{
	while (s->off < s->len) {
		ssize_t n = write(s->w.fd, s->buf + s->off, s->len - s->off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break; /* EAGAIN: full; EPIPE: EPOLLERR ends it */
		}
		s->off += (size_t)n;
	}
	if (s->off == s->len)
		s->off = s->len = 0;
	if ((s->len != 0) != s->want_out) {
		s->want_out = s->len != 0;
		svd_watch_mod(&s->w, s->want_out ? EPOLLOUT : 0);
	}
}

/* Appends a record (header + frame) if it fits, else counts a drop. */
static void append(struct cap_session *s, uint64_t ts_ns, const uint8_t *fr,
		   size_t len)
{
	size_t need = SV_PCAP_REC_HDR + len;

	if (s->len + need > SESSION_BUF && s->off) {
		memmove(s->buf, s->buf + s->off, s->len - s->off);
		s->len -= s->off;
		s->off = 0;
	}
	if (s->len + need > SESSION_BUF) {
		flush(s);
		if (s->len + need > SESSION_BUF) {
			s->st.dropped++;
			return;
		}
	}
	sv_pcap_rec_hdr(s->buf + s->len, ts_ns, len);
	memcpy(s->buf + s->len + SV_PCAP_REC_HDR, fr, len);
	s->len += need;
	dirty = 1;
	s->st.packets++;
	s->st.bytes += need;
}

static void session_end(struct cap_session *s)
{
	struct cap_session **pp;

	for (pp = &sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	svd_watch_del(&s->w);
	close(s->w.fd);
	s->w.fd = -1;
	sv_info("capture %u ended: %llu packets, %llu dropped", s->id,
		(unsigned long long)s->st.packets,
		(unsigned long long)s->st.dropped);
	free(s->buf);
	s->buf = NULL;
	nsessions--;
	publish_count();
	svd_defer_free(s);
}

static struct cap_session *session_by_id(uint32_t id)
{
	for (struct cap_session *s = sessions; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

int svd_op_capture_start(struct svd_req *r)
{
	const struct sv_capture_req *req = r->body;
	struct sv_capture_rep *rep = r->rep;
	struct cap_session *s;
	int p[2], err;

	if (req->pad || (req->flags & ~(SV_CAPTURE_QPN | SV_CAPTURE_PID)) ||
	    ((req->flags & SV_CAPTURE_QPN) && req->qpn > 0xffffff))
		return -EINVAL;
	if (nsessions >= SV_CAPTURE_MAX)
		return -EBUSY;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->buf = malloc(SESSION_BUF);
	if (!s->buf) {
		err = -ENOMEM;
		goto err_free;
	}
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
		err = -errno;
		goto err_free;
	}
	/* The reader's end blocks as usual; ours never does.  A bigger pipe
	 * rides out a reader's hiccup (ours to ask, the kernel's to grant). */
	fcntl(p[0], F_SETFL, 0);
	fcntl(p[1], F_SETPIPE_SZ, PIPE_BYTES);
	s->w.kind = SVD_W_CAPTURE;
	s->w.fd = p[1];
	err = svd_watch_add(&s->w, 0);
	if (err)
		goto err_pipe;
	s->flags = req->flags;
	s->qpn = req->qpn;
	s->pid = req->pid;
	if (!++next_session_id)
		++next_session_id;
	s->id = next_session_id;
	sv_pcap_file_hdr(s->buf);
	s->len = SV_PCAP_FILE_HDR;
	s->next = sessions;
	sessions = s;
	nsessions++;
	publish_count();
	flush(s);
	rep->session = s->id;
	r->rep_len = sizeof(*rep);
	r->out_fds[0] = p[0];
	r->n_out_fds = 1;
	sv_info("capture %u started by pid %d (flags %#x qpn %#x pid %u)",
		s->id, (int)r->conn->pid, s->flags, s->qpn, s->pid);
	return 0;

err_pipe:
	close(p[0]);
	close(p[1]);
err_free:
	free(s->buf);
	free(s);
	return err;
}

int svd_op_capture_stats(struct svd_req *r)
{
	const struct sv_capture_rep *req = r->body;
	struct sv_capture_stats_rep *rep = r->rep;
	struct cap_session *s = session_by_id(req->session);

	if (req->pad)
		return -EINVAL;
	if (!s)
		return -ENOENT;
	/* What is still buffered counts as written: it is on its way. */
	*rep = s->st;
	r->rep_len = sizeof(*rep);
	return 0;
}

/* -------------------------------------------------------- records -- */

static int wants(const struct cap_session *s, const struct sv_cap_rec *r,
		 const uint8_t *ib)
{
	if ((s->flags & SV_CAPTURE_PID) && r->pid != s->pid)
		return 0;
	if (s->flags & SV_CAPTURE_QPN) {
		uint32_t dqp = __bth_qpn(ib);
		int ud = __bth_transport(ib) == SV_OPC_UD &&
			 r->ib_len >= SV_BTH_BYTES + SV_DETH_BYTES;
		uint32_t sqp = ud ? __deth_sqp(ib + SV_BTH_BYTES) : 0xffffffffu;

		if (r->qpn != s->qpn && dqp != s->qpn && sqp != s->qpn)
			return 0;
	}
	return 1;
}

/* r is a private copy; ib may be shared memory its producer still
 * writes (it garbles only its own packet: every length is r's). */
static void capture(const struct sv_cap_rec *r, const uint8_t *ib)
{
	size_t len = 0;

	if (r->ib_len < 12 || r->dir > 1)
		return;
	for (struct cap_session *s = sessions; s; s = s->next) {
		if (!wants(s, r, ib))
			continue;
		if (!len) {
			len = sv_roce_frame(frame, sizeof(frame), &r->flow, ib,
					    r->ib_len);
			if (!len)
				return; /* too long for an IP datagram */
		}
		append(s, r->ts_ns, frame, len);
	}
}

void svd_capture_frame(const struct sv_cap_rec *r, const void *ib)
{
	capture(r, ib);
}

void svd_capture_flush(void)
{
	if (!dirty)
		return;
	dirty = 0;
	for (struct cap_session *s = sessions; s; s = s->next)
		flush(s);
}

/* ---------------------------------------------------------- rings -- */

/* No ring left: nobody rings the doorbell any more (producers keep only
 * dups, which nothing reads), so the daemon holds no descriptor for it. */
static void doorbell_drop_if_unused(void)
{
	if (!rings && doorbell.fd >= 0) {
		svd_watch_del(&doorbell);
		close(doorbell.fd);
		doorbell.fd = -1;
	}
}

static void ring_free(struct cap_ring *cr)
{
	struct cap_ring **pp;

	for (pp = &rings; *pp; pp = &(*pp)->next)
		if (*pp == cr) {
			*pp = cr->next;
			break;
		}
	munmap(cr->map, cr->size);
	nrings--;
	free(cr);
	doorbell_drop_if_unused();
}

/* Records a ring holds at most: a last drain of a ring whose producer
 * may still be writing takes no more than that. */
static int ring_budget(const struct cap_ring *cr)
{
	return (int)(cr->c.size / SV_REC_ALIGN(sizeof(struct sv_rec_hdr) +
						sizeof(struct sv_cap_rec)));
}

/* Takes up to budget records; returns 1 when some are left. */
static int drain(struct cap_ring *cr, int budget)
{
	while (!cr->broken) {
		struct sv_cap_rec r;
		const void *payload;
		uint32_t type, len;
		int rc = sv_ring_peek(&cr->c, &type, &payload, &len);

		if (rc < 0) {
			sv_warn("pid %d: capture ring garbled: dropped",
				(int)cr->pid);
			cr->broken = 1;
			break;
		}
		if (rc == 0) {
			/* Empty: ask for the doorbell, unless more came. */
			if (!sv_ring_arm(&cr->c))
				return 0;
			sv_ring_disarm(&cr->c);
			continue;
		}
		if (budget-- == 0)
			return 1;
		if (type == SV_REC_CAPTURE && len >= sizeof(r)) {
			memcpy(&r, payload, sizeof(r));
			if (r.ib_len <= len - sizeof(r)) {
				r.pid = (uint32_t)cr->pid;
				if (sessions)
					capture(&r, (const uint8_t *)payload +
							    sizeof(r));
			}
		}
		sv_ring_pop(&cr->c, len);
	}
	return 0;
}

static void drain_all(void)
{
	int more = 0;
	uint64_t v;

	if (read(doorbell.fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		sv_dbg("capture doorbell: %s", strerror(errno));
	for (struct cap_ring *cr = rings; cr; cr = cr->next) {
		sv_ring_disarm(&cr->c);
		more |= drain(cr, DRAIN_BUDGET);
	}
	if (more) {
		/* Come back after the others had their turn. */
		v = 1;
		if (write(doorbell.fd, &v, sizeof(v)) < 0)
			sv_dbg("capture doorbell: %s", strerror(errno));
	}
}

int svd_op_capture_ring(struct svd_req *r)
{
	const struct sv_capture_ring_req *req = r->body;
	struct cap_ring *cr, *old = NULL;
	int db, err;

	if (req->ring_size < 8192 || req->ring_size > (1u << 30))
		return -EINVAL;
	err = svd_check_ring_fd(r->fds[0], req->ring_size);
	if (err)
		return err;
	for (cr = rings; cr; cr = cr->next)
		if (cr->conn == r->conn)
			old = cr;
	if (!old && nrings >= MAX_RINGS)
		return -EBUSY;
	if (doorbell.fd < 0) {
		doorbell.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (doorbell.fd < 0)
			return -errno;
		err = svd_watch_add(&doorbell, EPOLLIN);
		if (err) {
			close(doorbell.fd);
			doorbell.fd = -1;
			return err;
		}
	}
	cr = calloc(1, sizeof(*cr));
	if (!cr) {
		err = -ENOMEM;
		goto err_doorbell;
	}
	cr->map = mmap(NULL, req->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       r->fds[0], 0);
	if (cr->map == MAP_FAILED) {
		err = -errno;
		goto err_free;
	}
	cr->size = req->ring_size;
	if (sv_ring_cons_init(&cr->c, cr->map, cr->size)) {
		err = -EINVAL;
		goto err_unmap;
	}
	db = fcntl(doorbell.fd, F_DUPFD_CLOEXEC, 0);
	if (db < 0) {
		err = -errno;
		goto err_unmap;
	}
	cr->conn = r->conn;
	cr->pid = r->conn->pid;
	sv_ring_arm(&cr->c);
	cr->next = rings;
	rings = cr;
	nrings++;
	if (old) {
		drain(old, ring_budget(old));
		ring_free(old);
	}
	r->out_fds[0] = db;
	r->n_out_fds = 1;
	r->rep_len = 0;
	return 0;

err_unmap:
	munmap(cr->map, req->ring_size);
err_free:
	free(cr);
err_doorbell:
	doorbell_drop_if_unused();
	return err;
}

void svd_capture_conn_gone(struct svd_conn *c)
{
	struct cap_ring *cr = rings, *next;

	for (; cr; cr = next) {
		next = cr->next;
		if (cr->conn == c) {
			/* What it wrote before dying is still news. */
			drain(cr, ring_budget(cr));
			ring_free(cr);
		}
	}
}

void svd_capture_event(struct svd_watch *w, uint32_t events)
{
	struct cap_session *s = (struct cap_session *)w;

	if (w == &doorbell) {
		drain_all();
		return;
	}
	if (events & (EPOLLERR | EPOLLHUP)) {
		session_end(s); /* the reader closed its end */
		return;
	}
	if (events & EPOLLOUT)
		flush(s);
}

int svd_capture_busy(void)
{
	return sessions != NULL;
}

void svd_capture_close_all(void)
{
	while (sessions) {
		flush(sessions);
		session_end(sessions);
	}
	while (rings)
		ring_free(rings);
}

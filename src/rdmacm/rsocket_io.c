/* SPDX-License-Identifier: MIT */
/*
 * rsockets' data path: the buffers and the QP of a connected rsocket,
 * credits, send and receive, riomap/riowrite (rsocket_int.h has the
 * protocol).
 */
#include "rsocket_int.h"

#include <endian.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* The event channel is a socket: reading it is a system call, which every
 * rs_progress made -- each pass of a spin in rs_wait and rpoll, and every
 * rsend and rrecv: 23,000-28,000 a second on each side of an iperf3
 * stream between two namespaces, and sockperf's ping-pong there took
 * 19.6-23.9 us (p50) with them, 12.1-12.6 without.  What the channel
 * brings (the peer's disconnect) is seen this long after it comes by a
 * thread that polls, at once by one that sleeps (the channel's fd wakes
 * it: rs_cm_progress_now). */
#define RS_CM_POLL_NS 200000

static uint32_t clampu(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void rs_fill_conn(struct rsock *rs, struct rs_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->magic = htobe32(RS_MAGIC);
	c->version = 1;
	c->slot = htobe32(rs->slot);
	c->credits = htobe32(rs->nrecv);
}

/* What the peer said in its private data: its buffers and their count. */
void rs_peer_params(struct rsock *rs, const void *pdata, uint8_t len)
{
	struct rs_conn c;

	memset(&c, 0, sizeof(c));
	if (pdata && len >= sizeof(c))
		memcpy(&c, pdata, sizeof(c));
	if (be32toh(c.magic) != RS_MAGIC) {
		rs->credits = 0;
		return;
	}
	rs->credits = (int)be32toh(c.credits);
	rs->peer_slot = be32toh(c.slot);
	if (rs->slot)
		rs->msgmax = rs->peer_slot < rs->slot ? rs->peer_slot : rs->slot;
}

static int post_recv(struct rsock *rs, uint32_t slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(rs->rbuf + (size_t)slot * rs->slot),
			       .length = rs->slot,
			       .lkey = rs->rmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	return ibv_post_recv(rs->id->qp, &wr, &bad);
}

int rs_create_ep(struct rsock *rs)
{
	struct ibv_qp_init_attr qa;
	size_t ssize, rsize;
	int e;

	rs->slot = RS_SLOT;
	rs->msgmax = rs->peer_slot && rs->peer_slot < rs->slot ? rs->peer_slot :
								 rs->slot;
	rs->nsend = clampu((uint32_t)rs->sndbuf / rs->slot, 4,
			   rs->sqsize ? (uint32_t)rs->sqsize : 256);
	rs->nrecv = clampu((uint32_t)rs->rcvbuf / rs->slot, 4,
			   rs->rqsize ? (uint32_t)rs->rqsize : 256);
	ssize = (size_t)rs->nsend * rs->slot;
	rsize = (size_t)rs->nrecv * rs->slot;
	rs->cc = ibv_create_comp_channel(rs->id->verbs);
	if (!rs->cc)
		goto err;
	fcntl(rs->cc->fd, F_SETFL, fcntl(rs->cc->fd, F_GETFL) | O_NONBLOCK);
	rs->cq = ibv_create_cq(rs->id->verbs, (int)(rs->nsend + rs->nrecv),
			       rs, rs->cc, 0);
	if (!rs->cq)
		goto err;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = rs->nsend;
	qa.cap.max_recv_wr = rs->nrecv;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(rs->id, NULL, &qa))
		goto err;
	if (posix_memalign((void **)&rs->sbuf, 4096, ssize) ||
	    posix_memalign((void **)&rs->rbuf, 4096, rsize))
		goto err;
	rs->smr = ibv_reg_mr(rs->id->pd, rs->sbuf, ssize, IBV_ACCESS_LOCAL_WRITE);
	rs->rmr = ibv_reg_mr(rs->id->pd, rs->rbuf, rsize, IBV_ACCESS_LOCAL_WRITE);
	rs->rq_slot = calloc(rs->nrecv, sizeof(*rs->rq_slot));
	rs->rq_len = calloc(rs->nrecv, sizeof(*rs->rq_len));
	rs->stage = malloc(rs->slot);
	rs->stage_len = 0;
	if (!rs->smr || !rs->rmr || !rs->rq_slot || !rs->rq_len || !rs->stage)
		goto err;
	for (uint32_t i = 0; i < rs->nrecv; i++)
		if (post_recv(rs, i))
			goto err;
	rs->s_free = rs->nsend;
	if (ibv_req_notify_cq(rs->cq, 0))
		goto err;
	return 0;
err:
	e = errno ? errno : ENOMEM;
	rs_free_ep(rs);
	return cma_err(e);
}

void rs_free_ep(struct rsock *rs)
{
	for (int i = 0; i < rs->nlmaps; i++)
		if (rs->lmaps[i].mr)
			ibv_dereg_mr(rs->lmaps[i].mr);
	free(rs->lmaps);
	free(rs->rmaps);
	rs->lmaps = rs->rmaps = NULL;
	rs->nlmaps = rs->nrmaps = 0;
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	rs->smr = rs->rmr = NULL;
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	rs->cq = NULL;
	if (rs->cc)
		ibv_destroy_comp_channel(rs->cc);
	rs->cc = NULL;
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->rq_slot);
	free(rs->rq_len);
	free(rs->stage);
	rs->stage = NULL;
	rs->stage_len = 0;
	rs->sbuf = rs->rbuf = NULL;
	rs->rq_slot = rs->rq_len = NULL;
}

/* Posts one message from send slot s (len bytes there already). */
static int post_msg(struct rsock *rs, enum rs_op op, uint32_t len)
{
	uint32_t s = rs->s_head;
	struct ibv_sge sge = { .addr = (uintptr_t)(rs->sbuf + (size_t)s * rs->slot),
			       .length = len,
			       .lkey = rs->smr->lkey };
	struct ibv_send_wr wr, *bad;
	uint32_t credits = rs->pending > 0x0fffffff ? 0x0fffffff : rs->pending;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = s;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32((uint32_t)op << 28 | credits);
	if (ibv_post_send(rs->id->qp, &wr, &bad))
		return -1;
	rs->pending -= credits;
	rs->credits--;
	rs->s_free--;
	rs->s_head = (s + 1) % rs->nsend;
	return 0;
}

/* A control message: needs a credit (the reserve is for these) and a slot. */
static int post_ctl(struct rsock *rs, enum rs_op op, const void *p,
		    uint32_t len)
{
	if (rs->credits <= 0 || !rs->s_free || rs->state != RS_CONNECTED)
		return -1;
	if (len)
		memcpy(rs->sbuf + (size_t)rs->s_head * rs->slot, p, len);
	return post_msg(rs, op, len);
}

/* Credits go back alone once half the buffers wait to be told about. */
static void maybe_credit(struct rsock *rs)
{
	if (rs->pending >= (rs->nrecv + 1) / 2)
		post_ctl(rs, RS_OP_CREDIT, NULL, 0);
}

/* A data message may go: connected, a credit beyond the reserve, a slot.
 * (rs_can_send adds that the application may still write: staged bytes
 * go out after a shutdown of writing too, before its message.) */
static int can_post_data(const struct rsock *rs)
{
	return rs->state == RS_CONNECTED && rs->credits > RS_RESERVE &&
	       rs->s_free > 0;
}

/* Sends the staged bytes as one message when a credit allows.  Returns
 * 0 when nothing stays staged. */
static int flush_stage(struct rsock *rs)
{
	if (!rs->stage_len)
		return 0;
	if (!can_post_data(rs))
		return -1;
	memcpy(rs->sbuf + (size_t)rs->s_head * rs->slot, rs->stage,
	       rs->stage_len);
	if (post_msg(rs, RS_OP_DATA, rs->stage_len))
		return -1;
	rs->stage_len = 0;
	return 0;
}

static void repost(struct rsock *rs, uint32_t slot)
{
	if (!post_recv(rs, slot))
		rs->pending++;
}

static void got_iomap(struct rsock *rs, const uint8_t *p, uint32_t len)
{
	struct rs_iomap_msg m;
	struct rs_iomap *n;

	if (len < sizeof(m))
		return;
	memcpy(&m, p, sizeof(m));
	n = realloc(rs->rmaps, (rs->nrmaps + 1) * sizeof(*n));
	if (!n)
		return;
	rs->rmaps = n;
	memset(&n[rs->nrmaps], 0, sizeof(*n));
	n[rs->nrmaps].offset = be64toh(m.offset);
	n[rs->nrmaps].addr = be64toh(m.addr);
	n[rs->nrmaps].length = be64toh(m.length);
	n[rs->nrmaps].rkey = be32toh(m.rkey);
	rs->nrmaps++;
}

static void completion(struct rsock *rs, const struct ibv_wc *wc)
{
	rs->ncomp++;
	if (wc->status != IBV_WC_SUCCESS) {
		sv_dbg("rsocket %d: %s completion: %s", rs->index,
		       wc->opcode & IBV_WC_RECV ? "receive" : "send",
		       ibv_wc_status_str(wc->status));
		if (!(wc->opcode & IBV_WC_RECV))
			rs->s_free++;
		/* Flushed after a disconnect is expected; anything else
		 * breaks the connection. */
		if (wc->status != IBV_WC_WR_FLUSH_ERR && rs->state == RS_CONNECTED)
			rs_set_error(rs, ECONNRESET);
		else if (rs->state == RS_CONNECTED)
			rs->state = RS_DISCONNECTED;
		return;
	}
	if (!(wc->opcode & IBV_WC_RECV)) {
		rs->s_free++;
		return;
	}
	{
		uint32_t imm = be32toh(wc->imm_data);
		uint32_t slot = (uint32_t)wc->wr_id;
		enum rs_op op = (enum rs_op)(imm >> 28);

		rs->credits += (int)(imm & 0x0fffffff);
		switch (op) {
		case RS_OP_DATA:
			if (!wc->byte_len) {
				repost(rs, slot);
				break;
			}
			rs->rq_slot[(rs->rq_head + rs->rq_count) % rs->nrecv] = slot;
			rs->rq_len[(rs->rq_head + rs->rq_count) % rs->nrecv] =
				wc->byte_len;
			rs->rq_count++;
			break;
		case RS_OP_SHUTDOWN:
			rs->peer_shut = 1;
			repost(rs, slot);
			break;
		case RS_OP_IOMAP:
			got_iomap(rs, rs->rbuf + (size_t)slot * rs->slot,
				  wc->byte_len);
			repost(rs, slot);
			break;
		default:
			repost(rs, slot);
			break;
		}
	}
}

uint64_t rs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void rs_cm_progress_now(struct rsock *rs)
{
	rs->cm_at = rs_now_ns();
	rs_cm_progress(rs);
}

void rs_progress(struct rsock *rs)
{
	struct ibv_wc wc[16];
	int n;

	if (rs_now_ns() - rs->cm_at >= RS_CM_POLL_NS)
		rs_cm_progress_now(rs);
	if (!rs->cq)
		return;
	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0)
		for (int i = 0; i < n; i++)
			completion(rs, &wc[i]);
	if (rs->state == RS_CONNECTED) {
		flush_stage(rs); /* a credit came back: the staged bytes go */
		maybe_credit(rs);
	}
}

int rs_nonblocking(const struct rsock *rs, int flags)
{
	return (flags & MSG_DONTWAIT) || (rs->fd_flags & O_NONBLOCK);
}

int rs_can_send(const struct rsock *rs)
{
	return !rs->shut_wr && can_post_data(rs);
}

int rs_can_write(const struct rsock *rs)
{
	return rs->state == RS_CONNECTED && !rs->shut_wr && rs->msgmax &&
	       (can_post_data(rs) || rs->stage_len < rs->msgmax);
}

int rs_can_recv(const struct rsock *rs)
{
	return rs->rq_count || rs->peer_shut || rs->shut_rd ||
	       rs->state == RS_DISCONNECTED || rs->state == RS_ERROR;
}

void rs_wait(struct rsock *rs, int timeout_ms)
{
	struct pollfd p[2];
	uint64_t t0 = rs_now_ns();
	/* Whatever a completion changed -- data, a free slot, credits, the
	 * peer's shutdown, a map -- is what the caller waits for. */
	uint32_t before = rs->ncomp;
	int n = 0;

	/* Poll first: the peer's engine answers within microseconds. */
	while (rs_now_ns() - t0 < RS_SPIN_NS) {
		pthread_mutex_unlock(&rs->lock);
		pthread_mutex_lock(&rs->lock);
		rs_progress(rs);
		if (rs->ncomp != before || rs->state != RS_CONNECTED)
			return;
	}
	if (rs->cq) {
		ibv_req_notify_cq(rs->cq, 0);
		rs_progress(rs); /* what came before the arming */
		if (rs->ncomp != before || rs->state != RS_CONNECTED)
			return;
		p[n].fd = rs->cc->fd;
		p[n++].events = POLLIN;
	}
	p[n].fd = rs->ch->fd;
	p[n++].events = POLLIN;
	pthread_mutex_unlock(&rs->lock);
	poll(p, (nfds_t)n, timeout_ms);
	pthread_mutex_lock(&rs->lock);
	if (rs->cc) {
		struct ibv_cq *cq;
		void *ctx;

		while (!ibv_get_cq_event(rs->cc, &cq, &ctx))
			ibv_ack_cq_events(cq, 1);
	}
	rs_cm_progress_now(rs);
}

void rs_shutdown_wr(struct rsock *rs)
{
	uint64_t t0 = rs_now_ns();

	if (rs->shut_wr)
		return;
	rs->shut_wr = 1;
	if (rs->state != RS_CONNECTED)
		return;
	/* Staged bytes first: they were written before the shutdown. */
	while (flush_stage(rs)) {
		if (rs->state != RS_CONNECTED ||
		    rs_now_ns() - t0 > 5000000000ULL)
			return;
		rs_wait(rs, 100);
		rs_progress(rs);
	}
	/* The shutdown message may wait for a credit or a slot. */
	while (post_ctl(rs, RS_OP_SHUTDOWN, NULL, 0)) {
		if (rs->state != RS_CONNECTED ||
		    rs_now_ns() - t0 > 5000000000ULL)
			return;
		rs_wait(rs, 100);
		rs_progress(rs);
	}
	/* Everything sent arrives before the QP goes to the error state. */
	while (rs->s_free < rs->nsend && rs->state == RS_CONNECTED &&
	       rs_now_ns() - t0 < 5000000000ULL) {
		rs_progress(rs);
		if (rs->s_free < rs->nsend)
			rs_wait(rs, 100);
	}
}

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;

	for (int i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* Copies len bytes from the iovec at position *pos into dst. */
static void iov_out(const struct iovec *iov, size_t pos, uint8_t *dst,
		    size_t len)
{
	for (int i = 0; len; i++) {
		size_t l = iov[i].iov_len;

		if (pos >= l) {
			pos -= l;
			continue;
		}
		l -= pos;
		if (l > len)
			l = len;
		memcpy(dst, (uint8_t *)iov[i].iov_base + pos, l);
		dst += l;
		len -= l;
		pos = 0;
	}
}

static void iov_in(const struct iovec *iov, size_t pos, const uint8_t *src,
		   size_t len)
{
	for (int i = 0; len; i++) {
		size_t l = iov[i].iov_len;

		if (pos >= l) {
			pos -= l;
			continue;
		}
		l -= pos;
		if (l > len)
			l = len;
		memcpy((uint8_t *)iov[i].iov_base + pos, src, l);
		src += l;
		len -= l;
		pos = 0;
	}
}

ssize_t rs_send(struct rsock *rs, const struct iovec *iov, int iovcnt,
		int flags)
{
	size_t len = iov_total(iov, iovcnt), done = 0;

	while (done < len) {
		uint32_t n;

		rs_progress(rs);
		if (rs->state == RS_ERROR) {
			if (done)
				break;
			return cma_err(rs->err ? rs->err : ECONNRESET);
		}
		if (rs->shut_wr || rs->state != RS_CONNECTED || rs->peer_shut) {
			if (done)
				break;
			return cma_err(rs->state == RS_CONNECTED || rs->shut_wr ?
					       EPIPE : ECONNRESET);
		}
		if (!rs->msgmax)
			return cma_err(EPROTO);
		if (!rs->stage_len && rs_can_send(rs)) {
			/* A credit: straight into a send buffer. */
			n = (uint32_t)(len - done < rs->msgmax ? len - done :
								 rs->msgmax);
			iov_out(iov, done,
				rs->sbuf + (size_t)rs->s_head * rs->slot, n);
			if (post_msg(rs, RS_OP_DATA, n)) {
				if (done)
					break;
				return cma_err(errno ? errno : EIO);
			}
			done += n;
			continue;
		}
		if (rs->stage_len < rs->msgmax) {
			/* No credit now (or bytes already wait for one):
			 * behind them, to leave together when one comes. */
			n = rs->msgmax - rs->stage_len;
			if (n > len - done)
				n = (uint32_t)(len - done);
			iov_out(iov, done, rs->stage + rs->stage_len, n);
			rs->stage_len += n;
			done += n;
			flush_stage(rs);
			continue;
		}
		if (rs_nonblocking(rs, flags)) {
			if (done)
				break;
			return cma_err(EAGAIN);
		}
		rs_wait(rs, -1);
	}
	return (ssize_t)done;
}

ssize_t rs_recv(struct rsock *rs, const struct iovec *iov, int iovcnt,
		int flags)
{
	size_t len = iov_total(iov, iovcnt), done = 0;
	int peek = flags & MSG_PEEK;

	while (done < len) {
		rs_progress(rs);
		if (rs->rq_count && !rs->shut_rd) {
			uint32_t i = rs->rq_head, off = rs->rq_off;
			uint32_t cnt = rs->rq_count;

			/* Copy from as many buffers as there are. */
			while (cnt && done < len) {
				uint32_t slot = rs->rq_slot[i];
				uint32_t avail = rs->rq_len[i] - off;
				size_t n = len - done < avail ? len - done : avail;

				iov_in(iov, done, rs->rbuf + (size_t)slot * rs->slot + off,
				       n);
				done += n;
				off += (uint32_t)n;
				if (off < rs->rq_len[i])
					break;
				if (!peek) {
					repost(rs, slot);
					rs->rq_head = (rs->rq_head + 1) % rs->nrecv;
					rs->rq_count--;
				}
				i = (i + 1) % rs->nrecv;
				off = 0;
				cnt--;
			}
			if (!peek)
				rs->rq_off = off;
			if (rs->state == RS_CONNECTED)
				maybe_credit(rs);
			if (peek || !(flags & MSG_WAITALL))
				break;
			continue;
		}
		if (done && !(flags & MSG_WAITALL))
			break;
		if (rs->shut_rd || rs->peer_shut || rs->state == RS_DISCONNECTED)
			break; /* end of stream */
		if (rs->state == RS_ERROR) {
			if (done)
				break;
			return cma_err(rs->err ? rs->err : ECONNRESET);
		}
		if (rs->state != RS_CONNECTED) {
			if (done)
				break;
			return cma_err(ENOTCONN);
		}
		if (rs_nonblocking(rs, flags)) {
			if (done)
				break;
			return cma_err(EAGAIN);
		}
		rs_wait(rs, -1);
	}
	return (ssize_t)done;
}

/* ---- riomap / riowrite ------------------------------------------------- */

SV_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
		       off_t offset)
{
	struct rsock *rs = rs_get(socket);
	struct rs_iomap *n;
	struct rs_iomap_msg m;
	off_t ret = -1;

	(void)flags;
	if (!rs)
		return cma_err(EBADF);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONNECTED) {
		errno = ENOTCONN;
		goto out;
	}
	if (!buf || !len || !(prot & PROT_WRITE) ||
	    (rs->iomap_size && rs->nlmaps >= rs->iomap_size)) {
		errno = rs->iomap_size && rs->nlmaps >= rs->iomap_size ? ENOMEM :
									  EINVAL;
		goto out;
	}
	n = realloc(rs->lmaps, (rs->nlmaps + 1) * sizeof(*n));
	if (!n) {
		errno = ENOMEM;
		goto out;
	}
	rs->lmaps = n;
	n = &rs->lmaps[rs->nlmaps];
	memset(n, 0, sizeof(*n));
	n->mr = ibv_reg_mr(rs->id->pd, buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!n->mr)
		goto out;
	n->buf = buf;
	n->offset = offset == -1 ? rs->next_map_off : (uint64_t)offset;
	n->addr = (uintptr_t)buf;
	n->length = len;
	n->rkey = n->mr->rkey;
	memset(&m, 0, sizeof(m));
	m.offset = htobe64(n->offset);
	m.addr = htobe64(n->addr);
	m.length = htobe64(n->length);
	m.rkey = htobe32(n->rkey);
	for (;;) {
		rs_progress(rs);
		if (!post_ctl(rs, RS_OP_IOMAP, &m, sizeof(m)))
			break;
		if (rs->state != RS_CONNECTED) {
			ibv_dereg_mr(n->mr);
			errno = ECONNRESET;
			goto out;
		}
		rs_wait(rs, 100);
	}
	rs->nlmaps++;
	if (n->offset + len > rs->next_map_off)
		rs->next_map_off = n->offset + len;
	ret = (off_t)n->offset;
out:
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

SV_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct rsock *rs = rs_get(socket);
	int ret = cma_err(EINVAL);

	if (!rs)
		return cma_err(EBADF);
	pthread_mutex_lock(&rs->lock);
	for (int i = 0; i < rs->nlmaps; i++)
		if (rs->lmaps[i].buf == buf && rs->lmaps[i].length == len) {
			ibv_dereg_mr(rs->lmaps[i].mr);
			rs->lmaps[i] = rs->lmaps[--rs->nlmaps];
			ret = 0;
			break;
		}
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

SV_EXPORT size_t riowrite(int socket, const void *buf, size_t count,
			  off_t offset, int flags)
{
	struct rsock *rs = rs_get(socket);
	size_t done = 0;

	if (!rs) {
		errno = EBADF;
		return (size_t)-1;
	}
	pthread_mutex_lock(&rs->lock);
	while (done < count) {
		const struct rs_iomap *m = NULL;
		uint64_t off = (uint64_t)offset + done;
		struct ibv_sge sge;
		struct ibv_send_wr wr, *bad;
		uint32_t n;

		rs_progress(rs);
		for (int i = 0; i < rs->nrmaps; i++)
			if (off >= rs->rmaps[i].offset &&
			    off < rs->rmaps[i].offset + rs->rmaps[i].length)
				m = &rs->rmaps[i];
		if (rs->state != RS_CONNECTED || rs->shut_wr) {
			errno = rs->state == RS_ERROR ? rs->err : EPIPE;
			break;
		}
		if (!m) {
			errno = EINVAL;
			break;
		}
		if (!rs->s_free) {
			if (rs_nonblocking(rs, flags)) {
				errno = EAGAIN;
				break;
			}
			rs_wait(rs, -1);
			continue;
		}
		n = (uint32_t)(count - done < rs->slot ? count - done : rs->slot);
		if (n > m->offset + m->length - off)
			n = (uint32_t)(m->offset + m->length - off);
		memcpy(rs->sbuf + (size_t)rs->s_head * rs->slot,
		       (const uint8_t *)buf + done, n);
		sge.addr = (uintptr_t)(rs->sbuf + (size_t)rs->s_head * rs->slot);
		sge.length = n;
		sge.lkey = rs->smr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = rs->s_head;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = m->addr + (off - m->offset);
		wr.wr.rdma.rkey = m->rkey;
		if (ibv_post_send(rs->id->qp, &wr, &bad))
			break;
		rs->s_free--;
		rs->s_head = (rs->s_head + 1) % rs->nsend;
		done += n;
	}
	pthread_mutex_unlock(&rs->lock);
	return done ? done : (size_t)-1;
}

/* SPDX-License-Identifier: MIT */
/*
 * rsockets internals (rsocket.c: sockets, connections, options, polling;
 * rsocket_io.c: buffers, credits, the data moving).
 *
 * A stream rsocket is an rdma_cm id on its own event channel (whose fd is
 * the rsocket's number, so it never collides with the application's fds)
 * with one RC QP and one CQ on a completion channel.  The protocol is our
 * own, between two softverbs librdmacm libraries:
 *
 *   - each side posts nrecv receive buffers of `slot` bytes (told to the
 *     peer in the connection's private data: struct rs_conn);
 *   - data goes as SEND with immediate, one message per buffer; the
 *     immediate is | op (4 bits) | credits (28 bits) |: the receive
 *     buffers the sender reposted since it last said so;
 *   - a sender spends one credit per message and keeps RS_RESERVE of them
 *     for control messages (credits alone, shutdown, iomap), so credits
 *     always flow back;
 *   - bytes written while the sender has no credit are staged (up to one
 *     message) and leave as one message when a credit comes back, as a
 *     TCP socket's buffer gathers small writes: a stream of 1 KiB writes
 *     does not spend a 64 KiB buffer of the peer on each;
 *   - riowrite is an RDMA WRITE into a buffer the peer exposed with riomap
 *     (an RS_OP_IOMAP message with its offset, address, length and rkey).
 *
 * It does not speak rdma-core's rsocket protocol (whose peers would be
 * rejected: the private data lacks our magic).  SOCK_DGRAM rsockets are
 * not provided (ENOTSUP).
 */
#ifndef RSOCKET_INT_H
#define RSOCKET_INT_H

#include "cma_int.h"

#include <poll.h>
#include <rdma/rsocket.h>

enum rs_state {
	RS_INIT,
	RS_BOUND,
	RS_LISTENING,
	RS_RESOLVING_ADDR,
	RS_RESOLVING_ROUTE,
	RS_CONNECTING,
	RS_CONNECTED,
	RS_DISCONNECTED, /* the peer or we hung up: reads drain, then EOF */
	RS_ERROR,
};

enum rs_op {
	RS_OP_DATA = 0,
	RS_OP_CREDIT = 1,
	RS_OP_SHUTDOWN = 2, /* the peer will send nothing more */
	RS_OP_IOMAP = 3,    /* payload: struct rs_iomap_msg */
};

#define RS_RESERVE 2
#define RS_SLOT 65536u /* bytes per buffer: a message at most */
#define RS_MAGIC 0x53565253u /* "SVRS" */
/* A new rsocket's send and receive buffer bytes (SO_SNDBUF/SO_RCVBUF 0
 * sets them back to it): 16 buffers of RS_SLOT.  Between two namespaces
 * an iperf3 stream moved 260 MB/s with 8 buffers of 16 KiB, 400 with 64
 * of 16 KiB, 700 with 16 of 64 KiB, no more with 64 of 64 KiB. */
#define DEF_BUF (1024 * 1024)
/* A waiting rsocket (rs_wait, rpoll) polls this long before it sleeps.
 * A reader that sleeps is woken by the progress thread, which read the
 * port for it: between two namespaces an iperf3 stream moved 781 MB/s
 * (median of 6 runs) with 50 us, 967 MB/s with 200 us (alternating). */
#define RS_SPIN_NS 200000

/* The connection's private data (big endian). */
struct rs_conn {
	uint32_t magic;
	uint8_t version;
	uint8_t pad[3];
	uint32_t slot;	  /* bytes per receive buffer */
	uint32_t credits; /* receive buffers posted */
};

struct rs_iomap_msg {
	uint64_t offset;
	uint64_t addr;
	uint64_t length;
	uint32_t rkey;
	uint32_t pad;
};

struct rs_iomap {
	uint64_t offset, addr, length;
	uint32_t rkey;
	struct ibv_mr *mr; /* local maps */
	void *buf;
};

struct rsock {
	int index; /* the rsocket number: the event channel's fd */
	int type;
	enum rs_state state;
	pthread_mutex_t lock;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	int fd_flags; /* O_NONBLOCK as set by rfcntl */
	int err;      /* SO_ERROR */
	/* Options. */
	int sndbuf, rcvbuf;
	int nodelay, keepalive, keepidle, reuseaddr, oobinline;
	int sqsize, rqsize, inline_size, iomap_size;
	struct linger linger;
	/* Data path. */
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	uint32_t slot, msgmax; /* our buffers; the most one message carries */
	uint32_t peer_slot;    /* the peer's receive buffers */
	uint32_t nsend, nrecv;
	uint8_t *sbuf, *rbuf;
	struct ibv_mr *smr, *rmr;
	uint32_t s_head, s_free; /* send slots: next to use, free */
	uint32_t ncomp;		 /* completions handled (rs_wait) */
	uint64_t cm_at;		 /* when the event channel was last read */
	uint8_t *stage;		 /* bytes accepted while no credit: sent as */
	uint32_t stage_len;	 /* one message when one comes (msgmax) */
	int credits;		 /* peer receive buffers we may fill */
	uint32_t pending;	 /* our reposted buffers not yet told */
	uint32_t *rq_slot, *rq_len; /* received, unread: a ring of nrecv */
	uint32_t rq_head, rq_count, rq_off;
	int peer_shut; /* RS_OP_SHUTDOWN seen */
	int shut_rd, shut_wr;
	int disconnect_sent;
	struct rs_iomap *lmaps, *rmaps;
	int nlmaps, nrmaps;
	uint64_t next_map_off;
};

/* rsocket.c */
struct rsock *rs_get(int index);
void rs_set_error(struct rsock *rs, int err);
/* Handles the CM events waiting on rs's channel (must hold rs->lock). */
void rs_cm_progress(struct rsock *rs);
/* The same after a sleep that the channel may have ended (must hold
 * rs->lock): rs_progress reads the channel at most every RS_CM_POLL_NS. */
void rs_cm_progress_now(struct rsock *rs);
/* CLOCK_MONOTONIC in ns (the spins and timeouts of rs_wait and rpoll). */
uint64_t rs_now_ns(void);
/* rsocket.c: the active side's connection steps, as far as events allow
 * (all of them when blocking).  0 connected, -1 with errno (EINPROGRESS:
 * not yet). */
int rs_do_connect(struct rsock *rs, int blocking);

/* rsocket_io.c */
int rs_create_ep(struct rsock *rs);
void rs_free_ep(struct rsock *rs);
/* Reads the CQ (must hold rs->lock): completions processed, credits sent
 * back when due. */
void rs_progress(struct rsock *rs);
/* Sleeps (lock released) until the CQ or the channel has news, at most
 * timeout_ms (-1 forever).  Must hold rs->lock. */
void rs_wait(struct rsock *rs, int timeout_ms);
int rs_nonblocking(const struct rsock *rs, int flags);
int rs_can_send(const struct rsock *rs);
/* rsend would take bytes now (a credit, or room to stage them). */
int rs_can_write(const struct rsock *rs);
int rs_can_recv(const struct rsock *rs);
/* Sends the shutdown message and waits for every send to complete. */
void rs_shutdown_wr(struct rsock *rs);
ssize_t rs_send(struct rsock *rs, const struct iovec *iov, int iovcnt,
		int flags);
ssize_t rs_recv(struct rsock *rs, const struct iovec *iov, int iovcnt,
		int flags);
void rs_peer_params(struct rsock *rs, const void *pdata, uint8_t len);
void rs_fill_conn(struct rsock *rs, struct rs_conn *c);

#endif

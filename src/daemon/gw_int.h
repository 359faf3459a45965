/* SPDX-License-Identifier: MIT */
/*
 * The wire gateway's private header: its state and what its two files
 * share -- gateway.c (the receive thread, the QPN table, the engines'
 * rings, QP1 datagrams) and gw_port.c (taking the RoCE port: binding it or
 * asking the port service, src/common/sv_portd.h).
 */
#ifndef SVD_GW_INT_H
#define SVD_GW_INT_H

#include "svd_gw.h"
#include "sv_hdr.h"
#include "sv_ring.h"
#include "sv_wire.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define GW_RING_DATA (4u << 20)
/* How long the thread waits for room in an engine's full ring before it
 * drops the packet (gateway.c reserve_waiting). */
#define GW_FULL_WAIT_NS (500ull * 1000 * 1000)
/* While the port is not ours, how often the thread tries it again. */
#define SV_WIRE_RETRY_MS 1000
#define GW_RCVBUF (32 << 20)

/* An engine's ring from the gateway. */
struct gw_eng {
	pid_t pid;
	uint32_t engine_id;
	int doorbell;
	void *map;
	size_t map_len;
	struct sv_ring_prod prod;
	int ring; /* a record committed to a sleeping consumer this batch */
	int stuck; /* a wait for room ran out: drop, do not wait, until the
		      ring takes a packet again */
	struct gw_eng *next;
};

struct gw_udq {
	struct svd_gw_ud u;
	/* its BTH and DETH, for the capture */
	uint8_t hdr[SV_BTH_BYTES + SV_DETH_BYTES];
	struct gw_udq *next;
};
#define GW_UDQ_MAX 1024 /* datagrams for QP1 waiting for the CM */

struct gw_qpent {
	uint32_t qpn; /* 0: free */
	pid_t pid;
};

/* The gateway's state (gateway.c owns it; see "Locking" there). */
struct svd_gw_state {
	pthread_mutex_t lock;
	int fd;	    /* the RoCE port, or -1 */
	int v6;	    /* fd is AF_INET6 (dual stack) */
	int err;    /* why fd is -1 (negative errno), 0 when bound */
	int shm_fd; /* the shared page (sv_wire_shm) */
	struct sv_wire_shm *shm;
	uint16_t port;
	int wake;   /* eventfd: stop the thread */
	pthread_t thread;
	int thread_on; /* gw_main runs (from the first gw_start on) */
	struct gw_eng *engs;
	struct gw_qpent *qtab;
	uint32_t qcap, nq;
	/* The port service (sv_portd.h): its connection (-1: none; the
	 * port is then a socket we bound ourselves), the QPN block it gave
	 * us (0: none), and a LISTEN's answer for the main thread. */
	int portd;
	uint32_t block;
	int portd_lost; /* it hung up: reconnect, keeping our socket */
	int lreply_got;
	int32_t lreply_err;
	pthread_cond_t lreply_cond;
	uint64_t retry_ms; /* when the thread tries the port again */
	/* Datagrams for QP1, oldest first (under lock). */
	struct gw_udq *udq, **udq_tail;
	uint32_t nudq;
	uint32_t ud_psn;
	int qp1_kick; /* the rx thread queued some: kick the CM */
};
extern struct svd_gw_state svd_gw;

/* gw_mcast.c: a multicast group of this namespace, while a QP is
 * attached: its GID and its QPs in attach order. */
struct svd_qp;
struct svd_mcg {
	uint8_t gid[16];
	uint32_t n;
	uint32_t qpn[SV_MAX_MCAST_QP_ATTACH];
	struct svd_qp *qp[SV_MAX_MCAST_QP_ATTACH];
	struct svd_mcg *next;
};
/* The group of gid, or NULL.  The main thread, or must hold svd_gw.lock. */
struct svd_mcg *svd_gw_mcast_find(const uint8_t gid[16]);

/* gateway.c: queues a QP1 datagram for the CM.  Must hold svd_gw.lock. */
void svd_gw_qp1_queue(const uint8_t *rec, size_t len);
/* CLOCK_MONOTONIC in ns. */
uint64_t svd_gw_now_ns(void);

/* gw_port.c: takes the port, through the port service when one runs in
 * this namespace, else by binding it; publishes svd_gw.fd under
 * svd_gw.lock.  Any thread. */
void svd_gw_take_port(void);
/* gw_port.c: the gateway thread reads what the port service sent (CM
 * MADs for us, LISTEN answers); its hang-up is noted. */
void svd_gw_portd_readable(void);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The wire gateway (gateway.c): the daemon's UDP port for RoCE v2 packets
 * from other hosts, steered to the engines serving their QPs.  Runs a
 * thread of its own; these calls are the main thread's.
 */
#ifndef SVD_GW_H
#define SVD_GW_H

#include <stdint.h>
#include <sys/types.h>

#include "sv_proto.h"

#define SV_GW_REC_PKT SV_WIRE_REC

/* The namespace's counters (sv_wire.h struct sv_wire_shm). */
struct svd_gw_stats {
	uint64_t rx_pkts, rx_bytes;
	uint64_t rx_bad_icrc;  /* dropped: ICRC wrong */
	uint64_t rx_malformed; /* dropped: not a RoCE v2 packet we take */
	uint64_t rx_no_qp;     /* dropped: no QP, or its process has no ring */
	uint64_t rx_not_peer;  /* dropped: RC/UC, not from the QP's peer */
	uint64_t rx_too_big;   /* dropped: payload above the active MTU */
	uint64_t rx_ring_full; /* dropped: the engine's ring was full */
	uint64_t tx_pkts, tx_bytes, tx_errors;
};

/* Takes the RoCE port (SOFTVERBS_ROCE_PORT, default 4791) -- from the
 * namespace's port service when one runs (sv_portd.h), else by binding
 * it -- and starts the thread, which tries again every second while the
 * port is not ours. */
void svd_gw_init(void);
/* The QPN block the port service gave us (QPNs block << 16 | 16 bits;
 * CM communication IDs block << 24 | 24 bits), or 0 when there is none:
 * then any QPN and ID are ours to use. */
uint32_t svd_gw_block(void);
/* Tells the port service that CM REQs for service ID sid are ours (on)
 * or no longer (off).  0 (no service: nothing to tell), or -EADDRINUSE
 * when another daemon of the namespace has sid.  Main thread; waits a
 * second at most for the answer. */
int svd_gw_listen(uint64_t sid, int on);
void svd_gw_close(void);
/* QP qpn of process pid exists / is gone. */
void svd_gw_qp_add(uint32_t qpn, pid_t pid);
void svd_gw_qp_del(uint32_t qpn);
/* The engine of process pid is gone: its ring too. */
void svd_gw_engine_gone(pid_t pid);
/* The engine of pid (doorbell: its eventfd) joins the wire: fds[0] its
 * gateway ring (a sealed memfd of *ring_size bytes), fds[1] the shared
 * page, fds[2] the port's socket (-1 when unbound).  Returns 0, or the
 * negative errno that keeps the port unbound (the ring is made anyway;
 * fds[0] >= 0), or another negative errno with nothing made. */
int svd_gw_attach(pid_t pid, uint32_t engine_id, int doorbell, int *fds,
		  uint64_t *ring_size);
/*
 * UD datagrams of the daemon's own QP1 (the CM's MADs between hosts).
 * svd_gw_ud_send: sends u (BTH SEND_ONLY from QP src_qpn to dst_qpn,
 * DETH with qkey, data as payload) from u->sgid (one of our GIDs) to
 * u->dgid on the wire; 0 or a negative errno.  svd_gw_ud_pop: takes the
 * oldest datagram received for QP1 (1, or 0 when none); the gateway
 * queues them (from its thread, or from an engine that read the port)
 * and kicks the CM (svd_cm_kick), whose turn pops them.  Main thread.
 */
#define SV_GW_UD_MAX 512
struct svd_gw_ud {
	uint8_t sgid[16], dgid[16];
	uint32_t src_qpn, dst_qpn, qkey;
	uint16_t pkey;
	uint8_t tclass, hop_limit;
	uint32_t flow_label;
	uint32_t len;
	uint8_t data[SV_GW_UD_MAX];
};
int svd_gw_ud_send(const struct svd_gw_ud *u);
int svd_gw_ud_pop(struct svd_gw_ud *u);
/* A ring record (SV_WIRE_REC: GRH + BTH ..) for QP1 that an engine read
 * from the port and handed up its engine socket. */
void svd_gw_qp1_record(const uint8_t *rec, size_t len);

/* gw_mcast.c: ATTACH_MCAST, DETACH_MCAST and MCAST_MEMBERS
 * (sv_proto.h); a QP being destroyed leaves its groups. */
struct svd_req;
struct svd_qp;
int svd_op_attach_mcast(struct svd_req *r);
int svd_op_detach_mcast(struct svd_req *r);
int svd_op_mcast_members(struct svd_req *r);
void svd_mcast_qp_gone(struct svd_qp *qp);

/* Counters, and why the port is not bound (0: it is). */
void svd_gw_status(struct svd_gw_stats *out, int32_t *err, uint16_t *port,
		   uint32_t *block);

#endif

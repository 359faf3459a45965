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

#define SV_BTH_WIRE 12
#define SV_GRH_WIRE 40
#define SV_GW_REC_PKT SV_WIRE_REC

/* The namespace's counters (sv_wire.h struct sv_wire_shm). */
struct svd_gw_stats {
	uint64_t rx_pkts, rx_bytes;
	uint64_t rx_bad_icrc;  /* dropped: ICRC wrong */
	uint64_t rx_malformed; /* dropped: not a RoCE v2 packet we take */
	uint64_t rx_no_qp;     /* dropped: no QP, or its process has no ring */
	uint64_t rx_ring_full; /* dropped: the engine's ring was full */
	uint64_t tx_pkts, tx_bytes, tx_errors;
};

/* Binds the RoCE port (SOFTVERBS_ROCE_PORT, default 4791) and starts the
 * thread; a port in use is logged and retried at the next attach. */
void svd_gw_init(void);
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
/* Counters, and why the port is not bound (0: it is). */
void svd_gw_status(struct svd_gw_stats *out, int32_t *err, uint16_t *port);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Fault plans in the library (eng_fault.c; docs/faults.md): the hooks the
 * verbs and the engine call.  Each costs one relaxed load while no plan of
 * its kind is live.
 */
#ifndef ENG_FAULT_H
#define ENG_FAULT_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "sv_fault.h"

struct sv_qp;
struct sv_engine;
struct sockaddr_in6;

/* Live plans per kind; -1 in sv_fault_nverb until SOFTVERBS_FAULT is read
 * (the first verb hook reads it). */
extern int sv_fault_nverb, sv_fault_npkt, sv_fault_ncomp, sv_fault_pending;

int sv_fault_verb_slow(int verb);
/* At the top of a verb's entry point, before it changes anything: 0, or
 * the errno a plan makes it fail with (errno is set too, and the firing
 * logged). */
static inline int sv_fault_verb(int verb)
{
	return __builtin_expect(__atomic_load_n(&sv_fault_nverb,
						__ATOMIC_RELAXED) != 0, 0) ?
		       sv_fault_verb_slow(verb) :
		       0;
}

/* What a plan does to a packet about to be sent (BTH first, len bytes):
 * SV_FP_*; SV_FP_DELAY with *delay_ns set only when delay_ns is not NULL
 * (the caller can hold a packet back: delay plans pass the others by).
 * Called with the link's tx lock held. */
int sv_fault_packet_slow(const uint8_t *bth, uint32_t len, uint64_t *delay_ns);
static inline int sv_fault_packet(const uint8_t *bth, uint32_t len,
				  uint64_t *delay_ns)
{
	return __atomic_load_n(&sv_fault_npkt, __ATOMIC_RELAXED) ?
		       sv_fault_packet_slow(bth, len, delay_ns) :
		       SV_FP_NONE;
}

struct sv_link;
/* Holds a copy of record rec (len bytes of type, as reserved on link l)
 * for delay_ns; the progress thread puts it on a link to the same engine
 * when due (sv_fault_late_run).  0, or -ENOMEM (then send it now).  Must
 * hold l's tx lock (the queue's lock is a leaf). */
int sv_fault_late_add(struct sv_link *l, const uint8_t *rec, uint32_t len,
		      uint32_t type, uint64_t delay_ns);
/* Holds a copy of a datagram (len bytes at pkt, to dst with the ancillary
 * data ctl) for delay_ns, then sends it on a duplicate of socket fd.  0,
 * or a negative errno (then send it now).  Any lock may be held (the
 * queue's lock is a leaf). */
int sv_fault_late_dgram(struct sv_engine *eng, int fd,
			const struct sockaddr_in6 *dst, const void *ctl,
			uint32_t ctl_len, const uint8_t *pkt, uint32_t len,
			uint64_t delay_ns);
/* The earliest time a held packet of eng is due, 0 when none.  No lock. */
uint64_t sv_fault_late_next(struct sv_engine *eng);
/* Sends eng's held packets that are due at now.  No lock held. */
void sv_fault_late_run(struct sv_engine *eng, uint64_t now);

/* Whether a packet or status plan targets qp (its WQEs then travel as
 * packets, never by direct execution: the plan sees them, and a forced
 * status is decided where the completer decides real ones). */
int sv_fault_packets_slow(const struct sv_qp *qp);
static inline int sv_fault_packets(const struct sv_qp *qp)
{
	return __atomic_load_n(&sv_fault_npkt, __ATOMIC_RELAXED) ||
			       __atomic_load_n(&sv_fault_ncomp,
					       __ATOMIC_RELAXED) ?
		       sv_fault_packets_slow(qp) :
		       0;
}

/* The status a send WQE of qp retires with (st, or a plan's).  Must hold
 * qp->sq_lock.  Counts successes for after=. */
enum ibv_wc_status sv_fault_wc_slow(struct sv_qp *qp, enum ibv_wc_status st);
static inline enum ibv_wc_status sv_fault_wc(struct sv_qp *qp,
					     enum ibv_wc_status st)
{
	return __atomic_load_n(&sv_fault_ncomp, __ATOMIC_RELAXED) ?
		       sv_fault_wc_slow(qp, st) :
		       st;
}

/* Receive completions just polled (n of them at wc): a recv plan's
 * status replaces a success of its QP (which moves to ERR), as the
 * program sees it.  No lock held. */
void sv_fault_polled_slow(struct sv_engine *eng, struct ibv_wc *wc, int n);
static inline void sv_fault_polled(struct sv_engine *eng, struct ibv_wc *wc,
				   int n)
{
	if (n > 0 && __atomic_load_n(&sv_fault_ncomp, __ATOMIC_RELAXED))
		sv_fault_polled_slow(eng, wc, n);
}

/* A QP joined the engine (qp=#K counts them).  No lock held. */
void sv_fault_qp_added(struct sv_qp *qp);
/* A QP changed state (resolves its peer, raises after=0 events at RTS).
 * No lock held. */
void sv_fault_qp_state(struct sv_qp *qp, enum ibv_qp_state now);
/* The progress thread's share: events and log lines queued by the hooks
 * under locks go out here.  No lock held. */
void sv_fault_drain(struct sv_engine *eng);
/* The daemon changed this process's run-time plans: fetch them.  The
 * progress thread, no lock held. */
void sv_fault_sync(struct sv_engine *eng);

#endif

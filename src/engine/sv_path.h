/* SPDX-License-Identifier: MIT */
/*
 * Where a work request goes (sv_path.c): the decisions, apart from the
 * code that carries them out.  Two questions, each answered by one
 * function that returns an enum:
 *
 *   sv_path_on_post   a WQE was just posted (ibv_post_send): run the
 *                     requester now, hold the stream for a batch, flush
 *                     the QP, or nothing (engine.c/eng_qp.c
 *                     sv_engine_posted switches on it);
 *   sv_path_choose    the WQE at sq.next: how it moves -- one small
 *                     packet, a batch of direct WRITEs/READs, direct
 *                     execution, packets -- or why it does not move now
 *                     (sv_req_run switches on it).
 *
 * The state they read and write is struct sv_path_state (tr->path) and
 * the tunables (sv_tune.h).
 */
#ifndef SV_PATH_H
#define SV_PATH_H

#include <infiniband/verbs.h>
#include <stdint.h>

struct sv_qp;
struct sv_tr;
struct sv_link;
struct sv_peer;
struct sv_send_wqe;

/* How an RC/UC QP reaches its peer QP (decided at RTR, or at the first
 * run when the peer was not known then: sv_path_reach).  UD decides per
 * WQE, by the destination. */
enum sv_reach {
	SV_REACH_UNKNOWN = 0, /* not decided yet (a zeroed tr) */
	SV_REACH_DIRECT,      /* our own QP, or a peer CMA reaches */
	SV_REACH_PACKETS,     /* another host, direct execution off */
};

/*
 * A QP's path state (tr->path), for the two decisions above.
 *
 * Must hold qp->sq_lock to read or write any of it -- with one exception:
 * the progress thread looks at `held` and `kick_end` without the lock
 * (sv_eng_run_deferred, relaxed atomic loads; every store is relaxed
 * atomic too).  A stale look there only moves a held batch's run by one
 * pass of that thread; the run itself takes the lock.
 */
struct sv_path_state {
	enum sv_reach reach;
	int held;	   /* posted WQEs wait for their batch (doorbell
			      batching); a run clears it */
	uint64_t kick_end; /* when the last run started by a post ended
			      (ns), or when a post was held */
	uint32_t kick_got; /* eng->got_seq at that run */
};

/* What a post does (sv_path_on_post). */
enum sv_post_action {
	SV_POST_NOTHING, /* the stream is held already (or no transport) */
	SV_POST_FLUSH,	 /* the QP is in ERR: flush it */
	SV_POST_RUN,	 /* run the requester now */
	SV_POST_HOLD,	 /* a stream: wait for a batch; the progress thread
			    runs it at k->due if nothing else does */
};

/* What sv_path_on_post saw, for the run or the hold that follows. */
struct sv_kick {
	uint64_t now;	/* the clock at the post (when read) */
	uint64_t due;	/* SV_POST_HOLD: run the batch by then (ns) */
	uint32_t got;	/* eng->got_seq at the post */
	uint8_t pk;	/* the WQE at sq.next would go as a packet now */
	uint8_t record; /* SV_POST_RUN: the run records its end in tr->path
			   (sv_path_kicked) */
};

/* How the WQE at sq.next moves, or why it does not move now
 * (sv_path_choose). */
enum sv_wqe_path {
	SV_PATH_DONE,	   /* complete already (a rewind kept it): step over */
	SV_PATH_STOP,	   /* the QP is in SQD: start nothing new */
	SV_PATH_WAIT,	   /* behind READs or atomics (a fence, max_rd_atomic
			      outstanding): the completer runs us again */
	SV_PATH_LOCAL,	   /* LOCAL_INV or BIND_MW: the daemon's key table */
	SV_PATH_LOCAL_ERR, /* the same on UD: IBV_WC_LOC_QP_OP_ERR */
	SV_PATH_BUDGET,	   /* this run sent its share: the progress thread
			      goes on */
	/* The ways to move a message, most preferred first; each may
	 * decline when it runs, and the next one is asked. */
	SV_PATH_SMALL_PKT,    /* one small packet to a target that takes it
				 at once (RC) */
	SV_PATH_DIRECT_BATCH, /* the run of WRITEs, READs or SENDs at sq.next
				 in one transfer (sv_direct_batch) */
	SV_PATH_DIRECT,	      /* executed on the target QP (sv_direct_wqe) */
	SV_PATH_PACKET,	      /* packets on the QP's link (send_wqe) */
};

/* The reach of an RC/UC QP whose peer is at link (NULL: unknown) with
 * the mapped view peer (NULL: none).  At RTR (late 0) a peer not known yet
 * leaves it SV_REACH_UNKNOWN; a later try (late 1, direct execution on)
 * settles it. */
enum sv_reach sv_path_reach(const struct sv_qp *qp, const struct sv_link *link,
			    const struct sv_peer *peer, int late);

/* A WQE was posted on qp.  Must hold qp->sq_lock (the caller drops it and
 * then acts on the answer); fills *k. */
enum sv_post_action sv_path_on_post(struct sv_qp *qp, struct sv_kick *k);

/* A run started by that post (k->record) ends: records it.  Must hold
 * qp->sq_lock. */
void sv_path_kicked(struct sv_tr *tr, const struct sv_kick *k);

/* The path of w, the WQE at sq.next, with the QP in state st (RTS or
 * SQD) and budget packets left to this run; from: the most preferred way
 * still open (SV_PATH_SMALL_PKT at first; after a way declined, the next
 * one).  Must hold qp->sq_lock. */
enum sv_wqe_path sv_path_choose(struct sv_qp *qp, struct sv_tr *tr,
				const struct sv_send_wqe *w,
				enum ibv_qp_state st,
				int budget, enum sv_wqe_path from);

/* w would go to the engine at the other end of link as a packet now: a
 * message of at most direct_small bytes to a target that takes it at once
 * (a SEND or WRITE with immediate: it drains its ring now; a one-sided
 * request: its thread spins).  No lock needed. */
int sv_path_takes_packet(struct sv_link *link, const struct sv_send_wqe *w);

/* The WQE at sq.next would go as a packet now (the target drains its
 * ring): holding it back for a direct batch gains nothing.  A hint: no
 * lock needed. */
int sv_path_packets_now(struct sv_qp *qp, struct sv_tr *tr);

/* RC: something executed directly still waits for its retry (a WQE
 * before sq.next not done): nothing newer may overtake it.  Must hold
 * qp->sq_lock. */
int sv_path_retry_pending(struct sv_qp *qp);

/* RC, packet path: the window of unacknowledged packets is full
 * (sv_path_window).  Must hold qp->sq_lock. */
int sv_path_window_full(struct sv_qp *qp, struct sv_tr *tr);

/* The window of unacknowledged packets of tr (sv_tune.window_pkts; on
 * the wire at least wire_window_kb of its MTU) and how often a packet
 * asks for an ACK (ack_every; on the wire at most every wire_ack_kb).
 * sv_req.c "Window". */
uint32_t sv_path_window(const struct sv_tr *tr);
uint32_t sv_path_ack_every(const struct sv_tr *tr);

/* A request of len bytes with WR opcode op was just executed directly on
 * the target at the other end of link: the second small one-sided request
 * of a stream wakes a sleeping target's thread, so that the rest of the
 * stream can travel as packets.  No lock needed. */
void sv_path_after_direct(struct sv_link *link, uint32_t op, uint64_t len);

/* Around a scheduler pass over several QPs' held streams
 * (sv_eng_run_deferred): the doorbells sv_path_after_direct decides on
 * ring at its end, so every QP of the pass takes the same way to a
 * target.  Nest; no lock needed (per thread). */
void sv_path_sched_begin(void);
void sv_path_sched_end(void);

#endif

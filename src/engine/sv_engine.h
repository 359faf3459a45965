/* SPDX-License-Identifier: MIT */
/*
 * The data path: the contract between the verbs objects (src/verbs: cq.c,
 * qp.c, srq.c, ah.c, mw.c) and the engine (src/engine: links, progress,
 * keys, transport).  Both are linked into libibverbs.so.1.
 *
 * Who owns what:
 *   - src/verbs owns the objects and their queues: it creates them (with
 *     the daemon for handles and QPNs), validates and enqueues work
 *     requests, runs the QP state machine, and polls CQs.
 *   - src/engine moves bytes: it takes WQEs off send queues (requester),
 *     executes inbound packets (responder), retires WQEs on ACKs
 *     (completer), and pushes completions with sv_cq_push().
 *
 * Locks (never take them in the other order):
 *   qp->sq_lock  ->  qp->rq_lock (or srq->lock)  ->  cq->lock
 *   link locks are leaves (taken with nothing else needed after them).
 * The engine never calls into the daemon with a QP or CQ lock held.
 *
 * DESIGN.md "Data path: the engine" is the architecture this implements.
 */
#ifndef SV_ENGINE_H
#define SV_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "sv_param.h"
#include "sv_proto.h"

struct sv_engine;
struct sv_link;
struct sv_cq;
struct sv_qp;
struct sv_srq;

/* ---------------------------------------------------------------- CQ -- */

/*
 * A completion queue: memory of the process that created it.  ex.cq_ex's
 * leading fields are struct ibv_cq's, so ibv_cq_ex_to_cq() and the ops
 * work on both.
 */
struct sv_cq {
	struct ibv_cq_ex ex;	 /* must be first */
	pthread_spinlock_t lock; /* ring, notify state, overflow */
	struct ibv_wc *ring;	 /* entries; wc.wr_id etc. as ibv_poll_cq */
	uint32_t cap;		 /* entries the ring holds (>= cqe) */
	uint32_t head, count;	 /* oldest entry, entries present */
	int notify;		 /* 0, or armed: SV_CQ_ARM_ALL / _SOLICITED */
	int overflowed;		 /* IBV_EVENT_CQ_ERR was raised */
	uint64_t wc_flags;	 /* ibv_create_cq_ex's wc_flags */
	struct ibv_wc cur;	 /* entry being read with ibv_next_poll */
	atomic_uint usecnt;	 /* QPs and SRQs using it: destroy -> EBUSY */
	struct sv_engine *eng;
	uint32_t comp_events; /* events delivered to the channel (for ack) */
	/* verbs side (cq.c): */
	uint32_t async_events;	   /* CQ_ERR events the application read */
	uint32_t chan_pending;	   /* channel events not yet read */
	struct sv_cq *chan_next;   /* in the channel's pending list */
};
#define SV_CQ_ARM_ALL 1
#define SV_CQ_ARM_SOLICITED 2

static inline struct sv_cq *to_svcq(struct ibv_cq *cq)
{
	return (struct sv_cq *)cq;
}

/*
 * Adds one completion.  Takes cq->lock.  When the CQ is armed (all, or
 * solicited and `solicited`), disarms it and notifies the completion
 * channel.  A full CQ loses the entry and raises IBV_EVENT_CQ_ERR once
 * (real hardware behaviour); returns -ENOSPC then, else 0.
 */
int sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited);

/* ------------------------------------------------------- work queues -- */

/* A send WQE as the requester sees it: the work request, validated and
 * copied at post time (inline data copied too). */
struct sv_send_wqe {
	uint64_t wr_id;
	uint32_t opcode;     /* enum ibv_wr_opcode */
	uint32_t send_flags; /* enum ibv_send_flags (SIGNALED already
				resolved with sq_sig_all) */
	uint32_t num_sge;
	uint32_t inline_len; /* IBV_SEND_INLINE: bytes in inline_data */
	__be32 imm_data;     /* or invalidate_rkey (host order) for SEND_INV */
	uint32_t invalidate_rkey;
	uint64_t remote_addr; /* RDMA and atomics */
	uint32_t rkey;
	uint32_t pad;
	uint64_t compare_add; /* atomics */
	uint64_t swap;
	/* UD: destination, from the AH at post time. */
	union ibv_gid dgid;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	/* BIND_MW */
	struct ibv_mw *mw;
	uint32_t mw_new_rkey;
	struct ibv_mw_bind_info bind_info;
	/* Requester progress (engine only). */
	uint32_t first_psn, last_psn;
	uint64_t bytes_sent; /* bytes of the message already sent */
	uint32_t state;	     /* engine private */
	uint32_t retries;
	uint32_t ah_pd_id;   /* UD: PD of the AH (checked at execution) */
	uint32_t pad2;
	struct ibv_sge sge[]; /* num_sge entries (max_send_sge of the QP) */
	/* inline_data follows the sge array when inline_len > 0 */
};

struct sv_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad;
	struct ibv_sge sge[]; /* max_recv_sge entries */
};

/*
 * A ring of fixed-size WQEs.  Producer: the posting thread (under the
 * queue's lock).  Consumer: the engine.  head = next to consume,
 * tail = next to fill; both only grow (index & (cap - 1)).
 */
struct sv_wq {
	char *buf;
	uint32_t wqe_size; /* bytes per slot */
	uint32_t cap;	   /* slots, power of two >= max_wr */
	uint32_t max_wr;   /* what the user asked / was granted */
	uint32_t max_sge;
	uint32_t head, tail;
	/* Send queue only: WQEs in [head, next) have been sent and wait for
	 * their ACK (RC) or completion; [next, tail) are not started. */
	uint32_t next;
};

static inline void *sv_wq_slot(struct sv_wq *wq, uint32_t idx)
{
	return wq->buf + (size_t)(idx & (wq->cap - 1)) * wq->wqe_size;
}

static inline uint8_t *sv_send_wqe_inline(struct sv_wq *wq,
					  struct sv_send_wqe *w)
{
	return (uint8_t *)&w->sge[wq->max_sge];
}

/* ---------------------------------------------------------------- SRQ -- */

struct sv_srq {
	/* (was struct verbs_srq: that is rdma-core's private driver.h, not in
	 * the installed verbs.h) */
	struct ibv_srq srq; /* must be first */
	pthread_spinlock_t lock;
	struct sv_wq rq;
	uint32_t srq_limit; /* 0: not armed */
	uint32_t pd_id;
	struct sv_engine *eng;
	atomic_uint usecnt; /* QPs using it */
	/* verbs side (srq.c): async events read by the application, for
	 * ibv_destroy_srq's wait on their acks */
	uint32_t events_delivered;
};

static inline struct sv_srq *to_svsrq(struct ibv_srq *srq)
{
	return (struct sv_srq *)srq;
}

/*
 * Takes the oldest receive WQE of srq into *out (copying at most
 * max_sge entries).  Raises IBV_EVENT_SRQ_LIMIT_REACHED when the count of
 * posted WQEs falls below an armed limit (and disarms it).  Returns 0 or
 * -EAGAIN when empty.  Takes srq->lock.
 */
int sv_srq_take(struct sv_srq *srq, struct sv_recv_wqe *out);

/* ----------------------------------------------------------------- QP -- */

/*
 * A queue pair.  qpx.qp_base is the struct ibv_qp the user sees (its
 * qp_num, state, handle...).  Attributes are what ibv_modify_qp accepted.
 */
struct sv_qp {
	struct ibv_qp_ex qpx; /* must be first */
	struct sv_engine *eng;
	pthread_spinlock_t sq_lock; /* sq, requester state */
	pthread_spinlock_t rq_lock; /* rq, responder state */
	enum ibv_qp_type type;
	enum ibv_qp_state state; /* also mirrored in qpx.qp_base.state */
	struct ibv_qp_attr attr;  /* current attributes (query_qp) */
	struct ibv_qp_cap cap;	  /* granted capabilities */
	int sq_sig_all;
	uint32_t pd_id;		/* daemon's device-wide PD id */
	struct sv_cq *scq, *rcq;
	struct sv_srq *srq; /* NULL: own rq */
	struct sv_wq sq, rq;
	uint64_t send_ops_flags; /* ibv_qp_ex ops the user asked for */
	/* Connection (RC/UC, from RTR): where packets go. */
	uint32_t dest_qpn;
	union ibv_gid dgid;
	struct sv_link *link; /* to the engine owning dest_qpn */
	/* Transport state, owned by the engine (src/engine/transport). */
	void *tr;
	/* ibv_qp_ex building state (wr_start .. wr_complete). */
	int wr_err;
	uint32_t wr_start_tail;
	/* Async events: destroy waits for acks of delivered events. */
	uint32_t events_delivered;
};

static inline struct sv_qp *to_svqp(struct ibv_qp *qp)
{
	return (struct sv_qp *)qp;
}

/* -------------------------------------------------------- engine API -- */

/*
 * The process's engine, started on first use (one per process; a fork()ed
 * child starts its own).  Attaches to the daemon (progress thread, doorbell,
 * key table).  Returns NULL with errno on failure.
 */
struct sv_engine *sv_engine_get(struct ibv_context *ctx);

/*
 * QP lifecycle hooks, called by qp.c with no lock held:
 *  - sv_engine_qp_add after the daemon gave the QP its number (inbound
 *    packets for qp_num reach it from then on);
 *  - sv_engine_qp_modify after a successful ibv_modify_qp, with the old
 *    state (RTR: connect the link; ERR: flush; RESET: forget everything);
 *  - sv_engine_qp_del before the QP is freed (no packet for it after).
 * Return 0 or a negative errno (modify: the QP stays as modified).
 */
int sv_engine_qp_add(struct sv_engine *eng, struct sv_qp *qp);
int sv_engine_qp_modify(struct sv_qp *qp, enum ibv_qp_state old_state,
			int attr_mask);
void sv_engine_qp_del(struct sv_qp *qp);

/*
 * Work was posted: the requester sends what it can now, in the caller's
 * thread (poll first, block later), and leaves the rest to the progress
 * thread.  Called with no lock held.
 */
void sv_engine_kick_sq(struct sv_qp *qp);
/* A receive was posted (RNR-waiting peers may be retried). */
void sv_engine_kick_rq(struct sv_qp *qp);

/*
 * Drives progress inline from ibv_poll_cq when the CQ is empty: processes
 * pending inbound packets if no other thread is doing so.  Cheap when
 * there is nothing to do.
 */
void sv_engine_progress(struct sv_engine *eng);

/*
 * Moves every outstanding WQE of qp to its CQs with IBV_WC_WR_FLUSH_ERR
 * (send queue and receive queue).  Used when the QP enters ERR.  Takes
 * the QP's locks.
 */
void sv_engine_flush(struct sv_qp *qp);

/*
 * The context is being closed (ibv_close_device, called before the daemon
 * tears the ufile down): the engine forgets every QP of ctx still alive
 * (as the kernel destroys them) and detaches when neither QPs nor MR holds
 * (below) are left, so the process holds nothing in the daemon.  No lock
 * held.
 */
void sv_engine_ctx_close(struct ibv_context *ctx);

/*
 * Engine holds for memory of this process that other processes of the
 * ufile may reach (their imported MR's lkey, or our rkey): only our engine
 * can serve those accesses where CMA is refused, and always the atomics.
 * sv_engine_mr_hold: an MR over our memory was registered through ctx
 * (ibv_reg_mr family, ODP too; not DM or dma-buf, which any process maps);
 * attaches the engine if needed, before the caller returns the MR.  0 or a
 * negative errno (no hold taken then).
 * sv_engine_mr_release: that MR was deregistered.  It never detaches by
 * itself (a reg/dereg loop must not attach every time): the engine detaches
 * when a QP goes or a context closes and neither QPs nor holds are left.
 * sv_engine_ctx_close hands ctx's holds to another context of ours on the
 * same ufile, or keeps them until the daemon destroys the ufile
 * (SV_ENGINE_UFILE_GONE: another process may still use the MRs); the
 * engine then detaches if nothing else wants it.  No lock held.
 */
int sv_engine_mr_hold(struct ibv_context *ctx);
void sv_engine_mr_release(struct ibv_context *ctx);

/* Raises an async event on the context that created the object (element:
 * the user's object pointer, as the kernel's user_handle). */
void sv_engine_async_event(struct ibv_context *ctx, enum ibv_event_type type,
			   void *element);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The data path: the contract between the verbs objects (src/verbs: cq.c,
 * qp.c, srq.c, post.c, ah.c, mw.c) and the engine (src/engine).  Both are
 * linked into libibverbs.so.1.
 *
 * Who owns what:
 *   - The engine owns the queues, as a NIC owns the rings it reads and
 *     writes in host memory: completion queues, receive queues and SRQs
 *     are regions of shared memory (sv_shm.h) that the engine of another
 *     process can consume from and produce into; the send queue is
 *     private to the QP's process (only its requester reads it).
 *   - src/verbs validates work requests and writes them into the queues
 *     through the functions below, runs the QP state machine, and reads
 *     completions.  The engine never calls into src/verbs.
 *
 * Locks: their order is src/engine/sv_lock.h; both sides take them with
 * its helpers.
 *
 * The architecture this implements: docs/architecture.md "Data path".
 */
#ifndef SV_ENGINE_H
#define SV_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "sv_param.h"
#include "sv_proto.h"
#include "sv_shm.h"

struct sv_engine;
struct sv_link;
struct sv_cq;
struct sv_qp;
struct sv_srq;

/* What the engine needs to know of the context an object belongs to
 * (filled by src/verbs). */
struct sv_ctx_ref {
	struct ibv_context *ctx;
	uint32_t ufile;	   /* daemon's ufile id */
	uint32_t ctx_id;   /* daemon's id of the view */
	uint64_t instance; /* daemon instance */
};

/* -------------------------------------------------- completion queues -- */

/* A completion channel: an eventfd (one count per event) and the CQs with
 * events not yet read, so destroying a CQ withdraws its events. */
struct sv_channel {
	struct ibv_comp_channel ch; /* must be first */
	pthread_mutex_t lock;	    /* the pending list (SV_LOCK_CHANNEL) */
	struct sv_cq *head, *tail;  /* CQs with chan_pending > 0 */
};

/*
 * A completion queue as its owner sees it.  ex.cq_ex's leading fields are
 * struct ibv_cq's, so ibv_cq_ex_to_cq() and the ops work on both.  The
 * ring is shm (sv_cq_shm): any engine may produce into it.
 */
struct sv_cq {
	struct ibv_cq_ex ex; /* must be first */
	struct sv_cq_shm *shm;
	int fd;			    /* the region (given to the daemon) */
	pthread_spinlock_t poll_lock; /* the consumer side */
	uint64_t wc_flags;	    /* ibv_create_cq_ex's wc_flags */
	struct ibv_wc cur;	    /* entry being read with ibv_next_poll */
	uint64_t cur_stamp;	    /* its stamp (CLOCK_MONOTONIC ns) */
	atomic_uint usecnt;	    /* QPs using it: destroy -> EBUSY */
	atomic_uint senders;	    /* QPs whose send CQ it is (sv_path.c) */
	struct sv_engine *eng;
	struct sv_ctx_ref cref;
	uint32_t obj_id;	    /* the engine's id (events from peers) */
	/* channel bookkeeping (under the channel's lock) */
	uint32_t comp_events;	    /* events delivered to the channel */
	uint32_t chan_pending;	    /* channel events not yet read */
	struct sv_cq *chan_next;    /* in the channel's pending list */
	/* verbs side (cq.c) */
	uint32_t async_events; /* CQ_ERR events the application read */
	struct ibv_pd *parent; /* IBV_CQ_INIT_ATTR_MASK_PD's parent domain */
};

static inline struct sv_cq *to_svcq(struct ibv_cq *cq)
{
	return (struct sv_cq *)cq;
}

/* Bits sv_cq_produce returns: what the producer must have the owner do. */
#define SV_CQP_EVENT 1u	   /* the CQ was armed: a completion event */
#define SV_CQP_OVERFLOW 2u /* first lost completion: IBV_EVENT_CQ_ERR */

/* engine.c: CLOCK_MONOTONIC in ns -- the engine's clock, and the device
 * clock completion stamps and ibv_query_rt_values_ex give (src/verbs). */
uint64_t sv_now_ns(void);

/* sv_queue.c: the CQ region for cqe entries (room for SV_MAX_CQE, sparse),
 * with a completion stamp per entry when stamps; sets cq->shm and cq->fd.
 * 0 or a negative errno. */
int sv_cq_shm_create(struct sv_cq *cq, uint32_t cqe, int stamps);
/* Adds one completion (takes c->lock); returns SV_CQP_* bits.  A full CQ
 * loses the entry (real hardware behaviour). */
unsigned sv_cq_produce(struct sv_cq_shm *c, const struct ibv_wc *wc,
		       int solicited);
/* Owner: pops up to n entries, and their stamps (CLOCK_MONOTONIC ns, 0 on
 * a CQ without) into stamp when not NULL.  Must hold cq->poll_lock. */
int sv_cq_consume(struct sv_cq *cq, int n, struct ibv_wc *wc, uint64_t *stamp);
/* Owner: arms the CQ (ibv_req_notify_cq). */
void sv_cq_arm(struct sv_cq *cq, int solicited_only);
/* Owner: removes the completions of QP qpn (the QP went to RESET).  Takes
 * both CQ locks. */
void sv_cq_clean(struct sv_cq *cq, uint32_t qpn);
/* Owner: cqe entries from now on; -EINVAL when it holds more, -ENOMEM
 * beyond the room its region was made with. */
int sv_cq_resize(struct sv_cq *cq, uint32_t cqe);
/* Owner side of the engine: publishes / withdraws cq (its obj_id). */
int sv_engine_cq_add(struct sv_engine *eng, struct sv_cq *cq);
void sv_engine_cq_del(struct sv_cq *cq);
/* Pushes a completion of one of our QPs into our CQ cq and raises what
 * it must (completion event, CQ_ERR). */
void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited);
/* Owner: a completion event for cq on its channel (from a producer's
 * SV_CQP_EVENT).  Takes the channel's lock. */
void sv_cq_comp_event(struct sv_cq *cq);

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
	uint32_t xrc_srqn;    /* XRC INI: the SRQ the target's XRCETH names */
	uint64_t compare_add; /* atomics; ATOMIC WRITE: its 8 bytes (in
				 memory order) when num_sge is 0, else the
				 requester gathers them from the SGEs into
				 here when the WQE starts (sv_req_start) */
	uint64_t swap;
	/* UD: destination, from the AH at post time (the GRH, or on the
	 * wire the IP header: source GID, class, label, hop limit). */
	union ibv_gid dgid;
	union ibv_gid sgid;
	uint32_t flow_label;
	uint8_t tclass, hop_limit;
	uint16_t pad3;
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

/*
 * The send queue: a ring of fixed-size WQEs in the QP's process.
 * Producer: the posting thread (under sq_lock).  Consumer: the requester.
 * head = oldest not retired, tail = next to fill; both only grow.
 */
struct sv_wq {
	char *buf;
	uint32_t wqe_size; /* bytes per slot */
	uint32_t cap;	   /* slots, power of two >= max_wr */
	uint32_t max_wr;   /* what the user asked / was granted */
	uint32_t max_sge;
	uint32_t head, tail;
	/* WQEs in [head, next) have been started and wait for their ACK (RC)
	 * or completion; [next, tail) are not started. */
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

/* Bytes of a receive WQE slot with max_sge SGEs. */
size_t sv_recv_wqe_size(uint32_t max_sge);
/* Owner: posts one receive into queue q of region (a QP's or an SRQ's).
 * Must hold the owner's post lock.  0, EINVAL (too many SGEs) or ENOMEM
 * (full). */
int sv_rq_post(void *region, struct sv_rq_shm *q, const struct ibv_recv_wr *wr);
/* WQEs posted and not taken. */
uint32_t sv_rq_count(struct sv_rq_shm *q);

/* ---------------------------------------------------------------- SRQ -- */

struct sv_srq {
	/* (was struct verbs_srq: that is rdma-core's private driver.h, not in
	 * the installed verbs.h) */
	struct ibv_srq srq; /* must be first */
	pthread_spinlock_t post_lock; /* the owner's post side */
	struct sv_srq_shm *shm;
	uint32_t pd_id;
	uint32_t obj_id;
	struct sv_engine *eng;
	struct sv_ctx_ref cref;
	atomic_uint usecnt; /* QPs using it */
	/* verbs side (srq.c): async events read by the application, for
	 * ibv_destroy_srq's wait on their acks */
	uint32_t events_delivered;
	struct ibv_pd *parent; /* the parent domain it was made on, or NULL
				  (srq.pd may be an unimported view by then) */
	size_t slot_bytes;     /* the region's room for WQEs (resize) */
	/* An XRC SRQ (src/verbs/xrc.c): its device-wide number (0: a basic
	 * SRQ), the CQ its receives complete into, its XRCD. */
	uint32_t srqn;
	struct ibv_cq *xrc_cq;
	struct ibv_xrcd *xrcd;
};

static inline struct sv_srq *to_svsrq(struct ibv_srq *srq)
{
	return (struct sv_srq *)srq;
}

/* sv_queue.c: the SRQ region (room for SV_MAX_SRQ_WR, sparse).  Uses
 * srq->pd_id; sets srq->shm and *fdp.  0 or a negative errno. */
int sv_srq_shm_create(struct sv_srq *srq, uint32_t max_wr, uint32_t max_sge,
		      int *fdp);
/* Owner: max_wr WQEs from now on; -EINVAL below what it holds.  A
 * max_sge above the SRQ's (up to SV_MAX_SRQ_SGE, where the region has
 * room) grows its WQEs; any other max_sge is ignored. */
int sv_srq_resize(struct sv_srq *srq, uint32_t max_wr, uint32_t max_sge);
int sv_engine_srq_add(struct sv_engine *eng, struct sv_srq *srq);
void sv_engine_srq_del(struct sv_srq *srq);

/* ----------------------------------------------------------------- QP -- */

/*
 * A queue pair.  qpx.qp_base is the struct ibv_qp the user sees (its
 * qp_num, handle...).  attr holds what ibv_modify_qp accepted; the state
 * in force is shm->state (a responder run by another process may move
 * the QP to ERR): read it with sv_qp_state().
 */
struct sv_qp {
	struct ibv_qp_ex qpx; /* must be first */
	struct sv_engine *eng;
	struct sv_ctx_ref cref;
	pthread_spinlock_t sq_lock; /* sq, requester and completer state */
	pthread_spinlock_t rq_post_lock; /* the owner's post side of shm->rq */
	struct sv_qp_shm *shm;	    /* responder block and receive queue */
	enum ibv_qp_type type;
	struct ibv_qp_attr attr;  /* current attributes (query_qp) */
	struct ibv_qp_cap cap;	  /* granted capabilities */
	int sq_sig_all;
	uint32_t pd_id;		/* daemon's device-wide PD id */
	struct sv_cq *scq, *rcq;
	struct sv_srq *srq; /* NULL: own rq */
	struct sv_wq sq;
	uint64_t send_ops_flags; /* ibv_qp_ex ops the user asked for */
	/* Connection (RC/UC, from RTR): where packets go. */
	uint32_t dest_qpn;
	union ibv_gid dgid;
	struct sv_link *link; /* to the engine owning dest_qpn */
	/* Transport state, owned by the engine. */
	void *tr;
	/* ibv_qp_ex building state (wr_start .. wr_complete). */
	int wr_err;
	uint32_t wr_start_tail;
	/* Async events: destroy waits for acks of delivered events. */
	uint32_t events_delivered;
	/* Another QP of ours executing on this one right now (direct). */
	atomic_int busy;
	/* The parent domain it was made on, or NULL (qp.pd may be an
	 * unimported view by the time the QP goes). */
	struct ibv_pd *parent;
	/* A handle from ibv_open_qp (xrc.c): on its engine's list of them
	 * (xnext, under the engine's lock); tr set while it serves the QP
	 * (eng_xrc.c). */
	int xopen;
	struct sv_qp *xnext;
};

static inline struct sv_qp *to_svqp(struct ibv_qp *qp)
{
	return (struct sv_qp *)qp;
}

/* The state in force (shm->state; written under shm->lock). */
static inline enum ibv_qp_state sv_qp_state(const struct sv_qp *qp)
{
	return (enum ibv_qp_state)__atomic_load_n(&qp->shm->state,
						  __ATOMIC_ACQUIRE);
}

/* An XRC TGT QP's address vector into its region, for whichever process
 * serves it (struct sv_qp_av_shm).  Must hold q->lock. */
static inline void sv_qp_av_store(struct sv_qp_shm *q,
				  const struct ibv_ah_attr *ah)
{
	memcpy(q->av.dgid, ah->grh.dgid.raw, 16);
	q->av.flow_label = ah->grh.flow_label;
	q->av.sgid_index = ah->grh.sgid_index;
	q->av.hop_limit = ah->grh.hop_limit;
	q->av.traffic_class = ah->grh.traffic_class;
	q->av.is_global = ah->is_global;
	q->av.set = 1;
}

/* sv_queue.c: the QP's region (responder block; its own receive queue
 * unless has_srq); sets qp->shm and *fdp.  0 or a negative errno. */
int sv_qp_shm_create(struct sv_qp *qp, uint32_t max_recv_wr,
		     uint32_t max_recv_sge, int has_srq, int *fdp);
/* Unmaps a region made by sv_*_shm_create, marking it dead for peers. */
void sv_shm_release(void *region);
/* sv_queue.c: an XRC TGT QP's region that fd names (ibv_open_qp), or
 * NULL when it is not a QP region; sv_qp_shm_close unmaps it without
 * marking it dead (the daemon does that when the QP goes). */
struct sv_qp_shm *sv_qp_shm_open(int fd);
void sv_qp_shm_close(struct sv_qp_shm *q);

/* -------------------------------------------------------- engine API -- */

/*
 * The process's engine, started on first use (one per process; a fork()ed
 * child starts its own).  Attaches to the daemon (progress thread, doorbell,
 * key table) when the first QP or MR needs it.  Returns NULL with errno on
 * failure.
 */
struct sv_engine *sv_engine_get(const struct sv_ctx_ref *cref);

/*
 * QP lifecycle hooks, called by qp.c:
 *  - sv_engine_qp_add after the daemon gave the QP its number (inbound
 *    packets for qp_num reach it from then on);  no lock held;
 *  - ibv_modify_qp, in three steps: sv_engine_qp_route (RC/UC to RTR, no
 *    lock held: may call the daemon) finds where the peer na->dest_qp_num
 *    is: this host, or another one (na's AV names a GID not ours);
 *    sv_engine_qp_commit, with qp->sq_lock and qp->rq_post_lock held,
 *    puts what the state machine accepted in force (na becomes qp->attr,
 *    na->qp_state the state; RESET empties the queues) -- or answers
 *    -EINVAL, changing nothing, when the state is no longer cur (a peer's
 *    responder moved the QP to ERR since it was checked);
 *    sv_engine_qp_modified, no lock held, does what follows (RESET cleans
 *    the CQs of the QP's completions, ERR flushes, RTS starts sending);
 *  - sv_engine_qp_del before the QP is freed (no packet for it after);
 *  - sv_engine_take_arrived before a QP or context goes (ibv_destroy_qp,
 *    ibv_close_device) and before a QP leaves its working states for ERR
 *    or RESET (ibv_modify_qp): what reached us before is taken.
 */
struct sv_peer;
int sv_engine_qp_add(struct sv_engine *eng, struct sv_qp *qp);
void sv_engine_qp_route(struct sv_qp *qp, const struct ibv_qp_attr *na,
			struct sv_link **link, struct sv_peer **peer);
int sv_engine_qp_commit(struct sv_qp *qp, enum ibv_qp_state cur,
			const struct ibv_qp_attr *na, int attr_mask,
			struct sv_link *link, struct sv_peer *peer);
void sv_engine_qp_modified(struct sv_qp *qp, enum ibv_qp_state old,
			   enum ibv_qp_state now);
void sv_engine_qp_del(struct sv_qp *qp);
/*
 * XRC TGT QPs that change hands (eng_xrc.c), called by xrc.c and qp.c:
 *  - sv_engine_tgt_open: t, a handle from ibv_open_qp (eng set, mapping
 *    the QP's region), may be asked to serve the QP; keeps the engine
 *    attached.  0 or a negative errno;
 *  - sv_engine_tgt_close before such a handle is freed (after the
 *    daemon destroyed it);
 *  - sv_engine_tgt_gone after the TGT QP that served here left the
 *    engine (the creator's, sv_engine_qp_del, or one whose context
 *    closed): another of our opened handles of it serves on;
 *  - sv_engine_tgt_ctx_close: the handles of ctx are forgotten.
 */
int sv_engine_tgt_open(struct sv_engine *eng, struct sv_qp *t);
void sv_engine_tgt_close(struct sv_qp *t);
void sv_engine_tgt_gone(struct sv_qp *qp);
void sv_engine_tgt_ctx_close(struct sv_engine *eng, struct ibv_context *ctx);
/* Processes what has arrived, as a NIC has taken (and acknowledged) what
 * reached it before its QP is destroyed: a peer's last SENDs into our
 * posted receives are ACKed, not lost with the QP, when the application
 * tears down right after its last completion (ibv_srq_pingpong does:
 * its peer's last SENDs are extra ones nobody polls for). */
void sv_engine_take_arrived(struct sv_engine *eng);

/*
 * Work was posted: the requester runs what it can now, in the caller's
 * thread (poll first, block later), and leaves the rest to the progress
 * thread; a QP in ERR is flushed at once, as hardware does.  Called
 * with qp->sq_lock held (the post's own), which it releases: whether a
 * stream waits for a batch is decided under the post's lock, not under a
 * second one.
 */
void sv_engine_posted(struct sv_qp *qp);

/*
 * Drives progress inline from ibv_poll_cq when the CQ is empty: processes
 * pending inbound packets and deferred work if no other thread is doing
 * so.  Cheap when there is nothing to do.
 */
void sv_engine_progress(struct sv_engine *eng);
/* The application polls one of our CQs (before it looks): a counter the
 * progress thread watches, and the streams its posts left held for a
 * batch run now, QPs in turns (sv_eng_run_deferred), so that what they
 * complete at once is in this poll.  Cheap when nothing is held. */
void sv_engine_note_poll(struct sv_engine *eng);
/* ... and it returned completions (a ping-pong: the next post goes at
 * once). */
void sv_engine_note_got(struct sv_engine *eng);
/* The application asked for a completion event (ibv_req_notify_cq): it
 * waits on a channel between polls, so the progress thread must take
 * what arrives at once. */
void sv_engine_note_notify(struct sv_engine *eng);

/*
 * The QP is in ERR: every outstanding WQE goes to its CQ with
 * IBV_WC_WR_FLUSH_ERR (send queue and receive queue).  Takes the QP's
 * locks.
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
 * engine then detaches if nothing else wants it.  It also waits for the
 * copies our engine's threads started under the MR's keys before the key
 * table dropped them (the caller may free the memory next, as after a NIC
 * finished its DMA).  No lock held.
 */
int sv_engine_mr_hold(const struct sv_ctx_ref *cref);
void sv_engine_mr_release(const struct sv_ctx_ref *cref);

/*
 * ibv_advise_mr's check of one SGE: lkey names an MR of PD pd_id, with the
 * access asked (IBV_ACCESS_LOCAL_WRITE for a write prefetch), that covers
 * [va, va + len).  0, with *local where that range is in our own memory
 * (NULL: another process's); -EFAULT (the man page's code) when it is
 * not; another negative errno when the engine cannot attach.  No lock
 * held.
 */
int sv_engine_key_check(const struct sv_ctx_ref *cref, uint32_t lkey,
			uint32_t pd_id, uint64_t va, uint64_t len,
			uint32_t access, void **local);

/* eng_keyview.c, for the misuse checker (src/verbs/check.c): key's entry
 * of the device's key table (an MR or MW of any process) into *out; 0
 * when the key is live, -1 otherwise or before the engine attached. */
struct sv_key_entry;
int sv_engine_key_entry(struct sv_engine *eng, uint32_t key,
			struct sv_key_entry *out);

/* A QP of any process of the device as its responder block shows it
 * (eng_keyview.c), for the misuse checker's MISMATCHED_PEER and
 * RECV_NOT_POSTED across processes. */
struct sv_qp_view {
	uint32_t qpn, type, state; /* enum ibv_qp_type, ibv_qp_state */
	uint32_t dest_qpn;
	uint32_t mtu; /* path MTU in bytes */
	uint32_t rq_psn, sq_psn;
	uint8_t max_rd_atomic, max_dest_rd_atomic;
	int srq;	/* its receives come from an SRQ */
	uint32_t recvs; /* receives posted now (its own queue, or the SRQ's) */
	uint32_t access; /* qp_access_flags */
	uint32_t pd_id;
	uint32_t pid;	/* its owner */
};
/* qpn's view into *out (one SV_OP_QP_PEER, a map and an unmap: for the
 * checker only).  0, or -1 when the device has no such QP.  No lock
 * held. */
int sv_engine_qp_view(struct sv_engine *eng, uint32_t qpn,
		      struct sv_qp_view *out);

/*
 * A request the responder refused, as sv_resp.c describes it to the
 * misuse checker: kind SV_RDIAG_* (the state that decided it), the QP it
 * was for (q: its responder block), the request.  The checker installs
 * sv_engine_resp_diag once, at load, when SOFTVERBS_CHECK asks for it;
 * the responder calls it, when set, with the QP's responder lock held
 * (so it must take no lock of the engine), in whichever process runs the
 * responder (the target's on packets, the initiator's under direct
 * execution).
 */
enum sv_rdiag_kind {
	SV_RDIAG_ACCESS, /* a remote access error: the QP's flags or the key */
	SV_RDIAG_RNR,	 /* no receive for a request that needs one */
};
struct sv_rdiag {
	enum sv_rdiag_kind kind;
	uint32_t qpn, src_qpn; /* the responder QP, its peer (the requester) */
	uint32_t owner;	       /* the responder QP's process */
	uint32_t qp_type;
	uint32_t access;       /* needed: IBV_ACCESS_REMOTE_* */
	uint32_t qp_access;    /* the QP's qp_access_flags */
	uint32_t pd_id;	       /* the QP's PD */
	uint32_t psn;
	uint32_t rkey;
	uint64_t va, len;
	const char *op;	       /* the request's opcode name */
	int srq;	       /* RNR: its receives come from an SRQ */
	uint32_t recvs;	       /* RNR: receives posted now */
	int direct;	       /* run by the initiator (direct execution) */
};
extern void (*sv_engine_resp_diag)(struct sv_engine *eng,
				   const struct sv_rdiag *d);

/* Raises an async event on the context that created the object (element:
 * the user's object pointer, as the kernel's user_handle). */
void sv_engine_async_event(const struct sv_ctx_ref *cref,
			   enum ibv_event_type type, void *element);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The transport of an RC/UC/UD QP: its state (struct sv_tr) and the
 * requester (sv_req.c), direct execution (sv_direct.c), the completer
 * (sv_comp.c) and the responder (sv_resp*.c) as the rest of the engine
 * calls them.  Part of engine_int.h, which includes it where these
 * declarations belong; include engine_int.h, not this file.
 */
#ifndef SV_ENG_TR_H
#define SV_ENG_TR_H

/* ---------------------------------------------------------- transport -- */

/* A queued READ or atomic response (responder, packet path). */
struct sv_respq_ent {
	uint8_t kind; /* 1 read, 2 atomic, 3 atomic write (a read of 0) */
	uint8_t syn;
	uint32_t psn;	/* next PSN to send */
	uint32_t left;	/* read: bytes still to send */
	uint32_t total; /* read: bytes asked */
	uint64_t va;
	uint32_t rkey;
	uint32_t pd_id; /* read: the PD its rkey is checked against */
	uint64_t orig; /* atomic */
};

/* Per-QP transport state (qp->tr), private to the QP's process. */
struct sv_tr {
	/* requester + completer: under sq_lock */
	uint32_t psn;	   /* next PSN to send */
	uint32_t psn_hi;   /* the highest next-PSN since sq_psn: a rewind
			      lowers psn, not what the peer may ACK */
	uint32_t mtu;	   /* bytes */
	int req_busy;	   /* a thread runs the requester (ordering) */
	int req_again;
	int blocked;	   /* ring full / window shut: retry later */
	int stopped;	   /* a WQE failed: start nothing after it */
	uint64_t timer_at; /* retransmission deadline (ns), 0 = off */
	uint64_t rnr_at;   /* RNR wait until (ns), 0 = none */
	uint64_t probe_ns; /* wire, after a NAK's rewind: the interval after
			      which the resend goes again, 0 = off
			      (sv_comp.c probe_start) */
	uint64_t probe_end; /* ... while it ends before this: the QP's own
			       timer (ns) */
	uint32_t retry_left, rnr_left;
	uint32_t last_ack_psn;
	uint32_t since_ackreq; /* packets sent since the last AckReq */
	int win_shut;	   /* the wire window filled: it reopens by a train
			      (sv_path_window_full) */
	uint64_t ring_mark; /* producer position when the timer was armed */
	struct sv_path_state path; /* how WQEs go (sv_path.h: its lock rule) */
	struct sv_peer *peer; /* RC/UC direct: the peer QP */
	struct sv_key_cache lkey; /* send_small's local key */
	/* responder, packet path: under shm->lock */
	struct sv_key_cache rkey; /* the last remote key it checked */
	struct sv_key_cache rxkey; /* ... and receive key it wrote under */
	int ack_pending;  /* coalesced ACK to send */
	uint32_t ack_psn;
	uint8_t ack_syn;
	uint32_t last_nak_psn; /* a duplicate burst gets one ACK */
	int dup_acked;
	struct sv_respq_ent respq[SV_ENG_RESPQ];
	uint32_t rq_head, rq_tail; /* respq indices */
	struct {
		uint32_t psn;
		int valid;
		uint64_t orig;
	} atomic_cache[SV_ENG_ATOMIC_CACHE];
	struct sv_link *link; /* == qp->link */
	struct sv_link *wlink; /* RC/UC on the wire: == link; UD: for AHs
				  to other hosts (eng_wire.c) */
	/* RC/UC on the wire: the addresses the peer's packets carry (source
	 * = the flow's dgid, destination = its sgid), copied from wlink when
	 * it is set (sv_tr_set_wlink) so that the receive path compares
	 * bytes and never follows a link a modify may free. */
	uint8_t peer_src[16], peer_dst[16];
};

static inline struct sv_tr *tr_of(struct sv_qp *qp)
{
	return (struct sv_tr *)qp->tr;
}

/* Send WQE states (sv_send_wqe.state). */
enum {
	WQE_NEW = 0,  /* not started */
	WQE_SENDING,  /* some packets sent */
	WQE_SENT,     /* all sent, waiting for ACK / response */
	WQE_DONE,     /* complete (status in state >> 8) */
};
#define WQE_STATE(w) ((w)->state & 0xff)
#define WQE_STATUS(w) ((enum ibv_wc_status)((w)->state >> 8))
static inline void sv_wqe_done(struct sv_send_wqe *w, enum ibv_wc_status st)
{
	w->state = WQE_DONE | (uint32_t)st << 8;
}

/* sv_req.c */
/* Runs the requester of qp: sends what it can.  No lock held. */
void sv_req_run(struct sv_qp *qp);
/* The same, for a post sv_path_on_post answered SV_POST_RUN (k: what it
 * saw; the run records its end in tr->path under sq_lock).  No lock held. */
void sv_req_kick(struct sv_qp *qp, const struct sv_kick *k);
/* One turn of qp's requester among several QPs' (sv_eng_run_deferred):
 * at most budget packets.  1 when it stopped there with work left (the
 * caller gives it another turn, or asks the progress thread), else 0.
 * No lock held. */
int sv_req_turn(struct sv_qp *qp, int budget);
/* The GRH of a UD packet of ib_len bytes (BTH .. payload) for w: the
 * IPv6 header it has on the wire (payload length: UDP header, packet,
 * pad, ICRC), GIDs, class, label and hop limit from w's AH.  IPv4-mapped
 * GIDs stand for an IPv4 header (the receiver's GRH holds one). */
void sv_ud_grh(const struct sv_send_wqe *w, uint32_t ib_len, uint8_t *h);
#define SV_DEFAULT_HOP_LIMIT 64 /* an AH with hop limit 0 */

/* The checks a WQE gets when it starts (opcode for the QP type, length,
 * local keys); *lenp = its length.  Nonzero when they finished it with an
 * error status.  keys_later: the caller resolves every local SGE of a
 * SEND or WRITE before any of it leaves (a message of one packet, or
 * executed directly), and an error there ends the WQE the same way
 * (IBV_WC_LOC_PROT_ERR): the keys are not looked up twice.  Must hold
 * sq_lock. */
int sv_req_start(struct sv_qp *qp, struct sv_tr *tr, struct sv_send_wqe *w,
		 uint64_t *lenp, int keys_later);

/* sv_direct.c: what became of a WQE given to direct execution. */
enum sv_direct_out {
	SV_DIRECT_DONE,	   /* dealt with: the caller moves past w (sq.next is
			      past it already where w completed before the
			      target's receive CQE) */
	SV_DIRECT_PLACED,  /* dealt with (a NAK): the completer placed sq.next */
	SV_DIRECT_LATER,   /* not now: messages before it wait for their ACK
			      or retry, and it must not overtake them; the
			      completer runs the requester again */
	SV_DIRECT_PACKETS, /* the target cannot take it directly now: packets */
};
/* Executes w on the peer QP directly (RC/UC through tr->peer, UD through
 * the destination's view), as sv_path_choose decided (SV_PATH_DIRECT).
 * Must hold sq_lock. */
enum sv_direct_out sv_direct_wqe(struct sv_qp *qp, struct sv_tr *tr,
				 struct sv_send_wqe *w);
/* Executes the run of RDMA WRITEs, READs or SENDs at sq.next as one
 * batch, as sv_path_choose decided (SV_PATH_DIRECT_BATCH); returns how
 * many it completed and moved sq.next past (0: declined, go one by one).
 * Must hold sq_lock. */
int sv_direct_batch(struct sv_qp *qp, struct sv_tr *tr);
/* eng_link.c: packets committed between these two calls (this thread)
 * are published together at the end (nested: the outermost end). */
void sv_link_batch_begin(void);
void sv_link_batch_end(void);

/* sv_comp.c: a response packet (ACK, NAK, read response, atomic ACK)
 * for qp.  Takes sq_lock.  Returns nonzero when qp must be flushed. */
int sv_comp_packet(struct sv_qp *qp, const struct sv_pkt *pkt);
/* Retires done WQEs from the head of the SQ.  Must hold sq_lock. */
void sv_comp_retire(struct sv_qp *qp);
/* Completes the oldest unfinished WQE with status and moves the QP to
 * ERR.  Must hold sq_lock. */
void sv_comp_fail(struct sv_qp *qp, enum ibv_wc_status status);
/* A NAK or RNR NAK for the WQE at idx (shared by packets and direct
 * execution).  Must hold sq_lock. */
void sv_comp_nak(struct sv_qp *qp, struct sv_tr *tr, uint32_t idx,
		 uint8_t syn, uint32_t psn);
/* The WQE at idx succeeded (direct execution): acknowledged up to its
 * last PSN.  Must hold sq_lock. */
void sv_comp_acked(struct sv_qp *qp, struct sv_tr *tr, uint32_t idx);
/* The 8 bytes an atomic returned, into w's first SGE: IBV_WC_SUCCESS or
 * the local error.  Must hold sq_lock. */
enum ibv_wc_status sv_comp_atomic_result(struct sv_qp *qp,
					 struct sv_send_wqe *w, uint64_t v);
/* Arms the retransmission timer if it is off.  Must hold sq_lock;
 * returns the new deadline or 0. */
uint64_t sv_comp_arm_timer(struct sv_qp *qp, struct sv_tr *tr);
/* Timers of qp (retransmission, RNR).  Returns nonzero when the QP must
 * be flushed; *next set to the next deadline (ns) if earlier. */
int sv_comp_timers(struct sv_qp *qp, uint64_t now, uint64_t *next);

/* sv_resp.c */
/* A run of request packets of one QP taken from a ring in one go: the
 * responder's lock of qp stays held between them (one robust-mutex pair
 * for the run, not one per packet), and what the owner must hear waits
 * for the end of the run. */
struct sv_resp_hold {
	struct sv_qp *qp; /* whose shm->lock is held; NULL: none */
	struct sv_rtgt t;
	unsigned cq_bits;
	int srq_limit;
};
/* A request packet for our QP qp (packet path).  Takes shm->lock, and
 * keeps it in h (dropping another QP's first); sv_resp_release ends the
 * run, before anything else that takes a QP's lock. */
void sv_resp_packet(struct sv_qp *qp, const struct sv_pkt *pkt,
		    struct sv_resp_hold *h);
/* Ends h's run: drops the lock, then tells the owner what it must hear. */
void sv_resp_release(struct sv_resp_hold *h);
/* Sends queued responses and coalesced ACKs (packet path).  Takes
 * shm->lock. */
void sv_resp_flush(struct sv_qp *qp);
/* What a directly executed request came to. */
enum sv_rout {
	SV_ROUT_ACK,  /* executed (orig: an atomic's original value) */
	SV_ROUT_NAK,  /* syn: the NAK syndrome; the target is in ERR */
	SV_ROUT_RNR,  /* no receive posted: syn holds the RNR timer */
	SV_ROUT_DROP, /* not taken (state, Q_Key...): as a lost packet */
	SV_ROUT_LOCAL, /* the initiator's own memory faulted */
};
struct sv_resp_res {
	enum sv_rout kind;
	uint8_t syn;
	uint64_t orig;
	/* Set by the caller (or NULL): run once the message is accepted,
	 * just before the target's receive CQE is pushed -- the initiator
	 * completes first, as its ACK would come before the target's
	 * application can answer. */
	void (*before_cqe)(void *arg);
	void *arg;
	/* Set by the caller: the PSNs the initiator gave the message (cut
	 * by its MTU, as its packets would be), which the target's expected
	 * PSN moves by; 0: by the target's MTU. */
	uint32_t npsn;
};
/* Runs t's responder for one whole message pkt (an *_ONLY opcode) whose
 * payload is data (SEND/WRITE: the source; READ: the destination), on
 * behalf of initiator QP src_qpn (UD: its number and GID in pkt).  Takes
 * t->q->lock. */
void sv_resp_direct(struct sv_engine *eng, struct sv_rtgt *t,
		    const struct sv_pkt *pkt, const struct sv_data *data,
		    struct sv_resp_res *res);
/* One RDMA WRITE, READ or SEND of a batch: its remote range (WRITE,
 * READ) and the local ranges it moves from (WRITE, SEND) or into (READ). */
struct sv_drw {
	uint64_t va;	 /* WRITE, READ: the target's range */
	uint32_t rkey;
	uint32_t nseg;
	uint64_t len;
	const struct sv_seg *local;
	uint32_t imm;	 /* SEND: the immediate data (with_imm) */
	uint8_t with_imm, se; /* SEND: with immediate; solicited event */
};
/* Executes the longest prefix of n whole RDMA WRITEs (no immediate) or,
 * with read, RDMA READs on t that succeeds, in one transfer; returns its
 * length (0: none -- run them with sv_resp_direct).  Each takes the PSNs
 * the initiator's mtu gives it.  Takes t->q->lock. */
int sv_resp_rw_batch(struct sv_engine *eng, struct sv_rtgt *t,
		     const struct sv_drw *ws, int n, int read, uint32_t mtu);
/* Executes the longest prefix of n whole SENDs (with immediate or none)
 * on t that succeeds, each into the next receive of t's queue or SRQ, in
 * one transfer; returns its length (0: none -- run them with
 * sv_resp_direct).  Each takes the PSNs the initiator's mtu gives it.
 * sent(arg, k) runs once the data is placed, before the receive CQEs are
 * pushed (the initiator completes its WQEs there, as an ACK comes back
 * before the target's application sees the message).  Takes t->q->lock,
 * and t->srq's. */
int sv_resp_send_batch(struct sv_engine *eng, struct sv_rtgt *t,
		       const struct sv_drw *ws, int n, uint32_t mtu,
		       void (*sent)(void *arg, int k), void *arg);
/* Flushes the receive side of t (the receive being filled, then the
 * queue; an SRQ QP reports LAST_WQE).  Must hold t->q->lock. */
void sv_resp_flush_rq(struct sv_engine *eng, struct sv_rtgt *t);

/* Moves the QP of region q to ERR (the state only).  Must hold q->lock. */
static inline void sv_qshm_set_err(struct sv_qp_shm *q)
{
	__atomic_store_n(&q->state, IBV_QPS_ERR, __ATOMIC_RELEASE);
}
/* Allocates/frees qp->tr. */
int sv_tr_init(struct sv_qp *qp);
void sv_tr_free(struct sv_qp *qp);
/* Resets transport state (RESET). */
void sv_tr_reset(struct sv_qp *qp);
/* Our QP's responder target. */
static inline void sv_rtgt_own(struct sv_rtgt *t, struct sv_qp *qp)
{
	t->q = qp->shm;
	t->rcq = qp->rcq ? qp->rcq->shm : NULL; /* XRC TGT: none */
	t->srq = qp->srq ? qp->srq->shm : NULL;
	t->own = qp;
	t->peer = NULL;
	t->x = NULL;
}

/* Nanoseconds of the IBTA timeout exponent (4.096 us * 2^t), floored. */
uint64_t sv_timeout_ns(uint8_t t);
/* RNR NAK timer encoding (9.7.5.2.8) in nanoseconds. */
uint64_t sv_rnr_ns(uint8_t code);
uint32_t sv_mtu_bytes(enum ibv_mtu mtu);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The responder's private header: its states, the run context, the ops
 * by which its two callers differ, and what its files share.
 *
 *   sv_resp.c        the state machine: the loop, the states, the two
 *                    callers (packets, direct execution) and their ops
 *   sv_resp_check.c  the checks and decisions (every state before
 *                    EXECUTE; DUPLICATE, NAK_SEQ, RNR; the NAK chosen;
 *                    the answer queue and the atomic replay cache), over
 *                    the responder block, the packet and the transport
 *                    state: a unit test links it alone
 *                    (tests/unit/test_resp.c)
 *   sv_resp_exec.c   placing and fetching the data: receive WQEs, keys,
 *                    SEND/WRITE placement, direct READs, atomics, ATOMIC
 *                    WRITE, batches
 *   sv_resp_reply.c  the packet path's answers on the link: READ
 *                    responses (an ATOMIC WRITE's of no data), atomic
 *                    ACKs, the coalesced ACK or NAK
 */
#ifndef SV_RESP_INT_H
#define SV_RESP_INT_H

#include "engine_int.h"

/*
 * The responder's states, in the order a request that succeeds visits
 * them; the machine starts at RESPST_CHK_QP and stops at RESPST_DONE.
 * Each state is one function (sv_resp.c: step[]) that returns the next.
 */
enum resp_state {
	RESPST_CHK_QP,	      /* QP state, transport, Q_Key */
	RESPST_CHK_PSN,	      /* expected, duplicate or ahead */
	RESPST_CHK_OP_SEQ,    /* FIRST/MIDDLE/LAST order, packet sizes */
	RESPST_CHK_RESOURCE,  /* a receive WQE, room for an answer */
	RESPST_CHK_ACCESS,    /* the QP's remote access flags */
	RESPST_CHK_LENGTH,    /* WRITE length, atomic alignment */
	RESPST_CHK_RKEY,      /* the remote key and range */
	RESPST_EXECUTE,	      /* SEND/WRITE placed, atomic(s) done */
	RESPST_READ_REPLY,    /* a READ's data to the initiator */
	RESPST_ATOMIC_REPLY,  /* an atomic's original value */
	RESPST_ATOMIC_WRITE_REPLY, /* an ATOMIC WRITE's answer */
	RESPST_COMPLETE,      /* the receive CQE of a last packet */
	RESPST_ACKNOWLEDGE,   /* expected PSN moves on; the ACK */
	RESPST_DUPLICATE,     /* re-answer, never re-execute */
	RESPST_NAK_SEQ,	      /* ahead of the expected PSN: NAK once */
	RESPST_RNR,	      /* no receive WQE: RNR NAK */
	RESPST_ERR_INV_REQ,   /* NAK invalid request (the QP to ERR) */
	RESPST_ERR_ACCESS,    /* NAK remote access error (the QP to ERR) */
	RESPST_ERR_OP,	      /* NAK remote operational error (to ERR) */
	RESPST_ERR_LENGTH,    /* receive too small: LOC_LEN_ERR */
	RESPST_ERR_LKEY,      /* receive SGE bad: LOC_PROT_ERR */
	RESPST_ERR_LOCAL,     /* direct: the initiator's memory faulted */
	RESPST_DROP,	      /* silently, as a lost packet */
	RESPST_DONE,
	RESPST_NSTATES
};

struct resp;

/*
 * Where the two callers differ, and only there.
 *
 * | member       | packets (sv_resp_packet)     | direct (sv_resp_direct)  |
 * |--------------|------------------------------|--------------------------|
 * | whole        | 0: one packet of a stream    | 1: one whole message in  |
 * |              |                              | order, its payload in    |
 * |              |                              | the initiator's memory   |
 * | payload      | the packet's bytes           | the initiator's buffers  |
 * | room         | the answer queue has room    | always                   |
 * | read_reply   | queue the READ's responses   | copy into the initiator  |
 * | atomic_reply | cache the value, queue an    | the value to the caller  |
 * |              | atomic ACK                   |                          |
 * | atomic_write | mark the PSN done, queue a   | an ACK to the caller     |
 * | _reply       | READ response of no data     |                          |
 * | early_ack    | the coalesced ACK, if asked  | the initiator's hook     |
 * | answer       | the coalesced ACK/NAK        | the outcome to the caller|
 * | span         | 1 PSN                        | the PSNs the initiator   |
 * |              |                              | cut the message into     |
 *
 * whole is read in the states where a stream and a whole message really
 * differ: a whole message takes the PSN the responder expects (never a
 * duplicate, never ahead), no packet of it follows (no NAK_SENT window,
 * no duplicate burst), its size is the message's (no per-packet size
 * rule), and a fault on its payload's side is the initiator's.
 */
struct resp_ops {
	int whole;
	/* The payload of a SEND or WRITE as a data description (d and s
	 * are the caller's room for one built here). */
	const struct sv_data *(*payload)(struct resp *rs, struct sv_data *d,
					 struct sv_seg *s);
	/* Nonzero when the answer to a READ or atomic can be kept. */
	int (*room)(struct resp *rs);
	/* RESPST_READ_REPLY's work; RESPST_DONE or an error state. */
	enum resp_state (*read_reply)(struct resp *rs);
	/* RESPST_ATOMIC_REPLY's work: rs->orig to the initiator. */
	void (*atomic_reply)(struct resp *rs);
	/* RESPST_ATOMIC_WRITE_REPLY's work: the answer that it is done. */
	void (*atomic_write_reply)(struct resp *rs);
	/* The ACK due before the receive CQE is pushed (sv_resp.c
	 * "The ACK of a message"). */
	void (*early_ack)(struct resp *rs);
	/* How the outcome leaves: kind SV_ROUT_*, syn the AETH syndrome,
	 * psn the PSN it names. */
	void (*answer)(struct resp *rs, enum sv_rout kind, uint8_t syn,
		       uint32_t psn);
	/* The PSNs this request spans. */
	uint32_t (*span)(struct resp *rs);
};

/* One run of the machine: one request, under the QP's responder lock. */
struct resp {
	const struct resp_ops *ops;
	struct sv_engine *eng;
	struct sv_rtgt *t;
	struct sv_qp_shm *q;
	struct sv_tr *tr;	    /* packets: the owner's transport state */
	struct sv_key_cache *rkc;   /* packets: the owner's last remote key */
	struct sv_key_cache *rxc;   /* ... and last receive key; else NULL */
	const struct sv_pkt *pkt;
	const struct sv_data *data; /* direct: payload, or a READ's target */
	/* The PDs remote keys and receive buffers are checked against: the
	 * QP's (its SRQ's for receives), or on an XRC TGT QP the PD of the
	 * XRC SRQ the request names (IBTA 9.4: XRC takes the SRQ's PD). */
	uint32_t pd_id, rx_pd_id;
	uint64_t len;		    /* the payload's length */
	uint32_t flags;		    /* sv_opcodes[opcode].flags */
	uint64_t orig;		    /* an atomic's original value */
	enum ibv_wc_status recv_status;
	unsigned cq_bits;	    /* SV_CQP_* from the receive CQ */
	int srq_limit;		    /* the SRQ's limit was crossed */
	struct sv_resp_res *res;    /* direct: the outcome */
};

static inline uint32_t qflag(const struct resp *rs, uint32_t f)
{
	return rs->q->rflags & f;
}

static inline void qset(struct resp *rs, uint32_t f, int on)
{
	if (on)
		rs->q->rflags |= f;
	else
		rs->q->rflags &= ~f;
}

static inline uint32_t resp_mtu(const struct sv_qp_shm *q)
{
	return q->mtu ? q->mtu : 4096;
}

/* After t's lock is dropped: its owner hears what it must (the receive
 * CQ's bits, the SRQ's limit crossed, the QP's events).  sv_resp.c */
void sv_resp_notify(struct sv_engine *eng, struct sv_rtgt *t,
		    unsigned cq_bits, int srq_limit);

/* Locks q, repairing what a dead holder left half done: a message in
 * progress is abandoned (its packets are resent or lost as on a wire). */
static inline void resp_lock(struct sv_qp_shm *q)
{
	if (sv_lock_shm(&q->lock, SV_LOCK_RESP))
		q->rflags &= ~(uint32_t)(SV_RF_IN_SEND | SV_RF_IN_WRITE);
}

/* ------------------------------------------ sv_resp_check.c: checks -- */

/* Where a request's PSN stands against the one expected (9.7.1: 24-bit
 * serial numbers; half the space ahead is ahead, the other half behind). */
enum sv_psn_class {
	SV_PSN_EXPECTED,
	SV_PSN_DUPLICATE, /* behind: a resend of something we have */
	SV_PSN_AHEAD,	  /* ahead: something before it was lost */
};
enum sv_psn_class sv_resp_psn_class(uint32_t epsn, uint32_t psn);
/* The opcode sequence rule: nonzero when a packet of flags may follow
 * what the responder is inside (rflags: SV_RF_IN_SEND/IN_WRITE). */
int sv_resp_op_seq_ok(uint32_t rflags, uint32_t flags);
/* The packet size rule (9.7.4.1.4): nonzero when a packet of flags may
 * carry paylen bytes on a path of mtu bytes. */
int sv_resp_size_ok(uint32_t flags, uint32_t paylen, uint32_t mtu);
/* A request of flags consumes a receive WQE (a SEND's first packet, a
 * WRITE with immediate). */
int sv_resp_needs_recv(uint32_t flags);
/* The AETH syndrome a state answers with on an RC QP: a NAK code for the
 * NAK and error states (table 44), the RNR NAK with q's timer code, else
 * an ACK. */
uint8_t sv_resp_syndrome(const struct sv_qp_shm *q, enum resp_state st);

/* The error state of a key lookup's failure e (SV_KERR_*). */
enum resp_state sv_resp_kerr_state(int e);
/* An error a UC QP takes silently (9.8.3): st, or RESPST_DROP on UC. */
enum resp_state sv_resp_uc_silent(const struct resp *rs, enum resp_state st);

/* The check states (their contracts in sv_resp_check.c). */
enum resp_state sv_resp_chk_qp(struct resp *rs);
enum resp_state sv_resp_chk_psn(struct resp *rs);
enum resp_state sv_resp_chk_op_seq(struct resp *rs);
enum resp_state sv_resp_chk_resource(struct resp *rs);
enum resp_state sv_resp_chk_access(struct resp *rs);
enum resp_state sv_resp_chk_length(struct resp *rs);
enum resp_state sv_resp_chk_rkey(struct resp *rs);
enum resp_state sv_resp_duplicate(struct resp *rs);
enum resp_state sv_resp_nak_seq(struct resp *rs);
enum resp_state sv_resp_rnr(struct resp *rs);

/* The packet path's answers, kept in tr until sv_resp_flush sends them.
 * Must hold the QP's responder lock. */
void sv_resp_set_ack(struct sv_tr *tr, uint32_t psn);
void sv_resp_set_nak(struct sv_tr *tr, uint8_t syn, uint32_t psn);
int sv_resp_respq_full(const struct sv_tr *tr);
/* Queues the answer to a READ request pkt, its rkey of PD pd_id; a
 * repeat of one (repeat) supersedes what is still queued of the same
 * READ. */
void sv_resp_queue_read(struct sv_tr *tr, const struct sv_pkt *pkt,
			int repeat, uint32_t pd_id);
void sv_resp_queue_atomic(struct sv_tr *tr, uint32_t psn, uint64_t orig);
/* Queues an ATOMIC WRITE's answer: an RDMA READ response of no data
 * (IBTA 1.5, as rxe answers it). */
void sv_resp_queue_atomic_write(struct sv_tr *tr, uint32_t psn);
/* The atomic replay cache: an executed atomic's original value by PSN
 * (an ATOMIC WRITE's PSN with 0); a repeat of it is answered from here,
 * never executed again. */
void sv_resp_atomic_record(struct sv_tr *tr, uint32_t psn, uint64_t orig);
int sv_resp_atomic_replay(const struct sv_tr *tr, uint32_t psn,
			  uint64_t *orig);

/* ------------------------------------------- sv_resp_exec.c: the data -- */

/* Takes a receive WQE into the responder's cur slot; 0 or -1 (none). */
int sv_resp_take_recv(struct resp *rs);
/* Pushes the receive CQE of the cur slot and frees the slot. */
void sv_resp_push_recv(struct resp *rs, enum ibv_wc_status st,
		       enum ibv_wc_opcode opc, uint32_t byte_len, int with_imm,
		       int with_inv, int solicited);
/* sv_key_resolve of a remote key for this QP (through rs->rkc). */
int sv_resp_rkey(struct resp *rs, uint32_t key, uint64_t va, uint64_t len,
		 uint32_t access, struct sv_mem *m);
/* RESPST_EXECUTE's work by opcode. */
enum resp_state sv_resp_exec_send(struct resp *rs);
enum resp_state sv_resp_exec_write(struct resp *rs);
enum resp_state sv_resp_exec_atomic(struct resp *rs);
enum resp_state sv_resp_exec_atomic_write(struct resp *rs);
/* A READ executed in place: the target's memory into rs->data. */
enum resp_state sv_resp_read_direct(struct resp *rs);
/* Invalidates key (SEND with invalidate) through the daemon. */
int sv_resp_invalidate(struct resp *rs, uint32_t key);

/* All of the above: must hold rs->q->lock. */

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Engine internals (src/engine): links, the key table reader, and the
 * transport's per-QP state.  The contract with src/verbs is sv_engine.h;
 * engine.c's top comment is the design.
 */
#ifndef SV_ENGINE_INT_H
#define SV_ENGINE_INT_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "sv_engine.h"
#include "sv_hdr.h"
#include "sv_keytab.h"
#include "sv_log.h"
#include "sv_ring.h"

/*
 * Takes a spinlock the way a small machine needs: a holder preempted by
 * us on our own CPU (the application, by the progress thread) releases
 * it only if we give the CPU back, so after a short spin we yield instead
 * of burning a whole time slice.
 */
static inline void sv_spin_lock(pthread_spinlock_t *l)
{
	for (unsigned i = 0; pthread_spin_trylock(l); i++) {
		if (i >= 64)
			sched_yield();
#if defined(__x86_64__) || defined(__i386__)
		else
			__builtin_ia32_pause();
#endif
	}
}

/* ------------------------------------------------------------ limits -- */
#define SV_ENG_RING_BYTES (1u << 20)	/* data bytes of one link direction */
#define SV_ENG_MAX_INRINGS 1024		/* inbound links of one engine */
#define SV_ENG_MAX_PKT (4096 + 128)	/* MTU 4096 + every header */
/* Progress thread policy (engine.c "Progress"). */
#define SV_ENG_SPIN_NS 100000		/* spin after work (no app poller) */
#define SV_ENG_INLINE_NS 5000000	/* app polled a CQ this recently */
#define SV_ENG_NAP_NS 250000		/* ... then look again this often */
#define SV_ENG_TARGET_NS 10000000	/* ... or sleep armed if it left us
					   packets this recently */
#define SV_ENG_LIVE_NS 10000		/* app polled this recently: its
					   rings are its own */
#define SV_ENG_BATCH 64			/* packets per ring per pass */
#define SV_ENG_RESPQ 256		/* queued READ/atomic responses per QP */
/* Replayable atomic results per QP, by PSN (a power of two): a repeated
 * atomic (a lost response) is answered from here, never re-executed.  The
 * requester does not cap atomics in flight at max_rd_atomic, so this
 * covers a whole window of PSNs. */
#define SV_ENG_ATOMIC_CACHE 1024
#define SV_ENG_MIN_TIMEOUT_NS 10000000ull /* transport timer floor: 10 ms */
#define SV_ENG_MAX_MSG 0x80000000ull	/* SV_MAX_MSG_SZ */
#define SV_RMEM_CHUNK 65536		/* bytes of one remote memory request */
#define SV_RMEM_TIMEOUT_NS 30000000000ull /* a living owner that never answers */

/* Record types on a ring (sv_ring.h). */
#define SV_REC_PKT 1u
#define SV_REC_F_GRH 0x10000u

/* --------------------------------------------------------- opcodes -- */
enum {
	OP_VALID = 1 << 0,
	OP_REQ = 1 << 1,
	OP_RESP = 1 << 2,
	OP_SEND = 1 << 3,
	OP_WRITE = 1 << 4,
	OP_READ = 1 << 5,
	OP_ATOMIC = 1 << 6,
	OP_ACK = 1 << 7,
	OP_FIRST = 1 << 8,
	OP_MIDDLE = 1 << 9,
	OP_LAST = 1 << 10,
	OP_PAYLOAD = 1 << 11,
	OP_RETH = 1 << 12,
	OP_AETH = 1 << 13,
	OP_ATMETH = 1 << 14,
	OP_ATMACK = 1 << 15,
	OP_IMM = 1 << 16,
	OP_IETH = 1 << 17,
	OP_DETH = 1 << 18,
};

struct sv_opinfo {
	const char *name;
	uint32_t flags;
};
extern const struct sv_opinfo sv_opcodes[256];

/* Opcode numbers (low 5 bits; | 0x20 for UC, | 0x60 for UD). */
enum {
	OPC_SEND_FIRST = 0x00,
	OPC_SEND_MIDDLE = 0x01,
	OPC_SEND_LAST = 0x02,
	OPC_SEND_LAST_IMM = 0x03,
	OPC_SEND_ONLY = 0x04,
	OPC_SEND_ONLY_IMM = 0x05,
	OPC_WRITE_FIRST = 0x06,
	OPC_WRITE_MIDDLE = 0x07,
	OPC_WRITE_LAST = 0x08,
	OPC_WRITE_LAST_IMM = 0x09,
	OPC_WRITE_ONLY = 0x0a,
	OPC_WRITE_ONLY_IMM = 0x0b,
	OPC_READ_REQ = 0x0c,
	OPC_READ_RESP_FIRST = 0x0d,
	OPC_READ_RESP_MIDDLE = 0x0e,
	OPC_READ_RESP_LAST = 0x0f,
	OPC_READ_RESP_ONLY = 0x10,
	OPC_ACK = 0x11,
	OPC_ATOMIC_ACK = 0x12,
	OPC_CMP_SWAP = 0x13,
	OPC_FETCH_ADD = 0x14,
	OPC_SEND_LAST_INV = 0x16,
	OPC_SEND_ONLY_INV = 0x17,
};
#define OPC_UC 0x20
#define OPC_UD 0x60

/* A parsed packet: header fields in host order, payload in place. */
struct sv_pkt {
	const uint8_t *grh, *bth;
	uint8_t opcode;
	uint32_t flags; /* sv_opcodes[opcode].flags */
	uint32_t qpn, psn;
	uint64_t va;
	uint32_t rkey, dma_len;
	uint64_t swap, comp, orig;
	uint8_t syn;
	uint32_t msn;
	uint32_t imm; /* network order, as ibv_wc.imm_data */
	uint32_t inv_rkey;
	uint32_t qkey, src_qpn;
	const uint8_t *payload;
	uint32_t paylen;
};

unsigned sv_op_hdr_len(uint32_t flags);
/* Parses buf (len bytes, a GRH first when grh).  Returns 0 or -1 for a
 * packet that is not one (the caller drops it). */
int sv_pkt_parse(struct sv_pkt *pkt, const uint8_t *buf, uint32_t len,
		 int grh);

/* ------------------------------------------------------------- links -- */

/*
 * Remote memory (keys.c "Memory of another process"): one request box per
 * link, after the ring in the link's memfd.  The link's producer (the
 * engine touching memory it does not own) fills it and sets state to
 * REQ; the consumer (the memory's owner) claims it (SERVING), executes it
 * on its own memory and sets DONE with the result.  No ring record: the
 * owner serves boxes from any thread that drains (and from threads that
 * wait on a box of their own), so two engines waiting on each other
 * always make progress.
 */
enum { SV_RMEM_IDLE = 0, SV_RMEM_REQ, SV_RMEM_SERVING, SV_RMEM_DONE };
enum { SV_RMEM_READ = 1, SV_RMEM_WRITE, SV_RMEM_CSWAP, SV_RMEM_FADD };
struct sv_rmem_box {
	_Atomic uint32_t state;
	uint32_t op;
	uint32_t key;	 /* the MR (owner re-checks it names its memory) */
	uint32_t len;
	uint64_t addr;	 /* address in the owner */
	uint64_t comp, swap; /* atomics */
	uint64_t orig;	     /* atomics: the value before */
	int32_t result;	     /* 0 or a negative errno */
	uint32_t seq;
	uint8_t pad[8];
	uint8_t data[SV_RMEM_CHUNK];
};
#define SV_RMEM_BOX_BYTES sizeof(struct sv_rmem_box)

/* Our direction to a peer engine: a ring we produce into. */
struct sv_link {
	struct sv_engine *eng;
	uint32_t peer_id;  /* engine id of the peer (== ours: loopback) */
	pid_t peer_pid;
	atomic_int dead;   /* the peer engine died: sends fail */
	pthread_spinlock_t tx_lock; /* leaf: tx and the doorbell write */
	struct sv_ring_prod tx;
	void *map;
	size_t map_len;
	int peer_db; /* the peer's doorbell eventfd */
	struct sv_rmem_box *box; /* NULL on loopback */
	pthread_mutex_t box_lock; /* one request at a time */
	/* Fault injection (SOFTVERBS_FAULT), under tx_lock. */
	uint8_t *cur;		  /* the record reserved, not committed */
	uint32_t cur_len, cur_type;
	uint64_t rng;
	uint8_t *held; /* a packet held back (reorder) */
	uint32_t held_len, held_type;
	struct sv_link *next;
};

/* A peer's direction to us: a ring we consume. */
struct sv_inring {
	struct sv_ring_cons rx;
	pthread_mutex_t lock; /* one consumer at a time (trylock) */
	void *map;	      /* NULL for loopback (the link owns it) */
	size_t map_len;
	uint32_t peer_id;
	int broken; /* the producer wrote garbage: ignored from then on */
	struct sv_rmem_box *box; /* requests of that peer to our memory */
};

/* ------------------------------------------------------------ engine -- */

struct sv_qpent {
	uint32_t qpn;
	struct sv_qp *qp;
};

struct sv_async_ev {
	uint32_t ufile, ctx_id;
	uint64_t instance;
	uint32_t type;
	uint64_t element;
	struct sv_async_ev *next;
};

struct sv_engine {
	pthread_mutex_t lock; /* attach state, links list */
	pthread_rwlock_t attach_lock; /* write: attach/detach; read: users of
					 rings and links */
	int attached;
	uint32_t id;
	pid_t pid;
	uint64_t instance; /* daemon instance (from the first context) */
	int doorbell;	   /* our eventfd */
	int sock;	   /* engine socket from the daemon */
	int epfd;
	int stopfd; /* eventfd: progress thread, stop */
	pthread_t thread;
	int thread_running;
	atomic_int stop;
	atomic_uint thread_tid; /* progress thread's tid (tests) */

	/* Key table (read-only mapping, kept across detaches). */
	const struct sv_keytab_hdr *kt;
	const struct sv_key_entry *keys;
	uint32_t nkeys;
	size_t kt_len;
	uint8_t gid[16];

	/* QPs by number: open addressing, under qp_lock. */
	pthread_rwlock_t qp_lock;
	struct sv_qpent *qtab;
	uint32_t qcap, nqps;

	/* Links we produce into (list under lock; qp->link is stable while
	 * attached). */
	struct sv_link *links;
	/* Rings we consume: slots only grow while attached. */
	struct sv_inring *in[SV_ENG_MAX_INRINGS];
	atomic_uint nin;

	/* QPN -> engine cache for UD destinations (under lock). */
	struct {
		uint32_t qpn, engine_id;
	} dcache[256];

	/* DM / dma-buf mappings by object id (under lock). */
	struct sv_objmap {
		uint64_t obj_id;
		uint8_t *base;
		uint64_t len;
	} *maps;
	uint32_t nmaps;

	struct sv_async_ev *async_head, **async_tail;
	atomic_int work; /* something for the progress thread to retry */
	_Atomic uint64_t last_inline; /* last sv_engine_progress (ns) */
	_Atomic uint64_t sleep_until; /* progress thread asleep until (ns) */
	/* Links to memory owners (remote memory requests): a list of their
	 * own under rmem_lock, a leaf taken with QP locks held (the daemon
	 * is called under it the first time, as for DM mappings). */
	pthread_mutex_t rmem_lock;
	struct sv_link *rlinks;
	pthread_mutex_t async_lock; /* leaf: async queue, thread_running */
};

/* engine.c */
uint64_t sv_now_ns(void);
/* The QP numbered qpn; caller holds eng->qp_lock (read). */
struct sv_qp *sv_eng_qp(struct sv_engine *eng, uint32_t qpn);
/* The link to the engine serving qpn (connecting it), or NULL.  No QP
 * lock may be held (may call the daemon). */
struct sv_link *sv_eng_link_for_qpn(struct sv_engine *eng, uint32_t qpn);
/* Reserves a packet record on link (takes link->tx_lock until the commit
 * or abort).  NULL with the lock released when the ring is full or the
 * link is dead (*dead set). */
uint8_t *sv_link_reserve(struct sv_link *link, uint32_t len, int grh,
			 int *dead);
void sv_link_commit(struct sv_link *link);
void sv_link_abort(struct sv_link *link);
/* Asks the progress thread to come back soon (ring full, timers). */
void sv_eng_want_work(struct sv_engine *eng);
/* A timer of some QP now expires at `when` (ns): wakes the progress
 * thread if it sleeps past it.  No lock needed. */
void sv_eng_deadline(struct sv_engine *eng, uint64_t when);
/* Queues an async event (sent by the progress thread, no lock held). */
void sv_eng_async(struct sv_engine *eng, struct ibv_context *ctx,
		  enum ibv_event_type type, void *element);

/* keys.c: memory behind keys. */
enum sv_kerr {
	SV_KOK = 0,
	SV_KERR_KEY,	/* no such key (never valid, stale, freed) */
	SV_KERR_PD,	/* PD differs from the QP's */
	SV_KERR_ACCESS, /* access flag missing */
	SV_KERR_BOUNDS, /* outside the registered range */
	SV_KERR_OWNER,	/* the memory's owner is unreachable or gone */
};
/* A resolved range: either a pointer here or an address in another
 * process (CMA). */
struct sv_mem {
	uint8_t *ptr; /* non-NULL: direct */
	pid_t pid;    /* else: memory of process pid at raddr */
	uint64_t raddr;
	uint32_t key; /* the MR key (the owner checks it) */
	struct sv_engine *eng;
};
/*
 * Checks key for [va, va + len) and resolves it.  is_rkey: windows are
 * allowed and access means remote access; qpn: the QP executing (type 2
 * windows must be bound to it).  No lock needed; may call the daemon for
 * DM mappings on first use.
 */
int sv_key_resolve(struct sv_engine *eng, uint32_t key, uint32_t pd_id,
		   uint64_t va, uint64_t len, uint32_t access, int is_rkey,
		   uint32_t qpn, struct sv_mem *out);
/* Whether key names an MR of this process covering [addr, addr + len)
 * of our address space (the owner's check of a remote memory request). */
int sv_key_owned(struct sv_engine *eng, uint32_t key, uint64_t addr,
		 uint64_t len);
/* Copies between a resolved range (at offset off) and local memory.
 * Return 0 or -1 (the owner refused / is gone). */
int sv_mem_write(const struct sv_mem *m, uint64_t off, const void *src,
		 size_t n);
int sv_mem_read(const struct sv_mem *m, uint64_t off, void *dst, size_t n);
/* An 8-byte atomic (SV_RMEM_CSWAP / SV_RMEM_FADD) at m + 0, atomic with
 * respect to every other atomic of the device: CPU atomics here, or
 * executed by the owner.  *orig: the value before.  Returns 0 or -1. */
int sv_mem_atomic(const struct sv_mem *m, uint32_t op, uint64_t comp,
		  uint64_t swap, uint64_t *orig);

/* engine.c: remote memory through the owner's engine. */
/* Executes one request (op, key, addr, len bytes of buf; comp/swap for
 * atomics) in process pid.  Returns 0, or a negative errno (-EHOSTDOWN:
 * the owner is gone or has no engine).  May call the daemon the first
 * time (a link to the owner). */
int sv_rmem_call(struct sv_engine *eng, pid_t pid, uint32_t op, uint32_t key,
		 uint64_t addr, void *buf, uint32_t len, uint64_t comp,
		 uint64_t swap, uint64_t *orig);
/* Serves the remote memory requests waiting in our inbound boxes.  Any
 * thread, no lock needed.  Returns how many it served. */
int sv_rmem_serve(struct sv_engine *eng);
/*
 * Scatter/gather over an SGE list: copies n bytes between buf and the
 * list at byte offset off.  Every SGE touched is checked (LOCAL_WRITE when
 * writing).  Returns SV_KOK, an SV_KERR_*, or -1 when the list is too short
 * (length error).
 */
int sv_sge_copy(struct sv_engine *eng, const struct ibv_sge *sge, int nsge,
		uint32_t pd_id, uint64_t off, void *buf, size_t n, int to_sge);
/* Sum of the SGE lengths (saturating at 2^32). */
uint64_t sv_sge_total(const struct ibv_sge *sge, int nsge);

/* ---------------------------------------------------------- transport -- */

/* A queued READ or atomic response (responder). */
struct sv_respq_ent {
	uint8_t kind; /* 1 read, 2 atomic */
	uint8_t syn;
	uint32_t psn;	/* next PSN to send */
	uint32_t left;	/* read: bytes still to send */
	uint32_t total; /* read: bytes asked */
	uint64_t va;
	uint32_t rkey;
	uint64_t orig; /* atomic */
};

/* Per-QP transport state (qp->tr). */
struct sv_tr {
	/* requester + completer: under sq_lock */
	uint32_t psn;	   /* next PSN to send */
	uint32_t mtu;	   /* bytes */
	int req_busy;	   /* a thread runs the requester (ordering) */
	int req_again;
	int blocked;	   /* ring full: retry from the progress thread */
	int stopped;	   /* a WQE failed: start nothing after it */
	uint64_t timer_at; /* retransmission deadline (ns), 0 = off */
	uint64_t rnr_at;   /* RNR wait until (ns), 0 = none */
	uint32_t retry_left, rnr_left;
	uint32_t last_ack_psn;
	uint64_t ring_mark; /* producer position when the timer was armed */
	/* responder: under rq_lock */
	uint32_t epsn;
	uint32_t msn;
	int nak_sent;
	int in_send;  /* inside a multi-packet SEND */
	int in_write; /* inside a multi-packet WRITE */
	int uc_drop;  /* UC: dropping the rest of this message */
	int have_recv;
	struct sv_recv_wqe *recv; /* the WQE being filled (own buffer) */
	uint32_t recv_cap;	  /* SGEs recv holds */
	int last_wqe_sent;	  /* IBV_EVENT_QP_LAST_WQE_REACHED raised */
	uint64_t recv_off;
	int recv_err;	  /* status to complete the receive with */
	uint64_t wr_va;	  /* WRITE in progress */
	uint32_t wr_rkey;
	uint32_t wr_left;
	uint32_t wr_total;
	int ack_pending;  /* coalesced ACK to send */
	uint32_t ack_psn;
	uint8_t ack_syn;
	struct sv_respq_ent respq[SV_ENG_RESPQ];
	uint32_t rq_head, rq_tail; /* respq indices */
	struct {
		uint32_t psn;
		int valid;
		uint64_t orig;
	} atomic_cache[SV_ENG_ATOMIC_CACHE];
	uint32_t atomic_next;
	int resp_fatal; /* responder error: QP goes to ERR */
	int comm_est;	/* IBV_EVENT_COMM_EST raised (RTR) */
	int need_flush;
	struct sv_link *link; /* == qp->link */
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
	WQE_DONE,     /* complete (status in retries' place: see wqe_status) */
};

/* sv_req.c */
/* Runs the requester of qp: sends what it can.  No lock held. */
void sv_req_run(struct sv_qp *qp);
/* sv_comp.c: a response packet (ACK, NAK, read response, atomic ACK)
 * for qp.  Takes sq_lock.  Returns nonzero when qp must be flushed. */
int sv_comp_packet(struct sv_qp *qp, const struct sv_pkt *pkt);
/* Retires done WQEs from the head of the SQ.  Must hold sq_lock. */
void sv_comp_retire(struct sv_qp *qp);
/* Completes the oldest unfinished WQE with status and moves the QP to
 * ERR.  Must hold sq_lock. */
void sv_comp_fail(struct sv_qp *qp, enum ibv_wc_status status);
/* Timers of qp (retransmission, RNR).  Returns nonzero when the QP must
 * be flushed; *next set to the next deadline (ns) if earlier. */
int sv_comp_timers(struct sv_qp *qp, uint64_t now, uint64_t *next);
/* sv_resp.c: a request packet for qp (from link `from`).  Takes
 * rq_lock. */
void sv_resp_packet(struct sv_qp *qp, const struct sv_pkt *pkt);
/* Sends queued responses and coalesced ACKs.  Takes rq_lock. */
void sv_resp_flush(struct sv_qp *qp);

/* Moves qp to ERR (state fields only; the caller flushes). */
void sv_qp_set_err(struct sv_qp *qp);
/* Allocates/frees qp->tr. */
int sv_tr_init(struct sv_qp *qp);
void sv_tr_free(struct sv_qp *qp);
/* Resets transport state for RESET -> INIT and the PSNs at RTR/RTS. */
void sv_tr_reset(struct sv_qp *qp);

/* Nanoseconds of the IBTA timeout exponent (4.096 us * 2^t), floored. */
uint64_t sv_timeout_ns(uint8_t t);
/* RNR NAK timer encoding (9.7.5.2.8) in nanoseconds. */
uint64_t sv_rnr_ns(uint8_t code);
uint32_t sv_mtu_bytes(enum ibv_mtu mtu);

#endif

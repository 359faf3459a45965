/* SPDX-License-Identifier: MIT */
/*
 * Engine internals (src/engine): links, the key table reader, memory
 * movement, the transport's per-QP state, and how one engine reaches the
 * queues of another.  The contract with src/verbs is sv_engine.h;
 * engine.c's top comment is the design.
 *
 * Files, by job (as rxe splits its pipeline):
 *   engine.c      attach/detach, MR holds, fork, QP creation/destruction
 *   eng_qp.c      the QP and object tables, the other QP hooks (modify,
 *                 post)
 *   sv_path.c     which way a post and a WQE go (sv_path.h); the
 *                 tunables it reads: sv_tune.c / sv_tune.h
 *   eng_link.c    links between engines (rings), fault injection
 *   eng_rmem.c    memory of another process through its owner's engine
 *   eng_progress.c the progress thread and its policy, async events, the
 *                 engine socket
 *   eng_inbound.c inbound rings and port, dispatch, owner events, timers
 *   eng_peer.c    mapped views of other processes' QPs (direct execution)
 *   sv_queue.c    the shared-memory queues (CQ, RQ, SRQ, QP block)
 *   keys.c        keys -> memory, and the copy engine (CMA, fault-safe)
 *   sv_req.c      requester;  sv_direct.c  direct execution by the
 *                 initiator;  sv_resp.c  responder;  sv_comp.c completer
 */
#ifndef SV_ENGINE_INT_H
#define SV_ENGINE_INT_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "sv_engine.h"
#include "sv_hdr.h"
#include "sv_opcode.h"
#include "sv_keytab.h"
#include "sv_lock.h"
#include "sv_log.h"
#include "sv_path.h"
#include "sv_ring.h"
#include "sv_tune.h"

/* ------------------------------------------------------------ limits -- */
/* Sizes of rings, tables and messages.  The figures the data path's
 * choices and the progress thread's policy act on are tunables, in one
 * table: sv_tune.h. */
#define SV_ENG_RING_BYTES (1u << 20)	/* data bytes of one link direction */
#define SV_ENG_MAX_INRINGS 1024		/* inbound links of one engine */
#define SV_ENG_MAX_PKT (4096 + 128)	/* MTU 4096 + every header */
#define SV_ENG_RESPQ 256		/* queued READ/atomic responses per QP */
/* Replayable atomic results per QP, by PSN (a power of two): a repeated
 * atomic (a lost response) is answered from here, never re-executed. */
#define SV_ENG_ATOMIC_CACHE 1024
#define SV_ENG_MIN_TIMEOUT_NS 10000000ull /* transport timer floor: 10 ms */
#define SV_ENG_MAX_MSG 0x80000000ull	/* SV_MAX_MSG_SZ */
#define SV_RMEM_CHUNK 65536		/* bytes of one remote memory request */
#define SV_RMEM_TIMEOUT_NS 30000000000ull /* a living owner that never answers */
#define SV_MAX_SEGS (SV_MAX_SGE + 2)	/* ranges of one message side */

/* eng_link.c: faults in every page of a ring mapping (write: a fresh,
 * zero one nobody else has; else read). */
void sv_map_touch(void *map, size_t len, int write);

/* Record types on a ring (sv_ring.h). */
#define SV_REC_PKT 1u
#define SV_REC_EVENT 2u	   /* struct sv_ev_rec: nudge the owner */
#define SV_REC_F_GRH 0x10000u
#define SV_REC_F_WIRE 0x20000u /* came from the wire (a capture saw it
				  arrive) */

/* An owner event travelling on a link (SV_REC_EVENT): someone ran the
 * responder of, or produced into, an object of the ring's consumer. */
enum { SV_EVK_CQ = 1, SV_EVK_SRQ, SV_EVK_QP };
struct sv_ev_rec {
	uint32_t kind;	 /* SV_EVK_* */
	uint32_t id;	 /* CQ/SRQ: obj_id; QP: qpn */
	uint64_t cookie; /* the object's region cookie */
	uint32_t bits;	 /* CQ: SV_CQP_*; SRQ: 1 = limit reached */
	uint32_t pad;
};

/* ------------------------------------------------------------- links -- */

/*
 * Remote memory (eng_rmem.c): one request box per link, after the ring in
 * the link's memfd.  The link's producer (the engine touching memory it
 * does not own) fills it and sets state to REQ; the consumer (the
 * memory's owner) claims it (SERVING), executes it on its own memory and
 * sets DONE with the result.  No ring record: the owner serves boxes from
 * any thread that drains (and from threads that wait on a box of their
 * own), so two engines waiting on each other always make progress.
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
	int cma;	   /* 0 unknown, 1 CMA to peer_pid works, -1 refused */
	pthread_spinlock_t tx_lock; /* tx and the doorbell write (SV_LOCK_TX) */
	struct sv_ring_prod tx;
	void *map;
	size_t map_len;
	int peer_db; /* the peer's doorbell eventfd */
	struct sv_rmem_box *box; /* NULL on loopback */
	pthread_mutex_t box_lock; /* one request at a time */
	/* Fault injection (SOFTVERBS_FAULT), under tx_lock. */
	uint8_t *cur;		  /* the record reserved, not committed */
	uint32_t cur_len, cur_type;
	uint64_t cur_prev; /* the ring's pending before cur was reserved */
	uint64_t rng;
	uint8_t *held; /* a packet held back (reorder) */
	uint32_t held_len, held_type;
	struct sv_link *next;
	/* A wire link (eng_wire.c): datagrams instead of a ring.  Owned by
	 * its QP (sv_tr.wlink), on no list; tx, map and peer_db unused. */
	struct sv_wlink *w;
	/* Direct execution (sv_direct.c stream_wakes): the last small
	 * one-sided request, the last wake-up of the peer's thread. */
	_Atomic uint64_t last_small, woken;
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

/* -------------------------------------------------------- peer views -- */

/*
 * Another process's QP as an initiator that executes on it directly sees
 * it (eng_peer.c): its responder block, its receive CQ and SRQ, mapped
 * from the fds the daemon keeps (SV_OP_QP_PEER).  Cached per engine by
 * QPN; dropped when the owner marks the region dead.
 */
struct sv_peer {
	uint32_t qpn;
	uint32_t engine_id;
	pid_t pid;
	struct sv_qp_shm *q;
	struct sv_cq_shm *rcq;
	struct sv_srq_shm *srq;
	struct sv_link *link; /* to the owner's engine: events, doorbell */
	atomic_int refs;
	struct sv_peer *next;
};

/*
 * The QP a responder runs on: ours (own) or another process's (peer).
 * q/rcq/srq are the shared regions either way.
 */
struct sv_rtgt {
	struct sv_qp_shm *q;
	struct sv_cq_shm *rcq;
	struct sv_srq_shm *srq;
	struct sv_qp *own;
	struct sv_peer *peer;
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

/* CQs and SRQs by obj_id (slot | generation << 20), for owner events. */
struct sv_objtab {
	void **obj;
	uint32_t *gen;
	uint32_t cap, free_hint;
};

struct sv_engine {
	pthread_mutex_t lock; /* attach state, links list, object tables */
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
	atomic_int device_gone; /* the daemon died: every QP is in error */

	/* The wire (eng_wire.c): its state, made on first use, and the
	 * gateway ring asked for once (under wire_lock); a copy of the port
	 * block as of port_seq (under port_lock). */
	pthread_mutex_t wire_lock;
	struct sv_wire *wire;
	int wire_attached;
	/* The namespace's port (sv_wire.h), shared with the daemon and the
	 * other engines on the wire: its socket (-1: none), the shared
	 * page, our receive buffers; one thread of ours reads at a time. */
	int wire_sock;
	uint16_t wire_port;
	struct sv_wire_shm *wshm;
	struct sv_wire_rxb *rxb;
	pthread_mutex_t wire_rx_lock;
	_Atomic uint64_t wire_idle_until; /* the port was empty: rest till */
	pthread_mutex_t port_lock;
	struct sv_keytab_port *port_copy;
	uint32_t port_seq;
	/* Capture (eng_capture.c): the ring to the daemon, made once a
	 * capture is seen (cap_state 1; -1: refused; under wire_lock). */
	pthread_spinlock_t cap_lock; /* producers of the ring (SV_LOCK_TX) */
	struct sv_ring_prod cap_prod;
	void *cap_map;
	size_t cap_len;
	int cap_db;
	int cap_state;

	/* Key table (read-only mapping, kept across detaches). */
	const struct sv_keytab_hdr *kt;
	const struct sv_key_entry *keys;
	const struct sv_keytab_port *port; /* port 1: GIDs, MTU */
	uint32_t nkeys;
	size_t kt_len;
	uint8_t gid[16];

	/* QPs by number: open addressing, under qp_lock.  Read-held it also
	 * keeps every key looked up under it valid; taken for writing and
	 * let go at once it is a barrier that waits for every reader (MR
	 * deregistration, sv_engine_take_arrived).  Reader-preferring; its
	 * place in the order and why its read side may be taken out of
	 * order: sv_lock.h. */
	pthread_rwlock_t qp_lock;
	struct sv_qpent *qtab;
	uint32_t qcap, nqps;

	/* CQs and SRQs by obj_id (under lock). */
	struct sv_objtab cqs, srqs;

	/* Links we produce into (list under lock; qp->link is stable while
	 * attached); loop is the loopback one, once made. */
	struct sv_link *links;
	struct sv_link *loop;
	/* Rings we consume: slots only grow while attached. */
	struct sv_inring *in[SV_ENG_MAX_INRINGS];
	atomic_uint nin;

	/* QPN -> engine cache for UD destinations (under lock). */
	struct {
		uint32_t qpn, engine_id;
	} dcache[256];

	/* Views of other processes' QPs (under peer_lock; the daemon is
	 * called under it on a miss). */
	pthread_mutex_t peer_lock;
	struct sv_peer *peers;
	uint32_t nodirect[256]; /* qpn + 1 of UD destinations without one */

	/* DM / dma-buf mappings by object id (under lock). */
	struct sv_objmap {
		uint64_t obj_id;
		uint8_t *base;
		uint64_t len;
	} *maps;
	uint32_t nmaps;

	struct sv_async_ev *async_head, **async_tail;
	atomic_int work; /* something for the progress thread to retry */
	atomic_int deferred; /* some QP holds back posted WQEs (batching) */
	_Atomic uint64_t last_inline; /* last sv_engine_progress (ns) */
	/* Bumped by every ibv_poll_cq (sv_engine_note_poll): the progress
	 * thread tells an application that polls from one that does not
	 * without a clock read per poll. */
	_Atomic uint32_t poll_seq;
	/* Bumped by every ibv_poll_cq that returned completions and every
	 * request packet received: posts with neither in between are a
	 * stream, not a ping-pong (sv_engine_posted). */
	_Atomic uint32_t got_seq;
	_Atomic uint32_t notify_seq; /* bumped by every ibv_req_notify_cq */
	_Atomic uint64_t sleep_until; /* progress thread asleep until (ns) */
	/* The progress thread sleeps with its rings armed because nobody
	 * polled: the next poll wakes it, so that it leaves the rings to
	 * that poller (sv_engine_progress). */
	atomic_int idle_armed;
	/* Links to memory owners (remote memory requests): a list of their
	 * own under rmem_lock (the daemon is called under it the first
	 * time, as for DM mappings). */
	pthread_mutex_t rmem_lock;
	struct sv_link *rlinks;
	pthread_mutex_t async_lock; /* async queue, thread_running */
};

/* engine.c */
uint64_t sv_now_ns(void);
/* Whether direct execution is allowed at all (SOFTVERBS_DIRECT, fault
 * injection off). */
int sv_direct_enabled(void);
/* The daemon destroyed ufile `ufile` (engine socket message): the MR
 * holds our closed contexts left there end. */
void sv_holds_ufile_gone(struct sv_engine *eng, uint32_t ufile);

/* eng_qp.c */
/* The QP numbered qpn; caller holds eng->qp_lock (read). */
struct sv_qp *sv_eng_qp(struct sv_engine *eng, uint32_t qpn);
/* Adds / removes QP qpn.  Must hold eng->qp_lock (write). */
int sv_qtab_put(struct sv_engine *eng, uint32_t qpn, struct sv_qp *qp);
void sv_qtab_del(struct sv_engine *eng, uint32_t qpn);
/* The CQ / SRQ of ours with this obj_id and cookie, or NULL.  Takes
 * eng->lock. */
struct sv_cq *sv_eng_cq(struct sv_engine *eng, uint32_t id, uint64_t cookie);
struct sv_srq *sv_eng_srq(struct sv_engine *eng, uint32_t id, uint64_t cookie);

/* eng_link.c */
/* The link to the engine serving qpn (connecting it), or NULL.  No QP
 * lock may be held (may call the daemon). */
struct sv_link *sv_eng_link_for_qpn(struct sv_engine *eng, uint32_t qpn);
/* The link to engine `peer`, made if needed.  Must hold eng->lock. */
struct sv_link *sv_link_get(struct sv_engine *eng, uint32_t peer);
/* The engine serving qpn (flags 0) or process pid (SV_QPN_BY_PID), 0 if
 * none; *rep filled when not NULL. */
uint32_t sv_lookup_engine(struct sv_engine *eng, uint32_t qpn, uint32_t flags,
			  struct sv_qpn_rep *rep);
/* A fresh link to engine `peer` (ring bytes of packet ring, size bytes
 * in all), connected through the daemon.  NULL on failure. */
struct sv_link *sv_link_new(struct sv_engine *eng, uint32_t peer, size_t ring,
			    size_t size);
void sv_link_free(struct sv_link *l, int close_fds);
/* Adds an inbound ring (map of len bytes, the ring its first ring_len,
 * then a box when box; map owned when own_map).  Must hold eng->lock. */
int sv_add_inring(struct sv_engine *eng, void *map, size_t len,
		  size_t ring_len, int box, uint32_t peer, int own_map);
/* Reserves a record on link (takes link->tx_lock until the commit or
 * abort).  NULL with the lock released when the ring is full or the link
 * is dead (*dead set). */
uint8_t *sv_link_reserve(struct sv_link *link, uint32_t len, int grh,
			 int *dead);
uint8_t *sv_link_reserve_type(struct sv_link *link, uint32_t len,
			      uint32_t type, int *dead);
void sv_link_commit(struct sv_link *link);
void sv_link_abort(struct sv_link *link);
/* Rings the link's peer doorbell. */
void sv_link_ring(struct sv_link *link);
/* Reads SOFTVERBS_FAULT (once); nonzero when faults are injected. */
int sv_fault_init(void);
/* What the fault model does to the next packet on l (SV_FAULT_*; the
 * caller holds what guards l's producer side). */
enum { SV_FAULT_NONE, SV_FAULT_DROP, SV_FAULT_REORDER, SV_FAULT_DUP };
int sv_fault_pick(struct sv_link *l);

/* eng_wire.c: RoCE v2 to other hosts. */
#define SV_WIRE_SLOTS 64 /* datagrams of one batch */
#define SV_WIRE_REST_NS 2000 /* after an empty read of the port */
#define SV_WIRE_GATHER_NS 5000 /* after a read of a few packets */
struct sv_roce_flow;
/* gid is this host's (the port's GID table, loopback, or zero: no
 * address): not the wire. */
int sv_gid_local(struct sv_engine *eng, const uint8_t gid[16]);
/* An RC/UC QP's AV names another host: a GRH whose destination is not
 * ours (no GRH stays here). */
int sv_av_remote(struct sv_engine *eng, const struct ibv_ah_attr *av);
/* The port's active MTU in bytes (a UD message's limit). */
uint32_t sv_eng_port_mtu(struct sv_engine *eng);
/* The GID at index of port 1; 0 or -1 (empty slot). */
int sv_gid_at(struct sv_engine *eng, uint32_t index, uint8_t gid[16]);
/* Asks the daemon for the gateway ring (once).  0 or negative errno.  No
 * lock held. */
int sv_wire_attach(struct sv_engine *eng);
/* The UDP source port of a flow, as rxe picks it. */
uint16_t sv_wire_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn,
		       int ud);
/* A wire link for flow f (RC/UC: the whole flow; UD: the source port,
 * the rest from each packet's GRH).  NULL on failure.  No lock held. */
struct sv_link *sv_wire_link_new(struct sv_engine *eng,
				 const struct sv_roce_flow *f);
void sv_wire_link_free(struct sv_link *l);
/* sv_link_reserve/commit/abort of a wire link. */
uint8_t *sv_wire_reserve(struct sv_link *l, uint32_t len, uint32_t type,
			 int *dead);
void sv_wire_commit(struct sv_link *l);
void sv_wire_abort(struct sv_link *l);
int sv_wire_cur(struct sv_link *l, uint8_t **p, uint32_t *len, uint32_t *type);
/* Sends the batch (no lock held); whether some still waits. */
void sv_wire_flush(struct sv_engine *eng);
int sv_wire_pending(struct sv_engine *eng);
/* Closes the sockets and frees the state (detach). */
void sv_wire_free(struct sv_engine *eng);
/* The flow of a wire link's packets (UD: its source port only). */
const struct sv_roce_flow *sv_wire_link_flow(const struct sv_link *l);
/* Makes wire link l the QP's (the old one freed) and records the peer's
 * addresses for sv_wire_admit.  Must hold sq_lock or the responder's
 * lock with the QP not yet on the wire. */
struct sv_tr;
void sv_tr_set_wlink(struct sv_tr *tr, struct sv_link *l);
/* Whether a packet that came from the wire may reach qp (docs/wire.md
 * "Hostile packets"): its payload fits the QP's MTU, and an RC/UC packet
 * comes from the QP's peer to the QP's address, as rxe's check_addr
 * wants.  Counts what it refuses in the namespace's wire page.  Must hold
 * qp_lock (read). */
int sv_wire_admit(struct sv_engine *eng, struct sv_qp *qp,
		  const struct sv_pkt *pkt);

/* eng_capture.c: `softverbs capture`. */
static inline int sv_cap_on(const struct sv_engine *eng)
{
	return eng->kt && atomic_load_explicit(&eng->kt->capture,
					       memory_order_relaxed);
}
/* Makes the capture ring when a capture runs and none exists.  No lock
 * held (may call the daemon). */
void sv_cap_prepare(struct sv_engine *eng);
void sv_cap_free(struct sv_engine *eng);
/* Copies one packet (ib: BTH .., len bytes without pad or ICRC; dir 0
 * sent, 1 received; qpn: our QP) with the flow it has on the wire. */
void sv_cap(struct sv_engine *eng, uint32_t dir, uint32_t qpn,
	    const struct sv_roce_flow *f, const uint8_t *ib, uint32_t len);
/* The flow a GRH (ring format) stands for, with UDP source port sport. */
void sv_cap_flow_grh(const uint8_t *grh, uint32_t sport,
		     struct sv_roce_flow *f);
/* sv_link_commit of a packet qp sends, copied to the capture first. */
void sv_cap_commit(struct sv_link *l, struct sv_qp *qp);
/* The record reserved on l (not committed): 1 and its bytes, or 0. */
int sv_link_cur(struct sv_link *l, uint8_t **p, uint32_t *len, uint32_t *type);

/* eng_progress.c */
/* Asks the progress thread to come back soon (ring full, timers). */
void sv_eng_want_work(struct sv_engine *eng);
/* A timer of some QP now expires at `when` (ns): wakes the progress
 * thread if it sleeps past it.  No lock needed. */
void sv_eng_deadline(struct sv_engine *eng, uint64_t when);
/* Queues an async event (sent by the progress thread, no lock held). */
void sv_eng_async(struct sv_engine *eng, const struct sv_ctx_ref *cref,
		  enum ibv_event_type type, void *element);
/* Sends what the async queue holds (no lock held). */
void sv_eng_async_drain(struct sv_engine *eng);
/* The progress thread's body and its inline share. */
void *sv_progress_main(void *arg);
int sv_eng_drain_all(struct sv_engine *eng, int *contended, int *silent);
uint64_t sv_eng_scan_qps(struct sv_engine *eng, uint64_t now, int *busy);
/* Runs the requesters holding back posted WQEs (doorbell batching): all
 * of them, or those whose deadline passed (due: now, 0 = all).  Returns
 * the next deadline or 0.  No lock held. */
uint64_t sv_eng_run_deferred(struct sv_engine *eng, uint64_t due);
/* Acts on the SV_QEV_* bits a responder left on our QP qp (flush,
 * async events).  No lock held. */
void sv_qp_owner_events(struct sv_qp *qp);

/* keys.c: memory behind keys, and moving bytes. */
enum sv_kerr {
	SV_KOK = 0,
	SV_KERR_KEY,	/* no such key (never valid, stale, freed) */
	SV_KERR_PD,	/* PD differs from the QP's */
	SV_KERR_ACCESS, /* access flag missing */
	SV_KERR_BOUNDS, /* outside the registered range */
	SV_KERR_OWNER,	/* the memory's owner is unreachable or gone */
	SV_KERR_LEN = -1, /* an SGE list too short (length error) */
};
/* A resolved range: either a pointer here or an address in another
 * process (CMA, or its owner's engine). */
struct sv_mem {
	uint8_t *ptr; /* non-NULL: direct */
	pid_t pid;    /* else: memory of process pid at raddr */
	uint64_t raddr;
	uint32_t key; /* the MR key (the owner checks it) */
	struct sv_engine *eng;
};
/* One side of a transfer: ranges in order. */
struct sv_seg {
	struct sv_mem m;
	uint64_t len;
};
struct sv_data {
	struct sv_seg *seg;
	int nseg;
	uint64_t len; /* sum of seg[].len */
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
/*
 * sv_key_resolve for a key used again and again (a QP's stream of small
 * messages from one buffer): the key's entry is copied into c once and
 * used while the key table's entry keeps its seq, so each use reads one
 * word of the table, not the whole entry.  Same checks, same answers.  c
 * starts zeroed; whoever owns it serializes its uses.
 */
struct sv_key_cache {
	uint32_t key; /* 0: empty (no key has index 0) */
	struct sv_key_entry e;
};

/* [va, va + len) inside key entry e's range. */
static inline int sv_key_in_range(const struct sv_key_entry *e, uint64_t va,
				  uint64_t len)
{
	if (e->length == UINT64_MAX)
		return va + len >= va;
	return va >= e->iova && len <= e->length &&
	       va - e->iova <= e->length - len;
}

/*
 * Where [va, va + len) under key `key` (PD pd_id, with access) is in our
 * memory, when c holds key, still valid, for an MR of ours; NULL otherwise
 * (then sv_key_resolve_cached answers, with the error if there is one).
 * The inline half of the cache: no call on a stream's path.
 */
static inline uint8_t *sv_key_cached_local(const struct sv_engine *eng,
					   const struct sv_key_cache *c,
					   uint32_t key, uint32_t pd_id,
					   uint64_t va, uint64_t len,
					   uint32_t access)
{
	if (c->key != key || c->e.kind != SV_KEY_MR_USER ||
	    (pid_t)c->e.owner_pid != eng->pid || c->e.pd_id != pd_id ||
	    (c->e.access & access) != access ||
	    !sv_key_in_range(&c->e, va, len) ||
	    atomic_load_explicit(&eng->keys[key >> 8].seq,
				 memory_order_acquire) !=
		    atomic_load_explicit(&c->e.seq, memory_order_relaxed))
		return NULL;
	return (uint8_t *)(uintptr_t)(c->e.addr + (va - c->e.iova));
}
int sv_key_resolve_cached(struct sv_engine *eng, struct sv_key_cache *c,
			  uint32_t key, uint32_t pd_id, uint64_t va,
			  uint64_t len, uint32_t access, int is_rkey,
			  uint32_t qpn, struct sv_mem *out);
/* Whether key names an MR of this process covering [addr, addr + len)
 * of our address space (the owner's check of a remote memory request). */
int sv_key_owned(struct sv_engine *eng, uint32_t key, uint64_t addr,
		 uint64_t len);
/* Resolves [off, off + n) of an SGE list (checking each SGE touched with
 * access, LOCAL_WRITE when written) into at most maxseg segments of
 * out.  SV_KOK, an SV_KERR_*, or SV_KERR_LEN when the list is short. */
int sv_sge_resolve(struct sv_engine *eng, const struct ibv_sge *sge, int nsge,
		   uint32_t pd_id, uint32_t access, uint64_t off, uint64_t n,
		   struct sv_data *out, struct sv_seg *segs, int maxseg);
/* Copies n bytes from src (from byte src_off) to dst (from dst_off):
 * memcpy here (safe against memory unmapped meanwhile), CMA to or from
 * another process, or that process's engine.  Returns 0, or the side
 * that failed: SV_XERR_DST or SV_XERR_SRC (its memory faulted), with
 * SV_XERR_GONE when the process holding it is gone or unreachable. */
#define SV_XERR_DST 1
#define SV_XERR_SRC 2
#define SV_XERR_GONE 4
int sv_xfer(const struct sv_data *dst, uint64_t dst_off,
	    const struct sv_data *src, uint64_t src_off, uint64_t n);
/* A one-range data description of local bytes. */
static inline void sv_data_local(struct sv_data *d, struct sv_seg *s,
				 const void *p, uint64_t len)
{
	s->m = (struct sv_mem){ .ptr = (uint8_t *)p };
	s->len = len;
	d->seg = s;
	d->nseg = 1;
	d->len = len;
}
/* memcpy that survives memory unmapped under it: 0 or -EFAULT. */
int sv_safe_copy(void *dst, const void *src, size_t n);
/* An 8-byte CPU atomic (SV_RMEM_CSWAP / SV_RMEM_FADD) on our memory, as
 * safe: 0 or -EFAULT. */
int sv_safe_atomic(uint64_t *p, uint32_t op, uint64_t comp, uint64_t swap,
		   uint64_t *orig);
/* An 8-byte atomic (SV_RMEM_CSWAP / SV_RMEM_FADD) at m + 0, atomic with
 * respect to every other atomic of the device: CPU atomics here, or
 * executed by the owner.  *orig: the value before.  Returns 0 or -1. */
int sv_mem_atomic(const struct sv_mem *m, uint32_t op, uint64_t comp,
		  uint64_t swap, uint64_t *orig);
/* Whether CMA to pid works (probed once per link: the peer's region
 * header at va must read back as magic). */
int sv_cma_probe(pid_t pid, uint64_t va, uint32_t magic);
/* CMA switched off (SOFTVERBS_NO_CMA=1 or refused). */
int sv_cma_off(void);
/* In the child of a fork: closes the /proc/PID/mem fds of the parent. */
void sv_memf_forget(void);
/* Sum of the SGE lengths (saturating at 2^32). */
uint64_t sv_sge_total(const struct ibv_sge *sge, int nsge);
/* The bytes a send WQE carries as posted: its inline data or its
 * gather list. */
static inline uint64_t sv_wqe_bytes(const struct sv_send_wqe *w)
{
	return (w->send_flags & IBV_SEND_INLINE) ?
		       w->inline_len :
		       sv_sge_total(w->sge, (int)w->num_sge);
}

/* eng_rmem.c: remote memory through the owner's engine. */
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
/* eng_peer.c */
/* The view of QP qpn of another process, mapped if needed (a reference
 * the caller drops with sv_peer_put).  NULL when it is not there or
 * cannot be mapped.  May call the daemon: no spinlock held. */
struct sv_peer *sv_peer_get(struct sv_engine *eng, uint32_t qpn);
void sv_peer_put(struct sv_peer *p);
/* The cached view of qpn (a reference), never calling the daemon: for
 * UD sends with the SQ lock held.  NULL when not cached. */
struct sv_peer *sv_peer_find(struct sv_engine *eng, uint32_t qpn);
/* Maps qpn's view for later sv_peer_find, or remembers it cannot be
 * (CMA refused...).  No lock held. */
void sv_peer_learn(struct sv_engine *eng, uint32_t qpn);
/* Forgets views whose region died or whose engine is gone. */
void sv_peer_prune(struct sv_engine *eng, uint32_t dead_engine);
/* Drops every view (detach, fork child). */
void sv_peer_clear(struct sv_engine *eng);
/* Tells the owner of t (ours or a peer's) about what happened: a
 * completion event or overflow of its receive CQ, an SRQ limit, QP
 * events left in t->q->events. */
void sv_rtgt_notify(struct sv_engine *eng, struct sv_rtgt *t, int kind,
		    unsigned bits);

/* ---------------------------------------------------------- transport -- */

/* A queued READ or atomic response (responder, packet path). */
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
	uint32_t retry_left, rnr_left;
	uint32_t last_ack_psn;
	uint32_t since_ackreq; /* packets sent since the last AckReq */
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
/* Executes the run of RDMA WRITEs or READs at sq.next as one batch, as
 * sv_path_choose decided (SV_PATH_DIRECT_BATCH); returns how many it
 * completed (0: declined, go one by one).  Must hold sq_lock. */
int sv_direct_rw_batch(struct sv_qp *qp, struct sv_tr *tr);
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
/* One RDMA WRITE or READ of a batch: its remote range and the local
 * ranges it moves from (WRITE) or into (READ). */
struct sv_drw {
	uint64_t va;
	uint32_t rkey;
	uint32_t nseg;
	uint64_t len;
	const struct sv_seg *local;
};
/* Executes the longest prefix of n whole RDMA WRITEs (no immediate) or,
 * with read, RDMA READs on t that succeeds, in one transfer; returns its
 * length (0: none -- run them with sv_resp_direct).  Each takes the PSNs
 * the initiator's mtu gives it.  Takes t->q->lock. */
int sv_resp_rw_batch(struct sv_engine *eng, struct sv_rtgt *t,
		     const struct sv_drw *ws, int n, int read, uint32_t mtu);
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
	t->rcq = qp->rcq->shm;
	t->srq = qp->srq ? qp->srq->shm : NULL;
	t->own = qp;
	t->peer = NULL;
}

/* Nanoseconds of the IBTA timeout exponent (4.096 us * 2^t), floored. */
uint64_t sv_timeout_ns(uint8_t t);
/* RNR NAK timer encoding (9.7.5.2.8) in nanoseconds. */
uint64_t sv_rnr_ns(uint8_t code);
uint32_t sv_mtu_bytes(enum ibv_mtu mtu);

/* sv_queue.c internals */
void *sv_shm_create(uint32_t magic, size_t size, int *fdp);
void *sv_shm_map(int fd, uint32_t magic, uint64_t cookie);
void sv_shm_unmap(void *region);
void sv_rq_shm_init(struct sv_rq_shm *q, uint32_t max_wr, uint32_t max_sge,
		    uint64_t slots_off);
/* Consumer: takes the oldest WQE of q (at most out_sge SGEs copied).  Must
 * hold the queue's lock.  0 or -EAGAIN. */
int sv_rq_take(void *region, struct sv_rq_shm *q, struct sv_recv_wqe *out,
	       uint32_t out_sge);
/* Takes from an SRQ (takes s->lock); *limit_event set when the armed
 * limit was crossed (the limit is disarmed). */
int sv_srq_take(struct sv_srq_shm *s, struct sv_recv_wqe *out,
		uint32_t out_sge, int *limit_event);

#endif

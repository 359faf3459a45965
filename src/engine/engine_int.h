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
 *   keys.c        keys -> memory, the fault guard;  eng_xfer.c  the
 *                 copy engine (CMA, fault-safe)
 *   sv_req.c      requester;  sv_direct.c  direct execution by the
 *                 initiator;  sv_resp.c  responder (its state machine;
 *                 sv_resp_check.c, sv_resp_exec.c, sv_resp_reply.c,
 *                 resp_int.h);  sv_comp.c completer (its decisions:
 *                 sv_comp_decide.c)
 *   eng_wire.c    RoCE v2 to other hosts;  eng_capture.c  capture
 *
 * By subject, this header includes two of its own parts where they
 * belong: eng_mem.h (keys.c: memory behind keys, moving bytes) and
 * eng_tr.h (the transport's per-QP state and entry points).
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
#define SV_ENG_PROBE_NS 1000000ull /* a NAK's resend again after 1 ms (sv_comp.c) */
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
	atomic_int moved; /* an XRC TGT QP served elsewhere since */
	struct sv_peer *next;
};

/*
 * An XRC SRQ as a responder sees it (eng_peer.c): the SRQ an XRC
 * request's XRCETH names and its CQ, mapped from the fds the daemon keeps
 * (SV_OP_SRQ_PEER), with what the daemon says of it -- its domain (a TGT
 * QP takes requests only for SRQs of its own) and its PD (XRC checks keys
 * and receive buffers against it).  Cached per engine by SRQ number;
 * dropped when the daemon marks the SRQ's region dead.
 */
struct sv_xsrq {
	uint32_t srqn;
	uint32_t xrcd_id, pd_id;
	uint32_t engine_id; /* its owner's engine (== ours: our own SRQ) */
	struct sv_srq_shm *srq;
	struct sv_cq_shm *cq;
	struct sv_link *link; /* to its owner's engine: events */
	atomic_int refs;
	struct sv_xsrq *next;
};

/*
 * The QP a responder runs on: ours (own) or another process's (peer).
 * q/rcq/srq are the shared regions either way.  An XRC TGT QP has no
 * receive CQ or SRQ of its own: x is the XRC SRQ the request names (a
 * reference), rcq and srq are its.
 */
struct sv_rtgt {
	struct sv_qp_shm *q;
	struct sv_cq_shm *rcq;
	struct sv_srq_shm *srq;
	struct sv_qp *own;
	struct sv_peer *peer;
	struct sv_xsrq *x;
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
	uint32_t xrc_qpn; /* nonzero: for other processes' handles of this
			     XRC TGT QP (SV_OP_XRC_EVENT) */
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
	pthread_mutex_t sock_lock; /* one reader of the engine socket
				      (sock_readable, eng_progress.c) */
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
	_Atomic uint64_t wire_last_rx;	  /* when a read of it last found some */
	_Atomic int wire_watched; /* our napping thread waits on the port:
				     nobody of ours reads it meanwhile */
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
	/* Handles from ibv_open_qp (eng_xrc.c; under lock). */
	struct sv_qp *xopens;
	uint32_t nxopen;

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
	struct sv_xsrq *xsrqs; /* XRC SRQs requests named (peer_lock too) */
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
	/* When a poll of the application last ran held streams itself
	 * (sv_engine_note_poll), and notify_seq then: a post that holds one
	 * rings no sleeping thread for it while the application has asked
	 * for no event since (sv_engine_posted). */
	_Atomic uint64_t app_ran_held;
	_Atomic uint32_t ran_held_notify;
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
	/* Bumped by every poll (sv_engine_progress) that took requests that
	 * end in no completion (a WRITE): the application's polls read the
	 * port for them themselves (policy_decide). */
	_Atomic uint32_t app_silent_seq;
	_Atomic uint64_t sleep_until; /* progress thread asleep until (ns) */
	/* The progress thread sleeps with its rings armed because nobody
	 * polled: the next poll wakes it, so that it leaves the rings to
	 * that poller (sv_engine_progress). */
	atomic_int idle_armed;
	/* It naps beside a polling application (unarmed, for timers): a
	 * request for an event wakes it (sv_engine_note_notify). */
	atomic_int napping;
	/* Links to memory owners (remote memory requests): a list of their
	 * own under rmem_lock (the daemon is called under it the first
	 * time, as for DM mappings). */
	pthread_mutex_t rmem_lock;
	struct sv_link *rlinks;
	pthread_mutex_t async_lock; /* async queue, thread_running */
};

/* engine.c */
/* Whether direct execution is allowed at all (SOFTVERBS_DIRECT, fault
 * injection off). */
int sv_direct_enabled(void);
/* The daemon destroyed ufile `ufile` (engine socket message): the MR
 * holds our closed contexts left there end. */
void sv_holds_ufile_gone(struct sv_engine *eng, uint32_t ufile);
/* Attaches the engine to the daemon (its socket, key table, progress
 * thread).  Must hold eng->lock.  0 or a negative errno. */
int sv_eng_attach(struct sv_engine *eng);
/* Detaches it when nothing wants it attached any more.  No lock held. */
void sv_eng_detach(struct sv_engine *eng);

/* eng_xrc.c */
/* SV_ENGINE_XRC_SERVE: XRC TGT QP qpn is served by process pid (0:
 * none).  Progress thread, no lock held. */
void sv_engine_xrc_serve(struct sv_engine *eng, uint32_t qpn, uint32_t pid);
/* SV_ENGINE_XRC_EVENT: XRC TGT QP qpn, served by another process, had
 * event `type`: each of our handles of it gets it.  No lock held. */
void sv_engine_xrc_event(struct sv_engine *eng, uint32_t qpn, uint32_t type);
/* An event of XRC TGT QP qp, which we serve: every handle of it gets it,
 * ours at once, other processes' through the daemon.  May hold qp_lock
 * (read) and QP locks, not eng->lock. */
void sv_eng_xrc_event_raise(struct sv_qp *qp, enum ibv_event_type type);

/* eng_qp.c */
/* The wire link an RC-type QP's answers and requests go on to the peer
 * na's address vector names on another host (NULL: no source GID).  No
 * lock held (may call the daemon). */
struct sv_link *sv_eng_wire_route(struct sv_qp *qp, const struct ibv_qp_attr *na);
/* The QP numbered qpn; caller holds eng->qp_lock (read). */
struct sv_qp *sv_eng_qp(struct sv_engine *eng, uint32_t qpn);
/* Adds / removes QP qpn.  Must hold eng->qp_lock (write). */
int sv_qtab_put(struct sv_engine *eng, uint32_t qpn, struct sv_qp *qp);
void sv_qtab_del(struct sv_engine *eng, uint32_t qpn);
/* The CQ / SRQ of ours with this obj_id and cookie, or NULL.  Takes
 * eng->lock. */
struct sv_cq *sv_eng_cq(struct sv_engine *eng, uint32_t id, uint64_t cookie);
struct sv_srq *sv_eng_srq(struct sv_engine *eng, uint32_t id, uint64_t cookie);

/* eng_mcast.c (no QP lock may be held: both call the daemon) */
/* The QPNs of this host attached to group gid (their count, 0 when none). */
int sv_mcast_members(struct sv_engine *eng, const uint8_t gid[16],
		     uint32_t qpn[SV_MAX_MCAST_QP_ATTACH]);
/* Hands a ring record (GRH + BTH .., BTH QP 0xFFFFFF) read from the port
 * to every QP of this host attached to its GRH's group, each copy naming
 * its QP (rec's BTH QP is rewritten).  Must hold the port.  Returns the
 * copies made. */
int sv_mcast_fanout(struct sv_engine *eng, uint8_t *rec, uint32_t len);


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
 * caller holds what guards l's producer side).  SV_FAULT_DELAY: hold it
 * *delay_ns (a delay plan). */
enum { SV_FAULT_NONE, SV_FAULT_DROP, SV_FAULT_REORDER, SV_FAULT_DUP,
       SV_FAULT_DELAY };
int sv_fault_pick(struct sv_link *l, const uint8_t *bth, uint32_t len,
		  uint64_t *delay_ns);

/* eng_wire.c: RoCE v2 to other hosts. */
#define SV_WIRE_SLOTS 64 /* datagrams of one batch */
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
/* The record reserved on wire link l ends in len payload bytes at p, in
 * this process's memory, that stay there until the packet is sent: the
 * kernel takes them from p, no copy into the batch (an RC request's
 * payload: its WQE completes only after the peer has it).  1 when taken,
 * 0 when the caller must copy them (too short, a capture runs), -EFAULT
 * when they are not mapped. */
int sv_wire_payload(struct sv_link *l, const uint8_t *p, uint32_t len);
/* Sends the batch (no lock held); whether some still waits. */
void sv_wire_flush(struct sv_engine *eng);
/* While on (this thread): a batch of plain ACKs only is not sent by
 * sv_wire_flush but left for the next flush -- the application's next
 * verbs call, or the progress thread's next pass, which sv_eng_deadline
 * brings within nap_max_ns (and the process's exit: sv_wire_flush_all).
 * The application's poll drains with it on, and the drain turns it off
 * unless it took one short message (sv_eng_drain_all): the ACK of a SEND
 * or a WRITE it just received leaves with its answer.  Off for good with
 * SOFTVERBS_TUNE=wire_ack_hold=0. */
void sv_wire_hold_acks(int on);
/* sv_wire_flush at the start of an application's poll: ACKs an earlier
 * poll kept stay kept up to wire_ack_hold_ns, for the application may
 * poll again before it answers (libfabric's rxm reads its CQ until it is
 * empty, then the application answers). */
void sv_wire_flush_polled(struct sv_engine *eng);
/* Sends all the batch holds now, kept ACKs too (the library's exit). */
void sv_wire_flush_all(struct sv_engine *eng);
/* sv_wire_hold_acks is on for this thread. */
int sv_wire_acks_held(void);
/* Sends what waits before the sockets close (detach): a send that
 * completed (UC, UD: sent is done) is on the wire, as a NIC finishes its
 * queue; a socket that refuses for a moment (ENOBUFS) is tried again, for
 * a second at most.  No lock held; the progress thread stopped. */
void sv_wire_drain(struct sv_engine *eng);
/* The datagrams waiting for the next flush (a hint: no lock). */
int sv_wire_pending(struct sv_engine *eng);
/* Packets of a path MTU of mtu bytes that one train carries at most
 * (eng_wire.c "Trains"). */
uint32_t sv_wire_train_pkts(uint32_t mtu);
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
/* Rings the progress thread's doorbell (wakes it, if it sleeps). */
void sv_eng_ring(struct sv_engine *eng);
/* Asks the progress thread to come back soon (ring full, timers). */
void sv_eng_want_work(struct sv_engine *eng);
/* A timer of some QP now expires at `when` (ns): wakes the progress
 * thread if it sleeps past it.  No lock needed. */
void sv_eng_deadline(struct sv_engine *eng, uint64_t when);
/* The application polled a CQ and found it empty less than live_ns ago:
 * it is in a polling loop, and its next poll comes soon. */
int sv_eng_app_polling(struct sv_engine *eng, uint64_t now);
/* Queues an async event (sent by the progress thread, no lock held). */
void sv_eng_async(struct sv_engine *eng, const struct sv_ctx_ref *cref,
		  enum ibv_event_type type, void *element);
/* Queues an event of XRC TGT QP qpn for other processes' handles of it
 * (SV_OP_XRC_EVENT). */
void sv_eng_async_xrc(struct sv_engine *eng, uint64_t instance, uint32_t qpn,
		      enum ibv_event_type type);
/* Sends what the async queue holds (no lock held). */
void sv_eng_async_drain(struct sv_engine *eng);
/* The progress thread's body and its inline share. */
void *sv_progress_main(void *arg);
/* Drains our rings and, when port (and the namespace's port is free),
 * reads the wire's port; the records taken. */
int sv_eng_drain_all(struct sv_engine *eng, uint64_t now, int *contended,
		     int *silent, int port);
uint64_t sv_eng_scan_qps(struct sv_engine *eng, uint64_t now, int app,
			 int *busy);
/* Dispatches a wire record (GRH first) to QP qpn if it is ours, as a read
 * of the port does; 0 when it is not.  Must hold the port, no QP lock. */
int sv_eng_dispatch_own(struct sv_engine *eng, const uint8_t *rec,
			uint32_t len, uint32_t qpn);
/* Runs the requesters holding back posted WQEs (doorbell batching), all
 * together in turns (eng_qp.c run_turns): at once (due 0), or when one of
 * their deadlines passed (due: now).  Returns the next deadline, or 0.
 * No lock held. */
uint64_t sv_eng_run_deferred(struct sv_engine *eng, uint64_t due);
/* Acts on the SV_QEV_* bits a responder left on our QP qp (flush,
 * async events).  No lock held. */
void sv_qp_owner_events(struct sv_qp *qp);

#include "eng_mem.h"
#include "eng_fault.h"

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
/* Asks the daemon for QP qpn's regions (SV_OP_QP_PEER): rep filled and
 * fds[0..2] the QP's, its receive CQ's and its SRQ's (-1 where not sent).
 * Returns how many fds came, or -1 (nothing open then).  No spinlock
 * held. */
int sv_qp_peer_fds(struct sv_engine *eng, uint32_t qpn,
		   struct sv_qp_peer_rep *rep, int fds[3]);
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
/* The view of XRC SRQ srqn (a reference the caller drops with
 * sv_xsrq_put), mapped if needed; NULL when there is no such SRQ or it
 * cannot be mapped.  May call the daemon (a leaf: any lock may be held
 * below SV_LOCK_PEER). */
struct sv_xsrq *sv_xsrq_get(struct sv_engine *eng, uint32_t srqn);
void sv_xsrq_put(struct sv_xsrq *x);
/* t's XRC SRQ: x (its reference moves into t), rcq and srq its regions. */
static inline void sv_rtgt_set_xsrq(struct sv_rtgt *t, struct sv_xsrq *x)
{
	t->x = x;
	t->srq = x ? x->srq : NULL;
	t->rcq = x ? x->cq : NULL;
}
/* Forgets views whose region died or whose engine is gone. */
void sv_peer_prune(struct sv_engine *eng, uint32_t dead_engine);
/* The daemon moved XRC TGT QP qpn to another engine: our views of it are
 * not handed out again (their links go to the old one). */
void sv_peer_moved(struct sv_engine *eng, uint32_t qpn);
/* Drops every view (detach, fork child). */
void sv_peer_clear(struct sv_engine *eng);
/* Tells the owner of t (ours or a peer's) about what happened: a
 * completion event or overflow of its receive CQ, an SRQ limit, QP
 * events left in t->q->events. */
void sv_rtgt_notify(struct sv_engine *eng, struct sv_rtgt *t, int kind,
		    unsigned bits);

#include "eng_tr.h"

/* sv_queue.c internals */
void *sv_shm_create(uint32_t magic, size_t size, int *fdp);
void *sv_shm_map(int fd, uint32_t magic, uint64_t cookie);
void sv_shm_unmap(void *region);
void sv_rq_shm_init(struct sv_rq_shm *q, uint32_t max_wr, uint32_t max_sge,
		    uint64_t slots_off);
/* Consumer: copies the WQE i places after the oldest of q (at most out_sge
 * SGEs) without taking it; sv_rq_drop then takes the n oldest.  Must hold
 * the queue's lock.  0 or -EAGAIN. */
int sv_rq_peek(void *region, struct sv_rq_shm *q, uint32_t i,
	       struct sv_recv_wqe *out, uint32_t out_sge);
void sv_rq_drop(struct sv_rq_shm *q, uint32_t n);
/* Consumer: takes the oldest WQE of q (at most out_sge SGEs copied).  Must
 * hold the queue's lock.  0 or -EAGAIN. */
int sv_rq_take(void *region, struct sv_rq_shm *q, struct sv_recv_wqe *out,
	       uint32_t out_sge);
/* Takes from an SRQ (takes s->lock); *limit_event set when the armed
 * limit was crossed (the limit is disarmed). */
int sv_srq_take(struct sv_srq_shm *s, struct sv_recv_wqe *out,
		uint32_t out_sge, int *limit_event);
/* After WQEs were dropped from s under s->lock: 1 when that crossed the
 * armed limit (now disarmed), as sv_srq_take's limit_event. */
int sv_srq_dropped(struct sv_srq_shm *s);

#endif

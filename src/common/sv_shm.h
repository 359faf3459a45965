/* SPDX-License-Identifier: MIT */
/*
 * The queues a NIC reads and writes in host memory: completion queues,
 * receive queues (a QP's own or shared), and the responder side of each
 * QP.  They are regions of shared memory (sealed memfds) so that the
 * engine of ANOTHER process can consume a posted receive and produce a
 * completion, the way a NIC's DMA does, without the owner's CPU
 * (engine.c "Direct execution").  Header only; sv_queue.c has the code.
 *
 * Every region starts with struct sv_shm_hdr (magic, version, size, owner
 * pid, a random cookie that tells a reused QP number's new QP from the
 * old one) and uses offsets, never pointers.  The owner creates it, hands
 * the fd to the daemon with the create command, and the daemon gives it
 * to engines that talk to the object (SV_OP_QP_PEER).
 *
 * Who writes what, and under which lock:
 *   - CQ: entries and tail by producers under cq->lock (a robust,
 *     process-shared mutex: a producer that dies holding it does not
 *     wedge the others); head by the owner's poller only (its private
 *     poll lock); armed by the owner (req_notify) and cleared by the
 *     producer that raises the event, both under cq->lock.
 *   - Receive queue (QP's own or SRQ): slots and tail by the owner's
 *     post_recv only (its private lock); head and the slot contents read
 *     by consumers under the queue's lock (the QP's responder lock for a
 *     QP's own queue, srq->lock for an SRQ).
 *   - QP responder block: everything under qp->lock, whoever runs the
 *     responder (the owner's engine for packets, an initiator for direct
 *     execution); `events` is atomic (bits for the owner to act on).
 * How these locks order among the library's others: src/engine/sv_lock.h.
 *
 * Nobody trusts an index another process wrote beyond what it needs:
 * readers bound every index and count by the region's own size, so a
 * peer that scribbles on a region garbles that object's traffic only.
 */
#ifndef SV_SHM_H
#define SV_SHM_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define SV_SHM_VERSION 1
#define SV_SHM_CQ 0x31514353u  /* "SCQ1" */
#define SV_SHM_QP 0x31505153u  /* "SQP1" */
#define SV_SHM_SRQ 0x31525353u /* "SSR1" */

/*
 * | field     | meaning                                                |
 * |-----------|--------------------------------------------------------|
 * | magic     | SV_SHM_CQ / SV_SHM_QP / SV_SHM_SRQ                     |
 * | version   | SV_SHM_VERSION                                         |
 * | size      | bytes of the region                                    |
 * | owner_pid | process that created the object                        |
 * | obj_id    | the owner engine's id for it (events name it)          |
 * | cookie    | random, never 0: names this object for its whole life  |
 * | owner_va  | where the owner mapped the region (CMA probe: a peer   |
 * |           | reads the magic there with process_vm_readv)           |
 * | dead      | the QP was destroyed (by its owner, or by the daemon): |
 * |           | peers stop delivering and drop their mapping           |
 */
struct sv_shm_hdr {
	uint32_t magic;
	uint32_t version;
	uint64_t size;
	uint32_t owner_pid;
	uint32_t obj_id;
	uint64_t cookie;
	uint64_t owner_va;
	_Atomic uint32_t dead;
	uint32_t pad[5];
};
static_assert(sizeof(struct sv_shm_hdr) == 64, "shm header layout");
static_assert(offsetof(struct sv_shm_hdr, dead) == 40, "shm header layout");

/* A robust process-shared mutex: the holder dying does not wedge the
 * others (the next locker repairs what it guards). */
struct sv_shlock {
	pthread_mutex_t m;
	uint8_t pad[64 - sizeof(pthread_mutex_t)];
};
static_assert(sizeof(struct sv_shlock) == 64, "shlock layout");

/* Initialises l (the creator, before anyone maps the region).  0 or a
 * positive errno. */
int sv_shlock_init(struct sv_shlock *l);

/* Tries taken while l is busy before sv_shlock_lock sleeps: a few
 * microseconds.  A robust mutex goes to sleep at once (glibc does not
 * spin on one), and the holders -- a progress thread answering a packet,
 * the application posting -- keep it for a microsecond or two: sleeping
 * costs the waiter a wake-up, two context switches, tens of
 * microseconds on a virtual machine. */
#define SV_SHLOCK_SPINS 64

/* Takes l.  Returns 0, or 1 when the previous holder died holding it (the
 * caller repairs the state l guards; the lock is held and consistent). */
static inline int sv_shlock_lock(struct sv_shlock *l)
{
	int r = pthread_mutex_trylock(&l->m);

	for (int i = 0; r == EBUSY && i < SV_SHLOCK_SPINS; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		r = pthread_mutex_trylock(&l->m);
	}
	if (r == EBUSY)
		r = pthread_mutex_lock(&l->m);
	if (r == EOWNERDEAD) {
		pthread_mutex_consistent(&l->m);
		return 1;
	}
	return 0;
}

static inline void sv_shlock_unlock(struct sv_shlock *l)
{
	pthread_mutex_unlock(&l->m);
}

/* ------------------------------------------------------------- CQ -- */

#define SV_CQ_ARM_ALL 1
#define SV_CQ_ARM_SOLICITED 2

/*
 * | field      | meaning                                   | written by   |
 * |------------|-------------------------------------------|--------------|
 * | h          | sv_shm_hdr                                | owner        |
 * | lock       | producers, arming, resize                 |              |
 * | max        | entries the region has room for           | owner        |
 * | cap        | entries in use (the CQ's cqe)             | owner (lock) |
 * | overflowed | a completion was lost (CQ_ERR raised)     | producers    |
 * | tail       | completions ever produced                 | producers    |
 * | head       | completions ever consumed                 | owner        |
 * | armed      | 0, SV_CQ_ARM_ALL or SV_CQ_ARM_SOLICITED   | owner/prod.  |
 * | entries    | max x struct ibv_wc at entries_off        | producers    |
 * | stamps_off | 0, or where max x uint64_t stamps start   | owner        |
 * | stamps     | CLOCK_MONOTONIC ns each entry was made at | producers    |
 *
 * A CQ created with a timestamp wc_flag (ibv_create_cq_ex) has stamps: the
 * producer reads the clock under the lock, so they never go backwards.
 */
struct sv_cq_shm {
	struct sv_shm_hdr h;
	struct sv_shlock lock;
	uint32_t max;
	uint32_t cap;
	uint32_t overflowed;
	uint32_t pad0;
	uint64_t entries_off;
	uint64_t stamps_off;
	uint8_t pad1[64 - 32];
	_Atomic uint64_t tail;
	uint8_t pad2[64 - 8];
	_Atomic uint64_t head;
	_Atomic uint32_t armed;
	uint8_t pad3[64 - 12];
};
static_assert(sizeof(struct sv_cq_shm) == 320, "cq shm layout");
static_assert(offsetof(struct sv_cq_shm, tail) == 192, "cq shm layout");
static_assert(offsetof(struct sv_cq_shm, head) == 256, "cq shm layout");

static inline struct ibv_wc *sv_cq_entry(struct sv_cq_shm *c, uint64_t i)
{
	return (struct ibv_wc *)((char *)c + c->entries_off) + (i % c->cap);
}

/* Entry i's stamp; only when stamps_off is set. */
static inline uint64_t *sv_cq_stamp(struct sv_cq_shm *c, uint64_t i)
{
	return (uint64_t *)((char *)c + c->stamps_off) + (i % c->cap);
}

/* --------------------------------------------------- receive queues -- */

/* A receive WQE slot (post_recv copies the WR's SGEs here). */
struct sv_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad;
	struct ibv_sge sge[]; /* max_sge entries */
};

/*
 * A ring of receive WQEs inside a region (a QP's or an SRQ's).
 * | field     | meaning                                      | written by |
 * |-----------|----------------------------------------------|------------|
 * | cap       | slots (power of two)                         | owner      |
 * | max_wr    | WQEs that may be posted at once (<= cap)     | owner      |
 * | max_sge   | SGEs of a slot                               | owner      |
 * | wqe_size  | bytes of a slot                              | owner      |
 * | slots_off | region offset of slot 0                      | owner      |
 * | tail      | WQEs ever posted                             | owner      |
 * | head      | WQEs ever taken                              | consumers  |
 */
struct sv_rq_shm {
	uint32_t cap;
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t wqe_size;
	uint64_t slots_off;
	_Atomic uint64_t tail;
	_Atomic uint64_t head;
	uint8_t pad[64 - 40];
};
static_assert(sizeof(struct sv_rq_shm) == 64, "rq layout");

static inline struct sv_recv_wqe *sv_rq_slot(void *region, struct sv_rq_shm *q,
					     uint64_t i)
{
	return (struct sv_recv_wqe *)((char *)region + q->slots_off +
				      (size_t)(i & (q->cap - 1)) * q->wqe_size);
}

/*
 * A shared receive queue.
 * | field  | meaning                                        | written by |
 * |--------|------------------------------------------------|------------|
 * | lock   | consumers, limit, resize                       |            |
 * | pd_id  | device-wide id of the SRQ's PD                 | owner      |
 * | limit  | armed limit (0: not armed)                     | owner/cons.|
 * | rq     | the ring                                       |            |
 */
struct sv_srq_shm {
	struct sv_shm_hdr h;
	struct sv_shlock lock;
	uint32_t pd_id;
	uint32_t limit;
	uint8_t pad[64 - 8];
	struct sv_rq_shm rq;
};
static_assert(sizeof(struct sv_srq_shm) == 256, "srq shm layout");

/* ------------------------------------------------------------- QP -- */

/* Bits of sv_qp_shm.events: what whoever ran the responder wants the
 * owner to do (sv_queue.c sv_qp_owner_events). */
enum {
	SV_QEV_FLUSH = 1 << 0,	    /* the QP went to ERR: flush the SQ */
	SV_QEV_COMM_EST = 1 << 1,   /* IBV_EVENT_COMM_EST */
	SV_QEV_ACCESS_ERR = 1 << 2, /* IBV_EVENT_QP_ACCESS_ERR */
	SV_QEV_REQ_ERR = 1 << 3,    /* IBV_EVENT_QP_REQ_ERR */
	SV_QEV_FATAL = 1 << 4,	    /* IBV_EVENT_QP_FATAL */
	SV_QEV_LAST_WQE = 1 << 5,   /* IBV_EVENT_QP_LAST_WQE_REACHED */
};

/* Responder flags (sv_qp_shm.rflags). */
enum {
	SV_RF_IN_SEND = 1 << 0,	  /* inside a multi-packet SEND */
	SV_RF_IN_WRITE = 1 << 1,  /* inside a multi-packet WRITE */
	SV_RF_UC_DROP = 1 << 2,	  /* UC: dropping the rest of a message */
	SV_RF_NAK_SENT = 1 << 3,  /* a sequence or RNR NAK is out */
	SV_RF_HAVE_RECV = 1 << 4, /* cur holds the receive being filled */
	SV_RF_COMM_EST = 1 << 5,  /* COMM_EST raised */
	SV_RF_LAST_WQE = 1 << 6,  /* LAST_WQE_REACHED raised */
};

/* An XRC TGT QP's address vector (struct ibv_ah_attr's global route):
 * any handle may bring the QP to RTR, and the process that serves it
 * routes its answers from here (src/engine/eng_qp.c, sv_engine_tgt_serve). */
struct sv_qp_av_shm {
	uint8_t dgid[16];
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t is_global;
	uint32_t set; /* 1: written */
	uint32_t pad;
};

/*
 * The responder side of a QP, which anyone delivering to it may run.
 * | field        | meaning                                   | written by |
 * |--------------|-------------------------------------------|------------|
 * | lock         | everything below but events               |            |
 * | qpn, type    | the QP                                    | owner      |
 * | state        | enum ibv_qp_state (the one truth)         | under lock |
 * | access       | qp_access_flags                           | owner      |
 * | qkey         | UD Q_Key                                  | owner      |
 * | pd_id        | device-wide id of the QP's PD             | owner      |
 * | rx_pd_id     | PD of the receive buffers (SRQ's or QP's) | owner      |
 * | mtu          | path MTU in bytes                         | owner      |
 * | dest_qpn     | RC/UC peer                                | owner      |
 * | min_rnr      | RNR NAK timer code                        | owner      |
 * | rcq_cookie   | cookie of the receive CQ's region         | owner      |
 * | srq_cookie   | cookie of the SRQ's region, 0: own queue  | owner      |
 * | epsn, msn    | expected PSN, message sequence number     | responder  |
 * | rflags       | SV_RF_*                                   | responder  |
 * | recv_off     | bytes written into cur                    | responder  |
 * | wr_va ...    | the WRITE in progress (packets)           | responder  |
 * | events       | SV_QEV_* for the owner (atomic)           | anyone     |
 * | xrcd_id      | XRC TGT: its domain (device wide); else 0 | owner      |
 * | rq           | the QP's own receive queue (no SRQ)       |            |
 * | cur_off      | region offset of cur (one WQE slot)       | owner      |
 * | rq_psn       | rq_psn as modify set it (the checker)     | owner      |
 * | sq_psn       | sq_psn as modify set it (the checker)     | owner      |
 * | max_rd_atomic | as modify set it (the checker)           | owner      |
 * | max_dest_rd_atomic | as modify set it (the checker)      | owner      |
 * | av           | XRC TGT: AV of the last modify with it    | any handle |
 */
struct sv_qp_shm {
	struct sv_shm_hdr h;
	struct sv_shlock lock;
	uint32_t qpn;
	uint32_t type;
	uint32_t state;
	uint32_t access;
	uint32_t qkey;
	uint32_t pd_id;
	uint32_t rx_pd_id;
	uint32_t mtu;
	uint32_t dest_qpn;
	uint32_t min_rnr;
	uint64_t rcq_cookie;
	uint64_t srq_cookie;
	uint32_t epsn;
	uint32_t msn;
	uint32_t rflags;
	uint32_t wr_rkey;
	uint64_t recv_off;
	uint64_t wr_va;
	uint32_t wr_left;
	uint32_t wr_total;
	_Atomic uint32_t events;
	uint32_t xrcd_id;
	uint64_t cur_off;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t pad1[6];
	struct sv_qp_av_shm av;
	struct sv_rq_shm rq;
};
static_assert(sizeof(struct sv_qp_shm) == 352, "qp shm layout");

static inline struct sv_recv_wqe *sv_qp_cur(struct sv_qp_shm *q)
{
	return (struct sv_recv_wqe *)((char *)q + q->cur_off);
}

#endif

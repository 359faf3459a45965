/* SPDX-License-Identifier: MIT */
/*
 * The lock order of the library (src/verbs and src/engine), stated here
 * and nowhere else, and the helpers that take the locks.
 *
 * A thread takes locks in increasing rank: it may take a lock only when
 * every lock it holds has a lower rank.  Two locks of one rank are never
 * held together -- no thread holds two QPs' responder locks, two SQs or
 * two CQs -- except where a call site says so and passes rank + 1 for the
 * second (none does today).  Locks that are only ever trylocked
 * (sv_inring.lock, eng->wire_rx_lock) have no rank: nobody waits for
 * them, so they cannot close a cycle.
 *
 *   rank              lock                         why here
 *   SV_LOCK_OBJ       ibv_qp/ibv_cq ->mutex        one modify, resize or
 *                                                  destroy at a time
 *   SV_LOCK_CTX       ibv_context->mutex           the context's lists
 *   SV_LOCK_ATTACH    eng->attach_lock (rwlock)    read by every engine
 *                                                  entry that uses rings and
 *                                                  links; written by detach
 *   SV_LOCK_SOCK      eng->sock_lock               one reader of the
 *                                                  daemon's messages (new
 *                                                  rings, peers gone):
 *                                                  the progress thread,
 *                                                  or a take of what
 *                                                  arrived
 *   SV_LOCK_QPTAB     eng->qp_lock (rwlock)        see below
 *   SV_LOCK_SQ        qp->sq_lock                  the requester and the
 *                                                  completer of one QP
 *   SV_LOCK_RQ_POST   qp->rq_post_lock,            the owner's posting side
 *                     srq->post_lock               of a receive queue
 *   SV_LOCK_CQ_POLL   cq->poll_lock                the owner's consumer
 *   SV_LOCK_RESP      qp->shm->lock                a QP's responder block
 *                                                  (shared memory, robust)
 *   SV_LOCK_SRQ       srq->shm->lock               consumers of an SRQ
 *   SV_LOCK_CQ        cq->shm->lock                producers into a CQ
 *   SV_LOCK_CHANNEL   sv_channel.lock              a completion channel's
 *                                                  pending list
 *   SV_LOCK_PEER      eng->peer_lock               views of other
 *                                                  processes' QPs (calls
 *                                                  the daemon on a miss)
 *   SV_LOCK_TX        link->tx_lock, wlink lock,   one producer into a
 *                     eng->cap_lock                ring, from reserve to
 *                                                  commit: the payload is
 *                                                  copied in meanwhile,
 *                                                  from another process's
 *                                                  memory too (rmem)
 *   SV_LOCK_RMEM      eng->rmem_lock               the rlinks list
 *   SV_LOCK_BOX       link->box_lock               one remote memory
 *                                                  request per link; its
 *                                                  wait serves ours
 *   SV_LOCK_WIRE      eng->wire_lock               the wire's making
 *   SV_LOCK_ENGINE    eng->lock                    attach state, links
 *                                                  list, object tables
 *   SV_LOCK_PORT      eng->port_lock, the wire's   copies and small tables
 *                     sock_lock
 *   SV_LOCK_ASYNC     eng->async_lock              the async event queue
 *
 * The order follows the data path.  A verb holds its object's mutex while
 * it calls into the engine.  A post holds its SQ while the requester
 * executes directly on the target's responder block, which takes the
 * target's receive (SRQ), then writes its CQ, which may queue a channel
 * event.  A packet is built in a ring record reserved on a link (TX) and
 * filled there, through the memory owner's engine when CMA is refused
 * (RMEM, BOX).  The engine-wide tables and queues come last, as short
 * critical sections reachable from anywhere on that path.  The daemon's
 * channel (src/common/sv_client.c) is taken under any of them and takes
 * nothing: a leaf outside this list (src/common does not link the
 * engine).  Outside the helpers too: engine.c's engine_lock (making the
 * one engine) and the verbs' own lists (device.c's device list, dp_obj.c's
 * live set, fork.c, memcheck.c), taken alone; the misuse checker's
 * registry and then its set of reports seen (check.c, check_post.c),
 * taken inside the verbs' hooks -- under sq_lock for a post -- and taking
 * none of the above; and src/rdmacm's locks, its own, above the verbs it
 * calls.
 *
 * eng->qp_lock is two things.  Read-held, it keeps the QP table and every
 * key looked up under it valid: the progress thread and the application
 * threads hold it while they execute packets, timers and remote memory
 * requests.  Taken for writing and let go at once, it is a barrier that
 * waits for every reader to finish: ibv_dereg_mr (sv_engine_mr_release:
 * no copy under a key checked before the dereg is still running) and
 * sv_engine_take_arrived (a drain in progress, its ACKs included).
 *
 * Its read side is also taken out of order, by threads that hold ranks
 * up to SV_LOCK_WIRE (sv_direct.c local_pin under sq_lock, a link lookup
 * under sq_lock, sv_rmem_serve while a box request waits).  That cannot
 * deadlock, and the checker allows exactly that, because:
 *   - the rwlock prefers readers (made so in engine.c init_locks): a
 *     reader waits only while a writer HOLDS it, never for a writer that
 *     merely waits, so a thread that already reads reads again at once;
 *   - a writer takes it holding nothing ranked SV_LOCK_QPTAB or above,
 *     and while holding it takes only ranks from SV_LOCK_ENGINE up
 *     (checked) and never waits for a QP's `busy` pin (engine.c waits for
 *     pins after letting go);
 *   - so the writer a reader waits for waits only for holders of
 *     SV_LOCK_ENGINE and above, which by the order never wait for what the
 *     reader holds (all of it ranked below SV_LOCK_ENGINE).
 *
 * Build with -DSV_LOCK_CHECK=1 (CMake option SV_LOCK_CHECK; on in the
 * sanitizer build of scripts/test.sh) and every helper below checks the
 * order at run time: each thread keeps the stack of locks it holds, and
 * taking one out of order aborts with both locks, their ranks and where
 * each was taken.  Without it the helpers are the plain calls.
 */
#ifndef SV_LOCK_H
#define SV_LOCK_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#include "sv_shm.h"

#ifndef SV_LOCK_CHECK
#define SV_LOCK_CHECK 0
#endif

enum sv_lock_rank {
	SV_LOCK_OBJ = 4, /* ibv_qp/ibv_cq ->mutex (src/verbs) */
	SV_LOCK_CTX = 6, /* ibv_context->mutex (src/verbs) */
	SV_LOCK_ATTACH = 10,
	SV_LOCK_SOCK = 15,
	SV_LOCK_QPTAB = 20,
	SV_LOCK_SQ = 30,
	SV_LOCK_RQ_POST = 40,
	SV_LOCK_CQ_POLL = 50,
	SV_LOCK_RESP = 60,
	SV_LOCK_SRQ = 70,
	SV_LOCK_CQ = 80,
	SV_LOCK_CHANNEL = 90,
	SV_LOCK_PEER = 100,
	SV_LOCK_TX = 105,
	SV_LOCK_RMEM = 110,
	SV_LOCK_BOX = 120,
	SV_LOCK_WIRE = 130,
	SV_LOCK_ENGINE = 140,
	SV_LOCK_PORT = 150,
	SV_LOCK_ASYNC = 170,
};

/* How a lock is taken (the checker's rules differ for qp_lock). */
enum sv_lock_how {
	SV_LOCK_EXCL,  /* a mutex, spinlock or shared mutex */
	SV_LOCK_READ,  /* an rwlock for reading */
	SV_LOCK_WRITE, /* an rwlock for writing */
	SV_LOCK_TRY_READ, /* an rwlock's read side, taken by a trylock: no
			     wait, so no order to check; held as READ */
};

#if SV_LOCK_CHECK
/* Checks that this thread may take lock l at rank r now (aborts with a
 * message naming both locks otherwise) and records it as held.  `what`
 * is the expression taken, `where` file:line. */
void sv_lock_note(const volatile void *l, enum sv_lock_rank r, enum sv_lock_how how,
		  const char *what, const char *where);
/* Records that this thread let go of lock l (aborts if it held none). */
void sv_lock_unnote(const volatile void *l, const char *what,
		    const char *where);
#define SV_LOCK_STR2(x) #x
#define SV_LOCK_STR(x) SV_LOCK_STR2(x)
#define SV_LOCK_HERE __FILE__ ":" SV_LOCK_STR(__LINE__)
#define SV_LOCK_NOTE(l, r, how) sv_lock_note((l), (r), (how), #l, SV_LOCK_HERE)
#define SV_LOCK_UNNOTE(l) sv_lock_unnote((l), #l, SV_LOCK_HERE)
/* Aborts unless this thread holds lock l: where a lock's data is
 * touched. */
void sv_lock_must_hold(const volatile void *l, const char *what,
		       const char *where);
#define SV_LOCK_HELD(l) sv_lock_must_hold((l), #l, SV_LOCK_HERE)
#else
#define SV_LOCK_NOTE(l, r, how) ((void)(r))
#define SV_LOCK_UNNOTE(l) ((void)0)
#define SV_LOCK_HELD(l) ((void)0)
#endif

/*
 * Takes a spinlock the way a small machine needs: a holder preempted by
 * us on our own CPU (the application, by the progress thread) releases
 * it only if we give the CPU back, so after a short spin we yield instead
 * of burning a whole time slice.  spin_ns: keep spinning that long first,
 * for a lock held across a system call (the wire's batch, held through
 * its sendmmsg, which on a veth runs the receiving namespace's whole UDP
 * receive: 5-25 us).  Its holder runs on the other CPU most of the time,
 * and on a machine where every CPU has a runnable thread sched_yield
 * puts the caller behind them for their whole slice, milliseconds.
 */
#define SV_SPIN_LONG_NS 20000u
static inline void sv_spin_take_for(pthread_spinlock_t *l, uint64_t spin_ns)
{
	uint64_t until = 0;

	for (unsigned i = 0; pthread_spin_trylock(l); i++) {
		if (i >= 64 && spin_ns && (i & 63) == 0) {
			struct timespec ts;
			uint64_t now;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			now = (uint64_t)ts.tv_sec * 1000000000u +
			      (uint64_t)ts.tv_nsec;
			if (!until)
				until = now + spin_ns;
			else if (now >= until)
				spin_ns = 0; /* spun enough: yield from now on */
		}
		if (i >= 64 && !spin_ns)
			sched_yield();
#if defined(__x86_64__) || defined(__i386__)
		else
			__builtin_ia32_pause();
#endif
	}
}

/* The helpers: l is the lock's address, r its rank (above).  The shared
 * mutex variant returns what sv_shlock_lock returns (1: the previous
 * holder died, repair what it guards). */
#define sv_lock_spin(l, r)                                                     \
	do {                                                                   \
		SV_LOCK_NOTE(l, r, SV_LOCK_EXCL);                              \
		sv_spin_take_for(l, 0);                                        \
	} while (0)
#define sv_lock_spin_long(l, r)                                                \
	do {                                                                   \
		SV_LOCK_NOTE(l, r, SV_LOCK_EXCL);                              \
		sv_spin_take_for(l, SV_SPIN_LONG_NS);                          \
	} while (0)
/* pthread_spin_trylock: 0 when taken. */
#define sv_trylock_spin(l, r)                                                  \
	({                                                                     \
		int sv_lock_r_ = pthread_spin_trylock(l);                      \
		if (!sv_lock_r_)                                               \
			SV_LOCK_NOTE(l, r, SV_LOCK_EXCL);                      \
		sv_lock_r_;                                                    \
	})
#define sv_unlock_spin(l)                                                      \
	do {                                                                   \
		SV_LOCK_UNNOTE(l);                                             \
		pthread_spin_unlock(l);                                        \
	} while (0)
#define sv_lock_mutex(l, r)                                                    \
	do {                                                                   \
		SV_LOCK_NOTE(l, r, SV_LOCK_EXCL);                              \
		pthread_mutex_lock(l);                                         \
	} while (0)
#define sv_unlock_mutex(l)                                                     \
	do {                                                                   \
		SV_LOCK_UNNOTE(l);                                             \
		pthread_mutex_unlock(l);                                       \
	} while (0)
#define sv_lock_read(l, r)                                                     \
	do {                                                                   \
		SV_LOCK_NOTE(l, r, SV_LOCK_READ);                              \
		pthread_rwlock_rdlock(l);                                      \
	} while (0)
#define sv_lock_write(l, r)                                                    \
	do {                                                                   \
		SV_LOCK_NOTE(l, r, SV_LOCK_WRITE);                             \
		pthread_rwlock_wrlock(l);                                      \
	} while (0)
#define sv_unlock_rw(l)                                                        \
	do {                                                                   \
		SV_LOCK_UNNOTE(l);                                             \
		pthread_rwlock_unlock(l);                                      \
	} while (0)
#define sv_lock_shm(l, r)                                                      \
	({                                                                     \
		SV_LOCK_NOTE(l, r, SV_LOCK_EXCL);                              \
		sv_shlock_lock(l);                                             \
	})
#define sv_unlock_shm(l)                                                       \
	do {                                                                   \
		SV_LOCK_UNNOTE(l);                                             \
		sv_shlock_unlock(l);                                           \
	} while (0)

/* The barrier use of an rwlock (qp_lock above): waits until no thread
 * reads it. */
/* pthread_rwlock_tryrdlock: 0 when taken. */
#define sv_trylock_read(l, r)                                                  \
	({                                                                     \
		int sv_lock_r_ = pthread_rwlock_tryrdlock(l);                  \
		if (!sv_lock_r_)                                               \
			SV_LOCK_NOTE(l, r, SV_LOCK_TRY_READ);                  \
		sv_lock_r_;                                                    \
	})

#define sv_lock_barrier(l, r)                                                  \
	do {                                                                   \
		sv_lock_write(l, r);                                           \
		sv_unlock_rw(l);                                               \
	} while (0)

#endif

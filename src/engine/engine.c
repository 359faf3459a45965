/* SPDX-License-Identifier: MIT */
/*
 * The engine: everything that moves bytes between QPs of processes on one
 * host (docs/architecture.md "Data path").  This file is its lifecycle:
 * attach and detach, MR holds, fork, and the QP and context hooks that
 * start or end it.  The QP and object tables and the other QP hooks
 * src/verbs calls (modify, post) are eng_qp.c; which way a work request
 * goes is decided in sv_path.c, with the tunables in sv_tune.h.  Links
 * are eng_link.c, the progress thread eng_progress.c (the rings it drains:
 * eng_inbound.c), remote memory eng_rmem.c, views of other processes' QPs
 * eng_peer.c, the shared queues sv_queue.c; the transport is sv_req.c
 * (requester), sv_direct.c (direct execution), sv_resp.c (responder),
 * sv_comp.c (completer); keys.c finds and moves the memory behind keys.
 *
 * Design
 * ------
 * The NIC model.  A NIC reads the WQEs an application posted and writes
 * completions into rings in host memory, and a one-sided operation needs
 * no CPU of its target.  Here the receive queues, SRQs and CQs are regions
 * of shared memory (sv_shm.h) that any engine delivering to the QP maps,
 * and each QP has a responder block there (its state, access flags, the
 * message in progress) behind a robust process-shared lock.
 *
 * Direct execution (sv_direct.c).  When the target QP is in this process,
 * or in another one whose memory CMA reaches (process_vm_readv/writev,
 * probed per peer), the initiator runs the target's responder itself: it
 * checks what the responder checks (QP state and access flags, Q_Key, the
 * rkey, its PD and bounds, the receive's lkeys) from the shared key table
 * and the target's block, moves the payload with one CMA call per
 * message, takes the posted receive and writes the completion into the
 * target's CQ.  RDMA WRITE and READ land without the target's CPU; SEND
 * lands in the posted receive.  Atomics run as CPU atomics on the owner's
 * memory (its engine executes them when the memory is another process's).
 * The message is done when the call returns: no ACK, and RC ordering
 * holds because one requester executes a QP's WQEs in order.
 *
 * Packets (the fallback, and the wire).  Where CMA is refused (Yama
 * ptrace_scope, a non-dumpable target), when SOFTVERBS_DIRECT=0, or with
 * fault injection, requests travel as IBTA packets on links (SPSC rings
 * per pair of engines, eng_link.c) and the target's own engine runs the
 * same responder on the same shared block.  Reliability (PSN, ACK/NAK,
 * retransmission, RNR) is real there, with a send window per QP.
 *
 * Attach.  A process's engine attaches to the daemon when its first QP is
 * added or its first MR is registered (before ibv_reg_mr returns: another
 * process may import the MR and use it at once, and only our engine can
 * serve its accesses when CMA is refused, and always its atomics).  It
 * detaches when it is no longer wanted -- no QP and no MR registered here
 * left in an open context -- but this is decided only when a QP goes or a
 * context closes, never in ibv_dereg_mr: a reg/dereg loop attaches once.
 * The MRs of a closed context live on while their ufile does (another
 * process may hold its cmd_fd, as in the kernel), so their holds last
 * until the daemon says the ufile is gone (SV_ENGINE_UFILE_GONE).
 * SV_OP_ENGINE_ATTACH gives the daemon our doorbell (an eventfd) and
 * returns an engine id, the engine socket and the key table memfd
 * (mapped read-only, kept for the life of the process).  When an engine
 * dies the daemon tells every other one (SV_ENGINE_PEER_GONE); links to it
 * are dead and the RC QPs using them fail their outstanding work with
 * IBV_WC_RETRY_EXC_ERR at once.
 *
 * Locks: their order, and why, is src/engine/sv_lock.h.
 */
#include "engine_int.h"
#include "sv_client.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "sv_sock.h"

static struct sv_engine *the_engine;
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* SOFTVERBS_DIRECT=0 sends everything as packets (tests, benchmarks of
 * the fallback); fault injection needs packets to lose. */
static int direct_on = -1;

int sv_direct_enabled(void)
{
	if (direct_on < 0) {
		const char *e = getenv("SOFTVERBS_DIRECT");

		direct_on = !(e && !strcmp(e, "0")) && !sv_fault_init();
	}
	return direct_on;
}

/* ------------------------------------------------ attach / detach -- */

static int map_keytab(struct sv_engine *eng, int fd, uint64_t size)
{
	const struct sv_keytab_hdr *h;
	void *p;

	if (eng->kt) {
		close(fd);
		return 0;
	}
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	h = p;
	if (size < sizeof(*h) || h->magic != SV_KEYTAB_MAGIC ||
	    h->version != SV_KEYTAB_VERSION || h->size != size ||
	    h->entry_size != sizeof(struct sv_key_entry) ||
	    h->entries_off < sizeof(*h) ||
	    (uint64_t)h->entries_off + (uint64_t)h->nentries * h->entry_size > size ||
	    h->port_off < sizeof(*h) ||
	    (uint64_t)h->port_off + sizeof(struct sv_keytab_port) > h->entries_off) {
		munmap(p, size);
		return -EPROTO;
	}
	eng->kt = h;
	eng->keys = (const struct sv_key_entry *)((const char *)p + h->entries_off);
	eng->port = (const struct sv_keytab_port *)((const char *)p + h->port_off);
	eng->nkeys = h->nentries;
	eng->kt_len = size;
	return 0;
}

/*
 * Starts the progress thread and returns once it runs its own code.  A
 * thread still being set up (TLS, a sanitizer's thread record) may hold an
 * allocator lock; a fork() in that window would hand the child a lock
 * nobody releases.  Called by attach and detach, which are serialised.
 * Returns 0 or a positive errno.
 */
static int start_thread(struct sv_engine *eng)
{
	int err;

	atomic_store(&eng->thread_tid, 0);
	err = pthread_create(&eng->thread, NULL, sv_progress_main, eng);
	if (err)
		return err;
	while (!atomic_load(&eng->thread_tid))
		sched_yield();
	return 0;
}

/* SOFTVERBS_PTRACE_PEERS=1: let any process of our uid use CMA on us
 * where Yama's ptrace_scope 1 would refuse it (docs/user-guide.md
 * "CMA and Yama"). */
static void allow_peers(void)
{
	const char *e = getenv("SOFTVERBS_PTRACE_PEERS");

	if (e && !strcmp(e, "1") &&
	    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0))
		sv_dbg("PR_SET_PTRACER: %s", strerror(errno));
}

/* Must hold eng->lock. */
int sv_eng_attach(struct sv_engine *eng)
{
	struct sv_engine_attach_rep rep;
	int rfds[2] = { -1, -1 }, err;
	struct epoll_event ev = { .events = EPOLLIN };
	struct sv_call c = { .op = SV_OP_ENGINE_ATTACH,
			     .instance = eng->instance,
			     .attach_fd = -1,
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = rfds,
			     .max_rfds = 2 };

	sv_fault_init();
	allow_peers();
	eng->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	eng->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	eng->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (eng->doorbell < 0 || eng->stopfd < 0 || eng->epfd < 0) {
		err = -errno;
		goto err_close;
	}
	c.fds = &eng->doorbell;
	c.nfds = 1;
	err = sv_call(&c);
	if (!err && (c.nrfds != 2 || c.rep_len != sizeof(rep)))
		err = -EPROTO;
	if (err)
		goto err_close;
	eng->sock = rfds[0];
	rfds[0] = -1;
	err = map_keytab(eng, rfds[1], rep.kt_size);
	rfds[1] = -1;
	if (err)
		goto err_close;
	fcntl(eng->sock, F_SETFL, O_NONBLOCK);
	eng->id = rep.engine_id;
	memcpy(eng->gid, rep.gid, 16);
	ev.data.fd = eng->doorbell;
	epoll_ctl(eng->epfd, EPOLL_CTL_ADD, eng->doorbell, &ev);
	ev.data.fd = eng->sock;
	epoll_ctl(eng->epfd, EPOLL_CTL_ADD, eng->sock, &ev);
	ev.data.fd = eng->stopfd;
	epoll_ctl(eng->epfd, EPOLL_CTL_ADD, eng->stopfd, &ev);
	atomic_store(&eng->stop, 0);
	atomic_store(&eng->device_gone, 0);
	eng->attached = 1;
	err = start_thread(eng);
	if (err) {
		err = -err;
		eng->attached = 0;
		goto err_close;
	}
	sv_lock_mutex(&eng->async_lock, SV_LOCK_ASYNC);
	eng->thread_running = 1;
	sv_unlock_mutex(&eng->async_lock);
	sv_dbg("engine %u attached (pid %d)", eng->id, (int)eng->pid);
	return 0;

err_close:
	sv_close_fds(rfds, 2);
	if (eng->sock >= 0)
		close(eng->sock);
	if (eng->doorbell >= 0)
		close(eng->doorbell);
	if (eng->stopfd >= 0)
		close(eng->stopfd);
	if (eng->epfd >= 0)
		close(eng->epfd);
	eng->sock = eng->doorbell = eng->stopfd = eng->epfd = -1;
	sv_err("cannot start the data path: %s", strerror(-err));
	return err;
}

/* Frees links, inbound rings and peer views; closes descriptors.  Must
 * hold attach_lock (write) or be the only thread (fork child). */
static void release_all(struct sv_engine *eng, int close_fds)
{
	unsigned nin = atomic_load(&eng->nin);

	while (eng->links || eng->rlinks) {
		struct sv_link *l = eng->links ? eng->links : eng->rlinks;

		if (l == eng->links)
			eng->links = l->next;
		else
			eng->rlinks = l->next;
		sv_link_free(l, close_fds);
	}
	for (unsigned i = 0; i < nin; i++) {
		if (eng->in[i]->map)
			munmap(eng->in[i]->map, eng->in[i]->map_len);
		free(eng->in[i]);
		eng->in[i] = NULL;
	}
	atomic_store(&eng->nin, 0);
	eng->loop = NULL;
	sv_wire_free(eng);
	sv_cap_free(eng);
	sv_peer_clear(eng);
	memset(eng->dcache, 0, sizeof(eng->dcache));
	memset(eng->nodirect, 0, sizeof(eng->nodirect));
	if (close_fds) {
		close(eng->sock);
		close(eng->doorbell);
		close(eng->stopfd);
		close(eng->epfd);
	}
	eng->sock = eng->doorbell = eng->stopfd = eng->epfd = -1;
	eng->attached = 0;
}

/*
 * Engine holds of registered memory: per context that registered an MR of
 * this process's memory, the MRs it still has (under eng->lock).  When
 * the context closes its record loses ctx (NULL) and lives until the
 * daemon destroys the ufile.
 */
struct mr_hold {
	struct mr_hold *next;
	struct ibv_context *ctx; /* NULL: closed, the ufile may live on */
	uint64_t instance;
	uint32_t ufile;
	unsigned long nmr;
};
static struct mr_hold *mr_holds;
static unsigned long mr_holds_total;
static int detaching; /* under eng->lock: one detach() at a time */

/* Must hold eng->lock.  What keeps the engine attached: QPs, handles of
 * XRC TGT QPs it may be asked to serve, or memory of ours another process
 * may reach. */
static int engine_wanted(const struct sv_engine *eng)
{
	return eng->nqps || eng->nxopen || mr_holds_total;
}

/* Must hold eng->lock. */
static struct mr_hold *hold_find(const struct ibv_context *ctx)
{
	struct mr_hold *h;

	for (h = mr_holds; h; h = h->next)
		if (h->ctx == ctx)
			return h;
	return NULL;
}

/* Must hold eng->lock.  ctx is closing: its MRs live on in the ufile,
 * but this process can no longer deregister them through ctx.  Another
 * record of ours for the same ufile (an open context, or one closed
 * before) takes its holds over; without one the record stays, ctx-less,
 * because another process may hold the ufile's cmd_fd and use the MRs:
 * the daemon's SV_ENGINE_UFILE_GONE ends it. */
static void hold_ctx_close(const struct ibv_context *ctx)
{
	struct mr_hold **pp, *h, *o;

	for (pp = &mr_holds; *pp && (*pp)->ctx != ctx;)
		pp = &(*pp)->next;
	h = *pp;
	if (!h)
		return;
	for (o = mr_holds; o; o = o->next)
		if (o != h && o->ufile == h->ufile &&
		    o->instance == h->instance)
			break;
	if (!o) {
		h->ctx = NULL;
		return;
	}
	*pp = h->next;
	o->nmr += h->nmr;
	free(h);
}

static void detach(struct sv_engine *eng);

static void *detach_main(void *arg)
{
	detach(arg);
	return NULL;
}

/* The daemon destroyed ufile `ufile`: the MRs our closed contexts left
 * there are gone, and with them perhaps the last reason to stay
 * attached.  Runs on the progress thread, which cannot join itself: a
 * short-lived thread detaches. */
void sv_holds_ufile_gone(struct sv_engine *eng, uint32_t ufile)
{
	struct mr_hold **pp = &mr_holds, *h;
	pthread_attr_t attr;
	pthread_t t;
	int last;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	while ((h = *pp)) {
		if (!h->ctx && h->ufile == ufile &&
		    h->instance == eng->instance) {
			*pp = h->next;
			mr_holds_total -= h->nmr;
			free(h);
			continue;
		}
		pp = &h->next;
	}
	last = eng->attached && !engine_wanted(eng) && !detaching;
	sv_unlock_mutex(&eng->lock);
	if (!last || pthread_attr_init(&attr))
		return;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, detach_main, eng))
		sv_warn("engine %u: cannot detach: %s", eng->id,
			strerror(errno));
	pthread_attr_destroy(&attr);
}

void sv_eng_detach(struct sv_engine *eng)
{
	detach(eng);
}

static void detach(struct sv_engine *eng)
{
	uint64_t one = 1;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	if (!eng->attached || engine_wanted(eng) || detaching) {
		sv_unlock_mutex(&eng->lock);
		return;
	}
	detaching = 1;
	atomic_store(&eng->stop, 1);
	if (write(eng->stopfd, &one, sizeof(one)) < 0)
		sv_dbg("stopfd: %s", strerror(errno));
	sv_lock_mutex(&eng->async_lock, SV_LOCK_ASYNC);
	eng->thread_running = 0;
	sv_unlock_mutex(&eng->async_lock);
	sv_unlock_mutex(&eng->lock);
	pthread_join(eng->thread, NULL);
	sv_eng_async_drain(eng);
	sv_wire_drain(eng);
	sv_lock_write(&eng->attach_lock, SV_LOCK_ATTACH);
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	if (!engine_wanted(eng)) {
		release_all(eng, 1);
		sv_dbg("engine %u detached", eng->id);
	} else {
		/* A QP or an MR came meanwhile: keep the links, restart the
		 * thread. */
		atomic_store(&eng->stop, 0);
		if (!start_thread(eng)) {
			sv_lock_mutex(&eng->async_lock, SV_LOCK_ASYNC);
			eng->thread_running = 1;
			sv_unlock_mutex(&eng->async_lock);
		}
	}
	detaching = 0;
	sv_unlock_mutex(&eng->lock);
	sv_unlock_rw(&eng->attach_lock);
}

static void init_locks(struct sv_engine *eng)
{
	pthread_mutex_init(&eng->lock, NULL);
	pthread_mutex_init(&eng->sock_lock, NULL);
	pthread_mutex_init(&eng->rmem_lock, NULL);
	pthread_mutex_init(&eng->async_lock, NULL);
	pthread_mutex_init(&eng->peer_lock, NULL);
	pthread_mutex_init(&eng->wire_lock, NULL);
	pthread_mutex_init(&eng->port_lock, NULL);
	pthread_mutex_init(&eng->wire_rx_lock, NULL);
	pthread_spin_init(&eng->cap_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_rwlock_init(&eng->attach_lock, NULL);
	/* Readers first, even over a waiting writer: the order of
	 * sv_lock.h rests on it (glibc's default, made explicit). */
	{
		pthread_rwlockattr_t a;

		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_READER_NP);
		pthread_rwlock_init(&eng->qp_lock, &a);
		pthread_rwlockattr_destroy(&a);
	}
}

static struct sv_engine *fork_held; /* the engine atfork_prepare locked */

/* A fork()ed child has its own engine: forget the parent's (its rings
 * and sockets are the parent's business). */
static void atfork_child(void)
{
	struct sv_engine *eng = the_engine;

	fork_held = NULL; /* its lock is made again below */
	pthread_mutex_init(&engine_lock, NULL);
	sv_memf_forget();
	if (!eng)
		return;
	init_locks(eng);
	if (eng->attached)
		release_all(eng, 1);
	sv_peer_clear(eng);
	eng->thread_running = 0;
	eng->pid = getpid();
	free(eng->qtab);
	eng->qtab = NULL;
	eng->qcap = eng->nqps = 0;
	eng->xopens = NULL; /* the parent's handles */
	eng->nxopen = 0;
	/* The parent's MRs are the parent's memory. */
	while (mr_holds) {
		struct mr_hold *h = mr_holds;

		mr_holds = h->next;
		free(h);
	}
	mr_holds_total = 0;
	detaching = 0;
	eng->async_head = NULL;
	eng->async_tail = &eng->async_head;
	atomic_store(&eng->work, 0);
}

/* fork() waits while a detach frees the engine's rings and links
 * (release_all under attach_lock, write): the child's copy would hold
 * pointers the parent freed a moment before, and free them again
 * (atfork_child).  The child re-makes the lock (init_locks). */
static void atfork_prepare(void)
{
	fork_held = __atomic_load_n(&the_engine, __ATOMIC_ACQUIRE);
	if (fork_held)
		pthread_rwlock_rdlock(&fork_held->attach_lock);
}

static void atfork_parent(void)
{
	if (fork_held)
		pthread_rwlock_unlock(&fork_held->attach_lock);
	fork_held = NULL;
}

/*
 * At exit: the ACKs the application's last poll kept, to leave with its
 * answer (sv_wire_hold_acks), leave now -- a NIC has sent them, and a
 * program that exits after its last completion without tearing down
 * would leave its peer's last SEND unacknowledged (RETRY_EXC_ERR there).
 * exit() runs this before the progress thread dies with the process.
 */
__attribute__((destructor)) static void flush_at_exit(void)
{
	struct sv_engine *eng = __atomic_load_n(&the_engine, __ATOMIC_ACQUIRE);

	if (!eng || !eng->attached ||
	    sv_trylock_read(&eng->attach_lock, SV_LOCK_ATTACH))
		return;
	if (eng->attached)
		sv_wire_flush_all(eng);
	sv_unlock_rw(&eng->attach_lock);
}

static void register_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

struct sv_engine *sv_engine_get(const struct sv_ctx_ref *cref)
{
	struct sv_engine *eng;

	pthread_once(&atfork_once, register_atfork);
	sv_tune_init(); /* SOFTVERBS_TUNE, before any engine runs */
	pthread_mutex_lock(&engine_lock);
	eng = the_engine;
	if (!eng) {
		eng = calloc(1, sizeof(*eng));
		if (!eng) {
			pthread_mutex_unlock(&engine_lock);
			errno = ENOMEM;
			return NULL;
		}
		init_locks(eng);
		eng->sock = eng->doorbell = eng->stopfd = eng->epfd = -1;
		eng->wire_sock = -1;
		eng->cap_db = -1;
		eng->async_tail = &eng->async_head;
		eng->pid = getpid();
		the_engine = eng;
	}
	/* The daemon instance the engine talks to: the newest context's. */
	if (cref && !eng->attached)
		eng->instance = cref->instance;
	pthread_mutex_unlock(&engine_lock);
	return eng;
}

/* ----------------------------------------------------- QP hooks -- */

int sv_engine_qp_add(struct sv_engine *eng, struct sv_qp *qp)
{
	int err = sv_tr_init(qp);

	if (err)
		return err;
	/* qp_lock before eng->lock (sv_lock.h): a reader of the table may
	 * wait for eng->lock, so its holder must never wait for readers. */
	sv_lock_write(&eng->qp_lock, SV_LOCK_QPTAB);
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	if (!eng->attached) {
		err = sv_eng_attach(eng);
		if (err) {
			sv_unlock_mutex(&eng->lock);
			sv_unlock_rw(&eng->qp_lock);
			sv_tr_free(qp);
			return err;
		}
	}
	err = sv_qtab_put(eng, qp->qpx.qp_base.qp_num, qp);
	sv_unlock_mutex(&eng->lock);
	sv_unlock_rw(&eng->qp_lock);
	if (err) {
		sv_tr_free(qp);
		detach(eng);
	} else {
		sv_fault_qp_added(qp);
	}
	return err;
}

void sv_engine_qp_del(struct sv_qp *qp)
{
	struct sv_engine *eng = qp->eng;
	int last;

	if (!eng || !qp->tr)
		return;
	sv_lock_write(&eng->qp_lock, SV_LOCK_QPTAB);
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE); /* nqps: engine_wanted */
	sv_qtab_del(eng, qp->qpx.qp_base.qp_num);
	/* (A TGT QP may be served by another engine from now on.) */
	if (eng->dcache[qp->qpx.qp_base.qp_num & 255].qpn == qp->qpx.qp_base.qp_num)
		eng->dcache[qp->qpx.qp_base.qp_num & 255].engine_id = 0;
	last = eng->nqps == 0;
	sv_unlock_mutex(&eng->lock);
	sv_unlock_rw(&eng->qp_lock);
	/* Another of our QPs may be executing on this one right now. */
	while (atomic_load(&qp->busy))
		sched_yield();
	/* Peers that mapped it stop delivering (the region goes dead when
	 * the caller releases it).  An XRC TGT QP's state is every handle's:
	 * it stays, and so does the region while ibv_open_qp handles live. */
	if (qp->type != IBV_QPT_XRC_RECV) {
		sv_lock_shm(&qp->shm->lock, SV_LOCK_RESP);
		__atomic_store_n(&qp->shm->state, IBV_QPS_RESET,
				 __ATOMIC_RELEASE);
		sv_unlock_shm(&qp->shm->lock);
	}
	sv_peer_put(tr_of(qp)->peer);
	sv_wire_link_free(tr_of(qp)->wlink);
	sv_tr_free(qp);
	if (last)
		detach(eng);
}

void sv_engine_ctx_close(struct ibv_context *ctx)
{
	struct sv_engine *eng = the_engine;
	int last;

	if (!eng)
		return;
	sv_engine_take_arrived(eng); /* for QPs still open on ctx */
	sv_engine_tgt_ctx_close(eng, ctx); /* its ibv_open_qp handles */
	/* One QP at a time out of the table; its pins are waited for and
	 * its state freed with no lock held (sv_lock.h: a writer of qp_lock
	 * never waits for a pin, whose holder may want eng->lock). */
	for (;;) {
		struct sv_qp *qp = NULL;

		sv_lock_write(&eng->qp_lock, SV_LOCK_QPTAB);
		for (uint32_t i = 0; i < eng->qcap && !qp; i++)
			if (eng->qtab[i].qp &&
			    eng->qtab[i].qp->qpx.qp_base.context == ctx) {
				qp = eng->qtab[i].qp;
				sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
				sv_qtab_del(eng, eng->qtab[i].qpn);
				sv_unlock_mutex(&eng->lock);
			}
		sv_unlock_rw(&eng->qp_lock);
		if (!qp)
			break;
		while (atomic_load(&qp->busy))
			sched_yield();
		sv_peer_put(tr_of(qp)->peer);
		sv_wire_link_free(tr_of(qp)->wlink);
		sv_tr_free(qp);
		if (qp->type == IBV_QPT_XRC_RECV)
			sv_engine_tgt_gone(qp); /* another context's handle */
	}
	sv_lock_write(&eng->qp_lock, SV_LOCK_QPTAB);
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	hold_ctx_close(ctx);
	last = !engine_wanted(eng);
	sv_unlock_mutex(&eng->lock);
	sv_unlock_rw(&eng->qp_lock);
	if (last)
		detach(eng);
}

int sv_engine_mr_hold(const struct sv_ctx_ref *cref)
{
	struct sv_engine *eng = sv_engine_get(cref);
	struct mr_hold *h;
	int err = 0;

	if (!eng)
		return -errno;
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	h = hold_find(cref->ctx);
	if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h) {
			sv_unlock_mutex(&eng->lock);
			return -ENOMEM;
		}
		h->ctx = cref->ctx;
		h->instance = cref->instance;
		h->ufile = cref->ufile;
		h->next = mr_holds;
		mr_holds = h;
	}
	if (!eng->attached)
		err = sv_eng_attach(eng);
	if (!err) {
		h->nmr++;
		mr_holds_total++;
	}
	sv_unlock_mutex(&eng->lock);
	return err;
}

void sv_engine_mr_release(const struct sv_ctx_ref *cref)
{
	struct sv_engine *eng = the_engine;
	struct mr_hold *h;

	if (!eng)
		return;
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	h = hold_find(cref->ctx);
	if (!h || !h->nmr) {
		/* Moved to another view of the ufile (rereg CHANGE_PD). */
		for (h = mr_holds; h; h = h->next)
			if (h->nmr && h->ufile == cref->ufile &&
			    h->instance == cref->instance)
				break;
	}
	if (h && h->nmr) {
		h->nmr--;
		mr_holds_total--;
	}
	sv_unlock_mutex(&eng->lock);
	/* What the engine's threads execute from rings, the port and the
	 * timers (responses being copied out of our memory among them), and
	 * the accesses to our memory we serve for other processes
	 * (eng_rmem.c), run with qp_lock read-held: once we had it for
	 * writing, every copy under a key looked up before the dereg is
	 * done. */
	sv_lock_write(&eng->qp_lock, SV_LOCK_QPTAB);
	sv_unlock_rw(&eng->qp_lock);
}

int sv_engine_key_check(const struct sv_ctx_ref *cref, uint32_t lkey,
			uint32_t pd_id, uint64_t va, uint64_t len,
			uint32_t access, void **local)
{
	struct sv_engine *eng = sv_engine_get(cref);
	struct sv_mem m;
	int err = 0;

	if (!eng)
		return -errno;
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	if (!eng->attached)
		err = sv_eng_attach(eng);
	sv_unlock_mutex(&eng->lock);
	if (err)
		return err;
	if (len > UINT64_MAX - va ||
	    sv_key_resolve(eng, lkey, pd_id, va, len, access, 0, 0, &m))
		return -EFAULT;
	*local = m.ptr;
	return 0;
}

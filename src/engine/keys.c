/* SPDX-License-Identifier: MIT */
/*
 * The memory behind lkeys and rkeys, checked when a WQE executes
 * (architecture.md "Checks at execution time"), and the copy engine moving
 * bytes between the ranges they name -- the part a NIC's DMA plays.  The key
 * table is the daemon's (read-only here, sv_keytab.h), so a rereg or
 * dereg that returned before this access is always seen.
 *
 * Where the bytes are:
 *   - an MR of this process: a pointer (addr + (va - iova));
 *   - a DM or dma-buf MR: the object's memfd, mapped once per object id;
 *   - an MR of another process ("Memory of another process" below).
 *
 * Memory of another process.  CMA (process_vm_readv/writev) where the
 * kernel allows it: one system call moves a whole message, every SGE of
 * both sides in one pair of iovec arrays (one small range: /proc/PID/mem,
 * cheaper per call, below).  Where it is refused (seccomp in
 * default Docker before 4.8, Yama ptrace_scope between unrelated
 * processes: EPERM/ENOSYS/EACCES), or when SOFTVERBS_NO_CMA=1 is set, the
 * owner's engine executes the access (sv_rmem_call).  Atomics always go to
 * the owner, which runs them as CPU atomics on its memory, so they are
 * atomic with respect to each other and to the owner's own engine.  The
 * owner gone, or without an engine: the access fails (an error
 * completion), never a hang.
 *
 * Memory unmapped after registration.  Nothing is pinned, so an
 * application may unmap registered memory and a peer may still name it.
 * A NIC then reports an error; so do we: CMA answers EFAULT, and a copy
 * in our own memory runs under a fault guard (a SIGSEGV/SIGBUS handler
 * that returns to the copy's caller when the fault hit inside it, and
 * passes every other fault on to whatever handler was there before).
 */
#include "engine_int.h"
#include "sv_client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* ------------------------------------------------------ fault guard -- */

/* volatile: the compiler knows memcpy touches neither, and would drop the
 * stores around it otherwise. */
static __thread sigjmp_buf *volatile fault_jb;
static __thread volatile uintptr_t fault_addr;
static struct sigaction old_segv, old_bus;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void pass_on(int sig, siginfo_t *si, void *uc)
{
	struct sigaction *old = sig == SIGSEGV ? &old_segv : &old_bus;

	if (old->sa_flags & SA_SIGINFO) {
		old->sa_sigaction(sig, si, uc);
		return;
	}
	if (old->sa_handler == SIG_IGN)
		return;
	if (old->sa_handler != SIG_DFL) {
		old->sa_handler(sig);
		return;
	}
	/* Default action: put it back and let the fault happen again. */
	signal(sig, SIG_DFL);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *jb = fault_jb;

	if (jb) {
		fault_jb = NULL;
		fault_addr = (uintptr_t)si->si_addr;
		siglongjmp(*jb, 1);
	}
	pass_on(sig, si, uc);
}

static void guard_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	/* NODEFER: we leave the handler by siglongjmp without restoring the
	 * mask, so the signal must not stay blocked. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
}

int sv_safe_copy(void *dst, const void *src, size_t n)
{
	sigjmp_buf jb;

	if (!n)
		return 0;
	pthread_once(&guard_once, guard_install);
	if (sigsetjmp(jb, 0))
		return -EFAULT;
	fault_jb = &jb;
	__asm__ __volatile__("" ::: "memory");
	memcpy(dst, src, n);
	__asm__ __volatile__("" ::: "memory");
	fault_jb = NULL;
	return 0;
}

/* A CPU atomic on our memory under the guard.  0 or -EFAULT. */
static int safe_atomic(uint64_t *p, uint32_t op, uint64_t comp, uint64_t swap,
		       uint64_t *orig)
{
	sigjmp_buf jb;

	pthread_once(&guard_once, guard_install);
	if (sigsetjmp(jb, 0))
		return -EFAULT;
	fault_jb = &jb;
	__asm__ __volatile__("" ::: "memory");
	if (op == SV_RMEM_CSWAP) {
		*orig = comp;
		__atomic_compare_exchange_n(p, orig, swap, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		*orig = __atomic_fetch_add(p, swap, __ATOMIC_SEQ_CST);
	}
	__asm__ __volatile__("" ::: "memory");
	fault_jb = NULL;
	return 0;
}

int sv_safe_atomic(uint64_t *p, uint32_t op, uint64_t comp, uint64_t swap,
		   uint64_t *orig)
{
	return safe_atomic(p, op, comp, swap, orig);
}

/* ------------------------------------------------------------- CMA -- */

/* CMA state: 0 unknown/allowed, 1 refused (or SOFTVERBS_NO_CMA). */
static atomic_int cma_refused = -1;

int sv_cma_off(void)
{
	int v = atomic_load_explicit(&cma_refused, memory_order_relaxed);

	if (v < 0) {
		const char *e = getenv("SOFTVERBS_NO_CMA");

		v = e && *e && strcmp(e, "0") ? 1 : 0;
		atomic_store(&cma_refused, v);
	}
	return v;
}

static int refused(int err)
{
	return err == EPERM || err == ENOSYS || err == EACCES;
}

int sv_cma_probe(pid_t pid, uint64_t va, uint32_t magic)
{
	uint32_t v = 0;
	struct iovec l = { .iov_base = &v, .iov_len = sizeof(v) };
	struct iovec r = { .iov_base = (void *)(uintptr_t)va, .iov_len = sizeof(v) };
	ssize_t n;

	if (sv_cma_off())
		return 0;
	n = process_vm_readv(pid, &l, 1, &r, 1, 0);
	if (n < 0 && refused(errno)) {
		sv_dbg("CMA to pid %d refused (%s): its memory goes through its "
		       "engine", (int)pid, strerror(errno));
		return 0;
	}
	return n == (ssize_t)sizeof(v) && v == magic;
}

/* --------------------------------------------------------------- keys -- */

static int read_entry(struct sv_engine *eng, uint32_t key,
		      struct sv_key_entry *e)
{
	uint32_t idx = key >> 8;

	if (!eng->keys || idx == 0 || idx >= eng->nkeys)
		return -1;
	if (sv_key_read(&eng->keys[idx], e))
		return -1;
	if (e->kind == SV_KEY_FREE || e->tag != (uint8_t)key)
		return -1;
	return 0;
}

/* The mapping of DM/dma-buf object obj_id under key (asks the daemon the
 * first time). */
static uint8_t *obj_map(struct sv_engine *eng, uint32_t key, uint64_t obj_id,
			uint64_t *len)
{
	struct sv_key_req req = { .key = key };
	struct sv_key_fd_rep rep;
	struct sv_objmap *m;
	struct sv_call c = { .op = SV_OP_KEY_FD,
			     .instance = eng->instance,
			     .attach_fd = -1,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = &rep,
			     .rep_cap = sizeof(rep) };
	int fd = -1;
	void *p;

	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	for (uint32_t i = 0; i < eng->nmaps; i++)
		if (eng->maps[i].obj_id == obj_id) {
			*len = eng->maps[i].len;
			p = eng->maps[i].base;
			sv_unlock_mutex(&eng->lock);
			return p;
		}
	sv_unlock_mutex(&eng->lock);

	c.rfds = &fd;
	c.max_rfds = 1;
	if (sv_call(&c) || c.nrfds != 1 || c.rep_len != sizeof(rep) ||
	    rep.obj_id != obj_id) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	p = mmap(NULL, rep.map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	sv_lock_mutex(&eng->lock, SV_LOCK_ENGINE);
	m = realloc(eng->maps, (eng->nmaps + 1) * sizeof(*m));
	if (!m) {
		sv_unlock_mutex(&eng->lock);
		munmap(p, rep.map_len);
		return NULL;
	}
	eng->maps = m;
	m[eng->nmaps].obj_id = obj_id;
	m[eng->nmaps].base = p;
	m[eng->nmaps].len = rep.map_len;
	eng->nmaps++;
	sv_unlock_mutex(&eng->lock);
	*len = rep.map_len;
	return p;
}

/* Translates [va, +len) of MR entry e into *out. */
static int mr_translate(struct sv_engine *eng, uint32_t key,
			const struct sv_key_entry *e, uint64_t va,
			uint64_t len, struct sv_mem *out)
{
	uint64_t off = e->addr + (va - e->iova);
	uint64_t maplen;
	uint8_t *base;

	memset(out, 0, sizeof(*out));
	out->key = key;
	out->eng = eng;
	switch (e->kind) {
	case SV_KEY_MR_USER:
		if ((pid_t)e->owner_pid == eng->pid) {
			out->ptr = (uint8_t *)(uintptr_t)off;
			return SV_KOK;
		}
		out->pid = (pid_t)e->owner_pid;
		out->raddr = off;
		return SV_KOK;
	case SV_KEY_MR_DM:
	case SV_KEY_MR_DMABUF:
		base = obj_map(eng, key, e->obj_id, &maplen);
		if (!base)
			return SV_KERR_OWNER;
		if (off > maplen || len > maplen - off)
			return SV_KERR_BOUNDS;
		out->ptr = base + off;
		return SV_KOK;
	default:
		return SV_KERR_KEY;
	}
}

/* sv_key_resolve's checks of key's entry e, and the translation. */
static int resolve_entry(struct sv_engine *eng, uint32_t key,
			 const struct sv_key_entry *e, uint32_t pd_id,
			 uint64_t va, uint64_t len, uint32_t access,
			 int is_rkey, uint32_t qpn, struct sv_mem *out)
{
	struct sv_key_entry mr;
	uint64_t mva;

	if (e->kind == SV_KEY_MW1 || e->kind == SV_KEY_MW2) {
		/* Windows are remote keys only (C10-xx), bound, of our PD;
		 * a type 2 window answers only the QP it is bound to. */
		if (!is_rkey || !(e->flags & SV_KEY_F_BOUND))
			return SV_KERR_KEY;
		if (e->pd_id != pd_id)
			return SV_KERR_PD;
		if (e->kind == SV_KEY_MW2 && e->bound_qpn != qpn)
			return SV_KERR_KEY;
		if ((e->access & access) != access)
			return SV_KERR_ACCESS;
		if (!sv_key_in_range(e, va, len))
			return SV_KERR_BOUNDS;
		/* Into the MR's iova space (zero-based windows start at 0). */
		mva = e->addr + (va - e->iova);
		if (read_entry(eng, e->mr_key, &mr))
			return SV_KERR_KEY;
		if (!sv_key_in_range(&mr, mva, len))
			return SV_KERR_BOUNDS;
		return mr_translate(eng, e->mr_key, &mr, mva, len, out);
	}
	if (e->pd_id != pd_id)
		return SV_KERR_PD;
	if ((e->access & access) != access)
		return SV_KERR_ACCESS;
	if (!sv_key_in_range(e, va, len))
		return SV_KERR_BOUNDS;
	return mr_translate(eng, key, e, va, len, out);
}

int sv_key_resolve(struct sv_engine *eng, uint32_t key, uint32_t pd_id,
		   uint64_t va, uint64_t len, uint32_t access, int is_rkey,
		   uint32_t qpn, struct sv_mem *out)
{
	struct sv_key_entry e;

	if (read_entry(eng, key, &e))
		return SV_KERR_KEY;
	return resolve_entry(eng, key, &e, pd_id, va, len, access, is_rkey,
			     qpn, out);
}

int sv_key_resolve_cached(struct sv_engine *eng, struct sv_key_cache *c,
			  uint32_t key, uint32_t pd_id, uint64_t va,
			  uint64_t len, uint32_t access, int is_rkey,
			  uint32_t qpn, struct sv_mem *out)
{
	uint32_t idx = key >> 8;

	/* The entry's seq is even and unchanged: so is the entry (the
	 * daemon makes it odd while it writes, sv_keytab.h). */
	if (c->key != key || idx >= eng->nkeys ||
	    atomic_load_explicit(&eng->keys[idx].seq, memory_order_acquire) !=
		    atomic_load_explicit(&c->e.seq, memory_order_relaxed)) {
		c->key = 0;
		if (read_entry(eng, key, &c->e))
			return SV_KERR_KEY;
		c->key = key;
	}
	return resolve_entry(eng, key, &c->e, pd_id, va, len, access, is_rkey,
			     qpn, out);
}

int sv_key_owned(struct sv_engine *eng, uint32_t key, uint64_t addr,
		 uint64_t len)
{
	struct sv_key_entry e;

	if (read_entry(eng, key, &e) || e.kind != SV_KEY_MR_USER ||
	    (pid_t)e.owner_pid != eng->pid)
		return 0;
	if (e.length == UINT64_MAX)
		return addr + len >= addr;
	return addr >= e.addr && len <= e.length && addr - e.addr <= e.length - len;
}

uint64_t sv_sge_total(const struct ibv_sge *sge, int nsge)
{
	uint64_t t = 0;

	for (int i = 0; i < nsge; i++)
		t += sge[i].length;
	return t;
}

int sv_sge_resolve(struct sv_engine *eng, const struct ibv_sge *sge, int nsge,
		   uint32_t pd_id, uint32_t access, uint64_t off, uint64_t n,
		   struct sv_data *out, struct sv_seg *segs, int maxseg)
{
	int k = 0;

	out->seg = segs;
	out->nseg = 0;
	out->len = 0;
	for (int i = 0; i < nsge && n; i++) {
		uint64_t take, sl = sge[i].length;
		int err;

		if (off >= sl) {
			off -= sl;
			continue;
		}
		if (k == maxseg)
			return SV_KERR_LEN;
		take = sl - off < n ? sl - off : n;
		err = sv_key_resolve(eng, sge[i].lkey, pd_id, sge[i].addr + off,
				     take, access, 0, 0, &segs[k].m);
		if (err)
			return err;
		segs[k++].len = take;
		out->len += take;
		n -= take;
		off = 0;
	}
	out->nseg = k;
	return n ? SV_KERR_LEN : SV_KOK;
}

/* ------------------------------------------------- the copy engine -- */

/* Through the owner's engine, in chunks (CMA refused or switched off). */
static int rmem(const struct sv_mem *m, uint64_t off, void *buf, size_t n,
		int write)
{
	uint8_t *b = buf;

	while (n) {
		uint32_t c = n > SV_RMEM_CHUNK ? SV_RMEM_CHUNK : (uint32_t)n;
		int err = sv_rmem_call(m->eng, m->pid,
				       write ? SV_RMEM_WRITE : SV_RMEM_READ,
				       m->key, m->raddr + off, b, c, 0, 0, NULL);

		if (err) {
			sv_dbg("pid %d: remote %s of %u bytes: %s", (int)m->pid,
			       write ? "write" : "read", c, strerror(-err));
			return -1;
		}
		b += c;
		off += c;
		n -= c;
	}
	return 0;
}

/*
 * A batch of copies between our memory and process pid, in one system
 * call: local[i] and remote[i] pair up in order.
 */
#define XB_MAX 64
struct xbatch {
	pid_t pid;
	int write; /* 1: local -> remote */
	int n;
	uint64_t bytes;
	struct iovec local[XB_MAX], remote[XB_MAX];
	/* Where each remote range came from, for the owner fallback. */
	const struct sv_mem *rm[XB_MAX];
	uint64_t roff[XB_MAX];
};

/* Which side of a failed CMA batch faulted: the local one when its first
 * byte not copied is not readable (write) / writable (read) here. */
static int local_side_bad(const struct xbatch *b, uint64_t done)
{
	for (int i = 0; i < b->n; i++) {
		uint8_t *p = b->local[i].iov_base, tmp;

		if (done >= b->local[i].iov_len) {
			done -= b->local[i].iov_len;
			continue;
		}
		p += done;
		if (sv_safe_copy(&tmp, p, 1))
			return 1;
		return !b->write && sv_safe_copy(p, &tmp, 1);
	}
	return 0;
}

/*
 * One small range through /proc/PID/mem.  A pwrite/pread there costs
 * ~250 ns less than process_vm_writev/readv on this kind of machine (the
 * ptrace access check is made once, when the file is opened, not on every
 * call); from about 16 KiB on the file is slower (it copies page by page
 * through a bounce page), so only one range of at most MEMF_MAX bytes goes
 * there.  The kernel allows the file exactly where it allows CMA.  Whatever
 * is not copied whole -- the process gone or exec'd (its file then names
 * the old memory and copies nothing), a fault, a refusal -- goes on to CMA,
 * which says why.
 *
 * The fds are per thread, so closing one never races with another
 * thread's use of it: at most MEMF_SLOTS per thread and MEMF_ALL per
 * process (beyond that, CMA), opened close-on-exec, closed when the thread
 * exits and when a copy through one fails.  Every one is also listed in
 * memf_all, so that a fork's child closes them all at once, whichever
 * thread opened them (sv_memf_forget).
 */
#define MEMF_SLOTS 4
#define MEMF_ALL 64
#define MEMF_MAX 8192
#define MEMF_NONE (-2) /* no file for this pid (refused, or too many) */
static __thread struct memf {
	pid_t pid[MEMF_SLOTS];
	int fd[MEMF_SLOTS];
	unsigned next;
	int keyed;
	unsigned forks; /* memf_forks when these were opened */
} memf;
static atomic_int memf_all[MEMF_ALL]; /* fd + 1, 0: free */
static atomic_uint memf_forks; /* forks this process came out of */
static pthread_key_t memf_key;
static pthread_once_t memf_once = PTHREAD_ONCE_INIT;

/* Lists fd in memf_all: 0, or -1 when the list is full. */
static int memf_list(int fd)
{
	for (int i = 0; i < MEMF_ALL; i++) {
		int free_ = 0;

		if (atomic_compare_exchange_strong(&memf_all[i], &free_, fd + 1))
			return 0;
	}
	return -1;
}

static void memf_drop(int fd)
{
	for (int i = 0; i < MEMF_ALL; i++) {
		int was = fd + 1;

		if (atomic_compare_exchange_strong(&memf_all[i], &was, 0))
			break;
	}
	close(fd);
}

/* c's slots, forgotten when they were opened before a fork: the fork's
 * child closed those fds, and their numbers may name other files now. */
static void memf_current(struct memf *c)
{
	unsigned forks = atomic_load_explicit(&memf_forks, memory_order_relaxed);

	if (c->forks != forks) {
		memset(c->pid, 0, sizeof(c->pid));
		c->forks = forks;
	}
}

static void memf_close(struct memf *c)
{
	memf_current(c);
	for (int i = 0; i < MEMF_SLOTS; i++) {
		if (c->pid[i] && c->fd[i] >= 0)
			memf_drop(c->fd[i]);
		c->pid[i] = 0;
	}
}

static void memf_thread_exit(void *c)
{
	memf_close(c);
}

static void memf_key_make(void)
{
	if (pthread_key_create(&memf_key, memf_thread_exit))
		memf_key = (pthread_key_t)-1;
}

/* In the child of a fork (one thread, no locks to take): closes every
 * listed fd.  It touches no thread-local data, which may allocate: the
 * forking thread forgets its slots when it next looks (memf_current). */
void sv_memf_forget(void)
{
	for (int i = 0; i < MEMF_ALL; i++) {
		int v = atomic_exchange(&memf_all[i], 0);

		if (v > 0)
			close(v - 1);
	}
	atomic_fetch_add_explicit(&memf_forks, 1, memory_order_relaxed);
}

/* This thread's fd for pid's memory, opened on first use; -1: use CMA. */
static int memf_get(pid_t pid, int *slot)
{
	char path[32];
	int i, fd;

	memf_current(&memf);
	for (i = 0; i < MEMF_SLOTS; i++) {
		if (memf.pid[i] == pid) {
			*slot = i;
			return memf.fd[i] >= 0 ? memf.fd[i] : -1;
		}
	}
	if (!memf.keyed) {
		pthread_once(&memf_once, memf_key_make);
		if (memf_key == (pthread_key_t)-1 ||
		    pthread_setspecific(memf_key, &memf))
			return -1;
		memf.keyed = 1;
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0 && memf_list(fd)) {
		close(fd); /* MEMF_ALL open already: CMA for this pid */
		fd = -1;
	}
	for (i = 0; i < MEMF_SLOTS && memf.pid[i]; i++)
		;
	if (i == MEMF_SLOTS) { /* all taken: one goes, round robin */
		i = (int)(memf.next++ % MEMF_SLOTS);
		if (memf.fd[i] >= 0)
			memf_drop(memf.fd[i]);
	}
	memf.pid[i] = pid;
	memf.fd[i] = fd >= 0 ? fd : MEMF_NONE;
	*slot = i;
	return fd;
}

/* 1 when b (one range, small) was copied whole through /proc/PID/mem. */
static int memf_copy(struct xbatch *b)
{
	int slot, fd = memf_get(b->pid, &slot);
	off_t at = (off_t)(uintptr_t)b->remote[0].iov_base;
	size_t n = b->local[0].iov_len;
	ssize_t r;

	if (fd < 0)
		return 0;
	r = b->write ? pwrite(fd, b->local[0].iov_base, n, at) :
		       pread(fd, b->local[0].iov_base, n, at);
	if (r == (ssize_t)n)
		return 1;
	memf_drop(fd);
	memf.pid[slot] = 0;
	return 0;
}

/* Runs b; 0 or the SV_XERR_* of the side that failed. */
static int xbatch_flush(struct xbatch *b)
{
	uint64_t done = 0;
	int err = 0;

	if (!b->n)
		return 0;
	if (!sv_cma_off()) {
		if (b->n == 1 && b->bytes <= MEMF_MAX && memf_copy(b))
			done = b->bytes;
		while (done < b->bytes) {
			ssize_t r;
			struct iovec l[XB_MAX], rv[XB_MAX];
			int nl = 0;
			uint64_t skip = done;

			/* Resume after a partial copy (a signal, or the
			 * kernel's own limit per call). */
			for (int i = 0; i < b->n; i++) {
				uint64_t len = b->local[i].iov_len;

				if (skip >= len) {
					skip -= len;
					continue;
				}
				l[nl].iov_base = (char *)b->local[i].iov_base + skip;
				l[nl].iov_len = len - skip;
				rv[nl].iov_base = (char *)b->remote[i].iov_base + skip;
				rv[nl].iov_len = len - skip;
				nl++;
				skip = 0;
			}
			r = b->write ? process_vm_writev(b->pid, l, nl, rv, nl, 0) :
				       process_vm_readv(b->pid, l, nl, rv, nl, 0);
			if (r > 0) {
				done += (uint64_t)r;
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno == ESRCH) {
				b->n = 0;
				return SV_XERR_GONE |
				       (b->write ? SV_XERR_DST : SV_XERR_SRC);
			}
			if (r < 0 && refused(errno)) {
				sv_dbg("CMA refused (%s): remote memory goes "
				       "through the owner's engine",
				       strerror(errno));
				atomic_store(&cma_refused, 1);
				break;
			}
			err = local_side_bad(b, done) ?
				      (b->write ? SV_XERR_SRC : SV_XERR_DST) :
				      (b->write ? SV_XERR_DST : SV_XERR_SRC);
			b->n = 0;
			return err;
		}
		if (done == b->bytes) {
			b->n = 0;
			b->bytes = 0;
			return 0;
		}
	}
	/* The owner's engine does it (what is left). */
	for (int i = 0; i < b->n && !err; i++) {
		uint64_t len = b->local[i].iov_len;

		if (done >= len) {
			done -= len;
			continue;
		}
		if (!b->rm[i]->eng ||
		    rmem(b->rm[i], b->roff[i] + done,
			 (char *)b->local[i].iov_base + done, len - done,
			 b->write))
			err = SV_XERR_GONE | (b->write ? SV_XERR_DST : SV_XERR_SRC);
		done = 0;
	}
	b->n = 0;
	b->bytes = 0;
	return err;
}

/* Adds a copy between local memory lp and remote range rm + roff. */
static int xbatch_add(struct xbatch *b, int write, uint8_t *lp,
		      const struct sv_mem *rm, uint64_t roff, uint64_t n)
{
	int err = 0;

	if (b->n && (b->pid != rm->pid || b->write != write || b->n == XB_MAX))
		err = xbatch_flush(b);
	if (err)
		return err;
	b->pid = rm->pid;
	b->write = write;
	b->local[b->n] = (struct iovec){ lp, n };
	b->remote[b->n] = (struct iovec){ (void *)(uintptr_t)(rm->raddr + roff), n };
	b->rm[b->n] = rm;
	b->roff[b->n] = roff;
	b->n++;
	b->bytes += n;
	return 0;
}

/* Both sides in other processes (an imported MR's memory into a peer's):
 * through a bounce buffer here. */
static int xfer_remote_remote(const struct sv_mem *d, uint64_t doff,
			      const struct sv_mem *s, uint64_t soff, uint64_t n)
{
	static __thread uint8_t *bounce;
	struct xbatch b;
	int err;

	if (!bounce && !(bounce = malloc(SV_RMEM_CHUNK)))
		return SV_XERR_DST;
	while (n) {
		uint64_t c = n > SV_RMEM_CHUNK ? SV_RMEM_CHUNK : n;

		b.n = 0;
		b.bytes = 0;
		err = xbatch_add(&b, 0, bounce, s, soff, c);
		if (!err)
			err = xbatch_flush(&b);
		if (err)
			return SV_XERR_SRC | (err & SV_XERR_GONE);
		err = xbatch_add(&b, 1, bounce, d, doff, c);
		if (!err)
			err = xbatch_flush(&b);
		if (err)
			return SV_XERR_DST | (err & SV_XERR_GONE);
		doff += c;
		soff += c;
		n -= c;
	}
	return 0;
}

/* n bytes within this process, guarded: 0, or the side that faulted. */
static int local_copy(uint8_t *to, const uint8_t *from, uint64_t n)
{
	uintptr_t a;

	if (!sv_safe_copy(to, from, n))
		return 0;
	a = fault_addr;
	return a >= (uintptr_t)from && a < (uintptr_t)(from + n) ? SV_XERR_SRC :
								  SV_XERR_DST;
}

static int xfer_batched(const struct sv_data *dst, uint64_t dst_off,
			const struct sv_data *src, uint64_t src_off, uint64_t n);

/* Both ends one range of this process (a packet's payload, most small
 * messages): a plain guarded copy, without xfer_batched's 6 KiB batch. */
int sv_xfer(const struct sv_data *dst, uint64_t dst_off,
	    const struct sv_data *src, uint64_t src_off, uint64_t n)
{
	const struct sv_seg *d = dst->seg, *s = src->seg;

	if (dst->nseg >= 1 && src->nseg >= 1 && d->m.ptr && s->m.ptr &&
	    dst_off <= d->len && n <= d->len - dst_off &&
	    src_off <= s->len && n <= s->len - src_off)
		return local_copy(d->m.ptr + dst_off, s->m.ptr + src_off, n);
	return xfer_batched(dst, dst_off, src, src_off, n);
}

static int __attribute__((noinline))
xfer_batched(const struct sv_data *dst, uint64_t dst_off,
	     const struct sv_data *src, uint64_t src_off, uint64_t n)
{
	struct xbatch b;
	int i = 0, j = 0, err = 0;
	uint64_t di = dst_off, sj = src_off;

	b.n = 0;
	b.bytes = 0;
	while (i < dst->nseg && di >= dst->seg[i].len)
		di -= dst->seg[i++].len;
	while (j < src->nseg && sj >= src->seg[j].len)
		sj -= src->seg[j++].len;
	while (n && !err) {
		const struct sv_seg *d, *s;
		uint64_t c;

		if (i >= dst->nseg)
			return SV_XERR_DST;
		if (j >= src->nseg)
			return SV_XERR_SRC;
		d = &dst->seg[i];
		s = &src->seg[j];
		c = d->len - di;
		if (s->len - sj < c)
			c = s->len - sj;
		if (n < c)
			c = n;
		if (d->m.ptr && s->m.ptr) {
			err = xbatch_flush(&b);
			if (!err)
				err = local_copy(d->m.ptr + di, s->m.ptr + sj, c);
		} else if (s->m.ptr) {
			err = xbatch_add(&b, 1, s->m.ptr + sj, &d->m, di, c);
		} else if (d->m.ptr) {
			err = xbatch_add(&b, 0, d->m.ptr + di, &s->m, sj, c);
		} else {
			err = xbatch_flush(&b);
			if (!err)
				err = xfer_remote_remote(&d->m, di, &s->m, sj, c);
		}
		n -= c;
		di += c;
		sj += c;
		if (di == d->len) {
			i++;
			di = 0;
		}
		if (sj == s->len) {
			j++;
			sj = 0;
		}
	}
	if (!err)
		err = xbatch_flush(&b);
	return err;
}

int sv_mem_atomic(const struct sv_mem *m, uint32_t op, uint64_t comp,
		  uint64_t swap, uint64_t *orig)
{
	if (m->ptr)
		return safe_atomic((uint64_t *)(void *)m->ptr, op, comp, swap,
				   orig) ? -1 : 0;
	if (!m->eng)
		return -1;
	return sv_rmem_call(m->eng, m->pid, op, m->key, m->raddr, NULL, 8, comp,
			    swap, orig) ? -1 : 0;
}

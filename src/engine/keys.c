/* SPDX-License-Identifier: MIT */
/*
 * The memory behind lkeys and rkeys, checked when a WQE executes
 * (architecture.md "Checks at execution time"), and the copy engine moving
 * bytes between the ranges they name -- the part a NIC's DMA plays (its
 * code is eng_xfer.c; this file resolves keys, guards local copies and
 * knows whether CMA is allowed).  The key
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
#include "sv_roce.h"

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

uintptr_t sv_fault_addr(void)
{
	return fault_addr;
}

/* Runs stmt under the guard: a SIGSEGV or SIGBUS in it makes the
 * calling function return -EFAULT.  (sigsetjmp must be in the frame that
 * runs stmt, hence a macro, not a function.) */
#define GUARDED(stmt)                                                          \
	do {                                                                   \
		sigjmp_buf jb_;                                                \
                                                                               \
		pthread_once(&guard_once, guard_install);                      \
		if (sigsetjmp(jb_, 0))                                         \
			return -EFAULT;                                        \
		fault_jb = &jb_;                                               \
		__asm__ __volatile__("" ::: "memory");                         \
		stmt;                                                          \
		__asm__ __volatile__("" ::: "memory");                         \
		fault_jb = NULL;                                               \
	} while (0)

int sv_safe_copy(void *dst, const void *src, size_t n)
{
	if (n)
		GUARDED(memcpy(dst, src, n));
	return 0;
}

int sv_safe_crc(uint32_t *crc, const void *p, size_t n)
{
	if (n)
		GUARDED(*crc = sv_crc32_le(*crc, p, n));
	return 0;
}

int sv_safe_probe(const void *p, size_t n)
{
	const volatile uint8_t *b = p;

	/* A byte of each page, and the last. */
	if (n)
		GUARDED({
			for (size_t o = 0; o < n;
			     o += 4096 - ((uintptr_t)(b + o) & 4095))
				(void)b[o];
			(void)b[n - 1];
		});
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

int sv_cma_refused_err(int err)
{
	return refused(err);
}

void sv_cma_refuse(void)
{
	atomic_store(&cma_refused, 1);
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
	case SV_KEY_MR_NULL:
		out->null = 1;
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
	/* A null MR has an lkey only (ibv_alloc_null_mr(3)). */
	if (e->kind == SV_KEY_MR_NULL && is_rkey)
		return SV_KERR_KEY;
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

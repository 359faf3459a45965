/* SPDX-License-Identifier: MIT */
/*
 * The memory behind lkeys and rkeys, checked when a WQE executes (DESIGN.md
 * "Checks at execution time").  The key table is the daemon's (read-only
 * here, sv_keytab.h), so a rereg or dereg that returned before this access
 * is always seen.
 *
 * Where the bytes are:
 *   - an MR of this process: a pointer (addr + (va - iova));
 *   - a DM or dma-buf MR: the object's memfd, mapped once per object id;
 *   - an MR of another process ("Memory of another process" below).
 *
 * Memory of another process.  CMA (process_vm_readv/writev) is the fast
 * path where the kernel allows it.  Where it is refused (seccomp in
 * default Docker, Yama ptrace_scope: EPERM/ENOSYS/EACCES), or when
 * SOFTVERBS_NO_CMA=1 is set, the owner's engine executes the access
 * (sv_rmem_call: a request box next to our ring to it).  Atomics always
 * go to the owner, which runs them as CPU atomics on its memory, so they
 * are atomic with respect to each other and to the owner's own engine.
 * The owner gone, or without an engine: the access fails (an error
 * completion), never a hang.
 */
#include "engine_int.h"
#include "sv_client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* CMA state: 0 unknown/allowed, 1 refused (or SOFTVERBS_NO_CMA). */
static atomic_int cma_refused = -1;

static int cma_off(void)
{
	int v = atomic_load_explicit(&cma_refused, memory_order_relaxed);

	if (v < 0) {
		const char *e = getenv("SOFTVERBS_NO_CMA");

		v = e && *e && strcmp(e, "0") ? 1 : 0;
		atomic_store(&cma_refused, v);
	}
	return v;
}

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

	pthread_mutex_lock(&eng->lock);
	for (uint32_t i = 0; i < eng->nmaps; i++)
		if (eng->maps[i].obj_id == obj_id) {
			*len = eng->maps[i].len;
			p = eng->maps[i].base;
			pthread_mutex_unlock(&eng->lock);
			return p;
		}
	pthread_mutex_unlock(&eng->lock);

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
	pthread_mutex_lock(&eng->lock);
	m = realloc(eng->maps, (eng->nmaps + 1) * sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&eng->lock);
		munmap(p, rep.map_len);
		return NULL;
	}
	eng->maps = m;
	m[eng->nmaps].obj_id = obj_id;
	m[eng->nmaps].base = p;
	m[eng->nmaps].len = rep.map_len;
	eng->nmaps++;
	pthread_mutex_unlock(&eng->lock);
	*len = rep.map_len;
	return p;
}

static int in_range(const struct sv_key_entry *e, uint64_t va, uint64_t len)
{
	if (e->length == UINT64_MAX)
		return va + len >= va;
	return va >= e->iova && len <= e->length &&
	       va - e->iova <= e->length - len;
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

int sv_key_resolve(struct sv_engine *eng, uint32_t key, uint32_t pd_id,
		   uint64_t va, uint64_t len, uint32_t access, int is_rkey,
		   uint32_t qpn, struct sv_mem *out)
{
	struct sv_key_entry e, mr;
	uint64_t mva;

	if (read_entry(eng, key, &e))
		return SV_KERR_KEY;
	if (e.kind == SV_KEY_MW1 || e.kind == SV_KEY_MW2) {
		/* Windows are remote keys only (C10-xx), bound, of our PD;
		 * a type 2 window answers only the QP it is bound to. */
		if (!is_rkey || !(e.flags & SV_KEY_F_BOUND))
			return SV_KERR_KEY;
		if (e.pd_id != pd_id)
			return SV_KERR_PD;
		if (e.kind == SV_KEY_MW2 && e.bound_qpn != qpn)
			return SV_KERR_KEY;
		if ((e.access & access) != access)
			return SV_KERR_ACCESS;
		if (!in_range(&e, va, len))
			return SV_KERR_BOUNDS;
		/* Into the MR's iova space (zero-based windows start at 0). */
		mva = e.addr + (va - e.iova);
		if (read_entry(eng, e.mr_key, &mr))
			return SV_KERR_KEY;
		if (!in_range(&mr, mva, len))
			return SV_KERR_BOUNDS;
		return mr_translate(eng, e.mr_key, &mr, mva, len, out);
	}
	if (e.pd_id != pd_id)
		return SV_KERR_PD;
	if ((e.access & access) != access)
		return SV_KERR_ACCESS;
	if (!in_range(&e, va, len))
		return SV_KERR_BOUNDS;
	return mr_translate(eng, key, &e, va, len, out);
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

/* Through the owner's engine, in chunks. */
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

static int cma(const struct sv_mem *m, uint64_t off, void *buf, size_t n,
	       int write)
{
	struct iovec l = { .iov_base = buf, .iov_len = n };
	struct iovec r = { .iov_base = (void *)(uintptr_t)(m->raddr + off),
			   .iov_len = n };
	ssize_t done;

	if (!n)
		return 0;
	if (cma_off())
		return m->eng ? rmem(m, off, buf, n, write) : -1;
	done = write ? process_vm_writev(m->pid, &l, 1, &r, 1, 0) :
		       process_vm_readv(m->pid, &l, 1, &r, 1, 0);
	if (done == (ssize_t)n)
		return 0;
	if (done < 0 && (errno == EPERM || errno == ENOSYS || errno == EACCES)) {
		/* Refused for good (seccomp, Yama): the owner does it. */
		sv_dbg("CMA refused (%s): remote memory goes through the "
		       "owner's engine", strerror(errno));
		atomic_store(&cma_refused, 1);
		return m->eng ? rmem(m, off, buf, n, write) : -1;
	}
	sv_dbg("pid %d: %s of %zu bytes failed: %s", (int)m->pid,
	       write ? "process_vm_writev" : "process_vm_readv", n,
	       done < 0 ? strerror(errno) : "short");
	return -1;
}

int sv_mem_atomic(const struct sv_mem *m, uint32_t op, uint64_t comp,
		  uint64_t swap, uint64_t *orig)
{
	if (m->ptr) {
		uint64_t *p = (uint64_t *)(void *)m->ptr;

		if (op == SV_RMEM_CSWAP) {
			*orig = comp;
			__atomic_compare_exchange_n(p, orig, swap, 0,
						    __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
		} else {
			*orig = __atomic_fetch_add(p, swap, __ATOMIC_SEQ_CST);
		}
		return 0;
	}
	if (!m->eng)
		return -1;
	return sv_rmem_call(m->eng, m->pid, op, m->key, m->raddr, NULL, 8, comp,
			    swap, orig) ? -1 : 0;
}

int sv_mem_write(const struct sv_mem *m, uint64_t off, const void *src,
		 size_t n)
{
	if (m->ptr) {
		memcpy(m->ptr + off, src, n);
		return 0;
	}
	return cma(m, off, (void *)src, n, 1);
}

int sv_mem_read(const struct sv_mem *m, uint64_t off, void *dst, size_t n)
{
	if (m->ptr) {
		memcpy(dst, m->ptr + off, n);
		return 0;
	}
	return cma(m, off, dst, n, 0);
}

uint64_t sv_sge_total(const struct ibv_sge *sge, int nsge)
{
	uint64_t t = 0;

	for (int i = 0; i < nsge; i++)
		t += sge[i].length;
	return t;
}

int sv_sge_copy(struct sv_engine *eng, const struct ibv_sge *sge, int nsge,
		uint32_t pd_id, uint64_t off, void *buf, size_t n, int to_sge)
{
	uint8_t *b = buf;

	for (int i = 0; i < nsge && n; i++) {
		uint64_t take, sl = sge[i].length;
		struct sv_mem m;
		int err;

		if (off >= sl) {
			off -= sl;
			continue;
		}
		take = sl - off < n ? sl - off : n;
		err = sv_key_resolve(eng, sge[i].lkey, pd_id, sge[i].addr + off,
				     take, to_sge ? IBV_ACCESS_LOCAL_WRITE : 0,
				     0, 0, &m);
		if (err)
			return err;
		if (to_sge ? sv_mem_write(&m, 0, b, take) :
			     sv_mem_read(&m, 0, b, take))
			return SV_KERR_OWNER;
		b += take;
		n -= take;
		off = 0;
	}
	return n ? -1 : SV_KOK;
}

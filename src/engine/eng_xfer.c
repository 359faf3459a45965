/* SPDX-License-Identifier: MIT */
/*
 * The copy engine: moves bytes between the ranges keys name (keys.c says
 * where the bytes are and why: this process's memory under the fault
 * guard, another process's through CMA in batches, or through its owner's
 * engine when CMA is refused), and runs atomics on them.
 */
#include "engine_int.h"
#include "sv_client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

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
 * less than process_vm_writev/readv on this kind of machine (the ptrace
 * access check is made once, when the file is opened, not on every call):
 * measured on the VM we test on, 1.8 against 2.9 us for 4 KiB, 2.3
 * against 3.0 for 8256 bytes (a UCX segment), 2.9 against 3.3 for 16 KiB;
 * at 32 KiB the file is slower (4.3 against 4.1: it copies page by page
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
#define MEMF_MAX 16384
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
			if (r < 0 && sv_cma_refused_err(errno)) {
				sv_dbg("CMA refused (%s): remote memory goes "
				       "through the owner's engine",
				       strerror(errno));
				sv_cma_refuse();
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
	a = sv_fault_addr();
	return a >= (uintptr_t)from && a < (uintptr_t)(from + n) ? SV_XERR_SRC :
								  SV_XERR_DST;
}

/* What a null MR reads as (SV_KEY_MR_NULL). */
static const uint8_t zeros[4096];

/* n zero bytes into d from doff: the bytes a null MR's lkey gives. */
static int zero_fill(struct xbatch *b, const struct sv_mem *d, uint64_t doff,
		     uint64_t n)
{
	int err = 0;

	if (d->ptr)
		err = xbatch_flush(b);
	while (n && !err) {
		uint64_t c = n < sizeof(zeros) ? n : sizeof(zeros);

		if (d->ptr)
			err = local_copy(d->ptr + doff, zeros, c);
		else
			err = xbatch_add(b, 1, (uint8_t *)(uintptr_t)zeros, d,
					 doff, c);
		doff += c;
		n -= c;
	}
	return err;
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
		if (d->m.null) {
			/* A null MR's lkey: the bytes are dropped. */
		} else if (s->m.null) {
			err = zero_fill(&b, &d->m, di, c);
		} else if (d->m.ptr && s->m.ptr) {
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
		return sv_safe_atomic((uint64_t *)(void *)m->ptr, op, comp, swap,
				   orig) ? -1 : 0;
	if (!m->eng || m->null)
		return -1;
	return sv_rmem_call(m->eng, m->pid, op, m->key, m->raddr, NULL, 8, comp,
			    swap, orig) ? -1 : 0;
}

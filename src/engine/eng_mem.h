/* SPDX-License-Identifier: MIT */
/*
 * The engine's memory behind keys and its copy engine (keys.c): key
 * resolution, the ranges a message side names, moving bytes between
 * them.  Part of engine_int.h, which includes it where these
 * declarations belong; include engine_int.h, not this file.
 */
#ifndef SV_ENG_MEM_H
#define SV_ENG_MEM_H

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
	pid_t pid;    /* else: memory of process pid at raddr, */
	int null;     /* or, non-zero, a null MR's: writes dropped, reads 0 */
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
/* Reads a byte of every page of [p, p + n): 0, or -EFAULT when one is
 * not mapped readable. */
int sv_safe_probe(const void *p, size_t n);
/* *crc = sv_crc32_le(*crc, p, n), as safe: 0 or -EFAULT. */
int sv_safe_crc(uint32_t *crc, const void *p, size_t n);
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

/* keys.c, for the copy engine (eng_xfer.c): where the last guarded copy
 * of this thread faulted; whether a CMA error means CMA is refused here
 * (EPERM, ENOSYS, EACCES); remembering that it is. */
uintptr_t sv_fault_addr(void);
int sv_cma_refused_err(int err);
void sv_cma_refuse(void);

#endif

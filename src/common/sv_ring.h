/* SPDX-License-Identifier: MIT */
/*
 * A single-producer single-consumer ring of variable-size records in shared
 * memory (one direction of a link between two engines; docs/architecture.md
 * "Progress").  Header only.
 *
 * Region (a memfd the producer creates and both map read-write):
 *   | offset | what                                                     |
 *   |--------|----------------------------------------------------------|
 *   | 0      | struct sv_ring_hdr: identity with armed and spin, then   |
 *   |        | tail (producer's cache line), then head (consumer's)     |
 *   | 192    | data: data_size bytes, a power of two                    |
 *
 * Who owns what:
 *   - tail: bytes ever produced.  Written by the producer only (release),
 *     read by the consumer (acquire).
 *   - head: bytes ever consumed.  Written by the consumer only (release),
 *     read by the producer (acquire).
 *   - armed: written by the consumer: 1 = "I am going to sleep, ring my
 *     doorbell", 0 = "I am polling".  The producer reads it after
 *     publishing tail (both sides put a seq_cst fence between their store
 *     and their load, so one of them always sees the other).
 *   - spin: written by the consumer: 1 = "a thread of mine polls this ring
 *     without waiting for anything else", so any record is taken at once,
 *     also one no application completion follows.  A hint, never needed
 *     for correctness: a producer that ignores it loses nothing.
 * armed and spin change seldom, and the producer reads armed after every
 * commit: they share the identity's cache line, not head's, which the
 * consumer writes after every record.
 * Neither side trusts what the other wrote: each keeps its own index in
 * private memory and bounds-checks the other's (a peer that scribbles on
 * the ring can only garble its own traffic).
 *
 * Records: an 8-byte header {len, type} and len bytes, padded to 8.  A
 * record never wraps: when it does not fit before the end of data the
 * producer fills the rest with one SV_REC_PAD record.
 */
#ifndef SV_RING_H
#define SV_RING_H

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SV_RING_MAGIC 0x31475253u /* "SRG1" */
#define SV_RING_VERSION 2
#define SV_RING_DATA_OFF 192
#define SV_REC_PAD 0xffffu
#define SV_RING_AHEAD 1024	 /* producer: lines asked for ahead (bytes) */
#define SV_RING_READ_AHEAD 2048 /* consumer: the same, of published ones */

/*
 * | field     | meaning                                  | written by |
 * |-----------|------------------------------------------|------------|
 * | magic     | SV_RING_MAGIC                            | producer   |
 * | version   | SV_RING_VERSION                          | producer   |
 * | size      | bytes of the region                      | producer   |
 * | owner_pid | producer's pid                           | producer   |
 * | data_size | bytes of data (power of two)             | producer   |
 * | tail      | bytes produced                           | producer   |
 * | head      | bytes consumed                           | consumer   |
 * | armed     | consumer sleeps: ring the doorbell       | consumer   |
 * | spin      | consumer's thread polls this ring now    | consumer   |
 */
struct sv_ring_hdr {
	uint32_t magic;
	uint32_t version;
	uint64_t size;
	uint32_t owner_pid;
	uint32_t data_size;
	_Atomic uint32_t armed;
	_Atomic uint32_t spin;
	uint8_t pad0[64 - 32];
	_Atomic uint64_t tail;
	uint8_t pad1[64 - 8];
	_Atomic uint64_t head;
	uint8_t pad2[64 - 8];
};
static_assert(sizeof(struct sv_ring_hdr) == SV_RING_DATA_OFF, "ring layout");
static_assert(offsetof(struct sv_ring_hdr, tail) == 64, "ring layout");
static_assert(offsetof(struct sv_ring_hdr, head) == 128, "ring layout");

struct sv_rec_hdr {
	uint32_t len;  /* payload bytes */
	uint32_t type; /* user's record type, or SV_REC_PAD */
};

#define SV_REC_ALIGN(n) (((n) + 7u) & ~(size_t)7u)

/* Producer side: private copies of the indices. */
struct sv_ring_prod {
	struct sv_ring_hdr *h;
	uint8_t *data;
	uint64_t mask;
	uint64_t tail;	     /* ours: the truth */
	uint64_t head_cache; /* last head read from the consumer */
	uint64_t pending;    /* tail of reserved, not yet committed records */
};

/* Consumer side. */
struct sv_ring_cons {
	struct sv_ring_hdr *h;
	uint8_t *data;
	uint64_t mask;
	uint64_t head; /* ours: the truth */
	uint64_t size;
};

/*
 * The data's cache lines move between the two CPUs on every lap: the
 * consumer last read the line a producer writes next, and a record's line
 * comes to the consumer when it reads it.  Each move costs the latency
 * between the CPUs (hundreds of ns on a VM whose vCPUs sit far apart), and
 * a locked instruction after a store waits for the store's line, so a
 * producer that takes a lock per record would pay one whole move per
 * record.  Both sides ask for the lines ahead instead, so the moves
 * overlap: the producer for writing (prefetchw, a hint: never a fault, a
 * no-op where not supported), the consumer for reading, only as far as
 * the producer published (a line asked for before it is written would be
 * taken from the producer while it writes).
 */
static inline void sv_prefetch_w(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

/* Formats a fresh region of `size` bytes (data = size - header, which
 * must be a power of two). */
static inline void sv_ring_init(struct sv_ring_hdr *h, uint64_t size,
				uint32_t pid)
{
	h->magic = SV_RING_MAGIC;
	h->version = SV_RING_VERSION;
	h->size = size;
	h->owner_pid = pid;
	h->data_size = (uint32_t)(size - SV_RING_DATA_OFF);
	atomic_store(&h->tail, 0);
	atomic_store(&h->head, 0);
	atomic_store(&h->armed, 0);
	atomic_store(&h->spin, 0);
}

static inline void sv_ring_prod_init(struct sv_ring_prod *p,
				     struct sv_ring_hdr *h)
{
	p->h = h;
	p->data = (uint8_t *)h + SV_RING_DATA_OFF;
	p->mask = h->data_size - 1;
	p->tail = p->pending = 0;
	p->head_cache = 0;
}

/*
 * Checks a region a peer made (its size as mapped) and prepares to consume
 * it.  Returns 0 or -1 when the header does not describe this region.
 */
static inline int sv_ring_cons_init(struct sv_ring_cons *c,
				    struct sv_ring_hdr *h, uint64_t mapped)
{
	uint64_t ds = mapped - SV_RING_DATA_OFF;

	if (mapped <= SV_RING_DATA_OFF || h->magic != SV_RING_MAGIC ||
	    h->version != SV_RING_VERSION || h->size != mapped ||
	    h->data_size != ds || (ds & (ds - 1)) || ds < 4096)
		return -1;
	c->h = h;
	c->data = (uint8_t *)h + SV_RING_DATA_OFF;
	c->mask = ds - 1;
	c->size = ds;
	c->head = 0;
	return 0;
}

/*
 * Reserves a record of len payload bytes.  Returns where the payload goes,
 * or NULL when the ring has no room (or the consumer's head is garbage).
 * Several reservations may precede one sv_ring_commit.
 */
static inline void *sv_ring_reserve(struct sv_ring_prod *p, uint32_t len,
				    uint32_t type)
{
	uint64_t size = p->mask + 1;
	uint64_t need = sizeof(struct sv_rec_hdr) + SV_REC_ALIGN(len);
	uint64_t off = p->pending & p->mask;
	uint64_t to_end = size - off;
	uint64_t total = need + (to_end < need ? to_end : 0);
	struct sv_rec_hdr *r;

	if (need > size / 2)
		return NULL;
	if (p->pending + total - p->head_cache > size) {
		uint64_t head = atomic_load_explicit(&p->h->head,
						     memory_order_acquire);

		/* A head behind the old one or beyond our tail is a lie. */
		if (head < p->head_cache || head > p->tail)
			return NULL;
		p->head_cache = head;
		if (p->pending + total - head > size)
			return NULL;
	}
	if (to_end < need) {
		r = (struct sv_rec_hdr *)(p->data + off);
		r->len = (uint32_t)(to_end - sizeof(*r));
		r->type = SV_REC_PAD;
		p->pending += to_end;
		off = 0;
	}
	r = (struct sv_rec_hdr *)(p->data + off);
	r->len = len;
	r->type = type;
	p->pending += need;
	sv_prefetch_w(p->data + ((p->pending + SV_RING_AHEAD) & p->mask));
	return r + 1;
}

/* Drops the reservations not yet committed. */
static inline void sv_ring_abort(struct sv_ring_prod *p)
{
	p->pending = p->tail;
}

/*
 * Publishes the reserved records.  Returns nonzero when the consumer is
 * armed (asleep): the caller rings its doorbell.
 */
static inline int sv_ring_commit(struct sv_ring_prod *p)
{
	if (p->pending == p->tail)
		return 0;
	p->tail = p->pending;
	atomic_store_explicit(&p->h->tail, p->tail, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&p->h->armed, memory_order_relaxed) != 0;
}

/*
 * The oldest record: 1 with *type, *payload, *len set; 0 when the ring is
 * empty; -1 when the producer wrote something impossible (the link is then
 * broken: the caller stops reading it).
 */
static inline int sv_ring_peek(struct sv_ring_cons *c, uint32_t *type,
			       const void **payload, uint32_t *len)
{
	for (;;) {
		uint64_t tail = atomic_load_explicit(&c->h->tail,
						     memory_order_acquire);
		uint64_t off = c->head & c->mask;
		struct sv_rec_hdr r;

		if (tail == c->head)
			return 0;
		if (tail < c->head || tail - c->head > c->size ||
		    tail - c->head < sizeof(r))
			return -1;
		r = *(volatile struct sv_rec_hdr *)(c->data + off);
		if (sizeof(r) + (uint64_t)r.len > c->size - off ||
		    sizeof(r) + SV_REC_ALIGN((uint64_t)r.len) > tail - c->head)
			return -1;
		if (r.type == SV_REC_PAD) {
			c->head += sizeof(r) + SV_REC_ALIGN((uint64_t)r.len);
			continue;
		}
		*type = r.type;
		*len = r.len;
		*payload = c->data + off + sizeof(r);
		return 1;
	}
}

/* Consumes the record sv_ring_peek returned (length len). */
static inline void sv_ring_pop(struct sv_ring_cons *c, uint32_t len)
{
	c->head += sizeof(struct sv_rec_hdr) + SV_REC_ALIGN((uint64_t)len);
	atomic_store_explicit(&c->h->head, c->head, memory_order_release);
}

/* Asks for the lines of what is published and not yet read, up to
 * SV_RING_READ_AHEAD bytes: a run of records is read with its misses
 * overlapped, not one after the other (each record's place follows from
 * the one before). */
static inline void sv_ring_prefetch(const struct sv_ring_cons *c)
{
	uint64_t tail = atomic_load_explicit(&c->h->tail, memory_order_relaxed);
	uint64_t o = c->head & ~(uint64_t)63;

	if (tail - c->head > c->size)
		return; /* garbage: sv_ring_peek says so */
	for (; o < tail && o < c->head + SV_RING_READ_AHEAD; o += 64)
		__builtin_prefetch(c->data + (o & c->mask), 0, 3);
}

/* Tells the producer to ring the doorbell from now on.  Returns nonzero
 * when records arrived meanwhile (then do not sleep). */
static inline int sv_ring_arm(struct sv_ring_cons *c)
{
	atomic_store_explicit(&c->h->armed, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&c->h->tail, memory_order_relaxed) !=
	       c->head;
}

static inline void sv_ring_disarm(struct sv_ring_cons *c)
{
	atomic_store_explicit(&c->h->armed, 0, memory_order_relaxed);
}

/* The consumer's thread polls the ring (on = 1) or stops polling. */
static inline void sv_ring_set_spin(struct sv_ring_cons *c, int on)
{
	atomic_store_explicit(&c->h->spin, on ? 1u : 0u, memory_order_relaxed);
}

/* The consumer's thread polls the ring now: a record is taken at once,
 * whatever it is. */
static inline int sv_ring_peer_spins(const struct sv_ring_prod *p)
{
	return atomic_load_explicit(&p->h->spin, memory_order_relaxed) != 0 &&
	       !atomic_load_explicit(&p->h->armed, memory_order_relaxed);
}

#endif

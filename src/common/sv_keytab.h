/* SPDX-License-Identifier: MIT */
/*
 * The key table: the daemon's published view of every lkey/rkey, shared
 * read-only with the engines (docs/architecture.md "Checks at execution
 * time").
 *
 * One memfd, written only by softverbsd (src/daemon/keytab.c), mapped
 * read-only by every engine (src/engine/keys.c).  A key is
 * index << 8 | tag: entry `index` describes it when the entry's tag equals
 * the key's low byte and its kind is not SV_KEY_FREE.
 *
 * Region:
 *   | offset      | what                                   |
 *   |-------------|----------------------------------------|
 *   | 0           | struct sv_keytab_hdr (64 bytes)        |
 *   | port_off    | struct sv_keytab_port (port 1)         |
 *   | entries_off | nentries x struct sv_key_entry         |
 *
 * Readers use the seqlock: read seq (retry while odd), copy the entry,
 * read seq again (retry when it changed).  The daemon makes seq odd, writes
 * the fields, makes it even (release).  The daemon publishes before it
 * replies to reg/rereg/dereg/bind/invalidate, so a verb that returned is in
 * force for every engine.
 */
#ifndef SV_KEYTAB_H
#define SV_KEYTAB_H

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sv_param.h"

#define SV_KEYTAB_MAGIC 0x31544b53u /* "SKT1" */
#define SV_KEYTAB_VERSION 2

/* MR indices 1..SV_MAX_MR (mr.c), window indices after them. */
#define SV_KEYTAB_MW_BASE (SV_MAX_MR + 1)
#define SV_KEYTAB_ENTRIES (SV_KEYTAB_MW_BASE + SV_MAX_MW)

/*
 * | field       | meaning                                              |
 * |-------------|------------------------------------------------------|
 * | magic       | SV_KEYTAB_MAGIC                                      |
 * | version     | SV_KEYTAB_VERSION                                    |
 * | size        | bytes of the whole region                            |
 * | owner_pid   | the daemon                                           |
 * | entry_size  | sizeof(struct sv_key_entry)                          |
 * | nentries    | entries; a key index >= nentries is invalid           |
 * | entries_off | offset of entry 0                                    |
 * | instance    | daemon instance (sv_hello_rep.instance)              |
 * | port_off    | offset of struct sv_keytab_port                      |
 * | capture     | capture sessions running (`softverbs capture`): an   |
 * |             | engine copies its packets to the daemon only while  |
 * |             | nonzero, so capture costs one load when none runs   |
 */
struct sv_keytab_hdr {
	uint32_t magic;
	uint32_t version;
	uint64_t size;
	uint32_t owner_pid;
	uint32_t entry_size;
	uint32_t nentries;
	uint32_t entries_off;
	uint64_t instance;
	uint32_t port_off;
	_Atomic uint32_t capture;
	uint8_t reserved[16];
};
static_assert(sizeof(struct sv_keytab_hdr) == 64, "keytab header layout");
static_assert(offsetof(struct sv_keytab_hdr, capture) == 44, "keytab header");

#define SV_KEYTAB_GIDS 32 /* == SV_GID_TBL_LEN */

/*
 * One slot of port 1's GID table (struct sv_keytab_port).
 *
 * | field   | meaning                                          |
 * |---------|--------------------------------------------------|
 * | raw     | the GID (an IPv4 address as ::ffff:a.b.c.d)      |
 * | ifindex | the GID's interface; 0: the slot is empty        |
 * | mtu     | that interface's MTU in bytes (0: not known)     |
 */
struct sv_keytab_gid {
	uint8_t raw[16];
	uint32_t ifindex;
	uint32_t mtu;
};

/*
 * Port 1 as the engines route by it: the GID table (stable slots, as the
 * kernel's: a removed address leaves its slot empty) and the MTU the wire
 * allows.  Written by the daemon (daemon/port.c) whenever the namespace's
 * addresses or links change it, under the same seqlock as the entries
 * (sv_port_read); read it with sv_port_gid_local and sv_port_mtu_bytes.
 *
 * | field      | meaning                                                |
 * |------------|--------------------------------------------------------|
 * | seq        | seqlock: odd while the daemon writes                   |
 * | active_mtu | enum ibv_mtu: the largest IB MTU the interfaces carry  |
 * | gen        | bumped at every change of the block (GIDs, MTUs)       |
 * | ngids      | slots up to the last one used, holes included          |
 * | gid        | the slots (struct sv_keytab_gid); empty ones zero      |
 */
struct sv_keytab_port {
	_Atomic uint32_t seq;
	uint32_t active_mtu;
	uint32_t gen;
	uint32_t ngids;
	struct sv_keytab_gid gid[SV_KEYTAB_GIDS];
};

enum sv_key_kind {
	SV_KEY_FREE = 0,
	SV_KEY_MR_USER,	  /* memory of owner_pid at addr */
	SV_KEY_MR_DM,	  /* addr = offset in the DM memfd (obj_id) */
	SV_KEY_MR_DMABUF, /* addr = offset in the dma-buf/memfd (obj_id) */
	SV_KEY_MW1,	  /* memory window type 1 */
	SV_KEY_MW2,	  /* memory window type 2 */
	SV_KEY_MR_NULL,	  /* ibv_alloc_null_mr: an lkey only; writes are
			     dropped, reads give zeros */
};

#define SV_KEY_F_BOUND 1u /* window: bound to mr_key over [iova, +length) */

/*
 * | field     | meaning                                                  |
 * |-----------|----------------------------------------------------------|
 * | seq       | seqlock: odd while the daemon writes                      |
 * | tag       | low byte of the key that names this entry now             |
 * | kind      | enum sv_key_kind                                          |
 * | flags     | SV_KEY_F_*                                                |
 * | access    | enum ibv_access_flags in force                            |
 * | pd_id     | device-wide id of the PD                                  |
 * | owner_pid | process whose memory addr is (MR_USER), else the creator  |
 * | bound_qpn | MW2: the QP it is bound to                                |
 * | addr      | MR_USER: VA in owner; DM/DMABUF: offset in the object     |
 * | iova      | first address the key accepts                             |
 * | length    | bytes accepted from iova (UINT64_MAX: implicit ODP)       |
 * | obj_id    | DM/DMABUF: serial of the memory object (SV_OP_KEY_FD)     |
 * | mr_key    | bound window: the MR under it                             |
 */
struct sv_key_entry {
	_Atomic uint32_t seq;
	uint8_t tag;
	uint8_t kind;
	uint16_t flags;
	uint32_t access;
	uint32_t pd_id;
	uint32_t owner_pid;
	uint32_t bound_qpn;
	uint64_t addr;
	uint64_t iova;
	uint64_t length;
	uint64_t obj_id;
	uint32_t mr_key;
	uint32_t pad;
};
static_assert(sizeof(struct sv_key_entry) == 64, "keytab entry layout");
static_assert(offsetof(struct sv_key_entry, addr) == 24, "keytab entry");

/* Offsets and bytes of the whole region. */
#define SV_KEYTAB_PORT_OFF sizeof(struct sv_keytab_hdr)
#define SV_KEYTAB_ENTRIES_OFF                                                  \
	((SV_KEYTAB_PORT_OFF + sizeof(struct sv_keytab_port) + 63) & ~(size_t)63)
#define SV_KEYTAB_SIZE                                                         \
	(SV_KEYTAB_ENTRIES_OFF +                                               \
	 (size_t)SV_KEYTAB_ENTRIES * sizeof(struct sv_key_entry))

/*
 * Reads entry e into *out consistently (the seqlock reader).  Returns 0,
 * or -1 if the writer kept it busy for too long (then the entry counts as
 * invalid: the daemon never holds it odd for more than a few stores).
 */
static inline int sv_key_read(const struct sv_key_entry *e,
			      struct sv_key_entry *out)
{
	for (int tries = 0; tries < 1000; tries++) {
		uint32_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);

		if (s1 & 1)
			continue;
		/* The whole entry, seq too: aligned copies, so that no field
		 * of *out is read back across two of them (a load the CPU
		 * cannot forward from its store buffer, and must wait). */
		memcpy(out, e, sizeof(*e));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->seq, memory_order_relaxed) == s1) {
			atomic_store_explicit(&out->seq, s1, memory_order_relaxed);
			return 0;
		}
	}
	return -1;
}

/*
 * Reads port block p into *out consistently.  0, or -1 when the writer
 * kept it busy (then use an older copy).
 */
static inline int sv_port_read(const struct sv_keytab_port *p,
			       struct sv_keytab_port *out)
{
	for (int tries = 0; tries < 1000; tries++) {
		uint32_t s1 = atomic_load_explicit(&p->seq, memory_order_acquire);

		if (s1 & 1)
			continue;
		memcpy((char *)out + sizeof(out->seq),
		       (const char *)p + sizeof(p->seq),
		       sizeof(*p) - sizeof(p->seq));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&p->seq, memory_order_relaxed) == s1) {
			atomic_store_explicit(&out->seq, s1, memory_order_relaxed);
			return 0;
		}
	}
	return -1;
}

/*
 * Routing by GID: 1 when a non-empty slot of p holds gid, i.e. the
 * destination is this host (the namespace's own address) and a packet to
 * it stays here; 0 when it belongs to another host (the wire).  p is a
 * copy made by sv_port_read.
 */
static inline int sv_port_gid_local(const struct sv_keytab_port *p,
				    const uint8_t gid[16])
{
	uint32_t n = p->ngids < SV_KEYTAB_GIDS ? p->ngids : SV_KEYTAB_GIDS;

	for (uint32_t i = 0; i < n; i++)
		if (p->gid[i].ifindex && !memcmp(p->gid[i].raw, gid, 16))
			return 1;
	return 0;
}

/*
 * The port's active MTU in bytes (256..4096): the most payload one packet
 * may carry on the wire.  active_mtu is an enum ibv_mtu (IBV_MTU_256 = 1
 * ... IBV_MTU_4096 = 5, 128 << value bytes); anything else reads as 256.
 */
static inline uint32_t sv_port_mtu_bytes(const struct sv_keytab_port *p)
{
	return p->active_mtu >= 1 && p->active_mtu <= 5 ? 128u << p->active_mtu :
							  256;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The key table: the daemon's published view of every lkey/rkey, shared
 * read-only with the engines (DESIGN.md "Checks at execution time").
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
#define SV_KEYTAB_VERSION 1

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
	_Atomic uint32_t capture;
	uint8_t reserved[20];
};
static_assert(sizeof(struct sv_keytab_hdr) == 64, "keytab header layout");
static_assert(offsetof(struct sv_keytab_hdr, capture) == 40, "keytab header");

enum sv_key_kind {
	SV_KEY_FREE = 0,
	SV_KEY_MR_USER,	  /* memory of owner_pid at addr */
	SV_KEY_MR_DM,	  /* addr = offset in the DM memfd (obj_id) */
	SV_KEY_MR_DMABUF, /* addr = offset in the dma-buf/memfd (obj_id) */
	SV_KEY_MW1,	  /* memory window type 1 */
	SV_KEY_MW2,	  /* memory window type 2 */
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

/* Bytes of the whole region. */
#define SV_KEYTAB_SIZE                                                         \
	(sizeof(struct sv_keytab_hdr) +                                        \
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
		memcpy((char *)out + sizeof(out->seq),
		       (const char *)e + sizeof(e->seq),
		       sizeof(*e) - sizeof(e->seq));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->seq, memory_order_relaxed) == s1) {
			atomic_store_explicit(&out->seq, s1, memory_order_relaxed);
			return 0;
		}
	}
	return -1;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A read of the device's key table for the misuse checker
 * (src/verbs/check.c): what a key names now, whichever process made it,
 * so that a refused access can be named (no such key, a missing access
 * flag, a range outside the MR).  Read-only, lock-free: the seqlock
 * reader of sv_keytab.h.
 */
#include "engine_int.h"

int sv_engine_key_entry(struct sv_engine *eng, uint32_t key,
			struct sv_key_entry *out)
{
	uint32_t idx = key >> 8;

	if (!eng || !eng->keys || idx == 0 || idx >= eng->nkeys)
		return -1;
	if (sv_key_read(&eng->keys[idx], out))
		return -1;
	return out->kind == SV_KEY_FREE || out->tag != (uint8_t)key ? -1 : 0;
}

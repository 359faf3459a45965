/* SPDX-License-Identifier: MIT */
/*
 * The misuse checker's private header: what check.c (reporting, names,
 * the objects it knows, the exit count) shares with check_post.c (the
 * checks at post, modify, create, destroy and poll).  check.c's comment
 * says what is checked and why.
 */
#ifndef SV_CHECK_INT_H
#define SV_CHECK_INT_H

#include "dp_int.h"
#include "check.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* A name for each bit of a mask (sv_chk_bits). */
struct sv_chk_bitname {
	uint32_t bit;
	const char *name;
};
extern const struct sv_chk_bitname sv_chk_mask_bits[];
extern const struct sv_chk_bitname sv_chk_access_bits[];

/* A live object of a kind (the lists under sv_chk_reg_lock). */
struct sv_chk_ent {
	void *obj;
	uint32_t unsig; /* QP: unsignaled WRs posted since the last signaled */
	struct sv_chk_ent *next;
};
extern pthread_mutex_t sv_chk_reg_lock;
extern struct sv_chk_ent *sv_chk_live[SV_CK_NKINDS];
/* Every live object of a kind.  Must hold sv_chk_reg_lock. */
#define SV_CHK_FOR_EACH(e, kind) for (struct sv_chk_ent *e = sv_chk_live[kind]; e; e = e->next)

/* An MR that went (the ring behind LKEY_UNKNOWN/RKEY_UNKNOWN). */
struct sv_chk_gone {
	uint32_t lkey, rkey;
	uint64_t iova, length;
	struct timespec when;
	const char *verb;
	char by[160];
};

/* The line without a caller (at exit; a responder run by the progress
 * thread, which has no caller of the application's). */
void sv_chk_report_here(const char *code, uint64_t site, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The last line this thread reported, or would have had it not been
 * told before ("CODE ...", without the prefix; "" after the clear). */
const char *sv_chk_last_line(void);
void sv_chk_last_clear(void);
/* The responder's hook (sv_engine_resp_diag): a request it refused. */
void sv_chk_resp_diag(struct sv_engine *eng, const struct sv_rdiag *d);
/* The line, once for a site whoever calls. */
void sv_chk_report_once(const char *code, uint64_t site, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *sv_chk_state_name(enum ibv_qp_state s);
const char *sv_chk_type_name(enum ibv_qp_type t);
const char *sv_chk_wr_name(uint32_t op);
/* The names of v's bits in t, in buf. */
const char *sv_chk_bits(char *buf, size_t cap, uint32_t v,
			const struct sv_chk_bitname *t);
/* Lookups in the lists.  Must hold sv_chk_reg_lock. */
struct sv_chk_ent *sv_chk_find(enum sv_check_kind kind, const void *obj);
struct sv_qp *sv_chk_find_qpn(uint32_t qpn);
struct sv_mr *sv_chk_find_key(uint32_t key, int remote);
const struct sv_chk_gone *sv_chk_find_gone(uint32_t key, int remote);
/* "deregistered at T by VERB from CALLER" for g, in buf. */
const char *sv_chk_gone_text(char *buf, size_t cap, const struct sv_chk_gone *g);

#define key_entry sv_engine_key_entry

#endif

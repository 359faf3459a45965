/* SPDX-License-Identifier: MIT */
/*
 * Fault plans (docs/faults.md): the grammar shared by SOFTVERBS_FAULT, the
 * daemon and `softverbs fault`.  A plan targets one object and says what
 * goes wrong with it, deterministically:
 *
 *   plan    = field { ("," | ":") field }
 *   field   = key [ "=" value ]
 *   list    = plan { ";" plan }          (SOFTVERBS_FAULT, fault list)
 *
 * | key      | value                      | meaning                        |
 * |----------|----------------------------|--------------------------------|
 * | qp       | N, or #K                   | QP number N, or the K-th QP the |
 * |          |                            | process creates (1-based)       |
 * | peer     | N                          | the QP connected to remote QPN N|
 * | gid      | G (IPv6 or IPv4 text)      | ... at remote GID G; a gid field |
 * |          |                            | ends at ',' only                |
 * | drop     | [P]                        | packets the QP sends are lost,  |
 * | dup      | [P]                        | duplicated, or held back behind |
 * | reorder  | [P]                        | the next one; probability P (1) |
 * | delay    | T (us, or 5ms, 200us, 1s)  | packets the QP sends leave T    |
 * |          |                            | late (the next ones do not wait)|
 * | p        | P                          | delay's probability (1)         |
 * | nth      | K, K-L or K+               | only the K-th (K-th to L-th,    |
 * |          |                            | K-th and after) packet or call  |
 * | status   | IBV_WC_* name              | the QP's next send completion   |
 * | recv     |                            | status=: its receive completions|
 * |          |                            | instead, as the program polls   |
 * | after    | K                          | after K successful send (recv:  |
 * |          |                            | receive) completions            |
 * | count    | C                          | completions forced (1)          |
 * | event    | IBV_EVENT_* name           | raises that async event         |
 * | verb     | ibv_* name                 | the verb fails ...              |
 * | errno    | E* name or number          | ... with this errno             |
 * | seed     | N                          | the plan's seed (alone: all's)  |
 * | id       | N                          | the daemon's number (run time)  |
 *
 * A segment of SOFTVERBS_FAULT with no "=" is the older process-wide form
 * (drop:P,dup:P,...; eng_link.c), left to its readers.
 */
#ifndef SV_FAULT_H
#define SV_FAULT_H

#include <stddef.h>
#include <stdint.h>

#define SV_FAULT_TEXT 160 /* bytes of a plan's text, NUL included */
#define SV_FAULT_ANY UINT32_MAX

enum sv_fault_kind {
	SV_FK_SEED = 1, /* seed=N alone: the seed of the plans without one */
	SV_FK_PACKET,
	SV_FK_STATUS,
	SV_FK_EVENT,
	SV_FK_VERB,
};

enum sv_fault_pkt { SV_FP_NONE, SV_FP_DROP, SV_FP_DUP, SV_FP_REORDER, SV_FP_DELAY };

/* The verbs a plan can make fail (sv_fault_verb_name). */
enum sv_fault_verb {
	SV_FV_ALLOC_PD,
	SV_FV_REG_MR,
	SV_FV_CREATE_CQ,
	SV_FV_CREATE_QP,
	SV_FV_MODIFY_QP,
	SV_FV_POST_SEND,
	SV_FV_POST_RECV,
	SV_FV_CREATE_SRQ,
	SV_FV_CREATE_AH,
	SV_FV_N
};

/* Which element an async event carries (ibv_async_event.element). */
enum sv_fault_elem { SV_FE_QP, SV_FE_CQ, SV_FE_PORT, SV_FE_DEVICE };

/*
 * | field  | meaning                                                   |
 * |--------|-----------------------------------------------------------|
 * | kind   | enum sv_fault_kind                                        |
 * | qpn    | qp=N; SV_FAULT_ANY: no qp= (every QP)                      |
 * | qp_ord | qp=#K: K; 0 when qpn (or nothing) names the QP             |
 * | peer   | peer=N; SV_FAULT_ANY                                       |
 * | gid    | gid=G, the remote GID (has_gid)                           |
 * | pkt    | SV_FP_* (kind PACKET)                                      |
 * | p      | its probability, 0..1                                     |
 * | lo, hi | nth range, 1-based, inclusive; 0, 0: every one            |
 * | after  | successful send completions before the plan acts          |
 * | count  | completions forced (STATUS)                               |
 * | status | enum ibv_wc_status (STATUS)                                |
 * | recv   | 1: status= acts on receive completions, as polled          |
 * | event  | enum ibv_event_type (EVENT)                                |
 * | verb   | enum sv_fault_verb (VERB)                                  |
 * | err    | positive errno (VERB)                                      |
 * | seed   | the plan's seed; has_seed 0: the list's (or 0)             |
 * | id     | the daemon's number of a run-time plan; 0 otherwise        |
 * | text   | the plan as written (trimmed), for logs and lists          |
 */
struct sv_fault_plan {
	uint32_t kind;
	uint32_t qpn;
	uint32_t qp_ord;
	uint32_t peer;
	uint32_t has_gid;
	uint8_t gid[16];
	uint32_t pkt;
	double p;
	uint64_t delay_ns; /* SV_FP_DELAY: how late */
	uint32_t has_p;    /* p= given (delay's probability) */
	uint64_t lo, hi;
	uint64_t after;
	uint32_t count;
	int32_t status;
	uint32_t recv; /* status= acts on receive completions (polled) */
	int32_t event;
	int32_t verb;
	int32_t err;
	uint32_t has_seed;
	uint64_t seed;
	uint32_t id;
	char text[SV_FAULT_TEXT];
};

/* Parses one plan of len bytes.  0, or -EINVAL with why filled (a line
 * for the user: "unknown key 'foo'"). */
int sv_fault_parse(const char *s, size_t len, struct sv_fault_plan *p,
		   char *why, size_t why_len);

/* Whether a segment of a list is a plan (holds '='), not an older item. */
int sv_fault_is_plan(const char *s, size_t len);

/* Names: "ibv_reg_mr", "RETRY_EXC_ERR" (without IBV_WC_), "QP_FATAL"
 * (without IBV_EVENT_), "ENOMEM" (or the number); "?" when unknown. */
const char *sv_fault_verb_name(int verb);
const char *sv_fault_status_name(int status);
const char *sv_fault_event_name(int event);
const char *sv_fault_errno_name(int err);
/* The element the event carries (enum sv_fault_elem). */
int sv_fault_event_elem(int event);

/* Whether the k-th (1-based) thing a plan sees is in its nth range. */
static inline int sv_fault_in_range(const struct sv_fault_plan *p, uint64_t k)
{
	return (!p->lo && !p->hi) || (k >= p->lo && k <= p->hi);
}

/* A uniform draw in [0, 1) for the k-th thing plan `salt` sees under
 * seed: a hash of the three (splitmix64), so the same seed gives the same
 * draws whatever else the process does. */
double sv_fault_draw(uint64_t seed, uint64_t salt, uint64_t k);

#endif

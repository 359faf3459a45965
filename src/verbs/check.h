/* SPDX-License-Identifier: MIT */
/*
 * The misuse checker (SOFTVERBS_CHECK=1, `softverbs run --check`; the codes
 * and their lines: docs/checker.md).  check.c is the whole of it; the verbs
 * call in with one line each, behind SV_CHECK(), so that without the
 * variable a verb pays one load of sv_check_on and a branch predicted not
 * taken, and nothing else runs.
 *
 * Every hook is called only when sv_check_on is set.  Hooks on the post
 * path run with the queue's post lock held (the caller says which); the
 * others with no lock of ours held.
 */
#ifndef SV_CHECK_H
#define SV_CHECK_H

#include <stdint.h>

#include <infiniband/verbs.h>

/* 1 when SOFTVERBS_CHECK asked for the checker; read once, at load. */
extern int sv_check_on;

#define SV_CHECK(call)                                                         \
	do {                                                                   \
		if (__builtin_expect(sv_check_on, 0))                          \
			call;                                                  \
	} while (0)

/*
 * Writes one line "softverbs-check: CODE <what>; called from <caller>" on
 * stderr, unless this (code, site, calling address) was reported before:
 * site names the object the misuse is about (a QP number, a key, a
 * pointer), so a loop that repeats one misuse says it once.  The caller
 * is the first frame of the stack outside this library (backtrace(3),
 * dladdr(3)).  For the engine too: a responder that diagnoses a remote
 * access can report through it (RKEY_UNKNOWN, ACCESS_DENIED,
 * RECV_NOT_POSTED on the responder's side).
 */
void sv_check_report(const char *code, uint64_t site, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Objects the checker follows (for names, dependants and LEAK_AT_EXIT). */
enum sv_check_kind {
	SV_CK_CTX,
	SV_CK_PD,
	SV_CK_MR,
	SV_CK_CQ,
	SV_CK_QP,
	SV_CK_SRQ,
	SV_CK_MW,
	SV_CK_AH,
	SV_CK_NKINDS
};

/* obj (the verbs.h object) was made (add 1) or is gone (add 0); for an MR
 * going, verb is the verb that took it (ibv_dereg_mr, ibv_unimport_mr),
 * remembered with its keys and the time. */
void sv_check_obj(enum sv_check_kind kind, void *obj, int add,
		  const char *verb);

struct sv_qp;
struct sv_cq;
struct sv_srq;

/* ibv_post_send, before the WR is taken.  Must hold qp->sq_lock. */
void sv_check_send(struct sv_qp *qp, const struct ibv_send_wr *wr);
/* A bind of a memory window (ibv_bind_mw, or IBV_WR_BIND_MW in
 * ibv_post_send: verb says which), before it is taken.  Must hold
 * qp->sq_lock. */
void sv_check_bind(struct sv_qp *qp, const char *verb,
		   const struct ibv_send_wr *wr);
/* ibv_wr_complete of a batch without error: the WQEs ibv_wr_* wrote,
 * slots [from, to) of the send ring, before the engine sees them.  Must
 * hold qp->sq_lock (wr_start took it). */
void sv_check_wr_batch(struct sv_qp *qp, uint32_t from, uint32_t to);
/* An ibv_wr_<op> refused for the QP's state (below RTS).  Must hold
 * qp->sq_lock. */
void sv_check_wr_state(struct sv_qp *qp, uint32_t opcode);
/* ibv_post_recv, before the WR is taken.  Must hold qp->rq_post_lock. */
void sv_check_recv(struct sv_qp *qp, const struct ibv_recv_wr *wr);
/* ibv_post_srq_recv.  Must hold srq->post_lock. */
void sv_check_srq_recv(struct sv_srq *srq, const struct ibv_recv_wr *wr);
/* ibv_modify_qp, before the checks of qp.c. */
void sv_check_modify(struct sv_qp *qp, const struct ibv_qp_attr *attr,
		     int mask);
/* ibv_modify_qp succeeded (qp->attr holds what it accepted). */
void sv_check_modified(struct sv_qp *qp);
/* ibv_resize_cq succeeded, or a QP was made on cq. */
void sv_check_cq_depth(struct sv_cq *cq, const char *verb);
/* Before a destroy: what still depends on obj. */
void sv_check_destroy(enum sv_check_kind kind, void *obj);
/* A poll took n completions into wc (n may be 0). */
void sv_check_polled(struct sv_cq *cq, const struct ibv_wc *wc, int n);

/* qp.c: the transition table (IBTA 11.2.4.2): 1 when cur -> next exists
 * for type, with the attribute bits it requires and allows. */
int sv_qp_trans_masks(enum ibv_qp_state cur, enum ibv_qp_state next,
		      enum ibv_qp_type type, uint32_t *req, uint32_t *opt);

#endif

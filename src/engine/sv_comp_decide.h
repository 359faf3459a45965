/* SPDX-License-Identifier: MIT */
/*
 * The completer's decisions (sv_comp_decide.c), apart from the state they
 * act on, so that a unit test (tests/unit/test_comp.c) can ask them in one
 * process: whether a response names a PSN we sent, and what a NAK or an
 * RNR NAK does to the request it names.  sv_comp.c acts on the answers.
 */
#ifndef SV_COMP_DECIDE_H
#define SV_COMP_DECIDE_H

#include <stdint.h>

/* A response (ACK, NAK, READ response, atomic ACK) with PSN psn names a
 * request we sent: one before psn_hi, the highest next PSN the requester
 * has reached.  Anything else -- a forged ACK far ahead -- acknowledges
 * nothing and is dropped (9.7.5.1.3's "ghost" responses). */
int sv_comp_psn_sent(uint32_t psn, uint32_t psn_hi);

/* What a NAK does to the WQE it names (sv_comp_nak acts on it). */
enum sv_nak_step {
	SV_NAK_RNR_WAIT,	  /* RNR NAK: resend from psn after the
				     timer its syndrome names */
	SV_NAK_RNR_EXCEEDED,	  /* RNR NAK with no RNR retry left:
				     IBV_WC_RNR_RETRY_EXC_ERR */
	SV_NAK_REWIND_PROGRESS,	  /* PSN sequence error past the last ACK:
				     the responder has everything before
				     psn; resend from it, retry budget
				     renewed */
	SV_NAK_REWIND_RETRY,	  /* PSN sequence error with no progress:
				     resend from psn, one retry spent */
	SV_NAK_RETRY_EXCEEDED,	  /* ... and no retry left:
				     IBV_WC_RETRY_EXC_ERR */
	SV_NAK_FAIL_INV_REQ,	  /* IBV_WC_REM_INV_REQ_ERR */
	SV_NAK_FAIL_ACCESS,	  /* IBV_WC_REM_ACCESS_ERR */
	SV_NAK_FAIL_OP,		  /* IBV_WC_REM_OP_ERR (remote operational
				     error, or a syndrome we do not know) */
};

/*
 * The step for a NAK with AETH syndrome syn and PSN psn, given the last
 * PSN the responder acknowledged, the retries left (retry_cnt's budget
 * and the RNR one) and the QP's rnr_retry attribute (7: infinite,
 * 9.7.5.2.8).  Pure: no state is read or changed.
 */
enum sv_nak_step sv_comp_nak_step(uint8_t syn, uint32_t psn,
				  uint32_t last_ack_psn, unsigned retry_left,
				  unsigned rnr_left, uint8_t rnr_retry);

#endif

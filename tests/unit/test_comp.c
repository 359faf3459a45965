/* SPDX-License-Identifier: MIT */
/*
 * The completer's decisions (src/engine/sv_comp_decide.c) in one process:
 * which responses name a PSN we sent, and what each NAK does to the
 * request it names -- rewind, wait, or fail with which status, and when
 * the retry budgets run out.  sv_comp.c carries the answers out; the
 * engine tests (test_engine_err, test_wire_trust) see them end to end.
 */
#include "sv_comp_decide.h"
#include "sv_hdr.h"
#include "unit_test.h"

#define RNR(code) (SV_AETH_RNR_NAK | (code))
#define NAK(code) (0x60 | (code)) /* AETH type 011: NAK */

/* psn_hi is the next PSN the requester would send: everything before it
 * (in the half of the 24-bit space behind it) was sent; it and what is
 * ahead were not -- a forged ACK there completes nothing. */
static void psn_sent(void)
{
	EXPECT(sv_comp_psn_sent(99, 100));
	EXPECT(!sv_comp_psn_sent(100, 100));
	EXPECT(!sv_comp_psn_sent(101, 100));
	EXPECT(!sv_comp_psn_sent(100 + 3000000, 100));
	/* Across the wrap: 0xfffffe was sent before psn_hi 2. */
	EXPECT(sv_comp_psn_sent(0xfffffe, 2));
	EXPECT(sv_comp_psn_sent(1, 2));
	EXPECT(!sv_comp_psn_sent(2, 2));
	EXPECT(!sv_comp_psn_sent(5, 0xfffffe));
	/* Half the space behind is "sent", the other half ahead is not. */
	EXPECT(sv_comp_psn_sent((100 - 0x7fffff) & 0xffffff, 100));
	EXPECT(!sv_comp_psn_sent((100 + 0x7fffff) & 0xffffff, 100));
}

/* A PSN sequence error: progress when the NAK's PSN is past the last ACK
 * (the responder has what came before it), else one retry spent, and
 * IBV_WC_RETRY_EXC_ERR when none is left. */
static void psn_seq(void)
{
	EXPECT(sv_comp_nak_step(NAK(SV_NAK_PSN_SEQ), 50, 40, 0, 0, 0) ==
	       SV_NAK_REWIND_PROGRESS);
	EXPECT(sv_comp_nak_step(NAK(SV_NAK_PSN_SEQ), 41, 40, 0, 0, 0) ==
	       SV_NAK_RETRY_EXCEEDED); /* 40 acked already: no progress */
	EXPECT(sv_comp_nak_step(NAK(SV_NAK_PSN_SEQ), 41, 40, 3, 0, 0) ==
	       SV_NAK_REWIND_RETRY);
	EXPECT(sv_comp_nak_step(NAK(SV_NAK_PSN_SEQ), 30, 40, 1, 0, 0) ==
	       SV_NAK_REWIND_RETRY); /* a stale NAK: no progress */
	/* Across the wrap: last ACK 0xfffffe, NAK at 1 = progress. */
	EXPECT(sv_comp_nak_step(NAK(SV_NAK_PSN_SEQ), 1, 0xfffffe, 0, 0, 0) ==
	       SV_NAK_REWIND_PROGRESS);
	EXPECT(sv_comp_nak_step(NAK(SV_NAK_PSN_SEQ), 0, 0xffffff, 0, 0, 0) ==
	       SV_NAK_RETRY_EXCEEDED);
}

/* RNR NAKs wait and resend while the RNR budget lasts; rnr_retry 7 is
 * infinite (9.7.5.2.8). */
static void rnr(void)
{
	EXPECT(sv_comp_nak_step(RNR(14), 10, 9, 0, 2, 3) == SV_NAK_RNR_WAIT);
	EXPECT(sv_comp_nak_step(RNR(14), 10, 9, 0, 0, 3) ==
	       SV_NAK_RNR_EXCEEDED);
	EXPECT(sv_comp_nak_step(RNR(0), 10, 9, 0, 0, 7) == SV_NAK_RNR_WAIT);
	/* The retry_cnt budget plays no part in an RNR NAK. */
	EXPECT(sv_comp_nak_step(RNR(1), 10, 9, 0, 1, 0) == SV_NAK_RNR_WAIT);
}

/* The fatal syndromes, whatever the budgets (IBTA table 44). */
static void fatal(void)
{
	EXPECT(sv_comp_nak_step(NAK(SV_NAK_INV_REQ), 10, 9, 7, 7, 7) ==
	       SV_NAK_FAIL_INV_REQ);
	EXPECT(sv_comp_nak_step(NAK(SV_NAK_REM_ACCESS), 10, 9, 7, 7, 7) ==
	       SV_NAK_FAIL_ACCESS);
	EXPECT(sv_comp_nak_step(NAK(SV_NAK_REM_OP), 10, 9, 7, 7, 7) ==
	       SV_NAK_FAIL_OP);
	/* A reserved syndrome: a remote operational error, never a hang. */
	EXPECT(sv_comp_nak_step(NAK(9), 10, 9, 7, 7, 7) == SV_NAK_FAIL_OP);
}

int main(void)
{
	psn_sent();
	psn_seq();
	rnr();
	fatal();
	return unit_result();
}

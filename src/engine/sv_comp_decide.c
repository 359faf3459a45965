/* SPDX-License-Identifier: MIT */
/*
 * The completer's decisions (sv_comp_decide.h says what each answers);
 * sv_comp.c carries them out.
 */
#include "sv_comp_decide.h"
#include "sv_hdr.h"

int sv_comp_psn_sent(uint32_t psn, uint32_t psn_hi)
{
	return psn_diff(psn, psn_hi) < 0;
}

enum sv_nak_step sv_comp_nak_step(uint8_t syn, uint32_t psn,
				  uint32_t last_ack_psn, unsigned retry_left,
				  unsigned rnr_left, uint8_t rnr_retry)
{
	if ((syn & SV_AETH_TYPE_MASK) == SV_AETH_RNR_NAK)
		return rnr_retry != 7 && !rnr_left ? SV_NAK_RNR_EXCEEDED :
						     SV_NAK_RNR_WAIT;
	switch (syn & 0x1f) {
	case SV_NAK_PSN_SEQ:
		/* The responder has everything before psn: progress, which
		 * renews the retry budget as an ACK would (9.7.5.1.1). */
		if (psn_diff((psn - 1) & 0xffffffu, last_ack_psn) > 0)
			return SV_NAK_REWIND_PROGRESS;
		return retry_left ? SV_NAK_REWIND_RETRY : SV_NAK_RETRY_EXCEEDED;
	case SV_NAK_INV_REQ:
		return SV_NAK_FAIL_INV_REQ;
	case SV_NAK_REM_ACCESS:
		return SV_NAK_FAIL_ACCESS;
	default:
		return SV_NAK_FAIL_OP;
	}
}

/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's capture messages (sv_proto.h has the rest and
 * includes this): `softverbs capture` sessions and the engines' capture
 * rings.
 */
#ifndef SV_PROTO_CAP_H
#define SV_PROTO_CAP_H

#include <assert.h>
#include <stdint.h>

#include "sv_roce.h"

#define SV_CAPTURE_QPN 1u /* sv_capture_req.flags: filter by QP */
#define SV_CAPTURE_PID 2u /* sv_capture_req.flags: filter by process */
#define SV_CAPTURE_MAX 16 /* sessions at once */
#define SV_REC_CAPTURE 1u /* ring record type of a struct sv_cap_rec */

/*
 * Capture (issue 9; src/daemon/capture.c, `softverbs capture`).
 *
 * CAPTURE_START: the command asks for a session.  The reply carries the
 * read end of a pipe on which the daemon streams a pcap (sv_roce.h: the
 * file header, then one record per packet, LINKTYPE_RAW frames with the
 * IP/UDP headers the packet has, or would have, on the wire) until the
 * reader closes it.  The daemon never blocks on it: what does not fit
 * in the pipe and the session's buffer is dropped and counted
 * (CAPTURE_STATS).  While any session runs, the key table's `capture`
 * (sv_keytab.h) is nonzero and engines copy their packets to the daemon.
 * More than SV_CAPTURE_MAX sessions at once: -EBUSY; unknown flags or pad
 * not 0: -EINVAL.
 *
 * | field | meaning                                                    |
 * |-------|------------------------------------------------------------|
 * | qpn   | SV_CAPTURE_QPN: only packets to or from this QP (the local  |
 * |       | QP of the record, BTH DestQP or UD's DETH SrcQP)           |
 * | pid   | SV_CAPTURE_PID: only packets this process sent or received |
 * | flags | SV_CAPTURE_*                                               |
 * | pad   | 0                                                          |
 */
struct sv_capture_req {
	uint32_t qpn;
	uint32_t pid;
	uint32_t flags;
	uint32_t pad;
};

/* CAPTURE_START's reply, and CAPTURE_STATS's request.
 * | session | the session's id (never 0) | pad | 0 | */
struct sv_capture_rep {
	uint32_t session;
	uint32_t pad;
};

/*
 * CAPTURE_STATS: how a session is doing (-ENOENT: it ended).
 * | field   | meaning                                                  |
 * |---------|----------------------------------------------------------|
 * | packets | records written to the stream (or its buffer)             |
 * | dropped | records the reader was too slow for                       |
 * | bytes   | bytes of those records, pcap headers included             |
 */
struct sv_capture_stats_rep {
	uint64_t packets;
	uint64_t dropped;
	uint64_t bytes;
};

/*
 * CAPTURE_RING: a process hands the daemon a ring (sv_ring.h: a memfd
 * sealed against shrinking and growing, exactly ring_size bytes, 8 KiB ..
 * 1 GiB, checked as link rings are) of SV_REC_CAPTURE records, one per
 * packet it sends or receives.  The reply carries the daemon's doorbell
 * (an eventfd): the producer rings it after a commit that found the ring
 * armed (sv_ring_commit), as between engines.  One ring per channel: a
 * second replaces the first; the ring goes with the channel.
 * | ring_size | bytes of the memfd |
 */
struct sv_capture_ring_req {
	uint64_t ring_size;
};

/*
 * One record of a capture ring (record type SV_REC_CAPTURE), followed by
 * ib_len bytes of IBTA packet (BTH .. payload and pad, no ICRC).  The
 * daemon trusts none of it beyond the packet's own bytes: the process is
 * the one that handed the ring, whatever pid says.
 *
 * | field  | meaning                                                    |
 * |--------|------------------------------------------------------------|
 * | ts_ns  | when, CLOCK_REALTIME nanoseconds (the pcap timestamp)       |
 * | dir    | 0 sent, 1 received                                          |
 * | ib_len | IBTA bytes after this header, 12 .. SV_ROCE_MAX_IB4 or _IB6 |
 * | pid    | the process (ignored in rings: the daemon knows the owner)  |
 * | qpn    | the local QP that sent or received it                       |
 * | flow   | the IP/UDP headers it has (or would have) on the wire       |
 */
struct sv_cap_rec {
	uint64_t ts_ns;
	uint32_t dir;
	uint32_t ib_len;
	uint32_t pid;
	uint32_t qpn;
	struct sv_roce_flow flow;
};
static_assert(sizeof(struct sv_cap_rec) == 72, "capture record layout");

#endif

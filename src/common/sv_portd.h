/* SPDX-License-Identifier: MIT */
/*
 * The port service (src/portd, docs/wire.md "Who owns port 4791"): a
 * root process that holds a namespace's RoCE v2 port and gives each
 * user's daemon a socket that receives only its own QPs' packets.
 *
 * Why: UDP 4791 is above 1024, so without it any process may bind the
 * port first and receive every RoCE packet of the namespace, rkeys and
 * payloads included.  The service binds it from boot as root with
 * SO_REUSEPORT; only root can join that reuseport group, and a steering
 * program (src/portd/steer.c) sends each datagram to the socket of the
 * daemon whose QPN block (the top byte of the QPN) it names.
 *
 * Protocol: a SOCK_SEQPACKET connection to the abstract name
 * SV_PORTD_NAME (one per network namespace and UDP port); the daemon
 * checks SO_PEERCRED (uid 0), the service takes the daemon's uid from
 * it.  Each message is one struct sv_portd_msg, a QP1 message followed
 * by its ring record.
 *
 * | op        | from    | meaning                                        |
 * |-----------|---------|------------------------------------------------|
 * | HELLO     | daemon  | version; block: the block it had before (a     |
 * |           |         | service restart), 0 for any                    |
 * | HELLO     | service | err, or block and the socket (SCM_RIGHTS)      |
 * | LISTEN    | daemon  | arg: a CM service ID its REQs are for          |
 * | LISTEN    | service | err: 0, or -EADDRINUSE (another daemon's)      |
 * | UNLISTEN  | daemon  | arg: the service ID given up (no reply)        |
 * | QP1       | service | a CM MAD for this daemon: the ring record      |
 * |           |         | (GRH + BTH..payload, sv_wire.h) follows        |
 *
 * QP1 is everyone's: the service reads it and passes each MAD to the
 * daemon it belongs to -- a REQ or SIDR REQ by its service ID, every
 * other CM message by the communication ID the daemon chose, whose top
 * byte is the daemon's block (svd_cm.h) -- so no user sees another's
 * connection data.
 */
#ifndef SV_PORTD_H
#define SV_PORTD_H

#include <stdint.h>

#define SV_PORTD_NAME "softverbs-portd.%u"
#define SV_PORTD_VERSION 1

enum sv_portd_op {
	SV_PORTD_HELLO = 1,
	SV_PORTD_LISTEN,
	SV_PORTD_UNLISTEN,
	SV_PORTD_QP1,
};

struct sv_portd_msg {
	uint32_t op;
	int32_t err;
	uint32_t version;
	uint32_t block;
	uint64_t arg;
};

/* A block's QPNs: block << SV_PORTD_BLOCK_SHIFT and the 16 bits below. */
#define SV_PORTD_BLOCK_SHIFT 16
#define SV_PORTD_BLOCKS 256

#endif

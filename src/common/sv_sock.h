/* SPDX-License-Identifier: MIT */
/*
 * Datagram helpers for the control protocol (see sv_proto.h): one message
 * per call, file descriptors as SCM_RIGHTS.  Both sides use them.
 */
#ifndef SV_SOCK_H
#define SV_SOCK_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>

/*
 * Sends one datagram of len bytes with nfds descriptors attached.
 * Returns 0 or a negative errno.  Never raises SIGPIPE.  With dontwait the
 * send fails with -EAGAIN instead of blocking.
 */
int sv_send_msg(int sock, const void *buf, size_t len, const int *fds,
		int nfds, int dontwait);

/*
 * Receives one datagram into buf (cap bytes).  Descriptors received are
 * stored in fds (at most maxfds; any beyond that are closed) and counted
 * in *nfds.  Returns the datagram's length, 0 on EOF, or a negative errno;
 * -EMSGSIZE when the datagram or its control data did not fit (the
 * descriptors that did arrive are closed then).
 */
ssize_t sv_recv_msg(int sock, void *buf, size_t cap, int *fds, int maxfds,
		    int *nfds);

/*
 * After sv_recv_msg returned 0 with no descriptors: was that the end of the
 * stream or an empty datagram?  SOCK_SEQPACKET answers both with 0 bytes;
 * only the socket's hang-up state tells them apart (a peer that closed
 * leaves POLLHUP set whether or not datagrams were still queued).
 */
enum sv_sock_state {
	SV_SOCK_OPEN = 0,  /* an empty datagram: the peer is still there */
	SV_SOCK_HUP,	   /* the last copy of the peer's end is closed */
	SV_SOCK_RDHUP,	   /* the peer shut down writing but is still open */
};
enum sv_sock_state sv_sock_hup(int sock);

/* Closes n descriptors of fds, ignoring -1 entries. */
void sv_close_fds(int *fds, int n);

/* Fills addr with the abstract socket name for this user (or
 * $SOFTVERBS_SOCKET) and returns the address length.  Where the daemon
 * listens when another uid holds that name: sv_addr.h. */
struct sockaddr_un;
socklen_t sv_socket_addr(struct sockaddr_un *addr);

/* The abstract name itself (no leading NUL, at most 107 bytes), in buf. */
const char *sv_socket_name(char *buf, size_t cap);

#endif

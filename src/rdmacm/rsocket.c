/* SPDX-License-Identifier: MIT */
/* rsockets: work in progress. */
#include "cma_int.h"

#include <rdma/rsocket.h>
#include <sys/select.h>

#define NOSYS(ret, name, args) SV_EXPORT ret name args { return cma_err(ENOSYS); }
NOSYS(int, rsocket, (int domain, int type, int protocol))
NOSYS(int, rbind, (int socket, const struct sockaddr *addr, socklen_t addrlen))
NOSYS(int, rlisten, (int socket, int backlog))
NOSYS(int, raccept, (int socket, struct sockaddr *addr, socklen_t *addrlen))
NOSYS(int, rconnect, (int socket, const struct sockaddr *addr, socklen_t addrlen))
NOSYS(int, rshutdown, (int socket, int how))
NOSYS(int, rclose, (int socket))
NOSYS(ssize_t, rrecv, (int socket, void *buf, size_t len, int flags))
NOSYS(ssize_t, rrecvfrom, (int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr, socklen_t *addrlen))
NOSYS(ssize_t, rrecvmsg, (int socket, struct msghdr *msg, int flags))
NOSYS(ssize_t, rsend, (int socket, const void *buf, size_t len, int flags))
NOSYS(ssize_t, rsendto, (int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr, socklen_t addrlen))
NOSYS(ssize_t, rsendmsg, (int socket, const struct msghdr *msg, int flags))
NOSYS(ssize_t, rread, (int socket, void *buf, size_t count))
NOSYS(ssize_t, rreadv, (int socket, const struct iovec *iov, int iovcnt))
NOSYS(ssize_t, rwrite, (int socket, const void *buf, size_t count))
NOSYS(ssize_t, rwritev, (int socket, const struct iovec *iov, int iovcnt))
NOSYS(int, rpoll, (struct pollfd *fds, nfds_t nfds, int timeout))
NOSYS(int, rselect, (int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout))
NOSYS(int, rgetpeername, (int socket, struct sockaddr *addr, socklen_t *addrlen))
NOSYS(int, rgetsockname, (int socket, struct sockaddr *addr, socklen_t *addrlen))
NOSYS(int, rsetsockopt, (int socket, int level, int optname, const void *optval, socklen_t optlen))
NOSYS(int, rgetsockopt, (int socket, int level, int optname, void *optval, socklen_t *optlen))
SV_EXPORT int rfcntl(int socket, int cmd, ...) { (void)socket; (void)cmd; return cma_err(ENOSYS); }
NOSYS(off_t, riomap, (int socket, void *buf, size_t len, int prot, int flags, off_t offset))
NOSYS(int, riounmap, (int socket, void *buf, size_t len))
NOSYS(size_t, riowrite, (int socket, const void *buf, size_t count, off_t offset, int flags))

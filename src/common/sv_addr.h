/* SPDX-License-Identifier: MIT */
/*
 * Where the daemon listens, and who holds its name when it is not us.
 *
 * Normally on the abstract Unix socket @softverbs.UID ($SOFTVERBS_SOCKET
 * names another, sv_sock.h): abstract names belong to the network
 * namespace, so every namespace is its own host with its own daemon, and a
 * daemon that dies leaves nothing behind on any file system.  But any user
 * may bind any abstract name, ours included, before our daemon does.  Both
 * sides check SO_PEERCRED, so such a squatter learns nothing and is sent
 * nothing; still, it would deny the device to its owner.
 *
 * So when the name is held by a socket of another uid (bound only,
 * listening without accepting, or accepting and answering), the daemon
 * listens instead on a socket file in a private directory, one where only
 * the user can create entries, and the library looks there whenever the
 * abstract name gives it no daemon of ours.  The directories, in order:
 *
 *   1. $XDG_RUNTIME_DIR/softverbs
 *   2. /run/user/UID/softverbs          (logind's, when the variable is
 *                                        not set, as after su or in cron)
 *   3. $HOME/.softverbs/BOOT_ID         (BOOT_ID: the kernel's random
 *                                        boot id; hosts sharing a home
 *                                        over NFS see the same namespace
 *                                        inode numbers, never the same
 *                                        boot id)
 *
 * The base ($XDG_RUNTIME_DIR, /run/user/UID, $HOME) must be a directory of
 * ours that neither group nor others may write in (or they could replace
 * what we create in it); the directories we create in it must be ours and
 * 0700.  A candidate that fails is skipped, with the reason kept for the
 * message that says why no fallback was possible.  Every check is made on
 * the opened directory (fstat of an O_PATH descriptor, O_NOFOLLOW), and the
 * lock and the stale socket are handled relative to it.
 *
 * In the directory:
 *
 *   NAME.netINO        the socket; NAME is the abstract name, INO the inode
 *                      of /proc/self/ns/net.  A file system crosses network
 *                      namespaces, the inode keeps one daemon per namespace
 *                      as the abstract name does.  A NAME longer than
 *                      SV_FALLBACK_NAME_MAX or with a byte outside
 *                      [A-Za-z0-9._-] becomes its first 32 bytes (others
 *                      as '_') + '+' + 16 hex digits of a hash of the whole
 *                      name: '+' never appears in a name used as is.
 *   NAME.netINO.lock   flock()ed by the daemon listening there, for its
 *                      whole life: one fallback daemon per name and
 *                      namespace, and the socket file of one that was
 *                      killed is removed by the next, under the lock.
 *
 * A socket path is at most 107 bytes (sun_path).  When dir/NAME.netINO is
 * longer, bind() and connect() go through /proc/self/fd/N/NAME.netINO, N
 * the directory's descriptor: the name part is at most 73 bytes, so that
 * always fits.  Messages name the real path either way.
 */
#ifndef SV_ADDR_H
#define SV_ADDR_H

#include <limits.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

/* Candidate directories, numbered 0 .. SV_FALLBACK_DIRS - 1 as above. */
#define SV_FALLBACK_DIRS 3
/* The longest abstract name used as is in a file name. */
#define SV_FALLBACK_NAME_MAX 48

struct sv_fallback {
	int dirfd;		   /* O_PATH of the private directory; -1 */
	char dir[PATH_MAX];	   /* its path (for messages) */
	char file[96];		   /* NAME.netINO */
	char lock[104];		   /* NAME.netINO.lock */
	char path[PATH_MAX + 96];  /* dir/file (for messages) */
	struct sockaddr_un addr;   /* what bind() and connect() take */
	socklen_t len;
};

/*
 * Opens candidate directory `which` for the fallback socket of this
 * process's name ($SOFTVERBS_SOCKET or softverbs.UID) and network
 * namespace.  With create, makes the directories we own if missing (the
 * daemon); without, a candidate not made yet is -ENOENT (the library).
 * Returns 0 (fb filled, fb->dirfd open: sv_fallback_close) or a negative
 * errno with one line in why saying what was wrong: -ENOENT not there or
 * not set, -EPERM not ours or open to others, others as the system said.
 */
int sv_fallback_open(struct sv_fallback *fb, int which, int create,
		     char *why, size_t whylen);
void sv_fallback_close(struct sv_fallback *fb);

/* The socket's file name for abstract name `name` in namespace `netns`
 * (see above); out holds at least 96 bytes. */
void sv_fallback_file(char *out, size_t cap, const char *name,
		      unsigned long long netns);

/*
 * Connects a control socket (SOCK_SEQPACKET, close-on-exec) to addr.
 * wait_ms 0: without waiting (a listener whose backlog is full answers
 * -EAGAIN at once); else waits at most that long for room in its backlog.
 * On success returns the descriptor, blocking, and fills *cred with the
 * listener's credentials (SO_PEERCRED: the process that called listen()).
 * Sends nothing.  Otherwise a negative errno (-ECONNREFUSED: nobody
 * listens on that name).
 */
struct ucred;
int sv_connect_addr(const struct sockaddr_un *addr, socklen_t len,
		    int wait_ms, struct ucred *cred);

/* Who holds this process's abstract name. */
enum sv_holder_state {
	SV_HOLDER_FREE,	     /* nobody */
	SV_HOLDER_BOUND,     /* a socket bound to it that does not listen */
	SV_HOLDER_LISTENING, /* a listener with room in its backlog */
	SV_HOLDER_FULL,	     /* a listener whose backlog is full: it does not
				accept, or not fast enough */
	SV_HOLDER_UNKNOWN,   /* connections are refused, and the kernel's
				socket list (sock_diag) could not say
				whether something is bound */
};

struct sv_holder {
	enum sv_holder_state state;
	long uid; /* owner (-1: unknown); for a listener, who listened */
	long pid; /* the listener's pid (SO_PEERCRED); -1 when not known */
};

/*
 * Looks at the abstract name without sending anything: one connection
 * attempt that is closed at once (SO_PEERCRED names a listener), and the
 * kernel's list of Unix sockets of this namespace (NETLINK_SOCK_DIAG,
 * which any user may read) for a socket that only is bound, or whose
 * backlog is full.
 */
void sv_abstract_holder(struct sv_holder *h);

/* "uid 65534 (pid 123, listening)" and the like, in buf. */
const char *sv_holder_str(const struct sv_holder *h, char *buf, size_t cap);

#endif

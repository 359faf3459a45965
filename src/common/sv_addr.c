/* SPDX-License-Identifier: MIT */
/* Where the daemon listens: see sv_addr.h. */
#include "sv_addr.h"
#include "sv_sock.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/time.h>
#include <unistd.h>

/* Linux's own listen state, which unix_diag reports (include/net/tcp_states.h). */
#define SV_TCP_LISTEN 10

static int say(char *why, size_t cap, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* One line in why (if given); returns err. */
static int say(char *why, size_t cap, int err, const char *fmt, ...)
{
	va_list ap;

	if (why && cap) {
		va_start(ap, fmt);
		vsnprintf(why, cap, fmt, ap);
		va_end(ap);
	}
	return err;
}

static int safe_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

void sv_fallback_file(char *out, size_t cap, const char *name,
		      unsigned long long netns)
{
	size_t n = strlen(name), i, k;
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	int plain = n > 0 && n <= SV_FALLBACK_NAME_MAX;
	char pre[33];

	for (i = 0; plain && i < n; i++)
		plain = safe_char(name[i]);
	if (plain) {
		snprintf(out, cap, "%s.net%llu", name, netns);
		return;
	}
	for (i = 0; i < n; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ULL;
	}
	k = n < 32 ? n : 32;
	for (i = 0; i < k; i++)
		pre[i] = safe_char(name[i]) ? name[i] : '_';
	pre[k] = 0;
	snprintf(out, cap, "%s+%016llx.net%llu", pre, (unsigned long long)h,
		 netns);
}

/* The directory open at fd (path for messages) must be ours, and none of
 * the forbidden mode bits set. */
static int check_dir(int fd, const char *path, mode_t forbid, char *why,
		     size_t cap)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return say(why, cap, -errno, "%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return say(why, cap, -ENOTDIR, "%s is not a directory", path);
	if (st.st_uid != getuid())
		return say(why, cap, -EPERM, "%s belongs to uid %u, not to us (uid %u)",
			   path, (unsigned)st.st_uid, (unsigned)getuid());
	if (st.st_mode & forbid)
		return say(why, cap, -EPERM, "%s has mode %04o: %s", path,
			   (unsigned)(st.st_mode & 07777),
			   forbid == 077 ? "others may use it (0700 wanted)" :
					   "others may write in it");
	return 0;
}

static int home_dir(char *out, size_t cap)
{
	const char *home = getenv("HOME");
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (home && *home) {
		snprintf(out, cap, "%s", home);
		return 0;
	}
	if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) || !res ||
	    !res->pw_dir || !*res->pw_dir)
		return -ENOENT;
	snprintf(out, cap, "%s", res->pw_dir);
	return 0;
}

static int boot_id(char *out, size_t cap)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, out, cap - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	out[n] = 0;
	out[strcspn(out, "\n")] = 0;
	if (!*out || strspn(out, "0123456789abcdef-") != strlen(out))
		return -EIO;
	return 0;
}

int sv_fallback_open(struct sv_fallback *fb, int which, int create,
		     char *why, size_t cap)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	const char *sub[2] = { NULL, NULL };
	char boot[64], name[sizeof(fb->addr.sun_path)];
	struct stat ns;
	size_t len;
	int fd, err, i;

	memset(fb, 0, sizeof(*fb));
	fb->dirfd = -1;
	say(why, cap, 0, "%s", "");
	switch (which) {
	case 0:
		if (!xdg || !*xdg)
			return say(why, cap, -ENOENT, "XDG_RUNTIME_DIR is not set");
		if (xdg[0] != '/')
			return say(why, cap, -EINVAL,
				   "XDG_RUNTIME_DIR (%s) is not an absolute path", xdg);
		snprintf(fb->dir, sizeof(fb->dir), "%s", xdg);
		sub[0] = "softverbs";
		break;
	case 1:
		snprintf(fb->dir, sizeof(fb->dir), "/run/user/%u",
			 (unsigned)getuid());
		/* Usually the same place as XDG_RUNTIME_DIR: tried already. */
		if (xdg && !strcmp(xdg, fb->dir))
			return say(why, cap, -ENOENT, "%s is XDG_RUNTIME_DIR",
				   fb->dir);
		sub[0] = "softverbs";
		break;
	case 2:
		if (home_dir(fb->dir, sizeof(fb->dir)) || fb->dir[0] != '/')
			return say(why, cap, -ENOENT, "no home directory");
		err = boot_id(boot, sizeof(boot));
		if (err)
			return say(why, cap, err, "no boot id: %s", strerror(-err));
		sub[0] = ".softverbs";
		sub[1] = boot;
		break;
	default:
		return -EINVAL;
	}

	fd = open(fb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return say(why, cap, -errno, "%s: %s", fb->dir, strerror(errno));
	err = check_dir(fd, fb->dir, 022, why, cap);
	for (i = 0; !err && i < 2 && sub[i]; i++) {
		int nfd;

		len = strlen(fb->dir);
		snprintf(fb->dir + len, sizeof(fb->dir) - len, "/%s", sub[i]);
		if (create && mkdirat(fd, sub[i], 0700) < 0 && errno != EEXIST) {
			err = say(why, cap, -errno, "cannot create %s: %s",
				  fb->dir, strerror(errno));
			break;
		}
		/* O_NOFOLLOW: a symlink planted here is refused, not
		 * followed (only we can plant one, but still). */
		nfd = openat(fd, sub[i], O_PATH | O_DIRECTORY | O_NOFOLLOW |
						 O_CLOEXEC);
		close(fd);
		fd = nfd;
		if (fd < 0) {
			err = say(why, cap, -errno, "%s: %s", fb->dir,
				  strerror(errno));
			break;
		}
		err = check_dir(fd, fb->dir, 077, why, cap);
	}
	if (err) {
		if (fd >= 0)
			close(fd);
		return err;
	}
	/* Without the namespace's identity one file would serve every
	 * namespace: no fallback rather than that. */
	if (stat("/proc/self/ns/net", &ns) < 0) {
		err = say(why, cap, -errno, "/proc/self/ns/net: %s",
			  strerror(errno));
		close(fd);
		return err;
	}
	sv_socket_name(name, sizeof(name));
	sv_fallback_file(fb->file, sizeof(fb->file), name,
			 (unsigned long long)ns.st_ino);
	snprintf(fb->lock, sizeof(fb->lock), "%s.lock", fb->file);
	snprintf(fb->path, sizeof(fb->path), "%s/%s", fb->dir, fb->file);
	fb->addr.sun_family = AF_UNIX;
	len = strlen(fb->path);
	if (len < sizeof(fb->addr.sun_path)) {
		memcpy(fb->addr.sun_path, fb->path, len + 1);
	} else {
		char via[32];
		int k = snprintf(via, sizeof(via), "/proc/self/fd/%d/", fd);
		size_t fl = strlen(fb->file);

		/* Cannot happen (sv_addr.h): said rather than cut short. */
		if (k + fl >= sizeof(fb->addr.sun_path)) {
			close(fd);
			return say(why, cap, -ENAMETOOLONG, "%s: name too long",
				   fb->path);
		}
		memcpy(fb->addr.sun_path, via, k);
		memcpy(fb->addr.sun_path + k, fb->file, fl + 1);
	}
	fb->len = offsetof(struct sockaddr_un, sun_path) +
		  strlen(fb->addr.sun_path) + 1;
	fb->dirfd = fd;
	return 0;
}

void sv_fallback_close(struct sv_fallback *fb)
{
	if (fb->dirfd >= 0)
		close(fb->dirfd);
	fb->dirfd = -1;
}

int sv_connect_addr(const struct sockaddr_un *addr, socklen_t len,
		    int wait_ms, struct ucred *cred)
{
	struct timeval tv = { wait_ms / 1000, (wait_ms % 1000) * 1000 };
	struct timeval zero = { 0, 0 };
	socklen_t clen = sizeof(*cred);
	int fd, r, err;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
				     (wait_ms > 0 ? 0 : SOCK_NONBLOCK), 0);
	if (fd < 0)
		return -errno;
	/* A Unix connect() waits for room in the listener's backlog; the
	 * send timeout bounds that wait (af_unix.c: sock_sndtimeo). */
	if (wait_ms > 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		goto err_close;
	do {
		r = connect(fd, (const struct sockaddr *)addr, len);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		goto err_close;
	/* The channel itself blocks, without a timeout. */
	if (wait_ms > 0 ?
		    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof(zero)) < 0 :
		    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
		goto err_close;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &clen) < 0)
		goto err_close;
	return fd;

err_close:
	err = -errno;
	close(fd);
	/* A full backlog: -EAGAIN, whether we waited or not. */
	return err == -EINPROGRESS ? -EAGAIN : err;
}

/*
 * The kernel's Unix sockets of this namespace: is a SOCK_SEQPACKET socket
 * bound to abstract name `name`, in which state, owned by whom?  Returns 1
 * found, 0 not found, or a negative errno when the list cannot be read.
 */
static int diag_find(const char *name, int *state, long *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req r;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req),
			 .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
			 .nlmsg_seq = 1 },
		.r = { .sdiag_family = AF_UNIX,
		       .udiag_states = ~0u,
		       .udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_UID },
	};
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	struct timeval tv = { 1, 0 };
	size_t nlen = strlen(name);
	/* A dump's messages are at most 32 KiB (netlink_dump's largest
	 * allocation); a truncated one is an error, never half read. */
	long buf[32768 / sizeof(long)];
	int fd, found = 0, done = 0, err = 0;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	/* The kernel answers at once; the timeout only guards a hang. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&nl,
		   sizeof(nl)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	while (!done) {
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t r = recvmsg(fd, &msg, 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;
		int n = (int)r;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (msg.msg_flags & MSG_TRUNC)) {
			err = r < 0 ? -errno : -EIO;
			break;
		}
		for (; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			struct unix_diag_msg *m = NLMSG_DATA(h);
			struct rtattr *a;
			int alen, match = 0;
			long owner = -1;

			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);

				err = e->error ? e->error : -EIO;
				done = 1;
				break;
			}
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)) ||
			    m->udiag_type != SOCK_SEQPACKET)
				continue;
			a = (struct rtattr *)(m + 1);
			alen = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
			for (; RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
				const char *d = RTA_DATA(a);

				/* An abstract name: a NUL, then its bytes. */
				if (a->rta_type == UNIX_DIAG_NAME &&
				    RTA_PAYLOAD(a) == nlen + 1 && d[0] == 0 &&
				    !memcmp(d + 1, name, nlen))
					match = 1;
				if (a->rta_type == UNIX_DIAG_UID &&
				    RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
					uint32_t u;

					memcpy(&u, d, sizeof(u));
					owner = u;
				}
			}
			/* A listener wins over a socket merely bound (one
			 * of each can exist while a listener closes). */
			if (match && (!found || m->udiag_state == SV_TCP_LISTEN)) {
				found = 1;
				*state = m->udiag_state;
				*uid = owner;
			}
		}
	}
	close(fd);
	return err ? err : found;
}

void sv_abstract_holder(struct sv_holder *h)
{
	struct sockaddr_un addr;
	socklen_t len = sv_socket_addr(&addr);
	char name[sizeof(addr.sun_path)];
	struct ucred cred;
	int fd, state = 0, found;
	long uid = -1;

	h->state = SV_HOLDER_FREE;
	h->uid = h->pid = -1;
	fd = sv_connect_addr(&addr, len, 0, &cred);
	if (fd >= 0) {
		close(fd);
		h->state = SV_HOLDER_LISTENING;
		h->uid = cred.uid;
		h->pid = cred.pid;
		return;
	}
	found = diag_find(sv_socket_name(name, sizeof(name)), &state, &uid);
	if (fd == -EAGAIN) {
		h->state = SV_HOLDER_FULL;
		h->uid = found > 0 ? uid : -1;
		return;
	}
	if (found < 0) {
		h->state = SV_HOLDER_UNKNOWN;
		return;
	}
	if (found) {
		/* Refused, yet listening: it began between our two looks. */
		h->state = state == SV_TCP_LISTEN ? SV_HOLDER_LISTENING :
						    SV_HOLDER_BOUND;
		h->uid = uid;
	}
}

const char *sv_holder_str(const struct sv_holder *h, char *buf, size_t cap)
{
	static const char *const what[] = {
		[SV_HOLDER_FREE] = "free",
		[SV_HOLDER_BOUND] = "bound, not listening",
		[SV_HOLDER_LISTENING] = "listening",
		[SV_HOLDER_FULL] = "listening, not accepting",
		[SV_HOLDER_UNKNOWN] = "refusing connections",
	};
	char uid[32] = "an unknown uid", pid[32] = "";

	if (h->uid >= 0)
		snprintf(uid, sizeof(uid), "uid %ld", h->uid);
	if (h->pid > 0)
		snprintf(pid, sizeof(pid), "pid %ld, ", h->pid);
	snprintf(buf, cap, "%s (%s%s)", uid, pid, what[h->state]);
	return buf;
}

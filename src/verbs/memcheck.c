/* SPDX-License-Identifier: MIT */
/*
 * Would the kernel's pinning accept this range?  ibv_reg_mr on real
 * hardware pins the pages (ib_umem_get: pin_user_pages with FOLL_WRITE
 * when the access lets the device write, ib_access_writable), which fails
 * with EFAULT on a hole in the range, on a mapping that is not readable,
 * and on a read-only mapping when the MR may be written.  softverbs pins
 * nothing (an MR is a description the engines check later), so it asks
 * the same question of the process's mappings without touching a page:
 * registering 1 TiB of reserved address space stays free.
 *
 * The mappings come from /proc/self/maps: PROCMAP_QUERY (Linux 6.11)
 * answers "which mapping covers this address" in one ioctl, about a
 * microsecond; older kernels get the text parsed (some tens of
 * microseconds, the price of the check there; SOFTVERBS_FAULT=maps_text
 * forces that path for tests).  ODP registrations are not
 * pinned by the kernel either, so they are never checked (mr.c).
 */
#include "verbs_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The kernel's UAPI (include/uapi/linux/fs.h, 6.11); Debian 12's headers
 * predate it. */
struct sv_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
_Static_assert(sizeof(struct sv_procmap_query) == 104, "procmap_query ABI");
#define SV_PROCMAP_QUERY _IOWR('f', 17, struct sv_procmap_query)
#define SV_PROCMAP_READABLE 0x01u
#define SV_PROCMAP_WRITABLE 0x02u

#define PAGE 4096ULL

/*
 * One descriptor of /proc/self/maps, opened at the first check.  It
 * belongs to the process that opened it (a forked child reopens its own),
 * and an application that closed it behind our back (closefrom after
 * start-up) gets it reopened: the device and inode must still be ours.
 */
static struct {
	pthread_mutex_t lock;
	int fd;
	pid_t pid;
	dev_t dev;
	ino_t ino;
	int no_query; /* 1: parse the text (no PROCMAP_QUERY); -1: unknown */
} maps = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .no_query = -1 };

/* Must hold maps.lock.  The descriptor, or -1. */
static int maps_fd(void)
{
	struct stat st;
	pid_t pid = getpid();

	if (maps.fd >= 0 && maps.pid == pid && fstat(maps.fd, &st) == 0 &&
	    st.st_dev == maps.dev && st.st_ino == maps.ino)
		return maps.fd;
	/* Not (or no longer) ours: never close a number that may now be the
	 * application's; only our own process's copy is closed. */
	if (maps.fd >= 0 && maps.pid != pid && fstat(maps.fd, &st) == 0 &&
	    st.st_dev == maps.dev && st.st_ino == maps.ino)
		close(maps.fd);
	maps.fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (maps.fd < 0 || fstat(maps.fd, &st) < 0) {
		if (maps.fd >= 0)
			close(maps.fd);
		maps.fd = -1;
		return -1;
	}
	maps.pid = pid;
	maps.dev = st.st_dev;
	maps.ino = st.st_ino;
	return maps.fd;
}

/* What the mapping needs: PROCMAP flags. */
static uint64_t needed(int write)
{
	return write ? SV_PROCMAP_WRITABLE : SV_PROCMAP_READABLE;
}

/* PROCMAP_QUERY walk over [start, end).  0, -EFAULT, or -ENOTTY when the
 * kernel lacks the ioctl. */
static int check_query(int fd, uint64_t start, uint64_t end, int write)
{
	for (uint64_t cur = start; cur < end;) {
		struct sv_procmap_query q;

		memset(&q, 0, sizeof(q));
		q.size = sizeof(q);
		q.query_addr = cur;
		if (ioctl(fd, SV_PROCMAP_QUERY, &q) < 0) {
			if (errno == ENOENT)
				return -EFAULT; /* a hole */
			return errno == ENOTTY || errno == EINVAL ? -ENOTTY :
								    -EFAULT;
		}
		if ((q.vma_flags & needed(write)) != needed(write) ||
		    q.vma_end <= cur)
			return -EFAULT;
		cur = q.vma_end;
	}
	return 0;
}

/* The same walk over the text of /proc/self/maps (sorted by address). */
static int check_text(int fd, uint64_t start, uint64_t end, int write)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap), *line, *nl;
	uint64_t cur = start;
	ssize_t n;
	int err = -EFAULT;

	if (!buf)
		return -ENOMEM;
	/* One pass from the start (pread: the shared descriptor's offset is
	 * nobody's business). */
	for (;;) {
		if (len + 4096 > cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		n = pread(fd, buf + len, cap - len - 1, (off_t)len);
		if (n < 0) {
			free(buf);
			return -EFAULT;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = 0;
	for (line = buf; line && *line && cur < end; line = nl ? nl + 1 : NULL) {
		unsigned long long lo, hi;
		char perms[8];

		nl = strchr(line, '\n');
		if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) != 3)
			continue;
		if (hi <= cur)
			continue;
		if (lo > cur)
			break; /* a hole before the next mapping */
		if (perms[write ? 1 : 0] == '-')
			break;
		cur = hi;
	}
	if (cur >= end)
		err = 0;
	free(buf);
	return err;
}

int sv_mem_check(const void *addr, size_t len, int write)
{
	uint64_t a = (uintptr_t)addr, start, end;
	int fd, err;

	/* Ranges the daemon refuses anyway (EINVAL) need no answer here. */
	if (!len || a + len < a || a + len > UINT64_MAX - PAGE)
		return 0;
	start = a & ~(PAGE - 1);
	end = (a + len + PAGE - 1) & ~(PAGE - 1);
	pthread_mutex_lock(&maps.lock);
	fd = maps_fd();
	if (fd < 0) {
		/* No procfs (a bare chroot): nothing to go by; the engines
		 * still check every access when it happens. */
		pthread_mutex_unlock(&maps.lock);
		return 0;
	}
	err = -ENOTTY;
	if (maps.no_query < 0) {
		/* Tests reach the text path on any kernel. */
		const char *f = getenv("SOFTVERBS_FAULT");

		maps.no_query = f && strstr(f, "maps_text") ? 1 : 0;
	}
	if (!maps.no_query) {
		err = check_query(fd, start, end, write);
		if (err == -ENOTTY)
			maps.no_query = 1;
	}
	if (err == -ENOTTY)
		err = check_text(fd, start, end, write);
	pthread_mutex_unlock(&maps.lock);
	return err == -ENOMEM ? 0 : err;
}

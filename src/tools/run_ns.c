/* SPDX-License-Identifier: MIT */
/*
 * The device where programs look for one: `softverbs run` gives the program
 * a private mount namespace in which /dev/infiniband holds the device's
 * nodes and /sys/class/infiniband{,_verbs,_mad} describe it, as the
 * kernel's ib_uverbs would on a host with an RDMA NIC.  UCX refuses a
 * device whose /dev/infiniband/<dev_name> is not an accessible character
 * device; Open MPI, ibstat/ibstatus and pyverbs' tests read sysfs.  Only
 * this program and its children see it: the host's /dev and /sys stay as
 * they are for everyone else.
 *
 * How:
 *   - root: unshare(CLONE_NEWNS); others: a user namespace too
 *     (CLONE_NEWUSER, the uid and gid mapped to themselves, so files and
 *     the daemon see the same user), which grants mount rights in it only;
 *   - /dev/infiniband: a tmpfs whose entries (uverbs0 and the device's
 *     name) are binds of /dev/null, a character device anybody may open.
 *     When the host has no /dev/infiniband to mount on, /dev itself becomes
 *     a tmpfs holding a bind of every entry of the host's /dev (their
 *     mounts, /dev/pts and /dev/shm, come along) plus infiniband/;
 *   - /sys/class: the same way, a tmpfs with a bind of each class of the
 *     host and our three classes as plain files, written from what the
 *     daemon answers now (device, port, GID table).
 *
 * Limits (README): a snapshot (addresses that change later are not in
 * sysfs, devices that appear later at the top of /dev are not there), and
 * for ordinary users the user namespace: set-uid programs do not gain
 * privileges inside it, and the kernel refuses process_vm_writev from
 * inside to a process outside (the engine then goes through the owner's
 * engine; the other direction works).  When namespaces are not allowed
 * (some containers), the program runs without them after one warning.
 */
#include "tool_int.h"
#include "sv_client.h"
#include "sv_param.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- small file helpers ------------------------------------------------ */

static int write_file(const char *path, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int write_file(const char *path, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int fd, n, ret = 0;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n)
		ret = -errno;
	close(fd);
	return ret;
}

static int mkdirs(const char *path)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* dir/name into out: 0 or -ENAMETOOLONG. */
static int join(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A regular file at path with a bind of src over it. */
static int bind_file(const char *src, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);

	if (fd < 0)
		return -errno;
	close(fd);
	return mount(src, path, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
}

/*
 * Covers dir with a tmpfs that keeps everything dir had: each entry of
 * the old directory (read through dfd) comes back as a bind (directories
 * recursively, so their mounts come along) or as the same symlink.
 * `skip` names entries to leave out.  0 or a negative errno.
 */
static int cover(const char *dir, const char *const *skip)
{
	char src[PATH_MAX], dst[PATH_MAX], link[PATH_MAX], fdpath[64];
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;
	struct dirent *e;
	DIR *d;

	if (dfd < 0)
		return -errno;
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID, "mode=0755") < 0) {
		err = -errno;
		close(dfd);
		return err;
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", dfd);
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	while ((e = readdir(d))) {
		struct stat st;
		int skipped = 0;
		ssize_t n;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		for (const char *const *s = skip; s && *s; s++)
			skipped |= !strcmp(*s, e->d_name);
		if (skipped || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (join(src, sizeof(src), fdpath, e->d_name) ||
		    join(dst, sizeof(dst), dir, e->d_name))
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlinkat(dfd, e->d_name, link, sizeof(link) - 1);
			if (n < 0)
				continue;
			link[n] = 0;
			if (symlink(link, dst) < 0)
				err = -errno;
		} else if (S_ISDIR(st.st_mode)) {
			if (mkdir(dst, st.st_mode & 07777) < 0 ||
			    mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
				err = -errno;
		} else {
			if (bind_file(src, dst))
				err = -errno;
		}
		/* One entry we could not bring back (e.g. a socket the host
		 * put there) does not stop the program. */
		if (err)
			sv_tool_err("warning: %s/%s not visible inside: %s", dir,
				    e->d_name, strerror(-err));
		err = 0;
	}
	closedir(d);
	return 0;
}

/* ---- what the device says ---------------------------------------------- */

static void gid_str(char *out, const uint8_t *g)
{
	for (int i = 0; i < 16; i += 2)
		sprintf(out + i / 2 * 5, "%02x%02x%s", g[i], g[i + 1],
			i < 14 ? ":" : "");
}

/* The kernel's sysfs files of one IB device (drivers/infiniband/core/
 * sysfs.c formats). */
static int write_ibdev(const char *base, const struct sv_tool_dev *di)
{
	char p[PATH_MAX], s[64], host[128] = "", ndev[IF_NAMESIZE];
	const struct ibv_port_attr *pa = &di->port;
	int err = 0;

	gethostname(host, sizeof(host) - 1);
#define W(name, ...)                                                           \
	do {                                                                   \
		if (!err)                                                      \
			err = join(p, sizeof(p), base, name);                  \
		err = err ? err : write_file(p, __VA_ARGS__);                  \
	} while (0)
#define D(name)                                                                \
	do {                                                                   \
		if (!err)                                                      \
			err = join(p, sizeof(p), base, name);                  \
		err = err ? err : mkdirs(p);                                   \
	} while (0)
	W("node_type", "1: CA\n");
	sv_tool_guid_str(s, sizeof(s), di->attr.orig_attr.node_guid);
	W("node_guid", "%s\n", s);
	sv_tool_guid_str(s, sizeof(s), di->attr.orig_attr.sys_image_guid);
	W("sys_image_guid", "%s\n", s);
	W("fw_ver", "%s\n", di->attr.orig_attr.fw_ver);
	W("hw_rev", "%u\n", di->attr.orig_attr.hw_ver);
	W("hca_type", "softverbs\n");
	W("board_id", "SOFTVERBS\n");
	W("node_desc", "%s %s\n", host, di->dev.name);
	D("device");
	W("device/numa_node", "-1\n");
	if (!err && sv_tool_port_netdev(di, ndev)) {
		/* The port's network device, where the kernel lists a NIC's
		 * (pyverbs' tests take its address from here). */
		char target[PATH_MAX], lnk[PATH_MAX];

		D("device/net");
		snprintf(target, sizeof(target), "/sys/class/net/%s", ndev);
		if (!err)
			err = join(lnk, sizeof(lnk), p, ndev);
		if (!err && symlink(target, lnk) < 0)
			err = -errno;
	}
	D("ports/1/gids");
	D("ports/1/gid_attrs/types");
	D("ports/1/gid_attrs/ndevs");
	D("ports/1/pkeys");
	W("ports/1/state", "%d: %s\n", pa->state,
	  pa->state == IBV_PORT_ACTIVE ? "ACTIVE" : "DOWN");
	W("ports/1/phys_state", "%u: %s\n", pa->phys_state,
	  pa->phys_state == 5 ? "LinkUp" : "Disabled");
	W("ports/1/rate", "100 Gb/sec (4X EDR)\n");
	W("ports/1/lid", "0x%x\n", pa->lid);
	W("ports/1/sm_lid", "0x%x\n", pa->sm_lid);
	W("ports/1/lid_mask_count", "%u\n", pa->lmc);
	W("ports/1/sm_sl", "%u\n", pa->sm_sl);
	W("ports/1/cap_mask", "0x%08x\n", pa->port_cap_flags);
	W("ports/1/link_layer", "%s\n",
	  pa->link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	W("ports/1/pkeys/0", "0xffff\n");
	for (int i = 0; i < pa->gid_tbl_len && i < SV_GID_TBL_LEN; i++) {
		uint8_t zero[16] = { 0 };
		const struct ibv_gid_entry *e = &di->gids.entries[i];
		int valid = sv_gid_valid(&di->gids, (uint32_t)i);
		char g[40], name[64], ifname[IF_NAMESIZE] = "";

		gid_str(g, valid ? e->gid.raw : zero);
		snprintf(name, sizeof(name), "ports/1/gids/%d", i);
		W(name, "%s\n", g);
		if (!valid)
			continue;
		snprintf(name, sizeof(name), "ports/1/gid_attrs/types/%d", i);
		W(name, "RoCE v2\n");
		if (if_indextoname(e->ndev_ifindex, ifname)) {
			snprintf(name, sizeof(name), "ports/1/gid_attrs/ndevs/%d", i);
			W(name, "%s\n", ifname);
		}
	}
#undef W
#undef D
	return err;
}

static int write_sysfs(const struct sv_tool_dev *di)
{
	char p[PATH_MAX];
	int err;

	snprintf(p, sizeof(p), "/sys/class/infiniband/%s", di->dev.name);
	err = mkdirs(p);
	if (!err)
		err = write_ibdev(p, di);
	if (!err)
		err = mkdirs("/sys/class/infiniband_verbs/uverbs0");
	if (!err)
		err = write_file("/sys/class/infiniband_verbs/abi_version", "6\n");
	if (!err)
		err = write_file("/sys/class/infiniband_verbs/uverbs0/ibdev",
				 "%s\n", di->dev.name);
	if (!err)
		err = write_file("/sys/class/infiniband_verbs/uverbs0/abi_version",
				 "1\n");
	if (!err)
		err = write_file("/sys/class/infiniband_verbs/uverbs0/dev",
				 "231:192\n");
	if (!err)
		err = mkdirs("/sys/class/infiniband_mad");
	if (!err)
		err = write_file("/sys/class/infiniband_mad/abi_version", "5\n");
	return err;
}

/* ---- the namespace ----------------------------------------------------- */

static int enter_userns(void)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	char m[64];
	int err;

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return -errno;
	snprintf(m, sizeof(m), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	err = write_file("/proc/self/uid_map", "%s", m);
	if (!err)
		err = write_file("/proc/self/setgroups", "deny\n");
	snprintf(m, sizeof(m), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (!err)
		err = write_file("/proc/self/gid_map", "%s", m);
	return err;
}

static int fault(const char *what)
{
	const char *f = getenv("SOFTVERBS_FAULT");

	return f && strstr(f, what) != NULL;
}

/*
 * iproute2's `rdma` asks the kernel over netlink, which knows no softverbs
 * device (pyverbs' tests find the port's network device with `rdma link
 * show -j`): inside, each `rdma` on the search path is a bind of this
 * command, which answers for the device when called by that name
 * (cmd_rdma.c).  Where there is none, nothing is covered.
 */
static void cover_rdma_tool(void)
{
	char self[PATH_MAX], p[PATH_MAX], real[PATH_MAX], dirs[2048];
	char done[16][PATH_MAX];
	const char *path = getenv("PATH");
	int ndone = 0;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return;
	self[n] = 0;
	snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/usr/bin:/sbin:/bin",
		 path ? path : "");
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d;
	     d = strtok_r(NULL, ":", &save)) {
		struct stat st;
		int seen = 0;

		if (*d != '/' || join(p, sizeof(p), d, "rdma") ||
		    !realpath(p, real) || stat(real, &st) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		for (int i = 0; i < ndone; i++)
			seen |= !strcmp(done[i], real);
		if (seen || ndone == 16)
			continue;
		snprintf(done[ndone++], PATH_MAX, "%s", real);
		if (mount(self, real, NULL, MS_BIND, NULL) < 0)
			sv_tool_err("warning: %s still asks the kernel inside: %s",
				    real, strerror(errno));
	}
}

static int build(const struct sv_tool_dev *di)
{
	static const char *const ib[] = { "infiniband", "infiniband_verbs",
					  "infiniband_mad", "infiniband_cm",
					  NULL };
	char p[PATH_MAX];
	struct stat st;
	int err;

	/* Nothing we mount here may reach the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	if (stat("/dev/infiniband", &st) == 0 && S_ISDIR(st.st_mode))
		err = mount("tmpfs", "/dev/infiniband", "tmpfs", MS_NOSUID,
			    "mode=0755") < 0 ? -errno : 0;
	else
		err = cover("/dev", NULL);
	if (!err)
		err = mkdirs("/dev/infiniband");
	if (!err)
		err = bind_file("/dev/null", "/dev/infiniband/uverbs0");
	if (!err) {
		snprintf(p, sizeof(p), "/dev/infiniband/%s", di->dev.name);
		err = bind_file("/dev/null", p);
	}
	if (err)
		return err;
	err = cover("/sys/class", ib);
	if (!err)
		err = write_sysfs(di);
	if (!err)
		cover_rdma_tool();
	return err;
}

/*
 * Enters the namespace (see the top of the file).  Returns 0, or 1 when
 * the program will run without it (the reason was printed once).
 */
int sv_run_namespace(void)
{
	struct sv_tool_dev di;
	const char *env = getenv("SOFTVERBS_NAMESPACE");
	int err;

	if (env && !strcmp(env, "0"))
		return 1;
	err = sv_tool_dev_query(&di);
	if (err) {
		sv_tool_err("warning: the device did not answer (%s): running without /dev/infiniband and /sys/class/infiniband",
			    strerror(-err));
		return 1;
	}
	if (fault("run_ns"))
		err = -EPERM;
	else if (geteuid() == 0)
		err = unshare(CLONE_NEWNS) < 0 ? -errno : 0;
	else
		err = enter_userns();
	if (!err)
		err = build(&di);
	if (err) {
		sv_tool_err("warning: no private mount namespace (%s): programs that look for /dev/infiniband/uverbs0 or /sys/class/infiniband (UCX, Open MPI, ibstat) will not find the device; see README \"softverbs run\"",
			    strerror(-err));
		return 1;
	}
	return 0;
}

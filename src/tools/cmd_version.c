/* SPDX-License-Identifier: MIT */
/*
 * softverbs version (--version), and the helpers that say which build and
 * which files are in use: the command itself, the libibverbs.so.1 that
 * `softverbs run` gives a program, the daemon it would start and the one
 * that runs.  Builds are read from the files (src/common/sv_build.c), so a
 * library or daemon of another build shows up as such.
 */
#include "tool_int.h"
#include "sv_build.h"
#include "sv_client.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int sv_tool_build_of(const char *path, char *buf, size_t len)
{
	const char *m, *end;
	struct stat st;
	size_t n;
	void *p;
	int fd;

	snprintf(buf, len, "unknown");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || st.st_size <= 0) {
		close(fd);
		return -1;
	}
	p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	end = (const char *)p + st.st_size;
	m = memmem(p, st.st_size, SV_BUILD_MARKER, sizeof(SV_BUILD_MARKER) - 1);
	if (m) {
		m += sizeof(SV_BUILD_MARKER) - 1;
		for (n = 0; m + n < end && m[n] && n + 1 < len; n++)
			;
		memcpy(buf, m, n);
		buf[n] = 0;
	}
	munmap(p, st.st_size);
	return m ? 0 : -1;
}

int sv_tool_lib_path(char *out, size_t len)
{
	char dir[PATH_MAX];

	if (sv_tool_find_libdir(dir, sizeof(dir)))
		return -1;
	if (snprintf(out, len, "%s/libibverbs.so.1", dir) >= (int)len)
		return -1;
	return 0;
}

/* "SHOWN, build ID" of the file read at path; marked when it is another
 * build than this command's. */
static void print_file(const char *what, const char *shown, const char *path)
{
	char build[128];

	if (sv_tool_build_of(path, build, sizeof(build)))
		printf("%-9s %s (no softverbs build marker)\n", what, shown);
	else
		printf("%-9s %s, build %s%s\n", what, shown, build,
		       strcmp(build, sv_build_id()) ? "  (another build!)" : "");
}

/* True for "libNAME.so.N": a soname link, what the loader opens. */
static int is_soname(const char *name)
{
	const char *so = strstr(name, ".so.");

	if (strncmp(name, "lib", 3) || !so || !so[4])
		return 0;
	for (so += 4; *so; so++)
		if (*so < '0' || *so > '9')
			return 0;
	return 1;
}

/*
 * Our libibverbs.so.1 (lib is its path) and every other softverbs library
 * beside it (librdmacm.so.1 ...): `softverbs run` puts that whole folder
 * first on the library path.
 */
static void print_libs(const char *lib)
{
	char dir[PATH_MAX], path[PATH_MAX + 256], build[128];
	struct dirent *e;
	char *slash;
	DIR *d;

	print_file("library", lib, lib);
	snprintf(dir, sizeof(dir), "%s", lib);
	slash = strrchr(dir, '/');
	if (!slash)
		return;
	*slash = 0;
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!is_soname(e->d_name) || !strcmp(e->d_name, slash + 1))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (sv_tool_build_of(path, build, sizeof(build)) == 0)
			print_file("library", path, path);
	}
	closedir(d);
}

int sv_cmd_version(int argc, char **argv)
{
	char self[PATH_MAX], path[PATH_MAX], dpath[PATH_MAX];
	struct sv_hello_rep h;
	ssize_t n;

	if (argc > 1) {
		if (sv_tool_is_help(argv[1])) {
			printf("usage: softverbs version\n"
			       "       softverbs --version\n\n"
			       "Prints the build of this command (version and git describe),\n"
			       "the libibverbs.so.1 that 'softverbs run' gives a program (and\n"
			       "every other softverbs library beside it), the daemon binary that\n"
			       "would be started, and the running daemon's version and binary,\n"
			       "if one runs.  Each file's build is read from the file; one of\n"
			       "another build is marked '(another build!)'.\n");
			return 0;
		}
		sv_tool_usage_err("version", "unexpected argument '%s'", argv[1]);
	}
	printf("softverbs %s, protocol %d\n", sv_build_id(), SV_PROTO_VERSION);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = 0;
		printf("%-9s %s\n", "command", self);
	}
	if (sv_tool_lib_path(path, sizeof(path)) == 0)
		print_libs(path);
	else
		printf("%-9s not found ('softverbs run' cannot work)\n", "library");
	if (realpath(sv_daemon_path(), dpath))
		print_file("daemon", dpath, dpath);
	else
		printf("%-9s %s (missing)\n", "daemon", sv_daemon_path());
	/* Never start the daemon just to ask its version. */
	if (sv_tool_probe() == 0 &&
	    sv_call_simple(SV_OP_HELLO, 0, 0, -1, NULL, 0, &h, sizeof(h)) == 0) {
		h.version[sizeof(h.version) - 1] = 0;
		printf("softverbsd %s running (protocol %u, pid %u, socket %s)\n",
		       h.version, h.proto_version, h.daemon_pid,
		       sv_tool_socket_where());
		snprintf(path, sizeof(path), "/proc/%u/exe", h.daemon_pid);
		n = readlink(path, dpath, sizeof(dpath) - 1);
		if (n > 0) {
			dpath[n] = 0;
			/* /proc/PID/exe opens the running binary even when
			 * its file was replaced or removed since. */
			print_file("running", dpath, path);
		}
	}
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * softverbs run CMD [ARGS...]: put our libibverbs.so.1 first on the
 * library path, make sure the device runs, and exec CMD (so its exit
 * status is CMD's own).
 */
#include "tool_int.h"
#include "sv_client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIBNAME "libibverbs.so.1"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softverbs run [--check] [--] CMD [ARGS...]\n"
		"\n"
		"Runs CMD with the softverbs libibverbs.so.1 first on LD_LIBRARY_PATH and\n"
		"the device daemon running.  CMD's exit status is returned; 127 when CMD\n"
		"is not found, 126 when it cannot be executed.\n"
		"\n"
		"  --check  the misuse checker: SOFTVERBS_CHECK=1 for CMD, each misuse\n"
		"           of the verbs one line on stderr (docs/checker.md)\n"
		"\n"
		"environment:\n"
		"  SOFTVERBS_LIBDIR  directory holding our libibverbs.so.1 (default: found\n"
		"                    next to this command: ../lib, ../lib/softverbs)\n"
		"  SOFTVERBSD        daemon binary (default: next to this command)\n"
		"  SOFTVERBS_SOCKET  daemon socket name (default softverbs.UID)\n");
}

/*
 * Tells our library from rdma-core's: an installed prefix may hold both
 * (e.g. /usr/lib), and putting rdma-core's first would silently run the
 * program on real hardware or none.  Ours names the daemon it starts.
 */
static int is_our_lib(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;
	void *p;
	int fd, ours;

	if (snprintf(path, sizeof(path), "%s/%s", dir, LIBNAME) >= (int)sizeof(path))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) < 0 || st.st_size <= 0) {
		close(fd);
		return 0;
	}
	p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return 0;
	ours = memmem(p, st.st_size, "SOFTVERBSD", 10) != NULL;
	munmap(p, st.st_size);
	return ours;
}

int sv_tool_find_libdir(char *out, size_t len)
{
	static const char *const rel[] = {
		"../lib",		    /* build tree: build/bin, build/lib */
		"../" SV_INSTALL_LIBDIR "/softverbs", /* installed, private */
		"../lib/softverbs",
		"../" SV_INSTALL_LIBDIR, /* installed next to other libs */
	};
	const char *env = getenv("SOFTVERBS_LIBDIR");
	char self[PATH_MAX], cand[PATH_MAX], *slash;
	ssize_t n;

	if (env && *env) {
		if (!is_our_lib(env)) {
			sv_tool_err("SOFTVERBS_LIBDIR=%s: no softverbs %s there",
				    env, LIBNAME);
			return -1;
		}
		snprintf(out, len, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		sv_tool_err("cannot find my own binary: %s", strerror(errno));
		return -1;
	}
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		if (snprintf(cand, sizeof(cand), "%s/%s", self, rel[i]) >=
		    (int)sizeof(cand))
			continue;
		if (is_our_lib(cand) && realpath(cand, out) && strlen(out) < len)
			return 0;
	}
	sv_tool_err("cannot find the softverbs %s near %s (set SOFTVERBS_LIBDIR)",
		    LIBNAME, self);
	return -1;
}

static int prepend_libpath(const char *dir)
{
	const char *old = getenv("LD_LIBRARY_PATH");
	size_t dl = strlen(dir);
	char *v;
	int err;

	if (!old || !*old)
		return setenv("LD_LIBRARY_PATH", dir, 1);
	/* Already first (nested 'softverbs run'): leave it alone. */
	if (!strncmp(old, dir, dl) && (old[dl] == ':' || old[dl] == 0))
		return 0;
	v = malloc(dl + strlen(old) + 2);
	if (!v)
		return -1;
	sprintf(v, "%s:%s", dir, old);
	err = setenv("LD_LIBRARY_PATH", v, 1);
	free(v);
	return err;
}

int sv_cmd_run(int argc, char **argv)
{
	char libdir[PATH_MAX];
	const char *env;
	int i = 1, err;

	if (i < argc && sv_tool_is_help(argv[i])) {
		usage(stdout);
		return 0;
	}
	if (i < argc && !strcmp(argv[i], "--check")) {
		if (setenv("SOFTVERBS_CHECK", "1", 1)) {
			sv_tool_err("cannot set SOFTVERBS_CHECK: %s",
				    strerror(errno));
			return 1;
		}
		i++;
	}
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	else if (i < argc && argv[i][0] == '-')
		sv_tool_usage_err("run", "unknown option '%s'", argv[i]);
	if (i >= argc)
		sv_tool_usage_err("run", "no command given");

	if (sv_tool_find_libdir(libdir, sizeof(libdir)))
		return 1;
	if (prepend_libpath(libdir)) {
		sv_tool_err("cannot set LD_LIBRARY_PATH: %s", strerror(errno));
		return 1;
	}
	env = getenv("SOFTVERBSD");
	if (!env || !*env) {
		char path[PATH_MAX];

		/* The daemon of this installation, whatever the library
		 * would guess from its own location. */
		if (realpath(sv_daemon_path(), path))
			setenv("SOFTVERBSD", path, 1);
	}
	err = sv_daemon_ensure();
	if (err) {
		sv_tool_err("cannot start the device daemon %s: %s",
			    sv_daemon_path(), strerror(-err));
		return 1;
	}
	sv_tool_wire_warn();
	/* /dev/infiniband and /sys/class/infiniband for this program only. */
	sv_run_namespace();
	/* The program opens its own channel; ours must not leak into it. */
	sv_chan_reset();

	execvp(argv[i], argv + i);
	err = errno;
	if (err == ENOENT) {
		sv_tool_err("%s: command not found", argv[i]);
		return 127;
	}
	sv_tool_err("%s: %s", argv[i], strerror(err));
	return 126;
}

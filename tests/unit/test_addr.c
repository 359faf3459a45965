/* SPDX-License-Identifier: MIT */
/*
 * Unit test of src/common/sv_addr.c, where the daemon listens when another
 * uid holds its abstract name: the socket file's name, the private
 * directory's checks (not ours, open to others, a symlink, relative),
 * a path past sun_path's 107 bytes, and who holds the abstract name.
 * The directory owned by another uid needs root; without it that check is
 * skipped, and said so.
 */
#include "sv_addr.h"
#include "sv_sock.h"
#include "unit_test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char base[64];

static int only_file_chars(const char *s)
{
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789._-+") == strlen(s);
}

static void file_names(void)
{
	char a[96], b[96], longname[108], at48[49], at49[50];

	sv_fallback_file(a, sizeof(a), "softverbs.1000", 4026531840ULL);
	EXPECT(!strcmp(a, "softverbs.1000.net4026531840"));
	/* Another namespace, another file. */
	sv_fallback_file(b, sizeof(b), "softverbs.1000", 4026532001ULL);
	EXPECT(strcmp(a, b));
	/* A byte outside the set: hashed, and told apart from a name that
	 * maps to the same prefix. */
	sv_fallback_file(a, sizeof(a), "a/b", 1);
	sv_fallback_file(b, sizeof(b), "a_b", 1);
	EXPECT(strchr(a, '+') && !strchr(b, '+'));
	EXPECT(strcmp(a, b));
	EXPECT(only_file_chars(a));
	sv_fallback_file(b, sizeof(b), "a\\b", 1);
	EXPECT(strcmp(a, b));
	/* The longest abstract name still fits, with the largest inode. */
	memset(longname, 'x', 107);
	longname[107] = 0;
	sv_fallback_file(a, sizeof(a), longname, ~0ULL);
	EXPECT(strlen(a) <= 73 && strchr(a, '+'));
	memset(at48, 'y', 48);
	at48[48] = 0;
	sv_fallback_file(a, sizeof(a), at48, 7);
	EXPECT(!strchr(a, '+') && !strncmp(a, at48, 48));
	memset(at49, 'y', 49);
	at49[49] = 0;
	sv_fallback_file(a, sizeof(a), at49, 7);
	EXPECT(strchr(a, '+'));
}

static void directory_checks(void)
{
	struct sv_fallback fb;
	char why[PATH_MAX + 128], sub[128], expect[PATH_MAX];
	struct stat st;

	setenv("XDG_RUNTIME_DIR", base, 1);
	setenv("SOFTVERBS_SOCKET", "svunit.addr", 1);
	/* The library never creates it. */
	EXPECT(sv_fallback_open(&fb, 0, 0, why, sizeof(why)) == -ENOENT);
	EXPECT(sv_fallback_open(&fb, 0, 1, why, sizeof(why)) == 0);
	snprintf(expect, sizeof(expect), "%s/softverbs/svunit.addr.net", base);
	EXPECT(!strncmp(fb.path, expect, strlen(expect)));
	EXPECT(!strcmp(fb.addr.sun_path, fb.path));
	EXPECT(!strcmp(fb.lock + strlen(fb.file), ".lock"));
	sv_fallback_close(&fb);
	snprintf(sub, sizeof(sub), "%s/softverbs", base);
	EXPECT(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700);
	/* Now the library finds it. */
	EXPECT(sv_fallback_open(&fb, 0, 0, why, sizeof(why)) == 0);
	sv_fallback_close(&fb);

	/* A base others may write in. */
	EXPECT(chmod(base, 0777) == 0);
	EXPECT(sv_fallback_open(&fb, 0, 1, why, sizeof(why)) == -EPERM);
	EXPECT(strstr(why, "others may write"));
	EXPECT(chmod(base, 0700) == 0);
	/* Our directory opened to others. */
	EXPECT(chmod(sub, 0755) == 0);
	EXPECT(sv_fallback_open(&fb, 0, 0, why, sizeof(why)) == -EPERM);
	EXPECT(strstr(why, "0700 wanted"));
	EXPECT(chmod(sub, 0700) == 0);
	/* A symlink where our directory should be is not followed. */
	EXPECT(rename(sub, strcat(strcpy(expect, base), "/real")) == 0);
	EXPECT(symlink("real", sub) == 0);
	EXPECT(sv_fallback_open(&fb, 0, 1, why, sizeof(why)) < 0);
	EXPECT(unlink(sub) == 0 && rename(expect, sub) == 0);
	/* Not an absolute path. */
	setenv("XDG_RUNTIME_DIR", "run/user", 1);
	EXPECT(sv_fallback_open(&fb, 0, 1, why, sizeof(why)) == -EINVAL);
	unsetenv("XDG_RUNTIME_DIR");
	EXPECT(sv_fallback_open(&fb, 0, 1, why, sizeof(why)) == -ENOENT);
	setenv("XDG_RUNTIME_DIR", base, 1);

	if (getuid() != 0) {
		printf("skip: a directory of another uid needs root\n");
		return;
	}
	EXPECT(chown(sub, 65534, 65534) == 0);
	EXPECT(sv_fallback_open(&fb, 0, 0, why, sizeof(why)) == -EPERM);
	EXPECT(strstr(why, "belongs to uid 65534"));
	EXPECT(chown(sub, 0, 0) == 0);
}

/* Past 107 bytes the socket is reached through the directory's fd. */
static void long_path(void)
{
	struct sv_fallback fb, fb2;
	char dir[PATH_MAX], why[PATH_MAX + 128];
	struct ucred cred;
	int l, c;

	snprintf(dir, sizeof(dir), "%s/%0100d", base, 0);
	EXPECT(mkdir(dir, 0700) == 0);
	setenv("XDG_RUNTIME_DIR", dir, 1);
	EXPECT(sv_fallback_open(&fb, 0, 1, why, sizeof(why)) == 0);
	EXPECT(strlen(fb.path) >= sizeof(fb.addr.sun_path));
	EXPECT(!strncmp(fb.addr.sun_path, "/proc/self/fd/", 14));
	l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	EXPECT(l >= 0);
	EXPECT(bind(l, (struct sockaddr *)&fb.addr, fb.len) == 0);
	EXPECT(listen(l, 4) == 0);
	/* The socket is in the real directory, under its real name. */
	EXPECT(access(fb.path, F_OK) == 0);
	/* Another opening (another fd number) reaches it. */
	EXPECT(sv_fallback_open(&fb2, 0, 0, why, sizeof(why)) == 0);
	c = sv_connect_addr(&fb2.addr, fb2.len, 0, &cred);
	EXPECT(c >= 0 && cred.pid == getpid() && cred.uid == getuid());
	close(c);
	close(l);
	unlink(fb.path);
	sv_fallback_close(&fb2);
	sv_fallback_close(&fb);
	setenv("XDG_RUNTIME_DIR", base, 1);
}

static void holder_states(void)
{
	struct sockaddr_un addr;
	struct sv_holder h;
	socklen_t len;
	char name[64];
	int s, c, diag;

	snprintf(name, sizeof(name), "svunit.holder.%d", (int)getpid());
	setenv("SOFTVERBS_SOCKET", name, 1);
	len = sv_socket_addr(&addr);
	sv_abstract_holder(&h);
	EXPECT(h.state == SV_HOLDER_FREE || h.state == SV_HOLDER_UNKNOWN);
	diag = h.state == SV_HOLDER_FREE;
	s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	EXPECT(s >= 0 && bind(s, (struct sockaddr *)&addr, len) == 0);
	sv_abstract_holder(&h);
	if (diag)
		EXPECT(h.state == SV_HOLDER_BOUND && h.uid == (long)getuid());
	else
		printf("skip: no sock_diag here: a bound-only holder is unknown\n");
	/* Backlog 0 holds one connection; the next finds it full. */
	EXPECT(listen(s, 0) == 0);
	c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
	EXPECT(c >= 0 && connect(c, (struct sockaddr *)&addr, len) == 0);
	sv_abstract_holder(&h);
	EXPECT(h.state == SV_HOLDER_FULL);
	EXPECT(!diag || h.uid == (long)getuid());
	close(c);
	close(s);
	s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	EXPECT(s >= 0 && bind(s, (struct sockaddr *)&addr, len) == 0);
	EXPECT(listen(s, 8) == 0);
	sv_abstract_holder(&h);
	EXPECT(h.state == SV_HOLDER_LISTENING && h.pid == getpid() &&
	       h.uid == (long)getuid());
	close(s);
}

int main(void)
{
	snprintf(base, sizeof(base), "/tmp/svunit-addr.XXXXXX");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	file_names();
	directory_checks();
	long_path();
	holder_states();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
		if (system(cmd))
			failures++;
	}
	return unit_result();
}

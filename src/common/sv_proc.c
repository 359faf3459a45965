/* SPDX-License-Identifier: MIT */
#include "sv_proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int sv_pid_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	/* The state follows the ") " that ends the command name. */
	if (!p || !(p = strrchr(buf, ')')))
		return 1;
	return p[1] != ' ' || p[2] != 'Z';
}

/* SPDX-License-Identifier: MIT */
#include "sv_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The kernel's PF_EXITING task flag (include/linux/sched.h), set when a
 * thread starts its exit, before its memory goes. */
#define SV_PF_EXITING 0x4ul

enum sv_pid_state sv_pid_state(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return SV_PID_GONE;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? SV_PID_GONE :
							  SV_PID_RUNNING;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 && errno == ESRCH ? SV_PID_GONE : SV_PID_RUNNING;
	buf[n] = 0;
	/* The state follows the ") " that ends the command name. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return SV_PID_RUNNING;
	if (p[2] == 'Z' || p[2] == 'X' || p[2] == 'x')
		return SV_PID_GONE;
	/* The spaces before: state ppid pgrp session tty_nr tpgid flags. */
	for (int f = 0; f < 7 && p; f++)
		p = strchr(p + 1, ' ');
	return p && (strtoul(p + 1, NULL, 10) & SV_PF_EXITING) ?
		       SV_PID_EXITING :
		       SV_PID_RUNNING;
}

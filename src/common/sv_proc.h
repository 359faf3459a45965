/* SPDX-License-Identifier: MIT */
/* What /proc says about another process. */
#ifndef SV_PROC_H
#define SV_PROC_H

#include <sys/types.h>

/*
 * Nonzero while process pid exists and is not a zombie: a zombie serves
 * nobody, and a detached daemon's parent may never reap it.  A pid whose
 * /proc entry cannot be read counts as gone.
 */
int sv_pid_alive(pid_t pid);

#endif

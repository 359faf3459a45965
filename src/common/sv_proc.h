/* SPDX-License-Identifier: MIT */
/* What /proc says about another process. */
#ifndef SV_PROC_H
#define SV_PROC_H

#include <sys/types.h>

enum sv_pid_state {
	SV_PID_RUNNING, /* there, not exiting */
	/* In its exit (the kernel's PF_EXITING), not yet a zombie: its
	 * memory may be torn down already (process_vm_readv/writev answer
	 * ESRCH) while it still closes its files or, as the init of a PID
	 * namespace, waits for the namespace's processes to be reaped. */
	SV_PID_EXITING,
	/* Not there, a zombie, or dead: serves nobody (a detached daemon's
	 * parent may never reap it). */
	SV_PID_GONE,
};

/* Where process pid is.  A pid whose /proc entry cannot be read for
 * another reason than its absence counts as running. */
enum sv_pid_state sv_pid_state(pid_t pid);

/* Nonzero while process pid is there and not a zombie (exiting or not). */
static inline int sv_pid_alive(pid_t pid)
{
	return sv_pid_state(pid) != SV_PID_GONE;
}

#endif

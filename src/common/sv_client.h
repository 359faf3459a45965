/* SPDX-License-Identifier: MIT */
/*
 * The process's private control channel to softverbsd (docs/architecture.md
 * "One channel per process").  Linked into libibverbs.so.1 and the softverbs
 * command.  Thread-safe: one request at a time per process.  A child made
 * by fork() never uses its parent's connection; it opens its own.
 */
#ifndef SV_CLIENT_H
#define SV_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "sv_proto.h"

struct sv_call {
	uint16_t op;
	uint32_t ufile;
	/* Non-zero: the call belongs to a context of this daemon instance;
	 * if the daemon is another one (or gone) the call fails with -EIO and
	 * no daemon is started. */
	uint64_t instance;
	/* The context's cmd_fd, presented with SV_OP_ATTACH when the channel
	 * is new to the ufile (after fork()); -1 if none. */
	int attach_fd;
	const void *req;
	size_t req_len;
	const int *fds;
	int nfds;
	void *rep;	/* reply payload buffer, may be NULL */
	size_t rep_cap;
	size_t rep_len; /* out: payload bytes received */
	int *rfds;	/* out: descriptors received */
	int max_rfds;
	int nrfds;	/* out */
};

/*
 * Performs one request/reply on the process's channel, connecting (and
 * starting the daemon, unless c->instance is set) when needed.  Returns the
 * daemon's status (0 or a negative errno) or a negative errno of the
 * transport: -EIO when the daemon went away, -ENODEV when it can't be
 * reached or started.  On failure no descriptor is left in c->rfds.
 */
int sv_call(struct sv_call *c);

/* Convenience for ops with fixed-size request and reply, no fds. */
int sv_call_simple(uint16_t op, uint32_t ufile, uint64_t instance,
		   int attach_fd, const void *req, size_t req_len, void *rep,
		   size_t rep_cap);

/* Instance id of the daemon the channel talks to (connecting and starting
 * it if needed); 0 with *err set when unreachable. */
uint64_t sv_chan_instance(int *err);

/* Connects if the daemon runs, never starting it: 0, -ENODEV, or -EACCES
 * when only a listener of another uid answers on our abstract name and no
 * daemon of ours listens on the fallback socket (sv_addr.h). */
int sv_chan_probe(void);

/* Where the channel is connected: "@NAME" (the abstract socket) or the
 * path of the fallback socket (sv_addr.h); "" when not connected.  A
 * static buffer, overwritten by the next call. */
const char *sv_chan_where(void);

/* Drops the channel (the next call reconnects). */
void sv_chan_reset(void);

/* Starts the daemon if it is not running and waits until it answers.
 * Returns 0 or a negative errno (with one clear log line). */
int sv_daemon_ensure(void);

/* Path of the daemon binary that would be started. */
const char *sv_daemon_path(void);

#endif

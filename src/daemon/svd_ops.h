/* SPDX-License-Identifier: MIT */
/*
 * The op table's contract: what an op handler gets and gives.  The table
 * itself is in conn.c; object ops (pd.c, mr.c, dm.c, ...) add their
 * entries through SVD_OBJECT_OPS below.
 */
#ifndef SVD_OPS_H
#define SVD_OPS_H

#include "svd_int.h"

struct svd_req {
	struct svd_conn *conn;
	const struct sv_msg_hdr *hdr;
	const void *body; /* payload, r->len bytes, size already checked */
	size_t len;
	int *fds; /* received descriptors; an op that keeps one sets it to -1,
		     the rest are closed after the op */
	int nfds;
	struct svd_ufile *uf; /* NEED_UFILE ops: the ufile, viewed by conn */
	struct svd_ctx *view;
	void *rep;	 /* reply payload buffer (SV_MSG_MAX - header), zeroed */
	size_t rep_len;	 /* set by the op */
	int out_fds[SV_MAX_FDS]; /* sent with the reply, then closed */
	int n_out_fds;
};

/* flags of struct svd_op */
#define NEED_UFILE 1u /* hdr.ufile must name a ufile this channel views */
#define VAR_SIZE 2u   /* payload of at least .size bytes (op checks more) */
#define ONE_FD 4u     /* exactly one descriptor attached */

struct svd_op {
	/* Returns 0 or a negative errno (the reply's status). */
	int (*fn)(struct svd_req *r);
	uint32_t size; /* exact payload size (or minimum with VAR_SIZE) */
	uint32_t flags;
};

/* Object ops, one line per op: [SV_OP_X] = { fn, sizeof(req), flags }, */
#define SVD_OBJECT_OPS

#endif

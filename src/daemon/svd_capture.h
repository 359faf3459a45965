/* SPDX-License-Identifier: MIT */
/*
 * capture.c: `softverbs capture` sessions and the engines' capture rings
 * (sv_proto.h "Capture").
 */
#ifndef SVD_CAPTURE_H
#define SVD_CAPTURE_H

#include "svd_int.h"

struct svd_req;
int svd_op_capture_start(struct svd_req *r);
int svd_op_capture_ring(struct svd_req *r);
int svd_op_capture_stats(struct svd_req *r);

/*
 * A packet the daemon itself sends or receives (the wire gateway): r
 * describes it (pid: the process it is for or from, qpn: the local QP),
 * ib holds r->ib_len bytes of IBTA packet without ICRC.  Written to every
 * session whose filter takes it; costs nothing without sessions.  Does
 * not block; the bytes reach the pipes at svd_capture_flush().
 */
void svd_capture_frame(const struct sv_cap_rec *r, const void *ib);

/* Moves what the sessions buffered into their pipes (main loop, once per
 * batch of events). */
void svd_capture_flush(void);

/* The doorbell or a session's pipe (SVD_W_CAPTURE) has events. */
void svd_capture_event(struct svd_watch *w, uint32_t events);

/* The channel closed: its capture ring is drained one last time and
 * dropped. */
void svd_capture_conn_gone(struct svd_conn *c);

/* A session runs (the daemon does not exit for idleness meanwhile). */
int svd_capture_busy(void);

/* Daemon shutdown: every session ends (its reader sees EOF). */
void svd_capture_close_all(void);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of the data path: the key table (keytab.c) and the
 * link broker (broker.c).  See sv_keytab.h and sv_proto.h "Engines, links
 * and keys".
 */
#ifndef SVD_ENGINE_H
#define SVD_ENGINE_H

#include "svd_int.h"
#include "svd_mr.h"

/* keytab.c */
/* Creates the key table memfd (at daemon start, so its descriptor is part
 * of every baseline).  Returns 0 or a negative errno. */
int svd_keytab_init(void);
/* A new descriptor for the key table memfd (read-only mapping only: the
 * memfd is sealed against new writable mappings), or a negative errno. */
int svd_keytab_dup(void);
/* Bytes of the key table. */
uint64_t svd_keytab_size(void);
/* Publishes mr's current state under mr->key (reg, rereg); the engines
 * see it before the op's reply leaves. */
void svd_keytab_publish(const struct svd_mr *mr);
/* The key stops naming anything (dereg, ufile teardown). */
void svd_keytab_unpublish(uint32_t key);
/* Writes port 1's block (port.c: GID table, MTU) under its seqlock; the
 * caller's seq is ignored. */
struct sv_keytab_port;
void svd_keytab_port_publish(const struct sv_keytab_port *port);
/* Publishes the number of capture sessions running (sv_keytab_hdr). */
void svd_keytab_set_capture(uint32_t n);

/* Op handlers. */
struct svd_req;
int svd_op_key_fd(struct svd_req *r);
int svd_op_mw_bind(struct svd_req *r);
int svd_op_key_invalidate(struct svd_req *r);

/* broker.c */
/* 0 when fd is a memfd sealed against shrinking and growing of exactly
 * ring_size bytes (a ring another process can map safely), else -EINVAL. */
int svd_check_ring_fd(int fd, uint64_t ring_size);
int svd_op_engine_attach(struct svd_req *r);
int svd_op_qpn_lookup(struct svd_req *r);
int svd_op_link_connect(struct svd_req *r);
int svd_op_async_event(struct svd_req *r);
int svd_op_wire_attach(struct svd_req *r);
/* The engine socket of a process became readable: only EOF (the process
 * died or detached) or garbage arrive there. */
struct svd_engine;
void svd_engine_readable(struct svd_engine *e);
/* The process's control channel closed: its engine goes with it (the
 * channel is private to the process, so this is the process's end). */
void svd_engine_conn_gone(struct svd_conn *c);
/* ufile `id` is being destroyed: every engine may drop what it kept for
 * the MRs it registered there (they outlive their context while the
 * ufile lives, as in the kernel). */
void svd_engines_ufile_gone(uint32_t id);
/* XRC TGT QP qpn is served by the engine of process pid now (0: none):
 * that engine adopts it, the others forget where it was (xrcd.c). */
void svd_engines_xrc_serve(uint32_t qpn, pid_t pid);
/* Nonzero when process pid has an engine attached. */
int svd_engine_of_pid(pid_t pid);
/* Tells the engine of process pid that XRC TGT QP qpn had event `type`
 * (SV_ENGINE_XRC_EVENT). */
void svd_engine_xrc_event(pid_t pid, uint32_t qpn, uint32_t type);
/* Drops every engine (daemon shutdown). */
void svd_engines_close(void);

#endif

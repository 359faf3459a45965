/* SPDX-License-Identifier: MIT */
/*
 * The control protocol between libibverbs.so.1 (and the softverbs command)
 * and softverbsd.  Shared by both sides; nothing here is public ABI.
 *
 * Transport: an AF_UNIX SOCK_SEQPACKET connection, one per process (never
 * shared across fork()).  Every message is one datagram:
 *
 *   | field   | size | meaning                                            |
 *   |---------|------|----------------------------------------------------|
 *   | magic   | 4    | SV_PROTO_MAGIC                                      |
 *   | version | 2    | SV_PROTO_VERSION; a mismatch gets -EPROTO           |
 *   | op      | 2    | enum sv_op                                          |
 *   | len     | 4    | whole datagram, header included                     |
 *   | seq     | 4    | chosen by the client, echoed in the reply           |
 *   | ufile   | 4    | ufile id the command acts on (0: none)              |
 *   | status  | 4    | reply only: 0 or a negative errno                   |
 *
 * The payload follows immediately and its size must be exactly the size of
 * the op's request struct (checked by the daemon, svd_dispatch) or, for the
 * variable ops, within the bounds documented at the op.  File descriptors
 * travel as SCM_RIGHTS ancillary data; an op that expects none and receives
 * some closes them and answers -EINVAL.
 *
 * The protocol is strictly request/reply: a client never has more than one
 * request outstanding on its channel, so replies cannot be misrouted.
 */
#ifndef SV_PROTO_H
#define SV_PROTO_H

#include <assert.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "sv_param.h"
#include "sv_roce.h"

#define SV_PROTO_MAGIC 0x31505653u /* "SVP1" little-endian */
#define SV_PROTO_VERSION 1
#define SV_MSG_MAX 8192 /* largest datagram either side accepts */
#define SV_MAX_FDS 4	/* most fds one message carries */

/* Status the daemon answers when the channel has not proved membership of
 * the ufile (not an errno; the library answers it with SV_OP_ATTACH). */
#define SV_ERR_NOT_ATTACHED (-100000)

struct sv_msg_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t op;
	uint32_t len;
	uint32_t seq;
	uint32_t ufile;
	int32_t status;
};
static_assert(sizeof(struct sv_msg_hdr) == 24, "wire header layout");

enum sv_op {
	SV_OP_HELLO = 1,    /* -> sv_hello_rep */
	SV_OP_PING,	    /* empty both ways: one bare round trip */
	SV_OP_DEVICE_INFO,  /* -> sv_device_info */
	SV_OP_OPEN_DEVICE,  /* -> sv_ctx_rep + fds {cmd_fd, async_fd} */
	SV_OP_IMPORT_DEVICE,/* fd {cmd_fd} -> sv_ctx_rep + fd {async_fd} */
	SV_OP_ATTACH,	    /* fd {cmd_fd} -> sv_ctx_rep (no fd): proves
			       ufile membership on a new channel (after fork) */
	SV_OP_CLOSE_CONTEXT,/* sv_ctx_req -> empty */
	SV_OP_QUERY_DEVICE, /* -> struct ibv_device_attr_ex */
	SV_OP_QUERY_PORT,   /* sv_port_req -> struct ibv_port_attr */
	SV_OP_QUERY_GIDS,   /* sv_port_req -> sv_gid_table */
	SV_OP_STATUS,	    /* -> sv_status_rep */
	SV_OP_SHUTDOWN,	    /* -> empty, then the daemon exits */

	/* Objects (issue: seed verbs).  All carry hdr.ufile. */
	SV_OP_ALLOC_PD = 32,
	SV_OP_DEALLOC_PD,
	SV_OP_IMPORT_PD,
	SV_OP_REG_MR,
	SV_OP_REREG_MR,
	SV_OP_DEREG_MR,
	SV_OP_IMPORT_MR,
	SV_OP_ALLOC_DM,
	SV_OP_FREE_DM,
	SV_OP_IMPORT_DM,
	SV_OP_RES_LIST,
	SV_OP_REG_DMABUF_MR, /* sv_reg_mr_req (addr = offset) + fd -> sv_mr_rep */
	SV_OP_REG_DM_MR,     /* sv_reg_dm_mr_req -> sv_mr_rep */
	SV_OP_ALLOC_NULL_MR, /* sv_handle_req (the PD) -> sv_mr_rep */
	SV_OP_QP_ERR_SET,    /* sv_qp_err -> empty */
	SV_OP_QP_ERR_GET,    /* sv_qp_err_get_req -> sv_qp_err */

	/* Data-path objects (issue 4, verbs side): see "Data-path objects". */
	SV_OP_CREATE_CQ = 64, /* sv_create_cq_req + fd {CQ region} -> sv_obj_rep */
	SV_OP_DESTROY_CQ,     /* sv_handle_req -> empty (-EBUSY while used) */
	SV_OP_RESIZE_CQ,      /* sv_create_cq_req (handle) -> empty */
	SV_OP_CREATE_QP,      /* sv_create_qp_req + fd {QP region} -> sv_qp_rep */
	SV_OP_MODIFY_QP,      /* sv_modify_qp_req -> empty */
	SV_OP_DESTROY_QP,     /* sv_handle_req -> empty */
	SV_OP_CREATE_SRQ,     /* sv_create_srq_req + fd {SRQ region} -> sv_obj_rep */
	SV_OP_MODIFY_SRQ,     /* sv_create_srq_req (handle) -> empty */
	SV_OP_DESTROY_SRQ,    /* sv_handle_req -> empty (-EBUSY while used) */
	SV_OP_CREATE_AH,      /* sv_create_ah_req -> sv_obj_rep */
	SV_OP_DESTROY_AH,     /* sv_handle_req -> empty */
	SV_OP_ALLOC_MW,	      /* sv_alloc_mw_req -> sv_mw_rep */
	SV_OP_DEALLOC_MW,     /* sv_handle_req -> empty */
	SV_OP_ATTACH_MCAST,   /* sv_mcast_req -> empty */
	SV_OP_DETACH_MCAST,   /* sv_mcast_req -> empty */
	SV_OP_OPEN_XRCD,      /* sv_open_xrcd_req (+ fd {file}) -> sv_xrcd_rep */
	SV_OP_CLOSE_XRCD,     /* sv_handle_req -> empty (-EBUSY while used) */
	SV_OP_CREATE_XRC_SRQ, /* sv_create_xrc_srq_req + fd {SRQ region} ->
				 sv_xrc_srq_rep */
	SV_OP_OPEN_QP,	      /* sv_open_qp_req -> sv_qp_rep + fd {QP region} */

	/* Engine side (issue 4): see "Engines, links and keys". */
	SV_OP_ENGINE_ATTACH = 96, /* fd {doorbell} -> sv_engine_attach_rep +
				     fds {engine socket, key table memfd} */
	SV_OP_QPN_LOOKUP,	  /* sv_qpn_req -> sv_qpn_rep */
	SV_OP_LINK_CONNECT,	  /* sv_link_req + fd {ring memfd} ->
				     sv_link_rep + fd {target's doorbell} */
	SV_OP_KEY_FD,		  /* sv_key_req -> sv_key_fd_rep + fd {memfd} */
	SV_OP_MW_BIND,		  /* sv_mw_bind_req -> empty */
	SV_OP_KEY_INVALIDATE,	  /* sv_key_req -> empty */
	SV_OP_ASYNC_EVENT,	  /* sv_async_req -> empty */
	SV_OP_QP_PEER,		  /* sv_qpn_req -> sv_qp_peer_rep + fds {QP,
				     receive CQ[, SRQ] regions} */
	SV_OP_WIRE_ATTACH,	  /* -> sv_wire_attach_rep + fds {gateway ring,
				     wire page[, port's socket]} */
	SV_OP_MCAST_MEMBERS,	  /* sv_mcast_members_req ->
				     sv_mcast_members_rep */
	SV_OP_SRQ_PEER,		  /* sv_qpn_req (an SRQ number) ->
				     sv_srq_peer_rep + fds {SRQ, CQ regions} */
	SV_OP_XRC_EVENT,	  /* sv_xrc_event_req -> empty */

	/* Connection manager (issue 10, librdmacm): see sv_cm.h.  Every
	 * request starts with a sv_cm_hdr naming the channel. */
	SV_OP_CM_OPEN = 128,	  /* -> sv_cm_open_rep + fd {event socket} */
	SV_OP_CM_GET_EVENT,	  /* sv_cm_hdr -> sv_cm_event (-EAGAIN: none) */
	SV_OP_CM_CREATE_ID,	  /* sv_cm_create_req -> sv_cm_id_rep */
	SV_OP_CM_DESTROY_ID,	  /* sv_cm_hdr -> sv_cm_id_rep (events) */
	SV_OP_CM_BIND,		  /* sv_cm_addr_req -> empty */
	SV_OP_CM_RESOLVE_ADDR,	  /* sv_cm_addr_req -> empty, then an event */
	SV_OP_CM_RESOLVE_ROUTE,	  /* sv_cm_int_req -> empty, then an event */
	SV_OP_CM_QUERY,		  /* sv_cm_hdr -> sv_cm_query_rep */
	SV_OP_CM_INIT_QP_ATTR,	  /* sv_cm_int_req -> sv_cm_qp_attr_rep */
	SV_OP_CM_LISTEN,	  /* sv_cm_int_req -> empty */
	SV_OP_CM_CONNECT,	  /* sv_cm_conn_req -> empty */
	SV_OP_CM_ACCEPT,	  /* sv_cm_conn_req -> empty */
	SV_OP_CM_REJECT,	  /* sv_cm_conn_req -> empty */
	SV_OP_CM_DISCONNECT,	  /* sv_cm_hdr -> empty */
	SV_OP_CM_NOTIFY,	  /* sv_cm_int_req -> empty */
	SV_OP_CM_SET_OPTION,	  /* sv_cm_opt_req -> empty */
	SV_OP_CM_MIGRATE,	  /* sv_cm_migrate_req -> sv_cm_id_rep */
	SV_OP_CM_JOIN_MCAST,	  /* sv_cm_addr_req -> empty, then an event */

	/* Capture (issue 9, `softverbs capture`): see "Capture". */
	SV_OP_CAPTURE_START = 160, /* sv_capture_req -> sv_capture_rep + fd
				      {pcap stream} */
	SV_OP_CAPTURE_RING,	   /* sv_capture_ring_req + fd {ring memfd} ->
				      empty + fd {the daemon's doorbell} */
	SV_OP_CAPTURE_STATS,	   /* sv_capture_rep (session) ->
				      sv_capture_stats_rep */

	/* Fault plans (`softverbs fault`, docs/faults.md): sv_proto_fault.h. */
	SV_OP_FAULT = 176,	   /* sv_fault_req -> sv_fault_rep */

	SV_OP_MAX
};

/* A daemon instance is told apart by a random id chosen at start: contexts
 * made with one instance are dead for any other. */
struct sv_hello_rep {
	uint64_t instance;
	uint32_t daemon_pid;
	uint32_t proto_version;
	char version[32];
};

struct sv_device_info {
	char name[64];
	uint64_t node_guid; /* network byte order, as ibv_get_device_guid */
	uint32_t num_ports;
	uint32_t pad;
};

/* Reply to OPEN_DEVICE / IMPORT_DEVICE / ATTACH. */
struct sv_ctx_rep {
	uint32_t ufile;
	uint32_t ctx; /* daemon's id for this view; 0 for ATTACH */
	uint64_t instance;
};

struct sv_ctx_req {
	uint32_t ctx;
	uint32_t pad;
};

struct sv_port_req {
	uint32_t port;
	uint32_t pad;
};

/*
 * QUERY_GIDS reply: port 1's GID table as its slots stand.  Slots are
 * stable, as the kernel's: an address removed leaves its slot empty and no
 * other GID changes index (daemon/port_tab.c).
 * | count   | slots up to the last one used, holes included         |
 * | valid   | bit i set: slot i holds a GID; clear: slot i is empty |
 * | entries | slot i at entries[i]; an empty slot is all zero       |
 */
#define SV_GID_TBL_LEN 32
struct sv_gid_table {
	uint32_t count;
	uint32_t valid;
	struct ibv_gid_entry entries[SV_GID_TBL_LEN];
};
static_assert(sizeof(struct sv_gid_table) + sizeof(struct sv_msg_hdr) <= SV_MSG_MAX,
	      "gid table fits one message");
static_assert(SV_GID_TBL_LEN <= 32, "sv_gid_table.valid is a 32-bit mask");

/* 1 when slot i of t holds a GID, 0 when it is empty or out of range. */
static inline int sv_gid_valid(const struct sv_gid_table *t, uint32_t i)
{
	return i < t->count && i < SV_GID_TBL_LEN && ((t->valid >> i) & 1);
}

struct sv_status_rep {
	uint64_t instance;
	uint64_t uptime_ms;
	uint32_t pid;
	uint32_t clients;  /* connected control channels */
	uint32_t ufiles;   /* live ufiles */
	uint32_t contexts; /* live context views */
	uint32_t objects;  /* live PDs, MRs, DMs, ... over all ufiles */
	uint32_t open_fds; /* fds the daemon holds (leak check) */
	uint64_t requests; /* requests served */
	uint64_t bad_requests; /* requests refused as malformed */
	char name[64];
	uint64_t busy_ns;  /* time spent in op handlers but STATUS's
			      (benchmarks: the daemon's own cost of a verb,
			      without the trip) */
	/* The wire gateway (RoCE v2 from other hosts). */
	int32_t wire_err;    /* 0: the port is bound; else why not (-errno) */
	uint32_t wire_port;  /* UDP port (4791 unless SOFTVERBS_ROCE_PORT) */
	uint64_t wire_rx_pkts, wire_rx_bytes;
	uint64_t wire_rx_bad_icrc; /* dropped: bad ICRC */
	uint64_t wire_rx_dropped;  /* dropped: malformed, no such QP, ring full */
	uint64_t wire_rx_ring_full; /* (of those) the engine's ring was full */
	uint64_t wire_tx_pkts, wire_tx_bytes;
	uint64_t wire_tx_errors; /* packets the kernel refused */
	/* Of wire_rx_dropped (docs/wire.md "Hostile packets"): */
	uint64_t wire_rx_no_qp;	   /* no such QP (or its process is gone) */
	uint64_t wire_rx_not_peer; /* RC/UC: not from the QP's peer address */
	uint64_t wire_rx_too_big;  /* payload above the port's active MTU */
	uint32_t wire_block; /* QPN block the port service gave us (QPN >> 16);
				0: no service, the daemon bound the port */
	uint32_t wire_pad;
	/* The CM between hosts: CM MADs on QP1 (docs/wire.md). */
	uint64_t cm_mads_tx, cm_mads_rx;
	uint64_t cm_mads_tx_errors; /* MADs the port refused */
	uint64_t cm_mads_dropped;   /* datagrams for QP1 dropped as bad */
	/* The IB CM's connections (docs/wire.md "The connection manager"). */
	uint32_t cm_conns;	    /* connections the CM holds */
	uint32_t cm_half_open;	    /* of those: a request received, not yet
				       established or answered */
	uint64_t cm_rej_listener;   /* REQs refused: a listener's half-open bound */
	uint64_t cm_rej_source;	    /* REQs refused: a source's half-open bound */
	uint64_t cm_expired;	    /* requests ended: their requester went silent */
};

/* RES_LIST: the live objects, for `softverbs res show`.  Paged: the reply
 * carries a cursor to send back while .more is set. */
enum sv_res_type {
	SV_RES_UFILE = 1,
	SV_RES_PD,
	SV_RES_MR,
	SV_RES_DM,
	SV_RES_MW,
	SV_RES_CQ,
	SV_RES_QP,
	SV_RES_SRQ,
	SV_RES_AH,
	SV_RES_CM_ID, /* rdma_cm ids: handle = id, owner_pid, pd_handle =
			 port space, access = state, lkey = bound port,
			 rkey = QPN given at connect/accept, flags = qp type */
	SV_RES_XRCD,  /* lkey = device-wide XRCD id, rkey = its handles,
			 flags bit0 = named by a file's inode */
};

struct sv_res_req {
	uint32_t type; /* enum sv_res_type, 0 = all */
	uint32_t pad;
	uint32_t cursor_ufile; /* 0 to start */
	uint32_t cursor_handle;
};

/*
 * | field     | meaning                                              |
 * |-----------|------------------------------------------------------|
 * | type      | enum sv_res_type                                     |
 * | ufile     | ufile id                                             |
 * | handle    | object handle in its ufile (ufile rows: 0)            |
 * | owner_pid | process that created it (ufile: opener)              |
 * | lkey,rkey | MR keys (0 otherwise)                                |
 * | pd_handle | handle of the object's PD, or UINT32_MAX             |
 * | access    | MR access flags                                      |
 * | iova      | MR iova / DM: 0                                      |
 * | length    | MR or DM length                                      |
 * | usecnt    | objects depending on this one                        |
 * | flags     | type specific (MR: bit0 DM, bit1 dma-buf, bit2 null MR; QP: bit0 SRQ, bit1 an error completion recorded, bit2 a handle from ibv_open_qp) |
 */
struct sv_res_entry {
	uint32_t type;
	uint32_t ufile;
	uint32_t handle;
	uint32_t owner_pid;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t pd_handle;
	uint32_t access;
	uint64_t iova;
	uint64_t length;
	uint32_t usecnt;
	uint32_t flags;
};
static_assert(sizeof(struct sv_res_entry) == 56, "res entry layout");

#define SV_RES_PER_MSG 128
struct sv_res_rep {
	uint32_t count;
	uint32_t more;
	uint32_t next_ufile;
	uint32_t next_handle;
	struct sv_res_entry e[SV_RES_PER_MSG];
};
static_assert(sizeof(struct sv_res_rep) + sizeof(struct sv_msg_hdr) <= SV_MSG_MAX,
	      "res page fits one message");

#define SV_QP_ERR_DIAG 488 /* sv_qp_err.diag */

/*
 * A QP's last error completion, for `softverbs res show`: the misuse
 * checker of the QP's process sends it as it polls one (QP_ERR_SET,
 * handle in the caller's ufile; flushes are not sent, they follow the
 * error that matters); QP_ERR_GET asks it back for a res row (ufile,
 * handle), -ENOENT when there is none.
 *
 * | field      | meaning                                              |
 * |------------|------------------------------------------------------|
 * | handle     | the QP                                               |
 * | status     | enum ibv_wc_status as polled                         |
 * | opcode     | enum ibv_wc_opcode as polled                         |
 * | vendor_err | as polled                                            |
 * | wr_id      | as polled                                            |
 * | diag       | the checker's line about it, NUL-terminated, or ""   |
 */
struct sv_qp_err {
	uint32_t handle;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint64_t wr_id;
	char diag[SV_QP_ERR_DIAG];
};
static_assert(sizeof(struct sv_qp_err) == 512, "qp err layout");

struct sv_qp_err_get_req {
	uint32_t ufile;
	uint32_t handle;
};

/*
 * PDs and MRs (seed verbs).  Handles are per ufile; keys are device wide:
 * key = index << 8 | tag, where the 8-bit tag changes every time an index
 * is reused, so a key that outlived its MR does not find the next one.
 *
 *   ALLOC_PD      (no payload)     -> sv_obj_rep
 *   DEALLOC_PD    sv_handle_req    -> empty      (-EBUSY while in use)
 *   IMPORT_PD     sv_handle_req    -> empty      (checks the handle)
 *   REG_MR        sv_reg_mr_req    -> sv_mr_rep
 *   REG_DMABUF_MR sv_reg_mr_req + fd {dma-buf or memfd} -> sv_mr_rep
 *   REREG_MR      sv_rereg_mr_req  -> sv_mr_rep
 *   DEREG_MR      sv_handle_req    -> empty
 *   IMPORT_MR     sv_handle_req    -> sv_mr_rep (-ENOENT for a null MR)
 *   ALLOC_NULL_MR sv_handle_req (the PD) -> sv_mr_rep: length UINT64_MAX,
 *                 rkey 0, LOCAL_WRITE; REREG_MR refuses it (-EINVAL)
 *
 * Unknown handle: -ENOENT; a handle of another type: -EINVAL; the PD of
 * REG_MR/REREG_MR not a PD of this ufile: -EINVAL (the kernel's write ABI).
 */

/* | field  | meaning                                  |
 * |--------|------------------------------------------|
 * | handle | object handle in hdr.ufile               | */
struct sv_handle_req {
	uint32_t handle;
	uint32_t pad;
};

/* | field  | meaning                                  |
 * |--------|------------------------------------------|
 * | handle | handle of the new object                 | */
struct sv_obj_rep {
	uint32_t handle;
	uint32_t pad;
};

/*
 * | field     | meaning                                                 |
 * |-----------|---------------------------------------------------------|
 * | addr      | start of the range in the caller (dma-buf: offset)       |
 * | length    | bytes; SIZE_MAX with addr 0 and ON_DEMAND: implicit ODP |
 * | iova      | address the keys use; page offset must equal addr's     |
 * | pd_handle | PD in hdr.ufile                                          |
 * | access    | enum ibv_access_flags, after the library's masking      |
 * | mem_fault | 0, or 1: the caller's pages would not pin (a hole, or    |
 * |           | not writable for a writable MR): -EFAULT, answered after |
 * |           | every other check, where the kernel's pinning fails      |
 * | pad       | 0                                                        |
 */
struct sv_reg_mr_req {
	uint64_t addr;
	uint64_t length;
	uint64_t iova;
	uint32_t pd_handle;
	uint32_t access;
	uint32_t mem_fault;
	uint32_t pad;
};
static_assert(sizeof(struct sv_reg_mr_req) == 40, "reg_mr layout");

/*
 * | field     | meaning                                                 |
 * |-----------|---------------------------------------------------------|
 * | addr      | CHANGE_TRANSLATION: new start                            |
 * | length    | CHANGE_TRANSLATION: new length                           |
 * | iova      | CHANGE_TRANSLATION: new iova (page offset = addr's)      |
 * | handle    | the MR                                                   |
 * | flags     | enum ibv_rereg_mr_flags (0 or unknown bits: refused)     |
 * | pd_handle | CHANGE_PD: the new PD                                    |
 * | access    | CHANGE_ACCESS: the new access flags                      |
 * | mem_fault | CHANGE_TRANSLATION: as sv_reg_mr_req (the new range)     |
 * | pad       | 0                                                        |
 */
struct sv_rereg_mr_req {
	uint64_t addr;
	uint64_t length;
	uint64_t iova;
	uint32_t handle;
	uint32_t flags;
	uint32_t pd_handle;
	uint32_t access;
	uint32_t mem_fault;
	uint32_t pad;
};
static_assert(sizeof(struct sv_rereg_mr_req) == 48, "rereg_mr layout");

/*
 * | field  | meaning                                                    |
 * |--------|------------------------------------------------------------|
 * | handle | the MR's handle (unchanged by rereg)                        |
 * | lkey   | local key (unchanged by rereg)                              |
 * | rkey   | remote key (unchanged by rereg)                             |
 * | access | access flags now in force                                   |
 * | length | bytes covered (SIZE_MAX: implicit ODP)                      |
 * | iova   | first address the keys accept                               |
 */
struct sv_mr_rep {
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t access;
	uint64_t length;
	uint64_t iova;
};
static_assert(sizeof(struct sv_mr_rep) == 32, "mr reply layout");

/*
 * Device memory.  A DM is a memfd the daemon creates and keeps until the DM
 * is freed or its ufile dies; every process that allocates or imports it
 * gets a copy of the fd and maps it MAP_SHARED.  The memfd is sealed
 * against resizing, so no process can make another one's mapping fault.
 *
 *   ALLOC_DM   sv_alloc_dm_req  -> sv_dm_rep + fd {memfd}
 *   FREE_DM    sv_handle_req    -> empty      (-EBUSY while MRs are on it)
 *   IMPORT_DM  sv_handle_req    -> sv_dm_rep + fd {memfd}
 *   REG_DM_MR  sv_reg_dm_mr_req -> sv_mr_rep  (an MR of kind SVD_MR_DM)
 *
 * | field         | meaning                                              |
 * |---------------|------------------------------------------------------|
 * | length        | bytes, 1..max_dm_size                                 |
 * | log_align_req | log2 of the alignment asked for, < 64                 |
 * | comp_mask     | must be 0                                             |
 */
struct sv_alloc_dm_req {
	uint64_t length;
	uint32_t log_align_req;
	uint32_t comp_mask;
};
static_assert(sizeof(struct sv_alloc_dm_req) == 16, "alloc_dm layout");

/*
 * | field   | meaning                                                    |
 * |---------|------------------------------------------------------------|
 * | handle  | the DM's handle in hdr.ufile                                |
 * | length  | bytes the user asked for (memcpy and MR bounds)             |
 * | map_len | size of the memfd (length rounded up to pages): mmap this   |
 */
struct sv_dm_rep {
	uint32_t handle;
	uint32_t pad;
	uint64_t length;
	uint64_t map_len;
};
static_assert(sizeof(struct sv_dm_rep) == 24, "dm reply layout");

/*
 * | field     | meaning                                                  |
 * |-----------|----------------------------------------------------------|
 * | offset    | first byte of the DM the MR covers                        |
 * | length    | bytes; offset + length <= the DM's length                 |
 * | dm_handle | DM in hdr.ufile                                           |
 * | pd_handle | PD in hdr.ufile                                           |
 * | access    | must hold IBV_ACCESS_ZERO_BASED (the keys take offsets)   |
 */
struct sv_reg_dm_mr_req {
	uint64_t offset;
	uint64_t length;
	uint32_t dm_handle;
	uint32_t pd_handle;
	uint32_t access;
	uint32_t pad;
};
static_assert(sizeof(struct sv_reg_dm_mr_req) == 32, "reg_dm_mr layout");

/*
 * Data-path objects.  The daemon keeps handles, use counts and QPNs; the
 * queues are regions of shared memory the creating process makes (a
 * sealed memfd, sent with the create command: -EINVAL when it is missing,
 * unsealed or smaller than a page), which the daemon keeps for engines
 * that execute on the QP directly (SV_OP_QP_PEER).  Unknown handle:
 * -ENOENT; another type: -EINVAL; a PD/CQ/SRQ argument that is not one of
 * this ufile: -EINVAL.  Destroying a CQ or SRQ that a QP uses: -EBUSY.
 *
 * | field  | meaning                                               |
 * |--------|-------------------------------------------------------|
 * | handle | RESIZE_CQ: the CQ (ignored by CREATE_CQ)               |
 * | cqe    | entries, 1..max_cqe                                    |
 */
struct sv_create_cq_req {
	uint32_t handle;
	uint32_t cqe;
};

/*
 * | field        | meaning                                            |
 * |--------------|----------------------------------------------------|
 * | cookie       | the QP region's random cookie (never 0)             |
 * | pd_handle    | PD in hdr.ufile                                     |
 * | scq_handle   | send CQ                                             |
 * | rcq_handle   | receive CQ                                          |
 * | srq_handle   | SRQ, or UINT32_MAX for none                         |
 * | qp_type      | IBV_QPT_RC, UC, UD, XRC_SEND or XRC_RECV (others:    |
 * |              |   -EOPNOTSUPP; XRC: see OPEN_QP)                    |
 * | max_send_wr  | granted capabilities (for res show; checked <= the   |
 * | max_recv_wr  |   device limits)                                    |
 */
struct sv_create_qp_req {
	uint32_t pd_handle;
	uint32_t scq_handle;
	uint32_t rcq_handle;
	uint32_t srq_handle;
	uint32_t qp_type;
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t pad;
	uint64_t cookie; /* the QP region's cookie (SV_OP_QP_PEER gives it) */
};
static_assert(sizeof(struct sv_create_qp_req) == 40, "create_qp layout");

/* | handle | the new QP's handle | qpn | its device-wide number (24 bits) | */
struct sv_qp_rep {
	uint32_t handle;
	uint32_t qpn;
};

/*
 * What the library's state machine accepted (ibv_modify_qp already
 * validated it): the daemon records it for res show and the wire.
 *
 * | field    | meaning                                                |
 * |----------|--------------------------------------------------------|
 * | handle   | the QP                                                  |
 * | state    | enum ibv_qp_state now in force                          |
 * | dest_qpn | RC/UC: remote QPN (0 before RTR)                        |
 * | qkey     | UD: Q_Key                                               |
 */
struct sv_modify_qp_req {
	uint32_t handle;
	uint32_t state;
	uint32_t dest_qpn;
	uint32_t qkey;
};

/*
 * | field     | meaning                                               |
 * |-----------|-------------------------------------------------------|
 * | handle    | MODIFY_SRQ: the SRQ (ignored by CREATE_SRQ)             |
 * | pd_handle | CREATE_SRQ: PD in hdr.ufile                             |
 * | max_wr    | 1..max_srq_wr                                           |
 * | max_sge   | 1..max_srq_sge (CREATE_SRQ)                             |
 */
struct sv_create_srq_req {
	uint32_t handle;
	uint32_t pd_handle;
	uint32_t max_wr;
	uint32_t max_sge;
};

/* | pd_handle | PD in hdr.ufile | */
struct sv_create_ah_req {
	uint32_t pd_handle;
	uint32_t pad;
};

/* | pd_handle | PD in hdr.ufile | type | IBV_MW_TYPE_1 or _2 | */
struct sv_alloc_mw_req {
	uint32_t pd_handle;
	uint32_t type;
};

/* | handle | the MW's handle | rkey | device-wide key (index << 8 | tag) | */
struct sv_mw_rep {
	uint32_t handle;
	uint32_t rkey;
};

/*
 * XRC (the daemon's xrcd.c; the kernel's ib_uverbs_open_xrcd,
 * create_srq with IB_SRQT_XRC, create_qp with IB_QPT_XRC_TGT/INI and
 * ib_uverbs_open_qp).  An XRC domain is a device object; each OPEN_XRCD
 * gives the ufile a handle to it.  With a file descriptor attached, the
 * file's inode (st_dev, st_ino) names the XRCD across processes: absent
 * and no O_CREAT in oflags -EAGAIN, present and O_EXCL -EINVAL; without
 * one the XRCD is private to the handle.  CLOSE_XRCD: -EBUSY while an SRQ
 * or QP made (or opened) through this handle lives; the XRCD itself goes
 * with its last handle.
 *
 * | field  | meaning                                                  |
 * |--------|----------------------------------------------------------|
 * | oflags | open(2) flags: O_CREAT, O_EXCL (others ignored)          |
 * | has_fd | 1: one descriptor attached, naming the file; 0: private |
 */
struct sv_open_xrcd_req {
	uint32_t oflags;
	uint32_t has_fd;
};

/* | handle | the XRCD handle in hdr.ufile | xrcd_id | device-wide id | */
struct sv_xrcd_rep {
	uint32_t handle;
	uint32_t xrcd_id;
};

/*
 * CREATE_XRC_SRQ: an SRQ of type IBV_SRQT_XRC: on a PD, in an XRCD,
 * completing into cq.  Each handle of another type or ufile -EINVAL;
 * sizes as CREATE_SRQ.  The reply's srqn is the device-wide SRQ number
 * (24 bits, never 0) an XRC sender names (ibv_get_srq_num).
 *
 * | field       | meaning                              |
 * |-------------|--------------------------------------|
 * | pd_handle   | PD in hdr.ufile                      |
 * | xrcd_handle | XRCD in hdr.ufile                    |
 * | cq_handle   | the CQ its receives complete into    |
 * | max_wr      | 1..max_srq_wr                        |
 * | max_sge     | 1..max_srq_sge                       |
 */
struct sv_create_xrc_srq_req {
	uint32_t pd_handle;
	uint32_t xrcd_handle;
	uint32_t cq_handle;
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t pad;
};
static_assert(sizeof(struct sv_create_xrc_srq_req) == 24, "xrc srq layout");

/* | handle | the SRQ's handle | srqn | its device-wide SRQ number | */
struct sv_xrc_srq_rep {
	uint32_t handle;
	uint32_t srqn;
};

/*
 * OPEN_QP (ibv_open_qp): a handle in hdr.ufile to the XRC TGT QP `qpn` of
 * the XRCD xrcd_handle names.  -EINVAL: no such TGT QP in that XRCD, or
 * qp_type not IBV_QPT_XRC_RECV.  The TGT QP lives while any of its
 * handles does (the creator's included).  A TGT QP is made with
 * CREATE_QP, qp_type IBV_QPT_XRC_RECV and pd_handle naming the XRCD (the
 * kernel's reuse of the field), no CQ and no SRQ (UINT32_MAX each); an
 * XRC INI QP (IBV_QPT_XRC_SEND) has a PD and a send CQ, no receive CQ and
 * no SRQ.
 *
 * | field       | meaning                               |
 * |-------------|---------------------------------------|
 * | xrcd_handle | XRCD in hdr.ufile                     |
 * | qpn         | the TGT QP's number                   |
 * | qp_type     | IBV_QPT_XRC_RECV                      |
 */
struct sv_open_qp_req {
	uint32_t xrcd_handle;
	uint32_t qpn;
	uint32_t qp_type;
	uint32_t pad;
};

/*
 * ATTACH_MCAST / DETACH_MCAST (ibv_attach_mcast, ibv_detach_mcast; the
 * daemon's gw_mcast.c).  The kernel's checks and rxe's limits: a QP not
 * UD or a GID not multicast (sv_gid_is_mcast) -EINVAL; a group more
 * than SV_MAX_MCAST_GRP, a QP more than SV_MAX_MCAST_QP_ATTACH in a group
 * or more than SV_MAX_TOTAL_MCAST_QP_ATTACH in all -ENOMEM; attaching
 * twice is no error; detaching what is not attached -EINVAL.  A QP with
 * groups refuses DESTROY_QP with -EBUSY.
 * | handle | the QP in hdr.ufile | lid | as given (RoCE: unused) |
 * | gid    | the group, as ibv_gid.raw                            | */
struct sv_mcast_req {
	uint32_t handle;
	uint16_t lid;
	uint16_t pad;
	uint8_t gid[16];
};

/*
 * Engines, links and keys (issue 4, engine side; src/engine, daemon
 * broker.c and keytab.c).
 *
 * ENGINE_ATTACH: a process registers its engine.  The request carries the
 * engine's doorbell (an eventfd); the reply names the engine and carries
 * the engine socket (the daemon pushes sv_engine_msg on it: new inbound
 * links, engines that died) and the key table memfd (read-only, see
 * sv_keytab.h).  A process has at most one engine: a second attach
 * replaces the first.
 *
 * | field     | meaning                                                |
 * |-----------|--------------------------------------------------------|
 * | engine_id | device-wide id of the engine (never 0)                  |
 * | kt_size   | bytes of the key table memfd (map them all)             |
 * | gid       | GID index 0 of port 1 (source GID of UD packets)        |
 */
struct sv_engine_attach_rep {
	uint32_t engine_id;
	uint32_t pad;
	uint64_t kt_size;
	uint8_t gid[16];
};

/* QPN_LOOKUP: which engine serves a QP.  -ENOENT: no such QP, or its
 * process has no engine.  With flags SV_QPN_BY_PID, qpn is a pid: the
 * engine of that process (the owner of an MR, for remote memory access).
 * | qpn | 24-bit QP number (or pid) | flags | 0 or SV_QPN_BY_PID | */
#define SV_QPN_BY_PID 1u
struct sv_qpn_req {
	uint32_t qpn;
	uint32_t flags;
};
/* | engine_id | engine of the QP's process | pid | that process |
 * | qp_type | enum ibv_qp_type | */
struct sv_qpn_rep {
	uint32_t engine_id;
	uint32_t pid;
	uint32_t qp_type;
	uint32_t pad;
};

/* MCAST_MEMBERS: the QPs of this namespace attached to a group, for a
 * sender's local copies and a wire reader's fan-out (sv_req.c,
 * eng_inbound.c).  An unknown group has no members (count 0).
 * | gid | the group | count | QPNs in qpn[] | qpn | in attach order | */
struct sv_mcast_members_req {
	uint8_t gid[16];
};
struct sv_mcast_members_rep {
	uint32_t count;
	uint32_t pad;
	uint32_t qpn[SV_MAX_MCAST_QP_ATTACH];
};

/*
 * LINK_CONNECT: the caller made a ring (memfd, sv_ring.h) to send to
 * engine `engine_id`; the daemon hands it (with the caller's doorbell) to
 * that engine's socket and answers with the target's doorbell.
 * | engine_id | target engine | ring_size | bytes of the memfd |
 */
struct sv_link_req {
	uint32_t engine_id;
	uint32_t pad;
	uint64_t ring_size;
};
/* | engine_id | target | pid | the target's process | */
struct sv_link_rep {
	uint32_t engine_id;
	uint32_t pid;
};

/*
 * WIRE_ATTACH: the caller's engine joins the wire (sv_wire.h).  The reply
 * carries its gateway ring (a sealed memfd, sv_ring.h, the daemon
 * producing), the shared page (struct sv_wire_shm) and, when bound, a
 * duplicate of the port's socket.  Ring records (the daemon's, and those
 * engines forward on their links) are of type SV_WIRE_REC: a 40-byte GRH
 * (the IPv6 header the packet came in; for IPv4 its fields in the same
 * places, IPv4-mapped GIDs) then BTH .. payload without pad (pad count 0)
 * or ICRC.  wire_err says why nothing will arrive (the port is
 * another's) -- the ring is given anyway: the daemon retries the port at
 * every attach.
 * | wire_err | 0 or -errno | port | UDP port | ring_size | bytes of the memfd |
 */
#define SV_WIRE_REC 0x30001u /* a packet, with a GRH, from the wire */
struct sv_wire_attach_rep {
	int32_t wire_err;
	uint32_t port;
	uint64_t ring_size;
};

/* What an engine sends up its engine socket: a packet for QP1 (the CM's)
 * it read from the wire's port: the type, then the ring record
 * (SV_WIRE_REC: GRH, BTH .., at most SV_ENGINE_UP_MAX bytes). */
#define SV_ENGINE_UP_QP1 0x51503155u /* "U1PQ" */
#define SV_ENGINE_UP_MAX 1024

/* What the daemon pushes on an engine socket.  LINK_NEW carries fds
 * {ring memfd, peer's doorbell}.  XRC_SERVE goes to every engine: the
 * named process's adopts the QP (one of its ibv_open_qp handles) and
 * routes its answers from the QP's region; every engine forgets where
 * the QP was (src/engine/eng_xrc.c). */
enum sv_engine_msg_type {
	SV_ENGINE_LINK_NEW = 1, /* a peer made a ring towards us */
	SV_ENGINE_PEER_GONE,	/* engine `peer` died: fail its links */
	SV_ENGINE_UFILE_GONE,	/* ufile `peer` was destroyed: its MRs with it */
	SV_ENGINE_FAULT,	/* its run-time fault plans changed: SV_FAULT_SYNC */
	SV_ENGINE_XRC_SERVE,	/* TGT QP `peer` served by pid `peer_pid` (0: none) */
	SV_ENGINE_XRC_EVENT,	/* TGT QP `peer` had event `peer_pid`: our handles' */
};
struct sv_engine_msg {
	uint32_t type;
	uint32_t peer;	   /* engine id of the peer */
	uint32_t peer_pid;
	uint32_t pad;
	uint64_t ring_size; /* LINK_NEW */
};

/* KEY_FD, KEY_INVALIDATE.  KEY_FD: the memfd under a DM or dma-buf MR
 * (key = its lkey/rkey).  KEY_INVALIDATE: invalidates memory window `key`
 * (LOCAL_INV, SEND_WITH_INV) for QP `qpn` whose PD is `pd_id`; -EINVAL
 * when the key is not a bound type 2 window of that PD. */
struct sv_key_req {
	uint32_t key;
	uint32_t pd_id;
	uint32_t qpn;
	uint32_t pad;
};
/* | map_len | bytes of the memfd | obj_id | key table obj_id it backs | */
struct sv_key_fd_rep {
	uint64_t map_len;
	uint64_t obj_id;
};

/*
 * MW_BIND: a BIND_MW work request executing.  -EINVAL (the engine
 * completes with MW_BIND_ERR) unless: mw_key names a window of PD pd_id
 * (type 2: unbound), new_key keeps its index, mr_key a live MR of PD
 * pd_id with MW_BIND access covering [addr, addr + length), and the
 * window's remote write/atomic access has LOCAL_WRITE on the MR.  Type 1
 * with length 0 unbinds.
 */
struct sv_mw_bind_req {
	uint32_t mw_key;  /* the window's current rkey */
	uint32_t new_key; /* its rkey after the bind */
	uint32_t mr_key;
	uint32_t access;  /* window access (remote bits, ZERO_BASED) */
	uint64_t addr;
	uint64_t length;
	uint32_t pd_id;	  /* the QP's PD */
	uint32_t qpn;	  /* the QP (type 2 windows are bound to it) */
};
static_assert(sizeof(struct sv_mw_bind_req) == 40, "mw_bind layout");

/* ASYNC_EVENT: the engine raises an event on one of its contexts (the
 * daemon writes a sv_async_msg to that context's async socket).
 * | ctx | context view id (sv_ctx_rep.ctx) | event_type, element: as
 * sv_async_msg | */
struct sv_async_req {
	uint32_t ctx;
	uint32_t event_type;
	uint64_t element;
};

/*
 * XRC_EVENT: an event of XRC TGT QP `qpn`, from the engine that serves
 * it, for the handles of other processes (the kernel gives a shared QP's
 * events to every handle): the daemon pushes SV_ENGINE_XRC_EVENT to each
 * of those processes' engines once.  -EINVAL: not a TGT QP the caller
 * serves, or not a QP event.
 */
struct sv_xrc_event_req {
	uint32_t qpn;
	uint32_t event_type;
};

/*
 * QP_PEER: the regions of QP `qpn` (sv_qpn_req, flags 0), for an engine
 * that executes on it directly (src/engine/eng_peer.c).  -ENOENT: no such
 * QP.  Fds: the QP region, its receive CQ's region, and its SRQ's region
 * when it has one.
 * | engine_id | engine of the QP's process (0: none attached) |
 * | pid       | that process                                  |
 * | qp_type   | enum ibv_qp_type                              |
 * | qp_cookie | the QP region's cookie                        |
 */
struct sv_qp_peer_rep {
	uint32_t engine_id;
	uint32_t pid;
	uint32_t qp_type;
	uint32_t pad;
	uint64_t qp_cookie;
};

/*
 * SRQ_PEER: the XRC SRQ numbered `qpn` (sv_qpn_req, flags 0: the field
 * holds an SRQ number), for an engine whose responder takes a request an
 * XRCETH sends there (src/engine/eng_peer.c).  -ENOENT: no such XRC SRQ.
 * Fds: the SRQ's region and its CQ's region.
 * | engine_id  | engine of the SRQ's process (0: none attached)        |
 * | pid        | that process                                         |
 * | xrcd_id    | the XRC domain it is in (device wide)                |
 * | pd_id      | its PD (device wide): XRC checks keys against it     |
 */
struct sv_srq_peer_rep {
	uint32_t engine_id;
	uint32_t pid;
	uint32_t xrcd_id;
	uint32_t pd_id;
};

/* PD replies (ALLOC_PD, IMPORT_PD): the handle and the PD's device-wide
 * id, which the engine compares with the key table's pd_id. */
struct sv_pd_rep {
	uint32_t handle;
	uint32_t pd_id;
};

/* Async events travel on the per-context async socket (the context's
 * async_fd), one datagram each.  EOF on that socket means the device is
 * gone: the library reports IBV_EVENT_DEVICE_FATAL. */
struct sv_async_msg {
	uint32_t event_type; /* enum ibv_event_type */
	uint32_t pad;
	uint64_t element; /* user_handle of the object, or port number */
};

/* The capture messages (CAPTURE_*): sv_proto_cap.h. */
#include "sv_proto_cap.h"
#include "sv_proto_fault.h"

#endif

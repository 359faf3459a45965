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

#define SV_PROTO_MAGIC 0x31505653u /* "SVP1" little-endian */
#define SV_PROTO_VERSION 1
#define SV_MSG_MAX 8192 /* largest datagram either side accepts */
#define SV_MAX_FDS 2	/* most fds one message carries */

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

#define SV_GID_TBL_LEN 32
struct sv_gid_table {
	uint32_t count; /* valid entries, indices 0..count-1 */
	uint32_t pad;
	struct ibv_gid_entry entries[SV_GID_TBL_LEN];
};
static_assert(sizeof(struct sv_gid_table) + sizeof(struct sv_msg_hdr) <= SV_MSG_MAX,
	      "gid table fits one message");

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
 * | flags     | type specific (MR: bit0 = DM MR, bit1 = dma-buf MR)   |
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
 *   IMPORT_MR     sv_handle_req    -> sv_mr_rep
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
 */
struct sv_reg_mr_req {
	uint64_t addr;
	uint64_t length;
	uint64_t iova;
	uint32_t pd_handle;
	uint32_t access;
};
static_assert(sizeof(struct sv_reg_mr_req) == 32, "reg_mr layout");

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
 */
struct sv_rereg_mr_req {
	uint64_t addr;
	uint64_t length;
	uint64_t iova;
	uint32_t handle;
	uint32_t flags;
	uint32_t pd_handle;
	uint32_t access;
};
static_assert(sizeof(struct sv_rereg_mr_req) == 40, "rereg_mr layout");

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

/* Async events travel on the per-context async socket (the context's
 * async_fd), one datagram each.  EOF on that socket means the device is
 * gone: the library reports IBV_EVENT_DEVICE_FATAL. */
struct sv_async_msg {
	uint32_t event_type; /* enum ibv_event_type */
	uint32_t pad;
	uint64_t element; /* user_handle of the object, or port number */
};

#endif

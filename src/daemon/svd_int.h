/* SPDX-License-Identifier: MIT */
/*
 * softverbsd internals.  One thread, one epoll loop: nothing here is locked.
 */
#ifndef SVD_INT_H
#define SVD_INT_H

#include <stdint.h>
#include <sys/types.h>

#include "sv_param.h"
#include "sv_proto.h"
#include "svd_ida.h"

/* What an epoll event points at. */
enum svd_watch_kind {
	SVD_W_LISTEN,
	SVD_W_CONN,
	SVD_W_UFILE,
	SVD_W_SIGNAL,
	SVD_W_ENGINE, /* broker.c: an engine socket */
	SVD_W_CM,     /* cm.c: an event channel, the CM's timer or wake-up */
	SVD_W_PORT,   /* port.c: the rtnetlink subscription */
	SVD_W_CAPTURE, /* capture.c: the rings' doorbell or a session's pipe */
};

struct svd_watch {
	enum svd_watch_kind kind;
	int fd;
};

struct svd_ufile;

/*
 * A context view: one ibv_context in one process (OPEN_DEVICE or
 * IMPORT_DEVICE), or an attachment made by ATTACH (async_fd -1).  A channel
 * may act on a ufile only while it has a view of it.
 */
struct svd_ctx {
	uint32_t id;
	struct svd_ufile *uf;
	struct svd_conn *conn;
	int async_fd; /* daemon end of the context's async socket, or -1 */
	struct svd_ctx *next_in_conn;
	struct svd_ctx *next_in_ufile;
};

/* A client's control channel (one per process). */
struct svd_conn {
	struct svd_watch w;
	pid_t pid;
	uid_t uid;
	struct svd_ctx *ctxs;
	struct svd_conn *prev, *next;
};

enum svd_obj_type {
	SVD_OBJ_PD = 1,
	SVD_OBJ_MR,
	SVD_OBJ_DM,
	SVD_OBJ_MW,
	SVD_OBJ_CQ,
	SVD_OBJ_QP,
	SVD_OBJ_SRQ,
	SVD_OBJ_AH,
	SVD_OBJ_XRCD, /* a handle to an XRC domain (xrcd.c) */
	SVD_OBJ_NTYPES
};

/* Common head of every object a ufile owns.  Handles are per ufile, lowest
 * free first, shared by all types (as the kernel's idr). */
struct svd_obj {
	enum svd_obj_type type;
	uint32_t handle;
	struct svd_ufile *uf;
	pid_t owner_pid; /* process that created it */
	uint32_t usecnt; /* objects that depend on this one (PD: MRs, ...) */
	void (*destroy)(struct svd_obj *obj); /* frees the object */
	/* Fills a row of `softverbs res show` (type, keys, pd, access, iova,
	 * length, flags; the caller sets ufile, handle, owner, usecnt). */
	void (*describe)(const struct svd_obj *obj, struct sv_res_entry *e);
};

/*
 * A ufile: what one ibv_open_device makes, standing for the kernel's
 * ib_uverbs_file.  Lives until the last copy of the client end of its
 * socket pair (the contexts' cmd_fd) is closed anywhere.
 */
struct svd_ufile {
	struct svd_watch w; /* daemon end of the cmd socket pair */
	uint32_t id;	    /* slot | generation << 16 */
	dev_t dev;	    /* identity of the client end (cmd_fd) */
	ino_t ino;
	pid_t creator_pid;
	uint64_t created_ms;
	struct svd_ctx *ctxs;
	struct svd_obj **handles; /* handle -> object, NULL = free */
	uint32_t handles_cap;
	uint32_t nobjs;
	struct svd_ida ids;	  /* which handles are taken (lowest free) */
};

struct svd_state {
	uint64_t instance;
	uint64_t start_ms;
	char name[64];
	uint64_t node_guid; /* network byte order */
	int epfd;
	int idle_ms;	      /* 0: never exit for idleness */
	uint64_t idle_since_ms; /* when the last ufile went away */
	int stopping;
	struct svd_conn *conns;
	uint32_t nconns;
	uint32_t nufiles;
	uint32_t nctxs;
	uint32_t nobjs;
	uint32_t next_ctx_id;
	uint64_t requests;
	uint64_t bad_requests;
	uint64_t busy_ns; /* in op handlers (SV_OP_STATUS) */
	/* Device-wide objects of each type and the limits the device
	 * advertises for them (device.c: sv_param.h, lowered by
	 * SOFTVERBS_LIMITS); svd_handle_alloc enforces them. */
	uint32_t ntype[SVD_OBJ_NTYPES];
	uint32_t limit[SVD_OBJ_NTYPES];
	/* What holds a descriptor in the daemon, bounded so that all of it
	 * fits in RLIMIT_NOFILE (device.c, svd_limits_init). */
	uint32_t max_ufiles, max_contexts, max_dmabuf;
	struct svd_ufile *ufiles[SV_MAX_UFILES];
	uint16_t ufile_gen[SV_MAX_UFILES];
};

extern struct svd_state svd;

uint64_t svd_now_ms(void);

/* epoll registration helpers (main.c). */
int svd_watch_add(struct svd_watch *w, uint32_t events);
void svd_watch_del(struct svd_watch *w);
/* Changes what w waits for (0: only hang-up and errors). */
int svd_watch_mod(struct svd_watch *w, uint32_t events);
/* Frees p after the current epoll batch (its watch must have fd -1). */
void svd_defer_free(void *p);
void svd_reap_deferred(void);

/* conn.c */
/* Keeps one descriptor in reserve (see conn.c); call once at start. */
void svd_conn_reserve_fd(void);
void svd_conn_accept(int lfd);
void svd_conn_readable(struct svd_conn *c);
void svd_conn_close(struct svd_conn *c);
/* Sends a reply; on failure the connection is closed (caller must not
 * touch c afterwards when this returns nonzero). */
int svd_reply(struct svd_conn *c, const struct sv_msg_hdr *req, int status,
	      const void *payload, size_t len, const int *fds, int nfds);

/* ufile.c */
int svd_ufile_create(struct svd_conn *c, int *client_fd,
		     struct svd_ufile **out);
struct svd_ufile *svd_ufile_by_fd(int fd);
struct svd_ufile *svd_ufile_by_id(uint32_t id);
void svd_ufile_readable(struct svd_ufile *uf);
void svd_ufile_destroy(struct svd_ufile *uf);
int svd_ctx_create(struct svd_conn *c, struct svd_ufile *uf, int want_async,
		   int *client_async_fd, struct svd_ctx **out);
void svd_ctx_destroy(struct svd_ctx *ctx);
/* Sends an async event (a port or device event: no object) to every open
 * context of the device, as the kernel's ib_dispatch_event reaches every
 * ufile's async file.  Never blocks: a context whose socket is full misses
 * it. */
void svd_ctx_event_all(uint32_t event_type, uint64_t element);
struct svd_ctx *svd_conn_view(struct svd_conn *c, struct svd_ufile *uf);
/* Handles: reserve the lowest free handle for obj (type set), counting
 * it against the device's limit for its type: 0, or -ENOMEM (the limit,
 * as the kernel answers for exhausted objects, or no memory). */
int svd_handle_alloc(struct svd_ufile *uf, struct svd_obj *obj);
void svd_handle_free(struct svd_obj *obj);
struct svd_obj *svd_handle_get(struct svd_ufile *uf, uint32_t handle,
			       enum svd_obj_type type);
/* Stale handle: -ENOENT; a live handle of another type: -EINVAL (the
 * kernel's idr lookup). */
int svd_lookup_err(struct svd_ufile *uf, uint32_t handle);
/* svd_handle_get with the lookup error: 0 and the object in *out, or the
 * svd_lookup_err answer. */
int svd_handle_lookup(struct svd_ufile *uf, uint32_t handle,
		      enum svd_obj_type type, struct svd_obj **out);
/* The destroy op of an object others may depend on: the lookup error,
 * -EBUSY while its usecnt says it is used (nothing changes), else the
 * object is unpublished and freed. */
int svd_destroy_unused(struct svd_ufile *uf, uint32_t handle,
		       enum svd_obj_type type);

/* device.c */
void svd_device_init(void);
/* svd.limit from sv_param.h and $SOFTVERBS_LIMITS ("qp=64,mr=1000,..."),
 * which may only lower them; then everything that holds a descriptor in
 * the daemon is scaled down together if it would not fit in the
 * process's descriptor limit.  Returns 0, or -EINVAL for a bad string
 * (then the defaults stand). */
int svd_limits_init(const char *spec);
void svd_query_device(struct ibv_device_attr_ex *attr);
unsigned svd_count_fds(void);
/* port.c: port 1's attributes and GID table (its slots as they stand);
 * -EINVAL for another port. */
int svd_query_port(uint32_t port, struct ibv_port_attr *attr);
int svd_query_gids(uint32_t port, struct sv_gid_table *tbl);

#endif

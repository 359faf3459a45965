/* SPDX-License-Identifier: MIT */
/*
 * ufiles (the kernel's ib_uverbs_file), context views, and per-ufile
 * handles.  A ufile is born with ibv_open_device and dies when the last copy
 * of its cmd_fd is closed anywhere: the daemon holds the other end of that
 * socket pair and sees EOF.  Then every object of the ufile is destroyed.
 */
#include "svd_engine.h"
#include "svd_int.h"
#include "sv_log.h"
#include "sv_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLOT(id) ((id) & 0xffffu)
#define GEN(id) ((id) >> 16)

int svd_ufile_create(struct svd_conn *c, int *client_fd,
		     struct svd_ufile **out)
{
	struct svd_ufile *uf;
	struct stat st;
	int sv[2], slot, err;

	if (svd.nufiles >= svd.max_ufiles)
		return -EMFILE; /* each holds a socket in the daemon */
	for (slot = 1; slot < SV_MAX_UFILES; slot++)
		if (!svd.ufiles[slot])
			break;
	if (slot == SV_MAX_UFILES)
		return -EMFILE;
	uf = calloc(1, sizeof(*uf));
	if (!uf)
		return -ENOMEM;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		err = -errno;
		goto err_free;
	}
	/* Our end only: svd_ufile_readable drains it in a loop and must never
	 * block the daemon on an application's cmd_fd. */
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
		err = -errno;
		goto err_close;
	}
	/* The client end's inode is the ufile's identity: whoever presents
	 * a copy of that descriptor (dup, SCM_RIGHTS, fork) is a member. */
	if (fstat(sv[1], &st) < 0) {
		err = -errno;
		goto err_close;
	}
	svd_ida_init(&uf->ids, SV_MAX_HANDLES);
	uf->w.kind = SVD_W_UFILE;
	uf->w.fd = sv[0];
	uf->dev = st.st_dev;
	uf->ino = st.st_ino;
	uf->creator_pid = c->pid;
	uf->created_ms = svd_now_ms();
	svd.ufile_gen[slot]++;
	uf->id = slot | (uint32_t)svd.ufile_gen[slot] << 16;
	err = svd_watch_add(&uf->w, EPOLLIN);
	if (err)
		goto err_close;
	svd.ufiles[slot] = uf;
	svd.nufiles++;
	*client_fd = sv[1];
	*out = uf;
	sv_dbg("ufile %#x for pid %d", uf->id, (int)c->pid);
	return 0;

err_close:
	close(sv[0]);
	close(sv[1]);
err_free:
	free(uf);
	return err;
}

struct svd_ufile *svd_ufile_by_id(uint32_t id)
{
	struct svd_ufile *uf;

	if (SLOT(id) == 0 || SLOT(id) >= SV_MAX_UFILES)
		return NULL;
	uf = svd.ufiles[SLOT(id)];
	return uf && uf->id == id ? uf : NULL;
}

struct svd_ufile *svd_ufile_by_fd(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return NULL;
	for (int i = 1; i < SV_MAX_UFILES; i++) {
		struct svd_ufile *uf = svd.ufiles[i];

		if (uf && uf->dev == st.st_dev && uf->ino == st.st_ino)
			return uf;
	}
	return NULL;
}

/*
 * Data written into a cmd_fd by an application means nothing: drop it,
 * descriptors included (a cmd_fd sent into its own ufile would otherwise
 * keep that ufile alive forever).  Only the hang-up of the last copy of
 * the cmd_fd ends the ufile: an empty datagram reads as 0 bytes too, and
 * must change nothing (sv_sock_hup tells the two apart).  A client that
 * shut down writing on its cmd_fd can send nothing more: the daemon stops
 * reading and waits for the hang-up.
 */
void svd_ufile_readable(struct svd_ufile *uf)
{
	char buf[256];
	int fds[SV_MAX_FDS], nfds;
	ssize_t n;

	for (int i = 0; i < 16; i++) {
		n = sv_recv_msg(uf->w.fd, buf, sizeof(buf), fds, SV_MAX_FDS,
				&nfds);
		if (n == -EAGAIN || n == -EMSGSIZE)
			return;
		if (n > 0 || nfds) {
			sv_close_fds(fds, nfds);
			continue;
		}
		if (n < 0 && n != -ECONNRESET)
			return;
		if (n == 0) {
			enum sv_sock_state st = sv_sock_hup(uf->w.fd);

			if (st == SV_SOCK_OPEN)
				continue;
			if (st == SV_SOCK_RDHUP) {
				svd_watch_mod(&uf->w, 0);
				return;
			}
		}
		sv_dbg("ufile %#x: last cmd_fd closed", uf->id);
		svd_ufile_destroy(uf);
		return;
	}
}

void svd_ufile_destroy(struct svd_ufile *uf)
{
	uint32_t left;

	while (uf->ctxs)
		svd_ctx_destroy(uf->ctxs);
	/* Dependents first (MRs before their PD), as the kernel's
	 * uverbs_destroy_ufile_hw: repeat passes over objects nobody uses. */
	do {
		uint32_t done = 0;

		left = 0;
		for (uint32_t h = uf->handles_cap; h-- > 0;) {
			struct svd_obj *o = uf->handles[h];

			if (!o)
				continue;
			if (o->usecnt) {
				left++;
				continue;
			}
			svd_handle_free(o);
			o->destroy(o);
			done++;
		}
		/* A pass that frees nothing means a use count is wrong:
		 * free anyway rather than leak. */
		if (left && !done) {
			sv_err("ufile %#x: %u objects still in use at teardown",
			       uf->id, left);
			for (uint32_t h = 0; h < uf->handles_cap; h++)
				if (uf->handles[h])
					uf->handles[h]->usecnt = 0;
		}
	} while (left);
	svd_engines_ufile_gone(uf->id);
	free(uf->handles);
	svd_ida_destroy(&uf->ids);
	svd_watch_del(&uf->w);
	close(uf->w.fd);
	uf->w.fd = -1;
	svd.ufiles[SLOT(uf->id)] = NULL;
	svd.nufiles--;
	if (!svd.nufiles)
		svd.idle_since_ms = svd_now_ms();
	svd_defer_free(uf);
}

int svd_ctx_create(struct svd_conn *c, struct svd_ufile *uf, int want_async,
		   int *client_async_fd, struct svd_ctx **out)
{
	struct svd_ctx *ctx;
	int sv[2] = { -1, -1 };

	/* Each view holds a socket in the daemon: bounded, as descriptors
	 * are (the kernel would answer a process out of them EMFILE). */
	if (svd.nctxs >= svd.max_contexts)
		return -EMFILE;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->async_fd = -1;
	if (want_async) {
		/* The application's end is blocking, as rdma-core's async_fd:
		 * ibv_get_async_event waits unless the caller sets O_NONBLOCK. */
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
		    fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
			int err = -errno;

			if (sv[0] >= 0) {
				close(sv[0]);
				close(sv[1]);
			}
			free(ctx);
			return err;
		}
		ctx->async_fd = sv[0];
		*client_async_fd = sv[1];
		ctx->id = ++svd.next_ctx_id ? svd.next_ctx_id : ++svd.next_ctx_id;
	}
	ctx->uf = uf;
	ctx->conn = c;
	ctx->next_in_conn = c->ctxs;
	c->ctxs = ctx;
	ctx->next_in_ufile = uf->ctxs;
	uf->ctxs = ctx;
	svd.nctxs++;
	*out = ctx;
	return 0;
}

void svd_ctx_destroy(struct svd_ctx *ctx)
{
	struct svd_ctx **pp;

	for (pp = &ctx->conn->ctxs; *pp; pp = &(*pp)->next_in_conn)
		if (*pp == ctx) {
			*pp = ctx->next_in_conn;
			break;
		}
	for (pp = &ctx->uf->ctxs; *pp; pp = &(*pp)->next_in_ufile)
		if (*pp == ctx) {
			*pp = ctx->next_in_ufile;
			break;
		}
	if (ctx->async_fd >= 0)
		close(ctx->async_fd);
	svd.nctxs--;
	free(ctx);
}

void svd_ctx_event_all(uint32_t event_type, uint64_t element)
{
	struct sv_async_msg m = { .event_type = event_type,
				  .element = element };

	for (struct svd_conn *c = svd.conns; c; c = c->next)
		for (struct svd_ctx *ctx = c->ctxs; ctx; ctx = ctx->next_in_conn)
			if (ctx->async_fd >= 0 &&
			    sv_send_msg(ctx->async_fd, &m, sizeof(m), NULL, 0, 1))
				sv_dbg("ctx %u: async event %u dropped", ctx->id,
				       event_type);
}

struct svd_ctx *svd_conn_view(struct svd_conn *c, struct svd_ufile *uf)
{
	for (struct svd_ctx *ctx = c->ctxs; ctx; ctx = ctx->next_in_conn)
		if (ctx->uf == uf)
			return ctx;
	return NULL;
}

int svd_handle_alloc(struct svd_ufile *uf, struct svd_obj *obj)
{
	int64_t h;

	if (obj->type <= 0 || obj->type >= SVD_OBJ_NTYPES)
		return -EINVAL;
	if (svd.ntype[obj->type] >= svd.limit[obj->type])
		return -ENOMEM; /* the device's max_<type> */
	h = svd_ida_alloc(&uf->ids);
	if (h < 0)
		return -ENOMEM;
	if (uf->ids.cap > uf->handles_cap) {
		uint32_t cap = uf->ids.cap;
		struct svd_obj **n = realloc(uf->handles, cap * sizeof(*n));

		if (!n) {
			svd_ida_free(&uf->ids, (uint32_t)h);
			return -ENOMEM;
		}
		memset(n + uf->handles_cap, 0,
		       (cap - uf->handles_cap) * sizeof(*n));
		uf->handles = n;
		uf->handles_cap = cap;
	}
	uf->handles[h] = obj;
	obj->handle = (uint32_t)h;
	obj->uf = uf;
	uf->nobjs++;
	svd.nobjs++;
	svd.ntype[obj->type]++;
	return 0;
}

void svd_handle_free(struct svd_obj *obj)
{
	struct svd_ufile *uf = obj->uf;

	if (obj->handle < uf->handles_cap && uf->handles[obj->handle] == obj) {
		uf->handles[obj->handle] = NULL;
		svd_ida_free(&uf->ids, obj->handle);
		uf->nobjs--;
		svd.nobjs--;
		svd.ntype[obj->type]--;
	}
}

struct svd_obj *svd_handle_get(struct svd_ufile *uf, uint32_t handle,
			       enum svd_obj_type type)
{
	struct svd_obj *o;

	if (handle >= uf->handles_cap)
		return NULL;
	o = uf->handles[handle];
	return o && o->type == type ? o : NULL;
}

int svd_lookup_err(struct svd_ufile *uf, uint32_t handle)
{
	return (handle < uf->handles_cap && uf->handles[handle]) ? -EINVAL :
								   -ENOENT;
}

int svd_handle_lookup(struct svd_ufile *uf, uint32_t handle,
		      enum svd_obj_type type, struct svd_obj **out)
{
	*out = svd_handle_get(uf, handle, type);
	return *out ? 0 : svd_lookup_err(uf, handle);
}

int svd_destroy_unused(struct svd_ufile *uf, uint32_t handle,
		       enum svd_obj_type type)
{
	struct svd_obj *o;
	int err = svd_handle_lookup(uf, handle, type, &o);

	if (err)
		return err;
	if (o->usecnt)
		return -EBUSY;
	svd_handle_free(o);
	o->destroy(o);
	return 0;
}

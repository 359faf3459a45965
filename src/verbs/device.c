/* SPDX-License-Identifier: MIT */
/*
 * The device list, opening, importing and closing contexts, async events.
 */
#include "verbs_int.h"
#include "check.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sv_engine.h"
#include "sv_sock.h"

static struct sv_device *the_device;
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Anything that is not a provider's ops table (see struct sv_device). */
static const char sv_device_ops_tag[] = "softverbs";

static void lib_init(void)
{
	sv_log_init("softverbs");
	sv_fork_env_init();
}

/*
 * The one device, created on first use from the daemon's DEVICE_INFO and
 * kept for the life of the process (contexts point at it).
 */
struct sv_device *sv_get_device(int *err)
{
	struct sv_device_info info;
	struct sv_device *d;

	pthread_once(&init_once, lib_init);
	pthread_mutex_lock(&dev_lock);
	d = the_device;
	if (d) {
		pthread_mutex_unlock(&dev_lock);
		*err = 0;
		return d;
	}
	*err = sv_call_simple(SV_OP_DEVICE_INFO, 0, 0, -1, NULL, 0, &info,
			      sizeof(info));
	if (*err) {
		pthread_mutex_unlock(&dev_lock);
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		pthread_mutex_unlock(&dev_lock);
		*err = -ENOMEM;
		return NULL;
	}
	d->dev.node_type = IBV_NODE_CA;
	d->dev.transport_type = IBV_TRANSPORT_IB;
	info.name[sizeof(info.name) - 1] = 0;
	snprintf(d->dev.name, sizeof(d->dev.name), "%s", info.name);
	snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs0");
	snprintf(d->dev.dev_path, sizeof(d->dev.dev_path),
		 "/sys/class/infiniband_verbs/uverbs0");
	snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path),
		 "/sys/class/infiniband/%s", d->dev.name);
	d->verbs_device_ops = sv_device_ops_tag;
	d->guid = info.node_guid;
	d->index = 0;
	the_device = d;
	pthread_mutex_unlock(&dev_lock);
	return d;
}

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list = calloc(2, sizeof(*list));
	struct sv_device *d;
	int err;

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	d = sv_get_device(&err);
	if (d)
		list[0] = &d->dev;
	/* No daemon (and none could be started) is "no device", as on a host
	 * without RDMA hardware; sv_call said why on stderr. */
	if (num_devices)
		*num_devices = d ? 1 : 0;
	return list;
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

static struct sv_device *to_svdev(struct ibv_device *device)
{
	return (struct sv_device *)device;
}

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	if (!device) {
		errno = EINVAL;
		return NULL;
	}
	return device->name;
}

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	if (!device)
		return 0;
	return to_svdev(device)->guid;
}

SV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	if (!device || device != (struct ibv_device *)the_device)
		return -1;
	return to_svdev(device)->index;
}

int sv_ctx_call(struct ibv_context *ctx, struct sv_call *c)
{
	struct sv_context *sc = to_svctx(ctx);

	c->ufile = sc->ufile;
	c->instance = sc->instance;
	c->attach_fd = ctx->cmd_fd;
	return sv_call(c);
}

int sv_ctx_call_simple(struct ibv_context *ctx, uint16_t op, const void *req,
		       size_t req_len, void *rep, size_t rep_cap)
{
	struct sv_context *sc = to_svctx(ctx);

	return sv_call_simple(op, sc->ufile, sc->instance, ctx->cmd_fd, req,
			      req_len, rep, rep_cap);
}

static struct ibv_context *new_context(struct ibv_device *device,
				       const struct sv_ctx_rep *rep, int cmd_fd,
				       int async_fd)
{
	struct sv_context *sc = calloc(1, sizeof(*sc));
	struct ibv_context *ctx;

	if (!sc)
		return NULL;
	ctx = &sc->vctx.context;
	ctx->device = device;
	ctx->cmd_fd = cmd_fd;
	ctx->async_fd = async_fd;
	ctx->num_comp_vectors = SV_NUM_COMP_VECTORS;
	pthread_mutex_init(&ctx->mutex, NULL);
	/* Tells verbs.h's static inlines that verbs_context is there. */
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	sc->vctx.sz = sizeof(sc->vctx);
	sc->ufile = rep->ufile;
	sc->ctx_id = rep->ctx;
	sc->instance = rep->instance;
	sv_set_dummy_ops(&sc->vctx);
	sv_set_query_ops(&sc->vctx);
	sv_set_dm_ops(&sc->vctx);
	sv_set_mr_ops(&sc->vctx);
	sv_set_pd_ops(&sc->vctx);
	sv_set_dp_ops(&sc->vctx);
	SV_CHECK(sv_check_obj(SV_CK_CTX, ctx, 1, NULL));
	return ctx;
}

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct sv_ctx_rep rep;
	int fds[2] = { -1, -1 };
	struct sv_call c = { .op = SV_OP_OPEN_DEVICE,
			     .attach_fd = -1,
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = fds,
			     .max_rfds = 2 };
	struct ibv_context *ctx;
	int err;

	pthread_once(&init_once, lib_init);
	if (!device || device != (struct ibv_device *)the_device) {
		errno = ENODEV;
		return NULL;
	}
	err = sv_call(&c);
	if (err)
		return sv_null_errno(err == -ENODEV ? -ENODEV : err);
	if (c.rep_len != sizeof(rep) || c.nrfds != 2) {
		sv_close_fds(fds, c.nrfds);
		return sv_null_errno(-EPROTO);
	}
	ctx = new_context(device, &rep, fds[0], fds[1]);
	if (!ctx) {
		/* Closing cmd_fd destroys the fresh ufile in the daemon. */
		sv_close_fds(fds, 2);
		return sv_null_errno(-ENOMEM);
	}
	return ctx;
}

SV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct sv_ctx_rep rep;
	int async_fd = -1;
	struct sv_call c = { .op = SV_OP_IMPORT_DEVICE,
			     .attach_fd = -1,
			     .fds = &cmd_fd,
			     .nfds = 1,
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = &async_fd,
			     .max_rfds = 1 };
	struct sv_device *d;
	struct ibv_context *ctx;
	int err;

	if (cmd_fd < 0 || fcntl(cmd_fd, F_GETFD) < 0) {
		errno = EBADF;
		return NULL;
	}
	d = sv_get_device(&err);
	if (!d)
		return sv_null_errno(-ENODEV);
	err = sv_call(&c);
	if (err)
		return sv_null_errno(err);
	if (c.rep_len != sizeof(rep) || c.nrfds != 1) {
		sv_close_fds(&async_fd, c.nrfds);
		return sv_null_errno(-EPROTO);
	}
	/* The context owns cmd_fd from now on (ibv_close_device closes it). */
	ctx = new_context(&d->dev, &rep, cmd_fd, async_fd);
	if (!ctx) {
		close(async_fd);
		return sv_null_errno(-ENOMEM);
	}
	return ctx;
}

SV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct sv_context *sc = to_svctx(ctx);
	struct sv_ctx_req req = { .ctx = sc->ctx_id };

	/* QPs still open on this context stop moving data (as the kernel
	 * destroys them); the engine detaches if it has nothing left. */
	sv_engine_ctx_close(ctx);
	/* Errors do not matter here: if the daemon is gone, so is the view. */
	sv_ctx_call_simple(ctx, SV_OP_CLOSE_CONTEXT, &req, sizeof(req), NULL, 0);
	if (ctx->async_fd >= 0)
		close(ctx->async_fd);
	if (ctx->cmd_fd >= 0)
		close(ctx->cmd_fd);
	pthread_mutex_destroy(&ctx->mutex);
	SV_CHECK(sv_check_obj(SV_CK_CTX, ctx, 0, NULL));
	free(sc);
	return 0;
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *ctx,
				  struct ibv_async_event *event)
{
	struct sv_context *sc = to_svctx(ctx);
	struct sv_async_msg m;
	ssize_t n;

again:
	n = recv(ctx->async_fd, &m, sizeof(m), 0);
	if (n < 0)
		return -1;
	if (n == 0) {
		/* EOF: the daemon (the device) is gone. */
		if (__atomic_exchange_n(&sc->fatal_reported, 1, __ATOMIC_ACQ_REL)) {
			errno = EIO;
			return -1;
		}
		memset(event, 0, sizeof(*event));
		event->event_type = IBV_EVENT_DEVICE_FATAL;
		return 0;
	}
	if (n != sizeof(m)) {
		errno = EIO;
		return -1;
	}
	memset(event, 0, sizeof(*event));
	event->event_type = m.event_type;
	switch (m.event_type) {
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		event->element.port_num = (int)m.element;
		break;
	case IBV_EVENT_DEVICE_FATAL:
		break;
	default:
		/* Object events carry the object pointer given at create time
		 * (the kernel's user_handle). */
		event->element.cq = (struct ibv_cq *)(uintptr_t)m.element;
		/* Counted for destroy's wait; an event for an object
		 * destroyed since is dropped, as the kernel does. */
		if (sv_dp_event_delivered(event))
			goto again;
		break;
	}
	return 0;
}

SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	/* CQ, QP and SRQ destroys wait for these acks; port and device
	 * events need nothing. */
	sv_dp_event_ack(event);
}

/* SPDX-License-Identifier: MIT */
/*
 * Devices, event channels and ids, addresses and routes, options, and the
 * rdma_* calls on them that do not connect (cma_conn.c connects, cma_qp.c
 * makes QPs, cma_event.c delivers events).  Each call asks softverbsd what rdma-core's librdmacm asks the kernel
 * (rdma_ucm), with the same checks before it, so errors and events are
 * the ones rdma-core gives on a RoCE device.
 */
#include "cma_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/sa.h>

/* ---- library, devices -------------------------------------------------- */

static pthread_mutex_t mut = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static struct cma_device *devices;
static struct ibv_device **dev_list;

static void lib_init(void)
{
	sv_log_init("librdmacm");
}

void cma_lib_init(void)
{
	pthread_once(&lib_once, lib_init);
}

/* The device list, once (rdma-core's ucma_init / sync_devices_list): no
 * device is ENODEV. */
int cma_init(void)
{
	int n = 0;

	cma_lib_init();
	pthread_mutex_lock(&mut);
	if (devices) {
		pthread_mutex_unlock(&mut);
		return 0;
	}
	if (!dev_list)
		dev_list = ibv_get_device_list(&n);
	if (!dev_list || !n) {
		if (dev_list)
			ibv_free_device_list(dev_list);
		dev_list = NULL;
		pthread_mutex_unlock(&mut);
		return cma_err(ENODEV);
	}
	for (int i = n - 1; i >= 0; i--) {
		struct cma_device *d = calloc(1, sizeof(*d));

		if (!d)
			break;
		d->dev = dev_list[i];
		d->guid = ibv_get_device_guid(dev_list[i]);
		d->next = devices;
		devices = d;
	}
	pthread_mutex_unlock(&mut);
	return devices ? 0 : cma_err(ENOMEM);
}

/* Must hold mut. */
static int init_device(struct cma_device *d)
{
	struct ibv_device_attr attr;
	int ret;

	if (d->verbs)
		return 0;
	d->verbs = ibv_open_device(d->dev);
	if (!d->verbs)
		return cma_err(ENODEV);
	ret = ibv_query_device(d->verbs, &attr);
	if (ret) {
		ibv_close_device(d->verbs);
		d->verbs = NULL;
		return cma_err(ret);
	}
	d->max_qpsize = attr.max_qp_wr;
	d->max_initiator_depth = (uint8_t)attr.max_qp_init_rd_atom;
	d->max_responder_resources = (uint8_t)attr.max_qp_rd_atom;
	return 0;
}

int cma_get_device(struct cma_id_private *idp, __be64 guid)
{
	struct cma_device *d;
	int ret = 0;

	pthread_mutex_lock(&mut);
	for (d = devices; d; d = d->next)
		if (d->guid == guid)
			break;
	if (!d) {
		pthread_mutex_unlock(&mut);
		return cma_err(ENODEV);
	}
	ret = init_device(d);
	if (!ret && !d->pd) {
		d->pd = ibv_alloc_pd(d->verbs);
		if (!d->pd)
			ret = -1;
	}
	if (!ret) {
		d->refcnt++;
		idp->cma_dev = d;
		idp->id.verbs = d->verbs;
		idp->id.pd = d->pd;
	}
	pthread_mutex_unlock(&mut);
	return ret;
}

static void put_device(struct cma_device *d)
{
	pthread_mutex_lock(&mut);
	if (!--d->refcnt && d->xrcd && !ibv_close_xrcd(d->xrcd))
		d->xrcd = NULL; /* (EBUSY: an SRQ or QP of it outlived its id) */
	if (!d->refcnt && d->pd) {
		ibv_dealloc_pd(d->pd);
		d->pd = NULL;
	}
	pthread_mutex_unlock(&mut);
}

struct ibv_xrcd *cma_get_xrcd(struct cma_device *d)
{
	struct ibv_xrcd *x;

	pthread_mutex_lock(&mut);
	if (!d->xrcd) {
		/* No file: a domain of this process's own, as rdma-core's
		 * ucma_get_xrcd opens it. */
		struct ibv_xrcd_init_attr a = {
			.comp_mask = IBV_XRCD_INIT_ATTR_FD |
				     IBV_XRCD_INIT_ATTR_OFLAGS,
			.fd = -1,
			.oflags = O_CREAT,
		};

		d->xrcd = ibv_open_xrcd(d->verbs, &a);
	}
	x = d->xrcd;
	pthread_mutex_unlock(&mut);
	if (!x)
		cma_err(errno ? errno : ENOMEM);
	return x;
}

int cma_max_qpsize(struct rdma_cm_id *id)
{
	struct cma_device *d;
	int max = 0;

	if (id && to_idp(id)->cma_dev)
		return to_idp(id)->cma_dev->max_qpsize;
	if (cma_init())
		return 0;
	pthread_mutex_lock(&mut);
	for (d = devices; d; d = d->next)
		if (!init_device(d) && (!max || max > d->max_qpsize))
			max = d->max_qpsize;
	pthread_mutex_unlock(&mut);
	return max;
}

SV_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **devs = NULL;
	struct cma_device *d;
	int n = 0, i = 0;

	if (cma_init())
		goto out;
	pthread_mutex_lock(&mut);
	for (d = devices; d; d = d->next) {
		if (init_device(d)) {
			pthread_mutex_unlock(&mut);
			goto out;
		}
		n++;
	}
	devs = malloc(sizeof(*devs) * (n + 1));
	if (devs) {
		for (d = devices; d; d = d->next) {
			devs[i++] = d->verbs;
			d->refcnt++;
		}
		devs[i] = NULL;
	}
	pthread_mutex_unlock(&mut);
out:
	if (num_devices)
		*num_devices = devs ? n : 0;
	return devs;
}

SV_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	if (!list)
		return;
	pthread_mutex_lock(&mut);
	for (struct cma_device *d = devices; d; d = d->next)
		for (int i = 0; list[i]; i++)
			if (list[i] == d->verbs)
				d->refcnt--;
	pthread_mutex_unlock(&mut);
	free(list);
}

/* ---- control calls ----------------------------------------------------- */

static int call_raw(uint64_t instance, uint16_t op, const void *req,
		    size_t len, void *rep, size_t rep_len, int *rfd)
{
	int fds[SV_MAX_FDS];
	struct sv_call c = { .op = op,
			     .instance = instance,
			     .attach_fd = -1,
			     .req = req,
			     .req_len = len,
			     .rep = rep,
			     .rep_cap = rep_len,
			     .rfds = fds,
			     .max_rfds = rfd ? 1 : 0 };
	int err = sv_call(&c);

	if (!err && c.rep_len != rep_len) {
		for (int i = 0; i < c.nrfds; i++)
			close(fds[i]);
		err = -EPROTO;
	}
	if (!err && rfd) {
		if (c.nrfds != 1)
			return cma_err(EPROTO);
		*rfd = fds[0];
	}
	if (err == -EIO || err == -EPIPE)
		err = -ENODEV; /* the daemon, i.e. the device, is gone */
	return err ? cma_err(-err) : 0;
}

int cma_call(struct rdma_event_channel *ch, uint16_t op, void *req,
	     size_t len, void *rep, size_t rep_len)
{
	return call_raw(to_chan(ch)->instance, op, req, len, rep, rep_len, NULL);
}

void cma_hdr(struct cma_id_private *idp, struct sv_cm_hdr *h)
{
	struct cma_channel *c = to_chan(idp->id.channel);

	h->chan = c->id;
	h->id = idp->handle;
	h->token = c->token;
}

/* ---- event channels ---------------------------------------------------- */

SV_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct sv_cm_open_rep rep;
	struct cma_channel *c;
	uint64_t inst;
	int err, fd;

	if (cma_init())
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	inst = sv_chan_instance(&err);
	if (!inst) {
		free(c);
		errno = ENODEV;
		return NULL;
	}
	if (call_raw(inst, SV_OP_CM_OPEN, NULL, 0, &rep, sizeof(rep), &fd)) {
		err = errno;
		free(c);
		errno = err;
		return NULL;
	}
	c->ch.fd = fd;
	c->id = rep.chan;
	c->token = rep.token;
	c->instance = inst;
	return &c->ch;
}

SV_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (!channel)
		return;
	close(channel->fd);
	free(to_chan(channel));
}

/* ---- the id table (handle -> id), rdma-core's ucma_idm ----------------- */

#define SLOT(h) ((h) & ((1u << 20) - 1))
static pthread_mutex_t idm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cma_id_private **idm;
static uint32_t idm_cap;

void cma_insert_id(struct cma_id_private *idp)
{
	uint32_t s = SLOT(idp->handle);

	pthread_mutex_lock(&idm_lock);
	if (s >= idm_cap) {
		uint32_t cap = idm_cap ? idm_cap : 256;
		struct cma_id_private **n;

		while (cap <= s)
			cap *= 2;
		n = realloc(idm, cap * sizeof(*n));
		if (n) {
			memset(n + idm_cap, 0, (cap - idm_cap) * sizeof(*n));
			idm = n;
			idm_cap = cap;
		}
	}
	if (s < idm_cap)
		idm[s] = idp;
	pthread_mutex_unlock(&idm_lock);
}

static void remove_id(struct cma_id_private *idp)
{
	uint32_t s = SLOT(idp->handle);

	pthread_mutex_lock(&idm_lock);
	if (s < idm_cap && idm[s] == idp)
		idm[s] = NULL;
	pthread_mutex_unlock(&idm_lock);
}

static void take(struct cma_id_private *idp)
{
	pthread_mutex_lock(&idp->mut);
	idp->events_taken++;
	pthread_mutex_unlock(&idp->mut);
}

struct cma_id_private *cma_take(uint32_t handle)
{
	struct cma_id_private *idp = NULL;
	uint32_t s = SLOT(handle);

	pthread_mutex_lock(&idm_lock);
	if (s < idm_cap && idm[s] && idm[s]->handle == handle) {
		idp = idm[s];
		take(idp);
	}
	pthread_mutex_unlock(&idm_lock);
	return idp;
}

struct cma_id_private *cma_take_removal(struct rdma_event_channel *ch)
{
	struct cma_id_private *idp = NULL;

	pthread_mutex_lock(&idm_lock);
	for (uint32_t s = 0; s < idm_cap && !idp; s++) {
		struct cma_id_private *p = idm[s];

		if (p && p->id.channel == ch && p->cma_dev &&
		    !p->removal_reported) {
			p->removal_reported = 1;
			idp = p;
			take(idp);
		}
	}
	pthread_mutex_unlock(&idm_lock);
	return idp;
}

void cma_complete_event(struct cma_id_private *idp)
{
	pthread_mutex_lock(&idp->mut);
	idp->events_completed++;
	pthread_cond_broadcast(&idp->cond);
	pthread_mutex_unlock(&idp->mut);
}

/* Waits until every event of idp taken off a channel is acked. */
static void wait_events(struct cma_id_private *idp)
{
	pthread_mutex_lock(&idp->mut);
	while (idp->events_completed < idp->events_taken)
		pthread_cond_wait(&idp->cond, &idp->mut);
	pthread_mutex_unlock(&idp->mut);
}

/* ---- ids --------------------------------------------------------------- */

static void free_id(struct cma_id_private *idp)
{
	remove_id(idp);
	if (idp->cma_dev)
		put_device(idp->cma_dev);
	pthread_cond_destroy(&idp->cond);
	pthread_mutex_destroy(&idp->mut);
	free(idp->id.route.path_rec);
	if (idp->sync && idp->id.channel)
		rdma_destroy_event_channel(idp->id.channel);
	free(idp->connect);
	free(idp->qp_init_attr);
	free(idp);
}

struct cma_id_private *cma_alloc_id(struct rdma_event_channel *ch,
				    void *context, enum rdma_port_space ps,
				    enum ibv_qp_type qp_type)
{
	struct cma_id_private *idp = calloc(1, sizeof(*idp));

	if (!idp)
		return NULL;
	idp->id.context = context;
	idp->id.ps = ps;
	idp->id.qp_type = qp_type;
	pthread_mutex_init(&idp->mut, NULL);
	pthread_cond_init(&idp->cond, NULL);
	if (!ch) {
		idp->id.channel = rdma_create_event_channel();
		if (!idp->id.channel) {
			int e = errno;

			free_id(idp);
			errno = e;
			return NULL;
		}
		idp->sync = 1;
	} else {
		idp->id.channel = ch;
	}
	return idp;
}

static int create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id,
		     void *context, enum rdma_port_space ps,
		     enum ibv_qp_type qp_type)
{
	struct sv_cm_create_req req;
	struct sv_cm_id_rep rep;
	struct cma_id_private *idp;
	int e;

	if (!id)
		return cma_err(EINVAL);
	if (cma_init())
		return -1;
	idp = cma_alloc_id(ch, context, ps, qp_type);
	if (!idp)
		return cma_err(errno ? errno : ENOMEM);
	memset(&req, 0, sizeof(req));
	cma_hdr(idp, &req.h);
	req.h.id = 0;
	req.ps = ps;
	req.qp_type = qp_type;
	if (cma_call(idp->id.channel, SV_OP_CM_CREATE_ID, &req, sizeof(req),
		     &rep, sizeof(rep))) {
		e = errno;
		free_id(idp);
		return cma_err(e);
	}
	idp->handle = rep.id;
	cma_insert_id(idp);
	*id = &idp->id;
	return 0;
}

SV_EXPORT int rdma_create_id(struct rdma_event_channel *channel,
			     struct rdma_cm_id **id, void *context,
			     enum rdma_port_space ps)
{
	enum ibv_qp_type t = ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP ?
				     IBV_QPT_UD : IBV_QPT_RC;

	return create_id(channel, id, context, ps, t);
}

int cma_create_id2(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		   void *context, enum rdma_port_space ps,
		   enum ibv_qp_type qp_type)
{
	return create_id(channel, id, context, ps, qp_type);
}

SV_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cma_id_private *idp;
	struct sv_cm_hdr h;
	struct sv_cm_id_rep rep;

	if (!id)
		return cma_err(EINVAL);
	idp = to_idp(id);
	cma_hdr(idp, &h);
	/* Out of the table first: no new event can reach it. */
	remove_id(idp);
	if (cma_call(id->channel, SV_OP_CM_DESTROY_ID, &h, sizeof(h), &rep,
		     sizeof(rep)) && errno != ENODEV) {
		int e = errno;

		cma_insert_id(idp);
		return cma_err(e);
	}
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	wait_events(idp);
	cma_mcast_free(idp);
	free_id(idp);
	return 0;
}

int cma_addrlen(const struct sockaddr *addr)
{
	if (!addr)
		return 0;
	switch (addr->sa_family) {
	case PF_INET:
		return sizeof(struct sockaddr_in);
	case PF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0; /* no AF_IB: only IP addressing over RoCE */
	}
}

int cma_query(struct rdma_cm_id *id)
{
	struct cma_id_private *idp = to_idp(id);
	struct sv_cm_query_rep rep;
	struct sv_cm_hdr h;

	cma_hdr(idp, &h);
	if (cma_call(id->channel, SV_OP_CM_QUERY, &h, sizeof(h), &rep,
		     sizeof(rep)))
		return -1;
	memset(&id->route.addr.src_storage, 0, sizeof(id->route.addr.src_storage));
	memset(&id->route.addr.dst_storage, 0, sizeof(id->route.addr.dst_storage));
	memcpy(&id->route.addr.src_addr, &rep.src, sizeof(rep.src));
	memcpy(&id->route.addr.dst_addr, &rep.dst, sizeof(rep.dst));
	memcpy(id->route.addr.addr.ibaddr.sgid.raw, rep.sgid, 16);
	memcpy(id->route.addr.addr.ibaddr.dgid.raw, rep.dgid, 16);
	if (!idp->cma_dev && rep.node_guid) {
		if (cma_get_device(idp, rep.node_guid))
			return -1;
		id->port_num = rep.port_num;
	}
	if (rep.node_guid)
		id->route.addr.addr.ibaddr.pkey = htobe16(rep.pkey);
	if (rep.num_paths && !id->route.path_rec) {
		id->route.path_rec = malloc(sizeof(*id->route.path_rec));
		if (!id->route.path_rec)
			return cma_err(ENOMEM);
	}
	if (rep.num_paths) {
		*id->route.path_rec = rep.path;
		id->route.num_paths = 1;
	}
	return 0;
}

SV_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct sv_cm_addr_req req;
	int len = cma_addrlen(addr);

	if (!id || !len)
		return cma_err(EINVAL);
	memset(&req, 0, sizeof(req));
	cma_hdr(to_idp(id), &req.h);
	memcpy(&req.src, addr, len);
	req.src_len = len;
	if (cma_call(id->channel, SV_OP_CM_BIND, &req, sizeof(req), NULL, 0))
		return -1;
	return cma_query(id);
}

int cma_complete(struct rdma_cm_id *id)
{
	struct cma_id_private *idp = to_idp(id);
	int ret;

	if (!idp->sync)
		return 0;
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	ret = rdma_get_cm_event(id->channel, &id->event);
	if (ret)
		return ret;
	if (id->event->status) {
		if (id->event->event == RDMA_CM_EVENT_REJECTED)
			return cma_err(ECONNREFUSED);
		return cma_err(id->event->status < 0 ? -id->event->status :
						       id->event->status);
	}
	return 0;
}

SV_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	struct sv_cm_addr_req req;
	int dst_len = cma_addrlen(dst_addr), src_len = cma_addrlen(src_addr);

	if (!id || !dst_len || (src_addr && !src_len))
		return cma_err(EINVAL);
	memset(&req, 0, sizeof(req));
	cma_hdr(to_idp(id), &req.h);
	if (src_addr)
		memcpy(&req.src, src_addr, src_len);
	req.src_len = src_len;
	memcpy(&req.dst, dst_addr, dst_len);
	req.dst_len = dst_len;
	req.timeout_ms = timeout_ms;
	if (cma_call(id->channel, SV_OP_CM_RESOLVE_ADDR, &req, sizeof(req),
		     NULL, 0))
		return -1;
	memcpy(&id->route.addr.dst_storage, dst_addr, dst_len);
	return cma_complete(id);
}

SV_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct sv_cm_int_req req;

	if (!id)
		return cma_err(EINVAL);
	memset(&req, 0, sizeof(req));
	cma_hdr(to_idp(id), &req.h);
	req.val = timeout_ms;
	if (cma_call(id->channel, SV_OP_CM_RESOLVE_ROUTE, &req, sizeof(req),
		     NULL, 0))
		return -1;
	return cma_complete(id);
}

SV_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id,
				struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct sv_cm_qp_attr_rep rep;
	struct sv_cm_int_req req;

	if (!id || !qp_attr || !qp_attr_mask)
		return cma_err(EINVAL);
	memset(&req, 0, sizeof(req));
	cma_hdr(to_idp(id), &req.h);
	req.val = qp_attr->qp_state;
	if (cma_call(id->channel, SV_OP_CM_INIT_QP_ATTR, &req, sizeof(req),
		     &rep, sizeof(rep)))
		return -1;
	*qp_attr = rep.attr;
	*qp_attr_mask = rep.mask;
	return 0;
}

SV_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
			      void *optval, size_t optlen)
{
	struct sv_cm_opt_req *req;
	int ret;

	if (!id)
		return cma_err(EINVAL);
	if (optlen > SV_CM_OPT_MAX)
		return cma_err(EINVAL);
	if (optlen && !optval)
		return cma_err(EFAULT);
	req = calloc(1, sizeof(*req) + optlen);
	if (!req)
		return cma_err(ENOMEM);
	cma_hdr(to_idp(id), &req->h);
	req->level = level;
	req->optname = optname;
	req->optlen = (uint32_t)optlen;
	if (optlen)
		memcpy(req->optval, optval, optlen);
	ret = cma_call(id->channel, SV_OP_CM_SET_OPTION, req,
		       sizeof(*req) + optlen, NULL, 0);
	free(req);
	/* A path set by hand completes the route (ROUTE_RESOLVED). */
	if (!ret && level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
		ret = cma_query(id);
	return ret;
}

SV_EXPORT int rdma_migrate_id(struct rdma_cm_id *id,
			      struct rdma_event_channel *channel)
{
	struct cma_id_private *idp;
	struct sv_cm_migrate_req req;
	struct sv_cm_id_rep rep;
	int sync;

	if (!id)
		return cma_err(EINVAL);
	idp = to_idp(id);
	if (idp->sync && !channel)
		return cma_err(EINVAL);
	sync = !channel;
	if (sync) {
		channel = rdma_create_event_channel();
		if (!channel)
			return -1;
	}
	memset(&req, 0, sizeof(req));
	req.h.chan = to_chan(channel)->id;
	req.h.token = to_chan(channel)->token;
	req.h.id = idp->handle;
	req.old_chan = to_chan(id->channel)->id;
	req.old_token = to_chan(id->channel)->token;
	if (cma_call(channel, SV_OP_CM_MIGRATE, &req, sizeof(req), &rep,
		     sizeof(rep))) {
		int e = errno;

		if (sync)
			rdma_destroy_event_channel(channel);
		return cma_err(e);
	}
	if (idp->sync) {
		if (id->event) {
			rdma_ack_cm_event(id->event);
			id->event = NULL;
		}
		rdma_destroy_event_channel(id->channel);
	}
	pthread_mutex_lock(&idp->mut);
	idp->sync = sync;
	id->channel = channel;
	while (idp->events_completed < idp->events_taken)
		pthread_cond_wait(&idp->cond, &idp->mut);
	pthread_mutex_unlock(&idp->mut);
	return 0;
}

SV_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return cma_get_port(&id->route.addr.src_addr);
}

SV_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return cma_get_port(&id->route.addr.dst_addr);
}

SV_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

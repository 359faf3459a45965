/* SPDX-License-Identifier: MIT */
/*
 * rdma_get_cm_event and rdma_ack_cm_event: events fetched from the daemon
 * and processed as rdma-core processes the kernel's (the addresses and
 * device of a resolved id, a new id for each connection request, the
 * requester's QP moved to RTS and the RTU sent before its CONNECT_RESPONSE
 * becomes ESTABLISHED).
 *
 * The channel fd carries one byte per event the daemon queued (sv_cm.h):
 * a blocking read waits for one, O_NONBLOCK makes it EAGAIN, and EOF means
 * the daemon (the device) is gone.  Then every id of the channel bound to
 * the device gets one DEVICE_REMOVAL, as the kernel gives when a device
 * goes away, and after that the call fails with ENODEV.
 */
#include "cma_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static void copy_conn(struct cma_event *evt, const struct sv_cm_event *ev)
{
	struct rdma_conn_param *d = &evt->event.param.conn;
	const struct sv_cm_conn_param *s = &ev->conn;

	d->private_data_len = s->pdata_len;
	if (s->pdata_len) {
		memcpy(evt->private_data, s->pdata, s->pdata_len);
		d->private_data = evt->private_data;
	}
	d->responder_resources = s->responder_resources;
	d->initiator_depth = s->initiator_depth;
	d->flow_control = s->flow_control;
	d->retry_count = s->retry_count;
	d->rnr_retry_count = s->rnr_retry_count;
	d->srq = s->srq;
	d->qp_num = s->qp_num;
}

static void copy_ud(struct cma_event *evt, const struct sv_cm_event *ev)
{
	struct rdma_ud_param *d = &evt->event.param.ud;

	d->private_data_len = ev->conn.pdata_len;
	if (ev->conn.pdata_len) {
		memcpy(evt->private_data, ev->conn.pdata, ev->conn.pdata_len);
		d->private_data = evt->private_data;
	}
	d->ah_attr = ev->ah_attr;
	d->qp_num = ev->ud_qpn;
	d->qkey = ev->ud_qkey;
}

static int is_ud(const struct cma_id_private *idp)
{
	return idp->id.qp_type == IBV_QPT_UD;
}

/* Forgets an id of the daemon the library never took (a request whose
 * listener is gone). */
static void drop_daemon_id(struct rdma_event_channel *ch, uint32_t handle)
{
	struct sv_cm_hdr h = { .chan = to_chan(ch)->id,
			       .id = handle,
			       .token = to_chan(ch)->token };
	struct sv_cm_id_rep rep;

	cma_call(ch, SV_OP_CM_DESTROY_ID, &h, sizeof(h), &rep, sizeof(rep));
}

/* A CONNECT_REQUEST: the id the daemon made becomes the user's (rdma-core's
 * ucma_process_conn_req).  0, or -1 when the request was dropped. */
static int conn_req(struct cma_event *evt, const struct sv_cm_event *ev)
{
	struct cma_id_private *l = evt->id_priv, *idp;
	struct rdma_event_channel *ch = l->id.channel;

	idp = cma_alloc_id(ch, l->id.context, l->id.ps, l->id.qp_type);
	if (!idp) {
		drop_daemon_id(ch, ev->id);
		goto err;
	}
	evt->event.listen_id = &l->id;
	evt->event.id = &idp->id;
	idp->handle = ev->id;
	cma_insert_id(idp);
	idp->initiator_depth = ev->conn.initiator_depth;
	idp->responder_resources = ev->conn.responder_resources;
	idp->remote_ece.vendor_id = ev->conn.ece_vendor_id;
	idp->remote_ece.options = ev->conn.ece_attr_mod;
	if (l->sync && rdma_migrate_id(&idp->id, NULL))
		goto err_destroy;
	if (cma_query(&idp->id))
		goto err_destroy;
	return 0;

err_destroy:
	rdma_destroy_id(&idp->id);
err:
	cma_complete_event(l);
	return -1;
}

/* The requester's side of a REP: its QP to RTR and RTS, then the RTU
 * (rdma-core's ucma_process_conn_resp).  0 or -1 with errno. */
static int conn_resp(struct cma_id_private *idp)
{
	int e;

	if (cma_modify_qp_rtr(&idp->id, RDMA_MAX_RESP_RES) ||
	    cma_modify_qp_rts(&idp->id, RDMA_MAX_INIT_DEPTH) ||
	    cma_send_accept(idp, NULL, 0, 0, 0))
		goto err;
	return 0;
err:
	e = errno;
	cma_modify_qp_err(&idp->id);
	errno = e;
	return -1;
}

/* Turns what the daemon sent into the user's event.  0: *evt is ready;
 * 1: consumed internally, fetch the next one. */
static int process(struct rdma_event_channel *ch, struct cma_event *evt,
		   const struct sv_cm_event *ev)
{
	struct cma_id_private *idp;
	uint32_t owner = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ?
				 ev->listen_id : ev->id;

	idp = cma_take(owner);
	if (!idp) {
		/* Its id is being destroyed: nobody wants it. */
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			drop_daemon_id(ch, ev->id);
		return 1;
	}
	evt->id_priv = idp;
	evt->event.id = &idp->id;
	evt->event.event = ev->event;
	evt->event.status = ev->status;
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (cma_query(&idp->id)) {
			evt->event.status = -errno;
			evt->event.event = RDMA_CM_EVENT_ADDR_ERROR;
		}
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (cma_query(&idp->id)) {
			evt->event.status = -errno;
			evt->event.event = RDMA_CM_EVENT_ROUTE_ERROR;
		}
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		if (is_ud(idp))
			copy_ud(evt, ev);
		else
			copy_conn(evt, ev);
		if (conn_req(evt, ev))
			return 1;
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		copy_conn(evt, ev);
		idp->remote_ece.vendor_id = ev->conn.ece_vendor_id;
		idp->remote_ece.options = ev->conn.ece_attr_mod;
		if (!idp->id.qp)
			break;
		if (conn_resp(idp)) {
			evt->event.status = -errno;
			evt->event.event = RDMA_CM_EVENT_CONNECT_ERROR;
			idp->connect_error = 1;
		} else {
			evt->event.event = RDMA_CM_EVENT_ESTABLISHED;
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (is_ud(idp))
			copy_ud(evt, ev);
		else
			copy_conn(evt, ev);
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (idp->connect_error) {
			cma_complete_event(idp);
			return 1;
		}
		copy_conn(evt, ev);
		cma_modify_qp_err(&idp->id);
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		copy_ud(evt, ev);
		if (cma_mcast_event(evt)) {
			cma_complete_event(idp);
			return 1;
		}
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (idp->connect_error) {
			cma_complete_event(idp);
			return 1;
		}
		copy_conn(evt, ev);
		break;
	default:
		if (is_ud(idp))
			copy_ud(evt, ev);
		else
			copy_conn(evt, ev);
		break;
	}
	return 0;
}

SV_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				struct rdma_cm_event **event)
{
	struct cma_event *evt;
	struct sv_cm_event ev;
	struct sv_cm_hdr h;
	char b;
	ssize_t n;
	int e;

	if (cma_init())
		return -1;
	if (!channel || !event)
		return cma_err(EINVAL);
	evt = malloc(sizeof(*evt));
	if (!evt)
		return cma_err(ENOMEM);
	memset(&h, 0, sizeof(h));
	h.chan = to_chan(channel)->id;
	h.token = to_chan(channel)->token;
	for (;;) {
		memset(evt, 0, sizeof(*evt));
		n = recv(channel->fd, &b, 1, 0);
		if (n < 0) {
			e = errno;
			free(evt);
			return cma_err(e);
		}
		if (n == 0) {
			/* The daemon is gone: the device was removed. */
			struct cma_id_private *idp = cma_take_removal(channel);

			if (!idp) {
				free(evt);
				return cma_err(ENODEV);
			}
			evt->id_priv = idp;
			evt->event.id = &idp->id;
			evt->event.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
			break;
		}
		if (cma_call(channel, SV_OP_CM_GET_EVENT, &h, sizeof(h), &ev,
			     sizeof(ev))) {
			if (errno == EAGAIN || errno == ENODEV)
				continue; /* withdrawn, or EOF comes next */
			e = errno;
			free(evt);
			return cma_err(e);
		}
		if (!process(channel, evt, &ev))
			break;
	}
	*event = &evt->event;
	return 0;
}

SV_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cma_event *evt;

	if (!event)
		return cma_err(EINVAL);
	evt = cma_container_of(event, struct cma_event, event);
	cma_complete_event(evt->id_priv);
	free(evt);
	return 0;
}

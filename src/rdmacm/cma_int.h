/* SPDX-License-Identifier: MIT */
/*
 * librdmacm.so.1 internals.  The public ABI is the system's
 * <rdma/rdma_cma.h>, <rdma/rdma_verbs.h> and <rdma/rsocket.h>; nothing
 * here is exported (-fvisibility=hidden and librdmacm.map).
 *
 * The library is rdma-core's librdmacm with softverbsd playing the
 * kernel's rdma_ucm: the same ids, events and QP transitions, asked of the
 * daemon over the process's control channel (sv_client, src/common) and
 * the event channel's socket (sv_cm.h), and the verbs reached through the
 * public libibverbs API only.
 *
 *   cma.c        devices, channels, ids, the rdma_* calls
 *   cma_event.c  rdma_get_cm_event, rdma_ack_cm_event, event processing
 *   cma_qp.c     QPs, SRQs and endpoints made through an id, QP transitions
 *   addrinfo.c   rdma_getaddrinfo
 *   rsocket.c    the rsocket API (its own protocol over RC QPs)
 */
#ifndef CMA_INT_H
#define CMA_INT_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "sv_client.h"
#include "sv_cm.h"
#include "sv_log.h"
#include "sv_proto.h"

#define SV_EXPORT __attribute__((visibility("default")))

#define cma_container_of(ptr, type, member)                                    \
	((type *)((char *)(ptr) - offsetof(type, member)))

/* Sets errno and answers -1, as rdma-core's ERR(). */
static inline int cma_err(int e)
{
	errno = e;
	return -1;
}

/* What rdma_create_event_channel hands out: the public part first. */
struct cma_channel {
	struct rdma_event_channel ch;
	uint32_t id;
	uint64_t token;
	uint64_t instance; /* the daemon that made it */
};

static inline struct cma_channel *to_chan(struct rdma_event_channel *c)
{
	return cma_container_of(c, struct cma_channel, ch);
}

/* The device as rdma_cm ids see it (rdma-core's struct cma_device). */
struct cma_device {
	struct ibv_device *dev;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd; /* XRC ids' domain, opened at first need */
	__be64 guid;
	int refcnt;
	int max_qpsize;
	uint8_t max_initiator_depth;
	uint8_t max_responder_resources;
	struct cma_device *next;
};

struct cma_id_private {
	struct rdma_cm_id id; /* first: handed out */
	struct cma_device *cma_dev;
	uint32_t handle;
	int sync; /* its own channel (rdma_create_id with none) */
	pthread_mutex_t mut;
	pthread_cond_t cond;
	/* Events of this id taken off the channel (by the library) and
	 * those acked or consumed: destroy waits for them to meet. */
	uint32_t events_taken;
	uint32_t events_completed;
	int connect_error;
	int removal_reported; /* DEVICE_REMOVAL given after the daemon died */
	void *connect;	      /* private data from rdma_getaddrinfo */
	size_t connect_len;
	struct ibv_qp_init_attr *qp_init_attr; /* passive endpoints */
	uint8_t initiator_depth;
	uint8_t responder_resources;
	struct ibv_ece local_ece;
	struct ibv_ece remote_ece;
	struct cma_mcast *mcast; /* its joins, oldest first (under mut) */
};

static inline struct cma_id_private *to_idp(struct rdma_cm_id *id)
{
	return cma_container_of(id, struct cma_id_private, id);
}

/* An event as handed to the user, and what it counts for. */
struct cma_event {
	struct rdma_cm_event event;
	uint8_t private_data[SV_CM_PDATA_MAX];
	struct cma_id_private *id_priv;
};

/* cma.c */
void cma_lib_init(void);
int cma_init(void);
/* Opens the device with this node GUID for id (and its PD): 0 or -1/errno. */
int cma_get_device(struct cma_id_private *idp, __be64 guid);
/* The device's XRC domain (opened at the first call); NULL with errno. */
struct ibv_xrcd *cma_get_xrcd(struct cma_device *d);
int cma_max_qpsize(struct rdma_cm_id *id);
/* One control call for an id's channel: 0 or -1 with errno (the daemon
 * gone: ENODEV). */
int cma_call(struct rdma_event_channel *ch, uint16_t op, void *req,
	     size_t len, void *rep, size_t rep_len);
void cma_hdr(struct cma_id_private *idp, struct sv_cm_hdr *h);
/* Refreshes id->route and the device from the daemon (QUERY). */
int cma_query(struct rdma_cm_id *id);
/* The id with this handle, its events_taken raised (under the table
 * lock, so it cannot be freed before the event is completed); NULL when
 * unknown. */
struct cma_id_private *cma_take(uint32_t handle);
/* An id of channel ch without a DEVICE_REMOVAL yet (taken), or NULL. */
struct cma_id_private *cma_take_removal(struct rdma_event_channel *ch);
struct cma_id_private *cma_alloc_id(struct rdma_event_channel *ch,
				    void *context, enum rdma_port_space ps,
				    enum ibv_qp_type qp_type);
void cma_insert_id(struct cma_id_private *idp);
/* rdma_create_id with the QP type given (rdma_create_ep's). */
int cma_create_id2(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		   void *context, enum rdma_port_space ps,
		   enum ibv_qp_type qp_type);
void cma_complete_event(struct cma_id_private *idp);
/* Waits for a sync id's next event; 0 or -1/errno from its status. */
int cma_complete(struct rdma_cm_id *id);
int cma_addrlen(const struct sockaddr *addr);
int cma_send_accept(struct cma_id_private *idp,
		    const struct rdma_conn_param *param, uint32_t qp_num,
		    uint8_t srq, int valid);

/* cma_qp.c */
int cma_modify_qp_rtr(struct rdma_cm_id *id, uint8_t resp_res);
int cma_modify_qp_rts(struct rdma_cm_id *id, uint8_t init_depth);
int cma_modify_qp_err(struct rdma_cm_id *id);

/* cma_mcast.c */
/* A MULTICAST_JOIN or _ERROR event of evt->id_priv: its join's context
 * in param.ud.private_data, the QP attached (an error makes it
 * MULTICAST_ERROR).  1: no join of the id has this group any more (the
 * event is dropped). */
int cma_mcast_event(struct cma_event *evt);
/* Frees the joins of an id being destroyed. */
void cma_mcast_free(struct cma_id_private *idp);

/* addrinfo.c */
__be16 cma_get_port(const struct sockaddr *addr);

#endif

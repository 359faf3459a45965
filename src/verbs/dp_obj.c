/* SPDX-License-Identifier: MIT */
/*
 * Which data-path objects are alive, for async events (see dp_int.h), and
 * the acks ibv_destroy_{cq,qp,srq} wait for, as rdma-core's
 * ibv_cmd_destroy_* do with the kernel's events_reported counts.
 */
#include "dp_int.h"

#include <stdlib.h>

#define NBUCKETS 1024u

struct live {
	void *obj;
	struct live *next;
};

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct live *buckets[NBUCKETS];

static unsigned bucket(const void *p)
{
	uintptr_t v = (uintptr_t)p;

	return (unsigned)((v >> 4) ^ (v >> 14)) % NBUCKETS;
}

void sv_dp_obj_add(void *obj)
{
	struct live *l = malloc(sizeof(*l));

	/* Without the entry, events for obj are dropped: degraded, not
	 * wrong (nothing waits for an event it never read). */
	if (!l)
		return;
	l->obj = obj;
	pthread_mutex_lock(&live_lock);
	l->next = buckets[bucket(obj)];
	buckets[bucket(obj)] = l;
	pthread_mutex_unlock(&live_lock);
}

void sv_dp_obj_del(void *obj)
{
	struct live **pp, *l;

	pthread_mutex_lock(&live_lock);
	for (pp = &buckets[bucket(obj)]; (l = *pp); pp = &l->next)
		if (l->obj == obj) {
			*pp = l->next;
			free(l);
			break;
		}
	pthread_mutex_unlock(&live_lock);
}

/* Must hold live_lock. */
static int is_live(const void *obj)
{
	for (struct live *l = buckets[bucket(obj)]; l; l = l->next)
		if (l->obj == obj)
			return 1;
	return 0;
}

enum ev_kind { EV_NONE, EV_CQ, EV_QP, EV_SRQ };

static enum ev_kind kind_of(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR:
		return EV_CQ;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return EV_QP;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return EV_SRQ;
	default:
		return EV_NONE;
	}
}

int sv_dp_event_delivered(struct ibv_async_event *ev)
{
	enum ev_kind k = kind_of(ev->event_type);
	void *obj = ev->element.cq;
	int ret = 0;

	if (k == EV_NONE)
		return 0;
	pthread_mutex_lock(&live_lock);
	if (!obj || !is_live(obj))
		ret = -1;
	else if (k == EV_CQ)
		to_svcq(obj)->async_events++;
	else if (k == EV_QP)
		to_svqp(obj)->events_delivered++;
	else
		to_svsrq(obj)->events_delivered++;
	pthread_mutex_unlock(&live_lock);
	return ret;
}

void sv_dp_event_ack(struct ibv_async_event *ev)
{
	switch (kind_of(ev->event_type)) {
	case EV_CQ: {
		struct ibv_cq *cq = ev->element.cq;

		pthread_mutex_lock(&cq->mutex);
		cq->async_events_completed++;
		pthread_cond_broadcast(&cq->cond);
		pthread_mutex_unlock(&cq->mutex);
		break;
	}
	case EV_QP: {
		struct ibv_qp *qp = ev->element.qp;

		pthread_mutex_lock(&qp->mutex);
		qp->events_completed++;
		pthread_cond_broadcast(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
		break;
	}
	case EV_SRQ: {
		struct ibv_srq *srq = ev->element.srq;

		pthread_mutex_lock(&srq->mutex);
		srq->events_completed++;
		pthread_cond_broadcast(&srq->cond);
		pthread_mutex_unlock(&srq->mutex);
		break;
	}
	case EV_NONE:
		break;
	}
}

void sv_dp_wait_acks(pthread_mutex_t *mutex, pthread_cond_t *cond,
		     const uint32_t *acked, const uint32_t *delivered)
{
	uint32_t want;

	/* delivered no longer moves: the object left the live set. */
	pthread_mutex_lock(&live_lock);
	want = *delivered;
	pthread_mutex_unlock(&live_lock);
	pthread_mutex_lock(mutex);
	while (*acked != want)
		pthread_cond_wait(cond, mutex);
	pthread_mutex_unlock(mutex);
}

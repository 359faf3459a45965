/* SPDX-License-Identifier: MIT */
/*
 * Completion queues and completion channels.
 *
 * A CQ is the engine's (src/engine/sv_queue.c): a ring of struct ibv_wc in
 * shared memory that any engine delivering to one of our QPs produces
 * into; the application pops with ibv_poll_cq or the ibv_cq_ex
 * start/next/end_poll calls, and the daemon keeps a handle that counts
 * the QPs using it.  The ring holds exactly cqe entries: one more
 * completion overflows it, which loses the entry and raises
 * IBV_EVENT_CQ_ERR once.
 *
 * A completion channel is an eventfd (EFD_SEMAPHORE: one count per event,
 * pollable, blocking unless the application sets O_NONBLOCK) plus a list
 * of the CQs with unread events (the engine appends, sv_cq_comp_event),
 * so destroying a CQ withdraws its pending events as the kernel does.
 */
#include "dp_int.h"
#include "check.h"
#include "sv_lock.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static struct sv_channel *to_svchan(struct ibv_comp_channel *ch)
{
	return (struct sv_channel *)ch;
}

/* ----------------------------------------------------------- channel -- */

SV_EXPORT struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *context)
{
	struct sv_channel *c;

	if (!context)
		return sv_null_errno(-EINVAL);
	c = calloc(1, sizeof(*c));
	if (!c)
		return sv_null_errno(-ENOMEM);
	c->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (c->ch.fd < 0) {
		free(c);
		return NULL; /* errno from eventfd */
	}
	c->ch.context = context;
	c->ch.refcnt = 0;
	pthread_mutex_init(&c->lock, NULL);
	return &c->ch;
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_channel *c = to_svchan(channel);
	struct ibv_context *ctx = channel->context;
	int busy;

	sv_lock_mutex(&ctx->mutex, SV_LOCK_CTX);
	busy = channel->refcnt != 0;
	sv_unlock_mutex(&ctx->mutex);
	if (busy) {
		errno = EBUSY;
		return EBUSY;
	}
	close(channel->fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return 0;
}

/* Withdraws cq's unread events (the eventfd count may then be ahead of
 * the list: ibv_get_cq_event skips such counts). */
static void channel_forget(struct sv_cq *cq)
{
	struct sv_channel *c = to_svchan(cq->ex.channel);
	struct sv_cq **pp, *prev = NULL;

	sv_lock_mutex(&c->lock, SV_LOCK_CHANNEL);
	for (pp = &c->head; *pp; prev = *pp, pp = &(*pp)->chan_next)
		if (*pp == cq) {
			*pp = cq->chan_next;
			if (c->tail == cq)
				c->tail = prev;
			break;
		}
	cq->chan_pending = 0;
	sv_unlock_mutex(&c->lock);
}

/*
 * Returns 0 with the next CQ that had a completion event, or -1 with errno
 * (EAGAIN when the application made channel->fd non-blocking and nothing
 * is there).  Blocks otherwise.
 */
SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel,
			       struct ibv_cq **cq, void **cq_context)
{
	struct sv_channel *c = to_svchan(channel);
	struct sv_cq *got;
	uint64_t v;

	for (;;) {
		if (read(channel->fd, &v, sizeof(v)) != sizeof(v))
			return -1;
		sv_lock_mutex(&c->lock, SV_LOCK_CHANNEL);
		got = c->head;
		if (got) {
			got->comp_events++;
			if (--got->chan_pending == 0) {
				c->head = got->chan_next;
				if (!c->head)
					c->tail = NULL;
			}
		}
		sv_unlock_mutex(&c->lock);
		if (got)
			break;
		/* A count left by a destroyed CQ: wait for a real one. */
	}
	*cq = ibv_cq_ex_to_cq(&got->ex);
	*cq_context = got->ex.cq_context;
	return 0;
}

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	sv_lock_mutex(&cq->mutex, SV_LOCK_OBJ);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	sv_unlock_mutex(&cq->mutex);
}

/* ---------------------------------------------------------- the ring -- */

/* Pops up to n entries (and their stamps into stamp, when not NULL). */
static int take(struct sv_cq *cq, int n, struct ibv_wc *wc, uint64_t *stamp)
{
	int got;

	sv_lock_spin(&cq->poll_lock, SV_LOCK_CQ_POLL);
	got = sv_cq_consume(cq, n, wc, stamp);
	sv_unlock_spin(&cq->poll_lock);
	sv_fault_polled(cq->eng, wc, got); /* recv plans: docs/faults.md */
	SV_CHECK(sv_check_polled(cq, wc, got));
	return got;
}

static int poll_stamped(struct sv_cq *cq, int n, struct ibv_wc *wc,
			uint64_t *stamp)
{
	int got;

	if (n < 0)
		return -EINVAL;
	sv_engine_note_poll(cq->eng);
	got = take(cq, n, wc, stamp);
	if (got == 0 && n > 0) {
		/* Poll first: an empty CQ drives the engine inline. */
		sv_engine_progress(cq->eng);
		got = take(cq, n, wc, stamp);
	}
	if (got > 0)
		sv_engine_note_got(cq->eng);
	return got;
}

static int poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	return poll_stamped(to_svcq(ibcq), n, wc, NULL);
}

static int req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	sv_cq_arm(to_svcq(ibcq), solicited_only);
	sv_engine_note_notify(to_svcq(ibcq)->eng);
	return 0;
}

/* ----------------------------------------------- ibv_cq_ex polling -- */

static void load_cur(struct sv_cq *cq)
{
	cq->ex.wr_id = cq->cur.wr_id;
	cq->ex.status = cq->cur.status;
}

static int start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	struct sv_cq *cq = (struct sv_cq *)ex;

	if (attr->comp_mask)
		return EINVAL;
	if (poll_stamped(cq, 1, &cq->cur, &cq->cur_stamp) != 1)
		return ENOENT;
	load_cur(cq);
	return 0;
}

static int next_poll(struct ibv_cq_ex *ex)
{
	struct sv_cq *cq = (struct sv_cq *)ex;

	if (take(cq, 1, &cq->cur, &cq->cur_stamp) != 1)
		return ENOENT;
	load_cur(cq);
	return 0;
}

static void end_poll(struct ibv_cq_ex *ex)
{
	(void)ex;
}

/* One ibv_cq_ex read_* accessor: a field of the completion start_poll or
 * next_poll loaded. */
#define READ_WC(type, field)                                                   \
	static type read_##field(struct ibv_cq_ex *ex)                         \
	{                                                                      \
		return ((struct sv_cq *)ex)->cur.field;                        \
	}

READ_WC(enum ibv_wc_opcode, opcode)
READ_WC(uint32_t, vendor_err)
READ_WC(uint32_t, byte_len)
READ_WC(__be32, imm_data)
READ_WC(uint32_t, qp_num)
READ_WC(uint32_t, src_qp)
READ_WC(unsigned int, wc_flags)
READ_WC(uint32_t, slid)
READ_WC(uint8_t, sl)
READ_WC(uint8_t, dlid_path_bits)

/* The completion's stamp in the device's clock: CLOCK_MONOTONIC in ns
 * (hca_core_clock 1,000,000 kHz, query.c), taken when the completion was
 * made. */
static uint64_t read_completion_ts(struct ibv_cq_ex *ex)
{
	return ((struct sv_cq *)ex)->cur_stamp;
}

/* The same instant in CLOCK_REALTIME ns, converted with the clocks' offset
 * at this call (as hardware converts with its clock's current parameters):
 * the stamps of one CQ stay monotone unless the wall clock is set. */
static uint64_t read_completion_wallclock_ns(struct ibv_cq_ex *ex)
{
	struct timespec mono, real;
	int64_t off;

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	off = ((int64_t)real.tv_sec - (int64_t)mono.tv_sec) * 1000000000 +
	      ((int64_t)real.tv_nsec - (int64_t)mono.tv_nsec);
	return ((struct sv_cq *)ex)->cur_stamp + (uint64_t)off;
}

/* ------------------------------------------------------ create/destroy -- */

/* The wc_flags this device fills (VLANs, flow tags and tag matching are
 * not: asking for them is EOPNOTSUPP). */
#define SV_WC_STAMPS                                                           \
	((uint64_t)(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                      \
		    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK))
#define SV_WC_FLAGS ((uint64_t)IBV_WC_STANDARD_FLAGS | SV_WC_STAMPS)

static struct sv_cq *cq_new(struct ibv_context *ctx,
			    const struct ibv_cq_init_attr_ex *a)
{
	struct sv_create_cq_req req = { .cqe = a->cqe };
	struct sv_ctx_ref cref = sv_cref(ctx);
	struct sv_obj_rep rep;
	struct sv_cq *cq;
	struct sv_engine *eng;
	struct sv_call c = { .op = SV_OP_CREATE_CQ,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .nfds = 1 };
	int err;

	if (!a->cqe || a->cqe > SV_MAX_CQE ||
	    a->comp_vector >= (uint32_t)ctx->num_comp_vectors)
		return sv_null_errno(-EINVAL);
	if (a->channel && a->channel->context != ctx)
		return sv_null_errno(-EINVAL);
	eng = sv_engine_get(&cref);
	if (!eng)
		return NULL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return sv_null_errno(-ENOMEM);
	err = sv_cq_shm_create(cq, a->cqe, !!(a->wc_flags & SV_WC_STAMPS));
	if (err)
		goto err_free;
	cq->wc_flags = a->wc_flags;
	cq->eng = eng;
	cq->cref = cref;
	pthread_spin_init(&cq->poll_lock, PTHREAD_PROCESS_PRIVATE);
	err = sv_engine_cq_add(eng, cq);
	if (err)
		goto err_shm;
	c.fds = &cq->fd;
	err = sv_ctx_call(ctx, &c);
	close(cq->fd);
	cq->fd = -1;
	if (err)
		goto err_tab;

	/* What rdma-core's verbs_init_cq sets, then the provider's part. */
	cq->ex.context = ctx;
	cq->ex.channel = a->channel;
	cq->ex.cq_context = a->cq_context;
	cq->ex.handle = rep.handle;
	cq->ex.cqe = a->cqe;
	pthread_mutex_init(&cq->ex.mutex, NULL);
	pthread_cond_init(&cq->ex.cond, NULL);
	cq->ex.comp_events_completed = 0;
	cq->ex.async_events_completed = 0;
	cq->ex.comp_mask = 0;
	cq->ex.start_poll = start_poll;
	cq->ex.next_poll = next_poll;
	cq->ex.end_poll = end_poll;
	cq->ex.read_opcode = read_opcode;
	cq->ex.read_vendor_err = read_vendor_err;
	cq->ex.read_wc_flags = read_wc_flags;
	if (a->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cq->ex.read_byte_len = read_byte_len;
	if (a->wc_flags & IBV_WC_EX_WITH_IMM)
		cq->ex.read_imm_data = read_imm_data;
	if (a->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cq->ex.read_qp_num = read_qp_num;
	if (a->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cq->ex.read_src_qp = read_src_qp;
	if (a->wc_flags & IBV_WC_EX_WITH_SLID)
		cq->ex.read_slid = read_slid;
	if (a->wc_flags & IBV_WC_EX_WITH_SL)
		cq->ex.read_sl = read_sl;
	if (a->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cq->ex.read_dlid_path_bits = read_dlid_path_bits;
	if (a->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		cq->ex.read_completion_ts = read_completion_ts;
	if (a->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		cq->ex.read_completion_wallclock_ns =
			read_completion_wallclock_ns;
	if (a->channel) {
		sv_lock_mutex(&ctx->mutex, SV_LOCK_CTX);
		a->channel->refcnt++;
		sv_unlock_mutex(&ctx->mutex);
	}
	sv_dp_obj_add(cq);
	SV_CHECK(sv_check_obj(SV_CK_CQ, cq, 1, NULL));
	return cq;

err_tab:
	sv_engine_cq_del(cq);
err_shm:
	pthread_spin_destroy(&cq->poll_lock);
	sv_shm_release(cq->shm);
	if (cq->fd >= 0)
		close(cq->fd);
err_free:
	free(cq);
	return sv_null_errno(err);
}

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
				       void *cq_context,
				       struct ibv_comp_channel *channel,
				       int comp_vector)
{
	struct ibv_cq_init_attr_ex a = { .cqe = (uint32_t)cqe,
					 .cq_context = cq_context,
					 .channel = channel,
					 .comp_vector = (uint32_t)comp_vector };
	struct sv_cq *cq;

	if (!context || cqe <= 0 || comp_vector < 0)
		return sv_null_errno(-EINVAL);
	if (sv_fault_verb(SV_FV_CREATE_CQ)) /* a fault plan: docs/faults.md */
		return NULL;
	cq = cq_new(context, &a);
	return cq ? ibv_cq_ex_to_cq(&cq->ex) : NULL;
}

static struct ibv_cq_ex *create_cq_ex(struct ibv_context *ctx,
				      struct ibv_cq_init_attr_ex *a)
{
	struct sv_cq *cq;

	if (a->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
				       IBV_CQ_INIT_ATTR_MASK_PD))
		return sv_null_errno(-EINVAL);
	if (a->wc_flags & ~(uint64_t)IBV_CREATE_CQ_SUP_WC_FLAGS)
		return sv_null_errno(-EOPNOTSUPP);
	if (a->wc_flags & ~SV_WC_FLAGS)
		return sv_null_errno(-EOPNOTSUPP);
	if (sv_fault_verb(SV_FV_CREATE_CQ)) /* ibv_create_cq_ex: faults.md */
		return NULL;
	if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (a->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		return sv_null_errno(-EOPNOTSUPP);
	/* A parent domain only, as mlx5 (its allocators are not called:
	 * pd.c). */
	if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!a->parent_domain || a->parent_domain->context != ctx ||
	     !to_svpd(a->parent_domain)->protection))
		return sv_null_errno(-EINVAL);
	cq = cq_new(ctx, a);
	if (!cq)
		return NULL;
	if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		cq->parent = sv_pd_parent(a->parent_domain);
		sv_pd_use(cq->parent, 1);
	}
	return &cq->ex;
}

/*
 * Grows or shrinks the ring to cqe entries.  EINVAL: cqe out of range or
 * smaller than the completions it holds now.
 */
SV_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sv_cq *cq = to_svcq(ibcq);
	struct sv_create_cq_req req = { .handle = ibcq->handle,
					.cqe = (uint32_t)cqe };
	int err;

	if (cqe <= 0 || cqe > SV_MAX_CQE) {
		errno = EINVAL;
		return EINVAL;
	}
	err = sv_cq_resize(cq, (uint32_t)cqe);
	if (err) {
		errno = -err;
		return -err;
	}
	ibcq->cqe = cqe;
	SV_CHECK(sv_check_cq_depth(cq, "ibv_resize_cq"));
	/* Only res show's size depends on it: a failure changes nothing the
	 * application sees. */
	err = sv_ctx_call_simple(ibcq->context, SV_OP_RESIZE_CQ, &req,
				 sizeof(req), NULL, 0);
	if (err)
		sv_dbg("cq %p: resize not recorded: %d", (void *)cq, err);
	return 0;
}

/*
 * EBUSY while a QP or SRQ uses it.  Otherwise waits until every event the
 * application read (completion and async) was acked, then frees it.
 */
SV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sv_cq *cq = to_svcq(ibcq);
	struct sv_handle_req req = { .handle = ibcq->handle };
	struct ibv_comp_channel *ch = ibcq->channel;
	int err;

	SV_CHECK(sv_check_destroy(SV_CK_CQ, cq));
	if (atomic_load(&cq->usecnt)) {
		errno = EBUSY;
		return EBUSY;
	}
	err = sv_ctx_call_simple(ibcq->context, SV_OP_DESTROY_CQ, &req,
				 sizeof(req), NULL, 0);
	if (err) {
		errno = -err;
		return -err;
	}
	SV_CHECK(sv_check_obj(SV_CK_CQ, cq, 0, NULL));
	sv_dp_obj_del(cq);
	sv_engine_cq_del(cq);
	if (ch)
		channel_forget(cq);
	sv_dp_wait_acks(&ibcq->mutex, &ibcq->cond,
			&ibcq->async_events_completed, &cq->async_events);
	sv_lock_mutex(&ibcq->mutex, SV_LOCK_OBJ);
	while (ibcq->comp_events_completed != cq->comp_events)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	sv_unlock_mutex(&ibcq->mutex);
	if (ch) {
		sv_lock_mutex(&ibcq->context->mutex, SV_LOCK_CTX);
		ch->refcnt--;
		sv_unlock_mutex(&ibcq->context->mutex);
	}
	sv_pd_use(cq->parent, -1);
	pthread_spin_destroy(&cq->poll_lock);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_cond_destroy(&ibcq->cond);
	sv_shm_release(cq->shm);
	free(cq);
	return 0;
}

void sv_cq_set_ops(struct verbs_context *vctx)
{
	vctx->context.ops.poll_cq = poll_cq;
	vctx->context.ops.req_notify_cq = req_notify_cq;
	vctx->create_cq_ex = create_cq_ex;
}

/* SPDX-License-Identifier: MIT */
/*
 * rdma_cm event channels and ids (the kernel's rdma_ucm): their tables and
 * lifetimes, the event queues, the CM's timers and wake-ups, and the ops
 * that need no address or connection logic (svd_cm.h for the split).
 *
 * Events stay here until the library fetches them (SV_OP_CM_GET_EVENT),
 * as the kernel keeps them in the ucma file: destroying an id withdraws
 * its unfetched events, and a CONNECT_REQUEST that was never fetched takes
 * the id it made with it.  For every queued event one byte is written on
 * the channel's socket, so the channel fd polls readable exactly when
 * there may be an event (a withdrawn event leaves a byte behind; the
 * library then gets -EAGAIN and reads on).
 */
#include "svd_cm.h"
#include "svd_ops.h"
#include "sv_log.h"
#include "sv_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

/* Channel ids: slot | generation << 16; id handles: slot | generation << 20. */
#define CHAN_SLOTS 4096
#define ID_SLOT_BITS 20
#define ID_SLOTS (1u << ID_SLOT_BITS)
#define ID_SLOT(h) ((h) & (ID_SLOTS - 1))

static struct svd_cm_chan *chans[CHAN_SLOTS];
static uint16_t chan_gen[CHAN_SLOTS];
uint32_t svd_cm_nchans;

static struct svd_cm_id **ids;
static uint16_t *id_gen;
static uint32_t ids_cap, nids;

static struct svd_timer *timers;
static struct svd_watch timer_w = { .kind = SVD_W_CM, .fd = -1 };
static struct svd_watch kick_w = { .kind = SVD_W_CM, .fd = -1 };

static uint64_t random64(void)
{
	uint64_t v;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = ((uint64_t)rand() << 32) ^ (uint64_t)rand() ^ svd_now_ms();
	return v;
}

/* ---- timers ------------------------------------------------------------ */

static void timers_rearm(void)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	if (timers) {
		/* Absolute on CLOCK_MONOTONIC, as svd_now_ms. */
		its.it_value.tv_sec = timers->at_ms / 1000;
		its.it_value.tv_nsec = (long)(timers->at_ms % 1000) * 1000000L;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	timerfd_settime(timer_w.fd, TFD_TIMER_ABSTIME, &its, NULL);
}

void svd_timer_cancel(struct svd_timer *t)
{
	if (!t->armed)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		timers = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->prev = t->next = NULL;
	t->armed = 0;
	if (!timers)
		timers_rearm();
}

void svd_timer_arm(struct svd_timer *t, uint64_t in_ms)
{
	struct svd_timer **pp, *prev = NULL;
	int head;

	svd_timer_cancel(t);
	t->at_ms = svd_now_ms() + in_ms;
	for (pp = &timers; *pp && (*pp)->at_ms <= t->at_ms; pp = &(*pp)->next)
		prev = *pp;
	head = pp == &timers;
	t->next = *pp;
	t->prev = prev;
	if (*pp)
		(*pp)->prev = t;
	*pp = t;
	t->armed = 1;
	if (head)
		timers_rearm();
}

static void timers_run(void)
{
	uint64_t n, now = svd_now_ms();

	if (read(timer_w.fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		sv_dbg("timerfd: %s", strerror(errno));
	while (timers && timers->at_ms <= now) {
		struct svd_timer *t = timers;

		svd_timer_cancel(t);
		t->fn(t);
	}
	timers_rearm();
}

/* ---- the inbox wake-up (cm_ib.c queues, the loop runs it) -------------- */

void svd_cm_kick(void)
{
	uint64_t one = 1;

	if (write(kick_w.fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		sv_dbg("cm kick: %s", strerror(errno));
}

int svd_cm_init(void)
{
	timer_w.fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	kick_w.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (timer_w.fd < 0 || kick_w.fd < 0 || svd_watch_add(&timer_w, EPOLLIN) ||
	    svd_watch_add(&kick_w, EPOLLIN)) {
		sv_err("connection manager: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* ---- channels ---------------------------------------------------------- */

static void chan_flush(struct svd_cm_chan *ch)
{
	struct epoll_event ev = { .data.ptr = &ch->w };

	while (ch->owed) {
		if (send(ch->w.fd, "e", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
			ch->owed--;
			continue;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return; /* the other end is gone: EOF comes next */
		break;
	}
	if (!!ch->owed != ch->pollout) {
		ch->pollout = !!ch->owed;
		ev.events = EPOLLIN | (ch->pollout ? EPOLLOUT : 0);
		epoll_ctl(svd.epfd, EPOLL_CTL_MOD, ch->w.fd, &ev);
	}
}

static struct svd_cm_chan *chan_lookup(uint32_t id, uint64_t token)
{
	struct svd_cm_chan *ch;

	if ((id & 0xffff) == 0 || (id & 0xffff) >= CHAN_SLOTS)
		return NULL;
	ch = chans[id & 0xffff];
	return ch && ch->id == id && ch->token == token ? ch : NULL;
}

static void evt_free(struct svd_cm_evt *e)
{
	free(e);
}

/* Unlinks every queued event of ch for which match() holds. */
static void chan_withdraw(struct svd_cm_chan *ch,
			  int (*match)(struct svd_cm_evt *, void *), void *arg,
			  void (*each)(struct svd_cm_evt *))
{
	struct svd_cm_evt **pp = &ch->evq, *e;

	while ((e = *pp)) {
		if (!match(e, arg)) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		if (ch->evq_tail == &e->next)
			ch->evq_tail = pp;
		if (each)
			each(e);
		evt_free(e);
	}
}

static void chan_close(struct svd_cm_chan *ch)
{
	while (ch->ids)
		svd_cm_id_destroy(ch->ids);
	while (ch->evq) {
		struct svd_cm_evt *e = ch->evq;

		ch->evq = e->next;
		evt_free(e);
	}
	svd_watch_del(&ch->w);
	close(ch->w.fd);
	ch->w.fd = -1;
	chans[ch->id & 0xffff] = NULL;
	svd_cm_nchans--;
	if (!svd_cm_nchans && !svd.nufiles)
		svd.idle_since_ms = svd_now_ms();
	sv_dbg("cm channel %#x closed", ch->id);
	svd_defer_free(ch);
}

void svd_cm_readable(struct svd_watch *w, uint32_t events)
{
	struct svd_cm_chan *ch;
	char buf[64];
	ssize_t n;

	if (w == &timer_w) {
		timers_run();
		return;
	}
	if (w == &kick_w) {
		uint64_t v;

		if (read(kick_w.fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			sv_dbg("cm kick read: %s", strerror(errno));
		svd_cm_inbox_run();
		return;
	}
	ch = (struct svd_cm_chan *)w;
	if (events & EPOLLOUT)
		chan_flush(ch);
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	/* The library never writes here: anything read is dropped; EOF means
	 * the last copy of the channel fd is closed. */
	for (int i = 0; i < 16; i++) {
		n = recv(ch->w.fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		chan_close(ch);
		return;
	}
}

int svd_cm_busy(void)
{
	return svd_cm_nchans != 0;
}

void svd_cm_close_all(void)
{
	for (int i = 1; i < CHAN_SLOTS; i++)
		if (chans[i])
			chan_close(chans[i]);
	svd_ibcm_close_all();
}

/* ---- ids --------------------------------------------------------------- */

struct svd_cm_id *svd_cm_id_by_handle(uint32_t handle)
{
	uint32_t slot = ID_SLOT(handle);

	if (!slot || slot >= ids_cap || !ids[slot])
		return NULL;
	return ids[slot]->handle == handle ? ids[slot] : NULL;
}

struct svd_cm_id *svd_cm_id_new(struct svd_cm_chan *chan, uint32_t ps,
				uint32_t qp_type, pid_t pid)
{
	struct svd_cm_id *id;
	uint32_t slot;

	for (slot = 1; slot < ids_cap; slot++)
		if (!ids[slot])
			break;
	if (slot >= ids_cap) {
		uint32_t cap = ids_cap ? ids_cap * 2 : 256;
		struct svd_cm_id **n;
		uint16_t *g;

		if (cap > ID_SLOTS)
			return NULL;
		n = realloc(ids, cap * sizeof(*n));
		if (!n)
			return NULL;
		ids = n;
		g = realloc(id_gen, cap * sizeof(*g));
		if (!g)
			return NULL;
		id_gen = g;
		memset(ids + ids_cap, 0, (cap - ids_cap) * sizeof(*ids));
		memset(id_gen + ids_cap, 0, (cap - ids_cap) * sizeof(*id_gen));
		ids_cap = cap;
	}
	id = calloc(1, sizeof(*id));
	if (!id)
		return NULL;
	id_gen[slot] = (id_gen[slot] + 1) & 0xfff;
	if (!id_gen[slot])
		id_gen[slot] = 1;
	id->handle = slot | (uint32_t)id_gen[slot] << ID_SLOT_BITS;
	id->chan = chan;
	id->owner_pid = pid;
	id->ps = ps;
	id->qp_type = qp_type;
	id->state = CMS_IDLE;
	/* The PSN this side receives from: random, as the kernel's. */
	id->seq_num = (uint32_t)random64() & 0xffffff;
	id->chan_next = chan->ids;
	if (chan->ids)
		chan->ids->chan_prev = id;
	chan->ids = id;
	ids[slot] = id;
	nids++;
	return id;
}

static int evt_is_owner(struct svd_cm_evt *e, void *id)
{
	return e->owner == id;
}

static int evt_is_conn(struct svd_cm_evt *e, void *id)
{
	return e->conn == id;
}

static int evt_is_request_of(struct svd_cm_evt *e, void *id)
{
	return e->owner == id && e->conn;
}

/* A CONNECT_REQUEST nobody will fetch: the id it made goes too (the
 * kernel's ucma_cleanup_events). */
static void evt_drop_conn(struct svd_cm_evt *e)
{
	struct svd_cm_id *conn = e->conn;

	e->conn = NULL;
	if (conn) {
		conn->listener = NULL;
		svd_cm_id_destroy(conn);
	}
}

void svd_cm_id_destroy(struct svd_cm_id *id)
{
	struct svd_cm_chan *ch = id->chan;

	if (id->state == CMS_DESTROYING)
		return;
	if (id->state == CMS_LISTEN)
		svd_cm_unlisten(id);
	id->state = CMS_DESTROYING;
	svd_timer_cancel(&id->addr_timer);
	/* Unfetched requests to this listener take their ids with them. */
	chan_withdraw(ch, evt_is_request_of, id, evt_drop_conn);
	/* An id whose request was never fetched: its event goes. */
	if (id->listener) {
		id->listener->backlog++;
		chan_withdraw(id->listener->chan, evt_is_conn, id, NULL);
		id->listener = NULL;
	}
	if (id->cm)
		svd_ibcm_id_gone(id);
	chan_withdraw(ch, evt_is_owner, id, NULL);
	svd_cm_release_port(id);
	if (id->chan_prev)
		id->chan_prev->chan_next = id->chan_next;
	else
		ch->ids = id->chan_next;
	if (id->chan_next)
		id->chan_next->chan_prev = id->chan_prev;
	ids[ID_SLOT(id->handle)] = NULL;
	nids--;
	free(id);
}

static void post(struct svd_cm_id *owner, struct svd_cm_id *conn,
		 const struct sv_cm_event *ev)
{
	struct svd_cm_chan *ch = owner->chan;
	struct svd_cm_evt *e = calloc(1, sizeof(*e));

	if (!e) {
		sv_err("cm: out of memory: event %u for id %#x lost", ev->event,
		       owner->handle);
		return;
	}
	e->owner = owner;
	e->conn = conn;
	e->ev = *ev;
	*ch->evq_tail = e;
	ch->evq_tail = &e->next;
	ch->owed++;
	chan_flush(ch);
}

void svd_cm_post(struct svd_cm_id *owner, struct svd_cm_id *conn,
		 const struct sv_cm_event *ev)
{
	if (!owner || owner->state == CMS_DESTROYING)
		return;
	post(owner, conn, ev);
}

int svd_cm_post_request(struct svd_cm_id *listener, struct svd_cm_id *conn,
			const struct sv_cm_event *ev)
{
	if (listener->backlog <= 0)
		return -ENOMEM;
	listener->backlog--;
	conn->listener = listener;
	post(listener, conn, ev);
	return 0;
}

/* ---- op helpers -------------------------------------------------------- */

static int req_chan(struct svd_req *r, struct svd_cm_chan **out)
{
	const struct sv_cm_hdr *h = r->body;

	*out = chan_lookup(h->chan, h->token);
	return *out ? 0 : -EINVAL;
}

int svd_cm_req_id(struct svd_req *r, struct svd_cm_id **out)
{
	const struct sv_cm_hdr *h = r->body;
	struct svd_cm_chan *ch;
	struct svd_cm_id *id;
	int err = req_chan(r, &ch);

	if (err)
		return err;
	id = svd_cm_id_by_handle(h->id);
	if (!id)
		return -ENOENT;
	if (id->chan != ch)
		return -EINVAL;
	*out = id;
	return 0;
}

/* ---- ops --------------------------------------------------------------- */

int svd_op_cm_open(struct svd_req *r)
{
	struct sv_cm_open_rep *rep = r->rep;
	struct svd_cm_chan *ch;
	int sv[2], slot, err;

	for (slot = 1; slot < CHAN_SLOTS; slot++)
		if (!chans[slot])
			break;
	if (slot == CHAN_SLOTS)
		return -EMFILE;
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		err = -errno;
		goto err_free;
	}
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
		err = -errno;
		goto err_close;
	}
	ch->w.kind = SVD_W_CM;
	ch->w.fd = sv[0];
	chan_gen[slot]++;
	ch->id = (uint32_t)slot | (uint32_t)chan_gen[slot] << 16;
	ch->token = random64();
	ch->pid = r->conn->pid;
	ch->evq_tail = &ch->evq;
	err = svd_watch_add(&ch->w, EPOLLIN);
	if (err)
		goto err_close;
	chans[slot] = ch;
	svd_cm_nchans++;
	rep->chan = ch->id;
	rep->token = ch->token;
	r->rep_len = sizeof(*rep);
	r->out_fds[0] = sv[1];
	r->n_out_fds = 1;
	sv_dbg("cm channel %#x for pid %d", ch->id, (int)ch->pid);
	return 0;

err_close:
	close(sv[0]);
	close(sv[1]);
err_free:
	free(ch);
	return err;
}

int svd_op_cm_get_event(struct svd_req *r)
{
	struct sv_cm_event *rep = r->rep;
	struct svd_cm_chan *ch;
	struct svd_cm_evt *e;
	int err = req_chan(r, &ch);

	if (err)
		return err;
	e = ch->evq;
	if (!e)
		return -EAGAIN;
	ch->evq = e->next;
	if (!ch->evq)
		ch->evq_tail = &ch->evq;
	*rep = e->ev;
	r->rep_len = sizeof(*rep);
	e->owner->events_reported++;
	if (e->conn) {
		/* The request is the user's now: its slot in the backlog
		 * frees (the kernel's ucma_get_event). */
		e->conn->listener = NULL;
		e->owner->backlog++;
	}
	evt_free(e);
	return 0;
}

int svd_op_cm_create_id(struct svd_req *r)
{
	const struct sv_cm_create_req *req = r->body;
	struct sv_cm_id_rep *rep = r->rep;
	struct svd_cm_chan *ch;
	struct svd_cm_id *id;
	uint32_t qp_type;
	int err = req_chan(r, &ch);

	if (err)
		return err;
	/* The kernel's ucma_get_qp_type. */
	switch (req->ps) {
	case RDMA_PS_TCP:
		qp_type = IBV_QPT_RC;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		qp_type = IBV_QPT_UD;
		break;
	case RDMA_PS_IB:
		qp_type = req->qp_type;
		break;
	default:
		return -EINVAL;
	}
	id = svd_cm_id_new(ch, req->ps, qp_type, r->conn->pid);
	if (!id)
		return -ENOMEM;
	rep->id = id->handle;
	r->rep_len = sizeof(*rep);
	return 0;
}

int svd_op_cm_destroy_id(struct svd_req *r)
{
	struct sv_cm_id_rep *rep = r->rep;
	struct svd_cm_id *id;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	rep->id = id->handle;
	rep->events = id->events_reported;
	svd_cm_id_destroy(id);
	r->rep_len = sizeof(*rep);
	return 0;
}

int svd_op_cm_query(struct svd_req *r)
{
	struct sv_cm_query_rep *rep = r->rep;
	struct svd_cm_id *id;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	/* Querying a request's id makes it the user's (it was fetched). */
	rep->src = id->src;
	rep->dst = id->dst;
	memcpy(rep->sgid, id->sgid, 16);
	memcpy(rep->dgid, id->dgid, 16);
	rep->node_guid = id->bound_dev ? svd.node_guid : 0;
	rep->pkey = 0xffff;
	rep->port_num = id->bound_dev ? 1 : 0;
	rep->state = (uint8_t)id->state;
	rep->num_paths = id->have_route ? 1 : 0;
	rep->path = id->path;
	r->rep_len = sizeof(*rep);
	return 0;
}

/* RDMA_OPTION_ID_*: the kernel's ucma_set_option_id and the rdma_set_*
 * it calls, with their state rules. */
static int set_option_id(struct svd_cm_id *id, int name, const uint8_t *v,
			 uint32_t len)
{
	int iv;

	switch (name) {
	case RDMA_OPTION_ID_TOS:
		if (len != sizeof(uint8_t))
			return -EINVAL;
		id->tos = v[0];
		id->tos_set = 1;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
		if (len != sizeof(int))
			return -EINVAL;
		memcpy(&iv, v, sizeof(iv));
		if ((iv && id->state != CMS_LISTEN) || id->state == CMS_IDLE) {
			id->reuseaddr = iv ? 1 : 0;
			return 0;
		}
		return -EINVAL;
	case RDMA_OPTION_ID_AFONLY:
		if (len != sizeof(int))
			return -EINVAL;
		memcpy(&iv, v, sizeof(iv));
		if (id->state != CMS_IDLE && id->state != CMS_ADDR_BOUND)
			return -EINVAL;
		id->afonly = iv ? 1 : 0;
		id->afonly_set = 1;
		return 0;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (len != sizeof(uint8_t))
			return -EINVAL;
		if (id->qp_type != IBV_QPT_RC && id->qp_type != IBV_QPT_XRC_SEND)
			return -EINVAL;
		id->timeout = v[0];
		id->timeout_set = 1;
		return 0;
	default:
		return -ENOSYS;
	}
}

int svd_op_cm_set_option(struct svd_req *r)
{
	const struct sv_cm_opt_req *req = r->body;
	struct svd_cm_id *id;
	int err = svd_cm_req_id(r, &id);

	if (err)
		return err;
	if (req->optlen > SV_CM_OPT_MAX ||
	    r->len != sizeof(*req) + req->optlen)
		return -EINVAL;
	switch (req->level) {
	case RDMA_OPTION_ID:
		return set_option_id(id, req->optname, req->optval, req->optlen);
	case RDMA_OPTION_IB:
		if (req->optname != RDMA_OPTION_IB_PATH)
			return -ENOSYS;
		return svd_cm_set_ib_path(id, req->optval, req->optlen);
	default:
		return -ENOSYS;
	}
}

/* Moves an id's queued events (and the ids its requests made) to the new
 * channel, as the kernel's ucma_move_events. */
static void move_events(struct svd_cm_chan *from, struct svd_cm_id *id,
			struct svd_cm_chan *to)
{
	struct svd_cm_evt **pp = &from->evq, *e;

	while ((e = *pp)) {
		if (!(e->owner == id)) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		if (from->evq_tail == &e->next)
			from->evq_tail = pp;
		e->next = NULL;
		*to->evq_tail = e;
		to->evq_tail = &e->next;
		to->owed++;
	}
	chan_flush(to);
}

static void id_move(struct svd_cm_id *id, struct svd_cm_chan *to)
{
	struct svd_cm_chan *from = id->chan;

	if (id->chan_prev)
		id->chan_prev->chan_next = id->chan_next;
	else
		from->ids = id->chan_next;
	if (id->chan_next)
		id->chan_next->chan_prev = id->chan_prev;
	id->chan = to;
	id->chan_prev = NULL;
	id->chan_next = to->ids;
	if (to->ids)
		to->ids->chan_prev = id;
	to->ids = id;
}

int svd_op_cm_migrate(struct svd_req *r)
{
	const struct sv_cm_migrate_req *req = r->body;
	struct sv_cm_id_rep *rep = r->rep;
	struct svd_cm_chan *to, *from;
	struct svd_cm_id *id;
	int err = req_chan(r, &to);

	if (err)
		return err;
	from = chan_lookup(req->old_chan, req->old_token);
	if (!from)
		return -EBADF;
	id = svd_cm_id_by_handle(req->h.id);
	if (!id)
		return -ENOENT;
	if (id->chan != from)
		return -EINVAL;
	if (from != to) {
		move_events(from, id, to);
		/* The ids its unfetched requests made follow it. */
		for (struct svd_cm_evt *e = to->evq; e; e = e->next)
			if (e->owner == id && e->conn && e->conn->chan == from)
				id_move(e->conn, to);
		id_move(id, to);
	}
	rep->id = id->handle;
	rep->events = id->events_reported;
	r->rep_len = sizeof(*rep);
	return 0;
}

/*
 * A multicast join on our RoCE v2 port (the kernel's rdma_join_multicast
 * and cma_iboe_join_multicast): after its checks, the MULTICAST_JOIN
 * event with the group's address handle -- the MGID (the IPv4 address
 * mapped, or the IPv6 address), the id's source GID, hop limit 64 --
 * QP 0xFFFFFF and the id's Q_Key.  The membership itself is the QP's
 * attachment, which the library makes when it takes the event
 * (src/rdmacm/cma_mcast.c), and the port's IP group follows it
 * (gw_mcast.c).
 */
int svd_op_cm_join_mcast(struct svd_req *r)
{
	const struct sv_cm_addr_req *req = r->body;
	struct sv_cm_event ev;
	struct svd_cm_id *id;
	int err = svd_cm_req_id(r, &id);
	uint8_t *g = ev.ah_attr.grh.dgid.raw;

	if (err)
		return err;
	if (!req->dst_len || req->dst_len > sizeof(req->dst) ||
	    (req->dst.sa.sa_family != AF_INET &&
	     req->dst.sa.sa_family != AF_INET6))
		return -EINVAL;
	if (id->state != CMS_ADDR_BOUND && id->state != CMS_ADDR_RESOLVED)
		return -EINVAL;
	if (!id->bound_dev)
		return -EINVAL; /* the kernel's "ULP is calling this wrong" */
	memset(&ev, 0, sizeof(ev));
	if (req->dst.sa.sa_family == AF_INET) {
		if (!req->dst.in.sin_addr.s_addr)
			return -EINVAL; /* cma_zero_addr */
		g[10] = g[11] = 0xff;
		memcpy(g + 12, &req->dst.in.sin_addr, 4);
	} else {
		static const uint8_t zero[16];

		if (!memcmp(&req->dst.in6.sin6_addr, zero, 16))
			return -EINVAL;
		memcpy(g, &req->dst.in6.sin6_addr, 16);
	}
	if (!id->qkey && (id->ps == RDMA_PS_UDP || id->ps == RDMA_PS_IB))
		id->qkey = RDMA_UDP_QKEY; /* cma_set_default_qkey */
	ev.event = RDMA_CM_EVENT_MULTICAST_JOIN;
	ev.id = id->handle;
	ev.ah_attr.is_global = 1;
	ev.ah_attr.port_num = 1;
	ev.ah_attr.grh.sgid_index = (uint8_t)id->sgid_index;
	ev.ah_attr.grh.hop_limit = 64; /* IPV6_DEFAULT_HOPLIMIT */
	ev.ah_attr.grh.traffic_class = id->tos;
	ev.ud_qpn = 0xffffff;
	ev.ud_qkey = id->qkey;
	svd_cm_post(id, NULL, &ev);
	return 0;
}

/* SV_OP_RES_LIST with type SV_RES_CM_ID: one row per id, paged by slot
 * (cursor_handle). */
int svd_cm_res_list(struct svd_req *r)
{
	const struct sv_res_req *req = r->body;
	struct sv_res_rep *rep = r->rep;

	for (uint32_t slot = req->cursor_handle ? req->cursor_handle : 1;
	     slot < ids_cap; slot++) {
		const struct svd_cm_id *id = ids[slot];
		struct sv_res_entry *e;

		if (!id)
			continue;
		if (rep->count == SV_RES_PER_MSG) {
			rep->more = 1;
			rep->next_handle = slot;
			break;
		}
		e = &rep->e[rep->count++];
		memset(e, 0, sizeof(*e));
		e->type = SV_RES_CM_ID;
		e->ufile = id->chan->id;
		e->handle = id->handle;
		e->owner_pid = (uint32_t)id->owner_pid;
		e->pd_handle = id->ps;
		e->access = id->state;
		e->lkey = svd_cm_port(&id->src);
		e->rkey = id->qp_num;
		e->flags = id->qp_type;
		e->usecnt = id->src.sa.sa_family;
	}
	r->rep_len = offsetof(struct sv_res_rep, e) +
		     rep->count * sizeof(struct sv_res_entry);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The engine's side of `softverbs capture` (sv_proto.h "Capture").
 *
 * While a capture runs (the key table's `capture` is nonzero) every
 * packet the process sends -- on a ring to another process of this host
 * or as a datagram -- and every packet it receives from the wire is
 * copied, with the IP/UDP headers it has (or would have) on the wire,
 * into a capture ring the daemon drains into the sessions' pcaps.  A
 * packet between two processes of this host is copied once, by its
 * sender.  Direct execution, which has no packets, stands aside while a
 * capture runs (sv_direct.c), so the capture shows the whole
 * conversation.  When none runs, each packet costs one load.
 *
 * The ring is made at a point where no lock is held (the progress
 * thread, a post, a poll: sv_cap_prepare) once a capture is seen; until
 * then packets are not copied.  A full ring drops the copy, never the
 * packet.
 */
#include "engine_int.h"
#include "sv_client.h"
#include "sv_roce.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CAP_RING_DATA (4u << 20)

void sv_cap_prepare(struct sv_engine *eng)
{
	size_t size = SV_RING_DATA_OFF + CAP_RING_DATA;
	struct sv_capture_ring_req req = { .ring_size = size };
	int fd, db = -1, err;
	struct sv_call c = { .op = SV_OP_CAPTURE_RING,
			     .instance = eng->instance,
			     .attach_fd = -1,
			     .req = &req,
			     .req_len = sizeof(req),
			     .fds = &fd,
			     .nfds = 1,
			     .rfds = &db,
			     .max_rfds = 1 };
	void *map;

	if (!sv_cap_on(eng) || eng->cap_state)
		return;
	sv_lock_mutex(&eng->wire_lock, SV_LOCK_WIRE);
	if (eng->cap_state) {
		sv_unlock_mutex(&eng->wire_lock);
		return;
	}
	fd = memfd_create("softverbs-capture", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		goto fail;
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
		close(fd);
		goto fail;
	}
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		close(fd);
		goto fail;
	}
	sv_ring_init(map, size, (uint32_t)eng->pid);
	err = sv_call(&c);
	close(fd);
	if (err || c.nrfds != 1) {
		if (db >= 0)
			close(db);
		munmap(map, size);
		sv_warn("capture: the daemon refused our ring: %s",
			strerror(err ? -err : EPROTO));
		goto fail;
	}
	sv_ring_prod_init(&eng->cap_prod, map);
	eng->cap_map = map;
	eng->cap_len = size;
	eng->cap_db = db;
	__atomic_store_n(&eng->cap_state, 1, __ATOMIC_RELEASE);
	sv_unlock_mutex(&eng->wire_lock);
	return;
fail:
	eng->cap_state = -1;
	sv_unlock_mutex(&eng->wire_lock);
}

void sv_cap_free(struct sv_engine *eng)
{
	if (eng->cap_state == 1) {
		munmap(eng->cap_map, eng->cap_len);
		close(eng->cap_db);
	}
	eng->cap_map = NULL;
	eng->cap_db = -1;
	eng->cap_state = 0;
}

void sv_cap(struct sv_engine *eng, uint32_t dir, uint32_t qpn,
	    const struct sv_roce_flow *f, const uint8_t *ib, uint32_t len)
{
	uint32_t pad = (0u - len) & 3;
	struct sv_cap_rec r;
	struct timespec ts;
	uint8_t *p;
	int ring;

	if (__atomic_load_n(&eng->cap_state, __ATOMIC_ACQUIRE) != 1 || len < 12)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	memset(&r, 0, sizeof(r));
	r.ts_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	r.dir = dir;
	r.ib_len = len + pad;
	r.pid = (uint32_t)eng->pid;
	r.qpn = qpn;
	r.flow = *f;
	if (!r.flow.dport)
		r.flow.dport = SV_ROCE_PORT;
	sv_lock_spin(&eng->cap_lock, SV_LOCK_TX);
	p = sv_ring_reserve(&eng->cap_prod, (uint32_t)sizeof(r) + len + pad,
			    SV_REC_CAPTURE);
	if (!p) {
		sv_unlock_spin(&eng->cap_lock);
		return; /* the daemon is behind: this copy is lost */
	}
	memcpy(p, &r, sizeof(r));
	memcpy(p + sizeof(r), ib, len);
	memset(p + sizeof(r) + len, 0, pad);
	/* The pad count the packet has on the wire. */
	p[sizeof(r) + 1] = (uint8_t)((p[sizeof(r) + 1] & ~0x30) | pad << 4);
	ring = sv_ring_commit(&eng->cap_prod);
	sv_unlock_spin(&eng->cap_lock);
	if (ring) {
		uint64_t one = 1;

		if (write(eng->cap_db, &one, sizeof(one)) < 0)
			sv_dbg("capture doorbell: %s", strerror(errno));
	}
}

void sv_cap_flow_grh(const uint8_t *grh, uint32_t sport, struct sv_roce_flow *f)
{
	sv_roce_grh_flow(grh, f);
	if (!f->hop_limit)
		f->hop_limit = SV_DEFAULT_HOP_LIMIT;
	f->sport = (uint16_t)sport;
	f->dport = SV_ROCE_PORT;
}

/* The flow of an RC/UC QP's packets (its AV; without a GRH, this host's
 * first GID at both ends). */
static void qp_flow(struct sv_qp *qp, struct sv_roce_flow *f)
{
	const struct ibv_ah_attr *av = &qp->attr.ah_attr;
	struct sv_engine *eng = qp->eng;

	memset(f, 0, sizeof(*f));
	if (av->is_global) {
		if (sv_gid_at(eng, av->grh.sgid_index, f->sgid))
			sv_gid_at(eng, 0, f->sgid);
		memcpy(f->dgid, av->grh.dgid.raw, 16);
		f->tclass = av->grh.traffic_class;
		f->flow_label = av->grh.flow_label & 0xfffff;
		f->hop_limit = av->grh.hop_limit;
	} else {
		sv_gid_at(eng, 0, f->sgid);
		memcpy(f->dgid, f->sgid, 16);
	}
	if (!f->hop_limit)
		f->hop_limit = SV_DEFAULT_HOP_LIMIT;
	f->ipv6 = !(sv_gid_is_v4(f->sgid) && sv_gid_is_v4(f->dgid));
	f->sport = sv_wire_sport(f->flow_label, qp->qpx.qp_base.qp_num,
				 qp->attr.dest_qp_num, 0);
	f->dport = SV_ROCE_PORT;
}

void sv_cap_commit(struct sv_link *l, struct sv_qp *qp)
{
	struct sv_engine *eng = qp->eng;
	struct sv_roce_flow f;
	uint8_t *p;
	uint32_t len, type;

	if (sv_cap_on(eng) && sv_link_cur(l, &p, &len, &type) &&
	    (type & 0xffff) == SV_REC_PKT) {
		if (type & SV_REC_F_GRH) {
			sv_cap_flow_grh(p, l->w ? sv_wire_link_flow(l)->sport :
					sv_wire_sport(0, qp->qpx.qp_base.qp_num, 0, 1),
					&f);
			p += SV_GRH_BYTES;
			len -= SV_GRH_BYTES;
		} else if (l->w) {
			f = *sv_wire_link_flow(l);
		} else {
			qp_flow(qp, &f);
		}
		sv_cap(eng, 0, qp->qpx.qp_base.qp_num, &f, p, len);
	}
	sv_link_commit(l);
}

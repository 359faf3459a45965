/* SPDX-License-Identifier: MIT */
/*
 * The misuse checker's checks (check.c reports, knows the objects and
 * says what is checked and why): SGEs at post, posts, modify, CQ depths,
 * destroys, and what a polled error completion tells.
 */
#include "check_int.h"
#include "sv_keytab.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------- SGE checks -- */

struct post {
	const char *verb;
	const char *owner; /* "qp" or "srq" */
	uint32_t num;	   /* its number (a QP's qpn, an SRQ's handle) */
	uint32_t pd_id;
	struct sv_engine *eng;
	uint64_t wr_id;
};

/* Must hold reg_lock.  An MR of PD pd_id (other than not) whose iova range
 * holds [va, va + len). */
static struct sv_mr *container(uint32_t pd_id, const struct sv_mr *not,
			       uint64_t va, uint64_t len)
{
	SV_CHK_FOR_EACH(e, SV_CK_MR) {
		struct sv_mr *m = e->obj;

		if (m == not || to_svpd(m->mr.pd)->pd_id != pd_id ||
		    m->kind == SV_MR_NULL)
			continue;
		if (va >= m->iova && len <= m->mr.length &&
		    va - m->iova <= m->mr.length - len)
			return m;
	}
	return NULL;
}

/* One SGE of a post.  write: the device writes the memory (a receive, the
 * target of a READ or an atomic).  Must hold reg_lock. */
static void check_sge(const struct post *p, int i, const struct ibv_sge *s,
		      int write)
{
	uint64_t va = s->addr, len = s->length, iova, mlen, before = 0,
		 past = 0;
	struct sv_key_entry ke;
	struct sv_mr *m, *c;
	char what[320], txt[256];

	if (!len)
		return; /* touches nothing */
	snprintf(what, sizeof(what), "%s %s %#x wr_id %#llx sge[%d] [%#llx,+%llu) lkey %#x",
		 p->verb, p->owner, p->num, (unsigned long long)p->wr_id, i,
		 (unsigned long long)va, (unsigned long long)len, s->lkey);
	m = sv_chk_find_key(s->lkey, 0);
	if (m) {
		if (m->kind == SV_MR_NULL)
			return;
		iova = m->iova;
		mlen = m->mr.length;
	} else if (!key_entry(p->eng, s->lkey, &ke) &&
		   (ke.kind < SV_KEY_MW1 || ke.kind == SV_KEY_MR_NULL)) {
		/* An MR of another process of the device (a null MR's
		 * length is UINT64_MAX: nothing to check). */
		iova = ke.iova;
		mlen = ke.length;
	} else {
		const struct sv_chk_gone *g = sv_chk_find_gone(s->lkey, 0);

		sv_check_report("LKEY_UNKNOWN", s->lkey,
				"%s: the lkey names no live MR of pid %d; %s",
				what, (int)getpid(),
				g ? sv_chk_gone_text(txt, sizeof(txt), g) :
				    "no MR of this process ever had it");
		return;
	}
	if (mlen == UINT64_MAX || mlen == SIZE_MAX)
		return; /* implicit ODP: the whole address space */
	if (va < iova)
		before = iova - va;
	if (va + len > iova + mlen)
		past = va + len - (iova + mlen);
	if (before || past) {
		c = container(p->pd_id, m, va, len);
		if (c)
			snprintf(txt, sizeof(txt),
				 "mr lkey %#x [%#llx,+%llu) of the same pd holds it",
				 c->mr.lkey, (unsigned long long)c->iova,
				 (unsigned long long)c->mr.length);
		else
			snprintf(txt, sizeof(txt),
				 "no MR of the pd holds it");
		sv_check_report("SGE_OUTSIDE_MR", s->lkey ^ (va << 20),
				"%s: %s %llu bytes %s mr [%#llx,+%llu) of %s; %s",
				what, before ? "starts" : "ends",
				(unsigned long long)(before ? before : past),
				before ? "before" : "past",
				(unsigned long long)iova,
				(unsigned long long)mlen,
				m ? "this process" : "another process", txt);
		return;
	}
	if (!m)
		return;
	if (write && !(m->access & IBV_ACCESS_LOCAL_WRITE))
		sv_check_report("ACCESS_DENIED", s->lkey,
				"%s: the device writes there but mr [%#llx,+%llu) "
				"lacks IBV_ACCESS_LOCAL_WRITE (has %s)",
				what, (unsigned long long)iova,
				(unsigned long long)mlen,
				sv_chk_bits(txt, sizeof(txt), m->access, sv_chk_access_bits));
	if (m->kind == SV_MR_REGULAR && !(m->access & IBV_ACCESS_ON_DEMAND)) {
		char *at = (char *)m->mr.addr + (va - iova);

		if (sv_mem_check(at, len, write))
			sv_check_report("BUFFER_UNMAPPED", s->lkey ^ (va << 20),
					"%s: [%p,+%llu) of mr [%p,+%zu) is not "
					"mapped %s any more",
					what, (void *)at,
					(unsigned long long)len, m->mr.addr,
					m->mr.length,
					write ? "writable" : "readable");
	}
}

/* --------------------------------------------------------------- posts -- */

/* A send WR's QP state.  0 when the QP is at RTS or later. */
static int send_state(struct sv_qp *qp, const char *verb, uint64_t wr_id,
		      uint32_t opcode)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	enum ibv_qp_state st = sv_qp_state(qp);

	if (st >= IBV_QPS_RTS)
		return 0;
	sv_check_report("QP_STATE", qpn,
			"%s qp %#x wr_id %#llx %s: the QP is in %s, sends need "
			"RTS",
			verb, qpn, (unsigned long long)wr_id,
			sv_chk_wr_name(opcode), sv_chk_state_name(st));
	return -1;
}

/* The checks of one send WR, whichever API built it (ibv_post_send's
 * ibv_send_wr, or the WQE ibv_wr_* wrote).  Must hold qp->sq_lock. */
static void send_one(struct sv_qp *qp, const char *verb, uint64_t wr_id,
		     uint32_t opcode, uint32_t send_flags,
		     const struct ibv_sge *sg, int num_sge)
{
	const struct sv_wrinfo *wi = sv_wrinfo(opcode);
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	struct post p = { .verb = verb,
			  .owner = "qp",
			  .num = qpn,
			  .pd_id = qp->pd_id,
			  .eng = qp->eng,
			  .wr_id = wr_id };
	struct sv_chk_ent *e;

	pthread_mutex_lock(&sv_chk_reg_lock);
	if (!((send_flags & IBV_SEND_INLINE) && (wi->flags & SV_WR_INLINE)))
		for (int i = 0; i < num_sge && i < (int)qp->cap.max_send_sge;
		     i++)
			check_sge(&p, i, &sg[i],
				  !!(wi->flags & (SV_WR_READ | SV_WR_ATOMIC)));
	/* A send queue slot is given back when the WR's completion, or a
	 * later signaled one's, is polled: a queue's worth of unsignaled WRs
	 * with no signaled one leaves nothing that can give them back. */
	e = sv_chk_find(SV_CK_QP, qp);
	if (e && !qp->sq_sig_all && qp->sq.max_wr) {
		if (send_flags & IBV_SEND_SIGNALED)
			e->unsig = 0;
		else if (++e->unsig == qp->sq.max_wr)
			sv_check_report("UNSIGNALED_OVERFLOW", qpn,
					"%s qp %#x wr_id %#llx: the send "
					"queue (max_send_wr %u) now holds %u "
					"unsignaled WRs and no signaled one, "
					"sq_sig_all is 0: nothing can retire them "
					"and the next post finds the queue full",
					verb, qpn, (unsigned long long)wr_id,
					qp->sq.max_wr, e->unsig);
	}
	pthread_mutex_unlock(&sv_chk_reg_lock);
}

void sv_check_send(struct sv_qp *qp, const struct ibv_send_wr *wr)
{
	if (send_state(qp, "ibv_post_send", wr->wr_id, (uint32_t)wr->opcode))
		return;
	send_one(qp, "ibv_post_send", wr->wr_id, (uint32_t)wr->opcode,
		 wr->send_flags, wr->sg_list, wr->num_sge);
	if (wr->opcode == IBV_WR_BIND_MW)
		sv_check_bind(qp, "ibv_post_send", wr);
}

/* What the daemon refuses a bind for (IBV_WC_MW_BIND_ERR), named: the
 * MR under the window, its IBV_ACCESS_MW_BIND, the local write a remote
 * write or atomic window needs, the range.  Must hold reg_lock. */
static void bind_mr(const char *what, uint64_t site,
		    const struct ibv_mw_bind_info *b)
{
	struct sv_mr *m = to_svmr(b->mr);
	uint64_t va = b->addr, len = b->length, before = 0, past = 0;
	uint32_t need = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	char txt[256];

	if (!sv_chk_find(SV_CK_MR, b->mr)) {
		sv_check_report("LKEY_UNKNOWN", site,
				"%s: bind_info.mr %p is no live MR of pid %d",
				what, (void *)b->mr, (int)getpid());
		return;
	}
	if (m->kind == SV_MR_NULL || m->mr.length == SIZE_MAX)
		return;
	if (!(m->access & IBV_ACCESS_MW_BIND)) {
		sv_check_report("ACCESS_DENIED", site ^ m->mr.lkey,
				"%s: mr lkey %#x lacks IBV_ACCESS_MW_BIND (has %s)",
				what, m->mr.lkey,
				sv_chk_bits(txt, sizeof(txt), m->access,
					    sv_chk_access_bits));
		return;
	}
	if ((b->mw_access_flags & need) &&
	    !(m->access & IBV_ACCESS_LOCAL_WRITE)) {
		sv_check_report("ACCESS_DENIED", site ^ m->mr.lkey,
				"%s: a window with %s needs IBV_ACCESS_LOCAL_WRITE "
				"on mr lkey %#x (has %s)",
				what,
				(b->mw_access_flags & IBV_ACCESS_REMOTE_WRITE) ?
					"IBV_ACCESS_REMOTE_WRITE" :
					"IBV_ACCESS_REMOTE_ATOMIC",
				m->mr.lkey,
				sv_chk_bits(txt, sizeof(txt), m->access,
					    sv_chk_access_bits));
		return;
	}
	if (va + len < va) {
		sv_check_report("SGE_OUTSIDE_MR", site ^ (va << 20),
				"%s: the window's range wraps around the address "
				"space", what);
		return;
	}
	if (va < m->iova)
		before = m->iova - va;
	if (va + len > m->iova + m->mr.length)
		past = va + len - (m->iova + m->mr.length);
	if (before || past)
		sv_check_report("SGE_OUTSIDE_MR", site ^ (va << 20),
				"%s: the window %s %llu bytes %s mr lkey %#x "
				"[%#llx,+%llu)",
				what, before ? "starts" : "ends",
				(unsigned long long)(before ? before : past),
				before ? "before" : "past", m->mr.lkey,
				(unsigned long long)m->iova,
				(unsigned long long)m->mr.length);
}

/* A bind, whichever API built it.  Must hold qp->sq_lock. */
static void bind_check(struct sv_qp *qp, const char *verb, uint64_t wr_id,
		       const struct ibv_mw *mw, const struct ibv_mw_bind_info *b)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	char what[256];

	if (!mw || (mw->type == IBV_MW_TYPE_1 && !b->length))
		return; /* (a zero length type 1 bind unbinds) */
	snprintf(what, sizeof(what),
		 "%s qp %#x wr_id %#llx bind of mw rkey %#x to [%#llx,+%llu)",
		 verb, qpn, (unsigned long long)wr_id, mw->rkey,
		 (unsigned long long)b->addr, (unsigned long long)b->length);
	if (!b->mr) {
		sv_check_report("LKEY_UNKNOWN", qpn ^ ((uint64_t)mw->rkey << 24),
				"%s: bind_info.mr is NULL", what);
		return;
	}
	pthread_mutex_lock(&sv_chk_reg_lock);
	bind_mr(what, qpn ^ ((uint64_t)mw->rkey << 24), b);
	pthread_mutex_unlock(&sv_chk_reg_lock);
}

void sv_check_bind(struct sv_qp *qp, const char *verb,
		   const struct ibv_send_wr *wr)
{
	bind_check(qp, verb, wr->wr_id, wr->bind_mw.mw,
		   &wr->bind_mw.bind_info);
}

void sv_check_wr_state(struct sv_qp *qp, uint32_t opcode)
{
	send_state(qp, "ibv_wr_*", qp->qpx.wr_id, opcode);
}

void sv_check_wr_batch(struct sv_qp *qp, uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i != to; i++) {
		const struct sv_send_wqe *w = sv_wq_slot(&qp->sq, i);

		send_one(qp, "ibv_wr_complete", w->wr_id, w->opcode,
			 w->send_flags, w->sge, (int)w->num_sge);
		if (w->opcode == IBV_WR_BIND_MW)
			bind_check(qp, "ibv_wr_complete", w->wr_id, w->mw,
				   &w->bind_info);
	}
}

void sv_check_recv(struct sv_qp *qp, const struct ibv_recv_wr *wr)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	struct post p = { .verb = "ibv_post_recv",
			  .owner = "qp",
			  .num = qpn,
			  .pd_id = qp->pd_id,
			  .eng = qp->eng,
			  .wr_id = wr->wr_id };

	if (sv_qp_state(qp) == IBV_QPS_RESET) {
		sv_check_report("QP_STATE", qpn ^ (1ULL << 32),
				"ibv_post_recv qp %#x wr_id %#llx: the QP is in "
				"RESET, receives need INIT or later",
				qpn, (unsigned long long)wr->wr_id);
		return;
	}
	pthread_mutex_lock(&sv_chk_reg_lock);
	for (int i = 0; i < wr->num_sge && i < (int)qp->cap.max_recv_sge; i++)
		check_sge(&p, i, &wr->sg_list[i], 1);
	pthread_mutex_unlock(&sv_chk_reg_lock);
}

void sv_check_srq_recv(struct sv_srq *srq, const struct ibv_recv_wr *wr)
{
	struct post p = { .verb = "ibv_post_srq_recv",
			  .owner = "srq",
			  .num = srq->srq.handle,
			  .pd_id = srq->pd_id,
			  .eng = srq->eng,
			  .wr_id = wr->wr_id };

	pthread_mutex_lock(&sv_chk_reg_lock);
	for (int i = 0; i < wr->num_sge && i < (int)srq->shm->rq.max_sge; i++)
		check_sge(&p, i, &wr->sg_list[i], 1);
	pthread_mutex_unlock(&sv_chk_reg_lock);
}

/* -------------------------------------------------------------- modify -- */

void sv_check_modify(struct sv_qp *qp, const struct ibv_qp_attr *attr,
		     int attr_mask)
{
	uint32_t mask = (uint32_t)attr_mask, req, opt, missing, extra;
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	enum ibv_qp_state old = sv_qp_state(qp), cur, next;
	char b1[512], b2[512];

	if (!attr)
		return;
	cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : old;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (!sv_qp_trans_masks(cur, next, qp->type, &req, &opt)) {
		sv_check_report("QP_STATE", qpn ^ ((uint64_t)cur << 40 | (uint64_t)next << 48),
				"ibv_modify_qp qp %#x: an %s QP has no transition "
				"%s -> %s",
				qpn, sv_chk_type_name(qp->type), sv_chk_state_name(cur),
				sv_chk_state_name(next));
		return;
	}
	missing = req & ~mask;
	extra = mask & ~(req | opt | IBV_QP_STATE);
	if (!missing && !extra)
		return;
	sv_check_report("QP_STATE",
			qpn ^ ((uint64_t)cur << 40 | (uint64_t)next << 48 |
			       (uint64_t)1 << 60),
			"ibv_modify_qp qp %#x %s %s -> %s: attr_mask %#x lacks "
			"%s, and has %s the transition does not take",
			qpn, sv_chk_type_name(qp->type), sv_chk_state_name(cur),
			sv_chk_state_name(next), mask,
			missing ? sv_chk_bits(b1, sizeof(b1), missing, sv_chk_mask_bits) :
				  "nothing",
			extra ? sv_chk_bits(b2, sizeof(b2), extra, sv_chk_mask_bits) : "nothing");
}

static int gid_v4(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g->raw, pfx, sizeof(pfx));
}

/* A QP as peer_pair compares it: of this process (from its attributes)
 * or of another (sv_engine_qp_view, pid set). */
static void view_of(struct sv_qp *q, struct sv_qp_view *v)
{
	*v = (struct sv_qp_view){
		.qpn = q->qpx.qp_base.qp_num,
		.type = q->type,
		.state = sv_qp_state(q),
		.dest_qpn = q->dest_qpn,
		.mtu = 128u << q->attr.path_mtu,
		.rq_psn = q->attr.rq_psn & 0xffffff,
		.sq_psn = q->attr.sq_psn & 0xffffff,
		.max_rd_atomic = q->attr.max_rd_atomic,
		.max_dest_rd_atomic = q->attr.max_dest_rd_atomic,
	};
}

/* "qp N" or, for a QP of another process, "qp N (pid P)". */
static const char *qp_name(char *buf, size_t cap, const struct sv_qp_view *v)
{
	if (v->pid)
		snprintf(buf, cap, "qp %#x (pid %u)", v->qpn, v->pid);
	else
		snprintf(buf, cap, "qp %#x", v->qpn);
	return buf;
}

/* The pairs of attributes of a and its peer b that cannot work together
 * (either may be of another process).  Must hold reg_lock. */
static void peer_pair(const struct sv_qp_view *a, const struct sv_qp_view *b)
{
	uint32_t as = a->state, bs = b->state;
	uint64_t site = (uint64_t)a->qpn << 32 | b->qpn;
	char an[48], bn[48];

	if (as < IBV_QPS_RTR || bs < IBV_QPS_RTR || as > IBV_QPS_SQD ||
	    bs > IBV_QPS_SQD)
		return;
	qp_name(an, sizeof(an), a);
	qp_name(bn, sizeof(bn), b);
	if (b->dest_qpn != a->qpn)
		sv_chk_report_once("MISMATCHED_PEER", site ^ (1ULL << 56),
				"ibv_modify_qp %s: its peer %s is "
				"connected to qp %#x, not to it",
				an, bn, b->dest_qpn);
	if (a->mtu != b->mtu)
		sv_chk_report_once("MISMATCHED_PEER", site ^ (2ULL << 56),
				"ibv_modify_qp %s: path_mtu %u bytes, its "
				"peer %s has %u",
				an, a->mtu, bn, b->mtu);
	if (a->type == IBV_QPT_RC && as >= IBV_QPS_RTS &&
	    a->max_rd_atomic > b->max_dest_rd_atomic)
		sv_chk_report_once("MISMATCHED_PEER", site ^ (3ULL << 56),
				"ibv_modify_qp %s: max_rd_atomic %u is above "
				"its peer %s's max_dest_rd_atomic %u",
				an, a->max_rd_atomic, bn,
				b->max_dest_rd_atomic);
	if (as >= IBV_QPS_RTS && a->sq_psn != b->rq_psn)
		sv_chk_report_once("MISMATCHED_PEER", site ^ (4ULL << 56),
				"ibv_modify_qp %s: sq_psn %#x, its peer %s "
				"expects rq_psn %#x",
				an, a->sq_psn, bn, b->rq_psn);
}

/* 1 when qp's destination GID is one of this device's (the peer is on
 * this host). */
static int dgid_local(struct sv_qp *qp)
{
	struct ibv_context *ctx = qp->qpx.qp_base.context;
	struct ibv_port_attr pa;
	union ibv_gid g;

	if (ibv_query_port(ctx, 1, &pa))
		return 0;
	for (int i = 0; i < pa.gid_tbl_len; i++)
		if (!ibv_query_gid(ctx, 1, i, &g) &&
		    !memcmp(&g, &qp->attr.ah_attr.grh.dgid, sizeof(g)))
			return 1;
	return 0;
}

void sv_check_modified(struct sv_qp *qp)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	enum ibv_qp_state st = sv_qp_state(qp);
	struct sv_qp_view me, other;
	struct sv_qp *peer;
	union ibv_gid sgid;
	int remote;

	if ((qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC) ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS))
		return;
	if (st == IBV_QPS_RTR &&
	    !ibv_query_gid(qp->qpx.qp_base.context, 1,
			   qp->attr.ah_attr.grh.sgid_index, &sgid) &&
	    gid_v4(&sgid) != gid_v4(&qp->attr.ah_attr.grh.dgid))
		sv_check_report("MISMATCHED_PEER", qpn ^ (5ULL << 56),
				"ibv_modify_qp qp %#x: dgid is an %s address, "
				"source gid index %u an %s one",
				qpn, gid_v4(&qp->attr.ah_attr.grh.dgid) ? "IPv4" : "IPv6",
				qp->attr.ah_attr.grh.sgid_index,
				gid_v4(&sgid) ? "IPv4" : "IPv6");
	pthread_mutex_lock(&sv_chk_reg_lock);
	peer = sv_chk_find_qpn(qp->dest_qpn);
	if (peer == qp) {
		pthread_mutex_unlock(&sv_chk_reg_lock);
		return;
	}
	view_of(qp, &me);
	if (peer)
		view_of(peer, &other);
	pthread_mutex_unlock(&sv_chk_reg_lock);
	/* A peer of another process of the device: its responder block
	 * (its owner's modify wrote the attributes there).  Only when the
	 * destination is this host: a peer on another host has a QPN that
	 * may well name an unrelated QP here. */
	remote = !peer;
	if (remote && (!dgid_local(qp) ||
		       sv_engine_qp_view(qp->eng, qp->dest_qpn, &other) ||
		       other.pid == (uint32_t)getpid()))
		return;
	if (remote && other.type != me.type)
		return; /* a QP of another kind took the number */
	pthread_mutex_lock(&sv_chk_reg_lock);
	peer_pair(&me, &other);
	peer_pair(&other, &me);
	pthread_mutex_unlock(&sv_chk_reg_lock);
}

/* ----------------------------------------------------------- CQ depth -- */

/* Must hold reg_lock.  What cq's QPs can have outstanding at once; their
 * list into buf. */
static uint64_t cq_demand(struct sv_cq *cq, char *buf, size_t cap)
{
	struct sv_srq *srqs[16];
	unsigned nsrq = 0;
	uint64_t sum = 0;
	size_t n = 0;

	buf[0] = 0;
	SV_CHK_FOR_EACH(e, SV_CK_QP) {
		struct sv_qp *q = e->obj;
		uint32_t s = 0, r = 0;

		if (q->scq == cq)
			s = q->cap.max_send_wr;
		if (q->rcq == cq && !q->srq)
			r = q->cap.max_recv_wr;
		if (q->rcq == cq && q->srq) {
			unsigned k;

			for (k = 0; k < nsrq && srqs[k] != q->srq; k++)
				;
			if (k == nsrq && nsrq < 16) {
				srqs[nsrq++] = q->srq;
				r = q->srq->shm->rq.max_wr;
			}
		}
		if (q->scq != cq && q->rcq != cq)
			continue;
		sum += s + r;
		if (n < cap)
			n += (size_t)snprintf(buf + n, cap - n,
					      "%sqp %#x send %u recv %u",
					      n ? ", " : "",
					      q->qpx.qp_base.qp_num, s, r);
	}
	return sum;
}

void sv_check_cq_depth(struct sv_cq *cq, const char *verb)
{
	char list[512];
	uint64_t sum;

	pthread_mutex_lock(&sv_chk_reg_lock);
	sum = cq_demand(cq, list, sizeof(list));
	pthread_mutex_unlock(&sv_chk_reg_lock);
	if (sum > (uint64_t)cq->ex.cqe)
		sv_check_report("CQ_OVERRUN", (uintptr_t)cq ^ sum,
				"%s: cq %p holds %d completions but its QPs can "
				"have %llu outstanding (%s): a burst overflows it",
				verb, (void *)cq, cq->ex.cqe,
				(unsigned long long)sum, list);
}

/* ------------------------------------------------------------ destroy -- */

/* Appends "sep what" to buf (list of dependants). */
static void add(char *buf, size_t cap, size_t *n, unsigned *count,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add(char *buf, size_t cap, size_t *n, unsigned *count,
		const char *fmt, ...)
{
	va_list ap;

	if (++*count > 8) {
		if (*count == 9 && *n < cap)
			*n += (size_t)snprintf(buf + *n, cap - *n, ", ...");
		return;
	}
	if (*n < cap)
		*n += (size_t)snprintf(buf + *n, cap - *n, "%s",
				       *count > 1 ? ", " : "");
	va_start(ap, fmt);
	if (*n < cap)
		*n += (size_t)vsnprintf(buf + *n, cap - *n, fmt, ap);
	va_end(ap);
}

/* Must hold reg_lock.  The outstanding send WRs of our QPs naming lkey. */
static void wrs_naming(uint32_t lkey, char *buf, size_t cap, size_t *n,
		       unsigned *count)
{
	SV_CHK_FOR_EACH(e, SV_CK_QP) {
		struct sv_qp *q = e->obj;
		uint32_t head = __atomic_load_n(&q->sq.head, __ATOMIC_ACQUIRE);
		uint32_t tail = __atomic_load_n(&q->sq.tail, __ATOMIC_ACQUIRE);

		for (uint32_t i = head; i != tail && i - head <= q->sq.cap; i++) {
			struct sv_send_wqe *w = sv_wq_slot(&q->sq, i);

			for (uint32_t k = 0; k < w->num_sge; k++)
				if (w->sge[k].lkey == lkey) {
					add(buf, cap, n, count,
					    "qp %#x wr_id %#llx",
					    q->qpx.qp_base.qp_num,
					    (unsigned long long)w->wr_id);
					break;
				}
		}
	}
}

void sv_check_destroy(enum sv_check_kind kind, void *obj)
{
	char list[768];
	size_t n = 0;
	unsigned count = 0;

	list[0] = 0;
	pthread_mutex_lock(&sv_chk_reg_lock);
	switch (kind) {
	case SV_CK_QP: {
		struct sv_qp *q = obj;
		enum ibv_qp_state st = sv_qp_state(q);
		uint32_t out = q->sq.tail - q->sq.head;

		if (out && st >= IBV_QPS_RTS && st <= IBV_QPS_SQE) {
			struct sv_send_wqe *w = sv_wq_slot(&q->sq, q->sq.head);

			sv_check_report("DESTROY_BUSY", q->qpx.qp_base.qp_num,
					"ibv_destroy_qp qp %#x (%s) has %u send "
					"WRs outstanding, oldest wr_id %#llx: their "
					"completions never come",
					q->qpx.qp_base.qp_num, sv_chk_state_name(st), out,
					(unsigned long long)w->wr_id);
		}
		break;
	}
	case SV_CK_CQ:
		SV_CHK_FOR_EACH(e, SV_CK_QP) {
			struct sv_qp *q = e->obj;

			if (q->scq == obj || q->rcq == obj)
				add(list, sizeof(list), &n, &count,
				    "qp %#x (%s cq)", q->qpx.qp_base.qp_num,
				    q->scq == obj ?
					    (q->rcq == obj ? "send and recv" :
							     "send") :
					    "recv");
		}
		if (count)
			sv_check_report("DESTROY_BUSY", (uintptr_t)obj,
					"ibv_destroy_cq cq %p is still used by %s",
					obj, list);
		break;
	case SV_CK_SRQ:
		SV_CHK_FOR_EACH(e, SV_CK_QP) {
			struct sv_qp *q = e->obj;

			if (&q->srq->srq == obj && q->srq)
				add(list, sizeof(list), &n, &count, "qp %#x",
				    q->qpx.qp_base.qp_num);
		}
		if (count)
			sv_check_report("DESTROY_BUSY", (uintptr_t)obj,
					"ibv_destroy_srq srq %p is still used by %s",
					obj, list);
		break;
	case SV_CK_PD: {
		struct ibv_pd *pd = obj;

		SV_CHK_FOR_EACH(e, SV_CK_QP)
		if (((struct sv_qp *)e->obj)->qpx.qp_base.pd == pd)
			add(list, sizeof(list), &n, &count, "qp %#x",
			    ((struct sv_qp *)e->obj)->qpx.qp_base.qp_num);
		SV_CHK_FOR_EACH(e, SV_CK_MR)
		if (((struct sv_mr *)e->obj)->mr.pd == pd)
			add(list, sizeof(list), &n, &count, "mr lkey %#x",
			    ((struct sv_mr *)e->obj)->mr.lkey);
		SV_CHK_FOR_EACH(e, SV_CK_SRQ)
		if (((struct ibv_srq *)e->obj)->pd == pd)
			add(list, sizeof(list), &n, &count, "srq %p", e->obj);
		SV_CHK_FOR_EACH(e, SV_CK_MW)
		if (((struct ibv_mw *)e->obj)->pd == pd)
			add(list, sizeof(list), &n, &count, "mw rkey %#x",
			    ((struct ibv_mw *)e->obj)->rkey);
		SV_CHK_FOR_EACH(e, SV_CK_AH)
		if (((struct ibv_ah *)e->obj)->pd == pd)
			add(list, sizeof(list), &n, &count, "ah %p", e->obj);
		if (count)
			sv_check_report("DESTROY_BUSY", (uintptr_t)obj,
					"ibv_dealloc_pd pd %p (handle %u) still has "
					"%u dependants: %s",
					obj, pd->handle, count, list);
		break;
	}
	case SV_CK_MR: {
		struct sv_mr *m = obj;

		wrs_naming(m->mr.lkey, list, sizeof(list), &n, &count);
		if (count)
			sv_check_report("DESTROY_BUSY", m->mr.lkey,
					"ibv_dereg_mr mr lkey %#x [%p,+%zu) is named "
					"by %u outstanding WRs: %s",
					m->mr.lkey, m->mr.addr, m->mr.length, count,
					list);
		break;
	}
	default:
		break;
	}
	pthread_mutex_unlock(&sv_chk_reg_lock);
}

/* --------------------------------------------------------------- poll -- */

/* The WQE our QP q posted with wr_id that names remote memory: the newest
 * of its ring (the ring keeps retired WQEs until their slot is reused).
 * Must hold reg_lock. */
static const struct sv_send_wqe *wqe_of(struct sv_qp *q, uint64_t wr_id,
					uint32_t flags)
{
	uint32_t tail = __atomic_load_n(&q->sq.tail, __ATOMIC_ACQUIRE);

	for (uint32_t i = 1; i <= q->sq.cap && i <= tail; i++) {
		const struct sv_send_wqe *w = sv_wq_slot(&q->sq, tail - i);

		if (w->wr_id == wr_id && (sv_wrinfo(w->opcode)->flags & flags))
			return w;
	}
	return NULL;
}

/* IBV_WC_REM_ACCESS_ERR at the requester: which key, flag or range.
 * Must hold reg_lock. */
static void remote_denied(struct sv_qp *q, const struct ibv_wc *wc)
{
	const struct sv_send_wqe *w =
		wqe_of(q, wc->wr_id, SV_WR_REMOTE | SV_WR_ATOMIC);
	uint32_t qpn = q->qpx.qp_base.qp_num;
	struct sv_qp *peer = sv_chk_find_qpn(q->dest_qpn);
	const struct sv_wrinfo *wi;
	struct sv_key_entry ke;
	struct sv_qp_view pv;
	char what[320], b1[256], b2[256];
	uint64_t len = 0;

	if (!w)
		return;
	wi = sv_wrinfo(w->opcode);
	if (wi->flags & (SV_WR_ATOMIC | SV_WR_ATOMIC_WRITE))
		len = 8;
	else
		for (uint32_t k = 0; k < w->num_sge; k++)
			len += w->sge[k].length;
	if (w->inline_len)
		len = w->inline_len;
	snprintf(what, sizeof(what),
		 "qp %#x wr_id %#llx %s to qp %#x [%#llx,+%llu) rkey %#x "
		 "completed IBV_WC_REM_ACCESS_ERR",
		 qpn, (unsigned long long)w->wr_id, wi->name, q->dest_qpn,
		 (unsigned long long)w->remote_addr, (unsigned long long)len,
		 w->rkey);
	if (key_entry(q->eng, w->rkey, &ke)) {
		struct sv_mr *m = sv_chk_find_key(w->rkey, 1);
		const struct sv_chk_gone *g = m ? NULL : sv_chk_find_gone(w->rkey, 1);

		if (!m)
			sv_check_report("RKEY_UNKNOWN", w->rkey,
					"%s: the rkey names no live MR or MW of "
					"the device; %s",
					what, g ? sv_chk_gone_text(b1, sizeof(b1), g) :
						  "no MR of this process had it");
		return;
	}
	if ((ke.access & wi->access) != wi->access) {
		sv_check_report("ACCESS_DENIED", w->rkey,
				"%s: the %s under the rkey (pid %u) lacks %s (has %s)",
				what,
				ke.kind == SV_KEY_MR_NULL ? "null mr (lkey only)" :
				ke.kind >= SV_KEY_MW1	  ? "mw" :
							    "mr",
				ke.owner_pid,
				sv_chk_bits(b1, sizeof(b1), wi->access & ~ke.access,
				     sv_chk_access_bits),
				sv_chk_bits(b2, sizeof(b2), ke.access, sv_chk_access_bits));
		return;
	}
	if (ke.length != UINT64_MAX &&
	    (w->remote_addr < ke.iova || len > ke.length ||
	     w->remote_addr - ke.iova > ke.length - len)) {
		sv_check_report("ACCESS_DENIED", w->rkey ^ (w->remote_addr << 20),
				"%s: the range is outside [%#llx,+%llu), what "
				"the rkey (pid %u) grants",
				what, (unsigned long long)ke.iova,
				(unsigned long long)ke.length, ke.owner_pid);
		return;
	}
	if (peer) {
		pv.pd_id = peer->pd_id;
		pv.access = peer->attr.qp_access_flags;
	} else if (sv_engine_qp_view(q->eng, q->dest_qpn, &pv)) {
		return; /* the responder QP is gone */
	}
	/* (An XRC request's keys answer to the SRQ it names, whose PD the
	 * TGT QP's view does not have: the responder's line says it.) */
	if (q->type != IBV_QPT_XRC_SEND && ke.pd_id != pv.pd_id) {
		sv_check_report("ACCESS_DENIED", w->rkey,
				"%s: the rkey's MR is on another PD than qp %#x",
				what, q->dest_qpn);
		return;
	}
	if ((pv.access & wi->access) != wi->access)
		sv_check_report("ACCESS_DENIED", w->rkey ^ ((uint64_t)qpn << 32),
				"%s: the responder qp %#x's qp_access_flags lack "
				"%s (has %s)",
				what, q->dest_qpn,
				sv_chk_bits(b1, sizeof(b1), wi->access & ~pv.access,
				     sv_chk_access_bits),
				sv_chk_bits(b2, sizeof(b2), pv.access,
				     sv_chk_access_bits));
}

/* IBV_WC_RNR_RETRY_EXC_ERR at the requester: the responder had no
 * receive.  Must hold reg_lock. */
static void rnr(struct sv_qp *q, const struct ibv_wc *wc)
{
	uint32_t qpn = q->qpx.qp_base.qp_num;
	struct sv_qp *peer = sv_chk_find_qpn(q->dest_qpn);
	struct sv_qp_view pv;
	char where[64];

	if (peer && !peer->srq) {
		snprintf(where, sizeof(where), "this process");
		pv.srq = 0;
		pv.recvs = sv_rq_count(&peer->shm->rq);
	} else if (!peer && !sv_engine_qp_view(q->eng, q->dest_qpn, &pv)) {
		snprintf(where, sizeof(where), "pid %u", pv.pid);
	} else {
		sv_check_report("RECV_NOT_POSTED", (uint64_t)q->dest_qpn << 32 | qpn,
				"qp %#x wr_id %#llx completed "
				"IBV_WC_RNR_RETRY_EXC_ERR: the responder qp %#x "
				"had no receive posted",
				qpn, (unsigned long long)wc->wr_id, q->dest_qpn);
		return;
	}
	sv_check_report("RECV_NOT_POSTED", (uint64_t)q->dest_qpn << 32 | qpn,
			"qp %#x wr_id %#llx completed "
			"IBV_WC_RNR_RETRY_EXC_ERR: the responder qp %#x "
			"(%s) had no receive posted (%u now%s)",
			qpn, (unsigned long long)wc->wr_id, q->dest_qpn, where,
			pv.recvs, pv.srq ? " in its SRQ" : "");
}

/* -------------------------------------------------- the responder side -- */

/*
 * The responder refused a request (sv_engine_resp_diag, sv_resp.c): the
 * line in the process that runs the responder -- the target's, or under
 * direct execution the initiator's, where the post that caused it is the
 * caller.  The requester's own line comes when it polls the error.  With
 * the responder lock of the QP held: only the checker's leaf locks here.
 */
void sv_chk_resp_diag(struct sv_engine *eng, const struct sv_rdiag *d)
{
	uint64_t site = (uint64_t)d->qpn << 32 | d->src_qpn | 1ULL << 62;
	struct sv_key_entry ke;
	const char *code = NULL;
	char what[256], why[512], b1[256], b2[256];
	size_t n;

	n = (size_t)snprintf(what, sizeof(what),
			     "responder qp %#x (pid %u) %s from qp %#x", d->qpn,
			     d->owner, d->op, d->src_qpn);
	if (d->kind == SV_RDIAG_RNR) {
		code = "RECV_NOT_POSTED";
		snprintf(why, sizeof(why),
			 "an RNR NAK: the QP had no receive posted (%u %s)",
			 d->recvs, d->srq ? "in its SRQ" : "in its receive queue");
		goto say;
	}
	if (!d->access)
		return; /* not a remote access through a key (an invalidate) */
	if (n < sizeof(what))
		snprintf(what + n, sizeof(what) - n, " [%#llx,+%llu) rkey %#x",
			 (unsigned long long)d->va, (unsigned long long)d->len,
			 d->rkey);
	code = "ACCESS_DENIED";
	if ((d->qp_access & d->access) != d->access) {
		site ^= d->access;
		snprintf(why, sizeof(why),
			 "refused (remote access error): the QP's "
			 "qp_access_flags lack %s (has %s)",
			 sv_chk_bits(b1, sizeof(b1), d->access & ~d->qp_access,
				     sv_chk_access_bits),
			 sv_chk_bits(b2, sizeof(b2), d->qp_access,
				     sv_chk_access_bits));
	} else if (key_entry(eng, d->rkey, &ke)) {
		const struct sv_chk_gone *g;

		code = "RKEY_UNKNOWN";
		site ^= d->rkey;
		pthread_mutex_lock(&sv_chk_reg_lock);
		g = sv_chk_find_gone(d->rkey, 1);
		snprintf(why, sizeof(why),
			 "refused (remote access error): the rkey names no live "
			 "MR or MW of the device%s%s",
			 g ? "; " : "", g ? sv_chk_gone_text(b1, sizeof(b1), g) : "");
		pthread_mutex_unlock(&sv_chk_reg_lock);
	} else if ((ke.access & d->access) != d->access) {
		site ^= d->rkey;
		snprintf(why, sizeof(why),
			 "refused (remote access error): the %s under the rkey "
			 "(pid %u) lacks %s (has %s)",
			 ke.kind == SV_KEY_MR_NULL ? "null mr (lkey only)" :
			 ke.kind >= SV_KEY_MW1	   ? "mw" :
						     "mr",
			 ke.owner_pid,
			 sv_chk_bits(b1, sizeof(b1), d->access & ~ke.access,
				     sv_chk_access_bits),
			 sv_chk_bits(b2, sizeof(b2), ke.access, sv_chk_access_bits));
	} else if (ke.length != UINT64_MAX &&
		   (d->va < ke.iova || d->len > ke.length ||
		    d->va - ke.iova > ke.length - d->len)) {
		site ^= d->rkey ^ (d->va << 20);
		snprintf(why, sizeof(why),
			 "refused (remote access error): the range is outside "
			 "[%#llx,+%llu), what the rkey (pid %u) grants",
			 (unsigned long long)ke.iova,
			 (unsigned long long)ke.length, ke.owner_pid);
	} else if (ke.pd_id != d->pd_id) {
		site ^= d->rkey;
		snprintf(why, sizeof(why),
			 "refused (remote access error): the rkey's MR is on "
			 "another PD than %s",
			 d->qp_type == IBV_QPT_XRC_RECV ? "the XRC SRQ the request "
							  "names" :
							  "the QP");
	} else {
		return;
	}
say:
	/* Under direct execution the post that caused it is the caller
	 * (the first time: a retry the progress thread runs is the same
	 * site, not a new one). */
	if (d->direct)
		sv_chk_report_once(code, site, "%s: %s; psn %#x, executed by the "
				   "initiator (pid %d)",
				   what, why, d->psn, (int)getpid());
	else
		sv_chk_report_here(code, site, "%s: %s; psn %#x", what, why,
				   d->psn);
}

void sv_check_polled(struct sv_cq *cq, const struct ibv_wc *wc, int n)
{
	char list[512];

	if (__atomic_load_n(&cq->shm->overflowed, __ATOMIC_RELAXED)) {
		uint64_t sum;

		pthread_mutex_lock(&sv_chk_reg_lock);
		sum = cq_demand(cq, list, sizeof(list));
		pthread_mutex_unlock(&sv_chk_reg_lock);
		sv_check_report("CQ_OVERRUN", (uintptr_t)cq,
				"cq %p overflowed: a completion was lost and "
				"IBV_EVENT_CQ_ERR raised; it holds %d, its QPs "
				"can have %llu outstanding (%s)",
				(void *)cq, cq->ex.cqe, (unsigned long long)sum,
				list);
	}
	for (int i = 0; i < n; i++) {
		struct sv_qp_err e = { .status = wc[i].status,
				       .opcode = wc[i].opcode,
				       .vendor_err = wc[i].vendor_err,
				       .wr_id = wc[i].wr_id };
		struct ibv_context *ctx = NULL;
		struct sv_qp *q;

		/* A flush follows the error that matters: not recorded. */
		if (wc[i].status == IBV_WC_SUCCESS ||
		    wc[i].status == IBV_WC_WR_FLUSH_ERR)
			continue;
		sv_chk_last_clear();
		pthread_mutex_lock(&sv_chk_reg_lock);
		q = sv_chk_find_qpn(wc[i].qp_num);
		if (q && wc[i].status == IBV_WC_REM_ACCESS_ERR)
			remote_denied(q, &wc[i]);
		else if (q && wc[i].status == IBV_WC_RNR_RETRY_EXC_ERR)
			rnr(q, &wc[i]);
		if (q) {
			ctx = q->qpx.qp_base.context;
			e.handle = q->qpx.qp_base.handle;
		}
		pthread_mutex_unlock(&sv_chk_reg_lock);
		if (!ctx)
			continue;
		/* The daemon keeps it for `softverbs res show`. */
		snprintf(e.diag, sizeof(e.diag), "%s", sv_chk_last_line());
		if (sv_ctx_call_simple(ctx, SV_OP_QP_ERR_SET, &e, sizeof(e),
				       NULL, 0))
			sv_dbg("qp %#x: last error not recorded", wc[i].qp_num);
	}
}


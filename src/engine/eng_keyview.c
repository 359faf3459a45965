/* SPDX-License-Identifier: MIT */
/*
 * What the misuse checker (src/verbs/check.c) reads of the device, and
 * the hook it installs in the responder.  Nothing here runs unless
 * SOFTVERBS_CHECK asked for the checker:
 *  - sv_engine_key_entry: what a key names now, whichever process made
 *    it, so that a refused access can be named (no such key, a missing
 *    access flag, a range outside the MR).  Read-only, lock-free: the
 *    seqlock reader of sv_keytab.h.
 *  - sv_engine_qp_view: a QP of another process as its responder block
 *    shows it (state, destination, path MTU, the connect attributes its
 *    owner's modify wrote there, receives posted), mapped from the fd the
 *    daemon keeps (SV_OP_QP_PEER) for the time of one read: a connect
 *    checked against its peer of another process (MISMATCHED_PEER).
 *  - sv_engine_resp_diag: NULL unless the checker set it; the responder
 *    (sv_resp.c) calls it as it refuses a request, so the engine does not
 *    depend on the verbs layer.
 */
#include "engine_int.h"
#include "sv_client.h"
#include "sv_sock.h"

void (*sv_engine_resp_diag)(struct sv_engine *eng, const struct sv_rdiag *d);

int sv_engine_key_entry(struct sv_engine *eng, uint32_t key,
			struct sv_key_entry *out)
{
	uint32_t idx = key >> 8;

	if (!eng || !eng->keys || idx == 0 || idx >= eng->nkeys)
		return -1;
	if (sv_key_read(&eng->keys[idx], out))
		return -1;
	return out->kind == SV_KEY_FREE || out->tag != (uint8_t)key ? -1 : 0;
}

int sv_engine_qp_view(struct sv_engine *eng, uint32_t qpn,
		      struct sv_qp_view *out)
{
	struct sv_qp_peer_rep rep;
	int fds[3] = { -1, -1, -1 };
	struct sv_qp_shm *q;
	struct sv_srq_shm *s = NULL;
	int nfds = eng ? sv_qp_peer_fds(eng, qpn, &rep, fds) : -1;

	if (nfds < 1)
		return -1;
	q = sv_shm_map(fds[0], SV_SHM_QP, rep.qp_cookie);
	if (q && q->srq_cookie && nfds >= 3)
		s = sv_shm_map(fds[2], SV_SHM_SRQ, q->srq_cookie);
	sv_close_fds(fds, 3);
	if (!q || q->qpn != qpn) {
		if (q)
			sv_shm_unmap(q);
		if (s)
			sv_shm_unmap(s);
		return -1;
	}
	*out = (struct sv_qp_view){
		.qpn = qpn,
		.type = q->type,
		.state = __atomic_load_n(&q->state, __ATOMIC_ACQUIRE),
		.dest_qpn = q->dest_qpn,
		.mtu = q->mtu,
		.rq_psn = q->rq_psn,
		.sq_psn = q->sq_psn,
		.max_rd_atomic = q->max_rd_atomic,
		.max_dest_rd_atomic = q->max_dest_rd_atomic,
		.srq = !!q->srq_cookie,
		.recvs = q->srq_cookie ? (s ? sv_rq_count(&s->rq) : 0) :
					 sv_rq_count(&q->rq),
		.access = q->access,
		.pd_id = q->pd_id,
		.pid = rep.pid,
	};
	sv_shm_unmap(q);
	if (s)
		sv_shm_unmap(s);
	return 0;
}

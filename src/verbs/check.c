/* SPDX-License-Identifier: MIT */
/*
 * The misuse checker: SOFTVERBS_CHECK=1 (docs/checker.md lists the codes).
 *
 * A NIC answers a wrong post with a bare status (IBV_WC_LOC_PROT_ERR, a QP
 * in ERR) long after the post, and knows nothing of the program.  The
 * library sees every post with the objects it names, so when asked it
 * says at once what is wrong and where: one line per misuse and site,
 * "softverbs-check: CODE <objects>; called from <function>", on stderr.
 * The library sends no log to the daemon, so stderr is where the lines go.
 *
 * Cost.  sv_check_on is read from the environment once, when the library
 * is loaded; every hook in the verbs is SV_CHECK(...) (check.h), a load
 * and a branch predicted not taken.  Nothing below runs without it: the
 * object lists, the ring of deregistered keys and the at-exit count exist
 * only for a checked process.
 *
 * What the library can see, and so what is checked here:
 *  - at post: the QP's state, each SGE against the MR its lkey names (this
 *    process's MRs, then the device's key table for the MRs of other
 *    processes), the mapping under the SGE (sv_mem_check, the probe
 *    ibv_reg_mr uses), runs of unsignaled WRs as long as the send queue;
 *  - at modify: the attribute mask against the transition table of qp.c,
 *    and the attributes of both ends when the peer is a QP of this process;
 *  - at create/resize/destroy: CQ depths, dependants, outstanding work;
 *  - at poll: a lost completion (the CQ's overflow flag), and the remote
 *    key or receive behind IBV_WC_REM_ACCESS_ERR / IBV_WC_RNR_RETRY_EXC_ERR
 *    from the WQE still in the send ring;
 *  - at exit: what was left.
 * What only the responder sees (its own side of a refused access, a SEND
 * with no receive as it arrives) belongs to the engine's responder, which
 * may report through sv_check_report.
 *
 * Locks: reg_lock guards the object lists and the ring, seen_lock the
 * reported sites; both are leaves taken after the caller's queue locks.
 * The lists hold pointers to live objects only: a verb removes its object
 * (sv_check_obj) before it frees it.  Fields of another QP's send ring are
 * read without its sq_lock (a checker's view may be one post late).
 */
#include "dp_int.h"
#include "check.h"
#include "sv_keytab.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int sv_check_on;

/* --------------------------------------------------------- reporting -- */

#define SEEN_CAP 4096u /* distinct sites remembered (then all are told) */

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[SEEN_CAP];
static unsigned nseen;

/* 1 when h was reported before; else remembers it. */
static int seen_before(uint64_t h)
{
	int ret = 0;

	h |= 1; /* 0 marks an empty slot */
	pthread_mutex_lock(&seen_lock);
	if (nseen < SEEN_CAP * 3 / 4) {
		unsigned i = (unsigned)(h % SEEN_CAP);

		while (seen[i] && seen[i] != h)
			i = (i + 1) % SEEN_CAP;
		if (seen[i])
			ret = 1;
		else {
			seen[i] = h;
			nseen++;
		}
	}
	pthread_mutex_unlock(&seen_lock);
	return ret;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h;
}

/* The first frame outside this library: "fn+0xoff (object)" into buf, its
 * address into *pc.  Empty when the stack cannot be walked. */
static void find_caller(char *buf, size_t cap, uintptr_t *pc)
{
	void *fr[32];
	Dl_info self, di;
	int n = backtrace(fr, 32);

	buf[0] = 0;
	*pc = 0;
	if (!dladdr((void *)find_caller, &self))
		return;
	for (int i = 0; i < n; i++) {
		const char *obj;

		if (!dladdr(fr[i], &di) || di.dli_fbase == self.dli_fbase)
			continue;
		*pc = (uintptr_t)fr[i];
		obj = di.dli_fname ? strrchr(di.dli_fname, '/') : NULL;
		obj = obj ? obj + 1 : (di.dli_fname ? di.dli_fname : "?");
		if (di.dli_sname)
			snprintf(buf, cap, "%s+%#lx (%s)", di.dli_sname,
				 (unsigned long)(*pc - (uintptr_t)di.dli_saddr),
				 obj);
		else
			snprintf(buf, cap, "%s+%#lx", obj,
				 (unsigned long)(*pc - (uintptr_t)di.dli_fbase));
		return;
	}
}

/* with_caller: 0 none; 1 the caller, and a site per calling address; 2
 * the caller, one site whoever calls (a pair of QPs is one site). */
static void vreport(const char *code, uint64_t site, int with_caller,
		    const char *fmt, va_list ap)
{
	char line[1536], who[256];
	uintptr_t pc = 0;
	uint64_t h = 1469598103934665603ULL;
	size_t n;
	int saved = errno;

	who[0] = 0;
	if (with_caller)
		find_caller(who, sizeof(who), &pc);
	for (const char *c = code; *c; c++)
		h = mix(h, (uint8_t)*c);
	h = mix(mix(h, site), with_caller == 2 ? 0 : pc);
	if (seen_before(h)) {
		errno = saved;
		return;
	}
	n = (size_t)snprintf(line, sizeof(line), "softverbs-check: %s ", code);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	n = strlen(line);
	if (who[0] && n < sizeof(line))
		snprintf(line + n, sizeof(line) - n, "; called from %s", who);
	n = strlen(line);
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write: lines of threads and processes do not interleave. */
	if (write(STDERR_FILENO, line, n) < 0)
		errno = saved;
	errno = saved;
}

void sv_check_report(const char *code, uint64_t site, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(code, site, 1, fmt, ap);
	va_end(ap);
}

/* sv_check_report without the caller. */
static void report_here(const char *code, uint64_t site, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void report_here(const char *code, uint64_t site, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(code, site, 0, fmt, ap);
	va_end(ap);
}

/* sv_check_report, one site whoever calls. */
static void report_once(const char *code, uint64_t site, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void report_once(const char *code, uint64_t site, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(code, site, 2, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------- names -- */

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS",
					 "SQD",	  "SQE",  "ERR" };

	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "UNKNOWN";
}

static const char *type_name(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : "UD";
}

static const char *wr_name(uint32_t op)
{
	const char *n = sv_wrinfo(op)->name;

	return n ? n : "opcode?";
}

/* The names of the bits of mask from a table, "A|B", into buf. */
struct bitname {
	uint32_t bit;
	const char *name;
};

static const struct bitname mask_bits[] = {
	{ IBV_QP_STATE, "IBV_QP_STATE" },
	{ IBV_QP_CUR_STATE, "IBV_QP_CUR_STATE" },
	{ IBV_QP_EN_SQD_ASYNC_NOTIFY, "IBV_QP_EN_SQD_ASYNC_NOTIFY" },
	{ IBV_QP_ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS" },
	{ IBV_QP_PKEY_INDEX, "IBV_QP_PKEY_INDEX" },
	{ IBV_QP_PORT, "IBV_QP_PORT" },
	{ IBV_QP_QKEY, "IBV_QP_QKEY" },
	{ IBV_QP_AV, "IBV_QP_AV" },
	{ IBV_QP_PATH_MTU, "IBV_QP_PATH_MTU" },
	{ IBV_QP_TIMEOUT, "IBV_QP_TIMEOUT" },
	{ IBV_QP_RETRY_CNT, "IBV_QP_RETRY_CNT" },
	{ IBV_QP_RNR_RETRY, "IBV_QP_RNR_RETRY" },
	{ IBV_QP_RQ_PSN, "IBV_QP_RQ_PSN" },
	{ IBV_QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC" },
	{ IBV_QP_ALT_PATH, "IBV_QP_ALT_PATH" },
	{ IBV_QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER" },
	{ IBV_QP_SQ_PSN, "IBV_QP_SQ_PSN" },
	{ IBV_QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC" },
	{ IBV_QP_PATH_MIG_STATE, "IBV_QP_PATH_MIG_STATE" },
	{ IBV_QP_CAP, "IBV_QP_CAP" },
	{ IBV_QP_DEST_QPN, "IBV_QP_DEST_QPN" },
	{ IBV_QP_RATE_LIMIT, "IBV_QP_RATE_LIMIT" },
	{ 0, NULL },
};

static const struct bitname access_bits[] = {
	{ IBV_ACCESS_LOCAL_WRITE, "IBV_ACCESS_LOCAL_WRITE" },
	{ IBV_ACCESS_REMOTE_WRITE, "IBV_ACCESS_REMOTE_WRITE" },
	{ IBV_ACCESS_REMOTE_READ, "IBV_ACCESS_REMOTE_READ" },
	{ IBV_ACCESS_REMOTE_ATOMIC, "IBV_ACCESS_REMOTE_ATOMIC" },
	{ IBV_ACCESS_MW_BIND, "IBV_ACCESS_MW_BIND" },
	{ IBV_ACCESS_ON_DEMAND, "IBV_ACCESS_ON_DEMAND" },
	{ 0, NULL },
};

static const char *bits(char *buf, size_t cap, uint32_t v,
			const struct bitname *t)
{
	size_t n = 0;

	buf[0] = 0;
	for (; t->name; t++)
		if ((v & t->bit) && n < cap)
			n += (size_t)snprintf(buf + n, cap - n, "%s%s",
					      n ? "|" : "", t->name);
	if (!buf[0])
		snprintf(buf, cap, "none");
	return buf;
}

/* ----------------------------------------------------------- objects -- */

struct ent {
	void *obj;
	uint32_t unsig; /* QP: unsignaled WRs posted since the last signaled */
	struct ent *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ent *live[SV_CK_NKINDS];
static unsigned nlive[SV_CK_NKINDS];

/* Keys of MRs that went, for LKEY_UNKNOWN/RKEY_UNKNOWN: the newest
 * NGONE, with when and through which verb. */
#define NGONE 64u
struct gone {
	uint32_t lkey, rkey;
	uint64_t iova, length;
	struct timespec when;
	const char *verb;
	char by[160];
};
static struct gone gone[NGONE];
static unsigned ngone;

#define FOR_EACH(e, kind) for (struct ent *e = live[kind]; e; e = e->next)

/* Must hold reg_lock. */
static struct ent *find(enum sv_check_kind kind, const void *obj)
{
	FOR_EACH(e, kind)
	if (e->obj == obj)
		return e;
	return NULL;
}

/* Must hold reg_lock.  Our QP numbered qpn, or NULL. */
static struct sv_qp *find_qpn(uint32_t qpn)
{
	FOR_EACH(e, SV_CK_QP)
	if (((struct sv_qp *)e->obj)->qpx.qp_base.qp_num == qpn)
		return e->obj;
	return NULL;
}

/* Must hold reg_lock.  Our MR whose lkey (rkey when remote) is key. */
static struct sv_mr *find_key(uint32_t key, int remote)
{
	FOR_EACH(e, SV_CK_MR) {
		struct sv_mr *m = e->obj;

		if ((remote ? m->mr.rkey : m->mr.lkey) == key)
			return m;
	}
	return NULL;
}

/* Must hold reg_lock.  The newest gone MR that had key, or NULL. */
static const struct gone *find_gone(uint32_t key, int remote)
{
	for (unsigned i = 0; i < ngone && i < NGONE; i++) {
		const struct gone *g = &gone[(ngone - 1 - i) % NGONE];

		if ((remote ? g->rkey : g->lkey) == key)
			return g;
	}
	return NULL;
}

void sv_check_obj(enum sv_check_kind kind, void *obj, int add,
		  const char *verb)
{
	struct ent *e, **pp;

	pthread_mutex_lock(&reg_lock);
	if (add) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->obj = obj;
			e->next = live[kind];
			live[kind] = e;
			nlive[kind]++;
		}
		pthread_mutex_unlock(&reg_lock);
		return;
	}
	for (pp = &live[kind]; (e = *pp); pp = &e->next)
		if (e->obj == obj) {
			*pp = e->next;
			nlive[kind]--;
			free(e);
			break;
		}
	if (kind == SV_CK_MR && verb) {
		struct sv_mr *m = obj;
		struct gone *g = &gone[ngone++ % NGONE];
		uintptr_t pc;

		g->lkey = m->mr.lkey;
		g->rkey = m->mr.rkey;
		g->iova = m->iova;
		g->length = m->mr.length;
		g->verb = verb;
		clock_gettime(CLOCK_MONOTONIC, &g->when);
		find_caller(g->by, sizeof(g->by), &pc);
	}
	pthread_mutex_unlock(&reg_lock);
}

/* "until ibv_dereg_mr 0.0012 s ago (from f+0x1 (prog))" of a gone key. */
static const char *gone_text(char *buf, size_t cap, const struct gone *g)
{
	struct timespec now;
	double ago;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ago = (double)(now.tv_sec - g->when.tv_sec) +
	      (double)(now.tv_nsec - g->when.tv_nsec) / 1e9;
	snprintf(buf, cap,
		 "it named mr [%#llx,+%llu) of this process until %s %.6f s "
		 "ago%s%s%s",
		 (unsigned long long)g->iova, (unsigned long long)g->length,
		 g->verb, ago, g->by[0] ? " (from " : "", g->by,
		 g->by[0] ? ")" : "");
	return buf;
}

#define key_entry sv_engine_key_entry

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
	FOR_EACH(e, SV_CK_MR) {
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
	m = find_key(s->lkey, 0);
	if (m) {
		if (m->kind == SV_MR_NULL)
			return;
		iova = m->iova;
		mlen = m->mr.length;
	} else if (!key_entry(p->eng, s->lkey, &ke) && ke.kind < SV_KEY_MW1) {
		/* An MR of another process of the device. */
		iova = ke.iova;
		mlen = ke.length;
	} else {
		const struct gone *g = find_gone(s->lkey, 0);

		sv_check_report("LKEY_UNKNOWN", s->lkey,
				"%s: the lkey names no live MR of pid %d; %s",
				what, (int)getpid(),
				g ? gone_text(txt, sizeof(txt), g) :
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
				bits(txt, sizeof(txt), m->access, access_bits));
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

void sv_check_send(struct sv_qp *qp, const struct ibv_send_wr *wr)
{
	const struct sv_wrinfo *wi = sv_wrinfo((uint32_t)wr->opcode);
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	enum ibv_qp_state st = sv_qp_state(qp);
	struct post p = { .verb = "ibv_post_send",
			  .owner = "qp",
			  .num = qpn,
			  .pd_id = qp->pd_id,
			  .eng = qp->eng,
			  .wr_id = wr->wr_id };
	struct ent *e;

	if (st < IBV_QPS_RTS) {
		sv_check_report("QP_STATE", qpn,
				"ibv_post_send qp %#x wr_id %#llx %s: the QP is in "
				"%s, sends need RTS",
				qpn, (unsigned long long)wr->wr_id,
				wr_name((uint32_t)wr->opcode), state_name(st));
		return;
	}
	pthread_mutex_lock(&reg_lock);
	if (!((wr->send_flags & IBV_SEND_INLINE) && (wi->flags & SV_WR_INLINE)))
		for (int i = 0; i < wr->num_sge && i < (int)qp->cap.max_send_sge;
		     i++)
			check_sge(&p, i, &wr->sg_list[i],
				  !!(wi->flags & SV_WR_RD_ATOMIC));
	/* A send queue slot is given back when the WR's completion, or a
	 * later signaled one's, is polled: a queue's worth of unsignaled WRs
	 * with no signaled one leaves nothing that can give them back. */
	e = find(SV_CK_QP, qp);
	if (e && !qp->sq_sig_all && qp->sq.max_wr) {
		if (wr->send_flags & IBV_SEND_SIGNALED)
			e->unsig = 0;
		else if (++e->unsig == qp->sq.max_wr)
			sv_check_report("UNSIGNALED_OVERFLOW", qpn,
					"ibv_post_send qp %#x wr_id %#llx: the send "
					"queue (max_send_wr %u) now holds %u "
					"unsignaled WRs and no signaled one, "
					"sq_sig_all is 0: nothing can retire them "
					"and the next post finds the queue full",
					qpn, (unsigned long long)wr->wr_id,
					qp->sq.max_wr, e->unsig);
	}
	pthread_mutex_unlock(&reg_lock);
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
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < wr->num_sge && i < (int)qp->cap.max_recv_sge; i++)
		check_sge(&p, i, &wr->sg_list[i], 1);
	pthread_mutex_unlock(&reg_lock);
}

void sv_check_srq_recv(struct sv_srq *srq, const struct ibv_recv_wr *wr)
{
	struct post p = { .verb = "ibv_post_srq_recv",
			  .owner = "srq",
			  .num = srq->srq.handle,
			  .pd_id = srq->pd_id,
			  .eng = srq->eng,
			  .wr_id = wr->wr_id };

	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < wr->num_sge && i < (int)srq->shm->rq.max_sge; i++)
		check_sge(&p, i, &wr->sg_list[i], 1);
	pthread_mutex_unlock(&reg_lock);
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
				qpn, type_name(qp->type), state_name(cur),
				state_name(next));
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
			qpn, type_name(qp->type), state_name(cur),
			state_name(next), mask,
			missing ? bits(b1, sizeof(b1), missing, mask_bits) :
				  "nothing",
			extra ? bits(b2, sizeof(b2), extra, mask_bits) : "nothing");
}

static int gid_v4(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g->raw, pfx, sizeof(pfx));
}

/* The pairs of attributes of a (this process's QP) and its peer b that
 * cannot work together.  Must hold reg_lock. */
static void peer_pair(struct sv_qp *a, struct sv_qp *b)
{
	uint32_t an = a->qpx.qp_base.qp_num, bn = b->qpx.qp_base.qp_num;
	enum ibv_qp_state as = sv_qp_state(a), bs = sv_qp_state(b);
	uint64_t site = (uint64_t)an << 32 | bn;

	if (as < IBV_QPS_RTR || bs < IBV_QPS_RTR || as > IBV_QPS_SQD ||
	    bs > IBV_QPS_SQD)
		return;
	if (b->dest_qpn != an)
		report_once("MISMATCHED_PEER", site ^ (1ULL << 56),
				"ibv_modify_qp qp %#x: its peer qp %#x is "
				"connected to qp %#x, not to it",
				an, bn, b->dest_qpn);
	if (a->attr.path_mtu != b->attr.path_mtu)
		report_once("MISMATCHED_PEER", site ^ (2ULL << 56),
				"ibv_modify_qp qp %#x: path_mtu %d bytes, its "
				"peer qp %#x has %d",
				an, 128 << a->attr.path_mtu, bn,
				128 << b->attr.path_mtu);
	if (a->type == IBV_QPT_RC && as >= IBV_QPS_RTS &&
	    a->attr.max_rd_atomic > b->attr.max_dest_rd_atomic)
		report_once("MISMATCHED_PEER", site ^ (3ULL << 56),
				"ibv_modify_qp qp %#x: max_rd_atomic %u is above "
				"its peer qp %#x's max_dest_rd_atomic %u",
				an, a->attr.max_rd_atomic, bn,
				b->attr.max_dest_rd_atomic);
	if (as >= IBV_QPS_RTS && a->attr.sq_psn != b->attr.rq_psn)
		report_once("MISMATCHED_PEER", site ^ (4ULL << 56),
				"ibv_modify_qp qp %#x: sq_psn %#x, its peer qp %#x "
				"expects rq_psn %#x",
				an, a->attr.sq_psn, bn, b->attr.rq_psn);
}

void sv_check_modified(struct sv_qp *qp)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	enum ibv_qp_state st = sv_qp_state(qp);
	struct sv_qp *peer;
	union ibv_gid sgid;

	if (qp->type == IBV_QPT_UD || (st != IBV_QPS_RTR && st != IBV_QPS_RTS))
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
	pthread_mutex_lock(&reg_lock);
	peer = find_qpn(qp->dest_qpn);
	if (peer && peer != qp) {
		peer_pair(qp, peer);
		peer_pair(peer, qp);
	}
	pthread_mutex_unlock(&reg_lock);
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
	FOR_EACH(e, SV_CK_QP) {
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

	pthread_mutex_lock(&reg_lock);
	sum = cq_demand(cq, list, sizeof(list));
	pthread_mutex_unlock(&reg_lock);
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
	FOR_EACH(e, SV_CK_QP) {
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
	pthread_mutex_lock(&reg_lock);
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
					q->qpx.qp_base.qp_num, state_name(st), out,
					(unsigned long long)w->wr_id);
		}
		break;
	}
	case SV_CK_CQ:
		FOR_EACH(e, SV_CK_QP) {
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
		FOR_EACH(e, SV_CK_QP) {
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

		FOR_EACH(e, SV_CK_QP)
		if (((struct sv_qp *)e->obj)->qpx.qp_base.pd == pd)
			add(list, sizeof(list), &n, &count, "qp %#x",
			    ((struct sv_qp *)e->obj)->qpx.qp_base.qp_num);
		FOR_EACH(e, SV_CK_MR)
		if (((struct sv_mr *)e->obj)->mr.pd == pd)
			add(list, sizeof(list), &n, &count, "mr lkey %#x",
			    ((struct sv_mr *)e->obj)->mr.lkey);
		FOR_EACH(e, SV_CK_SRQ)
		if (((struct ibv_srq *)e->obj)->pd == pd)
			add(list, sizeof(list), &n, &count, "srq %p", e->obj);
		FOR_EACH(e, SV_CK_MW)
		if (((struct ibv_mw *)e->obj)->pd == pd)
			add(list, sizeof(list), &n, &count, "mw rkey %#x",
			    ((struct ibv_mw *)e->obj)->rkey);
		FOR_EACH(e, SV_CK_AH)
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
	pthread_mutex_unlock(&reg_lock);
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
	struct sv_qp *peer = find_qpn(q->dest_qpn);
	const struct sv_wrinfo *wi;
	struct sv_key_entry ke;
	char what[320], b1[256], b2[256];
	uint64_t len = 0;

	if (!w)
		return;
	wi = sv_wrinfo(w->opcode);
	if (wi->flags & SV_WR_ATOMIC)
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
		struct sv_mr *m = find_key(w->rkey, 1);
		const struct gone *g = m ? NULL : find_gone(w->rkey, 1);

		if (!m)
			sv_check_report("RKEY_UNKNOWN", w->rkey,
					"%s: the rkey names no live MR or MW of "
					"the device; %s",
					what, g ? gone_text(b1, sizeof(b1), g) :
						  "no MR of this process had it");
		return;
	}
	if ((ke.access & wi->access) != wi->access) {
		sv_check_report("ACCESS_DENIED", w->rkey,
				"%s: the %s under the rkey (pid %u) lacks %s (has %s)",
				what, ke.kind >= SV_KEY_MW1 ? "mw" : "mr",
				ke.owner_pid,
				bits(b1, sizeof(b1), wi->access & ~ke.access,
				     access_bits),
				bits(b2, sizeof(b2), ke.access, access_bits));
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
	if (peer && ke.pd_id != peer->pd_id) {
		sv_check_report("ACCESS_DENIED", w->rkey,
				"%s: the rkey's MR is on another PD than qp %#x",
				what, q->dest_qpn);
		return;
	}
	if (peer && (peer->attr.qp_access_flags & wi->access) != wi->access)
		sv_check_report("ACCESS_DENIED", w->rkey ^ ((uint64_t)qpn << 32),
				"%s: the responder qp %#x's qp_access_flags lack "
				"%s (has %s)",
				what, q->dest_qpn,
				bits(b1, sizeof(b1),
				     wi->access & ~peer->attr.qp_access_flags,
				     access_bits),
				bits(b2, sizeof(b2), peer->attr.qp_access_flags,
				     access_bits));
}

/* IBV_WC_RNR_RETRY_EXC_ERR at the requester: the responder had no
 * receive.  Must hold reg_lock. */
static void rnr(struct sv_qp *q, const struct ibv_wc *wc)
{
	uint32_t qpn = q->qpx.qp_base.qp_num;
	struct sv_qp *peer = find_qpn(q->dest_qpn);

	if (peer && !peer->srq)
		sv_check_report("RECV_NOT_POSTED", (uint64_t)q->dest_qpn << 32 | qpn,
				"qp %#x wr_id %#llx completed "
				"IBV_WC_RNR_RETRY_EXC_ERR: the responder qp %#x "
				"(this process) had no receive posted (%u now)",
				qpn, (unsigned long long)wc->wr_id, q->dest_qpn,
				sv_rq_count(&peer->shm->rq));
	else
		sv_check_report("RECV_NOT_POSTED", (uint64_t)q->dest_qpn << 32 | qpn,
				"qp %#x wr_id %#llx completed "
				"IBV_WC_RNR_RETRY_EXC_ERR: the responder qp %#x "
				"had no receive posted",
				qpn, (unsigned long long)wc->wr_id, q->dest_qpn);
}

void sv_check_polled(struct sv_cq *cq, const struct ibv_wc *wc, int n)
{
	char list[512];

	if (__atomic_load_n(&cq->shm->overflowed, __ATOMIC_RELAXED)) {
		uint64_t sum;

		pthread_mutex_lock(&reg_lock);
		sum = cq_demand(cq, list, sizeof(list));
		pthread_mutex_unlock(&reg_lock);
		sv_check_report("CQ_OVERRUN", (uintptr_t)cq,
				"cq %p overflowed: a completion was lost and "
				"IBV_EVENT_CQ_ERR raised; it holds %d, its QPs "
				"can have %llu outstanding (%s)",
				(void *)cq, cq->ex.cqe, (unsigned long long)sum,
				list);
	}
	for (int i = 0; i < n; i++) {
		struct sv_qp *q;

		if (wc[i].status != IBV_WC_REM_ACCESS_ERR &&
		    wc[i].status != IBV_WC_RNR_RETRY_EXC_ERR)
			continue;
		pthread_mutex_lock(&reg_lock);
		q = find_qpn(wc[i].qp_num);
		if (q && wc[i].status == IBV_WC_REM_ACCESS_ERR)
			remote_denied(q, &wc[i]);
		else if (q)
			rnr(q, &wc[i]);
		pthread_mutex_unlock(&reg_lock);
	}
}

/* ---------------------------------------------------------------- exit -- */

static void at_exit(void)
{
	static const char *const names[SV_CK_NKINDS] = {
		"context", "PD", "MR", "CQ", "QP", "SRQ", "MW", "AH"
	};
	char list[256];
	size_t n = 0;
	unsigned total = 0;

	list[0] = 0;
	pthread_mutex_lock(&reg_lock);
	for (int k = SV_CK_NKINDS - 1; k >= 0; k--)
		if (nlive[k]) {
			total += nlive[k];
			n += (size_t)snprintf(list + n, sizeof(list) - n,
					      "%s%u %s", n ? ", " : "",
					      nlive[k], names[k]);
		}
	pthread_mutex_unlock(&reg_lock);
	if (!total)
		return;
	/* No caller: exit(3) is where every process ends. */
	report_here("LEAK_AT_EXIT", 0, "pid %d: %s left at exit",
		    (int)getpid(), list);
}

__attribute__((constructor)) static void check_init(void)
{
	const char *s = getenv("SOFTVERBS_CHECK");
	void *fr[2];

	if (!s || !*s || !strcmp(s, "0"))
		return;
	sv_check_on = 1;
	/* backtrace(3) loads its unwinder on first use: now, not under a
	 * post's spinlock. */
	backtrace(fr, 2);
	atexit(at_exit);
}

/* SPDX-License-Identifier: MIT */
/*
 * Fault plans: parsing and names (sv_fault.h has the grammar).  The
 * library, the daemon and the command parse with the same function, so a
 * plan the daemon accepts is one the library runs, and an error names the
 * key that is wrong.
 */
#include "sv_fault.h"

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const verb_names[SV_FV_N] = {
	[SV_FV_ALLOC_PD] = "ibv_alloc_pd",   [SV_FV_REG_MR] = "ibv_reg_mr",
	[SV_FV_CREATE_CQ] = "ibv_create_cq", [SV_FV_CREATE_QP] = "ibv_create_qp",
	[SV_FV_MODIFY_QP] = "ibv_modify_qp", [SV_FV_POST_SEND] = "ibv_post_send",
	[SV_FV_POST_RECV] = "ibv_post_recv", [SV_FV_CREATE_SRQ] = "ibv_create_srq",
	[SV_FV_CREATE_AH] = "ibv_create_ah",
};

static const struct {
	int v;
	const char *name;
} statuses[] = {
	{ IBV_WC_SUCCESS, "SUCCESS" },
	{ IBV_WC_LOC_LEN_ERR, "LOC_LEN_ERR" },
	{ IBV_WC_LOC_QP_OP_ERR, "LOC_QP_OP_ERR" },
	{ IBV_WC_LOC_EEC_OP_ERR, "LOC_EEC_OP_ERR" },
	{ IBV_WC_LOC_PROT_ERR, "LOC_PROT_ERR" },
	{ IBV_WC_WR_FLUSH_ERR, "WR_FLUSH_ERR" },
	{ IBV_WC_MW_BIND_ERR, "MW_BIND_ERR" },
	{ IBV_WC_BAD_RESP_ERR, "BAD_RESP_ERR" },
	{ IBV_WC_LOC_ACCESS_ERR, "LOC_ACCESS_ERR" },
	{ IBV_WC_REM_INV_REQ_ERR, "REM_INV_REQ_ERR" },
	{ IBV_WC_REM_ACCESS_ERR, "REM_ACCESS_ERR" },
	{ IBV_WC_REM_OP_ERR, "REM_OP_ERR" },
	{ IBV_WC_RETRY_EXC_ERR, "RETRY_EXC_ERR" },
	{ IBV_WC_RNR_RETRY_EXC_ERR, "RNR_RETRY_EXC_ERR" },
	{ IBV_WC_LOC_RDD_VIOL_ERR, "LOC_RDD_VIOL_ERR" },
	{ IBV_WC_REM_INV_RD_REQ_ERR, "REM_INV_RD_REQ_ERR" },
	{ IBV_WC_REM_ABORT_ERR, "REM_ABORT_ERR" },
	{ IBV_WC_INV_EECN_ERR, "INV_EECN_ERR" },
	{ IBV_WC_INV_EEC_STATE_ERR, "INV_EEC_STATE_ERR" },
	{ IBV_WC_FATAL_ERR, "FATAL_ERR" },
	{ IBV_WC_RESP_TIMEOUT_ERR, "RESP_TIMEOUT_ERR" },
	{ IBV_WC_GENERAL_ERR, "GENERAL_ERR" },
};

static const struct {
	int v;
	int elem;
	const char *name;
} events[] = {
	{ IBV_EVENT_CQ_ERR, SV_FE_CQ, "CQ_ERR" },
	{ IBV_EVENT_QP_FATAL, SV_FE_QP, "QP_FATAL" },
	{ IBV_EVENT_QP_REQ_ERR, SV_FE_QP, "QP_REQ_ERR" },
	{ IBV_EVENT_QP_ACCESS_ERR, SV_FE_QP, "QP_ACCESS_ERR" },
	{ IBV_EVENT_COMM_EST, SV_FE_QP, "COMM_EST" },
	{ IBV_EVENT_SQ_DRAINED, SV_FE_QP, "SQ_DRAINED" },
	{ IBV_EVENT_PATH_MIG, SV_FE_QP, "PATH_MIG" },
	{ IBV_EVENT_PATH_MIG_ERR, SV_FE_QP, "PATH_MIG_ERR" },
	{ IBV_EVENT_DEVICE_FATAL, SV_FE_DEVICE, "DEVICE_FATAL" },
	{ IBV_EVENT_PORT_ACTIVE, SV_FE_PORT, "PORT_ACTIVE" },
	{ IBV_EVENT_PORT_ERR, SV_FE_PORT, "PORT_ERR" },
	{ IBV_EVENT_LID_CHANGE, SV_FE_PORT, "LID_CHANGE" },
	{ IBV_EVENT_PKEY_CHANGE, SV_FE_PORT, "PKEY_CHANGE" },
	{ IBV_EVENT_SM_CHANGE, SV_FE_PORT, "SM_CHANGE" },
	{ IBV_EVENT_QP_LAST_WQE_REACHED, SV_FE_QP, "QP_LAST_WQE_REACHED" },
	{ IBV_EVENT_CLIENT_REREGISTER, SV_FE_PORT, "CLIENT_REREGISTER" },
	{ IBV_EVENT_GID_CHANGE, SV_FE_PORT, "GID_CHANGE" },
};

static const struct {
	int v;
	const char *name;
} errnos[] = {
	{ EPERM, "EPERM" },	{ ENOENT, "ENOENT" },	  { EINTR, "EINTR" },
	{ EIO, "EIO" },		{ E2BIG, "E2BIG" },	  { EBADF, "EBADF" },
	{ EAGAIN, "EAGAIN" },	{ ENOMEM, "ENOMEM" },	  { EACCES, "EACCES" },
	{ EFAULT, "EFAULT" },	{ EBUSY, "EBUSY" },	  { EEXIST, "EEXIST" },
	{ ENODEV, "ENODEV" },	{ EINVAL, "EINVAL" },	  { ENFILE, "ENFILE" },
	{ EMFILE, "EMFILE" },	{ ENOSPC, "ENOSPC" },	  { ERANGE, "ERANGE" },
	{ ENOSYS, "ENOSYS" },	{ ENOBUFS, "ENOBUFS" },	  { ENOTCONN, "ENOTCONN" },
	{ ETIMEDOUT, "ETIMEDOUT" }, { ECONNREFUSED, "ECONNREFUSED" },
	{ EOPNOTSUPP, "EOPNOTSUPP" }, { EPROTO, "EPROTO" },
	{ ECONNRESET, "ECONNRESET" }, { ENETUNREACH, "ENETUNREACH" },
};

const char *sv_fault_verb_name(int verb)
{
	return verb >= 0 && verb < SV_FV_N ? verb_names[verb] : "?";
}

const char *sv_fault_status_name(int status)
{
	for (size_t i = 0; i < N_OF(statuses); i++)
		if (statuses[i].v == status)
			return statuses[i].name;
	return "?";
}

const char *sv_fault_event_name(int event)
{
	for (size_t i = 0; i < N_OF(events); i++)
		if (events[i].v == event)
			return events[i].name;
	return "?";
}

int sv_fault_event_elem(int event)
{
	for (size_t i = 0; i < N_OF(events); i++)
		if (events[i].v == event)
			return events[i].elem;
	return SV_FE_DEVICE;
}

const char *sv_fault_errno_name(int err)
{
	for (size_t i = 0; i < N_OF(errnos); i++)
		if (errnos[i].v == err)
			return errnos[i].name;
	return "?";
}

double sv_fault_draw(uint64_t seed, uint64_t salt, uint64_t k)
{
	uint64_t z = seed ^ (salt * 0xbf58476d1ce4e5b9ull) ^
		     (k * 0x9e3779b97f4a7c15ull);

	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0;
}

int sv_fault_is_plan(const char *s, size_t len)
{
	return memchr(s, '=', len) != NULL;
}

/* --------------------------------------------------------- parsing -- */

static int num(const char *v, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long x;

	if (!*v || *v == '-' || *v == '+')
		return -1;
	errno = 0;
	x = strtoull(v, &end, 0);
	if (errno || *end || x > max)
		return -1;
	*out = x;
	return 0;
}

static int prob(const char *v, double *out)
{
	char *end;
	double x;

	if (!*v) {
		*out = 1;
		return 0;
	}
	x = strtod(v, &end);
	if (*end || !(x >= 0 && x <= 1))
		return -1;
	*out = x;
	return 0;
}

/* K, K-L or K+ */
static int range(char *v, uint64_t *lo, uint64_t *hi)
{
	size_t n = strlen(v);
	char *dash = strchr(v, '-');

	if (n && v[n - 1] == '+') {
		v[n - 1] = 0;
		if (num(v, UINT64_MAX, lo) || !*lo)
			return -1;
		*hi = UINT64_MAX;
		return 0;
	}
	if (dash) {
		*dash = 0;
		if (num(v, UINT64_MAX, lo) || num(dash + 1, UINT64_MAX, hi) ||
		    !*lo || *hi < *lo)
			return -1;
		return 0;
	}
	if (num(v, UINT64_MAX, lo) || !*lo)
		return -1;
	*hi = *lo;
	return 0;
}

static const char *skip_prefix(const char *v, const char *pre)
{
	size_t n = strlen(pre);

	return strncasecmp(v, pre, n) ? v : v + n;
}

#define WHY(...)                                                               \
	do {                                                                   \
		if (why_len)                                                   \
			snprintf(why, why_len, __VA_ARGS__);                   \
		return -EINVAL;                                                \
	} while (0)

static int field(struct sv_fault_plan *p, char *key, char *v, int *kinds,
		 char *why, size_t why_len)
{
	uint64_t x;
	size_t i;

	if (!strcmp(key, "qp")) {
		if (*v == '#') {
			if (num(v + 1, 1u << 24, &x) || !x)
				WHY("qp=#K: K is 1, 2, ... (the K-th QP created)");
			p->qp_ord = (uint32_t)x;
		} else {
			if (num(v, 0xffffff, &x))
				WHY("qp=N: N is a QP number (0..0xffffff)");
			p->qpn = (uint32_t)x;
		}
	} else if (!strcmp(key, "peer")) {
		if (num(v, 0xffffff, &x))
			WHY("peer=N: N is a QP number (0..0xffffff)");
		p->peer = (uint32_t)x;
	} else if (!strcmp(key, "gid")) {
		struct in_addr a4;

		if (inet_pton(AF_INET, v, &a4) == 1) {
			memset(p->gid, 0, 10);
			p->gid[10] = p->gid[11] = 0xff; /* IPv4-mapped */
			memcpy(p->gid + 12, &a4, 4);
		} else if (inet_pton(AF_INET6, v, p->gid) != 1) {
			WHY("gid=%s: a GID as IPv6 (or IPv4) text", v);
		}
		p->has_gid = 1;
	} else if (!strcmp(key, "drop") || !strcmp(key, "dup") ||
		   !strcmp(key, "reorder")) {
		if (prob(v, &p->p))
			WHY("%s=P: P is a probability, 0..1", key);
		p->pkt = key[0] == 'd' ? (key[1] == 'r' ? SV_FP_DROP : SV_FP_DUP) :
					 SV_FP_REORDER;
		p->kind = SV_FK_PACKET;
		(*kinds)++;
	} else if (!strcmp(key, "delay")) {
		char *end;
		double t;

		errno = 0;
		t = *v ? strtod(v, &end) : -1;
		if (t >= 0 && !errno) {
			if (!strcmp(end, "s"))
				t *= 1e9;
			else if (!strcmp(end, "ms"))
				t *= 1e6;
			else if (!*end || !strcmp(end, "us"))
				t *= 1e3;
			else
				t = -1;
		}
		if (!(t >= 1e3 && t <= 10e9))
			WHY("delay=T: T from 1us to 10s (a number of us, or "
			    "with us, ms or s)");
		p->delay_ns = (uint64_t)t;
		p->pkt = SV_FP_DELAY;
		if (!p->has_p)
			p->p = 1;
		p->kind = SV_FK_PACKET;
		(*kinds)++;
	} else if (!strcmp(key, "p")) {
		if (!*v || prob(v, &p->p))
			WHY("p=P: P is a probability, 0..1");
		p->has_p = 1;
	} else if (!strcmp(key, "nth")) {
		if (range(v, &p->lo, &p->hi))
			WHY("nth=K, K-L or K+ (K from 1)");
	} else if (!strcmp(key, "after")) {
		if (num(v, UINT64_MAX, &p->after))
			WHY("after=K: K is a count");
	} else if (!strcmp(key, "count")) {
		if (num(v, UINT32_MAX, &x) || !x)
			WHY("count=C: C is 1 or more");
		p->count = (uint32_t)x;
	} else if (!strcmp(key, "status")) {
		const char *n = skip_prefix(v, "IBV_WC_");

		for (i = 0; i < N_OF(statuses); i++)
			if (!strcasecmp(n, statuses[i].name))
				break;
		if (i == N_OF(statuses) || statuses[i].v == IBV_WC_SUCCESS)
			WHY("status=%s: not an IBV_WC_* error status", v);
		p->status = statuses[i].v;
		p->kind = SV_FK_STATUS;
		(*kinds)++;
	} else if (!strcmp(key, "recv")) {
		if (*v)
			WHY("recv takes no value");
		p->recv = 1;
	} else if (!strcmp(key, "event")) {
		const char *n = skip_prefix(v, "IBV_EVENT_");

		for (i = 0; i < N_OF(events); i++)
			if (!strcasecmp(n, events[i].name))
				break;
		if (i == N_OF(events))
			WHY("event=%s: not an IBV_EVENT_* name", v);
		p->event = events[i].v;
		p->kind = SV_FK_EVENT;
		(*kinds)++;
	} else if (!strcmp(key, "verb")) {
		const char *n = skip_prefix(v, "ibv_");

		for (i = 0; i < SV_FV_N; i++)
			if (!strcmp(n, verb_names[i] + 4))
				break;
		if (i == SV_FV_N)
			WHY("verb=%s: not one of the verbs a plan can fail "
			    "(docs/faults.md)", v);
		p->verb = (int32_t)i;
		p->kind = SV_FK_VERB;
		(*kinds)++;
	} else if (!strcmp(key, "errno")) {
		for (i = 0; i < N_OF(errnos); i++)
			if (!strcasecmp(v, errnos[i].name))
				break;
		if (i < N_OF(errnos))
			p->err = errnos[i].v;
		else if (!num(v, 4095, &x) && x)
			p->err = (int32_t)x;
		else
			WHY("errno=%s: an E* name or a positive number", v);
	} else if (!strcmp(key, "seed")) {
		if (num(v, UINT64_MAX, &p->seed))
			WHY("seed=N: N is a number");
		p->has_seed = 1;
	} else if (!strcmp(key, "id")) {
		if (num(v, UINT32_MAX, &x))
			WHY("id=N: N is a number");
		p->id = (uint32_t)x;
	} else {
		WHY("unknown key '%s'", key);
	}
	return 0;
}

int sv_fault_parse(const char *s, size_t len, struct sv_fault_plan *p,
		   char *why, size_t why_len)
{
	char buf[SV_FAULT_TEXT], *f, *next;
	int kinds = 0, err;

	memset(p, 0, sizeof(*p));
	p->qpn = p->peer = SV_FAULT_ANY;
	p->count = 1;
	while (len && (*s == ' ' || *s == '\t' || *s == '\n'))
		s++, len--;
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' ||
		       s[len - 1] == '\n'))
		len--;
	if (!len)
		WHY("empty plan");
	if (len >= sizeof(buf))
		WHY("plan longer than %d bytes", SV_FAULT_TEXT - 1);
	memcpy(buf, s, len);
	buf[len] = 0;
	for (f = buf; f; f = next) {
		/* A GID holds ':' itself: its field ends at ',' only. */
		char *eq;

		next = f + strcspn(f, strncmp(f, "gid=", 4) ? ",:" : ",");
		next = *next ? (*next = 0, next + 1) : NULL;
		if (!*f)
			continue;
		eq = strchr(f, '=');
		if (eq)
			*eq++ = 0;
		err = field(p, f, eq ? eq : (char *)"", &kinds, why, why_len);
		if (err)
			return err;
	}
	if (kinds > 1)
		WHY("one of drop/dup/reorder/delay/status/event/verb per plan");
	if (!kinds) {
		if (!p->has_seed)
			WHY("no action: drop, dup, reorder, delay, status, event or verb");
		p->kind = SV_FK_SEED;
	}
	if (p->qpn != SV_FAULT_ANY && p->qp_ord)
		WHY("qp=N or qp=#K, not both");
	if (p->has_gid && (p->qpn != SV_FAULT_ANY || p->qp_ord))
		WHY("gid= names the QP by its peer: not with qp=");
	if (p->kind == SV_FK_VERB) {
		if (!p->err)
			WHY("verb=%s needs errno=E...", verb_names[p->verb]);
		if (p->qpn != SV_FAULT_ANY || p->qp_ord ||
		    p->peer != SV_FAULT_ANY || p->has_gid)
			WHY("a verb plan names no QP");
		if (!p->lo)
			p->lo = p->hi = 1;
	} else if (p->err) {
		WHY("errno= belongs to verb= plans");
	}
	if ((p->kind == SV_FK_PACKET || p->kind == SV_FK_VERB) && p->after)
		WHY("after= belongs to status= and event= plans (else: nth=)");
	if ((p->kind == SV_FK_STATUS || p->kind == SV_FK_EVENT) && p->lo)
		WHY("nth= belongs to packet and verb plans (status, event: after=)");
	if (p->kind != SV_FK_STATUS && p->count != 1)
		WHY("count= belongs to status= plans");
	if (p->kind != SV_FK_STATUS && p->recv)
		WHY("recv belongs to status= plans");
	if (p->has_p && p->pkt != SV_FP_DELAY)
		WHY("p= belongs to delay= plans (drop=P, dup=P, reorder=P)");
	memcpy(p->text, s, len);
	p->text[len] = 0;
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Run-time fault plans (docs/faults.md, sv_proto_fault.h).  The daemon
 * keeps the list `softverbs fault add` builds, each plan bound to the
 * process it acts in: the one named, or the owner of the plan's qp=N
 * (QPNs are device-wide, so the daemon knows it).  It never runs a plan
 * itself: it tells that process's engine (SV_ENGINE_FAULT), whose progress
 * thread fetches its plans (SV_FAULT_SYNC) and runs them (eng_fault.c).
 * Plans of a process that is gone are dropped at the next look.  Each
 * firing a library reports (SV_FAULT_LOG) becomes one line of this log,
 * and so does each line of a process's misuse checker (SV_FAULT_CHECK).
 */
#include "svd_ops.h"
#include "svd_fault.h"
#include "sv_log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static struct sv_fault_ent plans[SV_FAULT_MAX_PLANS];
static uint32_t nplans, next_id = 1;

/* Drops the plans of processes that are gone (their engines too). */
static void prune(void)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i < nplans; i++)
		if (kill((pid_t)plans[i].pid, 0) == 0 || errno == EPERM)
			plans[j++] = plans[i];
	nplans = j;
}

static int add(const struct sv_fault_req *req, struct sv_fault_rep *rep)
{
	struct sv_fault_plan p;
	char why[128];
	pid_t pid = (pid_t)req->pid;
	int err;

	if (sv_fault_parse(req->text, strnlen(req->text, sizeof(req->text)),
			   &p, why, sizeof(why))) {
		sv_info("fault add: '%.*s': %s", (int)sizeof(req->text),
			req->text, why);
		return -EINVAL;
	}
	if (p.kind == SV_FK_SEED || p.id)
		return -EINVAL;
	if (!pid) {
		struct svd_qp *qp = p.qpn != SV_FAULT_ANY ?
					    svd_qp_by_qpn(p.qpn) :
					    NULL;

		if (p.qpn == SV_FAULT_ANY)
			return -EINVAL; /* no process named, no QP number */
		if (!qp)
			return -ESRCH;
		pid = qp->obj.owner_pid;
	}
	prune();
	if (nplans == SV_FAULT_MAX_PLANS)
		return -ENOSPC;
	plans[nplans].id = next_id;
	plans[nplans].pid = (uint32_t)pid;
	memcpy(plans[nplans].text, p.text, sizeof(plans[nplans].text));
	nplans++;
	err = svd_engine_fault_notify(pid);
	if (err) {
		nplans--; /* nothing kept */
		return err;
	}
	rep->id = next_id++;
	rep->pid = (uint32_t)pid;
	sv_warn("fault: plan %u added for pid %d: %s", rep->id, (int)pid,
		p.text);
	return 0;
}

static uint32_t clear(const struct sv_fault_req *req)
{
	uint32_t j = 0, n = 0;
	pid_t told[SV_FAULT_MAX_PLANS];
	uint32_t ntold = 0;

	for (uint32_t i = 0; i < nplans; i++) {
		int gone = req->id ? plans[i].id == req->id :
				     !req->pid || plans[i].pid == req->pid;

		if (!gone) {
			plans[j++] = plans[i];
			continue;
		}
		sv_warn("fault: plan %u (pid %u) cleared", plans[i].id,
			plans[i].pid);
		told[ntold++] = (pid_t)plans[i].pid;
		n++;
	}
	nplans = j;
	for (uint32_t i = 0; i < ntold; i++)
		svd_engine_fault_notify(told[i]);
	return n;
}

int svd_op_fault(struct svd_req *r)
{
	const struct sv_fault_req *req = r->body;
	struct sv_fault_rep *rep = r->rep;

	switch (req->cmd) {
	case SV_FAULT_ADD: {
		int err = add(req, rep);

		if (err)
			return err;
		break;
	}
	case SV_FAULT_LIST:
	case SV_FAULT_SYNC: {
		uint32_t pid = req->cmd == SV_FAULT_SYNC ? (uint32_t)r->conn->pid :
							   req->pid;

		prune();
		for (uint32_t i = 0; i < nplans; i++)
			if (!pid || plans[i].pid == pid)
				rep->ent[rep->n++] = plans[i];
		break;
	}
	case SV_FAULT_CLEAR:
		rep->n = clear(req);
		break;
	case SV_FAULT_LOG:
		sv_warn("fault: pid %d %.*s", (int)r->conn->pid,
			(int)sizeof(req->text), req->text);
		r->rep_len = 0;
		return 0;
	case SV_FAULT_CHECK:
		/* The checker's line as the process printed it (check.c). */
		sv_warn("softverbs-check: pid %d %.*s", (int)r->conn->pid,
			(int)sizeof(req->text), req->text);
		r->rep_len = 0;
		return 0;
	default:
		return -EINVAL;
	}
	r->rep_len = sizeof(*rep);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * softverbs fault add|list|clear: fault plans at run time (docs/faults.md).
 * The daemon keeps the plans and hands each to the process it acts in;
 * this command only checks the plan's grammar first, so a mistake is
 * named here, and talks to a running daemon (it starts none: a plan for a
 * process needs that process, and its daemon, up).
 */
#include "tool_int.h"
#include "sv_client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softverbs fault add [--pid PID] PLAN\n"
		"       softverbs fault list [--pid PID]\n"
		"       softverbs fault clear [ID | --pid PID | --all]\n"
		"\n"
		"  add    run PLAN in process PID, or (no --pid) in the process that\n"
		"         holds the plan's qp=N; prints the plan's number\n"
		"  list   the plans the daemon holds: number, process, plan\n"
		"  clear  drop plan ID, the plans of PID, or every plan\n"
		"\n"
		"A PLAN is comma-separated key=value fields, e.g.\n"
		"  qp=12,drop=0.1,seed=7          lose a tenth of QP 12's packets\n"
		"  qp=12,drop,nth=3               lose its 3rd packet only\n"
		"  qp=12,delay=5ms,p=0.1          a tenth of its packets 5 ms late\n"
		"  qp=12,status=RETRY_EXC_ERR,after=3   its 4th send completion fails\n"
		"  qp=12,status=LOC_LEN_ERR,recv  its next receive completion fails\n"
		"  qp=12,event=QP_FATAL           QP_FATAL now (the QP goes to ERR)\n"
		"  verb=ibv_reg_mr,errno=ENOMEM,nth=2   its 2nd ibv_reg_mr fails\n"
		"The same plans, ';'-separated, in SOFTVERBS_FAULT; docs/faults.md has\n"
		"every key.  The process needs a QP or an MR (an engine) to hear of a\n"
		"plan.  Exit 1 when the daemon refuses (no such QP or process: ESRCH).\n");
}

static int call(struct sv_fault_req *req, struct sv_fault_rep *rep)
{
	int err = sv_tool_probe();

	if (err == -ENODEV) {
		sv_tool_err("no daemon runs (no process uses the device)");
		return err;
	}
	if (err)
		return err;
	err = sv_call_simple(SV_OP_FAULT, 0, 0, -1, req, sizeof(*req), rep,
			     sizeof(*rep));
	if (err)
		sv_tool_err("fault: %s", strerror(-err));
	return err;
}

static uint32_t parse_pid(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (!*s || *end || !v || v > 0x7fffffff)
		sv_tool_usage_err("fault", "bad pid '%s'", s);
	return (uint32_t)v;
}

static int cmd_add(int argc, char **argv)
{
	struct sv_fault_req req = { .cmd = SV_FAULT_ADD };
	struct sv_fault_rep *rep = calloc(1, sizeof(*rep));
	struct sv_fault_plan p;
	const char *plan = NULL;
	char why[128], comm[64];
	int err;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--pid") && i + 1 < argc)
			req.pid = parse_pid(argv[++i]);
		else if (!plan && argv[i][0] != '-')
			plan = argv[i];
		else
			sv_tool_usage_err("fault", "unexpected '%s'", argv[i]);
	}
	if (!plan)
		sv_tool_usage_err("fault", "add: which PLAN?");
	if (sv_fault_parse(plan, strlen(plan), &p, why, sizeof(why)))
		sv_tool_usage_err("fault", "plan '%s': %s", plan, why);
	if (p.kind == SV_FK_SEED)
		sv_tool_usage_err("fault", "plan '%s' does nothing (seed= goes "
					   "with an action)", plan);
	if (!req.pid && p.qpn == SV_FAULT_ANY)
		sv_tool_usage_err("fault", "plan '%s' names no QP number: give "
					   "--pid PID", plan);
	if (!rep)
		return 1;
	memcpy(req.text, p.text, sizeof(p.text));
	err = call(&req, rep);
	if (err == -ESRCH)
		sv_tool_err("no process of the device holds %s", req.pid ?
			    "that pid's engine (it needs a QP or an MR)" :
			    "that QP");
	if (!err) {
		sv_tool_comm(rep->pid, comm, sizeof(comm));
		printf("plan %u: pid %u (%s): %s\n", rep->id, rep->pid, comm,
		       req.text);
	}
	free(rep);
	return err ? 1 : 0;
}

static int cmd_list(int argc, char **argv)
{
	struct sv_fault_req req = { .cmd = SV_FAULT_LIST };
	struct sv_fault_rep *rep = calloc(1, sizeof(*rep));
	char comm[64];
	int err;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--pid") && i + 1 < argc)
			req.pid = parse_pid(argv[++i]);
		else
			sv_tool_usage_err("fault", "unexpected '%s'", argv[i]);
	}
	if (!rep)
		return 1;
	err = call(&req, rep);
	if (!err && rep->n <= SV_FAULT_MAX_PLANS) {
		printf("%-4s %-8s %-16s %s\n", "ID", "PID", "COMMAND", "PLAN");
		for (uint32_t i = 0; i < rep->n; i++) {
			rep->ent[i].text[SV_FAULT_TEXT - 1] = 0;
			sv_tool_comm(rep->ent[i].pid, comm, sizeof(comm));
			printf("%-4u %-8u %-16s %s\n", rep->ent[i].id,
			       rep->ent[i].pid, comm, rep->ent[i].text);
		}
	}
	free(rep);
	return err ? 1 : 0;
}

static int cmd_clear(int argc, char **argv)
{
	struct sv_fault_req req = { .cmd = SV_FAULT_CLEAR };
	struct sv_fault_rep *rep = calloc(1, sizeof(*rep));
	int err, all = 0;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--pid") && i + 1 < argc)
			req.pid = parse_pid(argv[++i]);
		else if (!strcmp(argv[i], "--all"))
			all = 1;
		else if (!req.id && argv[i][0] != '-')
			req.id = parse_pid(argv[i]);
		else
			sv_tool_usage_err("fault", "unexpected '%s'", argv[i]);
	}
	if (!all && !req.id && !req.pid)
		sv_tool_usage_err("fault", "clear: ID, --pid PID or --all");
	if (!rep)
		return 1;
	err = call(&req, rep);
	if (!err)
		printf("%u plan%s cleared\n", rep->n, rep->n == 1 ? "" : "s");
	if (!err && req.id && !rep->n) {
		sv_tool_err("no plan %u", req.id);
		err = -ENOENT;
	}
	free(rep);
	return err ? 1 : 0;
}

int sv_cmd_fault(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (sv_tool_is_help(argv[1])) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "add"))
		return cmd_add(argc - 2, argv + 2);
	if (!strcmp(argv[1], "list"))
		return cmd_list(argc - 2, argv + 2);
	if (!strcmp(argv[1], "clear"))
		return cmd_clear(argc - 2, argv + 2);
	sv_tool_usage_err("fault", "unknown subcommand '%s'", argv[1]);
}

/* SPDX-License-Identifier: MIT */
/*
 * softverbs res show [TYPE] [--json]: the live ufiles and objects, like
 * iproute2's `rdma resource show`.  Pages through SV_OP_RES_LIST.  Never
 * starts the daemon: with none running there is nothing to show.
 */
#include "tool_int.h"
#include "sv_client.h"
#include "sv_fault.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static const char *const type_names[] = {
	[SV_RES_UFILE] = "ufile", [SV_RES_PD] = "pd",	[SV_RES_MR] = "mr",
	[SV_RES_DM] = "dm",	  [SV_RES_MW] = "mw",	[SV_RES_CQ] = "cq",
	[SV_RES_QP] = "qp",	  [SV_RES_SRQ] = "srq", [SV_RES_AH] = "ah",
	[SV_RES_CM_ID] = "cm_id", [SV_RES_XRCD] = "xrcd",
};
#define NTYPES (sizeof(type_names) / sizeof(type_names[0]))

static const struct {
	unsigned int bit;
	const char *name;
} access_names[] = {
	{ IBV_ACCESS_LOCAL_WRITE, "LOCAL_WRITE" },
	{ IBV_ACCESS_REMOTE_WRITE, "REMOTE_WRITE" },
	{ IBV_ACCESS_REMOTE_READ, "REMOTE_READ" },
	{ IBV_ACCESS_REMOTE_ATOMIC, "REMOTE_ATOMIC" },
	{ IBV_ACCESS_MW_BIND, "MW_BIND" },
	{ IBV_ACCESS_ZERO_BASED, "ZERO_BASED" },
	{ IBV_ACCESS_ON_DEMAND, "ON_DEMAND" },
	{ IBV_ACCESS_HUGETLB, "HUGETLB" },
	{ 1u << 8, "FLUSH_GLOBAL" },
	{ 1u << 9, "FLUSH_PERSISTENT" },
	{ IBV_ACCESS_RELAXED_ORDERING, "RELAXED_ORDERING" },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softverbs res show [ufile|pd|mr|dm|mw|cq|qp|srq|ah|xrcd|cm_id] [--json]\n"
		"\n"
		"One line per live object of every process on this device, like\n"
		"'rdma resource show': its ufile (one per ibv_open_device), handle,\n"
		"owner pid and command, and for MRs the keys, PD, access, iova and\n"
		"length, for QPs the QPN and the last error completion its process's\n"
		"misuse checker polled (SOFTVERBS_CHECK=1: status, wr_id, diagnosis);\n"
		"cm_id rows are rdma_cm ids (port space, state, port).\n"
		"--json prints a JSON array of the same rows.\n");
}

static const char *type_name(uint32_t t)
{
	return t < NTYPES && type_names[t] ? type_names[t] : "?";
}

/* "LOCAL_WRITE,REMOTE_READ", or "0"; unknown bits as hex. */
static void access_str(uint32_t acc, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < sizeof(access_names) / sizeof(access_names[0]); i++) {
		if (!(acc & access_names[i].bit))
			continue;
		acc &= ~access_names[i].bit;
		n += snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? "," : "",
			      access_names[i].name);
	}
	if (acc || !n)
		snprintf(buf + n, n < len ? len - n : 0, "%s%#x", n ? "," : "",
			 acc);
}

static int is_mr_like(uint32_t t)
{
	return t == SV_RES_MR || t == SV_RES_MW;
}

/* rdma_cm ids, in the words of iproute2's `rdma res show cm_id`. */
static const char *cm_state_str(uint32_t s)
{
	static const char *const n[] = { "IDLE", "ADDR_QUERY", "ADDR_RESOLVED",
					 "ROUTE_QUERY", "ROUTE_RESOLVED",
					 "CONNECT", "DISCONNECT", "ADDR_BOUND",
					 "LISTEN", "DEVICE_REMOVAL",
					 "DESTROYING" };

	return s < sizeof(n) / sizeof(n[0]) ? n[s] : "?";
}

static const char *cm_ps_str(uint32_t ps)
{
	switch (ps) {
	case 0x0106: return "TCP";
	case 0x0111: return "UDP";
	case 0x0002: return "IPOIB";
	case 0x013f: return "IB";
	}
	return "?";
}

static void print_cm_row(const char *dev, const struct sv_res_entry *e,
			 const char *comm)
{
	printf("dev %s cm_id handle %#x channel %#x ps %s state %s qp-type %s port %u",
	       dev, e->handle, e->ufile, cm_ps_str(e->pd_handle),
	       cm_state_str(e->access), e->flags == IBV_QPT_UD ? "UD" : "RC",
	       e->lkey);
	if (e->rkey)
		printf(" qpn %u", e->rkey);
	printf(" pid %u comm %s\n", e->owner_pid, comm);
}

/* The last error completion of a QP row that has one (res flags bit 1:
 * its process's checker told the daemon, SV_OP_QP_ERR_GET): 0 and *out,
 * or -1 when the row has none (or the QP went meanwhile). */
static int last_err(const struct sv_res_entry *e, struct sv_qp_err *out)
{
	struct sv_qp_err_get_req req = { .ufile = e->ufile,
					 .handle = e->handle };
	struct sv_call c = { .op = SV_OP_QP_ERR_GET,
			     .attach_fd = -1,
			     .req = &req,
			     .req_len = sizeof(req),
			     .rep = out,
			     .rep_cap = sizeof(*out) };

	if (e->type != SV_RES_QP || !(e->flags & 2))
		return -1;
	if (sv_call(&c) || c.rep_len != sizeof(*out))
		return -1;
	out->diag[sizeof(out->diag) - 1] = 0;
	return 0;
}

static void print_row(const char *dev, const struct sv_res_entry *e)
{
	char comm[64], acc[256];
	struct sv_qp_err le;

	sv_tool_comm(e->owner_pid, comm, sizeof(comm));
	if (e->type == SV_RES_CM_ID) {
		print_cm_row(dev, e, comm);
		return;
	}
	printf("dev %s ufile %#x %s", dev, e->ufile, type_name(e->type));
	if (e->type != SV_RES_UFILE)
		printf(" handle %u", e->handle);
	if (is_mr_like(e->type))
		printf(" lkey %#x rkey %#x", e->lkey, e->rkey);
	if (e->pd_handle != UINT32_MAX)
		printf(" pd %u", e->pd_handle);
	if (is_mr_like(e->type)) {
		access_str(e->access, acc, sizeof(acc));
		printf(" access %s iova %#llx", acc, (unsigned long long)e->iova);
	}
	if (e->length || is_mr_like(e->type) || e->type == SV_RES_DM)
		printf(" length %llu", (unsigned long long)e->length);
	if (e->type == SV_RES_MR && e->flags & 1)
		printf(" dm");
	if (e->type == SV_RES_MR && e->flags & 2)
		printf(" dmabuf");
	if (e->type == SV_RES_MR && e->flags & 4)
		printf(" null");
	if (e->type == SV_RES_XRCD)
		printf(" xrcd %u%s handles %u", e->lkey,
		       e->flags & 1 ? " inode" : "", e->rkey);
	if (e->type == SV_RES_SRQ && e->flags & 1)
		printf(" xrc srqn %#x xrcd %u", e->lkey, e->rkey);
	if (e->type == SV_RES_QP)
		printf(" qpn %#x%s", e->lkey, e->flags & 4 ? " opened" : "");
	printf(" %s %u pid %u comm %s",
	       e->type == SV_RES_UFILE ? "objects" : "users", e->usecnt,
	       e->owner_pid, comm);
	if (!last_err(e, &le)) {
		printf(" last-err IBV_WC_%s wr_id %#llx vendor_err %#x",
		       sv_fault_status_name((int)le.status),
		       (unsigned long long)le.wr_id, le.vendor_err);
		if (le.diag[0])
			printf(" diag %s", le.diag);
	}
	printf("\n");
}

static void print_json_row(const char *dev, const struct sv_res_entry *e,
			   int first)
{
	char comm[64], acc[256];
	struct sv_qp_err le;

	sv_tool_comm(e->owner_pid, comm, sizeof(comm));
	access_str(e->access, acc, sizeof(acc));
	printf("%s{\"dev\": ", first ? "" : ",\n ");
	sv_tool_json_str(stdout, dev);
	printf(", \"type\": \"%s\", \"ufile\": %u, \"handle\": %u, \"pid\": %u, \"comm\": ",
	       type_name(e->type), e->ufile, e->handle, e->owner_pid);
	sv_tool_json_str(stdout, comm);
	printf(", \"lkey\": %u, \"rkey\": %u, \"pd\": ", e->lkey, e->rkey);
	if (e->pd_handle == UINT32_MAX)
		printf("null");
	else
		printf("%u", e->pd_handle);
	printf(", \"access\": %u, \"access_flags\": ", e->access);
	sv_tool_json_str(stdout, e->access ? acc : "");
	printf(", \"iova\": %llu, \"length\": %llu, \"users\": %u, \"flags\": %u",
	       (unsigned long long)e->iova, (unsigned long long)e->length,
	       e->usecnt, e->flags);
	if (!last_err(e, &le)) {
		char st[64];

		snprintf(st, sizeof(st), "IBV_WC_%s",
			 sv_fault_status_name((int)le.status));
		printf(", \"last_err\": {\"status\": ");
		sv_tool_json_str(stdout, st);
		printf(", \"wr_id\": %llu, \"vendor_err\": %u, \"diag\": ",
		       (unsigned long long)le.wr_id, le.vendor_err);
		sv_tool_json_str(stdout, le.diag);
		printf("}");
	}
	printf("}");
}

static int show(uint32_t type, int json)
{
	static struct sv_res_rep rep;
	struct sv_res_req req = { .type = type };
	struct sv_device_info info;
	int err, rows = 0, cm_pass = 0;

	err = sv_tool_probe();
	if (err == -ENODEV) {
		if (json)
			printf("[]\n");
		sv_tool_err("daemon not running (socket %s): no resources",
			    sv_tool_socket_where());
		return 0;
	}
	if (err)
		return 1;
	err = sv_call_simple(SV_OP_DEVICE_INFO, 0, 0, -1, NULL, 0, &info,
			     sizeof(info));
	if (err) {
		sv_tool_err("device query failed: %s", strerror(-err));
		return 1;
	}
	info.name[sizeof(info.name) - 1] = 0;
	if (json)
		printf("[");
	do {
		struct sv_call c = { .op = SV_OP_RES_LIST,
				     .attach_fd = -1,
				     .req = &req,
				     .req_len = sizeof(req),
				     .rep = &rep,
				     .rep_cap = sizeof(rep) };

		err = sv_call(&c);
		if (!err && (c.rep_len < offsetof(struct sv_res_rep, e) ||
			     rep.count > SV_RES_PER_MSG ||
			     c.rep_len != offsetof(struct sv_res_rep, e) +
						  rep.count * sizeof(rep.e[0])))
			err = -EPROTO;
		if (err) {
			if (json)
				printf("]\n");
			sv_tool_err("listing resources failed: %s",
				    strerror(-err));
			return 1;
		}
		for (uint32_t i = 0; i < rep.count; i++, rows++) {
			if (json)
				print_json_row(info.name, &rep.e[i], rows == 0);
			else
				print_row(info.name, &rep.e[i]);
		}
		if (rep.more && req.cursor_ufile == rep.next_ufile &&
		    req.cursor_handle == rep.next_handle)
			break; /* no progress: never loop on a broken daemon */
		req.cursor_ufile = rep.next_ufile;
		req.cursor_handle = rep.next_handle;
		/* Everything: the rdma_cm ids come in a second pass. */
		if (!rep.more && !type && !cm_pass) {
			cm_pass = 1;
			memset(&req, 0, sizeof(req));
			req.type = SV_RES_CM_ID;
			rep.more = 1;
		}
	} while (rep.more);
	if (json)
		printf("]\n");
	return 0;
}

int sv_cmd_res(int argc, char **argv)
{
	uint32_t type = 0;
	int json = 0, i = 1;

	if (i < argc && sv_tool_is_help(argv[i])) {
		usage(stdout);
		return 0;
	}
	if (i < argc && !strcmp(argv[i], "show"))
		i++;
	else if (i < argc && argv[i][0] != '-')
		sv_tool_usage_err("res", "unknown subcommand '%s'", argv[i]);
	for (; i < argc; i++) {
		if (sv_tool_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j")) {
			json = 1;
			continue;
		}
		if (type)
			sv_tool_usage_err("res", "one type at a time ('%s')",
					  argv[i]);
		for (uint32_t t = 1; t < NTYPES; t++)
			if (type_names[t] && !strcmp(argv[i], type_names[t]))
				type = t;
		if (!type)
			sv_tool_usage_err("res", "unknown resource type '%s'",
					  argv[i]);
	}
	return show(type, json);
}

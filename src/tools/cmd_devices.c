/* SPDX-License-Identifier: MIT */
/*
 * softverbs devices: ibv_devices plus port state and GIDs.
 *
 * Asks the daemon directly (DEVICE_INFO, QUERY_PORT, QUERY_GIDS) rather
 * than through libibverbs: this command links only the control channel, so
 * it shows what the device says even when LD_LIBRARY_PATH would load
 * rdma-core's library, and it needs no context (no ufile is created just
 * to look).  Like any verbs program, it starts the daemon if needed.
 */
#include "tool_int.h"
#include "sv_client.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <net/if.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softverbs devices [--json]\n"
		"\n"
		"Lists the softverbs devices like ibv_devices, with each port's state,\n"
		"link layer, active MTU and GID table (the slots in use, with their\n"
		"indices: a slot whose address went away stays empty and is not shown).\n"
		"Starts the daemon if needed.\n"
		"--json prints a JSON array of devices with the same data.\n");
}

static const char *port_state_str(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_NOP: return "PORT_NOP";
	case IBV_PORT_DOWN: return "PORT_DOWN";
	case IBV_PORT_INIT: return "PORT_INIT";
	case IBV_PORT_ARMED: return "PORT_ARMED";
	case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
	case IBV_PORT_ACTIVE_DEFER: return "PORT_ACTIVE_DEFER";
	}
	return "invalid";
}

static const char *link_layer_str(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
	}
	return "Unknown";
}

static const char *gid_type_str(uint32_t t)
{
	switch (t) {
	case IBV_GID_TYPE_IB: return "IB";
	case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
	}
	return "?";
}

/* Port attributes and GID table from the daemon; 0 or 1 (reported). */
static int query_port(uint32_t port, struct ibv_port_attr *pa,
		      struct sv_gid_table *tbl)
{
	struct sv_port_req req = { .port = port };
	int err;

	err = sv_call_simple(SV_OP_QUERY_PORT, 0, 0, -1, &req, sizeof(req), pa,
			     sizeof(*pa));
	if (err) {
		sv_tool_err("port %u: query failed: %s", port, strerror(-err));
		return 1;
	}
	err = sv_call_simple(SV_OP_QUERY_GIDS, 0, 0, -1, &req, sizeof(req),
			     tbl, sizeof(*tbl));
	if (err) {
		sv_tool_err("port %u: GID query failed: %s", port, strerror(-err));
		return 1;
	}
	if (tbl->count > SV_GID_TBL_LEN)
		tbl->count = SV_GID_TBL_LEN;
	return 0;
}

static int mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128 << mtu : 0;
}

/* The entry's address and interface name ("" when it has none). */
static void gid_strings(const struct ibv_gid_entry *e,
			char addr[INET6_ADDRSTRLEN], char ifname[IF_NAMESIZE])
{
	ifname[0] = 0;
	if (!inet_ntop(AF_INET6, e->gid.raw, addr, INET6_ADDRSTRLEN))
		snprintf(addr, INET6_ADDRSTRLEN, "?");
	if (e->ndev_ifindex && !if_indextoname(e->ndev_ifindex, ifname))
		snprintf(ifname, IF_NAMESIZE, "#%u", e->ndev_ifindex);
}

static int show_port(uint32_t port)
{
	struct ibv_port_attr pa;
	struct sv_gid_table tbl;

	if (query_port(port, &pa, &tbl))
		return 1;
	printf("\tport %u: %s, %s, active_mtu %d (max %d)\n", port,
	       port_state_str(pa.state), link_layer_str(pa.link_layer),
	       mtu_bytes(pa.active_mtu), mtu_bytes(pa.max_mtu));
	for (uint32_t i = 0; i < tbl.count; i++) {
		const struct ibv_gid_entry *e = &tbl.entries[i];
		char addr[INET6_ADDRSTRLEN], ifname[IF_NAMESIZE];

		if (!sv_gid_valid(&tbl, i))
			continue; /* an empty slot: its address went away */
		gid_strings(e, addr, ifname);
		printf("\t\tGID[%3u]: %-40s %-8s %s\n", e->gid_index, addr,
		       gid_type_str(e->gid_type), ifname);
	}
	return 0;
}

/* One port object; a port that cannot be queried is left out (reported). */
static int show_port_json(uint32_t port, int first)
{
	struct ibv_port_attr pa;
	struct sv_gid_table tbl;

	if (query_port(port, &pa, &tbl))
		return 1;
	printf("%s{\"port\": %u, \"state\": ", first ? "" : ", ", port);
	sv_tool_json_str(stdout, port_state_str(pa.state));
	printf(", \"link_layer\": ");
	sv_tool_json_str(stdout, link_layer_str(pa.link_layer));
	printf(", \"active_mtu\": %d, \"max_mtu\": %d, \"gids\": [",
	       mtu_bytes(pa.active_mtu), mtu_bytes(pa.max_mtu));
	for (uint32_t i = 0, n = 0; i < tbl.count; i++) {
		const struct ibv_gid_entry *e = &tbl.entries[i];
		char addr[INET6_ADDRSTRLEN], ifname[IF_NAMESIZE];

		if (!sv_gid_valid(&tbl, i))
			continue;
		gid_strings(e, addr, ifname);
		printf("%s\n    {\"index\": %u, \"gid\": ", n++ ? "," : "",
		       e->gid_index);
		sv_tool_json_str(stdout, addr);
		printf(", \"type\": ");
		sv_tool_json_str(stdout, gid_type_str(e->gid_type));
		printf(", \"interface\": ");
		if (ifname[0])
			sv_tool_json_str(stdout, ifname);
		else
			printf("null");
		printf("}");
	}
	printf("]}");
	return 0;
}

int sv_cmd_devices(int argc, char **argv)
{
	struct sv_device_info info;
	int err, rc = 0, json = 0, shown = 0;

	for (int i = 1; i < argc; i++) {
		if (sv_tool_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j")) {
			json = 1;
			continue;
		}
		sv_tool_usage_err("devices", "unexpected argument '%s'", argv[i]);
	}
	err = sv_call_simple(SV_OP_DEVICE_INFO, 0, 0, -1, NULL, 0, &info,
			     sizeof(info));
	if (err) {
		if (err != -EACCES)
			sv_tool_err("no device: the daemon cannot be reached: %s",
				    strerror(-err));
		return 1;
	}
	info.name[sizeof(info.name) - 1] = 0;
	if (json) {
		/* An array, like ibv_get_device_list(), though there is one. */
		printf("[{\"name\": ");
		sv_tool_json_str(stdout, info.name);
		printf(", \"node_guid\": \"%016llx\", \"ports\": [\n  ",
		       (unsigned long long)be64toh(info.node_guid));
		for (uint32_t p = 1; p <= info.num_ports && p <= 255; p++) {
			err = show_port_json(p, !shown);
			shown += !err;
			rc |= err;
		}
		printf("]}]\n");
		return rc;
	}
	printf("    %-16s\t   node GUID\n", "device");
	printf("    %-16s\t----------------\n", "------");
	printf("    %-16s\t%016llx\n", info.name,
	       (unsigned long long)be64toh(info.node_guid));
	for (uint32_t p = 1; p <= info.num_ports && p <= 255; p++)
		rc |= show_port(p);
	return rc;
}

/* SPDX-License-Identifier: MIT */
/*
 * What the device says, for the commands that describe it without a
 * verbs context (`softverbs run`'s sysfs tree, `softverbs rdma`): asked of
 * the daemon directly, as `softverbs devices` does.
 */
#include "tool_int.h"
#include "sv_client.h"

#include <endian.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int sv_tool_dev_query(struct sv_tool_dev *di)
{
	struct sv_port_req pr = { .port = 1 };
	int err;

	memset(di, 0, sizeof(*di));
	err = sv_call_simple(SV_OP_DEVICE_INFO, 0, 0, -1, NULL, 0, &di->dev,
			     sizeof(di->dev));
	if (!err)
		err = sv_call_simple(SV_OP_QUERY_DEVICE, 0, 0, -1, NULL, 0,
				     &di->attr, sizeof(di->attr));
	if (!err)
		err = sv_call_simple(SV_OP_QUERY_PORT, 0, 0, -1, &pr, sizeof(pr),
				     &di->port, sizeof(di->port));
	if (!err)
		err = sv_call_simple(SV_OP_QUERY_GIDS, 0, 0, -1, &pr, sizeof(pr),
				     &di->gids, sizeof(di->gids));
	di->dev.name[sizeof(di->dev.name) - 1] = 0;
	if (di->gids.count > SV_GID_TBL_LEN)
		di->gids.count = SV_GID_TBL_LEN;
	return err;
}

void sv_tool_guid_str(char *out, size_t len, __be64 guid)
{
	uint64_t g = be64toh(guid);

	snprintf(out, len, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff,
		 (unsigned)g & 0xffff);
}

static int is_loopback(const char *ifname)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), lo = 0;

	if (fd < 0)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
		lo = !!(ifr.ifr_flags & IFF_LOOPBACK);
	close(fd);
	return lo;
}

int sv_tool_port_netdev(const struct sv_tool_dev *di, char *ifname)
{
	unsigned int first = 0;
	char name[IF_NAMESIZE];

	ifname[0] = 0;
	for (uint32_t i = 0; i < di->gids.count; i++) {
		unsigned int idx = di->gids.entries[i].ndev_ifindex;

		if (!sv_gid_valid(&di->gids, i) || !idx ||
		    !if_indextoname(idx, name))
			continue;
		if (!is_loopback(name)) {
			memcpy(ifname, name, IF_NAMESIZE);
			return (int)idx;
		}
		if (!first) {
			first = idx;
			memcpy(ifname, name, IF_NAMESIZE);
		}
	}
	return (int)first;
}

/* SPDX-License-Identifier: MIT */
/*
 * The port's GID table with stable slots, and the interfaces under it
 * (svd_port.h).  Pure bookkeeping: port.c does the I/O.
 *
 * The kernel's ib cache (drivers/infiniband/core/cache.c) is the model:
 * a GID is keyed by its value, type and netdev (find_gid with
 * GID_ATTR_FIND_MASK_GID | _GID_TYPE | _NETDEV), an add takes the first
 * free entry (find_gid's `empty`), a delete frees its entry and moves
 * nothing (del_gid), a netdev's removal frees all of its entries
 * (ib_cache_gid_del_all_netdev_gids).  Every GID here is RoCE v2, so the
 * key is (GID, ifindex).
 */
#include "svd_port.h"

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sv_param.h"

static const uint8_t lo4_gid[16] = { [10] = 0xff, [11] = 0xff, [12] = 127,
				     [15] = 1 };
#define LO_IFINDEX 1 /* loopback is registered first in every namespace */

static int slot_find(const struct svd_port_tab *t, const uint8_t gid[16],
		     uint32_t ifindex)
{
	for (int i = 0; i < SV_GID_TBL_LEN; i++)
		if (t->slot[i].used && t->slot[i].ifindex == ifindex &&
		    !memcmp(t->slot[i].gid, gid, 16))
			return i;
	return -1;
}

static int slot_put(struct svd_port_tab *t, const uint8_t gid[16],
		    uint32_t ifindex)
{
	if (slot_find(t, gid, ifindex) >= 0)
		return 0;
	for (int i = 0; i < SV_GID_TBL_LEN; i++) {
		struct svd_gid_slot *s = &t->slot[i];

		if (s->used)
			continue;
		memcpy(s->gid, gid, 16);
		s->ifindex = ifindex;
		s->used = 1;
		s->pinned = 0;
		return 1;
	}
	return -ENOSPC;
}

static void slot_clear(struct svd_gid_slot *s)
{
	memset(s, 0, sizeof(*s));
}

int svd_ptab_addr_add(struct svd_port_tab *t, const struct svd_port_addr *a)
{
	return slot_put(t, a->gid, a->ifindex);
}

int svd_ptab_addr_del(struct svd_port_tab *t, const struct svd_port_addr *a)
{
	int i = slot_find(t, a->gid, a->ifindex);

	if (i < 0 || t->slot[i].pinned)
		return 0;
	slot_clear(&t->slot[i]);
	return 1;
}

static struct svd_port_link *link_find(const struct svd_port_tab *t,
				       uint32_t ifindex)
{
	for (uint32_t i = 0; i < t->nlinks; i++)
		if (t->links[i].ifindex == ifindex)
			return &t->links[i];
	return NULL;
}

int svd_ptab_link_set(struct svd_port_tab *t, const struct svd_port_link *l)
{
	struct svd_port_link *k = link_find(t, l->ifindex);

	if (!k) {
		if (t->nlinks == t->caplinks) {
			uint32_t cap = t->caplinks ? 2 * t->caplinks : 16;
			void *p = realloc(t->links, cap * sizeof(*t->links));

			if (!p)
				return -ENOMEM;
			t->links = p;
			t->caplinks = cap;
		}
		k = &t->links[t->nlinks++];
		k->ifindex = l->ifindex;
		k->mtu = 0;
	}
	if (l->mtu)
		k->mtu = l->mtu;
	k->flags = l->flags;
	return 0;
}

int svd_ptab_link_del(struct svd_port_tab *t, uint32_t ifindex)
{
	struct svd_port_link *k = link_find(t, ifindex);
	int n = 0;

	if (k)
		*k = t->links[--t->nlinks];
	for (int i = 0; i < SV_GID_TBL_LEN; i++) {
		struct svd_gid_slot *s = &t->slot[i];

		if (s->used && !s->pinned && s->ifindex == ifindex) {
			slot_clear(s);
			n++;
		}
	}
	return n;
}

/*
 * Where a new address goes in a table built from scratch (the order the
 * table has always had): 0 IPv4 of real interfaces, so that GID 0 is
 * routable between hosts; 1 loopback IPv4, then 127.0.0.1; 2 IPv6 global;
 * 3 IPv6 link-local; 4 IPv6 loopback.
 */
static int addr_pass(const struct svd_port_addr *a,
		     const struct svd_port_link *l, uint32_t nl)
{
	int lo = 0;

	for (uint32_t i = 0; i < nl; i++)
		if (l[i].ifindex == a->ifindex)
			lo = (l[i].flags & IFF_LOOPBACK) != 0;
	if (a->family == AF_INET)
		return lo ? 1 : 0;
	if (lo)
		return 4;
	/* fe80::/10 */
	return a->gid[0] == 0xfe && (a->gid[1] & 0xc0) == 0x80 ? 3 : 2;
}

static int in_list(const struct svd_port_addr *a, uint32_t na,
		   const struct svd_gid_slot *s)
{
	for (uint32_t i = 0; i < na; i++)
		if (a[i].ifindex == s->ifindex && !memcmp(a[i].gid, s->gid, 16))
			return 1;
	return 0;
}

int svd_ptab_reconcile(struct svd_port_tab *t, const struct svd_port_addr *a,
		       uint32_t na, const struct svd_port_link *l, uint32_t nl)
{
	struct svd_port_link *links = NULL;
	int changed = 0, r;

	if (nl) {
		links = malloc(nl * sizeof(*links));
		if (!links)
			return -ENOMEM;
		memcpy(links, l, nl * sizeof(*links));
	}
	free(t->links);
	t->links = links;
	t->nlinks = t->caplinks = nl;

	for (int i = 0; i < SV_GID_TBL_LEN; i++) {
		struct svd_gid_slot *s = &t->slot[i];

		if (s->used && !s->pinned && !in_list(a, na, s)) {
			slot_clear(s);
			changed++;
		}
	}
	for (int pass = 0; pass < 5; pass++) {
		for (uint32_t i = 0; i < na; i++) {
			if (addr_pass(&a[i], l, nl) != pass)
				continue;
			r = slot_put(t, a[i].gid, a[i].ifindex);
			changed += r > 0;
		}
		if (pass == 1) {
			/* Loopback may be down in a fresh namespace: the
			 * device still answers on 127.0.0.1, always. */
			r = slot_put(t, lo4_gid, LO_IFINDEX);
			changed += r > 0;
			if (r >= 0)
				t->slot[slot_find(t, lo4_gid, LO_IFINDEX)]
					.pinned = 1;
		}
	}
	return changed;
}

uint32_t svd_ptab_rxe_mtu(uint32_t netdev_mtu)
{
	/* rxe_set_mtu: eth_mtu_int_to_enum (the largest IB MTU that fits
	 * after RXE_MAX_HDR_LENGTH), IB_MTU_256 when none, at most 4096. */
	uint32_t m = netdev_mtu > SV_ROCE_MAX_HDR ?
			     netdev_mtu - SV_ROCE_MAX_HDR : 0;

	return m >= 4096 ? IBV_MTU_4096 : m >= 2048 ? IBV_MTU_2048 :
	       m >= 1024 ? IBV_MTU_1024 : m >= 512 ? IBV_MTU_512 :
						   IBV_MTU_256;
}

static int holds_address(const struct svd_port_tab *t, uint32_t ifindex)
{
	for (int i = 0; i < SV_GID_TBL_LEN; i++)
		if (t->slot[i].used && t->slot[i].ifindex == ifindex)
			return 1;
	return 0;
}

uint32_t svd_ptab_active_mtu(const struct svd_port_tab *t)
{
	uint32_t best = IBV_MTU_4096;

	for (uint32_t i = 0; i < t->nlinks; i++) {
		const struct svd_port_link *k = &t->links[i];
		uint32_t m;

		if (!(k->flags & IFF_UP) || (k->flags & IFF_LOOPBACK) ||
		    !k->mtu || !holds_address(t, k->ifindex))
			continue;
		m = svd_ptab_rxe_mtu(k->mtu);
		if (m < best)
			best = m;
	}
	return best;
}

uint32_t svd_ptab_link_mtu(const struct svd_port_tab *t, uint32_t ifindex)
{
	const struct svd_port_link *k = link_find(t, ifindex);

	return k ? k->mtu : 0;
}

uint32_t svd_ptab_ngids(const struct svd_port_tab *t)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < SV_GID_TBL_LEN; i++)
		if (t->slot[i].used)
			n = i + 1;
	return n;
}

void svd_ptab_free(struct svd_port_tab *t)
{
	free(t->links);
	memset(t, 0, sizeof(*t));
}

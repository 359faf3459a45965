/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the port's GID table (src/daemon/port_tab.c): the order of
 * a table built from scratch, slots that never move, the first empty slot
 * for a new address, the pinned 127.0.0.1, a full table, an interface's
 * removal, a resync that keeps what stays, and the active MTU rxe's way.
 */
#include "svd_port.h"
#include "unit_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define UP (IFF_UP)
#define LO (IFF_UP | IFF_LOOPBACK)

static struct svd_port_addr A(const char *ip, uint32_t ifindex)
{
	struct svd_port_addr a;
	uint8_t b[16];

	memset(&a, 0, sizeof(a));
	a.ifindex = ifindex;
	if (inet_pton(AF_INET, ip, b) == 1) {
		a.family = AF_INET;
		a.gid[10] = a.gid[11] = 0xff;
		memcpy(a.gid + 12, b, 4);
	} else if (inet_pton(AF_INET6, ip, b) == 1) {
		a.family = AF_INET6;
		memcpy(a.gid, b, 16);
	} else {
		abort();
	}
	return a;
}

/* Index of ip on ifindex in t, or -1. */
static int at(const struct svd_port_tab *t, const char *ip, uint32_t ifindex)
{
	struct svd_port_addr a = A(ip, ifindex);

	for (int i = 0; i < SV_GID_TBL_LEN; i++)
		if (t->slot[i].used && t->slot[i].ifindex == ifindex &&
		    !memcmp(t->slot[i].gid, a.gid, 16))
			return i;
	return -1;
}

static const struct svd_port_link links[] = {
	{ 1, 65536, LO }, { 2, 1500, UP }, { 3, 9000, UP }, { 4, 1500, 0 },
};
#define NLINKS (sizeof(links) / sizeof(links[0]))

/* The order a table made from scratch has always had. */
static void initial_order(void)
{
	struct svd_port_tab t = { 0 };
	struct svd_port_addr a[] = {
		A("::1", 1),	      A("127.0.0.1", 1), A("fe80::1", 2),
		A("2001:db8::2", 2),  A("198.51.100.2", 2),
		A("203.0.113.3", 3),  A("127.0.0.5", 1),
	};

	EXPECT(svd_ptab_reconcile(&t, a, 7, links, NLINKS) == 7);
	EXPECT(at(&t, "198.51.100.2", 2) == 0);
	EXPECT(at(&t, "203.0.113.3", 3) == 1);
	EXPECT(at(&t, "127.0.0.1", 1) == 2);
	EXPECT(at(&t, "127.0.0.5", 1) == 3);
	EXPECT(at(&t, "2001:db8::2", 2) == 4);
	EXPECT(at(&t, "fe80::1", 2) == 5);
	EXPECT(at(&t, "::1", 1) == 6);
	EXPECT(svd_ptab_ngids(&t) == 7);
	svd_ptab_free(&t);
}

/* 127.0.0.1 is there without lo's address (lo down in a fresh namespace)
 * and stays when lo's address goes. */
static void loopback_pinned(void)
{
	struct svd_port_tab t = { 0 };
	struct svd_port_addr v4 = A("198.51.100.1", 2);

	EXPECT(svd_ptab_reconcile(&t, &v4, 1, links, NLINKS) == 2);
	EXPECT(at(&t, "198.51.100.1", 2) == 0);
	EXPECT(at(&t, "127.0.0.1", 1) == 1);
	v4 = A("127.0.0.1", 1);
	EXPECT(svd_ptab_addr_add(&t, &v4) == 0); /* lo up: already there */
	EXPECT(svd_ptab_addr_del(&t, &v4) == 0); /* lo's address gone */
	EXPECT(at(&t, "127.0.0.1", 1) == 1);
	EXPECT(svd_ptab_reconcile(&t, NULL, 0, links, NLINKS) == 1);
	EXPECT(at(&t, "127.0.0.1", 1) == 1);
	EXPECT(svd_ptab_ngids(&t) == 2);
	svd_ptab_free(&t);
}

/* Removal empties a slot and moves nothing; an add takes the first empty
 * slot; the same GID on two interfaces is two entries, as the kernel's
 * (gid, netdev) key makes it. */
static void stable_slots(void)
{
	struct svd_port_tab t = { 0 };
	struct svd_port_addr a[] = { A("198.51.100.1", 2), A("203.0.113.1", 3),
				     A("2001:db8::1", 2) };
	struct svd_port_addr x;

	EXPECT(svd_ptab_reconcile(&t, a, 3, links, NLINKS) == 4);
	EXPECT(svd_ptab_addr_del(&t, &a[0]) == 1);
	EXPECT(svd_ptab_addr_del(&t, &a[0]) == 0);
	EXPECT(at(&t, "203.0.113.1", 3) == 1);
	EXPECT(at(&t, "127.0.0.1", 1) == 2);
	EXPECT(at(&t, "2001:db8::1", 2) == 3);
	EXPECT(!t.slot[0].used && svd_ptab_ngids(&t) == 4);
	x = A("2001:db8::9", 3);
	EXPECT(svd_ptab_addr_add(&t, &x) == 1);
	EXPECT(at(&t, "2001:db8::9", 3) == 0);
	EXPECT(svd_ptab_addr_add(&t, &x) == 0);
	x = A("2001:db8::1", 3);
	EXPECT(svd_ptab_addr_add(&t, &x) == 1);
	EXPECT(at(&t, "2001:db8::1", 3) == 4 && at(&t, "2001:db8::1", 2) == 3);
	/* The last slot going leaves no trailing hole counted. */
	EXPECT(svd_ptab_addr_del(&t, &x) == 1);
	EXPECT(svd_ptab_ngids(&t) == 4);
	svd_ptab_free(&t);
}

/* A full table refuses more, changes nothing, and takes one again once a
 * slot is free. */
static void full_table(void)
{
	struct svd_port_tab t = { 0 };
	struct svd_port_addr x;
	char ip[32];

	EXPECT(svd_ptab_reconcile(&t, NULL, 0, links, NLINKS) == 1);
	for (int i = 1; i < SV_GID_TBL_LEN; i++) {
		snprintf(ip, sizeof(ip), "198.51.100.%d", i);
		x = A(ip, 2);
		EXPECT(svd_ptab_addr_add(&t, &x) == 1);
	}
	x = A("203.0.113.1", 3);
	EXPECT(svd_ptab_addr_add(&t, &x) == -ENOSPC);
	EXPECT(at(&t, "203.0.113.1", 3) < 0);
	x = A("198.51.100.7", 2);
	EXPECT(svd_ptab_addr_del(&t, &x) == 1);
	x = A("203.0.113.1", 3);
	EXPECT(svd_ptab_addr_add(&t, &x) == 1);
	EXPECT(at(&t, "203.0.113.1", 3) == 7);
	svd_ptab_free(&t);
}

/* An interface's removal empties all of its slots, only those. */
static void link_removed(void)
{
	struct svd_port_tab t = { 0 };
	struct svd_port_addr a[] = { A("198.51.100.1", 2), A("203.0.113.1", 3),
				     A("2001:db8::1", 2), A("fe80::2", 2) };

	EXPECT(svd_ptab_reconcile(&t, a, 4, links, NLINKS) == 5);
	EXPECT(svd_ptab_link_del(&t, 2) == 3);
	EXPECT(svd_ptab_link_del(&t, 2) == 0);
	EXPECT(at(&t, "203.0.113.1", 3) == 1);
	EXPECT(at(&t, "127.0.0.1", 1) == 2);
	EXPECT(svd_ptab_ngids(&t) == 3);
	EXPECT(svd_ptab_link_mtu(&t, 2) == 0);
	EXPECT(svd_ptab_link_mtu(&t, 3) == 9000);
	svd_ptab_free(&t);
}

/* A resync (events were lost): what stays keeps its slot, what went
 * leaves a hole, what came fills the first holes. */
static void resync_keeps_slots(void)
{
	struct svd_port_tab t = { 0 };
	struct svd_port_addr a[] = { A("198.51.100.1", 2), A("203.0.113.1", 3),
				     A("2001:db8::1", 2), A("::1", 1) };
	struct svd_port_addr b[] = { A("2001:db8::1", 2), A("::1", 1),
				     A("2001:db8::7", 3), A("203.0.113.1", 3) };

	EXPECT(svd_ptab_reconcile(&t, a, 4, links, NLINKS) == 5);
	/* 198.51.100.1 gone, 2001:db8::7 new. */
	EXPECT(svd_ptab_reconcile(&t, b, 4, links, NLINKS) == 2);
	EXPECT(at(&t, "203.0.113.1", 3) == 1);
	EXPECT(at(&t, "127.0.0.1", 1) == 2);
	EXPECT(at(&t, "2001:db8::1", 2) == 3);
	EXPECT(at(&t, "::1", 1) == 4);
	EXPECT(at(&t, "2001:db8::7", 3) == 0);
	EXPECT(svd_ptab_reconcile(&t, b, 4, links, NLINKS) == 0);
	svd_ptab_free(&t);
}

/* rxe's rxe_set_mtu, and the port's: the smallest over interfaces that
 * are up, not loopback, and hold an address. */
static void active_mtu(void)
{
	struct svd_port_tab t = { 0 };
	struct svd_port_link l;
	struct svd_port_addr a[] = { A("198.51.100.1", 2), A("203.0.113.1", 3),
				     A("192.0.2.9", 4) };

	EXPECT(svd_ptab_rxe_mtu(1500) == IBV_MTU_1024);
	EXPECT(svd_ptab_rxe_mtu(9000) == IBV_MTU_4096);
	EXPECT(svd_ptab_rxe_mtu(4176) == IBV_MTU_4096);
	EXPECT(svd_ptab_rxe_mtu(4175) == IBV_MTU_2048);
	EXPECT(svd_ptab_rxe_mtu(2128) == IBV_MTU_2048);
	EXPECT(svd_ptab_rxe_mtu(2127) == IBV_MTU_1024);
	EXPECT(svd_ptab_rxe_mtu(1104) == IBV_MTU_1024);
	EXPECT(svd_ptab_rxe_mtu(1103) == IBV_MTU_512);
	EXPECT(svd_ptab_rxe_mtu(336) == IBV_MTU_256);
	EXPECT(svd_ptab_rxe_mtu(68) == IBV_MTU_256);
	EXPECT(svd_ptab_rxe_mtu(0) == IBV_MTU_256);
	EXPECT(svd_ptab_rxe_mtu(65536) == IBV_MTU_4096);

	/* Only lo (and 127.0.0.1): 4096. */
	EXPECT(svd_ptab_reconcile(&t, NULL, 0, links, NLINKS) == 1);
	EXPECT(svd_ptab_active_mtu(&t) == IBV_MTU_4096);
	/* 9000 and 1500 up with addresses, 1500 down (index 4) ignored. */
	EXPECT(svd_ptab_reconcile(&t, a, 3, links, NLINKS) == 3);
	EXPECT(svd_ptab_active_mtu(&t) == IBV_MTU_1024);
	l = (struct svd_port_link){ 2, 2200, UP };
	EXPECT(svd_ptab_link_set(&t, &l) == 0);
	EXPECT(svd_ptab_active_mtu(&t) == IBV_MTU_2048);
	l = (struct svd_port_link){ 2, 0, 0 }; /* down, MTU kept */
	EXPECT(svd_ptab_link_set(&t, &l) == 0);
	EXPECT(svd_ptab_active_mtu(&t) == IBV_MTU_4096);
	EXPECT(svd_ptab_link_mtu(&t, 2) == 2200);
	l = (struct svd_port_link){ 4, 600, UP };
	EXPECT(svd_ptab_link_set(&t, &l) == 0);
	EXPECT(svd_ptab_active_mtu(&t) == IBV_MTU_512);
	EXPECT(svd_ptab_addr_del(&t, &a[2]) == 1); /* no address: ignored */
	EXPECT(svd_ptab_active_mtu(&t) == IBV_MTU_4096);
	l = (struct svd_port_link){ 5, 1280, UP }; /* new, no address */
	EXPECT(svd_ptab_link_set(&t, &l) == 0);
	EXPECT(svd_ptab_active_mtu(&t) == IBV_MTU_4096);
	svd_ptab_free(&t);
}

int main(void)
{
	initial_order();
	loopback_pinned();
	stable_slots();
	full_table();
	link_removed();
	resync_keeps_slots();
	active_mtu();
	return unit_result();
}

/* SPDX-License-Identifier: MIT */
/*
 * The port's GID table and MTU as the namespace's network makes them.
 *
 * port_tab.c is the table alone (no I/O, unit-tested by
 * tests/unit/test_port_tab.c): stable slots, the interfaces it spans, the
 * active MTU.  port.c feeds it from rtnetlink (or getifaddrs), publishes
 * it in the key table and raises IBV_EVENT_GID_CHANGE.
 */
#ifndef SVD_PORT_H
#define SVD_PORT_H

#include <stdint.h>

#include "sv_proto.h"

/* An address of the namespace, as a GID (IPv4: ::ffff:a.b.c.d). */
struct svd_port_addr {
	uint8_t gid[16];
	uint32_t ifindex;
	uint8_t family; /* AF_INET or AF_INET6 */
};

/* An interface: its MTU in bytes and its IFF_* flags. */
struct svd_port_link {
	uint32_t ifindex;
	uint32_t mtu;
	uint32_t flags;
};

/* One slot: empty unless used.  The pinned one (::ffff:127.0.0.1) is
 * never emptied. */
struct svd_gid_slot {
	uint8_t gid[16];
	uint32_t ifindex;
	uint8_t used;
	uint8_t pinned;
};

struct svd_port_tab {
	struct svd_gid_slot slot[SV_GID_TBL_LEN];
	struct svd_port_link *links;
	uint32_t nlinks, caplinks;
};

/*
 * An address appeared: it takes the first empty slot, unless a slot holds
 * it already (same GID on the same interface).  1 when it was added, 0
 * when it was there, -ENOSPC when every slot is taken (nothing changes).
 */
int svd_ptab_addr_add(struct svd_port_tab *t, const struct svd_port_addr *a);
/* An address went away: its slot empties, no other moves.  1 when a slot
 * was emptied, else 0. */
int svd_ptab_addr_del(struct svd_port_tab *t, const struct svd_port_addr *a);
/* An interface appeared or changed (mtu 0: keep the one known).  0 or
 * -ENOMEM. */
int svd_ptab_link_set(struct svd_port_tab *t, const struct svd_port_link *l);
/* An interface went away: it and every slot of its addresses.  Returns
 * how many slots were emptied. */
int svd_ptab_link_del(struct svd_port_tab *t, uint32_t ifindex);
/*
 * Makes the table hold exactly the addresses a[] (plus the pinned
 * 127.0.0.1) and the interfaces l[], moving nothing that stays: slots of
 * addresses gone empty, new addresses take the first empty slots in the
 * order of a table built from scratch (IPv4 of real interfaces, loopback
 * IPv4 then 127.0.0.1, IPv6 global, link-local, loopback).  An empty
 * table reconciled is that table.  Returns how many slots changed, or
 * -ENOMEM (then the interfaces are the old ones).
 */
int svd_ptab_reconcile(struct svd_port_tab *t, const struct svd_port_addr *a,
		       uint32_t na, const struct svd_port_link *l, uint32_t nl);
/* enum ibv_mtu of the port: the smallest that rxe would give any
 * interface that is up, not loopback and holds an address of the table;
 * IBV_MTU_4096 when there is none. */
uint32_t svd_ptab_active_mtu(const struct svd_port_tab *t);
/* The IB MTU (enum ibv_mtu) rxe gives a netdev MTU (rxe_set_mtu). */
uint32_t svd_ptab_rxe_mtu(uint32_t netdev_mtu);
/* MTU in bytes of an interface, 0 when unknown. */
uint32_t svd_ptab_link_mtu(const struct svd_port_tab *t, uint32_t ifindex);
/* Slots up to the last one used (holes included). */
uint32_t svd_ptab_ngids(const struct svd_port_tab *t);
void svd_ptab_free(struct svd_port_tab *t);

/* port.c */
/* Opens the rtnetlink subscription (on the event loop) and fills the
 * table; without netlink the table is kept by polling.  0, or a negative
 * errno when not even the table could be made. */
int svd_port_init(void);
void svd_port_readable(void);
void svd_port_close(void);
/* enum ibv_mtu of the port now. */
uint32_t svd_port_active_mtu(void);

#endif

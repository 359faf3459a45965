/* SPDX-License-Identifier: MIT */
/*
 * The CM between hosts: CM MADs on QP1 over RoCE v2 (IBTA 13.5 GSI, the
 * kernel's ib_mad + ib_cm on a RoCE port).
 *
 * Out.  svd_cm_send() gives us every message whose destination GID is not
 * this host's.  It leaves as one UD SEND_ONLY datagram from QP1 to QP1
 * (BTH P_Key 0xFFFF, DETH Q_Key 0x80010000, pkey index 0) carrying the
 * 256-byte MAD (cm_mad.c), from the message's source GID to its
 * destination GID with the traffic class, hop limit and flow label of the
 * connection's path, through the daemon's RoCE port (gateway.c, which
 * adds the ICRC, sends it and hands it to the capture).  Nothing is
 * retried here: cm_ib.c resends the message in flight on its timers, as
 * the kernel's MAD layer does for the CM (retries = Max CM Retries).
 *
 * In.  Datagrams for QP1 are queued by the gateway (its thread, or an
 * engine that read the port) and the CM is kicked; svd_cm_wire_run()
 * pops them on the main thread, checks them, decodes them and hands them
 * to the state machine with the GIDs, traffic class and flow label of the
 * packet that brought them.  A datagram is dropped and counted when it is
 * not what a GSI QP accepts (another Q_Key or P_Key), not addressed to a
 * GID of ours, claims one of our GIDs as its source, or is not a CM MAD
 * cm_mad.c can read: nothing else changes, whatever its bytes.
 */
#include "svd_cm.h"
#include "svd_gw.h"
#include "sv_log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static struct svd_cm_wire_stats stats;

static const char *gid_str(const uint8_t *gid, char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

int svd_cm_wire_send(const struct svd_cm_msg *m)
{
	struct svd_gw_ud u;
	char g[INET6_ADDRSTRLEN];
	int err;

	memset(&u, 0, sizeof(u));
	memcpy(u.sgid, m->sgid, 16);
	memcpy(u.dgid, m->dgid, 16);
	u.src_qpn = CM_GSI_QPN;
	u.dst_qpn = CM_GSI_QPN;
	u.qkey = CM_GSI_QKEY;
	u.pkey = CM_DEFAULT_PKEY;
	u.tclass = m->tclass;
	u.hop_limit = m->hop_limit;
	u.flow_label = m->flow_label & 0xfffff;
	u.len = CM_MAD_LEN;
	if (svd_cm_mad_encode(m, u.data))
		return -EINVAL;
	err = svd_gw_ud_send(&u);
	if (err) {
		stats.tx_errors++;
		sv_dbg("cm: %s to %s not sent: %s", svd_cm_attr_name(m->attr_id),
		       gid_str(m->dgid, g, sizeof(g)), strerror(-err));
		return err;
	}
	stats.tx++;
	sv_dbg("cm: %s sent to %s, tid %#llx", svd_cm_attr_name(m->attr_id),
	       gid_str(m->dgid, g, sizeof(g)), (unsigned long long)m->tid);
	return 0;
}

/* 0 when the datagram is a CM MAD for us (then *m holds it). */
static int wire_take(const struct svd_gw_ud *u, struct svd_cm_msg *m)
{
	/* The GSI QP takes its Q_Key only (C10-15 for QP1: 0x80010000)
	 * and a P_Key matching the default partition's. */
	if (u->dst_qpn != CM_GSI_QPN || u->qkey != CM_GSI_QKEY ||
	    (u->pkey & 0x7fff) != (CM_DEFAULT_PKEY & 0x7fff))
		return -EBADMSG;
	if (svd_cm_gid_index(u->dgid) < 0 || svd_cm_gid_index(u->sgid) >= 0)
		return -EBADMSG;
	if (svd_cm_mad_decode(u->data, u->len, m))
		return -EBADMSG;
	memcpy(m->sgid, u->sgid, 16);
	memcpy(m->dgid, u->dgid, 16);
	m->tclass = u->tclass;
	m->hop_limit = u->hop_limit;
	m->flow_label = u->flow_label;
	m->wire = 1;
	return 0;
}

void svd_cm_wire_run(void)
{
	struct svd_gw_ud u;
	struct svd_cm_msg m;
	char g[INET6_ADDRSTRLEN];

	while (svd_gw_ud_pop(&u)) {
		if (wire_take(&u, &m)) {
			stats.rx_dropped++;
			sv_dbg("cm: a datagram for QP1 from %s dropped (not a "
			       "CM MAD for us)", gid_str(u.sgid, g, sizeof(g)));
			continue;
		}
		stats.rx++;
		sv_dbg("cm: %s from %s, tid %#llx", svd_cm_attr_name(m.attr_id),
		       gid_str(m.sgid, g, sizeof(g)), (unsigned long long)m.tid);
		svd_cm_recv(&m);
	}
}

void svd_cm_wire_stats(struct svd_cm_wire_stats *out)
{
	*out = stats;
}

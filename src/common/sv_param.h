/* SPDX-License-Identifier: MIT */
/*
 * Device limits in one place (as rxe_param.h).  These are what
 * ibv_query_device reports and what the daemon enforces: past a count
 * limit creating the object fails with ENOMEM, past a size limit with
 * EINVAL, as the kernel answers.  The daemon may be told lower counts
 * ($SOFTVERBS_LIMITS, daemon/device.c); it then reports those.
 *
 * What they cost the daemon: an object is ~100 bytes and a handle slot
 * 8 (plus 0.25 bit of bitmap); an MR or window key is a 64-byte entry of
 * the shared key table (SV_KEYTAB_ENTRIES x 64 = 21 MiB of address space,
 * pages only where keys live).  Descriptors are the scarce thing: a ufile,
 * a context (its async socket), a DM (its memfd) and a dma-buf MR (its
 * fd) each hold one in the daemon, so those are bounded to fit in the
 * descriptor limit the daemon raises itself to (main.c).
 */
#ifndef SV_PARAM_H
#define SV_PARAM_H

#define SV_DEFAULT_DEVICE_NAME "sv0"
#define SV_VENDOR_ID 0xffffff	  /* no IEEE OUI: a software device */
#define SV_VENDOR_PART_ID 0x5356 /* "SV" */
#define SV_HW_VER 1

#define SV_PAGE_SIZE_CAP 0xfffff000ULL /* 4 KiB .. 2 GiB pages */
#define SV_MAX_MR_SIZE (1ULL << 46)    /* 64 TiB: no pinning, any size */
#define SV_MAX_QP 0x10000
#define SV_MAX_QP_WR 0x8000
#define SV_MAX_SGE 32
#define SV_MAX_SGE_RD 32
#define SV_MAX_CQ 0x10000
#define SV_MAX_CQE 0x3fffff /* mlx5's: libfabric's rxm asks 256 Ki by default */
#define SV_MAX_MR 0x40000
#define SV_MAX_PD 0x10000
#define SV_MAX_QP_RD_ATOM 128
#define SV_MAX_RES_RD_ATOM 0x10000
#define SV_MAX_SRQ 0x4000
/* XRC domains (handles to them), device wide; each may pin a file. */
#define SV_MAX_XRCD 1024
#define SV_MAX_SRQ_WR 0x8000
#define SV_MAX_SRQ_SGE 32
#define SV_MAX_AH 0x10000
#define SV_MAX_MW 0x10000
#define SV_MAX_INLINE 256
#define SV_MAX_PKEYS 1
/* Multicast (ibv_attach_mcast, the daemon's gw_mcast.c): rxe's limits,
 * enforced with rxe's errors (-ENOMEM past any of them). */
#define SV_MAX_MCAST_GRP 8192
#define SV_MAX_MCAST_QP_ATTACH 56
#define SV_MAX_TOTAL_MCAST_QP_ATTACH (SV_MAX_MCAST_GRP * SV_MAX_MCAST_QP_ATTACH)
#define SV_NUM_COMP_VECTORS 1
#define SV_MAX_DM_SIZE (64ULL << 20) /* per allocation */
#define SV_MAX_DM 1024		     /* allocations, device wide */
#define SV_MAX_DMABUF_MR 1024	     /* dma-buf MRs, device wide */
#define SV_MAX_MSG_SZ 0x80000000U
#define SV_MAX_UFILES 4096	     /* open devices (ufiles), device wide */
#define SV_MAX_CONTEXTS 8192	     /* context views, device wide */
/* Handles per ufile: every object the device allows fits in one ufile,
 * so the per-type limits above are the ones that bite. */
#define SV_MAX_HANDLES                                                         \
	(SV_MAX_PD + SV_MAX_MR + SV_MAX_DM + SV_MAX_MW + SV_MAX_CQ +           \
	 SV_MAX_QP + SV_MAX_SRQ + SV_MAX_AH + SV_MAX_XRCD)

/* The port (daemon/port.c).  Bytes a RoCE v2 packet carries besides its
 * payload, as rxe counts them (RXE_MAX_HDR_LENGTH, rxe_hdr.h): the port's
 * active MTU is the largest IB MTU that fits a netdev's MTU less this
 * (rxe_param.h eth_mtu_int_to_enum): 1500 -> 1024, 9000 -> 4096. */
#define SV_ROCE_MAX_HDR 80

#define SV_DEFAULT_IDLE_MS 30000 /* daemon exit after this long with no ufile */

/*
 * The connection manager against the wire (daemon/cm_ib.c, docs/wire.md
 * "The connection manager").  What a REQ, REP or MRA asks for is served
 * up to these bounds, never beyond: times are IBTA's exponents (4.096 us
 * x 2^t, IBTA 12.6.5), so one step is a factor of two.
 *
 * SV_CM_MAX_RESPONSE_TIMEOUT  a CM response timeout (REQ's local and
 *     remote): 20, ~4.3 s, what the kernel's rdma_cm asks of every peer
 *     (cma.c CMA_CM_RESPONSE_TIMEOUT).  31 would be 2.3 hours a try.
 * SV_CM_MAX_CM_RETRIES  Max CM Retries: 15, the field's 4 bits and the
 *     kernel rdma_cm's CMA_MAX_CM_RETRIES.
 * SV_CM_MAX_ACK_TIMEOUT  a Local ACK Timeout (REQ) or target ACK delay
 *     (REP): 20, ~4.3 s.  The kernel's rdma_cm on RoCE derives it from
 *     CMA_IBOE_PACKET_LIFETIME (18) and the CA's ACK delay (cm.c
 *     cm_ack_timeout): 19 or 20 for any ACK delay up to 19.  It is the
 *     QP's ACK timeout and the length of timewait.
 * SV_CM_MAX_MRA_TIMEOUT  an MRA's service timeout: 24, ~69 s, the
 *     kernel rdma_cm's own (CMA_CM_MRA_SETTING).
 * SV_CM_MAX_HALF_OPEN_LISTENER / _SOURCE  connections between a REQ (or
 *     SIDR_REQ) and its RTU (or answer) that one listener, and one
 *     source GID over all listeners, may hold; the next REQ is rejected
 *     with No Resources (IBTA 12.6.7 Table 108, reason 3).  The listener's
 *     is the kernel rdma_ucm's largest backlog (max_backlog, 1024); one
 *     source may take a quarter of it.  A half-open connection without a
 *     word from its peer is gone within (15 + 1) x (4.3 s + 2 x 2.1 s),
 *     about 2 minutes.
 */
#define SV_CM_MAX_RESPONSE_TIMEOUT 20
#define SV_CM_MAX_CM_RETRIES 15
#define SV_CM_MAX_ACK_TIMEOUT 20
#define SV_CM_MAX_MRA_TIMEOUT 24
#define SV_CM_MAX_HALF_OPEN_LISTENER 1024
#define SV_CM_MAX_HALF_OPEN_SOURCE 256

#endif

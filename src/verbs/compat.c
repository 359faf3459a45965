/* SPDX-License-Identifier: MIT */
/*
 * Hidden compatibility versions: the 33 "ibv_xxx@IBVERBS_1.0" entry points
 * of the libibverbs 1.0 ABI (before 2007) and "ibv_register_driver@
 * IBVERBS_1.1" of the old provider interface.
 *
 * rdma-core keeps them so that binaries linked against libibverbs 1.0 still
 * load.  No binary built since 2007 binds to them (the default versions
 * are IBVERBS_1.1 and later), and the 1.0 structs they took are gone from
 * every header, so here they only make the symbol table identical and
 * answer "not supported" in the way each verb reports errors.  Nothing new
 * links to these names: .symver binds them as non-default versions, and the
 * sv_compat_* local names are hidden by the version script.
 *
 * The parameters are the 1.0 ones in shape only (opaque pointers); the stubs
 * never look at them.
 */
#include "verbs_int.h"

/* Declares, binds and starts the definition of one compat entry point. */
#define SV_COMPAT(sym, ver, rtype, args)                                       \
	SV_EXPORT rtype sv_compat_##sym args;                                  \
	__asm__(".symver sv_compat_" #sym ", " #sym "@" ver);                  \
	SV_EXPORT rtype sv_compat_##sym args

#define V10 "IBVERBS_1.0"

/* Pointer verbs: NULL and errno. */
#define NOSUP_PTR                                                              \
	do {                                                                   \
		errno = EOPNOTSUPP;                                            \
		return NULL;                                                   \
	} while (0)

/* Verbs documented as "0 or the value of errno". */
#define NOSUP_ERRVAL                                                           \
	do {                                                                   \
		errno = EOPNOTSUPP;                                            \
		return EOPNOTSUPP;                                             \
	} while (0)

/* Verbs documented as "0 or -1 with errno". */
#define NOSUP_MINUS1                                                           \
	do {                                                                   \
		errno = EOPNOTSUPP;                                            \
		return -1;                                                     \
	} while (0)

/* Devices */

SV_COMPAT(ibv_get_device_list, V10, void **, (int *num_devices))
{
	if (num_devices)
		*num_devices = 0;
	NOSUP_PTR;
}

SV_COMPAT(ibv_free_device_list, V10, void, (void **list))
{
}

SV_COMPAT(ibv_get_device_name, V10, const char *, (void *device))
{
	NOSUP_PTR;
}

SV_COMPAT(ibv_get_device_guid, V10, __be64, (void *device))
{
	errno = EOPNOTSUPP;
	return 0;
}

SV_COMPAT(ibv_open_device, V10, void *, (void *device))
{
	NOSUP_PTR;
}

SV_COMPAT(ibv_close_device, V10, int, (void *context))
{
	NOSUP_MINUS1;
}

SV_COMPAT(ibv_get_async_event, V10, int, (void *context, void *event))
{
	NOSUP_MINUS1;
}

SV_COMPAT(ibv_ack_async_event, V10, void, (void *event))
{
}

/* Queries */

SV_COMPAT(ibv_query_device, V10, int, (void *context, void *device_attr))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_query_port, V10, int,
	  (void *context, uint8_t port_num, void *port_attr))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_query_gid, V10, int,
	  (void *context, uint8_t port_num, int index, void *gid))
{
	NOSUP_MINUS1;
}

SV_COMPAT(ibv_query_pkey, V10, int,
	  (void *context, uint8_t port_num, int index, void *pkey))
{
	NOSUP_MINUS1;
}

/* PDs and MRs */

SV_COMPAT(ibv_alloc_pd, V10, void *, (void *context))
{
	NOSUP_PTR;
}

SV_COMPAT(ibv_dealloc_pd, V10, int, (void *pd))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_reg_mr, V10, void *,
	  (void *pd, void *addr, size_t length, int access))
{
	NOSUP_PTR;
}

SV_COMPAT(ibv_dereg_mr, V10, int, (void *mr))
{
	NOSUP_ERRVAL;
}

/* CQs */

SV_COMPAT(ibv_create_cq, V10, void *,
	  (void *context, int cqe, void *cq_context, void *channel,
	   int comp_vector))
{
	NOSUP_PTR;
}

SV_COMPAT(ibv_get_cq_event, V10, int,
	  (void *channel, void **cq, void **cq_context))
{
	NOSUP_MINUS1;
}

SV_COMPAT(ibv_ack_cq_events, V10, void, (void *cq, unsigned int nevents))
{
}

SV_COMPAT(ibv_resize_cq, V10, int, (void *cq, int cqe))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_destroy_cq, V10, int, (void *cq))
{
	NOSUP_ERRVAL;
}

/* SRQs */

SV_COMPAT(ibv_create_srq, V10, void *, (void *pd, void *srq_init_attr))
{
	NOSUP_PTR;
}

SV_COMPAT(ibv_modify_srq, V10, int,
	  (void *srq, void *srq_attr, int srq_attr_mask))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_query_srq, V10, int, (void *srq, void *srq_attr))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_destroy_srq, V10, int, (void *srq))
{
	NOSUP_ERRVAL;
}

/* QPs */

SV_COMPAT(ibv_create_qp, V10, void *, (void *pd, void *qp_init_attr))
{
	NOSUP_PTR;
}

SV_COMPAT(ibv_query_qp, V10, int,
	  (void *qp, void *attr, int attr_mask, void *init_attr))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_modify_qp, V10, int, (void *qp, void *attr, int attr_mask))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_destroy_qp, V10, int, (void *qp))
{
	NOSUP_ERRVAL;
}

/* AHs and multicast */

SV_COMPAT(ibv_create_ah, V10, void *, (void *pd, void *attr))
{
	NOSUP_PTR;
}

SV_COMPAT(ibv_destroy_ah, V10, int, (void *ah))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_attach_mcast, V10, int, (void *qp, const void *gid, uint16_t lid))
{
	NOSUP_ERRVAL;
}

SV_COMPAT(ibv_detach_mcast, V10, int, (void *qp, const void *gid, uint16_t lid))
{
	NOSUP_ERRVAL;
}

/*
 * The pre-2017 provider registration.  rdma-core ignores it too: providers
 * of that era cannot drive a modern context anyway.
 */
SV_COMPAT(ibv_register_driver, "IBVERBS_1.1", void,
	  (const char *name, void *init_func))
{
}

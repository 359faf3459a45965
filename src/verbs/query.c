/* SPDX-License-Identifier: MIT */
/*
 * Device, port, GID and P_Key queries.  The daemon is the device: it
 * answers the attributes and keeps the GID table from the addresses of its
 * network namespace, in stable slots (an address gone leaves its slot
 * empty).
 */
#include "verbs_int.h"

#include <string.h>

static int query_device_ex(struct ibv_context *ctx,
			   struct ibv_device_attr_ex *ax)
{
	return sv_ctx_call_simple(ctx, SV_OP_QUERY_DEVICE, NULL, 0, ax,
				  sizeof(*ax));
}

SV_EXPORT int ibv_query_device(struct ibv_context *ctx,
			       struct ibv_device_attr *attr)
{
	struct ibv_device_attr_ex ax;
	int err = query_device_ex(ctx, &ax);

	if (err)
		return -err;
	memcpy(attr, &ax.orig_attr, sizeof(*attr));
	return 0;
}

/* verbs_context op behind verbs.h's ibv_query_device_ex(). */
static int sv_query_device_ex(struct ibv_context *ctx,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex ax;
	int err;

	if (input && input->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	err = query_device_ex(ctx, &ax);
	if (err)
		return -err;
	/* Callers built against an older verbs.h pass a smaller struct: write
	 * only what they have. */
	memcpy(attr, &ax, attr_size < sizeof(ax) ? attr_size : sizeof(ax));
	return 0;
}

static int query_port(struct ibv_context *ctx, uint8_t port,
		      struct ibv_port_attr *p)
{
	struct sv_port_req req = { .port = port };

	return sv_ctx_call_simple(ctx, SV_OP_QUERY_PORT, &req, sizeof(req), p,
				  sizeof(*p));
}

int sv_port_active_mtu(struct ibv_context *ctx, enum ibv_mtu *mtu)
{
	struct ibv_port_attr p;
	int err = query_port(ctx, 1, &p);

	if (!err)
		*mtu = p.active_mtu;
	return err;
}

/* verbs_context op behind verbs.h's ibv_query_port() macro. */
static int sv_query_port(struct ibv_context *ctx, uint8_t port_num,
			 struct ibv_port_attr *port_attr, size_t port_attr_len)
{
	struct ibv_port_attr p;
	int err = query_port(ctx, port_num, &p);

	if (err)
		return -err;
	memcpy(port_attr, &p,
	       port_attr_len < sizeof(p) ? port_attr_len : sizeof(p));
	return 0;
}

/*
 * The exported symbol, for binaries that call it directly: the caller's
 * struct may be the old one, which ends before port_cap_flags2.
 */
#undef ibv_query_port
SV_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port_num,
			     struct _compat_ibv_port_attr *port_attr)
{
	return sv_query_port(ctx, port_num, (struct ibv_port_attr *)port_attr,
			     offsetof(struct ibv_port_attr, port_cap_flags2));
}

static int gid_table(struct ibv_context *ctx, uint32_t port,
		     struct sv_gid_table *t)
{
	struct sv_port_req req = { .port = port };

	if (port == 0 || port > 255)
		return -EINVAL;
	return sv_ctx_call_simple(ctx, SV_OP_QUERY_GIDS, &req, sizeof(req), t,
				  sizeof(*t));
}

SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port_num,
				uint32_t gid_index, struct ibv_gid_entry *entry,
				uint32_t flags, size_t entry_size)
{
	struct sv_gid_table t;
	int err;

	if (flags || entry_size < sizeof(*entry))
		return EINVAL;
	err = gid_table(ctx, port_num, &t);
	if (err)
		return -err;
	/* The kernel's rdma_get_gid_attr: an index past the table EINVAL,
	 * an empty slot ENODATA. */
	if (gid_index >= SV_GID_TBL_LEN)
		return EINVAL;
	if (!sv_gid_valid(&t, gid_index))
		return ENODATA;
	memcpy(entry, &t.entries[gid_index], sizeof(*entry));
	return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx,
				       struct ibv_gid_entry *entries,
				       size_t max_entries, uint32_t flags,
				       size_t entry_size)
{
	struct sv_gid_table t;
	ssize_t n = 0;
	int err;

	if (flags || !max_entries || entry_size < sizeof(*entries))
		return -EINVAL;
	err = gid_table(ctx, 1, &t);
	if (err)
		return err;
	/* The kernel's rdma_query_gid_table: the GIDs in slot order, empty
	 * slots skipped; EINVAL when they do not fit. */
	for (uint32_t i = 0; i < t.count; i++) {
		if (!sv_gid_valid(&t, i))
			continue;
		if ((size_t)n >= max_entries)
			return -EINVAL;
		memcpy((char *)entries + (size_t)n * entry_size, &t.entries[i],
		       sizeof(*entries));
		n++;
	}
	return n;
}

SV_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port_num,
			    int index, union ibv_gid *gid)
{
	struct ibv_gid_entry e;
	int err;

	if (index < 0) {
		errno = EINVAL;
		return -1;
	}
	err = _ibv_query_gid_ex(ctx, port_num, index, &e, 0, sizeof(e));
	if (err == ENODATA) {
		/* rdma-core keeps the old API: an empty slot reads as zero. */
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (err) {
		errno = err;
		return -1;
	}
	memcpy(gid, &e.gid, sizeof(*gid));
	return 0;
}

/* rdma-core's enum ibv_gid_type_sysfs (driver.h, not installed). */
enum { SV_GID_TYPE_SYSFS_IB_ROCE_V1, SV_GID_TYPE_SYSFS_ROCE_V2 };

SV_EXPORT int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port_num,
				 unsigned int index, int *type)
{
	struct ibv_gid_entry e;
	int err;

	err = _ibv_query_gid_ex(ctx, port_num, index, &e, 0, sizeof(e));
	if (err == ENODATA) {
		/* As rdma-core: an empty slot has the default type. */
		*type = SV_GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (err) {
		errno = err;
		return -1;
	}
	*type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? SV_GID_TYPE_SYSFS_ROCE_V2 :
						     SV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

SV_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port_num,
			     int index, __be16 *pkey)
{
	struct ibv_port_attr p;
	int err = query_port(ctx, port_num, &p);

	if (err) {
		errno = -err;
		return -1;
	}
	if (index < 0 || index >= p.pkey_tbl_len) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff); /* the default, full-member P_Key */
	return 0;
}

SV_EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port_num,
				 __be16 pkey)
{
	__be16 v;

	for (int i = 0; i < SV_MAX_PKEYS; i++) {
		if (ibv_query_pkey(ctx, port_num, i, &v))
			return -1;
		if (v == pkey)
			return i;
	}
	errno = ENOENT;
	return -1;
}

/*
 * ibv_query_rt_values_ex: the device clock now, the clock completion stamps
 * use (cq.c): CLOCK_MONOTONIC in ns, hca_core_clock 1,000,000 kHz.  As mlx4
 * and mlx5 answer, the raw count goes in tv_nsec with tv_sec 0; comp_mask
 * comes back with the values given.
 */
static int query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *v)
{
	uint32_t mask = 0;

	(void)ctx;
	if (v->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		v->raw_clock.tv_sec = 0;
		v->raw_clock.tv_nsec = (long)sv_now_ns();
		mask |= IBV_VALUES_MASK_RAW_CLOCK;
	}
	v->comp_mask = mask;
	return 0;
}

void sv_set_query_ops(struct verbs_context *vctx)
{
	vctx->query_rt_values = query_rt_values;
	vctx->query_device_ex = sv_query_device_ex;
	vctx->query_port = sv_query_port;
}

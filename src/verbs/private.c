/* SPDX-License-Identifier: MIT */
/*
 * The IBVERBS_PRIVATE_34 interface: what rdma-core offers its provider
 * libraries (libmlx5, libefa, ...) and librdmacm.
 *
 * Debian's providers and pyverbs' provider modules link against these
 * names, so they must exist for those libraries to load at all.  They are
 * never called on our behalf: a provider only acts on devices whose
 * verbs_device ops are its own table, and ours never are (see struct
 * sv_device), so mlx5dv_*()/efadv_*() answer "not my device" before
 * reaching here.  Each stub still answers in the error style of the real
 * function, so a call that does arrive fails cleanly:
 *   ibv_cmd_*, execute_ioctl: a positive errno value (errno set too);
 *   ibv_cmd_poll_cq: -1 and errno; pointer returns: NULL and errno;
 *   registration, logging and init helpers: do nothing.
 *
 * rdma-core's driver.h and cmd_ioctl.h are not installed, so the prototypes
 * live here, with the uninstalled command structs left incomplete (the
 * stubs never look inside them).  ibv_query_gid_type is real (query.c).
 */
#include "verbs_int.h"

#include <stdbool.h>

#include <rdma/rdma_user_ioctl_cmds.h>

struct ib_uverbs_alloc_mw_resp;
struct ib_uverbs_alloc_pd_resp;
struct ib_uverbs_create_ah_resp;
struct ib_uverbs_create_cq_resp;
struct ib_uverbs_create_qp_resp;
struct ib_uverbs_create_srq_resp;
struct ib_uverbs_ex_create_cq_resp;
struct ib_uverbs_ex_create_qp_resp;
struct ib_uverbs_ex_create_rwq_ind_table_resp;
struct ib_uverbs_ex_create_wq_resp;
struct ib_uverbs_ex_modify_qp_resp;
struct ib_uverbs_ex_query_device_resp;
struct ib_uverbs_get_context_resp;
struct ib_uverbs_open_xrcd_resp;
struct ib_uverbs_reg_mr_resp;
struct ib_uverbs_rereg_mr_resp;
struct ib_uverbs_resize_cq_resp;
struct ibv_alloc_mw;
struct ibv_alloc_pd;
struct ibv_create_cq;
struct ibv_create_cq_ex;
struct ibv_create_qp;
struct ibv_create_qp_ex;
struct ibv_create_srq;
struct ibv_create_wq;
struct ibv_create_xsrq;
struct ibv_get_context;
struct ibv_modify_cq;
struct ibv_modify_qp;
struct ibv_modify_qp_ex;
struct ibv_modify_srq;
struct ibv_modify_wq;
struct ibv_open_qp;
struct ibv_open_xrcd;
struct ibv_query_port;
struct ibv_query_qp;
struct ibv_query_srq;
struct ibv_reg_mr;
struct ibv_rereg_mr;
struct ibv_resize_cq;
struct verbs_counters;
struct verbs_cq;
struct verbs_device_ops;
struct verbs_dm;
struct verbs_flow_action;
struct verbs_mr;
struct verbs_qp;
struct verbs_srq;
struct verbs_sysfs_dev;
struct verbs_xrcd;
struct verbs_context_ops;

/*
 * The head of rdma-core's struct ibv_command_buffer (cmd_ioctl.h, v44): a
 * chain of attribute blocks that providers size their final VLA from.
 */
struct ibv_command_buffer {
	struct ibv_command_buffer *next;
	struct ib_uverbs_attr *next_attr;
	struct ib_uverbs_attr *last_attr;
	uint8_t uhw_in_idx;
	uint8_t uhw_out_idx;
	uint8_t uhw_in_headroom_dwords;
	uint8_t uhw_out_headroom_dwords;
	uint8_t flags; /* buffer_error, fallback_require_ex, fallback_ioctl_only */
	struct ib_uverbs_ioctl_hdr hdr;
};

/* driver.h / cmd_ioctl.h prototypes (v44). */
SV_EXPORT extern bool verbs_allow_disassociate_destroy;
SV_EXPORT void verbs_register_driver_34(const struct verbs_device_ops *ops);
SV_EXPORT void __verbs_log(struct verbs_context *ctx, uint32_t level,
			   const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
SV_EXPORT void *_verbs_init_and_alloc_context(struct ibv_device *device,
					      int cmd_fd, size_t alloc_size,
					      struct verbs_context *context_offset,
					      uint32_t driver_id);
SV_EXPORT void verbs_uninit_context(struct verbs_context *context);
SV_EXPORT void verbs_set_ops(struct verbs_context *vctx,
			     const struct verbs_context_ops *ops);
SV_EXPORT void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
			     struct ibv_comp_channel *channel,
			     void *cq_context);
SV_EXPORT struct ibv_context *verbs_open_device(struct ibv_device *device,
						void *private_data);
SV_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					struct verbs_sysfs_dev *sysfs_dev,
					const char *fnfmt, ...)
	__attribute__((format(printf, 4, 5)));
SV_EXPORT unsigned int
__ioctl_final_num_attrs(unsigned int num_attrs,
			struct ibv_command_buffer *link);

SV_EXPORT int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);

/* The errno-value answer of every command helper. */
static int nosup(void)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

/*
 * One command helper stub from one parameter list: its prototype (the
 * header that declares it is not installed) and a body that fails with
 * EOPNOTSUPP.  The parameters are named only to make a definition.
 */
#define NOSUP_CMD(name, ...)                                                   \
	SV_EXPORT int name(__VA_ARGS__);                                       \
	SV_EXPORT int name(__VA_ARGS__)                                        \
	{                                                                      \
		return nosup();                                                \
	}

/* Post helpers also name the first WR that failed, as the verbs they
 * back. */
#define NOSUP_POST(name, obj_type, wr_type)                                    \
	SV_EXPORT int name(obj_type *obj, wr_type *wr, wr_type **bad_wr);      \
	SV_EXPORT int name(obj_type *obj, wr_type *wr, wr_type **bad_wr)       \
	{                                                                      \
		if (bad_wr)                                                    \
			*bad_wr = wr;                                          \
		return nosup();                                                \
	}

/*
 * rdma-core sets this from RDMAV_ALLOW_DISASSOCIATE_DESTROY for providers'
 * destroy paths; our objects are never destroyed by a provider.
 */
SV_EXPORT bool verbs_allow_disassociate_destroy;

/*
 * Called from every provider's constructor (PROVIDER_DRIVER) when the
 * provider library is loaded, e.g. by pyverbs or perftest linking libmlx5.
 * There is no provider to drive: the device is ours.
 */
SV_EXPORT void verbs_register_driver_34(const struct verbs_device_ops *ops)
{
}

/* Provider debug logging; providers never run on our device. */
SV_EXPORT void __verbs_log(struct verbs_context *ctx, uint32_t level,
			   const char *fmt, ...)
{
}

/* Provider context allocation: only reached from a provider's own open. */
SV_EXPORT void *_verbs_init_and_alloc_context(struct ibv_device *device,
					      int cmd_fd, size_t alloc_size,
					      struct verbs_context *context_offset,
					      uint32_t driver_id)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT void verbs_uninit_context(struct verbs_context *context)
{
}

SV_EXPORT void verbs_set_ops(struct verbs_context *vctx,
			     const struct verbs_context_ops *ops)
{
}

SV_EXPORT void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
			     struct ibv_comp_channel *channel, void *cq_context)
{
}

/*
 * rdma-core's ibv_open_device() is verbs_open_device(device, NULL); the
 * private data only means something to a provider, and ours has none.
 * mlx5dv_open_device() refuses our device before calling this.
 */
SV_EXPORT struct ibv_context *verbs_open_device(struct ibv_device *device,
						void *private_data)
{
	return ibv_open_device(device);
}

/* Our device has no sysfs directory (see ibv_read_sysfs_file). */
SV_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					struct verbs_sysfs_dev *sysfs_dev,
					const char *fnfmt, ...)
{
	errno = ENOENT;
	return -1;
}

/*
 * Number of attributes in num_attrs plus every linked block.  Real, not a
 * stub: a provider sizes a stack array with it, and an answer that is too
 * small would be an overflow rather than an error.
 */
SV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
					       struct ibv_command_buffer *link)
{
	for (; link; link = link->next)
		num_attrs += link->next_attr - link->hdr.attrs;
	return num_attrs;
}

NOSUP_CMD(execute_ioctl, struct ibv_context *context,
	  struct ibv_command_buffer *cmd)

NOSUP_CMD(ibv_cmd_get_context, struct verbs_context *context,
	  struct ibv_get_context *cmd, size_t cmd_size,
	  struct ib_uverbs_get_context_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_query_context, struct ibv_context *ctx,
	  struct ibv_command_buffer *driver)

NOSUP_CMD(ibv_cmd_create_flow_action_esp, struct ibv_context *ctx,
	  struct ibv_flow_action_esp_attr *attr,
	  struct verbs_flow_action *flow_action,
	  struct ibv_command_buffer *driver)

NOSUP_CMD(ibv_cmd_modify_flow_action_esp, struct verbs_flow_action *flow_action,
	  struct ibv_flow_action_esp_attr *attr,
	  struct ibv_command_buffer *driver)

NOSUP_CMD(ibv_cmd_query_device_any, struct ibv_context *context,
	  const struct ibv_query_device_ex_input *input,
	  struct ibv_device_attr_ex *attr, size_t attr_size,
	  struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size)

NOSUP_CMD(ibv_cmd_query_port, struct ibv_context *context, uint8_t port_num,
	  struct ibv_port_attr *port_attr, struct ibv_query_port *cmd,
	  size_t cmd_size)

NOSUP_CMD(ibv_cmd_alloc_pd, struct ibv_context *context, struct ibv_pd *pd,
	  struct ibv_alloc_pd *cmd, size_t cmd_size,
	  struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_dealloc_pd, struct ibv_pd *pd)

NOSUP_CMD(ibv_cmd_open_xrcd, struct ibv_context *context,
	  struct verbs_xrcd *xrcd, int vxrcd_size,
	  struct ibv_xrcd_init_attr *attr, struct ibv_open_xrcd *cmd,
	  size_t cmd_size, struct ib_uverbs_open_xrcd_resp *resp,
	  size_t resp_size)

NOSUP_CMD(ibv_cmd_close_xrcd, struct verbs_xrcd *xrcd)

NOSUP_CMD(ibv_cmd_reg_mr, struct ibv_pd *pd, void *addr, size_t length,
	  uint64_t hca_va, int access, struct verbs_mr *vmr,
	  struct ibv_reg_mr *cmd, size_t cmd_size,
	  struct ib_uverbs_reg_mr_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_rereg_mr, struct verbs_mr *vmr, uint32_t flags, void *addr,
	  size_t length, uint64_t hca_va, int access, struct ibv_pd *pd,
	  struct ibv_rereg_mr *cmd, size_t cmd_sz,
	  struct ib_uverbs_rereg_mr_resp *resp, size_t resp_sz)

NOSUP_CMD(ibv_cmd_dereg_mr, struct verbs_mr *vmr)

NOSUP_CMD(ibv_cmd_query_mr, struct ibv_pd *pd, struct verbs_mr *vmr,
	  uint32_t mr_handle)

NOSUP_CMD(ibv_cmd_advise_mr, struct ibv_pd *pd,
	  enum ibv_advise_mr_advice advice, uint32_t flags,
	  struct ibv_sge *sg_list, uint32_t num_sge)

NOSUP_CMD(ibv_cmd_reg_dmabuf_mr, struct ibv_pd *pd, uint64_t offset,
	  size_t length, uint64_t iova, int fd, int access,
	  struct verbs_mr *vmr)

NOSUP_CMD(ibv_cmd_alloc_mw, struct ibv_pd *pd, enum ibv_mw_type type,
	  struct ibv_mw *mw, struct ibv_alloc_mw *cmd, size_t cmd_size,
	  struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_dealloc_mw, struct ibv_mw *mw)

NOSUP_CMD(ibv_cmd_create_cq, struct ibv_context *context, int cqe,
	  struct ibv_comp_channel *channel, int comp_vector, struct ibv_cq *cq,
	  struct ibv_create_cq *cmd, size_t cmd_size,
	  struct ib_uverbs_create_cq_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_create_cq_ex, struct ibv_context *context,
	  const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq,
	  struct ibv_create_cq_ex *cmd, size_t cmd_size,
	  struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size,
	  uint32_t cmd_flags)

/* A completion count on success, so errors are -1 and errno. */
SV_EXPORT int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc)
{
	errno = EOPNOTSUPP;
	return -1;
}

NOSUP_CMD(ibv_cmd_req_notify_cq, struct ibv_cq *cq, int solicited_only)

NOSUP_CMD(ibv_cmd_resize_cq, struct ibv_cq *cq, int cqe,
	  struct ibv_resize_cq *cmd, size_t cmd_size,
	  struct ib_uverbs_resize_cq_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_destroy_cq, struct ibv_cq *cq)

NOSUP_CMD(ibv_cmd_modify_cq, struct ibv_cq *cq, struct ibv_modify_cq_attr *attr,
	  struct ibv_modify_cq *cmd, size_t cmd_size)

NOSUP_CMD(ibv_cmd_create_srq, struct ibv_pd *pd, struct ibv_srq *srq,
	  struct ibv_srq_init_attr *attr, struct ibv_create_srq *cmd,
	  size_t cmd_size, struct ib_uverbs_create_srq_resp *resp,
	  size_t resp_size)

NOSUP_CMD(ibv_cmd_create_srq_ex, struct ibv_context *context,
	  struct verbs_srq *srq, struct ibv_srq_init_attr_ex *attr_ex,
	  struct ibv_create_xsrq *cmd, size_t cmd_size,
	  struct ib_uverbs_create_srq_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_modify_srq, struct ibv_srq *srq,
	  struct ibv_srq_attr *srq_attr, int srq_attr_mask,
	  struct ibv_modify_srq *cmd, size_t cmd_size)

NOSUP_CMD(ibv_cmd_query_srq, struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
	  struct ibv_query_srq *cmd, size_t cmd_size)

NOSUP_CMD(ibv_cmd_destroy_srq, struct ibv_srq *srq)

NOSUP_CMD(ibv_cmd_create_qp, struct ibv_pd *pd, struct ibv_qp *qp,
	  struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
	  size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
	  size_t resp_size)

NOSUP_CMD(ibv_cmd_create_qp_ex, struct ibv_context *context,
	  struct verbs_qp *qp, struct ibv_qp_init_attr_ex *attr_ex,
	  struct ibv_create_qp *cmd, size_t cmd_size,
	  struct ib_uverbs_create_qp_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_create_qp_ex2, struct ibv_context *context,
	  struct verbs_qp *qp, struct ibv_qp_init_attr_ex *qp_attr,
	  struct ibv_create_qp_ex *cmd, size_t cmd_size,
	  struct ib_uverbs_ex_create_qp_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_open_qp, struct ibv_context *context, struct verbs_qp *qp,
	  int vqp_sz, struct ibv_qp_open_attr *attr, struct ibv_open_qp *cmd,
	  size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
	  size_t resp_size)

NOSUP_CMD(ibv_cmd_query_qp, struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
	  int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
	  struct ibv_query_qp *cmd, size_t cmd_size)

NOSUP_CMD(ibv_cmd_modify_qp, struct ibv_qp *qp, struct ibv_qp_attr *attr,
	  int attr_mask, struct ibv_modify_qp *cmd, size_t cmd_size)

NOSUP_CMD(ibv_cmd_modify_qp_ex, struct ibv_qp *qp, struct ibv_qp_attr *attr,
	  int attr_mask, struct ibv_modify_qp_ex *cmd, size_t cmd_size,
	  struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_destroy_qp, struct ibv_qp *qp)

NOSUP_POST(ibv_cmd_post_send, struct ibv_qp, struct ibv_send_wr)

NOSUP_POST(ibv_cmd_post_recv, struct ibv_qp, struct ibv_recv_wr)

NOSUP_POST(ibv_cmd_post_srq_recv, struct ibv_srq, struct ibv_recv_wr)

NOSUP_CMD(ibv_cmd_create_ah, struct ibv_pd *pd, struct ibv_ah *ah,
	  struct ibv_ah_attr *attr, struct ib_uverbs_create_ah_resp *resp,
	  size_t resp_size)

NOSUP_CMD(ibv_cmd_destroy_ah, struct ibv_ah *ah)

NOSUP_CMD(ibv_cmd_attach_mcast, struct ibv_qp *qp, const union ibv_gid *gid,
	  uint16_t lid)

NOSUP_CMD(ibv_cmd_detach_mcast, struct ibv_qp *qp, const union ibv_gid *gid,
	  uint16_t lid)

NOSUP_CMD(ibv_cmd_create_flow, struct ibv_qp *qp, struct ibv_flow *flow_id,
	  struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size)

NOSUP_CMD(ibv_cmd_destroy_flow, struct ibv_flow *flow_id)

NOSUP_CMD(ibv_cmd_create_wq, struct ibv_context *context,
	  struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq,
	  struct ibv_create_wq *cmd, size_t cmd_size,
	  struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_destroy_flow_action, struct verbs_flow_action *action)

NOSUP_CMD(ibv_cmd_modify_wq, struct ibv_wq *wq, struct ibv_wq_attr *attr,
	  struct ibv_modify_wq *cmd, size_t cmd_size)

NOSUP_CMD(ibv_cmd_destroy_wq, struct ibv_wq *wq)

NOSUP_CMD(ibv_cmd_create_rwq_ind_table, struct ibv_context *context,
	  struct ibv_rwq_ind_table_init_attr *init_attr,
	  struct ibv_rwq_ind_table *rwq_ind_table,
	  struct ib_uverbs_ex_create_rwq_ind_table_resp *resp, size_t resp_size)

NOSUP_CMD(ibv_cmd_destroy_rwq_ind_table,
	  struct ibv_rwq_ind_table *rwq_ind_table)

NOSUP_CMD(ibv_cmd_create_counters, struct ibv_context *context,
	  struct ibv_counters_init_attr *init_attr,
	  struct verbs_counters *vcounters, struct ibv_command_buffer *link)

NOSUP_CMD(ibv_cmd_destroy_counters, struct verbs_counters *vcounters)

NOSUP_CMD(ibv_cmd_read_counters, struct verbs_counters *vcounters,
	  uint64_t *counters_value, uint32_t ncounters, uint32_t flags,
	  struct ibv_command_buffer *link)

NOSUP_CMD(ibv_cmd_alloc_dm, struct ibv_context *ctx,
	  const struct ibv_alloc_dm_attr *dm_attr, struct verbs_dm *dm,
	  struct ibv_command_buffer *link)

NOSUP_CMD(ibv_cmd_free_dm, struct verbs_dm *dm)

NOSUP_CMD(ibv_cmd_reg_dm_mr, struct ibv_pd *pd, struct verbs_dm *dm,
	  uint64_t offset, size_t length, unsigned int access,
	  struct verbs_mr *vmr, struct ibv_command_buffer *link)

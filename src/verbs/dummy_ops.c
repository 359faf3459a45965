/* SPDX-License-Identifier: MIT */
/*
 * One table of "not supported" answers (rdma-core's dummy_ops.c idea): every
 * op slot of ibv_context and verbs_context starts here, so an unimplemented
 * verb answers EOPNOTSUPP and nothing ever jumps through NULL.  Family files
 * (query.c, pd.c, ...) then set the ops they implement.
 */
#include "verbs_int.h"

#define NOSUP_INT return EOPNOTSUPP
#define NOSUP_PTR                                                              \
	do {                                                                   \
		errno = EOPNOTSUPP;                                            \
		return NULL;                                                   \
	} while (0)

static void *compat_nosup(void)
{
	NOSUP_PTR;
}

static int compat_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	NOSUP_INT;
}

static int compat_query_port(struct ibv_context *c, uint8_t p,
			     struct _compat_ibv_port_attr *a)
{
	NOSUP_INT;
}

static struct ibv_mw *alloc_mw(struct ibv_pd *pd, enum ibv_mw_type t)
{
	NOSUP_PTR;
}

static int bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
	NOSUP_INT;
}

static int dealloc_mw(struct ibv_mw *mw)
{
	NOSUP_INT;
}

static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	/* poll_cq returns a negative count on error. */
	return -EOPNOTSUPP;
}

static int req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	NOSUP_INT;
}

static int post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad)
{
	*bad = wr;
	NOSUP_INT;
}

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad)
{
	*bad = wr;
	NOSUP_INT;
}

static int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad)
{
	*bad = wr;
	NOSUP_INT;
}

static int query_port(struct ibv_context *c, uint8_t p, struct ibv_port_attr *a,
		      size_t len)
{
	NOSUP_INT;
}

static int advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		     uint32_t flags, struct ibv_sge *sg, uint32_t n)
{
	NOSUP_INT;
}

static struct ibv_mr *alloc_null_mr(struct ibv_pd *pd)
{
	NOSUP_PTR;
}

static int read_counters(struct ibv_counters *c, uint64_t *v, uint32_t n,
			 uint32_t flags)
{
	NOSUP_INT;
}

static int attach_counters_point_flow(struct ibv_counters *c,
				      struct ibv_counter_attach_attr *a,
				      struct ibv_flow *f)
{
	NOSUP_INT;
}

static struct ibv_counters *create_counters(struct ibv_context *c,
					    struct ibv_counters_init_attr *a)
{
	NOSUP_PTR;
}

static int destroy_counters(struct ibv_counters *c)
{
	NOSUP_INT;
}

static struct ibv_mr *reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm,
				uint64_t off, size_t len, unsigned int access)
{
	NOSUP_PTR;
}

static struct ibv_dm *alloc_dm(struct ibv_context *c, struct ibv_alloc_dm_attr *a)
{
	NOSUP_PTR;
}

static int free_dm(struct ibv_dm *dm)
{
	NOSUP_INT;
}

static int modify_flow_action_esp(struct ibv_flow_action *a,
				  struct ibv_flow_action_esp_attr *attr)
{
	NOSUP_INT;
}

static int destroy_flow_action(struct ibv_flow_action *a)
{
	NOSUP_INT;
}

static struct ibv_flow_action *
create_flow_action_esp(struct ibv_context *c, struct ibv_flow_action_esp_attr *a)
{
	NOSUP_PTR;
}

static int modify_qp_rate_limit(struct ibv_qp *qp,
				struct ibv_qp_rate_limit_attr *a)
{
	NOSUP_INT;
}

static struct ibv_pd *alloc_parent_domain(struct ibv_context *c,
					  struct ibv_parent_domain_init_attr *a)
{
	NOSUP_PTR;
}

static int dealloc_td(struct ibv_td *td)
{
	NOSUP_INT;
}

static struct ibv_td *alloc_td(struct ibv_context *c, struct ibv_td_init_attr *a)
{
	NOSUP_PTR;
}

static int modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *a)
{
	NOSUP_INT;
}

static int post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *op,
			struct ibv_ops_wr **bad)
{
	*bad = op;
	NOSUP_INT;
}

static int destroy_rwq_ind_table(struct ibv_rwq_ind_table *t)
{
	NOSUP_INT;
}

static struct ibv_rwq_ind_table *
create_rwq_ind_table(struct ibv_context *c, struct ibv_rwq_ind_table_init_attr *a)
{
	NOSUP_PTR;
}

static int destroy_wq(struct ibv_wq *wq)
{
	NOSUP_INT;
}

static int modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *a)
{
	NOSUP_INT;
}

static struct ibv_wq *create_wq(struct ibv_context *c, struct ibv_wq_init_attr *a)
{
	NOSUP_PTR;
}

static int query_rt_values(struct ibv_context *c, struct ibv_values_ex *v)
{
	NOSUP_INT;
}

static struct ibv_cq_ex *create_cq_ex(struct ibv_context *c,
				      struct ibv_cq_init_attr_ex *a)
{
	NOSUP_PTR;
}

static int query_device_ex(struct ibv_context *c,
			   const struct ibv_query_device_ex_input *in,
			   struct ibv_device_attr_ex *a, size_t sz)
{
	NOSUP_INT;
}

static int destroy_flow(struct ibv_flow *f)
{
	NOSUP_INT;
}

static struct ibv_flow *create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	NOSUP_PTR;
}

static void abi_placeholder(void)
{
}

static struct ibv_qp *open_qp(struct ibv_context *c, struct ibv_qp_open_attr *a)
{
	NOSUP_PTR;
}

static struct ibv_qp *create_qp_ex(struct ibv_context *c,
				   struct ibv_qp_init_attr_ex *a)
{
	NOSUP_PTR;
}

static int get_srq_num(struct ibv_srq *srq, uint32_t *n)
{
	NOSUP_INT;
}

static struct ibv_srq *create_srq_ex(struct ibv_context *c,
				     struct ibv_srq_init_attr_ex *a)
{
	NOSUP_PTR;
}

static struct ibv_xrcd *open_xrcd(struct ibv_context *c,
				  struct ibv_xrcd_init_attr *a)
{
	NOSUP_PTR;
}

static int close_xrcd(struct ibv_xrcd *x)
{
	NOSUP_INT;
}

void sv_set_dummy_ops(struct verbs_context *v)
{
	struct ibv_context_ops *o = &v->context.ops;

	o->_compat_query_device = compat_query_device;
	o->_compat_query_port = compat_query_port;
	o->_compat_alloc_pd = compat_nosup;
	o->_compat_dealloc_pd = compat_nosup;
	o->_compat_reg_mr = compat_nosup;
	o->_compat_rereg_mr = compat_nosup;
	o->_compat_dereg_mr = compat_nosup;
	o->alloc_mw = alloc_mw;
	o->bind_mw = bind_mw;
	o->dealloc_mw = dealloc_mw;
	o->_compat_create_cq = compat_nosup;
	o->poll_cq = poll_cq;
	o->req_notify_cq = req_notify_cq;
	o->_compat_cq_event = compat_nosup;
	o->_compat_resize_cq = compat_nosup;
	o->_compat_destroy_cq = compat_nosup;
	o->_compat_create_srq = compat_nosup;
	o->_compat_modify_srq = compat_nosup;
	o->_compat_query_srq = compat_nosup;
	o->_compat_destroy_srq = compat_nosup;
	o->post_srq_recv = post_srq_recv;
	o->_compat_create_qp = compat_nosup;
	o->_compat_query_qp = compat_nosup;
	o->_compat_modify_qp = compat_nosup;
	o->_compat_destroy_qp = compat_nosup;
	o->post_send = post_send;
	o->post_recv = post_recv;
	o->_compat_create_ah = compat_nosup;
	o->_compat_destroy_ah = compat_nosup;
	o->_compat_attach_mcast = compat_nosup;
	o->_compat_detach_mcast = compat_nosup;
	o->_compat_async_event = compat_nosup;

	v->query_port = query_port;
	v->advise_mr = advise_mr;
	v->alloc_null_mr = alloc_null_mr;
	v->read_counters = read_counters;
	v->attach_counters_point_flow = attach_counters_point_flow;
	v->create_counters = create_counters;
	v->destroy_counters = destroy_counters;
	v->reg_dm_mr = reg_dm_mr;
	v->alloc_dm = alloc_dm;
	v->free_dm = free_dm;
	v->modify_flow_action_esp = modify_flow_action_esp;
	v->destroy_flow_action = destroy_flow_action;
	v->create_flow_action_esp = create_flow_action_esp;
	v->modify_qp_rate_limit = modify_qp_rate_limit;
	v->alloc_parent_domain = alloc_parent_domain;
	v->dealloc_td = dealloc_td;
	v->alloc_td = alloc_td;
	v->modify_cq = modify_cq;
	v->post_srq_ops = post_srq_ops;
	v->destroy_rwq_ind_table = destroy_rwq_ind_table;
	v->create_rwq_ind_table = create_rwq_ind_table;
	v->destroy_wq = destroy_wq;
	v->modify_wq = modify_wq;
	v->create_wq = create_wq;
	v->query_rt_values = query_rt_values;
	v->create_cq_ex = create_cq_ex;
	v->priv = NULL;
	v->query_device_ex = query_device_ex;
	v->ibv_destroy_flow = destroy_flow;
	v->ABI_placeholder2 = abi_placeholder;
	v->ibv_create_flow = create_flow;
	v->ABI_placeholder1 = abi_placeholder;
	v->open_qp = open_qp;
	v->create_qp_ex = create_qp_ex;
	v->get_srq_num = get_srq_num;
	v->create_srq_ex = create_srq_ex;
	v->open_xrcd = open_xrcd;
	v->close_xrcd = close_xrcd;
}

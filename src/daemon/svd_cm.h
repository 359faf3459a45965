/* SPDX-License-Identifier: MIT */
/*
 * The connection manager inside softverbsd: what the kernel's rdma_ucm,
 * rdma_cm (cma.c) and ib_cm (cm.c) do for librdmacm:
 *
 *   cm.c       event channels, ids and their lifetimes, events, timers,
 *              the ops that need no address or connection logic
 *   cm_addr.c  addresses: local GIDs, port spaces, bind, resolve_addr,
 *              resolve_route, listen
 *   cm_ib*.c   the IB CM protocol (IBTA 12): REQ/MRA/REJ/REP/RTU/DREQ/DREP
 *              and SIDR_REQ/SIDR_REP between CM instances, the QP
 *              attributes they decide, connect/accept/reject/disconnect;
 *              cm_ib.c holds the connections and the design, the others
 *              one subject each (map: cm_ib_int.h)
 *
 *   cm_route.c the route and the neighbour towards another host
 *              (rdma_resolve_addr between hosts, the kernel's addr.c)
 *   cm_mad.c   struct svd_cm_msg <-> the bytes of a CM MAD
 *   cm_wire.c  CM MADs on QP1 over RoCE v2 (send, receive, check, count)
 *
 * CM messages travel between CM instances as struct svd_cm_msg, whose
 * fields are exactly those of the IB CM MADs.  On one host an instance
 * talks to itself (cm_ib.c "inbox"); between hosts the messages become
 * real CM MADs on QP1 over RoCE v2 (cm_wire.c).
 */
#ifndef SVD_CM_H
#define SVD_CM_H

#include "svd_int.h"
#include "sv_cm.h"

/* rdma_cm id states, in the kernel's order (enum rdma_cm_state). */
enum svd_cm_state {
	CMS_IDLE,
	CMS_ADDR_QUERY,
	CMS_ADDR_RESOLVED,
	CMS_ROUTE_QUERY,
	CMS_ROUTE_RESOLVED,
	CMS_CONNECT,
	CMS_DISCONNECT,
	CMS_ADDR_BOUND,
	CMS_LISTEN,
	CMS_DEVICE_REMOVAL,
	CMS_DESTROYING,
};

/* A one-shot timer on the daemon's clock (cm.c keeps them sorted). */
struct svd_timer {
	uint64_t at_ms;
	void (*fn)(struct svd_timer *t);
	struct svd_timer *prev, *next;
	int armed;
};
void svd_timer_arm(struct svd_timer *t, uint64_t in_ms);
void svd_timer_cancel(struct svd_timer *t);

/* A queued event: it counts for `owner` (the listener for a
 * CONNECT_REQUEST); `conn` is the id a CONNECT_REQUEST made, which is
 * destroyed with the event if the event is never fetched. */
struct svd_cm_evt {
	struct svd_cm_evt *next;
	struct svd_cm_id *owner;
	struct svd_cm_id *conn;
	struct sv_cm_event ev;
};

/* An event channel (the kernel's ucma file). */
struct svd_cm_chan {
	struct svd_watch w; /* daemon end of the event socket */
	uint32_t id;
	uint64_t token;
	pid_t pid;
	struct svd_cm_id *ids;
	struct svd_cm_evt *evq, **evq_tail;
	uint32_t owed;	 /* readiness bytes not yet written */
	int pollout;	 /* EPOLLOUT armed */
	struct svd_cm_chan *next;
};

/* The ids bound to one port of one port space (the kernel's
 * rdma_bind_list). */
struct svd_cm_bind {
	uint32_t ps;
	uint16_t port;
	struct svd_cm_id *owners;
	struct svd_cm_bind *next;
};

struct svd_ibcm;

/* An rdma_cm id (the kernel's rdma_id_private). */
struct svd_cm_id {
	uint32_t handle;
	struct svd_cm_chan *chan;
	struct svd_cm_id *chan_prev, *chan_next;
	pid_t owner_pid;
	uint32_t ps;
	uint32_t qp_type;
	enum svd_cm_state state;
	union sv_sockaddr src, dst;
	/* Device binding: the source GID of the id (RoCE v2 GID of src). */
	int bound_dev;
	uint32_t sgid_index;
	uint8_t sgid[16], dgid[16];
	uint32_t ifindex;   /* netdev of the source address */
	uint32_t netdev_mtu;
	uint8_t hop_limit;
	int have_route;
	struct ibv_sa_path_rec path;
	/* Options (rdma_set_option). */
	uint8_t tos, tos_set;
	uint8_t reuseaddr;
	uint8_t afonly, afonly_set;
	uint8_t timeout, timeout_set;
	/* Port binding. */
	struct svd_cm_bind *bind;
	struct svd_cm_id *bind_next;
	/* Listening: free slots for unfetched CONNECT_REQUESTs. */
	int backlog;
	/* The listener whose CONNECT_REQUEST made this id, until fetched. */
	struct svd_cm_id *listener;
	/* Connection. */
	uint32_t seq_num; /* the PSN this side receives from (rq_psn) */
	uint32_t qkey;
	uint32_t qp_num;
	uint8_t srq;
	uint32_t ece_vendor_id, ece_attr_mod;
	uint32_t events_reported;
	struct svd_ibcm *cm;
	struct svd_timer addr_timer; /* resolution of a non-local address */
	uint64_t addr_deadline_ms;   /* its timeout_ms, on svd_now_ms's clock */
};

/* The largest private data of each CM message (IBTA 12.6). */
enum {
	CM_REQ_PDATA = 92,
	CM_MRA_PDATA = 222,
	CM_REJ_PDATA = 148,
	CM_REP_PDATA = 196,
	CM_RTU_PDATA = 224,
	CM_DREQ_PDATA = 220,
	CM_DREP_PDATA = 224,
	CM_SIDR_REQ_PDATA = 216,
	CM_SIDR_REP_PDATA = 136,
	CM_ARI_LEN = 72,
	CMA_HDR_LEN = 36, /* the rdma_cm header at the start of REQ/SIDR_REQ */
};

/* Attribute IDs of the CM class (IBTA Table 113). */
enum svd_cm_attr {
	CM_ATTR_REQ = 0x10,
	CM_ATTR_MRA = 0x11,
	CM_ATTR_REJ = 0x12,
	CM_ATTR_REP = 0x13,
	CM_ATTR_RTU = 0x14,
	CM_ATTR_DREQ = 0x15,
	CM_ATTR_DREP = 0x16,
	CM_ATTR_SIDR_REQ = 0x17,
	CM_ATTR_SIDR_REP = 0x18,
};

/* The CM MAD (IBTA 13.4.3 header, 12.6 messages) and QP1 (IBTA 13.5). */
enum {
	CM_MAD_LEN = 256,
	CM_MAD_BASE_VERSION = 1,
	CM_MAD_CLASS = 0x07,
	CM_MAD_CLASS_VERSION = 2,
	CM_MAD_METHOD_SEND = 0x03,
};
#define CM_GSI_QPN 1
#define CM_GSI_QKEY 0x80010000u
#define CM_DEFAULT_PKEY 0xffff

/*
 * One CM message: the fields of the IB CM MAD of that attribute, in host
 * order, one member per IBTA field (12.6.5 ff.).  cm_mad.c turns them
 * into the MAD's bytes; on one host they are handed over as they are.
 * sgid/dgid, tclass, hop_limit and flow_label address the MAD (the GRH of
 * the QP1 datagram: sent with them, or received with them), tid is the
 * MAD transaction id; wire says the message came from another host.
 */
struct svd_cm_msg {
	uint16_t attr_id;
	uint64_t tid;
	uint8_t sgid[16], dgid[16];
	uint8_t tclass, hop_limit;
	uint32_t flow_label;
	uint8_t wire;
	union {
		struct { /* REQ, 12.6.5 */
			uint32_t local_comm_id;
			uint64_t service_id;
			uint64_t local_ca_guid;
			uint32_t local_qkey;
			uint32_t local_qpn;
			uint8_t responder_resources;
			uint32_t local_eecn;
			uint8_t initiator_depth;
			uint32_t remote_eecn;
			uint8_t remote_cm_response_timeout;
			uint8_t transport_service_type; /* 0 RC, 1 UC, 3 extended */
			uint8_t flow_control;
			uint32_t starting_psn;
			uint8_t local_cm_response_timeout;
			uint8_t retry_count;
			uint16_t pkey;
			uint8_t path_mtu;
			uint8_t rdc_exists;
			uint8_t rnr_retry_count;
			uint8_t max_cm_retries;
			uint8_t srq;
			uint8_t ext_transport_type;
			/* Primary path (the alternate path is all zero). */
			uint16_t primary_local_lid, primary_remote_lid;
			uint8_t primary_local_gid[16], primary_remote_gid[16];
			uint32_t primary_flow_label;
			uint8_t primary_packet_rate;
			uint8_t primary_traffic_class;
			uint8_t primary_hop_limit;
			uint8_t primary_sl;
			uint8_t primary_subnet_local;
			uint8_t primary_local_ack_timeout;
			/* ECE (IBTA 1.4 VendorID + the ECE attribute). */
			uint32_t ece_vendor_id, ece_attr_mod;
			uint8_t private_data[CM_REQ_PDATA];
		} req;
		struct { /* MRA, 12.6.6 */
			uint32_t local_comm_id, remote_comm_id;
			uint8_t message_mraed; /* 0 REQ, 1 REP, 2 LAP */
			uint8_t service_timeout;
			uint8_t private_data[CM_MRA_PDATA];
		} mra;
		struct { /* REJ, 12.6.7 */
			uint32_t local_comm_id, remote_comm_id;
			uint8_t message_rejected; /* 0 REQ, 1 REP, 2 other */
			uint8_t reject_info_length;
			uint16_t reason;
			uint8_t ari[CM_ARI_LEN];
			uint8_t private_data[CM_REJ_PDATA];
		} rej;
		struct { /* REP, 12.6.8 */
			uint32_t local_comm_id, remote_comm_id;
			uint32_t local_qkey;
			uint32_t local_qpn;
			uint32_t local_eecn;
			uint32_t starting_psn;
			uint8_t responder_resources;
			uint8_t initiator_depth;
			uint8_t target_ack_delay;
			uint8_t failover_accepted;
			uint8_t flow_control;
			uint8_t rnr_retry_count;
			uint8_t srq;
			uint64_t local_ca_guid;
			uint32_t ece_vendor_id, ece_attr_mod;
			uint8_t private_data[CM_REP_PDATA];
		} rep;
		/* RTU, 12.6.9, and DREP, 12.6.11: the same fields. */
		struct svd_cm_reply {
			uint32_t local_comm_id, remote_comm_id;
			uint8_t private_data[CM_RTU_PDATA];
		} rtu, drep;
		struct { /* DREQ, 12.6.10 */
			uint32_t local_comm_id, remote_comm_id;
			uint32_t remote_qpn_eecn;
			uint8_t private_data[CM_DREQ_PDATA];
		} dreq;
		struct { /* SIDR_REQ, 12.11.1 */
			uint32_t request_id;
			uint16_t pkey;
			uint64_t service_id;
			uint8_t private_data[CM_SIDR_REQ_PDATA];
		} sidr_req;
		struct { /* SIDR_REP, 12.11.2 */
			uint32_t request_id;
			uint8_t status;
			uint8_t add_info_length;
			uint32_t qpn;
			uint64_t service_id;
			uint32_t qkey;
			uint8_t class_port_info[CM_ARI_LEN];
			uint8_t private_data[CM_SIDR_REP_PDATA];
		} sidr_rep;
	};
};

/* Reject reasons (IBTA 12.6.7 Table 108, the kernel's enum
 * ib_cm_rej_reason) and SIDR statuses used here. */
enum {
	CM_REJ_NO_RESOURCES = 3,
	CM_REJ_TIMEOUT = 4,
	CM_REJ_INVALID_COMM_ID = 6,
	CM_REJ_INVALID_SERVICE_ID = 8,
	CM_REJ_CONSUMER_DEFINED = 28,
	CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35,
	SIDR_SUCCESS = 0,
	SIDR_UNSUPPORTED = 1,
	SIDR_REJECT = 2,
};

/* CM timing as the kernel's rdma_cm sets it. */
enum {
	CMA_CM_RESPONSE_TIMEOUT = 20,
	CMA_MAX_CM_RETRIES = 15,
	CMA_IBOE_PACKET_LIFETIME = 18,
	CMA_MRA_SERVICE_TIMEOUT = 24,
	SVD_LOCAL_CA_ACK_DELAY = 15, /* the device's local_ca_ack_delay */
};
/* 4.096 us * 2^t, roughly, in ms (the kernel's cm_convert_to_ms). */
static inline uint64_t svd_cm_ms(unsigned t)
{
	return 1ULL << (t > 8 ? t - 8 : 0);
}

struct svd_req;

/* cm_route.c */
/* The source address the routing table picks towards dst (port 0): 0,
 * or the negative errno of no route (-ENETUNREACH, ...). */
int svd_cm_route_source(const union sv_sockaddr *dst, union sv_sockaddr *src);
/* Whether the next hop towards dst is resolved (ARP/ND answered): 1 yes
 * (or none is needed), 0 not yet (asked: try again later), or a negative
 * errno when there is no usable route. */
int svd_cm_neigh_resolve(const union sv_sockaddr *dst);

/* cm_mad.c */
/* Writes m as a CM MAD of CM_MAD_LEN bytes: 0, or -EINVAL for an
 * attribute it does not know. */
int svd_cm_mad_encode(const struct svd_cm_msg *m, uint8_t mad[CM_MAD_LEN]);
/* Reads a CM MAD of len bytes into *m (sgid, dgid and the other GRH
 * fields left zero): 0, or -EBADMSG when it is not a CM Send MAD of a
 * known attribute with every field in range (*m is then unspecified). */
int svd_cm_mad_decode(const uint8_t *mad, size_t len, struct svd_cm_msg *m);
const char *svd_cm_attr_name(uint16_t attr);
/* The field tables are consistent (unit test): 0 or -1. */
int svd_cm_mad_selfcheck(void);

/* cm_wire.c */
/* Sends m (its dgid another host's) as a CM MAD on QP1 over RoCE v2:
 * 0, or -errno (-ENETDOWN: our RoCE port is another process's). */
int svd_cm_wire_send(const struct svd_cm_msg *m);
/* Receives what waits for QP1: each CM MAD for us goes to svd_cm_recv(),
 * anything else is dropped and counted. */
void svd_cm_wire_run(void);
struct svd_cm_wire_stats {
	uint64_t tx;	     /* MADs sent */
	uint64_t tx_errors;  /* MADs the port refused (svd_gw_ud_send) */
	uint64_t rx;	     /* MADs received and handled */
	uint64_t rx_dropped; /* datagrams for QP1 dropped as bad */
};
void svd_cm_wire_stats(struct svd_cm_wire_stats *out);

/* cm.c */
/* Creates the CM's timer and wake-up descriptors (at daemon start, so
 * they are part of every baseline).  0 or a negative errno. */
int svd_cm_init(void);
/* Makes the event loop run svd_cm_inbox_run() soon. */
void svd_cm_kick(void);
extern uint32_t svd_cm_nchans; /* live channels (keep the daemon up) */
struct svd_cm_id *svd_cm_id_new(struct svd_cm_chan *chan, uint32_t ps,
				uint32_t qp_type, pid_t pid);
void svd_cm_id_destroy(struct svd_cm_id *id);
/* Queues an event for id (listener and new id for CONNECT_REQUEST). */
void svd_cm_post(struct svd_cm_id *owner, struct svd_cm_id *conn,
		 const struct sv_cm_event *ev);
/* A CONNECT_REQUEST for listener: queued if the backlog allows (the
 * listener's backlog drops by one until the event is fetched).  -ENOMEM
 * when the backlog is full. */
int svd_cm_post_request(struct svd_cm_id *listener, struct svd_cm_id *conn,
			const struct sv_cm_event *ev);
struct svd_cm_id *svd_cm_id_by_handle(uint32_t handle);
void svd_cm_readable(struct svd_watch *w, uint32_t events);
/* Whether the CM keeps the daemon busy (channels open). */
int svd_cm_busy(void);
void svd_cm_close_all(void);

/* cm_addr.c */
int svd_cm_any_addr(const union sv_sockaddr *a);
int svd_cm_addr_eq(const union sv_sockaddr *a, const union sv_sockaddr *b);
uint16_t svd_cm_port(const union sv_sockaddr *a); /* host order */
void svd_cm_set_port(union sv_sockaddr *a, uint16_t port);
socklen_t svd_cm_addr_len(const union sv_sockaddr *a);
void svd_cm_ip2gid(const union sv_sockaddr *a, uint8_t gid[16]);
/* Index of gid in the port's table, or -1. */
int svd_cm_gid_index(const uint8_t gid[16]);
/* Binds id to the device by its source address: -EADDRNOTAVAIL when the
 * address is not this host's, -ENODEV when it has no GID. */
int svd_cm_acquire_dev(struct svd_cm_id *id);
void svd_cm_release_port(struct svd_cm_id *id);
/* A listener goes: the port service hears that the port's REQs are no
 * longer ours when no other id of ours listens on it (cm_addr.c). */
void svd_cm_unlisten(struct svd_cm_id *id);
/* The ids listening on (ps, port) in state LISTEN, NULL-terminated walk:
 * the first listener, or NULL. */
struct svd_cm_bind *svd_cm_bind_find(uint32_t ps, uint16_t port);
int svd_cm_bind_addr(struct svd_cm_id *id, const union sv_sockaddr *a,
		     socklen_t len, pid_t caller);
int svd_op_cm_bind(struct svd_req *r);
int svd_op_cm_resolve_addr(struct svd_req *r);
int svd_op_cm_resolve_route(struct svd_req *r);
int svd_op_cm_listen(struct svd_req *r);
/* The route (path record) a resolved id uses. */
void svd_cm_make_path(struct svd_cm_id *id);
int svd_cm_set_ib_path(struct svd_cm_id *id, const void *optval,
		       uint32_t optlen);

/* cm_ib.c */
int svd_op_cm_connect(struct svd_req *r);
int svd_op_cm_accept(struct svd_req *r);
int svd_op_cm_reject(struct svd_req *r);
int svd_op_cm_disconnect(struct svd_req *r);
int svd_op_cm_notify(struct svd_req *r);
int svd_op_cm_init_qp_attr(struct svd_req *r);
/* The id goes away: the IB CM answers for it (REJ, DREQ, DREP ...) and
 * forgets it; a connection in timewait lives on without the id. */
void svd_ibcm_id_gone(struct svd_cm_id *id);
/* Runs the messages queued for this host (the inbox). */
void svd_cm_inbox_run(void);
/* Sends msg towards msg->dgid: this host's inbox, or the wire.  0, or
 * svd_cm_wire_send's -errno. */
int svd_cm_send(const struct svd_cm_msg *msg);
/* A message arrived (from the inbox or the wire): the state machine. */
void svd_cm_recv(const struct svd_cm_msg *msg);
void svd_ibcm_close_all(void);
uint32_t svd_ibcm_count(void);
/* What the IB CM holds and refused (`softverbs daemon status`). */
struct svd_ibcm_stats {
	uint32_t conns;		/* connections (struct svd_ibcm) alive */
	uint32_t half_open;	/* of those: a request received, not yet
				 * established or answered */
	uint64_t rej_listener;	/* REQs refused: the listener's bound */
	uint64_t rej_source;	/* REQs refused: the source's bound */
	uint64_t expired;	/* requests whose requester gave up unheard */
};
void svd_ibcm_stats(struct svd_ibcm_stats *out);

/* The cm id behind an op's sv_cm_hdr (cm.c): 0 and *out; -EINVAL for a
 * channel/token that does not match or an id of another channel, -ENOENT
 * for no such id (the kernel's ucma_get_ctx). */
int svd_cm_req_id(struct svd_req *r, struct svd_cm_id **out);

/* cm.c: the op table entries. */
int svd_op_cm_open(struct svd_req *r);
int svd_op_cm_get_event(struct svd_req *r);
int svd_op_cm_create_id(struct svd_req *r);
int svd_op_cm_destroy_id(struct svd_req *r);
int svd_op_cm_query(struct svd_req *r);
int svd_op_cm_set_option(struct svd_req *r);
int svd_op_cm_migrate(struct svd_req *r);
int svd_op_cm_join_mcast(struct svd_req *r);
int svd_cm_res_list(struct svd_req *r);

#define SVD_CM_OPS \
	[SV_OP_CM_OPEN] = { svd_op_cm_open, 0, 0 }, \
	[SV_OP_CM_GET_EVENT] = { svd_op_cm_get_event, sizeof(struct sv_cm_hdr), 0 }, \
	[SV_OP_CM_CREATE_ID] = { svd_op_cm_create_id, sizeof(struct sv_cm_create_req), 0 }, \
	[SV_OP_CM_DESTROY_ID] = { svd_op_cm_destroy_id, sizeof(struct sv_cm_hdr), 0 }, \
	[SV_OP_CM_BIND] = { svd_op_cm_bind, sizeof(struct sv_cm_addr_req), 0 }, \
	[SV_OP_CM_RESOLVE_ADDR] = { svd_op_cm_resolve_addr, sizeof(struct sv_cm_addr_req), 0 }, \
	[SV_OP_CM_RESOLVE_ROUTE] = { svd_op_cm_resolve_route, sizeof(struct sv_cm_int_req), 0 }, \
	[SV_OP_CM_QUERY] = { svd_op_cm_query, sizeof(struct sv_cm_hdr), 0 }, \
	[SV_OP_CM_INIT_QP_ATTR] = { svd_op_cm_init_qp_attr, sizeof(struct sv_cm_int_req), 0 }, \
	[SV_OP_CM_LISTEN] = { svd_op_cm_listen, sizeof(struct sv_cm_int_req), 0 }, \
	[SV_OP_CM_CONNECT] = { svd_op_cm_connect, sizeof(struct sv_cm_conn_req), 0 }, \
	[SV_OP_CM_ACCEPT] = { svd_op_cm_accept, sizeof(struct sv_cm_conn_req), 0 }, \
	[SV_OP_CM_REJECT] = { svd_op_cm_reject, sizeof(struct sv_cm_conn_req), 0 }, \
	[SV_OP_CM_DISCONNECT] = { svd_op_cm_disconnect, sizeof(struct sv_cm_hdr), 0 }, \
	[SV_OP_CM_NOTIFY] = { svd_op_cm_notify, sizeof(struct sv_cm_int_req), 0 }, \
	[SV_OP_CM_SET_OPTION] = { svd_op_cm_set_option, sizeof(struct sv_cm_opt_req), VAR_SIZE }, \
	[SV_OP_CM_MIGRATE] = { svd_op_cm_migrate, sizeof(struct sv_cm_migrate_req), 0 }, \
	[SV_OP_CM_JOIN_MCAST] = { svd_op_cm_join_mcast, sizeof(struct sv_cm_addr_req), 0 },

#endif

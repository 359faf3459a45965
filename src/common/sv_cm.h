/* SPDX-License-Identifier: MIT */
/*
 * The connection manager's part of the control protocol (sv_proto.h): what
 * librdmacm.so.1 (src/rdmacm) asks softverbsd (src/daemon/cm*.c), which
 * plays the kernel's rdma_ucm + rdma_cm + ib_cm.
 *
 * Event channels.  SV_OP_CM_OPEN makes one: the daemon keeps one end of a
 * SOCK_SEQPACKET socket pair and hands the other to the library, which
 * makes it the channel's fd (blocking, as /dev/infiniband/rdma_cm).  The
 * daemon keeps the events themselves, as the kernel does, and writes one
 * byte per queued event on the socket so that the fd polls readable;
 * rdma_get_cm_event reads a byte and fetches the event with
 * SV_OP_CM_GET_EVENT (-EAGAIN: the event was withdrawn since, because its
 * id was destroyed or migrated: read the next byte).  EOF on the socket
 * means the daemon (the device) is gone.  Closing the last copy of the fd
 * destroys every id of the channel (the kernel's ucma_close).
 *
 * Every other op names the channel and proves it holds it with the
 * channel's token (a random 64-bit secret only the creator learns): the
 * library cannot hand a channel to another process, so the token is as
 * good a capability as the fd and costs no descriptor passing per call.
 */
#ifndef SV_CM_H
#define SV_CM_H

#include <assert.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>

#define SV_CM_PDATA_MAX 256 /* RDMA_MAX_PRIVATE_DATA */

/* The socket addresses rdma_cm takes: IPv4 or IPv6 (no AF_IB). */
union sv_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};
static_assert(sizeof(union sv_sockaddr) == 28, "address layout");

/* | chan  | channel id from SV_OP_CM_OPEN                      |
 * | id    | the rdma_cm id the op acts on (0: the channel)     |
 * | token | the channel's secret                               | */
struct sv_cm_hdr {
	uint32_t chan;
	uint32_t id;
	uint64_t token;
};

/* CM_OPEN reply (+ fd {event socket}). */
struct sv_cm_open_rep {
	uint32_t chan;
	uint32_t pad;
	uint64_t token;
};

/* CM_CREATE_ID: | ps | enum rdma_port_space | qp_type | enum ibv_qp_type | */
struct sv_cm_create_req {
	struct sv_cm_hdr h;
	uint32_t ps;
	uint32_t qp_type;
};

/* CM_CREATE_ID reply: | id | handle of the new id |.
 * CM_DESTROY_ID, CM_MIGRATE reply: | events | events of the id fetched
 * with GET_EVENT so far (the library waits until it has acked them). */
struct sv_cm_id_rep {
	uint32_t id;
	uint32_t events;
};

/* CM_BIND (src), CM_RESOLVE_ADDR (src optional, dst), CM_JOIN_MCAST (dst).
 * | *_len | bytes of the address, 0 = absent | timeout_ms | resolve only | */
struct sv_cm_addr_req {
	struct sv_cm_hdr h;
	union sv_sockaddr src;
	union sv_sockaddr dst;
	uint32_t src_len;
	uint32_t dst_len;
	int32_t timeout_ms;
	uint32_t pad;
};

/* CM_RESOLVE_ROUTE (timeout_ms), CM_LISTEN (backlog), CM_INIT_QP_ATTR
 * (qp_state), CM_NOTIFY (enum ibv_event_type). */
struct sv_cm_int_req {
	struct sv_cm_hdr h;
	int32_t val;
	uint32_t pad;
};

/*
 * Connection parameters of CM_CONNECT, CM_ACCEPT and CM_REJECT, and of
 * the events that carry them (the kernel's ucma_abi_conn_param).
 *
 * | field               | meaning                                        |
 * |---------------------|------------------------------------------------|
 * | pdata, pdata_len    | private data (user part, without CMA header)   |
 * | qp_num, srq         | the QP (the library's, or the user's)          |
 * | qkey                | UD accept: Q_Key to hand out (0 = the default) |
 * | ece_vendor_id/attr  | ECE options (rdma_set_local_ece)              |
 * | reason              | REJECT: IB CM reject reason                    |
 * | responder_resources | .. rnr_retry_count, flow_control: as in       |
 * |   initiator_depth   |    struct rdma_conn_param                      |
 * | valid               | ACCEPT: 0 = no parameters (the active side's   |
 * |                     |   RTU, rdma_establish)                         |
 */
struct sv_cm_conn_param {
	uint8_t pdata[SV_CM_PDATA_MAX];
	uint32_t qp_num;
	uint32_t qkey;
	uint32_t ece_vendor_id;
	uint32_t ece_attr_mod;
	uint16_t reason;
	uint8_t pdata_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint8_t valid;
	uint8_t pad[2];
};
static_assert(sizeof(struct sv_cm_conn_param) == 284, "conn param layout");

struct sv_cm_conn_req {
	struct sv_cm_hdr h;
	struct sv_cm_conn_param p;
};

/* CM_SET_OPTION: optval follows (optlen bytes, at most SV_CM_OPT_MAX). */
#define SV_CM_OPT_MAX 4096
struct sv_cm_opt_req {
	struct sv_cm_hdr h;
	int32_t level;
	int32_t optname;
	uint32_t optlen;
	uint32_t pad;
	uint8_t optval[];
};

/* CM_MIGRATE: h names the new channel (and the id); old_* the channel the
 * id is on now. */
struct sv_cm_migrate_req {
	struct sv_cm_hdr h;
	uint32_t old_chan;
	uint32_t pad;
	uint64_t old_token;
};

/*
 * CM_QUERY reply: what rdma_cm_id.route shows.
 *
 * | field      | meaning                                                |
 * |------------|--------------------------------------------------------|
 * | src, dst   | addresses (family 0 when unset)                        |
 * | sgid, dgid | GIDs of the route (RoCE v2: the addresses as GIDs)     |
 * | node_guid  | the device the id is bound to, 0 = none yet            |
 * | pkey       | P_Key (0xffff)                                         |
 * | port_num   | port, 0 = not bound                                    |
 * | num_paths  | 0 or 1 path record below                               |
 */
struct sv_cm_query_rep {
	union sv_sockaddr src;
	union sv_sockaddr dst;
	uint8_t sgid[16];
	uint8_t dgid[16];
	uint64_t node_guid;
	uint16_t pkey;
	uint8_t port_num;
	uint8_t state;
	uint32_t num_paths;
	struct ibv_sa_path_rec path;
};

/* CM_INIT_QP_ATTR reply: rdma_init_qp_attr's answer. */
struct sv_cm_qp_attr_rep {
	struct ibv_qp_attr attr;
	int32_t mask;
	uint32_t pad;
};

/*
 * An event (CM_GET_EVENT reply), the kernel's ucma_abi_event_resp.
 *
 * | field     | meaning                                                 |
 * |-----------|---------------------------------------------------------|
 * | event     | enum rdma_cm_event_type                                 |
 * | status    | 0, a negative errno, or an IB CM reject / SIDR status   |
 * | id        | the id; CONNECT_REQUEST: the new id made for the request |
 * | listen_id | CONNECT_REQUEST: the listening id, else 0               |
 * | conn      | connection events: private data and parameters          |
 * | ah_attr   | UD ESTABLISHED: the address of the peer                 |
 * | ud_qpn    | UD: the peer's QPN and Q_Key                            |
 */
struct sv_cm_event {
	uint32_t event;
	int32_t status;
	uint32_t id;
	uint32_t listen_id;
	struct sv_cm_conn_param conn;
	struct ibv_ah_attr ah_attr;
	uint32_t ud_qpn;
	uint32_t ud_qkey;
};

#endif

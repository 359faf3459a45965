/* SPDX-License-Identifier: MIT */
/*
 * rdma_getaddrinfo: getaddrinfo(3) with the RDMA hints translated, as
 * rdma-core does it without an address resolution service (ibacm): the
 * first address found becomes the source (RAI_PASSIVE) or the
 * destination; the port space and QP type follow the socket type and
 * protocol unless the hints name them.  No AF_IB: there is no InfiniBand
 * addressing on a RoCE device.
 */
#include "cma_int.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

__be16 cma_get_port(const struct sockaddr *addr)
{
	switch (addr->sa_family) {
	case AF_INET:
		return ((const struct sockaddr_in *)addr)->sin_port;
	case AF_INET6:
		return ((const struct sockaddr_in6 *)addr)->sin6_port;
	default:
		return 0;
	}
}

static void to_ai(struct addrinfo *ai, const struct rdma_addrinfo *rai)
{
	memset(ai, 0, sizeof(*ai));
	if (rai->ai_flags & RAI_PASSIVE)
		ai->ai_flags = AI_PASSIVE;
	if (rai->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	if (rai->ai_family != AF_IB)
		ai->ai_family = rai->ai_family;
	switch (rai->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ai->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ai->ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (rai->ai_port_space) {
	case RDMA_PS_TCP:
		ai->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_IPOIB:
	case RDMA_PS_UDP:
		ai->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		if (ai->ai_socktype == SOCK_STREAM)
			ai->ai_protocol = IPPROTO_TCP;
		else if (ai->ai_socktype == SOCK_DGRAM)
			ai->ai_protocol = IPPROTO_UDP;
		break;
	default:
		break;
	}
}

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len,
		     const struct sockaddr *src, socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return cma_err(ENOMEM);
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

static int from_ai(struct rdma_addrinfo *rai, const struct rdma_addrinfo *hints,
		   const struct addrinfo *ai)
{
	if (hints->ai_qp_type)
		rai->ai_qp_type = hints->ai_qp_type;
	else if (ai->ai_socktype == SOCK_STREAM)
		rai->ai_qp_type = IBV_QPT_RC;
	else if (ai->ai_socktype == SOCK_DGRAM)
		rai->ai_qp_type = IBV_QPT_UD;
	if (hints->ai_port_space)
		rai->ai_port_space = hints->ai_port_space;
	else if (ai->ai_protocol == IPPROTO_TCP)
		rai->ai_port_space = RDMA_PS_TCP;
	else if (ai->ai_protocol == IPPROTO_UDP)
		rai->ai_port_space = RDMA_PS_UDP;
	rai->ai_family = ai->ai_family;
	if (ai->ai_flags & AI_PASSIVE) {
		rai->ai_flags = RAI_PASSIVE;
		if (ai->ai_canonname)
			rai->ai_src_canonname = strdup(ai->ai_canonname);
		return copy_addr(&rai->ai_src_addr, &rai->ai_src_len,
				 ai->ai_addr, ai->ai_addrlen);
	}
	if (ai->ai_canonname)
		rai->ai_dst_canonname = strdup(ai->ai_canonname);
	return copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr,
			 ai->ai_addrlen);
}

SV_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *rai = res;

		res = res->ai_next;
		free(rai->ai_connect);
		free(rai->ai_route);
		free(rai->ai_src_canonname);
		free(rai->ai_dst_canonname);
		free(rai->ai_src_addr);
		free(rai->ai_dst_addr);
		free(rai);
	}
}

SV_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints,
			       struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo nohints;
	struct rdma_addrinfo *rai;
	int ret = 0, gai = 0;

	if (!service && !node && !hints)
		return cma_err(EINVAL);
	if (!res)
		return cma_err(EINVAL);
	if (cma_init())
		return -1;
	if (hints && (hints->ai_flags & RAI_FAMILY) && hints->ai_family == AF_IB)
		return cma_err(EAFNOSUPPORT); /* no AF_IB on RoCE */
	rai = calloc(1, sizeof(*rai));
	if (!rai)
		return cma_err(ENOMEM);
	if (!hints)
		hints = &nohints;
	if (node || service) {
		struct addrinfo aih, *ai;

		if (hints != &nohints) {
			to_ai(&aih, hints);
			gai = getaddrinfo(node, service, &aih, &ai);
		} else {
			gai = getaddrinfo(node, service, NULL, &ai);
		}
		if (gai)
			goto err;
		ret = from_ai(rai, hints, ai);
		freeaddrinfo(ai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len,
					hints->ai_dst_addr, hints->ai_dst_len);
	}
	if (ret)
		goto err;
	if (!rai->ai_src_len && hints->ai_src_len) {
		ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len,
				hints->ai_src_addr, hints->ai_src_len);
		if (ret)
			goto err;
	}
	*res = rai;
	return 0;
err:
	rdma_freeaddrinfo(rai);
	/* As rdma-core: -1, errno holding getaddrinfo's EAI_* code when
	 * the lookup failed (ENOMEM otherwise). */
	return gai ? cma_err(gai) : -1;
}

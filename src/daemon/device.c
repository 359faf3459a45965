/* SPDX-License-Identifier: MIT */
/*
 * What the device reports about itself: attributes (from sv_param.h) and
 * its limits.  Its one port, GID table and MTU: port.c.
 */
#include "svd_int.h"
#include "sv_log.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* FNV-1a, enough to spread a host+namespace+user identity into a GUID. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

void svd_device_init(void)
{
	char host[256] = "";
	struct stat st;
	uint64_t h = 0xcbf29ce484222325ULL;
	uid_t uid = getuid();

	gethostname(host, sizeof(host) - 1);
	h = fnv1a(h, host, strlen(host));
	if (stat("/proc/self/ns/net", &st) == 0)
		h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
	h = fnv1a(h, &uid, sizeof(uid));
	h = fnv1a(h, svd.name, strlen(svd.name));
	/* EUI-64 with the locally administered bit set, multicast bit clear. */
	h = (h & ~(0x01ULL << 56)) | (0x02ULL << 56);
	svd.node_guid = htobe64(h);
}

/* .fd: each object of the type holds a descriptor in the daemon. */
static const struct {
	const char *name;
	enum svd_obj_type type;
	uint32_t max;
	int fd;
} limit_tab[] = {
	{ "pd", SVD_OBJ_PD, SV_MAX_PD, 0 },   { "mr", SVD_OBJ_MR, SV_MAX_MR, 0 },
	{ "dm", SVD_OBJ_DM, SV_MAX_DM, 1 },   { "mw", SVD_OBJ_MW, SV_MAX_MW, 0 },
	{ "cq", SVD_OBJ_CQ, SV_MAX_CQ, 1 },   { "qp", SVD_OBJ_QP, SV_MAX_QP, 1 },
	{ "srq", SVD_OBJ_SRQ, SV_MAX_SRQ, 1 }, { "ah", SVD_OBJ_AH, SV_MAX_AH, 0 },
	{ "xrcd", SVD_OBJ_XRCD, SV_MAX_XRCD, 1 },
};
#define NLIMITS (sizeof(limit_tab) / sizeof(limit_tab[0]))

/* Descriptors kept free of every limit: the listener, epoll, signalfd,
 * key table, log, the reserve (conn.c), engines' sockets and doorbells,
 * control channels, /proc reads. */
#define FD_HEADROOM 256

/*
 * The daemon must never promise what it cannot hold: ufiles, contexts,
 * dma-buf MRs and objects of the .fd types each take a descriptor, so if
 * their limits add up to more than RLIMIT_NOFILE allows (after the daemon
 * raised it, main.c), all of them shrink in proportion, and the device
 * reports the smaller object limits.
 */
static void fit_descriptors(uint32_t *lim)
{
	struct rlimit rl;
	uint64_t need = (uint64_t)SV_MAX_UFILES + SV_MAX_CONTEXTS +
			SV_MAX_DMABUF_MR, budget;

	svd.max_ufiles = SV_MAX_UFILES;
	svd.max_contexts = SV_MAX_CONTEXTS;
	svd.max_dmabuf = SV_MAX_DMABUF_MR;
	for (unsigned i = 0; i < NLIMITS; i++)
		if (limit_tab[i].fd)
			need += lim[limit_tab[i].type];
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= need + FD_HEADROOM)
		return;
	budget = rl.rlim_cur > 2 * FD_HEADROOM ? rl.rlim_cur - FD_HEADROOM :
						 FD_HEADROOM;
#define FIT(x) ((uint32_t)((uint64_t)(x) * budget / need) ?: 1)
	svd.max_ufiles = FIT(SV_MAX_UFILES);
	svd.max_contexts = FIT(SV_MAX_CONTEXTS);
	svd.max_dmabuf = FIT(SV_MAX_DMABUF_MR);
	for (unsigned i = 0; i < NLIMITS; i++)
		if (limit_tab[i].fd)
			lim[limit_tab[i].type] = FIT(lim[limit_tab[i].type]);
#undef FIT
	sv_info("descriptor limit %llu: %u ufiles, %u contexts, %u dma-buf "
		"MRs, %u DMs at most",
		(unsigned long long)rl.rlim_cur, svd.max_ufiles,
		svd.max_contexts, svd.max_dmabuf, lim[SVD_OBJ_DM]);
}

int svd_limits_init(const char *spec)
{
	uint32_t lim[SVD_OBJ_NTYPES];
	char buf[256], *tok, *save;

	for (unsigned i = 0; i < NLIMITS; i++)
		lim[limit_tab[i].type] = limit_tab[i].max;
	if (spec && *spec) {
		if (strlen(spec) >= sizeof(buf))
			goto bad;
		snprintf(buf, sizeof(buf), "%s", spec);
		for (tok = strtok_r(buf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(tok, '='), *end;
			unsigned long v;
			unsigned i;

			if (!eq)
				goto bad;
			*eq = 0;
			for (i = 0; i < NLIMITS; i++)
				if (!strcmp(tok, limit_tab[i].name))
					break;
			v = strtoul(eq + 1, &end, 10);
			if (i == NLIMITS || end == eq + 1 || *end ||
			    v > limit_tab[i].max)
				goto bad;
			lim[limit_tab[i].type] = (uint32_t)v;
		}
	}
	fit_descriptors(lim);
	memcpy(svd.limit, lim, sizeof(lim));
	return 0;
bad:
	for (unsigned i = 0; i < NLIMITS; i++)
		lim[limit_tab[i].type] = limit_tab[i].max;
	fit_descriptors(lim);
	memcpy(svd.limit, lim, sizeof(lim));
	sv_warn("SOFTVERBS_LIMITS=%s: want name=N,... with names pd mr dm "
		"mw cq qp srq ah and N no more than the default; ignored",
		spec);
	return -EINVAL;
}

/* The kernel's IB_UVERBS_DEVICE_ATOMIC_WRITE (ib_user_verbs.h, Linux 6.2),
 * what rxe reports in device_cap_flags_ex; rdma-core v44's headers have no
 * name for it.  ibv_wr_atomic_write and IBV_WR_ATOMIC_WRITE work (RC). */
#define SV_DEVICE_ATOMIC_WRITE (1ULL << 40)

void svd_query_device(struct ibv_device_attr_ex *ax)
{
	struct ibv_device_attr *a = &ax->orig_attr;

	memset(ax, 0, sizeof(*ax));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "softverbs %s", SV_VERSION);
	a->node_guid = svd.node_guid;
	a->sys_image_guid = svd.node_guid;
	a->max_mr_size = SV_MAX_MR_SIZE;
	a->page_size_cap = SV_PAGE_SIZE_CAP;
	a->vendor_id = SV_VENDOR_ID;
	a->vendor_part_id = SV_VENDOR_PART_ID;
	a->hw_ver = SV_HW_VER;
	a->max_qp = (int)svd.limit[SVD_OBJ_QP];
	a->max_qp_wr = SV_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
			      IBV_DEVICE_AUTO_PATH_MIG | IBV_DEVICE_CHANGE_PHY_PORT |
			      IBV_DEVICE_UD_AV_PORT_ENFORCE | IBV_DEVICE_PORT_ACTIVE_EVENT |
			      IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN |
			      IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_N_NOTIFY_CQ |
			      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_MGT_EXTENSIONS |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B |
			      /* XRC domains, SRQs, INI and TGT QPs, data
			       * (mlx5 sets it; rxe has no XRC) */
			      IBV_DEVICE_XRC;
	a->max_sge = SV_MAX_SGE;
	a->max_sge_rd = SV_MAX_SGE_RD;
	a->max_cq = (int)svd.limit[SVD_OBJ_CQ];
	a->max_cqe = SV_MAX_CQE;
	a->max_mr = (int)svd.limit[SVD_OBJ_MR];
	a->max_pd = (int)svd.limit[SVD_OBJ_PD];
	a->max_qp_rd_atom = SV_MAX_QP_RD_ATOM;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = SV_MAX_RES_RD_ATOM;
	a->max_qp_init_rd_atom = SV_MAX_QP_RD_ATOM;
	a->max_ee_init_rd_atom = 0;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_mw = (int)svd.limit[SVD_OBJ_MW];
	a->max_mcast_grp = SV_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SV_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = SV_MAX_TOTAL_MCAST_QP_ATTACH;
	a->max_ah = (int)svd.limit[SVD_OBJ_AH];
	a->max_srq = (int)svd.limit[SVD_OBJ_SRQ];
	a->max_srq_wr = SV_MAX_SRQ_WR;
	a->max_srq_sge = SV_MAX_SRQ_SGE;
	a->max_pkeys = SV_MAX_PKEYS;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;

	ax->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	ax->odp_caps.per_transport_caps.rc_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
		IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	ax->odp_caps.per_transport_caps.uc_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
	ax->odp_caps.per_transport_caps.ud_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
	/* Completion stamps are CLOCK_MONOTONIC ns (src/verbs/cq.c): a
	 * 1 GHz clock of 64 bits. */
	ax->completion_timestamp_mask = UINT64_MAX;
	ax->hca_core_clock = 1000000; /* kHz */
	ax->device_cap_flags_ex = a->device_cap_flags | SV_DEVICE_ATOMIC_WRITE;
	ax->raw_packet_caps = 0;
	ax->max_dm_size = SV_MAX_DM_SIZE;
	ax->pci_atomic_caps.fetch_add = 0;
	/* An ODP MR is any MR here (checked when a WQE executes, never
	 * pinned): XRC takes them as RC does. */
	ax->xrc_odp_caps = ax->odp_caps.per_transport_caps.rc_odp_caps;
	ax->phys_port_cnt_ex = 1;
}

unsigned svd_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n ? n - 1 : 0; /* not the directory's own fd */
}

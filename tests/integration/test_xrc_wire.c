/* SPDX-License-Identifier: MIT */
/*
 * XRC between two hosts (issue 24 item 1): network namespaces A and B,
 * RoCE v2 on a veth (wire_util.h).  B holds an XRC domain, two XRC SRQs
 * with their CQ and the TGT QP; A's INI QP connects to it and sends a
 * SEND with immediate and a SEND of three MTUs (each to one SRQ), an RDMA
 * WRITE, a READ of it and both atomics, then a SEND to an SRQ number no
 * SRQ has (IBV_WC_REM_INV_REQ_ERR).  B checks its receives: in the SRQ
 * named, wc.qp_num its TGT QP's, src_qp the INI QP's.
 *
 * On the veth (tcpdump, read by tshark): the XRC opcodes (IBTA 9.2.1,
 * transport 101: 0xa0 | RC's), every request with its XRCETH right after
 * the BTH naming the SRQ its WR named (a RETH or AtomicETH after that);
 * the answers XRC READ responses, atomic ACKs, ACKs and a NAK, to the INI
 * QP; nothing malformed.  tshark 4.0 names the opcodes ("Extended
 * Reliable Connection (XRC) - SEND First") but has no decoder for the
 * XRCETH (it shows the bytes after the BTH as "Unknown/Vendor Specific
 * Data"), so the SRQ number is read from the UDP payload it gives.
 *
 * The wire is always packets; test_xrc_wire_packets runs it again with
 * SOFTVERBS_DIRECT=0 all the same (each host's own QPs).
 */
#include "wire_util.h"

#include <fcntl.h>
#include <stdlib.h>

#define NOSRQ 0xfffffeu /* numbers go up from 1: no SRQ has it */

/* What B tells A. */
struct xcard {
	uint32_t qpn; /* the TGT QP */
	uint32_t srqn[2];
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

/* What A tells B. */
struct icard {
	uint32_t qpn; /* the INI QP */
	uint32_t pad;
	union ibv_gid gid;
};

static struct ibv_context *dev_open(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	CHECK(l && l[0]);
	ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	CHECK(ctx);
	return ctx;
}

/* RESET -> RTS of an XRC QP towards dqpn at gid (sgid index ours; PSN
 * 7 both ways), with RC's requester (INI) or responder (TGT) attributes. */
static void xconnect(struct ibv_qp *qp, uint32_t dqpn,
		     const union ibv_gid *gid, int sgid)
{
	int tgt = qp->qp_type == IBV_QPT_XRC_RECV;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = (uint8_t)sgid;
	a.ah_attr.grh.hop_limit = 8;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
					       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					       IBV_QP_RQ_PSN |
					       (tgt ? IBV_QP_MAX_DEST_RD_ATOMIC |
							      IBV_QP_MIN_RNR_TIMER :
						      0)),
		 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	/* 1.07 s a try, 8 tries: B answers the SEND to no SRQ (its NAK)
	 * while it sleeps in a pipe read -- its daemon and progress thread
	 * must wake first, which on a loaded machine under ASan took longer
	 * than timeout 14's half second in all (IBV_WC_RETRY_EXC_ERR). */
	a.timeout = 18;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
					       IBV_QP_TIMEOUT |
					       (tgt ? 0 : IBV_QP_RETRY_CNT |
							       IBV_QP_RNR_RETRY |
							       IBV_QP_MAX_QP_RD_ATOMIC)),
		 0);
}

static void cq_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 200000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		CHECK(n >= 0);
		if (n)
			return;
		usleep(100);
	}
	sv_test_fail(__FILE__, __LINE__, "no completion in 20 s");
}

/* Host B: the domain, the SRQs, the TGT QP; checks its two receives. */
static void host_b(int in, int out)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_xrcd *x;
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
	};
	struct ibv_srq *srq[2];
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp *tgt;
	struct xcard me;
	struct icard ini;
	struct ibv_wc wc;
	uint8_t *buf, want[3000], ok = 1;
	int gid;

	ctx = dev_open();
	gid = gid_index(ctx, IP4_B);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq);
	CHECK_EQ(posix_memalign((void **)&buf, 4096, BUF), 0);
	memset(buf, 0, BUF);
	mr = ibv_reg_mr(pd, buf, BUF,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	x = ibv_open_xrcd(ctx, &xa);
	CHECK(mr && x);
	memset(&me, 0, sizeof(me));
	for (int i = 0; i < 2; i++) {
		struct ibv_srq_init_attr_ex a;
		struct ibv_sge g = { (uintptr_t)buf + 65536 * (uint32_t)i, 4096,
				     mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100u + (uint32_t)i,
					  .sg_list = &g, .num_sge = 1 },
				   *bad;

		memset(&a, 0, sizeof(a));
		a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		a.srq_type = IBV_SRQT_XRC;
		a.pd = pd;
		a.xrcd = x;
		a.cq = cq;
		a.attr.max_wr = 8;
		a.attr.max_sge = 1;
		srq[i] = ibv_create_srq_ex(ctx, &a);
		CHECK(srq[i]);
		CHECK_EQ(ibv_get_srq_num(srq[i], &me.srqn[i]), 0);
		CHECK_EQ(ibv_post_srq_recv(srq[i], &wr, &bad), 0);
	}
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	qa.xrcd = x;
	tgt = ibv_create_qp_ex(ctx, &qa);
	CHECK(tgt);
	me.qpn = tgt->qp_num;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	CHECK_EQ(ibv_query_gid(ctx, 1, gid, &me.gid), 0);
	put(out, &me, sizeof(me));
	get(in, &ini, sizeof(ini));
	xconnect(tgt, ini.qpn, &ini.gid, gid);
	put(out, &ok, 1);
	/* The SEND with immediate to SRQ 1, then three MTUs to SRQ 0. */
	for (int i = 0; i < 2; i++) {
		cq_wc(cq, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, i ? 100 : 101);
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
		CHECK_EQ(wc.byte_len, i ? 3000 : 2000);
		CHECK_EQ(wc.qp_num, tgt->qp_num);
		CHECK_EQ(wc.src_qp, ini.qpn);
		CHECK_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM), !i);
		if (!i)
			CHECK_EQ(ntohl(wc.imm_data), 0x5ec0de);
	}
	for (int i = 0; i < 3000; i++)
		want[i] = (uint8_t)(i * 7 + 1);
	CHECK(!memcmp(buf + 65536, want, 2000));
	CHECK(!memcmp(buf, want, 3000));
	put(out, &ok, 1);
	get(in, &ok, 1); /* A is done with our memory */
	/* A's last SEND named no SRQ: the TGT QP went to ERR. */
	{
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		CHECK_EQ(ibv_query_qp(tgt, &a, IBV_QP_STATE, &ia), 0);
		CHECK_EQ(a.qp_state, IBV_QPS_ERR);
	}
	CHECK_EQ(ibv_destroy_qp(tgt), 0);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(ibv_destroy_srq(srq[i]), 0);
	CHECK_EQ(ibv_close_xrcd(x), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	free(buf);
}

static void xpost(struct ibv_qp *qp, struct ibv_mr *mr, uint64_t id,
		  enum ibv_wr_opcode op, uint8_t *laddr, uint32_t len,
		  uint32_t srqn, uint64_t raddr, uint32_t rkey, uint64_t add,
		  uint64_t swap)
{
	struct ibv_sge g = { (uintptr_t)laddr, len, mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &g;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(0x5ec0de);
	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
}

/* tcpdump on A's end of the veth into pcap, once it listens. */
static pid_t dump_start(const char *pcap, const char *log)
{
	pid_t pid = fork();
	char line[256];

	CHECK(pid >= 0);
	if (pid == 0) {
		if (!freopen(log, "w", stderr))
			_exit(126);
		execlp("tcpdump", "tcpdump", "-i", "svw0", "-U", "-n", "-w", pcap,
		       "udp", "port", "4791", (char *)NULL);
		_exit(127);
	}
	for (int i = 0;; i++) {
		FILE *f = fopen(log, "r");
		int up = 0;

		while (f && fgets(line, sizeof(line), f))
			up |= !!strstr(line, "listening on");
		if (f)
			fclose(f);
		if (up)
			return pid;
		if (i > 200)
			sv_test_fail(__FILE__, __LINE__, "tcpdump did not start");
		sv_test_sleep_ms(50);
	}
}

/* What tshark read: packets by opcode, requests whose XRCETH named the
 * SRQ their WR did, and what was not as it should be (malformed, not
 * XRC, a request's XRCETH naming another SRQ). */
struct seen {
	int op[256];
	int srqn_ok, bad;
};

/* The SRQ the request of PSN psn names: A's WRs in order from PSN 7 (MTU
 * 1024): SEND with immediate of 2000 bytes (7, 8) to SRQ 1; SEND of 3000
 * (9..11) to SRQ 0; WRITE of 3000 (12..14) to SRQ 1; READ (15, its
 * answers 15..17), both atomics (18, 19) to SRQ 0; the SEND to no SRQ
 * (20). */
static uint32_t srqn_want(uint32_t psn, const struct xcard *b)
{
	if (psn <= 8 || (psn >= 12 && psn <= 14))
		return b->srqn[1];
	return psn == 20 ? NOSRQ : b->srqn[0];
}

static void read_capture(const char *pcap, const struct xcard *b,
			 const struct icard *a, struct seen *s)
{
	char cmd[512], line[8192];
	FILE *f;

	memset(s, 0, sizeof(*s));
	snprintf(cmd, sizeof(cmd),
		 "tshark -n -r %s -T fields -E separator=/t "
		 "-e infiniband.bth.opcode -e infiniband.bth.destqp "
		 "-e infiniband.bth.psn -e _ws.malformed -e udp.payload "
		 "-e ip.dst 2>/dev/null",
		 pcap);
	f = popen(cmd, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f)) {
		char *fld[6] = { 0 }, *p = line;
		unsigned opc, qpn, psn, srqn, b0;
		const char *h;

		line[strcspn(line, "\n")] = 0;
		for (int i = 0; i < 6; i++)
			fld[i] = p ? strsep(&p, "\t") : NULL;
		if (!fld[0] || !*fld[0])
			continue;
		opc = (unsigned)strtoul(fld[0], NULL, 0) & 0xff;
		qpn = fld[1] ? (unsigned)strtoul(fld[1], NULL, 0) : 0;
		psn = fld[2] ? (unsigned)strtoul(fld[2], NULL, 0) : 0;
		s->op[opc]++;
		h = fld[4];
		/* Malformed, not XRC, or a UDP payload that does not start
		 * with the BTH tshark read. */
		if ((fld[3] && *fld[3]) || (opc & 0xe0) != 0xa0 || !h ||
		    strlen(h) < 32 || sscanf(h, "%2x", &b0) != 1 || b0 != opc) {
			s->bad++;
			continue;
		}
		/* By direction, not QPN: the two hosts' daemons may well
		 * have given the INI and the TGT QP the same number. */
		if (!fld[5] || strcmp(fld[5], IP4_B)) {
			/* An answer, to the INI QP: no XRCETH to read. */
			if (qpn != a->qpn)
				s->bad++;
			continue;
		}
		if (qpn != b->qpn) {
			s->bad++;
			continue;
		}
		/* A request to the TGT QP: after the 12-byte BTH, a reserved
		 * byte 0 and the SRQ number its WR named. */
		if (sscanf(h + 24, "%8x", &srqn) == 1 &&
		    srqn == srqn_want(psn, b))
			s->srqn_ok++;
		else
			s->bad++;
	}
	pclose(f);
}

SV_TEST_T(wire_xrc, 180)
{
	struct host h;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp *ini;
	struct xcard b;
	struct icard me;
	struct ibv_wc wc;
	struct seen s;
	char pcap[64], log[64];
	uint8_t *buf, ok = 1;
	uint64_t v;
	pid_t dump;
	int gid;

	if (system("command -v tshark >/dev/null 2>&1 && "
		   "command -v tcpdump >/dev/null 2>&1"))
		sv_test_skip("no tshark or tcpdump here (scripts/deps.sh)");
	/* One datagram per packet on both hosts (B inherits it): tcpdump on
	 * a veth sees a train (UDP_SEGMENT, eng_wire.c) whole, before the
	 * kernel cuts it into the packets a NIC would send. */
	CHECK_EQ(setenv("SOFTVERBS_TUNE", "wire_gso=0", 1), 0);
	two_hosts(&h, host_b);
	snprintf(pcap, sizeof(pcap), "/tmp/sv-xrcw-%d.pcap", (int)getpid());
	snprintf(log, sizeof(log), "/tmp/sv-xrcw-%d.log", (int)getpid());
	dump = dump_start(pcap, log);
	ctx = dev_open();
	gid = gid_index(ctx, IP4_A);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq);
	CHECK_EQ(posix_memalign((void **)&buf, 4096, BUF), 0);
	memset(buf, 0, BUF);
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_SEND;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.pd = pd;
	qa.send_cq = cq;
	qa.cap.max_send_wr = 16;
	qa.cap.max_send_sge = 1;
	ini = ibv_create_qp_ex(ctx, &qa);
	CHECK(ini);
	memset(&me, 0, sizeof(me));
	me.qpn = ini->qp_num;
	CHECK_EQ(ibv_query_gid(ctx, 1, gid, &me.gid), 0);
	get(h.from, &b, sizeof(b));
	put(h.to, &me, sizeof(me));
	xconnect(ini, b.qpn, &b.gid, gid);
	get(h.from, &ok, 1);
	for (int i = 0; i < 3000; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	xpost(ini, mr, 1, IBV_WR_SEND_WITH_IMM, buf, 2000, b.srqn[1], 0, 0, 0,
	      0);
	xpost(ini, mr, 2, IBV_WR_SEND, buf, 3000, b.srqn[0], 0, 0, 0, 0);
	/* Three MTUs into B's memory under its SRQs' PD, read back. */
	xpost(ini, mr, 3, IBV_WR_RDMA_WRITE, buf, 3000, b.srqn[1],
	      b.addr + 8192, b.rkey, 0, 0);
	xpost(ini, mr, 4, IBV_WR_RDMA_READ, buf + 8192, 3000, b.srqn[0],
	      b.addr + 8192, b.rkey, 0, 0);
	xpost(ini, mr, 5, IBV_WR_ATOMIC_FETCH_AND_ADD, buf + 16384, 8,
	      b.srqn[0], b.addr + 16384, b.rkey, 5, 0);
	xpost(ini, mr, 6, IBV_WR_ATOMIC_CMP_AND_SWP, buf + 16392, 8,
	      b.srqn[0], b.addr + 16384, b.rkey, 5, 9);
	for (uint64_t id = 1; id <= 6; id++) {
		cq_wc(cq, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, id);
	}
	CHECK(!memcmp(buf + 8192, buf, 3000));
	memcpy(&v, buf + 16384, 8);
	CHECK_EQ(v, 0);
	memcpy(&v, buf + 16392, 8);
	CHECK_EQ(v, 5);
	get(h.from, &ok, 1); /* B saw its receives */
	/* No SRQ has that number: an invalid request. */
	xpost(ini, mr, 7, IBV_WR_SEND, buf, 16, NOSRQ, 0, 0, 0, 0);
	cq_wc(cq, &wc);
	CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
	CHECK_EQ(wc.wr_id, 7);

	/* Every packet was on the veth before its completion: wait until
	 * tcpdump has written them (the last: the NAK of the last SEND),
	 * with B still there (the veth goes with its namespace). */
	for (int i = 0; i < 100; i++) {
		read_capture(pcap, &b, &me, &s);
		if (s.op[0xb1] >= 2 && s.op[0xa4] >= 1)
			break;
		sv_test_sleep_ms(100);
	}
	kill(dump, SIGINT);
	CHECK(sv_test_wait_child(dump) >= 0);
	read_capture(pcap, &b, &me, &s);
	/* Each XRC opcode A's WRs make, each naming its SRQ (12 requests);
	 * B's answers: READ responses, two atomic ACKs, ACKs and the last
	 * SEND's NAK.  (More of some where a loaded machine made a
	 * requester resend.) */
	if (s.bad || s.op[0xa0] < 2 || s.op[0xa3] < 1 || s.op[0xa1] < 1 ||
	    s.op[0xa2] < 1 || s.op[0xa6] < 1 || s.op[0xa7] < 1 ||
	    s.op[0xa8] < 1 || s.op[0xac] < 1 || s.op[0xb4] < 1 ||
	    s.op[0xb3] < 1 || s.op[0xa4] < 1 || s.op[0xad] < 1 ||
	    s.op[0xae] < 1 || s.op[0xaf] < 1 || s.op[0xb2] < 2 ||
	    s.op[0xb1] < 2 || s.srqn_ok < 12)
		sv_test_fail(__FILE__, __LINE__,
			     "tshark: %d not as they should be; %d requests "
			     "naming their SRQ; SEND %d/%d/%d/%d/%d WRITE "
			     "%d/%d/%d READ %d resp %d/%d/%d atomics %d/%d "
			     "ack %d atomic ack %d",
			     s.bad, s.srqn_ok, s.op[0xa0], s.op[0xa1],
			     s.op[0xa2], s.op[0xa3], s.op[0xa4], s.op[0xa6],
			     s.op[0xa7], s.op[0xa8], s.op[0xac], s.op[0xad],
			     s.op[0xae], s.op[0xaf], s.op[0xb3], s.op[0xb4],
			     s.op[0xb1], s.op[0xb2]);
	unlink(pcap);
	unlink(log);
	put(h.to, &ok, 1);
	CHECK_EQ(host_done(&h), 0);
	CHECK_EQ(ibv_destroy_qp(ini), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	free(buf);
	a_done();
}

/*
 * A TGT QP between hosts that changes hands on B: a maker process makes
 * it and never modifies it; the opener (another process of B, the same
 * domain by file) opens it, brings it to RTS through its handle and has
 * the SRQs.  The maker's engine serves the QP, answering on the flow the
 * opener's modify named (the address vector in the QP's region); then
 * the maker exits with its handle open, and the opener's engine takes
 * the QP over: A's next SEND, WRITE and READ complete as before.
 */
static void tk_maker(const char *path, int s)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.oflags = O_CREAT,
	};
	struct ibv_qp_init_attr_ex qa;
	struct ibv_context *ctx;
	struct ibv_xrcd *x;
	struct ibv_qp *tgt;
	char c;

	xa.fd = open(path, O_RDONLY);
	if (xa.fd < 0)
		_exit(2);
	ctx = dev_open();
	x = ibv_open_xrcd(ctx, &xa);
	if (!x)
		_exit(3);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	qa.xrcd = x;
	tgt = ibv_create_qp_ex(ctx, &qa);
	if (!tgt)
		_exit(4);
	put(s, &tgt->qp_num, sizeof(tgt->qp_num));
	get(s, &c, 1);
	_exit(0); /* with the QP, the XRCD and the context open */
}

static void host_b_takeover(int in, int out)
{
	char path[] = "/tmp/sv-xrcw-XXXXXX";
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.oflags = O_CREAT,
	};
	struct ibv_qp_open_attr oa;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_xrcd *x;
	struct ibv_srq *srq[2];
	struct ibv_qp *tgt;
	struct xcard me;
	struct icard ini;
	struct ibv_wc wc;
	uint8_t *buf, want[3000], ok = 1;
	int gid, sv[2], st;
	pid_t maker;
	uint32_t qpn;

	xa.fd = mkstemp(path);
	CHECK(xa.fd >= 0);
	/* The maker first, while we have no thread. */
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	maker = fork();
	CHECK(maker >= 0);
	if (maker == 0) {
		close(sv[0]);
		tk_maker(path, sv[1]);
	}
	close(sv[1]);
	get(sv[0], &qpn, sizeof(qpn));
	ctx = dev_open();
	gid = gid_index(ctx, IP4_B);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq);
	CHECK_EQ(posix_memalign((void **)&buf, 4096, BUF), 0);
	memset(buf, 0, BUF);
	mr = ibv_reg_mr(pd, buf, BUF,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ);
	x = ibv_open_xrcd(ctx, &xa);
	CHECK(mr && x);
	memset(&me, 0, sizeof(me));
	for (int i = 0; i < 2; i++) {
		struct ibv_srq_init_attr_ex a;
		struct ibv_sge g = { (uintptr_t)buf + 65536 * (uint32_t)i, 4096,
				     mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100u + (uint32_t)i,
					  .sg_list = &g, .num_sge = 1 },
				   *bad;

		memset(&a, 0, sizeof(a));
		a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		a.srq_type = IBV_SRQT_XRC;
		a.pd = pd;
		a.xrcd = x;
		a.cq = cq;
		a.attr.max_wr = 8;
		a.attr.max_sge = 1;
		srq[i] = ibv_create_srq_ex(ctx, &a);
		CHECK(srq[i]);
		CHECK_EQ(ibv_get_srq_num(srq[i], &me.srqn[i]), 0);
		CHECK_EQ(ibv_post_srq_recv(srq[i], &wr, &bad), 0);
	}
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
		       IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = qpn;
	oa.xrcd = x;
	oa.qp_type = IBV_QPT_XRC_RECV;
	tgt = ibv_open_qp(ctx, &oa);
	CHECK(tgt);
	me.qpn = qpn;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	CHECK_EQ(ibv_query_gid(ctx, 1, gid, &me.gid), 0);
	put(out, &me, sizeof(me));
	get(in, &ini, sizeof(ini));
	xconnect(tgt, ini.qpn, &ini.gid, gid);
	put(out, &ok, 1);
	for (int i = 0; i < 3000; i++)
		want[i] = (uint8_t)(i * 7 + 1);
	/* The first SEND, to SRQ 0, served by the maker. */
	cq_wc(cq, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 100);
	CHECK_EQ(wc.byte_len, 2000);
	CHECK_EQ(wc.qp_num, qpn);
	CHECK_EQ(wc.src_qp, ini.qpn);
	CHECK(!memcmp(buf, want, 2000));
	/* The maker goes; A sends on. */
	put(sv[0], &ok, 1);
	CHECK_EQ(waitpid(maker, &st, 0), maker);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(sv[0]);
	put(out, &ok, 1);
	cq_wc(cq, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 101);
	CHECK_EQ(wc.byte_len, 3000);
	CHECK_EQ(wc.qp_num, qpn);
	CHECK(!memcmp(buf + 65536, want, 3000));
	put(out, &ok, 1);
	get(in, &ok, 1); /* A is done with our memory */
	CHECK_EQ(ibv_destroy_qp(tgt), 0);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(ibv_destroy_srq(srq[i]), 0);
	CHECK_EQ(ibv_close_xrcd(x), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	close(xa.fd);
	unlink(path);
	free(buf);
}

SV_TEST_T(wire_xrc_takeover, 180)
{
	struct host h;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp *ini;
	struct xcard b;
	struct icard me;
	struct ibv_wc wc;
	uint8_t *buf, ok = 1;
	int gid;

	two_hosts(&h, host_b_takeover);
	ctx = dev_open();
	gid = gid_index(ctx, IP4_A);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq);
	CHECK_EQ(posix_memalign((void **)&buf, 4096, BUF), 0);
	memset(buf, 0, BUF);
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_SEND;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.pd = pd;
	qa.send_cq = cq;
	qa.cap.max_send_wr = 16;
	qa.cap.max_send_sge = 1;
	ini = ibv_create_qp_ex(ctx, &qa);
	CHECK(ini);
	memset(&me, 0, sizeof(me));
	me.qpn = ini->qp_num;
	CHECK_EQ(ibv_query_gid(ctx, 1, gid, &me.gid), 0);
	get(h.from, &b, sizeof(b));
	put(h.to, &me, sizeof(me));
	xconnect(ini, b.qpn, &b.gid, gid);
	get(h.from, &ok, 1);
	for (int i = 0; i < 3000; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	xpost(ini, mr, 1, IBV_WR_SEND, buf, 2000, b.srqn[0], 0, 0, 0, 0);
	cq_wc(cq, &wc);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 1);
	get(h.from, &ok, 1); /* B's maker is gone */
	xpost(ini, mr, 2, IBV_WR_SEND, buf, 3000, b.srqn[1], 0, 0, 0, 0);
	xpost(ini, mr, 3, IBV_WR_RDMA_WRITE, buf, 3000, b.srqn[1],
	      b.addr + 8192, b.rkey, 0, 0);
	xpost(ini, mr, 4, IBV_WR_RDMA_READ, buf + 8192, 3000, b.srqn[0],
	      b.addr + 8192, b.rkey, 0, 0);
	for (uint64_t id = 2; id <= 4; id++) {
		cq_wc(cq, &wc);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, id);
	}
	CHECK(!memcmp(buf + 8192, buf, 3000));
	get(h.from, &ok, 1); /* B saw its receives */
	put(h.to, &ok, 1);
	CHECK_EQ(host_done(&h), 0);
	CHECK_EQ(ibv_destroy_qp(ini), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	free(buf);
	a_done();
}

SV_TEST_MAIN()

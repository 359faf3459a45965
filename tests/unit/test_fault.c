/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the fault plans' grammar (src/common/sv_fault.c,
 * docs/faults.md): each kind parses to what the library acts on, both
 * separators and the names with or without their prefix are taken, every
 * mistake is refused with a reason that names it, and the draw is a pure
 * function of (seed, plan, k) near the probability asked.
 */
#include "sv_fault.h"
#include "unit_test.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <string.h>

static int parse(const char *s, struct sv_fault_plan *p, char *why)
{
	return sv_fault_parse(s, strlen(s), p, why, 128);
}

static void kinds(void)
{
	struct sv_fault_plan p;
	char why[128];

	EXPECT(parse("qp=12,drop=0.25,nth=3-5,seed=7", &p, why) == 0);
	EXPECT(p.kind == SV_FK_PACKET && p.pkt == SV_FP_DROP);
	EXPECT(p.qpn == 12 && p.qp_ord == 0 && p.peer == SV_FAULT_ANY);
	EXPECT(p.p == 0.25 && p.lo == 3 && p.hi == 5);
	EXPECT(p.has_seed && p.seed == 7);
	EXPECT(!strcmp(p.text, "qp=12,drop=0.25,nth=3-5,seed=7"));

	EXPECT(parse(" qp=#2:dup:nth=4+ ", &p, why) == 0); /* ':' too */
	EXPECT(p.kind == SV_FK_PACKET && p.pkt == SV_FP_DUP && p.p == 1);
	EXPECT(p.qp_ord == 2 && p.qpn == SV_FAULT_ANY);
	EXPECT(p.lo == 4 && p.hi == UINT64_MAX);
	EXPECT(!strcmp(p.text, "qp=#2:dup:nth=4+"));

	EXPECT(parse("gid=::ffff:192.0.2.7,peer=9:drop", &p, why) == 0);
	EXPECT(p.has_gid && p.gid[10] == 0xff && p.gid[15] == 7);
	EXPECT(p.peer == 9 && p.pkt == SV_FP_DROP);
	EXPECT(parse("gid=192.0.2.7,dup", &p, why) == 0);
	EXPECT(p.has_gid && p.gid[11] == 0xff && p.gid[12] == 192);
	EXPECT(parse("peer=0x40,reorder", &p, why) == 0);
	EXPECT(p.pkt == SV_FP_REORDER && p.peer == 0x40 && !p.lo && !p.hi);

	EXPECT(parse("qp=5,status=IBV_WC_RETRY_EXC_ERR,after=3,count=2", &p,
		     why) == 0);
	EXPECT(p.kind == SV_FK_STATUS && p.status == IBV_WC_RETRY_EXC_ERR);
	EXPECT(p.after == 3 && p.count == 2);
	EXPECT(parse("status=rem_access_err", &p, why) == 0);
	EXPECT(p.status == IBV_WC_REM_ACCESS_ERR && p.count == 1 && !p.recv);
	EXPECT(parse("qp=1,delay=5ms,nth=2", &p, why) == 0);
	EXPECT(p.kind == SV_FK_PACKET && p.pkt == SV_FP_DELAY &&
	       p.delay_ns == 5000000 && p.p == 1 && p.lo == 2);
	EXPECT(parse("p=0.25,delay=200", &p, why) == 0);
	EXPECT(p.delay_ns == 200000 && p.p == 0.25);
	EXPECT(parse("delay=1s,p=0.5", &p, why) == 0);
	EXPECT(p.delay_ns == 1000000000ull && p.p == 0.5);
	EXPECT(parse("qp=#2,status=LOC_LEN_ERR,recv,after=2", &p, why) == 0);
	EXPECT(p.kind == SV_FK_STATUS && p.recv && p.after == 2);

	EXPECT(parse("event=QP_FATAL,qp=#1", &p, why) == 0);
	EXPECT(p.kind == SV_FK_EVENT && p.event == IBV_EVENT_QP_FATAL);
	EXPECT(sv_fault_event_elem(p.event) == SV_FE_QP);
	EXPECT(parse("event=IBV_EVENT_PORT_ERR", &p, why) == 0);
	EXPECT(sv_fault_event_elem(p.event) == SV_FE_PORT);
	EXPECT(sv_fault_event_elem(IBV_EVENT_DEVICE_FATAL) == SV_FE_DEVICE);
	EXPECT(sv_fault_event_elem(IBV_EVENT_CQ_ERR) == SV_FE_CQ);

	EXPECT(parse("verb=ibv_reg_mr,errno=ENOMEM,nth=2", &p, why) == 0);
	EXPECT(p.kind == SV_FK_VERB && p.verb == SV_FV_REG_MR);
	EXPECT(p.err == ENOMEM && p.lo == 2 && p.hi == 2);
	EXPECT(parse("verb=post_send,errno=12", &p, why) == 0);
	EXPECT(p.verb == SV_FV_POST_SEND && p.err == 12);
	EXPECT(p.lo == 1 && p.hi == 1); /* once, the first call */

	EXPECT(parse("seed=9", &p, why) == 0);
	EXPECT(p.kind == SV_FK_SEED && p.seed == 9);
}

static void refused(const char *s, const char *reason)
{
	struct sv_fault_plan p;
	char why[128] = "";

	EXPECT(parse(s, &p, why) == -EINVAL);
	if (!strstr(why, reason)) {
		fprintf(stderr, "FAIL '%s': reason '%s' lacks '%s'\n", s, why,
			reason);
		failures++;
	}
}

static void mistakes(void)
{
	char long_plan[300];

	refused("", "empty");
	refused("qp=1,bogus=2", "unknown key 'bogus'");
	refused("qp=1", "no action");
	refused("qp=1,drop,dup", "one of");
	refused("qp=1,drop=1.5", "probability");
	refused("qp=1,drop=-0.1", "probability");
	refused("qp=0x1000000,drop", "QP number");
	refused("qp=#0,drop", "K-th");
	refused("qp=3,qp=#1,drop", "not both");
	refused("gid=fe80::1,qp=3,drop", "not with qp=");
	refused("gid=nope,drop", "GID as IPv6");
	refused("qp=1,drop,nth=0", "nth=");
	refused("qp=1,drop,nth=5-3", "nth=");
	refused("qp=1,drop,nth=x", "nth=");
	refused("qp=1,drop,after=2", "after=");
	refused("verb=ibv_reg_mr,errno=EIO,after=2", "after=");
	refused("qp=1,status=RETRY_EXC_ERR,nth=2", "nth=");
	refused("event=PORT_ERR,nth=2", "nth=");
	refused("qp=1,drop,count=2", "count=");
	refused("qp=1,status=SUCCESS", "error status");
	refused("qp=1,status=NOPE", "error status");
	refused("event=QP_SAD", "IBV_EVENT_");
	refused("verb=ibv_open_device,errno=EIO", "verbs a plan can fail");
	refused("verb=ibv_reg_mr", "errno=");
	refused("verb=ibv_reg_mr,errno=ENOTANERRNO", "E* name");
	refused("verb=ibv_reg_mr,errno=EIO,qp=1", "names no QP");
	refused("qp=1,drop,errno=EIO", "verb=");
	refused("qp=1,status=RETRY_EXC_ERR,count=0", "count=");
	refused("qp=1,drop,recv", "recv belongs");
	refused("qp=1,delay", "delay=T");
	refused("qp=1,delay=0", "delay=T");
	refused("qp=1,delay=11s", "delay=T");
	refused("qp=1,delay=5h", "delay=T");
	refused("qp=1,drop,p=0.5", "p= belongs");
	refused("qp=1,delay=1ms,p=2", "p=P");
	refused("qp=1,delay=1ms,drop", "one of");
	refused("qp=1,status=LOC_LEN_ERR,recv=1", "no value");
	memset(long_plan, 'x', sizeof(long_plan) - 1);
	long_plan[sizeof(long_plan) - 1] = 0;
	refused(long_plan, "longer than");
	EXPECT(sv_fault_is_plan("drop:0.1", 8) == 0);
	EXPECT(sv_fault_is_plan("qp=1,drop", 9) == 1);
}

static void draws(void)
{
	int under = 0;

	for (uint64_t k = 1; k <= 10000; k++) {
		double d = sv_fault_draw(7, 1, k);

		EXPECT(d >= 0 && d < 1);
		EXPECT(d == sv_fault_draw(7, 1, k)); /* a pure function */
		under += d < 0.3;
	}
	EXPECT(under > 2700 && under < 3300);
	EXPECT(sv_fault_draw(7, 1, 5) != sv_fault_draw(8, 1, 5));
	EXPECT(sv_fault_draw(7, 1, 5) != sv_fault_draw(7, 2, 5));
}

static void names(void)
{
	EXPECT(!strcmp(sv_fault_verb_name(SV_FV_MODIFY_QP), "ibv_modify_qp"));
	EXPECT(!strcmp(sv_fault_status_name(IBV_WC_WR_FLUSH_ERR), "WR_FLUSH_ERR"));
	EXPECT(!strcmp(sv_fault_event_name(IBV_EVENT_PATH_MIG), "PATH_MIG"));
	EXPECT(!strcmp(sv_fault_errno_name(EAGAIN), "EAGAIN"));
	EXPECT(!strcmp(sv_fault_verb_name(SV_FV_N), "?"));
}

int main(void)
{
	kinds();
	mistakes();
	draws();
	names();
	return unit_result();
}

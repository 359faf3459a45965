/* SPDX-License-Identifier: MIT */
/*
 * A program (or a plugin such as libfabric's verbs provider, loaded by
 * Open MPI) dlopens libibverbs.so.1, opens the device, creates QPs, moves
 * data and dlcloses the library without closing anything.  The library's
 * progress thread must never run in unmapped code: the library is linked
 * -z nodelete (as a library with threads should be), so the process lives
 * on and exits cleanly.
 *
 * This program does not link libibverbs (a link would keep it loaded and
 * prove nothing): it loads it by name, the way a plugin does, and calls
 * only exported symbols and verbs.h's inline data-path calls.  Every case
 * runs in a fresh child (an exec of this program, leak checking off: the
 * objects are abandoned on purpose), and the child's exit status is the
 * verdict: a crash after dlclose shows as a signal.
 *
 *   test_dlclose           all cases
 *   test_dlclose CASE      one case, in this process
 */
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FAIL(...)                                                              \
	do {                                                                   \
		fprintf(stderr, "test_dlclose: " __VA_ARGS__);                 \
		fputc('\n', stderr);                                           \
		exit(2);                                                       \
	} while (0)

/* The exported verbs we need, looked up in the dlopened library. */
struct lib {
	void *h;
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	struct ibv_context *(*open_device)(struct ibv_device *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *,
				    struct ibv_comp_channel *, int);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
};

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p)
		FAIL("dlsym %s: %s", name, dlerror());
	return p;
}

static void lib_open(struct lib *l)
{
	l->h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!l->h)
		FAIL("dlopen: %s", dlerror());
	l->get_device_list = sym(l->h, "ibv_get_device_list");
	l->free_device_list = sym(l->h, "ibv_free_device_list");
	l->open_device = sym(l->h, "ibv_open_device");
	l->alloc_pd = sym(l->h, "ibv_alloc_pd");
	l->reg_mr = sym(l->h, "ibv_reg_mr");
	l->create_cq = sym(l->h, "ibv_create_cq");
	l->create_qp = sym(l->h, "ibv_create_qp");
	l->modify_qp = sym(l->h, "ibv_modify_qp");
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

struct ep {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static void ep_new(struct lib *l, struct ibv_context *ctx, struct ibv_pd *pd,
		   struct ep *e)
{
	struct ibv_qp_init_attr ia;

	e->cq = l->create_cq(ctx, 64, NULL, NULL, 0);
	if (!e->cq)
		FAIL("create_cq: %s", strerror(errno));
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = e->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	e->qp = l->create_qp(pd, &ia);
	if (!e->qp)
		FAIL("create_qp: %s", strerror(errno));
}

static void ep_connect(struct lib *l, struct ep *e, uint32_t dqpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (l->modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 1;
	if (l->modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					    IBV_QP_MAX_DEST_RD_ATOMIC |
					    IBV_QP_MIN_RNR_TIMER))
		FAIL("to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (l->modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
					    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					    IBV_QP_RNR_RETRY |
					    IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("to RTS");
}

/* Opens the device and makes a connected RC pair with traffic on it (the
 * progress thread is up and busy); leaves everything open. */
static void open_and_use(struct lib *l, int traffic)
{
	static char buf[2][65536];
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ep a, b;
	int n = 0;

	list = l->get_device_list(&n);
	if (!list || n < 1)
		FAIL("no device");
	ctx = l->open_device(list[0]);
	l->free_device_list(list);
	if (!ctx)
		FAIL("open_device: %s", strerror(errno));
	pd = l->alloc_pd(ctx);
	if (!pd)
		FAIL("alloc_pd");
	mr = l->reg_mr(pd, buf, sizeof(buf),
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		FAIL("reg_mr: %s", strerror(errno));
	ep_new(l, ctx, pd, &a);
	ep_new(l, ctx, pd, &b);
	ep_connect(l, &a, b.qp->qp_num);
	ep_connect(l, &b, a.qp->qp_num);
	for (int i = 0; i < traffic; i++) {
		struct ibv_sge s = { (uintptr_t)buf[0], 4096, mr->lkey };
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;
		int got = 0;

		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)buf[1];
		wr.wr.rdma.rkey = mr->rkey;
		if (ibv_post_send(a.qp, &wr, &bad))
			FAIL("post_send");
		for (int k = 0; k < 100000 && !got; k++) {
			got = ibv_poll_cq(a.cq, 1, &wc);
			if (!got)
				usleep(20);
		}
		if (got != 1 || wc.status != IBV_WC_SUCCESS)
			FAIL("write %d: %d/%d", i, got, got ? (int)wc.status : -1);
	}
	/* Leave a write in flight too: the thread has work at dlclose. */
	if (traffic) {
		struct ibv_sge s = { (uintptr_t)buf[0], 65536, mr->lkey };
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = (uintptr_t)buf[1];
		wr.wr.rdma.rkey = mr->rkey;
		ibv_post_send(a.qp, &wr, &bad);
	}
}

/* ---- cases: each runs in its own process ------------------------------ */

static void case_idle_qp(void)
{
	struct lib l;

	lib_open(&l);
	open_and_use(&l, 0);
	if (dlclose(l.h))
		FAIL("dlclose: %s", dlerror());
	sleep_ms(300); /* the progress thread's timers fire meanwhile */
}

static void case_busy_qp(void)
{
	struct lib l;

	lib_open(&l);
	open_and_use(&l, 20);
	if (dlclose(l.h))
		FAIL("dlclose: %s", dlerror());
	sleep_ms(300);
}

/* Loaded again after the dlclose (a plugin unloaded and reloaded): the
 * same library, still working. */
static void case_reload(void)
{
	struct lib l;

	lib_open(&l);
	open_and_use(&l, 5);
	dlclose(l.h);
	lib_open(&l);
	open_and_use(&l, 5);
	dlclose(l.h);
	sleep_ms(100);
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "idle_qp", case_idle_qp },
	{ "busy_qp", case_busy_qp },
	{ "reload", case_reload },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Runs one case in a fresh process of this program; its verdict. */
static int run_child(const char *self, const char *name)
{
	char opts[512];
	const char *asan = getenv("ASAN_OPTIONS");
	pid_t pid;
	int st;

	/* The case abandons its objects on purpose. */
	snprintf(opts, sizeof(opts), "%s%sdetect_leaks=0", asan ? asan : "",
		 asan && *asan ? ":" : "");
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		setenv("ASAN_OPTIONS", opts, 1);
		alarm(60);
		execl(self, self, name, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			FAIL("waitpid: %s", strerror(errno));
	if (WIFSIGNALED(st)) {
		printf("FAIL %s: killed by signal %d (%s)\n", name, WTERMSIG(st),
		       strsignal(WTERMSIG(st)));
		return 1;
	}
	if (WEXITSTATUS(st)) {
		printf("FAIL %s: exit %d\n", name, WEXITSTATUS(st));
		return 1;
	}
	printf("ok %s\n", name);
	return 0;
}

int main(int argc, char **argv)
{
	char sock[64], cmd[4200];
	const char *cli = getenv("SOFTVERBS");
	int failed = 0;

	if (argc == 2) {
		for (unsigned i = 0; i < NCASES; i++)
			if (!strcmp(argv[1], cases[i].name)) {
				cases[i].fn();
				return 0; /* exit handlers run with the lib gone */
			}
		FAIL("no case %s", argv[1]);
	}
	/* Our own daemon, stopped at the end. */
	snprintf(sock, sizeof(sock), "svtest.dlclose.%d", (int)getpid());
	setenv("SOFTVERBS_SOCKET", sock, 1);
	for (unsigned i = 0; i < NCASES; i++)
		failed += run_child("/proc/self/exe", cases[i].name);
	if (cli) {
		snprintf(cmd, sizeof(cmd), "'%s' daemon stop >/dev/null 2>&1", cli);
		if (system(cmd)) {
			/* Not running any more: fine. */
		}
	}
	printf("%u passed, %d failed\n", (unsigned)NCASES - failed, failed);
	return failed ? 1 : 0;
}

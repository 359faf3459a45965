/* SPDX-License-Identifier: MIT */
/*
 * The misuse checker: SOFTVERBS_CHECK=1 (docs/checker.md lists the codes).
 *
 * A NIC answers a wrong post with a bare status (IBV_WC_LOC_PROT_ERR, a QP
 * in ERR) long after the post, and knows nothing of the program.  The
 * library sees every post with the objects it names, so when asked it
 * says at once what is wrong and where: one line per misuse and site,
 * "softverbs-check: CODE <objects>; called from <function>", on stderr
 * and, through a thread of the checker's own (a report is made under the
 * data path's locks, where a call to the daemon must not wait), in the
 * daemon's log.
 *
 * Cost.  sv_check_on is read from the environment once, when the library
 * is loaded; every hook in the verbs is SV_CHECK(...) (check.h), a load
 * and a branch predicted not taken.  Nothing below runs without it: the
 * object lists, the ring of deregistered keys and the at-exit count exist
 * only for a checked process.
 *
 * What the library can see, and so what is checked here:
 *  - at post: the QP's state, each SGE against the MR its lkey names (this
 *    process's MRs, then the device's key table for the MRs of other
 *    processes), the mapping under the SGE (sv_mem_check, the probe
 *    ibv_reg_mr uses), runs of unsignaled WRs as long as the send queue;
 *  - at modify: the attribute mask against the transition table of qp.c,
 *    and the attributes of both ends when the peer is a QP of this process;
 *  - at create/resize/destroy: CQ depths, dependants, outstanding work;
 *  - at poll: a lost completion (the CQ's overflow flag), and the remote
 *    key or receive behind IBV_WC_REM_ACCESS_ERR / IBV_WC_RNR_RETRY_EXC_ERR
 *    from the WQE still in the send ring;
 *  - at exit: what was left.
 * What only the responder sees (its own side of a refused access, a SEND
 * with no receive as it arrives) belongs to the engine's responder, which
 * may report through sv_check_report.
 *
 * Locks: reg_lock guards the object lists and the ring, seen_lock the
 * reported sites; both are leaves taken after the caller's queue locks.
 * The lists hold pointers to live objects only: a verb removes its object
 * (sv_check_obj) before it frees it.  Fields of another QP's send ring are
 * read without its sq_lock (a checker's view may be one post late).
 */
#include "check_int.h"
#include "sv_client.h"
#include "sv_keytab.h"
#include "sv_proto.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int sv_check_on;

/* --------------------------------------------------------- reporting -- */

#define SEEN_CAP 4096u /* distinct sites remembered (then all are told) */

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[SEEN_CAP];
static unsigned nseen;

/* 1 when h was reported before; else remembers it. */
static int seen_before(uint64_t h)
{
	int ret = 0;

	h |= 1; /* 0 marks an empty slot */
	pthread_mutex_lock(&seen_lock);
	if (nseen < SEEN_CAP * 3 / 4) {
		unsigned i = (unsigned)(h % SEEN_CAP);

		while (seen[i] && seen[i] != h)
			i = (i + 1) % SEEN_CAP;
		if (seen[i])
			ret = 1;
		else {
			seen[i] = h;
			nseen++;
		}
	}
	pthread_mutex_unlock(&seen_lock);
	return ret;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h;
}

/* The first frame outside this library after it: "fn+0xoff (object)" into buf, its
 * address into *pc.  Empty when the stack cannot be walked. */
static void find_caller(char *buf, size_t cap, uintptr_t *pc)
{
	void *fr[32];
	Dl_info self, di, named;
	int n = backtrace(fr, 32), inside = 0, first = -1, pick = -1;
	const char *obj;

	buf[0] = 0;
	*pc = 0;
	if (!dladdr((void *)find_caller, &self))
		return;
	/* The first frame outside this library after one inside it (the
	 * frames before are backtrace's own, a sanitizer's interceptor of it
	 * among them) -- or, in the same object a few frames on, the first
	 * with a name: an unoptimised build calls verbs.h's static inline
	 * wrappers (ibv_post_send ...) as local functions, which have none. */
	for (int i = 0; i < n; i++) {
		if (!dladdr(fr[i], &di))
			continue;
		if (di.dli_fbase == self.dli_fbase) {
			inside = 1;
			continue;
		}
		if (!inside)
			continue;
		if (first < 0) {
			first = i;
			named = di;
		} else if (di.dli_fbase != named.dli_fbase || i > first + 3) {
			break;
		}
		if (di.dli_sname) {
			pick = i;
			named = di;
			break;
		}
	}
	if (first < 0)
		return;
	if (pick < 0) {
		pick = first;
		dladdr(fr[first], &named);
	}
	*pc = (uintptr_t)fr[pick];
	obj = named.dli_fname ? strrchr(named.dli_fname, '/') : NULL;
	obj = obj ? obj + 1 : (named.dli_fname ? named.dli_fname : "?");
	if (named.dli_sname)
		snprintf(buf, cap, "%s+%#lx (%s)", named.dli_sname,
			 (unsigned long)(*pc - (uintptr_t)named.dli_saddr), obj);
	else
		snprintf(buf, cap, "%s+%#lx", obj,
			 (unsigned long)(*pc - (uintptr_t)named.dli_fbase));
}

/* ------------------------------------------------- the daemon's log -- */

/*
 * Lines wait in log_q for log_main, which hands each to the daemon
 * (SV_OP_FAULT, SV_FAULT_CHECK).  The thread starts with the first line,
 * and again in a child after fork (log_child).  The reporting thread
 * waits for its line to be sent, LOG_WAIT_MS at most: a program that
 * dies right after its misuse (_exit, a signal) would lose it otherwise,
 * and the wait is bounded because the reporter may hold a lock the
 * sending needs.  Past LOG_LINES waiting, a line reaches stderr only.
 * log_lock is a leaf.
 */
#define LOG_LINES 64
#define LOG_WAIT_MS 200

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_more = PTHREAD_COND_INITIALIZER;
static pthread_cond_t log_idle = PTHREAD_COND_INITIALIZER;
static char log_q[LOG_LINES][SV_FAULT_LINE];
static unsigned log_head, log_n, log_busy;
static uint64_t log_queued, log_sent; /* lines ever queued, sent */
static int log_up;

static void log_send(const char *line)
{
	struct sv_fault_req req = { .cmd = SV_FAULT_CHECK };
	uint64_t inst;
	int err;

	snprintf(req.text, sizeof(req.text), "%s", line);
	/* The daemon this process uses: never one started for a line. */
	if (sv_chan_probe())
		return;
	inst = sv_chan_instance(&err);
	if (inst)
		sv_call_simple(SV_OP_FAULT, 0, inst, -1, &req, sizeof(req),
			       NULL, 0);
}

static void *log_main(void *arg)
{
	char line[SV_FAULT_LINE];

	(void)arg;
	pthread_mutex_lock(&log_lock);
	for (;;) {
		while (!log_n)
			pthread_cond_wait(&log_more, &log_lock);
		memcpy(line, log_q[log_head], sizeof(line));
		log_head = (log_head + 1) % LOG_LINES;
		log_n--;
		log_busy = 1;
		pthread_mutex_unlock(&log_lock);
		log_send(line);
		pthread_mutex_lock(&log_lock);
		log_busy = 0;
		log_sent++;
		pthread_cond_broadcast(&log_idle);
	}
	return NULL;
}

/* Sets *t to ms from now (CLOCK_REALTIME, as the condition variables). */
static void log_deadline(struct timespec *t, long ms)
{
	clock_gettime(CLOCK_REALTIME, t);
	t->tv_sec += ms / 1000;
	t->tv_nsec += (ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

/* Queues a line (without its newline) for the daemon's log and waits,
 * LOG_WAIT_MS at most, until it is sent. */
static void log_put(const char *line, size_t n)
{
	struct timespec until;
	uint64_t mine = 0;

	pthread_mutex_lock(&log_lock);
	if (!log_up) {
		pthread_attr_t a;
		pthread_t t;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		log_up = !pthread_create(&t, &a, log_main, NULL);
		pthread_attr_destroy(&a);
	}
	if (log_up && log_n < LOG_LINES) {
		char *q = log_q[(log_head + log_n) % LOG_LINES];

		if (n >= SV_FAULT_LINE)
			n = SV_FAULT_LINE - 1;
		memcpy(q, line, n);
		q[n] = 0;
		log_n++;
		mine = ++log_queued;
		pthread_cond_signal(&log_more);
	}
	log_deadline(&until, LOG_WAIT_MS);
	while (mine && log_sent < mine)
		if (pthread_cond_timedwait(&log_idle, &log_lock, &until))
			break;
	pthread_mutex_unlock(&log_lock);
}

/* Waits (a second at most) until the queued lines reached the daemon:
 * at exit, where the last lines (LEAK_AT_EXIT) are made. */
static void log_flush(void)
{
	struct timespec until;

	log_deadline(&until, 1000);
	pthread_mutex_lock(&log_lock);
	while (log_up && (log_n || log_busy))
		if (pthread_cond_timedwait(&log_idle, &log_lock, &until))
			break;
	pthread_mutex_unlock(&log_lock);
}

/* A child of fork has no logger thread: the next line starts one; what
 * its parent had queued is the parent's to send. */
static void log_child(void)
{
	pthread_mutex_init(&log_lock, NULL);
	pthread_cond_init(&log_more, NULL);
	pthread_cond_init(&log_idle, NULL);
	log_up = 0;
	log_n = 0;
	log_busy = 0;
	log_queued = log_sent = 0;
}

/* The last line this thread made (sv_chk_last_line). */
static __thread char last_line[SV_QP_ERR_DIAG];

const char *sv_chk_last_line(void)
{
	return last_line;
}

void sv_chk_last_clear(void)
{
	last_line[0] = 0;
}

/* with_caller: 0 none; 1 the caller, and a site per calling address; 2
 * the caller, one site whoever calls (a pair of QPs is one site). */
static void vreport(const char *code, uint64_t site, int with_caller,
		    const char *fmt, va_list ap)
{
	char line[1536], who[256];
	uintptr_t pc = 0;
	uint64_t h = 1469598103934665603ULL;
	size_t n;
	int saved = errno;

	who[0] = 0;
	if (with_caller)
		find_caller(who, sizeof(who), &pc);
	for (const char *c = code; *c; c++)
		h = mix(h, (uint8_t)*c);
	h = mix(mix(h, site), with_caller == 2 ? 0 : pc);
	n = (size_t)snprintf(line, sizeof(line), "softverbs-check: %s ", code);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	n = strlen(line);
	if (who[0] && n < sizeof(line))
		snprintf(line + n, sizeof(line) - n, "; called from %s", who);
	/* Kept, told or not, for the poll that diagnosed it (res show). */
	n = strlen(line + 17);
	if (n >= sizeof(last_line))
		n = sizeof(last_line) - 1;
	memcpy(last_line, line + 17, n);
	last_line[n] = 0;
	if (seen_before(h)) {
		errno = saved;
		return;
	}
	n = strlen(line);
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	/* The daemon's log has its own prefix: the line after "softverbs-check: ". */
	log_put(line + 17, n - 17);
	line[n++] = '\n';
	/* One write: lines of threads and processes do not interleave. */
	if (write(STDERR_FILENO, line, n) < 0)
		errno = saved;
	errno = saved;
}

void sv_check_report(const char *code, uint64_t site, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(code, site, 1, fmt, ap);
	va_end(ap);
}

/* sv_check_report without the caller. */
void sv_chk_report_here(const char *code, uint64_t site, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(code, site, 0, fmt, ap);
	va_end(ap);
}

/* sv_check_report, one site whoever calls. */
void sv_chk_report_once(const char *code, uint64_t site, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(code, site, 2, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------- names -- */

const char *sv_chk_state_name(enum ibv_qp_state s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS",
					 "SQD",	  "SQE",  "ERR" };

	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "UNKNOWN";
}

const char *sv_chk_type_name(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_XRC_SEND:
		return "XRC INI";
	case IBV_QPT_XRC_RECV:
		return "XRC TGT";
	default:
		return "UD";
	}
}

const char *sv_chk_wr_name(uint32_t op)
{
	const char *n = sv_wrinfo(op)->name;

	return n ? n : "opcode?";
}

/* The names of the bits of mask from a table, "A|B", into buf. */

const struct sv_chk_bitname sv_chk_mask_bits[] = {
	{ IBV_QP_STATE, "IBV_QP_STATE" },
	{ IBV_QP_CUR_STATE, "IBV_QP_CUR_STATE" },
	{ IBV_QP_EN_SQD_ASYNC_NOTIFY, "IBV_QP_EN_SQD_ASYNC_NOTIFY" },
	{ IBV_QP_ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS" },
	{ IBV_QP_PKEY_INDEX, "IBV_QP_PKEY_INDEX" },
	{ IBV_QP_PORT, "IBV_QP_PORT" },
	{ IBV_QP_QKEY, "IBV_QP_QKEY" },
	{ IBV_QP_AV, "IBV_QP_AV" },
	{ IBV_QP_PATH_MTU, "IBV_QP_PATH_MTU" },
	{ IBV_QP_TIMEOUT, "IBV_QP_TIMEOUT" },
	{ IBV_QP_RETRY_CNT, "IBV_QP_RETRY_CNT" },
	{ IBV_QP_RNR_RETRY, "IBV_QP_RNR_RETRY" },
	{ IBV_QP_RQ_PSN, "IBV_QP_RQ_PSN" },
	{ IBV_QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC" },
	{ IBV_QP_ALT_PATH, "IBV_QP_ALT_PATH" },
	{ IBV_QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER" },
	{ IBV_QP_SQ_PSN, "IBV_QP_SQ_PSN" },
	{ IBV_QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC" },
	{ IBV_QP_PATH_MIG_STATE, "IBV_QP_PATH_MIG_STATE" },
	{ IBV_QP_CAP, "IBV_QP_CAP" },
	{ IBV_QP_DEST_QPN, "IBV_QP_DEST_QPN" },
	{ IBV_QP_RATE_LIMIT, "IBV_QP_RATE_LIMIT" },
	{ 0, NULL },
};

const struct sv_chk_bitname sv_chk_access_bits[] = {
	{ IBV_ACCESS_LOCAL_WRITE, "IBV_ACCESS_LOCAL_WRITE" },
	{ IBV_ACCESS_REMOTE_WRITE, "IBV_ACCESS_REMOTE_WRITE" },
	{ IBV_ACCESS_REMOTE_READ, "IBV_ACCESS_REMOTE_READ" },
	{ IBV_ACCESS_REMOTE_ATOMIC, "IBV_ACCESS_REMOTE_ATOMIC" },
	{ IBV_ACCESS_MW_BIND, "IBV_ACCESS_MW_BIND" },
	{ IBV_ACCESS_ON_DEMAND, "IBV_ACCESS_ON_DEMAND" },
	{ 0, NULL },
};

const char *sv_chk_bits(char *buf, size_t cap, uint32_t v,
			const struct sv_chk_bitname *t)
{
	size_t n = 0;

	buf[0] = 0;
	for (; t->name; t++)
		if ((v & t->bit) && n < cap)
			n += (size_t)snprintf(buf + n, cap - n, "%s%s",
					      n ? "|" : "", t->name);
	if (!buf[0])
		snprintf(buf, cap, "none");
	return buf;
}

/* ----------------------------------------------------------- objects -- */


pthread_mutex_t sv_chk_reg_lock = PTHREAD_MUTEX_INITIALIZER;
struct sv_chk_ent *sv_chk_live[SV_CK_NKINDS];
static unsigned nlive[SV_CK_NKINDS];

/* Keys of MRs that went, for LKEY_UNKNOWN/RKEY_UNKNOWN: the newest
 * NGONE, with when and through which verb. */
#define NGONE 64u
static struct sv_chk_gone gone_ring[NGONE];
static unsigned ngone;


/* Must hold reg_lock. */
struct sv_chk_ent *sv_chk_find(enum sv_check_kind kind, const void *obj)
{
	SV_CHK_FOR_EACH(e, kind)
	if (e->obj == obj)
		return e;
	return NULL;
}

/* Must hold reg_lock.  Our QP numbered qpn, or NULL. */
struct sv_qp *sv_chk_find_qpn(uint32_t qpn)
{
	SV_CHK_FOR_EACH(e, SV_CK_QP)
	if (((struct sv_qp *)e->obj)->qpx.qp_base.qp_num == qpn)
		return e->obj;
	return NULL;
}

/* Must hold reg_lock.  Our MR whose lkey (rkey when remote) is key. */
struct sv_mr *sv_chk_find_key(uint32_t key, int remote)
{
	SV_CHK_FOR_EACH(e, SV_CK_MR) {
		struct sv_mr *m = e->obj;

		if ((remote ? m->mr.rkey : m->mr.lkey) == key)
			return m;
	}
	return NULL;
}

/* Must hold reg_lock.  The newest gone MR that had key, or NULL. */
const struct sv_chk_gone *sv_chk_find_gone(uint32_t key, int remote)
{
	for (unsigned i = 0; i < ngone && i < NGONE; i++) {
		const struct sv_chk_gone *g = &gone_ring[(ngone - 1 - i) % NGONE];

		if ((remote ? g->rkey : g->lkey) == key)
			return g;
	}
	return NULL;
}

void sv_check_obj(enum sv_check_kind kind, void *obj, int add,
		  const char *verb)
{
	struct sv_chk_ent *e, **pp;

	pthread_mutex_lock(&sv_chk_reg_lock);
	if (add) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->obj = obj;
			e->next = sv_chk_live[kind];
			sv_chk_live[kind] = e;
			nlive[kind]++;
		}
		pthread_mutex_unlock(&sv_chk_reg_lock);
		return;
	}
	for (pp = &sv_chk_live[kind]; (e = *pp); pp = &e->next)
		if (e->obj == obj) {
			*pp = e->next;
			nlive[kind]--;
			free(e);
			break;
		}
	if (kind == SV_CK_MR && verb) {
		struct sv_mr *m = obj;
		struct sv_chk_gone *g = &gone_ring[ngone++ % NGONE];
		uintptr_t pc;

		g->lkey = m->mr.lkey;
		g->rkey = m->mr.rkey;
		g->iova = m->iova;
		g->length = m->mr.length;
		g->verb = verb;
		clock_gettime(CLOCK_MONOTONIC, &g->when);
		find_caller(g->by, sizeof(g->by), &pc);
	}
	pthread_mutex_unlock(&sv_chk_reg_lock);
}

/* "until ibv_dereg_mr 0.0012 s ago (from f+0x1 (prog))" of a gone key. */
const char *sv_chk_gone_text(char *buf, size_t cap, const struct sv_chk_gone *g)
{
	struct timespec now;
	double ago;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ago = (double)(now.tv_sec - g->when.tv_sec) +
	      (double)(now.tv_nsec - g->when.tv_nsec) / 1e9;
	snprintf(buf, cap,
		 "it named mr [%#llx,+%llu) of this process until %s %.6f s "
		 "ago%s%s%s",
		 (unsigned long long)g->iova, (unsigned long long)g->length,
		 g->verb, ago, g->by[0] ? " (from " : "", g->by,
		 g->by[0] ? ")" : "");
	return buf;
}


/* ---------------------------------------------------------------- exit -- */

static void at_exit(void)
{
	static const char *const names[SV_CK_NKINDS] = {
		"context", "PD", "MR", "CQ", "QP", "SRQ", "MW", "AH"
	};
	char list[256];
	size_t n = 0;
	unsigned total = 0;

	list[0] = 0;
	pthread_mutex_lock(&sv_chk_reg_lock);
	for (int k = SV_CK_NKINDS - 1; k >= 0; k--)
		if (nlive[k]) {
			total += nlive[k];
			n += (size_t)snprintf(list + n, sizeof(list) - n,
					      "%s%u %s", n ? ", " : "",
					      nlive[k], names[k]);
		}
	pthread_mutex_unlock(&sv_chk_reg_lock);
	/* No caller: exit(3) is where every process ends. */
	if (total)
		sv_chk_report_here("LEAK_AT_EXIT", 0, "pid %d: %s left at exit",
				   (int)getpid(), list);
	log_flush();
}

__attribute__((constructor)) static void check_init(void)
{
	const char *s = getenv("SOFTVERBS_CHECK");
	void *fr[2];

	if (!s || !*s || !strcmp(s, "0"))
		return;
	sv_check_on = 1;
	/* The responder's refusals (RKEY_UNKNOWN, ACCESS_DENIED,
	 * RECV_NOT_POSTED on its side), in whichever process runs it. */
	sv_engine_resp_diag = sv_chk_resp_diag;
	/* backtrace(3) loads its unwinder on first use: now, not under a
	 * post's spinlock. */
	backtrace(fr, 2);
	atexit(at_exit);
	pthread_atfork(NULL, NULL, log_child);
}

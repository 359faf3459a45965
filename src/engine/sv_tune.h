/* SPDX-License-Identifier: MIT */
/*
 * The engine's tunables: every timing and batch figure the path choice
 * (sv_path.c), the requester (sv_req.c) and the progress thread
 * (eng_progress.c) act on, in one table (SV_TUNE_TABLE below: name,
 * default, unit, range, meaning), read through the global struct sv_tune.
 * sv_tune holds the defaults from the start; sv_tune_init() applies the
 * environment once, when the first engine is made (sv_engine_get), and
 * nothing writes it after that: a hot path reads a field of it as it
 * would read a constant.
 *
 * Overriding them (experiments, benchmarks; not a stable interface):
 *
 *   SOFTVERBS_TUNE="burst_ns=3000,pkt_batch=8"
 *
 * a comma-separated list of name=value, values decimal integers in the
 * table's unit.  An item with an unknown name, or a value that is not a
 * number in the table's range, is reported on stderr and changes nothing
 * (that tunable keeps its default); the other items still apply.  SOFTVERBS_SPIN_US (microseconds) still sets the
 * progress thread's spin alone, as it always did (eng_progress.c).
 *
 * Limits that size arrays or shared layouts are not tunables: they stay
 * in engine_int.h ("limits"), with SV_DIRECT_BATCH here as the bound of
 * direct_batch.
 */
#ifndef SV_TUNE_H
#define SV_TUNE_H

#include <stdint.h>

/* The most WQEs one direct batch takes (the arrays of sv_direct.c and
 * sv_resp_exec.c are this long); direct_batch may only be lower. */
#define SV_DIRECT_BATCH 64

/*
 * X(name, default, unit, min, max, meaning).  Grouped by who reads them:
 * doorbell batching (sv_path_on_post), the choice of a WQE's path
 * (sv_path_choose), the packet path's flow control (sv_req.c "Window"),
 * the progress thread (eng_progress.c "Progress").
 */
#define SV_TUNE_TABLE(X)                                                       \
	X(burst_ns, 2000, "ns", 0, 1000000000,                                 \
	  "a post this soon after the last kick belongs to a stream: it waits")\
	X(defer_ns, 20000, "ns", 0, 1000000000,                                \
	  "a held stream of direct WQEs runs at the latest this late")         \
	X(direct_batch, SV_DIRECT_BATCH, "WQEs", 1, SV_DIRECT_BATCH,           \
	  "a held stream of direct WQEs runs at this many; most per batch")    \
	X(pkt_batch, 16, "WQEs", 1, 1u << 20,                                  \
	  "a held stream of packets runs at this many (its QP alone on its CQ)")\
	X(pkt_batch_shared, 128, "WQEs", 1, 1u << 20,                          \
	  "... when other QPs send through its CQ (a window: run_turns)")      \
	X(direct_small, 4096, "bytes", 0, 1u << 20,                            \
	  "up to this, a message to a target that drains now goes as a packet")\
	X(direct_budget, 4u << 20, "bytes", 1, 1u << 30,                       \
	  "bytes one direct batch moves before others get a turn")             \
	X(stream_ns, 50000, "ns", 0, 1000000000,                               \
	  "small direct requests this close wake a sleeping target's thread")  \
	X(req_budget, 64, "packets", 1, 1u << 20,                              \
	  "packets one requester run sends before the progress thread goes on")\
	X(sched_pkts, 1, "packets", 1, 1u << 20,                               \
	  "held streams of several QPs run in turns of this many (eng_qp.c)") \
	X(ack_every, 16, "packets", 1, 1u << 20,                               \
	  "an RC packet asks for an ACK at least this often")                  \
	X(window_pkts, 128, "packets", 1, 1u << 22,                            \
	  "RC packets sent and not acknowledged, at most")                     \
	X(wire_window_kb, 512, "KiB", 1, 1u << 20,                             \
	  "on the wire, at least this much in flight (window_pkts x MTU)")    \
	X(wire_ack_kb, 64, "KiB", 1, 1u << 20,                                 \
	  "on the wire, an ACK asked at most this often (ack_every x MTU)")   \
	X(wire_ack_hold, 1, "bool", 0, 1,                                      \
	  "an ACK a poll makes waits for the app's next call (eng_wire.c)")   \
	X(wire_ack_hold_ns, 5000, "ns", 0, 1000000000,                         \
	  "... past the app's next polls for at most this long")              \
	X(wire_gso, 1, "bool", 0, 1,                                           \
	  "packets of one flow leave in trains (UDP_SEGMENT), eng_wire.c")    \
	X(wire_rest_ns, 2000, "ns", 0, 1000000000,                             \
	  "after a ping-pong's message the port rests this long")             \
	X(wire_quiet_rest_ns, 20000, "ns", 0, 1000000000,                      \
	  "after an empty read, a 16th of the quiet time, up to this")        \
	X(wire_watch_ns, 1000000, "ns", 0, 60000000000ull,                     \
	  "the port quiet this long: the napping thread waits on it")         \
	X(wire_gather_ns, 5000, "ns", 0, 1000000000,                           \
	  "after a read of a few packets it rests this long (more gather)")    \
	X(spin_ns, 100000, "ns", 0, 1000000000,                                \
	  "the progress thread spins this long after work (no app poller)")    \
	X(inline_ns, 5000000, "ns", 0, 60000000000ull,                         \
	  "an app that polled a CQ this recently drains its rings itself")     \
	X(nap_ns, 250000, "ns", 1000, 1000000000,                              \
	  "beside such an app the thread looks again this often")              \
	X(nap_max_ns, 4000000, "ns", 1000, 1000000000,                         \
	  "... twice as late after each look that found nothing, up to this") \
	X(target_ns, 10000000, "ns", 0, 60000000000ull,                        \
	  "... and sleeps armed if it left the thread packets this recently")  \
	X(live_ns, 10000, "ns", 0, 1000000000,                                 \
	  "an app that polled this recently owns the rings: the thread waits") \
	X(ring_batch, 64, "packets", 1, 1u << 20,                              \
	  "packets taken from one ring per pass")                              \
	X(contended_polls, 16, "polls", 1, 1u << 20,                           \
	  "polls finding a ring busy before the poller yields its CPU")

struct sv_tune {
#define SV_TUNE_FIELD(name, def, unit, min, max, what) uint64_t name;
	SV_TUNE_TABLE(SV_TUNE_FIELD)
#undef SV_TUNE_FIELD
};

/* One row of the table, for the parser and for anyone who lists them. */
struct sv_tunable {
	const char *name;
	uint64_t def;
	const char *unit;
	uint64_t min, max;
	const char *what;
	unsigned offset; /* in struct sv_tune */
};

/* The values in force (defaults until sv_tune_init). */
extern struct sv_tune sv_tune;
/* The table, in SV_TUNE_TABLE's order, and its length. */
extern const struct sv_tunable sv_tunables[];
extern const unsigned sv_ntunables;

/* Applies SOFTVERBS_TUNE to sv_tune, once per process (later calls do
 * nothing).  Called by sv_engine_get before any engine runs. */
void sv_tune_init(void);
/* Sets t to the defaults, then applies spec ("name=value,..."; NULL or
 * empty: nothing).  Warns on stderr about each item it refuses (unknown
 * name, not a decimal number, outside the range), which changes nothing.
 * Returns how many it refused. */
int sv_tune_parse(struct sv_tune *t, const char *spec);

/* Packets of mtu bytes in kib KiB, but at least at_least: a window or an
 * ACK interval given in bytes (wire_window_kb, wire_ack_kb) as packets
 * of a path's MTU (sv_path_window).  mtu 0: at_least. */
static inline uint32_t sv_tune_pkts(uint64_t kib, uint32_t mtu,
				    uint64_t at_least)
{
	uint64_t n = mtu ? kib * 1024 / mtu : 0;

	if (n < at_least)
		n = at_least;
	return n > 0xffffffffu ? 0xffffffffu : (uint32_t)n;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the engine's tunables (src/engine/sv_tune.c): the table's
 * defaults are what sv_tune holds before any override, SOFTVERBS_TUNE's
 * syntax ("name=value,...") sets exactly the named fields, and every kind
 * of bad item -- unknown name, no '=', empty or non-decimal value, a value
 * out of the table's range or too large for 64 bits -- is refused alone:
 * counted, warned about, that tunable left at its default, the other
 * items still applied.
 */
#include "sv_tune.h"
#include "unit_test.h"

#include <stddef.h>
#include <string.h>

static uint64_t field(const struct sv_tune *t, const char *name)
{
	for (unsigned i = 0; i < sv_ntunables; i++)
		if (!strcmp(sv_tunables[i].name, name))
			return *(const uint64_t *)((const char *)t +
						   sv_tunables[i].offset);
	return ~0ull;
}

static void defaults(void)
{
	struct sv_tune t;

	memset(&t, 0xff, sizeof(t));
	EXPECT(sv_tune_parse(&t, NULL) == 0);
	EXPECT(!memcmp(&t, &sv_tune, sizeof(t)));
	EXPECT(sv_tune_parse(&t, "") == 0);
	EXPECT(!memcmp(&t, &sv_tune, sizeof(t)));
	/* Every field has a row, each row its default in range. */
	EXPECT(sv_ntunables * sizeof(uint64_t) == sizeof(struct sv_tune));
	for (unsigned i = 0; i < sv_ntunables; i++) {
		const struct sv_tunable *r = &sv_tunables[i];

		EXPECT(r->def >= r->min && r->def <= r->max);
		EXPECT(field(&sv_tune, r->name) == r->def);
		EXPECT(r->unit[0] && r->what[0]);
	}
	EXPECT(sv_tune.burst_ns == 2000 && sv_tune.pkt_batch == 16 &&
	       sv_tune.pkt_batch_shared == 128);
	EXPECT(sv_tune.direct_batch == SV_DIRECT_BATCH);
}

static void good(void)
{
	struct sv_tune t;

	EXPECT(sv_tune_parse(&t, "burst_ns=3000,pkt_batch=8") == 0);
	EXPECT(t.burst_ns == 3000 && t.pkt_batch == 8);
	EXPECT(t.defer_ns == sv_tune.defer_ns);
	/* Empty items are nothing; the last of two wins; bounds hold. */
	EXPECT(sv_tune_parse(&t, ",spin_ns=0,,spin_ns=7,") == 0);
	EXPECT(t.spin_ns == 7 && t.burst_ns == sv_tune.burst_ns);
	EXPECT(sv_tune_parse(&t, "direct_batch=1") == 0 && t.direct_batch == 1);
	EXPECT(sv_tune_parse(&t, "direct_batch=64") == 0 && t.direct_batch == 64);
}

static void bad(void)
{
	struct sv_tune t;

	EXPECT(sv_tune_parse(&t, "no_such=1,burst_ns=5") == 1);
	EXPECT(t.burst_ns == 5);
	EXPECT(sv_tune_parse(&t, "burst_ns") == 1);
	EXPECT(t.burst_ns == sv_tune.burst_ns);
	EXPECT(sv_tune_parse(&t, "burst_ns=") == 1);
	EXPECT(sv_tune_parse(&t, "burst_ns=12x,pkt_batch=-1,defer_ns= 5") == 3);
	EXPECT(t.burst_ns == sv_tune.burst_ns && t.pkt_batch == sv_tune.pkt_batch);
	EXPECT(t.defer_ns == sv_tune.defer_ns);
	EXPECT(sv_tune_parse(&t, "direct_batch=65,pkt_batch=0") == 2);
	EXPECT(t.direct_batch == SV_DIRECT_BATCH && t.pkt_batch == 16);
	EXPECT(sv_tune_parse(&t, "spin_ns=99999999999999999999999") == 1);
	EXPECT(t.spin_ns == sv_tune.spin_ns);
	EXPECT(sv_tune_parse(&t, "=5,Burst_ns=1") == 2);
}

/* The wire's window and ACK interval, bytes as packets of the path MTU:
 * 512 KiB is 512 packets of 1024 and 128 of 4096 (the floor then); the
 * ACK's 64 KiB, 64 and 16 (sv_path_ack_every then rounds them down to
 * whole trains: 62 and 15). */
static void per_mtu(void)
{
	EXPECT(sv_tune.wire_window_kb == 512 && sv_tune.wire_ack_kb == 64);
	EXPECT(sv_tune_pkts(sv_tune.wire_window_kb, 1024, sv_tune.window_pkts) == 512);
	EXPECT(sv_tune_pkts(sv_tune.wire_window_kb, 4096, sv_tune.window_pkts) == 128);
	EXPECT(sv_tune_pkts(sv_tune.wire_ack_kb, 1024, sv_tune.ack_every) == 64);
	EXPECT(sv_tune_pkts(sv_tune.wire_ack_kb, 4096, sv_tune.ack_every) == 16);
	EXPECT(sv_tune_pkts(512, 256, 1) == 2048);
	EXPECT(sv_tune_pkts(512, 0, 7) == 7);
	EXPECT(sv_tune_pkts(1u << 20, 1, 1) == 1u << 30);
}

int main(void)
{
	per_mtu();
	defaults();
	good();
	bad();
	return unit_result();
}

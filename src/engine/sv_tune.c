/* SPDX-License-Identifier: MIT */
/*
 * The tunables' table and SOFTVERBS_TUNE (sv_tune.h).  Self-contained
 * (sv_log only), so its unit test (tests/unit/test_tune.c) links it alone.
 */
#include "sv_tune.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sv_log.h"

#define SV_TUNE_DEFAULT(name, def, unit, min, max, what) .name = (def),
struct sv_tune sv_tune = { SV_TUNE_TABLE(SV_TUNE_DEFAULT) };

#define SV_TUNE_ROW(name, def, unit, min, max, what)                           \
	{ #name, (def), unit, (min), (max), what, offsetof(struct sv_tune, name) },
const struct sv_tunable sv_tunables[] = { SV_TUNE_TABLE(SV_TUNE_ROW) };
const unsigned sv_ntunables = sizeof(sv_tunables) / sizeof(sv_tunables[0]);

static const struct sv_tunable *find(const char *name, size_t len)
{
	for (unsigned i = 0; i < sv_ntunables; i++)
		if (strlen(sv_tunables[i].name) == len &&
		    !memcmp(sv_tunables[i].name, name, len))
			return &sv_tunables[i];
	return NULL;
}

/* One "name=value" item of len bytes at s.  0 or -1 (refused, warned). */
static int apply_one(struct sv_tune *t, const char *s, size_t len)
{
	const char *eq = memchr(s, '=', len);
	const struct sv_tunable *row;
	char num[32], *end;
	size_t nlen;
	unsigned long long v;

	if (!eq) {
		sv_warn("SOFTVERBS_TUNE: '%.*s' is not name=value: ignored",
			(int)len, s);
		return -1;
	}
	row = find(s, (size_t)(eq - s));
	if (!row) {
		sv_warn("SOFTVERBS_TUNE: no tunable '%.*s' (sv_tune.h lists "
			"them): ignored", (int)(eq - s), s);
		return -1;
	}
	nlen = len - (size_t)(eq - s) - 1;
	if (!nlen || nlen >= sizeof(num) || eq[1] < '0' || eq[1] > '9')
		goto bad;
	memcpy(num, eq + 1, nlen);
	num[nlen] = 0;
	errno = 0;
	v = strtoull(num, &end, 10);
	if (errno || *end || v < row->min || v > row->max)
		goto bad;
	*(uint64_t *)((char *)t + row->offset) = v;
	return 0;
bad:
	sv_warn("SOFTVERBS_TUNE: %s=%.*s: not a number of %s in %llu..%llu: "
		"ignored", row->name, (int)nlen, eq + 1, row->unit,
		(unsigned long long)row->min, (unsigned long long)row->max);
	return -1;
}

int sv_tune_parse(struct sv_tune *t, const char *spec)
{
	int refused = 0;

	for (unsigned i = 0; i < sv_ntunables; i++)
		*(uint64_t *)((char *)t + sv_tunables[i].offset) =
			sv_tunables[i].def;
	while (spec && *spec) {
		const char *comma = strchr(spec, ',');
		size_t len = comma ? (size_t)(comma - spec) : strlen(spec);

		if (len && apply_one(t, spec, len))
			refused++;
		spec = comma ? comma + 1 : NULL;
	}
	return refused;
}

static pthread_once_t tune_once = PTHREAD_ONCE_INIT;

static void tune_init_once(void)
{
	const char *e = getenv("SOFTVERBS_TUNE");

	if (e && *e)
		sv_tune_parse(&sv_tune, e);
}

void sv_tune_init(void)
{
	pthread_once(&tune_once, tune_init_once);
}

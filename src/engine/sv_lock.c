/* SPDX-License-Identifier: MIT */
/*
 * The run-time check of the lock order (sv_lock.h), compiled in with
 * SV_LOCK_CHECK=1: each thread keeps the stack of the locks it holds, and
 * a lock taken at a rank not above every rank held -- or the order's one
 * exception, qp_lock's read side, taken over a lock ranked SV_LOCK_ENGINE
 * or above -- aborts with both locks named and where each was taken.
 */
#include "sv_lock.h"

#if SV_LOCK_CHECK

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DEPTH 32

struct held {
	const volatile void *l;
	const char *what, *where;
	enum sv_lock_rank r;
	enum sv_lock_how how;
};

static __thread struct held stack[DEPTH];
static __thread int depth;

static const char *how_name(enum sv_lock_how how)
{
	return how == SV_LOCK_READ ? " (read)" :
	       how == SV_LOCK_WRITE ? " (write)" : "";
}

static void die(const char *why, const char *doing, const struct held *want,
		const struct held *held)
{
	char buf[1024];
	int n;

	n = snprintf(buf, sizeof(buf),
		     "softverbs: lock order: %s: %s %s%s (rank %d) at %s",
		     why, doing, want->what, how_name(want->how), (int)want->r,
		     want->where);
	if (held && n > 0 && (size_t)n < sizeof(buf))
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      " while holding %s%s (rank %d) taken at %s",
			      held->what, how_name(held->how), (int)held->r,
			      held->where);
	if (n > 0 && (size_t)n < sizeof(buf) - 1) {
		buf[n++] = '\n';
		if (write(2, buf, (size_t)n) < 0)
			abort();
	}
	abort();
}

void sv_lock_note(const volatile void *l, enum sv_lock_rank r, enum sv_lock_how how,
		  const char *what, const char *where)
{
	struct held want = { .l = l, .what = what, .where = where, .r = r,
			     .how = how };

	if (how == SV_LOCK_TRY_READ) {
		want.how = SV_LOCK_READ;
		goto push;
	}
	for (int i = 0; i < depth; i++) {
		const struct held *h = &stack[i];

		if (h->l == l && !(how == SV_LOCK_READ && h->how == SV_LOCK_READ))
			die("already held by this thread", "taking", &want, h);
		if (h->how == SV_LOCK_WRITE && r < SV_LOCK_ENGINE)
			/* A writer of qp_lock takes nothing a reader may
			 * hold (sv_lock.h). */
			die("under an rwlock held for writing only ranks from "
			    "SV_LOCK_ENGINE up", "taking", &want, h);
		if (h->r < r)
			continue;
		if (how == SV_LOCK_READ && r == SV_LOCK_QPTAB &&
		    h->r < SV_LOCK_ENGINE)
			continue; /* the read side's exception (sv_lock.h) */
		die("out of order", "taking", &want, h);
	}
push:
	if (depth == DEPTH)
		die("too many locks held", "taking", &want, NULL);
	stack[depth++] = want;
}

void sv_lock_unnote(const volatile void *l, const char *what,
		    const char *where)
{
	for (int i = depth - 1; i >= 0; i--) {
		if (stack[i].l != l)
			continue;
		for (; i + 1 < depth; i++)
			stack[i] = stack[i + 1];
		depth--;
		return;
	}
	{
		struct held want = { .l = l, .what = what, .where = where };

		die("not held by this thread", "releasing", &want, NULL);
	}
}

void sv_lock_must_hold(const volatile void *l, const char *what,
		       const char *where)
{
	struct held want = { .l = l, .what = what, .where = where };

	for (int i = 0; i < depth; i++)
		if (stack[i].l == l)
			return;
	die("not held by this thread", "touching what is guarded by", &want,
	    NULL);
}

#endif

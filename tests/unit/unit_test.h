/* SPDX-License-Identifier: MIT */
/*
 * What the unit tests share: EXPECT(cond) counts a failure, prints where,
 * and returns from the calling check (a void function); main() ends with
 * unit_result().
 */
#ifndef UNIT_TEST_H
#define UNIT_TEST_H

#include <stdio.h>

static int failures;

#define EXPECT(c)                                                              \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__,          \
				__LINE__, #c);                                 \
			failures++;                                            \
			return;                                                \
		}                                                              \
	} while (0)

/* Prints ok or FAILED; the exit status for main(). */
static inline int unit_result(void)
{
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}

#endif

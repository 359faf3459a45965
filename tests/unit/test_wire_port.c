/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the wire port's turn (src/common/sv_wire.c
 * sv_wire_rx_trylock, sv_wire_rx_unlock; sv_wire.h): one reader at a
 * time.  A free port is taken; a held one is refused to others while its
 * holder lives and took it less than SV_WIRE_STEAL_NS ago -- a take a
 * moment younger than the caller's clock reading included (the caller
 * read the clock, then the holder took the port: that age is negative,
 * never a huge unsigned one); a holder that died (asked about once its
 * take is SV_WIRE_ALIVE_NS old) or kept it too long is robbed; only the
 * holder gives it up.
 */
#include "sv_wire.h"
#include "unit_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define MS 1000000ull

/* A pid that is no process now: a child that has been reaped (0 if
 * none could be made). */
static uint32_t dead_pid(void)
{
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	if (p < 0 || waitpid(p, NULL, 0) != p)
		return 0;
	return (uint32_t)p;
}

static void turn(struct sv_wire_shm *s)
{
	uint32_t me = (uint32_t)getpid(), other = (uint32_t)getppid(), gone;
	uint64_t t = 5000 * MS;

	/* Free: taken; ours: not taken twice. */
	EXPECT(sv_wire_rx_trylock(s, other, t) == 1);
	EXPECT(sv_wire_rx_trylock(s, other, t) == 0);
	/* A living holder that took it at t: refused at t, a moment
	 * before t (the bug: that age wrapped to 49 days, and two readers
	 * read at once), and up to SV_WIRE_STEAL_NS after. */
	EXPECT(sv_wire_rx_trylock(s, me, t) == 0);
	EXPECT(sv_wire_rx_trylock(s, me, t - 1 * MS) == 0);
	EXPECT(sv_wire_rx_trylock(s, me, t - 900 * MS) == 0);
	EXPECT(sv_wire_rx_trylock(s, me, t + SV_WIRE_STEAL_NS) == 0);
	EXPECT((uint32_t)(atomic_load(&s->rx_owner) >> 32) == other);
	/* Not ours: our unlock leaves it alone. */
	sv_wire_rx_unlock(s, me);
	EXPECT((uint32_t)(atomic_load(&s->rx_owner) >> 32) == other);
	/* Kept too long: robbed. */
	EXPECT(sv_wire_rx_trylock(s, me, t + SV_WIRE_STEAL_NS + 2 * MS) == 1);
	EXPECT((uint32_t)(atomic_load(&s->rx_owner) >> 32) == me);
	sv_wire_rx_unlock(s, me);
	EXPECT(atomic_load(&s->rx_owner) == 0);
	/* A dead holder: robbed once its take is SV_WIRE_ALIVE_NS old (a
	 * younger one is not asked about: that costs a system call). */
	gone = dead_pid();
	EXPECT(gone != 0);
	EXPECT(sv_wire_rx_trylock(s, gone, t) == 1);
	EXPECT(sv_wire_rx_trylock(s, me, t) == 0);
	EXPECT(sv_wire_rx_trylock(s, me, t + SV_WIRE_ALIVE_NS / 2) == 0);
	EXPECT(sv_wire_rx_trylock(s, me, t + SV_WIRE_ALIVE_NS) == 1);
	sv_wire_rx_unlock(s, me);
	/* The clock's low 32 bits of ms wrap (every 49.7 days): a take
	 * just before the wrap is young just after it. */
	t = (1ull << 32) * MS - 10 * MS;
	EXPECT(sv_wire_rx_trylock(s, other, t) == 1);
	EXPECT(sv_wire_rx_trylock(s, me, t + 20 * MS) == 0);
	EXPECT(sv_wire_rx_trylock(s, me, t + SV_WIRE_STEAL_NS + 20 * MS) == 1);
}

int main(void)
{
	struct sv_wire_shm *s = calloc(1, sizeof(*s));

	if (!s) {
		fprintf(stderr, "no memory\n");
		return 1;
	}
	turn(s);
	free(s);
	return unit_result();
}

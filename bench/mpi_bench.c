/* SPDX-License-Identifier: MIT */
/*
 * MPI figures for bench/middleware_bench.sh: a ping-pong between rank 0
 * and the last rank (8 B latency, 1 MiB bandwidth) and an allreduce of
 * all ranks (8 B and 1 MiB, sum of doubles), each timed over ITERS
 * repetitions after a warm-up, the result checked.  Rank 0 prints one
 * line per figure:
 *
 *   pingpong_lat 8 <one-way usec>
 *   pingpong_bw 1048576 <MB/s>
 *   allreduce 8 <usec per call>
 *   allreduce 1048576 <usec per call>
 *
 *   mpi_bench [ITERS]       (default 2000; the 1 MiB figures take ITERS/20)
 *
 * It measures, never asserts: a wrong result prints "mpi_bench: ..." and
 * exits 1, so a figure is never reported for bytes that did not arrive.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG (1 << 20)

static int rank, size, peer;

/* One-way time of a round trip of len bytes, in usec; 0 on bad data. */
static double pingpong(char *buf, int len, int iters)
{
	double t0 = 0;

	for (int it = -iters / 10; it < iters; it++) {
		if (it == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		if (rank == 0) {
			buf[0] = (char)it;
			buf[len - 1] = (char)~it;
			MPI_Send(buf, len, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
			MPI_Recv(buf, len, MPI_CHAR, peer, 2, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			if (buf[0] != (char)(it + 1))
				return 0;
		} else if (rank == peer) {
			MPI_Recv(buf, len, MPI_CHAR, 0, 1, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			if (buf[len - 1] != (char)~it)
				buf[0] = 0; /* rank 0 sees it */
			else
				buf[0] = (char)(it + 1);
			MPI_Send(buf, len, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
		}
	}
	return (MPI_Wtime() - t0) * 1e6 / iters / 2;
}

/* usec per allreduce of n doubles; 0 on a wrong sum. */
static double allreduce(double *in, double *out, int n, int iters)
{
	double t0 = 0;
	int ok = 1;

	for (int it = -iters / 10; it < iters; it++) {
		if (it == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		in[0] = rank + it;
		in[n - 1] += n > 1 ? 1 : 0;
		MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		/* the sum over ranks r of (r + it); the last of n > 1 counts
		 * the calls so far of every rank */
		if (out[0] != (double)size * (size - 1) / 2 + (double)size * it ||
		    (n > 1 && out[n - 1] != in[n - 1] * size))
			ok = 0;
	}
	return ok ? (MPI_Wtime() - t0) * 1e6 / iters : 0;
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 2000, big = iters / 20, bad = 0;
	double lat, bw, ar8, arbig;
	char *buf;
	double *in, *out;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2 || iters < 20) {
		if (!rank)
			fprintf(stderr, "mpi_bench: needs 2 ranks or more, ITERS >= 20\n");
		MPI_Finalize();
		return 2;
	}
	if (big < 10)
		big = 10;
	peer = size - 1;
	buf = calloc(1, BIG);
	in = calloc(BIG / sizeof(double), sizeof(double));
	out = calloc(BIG / sizeof(double), sizeof(double));
	if (!buf || !in || !out) {
		fprintf(stderr, "mpi_bench: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	lat = pingpong(buf, 8, iters);
	bw = pingpong(buf, BIG, big);
	ar8 = allreduce(in, out, 1, iters);
	arbig = allreduce(in, out, BIG / sizeof(double), big);
	if (!ar8 || !arbig)
		bad = 1;
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0) {
		if (!lat || !bw || bad) {
			printf("mpi_bench: wrong data (ping-pong %s, allreduce %s)\n",
			       lat && bw ? "ok" : "bad", bad ? "bad" : "ok");
		} else {
			printf("pingpong_lat 8 %.2f\n", lat);
			printf("pingpong_bw %d %.0f\n", BIG, BIG / bw);
			printf("allreduce 8 %.2f\n", ar8);
			printf("allreduce %d %.1f\n", BIG, arbig);
		}
	}
	free(buf);
	free(in);
	free(out);
	MPI_Finalize();
	return rank == 0 && (!lat || !bw || bad);
}

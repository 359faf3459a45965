/* SPDX-License-Identifier: MIT */
/*
 * A two-rank MPI ping-pong whose data is checked: rank 0 sends a pattern
 * of each size (1 B .. 1 MiB), rank 1 checks it and sends back its
 * complement, rank 0 checks that.  Run by tests/compat/rdmacm_pairs.sh
 * under `softverbs run mpirun -np 2 --mca pml ucx`, so the bytes move over
 * UCX's verbs transports on our device.
 *
 *   mpi_pingpong [ROUND_TRIPS]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t pat(int it, size_t i, int flip)
{
	uint8_t v = (uint8_t)(it * 131 + i * 7 + (i >> 9));

	return flip ? (uint8_t)~v : v;
}

int main(int argc, char **argv)
{
	int rank, size, iters = argc > 1 ? atoi(argv[1]) : 100, bad = 0;
	size_t max = 1 << 20;
	uint8_t *buf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (!rank)
			fprintf(stderr, "mpi_pingpong: needs 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	buf = malloc(max);
	if (!buf)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (int it = 0; it < iters; it++) {
		/* Sizes cycle through powers of two up to 1 MiB. */
		size_t n = (size_t)1 << (it % 21);

		if (rank == 0) {
			for (size_t i = 0; i < n; i++)
				buf[i] = pat(it, i, 0);
			MPI_Send(buf, (int)n, MPI_BYTE, 1, it, MPI_COMM_WORLD);
			memset(buf, 0, n);
			MPI_Recv(buf, (int)n, MPI_BYTE, 1, it, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			for (size_t i = 0; i < n; i++)
				bad += buf[i] != pat(it, i, 1);
		} else {
			memset(buf, 0, n);
			MPI_Recv(buf, (int)n, MPI_BYTE, 0, it, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			for (size_t i = 0; i < n; i++) {
				bad += buf[i] != pat(it, i, 0);
				buf[i] = pat(it, i, 1);
			}
			MPI_Send(buf, (int)n, MPI_BYTE, 0, it, MPI_COMM_WORLD);
		}
	}
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (!rank) {
		if (bad)
			printf("mpi_pingpong: %d bytes wrong\n", bad);
		else
			printf("mpi_pingpong: %d round trips of 1 B .. 1 MiB, data checked\n",
			       iters);
	}
	free(buf);
	MPI_Finalize();
	return bad ? 1 : 0;
}

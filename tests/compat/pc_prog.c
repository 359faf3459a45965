// SPDX-License-Identifier: MIT
/*
 * A tiny verbs program built the way a user builds one against softverbs on
 * purpose: `cc pc_prog.c $(pkg-config --cflags --libs softverbs)`, run with
 * no LD_LIBRARY_PATH and no `softverbs run`.  Prints the libibverbs.so.1 it
 * loaded, the devices it sees, and whether a PD and an MR could be made on
 * the first one.  Exit 0 only when all of that worked.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_lib(struct dl_phdr_info *info, size_t size, void *data)
{
	if (strstr(info->dlpi_name, "/libibverbs.so"))
		printf("lib %s\n", info->dlpi_name);
	return 0;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	static char buf[4096];
	int n, i;

	dl_iterate_phdr(print_lib, NULL);
	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		printf("no devices\n");
		return 1;
	}
	for (i = 0; i < n; i++)
		printf("device %s\n", ibv_get_device_name(list[i]));
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr) {
		printf("open/alloc_pd/reg_mr failed\n");
		return 1;
	}
	printf("mr lkey 0x%x\n", mr->lkey);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}

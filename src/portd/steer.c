/* SPDX-License-Identifier: MIT */
/*
 * Steering port 4791 by QPN block (portd_int.h): a reuseport group of
 * sockets, all the port service's (SO_REUSEPORT needs one owner uid, so
 * no other user can join the group), and an SK_REUSEPORT program that
 * picks the socket for each datagram from a REUSEPORT_SOCKARRAY map
 * keyed by the top byte of the BTH destination QP -- the block the
 * service gave one user's daemon.  Key 0 (QP0, QP1 and every block no
 * daemon holds) is the service's own socket; a datagram whose key has no
 * socket goes there too, never to the kernel's hash choice among the
 * group (which could be another user's).  A socket leaves the map by
 * itself when its last descriptor closes, wherever the dups went.
 *
 * The program, in the kernel's eBPF instructions (no compiler needed):
 *
 *	r6 = ctx
 *	*(u32 *)(fp - 8) = 0
 *	r0 = bpf_skb_load_bytes(ctx, 8 + 5, fp - 8, 1)   UDP header, BTH[5]
 *	if r0 != 0 goto service                          too short
 *	*(u32 *)(fp - 8) = *(u8 *)(fp - 8)               the key
 *	r0 = bpf_sk_select_reuseport(ctx, map, fp - 8, 0)
 *	if r0 == 0 goto pass
 * service:
 *	*(u32 *)(fp - 8) = 0
 *	r0 = bpf_sk_select_reuseport(ctx, map, fp - 8, 0)
 *	if r0 == 0 goto pass
 *	return SK_DROP
 * pass:
 *	return SK_PASS
 */
#include "portd_int.h"

#include <errno.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SO_ATTACH_REUSEPORT_EBPF
#define SO_ATTACH_REUSEPORT_EBPF 52
#endif

#define INSN(c, d, s, o, i)                                                    \
	((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s),       \
			    .off = (o), .imm = (i) })
#define MOV_REG(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD_IMM(d, i) INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define ST_W(d, o, i) INSN(BPF_ST | BPF_MEM | BPF_W, d, 0, o, i)
#define LDX_B(d, s, o) INSN(BPF_LDX | BPF_MEM | BPF_B, d, s, o, 0)
#define STX_W(d, s, o) INSN(BPF_STX | BPF_MEM | BPF_W, d, s, o, 0)
#define CALL(f) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define JNE_IMM(d, i, o) INSN(BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define JEQ_IMM(d, i, o) INSN(BPF_JMP | BPF_JEQ | BPF_K, d, 0, o, i)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
/* A map's fd in a 64-bit immediate: two instructions. */
#define LD_MAP(d, fd)                                                          \
	INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd),          \
		INSN(0, 0, 0, 0, 0)

static long bpf(int cmd, union bpf_attr *a)
{
	return syscall(SYS_bpf, cmd, a, sizeof(*a));
}

static int map_make(void)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_REUSEPORT_SOCKARRAY;
	a.key_size = 4;
	a.value_size = 8; /* a socket's fd on update, its cookie on lookup */
	a.max_entries = PORTD_BLOCKS;
	return (int)bpf(BPF_MAP_CREATE, &a);
}

static int prog_load(int map)
{
	const struct bpf_insn prog[] = {
		MOV_REG(6, 1),
		ST_W(10, -8, 0),
		MOV_REG(1, 6),
		MOV_IMM(2, 8 + 5),
		MOV_REG(3, 10),
		ADD_IMM(3, -8),
		MOV_IMM(4, 1),
		CALL(BPF_FUNC_skb_load_bytes),
		JNE_IMM(0, 0, 10), /* -> service */
		LDX_B(2, 10, -8), /* the byte as a u32 key */
		STX_W(10, 2, -8),
		MOV_REG(1, 6),
		LD_MAP(2, map),
		MOV_REG(3, 10),
		ADD_IMM(3, -8),
		MOV_IMM(4, 0),
		CALL(BPF_FUNC_sk_select_reuseport),
		JEQ_IMM(0, 0, 11), /* -> pass */
		/* service: */
		ST_W(10, -8, 0),
		MOV_REG(1, 6),
		LD_MAP(2, map),
		MOV_REG(3, 10),
		ADD_IMM(3, -8),
		MOV_IMM(4, 0),
		CALL(BPF_FUNC_sk_select_reuseport),
		JEQ_IMM(0, 0, 2), /* -> pass */
		MOV_IMM(0, SK_DROP),
		EXIT(),
		/* pass: */
		MOV_IMM(0, SK_PASS),
		EXIT(),
	};
	static char log[4096];
	static const char license[] = "GPL"; /* the helpers ask for it */
	union bpf_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_SK_REUSEPORT;
	a.insns = (uint64_t)(uintptr_t)prog;
	a.insn_cnt = sizeof(prog) / sizeof(prog[0]);
	a.license = (uint64_t)(uintptr_t)license;
	a.log_buf = (uint64_t)(uintptr_t)log;
	a.log_size = sizeof(log);
	a.log_level = 1;
	fd = (int)bpf(BPF_PROG_LOAD, &a);
	if (fd < 0 && log[0])
		sv_err("portd: the kernel refused the steering program: %s",
		       log);
	return fd;
}

int portd_steer_init(struct portd_steer *s)
{
	s->map = map_make();
	if (s->map < 0)
		return -errno;
	s->prog = prog_load(s->map);
	if (s->prog < 0) {
		int err = -errno;

		close(s->map);
		s->map = -1;
		return err;
	}
	return 0;
}

int portd_steer_attach(struct portd_steer *s, int sock)
{
	return setsockopt(sock, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &s->prog,
			  sizeof(s->prog)) < 0 ?
		       -errno :
		       0;
}

int portd_steer_set(struct portd_steer *s, uint32_t block, int sock)
{
	union bpf_attr a;
	uint64_t v = (uint64_t)sock;

	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)s->map;
	a.key = (uint64_t)(uintptr_t)&block;
	a.value = (uint64_t)(uintptr_t)&v;
	a.flags = BPF_ANY;
	return bpf(BPF_MAP_UPDATE_ELEM, &a) < 0 ? -errno : 0;
}

void portd_steer_clear(struct portd_steer *s, uint32_t block)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)s->map;
	a.key = (uint64_t)(uintptr_t)&block;
	(void)bpf(BPF_MAP_DELETE_ELEM, &a);
}

/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's fault-plan message (docs/faults.md), included by
 * sv_proto.h.  One op, SV_OP_FAULT, with a command:
 *
 * | cmd             | from     | request                  | reply           |
 * |-----------------|----------|--------------------------|-----------------|
 * | SV_FAULT_ADD    | command  | text: one plan; pid: its | id, pid         |
 * |                 |          | process (0: the owner of |                 |
 * |                 |          | the plan's qp=N)         |                 |
 * | SV_FAULT_LIST   | command  | pid: 0 (all) or one      | n entries       |
 * | SV_FAULT_CLEAR  | command  | id (0: all of pid, or of | n: plans gone   |
 * |                 |          | every process when pid 0)|                 |
 * | SV_FAULT_SYNC   | engine   | (the caller's plans)     | n entries       |
 * | SV_FAULT_LOG    | library  | text: a firing's line    | empty           |
 * | SV_FAULT_CHECK  | library  | text: a checker's line   | empty           |
 *
 * ADD answers -EINVAL for a plan sv_fault_parse refuses (nothing kept),
 * -ESRCH when no process holds QP N or process pid has no engine (no QP
 * and no MR yet), -ENOSPC past SV_FAULT_MAX_PLANS.  The daemon tells the
 * process's engine (SV_ENGINE_FAULT on its engine socket), which answers
 * with SYNC and runs what the list holds.
 */
#ifndef SV_PROTO_FAULT_H
#define SV_PROTO_FAULT_H

#include <assert.h>
#include <stdint.h>

#include "sv_fault.h"

#define SV_FAULT_MAX_PLANS 32 /* run-time plans held by the daemon */
#define SV_FAULT_LINE 512     /* bytes of a request's text */

enum sv_fault_cmd {
	SV_FAULT_ADD = 1,
	SV_FAULT_LIST,
	SV_FAULT_CLEAR,
	SV_FAULT_SYNC,
	SV_FAULT_LOG,
	SV_FAULT_CHECK,
};

/* | cmd | enum sv_fault_cmd | pid | target process (0: see above) |
 * | id | CLEAR: the plan (0: all) | text | ADD: the plan; LOG, CHECK: a
 * line | */
struct sv_fault_req {
	uint32_t cmd;
	uint32_t pid;
	uint32_t id;
	uint32_t pad;
	char text[SV_FAULT_LINE];
};

/* One run-time plan.  | id | the daemon's number (from 1) | pid | the
 * process it acts in | text | the plan as added | */
struct sv_fault_ent {
	uint32_t id;
	uint32_t pid;
	char text[SV_FAULT_TEXT];
};

/* | id, pid | ADD: the plan's number and process | n | entries that
 * follow (LIST, SYNC) or plans cleared (CLEAR) | */
struct sv_fault_rep {
	uint32_t id;
	uint32_t pid;
	uint32_t n;
	uint32_t pad;
	struct sv_fault_ent ent[SV_FAULT_MAX_PLANS];
};

static_assert(sizeof(struct sv_fault_rep) + 64 <= 8192,
	      "a fault list fits one control datagram");

#endif

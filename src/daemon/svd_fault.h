/* SPDX-License-Identifier: MIT */
/* Run-time fault plans (fault.c; docs/faults.md). */
#ifndef SVD_FAULT_H
#define SVD_FAULT_H

struct svd_req;

/* SV_OP_FAULT: add, list, clear (`softverbs fault`), an engine's sync and
 * a library's log line (sv_proto_fault.h). */
int svd_op_fault(struct svd_req *r);
/* broker.c: tells the engine of process pid that its plans changed
 * (SV_ENGINE_FAULT).  0, or -ESRCH when pid has no engine. */
int svd_engine_fault_notify(pid_t pid);

#define SVD_FAULT_OPS \
	[SV_OP_FAULT] = { svd_op_fault, sizeof(struct sv_fault_req), 0 },

#endif

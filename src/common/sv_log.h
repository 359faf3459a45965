/* SPDX-License-Identifier: MIT */
/*
 * Logging shared by every component.  Level from SOFTVERBS_LOG
 * (error|warn|info|debug; default warn).  Macros keep errno intact and
 * prefix the component and function: "softverbs: open_device: ...".
 */
#ifndef SV_LOG_H
#define SV_LOG_H

#include <errno.h>

enum sv_log_level { SV_LOG_ERR, SV_LOG_WARN, SV_LOG_INFO, SV_LOG_DEBUG };

extern int sv_log_level;
extern const char *sv_log_component;

/* Reads SOFTVERBS_LOG once; safe to call repeatedly. */
void sv_log_init(const char *component);
void sv_log_print(int level, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define sv_log(level, ...)                                                     \
	do {                                                                   \
		if ((level) <= sv_log_level) {                                 \
			int __sv_saved_errno = errno;                          \
			sv_log_print((level), __func__, __VA_ARGS__);          \
			errno = __sv_saved_errno;                              \
		}                                                              \
	} while (0)
#define sv_err(...) sv_log(SV_LOG_ERR, __VA_ARGS__)
#define sv_warn(...) sv_log(SV_LOG_WARN, __VA_ARGS__)
#define sv_info(...) sv_log(SV_LOG_INFO, __VA_ARGS__)
#define sv_dbg(...) sv_log(SV_LOG_DEBUG, __VA_ARGS__)

#endif

/* SPDX-License-Identifier: MIT */
#include "sv_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sv_log_level = SV_LOG_WARN;
const char *sv_log_component = "softverbs";

void sv_log_init(const char *component)
{
	const char *s = getenv("SOFTVERBS_LOG");

	if (component)
		sv_log_component = component;
	if (!s)
		return;
	if (!strcmp(s, "debug"))
		sv_log_level = SV_LOG_DEBUG;
	else if (!strcmp(s, "info"))
		sv_log_level = SV_LOG_INFO;
	else if (!strcmp(s, "warn"))
		sv_log_level = SV_LOG_WARN;
	else if (!strcmp(s, "error"))
		sv_log_level = SV_LOG_ERR;
}

void sv_log_print(int level, const char *func, const char *fmt, ...)
{
	char buf[1024];
	int n;
	va_list ap;

	n = snprintf(buf, sizeof(buf), "%s[%d]: %s: ", sv_log_component,
		     (int)getpid(), func);
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	va_end(ap);
	/* One write so lines of concurrent processes do not interleave. */
	n = strlen(buf);
	if (n < (int)sizeof(buf) - 1)
		buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, n) < 0)
		return;
	(void)level;
}

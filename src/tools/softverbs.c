/* SPDX-License-Identifier: MIT */
/*
 * softverbs: run programs on the softverbs device and look after it.
 * Subcommands live in cmd_*.c; this file dispatches and holds the helpers
 * they share.
 */
#include "tool_int.h"
#include "sv_addr.h"
#include "sv_client.h"
#include "sv_log.h"
#include "sv_sock.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void sv_tool_err(const char *fmt, ...)
{
	va_list ap;

	fputs("softverbs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void sv_tool_usage_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("softverbs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see 'softverbs %s%s--help')\n", cmd ? cmd : "",
		cmd ? " " : "");
	exit(EXIT_USAGE);
}

int sv_tool_is_help(const char *arg)
{
	return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

void sv_tool_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

const char *sv_tool_socket_where(void)
{
	static char buf[PATH_MAX + 128];
	const char *w = sv_chan_where();
	char name[108];

	if (*w)
		snprintf(buf, sizeof(buf), "%s", w);
	else
		snprintf(buf, sizeof(buf), "@%s",
			 sv_socket_name(name, sizeof(name)));
	return buf;
}

int sv_tool_foreign_holder(struct sv_holder *h)
{
	sv_abstract_holder(h);
	return h->state != SV_HOLDER_FREE && h->uid != (long)getuid();
}

int sv_tool_probe(void)
{
	int err = sv_chan_probe();

	/* -EACCES: only a socket of another uid answers on our name, so no
	 * daemon of ours runs (ours would listen elsewhere, sv_addr.h). */
	if (err == -EACCES)
		return -ENODEV;
	if (err && err != -ENODEV)
		sv_tool_err("cannot talk to the daemon on %s: %s",
			    sv_tool_socket_where(), strerror(-err));
	return err;
}

void sv_tool_wire_warn(void)
{
	const char *e = getenv("SOFTVERBS_WIRE_WARN");
	struct sv_status_rep st;

	if ((e && !strcmp(e, "0")) ||
	    sv_call_simple(SV_OP_STATUS, 0, 0, -1, NULL, 0, &st, sizeof(st)) ||
	    !st.wire_err)
		return;
	fprintf(stderr,
		"softverbs: warning: the device is off the wire: UDP port %u: "
		"%s -- programs on this host work, other hosts cannot reach "
		"it until the port is free (the daemon tries every second; "
		"docs/wire.md \"Who owns port 4791\")\n",
		st.wire_port, strerror(-st.wire_err));
}

void sv_tool_comm(uint32_t pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(buf, len, "?");
	snprintf(path, sizeof(path), "/proc/%u/comm", (unsigned)pid);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = 0;
	else
		snprintf(buf, len, "?");
	fclose(f);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softverbs COMMAND [ARGS...]\n"
		"\n"
		"A user-space RDMA device: unchanged verbs programs, no NIC, no root.\n"
		"\n"
		"commands:\n"
		"  run CMD [ARGS...]              run CMD on the softverbs device\n"
		"  devices                        list devices, port state and GIDs\n"
		"  daemon start|stop|status       manage the device daemon (softverbsd)\n"
		"  res show [TYPE] [--json]       list live objects (PDs, MRs, QPs, ...)\n"
		"  capture -w FILE [OPTIONS]      write every packet to a pcap (Wireshark)\n"
		"  rdma [-j] dev|link [show]      iproute2's rdma dev/link for the device\n"
		"  fault add|list|clear ...       fault plans for a running program\n"
		"  version                        this build, the library and daemon in use\n"
		"\n"
		"'softverbs COMMAND --help' describes each command; 'softverbs --version'\n"
		"the build in use.  environment: SOFTVERBS_SOCKET (daemon socket name),\n"
		"SOFTVERBSD (daemon binary), SOFTVERBS_LIBDIR (library directory for\n"
		"'run'); man softverbs lists them all.\n");
}

int main(int argc, char **argv)
{
	const char *cmd;

	sv_log_init("softverbs");
	/* Bound over iproute2's rdma inside `softverbs run` (run_ns.c). */
	cmd = strrchr(argv[0], '/');
	if (!strcmp(cmd ? cmd + 1 : argv[0], "rdma"))
		return sv_cmd_rdma(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (sv_tool_is_help(cmd) || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version"))
		return sv_cmd_version(argc - 1, argv + 1);
	if (!strcmp(cmd, "run"))
		return sv_cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "devices"))
		return sv_cmd_devices(argc - 1, argv + 1);
	if (!strcmp(cmd, "daemon"))
		return sv_cmd_daemon(argc - 1, argv + 1);
	if (!strcmp(cmd, "res") || !strcmp(cmd, "resource"))
		return sv_cmd_res(argc - 1, argv + 1);
	if (!strcmp(cmd, "capture"))
		return sv_cmd_capture(argc - 1, argv + 1);
	if (!strcmp(cmd, "rdma"))
		return sv_cmd_rdma(argc - 1, argv + 1);
	if (!strcmp(cmd, "fault"))
		return sv_cmd_fault(argc - 1, argv + 1);
	sv_tool_usage_err(NULL, "unknown command '%s'", cmd);
}

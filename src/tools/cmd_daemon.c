/* SPDX-License-Identifier: MIT */
/*
 * softverbs daemon start|stop|status: softverbsd by hand.  The library
 * starts and stops it on its own (first use, idle timeout); this is for
 * people who want it up before a benchmark, or gone.
 */
#include "tool_int.h"
#include "sv_addr.h"
#include "sv_client.h"
#include "sv_proc.h"
#include "sv_sock.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softverbs daemon start\n"
		"       softverbs daemon stop\n"
		"       softverbs daemon status [--json]\n"
		"\n"
		"  start   start the device daemon unless it runs; print its pid\n"
		"  stop    shut it down (every open device of every program becomes\n"
		"          unusable) and wait until it is gone; not running is fine\n"
		"  status  pid, uptime, counters, the daemon's build and binary, and\n"
		"          the libibverbs.so.1 'softverbs run' gives programs; exit 1\n"
		"          when not running.\n"
		"          'clients' does not count this command's own connection.\n"
		"\n"
		"The daemon is the one on socket @$SOFTVERBS_SOCKET (default\n"
		"softverbs.UID), or, when a process of another uid holds that name, on a\n"
		"socket in the user's private directory ($XDG_RUNTIME_DIR/softverbs,\n"
		"/run/user/UID/softverbs or ~/.softverbs/BOOT_ID); status says which,\n"
		"and who holds the name.  SOFTVERBSD names the binary that start runs.\n");
}

static int get_status(struct sv_status_rep *st)
{
	int err = sv_call_simple(SV_OP_STATUS, 0, 0, -1, NULL, 0, st,
				 sizeof(*st));

	if (err)
		sv_tool_err("daemon status failed: %s", strerror(-err));
	st->name[sizeof(st->name) - 1] = 0;
	return err;
}

static int cmd_start(void)
{
	struct sv_status_rep st;
	int was_running, err;

	err = sv_tool_probe();
	if (err && err != -ENODEV)
		return 1;
	was_running = err == 0;
	err = sv_daemon_ensure();
	if (err) {
		sv_tool_err("cannot start the daemon %s: %s", sv_daemon_path(),
			    strerror(-err));
		return 1;
	}
	if (get_status(&st))
		return 1;
	printf("softverbsd %s, pid %u, socket %s\n",
	       was_running ? "already running" : "started", st.pid,
	       sv_tool_socket_where());
	sv_tool_wire_warn();
	return 0;
}

static int cmd_stop(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	struct sv_status_rep st;
	int err, i;

	err = sv_tool_probe();
	if (err == -ENODEV) {
		printf("softverbsd not running (socket %s)\n",
		       sv_tool_socket_where());
		return 0;
	}
	if (err || get_status(&st))
		return 1;
	err = sv_call_simple(SV_OP_SHUTDOWN, 0, 0, -1, NULL, 0, NULL, 0);
	/* -ENODEV: it went away before answering, which is what we asked. */
	if (err && err != -ENODEV && err != -EIO) {
		sv_tool_err("shutdown refused: %s", strerror(-err));
		return 1;
	}
	/* Gone = no daemon of ours answers (a socket of another uid on the
	 * name is none of ours) and the process has exited (up to ~10 s on
	 * a loaded machine). */
	for (i = 0; i < 1000; i++) {
		sv_chan_reset();
		err = sv_chan_probe();
		if ((err == -ENODEV || err == -EACCES) && !sv_pid_alive(st.pid)) {
			printf("softverbsd stopped (pid %u)\n", st.pid);
			return 0;
		}
		nanosleep(&ts, NULL);
	}
	sv_tool_err("the daemon (pid %u) did not exit", st.pid);
	return 1;
}

static void print_uptime(uint64_t ms)
{
	uint64_t s = ms / 1000;

	if (s >= 86400)
		printf("%llud ", (unsigned long long)(s / 86400));
	printf("%02llu:%02llu:%02llu.%03llu", (unsigned long long)(s / 3600 % 24),
	       (unsigned long long)(s / 60 % 60), (unsigned long long)(s % 60),
	       (unsigned long long)(ms % 1000));
}

/*
 * Which files are in use: the running daemon's binary and its build (read
 * through /proc/PID/exe, which opens the running file even if it was
 * replaced since), and the libibverbs.so.1 `softverbs run` gives programs.
 */
struct files_in_use {
	char binary[PATH_MAX], build[128];
	char lib[PATH_MAX], lib_build[128];
};

static void get_files(uint32_t pid, struct files_in_use *f)
{
	char exe[64];
	ssize_t n;

	snprintf(exe, sizeof(exe), "/proc/%u/exe", (unsigned)pid);
	n = readlink(exe, f->binary, sizeof(f->binary) - 1);
	f->binary[n > 0 ? n : 0] = 0;
	if (n <= 0)
		snprintf(f->binary, sizeof(f->binary), "?");
	sv_tool_build_of(exe, f->build, sizeof(f->build));
	if (sv_tool_lib_path(f->lib, sizeof(f->lib)) == 0)
		sv_tool_build_of(f->lib, f->lib_build, sizeof(f->lib_build));
	else
		snprintf(f->lib, sizeof(f->lib), "not found");
}

/* The abstract name's holder when it is not us, as JSON (null if none). */
static void json_holder(const struct sv_holder *h, int foreign)
{
	static const char *const state[] = {
		[SV_HOLDER_FREE] = "free",
		[SV_HOLDER_BOUND] = "bound",
		[SV_HOLDER_LISTENING] = "listening",
		[SV_HOLDER_FULL] = "not_accepting",
		[SV_HOLDER_UNKNOWN] = "unknown",
	};

	if (!foreign) {
		printf("null");
		return;
	}
	printf("{\"state\": \"%s\", \"uid\": ", state[h->state]);
	if (h->uid >= 0)
		printf("%ld", h->uid);
	else
		printf("null");
	printf(", \"pid\": ");
	if (h->pid > 0)
		printf("%ld", h->pid);
	else
		printf("null");
	printf("}");
}

static int cmd_status(int json)
{
	struct files_in_use *f;
	struct sv_hello_rep h;
	struct sv_status_rep st;
	struct sv_holder holder;
	char name[108], desc[128];
	int err, foreign = 0, fallback;

	sv_socket_name(name, sizeof(name));
	err = sv_tool_probe();
	if (err == -ENODEV) {
		foreign = sv_tool_foreign_holder(&holder);
		if (json) {
			printf("{\"running\": false, \"socket\": ");
			sv_tool_json_str(stdout, sv_tool_socket_where());
			printf(", \"abstract_holder\": ");
			json_holder(&holder, foreign);
			printf("}\n");
		}
		sv_tool_err("daemon not running (socket %s)",
			    sv_tool_socket_where());
		if (foreign)
			sv_tool_err("the socket @%s is held by %s: the daemon will listen in the user's private directory instead",
				    name, sv_holder_str(&holder, desc, sizeof(desc)));
		return 1;
	}
	/* On the fallback socket: say who holds the name now. */
	fallback = !err && sv_tool_socket_where()[0] != '@';
	if (fallback)
		foreign = sv_tool_foreign_holder(&holder);
	if (err || get_status(&st))
		return 1;
	if (sv_call_simple(SV_OP_HELLO, 0, 0, -1, NULL, 0, &h, sizeof(h)))
		snprintf(h.version, sizeof(h.version), "?");
	h.version[sizeof(h.version) - 1] = 0;
	/* Our own channel is one of the clients. */
	if (st.clients)
		st.clients--;
	f = calloc(1, sizeof(*f));
	if (!f) {
		sv_tool_err("out of memory");
		return 1;
	}
	get_files(st.pid, f);
	if (json) {
		printf("{\"running\": true, \"socket\": ");
		sv_tool_json_str(stdout, sv_tool_socket_where());
		printf(", \"abstract_holder\": ");
		json_holder(&holder, foreign);
		printf(", \"device\": ");
		sv_tool_json_str(stdout, st.name);
		printf(", \"version\": ");
		sv_tool_json_str(stdout, h.version);
		printf(", \"build\": ");
		sv_tool_json_str(stdout, f->build);
		printf(", \"binary\": ");
		sv_tool_json_str(stdout, f->binary);
		printf(", \"library\": ");
		sv_tool_json_str(stdout, f->lib);
		printf(", \"library_build\": ");
		sv_tool_json_str(stdout, f->lib_build);
		printf(", \"pid\": %u, \"instance\": \"%016llx\", \"uptime_ms\": %llu, "
		       "\"clients\": %u, \"ufiles\": %u, \"contexts\": %u, "
		       "\"objects\": %u, \"fds\": %u, \"requests\": %llu, "
		       "\"bad_requests\": %llu, \"wire\": {\"port\": %u, "
		       "\"bound\": %s, \"error\": ",
		       st.pid, (unsigned long long)st.instance,
		       (unsigned long long)st.uptime_ms, st.clients, st.ufiles,
		       st.contexts, st.objects, st.open_fds,
		       (unsigned long long)st.requests,
		       (unsigned long long)st.bad_requests, st.wire_port,
		       st.wire_err ? "false" : "true");
		if (st.wire_err)
			sv_tool_json_str(stdout, strerror(-st.wire_err));
		else
			printf("null");
		printf(", \"port_service\": %s, \"qpn_block\": %u",
		       st.wire_block ? "true" : "false", st.wire_block);
		printf(", \"rx_packets\": %llu, \"rx_bytes\": %llu, "
		       "\"rx_bad_icrc\": %llu, \"rx_dropped\": %llu, "
		       "\"rx_ring_full\": %llu, \"rx_no_qp\": %llu, "
		       "\"rx_not_peer\": %llu, \"rx_too_big\": %llu, "
		       "\"tx_packets\": %llu, "
		       "\"tx_bytes\": %llu, \"tx_errors\": %llu}, "
		       "\"cm\": {\"mads_sent\": %llu, \"mads_received\": %llu, "
		       "\"send_errors\": %llu, \"dropped\": %llu, "
		       "\"connections\": %u, \"half_open\": %u, "
		       "\"refused_listener_bound\": %llu, "
		       "\"refused_source_bound\": %llu, \"expired\": %llu}}\n",
		       (unsigned long long)st.wire_rx_pkts,
		       (unsigned long long)st.wire_rx_bytes,
		       (unsigned long long)st.wire_rx_bad_icrc,
		       (unsigned long long)st.wire_rx_dropped,
		       (unsigned long long)st.wire_rx_ring_full,
		       (unsigned long long)st.wire_rx_no_qp,
		       (unsigned long long)st.wire_rx_not_peer,
		       (unsigned long long)st.wire_rx_too_big,
		       (unsigned long long)st.wire_tx_pkts,
		       (unsigned long long)st.wire_tx_bytes,
		       (unsigned long long)st.wire_tx_errors,
		       (unsigned long long)st.cm_mads_tx,
		       (unsigned long long)st.cm_mads_rx,
		       (unsigned long long)st.cm_mads_tx_errors,
		       (unsigned long long)st.cm_mads_dropped, st.cm_conns,
		       st.cm_half_open, (unsigned long long)st.cm_rej_listener,
		       (unsigned long long)st.cm_rej_source,
		       (unsigned long long)st.cm_expired);
		free(f);
		return 0;
	}
	printf("softverbsd running\n");
	printf("  pid:          %u\n", st.pid);
	printf("  version:      %s\n", h.version);
	printf("  build:        %s\n", f->build);
	printf("  binary:       %s\n", f->binary);
	printf("  library:      %s, build %s\n", f->lib, f->lib_build);
	printf("  socket:       %s\n", sv_tool_socket_where());
	if (fallback && foreign)
		printf("  abstract:     @%s is held by %s: not ours\n", name,
		       sv_holder_str(&holder, desc, sizeof(desc)));
	else if (fallback)
		printf("  abstract:     @%s is free now (it was held by another when "
		       "the daemon started)\n", name);
	printf("  device:       %s\n", st.name);
	printf("  uptime:       ");
	print_uptime(st.uptime_ms);
	printf("\n");
	printf("  clients:      %u\n", st.clients);
	printf("  ufiles:       %u\n", st.ufiles);
	printf("  contexts:     %u\n", st.contexts);
	printf("  objects:      %u\n", st.objects);
	printf("  fds:          %u\n", st.open_fds);
	printf("  requests:     %llu (%llu malformed)\n",
	       (unsigned long long)st.requests,
	       (unsigned long long)st.bad_requests);
	if (st.wire_err)
		printf("  wire:         UDP port %u NOT bound: %s -- other hosts "
		       "cannot reach this device until it is free (tried every "
		       "second; docs/wire.md)\n",
		       st.wire_port, strerror(-st.wire_err));
	else if (st.wire_block)
		printf("  wire:         RoCE v2 on UDP port %u through the port "
		       "service (QPN block %#x)\n", st.wire_port, st.wire_block);
	else
		printf("  wire:         RoCE v2 on UDP port %u, bound by this "
		       "daemon: no port service here, so another user's "
		       "process could have taken the port first "
		       "(docs/wire.md)\n", st.wire_port);
	printf("  wire tx:      %llu packets, %llu bytes; %llu tx errors\n",
	       (unsigned long long)st.wire_tx_pkts,
	       (unsigned long long)st.wire_tx_bytes,
	       (unsigned long long)st.wire_tx_errors);
	printf("  wire rx:      %llu packets, %llu bytes; dropped: %llu bad "
	       "ICRC, %llu other (%llu ring full, %llu no such QP, %llu not "
	       "from the QP's peer, %llu above the MTU)\n",
	       (unsigned long long)st.wire_rx_pkts,
	       (unsigned long long)st.wire_rx_bytes,
	       (unsigned long long)st.wire_rx_bad_icrc,
	       (unsigned long long)st.wire_rx_dropped,
	       (unsigned long long)st.wire_rx_ring_full,
	       (unsigned long long)st.wire_rx_no_qp,
	       (unsigned long long)st.wire_rx_not_peer,
	       (unsigned long long)st.wire_rx_too_big);
	printf("  cm mads:      %llu sent, %llu received; %llu send errors, "
	       "%llu dropped\n",
	       (unsigned long long)st.cm_mads_tx,
	       (unsigned long long)st.cm_mads_rx,
	       (unsigned long long)st.cm_mads_tx_errors,
	       (unsigned long long)st.cm_mads_dropped);
	printf("  cm conns:     %u (%u half-open); REQs refused: %llu at a "
	       "listener's bound, %llu at a source's; %llu requests expired\n",
	       st.cm_conns, st.cm_half_open,
	       (unsigned long long)st.cm_rej_listener,
	       (unsigned long long)st.cm_rej_source,
	       (unsigned long long)st.cm_expired);
	free(f);
	return 0;
}

int sv_cmd_daemon(int argc, char **argv)
{
	const char *sub;
	int json = 0;

	if (argc < 2)
		sv_tool_usage_err("daemon", "start, stop or status?");
	sub = argv[1];
	if (sv_tool_is_help(sub)) {
		usage(stdout);
		return 0;
	}
	for (int i = 2; i < argc; i++) {
		if (sv_tool_is_help(argv[i])) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--json") && !strcmp(sub, "status"))
			json = 1;
		else
			sv_tool_usage_err("daemon", "unexpected argument '%s'",
					  argv[i]);
	}
	if (!strcmp(sub, "start"))
		return cmd_start();
	if (!strcmp(sub, "stop"))
		return cmd_stop();
	if (!strcmp(sub, "status"))
		return cmd_status(json);
	sv_tool_usage_err("daemon", "unknown subcommand '%s'", sub);
}

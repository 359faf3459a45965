/* SPDX-License-Identifier: MIT */
/*
 * The softverbs command: one file per subcommand, this header between them.
 * Exit codes of every subcommand: 0 done, 1 failed, 2 usage error.
 */
#ifndef TOOL_INT_H
#define TOOL_INT_H

#include <stdint.h>
#include <stdio.h>

#include "sv_proto.h"

#define EXIT_USAGE 2

/* Prints "softverbs: <msg>" on stderr. */
void sv_tool_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Usage errors: the message, a hint to --help, and exit 2. */
void sv_tool_usage_err(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

/* True when arg is -h or --help. */
int sv_tool_is_help(const char *arg);

/* Writes s as a JSON string literal (quotes included). */
void sv_tool_json_str(FILE *f, const char *s);

/* Where the daemon listens: where the channel is connected ("@NAME", or
 * the path of its socket in the user's private directory when another uid
 * holds the abstract name, src/common/sv_addr.h), else "@NAME". */
const char *sv_tool_socket_where(void);

/* Who holds the abstract name, in *h; nonzero when that is not us. */
struct sv_holder;
int sv_tool_foreign_holder(struct sv_holder *h);

/*
 * Connects to a running daemon of ours without starting one.  Returns 0,
 * or -ENODEV when none runs (a socket of another uid on our name counts as
 * none); any other failure has been reported on stderr and returns its
 * negative errno.
 */
int sv_tool_probe(void);
/* One line on stderr when the running daemon is off the wire (its RoCE
 * port is another process's): said at `daemon start` and `run`, unless
 * SOFTVERBS_WIRE_WARN=0. */
void sv_tool_wire_warn(void);

/* Reads /proc/PID/comm into buf ("?" when unknown). */
void sv_tool_comm(uint32_t pid, char *buf, size_t len);

/*
 * Fills out with the directory of our libibverbs.so.1 that `softverbs run`
 * puts first on LD_LIBRARY_PATH (SOFTVERBS_LIBDIR, or found next to this
 * command).  0, or -1 with the reason on stderr.
 */
int sv_tool_find_libdir(char *out, size_t len);

/* The same, as the path of the library file itself. */
int sv_tool_lib_path(char *out, size_t len);

/* Reads the build id a softverbs file carries (src/common/sv_build.c) into
 * buf: 0, or -1 ("unknown" in buf) when it has none or cannot be read. */
int sv_tool_build_of(const char *path, char *buf, size_t len);

/* tool_dev.c: what the daemon says of the device and its port 1. */
struct sv_tool_dev {
	struct sv_device_info dev;
	struct ibv_device_attr_ex attr;
	struct ibv_port_attr port;
	struct sv_gid_table gids;
};
/* Asks the daemon (starting it if needed): 0 or a negative errno. */
int sv_tool_dev_query(struct sv_tool_dev *di);
/* A GUID as the kernel's sysfs and iproute2 print it: xxxx:xxxx:xxxx:xxxx. */
void sv_tool_guid_str(char *out, size_t len, __be64 guid);
/* The port's network device, as a RoCE port has one: the interface of the
 * first GID that is not on a loopback interface, else of the first GID.
 * Fills ifname (IF_NAMESIZE bytes, "" when none) and returns its ifindex,
 * or 0. */
int sv_tool_port_netdev(const struct sv_tool_dev *di, char *ifname);

/* run_ns.c: the private mount namespace of `softverbs run` (0, or 1 when
 * the program runs without it; the reason was printed). */
int sv_run_namespace(void);

/* Subcommands: argv[0] is the subcommand's name; return the exit code. */
int sv_cmd_run(int argc, char **argv);
int sv_cmd_devices(int argc, char **argv);
int sv_cmd_daemon(int argc, char **argv);
int sv_cmd_res(int argc, char **argv);
int sv_cmd_version(int argc, char **argv);
int sv_cmd_capture(int argc, char **argv);
int sv_cmd_rdma(int argc, char **argv);
int sv_cmd_fault(int argc, char **argv);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * softverbs rdma: iproute2's rdma(8) `dev` and `link` objects for the
 * softverbs device, in rdma's own text and JSON forms.  The real tool asks
 * the kernel over netlink, which knows no softverbs device; programs that
 * find a port's network device with `rdma link show -j` (pyverbs' tests
 * among them) get it here.  Inside `softverbs run` every `rdma` on the
 * search path is a bind of this command (run_ns.c), which then answers by
 * that name.  Like any verbs program, it starts the daemon if needed.
 */
#include "tool_int.h"

#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softverbs rdma [-j] [-p] [-d] dev [show] [DEV]\n"
		"       softverbs rdma [-j] [-p] [-d] link [show] [DEV[/PORT]]\n"
		"\n"
		"iproute2's rdma(8) dev and link objects for the softverbs device, in\n"
		"rdma's text or JSON (-j, -p pretty) forms; -d adds details.  Inside\n"
		"'softverbs run' each 'rdma' on the search path runs this command,\n"
		"since the kernel's netlink knows no softverbs device.\n");
}

/* One JSON object or one text line being printed. */
struct out {
	int json, pretty, nfield;
};

/* The device's one object (one device, one port): the list opens. */
static void obj_begin(struct out *o)
{
	o->nfield = 0;
	if (o->json)
		fputs(o->pretty ? "[ {\n" : "[{", stdout);
}

static void obj_end(struct out *o)
{
	if (o->json)
		fputs(o->pretty ? "\n    }" : "}", stdout);
	else
		fputs("\n", stdout);
}

static void key(struct out *o, const char *k)
{
	fputs(o->nfield++ ? "," : "", stdout);
	if (o->pretty)
		fputs(o->nfield > 1 ? "\n        " : "        ", stdout);
	sv_tool_json_str(stdout, k);
	fputs(o->pretty ? ": " : ":", stdout);
}

/* A string field: text form fmt (NULL: JSON only). */
static void str(struct out *o, const char *k, const char *fmt, const char *v)
{
	if (o->json) {
		key(o, k);
		sv_tool_json_str(stdout, v);
	} else if (fmt) {
		printf(fmt, v);
	}
}

static void num(struct out *o, const char *k, const char *fmt, unsigned v)
{
	if (o->json) {
		key(o, k);
		printf("%u", v);
	} else if (fmt) {
		printf(fmt, v);
	}
}

static void list_end(struct out *o)
{
	if (o->json)
		fputs(o->pretty ? " ]\n" : "]\n", stdout);
}

static const char *state_str(unsigned s)
{
	static const char *const n[] = { "NOP",	   "DOWN",   "INIT",
					 "ARMED",  "ACTIVE", "ACTIVE_DEFER" };

	return s < sizeof(n) / sizeof(n[0]) ? n[s] : "UNKNOWN";
}

static const char *phys_str(unsigned s)
{
	static const char *const n[] = { "NOP",	    "SLEEP",   "POLLING",
					 "DISABLED", "ARMED",	"LINK_UP",
					 "LINK_ERROR_RECOVER", "PHY_TEST" };

	return s < sizeof(n) / sizeof(n[0]) ? n[s] : "UNKNOWN";
}

/* DEV (or, for link, DEV/PORT) naming our device and port: 0, or -1
 * after rdma's own message. */
static int match_dev(const struct sv_tool_dev *di, const char *arg, int link)
{
	const char *slash = strchr(arg, '/');
	size_t n = slash ? (size_t)(slash - arg) : strlen(arg);
	char *end;

	if (slash && (!link || !slash[1] ||
		      strtoul(slash + 1, &end, 10) > di->dev.num_ports || *end))
		n = 0;
	if (n != strlen(di->dev.name) || strncmp(arg, di->dev.name, n)) {
		fprintf(stderr, "Wrong device name\n");
		return -1;
	}
	return 0;
}

static void show_dev(const struct sv_tool_dev *di, struct out *o)
{
	char guid[32];

	obj_begin(o);
	num(o, "ifindex", "%u: ", 0);
	str(o, "ifname", "%s: ", di->dev.name);
	str(o, "node_type", "node_type %s ", "ca");
	str(o, "fw", "fw %s ", di->attr.orig_attr.fw_ver);
	sv_tool_guid_str(guid, sizeof(guid), di->attr.orig_attr.node_guid);
	str(o, "node_guid", "node_guid %s ", guid);
	sv_tool_guid_str(guid, sizeof(guid), di->attr.orig_attr.sys_image_guid);
	str(o, "sys_image_guid", "sys_image_guid %s ", guid);
	obj_end(o);
	list_end(o);
}

static void show_link(const struct sv_tool_dev *di, struct out *o,
		      int details)
{
	char ifname[IF_NAMESIZE];
	int ndev = sv_tool_port_netdev(di, ifname);

	obj_begin(o);
	num(o, "ifindex", NULL, 0);
	str(o, "ifname", "link %s/", di->dev.name);
	num(o, "port", "%u ", 1);
	str(o, "state", "state %s ", state_str(di->port.state));
	str(o, "physical_state", "physical_state %s ",
	    phys_str(di->port.phys_state));
	if (ndev) {
		str(o, "netdev", "netdev %s ", ifname);
		num(o, "netdev_index", details ? "netdev_index %u " : NULL,
		    (unsigned)ndev);
	}
	obj_end(o);
	list_end(o);
}

/* rdma's matching: a word may be shortened to any prefix. */
static int is(const char *arg, const char *word)
{
	size_t n = strlen(arg);

	return n && n <= strlen(word) && !strncmp(arg, word, n);
}

int sv_cmd_rdma(int argc, char **argv)
{
	struct out o = { 0 };
	struct sv_tool_dev di;
	const char *obj, *cmd, *arg[3] = { NULL, NULL, NULL };
	int details = 0, nargs = 0, err, link;

	/* Options anywhere, as rdma takes them (getopt's order). */
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];

		if (opt[0] == '-' && opt[1])
			opt += 1 + (opt[1] == '-');
		else
			opt = NULL;
		if (!opt) {
			if (nargs == 3) {
				fprintf(stderr, "Unknown parameter \"%s\"\n",
					argv[i]);
				return 1;
			}
			arg[nargs++] = argv[i];
		} else if (argv[i][1] != '-' && strlen(opt) > 1 &&
			   strspn(opt, "jpdfr") == strlen(opt)) {
			o.json |= !!strchr(opt, 'j'); /* -jp: short ones together */
			o.pretty |= !!strchr(opt, 'p');
			details |= !!strchr(opt, 'd');
		} else if (is(opt, "json")) {
			o.json = 1;
		} else if (is(opt, "pretty")) {
			o.pretty = 1;
		} else if (is(opt, "details")) {
			details = 1;
		} else if (is(opt, "force") || is(opt, "raw")) {
			continue;
		} else if (is(opt, "help")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "Unknown option \"%s\"\n", argv[i]);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	o.pretty &= o.json;
	obj = arg[0];
	if (!obj || is(obj, "help")) {
		usage(obj ? stdout : stderr);
		return obj ? 0 : EXIT_USAGE;
	}
	if (!is(obj, "dev") && !is(obj, "link")) {
		fprintf(stderr,
			"rdma: object \"%s\" is not available for the softverbs device (only dev and link; 'softverbs res show' lists its resources)\n",
			obj);
		return 1;
	}
	link = is(obj, "link");
	cmd = arg[1] ? arg[1] : "show";
	if (is(cmd, "help")) {
		printf(link ? "Usage: rdma link show [DEV/PORT_INDEX]\n" :
			      "Usage: rdma dev show [DEV]\n");
		return 0;
	}
	if (!is(cmd, "show") && !is(cmd, "list")) {
		fprintf(stderr, "Unknown %s command \"%s\"\n",
			link ? "link" : "dev", cmd);
		return 1;
	}
	err = sv_tool_dev_query(&di);
	if (err) {
		sv_tool_err("the device did not answer: %s", strerror(-err));
		return 1;
	}
	if (arg[2] && match_dev(&di, arg[2], link))
		return 1;
	if (link)
		show_link(&di, &o, details);
	else
		show_dev(&di, &o);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * softverbs capture -w FILE: every packet the device sends and receives,
 * as a pcap Wireshark decodes (sv_proto.h "Capture").
 *
 * The daemon streams a pcap on a pipe; this command copies it to the
 * file, whole records only: it parses the record headers as they pass,
 * so -c stops exactly after COUNT packets and a SIGINT or SIGTERM at any
 * moment leaves a file that ends on a record boundary.  What was already
 * in the pipe when the signal came is kept; then the command asks how
 * many records the daemon had to drop (its reader, this command or what
 * reads our stdout, was too slow) and closes the stream, which ends the
 * session.
 */
#include "tool_int.h"
#include "sv_client.h"
#include "sv_hdr.h"
#include "sv_roce.h"
#include "sv_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define IN_BUF (1u << 20)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softverbs capture -w FILE [--qpn N] [--pid PID] [-c COUNT]\n"
		"\n"
		"Writes every packet the device sends and receives, between processes of\n"
		"this host and on the wire alike, to FILE as a pcap (libpcap format, raw\n"
		"IP: RoCE v2 over UDP port 4791, local packets with the IP and UDP\n"
		"headers they would have on the wire), which Wireshark and tshark decode\n"
		"as InfiniBand.  Until SIGINT or SIGTERM (or -c, or the daemon's end); the\n"
		"file always ends on a whole packet.  At the end, on stderr: packets\n"
		"written, and packets the daemon dropped because they were read too slowly.\n"
		"\n"
		"  -w FILE      the pcap to write; '-' = standard output, for a live view:\n"
		"                 softverbs capture -w - | tshark -l -r -\n"
		"  --qpn N      only packets to or from QP N (decimal or 0x hex)\n"
		"  --pid PID    only packets process PID sent or received\n"
		"  -c COUNT     stop after COUNT packets\n"
		"\n"
		"Capturing costs the programs nothing while no capture runs.\n");
}

static int parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (!*s || *end || errno || v > max || *s == '-')
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* Every byte, or -errno. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

struct copier {
	int in, out;
	uint8_t *buf;
	size_t have;	  /* bytes in buf */
	int header_done;  /* the file header went out */
	uint64_t count;	  /* records written */
	uint64_t limit;	  /* 0: none */
};

/*
 * Writes the whole records at the start of buf (at most up to the limit)
 * and keeps the rest.  0, 1 when the limit is reached, or -errno (a
 * write error, or -EPROTO: the stream is not the pcap we expect).
 */
static int pass_records(struct copier *cp)
{
	size_t pos = 0;
	int err, done = 0;

	if (!cp->header_done) {
		if (cp->have < SV_PCAP_FILE_HDR)
			return 0;
		if (ld_le32(cp->buf) != SV_PCAP_MAGIC_NS ||
		    ld_le32(cp->buf + 20) != SV_PCAP_LINKTYPE_RAW)
			return -EPROTO;
		pos = SV_PCAP_FILE_HDR;
	}
	while (!done && cp->have - pos >= SV_PCAP_REC_HDR) {
		uint32_t len = ld_le32(cp->buf + pos + 8);

		if (len > SV_PCAP_SNAPLEN || ld_le32(cp->buf + pos + 12) != len)
			return -EPROTO;
		if (cp->have - pos - SV_PCAP_REC_HDR < len)
			break;
		pos += SV_PCAP_REC_HDR + len;
		cp->count++;
		done = cp->limit && cp->count >= cp->limit;
	}
	err = write_all(cp->out, cp->buf, pos);
	if (err)
		return err;
	cp->header_done = 1;
	memmove(cp->buf, cp->buf + pos, cp->have - pos);
	cp->have -= pos;
	return done;
}

/* Reads what the pipe holds: >0 bytes read, 0 EOF, -EAGAIN nothing now
 * (non-blocking), or -errno.  There is always room: what pass_records
 * leaves is less than one record, and a record is at most the snaplen. */
static ssize_t fill(struct copier *cp)
{
	ssize_t n;

	do
		n = read(cp->in, cp->buf + cp->have, IN_BUF - cp->have);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	cp->have += (size_t)n;
	return n;
}

static int start(const struct sv_capture_req *req, uint32_t *session, int *fd)
{
	struct sv_capture_rep rep;
	struct sv_call c = { .op = SV_OP_CAPTURE_START,
			     .attach_fd = -1,
			     .req = req,
			     .req_len = sizeof(*req),
			     .rep = &rep,
			     .rep_cap = sizeof(rep),
			     .rfds = fd,
			     .max_rfds = 1 };
	int err = sv_call(&c);

	if (!err && (c.rep_len != sizeof(rep) || c.nrfds != 1)) {
		sv_close_fds(fd, c.nrfds);
		err = -EPROTO;
	}
	if (err)
		return err;
	*session = rep.session;
	return 0;
}

int sv_cmd_capture(int argc, char **argv)
{
	struct sv_capture_req req = { 0 };
	struct sv_capture_stats_rep st = { 0 };
	struct sv_capture_rep sreq = { 0 };
	struct copier cp = { .in = -1, .out = -1 };
	const char *path = NULL, *why = NULL, *note = NULL;
	int i, err, sfd = -1, rc = 1, stats_err;
	uint64_t instance = 0;
	uint32_t v;
	sigset_t mask;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (sv_tool_is_help(a)) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-w") && i + 1 < argc) {
			path = argv[++i];
		} else if (!strcmp(a, "--qpn") && i + 1 < argc) {
			if (parse_u32(argv[++i], 0xffffff, &req.qpn))
				sv_tool_usage_err("capture", "bad QP number '%s'",
						  argv[i]);
			req.flags |= SV_CAPTURE_QPN;
		} else if (!strcmp(a, "--pid") && i + 1 < argc) {
			if (parse_u32(argv[++i], INT_MAX, &req.pid) || !req.pid)
				sv_tool_usage_err("capture", "bad pid '%s'",
						  argv[i]);
			req.flags |= SV_CAPTURE_PID;
		} else if (!strcmp(a, "-c") && i + 1 < argc) {
			if (parse_u32(argv[++i], UINT32_MAX, &v) || !v)
				sv_tool_usage_err("capture", "bad count '%s'",
						  argv[i]);
			cp.limit = v;
		} else {
			sv_tool_usage_err("capture", "unexpected '%s'", a);
		}
	}
	if (!path)
		sv_tool_usage_err("capture", "-w FILE is required");

	if (!strcmp(path, "-")) {
		if (isatty(STDOUT_FILENO)) {
			sv_tool_err("not writing a pcap to a terminal: pipe it "
				    "(softverbs capture -w - | tshark -r -)");
			return 1;
		}
		cp.out = STDOUT_FILENO;
		path = "standard output";
	} else {
		cp.out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0644);
		if (cp.out < 0) {
			sv_tool_err("cannot write %s: %s", path, strerror(errno));
			return 1;
		}
	}
	cp.buf = malloc(IN_BUF);
	if (!cp.buf) {
		sv_tool_err("out of memory");
		goto out;
	}

	/* Signals arrive on a descriptor: the copy loop waits on both. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0) {
		sv_tool_err("signalfd: %s", strerror(errno));
		goto out;
	}

	err = start(&req, &sreq.session, &cp.in);
	if (err) {
		sv_tool_err("cannot start a capture: %s",
			    err == -EBUSY ? "too many captures running" :
					    strerror(-err));
		goto out;
	}
	instance = sv_chan_instance(&err);
	if (!instance)
		instance = 2; /* no daemon's (theirs are odd): never start one */

	for (;;) {
		struct pollfd pfd[2] = { { cp.in, POLLIN, 0 },
					 { sfd, POLLIN, 0 } };
		int stopping;
		ssize_t n;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			why = strerror(errno);
			break;
		}
		/* On a signal, keep what already arrived, then stop. */
		stopping = pfd[1].revents != 0;
		if (stopping)
			fcntl(cp.in, F_SETFL, O_NONBLOCK);
		n = fill(&cp);
		if (n == 0) {
			if (!stopping)
				note = "the daemon ended the capture";
			break;
		}
		if (n < 0) {
			if (n != -EAGAIN)
				why = strerror((int)-n);
			break;
		}
		err = pass_records(&cp);
		if (err == 1)
			break; /* -c reached */
		if (err == -EPIPE)
			break; /* whoever read our stdout is gone: an end */
		if (err < 0) {
			why = err == -EPROTO ? "the stream is not a pcap" :
					       strerror(-err);
			break;
		}
		if (stopping) {
			while (fill(&cp) > 0 && pass_records(&cp) == 0)
				;
			break;
		}
	}
	if (why)
		sv_tool_err("%s", why);
	else
		rc = 0;
	/* The same daemon only: never start one to ask (-EIO if it is gone). */
	stats_err = sv_call_simple(SV_OP_CAPTURE_STATS, 0, instance, -1, &sreq,
				   sizeof(sreq), &st, sizeof(st));
	close(cp.in);
	cp.in = -1;
	if (note)
		fprintf(stderr, "softverbs: %s\n", note);
	if (stats_err)
		fprintf(stderr, "softverbs: %llu packets written to %s\n",
			(unsigned long long)cp.count, path);
	else
		fprintf(stderr,
			"softverbs: %llu packets written to %s, %llu dropped "
			"(read too slowly)\n",
			(unsigned long long)cp.count, path,
			(unsigned long long)st.dropped);
out:
	if (cp.in >= 0)
		close(cp.in);
	if (sfd >= 0)
		close(sfd);
	if (cp.out >= 0 && cp.out != STDOUT_FILENO && close(cp.out) < 0) {
		sv_tool_err("writing %s: %s", path, strerror(errno));
		rc = 1;
	}
	free(cp.buf);
	return rc;
}

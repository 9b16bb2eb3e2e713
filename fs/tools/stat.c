// SPDX-License-Identifier: MIT
/*
 * nvmefs-stat: the I/O statistics of a mounted nvmefs volume, like iostat.
 *
 *   nvmefs-stat [-c COUNT] [-j] MOUNTPOINT [INTERVAL]
 *
 * The daemon publishes its counters as one JSON object in the read-only file
 * MOUNTPOINT/.nvmefs/stats (schema version 1, regenerated at each open; its
 * st_size means nothing, as for a /proc file, so it is read until EOF).
 * Without INTERVAL this prints the totals since mount once. With INTERVAL
 * (seconds) it prints them, then every INTERVAL what happened during it:
 * rates, the mean latency of the I/Os completed in it, errors, the FUSE
 * requests by type and the native client's traffic; until COUNT reports or
 * SIGINT/SIGTERM (exit 0).
 *
 * Rates divide by the change of the daemon's uptime_ns, which it takes with
 * the counters, so a late wake-up of this program does not skew them; only
 * when uptime_ns did not move (the same snapshot twice) does our own clock
 * stand in. When the device list, the volume or the counters jump between
 * two samples (a remount), the fresh totals are printed instead of
 * differences. -j prints each sample as one line of JSON instead of tables
 * (JSON Lines: the daemon's object re-printed compactly, every key kept).
 *
 * Unknown keys are ignored (forward compatibility); every key of schema
 * version 1 is required, and a missing or mistyped one is refused naming
 * the file and the key. The "native" object (the native client's door,
 * libnvmefs) is the exception: daemons before it lack it, and then no
 * native line is printed; when it is there, its keys are required too.
 *
 * Standalone on purpose: libc and json-c only, nothing from the rest of the
 * project, so it builds wherever the daemon's output is read.
 *
 * This file holds the reports and the program; stat_sample.c reads,
 * decodes and differences the samples, and stat_i.h holds what both share.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stat_i.h"

#ifndef NVMEFS_VERSION
#define NVMEFS_VERSION "unknown"
#endif

#define MAX_INTERVAL_S 3600.0
#define TOP_REQUESTS   8 /* request types shown per report */
#define MIB	       1048576.0

/* Set by SIGINT/SIGTERM: stop after the report being made, exit 0. */
volatile sig_atomic_t stop;

/* ---- reports ---- */

/* NS as "12.345 s", "01:02:03" or "3d 01:02:03". */
static void format_duration(uint64_t ns, char *buf, size_t size)
{
	uint64_t s = ns / 1000000000u;
	unsigned h = (unsigned)(s / 3600 % 24), m = (unsigned)(s / 60 % 60);

	if (s < 60)
		snprintf(buf, size, "%.3f s", (double)ns / 1e9);
	else if (s < 86400)
		snprintf(buf, size, "%02u:%02u:%02u", h, m, (unsigned)(s % 60));
	else
		snprintf(buf, size, "%" PRIu64 "d %02u:%02u:%02u", s / 86400, h, m,
			 (unsigned)(s % 60));
}

/* The path column: as wide as the longest path, at least 4. */
static int path_width(const struct sample *s)
{
	size_t w = 4;

	for (size_t i = 0; i < s->ndev; i++)
		if (strlen(s->dev[i].path) > w)
			w = strlen(s->dev[i].path);
	return w > 256 ? 256 : (int)w;
}

static double mean_latency_ns(const struct dev_stats *d)
{
	uint64_t ops = d->read_ops + d->write_ops;

	return ops ? (double)d->latency_sum_ns / (double)ops : 0.0;
}

#define TOTAL_HEAD "%3s  %-*s %10s %10s %10s %10s %7s %9s %6s %6s\n"
#define TOTAL_ROW                                                                                  \
	"%3s  %-*s %10" PRIu64 " %10.2f %10" PRIu64 " %10.2f %7" PRIu64 " %9.1f %6" PRIu64         \
	" %6" PRIu64 "\n"

/* One row of the totals table: ops, MiB, errors, mean latency (us), gauges. */
static void print_total_row(const char *name, const struct dev_stats *d, int w)
{
	printf(TOTAL_ROW, name, w, d->path, d->read_ops, (double)d->read_bytes / MIB, d->write_ops,
	       (double)d->write_bytes / MIB, d->errors, mean_latency_ns(d) / 1e3, d->in_flight,
	       d->queued);
}

#define RATE_HEAD "%3s  %-*s %9s %9s %9s %9s %9s %7s %6s %6s\n"
#define RATE_ROW  "%3s  %-*s %9.1f %9.2f %9.1f %9.2f %9.3f %7" PRIu64 " %6" PRIu64 " %6" PRIu64 "\n"

/* One row of an interval's table: D is the difference over SECS seconds. */
static void print_rate_row(const char *name, const struct dev_stats *d, int w, double secs)
{
	printf(RATE_ROW, name, w, d->path, (double)d->read_ops / secs,
	       (double)d->read_bytes / MIB / secs, (double)d->write_ops / secs,
	       (double)d->write_bytes / MIB / secs, mean_latency_ns(d) / 1e6, d->errors,
	       d->in_flight, d->queued);
}

/* "requests: READ 300, WRITE 200, ..." the TOP_REQUESTS biggest of R (sorted). */
static void print_requests(const struct req_count *r, size_t n)
{
	uint64_t rest = 0;
	size_t shown = 0, others = 0;

	fputs("requests:", stdout);
	for (size_t i = 0; i < n && r[i].count; i++) {
		if (shown == TOP_REQUESTS) {
			others++;
			rest += r[i].count;
			continue;
		}
		printf("%s %s %" PRIu64, shown ? "," : "", r[i].name, r[i].count);
		shown++;
	}
	if (!shown)
		fputs(" none", stdout);
	if (others)
		printf(" (and %zu more types: %" PRIu64 ")", others, rest);
	putchar('\n');
}

static void print_pool(const struct pool_stats *p, bool detail)
{
	printf("pool: %" PRIu64 " of %" PRIu64 " buffers in use", p->in_use, p->buffers);
	if (detail)
		printf(" (%" PRIu64 " allocated, %" PRIu64 " bytes each, %spinned)", p->allocated,
		       p->buffer_bytes, p->pinned ? "" : "not ");
	putchar('\n');
}

/* "native: ..." totals since mount. */
static void print_native_totals(const struct native_stats *n)
{
	printf("native: %" PRIu64 " clients (%" PRIu64 " connects), %" PRIu64
	       " reads (%.2f MiB), %" PRIu64 " writes (%.2f MiB), %" PRIu64 " fsyncs, %" PRIu64
	       " requests copied (%" PRIu64 " bytes), %" PRIu64 " refused, %" PRIu64
	       " invalidations\n",
	       n->clients, n->connects, n->reads, (double)n->read_bytes / MIB, n->writes,
	       (double)n->write_bytes / MIB, n->fsyncs, n->copied_requests, n->copied_bytes,
	       n->refused, n->invalidations);
}

/*
 * "native: ..." over an interval of SECS between A and B: reads and writes
 * as rates, the other counters as counts. A counter that went back (or an A
 * without the object) counts from 0.
 */
static void print_native_interval(const struct native_stats *a, const struct native_stats *b,
				  double secs)
{
	struct native_stats d = *b;

	for (size_t f = 0; f < native_ncounters; f++) {
		uint64_t was = field_get(a, &native_counters[f]),
			 now = field_get(b, &native_counters[f]);

		*field(&d, &native_counters[f]) = now - (was <= now ? was : 0);
	}
	printf("native: %" PRIu64
	       " clients, %.1f reads/s (%.2f MiB/s), %.1f writes/s (%.2f MiB/s), %" PRIu64
	       " fsyncs, %" PRIu64 " requests copied, %" PRIu64 " refused, %" PRIu64
	       " invalidations\n",
	       d.clients, (double)d.reads / secs, (double)d.read_bytes / MIB / secs,
	       (double)d.writes / secs, (double)d.write_bytes / MIB / secs, d.fsyncs,
	       d.copied_requests, d.refused, d.invalidations);
}

/* The header's note on a volume shut down (FS_IOC_SHUTDOWN). */
#define SHUT_NOTE(s) ((s)->shut_down ? "  SHUT DOWN (requests answer EIO until unmount)" : "")

/* The totals since mount: header, device table, pool, requests, data path, native door,
 * transport. */
static void print_totals(const struct sample *s)
{
	const struct data_stats *d = &s->data;
	int w = path_width(s);
	struct dev_stats tot;
	char name[24];

	format_duration(s->uptime_ns, name, sizeof(name));
	printf("nvmefs %s  label %s  uuid %s  up %s%s\n", s->mountpoint,
	       *s->label ? s->label : "(none)", s->uuid, name, SHUT_NOTE(s));
	printf(TOTAL_HEAD, "dev", w, "path", "reads", "rMiB", "writes", "wMiB", "errors", "lat_us",
	       "inflt", "queue");
	for (size_t i = 0; i < s->ndev; i++) {
		snprintf(name, sizeof(name), "%" PRIu64, s->dev[i].index);
		print_total_row(name, &s->dev[i], w);
	}
	sum_devices(s, &tot);
	print_total_row("all", &tot, w);
	print_pool(&s->pool, true);
	print_requests(s->req, s->nreq);
	printf("data: %" PRIu64 " reads, %" PRIu64 " writes (%" PRIu64 " zero-copy), %" PRIu64
	       " bytes copied, %" PRIu64 " in flight (peak %" PRIu64 ")\n",
	       d->reads, d->writes, d->zero_copy_writes, d->copied_bytes, d->in_flight,
	       d->peak_in_flight);
	if (d->has_held)
		printf("  %" PRIu64 " writes answered early, %" PRIu64
		       " of them held back and sent together in %" PRIu64 " sends\n",
		       d->behind_writes, d->held_writes, d->held_sends);
	if (s->has_native)
		print_native_totals(&s->native);
	if (s->transport && s->uring_queues) {
		char spread[48] = "";

		if (s->has_spread)
			snprintf(spread, sizeof(spread), " (%" PRIu64 " spread over the CPUs)",
				 s->uring_spread);
		printf("transport: %s, %" PRIu64 " queues of %" PRIu64 " entries%s, %" PRIu64
		       " requests through them (FORGET, INTERRUPT and notices on /dev/fuse)\n",
		       s->transport, s->uring_queues, s->uring_depth, spread, s->uring_requests);
		if (s->has_away)
			printf("  %" PRIu64 " led from another CPU, polling; %" PRIu64
			       " waits ended by polling\n",
			       s->uring_away, s->uring_polled);
	} else if (s->transport)
		printf("transport: %s\n", s->transport);
	if (s->transport && s->has_cpulat)
		printf("  idle CPUs kept awake (cpu_latency): %s, %" PRIu64 " busy spells held\n",
		       s->cpulat_held < 0 ? "off (nothing asked)"
		       : s->cpulat_held	  ? "held now"
					  : "not held now (quiet)",
		       s->cpulat_holds);
}

/* What happened between PREV and CUR (same volume, same devices). */
static int print_interval(const struct sample *prev, const struct sample *cur)
{
	double secs = interval_s(prev, cur);
	struct dev_stats a, b, d;
	struct req_count *req;
	int w = path_width(cur);
	char name[24];

	if (request_deltas(prev, cur, &req))
		return -ENOMEM;
	format_duration(cur->uptime_ns, name, sizeof(name));
	printf("interval %.3f s  up %s%s\n", secs, name, SHUT_NOTE(cur));
	printf(RATE_HEAD, "dev", w, "path", "r/s", "rMiB/s", "w/s", "wMiB/s", "await_ms", "errors",
	       "inflt", "queue");
	for (size_t i = 0; i < cur->ndev; i++) {
		dev_delta(&prev->dev[i], &cur->dev[i], &d);
		snprintf(name, sizeof(name), "%" PRIu64, d.index);
		print_rate_row(name, &d, w, secs);
	}
	sum_devices(prev, &a);
	sum_devices(cur, &b);
	dev_delta(&a, &b, &d);
	print_rate_row("all", &d, w, secs);
	print_pool(&cur->pool, false);
	print_requests(req, cur->nreq);
	free(req);
	if (cur->has_native) {
		static const struct native_stats none;

		print_native_interval(prev->has_native ? &prev->native : &none, &cur->native, secs);
	}
	return 0;
}

/* One report on CUR (PREV: the sample before, or NULL for the first). */
static int report(const struct sample *prev, const struct sample *cur, bool json)
{
	const char *why;
	int ret = 0;

	if (json) {
		puts(json_object_to_json_string_ext(
			cur->root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	} else {
		why = prev ? reset_reason(prev, cur) : NULL;
		if (prev)
			putchar('\n'); /* reports apart, as iostat's */
		if (why)
			printf("counters reset (%s): totals since mount\n", why);
		if (!prev || why)
			print_totals(cur);
		else
			ret = print_interval(prev, cur);
	}
	/* Live output for a pipe: flush each report, and see it arrive. */
	if (fflush(stdout) || ferror(stdout)) {
		if (!stop)
			errmsg("cannot write to stdout: %s", strerror(errno));
		return -EIO;
	}
	return ret;
}

/* ---- the program ---- */

struct opts {
	const char *mnt;
	char file[PATH_MAX];	  /* mnt/STATS_FILE */
	double interval;	  /* seconds; 0: report once */
	unsigned long long count; /* reports; 0: until a signal */
	bool json;
};

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/*
 * Sleep until *DEADLINE_NS (CLOCK_MONOTONIC), which is then moved on by
 * STEP_NS. Returns true when SIGINT or SIGTERM came. The signals are blocked
 * while the flag is checked and taken by sigtimedwait(), so one arriving
 * just before the sleep is not lost; they stay deliverable during reads, so
 * a read stuck on a hung daemon still gives way.
 */
static bool wait_until(uint64_t *deadline_ns, uint64_t step_ns)
{
	sigset_t set, old;
	uint64_t now;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, &old);
	while (!stop && (now = now_ns()) < *deadline_ns) {
		uint64_t left = *deadline_ns - now;
		struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};

		/* -1: timed out or another signal; the clock decides. */
		if (sigtimedwait(&set, NULL, &ts) > 0)
			stop = 1;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	*deadline_ns += step_ns;
	/* Stopped (^Z) or a slow read: start afresh rather than catch up. */
	if (*deadline_ns < now_ns())
		*deadline_ns = now_ns() + step_ns;
	return stop;
}

/* The reports: the totals, then one per interval. 0 or -errno. */
static int run(const struct opts *o)
{
	uint64_t step = (uint64_t)(o->interval * 1e9 + 0.5), deadline; /* no libm */
	struct sample prev = {0}, cur = {0};
	int ret;

	ret = sample_read(&prev, o->mnt, o->file);
	if (!ret)
		ret = report(NULL, &prev, o->json);
	deadline = now_ns() + step;
	for (unsigned long long n = 1; !ret && o->interval > 0 && (!o->count || n < o->count);
	     n++) {
		if (wait_until(&deadline, step ? step : 1))
			break;
		ret = sample_read(&cur, o->mnt, o->file);
		if (ret)
			break;
		ret = report(&prev, &cur, o->json);
		sample_destroy(&prev);
		prev = cur;
		memset(&cur, 0, sizeof(cur));
	}
	sample_destroy(&prev);
	return stop ? 0 : ret; /* what a signal cut short is not an error */
}

static void usage(FILE *out)
{
	fprintf(out, "usage: nvmefs-stat [-c COUNT] [-j] MOUNTPOINT [INTERVAL]\n"
		     "I/O statistics of a mounted nvmefs volume (MOUNTPOINT/" STATS_FILE ").\n"
		     "Without INTERVAL: the totals since mount, once. With INTERVAL (seconds,\n"
		     "fractions allowed, at most 3600): the totals, then every INTERVAL the rates\n"
		     "over it, until COUNT reports or SIGINT/SIGTERM.\n"
		     "  -c, --count COUNT  stop after COUNT reports, the first one included\n"
		     "  -j, --json         each sample as one line of JSON instead of tables\n"
		     "  -h, --help         print this help\n"
		     "  -V, --version      print the version\n"
		     "Exit status: 0 done (also when stopped by a signal), 1 error.\n");
}

/* INTERVAL: seconds, > 0 and <= MAX_INTERVAL_S. */
static int parse_interval(const char *arg, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(arg, &end);
	if (end == arg || *end || errno || !isfinite(*out) || *out <= 0 || *out > MAX_INTERVAL_S) {
		errmsg("bad interval '%s': give seconds, more than 0 and at most %.0f", arg,
		       MAX_INTERVAL_S);
		return -EINVAL;
	}
	return 0;
}

/* COUNT: a whole number, at least 1. */
static int parse_count(const char *arg, unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(arg, &end, 10);
	/* strtoull takes "-1" as a huge number: refuse any sign. */
	if (end == arg || *end || errno || *out == 0 || strpbrk(arg, "-+")) {
		errmsg("bad count '%s': give a whole number, at least 1", arg);
		return -EINVAL;
	}
	return 0;
}

/* The command line into *O; 1 when -h/-V answered, 0 to go on, or -EINVAL. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{"count", required_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c, nargs;

	while ((c = getopt_long(argc, argv, "c:jhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (parse_count(optarg, &o->count))
				return -EINVAL;
			break;
		case 'j':
			o->json = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("nvmefs-stat %s (stats schema %d)\n", NVMEFS_VERSION,
			       SCHEMA_VERSION);
			return 1;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	nargs = argc - optind;
	if (nargs < 1 || nargs > 2) {
		if (nargs < 1)
			errmsg("give a MOUNTPOINT");
		else
			errmsg("too many arguments: '%s'", argv[argc - 1]);
		usage(stderr);
		return -EINVAL;
	}
	o->mnt = argv[optind];
	if (nargs == 2 && parse_interval(argv[optind + 1], &o->interval))
		return -EINVAL;
	if (o->count && nargs == 1) {
		errmsg("-c %llu needs an INTERVAL", o->count);
		return -EINVAL;
	}
	return 0;
}

/* O->file = O->mnt + "/" STATS_FILE, without doubling a trailing slash. */
static int stats_path(struct opts *o)
{
	size_t len = strlen(o->mnt);
	int n;

	while (len > 1 && o->mnt[len - 1] == '/')
		len--;
	n = snprintf(o->file, sizeof(o->file), "%.*s%s" STATS_FILE, (int)len, o->mnt,
		     o->mnt[len - 1] == '/' ? "" : "/");
	if (n < 0 || (size_t)n >= sizeof(o->file)) {
		errmsg("%s: name too long", o->mnt);
		return -ENAMETOOLONG;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: reads give way */
	struct opts o = {0};
	int ret;

	ret = parse_args(argc, argv, &o);
	if (ret)
		return ret > 0 ? 0 : 1;
	if (!*o.mnt) {
		errmsg("the MOUNTPOINT is empty");
		return 1;
	}
	if (stats_path(&o))
		return 1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return run(&o) ? 1 : 0;
}

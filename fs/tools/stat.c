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

#ifndef NVMEFS_VERSION
#define NVMEFS_VERSION "unknown"
#endif

#define STATS_FILE     ".nvmefs/stats"
#define SCHEMA_VERSION 1
#define MAX_STATS_SIZE (16u << 20) /* far above a real file: stops a runaway read */
#define MAX_INTERVAL_S 3600.0
#define TOP_REQUESTS   8 /* request types shown per report */
#define MIB	       1048576.0

/* Set by SIGINT/SIGTERM: stop after the report being made, exit 0. */
static volatile sig_atomic_t stop;

/* ---- the sample: one read of the stats file, decoded ---- */

/*
 * One device (schema: devices[i]). The counters are cumulative since
 * mount; in_flight and queued are the state at the moment of the sample.
 */
struct dev_stats {
	uint64_t index;
	const char *path; /* owned by the sample's JSON tree */
	uint64_t read_ops, read_bytes, write_ops, write_bytes, errors;
	uint64_t latency_sum_ns; /* sum of the latencies of the completed I/Os */
	double mean_latency_us;
	uint64_t in_flight, queued;
};

struct pool_stats {
	uint64_t buffer_bytes, buffers, allocated, in_use;
	bool pinned;
};

/* FUSE requests of one opcode (schema: requests.NAME). */
struct req_count {
	const char *name; /* owned by the sample's JSON tree */
	uint64_t count;
};

struct data_stats {
	uint64_t reads, writes, zero_copy_writes, copied_bytes, in_flight, peak_in_flight;
};

/* The native door's (schema: native). clients is a gauge, the rest counters. */
struct native_stats {
	uint64_t clients, connects, reads, writes, fsyncs, read_bytes, write_bytes;
	uint64_t copied_requests, copied_bytes, refused, invalidations;
};

struct sample {
	struct json_object *root; /* owns every string below; NULL when empty */
	const char *mountpoint, *uuid, *label;
	uint64_t uptime_ns;
	uint64_t taken_ns; /* our CLOCK_MONOTONIC at the read: the stand-in clock */
	struct dev_stats *dev;
	size_t ndev;
	struct pool_stats pool;
	struct req_count *req; /* sorted: biggest count first */
	size_t nreq;
	struct data_stats data;
	bool has_native; /* false: a daemon without the native door's counters */
	struct native_stats native;
	/* The transport (none: a daemon from before FUSE over io_uring). */
	const char *transport;
	uint64_t uring_queues, uring_depth, uring_requests;
};

/* A uint64_t member of a struct, named by its schema key. */
struct u64_field {
	const char *key;
	size_t off;
};

/* Braced initializers in macros: clang-format would split them over lines. */
/* clang-format off */
#define DEV_FIELD(f)    {#f, offsetof(struct dev_stats, f)}
#define POOL_FIELD(f)   {#f, offsetof(struct pool_stats, f)}
#define DATA_FIELD(f)   {#f, offsetof(struct data_stats, f)}
#define NATIVE_FIELD(f) {#f, offsetof(struct native_stats, f)}
/* clang-format on */
#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* A device's cumulative counters: the ones differences are taken of. */
static const struct u64_field dev_counters[] = {
	DEV_FIELD(read_ops),	DEV_FIELD(read_bytes), DEV_FIELD(write_ops),
	DEV_FIELD(write_bytes), DEV_FIELD(errors),     DEV_FIELD(latency_sum_ns),
};

/* The rest: the device's index and gauges (its state when sampled), never differenced. */
static const struct u64_field dev_gauges[] = {DEV_FIELD(index), DEV_FIELD(in_flight),
					      DEV_FIELD(queued)};

static const struct u64_field pool_fields[] = {
	POOL_FIELD(buffer_bytes),
	POOL_FIELD(buffers),
	POOL_FIELD(allocated),
	POOL_FIELD(in_use),
};

static const struct u64_field data_fields[] = {
	DATA_FIELD(reads),	  DATA_FIELD(writes),	 DATA_FIELD(zero_copy_writes),
	DATA_FIELD(copied_bytes), DATA_FIELD(in_flight), DATA_FIELD(peak_in_flight),
};

/* The native door's counters; its one gauge, clients, is decoded apart. */
static const struct u64_field native_counters[] = {
	NATIVE_FIELD(connects),	       NATIVE_FIELD(reads),	   NATIVE_FIELD(writes),
	NATIVE_FIELD(fsyncs),	       NATIVE_FIELD(read_bytes),   NATIVE_FIELD(write_bytes),
	NATIVE_FIELD(copied_requests), NATIVE_FIELD(copied_bytes), NATIVE_FIELD(refused),
	NATIVE_FIELD(invalidations),
};

static uint64_t *field(void *base, const struct u64_field *f)
{
	return (uint64_t *)((char *)base + f->off);
}

static uint64_t field_get(const void *base, const struct u64_field *f)
{
	return *(const uint64_t *)((const char *)base + f->off);
}

__attribute__((format(printf, 1, 2))) static void errmsg(const char *fmt, ...)
{
	va_list ap;

	fputs("nvmefs-stat: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- decoding, every failure named by file and key ---- */

/* Messages name a key by its path: "devices[1].latency_sum_ns", "pool.in_use". */
#define KEY_FMT		     "\"%s%s%s\""
#define KEY_ARGS(where, key) (where), *(where) ? "." : "", (key)

/*
 * VAL (the value of KEY in WHERE) checked to be of TYPE; an integer
 * passes for a double. 0 or -EBADMSG with a message.
 */
static int check_type(const char *file, struct json_object *val, const char *where, const char *key,
		      enum json_type type)
{
	enum json_type got = json_object_get_type(val);

	if (got == type || (type == json_type_double && got == json_type_int))
		return 0;
	errmsg("%s: key " KEY_FMT " is %s, not %s", file, KEY_ARGS(where, key),
	       json_type_to_name(got), json_type_to_name(type));
	return -EBADMSG;
}

/* The member KEY of OBJ, of TYPE, into *VALP. 0 or -EBADMSG with a message. */
static int member(const char *file, struct json_object *obj, const char *where, const char *key,
		  enum json_type type, struct json_object **valp)
{
	if (!json_object_object_get_ex(obj, key, valp)) {
		errmsg("%s: missing key " KEY_FMT, file, KEY_ARGS(where, key));
		return -EBADMSG;
	}
	return check_type(file, *valp, where, key, type);
}

/* VAL as a non-negative 64-bit integer. 0 or -EBADMSG with a message. */
static int u64_of(const char *file, struct json_object *val, const char *where, const char *key,
		  uint64_t *out)
{
	int ret = check_type(file, val, where, key, json_type_int);

	if (ret)
		return ret;
	/* Above INT64_MAX json-c gives INT64_MAX here, so < 0 means negative. */
	if (json_object_get_int64(val) < 0) {
		errmsg("%s: key " KEY_FMT " is negative", file, KEY_ARGS(where, key));
		return -EBADMSG;
	}
	*out = json_object_get_uint64(val);
	return 0;
}

static int get_u64(const char *file, struct json_object *obj, const char *where, const char *key,
		   uint64_t *out)
{
	struct json_object *val;
	int ret = member(file, obj, where, key, json_type_int, &val);

	return ret ? ret : u64_of(file, val, where, key, out);
}

/* Every field of the table F (N entries) from OBJ into the struct at BASE. */
static int get_u64s(const char *file, struct json_object *obj, const char *where,
		    const struct u64_field *f, size_t n, void *base)
{
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++)
		ret = get_u64(file, obj, where, f[i].key, field(base, &f[i]));
	return ret;
}

/* A string member; *OUT points into OBJ's tree and lives as long as it. */
static int get_string(const char *file, struct json_object *obj, const char *where, const char *key,
		      const char **out)
{
	struct json_object *val;
	int ret = member(file, obj, where, key, json_type_string, &val);

	if (!ret)
		*out = json_object_get_string(val);
	return ret;
}

/* The version comes first: a newer schema may have moved any other key. */
static int decode_version(const char *file, struct json_object *root)
{
	uint64_t version;
	int ret = get_u64(file, root, "", "version", &version);

	if (ret)
		return ret;
	if (version != SCHEMA_VERSION) {
		errmsg("%s: schema version %" PRIu64 " is not supported (this nvmefs-stat "
		       "reads version %d)",
		       file, version, SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	return 0;
}

static int decode_device(const char *file, struct json_object *obj, size_t i, struct dev_stats *d)
{
	struct json_object *val;
	char where[32];
	int ret;

	snprintf(where, sizeof(where), "devices[%zu]", i);
	if (!json_object_is_type(obj, json_type_object)) {
		errmsg("%s: key \"%s\" is %s, not object", file, where,
		       json_type_to_name(json_object_get_type(obj)));
		return -EBADMSG;
	}
	ret = get_string(file, obj, where, "path", &d->path);
	if (!ret)
		ret = get_u64s(file, obj, where, dev_counters, NFIELDS(dev_counters), d);
	if (!ret)
		ret = get_u64s(file, obj, where, dev_gauges, NFIELDS(dev_gauges), d);
	if (!ret)
		ret = member(file, obj, where, "mean_latency_us", json_type_double, &val);
	if (!ret)
		d->mean_latency_us = json_object_get_double(val);
	return ret;
}

static int decode_devices(const char *file, struct json_object *root, struct sample *s)
{
	struct json_object *arr;
	int ret = member(file, root, "", "devices", json_type_array, &arr);

	if (ret)
		return ret;
	s->ndev = json_object_array_length(arr);
	s->dev = calloc(s->ndev ? s->ndev : 1, sizeof(*s->dev));
	if (!s->dev) {
		errmsg("out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->ndev && !ret; i++)
		ret = decode_device(file, json_object_array_get_idx(arr, i), i, &s->dev[i]);
	return ret;
}

static int req_cmp(const void *a, const void *b)
{
	const struct req_count *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* requests: { NAME: count, ... }, only the opcodes seen; sorted here. */
static int decode_requests(const char *file, struct json_object *root, struct sample *s)
{
	struct json_object_iterator it, end;
	struct json_object *obj;
	int ret = member(file, root, "", "requests", json_type_object, &obj);

	if (ret)
		return ret;
	s->req = calloc((size_t)json_object_object_length(obj) + 1, sizeof(*s->req));
	if (!s->req) {
		errmsg("out of memory");
		return -ENOMEM;
	}
	it = json_object_iter_begin(obj);
	end = json_object_iter_end(obj);
	for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
		struct req_count *r = &s->req[s->nreq++];

		r->name = json_object_iter_peek_name(&it);
		ret = u64_of(file, json_object_iter_peek_value(&it), "requests", r->name,
			     &r->count);
		if (ret)
			return ret;
	}
	qsort(s->req, s->nreq, sizeof(*s->req), req_cmp);
	return 0;
}

static int decode_pool(const char *file, struct json_object *root, struct pool_stats *p)
{
	struct json_object *obj, *val;
	int ret = member(file, root, "", "pool", json_type_object, &obj);

	if (!ret)
		ret = get_u64s(file, obj, "pool", pool_fields, NFIELDS(pool_fields), p);
	if (!ret)
		ret = member(file, obj, "pool", "pinned", json_type_boolean, &val);
	if (!ret)
		p->pinned = json_object_get_boolean(val);
	return ret;
}

static int decode_data(const char *file, struct json_object *root, struct data_stats *d)
{
	struct json_object *obj;
	int ret = member(file, root, "", "data", json_type_object, &obj);

	return ret ? ret : get_u64s(file, obj, "data", data_fields, NFIELDS(data_fields), d);
}

/* The native object when there is one (see the top of the file). */
static int decode_native(const char *file, struct json_object *root, struct sample *s)
{
	struct json_object *obj;
	int ret;

	if (!json_object_object_get_ex(root, "native", &obj))
		return 0;
	ret = check_type(file, obj, "", "native", json_type_object);
	if (!ret)
		ret = get_u64(file, obj, "native", "clients", &s->native.clients);
	if (!ret)
		ret = get_u64s(file, obj, "native", native_counters, NFIELDS(native_counters),
			       &s->native);
	s->has_native = !ret;
	return ret;
}

/* The transport object when there is one. */
static int decode_transport(const char *file, struct json_object *root, struct sample *s)
{
	struct json_object *obj, *name;
	int ret;

	if (!json_object_object_get_ex(root, "transport", &obj))
		return 0;
	ret = check_type(file, obj, "", "transport", json_type_object);
	if (!ret)
		ret = member(file, obj, "transport", "name", json_type_string, &name);
	if (!ret)
		ret = get_u64(file, obj, "transport", "queues", &s->uring_queues);
	if (!ret)
		ret = get_u64(file, obj, "transport", "queue_depth", &s->uring_depth);
	if (!ret)
		ret = get_u64(file, obj, "transport", "uring_requests", &s->uring_requests);
	if (!ret)
		s->transport = json_object_get_string(name);
	return ret;
}

/* S's fields from S->root (the whole file, parsed). 0 or -errno, with a message. */
static int decode_sample(const char *file, struct sample *s)
{
	struct json_object *root = s->root;
	int ret;

	if (!json_object_is_type(root, json_type_object)) {
		errmsg("%s: not a JSON object but %s", file,
		       json_type_to_name(json_object_get_type(root)));
		return -EBADMSG;
	}
	ret = decode_version(file, root);
	if (!ret)
		ret = get_string(file, root, "", "mountpoint", &s->mountpoint);
	if (!ret)
		ret = get_string(file, root, "", "uuid", &s->uuid);
	if (!ret)
		ret = get_string(file, root, "", "label", &s->label);
	if (!ret)
		ret = get_u64(file, root, "", "uptime_ns", &s->uptime_ns);
	if (!ret)
		ret = decode_devices(file, root, s);
	if (!ret)
		ret = decode_pool(file, root, &s->pool);
	if (!ret)
		ret = decode_requests(file, root, s);
	if (!ret)
		ret = decode_data(file, root, &s->data);
	if (!ret)
		ret = decode_native(file, root, s);
	if (!ret)
		ret = decode_transport(file, root, s);
	return ret;
}

/* Free what S holds and leave it empty (a no-op on an empty sample). */
static void sample_destroy(struct sample *s)
{
	free(s->dev);
	free(s->req);
	if (s->root)
		json_object_put(s->root);
	memset(s, 0, sizeof(*s));
}

/* ---- reading the file ---- */

/*
 * Open FILE, the stats file under MNT. 0 or -errno with a message that says
 * whether MNT is missing, not a mount point of nvmefs, or the file unreadable;
 * -EINTR without one when a signal asked us to stop.
 */
static int open_stats(const char *mnt, const char *file, int *fdp)
{
	struct stat st;
	int err;

	do {
		*fdp = open(file, O_RDONLY | O_CLOEXEC);
	} while (*fdp < 0 && errno == EINTR && !stop);
	if (*fdp >= 0)
		return 0;
	err = -errno;
	if (err == -EINTR) /* a signal asked us to stop: no error */
		return err;
	if (err != -ENOENT && err != -ENOTDIR)
		errmsg("cannot open %s: %s", file, strerror(-err));
	else if (stat(mnt, &st))
		errmsg("%s: %s", mnt, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		errmsg("%s: not a directory", mnt);
	else
		errmsg("%s: not an nvmefs mount point (no %s in it)", mnt, STATS_FILE);
	return err;
}

/*
 * All of FD (FILE) into a malloc'd, NUL-terminated *BUFP of *LENP bytes,
 * read until EOF. 0 or -errno with a message; -EINTR without one when a
 * signal asked us to stop.
 */
static int read_all(int fd, const char *file, char **bufp, size_t *lenp)
{
	size_t len = 0, cap = 4096;
	char *buf, *grown;
	ssize_t n;
	int ret;

	buf = malloc(cap + 1);
	if (!buf)
		goto err_nomem;
	for (;;) {
		if (len == cap) {
			ret = -EFBIG;
			if (cap >= MAX_STATS_SIZE) {
				errmsg("%s: larger than %u MiB", file, MAX_STATS_SIZE >> 20);
				goto err_free;
			}
			cap *= 2;
			grown = realloc(buf, cap + 1);
			if (!grown)
				goto err_nomem;
			buf = grown;
		}
		n = read(fd, buf + len, cap - len);
		if (n == 0)
			break;
		if (n > 0) {
			len += (size_t)n;
			continue;
		}
		if (errno == EINTR && !stop)
			continue;
		ret = -errno;
		if (ret != -EINTR)
			errmsg("cannot read %s: %s", file, strerror(-ret));
		goto err_free;
	}
	buf[len] = '\0';
	*bufp = buf;
	*lenp = len;
	return 0;

err_nomem:
	errmsg("out of memory");
	ret = -ENOMEM;
err_free:
	free(buf);
	return ret;
}

/* BUF (LEN bytes, NUL-terminated) parsed into *ROOTP; -EBADMSG naming FILE. */
static int parse_json(const char *file, const char *buf, size_t len, struct json_object **rootp)
{
	struct json_tokener *tok = json_tokener_new();
	enum json_tokener_error jerr;
	size_t end;

	if (!tok) {
		errmsg("out of memory");
		return -ENOMEM;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	*rootp = json_tokener_parse_ex(tok, buf, (int)len); /* len <= MAX_STATS_SIZE */
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (*rootp) {
		/* Strict mode takes trailing white space, refuses anything else. */
		end += strspn(buf + end, " \t\r\n");
		if (end == len)
			return 0;
		json_object_put(*rootp);
		*rootp = NULL;
		errmsg("%s: malformed JSON: text after the object at byte %zu", file, end);
	} else if (!len) {
		errmsg("%s: malformed JSON: the file is empty", file);
	} else if (jerr == json_tokener_continue || jerr == json_tokener_success) {
		errmsg("%s: malformed JSON: the file ends before the object does", file);
	} else {
		errmsg("%s: malformed JSON at byte %zu: %s", file, end,
		       json_tokener_error_desc(jerr));
	}
	return -EBADMSG;
}

/*
 * Read, parse and decode the stats file FILE under MNT into S (empty on
 * entry). 0 or -errno with a message; on error S is left empty.
 */
static int sample_read(struct sample *s, const char *mnt, const char *file)
{
	size_t len = 0;
	char *buf = NULL;
	int fd, ret;

	ret = open_stats(mnt, file, &fd);
	if (ret)
		return ret;
	ret = read_all(fd, file, &buf, &len);
	close(fd);
	if (ret)
		return ret;
	s->taken_ns = now_ns();
	ret = parse_json(file, buf, len, &s->root);
	free(buf);
	if (!ret)
		ret = decode_sample(file, s);
	if (ret)
		sample_destroy(s);
	return ret;
}

/* ---- arithmetic on samples ---- */

/* Every device of S added up into *TOT (path "-"). */
static void sum_devices(const struct sample *s, struct dev_stats *tot)
{
	memset(tot, 0, sizeof(*tot));
	tot->path = "-";
	for (size_t i = 0; i < s->ndev; i++) {
		for (size_t f = 0; f < NFIELDS(dev_counters); f++)
			*field(tot, &dev_counters[f]) += field_get(&s->dev[i], &dev_counters[f]);
		tot->in_flight += s->dev[i].in_flight;
		tot->queued += s->dev[i].queued;
	}
}

/* *D = what happened between A and B: counters differenced, gauges B's. */
static void dev_delta(const struct dev_stats *a, const struct dev_stats *b, struct dev_stats *d)
{
	*d = *b;
	for (size_t f = 0; f < NFIELDS(dev_counters); f++)
		*field(d, &dev_counters[f]) =
			field_get(b, &dev_counters[f]) - field_get(a, &dev_counters[f]);
}

/*
 * Why PREV and CUR cannot be differenced (another volume, a remount, a new
 * device list, a counter that went back), or NULL when they can.
 */
static const char *reset_reason(const struct sample *prev, const struct sample *cur)
{
	if (strcmp(prev->uuid, cur->uuid))
		return "another volume";
	if (cur->uptime_ns < prev->uptime_ns)
		return "remounted";
	if (cur->ndev != prev->ndev)
		return "device list changed";
	for (size_t i = 0; i < cur->ndev; i++) {
		const struct dev_stats *a = &prev->dev[i], *b = &cur->dev[i];

		if (a->index != b->index || strcmp(a->path, b->path))
			return "device list changed";
		for (size_t f = 0; f < NFIELDS(dev_counters); f++)
			if (field_get(b, &dev_counters[f]) < field_get(a, &dev_counters[f]))
				return "counters went back";
	}
	return NULL;
}

/*
 * Seconds between PREV and CUR on the daemon's clock (taken with the
 * counters), or on ours when the daemon's did not move.
 */
static double interval_s(const struct sample *prev, const struct sample *cur)
{
	uint64_t ns = cur->uptime_ns - prev->uptime_ns; /* reset_reason: no wrap */

	if (!ns)
		ns = cur->taken_ns - prev->taken_ns;
	return ns ? (double)ns / 1e9 : 1e-9;
}

static uint64_t request_count(const struct sample *s, const char *name)
{
	for (size_t i = 0; i < s->nreq; i++)
		if (!strcmp(s->req[i].name, name))
			return s->req[i].count;
	return 0; /* not seen yet */
}

/* The requests of each type between PREV and CUR, sorted, into *OUTP (malloc'd). */
static int request_deltas(const struct sample *prev, const struct sample *cur,
			  struct req_count **outp)
{
	struct req_count *r = calloc(cur->nreq + 1, sizeof(*r));

	if (!r) {
		errmsg("out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < cur->nreq; i++) {
		uint64_t was = request_count(prev, cur->req[i].name);

		r[i].name = cur->req[i].name;
		/* A counter that went back restarted from 0. */
		r[i].count = cur->req[i].count - (was <= cur->req[i].count ? was : 0);
	}
	qsort(r, cur->nreq, sizeof(*r), req_cmp);
	*outp = r;
	return 0;
}

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

	for (size_t f = 0; f < NFIELDS(native_counters); f++) {
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

/* The totals since mount: header, device table, pool, requests, data path, native door. */
static void print_totals(const struct sample *s)
{
	const struct data_stats *d = &s->data;
	int w = path_width(s);
	struct dev_stats tot;
	char name[24];

	format_duration(s->uptime_ns, name, sizeof(name));
	printf("nvmefs %s  label %s  uuid %s  up %s\n", s->mountpoint,
	       *s->label ? s->label : "(none)", s->uuid, name);
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
	if (s->has_native)
		print_native_totals(&s->native);
	if (s->transport && s->uring_queues)
		printf("transport: %s, %" PRIu64 " queues of %" PRIu64 " entries, %" PRIu64
		       " requests through them (FORGET, INTERRUPT and notices on /dev/fuse)\n",
		       s->transport, s->uring_queues, s->uring_depth, s->uring_requests);
	else if (s->transport)
		printf("transport: %s\n", s->transport);
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
	printf("interval %.3f s  up %s\n", secs, name);
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

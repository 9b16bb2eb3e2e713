// SPDX-License-Identifier: MIT
/*
 * nvmefs-stat's sample (stat.c has the reports and the program; stat_i.h
 * what both share): one read of MOUNTPOINT/.nvmefs/stats, parsed with
 * json-c and decoded into struct sample, every failure named by file and
 * key; and the arithmetic on two samples (differences, the interval, why
 * two samples cannot be differenced).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
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

#define MAX_STATS_SIZE (16u << 20) /* far above a real file: stops a runaway read */

/* Braced initializers in macros: clang-format would split them over lines. */
/* clang-format off */
#define DEV_FIELD(f)    {#f, offsetof(struct dev_stats, f)}
#define POOL_FIELD(f)   {#f, offsetof(struct pool_stats, f)}
#define DATA_FIELD(f)   {#f, offsetof(struct data_stats, f)}
#define NATIVE_FIELD(f) {#f, offsetof(struct native_stats, f)}
/* clang-format on */

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
const struct u64_field native_counters[] = {
	NATIVE_FIELD(connects),	       NATIVE_FIELD(reads),	   NATIVE_FIELD(writes),
	NATIVE_FIELD(fsyncs),	       NATIVE_FIELD(read_bytes),   NATIVE_FIELD(write_bytes),
	NATIVE_FIELD(copied_requests), NATIVE_FIELD(copied_bytes), NATIVE_FIELD(refused),
	NATIVE_FIELD(invalidations),
};
const size_t native_ncounters = NFIELDS(native_counters);

void errmsg(const char *fmt, ...)
{
	va_list ap;

	fputs("nvmefs-stat: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

uint64_t now_ns(void)
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

/* Optional in data: absent from daemons before write-behind's hold. */
static const struct u64_field held_fields[] = {
	DATA_FIELD(behind_writes),
	DATA_FIELD(held_writes),
	DATA_FIELD(held_sends),
};

static int decode_data(const char *file, struct json_object *root, struct data_stats *d)
{
	struct json_object *obj;
	int ret = member(file, root, "", "data", json_type_object, &obj);

	if (!ret)
		ret = get_u64s(file, obj, "data", data_fields, NFIELDS(data_fields), d);
	d->has_held = !ret && json_object_object_get_ex(obj, "held_writes", NULL);
	if (d->has_held)
		ret = get_u64s(file, obj, "data", held_fields, NFIELDS(held_fields), d);
	return ret;
}

/* The native object when there is one (see the top of stat.c). */
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

/* shut_down when there is one (a daemon from before FS_IOC_SHUTDOWN has
 * none: not shut down). */
static int decode_shut_down(const char *file, struct json_object *root, struct sample *s)
{
	struct json_object *obj;
	int ret;

	if (!json_object_object_get_ex(root, "shut_down", &obj))
		return 0;
	ret = check_type(file, obj, "", "shut_down", json_type_boolean);
	if (!ret)
		s->shut_down = json_object_get_boolean(obj);
	return ret;
}

/* The transport object when there is one. */
static int decode_transport(const char *file, struct json_object *root, struct sample *s)
{
	struct json_object *obj, *name, *held;
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
	/* Since placement (uring.c): absent from older daemons' stats. */
	s->has_spread = json_object_object_get_ex(obj, "spread_queues", NULL);
	if (!ret && s->has_spread)
		ret = get_u64(file, obj, "transport", "spread_queues", &s->uring_spread);
	/* Since polling from another CPU (uring.c): absent before. */
	s->has_away = json_object_object_get_ex(obj, "away_queues", NULL);
	if (!ret && s->has_away)
		ret = get_u64(file, obj, "transport", "away_queues", &s->uring_away);
	if (!ret && s->has_away)
		ret = get_u64(file, obj, "transport", "polled_waits", &s->uring_polled);
	/* Since -o cpu_latency: held is true, false or null (asked nothing). */
	s->has_cpulat = json_object_object_get_ex(obj, "cpu_latency_held", &held);
	if (!ret && s->has_cpulat) {
		if (!held)
			s->cpulat_held = -1;
		else if (json_object_is_type(held, json_type_boolean))
			s->cpulat_held = json_object_get_boolean(held);
		else
			ret = check_type(file, held, "transport", "cpu_latency_held",
					 json_type_boolean);
	}
	if (!ret && s->has_cpulat)
		ret = get_u64(file, obj, "transport", "cpu_latency_holds", &s->cpulat_holds);
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
		ret = decode_shut_down(file, root, s);
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
void sample_destroy(struct sample *s)
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
int sample_read(struct sample *s, const char *mnt, const char *file)
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
void sum_devices(const struct sample *s, struct dev_stats *tot)
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
void dev_delta(const struct dev_stats *a, const struct dev_stats *b, struct dev_stats *d)
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
const char *reset_reason(const struct sample *prev, const struct sample *cur)
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
double interval_s(const struct sample *prev, const struct sample *cur)
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
int request_deltas(const struct sample *prev, const struct sample *cur, struct req_count **outp)
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

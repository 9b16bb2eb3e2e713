// SPDX-License-Identifier: MIT
/*
 * nvmefs-bench --client: throughput of the native client on one file of a
 * mounted volume (bench_client_i.h), compiled into nvmefs-bench.
 *
 * Each thread is what a program using libnvmefs well would be: its own
 * client (clients are not thread-safe), its own descriptor opened through
 * the mount, its own shared buffers (qd blocks from nvmefs_buf_alloc, so
 * every request is zero copy when the block size is a multiple of 4096)
 * and its own contiguous slice of the file, walked in order with qd
 * requests in flight: every completion reaped is replaced in one submit.
 * A write pass ends with one nvmefs_fsync (the journal commit that makes
 * sizes and allocations durable): it is timed, as dd's conv=fsync and
 * fio's end_fsync=1 are, so the figure is of data a crash keeps.
 *
 * The daemon's copy counters are read from MOUNT/.nvmefs/stats before and
 * after the measured passes: aligned native I/O must copy nothing.
 */
#include "bench_client_i.h"
#include "libnvmefs.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvmefs/util.h"

struct worker {
	struct nvmefs_bench_client *b;
	struct nvmefs_client *c;
	int fd;
	uint8_t *buf;		/* qd blocks, shared with the daemon */
	uint64_t first, count;	/* its slice of the file, in blocks */
	struct nvmefs_io *ios;	/* qd: a batch to submit */
	struct nvmefs_cqe *cqe; /* qd: completions reaped */
	unsigned *idle;		/* qd: blocks of buf not in flight */
	pthread_t thread;
	int err;
};

/* The counters of MOUNT/.nvmefs/stats this benchmark reports. */
struct daemon_counts {
	uint64_t copied, invals;
};

struct nvmefs_bench_client {
	struct nvmefs_bench_client_opts o;
	struct worker *w;     /* o.threads */
	char stats[PATH_MAX]; /* "": not found */
	struct daemon_counts start;
	uint64_t bounce_start;
	double fsync_seconds;
};

/* ---- the daemon's counters ---- */

/* MOUNT/.nvmefs/stats for the file path: the nearest directory above it
 * that shows one; "" when none does. */
static void find_stats(const char *path, char *out, size_t len)
{
	char *copy = strdup(path), *dir = copy ? realpath(dirname(copy), NULL) : NULL;

	for (char *slash; dir; *slash = '\0') {
		snprintf(out, len, "%s/.nvmefs/stats", dir);
		if (!access(out, R_OK))
			goto out;
		slash = strrchr(dir, '/'); /* dir is absolute */
		if (slash == dir && !dir[1])
			break;
		if (slash == dir)
			slash++;
	}
	out[0] = '\0';
out:
	free(dir);
	free(copy);
}

/* The unsigned field key of the object sec of the stats root. */
static uint64_t field(struct json_object *root, const char *sec, const char *key)
{
	struct json_object *s, *v;

	if (!json_object_object_get_ex(root, sec, &s) || !json_object_object_get_ex(s, key, &v))
		return 0;
	return (uint64_t)json_object_get_int64(v);
}

static int read_stats(const struct nvmefs_bench_client *b, struct daemon_counts *d)
{
	struct json_object *root = b->stats[0] ? json_object_from_file(b->stats) : NULL;

	if (!root)
		return -ENOENT;
	d->copied = field(root, "data", "copied_bytes") + field(root, "native", "copied_bytes");
	d->invals = field(root, "native", "invalidations");
	json_object_put(root);
	return 0;
}

static uint64_t bounce_bytes(const struct nvmefs_bench_client *b)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < b->o.threads; i++) {
		struct nvmefs_client_stats st;

		nvmefs_client_stats(b->w[i].c, &st);
		sum += st.bounce_bytes;
	}
	return sum;
}

void nvmefs_bench_client_count_start(struct nvmefs_bench_client *b)
{
	if (read_stats(b, &b->start))
		b->stats[0] = '\0';
	b->bounce_start = bounce_bytes(b);
	b->fsync_seconds = 0;
}

void nvmefs_bench_client_counts(struct nvmefs_bench_client *b,
				struct nvmefs_bench_client_counts *out)
{
	struct daemon_counts now;

	*out = (struct nvmefs_bench_client_counts){
		.bounce_bytes = bounce_bytes(b) - b->bounce_start,
		.fsync_seconds = b->fsync_seconds,
	};
	if (read_stats(b, &now))
		return;
	out->daemon_known = true;
	out->daemon_copied = now.copied - b->start.copied;
	out->daemon_invals = now.invals - b->start.invals;
}

/* ---- one thread's slice ---- */

/* Submit the n requests of w->ios: all are taken (qd is within the
 * client's limit), or the pass fails. */
static int submit(struct worker *w, unsigned n)
{
	int ret = nvmefs_submit(w->c, w->ios, n);

	if (ret == (int)n)
		return 0;
	ret = ret < 0 ? ret : -EAGAIN;
	nvmefs_err("%s: submit: %s (%s)", w->b->o.path, strerror(-ret), nvmefs_client_error(w->c));
	return ret;
}

/* Reap what completed (at least one), giving its blocks back to idle. */
static int reap(struct worker *w, unsigned *nidle, uint64_t *done)
{
	const struct nvmefs_bench_client_opts *o = &w->b->o;
	int n = nvmefs_wait(w->c, w->cqe, o->qd, 1, -1);

	if (n < 0) {
		nvmefs_err("%s: wait: %s (%s)", o->path, strerror(-n), nvmefs_client_error(w->c));
		return n;
	}
	for (int i = 0; i < n; i++) {
		if (w->cqe[i].res != (int64_t)o->block_size) {
			nvmefs_err("%s: a %s of %llu bytes returned %lld%s%s", o->path,
				   o->write ? "write" : "read", (unsigned long long)o->block_size,
				   (long long)w->cqe[i].res, w->cqe[i].res < 0 ? ": " : "",
				   w->cqe[i].res < 0 ? strerror((int)-w->cqe[i].res) : "");
			return w->cqe[i].res < 0 ? (int)w->cqe[i].res : -EIO;
		}
		w->idle[(*nidle)++] = (unsigned)w->cqe[i].user_data;
	}
	*done += (uint64_t)n;
	return 0;
}

/* The slice, in order, with qd requests in flight. The requests still in
 * flight after an error are waited for by nvmefs_detach. */
static int worker_pass(struct worker *w)
{
	const struct nvmefs_bench_client_opts *o = &w->b->o;
	uint64_t next = 0, done = 0;
	unsigned nidle = o->qd;
	int ret = 0;

	for (unsigned i = 0; i < o->qd; i++)
		w->idle[i] = i;
	while (!ret && done < w->count) {
		unsigned n = 0;

		for (; nidle && next < w->count; next++, n++) {
			unsigned s = w->idle[--nidle];

			w->ios[n] = (struct nvmefs_io){
				.fd = w->fd,
				.op = o->write ? NVMEFS_OP_WRITE : NVMEFS_OP_READ,
				.buf = w->buf + (size_t)s * o->block_size,
				.len = o->block_size,
				.off = (w->first + next) * o->block_size,
				.user_data = s,
			};
		}
		ret = n ? submit(w, n) : 0;
		if (!ret)
			ret = reap(w, &nidle, &done);
	}
	return ret;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	w->err = worker_pass(w);
	return NULL;
}

int nvmefs_bench_client_pass(struct nvmefs_bench_client *b, double *seconds)
{
	struct worker *w0 = &b->w[0];
	uint64_t t0 = nvmefs_now_ns(), t1;
	unsigned started = 0;
	int ret = 0;

	for (; started < b->o.threads; started++) {
		ret = -pthread_create(&b->w[started].thread, NULL, worker_main, &b->w[started]);
		if (ret) {
			nvmefs_err("cannot start a thread: %s", strerror(-ret));
			break;
		}
	}
	for (unsigned i = 0; i < started; i++) {
		pthread_join(b->w[i].thread, NULL);
		ret = ret ? ret : b->w[i].err;
	}
	t1 = nvmefs_now_ns();
	/* One commit covers what every client wrote (the journal is the
	 * volume's); the threads are done, so client 0 may be used here. */
	if (!ret && b->o.write) {
		ret = nvmefs_fsync(w0->c, w0->fd);
		if (ret)
			nvmefs_err("%s: fsync: %s", b->o.path, nvmefs_client_error(w0->c));
		b->fsync_seconds += (double)(nvmefs_now_ns() - t1) / 1e9;
	}
	*seconds = (double)(nvmefs_now_ns() - t0) / 1e9;
	return ret;
}

/* ---- setup ---- */

/* Thread i's client, descriptor, buffers and slice of nblocks. */
static int worker_init(struct nvmefs_bench_client *b, unsigned i, uint64_t nblocks)
{
	const struct nvmefs_bench_client_opts *o = &b->o;
	struct worker *w = &b->w[i];
	int ret;

	w->b = b;
	w->first = nblocks * i / o->threads;
	w->count = nblocks * (i + 1) / o->threads - w->first;
	w->ios = calloc(o->qd, sizeof(*w->ios));
	w->cqe = calloc(o->qd, sizeof(*w->cqe));
	w->idle = calloc(o->qd, sizeof(*w->idle));
	if (!w->ios || !w->cqe || !w->idle) {
		nvmefs_err("out of memory");
		return -ENOMEM;
	}
	ret = nvmefs_attach(o->path, &w->c);
	if (ret) {
		nvmefs_err("%s", nvmefs_client_error(NULL));
		return ret;
	}
	if (o->qd > nvmefs_client_max_inflight(w->c)) {
		nvmefs_err("--queue-depth %u: a client may have %u requests in flight", o->qd,
			   nvmefs_client_max_inflight(w->c));
		return -EINVAL;
	}
	w->fd = open(o->path, (o->write ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
	if (w->fd < 0) {
		ret = -errno;
		nvmefs_err("%s: %s", o->path, strerror(-ret));
		return ret;
	}
	ret = nvmefs_reg_fd(w->c, w->fd);
	if (!ret)
		ret = nvmefs_buf_alloc(w->c, (size_t)o->qd * o->block_size, -1, (void **)&w->buf);
	if (ret) {
		nvmefs_err("%s: %s", o->path, nvmefs_client_error(w->c));
		return ret;
	}
	/* Plain write passes send whatever the buffers hold: not zeros. */
	for (unsigned s = 0; s < o->qd; s++)
		memset(w->buf + (size_t)s * o->block_size, 0xa5 ^ (int)s, o->block_size);
	return 0;
}

/* A write starts from an empty file (the first pass lays it out, as dd
 * and fio through the mount do); a read needs the bytes there. */
static int prepare_file(const struct nvmefs_bench_client_opts *o, uint64_t bytes)
{
	struct stat st;
	int fd, ret;

	if (o->write) {
		fd = open(o->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ret = fd < 0 || close(fd) ? -errno : 0;
		if (ret)
			nvmefs_err("%s: cannot create: %s", o->path, strerror(-ret));
		return ret;
	}
	if (stat(o->path, &st)) {
		ret = -errno;
		nvmefs_err("%s: %s", o->path, strerror(-ret));
		return ret;
	}
	if ((uint64_t)st.st_size < bytes) {
		nvmefs_err("%s holds %llu bytes, fewer than --size reads (%llu): write it first "
			   "(--write)",
			   o->path, (unsigned long long)st.st_size, (unsigned long long)bytes);
		return -EINVAL;
	}
	return 0;
}

int nvmefs_bench_client_create(const struct nvmefs_bench_client_opts *o,
			       struct nvmefs_bench_client **out)
{
	struct nvmefs_bench_client *b = calloc(1, sizeof(*b));
	uint64_t nblocks = o->size / o->block_size;
	int ret;

	if (!b)
		return -ENOMEM;
	b->o = *o;
	b->w = calloc(o->threads, sizeof(*b->w));
	if (!b->w) {
		free(b);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < o->threads; i++)
		b->w[i].fd = -1;
	if (nblocks < o->threads) {
		nvmefs_err("--size %llu: fewer blocks than --threads %u",
			   (unsigned long long)o->size, o->threads);
		ret = -EINVAL;
		goto err;
	}
	ret = prepare_file(o, nblocks * o->block_size);
	for (unsigned i = 0; !ret && i < o->threads; i++)
		ret = worker_init(b, i, nblocks);
	if (ret)
		goto err;
	find_stats(o->path, b->stats, sizeof(b->stats));
	*out = b;
	return 0;
err:
	nvmefs_bench_client_destroy(b);
	return ret;
}

void nvmefs_bench_client_destroy(struct nvmefs_bench_client *b)
{
	if (!b)
		return;
	for (unsigned i = 0; i < b->o.threads; i++) {
		struct worker *w = &b->w[i];

		nvmefs_detach(w->c); /* waits for its requests, unregisters fd */
		if (w->fd >= 0)
			close(w->fd);
		free(w->ios);
		free(w->cqe);
		free(w->idle);
	}
	free(b->w);
	free(b);
}

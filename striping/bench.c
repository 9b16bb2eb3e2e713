// SPDX-License-Identifier: MIT
/*
 * nvmefs-bench: throughput of the striped engine on raw devices, without the
 * filesystem (DeepNVMe's ds_io for nvmefs).
 *
 * The devices are treated as one striped region of --size bytes: block k of
 * the region covers bytes [k * bs, (k + 1) * bs) of a "file" with the layout
 * (chunk, every device, identity order), placed at --offset on each device.
 * queue-depth x devices blocks are kept in flight: every completion callback
 * issues the next block from the reaper thread, so no thread sits between
 * a completion and the next submit.
 *
 * When every block lies on one device (block size <= chunk, the default) the
 * blocks are dealt into one lane per device and each in-flight slot serves one
 * lane, so every device keeps its own queue depth full, as fio's job per
 * device does. With one global window instead, a device that falls behind
 * gathers the window's slots and starves the others.
 *
 * With --client FILE the passes go through libnvmefs to a file of a
 * mounted volume instead (client/bench_client.c, which knows files): the
 * same options, loops and figures, so that the two compare line by line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_client_i.h"
#include "nvmefs/bufpool.h"
#include "nvmefs/devset.h"
#include "nvmefs/engine.h"
#include "nvmefs/layout.h"
#include "nvmefs/util.h"

struct bench_opts {
	int op; /* NVMEFS_IO_READ / WRITE, -1 unset */
	uint64_t block_size;
	uint64_t chunk;
	uint64_t size;
	uint64_t offset;
	unsigned qd;
	unsigned loops;
	unsigned warmup;
	bool random;
	bool validate;
	bool json;
	uint64_t seed;
	const char *client; /* --client FILE, else NULL: the devices */
	unsigned threads;   /* --threads, with --client */
};

enum pass_mode {
	PASS_PLAIN, /* move bytes only */
	PASS_FILL,  /* write: fill each block with its pattern first */
	PASS_CHECK, /* read: compare each block with its pattern */
};

struct bench;

struct slot {
	struct nvmefs_io_req req;
	struct nvmefs_io_seg *segs;
	struct nvmefs_segment *map;
	void *buf;
	uint64_t block;
	unsigned lane;
	struct bench *b;
};

struct bench {
	struct bench_opts o;
	struct nvmefs_devset *set;
	struct nvmefs_engine *eng;
	struct nvmefs_bufpool *pool;
	struct nvmefs_layout layout;
	uint64_t nblocks;
	uint64_t *order;			 /* block visiting order, lane after lane */
	unsigned nlanes;			 /* one per device, or 1 when blocks span devices */
	uint64_t lane_start[NVMEFS_MAX_DEVICES]; /* first index in order */
	uint64_t lane_len[NVMEFS_MAX_DEVICES];
	unsigned nslots;
	unsigned max_segs;
	struct slot *slots;
	enum pass_mode mode;
	int op;

	atomic_uint_fast64_t lane_next[NVMEFS_MAX_DEVICES]; /* next index in lane */
	atomic_int error;				    /* first I/O error of the pass */
	atomic_uint_fast64_t bad_off; /* first mismatching byte + 1, 0: none */
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned active; /* slots with a request out; protected by lock */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: nvmefs-bench --write|--read [options] DEV...\n"
		"       nvmefs-bench --client FILE --write|--read [options]\n"
		"Measure the striped libaio engine on raw devices (DATA ON THEM IS OVERWRITTEN\n"
		"by --write and --validate), or with --client the native client (libnvmefs) on\n"
		"FILE, a file inside a mounted nvmefs volume (--write creates or truncates it).\n\n"
		"  -w, --write             sequential or random writes\n"
		"  -r, --read              sequential or random reads\n"
		"  -b, --block-size SIZE   bytes per request (default 1M)\n"
		"  -c, --chunk SIZE        stripe chunk (default: the block size)\n"
		"  -q, --queue-depth N     blocks in flight per device, with --client per thread\n"
		"                          (default 32)\n"
		"  -s, --size SIZE         bytes per loop over all devices (default 1G)\n"
		"  -o, --offset SIZE       start of the region on each device (default 0)\n"
		"  -l, --loops N           measured loops (default 3)\n"
		"      --warmup N          unmeasured loops first (default 1; 0 with --client, "
		"whose\n"
		"                          measured write is the one that lays the file out)\n"
		"      --random            visit the blocks in a random order\n"
		"      --validate          write a pattern, read it back and compare first\n"
		"      --seed N            seed for --random and the pattern (default 1)\n"
		"      --json              print one JSON object as the last line of stdout\n"
		"      --client FILE       through libnvmefs on FILE instead of devices; each\n"
		"                          thread has its own client, shared buffers and slice of\n"
		"                          FILE; a write pass ends with nvmefs_fsync (timed)\n"
		"  -t, --threads N         with --client: clients, one per thread (default 1)\n"
		"  -h, --help              this text\n\n"
		"SIZE takes K, M, G, T suffixes (powers of 1024). GB/s figures are 1e9 bytes/s.\n");
}

/* The pattern word for byte offset off (8-aligned) of the region. */
static uint64_t pattern(uint64_t seed, uint64_t off)
{
	uint64_t z = off + seed * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_block(const struct bench *b, uint64_t *buf, uint64_t block)
{
	uint64_t base = block * b->o.block_size;

	for (uint64_t i = 0; i < b->o.block_size / 8; i++)
		buf[i] = pattern(b->o.seed, base + i * 8);
}

/* Returns the first bad region offset + 1, or 0 if the block matches. */
static uint64_t check_block(const struct bench *b, const uint64_t *buf, uint64_t block)
{
	uint64_t base = block * b->o.block_size;

	for (uint64_t i = 0; i < b->o.block_size / 8; i++)
		if (buf[i] != pattern(b->o.seed, base + i * 8))
			return base + i * 8 + 1;
	return 0;
}

static void slot_retire(struct bench *b)
{
	pthread_mutex_lock(&b->lock);
	if (--b->active == 0)
		pthread_cond_signal(&b->idle);
	pthread_mutex_unlock(&b->lock);
}

static void record_error(struct bench *b, int err)
{
	int zero = 0;

	atomic_compare_exchange_strong(&b->error, &zero, err);
}

static void slot_done(struct nvmefs_io_req *req, int res);

/* Give slot s its next block, or retire it when there is none left. */
static void slot_issue(struct slot *s)
{
	struct bench *b = s->b;
	uint64_t idx = atomic_fetch_add(&b->lane_next[s->lane], 1);
	uint64_t n;
	int err;

	if (idx >= b->lane_len[s->lane] || atomic_load(&b->error)) {
		slot_retire(b);
		return;
	}
	s->block = b->order[b->lane_start[s->lane] + idx];
	if (b->mode == PASS_FILL)
		fill_block(b, s->buf, s->block);
	n = nvmefs_layout_map(&b->layout, s->block * b->o.block_size, b->o.block_size, s->map,
			      b->max_segs);
	for (uint64_t i = 0; i < n; i++) {
		s->segs[i].dev = s->map[i].dev;
		s->segs[i].off = b->o.offset + s->map[i].comp_off;
		s->segs[i].len = s->map[i].len;
		s->segs[i].buf = (char *)s->buf + s->map[i].buf_off;
	}
	s->req.op = b->op;
	s->req.nr_segs = (unsigned)n;
	s->req.segs = s->segs;
	s->req.done = slot_done;
	s->req.priv = s;
	err = nvmefs_engine_submit(b->eng, &s->req);
	if (err) {
		record_error(b, err);
		slot_retire(b);
	}
}

static void slot_done(struct nvmefs_io_req *req, int res)
{
	struct slot *s = req->priv;
	struct bench *b = s->b;

	if (res) {
		record_error(b, res);
	} else if (b->mode == PASS_CHECK) {
		uint64_t bad = check_block(b, s->buf, s->block);
		uint_fast64_t none = 0;

		if (bad) {
			atomic_compare_exchange_strong(&b->bad_off, &none, bad);
			record_error(b, -EILSEQ);
		}
	}
	slot_issue(s);
}

/* One pass over every block; returns 0 or the first error. */
static int run_pass(struct bench *b, int op, enum pass_mode mode, double *seconds)
{
	unsigned n = b->nslots;
	uint64_t t0;

	b->op = op;
	b->mode = mode;
	for (unsigned l = 0; l < b->nlanes; l++)
		atomic_store(&b->lane_next[l], 0);
	atomic_store(&b->error, 0);
	b->active = n;
	t0 = nvmefs_now_ns();
	for (unsigned i = 0; i < n; i++)
		slot_issue(&b->slots[i]);
	pthread_mutex_lock(&b->lock);
	while (b->active)
		pthread_cond_wait(&b->idle, &b->lock);
	pthread_mutex_unlock(&b->lock);
	*seconds = (double)(nvmefs_now_ns() - t0) / 1e9;
	return atomic_load(&b->error);
}

static int parse_u(const char *name, const char *s, unsigned *out)
{
	uint64_t v;

	if (nvmefs_parse_size(s, &v) || v > 1u << 30) {
		nvmefs_err("%s: not a valid number: '%s'", name, s);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

static int parse_sz(const char *name, const char *s, uint64_t *out)
{
	int err = nvmefs_parse_size(s, out);

	if (err)
		nvmefs_err("%s: not a valid size: '%s'", name, s);
	return err;
}

enum { OPT_WARMUP = 256, OPT_RANDOM, OPT_VALIDATE, OPT_SEED, OPT_JSON, OPT_CLIENT };

/* What the devices alone mean: refused with --client. */
static int check_client_opts(const struct bench_opts *o, int ndev)
{
	const char *bad = ndev		? "device arguments"
			  : o->chunk	? "--chunk"
			  : o->offset	? "--offset"
			  : o->random	? "--random"
			  : o->validate ? "--validate"
					: NULL;

	if (bad) {
		nvmefs_err("%s: with devices only, not with --client %s", bad, o->client);
		return -EINVAL;
	}
	return 0;
}

/* The checks of the options together, once all are parsed. */
static int check_opts(struct bench_opts *o, int ndev)
{
	if (o->op == -1) {
		nvmefs_err("give --read or --write");
		return -EINVAL;
	}
	if (o->client && check_client_opts(o, ndev))
		return -EINVAL;
	if (!o->client && o->threads) {
		nvmefs_err("--threads goes with --client (on devices, --queue-depth per device)");
		return -EINVAL;
	}
	if (!o->client && ndev == 0) {
		nvmefs_err("no devices given");
		return -EINVAL;
	}
	if (o->warmup == UINT_MAX)
		o->warmup = o->client ? 0 : 1;
	if (o->client && !o->threads)
		o->threads = 1;
	if (!o->chunk && !o->client)
		o->chunk = o->block_size < NVMEFS_CHUNK_MIN ? NVMEFS_CHUNK_MIN : o->block_size;
	if (o->block_size < 512 || o->block_size % 512 || o->qd == 0 || o->loops == 0) {
		nvmefs_err("--block-size must be a positive multiple of 512, --queue-depth and "
			   "--loops at least 1");
		return -EINVAL;
	}
	if (o->size < o->block_size) {
		nvmefs_err("--size %llu is smaller than one block", (unsigned long long)o->size);
		return -EINVAL;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
	static const struct option longopts[] = {
		{"write", no_argument, NULL, 'w'},
		{"read", no_argument, NULL, 'r'},
		{"block-size", required_argument, NULL, 'b'},
		{"chunk", required_argument, NULL, 'c'},
		{"queue-depth", required_argument, NULL, 'q'},
		{"size", required_argument, NULL, 's'},
		{"offset", required_argument, NULL, 'o'},
		{"loops", required_argument, NULL, 'l'},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"random", no_argument, NULL, OPT_RANDOM},
		{"validate", no_argument, NULL, OPT_VALIDATE},
		{"seed", required_argument, NULL, OPT_SEED},
		{"json", no_argument, NULL, OPT_JSON},
		{"client", required_argument, NULL, OPT_CLIENT},
		{"threads", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, err = 0;

	*o = (struct bench_opts){.op = -1,
				 .block_size = 1 << 20,
				 .size = 1ull << 30,
				 .qd = 32,
				 .loops = 3,
				 .warmup = UINT_MAX, /* 1, or 0 with --client */
				 .seed = 1};
	while (!err && (c = getopt_long(argc, argv, "wrb:c:q:s:o:l:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'w':
		case 'r':
			if (o->op != -1) {
				nvmefs_err("give one of --read and --write");
				return -EINVAL;
			}
			o->op = c == 'w' ? NVMEFS_IO_WRITE : NVMEFS_IO_READ;
			break;
		case 'b':
			err = parse_sz("--block-size", optarg, &o->block_size);
			break;
		case 'c':
			err = parse_sz("--chunk", optarg, &o->chunk);
			break;
		case 'q':
			err = parse_u("--queue-depth", optarg, &o->qd);
			break;
		case 's':
			err = parse_sz("--size", optarg, &o->size);
			break;
		case 'o':
			err = parse_sz("--offset", optarg, &o->offset);
			break;
		case 'l':
			err = parse_u("--loops", optarg, &o->loops);
			break;
		case OPT_WARMUP:
			err = parse_u("--warmup", optarg, &o->warmup);
			break;
		case OPT_RANDOM:
			o->random = true;
			break;
		case OPT_VALIDATE:
			o->validate = true;
			break;
		case OPT_SEED:
			err = parse_sz("--seed", optarg, &o->seed);
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_CLIENT:
			o->client = optarg;
			break;
		case 't':
			err = parse_u("--threads", optarg, &o->threads);
			if (!err && !o->threads) {
				nvmefs_err("--threads must be at least 1");
				err = -EINVAL;
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	return err ? err : check_opts(o, argc - optind);
}

/* xorshift64*: the shuffle needs speed and a seed, not quality. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* The lane of block k: its device when blocks never span devices. */
static unsigned block_lane(const struct bench *b, uint64_t k)
{
	return b->nlanes == 1 ? 0 : (unsigned)(k * b->o.block_size / b->o.chunk % b->nlanes);
}

/* Deal the blocks into lanes, in order or shuffled within each lane. */
static int make_order(struct bench *b)
{
	uint64_t s = b->o.seed | 1, fill[NVMEFS_MAX_DEVICES] = {0};

	b->nlanes = b->o.block_size <= b->o.chunk ? b->set->count : 1;
	b->order = malloc(b->nblocks * sizeof(*b->order));
	if (!b->order)
		return -ENOMEM;
	for (uint64_t k = 0; k < b->nblocks; k++)
		b->lane_len[block_lane(b, k)]++;
	for (unsigned l = 1; l < b->nlanes; l++)
		b->lane_start[l] = b->lane_start[l - 1] + b->lane_len[l - 1];
	for (uint64_t k = 0; k < b->nblocks; k++) {
		unsigned l = block_lane(b, k);

		b->order[b->lane_start[l] + fill[l]++] = k;
	}
	for (unsigned l = 0; b->o.random && l < b->nlanes; l++) {
		uint64_t *o = b->order + b->lane_start[l];

		for (uint64_t i = b->lane_len[l]; i-- > 1;) {
			uint64_t j = rnd(&s) % (i + 1), t = o[i];

			o[i] = o[j];
			o[j] = t;
		}
	}
	return 0;
}

static int make_slots(struct bench *b)
{
	struct nvmefs_bufpool_opts po = {.buf_size = b->o.block_size, .numa_node = -1};
	int err;

	b->nslots = b->o.qd * b->set->count;
	b->max_segs = (unsigned)(b->o.block_size / b->o.chunk) + 2;
	po.max_bytes = (size_t)b->nslots * ((b->o.block_size + 4095) & ~4095ull);
	po.numa_node = b->set->devs[0].numa_node;
	err = nvmefs_bufpool_create(&b->pool, &po);
	if (err)
		return err;
	b->slots = calloc(b->nslots, sizeof(*b->slots));
	if (!b->slots)
		return -ENOMEM;
	for (unsigned i = 0; i < b->nslots; i++) {
		struct slot *s = &b->slots[i];

		s->b = b;
		s->lane = i % b->nlanes;
		s->segs = calloc(b->max_segs, sizeof(*s->segs));
		s->map = calloc(b->max_segs, sizeof(*s->map));
		s->buf = nvmefs_bufpool_get(b->pool);
		if (!s->segs || !s->map || !s->buf)
			return -ENOMEM;
		/* Plain write passes send whatever the buffer holds: make it not zeros. */
		memset(s->buf, 0xa5 ^ (int)i, b->o.block_size);
	}
	return 0;
}

static void free_bench(struct bench *b)
{
	for (unsigned i = 0; b->slots && i < b->nslots; i++) {
		free(b->slots[i].segs);
		free(b->slots[i].map);
		nvmefs_bufpool_put(b->pool, b->slots[i].buf);
	}
	free(b->slots);
	nvmefs_bufpool_destroy(b->pool);
	nvmefs_engine_destroy(b->eng);
	nvmefs_devset_close(b->set);
	free(b->order);
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->idle);
}

/* Open the devices, the engine and the buffers for the options in b->o. */
static int setup(struct bench *b, char **paths, unsigned ndev)
{
	struct nvmefs_engine_opts eo = {.queue_depth = b->o.qd};
	struct nvmefs_devset_opts dso = {0};
	uint64_t per_dev;
	int err;

	if (ndev > NVMEFS_MAX_DEVICES) {
		nvmefs_err("at most %d devices", NVMEFS_MAX_DEVICES);
		return -EINVAL;
	}
	if (nvmefs_layout_init(&b->layout, (uint32_t)b->o.chunk, ndev, 0)) {
		nvmefs_err("--chunk %llu: must be a power of two from %u to %u",
			   (unsigned long long)b->o.chunk, NVMEFS_CHUNK_MIN, NVMEFS_CHUNK_MAX);
		return -EINVAL;
	}
	b->nblocks = b->o.size / b->o.block_size;
	per_dev = nvmefs_layout_comp_size(&b->layout, 0, b->nblocks * b->o.block_size);
	dso.min_size = b->o.offset + per_dev;
	err = nvmefs_devset_open(&b->set, (const char *const *)paths, ndev, &dso);
	if (err)
		return err;
	if ((b->o.block_size | b->o.chunk | b->o.offset) % nvmefs_devset_block_size(b->set)) {
		nvmefs_err("--block-size, --chunk and --offset must be multiples of the devices' "
			   "block size (%u)",
			   nvmefs_devset_block_size(b->set));
		return -EINVAL;
	}
	/* Split nothing: one iocb per chunk piece of a block. */
	eo.max_io = b->o.block_size > b->o.chunk ? b->o.chunk : b->o.block_size;
	err = nvmefs_engine_create(&b->eng, b->set, &eo);
	if (err)
		return err;
	err = make_order(b);
	if (err)
		return err;
	return make_slots(b);
}

static const char *op_name(int op)
{
	return op == NVMEFS_IO_WRITE ? "write" : "read";
}

static int validate(struct bench *b)
{
	double t;
	int err = run_pass(b, NVMEFS_IO_WRITE, PASS_FILL, &t);

	if (!err)
		err = run_pass(b, NVMEFS_IO_READ, PASS_CHECK, &t);
	if (err == -EILSEQ) {
		uint64_t off = atomic_load(&b->bad_off) - 1;
		struct nvmefs_segment seg;

		nvmefs_layout_map(&b->layout, off, 1, &seg, 1);
		nvmefs_err("validate: data read back differs from what was written at region "
			   "offset %llu (%s, offset %llu)",
			   (unsigned long long)off, b->set->devs[seg.dev].path,
			   (unsigned long long)(b->o.offset + seg.comp_off));
	} else if (err) {
		nvmefs_err("validate: I/O failed: %s", strerror(-err));
	} else {
		printf("validate: wrote and read back %llu bytes: OK\n",
		       (unsigned long long)(b->nblocks * b->o.block_size));
	}
	return err;
}

/* The total line, and the JSON fields both modes print (NULL without
 * --json: the caller adds its own and hands it to print_json). */
static struct json_object *report_common(const struct bench_opts *o, uint64_t bytes, double seconds)
{
	double gbps = (double)bytes / seconds / 1e9;
	struct json_object *j;
	char sz[32];

	printf("total: %.3f GB/s (%.3f GiB/s), %s in %.3f s; GB = 1e9 bytes, GiB = 2^30\n", gbps,
	       (double)bytes / seconds / (1 << 30), nvmefs_fmt_size(bytes, sz, sizeof(sz)),
	       seconds);
	if (!o->json)
		return NULL;
	j = json_object_new_object();
	json_object_object_add(j, "op", json_object_new_string(op_name(o->op)));
	json_object_object_add(j, "pattern",
			       json_object_new_string(o->random ? "random" : "sequential"));
	json_object_object_add(j, "bytes", json_object_new_int64((int64_t)bytes));
	json_object_object_add(j, "seconds", json_object_new_double(seconds));
	json_object_object_add(j, "gbps", json_object_new_double(gbps));
	json_object_object_add(j, "block_size", json_object_new_int64((int64_t)o->block_size));
	json_object_object_add(j, "queue_depth", json_object_new_int((int)o->qd));
	json_object_object_add(j, "loops", json_object_new_int((int)o->loops));
	return j;
}

/* The JSON object as the last line of stdout; j is consumed. */
static void print_json(struct json_object *j)
{
	printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
								 JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(j);
}

static void report(struct bench *b, double seconds)
{
	uint64_t per_loop = b->nblocks * b->o.block_size;
	struct json_object *j = report_common(&b->o, per_loop * b->o.loops, seconds);
	struct json_object *jd = json_object_new_array();

	for (unsigned s = 0; s < b->layout.stripe_count; s++) {
		unsigned di = b->layout.devs[s];
		uint64_t db = nvmefs_layout_comp_size(&b->layout, s, per_loop) * b->o.loops;
		struct json_object *o = json_object_new_object();

		printf("  %-24s %.3f GB/s\n", b->set->devs[di].path, (double)db / seconds / 1e9);
		json_object_object_add(o, "path", json_object_new_string(b->set->devs[di].path));
		json_object_object_add(o, "bytes", json_object_new_int64((int64_t)db));
		json_object_object_add(o, "gbps",
				       json_object_new_double((double)db / seconds / 1e9));
		json_object_array_add(jd, o);
	}
	if (!j) {
		json_object_put(jd);
		return;
	}
	json_object_object_add(j, "chunk", json_object_new_int64((int64_t)b->o.chunk));
	json_object_object_add(j, "validated", json_object_new_boolean(b->o.validate));
	json_object_object_add(j, "devices", jd);
	print_json(j);
}

/* One pass of a mode over its whole range, its time in *seconds. */
typedef int (*pass_fn)(void *ctx, double *seconds);

/* n passes; with per_loop set, a line for each and their total time. */
static int run_passes(unsigned n, uint64_t per_loop, pass_fn pass, void *ctx, double *total)
{
	double t;
	int err = 0;

	for (unsigned i = 0; i < n && !err; i++) {
		err = pass(ctx, &t);
		*total += t;
		if (!err && per_loop)
			printf("loop %u: %.3f GB/s (%.3f s)\n", i + 1, (double)per_loop / t / 1e9,
			       t);
	}
	return err;
}

static int engine_pass(void *ctx, double *seconds)
{
	struct bench *b = ctx;

	return run_pass(b, b->o.op, PASS_PLAIN, seconds);
}

static int client_pass(void *ctx, double *seconds)
{
	return nvmefs_bench_client_pass(ctx, seconds);
}

static void report_client(const struct bench_opts *o, struct nvmefs_bench_client *c, double seconds)
{
	uint64_t per_loop = o->size / o->block_size * o->block_size;
	struct json_object *j = report_common(o, per_loop * o->loops, seconds);
	struct nvmefs_bench_client_counts n;

	nvmefs_bench_client_counts(c, &n);
	if (n.daemon_known)
		printf("  daemon: %llu bytes copied, %llu page cache invalidations\n",
		       (unsigned long long)n.daemon_copied, (unsigned long long)n.daemon_invals);
	else
		printf("  daemon: its counters not read (no .nvmefs/stats above %s)\n", o->client);
	printf("  fsync: %.3f s of the total; client bounce copies: %llu bytes\n", n.fsync_seconds,
	       (unsigned long long)n.bounce_bytes);
	if (!j)
		return;
	json_object_object_add(j, "file", json_object_new_string(o->client));
	json_object_object_add(j, "threads", json_object_new_int((int)o->threads));
	json_object_object_add(j, "fsync_seconds", json_object_new_double(n.fsync_seconds));
	json_object_object_add(j, "client_bounce_bytes",
			       json_object_new_int64((int64_t)n.bounce_bytes));
	if (n.daemon_known) {
		json_object_object_add(j, "daemon_copied_bytes",
				       json_object_new_int64((int64_t)n.daemon_copied));
		json_object_object_add(j, "daemon_invalidations",
				       json_object_new_int64((int64_t)n.daemon_invals));
	}
	print_json(j);
}

/* --client: the passes through libnvmefs (client/bench_client.c). */
static int run_client(const struct bench_opts *o)
{
	struct nvmefs_bench_client_opts co = {.path = o->client,
					      .write = o->op == NVMEFS_IO_WRITE,
					      .size = o->size,
					      .block_size = o->block_size,
					      .qd = o->qd,
					      .threads = o->threads};
	uint64_t per_loop = o->size / o->block_size * o->block_size;
	struct nvmefs_bench_client *c;
	char sz[32], bs[32];
	double total = 0;
	int err = nvmefs_bench_client_create(&co, &c);

	if (err)
		return 1;
	printf("nvmefs-bench: %s, client, %s, %u thread(s), block %s, queue depth %u per thread, "
	       "%s per loop, %u loops after %u warm-up\n",
	       op_name(o->op), o->client, o->threads,
	       nvmefs_fmt_size(o->block_size, bs, sizeof(bs)), o->qd,
	       nvmefs_fmt_size(per_loop, sz, sizeof(sz)), o->loops, o->warmup);
	err = run_passes(o->warmup, 0, client_pass, c, &total);
	nvmefs_bench_client_count_start(c);
	total = 0;
	if (!err)
		err = run_passes(o->loops, o->json ? 0 : per_loop, client_pass, c, &total);
	if (err)
		nvmefs_err("%s failed: %s", op_name(o->op), strerror(-err));
	else
		report_client(o, c, total);
	nvmefs_bench_client_destroy(c);
	return err ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct bench b = {.lock = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};
	uint64_t per_loop;
	double total = 0;
	char sz[32], bs[32], ch[32];
	int err;

	nvmefs_log_set_ident("nvmefs-bench");
	if (parse_args(argc, argv, &b.o)) {
		usage(stderr);
		return 2;
	}
	if (b.o.client)
		return run_client(&b.o);
	err = setup(&b, argv + optind, (unsigned)(argc - optind));
	if (err)
		goto out;
	per_loop = b.nblocks * b.o.block_size;
	printf("nvmefs-bench: %s, %u devices, %s, block %s, chunk %s, queue depth %u per device, "
	       "%s per loop, %u loops after %u warm-up\n",
	       op_name(b.o.op), b.set->count, b.o.random ? "random" : "sequential",
	       nvmefs_fmt_size(b.o.block_size, bs, sizeof(bs)),
	       nvmefs_fmt_size(b.o.chunk, ch, sizeof(ch)), b.o.qd,
	       nvmefs_fmt_size(per_loop, sz, sizeof(sz)), b.o.loops, b.o.warmup);
	if (b.o.validate) {
		err = validate(&b);
		if (err)
			goto out;
	}
	err = run_passes(b.o.warmup, 0, engine_pass, &b, &total);
	total = 0;
	if (!err)
		err = run_passes(b.o.loops, b.o.json ? 0 : per_loop, engine_pass, &b, &total);
	if (err)
		nvmefs_err("%s failed: %s", op_name(b.o.op), strerror(-err));
	else
		report(&b, total);
out:
	free_bench(&b);
	return err ? 1 : 0;
}

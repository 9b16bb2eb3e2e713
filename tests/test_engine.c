// SPDX-License-Identifier: MIT
/*
 * The libaio engine on image files (4 members in a private temp dir under
 * $TMPDIR, default /tmp):
 *  - round trips from one block to 64 MiB, at aligned and odd offsets, with
 *    chunks small enough that a request has far more blocks than the queue
 *    depth, and with segments split into several blocks by max_io;
 *  - the bytes land where the layout says: members are read back with plain
 *    pread and compared with the pattern;
 *  - chunks that follow each other on a member go as one vectored block;
 *  - several threads with synchronous requests, and hundreds of requests in
 *    flight at once, each completing exactly once;
 *  - bad segments refused with -EINVAL and no callback;
 *  - faults (linked with the test-only injector): EIO on reads or writes in
 *    an offset range or after N blocks, short transfers, latency, and a real
 *    short read from a member truncated under the engine, all reported as
 *    -EIO, never as success, with no hang (a watchdog alarm fails the test)
 *    and no leak (run under ASan in CI);
 *  - the fence of a shutdown: what is in flight is waited for, then no I/O
 *    reaches a member;
 *  - the plug: a plugged thread's requests submitted to be held are held
 *    until it sends them, or its own wait or another thread's submission to
 *    the member does; its plain submissions are not.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <numa.h>
#include <sched.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvmefs/devset.h"
#include "nvmefs/engine.h"
#include "fault_i.h"
#include "nvmefs/layout.h"
#include "nvmefs/util.h"
#include "test_util.h"

#define NDEV	 4
#define DEV_SIZE (40ull << 20)
#define MiB	 (1ull << 20)

static char dir[256];
static char paths[NDEV][300];
static uint64_t seed;

static void cleanup(void)
{
	for (int i = 0; i < NDEV; i++)
		unlink(paths[i]);
	if (dir[0])
		rmdir(dir);
}

static void make_images(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/test_engine.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		TEST_SKIP("cannot make a temp dir under %s", tmp ? tmp : "/tmp");
	atexit(cleanup);
	for (int i = 0; i < NDEV; i++) {
		int fd;

		snprintf(paths[i], sizeof(paths[i]), "%s/dev%d.img", dir, i);
		fd = open(paths[i], O_CREAT | O_RDWR, 0600);
		CHECK(fd >= 0 && ftruncate(fd, (off_t)DEV_SIZE) == 0);
		close(fd);
	}
}

static struct nvmefs_devset *open_set(void)
{
	const char *p[NDEV] = {paths[0], paths[1], paths[2], paths[3]};
	struct nvmefs_devset *set = NULL;

	if (nvmefs_devset_open(&set, p, NDEV, NULL))
		TEST_SKIP("image files in %s do not support O_DIRECT", dir);
	return set;
}

static uint64_t pat(uint64_t off)
{
	uint64_t z = off * 0x9e3779b97f4a7c15ull + seed;

	z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
	return z ^ (z >> 29);
}

/* Fill buf with the pattern of file bytes [off, off+len), 8-aligned. */
static void fill(void *buf, uint64_t off, uint64_t len, uint64_t salt)
{
	uint64_t *w = buf;

	for (uint64_t i = 0; i < len / 8; i++)
		w[i] = pat(off + i * 8) ^ salt;
}

static void *xalloc(uint64_t len)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, 4096, len ? len : 4096) == 0);
	return p;
}

/* A request for [off, off + len) of a "file" with layout l, at base 0. */
struct xfer {
	struct nvmefs_io_req req;
	struct nvmefs_io_seg *segs;
};

static void xfer_init(struct xfer *x, const struct nvmefs_layout *l, int op, uint64_t off,
		      uint64_t len, void *buf)
{
	uint64_t n = nvmefs_layout_nsegs(l, off, len);
	struct nvmefs_segment *map = calloc(n, sizeof(*map));

	x->segs = calloc(n, sizeof(*x->segs));
	CHECK(map && x->segs);
	nvmefs_layout_map(l, off, len, map, n);
	for (uint64_t i = 0; i < n; i++) {
		x->segs[i] = (struct nvmefs_io_seg){.dev = map[i].dev,
						    .off = map[i].comp_off,
						    .len = map[i].len,
						    .buf = (char *)buf + map[i].buf_off};
	}
	memset(&x->req, 0, sizeof(x->req));
	x->req.op = op;
	x->req.nr_segs = (unsigned)n;
	x->req.segs = x->segs;
	free(map);
}

static int rw(struct nvmefs_engine *e, const struct nvmefs_layout *l, int op, uint64_t off,
	      uint64_t len, void *buf)
{
	struct xfer x;
	int res;

	xfer_init(&x, l, op, off, len, buf);
	res = nvmefs_engine_run(e, &x.req);
	free(x.segs);
	return res;
}

/* The members' bytes, read with plain pread, match the pattern per layout. */
static void check_on_media(const struct nvmefs_layout *l, uint64_t off, uint64_t len, uint64_t salt)
{
	uint64_t n = nvmefs_layout_nsegs(l, off, len);
	struct nvmefs_segment *map = calloc(n, sizeof(*map));
	int fds[NDEV];

	for (int i = 0; i < NDEV; i++)
		fds[i] = open(paths[i], O_RDONLY);
	nvmefs_layout_map(l, off, len, map, n);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t *got = malloc(map[i].len), *want = malloc(map[i].len);

		CHECK(pread(fds[map[i].dev], got, map[i].len, (off_t)map[i].comp_off) ==
		      (ssize_t)map[i].len);
		fill(want, off + map[i].buf_off, map[i].len, salt);
		CHECKF(memcmp(got, want, map[i].len) == 0,
		       "segment %" PRIu64 " (dev %u off %" PRIu64 ") differs on the member", i,
		       map[i].dev, map[i].comp_off);
		free(got);
		free(want);
	}
	for (int i = 0; i < NDEV; i++)
		close(fds[i]);
	free(map);
}

/*
 * Sizes from one block to 64 MiB (4 x 16 MiB on members of 40 MiB), at
 * offset 0 and at an odd number of blocks, through layouts whose chunks make
 * a request many times the queue depth, and a max_io that splits chunks.
 */
static void test_round_trips(struct nvmefs_devset *set)
{
	const uint64_t bs = nvmefs_devset_block_size(set);
	const uint64_t sizes[] = {bs,  2 * bs,	 7 * bs,  33 * bs,  255 * bs, 4097 * bs,
				  MiB, MiB + bs, 5 * MiB, 16 * MiB, 64 * MiB};
	const struct {
		uint32_t chunk;
		unsigned qd;
		uint64_t max_io;
	} cfgs[] = {{64 << 10, 8, 0}, {1 << 20, 32, 256 << 10}, {4 << 10, 2, 0}};
	unsigned cases = 0;

	for (unsigned c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
		struct nvmefs_engine_opts eo = {.queue_depth = cfgs[c].qd,
						.max_io = cfgs[c].max_io};
		struct nvmefs_engine *e;
		struct nvmefs_layout l;

		CHECK(nvmefs_engine_create(&e, set, &eo) == 0);
		CHECK(nvmefs_layout_init(&l, cfgs[c].chunk, NDEV, c) == 0);
		for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			/* 4 KiB chunks make 16384 segments of 64 MiB: keep that case small. */
			if (cfgs[c].chunk == 4096 && sizes[s] > 5 * MiB)
				continue;
			for (uint64_t off = 0; off <= 3 * bs; off += 3 * bs) {
				uint64_t len = sizes[s], salt = c * 1000 + s;
				char *wbuf = xalloc(len), *rbuf = xalloc(len);

				fill(wbuf, off, len, salt);
				memset(rbuf, 0xee, len);
				CHECK_ERR(rw(e, &l, NVMEFS_IO_WRITE, off, len, wbuf), 0);
				CHECK_ERR(rw(e, &l, NVMEFS_IO_READ, off, len, rbuf), 0);
				CHECKF(memcmp(wbuf, rbuf, len) == 0,
				       "round trip differs: chunk %u qd %u off %" PRIu64
				       " len %" PRIu64,
				       cfgs[c].chunk, cfgs[c].qd, off, len);
				if (len <= 5 * MiB)
					check_on_media(&l, off, len, salt);
				free(wbuf);
				free(rbuf);
				cases++;
			}
		}
		nvmefs_engine_destroy(e);
	}
	printf("round trips: %u cases\n", cases);
}

/* Blocks the engine sent to each member since *before (read or write ops). */
static void ops_since(struct nvmefs_engine *e, uint64_t before[NDEV], uint64_t got[NDEV])
{
	for (unsigned d = 0; d < NDEV; d++) {
		struct nvmefs_engine_dev_stats st;

		nvmefs_engine_dev_stats(e, d, &st);
		got[d] = st.read_ops + st.write_ops - before[d];
		before[d] = st.read_ops + st.write_ops;
	}
}

/*
 * Chunks of one request that follow each other on a member travel as one
 * vectored block: 4 MiB over 4 members is one 1 MiB block per member with
 * 64 KiB chunks (16 buffers), sixteen with 4 KiB chunks (16 buffers of 4 KiB
 * each, the vector's limit), four when max_io is 256 KiB. Pieces that are
 * contiguous in memory too grow one buffer; a gap on the member starts a new
 * block. The bytes land where the layout says either way.
 */
static void test_merge(struct nvmefs_devset *set)
{
	const struct {
		uint32_t chunk;
		uint64_t max_io, blocks;
	} cfgs[] = {{64 << 10, 0, 1}, {4 << 10, 0, 16}, {64 << 10, 256 << 10, 4}};
	const uint64_t len = 4 * MiB, bs = nvmefs_devset_block_size(set);
	char *wbuf = xalloc(len), *rbuf = xalloc(len);
	uint64_t before[NDEV] = {0}, got[NDEV];

	for (unsigned c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
		struct nvmefs_engine_opts eo = {.queue_depth = 8, .max_io = cfgs[c].max_io};
		struct nvmefs_engine *e;
		struct nvmefs_layout l;

		CHECK(nvmefs_engine_create(&e, set, &eo) == 0);
		CHECK(nvmefs_layout_init(&l, cfgs[c].chunk, NDEV, c) == 0);
		memset(before, 0, sizeof(before));
		fill(wbuf, 0, len, 500 + c);
		memset(rbuf, 0xee, len);
		for (int op = NVMEFS_IO_WRITE; op >= NVMEFS_IO_READ; op--) {
			CHECK_ERR(rw(e, &l, op, 0, len, op == NVMEFS_IO_WRITE ? wbuf : rbuf), 0);
			ops_since(e, before, got);
			for (unsigned d = 0; d < NDEV; d++)
				CHECKF(got[d] == cfgs[c].blocks,
				       "chunk %u: member %u took %" PRIu64
				       " %s blocks, want %" PRIu64,
				       cfgs[c].chunk, d, got[d],
				       op == NVMEFS_IO_WRITE ? "write" : "read", cfgs[c].blocks);
		}
		CHECK(memcmp(wbuf, rbuf, len) == 0);
		check_on_media(&l, 0, len, 500 + c);
		nvmefs_engine_destroy(e);
	}

	/* Hand-made segments on member 0: [0,A) and [A,2A) contiguous in memory
	 * too (one buffer), a gap, then [3A,4A) elsewhere in memory. */
	{
		const uint64_t a = 16 * bs;
		struct nvmefs_io_seg segs[3] = {
			{.dev = 0, .off = 0, .len = a, .buf = wbuf},
			{.dev = 0, .off = a, .len = a, .buf = wbuf + a},
			{.dev = 0, .off = 3 * a, .len = a, .buf = wbuf + 8 * a},
		};
		struct nvmefs_io_req req = {.op = NVMEFS_IO_WRITE, .nr_segs = 3, .segs = segs};
		struct nvmefs_engine *e;
		char *back = xalloc(4 * a), *gap = xalloc(a);
		int fd = open(paths[0], O_RDONLY);

		CHECK(fd >= 0 && pread(fd, gap, a, (off_t)(2 * a)) == (ssize_t)a);
		CHECK(nvmefs_engine_create(&e, set, NULL) == 0);
		memset(before, 0, sizeof(before));
		CHECK_ERR(nvmefs_engine_run(e, &req), 0);
		ops_since(e, before, got);
		CHECKF(got[0] == 2, "a gap on the member: %" PRIu64 " blocks, want 2", got[0]);
		CHECK(got[1] == 0 && got[2] == 0 && got[3] == 0);
		CHECK(fd >= 0 && pread(fd, back, 4 * a, 0) == (ssize_t)(4 * a));
		CHECK(memcmp(back, wbuf, 2 * a) == 0);
		CHECK(memcmp(back + 3 * a, wbuf + 8 * a, a) == 0);
		CHECK(memcmp(back + 2 * a, gap, a) == 0); /* the gap untouched */
		close(fd);
		free(back);
		free(gap);
		nvmefs_engine_destroy(e);
	}
	free(wbuf);
	free(rbuf);
}

/* Several threads, each with its own region, write and read back. */
struct worker {
	struct nvmefs_engine *eng;
	unsigned id;
	unsigned failures;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct nvmefs_layout l;
	uint64_t region = 6 * MiB * w->id, s = seed + w->id;

	nvmefs_layout_init(&l, 64 << 10, NDEV, w->id);
	for (unsigned i = 0; i < 40; i++) {
		uint64_t off, len;
		char *a, *b;

		s = s * 6364136223846793005ull + 1442695040888963407ull;
		off = region + ((s >> 33) % 256) * 4096;
		len = (1 + (s >> 20) % 1024) * 4096; /* up to 4 MiB */
		a = xalloc(len);
		b = xalloc(len);
		fill(a, off, len, w->id);
		if (rw(w->eng, &l, NVMEFS_IO_WRITE, off, len, a) ||
		    rw(w->eng, &l, NVMEFS_IO_READ, off, len, b) || memcmp(a, b, len))
			w->failures++;
		free(a);
		free(b);
	}
	return NULL;
}

static void test_threads(struct nvmefs_devset *set)
{
	struct nvmefs_engine_opts eo = {.queue_depth = 4};
	struct worker w[4];
	pthread_t t[4];
	struct nvmefs_engine *e;

	CHECK(nvmefs_engine_create(&e, set, &eo) == 0);
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct worker){.eng = e, .id = i};
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECKF(w[i].failures == 0, "thread %u: %u failed round trips", i, w[i].failures);
	}
	nvmefs_engine_destroy(e);
}

/* Requests in flight at once, each completing exactly once. */
#define NASYNC 300
struct async {
	struct xfer x[NASYNC];
	atomic_int calls[NASYNC];
	int res[NASYNC];
	atomic_int completed;
};

static void async_done(struct nvmefs_io_req *req, int res)
{
	struct async *a = req->priv;
	int i = (int)(((struct xfer *)req) - a->x);

	a->res[i] = res;
	atomic_fetch_add(&a->calls[i], 1);
	atomic_fetch_add(&a->completed, 1);
}

/* Submit NASYNC 64 KiB requests at once; returns how many failed. */
static int run_async(struct nvmefs_engine *e, const struct nvmefs_layout *l, int op, char *buf,
		     struct async *a)
{
	int failed = 0;

	memset(a, 0, sizeof(*a));
	for (int i = 0; i < NASYNC; i++) {
		xfer_init(&a->x[i], l, op, (uint64_t)i * 65536, 65536, buf + (size_t)i * 65536);
		a->x[i].req.done = async_done;
		a->x[i].req.priv = a;
		CHECK(nvmefs_engine_submit(e, &a->x[i].req) == 0);
	}
	while (atomic_load(&a->completed) < NASYNC)
		usleep(1000);
	for (int i = 0; i < NASYNC; i++) {
		CHECKF(atomic_load(&a->calls[i]) == 1, "request %d completed %d times", i,
		       atomic_load(&a->calls[i]));
		failed += a->res[i] != 0;
		free(a->x[i].segs);
	}
	return failed;
}

static void test_many_in_flight(struct nvmefs_devset *set)
{
	struct nvmefs_engine_opts eo = {.queue_depth = 16};
	struct async *a = calloc(1, sizeof(*a));
	char *w = xalloc(NASYNC * 65536ull), *r = xalloc(NASYNC * 65536ull);
	struct nvmefs_engine *e;
	struct nvmefs_layout l;

	CHECK(nvmefs_engine_create(&e, set, &eo) == 0);
	nvmefs_layout_init(&l, 16 << 10, NDEV, 0);
	fill(w, 0, NASYNC * 65536ull, 77);
	CHECK(run_async(e, &l, NVMEFS_IO_WRITE, w, a) == 0);
	CHECK(run_async(e, &l, NVMEFS_IO_READ, r, a) == 0);
	CHECK(memcmp(w, r, NASYNC * 65536ull) == 0);
	nvmefs_engine_destroy(e);
	free(a);
	free(w);
	free(r);
}

static void never_called(struct nvmefs_io_req *req, int res)
{
	CHECKF(0, "done called for a refused request (res %d)", res);
}

static void test_bad_segments(struct nvmefs_devset *set)
{
	char *buf = xalloc(2 * MiB);
	struct nvmefs_engine *e;
	struct nvmefs_io_seg s;
	struct nvmefs_io_req req = {
		.op = NVMEFS_IO_READ, .nr_segs = 1, .segs = &s, .done = never_called};
	const uint64_t bs = nvmefs_devset_block_size(set);

	CHECK(nvmefs_engine_create(&e, set, NULL) == 0);
	s = (struct nvmefs_io_seg){.dev = NDEV, .off = 0, .len = bs, .buf = buf};
	CHECK_ERR(nvmefs_engine_submit(e, &req), -EINVAL); /* no such device */
	s = (struct nvmefs_io_seg){.dev = 0, .off = 1, .len = bs, .buf = buf};
	CHECK_ERR(nvmefs_engine_submit(e, &req), -EINVAL); /* misaligned offset */
	s = (struct nvmefs_io_seg){.dev = 0, .off = 0, .len = bs + 1, .buf = buf};
	CHECK_ERR(nvmefs_engine_submit(e, &req), -EINVAL); /* misaligned length */
	s = (struct nvmefs_io_seg){.dev = 0, .off = 0, .len = bs, .buf = buf + 1};
	CHECK_ERR(nvmefs_engine_submit(e, &req), -EINVAL); /* misaligned buffer */
	s = (struct nvmefs_io_seg){.dev = 0, .off = DEV_SIZE - bs, .len = 2 * bs, .buf = buf};
	CHECK_ERR(nvmefs_engine_submit(e, &req), -EINVAL); /* past the end */
	s = (struct nvmefs_io_seg){.dev = 0, .off = 0, .len = 0, .buf = buf};
	CHECK_ERR(nvmefs_engine_submit(e, &req), -EINVAL); /* empty */
	req.nr_segs = 0;
	CHECK_ERR(nvmefs_engine_submit(e, &req), -EINVAL); /* no segment */
	nvmefs_engine_destroy(e);
	free(buf);
}

/* A request on one member, its completion noted in done. */
struct held {
	struct nvmefs_io_req req;
	struct nvmefs_io_seg seg;
	atomic_int done; /* 0: not yet; 1 + result once completed */
};

static void held_done(struct nvmefs_io_req *req, int res)
{
	struct held *h = req->priv;

	atomic_store(&h->done, 1 + res);
}

static void held_init(struct held *h, unsigned dev, uint64_t off, void *buf, uint64_t len)
{
	memset(h, 0, sizeof(*h));
	h->seg = (struct nvmefs_io_seg){.dev = dev, .off = off, .len = len, .buf = buf};
	h->req = (struct nvmefs_io_req){
		.op = NVMEFS_IO_WRITE, .nr_segs = 1, .segs = &h->seg, .done = held_done, .priv = h};
}

static void held_wait(struct held *h)
{
	while (!atomic_load(&h->done)) /* the watchdog ends a hang */
		usleep(100);
}

struct other {
	struct nvmefs_engine *e;
	struct held *h;
};

static void *other_submits(void *arg)
{
	struct other *o = arg;

	CHECK(nvmefs_engine_submit(o->e, &o->h->req) == 0);
	return NULL;
}

/*
 * The plug (nvmefs_engine_plug): a request the plugged thread submits with
 * nvmefs_engine_submit_held is held, not sent, until the thread sends it;
 * its own wait (nvmefs_engine_run, on another member) sends it first, and
 * another thread's submission to the same member sends it too (a member's
 * queue goes in order); nvmefs_engine_submit is never held, nor is
 * anything after unplug. The bytes reach the members.
 */
static void test_plug(struct nvmefs_devset *set)
{
	const uint64_t bs = nvmefs_devset_block_size(set);
	char *buf = xalloc(4 * bs), *back = xalloc(bs);
	struct held a, b, c;
	struct nvmefs_engine *e;
	struct other o;
	pthread_t t;
	uint64_t since = 0;

	CHECK(nvmefs_engine_create(&e, set, NULL) == 0);
	for (unsigned i = 0; i < 4; i++)
		memset(buf + i * bs, 'a' + (int)i, bs);
	nvmefs_engine_plug(e);

	/* Held until sent (on a kernel without aio poll, before 4.18, the
	 * reaper's 10 ms timeout would kick the member and fail this). */
	held_init(&a, 0, 0, buf, bs);
	CHECK(nvmefs_engine_submit_held(e, &a.req) == 0);
	CHECK(nvmefs_engine_plug_held(&since) == 1 && since > 0);
	usleep(50000);
	CHECKF(!atomic_load(&a.done), "a held write completed before it was sent");
	/* Due at max requests, or once the first waited max_ns (50 ms did). */
	CHECK(!nvmefs_engine_plug_due(2, UINT64_MAX));
	CHECK(nvmefs_engine_plug_due(1, UINT64_MAX));
	CHECK(nvmefs_engine_plug_due(2, 10000000));
	CHECK(!nvmefs_engine_plug_due(2, 60000000000ull));
	CHECK(nvmefs_engine_plug_send() == 1);
	CHECK(!nvmefs_engine_plug_due(1, 0)); /* nothing held: never due */
	held_wait(&a);
	CHECK(atomic_load(&a.done) == 1);
	CHECK(nvmefs_engine_plug_held(&since) == 0);

	/* A plain submission of the plugged thread is not held. */
	held_init(&b, 3, bs, buf + bs, bs);
	CHECK(nvmefs_engine_submit(e, &b.req) == 0);
	CHECK(nvmefs_engine_plug_held(&since) == 0);
	held_wait(&b);
	CHECK(atomic_load(&b.done) == 1);

	/* The thread's own wait (on another member) sends what it holds first. */
	held_init(&a, 1, 0, buf + bs, bs);
	held_init(&b, 0, bs, buf + 2 * bs, bs);
	CHECK(nvmefs_engine_submit_held(e, &a.req) == 0);
	CHECK(nvmefs_engine_run(e, &b.req) == 0);
	held_wait(&a);
	CHECK(atomic_load(&a.done) == 1);
	CHECK(nvmefs_engine_plug_held(&since) == 0);

	/* Another thread's submission to the member sends it too. */
	held_init(&a, 2, 0, buf + 3 * bs, bs);
	held_init(&c, 2, bs, buf, bs);
	CHECK(nvmefs_engine_submit_held(e, &a.req) == 0);
	o = (struct other){.e = e, .h = &c};
	CHECK(pthread_create(&t, NULL, other_submits, &o) == 0);
	pthread_join(t, NULL);
	held_wait(&c);
	held_wait(&a);
	CHECK(atomic_load(&a.done) == 1 && atomic_load(&c.done) == 1);
	(void)nvmefs_engine_plug_send(); /* nothing left: the member's queue went */

	/* Unplugged: sent at once. */
	nvmefs_engine_unplug();
	held_init(&a, 3, 0, buf + 2 * bs, bs);
	CHECK(nvmefs_engine_submit_held(e, &a.req) == 0);
	CHECK(nvmefs_engine_plug_held(&since) == 0);
	held_wait(&a);
	CHECK(atomic_load(&a.done) == 1);
	nvmefs_engine_destroy(e);

	/* What each write put on its member. */
	for (unsigned i = 0; i < 4; i++) {
		static const char want[4][2] = {{'a', 'c'}, {'b', 0}, {'d', 'a'}, {'c', 'b'}};
		int fd = open(paths[i], O_RDONLY);

		for (unsigned k = 0; k < 2 && want[i][k]; k++) {
			CHECK(pread(fd, back, bs, (off_t)(k * bs)) == (ssize_t)bs);
			CHECKF(back[0] == want[i][k] && back[bs - 1] == want[i][k],
			       "member %u block %u: '%c', want '%c'", i, k, back[0], want[i][k]);
		}
		close(fd);
	}
	free(buf);
	free(back);
}

/* EIO in an offset range of one member: only requests touching it fail. */
static void test_fault_range(struct nvmefs_engine *e, const struct nvmefs_layout *l, char *buf)
{
	/* Member 1 holds file bytes [1M, 2M) with 1 MiB chunks over 4 members. */
	struct nvmefs_fault f = {
		.kind = NVMEFS_FAULT_EIO, .ops = NVMEFS_FAULT_READS, .off_lo = 0, .off_hi = MiB};

	CHECK(nvmefs_engine_inject(e, 1, &f) == 0);
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 0, 4 * MiB, buf), -EIO);
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, MiB + 4096, 4096, buf), -EIO);
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 0, MiB, buf), 0);	   /* member 0 only */
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 5 * MiB, MiB, buf), 0); /* member 1, past range */
	CHECK_ERR(rw(e, l, NVMEFS_IO_WRITE, MiB, MiB, buf), 0);	   /* writes unaffected */
	/* 4 blocks of 256K in [0, 1M) for the first read, 1 for the second. */
	CHECK(nvmefs_engine_fault_hits(e, 1) == 5);
	f.ops = NVMEFS_FAULT_WRITES;
	CHECK(nvmefs_engine_inject(e, 1, &f) == 0);
	CHECK_ERR(rw(e, l, NVMEFS_IO_WRITE, 0, 2 * MiB, buf), -EIO);
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 0, 2 * MiB, buf), 0);
}

/* EIO after N blocks, for a limited count: exactly those blocks fail. */
static void test_fault_after(struct nvmefs_engine *e, const struct nvmefs_layout *l, char *buf)
{
	struct nvmefs_fault f = {.kind = NVMEFS_FAULT_EIO, .after = 3, .count = 2};

	CHECK(nvmefs_engine_inject(e, 2, &f) == 0);
	/* 3 blocks of member 2 pass (1 MiB chunks, max_io 256K: 4 blocks per chunk). */
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 2 * MiB, 768 << 10, buf), 0);
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 0, 4 * MiB, buf), -EIO); /* blocks 4, 5 fail */
	CHECK(nvmefs_engine_fault_hits(e, 2) == 2);
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 0, 4 * MiB, buf), 0); /* count used up */
}

/* A short transfer from the kernel is an error, for reads and writes. */
static void test_fault_short(struct nvmefs_engine *e, const struct nvmefs_layout *l, char *buf)
{
	struct nvmefs_fault f = {.kind = NVMEFS_FAULT_SHORT, .count = 1};
	struct nvmefs_engine_dev_stats st0, st1;

	nvmefs_engine_dev_stats(e, 3, &st0);
	CHECK(nvmefs_engine_inject(e, 3, &f) == 0);
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 3 * MiB, MiB, buf), -EIO);
	f.ops = NVMEFS_FAULT_WRITES;
	CHECK(nvmefs_engine_inject(e, 3, &f) == 0);
	CHECK_ERR(rw(e, l, NVMEFS_IO_WRITE, 3 * MiB, MiB, buf), -EIO);
	nvmefs_engine_dev_stats(e, 3, &st1);
	CHECK(st1.errors == st0.errors + 2);
}

/* The same on blocks the engine merged (four 64K chunks per member in one
 * vectored block): the short transfer still fails the request. */
static void test_fault_short_merged(struct nvmefs_devset *set)
{
	struct nvmefs_fault f = {.kind = NVMEFS_FAULT_SHORT, .count = 1};
	struct nvmefs_engine_opts eo = {.queue_depth = 8};
	struct nvmefs_engine_dev_stats st0, st1;
	char *buf = xalloc(4 * MiB);
	struct nvmefs_engine *e;
	struct nvmefs_layout l;

	CHECK(nvmefs_engine_create(&e, set, &eo) == 0);
	nvmefs_layout_init(&l, 256 << 10, NDEV, 0);
	memset(buf, 0x5a, 4 * MiB);
	nvmefs_engine_dev_stats(e, 2, &st0);
	CHECK(nvmefs_engine_inject(e, 2, &f) == 0);
	CHECK_ERR(rw(e, &l, NVMEFS_IO_READ, 0, 4 * MiB, buf), -EIO);
	f.ops = NVMEFS_FAULT_WRITES;
	CHECK(nvmefs_engine_inject(e, 2, &f) == 0);
	CHECK_ERR(rw(e, &l, NVMEFS_IO_WRITE, 0, 4 * MiB, buf), -EIO);
	nvmefs_engine_dev_stats(e, 2, &st1);
	CHECK(st1.errors == st0.errors + 2);
	CHECK(st1.read_ops + st1.write_ops == st0.read_ops + st0.write_ops); /* none succeeded */
	nvmefs_engine_destroy(e);
	free(buf);
}

/* Latency delays completions but loses nothing. */
static void test_fault_latency(struct nvmefs_engine *e, const struct nvmefs_layout *l, char *buf)
{
	struct nvmefs_fault f = {.latency_us = 30000};
	uint64_t t0;

	CHECK(nvmefs_engine_inject(e, 0, &f) == 0);
	t0 = nvmefs_now_ns();
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 0, MiB, buf), 0);
	CHECK(nvmefs_now_ns() - t0 >= 30000000ull);
}

static void count_done(struct nvmefs_io_req *req, int res)
{
	atomic_int *n = req->priv;

	CHECK_ERR(res, 0);
	atomic_fetch_add(n, 1);
}

/*
 * io_submit refused with -EAGAIN while another block is in flight: the
 * engine must wait for that completion and retry, without spinning on
 * io_submit meanwhile, and lose nothing.
 */
static void test_fault_eagain(struct nvmefs_engine *e, const struct nvmefs_layout *l, char *buf)
{
	struct nvmefs_fault slow = {.latency_us = 60000};
	struct nvmefs_fault refuse = {.latency_us = 60000, .eagain_ms = 30};
	struct xfer a, b;
	atomic_int done = 0;

	CHECK(nvmefs_engine_inject(e, 0, &slow) == 0);
	xfer_init(&a, l, NVMEFS_IO_READ, 0, 4096, buf);
	xfer_init(&b, l, NVMEFS_IO_READ, 8192, MiB - 8192, buf + MiB);
	a.req.done = b.req.done = count_done;
	a.req.priv = b.req.priv = &done;
	CHECK(nvmefs_engine_submit(e, &a.req) == 0); /* in flight, reaped 60 ms later */
	CHECK(nvmefs_engine_inject(e, 0, &refuse) == 0);
	CHECK(nvmefs_engine_submit(e, &b.req) == 0); /* refused: must wait, not spin */
	while (atomic_load(&done) < 2)
		usleep(1000);
	CHECKF(nvmefs_engine_fault_refusals(e, 0) < 20,
	       "io_submit refused %" PRIu64 " times: the engine spun instead of waiting",
	       nvmefs_engine_fault_refusals(e, 0));
	CHECK(nvmefs_engine_fault_refusals(e, 0) >= 1);
	free(a.segs);
	free(b.segs);
}

/* Hundreds of requests in flight while a member fails them all: each is
 * reported once, as -EIO if it touched that member. */
static void test_fault_storm(struct nvmefs_engine *e, char *buf)
{
	struct nvmefs_fault f = {.kind = NVMEFS_FAULT_EIO};
	struct async *a = calloc(1, sizeof(*a));
	struct nvmefs_layout l;

	nvmefs_layout_init(&l, 64 << 10, NDEV, 0);
	CHECK(nvmefs_engine_inject(e, 0, &f) == 0);
	/* 64 KiB chunks, 64 KiB requests: every 4th request lives on member 0. */
	CHECK(run_async(e, &l, NVMEFS_IO_READ, buf, a) == NASYNC / 4);
	for (int i = 0; i < NASYNC; i++)
		CHECKF(a->res[i] == (i % 4 == 0 ? -EIO : 0), "request %d: %d", i, a->res[i]);
	free(a);
}

/* A member that really returns less than asked: its image file shrinks. */
static void test_real_short_read(struct nvmefs_engine *e, const struct nvmefs_layout *l, char *buf)
{
	int fd = open(paths[1], O_RDWR);

	CHECK(fd >= 0 && ftruncate(fd, (off_t)(MiB + 4096)) == 0);
	/* File bytes [5M, 6M) are member 1's [1M, 2M): now mostly past its end. */
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 5 * MiB, MiB, buf), -EIO);
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 4 * MiB, MiB, buf), 0); /* member 0: fine */
	CHECK(ftruncate(fd, (off_t)DEV_SIZE) == 0);
	CHECK_ERR(rw(e, l, NVMEFS_IO_READ, 5 * MiB, MiB, buf), 0);
	close(fd);
}

static void test_faults(struct nvmefs_devset *set)
{
	struct nvmefs_engine_opts eo = {.queue_depth = 8, .max_io = 256 << 10};
	char *buf = xalloc(NASYNC * 65536ull);
	struct nvmefs_fault none = {0};
	struct nvmefs_engine *e;
	struct nvmefs_layout l;

	CHECK(nvmefs_engine_create(&e, set, &eo) == 0);
	nvmefs_layout_init(&l, 1 << 20, NDEV, 0);
	memset(buf, 0x3c, NASYNC * 65536ull);
	test_fault_range(e, &l, buf);
	test_fault_after(e, &l, buf);
	test_fault_short(e, &l, buf);
	test_fault_latency(e, &l, buf);
	test_fault_eagain(e, &l, buf);
	for (unsigned i = 0; i < NDEV; i++)
		CHECK(nvmefs_engine_inject(e, i, &none) == 0);
	test_fault_storm(e, buf);
	CHECK(nvmefs_engine_inject(e, 0, &none) == 0);
	test_real_short_read(e, &l, buf);
	/* After all that, the engine still moves data correctly. */
	CHECK_ERR(rw(e, &l, NVMEFS_IO_WRITE, 0, 8 * MiB, buf), 0);
	nvmefs_engine_destroy(e);
	free(buf);
	test_fault_short_merged(set);
}

/* ---- the fence of a shutdown ---- */

static void note_result(struct nvmefs_io_req *req, int res)
{
	atomic_int *r = req->priv;

	atomic_store(r, res == 0 ? 1 : res);
}

/* The first 2 MiB of every member, where test_fence writes. */
static void snapshot(char *out)
{
	for (int i = 0; i < NDEV; i++) {
		int fd = open(paths[i], O_RDONLY);

		CHECK(fd >= 0 && pread(fd, out + i * 2 * MiB, 2 * MiB, 0) == (ssize_t)(2 * MiB));
		close(fd);
	}
}

/*
 * nvmefs_engine_fence (FS_IOC_SHUTDOWN): a write in flight, held by a slow
 * reaper, is waited for; after the fence no byte of a member changes, and
 * every write, read, flush and discard fails with -EIO, through the engine
 * and the synchronous calls alike.
 */
static void test_fence(void)
{
	struct nvmefs_devset *set = open_set();
	struct nvmefs_engine_opts eo = {.queue_depth = 8};
	struct nvmefs_fault slow = {.latency_us = 200000};
	char *buf = xalloc(4 * MiB), *before = malloc(NDEV * 2 * MiB),
	     *after = malloc(NDEV * 2 * MiB);
	struct nvmefs_engine *e;
	struct nvmefs_layout l;
	atomic_int res = 0;
	struct xfer x;
	uint64_t t0;

	CHECK(before && after);
	CHECK(nvmefs_engine_create(&e, set, &eo) == 0);
	CHECK(nvmefs_layout_init(&l, 1 << 20, NDEV, 0) == 0);
	fill(buf, 0, 4 * MiB, 1);
	CHECK_ERR(rw(e, &l, NVMEFS_IO_WRITE, 0, 4 * MiB, buf), 0);
	CHECK(nvmefs_engine_inject(e, 0, &slow) == 0);
	fill(buf, 0, 4 * MiB, 2);
	xfer_init(&x, &l, NVMEFS_IO_WRITE, 0, 4 * MiB, buf);
	x.req.done = note_result;
	x.req.priv = &res;
	CHECK(nvmefs_engine_submit(e, &x.req) == 0);
	usleep(20000); /* in the kernel, or reaped late */
	t0 = nvmefs_now_ns();
	nvmefs_engine_fence(e);
	CHECKF(nvmefs_now_ns() - t0 >= 100000000ull,
	       "the fence did not wait for the slow member's block (%" PRIu64 " ns)",
	       nvmefs_now_ns() - t0);
	snapshot(before);
	while (!atomic_load(&res))
		usleep(1000);
	CHECK(atomic_load(&res) == 1 || atomic_load(&res) == -EIO);
	free(x.segs);
	CHECK_ERR(rw(e, &l, NVMEFS_IO_WRITE, 0, 4 * MiB, buf), -EIO);
	CHECK_ERR(rw(e, &l, NVMEFS_IO_READ, 0, 4 * MiB, buf), -EIO);
	for (unsigned i = 0; i < NDEV; i++) {
		CHECK_ERR(nvmefs_dev_pio(&set->devs[i], true, 0, buf, MiB), -EIO);
		CHECK_ERR(nvmefs_dev_pio(&set->devs[i], false, 0, buf, MiB), -EIO);
		CHECK_ERR(nvmefs_dev_flush(&set->devs[i]), -EIO);
		CHECK_ERR(nvmefs_dev_discard(&set->devs[i], 0, MiB), -EIO);
		CHECK_ERR(nvmefs_engine_flush(e, i), -EIO);
	}
	usleep(250000); /* past the slow reaper's next reap */
	snapshot(after);
	CHECKF(memcmp(before, after, NDEV * 2 * MiB) == 0,
	       "a member changed after nvmefs_engine_fence returned");
	nvmefs_engine_destroy(e);
	nvmefs_devset_close(set);
	free(buf);
	free(before);
	free(after);
}

/* ---- power loss (forked: the cut ends the process) ---- */

static int pl_pipe[2];

static void pl_report(const struct nvmefs_powerloss_report *r)
{
	CHECK(write(pl_pipe[1], r, sizeof(*r)) == (ssize_t)sizeof(*r));
	_exit(0);
}

/* Write len bytes of pattern salt at off of member 0 as one request. */
static int pl_write(struct nvmefs_engine *e, uint64_t off, uint64_t len, uint64_t salt)
{
	char *buf = xalloc(len);
	struct nvmefs_io_seg seg = {.dev = 0, .off = off, .len = len, .buf = buf};
	struct nvmefs_io_req req = {.op = NVMEFS_IO_WRITE, .nr_segs = 1, .segs = &seg};
	int ret;

	fill(buf, off, len, salt);
	ret = nvmefs_engine_run(e, &req);
	free(buf);
	return ret;
}

/* Member 0's bytes [off, off + len) hold pattern salt. */
static bool pl_holds(uint64_t off, uint64_t len, uint64_t salt)
{
	char *want = xalloc(len), *got = xalloc(len);
	int fd = open(paths[0], O_RDONLY);
	bool same = fd >= 0 && pread(fd, got, len, (off_t)off) == (ssize_t)len;

	fill(want, off, len, salt);
	same = same && !memcmp(want, got, len);
	if (fd >= 0)
		close(fd);
	free(want);
	free(got);
	return same;
}

/* Pattern salt at [off, off + 2 * half) of member 0 as one request of two
 * segments in separate buffers: the engine sends one vectored block. */
static int pl_write_vec(struct nvmefs_engine *e, uint64_t off, uint64_t half, uint64_t salt)
{
	/* One allocation, the second buffer a gap after the first: two
	 * allocations may well be adjacent (ThreadSanitizer's allocator put
	 * them so), and then the engine rightly sends one buffer. */
	char *a = xalloc(3 * half), *b = a + 2 * half;
	struct nvmefs_io_seg segs[2] = {{.dev = 0, .off = off, .len = half, .buf = a},
					{.dev = 0, .off = off + half, .len = half, .buf = b}};
	struct nvmefs_io_req req = {.op = NVMEFS_IO_WRITE, .nr_segs = 2, .segs = segs};
	int ret;

	fill(a, off, half, salt);
	fill(b, off + half, half, salt);
	ret = nvmefs_engine_run(e, &req);
	free(a);
	return ret;
}

enum pl_case { PL_DROP, PL_KEEP, PL_AFTER, PL_VEC_DROP };

/*
 * In a child: 64K of pattern 1 on member 0, flushed; record; 32K of
 * pattern 2, flushed; 32K of pattern 3 (8 blocks of 4K), not flushed;
 * then cut: at once dropping or keeping everything, or (PL_AFTER) armed
 * before the last write to cut after its third block. Returns the report.
 */
static struct nvmefs_powerloss_report pl_run(enum pl_case c)
{
	struct nvmefs_powerloss_report r = {.error = -1};
	struct nvmefs_powerloss o = {.seed = seed,
				     .keep_pct = c == PL_DROP || c == PL_VEC_DROP ? 0 : 100};
	pid_t pid;
	int st;

	CHECK(pipe(pl_pipe) == 0);
	pid = fork();
	if (pid == 0) {
		struct nvmefs_engine_opts eo = {.queue_depth = 8,
						.max_io = c == PL_VEC_DROP ? 64 << 10 : 4096};
		struct nvmefs_devset *set = open_set();
		struct nvmefs_engine *e;

		close(pl_pipe[0]);
		if (nvmefs_engine_create(&e, set, &eo))
			_exit(2);
		if (pl_write(e, 0, 64 << 10, 1) || nvmefs_engine_flush(e, 0) ||
		    nvmefs_powerloss_record(set) || pl_write(e, 0, 32 << 10, 2) ||
		    nvmefs_engine_flush(e, 0))
			_exit(3);
		if (c == PL_AFTER && nvmefs_powerloss_after(3, &o, pl_report))
			_exit(4);
		if (c == PL_VEC_DROP)
			pl_write_vec(e, 32 << 10, 16 << 10, 3);
		else
			pl_write(e, 32 << 10, 32 << 10, 3); /* fails (EIO) past the cut */
		if (c != PL_AFTER)
			nvmefs_powerloss_now(&o, pl_report);
		_exit(5); /* the cut never came */
	}
	close(pl_pipe[1]);
	CHECK(read(pl_pipe[0], &r, sizeof(r)) == (ssize_t)sizeof(r));
	close(pl_pipe[0]);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "case %d: child status %#x", c, st);
	return r;
}

/* Unflushed writes are undone or kept as asked; flushed ones always stay;
 * a cut armed inside a multi-block request waits only for what it sent. */
static void test_powerloss(void)
{
	struct nvmefs_powerloss_report r;
	uint64_t t0;

	r = pl_run(PL_DROP);
	CHECK(r.error == 0 && r.unflushed == 8 && r.dropped == 8 && r.kept == 0);
	CHECK(pl_holds(0, 32 << 10, 2));	/* flushed */
	CHECK(pl_holds(32 << 10, 32 << 10, 1)); /* dropped: the old contents */
	r = pl_run(PL_KEEP);
	CHECK(r.error == 0 && r.unflushed == 8 && r.kept == 8);
	CHECK(pl_holds(0, 32 << 10, 2) && pl_holds(32 << 10, 32 << 10, 3));
	t0 = nvmefs_now_ns();
	r = pl_run(PL_AFTER);
	CHECKF(nvmefs_now_ns() - t0 < 5000000000ull, "the armed cut took %.1f s",
	       (double)(nvmefs_now_ns() - t0) / 1e9);
	CHECKF(r.error == 0 && r.unflushed == 3 && r.kept == 3, "error %d unflushed %llu", r.error,
	       (unsigned long long)r.unflushed);
	CHECK(pl_holds(32 << 10, 12 << 10, 3));	       /* the three blocks sent */
	CHECK(pl_holds((32 + 12) << 10, 20 << 10, 1)); /* the rest never was */
	/* A vectored block is recorded per buffer, so each chunk of it is
	 * kept or lost on its own, as before the engine merged them. */
	r = pl_run(PL_VEC_DROP);
	CHECKF(r.error == 0 && r.unflushed == 2 && r.dropped == 2,
	       "vectored write: %llu unflushed, %llu dropped", (unsigned long long)r.unflushed,
	       (unsigned long long)r.dropped);
	CHECK(pl_holds(32 << 10, 32 << 10, 1));
}

/*
 * While a cut waits for the writes in flight (here one held 2 s by a slow
 * member) it refuses new ones. The threads whose writes it refused, a
 * request through the engine and a synchronous nvmefs_dev_pio, must never
 * get their -EIO back: a daemon would answer the application with it (or
 * turn the volume read-only) while it still runs. They stop there until
 * the cut ends the process, and the report counts only the held write.
 */
static int late_pipe[2];

static void pl_ignore(struct nvmefs_io_req *req, int res)
{
	(void)req, (void)res;
}

static void *pl_cut_now(void *o)
{
	nvmefs_powerloss_now(o, pl_report);
	return NULL;
}

/* A write of one block at off of member dev, through the engine or not;
 * what it returned goes to late_pipe. */
static void pl_late_write(struct nvmefs_engine *e, struct nvmefs_devset *set, unsigned dev,
			  bool pio)
{
	char *buf = xalloc(4096);
	struct nvmefs_io_seg seg = {.dev = dev, .off = 0, .len = 4096, .buf = buf};
	struct nvmefs_io_req req = {.op = NVMEFS_IO_WRITE, .nr_segs = 1, .segs = &seg};
	int ret;

	fill(buf, 0, 4096, 4);
	ret = pio ? nvmefs_dev_pio(&set->devs[dev], true, 0, buf, 4096)
		  : nvmefs_engine_run(e, &req);
	CHECK(write(late_pipe[1], &ret, sizeof(ret)) == (ssize_t)sizeof(ret));
}

static void *pl_late_pio(void *set)
{
	pl_late_write(NULL, set, 2, true);
	return NULL;
}

static void test_powerloss_silent(void)
{
	struct nvmefs_powerloss_report r = {.error = -1};
	int st, late;
	pid_t pid;

	CHECK(pipe(pl_pipe) == 0 && pipe(late_pipe) == 0);
	pid = fork();
	if (pid == 0) {
		struct nvmefs_engine_opts eo = {.queue_depth = 8, .max_io = 4096};
		struct nvmefs_powerloss o = {.seed = seed, .keep_pct = 100};
		struct nvmefs_fault slow = {.latency_us = 2000000};
		struct nvmefs_devset *set = open_set();
		char *held = xalloc(4096);
		struct nvmefs_io_seg seg = {.dev = 0, .off = 0, .len = 4096, .buf = held};
		struct nvmefs_io_req req = {
			.op = NVMEFS_IO_WRITE, .nr_segs = 1, .segs = &seg, .done = pl_ignore};
		struct nvmefs_engine *e;
		pthread_t cutter, pio;

		close(pl_pipe[0]);
		close(late_pipe[0]);
		fill(held, 0, 4096, 3);
		if (nvmefs_engine_create(&e, set, &eo) || nvmefs_powerloss_record(set) ||
		    nvmefs_engine_inject(e, 0, &slow) || nvmefs_engine_submit(e, &req))
			_exit(3);
		if (pthread_create(&cutter, NULL, pl_cut_now, &o))
			_exit(4);
		while (!nvmefs_powerloss_cut())
			usleep(1000);
		if (pthread_create(&pio, NULL, pl_late_pio, set))
			_exit(4);
		pl_late_write(e, set, 1, false);
		pause(); /* the cut ends the process */
		_exit(5);
	}
	close(pl_pipe[1]);
	close(late_pipe[1]);
	CHECK(read(pl_pipe[0], &r, sizeof(r)) == (ssize_t)sizeof(r));
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	CHECKF(r.error == 0 && r.unflushed == 1 && r.kept == 1, "error %d unflushed %llu", r.error,
	       (unsigned long long)r.unflushed);
	while (read(late_pipe[0], &late, sizeof(late)) == (ssize_t)sizeof(late))
		CHECKF(false, "a write the cut refused returned %d to its caller", late);
	close(pl_pipe[0]);
	close(late_pipe[0]);
}

/* Each reaper thread (named nvmefs-cqN) runs only on its device's node's CPUs. */
static void test_reaper_affinity(struct nvmefs_devset *set)
{
	struct nvmefs_engine *e;
	struct bitmask *node_cpus;
	struct dirent *de;
	unsigned found = 0;
	cpu_set_t mine, one;
	DIR *tasks;

	if (numa_available() < 0) {
		printf("affinity: libnuma sees no NUMA here; not checked\n");
		return;
	}
	/*
	 * Create the engine from a thread narrowed to CPU 0: reapers that merely
	 * inherited their creator's affinity would then differ from the node's
	 * CPUs (on any node with more than one CPU, as here).
	 */
	CHECK(sched_getaffinity(0, sizeof(mine), &mine) == 0);
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
	CHECK(nvmefs_engine_create(&e, set, NULL) == 0);
	CHECK(sched_setaffinity(0, sizeof(mine), &mine) == 0);
	node_cpus = numa_allocate_cpumask();
	tasks = opendir("/proc/self/task");
	while (tasks && (de = readdir(tasks))) {
		char path[300], comm[32] = "";
		cpu_set_t cs;
		FILE *f;
		int tid = atoi(de->d_name);

		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (!tid || !f || !fgets(comm, sizeof(comm), f) || strncmp(comm, "nvmefs-cq", 9)) {
			if (f)
				fclose(f);
			continue;
		}
		fclose(f);
		CHECK(sched_getaffinity(tid, sizeof(cs), &cs) == 0);
		/* Every member here is on node 0 (no NUMA hardware behind files). */
		CHECK(numa_node_to_cpus(set->devs[atoi(comm + 9)].numa_node, node_cpus) == 0);
		for (unsigned c = 0; c < node_cpus->size && c < CPU_SETSIZE; c++)
			CHECKF(!!CPU_ISSET(c, &cs) == !!numa_bitmask_isbitset(node_cpus, c),
			       "reaper %s: cpu %u", comm, c);
		found++;
	}
	if (tasks)
		closedir(tasks);
	printf("affinity: %u reapers on their node's %d CPU(s)\n", found,
	       numa_bitmask_weight(node_cpus));
	CHECKF(found == set->count, "found %u reaper threads, want %u", found, set->count);
	numa_free_cpumask(node_cpus);
	nvmefs_engine_destroy(e);
}

static void watchdog(int sig)
{
	static const char msg[] = "test_engine: FAIL: hung (watchdog)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0) {
	}
	_exit(1);
}

int main(void)
{
	struct nvmefs_devset *set;

	seed = test_seed();
	printf("seed %" PRIu64 " (rerun with NVMEFS_TEST_SEED=%" PRIu64 ")\n", seed, seed);
	signal(SIGALRM, watchdog);
	alarm(240);
	make_images();
	set = open_set();
	printf("members: %u, block size %u, in %s\n", set->count, nvmefs_devset_block_size(set),
	       dir);
	test_bad_segments(set);
	test_plug(set);
	test_reaper_affinity(set);
	test_round_trips(set);
	test_merge(set);
	test_threads(set);
	test_many_in_flight(set);
	test_faults(set);
	nvmefs_devset_close(set);
	test_fence();
	test_powerloss();
	test_powerloss_silent();
	return test_result();
}

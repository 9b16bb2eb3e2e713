// SPDX-License-Identifier: MIT
/*
 * Format v2's LSM store (fs/store/store.h) on an image file opened as a
 * member:
 *  - random puts, deletes and gets against a model, with flushes, leveled
 *    and full compactions and reopens at random points; a reopened store
 *    equals the model as of its last flush (the memtable is lost by
 *    design), with its mark (replay position, next inode, inode count);
 *  - prefix iteration (a directory's entries, a file's extents) against
 *    the model, over memtable and runs;
 *  - tombstones hide older runs' values, stay through a compaction above
 *    the last level and are gone after the last level's;
 *  - a flush writes as many blocks for the same memtable at two store
 *    sizes (a cost of the memtable, not of the store);
 *  - levels from 1 hold runs of disjoint key ranges after every
 *    compaction (the manifest's), and a lookup reads at most one run block
 *    per level-0 run and per level (the store's read counter);
 *  - a store 80% full of live data still compacts: its deepest level
 *    alone is longer than the free space (what one run per level needed);
 *  - power loss (striping/fault.c, in a child that the cut ends) at every
 *    write of a flush, of a full compaction and of a level-0 step (each
 *    compaction writing several runs) leaves the previous or the new
 *    state, readable, writable, and no space leaked;
 *  - a full run area: the flush says -ENOSPC, nothing is lost or damaged;
 *  - a flush whose manifest was written but not flushed (fault injection):
 *    every later flush and compaction says -EIO at once, reads and puts go
 *    on, and a reopen finds that manifest (its run, its mark);
 *  - a freeze apart from its flush: the run written holds only what was
 *    put before it, with its mark; later puts stay readable and go in the
 *    next flush; a second freeze before the write is refused (-EBUSY);
 *  - walks (no copy of the memtable) against the model as of the last
 *    freeze, over a frozen memtable a flush drops meanwhile, copying
 *    nothing whatever the range (the store's copy counter);
 *  - the run-block cache: a second lookup of a key reads no block, the
 *    cache stays within its limit and evicts the least recent blocks;
 *  - a thread's puts, gets, prefix scans and walks during another's flushes and
 *    compactions (for TSan: only short lock holds, no torn view).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault_i.h"
#include "nvmefs/devset.h"
#include "nvmefs/util.h"
#include "store_i.h"
#include "test_img.h"
#include "test_util.h"

#define IMG_SIZE (20u << 20)
#define NK	 1500 /* keys of the model */

static const uint8_t uuid[16] = {7, 7, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
static const struct nvmefs_runs_geom geom = {.off = 64 * 1024, .blocks = 4096, .slot_blocks = 8};
static const struct nvmefs_store_cfg small_cfg = {
	.l0_runs = 3, .l1_blocks = 4, .fanout = 3, .run_blocks = 2};

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* The mark of a flush at replay position r: every field from r (all 0 for
 * 0, as after format). */
static struct nvmefs_mark mark_at(uint64_t r)
{
	return (struct nvmefs_mark){
		.replay = r, .replay_seq = r * 5, .next_ino = r * 3, .ninodes = r * 2};
}

static int flush_at(struct nvmefs_store *s, uint64_t r)
{
	struct nvmefs_mark m = mark_at(r);

	return nvmefs_store_flush(s, &m);
}

/* The replay position of the store's mark, all ones when its other fields
 * are not the ones mark_at gave with it. */
static uint64_t replay_of(struct nvmefs_store *s)
{
	struct nvmefs_mark m, want;

	nvmefs_store_mark(s, &m);
	want = mark_at(m.replay);
	return m.replay_seq == want.replay_seq && m.next_ino == want.next_ino &&
			       m.ninodes == want.ninodes
		       ? m.replay
		       : UINT64_MAX;
}

/* ---- the model: key i, version v (0: absent) ---- */

struct mkey {
	uint8_t k[NVMEFS_KEY_MAX];
	size_t klen;
};

static struct mkey keys[NK];
static int order[NK]; /* key indexes in key order */

/* Key i: an INODE, a DIRENT of one of 7 parents or an EXTENT of one of 5
 * inodes. */
static void make_keys(void)
{
	for (int i = 0; i < NK; i++) {
		char name[32];
		int n = snprintf(name, sizeof(name), "n%d", i);

		if (i % 3 == 0)
			keys[i].klen = nvmefs_key_inode(keys[i].k, (uint64_t)i);
		else if (i % 3 == 1)
			keys[i].klen = nvmefs_key_dirent(keys[i].k, i % 7 + 1, name, (size_t)n);
		else
			keys[i].klen = nvmefs_key_extent(keys[i].k, i % 5 + 100, 0, i * 4096ull);
		order[i] = i;
	}
	for (int i = 1; i < NK; i++) /* insertion sort: once */
		for (int j = i; j > 0; j--) {
			const struct mkey *a = &keys[order[j - 1]], *b = &keys[order[j]];
			int t;

			if (nvmefs_key_cmp(a->k, a->klen, b->k, b->klen) <= 0)
				break;
			t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
}

static size_t vlen_of(int i, uint32_t v)
{
	return (size_t)((i * 31u + v * 7u) % 301u);
}

static uint8_t vbyte(int i, uint32_t v, size_t j)
{
	return (uint8_t)(i * 3u + v * 11u + j);
}

static int put_v(struct nvmefs_store *s, int i, uint32_t v)
{
	uint8_t val[301];
	size_t n = vlen_of(i, v);

	for (size_t j = 0; j < n; j++)
		val[j] = vbyte(i, v, j);
	return nvmefs_store_put(s, keys[i].k, keys[i].klen, val, n);
}

/* The store's value of key i is version v (0: absent)? */
static bool holds(struct nvmefs_store *s, int i, uint32_t v)
{
	uint8_t val[512];
	size_t n = 0;
	int ret = nvmefs_store_get(s, keys[i].k, keys[i].klen, val, sizeof(val), &n);

	if (!v)
		return ret == -ENOENT;
	if (ret || n != vlen_of(i, v))
		return false;
	for (size_t j = 0; j < n; j++)
		if (val[j] != vbyte(i, v, j))
			return false;
	return true;
}

static bool ent_is(const struct nvmefs_run_ent *e, int i, uint32_t v)
{
	if (nvmefs_key_cmp(e->key, e->klen, keys[i].k, keys[i].klen) || e->tomb ||
	    e->vlen != vlen_of(i, v))
		return false;
	for (size_t j = 0; j < e->vlen; j++)
		if (e->val[j] != vbyte(i, v, j))
			return false;
	return true;
}

/* The keys starting with prefix (plen 0: all) from it against the model. */
static void check_iter(struct nvmefs_store_iter *it, const uint32_t *model, const uint8_t *prefix,
		       size_t plen, const char *what)
{
	struct nvmefs_run_ent e;
	int o = 0, ret, seen = 0;

	while ((ret = nvmefs_store_iter_next(it, &e)) == 1) {
		for (; o < NK; o++) { /* the next key of the model in the range */
			const struct mkey *k = &keys[order[o]];

			if (model[order[o]] && k->klen >= plen && !memcmp(k->k, prefix, plen))
				break;
		}
		CHECKF(o < NK && ent_is(&e, order[o], model[order[o]]), "%s: entry %d", what, seen);
		o++;
		seen++;
	}
	CHECK_ERR(ret, 0);
	for (; o < NK; o++)
		CHECKF(!model[order[o]] || keys[order[o]].klen < plen ||
			       memcmp(keys[order[o]].k, prefix, plen),
		       "%s: key %d missing after %d entries", what, order[o], seen);
	nvmefs_store_iter_close(it);
}

/* Iterate the keys starting with prefix (plen 0: all) against the model. */
static void check_prefix(struct nvmefs_store *s, const uint32_t *model, const uint8_t *prefix,
			 size_t plen, const char *what)
{
	struct nvmefs_store_iter *it;
	int ret;

	ret = plen ? nvmefs_store_iter_prefix(&it, s, prefix, plen)
		   : nvmefs_store_iter_open(&it, s, NULL, 0, NULL, 0);
	CHECK_ERR(ret, 0);
	if (!ret)
		check_iter(it, model, prefix, plen, what);
}

/* The same with a walk (no copy: the store as of the last freeze). The
 * prefix's last byte is not 0xff (the first key past it: that byte + 1). */
static void check_walk(struct nvmefs_store *s, const uint32_t *model, const uint8_t *prefix,
		       size_t plen, const char *what)
{
	struct nvmefs_store_iter *it;
	uint8_t hi[NVMEFS_KEY_MAX];
	int ret;

	memcpy(hi, prefix, plen);
	if (plen)
		hi[plen - 1]++;
	ret = nvmefs_store_walk(&it, s, plen ? prefix : NULL, plen, plen ? hi : NULL, plen);
	CHECK_ERR(ret, 0);
	if (!ret)
		check_iter(it, model, prefix, plen, what);
}

static void check_all(struct nvmefs_store *s, const uint32_t *model, const char *what)
{
	unsigned bad = 0;

	for (int i = 0; i < NK; i++)
		bad += !holds(s, i, model[i]);
	CHECKF(bad == 0, "%s: %u keys differ from the model", what, bad);
	check_prefix(s, model, (const uint8_t *)"", 0, what);
}

/* Free blocks and live runs' blocks make the run space. */
static void check_space(struct nvmefs_store *s, const char *what)
{
	struct nvmefs_runs *a = nvmefs_store_area(s);
	const struct nvmefs_manifest *m = nvmefs_runs_current(a);
	uint64_t live = 0;

	for (size_t i = 0; i < m->n; i++)
		live += nvmefs_run_blocks(&m->runs[i]);
	CHECKF(live + nvmefs_runs_free_blocks(a) == geom.blocks - 2ull * geom.slot_blocks,
	       "%s: %" PRIu64 " live + %" PRIu64 " free blocks", what, live,
	       nvmefs_runs_free_blocks(a));
}

/* Manifest runs by level, then smallest key. */
static int cmp_min(const void *x, const void *y)
{
	const struct nvmefs_run_meta *a = x, *b = y;

	if (a->level != b->level)
		return a->level < b->level ? -1 : 1;
	return nvmefs_key_cmp(a->min, a->min_len, b->min, b->min_len);
}

/* The manifest's runs of each level >= 1 are disjoint; the levels used
 * from 1 are counted in *levels. */
static void check_levels(struct nvmefs_store *s, const char *what, unsigned *levels)
{
	const struct nvmefs_manifest *m = nvmefs_runs_current(nvmefs_store_area(s));
	struct nvmefs_run_meta *r = malloc((m->n ? m->n : 1) * sizeof(*r));
	unsigned bad = 0;

	*levels = 0;
	CHECK(r != NULL);
	if (!r || !m->n) /* no runs (m->runs NULL) */
		goto out;
	memcpy(r, m->runs, m->n * sizeof(*r));
	qsort(r, m->n, sizeof(*r), cmp_min);
	*levels = r[0].level > 0;
	for (size_t i = 1; i < m->n; i++) {
		if (r[i].level != r[i - 1].level) {
			(*levels)++;
			continue;
		}
		bad += r[i].level &&
		       nvmefs_key_cmp(r[i - 1].max, r[i - 1].max_len, r[i].min, r[i].min_len) >= 0;
	}
	CHECKF(bad == 0, "%s: %u overlapping runs in a level", what, bad);
out:
	free(r);
}

/* The store's live runs. */
static unsigned live_runs(struct nvmefs_store *s)
{
	struct nvmefs_store_stats st;

	nvmefs_store_stats(s, &st);
	return st.runs;
}

static struct nvmefs_store *fresh_store(const struct nvmefs_store_cfg *cfg)
{
	struct nvmefs_store *s = NULL;

	CHECK_ERR(nvmefs_runs_format(dev(), &geom, uuid), 0);
	CHECK_ERR(nvmefs_store_open(&s, dev(), &geom, uuid, cfg), 0);
	return s;
}

/* ---- random operations against the model ---- */

static uint32_t cur[NK], durable[NK];

static void compact_all(struct nvmefs_store *s)
{
	int ret, n = 0;

	while ((ret = nvmefs_store_compact(s, false)) == 1 && n < 2000)
		n++;
	CHECK_ERR(ret, 0);
}

/* A directory's entries or a file's extents (by i) against the model;
 * and walked, against frozen (the model as of the last freeze) unless
 * NULL; every third time the whole store is walked. */
static void check_some_prefix(struct nvmefs_store *s, int i, const uint32_t *frozen)
{
	uint8_t p[NVMEFS_KEY_MAX]; /* kind and parent, or kind and inode */

	if (i % 2)
		nvmefs_key_dirent(p, i % 7 + 1, "x", 1);
	else
		nvmefs_key_extent(p, i % 5 + 100, 0, 0);
	check_prefix(s, cur, p, 9, i % 2 ? "dirents" : "extents");
	if (frozen)
		check_walk(s, frozen, p, i % 3 ? 9 : 0,
			   i % 2 ? "walked dirents" : "walked extents");
}

static void test_model(uint64_t seed)
{
	struct nvmefs_store *s = fresh_store(&small_cfg);
	struct nvmefs_store_stats st;
	uint64_t x = seed | 1, replay = 0;
	uint32_t version = 0;
	unsigned reopens = 0, fulls = 0, flushes = 0, compactions = 0, levels = 0;

	memset(cur, 0, sizeof(cur));
	memset(durable, 0, sizeof(durable));
	for (int op = 1; op <= 6000 && s; op++) {
		unsigned r = (unsigned)(rnd(&x) % 1000);
		int i = (int)(rnd(&x) % NK);

		if (r < 550) {
			CHECK_ERR(put_v(s, i, ++version), 0);
			cur[i] = version;
		} else if (r < 800) {
			CHECK_ERR(nvmefs_store_del(s, keys[i].k, keys[i].klen), 0);
			cur[i] = 0;
		} else if (r < 900) {
			CHECKF(holds(s, i, cur[i]), "op %d: key %d", op, i);
		} else if (r < 940) {
			CHECK_ERR(flush_at(s, (uint64_t)op), 0);
			replay = (uint64_t)op;
			memcpy(durable, cur, sizeof(cur));
			flushes++;
		} else if (r < 970) {
			compact_all(s);
			check_levels(s, "compacted", &levels);
			compactions++;
		} else if (r < 975) {
			CHECK(nvmefs_store_compact(s, true) >= 0);
			fulls++;
		} else if (r < 990) {
			check_some_prefix(s, i, durable); /* every flush froze */
		} else {
			nvmefs_store_close(s);
			CHECK_ERR(nvmefs_store_open(&s, dev(), &geom, uuid, &small_cfg), 0);
			CHECK(replay_of(s) == replay);
			memcpy(cur, durable, sizeof(cur));
			check_space(s, "reopened");
			reopens++;
		}
		if (op % 1000 == 0)
			check_all(s, cur, "periodic");
	}
	check_all(s, cur, "at the end");
	compact_all(s);
	check_levels(s, "at the end", &levels);
	nvmefs_store_stats(s, &st);
	printf("model: %u flushes, %u leveled and %u full compactions, %u reopens, %u runs in %u "
	       "levels from 1 at the end\n",
	       flushes, compactions, fulls, reopens, st.runs, levels);
	CHECK(st.runs > levels); /* levels of several runs */
	nvmefs_store_close(s);
}

/* ---- tombstones ---- */

static uint64_t entries_at(struct nvmefs_store *s, uint32_t level, unsigned *nruns)
{
	const struct nvmefs_manifest *m = nvmefs_runs_current(nvmefs_store_area(s));
	uint64_t n = 0;

	*nruns = 0;
	for (size_t i = 0; i < m->n; i++)
		if (m->runs[i].level == level) {
			n += m->runs[i].nentries;
			(*nruns)++;
		}
	return n;
}

static void test_tombstones(void)
{
	/* One level-0 run merges; level 1 spills into level 2 at once. */
	static const struct nvmefs_store_cfg cfg = {.l0_runs = 1, .l1_blocks = 1, .fanout = 100};
	struct nvmefs_store *s = fresh_store(&cfg);
	unsigned nr;

	memset(cur, 0, sizeof(cur));
	for (int i = 0; i < 300; i += 3) {
		CHECK_ERR(put_v(s, i, 1), 0);
		cur[i] = 1;
	}
	CHECK_ERR(flush_at(s, 1), 0);
	CHECK_ERR(put_v(s, 600, 1), 0);
	cur[600] = 1;
	CHECK_ERR(flush_at(s, 2), 0);
	compact_all(s);
	CHECK(entries_at(s, 2, &nr) == 101 && nr == 1); /* all at level 2 */
	for (int i = 0; i < 150; i += 3) {
		CHECK_ERR(nvmefs_store_del(s, keys[i].k, keys[i].klen), 0);
		cur[i] = 0;
	}
	CHECK_ERR(flush_at(s, 3), 0);
	CHECK(holds(s, 0, 0) && holds(s, 150, 1)); /* hidden by a level-0 tombstone */
	CHECK_ERR(put_v(s, 603, 1), 0);
	cur[603] = 1;
	CHECK_ERR(flush_at(s, 4), 0);
	CHECK_ERR(nvmefs_store_compact(s, false), 1);  /* level 0 into 1, above level 2 */
	CHECK(entries_at(s, 1, &nr) == 51 && nr == 1); /* the 50 tombstones kept */
	check_all(s, cur, "tombstones at level 1");
	compact_all(s); /* level 1 into 2, the last: tombstones dropped */
	CHECK(entries_at(s, 1, &nr) == 0 && nr == 0);
	CHECK(entries_at(s, 2, &nr) == 52 && nr == 1);
	check_all(s, cur, "tombstones dropped");
	for (int i = 150; i < 300; i += 3) { /* everything deleted: no run at all */
		CHECK_ERR(nvmefs_store_del(s, keys[i].k, keys[i].klen), 0);
		cur[i] = 0;
	}
	CHECK_ERR(nvmefs_store_del(s, keys[600].k, keys[600].klen), 0);
	CHECK_ERR(nvmefs_store_del(s, keys[603].k, keys[603].klen), 0);
	cur[600] = cur[603] = 0;
	CHECK_ERR(flush_at(s, 5), 0);
	CHECK_ERR(nvmefs_store_compact(s, true), 1);
	CHECK(nvmefs_runs_current(nvmefs_store_area(s))->n == 0);
	check_all(s, cur, "all deleted");
	check_space(s, "all deleted");
	nvmefs_store_close(s);
}

/* ---- a flush's cost ---- */

/* Put keys [from, from + n) as INODEs with 100-byte values. */
static void put_inodes(struct nvmefs_store *s, uint64_t from, uint64_t n, uint8_t fill)
{
	uint8_t k[NVMEFS_KEY_MAX], val[100];

	memset(val, fill, sizeof(val));
	for (uint64_t i = from; i < from + n; i++)
		CHECK_ERR(nvmefs_store_put(s, k, nvmefs_key_inode(k, i), val, sizeof(val)), 0);
}

static void test_flush_cost(void)
{
	struct nvmefs_store *s = fresh_store(&small_cfg);
	struct nvmefs_store_stats small, big;

	put_inodes(s, 1, 200, 1);
	CHECK_ERR(flush_at(s, 1), 0);
	nvmefs_store_stats(s, &small);
	for (uint64_t b = 0; b < 10; b++) { /* the store grows 100 times */
		put_inodes(s, 1000 + b * 2000, 2000, 2);
		CHECK_ERR(flush_at(s, 2 + b), 0);
		compact_all(s);
	}
	put_inodes(s, 50000, 200, 3); /* a memtable like the first */
	CHECK_ERR(flush_at(s, 20), 0);
	nvmefs_store_stats(s, &big);
	printf("flush of 200 entries: %" PRIu64 " blocks written, %" PRIu64
	       " read, at 200 and at 20,400 keys\n",
	       big.flush_blocks_written, big.flush_blocks_read);
	CHECKF(small.flush_blocks_written == big.flush_blocks_written &&
		       small.flush_blocks_read == big.flush_blocks_read,
	       "%" PRIu64 "/%" PRIu64 " blocks written/read at 200 keys, %" PRIu64 "/%" PRIu64
	       " at 20,400",
	       small.flush_blocks_written, small.flush_blocks_read, big.flush_blocks_written,
	       big.flush_blocks_read);
	nvmefs_store_close(s);
}

/*
 * A volume being filled: each batch appends new keys at the end of three
 * kinds (inodes, names under a new directory, extents), flushed and
 * compacted. The compactions read and write at most 5.5 times what the
 * flushes wrote (they wrote 4.8 times with runs cut where the kind
 * changes past half their size, 6.3 when each merge into a level also
 * read and rewrote the run there holding the end of a kind and the start
 * of the next), and the runs are not a pile of short ones.
 */
static uint64_t blocks_at(struct nvmefs_store *s, uint32_t level);

static void test_ingest_cost(void)
{
	const struct nvmefs_store_cfg cfg = {
		.l0_runs = 3, .l1_blocks = 32, .fanout = 4, .run_blocks = 16};
	struct nvmefs_store *s = fresh_store(&cfg);
	struct nvmefs_store_stats st;
	uint8_t k[NVMEFS_KEY_MAX], val[100] = {0};
	uint64_t live, most;
	unsigned levels;

	if (!s)
		return;
	for (uint64_t b = 0; b < 120; b++) {
		for (uint64_t i = b * 300; i < (b + 1) * 300; i++) {
			char name[16];
			size_t nl = (size_t)snprintf(name, sizeof(name), "f%05" PRIu64, i);

			CHECK_ERR(nvmefs_store_put(s, k, nvmefs_key_inode(k, 1000 + i), val, 100),
				  0);
			CHECK_ERR(nvmefs_store_put(s, k, nvmefs_key_dirent(k, 10 + b, name, nl),
						   val, 24),
				  0);
			CHECK_ERR(nvmefs_store_put(s, k, nvmefs_key_extent(k, 1000 + i, 0, 0), val,
						   24),
				  0);
		}
		CHECK_ERR(flush_at(s, 1 + b), 0);
		compact_all(s);
	}
	check_levels(s, "ingest", &levels);
	nvmefs_store_stats(s, &st);
	live = blocks_at(s, NVMEFS_RUN_LEVELS);
	/* Runs of half cfg.run_blocks at least, but for one short run per
	 * level and the level-0 runs. */
	most = live / (cfg.run_blocks / 2) + NVMEFS_RUN_LEVELS + cfg.l0_runs;
	printf("ingest of 108,000 keys: %u levels, %u runs of %" PRIu64
	       " blocks; flushes wrote %" PRIu64 " blocks, compactions read %" PRIu64
	       " and wrote %" PRIu64 "\n",
	       levels, st.runs, live, st.flushed_blocks, st.compact_read_blocks,
	       st.compact_written_blocks);
	CHECKF(st.runs <= most,
	       "%u runs hold %" PRIu64 " blocks: short runs pile up (at most %" PRIu64 ")", st.runs,
	       live, most);
	CHECK(levels >= 3); /* the merges went deep enough to count */
	CHECKF(st.compact_read_blocks * 2 <= 11 * st.flushed_blocks &&
		       st.compact_written_blocks * 2 <= 11 * st.flushed_blocks,
	       "compactions read %" PRIu64 " and wrote %" PRIu64 " blocks for %" PRIu64 " flushed",
	       st.compact_read_blocks, st.compact_written_blocks, st.flushed_blocks);
	nvmefs_store_close(s);
}

/* ---- a nearly full area ---- */

/* Blocks of the manifest's runs at level (all levels: NVMEFS_RUN_LEVELS). */
static uint64_t blocks_at(struct nvmefs_store *s, uint32_t level)
{
	const struct nvmefs_manifest *m = nvmefs_runs_current(nvmefs_store_area(s));
	uint64_t n = 0;

	for (size_t i = 0; i < m->n; i++)
		if (level == NVMEFS_RUN_LEVELS || m->runs[i].level == level)
			n += nvmefs_run_blocks(&m->runs[i]);
	return n;
}

/* Look INODE keys [from, from + n) up (every 97th): each value is fill,
 * and no lookup reads more run blocks than one per level-0 run and one
 * per level from 1 (the store's read counter). */
static void check_inodes(struct nvmefs_store *s, uint64_t from, uint64_t n, uint8_t fill)
{
	struct nvmefs_store_stats a, b;
	unsigned levels, l0, worst = 0;

	check_levels(s, "full area", &levels);
	entries_at(s, 0, &l0);
	for (uint64_t i = from; i < from + n; i += 97) {
		uint8_t k[NVMEFS_KEY_MAX], got[128] = {0};
		size_t len = 0;

		nvmefs_store_stats(s, &a);
		CHECK_ERR(nvmefs_store_get(s, k, nvmefs_key_inode(k, i), got, sizeof(got), &len),
			  0);
		nvmefs_store_stats(s, &b);
		CHECK(len == 100 && got[0] == fill && got[99] == fill);
		if (b.get_blocks_read - a.get_blocks_read > worst)
			worst = (unsigned)(b.get_blocks_read - a.get_blocks_read);
	}
	CHECKF(worst >= 1 && worst <= l0 + levels,
	       "a lookup read %u run blocks: %u level-0 runs, %u levels", worst, l0, levels);
}

/*
 * Fill the run area to 80% with live data (sequential INODE keys, each
 * flush compacted), then rewrite a range in the middle and compact: with
 * one run per level the deepest level alone was longer than the free
 * space, so its rewrite was -ENOSPC; with key-range runs each compaction
 * needs only its inputs' room.
 */
static void test_nearly_full(void)
{
	static const struct nvmefs_store_cfg cfg = {
		.l0_runs = 2, .l1_blocks = 32, .fanout = 4, .run_blocks = 16};
	struct nvmefs_store *s = fresh_store(&cfg);
	const uint64_t space = geom.blocks - 2ull * geom.slot_blocks;
	struct nvmefs_store_stats st;
	uint64_t nkeys = 0, deepest = 0, replay = 1;
	uint32_t level = 1;

	while (s && blocks_at(s, NVMEFS_RUN_LEVELS) * 10 < space * 8 && nkeys < 200000) {
		put_inodes(s, 1 + nkeys, 2000, 6);
		nkeys += 2000;
		CHECK_ERR(flush_at(s, replay++), 0);
		compact_all(s);
	}
	if (!s)
		return;
	for (uint32_t k = 1; k < NVMEFS_RUN_LEVELS; k++)
		if (blocks_at(s, k) > deepest) {
			deepest = blocks_at(s, k);
			level = k;
		}
	check_space(s, "80% full");
	printf("nearly full: %" PRIu64 " keys, %" PRIu64 " live of %" PRIu64
	       " blocks, level %u %" PRIu64 ", %" PRIu64 " free\n",
	       nkeys, blocks_at(s, NVMEFS_RUN_LEVELS), space, level, deepest,
	       nvmefs_runs_free_blocks(nvmefs_store_area(s)));
	CHECK(blocks_at(s, NVMEFS_RUN_LEVELS) * 10 >= space * 8);
	CHECKF(deepest > nvmefs_runs_free_blocks(nvmefs_store_area(s)),
	       "level %u: %" PRIu64 " blocks, not more than the free space", level, deepest);
	check_inodes(s, 1, nkeys, 6);
	for (int round = 0; round < 3; round++) { /* rewrites: compactions down to the deepest */
		put_inodes(s, nkeys / 3 + (uint64_t)round * 2000, 2000, 7);
		CHECK_ERR(flush_at(s, replay++), 0);
		compact_all(s);
	}
	nvmefs_store_stats(s, &st);
	CHECK(st.compact_runs_written >= 1);
	check_space(s, "80% full, rewritten");
	check_inodes(s, nkeys / 3, 6000, 7);
	check_inodes(s, 1, nkeys / 3, 6);
	nvmefs_store_close(s);
}

/* ---- power loss ---- */

static uint32_t base[NK], next[NK];

/* The changes the child makes after the base state: deterministic. */
static void change(struct nvmefs_store *s, uint32_t *model)
{
	uint64_t x = 12345;

	for (int n = 0; n < 300; n++) {
		int i = (int)(rnd(&x) % NK);

		if (n % 4 == 3) {
			if (s)
				nvmefs_store_del(s, keys[i].k, keys[i].klen);
			model[i] = 0;
		} else {
			if (s)
				put_v(s, i, 1000 + (uint32_t)n);
			model[i] = 1000 + (uint32_t)n;
		}
	}
}

static void pl_report(const struct nvmefs_powerloss_report *r)
{
	(void)r;
	_exit(0);
}

/* Outputs of a few runs each: cuts between and inside them, not hundreds. */
static const struct nvmefs_store_cfg pl_cfg = {
	.l0_runs = 3, .l1_blocks = 4, .fanout = 3, .run_blocks = 6};

/* What the child does under the cut. */
enum pl_mode { PL_FLUSH, PL_FULL, PL_STEP, PL_MODES };

static const char *const pl_name[PL_MODES] = {"flush", "full compaction",
					      "level-0 compaction step"};

/* The child: a flush of the changes, a full compaction or one leveled
 * step, that the cut ends (exit 0) or that ends without one (exit 10). */
static void pl_child(uint32_t cut, uint64_t seed, enum pl_mode mode)
{
	bool compact = mode != PL_FLUSH;

	struct nvmefs_powerloss o = {.seed = seed, .keep_pct = 40, .tear_pct = 40};
	struct nvmefs_store *s;

	if (nvmefs_store_open(&s, dev(), &geom, uuid, &pl_cfg))
		_exit(2);
	if (!compact)
		change(s, next);
	if (nvmefs_powerloss_record(set) || nvmefs_powerloss_after(cut, &o, pl_report))
		_exit(2);
	if (compact ? nvmefs_store_compact(s, mode == PL_FULL) != 1 : flush_at(s, 2) != 0)
		_exit(4);
	_exit(10);
}

/* One cut: 1 when the child ran to its end. The store after it is the
 * base or (a flush that committed) the changed one, and takes writes. */
static int pl_once(uint32_t cut, uint64_t seed, enum pl_mode mode)
{
	bool compact = mode != PL_FLUSH;
	struct nvmefs_store *s;
	uint64_t replay;
	pid_t pid;
	int st;

	fflush(stdout); /* the child's exit must not print it again */
	pid = fork();
	if (pid == 0)
		pl_child(cut, seed, mode);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 10),
	       "cut %u: child status %#x", cut, st);
	CHECK_ERR(nvmefs_store_open(&s, dev(), &geom, uuid, &pl_cfg), 0);
	if (!s)
		return 1;
	replay = replay_of(s);
	CHECKF(replay == 1 || (replay == 2 && !compact), "cut %u: replay %" PRIu64, cut, replay);
	if (WEXITSTATUS(st) == 10)
		CHECK(replay == (compact ? 1u : 2u));
	if (WEXITSTATUS(st) == 10 && compact) { /* the cuts were in a multi-run output */
		unsigned levels, l0;

		check_levels(s, pl_name[mode], &levels);
		CHECKF(live_runs(s) > levels && !entries_at(s, 0, &l0) &&
			       (mode == PL_FULL ? levels == 1 : levels >= 2),
		       "%s: %u runs in %u levels", pl_name[mode], live_runs(s), levels);
	}
	check_all(s, replay == 2 ? next : base, pl_name[mode]);
	check_space(s, "after the cut");
	CHECK_ERR(put_v(s, 5, 77), 0); /* and it goes on */
	CHECK_ERR(flush_at(s, 3), 0);
	CHECK_ERR(nvmefs_store_compact(s, true), 1);
	CHECK(holds(s, 5, 77));
	check_space(s, "after the cut and a compaction");
	nvmefs_store_close(s);
	return WEXITSTATUS(st) == 10;
}

static void test_powerloss(uint64_t seed)
{
	struct nvmefs_store *s = fresh_store(&pl_cfg);
	uint64_t x = seed | 1;

	memset(base, 0, sizeof(base));
	for (int round = 0; round < 8; round++) { /* runs at levels 0 to 3, a level-0 step due */
		for (int n = 0; n < 400; n++) {
			int i = (int)(rnd(&x) % NK);

			CHECK_ERR(put_v(s, i, (uint32_t)(round * 1000 + n + 1)), 0);
			base[i] = (uint32_t)(round * 1000 + n + 1);
		}
		CHECK_ERR(flush_at(s, 1), 0);
		if (round == 3)
			compact_all(s);
	}
	nvmefs_store_close(s);
	memcpy(next, base, sizeof(next));
	change(NULL, next);
	CHECK(test_img_copy(img, base_img) == 0);
	for (int mode = 0; mode < PL_MODES; mode++) {
		uint32_t cut;

		for (cut = 0; cut < 200; cut++) {
			int done = pl_once(cut, seed + cut, (enum pl_mode)mode);

			CHECK(test_img_copy(base_img, img) == 0);
			if (done)
				break;
		}
		CHECKF(cut > 2 && cut < 200, "%u writes", cut);
		printf("power loss: cut at each of the %u writes of a %s\n", cut, pl_name[mode]);
	}
}

/* ---- a full area ---- */

static void test_enospc(void)
{
	static const struct nvmefs_runs_geom tiny = {
		.off = 64 * 1024, .blocks = 16 + 24, .slot_blocks = 8};
	struct nvmefs_store *s = NULL;
	uint64_t from = 1;
	int ret = 0, flushes = 0;

	CHECK_ERR(nvmefs_runs_format(dev(), &tiny, uuid), 0);
	CHECK_ERR(nvmefs_store_open(&s, dev(), &tiny, uuid, &small_cfg), 0);
	if (!s)
		return;
	while (flushes < 50) {
		put_inodes(s, from, 100, 4);
		from += 100;
		ret = flush_at(s, from);
		if (ret)
			break;
		flushes++;
	}
	CHECK_ERR(ret, -ENOSPC);
	ret = nvmefs_store_compact(s, true);
	CHECKF(ret == 1 || ret == -ENOSPC, "compaction: %d", ret);
	for (uint64_t i = 1; i < from; i += 7) { /* all there: runs and memtables */
		uint8_t k[NVMEFS_KEY_MAX], val[128];
		size_t n;

		CHECK_ERR(nvmefs_store_get(s, k, nvmefs_key_inode(k, i), val, sizeof(val), &n), 0);
	}
	nvmefs_store_close(s);
	CHECK_ERR(nvmefs_store_open(&s, dev(), &tiny, uuid, &small_cfg), 0);
	for (uint64_t i = 1; s && i < from; i += 7) { /* as of the last flush */
		uint8_t k[NVMEFS_KEY_MAX], val[128];
		size_t n;

		CHECK_ERR(nvmefs_store_get(s, k, nvmefs_key_inode(k, i), val, sizeof(val), &n),
			  i < 1 + 100ull * (unsigned)flushes ? 0 : -ENOENT);
	}
	printf("full area: %d flushes of 100 entries, then -ENOSPC\n", flushes);
	nvmefs_store_close(s);
}

/* ---- a failed manifest write ---- */

/* Key i of put_inodes (fill byte) is in s? */
static bool has_inode(struct nvmefs_store *s, uint64_t i, uint8_t fill)
{
	uint8_t k[NVMEFS_KEY_MAX], val[128];
	size_t n = 0;

	return !nvmefs_store_get(s, k, nvmefs_key_inode(k, i), val, sizeof(val), &n) && n == 100 &&
	       val[0] == fill && val[99] == fill;
}

static void test_commit_fail(void)
{
	/* A flush's flushes: the run's end, before the manifest, after it. */
	struct nvmefs_fault f = {
		.kind = NVMEFS_FAULT_EIO, .ops = NVMEFS_FAULT_FLUSHES, .after = 2, .count = 1};
	struct nvmefs_fault none = {.kind = NVMEFS_FAULT_NONE};
	struct nvmefs_store *s = fresh_store(&small_cfg);
	unsigned bad = 0;

	if (!s)
		return;
	put_inodes(s, 1, 100, 1);
	CHECK_ERR(flush_at(s, 1), 0);
	put_inodes(s, 101, 100, 2);
	CHECK_ERR(flush_at(s, 2), 0);
	put_inodes(s, 201, 100, 3);
	CHECK_ERR(nvmefs_dev_inject(dev(), &f), 0);
	CHECK_ERR(flush_at(s, 3), -EIO);
	CHECK_ERR(nvmefs_dev_inject(dev(), &none), 0);
	CHECK(replay_of(s) == 2);
	CHECK_ERR(nvmefs_store_freeze(s, &(struct nvmefs_mark){.replay = 4}), -EBUSY);
	CHECK_ERR(flush_at(s, 4), -EIO); /* the frozen memtable first: refused */
	CHECK_ERR(nvmefs_store_compact(s, true), -EIO);
	CHECK_ERR(nvmefs_store_compact(s, false), 0); /* nothing due: nothing tried */
	put_inodes(s, 301, 10, 4);		      /* the memtable takes puts still */
	for (uint64_t i = 1; i <= 310; i++)
		bad += !has_inode(s, i, (uint8_t)(i <= 300 ? (i - 1) / 100 + 1 : 4));
	CHECKF(bad == 0, "%u keys lost after the failed commit", bad);
	nvmefs_store_close(s);
	CHECK_ERR(nvmefs_store_open(&s, dev(), &geom, uuid, &small_cfg), 0);
	if (!s)
		return;
	CHECK(replay_of(s) == 3); /* the manifest that failed was durable */
	for (uint64_t i = 1; i <= 310; i++)
		bad += has_inode(s, i, (uint8_t)(i <= 300 ? (i - 1) / 100 + 1 : 4)) != (i <= 300);
	CHECKF(bad == 0, "%u keys differ after the reopen", bad);
	check_space(s, "reopened after a failed commit");
	put_inodes(s, 301, 10, 5);
	CHECK_ERR(flush_at(s, 5), 0); /* usable again */
	CHECK_ERR(nvmefs_store_compact(s, true), 1);
	check_space(s, "compacted after a failed commit");
	nvmefs_store_close(s);
}

/* ---- freezing apart from the flush ---- */

/* The newest run of the manifest (the last flush's). */
static const struct nvmefs_run_meta *newest_run(struct nvmefs_store *s)
{
	const struct nvmefs_manifest *m = nvmefs_runs_current(nvmefs_store_area(s));
	const struct nvmefs_run_meta *r = NULL;

	for (size_t i = 0; i < m->n; i++)
		if (!r || m->runs[i].id > r->id)
			r = &m->runs[i];
	return r;
}

/* INODE keys 1..10 of fill 3, 11..100 of 1, 101..150 of 2: none lost. */
static void check_frozen(struct nvmefs_store *s, const char *what)
{
	unsigned bad = 0;

	for (uint64_t i = 1; i <= 150; i++)
		bad += !has_inode(s, i, (uint8_t)(i <= 10 ? 3 : i <= 100 ? 1 : 2));
	CHECKF(bad == 0, "%s: %u keys differ", what, bad);
}

/*
 * The volume's commit freezes under its lock at a journal point and
 * writes later: the run written holds what was put before the freeze and
 * carries the freeze's mark; puts after it stay readable (over the frozen
 * values too) and go in the next flush; a second freeze before the write
 * is refused, and an empty freeze commits its mark alone.
 */
static void test_freeze(void)
{
	struct nvmefs_mark m1 = mark_at(10), m2 = mark_at(20), m3 = mark_at(30);
	struct nvmefs_store *s = fresh_store(&small_cfg);
	const struct nvmefs_run_meta *r;
	struct nvmefs_store_stats st;
	uint8_t k[NVMEFS_KEY_MAX];
	uint64_t seq;

	if (!s)
		return;
	put_inodes(s, 1, 100, 1);
	CHECK_ERR(nvmefs_store_freeze(s, &m1), 0);
	CHECK_ERR(nvmefs_store_freeze(s, &m2), -EBUSY); /* the first is unwritten */
	put_inodes(s, 101, 50, 2);			/* after the freeze */
	put_inodes(s, 1, 10, 3);			/* over frozen keys */
	nvmefs_store_stats(s, &st);
	CHECK(st.frozen_entries == 100 && st.mem_entries == 60 && st.frozen_bytes > 0);
	check_frozen(s, "frozen");
	CHECK_ERR(nvmefs_store_flush(s, NULL), 0); /* the frozen one only */
	r = newest_run(s);
	CHECK(r && r->nentries == 100 && r->level == 0);
	CHECK(r && !nvmefs_key_cmp(r->max, r->max_len, k, nvmefs_key_inode(k, 100)));
	CHECK(replay_of(s) == 10);
	nvmefs_store_stats(s, &st);
	CHECK(st.flushes == 1 && st.frozen_entries == 0 && st.frozen_bytes == 0 &&
	      st.mem_entries == 60);
	check_frozen(s, "after the frozen one's flush");
	seq = nvmefs_runs_current(nvmefs_store_area(s))->seq;
	CHECK_ERR(nvmefs_store_flush(s, NULL), 0); /* nothing frozen: nothing written */
	CHECK(nvmefs_runs_current(nvmefs_store_area(s))->seq == seq);
	CHECK_ERR(nvmefs_store_flush(s, &m2), 0); /* the later puts: the next run */
	r = newest_run(s);
	CHECK(r && r->nentries == 60);
	CHECK(replay_of(s) == 20);
	CHECK_ERR(nvmefs_store_freeze(s, &m3), 0); /* empty: the mark alone */
	CHECK_ERR(nvmefs_store_flush(s, NULL), 0);
	CHECK(replay_of(s) == 30 && live_runs(s) == 2);
	nvmefs_store_close(s);
	CHECK_ERR(nvmefs_store_open(&s, dev(), &geom, uuid, &small_cfg), 0);
	if (!s)
		return;
	CHECK(replay_of(s) == 30);
	check_frozen(s, "reopened");
	nvmefs_store_close(s);
}

/* ---- a walk copies no memtable ---- */

/* Walk every key of s: INODE i of fill (i <= split ? lo_fill : hi_fill)
 * for i in [1, n], nothing else; a flush of the frozen memtable halfway
 * (flush_mid: the walk still reads it). */
static void walk_inodes(struct nvmefs_store *s, uint64_t n, uint64_t split, uint8_t lo_fill,
			uint8_t hi_fill, bool flush_mid)
{
	struct nvmefs_store_iter *it;
	struct nvmefs_run_ent e;
	uint64_t i = 0;
	unsigned bad = 0;
	int ret;

	CHECK_ERR(nvmefs_store_walk(&it, s, NULL, 0, NULL, 0), 0);
	if (!it)
		return;
	while ((ret = nvmefs_store_iter_next(it, &e)) == 1) {
		uint8_t k[NVMEFS_KEY_MAX], fill = ++i <= split ? lo_fill : hi_fill;

		bad += nvmefs_key_cmp(e.key, e.klen, k, nvmefs_key_inode(k, i)) || e.vlen != 100 ||
		       e.val[0] != fill || e.val[99] != fill;
		if (flush_mid && i == n / 2)
			CHECK_ERR(nvmefs_store_flush(s, NULL), 0);
	}
	CHECK_ERR(ret, 0);
	CHECKF(i == n && bad == 0, "walked %" PRIu64 " of %" PRIu64 " keys, %u wrong", i, n, bad);
	nvmefs_store_iter_close(it);
}

/*
 * A walk reads the frozen memtable and the runs in place: it sees the
 * store as of the freeze (not the puts after it), copies nothing (the
 * store's copy counter, which an iterator over the same range moves by
 * the memtables' size), and goes on reading the frozen memtable after a
 * flush wrote and dropped it (ASan would see a use after free).
 */
static void test_walk(void)
{
	struct nvmefs_store *s = fresh_store(&small_cfg);
	struct nvmefs_store_stats a, b;
	struct nvmefs_store_iter *it;
	struct nvmefs_mark m2 = mark_at(2);

	if (!s)
		return;
	put_inodes(s, 1, 5000, 1);
	CHECK_ERR(flush_at(s, 1), 0);
	put_inodes(s, 2501, 5000, 2); /* 2501..7500 over the run's, frozen */
	CHECK_ERR(nvmefs_store_freeze(s, &m2), 0);
	put_inodes(s, 1, 100, 3); /* after the freeze: not walked */
	put_inodes(s, 20001, 10, 3);
	nvmefs_store_stats(s, &a);
	CHECK_ERR(nvmefs_store_iter_open(&it, s, NULL, 0, NULL, 0), 0);
	nvmefs_store_iter_close(it);
	nvmefs_store_stats(s, &b);
	CHECKF(b.iter_copied_bytes - a.iter_copied_bytes >= 5110 * 100ull,
	       "an iterator over everything copied %" PRIu64 " bytes",
	       b.iter_copied_bytes - a.iter_copied_bytes);
	walk_inodes(s, 7500, 2500, 1, 2, true);
	nvmefs_store_stats(s, &a);
	CHECKF(a.iter_copied_bytes == b.iter_copied_bytes && a.mem_bytes == b.mem_bytes &&
		       a.frozen_entries == 0 && a.flushes == 2,
	       "a walk copied %" PRIu64 " bytes", a.iter_copied_bytes - b.iter_copied_bytes);
	walk_inodes(s, 7500, 2500, 1, 2, false); /* the runs alone now: the same */
	nvmefs_store_close(s);
}

/* ---- the run-block cache ---- */

/* Look INODE key i (of put_inodes, fill) up: the run blocks it read. */
static uint64_t get_reads(struct nvmefs_store *s, uint64_t i, uint8_t fill)
{
	struct nvmefs_store_stats a, b;

	nvmefs_store_stats(s, &a);
	CHECKF(has_inode(s, i, fill), "inode key %" PRIu64, i);
	nvmefs_store_stats(s, &b);
	return b.get_blocks_read - a.get_blocks_read;
}

/*
 * Lookups read run blocks through the cache: a second lookup of a key
 * reads nothing; the cache never holds more than its limit, evicting the
 * least recently used blocks under many keys (the first key's block is
 * read again after them); with the default limit (8 MiB) a second pass
 * over every key reads nothing.
 */
static void test_cache(void)
{
	struct nvmefs_store_cfg cfg = small_cfg;
	struct nvmefs_store_stats st, st2;
	struct nvmefs_store *s;
	uint64_t reads = 0, over = 0;

	cfg.cache_bytes = 16 * NVMEFS_BLOCK;
	s = fresh_store(&cfg);
	if (!s)
		return;
	put_inodes(s, 1, 5000, 1); /* about 140 run blocks of 4 KiB */
	CHECK_ERR(flush_at(s, 1), 0);
	CHECK(get_reads(s, 1, 1) == 1);
	nvmefs_store_stats(s, &st);
	CHECK(get_reads(s, 1, 1) == 0); /* cached */
	CHECK(get_reads(s, 2, 1) == 0); /* the same block */
	nvmefs_store_stats(s, &st2);
	CHECK(st2.cache_hits == st.cache_hits + 2 && st2.cache_misses == st.cache_misses);
	for (uint64_t i = 1; i <= 5000; i += 7) {
		reads += get_reads(s, i, 1);
		nvmefs_store_stats(s, &st);
		over += st.cache_bytes > cfg.cache_bytes;
	}
	CHECKF(over == 0 && st.cache_bytes > 0, "%" PRIu64 " lookups left the cache over its limit",
	       over);
	CHECKF(reads > 100, "%" PRIu64 " blocks read for 715 keys over 140 blocks", reads);
	CHECK(get_reads(s, 1, 1) == 1); /* evicted by the others */
	nvmefs_store_close(s);

	s = fresh_store(&small_cfg); /* the default limit: 8 MiB */
	if (!s)
		return;
	put_inodes(s, 1, 5000, 2);
	CHECK_ERR(flush_at(s, 1), 0);
	put_inodes(s, 2501, 5000, 3); /* two runs: a lookup may read both */
	CHECK_ERR(flush_at(s, 2), 0);
	reads = 0;
	for (uint64_t i = 1; i <= 7500; i++)
		reads += get_reads(s, i, i <= 2500 ? 2 : 3);
	nvmefs_store_stats(s, &st);
	CHECKF(reads > 200 && st.cache_bytes == reads * NVMEFS_BLOCK,
	       "%" PRIu64 " reads, %zu bytes cached", reads, st.cache_bytes);
	reads = 0;
	for (uint64_t i = 1; i <= 7500; i++)
		reads += get_reads(s, i, i <= 2500 ? 2 : 3);
	CHECKF(reads == 0, "a second pass read %" PRIu64 " blocks", reads);
	printf("run-block cache: %zu bytes hold two runs of 7,500 keys: no read the second time\n",
	       st.cache_bytes);
	nvmefs_store_close(s);
}

/* ---- threads ---- */

struct worker {
	struct nvmefs_store *s;
	unsigned bad;
};

/* Puts and reads back INODE keys 100000.. (the main thread's are below). */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint8_t k[NVMEFS_KEY_MAX], val[100], got[128];

	for (uint64_t i = 0; i < 3000; i++) {
		struct nvmefs_store_iter *it;
		struct nvmefs_run_ent e;
		size_t kl = nvmefs_key_inode(k, 100000 + i), n;

		memset(val, (int)(i & 0xff), sizeof(val));
		w->bad += nvmefs_store_put(w->s, k, kl, val, sizeof(val)) != 0;
		kl = nvmefs_key_inode(k, 100000 + i / 2);
		w->bad += nvmefs_store_get(w->s, k, kl, got, sizeof(got), &n) != 0 ||
			  got[0] != (uint8_t)((i / 2) & 0xff);
		if (i % 500 == 0 && !nvmefs_store_iter_prefix(&it, w->s, k, 1)) {
			while (nvmefs_store_iter_next(it, &e) == 1)
				;
			nvmefs_store_iter_close(it);
		}
		if (i % 500 == 250 && !nvmefs_store_walk(&it, w->s, NULL, 0, NULL, 0)) {
			while (nvmefs_store_iter_next(it, &e) == 1)
				;
			nvmefs_store_iter_close(it);
		}
	}
	return NULL;
}

static void test_threads(void)
{
	struct worker w = {.s = fresh_store(&small_cfg)};
	pthread_t t;

	if (!w.s)
		return;
	CHECK(pthread_create(&t, NULL, worker_main, &w) == 0);
	for (uint64_t b = 0; b < 20; b++) {
		put_inodes(w.s, 1 + b * 100, 100, 5);
		CHECK_ERR(flush_at(w.s, b + 1), 0);
		compact_all(w.s);
	}
	CHECK(pthread_join(t, NULL) == 0);
	CHECKF(w.bad == 0, "%u failed puts or gets in the worker", w.bad);
	for (uint64_t i = 0; i < 3000; i += 37) {
		uint8_t k[NVMEFS_KEY_MAX], got[128];
		size_t n;

		CHECK_ERR(nvmefs_store_get(w.s, k, nvmefs_key_inode(k, 100000 + i), got,
					   sizeof(got), &n),
			  0);
	}
	nvmefs_store_close(w.s);
}

int main(void)
{
	uint64_t seed = test_seed();

	printf("seed %" PRIu64 " (NVMEFS_TEST_SEED)\n", seed);
	test_img_setup("test_store", IMG_SIZE);
	make_keys();
	test_model(seed);
	test_tombstones();
	test_flush_cost();
	test_ingest_cost();
	test_nearly_full();
	test_powerloss(seed);
	test_enospc();
	test_commit_fail();
	test_freeze();
	test_walk();
	test_cache();
	test_threads();
	test_img_teardown();
	return test_result();
}

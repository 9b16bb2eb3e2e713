// SPDX-License-Identifier: MIT
/*
 * Format v2's LSM store over a run area (store.h): memtables, flush, the
 * leveled compaction, lookups and range iterators.
 *
 * The live runs are a "view": an array of open runs (index and filter in
 * memory, nvmefs_runr) newest first, counted by references. A flush or a
 * compaction commits a manifest and then installs a new view; readers
 * (lookups, iterators) take a reference to the view under the store's
 * lock and read its runs without it. An open run holds its extent
 * (nvmefs_runs_hold) until the last view naming it is gone, so a retired
 * run stays readable by whoever still reads it.
 *
 * Locks, in order: flush_lock or compact_lock (one flush and one
 * compaction at a time), commit_lock (one manifest commit and view
 * install at a time), lock (memtables, the view, every reference count,
 * the counters; never held across I/O), then the area's own lock.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "memtable_i.h"
#include "nvmefs/devset.h"
#include "nvmefs/util.h"
#include "runfmt_i.h"
#include "store_i.h"
#include "util_i.h"

#define L0_RUNS_DEFAULT	    4u
#define L1_BLOCKS_DEFAULT   2560u
#define FANOUT_DEFAULT	    10u
#define RUN_BLOCKS_DEFAULT  512u /* 2 MiB */
#define CACHE_BYTES_DEFAULT ((size_t)8 << 20)

/* An open run, shared by the views that name it. */
struct srun {
	struct nvmefs_runr r;
	unsigned refs; /* protected by s->lock */
};

/* The live runs, newest first: level 0 by id descending, then levels 1..,
 * each by smallest key (their key ranges are disjoint). */
struct view {
	unsigned refs; /* protected by s->lock */
	size_t n;
	size_t lvl[NVMEFS_RUN_LEVELS + 1]; /* level k is run[lvl[k]..lvl[k + 1]) */
	struct srun *run[];
};

struct bcache;

struct nvmefs_store {
	struct nvmefs_runs *a; /* NULL: a memory-only store */
	struct nvmefs_store_cfg cfg;
	pthread_mutex_t flush_lock, compact_lock, commit_lock;
	pthread_mutex_t lock;
	struct nvmefs_memtable *mem; /* protected by lock */
	struct nvmefs_memtable *imm; /* frozen, being flushed; set and cleared under lock */
	struct nvmefs_mark imm_mark; /* the mark imm was frozen with */
	struct view *view;	     /* protected by lock */
	struct nvmefs_mark mark;     /* memory only (a NULL): the last flush's; protected by lock */
	struct bcache *cache;	     /* run blocks lookups read (its own lock); NULL: none */
	struct nvmefs_store_stats st; /* protected by lock */
	uint64_t seed;		      /* memtables' skip-list seeds; protected by lock */
	/* Each level's compaction cursor: the largest key of the run it last
	 * pushed down (length 0: none); protected by compact_lock. */
	uint8_t cursor[NVMEFS_RUN_LEVELS][NVMEFS_KEY_MAX];
	uint16_t cursor_len[NVMEFS_RUN_LEVELS];
};

/* ---- runs and views (lock held where said) ---- */

static int srun_open(struct nvmefs_store *s, const struct nvmefs_run_meta *m, struct srun **out)
{
	struct srun *sr = calloc(1, sizeof(*sr));
	int ret;

	*out = NULL;
	if (!sr)
		return -ENOMEM;
	ret = nvmefs_runr_open(&sr->r, s->a, m);
	if (ret)
		goto err_free;
	ret = nvmefs_runs_hold(s->a, m);
	if (ret)
		goto err_close;
	*out = sr;
	return 0;
err_close:
	nvmefs_runr_close(&sr->r);
err_free:
	free(sr);
	return ret;
}

/* Close a run no view names (refs 0): its extent is no longer held. */
static void srun_close(struct nvmefs_store *s, struct srun *sr)
{
	uint64_t id = sr->r.meta.id;

	nvmefs_runr_close(&sr->r);
	nvmefs_runs_release(s->a, id);
	free(sr);
}

/* Drop a reference to v (lock held). */
static void view_put(struct nvmefs_store *s, struct view *v)
{
	if (!v || --v->refs)
		return;
	for (size_t i = 0; i < v->n; i++)
		if (!--v->run[i]->refs)
			srun_close(s, v->run[i]);
	free(v);
}

static struct view *view_alloc(size_t n)
{
	struct view *v = calloc(1, sizeof(*v) + n * sizeof(v->run[0]));

	if (v)
		v->refs = 1;
	return v;
}

static int newest_first(const void *x, const void *y)
{
	const struct nvmefs_run_meta *a = &(*(struct srun *const *)x)->r.meta;
	const struct nvmefs_run_meta *b = &(*(struct srun *const *)y)->r.meta;

	if (a->level != b->level)
		return a->level < b->level ? -1 : 1;
	if (a->level)
		return nvmefs_key_cmp(a->min, a->min_len, b->min, b->min_len);
	return a->id > b->id ? -1 : a->id < b->id;
}

/* Give up run id, written by nvmefs_runw_end and not committed (its open
 * run, if any, closed first: its hold is the reader's, not dropped here). */
static void drop_written(struct nvmefs_store *s, uint64_t id)
{
	int ret = nvmefs_runs_drop(s->a, id);

	assert(!ret); /* -EBUSY is for a run still being written */
	(void)ret;
}

/* Sort v newest first and note where each level starts. false when two
 * runs of a level >= 1 overlap: a lookup reads one run per level. */
static bool view_sort(struct view *v)
{
	size_t i = 0;

	qsort(v->run, v->n, sizeof(v->run[0]), newest_first);
	for (uint32_t k = 0; k <= NVMEFS_RUN_LEVELS; k++) {
		while (i < v->n && v->run[i]->r.meta.level < k)
			i++;
		v->lvl[k] = i;
	}
	for (i = 1; i < v->n; i++) {
		const struct nvmefs_run_meta *a = &v->run[i - 1]->r.meta, *b = &v->run[i]->r.meta;

		if (b->level && a->level == b->level &&
		    nvmefs_key_cmp(a->max, a->max_len, b->min, b->min_len) >= 0)
			return false;
	}
	return true;
}

/* An open run of id among run[0..n), or NULL. */
static struct srun *find_srun(struct srun *const *run, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (run[i]->r.meta.id == id)
			return run[i];
	return NULL;
}

/* Fill v (allocated for n runs) with the runs[0..n) of a committed
 * manifest: the current view's open runs, or fresh[0..nfresh) (lock held). */
static void view_fill(struct nvmefs_store *s, struct view *v, const struct nvmefs_run_meta *runs,
		      size_t n, struct srun *const *fresh, size_t nfresh)
{
	bool disjoint;

	for (size_t i = 0; i < n; i++) {
		struct srun *sr = find_srun(fresh, nfresh, runs[i].id);

		if (!sr)
			sr = find_srun(s->view->run, s->view->n, runs[i].id);
		assert(sr); /* every committed run is open */
		sr->refs++;
		v->run[v->n++] = sr;
	}
	disjoint = view_sort(v);
	assert(disjoint); /* what pick() chose to replace covers the output */
	(void)disjoint;
}

static void mem_free(struct nvmefs_memtable *m);

/* Take the frozen memtable away (lock held): it, for the caller to free,
 * or NULL when a walk still reads it (the walk's close frees it). */
static struct nvmefs_memtable *imm_drop(struct nvmefs_store *s)
{
	struct nvmefs_memtable *imm = s->imm;

	s->imm = NULL;
	return imm && !--imm->refs ? imm : NULL;
}

/*
 * Commit the current manifest less the runs drop[0..ndrop) plus
 * fresh[0..nfresh), with *mark, and install the view of it (commit_lock
 * held). With clear_imm the frozen memtable is gone in the same step (its
 * run is fresh). 0 or -errno (nothing changed).
 */
static int commit_view(struct nvmefs_store *s, struct srun *const *drop, size_t ndrop,
		       struct srun *const *fresh, size_t nfresh, const struct nvmefs_mark *mark,
		       bool clear_imm)
{
	const struct nvmefs_manifest *cur = nvmefs_runs_current(s->a);
	struct nvmefs_memtable *imm = NULL;
	struct nvmefs_run_meta *list;
	struct view *v, *old;
	size_t n = 0;
	int ret = -ENOMEM;

	list = malloc((cur->n + nfresh) * sizeof(*list));
	v = view_alloc(cur->n + nfresh);
	if (!list || !v)
		goto out;
	for (size_t i = 0; i < cur->n; i++) {
		bool gone = false;

		for (size_t j = 0; j < ndrop && !gone; j++)
			gone = drop[j]->r.meta.id == cur->runs[i].id;
		if (!gone)
			list[n++] = cur->runs[i];
	}
	for (size_t i = 0; i < nfresh; i++)
		list[n++] = fresh[i]->r.meta;
	ret = nvmefs_runs_commit(s->a, list, n, mark);
	if (ret)
		goto out;
	pthread_mutex_lock(&s->lock);
	view_fill(s, v, list, n, fresh, nfresh);
	old = s->view;
	s->view = v;
	v = NULL;
	view_put(s, old);
	if (clear_imm)
		imm = imm_drop(s);
	s->st.runs = (unsigned)n;
	pthread_mutex_unlock(&s->lock);
	mem_free(imm);
out:
	free(list);
	free(v);
	return ret;
}

/* ---- the run-block cache ---- */

/*
 * Run blocks lookups read, kept by (run id, block index): run blocks are
 * immutable and run ids never reused (the manifest keeps the next one),
 * so an entry is never stale, only unused (a retired run's blocks age out
 * of the LRU list). The lock is a leaf, never held across I/O: a miss
 * reads outside it and inserts after (a block two threads missed at once
 * is read twice, inserted once). A reader holds a reference to the block
 * it searches; eviction skips held blocks, so the limit holds up to the
 * blocks in use at that moment (one per lookup in flight).
 */
struct cblk {
	uint64_t run;
	uint32_t idx;
	unsigned refs; /* lookups reading buf; protected by the cache's lock */
	size_t bytes;  /* buf's length */
	struct nvmefs_run_hdr h;
	uint8_t *buf;
	struct cblk *hnext;	  /* hash chain, or a list of blocks to free */
	struct cblk *prev, *next; /* LRU list, most recent first */
};

struct bcache {
	pthread_mutex_t lock; /* protects what follows */
	size_t limit, bytes;
	struct cblk **hash; /* nbuckets chains, a power of 2 */
	size_t nbuckets;
	struct cblk *head, *tail;
	uint64_t hits, misses;
};

static struct cblk **cache_slot(struct bcache *c, uint64_t run, uint32_t idx)
{
	uint64_t h = (run * 0x9e3779b97f4a7c15ull) ^ (idx * 0xc2b2ae3d27d4eb4full);

	return &c->hash[(h >> 17) & (c->nbuckets - 1)];
}

/* A cache of limit bytes, or NULL (no memory). */
static struct bcache *cache_new(size_t limit)
{
	struct bcache *c = calloc(1, sizeof(*c));
	size_t n = 64;

	if (!c)
		return NULL;
	while (n < limit / NVMEFS_BLOCK && n < ((size_t)1 << 20))
		n <<= 1; /* a bucket per 4 KiB block the limit holds */
	c->hash = calloc(n, sizeof(*c->hash));
	if (!c->hash) {
		free(c);
		return NULL;
	}
	c->nbuckets = n;
	c->limit = limit;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

static void lru_unlink(struct bcache *c, struct cblk *b)
{
	*(b->prev ? &b->prev->next : &c->head) = b->next;
	*(b->next ? &b->next->prev : &c->tail) = b->prev;
	b->prev = b->next = NULL;
}

static void lru_push(struct bcache *c, struct cblk *b)
{
	b->prev = NULL;
	b->next = c->head;
	*(c->head ? &c->head->prev : &c->tail) = b;
	c->head = b;
}

/* Take the least recent unheld blocks out until the limit holds; they go
 * on *dead for the caller to free outside the lock (lock held). */
static void cache_trim(struct bcache *c, struct cblk **dead)
{
	struct cblk *b, *prev;

	for (b = c->tail; b && c->bytes > c->limit; b = prev) {
		struct cblk **pp = cache_slot(c, b->run, b->idx);

		prev = b->prev;
		if (b->refs)
			continue;
		while (*pp != b)
			pp = &(*pp)->hnext;
		*pp = b->hnext;
		lru_unlink(c, b);
		c->bytes -= b->bytes;
		b->hnext = *dead;
		*dead = b;
	}
}

/* Free a list of blocks (by hnext). */
static void cblk_free_all(struct cblk *b)
{
	while (b) {
		struct cblk *next = b->hnext;

		free(b->buf);
		free(b);
		b = next;
	}
}

static void cache_free(struct bcache *c)
{
	struct cblk *all = NULL;

	if (!c)
		return;
	c->limit = 0;
	cache_trim(c, &all); /* no lookup is left: every block goes */
	cblk_free_all(all);
	free(c->hash);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Block (run, idx), held, or NULL (lock held). */
static struct cblk *cache_find(struct bcache *c, uint64_t run, uint32_t idx)
{
	struct cblk *b = *cache_slot(c, run, idx);

	while (b && (b->run != run || b->idx != idx))
		b = b->hnext;
	if (b) {
		b->refs++;
		lru_unlink(c, b);
		lru_push(c, b);
	}
	return b;
}

/* Drop a reference cache_get gave. */
static void cache_put(struct bcache *c, struct cblk *b)
{
	struct cblk *dead = NULL;

	pthread_mutex_lock(&c->lock);
	b->refs--;
	cache_trim(c, &dead);
	pthread_mutex_unlock(&c->lock);
	cblk_free_all(dead);
}

/* Read run block idx of r (a miss): a new block, held, not yet cached. */
static int cblk_read(struct nvmefs_runr *r, uint32_t idx, struct cblk **out)
{
	struct cblk *b = calloc(1, sizeof(*b));
	int ret = -ENOMEM;

	*out = NULL;
	if (!b)
		return ret;
	b->run = r->meta.id;
	b->idx = idx;
	b->refs = 1;
	b->bytes = (size_t)nvmefs_runr_block_len(r, idx) * NVMEFS_BLOCK;
	b->buf = nvmefs_aligned_alloc(b->bytes);
	if (b->buf)
		ret = nvmefs_runr_load(r, idx, b->buf, &b->h);
	if (ret) {
		free(b->buf);
		free(b);
		return ret;
	}
	*out = b;
	return 0;
}

/* Run block idx of r, held (cache_put), from the cache or read into it;
 * *reads counts a read. 0 or -errno. */
static int cache_get(struct bcache *c, struct nvmefs_runr *r, uint32_t idx, struct cblk **out,
		     unsigned *reads)
{
	struct cblk *b, *dead = NULL;
	int ret;

	pthread_mutex_lock(&c->lock);
	*out = cache_find(c, r->meta.id, idx);
	if (*out)
		c->hits++;
	else
		c->misses++;
	pthread_mutex_unlock(&c->lock);
	if (*out)
		return 0;
	ret = cblk_read(r, idx, &b); /* no lock across the read */
	if (ret)
		return ret;
	(*reads)++;
	pthread_mutex_lock(&c->lock);
	*out = cache_find(c, b->run, idx); /* another thread's, read meanwhile */
	if (!*out) {
		struct cblk **pp = cache_slot(c, b->run, idx);

		b->hnext = *pp;
		*pp = b;
		lru_push(c, b);
		c->bytes += b->bytes;
		cache_trim(c, &dead);
		*out = b;
		b = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	cblk_free_all(b); /* the one read twice */
	cblk_free_all(dead);
	return 0;
}

/* ---- open, close ---- */

static struct nvmefs_memtable *mem_new(struct nvmefs_store *s)
{
	struct nvmefs_memtable *m = malloc(sizeof(*m));
	uint64_t seed;

	if (!m)
		return NULL;
	pthread_mutex_lock(&s->lock);
	seed = ++s->seed * 0x9e3779b97f4a7c15ull;
	pthread_mutex_unlock(&s->lock);
	if (!nvmefs_mem_init(m, seed)) {
		m->refs = 1;
		return m;
	}
	free(m);
	return NULL;
}

static void mem_free(struct nvmefs_memtable *m)
{
	if (!m)
		return;
	nvmefs_mem_exit(m);
	free(m);
}

/* Open every run of the current manifest as the first view. */
static int open_view(struct nvmefs_store *s)
{
	const struct nvmefs_manifest *cur = nvmefs_runs_current(s->a);
	int ret = 0;

	s->view = view_alloc(cur->n);
	if (!s->view)
		return -ENOMEM;
	for (size_t i = 0; i < cur->n && !ret; i++) {
		ret = srun_open(s, &cur->runs[i], &s->view->run[i]);
		if (!ret) {
			s->view->run[i]->refs = 1;
			s->view->n++;
		}
	}
	if (!ret && !view_sort(s->view)) {
		nvmefs_err("%s: run area: two runs of one level overlap", s->a->dev->path);
		ret = -EINVAL;
	}
	s->st.runs = (unsigned)s->view->n;
	return ret;
}

/* A store with its config and locks, no memtable, view or area yet. */
static struct nvmefs_store *store_alloc(const struct nvmefs_store_cfg *cfg)
{
	struct nvmefs_store *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (cfg)
		s->cfg = *cfg;
	s->cfg.l0_runs = s->cfg.l0_runs ? s->cfg.l0_runs : L0_RUNS_DEFAULT;
	s->cfg.l1_blocks = s->cfg.l1_blocks ? s->cfg.l1_blocks : L1_BLOCKS_DEFAULT;
	s->cfg.fanout = s->cfg.fanout > 1 ? s->cfg.fanout : FANOUT_DEFAULT;
	s->cfg.run_blocks = s->cfg.run_blocks ? s->cfg.run_blocks : RUN_BLOCKS_DEFAULT;
	s->cfg.cache_bytes = s->cfg.cache_bytes ? s->cfg.cache_bytes : CACHE_BYTES_DEFAULT;
	pthread_mutex_init(&s->flush_lock, NULL);
	pthread_mutex_init(&s->compact_lock, NULL);
	pthread_mutex_init(&s->commit_lock, NULL);
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

int nvmefs_store_open(struct nvmefs_store **out, struct nvmefs_dev *dev,
		      const struct nvmefs_runs_geom *g, const uint8_t uuid[16],
		      const struct nvmefs_store_cfg *cfg)
{
	struct nvmefs_store *s = store_alloc(cfg);
	int ret;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	ret = nvmefs_runs_open(&s->a, dev, g, uuid);
	if (ret)
		goto err;
	s->cache = cache_new(s->cfg.cache_bytes);
	if (!s->cache) {
		ret = -ENOMEM;
		goto err;
	}
	s->mem = mem_new(s);
	ret = s->mem ? open_view(s) : -ENOMEM;
	if (ret)
		goto err;
	*out = s;
	return 0;
err:
	nvmefs_store_close(s);
	return ret;
}

int nvmefs_store_open_mem(struct nvmefs_store **out, const struct nvmefs_store_cfg *cfg)
{
	struct nvmefs_store *s = store_alloc(cfg);

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->mem = mem_new(s);
	s->view = view_alloc(0); /* no runs, ever */
	if (!s->mem || !s->view) {
		nvmefs_store_close(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void nvmefs_store_close(struct nvmefs_store *s)
{
	if (!s)
		return;
	if (s->view) {
		assert(s->view->refs == 1); /* no reader left */
		view_put(s, s->view);
	}
	mem_free(s->mem);
	mem_free(s->imm);
	cache_free(s->cache); /* before the runs it names: no I/O, only memory */
	nvmefs_runs_close(s->a);
	pthread_mutex_destroy(&s->flush_lock);
	pthread_mutex_destroy(&s->compact_lock);
	pthread_mutex_destroy(&s->commit_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void nvmefs_store_mark(struct nvmefs_store *s, struct nvmefs_mark *mark)
{
	if (!s->a) {
		pthread_mutex_lock(&s->lock);
		*mark = s->mark;
		pthread_mutex_unlock(&s->lock);
		return;
	}
	pthread_mutex_lock(&s->commit_lock);
	*mark = nvmefs_runs_current(s->a)->mark;
	pthread_mutex_unlock(&s->commit_lock);
}

struct nvmefs_runs *nvmefs_store_area(struct nvmefs_store *s)
{
	return s->a;
}

int nvmefs_store_format(struct nvmefs_dev *dev, const struct nvmefs_runs_geom *g,
			const uint8_t uuid[16])
{
	return nvmefs_runs_format(dev, g, uuid);
}

uint64_t nvmefs_store_manifest_seq(struct nvmefs_store *s)
{
	return s->a ? nvmefs_runs_current(s->a)->seq : 0;
}

void nvmefs_store_stats(struct nvmefs_store *s, struct nvmefs_store_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = s->st;
	st->mem_bytes = s->mem->bytes;
	st->mem_entries = s->mem->n;
	st->frozen_bytes = s->imm ? s->imm->bytes : 0;
	st->frozen_entries = s->imm ? s->imm->n : 0;
	pthread_mutex_unlock(&s->lock);
	if (s->cache) { /* its own lock, after the store's: never both */
		pthread_mutex_lock(&s->cache->lock);
		st->cache_hits = s->cache->hits;
		st->cache_misses = s->cache->misses;
		st->cache_bytes = s->cache->bytes;
		pthread_mutex_unlock(&s->cache->lock);
	}
}

/* ---- put, get ---- */

static int put(struct nvmefs_store *s, const uint8_t *key, size_t klen, const void *val,
	       size_t vlen, bool tomb)
{
	int ret;

	if (nvmefs_key_check(key, klen) || vlen > NVMEFS_XATTR_VALUE_MAX)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (tomb && !s->a && !s->imm) /* memory only: nothing older to hide */
		ret = (nvmefs_mem_remove(s->mem, key, klen), 0);
	else
		ret = nvmefs_mem_put(s->mem, key, klen, val, vlen, tomb);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int nvmefs_store_put(struct nvmefs_store *s, const uint8_t *key, size_t klen, const void *val,
		     size_t vlen)
{
	return put(s, key, klen, val, vlen, false);
}

int nvmefs_store_del(struct nvmefs_store *s, const uint8_t *key, size_t klen)
{
	return put(s, key, klen, NULL, 0, true);
}

static int copy_out(const struct nvmefs_run_ent *e, void *val, size_t cap, size_t *vlen)
{
	if (e->tomb)
		return -ENOENT;
	*vlen = e->vlen;
	if (e->vlen > cap)
		return -ERANGE;
	if (e->vlen)
		memcpy(val, e->val, e->vlen);
	return 0;
}

/* The run of level k >= 1 whose range may hold key: the last one whose
 * smallest key is <= key (binary search), or v->lvl[k + 1] when none. */
static size_t level_find(const struct view *v, uint32_t k, const uint8_t *key, size_t klen)
{
	size_t lo = v->lvl[k], hi = v->lvl[k + 1]; /* the first above key is in [lo, hi] */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct nvmefs_run_meta *m = &v->run[mid]->r.meta;

		if (nvmefs_key_cmp(m->min, m->min_len, key, klen) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > v->lvl[k] ? lo - 1 : v->lvl[k + 1];
}

/* Look key up in one run, its block through the cache: -ENOENT (not
 * there), 0 with *e into *blk (held: the caller puts it), or -errno.
 * *reads counts the run blocks read (at most one per run that may hold
 * it, none when cached). */
static int get_run(struct nvmefs_store *s, struct nvmefs_runr *r, const uint8_t *key, size_t klen,
		   struct cblk **blk, struct nvmefs_run_ent *e, unsigned *reads)
{
	int ret;

	if (!nvmefs_runr_may_hold(r, key, klen))
		return -ENOENT;
	ret = cache_get(s->cache, r, nvmefs_runr_block_of(r, key, klen), blk, reads);
	if (ret)
		return ret;
	ret = nvmefs_run_block_find((*blk)->buf, &(*blk)->h, key, klen, e);
	if (ret) {
		cache_put(s->cache, *blk);
		*blk = NULL;
	}
	return ret;
}

/* The runs of v newest first: every level-0 run, then at most one run of
 * each level >= 1 (the one whose range may hold key). */
static int get_runs(struct nvmefs_store *s, struct view *v, const uint8_t *key, size_t klen,
		    void *val, size_t cap, size_t *vlen, unsigned *reads)
{
	struct nvmefs_run_ent e = {0};
	struct cblk *blk = NULL;
	int ret = -ENOENT;

	for (uint32_t k = 0; k < NVMEFS_RUN_LEVELS && ret == -ENOENT; k++) {
		size_t i = k ? level_find(v, k, key, klen) : v->lvl[0];
		size_t end = k ? (i < v->lvl[k + 1] ? i + 1 : i) : v->lvl[1];

		for (; i < end && ret == -ENOENT; i++)
			ret = get_run(s, &v->run[i]->r, key, klen, &blk, &e, reads);
	}
	if (!ret)
		ret = copy_out(&e, val, cap, vlen);
	if (blk)
		cache_put(s->cache, blk);
	return ret;
}

int nvmefs_store_get(struct nvmefs_store *s, const uint8_t *key, size_t klen, void *val, size_t cap,
		     size_t *vlen)
{
	const struct nvmefs_mem_node *x;
	struct nvmefs_run_ent e;
	unsigned reads = 0;
	struct view *v;
	int ret;

	if (nvmefs_key_check(key, klen))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	x = nvmefs_mem_find(s->mem, key, klen);
	if (!x && s->imm)
		x = nvmefs_mem_find(s->imm, key, klen);
	if (x) {
		nvmefs_mem_ent(x, &e);
		ret = copy_out(&e, val, cap, vlen);
		pthread_mutex_unlock(&s->lock);
		return ret;
	}
	v = s->view;
	v->refs++;
	pthread_mutex_unlock(&s->lock);
	ret = get_runs(s, v, key, klen, val, cap, vlen, &reads);
	pthread_mutex_lock(&s->lock);
	s->st.get_blocks_read += reads;
	view_put(s, v);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* ---- flush ---- */

/*
 * Blocks a run of the memtable's entries can take at most, so that a
 * flush reserves no more than it needs. A run block is closed when the
 * next entry does not fit: if that entry is at most half a block's room,
 * the closed block holds more than that half; each longer entry may close
 * one block and take ceil((header + entry) / 4 KiB) of its own.
 */
static uint64_t run_bound(const struct nvmefs_memtable *m)
{
	const uint64_t half = (NVMEFS_BLOCK - NVMEFS_RUN_HDR) / 2;
	uint64_t small = 0, data = 1, idx;
	const struct nvmefs_mem_node *x;

	for (x = nvmefs_mem_seek(m, NULL, 0); x; x = x->next[0]) {
		uint64_t len = NVMEFS_RUN_ENT_HDR + x->klen + x->vlen;

		if (len <= half)
			small += len;
		else
			data += 1 + (NVMEFS_RUN_HDR + len + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK;
	}
	data += small / half;
	idx = data * (6 + NVMEFS_KEY_MAX); /* an index entry per run block */
	return data + nvmefs_obj_blocks(idx) + nvmefs_obj_blocks(nvmefs_filter_nbits(m->n) / 8);
}

/* Write the frozen memtable as a level-0 run; *out its open run. */
static int write_imm(struct nvmefs_store *s, struct srun **out)
{
	const struct nvmefs_mem_node *x;
	struct nvmefs_run_meta meta;
	struct nvmefs_run_ent e;
	struct nvmefs_runw w;
	int ret;

	ret = nvmefs_runw_begin(&w, s->a, 0, run_bound(s->imm));
	if (ret)
		return ret;
	for (x = nvmefs_mem_seek(s->imm, NULL, 0); x && !ret; x = x->next[0]) {
		nvmefs_mem_ent(x, &e);
		ret = nvmefs_runw_add(&w, e.key, e.klen, e.val, e.vlen, e.tomb);
	}
	if (ret) {
		nvmefs_runw_abort(&w);
		return ret;
	}
	ret = nvmefs_runw_end(&w, &meta);
	if (ret)
		return ret;
	ret = srun_open(s, &meta, out);
	if (ret)
		drop_written(s, meta.id);
	return ret;
}

static bool mark_eq(const struct nvmefs_mark *a, const struct nvmefs_mark *b)
{
	return a->replay == b->replay && a->replay_seq == b->replay_seq &&
	       a->next_ino == b->next_ino && a->ninodes == b->ninodes &&
	       a->meta_bytes == b->meta_bytes;
}

/* A frozen memtable with no entry: commit its mark alone, if it changed,
 * and drop it. */
static int flush_empty(struct nvmefs_store *s)
{
	struct nvmefs_memtable *imm = NULL;
	int ret = 0;

	pthread_mutex_lock(&s->commit_lock);
	if (!mark_eq(&nvmefs_runs_current(s->a)->mark, &s->imm_mark))
		ret = commit_view(s, NULL, 0, NULL, 0, &s->imm_mark, true);
	pthread_mutex_lock(&s->lock);
	if (!ret)
		imm = imm_drop(s); /* NULL when commit_view dropped it */
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->commit_lock);
	mem_free(imm);
	return ret;
}

/* The frozen memtable to a run, committed with its mark; on failure it
 * stays frozen. flush_lock held, s->imm set (only a flush clears it). */
static int flush_imm(struct nvmefs_store *s)
{
	struct srun *sr;
	int ret;

	if (!s->imm->n)
		return flush_empty(s);
	ret = write_imm(s, &sr);
	if (ret)
		return ret;
	pthread_mutex_lock(&s->commit_lock);
	ret = commit_view(s, NULL, 0, &sr, 1, &s->imm_mark, true);
	pthread_mutex_unlock(&s->commit_lock);
	if (ret) {
		uint64_t id = sr->r.meta.id;

		srun_close(s, sr);
		drop_written(s, id);
		return ret;
	}
	pthread_mutex_lock(&s->lock);
	s->st.flushes++;
	s->st.flush_blocks_written = nvmefs_run_blocks(&sr->r.meta);
	s->st.flushed_blocks += s->st.flush_blocks_written;
	s->st.flush_blocks_read = (uint64_t)sr->r.meta.index_blocks + sr->r.meta.filter_blocks;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int nvmefs_store_freeze(struct nvmefs_store *s, const struct nvmefs_mark *mark)
{
	struct nvmefs_memtable *fresh = mem_new(s); /* before the lock: O(1) under it */
	int ret = -EBUSY;

	if (!fresh)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	if (!s->imm) {
		s->imm = s->mem;
		s->imm_mark = *mark;
		s->mem = fresh;
		fresh = NULL;
		ret = 0;
	}
	pthread_mutex_unlock(&s->lock);
	mem_free(fresh);
	return ret;
}

static bool frozen(struct nvmefs_store *s)
{
	bool f;

	pthread_mutex_lock(&s->lock);
	f = s->imm != NULL;
	pthread_mutex_unlock(&s->lock);
	return f;
}

/*
 * A memory-only store's flush: the live memtable (what was put since the
 * freeze) folds into the frozen one, which is live again, and its mark is
 * the store's; then *mark, if given, is. Under the store's lock: O(k log
 * n) for k entries put since the freeze. On -ENOMEM the live memtable
 * stays on top of a frozen one that took some of its entries (the same
 * values: reads see no change), and the next flush folds again.
 */
static int fold(struct nvmefs_store *s, const struct nvmefs_mark *mark)
{
	struct nvmefs_memtable *old = NULL;
	const struct nvmefs_mem_node *x;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (s->imm && s->imm->refs > 1) /* a walk reads it in place */
		ret = -EBUSY;
	else if (s->imm) {
		for (x = nvmefs_mem_seek(s->mem, NULL, 0); x && !ret; x = x->next[0])
			if (x->tomb)
				nvmefs_mem_remove(s->imm, x->key, x->klen);
			else
				ret = nvmefs_mem_put(s->imm, x->key, x->klen, x->key + x->klen,
						     x->vlen, false);
		if (!ret) {
			old = s->mem;
			s->mem = s->imm;
			s->imm = NULL;
			s->mark = s->imm_mark;
		}
	}
	if (!ret && mark)
		s->mark = *mark;
	pthread_mutex_unlock(&s->lock);
	mem_free(old);
	return ret;
}

int nvmefs_store_flush(struct nvmefs_store *s, const struct nvmefs_mark *mark)
{
	int ret = 0;

	pthread_mutex_lock(&s->flush_lock);
	for (;;) {
		if (!s->a) {
			ret = fold(s, mark);
			break;
		}
		if (frozen(s) && (ret = flush_imm(s))) /* a freeze's, or a failed flush's */
			break;
		if (!mark)
			break;
		ret = nvmefs_store_freeze(s, mark);
		if (ret == -EBUSY) /* another thread froze since: that one first */
			continue;
		if (!ret)
			ret = flush_imm(s);
		break;
	}
	pthread_mutex_unlock(&s->flush_lock);
	return ret;
}

/* ---- compaction ---- */

/* Level k's budget in blocks (k >= 1). */
static uint64_t budget(const struct nvmefs_store *s, uint32_t k)
{
	uint64_t b = s->cfg.l1_blocks;

	while (--k && b < UINT64_MAX / s->cfg.fanout)
		b *= s->cfg.fanout;
	return b;
}

struct pick {
	struct srun **in; /* newest first */
	size_t n;
	uint32_t level; /* the output's */
	bool drop_tombs;
	const struct nvmefs_run_meta *lo, *hi; /* the inputs' smallest and largest keys */
};

/* Does run m's key range meet [p->lo's min, p->hi's max]? */
static bool overlaps(const struct pick *p, const struct nvmefs_run_meta *m)
{
	return p->lo && nvmefs_key_cmp(m->max, m->max_len, p->lo->min, p->lo->min_len) >= 0 &&
	       nvmefs_key_cmp(m->min, m->min_len, p->hi->max, p->hi->max_len) <= 0;
}

static void pick_add(struct pick *p, struct srun *sr)
{
	const struct nvmefs_run_meta *m = &sr->r.meta;

	p->in[p->n++] = sr;
	if (!p->lo || nvmefs_key_cmp(m->min, m->min_len, p->lo->min, p->lo->min_len) < 0)
		p->lo = m;
	if (!p->hi || nvmefs_key_cmp(m->max, m->max_len, p->hi->max, p->hi->max_len) > 0)
		p->hi = m;
}

/* Runs of v at levels [lo, hi] into p, in v's order (newest first). */
static void pick_levels(const struct view *v, uint32_t lo, uint32_t hi, struct pick *p)
{
	for (size_t i = v->lvl[lo]; i < v->lvl[hi + 1]; i++)
		pick_add(p, v->run[i]);
}

/* The runs of level k that overlap the inputs so far (their range is then
 * the inputs': a level's runs are disjoint, so the output will be too). */
static void pick_overlapping(const struct view *v, uint32_t k, struct pick *p)
{
	size_t n = p->n;

	for (size_t i = v->lvl[k]; i < v->lvl[k + 1]; i++)
		if (overlaps(p, &v->run[i]->r.meta))
			p->in[n++] = v->run[i];
	while (p->n < n)
		pick_add(p, p->in[p->n]);
}

/* Level k's next run to push down: the first after the cursor, round
 * robin, so that every part of the key space takes its turn. */
static struct srun *pick_one(struct nvmefs_store *s, const struct view *v, uint32_t k)
{
	struct srun *sr = v->run[v->lvl[k]];

	for (size_t i = v->lvl[k]; i < v->lvl[k + 1]; i++) {
		const struct nvmefs_run_meta *m = &v->run[i]->r.meta;

		if (nvmefs_key_cmp(m->min, m->min_len, s->cursor[k], s->cursor_len[k]) > 0) {
			sr = v->run[i];
			break;
		}
	}
	memcpy(s->cursor[k], sr->r.meta.max, sr->r.meta.max_len);
	s->cursor_len[k] = sr->r.meta.max_len;
	return sr;
}

/* What the rule says to merge (store.h): 1, 0 when nothing is due, or
 * -ENOMEM. p->in is then the caller's to free. compact_lock held. */
static int pick(struct nvmefs_store *s, const struct view *v, bool full, struct pick *p)
{
	uint64_t size[NVMEFS_RUN_LEVELS] = {0};
	uint32_t deepest = 0;

	*p = (struct pick){.in = calloc(v->n ? v->n : 1, sizeof(*p->in))};
	if (!p->in)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		const struct nvmefs_run_meta *m = &v->run[i]->r.meta;

		size[m->level] += nvmefs_run_blocks(m);
		deepest = m->level > deepest ? m->level : deepest;
	}
	if (full && v->n) {
		p->level = deepest ? deepest : 1;
		pick_levels(v, 0, deepest, p);
	} else if (v->lvl[1] > s->cfg.l0_runs) {
		p->level = 1;
		pick_levels(v, 0, 0, p);
		pick_overlapping(v, 1, p);
	}
	for (uint32_t k = 1; !p->n && k + 1 < NVMEFS_RUN_LEVELS; k++)
		if (size[k] > budget(s, k)) {
			p->level = k + 1;
			pick_add(p, pick_one(s, v, k));
			pick_overlapping(v, k + 1, p);
		}
	/* Tombstones go when no older run could hold what they delete. */
	p->drop_tombs = true;
	for (size_t i = v->lvl[p->level + 1]; i < v->n && p->n; i++)
		if (overlaps(p, &v->run[i]->r.meta))
			p->drop_tombs = false;
	return p->n > 0;
}

/* A compaction's output runs, each a separate reservation. */
struct outs {
	struct srun **run;
	size_t n, cap;
};

/* Give up the outputs: closed and their space free. */
static void outs_drop(struct nvmefs_store *s, struct outs *o)
{
	for (size_t i = 0; i < o->n; i++) {
		uint64_t id = o->run[i]->r.meta.id;

		srun_close(s, o->run[i]);
		drop_written(s, id);
	}
	o->n = 0;
}

/*
 * Blocks the output w takes at most once e is added: its data blocks, the
 * block being filled (written when e does not fit it: one block, or up to
 * NVMEFS_RUN_BLOCKS_MAX when it holds one long entry), e's own, and the
 * index and filter with e. For a writer not begun (zeroed): e alone.
 */
static uint64_t out_need(const struct nvmefs_runw *w, const struct nvmefs_run_ent *e)
{
	uint64_t ent = NVMEFS_RUN_HDR + NVMEFS_RUN_ENT_HDR + e->klen + e->vlen;
	uint64_t cur = w->big ? NVMEFS_RUN_BLOCKS_MAX : 1;

	return w->meta.data_blocks + cur + (ent + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK +
	       nvmefs_obj_blocks(w->idx_len + 6 + e->klen) +
	       nvmefs_obj_blocks(nvmefs_filter_nbits(w->meta.nentries + 1) / 8);
}

/* Begin an output run of level for e: cfg.run_blocks reserved, or what e
 * alone needs if that is more. */
static int out_begin(struct nvmefs_store *s, struct nvmefs_runw *w, uint32_t level,
		     const struct nvmefs_run_ent *e)
{
	const struct nvmefs_runw none = {0};
	uint64_t want = out_need(&none, e);

	return nvmefs_runw_begin(w, s->a, level,
				 want > s->cfg.run_blocks ? want : s->cfg.run_blocks);
}

/* End the output w and open it into o. */
static int out_end(struct nvmefs_store *s, struct nvmefs_runw *w, struct outs *o)
{
	struct nvmefs_run_meta meta;
	struct srun *sr;
	int ret = nvmefs_runw_end(w, &meta);

	if (ret)
		return ret;
	ret = nvmefs_grow(&o->run, &o->cap, o->n + 1, sizeof(*o->run));
	if (!ret)
		ret = srun_open(s, &meta, &sr);
	if (ret) {
		drop_written(s, meta.id);
		return ret;
	}
	o->run[o->n++] = sr;
	return 0;
}

/*
 * Every entry of the merge m into runs of level, each ended before it
 * outgrows its reservation, or where the key kind changes once it holds
 * half of cfg.run_blocks, into o: 0 or -errno (o then the caller's to
 * drop).
 *
 * The cut at a kind: a volume being filled appends at the end of each
 * kind (new inodes, their directories' names, their extents), and a run
 * of such keys then overlaps no run of the next level, where a run
 * spanning two kinds overlapped the one holding the end of the first
 * (every such merge read and rewrote it). Not below half a run: a short
 * tail of one kind that overlaps nothing would go down the levels as it
 * is, merged with nothing, and such runs would pile up with every
 * compaction (the manifest's slot holds a few thousand); carried on into
 * the next kind, it is merged again as before.
 */
static int copy_merge(struct nvmefs_store *s, struct nvmefs_merge *m, uint32_t level,
		      struct outs *o)
{
	struct nvmefs_run_ent e;
	struct nvmefs_runw w;
	bool open = false;
	uint8_t kind = 0;
	int ret;

	while ((ret = nvmefs_merge_next(m, &e)) == 1) {
		/* Full, or another kind past half a run: e opens the next. */
		if (open && (out_need(&w, &e) > w.cap ||
			     (e.key[0] != kind && 2 * w.meta.data_blocks >= s->cfg.run_blocks))) {
			open = false;
			ret = out_end(s, &w, o);
			if (ret)
				return ret;
		}
		if (!open && (ret = out_begin(s, &w, level, &e)))
			return ret;
		open = true;
		kind = e.key[0];
		ret = nvmefs_runw_add(&w, e.key, e.klen, e.val, e.vlen, e.tomb);
		if (ret)
			break;
	}
	if (ret && open)
		nvmefs_runw_abort(&w);
	else if (open)
		ret = out_end(s, &w, o);
	return ret;
}

/* Merge p's runs into runs of p->level, into o (none when every entry
 * was deleted): 0 or -errno (nothing left written). */
static int merge_write(struct nvmefs_store *s, const struct pick *p, struct outs *o)
{
	struct nvmefs_runit *it = calloc(p->n, sizeof(*it));
	struct nvmefs_kv_src *src = calloc(p->n, sizeof(*src));
	struct nvmefs_merge m;
	size_t nit = 0;
	int ret = it && src ? 0 : -ENOMEM;

	for (; nit < p->n && !ret; nit++) {
		ret = nvmefs_runit_init(&it[nit], &p->in[nit]->r);
		src[nit] = nvmefs_runit_src(&it[nit]);
	}
	if (!ret)
		ret = nvmefs_merge_init(&m, src, (unsigned)p->n, !p->drop_tombs);
	if (ret)
		goto out;
	ret = copy_merge(s, &m, p->level, o);
	nvmefs_merge_exit(&m);
	if (ret)
		outs_drop(s, o);
out:
	for (size_t i = 0; i < nit; i++)
		nvmefs_runit_exit(&it[i]);
	free(it);
	free(src);
	return ret;
}

/* Commit the outputs o in place of p's inputs, or drop them. */
static int compact_commit(struct nvmefs_store *s, const struct pick *p, struct outs *o)
{
	uint64_t blocks = 0, in = 0;
	int ret;

	for (size_t i = 0; i < p->n; i++)
		in += p->in[i]->r.meta.data_blocks; /* index and filter are in memory */
	pthread_mutex_lock(&s->commit_lock);
	ret = commit_view(s, p->in, p->n, o->run, o->n, &nvmefs_runs_current(s->a)->mark, false);
	pthread_mutex_unlock(&s->commit_lock);
	if (ret) {
		outs_drop(s, o);
		return ret;
	}
	for (size_t i = 0; i < o->n; i++)
		blocks += nvmefs_run_blocks(&o->run[i]->r.meta);
	pthread_mutex_lock(&s->lock);
	s->st.compactions++;
	s->st.compact_blocks_written = blocks;
	s->st.compact_runs_written = o->n;
	s->st.compact_read_blocks += in;
	s->st.compact_written_blocks += blocks;
	pthread_mutex_unlock(&s->lock);
	return 1;
}

int nvmefs_store_compact(struct nvmefs_store *s, bool full)
{
	struct outs o = {0};
	struct view *v;
	struct pick p;
	int ret = 0;

	if (!s->a)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&s->compact_lock);
	pthread_mutex_lock(&s->lock);
	v = s->view;
	v->refs++;
	pthread_mutex_unlock(&s->lock);
	ret = pick(s, v, full, &p);
	if (ret > 0) /* after a failed commit nothing is written: -EIO before reading */
		ret = nvmefs_runs_failed(s->a) ? -EIO : merge_write(s, &p, &o);
	if (!ret && p.n)
		ret = compact_commit(s, &p, &o);
	free(o.run);
	free(p.in);
	pthread_mutex_lock(&s->lock);
	view_put(s, v);
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->compact_lock);
	return ret;
}

/* ---- iterators ---- */

/* A copy of a memtable's entries in a key range: a merge source. */
struct snap {
	struct nvmefs_run_ent *e;
	size_t n, pos;
	uint8_t *bytes;
};

struct nvmefs_store_iter {
	struct nvmefs_store *s;
	struct view *v;
	struct snap snap[2];		  /* the memtable, the frozen one (copies: not a walk's) */
	struct nvmefs_memtable *frozen;	  /* a walk's: read in place, held */
	const struct nvmefs_mem_node *at; /* a walk's next node of it */
	struct nvmefs_runit *rit;	  /* level 0's runs, one source each */
	size_t nrit;
	struct lvlsrc *lvl; /* levels 1...: one source each, its runs in key order */
	size_t nlvl;
	struct nvmefs_kv_src *src;
	struct nvmefs_merge m;
	bool merging, has_hi;
	uint16_t hilen;
	uint8_t hi[NVMEFS_KEY_MAX];
};

static bool below_hi(const struct nvmefs_store_iter *it, const uint8_t *k, size_t klen)
{
	return !it->has_hi || nvmefs_key_cmp(k, klen, it->hi, it->hilen) < 0;
}

/* Copy m's entries in [lo, hi) into sn (s->lock held). */
static int snap_take(struct snap *sn, const struct nvmefs_memtable *m, const uint8_t *lo,
		     size_t lolen, struct nvmefs_store_iter *it)
{
	const struct nvmefs_mem_node *first = m ? nvmefs_mem_seek(m, lo, lolen) : NULL, *x;
	size_t bytes = 0, pos = 0;

	for (x = first; x && below_hi(it, x->key, x->klen); x = x->next[0]) {
		sn->n++;
		bytes += (size_t)x->klen + x->vlen;
	}
	it->s->st.iter_copied_bytes += bytes + sn->n * sizeof(*sn->e);
	sn->e = calloc(sn->n ? sn->n : 1, sizeof(*sn->e));
	sn->bytes = malloc(bytes ? bytes : 1);
	if (!sn->e || !sn->bytes)
		return -ENOMEM;
	for (size_t i = 0; i < sn->n; i++, first = first->next[0]) {
		nvmefs_mem_ent(first, &sn->e[i]);
		memcpy(sn->bytes + pos, first->key, (size_t)first->klen + first->vlen);
		sn->e[i].key = sn->bytes + pos;
		sn->e[i].val = sn->bytes + pos + first->klen;
		pos += (size_t)first->klen + first->vlen;
	}
	return 0;
}

static int snap_next(void *ctx, struct nvmefs_run_ent *e)
{
	struct snap *sn = ctx;

	if (sn->pos >= sn->n)
		return 0;
	*e = sn->e[sn->pos++];
	return 1;
}

/* A walk's frozen memtable, in place, as a merge source: it is not
 * written to while the walk holds it. */
static int walk_next(void *ctx, struct nvmefs_run_ent *e)
{
	struct nvmefs_store_iter *it = ctx;

	if (!it->at || !below_hi(it, it->at->key, it->at->klen))
		return 0;
	nvmefs_mem_ent(it->at, e);
	it->at = it->at->next[0];
	return 1;
}

/* May run r hold keys in [lo, hi)? */
static bool run_in_range(const struct nvmefs_store_iter *it, const struct nvmefs_run_meta *r,
			 const uint8_t *lo, size_t lolen)
{
	return (!lo || nvmefs_key_cmp(r->max, r->max_len, lo, lolen) >= 0) &&
	       below_hi(it, r->min, r->min_len);
}

/*
 * One level from 1 down as a single merge source: its runs hold disjoint
 * key ranges, in key order in the view, so they are read one after the
 * other, each opened when the one before it ends. The merge then compares
 * a head per level, not per run: a walk of a store of hundreds of runs
 * (the mount's load) would otherwise scan them all for every key.
 */
struct lvlsrc {
	struct srun *const *run; /* the level's runs in [lo, hi), in key order */
	size_t n, i;		 /* how many; the one open (or next) */
	struct nvmefs_runit rit; /* the first is opened and placed at lo with
				  * the iterator; each later one from its start */
	bool open;
};

static int lvl_next(void *ctx, struct nvmefs_run_ent *e)
{
	struct lvlsrc *l = ctx;

	for (;;) {
		struct nvmefs_kv_src src;
		int ret;

		if (!l->open) {
			if (l->i >= l->n)
				return 0;
			ret = nvmefs_runit_init(&l->rit, &l->run[l->i]->r);
			if (ret)
				return ret;
			l->open = true;
		}
		src = nvmefs_runit_src(&l->rit);
		ret = src.next(src.ctx, e);
		if (ret)
			return ret; /* an entry, or an error */
		/* The merge is done with the last entry (it asks for the next only
		 * then), so the run's buffer may go. */
		nvmefs_runit_exit(&l->rit);
		l->open = false;
		l->i++;
	}
}

/* The runs' iterators, placed at lo, after the two snapshots: level 0's
 * one per run (their ranges overlap), the deeper levels one per level. */
static int open_sources(struct nvmefs_store_iter *it, const uint8_t *lo, size_t lolen)
{
	const struct view *v = it->v;
	unsigned nsrc = 2;
	int ret;

	it->rit = calloc(v->n ? v->n : 1, sizeof(*it->rit));
	it->lvl = calloc(NVMEFS_RUN_LEVELS, sizeof(*it->lvl));
	it->src = calloc(v->n + 2, sizeof(*it->src));
	if (!it->rit || !it->lvl || !it->src)
		return -ENOMEM;
	it->src[0] = it->frozen ? (struct nvmefs_kv_src){.next = walk_next, .ctx = it}
				: (struct nvmefs_kv_src){.next = snap_next, .ctx = &it->snap[0]};
	it->src[1] = (struct nvmefs_kv_src){.next = snap_next, .ctx = &it->snap[1]};
	for (size_t i = v->lvl[0]; i < v->lvl[1]; i++) {
		struct nvmefs_runr *r = &v->run[i]->r;

		if (!run_in_range(it, &r->meta, lo, lolen))
			continue;
		ret = nvmefs_runit_init(&it->rit[it->nrit], r);
		if (ret)
			return ret;
		it->nrit++;
		ret = nvmefs_runit_seek(&it->rit[it->nrit - 1], lo, lolen);
		if (ret)
			return ret;
		it->src[nsrc++] = nvmefs_runit_src(&it->rit[it->nrit - 1]);
	}
	for (unsigned k = 1; k < NVMEFS_RUN_LEVELS; k++) {
		struct lvlsrc *l = &it->lvl[it->nlvl];
		size_t a = v->lvl[k], b = v->lvl[k + 1];

		/* The level's runs in range are consecutive: skip those below lo
		 * and stop at the first at or past hi. */
		while (a < b && !run_in_range(it, &v->run[a]->r.meta, lo, lolen))
			a++;
		l->run = &v->run[a];
		while (a < b && run_in_range(it, &v->run[a]->r.meta, lo, lolen)) {
			a++;
			l->n++;
		}
		if (!l->n)
			continue;
		it->nlvl++;
		ret = nvmefs_runit_init(&l->rit, &l->run[0]->r);
		if (ret)
			return ret;
		l->open = true;
		ret = nvmefs_runit_seek(&l->rit, lo, lolen);
		if (ret)
			return ret;
		it->src[nsrc++] = (struct nvmefs_kv_src){.next = lvl_next, .ctx = l};
	}
	ret = nvmefs_merge_init(&it->m, it->src, nsrc, false);
	it->merging = !ret;
	return ret;
}

/* The memtables' part of an iterator (s->lock held): copies of both, or
 * a walk's hold of the frozen one (none: the runs alone). */
static int take_mem(struct nvmefs_store_iter *it, const uint8_t *lo, size_t lolen, bool walk)
{
	struct nvmefs_store *s = it->s;
	int ret;

	if (!walk) {
		ret = snap_take(&it->snap[0], s->mem, lo, lolen, it);
		return ret ? ret : snap_take(&it->snap[1], s->imm, lo, lolen, it);
	}
	if (!s->a && !s->imm)
		return -ENODATA; /* memory only: nothing frozen to walk */
	it->frozen = s->imm;
	if (it->frozen) {
		it->frozen->refs++;
		it->at = nvmefs_mem_seek(it->frozen, lo, lolen);
	}
	return 0;
}

static int iter_open(struct nvmefs_store_iter **out, struct nvmefs_store *s, const uint8_t *lo,
		     size_t lolen, const uint8_t *hi, size_t hilen, bool walk)
{
	struct nvmefs_store_iter *it;
	int ret;

	*out = NULL;
	if ((lo && lolen > NVMEFS_KEY_MAX) || (hi && hilen > NVMEFS_KEY_MAX))
		return -EINVAL;
	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->s = s;
	if (hi) {
		it->has_hi = true;
		it->hilen = (uint16_t)hilen;
		memcpy(it->hi, hi, hilen);
	}
	pthread_mutex_lock(&s->lock);
	it->v = s->view;
	it->v->refs++;
	ret = take_mem(it, lo, lolen, walk);
	pthread_mutex_unlock(&s->lock);
	if (!ret)
		ret = open_sources(it, lo, lolen);
	if (ret) {
		nvmefs_store_iter_close(it);
		return ret;
	}
	*out = it;
	return 0;
}

int nvmefs_store_iter_open(struct nvmefs_store_iter **out, struct nvmefs_store *s,
			   const uint8_t *lo, size_t lolen, const uint8_t *hi, size_t hilen)
{
	return iter_open(out, s, lo, lolen, hi, hilen, false);
}

int nvmefs_store_walk(struct nvmefs_store_iter **out, struct nvmefs_store *s, const uint8_t *lo,
		      size_t lolen, const uint8_t *hi, size_t hilen)
{
	return iter_open(out, s, lo, lolen, hi, hilen, true);
}

int nvmefs_store_iter_prefix(struct nvmefs_store_iter **out, struct nvmefs_store *s,
			     const uint8_t *prefix, size_t plen)
{
	uint8_t hi[NVMEFS_KEY_MAX];
	size_t hilen = plen;

	if (!plen || plen > NVMEFS_KEY_MAX)
		return -EINVAL;
	memcpy(hi, prefix, plen);
	while (hilen && hi[hilen - 1] == 0xff) /* the first key past the prefix */
		hilen--;
	if (hilen)
		hi[hilen - 1]++;
	return nvmefs_store_iter_open(out, s, prefix, plen, hilen ? hi : NULL, hilen);
}

int nvmefs_store_iter_next(struct nvmefs_store_iter *it, struct nvmefs_run_ent *e)
{
	int ret;

	if (!it->merging)
		return 0;
	ret = nvmefs_merge_next(&it->m, e);
	if (ret == 1 && !below_hi(it, e->key, e->klen))
		ret = 0;
	if (ret <= 0)
		it->merging = false; /* ended, or failed: nothing more */
	return ret;
}

void nvmefs_store_iter_close(struct nvmefs_store_iter *it)
{
	if (!it)
		return;
	if (it->src)
		nvmefs_merge_exit(&it->m);
	for (size_t i = 0; i < it->nrit; i++)
		nvmefs_runit_exit(&it->rit[i]);
	for (size_t i = 0; i < it->nlvl; i++)
		if (it->lvl[i].open)
			nvmefs_runit_exit(&it->lvl[i].rit);
	free(it->rit);
	free(it->lvl);
	free(it->src);
	for (int i = 0; i < 2; i++) {
		free(it->snap[i].e);
		free(it->snap[i].bytes);
	}
	pthread_mutex_lock(&it->s->lock);
	view_put(it->s, it->v);
	if (it->frozen && --it->frozen->refs) /* the store's, or another walk's */
		it->frozen = NULL;
	pthread_mutex_unlock(&it->s->lock);
	mem_free(it->frozen); /* flushed while walked: the last reader frees it */
	free(it);
}

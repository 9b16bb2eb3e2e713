// SPDX-License-Identifier: MIT
/*
 * The key/value store over a run area (store.h): the views of the live
 * runs, the run-block cache, open and close, put, delete and lookups.
 * Flushes are in flush.c, compaction in compact.c, iterators in iter.c;
 * what they share is store_i.h (the views and the locks are described there).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nvmefs/devset.h"
#include "nvmefs/util.h"
#include "store_i.h"
#include "util_i.h"

#define L0_RUNS_DEFAULT	    4u
#define L1_BLOCKS_DEFAULT   2560u
#define FANOUT_DEFAULT	    10u
#define RUN_BLOCKS_DEFAULT  512u /* 2 MiB */
#define CACHE_BYTES_DEFAULT ((size_t)8 << 20)

/* ---- runs and views (lock held where said) ---- */

int nvmefs_store_srun_open(struct nvmefs_store *s, const struct nvmefs_run_meta *m,
			   struct srun **out)
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
void nvmefs_store_srun_close(struct nvmefs_store *s, struct srun *sr)
{
	uint64_t id = sr->r.meta.id;

	nvmefs_runr_close(&sr->r);
	nvmefs_runs_release(s->a, id);
	free(sr);
}

/* Drop a reference to v (lock held). */
void nvmefs_store_view_put(struct nvmefs_store *s, struct view *v)
{
	if (!v || --v->refs)
		return;
	for (size_t i = 0; i < v->n; i++)
		if (!--v->run[i]->refs)
			nvmefs_store_srun_close(s, v->run[i]);
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
void nvmefs_store_drop_written(struct nvmefs_store *s, uint64_t id)
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

/* Take the frozen memtable away (lock held): it, for the caller to free,
 * or NULL when a walk still reads it (the walk's close frees it). */
struct nvmefs_memtable *nvmefs_store_imm_drop(struct nvmefs_store *s)
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
int nvmefs_store_commit_view(struct nvmefs_store *s, struct srun *const *drop, size_t ndrop,
			     struct srun *const *fresh, size_t nfresh,
			     const struct nvmefs_mark *mark, bool clear_imm)
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
	nvmefs_store_view_put(s, old);
	if (clear_imm)
		imm = nvmefs_store_imm_drop(s);
	s->st.runs = (unsigned)n;
	pthread_mutex_unlock(&s->lock);
	nvmefs_store_mem_free(imm);
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

struct nvmefs_memtable *nvmefs_store_mem_new(struct nvmefs_store *s)
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

void nvmefs_store_mem_free(struct nvmefs_memtable *m)
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
		ret = nvmefs_store_srun_open(s, &cur->runs[i], &s->view->run[i]);
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
	s->mem = nvmefs_store_mem_new(s);
	ret = s->mem ? open_view(s) : -ENOMEM;
	if (ret)
		goto err;
	*out = s;
	return 0;
err:
	nvmefs_store_close(s);
	return ret;
}

void nvmefs_store_close(struct nvmefs_store *s)
{
	if (!s)
		return;
	if (s->view) {
		assert(s->view->refs == 1); /* no reader left */
		nvmefs_store_view_put(s, s->view);
	}
	nvmefs_store_mem_free(s->mem);
	nvmefs_store_mem_free(s->imm);
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
	return nvmefs_runs_current(s->a)->seq;
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
	nvmefs_store_view_put(s, v);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

// SPDX-License-Identifier: MIT
/*
 * Sorted runs on a member's metadata area (runs_i.h): the area and its
 * manifest slots, the space of the runs, a run's writer, reader and
 * iterator, and the merge of several sources in key order. I/O is
 * synchronous on the member (nvmefs_dev_pio and nvmefs_dev_flush, as the
 * journal's); the objects' encodings are in runfmt.c.
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "nvmefs/devset.h"
#include "nvmefs/util.h"
#include "runfmt_i.h"
#include "runs_i.h"
#include "util_i.h"

#define IDX_ENT_HDR 6u /* an index entry: block offset u32, key length u16, key */

/* ---- the area ---- */

static int pio(const struct nvmefs_runs *a, bool write, uint64_t block, void *buf, uint64_t n)
{
	return nvmefs_dev_pio(a->dev, write, a->g.off + block * NVMEFS_BLOCK, buf,
			      n * NVMEFS_BLOCK);
}

static int check_geom(const struct nvmefs_dev *dev, const struct nvmefs_runs_geom *g)
{
	uint64_t slot = nvmefs_runs_slot_blocks(g);

	if (g->off % NVMEFS_BLOCK || g->blocks <= 2 * slot || g->off > dev->size ||
	    g->blocks > (dev->size - g->off) / NVMEFS_BLOCK) {
		nvmefs_err("%s: run area at %" PRIu64 " of %" PRIu64 " blocks (slots of %" PRIu64
			   ") does not fit the member",
			   dev->path, g->off, g->blocks, slot);
		return -EINVAL;
	}
	return 0;
}

int nvmefs_runs_format(struct nvmefs_dev *dev, const struct nvmefs_runs_geom *g,
		       const uint8_t uuid[16])
{
	struct nvmefs_manifest m = {.seq = 1, .next_id = 1};
	struct nvmefs_runs a = {.dev = dev, .g = *g};
	uint8_t *buf;
	int ret;

	ret = check_geom(dev, g);
	if (ret)
		return ret;
	buf = nvmefs_aligned_alloc(NVMEFS_BLOCK);
	if (!buf)
		return -ENOMEM;
	nvmefs_manifest_encode(&m, uuid, buf, NVMEFS_BLOCK);
	ret = pio(&a, true, 0, buf, 1);
	memset(buf, 0, NVMEFS_BLOCK);
	if (!ret)
		ret = pio(&a, true, nvmefs_runs_slot_blocks(g), buf, 1);
	if (!ret)
		ret = nvmefs_dev_flush(dev);
	free(buf);
	return ret;
}

/* Of the two slots, the valid manifest with the higher sequence. */
static int load_manifest(struct nvmefs_runs *a)
{
	uint32_t sb = nvmefs_runs_slot_blocks(&a->g);
	size_t len = (size_t)sb * NVMEFS_BLOCK;
	struct nvmefs_manifest m[2];
	uint8_t *buf = nvmefs_aligned_alloc(2 * len);
	int r[2], ret;

	if (!buf)
		return -ENOMEM;
	ret = pio(a, false, 0, buf, 2ull * sb);
	for (unsigned s = 0; s < 2 && !ret; s++)
		r[s] = nvmefs_manifest_decode(buf + s * len, len, a->uuid, &a->g, &m[s]);
	free(buf);
	if (ret)
		return ret;
	if (r[0] == -EPROTO || r[1] == -EPROTO) {
		/* Another version's manifest may be the newer one: taking the
		 * other slot would lose it, and the next commit overwrite it. */
		nvmefs_err("%s: run area: manifest slot %c is of another version than %u "
			   "(or carries a newer committer's mark)",
			   a->dev->path, r[0] == -EPROTO ? 'A' : 'B', NVMEFS_OBJ_VERSION);
		ret = -EPROTO;
	} else if (r[0] == -ENOMEM || r[1] == -ENOMEM) {
		ret = -ENOMEM;
	}
	if (ret) {
		nvmefs_manifest_free(&m[0]);
		nvmefs_manifest_free(&m[1]);
		return ret;
	}
	if (r[0] && r[1]) {
		nvmefs_err("%s: run area: neither manifest slot holds a valid manifest",
			   a->dev->path);
		return -EINVAL;
	}
	a->cur_slot = r[0] || (!r[1] && m[1].seq > m[0].seq);
	a->cur = m[a->cur_slot];
	nvmefs_manifest_free(&m[!a->cur_slot]);
	a->next_id = a->cur.next_id;
	return 0;
}

int nvmefs_runs_open(struct nvmefs_runs **out, struct nvmefs_dev *dev,
		     const struct nvmefs_runs_geom *g, const uint8_t uuid[16])
{
	struct nvmefs_runs *a;
	int ret;

	*out = NULL;
	ret = check_geom(dev, g);
	if (ret)
		return ret;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->dev = dev;
	a->g = *g;
	memcpy(a->uuid, uuid, 16);
	ret = load_manifest(a);
	if (ret)
		goto err_free;
	pthread_mutex_init(&a->lock, NULL);
	*out = a;
	return 0;
err_free:
	free(a);
	return ret;
}

void nvmefs_runs_close(struct nvmefs_runs *a)
{
	if (!a)
		return;
	nvmefs_manifest_free(&a->cur);
	free(a->busy);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

const struct nvmefs_manifest *nvmefs_runs_current(const struct nvmefs_runs *a)
{
	return &a->cur;
}

/* ---- space (a->lock held) ---- */

/* Every extent held: the current manifest's runs and the busy ones, by
 * start. */
static struct nvmefs_runs_ext *held(const struct nvmefs_runs *a, size_t *n)
{
	struct nvmefs_runs_ext *e;

	*n = a->cur.n + a->nbusy;
	e = malloc((*n ? *n : 1) * sizeof(*e));
	if (!e)
		return NULL;
	for (size_t i = 0; i < a->cur.n; i++) {
		const struct nvmefs_run_meta *r = &a->cur.runs[i];

		e[i] = (struct nvmefs_runs_ext){.id = r->id,
						.start = r->start,
						.blocks = nvmefs_run_blocks(r),
						.done = true};
	}
	if (a->nbusy)
		memcpy(e + a->cur.n, a->busy, a->nbusy * sizeof(*e));
	qsort(e, *n, sizeof(*e), nvmefs_ext_by_start);
	return e;
}

/* A free extent: the first of want blocks, or (want 0) the largest. */
static int find_free(const struct nvmefs_runs *a, uint64_t want, uint64_t *start, uint64_t *len)
{
	uint64_t pos = 2ull * nvmefs_runs_slot_blocks(&a->g), gap;
	struct nvmefs_runs_ext *e;
	size_t n;

	e = held(a, &n);
	if (!e)
		return -ENOMEM;
	*len = 0;
	for (size_t i = 0; i <= n; i++) {
		uint64_t end = i < n ? e[i].start : a->g.blocks;

		gap = end > pos ? end - pos : 0;
		if (want ? gap >= want && !*len : gap > *len) {
			*start = pos;
			*len = want ? want : gap;
		}
		if (i < n && e[i].start + e[i].blocks > pos)
			pos = e[i].start + e[i].blocks;
	}
	free(e);
	return *len ? 0 : -ENOSPC;
}

/* The busy entry of run id: the writer's (held false) or a reader's hold. */
static struct nvmefs_runs_ext *busy_find(struct nvmefs_runs *a, uint64_t id, bool held)
{
	for (size_t i = 0; i < a->nbusy; i++)
		if (a->busy[i].id == id && a->busy[i].held == held)
			return &a->busy[i];
	return NULL;
}

static void busy_remove(struct nvmefs_runs *a, uint64_t id, bool held)
{
	struct nvmefs_runs_ext *e = busy_find(a, id, held);

	if (e)
		*e = a->busy[--a->nbusy];
}

int nvmefs_runs_drop(struct nvmefs_runs *a, uint64_t id)
{
	struct nvmefs_runs_ext *e;
	int ret = 0;

	pthread_mutex_lock(&a->lock);
	e = busy_find(a, id, false); /* a reader's hold of id stays */
	if (e && !e->done)
		ret = -EBUSY; /* its writer would write on space given away */
	else
		busy_remove(a, id, false);
	pthread_mutex_unlock(&a->lock);
	return ret;
}

int nvmefs_runs_hold(struct nvmefs_runs *a, const struct nvmefs_run_meta *r)
{
	int ret;

	pthread_mutex_lock(&a->lock);
	ret = nvmefs_grow(&a->busy, &a->busy_cap, a->nbusy + 1, sizeof(*a->busy));
	if (!ret)
		a->busy[a->nbusy++] = (struct nvmefs_runs_ext){.id = r->id,
							       .start = r->start,
							       .blocks = nvmefs_run_blocks(r),
							       .held = true,
							       .meta = *r};
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void nvmefs_runs_release(struct nvmefs_runs *a, uint64_t id)
{
	pthread_mutex_lock(&a->lock);
	busy_remove(a, id, true);
	pthread_mutex_unlock(&a->lock);
}

uint64_t nvmefs_runs_free_blocks(struct nvmefs_runs *a)
{
	uint64_t pos = 2ull * nvmefs_runs_slot_blocks(&a->g), used = 0;
	struct nvmefs_runs_ext *e;
	size_t n;

	pthread_mutex_lock(&a->lock);
	e = held(a, &n);
	pthread_mutex_unlock(&a->lock);
	if (!e)
		return 0;
	for (size_t i = 0; i < n; i++) { /* by start; a held run may be live too */
		uint64_t end = e[i].start + e[i].blocks;

		if (end > pos) {
			used += end - (e[i].start > pos ? e[i].start : pos);
			pos = end;
		}
	}
	free(e);
	return a->g.blocks - 2ull * nvmefs_runs_slot_blocks(&a->g) - used;
}

bool nvmefs_runs_failed(struct nvmefs_runs *a)
{
	bool failed;

	pthread_mutex_lock(&a->lock);
	failed = a->failed;
	pthread_mutex_unlock(&a->lock);
	return failed;
}

/* ---- commit ---- */

/* x and y name the same run the same way: every field and key byte (a
 * lookup trusts level, entries and keys as much as the extent). */
static bool meta_eq(const struct nvmefs_run_meta *x, const struct nvmefs_run_meta *y)
{
	return x->id == y->id && x->start == y->start && x->nentries == y->nentries &&
	       x->level == y->level && x->data_blocks == y->data_blocks &&
	       x->index_blocks == y->index_blocks && x->filter_blocks == y->filter_blocks &&
	       x->min_len == y->min_len && x->max_len == y->max_len &&
	       !memcmp(x->min, y->min, x->min_len) && !memcmp(x->max, y->max, x->max_len);
}

/* Is r a run of the current manifest, or one written and pending, as it
 * was given? */
static bool known(struct nvmefs_runs *a, const struct nvmefs_run_meta *r)
{
	const struct nvmefs_runs_ext *e = busy_find(a, r->id, false);
	const struct nvmefs_run_meta *c = NULL;

	if (e)
		return e->done && meta_eq(&e->meta, r);
	for (size_t i = 0; i < a->cur.n && !c; i++)
		if (a->cur.runs[i].id == r->id)
			c = &a->cur.runs[i];
	return c && meta_eq(c, r);
}

/* Encode the next manifest of runs into buf and check it decodes (no run
 * twice, none overlapping): its length, or -errno. */
static ssize_t encode_next(struct nvmefs_runs *a, const struct nvmefs_run_meta *runs, size_t n,
			   const struct nvmefs_mark *mark, uint8_t *buf, size_t cap,
			   struct nvmefs_manifest *out)
{
	struct nvmefs_manifest m = {.seq = a->cur.seq + 1, .n = n, .mark = *mark};
	ssize_t len;
	int ret;

	pthread_mutex_lock(&a->lock);
	if (a->failed) { /* a manifest we do not know may be durable */
		pthread_mutex_unlock(&a->lock);
		return -EIO;
	}
	m.next_id = a->next_id;
	for (size_t i = 0; i < n; i++)
		if (!known(a, &runs[i])) {
			pthread_mutex_unlock(&a->lock);
			nvmefs_err("%s: run %" PRIu64 " is neither live nor written", a->dev->path,
				   runs[i].id);
			return -EINVAL;
		}
	pthread_mutex_unlock(&a->lock);
	m.runs = (struct nvmefs_run_meta *)runs;
	len = nvmefs_manifest_encode(&m, a->uuid, buf, cap);
	if (len < 0)
		return len;
	ret = nvmefs_manifest_decode(buf, cap, a->uuid, &a->g, out);
	return ret ? ret : len;
}

/* The manifest m is durable in slot s: make it current. */
static void install(struct nvmefs_runs *a, struct nvmefs_manifest *m, unsigned s)
{
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < m->n; i++) /* written and now live; holds stay */
		busy_remove(a, m->runs[i].id, false);
	nvmefs_manifest_free(&a->cur);
	a->cur = *m;
	a->cur_slot = s;
	pthread_mutex_unlock(&a->lock);
}

/*
 * The manifest's write or its flush failed: it may be durable all the
 * same, naming runs the caller may now drop, and a reopen would take it.
 * Nothing may take their space, so nothing more is written until then.
 */
static void fail(struct nvmefs_runs *a)
{
	pthread_mutex_lock(&a->lock);
	a->failed = true;
	pthread_mutex_unlock(&a->lock);
}

int nvmefs_runs_commit(struct nvmefs_runs *a, const struct nvmefs_run_meta *runs, size_t n,
		       const struct nvmefs_mark *mark)
{
	uint32_t sb = nvmefs_runs_slot_blocks(&a->g);
	size_t cap = (size_t)sb * NVMEFS_BLOCK;
	unsigned s = !a->cur_slot;
	struct nvmefs_manifest m;
	uint8_t *buf;
	ssize_t len;
	int ret;

	buf = nvmefs_aligned_alloc(cap);
	if (!buf)
		return -ENOMEM;
	len = encode_next(a, runs, n, mark, buf, cap, &m);
	ret = len < 0 ? (int)len : 0;
	if (ret)
		goto out;
	ret = nvmefs_dev_flush(a->dev); /* every run it names is durable first */
	if (!ret) {
		ret = pio(a, true, (uint64_t)s * sb, buf, (uint64_t)len / NVMEFS_BLOCK);
		if (!ret)
			ret = nvmefs_dev_flush(a->dev);
		if (ret)
			fail(a);
	}
	if (ret)
		nvmefs_manifest_free(&m);
	else
		install(a, &m, s);
out:
	free(buf);
	return ret;
}

/* ---- writing a run ---- */

static void runw_free(struct nvmefs_runw *w)
{
	free(w->buf);
	free(w->idx);
	free(w->hash);
	w->buf = w->idx = NULL;
	w->hash = NULL;
}

void nvmefs_runw_abort(struct nvmefs_runw *w)
{
	pthread_mutex_lock(&w->a->lock);
	busy_remove(w->a, w->meta.id, false);
	pthread_mutex_unlock(&w->a->lock);
	runw_free(w);
}

int nvmefs_runw_begin(struct nvmefs_runw *w, struct nvmefs_runs *a, uint32_t level, uint64_t want)
{
	struct nvmefs_runs_ext e = {.done = false};
	int ret;

	*w = (struct nvmefs_runw){.a = a};
	if (level >= NVMEFS_RUN_LEVELS)
		return -EINVAL;
	w->buf = nvmefs_aligned_alloc(NVMEFS_RUN_BUF);
	if (!w->buf)
		return -ENOMEM;
	if (want > UINT32_MAX) /* a run's block counts are 32 bits */
		want = UINT32_MAX;
	pthread_mutex_lock(&a->lock);
	ret = a->failed ? -EIO : find_free(a, want, &e.start, &e.blocks);
	if (e.blocks > UINT32_MAX) /* the largest extent: give the rest to others */
		e.blocks = UINT32_MAX;
	if (!ret)
		ret = nvmefs_grow(&a->busy, &a->busy_cap, a->nbusy + 1, sizeof(*a->busy));
	if (!ret) {
		e.id = a->next_id++;
		a->busy[a->nbusy++] = e;
	}
	pthread_mutex_unlock(&a->lock);
	if (ret) {
		runw_free(w);
		return ret;
	}
	w->meta = (struct nvmefs_run_meta){.id = e.id, .start = e.start, .level = level};
	w->cap = e.blocks;
	nvmefs_run_start(&w->w, w->buf, NVMEFS_BLOCK);
	return 0;
}

/* Seal and write the run block being filled, and start the next. */
static int put_block(struct nvmefs_runw *w)
{
	size_t len = nvmefs_run_finish(&w->w, w->a->uuid, w->meta.id, w->nrb, w->meta.level);
	uint64_t nb = len / NVMEFS_BLOCK;
	int ret;

	if (w->meta.data_blocks + nb > w->cap)
		return -ENOSPC;
	ret = pio(w->a, true, w->meta.start + w->meta.data_blocks, w->buf, nb);
	if (ret)
		return ret;
	w->meta.data_blocks += (uint32_t)nb;
	w->nrb++;
	w->big = false;
	nvmefs_run_start(&w->w, w->buf, NVMEFS_BLOCK);
	return 0;
}

/* The entry just added opens a run block: its first key goes to the index. */
static int index_add(struct nvmefs_runw *w, const uint8_t *key, size_t klen)
{
	uint32_t off = htole32(w->meta.data_blocks);
	uint16_t kl = htole16((uint16_t)klen);
	uint8_t *p;
	int ret;

	ret = nvmefs_grow(&w->idx, &w->idx_cap, w->idx_len + IDX_ENT_HDR + klen, 1);
	if (ret)
		return ret;
	p = w->idx + w->idx_len;
	memcpy(p, &off, 4);
	memcpy(p + 4, &kl, 2);
	memcpy(p + IDX_ENT_HDR, key, klen);
	w->idx_len += IDX_ENT_HDR + klen;
	return 0;
}

/* Note the entry in the meta, the index and the filter's hashes. */
static int note_entry(struct nvmefs_runw *w, const uint8_t *key, size_t klen)
{
	struct nvmefs_run_meta *m = &w->meta;
	int ret = 0;

	if (w->w.n == 1)
		ret = index_add(w, key, klen);
	if (!ret)
		ret = nvmefs_grow(&w->hash, &w->hash_cap, 2 * (w->nhash + 1), sizeof(*w->hash));
	if (ret)
		return ret;
	nvmefs_filter_hash(key, klen, w->hash + 2 * w->nhash++);
	if (!m->nentries) {
		memcpy(m->min, key, klen);
		m->min_len = (uint16_t)klen;
	}
	memcpy(m->max, key, klen);
	m->max_len = (uint16_t)klen;
	m->nentries++;
	return 0;
}

int nvmefs_runw_add(struct nvmefs_runw *w, const uint8_t *key, size_t klen, const void *val,
		    size_t vlen, bool tomb)
{
	int ret;

	if (w->meta.nentries &&
	    nvmefs_key_cmp(w->meta.max, w->meta.max_len, key, klen) >= 0) /* across blocks */
		return -EINVAL;
	ret = nvmefs_run_add(&w->w, key, klen, val, vlen, tomb);
	if (ret == -ENOSPC && w->w.n) {
		ret = put_block(w);
		if (ret)
			return ret;
		ret = nvmefs_run_add(&w->w, key, klen, val, vlen, tomb);
	}
	if (ret == -ENOSPC) { /* alone it does not fit 4 KiB: a longer run block */
		nvmefs_run_start(&w->w, w->buf, NVMEFS_RUN_BUF);
		w->big = true;
		ret = nvmefs_run_add(&w->w, key, klen, val, vlen, tomb);
	}
	if (!ret)
		ret = note_entry(w, key, klen);
	if (!ret && w->big) /* that block holds it alone */
		ret = put_block(w);
	return ret;
}

/* Index and filter, sealed one after the other in a new buffer. */
static uint8_t *build_tail(struct nvmefs_runw *w, uint32_t *ib, uint32_t *fb)
{
	uint64_t nbits = nvmefs_filter_nbits(w->meta.nentries);
	struct nvmefs_obj oi = {.id = w->meta.id, .used = (uint32_t)w->idx_len, .count = w->nrb};
	struct nvmefs_obj of = {.id = w->meta.id,
				.used = (uint32_t)(nbits / 8),
				.count = w->meta.nentries,
				.aux = nbits,
				.aux2 = NVMEFS_FILTER_PROBES};
	uint8_t *t, *f;

	*ib = nvmefs_obj_blocks(oi.used);
	*fb = nvmefs_obj_blocks(of.used);
	t = nvmefs_aligned_alloc(((size_t)*ib + *fb) * NVMEFS_BLOCK);
	if (!t)
		return NULL;
	memcpy(t + NVMEFS_OBJ_HDR, w->idx, w->idx_len);
	nvmefs_obj_seal(t, NVMEFS_INDEX_MAGIC, w->a->uuid, &oi);
	f = t + (size_t)*ib * NVMEFS_BLOCK;
	memset(f + NVMEFS_OBJ_HDR, 0, of.used);
	for (size_t i = 0; i < w->nhash; i++)
		nvmefs_filter_add(f + NVMEFS_OBJ_HDR, nbits, w->hash + 2 * i);
	nvmefs_obj_seal(f, NVMEFS_FILTER_MAGIC, w->a->uuid, &of);
	return t;
}

/* Write the last block and the tail, flush. */
static int write_tail(struct nvmefs_runw *w)
{
	uint32_t ib, fb;
	uint8_t *t;
	int ret = w->w.n ? put_block(w) : 0;

	if (ret)
		return ret;
	t = build_tail(w, &ib, &fb);
	if (!t)
		return -ENOMEM;
	ret = (uint64_t)w->meta.data_blocks + ib + fb > w->cap ? -ENOSPC : 0;
	if (!ret)
		ret = pio(w->a, true, w->meta.start + w->meta.data_blocks, t, (uint64_t)ib + fb);
	if (!ret)
		ret = nvmefs_dev_flush(w->a->dev);
	free(t);
	w->meta.index_blocks = ib;
	w->meta.filter_blocks = fb;
	return ret;
}

int nvmefs_runw_end(struct nvmefs_runw *w, struct nvmefs_run_meta *meta)
{
	struct nvmefs_runs_ext *e;
	int ret = w->meta.nentries ? write_tail(w) : -ENODATA;

	if (ret) {
		nvmefs_runw_abort(w);
		return ret;
	}
	pthread_mutex_lock(&w->a->lock);
	e = busy_find(w->a, w->meta.id, false);
	assert(e); /* only nvmefs_runw_abort drops a run being written (drop: -EBUSY) */
	e->blocks = nvmefs_run_blocks(&w->meta); /* the rest is free again */
	e->done = true;
	e->meta = w->meta; /* what commit checks it against */
	pthread_mutex_unlock(&w->a->lock);
	*meta = w->meta;
	runw_free(w);
	return 0;
}

/* ---- reading a run ---- */

/* Run block i's length in 4 KiB blocks. */
static uint32_t rb_len(const struct nvmefs_runr *r, uint32_t i)
{
	return (i + 1 < r->nrb ? r->off[i + 1] : r->meta.data_blocks) - r->off[i];
}

static int damaged(const struct nvmefs_runr *r, const char *what, uint64_t i)
{
	nvmefs_err("%s: run %" PRIu64 " (level %u, area block %" PRIu64 "): %s %" PRIu64
		   " is damaged",
		   r->a->dev->path, r->meta.id, r->meta.level, r->meta.start, what, i);
	return -EINVAL;
}

/* Index entry i at p (avail bytes): its size, or 0 when it is not valid
 * after entry i - 1. */
static size_t index_ent(struct nvmefs_runr *r, uint32_t i, const uint8_t *p, size_t avail)
{
	uint32_t off;
	uint16_t kl;

	if (avail < IDX_ENT_HDR)
		return 0;
	memcpy(&off, p, 4);
	memcpy(&kl, p + 4, 2);
	r->off[i] = le32toh(off);
	r->klen[i] = le16toh(kl);
	r->key[i] = p + IDX_ENT_HDR;
	if (r->klen[i] > avail - IDX_ENT_HDR || nvmefs_key_check(r->key[i], r->klen[i]) ||
	    r->off[i] >= r->meta.data_blocks || (i == 0 && r->off[i]))
		return 0;
	if (i && (r->off[i] <= r->off[i - 1] || r->off[i] - r->off[i - 1] > NVMEFS_RUN_BLOCKS_MAX ||
		  nvmefs_key_cmp(r->key[i - 1], r->klen[i - 1], r->key[i], r->klen[i]) >= 0))
		return 0;
	return IDX_ENT_HDR + r->klen[i];
}

static int parse_index(struct nvmefs_runr *r, const struct nvmefs_obj *o)
{
	const uint8_t *p = r->buf + NVMEFS_OBJ_HDR;
	size_t pos = 0, sz;

	/* Each entry takes its header and a key byte at least: a count past
	 * what used holds is refused before it sizes anything. */
	if (o->id != r->meta.id || o->nblocks != r->meta.index_blocks || !o->count ||
	    o->count > o->used / (IDX_ENT_HDR + 1) || o->count > r->meta.data_blocks)
		return -EINVAL;
	r->nrb = (uint32_t)o->count;
	r->off = calloc(r->nrb, sizeof(*r->off));
	r->key = calloc(r->nrb, sizeof(*r->key));
	r->klen = calloc(r->nrb, sizeof(*r->klen));
	if (!r->off || !r->key || !r->klen)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->nrb; i++, pos += sz)
		if (!(sz = index_ent(r, i, p + pos, o->used - pos)))
			return -EINVAL;
	if (pos != o->used || r->meta.data_blocks - r->off[r->nrb - 1] > NVMEFS_RUN_BLOCKS_MAX)
		return -EINVAL;
	return nvmefs_key_cmp(r->key[0], r->klen[0], r->meta.min, r->meta.min_len) ? -EINVAL : 0;
}

static int check_filter(struct nvmefs_runr *r, const uint8_t *f)
{
	struct nvmefs_obj o;
	int ret = nvmefs_obj_check(f, (size_t)r->meta.filter_blocks * NVMEFS_BLOCK,
				   NVMEFS_FILTER_MAGIC, r->a->uuid, &o);

	if (ret)
		return ret;
	if (o.id != r->meta.id || o.nblocks != r->meta.filter_blocks || o.aux == 0 ||
	    o.count != r->meta.nentries || o.aux != nvmefs_filter_nbits(o.count) ||
	    o.used != o.aux / 8 || o.aux2 != NVMEFS_FILTER_PROBES)
		return -EINVAL;
	r->bits = f + NVMEFS_OBJ_HDR;
	r->nbits = o.aux;
	return 0;
}

void nvmefs_runr_close(struct nvmefs_runr *r)
{
	free(r->buf);
	free(r->off);
	free(r->key);
	free(r->klen);
	*r = (struct nvmefs_runr){0};
}

int nvmefs_runr_open(struct nvmefs_runr *r, struct nvmefs_runs *a,
		     const struct nvmefs_run_meta *meta)
{
	uint64_t nb = (uint64_t)meta->index_blocks + meta->filter_blocks;
	struct nvmefs_obj o;
	int ret;

	*r = (struct nvmefs_runr){.a = a, .meta = *meta};
	r->buf = nvmefs_aligned_alloc(nb * NVMEFS_BLOCK);
	if (!r->buf)
		return -ENOMEM;
	ret = pio(a, false, meta->start + meta->data_blocks, r->buf, nb);
	if (ret)
		goto err;
	ret = nvmefs_obj_check(r->buf, (size_t)meta->index_blocks * NVMEFS_BLOCK,
			       NVMEFS_INDEX_MAGIC, a->uuid, &o);
	if (!ret)
		ret = parse_index(r, &o);
	if (ret) {
		ret = ret == -ENOMEM ? ret : damaged(r, "index block", 0);
		goto err;
	}
	ret = check_filter(r, r->buf + (size_t)meta->index_blocks * NVMEFS_BLOCK);
	if (ret) {
		ret = damaged(r, "filter block", 0);
		goto err;
	}
	return 0;
err:
	nvmefs_runr_close(r);
	return ret;
}

bool nvmefs_runr_may_hold(const struct nvmefs_runr *r, const uint8_t *key, size_t klen)
{
	uint64_t h[2];

	if (nvmefs_key_cmp(key, klen, r->meta.min, r->meta.min_len) < 0 ||
	    nvmefs_key_cmp(key, klen, r->meta.max, r->meta.max_len) > 0)
		return false;
	nvmefs_filter_hash(key, klen, h);
	return nvmefs_filter_test(r->bits, r->nbits, h);
}

/* The last run block whose first key is <= key (0 when none is). */
uint32_t nvmefs_runr_block_of(const struct nvmefs_runr *r, const uint8_t *key, size_t klen)
{
	uint32_t lo = 0, hi = r->nrb; /* the answer is in [lo, hi) */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (nvmefs_key_cmp(r->key[mid], r->klen[mid], key, klen) <= 0)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Read and check run block i into buf: it must be this run's, as long as
 * the index says, and start with the index's key. */
static int load_block(struct nvmefs_runr *r, uint32_t i, void *buf, struct nvmefs_run_hdr *h)
{
	uint32_t nb = rb_len(r, i);
	struct nvmefs_run_ent e;
	size_t pos = 0;
	int ret;

	ret = pio(r->a, false, r->meta.start + r->off[i], buf, nb);
	if (ret)
		return ret;
	__atomic_fetch_add(&r->block_reads, 1, __ATOMIC_RELAXED); /* lookups in threads */
	ret = nvmefs_run_decode(buf, (size_t)nb * NVMEFS_BLOCK, r->a->uuid, r->meta.id, i, h);
	if (!ret && (h->nblocks != nb || h->level != r->meta.level))
		ret = -EINVAL;
	if (!ret && (!nvmefs_run_next(buf, h, &pos, &e) ||
		     nvmefs_key_cmp(e.key, e.klen, r->key[i], r->klen[i])))
		ret = -EINVAL;
	return ret ? damaged(r, "run block", i) : 0;
}

uint32_t nvmefs_runr_block_len(const struct nvmefs_runr *r, uint32_t i)
{
	return rb_len(r, i);
}

int nvmefs_runr_load(struct nvmefs_runr *r, uint32_t i, void *buf, struct nvmefs_run_hdr *h)
{
	return load_block(r, i, buf, h);
}

int nvmefs_run_block_find(const void *buf, const struct nvmefs_run_hdr *h, const uint8_t *key,
			  size_t klen, struct nvmefs_run_ent *e)
{
	size_t pos = 0;

	while (nvmefs_run_next(buf, h, &pos, e)) {
		int c = nvmefs_key_cmp(e->key, e->klen, key, klen);

		if (c >= 0)
			return c ? -ENOENT : 0;
	}
	return -ENOENT;
}

int nvmefs_runr_get(struct nvmefs_runr *r, const uint8_t *key, size_t klen, void *buf,
		    struct nvmefs_run_ent *e)
{
	struct nvmefs_run_hdr h;
	int ret;

	if (!nvmefs_runr_may_hold(r, key, klen))
		return -ENOENT;
	ret = load_block(r, nvmefs_runr_block_of(r, key, klen), buf, &h);
	return ret ? ret : nvmefs_run_block_find(buf, &h, key, klen, e);
}

/* ---- iterating ---- */

int nvmefs_runit_init(struct nvmefs_runit *it, struct nvmefs_runr *r)
{
	*it = (struct nvmefs_runit){.r = r};
	it->buf = nvmefs_aligned_alloc(NVMEFS_RUN_BUF);
	return it->buf ? 0 : -ENOMEM;
}

void nvmefs_runit_exit(struct nvmefs_runit *it)
{
	free(it->buf);
	it->buf = NULL;
}

int nvmefs_runit_seek(struct nvmefs_runit *it, const uint8_t *key, size_t klen)
{
	struct nvmefs_run_ent e;
	size_t pos = 0;
	int ret;

	it->blk = key ? nvmefs_runr_block_of(it->r, key, klen) : 0;
	it->pos = 0;
	it->loaded = false;
	if (!key)
		return 0;
	ret = load_block(it->r, it->blk, it->buf, &it->h);
	if (ret)
		return ret;
	it->loaded = true;
	while (nvmefs_run_next(it->buf, &it->h, &pos, &e) &&
	       nvmefs_key_cmp(e.key, e.klen, key, klen) < 0)
		it->pos = pos; /* after an entry before key */
	return 0;
}

int nvmefs_runit_next(struct nvmefs_runit *it, struct nvmefs_run_ent *e)
{
	for (;;) {
		if (!it->loaded) {
			int ret;

			if (it->blk >= it->r->nrb)
				return 0;
			ret = load_block(it->r, it->blk, it->buf, &it->h);
			if (ret)
				return ret;
			it->loaded = true;
			it->pos = 0;
		}
		if (nvmefs_run_next(it->buf, &it->h, &it->pos, e))
			return 1;
		it->blk++;
		it->loaded = false;
	}
}

static int runit_next(void *ctx, struct nvmefs_run_ent *e)
{
	return nvmefs_runit_next(ctx, e);
}

struct nvmefs_kv_src nvmefs_runit_src(struct nvmefs_runit *it)
{
	return (struct nvmefs_kv_src){.next = runit_next, .ctx = it};
}

/* ---- merging ---- */

enum { M_ADVANCE, M_HEAD, M_END };

int nvmefs_merge_init(struct nvmefs_merge *m, const struct nvmefs_kv_src *src, unsigned n,
		      bool keep_tombs)
{
	*m = (struct nvmefs_merge){.src = src, .n = n, .keep_tombs = keep_tombs};
	m->head = calloc(n ? n : 1, sizeof(*m->head));
	m->state = calloc(n ? n : 1, 1); /* M_ADVANCE */
	if (m->head && m->state)
		return 0;
	nvmefs_merge_exit(m);
	return -ENOMEM;
}

void nvmefs_merge_exit(struct nvmefs_merge *m)
{
	free(m->head);
	free(m->state);
	m->head = NULL;
	m->state = NULL;
}

static int ent_cmp(const struct nvmefs_run_ent *a, const struct nvmefs_run_ent *b)
{
	return nvmefs_key_cmp(a->key, a->klen, b->key, b->klen);
}

/* Advance the sources whose head was used; *best: the smallest head (the
 * newest source's on a tie), or -1 at the end. 0 or a source's -errno. */
static int merge_pick(struct nvmefs_merge *m, int *best)
{
	*best = -1;
	for (unsigned i = 0; i < m->n; i++) {
		if (m->state[i] == M_ADVANCE) {
			int ret = m->src[i].next(m->src[i].ctx, &m->head[i]);

			if (ret < 0)
				return ret;
			m->state[i] = ret ? M_HEAD : M_END;
		}
		if (m->state[i] == M_HEAD &&
		    (*best < 0 || ent_cmp(&m->head[i], &m->head[*best]) < 0))
			*best = (int)i;
	}
	return 0;
}

int nvmefs_merge_next(struct nvmefs_merge *m, struct nvmefs_run_ent *e)
{
	for (;;) {
		int best, ret = merge_pick(m, &best);

		if (ret)
			return ret;
		if (best < 0)
			return 0;
		for (unsigned i = 0; i < m->n; i++) /* older entries of the key are hidden */
			if (m->state[i] == M_HEAD && !ent_cmp(&m->head[i], &m->head[best]))
				m->state[i] = M_ADVANCE;
		if (m->head[best].tomb && !m->keep_tombs)
			continue;
		*e = m->head[best];
		return 1;
	}
}

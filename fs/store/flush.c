// SPDX-License-Identifier: MIT
/*
 * The store's flush (store.h, nvmefs_store_freeze and nvmefs_store_flush):
 * the frozen memtable written as a level-0 run and a manifest naming it
 * with the caller's mark.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store_i.h"

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
	ret = nvmefs_store_srun_open(s, &meta, out);
	if (ret)
		nvmefs_store_drop_written(s, meta.id);
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
		ret = nvmefs_store_commit_view(s, NULL, 0, NULL, 0, &s->imm_mark, true);
	pthread_mutex_lock(&s->lock);
	if (!ret)
		imm = nvmefs_store_imm_drop(s); /* NULL when nvmefs_store_commit_view dropped it */
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->commit_lock);
	nvmefs_store_mem_free(imm);
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
	ret = nvmefs_store_commit_view(s, NULL, 0, &sr, 1, &s->imm_mark, true);
	pthread_mutex_unlock(&s->commit_lock);
	if (ret) {
		uint64_t id = sr->r.meta.id;

		nvmefs_store_srun_close(s, sr);
		nvmefs_store_drop_written(s, id);
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
	struct nvmefs_memtable *fresh =
		nvmefs_store_mem_new(s); /* before the lock: O(1) under it */
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
	nvmefs_store_mem_free(fresh);
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

int nvmefs_store_flush(struct nvmefs_store *s, const struct nvmefs_mark *mark)
{
	int ret = 0;

	pthread_mutex_lock(&s->flush_lock);
	for (;;) {
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

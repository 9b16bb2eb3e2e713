/* SPDX-License-Identifier: MIT */
/*
 * store_i.h: the store's insides, shared by its files (fs/store/store.c:
 * views, the run-block cache, open, close, put and get; flush.c; compact.c;
 * iter.c), and the run area under a store for the store's tests.
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
#ifndef NVMEFS_STORE_I_H
#define NVMEFS_STORE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtable_i.h"
#include "runs_i.h"
#include "store.h"

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
	struct nvmefs_runs *a;
	struct nvmefs_store_cfg cfg;
	pthread_mutex_t flush_lock, compact_lock, commit_lock;
	pthread_mutex_t lock;
	struct nvmefs_memtable *mem;  /* protected by lock */
	struct nvmefs_memtable *imm;  /* frozen, being flushed; set and cleared under lock */
	struct nvmefs_mark imm_mark;  /* the mark imm was frozen with */
	struct view *view;	      /* protected by lock */
	struct bcache *cache;	      /* run blocks lookups read (its own lock); NULL: none */
	struct nvmefs_store_stats st; /* protected by lock */
	uint64_t seed;		      /* memtables' skip-list seeds; protected by lock */
	/* Each level's compaction cursor: the largest key of the run it last
	 * pushed down (length 0: none); protected by compact_lock. */
	uint8_t cursor[NVMEFS_RUN_LEVELS][NVMEFS_KEY_MAX];
	uint16_t cursor_len[NVMEFS_RUN_LEVELS];
};

/* The run area (for its free space and manifest; the store's). */
struct nvmefs_runs *nvmefs_store_area(struct nvmefs_store *s);

/* ---- between the store's files (store.c defines them) ---- */

/* Open run m (its index and filter) and hold its extent: *out, named by
 * no view yet. 0 or -errno. */
int nvmefs_store_srun_open(struct nvmefs_store *s, const struct nvmefs_run_meta *m,
			   struct srun **out);
/* Close a run no view names (refs 0): its extent is no longer held. */
void nvmefs_store_srun_close(struct nvmefs_store *s, struct srun *sr);
/* Drop a reference to v (lock held); NULL is fine. */
void nvmefs_store_view_put(struct nvmefs_store *s, struct view *v);
/* Give up run id, written by nvmefs_runw_end and not committed. */
void nvmefs_store_drop_written(struct nvmefs_store *s, uint64_t id);
/* Take the frozen memtable away (lock held): it, for the caller to free,
 * or NULL when a walk still reads it. */
struct nvmefs_memtable *nvmefs_store_imm_drop(struct nvmefs_store *s);
/* Commit the current manifest less drop[0..ndrop) plus fresh[0..nfresh)
 * with *mark and install its view (commit_lock held); clear_imm: the
 * frozen memtable goes in the same step. 0 or -errno (nothing changed). */
int nvmefs_store_commit_view(struct nvmefs_store *s, struct srun *const *drop, size_t ndrop,
			     struct srun *const *fresh, size_t nfresh,
			     const struct nvmefs_mark *mark, bool clear_imm);
/* A new empty memtable with one reference, or NULL (out of memory). */
struct nvmefs_memtable *nvmefs_store_mem_new(struct nvmefs_store *s);
/* Drop a reference to m, freeing it at the last; NULL is fine. */
void nvmefs_store_mem_free(struct nvmefs_memtable *m);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Format v2's sorted runs on a member's metadata area (docs/FORMAT.md,
 * "The run area"): writing a run, reading it back, and the manifest that says which
 * runs are live. A format v2 volume's store (store.h) keeps its runs in
 * member 0's run area through it; it is a module over one member
 * descriptor and a byte range of it, tested on image files
 * (tests/test_runs.c), its manifest decoder fuzzed
 * (tests/fuzz/fuzz_manifest.c) and its reader's index and filter decoders
 * too (tests/fuzz/fuzz_runr.c).
 *
 * The area, in 4 KiB blocks from its start:
 *
 *   [manifest slot A][manifest slot B][run space .........................]
 *
 * A run is one contiguous extent of the run space: its run blocks
 * (sorted_i.h), then its index (the first key and place of every run block),
 * then its bloom filter (10 bits per key, 7 probes from one XXH3-128 of the
 * key). Index, filter and manifest are "objects": a 64-byte header (magic,
 * version, crc32c of the whole object, the volume's journal id, the run id
 * or manifest sequence, length in blocks, bytes used, a count and two
 * kind-specific fields), then their bytes, zeros to the block's end.
 *
 * The manifest lists the live runs (id, level, extent, block counts, entry
 * count, smallest and largest key), after an opaque mark its committer
 * gives (struct nvmefs_mark: the journal position replay starts from and
 * its sequence, the next inode number, the inode count), and goes to the slot that is not
 * current, with the next sequence number; the current manifest is the
 * valid one with the higher sequence. A manifest is valid only whole (its
 * crc covers every block, every block carries nothing older), so a write
 * cut anywhere leaves the previous one current: writing it is the one
 * atomic step that makes a new set of runs live.
 *
 * Space: the run space's free extents are what neither the current
 * manifest nor a run being written or written-but-not-committed holds,
 * computed when needed (there are few runs); a run that leaves the
 * manifest is free once the manifest without it is durable (free after
 * commit, as the data members' extents are). No allocator state is stored: opening the area
 * rebuilds it from the manifest.
 *
 * Threads: the area's functions may be called from several threads; a
 * writer or iterator is used by one thread at a time; a reader's lookups
 * (nvmefs_runr_get, nvmefs_runr_may_hold) may run in several threads at
 * once, each with its own buffer; commits are serialized by the caller
 * (one at a time).
 */
#ifndef NVMEFS_RUNS_I_H
#define NVMEFS_RUNS_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "runfmt_i.h"

struct nvmefs_dev;

/* ---- the area ---- */

struct nvmefs_runs {
	struct nvmefs_dev *dev; /* not owned: outlives the area */
	struct nvmefs_runs_geom g;
	uint8_t uuid[16];
	pthread_mutex_t lock;	    /* protects what follows */
	struct nvmefs_manifest cur; /* the current (durable) manifest */
	unsigned cur_slot;
	uint64_t next_id;
	struct nvmefs_runs_ext *busy; /* runs written or being written, not in cur;
				       * and runs held for readers (in cur or not) */
	size_t nbusy, busy_cap;
	bool failed; /* a commit failed once its manifest's write began */
};

/*
 * Make the area on dev empty: an empty manifest (sequence 1) in slot A,
 * slot B's first block zeroed, flushed. The area must fit the member and
 * have room for at least one run block after the slots. 0 or -errno.
 */
int nvmefs_runs_format(struct nvmefs_dev *dev, const struct nvmefs_runs_geom *g,
		       const uint8_t uuid[16]);

/*
 * Open the area: read both manifest slots and take the valid one with the
 * higher sequence. *out is the caller's until nvmefs_runs_close. Returns 0,
 * -EINVAL (bad geometry, or neither slot holds a manifest: logged naming
 * the member), -EPROTO (either slot holds a manifest of another version,
 * which may be the newer: logged), -ENOMEM or an I/O error.
 */
int nvmefs_runs_open(struct nvmefs_runs **out, struct nvmefs_dev *dev,
		     const struct nvmefs_runs_geom *g, const uint8_t uuid[16]);

/* Free the area (no I/O; runs being written must have ended first). */
void nvmefs_runs_close(struct nvmefs_runs *a);

/* The current manifest: valid until the caller's next commit. */
const struct nvmefs_manifest *nvmefs_runs_current(const struct nvmefs_runs *a);

/*
 * Make runs[0..n) the live runs, with *mark the caller's state (kept
 * opaque in the manifest: &nvmefs_runs_current(a)->mark keeps the current
 * one; it is copied before anything changes): write them as the next manifest to the spare slot,
 * after flushing the member (so every run it names is durable), and flush again. Each run must be
 * in the current manifest or written by nvmefs_runw_end and not yet committed, its meta unchanged
 * to the last field and key byte
 * (-EINVAL otherwise, the caller's bug; a hold by nvmefs_runs_hold does not
 * make a run either). Afterwards runs of the old manifest that are not
 * named are free (unless held), and written runs that are named are no
 * longer pending. Returns 0, -EINVAL, -ENOSPC (the manifest does not fit a
 * slot), -ENOMEM or an I/O error (the current manifest then stays as it
 * was).
 *
 * An I/O error in the manifest's write or the flush after it sticks, as a
 * failed fsync does: that manifest may be durable all the same (a reopen
 * would take it, mark included), so the space of the runs it
 * names, pending ones the caller may drop included, must not be reused.
 * Every later nvmefs_runw_begin and nvmefs_runs_commit on a then fails
 * with -EIO until the area is closed and opened again, which reads what is
 * durable. Holds and releases go on as before.
 */
int nvmefs_runs_commit(struct nvmefs_runs *a, const struct nvmefs_run_meta *runs, size_t n,
		       const struct nvmefs_mark *mark);

/* Free a run nvmefs_runw_end wrote that will not be committed. Returns 0
 * (also when id is not pending: nothing to free), or -EBUSY when id is
 * still being written (nvmefs_runw_abort gives that up). A hold on id
 * stays (nvmefs_runs_release ends it): its space is free after both. */
int nvmefs_runs_drop(struct nvmefs_runs *a, uint64_t id);

/*
 * Keep run r's extent out of the free space, even after a commit that
 * leaves it out of the manifest, until nvmefs_runs_release(a, r->id): a
 * reader of a run that a compaction retires keeps reading it, and its
 * blocks are reused only once the last reader is gone. r must be live or
 * written (the caller's). 0 or -ENOMEM.
 */
int nvmefs_runs_hold(struct nvmefs_runs *a, const struct nvmefs_run_meta *r);
/* End nvmefs_runs_hold: the run's space is free if no manifest names it. */
void nvmefs_runs_release(struct nvmefs_runs *a, uint64_t id);

/* The run space's free blocks: neither live, nor written or being written
 * and not yet committed, nor held. */
uint64_t nvmefs_runs_free_blocks(struct nvmefs_runs *a);

/* Whether a commit has failed (nvmefs_runs_commit): every later
 * nvmefs_runw_begin and commit then says -EIO, so a caller about to read
 * much for a run it would write can stop first. */
bool nvmefs_runs_failed(struct nvmefs_runs *a);

/* ---- writing a run ---- */

struct nvmefs_runw {
	struct nvmefs_runs *a;
	struct nvmefs_run_meta meta; /* filled as entries come */
	uint64_t cap;		     /* blocks reserved from meta.start */
	uint8_t *buf;		     /* the run block being filled (NVMEFS_RUN_BUF) */
	struct nvmefs_run_writer w;
	bool big;     /* buf holds one entry longer than a block */
	uint64_t nrb; /* run blocks written */
	uint8_t *idx; /* index body so far */
	size_t idx_len, idx_cap;
	uint64_t *hash; /* two halves of XXH3-128 per key */
	size_t nhash, hash_cap;
};

/*
 * Start a run of level on area a: reserve want blocks of run space (0: the
 * largest free extent; at most 2^32 - 1 blocks, a run's limit; what the
 * run does not use is given back at its end) and a new run id. Returns 0,
 * -EINVAL (level), -ENOSPC (no free extent that long), -ENOMEM or -EIO (a
 * commit failed: nvmefs_runs_commit). w must then end with nvmefs_runw_end
 * or nvmefs_runw_abort.
 */
int nvmefs_runw_begin(struct nvmefs_runw *w, struct nvmefs_runs *a, uint32_t level, uint64_t want);

/*
 * Append an entry: keys strictly increasing over the whole run, checked by
 * nvmefs_key_check; a tombstone has no value. Run blocks are 4 KiB unless
 * one entry needs more (up to NVMEFS_RUN_BLOCKS_MAX), written as they fill.
 * Returns 0, -EINVAL (bad or out-of-order key, value too long), -ENOSPC
 * (the reservation is full), -ENOMEM or an I/O error; after an error only
 * nvmefs_runw_abort.
 */
int nvmefs_runw_add(struct nvmefs_runw *w, const uint8_t *key, size_t klen, const void *val,
		    size_t vlen, bool tomb);

/*
 * Write the last run block, the index and the filter, flush the member,
 * and give back the unused reservation. The run is then pending: *meta
 * (a copy of w->meta) is what nvmefs_runs_commit takes, or
 * nvmefs_runs_drop frees it. Returns 0, -ENODATA (no entry: nothing
 * written, the run dropped), -ENOSPC, -ENOMEM or an I/O error (the run
 * dropped). w is ended either way.
 */
int nvmefs_runw_end(struct nvmefs_runw *w, struct nvmefs_run_meta *meta);

/* Give up the run: its space is free again. w is ended. */
void nvmefs_runw_abort(struct nvmefs_runw *w);

/* ---- reading a run ---- */

struct nvmefs_runr {
	struct nvmefs_runs *a;
	struct nvmefs_run_meta meta;
	uint8_t *buf;	     /* index and filter as read */
	uint32_t nrb;	     /* run blocks */
	uint32_t *off;	     /* each run block's first 4 KiB block, from meta.start */
	const uint8_t **key; /* each run block's first key, into buf */
	uint16_t *klen;
	const uint8_t *bits; /* the filter, into buf */
	uint64_t nbits;
	uint64_t block_reads; /* run blocks read by lookups and iterators (atomic) */
};

/*
 * Read run meta's index and filter from area a (which must outlive r) and
 * check them against meta. Returns 0, -EINVAL (damaged or not this run's:
 * logged naming the member, the run and what), -ENOMEM or an I/O error.
 * End with nvmefs_runr_close.
 */
int nvmefs_runr_open(struct nvmefs_runr *r, struct nvmefs_runs *a,
		     const struct nvmefs_run_meta *meta);
/* Free what nvmefs_runr_open allocated (no I/O); r is then zeroed. */
void nvmefs_runr_close(struct nvmefs_runr *r);

/* May the run hold key? false: certainly not (filter and key range). */
bool nvmefs_runr_may_hold(const struct nvmefs_runr *r, const uint8_t *key, size_t klen);

/*
 * Look key up: at most one run block read, into buf (NVMEFS_RUN_BUF bytes,
 * NVMEFS_BLOCK aligned, the caller's). Returns 0 with *e pointing into buf
 * (a tombstone has e->tomb), -ENOENT when the run has no entry for key,
 * -EINVAL (the block is damaged: logged) or an I/O error.
 */
int nvmefs_runr_get(struct nvmefs_runr *r, const uint8_t *key, size_t klen, void *buf,
		    struct nvmefs_run_ent *e);

/*
 * The same in steps, for a cache of run blocks (store.c): the run block
 * that may hold key (the last whose first key is <= key; call only when
 * nvmefs_runr_may_hold says yes), its length in 4 KiB blocks, reading and
 * checking it (as nvmefs_runr_get does: 0, -EINVAL logged, or an I/O
 * error; buf holds nvmefs_runr_block_len(r, i) blocks, NVMEFS_BLOCK
 * aligned), and finding key in a block so read (0 with *e into buf, or
 * -ENOENT).
 */
uint32_t nvmefs_runr_block_of(const struct nvmefs_runr *r, const uint8_t *key, size_t klen);
uint32_t nvmefs_runr_block_len(const struct nvmefs_runr *r, uint32_t i);
int nvmefs_runr_load(struct nvmefs_runr *r, uint32_t i, void *buf, struct nvmefs_run_hdr *h);
int nvmefs_run_block_find(const void *buf, const struct nvmefs_run_hdr *h, const uint8_t *key,
			  size_t klen, struct nvmefs_run_ent *e);

/* ---- iterating in key order ---- */

/* A source of entries in strictly increasing key order. next returns 1
 * with *e (valid until its next call), 0 at the end, or -errno. */
struct nvmefs_kv_src {
	int (*next)(void *ctx, struct nvmefs_run_ent *e);
	void *ctx;
};

struct nvmefs_runit {
	struct nvmefs_runr *r;
	uint8_t *buf; /* NVMEFS_RUN_BUF, owned */
	struct nvmefs_run_hdr h;
	uint32_t blk; /* run block in buf */
	size_t pos;   /* next entry in it */
	bool loaded;
};

/* An iterator over r (which must outlive it), before its first entry.
 * 0 or -ENOMEM. End with nvmefs_runit_exit. */
int nvmefs_runit_init(struct nvmefs_runit *it, struct nvmefs_runr *r);
/* Free the iterator's buffer: entries it gave are then invalid. */
void nvmefs_runit_exit(struct nvmefs_runit *it);

/* Place it before the first entry >= key (key NULL: the run's first).
 * 0, -EINVAL (damaged block) or an I/O error. */
int nvmefs_runit_seek(struct nvmefs_runit *it, const uint8_t *key, size_t klen);

/* The next entry: 1 with *e (into it's buffer, valid until its next call),
 * 0 after the last, -EINVAL or an I/O error. */
int nvmefs_runit_next(struct nvmefs_runit *it, struct nvmefs_run_ent *e);

/* it as a source for nvmefs_merge. */
struct nvmefs_kv_src nvmefs_runit_src(struct nvmefs_runit *it);

/*
 * Several sources as one, in key order: src[0] is the newest, and of the
 * entries with one key only the newest source's comes out (the others are
 * hidden: what a newer run, or the memtable, changed or deleted). With
 * keep_tombs the winning tombstones come out too (compaction above the last
 * level); without, they hide the key and are skipped (reads).
 */
struct nvmefs_merge {
	const struct nvmefs_kv_src *src; /* the caller's, n of them */
	unsigned n;
	bool keep_tombs;
	struct nvmefs_run_ent *head; /* each source's current entry */
	uint8_t *state;		     /* each source: to advance, has a head, ended */
};

/* 0 or -ENOMEM. End with nvmefs_merge_exit. */
int nvmefs_merge_init(struct nvmefs_merge *m, const struct nvmefs_kv_src *src, unsigned n,
		      bool keep_tombs);
/* Free the merge's state; the sources stay the caller's. */
void nvmefs_merge_exit(struct nvmefs_merge *m);

/* 1 with *e (valid until the next call), 0 at the end, or a source's
 * -errno. */
int nvmefs_merge_next(struct nvmefs_merge *m, struct nvmefs_run_ent *e);

#endif

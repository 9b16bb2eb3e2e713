/* SPDX-License-Identifier: MIT */
/*
 * Format v2's key/value store (docs/METADATA-V2.md, step 3b): an LSM tree
 * over one run area (runs.h). A format v2 volume keeps its metadata in
 * one (vol->store): apply writes every record's keys through into it
 * (kv.c), a commit flushes it (journal.c) in place of v1's checkpoint,
 * and the mount loads every key from it; the metadata cache of step 4
 * that reads through it is not built yet. Tested on image files
 * (tests/test_store.c).
 *
 * Writes go to a memtable (memtable_i.h: a skip list, O(log n)). A flush
 * freezes it (a pointer swap under the store's lock: puts go on into a new
 * memtable; the caller may also freeze apart, under its own lock, and
 * flush later), writes it as a level-0 run and commits a manifest naming the
 * run and the caller's mark (struct nvmefs_mark, runfmt.h: the journal
 * position from which replay will fill the memtable again at mount and
 * its sequence, the next inode number, the inode count): what was put after the last flush
 * is lost by a close or a crash, by design.
 *
 * A lookup reads the memtable, then the frozen one being flushed, then the
 * runs newest first (level 0 newest run first, then levels 1, 2, ...),
 * skipping each run whose key range or bloom filter says no, and reading
 * at most one run block of each run that may hold the key, through a cache
 * of run blocks (cfg.cache_bytes, least recently used out first: a block
 * looked up again costs no read). An iterator
 * merges the same sources over a key range (a prefix: a directory's
 * entries, a file's extents).
 *
 * Compaction, leveled: each level from 1 holds runs of disjoint key
 * ranges (a lookup reads at most one of them). When level 0 holds more
 * than cfg.l0_runs runs, all of them and the level-1 runs their keys
 * overlap merge into level 1; when level k >= 1 holds more than its
 * budget (cfg.l1_blocks * cfg.fanout^(k-1) blocks), one of its runs (round
 * robin over the key space) and the level k+1 runs it overlaps merge into
 * level k+1. The output is cut into runs of at most cfg.run_blocks
 * blocks, each its own reservation: a compaction needs no free extent
 * longer than one of them, and no more free space in all than its inputs.
 * Tombstones are dropped when no run below the output's level overlaps
 * its key range. Readers keep the runs they read held
 * (nvmefs_runs_hold) so a retired run's space is reused only after its
 * manifest successor is durable and its last reader is gone.
 *
 * Threads: put, del, get and iterators may run in any threads at once
 * with one flush and one compaction; they hold the store's lock only for
 * in-memory work (memtable search or insert, taking a reference to the
 * runs), never across I/O. Flushes are serialized among themselves, and
 * compactions among themselves, by the store.
 */
#ifndef NVMEFS_STORE_H
#define NVMEFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runs.h"

struct nvmefs_dev;
struct nvmefs_store;
struct nvmefs_store_iter;

/* Compaction's shape; a zeroed config means the defaults. */
struct nvmefs_store_cfg {
	unsigned l0_runs;    /* level-0 runs allowed before they merge; 0: 4 */
	uint64_t l1_blocks;  /* level 1's budget in 4 KiB blocks; 0: 2560 (10 MiB) */
	unsigned fanout;     /* each level's budget over the one above; 0: 10 */
	uint32_t run_blocks; /* a compaction's output runs: each this many 4 KiB
			      * blocks at most (data, index, filter) unless one
			      * entry needs more; 0: 512 (2 MiB) */
	size_t cache_bytes;  /* the run-block cache's limit; 0: 8 MiB */
};

struct nvmefs_store_stats {
	uint64_t flushes, compactions;	   /* committed */
	uint64_t flush_blocks_written;	   /* by the last flush: its run's blocks */
	uint64_t flush_blocks_read;	   /* by the last flush: the new run's index and filter */
	uint64_t compact_blocks_written;   /* by the last compaction: its runs' blocks */
	uint64_t compact_runs_written;	   /* by the last compaction: its output runs */
	uint64_t flushed_blocks;	   /* written by every flush since open */
	uint64_t compact_read_blocks;	   /* data blocks merged by every compaction since open */
	uint64_t compact_written_blocks;   /* written by every compaction since open */
	uint64_t get_blocks_read;	   /* run blocks read by lookups, since open (misses) */
	uint64_t cache_hits, cache_misses; /* lookups' run blocks found in the cache or not */
	size_t cache_bytes;		   /* run blocks the cache holds */
	size_t mem_bytes;		   /* the memtable's memory (the frozen one's apart) */
	size_t mem_entries;
	uint64_t iter_copied_bytes; /* memtable bytes iterators copied (keys, values and
				     * their entries), since open; walks copy none */
	size_t frozen_bytes;	    /* the frozen memtable's memory (0: none) */
	size_t frozen_entries;
	unsigned runs; /* live */
};

/*
 * Open the store over the run area g of dev (formatted by
 * nvmefs_runs_format; dev outlives the store), of volume uuid, cfg may be
 * NULL. Opens every live run's index and filter. *out is the caller's
 * until nvmefs_store_close. 0, -EINVAL (a bad area or run: logged),
 * -ENOMEM or an I/O error.
 */
int nvmefs_store_open(struct nvmefs_store **out, struct nvmefs_dev *dev,
		      const struct nvmefs_runs_geom *g, const uint8_t uuid[16],
		      const struct nvmefs_store_cfg *cfg);

/*
 * Open a memory-only store: no device, no run area, nothing durable
 * (step 4 runs on v1 volumes with its metadata in one). Puts, deletes,
 * lookups and iterators work on the memtable alone (a delete takes the
 * key out rather than leaving a tombstone, unless a frozen memtable is
 * under it); nvmefs_store_freeze works as on a device; nvmefs_store_flush
 * folds the live memtable into the frozen one, which is live again (no
 * I/O; O(k log n) under the store's lock for k keys put since the
 * freeze), and takes the mark, which nvmefs_store_mark gives back;
 * nvmefs_store_compact returns -EOPNOTSUPP and nvmefs_store_area NULL.
 * cfg may be NULL. *out is the caller's until nvmefs_store_close. 0 or
 * -ENOMEM.
 */
int nvmefs_store_open_mem(struct nvmefs_store **out, const struct nvmefs_store_cfg *cfg);

/* Free the store (no I/O): the memtables' contents are dropped. No put,
 * get, flush, compaction or iterator may be running. */
void nvmefs_store_close(struct nvmefs_store *s);

/* The mark the current manifest carries (all 0 after format) into *mark:
 * what the last committed flush was given, read back after open. */
void nvmefs_store_mark(struct nvmefs_store *s, struct nvmefs_mark *mark);

/* The run area (for its free space and manifest; the store's); NULL for
 * a memory-only store. */
struct nvmefs_runs *nvmefs_store_area(struct nvmefs_store *s);

/*
 * Set key to val (vlen <= NVMEFS_XATTR_VALUE_MAX bytes), or with del to a
 * tombstone, in the memtable. 0, -EINVAL (a key nvmefs_key_check refuses,
 * a value too long) or -ENOMEM.
 */
int nvmefs_store_put(struct nvmefs_store *s, const uint8_t *key, size_t klen, const void *val,
		     size_t vlen);
int nvmefs_store_del(struct nvmefs_store *s, const uint8_t *key, size_t klen);

/*
 * Look key up. 0 with the value copied to val and its length in *vlen;
 * -ERANGE when it is longer than cap (*vlen says how long); -ENOENT (no
 * entry, or a tombstone); -EINVAL (a damaged run block: logged), -ENOMEM
 * or an I/O error.
 */
int nvmefs_store_get(struct nvmefs_store *s, const uint8_t *key, size_t klen, void *val, size_t cap,
		     size_t *vlen);

/*
 * Freeze: the memtable becomes the frozen one, with *mark (copied: the
 * caller's state as of this point, e.g. the journal position its last
 * put came from), and puts go on into a new memtable; the frozen one is
 * still read until a flush has written it. O(1): a pointer swap under the
 * store's lock (the new memtable is allocated before it), so that the
 * volume can freeze under its own metadata lock at an exact journal point
 * and write outside it (nvmefs_store_flush(s, NULL)). Freezing an empty
 * memtable is allowed: its flush commits the mark alone. 0, -ENOMEM
 * (nothing changed), or -EBUSY: a frozen memtable is still unwritten (a
 * flush is writing it, or one failed): nothing changed, the mark is not
 * taken; flush first, or freeze later (puts go on meanwhile).
 */
int nvmefs_store_freeze(struct nvmefs_store *s, const struct nvmefs_mark *mark);

/*
 * Flush. A frozen memtable (nvmefs_store_freeze's, or one a failed flush
 * left) is written first, as a level-0 run, with a manifest naming it and
 * the mark it was frozen with. Then, with mark NULL, nothing more: the
 * memtable is not frozen again (0 when nothing was frozen). With a mark:
 * freeze the memtable with *mark (the caller's state as of this call: the
 * journal position from which replay restores what is put after it, the
 * next inode number, the inode count; copied) and write it the same way.
 * A frozen memtable with no entry commits only its mark (when it
 * changed). 0, -ENOSPC (no free extent for the run, or the manifest slot
 * is full: the store stays as it was, the frozen memtable kept for the
 * next flush), -ENOMEM or an I/O error (the same); on a memory-only store
 * (nvmefs_store_open_mem) 0, -ENOMEM, or -EBUSY while a walk holds the
 * frozen memtable.
 * An I/O error in the manifest's write or the flush after it leaves the
 * run area refusing every later write (runs.h, nvmefs_runs_commit): each
 * flush and compaction then fails with -EIO at once, until the store is
 * closed and opened again (the manifest that failed may be the durable
 * one, mark included; puts and gets go on in memory).
 */
int nvmefs_store_flush(struct nvmefs_store *s, const struct nvmefs_mark *mark);

/*
 * One compaction step by the rule above (full: every run into the deepest
 * level in use, at least 1, tombstones dropped; it needs free space as
 * large as the whole store). Returns 1 when runs were merged (call again
 * while it does), 0 when nothing is due, -ENOSPC (no free extent for an
 * output run: nothing changed), -ENOMEM, or an I/O error or -EINVAL (a
 * damaged input run: nothing changed); -EIO for good, before any input is
 * read, after a failed manifest write (nvmefs_store_flush); -EOPNOTSUPP on
 * a memory-only store (no runs).
 */
int nvmefs_store_compact(struct nvmefs_store *s, bool full);

/* A snapshot of the counters. */
void nvmefs_store_stats(struct nvmefs_store *s, struct nvmefs_store_stats *st);

/*
 * An iterator over the keys in [lo, hi) (hi NULL: to the end; lo NULL:
 * from the start), tombstones hidden, each key once with its newest value.
 * It sees the runs live at its start (they stay readable until it ends)
 * and a copy of the memtables' entries in the range taken then. *out is
 * the caller's until nvmefs_store_iter_close. 0, -ENOMEM or an I/O error.
 */
int nvmefs_store_iter_open(struct nvmefs_store_iter **out, struct nvmefs_store *s,
			   const uint8_t *lo, size_t lolen, const uint8_t *hi, size_t hilen);

/* The same over every key that starts with prefix[0..plen) (plen >= 1). */
int nvmefs_store_iter_prefix(struct nvmefs_store_iter **out, struct nvmefs_store *s,
			     const uint8_t *prefix, size_t plen);

/*
 * A walk over [lo, hi) (NULL as above) that copies no memtable: it reads
 * the frozen memtable in place (nvmefs_store_freeze) and the runs, merged
 * as an iterator's, and sees nothing of the live memtable. So it sees the
 * store as of the last freeze (a flush freezes too): puts after that
 * freeze are not seen, however long it runs. Memory: the iterator and a
 * run-block buffer per run in the range, whatever the range's size (a
 * snapshot of the whole store, a mount filling a cache). The frozen
 * memtable stays readable while the walk holds it: a flush that writes it
 * meanwhile leaves it to the walk's close to free; a memory-only store's
 * flush (the fold) returns -EBUSY until the walk is closed. Then as an
 * iterator: nvmefs_store_iter_next, nvmefs_store_iter_close. 0, -ENODATA
 * (a memory-only store with nothing frozen: freeze first), -EINVAL,
 * -ENOMEM or an I/O error.
 */
int nvmefs_store_walk(struct nvmefs_store_iter **out, struct nvmefs_store *s, const uint8_t *lo,
		      size_t lolen, const uint8_t *hi, size_t hilen);

/* The next entry: 1 with *e (never a tombstone; valid until the next call
 * or the close), 0 at the end, -EINVAL (damaged block) or an I/O error. */
int nvmefs_store_iter_next(struct nvmefs_store_iter *it, struct nvmefs_run_ent *e);

/* Free the iterator; the runs it saw may then be freed. NULL is allowed. */
void nvmefs_store_iter_close(struct nvmefs_store_iter *it);

#endif

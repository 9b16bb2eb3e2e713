/* SPDX-License-Identifier: MIT */
/*
 * store.h: the key/value store of fs/store/, the one header the rest of
 * nvmefs includes to use it (the metadata code of fs/core/, fsck.nvmefs,
 * the control files). Its sections: the keys and their order; where a run
 * area sits and the mark a commit leaves in it; the store (an LSM tree of
 * sorted runs); the values the keys map to; the shadow, an in-memory copy
 * of the keys for crosschecks. What these are built from (run blocks,
 * the run area, the memtable) is private to fs/store/ (*_i.h there).
 * docs/FORMAT.md describes the bytes, docs/ARCHITECTURE.md ("The store") the design.
 */
#ifndef NVMEFS_STORE_H
#define NVMEFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format.h"

/* ---- keys ---- */

/*
 * Keys. Every piece of metadata becomes a key/value pair. A key is its kind
 * (one byte) and then big-endian fields, so that comparing two keys with
 * memcmp (then by length) orders them as their fields: all of an inode's
 * extents sit together in slot and offset order, a directory's entries
 * together, and so on.
 */

enum nvmefs_key_kind {
	NVMEFS_KEY_INODE = 1,	/* ino */
	NVMEFS_KEY_DIRENT = 2,	/* parent, hash of the name, name */
	NVMEFS_KEY_DCOOKIE = 3, /* parent, cookie (readdir order) */
	NVMEFS_KEY_EXTENT = 4,	/* ino, slot, component offset */
	NVMEFS_KEY_XATTR = 5,	/* ino, name */
	NVMEFS_KEY_ORPHAN = 6,	/* ino */
	NVMEFS_KEY_FREE = 7,	/* member, end of the range (the values below) */
};

/* The longest key: a DIRENT, kind + parent + hash + a name of 255 bytes. */
#define NVMEFS_KEY_MAX (1u + 8u + 8u + NVMEFS_NAME_MAX)

/* Each builder fills k (room for NVMEFS_KEY_MAX) and returns the key's
 * length. Names must be 1..NVMEFS_NAME_MAX (xattrs: NVMEFS_XATTR_NAME_MAX)
 * bytes; a longer one is the caller's bug and gives 0. */
size_t nvmefs_key_inode(uint8_t *k, uint64_t ino);
size_t nvmefs_key_dirent(uint8_t *k, uint64_t parent, const char *name, size_t len);
size_t nvmefs_key_dcookie(uint8_t *k, uint64_t parent, uint64_t cookie);
size_t nvmefs_key_extent(uint8_t *k, uint64_t ino, uint32_t slot, uint64_t comp_off);
size_t nvmefs_key_xattr(uint8_t *k, uint64_t ino, const char *name, size_t len);
size_t nvmefs_key_orphan(uint8_t *k, uint64_t ino);
/* A FREE key names a free range by its member and its END (the byte after
 * it), not its start: allocation takes the start of a free range (the goal
 * right after a file's last extent), so an append changes the range's
 * length under the same key, one put, where a key by start would need a
 * tombstone and a put (docs/FORMAT.md, "Allocation"). */
size_t nvmefs_key_free(uint8_t *k, uint32_t member, uint64_t end);

/* The order of keys: memcmp over the shorter length, then the shorter
 * first. <0, 0 or >0. */
int nvmefs_key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

/* 0 when k is a key some builder makes (a known kind, the length of that
 * kind, a name within limits and, for DIRENT, the hash of its name);
 * -EINVAL otherwise. */
int nvmefs_key_check(const uint8_t *k, size_t len);

/* One entry, pointing into the run block it came from. */
struct nvmefs_run_ent {
	const uint8_t *key;
	size_t klen;
	const uint8_t *val;
	size_t vlen;
	bool tomb;
};

/* ---- the run area's place and the committer's mark ---- */

#define NVMEFS_SLOT_DEFAULT 64u /* blocks per manifest slot when the geometry says 0 */

/* Where the area is on its member. */
struct nvmefs_runs_geom {
	uint64_t off;	      /* byte offset on the member, a multiple of NVMEFS_BLOCK */
	uint64_t blocks;      /* length in 4 KiB blocks */
	uint32_t slot_blocks; /* each manifest slot; 0: NVMEFS_SLOT_DEFAULT */
};

/*
 * The committer's state a manifest carries beside its runs, opaque to the
 * area: what a mount needs before it replays and cannot scan for. Encoded
 * at the start of the manifest's body as a count of u64 words (u32), a
 * reserved u32 (0), then the words, little-endian, in this order. Fields
 * are only ever added at the end: NVMEFS_MARK_WORDS grows, and the
 * decoder then takes an older, shorter mark with the new fields 0. A mark
 * longer than this code knows is a newer committer's (-EPROTO).
 */
struct nvmefs_mark {
	uint64_t replay;     /* the journal position replay starts from */
	uint64_t replay_seq; /* the transaction sequence expected there */
	uint64_t next_ino;   /* the next inode number to hand out */
	uint64_t ninodes;    /* inodes in use */
	/* The metadata's size as journal records would take it
	 * (vol->meta_bytes, the estimate the metadata ENOSPC checks): a mount
	 * that does not read every key cannot add it up. */
	uint64_t meta_bytes;
};
#define NVMEFS_MARK_WORDS 5u
_Static_assert(sizeof(struct nvmefs_mark) == NVMEFS_MARK_WORDS * 8, "a mark is u64 words");

/* ---- the store ---- */

/*
 * Format v2's key/value store (docs/ARCHITECTURE.md, "The store"): an LSM tree
 * over one run area (runs_i.h). A format v2 volume keeps its metadata in
 * one (vol->store): apply writes every record's keys through into it
 * (kv.c), a commit flushes it (journal.c), and the mount loads its keys
 * (all of them, or each inode's when an operation asks: icache.c).
 * Tested on image files (tests/test_store.c).
 *
 * Writes go to a memtable (memtable_i.h: a skip list, O(log n)). A flush
 * freezes it (a pointer swap under the store's lock: puts go on into a new
 * memtable; the caller may also freeze apart, under its own lock, and
 * flush later), writes it as a level-0 run and commits a manifest naming the
 * run and the caller's mark (struct nvmefs_mark, above: the journal
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

/* Free the store (no I/O): the memtables' contents are dropped. No put,
 * get, flush, compaction or iterator may be running. */
void nvmefs_store_close(struct nvmefs_store *s);

/* The mark the current manifest carries (all 0 after format) into *mark:
 * what the last committed flush was given, read back after open. */
void nvmefs_store_mark(struct nvmefs_store *s, struct nvmefs_mark *mark);

/*
 * Make the run area g of dev empty for volume uuid, for nvmefs_store_open:
 * an empty manifest (sequence 1, a zero mark) in slot A, slot B's first
 * block zeroed, flushed. The area must fit the member and have room for at
 * least one run block after the slots. 0 or -errno.
 */
int nvmefs_store_format(struct nvmefs_dev *dev, const struct nvmefs_runs_geom *g,
			const uint8_t uuid[16]);

/* The sequence number of the current manifest (the last committed flush
 * or compaction). */
uint64_t nvmefs_store_manifest_seq(struct nvmefs_store *s);

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
 * next flush), -ENOMEM or an I/O error (the same).
 * An I/O error in the manifest's write or the flush after it leaves the
 * run area refusing every later write (runs_i.h, nvmefs_runs_commit): each
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
 * read, after a failed manifest write (nvmefs_store_flush).
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
 * meanwhile leaves it to the walk's close to free. Then as an iterator:
 * nvmefs_store_iter_next, nvmefs_store_iter_close. 0, -EINVAL, -ENOMEM or
 * an I/O error.
 */
int nvmefs_store_walk(struct nvmefs_store_iter **out, struct nvmefs_store *s, const uint8_t *lo,
		      size_t lolen, const uint8_t *hi, size_t hilen);

/* The next entry: 1 with *e (never a tombstone; valid until the next call
 * or the close), 0 at the end, -EINVAL (damaged block) or an I/O error. */
int nvmefs_store_iter_next(struct nvmefs_store_iter *it, struct nvmefs_run_ent *e);

/* Free the iterator; the runs it saw may then be freed. NULL is allowed. */
void nvmefs_store_iter_close(struct nvmefs_store_iter *it);

/* ---- values ---- */

/*
 * Format v2's values (docs/FORMAT.md, "Keys and values"): what each
 * key maps to in the store, and the conversion from the journal's records
 * (fs/core/format.h) whose apply puts them (docs/FORMAT.md, "Keys and values"):
 * apply puts them into the volume's store (kv.c), and the mount decodes
 * them back; tested alone (tests/test_values.c) and fuzzed (fuzz_values).
 *
 * A value is little-endian fixed-width fields after a version byte, each
 * at its natural alignment with the padding explicit (and zero), with
 * explicit lengths for its variable parts, and repeats nothing of its key:
 * the key carries the ino, the parent, the name or the offset, and a
 * decoder takes the key with the value and checks both. An XATTR value is
 * the attribute's raw bytes (no version byte: it is the user's data, up to
 * 64 KiB, the largest value a run entry takes).
 *
 * Decoded, a key and its value are the journal record that puts them:
 * INODE an INODE record (plus its summary fields), DIRENT and
 * DCOOKIE a DIRENT_ADD record (plus the entry's cookie), EXTENT an EXTENT
 * record, XATTR an XATTR_SET record, ORPHAN an ORPHAN_ADD record; FREE has
 * no record (the free map's changes put it: fs/core/alloc.c).
 */

#define NVMEFS_VAL_VERSION 1u

/* Value lengths: fixed, or fixed part and largest. */
#define NVMEFS_VAL_INODE_FIXED	 128u
#define NVMEFS_VAL_INODE_MAX	 (NVMEFS_VAL_INODE_FIXED + NVMEFS_MAX_DEVICES + NVMEFS_SYMLINK_MAX)
#define NVMEFS_VAL_DIRENT	 24u
#define NVMEFS_VAL_DCOOKIE_FIXED 16u
#define NVMEFS_VAL_DCOOKIE_MAX	 (NVMEFS_VAL_DCOOKIE_FIXED + NVMEFS_NAME_MAX)
#define NVMEFS_VAL_EXTENT	 24u
#define NVMEFS_VAL_ORPHAN	 1u
#define NVMEFS_VAL_FREE		 16u
/* The largest value of any kind (an xattr's). */
#define NVMEFS_VAL_MAX NVMEFS_XATTR_VALUE_MAX

/* The first cookie of a directory's entries: 1 and 2 are "." and "..". */
#define NVMEFS_COOKIE_FIRST 3u

/*
 * An inode's summary fields: what the other keys of the inode add up to,
 * kept in its INODE value so that a load need not scan them. They come
 * from the records that change them, never from an INODE record. Fields that do not
 * belong to the inode's type are 0.
 */
struct nvmefs_inode_sum {
	uint32_t nxattrs;		/* every type */
	uint64_t alloc_bytes, nextents; /* regular files: bytes and extents mapped */
	uint64_t parent;		/* directories: the parent (root: itself) */
	uint64_t nentries, next_cookie; /* directories: live entries, the next cookie */
};

/* One key and its value, decoded. */
struct nvmefs_val {
	uint8_t kind; /* enum nvmefs_key_kind */
	/* The record that puts the key: type INODE, DIRENT_ADD (DIRENT and
	 * DCOOKIE), EXTENT, XATTR_SET or ORPHAN_ADD; 0 for FREE. Its pointers
	 * (name, target, value) point into the key or the value decoded. */
	struct nvmefs_rec rec;
	struct nvmefs_inode_sum sum; /* INODE */
	uint64_t cookie;	     /* DIRENT, DCOOKIE: the entry's readdir cookie */
	struct {
		uint32_t member;
		uint64_t off, len;
	} free; /* FREE: a free byte range of a member (its key has the end) */
};

/*
 * Encode v: its key into key (room for NVMEFS_KEY_MAX bytes; its length in
 * *klen) and its value into val (room for the kind's largest value, at most
 * NVMEFS_VAL_MAX). Returns the value's length (0 is an empty xattr), or
 * -EINVAL when v is not one nvmefs_val_decode accepts (the caller's bug;
 * nothing is written then).
 */
ssize_t nvmefs_val_encode(const struct nvmefs_val *v, uint8_t *key, size_t *klen, uint8_t *val);

/*
 * Decode a key (klen bytes) and its value (vlen bytes) as read from the
 * store. Checks the key (nvmefs_key_check and, per kind, a non-zero ino or
 * parent, a valid name), the value's version, its length against its
 * explicit lengths, zero reserved bytes, and every field as the journal's
 * record decoder does (nvmefs_rec_decode), plus the summary's consistency, before anything is
 * trusted. Returns 0 (v filled, pointing into key and val), -EPROTO (another value version) or
 * -EINVAL (malformed). What it accepts re-encodes to the same bytes.
 */
int nvmefs_val_decode(const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
		      struct nvmefs_val *v);

/* The conversions (docs/FORMAT.md, "Keys and values"), filling v (no check:
 * nvmefs_val_encode checks). An INODE value from an INODE record and the
 * summary fields; a DIRENT (kind NVMEFS_KEY_DIRENT) or DCOOKIE
 * (NVMEFS_KEY_DCOOKIE) value from a DIRENT_ADD record and the cookie apply
 * gives the entry. The pointers of rec are kept, not copied. */
void nvmefs_val_inode(struct nvmefs_val *v, const struct nvmefs_rec *inode,
		      const struct nvmefs_inode_sum *sum);
void nvmefs_val_dirent(struct nvmefs_val *v, uint8_t kind, const struct nvmefs_rec *dirent_add,
		       uint64_t cookie);
/* The value of a record that puts one key and nothing else: EXTENT,
 * XATTR_SET or ORPHAN_ADD; -EINVAL for another type. */
int nvmefs_val_rec(struct nvmefs_val *v, const struct nvmefs_rec *rec);

/* ---- the shadow ---- */

/*
 * The shadow: format v2's keys and values of a volume's metadata in memory
 * (fs/store/shadow.c: a memtable), a second copy to check the metadata
 * against. When it is on (vol->shadow: in tests, or with
 * NVMEFS_META_CROSSCHECK=1), apply (fs/core/meta.c) and the extent maps
 * (extmap.c) write every key through into it beside the store (kv.c), and
 * nvmefs_meta_crosscheck compares it with the in-memory maps both ways at
 * commits; fsck's store pass fills one from the store to compare the store
 * with the maps (nvmefs_meta_check_store). docs/FORMAT.md, "Crosschecks".
 *
 * Not thread-safe: every call holds vol->lock, or runs single-threaded
 * (load, replay, a test).
 */

struct nvmefs_shadow;

/* An empty shadow (*out), or -ENOMEM. End with nvmefs_shadow_destroy. */
int nvmefs_shadow_create(struct nvmefs_shadow **out);
/* Free it and everything in it; NULL is fine. */
void nvmefs_shadow_destroy(struct nvmefs_shadow *sh);

/*
 * Put the key and value v encodes (nvmefs_val_encode), or a tombstone of
 * key (klen bytes). Returns 0, -EINVAL (v is not a value format v2 takes:
 * logged, naming the key) or -ENOMEM. The first failure also sticks
 * (nvmefs_shadow_error): apply has changed the maps by then and cannot
 * undo, so the shadow is no longer whole and a crosscheck must say so.
 */
int nvmefs_shadow_put(struct nvmefs_shadow *sh, const struct nvmefs_val *v);
int nvmefs_shadow_del(struct nvmefs_shadow *sh, const uint8_t *key, size_t klen);

/* The first put or tombstone that failed (-EINVAL, -ENOMEM), else 0. */
int nvmefs_shadow_error(const struct nvmefs_shadow *sh);

/* Whether a periodic check (at a commit) is due: always while the last
 * check saw fewer than 10,000 live keys; past that, once the puts and
 * tombstones since it reach a sixteenth of what it saw, so that checking
 * at every commit costs in proportion to the writes. _checked records a
 * check that saw keys live keys. */
bool nvmefs_shadow_check_due(const struct nvmefs_shadow *sh);
void nvmefs_shadow_checked(struct nvmefs_shadow *sh, size_t keys);

/* The live value of key: 0 (*val, *vlen point into the shadow until the
 * next put or tombstone) or -ENOENT (never put, or a tombstone). */
int nvmefs_shadow_get(const struct nvmefs_shadow *sh, const uint8_t *key, size_t klen,
		      const uint8_t **val, size_t *vlen);

/* Every entry, tombstones too, in key order: *pos starts NULL; false after
 * the last. e points into the shadow until the next put or tombstone. */
bool nvmefs_shadow_next(const struct nvmefs_shadow *sh, const void **pos, struct nvmefs_run_ent *e);

/* A key as text for messages: INODE(12), DIRENT(1, "a"), EXTENT(12, 0,
 * 8192)... Writes at most size bytes (NUL-terminated) into buf. */
void nvmefs_shadow_key_name(const uint8_t *key, size_t klen, char *buf, size_t size);

#endif

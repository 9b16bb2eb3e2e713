/* SPDX-License-Identifier: MIT */
/*
 * Support shared by the libFuzzer harnesses in tests/fuzz/ and by
 * gen_corpus: an in-memory volume (no devices) that decoded records are
 * applied to as mount applies them, a memfd standing in for member 0 for the
 * targets that run the real loader, the steps mount takes after loading, and
 * helpers that re-seal crcs so the fuzzer can reach past them.
 *
 * The volume is made and freed by the core's own nvmefs_vol_create,
 * nvmefs_vol_set_geometry and nvmefs_vol_destroy, and orphans reclaimed by
 * nvmefs_journal_reclaim_orphans; what mount does after loading
 * (fuzz_vol_mount_tail) adds the harnesses' oracles around the same calls.
 */
#ifndef NVMEFS_FUZZ_VOL_H
#define NVMEFS_FUZZ_VOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_i.h" /* the free space, after a load */
#include "fs_i.h"
#include "fuzz_bug.h"
#include "journal_i.h"
#include "volume_i.h"

/* The volume every harness loads into: 4 members, each with its data area
 * at [1 MiB, 1 GiB); member 0's metadata area right after its label, with
 * a small run area and journal so whole images stay fuzzable. The run area
 * (32 blocks: manifest slots of one block each, nvmefs_journal_runs_geom,
 * then 30 of run space) is twice NVMEFS_RUNS_MIN: a run takes 3 blocks at
 * least (data, index, filter) and nothing compacts an area this small (a
 * compaction reserves more), so the smallest would hold four runs, too few
 * for the loader's seeds and the remount oracle's two flushes. */
#define FUZZ_NDEVS	4u
#define FUZZ_CHUNK	(1u << 20)
#define FUZZ_DATA_START (1ull << 20)
#define FUZZ_DATA_END	(1ull << 30)
#define FUZZ_DEV_SIZE	(FUZZ_DATA_END + NVMEFS_BLOCK) /* + the backup label */
#define FUZZ_META_OFF	NVMEFS_BLOCK
#define FUZZ_RUNS	(32u * NVMEFS_BLOCK)
#define FUZZ_JOURNAL	(8u * NVMEFS_BLOCK)
#define FUZZ_META_SIZE	(2u * NVMEFS_BLOCK + FUZZ_RUNS + FUZZ_JOURNAL)
#define FUZZ_FIRST_TXN	1u /* sequence number of the first transaction */
#define FUZZ_HASH_SIZE	8u /* initial inode and entry hash buckets */
#define FUZZ_NAME_SEED	7u /* keys the entry hash (meta.c), fixed */

/* Frame magics (docs/FORMAT.md; private to fs/core/format.c). The run
 * area's are public: NVMEFS_RUN_MAGIC (fs/store/sorted_i.h), NVMEFS_MANIFEST_MAGIC,
 * NVMEFS_INDEX_MAGIC and NVMEFS_FILTER_MAGIC (fs/store/runfmt_i.h). */
#define FUZZ_LABEL_MAGIC "NVMEFSL1"
#define FUZZ_SUPER_MAGIC "NVMEFSS1"
#define FUZZ_TXN_MAGIC	 "NVMEFSJ1"

/* The volume's UUID; its first 8 bytes are the journal id. */
extern const uint8_t fuzz_uuid[16];

/* Once per process: silence the library's log lines (still formatted). With
 * FUZZ_VERBOSE set, show them all (debug too) and say how far inputs got. */
void fuzz_init(void);

/* Member index's label of the fuzz volume (as mkfs would write it). */
void fuzz_label_init(struct nvmefs_label *l, unsigned index);

/*
 * A volume as vol_alloc() + vol_set_geometry() leave it: geometry from
 * fuzz_label_init, metadata (with FUZZ_HASH_SIZE hash tables) and journal
 * initialized, no members. With
 * with_image, member 0 is the shared memfd (fuzz_image_write) so that
 * nvmefs_journal_load() and the journal writers work; the other members
 * share it too (only flushed). Returns NULL when out of memory. Free with
 * fuzz_vol_destroy().
 */
struct nvmefs_vol *fuzz_vol_create(bool with_image);
void fuzz_vol_destroy(struct nvmefs_vol *vol);

/* Apply the root directory as mkfs does before its first flush. */
int fuzz_vol_add_root(struct nvmefs_vol *vol);

/*
 * A volume on a zeroed image (every member the shared memfd), its
 * metadata area formatted as mkfs does (nvmefs_journal_format: an empty
 * journal and run area, the store open) and the root applied, not yet
 * flushed: what is applied next is written through into the store's
 * memtable. NULL when out of memory or the image cannot be written.
 * Free with fuzz_vol_destroy().
 */
struct nvmefs_vol *fuzz_vol_format(void);

/* Replace the metadata area of the shared memfd with img (len bytes,
 * zero-padded to FUZZ_META_SIZE). Returns 0 or -errno. */
int fuzz_image_write(const uint8_t *img, size_t len);
/* Zero the shared memfd's metadata area. Returns 0 or -errno. */
int fuzz_image_zero(void);
/* Read the metadata area back (FUZZ_META_SIZE bytes). */
int fuzz_image_read(uint8_t *img);

/*
 * What nvmefs_vol_open() does after nvmefs_journal_load() succeeded (the
 * state verified): take the free space from the durable map the FREE keys
 * and replay filled (refusing extents that overlap, as the mount did when
 * it rebuilt it), reclaim orphans (logged into the
 * open transaction); with oracles around it: every entry names an inode
 * that exists, is not the root, is not an orphan and has the links to
 * cover it; every inode number in use is below next_ino; format v2's keys
 * (the shadow store) match the maps; and, before the reclaim and after
 * one that reclaimed something, a remount gives the same state: the volume (which must have a store
 * on the shared memfd: nvmefs_journal_load's or fuzz_vol_format's) is flushed as an unmount does
 * (nvmefs_journal_checkpoint), a second volume loads the image with nvmefs_journal_load, and it
 * must verify, load the same free space (its durable map, from the FREE keys, equal to the
 * complement of its extents: the crosscheck), hold the same keys and values, the same counts,
 * next_ino and meta_bytes. A flush the run area has no room for (or one
 * of a state format v2 refuses) skips that check. A failed oracle is a
 * bug: FUZZ_BUG. Returns 0 or the error that would fail the mount.
 */
int fuzz_vol_mount_tail(struct nvmefs_vol *vol);

/* Recompute the crc of a label or superblock (magic, version and fields
 * untouched). */
void fuzz_reseal_frame(uint8_t *block);
/* Recompute the crc of the transaction at buf (avail bytes from it) if its
 * claimed payload fits in avail. */
void fuzz_reseal_txn(uint8_t *buf, size_t avail);
/* Walk a journal ring of len bytes from its last block to its first and
 * re-seal every block that starts with the transaction magic (backwards, so
 * a transaction's crc covers the re-sealed headers inside its payload). */
void fuzz_reseal_ring(uint8_t *ring, size_t len);
/* Re-seal every part of the metadata-area image img (FUZZ_META_SIZE
 * bytes) that starts with its magic: the superblocks; in the run area the
 * manifest slots' manifests and, from the last block to the first, every
 * run block, index and filter over the length its header claims (when it
 * fits the area); the journal's transactions. */
void fuzz_reseal_image(uint8_t *img);

/* libFuzzer's entry points, defined by each harness. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif

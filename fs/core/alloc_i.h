/* SPDX-License-Identifier: MIT */
/*
 * alloc_i.h: the interface of fs/core/alloc.c (per-member free space), for the core's other
 * modules and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_ALLOC_I_H
#define NVMEFS_ALLOC_I_H

#include "fs_i.h"

/* The allocator's map (vol->free) as the complement of every extent of
 * every inode in memory: fsck's, which trusts no FREE key. -EUCLEAN when
 * two extents overlap (logged), -ENOMEM. */
int nvmefs_alloc_rebuild(struct nvmefs_vol *vol);
/* The complement of every extent into out[0..ndevs) (each emptied first,
 * then the caller's to nvmefs_freemap_exit). -EUCLEAN on overlap. */
int nvmefs_alloc_complement(struct nvmefs_vol *vol, struct nvmefs_freemap *out);

/*
 * The durable free map (vol->dfree) and its FREE keys: put a range back
 * (PUNCH, INODE_FREE), take one out (EXTENT). Sets, so a range already
 * (partly) free or in use changes what it must and no more; the keys that
 * change are written through (kv_i.h). Nothing while vol->loading. Out of
 * memory sticks in vol->kv_err.
 */
void nvmefs_alloc_applied_put(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len);
void nvmefs_alloc_applied_take(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len);
/* How many bytes of [off, off + len) on dev the durable map has free. */
uint64_t nvmefs_alloc_applied_free(const struct nvmefs_vol *vol, unsigned dev, uint64_t off,
				   uint64_t len);
/* mkfs: every member's data area free, one FREE key each; sets
 * vol->free_keys. 0 or the write-through's error. */
int nvmefs_alloc_format(struct nvmefs_vol *vol);
/* Mount, before replay: the durable map from the store's FREE keys. A key
 * that does not decode, names no member, leaves its data area or overlaps
 * another refuses the mount (-EUCLEAN, logged); the checker (opts.check)
 * skips it. -ENOMEM or an I/O error. */
int nvmefs_alloc_load(struct nvmefs_vol *vol);
/* Mount, after replay: the allocator's map as a copy of the durable one
 * (nothing is reserved or pending yet). 0 or -ENOMEM. */
int nvmefs_alloc_start(struct nvmefs_vol *vol);
/* The durable map against the complement of the extents: 0, or -EUCLEAN
 * with the first difference of each member logged (the crosscheck's).
 * Extents that overlap are not compared (0): fsck finds them. */
int nvmefs_alloc_check(struct nvmefs_vol *vol);
/* Take up to want bytes on dev, near goal if it can; 0 when dev is full. */
uint64_t nvmefs_alloc_get(struct nvmefs_vol *vol, unsigned dev, uint64_t goal, uint64_t want,
			  uint64_t *off);
void nvmefs_alloc_put(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len);
/* Space released by the open transaction: reusable once it commits. */
int nvmefs_alloc_defer(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len);
void nvmefs_freemap_exit(struct nvmefs_freemap *m);
/* Whether m has a range ending at end (a FREE key's, which names it by
 * its end). */
bool nvmefs_freemap_has_end(const struct nvmefs_freemap *m, uint64_t end);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * extmap_i.h: the interface of fs/core/extmap.c (a file's extent maps), for the core's other
 * modules and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_EXTMAP_I_H
#define NVMEFS_EXTMAP_I_H

#include "fs_i.h"

/* Extent map of a slot: the extent containing or following comp_off. */
size_t nvmefs_extmap_find(const struct nvmefs_extmap *m, uint64_t comp_off);
/* Remove the mapping of slot comp range [lo, hi). With release, the space
 * goes to the open transaction's pending-free list (live) or nowhere
 * (replay: free space is rebuilt after). meta held; takes map_lock. */
int nvmefs_extmap_remove(struct nvmefs_vol *vol, struct nvmefs_inode *in, unsigned slot,
			 uint64_t lo, uint64_t hi, bool release);
/* Map e into slot (the range must be unmapped); merges with neighbours. */
int nvmefs_extmap_insert(struct nvmefs_vol *vol, struct nvmefs_inode *in, unsigned slot,
			 const struct nvmefs_ext *e);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * alloc_i.h: the interface of fs/core/alloc.c (per-member free space), for the core's other
 * modules and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_ALLOC_I_H
#define NVMEFS_ALLOC_I_H

#include "fs_i.h"

/* Free space as the complement of every extent: of the maps (every inode
 * in memory), or of the store's keys. -EUCLEAN when two overlap. */
int nvmefs_alloc_rebuild(struct nvmefs_vol *vol);
int nvmefs_alloc_rebuild_store(struct nvmefs_vol *vol);
/* Take up to want bytes on dev, near goal if it can; 0 when dev is full. */
uint64_t nvmefs_alloc_get(struct nvmefs_vol *vol, unsigned dev, uint64_t goal, uint64_t want,
			  uint64_t *off);
void nvmefs_alloc_put(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len);
/* Space released by the open transaction: reusable once it commits. */
int nvmefs_alloc_defer(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len);
void nvmefs_freemap_exit(struct nvmefs_freemap *m);

#endif

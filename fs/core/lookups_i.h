/* SPDX-License-Identifier: MIT */
/*
 * lookups_i.h: the interface of fs/core/lookups.c (the kernel's lookup
 * counts, and whether a freed inode is still held), for namei.c (which
 * counts them), meta.c, icache.c and volume.c. The shared types are in
 * fs_i.h.
 */
#ifndef NVMEFS_LOOKUPS_I_H
#define NVMEFS_LOOKUPS_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs_i.h"

/* A slot of a vol->lookups table: ino 0 is a free one. */
struct nvmefs_lookup {
	uint64_t ino, count;
};
_Static_assert(sizeof(struct nvmefs_lookup) == 16, "16 bytes a slot, as the budget counts it");

/*
 * The kernel's lookup counts (vol->lookups, meta held). A door counts one
 * for each entry it gives the kernel (lookup, mknod, link, create,
 * readdirplus) and takes them back at its forget. reserve makes room for
 * one more inode first, so that the add after it, once the operation has
 * changed something, cannot fail: 0 or -ENOMEM.
 */
int nvmefs_lookups_reserve(struct nvmefs_vol *vol);
void nvmefs_lookups_add(struct nvmefs_vol *vol, uint64_t ino);
/* ino's count; 0 when the kernel holds none. */
uint64_t nvmefs_lookups_count(const struct nvmefs_vol *vol, uint64_t ino);
/* Take back n of ino's lookups, at most all it has (an unknown ino has
 * none): what is left. */
uint64_t nvmefs_lookups_sub(struct nvmefs_vol *vol, uint64_t ino, uint64_t n);
/* Free the table (at the volume's end). */
void nvmefs_lookups_exit(struct nvmefs_vol *vol);
/* The tables' own invariants: each entry in its shard and reachable from
 * its home, counts above 0, the totals right; with known, each entry's
 * inode known to it. The number of faults, each logged. */
unsigned nvmefs_lookups_check(struct nvmefs_vol *vol, bool (*known)(struct nvmefs_vol *, uint64_t));
/* True while something must keep the freed inode in in memory (meta held):
 * an operation reference, I/O in flight, or the kernel's lookups. */
bool nvmefs_inode_held(const struct nvmefs_vol *vol, const struct nvmefs_inode *in);

#endif

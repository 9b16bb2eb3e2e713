/* SPDX-License-Identifier: MIT */
/*
 * icache_i.h: the interface of fs/core/icache.c (operation references on
 * inodes), for the core's other modules. The shared types are in fs_i.h.
 *
 * An operation takes every inode it works on with nvmefs_inode_get and gives
 * it back with nvmefs_inode_put. Every inode is resident today (meta.c keeps
 * them all from mount to unmount); the references are what a bounded cache
 * (docs/METADATA-V2-STEP4.md, §3) will need before it may evict one: an
 * inode with a reference is in use.
 */
#ifndef NVMEFS_ICACHE_I_H
#define NVMEFS_ICACHE_I_H

#include "fs_i.h"

/* What nvmefs_inode_get must find (NVMEFS_IGET_LIVE) or have in memory
 * besides the attributes. Nothing is ever missing today; the callers say
 * what they will read, so that a later load knows. */
#define NVMEFS_IGET_LIVE    (1u << 0) /* -ENOENT for a freed (dead) inode */
#define NVMEFS_IGET_EXTENTS (1u << 1) /* its extent map (regular files) */
#define NVMEFS_IGET_XATTRS  (1u << 2) /* its extended attributes */

/*
 * Inode ino with one operation reference for the caller, in *out (NULL on
 * error), meta held. 0, or -ENOENT (unknown, or freed with
 * NVMEFS_IGET_LIVE); later also -EIO, -ENOMEM or -EUCLEAN from a load,
 * which may then drop and take meta again: the caller reads what it needs
 * under meta after its gets. The reference keeps the inode in memory until
 * nvmefs_inode_put, across any unlock.
 */
int nvmefs_inode_get(struct nvmefs_vol *vol, uint64_t ino, unsigned need,
		     struct nvmefs_inode **out);
/* Give back a reference of nvmefs_inode_get (meta held; in may be NULL).
 * The last one of a freed inode nothing else holds frees its memory. No
 * I/O, cannot fail. */
void nvmefs_inode_put(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/* True while something must keep the freed inode in in memory (meta held):
 * an operation reference, I/O in flight, or the kernel's lookups. */
bool nvmefs_inode_held(const struct nvmefs_vol *vol, const struct nvmefs_inode *in);
/*
 * Walk every inode and check the references (meta held): with idle (no
 * operation under way, as after a call of the core returns in a
 * single-threaded test, or at close) none may hold an operation reference
 * or I/O; and no freed inode may stay unless something holds it. 0, or
 * -EUCLEAN after a message naming each inode at fault.
 */
int nvmefs_icache_check(struct nvmefs_vol *vol, bool idle);

#endif

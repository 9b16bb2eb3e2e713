/* SPDX-License-Identifier: MIT */
/*
 * icache_i.h: the interface of fs/core/icache.c (operation references on
 * inodes, reading them from the store, eviction, pins), for the core's
 * other modules; the kernel's lookup counts are lookups_i.h's. The shared
 * types are in fs_i.h.
 *
 * An operation takes every inode it works on with nvmefs_inode_get and gives
 * it back with nvmefs_inode_put. A mount reads inodes from the store when
 * first asked and evicts those nothing pins (docs/ARCHITECTURE.md, "The
 * inode cache"); a resident volume (vol->resident: fsck, some tests) keeps
 * them all. An inode with a reference is in use and is never evicted.
 */
#ifndef NVMEFS_ICACHE_I_H
#define NVMEFS_ICACHE_I_H

#include "fs_i.h"
#include "lookups_i.h"

/* What nvmefs_inode_get must find (NVMEFS_IGET_LIVE) or have in memory
 * besides the attributes: a get reads what is asked for and missing from
 * the store. */
#define NVMEFS_IGET_LIVE    (1u << 0) /* -ENOENT for a freed (dead) inode */
#define NVMEFS_IGET_EXTENTS (1u << 1) /* its extent map (regular files) */
#define NVMEFS_IGET_XATTRS  (1u << 2) /* its extended attributes */
#define NVMEFS_IGET_ENTRIES (1u << 3) /* its entries (directories) */

/*
 * Inode ino with one operation reference for the caller, in *out (NULL on
 * error), meta held. 0, or -ENOENT (unknown, or freed with
 * NVMEFS_IGET_LIVE), or -EIO, -ENOMEM or -EUCLEAN from a load,
 * which may then drop and take meta again: the caller reads what it needs
 * under meta after its gets. The reference keeps the inode in memory until
 * nvmefs_inode_put, across any unlock.
 */
int nvmefs_inode_get(struct nvmefs_vol *vol, uint64_t ino, unsigned need,
		     struct nvmefs_inode **out);
/* The metadata in memory as the cache counts it (meta held). */
uint64_t nvmefs_icache_bytes(const struct nvmefs_vol *vol);
/* Evict inodes nothing pins (and a directory's entries with it) while
 * the cache is over -o meta_cache, visiting at most buckets buckets of the
 * inode table (meta held; no I/O: what is evicted is in the store). */
void nvmefs_icache_shrink(struct nvmefs_vol *vol, size_t buckets);
/* Give back a reference of nvmefs_inode_get (meta held; in may be NULL).
 * The last one of a freed inode nothing else holds frees its memory. No
 * I/O, cannot fail. */
void nvmefs_inode_put(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/* Free a freed inode's memory unless it is held (meta held): at the end of
 * whatever held it last (a put, a forget). */
void nvmefs_inode_reap(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/*
 * True when in must stay in memory, false when a cache could evict it and
 * read it again (meta held): the root; an operation reference; an open
 * handle; attributes not yet logged (the dirty list, an overwrite's time);
 * I/O in flight; freed while the kernel still names it (no stored copy is
 * left). The kernel's lookups alone do not pin: an inode it names is read
 * again by number.
 */
bool nvmefs_inode_pinned(const struct nvmefs_vol *vol, const struct nvmefs_inode *in);

/*
 * Walk every inode and the lookups table and check them (meta held): with
 * idle (no operation under way, as after a call of the core returns in a
 * single-threaded test, or at close) no inode may hold an operation
 * reference or I/O; a freed inode may stay only while held, and is then
 * pinned; the table's entries are whole and name inodes in memory. 0, or
 * -EUCLEAN after a message naming each fault.
 */
int nvmefs_icache_check(struct nvmefs_vol *vol, bool idle);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * meta_keys_i.h: the metadata as the store's keys and values
 * (fs/core/meta_keys.c), for meta.c's apply and meta_check.c's crosscheck;
 * nvmefs_inode_to_rec and nvmefs_inode_fold_wtime, defined there too, are
 * declared in meta_i.h for the whole core.
 * Each write goes through kv.c (the store, and the shadow when it is on);
 * meta held, or single-threaded (load, replay, fsck).
 */
#ifndef NVMEFS_META_KEYS_I_H
#define NVMEFS_META_KEYS_I_H

#include <stdbool.h>
#include <stdint.h>

#include "fs_i.h"
#include "store.h"

/* The INODE record of in as it is (no overwrite time folded, unlike
 * nvmefs_inode_to_rec, meta_i.h). meta held. */
void nvmefs_meta_inode_rec(const struct nvmefs_inode *in, struct nvmefs_rec *r);
/* The summary fields an INODE value carries, from the maps (never from an
 * INODE record). */
void nvmefs_meta_inode_sum(const struct nvmefs_inode *in, struct nvmefs_inode_sum *s);
/* The DIRENT_ADD record of entry d (pointing into d). */
void nvmefs_meta_dirent_rec(const struct nvmefs_dirent *d, struct nvmefs_rec *r);
/* The XATTR_SET record of x on inode ino (pointing into x). */
void nvmefs_meta_xattr_rec(uint64_t ino, const struct nvmefs_xattr *x, struct nvmefs_rec *r);
/* Put (put) or delete the keys of an entry (DIRENT and DCOOKIE), an xattr,
 * an orphan. */
void nvmefs_meta_kv_dirent(struct nvmefs_vol *vol, const struct nvmefs_dirent *d, bool put);
void nvmefs_meta_kv_xattr(struct nvmefs_vol *vol, uint64_t ino, const struct nvmefs_xattr *x,
			  bool put);
void nvmefs_meta_kv_orphan(struct nvmefs_vol *vol, uint64_t ino, bool put);

#endif

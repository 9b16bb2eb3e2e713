/* SPDX-License-Identifier: MIT */
/*
 * meta_i.h: the interface of fs/core/meta.c (the in-memory metadata model
 * and record application) and meta_check.c (its checks, the crosscheck,
 * fsck's store pass), for the core's other modules and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_META_I_H
#define NVMEFS_META_I_H

#include "fs_i.h"

int nvmefs_meta_init(struct nvmefs_vol *vol);
void nvmefs_meta_exit(struct nvmefs_vol *vol);
struct nvmefs_inode *nvmefs_iget(struct nvmefs_vol *vol, uint64_t ino);
struct nvmefs_dirent *nvmefs_dir_find(struct nvmefs_vol *vol, uint64_t parent, const char *name);
/* Index in dir->v of the first entry with a cookie >= cookie (readdir). */
size_t nvmefs_dir_index(const struct nvmefs_dir *dir, uint64_t cookie);
/* Apply one decoded record to the in-memory state (replay and live ops
 * alike). -EUCLEAN when it contradicts the state (corrupt metadata). */
int nvmefs_meta_apply(struct nvmefs_vol *vol, const struct nvmefs_rec *rec);
/* Fill the maps with one key and value of the store (the mount's load:
 * kinds in key order, so every inode comes before what names it; DCOOKIE
 * keys make the entries, with their cookies). -EUCLEAN when it contradicts
 * what is loaded, -ENOMEM. */
struct nvmefs_val;
int nvmefs_meta_load_val(struct nvmefs_vol *vol, const struct nvmefs_val *v);
/* A fill (vol->filling) of one inode's extents, read from the store in
 * key order as EXTENT records: they must be what its INODE value counted
 * (nextents, alloc_bytes), each within its member's data area, none
 * overlapping. 0 (in->ext_loaded), -EUCLEAN (logged, naming the inode) or
 * -ENOMEM; nothing changes on error. meta held. */
int nvmefs_meta_fill_extents(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			     const struct nvmefs_rec *ext, size_t n);
/* Take a directory's entries out of memory (a fill that failed), leaving
 * live as given (the summary's count). meta held. */
void nvmefs_meta_unload_entries(struct nvmefs_vol *vol, struct nvmefs_inode *in, size_t live);
/* fsck: compare the store (vol->store, every live key but the FREE keys,
 * which fsck's space pass checks against the extents) with the maps both
 * ways, as the crosscheck does: 0, -EUCLEAN (the first difference logged,
 * naming the key), -ENOMEM or an I/O error. With repair (fsck -y), write
 * the maps' keys where they differ (puts, and tombstones for keys the maps
 * do not call for: only those, so a repair fits a nearly full run area)
 * and return how many, for the next flush to make durable. No lock:
 * single-threaded. */
int nvmefs_meta_check_store(struct nvmefs_vol *vol, bool repair);
/* The inode's INODE record, its overwrite time folded in first (meta held). */
void nvmefs_inode_to_rec(struct nvmefs_inode *in, struct nvmefs_rec *rec);
void nvmefs_inode_dirty(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/* Fold an overwrite's time (in->wtime_ns) into mtime and ctime (meta
 * held): before reading or setting them. */
void nvmefs_inode_fold_wtime(struct nvmefs_inode *in);
/* Recompute in->privs from the mode and the xattrs (meta held). */
void nvmefs_inode_note_privs(struct nvmefs_inode *in);
void nvmefs_inode_undirty(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/* Check the loaded state is whole: every entry's child exists, link counts. */
int nvmefs_meta_verify(struct nvmefs_vol *vol);
/* Remove the inode from the table and free its memory (dead, and held by
 * nothing: nvmefs_inode_held). */
void nvmefs_inode_drop(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/* What a new inode with a name of name_len adds to meta_bytes (its
 * journal records: INODE and DIRENT_ADD). */
uint64_t nvmefs_meta_cost_inode(size_t name_len);

/*
 * The shadow (fs/store/store.h; docs/FORMAT.md, "Crosschecks"): a second
 * copy of the state's keys in memory, written through by apply beside the
 * store, for the crosscheck below. It doubles metadata memory: off unless the
 * environment has NVMEFS_META_CROSSCHECK=1 at nvmefs_meta_init (never for
 * a volume opened to be checked, opts.check) or a test starts it. Start it
 * before the first record is applied (-EBUSY after; 0 if on; -ENOMEM);
 * stop frees it (nothing when off). meta held, or single-threaded.
 */
int nvmefs_meta_shadow_start(struct nvmefs_vol *vol);
/* Put every key of the store into the shadow (a mount that reads inodes
 * on demand: the crosscheck then compares what is in memory with it). 0
 * when off; -ENOMEM, -EUCLEAN or an I/O error. */
int nvmefs_meta_shadow_fill(struct nvmefs_vol *vol);
void nvmefs_meta_shadow_stop(struct nvmefs_vol *vol);
/* Put the inode's INODE key as the cache has it (its overwrite time folded
 * in first) into the store, and the shadow when on (kv.c): for the
 * journal's INODE records of dirty inodes, which it logs without apply
 * (emit_dirty). Nothing when no key is taken (nvmefs_kv_on) or the inode
 * is dead. meta held. */
void nvmefs_meta_kv_inode(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/*
 * Compare the shadow store with the maps both ways: every inode, entry
 * (DIRENT and DCOOKIE), extent, xattr and orphan of the maps, and every
 * range of the durable free map (FREE), has its key with the value they
 * give (an INODE's summary from the maps; its attributes only when the
 * inode is not dirty: a dirty one's go out at the next commit), and the
 * shadow has no other live key; then the durable free map must be the
 * complement of the extents (nvmefs_alloc_check). Returns 0 (also
 * when off), -EUCLEAN at the first difference (logged, naming the key and
 * what differs), the shadow's sticky error when a put failed (-EINVAL: a
 * value format v2 refuses; -ENOMEM), or -ENOMEM. meta held.
 */
int nvmefs_meta_crosscheck(struct nvmefs_vol *vol);
/* Whether the shadow is on and a check at a commit is due: always for a
 * state under 10,000 keys, else once the writes since the last check are
 * a sixteenth of it (nvmefs_shadow_check_due). meta held. */
bool nvmefs_meta_crosscheck_due(struct nvmefs_vol *vol);

/* Between meta.c and meta_check.c: the slot of vol->dtab where the entry
 * (parent, name[0..len)) is or would go; in's xattr name[0..len), or
 * NULL. meta held. */
struct nvmefs_dirent **nvmefs_meta_dir_slot(struct nvmefs_vol *vol, uint64_t parent,
					    const char *name, size_t len);
struct nvmefs_xattr *nvmefs_meta_xattr_find(struct nvmefs_inode *in, const char *name, size_t len);

#endif

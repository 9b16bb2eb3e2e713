/* SPDX-License-Identifier: MIT */
/*
 * behind_i.h: the interface of fs/core/behind.c, the bookkeeping of writes
 * answered before the devices complete them (NVMEFS_WRITE_BEHIND,
 * data_i.h): how many are in flight, the gate a commit closes, the failure
 * kept for the file's next fsync, and the unlinked inodes whose free waits
 * for them. It logs nothing: the data path (data_io.c) and the journal
 * (journal.c), both above it, log what it holds. The shared types and the
 * fields it keeps (vol->behind_*, vol->deferred, in->behind_*) are in fs_i.h.
 */
#ifndef NVMEFS_BEHIND_I_H
#define NVMEFS_BEHIND_I_H

#include <stdbool.h>
#include <sys/types.h>

#include "fs_i.h"

/* The most writes answered early in flight at once (each holds a pool buffer). */
#define NVMEFS_BEHIND_MAX 16u
/* The longest a serving thread holds such writes back before it sends
 * them (the doors' plugs: fs/fuse/loop.c, fs/native/server_io.c); they
 * send at NVMEFS_BEHIND_MAX held, too. */
#define NVMEFS_HOLD_NS 500000ull

/* May one more write of in be answered early? Counted in flight if so
 * (nvmefs_behind_finish undoes it). */
bool nvmefs_behind_begin(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/* An early-answered write of in ended with res (bytes or -errno). */
void nvmefs_behind_finish(struct nvmefs_vol *vol, struct nvmefs_inode *in, ssize_t res);
/* A commit, before it gathers records: new writes are not answered early,
 * and those in flight are waited for; undone by nvmefs_behind_release.
 * False, nothing done, on an engine completion thread while some are in
 * flight: it may be the one that must complete them (the commit is then
 * not made: reclaim_pending's, after ENOSPC, which is rare, as no write is
 * answered early while free space is low; such a thread also never waits
 * for commit_lock, journal.c). */
bool nvmefs_behind_hold(struct nvmefs_vol *vol);
void nvmefs_behind_release(struct nvmefs_vol *vol);
/* Is an early-answered write of in in flight? (meta may be held.) */
bool nvmefs_behind_busy(struct nvmefs_vol *vol, const struct nvmefs_inode *in);
/* The first failure of an early-answered write of in since the last
 * call (-errno), or 0; cleared. Call after a commit (which waits for them). */
int nvmefs_behind_error(struct nvmefs_inode *in);
/* Leave the free of the unlinked, closed in to the next commit, which
 * waits for its writes first (nvmefs_data_free_inode logs it as an orphan
 * before): a reference held on vol->deferred. 0 or -ENOMEM. meta held. */
int nvmefs_behind_defer_free(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/* Unmount without a last commit (shut down, read-only, an error): let
 * the waiting inodes go unfreed; their orphan records free them at the
 * next mount. meta held. */
void nvmefs_behind_drop_deferred(struct nvmefs_vol *vol);

#endif

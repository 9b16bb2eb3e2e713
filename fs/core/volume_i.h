/* SPDX-License-Identifier: MIT */
/*
 * volume_i.h: the interface of fs/core/volume.c (opening, starting and closing a volume), for the
 * core's other modules and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_VOLUME_I_H
#define NVMEFS_VOLUME_I_H

#include "fs_i.h"

/*
 * An empty volume over set (owned by the volume from here; NULL: none, of
 * ndevs members, for the fuzzers' in-memory volumes): metadata tables and
 * journal, nothing loaded. NULL when out of memory. nvmefs_vol_destroy
 * frees it and everything in it, the set's memory excepted (closed by
 * nvmefs_vol_close/abandon).
 */
struct nvmefs_vol *nvmefs_vol_create(struct nvmefs_devset *set, unsigned ndevs,
				     const struct nvmefs_vol_opts *opts);
void nvmefs_vol_destroy(struct nvmefs_vol *vol);
/* The volume's label, data areas, capacity and metadata budget (meta_cap,
 * from the run area) from its members' labels (in member order). */
void nvmefs_vol_set_geometry(struct nvmefs_vol *vol, const struct nvmefs_label *labels);
/* Open the members (any order), check labels, load metadata. */
int nvmefs_vol_open(struct nvmefs_vol **out, const char *const *paths, unsigned n,
		    const struct nvmefs_vol_opts *opts);
/* Create the engine, pool and committer (after daemonizing). */
int nvmefs_vol_start(struct nvmefs_vol *vol);
/* Commit and flush (superblock marked clean) and release everything. */
int nvmefs_vol_close(struct nvmefs_vol *vol);
/* mkfs: format the run area and the journal, flush the first state (an
 * empty root owned by uid:gid), then the labels (primary and backup) of
 * every member, in label order. */
int nvmefs_vol_format(struct nvmefs_devset *set, const struct nvmefs_label *labels, uint32_t uid,
		      uint32_t gid);
/*
 * mount -o remount (fs/tools/remount.c, through the control directory):
 * read-only (ro) stops the committer and the compactor after one clean
 * flush, read-write starts them again (-EROFS on a volume mounted -o ro or
 * made read-only by a metadata write error). atime: NVMEFS_ATIME_*, or -1
 * to keep the policy.
 */
int nvmefs_vol_remount(struct nvmefs_vol *vol, bool ro, int atime);
/*
 * FS_IOC_SHUTDOWN (xfstests' godown; fs/fuse/ctl.c): commit what is logged
 * (the server cannot see the caller's flags; docs/USER-GUIDE.md), fence
 * the members (nvmefs_engine_fence: nothing reaches them after this
 * returns), refuse every later commit, change and remount. For good: the
 * unmount then writes nothing, and the next mount replays the journal.
 * 0 (also when shut down already), or the last commit's -errno (the
 * volume is shut down all the same).
 */
int nvmefs_vol_shutdown(struct nvmefs_vol *vol);
/* Release everything writing nothing: what a killed daemon leaves (tests). */
void nvmefs_vol_abandon(struct nvmefs_vol *vol);

#endif

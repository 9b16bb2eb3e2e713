/* SPDX-License-Identifier: MIT */
/*
 * journal_i.h: the interface of fs/core/journal.c (logging, commits, flushes, the committer) and
 * fs/core/journal_load.c (format, load and replay, orphan reclaim), for the core's other modules
 * and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_JOURNAL_I_H
#define NVMEFS_JOURNAL_I_H

#include "fs_i.h"
#include "meta_i.h"

/* The journal's locks and settings; exit closes the store and frees the
 * open transaction. */
int nvmefs_journal_init(struct nvmefs_vol *vol);
void nvmefs_journal_exit(struct nvmefs_vol *vol);
/* Log INODE_FREE for every orphan (files unlinked while open before a
 * crash); their count in *n. The caller commits. */
int nvmefs_journal_reclaim_orphans(struct nvmefs_vol *vol, size_t *n);
/* Apply rec (nvmefs_meta_apply) and append it to the open transaction
 * (meta held). */
int nvmefs_journal_log(struct nvmefs_vol *vol, const struct nvmefs_rec *rec);
/* Append an encoded record to the open transaction (meta held). */
int nvmefs_journal_append(struct nvmefs_vol *vol, const struct nvmefs_rec *rec);
/* Decode and apply a stream of len bytes of records (a transaction's;
 * what names it in messages). -EUCLEAN for a malformed or contradicting
 * record, -ENOMEM. */
int nvmefs_journal_apply(struct nvmefs_vol *vol, const uint8_t *p, size_t len, const char *what);
/* Read the superblocks, open the store, fill the maps from it (or, when
 * inodes are read on demand, only the root) and replay the journal from
 * the manifest's position into vol. */
int nvmefs_journal_load(struct nvmefs_vol *vol);
/* Make every change so far durable (data flushed, records committed). */
int nvmefs_journal_commit(struct nvmefs_vol *vol);
/* An fsync of in, for every door: commit (which waits for the writes
 * answered early), then a device failure of one of in's writes answered
 * early is this fsync's, once, as the page cache's errors are; the
 * commit's own error first. */
int nvmefs_journal_fsync(struct nvmefs_vol *vol, struct nvmefs_inode *in);
/* Commit and flush the store (format v2's checkpoint: the journal before
 * this point is then not needed); clean marks a clean unmount. */
int nvmefs_journal_checkpoint(struct nvmefs_vol *vol, bool clean);
/*
 * The journal's part of a shutdown (nvmefs_vol_shutdown, vol->shut_down
 * already set): the committer and compactor stopped, the records logged so
 * far committed unless commit is false (a volume that writes nothing), and
 * the engine fenced before any other commit can start: later commits and
 * checkpoints answer -EIO. 0, or the last commit's -errno.
 */
int nvmefs_journal_shutdown(struct nvmefs_vol *vol, bool commit);
/* Start the committer and compactor threads; stop joins them. */
int nvmefs_journal_start(struct nvmefs_vol *vol);
void nvmefs_journal_stop(struct nvmefs_vol *vol);
/* mkfs: an empty journal and run area, the store opened on it; the caller
 * applies the root and then flushes (nvmefs_journal_checkpoint). */
int nvmefs_journal_format(struct nvmefs_vol *vol);
/* The run area the label describes (member 0). */
struct nvmefs_runs_geom;
void nvmefs_journal_runs_geom(const struct nvmefs_label *l, struct nvmefs_runs_geom *g);
/* The journal ring's byte offset on member 0 (journal.c and
 * journal_load.c). */
uint64_t nvmefs_journal_base(const struct nvmefs_vol *vol);
/* Sticky metadata error: non-zero when the volume went read-only. */
int nvmefs_journal_error(struct nvmefs_vol *vol);

#endif

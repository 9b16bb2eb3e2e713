/* SPDX-License-Identifier: MIT */
/*
 * data_i.h: the interface of the data path, fs/core/data.c (planning, truncate, fallocate,
 * seek) and fs/core/data_io.c (reads and writes), for the core's other modules and the doors;
 * at the end, what the two files share. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_DATA_I_H
#define NVMEFS_DATA_I_H

#include "fs_i.h"

/*
 * Completion of an asynchronous read or write: res is the bytes read or
 * written, or -errno; for a read, data points at the bytes (valid until
 * the callback returns). Called exactly once, from the calling thread when
 * the request ends early, else from an I/O completion thread; it must not
 * block for long.
 */
typedef void (*nvmefs_data_done_fn)(void *ctx, ssize_t res, const void *data);

/*
 * Read [off, off + len) (clamped at EOF) into the pool buffer buf, which
 * the call takes over (it goes back to the pool after done returns). Takes
 * a shared range lock until the data is in.
 */
void nvmefs_data_read_async(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, size_t len,
			    uint64_t off, nvmefs_data_done_fn done, void *ctx);
/*
 * The same from offset 0, and held (unless the read ended before it
 * locked) runs with the range still locked, before done: what held does
 * with the bytes (statahead stores them in the kernel's page cache) cannot
 * race a truncate or a write of the range, which wait for the lock.
 */
void nvmefs_data_read_hold(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, size_t len,
			   nvmefs_data_done_fn held, nvmefs_data_done_fn done, void *ctx);
/* What a read-ahead read saw of its file. */
struct nvmefs_read_view {
	uint64_t gen; /* the range-lock generation while the range was locked */
	/* The size it clamped the read at, stored as soon as it is read (the
	 * size is an atomic, under no lock); NVMEFS_SIZE_UNSEEN until then. */
	_Atomic uint64_t size;
};
#define NVMEFS_SIZE_UNSEEN UINT64_MAX

/* The same, but buf stays the caller's: done may keep the bytes (data)
 * after it returns, and buf never goes back to the pool here. *view gets
 * what the read saw (its fields are left alone when the read ends before
 * locking or before reading the size). */
void nvmefs_data_prefetch_async(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf,
				size_t len, uint64_t off, struct nvmefs_read_view *view,
				nvmefs_data_done_fn done, void *ctx);

/* nvmefs_data_write_async flags */
#define NVMEFS_WRITE_APPEND	(1u << 0) /* at EOF, decided under a whole-file lock */
#define NVMEFS_WRITE_KEEP_TIMES (1u << 1) /* leave mtime and ctime (the kernel's) */
/*
 * Answer done(ctx, len) once the write is planned (its space allocated),
 * as it is sent, before the devices complete it, when no commit is gathering
 * its records and fewer than NVMEFS_BEHIND_MAX such writes are in flight
 * (behind.c keeps the count); otherwise, or when edge blocks must be read
 * first, at completion as usual. Until it completes, its range stays locked (a read of it waits),
 * the file shows its new size and times, and a commit waits for it (so no
 * durable size covers data that is not). A failure then goes to the
 * file's next fsync (nvmefs_behind_error), as the page cache's
 * write-back errors do.
 */
#define NVMEFS_WRITE_BEHIND (1u << 2)

/* Free the unlinked, no longer open in (log INODE_FREE), or, while an
 * early-answered write of it is in flight (whose extents are logged at
 * its completion, and must not come after the free), leave that to the
 * next commit, logging in as an orphan first unless it is one (orphan
 * false: it was unlinked while open). meta held. */
int nvmefs_data_free_inode(struct nvmefs_vol *vol, struct nvmefs_inode *in, bool orphan);
/*
 * Write len bytes of data at off (NVMEFS_WRITE_* flags). buf is a pool buffer the call takes over;
 * when data lies in it (the request was received there) and the write is block-aligned, the devices
 * write straight from it: no copy. Otherwise the payload is moved into place and the edge blocks
 * are read first. The range stays locked exclusively until the I/O is done and its extents are
 * logged.
 */
void nvmefs_data_write_async(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf,
			     const void *data, size_t len, uint64_t off, unsigned flags,
			     nvmefs_data_done_fn done, void *ctx);

/* Wait until no asynchronous read or write is in flight. */
void nvmefs_data_drain(struct nvmefs_vol *vol);

/* Change the size (io_lock held exclusively over the whole file). */
int nvmefs_data_truncate(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t size);
int nvmefs_data_fallocate(struct nvmefs_vol *vol, struct nvmefs_inode *in, int mode, uint64_t off,
			  uint64_t len);
int nvmefs_data_seek(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off, int whence,
		     uint64_t *res);

/*
 * Read [off, off + len) (clamped at EOF) into the caller's buffer buf,
 * which stays the caller's: done's data is buf. When buf, off and len are
 * block-aligned (NVMEFS_BLOCK) the devices read straight into buf: no
 * copy. Otherwise through a pool buffer, then copied; len is then at most
 * NVMEFS_IO_MAX. Takes a shared range lock until the data is in.
 */
void nvmefs_data_read_into(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, size_t len,
			   uint64_t off, nvmefs_data_done_fn done, void *ctx);
/*
 * Write len bytes from the caller's buffer buf at off (NVMEFS_WRITE_*
 * flags). Block-aligned buf, off and len: the devices write straight from
 * buf, no copy; otherwise through a pool buffer (len at most
 * NVMEFS_IO_MAX), as nvmefs_data_write_async.
 */
void nvmefs_data_write_from(struct nvmefs_vol *vol, struct nvmefs_inode *in, const void *buf,
			    size_t len, uint64_t off, unsigned flags, nvmefs_data_done_fn done,
			    void *ctx);
/* Bytes one request through a pool buffer may move (the FUSE request size). */
#define NVMEFS_IO_MAX (1u << 20)
/*
 * Synchronous helpers over the two above, for any length: the range in
 * pieces of at most NVMEFS_IO_MAX, one after another. pread returns the
 * bytes read (short at EOF), pwrite the bytes written, or -errno.
 */
ssize_t nvmefs_data_pread(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, size_t len,
			  uint64_t off);
ssize_t nvmefs_data_pwrite(struct nvmefs_vol *vol, struct nvmefs_inode *in, const void *buf,
			   size_t len, uint64_t off);

/*
 * Between data.c and data_io.c only: the plan of a block-aligned file range
 * (data.c), which data_io.c's requests carry to the engine.
 */

/* A growing list of engine segments, and the EXTENT records to log once
 * the data they reach is written. Zeroed to start; the plan's owner frees
 * it with nvmefs_data_plan_free. */
struct nvmefs_plan {
	uint8_t *buf; /* the block-aligned area the segments read into or write from */
	struct nvmefs_io_seg *io;
	size_t nio, io_cap;
	struct nvmefs_rec *recs; /* EXTENT records to log after the I/O */
	size_t nrecs, rec_cap;
	uint64_t last_end[NVMEFS_MAX_DEVICES]; /* slot -> end of its last allocation */
	uint32_t ext_flags;		       /* for new extents */
};

/* One piece of a walked range: a hole, an unwritten or a written extent's
 * part, on one slot (data.c). */
struct nvmefs_piece;
typedef int (*nvmefs_piece_fn)(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			       const struct nvmefs_piece *p, void *ctx);

/* Call fn for every piece of [off, off + len) in file order. meta held, or
 * (for fn that only reads, nvmefs_data_read_piece) in->map_lock. */
int nvmefs_data_walk(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off, uint64_t len,
		     nvmefs_piece_fn fn, void *ctx);
/* Piece functions for nvmefs_data_walk (ctx is the plan). read: a segment
 * per written piece, zeros in pl->buf for the rest. write: a segment per
 * piece, space reserved for holes and the records of what becomes
 * written (meta held). */
int nvmefs_data_read_piece(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			   const struct nvmefs_piece *p, void *ctx);
int nvmefs_data_write_piece(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			    const struct nvmefs_piece *p, void *ctx);
/* Plan [off, off + len) with fn under meta (taken here: called without
 * it), reserving space for the holes it fills; once more after a commit on
 * ENOSPC while released space waits for it. On failure nothing stays
 * reserved. */
int nvmefs_data_plan_walk(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off,
			  uint64_t len, nvmefs_piece_fn fn, struct nvmefs_plan *pl);
/* Plan a write that lands on written extents only, under the inode's
 * map_lock alone (taken here); -EAGAIN (the plan emptied) when it needs
 * nvmefs_data_plan_walk. */
int nvmefs_data_plan_overwrite(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off,
			       uint64_t len, struct nvmefs_plan *pl);
/* Give back the space the plan reserved (its I/O failed; meta held). */
void nvmefs_data_plan_unreserve(struct nvmefs_vol *vol, struct nvmefs_inode *in,
				struct nvmefs_plan *pl);
void nvmefs_data_plan_free(struct nvmefs_plan *pl);
/* Log the plan's EXTENT records, its data written (meta held). */
int nvmefs_data_log_extents(struct nvmefs_vol *vol, struct nvmefs_plan *pl);
/* mtime and ctime now (meta held). */
void nvmefs_data_touch_mc(struct nvmefs_inode *in);

#endif

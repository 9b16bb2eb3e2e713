/* SPDX-License-Identifier: MIT */
/*
 * data_i.h: the interface of fs/core/data.c (the data path), for the core's other
 * modules and the doors. The shared types are in fs_i.h.
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
/* What a read-ahead read saw of its file. */
struct nvmefs_read_view {
	uint64_t gen; /* the range-lock generation while the range was locked */
	/* The size it clamped the read at, stored under vol->lock as it is
	 * read; NVMEFS_SIZE_UNSEEN until then. */
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

#endif

/* SPDX-License-Identifier: MIT */
/*
 * prefetch_i.h: the interface of fs/core/prefetch.c (read-ahead in direct mode), for the core's
 * other modules and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_PREFETCH_I_H
#define NVMEFS_PREFETCH_I_H

#include "fs_i.h"
#include "data_i.h"

/* A handle's read-ahead state (at OPEN and CREATE; NULL when out of memory:
 * that handle is not read ahead). */
struct nvmefs_prefetch *nvmefs_prefetch_open(struct nvmefs_inode *in);
/* Answer a READ of [off, off + len) on handle pf (buf: the worker's pool
 * buffer, taken over) from a window read ahead, or read it; a sequential
 * reader gets up to opts.prefetch windows read ahead. */
void nvmefs_prefetch_read(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			  struct nvmefs_prefetch *pf, void *buf, size_t len, uint64_t off,
			  nvmefs_data_done_fn done, void *ctx);
/* Drop a handle's windows, waiting for those being read, and free it (at its
 * RELEASE; pf may be NULL). */
void nvmefs_prefetch_close(struct nvmefs_inode *in, struct nvmefs_prefetch *pf);
/* Drop every handle's windows and free the handles never closed: before
 * the pool goes (volume close), once no request runs. */
void nvmefs_prefetch_forget_all(struct nvmefs_vol *vol);

/* nvmefs_data_write_async flags */
#define NVMEFS_WRITE_APPEND	(1u << 0) /* at EOF, decided under a whole-file lock */
#define NVMEFS_WRITE_KEEP_TIMES (1u << 1) /* leave mtime and ctime (the kernel's) */

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

#endif

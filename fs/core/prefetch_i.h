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
/* Answer a READ of [off, off + len) on handle pf (NULL: none) from a
 * window read ahead, or read it: into the caller's block-aligned area
 * when into is set (nvmefs_data_read_into; buf is then NULL), else into
 * buf, the worker's pool buffer, taken over. A sequential reader gets up
 * to opts.prefetch windows read ahead. */
void nvmefs_prefetch_read(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			  struct nvmefs_prefetch *pf, void *buf, void *into, size_t len,
			  uint64_t off, nvmefs_data_done_fn done, void *ctx);
/* Drop a handle's windows, waiting for those being read, and free it (at its
 * RELEASE; pf may be NULL). */
void nvmefs_prefetch_close(struct nvmefs_inode *in, struct nvmefs_prefetch *pf);
/* Drop every handle's windows and free the handles never closed: before
 * the pool goes (volume close), once no request runs. */
void nvmefs_prefetch_forget_all(struct nvmefs_vol *vol);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * nvmefs pinned buffer pool: page-aligned, mlock'ed, NUMA-local I/O buffers.
 *
 * O_DIRECT needs aligned memory, and memory the kernel can rely on staying
 * resident makes every transfer cheaper, so all I/O buffers come from here.
 * A pool hands out buffers of one size, allocates them lazily on the chosen
 * NUMA node and never holds more than max_bytes in all. When the memlock
 * limit is too low to pin them, the pool says so once and goes on with
 * unpinned buffers: slower, never a failure.
 */
#ifndef NVMEFS_BUFPOOL_H
#define NVMEFS_BUFPOOL_H

#include <stdbool.h>
#include <stddef.h>

struct nvmefs_bufpool;

struct nvmefs_bufpool_opts {
	size_t buf_size;  /* bytes per buffer, rounded up to the page size */
	size_t max_bytes; /* cap on all buffers together (0: 64 buffers) */
	int numa_node;	  /* node to allocate on; -1: no preference */
	bool no_pin;	  /* do not even try to mlock */
};

struct nvmefs_bufpool_stats {
	size_t buf_size;  /* bytes per buffer (page multiple) */
	size_t max_bufs;  /* buffers the cap allows */
	size_t allocated; /* buffers that exist */
	size_t in_use;	  /* buffers handed out */
	bool pinned;	  /* buffers are mlock'ed */
};

/*
 * Create a pool. The cap must allow at least one buffer. Nothing is
 * allocated until the first get. Returns 0 or -EINVAL / -ENOMEM.
 */
int nvmefs_bufpool_create(struct nvmefs_bufpool **out, const struct nvmefs_bufpool_opts *opts);

/* Free every buffer; all must have been put back. NULL is allowed. */
void nvmefs_bufpool_destroy(struct nvmefs_bufpool *pool);

/*
 * Take a buffer, waiting while the pool is at its cap and all are in use.
 * Returns NULL only if memory for a new buffer could not be had and none is
 * in use that could come back. The caller owns it until nvmefs_bufpool_put().
 */
void *nvmefs_bufpool_get(struct nvmefs_bufpool *pool);

/* Like get, but returns NULL at once instead of waiting. */
void *nvmefs_bufpool_tryget(struct nvmefs_bufpool *pool);

/* Give back a buffer obtained from this pool. */
void nvmefs_bufpool_put(struct nvmefs_bufpool *pool, void *buf);

/* A snapshot of the pool's counters. */
void nvmefs_bufpool_stats(struct nvmefs_bufpool *pool, struct nvmefs_bufpool_stats *st);

#endif

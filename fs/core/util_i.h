/* SPDX-License-Identifier: MIT */
/*
 * util_i.h: the interface of fs/core/util.c (growing arrays, aligned buffers, the clock,
 * synchronous member I/O), for the core's other modules and the doors. The shared types are in
 * fs_i.h.
 */
#ifndef NVMEFS_UTIL_I_H
#define NVMEFS_UTIL_I_H

#include "fs_i.h"

/*
 * Make the array *vp (elements of elem bytes, *cap of them allocated) hold
 * at least need elements, doubling as it grows. Returns 0 or -ENOMEM (the
 * array is then unchanged). vp is the address of the array pointer.
 */
int nvmefs_grow(void *vp, size_t *cap, size_t need, size_t elem);
void nvmefs_timespec_now(struct timespec *ts);
/* Aligned synchronous I/O on a member (metadata, labels). */
int nvmefs_vol_pio(struct nvmefs_vol *vol, unsigned dev, bool write, uint64_t off, void *buf,
		   size_t len);
void *nvmefs_aligned_alloc(size_t len);
/*
 * Whether process or thread pid has gid among its supplementary groups
 * (/proc/PID/status). false when pid is 0 or its status cannot be read.
 */
bool nvmefs_pid_in_group(int32_t pid, uint32_t gid);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * nvmefs file layout arithmetic (RAID-0 striping of one file).
 *
 * A file's layout is (chunk size, stripe count, ordered device list). File
 * offset o falls in stripe unit u = o / chunk, which lives in slot
 * s = u % count; inside that slot's "component" (the part of the file kept on
 * one device) it sits at (u / count) * chunk + o % chunk. The device holding
 * slot s is devs[s]. Everything here is pure arithmetic with no I/O, so it
 * can be tested exhaustively (tests/test_layout.c).
 */
#ifndef NVMEFS_LAYOUT_H
#define NVMEFS_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nvmefs/limits.h"

/* Chunk (stripe unit) size limits; the chunk is always a power of two. */
#define NVMEFS_CHUNK_MIN (4u << 10)
#define NVMEFS_CHUNK_MAX (1u << 30)

struct nvmefs_layout {
	uint32_t chunk_size;		  /* power of two, CHUNK_MIN..CHUNK_MAX */
	uint32_t stripe_count;		  /* 1..NVMEFS_MAX_DEVICES */
	uint8_t devs[NVMEFS_MAX_DEVICES]; /* slot -> device index, distinct */
};

/* One contiguous piece of a file range that lives on one device. */
struct nvmefs_segment {
	uint32_t slot;	   /* stripe slot, 0..stripe_count-1 */
	uint32_t dev;	   /* device index: layout->devs[slot] */
	uint64_t comp_off; /* offset inside the slot's component */
	uint64_t len;	   /* bytes, > 0, never crosses a chunk boundary */
	uint64_t buf_off;  /* offset of these bytes in the caller's buffer */
};

/*
 * Check a layout: chunk a power of two within limits, count within
 * 1..NVMEFS_MAX_DEVICES, every devs[i] (i < count) below ndevs and distinct.
 * Returns 0 or -EINVAL.
 */
int nvmefs_layout_check(const struct nvmefs_layout *l, unsigned ndevs);

/*
 * Fill *l with the default layout over ndevs devices: chunk_size, every
 * device, slots rotated to start at device (first % ndevs).
 * Returns 0 or -EINVAL (bad chunk or ndevs).
 */
int nvmefs_layout_init(struct nvmefs_layout *l, uint32_t chunk_size, unsigned ndevs,
		       unsigned first);

/*
 * Number of segments nvmefs_layout_map() produces for [off, off + len).
 * 0 when len is 0.
 */
uint64_t nvmefs_layout_nsegs(const struct nvmefs_layout *l, uint64_t off, uint64_t len);

/*
 * Map the file range [off, off + len) to segments, in file order, one per
 * chunk piece. Writes at most max segments to segs and returns how many the
 * range needs (like snprintf: a return above max means segs was too small
 * and only the first max were written). The layout must pass
 * nvmefs_layout_check().
 */
uint64_t nvmefs_layout_map(const struct nvmefs_layout *l, uint64_t off, uint64_t len,
			   struct nvmefs_segment *segs, uint64_t max);

/* Inverse of the map: the file offset stored at comp_off of slot. */
uint64_t nvmefs_layout_file_off(const struct nvmefs_layout *l, uint32_t slot, uint64_t comp_off);

/*
 * Bytes of slot's component that a file of file_size bytes covers, that is
 * one past the highest component offset that holds file data (0 if none).
 */
uint64_t nvmefs_layout_comp_size(const struct nvmefs_layout *l, uint32_t slot, uint64_t file_size);

#endif

// SPDX-License-Identifier: MIT
/*
 * Layout arithmetic: file offsets <-> (slot, component offset).
 *
 * The chunk is a power of two, so offset-in-chunk and unit number are a mask
 * and a shift; the stripe count may be any number (3 devices is fine), so the
 * slot and the row within a slot need a divide.
 */
#include <errno.h>
#include <stdbool.h>

#include "nvmefs/layout.h"

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

static unsigned chunk_shift(const struct nvmefs_layout *l)
{
	return (unsigned)__builtin_ctz(l->chunk_size);
}

int nvmefs_layout_check(const struct nvmefs_layout *l, unsigned ndevs)
{
	uint64_t seen = 0;

	if (!is_pow2(l->chunk_size) || l->chunk_size < NVMEFS_CHUNK_MIN ||
	    l->chunk_size > NVMEFS_CHUNK_MAX)
		return -EINVAL;
	if (l->stripe_count < 1 || l->stripe_count > NVMEFS_MAX_DEVICES || l->stripe_count > ndevs)
		return -EINVAL;
	for (uint32_t i = 0; i < l->stripe_count; i++) {
		if (l->devs[i] >= ndevs || (seen & (1ull << l->devs[i])))
			return -EINVAL;
		seen |= 1ull << l->devs[i];
	}
	return 0;
}

int nvmefs_layout_init(struct nvmefs_layout *l, uint32_t chunk_size, unsigned ndevs, unsigned first)
{
	if (ndevs < 1 || ndevs > NVMEFS_MAX_DEVICES)
		return -EINVAL;
	l->chunk_size = chunk_size;
	l->stripe_count = ndevs;
	for (unsigned i = 0; i < NVMEFS_MAX_DEVICES; i++)
		l->devs[i] = i < ndevs ? (uint8_t)((first + i) % ndevs) : 0;
	return nvmefs_layout_check(l, ndevs);
}

uint64_t nvmefs_layout_nsegs(const struct nvmefs_layout *l, uint64_t off, uint64_t len)
{
	unsigned shift = chunk_shift(l);

	if (len == 0)
		return 0;
	return ((off + len - 1) >> shift) - (off >> shift) + 1;
}

uint64_t nvmefs_layout_map(const struct nvmefs_layout *l, uint64_t off, uint64_t len,
			   struct nvmefs_segment *segs, uint64_t max)
{
	const unsigned shift = chunk_shift(l);
	const uint64_t mask = (uint64_t)l->chunk_size - 1;
	const uint64_t count = l->stripe_count;
	uint64_t unit = off >> shift;
	uint64_t slot = unit % count;
	uint64_t row = unit / count;
	uint64_t in_chunk = off & mask;
	uint64_t done = 0, n = 0;

	while (done < len) {
		uint64_t piece = (uint64_t)l->chunk_size - in_chunk;

		if (piece > len - done)
			piece = len - done;
		if (n < max) {
			segs[n].slot = (uint32_t)slot;
			segs[n].dev = l->devs[slot];
			segs[n].comp_off = (row << shift) | in_chunk;
			segs[n].len = piece;
			segs[n].buf_off = done;
		}
		n++;
		done += piece;
		in_chunk = 0;
		/* Next unit: next slot, wrapping to the next row. */
		if (++slot == count) {
			slot = 0;
			row++;
		}
	}
	return n;
}

uint64_t nvmefs_layout_file_off(const struct nvmefs_layout *l, uint32_t slot, uint64_t comp_off)
{
	const unsigned shift = chunk_shift(l);
	const uint64_t mask = (uint64_t)l->chunk_size - 1;
	uint64_t row = comp_off >> shift;

	return ((row * l->stripe_count + slot) << shift) | (comp_off & mask);
}

uint64_t nvmefs_layout_comp_size(const struct nvmefs_layout *l, uint32_t slot, uint64_t file_size)
{
	const unsigned shift = chunk_shift(l);
	const uint64_t mask = (uint64_t)l->chunk_size - 1;
	const uint64_t count = l->stripe_count;
	uint64_t last, unit, last_slot, row;

	if (file_size == 0)
		return 0;
	last = file_size - 1;
	unit = last >> shift;
	last_slot = unit % count;
	row = unit / count;
	/* Slots before the last byte's slot have a full chunk in its row. */
	if (slot < last_slot)
		return (row + 1) << shift;
	if (slot == last_slot)
		return (row << shift) + (last & mask) + 1;
	return row << shift;
}

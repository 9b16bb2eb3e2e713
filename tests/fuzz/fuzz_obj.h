/* SPDX-License-Identifier: MIT */
/*
 * What the run area's fuzz targets share (fuzz_manifest.c, fuzz_runr.c):
 * sealing an object's crc as a writer would, so that the decoders' checks
 * past the crc are reached.
 */
#ifndef NVMEFS_FUZZ_OBJ_H
#define NVMEFS_FUZZ_OBJ_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "format.h"
#include "sorted_i.h"

/* Seal the crc of the object (runfmt_i.h's 64-byte header: its block
 * count at byte 32, its crc at byte 12) at b over the length it claims,
 * when that is 1..avail blocks. */
static inline void fuzz_obj_reseal(uint8_t *b, uint32_t avail)
{
	uint32_t nb, crc;

	memcpy(&nb, b + 32, 4);
	nb = le32toh(nb);
	if (nb == 0 || nb > avail)
		return;
	crc = htole32(nvmefs_crc32c_hole(b, (size_t)nb * NVMEFS_BLOCK, 12));
	memcpy(b + 12, &crc, 4);
}

#endif

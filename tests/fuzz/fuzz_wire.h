/* SPDX-License-Identifier: MIT */
/*
 * fuzz_wire.h: the input of the fuzz_wire target (fuzz_wire.c), which
 * gen_corpus.c writes seeds of. An input is FUZZ_WIRE_PREFIX bytes standing
 * for what one client registered, then one message (include/nvmefs/wire.h):
 *
 *   [0]       bit 0: the daemon receives the message (else the client);
 *             bit 1: max_len 1 MiB (else NVMEFS_WIRE_MAX_REGION);
 *             bit 2: max_off 2^64 - 1 (else 2^56, the largest file)
 *   [1, 3)    handles 0-7: NVMEFS_WIRE_MAY_* of each, 2 bits, little-endian
 *   [3, 35)   regions 0-3: a 64-bit little-endian size each. Regions 0-2
 *             are buffers of exactly (size mod (FUZZ_WIRE_BUF_MAX + 1))
 *             bytes, region 3 only a size (any, up to 2^64 - 1)
 *
 * Handles from 8 and regions from 4 are not registered (a may or a size of
 * 0 is none either).
 */
#ifndef FUZZ_WIRE_H
#define FUZZ_WIRE_H

#include <stdint.h>
#include <string.h>

#include "nvmefs/wire.h"

#define FUZZ_WIRE_PREFIX  35u
#define FUZZ_WIRE_HANDLES 8u
#define FUZZ_WIRE_REGIONS 4u
#define FUZZ_WIRE_BUF_MAX (64u << 10)

#define FUZZ_WIRE_TO_DAEMON	1u
#define FUZZ_WIRE_MAX_LEN_SMALL 2u
#define FUZZ_WIRE_MAX_OFF_2_64	4u

/* Write the prefix into p (FUZZ_WIRE_PREFIX bytes). */
static inline void fuzz_wire_prefix(uint8_t *p, uint8_t flags,
				    const unsigned may[FUZZ_WIRE_HANDLES],
				    const uint64_t size[FUZZ_WIRE_REGIONS])
{
	unsigned m = 0;

	p[0] = flags;
	for (unsigned i = 0; i < FUZZ_WIRE_HANDLES; i++)
		m |= (may[i] & 3u) << (2 * i);
	p[1] = (uint8_t)m;
	p[2] = (uint8_t)(m >> 8);
	for (unsigned r = 0; r < FUZZ_WIRE_REGIONS; r++)
		for (unsigned b = 0; b < 8; b++)
			p[3 + 8 * r + b] = (uint8_t)(size[r] >> (8 * b));
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * runfmt_i.h: the on-disk objects of fs/core/runfmt.c (the 64-byte header
 * that index, filter and manifest blocks share, and the bloom filter's
 * probes), for fs/core/runs.c. The manifest's encoder and decoder are in
 * runfmt.h.
 */
#ifndef NVMEFS_RUNFMT_I_H
#define NVMEFS_RUNFMT_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runfmt.h"

/* An object's header fields, as checked. */
struct nvmefs_obj {
	uint64_t id;	  /* run id (index, filter) or sequence (manifest) */
	uint32_t nblocks; /* length in 4 KiB blocks */
	uint32_t used;	  /* bytes after the header */
	uint64_t count;	  /* index: run blocks; filter: keys; manifest: runs */
	uint64_t aux;	  /* filter: bits; manifest: next run id */
	uint32_t aux2;	  /* filter: probes */
};

/* The smallest number of blocks holding an object of used bytes. */
static inline uint32_t nvmefs_obj_blocks(size_t used)
{
	return (uint32_t)((NVMEFS_OBJ_HDR + used + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK);
}

/*
 * Seal the object at buf, whose o->used bytes after the header are filled
 * (buf has room for nvmefs_obj_blocks(o->used) blocks): the header from o
 * (nblocks computed), zeros to the last block's end, the crc. Returns its
 * length in bytes.
 */
size_t nvmefs_obj_seal(void *buf, const char magic[8], const uint8_t uuid[16],
		       const struct nvmefs_obj *o);

/*
 * Check the object at buf (len bytes readable) as a magic one of volume
 * uuid: magic, length within len, crc, version, journal id, used within the
 * smallest length, reserved and trailing bytes zero. Fills o; 0, -EINVAL
 * or -EPROTO (another version).
 */
int nvmefs_obj_check(const void *buf, size_t len, const char magic[8], const uint8_t uuid[16],
		     struct nvmefs_obj *o);

/* The filter's hash of a key (two halves of XXH3-128, seed 0). */
void nvmefs_filter_hash(const uint8_t *key, size_t klen, uint64_t h[2]);
/* Bits of a filter for n keys: NVMEFS_FILTER_BITS each, a multiple of 64,
 * at least 64; 0 when n is too many for any filter (n * 10 would wrap). */
uint64_t nvmefs_filter_nbits(uint64_t n);
/* Set (add) or test a hash's probes in bits[nbits]. */
void nvmefs_filter_add(uint8_t *bits, uint64_t nbits, const uint64_t h[2]);
bool nvmefs_filter_test(const uint8_t *bits, uint64_t nbits, const uint64_t h[2]);

/* qsort order of struct nvmefs_runs_ext by start. */
int nvmefs_ext_by_start(const void *x, const void *y);

/* A manifest slot's blocks in g (the default when g says 0). */
static inline uint32_t nvmefs_runs_slot_blocks(const struct nvmefs_runs_geom *g)
{
	return g->slot_blocks ? g->slot_blocks : NVMEFS_SLOT_DEFAULT;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * runfmt_i.h: the run area's objects without I/O (fs/store/runfmt.c;
 * docs/FORMAT.md, "The run area"): their constants, a run's
 * meta as the manifest names it, the manifest with its encoder and strict
 * decoder (fuzz_manifest), the 64-byte header that index, filter and
 * manifest blocks share, and the bloom filter's probes. The area itself,
 * which reads and writes them, is runs_i.h; this header is apart so that
 * the pure format depends on nothing of the area.
 */
#ifndef NVMEFS_RUNFMT_I_H
#define NVMEFS_RUNFMT_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sorted_i.h"

#define NVMEFS_MANIFEST_MAGIC "NVMEFSM2"
#define NVMEFS_INDEX_MAGIC    "NVMEFSI2"
#define NVMEFS_FILTER_MAGIC   "NVMEFSF2"
#define NVMEFS_OBJ_VERSION    2u
#define NVMEFS_OBJ_HDR	      64u
#define NVMEFS_RUN_LEVELS     8u  /* levels 0..7 */
#define NVMEFS_FILTER_BITS    10u /* per key */
#define NVMEFS_FILTER_PROBES  7u
/* Bytes a caller's run block buffer must hold (reader, iterator). */
#define NVMEFS_RUN_BUF (NVMEFS_RUN_BLOCKS_MAX * NVMEFS_BLOCK)

/* One run, as the manifest names it. Blocks count from the area's start. */
struct nvmefs_run_meta {
	uint64_t id;		/* unique in the area, < the manifest's next_id */
	uint64_t start;		/* first block of the run's extent */
	uint64_t nentries;	/* entries, tombstones included; >= 1 */
	uint32_t level;		/* < NVMEFS_RUN_LEVELS */
	uint32_t data_blocks;	/* run blocks, from start */
	uint32_t index_blocks;	/* the index, right after them */
	uint32_t filter_blocks; /* the filter, right after the index */
	uint16_t min_len, max_len;
	uint8_t min[NVMEFS_KEY_MAX]; /* the run's first key */
	uint8_t max[NVMEFS_KEY_MAX]; /* and its last */
};

/* The extent's length: data, index and filter blocks. */
static inline uint64_t nvmefs_run_blocks(const struct nvmefs_run_meta *r)
{
	return (uint64_t)r->data_blocks + r->index_blocks + r->filter_blocks;
}

/* A manifest. runs is owned by whoever filled it: nvmefs_manifest_decode
 * allocates it (nvmefs_manifest_free releases it). */
struct nvmefs_manifest {
	uint64_t seq;		 /* higher is newer; 0 is never written */
	uint64_t next_id;	 /* every run id is below it */
	struct nvmefs_mark mark; /* the committer's (opaque here) */
	size_t n;
	struct nvmefs_run_meta *runs;
};

/* ---- manifest encoding (pure: no I/O) ---- */

/*
 * Encode m into buf (cap bytes, a multiple of NVMEFS_BLOCK) for the volume
 * uuid. Returns the bytes to write (a multiple of NVMEFS_BLOCK), or -ENOSPC
 * when it does not fit cap. m is not checked: nvmefs_runs_commit checks it.
 */
ssize_t nvmefs_manifest_encode(const struct nvmefs_manifest *m, const uint8_t uuid[16], void *buf,
			       size_t cap);

/*
 * Decode a manifest slot's len bytes at buf (of volume uuid, area g),
 * trusting nothing before it is checked: magic, crc, version, journal id,
 * its length within len, the mark's length (NVMEFS_MARK_WORDS words,
 * reserved zero), every run's fields (level, entries no more than its run
 * blocks hold, non-empty extents inside the run space and not overlapping,
 * unique ids below next_id, valid keys with min <= max), no byte after the
 * runs. Fills m (its runs allocated; nvmefs_manifest_free) and returns 0,
 * or -EINVAL, -EPROTO (another version, or a longer mark: a newer
 * committer's) or -ENOMEM, m then empty.
 */
int nvmefs_manifest_decode(const void *buf, size_t len, const uint8_t uuid[16],
			   const struct nvmefs_runs_geom *g, struct nvmefs_manifest *m);

/* Release what decode allocated; m becomes empty. */
void nvmefs_manifest_free(struct nvmefs_manifest *m);

/* A run's extent in the run space. */
struct nvmefs_runs_ext {
	uint64_t id, start, blocks;
	bool done; /* busy runs: written by nvmefs_runw_end (else being written) */
	bool held; /* busy runs: held by nvmefs_runs_hold (a reader's), not written */
	struct nvmefs_run_meta meta; /* busy and done: what nvmefs_runw_end gave;
				      * held: what nvmefs_runs_hold was given */
};

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

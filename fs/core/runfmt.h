/* SPDX-License-Identifier: MIT */
/*
 * Format v2's run area without I/O (docs/METADATA-V2.md, step 3): the
 * objects' constants, a run's meta as the manifest names it, the manifest
 * and its encoder and strict decoder (fs/core/runfmt.c, fuzz_manifest).
 * The area itself, which reads and writes them, is runs.h; this header is
 * apart so that the pure format depends on nothing of the area.
 */
#ifndef NVMEFS_RUNFMT_H
#define NVMEFS_RUNFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format.h"
#include "sorted.h"

#define NVMEFS_MANIFEST_MAGIC "NVMEFSM2"
#define NVMEFS_INDEX_MAGIC    "NVMEFSI2"
#define NVMEFS_FILTER_MAGIC   "NVMEFSF2"
#define NVMEFS_OBJ_VERSION    2u
#define NVMEFS_OBJ_HDR	      64u
#define NVMEFS_RUN_LEVELS     8u  /* levels 0..7 */
#define NVMEFS_SLOT_DEFAULT   64u /* blocks per manifest slot when the geometry says 0 */
#define NVMEFS_FILTER_BITS    10u /* per key */
#define NVMEFS_FILTER_PROBES  7u
/* Bytes a caller's run block buffer must hold (reader, iterator). */
#define NVMEFS_RUN_BUF (NVMEFS_RUN_BLOCKS_MAX * NVMEFS_BLOCK)

/* Where the area is on its member. */
struct nvmefs_runs_geom {
	uint64_t off;	      /* byte offset on the member, a multiple of NVMEFS_BLOCK */
	uint64_t blocks;      /* length in 4 KiB blocks */
	uint32_t slot_blocks; /* each manifest slot; 0: NVMEFS_SLOT_DEFAULT */
};

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

/*
 * The committer's state a manifest carries beside its runs, opaque to the
 * area: what a mount needs before it replays and cannot scan for. Encoded
 * at the start of the manifest's body as a count of u64 words (u32), a
 * reserved u32 (0), then the words, little-endian, in this order. Fields
 * are only ever added at the end: NVMEFS_MARK_WORDS grows, and the
 * decoder then takes an older, shorter mark with the new fields 0. A mark
 * longer than this code knows is a newer committer's (-EPROTO).
 */
struct nvmefs_mark {
	uint64_t replay;     /* the journal position replay starts from */
	uint64_t replay_seq; /* the transaction sequence expected there */
	uint64_t next_ino;   /* the next inode number to hand out */
	uint64_t ninodes;    /* inodes in use */
	/* The metadata's size as v1 records would take it (vol->meta_bytes,
	 * the estimate the metadata ENOSPC checks): a mount that does not
	 * read every key cannot add it up. */
	uint64_t meta_bytes;
};
#define NVMEFS_MARK_WORDS 5u
_Static_assert(sizeof(struct nvmefs_mark) == NVMEFS_MARK_WORDS * 8, "a mark is u64 words");

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

#endif

/* SPDX-License-Identifier: MIT */
/*
 * sorted_i.h: the sorted-run blocks of fs/store/sorted.c (docs/FORMAT.md,
 * "Keys and values"), which hold the keys of store.h (their
 * builders, order and check are in sorted.c too): the run writer and
 * reader (runs_i.h) and the store are built on them; tested alone
 * (tests/test_sorted.c) and fuzzed (tests/fuzz/fuzz_sorted.c).
 *
 * Run blocks. A sorted run is a sequence of blocks, each one or more 4 KiB
 * blocks long (an entry never straddles two run blocks, and an xattr value
 * may take 64 KiB): a 64-byte header (magic "NVMEFSR2", version, crc32c of
 * the whole run block with the crc field zeroed, the volume's journal id,
 * the run's id, the block's index in the run, the run's level, its length
 * in 4 KiB blocks, its entry count and the bytes of entries), then the
 * entries in strictly increasing key order, each an 8-byte header (key
 * length u16, flags u8, reserved u8, value length u32, little-endian), the
 * key and the value; zeros after the last. A tombstone (a deletion that
 * hides older runs' entry of the key) has no value.
 */
#ifndef NVMEFS_SORTED_I_H
#define NVMEFS_SORTED_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define NVMEFS_RUN_MAGIC   "NVMEFSR2"
#define NVMEFS_RUN_VERSION 2u
#define NVMEFS_RUN_HDR	   64u
#define NVMEFS_RUN_ENT_HDR 8u
#define NVMEFS_RUN_TOMB	   0x01u /* entry flag: a deletion */
/* The longest entry: an xattr key and value. A run block holds at least one. */
#define NVMEFS_RUN_ENT_MAX (NVMEFS_RUN_ENT_HDR + NVMEFS_KEY_MAX + NVMEFS_XATTR_VALUE_MAX)
#define NVMEFS_RUN_BLOCKS_MAX                                                                      \
	((NVMEFS_RUN_HDR + NVMEFS_RUN_ENT_MAX + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK)

/* What a run block's header says. */
struct nvmefs_run_hdr {
	uint64_t run_id;   /* the run it belongs to */
	uint64_t index;	   /* its place in the run, from 0 */
	uint32_t level;	   /* the run's level */
	uint32_t nblocks;  /* its length in 4 KiB blocks, 1..NVMEFS_RUN_BLOCKS_MAX */
	uint32_t nentries; /* entries, >= 1 */
	uint32_t used;	   /* bytes of entries after the header */
};

/* Building one run block in a caller's buffer of cap bytes (a multiple of
 * NVMEFS_BLOCK, at most NVMEFS_RUN_BLOCKS_MAX blocks). */
struct nvmefs_run_writer {
	uint8_t *buf;
	size_t cap, used; /* used: bytes from the start, header included */
	uint32_t n;
	size_t last; /* offset of the last entry's header, for the order */
};

void nvmefs_run_start(struct nvmefs_run_writer *w, void *buf, size_t cap);

/*
 * Append an entry, whose key must check and sort after the last one's; a
 * tombstone has no value (vlen 0). Returns 0, -ENOSPC when it does not fit
 * what is left (finish this block and start another), or -EINVAL (a bad
 * key, a key out of order, a value too long, a tombstone with a value).
 */
int nvmefs_run_add(struct nvmefs_run_writer *w, const uint8_t *key, size_t klen, const void *val,
		   size_t vlen, bool tomb);

/*
 * Seal the block: the header, zeros after the entries up to the next 4 KiB,
 * the crc. Returns its length in bytes (a multiple of NVMEFS_BLOCK), or 0
 * when it holds no entry. uuid: the volume's (its first 8 bytes are the
 * journal id every journal transaction carries too).
 */
size_t nvmefs_run_finish(struct nvmefs_run_writer *w, const uint8_t uuid[16], uint64_t run_id,
			 uint64_t index, uint32_t level);

/*
 * Check a run block read from a member: len bytes at buf (at least its
 * length); it must be of this volume, run and index. Checks magic, crc,
 * version, every entry within the used bytes and its key (nvmefs_key_check),
 * keys strictly increasing, the zeros after. Fills h and returns 0, or
 * -EPROTO (another version) or -EINVAL, trusting no field before it is
 * checked.
 */
int nvmefs_run_decode(const void *buf, size_t len, const uint8_t uuid[16], uint64_t run_id,
		      uint64_t index, struct nvmefs_run_hdr *h);

/* The length in bytes a run block says it has (its first 4 KiB block read),
 * or 0 when the header cannot be a run block's. Only to know how much to
 * read before nvmefs_run_decode. */
size_t nvmefs_run_peek_len(const void *hdr);

/* The entries of a block nvmefs_run_decode accepted, in order: pos starts
 * at 0; returns false after the last. */
bool nvmefs_run_next(const void *buf, const struct nvmefs_run_hdr *h, size_t *pos,
		     struct nvmefs_run_ent *e);

#endif

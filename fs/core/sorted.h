/* SPDX-License-Identifier: MIT */
/*
 * Format v2's keys and sorted-run blocks (docs/METADATA-V2.md, step 2).
 * The encoding of a format v2 volume's metadata: the run writer and reader
 * (runs.h) and the store (store.h) are built on it; tested alone
 * (tests/test_sorted.c) and fuzzed (tests/fuzz/fuzz_sorted.c).
 *
 * Keys. Every piece of metadata becomes a key/value pair. A key is its kind
 * (one byte) and then big-endian fields, so that comparing two keys with
 * memcmp (then by length) orders them as their fields: all of an inode's
 * extents sit together in slot and offset order, a directory's entries
 * together, and so on.
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
#ifndef NVMEFS_SORTED_H
#define NVMEFS_SORTED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

enum nvmefs_key_kind {
	NVMEFS_KEY_INODE = 1,	/* ino */
	NVMEFS_KEY_DIRENT = 2,	/* parent, hash of the name, name */
	NVMEFS_KEY_DCOOKIE = 3, /* parent, cookie (readdir order) */
	NVMEFS_KEY_EXTENT = 4,	/* ino, slot, component offset */
	NVMEFS_KEY_XATTR = 5,	/* ino, name */
	NVMEFS_KEY_ORPHAN = 6,	/* ino */
	NVMEFS_KEY_FREE = 7,	/* member, end of the range (values.h) */
};

/* The longest key: a DIRENT, kind + parent + hash + a name of 255 bytes. */
#define NVMEFS_KEY_MAX (1u + 8u + 8u + NVMEFS_NAME_MAX)

/* Each builder fills k (room for NVMEFS_KEY_MAX) and returns the key's
 * length. Names must be 1..NVMEFS_NAME_MAX (xattrs: NVMEFS_XATTR_NAME_MAX)
 * bytes; a longer one is the caller's bug and gives 0. */
size_t nvmefs_key_inode(uint8_t *k, uint64_t ino);
size_t nvmefs_key_dirent(uint8_t *k, uint64_t parent, const char *name, size_t len);
size_t nvmefs_key_dcookie(uint8_t *k, uint64_t parent, uint64_t cookie);
size_t nvmefs_key_extent(uint8_t *k, uint64_t ino, uint32_t slot, uint64_t comp_off);
size_t nvmefs_key_xattr(uint8_t *k, uint64_t ino, const char *name, size_t len);
size_t nvmefs_key_orphan(uint8_t *k, uint64_t ino);
/* A FREE key names a free range by its member and its END (the byte after
 * it), not its start: allocation takes the start of a free range (the goal
 * right after a file's last extent), so an append changes the range's
 * length under the same key, one put, where a key by start would need a
 * tombstone and a put (docs/METADATA-V2.md, "Free space"). */
size_t nvmefs_key_free(uint8_t *k, uint32_t member, uint64_t end);

/* The order of keys: memcmp over the shorter length, then the shorter
 * first. <0, 0 or >0. */
int nvmefs_key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

/* 0 when k is a key some builder makes (a known kind, the length of that
 * kind, a name within limits and, for DIRENT, the hash of its name);
 * -EINVAL otherwise. */
int nvmefs_key_check(const uint8_t *k, size_t len);

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

/* One entry, pointing into the run block it came from. */
struct nvmefs_run_ent {
	const uint8_t *key;
	size_t klen;
	const uint8_t *val;
	size_t vlen;
	bool tomb;
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
 * journal id every v1 frame carries too).
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

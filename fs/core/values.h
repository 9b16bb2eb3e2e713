/* SPDX-License-Identifier: MIT */
/*
 * Format v2's values (docs/METADATA-V2.md, "Values (step 4a)"): what each
 * key of fs/core/sorted.h maps to in the store, and the conversion from and
 * to the v1 records (fs/core/format.h) whose apply puts them
 * (docs/METADATA-V2-STEP4.md §2): apply puts them into the volume's store
 * (kv.c), and the mount decodes them back; tested alone
 * (tests/test_values.c) and fuzzed (fuzz_values).
 *
 * A value is little-endian fixed-width fields after a version byte, each
 * at its natural alignment with the padding explicit (and zero), with
 * explicit lengths for its variable parts, and repeats nothing of its key:
 * the key carries the ino, the parent, the name or the offset, and a
 * decoder takes the key with the value and checks both. An XATTR value is
 * the attribute's raw bytes (no version byte: it is the user's data, up to
 * 64 KiB, the largest value a run entry takes).
 *
 * Decoded, a key and its value are the v1 record that puts them: INODE an
 * INODE record (plus the summary fields v1 rebuilds at load), DIRENT and
 * DCOOKIE a DIRENT_ADD record (plus the entry's cookie), EXTENT an EXTENT
 * record, XATTR an XATTR_SET record, ORPHAN an ORPHAN_ADD record; FREE has
 * no record (step 6).
 */
#ifndef NVMEFS_VALUES_H
#define NVMEFS_VALUES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format.h"
#include "sorted.h"

#define NVMEFS_VAL_VERSION 1u

/* Value lengths: fixed, or fixed part and largest. */
#define NVMEFS_VAL_INODE_FIXED	 128u
#define NVMEFS_VAL_INODE_MAX	 (NVMEFS_VAL_INODE_FIXED + NVMEFS_MAX_DEVICES + NVMEFS_SYMLINK_MAX)
#define NVMEFS_VAL_DIRENT	 24u
#define NVMEFS_VAL_DCOOKIE_FIXED 16u
#define NVMEFS_VAL_DCOOKIE_MAX	 (NVMEFS_VAL_DCOOKIE_FIXED + NVMEFS_NAME_MAX)
#define NVMEFS_VAL_EXTENT	 24u
#define NVMEFS_VAL_ORPHAN	 1u
#define NVMEFS_VAL_FREE		 16u
/* The largest value of any kind (an xattr's). */
#define NVMEFS_VAL_MAX NVMEFS_XATTR_VALUE_MAX

/* The first cookie of a directory's entries: 1 and 2 are "." and "..". */
#define NVMEFS_COOKIE_FIRST 3u

/*
 * An inode's summary fields: what v1 rebuilds from the other records at
 * load (meta.c) and v2 must know without scanning them. They come from the
 * records that change them, never from an INODE record. Fields that do not
 * belong to the inode's type are 0.
 */
struct nvmefs_inode_sum {
	uint32_t nxattrs;		/* every type */
	uint64_t alloc_bytes, nextents; /* regular files: bytes and extents mapped */
	uint64_t parent;		/* directories: the parent (root: itself) */
	uint64_t nentries, next_cookie; /* directories: live entries, the next cookie */
};

/* One key and its value, decoded. */
struct nvmefs_val {
	uint8_t kind; /* enum nvmefs_key_kind */
	/* The record that puts the key: type INODE, DIRENT_ADD (DIRENT and
	 * DCOOKIE), EXTENT, XATTR_SET or ORPHAN_ADD; 0 for FREE. Its pointers
	 * (name, target, value) point into the key or the value decoded. */
	struct nvmefs_rec rec;
	struct nvmefs_inode_sum sum; /* INODE */
	uint64_t cookie;	     /* DIRENT, DCOOKIE: the entry's readdir cookie */
	struct {
		uint32_t member;
		uint64_t off, len;
	} free; /* FREE: a free byte range of a member (its key has the end) */
};

/*
 * Encode v: its key into key (room for NVMEFS_KEY_MAX bytes; its length in
 * *klen) and its value into val (room for the kind's largest value, at most
 * NVMEFS_VAL_MAX). Returns the value's length (0 is an empty xattr), or
 * -EINVAL when v is not one nvmefs_val_decode accepts (the caller's bug;
 * nothing is written then).
 */
ssize_t nvmefs_val_encode(const struct nvmefs_val *v, uint8_t *key, size_t *klen, uint8_t *val);

/*
 * Decode a key (klen bytes) and its value (vlen bytes) as read from the
 * store. Checks the key (nvmefs_key_check and, per kind, a non-zero ino or
 * parent, a valid name), the value's version, its length against its
 * explicit lengths, zero reserved bytes, and every field as v1's decoder
 * does, plus the summary's consistency, before anything is trusted.
 * Returns 0 (v filled, pointing into key and val), -EPROTO (another value
 * version) or -EINVAL (malformed). What it accepts re-encodes to the same
 * bytes.
 */
int nvmefs_val_decode(const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
		      struct nvmefs_val *v);

/* The conversions of docs/METADATA-V2-STEP4.md §2, filling v (no check:
 * nvmefs_val_encode checks). An INODE value from an INODE record and the
 * summary fields; a DIRENT (kind NVMEFS_KEY_DIRENT) or DCOOKIE
 * (NVMEFS_KEY_DCOOKIE) value from a DIRENT_ADD record and the cookie apply
 * gives the entry. The pointers of rec are kept, not copied. */
void nvmefs_val_inode(struct nvmefs_val *v, const struct nvmefs_rec *inode,
		      const struct nvmefs_inode_sum *sum);
void nvmefs_val_dirent(struct nvmefs_val *v, uint8_t kind, const struct nvmefs_rec *dirent_add,
		       uint64_t cookie);
/* The value of a record that puts one key and nothing else: EXTENT,
 * XATTR_SET or ORPHAN_ADD; -EINVAL for another type. */
int nvmefs_val_rec(struct nvmefs_val *v, const struct nvmefs_rec *rec);

#endif

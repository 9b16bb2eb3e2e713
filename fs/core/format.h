/* SPDX-License-Identifier: MIT */
/*
 * nvmefs on-disk format v2 (docs/FORMAT.md): the label on every member, the
 * superblocks and journal transactions on the metadata member, and the
 * metadata records the journal carries (the run area's objects are the
 * store's: fs/store/).
 *
 * Everything on disk is little-endian with fixed-width fields; every block
 * carries a magic and a crc32c. The encoders fill a caller's 4 KiB block; the
 * decoders check magic, version and crc and return -EINVAL (bad content) or
 * -EPROTO (another version: a newer one, or v1's) without trusting any
 * field first. Shared by mkfs.nvmefs, the nvmefs daemon and fsck.nvmefs.
 */
#ifndef NVMEFS_FORMAT_H
#define NVMEFS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvmefs/layout.h"
#include "nvmefs/limits.h"

#define NVMEFS_BLOCK	       4096u /* metadata block and allocation unit */
#define NVMEFS_FORMAT_VERSION  2u
#define NVMEFS_NAME_MAX	       255u
#define NVMEFS_SYMLINK_MAX     4095u
#define NVMEFS_XATTR_NAME_MAX  255u
#define NVMEFS_XATTR_VALUE_MAX 65536u
#define NVMEFS_ROOT_INO	       1u
/* The smallest run area: two manifest slots (a 64th of the area each, 1 to
 * 64 blocks) and room for runs. */
#define NVMEFS_RUNS_MIN (16u * NVMEFS_BLOCK)

/* Per-member label, in block 0 and again in the member's last block. */
struct nvmefs_label {
	uint8_t uuid[16];
	char name[64];			       /* NUL-terminated volume label, may be empty */
	uint32_t index;			       /* this member's place in the volume */
	uint32_t count;			       /* members in the volume */
	uint32_t chunk_size;		       /* default stripe unit */
	uint64_t created_ns;		       /* CLOCK_REALTIME at mkfs */
	uint64_t dev_size[NVMEFS_MAX_DEVICES]; /* every member's formatted size */
	uint64_t data_start;		       /* this member's data area [data_start, data_end) */
	uint64_t data_end;
	uint64_t meta_off; /* metadata area on member 0: offset, size */
	uint64_t meta_size;
	uint64_t runs_size;    /* the run area (docs/FORMAT.md): manifests and sorted runs */
	uint64_t journal_size; /* the journal ring */
};

/*
 * Superblock. The run area's newest valid manifest is the metadata's
 * durable state and names the journal position replay starts from; the
 * superblock says how new that manifest must at least be (a manifest
 * older than the floor means a newer one was damaged after it was
 * committed, and replay from the older one's position could find the ring
 * overwritten), and whether the volume was unmounted cleanly.
 */
struct nvmefs_super {
	uint8_t uuid[16];
	uint64_t seq;		 /* higher wins among the two copies */
	uint64_t manifest_floor; /* the sequence of a manifest known durable */
	uint32_t clean;		 /* 1 after a clean unmount */
	uint32_t features;	 /* NVMEFS_SUPER_* (0 in a superblock that predates them) */
};

/* The store holds the free space as FREE keys (docs/FORMAT.md,
 * "Allocation"); a volume without it was made before they existed. */
#define NVMEFS_SUPER_FREE_KEYS 0x1u
#define NVMEFS_SUPER_KNOWN     NVMEFS_SUPER_FREE_KEYS

/* Journal transaction header, at the start of its first block. */
struct nvmefs_txn {
	uint64_t seq;
	uint32_t nblocks;     /* blocks including the header block */
	uint32_t payload_len; /* bytes of records after the header */
	uint32_t pad;	      /* 1: skip to the ring's start, no payload */
};

#define NVMEFS_TXN_HDR 64u /* bytes of header before the payload */

/* Byte offsets of the metadata area's parts, relative to meta_off. */
static inline uint64_t nvmefs_meta_super_off(unsigned which)
{
	return (uint64_t)which * NVMEFS_BLOCK;
}
static inline uint64_t nvmefs_meta_runs_off(const struct nvmefs_label *l)
{
	(void)l;
	return 2ull * NVMEFS_BLOCK;
}
static inline uint64_t nvmefs_meta_journal_off(const struct nvmefs_label *l)
{
	return 2ull * NVMEFS_BLOCK + l->runs_size;
}

/* A UUID as 36 characters of lower-case text plus NUL, and back (any case;
 * returns 0 or -EINVAL). libuuid's text form, as blkid and mount(8) use. */
#define NVMEFS_UUID_STR 37
void nvmefs_uuid_str(const uint8_t u[16], char out[NVMEFS_UUID_STR]);
int nvmefs_uuid_parse(const char *s, uint8_t u[16]);

/* crc32c (Castagnoli) seeded so that an all-zero buffer does not check out. */
uint32_t nvmefs_crc32c(const void *buf, size_t len);
/* nvmefs_crc32c of len bytes at buf as if the 4 bytes at crc_off (the
 * block's own crc field) were zero, without copying the block. */
uint32_t nvmefs_crc32c_hole(const void *buf, size_t len, size_t crc_off);

/*
 * Encode into / decode from a full NVMEFS_BLOCK-byte block. Decoders return
 * 0, -EINVAL (no label, bad crc, impossible fields) or -EPROTO (version).
 */
void nvmefs_label_encode(const struct nvmefs_label *l, void *block);
int nvmefs_label_decode(struct nvmefs_label *l, const void *block);
/* The format version a label block says it has, whatever its crc says
 * (0 without the label magic): to name an old volume in a refusal. */
unsigned nvmefs_label_version(const void *block);
/* True when block starts with the label magic (whatever its crc says). */
bool nvmefs_label_magic(const void *block);
void nvmefs_super_encode(const struct nvmefs_super *s, void *block);
/* 0, -EINVAL (damaged) or -EPROTO (a feature this release does not know:
 * a newer nvmefs wrote it). */
int nvmefs_super_decode(struct nvmefs_super *s, const void *block);

/*
 * Journal transactions: nvmefs_txn_encode() writes the header into the
 * first NVMEFS_TXN_HDR bytes of buf, which holds the payload right after
 * it, and sets the crc over header and payload. nvmefs_txn_decode() checks
 * a transaction in buf (len bytes available from its start) against the
 * volume's journal id (the first 8 bytes of the UUID): returns 0 when it
 * is whole and valid, -EINVAL otherwise (the end of the log).
 */
void nvmefs_txn_encode(const struct nvmefs_txn *t, const uint8_t uuid[16], void *buf);
int nvmefs_txn_decode(struct nvmefs_txn *t, const uint8_t uuid[16], const void *buf, size_t len);
/* A header's fields when its magic and journal id match (0), unchecked by
 * the crc: to look for transactions, not to trust them. */
int nvmefs_txn_peek(struct nvmefs_txn *t, const uint8_t uuid[16], const void *hdr);
/* The block count a header claims (unchecked: to know how much to read). */
uint32_t nvmefs_txn_nblocks(const void *hdr);

/* Metadata records: what the journal carries and apply changes the state by
 * (and writes through into the store as keys, fs/store/store.h). */
enum nvmefs_rec_type {
	NVMEFS_REC_INODE = 1,
	NVMEFS_REC_INODE_FREE = 2,
	NVMEFS_REC_DIRENT_ADD = 3,
	NVMEFS_REC_DIRENT_DEL = 4,
	NVMEFS_REC_EXTENT = 5,
	NVMEFS_REC_PUNCH = 6,
	NVMEFS_REC_XATTR_SET = 7,
	NVMEFS_REC_XATTR_DEL = 8,
	NVMEFS_REC_ORPHAN_ADD = 9,
	NVMEFS_REC_ORPHAN_DEL = 10,
};

#define NVMEFS_EXT_UNWRITTEN 1u /* allocated, reads as zeros */

/*
 * An INODE record's flags: the file attribute flags of chattr(1), with the
 * values of FS_IOC_SETFLAGS's FS_*_FL (linux/fs.h), on regular files and
 * directories. Any other bit is refused (a newer nvmefs's flag, or damage).
 * The daemon enforces them itself (the kernel does not for a FUSE inode):
 * fs/core/namei.c, namei_attr.c and data_io.c.
 */
#define NVMEFS_IFL_IMMUTABLE 0x10u /* no change at all, no new or removed name in it */
#define NVMEFS_IFL_APPEND    0x20u /* written only at its end; no name removed in it */
#define NVMEFS_IFL_NODUMP    0x40u /* stored only: for dump(8) */
#define NVMEFS_IFL_NOATIME   0x80u /* reads leave atime */
#define NVMEFS_IFL_ALL                                                                             \
	(NVMEFS_IFL_IMMUTABLE | NVMEFS_IFL_APPEND | NVMEFS_IFL_NODUMP | NVMEFS_IFL_NOATIME)

/*
 * A directory's INODE record carries the default layout of its new files
 * in the layout field: all zero for none; devs[0] NVMEFS_LAYOUT_ANY_DEV
 * when the members are chosen per file (only chunk and count are set).
 */
#define NVMEFS_LAYOUT_ANY_DEV 0xffu
/* A directory's layout field is one of those, over ndevs members. */
bool nvmefs_dir_layout_ok(const struct nvmefs_layout *l, unsigned ndevs);

struct nvmefs_time {
	int64_t sec;
	uint32_t nsec;
};

/* A decoded record. Pointers point into the buffer it was decoded from. */
struct nvmefs_rec {
	uint16_t type;
	union {
		struct {
			uint64_t ino;
			uint32_t mode, uid, gid, nlink, flags;
			uint64_t size, rdev;
			struct nvmefs_time atime, mtime, ctime, crtime;
			struct nvmefs_layout layout;
			uint16_t target_len; /* symlink target */
			const char *target;
		} inode;
		struct {
			uint64_t ino; /* INODE_FREE, ORPHAN_ADD, ORPHAN_DEL */
		} ino;
		struct {
			uint64_t parent, child;
			uint8_t type; /* DT_* of the child */
			uint16_t name_len;
			const char *name;
		} dirent;
		struct {
			uint64_t ino, comp_off, dev_off, len;
			uint32_t slot, flags;
		} extent;
		struct {
			uint64_t ino, off, len; /* file range; len UINT64_MAX: to the end */
		} punch;
		struct {
			uint64_t ino;
			uint16_t name_len;
			uint32_t value_len;
			const char *name, *value;
		} xattr;
	};
};

/* Largest encoded record (an inode with the longest symlink target). */
#define NVMEFS_REC_MAX (512u + NVMEFS_XATTR_NAME_MAX + NVMEFS_XATTR_VALUE_MAX)

/* Bytes rec takes encoded. */
size_t nvmefs_rec_size(const struct nvmefs_rec *rec);
/* Encode rec at buf (room for nvmefs_rec_size bytes); returns that size. */
size_t nvmefs_rec_encode(const struct nvmefs_rec *rec, void *buf);
/*
 * Decode one record at buf with len bytes available. Returns its encoded
 * size (> 0), or -EINVAL when the bytes are not a well-formed record (bad
 * type, length, name, layout...). Never reads past len.
 */
long nvmefs_rec_decode(struct nvmefs_rec *rec, const void *buf, size_t len);

/* The decoder's checks, for format v2's values (fs/store/store.h), which
 * must accept what the record decoder accepts. A name of 1..max bytes without NUL; a
 * directory entry's name (no '/', not "." or ".."); an INODE record's
 * ino, mode, symlink target, size and layout. */
bool nvmefs_name_ok(const char *name, size_t len, size_t max);
bool nvmefs_dirent_name_ok(const char *name, size_t len);
bool nvmefs_rec_inode_ok(const struct nvmefs_rec *rec);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * wire.h: the native client's protocol, between libnvmefs (client/) and the
 * daemon's native door (fs/native/). Internal: neither installed nor part of
 * the library's API (include/libnvmefs.h is).
 *
 * Transport: a SOCK_SEQPACKET Unix socket with an abstract name the daemon
 * publishes in MOUNTPOINT/.nvmefs/config ("native_socket"). One message is
 * one header, then count entries of the type's size; a message carries at
 * most one descriptor (SCM_RIGHTS), only with REG_FD, REG_MEM and CREATE. Data never
 * crosses the socket: it moves between the devices and memory the client
 * shares with the daemon (a sealed memfd, REG_MEM).
 *
 *   client -> daemon                        daemon -> client
 *   HELLO                                   REPLY  arg: 0 or -errno; payload nvmefs_wire_hello
 *   REG_FD   + fd                           REPLY  arg: handle or -errno; arg2: NVMEFS_WIRE_MAY_*
 *   UNREG_FD   arg: handle                  REPLY  arg: 0 or -errno
 *   REG_MEM  + memfd, arg: size             REPLY  arg: region or -errno
 *   UNREG_MEM  arg: region                  REPLY  arg: 0 or -errno
 *   SUBMIT     count x nvmefs_wire_sqe      COMPLETE count x nvmefs_wire_cqe, any time later
 *   CREATE   + fd of the parent directory   REPLY  arg: handle or -errno; arg2: NVMEFS_WIRE_MAY_*;
 *              arg: open(2) flags, arg2:           payload nvmefs_wire_stat (on success)
 *              mode | umask << 32; count: the name's bytes (1 to NVMEFS_WIRE_NAME_MAX, no '/', no
 * NUL)
 *   LAYOUT     1 x nvmefs_wire_layout_req   REPLY  arg: bytes written or -errno; arg2: the
 *                                                  lease's generation (-ENOBUFS: bytes needed)
 *
 * Requests (SUBMIT) are answered by COMPLETE messages in any order, possibly
 * between a control message and its REPLY; control messages are answered in
 * order. All fields are in the host's byte order: both ends run on one host.
 * A message that breaks these rules is refused (a REPLY with -EBADMSG, or
 * the connection closed when it cannot be answered); the daemon goes on
 * serving its other clients. The parser below is fuzzed (tests/fuzz).
 */
#ifndef NVMEFS_WIRE_H
#define NVMEFS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define NVMEFS_WIRE_MAGIC   0x464d564eu /* "NVMF" */
#define NVMEFS_WIRE_VERSION 1u

enum nvmefs_wire_type {
	NVMEFS_WIRE_HELLO = 1,
	NVMEFS_WIRE_REG_FD = 2,
	NVMEFS_WIRE_UNREG_FD = 3,
	NVMEFS_WIRE_REG_MEM = 4,
	NVMEFS_WIRE_UNREG_MEM = 5,
	NVMEFS_WIRE_SUBMIT = 6,
	NVMEFS_WIRE_REPLY = 7,
	NVMEFS_WIRE_COMPLETE = 8,
	NVMEFS_WIRE_CREATE = 9,
	NVMEFS_WIRE_LAYOUT = 10,
};

struct nvmefs_wire_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;	/* enum nvmefs_wire_type */
	uint32_t count; /* entries after the header (SUBMIT, COMPLETE; CREATE: name bytes) */
	uint32_t flags; /* 0 */
	int64_t arg;	/* by type, above */
	int64_t arg2;
};
_Static_assert(sizeof(struct nvmefs_wire_hdr) == 32, "wire header is 32 bytes");

/* nvmefs_wire_sqe.op */
#define NVMEFS_WIRE_READ  1u /* file [off, off + len) -> region [mem_off, mem_off + len) */
#define NVMEFS_WIRE_WRITE 2u /* region -> file */
#define NVMEFS_WIRE_FSYNC 3u /* make what completed durable; off, len, region unused */

/*
 * nvmefs_wire_sqe.flags. NVMEFS_WIRE_SQE_BEHIND, on a WRITE only, and only
 * to a daemon whose HELLO offers NVMEFS_WIRE_HELLO_BEHIND: the write may
 * complete once the daemon has taken its bytes, before the devices have
 * them, as a small write(2) through the mount is answered (-o write_behind
 * bytes at most; a larger one completes as usual). A device failure after
 * the completion fails the file's next fsync, once, with the write's
 * error (-EIO): an FSYNC of any handle of the file, or fsync(2) through
 * the mount, whichever comes first.
 */
#define NVMEFS_WIRE_SQE_BEHIND 1u

struct nvmefs_wire_sqe {
	uint64_t user_data; /* the client's, returned in the completion */
	uint64_t off;	    /* file offset */
	uint64_t len;	    /* bytes */
	uint64_t mem_off;   /* offset in the region */
	uint32_t handle;    /* from REG_FD */
	uint32_t region;    /* from REG_MEM */
	uint32_t op;	    /* NVMEFS_WIRE_READ ... */
	uint32_t flags;	    /* NVMEFS_WIRE_SQE_*, or 0 */
};
_Static_assert(sizeof(struct nvmefs_wire_sqe) == 48, "submission entry is 48 bytes");

struct nvmefs_wire_cqe {
	uint64_t user_data;
	int64_t res; /* bytes moved (a read is short at EOF), or -errno */
};
_Static_assert(sizeof(struct nvmefs_wire_cqe) == 16, "completion entry is 16 bytes");

/* HELLO's reply payload: what the client checks and obeys. */
struct nvmefs_wire_hello {
	uint64_t dev;	       /* st_dev of the mount, as the client's stat sees it */
	uint8_t uuid[16];      /* the volume's */
	uint32_t block;	       /* alignment for zero copy (buffer, offset, length) */
	uint32_t max_inflight; /* requests a client may have submitted and not reaped */
	uint32_t max_batch;    /* entries per SUBMIT message */
	uint32_t flags;	       /* NVMEFS_WIRE_HELLO_*: what the daemon offers */
	uint64_t max_len;      /* bytes one request may move */
};
_Static_assert(sizeof(struct nvmefs_wire_hello) == 48, "hello is 48 bytes");

/* nvmefs_wire_hello.flags: writes may ask NVMEFS_WIRE_SQE_BEHIND. A daemon
 * before it sent 0 here, and refuses any flag in an entry. */
#define NVMEFS_WIRE_HELLO_BEHIND 1u

/*
 * CREATE's reply payload: the new file's attributes as stat(2) shows them
 * through the mount (st_dev is the client's to fill: the mount's).
 */
struct nvmefs_wire_stat {
	uint64_t ino, size, blocks;
	uint32_t mode, nlink, uid, gid, blksize, pad;
	int64_t atime_sec, mtime_sec, ctime_sec;
	uint32_t atime_nsec, mtime_nsec, ctime_nsec, pad2;
};
_Static_assert(sizeof(struct nvmefs_wire_stat) == 88, "stat is 88 bytes");

/*
 * LAYOUT: lend the client where a file's bytes lie, so that it reads the
 * member devices itself (the read door, client/preload_read.c; docs/NATIVE.md).
 * The daemon writes a nvmefs_wire_layout, its members and its extents
 * into the region at mem_off (at most cap bytes), and from then on stores
 * the file's range-lock generation in the 8 bytes at word_off of the same
 * region, before any change of the file's data, size or extents. The loan
 * holds while that word equals the reply's arg2; it ends with UNREG_FD of
 * the handle, UNREG_MEM of the region or a LAYOUT of the same handle. A
 * client checks the word before a read of the devices and again once the
 * read is done, and reads through the mount when it moved.
 */
struct nvmefs_wire_layout_req {
	uint32_t handle;  /* from REG_FD, opened for reading */
	uint32_t region;  /* from REG_MEM */
	uint64_t mem_off; /* 8-aligned */
	uint64_t cap;
	uint64_t word_off; /* 8-aligned, outside [mem_off, mem_off + cap) */
};
_Static_assert(sizeof(struct nvmefs_wire_layout_req) == 32, "layout request is 32 bytes");

#define NVMEFS_WIRE_LAYOUT_DEVS 32u /* NVMEFS_MAX_DEVICES */

/* What LAYOUT writes first; nmembers nvmefs_wire_member follow, then nexts
 * nvmefs_wire_extent (by slot, then component offset). */
struct nvmefs_wire_layout {
	uint64_t size;			   /* the file's, at the loan */
	uint32_t chunk_size, stripe_count; /* the file's striping (nvmefs/layout.h) */
	uint32_t nmembers, nexts;
	uint8_t devs[NVMEFS_WIRE_LAYOUT_DEVS]; /* slot -> member */
	uint64_t pad;
};
_Static_assert(sizeof(struct nvmefs_wire_layout) == 64, "layout is 64 bytes");

/* A member device: where the client opens it, and what it must find there
 * (a block device: rdev, ino 0; a regular file: dev and ino, as fstat). */
#define NVMEFS_WIRE_PATH_MAX 240u
struct nvmefs_wire_member {
	uint64_t dev, ino;
	char path[NVMEFS_WIRE_PATH_MAX]; /* absolute, NUL-terminated */
};
_Static_assert(sizeof(struct nvmefs_wire_member) == 256, "member is 256 bytes");

/* Written bytes of slot's component at comp_off lie on member devs[slot] at dev_off. */
struct nvmefs_wire_extent {
	uint32_t slot, pad;
	uint64_t comp_off, dev_off, len;
};
_Static_assert(sizeof(struct nvmefs_wire_extent) == 32, "extent is 32 bytes");

/* The longest name CREATE carries (NAME_MAX). */
#define NVMEFS_WIRE_NAME_MAX 255u

/* REG_FD's reply arg2: what the descriptor's access mode allows. */
#define NVMEFS_WIRE_MAY_READ  1u
#define NVMEFS_WIRE_MAY_WRITE 2u

#define NVMEFS_WIRE_MAX_BATCH	 256u  /* entries per SUBMIT or COMPLETE message */
#define NVMEFS_WIRE_MAX_INFLIGHT 1024u /* per client */
#define NVMEFS_WIRE_MAX_MSG                                                                        \
	(sizeof(struct nvmefs_wire_hdr) + NVMEFS_WIRE_MAX_BATCH * sizeof(struct nvmefs_wire_sqe))
#define NVMEFS_WIRE_MAX_REGION (1ull << 40) /* bytes of one shared region */

/* A message as nvmefs_wire_parse found it; entries point into the buffer. */
struct nvmefs_wire_msg {
	struct nvmefs_wire_hdr hdr;
	const void *entries; /* count entries of entry_size bytes, unaligned */
	size_t entry_size;
};

/*
 * Check the message buf[0, len) as the side receiving it: from_client
 * true for the daemon (HELLO ... SUBMIT, CREATE), false for the client (REPLY,
 * COMPLETE; a REPLY to HELLO carries a nvmefs_wire_hello, one to CREATE a
 * nvmefs_wire_stat; CREATE's entries are its name's bytes, one each,
 * and must make a name: not "." or ".."). Returns 0 and
 * fills *m, or -EBADMSG (truncated, wrong magic, size or count), -EPROTO
 * (another version) or -EOPNOTSUPP (a type this side never receives).
 * Reads nothing beyond len.
 */
int nvmefs_wire_parse(const void *buf, size_t len, int from_client, struct nvmefs_wire_msg *m);

/* Whether name[0, len) may be a directory entry's name (CREATE's rule): 1
 * to NVMEFS_WIRE_NAME_MAX bytes, no '/' or NUL, not "." or "..". */
int nvmefs_wire_name_ok(const char *name, size_t len);

/* Entry i of a parsed SUBMIT (copied out: the buffer need not be aligned). */
void nvmefs_wire_sqe_at(const struct nvmefs_wire_msg *m, uint32_t i, struct nvmefs_wire_sqe *e);

/*
 * Check one submission against what its client registered: may is the
 * handle's NVMEFS_WIRE_MAY_* (0: no such handle), region_size the region's
 * bytes (0: no such region; FSYNC needs none). Returns 0, or -EBADF (no
 * handle, or its mode does not allow the op), -EINVAL (unknown op, a flag
 * the op does not take, length above max_len), -EFAULT (the range is not
 * inside the region) or -EFBIG (beyond the largest file, max_off).
 */
int nvmefs_wire_check_sqe(const struct nvmefs_wire_sqe *e, unsigned may, uint64_t region_size,
			  uint64_t max_len, uint64_t max_off);

#endif

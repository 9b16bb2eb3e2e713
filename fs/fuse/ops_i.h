/* SPDX-License-Identifier: MIT */
/*
 * ops_i.h: what the FUSE operations' two files share: ops.c (names,
 * attributes, directories, extended attributes, INIT and the operations
 * table) and ops_file.c (open handles, READ, WRITE and the rest of a
 * file's requests, which the table points at). The helpers every handler
 * decodes with, and ops_file.c's handlers for the table.
 * The includer defines FUSE_USE_VERSION before including this header.
 */
#ifndef NVMEFS_OPS_I_H
#define NVMEFS_OPS_I_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fuse_lowlevel.h>
#include <string.h>

#include "door_i.h"
#include "namei.h"
#include "xlayout_i.h" /* the control directory's name */

/* The cache time of every entry and attribute reply (door_i.h says why so long). */
#define TIMEOUT NVMEFS_ATTR_TIMEOUT

/* The test daemon loses this reply (testctl "lose_open", "lose_readdir"):
 * true, and one fewer to lose. Always false in nvmefs (the count stays 0). */
static inline bool lose_reply(atomic_uint *count)
{
	unsigned n = atomic_load(count);

	while (n && !atomic_compare_exchange_weak(count, &n, n - 1))
		;
	return n != 0;
}

static inline struct nvmefs_vol *VOL(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* An entry reply for the attributes st of an inode the core counted a
 * reference on (the kernel's lookup count, given back by FORGET). */
static inline void fill_entry(const struct stat *st, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = st->st_ino;
	e->generation = 1;
	e->attr_timeout = TIMEOUT;
	e->entry_timeout = TIMEOUT;
	e->attr = *st;
}

/* The caller's ids, for the core, and its umask: libfuse 3.14 fills it in
 * for MKNOD, MKDIR and CREATE (0 for other requests), and with
 * FUSE_DONT_MASK (op_init) the kernel leaves it to us. */
static inline struct nvmefs_cred req_cred(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	return (struct nvmefs_cred){
		.uid = ctx->uid, .gid = ctx->gid, .pid = ctx->pid, .umask = ctx->umask};
}

/*
 * Before the caller changes in's data or size where the kernel does not take
 * the privileges away itself (direct_io writes, O_TRUNC opens, which it
 * leaves to the OPEN, fallocate and writes by callers outside the file's
 * group): take them, and drop the mode the kernel caches, which exec and
 * `stat -c %A` read. 0 or -errno.
 */
static inline int kill_privs(fuse_req_t req, struct nvmefs_inode *in, fuse_ino_t ino)
{
	struct nvmefs_cred cred = req_cred(req);
	int ret = nvmefs_ns_kill_privs(VOL(req), in, &cred);

	if (ret > 0)
		nvmefs_loop_inval_attr(ino);
	return ret < 0 ? ret : 0;
}

/*
 * The control directory and its files are not changed by any request:
 * EPERM when a or b (inodes) is one, or name in a is ".nvmefs" (removing or
 * renaming it). Replies and returns true then.
 */
static inline bool refuse_ctl(fuse_req_t req, fuse_ino_t a, fuse_ino_t b, const char *name)
{
	if (!nvmefs_ctl_ino(a) && !nvmefs_ctl_ino(b) && !(name && nvmefs_is_ctl_name(a, name)))
		return false;
	fuse_reply_err(req, EPERM);
	return true;
}

/* ---- ops_file.c: a file's requests, for the table in ops.c ---- */
void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi);
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
	      struct fuse_file_info *fi);
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		  struct fuse_file_info *fi);
void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);

#endif

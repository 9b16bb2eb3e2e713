/* SPDX-License-Identifier: MIT */
/*
 * reply_open_i.h: the OPEN reply nvmefs sends, shared with tests/fuse_null
 * (the bench's FUSE ceiling), which must open files exactly as nvmefs does.
 */
#ifndef NVMEFS_REPLY_OPEN_I_H
#define NVMEFS_REPLY_OPEN_I_H

/* The includer picks FUSE_USE_VERSION and includes <fuse_lowlevel.h>. */
#include <linux/fuse.h>
#include <sys/uio.h>

/*
 * fuse_reply_open, plus FOPEN_PARALLEL_DIRECT_WRITES on direct opens, so the
 * kernel (6.2 and later) lets writers of one file at disjoint offsets in at
 * once instead of taking the inode lock for each write. libfuse 3.14's
 * fuse_file_info has no bit for it (3.15 added parallel_direct_writes), so
 * the reply is built here as fuse_reply_open builds it: fh, direct_io and
 * keep_cache are carried over. Extending writes stay serialized by the
 * kernel. fuse_reply_create has no such way out: the handle a create
 * returns lacks the flag.
 * Returns fuse_reply_iov's result: non-zero when the kernel did not take the
 * reply (the request was aborted), and then no RELEASE comes for the handle.
 */
static inline int nvmefs_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	struct fuse_open_out arg = {.fh = fi->fh};
	struct iovec iov = {.iov_base = &arg, .iov_len = sizeof(arg)};

	if (fi->direct_io)
		arg.open_flags |= FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES;
	if (fi->keep_cache)
		arg.open_flags |= FOPEN_KEEP_CACHE;
	return fuse_reply_iov(req, &iov, 1);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * namei_i.h: what fs/core/namei_attr.c (what an inode carries) takes from
 * fs/core/namei.c (the names) beyond namei.h, the doors' API, and what
 * both count.
 */
#ifndef NVMEFS_NAMEI_I_H
#define NVMEFS_NAMEI_I_H

#include "fs_i.h"

/* Bytes an xattr costs in meta_bytes beyond its name and value (the fixed
 * part of its XATTR_SET record, which meta_bytes counts). */
#define NVMEFS_XATTR_COST 24

/* Change the regular file in's size, holding its whole range (io_lock) for
 * it; meta not held. For an open with O_TRUNC and setattr. */
int nvmefs_ns_truncate_locked(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t size);

#endif

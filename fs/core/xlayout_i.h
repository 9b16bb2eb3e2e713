/* SPDX-License-Identifier: MIT */
/*
 * xlayout_i.h: the interface of fs/core/xlayout.c (layouts as the layout xattr), for the core's
 * other modules and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_XLAYOUT_I_H
#define NVMEFS_XLAYOUT_I_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fs_i.h"

/* Parse "chunk=SIZE,count=N,devs=I:J" (each optional) over vol's members;
 * unset fields get the volume's chunk, every member, and devs[0] ==
 * NVMEFS_LAYOUT_ANY_DEV. Returns 0 or -EINVAL. */
int nvmefs_xlayout_parse(const struct nvmefs_vol *vol, const char *value, size_t len,
			 struct nvmefs_layout *out);
/* Text of l into buf: its length, or -ERANGE when len is too small. */
int nvmefs_xlayout_format(const struct nvmefs_layout *l, char *buf, size_t len);
/* The layout of a new file under default d (a directory's; NULL or none:
 * the volume's), its members chosen by the rotor when d leaves them open
 * (meta held). */
void nvmefs_xlayout_pick(struct nvmefs_vol *vol, const struct nvmefs_layout *d,
			 struct nvmefs_layout *out);
/* The xattr's value for ino into buf: length, -ENODATA (a directory with
 * no default, or not a file or directory), -ENOENT, -ERANGE. */
int nvmefs_xlayout_get(struct nvmefs_vol *vol, uint64_t ino, char *buf, size_t len);
/* Set ino's layout from value (NULL: remove a directory's default).
 * A file's only while it holds no data (-ENOTEMPTY). 0 or -errno. */
int nvmefs_xlayout_set(struct nvmefs_vol *vol, uint64_t ino, const char *value, size_t size);

/* The hidden control directory MOUNTPOINT/.nvmefs (fs/fuse/ctl.c): the
 * name no entry of the root may take, and its inode numbers. */
#define NVMEFS_CTL_NAME	  ".nvmefs"
#define NVMEFS_CTL_DIR	  (NVMEFS_INO_MAX + 1)
#define NVMEFS_CTL_STATS  (NVMEFS_INO_MAX + 2)
#define NVMEFS_CTL_CONFIG (NVMEFS_INO_MAX + 3)

/* Whether name in parent is the root's ".nvmefs": the control directory,
 * never an entry any door may make, remove or rename. */
static inline bool nvmefs_is_ctl_name(uint64_t parent, const char *name)
{
	return parent == NVMEFS_ROOT_INO && !strcmp(name, NVMEFS_CTL_NAME);
}

#endif

// SPDX-License-Identifier: MIT
/*
 * Operation references on inodes (icache_i.h): the get and put pair every
 * namespace operation takes its inodes by, and the debug walk that checks
 * them. Every inode stays resident as meta.c keeps it; a get only finds
 * the inode and counts the reference, and the last put of a freed inode
 * frees it when nothing else holds it. docs/METADATA-V2-STEP4.md, §3.
 */
#include "fs_i.h"
#include "icache_i.h"
#include "meta_i.h"

#include <assert.h>
#include <errno.h>

#include "nvmefs/util.h"

int nvmefs_inode_get(struct nvmefs_vol *vol, uint64_t ino, unsigned need, struct nvmefs_inode **out)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, ino);

	*out = NULL;
	if (!in || ((need & NVMEFS_IGET_LIVE) && in->dead))
		return -ENOENT;
	in->refs++;
	*out = in;
	return 0;
}

bool nvmefs_inode_held(const struct nvmefs_vol *vol, const struct nvmefs_inode *in)
{
	(void)vol;
	return in->refs || atomic_load(&in->ios) || in->lookup;
}

void nvmefs_inode_put(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	if (!in)
		return;
	assert(in->refs > 0);
	/* Freed while this operation held it (its last name went, and no
	 * handle or lookup kept it): its memory goes with the reference. */
	if (--in->refs == 0 && in->dead && !nvmefs_inode_held(vol, in))
		nvmefs_inode_drop(vol, in);
}

int nvmefs_icache_check(struct nvmefs_vol *vol, bool idle)
{
	unsigned bad = 0;

	for (size_t b = 0; b < vol->itab_size; b++) {
		for (struct nvmefs_inode *in = vol->itab[b]; in; in = in->hnext) {
			unsigned ios = atomic_load(&in->ios);

			if (idle && (in->refs || ios)) {
				nvmefs_err("inode %llu: %u reference(s) and %u I/O left",
					   (unsigned long long)in->ino, in->refs, ios);
				bad++;
			}
			if (in->dead && !nvmefs_inode_held(vol, in)) {
				nvmefs_err("inode %llu: freed, held by nothing, still in memory",
					   (unsigned long long)in->ino);
				bad++;
			}
		}
	}
	return bad ? -EUCLEAN : 0;
}

// SPDX-License-Identifier: MIT
/*
 * Operation references on inodes (icache_i.h): the get and put pair every
 * namespace operation takes its inodes by (the kernel's lookup counts are
 * lookups.c's); what pins an inode in memory; and the
 * debug walk that checks all of it. Every inode stays resident as meta.c
 * keeps it; a get only finds the inode and counts the reference, and a
 * freed inode leaves memory when nothing holds it any more (its last put,
 * or the forget of its last lookup). docs/METADATA-V2-STEP4.md, §3.
 */
#include "fs_i.h"
#include "icache_i.h"
#include "lookups_i.h"
#include "meta_i.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

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

bool nvmefs_inode_pinned(const struct nvmefs_vol *vol, const struct nvmefs_inode *in)
{
	/* A live inode the kernel names is not pinned: it can be read again
	 * by number. A freed one has no stored copy left to read. */
	return in->ino == NVMEFS_ROOT_INO || in->refs || in->opens || atomic_load(&in->ios) ||
	       in->dirty_pprev || atomic_load(&in->wtime_queued) ||
	       (in->dead && nvmefs_lookups_count(vol, in->ino));
}

void nvmefs_inode_reap(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	if (!in->dead || nvmefs_inode_held(vol, in))
		return;
	/* What leaves memory here is what an eviction could take. */
	assert(!nvmefs_inode_pinned(vol, in));
	nvmefs_inode_drop(vol, in);
}

void nvmefs_inode_put(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	if (!in)
		return;
	assert(in->refs > 0);
	/* Freed while this operation held it (its last name went, and no
	 * handle or lookup kept it): its memory goes with the reference. */
	if (--in->refs == 0)
		nvmefs_inode_reap(vol, in);
}

/* ---- the kernel's lookup counts ---- */

/* One slot of vol->lookups; ino 0 (never an inode's) marks a free one. */
/* The table's own invariants: each entry reachable from its home, counts
 * above 0, nlookups right, and (while every inode is resident) naming an
 * inode in memory. The number of faults. */
static unsigned lookups_check(struct nvmefs_vol *vol)
{
	unsigned bad = 0;
	size_t used = 0;

	for (size_t i = 0; i < vol->lookups_cap; i++) {
		const struct nvmefs_lookup *s = &vol->lookups[i];

		if (!s->ino)
			continue;
		used++;
		if (!s->count || nvmefs_lookups_slot(vol, s->ino) != i ||
		    !nvmefs_iget(vol, s->ino)) {
			nvmefs_err("lookups: inode %llu (count %llu) in slot %zu: bad entry",
				   (unsigned long long)s->ino, (unsigned long long)s->count, i);
			bad++;
		}
	}
	if (used != vol->nlookups ||
	    vol->lookups_bytes != vol->lookups_cap * sizeof(struct nvmefs_lookup)) {
		nvmefs_err("lookups: %zu entries counted as %zu, %zu bytes for %zu slots", used,
			   vol->nlookups, vol->lookups_bytes, vol->lookups_cap);
		bad++;
	}
	return bad;
}

int nvmefs_icache_check(struct nvmefs_vol *vol, bool idle)
{
	unsigned bad = lookups_check(vol);

	for (size_t b = 0; b < vol->itab_size; b++) {
		for (struct nvmefs_inode *in = vol->itab[b]; in; in = in->hnext) {
			unsigned ios = atomic_load(&in->ios);

			if (idle && (in->refs || ios)) {
				nvmefs_err("inode %llu: %u reference(s) and %u I/O left",
					   (unsigned long long)in->ino, in->refs, ios);
				bad++;
			}
			/* A freed inode stays only while held, and then it
			 * must be pinned: an eviction would lose it. */
			if (in->dead && !nvmefs_inode_held(vol, in)) {
				nvmefs_err("inode %llu: freed, held by nothing, still in memory",
					   (unsigned long long)in->ino);
				bad++;
			} else if (in->dead && !nvmefs_inode_pinned(vol, in)) {
				nvmefs_err("inode %llu: freed and held, but not pinned",
					   (unsigned long long)in->ino);
				bad++;
			}
		}
	}
	return bad ? -EUCLEAN : 0;
}

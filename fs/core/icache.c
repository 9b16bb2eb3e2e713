// SPDX-License-Identifier: MIT
/*
 * Operation references on inodes (icache_i.h): the get and put pair every
 * namespace operation takes its inodes by; the kernel's lookup counts in a
 * table of their own (vol->lookups); what pins an inode in memory; and the
 * debug walk that checks all of it. Every inode stays resident as meta.c
 * keeps it; a get only finds the inode and counts the reference, and a
 * freed inode leaves memory when nothing holds it any more (its last put,
 * or the forget of its last lookup). docs/METADATA-V2-STEP4.md, §3.
 */
#include "fs_i.h"
#include "icache_i.h"
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

bool nvmefs_inode_held(const struct nvmefs_vol *vol, const struct nvmefs_inode *in)
{
	return in->refs || atomic_load(&in->ios) || nvmefs_lookups_count(vol, in->ino);
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
struct nvmefs_lookup {
	uint64_t ino, count;
};
_Static_assert(sizeof(struct nvmefs_lookup) == 16, "16 bytes a slot, as the budget counts it");

#define LOOKUPS_MIN 64 /* slots of the smallest table */

static size_t home_of(uint64_t ino, size_t cap)
{
	ino ^= ino >> 33;
	ino *= 0xff51afd7ed558ccdull;
	ino ^= ino >> 33;
	return (size_t)ino & (cap - 1);
}

/* The slot of ino, or of the free slot where it would go (cap > 0). */
static size_t probe(const struct nvmefs_lookup *t, size_t cap, uint64_t ino)
{
	size_t i = home_of(ino, cap);

	while (t[i].ino && t[i].ino != ino)
		i = (i + 1) & (cap - 1);
	return i;
}

/* Move the table to cap slots: 0 or -ENOMEM (then unchanged). */
static int lookups_resize(struct nvmefs_vol *vol, size_t cap)
{
	struct nvmefs_lookup *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < vol->lookups_cap; i++) {
		if (vol->lookups[i].ino)
			t[probe(t, cap, vol->lookups[i].ino)] = vol->lookups[i];
	}
	free(vol->lookups);
	vol->lookups = t;
	vol->lookups_cap = cap;
	vol->lookups_bytes = cap * sizeof(*t);
	return 0;
}

int nvmefs_lookups_reserve(struct nvmefs_vol *vol)
{
	size_t cap = vol->lookups_cap, need = vol->nlookups + 1;

	/* Grow past half full; a failed growth still serves up to 3/4. */
	if (need * 2 <= cap)
		return 0;
	if (!lookups_resize(vol, cap ? cap * 2 : LOOKUPS_MIN))
		return 0;
	return need * 4 <= cap * 3 ? 0 : -ENOMEM;
}

void nvmefs_lookups_add(struct nvmefs_vol *vol, uint64_t ino)
{
	size_t i;

	assert(vol->nlookups < vol->lookups_cap); /* nvmefs_lookups_reserve first */
	i = probe(vol->lookups, vol->lookups_cap, ino);
	if (!vol->lookups[i].ino) {
		vol->lookups[i].ino = ino;
		vol->nlookups++;
	}
	vol->lookups[i].count++;
}

uint64_t nvmefs_lookups_count(const struct nvmefs_vol *vol, uint64_t ino)
{
	if (!vol->nlookups)
		return 0;
	return vol->lookups[probe(vol->lookups, vol->lookups_cap, ino)].count;
}

/* Empty slot i, moving up the entries after it that probing would no
 * longer reach (linear probing's deletion: no tombstones). */
static void slot_clear(struct nvmefs_lookup *t, size_t cap, size_t i)
{
	for (size_t j = (i + 1) & (cap - 1); t[j].ino; j = (j + 1) & (cap - 1)) {
		size_t h = home_of(t[j].ino, cap);

		/* t[j] stays when its home lies cyclically in (i, j]. */
		if (i <= j ? (h > i && h <= j) : (h > i || h <= j))
			continue;
		t[i] = t[j];
		i = j;
	}
	t[i] = (struct nvmefs_lookup){0};
}

uint64_t nvmefs_lookups_sub(struct nvmefs_vol *vol, uint64_t ino, uint64_t n)
{
	struct nvmefs_lookup *s;
	size_t i;

	if (!vol->nlookups)
		return 0;
	i = probe(vol->lookups, vol->lookups_cap, ino);
	s = &vol->lookups[i];
	if (!s->ino)
		return 0; /* the kernel cannot forget what it was not given */
	if (s->count > n) {
		s->count -= n;
		return s->count;
	}
	slot_clear(vol->lookups, vol->lookups_cap, i);
	vol->nlookups--;
	/* Shrink when an eighth full; staying big is harmless. */
	if (vol->lookups_cap > LOOKUPS_MIN && vol->nlookups * 8 < vol->lookups_cap)
		lookups_resize(vol, vol->lookups_cap / 2);
	return 0;
}

void nvmefs_lookups_exit(struct nvmefs_vol *vol)
{
	free(vol->lookups);
	vol->lookups = NULL;
	vol->lookups_cap = vol->nlookups = vol->lookups_bytes = 0;
}

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
		if (!s->count || probe(vol->lookups, vol->lookups_cap, s->ino) != i ||
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

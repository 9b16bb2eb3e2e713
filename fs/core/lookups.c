// SPDX-License-Identifier: MIT
/*
 * The kernel's lookup counts (lookups_i.h): a table of their own, ino ->
 * count, open addressing, apart from the inodes so that an inode the kernel
 * names need not stay in memory for it (docs/METADATA-V2-STEP4.md, §3).
 * Below both meta.c, which asks whether a freed inode is still held, and
 * icache.c, which counts the references: neither calls the other for it.
 */
#include "fs_i.h"
#include "lookups_i.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

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

bool nvmefs_inode_held(const struct nvmefs_vol *vol, const struct nvmefs_inode *in)
{
	return in->refs || atomic_load(&in->ios) || nvmefs_lookups_count(vol, in->ino);
}

size_t nvmefs_lookups_slot(const struct nvmefs_vol *vol, uint64_t ino)
{
	return probe(vol->lookups, vol->lookups_cap, ino);
}

// SPDX-License-Identifier: MIT
/*
 * The kernel's lookup counts (lookups_i.h): a table of their own, ino ->
 * count, open addressing, apart from the inodes so that an inode the kernel
 * names need not stay in memory for it (docs/ARCHITECTURE.md, "The inode cache").
 * Below both meta.c, which asks whether a freed inode is still held, and
 * icache.c, which counts the references: neither calls the other for it.
 */
#include "fs_i.h"
#include "lookups_i.h"

#include <errno.h>
#include <stdlib.h>

#include "nvmefs/util.h"

/*
 * NVMEFS_LOOKUP_SHARDS tables, chosen by the top bits of the hash, each
 * doubling past half full on its own: a growth moves a 64th of the
 * entries. One table moved them all under the metadata lock: at 2^19
 * entries that stalled a create for 87 ms (the new 32 MiB faulted in page
 * by page), and the kernel holds one lookup for every file it has seen.
 */
#define LOOKUPS_MIN 16 /* slots of a shard's smallest table */

static uint64_t hash_of(uint64_t ino)
{
	ino ^= ino >> 33;
	ino *= 0xff51afd7ed558ccdull;
	ino ^= ino >> 33;
	return ino;
}

static struct nvmefs_lookup_shard *shard_of(struct nvmefs_vol *vol, uint64_t h)
{
	_Static_assert((NVMEFS_LOOKUP_SHARDS & (NVMEFS_LOOKUP_SHARDS - 1)) == 0, "a power of 2");
	return &vol->lookups[(h >> 58) & (NVMEFS_LOOKUP_SHARDS - 1)];
}

/* The slot of ino (hash h), or of the free slot where it would go (cap > 0). */
static size_t probe(const struct nvmefs_lookup *t, size_t cap, uint64_t ino, uint64_t h)
{
	size_t i = (size_t)h & (cap - 1);

	while (t[i].ino && t[i].ino != ino)
		i = (i + 1) & (cap - 1);
	return i;
}

/* Move shard sh to cap slots: 0 or -ENOMEM (then unchanged). */
static int shard_resize(struct nvmefs_vol *vol, struct nvmefs_lookup_shard *sh, size_t cap)
{
	struct nvmefs_lookup *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < sh->cap; i++) {
		uint64_t ino = sh->t[i].ino;

		if (ino)
			t[probe(t, cap, ino, hash_of(ino))] = sh->t[i];
	}
	if (sh->n > vol->lookups_max_move)
		vol->lookups_max_move = sh->n;
	free(sh->t);
	vol->lookups_cap = vol->lookups_cap - sh->cap + cap;
	vol->lookups_bytes = vol->lookups_cap * sizeof(*t);
	sh->t = t;
	sh->cap = cap;
	return 0;
}

/* Room for one more entry in the shard of an ino not known yet: in every
 * shard (64 compares). Each grows past half full, at its own time; a
 * failed growth still serves up to 3/4. */
int nvmefs_lookups_reserve(struct nvmefs_vol *vol)
{
	for (unsigned k = 0; k < NVMEFS_LOOKUP_SHARDS; k++) {
		struct nvmefs_lookup_shard *sh = &vol->lookups[k];
		size_t need = sh->n + 1;

		if (need * 2 <= sh->cap)
			continue;
		if (shard_resize(vol, sh, sh->cap ? sh->cap * 2 : LOOKUPS_MIN) &&
		    need * 4 > sh->cap * 3)
			return -ENOMEM;
	}
	return 0;
}

void nvmefs_lookups_add(struct nvmefs_vol *vol, uint64_t ino)
{
	uint64_t h = hash_of(ino);
	struct nvmefs_lookup_shard *sh = shard_of(vol, h);
	size_t i;

	/* reserve left this shard half empty, but an operation between its
	 * reserve and its add may drop meta (a load), and others reserve
	 * and add meanwhile: grow here past 3/4. Only out of memory with the
	 * shard full is the lookup not counted (the inode may then leave
	 * memory while the kernel names it: read again, or ESTALE if freed). */
	if ((sh->n + 1) * 4 > sh->cap * 3 &&
	    shard_resize(vol, sh, sh->cap ? sh->cap * 2 : LOOKUPS_MIN) && sh->n + 1 >= sh->cap) {
		nvmefs_err("out of memory: the kernel's lookup of inode %llu is not counted",
			   (unsigned long long)ino);
		return;
	}
	i = probe(sh->t, sh->cap, ino, h);
	if (!sh->t[i].ino) {
		sh->t[i].ino = ino;
		sh->n++;
		vol->nlookups++;
	}
	sh->t[i].count++;
}

uint64_t nvmefs_lookups_count(const struct nvmefs_vol *vol, uint64_t ino)
{
	uint64_t h = hash_of(ino);
	const struct nvmefs_lookup_shard *sh = shard_of((struct nvmefs_vol *)vol, h);

	if (!sh->n)
		return 0;
	return sh->t[probe(sh->t, sh->cap, ino, h)].count;
}

/* Empty slot i, moving up the entries after it that probing would no
 * longer reach (linear probing's deletion: no tombstones). */
static void slot_clear(struct nvmefs_lookup *t, size_t cap, size_t i)
{
	for (size_t j = (i + 1) & (cap - 1); t[j].ino; j = (j + 1) & (cap - 1)) {
		size_t h = (size_t)hash_of(t[j].ino) & (cap - 1);

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
	uint64_t h = hash_of(ino);
	struct nvmefs_lookup_shard *sh = shard_of(vol, h);
	struct nvmefs_lookup *s;
	size_t i;

	if (!sh->n)
		return 0;
	i = probe(sh->t, sh->cap, ino, h);
	s = &sh->t[i];
	if (!s->ino)
		return 0; /* the kernel cannot forget what it was not given */
	if (s->count > n) {
		s->count -= n;
		return s->count;
	}
	slot_clear(sh->t, sh->cap, i);
	sh->n--;
	vol->nlookups--;
	/* Shrink when an eighth full; staying big is harmless. */
	if (sh->cap > LOOKUPS_MIN && sh->n * 8 < sh->cap)
		shard_resize(vol, sh, sh->cap / 2);
	return 0;
}

void nvmefs_lookups_exit(struct nvmefs_vol *vol)
{
	for (unsigned k = 0; k < NVMEFS_LOOKUP_SHARDS; k++) {
		free(vol->lookups[k].t);
		vol->lookups[k] = (struct nvmefs_lookup_shard){0};
	}
	vol->lookups_cap = vol->nlookups = vol->lookups_bytes = 0;
}

bool nvmefs_inode_held(const struct nvmefs_vol *vol, const struct nvmefs_inode *in)
{
	return in->refs || atomic_load(&in->ios) || nvmefs_lookups_count(vol, in->ino);
}

unsigned nvmefs_lookups_check(struct nvmefs_vol *vol, bool (*known)(struct nvmefs_vol *, uint64_t))
{
	size_t used = 0, cap = 0;
	unsigned bad = 0;

	for (unsigned k = 0; k < NVMEFS_LOOKUP_SHARDS; k++) {
		const struct nvmefs_lookup_shard *sh = &vol->lookups[k];
		size_t n = 0;

		for (size_t i = 0; i < sh->cap; i++) {
			const struct nvmefs_lookup *s = &sh->t[i];
			uint64_t h = hash_of(s->ino);

			if (!s->ino)
				continue;
			n++;
			if (!s->count || shard_of(vol, h) != sh ||
			    probe(sh->t, sh->cap, s->ino, h) != i ||
			    (known && !known(vol, s->ino))) {
				nvmefs_err(
					"lookups: inode %llu (count %llu) in slot %zu of table %u: "
					"bad entry",
					(unsigned long long)s->ino, (unsigned long long)s->count, i,
					k);
				bad++;
			}
		}
		if (n != sh->n || (sh->cap & (sh->cap - 1)) ||
		    (sh->cap && sh->n * 4 > sh->cap * 3)) {
			nvmefs_err("lookups: table %u: %zu entries counted as %zu in %zu slots", k,
				   n, sh->n, sh->cap);
			bad++;
		}
		used += n;
		cap += sh->cap;
	}
	if (used != vol->nlookups || cap != vol->lookups_cap ||
	    vol->lookups_bytes != cap * sizeof(struct nvmefs_lookup)) {
		nvmefs_err("lookups: %zu entries counted as %zu, %zu bytes for %zu slots (%zu "
			   "counted)",
			   used, vol->nlookups, vol->lookups_bytes, cap, vol->lookups_cap);
		bad++;
	}
	return bad;
}

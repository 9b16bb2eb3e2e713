// SPDX-License-Identifier: MIT
/*
 * fsck.nvmefs's passes over the space and the store (fsck.c lists them all
 * and runs them; fsck_tree.c has 3 to 7): 8. free space, rebuilt from the
 * extents and checked against the data areas and the store's FREE keys;
 * 9. the store's keys and values against the metadata.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsck_i.h"
#include "alloc_i.h"
#include "kv_i.h"
#include "meta_i.h"
#include "store.h"
#include "util_i.h"
#include "values.h"
#include "nvmefs/util.h"

/* ---- 8. free space ---- */

/* The store's FREE keys of one member, as they are (they may overlap when
 * damaged), in key order: by end. */
struct fkeys {
	struct nvmefs_range *v;
	size_t n, cap;
};

/* Read every FREE key of the store into k[member]; a key that does not
 * decode or names no member is reported and, with -y, deleted. */
static int read_free_keys(struct fsck *f, struct fkeys *k)
{
	const uint8_t prefix[1] = {NVMEFS_KEY_FREE};
	struct nvmefs_vol *vol = f->vol;
	struct nvmefs_store_iter *it;
	struct nvmefs_run_ent e;
	int ret = nvmefs_store_iter_prefix(&it, vol->store, prefix, sizeof(prefix));

	while (!ret && (ret = nvmefs_store_iter_next(it, &e)) == 1) {
		struct nvmefs_val v;
		struct fkeys *m;

		ret = nvmefs_val_decode(e.key, e.klen, e.val, e.vlen, &v);
		if (ret || v.free.member >= vol->ndevs) {
			problem(f, true,
				"a FREE key of member %u does not decode or names no member",
				e.klen > 1 ? e.key[1] : 0);
			if (f->repair)
				nvmefs_kv_del(vol, e.key, e.klen);
			ret = 0;
			continue;
		}
		m = &k[v.free.member];
		ret = nvmefs_grow(&m->v, &m->cap, m->n + 1, sizeof(*m->v));
		if (!ret)
			m->v[m->n++] = (struct nvmefs_range){v.free.off, v.free.len};
	}
	nvmefs_store_iter_close(it);
	return ret < 0 ? ret : 0;
}

/* What the extents say of the bytes [off, end) of member d (free is its
 * complement, sorted): "free: A-B" of the first free range there, or "in
 * use". */
static const char *extents_say(const struct nvmefs_freemap *free, uint64_t off, uint64_t end,
			       char *buf, size_t size)
{
	for (size_t i = 0; i < free->n; i++) {
		const struct nvmefs_range *r = &free->v[i];

		if (r->off < end && r->off + r->len > off) {
			snprintf(buf, size, "the extents leave %" PRIu64 "-%" PRIu64 " free there",
				 r->off, r->off + r->len);
			return buf;
		}
	}
	return "the extents use those bytes";
}

/* One difference between the keys and the extents; the first ten by
 * name, the rest counted (reported after). */
static void free_differs(struct fsck *f, size_t *n, const char *fmt, ...)
{
	va_list ap;

	if ((*n)++ >= 10)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (f->repair)
		printf(": fixed\n");
	else
		printf(": not fixed (-n)\n");
}

static void put_free_key(struct nvmefs_vol *vol, unsigned d, const struct nvmefs_range *r)
{
	struct nvmefs_val v = {.kind = NVMEFS_KEY_FREE};

	v.free.member = d;
	v.free.off = r->off;
	v.free.len = r->len;
	nvmefs_kv_put(vol, &v);
}

/*
 * The store's FREE keys against the complement of the extents (vol->free,
 * just rebuilt): each free range one key, keyed by its end, and no other
 * key. Walked by end, both sides sorted so. -y writes the keys that differ
 * (a put, or a tombstone for a key of no free range) and makes the durable
 * free map the complement. Returns the differences or -errno.
 */
static long check_free_keys(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;
	struct fkeys k[NVMEFS_MAX_DEVICES] = {0};
	uint8_t key[NVMEFS_KEY_MAX];
	char say[96];
	size_t diffs = 0;
	int ret = read_free_keys(f, k);

	for (unsigned d = 0; !ret && d < vol->ndevs; d++) {
		const struct nvmefs_freemap *want = &vol->free[d];
		size_t i = 0, j = 0;

		while (i < k[d].n || j < want->n) {
			const struct nvmefs_range *a = i < k[d].n ? &k[d].v[i] : NULL;
			const struct nvmefs_range *b = j < want->n ? &want->v[j] : NULL;
			uint64_t aend = a ? a->off + a->len : UINT64_MAX;
			uint64_t bend = b ? b->off + b->len : UINT64_MAX;

			if (a && b && aend == bend) {
				if (a->off != b->off) {
					free_differs(f, &diffs,
						     "member %u: the FREE key of bytes %" PRIu64
						     "-%" PRIu64 " says they are free, the extents "
						     "leave %" PRIu64 "-%" PRIu64 " free",
						     d, a->off, aend, b->off, bend);
					if (f->repair)
						put_free_key(vol, d, b);
				}
				i++;
				j++;
			} else if (a && aend < bend) {
				free_differs(f, &diffs,
					     "member %u: a FREE key says bytes %" PRIu64 "-%" PRIu64
					     " are free, %s",
					     d, a->off, aend,
					     extents_say(want, a->off, aend, say, sizeof(say)));
				if (f->repair)
					nvmefs_kv_del(vol, key, nvmefs_key_free(key, d, aend));
				i++;
			} else {
				free_differs(
					f, &diffs,
					"member %u: bytes %" PRIu64 "-%" PRIu64
					" are free (no extent maps them) but no FREE key says so",
					d, b->off, bend);
				if (f->repair)
					put_free_key(vol, d, b);
				j++;
			}
		}
	}
	for (unsigned d = 0; d < NVMEFS_MAX_DEVICES; d++)
		free(k[d].v);
	if (ret)
		return ret;
	if (diffs > 10)
		printf("member(s): %zu more differences between the FREE keys and the extents\n",
		       diffs - 10);
	return (long)diffs;
}

/* -y: the durable free map becomes the complement of the extents, as the
 * keys now are, so that later changes write the right keys. */
static int reset_free_keys(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;

	for (unsigned d = 0; d < vol->ndevs; d++) {
		struct nvmefs_freemap *m = &vol->dfree[d];

		if (nvmefs_grow(&m->v, &m->cap, vol->free[d].n + 1, sizeof(*m->v)))
			return -ENOMEM;
		memcpy(m->v, vol->free[d].v, vol->free[d].n * sizeof(*m->v));
		m->n = vol->free[d].n;
	}
	vol->free_keys = true;
	return vol->kv_err;
}

/* The FREE keys: a volume made before them has none (the mount refuses
 * it); else each difference from the extents. */
static int check_free(struct fsck *f)
{
	long diffs;

	if (!f->vol->free_keys)
		problem(f, true,
			"the volume keeps no free space in its run area (made before FREE keys); "
			"-y writes it from the extents");
	diffs = check_free_keys(f);
	if (diffs < 0)
		return (int)diffs;
	if (diffs && f->vol->free_keys)
		problem(f, true, "%ld FREE key(s) differ from the extents (above)", diffs);
	if (!f->repair || (!diffs && f->vol->free_keys))
		return 0;
	return reset_free_keys(f);
}

int check_space(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;
	uint64_t used = 0, files = 0, dirs = 0, used_d[NVMEFS_MAX_DEVICES] = {0};
	int ret;

	pass_begin(f, "free space");
	if (!f->repair && f->claims) {
		info(f, "free space not rebuilt: extents overlap (see above)");
		return 0;
	}
	ret = nvmefs_alloc_rebuild(vol);
	if (ret == -EUCLEAN) {
		problem(f, false, "extents still overlap");
		return 0;
	}
	if (ret)
		return ret;
	/* One pass over the inodes: bytes mapped on each member. */
	for (size_t i = 0; i < vol->itab_size; i++) {
		for (struct nvmefs_inode *in = vol->itab[i]; in; in = in->hnext) {
			files += !S_ISDIR(in->mode);
			dirs += S_ISDIR(in->mode);
			for (unsigned s = 0; in->slots && s < in->layout.stripe_count; s++) {
				for (size_t k = 0; k < in->slots[s].n; k++)
					used_d[in->layout.devs[s]] += in->slots[s].v[k].len;
			}
		}
	}
	for (unsigned d = 0; d < vol->ndevs; d++) {
		uint64_t free_d = 0, area = vol->data_end[d] - vol->data_start[d];

		for (size_t k = 0; k < vol->free[d].n; k++)
			free_d += vol->free[d].v[k].len;
		if (used_d[d] + free_d != area)
			problem(f, false,
				"member %u: %" PRIu64 " bytes used and %" PRIu64
				" free do not add up to its %" PRIu64 " byte data area",
				d, used_d[d], free_d, area);
		used += used_d[d];
	}
	printf("%" PRIu64 " files, %" PRIu64 " directories, %" PRIu64 " of %" PRIu64
	       " bytes used\n",
	       files, dirs, used, vol->total_bytes);
	return check_free(f);
}

/* ---- 9. the store ---- */

/* The store's keys against the metadata loaded from them and repaired:
 * what the load does not read back (the summaries of the INODE values,
 * DIRENT keys beside their DCOOKIE twins) or a repair changed. -y writes
 * the metadata's keys where they differ. */
int check_store(struct fsck *f)
{
	int ret;

	pass_begin(f, "store");
	ret = nvmefs_meta_check_store(f->vol, false);
	if (ret != -EUCLEAN)
		return ret;
	problem(f, true, "the store's keys differ from the metadata (the first difference above)");
	if (!f->repair)
		return 0;
	ret = nvmefs_meta_check_store(f->vol, true);
	if (ret >= 0)
		info(f, "%d key(s) of the store rewritten", ret);
	return ret < 0 ? ret : 0;
}

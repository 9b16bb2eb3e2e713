// SPDX-License-Identifier: MIT
/*
 * The metadata journal (docs/FORMAT.md), its opening side: mkfs's format
 * (an empty journal and run area, the store opened on them); the mount's
 * load: the superblocks, the store's keys into the maps (or, when inodes
 * are read on demand, the root alone), the free space, then replay of the
 * journal from the manifest's mark until the first transaction that is not
 * whole, with a search past it for damage; and the reclaim of orphans
 * (files unlinked while open before a crash) after it.
 *
 * Its sibling journal.c runs the journal: logging, commits, flushes of the
 * store, superblocks, the committer and compactor threads.
 */
#include "fs_i.h"
#include "alloc_i.h"
#include "icache_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "store.h"
#include "util_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvmefs/util.h"

#define IO_CHUNK (4u << 20)

/* ---- making and opening the store ---- */

/* The run area of the label: the metadata area's part between the
 * superblocks and the journal, on member 0. */
void nvmefs_journal_runs_geom(const struct nvmefs_label *l, struct nvmefs_runs_geom *g)
{
	uint64_t slot = l->runs_size / NVMEFS_BLOCK / 64;

	g->off = l->meta_off + nvmefs_meta_runs_off(l);
	g->blocks = l->runs_size / NVMEFS_BLOCK;
	/* A manifest slot of 64 blocks names about 4,000 runs; small areas
	 * (tests, fuzzing) hold few runs and get smaller slots. */
	g->slot_blocks = (uint32_t)(slot < 1			 ? 1
				    : slot > NVMEFS_SLOT_DEFAULT ? NVMEFS_SLOT_DEFAULT
								 : slot);
}

static int open_store(struct nvmefs_vol *vol)
{
	struct nvmefs_runs_geom g;
	int ret;

	nvmefs_journal_runs_geom(&vol->label, &g);
	ret = nvmefs_store_open(&vol->store, &vol->set->devs[0], &g, vol->label.uuid, NULL);
	if (ret)
		vol->store = NULL;
	return ret;
}

int nvmefs_journal_format(struct nvmefs_vol *vol)
{
	struct nvmefs_journal *j = &vol->j;
	struct nvmefs_runs_geom g;
	uint8_t *zero = nvmefs_aligned_alloc(NVMEFS_BLOCK);
	int ret;

	if (!zero)
		return -ENOMEM;
	memset(zero, 0, NVMEFS_BLOCK);
	/* Stale superblocks and journal blocks must not outlive the format. */
	ret = nvmefs_vol_pio(vol, 0, true, vol->label.meta_off, zero, NVMEFS_BLOCK);
	if (!ret)
		ret = nvmefs_vol_pio(vol, 0, true, vol->label.meta_off + NVMEFS_BLOCK, zero,
				     NVMEFS_BLOCK);
	if (!ret)
		ret = nvmefs_vol_pio(vol, 0, true, nvmefs_journal_base(vol), zero, NVMEFS_BLOCK);
	free(zero);
	if (ret)
		return ret;
	nvmefs_journal_runs_geom(&vol->label, &g);
	ret = nvmefs_store_format(&vol->set->devs[0], &g, vol->label.uuid);
	if (!ret)
		ret = open_store(vol);
	if (ret)
		return ret;
	j->manifest_seq = nvmefs_store_manifest_seq(vol->store);
	j->super_seq = 0;
	j->head = j->tail = 0;
	j->next_seq = 1;
	return 0;
}

/* ---- loading ---- */

static int read_super(struct nvmefs_vol *vol, struct nvmefs_super *best)
{
	void *blk = nvmefs_aligned_alloc(NVMEFS_BLOCK);
	bool found = false;
	int ret = 0;

	if (!blk)
		return -ENOMEM;
	for (unsigned w = 0; w < 2; w++) {
		struct nvmefs_super s;

		ret = nvmefs_vol_pio(vol, 0, false, vol->label.meta_off + nvmefs_meta_super_off(w),
				     blk, NVMEFS_BLOCK);
		if (ret)
			break;
		ret = nvmefs_super_decode(&s, blk);
		if (ret == -EPROTO && !memcmp(s.uuid, vol->label.uuid, 16)) {
			nvmefs_err("%s: superblock %c names features this release does not "
				   "know (%#x): use a newer nvmefs",
				   vol->set->devs[0].path, 'A' + w, s.features);
			break;
		}
		if (ret || memcmp(s.uuid, vol->label.uuid, 16)) {
			nvmefs_debug("superblock %c is not valid", 'A' + w);
			ret = 0;
			continue;
		}
		if (!found || s.seq > best->seq)
			*best = s;
		found = true;
	}
	free(blk);
	if (!ret && !found) {
		nvmefs_err("%s: no valid superblock (both copies damaged)", vol->set->devs[0].path);
		ret = -EUCLEAN;
	}
	return ret;
}

/*
 * Replay when the inodes are not all in memory: read what the record
 * works on first (docs/ARCHITECTURE.md, "The inode cache"), then apply. An inode the
 * store does not have is left for apply to create or refuse.
 */
static int apply_loaded(struct nvmefs_vol *vol, const struct nvmefs_rec *r)
{
	struct {
		uint64_t ino;
		unsigned need;
	} want[2] = {{0, 0}, {0, 0}};
	struct nvmefs_inode *held[2] = {NULL, NULL};
	int ret = 0;

	switch (r->type) {
	case NVMEFS_REC_INODE:
		want[0].ino = r->inode.ino;
		break;
	case NVMEFS_REC_INODE_FREE:
		want[0].ino = r->ino.ino;
		want[0].need = NVMEFS_IGET_EXTENTS | NVMEFS_IGET_XATTRS;
		break;
	case NVMEFS_REC_ORPHAN_ADD:
	case NVMEFS_REC_ORPHAN_DEL:
		want[0].ino = r->ino.ino;
		break;
	case NVMEFS_REC_DIRENT_ADD:
		want[1].ino = r->dirent.child;
		/* fall through */
	case NVMEFS_REC_DIRENT_DEL:
		want[0].ino = r->dirent.parent;
		want[0].need = NVMEFS_IGET_ENTRIES;
		break;
	case NVMEFS_REC_EXTENT:
		want[0].ino = r->extent.ino;
		want[0].need = NVMEFS_IGET_EXTENTS;
		break;
	case NVMEFS_REC_PUNCH:
		want[0].ino = r->punch.ino;
		want[0].need = NVMEFS_IGET_EXTENTS;
		break;
	case NVMEFS_REC_XATTR_SET:
	case NVMEFS_REC_XATTR_DEL:
		want[0].ino = r->xattr.ino;
		break;
	}
	pthread_mutex_lock(&vol->lock);
	for (int i = 0; i < 2 && !ret; i++) {
		if (want[i].ino)
			ret = nvmefs_inode_get(vol, want[i].ino, want[i].need, &held[i]);
		if (ret == -ENOENT)
			ret = 0;
	}
	if (!ret)
		ret = nvmefs_meta_apply(vol, r);
	nvmefs_inode_put(vol, held[1]);
	nvmefs_inode_put(vol, held[0]);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

int nvmefs_journal_apply(struct nvmefs_vol *vol, const uint8_t *p, size_t len, const char *what)
{
	size_t pos = 0;

	while (pos < len) {
		struct nvmefs_rec r;
		long n = nvmefs_rec_decode(&r, p + pos, len - pos);
		int ret;

		if (n <= 0 || (size_t)n > len - pos) {
			nvmefs_err("%s: %s: malformed record at byte %zu", nvmefs_meta_where(vol),
				   what, pos);
			return -EUCLEAN;
		}
		ret = vol->resident ? nvmefs_meta_apply(vol, &r) : apply_loaded(vol, &r);
		if (ret) {
			nvmefs_err("%s: %s: record at byte %zu (type %u) contradicts the metadata",
				   nvmefs_meta_where(vol), what, pos, r.type);
			return ret == -ENOMEM ? ret : -EUCLEAN;
		}
		pos += (size_t)n;
	}
	return 0;
}

/* Replay transactions from the tail until the first one that is not whole,
 * valid and next in sequence. Returns the count replayed or -errno. */
static long replay(struct nvmefs_vol *vol)
{
	struct nvmefs_journal *j = &vol->j;
	uint64_t jsize = vol->label.journal_size;
	uint8_t *buf = nvmefs_aligned_alloc(jsize < IO_CHUNK ? jsize : IO_CHUNK);
	size_t bufsize = jsize < IO_CHUNK ? jsize : IO_CHUNK;
	long count = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (j->head - j->tail < jsize) {
		uint64_t phys = j->head % jsize;
		struct nvmefs_txn t;
		uint32_t nb;

		ret = nvmefs_vol_pio(vol, 0, false, nvmefs_journal_base(vol) + phys, buf,
				     NVMEFS_BLOCK);
		if (ret)
			break;
		nb = nvmefs_txn_nblocks(buf);
		if (nb == 0 || phys + (uint64_t)nb * NVMEFS_BLOCK > jsize)
			break;
		if ((size_t)nb * NVMEFS_BLOCK > bufsize) {
			void *big = nvmefs_aligned_alloc((size_t)nb * NVMEFS_BLOCK);

			if (!big) {
				ret = -ENOMEM;
				break;
			}
			memcpy(big, buf, NVMEFS_BLOCK);
			free(buf);
			buf = big;
			bufsize = (size_t)nb * NVMEFS_BLOCK;
		}
		if (nb > 1) {
			ret = nvmefs_vol_pio(vol, 0, false,
					     nvmefs_journal_base(vol) + phys + NVMEFS_BLOCK,
					     buf + NVMEFS_BLOCK, (size_t)(nb - 1) * NVMEFS_BLOCK);
			if (ret)
				break;
		}
		if (nvmefs_txn_decode(&t, vol->label.uuid, buf, (size_t)nb * NVMEFS_BLOCK) ||
		    t.seq != j->next_seq)
			break;
		if (t.pad) {
			j->head += jsize - phys;
		} else {
			ret = nvmefs_journal_apply(vol, buf + NVMEFS_TXN_HDR, t.payload_len,
						   "journal");
			if (ret)
				break;
			j->head += (uint64_t)nb * NVMEFS_BLOCK;
		}
		j->next_seq++;
		count++;
	}
	free(buf);
	j->since_flush = j->head - j->tail;
	return ret ? ret : count;
}

/* Read and check the transaction at ring position phys; 0 if it is whole
 * and valid, with its header in *t. */
static int txn_at(struct nvmefs_vol *vol, uint64_t phys, uint32_t nb, struct nvmefs_txn *t)
{
	uint64_t jsize = vol->label.journal_size;
	uint8_t *buf;
	int ret;

	if (phys + (uint64_t)nb * NVMEFS_BLOCK > jsize)
		return -EINVAL;
	buf = nvmefs_aligned_alloc((size_t)nb * NVMEFS_BLOCK);
	if (!buf)
		return -ENOMEM;
	ret = nvmefs_vol_pio(vol, 0, false, nvmefs_journal_base(vol) + phys, buf,
			     (size_t)nb * NVMEFS_BLOCK);
	if (!ret)
		ret = nvmefs_txn_decode(t, vol->label.uuid, buf, (size_t)nb * NVMEFS_BLOCK);
	free(buf);
	return ret;
}

/*
 * Replay stops at the first transaction that is not whole and valid: after
 * a crash that is the last one, torn while being written (commits are one
 * at a time and each is flushed before the next starts). A valid
 * transaction further on with a later sequence number means the one at the
 * head was damaged afterwards, and what follows it would be lost silently:
 * find the latest such. Returns its sequence number, 0 if there is none, or
 * -errno.
 */
static int64_t later_txn(struct nvmefs_vol *vol)
{
	struct nvmefs_journal *j = &vol->j;
	uint64_t jsize = vol->label.journal_size;
	size_t chunk = jsize < IO_CHUNK ? jsize : IO_CHUNK;
	uint8_t *buf = nvmefs_aligned_alloc(chunk);
	int64_t found = 0;

	if (!buf)
		return -ENOMEM;
	/* Every live transaction lies within half a ring of the tail
	 * (journal.c's commit_locked flushes before passing that). */
	uint64_t end = j->tail + jsize / 2;

	for (uint64_t pos = j->head + NVMEFS_BLOCK; pos < end;) {
		uint64_t phys = pos % jsize;
		size_t n = jsize - phys < chunk ? jsize - phys : chunk;
		int ret;

		if (n > end - pos)
			n = (size_t)(end - pos);
		ret = nvmefs_vol_pio(vol, 0, false, nvmefs_journal_base(vol) + phys, buf, n);
		if (ret) {
			nvmefs_warn("%s: journal: cannot read past the end of the log to look for "
				    "damage: %s",
				    vol->set->devs[0].path, strerror(-ret));
			break;
		}
		for (size_t b = 0; b < n; b += NVMEFS_BLOCK) {
			struct nvmefs_txn t;

			if (!nvmefs_txn_peek(&t, vol->label.uuid, buf + b) && t.seq > j->next_seq &&
			    (int64_t)t.seq > found && !txn_at(vol, phys + b, t.nblocks, &t))
				found = (int64_t)t.seq;
		}
		pos += n;
	}
	free(buf);
	return found;
}

/*
 * Fill the maps from every key of the store, in key order (every inode
 * before what names it), with the write-through off: the keys are in the
 * runs already.
 */
static int load_store(struct nvmefs_vol *vol)
{
	struct nvmefs_store_iter *it;
	struct nvmefs_run_ent e;
	uint64_t dirents = 0, dcookies = 0;
	int ret = nvmefs_store_iter_open(&it, vol->store, NULL, 0, NULL, 0);

	if (ret)
		return ret;
	vol->loading = true;
	while ((ret = nvmefs_store_iter_next(it, &e)) == 1) {
		struct nvmefs_val v;

		if (e.klen && e.key[0] == NVMEFS_KEY_FREE)
			continue; /* the free space's: nvmefs_alloc_load */
		ret = nvmefs_val_decode(e.key, e.klen, e.val, e.vlen, &v);
		if (ret) {
			nvmefs_err("%s: metadata: a key of kind %u in the run area does not "
				   "decode (%s)",
				   nvmefs_meta_where(vol), e.klen ? e.key[0] : 0, strerror(-ret));
			ret = -EUCLEAN;
			break;
		}
		dirents += v.kind == NVMEFS_KEY_DIRENT;
		dcookies += v.kind == NVMEFS_KEY_DCOOKIE;
		ret = nvmefs_meta_load_val(vol, &v);
		if (ret)
			break;
	}
	vol->loading = false;
	nvmefs_store_iter_close(it);
	if (ret < 0)
		return ret == -ENOMEM ? ret : ret == -EIO ? ret : -EUCLEAN;
	if (dirents != dcookies) {
		nvmefs_err("%s: metadata: %llu entries by name but %llu in readdir order "
			   "(fsck.nvmefs repairs this)",
			   nvmefs_meta_where(vol), (unsigned long long)dirents,
			   (unsigned long long)dcookies);
		/* The checker loads it anyway: its store pass finds the key. */
		return vol->opts.check ? 0 : -EUCLEAN;
	}
	return 0;
}

/*
 * The mount of a volume whose inodes are read on demand (icache.c): the
 * counts from the mark, the root and its entries, and the shadow store of
 * the tests filled with every key (nvmefs_meta_shadow_fill).
 */
static int load_root(struct nvmefs_vol *vol, const struct nvmefs_mark *mark)
{
	struct nvmefs_inode *root = NULL;
	int ret;

	vol->ninodes = mark->ninodes;
	vol->meta_bytes = mark->meta_bytes;
	ret = nvmefs_meta_shadow_fill(vol);
	if (ret)
		return ret;
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, NVMEFS_ROOT_INO, NVMEFS_IGET_LIVE | NVMEFS_IGET_ENTRIES, &root);
	if (!ret && !S_ISDIR(root->mode))
		ret = -ENOENT;
	nvmefs_inode_put(vol, root);
	pthread_mutex_unlock(&vol->lock);
	if (ret == -ENOENT) {
		nvmefs_err("%s: metadata: the root directory is missing", nvmefs_meta_where(vol));
		ret = -EUCLEAN;
	}
	return ret;
}

/*
 * The durable free map from the FREE keys, before replay: replay's records
 * change it and write the keys that change, as live operations do. A
 * volume whose superblock does not say the store holds them was made
 * before they existed and has none: its free space is unknown to the
 * mount, which refuses it rather than see a full volume; fsck.nvmefs -y
 * writes them from the extents (the checker goes on without them).
 */
static int load_free(struct nvmefs_vol *vol, const struct nvmefs_super *s)
{
	vol->free_keys = s->features & NVMEFS_SUPER_FREE_KEYS;
	if (vol->free_keys)
		return nvmefs_alloc_load(vol);
	if (vol->opts.check)
		return 0;
	nvmefs_err("%s: metadata: the volume keeps no free space in its run area (made by a "
		   "release before free space was kept there): run fsck.nvmefs -y on it, which "
		   "writes it, or mkfs.nvmefs again",
		   nvmefs_meta_where(vol));
	return -EUCLEAN;
}

int nvmefs_journal_load(struct nvmefs_vol *vol)
{
	struct nvmefs_journal *j = &vol->j;
	struct nvmefs_super s = {0};
	struct nvmefs_mark mark;
	int64_t later;
	long n;
	int ret = read_super(vol, &s);

	if (ret)
		return ret;
	ret = open_store(vol);
	if (ret)
		return ret == -ENOMEM || ret == -EIO ? ret : -EUCLEAN;
	nvmefs_store_mark(vol->store, &mark);
	j->manifest_seq = nvmefs_store_manifest_seq(vol->store);
	if (j->manifest_seq < s.manifest_floor) {
		nvmefs_err("%s: metadata: the run area's newest valid manifest is %llu but the "
			   "superblock says %llu was written: a newer manifest is damaged",
			   nvmefs_meta_where(vol), (unsigned long long)j->manifest_seq,
			   (unsigned long long)s.manifest_floor);
		return -EUCLEAN;
	}
	if (mark.replay % NVMEFS_BLOCK || !mark.replay_seq) {
		nvmefs_err("%s: metadata: manifest %llu names an impossible journal position",
			   nvmefs_meta_where(vol), (unsigned long long)j->manifest_seq);
		return -EUCLEAN;
	}
	vol->replaying = true;
	/* A mark without meta_bytes (a release's before marks kept it)
	 * gets its estimate from the whole load. */
	vol->resident = vol->opts.check || vol->opts.resident || !mark.meta_bytes;
	ret = vol->resident ? load_store(vol) : load_root(vol, &mark);
	if (!ret)
		ret = load_free(vol, &s);
	if (ret)
		goto out;
	if (mark.next_ino > vol->next_ino)
		vol->next_ino = mark.next_ino;
	j->super_seq = s.seq;
	j->tail = j->head = mark.replay;
	j->next_seq = mark.replay_seq;
	n = replay(vol);
	if (n < 0) {
		ret = (int)n;
		goto out;
	}
	later = later_txn(vol);
	if (later < 0) {
		ret = (int)later;
		goto out;
	}
	if (later) {
		nvmefs_err(
			"%s: journal: transaction %llu is damaged but transaction %lld after it is "
			"whole; replay stopped before the damage (fsck.nvmefs -y keeps that state "
			"and discards the rest)",
			vol->set->devs[0].path, (unsigned long long)j->next_seq, (long long)later);
		j->damaged = (uint64_t)later;
		if (!vol->opts.check) {
			ret = -EUCLEAN;
			goto out;
		}
	}
	nvmefs_log(s.clean ? NVMEFS_LOG_DEBUG : NVMEFS_LOG_INFO,
		   "loaded manifest %llu (%llu inodes), replayed %ld journal transaction(s)%s",
		   (unsigned long long)j->manifest_seq, (unsigned long long)mark.ninodes, n,
		   s.clean ? "" : " after an unclean shutdown");
	j->loaded_clean = s.clean;
	j->replayed = (uint64_t)n;
	j->loaded_manifest = j->manifest_seq;
	if (!vol->opts.check && vol->resident)
		ret = nvmefs_meta_verify(vol);
out:
	vol->replaying = false;
	return ret;
}

/* ---- orphans ---- */

/* The inodes with an ORPHAN key in the store, into *v (*n of them). */
static int stored_orphans(struct nvmefs_vol *vol, uint64_t **v, size_t *n)
{
	uint8_t kind = NVMEFS_KEY_ORPHAN;
	struct nvmefs_store_iter *it;
	struct nvmefs_run_ent e;
	size_t cap = 0;
	int ret = nvmefs_store_iter_prefix(&it, vol->store, &kind, 1);

	*v = NULL;
	*n = 0;
	if (ret)
		return ret;
	while ((ret = nvmefs_store_iter_next(it, &e)) == 1) {
		struct nvmefs_val val;

		ret = nvmefs_val_decode(e.key, e.klen, e.val, e.vlen, &val);
		if (!ret)
			ret = nvmefs_grow(v, &cap, *n + 1, sizeof(**v));
		if (ret)
			break;
		(*v)[(*n)++] = val.rec.ino.ino;
	}
	nvmefs_store_iter_close(it);
	return ret < 0 ? ret : 0;
}

/* Free the orphans when the inodes are not all in memory: each read with
 * its extents and xattrs (INODE_FREE needs them), by the store's list. */
static int reclaim_stored(struct nvmefs_vol *vol, size_t *n)
{
	uint64_t *ino;
	size_t count;
	int ret = stored_orphans(vol, &ino, &count);

	pthread_mutex_lock(&vol->lock);
	for (size_t i = 0; i < count && !ret; i++) {
		struct nvmefs_rec r = {.type = NVMEFS_REC_INODE_FREE};
		struct nvmefs_inode *in;

		ret = nvmefs_inode_get(vol, ino[i],
				       NVMEFS_IGET_LIVE | NVMEFS_IGET_EXTENTS | NVMEFS_IGET_XATTRS,
				       &in);
		if (ret == -ENOENT) {
			nvmefs_err("%s: metadata: orphan record of inode %llu, which does not "
				   "exist (fsck.nvmefs repairs this)",
				   nvmefs_meta_where(vol), (unsigned long long)ino[i]);
			ret = -EUCLEAN;
		}
		if (ret)
			break;
		if (in->orphan) {
			r.ino.ino = in->ino;
			ret = nvmefs_journal_log(vol, &r); /* frees its extents too */
			(*n)++;
		}
		nvmefs_inode_put(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
	free(ino);
	return ret;
}

int nvmefs_journal_reclaim_orphans(struct nvmefs_vol *vol, size_t *n)
{
	int ret = 0;

	*n = 0;
	if (!vol->resident)
		return reclaim_stored(vol, n);
	pthread_mutex_lock(&vol->lock);
	for (size_t i = 0; i < vol->itab_size && !ret; i++) {
		for (struct nvmefs_inode *in = vol->itab[i], *next; in && !ret; in = next) {
			struct nvmefs_rec r = {.type = NVMEFS_REC_INODE_FREE};

			next = in->hnext;
			if (!in->orphan)
				continue;
			r.ino.ino = in->ino;
			ret = nvmefs_journal_log(vol, &r); /* frees its extents too */
			(*n)++;
		}
	}
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

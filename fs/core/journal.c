// SPDX-License-Identifier: MIT
/*
 * The metadata journal (docs/FORMAT.md): records of live operations collect
 * in an open transaction; a commit flushes the data members (so no record
 * reaches data that is not durable), appends the transaction to the ring on
 * member 0 and flushes it. Every record applied is also written through
 * into the store's memtable (meta.c); when the ring is half used, or the
 * memtable large, the commit also flushes the store: the memtable, frozen
 * at the transaction, becomes a sorted run on the run area, and the
 * manifest naming it moves the replay start past the transaction
 * (docs/METADATA-V2.md). Released space becomes allocatable once the
 * transaction releasing it is durable. A committer thread commits every
 * interval and compacts the store after a flush; fsync commits at once. A
 * failed metadata write makes the volume read-only for good (until
 * remount): better than a journal with a hole in it.
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
#include <sys/resource.h>
#include <unistd.h>

#include "nvmefs/util.h"

#define TXN_KICK_BYTES (1u << 20) /* wake the committer past this much */
/* ... or past this many dirty inodes: a commit logs and puts each under
 * meta (emit_dirty), 4-5 us apiece at 10^6 files (holds of 20-24 ms for
 * 4,096 measured), and every operation waits. */
#define DIRTY_KICK   1024u
#define IO_CHUNK     (4u << 20)
#define COMPACT_NICE 10 /* the compactor's nice value */

static uint64_t journal_base(const struct nvmefs_vol *vol)
{
	return vol->label.meta_off + nvmefs_meta_journal_off(&vol->label);
}

int nvmefs_journal_init(struct nvmefs_vol *vol)
{
	struct nvmefs_journal *j = &vol->j;

	pthread_mutex_init(&j->commit_lock, NULL);
	pthread_mutex_init(&j->state_lock, NULL);
	pthread_cond_init(&j->state_cond, NULL);
	pthread_cond_init(&j->compact_cond, NULL);
	j->open_gen = 1;
	j->interval_ms = vol->opts.commit_ms ? vol->opts.commit_ms : 5000;
	return 0;
}

void nvmefs_journal_exit(struct nvmefs_vol *vol)
{
	struct nvmefs_journal *j = &vol->j;

	nvmefs_store_close(vol->store);
	vol->store = NULL;

	free(j->buf);
	free(j->pf);
	j->buf = NULL;
	j->pf = NULL;
	pthread_cond_destroy(&j->state_cond);
	pthread_cond_destroy(&j->compact_cond);
	pthread_mutex_destroy(&j->state_lock);
	pthread_mutex_destroy(&j->commit_lock);
}

int nvmefs_journal_error(struct nvmefs_vol *vol)
{
	/* Asked on every WRITE: an atomic read, no lock. */
	return atomic_load_explicit(&vol->j.error, memory_order_acquire);
}

int nvmefs_journal_log(struct nvmefs_vol *vol, const struct nvmefs_rec *rec)
{
	int ret = nvmefs_meta_apply(vol, rec);

	if (ret) {
		nvmefs_err("internal error: record type %u does not apply: %s", rec->type,
			   strerror(-ret));
		return ret == -EUCLEAN ? -EIO : ret;
	}
	return nvmefs_journal_append(vol, rec);
}

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

int nvmefs_journal_append(struct nvmefs_vol *vol, const struct nvmefs_rec *rec)
{
	struct nvmefs_journal *j = &vol->j;
	size_t need = nvmefs_rec_size(rec);

	if (vol->replaying)
		return 0;
	if (nvmefs_grow(&j->buf, &j->cap, j->len + need, 1))
		return -ENOMEM;
	j->len += nvmefs_rec_encode(rec, j->buf + j->len);
	if (j->len > TXN_KICK_BYTES || vol->ndirty > DIRTY_KICK) {
		pthread_mutex_lock(&j->state_lock);
		if (!j->kick) {
			j->kick = true;
			pthread_cond_broadcast(&j->state_cond);
		}
		pthread_mutex_unlock(&j->state_lock);
	}
	return 0;
}

/* ---- writing ---- */

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

static int write_super(struct nvmefs_vol *vol, bool clean)
{
	struct nvmefs_journal *j = &vol->j;
	struct nvmefs_super s = {0};
	void *blk = nvmefs_aligned_alloc(NVMEFS_BLOCK);
	int ret;

	if (!blk)
		return -ENOMEM;
	memcpy(s.uuid, vol->label.uuid, 16);
	s.seq = j->super_seq + 1;
	s.manifest_floor = j->manifest_seq;
	s.clean = clean;
	s.features = vol->free_keys ? NVMEFS_SUPER_FREE_KEYS : 0;
	nvmefs_super_encode(&s, blk);
	ret = nvmefs_vol_pio(vol, 0, true, vol->label.meta_off + nvmefs_meta_super_off(s.seq & 1),
			     blk, NVMEFS_BLOCK);
	if (!ret)
		ret = nvmefs_dev_flush(&vol->set->devs[0]);
	if (!ret)
		j->super_seq = s.seq;
	free(blk);
	return ret;
}

/*
 * Write the frozen memtable as a run with a manifest whose mark says where
 * replay starts (the head: every record before it is in the run), then
 * the superblock raising the floor to that manifest. The journal before
 * the head is then no longer needed. commit_lock held.
 */
static int write_flush(struct nvmefs_vol *vol, const struct nvmefs_mark *m, bool clean)
{
	struct nvmefs_journal *j = &vol->j;
	int ret = nvmefs_store_flush(vol->store, NULL);

	if (ret) {
		nvmefs_err("%s: metadata: writing the changes to the run area failed: %s%s",
			   nvmefs_meta_where(vol), strerror(-ret),
			   ret == -ENOSPC ? " (the metadata area is full)" : "");
		return ret;
	}
	j->manifest_seq = nvmefs_store_manifest_seq(vol->store);
	j->tail = m->replay;
	j->since_flush = j->head - j->tail;
	ret = write_super(vol, clean);
	if (!ret) {
		pthread_mutex_lock(&j->state_lock);
		j->compact_due = true;
		pthread_cond_signal(&j->compact_cond);
		pthread_mutex_unlock(&j->state_lock);
	}
	return ret;
}

/* Ring bytes a transaction of plen payload bytes takes at the head, with
 * the pad before it when it must wrap. Commits keep the journal since the
 * last flush within half the ring (later_txn relies on it). */
static uint64_t txn_span(const struct nvmefs_vol *vol, size_t plen)
{
	uint64_t jsize = vol->label.journal_size, phys = vol->j.head % jsize;
	uint64_t bytes = (NVMEFS_TXN_HDR + plen + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK * NVMEFS_BLOCK;

	return phys + bytes > jsize ? jsize - phys + bytes : bytes;
}

/* Where the head and the next sequence will be once a transaction of plen
 * payload bytes (none: no transaction) is written, pad included.
 * commit_lock held. */
static void txn_end(const struct nvmefs_vol *vol, size_t plen, uint64_t *head, uint64_t *seq)
{
	uint64_t jsize = vol->label.journal_size, phys = vol->j.head % jsize;
	uint64_t bytes = (NVMEFS_TXN_HDR + plen + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK * NVMEFS_BLOCK;

	*head = vol->j.head;
	*seq = vol->j.next_seq;
	if (!plen)
		return;
	if (phys + bytes > jsize)
		(*seq)++; /* the pad */
	*head += txn_span(vol, plen);
	(*seq)++;
}

/* Append one transaction at the head; wrap with a pad transaction when it
 * does not fit before the ring's end. commit_lock held. */
static int write_txn(struct nvmefs_vol *vol, const uint8_t *payload, size_t plen)
{
	struct nvmefs_journal *j = &vol->j;
	uint64_t jsize = vol->label.journal_size;
	uint32_t nblocks = (uint32_t)((NVMEFS_TXN_HDR + plen + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK);
	uint64_t phys = j->head % jsize;
	size_t bytes = (size_t)nblocks * NVMEFS_BLOCK;
	uint8_t *buf = nvmefs_aligned_alloc(bytes);
	struct nvmefs_txn t = {0};
	int ret;

	if (!buf)
		return -ENOMEM;
	if (phys + bytes > jsize) {
		t.seq = j->next_seq;
		t.nblocks = 1;
		t.pad = 1;
		memset(buf, 0, NVMEFS_BLOCK);
		nvmefs_txn_encode(&t, vol->label.uuid, buf);
		/* Durable before the transaction after it: replay reaches that one
		 * only through the pad, so a power cut must not keep it alone
		 * (it would look like damage, not a torn tail). */
		ret = nvmefs_vol_pio(vol, 0, true, journal_base(vol) + phys, buf, NVMEFS_BLOCK);
		if (!ret)
			ret = nvmefs_dev_flush(&vol->set->devs[0]);
		if (ret)
			goto out;
		j->next_seq++;
		j->head += jsize - phys;
		j->since_flush += jsize - phys;
		phys = 0;
	}
	memset(buf, 0, bytes);
	memcpy(buf + NVMEFS_TXN_HDR, payload, plen);
	t = (struct nvmefs_txn){
		.seq = j->next_seq, .nblocks = nblocks, .payload_len = (uint32_t)plen};
	nvmefs_txn_encode(&t, vol->label.uuid, buf);
	ret = nvmefs_vol_pio(vol, 0, true, journal_base(vol) + phys, buf, bytes);
	if (!ret)
		ret = nvmefs_dev_flush(&vol->set->devs[0]);
	if (ret)
		goto out;
	j->next_seq++;
	j->head += bytes;
	j->since_flush += bytes;
out:
	free(buf);
	return ret;
}

static void emit_dirty(struct nvmefs_vol *vol)
{
	struct nvmefs_rec r;

	while (vol->dirty) {
		struct nvmefs_inode *in = vol->dirty;

		nvmefs_inode_undirty(vol, in);
		nvmefs_inode_to_rec(in, &r);
		if (nvmefs_journal_append(vol, &r)) {
			nvmefs_inode_dirty(vol, in); /* out of memory: the next commit */
			break;
		}
		/* Logged without apply: its INODE key is written here. */
		nvmefs_meta_kv_inode(vol, in);
	}
}

/* With the shadow store on (tests, NVMEFS_META_CROSSCHECK=1), compare it
 * with the maps at every commit (on a large state, at enough of them that
 * the cost follows the writes: nvmefs_meta_crosscheck_due), right after
 * emit_dirty: every inode is clean then, so attributes are compared too. A difference is a bug in
 * the record -> key translation: stop at once, with the key in the log, before more records bury
 * it. Out of memory only loses the check. */
static void crosscheck(struct nvmefs_vol *vol)
{
	int ret = nvmefs_meta_crosscheck(vol);

	if (ret == -ENOMEM) {
		nvmefs_warn("metadata crosscheck: out of memory: the shadow store is dropped");
		nvmefs_meta_shadow_stop(vol);
	} else if (ret) {
		nvmefs_err("metadata crosscheck failed (%s): aborting", strerror(-ret));
		abort();
	}
}

static int flush_data(struct nvmefs_vol *vol)
{
	for (unsigned d = 0; d < vol->ndevs; d++) {
		int ret = nvmefs_dev_flush(&vol->set->devs[d]);

		if (ret) {
			nvmefs_err("%s: flush failed: %s", vol->set->devs[d].path, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static void set_error(struct nvmefs_vol *vol, int err)
{
	struct nvmefs_journal *j = &vol->j;

	pthread_mutex_lock(&j->state_lock);
	if (!j->error) {
		j->error = err;
		nvmefs_err("metadata write failed (%s): the volume is now read-only; "
			   "unmount, check the devices and mount again",
			   strerror(-err));
	}
	pthread_cond_broadcast(&j->state_cond);
	pthread_mutex_unlock(&j->state_lock);
}

/* Flush the memtable past this much memory, whatever the ring says: it is
 * what the store holds in memory beside the maps. */
#define FLUSH_MEM_BYTES (16u << 20)

/*
 * One commit: the open transaction goes to the ring. With flush (asked, or
 * the ring half used since the last flush, or the memtable past
 * FLUSH_MEM_BYTES), the store's memtable is also frozen at the same point,
 * under vol->lock (a pointer swap: it then holds exactly the records up to
 * and including this transaction), and written as a run after the
 * transaction, with a manifest that moves the replay start past it. No
 * I/O under vol->lock. commit_lock held.
 */
static int commit_locked(struct nvmefs_vol *vol, bool flush, bool clean, bool idle_skip)
{
	struct nvmefs_journal *j = &vol->j;
	struct nvmefs_mark mark = {0};
	struct nvmefs_store_stats st;
	uint8_t *payload = NULL;
	struct nvmefs_pfree *pf;
	size_t plen, npf;
	uint64_t gen;
	int ret;

	if ((ret = nvmefs_journal_error(vol)))
		return ret;
	pthread_mutex_lock(&vol->lock);
	if (vol->kv_err) { /* the store misses a record: it must not be flushed */
		ret = vol->kv_err;
		pthread_mutex_unlock(&vol->lock);
		set_error(vol, ret);
		return ret;
	}
	/* The committer's periodic call has nothing to do on an idle volume:
	 * skip even the flushes (an fsync always flushes, for its data). */
	if (idle_skip && !flush && !j->len && !vol->dirty && !j->npf) {
		pthread_mutex_unlock(&vol->lock);
		return 0;
	}
	emit_dirty(vol);
	if (nvmefs_meta_crosscheck_due(vol))
		crosscheck(vol);
	/* What was dirty may leave memory now: its keys are in the store. */
	nvmefs_icache_shrink(vol, 1024);
	gen = j->open_gen++;
	payload = j->buf;
	plen = j->len;
	pf = j->pf;
	npf = j->npf;
	j->buf = NULL;
	j->len = j->cap = 0;
	j->pf = NULL;
	j->npf = j->pfcap = 0;
	nvmefs_store_stats(vol->store, &st);
	if (j->since_flush + txn_span(vol, plen) > vol->label.journal_size / 2 ||
	    st.mem_bytes > FLUSH_MEM_BYTES)
		flush = true;
	if (flush) {
		/* The memtable now holds every record up to this transaction's
		 * last: replay of what comes after starts past it. */
		txn_end(vol, plen, &mark.replay, &mark.replay_seq);
		mark.next_ino = vol->next_ino;
		mark.ninodes = vol->ninodes;
		mark.meta_bytes = vol->meta_bytes;
		ret = nvmefs_store_freeze(vol->store, &mark);
	}
	pthread_mutex_unlock(&vol->lock);
	if (!ret)
		ret = flush_data(vol);
	if (!ret && plen)
		ret = write_txn(vol, payload, plen);
	if (!ret && flush) {
		if (j->head != mark.replay || j->next_seq != mark.replay_seq)
			ret = -EIO; /* txn_end and write_txn disagree: a bug */
		else
			ret = write_flush(vol, &mark, clean);
	}
	free(payload);
	if (ret) {
		free(pf);
		set_error(vol, ret);
		return ret;
	}
	pthread_mutex_lock(&vol->lock);
	for (size_t i = 0; i < npf; i++) {
		nvmefs_alloc_put(vol, pf[i].dev, pf[i].off, pf[i].len);
		vol->pending_bytes -= pf[i].len;
	}
	pthread_mutex_unlock(&vol->lock);
	free(pf);
	pthread_mutex_lock(&j->state_lock);
	if (gen > j->durable_gen)
		j->durable_gen = gen;
	pthread_cond_broadcast(&j->state_cond);
	pthread_mutex_unlock(&j->state_lock);
	return 0;
}

static int commit(struct nvmefs_vol *vol, bool idle_skip)
{
	struct nvmefs_journal *j = &vol->j;
	uint64_t want;
	int ret = 0;

	pthread_mutex_lock(&vol->lock);
	want = j->open_gen;
	pthread_mutex_unlock(&vol->lock);
	pthread_mutex_lock(&j->commit_lock);
	pthread_mutex_lock(&j->state_lock);
	/* Someone else's commit since we looked may already cover us. */
	if (j->durable_gen >= want)
		want = 0;
	pthread_mutex_unlock(&j->state_lock);
	if (want)
		ret = commit_locked(vol, false, false, idle_skip);
	pthread_mutex_unlock(&j->commit_lock);
	return ret;
}

int nvmefs_journal_commit(struct nvmefs_vol *vol)
{
	nvmefs_before_wait();
	return commit(vol, false);
}

int nvmefs_journal_checkpoint(struct nvmefs_vol *vol, bool clean)
{
	int ret;

	pthread_mutex_lock(&vol->j.commit_lock);
	ret = commit_locked(vol, true, clean, false);
	pthread_mutex_unlock(&vol->j.commit_lock);
	return ret;
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
		ret = nvmefs_vol_pio(vol, 0, true, journal_base(vol), zero, NVMEFS_BLOCK);
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
 * works on first (docs/METADATA-V2-STEP4.md §2), then apply. An inode the
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

		ret = nvmefs_vol_pio(vol, 0, false, journal_base(vol) + phys, buf, NVMEFS_BLOCK);
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
			ret = nvmefs_vol_pio(vol, 0, false, journal_base(vol) + phys + NVMEFS_BLOCK,
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
	ret = nvmefs_vol_pio(vol, 0, false, journal_base(vol) + phys, buf,
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
	 * (commit_locked flushes before passing that, txn_span). */
	uint64_t end = j->tail + jsize / 2;

	for (uint64_t pos = j->head + NVMEFS_BLOCK; pos < end;) {
		uint64_t phys = pos % jsize;
		size_t n = jsize - phys < chunk ? jsize - phys : chunk;
		int ret;

		if (n > end - pos)
			n = (size_t)(end - pos);
		ret = nvmefs_vol_pio(vol, 0, false, journal_base(vol) + phys, buf, n);
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
	/* A mark without meta_bytes is an older committer's: its estimate
	 * is rebuilt by the whole load. */
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

/* ---- the committer and compactor threads ---- */

/*
 * The compactor: after each flush that added a run, compaction steps
 * until none is due, outside every journal lock (the store serializes
 * them against its flushes). A failed step leaves the store as it was;
 * the metadata stays whole and readable, only larger, so it is logged and
 * retried after the next flush.
 *
 * A thread of its own, not the committer's: a compaction of large runs
 * takes seconds at 10^6 files (1.2 s measured), and while the committer
 * compacted, no commit ran, dirty inodes piled up (they cannot leave the
 * cache) and the next commit logged them all under the metadata lock, a
 * create's stall of 100 ms.
 */
static void *compactor(void *arg)
{
	struct nvmefs_vol *vol = arg;
	struct nvmefs_journal *j = &vol->j;

	/* Background work: the CPU goes to the operations first, compaction
	 * takes what they leave (RocksDB's low-priority pool does the same).
	 * A thread's own nice value, on Linux. Failing it changes nothing. */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), COMPACT_NICE))
		nvmefs_debug("compactor: setpriority: %s", strerror(errno));
	pthread_mutex_lock(&j->state_lock);
	while (!j->stop) {
		int ret;

		if (!j->compact_due) {
			pthread_cond_wait(&j->compact_cond, &j->state_lock);
			continue;
		}
		j->compact_due = false;
		pthread_mutex_unlock(&j->state_lock);
		if (!nvmefs_journal_error(vol)) {
			while ((ret = nvmefs_store_compact(vol->store, false)) == 1) {
				if (atomic_load_explicit(&j->stop_compact, memory_order_relaxed))
					break;
			}
			if (ret < 0)
				nvmefs_warn("%s: metadata: compacting the run area failed: %s",
					    nvmefs_meta_where(vol), strerror(-ret));
		}
		pthread_mutex_lock(&j->state_lock);
	}
	pthread_mutex_unlock(&j->state_lock);
	return NULL;
}

static void *committer(void *arg)
{
	struct nvmefs_vol *vol = arg;
	struct nvmefs_journal *j = &vol->j;

	pthread_mutex_lock(&j->state_lock);
	while (!j->stop) {
		struct timespec ts;

		if (!j->kick) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += j->interval_ms / 1000;
			ts.tv_nsec += (long)(j->interval_ms % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&j->state_cond, &j->state_lock, &ts);
		}
		if (j->stop)
			break;
		j->kick = false;
		pthread_mutex_unlock(&j->state_lock);
		commit(vol, true);
		pthread_mutex_lock(&j->state_lock);
	}
	pthread_mutex_unlock(&j->state_lock);
	return NULL;
}

int nvmefs_journal_start(struct nvmefs_vol *vol)
{
	struct nvmefs_journal *j = &vol->j;
	int ret = pthread_create(&j->thread, NULL, committer, vol);

	if (ret)
		return -ret;
	pthread_setname_np(j->thread, "nvmefs-commit");
	ret = pthread_create(&j->cthread, NULL, compactor, vol);
	if (ret) {
		pthread_mutex_lock(&j->state_lock);
		j->stop = true;
		pthread_cond_broadcast(&j->state_cond);
		pthread_mutex_unlock(&j->state_lock);
		pthread_join(j->thread, NULL);
		j->stop = false;
		return -ret;
	}
	pthread_setname_np(j->cthread, "nvmefs-compact");
	j->running = true;
	return 0;
}

void nvmefs_journal_stop(struct nvmefs_vol *vol)
{
	struct nvmefs_journal *j = &vol->j;

	if (!j->running)
		return;
	atomic_store(&j->stop_compact, true);
	pthread_mutex_lock(&j->state_lock);
	j->stop = true;
	pthread_cond_broadcast(&j->state_cond);
	pthread_cond_broadcast(&j->compact_cond);
	pthread_mutex_unlock(&j->state_lock);
	pthread_join(j->thread, NULL);
	pthread_join(j->cthread, NULL);
	j->running = false;
}

// SPDX-License-Identifier: MIT
/*
 * The metadata journal (docs/FORMAT.md), its running side: records of live
 * operations collect in an open transaction; a commit flushes the data
 * members (so no record reaches data that is not durable), appends the
 * transaction to the ring on member 0 and flushes it. Every record applied
 * is also written through into the store's memtable (kv.c); when the ring
 * is half used, or the memtable large, the commit also flushes the store:
 * the memtable, frozen at the transaction, becomes a sorted run on the run
 * area, and the manifest naming it moves the replay start past the
 * transaction (docs/ARCHITECTURE.md, "The write-through and the commit"). Released space becomes
 * allocatable once the transaction releasing it is durable. A committer thread commits every
 * interval, and a compactor thread compacts the store after a flush; fsync commits at once. A
 * failed metadata write makes the volume read-only for good (until remount): better than a journal
 * with a hole in it.
 *
 * Its sibling journal_load.c makes and opens the journal and the store:
 * mkfs's format, the mount's load and replay, and the orphans' reclaim
 * after it.
 */
#include "fs_i.h"
#include "alloc_i.h"
#include "behind_i.h"
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
#define COMPACT_NICE 10 /* the compactor's nice value */

uint64_t nvmefs_journal_base(const struct nvmefs_vol *vol)
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
 * last flush within half the ring (journal_load.c's later_txn relies on
 * it). */
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
		ret = nvmefs_vol_pio(vol, 0, true, nvmefs_journal_base(vol) + phys, buf,
				     NVMEFS_BLOCK);
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
	ret = nvmefs_vol_pio(vol, 0, true, nvmefs_journal_base(vol) + phys, buf, bytes);
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

/* The unlinked inodes whose free waited for the writes answered early
 * (nvmefs_data_free_inode, nvmefs_behind_defer_free): a commit that holds
 * the gate frees them. meta held. */
static void free_deferred(struct nvmefs_vol *vol)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE_FREE};

	for (size_t i = 0; i < vol->ndeferred; i++) {
		struct nvmefs_inode *in = vol->deferred[i];

		/* Opened again by a file handle meanwhile: its last close frees it. */
		if (!in->dead && !in->nlink && !in->opens) {
			r.ino.ino = in->ino;
			if (nvmefs_journal_log(vol, &r))
				nvmefs_warn("inode %llu: could not free; it is reclaimed at the "
					    "next mount",
					    (unsigned long long)in->ino);
		}
		nvmefs_inode_put(vol, in);
	}
	vol->ndeferred = 0;
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
	/* What is gathered below holds no size whose data is still on its
	 * way to the devices: writes answered early end first (data_i.h). */
	if (!nvmefs_behind_hold(vol))
		return -EAGAIN;
	pthread_mutex_lock(&vol->lock);
	if (vol->kv_err) { /* the store misses a record: it must not be flushed */
		ret = vol->kv_err;
		pthread_mutex_unlock(&vol->lock);
		nvmefs_behind_release(vol);
		set_error(vol, ret);
		return ret;
	}
	/* The writes answered early have ended: the space of the files that
	 * were unlinked meanwhile can go. */
	free_deferred(vol);
	/* The committer's periodic call has nothing to do on an idle volume:
	 * skip even the flushes (an fsync always flushes, for its data). */
	if (idle_skip && !flush && !j->len && !vol->dirty && !j->npf) {
		pthread_mutex_unlock(&vol->lock);
		nvmefs_behind_release(vol);
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
	nvmefs_behind_release(vol);
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
	/* An engine completion thread (reclaim_pending's commit, after an
	 * edge read) must not wait for a commit that may be waiting for
	 * writes only it completes (nvmefs_behind_hold): it commits only
	 * when nobody else does. */
	if (nvmefs_engine_reaping()) {
		if (pthread_mutex_trylock(&j->commit_lock))
			return -EAGAIN;
	} else {
		pthread_mutex_lock(&j->commit_lock);
	}
	pthread_mutex_lock(&j->state_lock);
	/* Someone else's commit since we looked may already cover us. */
	if (j->durable_gen >= want)
		want = 0;
	pthread_mutex_unlock(&j->state_lock);
	/* Shut down: the last commit was the shutdown's, under this lock. */
	if (atomic_load(&vol->shut_down))
		ret = -EIO;
	else if (want)
		ret = commit_locked(vol, false, false, idle_skip);
	pthread_mutex_unlock(&j->commit_lock);
	return ret;
}

int nvmefs_journal_commit(struct nvmefs_vol *vol)
{
	nvmefs_before_wait();
	return commit(vol, false);
}

int nvmefs_journal_fsync(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	int ret = nvmefs_journal_commit(vol), err = nvmefs_behind_error(in);

	return ret ? ret : err;
}

int nvmefs_journal_checkpoint(struct nvmefs_vol *vol, bool clean)
{
	int ret;

	pthread_mutex_lock(&vol->j.commit_lock);
	ret = atomic_load(&vol->shut_down) ? -EIO : commit_locked(vol, true, clean, false);
	pthread_mutex_unlock(&vol->j.commit_lock);
	return ret;
}

int nvmefs_journal_shutdown(struct nvmefs_vol *vol, bool commit)
{
	int ret = 0;

	nvmefs_journal_stop(vol);
	/* Under the commit lock, so that no commit runs between the last one
	 * and the fence; those waiting for the lock then see shut_down. A
	 * commit, not a flush of the store: the next mount replays it, as
	 * after a crash right after an fsync. */
	pthread_mutex_lock(&vol->j.commit_lock);
	if (commit)
		ret = commit_locked(vol, false, false, false);
	nvmefs_engine_fence(vol->eng);
	pthread_mutex_unlock(&vol->j.commit_lock);
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
 * takes seconds at 10^6 files (1.2 s measured); in the committer, no
 * commit would run meanwhile, dirty inodes would pile up (they cannot
 * leave the cache) and the next commit would log them all under the
 * metadata lock, a create's stall of 100 ms.
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
	int ret;

	/* Again after nvmefs_journal_stop: a remount read-write. */
	j->stop = false;
	atomic_store(&j->stop_compact, false);
	ret = pthread_create(&j->thread, NULL, committer, vol);

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

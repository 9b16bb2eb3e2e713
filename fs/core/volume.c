// SPDX-License-Identifier: MIT
/*
 * A volume: its members in label order, their labels checked against each
 * other, the metadata loaded (the store's runs + journal replay), free
 * space taken from the store's FREE keys, and orphans from a crash
 * reclaimed. Also the mkfs side: the run area, the free space and the
 * root, then the labels. Members may be given in any order; a
 * missing, duplicated, foreign or mismatched member is refused by name.
 */
#include "fs_i.h"
#include "alloc_i.h"
#include "behind_i.h"
#include "holder_i.h"
#include "icache_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "data_i.h"
#include "prefetch_i.h"
#include "util_i.h"
#include "volume_i.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvmefs/util.h"

struct nvmefs_vol *nvmefs_vol_create(struct nvmefs_devset *set, unsigned ndevs,
				     const struct nvmefs_vol_opts *opts)
{
	struct nvmefs_vol *vol = calloc(1, sizeof(*vol));

	if (!vol)
		return NULL;
	vol->set = set;
	vol->ndevs = set ? set->count : ndevs;
	if (opts)
		vol->opts = *opts;
	pthread_mutex_init(&vol->lock, NULL);
	pthread_mutex_init(&vol->dio_lock, NULL);
	pthread_mutex_init(&vol->behind_lock, NULL);
	pthread_cond_init(&vol->behind_cond, NULL);
	pthread_mutex_init(&vol->remount_lock, NULL);
	pthread_cond_init(&vol->dio_cond, NULL);
	pthread_cond_init(&vol->load_cond, NULL);
	pthread_cond_init(&vol->push_cond, NULL);
	vol->resident = true; /* until a mount chooses otherwise (journal_load.c) */
	if (nvmefs_meta_init(vol) || nvmefs_journal_init(vol)) {
		nvmefs_meta_exit(vol);
		free(vol);
		return NULL;
	}
	return vol;
}

void nvmefs_vol_destroy(struct nvmefs_vol *vol)
{
	nvmefs_meta_exit(vol);
	nvmefs_lookups_exit(vol);
	nvmefs_journal_exit(vol);
	for (unsigned d = 0; d < NVMEFS_MAX_DEVICES; d++) {
		nvmefs_freemap_exit(&vol->free[d]);
		nvmefs_freemap_exit(&vol->dfree[d]);
	}
	pthread_mutex_destroy(&vol->lock);
	pthread_cond_destroy(&vol->dio_cond);
	pthread_cond_destroy(&vol->load_cond);
	pthread_cond_destroy(&vol->push_cond);
	pthread_mutex_destroy(&vol->dio_lock);
	pthread_cond_destroy(&vol->behind_cond);
	free(vol->deferred);
	pthread_mutex_destroy(&vol->behind_lock);
	pthread_mutex_destroy(&vol->remount_lock);
	free(vol);
}

void nvmefs_vol_set_geometry(struct nvmefs_vol *vol, const struct nvmefs_label *labels)
{
	vol->label = labels[0];
	vol->total_bytes = 0;
	for (unsigned i = 0; i < vol->ndevs; i++) {
		vol->data_start[i] = labels[i].data_start;
		vol->data_end[i] = labels[i].data_end;
		vol->total_bytes += labels[i].data_end - labels[i].data_start;
	}
	/* meta_bytes counts journal records (format.h); the same metadata takes about
	 * 1.35 times that as keys and values in runs, and a compaction may
	 * rewrite every run (a level-0 merge into a level 1 that holds them
	 * all, on a small area) beside the live ones and a flush's run: 9/32
	 * of the run area keeps the live runs under about 40% of it. */
	vol->meta_cap = vol->label.runs_size / 32 * 9;
}

/* Read a member's label: the primary, else the backup in its last block. */
static int read_label(struct nvmefs_vol *vol, unsigned dev, struct nvmefs_label *l)
{
	struct nvmefs_dev *d = &vol->set->devs[dev];
	uint64_t last = (d->size / NVMEFS_BLOCK - 1) * NVMEFS_BLOCK;
	void *blk = nvmefs_aligned_alloc(NVMEFS_BLOCK);
	int ret, r1, r2 = -EINVAL;
	unsigned version;

	if (!blk)
		return -ENOMEM;
	ret = nvmefs_vol_pio(vol, dev, false, 0, blk, NVMEFS_BLOCK);
	if (ret)
		goto out;
	r1 = nvmefs_label_decode(l, blk);
	version = nvmefs_label_version(blk);
	if (r1) {
		ret = nvmefs_vol_pio(vol, dev, false, last, blk, NVMEFS_BLOCK);
		if (ret)
			goto out;
		r2 = nvmefs_label_decode(l, blk);
		if (r2 == -EPROTO || !version)
			version = nvmefs_label_version(blk);
		if (!r2)
			nvmefs_warn("%s: primary label damaged, using the backup label", d->path);
	}
	if (r1 && r2) {
		ret = (r1 == -EPROTO || r2 == -EPROTO) ? -EPROTO : -ENODEV;
		if (ret != -EPROTO)
			nvmefs_err("%s: not an nvmefs member (no valid label, primary or backup)",
				   d->path);
		else if (version < NVMEFS_FORMAT_VERSION)
			nvmefs_err(
				"%s: an nvmefs volume of format version %u, which this release "
				"does not read (it reads version %u: metadata in sorted runs). "
				"To move the data: mount it with the nvmefs release that made it, "
				"copy the files out, run mkfs.nvmefs on the members and copy them "
				"back",
				d->path, version, NVMEFS_FORMAT_VERSION);
		else
			nvmefs_err("%s: an nvmefs volume of format version %u, newer than this "
				   "release (version %u): use a newer nvmefs",
				   d->path, version, NVMEFS_FORMAT_VERSION);
	}
out:
	free(blk);
	return ret;
}

/* "PATH is member I, ..." for the members given, in buf (cut short with
 * "..." when long). */
static const char *given_list(const struct nvmefs_devset *set, const struct nvmefs_label *labels,
			      char buf[1024])
{
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < set->count && used < 1024; i++) {
		int n = snprintf(buf + used, 1024 - used, "%s%s is member %u", i ? ", " : "",
				 set->devs[i].path, labels[i].index);

		used += n > 0 ? (size_t)n : 0;
	}
	if (used >= 1024)
		memcpy(buf + 1024 - 4, "...", 4);
	return buf;
}

/* Check the members' labels against each other and put the set in label
 * order. */
static int check_members(struct nvmefs_vol *vol, struct nvmefs_label *labels)
{
	struct nvmefs_devset *set = vol->set;
	const struct nvmefs_label *l0 = &labels[0];
	struct nvmefs_dev by_index[NVMEFS_MAX_DEVICES];
	struct nvmefs_label sorted[NVMEFS_MAX_DEVICES];
	int owner[NVMEFS_MAX_DEVICES];
	char u0[37], u1[37], who[1024];

	for (unsigned i = 0; i < NVMEFS_MAX_DEVICES; i++)
		owner[i] = -1;
	for (unsigned i = 0; i < set->count; i++) {
		const struct nvmefs_label *l = &labels[i];
		const char *path = set->devs[i].path;

		if (memcmp(l->uuid, l0->uuid, 16)) {
			nvmefs_uuid_str(l->uuid, u1);
			nvmefs_uuid_str(l0->uuid, u0);
			nvmefs_err("%s: belongs to another volume (UUID %s; %s is in %s)", path, u1,
				   set->devs[0].path, u0);
			return -EXDEV;
		}
		if (l->count != l0->count || l->chunk_size != l0->chunk_size ||
		    memcmp(l->dev_size, l0->dev_size, sizeof(l->dev_size)) ||
		    l->meta_off != l0->meta_off || l->meta_size != l0->meta_size) {
			nvmefs_err("%s: label disagrees with %s's about the volume's shape", path,
				   set->devs[0].path);
			return -EUCLEAN;
		}
		if (owner[l->index] >= 0) {
			nvmefs_err("%s: claims to be member %u, as does %s (a copied member?)",
				   path, l->index, set->devs[owner[l->index]].path);
			return -EEXIST;
		}
		owner[l->index] = (int)i;
		if (set->devs[i].size < l->dev_size[l->index]) {
			nvmefs_err("%s: member %u is %llu bytes but was formatted as %llu "
				   "(truncated or the wrong device)",
				   path, l->index, (unsigned long long)set->devs[i].size,
				   (unsigned long long)l->dev_size[l->index]);
			return -EUCLEAN;
		}
	}
	if (set->count != l0->count) {
		for (unsigned k = 0; k < l0->count; k++) {
			if (owner[k] < 0) {
				nvmefs_err("volume has %u members, %u given: member %u is missing "
					   "(given: %s)",
					   l0->count, set->count, k, given_list(set, labels, who));
				return -ENODEV;
			}
		}
	}
	for (unsigned k = 0; k < set->count; k++) {
		by_index[k] = set->devs[owner[k]];
		sorted[k] = labels[owner[k]];
	}
	memcpy(set->devs, by_index, set->count * sizeof(*by_index));
	memcpy(labels, sorted, set->count * sizeof(*sorted));
	return 0;
}

/* Reclaim files unlinked while open before a crash. */
static int reclaim_orphans(struct nvmefs_vol *vol)
{
	size_t n = 0;
	int ret = nvmefs_journal_reclaim_orphans(vol, &n);

	if (!ret && n) {
		nvmefs_info("reclaimed %zu file(s) unlinked while open before the last shutdown",
			    n);
		ret = nvmefs_journal_commit(vol);
	}
	return ret;
}

int nvmefs_vol_open(struct nvmefs_vol **out, const char *const *paths, unsigned n,
		    const struct nvmefs_vol_opts *opts)
{
	struct nvmefs_devset_opts dopts = {.read_only = opts && opts->read_only,
					   .busy_wait_ms = opts ? opts->busy_wait_ms : 0,
					   .busy_quiet_ms = NVMEFS_BUSY_QUIET_MS,
					   .holder = nvmefs_holder_state};
	struct nvmefs_label labels[NVMEFS_MAX_DEVICES];
	struct nvmefs_devset *set;
	struct nvmefs_vol *vol;
	int ret;

	if (n > NVMEFS_MAX_DEVICES) {
		nvmefs_err("%u devices given, at most %u supported", n, NVMEFS_MAX_DEVICES);
		return -E2BIG;
	}
	ret = nvmefs_devset_open(&set, paths, n, &dopts);
	if (ret)
		return ret;
	vol = nvmefs_vol_create(set, 0, opts);
	if (!vol) {
		nvmefs_devset_close(set);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		ret = read_label(vol, i, &labels[i]);
		if (ret)
			goto err;
	}
	ret = check_members(vol, labels);
	if (ret)
		goto err;
	nvmefs_vol_set_geometry(vol, labels);
	ret = nvmefs_journal_load(vol);
	if (ret)
		goto err;
	if (vol->opts.check) { /* the checker rebuilds free space itself */
		*out = vol;
		return 0;
	}
	ret = nvmefs_alloc_start(vol); /* from the FREE keys, not the extents */
	if (ret)
		goto err;
	if (!vol->opts.read_only) {
		ret = reclaim_orphans(vol);
		if (ret)
			goto err;
	}
	*out = vol;
	return 0;
err:
	nvmefs_vol_destroy(vol);
	nvmefs_devset_close(set);
	return ret;
}

int nvmefs_vol_start(struct nvmefs_vol *vol)
{
	struct nvmefs_engine_opts eo = {.queue_depth = vol->opts.queue_depth};
	struct nvmefs_bufpool_opts po = {
		.buf_size = NVMEFS_POOL_BUF,
		.max_bytes = vol->opts.pool_bytes ? vol->opts.pool_bytes : NVMEFS_POOL_DEFAULT,
		.numa_node = nvmefs_devset_home_node(vol->set),
	};
	int ret;

	vol->buf_size = po.buf_size;
	ret = nvmefs_engine_create(&vol->eng, vol->set, &eo);
	if (ret)
		return ret;
	ret = nvmefs_bufpool_create(&vol->pool, &po);
	if (ret)
		goto err_engine;
	{
		struct nvmefs_bufpool_stats st;

		nvmefs_bufpool_stats(vol->pool, &st);
		vol->pf_max_bufs = (unsigned)(st.max_bufs / 4);
	}
	ret = nvmefs_journal_start(vol);
	if (ret)
		goto err_pool;
	return 0;
err_pool:
	nvmefs_bufpool_destroy(vol->pool);
	vol->pool = NULL;
err_engine:
	nvmefs_engine_destroy(vol->eng);
	vol->eng = NULL;
	return ret;
}

/* Debug builds: every operation is over, so none may have kept an inode
 * (fs/core/icache.c). After the final flush, so that a failure here
 * loses nothing. */
static void check_idle(struct nvmefs_vol *vol)
{
#ifndef NDEBUG
	int bad;

	pthread_mutex_lock(&vol->lock);
	bad = nvmefs_icache_check(vol, true);
	pthread_mutex_unlock(&vol->lock);
	assert(bad == 0);
#else
	(void)vol;
#endif
}

int nvmefs_vol_close(struct nvmefs_vol *vol)
{
	int ret = 0;

	if (!vol)
		return 0;
	nvmefs_data_drain(vol);
	/* Waits for the read-ahead windows' reads in flight: after it, and
	 * once the journal has stopped, nothing is submitted to the members. */
	nvmefs_prefetch_forget_all(vol);
	nvmefs_journal_stop(vol);
	/* Remounted read-only: flushed clean then, and changed nothing since.
	 * Shut down: nothing more may be written; the next mount replays. */
	if (!vol->opts.read_only && !atomic_load(&vol->ro_remounted) &&
	    !atomic_load(&vol->shut_down) && !nvmefs_journal_error(vol)) {
		ret = nvmefs_journal_checkpoint(vol, true);
		if (ret)
			nvmefs_err("final flush of the metadata failed: %s; the journal still "
				   "holds the last committed state",
				   strerror(-ret));
	}
	/* Nothing more is read or written: let go of the members before the
	 * rest of the teardown (the aio contexts' destruction and the pool's
	 * unmapping: 30-40 ms), for whoever is waiting to open them after an
	 * umount (NVMEFS_BUSY_QUIET_MS). */
	nvmefs_devset_release(vol->set);
	pthread_mutex_lock(&vol->lock);
	nvmefs_behind_drop_deferred(vol); /* left by a shutdown: orphans now */
	pthread_mutex_unlock(&vol->lock);
	check_idle(vol);
	nvmefs_engine_destroy(vol->eng);
	nvmefs_bufpool_destroy(vol->pool);
	nvmefs_devset_close(vol->set);
	nvmefs_vol_destroy(vol);
	return ret;
}

int nvmefs_vol_remount(struct nvmefs_vol *vol, bool ro, int atime)
{
	int ret = 0;

	pthread_mutex_lock(&vol->remount_lock);
	if (atomic_load(&vol->shut_down)) {
		ret = -EIO; /* for good: only an unmount follows */
	} else if (vol->opts.read_only) {
		/* Mounted -o ro: nothing runs that writes, nothing to start. */
		ret = ro ? 0 : -EROFS;
	} else if (ro && !atomic_load(&vol->ro_remounted)) {
		/* Changes are refused from here on (nvmefs_ns_read_only); the
		 * kernel, remounted first, sends none. Those logged so far go
		 * out with one clean flush, after which the committer and the
		 * compactor, stopped, write nothing more. */
		atomic_store(&vol->ro_remounted, true);
		nvmefs_journal_stop(vol);
		ret = nvmefs_journal_checkpoint(vol, true);
		if (ret)
			nvmefs_err("remount read-only: flushing the metadata failed: %s",
				   strerror(-ret));
		else
			nvmefs_info("remounted read-only: the metadata is flushed; nothing is "
				    "written to the members until a remount read-write");
	} else if (!ro && atomic_load(&vol->ro_remounted)) {
		ret = nvmefs_journal_error(vol) ? -EROFS : nvmefs_journal_start(vol);
		if (!ret) {
			atomic_store(&vol->ro_remounted, false);
			nvmefs_info("remounted read-write");
		}
	}
	if (!ret && atime >= 0)
		__atomic_store_n(&vol->opts.atime, (unsigned)atime, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&vol->remount_lock);
	return ret;
}

int nvmefs_vol_shutdown(struct nvmefs_vol *vol)
{
	bool commit;
	int ret;

	pthread_mutex_lock(&vol->remount_lock);
	if (atomic_load(&vol->shut_down)) {
		pthread_mutex_unlock(&vol->remount_lock);
		return 0;
	}
	/* A volume that writes nothing (mounted -o ro, remounted read-only,
	 * or read-only after a metadata write error) has nothing to commit. */
	commit = !vol->opts.read_only && !atomic_load(&vol->ro_remounted) &&
		 !nvmefs_journal_error(vol);
	/* The doors refuse from here on; what they took before either ends
	 * before the fence or fails at it, as at a crash. */
	atomic_store(&vol->shut_down, true);
	ret = nvmefs_journal_shutdown(vol, commit);
	pthread_mutex_unlock(&vol->remount_lock);
	if (ret)
		nvmefs_err("shut down: the last commit failed (%s); the journal holds the "
			   "state of the last sync; nothing more is written to the members",
			   strerror(-ret));
	else
		nvmefs_warn("shut down (FS_IOC_SHUTDOWN): %s; nothing more is written to the "
			    "members, and every request but statfs answers EIO until the unmount",
			    commit ? "what was logged is committed" : "nothing to commit");
	return ret;
}

void nvmefs_vol_abandon(struct nvmefs_vol *vol)
{
	if (!vol)
		return;
	nvmefs_prefetch_forget_all(vol);
	nvmefs_journal_stop(vol);
	nvmefs_engine_destroy(vol->eng);
	nvmefs_bufpool_destroy(vol->pool);
	nvmefs_devset_close(vol->set);
	nvmefs_vol_destroy(vol);
}

/* ---- mkfs ---- */

int nvmefs_vol_format(struct nvmefs_devset *set, const struct nvmefs_label *labels, uint32_t uid,
		      uint32_t gid)
{
	struct nvmefs_vol *vol = nvmefs_vol_create(set, 0, NULL);
	void *blk = nvmefs_aligned_alloc(NVMEFS_BLOCK);
	struct nvmefs_rec root = {.type = NVMEFS_REC_INODE};
	struct timespec now;
	int ret = -ENOMEM;

	if (!vol || !blk)
		goto out;
	nvmefs_vol_set_geometry(vol, labels);
	nvmefs_timespec_now(&now);
	root.inode.ino = NVMEFS_ROOT_INO;
	root.inode.mode = S_IFDIR | 0755;
	root.inode.uid = uid;
	root.inode.gid = gid;
	root.inode.nlink = 2;
	root.inode.atime = root.inode.mtime = root.inode.ctime = root.inode.crtime =
		(struct nvmefs_time){now.tv_sec, (uint32_t)now.tv_nsec};
	ret = nvmefs_journal_format(vol);
	if (ret)
		goto out;
	vol->replaying = true;
	ret = nvmefs_alloc_format(vol); /* every data area free: a FREE key each */
	if (!ret)
		ret = nvmefs_meta_apply(vol, &root);
	vol->replaying = false;
	if (!ret)
		ret = nvmefs_journal_checkpoint(vol, true);
	if (ret)
		goto out;
	/* Labels last: until they are written the members are not a volume. */
	for (unsigned i = 0; i < set->count && !ret; i++) {
		uint64_t last = labels[i].dev_size[i] - NVMEFS_BLOCK;

		nvmefs_label_encode(&labels[i], blk);
		ret = nvmefs_vol_pio(vol, i, true, last, blk, NVMEFS_BLOCK);
		if (!ret)
			ret = nvmefs_vol_pio(vol, i, true, 0, blk, NVMEFS_BLOCK);
		if (!ret)
			ret = nvmefs_dev_flush(&set->devs[i]);
	}
out:
	free(blk);
	if (vol)
		nvmefs_vol_destroy(vol);
	return ret;
}

// SPDX-License-Identifier: MIT
/*
 * Writes answered before the devices complete them (NVMEFS_WRITE_BEHIND,
 * data_i.h; docs/DATAPATH.md, "Writes answered early"): the count in
 * flight, volume-wide and per inode, under vol->behind_lock; the gate a
 * commit closes while it gathers its records, so that no durable size
 * covers data still on its way; a failure kept for the file's next fsync;
 * and the unlinked inodes whose free waits for the next commit.
 *
 * It logs nothing and calls nothing of the data path or the journal: both
 * call it (data_io.c counts its writes in and out, journal.c holds the
 * gate and frees what waited), so that neither calls the other upwards.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "fs_i.h"
#include "behind_i.h"
#include "icache_i.h"
#include "util_i.h"

#include "nvmefs/engine.h"

/* Free space below which no write is answered early (nvmefs_behind_begin). */
#define BEHIND_FREE_MIN (64ull << 20)

/*
 * Not when free space is low: a write that finds none then commits to
 * reclaim what was released (reclaim_pending, data.c), and that commit
 * waits for these writes, which an engine completion thread cannot do
 * (nvmefs_behind_hold): it then gets ENOSPC, rarer this way (a
 * member or the metadata area may still fill first).
 */
bool nvmefs_behind_begin(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	bool ok;

	pthread_mutex_lock(&vol->lock);
	ok = vol->free_bytes >= BEHIND_FREE_MIN;
	pthread_mutex_unlock(&vol->lock);
	if (!ok)
		return false;
	pthread_mutex_lock(&vol->behind_lock);
	ok = !vol->behind_gate && vol->behind_n < NVMEFS_BEHIND_MAX;
	if (ok) {
		vol->behind_n++;
		in->behind_n++;
	}
	pthread_mutex_unlock(&vol->behind_lock);
	return ok;
}

/* Its failure is kept for the file's next fsync, then a waiting commit
 * may go on. */
void nvmefs_behind_finish(struct nvmefs_vol *vol, struct nvmefs_inode *in, ssize_t res)
{
	int none = 0;

	if (res < 0) {
		atomic_compare_exchange_strong(&in->behind_err, &none, (int)res);
		atomic_fetch_add_explicit(&vol->stats.behind_errors, 1, memory_order_relaxed);
	}
	pthread_mutex_lock(&vol->behind_lock);
	vol->behind_n--;
	in->behind_n--;
	if (!vol->behind_n && vol->behind_waiters)
		pthread_cond_broadcast(&vol->behind_cond);
	pthread_mutex_unlock(&vol->behind_lock);
}

bool nvmefs_behind_hold(struct nvmefs_vol *vol)
{
	pthread_mutex_lock(&vol->behind_lock);
	if (vol->behind_n && nvmefs_engine_reaping()) {
		/* Some of them may be its own device's, which only it completes. */
		pthread_mutex_unlock(&vol->behind_lock);
		return false;
	}
	vol->behind_gate = true;
	while (vol->behind_n) {
		/* An io_uring queue's leader hands its ring on first: the
		 * writes' completions may be waiting on it. */
		pthread_mutex_unlock(&vol->behind_lock);
		nvmefs_before_wait();
		pthread_mutex_lock(&vol->behind_lock);
		if (!vol->behind_n)
			break;
		vol->behind_waiters++;
		pthread_cond_wait(&vol->behind_cond, &vol->behind_lock);
		vol->behind_waiters--;
	}
	pthread_mutex_unlock(&vol->behind_lock);
	return true;
}

bool nvmefs_behind_busy(struct nvmefs_vol *vol, const struct nvmefs_inode *in)
{
	unsigned n;

	pthread_mutex_lock(&vol->behind_lock); /* after meta, never before */
	n = in->behind_n;
	pthread_mutex_unlock(&vol->behind_lock);
	return n;
}

int nvmefs_behind_defer_free(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	if (nvmefs_grow(&vol->deferred, &vol->deferred_cap, vol->ndeferred + 1,
			sizeof(*vol->deferred)))
		return -ENOMEM;
	in->refs++;
	vol->deferred[vol->ndeferred++] = in;
	return 0;
}

void nvmefs_behind_drop_deferred(struct nvmefs_vol *vol)
{
	for (size_t i = 0; i < vol->ndeferred; i++)
		nvmefs_inode_put(vol, vol->deferred[i]);
	vol->ndeferred = 0;
}

void nvmefs_behind_release(struct nvmefs_vol *vol)
{
	pthread_mutex_lock(&vol->behind_lock);
	vol->behind_gate = false;
	pthread_mutex_unlock(&vol->behind_lock);
}

int nvmefs_behind_error(struct nvmefs_inode *in)
{
	return atomic_exchange(&in->behind_err, 0);
}

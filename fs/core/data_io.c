// SPDX-License-Identifier: MIT
/*
 * The data path, its moving side: a READ or WRITE of a file range becomes
 * one engine request (every device at once), into a pool buffer or a
 * caller's (zero-copy when block-aligned). A request in flight (struct dio)
 * holds its range lock from the start until just before its done callback
 * (a read's held callback runs before: nvmefs_data_read_hold). Unaligned
 * writes read-modify-write their edge blocks, which the write's exclusive
 * range lock protects; the edge blocks are read asynchronously, and the
 * write goes on from that read's completion. Over
 * these, the caller's buffers (nvmefs_data_read_into, write_from) and the
 * synchronous nvmefs_data_pread and pwrite.
 *
 * Its sibling data.c plans the I/O (walk, the plan, space reserved and
 * recorded) and holds truncate, fallocate and seek.
 */
#include "fs_i.h"
#include "data_i.h"
#include "behind_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "util_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvmefs/util.h"

#define BLK	      NVMEFS_BLOCK
#define ROUND_DOWN(x) ((x) & ~(uint64_t)(BLK - 1))
#define ROUND_UP(x)   ROUND_DOWN((x) + BLK - 1)

/* ---- asynchronous reads and writes ---- */

/*
 * One read or write in flight. It holds its buffer (a pool buffer whose data
 * area starts NVMEFS_DATA_OFF bytes in, given back at the end unless
 * keep_buf; or the caller's block-aligned buffer, user_area, which stays the
 * caller's) and its range lock from the start until just before the done
 * callback, or until the held callback has returned.
 */
struct dio {
	struct nvmefs_io_req io; /* first: the engine hands this back */
	struct nvmefs_plan pl;
	struct nvmefs_vol *vol;
	struct nvmefs_inode *in;
	struct nvmefs_rl_ent rl;
	uint8_t *buf;		  /* a pool buffer; data area NVMEFS_DATA_OFF in */
	uint8_t *user_area;	  /* else the caller's block-aligned buffer: the area */
	bool locked;		  /* rl is held */
	uint64_t off;		  /* the file range asked for ... */
	size_t len;		  /* ... clamped at EOF for reads */
	const uint8_t *data;	  /* read: where the reply's bytes start */
	bool keep_times;	  /* write: the kernel owns mtime and ctime */
	bool keep_buf;		  /* the buffer is done's to keep (prefetch) */
	bool want_behind;	  /* write: NVMEFS_WRITE_BEHIND asked, may still be */
	bool behind;		  /* write: counted in behind_n, answered early */
	nvmefs_data_done_fn held; /* read: called before the unlock (or NULL) */
	nvmefs_data_done_fn done;
	void *ctx;
};

/*
 * Requests in flight, counted without a lock; the lock and the condition
 * only wake nvmefs_data_drain, and only while one waits (draining): both
 * sides write one flag and then read the other (sequentially consistent),
 * so the drain either sees zero or is woken.
 */
static void dio_count(struct nvmefs_vol *vol, int delta)
{
	unsigned now = atomic_fetch_add(&vol->dio_inflight, (unsigned)delta) + (unsigned)delta;

	if (!now && atomic_load(&vol->draining)) {
		pthread_mutex_lock(&vol->dio_lock);
		pthread_cond_broadcast(&vol->dio_cond);
		pthread_mutex_unlock(&vol->dio_lock);
	}
}

void nvmefs_data_drain(struct nvmefs_vol *vol)
{
	pthread_mutex_lock(&vol->dio_lock);
	atomic_store(&vol->draining, true);
	while (atomic_load(&vol->dio_inflight))
		pthread_cond_wait(&vol->dio_cond, &vol->dio_lock);
	atomic_store(&vol->draining, false);
	pthread_mutex_unlock(&vol->dio_lock);
}

static struct dio *dio_new(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf,
			   bool keep_buf, nvmefs_data_done_fn done, void *ctx)
{
	struct dio *d = calloc(1, sizeof(*d));

	if (!d) {
		done(ctx, -ENOMEM, NULL);
		if (!keep_buf)
			nvmefs_bufpool_put(vol->pool, buf);
		return NULL;
	}
	d->keep_buf = keep_buf;
	d->vol = vol;
	d->in = in;
	atomic_fetch_add_explicit(&in->ios, 1, memory_order_relaxed);
	d->buf = buf;
	d->done = done;
	d->ctx = ctx;
	d->io.priv = d;
	dio_count(vol, 1);
	return d;
}

/* ---- a file's space, after its writes answered early ---- */

int nvmefs_data_free_inode(struct nvmefs_vol *vol, struct nvmefs_inode *in, bool orphan)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE_FREE};
	int ret;

	r.ino.ino = in->ino;
	if (!nvmefs_behind_busy(vol, in))
		return nvmefs_journal_log(vol, &r);
	/* An orphan until the commit that frees it: a crash before that
	 * reclaims it at the next mount. */
	if (orphan) {
		r.type = NVMEFS_REC_ORPHAN_ADD;
		ret = nvmefs_journal_log(vol, &r);
		nvmefs_inode_dirty(vol, in);
		if (ret)
			return ret;
	}
	/* No new one can start: no handle is left to send it. */
	return nvmefs_behind_defer_free(vol, in);
}

/* Unlock, answer, and free everything the dio holds. */
static void dio_finish(struct dio *d, ssize_t res)
{
	struct nvmefs_vol *vol = d->vol;

	if (d->held)
		d->held(d->ctx, res, res > 0 ? d->data : NULL);
	if (d->locked)
		nvmefs_rl_unlock(&d->in->io_lock, &d->rl);
	/* The last use of d->in: once answered, the caller may close the
	 * file, whose handle kept the inode until then. An early-answered
	 * write's last use is nvmefs_behind_finish, after ios is down: the inode is
	 * kept by the dirt the write left (it waits for a commit, which waits
	 * for behind_n) or, unlinked, by its deferred free's reference; and
	 * once behind_n is 0 an unlink may free it at once, which must then
	 * not find it still counted in ios (nobody would drop it after). */
	atomic_fetch_sub_explicit(&d->in->ios, 1, memory_order_release);
	if (d->behind)
		nvmefs_behind_finish(vol, d->in, res);
	else
		d->done(d->ctx, res, res > 0 ? d->data : NULL);
	if (!d->keep_buf)
		nvmefs_bufpool_put(vol->pool, d->buf);
	nvmefs_data_plan_free(&d->pl);
	free(d);
	dio_count(vol, -1);
}

/* Lock [lo, hi) of the dio's file for it; returns the lock's generation. */
static uint64_t dio_lock(struct dio *d, uint64_t lo, uint64_t hi, bool excl)
{
	uint64_t gen = nvmefs_rl_lock(&d->in->io_lock, &d->rl, lo, hi, excl);

	d->locked = true;
	return gen;
}

/*
 * The block range [a, e) in the buffer's data area, or NULL when it does
 * not fit: the kernel sends at most 1 MiB per request (max_write,
 * max_pages), which with its edge blocks always fits.
 */
static uint8_t *dio_area(struct dio *d, uint64_t a, uint64_t e)
{
	if (d->user_area)
		return d->user_area;
	return e - a <= d->vol->buf_size - NVMEFS_DATA_OFF ? d->buf + NVMEFS_DATA_OFF : NULL;
}

/* Count requests at the devices (past their range lock), and the most at
 * once: what the counters' peak_in_flight shows. Lock-free. */
static void io_count(struct nvmefs_vol *vol, int delta)
{
	unsigned now = atomic_fetch_add_explicit(&vol->io_inflight, (unsigned)delta,
						 memory_order_relaxed) +
		       (unsigned)delta;
	unsigned peak = atomic_load_explicit(&vol->io_peak, memory_order_relaxed);

	while (delta > 0 && now > peak &&
	       !atomic_compare_exchange_weak_explicit(&vol->io_peak, &peak, now,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

/* Send plan pl's segments as request io; done runs once they all completed
 * (and calls io_count(vol, -1)). After 0, io belongs to the completion.
 * Held (the calling thread's plug, nvmefs/engine.h) only when may_hold:
 * a write answered early, which nobody waits for directly. */
static int plan_submit(struct nvmefs_vol *vol, struct nvmefs_io_req *io,
		       const struct nvmefs_plan *pl, enum nvmefs_io_op op, nvmefs_io_done_fn done,
		       bool may_hold)
{
	int ret;

	io->op = op;
	io->segs = pl->io;
	io->nr_segs = (unsigned)pl->nio;
	io->done = done;
	io_count(vol, 1);
	ret = may_hold ? nvmefs_engine_submit_held(vol->eng, io)
		       : nvmefs_engine_submit(vol->eng, io);
	if (ret)
		io_count(vol, -1);
	return ret;
}

static int dio_submit(struct dio *d, enum nvmefs_io_op op, nvmefs_io_done_fn done)
{
	return plan_submit(d->vol, &d->io, &d->pl, op, done, false);
}

static void read_io_done(struct nvmefs_io_req *io, int res)
{
	struct dio *d = io->priv;

	io_count(d->vol, -1);
	if (res)
		nvmefs_err("inode %llu: read of %zu segment(s) failed: %s",
			   (unsigned long long)d->in->ino, d->pl.nio, strerror(-res));
	dio_finish(d, res ? res : (ssize_t)d->len);
}

static void read_start(struct dio *d, size_t len, uint64_t off, struct nvmefs_read_view *view);

static void read_async(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, bool keep_buf,
		       size_t len, uint64_t off, struct nvmefs_read_view *view,
		       nvmefs_data_done_fn done, void *ctx)
{
	struct dio *d = dio_new(vol, in, buf, keep_buf, done, ctx);

	if (d)
		read_start(d, len, off, view);
}

static void read_start(struct dio *d, size_t len, uint64_t off, struct nvmefs_read_view *view)
{
	struct nvmefs_vol *vol = d->vol;
	struct nvmefs_inode *in = d->in;
	uint64_t size, a, e, lock_gen;
	uint8_t *area;
	int ret;

	if (off >= NVMEFS_MAX_FILE_SIZE || !len) {
		dio_finish(d, 0);
		return;
	}
	if (len > NVMEFS_MAX_FILE_SIZE - off)
		len = (size_t)(NVMEFS_MAX_FILE_SIZE - off);
	/* Under the lock no overlapping change can start: what is read now
	 * is the file's content as of this generation. */
	lock_gen = dio_lock(d, ROUND_DOWN(off), ROUND_UP(off + len), false);
	if (view)
		view->gen = lock_gen;
	/* The size is not under the range lock: a write elsewhere in the
	 * file may extend it at any time (an atomic store, after the extents
	 * are in the maps). A read-ahead window records what it used
	 * (fs/core/prefetch.c). */
	size = __atomic_load_n(&in->size, __ATOMIC_ACQUIRE);
	if (view)
		atomic_store(&view->size, size);
	if (off >= size) {
		dio_finish(d, 0);
		return;
	}
	if (len > size - off)
		len = (size_t)(size - off);
	a = ROUND_DOWN(off);
	e = ROUND_UP(off + len);
	area = dio_area(d, a, e);
	if (!area) {
		dio_finish(d, -EIO);
		return;
	}
	d->off = off;
	d->len = len;
	d->data = area + (off - a);
	d->pl.buf = area;
	atomic_fetch_add_explicit(&vol->stats.reads, 1, memory_order_relaxed);
	pthread_rwlock_rdlock(&in->map_lock);
	ret = nvmefs_data_walk(vol, in, a, e - a, nvmefs_data_read_piece, &d->pl);
	pthread_rwlock_unlock(&in->map_lock);
	if (ret || !d->pl.nio) { /* all holes: nothing to wait for */
		dio_finish(d, ret ? ret : (ssize_t)len);
		return;
	}
	ret = dio_submit(d, NVMEFS_IO_READ, read_io_done);
	if (ret)
		dio_finish(d, ret);
}

void nvmefs_data_read_async(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, size_t len,
			    uint64_t off, nvmefs_data_done_fn done, void *ctx)
{
	read_async(vol, in, buf, false, len, off, NULL, done, ctx);
}

void nvmefs_data_read_hold(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, size_t len,
			   nvmefs_data_done_fn held, nvmefs_data_done_fn done, void *ctx)
{
	struct dio *d = dio_new(vol, in, buf, false, done, ctx);

	if (d) {
		d->held = held;
		read_start(d, len, 0, NULL);
	}
}

void nvmefs_data_prefetch_async(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf,
				size_t len, uint64_t off, struct nvmefs_read_view *view,
				nvmefs_data_done_fn done, void *ctx)
{
	read_async(vol, in, buf, true, len, off, view, done, ctx);
}

/*
 * mtime and ctime after an overwrite, without the metadata lock: the time
 * goes to in->wtime_ns, and only the first overwrite since the inode last
 * went out in a commit takes meta, to put it on the dirty list. Those who
 * read or write the times (meta held) fold it in first
 * (nvmefs_inode_fold_wtime). The journal clears wtime_queued before it
 * folds; this sets wtime_ns before wtime_queued: a time is either folded
 * or queued again.
 */
static void note_overwrite(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	struct timespec now;

	nvmefs_timespec_now(&now);
	atomic_store(&in->wtime_ns, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
	atomic_fetch_add_explicit(&in->attr_gen, 1, memory_order_release);
	if (!atomic_exchange(&in->wtime_queued, true)) {
		pthread_mutex_lock(&vol->lock);
		nvmefs_inode_dirty(vol, in);
		pthread_mutex_unlock(&vol->lock);
	}
}

static void write_io_done(struct nvmefs_io_req *io, int res)
{
	struct dio *d = io->priv;
	struct nvmefs_vol *vol = d->vol;
	struct nvmefs_inode *in = d->in;
	int ret = res;

	io_count(vol, -1);
	if (res)
		nvmefs_err("inode %llu: write of %zu segment(s) failed: %s",
			   (unsigned long long)in->ino, d->pl.nio, strerror(-res));
	/* An overwrite (nothing to record, no new size) takes no lock. */
	if (!ret && !d->pl.nrecs &&
	    d->off + d->len <= __atomic_load_n(&in->size, __ATOMIC_ACQUIRE)) {
		if (!d->keep_times && !d->behind)
			note_overwrite(vol, in);
		dio_finish(d, (ssize_t)d->len);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	if (ret) {
		nvmefs_data_plan_unreserve(vol, in, &d->pl);
	} else {
		ret = nvmefs_data_log_extents(vol, &d->pl);
		if (d->off + d->len > in->size)
			__atomic_store_n(&in->size, d->off + d->len, __ATOMIC_RELEASE);
		if (!d->keep_times && !d->behind)
			nvmefs_data_touch_mc(in);
		nvmefs_inode_dirty(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
	dio_finish(d, ret ? ret : (ssize_t)d->len);
}

/*
 * The edge blocks of an unaligned write: the bytes of its first and last
 * block outside the payload are the file's old ones. They are read into a
 * block-aligned buffer of their own, asynchronously when a block holds
 * written data (the write goes on from that read's completion), at once
 * when it is a hole (zeros, no I/O). At most two blocks.
 */
struct edges {
	struct nvmefs_io_req io; /* first: the engine hands this back */
	struct nvmefs_plan pl;	 /* reads into blk */
	struct dio *d;
	uint8_t *blk;		       /* nblk blocks */
	uint64_t boff[2];	       /* file offset of each block */
	size_t keep_lo[2], keep_hi[2]; /* the payload's part of each block */
	unsigned nblk;
};

static void edges_free(struct edges *x)
{
	nvmefs_data_plan_free(&x->pl);
	free(x->blk);
	free(x);
}

/* Copy each edge block's old bytes around the payload into the area. */
static void edges_merge(struct edges *x)
{
	struct dio *d = x->d;
	uint64_t a = ROUND_DOWN(d->off);

	for (unsigned k = 0; k < x->nblk; k++) {
		uint8_t *dst = d->pl.buf + (x->boff[k] - a), *src = x->blk + k * BLK;

		memcpy(dst, src, x->keep_lo[k]);
		memcpy(dst + x->keep_hi[k], src + x->keep_hi[k], BLK - x->keep_hi[k]);
		atomic_fetch_add_explicit(&d->vol->stats.copied_bytes,
					  x->keep_lo[k] + BLK - x->keep_hi[k],
					  memory_order_relaxed);
	}
}

static void write_continue(struct dio *d);

static void edges_read_done(struct nvmefs_io_req *io, int res)
{
	struct edges *x = io->priv;
	struct dio *d = x->d;

	io_count(d->vol, -1);
	if (res) {
		nvmefs_err("inode %llu: read of an edge block failed: %s",
			   (unsigned long long)d->in->ino, strerror(-res));
		edges_free(x);
		dio_finish(d, res);
		return;
	}
	edges_merge(x);
	edges_free(x);
	/* Not answered early: the caller waited for this read already. */
	d->want_behind = false;
	/* On the completion thread: planning and submitting never wait for a
	 * device (engine submission only queues), except a commit after
	 * ENOSPC with space pending (reclaim_pending, data.c). */
	write_continue(d);
}

/*
 * Put the payload where the block-aligned write of [a, e) wants it (area +
 * off - a); an aligned payload already in place is not touched (the
 * zero-copy case). Then the edge blocks: 0 when the area is complete (the
 * caller goes on), 1 when their read was sent (its completion goes on),
 * or -errno.
 */
static int place_payload(struct dio *d, const void *data, uint64_t a, uint64_t e)
{
	struct nvmefs_vol *vol = d->vol;
	uint64_t off = d->off, end = off + d->len;
	uint8_t *area = d->pl.buf;
	struct edges *x;
	int ret = 0;

	if (data != area + (off - a)) {
		memmove(area + (off - a), data, d->len);
		atomic_fetch_add_explicit(&vol->stats.copied_bytes, d->len, memory_order_relaxed);
	} else if (off == a && end == e) {
		atomic_fetch_add_explicit(&vol->stats.zero_copy_writes, 1, memory_order_relaxed);
	}
	if (off == a && end == e)
		return 0;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->d = d;
	x->io.priv = x;
	if (off != a) {
		x->boff[0] = a;
		x->keep_lo[0] = (size_t)(off - a);
		x->keep_hi[0] = ROUND_DOWN(end) == a ? (size_t)(end - a) : BLK;
		x->nblk = 1;
	}
	if (end != e && !(off != a && ROUND_DOWN(end) == a)) {
		x->boff[x->nblk] = e - BLK;
		x->keep_lo[x->nblk] = 0;
		x->keep_hi[x->nblk] = (size_t)(end - (e - BLK));
		x->nblk++;
	}
	x->blk = nvmefs_aligned_alloc(x->nblk * BLK);
	x->pl.buf = x->blk;
	if (!x->blk)
		ret = -ENOMEM;
	/* Each block's walk plans from its own start: pl.buf moves with it
	 * (data.c's plan_io keeps the segments' addresses, not offsets). */
	pthread_rwlock_rdlock(&d->in->map_lock);
	for (unsigned k = 0; k < x->nblk && !ret; k++) {
		x->pl.buf = x->blk + k * BLK;
		ret = nvmefs_data_walk(vol, d->in, x->boff[k], BLK, nvmefs_data_read_piece, &x->pl);
	}
	pthread_rwlock_unlock(&d->in->map_lock);
	if (ret || !x->pl.nio) { /* holes only: zeros, nothing to wait for */
		if (!ret)
			edges_merge(x);
		edges_free(x);
		return ret;
	}
	atomic_fetch_add_explicit(&vol->stats.edge_reads, 1, memory_order_relaxed);
	ret = plan_submit(vol, &x->io, &x->pl, NVMEFS_IO_READ, edges_read_done, false);
	if (ret) {
		edges_free(x);
		return ret;
	}
	return 1;
}

static void write_start(struct dio *d, const void *data, size_t len, uint64_t off, unsigned flags);
static void write_unsent(struct dio *d, int err);
static void write_behind(struct dio *d);

/*
 * chattr's rules on a write, for every door (the open's are in namei.c):
 * none to an immutable file; to an append-only one only at its end (an
 * O_APPEND write, or one at or past the size), so that a descriptor opened
 * before the flag was set, or a native client's, cannot write elsewhere.
 * The write-back cache's pages (NVMEFS_WRITE_KEEP_TIMES) pass: the kernel
 * took their writes already (through a descriptor that the open checked)
 * and writes back whole pages, from before the end. The flags are read
 * without meta: a change races with the writes in flight.
 */
static int may_write(struct nvmefs_inode *in, uint64_t off, unsigned flags)
{
	uint32_t iflags = __atomic_load_n(&in->flags, __ATOMIC_RELAXED);

	if (flags & NVMEFS_WRITE_KEEP_TIMES)
		return 0;
	if (iflags & NVMEFS_IFL_IMMUTABLE)
		return -EPERM;
	if ((iflags & NVMEFS_IFL_APPEND) && !(flags & NVMEFS_WRITE_APPEND) &&
	    off < __atomic_load_n(&in->size, __ATOMIC_ACQUIRE))
		return -EPERM;
	return 0;
}

void nvmefs_data_write_async(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf,
			     const void *data, size_t len, uint64_t off, unsigned flags,
			     nvmefs_data_done_fn done, void *ctx)
{
	struct dio *d = dio_new(vol, in, buf, false, done, ctx);

	if (d)
		write_start(d, data, len, off, flags);
}

static void write_start(struct dio *d, const void *data, size_t len, uint64_t off, unsigned flags)
{
	struct nvmefs_vol *vol = d->vol;
	struct nvmefs_inode *in = d->in;
	bool append = flags & NVMEFS_WRITE_APPEND;
	uint64_t a, e;
	int ret = may_write(in, off, flags);

	if (ret || !len) {
		dio_finish(d, ret);
		return;
	}
	/* An appending write learns its offset only under a whole-file lock. */
	if (append) {
		dio_lock(d, 0, NVMEFS_RL_ALL, true);
		off = __atomic_load_n(&in->size, __ATOMIC_ACQUIRE);
	}
	if (off + len > NVMEFS_MAX_FILE_SIZE || off + len < off) {
		dio_finish(d, -EFBIG);
		return;
	}
	a = ROUND_DOWN(off);
	e = ROUND_UP(off + len);
	if (!append)
		dio_lock(d, a, e, true);
	d->off = off;
	d->len = len;
	d->keep_times = flags & NVMEFS_WRITE_KEEP_TIMES;
	d->want_behind = (flags & NVMEFS_WRITE_BEHIND) && !d->keep_times && !d->user_area;
	d->pl.buf = dio_area(d, a, e);
	if (!d->pl.buf) {
		dio_finish(d, -EIO);
		return;
	}
	atomic_fetch_add_explicit(&vol->stats.writes, 1, memory_order_relaxed);
	ret = place_payload(d, data, a, e);
	if (ret < 0)
		dio_finish(d, ret);
	else if (!ret)
		write_continue(d);
	/* 1: the edge blocks' read goes on from its completion */
}

/* Plan and send a write whose area is complete (payload and edges). */
static void write_continue(struct dio *d)
{
	struct nvmefs_vol *vol = d->vol;
	struct nvmefs_inode *in = d->in;
	uint64_t a = ROUND_DOWN(d->off), e = ROUND_UP(d->off + d->len);
	int ret = 0;

	d->pl.buf = dio_area(d, a, e);
	if (nvmefs_data_plan_overwrite(vol, in, a, e - a, &d->pl))
		ret = nvmefs_data_plan_walk(vol, in, a, e - a, nvmefs_data_write_piece, &d->pl);
	if (ret) {
		dio_finish(d, ret);
		return;
	}
	d->behind = d->want_behind && nvmefs_behind_begin(vol, in);
	if (!d->behind) {
		ret = dio_submit(d, NVMEFS_IO_WRITE, write_io_done);
		if (ret)
			write_unsent(d, ret);
		return;
	}
	write_behind(d);
}

/* A write the engine refused: its space back, the caller answered. */
static void write_unsent(struct dio *d, int err)
{
	pthread_mutex_lock(&d->vol->lock);
	nvmefs_data_plan_unreserve(d->vol, d->in, &d->pl);
	pthread_mutex_unlock(&d->vol->lock);
	dio_finish(d, err);
}

/* Answer a write of len bytes before its device write completes. */
static void answer_early(struct nvmefs_vol *vol, nvmefs_data_done_fn done, void *ctx, size_t len)
{
	atomic_fetch_add_explicit(&vol->stats.behind_writes, 1, memory_order_relaxed);
	done(ctx, (ssize_t)len, NULL);
}

/*
 * Send a planned write counted in behind_n and answer it at once
 * (NVMEFS_WRITE_BEHIND). The file's new size and times are set first,
 * under the write's range lock (no truncation or append comes between),
 * as the reply lets the kernel believe them: a GETATTR after it must
 * agree. The handle that sent the request keeps the inode until the
 * reply; from then on the dio's count on it (ios) does. A commit gathers
 * no size before the write's extents: it waits for behind_n.
 *
 * Which goes first: where sending is a system call of its own (the
 * engine's io_submit), the reply, so that the caller runs on while this
 * thread submits (a small file's write answered 3-5 us sooner on
 * /dev/fuse, docs/PERFORMANCE.md "Halted vCPUs"); a write the engine then
 * refuses fails as one the devices fail, its error kept for the file's
 * next fsync (dio_finish, as d->behind, with EIO). On an io_uring
 * queue's thread (nvmefs_engine_ring) both are only queued while it
 * leads, and go in its next io_uring_enter: the device's blocks first
 * there, as the commit's wake-up would find the leader still busy and
 * move the caller to the other CPU (measured: 8.1-8.4k files/s against
 * 11.1-11.3k). Once sent,
 * d may complete and be freed on any thread: only copies are used after.
 */
static void write_behind(struct dio *d)
{
	struct nvmefs_vol *vol = d->vol;
	struct nvmefs_inode *in = d->in;
	nvmefs_data_done_fn done = d->done;
	void *ctx = d->ctx;
	size_t len = d->len;
	uint64_t end = d->off + d->len;
	bool grows = d->pl.nrecs || end > __atomic_load_n(&in->size, __ATOMIC_ACQUIRE);
	bool reply_first = !nvmefs_engine_ring;
	int ret;

	if (grows) {
		pthread_mutex_lock(&vol->lock);
		if (end > in->size)
			__atomic_store_n(&in->size, end, __ATOMIC_RELEASE);
		nvmefs_data_touch_mc(in);
		nvmefs_inode_dirty(vol, in);
		pthread_mutex_unlock(&vol->lock);
	} else {
		note_overwrite(vol, in);
	}
	if (reply_first)
		answer_early(vol, done, ctx, len);
	/* The one submission a plugged thread may hold back (the native door's:
	 * fs/native/server_io.c, "writes held back"). */
	ret = plan_submit(vol, &d->io, &d->pl, NVMEFS_IO_WRITE, write_io_done, true);
	if (ret) {
		/* Nothing was sent. The size set above stays, over a hole,
		 * as after a failure at the devices: putting it back could
		 * cut off a write beyond the range lock that completed
		 * meanwhile. Answered already, the write fails the next
		 * fsync with EIO, as a device failure does (the engine's
		 * own error is logged here); else it is answered with it. */
		nvmefs_err("inode %llu: write of %zu bytes at %llu not sent: %s",
			   (unsigned long long)in->ino, len, (unsigned long long)d->off,
			   strerror(-ret));
		if (!reply_first) {
			nvmefs_behind_finish(vol, in, 0);
			d->behind = false;
		}
		write_unsent(d, reply_first ? -EIO : ret);
		return;
	}
	if (!reply_first)
		answer_early(vol, done, ctx, len);
}

/* ---- into and from the caller's buffers ---- */

static bool block_aligned(const void *buf, size_t len, uint64_t off)
{
	return !((uintptr_t)buf % BLK) && !(len % BLK) && !(off % BLK);
}

/* A read through a pool buffer, copied into the caller's on completion. */
struct bounce {
	struct nvmefs_vol *vol;
	uint8_t *dst;
	nvmefs_data_done_fn done;
	void *ctx;
};

static void bounce_read_done(void *ctx, ssize_t res, const void *data)
{
	struct bounce *b = ctx;

	if (res > 0) {
		memcpy(b->dst, data, (size_t)res);
		atomic_fetch_add_explicit(&b->vol->stats.copied_bytes, (uint64_t)res,
					  memory_order_relaxed);
	}
	b->done(b->ctx, res, res > 0 ? b->dst : NULL);
	free(b);
}

void nvmefs_data_read_into(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, size_t len,
			   uint64_t off, nvmefs_data_done_fn done, void *ctx)
{
	struct bounce *b;
	struct dio *d;
	void *pbuf;

	if (block_aligned(buf, len, off)) {
		d = dio_new(vol, in, NULL, true, done, ctx);
		if (d) {
			d->user_area = buf;
			read_start(d, len, off, NULL);
		}
		return;
	}
	if (len > NVMEFS_IO_MAX) {
		done(ctx, -EINVAL, NULL);
		return;
	}
	b = malloc(sizeof(*b));
	pbuf = b ? nvmefs_bufpool_get(vol->pool) : NULL;
	if (!pbuf) {
		free(b);
		done(ctx, -ENOMEM, NULL);
		return;
	}
	*b = (struct bounce){.vol = vol, .dst = buf, .done = done, .ctx = ctx};
	read_async(vol, in, pbuf, false, len, off, NULL, bounce_read_done, b);
}

void nvmefs_data_write_from(struct nvmefs_vol *vol, struct nvmefs_inode *in, const void *buf,
			    size_t len, uint64_t off, unsigned flags, nvmefs_data_done_fn done,
			    void *ctx)
{
	struct dio *d;
	void *pbuf;

	if (block_aligned(buf, len, off) && !(flags & NVMEFS_WRITE_APPEND)) {
		d = dio_new(vol, in, NULL, true, done, ctx);
		if (d) {
			d->user_area = (uint8_t *)buf; /* read by the devices only */
			write_start(d, buf, len, off, flags);
		}
		return;
	}
	if (len > NVMEFS_IO_MAX) {
		done(ctx, -EINVAL, NULL);
		return;
	}
	pbuf = nvmefs_bufpool_get(vol->pool);
	if (!pbuf) {
		done(ctx, -ENOMEM, NULL);
		return;
	}
	nvmefs_data_write_async(vol, in, pbuf, buf, len, off, flags, done, ctx);
}

/* One request of a synchronous call, waited for. */
struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	ssize_t res;
};

static void waiter_done(void *ctx, ssize_t res, const void *data)
{
	struct waiter *w = ctx;

	(void)data;
	pthread_mutex_lock(&w->mu);
	w->res = res;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* Run one read (write false) or write and wait for it. */
static ssize_t sync_io(struct nvmefs_vol *vol, struct nvmefs_inode *in, bool write, void *buf,
		       size_t len, uint64_t off)
{
	struct waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

	if (write)
		nvmefs_data_write_from(vol, in, buf, len, off, 0, waiter_done, &w);
	else
		nvmefs_data_read_into(vol, in, buf, len, off, waiter_done, &w);
	pthread_mutex_lock(&w.mu);
	while (!w.done)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	return w.res;
}

/* A whole range: in one request when block-aligned, else in pieces of at
 * most NVMEFS_IO_MAX. Stops at a short piece (a read at EOF). */
static ssize_t sync_range(struct nvmefs_vol *vol, struct nvmefs_inode *in, bool write, uint8_t *buf,
			  size_t len, uint64_t off)
{
	size_t done = 0;

	if (block_aligned(buf, len, off))
		return sync_io(vol, in, write, buf, len, off);
	while (done < len) {
		size_t n = len - done < NVMEFS_IO_MAX ? len - done : NVMEFS_IO_MAX;
		ssize_t r = sync_io(vol, in, write, buf + done, n, off + done);

		if (r < 0)
			return done ? (ssize_t)done : r;
		done += (size_t)r;
		if ((size_t)r < n)
			break;
	}
	return (ssize_t)done;
}

ssize_t nvmefs_data_pread(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, size_t len,
			  uint64_t off)
{
	return sync_range(vol, in, false, buf, len, off);
}

ssize_t nvmefs_data_pwrite(struct nvmefs_vol *vol, struct nvmefs_inode *in, const void *buf,
			   size_t len, uint64_t off)
{
	return sync_range(vol, in, true, (uint8_t *)buf, len, off);
}

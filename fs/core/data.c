// SPDX-License-Identifier: MIT
/*
 * The data path, its planning side: file ranges mapped through the file's
 * layout to slot components, through the extent maps to device ranges
 * (walk), gathered into a plan: the engine's segments and the EXTENT
 * records to log once the data they reach is written. I/O is in 4 KiB
 * blocks. New space is reserved in memory, written, and only then recorded
 * (EXTENT); fallocate records UNWRITTEN extents that read as zeros. Also
 * here, the calls that change a file's extents or size synchronously:
 * truncate, fallocate, punch, and SEEK_DATA/SEEK_HOLE. One invariant keeps
 * truncate simple: bytes past EOF inside an allocated block are always
 * zero.
 *
 * Its sibling data_io.c moves the data: asynchronous reads and writes in
 * one engine request each (every device at once), unaligned writes'
 * edge blocks, the caller's buffers, and the synchronous pread/pwrite.
 */
#include "fs_i.h"
#include "alloc_i.h"
#include "data_i.h"
#include "extmap_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "util_i.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvmefs/util.h"

#define BLK	      NVMEFS_BLOCK
#define REC_NEW	      0x80000000u /* plan-only mark: space reserved by this plan */
#define ROUND_DOWN(x) ((x) & ~(uint64_t)(BLK - 1))
#define ROUND_UP(x)   ROUND_DOWN((x) + BLK - 1)

/* ---- walking a block-aligned file range ---- */

enum piece_state { P_HOLE, P_UNWRITTEN, P_WRITTEN };

struct nvmefs_piece {
	uint64_t buf_off; /* from the start of the walked range */
	uint32_t slot, dev;
	uint64_t comp_off, dev_off, len;
	enum piece_state state;
	const struct nvmefs_ext *prev; /* the extent before a hole, if any */
};

/* Call fn for every piece of [off, off + len) in file order. meta held, or
 * (for fn that only reads, nvmefs_data_read_piece) in->map_lock. */
int nvmefs_data_walk(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off, uint64_t len,
		     nvmefs_piece_fn fn, void *ctx)
{
	uint64_t n = nvmefs_layout_nsegs(&in->layout, off, len);
	struct nvmefs_segment *segs = malloc(n * sizeof(*segs));
	int ret = 0;

	if (!segs)
		return -ENOMEM;
	nvmefs_layout_map(&in->layout, off, len, segs, n);
	for (uint64_t k = 0; k < n && !ret; k++) {
		const struct nvmefs_extmap *m = &in->slots[segs[k].slot];
		uint64_t comp = segs[k].comp_off, end = comp + segs[k].len;
		size_t i = nvmefs_extmap_find(m, comp);

		while (comp < end && !ret) {
			struct nvmefs_piece p = {.buf_off = segs[k].buf_off +
							    (comp - segs[k].comp_off),
						 .slot = segs[k].slot,
						 .dev = segs[k].dev,
						 .comp_off = comp};

			if (i < m->n && m->v[i].comp_off <= comp) {
				const struct nvmefs_ext *e = &m->v[i];
				uint64_t e_end = e->comp_off + e->len;

				p.len = (e_end < end ? e_end : end) - comp;
				p.dev_off = e->dev_off + (comp - e->comp_off);
				p.state = e->flags & NVMEFS_EXT_UNWRITTEN ? P_UNWRITTEN : P_WRITTEN;
				if (e_end <= comp + p.len)
					i++;
			} else {
				uint64_t next = i < m->n ? m->v[i].comp_off : UINT64_MAX;

				p.len = (next < end ? next : end) - comp;
				p.state = P_HOLE;
				p.prev = i > 0 ? &m->v[i - 1] : NULL;
			}
			ret = fn(vol, in, &p, ctx);
			comp += p.len;
		}
	}
	free(segs);
	return ret;
}

static int plan_io(struct nvmefs_plan *pl, uint32_t dev, uint64_t dev_off, uint64_t len,
		   uint64_t buf_off)
{
	if (nvmefs_grow(&pl->io, &pl->io_cap, pl->nio + 1, sizeof(*pl->io)))
		return -ENOMEM;
	/* Merge with the previous segment when both sides are contiguous. */
	if (pl->nio) {
		struct nvmefs_io_seg *s = &pl->io[pl->nio - 1];

		if (s->dev == dev && s->off + s->len == dev_off &&
		    (uint8_t *)s->buf + s->len == pl->buf + buf_off) {
			s->len += len;
			return 0;
		}
	}
	pl->io[pl->nio++] = (struct nvmefs_io_seg){
		.dev = dev, .off = dev_off, .len = len, .buf = pl->buf ? pl->buf + buf_off : NULL};
	return 0;
}

static int plan_rec(struct nvmefs_plan *pl, uint64_t ino, uint32_t slot, uint64_t comp_off,
		    uint64_t dev_off, uint64_t len, uint32_t flags)
{
	struct nvmefs_rec *r;

	if (nvmefs_grow(&pl->recs, &pl->rec_cap, pl->nrecs + 1, sizeof(*pl->recs)))
		return -ENOMEM;
	r = &pl->recs[pl->nrecs++];
	memset(r, 0, sizeof(*r));
	r->type = NVMEFS_REC_EXTENT;
	r->extent.ino = ino;
	r->extent.slot = slot;
	r->extent.comp_off = comp_off;
	r->extent.dev_off = dev_off;
	r->extent.len = len;
	r->extent.flags = flags;
	return 0;
}

void nvmefs_data_plan_free(struct nvmefs_plan *pl)
{
	free(pl->io);
	free(pl->recs);
}

/* Give back space a failed write had reserved (never recorded). meta held. */
void nvmefs_data_plan_unreserve(struct nvmefs_vol *vol, struct nvmefs_inode *in,
				struct nvmefs_plan *pl)
{
	for (size_t i = 0; i < pl->nrecs; i++) {
		const struct nvmefs_rec *r = &pl->recs[i];

		if (r->extent.flags & REC_NEW)
			nvmefs_alloc_put(vol, in->layout.devs[r->extent.slot], r->extent.dev_off,
					 r->extent.len);
	}
	pl->nrecs = 0;
}

static int allocate_hole(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			 const struct nvmefs_piece *p, struct nvmefs_plan *pl, bool io)
{
	uint64_t comp = p->comp_off, left = p->len, buf_off = p->buf_off;
	uint64_t goal = pl->last_end[p->slot];

	if (!goal && p->prev)
		goal = p->prev->dev_off + p->prev->len +
		       (comp - (p->prev->comp_off + p->prev->len));
	while (left) {
		uint64_t off, got;
		int ret;

		/* Every new extent may cost an EXTENT key: the run area must
		 * hold them and room to compact, or a flush would fail. */
		if (vol->meta_bytes + (pl->nrecs + 1) * NVMEFS_EXT_COST > vol->meta_cap)
			return -ENOSPC;
		got = nvmefs_alloc_get(vol, p->dev, goal, left, &off);
		if (!got)
			return -ENOSPC;
		ret = plan_rec(pl, in->ino, p->slot, comp, off, got, pl->ext_flags | REC_NEW);
		if (ret) {
			nvmefs_alloc_put(vol, p->dev, off, got);
			return ret;
		}
		/* From here the plan owns the space (nvmefs_data_plan_unreserve gives it back). */
		if (io && (ret = plan_io(pl, p->dev, off, got, buf_off)))
			return ret;
		goal = off + got;
		comp += got;
		buf_off += got;
		left -= got;
	}
	pl->last_end[p->slot] = goal;
	return 0;
}

int nvmefs_data_read_piece(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			   const struct nvmefs_piece *p, void *ctx)
{
	struct nvmefs_plan *pl = ctx;

	if (p->state == P_WRITTEN)
		return plan_io(pl, p->dev, p->dev_off, p->len, p->buf_off);
	memset(pl->buf + p->buf_off, 0, p->len);
	return 0;
}

int nvmefs_data_write_piece(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			    const struct nvmefs_piece *p, void *ctx)
{
	struct nvmefs_plan *pl = ctx;
	int ret;

	switch (p->state) {
	case P_WRITTEN:
		pl->last_end[p->slot] = p->dev_off + p->len;
		return plan_io(pl, p->dev, p->dev_off, p->len, p->buf_off);
	case P_UNWRITTEN:
		pl->last_end[p->slot] = p->dev_off + p->len;
		ret = plan_rec(pl, in->ino, p->slot, p->comp_off, p->dev_off, p->len, 0);
		return ret ? ret : plan_io(pl, p->dev, p->dev_off, p->len, p->buf_off);
	case P_HOLE:
		return allocate_hole(vol, in, p, pl, true);
	}
	return -EINVAL;
}

static int run_io(struct nvmefs_vol *vol, enum nvmefs_io_op op, struct nvmefs_plan *pl)
{
	struct nvmefs_io_req req = {.op = op};
	int ret;

	if (!pl->nio)
		return 0;
	req.nr_segs = (unsigned)pl->nio;
	req.segs = pl->io;
	nvmefs_before_wait();
	ret = nvmefs_engine_run(vol->eng, &req);
	if (ret)
		nvmefs_err("inode %s of %zu segment(s) failed: %s",
			   op == NVMEFS_IO_READ ? "read" : "write", pl->nio, strerror(-ret));
	return ret;
}

/*
 * Read (op NVMEFS_IO_READ; zeros for holes) or write the block-aligned range
 * [off, off + len) of the file's written blocks, into or from buf; a write
 * leaves holes holes. Synchronous: for zero_in_block only (truncate, punch).
 */
static int blocks_io(struct nvmefs_vol *vol, struct nvmefs_inode *in, enum nvmefs_io_op op,
		     uint8_t *buf, uint64_t off, uint64_t len)
{
	struct nvmefs_plan pl = {.buf = buf};
	int ret;

	pthread_rwlock_rdlock(&in->map_lock);
	ret = nvmefs_data_walk(vol, in, off, len, nvmefs_data_read_piece, &pl);
	pthread_rwlock_unlock(&in->map_lock);
	if (!ret)
		ret = run_io(vol, op, &pl);
	nvmefs_data_plan_free(&pl);
	return ret;
}

/* Log the plan's EXTENT records (the data they reach is written). */
int nvmefs_data_log_extents(struct nvmefs_vol *vol, struct nvmefs_plan *pl)
{
	for (size_t i = 0; i < pl->nrecs; i++) {
		int ret;

		pl->recs[i].extent.flags &= ~REC_NEW;
		ret = nvmefs_journal_log(vol, &pl->recs[i]);
		if (ret)
			return ret;
	}
	return 0;
}

void nvmefs_data_touch_mc(struct nvmefs_inode *in)
{
	atomic_store(&in->wtime_ns, 0); /* older than now */
	nvmefs_timespec_now(&in->mtime);
	in->ctime = in->mtime;
}

/* After ENOSPC: if released space waits for a commit, commit and say so
 * (the caller retries once). io_lock may be held: it comes before
 * commit_lock. */
static bool reclaim_pending(struct nvmefs_vol *vol)
{
	uint64_t pending;

	pthread_mutex_lock(&vol->lock);
	pending = vol->pending_bytes;
	pthread_mutex_unlock(&vol->lock);
	return pending && nvmefs_journal_commit(vol) == 0;
}

/*
 * Plan [off, off + len) with fn, reserving space for the holes it fills.
 * On ENOSPC while released space waits for its commit, commit and plan once
 * more. On failure nothing stays reserved. Called without meta; the
 * caller's exclusive range lock keeps the plan valid after it returns.
 */
int nvmefs_data_plan_walk(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off,
			  uint64_t len, nvmefs_piece_fn fn, struct nvmefs_plan *pl)
{
	for (int attempt = 0;; attempt++) {
		int ret;

		pthread_mutex_lock(&vol->lock);
		ret = nvmefs_data_walk(vol, in, off, len, fn, pl);
		if (ret)
			nvmefs_data_plan_unreserve(vol, in, pl);
		pthread_mutex_unlock(&vol->lock);
		if (ret != -ENOSPC || attempt || !reclaim_pending(vol))
			return ret;
		pl->nio = 0;
		memset(pl->last_end, 0, sizeof(pl->last_end));
	}
}

/* An overwrite's piece: only written extents; anything else (a hole to
 * allocate, an unwritten extent to record) needs nvmefs_data_plan_walk. */
static int overwrite_piece(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			   const struct nvmefs_piece *p, void *ctx)
{
	(void)vol;
	(void)in;
	if (p->state != P_WRITTEN)
		return -EAGAIN;
	return plan_io(ctx, p->dev, p->dev_off, p->len, p->buf_off);
}

/*
 * Plan a write of [off, off + len) that lands on written extents only
 * under the inode's map_lock alone: nothing to allocate or record. -EAGAIN
 * (the plan emptied) when it needs more: nvmefs_data_plan_walk then.
 */
int nvmefs_data_plan_overwrite(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off,
			       uint64_t len, struct nvmefs_plan *pl)
{
	int ret;

	pthread_rwlock_rdlock(&in->map_lock);
	ret = nvmefs_data_walk(vol, in, off, len, overwrite_piece, pl);
	pthread_rwlock_unlock(&in->map_lock);
	if (ret) {
		pl->nio = 0;
		memset(pl->last_end, 0, sizeof(pl->last_end));
	}
	return ret;
}

/* Zero [from, to) inside one block if that block holds written data. */
static int zero_in_block(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t from,
			 uint64_t to)
{
	uint64_t a = ROUND_DOWN(from);
	uint8_t *buf;
	int ret;

	if (from >= to)
		return 0;
	buf = nvmefs_aligned_alloc(BLK);
	if (!buf)
		return -ENOMEM;
	ret = blocks_io(vol, in, NVMEFS_IO_READ, buf, a, BLK);
	if (!ret) {
		/* Only blocks that hold data need rewriting; holes stay holes
		 * (nvmefs_data_read_piece zero-filled the buffer there, harmlessly). */
		memset(buf + (from - a), 0, to - from);
		ret = blocks_io(vol, in, NVMEFS_IO_WRITE, buf, a, BLK);
	}
	free(buf);
	return ret;
}

static int log_punch(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off, uint64_t len)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_PUNCH};

	r.punch.ino = in->ino;
	r.punch.off = off;
	r.punch.len = len;
	return nvmefs_journal_log(vol, &r);
}

int nvmefs_data_truncate(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t size)
{
	uint64_t old;
	int ret = 0;

	if (size > NVMEFS_MAX_FILE_SIZE)
		return -EFBIG;
	pthread_mutex_lock(&vol->lock);
	old = in->size;
	pthread_mutex_unlock(&vol->lock);
	if (size < old && size % BLK)
		ret = zero_in_block(vol, in, size, ROUND_UP(size));
	if (ret)
		return ret;
	pthread_mutex_lock(&vol->lock);
	if (size < old)
		ret = log_punch(vol, in, ROUND_UP(size), UINT64_MAX);
	if (!ret) {
		__atomic_store_n(&in->size, size, __ATOMIC_RELEASE);
		nvmefs_data_touch_mc(in);
		nvmefs_inode_dirty(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

static int falloc_piece(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			const struct nvmefs_piece *p, void *ctx)
{
	struct nvmefs_plan *pl = ctx;

	if (p->state != P_HOLE) {
		pl->last_end[p->slot] = p->dev_off + p->len;
		return 0;
	}
	return allocate_hole(vol, in, p, pl, false);
}

static int punch(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off, uint64_t len)
{
	uint64_t end = off + len, a = ROUND_UP(off), e = ROUND_DOWN(end);
	int ret;

	if (ROUND_DOWN(off) == ROUND_DOWN(end - 1) && (off % BLK || end % BLK))
		return zero_in_block(vol, in, off, end); /* inside one block */
	ret = zero_in_block(vol, in, off, a);
	if (!ret)
		ret = zero_in_block(vol, in, e, end);
	if (ret)
		return ret;
	pthread_mutex_lock(&vol->lock);
	if (e > a)
		ret = log_punch(vol, in, a, e - a);
	if (!ret) {
		nvmefs_data_touch_mc(in);
		nvmefs_inode_dirty(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

int nvmefs_data_fallocate(struct nvmefs_vol *vol, struct nvmefs_inode *in, int mode, uint64_t off,
			  uint64_t len)
{
	struct nvmefs_plan pl = {.ext_flags = NVMEFS_EXT_UNWRITTEN};
	uint64_t a = ROUND_DOWN(off), e;
	int ret;

	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		return -EOPNOTSUPP;
	if (!len)
		return -EINVAL;
	if (off + len > NVMEFS_MAX_FILE_SIZE || off + len < off)
		return -EFBIG;
	if (mode & FALLOC_FL_PUNCH_HOLE)
		return mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)
			       ? punch(vol, in, off, len)
			       : -EOPNOTSUPP;
	/* Zeroing a range: its data goes (a punch: zeros written into the
	 * partial blocks at its ends, the whole blocks between freed), then
	 * the range is allocated again as unwritten extents, which read as
	 * zeros: later writes there find their space, as after ext4's. */
	if (mode & FALLOC_FL_ZERO_RANGE) {
		ret = punch(vol, in, off, len);
		if (ret)
			return ret;
	}
	e = ROUND_UP(off + len);
	ret = nvmefs_data_plan_walk(vol, in, a, e - a, falloc_piece, &pl);
	if (ret) {
		nvmefs_data_plan_free(&pl);
		return ret;
	}
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_data_log_extents(vol, &pl);
	if (!ret && !(mode & FALLOC_FL_KEEP_SIZE) && off + len > in->size) {
		__atomic_store_n(&in->size, off + len, __ATOMIC_RELEASE);
		nvmefs_data_touch_mc(in);
	} else if (!ret) {
		nvmefs_timespec_now(&in->ctime);
	}
	if (!ret)
		nvmefs_inode_dirty(vol, in);
	pthread_mutex_unlock(&vol->lock);
	nvmefs_data_plan_free(&pl);
	return ret;
}

/* The first written byte at or after off (data), or the first byte at or
 * after off that is not written (hole). UNWRITTEN counts as a hole. */
int nvmefs_data_seek(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t off, int whence,
		     uint64_t *res)
{
	const struct nvmefs_layout *l = &in->layout;
	struct nvmefs_rl_ent rl;
	uint64_t size, o;
	int ret = -ENXIO;

	/* After the writes in flight from off on: one answered before its
	 * devices completed (NVMEFS_WRITE_BEHIND) has its size set but maps
	 * its extents only then, and cp would take its range for a hole. */
	nvmefs_rl_lock(&in->io_lock, &rl, off, NVMEFS_RL_ALL, false);
	pthread_mutex_lock(&vol->lock);
	size = in->size;
	if (off >= size)
		goto out;
	if (!in->slots) {
		*res = whence == SEEK_DATA ? off : size;
		ret = 0;
		goto out;
	}
	for (o = off; o < size;) {
		uint64_t chunk_end = (o | (l->chunk_size - 1)) + 1;
		struct nvmefs_segment seg;
		const struct nvmefs_extmap *m;
		const struct nvmefs_ext *x = NULL;
		size_t i;

		nvmefs_layout_map(l, o, chunk_end - o, &seg, 1);
		m = &in->slots[seg.slot];
		i = nvmefs_extmap_find(m, seg.comp_off);
		/* skip unwritten extents */
		while (i < m->n && m->v[i].flags & NVMEFS_EXT_UNWRITTEN &&
		       m->v[i].comp_off < seg.comp_off + seg.len)
			i++;
		if (i < m->n && m->v[i].comp_off < seg.comp_off + seg.len)
			x = &m->v[i];
		if (whence == SEEK_DATA && x) {
			uint64_t start = x->comp_off > seg.comp_off ? x->comp_off : seg.comp_off;

			*res = o + (start - seg.comp_off);
			ret = 0;
			goto out;
		}
		if (whence == SEEK_HOLE) {
			uint64_t pos = seg.comp_off;

			/* Follow written extents that continue from pos. */
			for (; i < m->n && m->v[i].comp_off <= pos && pos < seg.comp_off + seg.len;
			     i++) {
				if (m->v[i].flags & NVMEFS_EXT_UNWRITTEN)
					break;
				pos = m->v[i].comp_off + m->v[i].len;
			}
			if (pos < seg.comp_off + seg.len) {
				*res = o + (pos - seg.comp_off);
				ret = 0;
				goto out;
			}
		}
		o = chunk_end;
	}
	if (whence == SEEK_HOLE) {
		*res = size;
		ret = 0;
	}
out:
	pthread_mutex_unlock(&vol->lock);
	nvmefs_rl_unlock(&in->io_lock, &rl);
	if (!ret && *res > size)
		*res = size;
	return ret;
}

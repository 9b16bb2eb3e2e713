// SPDX-License-Identifier: MIT
/*
 * Test-only device faults and power-loss emulation (fault_i.h),
 * built into nvmefs_striping_fi only.
 *
 * Faults are decided per member under the member's own lock when an
 * operation is about to start, so "after N" counts operations in the order
 * they were started. The power-loss recorder is one per process (one device
 * set): a write is remembered with its old contents (read just before it
 * starts) and its new ones. Putting the old contents back in the reverse of
 * the order the writes started returns a member to what its flushes made
 * durable, whatever overlapped; replaying a chosen subset of the writes in
 * order then gives one state a power cut could leave. Writes to the same
 * blocks that are in flight at once would make the old contents racy, but
 * nvmefs never has two (data under the inode's lock, metadata under the
 * journal's).
 *
 * After the cut nothing may come back from a write either: a dead machine
 * answers no one. A write started past the cut is refused (FI_WRITE_DROPPED)
 * and its caller fails it with -EIO only so that the blocks of its request
 * already recorded still get queued; the thread then parks for good in
 * fi_submit_done, as the one that cuts does, so that error never reaches a
 * caller (a fsync's commit, a truncate's zeroing) that would answer the
 * application with it, or turn the volume read-only, while the cut still
 * waits for the writes in flight and rewrites the members. The completion
 * of such a request runs on the reaper: the daemon mutes those
 * (nvmefs_powerloss_cut).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine_i.h"
#include "fi_i.h"
#include "nvmefs/util.h"

#ifndef NVMEFS_FAULT_INJECTION
#error "fault.c is only built with NVMEFS_FAULT_INJECTION"
#endif

/* An unflushed write. */
struct pl_write {
	uint64_t id, off, len;
	void *old, *new;     /* len bytes each, aligned for O_DIRECT */
	uint64_t flush_mark; /* set by the first flush that starts after it ends */
	bool done;
};

struct nvmefs_devfi {
	pthread_mutex_t lock; /* the fault fields */
	struct nvmefs_fault fault;
	uint64_t seen, hits, refusals;
	uint64_t eagain_until; /* ns */

	/* pl.lock: this member's unflushed writes, in the order they started */
	struct pl_write *w;
	size_t n, cap;
	uint64_t flush_epoch;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct nvmefs_devset *set; /* recording on this set */
	bool frozen;		   /* the power is cut: no write starts again */
	bool cut_pending;	   /* the countdown ran out: cut at fi_submit_done */
	uint64_t next_id;
	uint64_t inflight;  /* recorded writes started and not finished */
	uint64_t countdown; /* writes until the cut, when armed */
	bool armed;
	struct nvmefs_powerloss opts;
	nvmefs_powerloss_fn fn;
} pl = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/* This thread had a write refused by the cut: fi_submit_done parks it. */
static __thread bool pl_refused;

/* ---- faults ---- */

int fi_dev_init(struct nvmefs_dev *dev)
{
	dev->fi = calloc(1, sizeof(*dev->fi));
	if (!dev->fi)
		return -ENOMEM;
	pthread_mutex_init(&dev->fi->lock, NULL);
	return 0;
}

static void pl_free_writes(struct nvmefs_devfi *fi, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++) {
		free(fi->w[i].old);
		free(fi->w[i].new);
	}
}

void fi_dev_exit(struct nvmefs_dev *dev)
{
	struct nvmefs_devfi *fi = dev->fi;

	if (!fi)
		return;
	pthread_mutex_lock(&pl.lock);
	if (pl.set && dev >= pl.set->devs && dev < pl.set->devs + pl.set->count) {
		pl.set = NULL; /* the set is being closed: recording ends */
		pl.armed = false;
		pl.cut_pending = false;
	}
	pl_free_writes(fi, 0, fi->n);
	pthread_mutex_unlock(&pl.lock);
	free(fi->w);
	pthread_mutex_destroy(&fi->lock);
	free(fi);
	dev->fi = NULL;
}

static bool fault_matches(const struct nvmefs_fault *f, unsigned op, uint64_t off, uint64_t len)
{
	unsigned ops = f->ops ? f->ops : NVMEFS_FAULT_READS | NVMEFS_FAULT_WRITES;

	if (!(ops & op))
		return false;
	if (op == NVMEFS_FAULT_FLUSHES)
		return true;
	if (off + len <= f->off_lo)
		return false;
	return f->off_hi == 0 || off < f->off_hi;
}

/* Whether the member's fault fires for this operation; called under
 * fi->lock. nomem: the fault asked for is the refusal at submission
 * (NVMEFS_FAULT_NOMEM), else any other kind. Counts what it matched. */
static bool fault_fires(struct nvmefs_devfi *fi, bool nomem, unsigned op, uint64_t off,
			uint64_t len)
{
	const struct nvmefs_fault *f = &fi->fault;

	if (f->kind == NVMEFS_FAULT_NONE || (f->kind == NVMEFS_FAULT_NOMEM) != nomem ||
	    !fault_matches(f, op, off, len) || fi->seen++ < f->after ||
	    (f->count && fi->hits >= f->count))
		return false;
	fi->hits++;
	return true;
}

enum fi_action fi_check(struct nvmefs_dev *dev, unsigned op, uint64_t off, uint64_t len)
{
	struct nvmefs_devfi *fi = dev->fi;
	enum fi_action act = FI_GO;

	if (!fi)
		return FI_GO;
	pthread_mutex_lock(&fi->lock);
	if (fault_fires(fi, false, op, off, len))
		act = fi->fault.kind == NVMEFS_FAULT_SHORT && op != NVMEFS_FAULT_FLUSHES ? FI_SHORT
											 : FI_FAIL;
	pthread_mutex_unlock(&fi->lock);
	return act;
}

unsigned fi_latency_us(struct nvmefs_dev *dev)
{
	unsigned us;

	if (!dev->fi)
		return 0;
	pthread_mutex_lock(&dev->fi->lock);
	us = dev->fi->fault.latency_us;
	pthread_mutex_unlock(&dev->fi->lock);
	return us;
}

bool fi_refuse_request(struct nvmefs_dev *dev, unsigned op, uint64_t off, uint64_t len)
{
	struct nvmefs_devfi *fi = dev->fi;
	bool refuse;

	if (!fi)
		return false;
	pthread_mutex_lock(&fi->lock);
	refuse = fault_fires(fi, true, op, off, len);
	pthread_mutex_unlock(&fi->lock);
	return refuse;
}

bool fi_refuse_submit(struct nvmefs_dev *dev)
{
	struct nvmefs_devfi *fi = dev->fi;
	bool refuse;

	if (!fi)
		return false;
	pthread_mutex_lock(&fi->lock);
	refuse = fi->eagain_until && nvmefs_now_ns() < fi->eagain_until;
	fi->refusals += refuse;
	pthread_mutex_unlock(&fi->lock);
	return refuse;
}

int nvmefs_dev_inject(struct nvmefs_dev *dev, const struct nvmefs_fault *f)
{
	struct nvmefs_devfi *fi = dev->fi;

	if (!fi || !f)
		return -EINVAL;
	pthread_mutex_lock(&fi->lock);
	fi->fault = *f;
	fi->seen = 0;
	fi->hits = 0;
	fi->refusals = 0;
	fi->eagain_until = f->eagain_ms ? nvmefs_now_ns() + f->eagain_ms * 1000000ull : 0;
	pthread_mutex_unlock(&fi->lock);
	return 0;
}

uint64_t nvmefs_dev_fault_hits(struct nvmefs_dev *dev)
{
	uint64_t n;

	pthread_mutex_lock(&dev->fi->lock);
	n = dev->fi->hits;
	pthread_mutex_unlock(&dev->fi->lock);
	return n;
}

uint64_t nvmefs_dev_fault_refusals(struct nvmefs_dev *dev)
{
	uint64_t n;

	pthread_mutex_lock(&dev->fi->lock);
	n = dev->fi->refusals;
	pthread_mutex_unlock(&dev->fi->lock);
	return n;
}

int nvmefs_engine_inject(struct nvmefs_engine *eng, unsigned dev, const struct nvmefs_fault *f)
{
	if (dev >= eng->set->count)
		return -EINVAL;
	return nvmefs_dev_inject(&eng->set->devs[dev], f);
}

uint64_t nvmefs_engine_fault_hits(struct nvmefs_engine *eng, unsigned dev)
{
	return nvmefs_dev_fault_hits(&eng->set->devs[dev]);
}

uint64_t nvmefs_engine_fault_refusals(struct nvmefs_engine *eng, unsigned dev)
{
	return nvmefs_dev_fault_refusals(&eng->set->devs[dev]);
}

/* ---- power loss ---- */

static bool pl_owns(const struct nvmefs_dev *dev)
{
	return pl.set && dev >= pl.set->devs && dev < pl.set->devs + pl.set->count;
}

/* Once the power is cut nothing may reach a member again: park the caller
 * until the process exits. pl.lock held. */
static void pl_park_if_frozen(void)
{
	while (pl.frozen)
		pthread_cond_wait(&pl.cond, &pl.lock);
}

static int pl_io(const struct nvmefs_dev *dev, bool write, uint64_t off, void *buf, uint64_t len)
{
	uint64_t done = 0;

	while (done < len) {
		ssize_t n =
			write ? pwrite(dev->fd, (char *)buf + done, len - done, (off_t)(off + done))
			      : pread(dev->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (uint64_t)n;
	}
	return 0;
}

static int pl_reserve(struct nvmefs_devfi *fi)
{
	struct pl_write *v;

	if (fi->n < fi->cap)
		return 0;
	v = realloc(fi->w, (fi->cap ? 2 * fi->cap : 64) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	fi->w = v;
	fi->cap = fi->cap ? 2 * fi->cap : 64;
	return 0;
}

/* splitmix64: small, seedable, and the same everywhere. */
static uint64_t pl_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Put one member in a state the cut could leave. pl.lock held, nothing in
 * flight. */
static void pl_rewrite(struct nvmefs_dev *dev, uint64_t *rng, struct nvmefs_powerloss_report *r)
{
	struct nvmefs_devfi *fi = dev->fi;
	int err = 0;

	for (size_t i = fi->n; i-- > 0 && !err;)
		err = pl_io(dev, true, fi->w[i].off, fi->w[i].old, fi->w[i].len);
	for (size_t i = 0; i < fi->n && !err; i++) {
		struct pl_write *w = &fi->w[i];
		unsigned roll = (unsigned)(pl_rand(rng) % 100);
		uint64_t blocks = w->len / dev->block_size;

		r->unflushed++;
		r->bytes += w->len;
		if (roll < pl.opts.keep_pct) {
			r->kept++;
			err = pl_io(dev, true, w->off, w->new, w->len);
		} else if (roll < pl.opts.keep_pct + pl.opts.tear_pct && blocks > 1) {
			r->torn++;
			err = pl_io(dev, true, w->off, w->new,
				    (1 + pl_rand(rng) % (blocks - 1)) * dev->block_size);
		} else {
			r->dropped++;
		}
	}
	if (!err && fdatasync(dev->fd) < 0)
		err = -errno;
	if (err && !r->error)
		r->error = err;
}

/* The cut (frozen already set). pl.lock held; does not return. */
static void pl_cut(void)
{
	struct nvmefs_powerloss_report r = {0};
	struct timespec limit;
	uint64_t rng;

	clock_gettime(CLOCK_REALTIME, &limit);
	limit.tv_sec += 10;
	while (pl.inflight) {
		if (pthread_cond_timedwait(&pl.cond, &pl.lock, &limit) == ETIMEDOUT) {
			/* Only a request submitted from a completion thread
			 * could wait on itself; say so rather than hang. */
			nvmefs_err("power loss: %" PRIu64 " write(s) still in flight after 10 s",
				   pl.inflight);
			r.error = -ETIMEDOUT;
			break;
		}
	}
	rng = pl.opts.seed;
	for (unsigned d = 0; pl.set && d < pl.set->count; d++)
		pl_rewrite(&pl.set->devs[d], &rng, &r);
	pl.fn(&r);
	abort(); /* fn must not return */
}

uint64_t fi_write_begin(struct nvmefs_dev *dev, uint64_t off, const void *buf, uint64_t len)
{
	struct nvmefs_devfi *fi = dev->fi;
	struct pl_write w = {.off = off, .len = len};
	uint64_t id = 0;

	pthread_mutex_lock(&pl.lock);
	if (!fi || !len || !pl_owns(dev))
		goto out;
	/* Past the cut nothing reaches a member. The caller may hold blocks of
	 * the same request already recorded but not yet queued, so it must not
	 * wait here: it fails this one and queues the rest. */
	if (pl.frozen) {
		id = FI_WRITE_DROPPED;
		pl_refused = true;
		goto out;
	}
	if (pl.armed && pl.countdown-- == 0) {
		pl.armed = false;
		pl.frozen = true;
		pl.cut_pending = true; /* the caller cuts in fi_submit_done */
		id = FI_WRITE_DROPPED;
		pl_refused = true;
		goto out;
	}
	if (pl_reserve(fi) ||
	    posix_memalign(&w.old, dev->mem_align > 4096 ? dev->mem_align : 4096, len) ||
	    posix_memalign(&w.new, dev->mem_align > 4096 ? dev->mem_align : 4096, len) ||
	    pl_io(dev, false, off, w.old, len)) {
		/* A recorder that cannot remember is a test failure, not a
		 * state to run on in. */
		nvmefs_err("%s: power-loss recorder: cannot record a write at %" PRIu64, dev->path,
			   off);
		abort();
	}
	memcpy(w.new, buf, len);
	w.id = id = ++pl.next_id;
	fi->w[fi->n++] = w;
	pl.inflight++;
out:
	pthread_mutex_unlock(&pl.lock);
	return id;
}

void fi_write_end(struct nvmefs_dev *dev, uint64_t id, bool written)
{
	struct nvmefs_devfi *fi = dev->fi;

	if (!id || id == FI_WRITE_DROPPED)
		return;
	pthread_mutex_lock(&pl.lock);
	for (size_t i = fi->n; i-- > 0;) {
		if (fi->w[i].id != id)
			continue;
		if (written) {
			fi->w[i].done = true;
		} else { /* never reached the member: nothing to keep or undo */
			pl_free_writes(fi, i, i + 1);
			memmove(&fi->w[i], &fi->w[i + 1], (fi->n - i - 1) * sizeof(*fi->w));
			fi->n--;
		}
		break;
	}
	pl.inflight--;
	pthread_cond_broadcast(&pl.cond);
	pthread_mutex_unlock(&pl.lock);
}

void fi_submit_done(void)
{
	if (!pl_refused) /* nothing of this thread's hit the cut */
		return;
	pthread_mutex_lock(&pl.lock);
	if (pl.cut_pending) {
		pl.cut_pending = false;
		pl_cut();
	}
	/* Someone else cuts: the -EIO this thread holds must not reach its
	 * caller. Everything it recorded is queued by now. */
	pl_park_if_frozen(); /* frozen never ends: this does not return */
	pthread_mutex_unlock(&pl.lock);
}

uint64_t fi_flush_begin(struct nvmefs_dev *dev)
{
	struct nvmefs_devfi *fi = dev->fi;
	uint64_t mark = 0;

	pthread_mutex_lock(&pl.lock);
	pl_park_if_frozen();
	if (fi && pl_owns(dev)) {
		mark = ++fi->flush_epoch;
		for (size_t i = 0; i < fi->n; i++) {
			if (fi->w[i].done && !fi->w[i].flush_mark)
				fi->w[i].flush_mark = mark;
		}
	}
	pthread_mutex_unlock(&pl.lock);
	return mark;
}

void fi_flush_end(struct nvmefs_dev *dev, uint64_t mark)
{
	struct nvmefs_devfi *fi = dev->fi;
	size_t k = 0;

	if (!mark)
		return;
	pthread_mutex_lock(&pl.lock);
	pl_park_if_frozen();
	if (pl_owns(dev)) {
		for (size_t i = 0; i < fi->n; i++) {
			struct pl_write *w = &fi->w[i];

			if (w->flush_mark && w->flush_mark <= mark)
				pl_free_writes(fi, i, i + 1);
			else
				fi->w[k++] = *w;
		}
		fi->n = k;
	}
	pthread_mutex_unlock(&pl.lock);
}

int nvmefs_powerloss_record(struct nvmefs_devset *set)
{
	int ret = 0;

	pthread_mutex_lock(&pl.lock);
	if (pl.set && pl.set != set)
		ret = -EBUSY;
	else
		pl.set = set;
	pthread_mutex_unlock(&pl.lock);
	return ret;
}

static int pl_check(const struct nvmefs_powerloss *o, nvmefs_powerloss_fn fn)
{
	if (!o || !fn || o->keep_pct > 100 || o->tear_pct > 100 - o->keep_pct)
		return -EINVAL;
	return pl.set ? 0 : -EINVAL;
}

bool nvmefs_powerloss_cut(void)
{
	bool frozen;

	pthread_mutex_lock(&pl.lock);
	frozen = pl.frozen;
	pthread_mutex_unlock(&pl.lock);
	return frozen;
}

int nvmefs_powerloss_now(const struct nvmefs_powerloss *o, nvmefs_powerloss_fn fn)
{
	int ret;

	pthread_mutex_lock(&pl.lock);
	pl_park_if_frozen(); /* someone else is cutting */
	ret = pl_check(o, fn);
	if (!ret) {
		pl.opts = *o;
		pl.fn = fn;
		pl.frozen = true;
		pl_cut();
	}
	pthread_mutex_unlock(&pl.lock);
	return ret;
}

int nvmefs_powerloss_after(uint64_t n, const struct nvmefs_powerloss *o, nvmefs_powerloss_fn fn)
{
	int ret;

	pthread_mutex_lock(&pl.lock);
	ret = pl_check(o, fn);
	if (!ret) {
		pl.opts = *o;
		pl.fn = fn;
		pl.countdown = n;
		pl.armed = true;
	}
	pthread_mutex_unlock(&pl.lock);
	return ret;
}

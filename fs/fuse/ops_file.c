// SPDX-License-Identifier: MIT
/*
 * The FUSE operations on a file's data (the rest are in ops.c, whose table
 * points here; ops_i.h holds what both share): OPEN and CREATE with their
 * handles (fh: the inode, direct mode's read-ahead state, the relatime
 * note) and the control files' handles, READ, WRITE, RELEASE, FSYNC,
 * FALLOCATE and LSEEK. Each decodes, calls the core (fs/core/namei.h,
 * the data path of data_i.h) and sends exactly one reply; READ and WRITE
 * reply from the I/O's completion.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "ops_i.h"
#include "journal_i.h"
#include "data_i.h"
#include "prefetch_i.h"
#include "reply_open_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <unistd.h>

#include "nvmefs/util.h"

/*
 * With the write-back cache the kernel accepts a write before we have space
 * for it, and a full volume shows only at fsync or close (as on NFS). So
 * once free space is below what the kernel may hold dirty for this mount
 * (plus a chunk per member), files opened for writing bypass the cache:
 * their writes get ENOSPC at write(2), as on a local filesystem.
 */
static bool low_space(struct nvmefs_vol *vol)
{
	uint64_t margin = vol->opts.dirty_bytes + (uint64_t)vol->ndevs * vol->label.chunk_size;
	bool low;

	pthread_mutex_lock(&vol->lock);
	low = vol->free_bytes < margin;
	pthread_mutex_unlock(&vol->lock);
	return low;
}

/*
 * An open file's handle (fi->fh): what READ and WRITE need without looking
 * the inode up under the metadata lock. The open count keeps the inode.
 */
struct handle {
	struct nvmefs_inode *in;
	struct nvmefs_prefetch *pf;   /* direct mode readers: read-ahead, else NULL */
	struct nvmefs_read_note note; /* relatime, nvmefs_ns_note_read */
};

/*
 * Direct mode, -o cache_small: a read-only open of a small regular file
 * goes through the page cache, as in cached mode. Direct I/O buys such a
 * file nothing (one request carries it whole) and costs it round trips: a
 * program that reads to the end (cp, cat, Python's read(), numpy.load)
 * sends a second READ that finds EOF, which the page cache answers from
 * i_size, and a file read again (each epoch of a data loader) is read
 * again. Only from FUSE 7.39 (Linux 6.6, vol->direct_mmap), whose
 * direct_io writes through the other handles invalidate the cached pages
 * they overwrite; the native door invalidates what it writes itself. The
 * size is the one at open: a file that grows stays cached for this handle.
 */
static bool cache_small(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			const struct fuse_file_info *fi)
{
	uint64_t max = nvmefs_cache_small_max(vol), size;

	if (!max || (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_DIRECT) ||
	    !S_ISREG(in->mode))
		return false;
	pthread_mutex_lock(&vol->lock);
	size = in->size;
	pthread_mutex_unlock(&vol->lock);
	return size <= max;
}

/* A read the kernel will not send, as statahead pushed the data: noted
 * now (relatime). */
static void note_pushed_read(struct nvmefs_vol *vol, struct handle *h)
{
	uint64_t gen = atomic_load(&h->in->attr_gen);

	nvmefs_ns_note_read(vol, h->in, &h->note);
	/* The kernel forgets its atime after a READ, not after this. */
	if (atomic_load(&h->in->attr_gen) != gen)
		nvmefs_loop_inval_attr(h->in->ino);
}

/* How the kernel caches the handle (see wronly_direct in op_init, ops.c), and the
 * handle's state (fh, freed at RELEASE); *cold: the handle goes through the
 * page cache, which held none of the file before (open_push). -ENOMEM. */
static int set_open_flags(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			  struct fuse_file_info *fi, bool *cold)
{
	bool wronly_direct = vol->wronly_direct && (fi->flags & O_ACCMODE) == O_WRONLY;
	bool cached = cache_small(vol, in, fi);
	bool strict_read =
		__atomic_load_n(&vol->opts.atime, __ATOMIC_RELAXED) == NVMEFS_ATIME_STRICTATIME &&
		(fi->flags & O_ACCMODE) != O_WRONLY;
	struct handle *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	fi->direct_io = (vol->opts.direct && !cached) || (fi->flags & O_DIRECT) || wronly_direct ||
			(vol->writeback && (fi->flags & O_ACCMODE) != O_RDONLY && low_space(vol));
	/* Its writes invalidate what they overwrite: the rest of the file's
	 * cache stays. Under strictatime a read open starts from an empty
	 * cache, so that each open's reads reach us and move atime (a read
	 * from the page cache reaches no FUSE server; generic/003). */
	fi->keep_cache = (!fi->direct_io || wronly_direct) && !strict_read;
	/* A load first: a warm open (the common one) writes no shared line. */
	*cold = !fi->direct_io && !atomic_load(&in->kernel_pages) &&
		!atomic_exchange(&in->kernel_pages, true);
	h->in = in;
	/* A push stored the data (fs/fuse/statahead.c): this open's reads
	 * will not reach us, so the first is noted now (relatime). */
	if (atomic_load(&in->pushed) && atomic_exchange(&in->pushed, false) && cached)
		note_pushed_read(vol, h);
	if (cached)
		nvmefs_sa_open(in->ino);
	if (vol->opts.direct && !cached && vol->opts.prefetch && S_ISREG(in->mode) &&
	    (fi->flags & O_ACCMODE) != O_WRONLY)
		h->pf = nvmefs_prefetch_open(in);
	fi->fh = (uintptr_t)h;
	return 0;
}

static struct handle *fh_of(const struct fuse_file_info *fi)
{
	return (struct handle *)(uintptr_t)fi->fh;
}

/* A control file's text is made at open and served from the handle. */
struct ctl_handle {
	size_t len;
	char *text;
};

static void open_ctl(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ctl_handle *h;
	int ret;

	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EACCES);
		return;
	}
	h = calloc(1, sizeof(*h));
	ret = h ? nvmefs_ctl_render(VOL(req), ino, &h->text) : -ENOMEM;
	if (ret) {
		free(h);
		fuse_reply_err(req, -ret);
		return;
	}
	h->len = strlen(h->text);
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1; /* st_size is 0: read to EOF, as for /proc */
	fi->keep_cache = 0;
	if (nvmefs_reply_open(req, fi)) {
		free(h->text); /* no RELEASE comes for it */
		free(h);
	}
}

/*
 * Reply from a copy: once the reply is written the reader may close the
 * file, and the RELEASE, on another worker, frees the handle while this
 * worker is still returning from writev.
 */
static void read_ctl(fuse_req_t req, const struct ctl_handle *h, size_t size, off_t off)
{
	size_t n = off < 0 || (size_t)off >= h->len ? 0 : MIN(size, h->len - (size_t)off);
	char *copy = n ? malloc(n) : NULL;

	if (n && !copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (n)
		memcpy(copy, h->text + off, n);
	fuse_reply_buf(req, copy, n);
	free(copy);
}

/* Undo an open: at RELEASE, or when the kernel did not take the open's reply. */
static void release_handle(struct nvmefs_vol *vol, fuse_ino_t ino, const struct fuse_file_info *fi)
{
	if (nvmefs_ctl_ino(ino)) {
		struct ctl_handle *h = (struct ctl_handle *)(uintptr_t)fi->fh;

		free(h->text);
		free(h);
		return;
	}
	/* The handle's read-ahead windows go while it still keeps the inode,
	 * and before the file's space can go. A failed open made none. (Its
	 * writes answered early may still be in flight: the space then waits
	 * for a commit, nvmefs_data_free_inode.) */
	if (fh_of(fi)) {
		nvmefs_prefetch_close(fh_of(fi)->in, fh_of(fi)->pf);
		free(fh_of(fi));
	}
	nvmefs_ns_release(vol, ino);
}

/*
 * Reply to OPEN. When the kernel does not take the reply (the request was
 * aborted), no RELEASE will come for the handle: release it here, as
 * libfuse's high-level API does. A reply the test daemon loses on purpose
 * reaches the opener as EINTR and is released the same way.
 */
static void reply_open(fuse_req_t req, fuse_ino_t ino, const struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);

	if (lose_reply(&vol->test_lose_opens))
		fuse_reply_err(req, EINTR);
	else if (!nvmefs_reply_open(req, fi))
		return;
	release_handle(vol, ino, fi);
}

/* Reply to CREATE; a reply not taken gives back the lookup and the handle. */
static void reply_create(fuse_req_t req, const struct fuse_entry_param *e,
			 const struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);

	if (lose_reply(&vol->test_lose_opens))
		fuse_reply_err(req, EINTR);
	else if (!fuse_reply_create(req, e, fi))
		return;
	nvmefs_ns_forget(vol, e->ino, 1);
	release_handle(vol, e->ino, fi);
}

/* The test daemon after its emulated power cut: no more answers. */
static bool muted(fuse_req_t req)
{
	struct nvmefs_vol *vol = VOL(req);

	return vol->test_mute && vol->test_mute();
}

/*
 * A cold open's push. A program that opens a small file to read it sends
 * OPEN and then READ, and waits for each; the READ's round trip carries
 * only the device read. So a read-only open through the page cache
 * (cached mode, or direct mode's cache_small) of a file the kernel holds
 * no pages of (in->kernel_pages) reads the data while the OPEN waits,
 * stores it in the kernel's page cache with FUSE_NOTIFY_STORE (as
 * statahead's push does, under the same rules: the file open nowhere
 * else, every other open and truncation waiting, the store made with the
 * range locked) and replies only then: the program's reads find the pages
 * and send nothing. One round trip a cold read fewer (cp, tar, a data
 * loader in any order, which statahead does not follow). Only when a read
 * would leave the atime (noatime, the file's +A, or relatime's rule: the
 * file was read since it last changed, within a day): the program's reads
 * reach nobody who could move it, and an open that reads nothing leaves it,
 * as on a local filesystem. The first read after a change moves it with
 * its READ; each one after (a data loader's next epoch) is pushed. Files
 * of at most OPEN_PUSH_MAX: reading that much costs about the round trip
 * it saves (~20 us at 3 GB/s) even when the opener reads nothing. Not with the
 * write-back cache, whose dirty pages outlive the handles that made them:
 * a store would overwrite them with what the devices hold.
 */
#define OPEN_PUSH_MAX (64u << 10)

struct open_push {
	fuse_req_t req;
	fuse_ino_t ino;
	struct fuse_file_info fi;
	bool stored;
};

/* The file's data, read under its range lock: into the kernel's cache. */
static void open_push_store(void *ctx, ssize_t res, const void *data)
{
	struct open_push *p = ctx;

	if (res > 0 && !muted(p->req))
		p->stored = !nvmefs_loop_store(p->ino, data, (size_t)res);
}

static void open_push_done(void *ctx, ssize_t res, const void *data)
{
	struct open_push *p = ctx;
	struct nvmefs_vol *vol = VOL(p->req);
	struct handle *h = fh_of(&p->fi);

	(void)res;
	(void)data;
	nvmefs_ns_open_push_end(vol, h->in);
	if (p->stored)
		atomic_fetch_add_explicit(&vol->stats.open_pushes, 1, memory_order_relaxed);
	/* Pushed or not, the open stands: a failed read is the READ's to report. */
	if (!muted(p->req))
		reply_open(p->req, p->ino, &p->fi);
	free(p);
}

/* Reply to the open of in (cold: set_open_flags's) from a push when one
 * suits it: true when it will. */
static bool open_push(fuse_req_t req, fuse_ino_t ino, struct nvmefs_inode *in,
		      const struct fuse_file_info *fi, bool cold)
{
	struct nvmefs_vol *vol = VOL(req);
	struct open_push *p;
	uint64_t size;
	void *buf;

	if (!cold || vol->writeback || !fi->keep_cache || (fi->flags & O_ACCMODE) != O_RDONLY ||
	    (fi->flags & O_TRUNC))
		return false;
	if (nvmefs_ns_open_push_begin(vol, in, OPEN_PUSH_MAX, &size))
		return false;
	/* Never a wait for a buffer: the OPEN would wait, and on an io_uring
	 * queue every request behind it. */
	p = malloc(sizeof(*p));
	buf = p ? nvmefs_loop_try_buf(vol) : NULL;
	if (!buf) {
		nvmefs_ns_open_push_end(vol, in);
		free(p);
		return false;
	}
	*p = (struct open_push){.req = req, .ino = ino, .fi = *fi};
	nvmefs_data_read_hold(vol, in, buf, (size_t)size, open_push_store, open_push_done, p);
	return true;
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	bool cold;
	int err;

	if (nvmefs_ctl_ino(ino)) {
		open_ctl(req, ino, fi);
		return;
	}
	/* As Linux does, O_TRUNC truncates whatever the access mode (the kernel
	 * has checked write permission); the core refuses what the file's
	 * immutable or append-only flag forbids. */
	err = nvmefs_ns_open(vol, ino, fi->flags, &in);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	fi->fh = 0;
	/* With FUSE_ATOMIC_O_TRUNC the kernel leaves the truncation, and the
	 * privileges it takes, to us. */
	if ((fi->flags & O_TRUNC) && (err = kill_privs(req, in, ino))) {
		release_handle(vol, ino, fi);
		fuse_reply_err(req, -err);
		return;
	}
	err = set_open_flags(vol, in, fi, &cold);
	if (err) {
		release_handle(vol, ino, fi);
		fuse_reply_err(req, -err);
		return;
	}
	if (!open_push(req, ino, in, fi, cold))
		reply_open(req, ino, fi);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_cred cred = req_cred(req);
	struct fuse_entry_param e;
	struct nvmefs_inode *in;
	struct stat st;
	bool cold; /* a new file: nothing to push */
	int err;

	if (refuse_ctl(req, parent, 0, NULL))
		return;
	err = nvmefs_ns_create(vol, &cred, parent, name, mode, &st, &in);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	fill_entry(&st, &e);
	fi->fh = 0;
	err = set_open_flags(vol, in, fi, &cold);
	if (err) {
		/* The file is made; the opener learns it failed, as after a
		 * lost reply. */
		nvmefs_ns_forget(vol, st.st_ino, 1);
		release_handle(vol, st.st_ino, fi);
		fuse_reply_err(req, -err);
		return;
	}
	reply_create(req, &e, fi);
}

static void read_done(void *ctx, ssize_t res, const void *data)
{
	if (muted(ctx))
		return;
	/* The request is answered whatever the send's outcome: never reply twice. */
	if (res < 0)
		fuse_reply_err(ctx, (int)-res);
	else
		fuse_reply_buf(ctx, data, (size_t)res);
}

static void write_done(void *ctx, ssize_t res, const void *data)
{
	if (muted(ctx))
		return;
	if (res < 0)
		fuse_reply_err(ctx, (int)-res);
	else
		fuse_reply_write(ctx, (size_t)res);
}

/* A READ's or WRITE's file and offset are right; else replied to. */
static bool rw_check(fuse_req_t req, const struct nvmefs_inode *in, off_t off)
{
	int err = !S_ISREG(in->mode) ? EISDIR : off < 0 ? EINVAL : 0;

	if (err)
		fuse_reply_err(req, err);
	return !err;
}

/* The request's pool buffer, for the data path; NULL when replied to. */
static void *take_buf(fuse_req_t req)
{
	void *buf = nvmefs_loop_take_buf(VOL(req));

	if (!buf)
		fuse_reply_err(req, ENOMEM);
	return buf;
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	void *buf = NULL, *area;
	size_t cap;

	if (nvmefs_ctl_ino(ino)) {
		read_ctl(req, (const struct ctl_handle *)(uintptr_t)fi->fh, size, off);
		return;
	}
	in = fh_of(fi)->in;
	if (!rw_check(req, in, off))
		return;
	/* On an io_uring queue an aligned READ that no read-ahead window
	 * answers is read straight into the payload it is answered from: no
	 * copy (fs/fuse/uring.c); a window's bytes are copied there. */
	area = nvmefs_uring_payload(&cap);
	if (!area || size > cap || (((uint64_t)off | size) % NVMEFS_BLOCK))
		area = NULL;
	if (!area && !(buf = take_buf(req)))
		return;
	nvmefs_ns_note_read(vol, in, &fh_of(fi)->note);
	/* Direct mode has no kernel readahead: nvmefs reads ahead itself, on
	 * the handles set_open_flags gave read-ahead state; the others are
	 * read as asked. */
	nvmefs_prefetch_read(vol, in, fh_of(fi)->pf, area ? NULL : buf, area, size, (uint64_t)off,
			     read_done, req);
}

/*
 * May this WRITE be answered before the devices complete it? Only what
 * the page cache would have taken: at most -o write_behind bytes, through
 * a handle that asked neither for O_DIRECT nor for O_SYNC or O_DSYNC (the
 * kernel follows an RWF_DSYNC write with an FSYNC, which waits for it),
 * and not a write-back of the kernel's pages.
 */
static bool behind_ok(const struct nvmefs_vol *vol, const struct fuse_file_info *fi, size_t size)
{
	return size <= vol->opts.write_behind && !fi->writepage &&
	       !(fi->flags & (O_DIRECT | O_SYNC | O_DSYNC));
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
	      struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	unsigned flags = 0;
	void *buf;
	size_t cap;
	int err = nvmefs_ns_may_change(vol);

	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	in = fh_of(fi)->in;
	if (!rw_check(req, in, off))
		return;
	/* As the kernel does, privileges go before the data changes. The
	 * kernel's own write-back has done it at write(2). */
	if (!fi->writepage) {
		int ret = kill_privs(req, in, ino);

		if (ret) {
			fuse_reply_err(req, -ret);
			return;
		}
	}
	/* With the write-back cache the kernel has placed O_APPEND writes
	 * itself, and its write-back uses any open file: ignore the flag.
	 * Only with the write-back cache does the kernel own mtime and ctime
	 * (and send them later in a SETATTR). Without it, a write-back request
	 * is the write-back of pages dirtied through a shared mmap (in both
	 * modes: direct mode maps through the page cache too), whose times
	 * the kernel does not keep (its FUSE inodes are S_NOCMTIME): they are
	 * ours to set, as for any write (generic/080, generic/215). The kernel
	 * forgets its cached times when that write-back completes. */
	if ((fi->flags & O_APPEND) && !vol->writeback)
		flags |= NVMEFS_WRITE_APPEND;
	if (fi->writepage && vol->writeback)
		flags |= NVMEFS_WRITE_KEEP_TIMES;
	/* A small write that asks for no durability is answered early:
	 * its caller does not wait for the devices (data_i.h). It needs a
	 * buffer that outlives the reply: on an io_uring queue one free now
	 * (no wait holds the queue), else the payload's own. */
	if (behind_ok(vol, fi, size)) {
		flags |= NVMEFS_WRITE_BEHIND;
		buf = nvmefs_uring_payload(&cap) == data ? nvmefs_loop_try_buf(vol) : take_buf(req);
		if (buf) {
			nvmefs_data_write_async(vol, in, buf, data, size, (uint64_t)off, flags,
						write_done, req);
			return;
		}
		if (nvmefs_uring_payload(&cap) != data)
			return; /* take_buf replied */
		flags &= ~NVMEFS_WRITE_BEHIND;
	}
	/* On an io_uring queue the data lies page-aligned where the kernel put
	 * it, ours until the reply: the devices write straight from it. */
	if (nvmefs_uring_payload(&cap) == data) {
		nvmefs_data_write_from(vol, in, data, size, (uint64_t)off, flags, write_done, req);
		return;
	}
	buf = take_buf(req);
	if (buf)
		nvmefs_data_write_async(vol, in, buf, data, size, (uint64_t)off, flags, write_done,
					req);
}

void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	release_handle(VOL(req), ino, fi);
	fuse_reply_err(req, 0);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);

	fuse_reply_err(req, nvmefs_ctl_ino(ino) || !fh_of(fi)
				    ? -nvmefs_journal_commit(vol)
				    : -nvmefs_journal_fsync(vol, fh_of(fi)->in));
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -nvmefs_journal_commit(VOL(req)));
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		  struct fuse_file_info *fi)
{
	struct nvmefs_inode *in;
	int err;

	(void)fi;
	if (refuse_ctl(req, ino, 0, NULL))
		return;
	if (offset < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL); /* the kernel checks it first */
		return;
	}
	err = nvmefs_ns_may_change(VOL(req)) ?: nvmefs_ns_get(VOL(req), ino, &in);
	if (!err) {
		err = kill_privs(req, in, ino);
		nvmefs_ns_put(VOL(req), in);
	}
	if (!err)
		err = nvmefs_ns_fallocate(VOL(req), ino, mode, (uint64_t)offset, (uint64_t)length);
	fuse_reply_err(req, -err);
}

void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	uint64_t res = 0;
	int ret;

	if ((whence != SEEK_DATA && whence != SEEK_HOLE) || nvmefs_ctl_ino(ino)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	ret = nvmefs_ns_get(vol, ino, &in);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	ret = nvmefs_data_seek(vol, in, (uint64_t)off, whence, &res);
	nvmefs_ns_put(vol, in);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_lseek(req, (off_t)res);
}

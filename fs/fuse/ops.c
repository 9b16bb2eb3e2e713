// SPDX-License-Identifier: MIT
/*
 * The FUSE low-level operations: decode the request, check it, change the
 * in-memory metadata under the metadata lock (logging each change as a
 * journal record), drop the lock, and send exactly one reply. Permissions
 * are the kernel's (default_permissions); POSIX rules that the kernel leaves
 * to the filesystem (link counts, timestamps, setgid inheritance, rename
 * over targets, orphans) are here. The kernel's lookup count keeps an inode
 * in memory after its last link goes; its space goes at the last close.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "door_i.h"
#include "namei.h"
#include "journal_i.h"
#include "data_i.h"
#include "prefetch_i.h"
#include "xlayout_i.h"
#include "reply_open_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "nvmefs/util.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* How long the kernel may trust a name or attributes we gave it. Every
 * change reaches the volume through this mount, and the kernel updates or
 * drops what it cached for the changes it sends, so the cache may be kept
 * long: 10,000 small files went from 3,868 to 5,198 files/s when this went
 * from 1 s to 60 s (fewer LOOKUP and GETATTR round trips). */
/* Linux 6.6's uapi header has it; Debian 12's (FUSE 7.38) does not. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

#define TIMEOUT NVMEFS_ATTR_TIMEOUT

static struct nvmefs_vol *VOL(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* An entry reply for the attributes st of an inode the core counted a
 * reference on (the kernel's lookup count, given back by FORGET). */
static void fill_entry(const struct stat *st, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = st->st_ino;
	e->generation = 1;
	e->attr_timeout = TIMEOUT;
	e->entry_timeout = TIMEOUT;
	e->attr = *st;
}

/* The caller's ids, for the core. */
static struct nvmefs_cred req_cred(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	return (struct nvmefs_cred){.uid = ctx->uid, .gid = ctx->gid, .pid = ctx->pid};
}

/*
 * Before the caller changes in's data or size where the kernel does not take
 * the privileges away itself (direct_io writes, O_TRUNC opens, which it
 * leaves to the OPEN, fallocate and writes by callers outside the file's
 * group): take them, and drop the mode the kernel caches, which exec and
 * `stat -c %A` read. 0 or -errno.
 */
static int kill_privs(fuse_req_t req, struct nvmefs_inode *in, fuse_ino_t ino)
{
	struct nvmefs_cred cred = req_cred(req);
	int ret = nvmefs_ns_kill_privs(VOL(req), in, &cred);

	if (ret > 0)
		nvmefs_loop_inval_attr(ino);
	return ret < 0 ? ret : 0;
}

/* The root's ".nvmefs" is the control directory (fs/fuse/ctl.c), never a file. */
static bool is_ctl_name(uint64_t parent, const char *name)
{
	return parent == NVMEFS_ROOT_INO && !strcmp(name, NVMEFS_CTL_NAME);
}

/*
 * The control directory and its files are not changed by any request:
 * EPERM when a or b (inodes) is one, or name in a is ".nvmefs" (removing or
 * renaming it). Replies and returns true then.
 */
static bool refuse_ctl(fuse_req_t req, fuse_ino_t a, fuse_ino_t b, const char *name)
{
	if (!nvmefs_ctl_ino(a) && !nvmefs_ctl_ino(b) && !(name && is_ctl_name(a, name)))
		return false;
	fuse_reply_err(req, EPERM);
	return true;
}

/*
 * Reply with an entry of the core's (one reference counted) or an error.
 * When the kernel does not take the reply (the request was aborted), it
 * never counts the lookup, and no FORGET will come for it: give it back.
 */
static void reply_entry(fuse_req_t req, int err, const struct stat *st)
{
	struct nvmefs_vol *vol = VOL(req); /* the reply frees req */
	struct fuse_entry_param e;

	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	fill_entry(st, &e);
	if (fuse_reply_entry(req, &e))
		nvmefs_ns_forget(vol, e.ino, 1);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct nvmefs_vol *vol = VOL(req);
	struct fuse_entry_param e;
	struct stat st;
	int err;

	if (strlen(name) > NVMEFS_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	err = nvmefs_ctl_lookup(vol, parent, name, &e);
	if (err < 0) {
		fuse_reply_err(req, -err);
	} else if (!err) {
		fuse_reply_entry(req, &e); /* control inodes count no lookups */
	} else {
		int pid = fuse_req_ctx(req)->pid; /* the reply frees req */
		uint64_t cookie = 0, entries = 0;

		err = nvmefs_ns_lookup_cookie(vol, parent, name, &st, &cookie, &entries);
		reply_entry(req, err, &st);
		if (!err)
			nvmefs_sa_lookup(parent, cookie, entries, pid);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	nvmefs_ns_forget(VOL(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		nvmefs_ns_forget(VOL(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct stat st;
	int err;

	(void)fi;
	if (nvmefs_ctl_ino(ino))
		err = nvmefs_ctl_stat(vol, ino, &st);
	else
		err = nvmefs_ns_getattr(vol, ino, &st);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

_Static_assert(NVMEFS_SET_MODE == FUSE_SET_ATTR_MODE && NVMEFS_SET_UID == FUSE_SET_ATTR_UID &&
		       NVMEFS_SET_GID == FUSE_SET_ATTR_GID &&
		       NVMEFS_SET_SIZE == FUSE_SET_ATTR_SIZE &&
		       NVMEFS_SET_ATIME == FUSE_SET_ATTR_ATIME &&
		       NVMEFS_SET_MTIME == FUSE_SET_ATTR_MTIME &&
		       NVMEFS_SET_ATIME_NOW == FUSE_SET_ATTR_ATIME_NOW &&
		       NVMEFS_SET_MTIME_NOW == FUSE_SET_ATTR_MTIME_NOW &&
		       NVMEFS_SET_CTIME == FUSE_SET_ATTR_CTIME,
	       "the core's setattr bits are FUSE's");

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct nvmefs_cred cred;
	struct stat st;
	int err;

	(void)fi;
	if (nvmefs_ctl_ino(ino)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	cred = req_cred(req);
	err = nvmefs_ns_setattr(VOL(req), &cred, ino, attr, to_set, &st);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char *target;
	int err = nvmefs_ns_readlink(VOL(req), ino, &target);

	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_readlink(req, target);
	free(target);
}

/* ---- names ---- */

static void reply_new(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		      const char *target)
{
	struct nvmefs_cred cred = req_cred(req);
	struct stat st;
	int err;

	if (refuse_ctl(req, parent, 0, NULL))
		return;
	err = nvmefs_ns_mknod(VOL(req), &cred, parent, name, mode, rdev, target, &st);
	reply_entry(req, err, &st);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	if (S_ISDIR(mode) || S_ISLNK(mode)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	reply_new(req, parent, name, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	reply_new(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	reply_new(req, parent, name, S_IFLNK | 0777, 0, link);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct stat st;
	int err;

	if (refuse_ctl(req, ino, newparent, NULL))
		return;
	err = nvmefs_ns_link(VOL(req), ino, newparent, newname, &st);
	reply_entry(req, err, &st);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (refuse_ctl(req, parent, 0, name))
		return;
	fuse_reply_err(req, -nvmefs_ns_unlink(VOL(req), parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (refuse_ctl(req, parent, 0, name))
		return;
	fuse_reply_err(req, -nvmefs_ns_rmdir(VOL(req), parent, name));
}

_Static_assert(NVMEFS_RENAME_NOREPLACE == RENAME_NOREPLACE &&
		       NVMEFS_RENAME_EXCHANGE == RENAME_EXCHANGE,
	       "the core's rename flags are renameat2's");

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	if (refuse_ctl(req, parent, newparent, name))
		return;
	fuse_reply_err(req, -nvmefs_ns_rename(VOL(req), parent, name, newparent, newname, flags));
}

/* ---- files ---- */

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

/* How the kernel caches the handle (see wronly_direct in op_init), and the
 * handle's state (fh, freed at RELEASE). -ENOMEM. */
static int set_open_flags(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			  struct fuse_file_info *fi)
{
	bool wronly_direct = vol->wronly_direct && (fi->flags & O_ACCMODE) == O_WRONLY;
	bool strict_read =
		__atomic_load_n(&vol->opts.atime, __ATOMIC_RELAXED) == NVMEFS_ATIME_STRICTATIME &&
		(fi->flags & O_ACCMODE) != O_WRONLY;
	struct handle *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	fi->direct_io = vol->opts.direct || (fi->flags & O_DIRECT) || wronly_direct ||
			(vol->writeback && (fi->flags & O_ACCMODE) != O_RDONLY && low_space(vol));
	/* Its writes invalidate what they overwrite: the rest of the file's
	 * cache stays. Under strictatime a read open starts from an empty
	 * cache, so that each open's reads reach us and move atime (a read
	 * from the page cache reaches no FUSE server; generic/003). */
	fi->keep_cache = (!fi->direct_io || wronly_direct) && !strict_read;
	h->in = in;
	if (vol->opts.direct && vol->opts.prefetch && S_ISREG(in->mode) &&
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
	 * and before the file's space can go. A failed open made none. */
	if (fh_of(fi)) {
		nvmefs_prefetch_close(fh_of(fi)->in, fh_of(fi)->pf);
		free(fh_of(fi));
	}
	nvmefs_ns_release(vol, ino);
}

/* The test daemon loses this OPEN or CREATE reply (testctl "lose_open"). */
static bool lose_open_reply(struct nvmefs_vol *vol)
{
	unsigned n = atomic_load(&vol->test_lose_opens);

	while (n && !atomic_compare_exchange_weak(&vol->test_lose_opens, &n, n - 1))
		;
	return n != 0;
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

	if (lose_open_reply(vol))
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

	if (lose_open_reply(vol))
		fuse_reply_err(req, EINTR);
	else if (!fuse_reply_create(req, e, fi))
		return;
	nvmefs_ns_forget(vol, e->ino, 1);
	release_handle(vol, e->ino, fi);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	int err;

	if (nvmefs_ctl_ino(ino)) {
		open_ctl(req, ino, fi);
		return;
	}
	/* As Linux does, O_TRUNC truncates whatever the access mode (the kernel
	 * has checked write permission). */
	err = nvmefs_ns_open(vol, ino, fi->flags & O_TRUNC, &in);
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
	err = set_open_flags(vol, in, fi);
	if (err) {
		release_handle(vol, ino, fi);
		fuse_reply_err(req, -err);
		return;
	}
	reply_open(req, ino, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_cred cred = req_cred(req);
	struct fuse_entry_param e;
	struct nvmefs_inode *in;
	struct stat st;
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
	err = set_open_flags(vol, in, fi);
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

/* The test daemon after its emulated power cut: no more answers. */
static bool muted(fuse_req_t req)
{
	struct nvmefs_vol *vol = VOL(req);

	return vol->test_mute && vol->test_mute();
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

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	void *buf, *area;
	size_t cap;

	if (nvmefs_ctl_ino(ino)) {
		read_ctl(req, (const struct ctl_handle *)(uintptr_t)fi->fh, size, off);
		return;
	}
	in = fh_of(fi)->in;
	if (!rw_check(req, in, off))
		return;
	/* On an io_uring queue an aligned READ of a handle that is not read
	 * ahead is read straight into the payload it is answered from: no
	 * copy (fs/fuse/uring.c). Read-ahead handles keep their windows. */
	area = fh_of(fi)->pf ? NULL : nvmefs_uring_payload(&cap);
	if (area && size <= cap && !(((uint64_t)off | size) % NVMEFS_BLOCK)) {
		nvmefs_ns_note_read(vol, in, &fh_of(fi)->note);
		nvmefs_data_read_into(vol, in, area, size, (uint64_t)off, read_done, req);
		return;
	}
	if (!(buf = take_buf(req)))
		return;
	nvmefs_ns_note_read(vol, in, &fh_of(fi)->note);
	/* Direct mode has no kernel readahead: nvmefs reads ahead itself, on
	 * the handles set_open_flags gave read-ahead state; the others are
	 * read as asked. */
	nvmefs_prefetch_read(vol, in, fh_of(fi)->pf, buf, size, (uint64_t)off, read_done, req);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	unsigned flags = 0;
	void *buf;
	size_t cap;

	if (nvmefs_ns_read_only(vol)) {
		fuse_reply_err(req, EROFS);
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

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	release_handle(VOL(req), ino, fi);
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -nvmefs_journal_commit(VOL(req)));
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
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
	err = nvmefs_ns_read_only(VOL(req)) ? -EROFS : nvmefs_ns_get(VOL(req), ino, &in);
	if (!err) {
		err = kill_privs(req, in, ino);
		nvmefs_ns_put(VOL(req), in);
	}
	if (!err)
		err = nvmefs_ns_fallocate(VOL(req), ino, mode, (uint64_t)offset, (uint64_t)length);
	fuse_reply_err(req, -err);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
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

/* ---- directories ---- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	int err;

	if (nvmefs_ctl_ino(ino)) {
		if (ino == NVMEFS_CTL_DIR)
			fuse_reply_open(req, fi);
		else
			fuse_reply_err(req, ENOTDIR);
		return;
	}
	err = nvmefs_ns_opendir(vol, ino);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_open(req, fi);
}

/* A readdir(plus) reply being filled. */
struct dirbuf {
	fuse_req_t req;
	char *buf;
	size_t size, pos;
	bool plus;
};

/* Add one entry; false when it does not fit (nothing added). */
static bool add_entry(void *arg, const char *name, uint64_t ino, mode_t mode, off_t next,
		      const struct stat *st)
{
	struct dirbuf *db = arg;
	size_t n;

	if (db->plus) {
		struct fuse_entry_param e = {0};

		if (st) {
			fill_entry(st, &e);
		} else {
			e.attr.st_ino = ino;
			e.attr.st_mode = mode;
		}
		n = fuse_add_direntry_plus(db->req, db->buf + db->pos, db->size - db->pos, name, &e,
					   next);
	} else {
		struct stat s = {.st_ino = ino, .st_mode = mode};

		n = fuse_add_direntry(db->req, db->buf + db->pos, db->size - db->pos, name, &s,
				      next);
	}
	if (n > db->size - db->pos)
		return false;
	db->pos += n;
	return true;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct nvmefs_vol *vol = VOL(req);
	struct dirbuf db = {.req = req, .buf = malloc(size), .size = size, .plus = plus};
	int err = 0;

	if (!db.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (ino == NVMEFS_CTL_DIR)
		db.pos = nvmefs_ctl_readdir(req, vol, db.buf, size, off, plus);
	else
		err = nvmefs_ns_readdir(vol, ino, off, plus, add_entry, &db);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_buf(req, db.buf, db.pos);
	free(db.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	if (nvmefs_sa_self(fuse_req_ctx(req)->pid))
		fuse_reply_buf(req, NULL, 0); /* statahead wants READDIRPLUS only */
	else
		do_readdir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st;

	(void)ino;
	nvmefs_ns_statfs(VOL(req), &st);
	fuse_reply_statfs(req, &st);
}

/* ---- extended attributes ---- */

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct nvmefs_vol *vol = VOL(req);

	if (refuse_ctl(req, ino, 0, NULL))
		return;
	if (vol->test_ctl && ino == FUSE_ROOT_ID && !strcmp(name, NVMEFS_TEST_CTL_XATTR)) {
		fuse_reply_err(req, -vol->test_ctl(vol, value, size));
		return;
	}
	fuse_reply_err(req, -nvmefs_xattr_set(vol, ino, name, value, size, flags));
}

/* A getxattr or listxattr reply: the length n (or -errno) for a size of 0,
 * else the n bytes of buf. */
static void reply_xattr(fuse_req_t req, const void *buf, ssize_t n, size_t size)
{
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (!size)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	void *buf = NULL;
	ssize_t n;

	if (nvmefs_ctl_ino(ino)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = nvmefs_xattr_get(VOL(req), ino, name, buf, size);
	reply_xattr(req, buf, n, size);
	free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = NULL;
	ssize_t n = 0;

	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!nvmefs_ctl_ino(ino)) /* control inodes have none */
		n = nvmefs_xattr_list(VOL(req), ino, buf, size);
	reply_xattr(req, buf, n, size);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (refuse_ctl(req, ino, 0, NULL))
		return;
	fuse_reply_err(req, -nvmefs_xattr_remove(VOL(req), ino, name));
}

/* ---- session ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct nvmefs_vol *vol = userdata;

	/* Let the kernel clear setuid/setgid on write, truncate and chown by
	 * sending SETATTR; we do not second-guess it. */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/* We do not implement splice-friendly buffers (yet): plain copies. */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* O_DIRECT requests (aio or large) go out in parallel, not one by one. */
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	/* File handles (NFS export, open_by_handle_at) that outlive the
	 * kernel's inode: it looks "." and ".." up (namei.c lookup_dots). */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/* -o writeback (cached mode): writes land in the page cache and reach
	 * us as large write-back requests, many at a time, instead of one
	 * synchronous request per write(2). The kernel then owns size, mtime
	 * and ctime, and a full volume shows at fsync or close. */
	vol->writeback = vol->opts.writeback && !vol->opts.direct &&
			 (conn->capable & FUSE_CAP_WRITEBACK_CACHE);
	if (vol->writeback)
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* Cached mode without it writes through: each write(2) is one WRITE
	 * either way, and the kernel's copy of the data into the page cache
	 * only helps a later read on this host. A write-only handle (dd of=,
	 * cp, torch.save, a log) cannot be mmap'ed, so it goes direct_io: no
	 * copy into the page cache, no memory taken from it for a stream of
	 * writes. Only from FUSE 7.39 (Linux 6.6), whose direct_io writes
	 * invalidate the page cache they overwrite; before, readers through
	 * other handles could keep reading the old bytes. */
	vol->wronly_direct = !vol->opts.direct && !vol->writeback &&
			     (conn->proto_major > 7 || conn->proto_minor >= 39);
	/* Shared mmap of a direct_io handle (every file in direct mode, O_DIRECT
	 * opens in cached mode): refused with ENODEV unless the server allows
	 * it (FUSE 7.39, Linux 6.6). The kernel then keeps the mapping coherent
	 * itself: a direct read or write first writes back and a direct write
	 * then invalidates the pages of its range, and an inode with a shared
	 * mapping holds off parallel direct writes. libfuse 3.14 has no
	 * capability for it: the request loop adds it to the INIT reply. */
	vol->direct_mmap = conn->proto_major > 7 || conn->proto_minor >= 39;
	if (vol->direct_mmap)
		nvmefs_loop_init_flags(FUSE_DIRECT_IO_ALLOW_MMAP);
	/* 1 MiB requests (libfuse then asks for max_pages = 256). The kernel
	 * lowers the readahead window to max_readahead; main.c raises it again
	 * after INIT through the mount's bdi. */
	conn->max_write = 1u << 20;
	conn->max_readahead = 1u << 20;
	/* Readahead and write-back requests in flight: as many as the pool
	 * has buffers for, beyond the workers' own. */
	conn->max_background = vol->opts.max_background ? vol->opts.max_background : 64;
	conn->congestion_threshold = conn->max_background * 3 / 4;
	conn->time_gran = 1;
	atomic_store(&vol->init_done, true);
}

/* Only the control directory's remount (fs/tools/remount.c) is ours;
 * everything else (a TCGETS from isatty(), ...) is not a tty: ENOTTY, what
 * the kernel makes of libfuse's ENOSYS. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in, size_t in_len,
		     size_t out_len)
{
	(void)arg;
	(void)fi;
	(void)out_len;
	if (flags & FUSE_IOCTL_COMPAT) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	int err = nvmefs_ctl_ioctl(VOL(req), ino, cmd, fuse_req_ctx(req)->uid, in, in_len);

	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_ioctl(req, 0, NULL, 0);
}

const struct fuse_lowlevel_ops nvmefs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	/* No .flush: libfuse answers the first FLUSH with ENOSYS and the
	 * kernel sends no more (fc->no_flush), which saves every close(2) a
	 * round trip. There is nothing to do at close: a WRITE is answered
	 * once its data is on the devices, and with the write-back cache the
	 * kernel writes dirty pages back and reports their errors in
	 * fuse_flush() before it looks at no_flush. */
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsync,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
	.ioctl = op_ioctl,
};

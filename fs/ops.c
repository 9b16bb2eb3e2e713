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

#include "fs_i.h"
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

#define TIMEOUT	       NVMEFS_ATTR_TIMEOUT
#define LINK_MAX_COUNT 65000u

static struct nvmefs_vol *VOL(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_stat(const struct nvmefs_inode *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_mode = in->mode;
	st->st_nlink = in->dead ? 0 : in->nlink;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_rdev = in->rdev;
	st->st_size = (off_t)in->size;
	st->st_blksize = NVMEFS_BLOCK;
	st->st_blocks = (blkcnt_t)(in->alloc_bytes / 512);
	st->st_atim = in->atime;
	st->st_mtim = in->mtime;
	st->st_ctim = in->ctime;
}

/* Fill an entry reply for in and count the lookup it gives the kernel. */
static void fill_entry(struct nvmefs_inode *in, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = in->ino;
	e->generation = 1;
	e->attr_timeout = TIMEOUT;
	e->entry_timeout = TIMEOUT;
	fill_stat(in, &e->attr);
	in->lookup++;
}

/* Changes are refused on a ro mount and once a metadata write failed. */
static bool read_only(struct nvmefs_vol *vol)
{
	return vol->opts.read_only || nvmefs_journal_error(vol);
}

/* ino's inode, looked up under the metadata lock (NULL if unknown). The
 * kernel's reference (lookup count or open file) keeps it alive after. */
static struct nvmefs_inode *find_inode(struct nvmefs_vol *vol, fuse_ino_t ino)
{
	struct nvmefs_inode *in;

	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	pthread_mutex_unlock(&vol->lock);
	return in;
}

static struct nvmefs_inode *live_inode(struct nvmefs_vol *vol, fuse_ino_t ino)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, ino);

	return in && !in->dead ? in : NULL;
}

/* The root's ".nvmefs" is the control directory (fs/ctl.c), never a file. */
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

/* Checks shared by everything that adds a name (meta held). */
static int check_new_name(struct nvmefs_vol *vol, struct nvmefs_inode *p, const char *name,
			  uint64_t cost)
{
	if (read_only(vol))
		return -EROFS;
	if (!p)
		return -ENOENT;
	if (!p->dir)
		return -ENOTDIR;
	if (strlen(name) > NVMEFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (nvmefs_dir_find(vol, p->ino, name) || is_ctl_name(p->ino, name))
		return -EEXIST;
	if (vol->meta_bytes + cost > vol->meta_cap)
		return -ENOSPC;
	return 0;
}

static int log_rec(struct nvmefs_vol *vol, struct nvmefs_rec *r)
{
	return nvmefs_meta_log(vol, r);
}

static int log_dirent(struct nvmefs_vol *vol, uint16_t type, uint64_t parent, const char *name,
		      const struct nvmefs_inode *child)
{
	struct nvmefs_rec r = {.type = type};

	r.dirent.parent = parent;
	r.dirent.child = child->ino;
	r.dirent.type = (uint8_t)IFTODT(child->mode);
	r.dirent.name = name;
	r.dirent.name_len = (uint16_t)strlen(name);
	return log_rec(vol, &r);
}

static int log_ino(struct nvmefs_vol *vol, uint16_t type, uint64_t ino)
{
	struct nvmefs_rec r = {.type = type};

	r.ino.ino = ino;
	return log_rec(vol, &r);
}

static int log_xattr_del(struct nvmefs_vol *vol, uint64_t ino, const char *name)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_XATTR_DEL};

	r.xattr.ino = ino;
	r.xattr.name = name;
	r.xattr.name_len = (uint16_t)strlen(name);
	return log_rec(vol, &r);
}

static void touch_dir(struct nvmefs_vol *vol, struct nvmefs_inode *dir, const struct timespec *now)
{
	dir->mtime = dir->ctime = *now;
	nvmefs_inode_dirty(vol, dir);
}

/* A link to in went away (meta held): free it now, or at its last close. */
static int drop_link(struct nvmefs_vol *vol, struct nvmefs_inode *in, const struct timespec *now)
{
	in->ctime = *now;
	if (in->dir)
		in->nlink = 0;
	else
		in->nlink--;
	if (in->nlink) {
		nvmefs_inode_dirty(vol, in);
		return 0;
	}
	if (in->opens) {
		nvmefs_inode_dirty(vol, in);
		return log_ino(vol, NVMEFS_REC_ORPHAN_ADD, in->ino);
	}
	return log_ino(vol, NVMEFS_REC_INODE_FREE, in->ino);
}

/* ---- lookup and inode lifetime ---- */

static void forget_one(struct nvmefs_vol *vol, fuse_ino_t ino, uint64_t n)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, ino);

	if (!in)
		return;
	in->lookup = in->lookup > n ? in->lookup - n : 0;
	if (!in->lookup && in->dead)
		nvmefs_inode_drop(vol, in);
}

/*
 * Reply with an entry made by fill_entry. When the kernel does not take the
 * reply (the request was aborted), it never counts the lookup the entry
 * gives, and no FORGET will come for it: take it back here.
 */
static void reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	struct nvmefs_vol *vol = VOL(req);

	if (fuse_reply_entry(req, e) && !nvmefs_ctl_ino(e->ino)) {
		pthread_mutex_lock(&vol->lock);
		forget_one(vol, e->ino, 1);
		pthread_mutex_unlock(&vol->lock);
	}
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct nvmefs_vol *vol = VOL(req);
	struct fuse_entry_param e;
	struct nvmefs_inode *p, *in = NULL;
	struct nvmefs_dirent *d;
	int err = 0;

	if (strlen(name) > NVMEFS_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	err = nvmefs_ctl_lookup(vol, parent, name, &e);
	if (err <= 0) {
		if (err)
			fuse_reply_err(req, -err);
		else
			reply_entry(req, &e);
		return;
	}
	err = 0;
	pthread_mutex_lock(&vol->lock);
	p = live_inode(vol, parent);
	if (!p)
		err = ENOENT;
	else if (!p->dir)
		err = ENOTDIR;
	else if (!(d = nvmefs_dir_find(vol, parent, name)) || !(in = live_inode(vol, d->child)))
		err = ENOENT;
	else
		fill_entry(in, &e);
	pthread_mutex_unlock(&vol->lock);
	if (err)
		fuse_reply_err(req, err);
	else
		reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct nvmefs_vol *vol = VOL(req);

	pthread_mutex_lock(&vol->lock);
	forget_one(vol, ino, nlookup);
	pthread_mutex_unlock(&vol->lock);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct nvmefs_vol *vol = VOL(req);

	pthread_mutex_lock(&vol->lock);
	for (size_t i = 0; i < count; i++)
		forget_one(vol, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&vol->lock);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	struct stat st;

	if (nvmefs_ctl_ino(ino)) {
		nvmefs_ctl_stat(vol, ino, &st);
		fuse_reply_attr(req, &st, TIMEOUT);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	if (in)
		fill_stat(in, &st);
	pthread_mutex_unlock(&vol->lock);
	if (!in)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static void set_times(struct nvmefs_inode *in, const struct stat *attr, int to_set,
		      const struct timespec *now)
{
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		in->atime = *now;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		in->atime = attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		in->mtime = *now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		in->mtime = attr->st_mtim;
}

/* Change a regular file's size, holding its whole range. */
static int truncate_locked(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t size)
{
	struct nvmefs_rl_ent rl;
	int ret;

	nvmefs_rl_lock(&in->io_lock, &rl, 0, NVMEFS_RL_ALL, true);
	ret = nvmefs_data_truncate(vol, in, size);
	nvmefs_rl_unlock(&in->io_lock, &rl);
	return ret;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	struct timespec now;
	struct stat st;
	int err = 0;

	if (nvmefs_ctl_ino(ino)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	if (in && in->dead && !(to_set & FUSE_SET_ATTR_SIZE)) {
		/* With the write-back cache the kernel sends a file's times
		 * after its last name and handle are gone; the inode is freed
		 * (nothing to log), so answer with what it was. */
		fill_stat(in, &st);
		pthread_mutex_unlock(&vol->lock);
		fuse_reply_attr(req, &st, TIMEOUT);
		return;
	}
	if (in && in->dead)
		in = NULL;
	pthread_mutex_unlock(&vol->lock);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (read_only(vol)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (in->dir)
			err = -EISDIR;
		else if (!S_ISREG(in->mode))
			err = -EINVAL;
		else
			err = truncate_locked(vol, in, (uint64_t)attr->st_size);
	}
	nvmefs_timespec_now(&now);
	pthread_mutex_lock(&vol->lock);
	if (!err) {
		if (to_set & FUSE_SET_ATTR_MODE)
			in->mode = (in->mode & S_IFMT) | (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_UID)
			in->uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			in->gid = attr->st_gid;
		set_times(in, attr, to_set, &now);
		if (to_set & FUSE_SET_ATTR_CTIME)
			in->ctime = attr->st_ctim;
		else
			in->ctime = now;
		nvmefs_inode_dirty(vol, in);
	}
	fill_stat(in, &st);
	pthread_mutex_unlock(&vol->lock);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	char *target = NULL;

	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	if (in && in->target)
		target = strdup(in->target);
	pthread_mutex_unlock(&vol->lock);
	if (!target) {
		fuse_reply_err(req, in && !in->target ? EINVAL : ENOMEM);
		return;
	}
	fuse_reply_readlink(req, target);
	free(target);
}

/* ---- creating names ---- */

/* Make a new inode named name in parent (meta held). */
static int make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		     const char *target, struct nvmefs_inode **out)
{
	struct nvmefs_vol *vol = VOL(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct nvmefs_inode *p = live_inode(vol, parent), *in;
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE};
	struct timespec now;
	int ret;

	ret = check_new_name(vol, p, name,
			     nvmefs_meta_cost_inode(strlen(name)) + (target ? strlen(target) : 0));
	if (ret)
		return ret;
	if (S_ISDIR(mode) && p->nlink >= LINK_MAX_COUNT)
		return -EMLINK;
	if (vol->next_ino > NVMEFS_INO_MAX)
		return -ENOSPC;
	nvmefs_timespec_now(&now);
	r.inode.ino = vol->next_ino;
	r.inode.mode = mode;
	r.inode.uid = ctx->uid;
	r.inode.gid = ctx->gid;
	/* BSD group semantics in setgid directories, as Linux does. */
	if (p->mode & S_ISGID) {
		r.inode.gid = p->gid;
		if (S_ISDIR(mode))
			r.inode.mode |= S_ISGID;
	}
	r.inode.nlink = S_ISDIR(mode) ? 2 : 1;
	r.inode.rdev = rdev;
	r.inode.atime = r.inode.mtime = r.inode.ctime = r.inode.crtime =
		(struct nvmefs_time){now.tv_sec, (uint32_t)now.tv_nsec};
	/* Files take their directory's default layout, and directories
	 * pass it on to theirs. */
	if (S_ISREG(mode))
		nvmefs_xlayout_pick(vol, &p->layout, &r.inode.layout);
	else if (S_ISDIR(mode))
		r.inode.layout = p->layout;
	if (target) {
		r.inode.target = target;
		r.inode.target_len = (uint16_t)strlen(target);
		r.inode.size = r.inode.target_len;
	}
	ret = log_rec(vol, &r);
	if (ret)
		return ret;
	in = nvmefs_iget(vol, r.inode.ino);
	ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, parent, name, in);
	if (ret)
		return ret;
	if (S_ISDIR(mode))
		p->nlink++;
	touch_dir(vol, p, &now);
	*out = in;
	return 0;
}

static void reply_new(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		      const char *target)
{
	struct nvmefs_vol *vol = VOL(req);
	struct fuse_entry_param e;
	struct nvmefs_inode *in;
	int ret;

	if (refuse_ctl(req, parent, 0, NULL))
		return;
	pthread_mutex_lock(&vol->lock);
	ret = make_node(req, parent, name, mode, rdev, target, &in);
	if (!ret)
		fill_entry(in, &e);
	pthread_mutex_unlock(&vol->lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		reply_entry(req, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISSOCK(mode) && !S_ISCHR(mode) &&
	    !S_ISBLK(mode)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	reply_new(req, parent, name, mode, S_ISCHR(mode) || S_ISBLK(mode) ? rdev : 0, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	reply_new(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	size_t len = strlen(link);

	if (len == 0 || len > NVMEFS_SYMLINK_MAX) {
		fuse_reply_err(req, len ? ENAMETOOLONG : ENOENT);
		return;
	}
	reply_new(req, parent, name, S_IFLNK | 0777, 0, link);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in, *p;
	struct fuse_entry_param e;
	struct timespec now;
	int ret;

	if (refuse_ctl(req, ino, newparent, NULL))
		return;
	nvmefs_timespec_now(&now);
	pthread_mutex_lock(&vol->lock);
	in = live_inode(vol, ino);
	p = live_inode(vol, newparent);
	ret = check_new_name(vol, p, newname, 28 + strlen(newname));
	if (!ret && (!in || in->nlink == 0))
		ret = -ENOENT;
	else if (!ret && in->dir)
		ret = -EPERM;
	else if (!ret && in->nlink >= LINK_MAX_COUNT)
		ret = -EMLINK;
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, newparent, newname, in);
	if (!ret) {
		in->nlink++;
		in->ctime = now;
		nvmefs_inode_dirty(vol, in);
		touch_dir(vol, p, &now);
		fill_entry(in, &e);
	}
	pthread_mutex_unlock(&vol->lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		reply_entry(req, &e);
}

/* ---- removing names ---- */

static int remove_name(struct nvmefs_vol *vol, fuse_ino_t parent, const char *name, bool dir)
{
	struct nvmefs_inode *p = live_inode(vol, parent), *in;
	struct nvmefs_dirent *d;
	struct timespec now;
	int ret;

	if (read_only(vol))
		return -EROFS;
	if (!p)
		return -ENOENT;
	if (!p->dir)
		return -ENOTDIR;
	if (strlen(name) > NVMEFS_NAME_MAX)
		return -ENAMETOOLONG;
	d = nvmefs_dir_find(vol, parent, name);
	if (!d)
		return -ENOENT;
	in = nvmefs_iget(vol, d->child);
	if (!in)
		return -EIO; /* the mount verified every entry: a bug */
	if (dir && !in->dir)
		return -ENOTDIR;
	if (!dir && in->dir)
		return -EISDIR;
	if (dir && in->dir->live)
		return -ENOTEMPTY;
	nvmefs_timespec_now(&now);
	ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, parent, name, in);
	if (ret)
		return ret;
	if (dir)
		p->nlink--;
	touch_dir(vol, p, &now);
	return drop_link(vol, in, &now);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct nvmefs_vol *vol = VOL(req);
	int ret;

	if (refuse_ctl(req, parent, 0, name))
		return;
	pthread_mutex_lock(&vol->lock);
	ret = remove_name(vol, parent, name, false);
	pthread_mutex_unlock(&vol->lock);
	fuse_reply_err(req, -ret);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct nvmefs_vol *vol = VOL(req);
	int ret;

	if (refuse_ctl(req, parent, 0, name))
		return;
	pthread_mutex_lock(&vol->lock);
	ret = remove_name(vol, parent, name, true);
	pthread_mutex_unlock(&vol->lock);
	fuse_reply_err(req, -ret);
}

/* True when directory anc is dir or one of its ancestors. */
static bool is_ancestor(struct nvmefs_vol *vol, uint64_t anc, uint64_t dir)
{
	for (unsigned depth = 0; depth < 1u << 20; depth++) {
		struct nvmefs_inode *in = nvmefs_iget(vol, dir);

		if (dir == anc)
			return true;
		if (!in || dir == NVMEFS_ROOT_INO)
			return false;
		dir = in->parent;
	}
	return true;
}

static int rename_exchange(struct nvmefs_vol *vol, struct nvmefs_inode *p, const char *name,
			   struct nvmefs_inode *np, const char *newname, struct nvmefs_inode *a,
			   struct nvmefs_inode *b, const struct timespec *now)
{
	int ret;

	if ((a->dir && is_ancestor(vol, a->ino, np->ino)) ||
	    (b->dir && is_ancestor(vol, b->ino, p->ino)))
		return -EINVAL;
	ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, p->ino, name, a);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, np->ino, newname, b);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, p->ino, name, b);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, np->ino, newname, a);
	if (ret)
		return ret;
	/* a->dir is a pointer: compare whether each is a directory, not the
	 * pointers, or two directories look like a directory and a file. */
	if (p != np && !a->dir != !b->dir) {
		struct nvmefs_inode *gets = a->dir ? np : p, *loses = a->dir ? p : np;

		gets->nlink++;
		loses->nlink--;
	}
	a->ctime = b->ctime = *now;
	nvmefs_inode_dirty(vol, a);
	nvmefs_inode_dirty(vol, b);
	touch_dir(vol, p, now);
	touch_dir(vol, np, now);
	return 0;
}

static int do_rename(struct nvmefs_vol *vol, fuse_ino_t parent, const char *name,
		     fuse_ino_t newparent, const char *newname, unsigned flags)
{
	struct nvmefs_inode *p = live_inode(vol, parent), *np = live_inode(vol, newparent);
	struct nvmefs_inode *src, *dst = NULL;
	struct nvmefs_dirent *d, *d2;
	struct timespec now;
	int ret;

	if (read_only(vol))
		return -EROFS;
	if (!p || !np)
		return -ENOENT;
	if (!p->dir || !np->dir)
		return -ENOTDIR;
	if (strlen(name) > NVMEFS_NAME_MAX || strlen(newname) > NVMEFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (is_ctl_name(newparent, newname))
		return -EEXIST;
	d = nvmefs_dir_find(vol, parent, name);
	if (!d)
		return -ENOENT;
	src = nvmefs_iget(vol, d->child);
	d2 = nvmefs_dir_find(vol, newparent, newname);
	if (d2)
		dst = nvmefs_iget(vol, d2->child);
	if (!src || (d2 && !dst))
		return -EIO; /* the mount verified every entry: a bug */
	nvmefs_timespec_now(&now);
	if (flags & RENAME_EXCHANGE) {
		if (!dst)
			return -ENOENT;
		if (src == dst)
			return 0;
		return rename_exchange(vol, p, name, np, newname, src, dst, &now);
	}
	if (dst && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (dst == src)
		return 0; /* two names of one inode: POSIX says do nothing */
	if (src->dir && is_ancestor(vol, src->ino, np->ino))
		return -EINVAL;
	if (dst) {
		if (src->dir && !dst->dir)
			return -ENOTDIR;
		if (!src->dir && dst->dir)
			return -EISDIR;
		if (dst->dir && dst->dir->live)
			return -ENOTEMPTY;
	} else if (vol->meta_bytes + 28 + strlen(newname) > vol->meta_cap) {
		return -ENOSPC;
	}
	if (dst) {
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, newparent, newname, dst);
		if (!ret && dst->dir)
			np->nlink--;
		if (!ret)
			ret = drop_link(vol, dst, &now);
		if (ret)
			return ret;
	}
	ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, parent, name, src);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, newparent, newname, src);
	if (ret)
		return ret;
	if (src->dir && p != np) {
		p->nlink--;
		np->nlink++;
	}
	src->ctime = now;
	nvmefs_inode_dirty(vol, src);
	touch_dir(vol, p, &now);
	touch_dir(vol, np, &now);
	return 0;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct nvmefs_vol *vol = VOL(req);
	int ret;

	if (refuse_ctl(req, parent, newparent, name))
		return;
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	ret = do_rename(vol, parent, name, newparent, newname, flags);
	pthread_mutex_unlock(&vol->lock);
	fuse_reply_err(req, -ret);
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

/* How the kernel caches the handle (see wronly_direct in op_init); in direct
 * mode, the handle's read-ahead state (fh, freed at RELEASE). */
static void set_open_flags(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			   struct fuse_file_info *fi)
{
	bool wronly_direct = vol->wronly_direct && (fi->flags & O_ACCMODE) == O_WRONLY;

	fi->direct_io = vol->opts.direct || (fi->flags & O_DIRECT) || wronly_direct ||
			(vol->writeback && (fi->flags & O_ACCMODE) != O_RDONLY && low_space(vol));
	/* Its writes invalidate what they overwrite: the rest of the file's
	 * cache stays. */
	fi->keep_cache = !fi->direct_io || wronly_direct;
	fi->fh = 0;
	if (vol->opts.direct && vol->opts.prefetch && S_ISREG(in->mode) &&
	    (fi->flags & O_ACCMODE) != O_WRONLY)
		fi->fh = (uintptr_t)nvmefs_prefetch_open(in);
}

/* Truncate at open (O_TRUNC with atomic_o_trunc). */
static int open_trunc(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	if (read_only(vol))
		return -EROFS;
	return truncate_locked(vol, in, 0);
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
	struct nvmefs_inode *in;

	if (nvmefs_ctl_ino(ino)) {
		struct ctl_handle *h = (struct ctl_handle *)(uintptr_t)fi->fh;

		free(h->text);
		free(h);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	pthread_mutex_unlock(&vol->lock);
	/* The handle's read-ahead windows go while it still keeps the inode,
	 * and before the file's space can go. */
	if (in)
		nvmefs_prefetch_close(in, (struct nvmefs_prefetch *)(uintptr_t)fi->fh);
	pthread_mutex_lock(&vol->lock);
	if (in && in->opens && --in->opens == 0 && !in->dead && in->nlink == 0) {
		/* Last close of an unlinked file: its space goes now. */
		if (log_ino(vol, NVMEFS_REC_INODE_FREE, in->ino))
			nvmefs_warn("inode %llu: could not free at last close; "
				    "it is reclaimed at the next mount",
				    (unsigned long long)ino);
	}
	pthread_mutex_unlock(&vol->lock);
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
	pthread_mutex_lock(&vol->lock);
	forget_one(vol, e->ino, 1);
	pthread_mutex_unlock(&vol->lock);
	release_handle(vol, e->ino, fi);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	int ret = 0;

	if (nvmefs_ctl_ino(ino)) {
		open_ctl(req, ino, fi);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	in = live_inode(vol, ino);
	if (in)
		in->opens++;
	pthread_mutex_unlock(&vol->lock);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* As Linux does, O_TRUNC truncates whatever the access mode (the kernel
	 * has checked write permission). */
	if ((fi->flags & O_TRUNC) && S_ISREG(in->mode))
		ret = open_trunc(vol, in);
	if (ret) {
		pthread_mutex_lock(&vol->lock);
		in->opens--;
		pthread_mutex_unlock(&vol->lock);
		fuse_reply_err(req, -ret);
		return;
	}
	set_open_flags(vol, in, fi);
	reply_open(req, ino, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct fuse_entry_param e;
	struct nvmefs_inode *in;
	int ret;

	if (refuse_ctl(req, parent, 0, NULL))
		return;
	pthread_mutex_lock(&vol->lock);
	ret = make_node(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &in);
	if (!ret) {
		in->opens++;
		fill_entry(in, &e);
	}
	pthread_mutex_unlock(&vol->lock);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	set_open_flags(vol, in, fi);
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

static bool ts_le(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec <= b->tv_nsec);
}

/* relatime: FUSE leaves atime to us. Update it when it is not newer than
 * mtime or ctime, or a day old, so reads rarely dirty the inode. */
static void touch_atime(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	struct timespec now;

	if (vol->opts.read_only)
		return;
	nvmefs_timespec_now(&now);
	pthread_mutex_lock(&vol->lock);
	if (!in->dead && (ts_le(&in->atime, &in->mtime) || ts_le(&in->atime, &in->ctime) ||
			  now.tv_sec - in->atime.tv_sec >= 24 * 3600)) {
		in->atime = now;
		nvmefs_inode_dirty(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	void *buf;

	if (nvmefs_ctl_ino(ino)) {
		read_ctl(req, (const struct ctl_handle *)(uintptr_t)fi->fh, size, off);
		return;
	}
	in = find_inode(vol, ino);
	if (!in || !S_ISREG(in->mode)) {
		fuse_reply_err(req, in ? EISDIR : ENOENT);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	buf = nvmefs_loop_take_buf(vol);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	touch_atime(vol, in);
	/* Direct mode has no kernel readahead: nvmefs reads ahead itself, on
	 * the handles set_open_flags gave read-ahead state (fh); the others
	 * (fh 0) are read as asked. */
	nvmefs_prefetch_read(vol, in, (struct nvmefs_prefetch *)(uintptr_t)fi->fh, buf, size,
			     (uint64_t)off, read_done, req);
}

static struct nvmefs_xattr *find_xattr(struct nvmefs_inode *in, const char *name);

/*
 * What a write takes away, as Linux's file_remove_privs(): file capabilities
 * (security.capability) whoever writes, and for a process without
 * CAP_FSETID (uid 0 stands for it) setuid, and setgid when the group may
 * execute. The kernel does this itself before writes through the page cache
 * (it asks for the capability with GETXATTR and removes it, and clears the
 * bits with SETATTR), but not for direct_io writes: libfuse 3.14 hands us
 * those without the kill-suid flag, and the capability is left to us.
 */
static int kill_privs(struct nvmefs_vol *vol, struct nvmefs_inode *in, uid_t writer)
{
	static const char caps[] = "security.capability";
	bool changed = false;
	int ret = 0;

	pthread_mutex_lock(&vol->lock);
	if (writer != 0) {
		mode_t kill = S_ISUID | ((in->mode & S_IXGRP) ? S_ISGID : 0);

		if (in->mode & kill) {
			in->mode &= ~kill;
			changed = true;
		}
	}
	if (in->nxattrs && find_xattr(in, caps)) {
		ret = log_xattr_del(vol, in->ino, caps);
		changed |= !ret;
	}
	if (changed) {
		nvmefs_timespec_now(&in->ctime);
		nvmefs_inode_dirty(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	unsigned flags = 0;
	void *buf;

	if (read_only(vol)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	in = find_inode(vol, ino);
	if (!in || !S_ISREG(in->mode)) {
		fuse_reply_err(req, in ? EISDIR : ENOENT);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* As the kernel does, privileges go before the data changes. The
	 * kernel's own write-back has done it at write(2). */
	if (!fi->writepage) {
		int ret = kill_privs(vol, in, fuse_req_ctx(req)->uid);

		if (ret) {
			fuse_reply_err(req, -ret);
			return;
		}
	}
	buf = nvmefs_loop_take_buf(vol);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* With the write-back cache the kernel has placed O_APPEND writes
	 * itself, and its write-back uses any open file: ignore the flag. A
	 * write-back request carries times the kernel owns and sends later. */
	if ((fi->flags & O_APPEND) && !vol->writeback)
		flags |= NVMEFS_WRITE_APPEND;
	if (fi->writepage)
		flags |= NVMEFS_WRITE_KEEP_TIMES;
	nvmefs_data_write_async(vol, in, buf, data, size, (uint64_t)off, flags, write_done, req);
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
	struct nvmefs_rl_ent rl;
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	int ret;

	if (refuse_ctl(req, ino, 0, NULL))
		return;
	if (read_only(vol)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	in = live_inode(vol, ino);
	pthread_mutex_unlock(&vol->lock);
	if (!in || !S_ISREG(in->mode)) {
		fuse_reply_err(req, in ? ENODEV : ENOENT);
		return;
	}
	if (offset < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	nvmefs_rl_lock(&in->io_lock, &rl, 0, NVMEFS_RL_ALL, true);
	ret = nvmefs_data_fallocate(vol, in, mode, (uint64_t)offset, (uint64_t)length);
	nvmefs_rl_unlock(&in->io_lock, &rl);
	fuse_reply_err(req, -ret);
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
	in = find_inode(vol, ino);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	ret = nvmefs_data_seek(vol, in, (uint64_t)off, whence, &res);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_lseek(req, (off_t)res);
}

/* ---- directories ---- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;

	if (nvmefs_ctl_ino(ino)) {
		if (ino == NVMEFS_CTL_DIR)
			fuse_reply_open(req, fi);
		else
			fuse_reply_err(req, ENOTDIR);
		return;
	}
	in = find_inode(vol, ino);
	if (!in || !in->dir)
		fuse_reply_err(req, in ? ENOTDIR : ENOENT);
	else
		fuse_reply_open(req, fi);
}

/* Add one entry; returns false when it does not fit (nothing added). */
static bool add_entry(fuse_req_t req, char *buf, size_t size, size_t *pos, const char *name,
		      struct nvmefs_inode *in, uint64_t ino, mode_t mode, off_t next, bool plus)
{
	size_t n;

	if (plus) {
		struct fuse_entry_param e = {0};

		if (in) {
			fill_entry(in, &e);
		} else {
			e.attr.st_ino = ino;
			e.attr.st_mode = mode;
		}
		n = fuse_add_direntry_plus(req, buf + *pos, size - *pos, name, &e, next);
		if (n > size - *pos) {
			if (in)
				in->lookup--;
			return false;
		}
	} else {
		struct stat st = {.st_ino = ino, .st_mode = mode};

		n = fuse_add_direntry(req, buf + *pos, size - *pos, name, &st, next);
		if (n > size - *pos)
			return false;
	}
	*pos += n;
	return true;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *dir;
	char *buf = malloc(size);
	size_t pos = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (ino == NVMEFS_CTL_DIR) {
		pos = nvmefs_ctl_readdir(req, vol, buf, size, off, plus);
		goto out_reply;
	}
	pthread_mutex_lock(&vol->lock);
	dir = nvmefs_iget(vol, ino);
	if (!dir || !dir->dir) {
		pthread_mutex_unlock(&vol->lock);
		free(buf);
		fuse_reply_err(req, dir ? ENOTDIR : ENOENT);
		return;
	}
	if (off < 1 && !add_entry(req, buf, size, &pos, ".", NULL, dir->ino, S_IFDIR, 1, plus))
		goto out;
	if (off < 2 && !add_entry(req, buf, size, &pos, "..", NULL, dir->parent, S_IFDIR, 2, plus))
		goto out;
	for (size_t i = nvmefs_dir_index(dir->dir, off < 3 ? 3 : (uint64_t)off + 1);
	     i < dir->dir->n; i++) {
		struct nvmefs_dirent *d = dir->dir->v[i];
		struct nvmefs_inode *c;

		if (!d)
			continue;
		c = plus ? nvmefs_iget(vol, d->child) : NULL;
		if (!add_entry(req, buf, size, &pos, d->name, c, d->child, (mode_t)DTTOIF(d->type),
			       (off_t)d->cookie, plus))
			break;
	}
out:
	pthread_mutex_unlock(&vol->lock);
out_reply:
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
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
	struct nvmefs_vol *vol = VOL(req);
	struct statvfs st = {0};
	uint64_t per_file = nvmefs_meta_cost_inode(16), room;

	pthread_mutex_lock(&vol->lock);
	room = vol->meta_cap > vol->meta_bytes ? vol->meta_cap - vol->meta_bytes : 0;
	st.f_bsize = NVMEFS_BLOCK;
	st.f_frsize = NVMEFS_BLOCK;
	st.f_blocks = vol->total_bytes / NVMEFS_BLOCK;
	/* Space released but waiting for its commit counts as free: a write
	 * that needs it commits first (data.c). */
	st.f_bfree = (vol->free_bytes + vol->pending_bytes) / NVMEFS_BLOCK;
	st.f_bavail = st.f_bfree;
	st.f_files = vol->ninodes + room / per_file;
	st.f_ffree = room / per_file;
	st.f_favail = st.f_ffree;
	st.f_namemax = NVMEFS_NAME_MAX;
	pthread_mutex_unlock(&vol->lock);
	fuse_reply_statfs(req, &st);
}

/* ---- extended attributes ---- */

static int xattr_name_check(const char *name)
{
	if (strlen(name) > NVMEFS_XATTR_NAME_MAX)
		return -ERANGE;
	if (!strncmp(name, "system.", 7))
		return -EOPNOTSUPP; /* no POSIX ACLs */
	return 0;
}

static struct nvmefs_xattr *find_xattr(struct nvmefs_inode *in, const char *name)
{
	size_t len = strlen(name);

	for (unsigned i = 0; i < in->nxattrs; i++) {
		if (in->xattrs[i].name_len == len && !memcmp(in->xattrs[i].name, name, len))
			return &in->xattrs[i];
	}
	return NULL;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_rec r = {.type = NVMEFS_REC_XATTR_SET};
	struct nvmefs_inode *in;
	struct nvmefs_xattr *x;
	int ret = xattr_name_check(name);

	if (refuse_ctl(req, ino, 0, NULL))
		return;
	if (vol->test_ctl && ino == FUSE_ROOT_ID && !strcmp(name, NVMEFS_TEST_CTL_XATTR)) {
		fuse_reply_err(req, -vol->test_ctl(vol, value, size));
		return;
	}
	if (!ret && size > NVMEFS_XATTR_VALUE_MAX)
		ret = -E2BIG;
	if (!ret && read_only(vol))
		ret = -EROFS;
	if (!ret && !strcmp(name, NVMEFS_LAYOUT_XATTR))
		ret = nvmefs_xlayout_set(vol, ino, value, size);
	if (ret || !strcmp(name, NVMEFS_LAYOUT_XATTR)) {
		fuse_reply_err(req, -ret);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	in = live_inode(vol, ino);
	x = in ? find_xattr(in, name) : NULL;
	if (!in)
		ret = -ENOENT;
	else if ((flags & XATTR_CREATE) && x)
		ret = -EEXIST;
	else if ((flags & XATTR_REPLACE) && !x)
		ret = -ENODATA;
	else if (vol->meta_bytes + 24 + strlen(name) + size > vol->meta_cap)
		ret = -ENOSPC;
	if (!ret) {
		r.xattr.ino = ino;
		r.xattr.name = name;
		r.xattr.name_len = (uint16_t)strlen(name);
		r.xattr.value = value;
		r.xattr.value_len = (uint32_t)size;
		ret = log_rec(vol, &r);
	}
	if (!ret) {
		nvmefs_timespec_now(&in->ctime);
		nvmefs_inode_dirty(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
	fuse_reply_err(req, -ret);
}

/* A getxattr reply of text (n bytes, or -errno) to a buffer of size. */
static void reply_xattr_text(fuse_req_t req, const char *text, int n, size_t size)
{
	if (n < 0)
		fuse_reply_err(req, -n);
	else if (!size)
		fuse_reply_xattr(req, (size_t)n);
	else if (size < (size_t)n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, text, (size_t)n);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	struct nvmefs_xattr *x = NULL;
	void *copy = NULL;
	size_t len = 0;
	int ret = xattr_name_check(name);

	if (nvmefs_ctl_ino(ino)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (!strcmp(name, NVMEFS_LAYOUT_XATTR)) { /* virtual, and not listed */
		char text[128];

		reply_xattr_text(req, text, nvmefs_xlayout_get(vol, ino, text, sizeof(text)), size);
		return;
	}
	if (ret) {
		fuse_reply_err(req, ret == -EOPNOTSUPP ? ENODATA : -ret);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	if (in)
		x = find_xattr(in, name);
	if (!in)
		ret = -ENOENT;
	else if (!x)
		ret = -ENODATA;
	else if (size && x->value_len > size)
		ret = -ERANGE;
	else if (size && !(copy = malloc(x->value_len + 1)))
		ret = -ENOMEM;
	if (!ret) {
		len = x->value_len;
		if (copy)
			memcpy(copy, x->value, len);
	}
	pthread_mutex_unlock(&vol->lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else if (!size)
		fuse_reply_xattr(req, len);
	else
		fuse_reply_buf(req, copy, len);
	free(copy);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	char *buf = NULL;
	size_t total = 0;
	int ret = 0;

	if (nvmefs_ctl_ino(ino)) {
		if (size)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_xattr(req, 0);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	if (!in) {
		ret = -ENOENT;
		goto out;
	}
	for (unsigned i = 0; i < in->nxattrs; i++)
		total += in->xattrs[i].name_len + 1;
	if (!size)
		goto out;
	if (total > size) {
		ret = -ERANGE;
		goto out;
	}
	buf = malloc(total + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0, pos = 0; i < in->nxattrs; i++) {
		memcpy(buf + pos, in->xattrs[i].name, in->xattrs[i].name_len + 1);
		pos += in->xattrs[i].name_len + 1;
	}
out:
	pthread_mutex_unlock(&vol->lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else if (!size)
		fuse_reply_xattr(req, total);
	else
		fuse_reply_buf(req, buf, total);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct nvmefs_vol *vol = VOL(req);
	struct nvmefs_inode *in;
	int ret = xattr_name_check(name);

	if (refuse_ctl(req, ino, 0, NULL))
		return;
	if (!ret && read_only(vol))
		ret = -EROFS;
	if (!ret && !strcmp(name, NVMEFS_LAYOUT_XATTR))
		ret = nvmefs_xlayout_set(vol, ino, NULL, 0);
	if (ret || !strcmp(name, NVMEFS_LAYOUT_XATTR)) {
		fuse_reply_err(req, ret == -EOPNOTSUPP ? ENODATA : -ret);
		return;
	}
	pthread_mutex_lock(&vol->lock);
	in = live_inode(vol, ino);
	if (!in)
		ret = -ENOENT;
	else if (!find_xattr(in, name))
		ret = -ENODATA;
	if (!ret)
		ret = log_xattr_del(vol, ino, name);
	if (!ret) {
		nvmefs_timespec_now(&in->ctime);
		nvmefs_inode_dirty(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
	fuse_reply_err(req, -ret);
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
};

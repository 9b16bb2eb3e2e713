// SPDX-License-Identifier: MIT
/*
 * The namespace (see namei.h for the contract), its names: lookup and the
 * kernel's references (forget), mknod/mkdir/symlink, link, unlink, rmdir,
 * rename (NOREPLACE, EXCHANGE), open counts (open, create, release; an
 * unlinked file's space goes at its last close), readdir. The in-memory
 * metadata changes only through journal records (nvmefs_journal_log); the
 * rules every door shares live here (link counts, rename's, setgid
 * directories, the space a name costs in the metadata); the doors decode
 * their requests, call these and reply (fs/fuse/ops.c and ops_file.c for
 * the mount, fs/native/server.c for native clients).
 *
 * Its sibling namei_attr.c holds what an inode carries: attributes
 * (getattr, setattr, readlink, atime), extended attributes, what a write
 * takes away, fallocate, and statfs. It builds on the basics at the top of
 * this file (the stat of an inode, read-only, get and put, truncation
 * under the whole-file lock); nothing here calls it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs_i.h"
#include "namei.h"
#include "namei_i.h"
#include "icache_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "data_i.h"
#include "util_i.h"
#include "xlayout_i.h"

#include "nvmefs/util.h"

/* Bytes a name adds to meta_bytes beyond its text (the fixed part of its
 * DIRENT record, which meta_bytes counts). */
#define DIRENT_COST 28

void nvmefs_ns_fill_stat(struct nvmefs_inode *in, struct stat *st)
{
	nvmefs_inode_fold_wtime(in);
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

bool nvmefs_ns_read_only(struct nvmefs_vol *vol)
{
	return vol->opts.read_only || atomic_load(&vol->ro_remounted) ||
	       atomic_load(&vol->shut_down) || nvmefs_journal_error(vol);
}

int nvmefs_ns_may_change(struct nvmefs_vol *vol)
{
	if (atomic_load(&vol->shut_down))
		return -EIO;
	return nvmefs_ns_read_only(vol) ? -EROFS : 0;
}

int nvmefs_ns_get(struct nvmefs_vol *vol, uint64_t ino, struct nvmefs_inode **in)
{
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_EXTENTS, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

void nvmefs_ns_put(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	pthread_mutex_lock(&vol->lock);
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
}

/* Change a regular file's size, holding its whole range. */
int nvmefs_ns_truncate_locked(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t size)
{
	struct nvmefs_rl_ent rl;
	int ret;

	nvmefs_rl_lock(&in->io_lock, &rl, 0, NVMEFS_RL_ALL, true);
	ret = nvmefs_data_truncate(vol, in, size);
	nvmefs_rl_unlock(&in->io_lock, &rl);
	return ret;
}

/* A get whose -ENOENT the caller reports in its own order of checks: *in is
 * then NULL and 0 returned. Other errors (a load that failed) are returned. */
static int get_or_null(struct nvmefs_vol *vol, uint64_t ino, unsigned need,
		       struct nvmefs_inode **in)
{
	int ret = nvmefs_inode_get(vol, ino, need, in);

	return ret == -ENOENT ? 0 : ret;
}

/* The entry's attributes and one reference for the caller (meta held),
 * counted in the lookups table. */
static void give_entry(struct nvmefs_vol *vol, struct nvmefs_inode *in, struct stat *st)
{
	nvmefs_ns_fill_stat(in, st);
	nvmefs_lookups_add(vol, in->ino); /* after nvmefs_lookups_reserve */
}

/* What every change of name in directory p checks first (meta held). */
static int check_dir_name(struct nvmefs_vol *vol, const struct nvmefs_inode *p, const char *name)
{
	int ret = nvmefs_ns_may_change(vol);

	if (ret)
		return ret;
	if (!p)
		return -ENOENT;
	if (!S_ISDIR(p->mode))
		return -ENOTDIR;
	if (strlen(name) > NVMEFS_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * chattr's rules on names (meta held), as the VFS's may_create and
 * may_delete apply them to a kernel filesystem: an immutable directory
 * takes no new name; a name goes from neither an immutable nor an
 * append-only directory, nor when the inode it names is either.
 */
static int may_add(const struct nvmefs_inode *p)
{
	return p->flags & NVMEFS_IFL_IMMUTABLE ? -EPERM : 0;
}

static int may_remove(const struct nvmefs_inode *p, const struct nvmefs_inode *in)
{
	return (p->flags | in->flags) & (NVMEFS_IFL_IMMUTABLE | NVMEFS_IFL_APPEND) ? -EPERM : 0;
}

/* Checks shared by everything that adds a name (meta held). */
static int check_new_name(struct nvmefs_vol *vol, struct nvmefs_inode *p, const char *name,
			  uint64_t cost)
{
	int ret = check_dir_name(vol, p, name);

	if (ret)
		return ret;
	if (nvmefs_dir_find(vol, p->ino, name) || nvmefs_is_ctl_name(p->ino, name))
		return -EEXIST;
	if (may_add(p))
		return -EPERM;
	if (vol->meta_bytes + cost > vol->meta_cap)
		return -ENOSPC;
	return 0;
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
	return nvmefs_journal_log(vol, &r);
}

static int log_ino(struct nvmefs_vol *vol, uint16_t type, uint64_t ino)
{
	struct nvmefs_rec r = {.type = type};

	r.ino.ino = ino;
	return nvmefs_journal_log(vol, &r);
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
	if (S_ISDIR(in->mode))
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
	/* Closed, but a write answered early may still be in flight: then
	 * an orphan until the commit that frees it (data_i.h). */
	return nvmefs_data_free_inode(vol, in, true);
}

/* The child's entry of an entry (meta held): what it names must exist. */
static int get_child(struct nvmefs_vol *vol, const struct nvmefs_dirent *d, unsigned need,
		     struct nvmefs_inode **in)
{
	int ret = nvmefs_inode_get(vol, d->child, need | NVMEFS_IGET_LIVE, in);

	if (ret != -ENOENT)
		return ret;
	/* The mount does not check every entry (it reads inodes on demand). */
	nvmefs_err("%s: metadata: entry '%s' in directory %llu names inode %llu, which does not "
		   "exist (fsck.nvmefs repairs this)",
		   nvmefs_meta_where(vol), d->name, (unsigned long long)d->parent,
		   (unsigned long long)d->child);
	return -EIO;
}

/* ---- lookup and references ---- */

int nvmefs_ns_lookup(struct nvmefs_vol *vol, uint64_t parent, const char *name, struct stat *st)
{
	return nvmefs_ns_lookup_cookie(vol, parent, name, st, NULL, NULL);
}

/*
 * "." and "..": the kernel asks them only to open a file handle
 * (FUSE_EXPORT_SUPPORT, fs/fuse/ops.c op_init): "." of an inode number it
 * no longer caches, ".." of a directory to connect it to its path. An
 * inode number is never reused (next_ino only grows), so a freed inode's
 * -ENOENT is the kernel's ESTALE, never another file.
 */
static int lookup_dots(struct nvmefs_vol *vol, uint64_t ino, bool up, struct stat *st)
{
	struct nvmefs_inode *in = NULL, *p = NULL;
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_LIVE, &in);
	if (!ret && up && !S_ISDIR(in->mode))
		ret = -ENOTDIR;
	if (!ret && up)
		ret = nvmefs_inode_get(vol, in->parent, NVMEFS_IGET_LIVE, &p);
	if (!ret)
		ret = nvmefs_lookups_reserve(vol);
	if (!ret)
		give_entry(vol, up ? p : in, st);
	nvmefs_inode_put(vol, p);
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

int nvmefs_ns_lookup_cookie(struct nvmefs_vol *vol, uint64_t parent, const char *name,
			    struct stat *st, uint64_t *cookie, uint64_t *entries)
{
	struct nvmefs_inode *p, *in = NULL;
	struct nvmefs_dirent *d = NULL;
	int ret;

	if (strlen(name) > NVMEFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
		return lookup_dots(vol, parent, name[1] == '.', st);
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, parent, NVMEFS_IGET_LIVE | NVMEFS_IGET_ENTRIES, &p);
	if (!ret && !S_ISDIR(p->mode))
		ret = -ENOTDIR;
	if (!ret && !(d = nvmefs_dir_find(vol, parent, name)))
		ret = -ENOENT;
	if (!ret && cookie)
		*cookie = d->cookie; /* before get_child: it may drop meta */
	if (!ret && entries)
		*entries = p->dir->live;
	if (!ret)
		ret = get_child(vol, d, 0, &in);
	if (!ret)
		ret = nvmefs_lookups_reserve(vol);
	if (!ret)
		give_entry(vol, in, st);
	nvmefs_inode_put(vol, in);
	nvmefs_inode_put(vol, p);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

void nvmefs_ns_forget(struct nvmefs_vol *vol, uint64_t ino, uint64_t n)
{
	struct nvmefs_inode *in;

	/* No get: a forget works on the table, loads nothing, cannot fail.
	 * A freed inode the kernel named waited for its last forget. */
	pthread_mutex_lock(&vol->lock);
	if (!nvmefs_lookups_sub(vol, ino, n) && (in = nvmefs_iget(vol, ino))) {
		/* The kernel's pages went with its inode, pushed ones too. */
		atomic_store(&in->kernel_pages, false);
		atomic_store(&in->pushed, false);
		in->forgotten++;
		nvmefs_inode_reap(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
}

bool nvmefs_ns_kernel_holds(struct nvmefs_vol *vol, uint64_t ino)
{
	bool held;

	pthread_mutex_lock(&vol->lock);
	held = nvmefs_lookups_count(vol, ino) != 0;
	pthread_mutex_unlock(&vol->lock);
	return held;
}

/* ---- making names ---- */

/* Make a new inode named name in directory p (meta held): *out, with a
 * reference for the caller. */
static int make_node(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, struct nvmefs_inode *p,
		     const char *name, mode_t mode, dev_t rdev, const char *target,
		     struct nvmefs_inode **out)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE};
	struct nvmefs_acl_inherit ai;
	struct nvmefs_inode *in;
	struct timespec now;
	int ret;

	*out = NULL;
	ret = nvmefs_ns_inherit_acl(p, cred, &mode, &ai);
	if (!ret)
		ret = check_new_name(vol, p, name,
				     nvmefs_meta_cost_inode(strlen(name)) +
					     (target ? strlen(target) : 0) +
					     nvmefs_ns_inherit_cost(&ai));
	if (!ret && S_ISDIR(mode) && p->nlink >= NVMEFS_LINK_MAX)
		ret = -EMLINK;
	if (!ret && vol->next_ino > NVMEFS_INO_MAX)
		ret = -ENOSPC;
	if (ret)
		goto out_free;
	nvmefs_timespec_now(&now);
	r.inode.ino = vol->next_ino;
	r.inode.mode = mode;
	r.inode.uid = cred->uid;
	r.inode.gid = cred->gid;
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
	ret = nvmefs_journal_log(vol, &r);
	if (ret)
		goto out_free;
	ret = nvmefs_inode_get(vol, r.inode.ino, 0, &in);
	if (ret)
		goto out_free;
	ret = nvmefs_ns_give_acls(vol, in, &ai);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, p->ino, name, in);
	if (ret) {
		nvmefs_inode_put(vol, in);
		goto out_free;
	}
	if (S_ISDIR(mode))
		p->nlink++;
	touch_dir(vol, p, &now);
	*out = in;
out_free:
	free(ai.access);
	return ret;
}

/* make_node in directory parent: its inode in *out, with a reference. */
static int make_node_in(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t parent,
			const char *name, mode_t mode, dev_t rdev, const char *target,
			struct nvmefs_inode **out)
{
	struct nvmefs_inode *p;
	int ret;

	*out = NULL;
	ret = get_or_null(vol, parent, NVMEFS_IGET_LIVE | NVMEFS_IGET_ENTRIES | NVMEFS_IGET_XATTRS,
			  &p);
	if (!ret)
		ret = make_node(vol, cred, p, name, mode, rdev, target, out);
	nvmefs_inode_put(vol, p);
	return ret;
}

int nvmefs_ns_mknod(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t parent,
		    const char *name, mode_t mode, dev_t rdev, const char *target, struct stat *st)
{
	struct nvmefs_inode *in = NULL;
	size_t len;
	int ret;

	switch (mode & S_IFMT) {
	case S_IFLNK:
		len = target ? strlen(target) : 0;
		if (len == 0 || len > NVMEFS_SYMLINK_MAX)
			return len ? -ENAMETOOLONG : -ENOENT;
		mode = S_IFLNK | 0777;
		break;
	case S_IFCHR:
	case S_IFBLK:
		target = NULL;
		break;
	case S_IFREG:
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
		target = NULL;
		rdev = 0;
		break;
	default:
		return -EINVAL;
	}
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_lookups_reserve(vol);
	if (!ret)
		ret = make_node_in(vol, cred, parent, name, mode, rdev, target, &in);
	if (!ret)
		give_entry(vol, in, st);
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

int nvmefs_ns_link(struct nvmefs_vol *vol, uint64_t ino, uint64_t newparent, const char *newname,
		   struct stat *st)
{
	struct nvmefs_inode *in, *p = NULL;
	struct timespec now;
	int ret;

	nvmefs_timespec_now(&now);
	pthread_mutex_lock(&vol->lock);
	ret = get_or_null(vol, ino, NVMEFS_IGET_LIVE, &in);
	if (!ret)
		ret = get_or_null(vol, newparent, NVMEFS_IGET_LIVE | NVMEFS_IGET_ENTRIES, &p);
	if (!ret)
		ret = check_new_name(vol, p, newname, DIRENT_COST + strlen(newname));
	if (!ret && (!in || in->nlink == 0))
		ret = -ENOENT;
	else if (!ret && S_ISDIR(in->mode))
		ret = -EPERM;
	else if (!ret && in->flags & (NVMEFS_IFL_IMMUTABLE | NVMEFS_IFL_APPEND))
		ret = -EPERM; /* the VFS's vfs_link */
	else if (!ret && in->nlink >= NVMEFS_LINK_MAX)
		ret = -EMLINK;
	if (!ret)
		ret = nvmefs_lookups_reserve(vol);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, newparent, newname, in);
	if (!ret) {
		in->nlink++;
		in->ctime = now;
		nvmefs_inode_dirty(vol, in);
		touch_dir(vol, p, &now);
		give_entry(vol, in, st);
	}
	nvmefs_inode_put(vol, p);
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

/* ---- removing names ---- */

/* Remove name, naming in, from directory p (meta held). */
static int unlink_child(struct nvmefs_vol *vol, struct nvmefs_inode *p, const char *name,
			struct nvmefs_inode *in, bool dir)
{
	struct timespec now;
	int ret;

	if (dir && !S_ISDIR(in->mode))
		return -ENOTDIR;
	if (!dir && S_ISDIR(in->mode))
		return -EISDIR;
	if (dir && in->dir->live)
		return -ENOTEMPTY;
	nvmefs_timespec_now(&now);
	ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, p->ino, name, in);
	if (ret)
		return ret;
	if (dir)
		p->nlink--;
	touch_dir(vol, p, &now);
	return drop_link(vol, in, &now);
}

static int remove_name(struct nvmefs_vol *vol, uint64_t parent, const char *name, bool dir)
{
	/* INODE_FREE of the last name needs the child's map and xattrs. */
	unsigned need = NVMEFS_IGET_EXTENTS | NVMEFS_IGET_XATTRS;
	struct nvmefs_inode *p = NULL, *in = NULL;
	struct nvmefs_dirent *d = NULL;
	int ret = get_or_null(vol, parent, NVMEFS_IGET_LIVE | NVMEFS_IGET_ENTRIES, &p);

	if (!ret)
		ret = check_dir_name(vol, p, name);
	if (!ret && !(d = nvmefs_dir_find(vol, parent, name)))
		ret = -ENOENT;
	if (!ret)
		ret = get_child(vol, d, need, &in);
	/* The get may have read the child with meta dropped: the entry must
	 * still name it (the kernel orders changes of one directory's names,
	 * so this is a door that does not, or a bug). */
	if (!ret && ((d = nvmefs_dir_find(vol, parent, name)) == NULL || d->child != in->ino))
		ret = -EAGAIN;
	if (!ret)
		ret = may_remove(p, in);
	if (!ret)
		ret = unlink_child(vol, p, name, in, dir);
	nvmefs_inode_put(vol, in);
	nvmefs_inode_put(vol, p);
	return ret;
}

int nvmefs_ns_unlink(struct nvmefs_vol *vol, uint64_t parent, const char *name)
{
	int ret;

	pthread_mutex_lock(&vol->lock);
	do /* -EAGAIN: an entry changed while a get read from the store */
		ret = remove_name(vol, parent, name, false);
	while (ret == -EAGAIN);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

int nvmefs_ns_rmdir(struct nvmefs_vol *vol, uint64_t parent, const char *name)
{
	int ret;

	pthread_mutex_lock(&vol->lock);
	do /* -EAGAIN: an entry changed while a get read from the store */
		ret = remove_name(vol, parent, name, true);
	while (ret == -EAGAIN);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

/* ---- rename ---- */

/* 1 when directory anc is dir or one of its ancestors, 0 when not, or -errno
 * (meta held). */
static int is_ancestor(struct nvmefs_vol *vol, uint64_t anc, uint64_t dir)
{
	for (unsigned depth = 0; depth < 1u << 20; depth++) {
		struct nvmefs_inode *in;
		int ret;

		if (dir == anc)
			return 1;
		if (dir == NVMEFS_ROOT_INO)
			return 0;
		ret = nvmefs_inode_get(vol, dir, 0, &in);
		if (ret)
			return ret == -ENOENT ? 0 : ret;
		dir = in->parent;
		nvmefs_inode_put(vol, in);
	}
	return 1;
}

/* -EINVAL when in is a directory that would move under itself into np. */
static int check_move(struct nvmefs_vol *vol, const struct nvmefs_inode *in,
		      const struct nvmefs_inode *np)
{
	int ret;

	if (!S_ISDIR(in->mode))
		return 0;
	ret = is_ancestor(vol, in->ino, np->ino);
	return ret > 0 ? -EINVAL : ret;
}

/* The inodes of a rename, each held by a reference; dst is NULL when
 * newname is free. */
struct rename_set {
	struct nvmefs_inode *p, *np, *src, *dst;
};

static int rename_exchange(struct nvmefs_vol *vol, const struct rename_set *r, const char *name,
			   const char *newname, const struct timespec *now)
{
	struct nvmefs_inode *p = r->p, *np = r->np, *a = r->src, *b = r->dst;
	int ret = check_move(vol, a, np);

	if (!ret)
		ret = check_move(vol, b, p);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, p->ino, name, a);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, np->ino, newname, b);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, p->ino, name, b);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, np->ino, newname, a);
	if (ret)
		return ret;
	/* A directory and a file across parents: the link of ".." moves. */
	if (p != np && S_ISDIR(a->mode) != S_ISDIR(b->mode)) {
		struct nvmefs_inode *gets = S_ISDIR(a->mode) ? np : p;
		struct nvmefs_inode *loses = S_ISDIR(a->mode) ? p : np;

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

/* Find and hold what rename names, checking the names (meta held). */
static int rename_get(struct nvmefs_vol *vol, uint64_t parent, const char *name, uint64_t newparent,
		      const char *newname, struct rename_set *r)
{
	/* A replaced last name frees its inode: its map and xattrs. */
	unsigned need = NVMEFS_IGET_EXTENTS | NVMEFS_IGET_XATTRS;
	struct nvmefs_dirent *d, *d2;
	int ret;

	ret = nvmefs_ns_may_change(vol);
	if (ret)
		return ret;
	ret = get_or_null(vol, parent, NVMEFS_IGET_LIVE | NVMEFS_IGET_ENTRIES, &r->p);
	if (!ret)
		ret = get_or_null(vol, newparent, NVMEFS_IGET_LIVE | NVMEFS_IGET_ENTRIES, &r->np);
	if (ret)
		return ret;
	if (!r->p || !r->np)
		return -ENOENT;
	if (!S_ISDIR(r->p->mode) || !S_ISDIR(r->np->mode))
		return -ENOTDIR;
	if (strlen(name) > NVMEFS_NAME_MAX || strlen(newname) > NVMEFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (nvmefs_is_ctl_name(newparent, newname))
		return -EEXIST;
	d = nvmefs_dir_find(vol, parent, name);
	if (!d)
		return -ENOENT;
	ret = get_child(vol, d, need, &r->src);
	d2 = nvmefs_dir_find(vol, newparent, newname);
	if (!ret && d2)
		ret = get_child(vol, d2, need, &r->dst);
	/* As remove_name: the entries must still name what the gets took. */
	d = nvmefs_dir_find(vol, parent, name);
	d2 = nvmefs_dir_find(vol, newparent, newname);
	if (!ret && (!d || d->child != r->src->ino ||
		     (d2 ? !r->dst || d2->child != r->dst->ino : r->dst != NULL)))
		ret = -EAGAIN;
	return ret;
}

/* What a rename over dst (or to a free name) must pass first. */
static int rename_check(struct nvmefs_vol *vol, const struct rename_set *r, const char *newname)
{
	struct nvmefs_inode *src = r->src, *dst = r->dst;
	int ret = check_move(vol, src, r->np);

	if (ret)
		return ret;
	if (!dst)
		return vol->meta_bytes + DIRENT_COST + strlen(newname) > vol->meta_cap ? -ENOSPC
										       : 0;
	if (S_ISDIR(src->mode) && !S_ISDIR(dst->mode))
		return -ENOTDIR;
	if (!S_ISDIR(src->mode) && S_ISDIR(dst->mode))
		return -EISDIR;
	if (S_ISDIR(dst->mode) && dst->dir->live)
		return -ENOTEMPTY;
	return 0;
}

/*
 * chattr's rules on a rename (meta held), as the VFS's vfs_rename: the
 * source's name removed, then the target's removed or a name added (which
 * also keeps an immutable directory's ".." where it is).
 */
static int rename_may(const struct rename_set *r)
{
	int ret = may_remove(r->p, r->src);

	if (!ret)
		ret = r->dst ? may_remove(r->np, r->dst) : may_add(r->np);
	return ret;
}

static int rename_move(struct nvmefs_vol *vol, const struct rename_set *r, const char *name,
		       const char *newname, unsigned flags)
{
	struct nvmefs_inode *p = r->p, *np = r->np, *src = r->src, *dst = r->dst;
	struct timespec now;
	int ret;

	nvmefs_timespec_now(&now);
	if (flags & NVMEFS_RENAME_EXCHANGE) {
		if (!dst)
			return -ENOENT;
		if (src == dst)
			return 0;
		ret = rename_may(r);
		return ret ? ret : rename_exchange(vol, r, name, newname, &now);
	}
	if (dst && (flags & NVMEFS_RENAME_NOREPLACE))
		return -EEXIST;
	if (dst == src)
		return 0; /* two names of one inode: POSIX says do nothing */
	ret = rename_may(r);
	if (!ret)
		ret = rename_check(vol, r, newname);
	if (!ret && dst) {
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, np->ino, newname, dst);
		if (!ret && S_ISDIR(dst->mode))
			np->nlink--;
		if (!ret)
			ret = drop_link(vol, dst, &now);
	}
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_DEL, p->ino, name, src);
	if (!ret)
		ret = log_dirent(vol, NVMEFS_REC_DIRENT_ADD, np->ino, newname, src);
	if (ret)
		return ret;
	if (S_ISDIR(src->mode) && p != np) {
		p->nlink--;
		np->nlink++;
	}
	src->ctime = now;
	nvmefs_inode_dirty(vol, src);
	touch_dir(vol, p, &now);
	touch_dir(vol, np, &now);
	return 0;
}

static int do_rename(struct nvmefs_vol *vol, uint64_t parent, const char *name, uint64_t newparent,
		     const char *newname, unsigned flags)
{
	struct rename_set r = {0};
	int ret = rename_get(vol, parent, name, newparent, newname, &r);

	if (!ret)
		ret = rename_move(vol, &r, name, newname, flags);
	nvmefs_inode_put(vol, r.dst);
	nvmefs_inode_put(vol, r.src);
	nvmefs_inode_put(vol, r.np);
	nvmefs_inode_put(vol, r.p);
	return ret;
}

int nvmefs_ns_rename(struct nvmefs_vol *vol, uint64_t parent, const char *name, uint64_t newparent,
		     const char *newname, unsigned flags)
{
	int ret;

	if (flags & ~(NVMEFS_RENAME_NOREPLACE | NVMEFS_RENAME_EXCHANGE) ||
	    (flags & NVMEFS_RENAME_NOREPLACE && flags & NVMEFS_RENAME_EXCHANGE))
		return -EINVAL;
	pthread_mutex_lock(&vol->lock);
	do /* -EAGAIN: an entry changed while a get read from the store */
		ret = do_rename(vol, parent, name, newparent, newname, flags);
	while (ret == -EAGAIN);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

/* ---- open handles ---- */

/* chattr's rules on an open with oflags (meta held), as the VFS's may_open. */
static int may_open(const struct nvmefs_inode *in, int oflags)
{
	bool writes = (oflags & O_ACCMODE) != O_RDONLY || (oflags & O_TRUNC);

	if (in->flags & NVMEFS_IFL_IMMUTABLE && writes)
		return -EPERM;
	if (in->flags & NVMEFS_IFL_APPEND && writes && (!(oflags & O_APPEND) || oflags & O_TRUNC))
		return -EPERM;
	return 0;
}

int nvmefs_ns_open(struct nvmefs_vol *vol, uint64_t ino, int oflags, struct nvmefs_inode **out)
{
	bool trunc = oflags & O_TRUNC;
	struct nvmefs_inode *in;
	int ret;

	/* From here the handle keeps the inode: no reference past the open. */
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_LIVE | NVMEFS_IGET_EXTENTS, &in);
	if (!ret)
		ret = may_open(in, oflags);
	if (!ret)
		nvmefs_ns_wait_push(vol, in);
	if (!ret)
		in->opens++;
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	if (ret)
		return ret;
	if (trunc && S_ISREG(in->mode))
		ret = nvmefs_ns_may_change(vol) ?: nvmefs_ns_truncate_locked(vol, in, 0);
	if (ret) {
		nvmefs_ns_release(vol, ino);
		return ret;
	}
	*out = in;
	return 0;
}

int nvmefs_ns_create(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t parent,
		     const char *name, mode_t mode, struct stat *st, struct nvmefs_inode **out)
{
	struct nvmefs_inode *in = NULL;
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_lookups_reserve(vol);
	if (!ret)
		ret = make_node_in(vol, cred, parent, name, S_IFREG | (mode & 07777), 0, NULL, &in);
	if (!ret) {
		in->opens++;
		give_entry(vol, in, st);
		*out = in;
	}
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

void nvmefs_ns_release(struct nvmefs_vol *vol, uint64_t ino)
{
	struct nvmefs_inode *in;

	/* No get: the handle keeps the inode, and a release cannot fail. */
	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	if (in && in->opens && --in->opens == 0 && !in->dead && in->nlink == 0) {
		/* Last close of an unlinked file: its space goes now, or at the
		 * next commit while its writes answered early are in flight. */
		if (nvmefs_data_free_inode(vol, in, false))
			nvmefs_warn("inode %llu: could not free at last close; "
				    "it is reclaimed at the next mount",
				    (unsigned long long)ino);
	}
	pthread_mutex_unlock(&vol->lock);
}

/* ---- directories ---- */

int nvmefs_ns_opendir(struct nvmefs_vol *vol, uint64_t ino)
{
	struct nvmefs_inode *in;
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, 0, &in);
	if (!ret && !S_ISDIR(in->mode))
		ret = -ENOTDIR;
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

/* One entry to emit; with in (readdirplus), its attributes and a lookup,
 * taken back when it did not fit (after nvmefs_lookups_reserve). */
static bool emit_one(struct nvmefs_vol *vol, nvmefs_dirent_fn emit, void *arg, const char *name,
		     uint64_t ino, mode_t mode, off_t next, struct nvmefs_inode *in)
{
	struct stat st;

	if (!in)
		return emit(arg, name, ino, mode, next, NULL);
	give_entry(vol, in, &st);
	if (emit(arg, name, ino, mode, next, &st))
		return true;
	nvmefs_lookups_sub(vol, in->ino, 1);
	return false;
}

/* readdir's entries of dir from offset off on (meta held). */
static int emit_entries(struct nvmefs_vol *vol, struct nvmefs_inode *dir, off_t off, bool plus,
			uint64_t end, nvmefs_dirent_fn emit, void *arg)
{
	bool some = off < 2; /* an entry went out: an error now ends the reply */

	if (off < 1 && !emit_one(vol, emit, arg, ".", dir->ino, S_IFDIR, 1, NULL))
		return 0;
	if (off < 2 && !emit_one(vol, emit, arg, "..", dir->parent, S_IFDIR, 2, NULL))
		return 0;
	/* A child's get may read it from the store with meta dropped, and the
	 * directory change meanwhile: each entry is found again by cookie,
	 * and what is sent is copied before the get. */
	for (uint64_t next = off < 3 ? 3 : (uint64_t)off + 1;;) {
		size_t i = nvmefs_dir_index(dir->dir, next);
		char name[NVMEFS_NAME_MAX + 1];
		struct nvmefs_inode *in = NULL;
		const struct nvmefs_dirent *d;
		uint64_t child, cookie;
		mode_t type;
		bool more;
		int ret;

		while (i < dir->dir->n && !dir->dir->v[i])
			i++;
		if (i >= dir->dir->n)
			break;
		d = dir->dir->v[i];
		if (d->cookie >= end)
			break;
		memcpy(name, d->name, d->name_len + 1u);
		child = d->child;
		cookie = d->cookie;
		type = (mode_t)DTTOIF(d->type);
		next = cookie + 1;
		/* readdirplus: the child's attributes, as it finds them */
		ret = plus ? nvmefs_lookups_reserve(vol) : 0;
		if (!ret && plus)
			ret = get_or_null(vol, child, 0, &in);
		if (ret)
			return some ? 0 : ret;
		more = emit_one(vol, emit, arg, name, child, type, (off_t)cookie, in);
		nvmefs_inode_put(vol, in);
		if (!more)
			break;
		some = true;
	}
	return 0;
}

int nvmefs_ns_readdir(struct nvmefs_vol *vol, uint64_t ino, off_t off, bool plus, uint64_t *end,
		      nvmefs_dirent_fn emit, void *arg)
{
	struct nvmefs_inode *dir;
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_ENTRIES, &dir);
	if (!ret && !S_ISDIR(dir->mode))
		ret = -ENOTDIR;
	if (!ret && end && (off == 0 || *end == 0))
		*end = dir->dir->next_cookie;
	if (!ret)
		ret = emit_entries(vol, dir, off, plus, end ? *end : UINT64_MAX, emit, arg);
	nvmefs_inode_put(vol, dir);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

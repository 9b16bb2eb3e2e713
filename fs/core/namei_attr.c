// SPDX-License-Identifier: MIT
/*
 * The namespace (see namei.h for the contract), what an inode carries:
 * attributes (getattr; setattr, with the truncation it may do; readlink;
 * atime under relatime, strictatime or noatime), extended attributes (the
 * layout's virtual one goes to xlayout.c; POSIX ACLs, whose rules are
 * acl.c's, keep the mode in step), chattr's file attribute flags and the
 * rules they make, what a write takes away (setuid, setgid,
 * security.capability), fallocate, and the volume's statfs. Changed
 * only through journal records (nvmefs_journal_log) or the dirty inode
 * list, each function taking its own locks.
 *
 * Its sibling namei.c holds the names: lookup, making and removing them,
 * rename, open counts and readdir.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>

#include "fs_i.h"
#include "acl_i.h"
#include "namei.h"
#include "namei_i.h"
#include "icache_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "data_i.h"
#include "util_i.h"
#include "xlayout_i.h"

#include "nvmefs/util.h"

/* ---- attributes ---- */

int nvmefs_ns_getattr(struct nvmefs_vol *vol, uint64_t ino, struct stat *st)
{
	struct nvmefs_inode *in;
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, 0, &in);
	if (!ret)
		nvmefs_ns_fill_stat(in, st);
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

static void set_times(struct nvmefs_inode *in, const struct stat *attr, int to_set,
		      const struct timespec *now)
{
	if (to_set & NVMEFS_SET_ATIME_NOW)
		in->atime = *now;
	else if (to_set & NVMEFS_SET_ATIME)
		in->atime = attr->st_atim;
	if (to_set & NVMEFS_SET_MTIME_NOW)
		in->mtime = *now;
	else if (to_set & NVMEFS_SET_MTIME)
		in->mtime = attr->st_mtim;
}

/* Whether cred may keep a setgid bit of a file of group gid: root (it
 * stands for CAP_FSETID), or a member of gid, as Linux's
 * in_group_or_capable(). */
static bool in_group_or_root(const struct nvmefs_cred *cred, uint32_t gid)
{
	return cred->uid == 0 || cred->gid == gid || nvmefs_pid_in_group(cred->pid, gid);
}

/*
 * The mode bits a change of in's data or size by cred takes (meta held), as
 * Linux's setattr_should_drop_suidgid(): none for root (it stands for
 * CAP_FSETID); setuid; setgid when the group may execute, or when the caller
 * is not in the file's group (Linux 6.2+; before, a setgid bit without
 * group-exec marked mandatory locking and stayed).
 */
static mode_t privs_to_kill(const struct nvmefs_inode *in, const struct nvmefs_cred *cred)
{
	mode_t kill = 0;

	if (!S_ISREG(in->mode) || cred->uid == 0)
		return 0;
	if (in->mode & S_ISUID)
		kill |= S_ISUID;
	if ((in->mode & S_ISGID) && ((in->mode & S_IXGRP) || !in_group_or_root(cred, in->gid)))
		kill |= S_ISGID;
	return kill;
}

/*
 * chattr's rules on setattr (meta held), as the VFS's notify_change: an
 * immutable inode changes in nothing; an append-only one neither in size,
 * mode or owner, nor in a time given explicitly (to now is allowed). With
 * the write-back cache the kernel keeps mtime itself and sends it as a
 * time (with ctime), never as "now", both for touch and after its own
 * writes: an mtime is then taken as the kernel's on an append-only file,
 * which the kernel may append to (so a touch -m -d passes there too).
 */
static int may_setattr(const struct nvmefs_vol *vol, const struct nvmefs_inode *in, int to_set)
{
	const int any = NVMEFS_SET_MODE | NVMEFS_SET_UID | NVMEFS_SET_GID | NVMEFS_SET_SIZE |
			NVMEFS_SET_ATIME | NVMEFS_SET_MTIME | NVMEFS_SET_ATIME_NOW |
			NVMEFS_SET_MTIME_NOW;
	bool kernel_mtime = vol->writeback && (to_set & NVMEFS_SET_CTIME);
	bool given =
		((to_set & NVMEFS_SET_ATIME) && !(to_set & NVMEFS_SET_ATIME_NOW)) ||
		((to_set & NVMEFS_SET_MTIME) && !(to_set & NVMEFS_SET_MTIME_NOW) && !kernel_mtime);

	if ((in->flags & NVMEFS_IFL_IMMUTABLE) && (to_set & any))
		return -EPERM;
	if (!(in->flags & NVMEFS_IFL_APPEND))
		return 0;
	if ((to_set & (NVMEFS_SET_MODE | NVMEFS_SET_UID | NVMEFS_SET_GID | NVMEFS_SET_SIZE)) ||
	    given)
		return -EPERM;
	return 0;
}

/*
 * chmod of in to mode changes its access ACL too, as Linux's
 * posix_acl_chmod() (meta held): logged before the mode changes, in the
 * same transaction, so that the two never disagree after a crash.
 */
static int chmod_acl(struct nvmefs_vol *vol, struct nvmefs_inode *in, mode_t mode)
{
	struct nvmefs_xattr *x;
	void *v;
	int ret = 0;

	if (S_ISLNK(in->mode) || !in->nxattrs)
		return 0;
	x = nvmefs_meta_xattr_find(in, NVMEFS_ACL_ACCESS, strlen(NVMEFS_ACL_ACCESS));
	if (!x || nvmefs_acl_check(x->value, x->value_len))
		return 0; /* none (a bad one cannot be stored) */
	v = malloc(x->value_len);
	if (!v)
		return -ENOMEM;
	memcpy(v, x->value, x->value_len);
	nvmefs_acl_chmod(v, x->value_len, mode);
	if (memcmp(v, x->value, x->value_len))
		ret = nvmefs_ns_log_xattr_set(vol, in->ino, NVMEFS_ACL_ACCESS, v, x->value_len);
	free(v);
	return ret;
}

/* setattr's changes other than the size, and the result in *out (meta held). */
static void set_attrs(struct nvmefs_vol *vol, struct nvmefs_inode *in, const struct stat *attr,
		      int to_set, struct stat *out)
{
	struct timespec now;

	nvmefs_timespec_now(&now);
	if (to_set & NVMEFS_SET_MODE) {
		in->mode = (in->mode & S_IFMT) | (attr->st_mode & 07777);
		nvmefs_inode_note_privs(in);
	}
	if (to_set & NVMEFS_SET_UID)
		in->uid = attr->st_uid;
	nvmefs_inode_fold_wtime(in); /* given times win over an earlier write's */
	if (to_set & NVMEFS_SET_GID)
		in->gid = attr->st_gid;
	set_times(in, attr, to_set, &now);
	if (to_set & NVMEFS_SET_CTIME)
		in->ctime = attr->st_ctim;
	else
		in->ctime = now;
	nvmefs_inode_dirty(vol, in);
	nvmefs_ns_fill_stat(in, out);
}

int nvmefs_ns_setattr(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t ino,
		      const struct stat *attr, int to_set, struct stat *out)
{
	unsigned need = (to_set & NVMEFS_SET_SIZE ? NVMEFS_IGET_EXTENTS : 0) |
			(to_set & NVMEFS_SET_MODE ? NVMEFS_IGET_XATTRS : 0);
	struct nvmefs_inode *in;
	mode_t mode = 0;
	int err;

	/* The reference keeps in across the truncation, done unlocked. */
	pthread_mutex_lock(&vol->lock);
	err = nvmefs_inode_get(vol, ino, need, &in);
	if (!err && in->dead && !(to_set & NVMEFS_SET_SIZE)) {
		/* With the write-back cache the kernel sends a file's times
		 * after its last name and handle are gone; the inode is freed
		 * (nothing to log), so answer with what it was. */
		nvmefs_ns_fill_stat(in, out);
		goto out_put;
	}
	if (!err && in->dead)
		err = -ENOENT;
	if (!err && (to_set & NVMEFS_SET_SIZE))
		nvmefs_ns_wait_push(vol, in);
	if (!err)
		err = may_setattr(vol, in, to_set);
	if (!err)
		mode = in->mode; /* its type never changes */
	pthread_mutex_unlock(&vol->lock);
	if (!err)
		err = nvmefs_ns_may_change(vol);
	if (!err && (to_set & NVMEFS_SET_SIZE)) {
		if (S_ISDIR(mode))
			err = -EISDIR;
		else if (!S_ISREG(mode))
			err = -EINVAL;
		else
			err = nvmefs_ns_truncate_locked(vol, in, (uint64_t)attr->st_size);
	}
	pthread_mutex_lock(&vol->lock);
	if (!err && (to_set & NVMEFS_SET_MODE))
		err = chmod_acl(vol, in, attr->st_mode);
	if (!err)
		set_attrs(vol, in, attr, to_set, out);
	/* The kernel sends the mode it computed with the size, but FUSE's rule
	 * keeps a non-executable setgid that Linux 6.2+ takes from a caller
	 * outside the file's group. */
	if (!err && cred && (to_set & NVMEFS_SET_SIZE)) {
		mode_t kill = privs_to_kill(in, cred);

		if (kill) {
			in->mode &= ~kill;
			nvmefs_inode_note_privs(in);
			nvmefs_inode_dirty(vol, in);
			nvmefs_ns_fill_stat(in, out);
		}
	}
out_put:
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return err;
}

int nvmefs_ns_readlink(struct nvmefs_vol *vol, uint64_t ino, char **target)
{
	struct nvmefs_inode *in;
	int ret;

	*target = NULL;
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, 0, &in);
	if (!ret && !in->target)
		ret = -EINVAL;
	else if (!ret && !(*target = strdup(in->target)))
		ret = -ENOMEM;
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

static bool ts_le(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec <= b->tv_nsec);
}

/* Whether no read moves an atime of vol: noatime, or mounted read-only. */
static bool no_atime(struct nvmefs_vol *vol)
{
	/* A remount may change the policy (nvmefs_vol_remount). */
	return nvmefs_ns_read_only(vol) ||
	       __atomic_load_n(&vol->opts.atime, __ATOMIC_RELAXED) == NVMEFS_ATIME_NOATIME;
}

/* Whether a read of in at now moves its atime (meta held): the volume's
 * policy and the file's noatime flag, then relatime's rule (an atime not
 * after the mtime or the ctime, overwrites in place counted, or a day
 * old). */
static bool read_moves_atime(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			     const struct timespec *now)
{
	if (no_atime(vol) || in->dead || (in->flags & NVMEFS_IFL_NOATIME))
		return false;
	nvmefs_inode_fold_wtime(in);
	return __atomic_load_n(&vol->opts.atime, __ATOMIC_RELAXED) == NVMEFS_ATIME_STRICTATIME ||
	       ts_le(&in->atime, &in->mtime) || ts_le(&in->atime, &in->ctime) ||
	       now->tv_sec - in->atime.tv_sec >= 24 * 3600;
}

/* FUSE leaves atime to us, under the mount's policy (vol->opts.atime):
 * relatime updates it when it is not newer than mtime or ctime, or a day
 * old, so reads rarely dirty the inode; strictatime on every read; noatime
 * never (generic/120). */
void nvmefs_ns_touch_atime(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	struct timespec now;

	if (no_atime(vol))
		return;
	nvmefs_timespec_now(&now);
	pthread_mutex_lock(&vol->lock);
	if (read_moves_atime(vol, in, &now)) {
		in->atime = now;
		nvmefs_inode_dirty(vol, in);
	}
	pthread_mutex_unlock(&vol->lock);
}

void nvmefs_ns_note_read(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			 struct nvmefs_read_note *note)
{
	uint64_t gen = atomic_load_explicit(&in->attr_gen, memory_order_acquire) + 1;
	unsigned policy = __atomic_load_n(&vol->opts.atime, __ATOMIC_RELAXED);
	struct timespec now;

	if (policy == NVMEFS_ATIME_NOATIME)
		return;
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	/* strictatime: every read (the note's shortcut is relatime's). */
	if (policy != NVMEFS_ATIME_STRICTATIME &&
	    gen == atomic_load_explicit(&note->gen, memory_order_relaxed) &&
	    now.tv_sec - atomic_load_explicit(&note->sec, memory_order_relaxed) < 24 * 3600)
		return;
	nvmefs_ns_touch_atime(vol, in);
	atomic_store_explicit(&note->gen, atomic_load(&in->attr_gen) + 1, memory_order_relaxed);
	atomic_store_explicit(&note->sec, now.tv_sec, memory_order_relaxed);
}

/* Why a push of in (meta held) must not start: -EFBIG (empty, or more
 * than max bytes), -EBUSY (another push holds it, or handles other than
 * the opens expected); 0: it starts, and holds the file until
 * push_end_locked (every other open and truncation waits). */
static int push_start_locked(struct nvmefs_inode *in, uint64_t max, uint32_t opens, uint64_t *size)
{
	if (in->size == 0 || in->size > max)
		return -EFBIG;
	if (in->opens != opens || in->pushing)
		return -EBUSY;
	in->pushing = true;
	in->push_forgotten = in->forgotten;
	*size = in->size;
	return 0;
}

/* A push of in ends (meta held); stored: its data went into the kernel's
 * cache. True when the data is there still: unless the kernel forgot the
 * inode since the push began (a FORGET takes the flags back under meta
 * too) and looked it up again, the store having gone into the old inode,
 * whose pages went with it. */
static bool push_end_locked(struct nvmefs_vol *vol, struct nvmefs_inode *in, bool stored)
{
	bool kept = stored && in->forgotten == in->push_forgotten;

	if (kept)
		atomic_store(&in->kernel_pages, true);
	in->pushing = false;
	pthread_cond_broadcast(&vol->push_cond);
	return kept;
}

int nvmefs_ns_push_begin(struct nvmefs_vol *vol, uint64_t ino, uint64_t max,
			 struct nvmefs_inode **out, uint64_t *size)
{
	struct nvmefs_inode *in;
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_LIVE | NVMEFS_IGET_EXTENTS, &in);
	if (!ret && !S_ISREG(in->mode))
		ret = -EINVAL;
	else if (!ret && atomic_load(&in->kernel_pages))
		ret = -EEXIST;
	else if (!ret)
		ret = push_start_locked(in, max, 0, size);
	if (!ret) {
		in->opens++; /* kept as by a handle: nvmefs_ns_release */
		*out = in;
	}
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

void nvmefs_ns_push_end(struct nvmefs_vol *vol, struct nvmefs_inode *in, bool stored)
{
	uint64_t ino = in->ino;

	pthread_mutex_lock(&vol->lock);
	/* The next open notes the read the push stands for. */
	if (push_end_locked(vol, in, stored))
		atomic_store(&in->pushed, true);
	pthread_mutex_unlock(&vol->lock);
	nvmefs_ns_release(vol, ino);
}

int nvmefs_ns_open_push_begin(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t max,
			      uint64_t *size)
{
	struct timespec now;
	int ret;

	nvmefs_timespec_now(&now);
	pthread_mutex_lock(&vol->lock);
	ret = read_moves_atime(vol, in, &now) ? -EAGAIN : push_start_locked(in, max, 1, size);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

void nvmefs_ns_open_push_end(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	pthread_mutex_lock(&vol->lock);
	push_end_locked(vol, in, false);
	pthread_mutex_unlock(&vol->lock);
}

/* ---- extended attributes ---- */

/* chattr's rule on xattrs, as the VFS's xattr_permission (meta held). */
static int may_xattr(const struct nvmefs_inode *in)
{
	return in->flags & (NVMEFS_IFL_IMMUTABLE | NVMEFS_IFL_APPEND) ? -EPERM : 0;
}

static int xattr_name_check(const struct nvmefs_vol *vol, const char *name)
{
	if (strlen(name) > NVMEFS_XATTR_NAME_MAX)
		return -ERANGE;
	if (!strncmp(name, "system.", 7) && !(vol->posix_acl && nvmefs_acl_name(name)))
		return -EOPNOTSUPP; /* only the kernel's ACLs, when it checks them */
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

static int log_xattr_del(struct nvmefs_vol *vol, uint64_t ino, const char *name)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_XATTR_DEL};

	r.xattr.ino = ino;
	r.xattr.name = name;
	r.xattr.name_len = (uint16_t)strlen(name);
	return nvmefs_journal_log(vol, &r);
}

/*
 * An ACL's part of a set on in (meta held): whether its value is kept and
 * the mode it leaves in *mode, as posix_acl_update_mode() (namei.h). A
 * header alone stands for no ACL: it goes, as the kernel's
 * posix_acl_from_xattr() makes of it.
 */
static int acl_update_mode(const struct nvmefs_cred *cred, const struct nvmefs_inode *in,
			   const char *name, const void *value, size_t size, bool *keep,
			   mode_t *mode)
{
	bool access = !strcmp(name, NVMEFS_ACL_ACCESS);

	*mode = in->mode;
	*keep = size > NVMEFS_ACL_HDR;
	if (S_ISLNK(in->mode))
		return -EOPNOTSUPP;
	if (!access && !S_ISDIR(in->mode))
		return -EACCES;
	if (!access || !*keep)
		return 0;
	*keep = nvmefs_acl_equiv_mode(value, size, mode) > 0;
	if (cred && !in_group_or_root(cred, in->gid))
		*mode &= ~(mode_t)S_ISGID;
	return 0;
}

int nvmefs_xattr_set(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t ino,
		     const char *name, const void *value, size_t size, int flags)
{
	bool acl = nvmefs_acl_name(name), keep = true;
	struct nvmefs_inode *in;
	struct nvmefs_xattr *x;
	mode_t mode = 0;
	int ret = xattr_name_check(vol, name);

	if (!ret && size > NVMEFS_XATTR_VALUE_MAX)
		ret = -E2BIG;
	if (!ret && acl)
		ret = nvmefs_acl_check(value, size);
	if (!ret)
		ret = nvmefs_ns_may_change(vol);
	if (ret)
		return ret;
	if (!strcmp(name, NVMEFS_LAYOUT_XATTR))
		return nvmefs_xlayout_set(vol, ino, value, size);
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_LIVE | NVMEFS_IGET_XATTRS, &in);
	x = in ? find_xattr(in, name) : NULL;
	if (!ret)
		ret = may_xattr(in);
	if (!ret)
		mode = in->mode;
	if (!ret && (flags & XATTR_CREATE) && x)
		ret = -EEXIST;
	else if (!ret && (flags & XATTR_REPLACE) && !x)
		ret = -ENODATA;
	else if (!ret && acl)
		ret = acl_update_mode(cred, in, name, value, size, &keep, &mode);
	if (!ret && keep &&
	    vol->meta_bytes + NVMEFS_XATTR_COST + strlen(name) + size > vol->meta_cap)
		ret = -ENOSPC;
	if (!ret && keep)
		ret = nvmefs_ns_log_xattr_set(vol, ino, name, value, size);
	else if (!ret && x)
		ret = log_xattr_del(vol, ino, name);
	if (!ret) {
		in->mode = mode;
		nvmefs_inode_note_privs(in);
		nvmefs_timespec_now(&in->ctime);
		nvmefs_inode_dirty(vol, in);
	}
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

ssize_t nvmefs_xattr_get(struct nvmefs_vol *vol, uint64_t ino, const char *name, void *buf,
			 size_t size)
{
	struct nvmefs_inode *in;
	struct nvmefs_xattr *x = NULL;
	ssize_t ret = xattr_name_check(vol, name);

	if (!strcmp(name, NVMEFS_LAYOUT_XATTR)) { /* virtual, and not listed */
		char text[128];
		int n = nvmefs_xlayout_get(vol, ino, text, sizeof(text));

		if (n < 0 || !size)
			return n;
		if (size < (size_t)n)
			return -ERANGE;
		memcpy(buf, text, (size_t)n);
		return n;
	}
	if (ret)
		return ret == -EOPNOTSUPP ? -ENODATA : ret;
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_XATTRS, &in);
	x = in ? find_xattr(in, name) : NULL;
	if (!ret && !x)
		ret = -ENODATA;
	else if (!ret && size && x->value_len > size)
		ret = -ERANGE;
	else if (!ret)
		ret = x->value_len;
	if (ret > 0 && size)
		memcpy(buf, x->value, x->value_len);
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

ssize_t nvmefs_xattr_list(struct nvmefs_vol *vol, uint64_t ino, char *buf, size_t size)
{
	struct nvmefs_inode *in;
	size_t total = 0;
	ssize_t ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_XATTRS, &in);
	if (ret)
		goto out;
	for (unsigned i = 0; i < in->nxattrs; i++)
		total += in->xattrs[i].name_len + 1;
	ret = (ssize_t)total;
	if (!size)
		goto out;
	if (total > size) {
		ret = -ERANGE;
		goto out;
	}
	for (size_t i = 0, pos = 0; i < in->nxattrs; i++) {
		memcpy(buf + pos, in->xattrs[i].name, in->xattrs[i].name_len + 1);
		pos += in->xattrs[i].name_len + 1;
	}
out:
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

int nvmefs_xattr_remove(struct nvmefs_vol *vol, uint64_t ino, const char *name)
{
	struct nvmefs_inode *in;
	int ret = xattr_name_check(vol, name);

	if (!ret)
		ret = nvmefs_ns_may_change(vol);
	if (!ret && !strcmp(name, NVMEFS_LAYOUT_XATTR))
		ret = nvmefs_xlayout_set(vol, ino, NULL, 0);
	if (ret || !strcmp(name, NVMEFS_LAYOUT_XATTR))
		return ret == -EOPNOTSUPP ? -ENODATA : ret;
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_LIVE | NVMEFS_IGET_XATTRS, &in);
	if (!ret)
		ret = may_xattr(in);
	/* Removing an ACL there is not succeeds, as on ext4 and XFS
	 * (setfacl -k on a directory without a default). */
	if (!ret && !find_xattr(in, name))
		ret = nvmefs_acl_name(name) ? 1 : -ENODATA;
	if (!ret)
		ret = log_xattr_del(vol, ino, name);
	if (!ret) {
		nvmefs_timespec_now(&in->ctime);
		nvmefs_inode_dirty(vol, in);
	}
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret > 0 ? 0 : ret;
}

/* ---- file attribute flags (chattr) ---- */

int nvmefs_ns_getflags(struct nvmefs_vol *vol, uint64_t ino, uint32_t *flags)
{
	struct nvmefs_inode *in;
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, 0, &in);
	if (!ret && !S_ISREG(in->mode) && !S_ISDIR(in->mode))
		ret = -ENOTTY;
	if (!ret)
		*flags = in->flags;
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

/* Whether cred may change in's flags from in->flags to flags (meta held). */
static int may_setflags(const struct nvmefs_inode *in, const struct nvmefs_cred *cred,
			uint32_t flags)
{
	const uint32_t guarded = NVMEFS_IFL_IMMUTABLE | NVMEFS_IFL_APPEND;
	uint32_t changed = in->flags ^ flags;

	if (!S_ISREG(in->mode) && !S_ISDIR(in->mode))
		return -ENOTTY;
	if (flags & ~NVMEFS_IFL_ALL)
		return -EOPNOTSUPP;
	if (cred->uid != 0 && cred->uid != in->uid)
		return -EPERM; /* the VFS's inode_owner_or_capable */
	if ((changed & guarded) && cred->uid != 0)
		return -EPERM; /* CAP_LINUX_IMMUTABLE */
	/* ext4's rule: an inode that stays immutable changes in nothing. */
	if ((in->flags & flags & NVMEFS_IFL_IMMUTABLE) && changed)
		return -EPERM;
	return 0;
}

int nvmefs_ns_setflags(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t ino,
		       uint32_t flags)
{
	struct nvmefs_inode *in;
	int ret;

	ret = nvmefs_ns_may_change(vol);
	if (ret)
		return ret;
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_LIVE, &in);
	if (!ret)
		ret = may_setflags(in, cred, flags);
	if (!ret && in->flags != flags) {
		/* A WRITE reads them without meta (data_io.c write_start). */
		__atomic_store_n(&in->flags, flags, __ATOMIC_RELAXED);
		nvmefs_timespec_now(&in->ctime);
		nvmefs_inode_dirty(vol, in);
	}
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

/* ---- what a write takes away ---- */

/*
 * What a write takes away, as Linux's file_remove_privs(): file capabilities
 * (security.capability) whoever writes, and for a process without
 * CAP_FSETID (uid 0 stands for it) setuid, and setgid when the group may
 * execute. The kernel does this itself before writes through the page cache
 * (it asks for the capability with GETXATTR and removes it, and clears the
 * bits with SETATTR), but not for direct_io writes: libfuse 3.14 hands us
 * those without the kill-suid flag, and the capability is left to us.
 */
int nvmefs_ns_kill_privs(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			 const struct nvmefs_cred *cred)
{
	static const char caps[] = "security.capability";
	bool changed = false;
	mode_t kill;
	int ret = 0;

	/* Most files hold nothing to take away: no lock for them. */
	if (!atomic_load_explicit(&in->privs, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&vol->lock);
	if (in->flags & NVMEFS_IFL_IMMUTABLE) {
		/* Nothing changes; the write or fallocate is refused too. */
		pthread_mutex_unlock(&vol->lock);
		return -EPERM;
	}
	kill = privs_to_kill(in, cred);
	if (kill) {
		in->mode &= ~kill;
		nvmefs_inode_note_privs(in);
		changed = true;
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
	return ret ? ret : kill != 0;
}

/* ---- a file's space, the volume's ---- */

int nvmefs_ns_fallocate(struct nvmefs_vol *vol, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
	struct nvmefs_rl_ent rl;
	struct nvmefs_inode *in;
	int ret;

	ret = nvmefs_ns_may_change(vol);
	if (ret)
		return ret;
	/* The reference keeps in across the change, done unlocked. */
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_LIVE | NVMEFS_IGET_EXTENTS, &in);
	if (!ret && !S_ISREG(in->mode))
		ret = -ENODEV;
	/* As the VFS's vfs_fallocate: only plain allocation on an
	 * append-only file, nothing on an immutable one. */
	else if (!ret && ((in->flags & NVMEFS_IFL_IMMUTABLE) ||
			  ((in->flags & NVMEFS_IFL_APPEND) && (mode & ~FALLOC_FL_KEEP_SIZE))))
		ret = -EPERM;
	pthread_mutex_unlock(&vol->lock);
	if (!ret && len == 0)
		ret = -EINVAL;
	if (!ret) {
		nvmefs_rl_lock(&in->io_lock, &rl, 0, NVMEFS_RL_ALL, true);
		ret = nvmefs_data_fallocate(vol, in, mode, off, len);
		nvmefs_rl_unlock(&in->io_lock, &rl);
	}
	if (in)
		nvmefs_ns_put(vol, in);
	return ret;
}

void nvmefs_ns_statfs(struct nvmefs_vol *vol, struct statvfs *st)
{
	uint64_t per_file = nvmefs_meta_cost_inode(16), room;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&vol->lock);
	room = vol->meta_cap > vol->meta_bytes ? vol->meta_cap - vol->meta_bytes : 0;
	st->f_bsize = NVMEFS_BLOCK;
	st->f_frsize = NVMEFS_BLOCK;
	st->f_blocks = vol->total_bytes / NVMEFS_BLOCK;
	/* Space released but waiting for its commit counts as free: a write
	 * that needs it commits first (data.c). */
	st->f_bfree = (vol->free_bytes + vol->pending_bytes) / NVMEFS_BLOCK;
	st->f_bavail = st->f_bfree;
	st->f_files = vol->ninodes + room / per_file;
	st->f_ffree = room / per_file;
	st->f_favail = st->f_ffree;
	st->f_namemax = NVMEFS_NAME_MAX;
	pthread_mutex_unlock(&vol->lock);
}

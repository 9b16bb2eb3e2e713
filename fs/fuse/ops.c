// SPDX-License-Identifier: MIT
/*
 * The FUSE low-level operations on names, attributes, directories and
 * extended attributes, the INIT settings and the operations table (a
 * file's OPEN, READ, WRITE and the like are in ops_file.c; ops_i.h holds
 * what both share). Each handler decodes the request, checks what is the
 * door's to check (names' lengths, the control files), calls the core
 * (fs/core/namei.h), which changes the metadata under its own locks and
 * holds the POSIX rules the kernel leaves to the filesystem, and sends
 * exactly one reply. Permissions are the kernel's (default_permissions),
 * POSIX ACLs' too; the mode and inheritance they imply are the core's.
 * An entry reply counts a lookup: the kernel's count keeps an inode in
 * memory after its last link goes (FORGET gives it back); its space goes
 * at the last close.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "ops_i.h"
#include "xlayout_i.h"

#include <dirent.h>
#include <errno.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Linux 6.6's uapi header has it; Debian 12's (FUSE 7.38) does not. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

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
			nvmefs_sa_lookup(parent, cookie, entries, st.st_ino, pid);
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

/* ---- directories ---- */

/*
 * An open directory's handle (fi->fh; 0 for the control directory): where
 * its walk ends (nvmefs_ns_readdir's end). The kernel sends one READDIR of
 * a handle at a time (it holds the file's position lock).
 */
struct dir_handle {
	uint64_t end;
};

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nvmefs_vol *vol = VOL(req);
	struct dir_handle *h;
	int err;

	fi->fh = 0;
	if (nvmefs_ctl_ino(ino)) {
		if (ino == NVMEFS_CTL_DIR)
			fuse_reply_open(req, fi);
		else
			fuse_reply_err(req, ENOTDIR);
		return;
	}
	err = nvmefs_ns_opendir(vol, ino);
	h = err ? NULL : calloc(1, sizeof(*h));
	if (!err && !h)
		err = -ENOMEM;
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi))
		free(h); /* not taken: no RELEASEDIR comes */
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

/*
 * Give back the lookup counts of a READDIRPLUS reply's entries (buf, len
 * bytes) that the kernel will not take: every one when the reply was not
 * taken (the request was aborted; each entry counted one lookup), else the
 * statahead thread's tripwires, whose node id is cleared.
 *
 * The tripwires (fs/fuse/statahead.c): one entry in NVMEFS_SA_TRIP goes
 * without its attributes (node id 0: the kernel makes no dentry of it). A
 * walk that finds the rest of the batch in the kernel's cache sends no
 * request at all, so without these its first LOOKUP came at the batch's
 * end, and each next job started where the walk already was: the walk
 * looked up what it passed while the job's READDIRPLUS was answered (a
 * quarter to half of 3,000 files, when a plain os.stat walk outran the
 * jobs). Their LOOKUPs show how far it has got, and the next job starts a
 * window ahead. They are chosen by cookie (nvmefs_sa_trip, from the
 * request's offset off), not by place in the reply: a reply is 4 KiB (some
 * 25 entries) before Linux 6.16, which sizes it from getdents' buffer.
 */
static void give_back_entries(struct nvmefs_vol *vol, char *buf, size_t len, bool all, uint64_t off)
{
	uint64_t prev = off;

	for (size_t o = 0; o + FUSE_NAME_OFFSET_DIRENTPLUS <= len;) {
		struct fuse_direntplus *d = (struct fuse_direntplus *)(void *)(buf + o);
		uint64_t ino = d->entry_out.nodeid, cookie = d->dirent.off;
		bool trip = nvmefs_sa_trip(prev, cookie);

		o += FUSE_DIRENTPLUS_SIZE(d);
		prev = cookie;
		if (!ino || (!all && !trip))
			continue;
		nvmefs_ns_forget(vol, ino, 1);
		if (!all)
			d->entry_out.nodeid = 0;
	}
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus,
		       const struct fuse_file_info *fi)
{
	struct dir_handle *h = (struct dir_handle *)(uintptr_t)fi->fh;
	struct nvmefs_vol *vol = VOL(req);
	struct dirbuf db = {.req = req, .buf = malloc(size), .size = size, .plus = plus};
	bool counted = plus && ino != NVMEFS_CTL_DIR; /* each entry a lookup */
	int err = 0;

	if (!db.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (ino == NVMEFS_CTL_DIR) {
		db.pos = nvmefs_ctl_readdir(req, vol, db.buf, size, off, plus);
	} else {
		err = nvmefs_ns_readdir(vol, ino, off, plus, h ? &h->end : NULL, add_entry, &db);
		if (!err && plus && nvmefs_sa_thread(fuse_req_ctx(req)->pid))
			give_back_entries(vol, db.buf, db.pos, false, (uint64_t)off);
	}
	if (err) {
		fuse_reply_err(req, -err);
	} else if (counted && lose_reply(&vol->test_lose_readdirs)) {
		fuse_reply_err(req, EINTR);
		give_back_entries(vol, db.buf, db.pos, true, 0);
	} else if (fuse_reply_buf(req, db.buf, db.pos) && counted) {
		/* On /dev/fuse: the kernel refused it (aborted). On io_uring the
		 * reply is committed and the kernel's answer comes later: a
		 * refusal there (teardown only) is not seen here. */
		give_back_entries(vol, db.buf, db.pos, true, 0);
	}
	free(db.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	if (nvmefs_sa_self(fuse_req_ctx(req)->pid))
		fuse_reply_buf(req, NULL, 0); /* statahead wants READDIRPLUS only */
	else
		do_readdir(req, ino, size, off, false, fi);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true, fi);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	free((struct dir_handle *)(uintptr_t)fi->fh);
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
	struct nvmefs_cred cred = req_cred(req);

	if (refuse_ctl(req, ino, 0, NULL))
		return;
	if (vol->test_ctl && ino == FUSE_ROOT_ID && !strcmp(name, NVMEFS_TEST_CTL_XATTR)) {
		fuse_reply_err(req, -vol->test_ctl(vol, value, size));
		return;
	}
	fuse_reply_err(req, -nvmefs_xattr_set(vol, &cred, ino, name, value, size, flags));
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
	 * sending SETATTR; where it leaves that to us (direct_io writes,
	 * O_TRUNC opens, fallocate: kill_privs in ops_i.h), we do it. */
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
	/* Directories' attribute flags come as ioctls on them (ioctl_flags). */
	if (conn->capable & FUSE_CAP_IOCTL_DIR)
		conn->want |= FUSE_CAP_IOCTL_DIR;
	/* POSIX ACLs: the kernel checks permissions from the ACL it reads
	 * with GETXATTR (and caches), and sends setfacl's as SETXATTR
	 * (fs/fuse/acl.c fuse_set_acl), leaving the mode to us; it forgets
	 * its copy after SETATTR, so chmod's change of the ACL is ours too.
	 * It still takes the umask off a new inode's mode itself unless
	 * FUSE_DONT_MASK (fs/fuse/dir.c, fc->dont_mask; FUSE_POSIX_ACL alone
	 * does not set it), which a default ACL's inheritance needs: the
	 * core applies the default ACL or the umask (namei.c make_node). Both
	 * or neither. With it the kernel also sets default_permissions,
	 * which main.c passes anyway. */
	vol->posix_acl =
		(conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK);
	if (vol->posix_acl)
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	else
		conn->want &= ~(FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK);
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
		nvmefs_devio_init_flags(FUSE_DIRECT_IO_ALLOW_MMAP);
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
}

/* ---- file attribute flags (chattr, lsattr, xfs_io's chattr) ---- */

/* The fsxattr flags (FS_XFLAG_*) that stand for the core's NVMEFS_IFL_*. */
static const struct {
	uint32_t ifl, xflag;
} xflags_map[] = {
	{NVMEFS_IFL_IMMUTABLE, FS_XFLAG_IMMUTABLE},
	{NVMEFS_IFL_APPEND, FS_XFLAG_APPEND},
	{NVMEFS_IFL_NODUMP, FS_XFLAG_NODUMP},
	{NVMEFS_IFL_NOATIME, FS_XFLAG_NOATIME},
};
_Static_assert(NVMEFS_IFL_IMMUTABLE == FS_IMMUTABLE_FL && NVMEFS_IFL_APPEND == FS_APPEND_FL &&
		       NVMEFS_IFL_NODUMP == FS_NODUMP_FL && NVMEFS_IFL_NOATIME == FS_NOATIME_FL,
	       "the core's file attribute flags are FS_IOC_SETFLAGS's");

#define NXFLAGS (sizeof(xflags_map) / sizeof(xflags_map[0]))

/* FS_IOC_GETFLAGS or FS_IOC_FSGETXATTR: ino's flags, as an int or an fsxattr. */
static void ioctl_getflags(fuse_req_t req, fuse_ino_t ino, unsigned cmd, size_t out_len)
{
	struct fsxattr fx;
	uint32_t f = 0;
	int err = out_len < (cmd == FS_IOC_GETFLAGS ? sizeof(f) : sizeof(fx))
			  ? -EINVAL
			  : nvmefs_ns_getflags(VOL(req), ino, &f);

	if (err) {
		fuse_reply_err(req, -err);
	} else if (cmd == FS_IOC_GETFLAGS) {
		fuse_reply_ioctl(req, 0, &f, sizeof(f));
	} else {
		memset(&fx, 0, sizeof(fx));
		for (size_t i = 0; i < NXFLAGS; i++)
			if (f & xflags_map[i].ifl)
				fx.fsx_xflags |= xflags_map[i].xflag;
		fuse_reply_ioctl(req, 0, &fx, sizeof(fx));
	}
}

/* An FS_IOC_FSSETXATTR's fsxattr as the core's flags in *f: nothing but
 * the flags nvmefs has (no extent size hints, no projects), else
 * -EOPNOTSUPP. */
static int fsx_to_flags(struct fsxattr fx, uint32_t *f)
{
	if (fx.fsx_extsize || fx.fsx_projid || fx.fsx_cowextsize)
		return -EOPNOTSUPP;
	*f = 0;
	for (size_t i = 0; i < NXFLAGS; i++) {
		if (fx.fsx_xflags & xflags_map[i].xflag)
			*f |= xflags_map[i].ifl;
		fx.fsx_xflags &= ~xflags_map[i].xflag;
	}
	return fx.fsx_xflags & ~FS_XFLAG_HASATTR ? -EOPNOTSUPP : 0;
}

/*
 * FS_IOC_GETFLAGS and FS_IOC_SETFLAGS (an int), FS_IOC_FSGETXATTR and
 * FS_IOC_FSSETXATTR (a struct fsxattr): how Linux 5.13+ asks a FUSE server
 * for a file's or directory's attribute flags (fs/fuse/ioctl.c's
 * fuse_fileattr_get and fuse_fileattr_set, behind chattr's and lsattr's
 * ioctls, on a handle of its own). The kernel has checked ownership and
 * CAP_LINUX_IMMUTABLE; the core checks them again by uid (namei.h).
 * Returns false for another command.
 */
static bool ioctl_flags(fuse_req_t req, fuse_ino_t ino, unsigned cmd, const void *in, size_t in_len,
			size_t out_len)
{
	struct nvmefs_cred cred = req_cred(req);
	struct fsxattr fx;
	uint32_t f = 0;
	int err;

	switch (cmd) {
	case FS_IOC_GETFLAGS:
	case FS_IOC_FSGETXATTR:
		ioctl_getflags(req, ino, cmd, out_len);
		return true;
	case FS_IOC_SETFLAGS:
		err = in_len < sizeof(f) ? -EINVAL : 0;
		if (!err)
			memcpy(&f, in, sizeof(f));
		break;
	case FS_IOC_FSSETXATTR:
		err = in_len < sizeof(fx) ? -EINVAL : 0;
		if (!err) {
			memcpy(&fx, in, sizeof(fx));
			err = fsx_to_flags(fx, &f);
		}
		break;
	default:
		return false;
	}
	if (!err)
		err = nvmefs_ns_setflags(VOL(req), &cred, ino, f);
	if (err) {
		fuse_reply_err(req, -err);
		return true;
	}
	nvmefs_loop_inval_attr(ino); /* its ctime moved */
	fuse_reply_ioctl(req, 0, NULL, 0);
	return true;
}

/* FS_IOC_SHUTDOWN, the control directory's remount (fs/tools/remount.c)
 * and the attribute flags are ours; everything else (a TCGETS from
 * isatty(), ...) is not a tty: ENOTTY, what the kernel makes of libfuse's
 * ENOSYS. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in, size_t in_len,
		     size_t out_len)
{
	int err = ENOTTY;

	(void)arg;
	(void)fi;
	if (!(flags & FUSE_IOCTL_COMPAT) && !nvmefs_ctl_ino(ino) &&
	    ioctl_flags(req, ino, cmd, in, in_len, out_len))
		return;
	if (!(flags & FUSE_IOCTL_COMPAT))
		err = -nvmefs_ctl_ioctl(VOL(req), ino, cmd, fuse_req_ctx(req)->uid, in, in_len);
	if (err)
		fuse_reply_err(req, err);
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
	.fsyncdir = op_fsyncdir,
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
